#!/bin/sh
# make rebuilds a CUDA object when a header its .cu file includes changes.
# nvcc writes the dependencies of each object it compiles
# (-MD -MP -MF DIR/$(DEPDIR)/NAME.Plo, included by the Makefile), as
# automake does for C: a header list kept by hand missed core/elemfn.h,
# so that a new elementwise op left the kernels stale and a GPU run
# silently launched another op's kernel.
#
# For every .cu file of the tree (src/: the library's libtool object
# NAME.lo; tools/: a program's NAME.o), the project headers it includes,
# directly or through another header (#include "...", found as the
# compiler finds them: the including file's directory, include/, src/),
# must each make make rebuild its object: `make -q -W HEADER OBJECT` (as
# if the header had just changed; nothing is run or touched) says the
# object is out of date, where `make -q OBJECT` says it is up to date. A
# header no kernel includes (tests/check_util.h) must not.
#
# Run by `make check` with MAKE, OVL_CUDA (yes: this build compiles the
# CUDA files), OVL_BUILDDIR, srcdir (absolute) and OVL_TOP_SRCDIR (the
# source tree as the Makefile names it, maybe relative) in the
# environment. Exit 77 (skipped) without CUDA.
set -u

src=${srcdir:-.}
build=${OVL_BUILDDIR:-.}
top_srcdir=${OVL_TOP_SRCDIR:-$src}
make=${MAKE:-make}
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ovl-cuda-deps.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() {
  fail=$((fail + 1)); echo "FAIL: $1"
  sed 's/^/    | /' "$tmp/why" | head -30
}

case ${OVL_CUDA:-} in
  yes) ;;
  no) echo "SKIP: cuda_deps.sh: this build has no CUDA backend (nothing compiled by nvcc)"; exit 77 ;;
  *) echo "cuda_deps.sh: OVL_CUDA is not set (run it from make check)"; exit 99 ;;
esac
cd "$build" || exit 99
# Our own make, not a sub-make of the `make check` that runs us.
unset MAKEFLAGS MFLAGS

# includes FILE: the project headers FILE includes, directly or not, one
# a line, as paths under the source tree (src/core/elemfn.h).
includes() {
  : >"$tmp/seen"
  echo "$1" >"$tmp/queue"
  while [ -s "$tmp/queue" ]; do
    f=$(head -n 1 "$tmp/queue")
    sed -i 1d "$tmp/queue"
    dir=${f%/*}
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
      "$src/$f" | while IFS= read -r inc; do
      for cand in "$dir/$inc" "include/$inc" "src/$inc"; do
        if [ -f "$src/$cand" ]; then
          grep -qxF "$cand" "$tmp/seen" ||
            { echo "$cand" >>"$tmp/seen"; echo "$cand" >>"$tmp/queue"; }
          break
        fi
      done
    done
  done
  cat "$tmp/seen"
}

# rebuilds HEADER OBJECT: whether make, told HEADER has changed, would
# remake OBJECT; the header is tried as the Makefile may spell it (the
# dependency files name it as the compiler found it).
rebuilds() {
  for name in "$top_srcdir/$1" "$src/$1" "$1"; do
    $make --no-print-directory -q -W "$name" "$2" >/dev/null 2>&1
    [ $? -eq 1 ] && return 0
  done
  return 1
}

ncu=0
for cu in $(cd "$src" && find src tools -name '*.cu' | sort); do
  ncu=$((ncu + 1))
  case $cu in
    src/*) obj=${cu%.cu}.lo ;;
    *) obj=${cu%.cu}.o ;;
  esac
  : >"$tmp/why"
  $make --no-print-directory -q "$obj" >"$tmp/why" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "make -q $obj: exit $rc (0: up to date; 1: out of date after make; 2: no rule)" >>"$tmp/why"
    ko "$obj is built and up to date"
    continue
  fi
  ok "$obj is built and up to date"
  headers=$(includes "$cu")
  if [ -z "$headers" ]; then
    echo "found no #include \"...\" in $cu" >"$tmp/why"
    ko "$cu includes project headers"
    continue
  fi
  for h in $headers; do
    : >"$tmp/why"
    if rebuilds "$h" "$obj"; then ok "$obj is rebuilt when $h changes"
    else
      echo "make -q -W $top_srcdir/$h $obj: up to date (the Makefile does not know $obj depends on $h)" >"$tmp/why"
      ko "$obj is rebuilt when $h changes"
    fi
  done
  : >"$tmp/why"
  if rebuilds tests/check_util.h "$obj"; then
    echo "make would rebuild $obj for a header it does not include: -W does not tell" >"$tmp/why"
    ko "$obj is not rebuilt when tests/check_util.h changes"
  else ok "$obj is not rebuilt when tests/check_util.h changes"; fi
done
: >"$tmp/why"
if [ "$ncu" -ge 1 ]; then ok "$ncu .cu files checked"
else echo "no .cu file under $src/src or $src/tools" >"$tmp/why"; ko ".cu files found"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
