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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
