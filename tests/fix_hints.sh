#!/bin/sh
# The fix hints of `overlap_sim --races` fix (docs/ORDERING.md, "The
# fix"): for every schedule under schedules/bad/, tests/schedules/
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

# (The bad schedules of ranks that differ have a mismatch or a deadlock
# and no race: their hints are applied further down.)
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

# The hints of mismatches and deadlocks, applied as a user would (the
# grammar of docs/ORDERING.md, "The fix"; every line one of the file
# as it is; parts joined by "; "):
#
#   put lines N-K in one group         move line N before line M
#   move lines N-K before line M       remove ATTR from line N
#   delete line N                      insert S [and T] before line N
#
# apply_any HINT FILE OUT: the hint applied to FILE into OUT, with awk.
apply_any() {
  printf '%s\n' "$1" | awk 'BEGIN { RS = "; " } { sub(/\n$/, ""); print }' >"$tmp/parts"
  awk -v parts="$tmp/parts" '
    function indent(s) { match(s, /^[ \t]*/); return substr(s, 1, RLENGTH) }
    NR == FNR { line[FNR] = $0; n = FNR; next }
    FNR == 1 {
      while ((getline p < parts) > 0) {
        if (match(p, /^put lines [0-9]+-[0-9]+ in one group$/)) {
          split(substr(p, 11), a, /[- ]/); lo = a[1] + 0; hi = a[2] + 0
          pre[lo] = pre[lo] indent(line[lo]) "group {\n"
          pre[hi + 1] = pre[hi + 1] indent(line[lo]) "}\n"
          for (l = lo; l <= hi; l++) shift[l] = "  "
        } else if (match(p, /^move lines? [0-9]+(-[0-9]+)? before line [0-9]+$/)) {
          q = p; sub(/^move lines? /, "", q); split(q, a, / before line /)
          split(a[1], r, "-"); lo = r[1] + 0; hi = (2 in r) ? r[2] + 0 : lo
          for (l = lo; l <= hi; l++) { pre[a[2] + 0] = pre[a[2] + 0] line[l] "\n"; del[l] = 1 }
        } else if (match(p, /^delete line [0-9]+$/)) {
          del[substr(p, 13) + 0] = 1
        } else if (match(p, /^remove .* from line [0-9]+$/)) {
          q = p; sub(/^remove /, "", q); k = q; sub(/ from line [0-9]+$/, "", q)
          sub(/.* from line /, "", k)
          t = line[k + 0]; i = index(t, ", " q)
          if (i > 0) line[k + 0] = substr(t, 1, i - 1) substr(t, i + 2 + length(q))
          else { i = index(t, q ", "); line[k + 0] = substr(t, 1, i - 1) substr(t, i + 2 + length(q)) }
        } else if (match(p, /^insert .* before line [0-9]+$/)) {
          q = p; sub(/^insert /, "", q); k = q; sub(/ before line [0-9]+$/, "", q)
          sub(/.* before line /, "", k); gsub(/\) and /, ")\n" indent(line[k + 0]), q)
          pre[k + 0] = pre[k + 0] indent(line[k + 0]) q "\n"
        } else { bad = 1 }
      }
    }
    { printf "%s", pre[FNR]; if (!del[FNR]) print shift[FNR] line[FNR] }
    END { printf "%s", pre[n + 1]; exit bad }
  ' "$2" "$2" >"$3"
}

# order_hints NAME FILE [RANKS]: each checked hint of a mismatch or a
# deadlock of FILE, applied alone, leaves fewer findings (the check: line)
# and none of a kind there was none of; or as many deadlocks, every one
# further down than the lines the hint names: the execution, no longer
# stopped at this deadlock, reached the next (the hint's check says so:
# a deadlock out of reach before is not a new one).
order_hints() {
  name=$1 file=$2 ranks=${3:-2}
  : >"$tmp/log"
  "$tool" --races --ranks="$ranks" "$file" >"$tmp/out" 2>&1
  before=$(sed -n 's/^check: \([0-9]*\) races\{0,1\}, \([0-9]*\) mismatch\(es\)\{0,1\}, \([0-9]*\) deadlocks\{0,1\} in .*/\1 \2 \4/p' "$tmp/out")
  hints=$(awk '/^(mismatch|deadlock) [0-9]+: / { on = 1; next }
               /^race [0-9]+: / { on = 0 }
               on && /^  fix \(checked\): / { sub(/^  fix \(checked\): /, ""); print }' "$tmp/out" | sort -u)
  if [ -z "$hints" ]; then
    echo "    no checked hint of a mismatch or a deadlock" >>"$tmp/log"
  fi
  printf '%s\n' "$hints" | while IFS= read -r h; do
    [ -n "$h" ] || continue
    if ! apply_any "$h" "$file" "$tmp/fixed.sched"; then
      echo "    cannot apply: $h" >>"$tmp/log"; continue
    fi
    "$tool" --races --ranks="$ranks" "$tmp/fixed.sched" >"$tmp/after" 2>&1
    after=$(sed -n 's/^check: \([0-9]*\) races\{0,1\}, \([0-9]*\) mismatch\(es\)\{0,1\}, \([0-9]*\) deadlocks\{0,1\} in .*/\1 \2 \4/p' "$tmp/after")
    last=$(printf '%s\n' "$h" | tr -c '0-9\n' ' ' | tr ' ' '\n' | sort -n | tail -1)
    first=$(sed -n 's/^deadlock [0-9]*: rank [0-9]* [^ ]* waits at line \([0-9]*\) .*/\1/p' "$tmp/after" | sort -n | head -1)
    further=0
    [ -n "$first" ] && [ "$first" -gt $((last + 2)) ] && further=1
    # shellcheck disable=SC2086
    set -- $before $after
    if [ "$further" -eq 1 ] && [ $# -eq 6 ] && [ "$4" -eq "$1" ] && [ "$5" -eq "$2" ] &&
      [ "$6" -le "$3" ]; then
      continue
    fi
    if [ $# -ne 6 ] || [ $(($4 + $5 + $6)) -ge $(($1 + $2 + $3)) ] ||
      { [ "$1" -eq 0 ] && [ "$4" -gt 0 ]; } || { [ "$2" -eq 0 ] && [ "$5" -gt 0 ]; } ||
      { [ "$3" -eq 0 ] && [ "$6" -gt 0 ]; }; then
      { echo "    after: $h ($before -> $after)"; cat "$tmp/after"; } >>"$tmp/log"
    fi
  done
  if [ ! -s "$tmp/log" ]; then ok "$name: the hints of its mismatches and deadlocks, applied, fix them"
  else cat "$tmp/log" >>"$tmp/out"; ko "$name: the hints of its mismatches and deadlocks, applied, fix them"; fi
}
for f in ddp_buckets moe_alltoall pipeline_1f1b two_rings_order; do
  order_hints "$f.sched" "$src/schedules/bad/$f.sched"
done
for f in send_send skipped_collective order_swapped rings_opposite_order barrier_behind_recv; do
  order_hints "order/$f.sched" "$src/tests/order/bad/$f.sched"
done
order_hints "order/ring_shift.sched" "$src/tests/order/bad/ring_shift.sched" 4

# JSON: the same hint, and whether it was checked.
if "$tool" --races --json "$src/schedules/bad/missing_wait_comm.sched" >"$tmp/out" 2>&1
then ko "--races --json exits 4"
elif grep -q '"fix":"insert c_wait_comm(c, ring_id=0) before line 16","fix_checked":true,"fix_why":null' "$tmp/out"
then ok "--races --json: fix, fix_checked, fix_why"; else ko "--races --json: fix, fix_checked, fix_why"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
