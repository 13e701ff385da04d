#!/bin/sh
# The coverage report: the lines and branches of src/ and tools/ that the
# tests ran, from the gcov counters (.gcda) of one or more build trees
# configured with --enable-coverage, after their `make check`. Several
# trees (a plain build and an MPI one, say) must be builds of the same
# source tree, which they are when they were configured from it (VPATH
# builds) or are that tree; their counts are merged. Needs gcovr (Debian:
# apt-get install gcovr), 5.0 or later, and the gcov of the compiler that
# built them.
#
#   tests/coverage.sh [--lines=PCT] [--branches=PCT] [--srcdir=DIR]
#                     [--json=FILE] BUILDDIR...
#
# Prints each file's lines and branches covered (a table, the least
# covered first, sorted by the lines it misses) and the totals, then fails
# (exit 1) when the lines or the branches covered are below PCT percent
# (--lines, --branches; or COVERAGE_LINES, COVERAGE_BRANCHES in the
# environment; 0, the default, checks nothing). The source tree is
# --srcdir, else the one named by the first build tree's Makefile
# (abs_top_srcdir). --json=FILE keeps the merged report (gcovr's JSON, which
# `gcovr -a FILE` reads again, with --html-details=report.html for the
# lines themselves). `make coverage` runs it on its own build tree and
# those of COVERAGE_MORE, with the thresholds of Makefile.am.
#
# What is counted: every source under src/ and tools/ that a build
# compiled, a header's inline functions included; the benchmarks of
# tools/bench/ too (tests/bench_smoke.sh runs them). Where no build tree
# has the cuda backend, src/run/exec_graph.c (graph mode, which only the
# cuda backend has: the cpu backend refuses it before it starts) is left
# out, and the report says so. Branches on lines
# with no code of their own (a closing brace) are left out
# (--exclude-unreachable-branches). A line marked GCOVR_EXCL_LINE (a region
# between GCOVR_EXCL_START and GCOVR_EXCL_STOP), or only its branches with
# GCOVR_EXCL_BR_LINE, is not counted: only for code that no test can reach
# (the failure of an allocation of a few bytes), and said where it is.
set -u

me=coverage.sh
lines=${COVERAGE_LINES:-0}
branches=${COVERAGE_BRANCHES:-0}
src=
json=
usage() {
  echo "usage: tests/coverage.sh [--lines=PCT] [--branches=PCT] [--srcdir=DIR] [--json=FILE] BUILDDIR..." >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --lines=*) lines=${1#*=} ;;
    --branches=*) branches=${1#*=} ;;
    --srcdir=*) src=${1#*=} ;;
    --json=*) json=${1#*=} ;;
    --help|-h) sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) echo "$me: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 1 ] || usage
for pct in "$lines" "$branches"; do
  case $pct in
    ''|*[!0-9.]*|*.*.*) echo "$me: a threshold is a percentage, 0 to 100: '$pct'" >&2; exit 2 ;;
  esac
done

command -v gcovr >/dev/null 2>&1 || {
  echo "$me: gcovr not found (Debian: apt-get install gcovr)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || {
  echo "$me: python3 not found (gcovr needs it too)" >&2; exit 2; }

for b in "$@"; do
  [ -f "$b/Makefile" ] || { echo "$me: $b: not a build tree (no Makefile)" >&2; exit 2; }
  grep -q '^OVL_COVERAGE = yes' "$b/Makefile" || {
    echo "$me: $b: not configured with --enable-coverage" >&2; exit 2; }
done
if [ -z "$src" ]; then
  src=$(sed -n 's/^abs_top_srcdir = //p' "$1/Makefile")
fi
[ -f "$src/include/ovl.h" ] || { echo "$me: $src: not the source tree" >&2; exit 2; }
src=$(cd "$src" && pwd -P)
# The source tree as a regular expression (gcovr's filters are ones).
src_re=$(printf '%s' "$src" | sed 's/[][\.*^$+?(){}|]/\\&/g')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-coverage.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# One tracefile per build tree. gcov runs in parallel (2 at a time, or
# COVERAGE_JOBS); --filter keeps src/ and tools/ of the source tree (the
# suites, tests/, are not counted, nor what a test compiles in a scratch
# directory).
jobs=${COVERAGE_JOBS:-2}
cuda=no
for b in "$@"; do
  if grep -q '^OVL_CUDA = yes' "$b/Makefile"; then cuda=yes; fi
done
excludes=
left_out=
if [ "$cuda" = no ]; then
  excludes="$src_re/src/run/exec_graph\\.c"
  left_out="src/run/exec_graph.c (graph mode: only the cuda backend has it, and no build tree has the cuda backend)"
fi
exclude_args=
for e in $excludes; do
  exclude_args="$exclude_args --exclude $e"
done
n=0
adds=
for b in "$@"; do
  n=$((n + 1))
  ab=$(cd "$b" && pwd -P)
  if ! find "$ab" -name '*.gcda' -print | grep -q .; then
    echo "$me: $b: no counters (.gcda): run make check there first" >&2
    exit 2
  fi
  # shellcheck disable=SC2086 # the --exclude pairs, split on purpose
  if ! gcovr -j "$jobs" -r "$src" --object-directory "$ab" \
      --filter "$src_re/src/" --filter "$src_re/tools/" $exclude_args \
      --exclude-unreachable-branches \
      --json "$tmp/build$n.json" "$ab" >"$tmp/gcovr$n.log" 2>&1; then
    echo "$me: gcovr failed on $b:" >&2
    cat "$tmp/gcovr$n.log" >&2
    exit 2
  fi
  adds="$adds -a $tmp/build$n.json"
done
# The functions' entries are dropped before the merge: a function defined
# twice in a source, once for each build (src/procs/procs.c with MPI and
# without), has two lines, which gcovr 5 cannot merge. Lines and branches
# merge by line.
python3 - "$tmp"/build*.json <<'EOF'
import json, sys
for name in sys.argv[1:]:
    with open(name) as f:
        d = json.load(f)
    for f in d["files"]:
        f["functions"] = []
    with open(name, "w") as f:
        json.dump(d, f)
EOF
# shellcheck disable=SC2086 # the -a pairs, split on purpose
if ! gcovr -r "$src" $adds --json "$tmp/merged.json" \
    --json-summary "$tmp/summary.json" >"$tmp/merge.log" 2>&1; then
  echo "$me: gcovr could not merge the reports:" >&2
  cat "$tmp/merge.log" >&2
  exit 2
fi
[ -z "$json" ] || cp "$tmp/merged.json" "$json" || exit 2

python3 - "$tmp/summary.json" "$lines" "$branches" "$#" "$left_out" <<'EOF'
import json, sys
summary, min_lines, min_branches, ntrees, left_out = sys.argv[1:6]
with open(summary) as f:
    s = json.load(f)

def pct(covered, total):
    return 100.0 * covered / total if total else 100.0

files = s["files"]
# The least covered first: most lines missed, then most branches missed.
files.sort(key=lambda f: (-(f["line_total"] - f["line_covered"]),
                          -(f["branch_total"] - f["branch_covered"]),
                          f["filename"]))
w = max([len(f["filename"]) for f in files] + [len("file")])
print("coverage of src/ and tools/ (%s build tree%s merged)"
      % (ntrees, "" if ntrees == "1" else "s"))
print("%-*s  %21s  %21s" % (w, "file", "lines", "branches"))
for f in files:
    print("%-*s  %6.1f%% %6d/%-6d  %6.1f%% %6d/%-6d" % (
        w, f["filename"],
        pct(f["line_covered"], f["line_total"]), f["line_covered"],
        f["line_total"],
        pct(f["branch_covered"], f["branch_total"]), f["branch_covered"],
        f["branch_total"]))
lc, lt = s["line_covered"], s["line_total"]
bc, bt = s["branch_covered"], s["branch_total"]
lp, bp = pct(lc, lt), pct(bc, bt)
print("%-*s  %6.1f%% %6d/%-6d  %6.1f%% %6d/%-6d" % (
    w, "TOTAL (%d files)" % len(files), lp, lc, lt, bp, bc, bt))
if left_out:
    print("left out: " + left_out)
bad = []
if lp < float(min_lines):
    bad.append("lines %.2f%% < %s%%" % (lp, min_lines))
if bp < float(min_branches):
    bad.append("branches %.2f%% < %s%%" % (bp, min_branches))
print("lines: %.2f%% (at least %s%%), branches: %.2f%% (at least %s%%)"
      % (lp, min_lines, bp, min_branches))
if bad:
    print("FAIL: coverage below the threshold: " + ", ".join(bad))
    sys.exit(1)
EOF
