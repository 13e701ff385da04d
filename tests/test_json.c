/* The strict JSON reader (base/json_read.h): every type, nesting, escapes,
 * where values and errors are (line and column), each refusal with its
 * message, ovl__json_get, and ovl__json_load on files; the library's own
 * JSON strings (ovl__sb_json_str) read back. Allocation failures are in
 * tests/test_alloc.c. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json_read.h"
#include "check_util.h"

/* text (NUL-terminated) parsed as "t.json"; fails the test on an error. */
static ovl__json *parse_ok(const char *text) {
  ovl__json *v = NULL;
  ovl_error err = {0};
  ovl_status st = ovl__json_parse(text, strlen(text), "t.json", &v, &err);
  ck_assert_msg(st == OVL_OK, "%s\n  for: %s", err.msg, text);
  ck_assert_ptr_nonnull(v);
  return v;
}

/* text[0..len) refused as "t.json" with exactly the message `want`. */
static void refused_n(const char *text, size_t len, const char *want) {
  ovl__json *v = (ovl__json *)1;
  ovl_error err = {0};
  ovl_status st = ovl__json_parse(text, len, "t.json", &v, &err);
  ck_assert_msg(st == OVL_EINVAL, "%s: not refused (%s)", text,
                ovl_err_name(st));
  ck_assert_ptr_null(v);
  ck_assert_int_eq(err.status, OVL_EINVAL);
  ck_assert_msg(strcmp(err.msg, want) == 0,
                "for: %s\n  got:  %s\n  want: %s", text, err.msg, want);
}
static void refused(const char *text, const char *want) {
  refused_n(text, strlen(text), want);
}

START_TEST(every_type) {
  ovl__json *v = parse_ok("{\"n\": null, \"t\": true, \"f\": false, "
                          "\"x\": -1.5e2, \"s\": \"hi\", \"a\": [], "
                          "\"o\": {}}");
  static const char *keys[] = {"n", "t", "f", "x", "s", "a", "o"};
  static const ovl__jtype types[] = {OVL__J_NULL, OVL__J_BOOL, OVL__J_BOOL,
                                     OVL__J_NUM,  OVL__J_STR,  OVL__J_ARR,
                                     OVL__J_OBJ};
  static const char *names[] = {"null",   "true/false", "true/false",
                                "number", "string",     "array",
                                "object"};
  ck_assert_int_eq(v->type, OVL__J_OBJ);
  ck_assert_uint_eq(v->n, 7);
  for (size_t i = 0; i < 7; i++) {
    ck_assert_str_eq(v->keys[i], keys[i]);
    ck_assert_int_eq(v->items[i].type, types[i]);
    ck_assert_str_eq(ovl__json_type_name(v->items[i].type), names[i]);
    ck_assert_ptr_eq(ovl__json_get(v, keys[i]), &v->items[i]);
  }
  ck_assert(v->items[1].b);
  ck_assert(!v->items[2].b);
  ck_assert(v->items[3].num == -150.0);
  ck_assert_str_eq(v->items[4].str, "hi");
  ck_assert_uint_eq(v->items[5].n, 0);
  ck_assert_uint_eq(v->items[6].n, 0);
  ck_assert_str_eq(ovl__json_type_name(OVL__J_OBJ), "object");
  ovl__json_free(v);
  /* Scalars at the top, with whitespace around. */
  v = parse_ok(" \t\r\n42 \n");
  ck_assert(v->type == OVL__J_NUM && v->num == 42.0);
  ovl__json_free(v);
  v = parse_ok("null");
  ck_assert_int_eq(v->type, OVL__J_NULL);
  ovl__json_free(v);
  v = parse_ok("\"\"");
  ck_assert(v->type == OVL__J_STR && v->str[0] == '\0');
  ovl__json_free(v);
  ovl__json_free(NULL);
}
END_TEST

START_TEST(numbers) {
  static const struct {
    const char *text;
    double want;
  } cases[] = {{"0", 0},         {"-0", -0.0},       {"7", 7},
               {"-12", -12},     {"1.5", 1.5},       {"1e3", 1e3},
               {"1E+3", 1e3},    {"125e-3", 0.125},  {"0.5E-1", 0.05},
               {"1e308", 1e308}, {"1e-400", 0},      {"-1.7976931348623157e308",
                                                      -1.7976931348623157e308},
               {"123456789012345678901234567890", 1.2345678901234568e29}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ovl__json *v = parse_ok(cases[i].text);
    ck_assert_msg(v->type == OVL__J_NUM && v->num == cases[i].want,
                  "%s: %.17g", cases[i].text, v->num);
    ovl__json_free(v);
  }
  /* Longer than the reader's buffer on the stack. */
  char text[300] = "[0.";
  memset(text + 3, '0', 200);
  strcpy(text + 203, "25e1]");
  ovl__json *v = parse_ok(text);
  ck_assert(v->n == 1 && v->items[0].num == 2.5e-200);
  ovl__json_free(v);
}
END_TEST

START_TEST(nesting_and_positions) {
  const char *text = "{\n"
                     "  \"a\": [1, {\"b\": \"c\"}],\n"
                     "  \"d\":\n"
                     "    true\r\n"
                     "}";
  ovl__json *v = parse_ok(text);
  const ovl__json *a = ovl__json_get(v, "a"), *d = ovl__json_get(v, "d");
  ck_assert(v->line == 1 && v->col == 1);
  ck_assert(a != NULL && a->type == OVL__J_ARR && a->n == 2);
  ck_assert_int_eq(a->line, 2);
  ck_assert_int_eq(a->col, 8);
  ck_assert(a->items[0].line == 2 && a->items[0].col == 9);
  ck_assert(a->items[1].line == 2 && a->items[1].col == 12);
  const ovl__json *c = ovl__json_get(&a->items[1], "b");
  ck_assert(c != NULL && c->line == 2 && c->col == 18);
  ck_assert_str_eq(c->str, "c");
  ck_assert(d != NULL && d->line == 4 && d->col == 5 && d->b);
  ovl__json_free(v);

  /* 64 levels are read, of arrays and objects; 65 are not. */
  char deep[1024];
  size_t k = 0;
  for (int i = 0; i < 65; i++)
    deep[k++] = '[';
  for (int i = 0; i < 65; i++)
    deep[k++] = ']';
  deep[k] = '\0';
  refused(deep, "t.json:1:65: nesting deeper than 64");
  deep[k - 1] = '\0';
  v = parse_ok(deep + 1); /* 64 */
  const ovl__json *in = v;
  for (int i = 1; i < 64; i++, in = in->items)
    ck_assert(in->type == OVL__J_ARR && in->n == 1);
  ck_assert(in->type == OVL__J_ARR && in->n == 0 && in->col == 64);
  ovl__json_free(v);
  k = 0;
  for (int i = 0; i < 65; i++)
    k += (size_t)sprintf(deep + k, "{\"a\":");
  refused(deep, "t.json:1:321: nesting deeper than 64");
  deep[k - 5] = '1';
  deep[k - 4] = '\0';
  for (int i = 0; i < 64; i++)
    strcat(deep, "}");
  v = parse_ok(deep);
  in = v;
  for (int i = 0; i < 64; i++)
    in = ovl__json_get(in, "a");
  ck_assert(in != NULL && in->type == OVL__J_NUM && in->num == 1.0);
  ck_assert_int_eq(in->col, 321);
  ovl__json_free(v);
}
END_TEST

START_TEST(string_escapes) {
  ovl__json *v = parse_ok("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", "
                          "\"\\u0041\\u00e9\\u20AC\\ud834\\udd1e\", "
                          "\"\\uDBFF\\uDFFF\\uFFFF\", "
                          "\"caf\xc3\xa9 \xf0\x9d\x84\x9e\"]");
  ck_assert_uint_eq(v->n, 4);
  ck_assert_str_eq(v->items[0].str, "\"\\/\b\f\n\r\t");
  /* U+1D11E from a surrogate pair: 4 bytes of UTF-8. */
  ck_assert_str_eq(v->items[1].str, "A\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e");
  ck_assert_str_eq(v->items[2].str, "\xf4\x8f\xbf\xbf\xef\xbf\xbf");
  ck_assert_str_eq(v->items[3].str, "caf\xc3\xa9 \xf0\x9d\x84\x9e");
  ovl__json_free(v);
  /* Keys are decoded too. */
  v = parse_ok("{\"a\\u0062\": 1}");
  ck_assert_ptr_nonnull(ovl__json_get(v, "ab"));
  ovl__json_free(v);
}
END_TEST

/* Each refusal, with its place and its words. */
START_TEST(refusals) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"", "t.json:1:1: expected a value, found the end of the text"},
      {"  \n  ", "t.json:2:3: expected a value, found the end of the text"},
      {"[", "t.json:1:2: expected a value, found the end of the text"},
      {"{", "t.json:1:2: expected a member name (a string), found the end "
            "of the text"},
      {"{\"a\":1", "t.json:1:7: expected ',' or '}' after a member, found "
                   "the end of the text"},
      /* Trailing commas. */
      {"[1,]", "t.json:1:4: trailing comma before ']'"},
      {"{\"a\":1, }", "t.json:1:9: trailing comma before '}'"},
      {"[,1]", "t.json:1:2: expected a value, found ','"},
      /* Separators. */
      {"{\"a\":1 \"b\":2}", "t.json:1:8: expected ',' or '}' after a "
                            "member, found '\"'"},
      {"[1 2]", "t.json:1:4: expected ',' or ']' after an item, found '2'"},
      {"{\"a\" 1}", "t.json:1:6: expected ':' after the member name, found "
                    "'1'"},
      {"{a:1}", "t.json:1:2: expected a member name (a string), found 'a'"},
      {"{'a':1}", "t.json:1:2: expected a member name (a string), found "
                  "'''"},
      /* Comments. */
      {"// c\n1", "t.json:1:1: expected a value, found '/' (JSON has no "
                  "comments)"},
      {"[1 /* c */]", "t.json:1:4: expected ',' or ']' after an item, found "
                      "'/' (JSON has no comments)"},
      /* Numbers. */
      {"NaN", "t.json:1:1: expected a value, found 'NaN'"},
      {"[Infinity]", "t.json:1:2: expected a value, found 'Infinity'"},
      {"-Infinity", "t.json:1:2: expected a digit after '-', found "
                    "'Infinity'"},
      {"-", "t.json:1:2: expected a digit after '-', found the end of the "
            "text"},
      {"+1", "t.json:1:1: expected a value, found '+'"},
      {".5", "t.json:1:1: expected a value, found '.'"},
      {"01", "t.json:1:1: a number with a leading zero"},
      {"[-007]", "t.json:1:2: a number with a leading zero"},
      {"1.", "t.json:1:3: expected a digit after '.', found the end of the "
             "text"},
      {"1.e5", "t.json:1:3: expected a digit after '.', found 'e5'"},
      {"1e", "t.json:1:3: expected a digit in the exponent, found the end "
             "of the text"},
      {"1e+", "t.json:1:4: expected a digit in the exponent, found the end "
              "of the text"},
      {"0x10", "t.json:1:2: expected the end of the text after the value, "
               "found 'x10'"},
      {"1e309", "t.json:1:1: number out of range (beyond a double): 1e309"},
      {"[1, -2e400]", "t.json:1:5: number out of range (beyond a double): "
                      "-2e400"},
      /* Words. */
      {"tru", "t.json:1:1: expected a value, found 'tru'"},
      {"[nul]", "t.json:1:2: expected a value, found 'nul'"},
      {"True", "t.json:1:1: expected a value, found 'True'"},
      {"abcdefghijklmnopqrstuvwxyz", "t.json:1:1: expected a value, found "
                                     "'abcdefghijklmnop...'"},
      {"truex", "t.json:1:5: expected the end of the text after the value, "
                "found 'x'"},
      /* Keys. */
      {"{\"k\": 1, \"k\": 2}", "t.json:1:10: duplicate key 'k'"},
      {"{\"a\": {\"k\": 1}, \"b\": {\"k\": 1, \"\\u006b\": 3}}",
       "t.json:1:31: duplicate key 'k'"},
      /* After the value. */
      {"1 2", "t.json:1:3: expected the end of the text after the value, "
              "found '2'"},
      {"{}\n\n  }", "t.json:3:3: expected the end of the text after the "
                    "value, found '}'"},
      /* Strings. */
      {"\"abc", "t.json:1:1: unterminated string"},
      {"[\"a\\\"]", "t.json:1:2: unterminated string"},
      {"\"a\\", "t.json:1:3: invalid escape: '\\' then the end of the text"},
      {"\"\\x\"", "t.json:1:2: invalid escape: '\\' then 'x'"},
      {"\"\\U0041\"", "t.json:1:2: invalid escape: '\\' then 'U0041'"},
      {"\"\\u12\"", "t.json:1:2: expected 4 hex digits after '\\u'"},
      {"\"\\u12g4\"", "t.json:1:2: expected 4 hex digits after '\\u'"},
      {"\"a\nb\"", "t.json:1:3: raw control character (byte 0x0a) in a "
                   "string: write it as an escape"},
      {"\"a\tb\"", "t.json:1:3: raw control character (byte 0x09) in a "
                   "string: write it as an escape"},
      {"\"\\ud800\"", "t.json:1:2: lone surrogate '\\ud800' (a high "
                      "surrogate must be followed by a low one)"},
      {"\"\\ud800\\u0041\"", "t.json:1:2: lone surrogate '\\ud800' (a high "
                             "surrogate must be followed by a low one)"},
      {"\"\\ud800\\ud800\"", "t.json:1:2: lone surrogate '\\ud800' (a high "
                             "surrogate must be followed by a low one)"},
      {"\"x\\udc00\"", "t.json:1:3: lone surrogate '\\udc00' (a low "
                       "surrogate must follow a high one)"},
      {"\"\\u0000\"", "t.json:1:2: '\\u0000' in a string (strings here end "
                      "at NUL)"},
      {"\"\xff\"", "t.json:1:2: ill-formed UTF-8 (byte 0xff) in a string"},
      {"\"\xc0\xaf\"", "t.json:1:2: ill-formed UTF-8 (byte 0xc0) in a "
                       "string"},
      {"\"\xed\xa0\x80\"", "t.json:1:2: ill-formed UTF-8 (byte 0xed) in a "
                           "string"},
      {"\"ab\xe2\x82\"", "t.json:1:4: ill-formed UTF-8 (byte 0xe2) in a "
                         "string"},
      {"\"ab\xe2\x82", "t.json:1:4: ill-formed UTF-8 (byte 0xe2) in a "
                       "string"},
      /* Bytes outside strings. */
      {"\xef\xbb\xbf{}", "t.json:1:1: expected a value, found byte 0xef"},
      {"[1,\x01]", "t.json:1:4: expected a value, found byte 0x01"},
      /* On a later line: the line and the column in it. */
      {"{\n  \"a\": 1,\n  \"b\": [true, fals]\n}",
       "t.json:3:15: expected a value, found 'fals'"},
      {"{\r\n\"a\":x}", "t.json:2:5: expected a value, found 'x'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    refused(cases[i].text, cases[i].want);
  /* A NUL byte in the text is a byte like another. */
  refused_n("[1,\0]", 5, "t.json:1:4: expected a value, found byte 0x00");
  refused_n("\"a\0\"", 4, "t.json:1:3: raw control character (byte 0x00) "
                          "in a string: write it as an escape");
  refused_n("1\0", 2, "t.json:1:2: expected the end of the text after the "
                      "value, found byte 0x00");
  /* Only len bytes are read. */
  refused_n("[1]", 2, "t.json:1:3: expected ',' or ']' after an item, "
                      "found the end of the text");
  /* No name: "<string>"; no error struct: the status alone. */
  ovl__json *v = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl__json_parse("[", 1, NULL, &v, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "<string>:1:2: expected a value, found the end "
                            "of the text");
  ck_assert_int_eq(ovl__json_parse("[", 1, "t", &v, NULL), OVL_EINVAL);
  ck_assert_ptr_null(v);
  ck_assert_int_eq(ovl__json_parse(NULL, 0, "t", &v, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl__json_parse(NULL, 1, "t", &v, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl__json_parse: text is NULL");
  ck_assert_int_eq(ovl__json_parse("1", 1, "t", NULL, &err), OVL_EINVAL);
}
END_TEST

/* Every prefix of a document (but the whole) is refused, every one
 * without a crash or a leak. */
START_TEST(every_prefix_refused) {
  const char *text = "{\"a\": [1, -2.5e-3, true, false, null, "
                     "\"x\\u00e9\\ud834\\udd1e\\n\"], \"b\": {\"c\": {}}}";
  size_t len = strlen(text);
  for (size_t n = 0; n < len; n++) {
    ovl__json *v = NULL;
    ovl_error err = {0};
    ck_assert_int_eq(ovl__json_parse(text, n, "t.json", &v, &err),
                     OVL_EINVAL);
    ck_assert_ptr_null(v);
    ck_assert(strncmp(err.msg, "t.json:1:", 9) == 0);
  }
}
END_TEST

START_TEST(get) {
  ovl__json *v = parse_ok("{\"a\": 1, \"b\": [2], \"\": 3}");
  const ovl__json *b = ovl__json_get(v, "b");
  ck_assert(b != NULL && b->type == OVL__J_ARR);
  ck_assert(ovl__json_get(v, "")->num == 3.0);
  ck_assert_ptr_null(ovl__json_get(v, "c"));
  ck_assert_ptr_null(ovl__json_get(v, "A"));
  ck_assert_ptr_null(ovl__json_get(b, "a"));
  ck_assert_ptr_null(ovl__json_get(&b->items[0], "a"));
  ck_assert_ptr_null(ovl__json_get(NULL, "a"));
  ck_assert_ptr_null(ovl__json_get(v, NULL));
  ovl__json_free(v);
}
END_TEST

/* A temporary file holding `text` (len bytes); its path into path. */
static void temp_file(char path[64], const char *text, size_t len) {
  int fd;
  strcpy(path, "/tmp/ovl-json-XXXXXX");
  fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
  close(fd);
}

START_TEST(load_files) {
  char path[64], want[256];
  ovl__json *v = (ovl__json *)1;
  ovl_error err = {0};
  const char *text = "{\"machine\": {\"name\": \"h200\", \"gpus\": 8}}\n";

  ck_assert_int_eq(ovl__json_load("/nonexistent/m.json", &v, &err), OVL_EIO);
  ck_assert_ptr_null(v);
  ck_assert_str_eq(err.msg, "/nonexistent/m.json: No such file or directory");
  ck_assert_int_eq(ovl__json_load("/tmp", &v, &err), OVL_EIO);
  ck_assert_str_eq(err.msg, "/tmp: Is a directory");

  temp_file(path, text, strlen(text));
  ck_assert_int_eq(ovl__json_load(path, &v, &err), OVL_OK);
  const ovl__json *m = ovl__json_get(v, "machine");
  ck_assert_str_eq(ovl__json_get(m, "name")->str, "h200");
  ck_assert(ovl__json_get(m, "gpus")->num == 8.0);
  ck_assert(ovl__json_get(m, "gpus")->col == 38);
  ovl__json_free(v);
  unlink(path);

  /* Its errors are named by the path. */
  temp_file(path, "{\n  \"gpus\": 8,\n}\n", 17);
  ck_assert_int_eq(ovl__json_load(path, &v, &err), OVL_EINVAL);
  ck_assert_ptr_null(v);
  snprintf(want, sizeof want, "%s:3:1: trailing comma before '}'", path);
  ck_assert_str_eq(err.msg, want);
  unlink(path);

  /* Empty. */
  temp_file(path, "", 0);
  ck_assert_int_eq(ovl__json_load(path, &v, &err), OVL_EINVAL);
  snprintf(want, sizeof want,
           "%s:1:1: expected a value, found the end of the text", path);
  ck_assert_str_eq(err.msg, want);
  unlink(path);

  /* 64 MiB and one byte (a sparse file: nothing is written), and 64 MiB
   * of spaces after a value, which is read. */
  temp_file(path, "", 0);
  ck_assert_int_eq(truncate(path, (64 << 20) + 1), 0);
  ck_assert_int_eq(ovl__json_load(path, &v, &err), OVL_EINVAL);
  snprintf(want, sizeof want, "%s: larger than 64 MiB", path);
  ck_assert_str_eq(err.msg, want);
  char *big = malloc(64 << 20);
  ck_assert_ptr_nonnull(big);
  memset(big, ' ', 64 << 20);
  big[0] = '7';
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(big, 1, 64 << 20, f), 64 << 20);
  fclose(f);
  free(big);
  ck_assert_int_eq(ovl__json_load(path, &v, &err), OVL_OK);
  ck_assert(v->type == OVL__J_NUM && v->num == 7.0);
  ovl__json_free(v);
  unlink(path);
  ck_assert_int_eq(ovl__json_load(NULL, &v, &err), OVL_EINVAL);
}
END_TEST

/* What the library writes as a JSON string, the reader reads back: the
 * same text where it was valid UTF-8 without NUL (the writer replaces
 * what is not), and a string always. */
START_TEST(reads_what_the_library_writes) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  unsigned char in[64];
  for (int round = 0; round < 20000; round++) {
    size_t n = (size_t)(round % 63);
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      in[i] = (unsigned char)(x % 3 == 0 ? 1 + x % 0x7f : 0x80 + x % 0x80);
    }
    in[n] = '\0';
    ovl__sbuf b = {0};
    ovl__json *v = NULL;
    ovl_error err = {0};
    ovl__sb_json_str(&b, (const char *)in);
    if (b.fail || ovl__json_parse(b.s, b.len, "w", &v, &err) != OVL_OK ||
        v->type != OVL__J_STR)
      ck_abort_msg("round %d: %s", round, err.msg);
    if (tu_utf8_valid(in) && strcmp(v->str, (const char *)in) != 0)
      ck_abort_msg("round %d: read back otherwise", round);
    ovl__json_free(v);
    free(b.s);
  }
}
END_TEST

static Suite *json_suite(void) {
  Suite *s = suite_create("json");
  TCase *tc = tcase_create("read");
  tcase_add_test(tc, every_type);
  tcase_add_test(tc, numbers);
  tcase_add_test(tc, nesting_and_positions);
  tcase_add_test(tc, string_escapes);
  tcase_add_test(tc, get);
  tcase_add_test(tc, reads_what_the_library_writes);
  suite_add_tcase(s, tc);
  tc = tcase_create("refuse");
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, every_prefix_refused);
  suite_add_tcase(s, tc);
  tc = tcase_create("load");
  /* It reads 64 MiB: seconds under ThreadSanitizer or valgrind. */
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, load_files);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(json_suite()); }
