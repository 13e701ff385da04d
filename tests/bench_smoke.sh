#!/bin/sh
# The benchmarks of tools/bench/ (race_bench, check_bench, ref_bench), each
# on a small input: it runs, prints its figures in its own shape with the
# findings its pattern must give (the seed and the generated pipeline are
# clean, the random program races), and refuses bad arguments with its
# usage or the reason. What they measure is not checked (timing); that
# they still work is. About a tenth of a second in all.
#
# Run by `make check` with OVL_BUILDDIR and srcdir in the environment.
set -u

build=${OVL_BUILDDIR:-.}
src=${srcdir:-.}
bench=$build/tools/bench
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-bench.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/out" "$tmp/err" | head -30
}

# case NAME EXIT PATTERN... -- PROGRAM ARGS...: PROGRAM exits EXIT and
# prints (stdout and stderr) a line matching each PATTERN (grep -E).
case_() {
  name=$1 want=$2
  shift 2
  n=0
  while [ "$1" != -- ]; do
    n=$((n + 1))
    eval "pat$n=\$1"
    shift
  done
  shift
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  got=$?
  why=
  [ "$got" -eq "$want" ] || why="exit $got, expected $want"
  cat "$tmp/out" "$tmp/err" >"$tmp/all"
  k=1
  pat=
  while [ "$k" -le "$n" ]; do
    eval "pat=\$pat$k"
    grep -Eq -- "$pat" "$tmp/all" || why="${why:+$why; }no line matches '$pat'"
    k=$((k + 1))
  done
  if [ -z "$why" ]; then ok "$name"; else echo "    $why"; ko "$name"; fi
}

for b in race_bench check_bench ref_bench; do
  [ -x "$bench/$b" ] || { echo "bench_smoke.sh: no $bench/$b (build first)"; exit 99; }
done

num='[0-9]+(\.[0-9]+)?'
case_ "race_bench: both patterns, 2000 ops" 0 \
  "^seed +[0-9]+ ops  parse +$num s  check +$num s \(best of 2\) +$num M ops/s  0 races listed, 0 more pairs$" \
  "^random +2000 ops  parse .* [1-9][0-9]* races? listed, [0-9]+ more pairs$" \
  -- "$bench/race_bench" -n 2000 -r 2
case_ "race_bench -p random alone" 0 "^random +2000 ops " \
  -- "$bench/race_bench" -n 2000 -r 1 -p random
case_ "race_bench: an unknown flag gives the usage" 1 \
  "^usage: race_bench \[-n OPS\] \[-r REPS\] \[-p seed\|random\|all\]$" \
  -- "$bench/race_bench" -x
case_ "race_bench: too few ops" 1 "^race_bench: want -n >= 100 and -r >= 1$" \
  -- "$bench/race_bench" -n 10

case_ "check_bench: both patterns, 2000 ops on 3 ranks, clean" 0 \
  "^pipeline +[0-9]+ ops x 3 ranks  parse +$num s  races .*\(best of 1; 0 races, 0 mismatches, 0 deadlocks\)$" \
  "^spmd +[0-9]+ ops x 3 ranks .*\(best of 1; 0 races, 0 mismatches, 0 deadlocks\)$" \
  -- "$bench/check_bench" -n 2000 -r 3 -R 1
case_ "check_bench -p spmd alone" 0 "^spmd +[0-9]+ ops x 2 ranks " \
  -- "$bench/check_bench" -n 500 -r 2 -R 1 -p spmd
case_ "check_bench: one rank is refused" 1 \
  "^check_bench: want -n >= 100, -R >= 1, 2 <= -r <= 64$" \
  -- "$bench/check_bench" -r 1
case_ "check_bench: an unknown flag gives the usage" 1 "^usage: check_bench " \
  -- "$bench/check_bench" -p

sched=$src/schedules/matmul.sched
case_ "ref_bench: sampled rows of a matmul, best of 2" 0 \
  "^ref_bench: .*matmul\.sched, 2 ranks, parse and bind $num s, [0-9]+ CPUs online, rows: sampled$" \
  "^  out: 4 of 64 rows \(first 0, last 63\)$" \
  "^reference: $num s \(best of 2\)$" \
  -- "$bench/ref_bench" -c 4 -R 2 -D n=64 -D reps=1 "$sched"
case_ "ref_bench -c all: every row" 0 "rows: all$" "^  out: all 16 rows$" \
  -- "$bench/ref_bench" -r 1 -c all -D n=16 -D reps=1 "$sched"
case_ "ref_bench: a -D that names no param" 1 "^ref_bench: -D m=4: no such param" \
  -- "$bench/ref_bench" -D m=4 "$sched"
case_ "ref_bench: no such schedule" 1 "^ref_bench: .*nosuch\.sched" \
  -- "$bench/ref_bench" "$tmp/nosuch.sched"
case_ "ref_bench: a bad row count gives the usage" 2 "^usage: ref_bench " \
  -- "$bench/ref_bench" -c x "$sched"
case_ "ref_bench: no schedule gives the usage" 2 "^usage: ref_bench " \
  -- "$bench/ref_bench"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
