/* The version (ovl/version.h, ovl/base.h): the header's macros are the
 * package's version as configure knows it (PACKAGE_VERSION, which the
 * build defines), its parts make OVL_VERSION, versions compare as numbers
 * in C and in #if, and the library's ovl_version() and
 * ovl_version_string() say the same as the headers. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_util.h"

/* OVL_VERSION must work in #if, where a program checks it. */
#if !(OVL_VERSION >= OVL_VERSION_NUMBER(0, 0, 0))
#error "OVL_VERSION does not compare in #if"
#endif
#if OVL_VERSION != OVL_VERSION_NUMBER(OVL_VERSION_MAJOR, OVL_VERSION_MINOR, \
                                      OVL_VERSION_PATCH)
#error "OVL_VERSION is not made of its parts"
#endif

#ifndef PACKAGE_VERSION
#error "the build defines PACKAGE_VERSION (configure's DEFS)"
#endif

START_TEST(header_is_package_version) {
  ck_assert_str_eq(OVL_VERSION_STRING, PACKAGE_VERSION);
}
END_TEST

START_TEST(parts_make_the_number) {
  char prefix[32];
  size_t n;
  ck_assert_int_ge(OVL_VERSION_MAJOR, 0);
  ck_assert_int_le(OVL_VERSION_MAJOR, 99);
  ck_assert_int_ge(OVL_VERSION_MINOR, 0);
  ck_assert_int_le(OVL_VERSION_MINOR, 99);
  ck_assert_int_ge(OVL_VERSION_PATCH, 0);
  ck_assert_int_le(OVL_VERSION_PATCH, 99);
  ck_assert_int_eq(OVL_VERSION, OVL_VERSION_MAJOR * 10000 +
                                    OVL_VERSION_MINOR * 100 +
                                    OVL_VERSION_PATCH);
  /* The text begins with the parts, and what follows (if anything) is
   * not one more digit of PATCH. */
  snprintf(prefix, sizeof prefix, "%d.%d.%d", OVL_VERSION_MAJOR,
           OVL_VERSION_MINOR, OVL_VERSION_PATCH);
  n = strlen(prefix);
  ck_assert_msg(strncmp(OVL_VERSION_STRING, prefix, n) == 0,
                "'%s' does not begin with '%s'", OVL_VERSION_STRING, prefix);
  ck_assert_msg(OVL_VERSION_STRING[n] < '0' || OVL_VERSION_STRING[n] > '9',
                "'%s' has more digits after '%s'", OVL_VERSION_STRING,
                prefix);
}
END_TEST

START_TEST(numbers_compare_as_versions) {
  ck_assert_int_eq(OVL_VERSION_NUMBER(0, 1, 0), 100);
  ck_assert_int_eq(OVL_VERSION_NUMBER(1, 2, 3), 10203);
  ck_assert_int_gt(OVL_VERSION_NUMBER(0, 10, 0), OVL_VERSION_NUMBER(0, 9, 99));
  ck_assert_int_gt(OVL_VERSION_NUMBER(1, 0, 0), OVL_VERSION_NUMBER(0, 99, 99));
  ck_assert_int_lt(OVL_VERSION_NUMBER(0, 1, 9), OVL_VERSION_NUMBER(0, 1, 10));
}
END_TEST

START_TEST(library_is_header_version) {
  ck_assert_int_eq(ovl_version(), OVL_VERSION);
  ck_assert_ptr_nonnull(ovl_version_string());
  ck_assert_str_eq(ovl_version_string(), OVL_VERSION_STRING);
  /* The same static string every time. */
  ck_assert_ptr_eq(ovl_version_string(), ovl_version_string());
}
END_TEST

static Suite *version_suite(void) {
  Suite *s = suite_create("version");
  TCase *tc = tcase_create("version");
  tcase_add_test(tc, header_is_package_version);
  tcase_add_test(tc, parts_make_the_number);
  tcase_add_test(tc, numbers_compare_as_versions);
  tcase_add_test(tc, library_is_header_version);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(version_suite()); }
