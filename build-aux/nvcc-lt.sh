#!/bin/sh
# Run nvcc as if it were the C compiler libtool was configured for.
#
#   libtool --tag=CC --mode=compile sh nvcc-lt.sh NVCC [ARGS...] -c FILE.cu -o FILE.lo
#
# libtool compiles a libtool object by calling its "compiler" once with the
# PIC flags of the C compiler (-fPIC -DPIC, -o DIR/.libs/FILE.o) and, when
# static libraries are built, once more without them. Those flags, and any
# other gcc-only flag that reaches us, are rewritten for nvcc here: host
# compiler flags go behind -Xcompiler, flags that make no sense for CUDA C++
# (a C language standard) are dropped. -c, -o, -D, -I, -U and nvcc's own
# options pass unchanged.
#
# Note that libtool itself eats a bare `-Xcompiler` and `-Wc,...` from its
# own command line: write nvcc host flags as `-Xcompiler=FLAGS` or
# `--compiler-options=FLAGS` in NVCCFLAGS.
set -eu

if [ $# -lt 1 ]; then
  echo "usage: $0 NVCC [ARGS...]" >&2
  exit 2
fi
nvcc=$1
shift

# Rebuild "$@" in place: each original argument is shifted off the front and
# its rewrite appended at the back.
verbatim=no
for arg do
  shift
  if [ "$verbatim" = yes ]; then
    # The value of the option before it: never rewrite.
    set -- "$@" "$arg"
    verbatim=no
    continue
  fi
  case $arg in
    # Options (gcc's and nvcc's) whose value is the next argument.
    -o|-x|-I|-D|-U|-L|-l|-isystem|-include|-MF|-MT|-MQ|-ccbin|-odir|\
    -arch|-code|-gencode|-Werror|-Xcompiler|-Xlinker|-Xptxas|-Xnvlink|\
    -Xfatbin|-Xarchive|-maxrregcount|\
    --compiler-options|--linker-options|--ptxas-options|--nvlink-options|\
    --compiler-bindir|--output-file|--gpu-architecture|--gpu-code|\
    --generate-code|--include-path|--define-macro|--undefine-macro|\
    --system-include|--pre-include|--dependency-output|\
    --dependency-target-name|--std|--x|--Werror)
      set -- "$@" "$arg"
      verbatim=yes ;;
    # nvcc's own options that look like gcc's.
    -ftz=*|-fmad=*|-forward-*|-fdevice-*|-m64|-maxrregcount=*|\
    -Werror=*|-Wno-deprecated-gpu-targets|-Wno-deprecated-declarations|\
    -Wreorder|-Wdefault-stream-launch|-Wmissing-launch-bounds|\
    -Wext-lambda-captures-this|-std=c++*|-O[0-3]|-gencode=*)
      set -- "$@" "$arg" ;;
    # A C standard (from CFLAGS) does not apply to CUDA C++.
    -std=*|-ansi)
      ;;
    # gcc debug levels: nvcc knows plain -g; give the host compiler the rest.
    -g[0-9]|-ggdb*|-gdwarf*)
      set -- "$@" -g "-Xcompiler=$arg" ;;
    # Host compiler only: -fPIC from libtool, -pthread, warnings, -m*, -O*.
    -f*|-pthread|-W*|-m*|-O*|-pipe)
      set -- "$@" "-Xcompiler=$arg" ;;
    *)
      set -- "$@" "$arg" ;;
  esac
done

exec "$nvcc" "$@"
