#!/bin/sh
# `make check-valgrind`: tools/overlap_sim on the cpu backend under
# valgrind (memcheck): the seed at a small size, every mode, a schedule
# error, a schedule too big for memory, and the race report. Any error,
# or a leak that is definitely lost, fails the run (valgrind exits 1; no
# run here expects the tool's own exit 1).
#
# Environment: OVL_TOOL (the libtool wrapper of the tool), LIBTOOL (to run
# valgrind on the real binary, not on the wrapper script), VALGRIND,
# srcdir (the source tree).
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
libtool=${LIBTOOL:-./libtool}
valgrind=${VALGRIND:-valgrind}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-vg.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
pass=0 fail=0

if ! command -v "$valgrind" >/dev/null 2>&1; then
  echo "check-valgrind: '$valgrind' not found (Debian: apt-get install valgrind)" >&2
  exit 77
fi

# vg NAME EXPECTED_EXIT ARGS...: the tool under valgrind.
vg() {
  name=$1 want=$2
  shift 2
  # shellcheck disable=SC2086 # $libtool may be "/bin/bash ./libtool"
  $libtool --mode=execute "$valgrind" -q --error-exitcode=1 \
    --suppressions="$src/tests/valgrind.supp" \
    --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite "$tool" --backend=cpu "$@" \
    >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ] && ! grep -q '^==[0-9]*==' "$tmp/err"; then
    pass=$((pass + 1))
    echo "PASS: $name"
  else
    fail=$((fail + 1))
    echo "FAIL: $name: exit $got, expected $want"
    sed 's/^/    | /' "$tmp/err" | head -60
  fi
}

printf 'a = data(shape=[4])\nb = assgn(a)\n' >"$tmp/bad.sched"

# One trial each (the default repeats short runs up to 5 times), but the
# trials path once: every trial's check kept, the last trial's runs.
vg seed 0 -n 2 -w 1 -D cols=10 --trials=1
vg mode-all 0 --mode=all -n 2 -w 1 -D cols=10 --show=2 --op-times --trials=2
vg schedule-error 2 "$tmp/bad.sched"
vg too-big-for-memory 2 -D cols=1000000000
vg races 4 --races "$src/schedules/bad/missing_wait_compute.sched"
vg all-ops 0 -n 2 -w 0 --ranks=3 --trials=1 "$src/tests/schedules/all_ops.sched"
vg matmul-sampled 0 -n 2 -w 1 --mode=all --trials=1 "$src/schedules/matmul.sched"
vg gemm-overlap 0 -n 2 -w 1 --mode=all -D hidden=16 --trials=1 "$src/schedules/gemm_overlap.sched"
vg output-files 0 -n 2 -w 1 -D cols=10 --trials=1 --trace="$tmp/t.json" --svg="$tmp/t.svg" \
  --json="$tmp/r.json"
vg races-json-file 4 --races --json="$tmp/races.json" \
  "$src/schedules/bad/missing_wait_compute.sched"
vg output-is-schedule 2 --json="$tmp/bad.sched" "$tmp/bad.sched"
vg output-refused 3 --trace="$tmp/t.json" --svg="$tmp/no/such/dir/t.svg"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
