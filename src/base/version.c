/*
 * The library's version (ovl/base.h): the one it was built as, from the
 * headers configure made for this build (ovl/version.h), so that a program
 * can compare it with the headers it was compiled with.
 */
#include "ovl.h"

int ovl_version(void) { return OVL_VERSION; }

const char *ovl_version_string(void) { return OVL_VERSION_STRING; }
