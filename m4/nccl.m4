# OVL_CHECK_NCCL
# --------------
# Look for NCCL (nccl.h, -lnccl). Call after OVL_CHECK_CUDA: NCCL needs the
# CUDA runtime, and by default it is looked for where CUDA was found.
#
#   --with-nccl=DIR   only DIR (DIR/include, DIR/lib64 or DIR/lib)
#   --with-nccl       the CUDA directory, then the system
#   (nothing)         the same, as a guess
#   --without-nccl    do not look (and so build no CUDA backend)
#
# An explicit request that fails stops configure; a failed guess is quiet
# here (configure.ac reports what the CUDA backend lacks). The results go
# into NCCL_CPPFLAGS, NCCL_LDFLAGS (with an rpath) and NCCL_LIBS, which are
# empty unless NCCL was found; CPPFLAGS, LDFLAGS and LIBS are left alone.
#
# Shell results: nccl_happy (yes/no), nccl_why, nccl_dir (DIR or "system"),
# nccl_version.
AC_DEFUN([OVL_CHECK_NCCL], [
AC_REQUIRE([OVL_CHECK_CUDA])
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
    [NCCL for the CUDA backend, in DIR (default: look in the CUDA directory,
     then in the system)])],
  [], [with_nccl=guess])

nccl_happy=no
nccl_why=
nccl_dir=
nccl_version=
NCCL_CPPFLAGS=
NCCL_LDFLAGS=
NCCL_LIBS=

ovl_nccl_candidates=
AS_IF([test "x$with_nccl" = xno],
        [nccl_why="disabled by --without-nccl"],
      [test "x$cuda_happy" != xyes],
        [nccl_why="needs CUDA ($cuda_why)"],
      [test "x$with_nccl" = xyes || test "x$with_nccl" = xguess],
        [AS_IF([test "x$cuda_dir" = xsystem],
               [ovl_nccl_candidates=system],
               [ovl_nccl_candidates="$cuda_dir system"])],
      [ovl_nccl_candidates=$with_nccl])

ovl_nccl_save_CPPFLAGS=$CPPFLAGS
ovl_nccl_save_LDFLAGS=$LDFLAGS
ovl_nccl_save_LIBS=$LIBS
for ovl_nccl_try in $ovl_nccl_candidates; do
  AS_IF([test "x$ovl_nccl_try" = xsystem],
    [ovl_nccl_cppflags=
     ovl_nccl_ldflags=
     ovl_nccl_where="the system paths"],
    [AS_IF([test -d "$ovl_nccl_try/lib64"],
       [ovl_nccl_libdir=$ovl_nccl_try/lib64],
       [ovl_nccl_libdir=$ovl_nccl_try/lib])
     ovl_nccl_cppflags="-I$ovl_nccl_try/include"
     ovl_nccl_ldflags="-L$ovl_nccl_libdir -Wl,-rpath,$ovl_nccl_libdir"
     ovl_nccl_where=$ovl_nccl_try])
  AC_MSG_CHECKING([for NCCL in $ovl_nccl_where])
  AS_IF([test "x$ovl_nccl_try" != xsystem && test ! -d "$ovl_nccl_try"],
    [nccl_why="$ovl_nccl_try: no such directory"
     AC_MSG_RESULT([no ($nccl_why)])
     continue])
  CPPFLAGS="$ovl_nccl_save_CPPFLAGS $CUDA_CPPFLAGS $ovl_nccl_cppflags"
  LDFLAGS="$ovl_nccl_save_LDFLAGS $CUDA_LDFLAGS $ovl_nccl_ldflags"
  LIBS="-lnccl $CUDA_LIBS $ovl_nccl_save_LIBS"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
                                     [[ncclComm_t c = 0; (void)c;]])],
    [AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
                                     [[ncclComm_t c; int dev = 0;
                                       return (int)ncclCommInitAll(&c, 1, &dev);]])],
       [nccl_happy=yes],
       [nccl_why="cannot link -lnccl (ncclCommInitAll) from $ovl_nccl_where"])],
    [nccl_why="no usable nccl.h in $ovl_nccl_where"])
  AS_IF([test "x$nccl_happy" = xyes],
    [AC_COMPUTE_INT([ovl_nccl_major], [NCCL_MAJOR], [[#include <nccl.h>]],
                    [ovl_nccl_major=])
     AC_COMPUTE_INT([ovl_nccl_minor], [NCCL_MINOR], [[#include <nccl.h>]],
                    [ovl_nccl_minor=])
     AC_COMPUTE_INT([ovl_nccl_patch], [NCCL_PATCH], [[#include <nccl.h>]],
                    [ovl_nccl_patch=])
     nccl_version=$ovl_nccl_major.$ovl_nccl_minor.$ovl_nccl_patch
     AC_MSG_RESULT([yes ($nccl_version)])
     nccl_dir=$ovl_nccl_try
     # In the CUDA directory, CUDA's flags already cover NCCL.
     AS_IF([test "x$nccl_dir" != "x$cuda_dir"],
       [NCCL_CPPFLAGS=$ovl_nccl_cppflags
        NCCL_LDFLAGS=$ovl_nccl_ldflags])
     NCCL_LIBS=-lnccl
     break],
    [AC_MSG_RESULT([no ($nccl_why)])])
done
CPPFLAGS=$ovl_nccl_save_CPPFLAGS
LDFLAGS=$ovl_nccl_save_LDFLAGS
LIBS=$ovl_nccl_save_LIBS

AS_IF([test "x$nccl_happy" != xyes],
  [AS_CASE([$with_nccl],
     [no|guess], [],
                 [AC_MSG_ERROR([NCCL requested (--with-nccl=$with_nccl) but not usable: $nccl_why])])])

AC_SUBST([NCCL_CPPFLAGS])
AC_SUBST([NCCL_LDFLAGS])
AC_SUBST([NCCL_LIBS])
])
