#!/bin/sh
# The tools under MPI (configure --with-mpi; DESIGN 3.1), cpu backend:
# for P = 2 and 3, `$MPIEXEC -np P tools/overlap_sim -b cpu ARGS` (one rank
# a process) against one process with as many ranks,
# `tools/overlap_sim -b cpu -r P ARGS`: the same exit code and the same
# deterministic lines of the report (see filter_sim below), the values
# --show prints (%.9g: bit-exact for float32) included. The cases: the seed
# (small), the seed --mode=all, the seed --races, every schedule of
# schedules/good, every one of schedules/bad (their static check alone: a
# racy program's numbers depend on timing), two races shown by --replay
# (deterministic), --races on a race, a mismatch and a deadlock;
# tools/overlap_sweep (allreduce and sendrecv, tiny) against one process;
# --gpus-per-process=2 against twice the ranks; schedules/matmul.sched,
# whose reference samples rows (the elements not checked, merged). Failures
# that only some processes see (an output only process 0 writes, a memory
# limit of one process, Open MPI's MPMD launch), a wrong --ranks and more
# ranks than a world may have (--gpus-per-process=40) must stop every
# process at once with one message. Then the faults: one rank that never arrives in an all-reduce, one that
# never reaches the barrier ending an iteration (tests/schedules/hang_*),
# and the send/send cycle of schedules/bad/pipeline_1f1b, run with
# --no-races --timeout=2: every process must end, mpirun with exit 3 within
# 20 s, and stderr must carry the flight record.
# Processes that take different paths (MPMD: flags or a schedule given to
# one process only: --races, --replay, --op-times, --trace, --trials,
# --mode=all, a collective on one side) must end with exit 3 within 20 s
# (--timeout=5), a message led by 'process P:' that names the step, and
# no verdict; one stopped with SIGSTOP in a run (--timeout=10) within
# 20 s of the signal. Every process is heard: a failure of process 1 when
# process 0 fails too, and what the runtime writes at the exit of process
# 1 (ld.so's LD_DEBUG=statistics, as a LeakSanitizer report would be).
#
# Skips (77) when MPIEXEC is empty. With Open MPI's launcher it adds
# --oversubscribe (more processes than cores), --allow-run-as-root (CI runs
# as root) and --bind-to none (each process runs a thread per stream).
# Every launch runs under `timeout` (OVL_MPI_LIMIT seconds, default 60),
# so that a hang fails the case instead of the suite.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
sweep=${OVL_SWEEP:-${OVL_BUILDDIR:-.}/tools/overlap_sweep}
src=${srcdir:-.}

if [ -z "${MPIEXEC:-}" ]; then
  echo "SKIP: no MPI launcher (MPIEXEC is empty: configure --with-mpi, or set MPIEXEC)"
  exit 77
fi
if ! command -v timeout >/dev/null 2>&1; then
  echo "SKIP: no timeout(1) to bound the launches"
  exit 77
fi
mpiflags=
if $MPIEXEC --version 2>&1 | grep -q 'Open MPI\|OpenRTE'; then
  mpiflags="--oversubscribe --allow-run-as-root --bind-to none"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-mpi.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0
started=$(date +%s)

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
# ko NAME: the reason ($tmp/why) and what differs ($tmp/diff), and the
# launch's stderr.
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/why"
  if [ -s "$tmp/diff" ]; then
    echo "    diff (one process, then mpirun):"
    sed 's/^/    | /' "$tmp/diff" | head -60
  fi
  if [ -s "$tmp/mpi.err" ]; then
    echo "    mpirun's stderr:"
    sed 's/^/    | /' "$tmp/mpi.err" | head -30
  fi
}

# filter_sim: the lines of overlap_sim's report that do not depend on
# timing, from stdin:
#   - each row of the mode table as "MODE CHECK" (its time columns, and the
#     trial number if any, dropped): "async  MISMATCH (8192 of 8192
#     elements); RACES: 1 (below)";
#   - the numeric check's details: "  async: rank R VAR: N of M elements
#     differ; first at [i]: got X, expected Y" and "  async: the check
#     failed in ...";
#   - the static check: the "== FORM ==" sections, the findings ("race K:",
#     "mismatch K:", "deadlock K:") with their indented write/read/fix/note
#     lines, the totals ("no races in ...", "2 mismatches in ..."), and the
#     "check: ..." line;
#   - the values --show prints: "rank R NAME [SHAPE]: v0 v1 ...";
#   - "result: ...".
# Dropped: the header (host memory), the cpu backend's note, the table's
# head, and the speedup, ideal speedup, overlap efficiency and trial
# summary lines (times), and anything else.
filter_sim() {
  sed -nE \
    -e 's/^(sync|async|comp|comm)( +[0-9]+)?( +[0-9.]+){4}  +(.*)$/\1  \4/p' \
    -e '/^  (sync|async|comp|comm)( \(trial [0-9]+\))?: /p' \
    -e '/^== .* ==$/p' \
    -e '/^(race|mismatch|deadlock) [0-9]+: /p' \
    -e '/^  (write|read|fix|note)[ :(]/p' \
    -e '/^(no|[0-9]+) (races?|mismatch(es)?|deadlocks?) in /p' \
    -e '/^check: /p' \
    -e '/^rank [0-9]+ [^ ]+ \[[0-9,]*\]: /p' \
    -e '/^result: /p'
}

# filter_static: of filter_sim's lines, those of the static check alone
# (a racy program's numbers, and so its table's check column and whether
# it exits 1 or 4, depend on timing), and of --replay's report the races
# shown, whose numbers the delay fixes ("async race 1 shown: rank 0 y[0]
# got X expected Y (...; comm[0] delayed D ms ...)", the delay, which is
# timed, cut) and its last line; "result:" where nothing ran (a
# mismatch or a deadlock stops a run before it starts).
filter_static() {
  sed -nE \
    -e '/^== .* ==$/p' \
    -e '/^(race|mismatch|deadlock) [0-9]+: /p' \
    -e '/^  (write|read|fix|note)[ :(]/p' \
    -e '/^(no|[0-9]+) (races?|mismatch(es)?|deadlocks?) in /p' \
    -e '/^check: /p' \
    -e 's/^([a-z]+ race [0-9]+ (shown|not shown)[^(]*).*$/\1/p' \
    -e '/^replay: [0-9]+ of [0-9]+ /p' \
    -e '/^result: .*nothing ran/p'
}

# filter_sweep: overlap_sweep's check, from stdin: of each row the size,
# count, type, redop, root and the four #wrong columns (calc stream, comm
# stream, in place, compute beside); and "# result: ...". Times, bandwidths,
# slowdowns and the comment lines (kernel times) are dropped.
filter_sweep() {
  awk '/^# result: / { print; next }
       /^#/ { next }
       NF >= 21 { print $1, $2, $3, $4, $5, "wrong:", $9, $13, $17, $21 }'
}

# launch NP PROGRAM ARGS...: PROGRAM under the launcher with NP processes,
# at most $limit seconds; stdout, stderr and the exit status into
# $tmp/mpi.{out,err,rc}, the seconds into $tmp/mpi.secs.
limit=${OVL_MPI_LIMIT:-60}
launch() {
  lnp=$1 # (not np: sh has no locals, and the callers' loop uses np)
  shift
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout -k 10 "$limit" $MPIEXEC $mpiflags -np "$lnp" "$@" \
    >"$tmp/mpi.out" 2>"$tmp/mpi.err" </dev/null
  echo $? >"$tmp/mpi.rc"
  echo $(($(date +%s) - t0)) >"$tmp/mpi.secs"
}

# compare NAME FILTER: one process ($tmp/one.*) against the launch
# ($tmp/mpi.*): the same exit code and the same filtered stdout, which
# must hold the verdict (so that a filter that drops everything fails).
compare() {
  name=$1 filter=$2
  : >"$tmp/why"; : >"$tmp/diff"
  one_rc=$(cat "$tmp/one.rc"); mpi_rc=$(cat "$tmp/mpi.rc")
  $filter <"$tmp/one.out" >"$tmp/one.f"
  $filter <"$tmp/mpi.out" >"$tmp/mpi.f"
  if [ "$mpi_rc" -eq 124 ] || [ "$mpi_rc" -eq 137 ]; then
    echo "the launch timed out after $limit s (exit $mpi_rc)" >"$tmp/why"
  elif [ "$filter" = filter_static ]; then
    # A racy run: 1 (its numbers went wrong) or 4 (they did not), both.
    case "$one_rc $mpi_rc" in
    [14]\ [14]) ;;
    *) echo "exit $mpi_rc under mpirun, $one_rc as one process (a racy run: 1 or 4 expected)" >"$tmp/why" ;;
    esac
  elif [ "$one_rc" -ne "$mpi_rc" ]; then
    echo "exit $mpi_rc under mpirun, $one_rc as one process" >"$tmp/why"
  fi
  if ! grep -Eq '^(# )?(result|check|replay): |^([0-9]+|no) (races?|mismatch(es)?|deadlocks?) in ' "$tmp/one.f"; then
    echo "no verdict line in the one-process run's output (exit $one_rc):" >>"$tmp/why"
    sed 's/^/  /' "$tmp/one.out" "$tmp/one.err" | head -20 >>"$tmp/why"
  fi
  if ! cmp -s "$tmp/one.f" "$tmp/mpi.f"; then
    echo "the deterministic lines differ" >>"$tmp/why"
    diff "$tmp/one.f" "$tmp/mpi.f" >"$tmp/diff"
  fi
  if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi
}

# words ARGS...: ARGS for a case's name, the source tree's path dropped.
words() {
  case $src in
  /*) echo "$*" | sed "s|$src/||g" ;;
  *) echo "$*" ;;
  esac
}

# sim NP ARGS...: overlap_sim -b cpu ARGS as one process with NP ranks and
# as NP processes. sim_static: the same, for a program whose numbers
# depend on timing (filter_static).
sim() {
  sim_with filter_sim "$@"
}
sim_static() {
  sim_with filter_static "$@"
}
sim_with() {
  filter=$1 np=$2
  shift 2
  "$tool" -b cpu -r "$np" "$@" >"$tmp/one.out" 2>"$tmp/one.err" </dev/null
  echo $? >"$tmp/one.rc"
  launch "$np" "$tool" -b cpu "$@"
  compare "mpirun -np $np overlap_sim -b cpu $(words "$@") (against -r $np)" "$filter"
}

# sweep NP ARGS...: the same for overlap_sweep --backend=cpu.
sweep() {
  np=$1
  shift
  "$sweep" --backend=cpu --ranks="$np" "$@" >"$tmp/one.out" 2>"$tmp/one.err" </dev/null
  echo $? >"$tmp/one.rc"
  launch "$np" "$sweep" --backend=cpu "$@"
  compare "mpirun -np $np overlap_sweep --backend=cpu $(words "$@") (against --ranks=$np)" filter_sweep
}

# ended_3_in_time: $tmp/why (emptied, and $tmp/diff) says where the
# launch ($tmp/mpi.*) did not end with exit 3 within 20 s.
ended_3_in_time() {
  : >"$tmp/why"; : >"$tmp/diff"
  rc=$(cat "$tmp/mpi.rc"); secs=$(cat "$tmp/mpi.secs")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "still running after $limit s: killed (exit $rc)" >"$tmp/why"
  elif [ "$rc" -ne 3 ]; then
    echo "exit $rc, expected 3" >"$tmp/why"
  fi
  if [ "$secs" -gt 20 ]; then
    echo "took $secs s, expected at most 20" >>"$tmp/why"
  fi
}

# hang NP ARGS...: overlap_sim -b cpu --no-races --timeout=2 ARGS as NP
# processes must end within 20 s with exit 3 and the flight record.
hang() {
  np=$1
  shift
  launch "$np" "$tool" -b cpu --no-races --timeout=2 "$@"
  ended_3_in_time
  if ! grep -q 'flight record' "$tmp/mpi.err"; then
    echo "no 'flight record' on stderr" >>"$tmp/why"
  fi
  name="mpirun -np $np overlap_sim -b cpu --no-races --timeout=2 $(words "$@"): exit 3 within 20 s, with the flight record (exit $rc after $secs s)"
  if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi
}

# fails NP EXIT PATTERN ARGS...: overlap_sim -b cpu ARGS as NP processes
# (ARGS may hold ':' and another program: an MPMD launch) must end within
# 20 s with EXIT, PATTERN on stderr exactly once (one process prints it),
# and no more than one "overlap_sim:" line there: a failure only some
# processes see (an output only process 0 writes, a limit of one process's
# host) must stop them all, not leave some in a collective for ever.
fails() {
  fnp=$1 want=$2 pattern=$3 # (not np: see launch)
  shift 3
  launch "$fnp" "$tool" -b cpu "$@"
  : >"$tmp/why"; : >"$tmp/diff"
  rc=$(cat "$tmp/mpi.rc"); secs=$(cat "$tmp/mpi.secs")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "still running after $limit s: killed (exit $rc)" >"$tmp/why"
  elif [ "$rc" -ne "$want" ]; then
    echo "exit $rc, expected $want" >"$tmp/why"
  fi
  if [ "$secs" -gt 20 ]; then
    echo "took $secs s, expected at most 20" >>"$tmp/why"
  fi
  n=$(grep -c -- "$pattern" "$tmp/mpi.err")
  if [ "$n" -ne 1 ]; then
    echo "'$pattern' $n times on stderr, expected once" >>"$tmp/why"
  fi
  n=$(grep -c 'overlap_sim: ' "$tmp/mpi.err")
  if [ "$n" -gt 1 ]; then
    echo "$n messages on stderr, expected one" >>"$tmp/why"
  fi
  name="mpirun -np $fnp overlap_sim -b cpu $(words "$@"): exit $want with '$pattern' once (exit $rc after $secs s)"
  if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi
}

# min_ranks FILE: its "# min-ranks: N" header (1 if none).
min_ranks() {
  n=$(sed -n 's/^# min-ranks: *\([0-9][0-9]*\).*/\1/p' "$1" | head -1)
  echo "${n:-1}"
}

run="-n 2 -w 1 --trials=1 --show=6"
seed="-D steps=2 -D rows=8 -D cols=16"
for np in 2 3; do
  # shellcheck disable=SC2086
  {
    sim "$np" $run $seed "$src/schedules/seed.sched"
    sim "$np" $run $seed --mode=all "$src/schedules/seed.sched"
    sim "$np" --races $seed "$src/schedules/seed.sched"
    for f in "$src"/schedules/good/*.sched; do
      [ -f "$f" ] || continue
      [ "$(min_ranks "$f")" -le "$np" ] || continue
      sim "$np" $run "$f"
    done
    # A matmul whose reference samples rows (schedules/matmul.sched at its
    # cpu size): each process counts the elements it could not check, and
    # the merged counts are one process's.
    sim "$np" $run "$src/schedules/matmul.sched"
    # The bad ones: a racy one runs (its numbers depend on timing), the
    # others stop at their mismatch or deadlock (exit 4).
    for f in "$src"/schedules/bad/*.sched; do
      [ -f "$f" ] || continue
      [ "$(min_ranks "$f")" -le "$np" ] || continue
      sim_static "$np" $run "$f"
    done
    # Races shown as wrong numbers, deterministically (--replay: exit 4).
    sim_static "$np" --replay "$src/schedules/bad/missing_wait_comm.sched"
    sim_static "$np" --replay "$src/schedules/bad/loop_carried_race.sched"
    # The static check alone: a race, a mismatch, a deadlock (exit 4).
    sim "$np" --races "$src/schedules/bad/missing_wait_comm.sched"
    sim "$np" --races "$src/schedules/bad/ddp_buckets.sched"
    sim "$np" --races "$src/schedules/bad/pipeline_1f1b.sched"
    sweep "$np" -c allreduce -b 1K -e 4K -n 1 -w 0 --reps=4
    sweep "$np" -c sendrecv -b 1K -e 4K -n 1 -w 0 --reps=4
    # Ranks per process: NP processes of 2 ranks against 2 x NP ranks.
    "$tool" -b cpu -r $((2 * np)) $run $seed "$src/schedules/seed.sched" \
      >"$tmp/one.out" 2>"$tmp/one.err" </dev/null
    echo $? >"$tmp/one.rc"
    launch "$np" "$tool" -b cpu --gpus-per-process=2 $run $seed "$src/schedules/seed.sched"
    compare "mpirun -np $np overlap_sim -b cpu --gpus-per-process=2 $(words $run $seed) seed.sched (against -r $((2 * np)))" filter_sim
    # What one process alone can fail, and what does not fit.
    fails "$np" 2 "asked for 9 ranks" -r 9 "$src/schedules/good/seed_small.sched"
    fails "$np" 2 "^overlap_sim: $np processes of 40 ranks make $((40 * np)) ranks; at most 64$" \
      --gpus-per-process=40 "$src/schedules/good/seed_small.sched"
    fails "$np" 3 "cannot create it" --json="$tmp/no/such/dir/out.json" "$src/schedules/good/seed_small.sched"
    if [ -n "$mpiflags" ]; then
      # Open MPI's MPMD launch: the last process alone has a tiny memory.
      fails "$((np - 1))" 2 "^process $((np - 1)): overlap_sim: .*OVL_HOST_MEMORY" \
        --trials=1 "$src/schedules/good/seed_small.sched" \
        : -np 1 -x OVL_HOST_MEMORY=100000 "$tool" -b cpu --trials=1 "$src/schedules/good/seed_small.sched"
    fi
    hang "$np" -n 1 -w 0 "$src/tests/schedules/hang_in_collective.sched"
    hang "$np" -n 1 -w 0 "$src/tests/schedules/hang_at_barrier.sched"
    hang "$np" -n 1 -w 0 "$src/schedules/bad/pipeline_1f1b.sched"
  }
done

# A wrapper that writes its process's pid to $tmp/pid.P (P: the launcher's
# index of the process), then execs the tool: the tests below find a
# process by its index.
{
  echo '#!/bin/sh'
  echo "echo \$\$ >\"$tmp/pid.\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-\${PMIX_RANK:-x}}}\""
  echo 'exec "$@"'
} >"$tmp/wrap.sh"

# --- Every process heard. Both fail to read their schedule, each its own:
# process 1's message is printed too, led by 'process 1:'.
launch 1 "$tool" -b cpu --trials=1 "$tmp/nosuch0.sched" : -np 1 "$tool" -b cpu --trials=1 "$tmp/nosuch1.sched"
: >"$tmp/why"; : >"$tmp/diff"
rc=$(cat "$tmp/mpi.rc")
[ "$rc" -eq 2 ] || echo "exit $rc, expected 2" >"$tmp/why"
grep -q '^overlap_sim: .*nosuch0\.sched' "$tmp/mpi.err" || echo "process 0's message missing" >>"$tmp/why"
grep -q '^process 1: overlap_sim: .*nosuch1\.sched' "$tmp/mpi.err" || echo "process 1's message missing" >>"$tmp/why"
name="both processes fail, each its own way: both heard, process 1's led by 'process 1:' (exit $rc)"
if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi
# What the runtime writes at the exit of process 1, after main (ld.so's
# statistics here; a LeakSanitizer report alike): on stderr, as it is.
# ld.so leads its lines with the pid, and helpers that MPI starts print
# theirs: the line must be process 1's own (the wrapper says its pid).
rm -f "$tmp"/pid.*
launch 1 "$tool" -b cpu -n 1 -w 0 --trials=1 "$src/schedules/good/seed_small.sched" \
  : -np 1 env LD_DEBUG=statistics sh "$tmp/wrap.sh" "$tool" -b cpu -n 1 -w 0 --trials=1 \
  "$src/schedules/good/seed_small.sched"
: >"$tmp/why"; : >"$tmp/diff"
rc=$(cat "$tmp/mpi.rc")
[ "$rc" -eq 0 ] || echo "exit $rc, expected 0" >"$tmp/why"
p1=$(cat "$tmp/pid.1" 2>/dev/null)
if [ -z "$p1" ]; then
  echo "no pid of process 1" >>"$tmp/why"
elif ! grep -Eq "^ *$p1:[[:space:]]+final number of relocations" "$tmp/mpi.err"; then
  echo "process 1's output at exit (LD_DEBUG=statistics, pid $p1) missing" >>"$tmp/why"
fi
[ "$(grep -c '^result: PASS$' "$tmp/mpi.out")" -eq 1 ] || echo "not one verdict on stdout" >>"$tmp/why"
name="what process 1's runtime writes at exit reaches stderr (exit $rc)"
if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi

# --- Processes that take different paths. a.sched has one all-reduce,
# b.sched none.
printf '%s\n' 'x = data(shape=[16], init=fill, value=1.0)' 'y = scale(x, scale=2.0)' \
  'c_allreduce_sum(y, ring_id=0, use_calc_stream=true)' 'fetch(y)' >"$tmp/a.sched"
printf '%s\n' 'x = data(shape=[16], init=fill, value=1.0)' 'y = scale(x, scale=2.0)' \
  'fetch(y)' >"$tmp/b.sched"

# lost NAME: the launch ($tmp/mpi.*) ended within 20 s with exit 3, a
# message of a process that names the step, and no verdict on stdout.
lost() {
  ended_3_in_time
  n=$(grep -Ec '^process [0-9]+: overlap_(sim|sweep): .*step [0-9]+' "$tmp/mpi.err")
  if [ "$n" -lt 1 ]; then
    echo "no 'process P: ... step N' message on stderr" >>"$tmp/why"
  fi
  if grep -q 'result: PASS' "$tmp/mpi.out"; then
    echo "a verdict on stdout" >>"$tmp/why"
  fi
  name="$1: exit 3 within 20 s, the step named (exit $rc after $secs s, by $n process(es))"
  if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi
}

# diverge ARGS0 -- ARGS1: overlap_sim -b cpu -n 1 -w 0 --timeout=5 ARGS0
# as process 0 and the same with ARGS1 as process 1 (an MPMD launch).
diverge() {
  a0=
  while [ "$1" != -- ]; do a0="$a0 $1"; shift; done
  shift
  f="-b cpu -n 1 -w 0 --timeout=5"
  # shellcheck disable=SC2086
  launch 1 "$tool" $f $a0 : -np 1 "$tool" $f "$@"
  lost "mpirun -np 1 overlap_sim $(words $a0 | sed "s|$tmp/||g") : -np 1 overlap_sim $(words "$@" | sed "s|$tmp/||g")"
}
diverge --trials=1 "$tmp/a.sched" -- --races "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- --replay "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- --trials=1 --op-times "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- --trials=1 --trace="$tmp/t.json" "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- --trials=3 "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- --trials=1 --mode=all "$tmp/a.sched"
diverge --trials=1 "$tmp/a.sched" -- --trials=1 "$tmp/b.sched"
diverge --trials=1 "$tmp/b.sched" -- --trials=1 "$tmp/a.sched"
# Flags that one process refuses: the agreed usage error, said by it.
fails 1 2 "^process 1: overlap_sim: --trials repeats a run: --races runs nothing timed" \
  --trials=1 "$tmp/a.sched" : -np 1 "$tool" -b cpu --trials=1 --races "$tmp/a.sched"
# overlap_sweep, one process given more sizes.
launch 1 "$sweep" --backend=cpu -b 1K -e 4K -n 1 -w 0 --reps=4 --timeout=5 \
  : -np 1 "$sweep" --backend=cpu -b 1K -e 8K -n 1 -w 0 --reps=4 --timeout=5
lost "mpirun -np 1 overlap_sweep -e 4K : -np 1 overlap_sweep -e 8K"

# --- One process stopped (SIGSTOP) in a long run, --timeout=10: the
# collective that process 0 waits in times out, then the agreement's
# margin; the launch must end within 20 s of the signal (about 16 s). Rank
# 1 spends each iteration in a 1 s delay before the all-reduce, so that
# the signal finds process 0 in that collective, not at the barrier that
# ends an iteration, whose deadline is 2 x --timeout + 5 s by design
# (src/run/exec.c: a hung collective fails first, with its message): there
# the launch ends about 31 s after the signal. The wrapper says each
# process's pid, so that the test stops process 1 and no other.
printf '%s\n' 'x = data(shape=[16], init=fill, value=1.0)' \
  'delay(us=1000000, stream=calc, ranks=[1])' 'y = scale(x, scale=1.0)' \
  'c_allreduce_sum(y, ring_id=0, use_calc_stream=true)' 'fetch(y)' >"$tmp/slow1.sched"
rm -f "$tmp"/pid.*
t0=$(date +%s)
# shellcheck disable=SC2086
timeout -k 10 "$limit" $MPIEXEC $mpiflags -np 2 sh "$tmp/wrap.sh" "$tool" -b cpu -n 1000 -w 0 \
  --trials=1 --no-races --timeout=10 "$tmp/slow1.sched" >"$tmp/mpi.out" 2>"$tmp/mpi.err" </dev/null &
lpid=$!
# The run has started when the table's head is out.
i=0
while [ "$i" -lt 600 ] && kill -0 "$lpid" 2>/dev/null && ! grep -q '^mode ' "$tmp/mpi.out"; do
  sleep 0.1
  i=$((i + 1))
done
# Two iterations in: past the setup, in the steady state.
sleep 2
victim=$(cat "$tmp/pid.1" 2>/dev/null)
stop=$(date +%s)
[ -n "$victim" ] && kill -STOP "$victim" 2>/dev/null
wait "$lpid"
rc=$?
end=$(date +%s)
# Whatever happened, the stopped process is not left behind.
[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
: >"$tmp/why"; : >"$tmp/diff"
if [ -z "$victim" ]; then
  echo "no pid of process 1 (the run never started?)" >"$tmp/why"
elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "still running after $limit s: killed (exit $rc)" >"$tmp/why"
elif [ "$rc" -ne 3 ]; then
  echo "exit $rc, expected 3" >"$tmp/why"
fi
if [ $((end - stop)) -gt 20 ]; then
  echo "ended $((end - stop)) s after SIGSTOP, expected at most 20" >>"$tmp/why"
fi
if ! grep -q '^process 0: overlap_sim: .*process 1 at step [0-9]' "$tmp/mpi.err"; then
  echo "no 'process 0: ... process 1 at step N' on stderr" >>"$tmp/why"
fi
name="SIGSTOP on process 1 of 2, --timeout=10: exit 3 within 20 s (exit $rc, $((end - stop)) s after the signal, $((end - t0)) s in all)"
if [ -s "$tmp/why" ]; then ko "$name"; else ok "$name"; fi

echo "mpi.sh: $pass passed, $fail failed in $(($(date +%s) - started)) s (launcher: $MPIEXEC $mpiflags)"
[ "$fail" -eq 0 ]
