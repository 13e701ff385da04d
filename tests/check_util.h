/*
 * Helpers shared by the Check suites: programs from schedule text through
 * the parser (the one way tests make programs), cpu worlds, and main().
 * Each helper fails the current test with the library's message.
 */
#ifndef OVL_TESTS_CHECK_UTIL_H
#define OVL_TESTS_CHECK_UTIL_H

#include <check.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ovl.h"

/* `text` parsed and bound for `nranks` ranks; `file` names it. */
static inline ovl_program *tu_parse(const char *text, const char *file,
                                    int nranks) {
  ovl_parse_opts po = {.size = sizeof po, .nranks = nranks};
  ovl_program *p = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_program_parse(text, strlen(text), file, &po, &p, &err);
  ck_assert_msg(st == OVL_OK, "parse %s: %s\n%s", file, err.msg, text);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* A cpu world of `nranks` ranks; timeout_s as ovl_world_opts. */
static inline ovl_world *tu_cpu_world(int nranks, double timeout_s) {
  ovl_world_opts wo = {.size = sizeof wo, .backend = "cpu", .nranks = nranks,
                       .timeout_s = timeout_s};
  ovl_world *w = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_world_create(&wo, &w, &err);
  ck_assert_msg(st == OVL_OK, "world: %s", err.msg);
  return w;
}

/* The source tree (the build passes it). */
#ifndef OVL_SRCDIR
#define OVL_SRCDIR "."
#endif

/* A file under the source tree, whole, as a terminated string. */
static inline char *tu_read_source_file(const char *rel) {
  char path[4096];
  FILE *f;
  char *text;
  long n;
  snprintf(path, sizeof path, "%s/%s", OVL_SRCDIR, rel);
  f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  n = ftell(f);
  ck_assert_int_ge(n, 0);
  rewind(f);
  text = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = '\0';
  fclose(f);
  return text;
}

/* Valid UTF-8, checked independently of the library's escaping: decode
 * every sequence to its code point and refuse overlong forms, surrogates
 * and anything above U+10FFFF. */
static inline bool tu_utf8_valid(const unsigned char *s) {
  while (*s) {
    unsigned cp, n;
    if (*s < 0x80) {
      s++;
      continue;
    }
    if ((*s & 0xe0) == 0xc0)
      n = 2, cp = *s & 0x1fu;
    else if ((*s & 0xf0) == 0xe0)
      n = 3, cp = *s & 0x0fu;
    else if ((*s & 0xf8) == 0xf0)
      n = 4, cp = *s & 0x07u;
    else
      return false;
    for (unsigned k = 1; k < n; k++) {
      if ((s[k] & 0xc0) != 0x80)
        return false;
      cp = cp << 6 | (s[k] & 0x3fu);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
        (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
        cp > 0x10ffff)
      return false;
    s += n;
  }
  return true;
}

/* ------------------------------------------------------------------ */
/* A tiny JSON parser: well-formedness only.                           */
/* ------------------------------------------------------------------ */

static inline const char *tu_js_value(const char *s);

static inline const char *tu_js_ws(const char *s) {
  while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
    s++;
  return s;
}

static inline const char *tu_js_string(const char *s) {
  if (*s != '"')
    return NULL;
  for (s++; *s != '"'; s++) {
    if ((unsigned char)*s < 0x20)
      return NULL;
    if (*s == '\\') {
      s++;
      if (*s == 'u') {
        for (int k = 1; k <= 4; k++)
          if (!isxdigit((unsigned char)s[k]))
            return NULL;
        s += 4;
      } else if (strchr("\"\\/bfnrt", *s) == NULL || *s == '\0') {
        return NULL;
      }
    }
  }
  return s + 1;
}

static inline const char *tu_js_number(const char *s) {
  const char *b = s;
  if (*s == '-')
    s++;
  if (!isdigit((unsigned char)*s))
    return NULL;
  while (isdigit((unsigned char)*s) || *s == '.' || *s == 'e' ||
         *s == 'E' || *s == '+' || *s == '-')
    s++;
  return s > b ? s : NULL;
}

static inline const char *tu_js_seq(const char *s, char close, bool object) {
  s = tu_js_ws(s + 1);
  if (*s == close)
    return s + 1;
  for (;;) {
    if (object) {
      if ((s = tu_js_string(tu_js_ws(s))) == NULL)
        return NULL;
      s = tu_js_ws(s);
      if (*s++ != ':')
        return NULL;
    }
    if ((s = tu_js_value(s)) == NULL)
      return NULL;
    s = tu_js_ws(s);
    if (*s == close)
      return s + 1;
    if (*s++ != ',')
      return NULL;
  }
}

static inline const char *tu_js_value(const char *s) {
  s = tu_js_ws(s);
  switch (*s) {
  case '{':
    return tu_js_seq(s, '}', true);
  case '[':
    return tu_js_seq(s, ']', false);
  case '"':
    return tu_js_string(s);
  case 't':
    return strncmp(s, "true", 4) ? NULL : s + 4;
  case 'f':
    return strncmp(s, "false", 5) ? NULL : s + 5;
  case 'n':
    return strncmp(s, "null", 4) ? NULL : s + 4;
  default:
    return tu_js_number(s);
  }
}

static inline bool tu_json_ok(const char *s) {
  const char *e = tu_js_value(s);
  return e != NULL && *tu_js_ws(e) == '\0';
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

/* main() of a suite whose test cases mostly wait (chaos sleeps, timeouts):
 * each case of `cases` (the names given to tcase_create, NULL-ended,
 * every case of the suite) runs in a process of its own, side by side,
 * so that one suite does not hold a slot of `make -j2 check` for the sum
 * of its waits. Each case's output is printed whole, in the order of
 * `cases`. A case that runs no test (a name not in the suite) fails.
 * With CK_RUN_CASE, CK_RUN_SUITE or CK_FORK=no set: tu_run_suite. */
static inline int tu_run_suite_cases(Suite *s, const char *const *cases) {
  const char *fork_mode = getenv("CK_FORK");
  if (getenv("CK_RUN_CASE") != NULL || getenv("CK_RUN_SUITE") != NULL ||
      (fork_mode != NULL && strcmp(fork_mode, "no") == 0))
    return tu_run_suite(s);
  size_t n = 0;
  while (cases[n] != NULL)
    n++;
  FILE **outs = calloc(n, sizeof *outs);
  pid_t *pids = calloc(n, sizeof *pids);
  int failed = 0;
  if (outs == NULL || pids == NULL) {
    free(outs);
    free(pids);
    return tu_run_suite(s);
  }
  fflush(stdout);
  fflush(stderr);
  for (size_t i = 0; i < n; i++) {
    outs[i] = tmpfile();
    pids[i] = outs[i] != NULL ? fork() : -1;
    if (pids[i] == 0) {
      dup2(fileno(outs[i]), STDOUT_FILENO);
      dup2(fileno(outs[i]), STDERR_FILENO);
      SRunner *sr = srunner_create(s);
      srunner_run(sr, NULL, cases[i], CK_NORMAL);
      int bad = srunner_ntests_failed(sr) != 0;
      if (srunner_ntests_run(sr) == 0) {
        printf("%s: no test ran: no case of this name in the suite\n",
               cases[i]);
        bad = 1;
      }
      fflush(stdout);
      _exit(bad ? EXIT_FAILURE : EXIT_SUCCESS);
    }
    if (pids[i] < 0) {
      printf("%s: cannot start its process\n", cases[i]);
      failed = 1;
    }
  }
  for (size_t i = 0; i < n; i++) {
    int status = 0;
    if (pids[i] > 0 && (waitpid(pids[i], &status, 0) != pids[i] ||
                        !WIFEXITED(status) ||
                        WEXITSTATUS(status) != EXIT_SUCCESS))
      failed = 1;
    if (outs[i] != NULL) {
      char buf[4096];
      size_t got;
      rewind(outs[i]);
      while ((got = fread(buf, 1, sizeof buf, outs[i])) > 0)
        fwrite(buf, 1, got, stdout);
      fclose(outs[i]);
    }
  }
  free(outs);
  free(pids);
  srunner_free(srunner_create(s)); /* the suite, which a runner frees */
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
