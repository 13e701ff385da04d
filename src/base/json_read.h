/*
 * A small, strict JSON reader (base/json_read.c), for the library's
 * documented config files (a machine description, a calibration profile),
 * written by the library or by hand: text -> a tree of values, each with
 * the line and column it starts at, or one message saying where and what
 * is wrong ("NAME:LINE:COL: ..."). Columns count bytes from 1, as the
 * schedule lexer's do.
 *
 * Numbers are read with strtod, which assumes LC_NUMERIC is "C" (the
 * default of every program that does not call setlocale), as the schedule
 * lexer does.
 */
#ifndef OVL_BASE_JSON_READ_H
#define OVL_BASE_JSON_READ_H

#include "base/base.h"

typedef enum {
  OVL__J_NULL,
  OVL__J_BOOL,
  OVL__J_NUM,
  OVL__J_STR,
  OVL__J_ARR,
  OVL__J_OBJ
} ovl__jtype;

typedef struct ovl__json ovl__json;
struct ovl__json {
  ovl__jtype type;
  int line, col;     /* where the value starts in the text (1-based) */
  bool b;            /* BOOL */
  double num;        /* NUM */
  char *str;         /* STR: decoded UTF-8, NUL-terminated (a \u0000 escape
                        is refused) */
  size_t n;          /* ARR: items; OBJ: members */
  ovl__json *items;  /* ARR: the items; OBJ: the member values, in file
                        order */
  char **keys;       /* OBJ: the member names, same order */
};

/* Parse text[0..len) (need not be NUL-terminated). `name` (a file name;
 * NULL: "<string>") starts every message:
 * "NAME:LINE:COL: expected ',' or '}' after a member, found 'x'". Strict
 * RFC 8259: no comments, no trailing commas, no NaN/Infinity, numbers via
 * strtod of the exact JSON number grammar (a number that overflows to inf
 * is refused), a duplicate key in one object is refused ("duplicate key
 * 'k'"), nesting deeper than 64 is refused, anything after the top value
 * but whitespace is refused. \uXXXX escapes incl. surrogate pairs to UTF-8;
 * lone surrogates refused; raw control chars in strings refused, and so is
 * ill-formed UTF-8 (the text must be UTF-8; a byte order mark too). *out
 * is the tree (free it with ovl__json_free), NULL on failure. OVL_EINVAL
 * for bad text, OVL_ENOMEM for out of memory (never leaks, never
 * crashes). */
ovl_status ovl__json_parse(const char *text, size_t len, const char *name,
                           ovl__json **out, ovl_error *err);

/* Read a whole file (at most 64 MiB; OVL_EIO with "NAME: strerror" when it
 * cannot be read; OVL_EINVAL with "NAME: larger than 64 MiB") and parse it,
 * `path` as the name. */
ovl_status ovl__json_load(const char *path, ovl__json **out, ovl_error *err);

/* The tree and everything in it; NULL does nothing. */
void ovl__json_free(ovl__json *v);

/* The member `key` of an object; NULL when absent or when obj is NULL or
 * not an object. */
const ovl__json *ovl__json_get(const ovl__json *obj, const char *key);

/* "object", "array", "string", "number", "true/false", "null" for
 * messages. */
const char *ovl__json_type_name(ovl__jtype t);

#endif /* OVL_BASE_JSON_READ_H */
