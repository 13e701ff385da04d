/*
 * -D NAME=VALUE (lang/lang.h): the values that override params' defaults
 * when a schedule is bound, and the check that each names a param.
 *
 * A define comes from the command line, so it may hold any byte: messages
 * quote it escaped, on one line, and cut long ones short.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"

/* How much of a -D a message quotes, and room for that much escaped (each
 * byte at most 4 characters) with "..." after it. */
#define DEFINE_QUOTE_MAX 120
#define DEFINE_QUOTE_SIZE (4 * DEFINE_QUOTE_MAX + 4)

/* One byte of a command-line argument as a message shows it: printable
 * ASCII as itself, anything else escaped (\n, \t, \r, \\, \xNN). A -D may
 * hold any byte, and a message must stay on one line. */
static const char *escape_byte(unsigned char c, char buf[5]) {
  const char *e = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                  : c == '\r' ? "\\r" : NULL;
  if (e != NULL)
    snprintf(buf, 5, "%s", e);
  else if (c >= 0x20 && c < 0x7f)
    snprintf(buf, 5, "%c", c);
  else
    snprintf(buf, 5, "\\x%02x", c);
  return buf;
}

/* The first n bytes of s, escaped byte by byte; past DEFINE_QUOTE_MAX
 * bytes, "..." instead of the rest. buf holds DEFINE_QUOTE_SIZE. */
static const char *escape_text(const char *s, size_t n, char *buf) {
  char one[5];
  buf[0] = '\0';
  for (size_t i = 0; i < n && i < DEFINE_QUOTE_MAX; i++)
    strcat(buf, escape_byte((unsigned char)s[i], one));
  if (n > DEFINE_QUOTE_MAX)
    strcat(buf, "...");
  return buf;
}

/* The value of a -D as a scalar: exactly one token, an int, a float, true,
 * false or a name. The lexer alone skips blanks and takes '#' for the start
 * of a comment, so "5#x" and "5\t" would read as 5: anything before or
 * after the token is an error here, as a second token is. */
static ovl_status define_value(const char *raw, const char *val, scalar *v,
                               ovl_error *err) {
  char shown[DEFINE_QUOTE_SIZE], found[5];
  size_t len = strlen(val), at = 0;
  lexer lx;
  token t = {.type = T_EOF};
  escape_text(raw, strlen(raw), shown);
  if (len == 0)
    return ovl__err(err, OVL_EPARSE, "-D %s: expected a value after '='",
                    shown);
  ovl__lex_init(&lx, val, len);
  if (!is_blank((unsigned char)val[0]) && val[0] != '#' && val[0] != '\n') {
    if (!ovl__lex_next(&lx, &t))
      return ovl__err(err, OVL_EPARSE, "-D %s: %s", shown, lx.err_msg);
    if (t.type == T_INT || t.type == T_FLOAT || t.type == T_IDENT)
      at = t.n; /* a value token: what follows it is the error, if any */
  }
  if (at == 0 || at < len)
    return ovl__err(err, OVL_EPARSE,
                    "-D %s: the value must be one number, bool or name "
                    "(found '%s' at column %zu)",
                    shown, escape_byte((unsigned char)val[at], found), at + 1);
  memset(v, 0, sizeof *v);
  if (t.type == T_INT) {
    v->kind = V_INT;
    v->i = t.i;
  } else if (t.type == T_FLOAT) {
    v->kind = V_FLOAT;
    v->f = t.f;
  } else if (ovl__tok_is(&t, T_IDENT, "true") ||
             ovl__tok_is(&t, T_IDENT, "false")) {
    v->kind = V_BOOL;
    v->b = ovl__tok_is(&t, T_IDENT, "true");
  } else {
    v->kind = V_NAME;
    v->s = t.s;
    v->n = (uint32_t)t.n; /* at most MAX_IDENT */
  }
  return OVL_OK;
}

ovl_status ovl__defines_parse(const char *const *raws, size_t n,
                              const char *filename, defines *out,
                              ovl_error *err) {
  char shown[DEFINE_QUOTE_SIZE], nm[DEFINE_QUOTE_SIZE];
  memset(out, 0, sizeof *out);
  if (n == 0)
    return OVL_OK;
  if (raws == NULL)
    return ovl__err(err, OVL_EINVAL, "defines is NULL");
  if ((out->d = calloc(n, sizeof *out->d)) == NULL)
    return ovl__lang_nomem(err, filename);
  for (size_t i = 0; i < n; i++) {
    const char *raw = raws[i], *eq;
    define *d = &out->d[out->n];
    ovl_status st;
    if (raw == NULL)
      return ovl__err(err, OVL_EINVAL, "define %zu is NULL", i);
    if ((eq = strchr(raw, '=')) == NULL)
      return ovl__err(err, OVL_EPARSE, "-D %s: expected NAME=VALUE",
                      escape_text(raw, strlen(raw), shown));
    d->raw = raw;
    d->name = raw;
    d->n = (size_t)(eq - raw);
    bool ok = d->n > 0 && d->n <= MAX_IDENT && is_alpha(raw[0]);
    for (size_t k = 0; ok && k < d->n; k++)
      ok = is_alnum(raw[k]);
    if (!ok)
      return ovl__err(err, OVL_EPARSE, "-D %s: bad param name '%s'",
                      escape_text(raw, strlen(raw), shown),
                      escape_text(raw, d->n, nm));
    if ((st = define_value(raw, eq + 1, &d->val, err)) != OVL_OK)
      return st;
    out->n++;
  }
  return OVL_OK;
}

void ovl__defines_free(defines *d) {
  free(d->d);
  memset(d, 0, sizeof *d);
}

const define *ovl__define_find(const defines *d, const char *s, size_t n) {
  for (size_t i = d->n; i-- > 0;) /* the last -D of a name wins */
    if (d->d[i].n == n && memcmp(d->d[i].name, s, n) == 0)
      return &d->d[i];
  return NULL;
}

ovl_status ovl__defines_check(const defines *d, const name_list *params,
                              const char *filename, ovl_error *err) {
  char list[512];
  size_t k = 0;
  list[0] = '\0';
  for (size_t i = 0; i < d->n; i++) {
    const define *def = &d->d[i];
    if (ovl__map_find(&params->index, def->name, def->n) != NULL)
      continue;
    for (size_t j = 0; j < params->n && k < sizeof list; j++)
      k += (size_t)snprintf(list + k, sizeof list - k, "%s%.*s",
                            j ? ", " : "", (int)params->names[j].n,
                            params->names[j].s);
    if (params->n == 0)
      return ovl__err(err, OVL_EPARSE,
                      "-D %s: no such param in %s (it declares no params)",
                      def->raw, filename);
    return ovl__err(err, OVL_EPARSE,
                    "-D %s: no such param in %s (params: %s)", def->raw,
                    filename, list);
  }
  return OVL_OK;
}

/* ovl_program_parse reports a -D that names no param before the
 * schedule's errors (it is a mistake in the command, and a schedule error
 * may hide it), as it always has: this scan finds the params without
 * parsing. Lexical errors end it quietly: parsing reports them. */
ovl_status ovl__params_scan(const char *text, size_t len,
                            const char *filename, name_list *out,
                            bool *complete, ovl_error *err) {
  lexer lx;
  token t, first;
  size_t k = 0; /* index of t in its statement */
  *complete = false;
  ovl__lex_init(&lx, text, len);
  memset(&first, 0, sizeof first);
  while (ovl__lex_next(&lx, &t)) {
    if (t.type == T_EOF) {
      *complete = true;
      return OVL_OK;
    }
    if (t.type == T_NEWLINE) {
      k = 0;
      continue;
    }
    if (k++ == 0)
      first = t;
    if (k == 2 && t.type == T_IDENT && ovl__tok_is(&first, T_IDENT, "param") &&
        ovl__map_find(&out->index, t.s, t.n) == NULL) {
      name nm = {t.s, t.n, t.line, t.col};
      if (!ovl__names_add(out, &nm))
        return ovl__lang_nomem(err, filename);
    }
  }
  return OVL_OK;
}
