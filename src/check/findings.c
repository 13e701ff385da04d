/*
 * What the reports of the checks share (check/findings.h): the list of
 * findings, and the formatting.
 */
#include <stdlib.h>
#include <string.h>

#include "check/findings.h"

/* ------------------------------------------------------------------ */
/* The list of findings                                                */
/* ------------------------------------------------------------------ */

void ovl__flist_init(ovl__flist *l, size_t size, size_t max,
                     ovl__flist_eq eq) {
  memset(l, 0, sizeof *l);
  l->size = size;
  l->max = max;
  l->eq = eq;
}

/* A table of `ncap` slots (a power of two) over the records listed. */
static bool table_grow(ovl__flist *l, size_t ncap) {
  uint32_t *t = calloc(ncap, sizeof *t);
  if (t == NULL)
    return false;
  for (size_t i = 0; i < l->n; i++) {
    size_t j = l->hash[i] & (ncap - 1);
    while (t[j] != 0)
      j = (j + 1) & (ncap - 1);
    t[j] = (uint32_t)(i + 1);
  }
  free(l->table);
  l->table = t;
  l->tcap = ncap;
  return true;
}

ovl__flist_got ovl__flist_add(ovl__flist *l, uint64_t hash, const void *key,
                              void **rec) {
  size_t j;
  *rec = NULL;
  if (l->tcap == 0 && !table_grow(l, 64))
    return OVL__FLIST_NOMEM;
  for (j = hash & (l->tcap - 1); l->table[j] != 0;
       j = (j + 1) & (l->tcap - 1)) {
    size_t i = l->table[j] - 1;
    if (l->hash[i] == hash && l->eq(ovl__flist_at(l, i), key)) {
      *rec = ovl__flist_at(l, i);
      return OVL__FLIST_FOUND;
    }
  }
  if (l->n >= l->max) {
    l->more++;
    return OVL__FLIST_MORE;
  }
  if (l->n == l->cap) {
    size_t ncap = l->cap ? 2 * l->cap : 16;
    void *nr = realloc(l->recs, ncap * l->size);
    uint64_t *nh;
    if (nr == NULL)
      return OVL__FLIST_NOMEM;
    l->recs = nr;
    nh = realloc(l->hash, ncap * sizeof *nh);
    if (nh == NULL)
      return OVL__FLIST_NOMEM;
    l->hash = nh;
    l->cap = ncap;
  }
  /* Kept at most half full: grown (and the slot found again) first. */
  if (2 * (l->n + 1) > l->tcap) {
    if (!table_grow(l, 2 * l->tcap))
      return OVL__FLIST_NOMEM;
    for (j = hash & (l->tcap - 1); l->table[j] != 0;
         j = (j + 1) & (l->tcap - 1))
      ;
  }
  *rec = ovl__flist_at(l, l->n);
  memset(*rec, 0, l->size);
  l->hash[l->n] = hash;
  l->table[j] = (uint32_t)(++l->n);
  return OVL__FLIST_NEW;
}

void ovl__flist_end(ovl__flist *l, int (*cmp)(const void *, const void *)) {
  free(l->table);
  free(l->hash);
  l->table = NULL;
  l->hash = NULL;
  l->tcap = 0;
  if (cmp != NULL && l->n > 1)
    qsort(l->recs, l->n, l->size, cmp);
}

void ovl__flist_free(ovl__flist *l, void (*free_rec)(void *rec, void *ctx),
                     void *ctx) {
  for (size_t i = 0; free_rec != NULL && i < l->n; i++)
    free_rec(ovl__flist_at(l, i), ctx);
  free(l->recs);
  free(l->hash);
  free(l->table);
  memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ */
/* Formatting                                                          */
/* ------------------------------------------------------------------ */

ovl_status ovl__findings_format(const void *res, const ovl_program *prog,
                                ovl__findings_fmt fmt, const char *fn,
                                const char *what, char **text,
                                ovl_error *err) {
  ovl__sbuf b = {0};
  const char *file = prog != NULL && prog->filename != NULL ? prog->filename
                                                            : "<program>";
  if (res == NULL || text == NULL)
    return ovl__err(err, OVL_EINVAL, "%s: bad argument", fn);
  *text = NULL;
  fmt(&b, res, prog, file);
  if (b.fail || b.s == NULL) {
    free(b.s);
    return ovl__err(err, OVL_ENOMEM, "%s: out of memory", what);
  }
  *text = b.s;
  return OVL_OK;
}

void ovl__findings_close(ovl__sbuf *b, size_t n, uint64_t more,
                         const char *unlisted, const char *one,
                         const char *many, const char *file, int nranks,
                         const char *extra) {
  if (more > 0)
    ovl__sb_printf(b, "and %llu more %s%s not listed (the list stops at "
                      "%d)\n",
                   (unsigned long long)more, unlisted, more == 1 ? "" : "s",
                   OVL_FINDINGS_LIST_MAX);
  if (n == 0 && more == 0)
    ovl__sb_printf(b, "no %s in %s (%d rank%s%s)\n", many, file, nranks,
                   nranks == 1 ? "" : "s", extra);
  else
    ovl__sb_printf(b, "%zu %s in %s (%d rank%s)\n", n, n == 1 ? one : many,
                   file, nranks, nranks == 1 ? "" : "s");
}

/* ------------------------------------------------------------------ */
/* Forms                                                               */
/* ------------------------------------------------------------------ */

/* The modes in the order the pipeline runs them. */
static const ovl_mode form_order[] = {OVL_MODE_SYNC, OVL_MODE_ASYNC,
                                      OVL_MODE_COMP, OVL_MODE_COMM};
#define N_FORMS (sizeof form_order / sizeof form_order[0])

void ovl__findings_forms_line(ovl__sbuf *b, unsigned forms,
                              unsigned checked) {
  int n = __builtin_popcount(forms), k = 0;
  /* Found in one form: its section already says which. */
  if (__builtin_popcount(checked) < 2 || n < 2)
    return;
  ovl__sb_puts(b, "  found in the ");
  for (size_t i = 0; i < N_FORMS; i++) {
    if (!(forms & OVL_MODE_BIT(form_order[i])))
      continue;
    if (k > 0)
      ovl__sb_puts(b, k == n - 1 ? " and " : ", ");
    ovl__sb_puts(b, ovl_mode_name(form_order[i]));
    k++;
  }
  ovl__sb_puts(b, " forms\n");
}

void ovl__findings_forms_json(ovl__sbuf *b, unsigned forms) {
  int k = 0;
  if (forms == 0) {
    ovl__sb_puts(b, "null");
    return;
  }
  ovl__sb_puts(b, "[");
  for (size_t i = 0; i < N_FORMS; i++)
    if (forms & OVL_MODE_BIT(form_order[i]))
      ovl__sb_printf(b, "%s\"%s\"", k++ ? "," : "",
                     ovl_mode_name(form_order[i]));
  ovl__sb_puts(b, "]");
}

bool ovl__fix_slot_set(ovl__fix_slot *s, char *text, bool checked,
                       const char *why) {
  free(s->text);
  free(s->why);
  s->text = text;
  s->checked = checked;
  s->why = why != NULL ? ovl__strdup(why) : NULL;
  return why == NULL || s->why != NULL;
}

void ovl__fix_slot_info(const ovl__fix_slot *s, ovl_fix_info *out) {
  out->fix = s->text;
  out->checked = s->checked;
  out->why = s->why;
}

void ovl__fix_slot_free(ovl__fix_slot *s) {
  free(s->text);
  free(s->why);
  s->text = s->why = NULL;
}

void ovl__findings_fix_line(ovl__sbuf *b, const char *fix, bool checked,
                            const char *why) {
  if (fix != NULL && checked)
    ovl__sb_printf(b, "  fix (checked): %s\n", fix);
  else if (fix != NULL && why != NULL)
    ovl__sb_printf(b, "  fix (unchecked): %s (%s)\n", fix, why);
  else if (fix != NULL)
    ovl__sb_printf(b, "  fix (unchecked): %s\n", fix);
  else if (why != NULL)
    ovl__sb_printf(b, "  fix: %s\n", why);
}

void ovl__findings_fix_json(ovl__sbuf *b, const char *fix, bool checked,
                            const char *why) {
  ovl__sb_puts(b, ",\"fix\":");
  if (fix != NULL)
    ovl__sb_json_str(b, fix);
  else
    ovl__sb_puts(b, "null");
  ovl__sb_printf(b, ",\"fix_checked\":%s,\"fix_why\":",
                 checked ? "true" : "false");
  if (why != NULL)
    ovl__sb_json_str(b, why);
  else
    ovl__sb_puts(b, "null");
}
