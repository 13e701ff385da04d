/*
 * The strict JSON reader (base/json_read.h): recursive descent over the
 * bytes, RFC 8259 and nothing more, every value with its line and column.
 *
 * A node is always whole enough to free: a container counts an item or
 * member before it is parsed (the item zeroed: a null, which owns
 * nothing), and a member's name is stored before its value is parsed, so
 * that a failure anywhere leaves a tree ovl__json_free can take.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json_read.h"
#include "base/json_str.h"

#define MAX_DEPTH 64
#define MAX_FILE ((size_t)64 << 20)

typedef struct {
  const char *text;
  size_t len, pos;
  const char *name;
  int line;
  size_t line_start; /* the offset of the current line's first byte */
  ovl_error *err;
} jp;

static int col_at(const jp *p, size_t at) {
  return (int)(at - p->line_start) + 1;
}

/* A message at byte `at` (on the current line: only whitespace between
 * values holds newlines). */
static ovl_status fail(jp *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ovl_status fail(jp *p, size_t at, const char *fmt, ...) {
  char msg[OVL_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ovl__err(p->err, OVL_EINVAL, "%s:%d:%d: %s", p->name, p->line,
                  col_at(p, at), msg);
}

static ovl_status nomem(jp *p) {
  return ovl__err(p->err, OVL_ENOMEM, "%s: out of memory reading JSON",
                  p->name);
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_alnum(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* What stands at byte `at`, for "found ...": a word whole ('NaN',
 * 'Infinity', 'tru'), a printable character, a byte in hex, or the end. */
static const char *found(const jp *p, size_t at, char buf[48]) {
  unsigned char c;
  size_t n = 0;
  if (at >= p->len)
    return "the end of the text";
  c = (unsigned char)p->text[at];
  if (is_alnum(c)) {
    while (at + n < p->len && n < 16 && is_alnum(p->text[at + n]))
      n++;
    snprintf(buf, 48, "'%.*s%s'", (int)n, p->text + at,
             at + n < p->len && is_alnum(p->text[at + n]) ? "..." : "");
  } else if (c == '/') {
    snprintf(buf, 48, "'/' (JSON has no comments)");
  } else if (c >= 0x20 && c < 0x7f) {
    snprintf(buf, 48, "'%c'", c);
  } else {
    snprintf(buf, 48, "byte 0x%02x", c);
  }
  return buf;
}

static int peek(const jp *p) {
  return p->pos < p->len ? (unsigned char)p->text[p->pos] : -1;
}

static void skip_ws(jp *p) {
  for (; p->pos < p->len; p->pos++) {
    char c = p->text[p->pos];
    if (c == '\n') {
      p->line++;
      p->line_start = p->pos + 1;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      break;
    }
  }
}

/* ------------------------------------------------------------------ */
/* Strings                                                             */
/* ------------------------------------------------------------------ */

/* Four hex digits at text[i..i+4) as a number, or -1. */
static long hex4(const jp *p, size_t i) {
  long v = 0;
  if (i > p->len || p->len - i < 4)
    return -1;
  for (size_t k = 0; k < 4; k++) {
    char c = p->text[i + k];
    int d = is_digit(c)              ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Code point cp as UTF-8 into dst (when not NULL); its length. */
static size_t put_utf8(char *dst, unsigned long cp) {
  static const unsigned char lead[] = {0, 0, 0xc0, 0xe0, 0xf0};
  size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  if (dst != NULL) {
    for (size_t k = n - 1; k > 0; k--, cp >>= 6)
      dst[k] = (char)(0x80 | (cp & 0x3f));
    dst[0] = (char)(lead[n] | cp);
  }
  return n;
}

/* The string whose '"' is at p->pos, checked (dst NULL) or decoded into
 * dst (a second pass, which cannot fail): *n the decoded bytes, *end the
 * offset after the closing '"'. */
static ovl_status str_scan(jp *p, char *dst, size_t *n, size_t *end) {
  const unsigned char *s = (const unsigned char *)p->text;
  size_t i = p->pos + 1, k = 0;
  char buf[48];
  for (;;) {
    if (i >= p->len)
      return fail(p, p->pos, "unterminated string");
    unsigned c = s[i];
    if (c == '"')
      break;
    if (c < 0x20)
      return fail(p, i,
                  "raw control character (byte 0x%02x) in a string: "
                  "write it as an escape",
                  c);
    if (c >= 0x80) {
      /* Well-formed UTF-8 only; ovl__utf8_len reads up to 4 bytes, or
       * stops at a 0, which the copy of a short tail ends with. */
      unsigned char tail[4] = {0};
      size_t m, bad;
      memcpy(tail, s + i, p->len - i < 4 ? p->len - i : 4);
      if ((m = ovl__utf8_len(tail, &bad)) == 0)
        return fail(p, i, "ill-formed UTF-8 (byte 0x%02x) in a string", c);
      if (dst != NULL)
        memcpy(dst + k, s + i, m);
      i += m, k += m;
      continue;
    }
    if (c != '\\') {
      if (dst != NULL)
        dst[k] = (char)c;
      i++, k++;
      continue;
    }
    /* An escape. */
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *e;
    if (i + 1 < p->len && s[i + 1] != '\0' &&
        (e = strchr(from, s[i + 1])) != NULL) {
      if (dst != NULL)
        dst[k] = to[e - from];
      i += 2, k++;
      continue;
    }
    if (i + 1 >= p->len || s[i + 1] != 'u')
      return fail(p, i, "invalid escape: '\\' then %s", found(p, i + 1, buf));
    long cp = hex4(p, i + 2), lo;
    if (cp < 0)
      return fail(p, i, "expected 4 hex digits after '\\u'");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (i + 7 < p->len && s[i + 6] == '\\' && s[i + 7] == 'u' &&
          (lo = hex4(p, i + 8)) >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i += 6;
      } else {
        return fail(p, i,
                    "lone surrogate '\\u%04lx' (a high surrogate "
                    "must be followed by a low one)",
                    (unsigned long)cp);
      }
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return fail(p, i,
                  "lone surrogate '\\u%04lx' (a low surrogate must "
                  "follow a high one)",
                  (unsigned long)cp);
    } else if (cp == 0) {
      return fail(p, i, "'\\u0000' in a string (strings here end at NUL)");
    }
    k += put_utf8(dst != NULL ? dst + k : NULL, (unsigned long)cp);
    i += 6;
  }
  *n = k;
  *end = i + 1;
  return OVL_OK;
}

/* The string at p->pos into *out (malloc'd). */
static ovl_status parse_str(jp *p, char **out) {
  size_t n, end;
  ovl_status st = str_scan(p, NULL, &n, &end);
  if (st != OVL_OK)
    return st;
  if ((*out = malloc(n + 1)) == NULL)
    return nomem(p);
  str_scan(p, *out, &n, &end);
  (*out)[n] = '\0';
  p->pos = end;
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Numbers and values                                                  */
/* ------------------------------------------------------------------ */

static size_t digits(const jp *p, size_t i) {
  while (i < p->len && is_digit(p->text[i]))
    i++;
  return i;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, then strtod. */
static ovl_status parse_num(jp *p, ovl__json *v) {
  const char *s = p->text;
  size_t i = p->pos, n;
  char buf[48], small[64], *num;
  if (s[i] == '-' && (++i >= p->len || !is_digit(s[i])))
    return fail(p, i, "expected a digit after '-', found %s", found(p, i, buf));
  if (s[i] == '0' && i + 1 < p->len && is_digit(s[i + 1]))
    return fail(p, p->pos, "a number with a leading zero");
  i = digits(p, i);
  if (i < p->len && s[i] == '.') {
    if (++i >= p->len || !is_digit(s[i]))
      return fail(p, i, "expected a digit after '.', found %s",
                  found(p, i, buf));
    i = digits(p, i);
  }
  if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
    if (++i < p->len && (s[i] == '+' || s[i] == '-'))
      i++;
    if (i >= p->len || !is_digit(s[i]))
      return fail(p, i, "expected a digit in the exponent, found %s",
                  found(p, i, buf));
    i = digits(p, i);
  }
  n = i - p->pos;
  num = n < sizeof small ? small : malloc(n + 1);
  if (num == NULL)
    return nomem(p);
  memcpy(num, s + p->pos, n);
  num[n] = '\0';
  v->num = strtod(num, NULL);
  if (num != small)
    free(num);
  if (isinf(v->num))
    return fail(p, p->pos, "number out of range (beyond a double): %.*s%s",
                n > 40 ? 40 : (int)n, s + p->pos, n > 40 ? "..." : "");
  v->type = OVL__J_NUM;
  p->pos = i;
  return OVL_OK;
}

static ovl_status parse_value(jp *p, ovl__json *v, int depth);

/* Room for one more item (and key, for an object). */
static bool grow(ovl__json *v, size_t *cap, bool keys) {
  size_t c = *cap ? 2 * *cap : 4;
  void *q;
  if (v->n < *cap)
    return true;
  if (c > SIZE_MAX / 2 / sizeof *v->items)
    return false;
  if ((q = realloc(v->items, c * sizeof *v->items)) == NULL)
    return false;
  v->items = q;
  if (keys) {
    if ((q = realloc(v->keys, c * sizeof *v->keys)) == NULL)
      return false;
    v->keys = q;
  }
  *cap = c;
  return true;
}

/* An array or an object, at its '[' or '{'. */
static ovl_status parse_seq(jp *p, ovl__json *v, int depth) {
  bool obj = p->text[p->pos] == '{';
  char close = obj ? '}' : ']', buf[48], *key = NULL;
  size_t cap = 0, at;
  ovl_status st;
  v->type = obj ? OVL__J_OBJ : OVL__J_ARR;
  p->pos++;
  skip_ws(p);
  if (peek(p) == close) {
    p->pos++;
    return OVL_OK;
  }
  for (;;) {
    if (obj) {
      if (peek(p) != '"')
        return fail(p, p->pos, "expected a member name (a string), found %s",
                    found(p, p->pos, buf));
      at = p->pos;
      if ((st = parse_str(p, &key)) != OVL_OK)
        return st;
      if (ovl__json_get(v, key) != NULL) {
        st = fail(p, at, "duplicate key '%.*s'", 200, key);
        free(key);
        return st;
      }
    }
    if (!grow(v, &cap, obj)) {
      free(key);
      return nomem(p);
    }
    memset(&v->items[v->n], 0, sizeof *v->items);
    if (obj)
      v->keys[v->n] = key, key = NULL;
    v->n++;
    if (obj) {
      skip_ws(p);
      if (peek(p) != ':')
        return fail(p, p->pos, "expected ':' after the member name, found %s",
                    found(p, p->pos, buf));
      p->pos++;
    }
    if ((st = parse_value(p, &v->items[v->n - 1], depth)) != OVL_OK)
      return st;
    skip_ws(p);
    if (peek(p) == close) {
      p->pos++;
      return OVL_OK;
    }
    if (peek(p) != ',')
      return fail(p, p->pos, "expected ',' or '%c' after %s, found %s", close,
                  obj ? "a member" : "an item", found(p, p->pos, buf));
    p->pos++;
    skip_ws(p);
    if (peek(p) == close)
      return fail(p, p->pos, "trailing comma before '%c'", close);
  }
}

/* A literal word at p->pos. */
static bool word(jp *p, const char *w) {
  size_t n = strlen(w);
  if (p->len - p->pos < n || memcmp(p->text + p->pos, w, n) != 0)
    return false;
  p->pos += n;
  return true;
}

/* The value at p->pos (after whitespace), inside `depth` containers. */
static ovl_status parse_value(jp *p, ovl__json *v, int depth) {
  char buf[48];
  int c;
  skip_ws(p);
  v->line = p->line;
  v->col = col_at(p, p->pos);
  c = peek(p);
  if ((c == '[' || c == '{') && depth >= MAX_DEPTH)
    return fail(p, p->pos, "nesting deeper than %d", MAX_DEPTH);
  if (c == '[' || c == '{')
    return parse_seq(p, v, depth + 1);
  if (c == '"') {
    v->type = OVL__J_STR;
    return parse_str(p, &v->str);
  }
  if (c == '-' || is_digit(c))
    return parse_num(p, v);
  if ((c == 't' || c == 'f') && word(p, c == 't' ? "true" : "false")) {
    v->type = OVL__J_BOOL;
    v->b = c == 't';
    return OVL_OK;
  }
  if (word(p, "null"))
    return OVL_OK;
  return fail(p, p->pos, "expected a value, found %s", found(p, p->pos, buf));
}

/* ------------------------------------------------------------------ */
/* The API                                                             */
/* ------------------------------------------------------------------ */

static void free_contents(ovl__json *v) {
  free(v->str);
  for (size_t i = 0; i < v->n; i++) {
    free_contents(&v->items[i]);
    if (v->keys != NULL)
      free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
}

void ovl__json_free(ovl__json *v) {
  if (v == NULL)
    return;
  free_contents(v);
  free(v);
}

ovl_status ovl__json_parse(const char *text, size_t len, const char *name,
                           ovl__json **out, ovl_error *err) {
  jp p = {.text = text, .len = len, .line = 1, .err = err};
  ovl__json *root;
  char buf[48];
  ovl_status st;
  p.name = name != NULL ? name : "<string>";
  if (out == NULL || (text == NULL && len > 0))
    return ovl__err(err, OVL_EINVAL, "ovl__json_parse: %s is NULL",
                    out == NULL ? "out" : "text");
  *out = NULL;
  if ((root = calloc(1, sizeof *root)) == NULL)
    return nomem(&p);
  st = parse_value(&p, root, 0);
  if (st == OVL_OK) {
    skip_ws(&p);
    if (p.pos < len)
      st = fail(&p, p.pos,
                "expected the end of the text after the value, "
                "found %s",
                found(&p, p.pos, buf));
  }
  if (st != OVL_OK) {
    ovl__json_free(root);
    return st;
  }
  *out = root;
  return OVL_OK;
}

ovl_status ovl__json_load(const char *path, ovl__json **out, ovl_error *err) {
  FILE *f;
  struct stat sb;
  char *buf = NULL, *q;
  size_t len = 0, cap = 0, n;
  ovl_status st = OVL_OK;
  bool big;
  if (out == NULL || path == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl__json_load: %s is NULL",
                    out == NULL ? "out" : "path");
  *out = NULL;
  if ((f = fopen(path, "rb")) == NULL)
    return ovl__err(err, OVL_EIO, "%s: %s", path, strerror(errno));
  /* A regular file's size is known up front; of others, the limit and one
   * byte more are read. */
  big = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
        (uint64_t)sb.st_size > MAX_FILE;
  while (!big && st == OVL_OK) {
    if (len == cap) {
      cap = cap == 0 ? 65536 : 2 * cap > MAX_FILE ? MAX_FILE + 1 : 2 * cap;
      if ((q = realloc(buf, cap)) == NULL)
        st = ovl__err(err, OVL_ENOMEM, "%s: out of memory reading it", path);
      else
        buf = q;
    } else if ((n = fread(buf + len, 1, cap - len, f)) > 0) {
      len += n;
      big = len > MAX_FILE;
    } else {
      if (ferror(f))
        st = ovl__err(err, OVL_EIO, "%s: %s", path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (st == OVL_OK && big)
    st = ovl__err(err, OVL_EINVAL, "%s: larger than 64 MiB", path);
  if (st == OVL_OK)
    st = ovl__json_parse(buf, len, path, out, err);
  free(buf);
  return st;
}

const ovl__json *ovl__json_get(const ovl__json *obj, const char *key) {
  if (obj == NULL || obj->type != OVL__J_OBJ || key == NULL)
    return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0)
      return &obj->items[i];
  return NULL;
}

const char *ovl__json_type_name(ovl__jtype t) {
  static const char *const names[] = {"null",   "true/false", "number",
                                      "string", "array",      "object"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}
