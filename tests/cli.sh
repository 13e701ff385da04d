#!/bin/sh
# End-to-end tests of tools/overlap_sim on the cpu backend: exit codes,
# messages, the table and the --show format.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" "$tmp/err" | head -40; }

# run EXPECTED_EXIT NAME ARGS...: runs the tool on the cpu backend.
run() {
  want=$1 name=$2
  shift 2
  "$tool" --backend=cpu "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then return 0; fi
  echo "    exit $got, expected $want"
  return 1
}

# run_racy: run() for a schedule that races on purpose. Its race on the
# emulated device memory is real (the cpu backend's streams run
# concurrently, as a GPU's do), so a ThreadSanitizer build would rightly
# report it: reports are off for these runs only.
run_racy() {
  saved_tsan=${TSAN_OPTIONS-}
  TSAN_OPTIONS="${saved_tsan:+$saved_tsan:}report_bugs=0"
  export TSAN_OPTIONS
  run "$@"
  racy_rc=$?
  TSAN_OPTIONS=$saved_tsan
  return $racy_rc
}

# expect FILE PATTERN: grep -E in out or err.
has() { grep -Eq -- "$2" "$tmp/$1"; }

# racy SCHEDULE: whether --races finds a race in it (the bad schedules of
# ranks that differ have a mismatch or a deadlock instead).
racy() { "$tool" --backend=cpu --races "$1" 2>/dev/null | grep -q '^race [0-9]*: '; }

# --help and --version
if "$tool" --help >"$tmp/out" 2>"$tmp/err" && has out '^Usage: overlap_sim' &&
  has out '--mode=MODE' && has out 'Exit status'; then ok "--help"; else ko "--help"; fi
if "$tool" --version >"$tmp/out" 2>"$tmp/err" && has out '^overlap_sim \(overlap-sim\) [0-9]+\.[0-9]+\.[0-9]+$'
then ok "--version"; else ko "--version"; fi

# The default run: the seed on the cpu backend, both modes, passing.
if run 0 seed -n 3 -w 1 && has out '^overlap_sim .*backend cpu, 2 ranks' &&
  has out 'seed\.sched' && has out 'cols=100\*' && has out '-D cols=10000' &&
  has out '^sync +[0-9.]+ +[0-9.]+ .* ok \(' &&
  has out '^async +[0-9.]+ +[0-9.]+ .* ok \(' &&
  has out '^async speedup: [0-9.]+x' && has out '^result: PASS$'
then ok "default seed run"; else ko "default seed run"; fi

# The default run passes honestly on 1 to 8 ranks: the seed's c grows N
# times an allreduce, so from 4 ranks the default run takes fewer steps
# (N^steps <= 2^126) and says so; 64 (Paddle's) up to 3 ranks. Named, the
# seed runs as written, and at 4 ranks its 64 steps overflow float32: the
# check fails them.
for n in 1 2 3 4 5 6 7 8; do
  case $n in 1|2|3) steps=64 ;; 4) steps=63 ;; 5) steps=54 ;; 6) steps=48 ;; 7) steps=44 ;; 8) steps=42 ;; esac
  if run 0 "default-$n" -r $n -n 1 -w 0 -D cols=10 && has out '^result: PASS$' &&
    has out "^sync .* ok \($((n * 10000)) elements\)" && has out "^async .* ok \($((n * 10000)) elements\)" &&
    if [ $steps -eq 64 ]; then has out ' steps=64,' && ! has out '^  \+ '
    else has out " steps=$steps\+," && has out "^  \+ fewer steps than the seed's 64 at $n ranks: each allreduce multiplies c by $n, and $n\^64 overflows float32"
    fi
  then ok "default run on $n ranks: PASS, steps=$steps"; else ko "default run on $n ranks: PASS, steps=$steps"; fi
done
if run 1 seed-named-4 -r 4 -n 1 -w 0 -D cols=10 --mode=async --trials=1 "$src/schedules/seed.sched" &&
  has out ' steps=64,' && has out '^  async: rank 0 out: [0-9]+ of 10000 elements are not finite' &&
  run 1 seed-default-4-steps64 -r 4 -n 1 -w 0 -D cols=10 -D steps=64 --mode=async && ! has out '^  \+ '
then ok "the seed named, or -D steps=64, runs 64 steps: not finite at 4 ranks"; else ko "the seed named, or -D steps=64, runs 64 steps: not finite at 4 ranks"; fi

# --mode=all adds comp, comm, the ideal and the overlap efficiency.
if run 0 all --mode=all -n 2 -w 1 -D cols=20 && has out '^comp ' && has out '^comm ' &&
  has out '^ideal speedup: [0-9.]+x' && has out '^overlap efficiency: -?[0-9.]+'
then ok "--mode=all"; else ko "--mode=all"; fi

# --show: exactly 'rank <r> <name> <shape>: <values>'.
if run 0 show -n 1 -w 0 -D cols=10 -D rows=2 --mode=async --show=3 &&
  has out '^rank 0 out \[2,10\]: 0 0 0$' && has out '^rank 1 out \[2,10\]: 0 0 0$'
then ok "--show format"; else ko "--show format"; fi
if run 0 show-all-values -q -n 1 -w 0 --mode=sync --show=100 "$src/schedules/good/missing_wait_compute.sched" -D n=4 &&
  [ "$(grep -c '^rank [01] c \[4\]:\( [0-9.e+-]*\)\{4\}$' "$tmp/out")" -eq 2 ]
then ok "--show prints at most numel values"; else ko "--show prints at most numel values"; fi

# A real ordering bug gives a numeric mismatch: exit 1, and says where.
if run_racy 1 race -n 2 -w 0 --mode=async --trials=1 "$src/schedules/bad/missing_wait_compute.sched" &&
  has out 'MISMATCH' && has out 'async: rank [01] c: [0-9]+ of 4096 elements differ; first at \[[0-9]+\]: got ' &&
  has out '^result: FAIL'
then ok "missing c_wait_compute is caught"; else ko "missing c_wait_compute is caught"; fi
if run 0 fixed -n 2 -w 0 "$src/schedules/good/missing_wait_compute.sched" && has out '^result: PASS$'
then ok "fixed twin passes"; else ko "fixed twin passes"; fi

# --races: the report, the fix, exit 4; a clean schedule exits 0.
if run 4 races --races "$src/schedules/bad/missing_wait_compute.sched" &&
  has out "^race 1: 'c' on ranks 0-1$" &&
  has out '^  write  scale +.*missing_wait_compute\.sched:13  calc$' &&
  has out '^  write  c_allreduce_sum +.*missing_wait_compute\.sched:14  comm\[0\]$' &&
  has out '^  fix \(checked\): insert c_wait_compute\(c, ring_id=0\) before line 14$' &&
  has out '^1 race in .*missing_wait_compute\.sched \(2 ranks\)$'
then ok "--races on a racy schedule"; else ko "--races on a racy schedule"; fi
if run 0 races-clean --races && has out '^no races in .*seed\.sched \(775 ops checked\)$'
then ok "--races on the seed"; else ko "--races on the seed"; fi
if run 0 races-clean-sync --races --mode=both && has out '^== sync ==$' && has out '^== async ==$'
then ok "--races --mode=both"; else ko "--races --mode=both"; fi
# --races alone checks every form a run would (a CI pre-flight must not pass
# a schedule whose sync form races), each section labelled.
so="$src/tests/schedules/sync_only_race.sched"
if run 4 races-sync-only --races "$so" && has out '^== sync ==$' && has out '^== async ==$' &&
  [ "$(sed -n '2p' "$tmp/out")" = "race 1: 'b' on ranks 0-1" ] &&
  has out '^no races in .*sync_only_race\.sched \(4 ops checked\)$' &&
  run 0 races-sync-only-async --races --mode=async "$so" && has out '^== async ==$' &&
  has out '^no races in '
then ok "--races checks the sync form too"; else ko "--races checks the sync form too"; fi
if run 4 races-json --races --json "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^\{"modes": \{"sync": \{"schedule":".*","ranks":2,"ops":4,"races":\[\],"count":0' &&
  has out '"async": \{"schedule":".*","ranks":2,"ops":5,"races":\[\{"var":"c",' && has out '"count":1'
then ok "--races --json"; else ko "--races --json"; fi
if run 4 races-json-file --races --json="$tmp/r.json" "$src/schedules/bad/missing_wait_compute.sched" &&
  grep -q '"fix":"insert c_wait_compute(c, ring_id=0) before line 14","fix_checked":true,"fix_why":null' "$tmp/r.json"
then ok "--races --json=FILE"; else ko "--races --json=FILE"; fi
if run 2 json-needs-file --json && has err -- '--json needs a file'
then ok "--json without a file, for a run"; else ko "--json without a file, for a run"; fi
# A run reports races next to the numeric check.
if run_racy 1 run-races -n 2 -w 0 "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^async .*MISMATCH .*; RACES: 1 \(below\)$' && has out '^sync .*ok .*; no races$' &&
  has out '^  fix \(checked\): insert c_wait_compute' && has out 'and races$'
then ok "races in a run"; else ko "races in a run"; fi
if run_racy 1 run-no-races --no-races -n 2 -w 0 "$src/schedules/bad/missing_wait_compute.sched" &&
  ! has out 'races'
then ok "--no-races"; else ko "--no-races"; fi

# --chaos: a racy schedule breaks, a clean one does not.
if run_racy 1 chaos-bad --chaos=3 -n 2 -w 0 --mode=async "$src/schedules/bad/write_while_collective_reads.sched" &&
  has out MISMATCH
then ok "--chaos breaks a racy schedule"; else ko "--chaos breaks a racy schedule"; fi
if run 0 chaos-good --chaos=3 -n 2 -w 0 --mode=async "$src/schedules/good/write_while_collective_reads.sched"
then ok "--chaos leaves a clean schedule right"; else ko "--chaos leaves a clean schedule right"; fi
if run 2 chaos-zero --chaos=0 && has err -- '--chaos'
then ok "--chaos=0 refused"; else ko "--chaos=0 refused"; fi

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

# Every schedule under schedules/: --races gives the expected verdict (bad/
# racy, mismatched or deadlocked, exit 4; the rest clean, exit 0), and chaos
# runs agree with it: under every seed a racy schedule's numbers break and a
# clean one's never do; one whose ranks disagree never runs (exit 4).
for f in "$src"/schedules/*.sched "$src"/schedules/good/*.sched "$src"/schedules/bad/*.sched; do
  case $f in */bad/*) want=4 chaos_want=1 runner=run_racy ;; *) want=0 chaos_want=0 runner=run ;; esac
  case $f in */bad/*) racy "$f" || chaos_want=4 ;; esac
  # (not `name`: run() sets that)
  sname=${f#"$src"/}
  if run $want "races $sname" --races "$f"; then ok "--races $sname"; else ko "--races $sname"; fi
  case $f in *allreduce_sweep*|*/seed.sched) continue ;; esac
  for seed in 1 2 3; do
    if $runner $chaos_want "chaos $seed $sname" --chaos=$seed -n 2 -w 0 --mode=async "$f"
    then ok "--chaos=$seed $sname"; else ko "--chaos=$seed $sname"; fi
  done
done

# What the reports of the stream bugs say: the wait that does not wait, a
# race carried from one step of a repeat to the next (listed once, with
# how often it occurs) and one within a step, each with its fix.
bad=$src/schedules/bad
if run 4 races-unrecorded --races "$bad/unrecorded_event.sched" &&
  has out "^race 1: 'c' on ranks 0-1$" &&
  has out '^  write  scale +.*unrecorded_event\.sched:16  calc$' &&
  has out '^  write  c_allreduce_sum +.*unrecorded_event\.sched:19  comm\[0\]$' &&
  has out "^  note: line 17 waits on event 'c_ready', which is not recorded before it \(line 18 records it\), so it does not wait$" &&
  has out '^1 race in '
then ok "--races: a wait before the record, with the note"; else ko "--races: a wait before the record, with the note"; fi
if run 4 races-loop-carried --races "$bad/loop_carried_race.sched" &&
  has out "^race 1: 'g' on ranks 0-1 \(2 times in the expanded program\)$" &&
  has out '^  read   c_allreduce_sum +.*loop_carried_race\.sched:26  comm\[0\]$' &&
  has out '^  write  scale +.*loop_carried_race\.sched:21  calc$' &&
  has out '^  fix \(checked\): insert c_wait_comm\(ring_id=0\) before line 21$' && has out '^1 race in '
then ok "--races: a race carried by a repeat"; else ko "--races: a race carried by a repeat"; fi
if run 4 races-in-step --races "$bad/race_not_loop_carried.sched" &&
  has out "^race 1: 'g' on ranks 0-1 \(3 times in the expanded program\)$" &&
  has out '^  write  c_allreduce_sum +.*race_not_loop_carried\.sched:23  comm\[0\]$' &&
  has out '^  read   elementwise_add +.*race_not_loop_carried\.sched:24  calc$' &&
  has out '^  fix \(checked\): insert c_wait_comm\(g, ring_id=0\) before line 24$' && has out '^1 race in '
then ok "--races: a race within a step of a repeat"; else ko "--races: a race within a step of a repeat"; fi
# A user stream's and a collective-less comm stream's races are the
# schedule's own: sync form keeps them.
# One race in both forms: one bug, counted once; where the two forms'
# findings read the same (a user stream's: the forms keep both streams,
# and the same fix), one section says so.
for f in user_stream_missing_wait comm_stream_no_collective; do
  if run 4 "races-both $f" --races --mode=both "$bad/$f.sched" &&
    has out '^  found in the sync and async forms$' &&
    has out '^check: 1 race, 0 mismatches, 0 deadlocks in '
  then ok "--races --mode=both $f: both forms race, one bug"; else ko "--races --mode=both $f: both forms race, one bug"; fi
done
if run 4 races-same-findings --races "$bad/user_stream_missing_wait.sched" &&
  has out '^== sync, async \(the same findings\) ==$' &&
  [ "$(grep -c '^race 1: ' "$tmp/out")" -eq 1 ] &&
  run 4 races-other-findings --races "$bad/comm_stream_no_collective.sched" &&
  has out '^== sync ==$' && has out '^== async ==$'
then ok "--races: forms whose findings read the same print once"; else ko "--races: forms whose findings read the same print once"; fi
if run 4 races-user-stream --races "$bad/user_stream_missing_wait.sched" &&
  has out '^  write  scale +.*user_stream_missing_wait\.sched:18  copy$' &&
  has out '^  read   scale +.*user_stream_missing_wait\.sched:19  calc$' &&
  has out '^  fix \(checked\): insert event_record\(c, event=c_ready, stream=copy\) and stream_wait_event\(c, event=c_ready, stream=calc\) before line 19$'
then ok "--races: a user stream's race"; else ko "--races: a user stream's race"; fi
if run 4 races-comm-no-coll --races "$bad/comm_stream_no_collective.sched" &&
  has out '^  read   scale +.*comm_stream_no_collective\.sched:20  comm\[1\]$' &&
  has out '^  write  scale +.*comm_stream_no_collective\.sched:22  calc$'
then ok "--races: a comm stream with no collective"; else ko "--races: a comm stream with no collective"; fi
for f in user_stream_missing_wait comm_stream_no_collective unrecorded_event loop_carried_race race_not_loop_carried; do
  if run 0 "twin $f" -n 3 -w 1 "$src/schedules/good/$f.sched" && has out '^result: PASS$' &&
    has out '^sync .* ok \([0-9]+ elements\); no races$' && has out '^async .* ok \([0-9]+ elements\); no races$'
  then ok "good/$f runs, both forms clean"; else ko "good/$f runs, both forms clean"; fi
done

# No hang: a stream that never finishes ends in a timeout error (exit 3)
# that names the op, the rank and the streams, and says where every rank's
# communication was (the flight record: its allreduce is done).
t0=$(date +%s)
if run 3 hang-stream --timeout=1 --mode=async -n 1 -w 0 "$src/tests/schedules/hang_stream.sched" &&
  has err 'hang_stream\.sched:9:1: fetch on calc stream: rank [01]: calc stream: waited 1\.0 s for event 1 of comm\[0\] stream' &&
  has err '; where the ranks were: ranks 0,1 at .*hang_stream\.sched:9 \(fetch, iteration 1 of 1\); flight record: ranks 0,1 ring 0: enqueued #1 c_allreduce_sum \(hang_stream\.sched:5\), completed #1 c_allreduce_sum \(hang_stream\.sched:5\)$' &&
  [ $(( $(date +%s) - t0 )) -lt 20 ]
then ok "a stuck stream times out"; else ko "a stuck stream times out"; fi

# Kernels still running when the timeout fires: exit 3 with the timeout,
# and no buffer freed under them (under ASan and TSan in CI this was a
# use-after-free in the cpu backend's kernel; issue 10). The seed at full
# size with a 5 ms timeout was the first reproduction.
for i in 1 2 3; do
  if run 3 long-kernels --timeout=0.001 -n 1 -w 0 "$src/tests/schedules/long_kernels.sched" &&
    has err 'long_kernels\.sched:12:1: fetch on calc stream: rank [01]: calc stream: sync timed out after 0\.0[0-9]+ s'
  then ok "kernels outlast the timeout ($i)"; else ko "kernels outlast the timeout ($i)"; fi
done
if run 3 seed-timeout -n 2 -w 0 -D cols=2000 --timeout=0.002 && has err 'timed out after'
then ok "the seed outlasts a 2 ms timeout"; else ko "the seed outlasts a 2 ms timeout"; fi

# Host memory: a 230-byte schedule of 16.7 M ops (12 GB of host memory for
# a run, 5 GB for --races) is refused at once, before its op list is built,
# where the machine has 4 GB (OVL_HOST_MEMORY stands for the machine's).
cat >"$tmp/many_ops.sched" <<'EOF_SCHED'
a = data(shape=[4], init=fill, value=1)
repeat 4096 {
  repeat 4095 {
    b = scale(a, scale=2)
  }
}
fetch(b)
EOF_SCHED
OVL_HOST_MEMORY=4000000000
export OVL_HOST_MEMORY
for args in "-n 1 -w 0" "--races"; do
  t0=$(date +%s)
  if run 2 "many-ops $args" $args "$tmp/many_ops.sched" &&
    has err 'many_ops\.sched: the program has 16773121 ops after repeat expansion; the limit is [0-9]+ \(' &&
    has err 'this machine has 4\.0 GB, from OVL_HOST_MEMORY\)\. Use fewer or smaller repeat blocks' &&
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ] && [ $(( $(date +%s) - t0 )) -lt 3 ]
  then ok "16.7 M ops refused at once ($args)"; else ko "16.7 M ops refused at once ($args)"; fi
done
unset OVL_HOST_MEMORY
# Where the ops outweigh the variables, the header says what they cost.
if run 0 many-ops-header -n 1 -w 0 --mode=async --no-races -D n=1000 "$src/schedules/good/missing_wait_compute.sched" &&
  ! has out ' ops \(' &&
  printf 'a = data(shape=[4], init=fill, value=1)\nrepeat 1000 {\n  b = scale(a, scale=2)\n}\nfetch(b)\n' >"$tmp/ops.sched" &&
  run 0 many-ops-header2 -n 1 -w 0 "$tmp/ops.sched" &&
  has out '^overlap_sim .*, 0\.0 MB/rank, 1001 ops \([0-9.]+ [kM]B of host memory\), 1 iteration '
then ok "header: the ops' memory where it outweighs the variables"; else ko "header: the ops' memory where it outweighs the variables"; fi

# Schedule errors: file:line:col and exit 2, nothing runs.
printf 'a = data(shape=[4])\nb = assgn(a)\n' >"$tmp/bad.sched"
if run 2 parse-error "$tmp/bad.sched" && has err "bad\.sched:2:5: .*unknown op 'assgn'" && ! has out '^sync'
then ok "schedule error"; else ko "schedule error"; fi
if run 2 missing-file "$tmp/nope.sched" && has err 'nope\.sched: No such file'
then ok "missing schedule file"; else ko "missing schedule file"; fi
if run 2 bad-define -D nosuch=3 && has err 'nosuch'
then ok "-D of an unknown param"; else ko "-D of an unknown param"; fi

# Where a schedule is found: a relative name that is not a file from here
# is looked up in $OVL_SCHEDULE_PATH, then in the tool's schedules (the
# source tree's, from the build tree); ./NAME is not looked up; the
# default is never the current directory's seed.sched.
mkdir "$tmp/here" "$tmp/p1" "$tmp/p2"
printf 'a = data(shape=[4])\nb = scale(a, scale=2.0)\nfetch(b)\n' >"$tmp/p2/mine.sched"
printf 'a = data(shape=[4])\nb = assgn(a)\n' >"$tmp/here/seed.sched"
cp "$tmp/p2/mine.sched" "$tmp/p1/cwd_only.sched"
# run_in DIR EXPECTED_EXIT [NAME=VALUE]... ARGS...: the tool run from DIR.
run_in() {
  d=$1 want=$2
  shift 2
  (cd "$d" && env "$@") >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" -eq "$want" ] || { echo "    exit $got, expected $want"; return 1; }
}
if run_in "$tmp/here" 4 "$tool" --races bad/cross_ring.sched &&
  has out "^1 race in $src/schedules/bad/cross_ring\.sched \(2 ranks\)\$" &&
  run_in "$tmp/here" 0 OVL_SCHEDULE_PATH="$tmp/nowhere:$tmp/p2" "$tool" --races mine.sched &&
  has out "^no races in $tmp/p2/mine\.sched " &&
  run_in "$tmp/p1" 0 OVL_SCHEDULE_PATH="$tmp/p2" "$tool" --races cwd_only.sched &&
  has out '^no races in cwd_only\.sched ' &&
  run_in "$tmp/here" 0 "$tool" --races &&
  has out "^no races in $src/schedules/seed\.sched \(775 ops checked\)\$" &&
  run_in "$tmp/here" 2 OVL_SCHEDULE_PATH="$tmp/p2" "$tool" --races ./mine.sched &&
  has err '^overlap_sim: \./mine\.sched: No such file' && ! has err 'looked for' &&
  run_in "$tmp/here" 2 "$tool" --races nope/none.sched &&
  has err '^overlap_sim: nope/none\.sched: No such file or directory$' &&
  has err "^overlap_sim: \\(looked for nope/none\\.sched here, in [\$]OVL_SCHEDULE_PATH and in $src/schedules\\)\$"
then ok "schedule search path"; else ko "schedule search path"; fi
# A default seed.sched of one's own (found on the path) without a `steps`
# param gets no -D steps from the default run, at any rank count.
mkdir "$tmp/own" && cp "$tmp/p2/mine.sched" "$tmp/own/seed.sched"
if run_in "$tmp/here" 0 OVL_SCHEDULE_PATH="$tmp/own" "$tool" --backend=cpu -r 4 -n 1 -w 0 --trials=1 &&
  has out "schedule $tmp/own/seed\.sched, 0\.0 MB/rank" && ! has out '^  \+ ' && has out '^result: PASS$'
then ok "an own default seed.sched without steps"; else ko "an own default seed.sched without steps"; fi

# Bad flags: exit 2 and the flag named.
for args in "--mode=fast:--mode" "--ranks=0:--ranks" "--ranks=x:--ranks" "--iters=0:--iters" \
  "--warmup=-1:--warmup" "--rtol=abc:--rtol" "--atol=-1:--atol" "--show=-2:--show" \
  "--timeout=0:--timeout" "--backend=tpu:--backend" "--bogus:--bogus" "-n:-n" "-D:-D" \
  "-Dnoequals:-D" "--comm-priority=max:--comm-priority" "--nccl-max-ctas=x:--nccl-max-ctas" \
  "--nccl-min-ctas=65:--nccl-min-ctas"; do
  arg=${args%%:*} flag=${args#*:}
  if run 2 "$arg" "$arg" && has err "$flag" && has err "Try '.*--help'"
  then ok "bad flag $arg"; else ko "bad flag $arg"; fi
done
# -n counts the timed iterations and -w the untimed ones before them, as in
# nccl-tests and overlap_sweep (default 2 + 8).
if run 0 iters-warmup -n 2 -w 3 -D cols=10 -v --trials=1 &&
  has out ', 5 iterations \(3 warmup, 2 timed\)$' &&
  [ "$(grep -c '^       iterations (ms): [0-9.]* [0-9.]*$' "$tmp/out")" -eq 2 ] &&
  run 0 iters-default -q -D cols=10 --json="$tmp/iters.json" &&
  grep -q '"iters": 10, "warmup": 2, "timed": 8,' "$tmp/iters.json" &&
  run 0 iters-warmup-more -n 1 -w 4 -D cols=10 && has out ', 5 iterations \(4 warmup, 1 timed\)$'
then ok "-n timed iterations, -w warmup before them"; else ko "-n timed iterations, -w warmup before them"; fi
if run 2 two-schedules a.sched b.sched && has err 'one schedule'
then ok "two schedules"; else ko "two schedules"; fi

# CUDA-only tuning on the cpu backend: a clear refusal.
if run 2 cpu-tuning --nccl-max-ctas=4 && has err 'cuda backend'
then ok "cuda tuning refused on cpu"; else ko "cuda tuning refused on cpu"; fi
# NCCL's CTA limits out of order: refused with the flags, before a world
# is made (on any backend), as overlap_sweep refuses them.
if run 2 ctas-order --nccl-min-ctas=8 --nccl-max-ctas=4 && [ ! -s "$tmp/out" ] &&
  has err '^overlap_sim: --nccl-min-ctas \(8\) is larger than --nccl-max-ctas \(4\)$'
then ok "--nccl-min-ctas above --nccl-max-ctas"; else ko "--nccl-min-ctas above --nccl-max-ctas"; fi

# --op-times: a table per source line and stream.
if run 0 op-times --op-times -n 2 -w 1 -D cols=10 &&
  has out '^op times \(device clock' &&
  has out '^async +31  c_allreduce_sum +comm\[0\] +64 +[0-9.]+ +[0-9.]+$' &&
  has out '^sync +31  c_allreduce_sum +calc +64 ' &&
  has out '^async +33  scale +calc +640 '
then ok "--op-times"; else ko "--op-times"; fi

# JSON checks need python3; without it only grep-level checks are made.
if command -v python3 >/dev/null 2>&1 && python3 -c 'import json' 2>/dev/null; then
  have_python=1
else
  have_python=0
  echo "# python3 not found: JSON files are checked with grep only"
fi
# json_ok KIND FILE ARGS...: tests/check_json.py, or true without python3.
json_ok() {
  [ "$have_python" -eq 0 ] && return 0
  python3 "$src/tests/check_json.py" "$@" >>"$tmp/err" 2>&1
}

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
if run 0 trials-default -n 1 -w 0 -D cols=10 && [ "$(grep -Ec '^async +[0-9] ' "$tmp/out")" -eq 5 ] &&
  has out '^5 trials: ' &&
  printf 'x = data(shape=[4], init=fill, value=1)\ndelay(us=5100000)\ny = scale(x, scale=2)\nfetch(y)\n' >"$tmp/slow.sched" &&
  run 0 trials-default-long -n 1 -w 0 --mode=async --no-races "$tmp/slow.sched" &&
  [ "$(grep -Ec '^async +1 ' "$tmp/out")" -eq 1 ] && ! has out '^async +2 ' && ! has out 'trials:'
then ok "--trials default: 5 short trials, one long"; else ko "--trials default: 5 short trials, one long"; fi
if run_racy 1 trials-mismatch --trials=2 -n 2 -w 0 --mode=async "$src/schedules/bad/missing_wait_compute.sched" &&
  has out '^  async \(trial 1\): rank 0 c: 4096 of 4096 elements differ; first at ' &&
  ! has out '^  async \(trial 2\): ' && has out '^  async: the check failed in 2 of 2 trials \(1, 2\)$'
then ok "--trials: the first failing trial's lines, and which failed"; else ko "--trials: the first failing trial's lines, and which failed"; fi
if run 2 trials-zero --trials=0 && has err -- "--trials: '0' is not a number from 1 to 1000" &&
  run 2 trials-races --trials=2 --races && has err -- '--trials repeats a run: --races runs nothing timed'
then ok "--trials refused: 0, with --races"; else ko "--trials refused: 0, with --races"; fi

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

# --json=FILE: the results of a run, with stable keys (README).
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

# User streams end to end (tests/schedules/user_streams.sched: `side` and
# `copy`, ordered by named events, beside calc and comm[0]): both forms run
# right, also under chaos; the trace, the picture, --op-times and the race
# report name the user streams.
us=$src/tests/schedules/user_streams.sched
for args in "-n 3 -w 1" "--chaos=1 -n 2 -w 0"; do
  if run 0 "user-streams $args" $args "$us" &&
    has out '^sync .* ok \(512 elements\); no races$' && has out '^async .* ok \(512 elements\); no races$' &&
    has out '^result: PASS$'
  then ok "user streams: sync and async PASS ($args)"; else ko "user streams: sync and async PASS ($args)"; fi
done
if run 0 user-streams-trace -n 3 -w 1 --trace="$tmp/us.json" --svg="$tmp/us.svg" "$us" &&
  [ "$(grep -o '"name":"thread_name","args":{"name":"side"}' "$tmp/us.json" | wc -l)" -eq 4 ] &&
  [ "$(grep -o '"name":"thread_name","args":{"name":"copy"}' "$tmp/us.json" | wc -l)" -eq 4 ] &&
  grep -q '"name":"scale","cat":"compute","args":{[^}]*"stream":"side"' "$tmp/us.json" &&
  grep -q '>r1 side<' "$tmp/us.svg" && grep -q '>r0 copy<' "$tmp/us.svg" &&
  json_ok trace "$tmp/us.json" 2 sync,async
then ok "user streams: --trace lanes (thread_name side, copy) and --svg lanes"; else ko "user streams: --trace lanes (thread_name side, copy) and --svg lanes"; fi
if run 0 user-streams-op-times --op-times -n 3 -w 1 "$us" &&
  has out '^sync +11  scale +side +1 +[0-9.]+ +[0-9.]+$' && has out '^async +11  scale +side +1 ' &&
  has out '^async +12  scale +copy +1 ' && has out '^async +19  c_allreduce_sum +comm\[0\] +1 '
then ok "user streams: --op-times rows name the stream"; else ko "user streams: --op-times rows name the stream"; fi
if run 4 side-race-json --races --json "$src/tests/schedules/side_race.sched" &&
  grep -q '"first":{"line":5,"col":5,"op":"scale","stream":"side","access":"write"}' "$tmp/out" &&
  grep -q '"second":{"line":6,"col":5,"op":"elementwise_add","stream":"calc","access":"read"}' "$tmp/out" &&
  grep -q '"fix":"insert event_record(b, event=b_ready, stream=side) and stream_wait_event(b, event=b_ready, stream=calc) before line 6","fix_checked":true' "$tmp/out" &&
  grep -q '"count":1' "$tmp/out" &&
  run 4 side-race --races "$src/tests/schedules/side_race.sched" &&
  has out '^  write  scale +.*side_race\.sched:5  side$'
then ok "user streams: --races --json gives \"stream\":\"side\""; else ko "user streams: --races --json gives \"stream\":\"side\""; fi

# matmul_v2 (issue 17): the GEMM schedules on the cpu backend.
if run 0 gemm-overlap --mode=all -n 2 -w 1 "$src/schedules/gemm_overlap.sched" &&
  has out 'hidden=64\* dtype=bfloat16' && has out '^comp ' && has out '^comm ' &&
  has out '^async .*n/a \(nothing fetched\); no races' &&
  has out '^ideal speedup: [0-9.]+x' && has out '^overlap efficiency: -?[0-9.]+' &&
  has out '^result: PASS$'
then ok "gemm_overlap.sched --mode=all"; else ko "gemm_overlap.sched --mode=all"; fi
# matmul.sched's 96 rows: 64 sampled (96 x 96 a rank: 6144 elements in 64
# rows, 3072 not checked), and all of them with --check-rows=all.
if run 0 matmul-sampled -n 2 -w 1 --mode=both "$src/schedules/matmul.sched" &&
  has out '^sync .* ok \(12288 elements in sampled rows; 6144 not checked\)' &&
  has out '^async .* ok \(12288 elements in sampled rows; 6144 not checked\)' &&
  run 0 matmul-all-rows -n 2 -w 1 --mode=async --check-rows=all "$src/schedules/matmul.sched" &&
  has out '^async .* ok \(18432 elements\)' &&
  run 0 matmul-8-rows -n 2 -w 1 --mode=async --check-rows=8 -D dtype=float32 "$src/schedules/matmul.sched" &&
  has out '^async .* ok \(1536 elements in sampled rows; 16896 not checked\)'
then ok "matmul.sched: sampled rows, --check-rows"; else ko "matmul.sched: sampled rows, --check-rows"; fi
if run 0 matmul-json -n 2 -w 1 --mode=async --json="$tmp/mm.json" "$src/schedules/matmul.sched" &&
  grep -q '"tf32": "off", "check_rows": 64' "$tmp/mm.json" &&
  grep -q '"status": "ok", "checked": 12288, "unchecked": 6144' "$tmp/mm.json" &&
  grep -q '"var": "out", "dtype": "bfloat16", .*"checked": 6144,' "$tmp/mm.json" &&
  run 0 matmul-json-all -n 2 -w 1 --mode=async --check-rows=all --json="$tmp/mm2.json" "$src/schedules/matmul.sched" &&
  grep -q '"check_rows": null' "$tmp/mm2.json" &&
  json_ok results "$tmp/mm.json" async
then ok "matmul.sched --json: tf32, check_rows, unchecked"; else ko "matmul.sched --json: tf32, check_rows, unchecked"; fi
if run 2 tf32-cpu --tf32=on -n 1 -w 0 "$src/schedules/matmul.sched" &&
  has err "^overlap_sim: backend 'cpu' has no TF32 matrix multiply" &&
  run 0 tf32-off-cpu --tf32=off -n 1 -w 0 --mode=async "$src/schedules/matmul.sched" &&
  has out '^result: PASS$' && "$tool" --help | grep -q -- '--tf32=on|off' &&
  "$tool" --help | grep -q -- '--check-rows=N|all'
then ok "--tf32 on cpu, --help"; else ko "--tf32 on cpu, --help"; fi
# float16 and bfloat16: the seed passes in each with 12 steps (64 would
# overflow float16's range, 65504, and a fetched infinity fails) (per-dtype tolerances, in
# the JSON per variable; options.rtol and atol null for the defaults); a
# mismatch names its dtype's tolerance, and each dtype's when they differ.
for dt in float16 bfloat16; do
  sed "s/dtype=float32/dtype=$dt/" "$src/schedules/seed.sched" >"$tmp/seed_$dt.sched"
  [ $dt = float16 ] && r=0.002 || r=0.016
  if run 0 "seed-$dt" -n 2 -w 1 -D cols=10 -D steps=12 --json="$tmp/$dt.json" "$tmp/seed_$dt.sched" &&
    has out '^sync .* ok \(' && has out '^async .* ok \(' && has out '^result: PASS$' &&
    grep -q "\"dtype\": \"$dt\", \"rtol\": $r, \"atol\": 1.0000000000000001e-05" "$tmp/$dt.json" &&
    grep -q '"rtol": null, "atol": null' "$tmp/$dt.json" &&
    json_ok results "$tmp/$dt.json" sync,async
  then ok "seed in $dt"; else ko "seed in $dt"; fi
done
sed 's/dtype=float32/dtype=float16/' "$src/schedules/bad/missing_wait_compute.sched" >"$tmp/mwc16.sched"
if run_racy 1 mismatch-float16 -n 2 -w 0 --mode=async "$tmp/mwc16.sched" &&
  has out '^result: FAIL: numeric mismatch \(tolerance \|got-ref\| <= 1e-05 \+ 0\.002 \* \|ref\|\), and races$'
then ok "a float16 mismatch names float16's tolerance"; else ko "a float16 mismatch names float16's tolerance"; fi
if run_racy 1 mismatch-float16-given -n 2 -w 0 --mode=async --rtol=0.25 "$tmp/mwc16.sched" &&
  has out '^result: FAIL: numeric mismatch \(tolerance \|got-ref\| <= 1e-05 \+ 0\.25 \* \|ref\|\), and races$'
then ok "--rtol given, --atol per dtype"; else ko "--rtol given, --atol per dtype"; fi
printf '%s\n' 'x = data(shape=[64], dtype=float32, init=uniform, seed=7)' \
  'y = data(shape=[64], dtype=bfloat16, init=uniform, seed=8)' \
  'delay(us=20000, stream=calc)' 'c = scale(x, scale=3.0)' 'd = scale(y, scale=3.0)' \
  'c_allreduce_sum(c, ring_id=0)' 'c_allreduce_sum(d, ring_id=0)' \
  'c_wait_comm(c, d, ring_id=0)' 'fetch(c, d)' >"$tmp/mixed.sched"
if run_racy 1 mismatch-mixed -n 2 -w 0 --mode=async "$tmp/mixed.sched" &&
  has out '^result: FAIL: numeric mismatch \(tolerance \|got-ref\| <= atol \+ rtol \* \|ref\|: float32 1e-06 \+ 1e-05, bfloat16 1e-05 \+ 0\.016\), and races$'
then ok "mismatches of two dtypes name each tolerance"; else ko "mismatches of two dtypes name each tolerance"; fi

# More ranks on 3 and 4 ranks still pass.
if run 0 ranks4 --ranks=4 -n 2 -w 1 -D cols=10 && has out '4 ranks' && has out '^result: PASS$'
then ok "--ranks=4"; else ko "--ranks=4"; fi

# -q prints only the verdict.
if run 0 quiet -q -n 2 -w 1 -D cols=10 && [ "$(wc -l <"$tmp/out")" -eq 1 ] && has out '^result: PASS$'
then ok "-q"; else ko "-q"; fi
# -v prints the iterations.
if run 0 verbose -v -n 2 -w 1 -D cols=10 && has out 'iterations \(ms\): [0-9.]+ [0-9.]+$'
then ok "-v"; else ko "-v"; fi

# One number syntax for every flag, and messages that say the limits: the
# smallest double is a tolerance; 1e308 is above --rtol's limit.
if run 0 tiny-tolerance -q -n 1 -w 0 --trials=1 --rtol=4.9e-324 --atol=1e-3 \
  "$src/schedules/good/seed_small.sched" && has out '^result: PASS$' &&
  run 2 rtol-limit --rtol=1e308 && has err "^overlap_sim: --rtol: '1e308' is not a number from 0 to 1e300$" &&
  run 2 ranks-plus --ranks=+5 && has err "^overlap_sim: --ranks: '\+5' is not a number from 1 to 64$" &&
  run 2 timeout-hex --timeout=0x10 && has err "--timeout: '0x10' is not a number of seconds"
then ok "numbers: 4.9e-324 taken; 1e308, +5, 0x10 refused with the limits"; else ko "numbers: 4.9e-324 taken; 1e308, +5, 0x10 refused with the limits"; fi

# A launcher's variable left in the environment, no launcher: the tool
# prints as one process (process 0 of 1), with a note naming the variable
# (built with MPI: MPI finds one process; without: every process runs
# alone), never silently as a process whose process 0 is elsewhere.
seed_small=$src/schedules/good/seed_small.sched
if OMPI_COMM_WORLD_RANK=1 run 0 launcher-rank-1 -n 1 -w 0 --trials=1 "$seed_small" &&
  has out '^overlap_sim .*backend cpu' && has out '^result: PASS$' &&
  has err '^overlap_sim: .*OMPI_COMM_WORLD_RANK=1.*(runs alone|one process)' &&
  [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  PMI_RANK=3 run 2 launcher-rank-3-usage --ranks=0 "$seed_small" &&
  has err "^overlap_sim: --ranks: '0' is not a number from 1 to 64$" && has err 'PMI_RANK=3'
then ok "OMPI_COMM_WORLD_RANK=1, PMI_RANK=3 without a launcher: printed as one process, with a note"
else ko "OMPI_COMM_WORLD_RANK=1, PMI_RANK=3 without a launcher: printed as one process, with a note"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
