#!/bin/sh
# tools/overlap_sim's output files (--json=FILE, --trace=FILE, --svg=FILE)
# and its standard output, on the cpu backend: device nodes are written in
# place and their errors reported, a symbolic link is followed, a path that
# is the schedule or another output is refused before anything runs, a path
# that cannot be written is refused before anything runs, a write error on
# stdout is exit 3, and a signal during a write leaves no temporary file.
# (tests/outputs2.sh: the temporary file's name, descriptors, mode and
# owner, long names.)
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
seed=$src/schedules/good/seed_small.sched
racy=$src/schedules/bad/missing_wait_compute.sched
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-out.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
pass=0 fail=0 skip=0
# A case that hangs (a FIFO opened with no reader) fails, not `make check`.
if command -v timeout >/dev/null 2>&1; then limit="timeout 60"; else limit=; fi

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$tmp/out" "$tmp/err" | head -40; }
skipped() { skip=$((skip + 1)); echo "SKIP: $1"; }

# run EXPECTED_EXIT ARGS...: the tool on the cpu backend, a short run (one
# trial, where it runs: --races and --replay run nothing timed).
run() {
  want=$1
  shift
  trials=--trials=1
  for a in "$@"; do
    case $a in --races | --replay*) trials= ;; esac
  done
  # shellcheck disable=SC2086
  $limit "$tool" --backend=cpu -n 2 -w 1 $trials "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then return 0; fi
  echo "    exit $got, expected $want"
  return 1
}
# has out|err REGEX
has() { grep -Eq -- "$2" "$tmp/$1"; }
# refused: nothing ran (the table goes to stdout: it is empty).
refused() { [ ! -s "$tmp/out" ]; }
# no_temps: no temporary file of the tool (.ovl-XXXXXX) left in $tmp.
no_temps() {
  for f in "$tmp"/.ovl-*; do
    [ -e "$f" ] && { echo "    left behind: $f"; return 1; }
  done
  return 0
}

# --- device nodes: written in place, their write errors reported. The
# nodes are copies made with mknod (as root), never /dev/null or /dev/full
# themselves: a tool that replaced its output file would replace the
# system's node. Without root, /dev/full itself, which a user who cannot
# write /dev cannot replace.
if mknod "$tmp/null" c 1 3 2>/dev/null && mknod "$tmp/full" c 1 7 2>/dev/null; then
  full=$tmp/full
  if run 0 -q --trace="$tmp/null" --svg="$tmp/null" "$seed" && [ -c "$tmp/null" ] &&
    no_temps
  then ok "--trace, --svg to a copy of /dev/null: still a device"; else ko "--trace, --svg to a copy of /dev/null: still a device"; fi
elif [ -c /dev/full ] && [ ! -w /dev ]; then
  full=/dev/full
  skipped "a copy of /dev/null (mknod needs root)"
else
  full=
  skipped "copies of /dev/null and /dev/full (mknod needs root)"
fi
if [ -n "$full" ]; then
  if run 3 -q --json="$full" "$seed" && has err "^overlap_sim: --json=$full: No space left on device\$" &&
    [ -c "$full" ]
  then ok "--json to /dev/full: exit 3, still a device"; else ko "--json to /dev/full: exit 3, still a device"; fi
fi
# A FIFO: written in place, for the reader.
if mkfifo "$tmp/fifo" 2>/dev/null; then
  cat "$tmp/fifo" >"$tmp/from-fifo" &
  reader=$!
  run 0 -q --json="$tmp/fifo" "$seed"
  got=$?
  # The reader ends when the tool closes the FIFO; one still waiting after
  # 5 s never saw it opened (the FIFO was replaced).
  i=0
  while kill -0 "$reader" 2>/dev/null && [ "$i" -lt 500 ]; do
    sleep 0.01 2>/dev/null || :
    i=$((i + 1))
  done
  kill "$reader" 2>/dev/null
  wait "$reader" 2>/dev/null
  if [ "$got" -eq 0 ] && [ -p "$tmp/fifo" ] && grep -q '"result": "PASS"' "$tmp/from-fifo"
  then ok "--json to a FIFO: the reader gets it"; else ko "--json to a FIFO: the reader gets it"; fi
  # A FIFO named FILE.tmp is nobody's temporary file: FILE is written, the
  # FIFO stays as it is (once, it would have been renamed over FILE).
  mv "$tmp/fifo" "$tmp/r2.json.tmp"
  if run 0 -q --json="$tmp/r2.json" "$seed" && grep -q '"result": "PASS"' "$tmp/r2.json" &&
    [ -p "$tmp/r2.json.tmp" ] && no_temps
  then ok "a FIFO named FILE.tmp: left as it is"; else ko "a FIFO named FILE.tmp: left as it is"; fi
  rm -f "$tmp/r2.json.tmp" "$tmp/r2.json"
else
  skipped "FIFOs (mkfifo failed)"
fi

# --- symbolic links: followed to the target; a dangling one is refused.
echo old >"$tmp/target.json"
ln -s target.json "$tmp/link.json"
if run 0 -q --json="$tmp/link.json" "$seed" && [ -L "$tmp/link.json" ] &&
  grep -q '"result": "PASS"' "$tmp/target.json" && no_temps
then ok "--json to a symbolic link: the target written, the link kept"; else ko "--json to a symbolic link: the target written, the link kept"; fi
ln -s nothing.json "$tmp/dangling.json"
if run 3 -q --json="$tmp/dangling.json" "$seed" &&
  has err -- "--json=$tmp/dangling.json: a symbolic link to 'nothing.json', which does not exist" &&
  refused && [ -L "$tmp/dangling.json" ] && [ ! -e "$tmp/nothing.json" ]
then ok "--json to a dangling link: refused"; else ko "--json to a dangling link: refused"; fi
mkdir "$tmp/dir"
if run 3 -q --svg="$tmp/dir" "$seed" && has err -- "--svg=$tmp/dir: is a directory" && refused
then ok "--svg to a directory: refused"; else ko "--svg to a directory: refused"; fi

# --- the schedule, or another output: refused (exit 2), nothing changed.
cp "$seed" "$tmp/victim.sched"
if run 2 --json="$tmp/victim.sched" "$tmp/victim.sched" &&
  has err -- "--json=$tmp/victim.sched: is the same file as the input $tmp/victim.sched" &&
  refused && cmp -s "$seed" "$tmp/victim.sched"
then ok "--json=SCHEDULE: refused, the schedule unchanged"; else ko "--json=SCHEDULE: refused, the schedule unchanged"; fi
ln -s victim.sched "$tmp/victim-link"
if run 2 --trace="$tmp/victim-link" "$tmp/victim.sched" && has err 'is the same file as the input' &&
  refused && cmp -s "$seed" "$tmp/victim.sched"
then ok "--trace=a link to the schedule: refused"; else ko "--trace=a link to the schedule: refused"; fi
if run 2 --races --json="$tmp/victim.sched" "$tmp/victim.sched" && has err 'is the same file as the input' &&
  refused && cmp -s "$seed" "$tmp/victim.sched"
then ok "--races --json=SCHEDULE: refused"; else ko "--races --json=SCHEDULE: refused"; fi
if run 2 --trace="$tmp/same.json" --svg="$tmp/./same.json" "$seed" &&
  has err -- "--svg=$tmp/\./same\.json: is the same file as --trace=$tmp/same\.json" &&
  refused && [ ! -e "$tmp/same.json" ]
then ok "--trace and --svg to one file: refused"; else ko "--trace and --svg to one file: refused"; fi

# --- a path that cannot be written: refused before the run.
if run 3 -n 3 --trace=/nonexistent/dir/t.json "$seed" &&
  has err '^overlap_sim: --trace=/nonexistent/dir/t\.json: cannot create it in /nonexistent/dir: No such file or directory$' &&
  refused
then ok "--trace=/nonexistent/dir/t.json: refused before the run"; else ko "--trace=/nonexistent/dir/t.json: refused before the run"; fi
if run 3 --races --json=/nonexistent/r.json "$racy" && has err -- '--json=/nonexistent/r\.json: cannot create' && refused
then ok "--races --json to a bad path: refused"; else ko "--races --json to a bad path: refused"; fi

# --- A file named FILE.tmp (once the temporary file's name) is the user's:
# not touched.
echo mine >"$tmp/r.json.tmp"
if run 0 -q --json="$tmp/r.json" "$seed" && grep -q '"result"' "$tmp/r.json" &&
  [ "$(cat "$tmp/r.json.tmp")" = mine ] && no_temps
then ok "a file named FILE.tmp is not touched"; else ko "a file named FILE.tmp is not touched"; fi
# --races --json=FILE is written as a run's outputs are.
if run 4 --races --json="$tmp/races.json" "$racy" && grep -q '"count":1' "$tmp/races.json" &&
  no_temps
then ok "--races --json=FILE"; else ko "--races --json=FILE"; fi

# --- a write error on stdout: exit 3, whatever the run's verdict.
if [ -c /dev/full ]; then
  full() { # NAME ARGS...: the tool with stdout on /dev/full, exit 3
    name=$1
    shift
    "$tool" "$@" >/dev/full 2>"$tmp/err"
    got=$?
    : >"$tmp/out"
    if [ "$got" -eq 3 ] && [ "$(grep -c 'write error on standard output: No space left on device$' "$tmp/err")" -eq 1 ]
    then ok "stdout on /dev/full: $name"; else echo "    exit $got"; ko "stdout on /dev/full: $name"; fi
  }
  full "a run" --backend=cpu -n 2 -w 1 --trials=1 "$seed"
  full "a run, -q" --backend=cpu -n 2 -w 1 --trials=1 -q "$seed"
  full "--races" --backend=cpu --races "$racy"
  full "--races --json" --backend=cpu --races --json "$racy"
  full "--help" --help
  full "--version" --version
  # --json=-: the JSON's own error, said once.
  "$tool" --backend=cpu -n 2 -w 1 --trials=1 --json=- "$seed" >/dev/full 2>"$tmp/err"
  got=$?
  if [ "$got" -eq 3 ] && [ "$(grep -c 'No space left on device' "$tmp/err")" -eq 1 ] &&
    has err -- '--json=-: writing to stdout: No space left on device'
  then ok "--json=- on /dev/full"; else echo "    exit $got"; ko "--json=- on /dev/full"; fi
else
  skipped "stdout on /dev/full (no /dev/full)"
fi
# A usage error stays exit 2.
if "$tool" --bogus >/dev/full 2>"$tmp/err"; then got=0; else got=$?; fi
if [ "$got" -eq 2 ]; then ok "a usage error with stdout full: exit 2"; else ko "a usage error with stdout full: exit 2"; fi

# --- a signal while the trace is written removes the temporary file. The
# schedule's 200,000 ops make a trace of about 80 MB, which takes a while
# to write: SIGTERM goes as soon as the temporary file has bytes (the
# check before the run makes an empty one for an instant). A run that
# ends before the signal lands proves nothing, and is tried again.
printf 'a = data(shape=[1], init=fill, value=1)\nrepeat 200000 {\n  a = scale(a, scale=1.0)\n}\nfetch(a)\n' >"$tmp/big.sched"
verdict=
for attempt in 1 2 3; do
  rm -f "$tmp/big.json"
  "$tool" --backend=cpu -n 1 -w 0 --trials=1 --mode=async --no-races -q --trace="$tmp/big.json" \
    "$tmp/big.sched" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  writing=
  while kill -0 "$pid" 2>/dev/null && [ -z "$writing" ]; do
    for f in "$tmp"/.ovl-*; do [ -s "$f" ] && writing=$f; done
    [ -n "$writing" ] || sleep 0.01 2>/dev/null || :
  done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  got=$?
  if [ "$got" -eq 143 ]; then
    if no_temps && [ ! -e "$tmp/big.json" ]; then verdict=pass; else verdict=fail; fi
    break
  fi
  [ "$got" -eq 0 ] || { verdict=fail; break; }
done
rm -f "$tmp/big.json" "$tmp"/.ovl-*
case $verdict in
pass) ok "SIGTERM while the trace is written: no temporary file left" ;;
fail) echo "    exit $got (expected 143: killed by SIGTERM)"; ko "SIGTERM while the trace is written: no temporary file left" ;;
*) skipped "SIGTERM while the trace is written (the write ended before the signal, 3 times)" ;;
esac

echo "outputs.sh: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
