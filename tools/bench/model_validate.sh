#!/bin/sh
# Calibrate the model backend on this machine and check it against real
# runs (docs/MODEL.md, "Honest"): for each case, overlap_sim --calibrate
# measures a profile of the schedule, then a real run of every mode
# (--mode=all) prints the model's prediction from that profile beside what
# it measured (--predict). One table of every mode's error follows, then
# allreduce alone: measured (overlap_sweep, device clock, on a comm
# stream), the model's (the profile's fit) and NCCL's own estimate
# (ncclGroupSimulateEnd, tools/bench/nccl_estimate.c, built here with the
# CUDA toolkit when nvcc or the NCCL headers are found).
#
#   tools/bench/model_validate.sh [BUILD_DIR [OUT_DIR]]
#
# BUILD_DIR: the build tree (default: .); OUT_DIR: profiles and logs
# (default: model-validate). The ranks are every visible GPU (the tool's
# default). Cases: seed_nofetch at cols 100, 1000, 10000, eager and
# --graph at cols 100; gemm_overlap; matmul; every schedules/good example
# that runs at this rank count (one that does not is listed as skipped).
# Exit 0 when every case ran, 1 otherwise. Times vary with the machine:
# this script reports, it judges nothing.
set -u
build=${1:-.}
out=${2:-model-validate}
here=$(cd "$(dirname "$0")/../.." && pwd)
sim=$build/tools/overlap_sim
sweep=$build/tools/overlap_sweep
mkdir -p "$out" || exit 1
table=$out/table.txt
: >"$table"
failed=0

# case NAME SCHEDULE [FLAGS...]: calibrate, then measure beside the
# prediction; the predicted rows go to the table.
run_case() {
  name=$1 sched=$2
  shift 2
  # Calibration runs no mode: --graph is the prediction's alone (the
  # profile has the graph launch's costs whenever the machine has graphs).
  cal_flags=
  for f in "$@"; do
    [ "$f" = --graph ] || cal_flags="$cal_flags $f"
  done
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  if ! "$sim" -q --calibrate="$out/$name.json" $cal_flags "$sched" \
      >"$out/$name.cal.log" 2>&1; then
    echo "$name: skipped (calibration: $(tail -n 1 "$out/$name.cal.log"))" |
      tee -a "$out/skipped.txt"
    return
  fi
  t1=$(date +%s.%N)
  cal=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
  if ! "$sim" --predict="$out/$name.json" --mode=all --trials=3 "$@" \
      "$sched" >"$out/$name.log" 2>&1; then
    echo "$name: the run failed: $(tail -n 1 "$out/$name.log")"
    failed=1
    return
  fi
  awk -v name="$name" -v cal="$cal" '
    /^predicted by the model/ { on = 1; next }
    on && /^(sync|async|comp|comm) / {
      printf "%-28s %-6s %12s %12s %8s  calibration %.1f s\n", name, $1, $2,
             $3, $4, cal }
    on && /^overlap efficiency: measured/ {
      printf "%-28s efficiency measured %s predicted %s\n", name, $4, $6 }
    on && /^prediction:/ { on = 0 }' "$out/$name.log" >>"$table"
}

seed=$here/schedules/seed_nofetch.sched
# MODEL_VALIDATE_QUICK=1: the seed at cols 100 alone (a check of the
# script itself, on the cpu backend too).
if [ "${MODEL_VALIDATE_QUICK:-0}" = 1 ]; then
  run_case seed_nofetch-cols100 "$seed" -D cols=100
  prof_big=seed_nofetch-cols100
else
  for cols in 100 1000 10000; do
    run_case "seed_nofetch-cols$cols" "$seed" -D cols=$cols
  done
  run_case seed_nofetch-cols100-graph "$seed" -D cols=100 --graph
  run_case gemm_overlap "$here/schedules/gemm_overlap.sched"
  run_case matmul "$here/schedules/matmul.sched"
  for s in "$here"/schedules/good/*.sched; do
    run_case "good-$(basename "$s" .sched)" "$s"
  done
  prof_big=seed_nofetch-cols10000
fi

echo "== every mode: measured and predicted (ms an iteration, median of 3 trials)"
printf "%-28s %-6s %12s %12s %8s\n" case mode measured predicted error
cat "$table"
awk '$2 ~ /^(sync|async|comp|comm)$/ {
       e = $5; sub(/%/, "", e); e = e + 0; e = e < 0 ? -e : e; n++; s += e
       if (e > worst) { worst = e; at = $1 " " $2 } }
     END { if (n) printf "%d rows: mean |error| %.1f%%, worst %.1f%% (%s)\n",
                         n, s / n, worst, at }' "$table"

# Allreduce alone: measured, the model's fit, NCCL's estimate.
sizes=4096,65536,1048576,4194304,16777216,40000000
"$sweep" --sizes=$sizes -n 20 -w 5 >"$out/sweep.log" 2>&1 || failed=1
est=$out/nccl_estimate
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$est" ]; then
  gcc -std=c11 -O2 -I"$cuda/include" "$here/tools/bench/nccl_estimate.c" \
    -L"$cuda/lib64" -lnccl -lcudart -o "$est" >"$out/nccl_estimate.build" 2>&1 ||
    echo "nccl_estimate: not built (see $out/nccl_estimate.build)"
fi
[ -x "$est" ] && "$est" allreduce $(echo $sizes | tr , ' ') >"$out/nccl.log" 2>&1
prof=$out/$prof_big.json
echo "== allreduce alone, float32 (us): measured on a comm stream, the model (profile fit), NCCL's estimate"
printf "%12s %10s %10s %10s\n" bytes measured model nccl
for b in $(echo $sizes | tr , ' '); do
  m=$(awk -v b=$b '$1 == b { print $10 }' "$out/sweep.log")
  p=$(python3 -c "
import json,sys
f=json.load(open('$prof'))['comm'].get('allreduce')
print('%.1f' % (f['lat_us'] + $b / (f['GBps'] * 1e3))) if f else print('-')" 2>/dev/null)
  n=$(awk -v b=$b '$2 == b { print $(NF-1) }' "$out/nccl.log" 2>/dev/null)
  printf "%12s %10s %10s %10s\n" "$b" "${m:--}" "${p:--}" "${n:--}"
done
exit $failed
