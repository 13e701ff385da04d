#!/bin/sh
# tools/overlap_sim --replay on the cpu backend: every race of every bad
# schedule shown as wrong numbers, races that do not show and why, race K,
# --replay-delay, what --replay (and --graph) cannot go with.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# --replay: every race of every schedule in schedules/bad/ is shown as
# wrong numbers, once as written and once without the schedule's own
# delay lines (which show the bug in a plain run), so that only the
# replay's delay is left; the good twins have no races to replay.
replay_shown_re='^[a-z]+ race [0-9]+ shown: rank [0-9]+ [A-Za-z_][A-Za-z0-9_]*\[[0-9,]+\] got ([-+0-9.e]+|nan|-?inf) expected ([-+0-9.e]+|nan|-?inf) \([0-9]+ of [0-9]+ elements differ; [^ ]+ delayed [0-9.]+ m?s before line [0-9]+\)$'
# all_shown: every race the report lists was replayed and shown, in each
# form it is listed for (a section of forms whose findings read the same,
# "== sync, async (the same findings) ==", lists each race once for both).
all_shown() {
  n=$(awk '/^== mismatches/ { k = 0; next }
           /^== .* ==$/ { k = split($0, a, ", "); next }
           /^race [0-9]+: / { n += k } END { print n + 0 }' "$tmp/out")
  [ "$n" -gt 0 ] && ! has out ' not shown: ' &&
    [ "$(grep -Ec "$replay_shown_re" "$tmp/out")" -eq "$n" ] &&
    has out "^replay: $n of $n races? shown as wrong numbers\$"
}
for f in "$src"/schedules/bad/*.sched; do
  sname=${f#"$src"/}
  if ! racy "$f"; then
    # A mismatch or deadlock between ranks: nothing to replay.
    if run 4 "replay $sname" --replay "$f" && ! has out '^race [0-9]+: ' &&
      has out '^replay: (no races to replay|nothing replayed)'
    then ok "--replay $sname: no races"; else ko "--replay $sname: no races"; fi
    continue
  fi
  if run_racy 4 "replay $sname" --replay "$f" && all_shown &&
    has out '^replay: backend cpu, 2 ranks: each race run once with the stream of its first access delayed just before it$' &&
    has out '^async: plain run (ok|MISMATCH) \([0-9]+ (of [0-9]+ )?elements, [0-9.e+-]+ ms\)'
  then ok "--replay $sname"; else ko "--replay $sname"; fi
  grep -v '^[[:space:]]*delay(' "$f" >"$tmp/nodelay.sched"
  if run_racy 4 "replay $sname, no delay lines" --replay "$tmp/nodelay.sched" && all_shown
  then ok "--replay $sname without its delay lines"; else ko "--replay $sname without its delay lines"; fi
done
for f in "$src"/schedules/good/*.sched; do
  sname=${f#"$src"/}
  if run 0 "replay $sname" --replay "$f" && has out '^no races in ' &&
    ! has out '^race ' && has out '^replay: no races to replay$'
  then ok "--replay $sname: no races"; else ko "--replay $sname: no races"; fi
done
# The seed without its final c_wait_comm: out = c - d reads c while the
# last allreduce may still write it. Chaos seldom shows it; the replay
# (its delay scaled to the plain run) does.
grep -v '^c_wait_comm' "$src/schedules/seed.sched" >"$tmp/seed_nowait.sched"
if run_racy 4 replay-seed-nowait --replay -D cols=20 "$tmp/seed_nowait.sched" && all_shown &&
  has out '^async race 1 shown: rank 0 out\[0,0\] got '
then ok "--replay: the seed without its final c_wait_comm"; else ko "--replay: the seed without its final c_wait_comm"; fi
# Race K, -q (the replay lines only), and races that do not show, each
# with why (tests/schedules/replay_cases.sched says which).
rc_sched=$src/tests/schedules/replay_cases.sched
if run_racy 4 replay-k --replay=1 "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^async race 1 shown: rank 0 c\[0\] got [-0-9.e+]+ expected [-0-9.e+]+ \(8192 of 8192 elements differ; calc delayed [0-9.]+ ms before line 13\)$' &&
  run_racy 4 replay-q -q --replay --mode=async "$src/schedules/bad/missing_wait_compute.sched" &&
  ! has out '^race ' && ! has out '^==' && [ "$(wc -l <"$tmp/out")" -eq 4 ]
then ok "--replay=K, -q"; else ko "--replay=K, -q"; fi
if run_racy 4 replay-cases --replay "$rc_sched" &&
  has out '^async race 1 shown: rank 0 y\[0\] got ' &&
  has out "^async race 2 not shown: the numbers matched \\(nothing fetched is computed from 't' after line 20\\); side delayed [0-9.]+ ms before line 20\$" &&
  has out "^async race 3 not shown: the numbers matched (where they depend on 'w' \\('y' differs, but does not depend on it: another race\\)|\\(the two accesses in the other order gave the same fetched values\\)); calc delayed " &&
  has out "^sync race 1 not shown: the numbers matched \\(nothing fetched is computed from 't'" &&
  has out '^replay: 1 of 5 races shown as wrong numbers$' &&
  run_racy 4 replay-cases-k --replay=3 -q "$rc_sched" && ! has out '^sync race' &&
  has out '^async race 3 not shown: ' &&
  run 4 replay-cases-comp --replay --mode=comp -q "$rc_sched" &&
  has out '^comp race 1 not shown: not replayed \(comp-only numbers are not compared with the reference\)$'
then ok "--replay: races not shown say why"; else ko "--replay: races not shown say why"; fi
if run_racy 4 replay-json --replay --json "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^\{"modes": \{"sync": ' &&
  has out '"replay": \{"backend": "cpu", "ranks": 2, "modes": \{"sync": \{"plain": null, "delay_us": null, "races": \[\]\}, "async": \{"plain": \{"time_s": ' &&
  has out '"races": \[\{"race": 1, "shown": true, "delay": \{"stream": "calc", "op": [0-9]+, "line": 13, "us": [0-9.e+]+\}, "rank": 0, "var": "c", "index": 0, "at": "\[0\]", "got": ' &&
  has out '"count": 1, "shown": 1\}\}$' &&
  { ! command -v python3 >/dev/null 2>&1 ||
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["replay"]["shown"] == 1' "$tmp/out" >>"$tmp/err" 2>&1; }
then ok "--replay --json"; else ko "--replay --json"; fi
# Race K out of range names what there is; K must be a number >= 1;
# --replay goes with neither --no-races nor --chaos.
if run 2 replay-k-range --replay=2 "$src/schedules/bad/missing_wait_compute.sched" &&
  has err 'replay: there is no race 2 to replay: the sync form has no races; the async form has race 1 only$' &&
  run 2 replay-k-none --replay=1 "$src/schedules/good/missing_wait_compute.sched" &&
  has err 'there is no race 1 to replay: no races were found$'
then ok "--replay=K out of range"; else ko "--replay=K out of range"; fi
for a in --replay=0 --replay=junk --replay= --replay=-1; do
  if run 2 "replay-bad $a" "$a" "$src/schedules/bad/missing_wait_compute.sched" &&
    has err -- "--replay=.*: not a race number"
  then ok "$a refused"; else ko "$a refused"; fi
done
if run 2 replay-no-races --replay --no-races && has err -- '--replay .*--no-races' &&
  run 2 replay-chaos --replay --chaos=1 && has err -- '--replay is deterministic' &&
  run 2 replay-delay-alone --replay-delay=100 && has err -- '--replay-delay needs --replay' &&
  run 2 replay-delay-bad --replay --replay-delay=0 && has err -- '--replay-delay: ' &&
  run 2 replay-trace-iter --replay --trace="$tmp/x.json" --trace-iter=0 && has err -- '--replay makes runs of one iteration' &&
  run 2 replay-delay-timeout --replay --replay-delay=2000000 --timeout=1 "$src/schedules/bad/missing_wait_compute.sched" &&
  has err 'not shorter than the timeout'
then ok "--replay refused with --no-races, --chaos, --trace-iter; --replay-delay checked"; else ko "--replay refused with --no-races, --chaos, --trace-iter; --replay-delay checked"; fi
# --graph: the cpu backend has no graphs (asked for, or picked by auto
# where no GPU is visible); and what --graph cannot go with. Nothing runs.
if run 2 graph-cpu --graph && ! has out . &&
  has err -- '^overlap_sim: --graph: the cpu backend has no graphs \(CUDA graphs need --backend=cuda or auto with a GPU\)$' &&
  run 2 graph-races --graph --races && has err -- '^overlap_sim: --races runs nothing: --graph needs a run$' &&
  run 2 graph-replay --graph --replay && has err -- '^overlap_sim: --replay makes eager runs of one iteration: it cannot go with --graph$' &&
  run 2 graph-chaos --graph --chaos=1 && has err -- '^overlap_sim: --graph needs the cuda backend and --chaos the cpu backend: they cannot go together$' &&
  "$tool" --help >"$tmp/out" 2>"$tmp/err" && has out '^      --graph  '
then ok "--graph refused on cpu and with --races, --replay, --chaos"; else ko "--graph refused on cpu and with --races, --replay, --chaos"; fi
CUDA_VISIBLE_DEVICES= "$tool" --backend=auto --graph -n 2 -w 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 2 ] && ! has out . &&
  has err -- '^overlap_sim: --graph: the cpu backend has no graphs \(CUDA graphs need the cuda backend: a GPU, or --backend=cuda\)$'
then ok "--graph refused where auto picks cpu"; else echo "    exit $rc, expected 2"; ko "--graph refused where auto picks cpu"; fi
if run_racy 4 replay-delay --replay --replay-delay=25000 -q "$src/schedules/bad/missing_wait_comm.sched" &&
  has out '^async: plain run .*; delay 25 ms$' && has out 'comm\[0\] delayed 25 ms before line 15\)$'
then ok "--replay-delay"; else ko "--replay-delay"; fi

finish
