#!/bin/sh
# libovl exports its API and nothing else (issue 22). Three lists must be
# one:
#   - include/ovl.sym, the API kept in the tree (one name a line, sorted,
#     '#' comments);
#   - the functions the public headers (include/ovl.h, include/ovl/*.h)
#     declare, each marked OVL_API;
#   - the dynamic symbols the built shared library defines
#     (nm -D --defined-only on the library libtool made, src/.libs/).
# Each name that is in one and not in another is named. An exported ovl__
# name (an internal function: the library is compiled with
# -fvisibility=hidden) fails even when the list has it. The same list
# serves every build: with the CUDA backend and without, the library
# exports the same names.
#
# A coverage build (configure --enable-coverage) links gcov's runtime,
# libgcov.a, into the library, whose names are exported beside the API:
# those the compiler's libgcov.a defines are dropped from the exports.
#
# Run by `make check` with OVL_BUILDDIR, srcdir, NM, CC, OVL_COVERAGE (yes
# or no) and OVL_VISIBILITY (yes or no: configure found
# -fvisibility=hidden) in the environment.
# Exit 77 (skipped) with the reason where there is nothing to check: no
# shared library (--disable-shared) or a compiler that cannot hide symbols.
set -u

build=${OVL_BUILDDIR:-.}
src=${srcdir:-.}
nm=${NM:-nm}
list=$src/include/ovl.sym
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-symbols.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
LC_ALL=C
export LC_ALL

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
# ko TITLE: a failure, with the lines of $tmp/why under it.
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/why"
}
skip() { echo "SKIP: symbols.sh: $1"; exit 77; }

case ${OVL_VISIBILITY:-} in
  yes) ;;
  no) skip "the compiler cannot hide symbols (-fvisibility=hidden): the library exports everything" ;;
  *) echo "symbols.sh: OVL_VISIBILITY is not set (run it from make check)"; exit 99 ;;
esac
[ -f "$list" ] || { echo "symbols.sh: no $list"; exit 99; }
la=$build/src/libovl.la
[ -f "$la" ] || { echo "symbols.sh: no $la (build first)"; exit 99; }
dlname=$(sed -n "s/^dlname='\(.*\)'\$/\1/p" "$la")
[ -n "$dlname" ] || skip "no shared library in $la (configure --disable-shared)"
so=$build/src/.libs/$dlname
[ -f "$so" ] || { echo "symbols.sh: $la names $so, which does not exist"; exit 99; }

# The list: names only, and its own form (sorted, once each, ovl_ names
# that are not internal).
sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$list" >"$tmp/list"
: >"$tmp/why"
sort -c "$tmp/list" 2>&1 |
  sed 's/.*disorder: /the first name out of order (LC_ALL=C sort): /' >>"$tmp/why"
uniq -d "$tmp/list" | sed 's/^/listed twice: /' >>"$tmp/why"
grep -v '^ovl_[a-z0-9_]*$' "$tmp/list" | sed 's/^/not an ovl_ name: /' >>"$tmp/why"
grep '^ovl__' "$tmp/list" | sed 's/^/an internal name: /' >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "include/ovl.sym: $(wc -l <"$tmp/list") names, sorted, once each"
else ko "include/ovl.sym: sorted, once each, ovl_ names only"; fi
sort -u "$tmp/list" >"$tmp/listed"

# The headers: a declaration starts in column 0 with its return type (a
# comment, a macro, a member or a continued parameter list does not), and
# names its function before the first '('. Every one must be marked
# OVL_API, so that the library exports it.
headers="$src/include/ovl.h"
for h in "$src"/include/ovl/*.h; do
  [ -f "$h" ] && headers="$headers $h"
done
# shellcheck disable=SC2086 # the header paths, split on purpose
grep -H -n '^[A-Za-z_].*\<ovl_[a-z0-9_]*(' $headers |
  grep -v ':[0-9]*:\(typedef\|#\)' >"$tmp/decls"
: >"$tmp/why"
grep -v ':[0-9]*:OVL_API ' "$tmp/decls" |
  sed 's/^\([^:]*:[0-9]*\):\([^(]*\)(.*/\1: \2: declared without OVL_API/' \
  >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "every function the public headers declare is marked OVL_API"
else ko "every function the public headers declare is marked OVL_API"; fi
sed 's/^[^:]*:[0-9]*:\([^(]*\)(.*/\1/; s/.*[^a-z0-9_]\(ovl_[a-z0-9_]*\)$/\1/' \
  "$tmp/decls" | sort -u >"$tmp/declared"
: >"$tmp/why"
comm -23 "$tmp/declared" "$tmp/listed" |
  sed 's/^/declared in a public header, not in include\/ovl.sym: /' >>"$tmp/why"
comm -13 "$tmp/declared" "$tmp/listed" |
  sed 's/^/in include\/ovl.sym, declared in no public header: /' >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "the public headers declare the listed names"
else ko "the public headers declare the listed names"; fi

# The library: every global symbol it defines in its dynamic symbol table
# (a version suffix, name@@V, dropped). The linker's own _init, _fini,
# _edata, _end and __bss_start, which some linkers put there, are no API.
if ! $nm -D --defined-only "$so" >"$tmp/nm" 2>"$tmp/why"; then
  echo "$nm -D --defined-only $so failed" >>"$tmp/why"
  ko "the library's exports (nm)"
  echo "$pass passed, $fail failed"
  exit 1
fi
awk 'NF >= 3 && $2 ~ /^[A-Z]$/ { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" |
  grep -v '^\(_init\|_fini\|_edata\|_end\|__bss_start\)$' |
  sort -u >"$tmp/exported"
if [ "${OVL_COVERAGE:-no}" = yes ]; then
  libgcov=$(${CC:-cc} -print-file-name=libgcov.a)
  if ! $nm -g --defined-only "$libgcov" >"$tmp/gcov-nm" 2>/dev/null; then
    echo "symbols.sh: a coverage build, and no libgcov.a ($libgcov) to read"
    exit 99
  fi
  awk 'NF == 3 { print $3 }' "$tmp/gcov-nm" | sort -u >"$tmp/gcov"
  comm -23 "$tmp/exported" "$tmp/gcov" >"$tmp/exported-api"
  mv "$tmp/exported-api" "$tmp/exported"
fi
: >"$tmp/why"
grep '^ovl__' "$tmp/exported" | sed 's/^/exports an internal symbol: /' >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "$dlname exports no internal (ovl__) symbol"
else ko "$dlname exports no internal (ovl__) symbol ($(wc -l <"$tmp/why") do)"; fi
: >"$tmp/why"
comm -23 "$tmp/exported" "$tmp/listed" |
  sed 's/^/exported, not in include\/ovl.sym: /' >>"$tmp/why"
comm -13 "$tmp/exported" "$tmp/listed" |
  sed 's/^/in include\/ovl.sym, not exported: /' >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "$dlname exports exactly the $(wc -l <"$tmp/listed") names of include/ovl.sym"
else ko "$dlname exports exactly the names of include/ovl.sym"; fi

# cuBLAS is loaded by the cuda backend's first rank (dlopen), never
# linked: its initializers would cost every process, cpu runs included,
# about 80 ms of CPU. No cublas* symbol is left for the dynamic linker.
: >"$tmp/why"
if $nm -D --undefined-only "$so" >"$tmp/undef" 2>>"$tmp/why"; then
  awk '$NF ~ /^cublas/ { print "needs " $NF " from the dynamic linker" }' \
    "$tmp/undef" >>"$tmp/why"
fi
if [ ! -s "$tmp/why" ]; then ok "$dlname does not link cuBLAS (loaded when a cuda rank is made)"
else ko "$dlname does not link cuBLAS (loaded when a cuda rank is made)"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
