#!/bin/sh
# tools/overlap_sim --svg renders: rsvg-convert (Debian librsvg2-bin) turns
# the picture of a traced run into a PNG of the SVG's width. Skips (77)
# where rsvg-convert is missing.
set -u

tool=${OVL_TOOL:-tools/overlap_sim}
if ! command -v rsvg-convert >/dev/null 2>&1; then
  echo "SKIP: rsvg-convert not found (Debian: apt-get install librsvg2-bin)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-svg.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0
fail=0

# png_width FILE: the width in the PNG's IHDR chunk (bytes 16-19).
png_width() {
  od -An -tu1 -j16 -N4 "$1" | awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }'
}

# render NAME ARGS...: run with --svg, render, check the PNG.
render() {
  name=$1
  shift
  if ! "$tool" --backend=cpu -q -n 2 -w 1 --trials=1 -D cols=10 --svg="$tmp/$name.svg" "$@" >"$tmp/out" 2>&1; then
    echo "FAIL: $name: the run failed"
    sed 's/^/    | /' "$tmp/out"
    fail=$((fail + 1))
    return
  fi
  if rsvg-convert -o "$tmp/$name.png" "$tmp/$name.svg" 2>"$tmp/err" &&
    [ -s "$tmp/$name.png" ] &&
    [ "$(od -An -c -j1 -N3 "$tmp/$name.png" | tr -d ' ')" = PNG ] &&
    [ "$(png_width "$tmp/$name.png")" -eq 1200 ]; then
    echo "PASS: $name renders ($(wc -c <"$tmp/$name.svg") bytes of SVG, $(wc -c <"$tmp/$name.png") of PNG)"
    pass=$((pass + 1))
  else
    echo "FAIL: $name: rsvg-convert exit or PNG (width $(png_width "$tmp/$name.png" 2>/dev/null))"
    sed 's/^/    | /' "$tmp/err"
    fail=$((fail + 1))
  fi
}

render both
render all --mode=all
render async4 --mode=async -r 4

# A run that found a race, and its replay: the raced ops are outlined and
# labelled "race 1", and waits are coloured by kind (an event wait, a host
# sync, a collective waiting for its peers), and the picture renders.
# render_racy NAME RC ARGS...: as render, the run exiting RC. The schedule
# races on purpose and its race on the emulated device memory is real, so a
# ThreadSanitizer build's reports are off for these runs (as in cli.sh).
render_racy() {
  name=$1 want=$2
  shift 2
  TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}report_bugs=0" \
    "$tool" --backend=cpu -q --svg="$tmp/$name.svg" "$@" >"$tmp/out" 2>&1
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $name: exit $rc, expected $want"
    sed 's/^/    | /' "$tmp/out"
    fail=$((fail + 1))
    return
  fi
  if rsvg-convert -o "$tmp/$name.png" "$tmp/$name.svg" 2>"$tmp/err" &&
    [ "$(png_width "$tmp/$name.png")" -eq 1200 ] &&
    grep -q '<rect class="rc" x="[0-9.]*" y="-1" ' "$tmp/$name.svg" &&
    grep -q '<text class="rl" [^>]*>race 1</text>' "$tmp/$name.svg" &&
    grep -q '\.k5{fill:' "$tmp/$name.svg" && grep -q '\.k6{fill:' "$tmp/$name.svg" &&
    grep -q '>collective waiting for its peers<' "$tmp/$name.svg" &&
    grep -q '<rect class="k6" ' "$tmp/$name.svg"; then
    echo "PASS: $name renders, its race marked"
    pass=$((pass + 1))
  else
    echo "FAIL: $name: rsvg-convert, or no race marked"
    sed 's/^/    | /' "$tmp/err"
    fail=$((fail + 1))
  fi
}
bad=${srcdir:-.}/schedules/bad
render_racy race-run 1 --trials=1 -n 1 -w 0 "$bad/missing_wait_compute.sched"
render_racy race-replay 4 --replay "$bad/missing_wait_compute.sched"
grep -q '>async race 1</text>' "$tmp/race-replay.svg" &&
  grep -q '<rect class="pw" ' "$tmp/race-run.svg" &&
  { echo "PASS: the replay's panel is its race; a collective waits for its peers"; pass=$((pass + 1)); } ||
  { echo "FAIL: the replay's panel is its race; a collective waits for its peers"; fail=$((fail + 1)); }
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
