# OVL_ADD_FLAGS(FLAGS, [LINK])
# ----------------------------
# Add FLAGS to OVL_CFLAGS, and to OVL_LDFLAGS too when LINK is given, if
# $CC compiles and links a program with them; otherwise stop configure.
# OVL_CFLAGS and OVL_LDFLAGS are the project's own flags (AM_CFLAGS and
# AM_LDFLAGS in Makefile.am), kept apart from the user's CFLAGS/LDFLAGS.
AC_DEFUN([OVL_ADD_FLAGS], [
  AC_MSG_CHECKING([whether $CC accepts $1])
  ovl_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS $1"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes])
     OVL_CFLAGS="$OVL_CFLAGS $1"
     m4_ifval([$2], [OVL_LDFLAGS="$OVL_LDFLAGS $1"])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$CC does not accept $1])])
  CFLAGS=$ovl_save_CFLAGS
])

