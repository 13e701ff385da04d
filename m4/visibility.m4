# OVL_CHECK_VISIBILITY
# --------------------
# Whether $CC hides a library's symbols by default (-fvisibility=hidden) and
# exports those marked __attribute__((visibility("default"))), as the public
# header's OVL_API marks every declaration of the API. With both, libovl
# exports its API and nothing else: the internal ovl__ functions that its
# files share stay out of the shared library's dynamic symbol table
# (tests/symbols.sh checks it).
#
# Sets OVL_VISIBILITY_CFLAGS (-fvisibility=hidden, or empty when $CC lacks
# it; Makefile.am gives it to the library's C objects),
# OVL_VISIBILITY_NVCCFLAGS (the same for the host side of the CUDA
# kernels: -Xcompiler=-fvisibility=hidden, which nvcc's host compiler, g++
# or clang++, takes as gcc does) and OVL_VISIBILITY (yes or no; the shell variable
# ovl_visibility too). A compiler without it builds a library that
# exports everything; tests/symbols.sh then skips.
AC_DEFUN([OVL_CHECK_VISIBILITY], [
  AC_MSG_CHECKING([whether $CC hides symbols with -fvisibility=hidden])
  ovl_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS -fvisibility=hidden -Werror"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
__attribute__((visibility("default"))) int ovl_conftest_api(void);
int ovl_conftest_api(void) { return 0; }
int ovl_conftest_internal(void);
int ovl_conftest_internal(void) { return 1; }
]], [[return ovl_conftest_api() + ovl_conftest_internal();]])],
    [ovl_visibility=yes
     OVL_VISIBILITY_CFLAGS=-fvisibility=hidden
     OVL_VISIBILITY_NVCCFLAGS=-Xcompiler=-fvisibility=hidden],
    [ovl_visibility=no
     OVL_VISIBILITY_CFLAGS=
     OVL_VISIBILITY_NVCCFLAGS=])
  CFLAGS=$ovl_save_CFLAGS
  AC_MSG_RESULT([$ovl_visibility])
  AS_IF([test "x$ovl_visibility" != xyes],
    [AC_MSG_WARN([$CC cannot hide symbols: libovl will export its internal functions too])])
  OVL_VISIBILITY=$ovl_visibility
  # The C++ runtime that the CUDA kernels need (NVCC_LIBS: -lstdc++) is an
  # archive on some machines (a compiler installed under /opt with
  # libstdc++.a alone): linked into libovl.so, every symbol of it would be
  # exported beside the API. GNU ld's --exclude-libs keeps those archives'
  # symbols local; our own archive (the convenience library) is not named.
  AC_MSG_CHECKING([whether the linker takes -Wl,--exclude-libs])
  ovl_save_LDFLAGS=$LDFLAGS
  LDFLAGS="$LDFLAGS -Wl,--exclude-libs,libstdc++.a:libsupc++.a"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[]], [[return 0;]])],
    [OVL_EXCLUDE_LIBS_LDFLAGS="-Wl,--exclude-libs,libstdc++.a:libsupc++.a"
     AC_MSG_RESULT([yes])],
    [OVL_EXCLUDE_LIBS_LDFLAGS=
     AC_MSG_RESULT([no])])
  LDFLAGS=$ovl_save_LDFLAGS
  AC_SUBST([OVL_EXCLUDE_LIBS_LDFLAGS])
  AC_SUBST([OVL_VISIBILITY_CFLAGS])
  AC_SUBST([OVL_VISIBILITY_NVCCFLAGS])
  AC_SUBST([OVL_VISIBILITY])
])
