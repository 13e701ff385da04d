#!/bin/sh
# The public headers, each on its own: include/ovl.h and every part of the
# API under include/ovl/ compiles as the only include of a C11 file
# (-Wall -Wextra -pedantic, warnings as errors), so that a program may
# include one part alone; and no header is longer than 800 lines (issue
# 22: a longer file is split along what its code does).
#
# Run by `make check` with CC, srcdir and OVL_BUILDDIR in the environment
# (the build tree's include/ holds the headers configure makes).
set -u

src=${srcdir:-.}
build=${OVL_BUILDDIR:-.}
: "${CC:=cc}"
max_lines=800
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-headers.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/out" | head -30
}

command -v "${CC%% *}" >/dev/null 2>&1 || {
  echo "SKIP: headers.sh: no C compiler ('$CC')"; exit 77; }

# The headers of the source tree, and those configure made in the build
# tree where it is another (a VPATH build).
headers="$src/include/ovl.h $src/include/ovl/*.h"
if [ "$(cd "$build" && pwd -P)" != "$(cd "$src" && pwd -P)" ]; then
  headers="$headers $build/include/ovl/*.h"
fi
n=0
# shellcheck disable=SC2086 # the patterns, expanded on purpose
for h in $headers; do
  [ -f "$h" ] || continue
  case $h in
    */include/ovl.h) name=ovl.h ;;
    *) name=ovl/${h##*/} ;;
  esac
  n=$((n + 1))
  printf '#include "%s"\nint ovl_headers_test_unused;\n' "$name" >"$tmp/one.c"
  # shellcheck disable=SC2086 # CC may carry flags (CC='gcc -m32')
  if $CC -std=c11 -Wall -Wextra -pedantic -Werror -fsyntax-only \
    -I"$src/include" -I"$build/include" "$tmp/one.c" >"$tmp/out" 2>&1
  then ok "$name compiles alone"; else ko "$name compiles alone"; fi
  lines=$(wc -l <"$h")
  echo "$h: $lines lines" >"$tmp/out"
  if [ "$lines" -le "$max_lines" ]; then ok "$name: $lines lines (at most $max_lines)"
  else ko "$name: $lines lines (at most $max_lines)"; fi
done
: >"$tmp/out"
if [ "$n" -ge 2 ]; then ok "$n public headers found"
else ko "$n public headers found under $src/include"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
