/* The base helpers (src/base/): JSON strings are always valid UTF-8
 * (base/json_str.h, ovl__sb_json_str, ovl_json_quote); option structs that
 * can grow (ovl__opts_read, OVL_OPTS_INIT); the statuses' texts and names,
 * and error messages with their context (ovl__err_prefix). */
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/op.h"

/* ovl__sb_json_str of s, without the quotes; free() it. */
static char *json_body(const char *s) {
  ovl__sbuf b = {0};
  ovl__sb_json_str(&b, s);
  ck_assert(!b.fail);
  ck_assert_uint_ge(b.len, 2);
  ck_assert(b.s[0] == '"' && b.s[b.len - 1] == '"');
  memmove(b.s, b.s + 1, b.len - 2);
  b.s[b.len - 2] = '\0';
  return b.s;
}

#define JSON_BODY_EQ(in, want)                                               \
  do {                                                                       \
    char *got_ = json_body(in);                                              \
    ck_assert_str_eq(got_, want);                                            \
    free(got_);                                                              \
  } while (0)

START_TEST(json_string_escapes) {
  JSON_BODY_EQ("", "");
  JSON_BODY_EQ("plain text: [0-9] {x}", "plain text: [0-9] {x}");
  JSON_BODY_EQ("a\"b\\c", "a\\\"b\\\\c");
  JSON_BODY_EQ("\n\r\t", "\\n\\r\\t");
  JSON_BODY_EQ("\x01\x1f\x7f", "\\u0001\\u001f\x7f");
}
END_TEST

START_TEST(json_string_valid_utf8_passes) {
  /* U+00E9, U+20AC, U+1D11E, and the edges of each range. */
  JSON_BODY_EQ("caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e",
               "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e");
  JSON_BODY_EQ("\xc2\x80\xdf\xbf", "\xc2\x80\xdf\xbf");
  JSON_BODY_EQ("\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf",
               "\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf");
  JSON_BODY_EQ("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf",
               "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
}
END_TEST

START_TEST(json_string_invalid_utf8_replaced) {
  /* A byte that never starts a sequence. */
  JSON_BODY_EQ("\xff", "\\ufffd");
  JSON_BODY_EQ("dir\xff/s.sched", "dir\\ufffd/s.sched");
  JSON_BODY_EQ("\x80\xbf\xc0\xc1\xf5\xfe", "\\ufffd\\ufffd\\ufffd\\ufffd"
                                           "\\ufffd\\ufffd");
  /* Overlong forms: '/' in two bytes, U+0000 in three, U+FFFF in four. */
  JSON_BODY_EQ("\xc0\xaf", "\\ufffd\\ufffd");
  JSON_BODY_EQ("\xe0\x80\x80", "\\ufffd\\ufffd\\ufffd");
  JSON_BODY_EQ("\xf0\x8f\xbf\xbf", "\\ufffd\\ufffd\\ufffd\\ufffd");
  /* Surrogates, and beyond U+10FFFF. */
  JSON_BODY_EQ("\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd");
  JSON_BODY_EQ("\xed\xbf\xbf", "\\ufffd\\ufffd\\ufffd");
  JSON_BODY_EQ("\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd");
  /* A sequence cut short is one replacement, by the end of the string or
   * by a byte that cannot continue it, which is then read for itself. */
  JSON_BODY_EQ("\xe2\x82", "\\ufffd");
  JSON_BODY_EQ("\xe2\x82x", "\\ufffdx");
  JSON_BODY_EQ("\xf0\x9d\x84\"", "\\ufffd\\\"");
  JSON_BODY_EQ("\xc3\xc3\xa9", "\\ufffd\xc3\xa9");
}
END_TEST

START_TEST(json_string_random_bytes_are_valid) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  unsigned char in[64];
  for (int round = 0; round < 20000; round++) {
    size_t n = (size_t)(round % 63);
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      /* Mostly high bytes, where the UTF-8 cases are. */
      in[i] = (unsigned char)(x % 5 == 0 ? 1 + x % 0x7f : 0x80 + x % 0x80);
    }
    in[n] = '\0';
    char *got = json_body((const char *)in);
    bool control = false;
    /* Plain tests, one assertion a failure: every ck_assert is a message
     * to Check's parent process, too slow a million times over under the
     * sanitizers. */
    if (!tu_utf8_valid((const unsigned char *)got))
      ck_abort_msg("not UTF-8 for round %d", round);
    for (const char *p = got; *p; p++)
      control |= (unsigned char)*p < 0x20;
    if (control)
      ck_abort_msg("a control character in round %d", round);
    free(got);
  }
}
END_TEST

START_TEST(json_quote_is_a_json_string) {
  char *q = ovl_json_quote("a\"b\xff");
  ck_assert_str_eq(q, "\"a\\\"b\\ufffd\"");
  free(q);
  q = ovl_json_quote(NULL);
  ck_assert_str_eq(q, "null");
  free(q);
}
END_TEST

/* A program built against this version: its struct is read whole. */
START_TEST(opts_read_whole) {
  ovl_run_opts in = {.size = sizeof in, .iters = 7, .warmup = 2,
                     .graph = 1};
  ovl_run_opts out;
  ovl_error err = {0};
  ck_assert_int_eq(ovl__opts_read(&out, sizeof out, &in, "r", &err), OVL_OK);
  ck_assert_uint_eq(out.size, sizeof out);
  ck_assert_int_eq(out.iters, 7);
  ck_assert_int_eq(out.warmup, 2);
  ck_assert_int_eq(out.graph, 1);
  /* NULL: every default. */
  ck_assert_int_eq(ovl__opts_read(&out, sizeof out, NULL, "r", &err), OVL_OK);
  ck_assert_int_eq(out.iters, 0);
  ck_assert_uint_eq(out.size, sizeof out);
}
END_TEST

/* A program built against an earlier version, whose struct ended before
 * `graph`: the fields it has are read, the rest are defaults whatever lies
 * in memory after its struct. */
START_TEST(opts_read_older_caller) {
  ovl_run_opts in = {.size = offsetof(ovl_run_opts, graph), .iters = 3,
                     .graph = 1 /* not the caller's: past its size */};
  ovl_run_opts out;
  ovl_error err = {0};
  ck_assert_int_eq(ovl__opts_read(&out, sizeof out, &in, "r", &err), OVL_OK);
  ck_assert_int_eq(out.iters, 3);
  ck_assert_int_eq(out.graph, 0);
}
END_TEST

/* A program built against a later version: fields past what this library
 * knows are refused when set, and ignored when left at 0. */
START_TEST(opts_read_newer_caller) {
  struct {
    ovl_run_opts known;
    int later_field;
  } in = {{.iters = 1}, 0};
  ovl_run_opts out;
  ovl_error err = {0};
  in.known.size = sizeof in;
  ck_assert_int_eq(ovl__opts_read(&out, sizeof out, &in, "r", &err), OVL_OK);
  ck_assert_int_eq(out.iters, 1);
  in.later_field = 5;
  ck_assert_int_eq(ovl__opts_read(&out, sizeof out, &in, "ovl_run_opts",
                                  &err),
                   OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "ovl_run_opts: fields set beyond"));
  ck_assert_ptr_nonnull(strstr(err.msg, "later version"));
}
END_TEST

/* A struct made without its size is refused, saying how to make it. */
START_TEST(opts_read_refuses_size_zero) {
  ovl_world_opts in = {.backend = "cpu"};
  ovl_world_opts out;
  ovl_error err = {0};
  ovl_world *w = NULL;
  ck_assert_int_eq(ovl__opts_read(&out, sizeof out, &in, "ovl_world_opts",
                                  &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_world_opts: its size is 0: set .size to "
                            "the struct's size when it is made "
                            "(OVL_OPTS_INIT, or {.size = sizeof opts})");
  /* Through the API too. */
  ck_assert_int_eq(ovl_world_create(&in, &w, &err), OVL_EINVAL);
  ck_assert_ptr_null(w);
  ck_assert_ptr_nonnull(strstr(err.msg, "ovl_world_opts: its size is 0"));
}
END_TEST

/* Every status has its text and its name, from the one table
 * (OVL_ERRNO_MAP); a value outside it has neither. */
START_TEST(status_texts_and_names) {
#define CHECK_STATUS(name, text)                                              \
  ck_assert_str_eq(ovl_strerror(OVL_##name), text);                           \
  ck_assert_str_eq(ovl_err_name(OVL_##name), "OVL_" #name);
  OVL_ERRNO_MAP(CHECK_STATUS)
#undef CHECK_STATUS
  ck_assert_str_eq(ovl_strerror(OVL_ENOMEM), "out of memory");
  ck_assert_str_eq(ovl_err_name(OVL_ETIMEDOUT), "OVL_ETIMEDOUT");
  ck_assert_str_eq(ovl_strerror(OVL__ERR_COUNT), "unknown error");
  ck_assert_str_eq(ovl_err_name(OVL__ERR_COUNT), "OVL_UNKNOWN");
  ck_assert_str_eq(ovl_strerror((ovl_status)-1), "unknown error");
  ck_assert_str_eq(ovl_err_name((ovl_status)-1), "OVL_UNKNOWN");
}
END_TEST

/* A message with its context put before it: both kept whole when they
 * fit, else the start of each (the prefix first), always terminated; a
 * NULL error is left alone. */
START_TEST(error_prefix_keeps_the_start_of_both) {
  ovl_error err = {0};
  char long_text[3 * OVL_ERROR_MSG_MAX];
  ck_assert_int_eq(ovl__err(&err, OVL_EPARSE, "bad %s", "op"), OVL_EPARSE);
  ovl__err_prefix(&err, "%s: ", "t.sched");
  ck_assert_int_eq(err.status, OVL_EPARSE);
  ck_assert_str_eq(err.msg, "t.sched: bad op");
  ovl__err_prefix(NULL, "ignored");
  ck_assert_int_eq(ovl__err(NULL, OVL_EIO, "nowhere"), OVL_EIO);
  /* A long message: the prefix and as much of it as fits. */
  memset(long_text, 'm', sizeof long_text - 1);
  long_text[sizeof long_text - 1] = '\0';
  ovl__err(&err, OVL_EIO, "%s", long_text);
  ck_assert_uint_eq(strlen(err.msg), OVL_ERROR_MSG_MAX - 1);
  ovl__err_prefix(&err, "ctx: ");
  ck_assert_uint_eq(strlen(err.msg), OVL_ERROR_MSG_MAX - 1);
  ck_assert(strncmp(err.msg, "ctx: mmm", 8) == 0);
  /* A prefix longer than a message: its start alone. */
  memset(long_text, 'p', sizeof long_text - 1);
  ovl__err(&err, OVL_EIO, "tail");
  ovl__err_prefix(&err, "%s", long_text);
  ck_assert_uint_eq(strlen(err.msg), OVL_ERROR_MSG_MAX - 1);
  ck_assert(err.msg[0] == 'p' && err.msg[OVL_ERROR_MSG_MAX - 2] == 'p');
}
END_TEST

static Suite *base_suite(void) {
  Suite *s = suite_create("base");
  TCase *tc = tcase_create("json strings");
  tcase_add_test(tc, json_string_escapes);
  tcase_add_test(tc, json_string_valid_utf8_passes);
  tcase_add_test(tc, json_string_invalid_utf8_replaced);
  tcase_add_test(tc, json_string_random_bytes_are_valid);
  tcase_add_test(tc, json_quote_is_a_json_string);
  suite_add_tcase(s, tc);
  tc = tcase_create("options that grow");
  tcase_add_test(tc, opts_read_whole);
  tcase_add_test(tc, opts_read_older_caller);
  tcase_add_test(tc, opts_read_newer_caller);
  tcase_add_test(tc, opts_read_refuses_size_zero);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, status_texts_and_names);
  tcase_add_test(tc, error_prefix_keeps_the_start_of_both);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(base_suite()); }
