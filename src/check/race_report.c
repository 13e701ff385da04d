/*
 * The race report (check/races.h): its records, keyed by source position
 * (variable, both ops' line/col, streams, access kinds and ops) in the
 * list of findings (check/findings.h); made empty, finished (sorted, each
 * race's ranks as a list), freed and read (ovl_races_*). The checker
 * (check/race.c) fills it; check/race_format.c writes it out.
 */
#include <stdlib.h>
#include <string.h>

#include "check/races.h"

/* ------------------------------------------------------------------ */
/* Race records                                                        */
/* ------------------------------------------------------------------ */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t key_hash(const race_rec *r) {
  uint64_t h = (uint64_t)(uint32_t)r->var * 0xff51afd7ed558ccdull;
  for (int k = 0; k < 2; k++) {
    h = mix(h, (uint64_t)(uint32_t)r->a[k].line << 32 | (uint32_t)r->a[k].col);
    h = mix(h, (uint64_t)(uint32_t)(r->a[k].stream + 1) << 1 |
                   (uint64_t)r->a[k].write);
    h = mix(h, (uint64_t)(uintptr_t)r->def[k]);
  }
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  return h;
}

static bool key_eq(const void *rec, const void *key) {
  const race_rec *r = rec, *p = key;
  if (r->var != p->var)
    return false;
  for (int k = 0; k < 2; k++)
    if (r->a[k].line != p->a[k].line || r->a[k].col != p->a[k].col ||
        r->a[k].stream != p->a[k].stream || r->a[k].write != p->a[k].write ||
        r->def[k] != p->def[k])
      return false;
  return true;
}

ovl_status ovl__races_new(const ovl_program *prog, ovl_races **out,
                          ovl_error *err) {
  ovl_races *res = calloc(1, sizeof *res);
  *out = NULL;
  if (res == NULL)
    return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  ovl__flist_init(&res->list, sizeof(race_rec), OVL_RACES_LIST_MAX, key_eq);
  res->nops = prog->nops;
  res->nranks = prog->nranks > 0 ? prog->nranks : 1;
  if (res->nranks > OVL_MAX_RANKS)
    res->nranks = OVL_MAX_RANKS;
  res->ranks = malloc((size_t)res->nranks * sizeof *res->ranks);
  res->stream_names = calloc((size_t)prog->nstreams + 1,
                             sizeof *res->stream_names);
  bool names_ok = res->stream_names != NULL;
  for (int s = 0; names_ok && s < prog->nstreams; s++) {
    res->stream_names[s] = ovl__strdup(ovl__stream_name(prog, s));
    res->nstreams = s + 1;
    names_ok = res->stream_names[s] != NULL;
  }
  if (res->ranks == NULL || !names_ok) {
    ovl_races_free(res);
    return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  }
  for (int k = 0; k < res->nranks; k++)
    res->ranks[k] = k;
  *out = res;
  return OVL_OK;
}

ovl__flist_got ovl__races_find(ovl_races *res, const race_rec *probe,
                               race_rec **rec) {
  void *r;
  ovl__flist_got got = ovl__flist_add(&res->list, key_hash(probe), probe, &r);
  *rec = r;
  return got;
}

/* Sort: line of the first op, line of the second, variable, then the rest
 * of the key so that the order is total. */
static int race_cmp(const void *pa, const void *pb) {
  const race_rec *a = pa, *b = pb;
  int c;
#define CMP(x, y)                                                             \
  if ((x) != (y))                                                             \
    return (x) < (y) ? -1 : 1;
  CMP(a->a[0].line, b->a[0].line);
  CMP(a->a[1].line, b->a[1].line);
  if ((c = strcmp(a->var_name, b->var_name)) != 0)
    return c;
  CMP(a->var, b->var);
  for (int k = 0; k < 2; k++) {
    CMP(a->a[k].col, b->a[k].col);
    CMP(a->a[k].stream, b->a[k].stream);
    CMP(a->a[k].write, b->a[k].write);
    if ((c = strcmp(a->a[k].op_name, b->a[k].op_name)) != 0)
      return c;
  }
  CMP(a->a[0].op, b->a[0].op);
  CMP(a->a[1].op, b->a[1].op);
#undef CMP
  return 0;
}

ovl_status ovl__races_finish(ovl_races *res, ovl_error *err) {
  ovl__flist_end(&res->list, race_cmp);
  /* Each race's ranks as a list: the program's when it is on all. */
  for (size_t i = 0; i < res->list.n; i++) {
    race_rec *r = ovl__races_at(res, i);
    uint64_t all = res->nranks >= 64 ? ~(uint64_t)0
                                     : ((uint64_t)1 << res->nranks) - 1;
    int n = 0;
    if ((r->rmask & all) == all) {
      r->ranks = res->ranks;
      r->nranks = res->nranks;
      continue;
    }
    r->ranks = malloc((size_t)res->nranks * sizeof *r->ranks);
    if (r->ranks == NULL)
      return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
    for (int k = 0; k < res->nranks; k++)
      if ((r->rmask >> k) & 1)
        r->ranks[n++] = k;
    r->nranks = n;
  }
  return OVL_OK;
}

/* What race `rec` owns; `ctx` is the report's rank list, which a race on
 * every rank shares. */
static void race_free(void *rec, void *ctx) {
  race_rec *r = rec;
  if (r->ranks != ctx)
    free(r->ranks);
  free(r->var_name);
  ovl__fix_slot_free(&r->fix);
  free(r->note);
}

void ovl_races_free(ovl_races *r) {
  if (r == NULL)
    return;
  ovl__flist_free(&r->list, race_free, r->ranks);
  free(r->ranks);
  for (int s = 0; r->stream_names != NULL && s < r->nstreams; s++)
    free(r->stream_names[s]);
  free(r->stream_names);
  free(r);
}

/* ------------------------------------------------------------------ */
/* Accessors                                                           */
/* ------------------------------------------------------------------ */

size_t ovl_races_count(const ovl_races *r) { return r ? r->list.n : 0; }
uint64_t ovl_races_more(const ovl_races *r) { return r ? r->list.more : 0; }
size_t ovl_races_ops(const ovl_races *r) { return r ? r->nops : 0; }

int ovl_races_get(const ovl_races *r, size_t i, ovl_race_info *info) {
  const race_rec *rr;
  if (r == NULL || info == NULL || i >= r->list.n)
    return -1;
  rr = ovl__races_at(r, i);
  info->var = rr->var_name;
  info->first = rr->a[0];
  info->second = rr->a[1];
  info->fix = rr->fix.text;
  info->fix_checked = rr->fix.checked;
  info->fix_why = rr->fix.why;
  info->note = rr->note;
  info->occurrences = rr->occurrences;
  info->nranks = rr->nranks;
  info->ranks = rr->ranks;
  return 0;
}

unsigned ovl_races_forms(const ovl_races *r, size_t i) {
  return r != NULL && i < r->list.n ? ovl__races_at(r, i)->forms : 0;
}
