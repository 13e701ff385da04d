#!/bin/sh
# tools/overlap_sim's messages on the cpu backend: the header of a run
# its checks stopped, the header seen before the first row, a line for
# every output file, --races -q, an interrupt, a reader that goes away.
src=${srcdir:-.}
. "$src/tests/lib.sh"

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
