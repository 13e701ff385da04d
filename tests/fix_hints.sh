#!/bin/sh
# The fix hints of `overlap_sim --races` fix (README, "Finding ordering
# bugs"): for every schedule under schedules/bad/, tests/schedules/
# sync_only_race.sched and the seed without its final c_wait_comm, each
# "fix (checked):" line is applied to the text mechanically, as a user
# would, and --races run again on the result: the form that raced must be
# clean (each of these has one race a form). The hint grammar:
#
#   fix (checked): insert STATEMENT before line N
#   fix (checked): insert STATEMENT and STATEMENT before line N
#
# each STATEMENT ends with ')'; they go in as new lines, in order, just
# before line N.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-fix.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" | head -40; }

# apply HINT FILE OUT: the edit of a hint (the text after "fix (checked): ")
# applied to FILE, into OUT.
apply() {
  line=$(printf '%s\n' "$1" | sed -n 's/^insert .* before line \([0-9][0-9]*\)$/\1/p')
  stmts=$(printf '%s\n' "$1" | sed -n 's/^insert \(.*\) before line [0-9][0-9]*$/\1/p' |
    awk '{ gsub(/\) and /, ")\n"); print }')
  [ -n "$line" ] && [ -n "$stmts" ] || return 1
  printf '%s\n' "$stmts" >"$tmp/stmts"
  awk -v n="$line" -v f="$tmp/stmts" \
    'NR == n { while ((getline s < f) > 0) print s } { print }' "$2" >"$3"
}

# check NAME FILE: every checked hint of FILE, applied alone, leaves its
# form clean; FILE has at least one race, and every race a checked hint.
check() {
  name=$1 file=$2
  "$tool" --races "$file" >"$tmp/out" 2>&1
  rc=$?
  if [ "$rc" -ne 4 ]; then
    echo "    --races exit $rc, expected 4"
    ko "$name: races found"
    return
  fi
  if grep -q '^  fix (unchecked)' "$tmp/out"; then
    ko "$name: every race has a checked fix"
    return
  fi
  n=0
  form=
  while IFS= read -r l; do
    case $l in
    '== '*' ==') form=$(printf '%s\n' "$l" | sed 's/^== \(.*\) ==$/\1/') ;;
    '  fix (checked): '*)
      n=$((n + 1))
      hint=${l#  fix (checked): }
      if ! apply "$hint" "$file" "$tmp/fixed.sched"; then
        echo "    cannot apply: $hint" >>"$tmp/log"
        echo bad >>"$tmp/bad"
        continue
      fi
      if ! "$tool" --races --mode="$form" "$tmp/fixed.sched" >"$tmp/after" 2>&1; then
        { echo "    $form form still races after: $hint"; cat "$tmp/after"; } >>"$tmp/log"
        echo bad >>"$tmp/bad"
      fi
      ;;
    esac
  done <"$tmp/out"
  if [ "$n" -gt 0 ] && [ ! -s "$tmp/bad" ]; then
    ok "$name: $n hint(s) applied, clean"
  else
    cat "$tmp/log" >>"$tmp/out" 2>/dev/null
    ko "$name: hints applied leave the form clean"
  fi
  rm -f "$tmp/bad" "$tmp/log"
}

for f in "$src"/schedules/bad/*.sched "$src/tests/schedules/sync_only_race.sched"; do
  check "$(basename "$f")" "$f"
done

# The seed without its final c_wait_comm: the hint puts the wait after the
# loop (before `out = elementwise_sub(c, d)`), not in it.
grep -v '^c_wait_comm(c, ring_id=0)$' "$src/schedules/seed.sched" >"$tmp/seed_nowait.sched"
check "seed without its final c_wait_comm" "$tmp/seed_nowait.sched"
"$tool" --races "$tmp/seed_nowait.sched" >"$tmp/out" 2>&1
n=$(sed -n 's/^  fix (checked): insert c_wait_comm(c, ring_id=0) before line \([0-9]*\)$/\1/p' "$tmp/out")
if [ -n "$n" ] && [ "$(sed -n "${n}p" "$tmp/seed_nowait.sched")" = "out = elementwise_sub(c, d)" ]
then ok "seed: c_wait_comm goes after the loop"; else ko "seed: c_wait_comm goes after the loop"; fi

# The seed without its c_wait_compute: the wait goes before the loop.
grep -v '^c_wait_compute(c, ring_id=0)$' "$src/schedules/seed.sched" >"$tmp/seed_nowc.sched"
check "seed without its c_wait_compute" "$tmp/seed_nowc.sched"
"$tool" --races "$tmp/seed_nowc.sched" >"$tmp/out" 2>&1
n=$(sed -n 's/^  fix (checked): insert c_wait_compute(c, ring_id=0) before line \([0-9]*\)$/\1/p' "$tmp/out")
if [ -n "$n" ] && [ "$(sed -n "${n}p" "$tmp/seed_nowc.sched")" = "repeat 64 {" ]
then ok "seed: c_wait_compute goes before the loop"; else ko "seed: c_wait_compute goes before the loop"; fi

# JSON: the same hint, and whether it was checked.
if "$tool" --races --json "$src/schedules/bad/missing_wait_comm.sched" >"$tmp/out" 2>&1
then ko "--races --json exits 4"
elif grep -q '"fix":"insert c_wait_comm(c, ring_id=0) before line 16","fix_checked":true,"fix_why":null' "$tmp/out"
then ok "--races --json: fix, fix_checked, fix_why"; else ko "--races --json: fix, fix_checked, fix_why"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
