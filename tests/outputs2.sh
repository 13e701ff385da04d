#!/bin/sh
# tools/overlap_sim's output files (--json=FILE, --trace=FILE, --svg=FILE),
# on the cpu backend, part 2 (tests/outputs.sh is part 1; two scripts, so
# that `make -j2 check` runs them side by side): the temporary file a
# regular FILE is written to cannot be the schedule, another output or any
# file that exists (FILE.tmp is nobody's name any more), and works for the
# longest names; a path that names one of the tool's descriptors
# (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) is written in
# place through it, at its offset or appending, whatever it leads to;
# --json=- is routed before the paths are resolved; a rewritten FILE keeps
# its mode and owner.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
seed=$src/schedules/good/seed_small.sched
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-out2.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
pass=0 fail=0 skip=0
if command -v timeout >/dev/null 2>&1; then limit="timeout 60"; else limit=; fi
if command -v python3 >/dev/null 2>&1; then py=python3; else py=; fi

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" "$tmp/err" | head -40; }
skipped() { skip=$((skip + 1)); echo "SKIP: $1"; }
# verdict NAME: after a condition, its outcome ($? of the command before).
verdict() { if [ $? -eq 0 ]; then ok "$1"; else ko "$1"; fi; }

# run EXPECTED_EXIT ARGS...: a short run on the cpu backend, one trial,
# stdout and stderr into $tmp/out and $tmp/err (the callers below that
# redirect them themselves call the tool directly).
sim() { $limit "$tool" --backend=cpu -n 2 -w 1 --trials=1 "$@"; }
run() {
  want=$1
  shift
  sim "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" -eq "$want" ] && return 0
  echo "    exit $got, expected $want"
  return 1
}
# no_temps DIR: no temporary file of the tool left in DIR.
no_temps() {
  for f in "$1"/.ovl-*; do
    [ -e "$f" ] && { echo "    left behind: $f"; return 1; }
  done
  return 0
}
# json FILE: FILE is one JSON document (python3 where there is one, else
# its first and last bytes).
json() {
  if [ -n "$py" ]; then
    $py -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null
  else
    [ "$(head -c 1 "$1")" = "{" ] && [ "$(tail -c 2 "$1" | head -c 1)" = "}" ]
  fi
}
is_run_json() { json "$1" && grep -q '"result": "PASS"' "$1"; }
is_trace() { json "$1" && grep -q '"traceEvents"' "$1"; }
is_svg() { grep -q '^<svg' "$1" && grep -q '</svg>' "$1"; }

# --- 1. A schedule named FILE.tmp: neither read as nor replaced by the
# output's temporary file.
d=$tmp/one
mkdir "$d"
cp "$seed" "$d/r.json.tmp"
cp "$seed" "$d/t.json.tmp"
cp "$seed" "$d/p.svg.tmp"
run 0 -q --json="$d/r.json" "$d/r.json.tmp" && cmp -s "$seed" "$d/r.json.tmp" &&
  is_run_json "$d/r.json" && no_temps "$d"
verdict "--json=FILE with the schedule FILE.tmp: the schedule kept"
run 0 -q --trace="$d/t.json" "$d/t.json.tmp" && cmp -s "$seed" "$d/t.json.tmp" &&
  is_trace "$d/t.json" && no_temps "$d"
verdict "--trace=FILE with the schedule FILE.tmp: the schedule kept"
run 0 -q --svg="$d/p.svg" "$d/p.svg.tmp" && cmp -s "$seed" "$d/p.svg.tmp" &&
  is_svg "$d/p.svg" && no_temps "$d"
verdict "--svg=FILE with the schedule FILE.tmp: the schedule kept"

# --- 2. An output named after another's old temporary name: both written.
d=$tmp/two
mkdir "$d"
run 0 -q --json="$d/a" --trace="$d/a.tmp" "$seed" && is_run_json "$d/a" &&
  is_trace "$d/a.tmp" && no_temps "$d"
verdict "--json=a --trace=a.tmp: both written"
rm -f "$d/a" "$d/a.tmp"
run 0 -q --svg="$d/a" --trace="$d/a.tmp" "$seed" && is_svg "$d/a" &&
  is_trace "$d/a.tmp" && no_temps "$d"
verdict "--svg=a --trace=a.tmp: both written"
rm -f "$d/a" "$d/a.tmp"
run 0 -q --json="$d/a" --svg="$d/a.tmp" "$seed" && is_run_json "$d/a" &&
  is_svg "$d/a.tmp" && no_temps "$d"
verdict "--json=a --svg=a.tmp: both written"
# Files that exist beside the target, whatever their names, are not touched.
echo mine >"$d/b.json.tmp"
run 0 -q --json="$d/b.json" "$seed" && is_run_json "$d/b.json" &&
  [ "$(cat "$d/b.json.tmp")" = mine ] && no_temps "$d"
verdict "a file FILE.tmp beside FILE: left as it is"

# --- 3. /dev/stdout, /dev/stderr and /proc/self/fd/N that lead to a
# regular file: written in place, through the descriptor (appending where
# it appends), in order with what the tool prints.
d=$tmp/three
mkdir "$d"
echo earlier >"$d/results.log"
sim -q --json=/dev/stdout "$seed" >>"$d/results.log" 2>"$tmp/err"
got=$?
: >"$tmp/out"
# The earlier line, the JSON, then the verdict.
sed -n '2,$p' "$d/results.log" | sed '$d' >"$d/json.part"
[ "$got" -eq 0 ] && [ "$(head -n 1 "$d/results.log")" = earlier ] &&
  [ "$(tail -n 1 "$d/results.log")" = "result: PASS" ] && is_run_json "$d/json.part"
verdict "--json=/dev/stdout >> log: appended, the log's lines and the verdict kept (exit $got)"
sim --trace=/dev/stdout "$seed" >"$d/out.txt" 2>"$tmp/err"
got=$?
[ "$got" -eq 0 ] && head -n 1 "$d/out.txt" | grep -q '^overlap_sim .*: backend cpu' &&
  grep -q '^{"traceEvents"' "$d/out.txt" && [ "$(tail -n 1 "$d/out.txt")" = "result: PASS" ]
verdict "--trace=/dev/stdout > file: the table, the trace, then the verdict (exit $got)"
echo e0 >"$d/e.log"
sim -q --json=/dev/stderr "$seed" 2>>"$d/e.log" >"$tmp/out"
got=$?
sed -n '2,$p' "$d/e.log" >"$d/json.part"
[ "$got" -eq 0 ] && [ "$(head -n 1 "$d/e.log")" = e0 ] && is_run_json "$d/json.part" &&
  has_pass=$(cat "$tmp/out") && [ "$has_pass" = "result: PASS" ]
verdict "--json=/dev/stderr 2>> log: appended, the log's line kept (exit $got)"
echo earlier >"$d/fd.log"
ln -s /proc/self/fd/1 "$d/to-stdout"
sim -q --json="$d/to-stdout" "$seed" >>"$d/fd.log" 2>"$tmp/err"
got=$?
sed -n '2,$p' "$d/fd.log" | sed '$d' >"$d/json.part"
[ "$got" -eq 0 ] && [ "$(head -n 1 "$d/fd.log")" = earlier ] &&
  [ "$(tail -n 1 "$d/fd.log")" = "result: PASS" ] && is_run_json "$d/json.part"
verdict "--json=a link to /proc/self/fd/1 >> log: appended (exit $got)"
# A descriptor that is not open: refused before the run.
sim -q --json=/dev/fd/7 "$seed" >"$tmp/out" 2>"$tmp/err" 7>&-
got=$?
[ "$got" -eq 3 ] && grep -q -- '--json=/dev/fd/7: descriptor 7 is not open' "$tmp/err" &&
  [ ! -s "$tmp/out" ]
verdict "--json=/dev/fd/7, 7 closed: exit 3 before the run (exit $got)"
# Standard output that leads to the schedule: refused, the schedule kept.
cp "$seed" "$d/victim.sched"
sim -q --json=/dev/stdout "$d/victim.sched" >>"$d/victim.sched" 2>"$tmp/err"
got=$?
[ "$got" -eq 2 ] && grep -q 'is the same file as the input' "$tmp/err" &&
  cmp -s "$seed" "$d/victim.sched"
verdict "--json=/dev/stdout >> SCHEDULE: refused (exit $got)"

# --- 4. --json=- routed first: /dev/stdout then names where the report
# goes (stderr), and the JSON is alone on stdout.
d=$tmp/four
mkdir "$d"
sim -q --json=- --trace=/dev/stdout "$seed" >"$d/out" 2>"$d/err"
got=$?
cp "$d/out" "$tmp/out"; cp "$d/err" "$tmp/err"
sed '$d' "$d/err" >"$d/trace.part"
[ "$got" -eq 0 ] && is_run_json "$d/out" && is_trace "$d/trace.part" &&
  [ "$(tail -n 1 "$d/err")" = "result: PASS" ]
verdict "--json=- --trace=/dev/stdout > file: the JSON alone on stdout, the trace then the verdict on stderr (exit $got)"
sim -q --json=- --trace=/dev/stdout "$seed" 2>"$d/err" | cat >"$d/out"
cp "$d/out" "$tmp/out"; cp "$d/err" "$tmp/err"
sed '$d' "$d/err" >"$d/trace.part"
is_run_json "$d/out" && is_trace "$d/trace.part" &&
  [ "$(tail -n 1 "$d/err")" = "result: PASS" ]
verdict "--json=- --trace=/dev/stdout | cat: the same through a pipe"

# --- 5. A rewritten output keeps its mode and owner; a new one gets
# 0666 less the umask.
d=$tmp/five
mkdir "$d"
echo old >"$d/m.json"
chmod 600 "$d/m.json"
run 0 -q --json="$d/m.json" "$seed" && is_run_json "$d/m.json" &&
  [ "$(stat -c %a "$d/m.json")" = 600 ]
verdict "a 0600 output rewritten: still 0600"
echo old >"$d/m.svg"
chmod 640 "$d/m.svg"
run 0 -q --svg="$d/m.svg" "$seed" && is_svg "$d/m.svg" && [ "$(stat -c %a "$d/m.svg")" = 640 ]
verdict "a 0640 --svg output rewritten: still 0640"
(umask 027 && sim -q --json="$d/new.json" "$seed" >"$tmp/out" 2>"$tmp/err")
is_run_json "$d/new.json" && [ "$(stat -c %a "$d/new.json")" = 640 ]
verdict "a new output under umask 027: 0640"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  echo old >"$d/o.json"
  chown nobody "$d/o.json"
  grp=$(stat -c %G "$d/o.json")
  run 0 -q --json="$d/o.json" "$seed" && is_run_json "$d/o.json" &&
    [ "$(stat -c %U "$d/o.json")" = nobody ] && [ "$(stat -c %G "$d/o.json")" = "$grp" ]
  verdict "an output owned by nobody, rewritten as root: still nobody's"
else
  skipped "the owner of a rewritten output (needs root and a user nobody)"
fi

# --- 6. The longest names a directory takes (255 bytes here), and 252.
d=$tmp/six
mkdir "$d"
n255=$(printf '%255s' '' | tr ' ' j)
n252=$(printf '%252s' '' | tr ' ' t)
if : >"$d/$n255" 2>/dev/null; then
  rm -f "$d/$n255"
  run 0 -q --json="$d/$n255" --trace="$d/$n252" "$seed" && is_run_json "$d/$n255" &&
    is_trace "$d/$n252" && no_temps "$d"
  verdict "--json and --trace of 255- and 252-byte names"
else
  skipped "255-byte names (this file system takes fewer)"
fi

echo "outputs2.sh: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
