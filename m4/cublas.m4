# OVL_CHECK_CUBLAS
# ----------------
# Look for cuBLAS (cublas_v2.h, -lcublas), which the CUDA backend's
# matmul_v2 runs on. Call after OVL_CHECK_CUDA: cuBLAS ships with the CUDA
# toolkit, and by default it is looked for where CUDA was found.
#
#   --with-cublas=DIR   only DIR (DIR/include, DIR/lib64 or DIR/lib)
#   --with-cublas       the CUDA directory, then the system
#   (nothing)           the same, as a guess
#   --without-cublas    do not look (and so build no CUDA backend)
#
# An explicit request that fails stops configure; a failed guess is quiet
# here (configure.ac reports what the CUDA backend lacks). The results go
# into CUBLAS_CPPFLAGS, CUBLAS_LDFLAGS (with an rpath) and CUBLAS_LIBS,
# which are empty unless cuBLAS was found; CPPFLAGS, LDFLAGS and LIBS are
# left alone. The library is not linked: the backend loads it
# (OVL_CUBLAS_SONAME, OVL_CUBLAS_LIBDIR: src/backend/cuda_blas.c), and
# CUBLAS_LIBS is what the link test used.
#
# Shell results: cublas_happy (yes/no), cublas_why, cublas_dir (DIR or
# "system"), cublas_version.
AC_DEFUN([OVL_CHECK_CUBLAS], [
AC_REQUIRE([OVL_CHECK_CUDA])
AC_ARG_WITH([cublas],
  [AS_HELP_STRING([--with-cublas@<:@=DIR@:>@],
    [cuBLAS for the CUDA backend's matmul_v2, in DIR (default: look in the
     CUDA directory, then in the system)])],
  [], [with_cublas=guess])

cublas_happy=no
cublas_why=
cublas_dir=
cublas_version=
CUBLAS_CPPFLAGS=
CUBLAS_LDFLAGS=
CUBLAS_LIBS=

ovl_cublas_candidates=
AS_IF([test "x$with_cublas" = xno],
        [cublas_why="disabled by --without-cublas"],
      [test "x$cuda_happy" != xyes],
        [cublas_why="needs CUDA ($cuda_why)"],
      [test "x$with_cublas" = xyes || test "x$with_cublas" = xguess],
        [AS_IF([test "x$cuda_dir" = xsystem],
               [ovl_cublas_candidates=system],
               [ovl_cublas_candidates="$cuda_dir system"])],
      [ovl_cublas_candidates=$with_cublas])

ovl_cublas_save_CPPFLAGS=$CPPFLAGS
ovl_cublas_save_LDFLAGS=$LDFLAGS
ovl_cublas_save_LIBS=$LIBS
for ovl_cublas_try in $ovl_cublas_candidates; do
  AS_IF([test "x$ovl_cublas_try" = xsystem],
    [ovl_cublas_cppflags=
     ovl_cublas_ldflags=
     ovl_cublas_where="the system paths"],
    [AS_IF([test -d "$ovl_cublas_try/lib64"],
       [ovl_cublas_libdir=$ovl_cublas_try/lib64],
       [ovl_cublas_libdir=$ovl_cublas_try/lib])
     ovl_cublas_cppflags="-I$ovl_cublas_try/include"
     ovl_cublas_ldflags="-L$ovl_cublas_libdir -Wl,-rpath,$ovl_cublas_libdir"
     ovl_cublas_where=$ovl_cublas_try])
  AC_MSG_CHECKING([for cuBLAS in $ovl_cublas_where])
  AS_IF([test "x$ovl_cublas_try" != xsystem && test ! -d "$ovl_cublas_try"],
    [cublas_why="$ovl_cublas_try: no such directory"
     AC_MSG_RESULT([no ($cublas_why)])
     continue])
  CPPFLAGS="$ovl_cublas_save_CPPFLAGS $CUDA_CPPFLAGS $ovl_cublas_cppflags"
  LDFLAGS="$ovl_cublas_save_LDFLAGS $CUDA_LDFLAGS $ovl_cublas_ldflags"
  LIBS="-lcublas $CUDA_LIBS $ovl_cublas_save_LIBS"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cublas_v2.h>]],
                                     [[cublasHandle_t h = 0; (void)h;
                                       (void)CUBLAS_COMPUTE_32F_FAST_TF32;]])],
    [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cublas_v2.h>]],
                                     [[cublasHandle_t h;
                                       return (int)cublasCreate(&h);]])],
       [cublas_happy=yes],
       [cublas_why="cannot link -lcublas (cublasCreate) from $ovl_cublas_where"])],
    [cublas_why="no usable cublas_v2.h (CUDA 11 or later) in $ovl_cublas_where"])
  AS_IF([test "x$cublas_happy" = xyes],
    [AC_COMPUTE_INT([ovl_cublas_major], [CUBLAS_VER_MAJOR],
                    [[#include <cublas_v2.h>]], [ovl_cublas_major=])
     AC_COMPUTE_INT([ovl_cublas_minor], [CUBLAS_VER_MINOR],
                    [[#include <cublas_v2.h>]], [ovl_cublas_minor=])
     AC_COMPUTE_INT([ovl_cublas_patch], [CUBLAS_VER_PATCH],
                    [[#include <cublas_v2.h>]], [ovl_cublas_patch=])
     cublas_version=$ovl_cublas_major.$ovl_cublas_minor.$ovl_cublas_patch
     AC_MSG_RESULT([yes ($cublas_version)])
     cublas_dir=$ovl_cublas_try
     # In the CUDA directory, CUDA's flags already cover cuBLAS.
     AS_IF([test "x$cublas_dir" != "x$cuda_dir"],
       [CUBLAS_CPPFLAGS=$ovl_cublas_cppflags
        CUBLAS_LDFLAGS=$ovl_cublas_ldflags])
     CUBLAS_LIBS=-lcublas
     # The backend loads cuBLAS when it makes its first rank (dlopen, in
     # src/backend/cuda_blas.c), by this name, first in this directory.
     AC_DEFINE_UNQUOTED([OVL_CUBLAS_SONAME], ["libcublas.so.$ovl_cublas_major"],
       [the cuBLAS library the cuda backend loads])
     AS_IF([test "x$ovl_cublas_try" != xsystem],
       [AC_DEFINE_UNQUOTED([OVL_CUBLAS_LIBDIR], ["$ovl_cublas_libdir"],
          [where configure found cuBLAS])])
     break],
    [AC_MSG_RESULT([no ($cublas_why)])])
done
CPPFLAGS=$ovl_cublas_save_CPPFLAGS
LDFLAGS=$ovl_cublas_save_LDFLAGS
LIBS=$ovl_cublas_save_LIBS

AS_IF([test "x$cublas_happy" != xyes],
  [AS_CASE([$with_cublas],
     [no|guess], [],
                 [AC_MSG_ERROR([cuBLAS requested (--with-cublas=$with_cublas) but not usable: $cublas_why])])])

AC_SUBST([CUBLAS_CPPFLAGS])
AC_SUBST([CUBLAS_LDFLAGS])
AC_SUBST([CUBLAS_LIBS])
])
