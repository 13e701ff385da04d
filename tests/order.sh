#!/bin/sh
# The checks of ranks that differ (issue 13) on the schedules of
# tests/order/: each tests/order/bad/X.sched has a fixed twin
# tests/order/good/X.sched, and each carries its verdict in header lines
# (tests/order/README.md):
#
#   # expect: races=R mismatches=M deadlocks=D   (what the check line counts)
#   # ranks: N                                   (bind for N ranks; 2 if absent)
#   # args: FLAGS                                (more flags, e.g. --mode=async)
#   # run-ranks: N ...                           (a good twin: the rank counts
#                                                  it is clean on, and runs on)
#   # expect-line: TEXT                          (a whole line of the report;
#                                                  @FILE@ is the schedule's path)
#
# `overlap_sim --races` must exit 4 with exactly those counts on its
# "check:" line, and print every expected line; a twin must exit 0 with
# none, at each of its rank counts. A bad schedule run (not --races) must
# stop after the checks (exit 4, nothing run, in seconds: the run would
# hang). Every twin also runs on the cpu backend at each of its rank
# counts and passes the numeric check; so does the smallest send and
# receive, first, so that a send/recv that does not run at all is named as
# such (a failure, never a skip: these runs are what shows a send/recv
# regression). Runs make one trial (--trials=1).
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-order.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/why" "$tmp/out" "$tmp/err" 2>/dev/null | head -40
}

# header FILE KEY: the value of "# KEY: VALUE" (empty if absent).
header() { sed -n "s/^# $2: //p" "$1" | head -1; }

# check FILE RANKS NAME: --races on FILE for RANKS ranks against its
# expectations.
check() {
  f=$1; n=$2; name=$3
  : >"$tmp/why"
  exp=$(header "$f" expect)
  args=$(header "$f" args)
  want_r=$(echo "$exp" | sed -n 's/.*races=\([0-9]*\).*/\1/p')
  want_m=$(echo "$exp" | sed -n 's/.*mismatches=\([0-9]*\).*/\1/p')
  want_d=$(echo "$exp" | sed -n 's/.*deadlocks=\([0-9]*\).*/\1/p')
  if [ -z "$want_r" ] || [ -z "$want_m" ] || [ -z "$want_d" ]; then
    echo "want '# expect: races=R mismatches=M deadlocks=D'" >"$tmp/why"
    : >"$tmp/out"; : >"$tmp/err"
    ko "$name: header"; return
  fi
  # shellcheck disable=SC2086
  "$tool" --races --ranks="$n" $args "$f" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  want_rc=0
  [ $((want_r + want_m + want_d)) -gt 0 ] && want_rc=4
  line=$(sed -n 's/^check: \(.*\) in .*$/\1/p' "$tmp/out")
  plural() { if [ "$1" -eq 1 ]; then echo "$1 $2"; else echo "$1 $3"; fi; }
  want_line="$(plural "$want_r" race races), $(plural "$want_m" mismatch mismatches), $(plural "$want_d" deadlock deadlocks)"
  if [ "$rc" -ne "$want_rc" ]; then
    echo "exit $rc, expected $want_rc" >"$tmp/why"
  elif [ "$line" != "$want_line" ]; then
    echo "check line '$line', expected '$want_line'" >"$tmp/why"
  elif [ -s "$tmp/err" ]; then
    echo "something on stderr" >"$tmp/why"
  fi
  sed -n 's/^# expect-line: //p' "$f" | while IFS= read -r l; do
    l=$(printf '%s\n' "$l" | sed "s|@FILE@|$f|g")
    grep -qxF -- "$l" "$tmp/out" || echo "no line: $l" >>"$tmp/why"
  done
  if [ ! -s "$tmp/why" ]; then ok "$name: $want_line"
  else ko "$name: $want_line"; fi
}

nbad=0
for f in "$src"/tests/order/bad/*.sched; do
  [ -f "$f" ] || continue
  nbad=$((nbad + 1))
  base=${f##*/}
  n=$(header "$f" ranks)
  check "$f" "${n:-2}" "bad/$base"
  : >"$tmp/out"; : >"$tmp/err"
  if [ -f "$src/tests/order/good/$base" ]; then ok "bad/$base: has a twin"
  else echo "no tests/order/good/$base" >"$tmp/why"; ko "bad/$base: has a twin"; fi
done

twins=
for f in "$src"/tests/order/good/*.sched; do
  [ -f "$f" ] || continue
  base=${f##*/}
  rr=$(header "$f" run-ranks)
  : >"$tmp/out"; : >"$tmp/err"
  if [ -z "$rr" ]; then
    echo "no '# run-ranks:' line" >"$tmp/why"; ko "good/$base: header"; continue
  fi
  for n in $rr; do
    check "$f" "$n" "good/$base on $n ranks"
  done
  twins="$twins $f"
done

# A finding stops a run before anything runs: no hang, exit 4, the
# findings and the verdict on stdout.
for case in "rings_opposite_order:0 races, 0 mismatches, 1 deadlock (nothing ran: deadlocks found: a run would hang)" \
            "order_swapped:0 races, 2 mismatches, 0 deadlocks (nothing ran: mismatches found: a run would hang or mix buffers)"; do
  base=${case%%:*}; verdict=${case#*:}
  : >"$tmp/why"
  start=$(date +%s)
  "$tool" --backend=cpu -n 2 -w 0 --trials=1 --timeout=30 "$src/tests/order/bad/$base.sched" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  took=$(($(date +%s) - start))
  if [ "$rc" -ne 4 ]; then echo "exit $rc, expected 4" >"$tmp/why"
  elif ! grep -qxF "result: FAIL: $verdict" "$tmp/out"; then
    echo "no 'result: FAIL: $verdict'" >"$tmp/why"
  elif grep -q '^mode ' "$tmp/out"; then echo "a table: something ran" >"$tmp/why"
  elif [ "$took" -gt 20 ]; then echo "took $took s" >"$tmp/why"
  fi
  if [ ! -s "$tmp/why" ]; then ok "run of bad/$base stops after the checks"
  else ko "run of bad/$base stops after the checks"; fi
done

# --races --json: all three kinds, valid JSON where python3 exists.
: >"$tmp/why"
"$tool" --races --json "$src/tests/order/bad/rings_opposite_order.sched" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 4 ]; then echo "exit $rc, expected 4" >"$tmp/why"
elif command -v python3 >/dev/null 2>&1 && ! python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) >= {"modes", "deadlocks", "mismatches"}, d.keys()
assert d["deadlocks"]["async"]["count"] == 1
assert d["deadlocks"]["sync"]["count"] == 1
assert d["mismatches"]["count"] == 0
assert d["modes"]["async"]["count"] == 0
s = d["deadlocks"]["async"]["deadlocks"][0]["steps"]
assert [(x["rank"], x["stream"]) for x in s] == [(0, "comm[0]"), (1, "host"), (1, "comm[1]"), (0, "host")], s
' "$tmp/out" >"$tmp/why" 2>&1; then :
fi
if [ ! -s "$tmp/why" ]; then ok "--races --json"; else ko "--races --json"; fi

# The smallest send and its receive on cpu (rank 0 sends 4 elements to
# rank 1, which fetches them), then the twins, each at each of its rank
# counts: they run and pass. The cpu backend runs send/recv, so each run
# that fails is a failure of its own (the twins run whether or not the
# smallest one passed): a send/recv regression cannot pass as a skip.
: >"$tmp/why"
printf 'x = data(shape=[4], dtype=float32, init=fill, value=2.0)\nsend_v2(x, peer=1, ring_id=0, use_calc_stream=true, ranks=[0])\ny = recv_v2(peer=0, out_shape=[4], dtype=float32, ring_id=0, use_calc_stream=true, ranks=[1])\nfetch(y, ranks=[1])\n' >"$tmp/probe.sched"
"$tool" --backend=cpu -n 1 -w 0 --trials=1 --timeout=10 "$tmp/probe.sched" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 0 ] || ! grep -qx 'result: PASS' "$tmp/out"; then
  echo "exit $rc, expected 0 and PASS" >"$tmp/why"
fi
if [ ! -s "$tmp/why" ]; then ok "a send and its receive run on cpu"
else ko "a send and its receive run on cpu"; fi
for f in $twins; do
  base=${f##*/}
  for n in $(header "$f" run-ranks); do
    : >"$tmp/why"
    # shellcheck disable=SC2046
    "$tool" --backend=cpu --ranks="$n" -n 2 -w 1 --trials=1 --timeout=30 \
      $(header "$f" args) "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ] || ! grep -qx 'result: PASS' "$tmp/out"; then
      echo "exit $rc, expected 0 and PASS" >"$tmp/why"
    fi
    if [ ! -s "$tmp/why" ]; then ok "good/$base runs on $n ranks"
    else ko "good/$base runs on $n ranks"; fi
  done
done

# Every kind of finding has at least three schedules (a lost file must
# not pass unseen).
: >"$tmp/out"; : >"$tmp/err"; : >"$tmp/why"
for kind in races mismatches deadlocks; do
  k=$(grep -l "^# expect: .*$kind=[1-9]" "$src"/tests/order/bad/*.sched | wc -l)
  [ "$k" -ge 3 ] || [ "$kind" = races ] || echo "$kind: $k schedules" >>"$tmp/why"
done
[ "$nbad" -ge 15 ] || echo "found $nbad bad schedules" >>"$tmp/why"
if [ ! -s "$tmp/why" ]; then ok "every kind covered"; else ko "every kind covered"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
