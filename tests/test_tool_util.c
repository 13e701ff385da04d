/* The tools' helpers (tools/tool_util.c): the host memory a run may use
 * (cgroup v1 and v2 limits of the process's own cgroup, read from a fake
 * /proc/self/cgroup and a fake cgroup tree) and the quoting of arguments. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool_util.h"

#define GB 1000000000ull

/* A scratch directory per test: proc (the fake /proc/self/cgroup) and
 * cg/ (the fake /sys/fs/cgroup). */
static char dir[64], proc[128], root[128];

static void setup(void) {
  snprintf(dir, sizeof dir, "%s", "/tmp/ovl-tool-util.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(proc, sizeof proc, "%s/cgroup", dir);
  snprintf(root, sizeof root, "%s/cg", dir);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

/* Write `text` to root/rel, making its directories. */
static void put(const char *rel, const char *text) {
  char path[512];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')) != NULL; p++) {
    *p = '\0';
    ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s",
                  path);
    *p = '/';
  }
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

static void put_proc(const char *text) {
  FILE *f = fopen(proc, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(v2_own_cgroup_and_ancestors) {
  put_proc("0::/user.slice/job-7\n");
  /* The mount root's own file says nothing about this process. */
  put("memory.max", "max\n");
  put("user.slice/memory.max", "6000000000\n");
  put("user.slice/job-7/memory.max", "max\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 6 * GB);
  /* The smallest limit on the way up wins. */
  put("user.slice/job-7/memory.max", "2000000000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 2 * GB);
  /* Physical memory when that is lower, and the limit when it is unknown. */
  ck_assert_uint_eq(host_memory_from(proc, root, 1 * GB), 1 * GB);
  ck_assert_uint_eq(host_memory_from(proc, root, 0), 2 * GB);
}
END_TEST

START_TEST(v2_no_limit) {
  put_proc("0::/a/b\n");
  put("a/b/memory.max", "max\n");
  put("a/memory.max", "max\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 24 * GB);
  /* A cgroup whose files are not there (another mount namespace). */
  put_proc("0::/elsewhere/x\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 24 * GB);
}
END_TEST

START_TEST(v2_root_of_a_namespace) {
  /* In a cgroup namespace the process's cgroup is "/", the mount's root. */
  put_proc("0::/\n");
  put("memory.max", "3000000000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 3 * GB);
  /* ".." leads outside the namespace: only the root is read. */
  put_proc("0::/../../other\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 3 * GB);
}
END_TEST

START_TEST(v1_memory_controller) {
  /* The v1 memory line, among others (this machine's own layout). */
  put_proc("9:name=systemd:/\n8:pids:/\n4:memory:/process_api/bfa0\n"
           "1:cpu:/\n0::/\n");
  put("memory/memory.limit_in_bytes", "9223372036854771712\n");
  put("memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
  put("memory/process_api/bfa0/memory.limit_in_bytes", "8000000000\n");
  /* Files of other controllers are not limits. */
  put("pids/memory.limit_in_bytes", "1000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 8 * GB);
  /* The v1 "no limit" value is none. */
  put("memory/process_api/bfa0/memory.limit_in_bytes",
      "9223372036854771712\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 24 * GB);
  ck_assert_uint_eq(host_memory_from(proc, root, 0), 0);
}
END_TEST

START_TEST(v1_controller_list_and_ancestor) {
  /* "cpu,memory"-style lists; the limit is on a parent of the cgroup. */
  put_proc("5:cpuacct,memory,cpu:/docker/abc\n3:cpuset:/docker/abc\n");
  put("memory/docker/memory.limit_in_bytes", "4000000000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 4 * GB);
  /* "memoryx" is not "memory". */
  put_proc("5:memoryx:/docker/abc\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 24 * GB);
}
END_TEST

START_TEST(v1_container_without_its_path) {
  /* A container sees its host path in /proc/self/cgroup, while its own
   * cgroup is mounted at the root: the walk up reaches it. */
  put_proc("4:memory:/docker/0123456789abcdef\n");
  put("memory/memory.limit_in_bytes", "5000000000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 5 * GB);
}
END_TEST

START_TEST(hybrid_both_apply) {
  put_proc("4:memory:/a\n0::/b\n");
  put("memory/a/memory.limit_in_bytes", "7000000000\n");
  put("b/memory.max", "3000000000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 3 * GB);
}
END_TEST

START_TEST(no_proc_file_reads_the_roots) {
  /* proc is not written: only the mount roots' files count. */
  put("memory/memory.limit_in_bytes", "9000000000\n");
  put("memory.max", "max\n");
  put("x/memory.max", "1000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 9 * GB);
  put("memory.max", "6000000000\n");
  ck_assert_uint_eq(host_memory_from(proc, root, 24 * GB), 6 * GB);
}
END_TEST

START_TEST(env_overrides) {
  ck_assert_int_eq(setenv("OVL_HOST_MEMORY", "123456789", 1), 0);
  ck_assert(host_memory_overridden());
  ck_assert_uint_eq(host_memory(), 123456789);
  /* Not a positive number of bytes: the machine's own figure. */
  static const char *const bad[] = {"0", "", "-5", "1G", "12x", " 7"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(setenv("OVL_HOST_MEMORY", bad[i], 1), 0);
    ck_assert_msg(!host_memory_overridden(), "'%s' taken", bad[i]);
  }
  ck_assert_int_eq(unsetenv("OVL_HOST_MEMORY"), 0);
  ck_assert(!host_memory_overridden());
  ck_assert_uint_gt(host_memory(), 0);
}
END_TEST

START_TEST(escape_arg_one_line) {
  char buf[32];
  ck_assert_str_eq(escape_arg("cols=5", buf, sizeof buf), "cols=5");
  ck_assert_str_eq(escape_arg("a\nb\tc\rd\\e", buf, sizeof buf),
                   "a\\nb\\tc\\rd\\\\e");
  ck_assert_str_eq(escape_arg("\xff\x01\x7f", buf, sizeof buf),
                   "\\xff\\x01\\x7f");
  /* Cut with "..." where it does not fit. */
  ck_assert_str_eq(escape_arg("0123456789012345678901234567890123456789",
                              buf, sizeof buf),
                   "0123456789012345678901234567...");
  ck_assert_str_eq(escape_arg("\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n", buf, 12),
                   "\\n\\n\\n\\n...");
}
END_TEST

static Suite *tool_util_suite(void) {
  Suite *s = suite_create("tool_util");
  TCase *tc = tcase_create("host memory");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, v2_own_cgroup_and_ancestors);
  tcase_add_test(tc, v2_no_limit);
  tcase_add_test(tc, v2_root_of_a_namespace);
  tcase_add_test(tc, v1_memory_controller);
  tcase_add_test(tc, v1_controller_list_and_ancestor);
  tcase_add_test(tc, v1_container_without_its_path);
  tcase_add_test(tc, hybrid_both_apply);
  tcase_add_test(tc, no_proc_file_reads_the_roots);
  tcase_add_test(tc, env_overrides);
  suite_add_tcase(s, tc);
  tc = tcase_create("messages");
  tcase_add_test(tc, escape_arg_one_line);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(tool_util_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
