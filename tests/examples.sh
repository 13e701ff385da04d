#!/bin/sh
# End-to-end tests of the issue 13 examples (schedules/{good,bad}/
# pipeline_1f1b, ddp_buckets, moe_alltoall, two_rings_order) through
# tools/overlap_sim on the cpu backend, on 2, 3, 4 and 8 ranks: each fixed
# twin runs in both modes and passes the numeric check with no finding;
# each bad one is found by the check (exit 4, nothing run) as the kind of
# bug its header says: the pipeline's lone sends and the two rings' orders
# through host syncs deadlocks, DDP's buckets in rank-dependent order and
# MoE's skipped dispatch mismatches. Run anyway (--no-races), the
# deadlocks hang until the timeout and its flight record (exit 3), and the
# reference refuses the mismatched ones (exit 3).
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-examples.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" "$tmp/err" | head -40; }

# run EXPECTED_EXIT ARGS...: runs the tool on the cpu backend. (Runs give
# --trials=1: the default repeats a short run up to 5 times.)
run() {
  want=$1
  shift
  "$tool" --backend=cpu "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then return 0; fi
  echo "    exit $got, expected $want"
  return 1
}

# has FILE PATTERN: grep -E in out or err.
has() { grep -Eq -- "$2" "$tmp/$1"; }

for n in 2 3 4 8; do
  for ex in pipeline_1f1b ddp_buckets moe_alltoall two_rings_order; do
    good=$src/schedules/good/$ex.sched
    bad=$src/schedules/bad/$ex.sched
    if run 0 -r "$n" -n 2 -w 0 --trials=1 "$good" &&
      has out "^sync .* ok \\([0-9]+ elements\\); no races\$" &&
      has out "^async .* ok \\([0-9]+ elements\\); no races\$" &&
      has out '^result: PASS$'
    then ok "good/$ex on $n ranks: right"; else ko "good/$ex on $n ranks: right"; fi
    if run 0 --races -r "$n" "$good" &&
      has out "^check: 0 races, 0 mismatches, 0 deadlocks in .* \\($n ranks\\)\$"
    then ok "good/$ex on $n ranks: no finding"; else ko "good/$ex on $n ranks: no finding"; fi

    case $ex in
    pipeline_1f1b)
      # The last two stages both send first: the cycle between them.
      kind="^check: 0 races, 0 mismatches, [1-9][0-9]* deadlocks? in "
      what="^deadlock 1: rank $((n - 2)) comm\\[0\\] waits at line [0-9]+ \\(send_v2 to rank $((n - 1)), ring 0\\) for rank $((n - 1)), whose comm\\[0\\] is blocked at line [0-9]+ \\(send_v2 to rank $((n - 2)), ring 0\\)" ;;
    ddp_buckets)
      kind="^check: 0 races, 2 mismatches, 0 deadlocks in "
      what="^mismatch 1: ring 0 collective #1: rank 0 issues c_allreduce_avg of 'g2' .* issues? c_allreduce_avg of 'g1' .*they differ in variable" ;;
    moe_alltoall)
      kind="^check: 0 races, 2 mismatches, 0 deadlocks in "
      what="^mismatch 2: ring 0 collective #2: .* rank 0 never issues it" ;;
    two_rings_order)
      # Through the host syncs (async form).
      kind="^check: 0 races, 0 mismatches, [1-9][0-9]* deadlocks? in "
      what="^deadlock 1: rank 0 comm\\[1\\] waits at line [0-9]+ \\(c_allreduce_sum, ring 1 collective #1\\) for rank 1, whose host is blocked at line [0-9]+ \\(c_sync_comm_stream, ring 0\\)" ;;
    esac
    if run 4 --races -r "$n" "$bad" && has out "$kind" && has out "$what"
    then ok "bad/$ex on $n ranks: found"; else ko "bad/$ex on $n ranks: found"; fi
    if run 4 -r "$n" -n 2 -w 0 --trials=1 "$bad" && has out '^result: FAIL: .*\(nothing ran: ' &&
      ! has out '^(sync|async) +[0-9]'
    then ok "bad/$ex on $n ranks: not run"; else ko "bad/$ex on $n ranks: not run"; fi
  done
done

# Run anyway: the pipeline's deadlock ends at the timeout with the flight
# record (every rank enqueued sends, none completed); the reference refuses
# a program whose ranks disagree on a collective.
# The two runs that time out (2 s each) wait side by side: the second
# starts in the background, with files of its own, and is checked after
# the first.
start=$(date +%s)
"$tool" --backend=cpu --no-races --timeout=2 -r 3 -n 2 -w 0 --trials=1 \
  "$src/schedules/bad/two_rings_order.sched" >"$tmp/rings.out" 2>"$tmp/rings.err" &
rings_pid=$!
if run 3 --no-races --timeout=2 -r 4 -n 2 -w 0 --trials=1 "$src/schedules/bad/pipeline_1f1b.sched" &&
  has err 'timed out after 2\.0 s' && has err 'flight record: rank 0 ring 0: enqueued #[0-9]+ ' &&
  has err 'completed nothing' && [ $(($(date +%s) - start)) -lt 15 ]
then ok "bad/pipeline_1f1b run anyway: timeout and flight record"
else ko "bad/pipeline_1f1b run anyway: timeout and flight record"; fi
wait "$rings_pid"
rings_rc=$?
cp "$tmp/rings.out" "$tmp/out"
cp "$tmp/rings.err" "$tmp/err"
if [ "$rings_rc" -eq 3 ] &&
  has err 'timed out after 2\.0 s' && has err 'flight record: ' &&
  [ $(($(date +%s) - start)) -lt 15 ]
then ok "bad/two_rings_order run anyway: timeout and flight record"
else ko "bad/two_rings_order run anyway: timeout and flight record"; fi
for ex in ddp_buckets moe_alltoall; do
  if run 3 --no-races -r 3 -n 2 -w 0 --trials=1 "$src/schedules/bad/$ex.sched" &&
    has err "^overlap_sim: [^ ]*/$ex\\.sched:[0-9]+:[0-9]+: reference: ring 0 collective #1: rank 0 issues .*; they differ in variable \\(the same size: a run would mix buffers silently\\)$"
  then ok "bad/$ex run anyway: the reference refuses it"
  else ko "bad/$ex run anyway: the reference refuses it"; fi
done

echo "examples.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
