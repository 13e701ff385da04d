#!/bin/sh
# What tools/overlap_sim --races says of the stream bugs of schedules/bad/
# (a wait before its record, races carried by a repeat or within a step,
# user streams, compute on a comm stream), and their twins' runs.
src=${srcdir:-.}
. "$src/tests/lib.sh"

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

finish
