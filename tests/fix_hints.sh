#!/bin/sh
# The fix hints of `overlap_sim --races` fix (README, "Finding ordering
# bugs"): for every schedule under schedules/bad/, tests/schedules/
# sync_only_race.sched and the seed without a wait, every race must have a
# "fix (checked):" line, which is applied to the text mechanically, as a
# user would, and --races run again on the result: that race is gone from
# its form, which has fewer races than before (and is clean if that was
# its only one). The hint grammar:
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

# races REPORT: one line per race of a --races report,
#   FORM<TAB>VAR<TAB>LINE1<TAB>LINE2<TAB>FIX
# (FIX: what follows "fix (checked): ", or "-" for an unchecked fix).
races() {
  awk '
    # "== async ==", or "== sync, async (the same findings) ==": forms
    # whose findings read the same, printed once; a race of such a section
    # is a race of each of them.
    /^== .* ==$/ {
      h = $0; sub(/^== /, "", h); sub(/ ==$/, "", h)
      sub(/ \(the same findings\)$/, "", h)
      nforms = split(h, forms, ", "); next
    }
    /^race [0-9]+: / {
      v = $0; sub(/^race [0-9]+: \047/, "", v); sub(/\047 on .*/, "", v)
      nacc = 0; next
    }
    /^  (read|write) / {
      if (match($0, /:[0-9]+ /)) l[++nacc] = substr($0, RSTART + 1, RLENGTH - 2)
      next
    }
    /^  fix \(checked\): / {
      f = $0; sub(/^  fix \(checked\): /, "", f)
      for (i = 1; i <= nforms; i++)
        print forms[i] "\t" v "\t" l[1] "\t" l[2] "\t" f
      next
    }
    /^  fix \(unchecked\): / {
      for (i = 1; i <= nforms; i++)
        print forms[i] "\t" v "\t" l[1] "\t" l[2] "\t-"
    }
  ' "$1"
}

# check NAME FILE: each race of FILE has a checked fix; each fix, applied
# alone, removes its race from its form and brings no new one (the form
# has fewer races; one that had one race is clean).
check() {
  name=$1 file=$2
  "$tool" --races "$file" >"$tmp/out" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    ok "$name: no race, nothing to fix"
    return
  elif [ "$rc" -ne 4 ]; then
    echo "    --races exit $rc, expected 4" >>"$tmp/out"
    ko "$name: races found"
    return
  fi
  races "$tmp/out" >"$tmp/races"
  n=0
  : >"$tmp/log"
  while IFS="$(printf '\t')" read -r form var l1 l2 hint; do
    n=$((n + 1))
    if [ "$hint" = "-" ]; then
      echo "    $form: race on '$var' (lines $l1, $l2) has no checked fix" >>"$tmp/log"
      continue
    fi
    before=$(awk -F '\t' -v f="$form" '$1 == f' "$tmp/races" | wc -l)
    if ! apply "$hint" "$file" "$tmp/fixed.sched"; then
      echo "    cannot apply: $hint" >>"$tmp/log"
      continue
    fi
    at=${hint##* before line }
    k=$(printf '%s\n' "$hint" | awk '{ print gsub(/\) and /, "") + 1 }')
    s1=$l1 s2=$l2
    [ "$l1" -ge "$at" ] && s1=$((l1 + k))
    [ "$l2" -ge "$at" ] && s2=$((l2 + k))
    "$tool" --races --mode="$form" "$tmp/fixed.sched" >"$tmp/after" 2>&1
    arc=$?
    races "$tmp/after" >"$tmp/after.races"
    after=$(wc -l <"$tmp/after.races")
    if awk -F '\t' -v v="$var" -v a="$s1" -v b="$s2" \
      '$2 == v && $3 == a && $4 == b { found = 1 } END { exit !found }' "$tmp/after.races" ||
      [ "$after" -ge "$before" ] || { [ "$before" -eq 1 ] && [ "$arc" -ne 0 ]; }; then
      { echo "    $form form after: $hint"; cat "$tmp/after"; } >>"$tmp/log"
    fi
  done <"$tmp/races"
  if [ "$n" -gt 0 ] && [ ! -s "$tmp/log" ]; then
    ok "$name: $n fix(es) applied, each removes its race"
  else
    cat "$tmp/log" >>"$tmp/out"
    ko "$name: fixes applied remove their races"
  fi
}

# (The bad schedules of ranks that differ, a mismatch or a deadlock and no
# race, have no fix hint: tests/examples.sh covers them.)
for f in "$src"/schedules/bad/*.sched "$src/tests/schedules/sync_only_race.sched"; do
  "$tool" --races "$f" 2>/dev/null | grep -q '^race [0-9]*: ' || continue
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
if [ -n "$n" ] && [ "$(sed -n "${n}p" "$tmp/seed_nowc.sched")" = "repeat steps {" ]
then ok "seed: c_wait_compute goes before the loop"; else ko "seed: c_wait_compute goes before the loop"; fi

# Repeat blocks: a race carried from one iteration to the next, and one
# carried by an outer block into an inner one.
printf '%s\n' 'x = data(shape=[8], init=uniform)' 'c = scale(x, scale=1.0)' \
  'c_wait_compute(c, ring_id=0)' 'repeat 4 {' '  c_allreduce_sum(c, ring_id=0)' \
  '  c_wait_comm(c, ring_id=0)' '  y = scale(c, scale=2.0)' '  c = scale(y, scale=0.5)' \
  '}' 'fetch(c)' >"$tmp/carried.sched"
check "a race carried by a loop" "$tmp/carried.sched"
printf '%s\n' 'x = data(shape=[8], init=uniform)' 'c = scale(x, scale=1.0)' \
  'c_wait_compute(c, ring_id=0)' 'repeat 4 {' '  repeat 2 {' '    y = scale(c, scale=2.0)' \
  '  }' '  c_allreduce_sum(c, ring_id=0)' '}' 'c_wait_comm(c, ring_id=0)' 'fetch(y)' \
  >"$tmp/nested.sched"
check "races in nested loops" "$tmp/nested.sched"

# JSON: the same hint, and whether it was checked.
if "$tool" --races --json "$src/schedules/bad/missing_wait_comm.sched" >"$tmp/out" 2>&1
then ko "--races --json exits 4"
elif grep -q '"fix":"insert c_wait_comm(c, ring_id=0) before line 16","fix_checked":true,"fix_why":null' "$tmp/out"
then ok "--races --json: fix, fix_checked, fix_why"; else ko "--races --json: fix, fix_checked, fix_why"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
