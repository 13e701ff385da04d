#!/bin/sh
# tools/overlap_sim's reports on the cpu backend: --trace, --svg, --json
# (also of a path that is not UTF-8). tests/outputs.sh checks how the
# files are written.
src=${srcdir:-.}
. "$src/tests/lib.sh"
bad=$src/schedules/bad

# --trace: a Chrome trace of one timed iteration, per rank and stream.
if run 0 trace -n 3 -w 1 -D cols=10 --trace="$tmp/t.json" && has out '^result: PASS$' &&
  [ -s "$tmp/t.json" ] && ! ls -a "$tmp" | grep -q '^\.ovl-' &&
  grep -q '"traceEvents"' "$tmp/t.json" && grep -q '"displayTimeUnit":"ms"' "$tmp/t.json" &&
  grep -q '"name":"process_name","args":{"name":"sync: rank 0 (emulated (cpu))"}' "$tmp/t.json" &&
  grep -q '"name":"process_name","args":{"name":"async: rank 1 (emulated (cpu))"}' "$tmp/t.json" &&
  grep -q '"name":"thread_name","args":{"name":"comm\[0\]"}' "$tmp/t.json" &&
  grep -q '"ph":"s"' "$tmp/t.json" && grep -q '"ph":"f","bp":"e"' "$tmp/t.json" &&
  grep -q '"name":"c_allreduce_sum #63 (ring 0)"' "$tmp/t.json" && grep -q '"seq":63' "$tmp/t.json" &&
  grep -q '"trace_iter":2' "$tmp/t.json" &&
  json_ok trace "$tmp/t.json" 2 sync,async
then ok "--trace"; else ko "--trace"; fi
if run 0 trace-one-mode --mode=async -r 3 -n 2 -w 0 -D cols=10 --trace="$tmp/t1.json" --trace-iter=0 &&
  grep -q '"name":"process_name","args":{"name":"rank 2 (emulated (cpu))"}' "$tmp/t1.json" &&
  grep -q '"trace_iter":0' "$tmp/t1.json" &&
  json_ok trace "$tmp/t1.json" 3 async
then ok "--trace --mode=async --trace-iter=0"; else ko "--trace --mode=async --trace-iter=0"; fi
if run 2 trace-iter-range -n 3 -w 1 --trace="$tmp/x.json" --trace-iter=3 && has err -- '--trace-iter: 3: there are 3 timed' &&
  [ ! -e "$tmp/x.json" ]
then ok "--trace-iter out of range"; else ko "--trace-iter out of range"; fi
if run 2 trace-iter-alone --trace-iter=0 && has err -- '--trace-iter needs --trace or --svg'
then ok "--trace-iter alone"; else ko "--trace-iter alone"; fi
if run 2 trace-races --races --trace="$tmp/x.json" && has err -- '--races runs nothing'
then ok "--trace with --races"; else ko "--trace with --races"; fi
if run 3 trace-bad-path -n 2 -w 1 -D cols=10 --trace="$tmp/no/such/dir/t.json" &&
  has err -- "--trace=$tmp/no/such/dir/t.json: cannot create .*No such file" && [ ! -s "$tmp/out" ]
then ok "--trace to a bad path: exit 3 before the run, the path named"; else ko "--trace to a bad path: exit 3 before the run, the path named"; fi

# The timelines show the bug: after a run that found a race, and after
# --replay (one run per race replayed), the race's two accesses are named
# "[race 1]" in the trace and outlined and labelled in the picture; waits
# carry their kind.
if run_racy 1 trace-race --trials=1 -n 1 -w 0 --trace="$tmp/tr.json" --svg="$tmp/tr.svg" "$src/schedules/bad/missing_wait_compute.sched" &&
  [ "$(grep -o '"name":"[a-z_]* [^"]*\[race 1\]"' "$tmp/tr.json" | sort -u | wc -l)" -eq 2 ] &&
  grep -q '"race":\[1\]' "$tmp/tr.json" && grep -q '"wait":"event"' "$tmp/tr.json" &&
  grep -q '"cat":"host_sync"' "$tmp/tr.json" &&
  grep -q '<text class="rl" [^>]*>race 1</text>' "$tmp/tr.svg" &&
  json_ok trace "$tmp/tr.json" 2 sync,async &&
  run_racy 4 replay-trace --replay --trace="$tmp/rt.json" --svg="$tmp/rt.svg" "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^async race 1 shown: ' &&
  grep -q '"name":"async race 1: rank 0 (' "$tmp/rt.json" &&
  grep -q '"name":"scale \[race 1\]"' "$tmp/rt.json" && grep -q '"name":"delay"' "$tmp/rt.json" &&
  grep -q '>async race 1</text>' "$tmp/rt.svg" && grep -q '<rect class="rc" x="[0-9.]*" y="-1" ' "$tmp/rt.svg" &&
  json_ok trace "$tmp/rt.json" 2 "async race 1"
then ok "--trace and --svg mark the races (after a run, after --replay)"; else ko "--trace and --svg mark the races (after a run, after --replay)"; fi

# --svg: a picture of the same iteration (tests/svg_render.sh renders it).
if run 0 svg --mode=all -n 2 -w 1 -D cols=10 --svg="$tmp/t.svg" &&
  head -1 "$tmp/t.svg" | grep -q '^<?xml' && grep -q '^<svg xmlns="http://www.w3.org/2000/svg" width="1200"' "$tmp/t.svg" &&
  grep -q 'seed\.sched (rows=1000 cols=10 steps=64) — sync, async, comp vs comm — backend cpu' "$tmp/t.svg" &&
  grep -q 'class="ph" x="10" y="[0-9]*">comm<' "$tmp/t.svg" && grep -q 'time (ms)' "$tmp/t.svg" &&
  grep -q 'class="ov"' "$tmp/t.svg" && tail -1 "$tmp/t.svg" | grep -q '^</svg>$' &&
  [ "$(grep -Ec '>ops end at [0-9.]+ ms; iteration [0-9.]+ ms \(rank 0, barrier to barrier\); collectives ' "$tmp/t.svg")" -eq 4 ]
then ok "--svg"; else ko "--svg"; fi

# --json=FILE: the results of a run, with stable keys (docs/JSON.md).
if run 0 json-results -n 3 -w 1 -D cols=10 --json="$tmp/r.json" && has out '^result: PASS$' &&
  grep -q '"result": "PASS"' "$tmp/r.json" && grep -q '"exit_status": 0' "$tmp/r.json" &&
  grep -q '"backend": "cpu", "ranks": 2' "$tmp/r.json" && grep -q '"nccl_version": "n/a"' "$tmp/r.json" &&
  grep -q '"sync": {"total_s": ' "$tmp/r.json" && grep -q '"status": "ok", "checked": 20000' "$tmp/r.json" &&
  json_ok results "$tmp/r.json" sync,async
then ok "--json=FILE for a run"; else ko "--json=FILE for a run"; fi
if run_racy 1 json-mismatch -n 2 -w 0 --mode=async --json="$tmp/m.json" "$src/schedules/bad/missing_wait_compute.sched" &&
  grep -q '"status": "mismatch"' "$tmp/m.json" && grep -q '"first_index": [0-9]' "$tmp/m.json" &&
  grep -q '"result": "FAIL: numeric mismatch"' "$tmp/m.json" && grep -q '"exit_status": 1' "$tmp/m.json" &&
  grep -q '"races": {"schedule"' "$tmp/m.json" &&
  json_ok results "$tmp/m.json" async
then ok "--json=FILE of a mismatch"; else ko "--json=FILE of a mismatch"; fi
# A race in both forms is one bug: the verdict and "findings" count it once.
if run_racy 1 json-one-bug --trials=1 -n 1 -w 0 --json="$tmp/ob.json" "$bad/user_stream_missing_wait.sched" &&
  has out '^result: FAIL: numeric mismatch' &&
  grep -q '"findings": {"races": 1, "mismatches": 0, "deadlocks": 0, "same": \[\["sync", "async"\]\]}' "$tmp/ob.json" &&
  grep -q '"forms":\["sync","async"\]' "$tmp/ob.json" &&
  json_ok results "$tmp/ob.json" sync,async
then ok "--json=FILE: a race of both forms counted once"; else ko "--json=FILE: a race of both forms counted once"; fi
if run 0 json-stdout --mode=all -n 2 -w 1 -D cols=10 --op-times --json=- &&
  head -c 1 "$tmp/out" | grep -q '{' && has err '^result: PASS$' && ! has out '^result' &&
  grep -q '"ideal_speedup": [0-9]' "$tmp/out" && grep -q '"op_times": \[' "$tmp/out" &&
  json_ok results "$tmp/out" sync,async,comp,comm
then ok "--json=- (the table on stderr)"; else ko "--json=- (the table on stderr)"; fi
if run 3 json-bad-path -n 2 -w 1 -D cols=10 --json="$tmp/no/such/r.json" &&
  has err -- "--json=$tmp/no/such/r.json: cannot create" && [ ! -s "$tmp/out" ]
then ok "--json to a bad path: exit 3 before the run"; else ko "--json to a bad path: exit 3 before the run"; fi

# JSON is valid UTF-8 whatever the bytes of a path: a schedule under a
# directory whose name holds the byte 0xff (never UTF-8) and a valid é.
# Python's strict UTF-8 decoding reads every JSON file the tool writes;
# without python3, no 0xff byte may reach them.
utf8_ok() {
  if [ "$have_python" -eq 1 ]; then
    python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$1" >>"$tmp/err" 2>&1
  else
    ! LC_ALL=C grep -q "$(printf '\377')" "$1"
  fi
}
odd=$tmp/$(printf 'dir\377-\303\251')
mkdir "$odd" && cp "$src/schedules/good/missing_wait_compute.sched" "$odd/s.sched"
if run 0 json-latin1-path -n 2 -w 0 --json="$tmp/u.json" --trace="$tmp/ut.json" --svg="$tmp/u.svg" "$odd/s.sched" &&
  utf8_ok "$tmp/u.json" && utf8_ok "$tmp/ut.json" &&
  { [ "$have_python" -eq 0 ] || python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$tmp/u.svg" >>"$tmp/err" 2>&1; } &&
  grep -q '"path": ".*/dir\\ufffd-\(\\u00e9\|'"$(printf '\303\251')"'\)/s\.sched"' "$tmp/u.json"
then ok "--json, --trace and --svg of a path that is not UTF-8"; else ko "--json, --trace and --svg of a path that is not UTF-8"; fi
if run 0 races-json-latin1-path --races --json="$tmp/ur.json" "$odd/s.sched" && utf8_ok "$tmp/ur.json" &&
  run 0 races-json-latin1-path-stdout --races --json "$odd/s.sched" && utf8_ok "$tmp/out" &&
  grep -q '"schedule":".*/dir\\ufffd-' "$tmp/out"
then ok "--races --json of a path that is not UTF-8"; else ko "--races --json of a path that is not UTF-8"; fi

finish
