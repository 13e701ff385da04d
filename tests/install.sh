#!/bin/sh
# `make installcheck` (also run by `make distcheck`): the installed tree is
# usable like a library's.
#   - the public headers are installed: ovl.h and its parts, ovl/*.h;
#   - pkg-config finds ovl.pc: its version is this package's, and a small
#     program (tests/pkgconfig_demo.c) builds against the installed
#     library with `pkg-config --cflags --libs ovl` alone and runs the
#     installed seed schedule;
#   - the man pages of both tools are installed (where this build makes
#     them), say what --help says and have the sections of their include
#     files (man/*.x); ovl-schedule(5), the schedule language, is installed;
#   - the installed overlap_sim reads the installed schedules (never the
#     source tree's), and looks relative names up in them.
#   - the model backend's machine files are installed (pkgdatadir/machines),
#     and the installed overlap_sim runs on one.
# Exit 77 (skipped) with the reason where a tool it needs is missing.
# Run by Makefile.am's installcheck-local, which passes the install
# directories, CC, PKG_CONFIG and OVL_MAN (yes or no) in the environment.
set -u

: "${PKG_CONFIG:=pkg-config}"
: "${CC:=cc}"
dest=${DESTDIR:-}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" | head -30; }
skip() { echo "SKIP: install.sh: $1"; exit 77; }

command -v "${PKG_CONFIG%% *}" >/dev/null 2>&1 ||
  skip "pkg-config not found ('$PKG_CONFIG'): apt-get install pkg-config"
command -v "${CC%% *}" >/dev/null 2>&1 || skip "no C compiler ('$CC')"
for v in libdir includedir pkgconfigdir bindir mandir pkgdatadir PACKAGE_VERSION; do
  eval "x=\${$v:-}"
  [ -n "$x" ] || { echo "install.sh: $v is not set (run it from make installcheck)"; exit 99; }
done
# Nothing installed: say so once, not as nine failures that each look
# like their own problem.
if [ ! -e "$dest$bindir/overlap_sim" ] && [ ! -e "$dest$pkgconfigdir/ovl.pc" ]; then
  echo "FAIL: nothing is installed under ${dest}${bindir%/bin} (no" \
    "$dest$bindir/overlap_sim, no $dest$pkgconfigdir/ovl.pc): run" \
    "'make install' first, with the same prefix and DESTDIR"
  exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
: >"$tmp/out"

# pkg-config: the installed ovl.pc (under DESTDIR, its paths moved there
# with PKG_CONFIG_SYSROOT_DIR).
PKG_CONFIG_PATH=$dest$pkgconfigdir
PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
if [ -f "$dest$pkgconfigdir/ovl.pc" ] &&
  [ "$($PKG_CONFIG --modversion ovl 2>"$tmp/out")" = "$PACKAGE_VERSION" ] &&
  $PKG_CONFIG --cflags ovl >>"$tmp/out" 2>&1 && $PKG_CONFIG --libs ovl >>"$tmp/out" 2>&1
then ok "pkg-config: ovl.pc installed, version $PACKAGE_VERSION"; else ko "pkg-config: ovl.pc installed, version $PACKAGE_VERSION"; fi

# The public headers: ovl.h and each of its parts (ovl/*.h; a program may
# include one alone).
: >"$tmp/out"
for h in "$srcdir"/include/ovl/*.h; do
  [ -f "$dest$includedir/ovl/${h##*/}" ] || echo "not installed: $dest$includedir/ovl/${h##*/}" >>"$tmp/out"
done
[ -f "$dest$includedir/ovl.h" ] || echo "not installed: $dest$includedir/ovl.h" >>"$tmp/out"
if [ ! -s "$tmp/out" ]; then ok "the public headers are installed: ovl.h, ovl/*.h"
else ko "the public headers are installed: ovl.h, ovl/*.h"; fi

# shellcheck disable=SC2046 # pkg-config's words, split on purpose
if $CC -o "$tmp/demo" "$srcdir/tests/pkgconfig_demo.c" \
    $($PKG_CONFIG --cflags ovl) $($PKG_CONFIG --libs ovl) >"$tmp/out" 2>&1 &&
  LD_LIBRARY_PATH=$dest$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$tmp/demo" "$dest$pkgdatadir/schedules/seed.sched" >"$tmp/out" 2>&1 &&
  grep -q "^libovl $PACKAGE_VERSION: .*/seed\.sched: PASS\$" "$tmp/out"
then ok "a program built with pkg-config --cflags --libs ovl runs the installed seed"
else ko "a program built with pkg-config --cflags --libs ovl runs the installed seed"; fi

# The man pages, made from --help by help2man.
if [ "${OVL_MAN:-no}" = yes ]; then
  for t in overlap_sim overlap_sweep; do
    page=$dest$mandir/man1/$t.1
    if [ -f "$page" ] && grep -q '^\.TH ' "$page" && cp "$page" "$tmp/out" &&
      grep -q "$PACKAGE_VERSION" "$page" &&
      grep -q -- 'Exit status' "$page"
    then ok "man page $t.1 installed"; else ko "man page $t.1 installed"; fi
  done
  if grep -q -- '\\-\\-trials' "$dest$mandir/man1/overlap_sim.1" &&
    grep -q 'OVL_SCHEDULE_PATH' "$dest$mandir/man1/overlap_sim.1" &&
    grep -q 'Avg bus bandwidth' "$dest$mandir/man1/overlap_sweep.1"
  then ok "the man pages say what --help says"; else ko "the man pages say what --help says"; fi
else
  echo "SKIP: man pages of the tools (this build makes none: help2man was not found)"
fi
# The schedule language, made from docs/LANGUAGE.md (by awk: always).
page=$dest$mandir/man5/ovl-schedule.5
if [ -f "$page" ] && grep -q '^\.TH OVL-SCHEDULE "5"' "$page" && cp "$page" "$tmp/out" &&
  grep -q "$PACKAGE_VERSION" "$page" && grep -q 'c_wait_compute' "$page" &&
  grep -q '^\.SH RANKS THAT DIFFER' "$page"
then ok "man page ovl-schedule.5 installed"; else ko "man page ovl-schedule.5 installed"; fi
if [ "${OVL_MAN:-no}" = yes ]; then
  if grep -q '^\.SH EXAMPLES' "$dest$mandir/man1/overlap_sim.1" &&
    grep -q '^\.SH ENVIRONMENT' "$dest$mandir/man1/overlap_sim.1" &&
    grep -q 'ovl\\-schedule' "$dest$mandir/man1/overlap_sim.1" &&
    grep -q '^\.SH EXAMPLES' "$dest$mandir/man1/overlap_sweep.1"
  then ok "the man pages have their include files' sections"
  else ko "the man pages have their include files' sections"; fi
fi

# The installed tool reads the installed schedules, run from anywhere: its
# default and relative names (the tool is built for its prefix, so this
# needs the real install, not a DESTDIR one).
if [ -z "$dest" ]; then
  tool=$bindir/overlap_sim
  if (cd "$tmp" && "$tool" --races) >"$tmp/out" 2>&1 &&
    grep -q "^no races in $pkgdatadir/schedules/seed\\.sched " "$tmp/out" &&
    { (cd "$tmp" && "$tool" --races bad/cross_ring.sched) >"$tmp/out" 2>&1; [ $? -eq 4 ]; } &&
    grep -q "^1 race in $pkgdatadir/schedules/bad/cross_ring\\.sched " "$tmp/out"
  then ok "the installed overlap_sim reads the installed schedules"
  else ko "the installed overlap_sim reads the installed schedules"; fi
else
  echo "SKIP: the installed tool's schedules (DESTDIR install: the tool looks in $pkgdatadir)"
fi

# The machine files (docs/MODEL.md), and a run on one (the real install
# only: the tool is built for its prefix).
if [ -f "$dest$pkgdatadir/machines/h200x1.json" ] &&
  [ -f "$dest$pkgdatadir/machines/h200x2.json" ] &&
  [ -f "$dest$pkgdatadir/machines/h200-8x400g.json" ]
then ok "machine files installed"; else ko "machine files installed"; fi
if [ -z "$dest" ]; then
  if "$bindir/overlap_sim" --backend=model --machine="$pkgdatadir/machines/h200x2.json" \
    -r 2 -n 1 -w 0 >"$tmp/out" 2>&1 &&
    grep -q "(model of h200x2)" "$tmp/out"
  then ok "the installed overlap_sim runs on an installed machine file"
  else ko "the installed overlap_sim runs on an installed machine file"; fi
fi

echo "install.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
