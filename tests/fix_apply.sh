#!/bin/sh
# The fixed schedule: `overlap_sim --fix[=FILE]` (docs/ORDERING.md, "The
# fix") applies every checked hint (races, mismatches,
# deadlocks) to the schedule's text.
#
# - Every schedule of schedules/bad/ is fixed whole: --fix=FILE exits 0,
#   FILE passes --races, and runs on the cpu backend (--trials=1) with the
#   right numbers (result: PASS).
# - Without FILE the change is a unified diff on stdout, which patch(1)
#   applies to give FILE's text, and what was applied goes to stderr.
# - A wait the hint makes redundant is moved, not duplicated.
# - A clean schedule has nothing to fix (empty diff, exit 0); one with no
#   known fix exits 4 and says what is left.
src=${srcdir:-.}
. "$src/tests/lib.sh"

for f in "$src"/schedules/bad/*.sched; do
  b=${f##*/}
  : >"$tmp/why"
  "$tool" -q --fix="$tmp/$b" "$f" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "--fix exit $rc, expected 0" >"$tmp/why"
  elif ! "$tool" --races "$tmp/$b" >"$tmp/out" 2>"$tmp/err"; then
    echo "the fixed schedule fails --races" >"$tmp/why"
  elif ! "$tool" --backend=cpu --trials=1 -n 1 -w 0 "$tmp/$b" >"$tmp/out" 2>"$tmp/err" ||
    ! grep -qx 'result: PASS' "$tmp/out"; then
    echo "the fixed schedule does not run right" >"$tmp/why"
  fi
  if [ ! -s "$tmp/why" ]; then ok "$b: --fix=FILE passes --races and runs right"
  else ko "$b: --fix=FILE passes --races and runs right"; fi
done

# Without FILE: a diff on stdout that gives the same text.
for b in missing_wait_compute.sched ddp_buckets.sched pipeline_1f1b.sched; do
  : >"$tmp/why"
  "$tool" --fix "$src/schedules/bad/$b" >"$tmp/diff" 2>"$tmp/err"
  rc=$?
  cp "$tmp/diff" "$tmp/out"
  if [ "$rc" -ne 0 ]; then echo "--fix exit $rc" >"$tmp/why"
  elif ! head -1 "$tmp/diff" | grep -q '^--- .*/schedules/bad/'"$b"'$' ||
    ! grep -q '^@@ -[0-9]*,[0-9]* +[0-9]*,[0-9]* @@$' "$tmp/diff"; then
    echo "not a unified diff" >"$tmp/why"
  elif ! grep -q '^fix: applied ' "$tmp/err" ||
    ! grep -qx 'fix: [0-9]* hints\{0,1\} applied; it has no findings (--races passes)' "$tmp/err"; then
    echo "stderr does not say what was applied" >"$tmp/why"
  elif command -v patch >/dev/null 2>&1; then
    cp "$src/schedules/bad/$b" "$tmp/p.sched"
    if ! patch -s "$tmp/p.sched" <"$tmp/diff" >"$tmp/err" 2>&1; then
      echo "patch fails" >"$tmp/why"
    elif ! cmp -s "$tmp/p.sched" "$tmp/$b"; then
      echo "the patched text is not --fix=FILE's" >"$tmp/why"
    fi
  fi
  if [ ! -s "$tmp/why" ]; then ok "$b: --fix prints a diff that patch applies"
  else ko "$b: --fix prints a diff that patch applies"; fi
done

# A wait the hint makes redundant is moved: write_while_collective_reads
# waits for ring 0 once, before the write, with both inputs.
: >"$tmp/why"; : >"$tmp/err"
cp "$tmp/write_while_collective_reads.sched" "$tmp/out" 2>/dev/null
n=$(grep -c '^c_wait_comm(' "$tmp/write_while_collective_reads.sched" 2>/dev/null)
if [ "$n" != 1 ]; then echo "$n c_wait_comm lines, expected 1" >"$tmp/why"
elif [ "$(grep -n '^c_wait_comm(c, s, ring_id=0)$' "$tmp/write_while_collective_reads.sched" | cut -d: -f1)" -ge \
  "$(grep -n '^c = scale(x, scale=5.0)$' "$tmp/write_while_collective_reads.sched" | cut -d: -f1)" ]; then
  echo "the wait is not before the write" >"$tmp/why"
fi
if [ ! -s "$tmp/why" ]; then ok "a redundant wait is moved, not duplicated"
else ko "a redundant wait is moved, not duplicated"; fi
# Also in a loop: loop_carried_race's wait moves to the top of the body.
: >"$tmp/why"
cp "$tmp/loop_carried_race.sched" "$tmp/out" 2>/dev/null
if [ "$(grep -c 'c_wait_comm(s, ring_id=0)' "$tmp/loop_carried_race.sched")" -ne 2 ] ||
  ! awk '/^repeat steps/ { getline; exit !($0 == "  c_wait_comm(s, ring_id=0)") }' "$tmp/loop_carried_race.sched"; then
  echo "the loop's wait is not moved to the top of its body" >"$tmp/why"
fi
if [ ! -s "$tmp/why" ]; then ok "a redundant wait in a loop is moved"
else ko "a redundant wait in a loop is moved"; fi

# Nothing to fix; no fix known (exit 4, what is left said).
: >"$tmp/why"
"$tool" --fix "$src/schedules/good/missing_wait_compute.sched" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$tmp/out" ] ||
  ! grep -qx 'fix: 0 hints applied; it has no findings (--races passes)' "$tmp/err"; then
  echo "exit $rc, expected 0 and no diff" >"$tmp/why"
fi
if [ ! -s "$tmp/why" ]; then ok "a clean schedule: nothing to fix"; else ko "a clean schedule: nothing to fix"; fi
: >"$tmp/why"
"$tool" --fix="$tmp/pd.sched" "$src/tests/order/bad/pair_dtype_differs.sched" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 4 ] || ! grep -q '^  fix: none known ' "$tmp/out" ||
  ! grep -qx "fix: 0 hints applied, the fixed schedule written to $tmp/pd.sched; left: 0 races, 1 mismatch, 0 deadlocks (no checked hint removes it)" "$tmp/out"; then
  echo "exit $rc, expected 4 and what is left" >"$tmp/why"
fi
if [ ! -s "$tmp/why" ]; then ok "no fix known: exit 4, what is left said"; else ko "no fix known: exit 4, what is left said"; fi

# The flags: what --fix cannot go with; FILE checked before anything.
: >"$tmp/why"
for a in "--fix --replay" "--fix=- " "--fix --no-races" "--fix --trials=2" "--fix --json"; do
  # shellcheck disable=SC2086
  "$tool" $a "$src/schedules/bad/missing_wait_compute.sched" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 2 ] || echo "$a: exit $rc, expected 2" >>"$tmp/why"
done
"$tool" --fix="$src/schedules/bad/missing_wait_compute.sched" "$src/schedules/bad/missing_wait_compute.sched" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || echo "--fix=SCHEDULE: exit $rc, expected 2 (it would overwrite the schedule)" >>"$tmp/why"
"$tool" --fix="$tmp/no/such/dir/f.sched" "$src/schedules/bad/missing_wait_compute.sched" >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ "$rc" -eq 3 ] && grep -q -- "--fix=$tmp/no/such/dir/f.sched" "$tmp/err"; } ||
  echo "--fix=BAD/PATH: exit $rc, expected 3 naming it" >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "--fix: refused flags, FILE checked"; else ko "--fix: refused flags, FILE checked"; fi

finish
