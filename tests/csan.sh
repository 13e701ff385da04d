#!/bin/sh
# The race checker against PyTorch's CUDA sanitizer (CSAN): every scenario
# of CSAN's unit tests (TestEventHandler in PyTorch's
# test/test_cuda_sanitizer.py) as a schedule in tests/csan/, each with
# CSAN's verdict in machine-readable header lines (tests/csan/README.md):
#
#   # expect: races=N
#   # expect-race: VAR LINE:ACCESS:STREAM LINE:ACCESS:STREAM   (one per race)
#   # expect-note: TEXT                                         (optional)
#
# `overlap_sim --races --mode=async` (the schedule as written: CSAN has no
# sync form) must exit 4 with exactly those races (the variable,
# both lines, access kinds and streams; nothing more, nothing less) and
# the note, or exit 0 when N is 0. A clean scenario must also run, with
# its numbers checked: PASS, plain and under chaos.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-csan.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/why" "$tmp/out" "$tmp/err" 2>/dev/null | head -40
}

# The scenarios: 15 tests of TestEventHandler, one of them (deleted_record)
# with 3 subtests.
nfiles=0
for f in "$src"/tests/csan/*.sched; do
  [ -f "$f" ] || continue
  nfiles=$((nfiles + 1))
  name=${f##*/}
  : >"$tmp/why"

  # The expectation, from the header.
  nexp=$(grep -c '^# expect: races=[0-9][0-9]*$' "$f")
  if [ "$nexp" -ne 1 ]; then
    echo "want exactly one '# expect: races=N' line, found $nexp" >"$tmp/why"
    : >"$tmp/out"; : >"$tmp/err"
    ko "$name: header"; continue
  fi
  want=$(sed -n 's/^# expect: races=\([0-9][0-9]*\)$/\1/p' "$f")
  sed -n 's/^# expect-race: //p' "$f" | LC_ALL=C sort >"$tmp/want"
  if [ "$(wc -l <"$tmp/want")" -ne "$want" ]; then
    echo "races=$want but $(wc -l <"$tmp/want") expect-race lines" >"$tmp/why"
    : >"$tmp/out"; : >"$tmp/err"
    ko "$name: header"; continue
  fi

  # The verdict: exit status, the count, every race, the note.
  "$tool" --backend=cpu --races --mode=async "$f" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$want" -eq 0 ]; then
    if [ "$rc" -eq 0 ] && grep -q "^no races in .*$name (" "$tmp/out" &&
      [ ! -s "$tmp/err" ]
    then ok "$name: no race, as CSAN"
    else echo "exit $rc, expected 0" >"$tmp/why"; ko "$name: no race, as CSAN"
    fi
  else
    # One line a race: VAR LINE:ACCESS:STREAM LINE:ACCESS:STREAM.
    awk '
      function flush() { if (var != "") print var, acc[1], acc[2] }
      /^race [0-9]+: / { flush(); var = $3; gsub("\047", "", var); n = 0; next }
      /^  (read|write) / {
        loc = $(NF - 1); sub(/.*:/, "", loc)
        acc[++n] = loc ":" $1 ":" $NF
      }
      END { flush() }' "$tmp/out" | LC_ALL=C sort >"$tmp/got"
    if [ "$want" -eq 1 ]; then s=; else s=s; fi
    if [ "$rc" -ne 4 ]; then
      echo "exit $rc, expected 4" >"$tmp/why"
    elif ! grep -q "^$want race$s in .*$name (2 ranks)$" "$tmp/out"; then
      echo "the summary does not say $want race$s" >"$tmp/why"
    elif ! cmp -s "$tmp/want" "$tmp/got"; then
      { echo "races (want, then got):"; cat "$tmp/want"; echo "--"; cat "$tmp/got"; } >"$tmp/why"
    fi
    if grep -q '^# expect-note: ' "$f" && [ ! -s "$tmp/why" ]; then
      sed -n 's/^# expect-note: //p' "$f" | while IFS= read -r note; do
        grep -qF "  note: $note" "$tmp/out" || echo "no note: $note" >>"$tmp/why"
      done
    fi
    if [ ! -s "$tmp/why" ]
    then ok "$name: $want race$s, as CSAN"; else ko "$name: $want race$s, as CSAN"; fi
  fi

  # A clean scenario also runs, with its numbers checked (each fetches a
  # result after joining its streams into calc), plain and under chaos.
  [ "$want" -eq 0 ] || continue
  for chaos in "" --chaos=1 --chaos=2; do
    : >"$tmp/why"
    "$tool" --backend=cpu $chaos "$f" -n 2 -w 0 --trials=1 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q '^sync .* ok ([1-9][0-9]* elements); no races$' "$tmp/out" &&
      grep -q '^async .* ok ([1-9][0-9]* elements); no races$' "$tmp/out" &&
      grep -q '^result: PASS$' "$tmp/out"
    then ok "$name: runs ${chaos:-plain}"
    else echo "exit $rc, expected 0 and PASS" >"$tmp/why"; ko "$name: runs ${chaos:-plain}"
    fi
  done
done

# All of them were found (17: a lost file must not pass unseen).
if [ "$nfiles" -eq 17 ]; then ok "17 scenarios"
else : >"$tmp/out"; : >"$tmp/err"; echo "found $nfiles" >"$tmp/why"; ko "17 scenarios"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
