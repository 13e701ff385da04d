# OVL_CHECK_CUDA
# --------------
# Look for the CUDA runtime (cuda_runtime.h, -lcudart) and nvcc.
#
#   --with-cuda=DIR   only DIR (DIR/include, DIR/lib64 or DIR/lib, DIR/bin/nvcc)
#   --with-cuda       /usr/local/cuda, then the system (default include and
#                     library paths, nvcc from PATH)
#   (nothing)         the same, as a guess
#   --without-cuda    do not look
#   --with-nvcc-gencode=FLAGS   the GPU targets nvcc builds for
#
# An explicit request that fails stops configure; a failed guess only warns.
# CPPFLAGS, LDFLAGS and LIBS are left as they were: the results go into
# CUDA_CPPFLAGS, CUDA_LDFLAGS (with an rpath, so programs find libcudart
# where it was found), CUDA_LIBS, NVCC, NVCCFLAGS, NVCC_GENCODE and
# NVCC_LIBS (what objects made by nvcc need when the C compiler links
# them), which are all empty unless CUDA was found.
#
# Shell results for configure.ac: cuda_happy (yes/no), cuda_why (the reason
# when no), cuda_dir (DIR, or "system"), cuda_version (of nvcc).
# Reads enable_debug (--enable-debug) for the default NVCCFLAGS.
AC_DEFUN([OVL_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the CUDA backend with the CUDA toolkit in DIR (default: look in
     /usr/local/cuda, then in the system; a failed guess only warns)])],
  [], [with_cuda=guess])
AC_ARG_WITH([nvcc-gencode],
  [AS_HELP_STRING([--with-nvcc-gencode=FLAGS],
    [GPU targets for nvcc (default:
     -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90)])],
  [], [with_nvcc_gencode=default])
AC_ARG_VAR([NVCC], [CUDA compiler command])
AC_ARG_VAR([NVCCFLAGS], [CUDA compiler flags])

cuda_happy=no
cuda_why=
cuda_dir=
cuda_version=
CUDA_CPPFLAGS=
CUDA_LDFLAGS=
CUDA_LIBS=
NVCC_GENCODE=

AS_CASE([$with_cuda],
  [no],         [cuda_why="disabled by --without-cuda"
                 ovl_cuda_candidates=],
  [yes|guess],  [ovl_cuda_candidates="/usr/local/cuda system"],
                [ovl_cuda_candidates=$with_cuda])

ovl_cuda_save_CPPFLAGS=$CPPFLAGS
ovl_cuda_save_LDFLAGS=$LDFLAGS
ovl_cuda_save_LIBS=$LIBS
for ovl_cuda_try in $ovl_cuda_candidates; do
  AS_IF([test "x$ovl_cuda_try" = xsystem],
    [ovl_cuda_cppflags=
     ovl_cuda_ldflags=
     ovl_cuda_where="the system paths"],
    [AS_IF([test -d "$ovl_cuda_try/lib64"],
       [ovl_cuda_libdir=$ovl_cuda_try/lib64],
       [ovl_cuda_libdir=$ovl_cuda_try/lib])
     ovl_cuda_cppflags="-I$ovl_cuda_try/include"
     ovl_cuda_ldflags="-L$ovl_cuda_libdir -Wl,-rpath,$ovl_cuda_libdir"
     ovl_cuda_where=$ovl_cuda_try])
  AC_MSG_CHECKING([for the CUDA runtime in $ovl_cuda_where])
  AS_IF([test "x$ovl_cuda_try" != xsystem && test ! -d "$ovl_cuda_try"],
    [cuda_why="$ovl_cuda_try: no such directory"
     AC_MSG_RESULT([no ($cuda_why)])
     continue])
  CPPFLAGS="$ovl_cuda_save_CPPFLAGS $ovl_cuda_cppflags"
  LDFLAGS="$ovl_cuda_save_LDFLAGS $ovl_cuda_ldflags"
  LIBS="-lcudart $ovl_cuda_save_LIBS"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>]],
                                     [[cudaStream_t s = 0; (void)s;]])],
    [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>]],
                                     [[int n = 0; return (int)cudaGetDeviceCount(&n);]])],
       [cuda_happy=yes],
       [cuda_why="cannot link -lcudart (cudaGetDeviceCount) from $ovl_cuda_where"])],
    [cuda_why="no usable cuda_runtime.h in $ovl_cuda_where"])
  AS_IF([test "x$cuda_happy" = xyes],
    [AC_MSG_RESULT([yes])
     cuda_dir=$ovl_cuda_try
     CUDA_CPPFLAGS=$ovl_cuda_cppflags
     CUDA_LDFLAGS=$ovl_cuda_ldflags
     CUDA_LIBS=-lcudart
     break],
    [AC_MSG_RESULT([no ($cuda_why)])])
done
CPPFLAGS=$ovl_cuda_save_CPPFLAGS
LDFLAGS=$ovl_cuda_save_LDFLAGS
LIBS=$ovl_cuda_save_LIBS

# nvcc: $NVCC if the user set it, else the one of the toolkit we found
# (DIR/bin/nvcc), else, for a system toolkit, nvcc from PATH.
AS_IF([test "x$cuda_happy" = xyes],
  [AC_MSG_CHECKING([for nvcc])
   AS_IF([test -n "$NVCC"], [],
         [test "x$cuda_dir" != xsystem],
           [AS_IF([test -x "$cuda_dir/bin/nvcc"], [NVCC=$cuda_dir/bin/nvcc])],
         [NVCC=`command -v nvcc 2>/dev/null` || NVCC=])
   AS_IF([test -n "$NVCC"],
     [cuda_version=`$NVCC --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\),.*/\1/p'`
      AS_IF([test -n "$cuda_version"],
        [AC_MSG_RESULT([$NVCC (CUDA $cuda_version)])],
        [cuda_happy=no
         cuda_why="$NVCC does not run (nvcc --version)"
         AC_MSG_RESULT([no ($cuda_why)])])],
     [cuda_happy=no
      AS_IF([test "x$cuda_dir" = xsystem],
        [cuda_why="nvcc not found in PATH (set NVCC=...)"],
        [cuda_why="nvcc not found in $cuda_dir/bin (set NVCC=...)"])
      AC_MSG_RESULT([no ($cuda_why)])])])

# The nvcc flags: user NVCCFLAGS (default like CFLAGS), and the targets.
AS_IF([test "x${NVCCFLAGS+set}" != xset],
  [AS_IF([test "x$enable_debug" = xyes],
     [NVCCFLAGS="-O0 -g -lineinfo"],
     [NVCCFLAGS="-O2 -g -lineinfo"])])
AS_IF([test "x$with_nvcc_gencode" = xdefault || test "x$with_nvcc_gencode" = xyes],
  [ovl_nvcc_gencode="-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"],
  [ovl_nvcc_gencode=$with_nvcc_gencode])

# Compile a kernel the way the build will and link it with the C compiler,
# to find a broken nvcc, a host compiler it rejects or targets it does not
# know now rather than in make. Objects from nvcc are C++: linked by the C
# compiler, they need the C++ runtime (NVCC_LIBS).
NVCC_LIBS=-lstdc++
AS_IF([test "x$cuda_happy" = xyes],
  [AC_MSG_CHECKING([whether nvcc builds for $ovl_nvcc_gencode])
   cat >conftest.cu <<_OVL_EOF
extern "C" __global__ void ovl_conftest_kernel(float *x) { x[[threadIdx.x]] *= 2.0f; }
extern "C" int ovl_conftest(float *x)
{
  ovl_conftest_kernel<<<1, 32>>>(x);
  return (int)cudaGetLastError();
}
int main(void) { return ovl_conftest(0) == 0 ? 0 : 1; }
_OVL_EOF
   ovl_nvcc_cmd="$NVCC $ovl_nvcc_gencode $NVCCFLAGS -c conftest.cu -o conftest.$OBJEXT"
   ovl_nvcc_link="$CC $CFLAGS $LDFLAGS $CUDA_LDFLAGS -o conftest$EXEEXT conftest.$OBJEXT $CUDA_LIBS $NVCC_LIBS $LIBS"
   _AS_ECHO_LOG([$ovl_nvcc_cmd])
   AS_IF([$ovl_nvcc_cmd >&AS_MESSAGE_LOG_FD 2>&1 && test -s conftest.$OBJEXT],
     [_AS_ECHO_LOG([$ovl_nvcc_link])
      AS_IF([$ovl_nvcc_link >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes])
         NVCC_GENCODE=$ovl_nvcc_gencode],
        [cuda_happy=no
         cuda_why="$CC cannot link what $NVCC builds, with $CUDA_LIBS $NVCC_LIBS (see config.log)"
         AC_MSG_RESULT([no])])],
     [cuda_happy=no
      cuda_why="$NVCC cannot compile for $ovl_nvcc_gencode (see config.log)"
      AC_MSG_RESULT([no])])
   rm -f conftest.cu conftest.$OBJEXT conftest$EXEEXT])

AS_IF([test "x$cuda_happy" != xyes],
  [CUDA_CPPFLAGS=
   CUDA_LDFLAGS=
   CUDA_LIBS=
   NVCC_LIBS=
   AS_CASE([$with_cuda],
     [no],    [],
     [guess], [AC_MSG_WARN([CUDA not found: $cuda_why; building without the CUDA backend])],
              [AC_MSG_ERROR([CUDA requested (--with-cuda=$with_cuda) but not usable: $cuda_why])])])

AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([NVCC])
AC_SUBST([NVCCFLAGS])
AC_SUBST([NVCC_GENCODE])
AC_SUBST([NVCC_LIBS])
])
