#!/bin/sh
# tools/overlap_sim --calibrate=FILE on the cpu backend: the profile of a
# schedule written whole, a line per measurement and the last 'wrote'
# line (none with -q), the model backend predicting the schedule from it
# (and refusing it for another schedule), and the usage errors: the
# model backend, flags of a run, a file that is the schedule.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# A scale, then its allreduce on the comm stream, ordered both ways.
cat >"$tmp/cal.sched" <<'SCHED'
x = data(shape=[16, 16], dtype=float32, init=uniform, seed=1)
y = scale(x, scale=2.0)
c_wait_compute(y, ring_id=0)
c_allreduce_sum(y, ring_id=0, use_calc_stream=false)
c_wait_comm(y, ring_id=0)
fetch(y)
SCHED
prof=$tmp/cal.json

if run 0 calibrate --calibrate="$prof" -n 2 -w 1 "$tmp/cal.sched" &&
  has out '^calibrate: kernel scale float32 \[256\]$' &&
  has out '^calibrate: host: 200 kernel launches$' &&
  has out '^calibrate: allreduce float32 \[256\] \(1024 B\) on calc$' &&
  has out '^calibrate: contention: allreduce beside matmul_v2 ' &&
  ! grep -qv '^calibrate: ' "$tmp/out" &&
  has err "^wrote $prof \\(profile of cal\\.sched on emulated \\(cpu\\): 1 kernel, comm allreduce; [0-9]+\\.[0-9] s\\)\$" &&
  [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q '"format": "overlap-sim profile 1"' "$prof" &&
  grep -q '"schedule": {"name": "cal.sched", "sig": "[0-9a-f]\{16\}"}' "$prof" &&
  { [ "$have_python" -eq 0 ] || python3 -m json.tool "$prof" >/dev/null; }
then ok "--calibrate=FILE: the profile, a line per measurement"; else ko "--calibrate=FILE: the profile, a line per measurement"; fi

# The model predicts the schedule from it; another schedule is refused.
if "$tool" --backend=model --profile="$prof" -r 2 "$tmp/cal.sched" >"$tmp/out" 2>"$tmp/err" &&
  has out '^async .*n/a \(predicted: nothing is computed\)' &&
  has out '^result: PASS$'
then ok "the model runs the schedule on the profile"; else ko "the model runs the schedule on the profile"; fi
"$tool" --backend=model --profile="$prof" -r 2 "$src/schedules/good/seed_small.sched" >"$tmp/out" 2>"$tmp/err"
got=$?
if [ "$got" -eq 2 ] && has err "profile $prof was calibrated on cal\\.sched, not on seed_small\\.sched"
then ok "a profile of another schedule refused"; else echo "    exit $got"; ko "a profile of another schedule refused"; fi

# -q: nothing printed, the file written.
rm -f "$prof"
if run 0 calibrate-q -q --calibrate="$prof" -n 1 -w 0 "$tmp/cal.sched" &&
  [ ! -s "$tmp/out" ] && [ ! -s "$tmp/err" ] && [ -s "$prof" ]
then ok "--calibrate -q: quiet, the file written"; else ko "--calibrate -q: quiet, the file written"; fi

# Usage errors: exit 2, nothing written.
rm -f "$prof"
if "$tool" --backend=model --calibrate="$prof" "$tmp/cal.sched" >"$tmp/out" 2>"$tmp/err"; then got=0; else got=$?; fi
if [ "$got" -eq 2 ] && has err '^overlap_sim: --calibrate measures on a real backend \(cpu, cuda\)' &&
  [ ! -e "$prof" ]
then ok "--calibrate with --backend=model: a usage error"; else echo "    exit $got"; ko "--calibrate with --backend=model: a usage error"; fi
for args in "--races" "--json=$tmp/r.json" "--trials=2" "--mode=sync" "--op-times"; do
  if run 2 "calibrate $args" --calibrate="$prof" "$args" "$tmp/cal.sched" &&
    has err '^overlap_sim: --calibrate measures and runs no mode' && [ ! -e "$prof" ]
  then ok "--calibrate with ${args%%=*}: a usage error"; else ko "--calibrate with ${args%%=*}: a usage error"; fi
done
if run 2 calibrate-empty --calibrate= "$tmp/cal.sched" && has err -- '--calibrate=: not a file name'
then ok "--calibrate= : a usage error"; else ko "--calibrate= : a usage error"; fi
cp "$tmp/cal.sched" "$tmp/keep.sched"
if run 2 calibrate-over-schedule --calibrate="$tmp/cal.sched" "$tmp/cal.sched" &&
  cmp -s "$tmp/cal.sched" "$tmp/keep.sched"
then ok "--calibrate=SCHEDULE refused, the schedule kept"; else ko "--calibrate=SCHEDULE refused, the schedule kept"; fi

# --predict=PROFILE beside a real run: every mode measured against
# predicted, the largest error, the predicted explain line; a bad profile
# refused before anything runs; not with the model, nor --calibrate.
run 0 calibrate-again -q --calibrate="$prof" -n 1 -w 0 "$tmp/cal.sched"
if run 0 predict --predict="$prof" --mode=all -n 2 -w 1 "$tmp/cal.sched" &&
  has out '^predicted by the model \(machine h200-8x400g \(built in\), profile ' &&
  [ "$(grep -cE '^(sync|async|comp|comm) +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%$' "$tmp/out")" -eq 4 ] &&
  has out '^overlap efficiency: measured -?[0-9.]+, predicted -?[0-9.]+' &&
  has out '^prediction: largest error [0-9.]+% \(' &&
  has out '^explain \(async, predicted, rank 0\): ' && has out '^result: PASS$'
then ok "--predict=PROFILE: measured against predicted, every mode"; else ko "--predict=PROFILE: measured against predicted, every mode"; fi
if run 2 predict-missing --predict="$tmp/none.json" "$tmp/cal.sched" &&
  has err "^overlap_sim: --predict: .*none\.json: No such file" && ! has out '^(sync|async) '
then ok "--predict of a missing file: exit 2 before anything runs"; else ko "--predict of a missing file: exit 2 before anything runs"; fi
if "$tool" --backend=model --predict="$prof" "$tmp/cal.sched" >"$tmp/out" 2>"$tmp/err"; then got=0; else got=$?; fi
if [ "$got" -eq 2 ] && has err 'with --backend=model, --profile=' &&
  run 2 predict-calibrate --predict="$prof" --calibrate="$tmp/p2.json" "$tmp/cal.sched"
then ok "--predict: not with the model, nor --calibrate"; else ko "--predict: not with the model, nor --calibrate"; fi
# A real run with --op-times explains its traced iteration; with
# --mode=all its contention is measured.
if run 0 explain-real --mode=all --op-times -n 2 -w 1 "$tmp/cal.sched" &&
  has out '^explain \(async, traced iteration, rank [01]\): [0-9.]+ ms = compute [0-9.]+ \+ exposed comm [0-9.]+ \+ contention [0-9.]+ \+ host' &&
  run 0 explain-na --op-times -n 2 -w 1 "$tmp/cal.sched" &&
  has out 'contention n/a \(--mode=all --op-times measures it\)'
then ok "--op-times: the explain line of a real run"; else ko "--op-times: the explain line of a real run"; fi

finish
