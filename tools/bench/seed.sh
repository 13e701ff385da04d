#!/bin/sh
# Benchmark: the seed schedule in every mode, then an allreduce-only size
# sweep in nccl-tests' shape, on the comm stream and on the calc stream.
#
#   tools/bench/seed.sh [-t TOOL] [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-- EXTRA TOOL OPTIONS]
#
# Defaults: TOOL=tools/overlap_sim, sizes 1 MiB .. 1 GiB by 4 (float32).
# Each size runs 10 iterations of `reps` back-to-back in-place allreduces
# (2 untimed); time = timed total / (8 * reps), as nccl-tests divides its
# host-timed loop. busbw = algbw * 2 (n - 1) / n for allreduce.
set -eu

tool=tools/overlap_sim
minb=1048576
maxb=1073741824
factor=4
while [ $# -gt 0 ]; do
  case $1 in
  -t) tool=$2; shift 2 ;;
  -b) minb=$2; shift 2 ;;
  -e) maxb=$2; shift 2 ;;
  -f) factor=$2; shift 2 ;;
  --) shift; break ;;
  -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
  *) echo "$0: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")/../.." && pwd)
sweep=$here/schedules/allreduce_sweep.sched

echo "# seed schedule, every mode"
"$tool" --mode=all "$@"

# total seconds of one mode's row in the tool's table
row_total() { awk -v m="$1" '$1 == m { print $2 }'; }

echo
echo "# allreduce sweep (float32 sum, in place): one collective alone"
ranks=$("$tool" -n 2 -w 1 --mode=async "$@" -D n=1 -D reps=1 "$sweep" |
  sed -n 's/^overlap_sim .*, \([0-9]*\) ranks (.*/\1/p')
printf '%12s %12s %6s %6s   %9s %8s %8s   %9s %8s %8s\n' size count type redop \
  "comm(us)" algbw busbw "calc(us)" algbw busbw
bytes=$minb
while [ "$bytes" -le "$maxb" ]; do
  n=$((bytes / 4))
  # Enough collectives per iteration that the iteration is not all launch.
  reps=$(( 2000000000 / bytes ))
  [ "$reps" -lt 5 ] && reps=5
  [ "$reps" -gt 200 ] && reps=200
  line=""
  for mode in async sync; do
    t=$("$tool" -n 10 -w 2 --mode=$mode "$@" -D n=$n -D reps=$reps "$sweep" | row_total $mode)
    line="$line $(awk -v t="$t" -v r="$reps" -v b="$bytes" -v k="$ranks" 'BEGIN {
      us = t / (8 * r) * 1e6; alg = b / (us * 1e-6) / 1e9; bus = alg * 2 * (k - 1) / k
      printf "%9.1f %8.2f %8.2f  ", us, alg, bus }')"
  done
  printf '%12d %12d %6s %6s  %s\n' "$bytes" "$n" float sum "$line"
  bytes=$((bytes * factor))
done
