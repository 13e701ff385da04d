#!/bin/sh
# End-to-end tests of the model backend (tools/overlap_sim --backend=model,
# src/run/model_run.c): every shipped schedule runs and exits as it
# should, at the rank counts the cpu tests run it at (schedules/*.sched
# on 2 and 8 ranks, schedules/good/ on 1, 2, 3, 4 and 8 from its
# min-ranks, schedules/bad/ on 2 and the issue 13 ones on 2, 3, 4 and 8
# as tests/examples.sh does); on every bad example the findings a model
# run prints (races, mismatches, deadlocks) and its exit status are the
# cpu backend's, with --races and in the full output; --json of a model
# run says it was predicted and passes tests/check_json.py, as its
# --trace does; 64 ranks of the seed finish (in well under a minute; the
# time is printed); bad --machine and --profile paths and files exit 2
# with the file and what is wrong.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# mrun EXPECTED_EXIT ARGS...: the tool on the model backend.
mrun() {
  want=$1
  shift
  : >"$tmp/why"
  "$tool" --backend=model "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then return 0; fi
  echo "exit $got, expected $want" >"$tmp/why"
  return 1
}

# why TEXT: what went wrong, for ko (after the exit was right).
why() { echo "$1" >>"$tmp/why"; }

# min_ranks FILE: N of its "# min-ranks: N" header line, else 1.
min_ranks() {
  n=$(sed -n '/^#/!q; s/^# min-ranks: \([0-9]*\).*/\1/p' "$1")
  echo "${n:-1}"
}

# A predicted run's table: every mode's check is n/a, predicted.
predicted_table() {
  has out '^(sync|async) .* n/a \(predicted: nothing is computed\)' &&
    ! has out '^(sync|async) .* (ok|MISMATCH) \('
}

# ----------------------------------------------------------------------
# Every shipped schedule runs
# ----------------------------------------------------------------------

for f in "$src"/schedules/*.sched; do
  name=schedules/$(basename "$f")
  for n in 2 8; do
    if mrun 0 -r "$n" "$f" && has out '^result: PASS$' && predicted_table &&
      has out "^overlap_sim .*: backend model, $n ranks \\($n x NVIDIA H200 \\(model of h200-8x400g\\)\\)"
    then ok "$name on $n ranks: predicted"; else ko "$name on $n ranks: predicted"; fi
  done
done

for f in "$src"/schedules/good/*.sched; do
  name=good/$(basename "$f" .sched)
  min=$(min_ranks "$f")
  for n in 1 2 3 4 8; do
    [ "$n" -lt "$min" ] && continue
    if mrun 0 -r "$n" "$f" && has out '^result: PASS$' && predicted_table &&
      has out '^async .*; no races$'
    then ok "$name on $n ranks: predicted, no finding"
    else ko "$name on $n ranks: predicted, no finding"; fi
  done
  # Below its min-ranks: refused as on cpu.
  if [ "$min" -gt 1 ]; then
    if mrun 2 -r 1 "$f" && has err 'names no rank'
    then ok "$name on 1 rank: refused"; else ko "$name on 1 rank: refused"; fi
  fi
done

# ----------------------------------------------------------------------
# The bad examples: the cpu backend's findings and exit status
# ----------------------------------------------------------------------

# findings FILE: the findings a run printed: from the first "== FORM =="
# to the verdict (the lines before it are the table and, on cpu, the
# numbers that differ; after it, the verdict).
findings() {
  sed -n '/^== /,$p' "$1" | sed '/^\(overlap\|result\|warning\|next\): /,$d'
}
# counts FILE: "N race(s), M mismatch(es), K deadlock(s)" of a --races
# run's check line or a run's result line.
counts() {
  sed -n 's/^\(check\|result\): \(FAIL: \)\{0,1\}\([0-9]* races\{0,1\}, [0-9]* mismatch\(es\)\{0,1\}, [0-9]* deadlocks\{0,1\}\).*/\3/p' "$1"
}

# cpu_run OUT ARGS...: the cpu backend (a racy schedule races for real:
# no ThreadSanitizer reports), its output in OUT, its exit in $cpu_rc.
cpu_run() {
  cpu_out=$1
  shift
  saved_tsan=${TSAN_OPTIONS-}
  TSAN_OPTIONS="${saved_tsan:+$saved_tsan:}report_bugs=0"
  export TSAN_OPTIONS
  "$tool" --backend=cpu "$@" >"$cpu_out" 2>"$cpu_out.err"
  cpu_rc=$?
  TSAN_OPTIONS=$saved_tsan
}

# same_as_cpu NAME N FILE: the model's findings on N ranks are the cpu
# backend's, with --races (the whole output, the exit) and in a run (the
# findings, and the counts of the verdict); the model run exits 4.
same_as_cpu() {
  sname=$1 n=$2 f=$3
  cpu_run "$tmp/cpu_races" --races -r "$n" "$f"
  if mrun "$cpu_rc" --races -r "$n" "$f" && [ "$cpu_rc" -eq 4 ] &&
    cmp -s "$tmp/cpu_races" "$tmp/out" && cmp -s "$tmp/cpu_races.err" "$tmp/err"
  then ok "$sname on $n ranks: --races as on cpu"
  else
    why "cpu exit $cpu_rc; diff cpu model:"
    diff "$tmp/cpu_races" "$tmp/out" >>"$tmp/why"
    ko "$sname on $n ranks: --races as on cpu"
  fi
  cpu_run "$tmp/cpu_run" -r "$n" -n 2 -w 0 --trials=1 "$f"
  findings "$tmp/cpu_run" >"$tmp/cpu_findings"
  if mrun 4 -r "$n" -n 2 -w 0 "$f" && findings "$tmp/out" >"$tmp/model_findings" &&
    [ -s "$tmp/cpu_findings" ] && cmp -s "$tmp/cpu_findings" "$tmp/model_findings" &&
    [ -n "$(counts "$tmp/cpu_races")" ] &&
    [ "$(counts "$tmp/out")" = "$(counts "$tmp/cpu_races")" ] &&
    has out '^result: FAIL: '
  then ok "$sname on $n ranks: the findings of a run as on cpu (exit 4; cpu $cpu_rc)"
  else
    why "cpu exit $cpu_rc; counts cpu '$(counts "$tmp/cpu_races")' model '$(counts "$tmp/out")'; diff of the findings cpu model:"
    diff "$tmp/cpu_findings" "$tmp/model_findings" >>"$tmp/why"
    ko "$sname on $n ranks: the findings of a run as on cpu"
  fi
}

for f in "$src"/schedules/bad/*.sched; do
  name=bad/$(basename "$f" .sched)
  same_as_cpu "$name" 2 "$f"
done
for ex in pipeline_1f1b ddp_buckets moe_alltoall two_rings_order; do
  for n in 3 4 8; do
    same_as_cpu "bad/$ex" "$n" "$src/schedules/bad/$ex.sched"
  done
done

# ----------------------------------------------------------------------
# Outputs
# ----------------------------------------------------------------------

# --json: the report of a predicted run, each mode's check n/a for that
# reason; check_json.py accepts it.
if mrun 0 -r 2 --json="$tmp/seed.json" "$src/schedules/seed.sched" &&
  grep -q '"backend": "model"' "$tmp/seed.json" &&
  [ "$(grep -c '"check": {"status": "n/a", "reason": "predicted: nothing is computed"' "$tmp/seed.json")" -eq 2 ] &&
  json_ok results "$tmp/seed.json" sync,async
then ok "--json: predicted, valid"; else ko "--json: predicted, valid"; fi
if mrun 4 -r 2 --mode=all --json="$tmp/bad.json" "$src/schedules/bad/missing_wait_comm.sched" &&
  [ "$(grep -c '"reason": "predicted: nothing is computed"' "$tmp/bad.json")" -eq 4 ] &&
  grep -q '"findings": {"races": 1, "mismatches": 0, "deadlocks": 0' "$tmp/bad.json" &&
  json_ok results "$tmp/bad.json" sync,async,comp,comm
then ok "--json of a racy schedule: predicted, its race, valid"
else ko "--json of a racy schedule: predicted, its race, valid"; fi

# --trace and --svg: the timelines of the simulated iteration; the trace
# passes check_json.py (its event arrows point forward: a wait ends when
# its record completes, never before).
if mrun 0 -r 2 --mode=all --trace="$tmp/t.json" --svg="$tmp/t.svg" "$src/schedules/seed.sched" &&
  [ -s "$tmp/t.svg" ] && json_ok trace "$tmp/t.json" 2 sync,async,comp,comm
then ok "--trace and --svg of a model run"; else ko "--trace and --svg of a model run"; fi
if mrun 0 -r 2 --graph --op-times "$src/schedules/seed.sched" &&
  has out '^result: PASS$' && has out '^async +[0-9]+ +c_allreduce_sum +comm\[0\] +64 '
then ok "--graph --op-times"; else ko "--graph --op-times"; fi

# ----------------------------------------------------------------------
# 64 ranks
# ----------------------------------------------------------------------

# The seed as written (10000 columns: nothing is allocated, nothing
# computed, no reference), the same with the host's memory said to be
# 1 TB (the simulation alone, whatever the memory plan says), the seed at
# a size whose memory plan fits anywhere, and the pipeline on 64 ranks
# (every rank simulated: its ranks differ).
for case in "seed:$src/schedules/seed.sched" \
  "seed, OVL_HOST_MEMORY=1 TB:$src/schedules/seed.sched" \
  "seed -D cols=100:-D cols=100 $src/schedules/seed.sched" \
  "good/pipeline_1f1b:$src/schedules/good/pipeline_1f1b.sched"; do
  label=${case%%:*}
  # shellcheck disable=SC2086 # the arguments split on purpose
  set -- ${case#*:}
  case $label in
  *OVL_HOST_MEMORY*) OVL_HOST_MEMORY=1000000000000; export OVL_HOST_MEMORY ;;
  esac
  t0=$(date +%s.%N)
  mrun 0 -r 64 "$@"
  rc=$?
  t1=$(date +%s.%N)
  unset OVL_HOST_MEMORY
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  echo "# $label on 64 ranks: $secs s"
  if [ "$rc" -eq 0 ] && has out '^result: PASS$' && has out 'backend model, 64 ranks' &&
    awk -v s="$secs" 'BEGIN { exit !(s < 60) }'
  then ok "$label on 64 ranks ($secs s)"; else ko "$label on 64 ranks ($secs s)"; fi
done

# ----------------------------------------------------------------------
# Bad --machine and --profile
# ----------------------------------------------------------------------

seed=$src/schedules/good/seed_small.sched
printf '{"format": "overlap-sim profile 1",\n "host": 3,\n}\n' >"$tmp/notjson.json"
printf '{"format": "overlap-sim machine 1", "name": "m", "colour": "red"}\n' >"$tmp/unknown.json"
printf '{"format": "overlap-sim profile 1",\n "machine": {"device": "d", "devices": "one"}}\n' >"$tmp/type.json"
printf '{"format": "overlap-sim profile 2"}\n' >"$tmp/format.json"
for flag in machine profile; do
  if mrun 2 --$flag="$tmp/none.json" "$seed" &&
    has err "^overlap_sim: $tmp/none.json: No such file or directory\$"
  then ok "--$flag: a missing file"; else ko "--$flag: a missing file"; fi
  if mrun 2 --$flag="$tmp" "$seed" && has err "^overlap_sim: $tmp: Is a directory\$"
  then ok "--$flag: a directory"; else ko "--$flag: a directory"; fi
  if mrun 2 --$flag="$tmp/notjson.json" "$seed" &&
    has err "^overlap_sim: $tmp/notjson.json:3:1: trailing comma before '}'\$"
  then ok "--$flag: not JSON"; else ko "--$flag: not JSON"; fi
  if mrun 2 --$flag= "$seed" && has err "^overlap_sim: --$flag: an empty path\$"
  then ok "--$flag: an empty path"; else ko "--$flag: an empty path"; fi
  if run 2 "--$flag on cpu" --$flag="$tmp/notjson.json" "$seed" &&
    has err "^overlap_sim: --$flag: only with --backend=model"
  then ok "--$flag: only with the model"; else ko "--$flag: only with the model"; fi
done
if mrun 2 --machine="$tmp/unknown.json" "$seed" &&
  has err "^overlap_sim: $tmp/unknown.json:1:60: unknown key 'colour' \\(known: "
then ok "--machine: an unknown key"; else ko "--machine: an unknown key"; fi
if mrun 2 --profile="$tmp/type.json" "$seed" &&
  has err "^overlap_sim: $tmp/type.json:2:40: 'machine.devices': expected a whole number"
then ok "--profile: a wrong type"; else ko "--profile: a wrong type"; fi
if mrun 2 --profile="$tmp/format.json" "$seed" &&
  has err "^overlap_sim: $tmp/format.json:1:12: 'format': expected \"overlap-sim profile 1\", found \"overlap-sim profile 2\""
then ok "--profile: another format"; else ko "--profile: another format"; fi
# A profile of another schedule (its ops' signature): refused before
# anything runs, both schedules named.
cat >"$tmp/other.json" <<'EOF'
{"format": "overlap-sim profile 1",
 "machine": {"device": "test", "devices": 1, "ranks": 2, "nccl": "x", "cuda": "y", "date": "2026-12-01"},
 "schedule": {"name": "other.sched", "sig": "0123456789abcdef"},
 "host": {"kernel_us": 1, "coll_us": 1, "p2p_us": 1, "record_us": 0, "wait_us": 0, "delay_us": 1, "graph_launch_us": 5, "sync_us": 0, "gap_us": 0, "graph_gap_us": 0},
 "kernels": [],
 "comm": {},
 "contention": {}}
EOF
if mrun 2 -r 2 --profile="$tmp/other.json" "$seed" &&
  has err "^overlap_sim: model: profile $tmp/other.json was calibrated on other.sched, not on seed_small.sched" &&
  ! has out '^(sync|async) '
then ok "--profile of another schedule: refused"
else ko "--profile of another schedule: refused"; fi
# Without its sig the same profile prices this one (what it lacks, the
# machine estimates).
sed '/"sig"/s/, "sig": "0123456789abcdef"//' "$tmp/other.json" >"$tmp/nosig.json"
if mrun 0 -r 2 --profile="$tmp/nosig.json" "$seed" && has out '^result: PASS$' &&
  has out ' 2 ranks \(2 x NVIDIA H200 \(model of h200-8x400g\)\)'
then ok "--profile without a sig: used"; else ko "--profile without a sig: used"; fi

# The built-in machine is machines/h200-8x400g.json (src/backend/
# model_machine.c keeps them equal): the same times with the file as
# without it, where the file is in the tree.
mfile=$src/machines/h200-8x400g.json
if [ -f "$mfile" ]; then
  for f in seed good/pipeline_1f1b; do
    mrun 0 -r 16 "$src/schedules/$f.sched" && grep -E '^(sync|async) ' "$tmp/out" >"$tmp/builtin"
    if mrun 0 -r 16 --machine="$mfile" "$src/schedules/$f.sched" &&
      grep -E '^(sync|async) ' "$tmp/out" >"$tmp/file" && [ -s "$tmp/file" ] &&
      cmp -s "$tmp/builtin" "$tmp/file"
    then ok "$f: the built-in machine is $mfile"
    else
      diff "$tmp/builtin" "$tmp/file" >>"$tmp/why"
      ko "$f: the built-in machine is $mfile"
    fi
  done
else
  echo "# $mfile is not in the tree: the built-in machine not compared with it"
fi

# overlap_sweep on the model: predicted rows, nothing checked.
sweep=${OVL_SWEEP:-${OVL_BUILDDIR:-.}/tools/overlap_sweep}
if "$sweep" --backend=model --ranks=8 --sizes=1M,64M -n 1 -w 0 >"$tmp/sweep.out" 2>&1 &&
  grep -q '^# model backend: the times are predicted' "$tmp/sweep.out" &&
  [ "$(grep -c '^ *1048576 .* n/a .* n/a .* n/a .* n/a ' "$tmp/sweep.out")" -eq 1 ] &&
  [ "$(grep -c '^ *67108864 ' "$tmp/sweep.out")" -eq 1 ]
then ok "overlap_sweep --backend=model: predicted rows, #wrong n/a"
else cp "$tmp/sweep.out" "$tmp/why"; ko "overlap_sweep --backend=model: predicted rows, #wrong n/a"; fi

finish
