#!/bin/sh
# tools/overlap_sim's verdicts and messages on the cpu backend: the overlap
# line apart from the result line, the warnings of noise, the next step on
# a terminal, the count of values not finite per run; the header of a run
# its checks stopped, the header seen before the first row, a line for
# every output file, --races -q, an interrupt, a reader that goes away.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# --- The verdicts --------------------------------------------------------
# Two lines, kept apart and last: what the overlap bought, then whether
# the numbers are right (a slower async is said, never hidden by PASS).
word='(faster|slower \(no gain\)|no gain \(within 2%\)|unclear \([^)]*\))'
if run 0 overlap-both -n 2 -w 1 -D cols=10 &&
  has out "^overlap: async [0-9.]+x sync: $word; --mode=all adds the ideal speedup and the overlap efficiency\$" &&
  [ "$(tail -n 1 "$tmp/out")" = "result: PASS" ] &&
  tail -n 2 "$tmp/out" | head -n 1 | grep -q '^overlap: '
then ok "overlap line apart from the result line"; else ko "overlap line apart from the result line"; fi
if run 0 overlap-all --mode=all -n 2 -w 1 -D cols=10 &&
  has out "^overlap: async [0-9.]+x sync: $word; ideal [0-9.]+x, overlap efficiency -?[0-9.]+\$"
then ok "overlap line with --mode=all: the ideal and the efficiency"; else ko "overlap line with --mode=all: the ideal and the efficiency"; fi
if run 0 overlap-sync --mode=sync -n 1 -w 0 -D cols=10 && ! has out '^overlap:' &&
  run 0 overlap-q -q -n 1 -w 0 -D cols=10 && [ "$(cat "$tmp/out")" = "result: PASS" ]
then ok "no overlap line for one mode, nor with -q"; else ko "no overlap line for one mode, nor with -q"; fi
if run_racy 1 overlap-wrong -n 2 -w 0 "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^overlap: not judged: the numbers are wrong \(the result below\)$' &&
  has out '^result: FAIL: numeric mismatch'
then ok "overlap not judged where the numbers are wrong"; else ko "overlap not judged where the numbers are wrong"; fi

# Noise: an iteration under 1 ms warns, and then the overlap is unclear;
# the warning shows exactly when a row's median is under 1 ms.
printf 'a = data(shape=[4])\nb = scale(a)\nfetch(b)\n' >"$tmp/tiny.sched"
# noise_said: the warning and the unclear overlap where a row of the last
# run has a median under 1 ms; neither where none has.
noise_said() {
  short=$(awk '$1 ~ /^(sync|async)$/ && $3 < 1 { n++ } END { print n + 0 }' "$tmp/out")
  if [ "$short" -gt 0 ]; then
    has out '^warning: the times are noise: an iteration takes under 1 ms \((sync|async) 0\.[0-9]{3} ms\), mostly the barrier and the clock around it; larger sizes \(-D\) steady them$' &&
      has out '^overlap: async [0-9.]+x sync: unclear \(noise: see the warning above\); '
  else
    ! has out '^warning: the times are noise'
  fi
}
if run 0 tiny -n 5 -w 1 "$tmp/tiny.sched" && noise_said &&
  [ "$(tail -n 1 "$tmp/out")" = "result: PASS" ]
then ok "a warning for iterations under 1 ms"; else ko "a warning for iterations under 1 ms"; fi

# Values not finite: counted per run (a trial's modes), not summed over
# the trials (tests/schedules/nonfinite.sched: 48 in each of two modes).
if run 1 nonfinite-trials -n 1 -w 0 --trials=2 "$src/tests/schedules/nonfinite.sched" &&
  has out '^result: FAIL: 96 fetched values are not finite \(NaN or an infinity\) in each of 2 trials$'
then ok "values not finite counted per run"; else ko "values not finite counted per run"; fi

# The next step: on a terminal only (script(1) gives one), not in a pipe
# or a file, nor with -q.
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1; then
  tty_run() {
    script -qec "$*" /dev/null 2>&1 | tr -d '\r' >"$tmp/out"
  }
  # (a racy schedule: a ThreadSanitizer build's reports off, as run_racy does)
  tty_run "TSAN_OPTIONS='${TSAN_OPTIONS:+$TSAN_OPTIONS:}report_bugs=0' '$tool' --backend=cpu --trials=1 -n 1 -w 0 '$src/schedules/bad/missing_wait_compute.sched'"
  if has out '^result: FAIL' &&
    has out "^next: overlap_sim --replay .*/missing_wait_compute\\.sched shows each race as wrong numbers; --fix applies the checked fixes\$" &&
    [ "$(tail -n 1 "$tmp/out" | cut -c1-6)" = "next: " ] &&
    tty_run "'$tool' --backend=cpu --trials=1 -n 1 -w 0 --mode=all -D cols=10" &&
    has out '^next: ' &&
    tty_run "'$tool' --backend=cpu --trials=1 -n 1 -w 0 -q -D cols=10" &&
    [ "$(cat "$tmp/out")" = "result: PASS" ] &&
    run 0 next-not-tty -n 1 -w 0 -D cols=10 && ! has out '^next:'
  then ok "next step on a terminal only"; else ko "next step on a terminal only"; fi
else
  echo "SKIP: next step on a terminal (no script(1))"
fi

# --- Messages -------------------------------------------------------------
# A run its checks stopped: its header says that nothing ran, not the
# iterations it would have run.
if run 4 not-run "$src/schedules/bad/ddp_buckets.sched" &&
  has out '^overlap_sim .*, nothing ran \(mismatches found: a run would hang or mix buffers\)$' &&
  ! has out 'iterations \(' && ! has out 'these times are an emulation' &&
  has out '^result: FAIL: 0 races, 2 mismatches, 0 deadlocks \(nothing ran: '
then ok "the header of a run its checks stopped"; else ko "the header of a run its checks stopped"; fi

# A line for every output file written, on stderr (stdout stays the
# report); none with -q, nor for a descriptor of the tool's.
if run 0 wrote -n 1 -w 0 -D cols=10 --json="$tmp/r.json" --svg="$tmp/p.svg" &&
  has err "^wrote $tmp/r\\.json \\(json\\)\$" && has err "^wrote $tmp/p\\.svg \\(svg\\)\$" &&
  ! has out '^wrote' && [ "$(tail -n 1 "$tmp/out")" = "result: PASS" ] &&
  run 0 wrote-q -q -n 1 -w 0 -D cols=10 --trace="$tmp/t.json" && [ ! -s "$tmp/err" ] &&
  [ -s "$tmp/t.json" ] &&
  run 0 wrote-fd -n 1 -w 0 -D cols=10 --trace=/dev/stdout && ! has err '^wrote' &&
  run 4 wrote-races --races --json="$tmp/races.json" "$src/schedules/bad/missing_wait_compute.sched" &&
  has err "^wrote $tmp/races\\.json \\(json\\)\$"
then ok "wrote FILE (KIND) for every output file"; else ko "wrote FILE (KIND) for every output file"; fi

# --races -q: the check line alone.
if run 4 races-q --races -q "$src/schedules/bad/missing_wait_compute.sched" &&
  [ "$(wc -l <"$tmp/out")" -eq 1 ] &&
  has out '^check: 1 race, 0 mismatches, 0 deadlocks in .*missing_wait_compute\.sched \(2 ranks\)$'
then ok "--races -q: the check line alone"; else ko "--races -q: the check line alone"; fi

# A run whose first row is 10 s away (a delay of 5 s an iteration).
printf 'a = data(shape=[4])\ndelay(us=5000000)\nb = scale(a)\nfetch(b)\n' >"$tmp/slow.sched"
slow="--backend=cpu --trials=1 -n 2 -w 0 --mode=sync $tmp/slow.sched"

# The header is out before the first row (stdout a file); SIGINT then
# says "interrupted", exits as the signal does (130), and leaves no output
# file, whole or half (env --default-signal: sh starts background jobs with
# SIGINT ignored).
if env --default-signal=INT true 2>/dev/null; then
  mkdir "$tmp/int"
  # shellcheck disable=SC2086
  env --default-signal=INT "$tool" $slow --json="$tmp/int/r.json" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  i=0
  while [ $i -lt 100 ] && ! grep -q '^mode ' "$tmp/out"; do
    sleep 0.1
    i=$((i + 1))
  done
  head_seen=no
  has out '^overlap_sim .*backend cpu' && has out '^mode ' && ! has out '^sync ' && head_seen=yes
  kill -INT "$pid"
  wait "$pid"
  got=$?
  if [ "$head_seen" = yes ] && [ "$got" -eq 130 ] && has err '^overlap_sim: interrupted$' &&
    [ -z "$(ls -A "$tmp/int")" ]
  then ok "header before the first row; SIGINT: interrupted, 130, no output file"
  else echo "    header seen: $head_seen, exit $got"; ko "header before the first row; SIGINT: interrupted, 130, no output file"; fi
else
  echo "SKIP: SIGINT (env --default-signal needs coreutils 8.31)"
fi

# A reader that goes away (| head -1) ends the run at once, quietly, even
# where SIGPIPE was ignored: 141, long before its 10 s.
start=$(date +%s)
(
  trap '' PIPE
  # shellcheck disable=SC2086
  { "$tool" $slow; echo $? >"$tmp/st"; } 2>"$tmp/err" | head -n 1 >"$tmp/out"
)
took=$(($(date +%s) - start))
if [ "$took" -lt 8 ] && [ "$(cat "$tmp/st")" -eq 141 ] && [ ! -s "$tmp/err" ] &&
  has out '^overlap_sim .*backend cpu'
then ok "| head -1: ends at once, quietly, 141"
else echo "    took $took s, exit $(cat "$tmp/st")"; ko "| head -1: ends at once, quietly, 141"; fi

finish
