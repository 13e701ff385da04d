/*
 * The lexer (lang/lex.h): bytes -> tokens with their line and column.
 * Numbers are range-checked here (int64, finite float64), identifiers and
 * numbers are at most MAX_IDENT bytes, and a newline inside '(' or '['
 * does not end a statement.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lex.h"
void ovl__lex_init(lexer *lx, const char *text, size_t len) {
  memset(lx, 0, sizeof *lx);
  lx->p = text;
  lx->end = text + len;
  lx->line_start = text;
  lx->line = 1;
}

static int lex_col(const lexer *lx, const char *at) {
  return (int)(at - lx->line_start) + 1;
}

static bool lex_fail(lexer *lx, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool lex_fail(lexer *lx, const char *at, const char *fmt, ...) {
  va_list ap;
  lx->err_line = lx->line;
  lx->err_col = lex_col(lx, at);
  va_start(ap, fmt);
  vsnprintf(lx->err_msg, sizeof lx->err_msg, fmt, ap);
  va_end(ap);
  return false;
}


/* An integer literal (optional '-', then digits), range-checked. */
static bool lex_int(lexer *lx, token *t) {
  const char *q = t->s;
  bool neg = *q == '-';
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  uint64_t acc = 0;
  if (neg)
    q++;
  for (; q < t->s + t->n; q++) {
    uint64_t d = (uint64_t)(*q - '0');
    if (acc > (limit - d) / 10)
      return lex_fail(lx, t->s, "integer %.*s%s out of range (int64)",
                      quote_len(t->n), t->s, quote_more(t->n));
    acc = acc * 10 + d;
  }
  t->type = T_INT;
  if (!neg)
    t->i = (int64_t)acc;
  else if (acc == (uint64_t)INT64_MAX + 1)
    t->i = INT64_MIN;
  else
    t->i = -(int64_t)acc;
  return true;
}

/* A number: -?digits[.digits][e[+-]digits], or one starting with '.'. */
static bool lex_number(lexer *lx, token *t) {
  const char *p = lx->p, *end = lx->end;
  bool is_float = false;
  size_t mant = 0;
  if (*p == '-')
    p++;
  for (; p < end && is_digit(*p); p++)
    mant++;
  if (p < end && *p == '.') {
    is_float = true;
    for (p++; p < end && is_digit(*p); p++)
      mant++;
  }
  if (mant > 0 && p < end && (*p == 'e' || *p == 'E')) {
    const char *q = p + 1;
    if (q < end && (*q == '+' || *q == '-'))
      q++;
    if (q < end && is_digit(*q)) {
      is_float = true;
      for (p = q; p < end && is_digit(*p); p++)
        ;
    }
  }
  if (mant == 0 || (p < end && (is_alnum(*p) || *p == '.'))) {
    while (p < end && (is_alnum(*p) || *p == '.'))
      p++;
    t->n = (size_t)(p - t->s);
    return lex_fail(lx, t->s, "malformed number '%.*s%s'", quote_len(t->n),
                    t->s, quote_more(t->n));
  }
  t->n = (size_t)(p - t->s);
  lx->p = p;
  if (t->n > MAX_IDENT)
    return lex_fail(lx, t->s, "number too long (%zu chars; max %d)", t->n,
                    MAX_IDENT);
  if (!is_float)
    return lex_int(lx, t);
  char buf[MAX_IDENT + 1];
  memcpy(buf, t->s, t->n);
  buf[t->n] = '\0';
  t->type = T_FLOAT;
  t->f = strtod(buf, NULL);
  if (!isfinite(t->f))
    return lex_fail(lx, t->s, "number %.*s%s out of range (float64)",
                    quote_len(t->n), t->s, quote_more(t->n));
  return true;
}

bool ovl__lex_next(lexer *lx, token *t) {
  const char *p;
  for (;;) {
    if (lx->p == lx->end)
      break;
    int ch = (unsigned char)*lx->p;
    if (is_blank(ch)) {
      lx->p++;
    } else if (ch == '#') {
      while (lx->p < lx->end && *lx->p != '\n')
        lx->p++;
    } else if (ch == '\n' && lx->depth > 0) {
      lx->p++;
      lx->line++;
      lx->line_start = lx->p;
    } else {
      break;
    }
  }
  p = lx->p;
  memset(t, 0, sizeof *t);
  t->line = lx->line;
  t->col = lex_col(lx, p);
  t->s = p;
  t->n = 1;
  if (p == lx->end) {
    t->type = T_EOF;
    t->n = 0;
    return true;
  }
  int c = (unsigned char)*p;
  int c1 = p + 1 < lx->end ? (unsigned char)p[1] : 0;
  int c2 = p + 2 < lx->end ? (unsigned char)p[2] : 0;
  switch (c) {
  case '\n':
    t->type = T_NEWLINE;
    lx->p++;
    lx->line++;
    lx->line_start = lx->p;
    return true;
  case '(':
  case '[':
    t->type = c == '(' ? T_LPAREN : T_LBRACK;
    lx->depth++;
    lx->p++;
    return true;
  case ')':
  case ']':
    t->type = c == ')' ? T_RPAREN : T_RBRACK;
    if (lx->depth > 0)
      lx->depth--;
    lx->p++;
    return true;
  case '{':
    t->type = T_LBRACE;
    lx->p++;
    return true;
  case '}':
    t->type = T_RBRACE;
    lx->p++;
    return true;
  case ',':
    t->type = T_COMMA;
    lx->p++;
    return true;
  case '=':
    t->type = T_EQUALS;
    lx->p++;
    return true;
  case '+':
    t->type = T_PLUS;
    lx->p++;
    return true;
  case '*':
    t->type = T_STAR;
    lx->p++;
    return true;
  case '/':
    t->type = T_SLASH;
    lx->p++;
    return true;
  case '%':
    t->type = T_PERCENT;
    lx->p++;
    return true;
  case ':':
    t->type = T_COLON;
    lx->p++;
    return true;
  default:
    break;
  }
  if (is_alpha(c)) {
    const char *q = p;
    while (q < lx->end && is_alnum(*q))
      q++;
    t->type = T_IDENT;
    t->n = (size_t)(q - p);
    if (t->n > MAX_IDENT)
      return lex_fail(lx, p, "identifier too long (%zu chars; max %d)", t->n,
                      MAX_IDENT);
    lx->p = q;
    return true;
  }
  if (is_digit(c) || (c == '.' && is_digit(c1)) ||
      (c == '-' && (is_digit(c1) || (c1 == '.' && is_digit(c2)))))
    return lex_number(lx, t);
  if (c == '-') {
    t->type = T_MINUS;
    lx->p++;
    return true;
  }
  if (c > 0x20 && c < 0x7f)
    return lex_fail(lx, p, "unexpected character '%c'", c);
  return lex_fail(lx, p, "unexpected byte 0x%02x", (unsigned)c);
}

const char *ovl__tok_desc(const token *t, char *buf, size_t size) {
  if (t->type == T_EOF)
    return "end of file";
  if (t->type == T_NEWLINE)
    return "end of line";
  snprintf(buf, size, "'%.*s%s'", quote_len(t->n), t->s, quote_more(t->n));
  return buf;
}

bool ovl__tok_is(const token *t, tok_type type, const char *word) {
  return t->type == type && strlen(word) == t->n &&
         memcmp(t->s, word, t->n) == 0;
}
