#!/bin/sh
# Benchmark: the seed schedule in every mode, then an allreduce size sweep
# with tools/overlap_sweep (nccl-tests' table shape): on the calc stream, on
# a comm stream, and on a comm stream beside a memory-bound kernel, with how
# much the two slow each other down.
#
#   tools/bench/seed.sh [-t TOOL] [-s SWEEP] [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-p BYTES] [-- EXTRA OPTIONS]
#
# Defaults: TOOL=tools/overlap_sim, SWEEP=overlap_sweep next to TOOL; sizes
# 1 MiB .. 1 GiB by 4, plus -p 40000000 (nccl-tests' reference point in
# shared/gpu/README.md; -p 0: none), float32 sum, out of place. The sweep's
# time is the device time per collective (see overlap_sweep --help).
# EXTRA OPTIONS go to both tools: use the long options they share
# (--backend, --ranks, --timeout, --comm-priority, --nccl-min-ctas, ...).
set -eu

tool=tools/overlap_sim
sweep=
minb=1048576
maxb=1073741824
factor=4
point=40000000
while [ $# -gt 0 ]; do
  case $1 in
  -t) tool=$2; shift 2 ;;
  -s) sweep=$2; shift 2 ;;
  -b) minb=$2; shift 2 ;;
  -e) maxb=$2; shift 2 ;;
  -f) factor=$2; shift 2 ;;
  -p) point=$2; shift 2 ;;
  --) shift; break ;;
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  *) echo "$0: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$sweep" ] || sweep=$(dirname "$tool")/overlap_sweep
for v in "$minb" "$maxb" "$factor" "$point"; do
  case $v in
  '' | *[!0-9]*) echo "$0: '$v' is not a number of bytes (or a factor)" >&2; exit 2 ;;
  esac
done
[ "$factor" -ge 2 ] || { echo "$0: -f $factor: the factor must be 2 or more" >&2; exit 2; }
[ "$minb" -ge 1 ] && [ "$minb" -le "$maxb" ] ||
  { echo "$0: -b $minb -e $maxb: not a range of sizes" >&2; exit 2; }

echo "# seed schedule, every mode"
"$tool" --mode=all "$@"

# The sizes: MIN_BYTES * FACTOR^k up to MAX_BYTES, and the point (if in
# that range) in order.
{ [ "$point" -ge "$minb" ] && [ "$point" -le "$maxb" ]; } || point=0
sizes=
added=0
bytes=$minb
while :; do
  if [ "$added" -eq 0 ] && [ "$point" -gt 0 ] && [ "$point" -le "$bytes" ]; then
    [ "$point" -lt "$bytes" ] && sizes="$sizes,$point"
    added=1
  fi
  [ "$bytes" -le "$maxb" ] || break
  sizes="$sizes,$bytes"
  bytes=$((bytes * factor))
done
[ "$added" -eq 0 ] && [ "$point" -gt 0 ] && sizes="$sizes,$point"

echo
echo "# allreduce sweep (float32 sum): on calc, on comm out of place and in place, on comm beside compute"
"$sweep" -c allreduce -o sum -d float32 --sizes="${sizes#,}" "$@"
