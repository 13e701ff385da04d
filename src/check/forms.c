/*
 * Findings across forms (check/check.h; docs/ARCHITECTURE.md, "Checks"):
 * the pipeline checks each form a run makes (sync, async, ...) on its
 * own, and a bug found in several forms is one bug. A race is the same
 * when it is between the same two accesses (variable, and each access's
 * line, column and kind: the forms move ops between streams, so not the
 * streams); a deadlock when its cycle goes through the same comm ops (by
 * line and column: the forms block on other streams or on the host around
 * them). Each finding is marked with the forms it is in, and the distinct
 * ones are counted. Mismatches are checked once, on the program as bound.
 */
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "check/deadlock.h"
#include "check/races.h"

/* One finding of one form: its key's hash and where it is. */
typedef struct fref {
  uint64_t hash;
  uint32_t form, idx;
} fref;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static uint64_t str_hash(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static uint64_t pos(int line, int col) {
  return (uint64_t)(uint32_t)line << 32 | (uint32_t)col;
}

static uint64_t race_key_hash(const race_rec *r) {
  uint64_t h = str_hash(0xcbf29ce484222325ull, r->var_name);
  for (int k = 0; k < 2; k++) {
    h = mix(h, pos(r->a[k].line, r->a[k].col));
    h = mix(h, (uint64_t)r->a[k].write);
  }
  return h;
}

static bool race_same(const race_rec *a, const race_rec *b) {
  if (strcmp(a->var_name, b->var_name) != 0)
    return false;
  for (int k = 0; k < 2; k++)
    if (a->a[k].line != b->a[k].line || a->a[k].col != b->a[k].col ||
        a->a[k].write != b->a[k].write)
      return false;
  return true;
}

/* A step blocked at a comm op (a collective, a send or a receive). */
static bool comm_step(const ovl_deadlock_step *s) {
  return s->coll_index > 0 || s->peer >= 0;
}

/* Whether the comm ops of cycle a are those of cycle b (by position). */
static bool has_all(const dl_rec *a, const dl_rec *b) {
  for (size_t i = 0; i < a->nsteps; i++) {
    bool found = false;
    if (!comm_step(&a->steps[i]))
      continue;
    for (size_t j = 0; j < b->nsteps && !found; j++)
      found = comm_step(&b->steps[j]) &&
              a->steps[i].line == b->steps[j].line &&
              a->steps[i].col == b->steps[j].col;
    if (!found)
      return false;
  }
  return true;
}

static bool dl_same(const dl_rec *a, const dl_rec *b) {
  return has_all(a, b) && has_all(b, a);
}

/* Order-free: the sum of the mixed positions of its comm ops, each once
 * (a cycle through no comm op, which cannot happen, hashes its steps). */
static uint64_t dl_key_hash(const dl_rec *r) {
  uint64_t h = 0;
  bool any = false;
  for (size_t i = 0; i < r->nsteps; i++) {
    bool dup = false;
    if (!comm_step(&r->steps[i]))
      continue;
    for (size_t j = 0; j < i && !dup; j++)
      dup = comm_step(&r->steps[j]) && r->steps[j].line == r->steps[i].line &&
            r->steps[j].col == r->steps[i].col;
    if (!dup)
      h += mix(0x51ed27, pos(r->steps[i].line, r->steps[i].col));
    any = true;
  }
  for (size_t i = 0; !any && i < r->nsteps; i++)
    h += mix(0x51ed27, pos(r->steps[i].line, r->steps[i].col));
  return h;
}

static int cmp_fref(const void *pa, const void *pb) {
  const fref *a = pa, *b = pb;
  if (a->hash != b->hash)
    return a->hash < b->hash ? -1 : 1;
  if (a->form != b->form)
    return a->form < b->form ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

/* The findings of kind `races` (else deadlocks) of every form: marked,
 * and the distinct ones counted into *distinct. */
static bool mark(ovl__form_checks *f, size_t n, bool races,
                 uint64_t *distinct) {
  size_t total = 0, k = 0;
  unsigned checked = 0;
  fref *refs;
  *distinct = 0;
  for (size_t i = 0; i < n; i++) {
    if (races ? f[i].races == NULL : f[i].deadlocks == NULL)
      continue;
    checked |= OVL_MODE_BIT(f[i].mode);
    total += races ? f[i].races->list.n : f[i].deadlocks->list.n;
  }
  refs = malloc((total + 1) * sizeof *refs);
  if (refs == NULL)
    return false;
  for (size_t i = 0; i < n; i++) {
    size_t m = races ? (f[i].races ? f[i].races->list.n : 0)
                     : (f[i].deadlocks ? f[i].deadlocks->list.n : 0);
    for (size_t j = 0; j < m; j++) {
      refs[k].hash =
          races ? race_key_hash(ovl__races_at(f[i].races, j))
                : dl_key_hash(ovl__flist_at(&f[i].deadlocks->list, j));
      refs[k].form = (uint32_t)i;
      refs[k].idx = (uint32_t)j;
      k++;
    }
  }
  qsort(refs, total, sizeof *refs, cmp_fref);
  /* Within a run of one hash, the findings alike: each one's forms are
   * the union of its alikes'. A finding alike an earlier one (of an
   * earlier form, or of its own) is not counted again. */
  for (size_t a = 0; a < total;) {
    size_t b = a;
    while (b < total && refs[b].hash == refs[a].hash)
      b++;
    for (size_t x = a; x < b; x++) {
      unsigned forms = 0;
      bool first = true;
      void *rx = races ? (void *)ovl__races_at(f[refs[x].form].races,
                                               refs[x].idx)
                       : ovl__flist_at(&f[refs[x].form].deadlocks->list,
                                       refs[x].idx);
      for (size_t y = a; y < b; y++) {
        void *ry = races ? (void *)ovl__races_at(f[refs[y].form].races,
                                                 refs[y].idx)
                         : ovl__flist_at(&f[refs[y].form].deadlocks->list,
                                         refs[y].idx);
        if (!(races ? race_same(rx, ry) : dl_same(rx, ry)))
          continue;
        forms |= OVL_MODE_BIT(f[refs[y].form].mode);
        if (y < x)
          first = false;
      }
      if (races) {
        ((race_rec *)rx)->forms = forms;
        ((race_rec *)rx)->forms_checked = checked;
      } else {
        ((dl_rec *)rx)->forms = forms;
        ((dl_rec *)rx)->forms_checked = checked;
      }
      *distinct += first;
    }
    a = b;
  }
  free(refs);
  /* Those no form listed: as many as the form that left the most out. */
  {
    uint64_t more = 0;
    for (size_t i = 0; i < n; i++) {
      uint64_t m = races ? (f[i].races ? f[i].races->list.more : 0)
                         : (f[i].deadlocks ? f[i].deadlocks->list.more : 0);
      if (m > more)
        more = m;
    }
    *distinct += more;
  }
  return true;
}

bool ovl__findings_across_forms(ovl__form_checks *f, size_t n,
                                uint64_t *races, uint64_t *deadlocks) {
  return mark(f, n, true, races) && mark(f, n, false, deadlocks);
}
