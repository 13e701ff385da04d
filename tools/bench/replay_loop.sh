#!/bin/sh
# How reliably --replay shows races: runs `overlap_sim --replay` N times on
# each schedule and counts the races shown as wrong numbers.
#
#   tools/bench/replay_loop.sh [-t TOOL] [-n N] [-s] [SCHEDULE]... [-- EXTRA OPTIONS]
#
# Defaults: TOOL=tools/overlap_sim, N=10, every schedule in schedules/bad/.
# -s strips the schedules' own `delay(...)` lines first (schedules/bad/
# place one by hand so that a plain run shows the bug): then only the
# replay's delay is left to show it. EXTRA OPTIONS go to the tool
# (--backend=cuda, --ranks=N, -D n=..., --replay-delay=US, --mode=...).
# One line per schedule: "NAME: shown S of R races in N runs" (R = races
# replayed in all runs; a run that does not exit 4 is printed and counted
# as failed), then the total; exit 0 when every race replayed was shown in
# every run and no run failed, else 1.
set -u

tool=tools/overlap_sim
n=10
strip=0
scheds=
while [ $# -gt 0 ]; do
  case $1 in
  -t) tool=$2; shift 2 ;;
  -n) n=$2; shift 2 ;;
  -s) strip=1; shift ;;
  --) shift; break ;;
  -*) echo "replay_loop.sh: unknown option $1" >&2; exit 2 ;;
  *) scheds="$scheds $1"; shift ;;
  esac
done
if [ -z "$scheds" ]; then
  src=$(dirname "$0")/../..
  scheds=$(ls "$src"/schedules/bad/*.sched)
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/replay-loop.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

all_shown=0
all_total=0
all_failed=0
for f in $scheds; do
  name=$(basename "$f" .sched)
  if [ "$strip" -eq 1 ]; then
    grep -v '^[[:space:]]*delay(' "$f" >"$tmp/$name.sched"
    f=$tmp/$name.sched
  fi
  shown=0
  total=0
  failed=0
  i=0
  while [ "$i" -lt "$n" ]; do
    i=$((i + 1))
    # The line "replay: S of R races shown as wrong numbers".
    "$tool" -q --replay "$@" "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    line=$(grep '^replay: [0-9]* of [0-9]* race' "$tmp/out")
    if [ "$rc" -ne 4 ] || [ -z "$line" ]; then
      echo "$name: run $i: exit $rc" >&2
      cat "$tmp/out" "$tmp/err" >&2
      failed=$((failed + 1))
      continue
    fi
    s=$(echo "$line" | sed 's/^replay: \([0-9]*\) of \([0-9]*\) .*/\1/')
    t=$(echo "$line" | sed 's/^replay: \([0-9]*\) of \([0-9]*\) .*/\2/')
    shown=$((shown + s))
    total=$((total + t))
  done
  echo "$name: shown $shown of $total races in $n runs$([ "$failed" -gt 0 ] && echo " ($failed runs failed)")"
  all_shown=$((all_shown + shown))
  all_total=$((all_total + total))
  all_failed=$((all_failed + failed))
done
echo "total: shown $all_shown of $all_total races$([ "$all_failed" -gt 0 ] && echo "; $all_failed runs failed")"
[ "$all_failed" -eq 0 ] && [ "$all_shown" -eq "$all_total" ] && [ "$all_total" -gt 0 ]
