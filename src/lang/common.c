/*
 * What the language's steps share (lang/lang.h): a hash map of names,
 * growable arrays, name lists, the text of values, and diagnostics.
 *
 * Float values are written with printf and read back with strtod, which
 * assume LC_NUMERIC is "C" (the default of every program that does not
 * call setlocale).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"

/* ------------------------------------------------------------------ */
/* Name tables and growable arrays                                     */
/* ------------------------------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

int64_t *ovl__map_find(const map *m, const char *key, size_t len) {
  if (m->cap == 0)
    return NULL;
  uint64_t h = hash_bytes(key, len);
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    map_entry *e = &m->e[i];
    if (e->key == NULL)
      return NULL;
    if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
      return &e->val;
  }
}

static void map_insert(map_entry *e, size_t cap, const map_entry *ent) {
  size_t i = ent->hash & (cap - 1);
  while (e[i].key != NULL)
    i = (i + 1) & (cap - 1);
  e[i] = *ent;
}

bool ovl__map_put(map *m, const char *key, size_t len, int64_t val) {
  if (2 * (m->n + 1) > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    map_entry *e = calloc(cap, sizeof *e);
    if (e == NULL)
      return false;
    for (size_t i = 0; i < m->cap; i++)
      if (m->e[i].key != NULL)
        map_insert(e, cap, &m->e[i]);
    free(m->e);
    m->e = e;
    m->cap = cap;
  }
  map_entry ent = {key, len, hash_bytes(key, len), val};
  map_insert(m->e, m->cap, &ent);
  m->n++;
  return true;
}

void *ovl__grow(void *ptr, size_t *cap, size_t n, size_t size) {
  size_t c = *cap;
  void *p;
  if (n <= c)
    return ptr;
  if (c == 0)
    c = 16;
  while (c < n) {
    if (c > SIZE_MAX / 2)
      return NULL;
    c *= 2;
  }
  if (c > SIZE_MAX / size)
    return NULL;
  p = realloc(ptr, c * size);
  if (p != NULL)
    *cap = c;
  return p;
}

void *ovl__shrink(void *ptr, size_t n, size_t size) {
  void *p;
  if (n == 0) {
    free(ptr);
    return NULL;
  }
  p = realloc(ptr, n * size);
  return p != NULL ? p : ptr;
}

char *ovl__strndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p != NULL) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

bool ovl__names_add(name_list *l, const name *nm) {
  void *p = ovl__grow(l->names, &l->cap, l->n + 1, sizeof *l->names);
  if (p == NULL)
    return false;
  l->names = p;
  if (!ovl__map_put(&l->index, nm->s, nm->n, (int64_t)l->n))
    return false;
  l->names[l->n++] = *nm;
  return true;
}

void ovl__names_free(name_list *l) {
  free(l->names);
  free(l->index.e);
  memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/* The shortest "%.*g" that reads back as x, always with a '.' or an
 * exponent so that it reads back as a float. */
static void fmt_double(double x, char *buf, size_t size) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, x);
    if (strtod(buf, NULL) == x)
      break;
  }
  if (strpbrk(buf, ".eEn") == NULL && strlen(buf) + 3 <= size)
    strcat(buf, ".0");
}

const char *ovl__scalar_text(const scalar *v, char *buf, size_t size) {
  switch (v->kind) {
  case V_INT:
    snprintf(buf, size, "%lld", (long long)v->i);
    break;
  case V_FLOAT:
    fmt_double(v->f, buf, size);
    break;
  case V_BOOL:
    snprintf(buf, size, "%s", v->b ? "true" : "false");
    break;
  case V_NAME:
    snprintf(buf, size, "%.*s", (int)v->n, v->s);
    break;
  case V_LIST:
    snprintf(buf, size, "a list");
    break;
  case V_EXPR:
  case V_RANGE:
    snprintf(buf, size, "an expression");
    break;
  case V_OP:
    snprintf(buf, size, "%c", v->i == OP_NEG ? '-' : (char)v->i);
    break;
  }
  return buf;
}

const char *ovl__one_line(const char *s, size_t n, char *buf, size_t size) {
  size_t k = 0;
  bool blank = false, cut = false;
  for (size_t i = 0; i < n && !cut; i++) {
    if (s[i] == '#') {
      while (i + 1 < n && s[i + 1] != '\n')
        i++;
      blank = true;
    } else if (is_blank((unsigned char)s[i]) || s[i] == '\n') {
      blank = true;
    } else if (k + (blank && k > 0) + 1 >= size) {
      cut = true;
    } else {
      if (blank && k > 0)
        buf[k++] = ' ';
      blank = false;
      buf[k++] = s[i];
    }
  }
  if (cut) {
    if (k > size - 4)
      k = size - 4;
    strcpy(buf + k, "...");
  } else {
    buf[k] = '\0';
  }
  return buf;
}

const char *ovl__scalar_desc(const scalar *v, char *buf, size_t size) {
  if (v->kind == V_NAME) {
    snprintf(buf, size, "'%.*s'", (int)v->n, v->s);
    return buf;
  }
  return ovl__scalar_text(v, buf, size);
}

bool ovl__name_eq(const char *s, size_t n, const char *word) {
  return strlen(word) == n && memcmp(s, word, n) == 0;
}

bool ovl__is_reserved(const char *s, size_t n) {
  return ovl__name_eq(s, n, "true") || ovl__name_eq(s, n, "false") ||
         ovl__name_eq(s, n, "param") || ovl__name_eq(s, n, "repeat") ||
         ovl__name_eq(s, n, "group") || ovl__name_eq(s, n, "rank") ||
         ovl__name_eq(s, n, "nranks");
}

/* ------------------------------------------------------------------ */
/* Diagnostics                                                         */
/* ------------------------------------------------------------------ */

ovl_status ovl__lang_err(ovl_error *err, const char *filename, int line,
                         int col, const char *fmt, ...) {
  char msg[OVL_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ovl__err(err, OVL_EPARSE, "%s:%d:%d: %s", filename, line, col, msg);
}

ovl_status ovl__lang_nomem(ovl_error *err, const char *filename) {
  return ovl__err(err, OVL_ENOMEM, "%s: out of memory parsing the schedule",
                  filename);
}

ovl_status ovl__check_count(ovl_error *err, const char *filename,
                            const scalar *count, const define *from) {
  char buf[64], fbuf[DEFINE_FROM_SIZE];
  if (count->kind != V_INT)
    return ovl__lang_err(err, filename, count->line, count->col,
                         "repeat count must be an int or an int param, got "
                         "%s%s",
                         ovl__scalar_desc(count, buf, sizeof buf),
                         ovl__from_define(from, fbuf, sizeof fbuf));
  if (count->i < 1)
    return ovl__lang_err(err, filename, count->line, count->col,
                         "repeat count must be >= 1, got %lld%s",
                         (long long)count->i,
                         ovl__from_define(from, fbuf, sizeof fbuf));
  return OVL_OK;
}

const char *ovl__from_define(const define *from, char *buf, size_t size) {
  if (from == NULL)
    buf[0] = '\0';
  else
    snprintf(buf, size, " (from -D %s)", from->raw);
  return buf;
}
