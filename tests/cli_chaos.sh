#!/bin/sh
# tools/overlap_sim on every schedule under schedules/: the verdict of
# --races, and --chaos runs under three seeds that agree with it.
src=${srcdir:-.}
. "$src/tests/lib.sh"

# Every schedule under schedules/: --races gives the expected verdict (bad/
# racy, mismatched or deadlocked, exit 4; the rest clean, exit 0), and chaos
# runs agree with it: under every seed a racy schedule's numbers break and a
# clean one's never do; one whose ranks disagree never runs (exit 4).
# chaos_one SCHEDULE: its --races verdict and its chaos runs (the runs
# mostly sleep: the schedules run side by side, par_run).
chaos_one() {
  f=$1
  case $f in */bad/*) want=4 chaos_want=1 runner=run_racy ;; *) want=0 chaos_want=0 runner=run ;; esac
  case $f in */bad/*) racy "$f" || chaos_want=4 ;; esac
  # (not `name`: run() sets that)
  sname=${f#"$src"/}
  if run $want "races $sname" --races "$f"; then ok "--races $sname"; else ko "--races $sname"; fi
  case $f in *allreduce_sweep*|*/seed.sched) return 0 ;; esac
  for seed in 1 2 3; do
    if $runner $chaos_want "chaos $seed $sname" --chaos=$seed -n 2 -w 0 --mode=async "$f"
    then ok "--chaos=$seed $sname"; else ko "--chaos=$seed $sname"; fi
  done
}
for f in "$src"/schedules/*.sched "$src"/schedules/good/*.sched "$src"/schedules/bad/*.sched; do
  par_run chaos_one "$f"
done
par_wait

finish
