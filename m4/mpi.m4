# OVL_CHECK_MPI
# -------------
# MPI, for running the tools as many processes (mpirun -np P; DESIGN 3.1).
# Off unless asked for:
#
#   --with-mpi=DIR   the MPI in DIR: DIR/bin/mpicc (or Debian's names for
#                    it, mpicc.openmpi, mpicc.mpich: a package unpacked
#                    with dpkg -x has no mpicc), else the pkg-config
#                    modules of DIR/lib*/pkgconfig
#   --with-mpi       mpicc from PATH, else the pkg-config modules
#   (nothing), --without-mpi   no MPI: nothing of it reaches the build
#
# The flags come from the compiler wrapper, which is never used as the
# compiler: Open MPI's `mpicc --showme:compile` and `--showme:link`, else
# MPICH's `mpicc -show` (its compiler dropped; -I/-D/-U are CPPFLAGS, -l
# LIBS, the rest LDFLAGS); without a wrapper whose flags can be read, the
# pkg-config modules ompi-c, ompi, mpich (the first that exists). MPICC
# names another wrapper. Then mpi.h must compile and MPI_Init_thread link
# with those flags. The launcher for tests/mpi.sh goes into MPIEXEC (unless
# set): mpirun, then mpiexec (then Debian's mpirun.openmpi,
# mpiexec.openmpi, mpiexec.mpich) next to the wrapper first (DIR/bin with
# DIR), then mpirun, mpiexec in PATH; none only warns (tests/mpi.sh then
# skips). An Open MPI moved from where it was built (unpacked elsewhere)
# needs OPAL_PREFIX set, for the wrapper too.
#
# --with-mpi given and MPI not usable stops configure with what failed.
# CPPFLAGS, LDFLAGS and LIBS are left as they were: the results go into
# MPI_CPPFLAGS, MPI_LDFLAGS and MPI_LIBS, empty without MPI; HAVE_MPI is
# defined (AC_DEFINE) and the HAVE_MPI conditional set with it.
#
# Shell results for configure.ac: mpi_happy (yes/no), mpi_why (the reason
# when no), mpi_from (where the flags came from: the wrapper's path or
# "pkg-config MODULE"), mpi_version (e.g. "Open MPI 4.1.4, MPI 3.1").
AC_DEFUN([OVL_CHECK_MPI], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@],
    [run the tools as many processes under mpirun, with the MPI in DIR
     (DIR/bin/mpicc; default: no MPI; --with-mpi: mpicc from PATH, else the
     pkg-config modules ompi-c, ompi, mpich)])],
  [], [with_mpi=no])
AC_ARG_VAR([MPICC], [MPI compiler wrapper whose flags --with-mpi takes
  (default: DIR/bin/mpicc, or mpicc from PATH); never used to compile])
AC_ARG_VAR([MPIEXEC], [MPI launcher that tests/mpi.sh runs the tools with
  (default: mpirun, then mpiexec, next to mpicc first, then in PATH)])

mpi_happy=no
mpi_why=
mpi_from=
mpi_version=
MPI_CPPFLAGS=
MPI_LDFLAGS=
MPI_LIBS=

AS_CASE([$with_mpi],
  [no],  [mpi_why="not asked for (--with-mpi)"],
  [yes], [ovl_mpi_dir=
          ovl_mpi_asked=--with-mpi],
         [ovl_mpi_dir=$with_mpi
          ovl_mpi_asked=--with-mpi=$with_mpi
          AS_IF([test ! -d "$ovl_mpi_dir"],
            [AC_MSG_ERROR([MPI requested ($ovl_mpi_asked) but $ovl_mpi_dir: no such directory])])])

AS_IF([test "x$with_mpi" != xno], [
  # The wrapper: $MPICC, else DIR/bin/mpicc, else mpicc from PATH.
  AC_MSG_CHECKING([for the MPI compiler wrapper])
  ovl_mpicc=
  AS_IF([test -n "$MPICC"],
          [ovl_mpicc=`command -v "$MPICC" 2>/dev/null` || ovl_mpicc=
           AS_IF([test -z "$ovl_mpicc"],
             [AC_MSG_ERROR([MPI requested ($ovl_mpi_asked) but MPICC=$MPICC is not a program])])],
        [test -n "$ovl_mpi_dir"],
          [for ovl_mpi_w in mpicc mpicc.openmpi mpicc.mpich; do
             AS_IF([test -x "$ovl_mpi_dir/bin/$ovl_mpi_w"],
               [ovl_mpicc=$ovl_mpi_dir/bin/$ovl_mpi_w
                break])
           done],
        [ovl_mpicc=`command -v mpicc 2>/dev/null` || ovl_mpicc=])
  AC_MSG_RESULT([${ovl_mpicc:-none}])

  # Its flags: Open MPI's --showme, else MPICH's -show.
  ovl_mpi_got=no
  AS_IF([test -n "$ovl_mpicc"], [
    AC_MSG_CHECKING([for the flags of $ovl_mpicc])
    AS_IF([ovl_mpi_c=`"$ovl_mpicc" --showme:compile 2>/dev/null` &&
           ovl_mpi_l=`"$ovl_mpicc" --showme:link 2>/dev/null` &&
           test -n "$ovl_mpi_l"],
      [ovl_mpi_got="--showme"
       ovl_mpi_words="$ovl_mpi_c $ovl_mpi_l"],
      [ovl_mpi_l=`"$ovl_mpicc" -show 2>/dev/null` && test -n "$ovl_mpi_l"],
      [ovl_mpi_got="-show"
       # Its first word is the compiler.
       ovl_mpi_words=`echo "$ovl_mpi_l" | sed 's/^ *[[^ ]]*//'`])
    AS_IF([test "x$ovl_mpi_got" != xno],
      [for ovl_mpi_w in $ovl_mpi_words; do
         AS_CASE([$ovl_mpi_w],
           [-I*|-D*|-U*], [MPI_CPPFLAGS="$MPI_CPPFLAGS $ovl_mpi_w"],
           [-l*],         [MPI_LIBS="$MPI_LIBS $ovl_mpi_w"],
                          [MPI_LDFLAGS="$MPI_LDFLAGS $ovl_mpi_w"])
       done
       mpi_from=$ovl_mpicc
       AC_MSG_RESULT([yes ($ovl_mpicc $ovl_mpi_got)])],
      [AC_MSG_RESULT([no (neither --showme:link nor -show prints them)])])])

  # Else pkg-config (in DIR's pkgconfig directories first, with DIR).
  AS_IF([test "x$ovl_mpi_got" = xno], [
    # With DIR, only DIR's modules: PKG_CONFIG_LIBDIR replaces the default
    # search path, and PKG_CONFIG_PATH would come before it.
    ovl_mpi_save_PKG_CONFIG_PATH=$PKG_CONFIG_PATH
    ovl_mpi_save_PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR
    ovl_mpi_libdir_set=${PKG_CONFIG_LIBDIR+set}
    AS_IF([test -n "$ovl_mpi_dir"],
      [PKG_CONFIG_LIBDIR="$ovl_mpi_dir/lib/pkgconfig:$ovl_mpi_dir/lib64/pkgconfig:$ovl_mpi_dir/share/pkgconfig"
       PKG_CONFIG_PATH=
       export PKG_CONFIG_LIBDIR PKG_CONFIG_PATH])
    AS_IF([test -n "$PKG_CONFIG"],
      [for ovl_mpi_mod in ompi-c ompi mpich; do
         AC_MSG_CHECKING([for the pkg-config module $ovl_mpi_mod])
         AS_IF([$PKG_CONFIG --exists "$ovl_mpi_mod" 2>/dev/null],
           [MPI_CPPFLAGS=`$PKG_CONFIG --cflags "$ovl_mpi_mod"`
            MPI_LDFLAGS=`$PKG_CONFIG --libs-only-L --libs-only-other "$ovl_mpi_mod"`
            MPI_LIBS=`$PKG_CONFIG --libs-only-l "$ovl_mpi_mod"`
            ovl_mpi_got=pkg-config
            mpi_from="pkg-config $ovl_mpi_mod"
            AC_MSG_RESULT([yes])
            break],
           [AC_MSG_RESULT([no])])
       done])
    PKG_CONFIG_PATH=$ovl_mpi_save_PKG_CONFIG_PATH
    AS_IF([test "x$ovl_mpi_libdir_set" = xset],
      [PKG_CONFIG_LIBDIR=$ovl_mpi_save_PKG_CONFIG_LIBDIR],
      [AS_UNSET([PKG_CONFIG_LIBDIR])])
    AS_IF([test "x$ovl_mpi_got" = xno],
      [AS_IF([test -n "$ovl_mpicc"],
         [mpi_why="$ovl_mpicc prints no flags (neither --showme:link nor -show), and no pkg-config module ompi-c, ompi or mpich"],
         [test -n "$ovl_mpi_dir"],
         [mpi_why="no $ovl_mpi_dir/bin/mpicc (nor mpicc.openmpi, mpicc.mpich), and no pkg-config module ompi-c, ompi or mpich in $ovl_mpi_dir/{lib,lib64,share}/pkgconfig"],
         [mpi_why="no mpicc in PATH, and no pkg-config module ompi-c, ompi or mpich (Debian: apt-get install libopenmpi-dev openmpi-bin)"])])])
  MPI_CPPFLAGS=`echo $MPI_CPPFLAGS`
  MPI_LDFLAGS=`echo $MPI_LDFLAGS`
  MPI_LIBS=`echo $MPI_LIBS`

  # mpi.h compiles and MPI_Init_thread links, with those flags only.
  AS_IF([test "x$ovl_mpi_got" != xno], [
    ovl_mpi_save_CPPFLAGS=$CPPFLAGS
    ovl_mpi_save_LDFLAGS=$LDFLAGS
    ovl_mpi_save_LIBS=$LIBS
    CPPFLAGS="$ovl_mpi_save_CPPFLAGS $MPI_CPPFLAGS"
    LDFLAGS="$ovl_mpi_save_LDFLAGS $MPI_LDFLAGS"
    LIBS="$MPI_LIBS $ovl_mpi_save_LIBS"
    AC_MSG_CHECKING([whether mpi.h compiles])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                       [[MPI_Comm c = MPI_COMM_WORLD; (void)c;
                                         return MPI_THREAD_MULTIPLE;]])],
      [AC_MSG_RESULT([yes])
       AC_MSG_CHECKING([whether MPI_Init_thread links])
       AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                       [[int provided = 0;
                                         return MPI_Init_thread(0, 0, MPI_THREAD_MULTIPLE, &provided);]])],
         [mpi_happy=yes
          AC_MSG_RESULT([yes])],
         [mpi_why="cannot link MPI_Init_thread with '`echo $MPI_LDFLAGS $MPI_LIBS`' (from $mpi_from; see config.log)"
          AC_MSG_RESULT([no])])],
      [mpi_why="no usable mpi.h with '$MPI_CPPFLAGS' (from $mpi_from; see config.log)"
       AC_MSG_RESULT([no])])
    # Which MPI, for the summary.
    AS_IF([test "x$mpi_happy" = xyes], [
      AC_COMPUTE_INT([ovl_mpi_std], [MPI_VERSION], [[#include <mpi.h>]], [ovl_mpi_std=])
      AC_COMPUTE_INT([ovl_mpi_sub], [MPI_SUBVERSION], [[#include <mpi.h>]], [ovl_mpi_sub=])
      AC_COMPUTE_INT([ovl_mpi_ompi_major], [OMPI_MAJOR_VERSION], [[#include <mpi.h>]], [ovl_mpi_ompi_major=])
      AS_IF([test -n "$ovl_mpi_ompi_major"],
        [AC_COMPUTE_INT([ovl_mpi_ompi_minor], [OMPI_MINOR_VERSION], [[#include <mpi.h>]], [ovl_mpi_ompi_minor=])
         AC_COMPUTE_INT([ovl_mpi_ompi_release], [OMPI_RELEASE_VERSION], [[#include <mpi.h>]], [ovl_mpi_ompi_release=])
         mpi_version="Open MPI $ovl_mpi_ompi_major.$ovl_mpi_ompi_minor.$ovl_mpi_ompi_release, "],
        [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not MPICH
#endif]], [])], [mpi_version="MPICH, "])])
      mpi_version="${mpi_version}MPI $ovl_mpi_std.$ovl_mpi_sub"
      AC_MSG_CHECKING([which MPI])
      AC_MSG_RESULT([$mpi_version])])
    CPPFLAGS=$ovl_mpi_save_CPPFLAGS
    LDFLAGS=$ovl_mpi_save_LDFLAGS
    LIBS=$ovl_mpi_save_LIBS])

  AS_IF([test "x$mpi_happy" != xyes],
    [AC_MSG_ERROR([MPI requested ($ovl_mpi_asked) but not usable: $mpi_why])])

  # The launcher: next to the wrapper (or in DIR/bin), then in PATH.
  ovl_mpi_bindir=
  AS_IF([test -n "$ovl_mpicc"],
          [ovl_mpi_bindir=`AS_DIRNAME(["$ovl_mpicc"])`],
        [test -n "$ovl_mpi_dir"],
          [ovl_mpi_bindir=$ovl_mpi_dir/bin])
  AC_MSG_CHECKING([for the MPI launcher])
  AS_IF([test -z "$MPIEXEC" && test -n "$ovl_mpi_bindir"],
    [for ovl_mpi_w in mpirun mpiexec mpirun.openmpi mpiexec.openmpi mpiexec.mpich; do
       AS_IF([test -x "$ovl_mpi_bindir/$ovl_mpi_w"],
         [MPIEXEC=$ovl_mpi_bindir/$ovl_mpi_w
          break])
     done])
  AS_IF([test -z "$MPIEXEC"],
    [MPIEXEC=`command -v mpirun 2>/dev/null` ||
       MPIEXEC=`command -v mpiexec 2>/dev/null` || MPIEXEC=])
  AC_MSG_RESULT([${MPIEXEC:-none}])
  AS_IF([test -z "$MPIEXEC"],
    [AC_MSG_WARN([no mpirun or mpiexec found (set MPIEXEC=...): tests/mpi.sh will skip])])
  AC_DEFINE([HAVE_MPI], [1], [Run as many processes under MPI])
])

AC_SUBST([MPI_CPPFLAGS])
AC_SUBST([MPI_LDFLAGS])
AC_SUBST([MPI_LIBS])
AC_SUBST([MPIEXEC])
AM_CONDITIONAL([HAVE_MPI], [test "x$mpi_happy" = xyes])
])
