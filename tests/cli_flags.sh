#!/bin/sh
# tools/overlap_sim's command line on the cpu backend: schedule errors,
# where a schedule is found, bad flags, -n and -w, --op-times.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# Schedule errors: file:line:col and exit 2, nothing runs.
printf 'a = data(shape=[4])\nb = assgn(a)\n' >"$tmp/bad.sched"
if run 2 parse-error "$tmp/bad.sched" && has err "bad\.sched:2:5: .*unknown op 'assgn'" && ! has out '^sync'
then ok "schedule error"; else ko "schedule error"; fi
if run 2 missing-file "$tmp/nope.sched" && has err 'nope\.sched: No such file'
then ok "missing schedule file"; else ko "missing schedule file"; fi
if run 2 bad-define -D nosuch=3 && has err 'nosuch'
then ok "-D of an unknown param"; else ko "-D of an unknown param"; fi

# Where a schedule is found: a relative name that is not a file from here
# is looked up in $OVL_SCHEDULE_PATH, then in the tool's schedules (the
# source tree's, from the build tree); ./NAME is not looked up; the
# default is never the current directory's seed.sched.
mkdir "$tmp/here" "$tmp/p1" "$tmp/p2"
printf 'a = data(shape=[4])\nb = scale(a, scale=2.0)\nfetch(b)\n' >"$tmp/p2/mine.sched"
printf 'a = data(shape=[4])\nb = assgn(a)\n' >"$tmp/here/seed.sched"
cp "$tmp/p2/mine.sched" "$tmp/p1/cwd_only.sched"
# run_in DIR EXPECTED_EXIT [NAME=VALUE]... ARGS...: the tool run from DIR.
run_in() {
  d=$1 want=$2
  shift 2
  (cd "$d" && env "$@") >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" -eq "$want" ] || { echo "    exit $got, expected $want"; return 1; }
}
if run_in "$tmp/here" 4 "$tool" --races bad/cross_ring.sched &&
  has out "^1 race in $src/schedules/bad/cross_ring\.sched \(2 ranks\)\$" &&
  run_in "$tmp/here" 0 OVL_SCHEDULE_PATH="$tmp/nowhere:$tmp/p2" "$tool" --races mine.sched &&
  has out "^no races in $tmp/p2/mine\.sched " &&
  run_in "$tmp/p1" 0 OVL_SCHEDULE_PATH="$tmp/p2" "$tool" --races cwd_only.sched &&
  has out '^no races in cwd_only\.sched ' &&
  run_in "$tmp/here" 0 "$tool" --races &&
  has out "^no races in $src/schedules/seed\.sched \(775 ops checked\)\$" &&
  run_in "$tmp/here" 2 OVL_SCHEDULE_PATH="$tmp/p2" "$tool" --races ./mine.sched &&
  has err '^overlap_sim: \./mine\.sched: No such file' && ! has err 'looked for' &&
  run_in "$tmp/here" 2 "$tool" --races nope/none.sched &&
  has err '^overlap_sim: nope/none\.sched: No such file or directory$' &&
  has err "^overlap_sim: \\(looked for nope/none\\.sched here, in [\$]OVL_SCHEDULE_PATH and in $src/schedules\\)\$"
then ok "schedule search path"; else ko "schedule search path"; fi
# A default seed.sched of one's own (found on the path) without a `steps`
# param gets no -D steps from the default run, at any rank count.
mkdir "$tmp/own" && cp "$tmp/p2/mine.sched" "$tmp/own/seed.sched"
if run_in "$tmp/here" 0 OVL_SCHEDULE_PATH="$tmp/own" "$tool" --backend=cpu -r 4 -n 1 -w 0 --trials=1 &&
  has out "schedule $tmp/own/seed\.sched, 0\.0 MB/rank" && ! has out '^  \+ ' && has out '^result: PASS$'
then ok "an own default seed.sched without steps"; else ko "an own default seed.sched without steps"; fi

# Bad flags: exit 2 and the flag named.
for args in "--mode=fast:--mode" "--ranks=0:--ranks" "--ranks=x:--ranks" "--iters=0:--iters" \
  "--warmup=-1:--warmup" "--rtol=abc:--rtol" "--atol=-1:--atol" "--show=-2:--show" \
  "--timeout=0:--timeout" "--backend=tpu:--backend" "--bogus:--bogus" "-n:-n" "-D:-D" \
  "-Dnoequals:-D" "--comm-priority=max:--comm-priority" "--nccl-max-ctas=x:--nccl-max-ctas" \
  "--nccl-min-ctas=65:--nccl-min-ctas"; do
  arg=${args%%:*} flag=${args#*:}
  if run 2 "$arg" "$arg" && has err "$flag" && has err "Try '.*--help'"
  then ok "bad flag $arg"; else ko "bad flag $arg"; fi
done
# -n counts the timed iterations and -w the untimed ones before them, as in
# nccl-tests and overlap_sweep (default 2 + 8).
if run 0 iters-warmup -n 2 -w 3 -D cols=10 -v --trials=1 &&
  has out ', 5 iterations \(3 warmup, 2 timed\)$' &&
  [ "$(grep -c '^       iterations (ms): [0-9.]* [0-9.]*$' "$tmp/out")" -eq 2 ] &&
  run 0 iters-default -q -D cols=10 --json="$tmp/iters.json" &&
  grep -q '"iters": 10, "warmup": 2, "timed": 8,' "$tmp/iters.json" &&
  run 0 iters-warmup-more -n 1 -w 4 -D cols=10 && has out ', 5 iterations \(4 warmup, 1 timed\)$'
then ok "-n timed iterations, -w warmup before them"; else ko "-n timed iterations, -w warmup before them"; fi
if run 2 two-schedules a.sched b.sched && has err 'one schedule'
then ok "two schedules"; else ko "two schedules"; fi

# CUDA-only tuning on the cpu backend: a clear refusal.
if run 2 cpu-tuning --nccl-max-ctas=4 && has err 'cuda backend'
then ok "cuda tuning refused on cpu"; else ko "cuda tuning refused on cpu"; fi
# NCCL's CTA limits out of order: refused with the flags, before a world
# is made (on any backend), as overlap_sweep refuses them.
if run 2 ctas-order --nccl-min-ctas=8 --nccl-max-ctas=4 && [ ! -s "$tmp/out" ] &&
  has err '^overlap_sim: --nccl-min-ctas \(8\) is larger than --nccl-max-ctas \(4\)$'
then ok "--nccl-min-ctas above --nccl-max-ctas"; else ko "--nccl-min-ctas above --nccl-max-ctas"; fi

# --op-times: a table per source line and stream; on the cpu backend the
# host clock of the emulated streams, never a "device clock".
if run 0 op-times --op-times -n 2 -w 1 -D cols=10 &&
  has out '^op times \(host clock as each emulated stream reaches the op, per iteration' &&
  ! grep -q 'device clock' "$tmp/out" "$tmp/err" &&
  has out '^async +31  c_allreduce_sum +comm\[0\] +64 +[0-9.]+ +[0-9.]+$' &&
  has out '^sync +31  c_allreduce_sum +calc +64 ' &&
  has out '^async +33  scale +calc +640 '
then ok "--op-times"; else ko "--op-times"; fi

# One number syntax for every flag, and messages that say the limits: the
# smallest double is a tolerance; 1e308 is above --rtol's limit.
if run 0 tiny-tolerance -q -n 1 -w 0 --trials=1 --rtol=4.9e-324 --atol=1e-3 \
  "$src/schedules/good/seed_small.sched" && has out '^result: PASS$' &&
  run 2 rtol-limit --rtol=1e308 && has err "^overlap_sim: --rtol: '1e308' is not a number from 0 to 1e300$" &&
  run 2 ranks-plus --ranks=+5 && has err "^overlap_sim: --ranks: '\+5' is not a number from 1 to 64 \(the model backend: up to 65536\)$" &&
  run 2 timeout-hex --timeout=0x10 && has err "--timeout: '0x10' is not a number of seconds"
then ok "numbers: 4.9e-324 taken; 1e308, +5, 0x10 refused with the limits"; else ko "numbers: 4.9e-324 taken; 1e308, +5, 0x10 refused with the limits"; fi

# A launcher's variable left in the environment, no launcher: the tool
# prints as one process (process 0 of 1), with a note naming the variable
# (built with MPI: MPI finds one process; without: every process runs
# alone), never silently as a process whose process 0 is elsewhere.
seed_small=$src/schedules/good/seed_small.sched
if OMPI_COMM_WORLD_RANK=1 run 0 launcher-rank-1 -n 1 -w 0 --trials=1 "$seed_small" &&
  has out '^overlap_sim .*backend cpu' && has out '^result: PASS$' &&
  has err '^overlap_sim: .*OMPI_COMM_WORLD_RANK=1.*(runs alone|one process)' &&
  [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  PMI_RANK=3 run 2 launcher-rank-3-usage --ranks=0 "$seed_small" &&
  has err "^overlap_sim: --ranks: '0' is not a number from 1 to 64 \(the model backend: up to 65536\)$" && has err 'PMI_RANK=3'
then ok "OMPI_COMM_WORLD_RANK=1, PMI_RANK=3 without a launcher: printed as one process, with a note"
else ko "OMPI_COMM_WORLD_RANK=1, PMI_RANK=3 without a launcher: printed as one process, with a note"; fi


finish
