#!/bin/sh
# tools/overlap_sim on the cpu backend: fetched values that are not finite,
# and --trials (the only test of the default trials: the others run one).
src=${srcdir:-.}
. "$src/tests/lib.sh"

# The default trials of a run longer than half their budget (5.1 s of a
# 10 s budget): one trial. The run starts here, in the background (it
# mostly sleeps), and is checked at the end, the other tests running
# meanwhile.
printf 'x = data(shape=[4], init=fill, value=1)\ndelay(us=5100000)\ny = scale(x, scale=2)\nfetch(y)\n' >"$tmp/slow.sched"
"$tool" --backend=cpu -n 1 -w 0 --mode=async --no-races "$tmp/slow.sched" \
  >"$tmp/slow.out" 2>"$tmp/slow.err" &
slow_pid=$!

# A NaN or an infinity fails the check even where the reference has the
# same (tests/schedules/nonfinite.sched: y overflows, z = y - y): exit 1,
# each variable with how many elements are not finite and the first.
nf=$src/tests/schedules/nonfinite.sched
if run 1 nonfinite -n 1 -w 0 --trials=1 --json="$tmp/nf.json" "$nf" &&
  has out '^sync .* MISMATCH \(48 of 58 elements, 48 not finite\); no races$' &&
  has out '^async .* MISMATCH \(48 of 58 elements, 48 not finite\); no races$' &&
  has out '^  async: rank 1 y: 12 of 12 elements are not finite \(NaN or an infinity\), first at \[0,0\]: got inf, expected inf$' &&
  has out '^  sync: rank 0 z: 12 of 12 elements are not finite \(NaN or an infinity\), first at \[0,0\]: got -?nan, expected -?nan$' &&
  ! has out ' k: ' &&
  has out '^result: FAIL: 96 fetched values are not finite \(NaN or an infinity\)$' &&
  grep -q '"status": "mismatch", "checked": 58, "unchecked": 0, "mismatched": 48, "nonfinite": 48, ' "$tmp/nf.json" &&
  grep -qE '\{"rank": 0, "var": "z", "dtype": "float32", "rtol": [0-9.e+-]+, "atol": [0-9.e+-]+, "checked": 12, "mismatched": 12, "nonfinite": 12, "fetched": true, "first_nonfinite": 0, ' "$tmp/nf.json" &&
  grep -qE '\{"rank": 1, "var": "k", "dtype": "float32", "rtol": [0-9.e+-]+, "atol": [0-9.e+-]+, "checked": 5, "mismatched": 0, "nonfinite": 0, "fetched": true, "first_nonfinite": null, ' "$tmp/nf.json" &&
  grep -q '"result": "FAIL: non-finite values",' "$tmp/nf.json" && grep -q '"exit_status": 1' "$tmp/nf.json" &&
  json_ok results "$tmp/nf.json" sync,async
then ok "non-finite values fail"; else ko "non-finite values fail"; fi
# Some elements not finite among finite ones (init=special puts NaN or an
# infinity in some): only those fail; finite values near the float32
# maximum pass.
printf 'x = data(shape=[64], dtype=float32, init=special, seed=3)\nfetch(x)\n' >"$tmp/special.sched"
printf 'a = data(shape=[2, 4], dtype=float32, init=fill, value=1.7e38)\nd = elementwise_add(a, a)\nfetch(d)\n' >"$tmp/near_max.sched"
if run 1 nonfinite-some -n 1 -w 0 --mode=async --trials=1 "$tmp/special.sched" &&
  has out '^  async: rank 0 x: [1-9][0-9]? of 64 elements are not finite \(NaN or an infinity\), first at \[[0-9]+\]: got -?(nan|inf), expected -?(nan|inf)$' &&
  run 0 finite-near-max -n 1 -w 0 --mode=async "$tmp/near_max.sched" && has out '^result: PASS$'
then ok "some non-finite elements fail, finite ones near the maximum pass"; else ko "some non-finite elements fail, finite ones near the maximum pass"; fi

# --trials=K: the whole measurement K times, a row per (mode, trial), then
# each figure's median (min to max) and the speedup's spread; the figures
# agree with the rows. --trials=1: one, without the trial column. The
# default: up to 5, as many as fit in about 10 s (a trial of 5.1 s runs
# once). On the cpu backend the header says the times are an emulation.
if run 0 trials3 --trials=3 -n 2 -w 0 -D cols=10 --mode=all --json="$tmp/trials.json" &&
  has out '^  cpu backend: these times are an emulation on host cores \(every stream a thread; [0-9]+ cores here\), not device figures$' &&
  has out '^mode   trial   total\(s\)' &&
  [ "$(grep -Ec '^(sync|async|comp|comm) +[123] +[0-9.]+ ' "$tmp/out")" -eq 12 ] &&
  has out '^async +3 +[0-9.]+ .* ok \(20000 elements\); no races$' &&
  has out '^3 trials: each figure.s median \(min to max\)$' &&
  has out '^sync total: [0-9.]+ s \([0-9.]+ s to [0-9.]+ s\)$' &&
  has out '^comm total: [0-9.]+ s \(' &&
  has out '^async speedup: [0-9.]+x \([0-9.]+x to [0-9.]+x; spread [0-9.]+ = \(max - min\) / median\)$' &&
  has out '^ideal speedup: [0-9.]+x \(' && has out '^overlap efficiency: -?[0-9.]+ \(-?[0-9.]+ to -?[0-9.]+\)$' &&
  awk '/^sync  +[123] /{s[$2]=$3} /^async +[123] /{a[$2]=$3}
    /^sync total:/{m=$3; lo=substr($5,2); hi=$8}
    END{n=0; for(k in s){n++; if(s[k]<lo-1e-4||s[k]>hi+1e-4) exit 1}
        if(n!=3||lo>m||m>hi) exit 1}' "$tmp/out" &&
  grep -q '"trials": {"count": 3, "total_s": {"sync": {"min": ' "$tmp/trials.json" &&
  grep -q '"trials": 3, "trial_budget_s": null, "trace_iter"' "$tmp/trials.json" &&
  json_ok results "$tmp/trials.json" sync,async,comp,comm
then ok "--trials=3"; else ko "--trials=3"; fi
if run 0 trials1 --trials=1 -n 2 -w 0 -D cols=10 && has out '^mode +total\(s\)' &&
  [ "$(grep -c '^sync ' "$tmp/out")" -eq 1 ] &&
  has out '^async speedup: [0-9.]+x \(sync [0-9.]+ s / async [0-9.]+ s\)$' && ! has out 'trials'
then ok "--trials=1: one measurement, as before"; else ko "--trials=1: one measurement, as before"; fi
if run_default_trials 0 trials-default -n 1 -w 0 -D cols=10 && [ "$(grep -Ec '^async +[0-9] ' "$tmp/out")" -eq 5 ] &&
  has out '^5 trials: '
then ok "--trials default: 5 short trials"; else ko "--trials default: 5 short trials"; fi
if run_racy 1 trials-mismatch --trials=2 -n 2 -w 0 --mode=async "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^  async \(trial 1\): rank 0 c: 4096 of 4096 elements differ; first at ' &&
  ! has out '^  async \(trial 2\): ' && has out '^  async: the check failed in 2 of 2 trials \(1, 2\)$'
then ok "--trials: the first failing trial's lines, and which failed"; else ko "--trials: the first failing trial's lines, and which failed"; fi
if run 2 trials-zero --trials=0 && has err -- "--trials: '0' is not a number from 1 to 1000" &&
  run 2 trials-races --trials=2 --races && has err -- '--trials repeats a run: --races runs nothing timed'
then ok "--trials refused: 0, with --races"; else ko "--trials refused: 0, with --races"; fi

wait "$slow_pid"
slow_rc=$?
cp "$tmp/slow.out" "$tmp/out"
cp "$tmp/slow.err" "$tmp/err"
if [ "$slow_rc" -eq 0 ] && [ "$(grep -Ec '^async +1 ' "$tmp/out")" -eq 1 ] &&
  ! has out '^async +2 ' && ! has out 'trials:'
then ok "--trials default: one trial of a long run"; else ko "--trials default: one trial of a long run (exit $slow_rc)"; fi

finish
