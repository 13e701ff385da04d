# What the end-to-end tests of tools/overlap_sim (tests/cli*.sh) share:
# sourced, not run. `make check` runs those scripts in parallel; each
# sources this first:
#
#   src=${srcdir:-.}
#   . "$src/tests/lib.sh"
#
# and ends with `finish`. It sets tool (the tool, $OVL_TOOL), src (the
# source tree, $srcdir), tmp (a directory removed on exit), the counts, and
# the helpers below. have_python says whether python3 checks the JSON.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0
: >"$tmp/out"
: >"$tmp/err"

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
# ko TITLE: a failure, with what the test said went wrong ($tmp/why, where
# it writes one) and the last run's output under it.
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/why" "$tmp/out" "$tmp/err" 2>/dev/null | head -40
}

# A run makes one trial (--trials=1): the tool's default repeats a short
# run up to 5 times, as many as fit in about 10 s, and only
# tests/cli_trials.sh tests that (run_default_trials). run_trials is the
# flag run() adds.
run_trials=--trials=1

# run EXPECTED_EXIT NAME ARGS...: runs the tool on the cpu backend, with
# --trials=1 unless ARGS give --trials or make no timed run (--races,
# --replay and --calibrate, which refuse --trials).
run() {
  want=$1 name=$2
  shift 2
  run_t=$run_trials
  for run_arg in "$@"; do
    case $run_arg in --trials | --trials=* | --races | --replay | --replay=* | --calibrate=*) run_t= ;; esac
  done
  "$tool" --backend=cpu ${run_t:+"$run_t"} "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then return 0; fi
  echo "    exit $got, expected $want"
  return 1
}

# run_default_trials: run() with the tool's default trials (what
# tests/cli_trials.sh tests).
run_default_trials() {
  run_trials=
  run "$@"
  run_rc=$?
  run_trials=--trials=1
  return $run_rc
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

# has out|err PATTERN: grep -E in stdout or stderr of the last run.
has() { grep -Eq -- "$2" "$tmp/$1"; }

# racy SCHEDULE: whether --races finds a race in it (the bad schedules of
# ranks that differ have a mismatch or a deadlock instead).
racy() { "$tool" --backend=cpu --races "$1" 2>/dev/null | grep -q '^race [0-9]*: '; }

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

# Parallel sections, for tests whose runs mostly wait (chaos sleeps):
# par_run FUNCTION ARGS... runs FUNCTION ARGS in the background, with a
# tmp of its own and its PASS/FAIL lines in its own log, at most par_max
# at once (OVL_TEST_JOBS, default 4); par_wait waits for them all, prints
# their logs in the order they started and adds their counts.
par_max=${OVL_TEST_JOBS:-4}
par_n=0
par_done=0
par_run() {
  par_n=$((par_n + 1))
  mkdir "$tmp/par$par_n" || return 1
  (
    tmp=$tmp/par$par_n pass=0 fail=0
    : >"$tmp/out"
    : >"$tmp/err"
    "$@"
    echo "$pass $fail" >"$tmp/counts"
  ) >"$tmp/par$par_n/log" 2>&1 &
  if [ $(((par_n - par_done) % par_max)) -eq 0 ]; then wait; fi
}
par_wait() {
  wait
  while [ "$par_done" -lt "$par_n" ]; do
    par_done=$((par_done + 1))
    cat "$tmp/par$par_done/log"
    if read -r par_p par_f <"$tmp/par$par_done/counts"; then
      pass=$((pass + par_p)) fail=$((fail + par_f))
    else
      fail=$((fail + 1))
      echo "FAIL: parallel job $par_done ended without its counts"
    fi
  done
}

# finish: the counts, and the exit status.
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
