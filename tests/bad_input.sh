#!/bin/sh
# The catalogue of bad input (tests/bad_input.tsv): run tools/overlap_sim
# on the cpu backend for every case and check its exit status, that its
# message matches (file:line:col, the file, or the flag), and that nothing
# ran when it refused. The table's header says how a case is written.
#
# Usage: bad_input.sh [CASE_NAME...]   (no names: every case)
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
table=$src/tests/bad_input.tsv
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-bad.XXXXXX") || exit 99
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -r "$table" ] || { echo "bad_input.sh: cannot read $table" >&2; exit 99; }
# A case that hangs is a failure, not a stuck `make check`.
if command -v timeout >/dev/null 2>&1; then limit="timeout 120"; else limit=; fi
tab=$(printf '\t')
pass=0 fail=0 skip=0

# gen WHAT FILE: the generated inputs.
gen() {
  case $1 in
  longident) # one identifier of 100000 characters
    { printf '%100000s' '' | tr ' ' a
      printf ' = data(shape=[4])\n'; } >"$2" ;;
  longline) # an error 100000 columns into line 2
    { printf 'a = data(shape=[4])\n%100000s' ''
      printf 'b = assgn(a)\n'; } >"$2" ;;
  longcomment) # a 1 MB comment line before a valid program
    { printf '#%1000000s\n' '' | tr ' ' x
      printf 'a = data(shape=[4], init=fill, value=1)\nfetch(a)\n'; } >"$2" ;;
  deepnest | deepnest64) # repeat blocks nested 65 (one too many) or 64 deep
    n=65
    [ "$1" = deepnest64 ] && n=64
    {
      printf 'a = data(shape=[4], init=fill, value=1)\n'
      i=0
      while [ "$i" -lt "$n" ]; do printf 'repeat 1 {\n'; i=$((i + 1)); done
      printf 'b = assign(a)\n'
      i=0
      while [ "$i" -lt "$n" ]; do printf '}\n'; i=$((i + 1)); done
      printf 'fetch(b)\n'
    } >"$2" ;;
  bigfile) # 65 MiB, sparse: refused from its size, before it is read
    dd if=/dev/null of="$2" bs=1048576 seek=65 count=0 2>/dev/null ;;
  *) echo "bad_input.sh: unknown generator '$1'" >&2; return 1 ;;
  esac
}

# wanted NAME: whether the command line selects this case.
wanted() {
  [ "$nsel" -eq 0 ] && return 0
  for w in $sel; do [ "$w" = "$1" ] && return 0; done
  return 1
}
sel=$*
nsel=$#

# One case per line: name, exit, flags, regex, input (see the table).
while IFS=$tab read -r name want flags regex input; do
  case $name in '' | '#'*) continue ;; esac
  wanted "$name" || continue
  if [ -z "$input" ] || [ -z "$regex" ]; then
    echo "ERROR: $name: malformed line (five tab-separated fields)"
    fail=$((fail + 1))
    continue
  fi
  file=$tmp/$name.sched
  sched=$file
  case $input in
  -) sched= ;;
  @empty) : >"$file" ;;
  @missing) ;;
  @dir) mkdir "$file" ;;
  @unreadable)
    printf 'a = data(shape=[4])\n' >"$file"
    chmod 000 "$file"
    if [ -r "$file" ]; then # root reads anything
      echo "SKIP: $name (running as root: a mode 000 file is readable)"
      skip=$((skip + 1))
      continue
    fi ;;
  @gen:*) gen "${input#@gen:}" "$file" || { fail=$((fail + 1)); continue; } ;;
  *) printf '%b' "$input" >"$file" ;;
  esac
  [ "$flags" = - ] && flags=
  # The arguments: the flags split on blanks, each word read as printf %b
  # (so that a flag can hold a newline, a tab or a blank), leading NAME=VALUE
  # words set in the environment instead; then the schedule, if any.
  envs=
  set -f
  set --
  for w in $flags; do
    case $# in 0) case $w in [A-Z_]*=*) envs="$envs $w"; continue ;; esac ;; esac
    w=$(printf '%bx' "$w")
    set -- "$@" "${w%x}"
  done
  set +f
  [ -n "$sched" ] && set -- "$@" "$sched"
  # One trial (the default repeats a short run up to 5 times), unless the
  # case names --trials, or --races or --replay, which refuse it.
  one_trial=--trials=1
  for w in "$@"; do
    case $w in --trials | --trials=* | --races | --replay | --replay=*) one_trial= ;; esac
  done
  # @F: the schedule's path, as a regex.
  regex=$(printf '%s\n' "$regex" | sed "s|@F|[^ ]*/$name\\\\.sched|g")
  stream=err
  case $regex in stdout:*) stream=out regex=${regex#stdout:} ;; esac

  set -f
  # shellcheck disable=SC2086 # the environment words are split on purpose
  $limit env $envs "$tool" --backend=cpu -n 1 -w 0 $one_trial "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  set +f

  why=
  if [ "$got" -ne "$want" ]; then
    why="exit $got, expected $want"
  elif ! grep -Eq -- "$regex" "$tmp/$stream"; then
    why="std$stream does not match: $regex"
  elif [ "$want" -ne 0 ] && [ -s "$tmp/out" ]; then
    why="it refused but printed to stdout (something ran)"
  elif [ "$want" -ne 0 ] && ! head -n 1 "$tmp/err" | grep -q '^overlap_sim: '; then
    why="the message does not start with 'overlap_sim: '"
  elif [ "$want" -eq 0 ] && [ -s "$tmp/err" ]; then
    why="it passed but wrote to stderr"
  fi
  if [ -z "$why" ]; then
    pass=$((pass + 1))
    echo "PASS: $name"
  else
    fail=$((fail + 1))
    echo "FAIL: $name: $why"
    echo "    command:$envs overlap_sim --backend=cpu -n 1 -w 0 $one_trial $*"
    sed 's/^/    stdout| /' "$tmp/out" | head -20
    sed 's/^/    stderr| /' "$tmp/err" | head -20
  fi
  [ -d "$file" ] && rmdir "$file"
  rm -f "$file"
done <"$table"

echo "$pass passed, $fail failed, $skip skipped"
if [ "$nsel" -gt 0 ] && [ $((pass + fail + skip)) -eq 0 ]; then
  echo "no case named: $sel"
  exit 99
fi
[ "$fail" -eq 0 ]
