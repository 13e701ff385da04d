/*
 * Helpers shared by the Check suites: programs from schedule text through
 * the parser (the one way tests make programs), cpu worlds, and main().
 * Each helper fails the current test with the library's message.
 */
#ifndef OVL_TESTS_CHECK_UTIL_H
#define OVL_TESTS_CHECK_UTIL_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ovl.h"

/* `text` parsed and bound for `nranks` ranks; `file` names it. */
static inline ovl_program *tu_parse(const char *text, const char *file,
                                    int nranks) {
  ovl_parse_opts po = {.nranks = nranks};
  ovl_program *p = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_program_parse(text, strlen(text), file, &po, &p, &err);
  ck_assert_msg(st == OVL_OK, "parse %s: %s\n%s", file, err.msg, text);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* A cpu world of `nranks` ranks; timeout_s as ovl_world_opts. */
static inline ovl_world *tu_cpu_world(int nranks, double timeout_s) {
  ovl_world_opts wo = {.backend = "cpu", .nranks = nranks,
                       .timeout_s = timeout_s};
  ovl_world *w = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_world_create(&wo, &w, &err);
  ck_assert_msg(st == OVL_OK, "world: %s", err.msg);
  return w;
}

/* Run a suite; the exit status of a test program. */
static inline int tu_run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
