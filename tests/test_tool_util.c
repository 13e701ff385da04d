/* The tools' helpers (tools/tool_util.c): the host memory a run may use
 * (cgroup v1 and v2 limits of the process's own cgroup, read from a fake
 * /proc/self/cgroup and a fake cgroup tree), the quoting of arguments, a
 * closed pipe at exit; the table of the flags both tools take
 * (tools/common_flags.c): its rows, their scan beside a tool's own flags,
 * their help lines; overlap_sim's verdict of a run's figures
 * (tools/sim_judge.c): the overlap line, the warnings of noise. */
#include <check.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_flags.h"
#include "sim_judge.h"
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

/* One number syntax for every flag: decimal, no blank, no sign unless
 * negatives are allowed, no hex; reals in plain or e notation. */
START_TEST(number_syntax) {
  static const char *const bad_ints[] = {
      " 5", "5 ", "+5", "0x10", "5x", "", "-", "1e3", "5.0", "\t5", "--5"};
  static const char *const bad_reals[] = {
      " 1", "1 ", "+1", "0x10", "0x1p3", "inf", "nan", "", ".", "e5", "1e",
      "1e+", "1.5.3", "-1", "1,5", "infinity"};
  int i;
  double d;
  for (size_t k = 0; k < sizeof bad_ints / sizeof bad_ints[0]; k++)
    ck_assert_msg(!parse_int(bad_ints[k], 0, 100, &i), "'%s' taken",
                  bad_ints[k]);
  for (size_t k = 0; k < sizeof bad_reals / sizeof bad_reals[0]; k++)
    ck_assert_msg(!parse_double(bad_reals[k], 0, 1e300, &d), "'%s' taken",
                  bad_reals[k]);
  ck_assert(parse_int("007", 0, 100, &i) && i == 7);
  ck_assert(parse_int("-3", -5, 5, &i) && i == -3);
  ck_assert(!parse_int("-3", 0, 5, &i));
  ck_assert(parse_int("2147483647", 0, INT_MAX, &i) && i == INT_MAX);
  ck_assert(!parse_int("2147483648", 0, INT_MAX, &i));
  ck_assert(!parse_int("99999999999999999999", 0, INT_MAX, &i));
  ck_assert(parse_double("0.5", 0, 1, &d) && d == 0.5);
  ck_assert(parse_double(".5", 0, 1, &d) && d == 0.5);
  ck_assert(parse_double("5.", 0, 10, &d) && d == 5.0);
  ck_assert(parse_double("1e-3", 0, 1, &d) && d == 1e-3);
  ck_assert(parse_double("1E+2", 0, 1000, &d) && d == 100.0);
  ck_assert(parse_double("-2.5", -5, 5, &d) && d == -2.5);
  /* The smallest double (subnormal) is a number; one below it is 0. */
  ck_assert(parse_double("4.9e-324", 0, 1e300, &d) && d > 0);
  ck_assert(parse_double("1e-400", 0, 1e300, &d) && d == 0);
  /* Above the limit, or above any double: refused. */
  ck_assert(!parse_double("1e308", 0, 1e300, &d));
  ck_assert(!parse_double("1e400", 0, 1e300, &d));
}
END_TEST

/* ------------------------------------------------------------------ */
/* The shared flags.                                                    */
/* ------------------------------------------------------------------ */

START_TEST(table_rows_are_whole) {
  for (int i = 0; i < CF__COUNT; i++) {
    const flag_def *d = &common_flags[i];
    ck_assert_msg(d->name != NULL, "row %d has no name", i);
    for (int j = 0; j < i; j++) {
      ck_assert_msg(strcmp(d->name, common_flags[j].name) != 0,
                    "--%s twice", d->name);
      ck_assert_msg(d->short_name == 0 ||
                        d->short_name != common_flags[j].short_name,
                    "-%c twice", d->short_name);
    }
    /* A value has a parser and a switch none (--help, --version: none). */
    ck_assert_msg((d->metavar != NULL) == (d->parse != NULL),
                  "--%s: a value and no parser, or a parser and no value",
                  d->name);
    /* A row listed with the next has no text of its own. */
    ck_assert_msg(!d->with_next || (d->help == NULL && i + 1 < CF__COUNT),
                  "--%s", d->name);
  }
}
END_TEST

/* A tool with one flag of its own, -x/--own, for the scans below; it
 * does not take the table's -r. */
static int own_seen;
static int take_own(void *opts, int c, const char *arg) {
  (void)opts;
  (void)arg;
  if (c != 'x')
    return FLAG_UNKNOWN;
  own_seen++;
  return -1;
}
static void no_usage(FILE *f) { fputs("usage\n", f); }
static const struct option own_opts[] = {{"own", no_argument, NULL, 'x'},
                                         {NULL, 0, NULL, 0}};
static const flag_set test_set = {.tool = "test_tool",
                                  .own = own_opts,
                                  .own_short = "x",
                                  .no_short = "r",
                                  .column = 23,
                                  .usage = no_usage,
                                  .take = take_own};

/* Scans the NULL-terminated words after the program's name. */
static int scan(common_opts *c, const char *const *words) {
  char *argv[16];
  int argc = 0;
  argv[argc++] = (char *)"test_tool";
  for (; *words != NULL && argc < 15; words++)
    argv[argc++] = (char *)*words;
  argv[argc] = NULL;
  common_opts_init(c);
  own_seen = 0;
  optind = 0; /* glibc: start a new scan */
  return common_flags_scan(&test_set, argc, argv, c, NULL);
}

START_TEST(scan_shared_and_own) {
  common_opts c;
  static const char *const ok[] = {
      "--ranks=3", "-x", "-n", "4", "--warmup=0", "--tf32=on",
      "--comm-priority=high", "--backend", "cpu", "--own", "-q",
      "--timeout=2.5", "--nccl-max-ctas=8", NULL};
  ck_assert_int_eq(scan(&c, ok), -1);
  ck_assert_int_eq(own_seen, 2);
  ck_assert_int_eq(c.ranks, 3);
  ck_assert_int_eq(c.iters, 4);
  ck_assert_int_eq(c.warmup, 0);
  ck_assert_int_eq(c.tf32, 1);
  ck_assert_int_eq(c.comm_priority_high, 1);
  ck_assert_str_eq(c.backend, "cpu");
  ck_assert_int_eq(c.quiet, 1);
  ck_assert(c.timeout_s == 2.5);
  ck_assert_int_eq(c.nccl_max_ctas, 8);
  ck_assert(c.rtol == OVL_TOL_DTYPE && c.atol == OVL_TOL_DTYPE);
  ck_assert_int_eq(common_flags_check(&c), -1);
}
END_TEST

START_TEST(scan_refuses) {
  common_opts c;
  static const char *const cases[][3] = {
      {"--ranks=65537", NULL}, {"--backend=tpu", NULL}, {"--tf32=yes", NULL},
      {"--comm-priority=max", NULL}, {"--timeout=0", NULL},
      {"--rtol=nan", NULL}, {"--nccl-min-ctas=65", NULL},
      /* Not this tool's short name, nor its own. */
      {"-r", "2", NULL}, {"--bogus", NULL}, {"-n", NULL}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ck_assert_msg(scan(&c, cases[i]) == TOOL_EXIT_USAGE, "%s accepted",
                  cases[i][0]);
  /* Past 64 ranks only the model. */
  static const char *const r65[] = {"--ranks=65", NULL};
  static const char *const r65m[] = {"--ranks=65", "--backend=model", NULL};
  ck_assert_int_eq(scan(&c, r65), -1);
  ck_assert_int_eq(common_flags_check(&c), TOOL_EXIT_USAGE);
  ck_assert_int_eq(scan(&c, r65m), -1);
  ck_assert_int_eq(common_flags_check(&c), -1);
  static const char *const graph_cpu[] = {"--graph", "--backend=cpu", NULL};
  static const char *const ctas[] = {"--nccl-min-ctas=8",
                                     "--nccl-max-ctas=4", NULL};
  ck_assert_int_eq(scan(&c, graph_cpu), -1);
  ck_assert_int_eq(common_flags_check(&c), TOOL_EXIT_USAGE);
  ck_assert_int_eq(scan(&c, ctas), -1);
  ck_assert_int_eq(common_flags_check(&c), TOOL_EXIT_USAGE);
}
END_TEST

/* The message of a refused value states the flag's real limits. */
START_TEST(messages_state_limits) {
  common_opts c;
  char *buf = NULL;
  size_t len = 0;
  FILE *saved = stderr;
  static const char *const rtol[] = {"--rtol=1e308", NULL};
  static const char *const ranks[] = {"--ranks=+5", NULL};
  stderr = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(stderr);
  ck_assert_int_eq(scan(&c, rtol), TOOL_EXIT_USAGE);
  ck_assert_int_eq(scan(&c, ranks), TOOL_EXIT_USAGE);
  fclose(stderr);
  stderr = saved;
  ck_assert_msg(strstr(buf, "--rtol: '1e308' is not a number from 0 to "
                            "1e300") != NULL,
                "%s", buf);
  ck_assert_msg(strstr(buf, "--ranks: '+5' is not a number from 1 to 64") !=
                    NULL,
                "%s", buf);
  free(buf);
}
END_TEST

/* common_flag_help's text for `id` in `set`. */
static char *help_of(const flag_set *set, common_flag id, const char *text) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  common_flag_help(f, set, id, text);
  ck_assert_int_eq(fclose(f), 0);
  return buf;
}

START_TEST(help_lines) {
  flag_set wide = test_set;
  char *h;
  wide.column = 25;
  wide.no_short = "";
  /* The text beside the names, its lines under the column. */
  h = help_of(&test_set, CF_TIMEOUT, NULL);
  ck_assert_str_eq(h, "      --timeout=SEC    a collective or stream stuck "
                      "this long is an error\n"
                      "                       (default 60)\n");
  free(h);
  /* A short name the tool takes; one it does not. */
  h = help_of(&wide, CF_RANKS, NULL);
  ck_assert_str_eq(h, "  -r, --ranks=N          ranks (default: cpu 2, "
                      "cuda every GPU, model 8)\n");
  free(h);
  h = help_of(&test_set, CF_RANKS, NULL);
  ck_assert_str_eq(h, "      --ranks=N        ranks (default: cpu 2, cuda "
                      "every GPU, model 8)\n");
  free(h);
  /* Names too long for the column: the text under them. Two flags on one
   * line. The tool's own text. */
  h = help_of(&test_set, CF_NCCL_MIN_CTAS, NULL);
  ck_assert_str_eq(h, "      --nccl-min-ctas=N, --nccl-max-ctas=N\n"
                      "                       cuda: NCCL's CTA limits "
                      "(ncclConfig_t); 0 = NCCL's choice\n");
  free(h);
  h = help_of(&test_set, CF_QUIET, "less\nstill less");
  ck_assert_str_eq(h, "  -q, --quiet          less\n"
                      "                       still less\n");
  free(h);
}
END_TEST

/* ------------------------------------------------------------------ */
/* overlap_sim's verdict of a run's figures (tools/sim_judge.c)         */
/* ------------------------------------------------------------------ */

/* Two modes, one trial of 20 ms iterations, the speedup `s`. */
static sim_figures one_trial(double s) {
  sim_figures f = {.speedup = s, .speedup_min = s, .speedup_max = s,
                   .spread = 0, .trials = 1, .ideal = NAN,
                   .efficiency = NAN, .short_s = 0.02,
                   .short_mode = "async", .overlap_short_s = 0.02};
  return f;
}

static const char *overlap_of(const sim_figures *f) {
  static char buf[512];
  ck_assert(sim_judge_overlap(f, buf, sizeof buf));
  return buf;
}

START_TEST(overlap_words) {
  sim_figures f = one_trial(1.35);
  ck_assert_str_eq(overlap_of(&f),
                   "overlap: async 1.35x sync: faster; --mode=all adds the "
                   "ideal speedup and the overlap efficiency");
  /* Slower is said, never hidden behind the result. */
  f = one_trial(0.87);
  ck_assert_str_eq(overlap_of(&f),
                   "overlap: async 0.87x sync: slower (no gain); --mode=all "
                   "adds the ideal speedup and the overlap efficiency");
  f = one_trial(1.01);
  ck_assert_ptr_nonnull(strstr(overlap_of(&f), "sync: no gain (within 2%)"));
  /* All four modes: the ideal and the efficiency instead of the flag. */
  f = one_trial(1.35);
  f.comp_comm = true;
  f.ideal = 1.582;
  f.efficiency = 0.632;
  ck_assert_str_eq(overlap_of(&f), "overlap: async 1.35x sync: faster; "
                                   "ideal 1.58x, overlap efficiency 0.63");
  /* Trials on both sides of 1, each within the spread: unclear. */
  f = one_trial(1.05);
  f.trials = 5;
  f.speedup_min = 0.95;
  f.speedup_max = 1.12;
  f.spread = 0.16;
  ck_assert_ptr_nonnull(strstr(overlap_of(&f),
                               "sync: unclear (its trials range from 0.95x "
                               "to 1.12x)"));
}
END_TEST

START_TEST(overlap_not_judged) {
  sim_figures f = one_trial(1.5);
  char buf[64];
  f.mismatched = 3;
  ck_assert_str_eq(overlap_of(&f), "overlap: not judged: the numbers are "
                                   "wrong (the result below)");
  f.mismatched = 0;
  f.races = 1;
  ck_assert_str_eq(overlap_of(&f), "overlap: not judged: the checks found "
                                   "races (the result below)");
  /* No line where sync and async did not both run. */
  f = one_trial(NAN);
  ck_assert(!sim_judge_overlap(&f, buf, sizeof buf));
  ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(noise_warnings) {
  sim_figures f = one_trial(1.14);
  char buf[1024];
  ck_assert_int_eq(sim_judge_noise(&f, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "");
  ck_assert(!sim_judge_is_noise(&f));
  /* A spread above 0.3 of the median. */
  f.trials = 5;
  f.speedup_min = 0.73;
  f.speedup_max = 1.53;
  f.spread = 0.70;
  ck_assert_int_eq(sim_judge_noise(&f, buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "warning: the async speedup is noise: its trials "
                        "spread 0.70 of the median (more than 0.3); more "
                        "--trials, larger sizes (-D) or a quieter machine "
                        "steady it\n");
  ck_assert_ptr_nonnull(
      strstr(overlap_of(&f), "sync: unclear (noise: see the warning above)"));
  /* One trial has no spread to speak of. */
  f.trials = 1;
  ck_assert_int_eq(sim_judge_noise(&f, buf, sizeof buf), 0);
  /* An iteration under 1 ms; an efficiency outside [0, 1]. */
  f = one_trial(1.14);
  f.short_s = f.overlap_short_s = 0.00021;
  f.short_mode = "sync";
  f.efficiency = 3.28;
  ck_assert_int_eq(sim_judge_noise(&f, buf, sizeof buf), 2);
  ck_assert_ptr_nonnull(strstr(buf, "warning: the times are noise: an "
                                    "iteration takes under 1 ms (sync "
                                    "0.210 ms)"));
  ck_assert_ptr_nonnull(strstr(buf, "warning: the overlap efficiency 3.280 "
                                    "is outside [0, 1]: noise"));
  ck_assert(sim_judge_is_noise(&f));
  ck_assert_ptr_nonnull(strstr(overlap_of(&f), "unclear (noise"));
  /* A short comp run is noise too, but not the speedup's. */
  f = one_trial(1.14);
  f.short_s = 0.0005;
  f.short_mode = "comm";
  ck_assert_int_eq(sim_judge_noise(&f, buf, sizeof buf), 1);
  ck_assert_ptr_nonnull(strstr(overlap_of(&f), "sync: faster"));
  /* Cut to the buffer, terminated. */
  f.efficiency = -0.5;
  ck_assert_int_eq(sim_judge_noise(&f, buf, 16), 2);
  ck_assert_uint_eq(strlen(buf), 15);
}
END_TEST

/* A reader gone: close_output says nothing and gives 141 (a usage error
 * stays 2). */
START_TEST(closed_pipe_is_quiet) {
  int fds[2];
  FILE *f;
  signal(SIGPIPE, SIG_IGN);
  for (int usage = 0; usage < 2; usage++) {
    ck_assert_int_eq(pipe(fds), 0);
    close(fds[0]);
    f = fdopen(fds[1], "w");
    ck_assert_ptr_nonnull(f);
    fputs("a line nobody reads\n", f);
    ck_assert_int_eq(close_output(f, "standard output",
                                  usage ? TOOL_EXIT_USAGE : 0),
                     usage ? TOOL_EXIT_USAGE : TOOL_EXIT_PIPE);
  }
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
  tcase_add_test(tc, number_syntax);
  suite_add_tcase(s, tc);
  tc = tcase_create("shared flags");
  tcase_add_test(tc, table_rows_are_whole);
  tcase_add_test(tc, scan_shared_and_own);
  tcase_add_test(tc, scan_refuses);
  tcase_add_test(tc, messages_state_limits);
  tcase_add_test(tc, help_lines);
  suite_add_tcase(s, tc);
  tc = tcase_create("verdict");
  tcase_add_test(tc, overlap_words);
  tcase_add_test(tc, overlap_not_judged);
  tcase_add_test(tc, noise_warnings);
  tcase_add_test(tc, closed_pipe_is_quiet);
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
