/*
 * libFuzzer target: the strict JSON reader (base/json_read.h, `make fuzz`).
 *
 * The input is the text, given with its exact length (NUL bytes included).
 * The target aborts when the reader breaks a promise:
 *   - it gives a status other than OVL_OK, OVL_EINVAL or OVL_ENOMEM, or a
 *     tree with a failure, or none with success;
 *   - a refusal's message does not start with "fuzz.json:LINE:COL: " (or
 *     "fuzz.json: " for memory) with LINE and COL within the text;
 *   - a tree holds a string that is not UTF-8 or has a NUL, a number that
 *     is not finite, a value placed outside the text, an object with two
 *     members of one name, or nests deeper than 64;
 *   - the tree written back as JSON (the library's string writer, numbers
 *     with 17 digits) does not read back as the same tree.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_read.h"
#include "base/json_str.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int lines, last_cols; /* of the text: its lines, its longest line */

static void check(bool ok) {
  if (!ok)
    abort();
}

static void check_tree(const ovl__json *v, int depth) {
  check(depth <= 64);
  check(v->line >= 1 && v->line <= lines && v->col >= 1 &&
        v->col <= last_cols);
  switch (v->type) {
  case OVL__J_STR:
    for (const unsigned char *s = (const unsigned char *)v->str; *s;) {
      size_t bad, n = ovl__utf8_len(s, &bad);
      check(n > 0);
      s += n;
    }
    break;
  case OVL__J_NUM:
    check(isfinite(v->num));
    break;
  case OVL__J_ARR:
  case OVL__J_OBJ:
    check(v->n == 0 || v->items != NULL);
    for (size_t i = 0; i < v->n; i++) {
      if (v->type == OVL__J_OBJ)
        check(ovl__json_get(v, v->keys[i]) == &v->items[i]);
      check_tree(&v->items[i], depth + (v->items[i].type >= OVL__J_ARR));
    }
    break;
  default:
    check(v->type == OVL__J_NULL || v->type == OVL__J_BOOL);
  }
}

/* The tree as JSON text. */
static void write_tree(ovl__sbuf *b, const ovl__json *v) {
  switch (v->type) {
  case OVL__J_NULL:
    ovl__sb_puts(b, "null");
    break;
  case OVL__J_BOOL:
    ovl__sb_puts(b, v->b ? "true" : "false");
    break;
  case OVL__J_NUM:
    ovl__sb_printf(b, "%.17g", v->num);
    break;
  case OVL__J_STR:
    ovl__sb_json_str(b, v->str);
    break;
  default:
    ovl__sb_puts(b, v->type == OVL__J_ARR ? "[" : "{");
    for (size_t i = 0; i < v->n; i++) {
      if (i > 0)
        ovl__sb_puts(b, ",\n");
      if (v->type == OVL__J_OBJ) {
        ovl__sb_json_str(b, v->keys[i]);
        ovl__sb_puts(b, ": ");
      }
      write_tree(b, &v->items[i]);
    }
    ovl__sb_puts(b, v->type == OVL__J_ARR ? "]" : "}");
  }
}

static bool same(const ovl__json *a, const ovl__json *b) {
  if (a->type != b->type || a->n != b->n)
    return false;
  if (a->type == OVL__J_BOOL)
    return a->b == b->b;
  if (a->type == OVL__J_NUM)
    return memcmp(&a->num, &b->num, sizeof a->num) == 0; /* -0 too */
  if (a->type == OVL__J_STR)
    return strcmp(a->str, b->str) == 0;
  for (size_t i = 0; i < a->n; i++)
    if ((a->type == OVL__J_OBJ && strcmp(a->keys[i], b->keys[i]) != 0) ||
        !same(&a->items[i], &b->items[i]))
      return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  ovl__json *v = (ovl__json *)1, *again = NULL;
  ovl_error err = {0};
  ovl_status st = ovl__json_parse(text, size, "fuzz.json", &v, &err);
  int line, col, col_now = 1;

  lines = 1, last_cols = 1;
  for (size_t i = 0; i < size; i++, col_now++) {
    if (col_now > last_cols)
      last_cols = col_now;
    if (text[i] == '\n')
      lines++, col_now = 0;
  }
  if (col_now > last_cols)
    last_cols = col_now; /* the column just past the end */
  if (st != OVL_OK) {
    check(v == NULL && err.status == st);
    if (st == OVL_ENOMEM) {
      check(strncmp(err.msg, "fuzz.json: ", 11) == 0);
      return 0;
    }
    check(st == OVL_EINVAL);
    check(sscanf(err.msg, "fuzz.json:%d:%d: ", &line, &col) == 2);
    check(line >= 1 && line <= lines && col >= 1 && col <= last_cols);
    return 0;
  }
  check(v != NULL);
  check_tree(v, v->type >= OVL__J_ARR);

  ovl__sbuf b = {0};
  write_tree(&b, v);
  if (!b.fail) {
    st = ovl__json_parse(b.s, b.len, "again.json", &again, &err);
    check(st == OVL_OK || st == OVL_ENOMEM);
    check(st != OVL_OK || same(v, again));
    ovl__json_free(again);
  }
  free(b.s);
  ovl__json_free(v);
  return 0;
}
