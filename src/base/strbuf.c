/* A growing string, for the text the library hands back to its callers
 * (race reports, traces, pictures): see ovl__sbuf in base/base.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/json_str.h"

bool ovl__sb_reserve(ovl__sbuf *b, size_t more) {
  size_t cap;
  char *s;
  if (b->fail)
    return false;
  if (b->len + more + 1 <= b->cap)
    return true;
  cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more + 1)
    cap *= 2;
  s = realloc(b->s, cap);
  if (s == NULL) {
    b->fail = true;
    return false;
  }
  b->s = s;
  b->cap = cap;
  return true;
}

void ovl__sb_printf(ovl__sbuf *b, const char *fmt, ...) {
  va_list ap;
  int n;
  char small[256];
  va_start(ap, fmt);
  n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->fail = true;
    return;
  }
  if (!ovl__sb_reserve(b, (size_t)n))
    return;
  if ((size_t)n < sizeof small) {
    memcpy(b->s + b->len, small, (size_t)n + 1);
  } else {
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  b->len += (size_t)n;
}

void ovl__sb_puts(ovl__sbuf *b, const char *s) {
  size_t n = strlen(s);
  if (!ovl__sb_reserve(b, n))
    return;
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

/* n bytes of s. */
static void sb_putn(ovl__sbuf *b, const char *s, size_t n) {
  if (n == 0 || !ovl__sb_reserve(b, n))
    return;
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

void ovl__sb_json_str(ovl__sbuf *b, const char *s) {
  char esc[8];
  size_t n, skip;
  ovl__sb_puts(b, "\"");
  do {
    n = ovl__json_span(s, esc, &skip);
    sb_putn(b, s, n);
    ovl__sb_puts(b, esc);
    s += n + skip;
  } while (skip > 0);
  ovl__sb_puts(b, "\"");
}

char *ovl_json_quote(const char *s) {
  ovl__sbuf b = {0};
  if (s == NULL)
    ovl__sb_puts(&b, "null");
  else
    ovl__sb_json_str(&b, s);
  if (b.fail || b.s == NULL) {
    free(b.s);
    return NULL;
  }
  return b.s;
}
