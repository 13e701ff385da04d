/*
 * The re-check of the fix hints of mismatches and deadlocks
 * (check/order_fix.h; check/order_fix.c makes the candidates), and what
 * it rests on: a whole check of a text (every form's races and
 * deadlocks, the program's mismatches), its findings as keys in the lines
 * of the original text, so that a finding of an edited schedule is known
 * for one of the original or a new one.
 *
 * A candidate is applied to the text, which is parsed, bound as the
 * program was and checked; it is the fix when the finding is gone (a
 * deadlock from every form) and every finding left was there before. An
 * edit's outcome is kept, so that findings sharing a fix (a collective
 * some ranks skip shifts every later one) cost one re-check; the work is
 * bounded as the race hints' is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/deadlock.h"
#include "check/order_fix.h"
#include "check/races.h"
#include "lang/schedule.h"

/* The work of one report's re-checks: an op of an edited program, each
 * form, or 4 bytes of its text, is one unit (as the race hints'). */
#define ORDER_BUDGET ((uint64_t)1 << 24)

/* ------------------------------------------------------------------ */
/* Keys                                                                */
/* ------------------------------------------------------------------ */

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/* A position of the edited text in the original's lines: 0 for a line
 * the edit made. */
static uint64_t opos(const ovl__edited *map, int line, int col) {
  if (map != NULL) {
    if (line < 1 || line > map->nlines || map->orig[line] == 0)
      return 0;
    col -= map->shift[line];
    line = map->orig[line];
  }
  return (uint64_t)(uint32_t)line << 32 | (uint32_t)col;
}

size_t ovl__race_key(const ovl_races *r, size_t i, ovl_mode mode,
                     const ovl__edited *map, uint64_t *w) {
  const race_rec *rr = ovl__races_at(r, i);
  size_t n = 0;
  w[n++] = (uint64_t)mode;
  w[n++] = str_hash(rr->var_name);
  for (int k = 0; k < 2; k++) {
    w[n++] = opos(map, rr->a[k].line, rr->a[k].col);
    w[n++] = (uint64_t)rr->a[k].write << 63 ^ str_hash(rr->a[k].op_name) ^
             str_hash(rr->a[k].stream_name) * 3;
  }
  return n;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

size_t ovl__deadlock_key(const ovl_deadlocks *d, size_t i,
                         const ovl__edited *map, uint64_t *w) {
  ovl_deadlock_finding f;
  size_t n = 0;
  ovl_deadlocks_get(d, i, &f);
  for (size_t k = 0; k < f.nsteps && n < OKEY_MAX_WORDS; k++) {
    const ovl_deadlock_step *s = &f.steps[k];
    if (s->coll_index > 0 || s->peer >= 0)
      w[n++] = opos(map, s->line, s->col);
  }
  qsort(w, n, sizeof *w, cmp_u64);
  {
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
      if (u == 0 || w[u - 1] != w[k])
        w[u++] = w[k];
    n = u;
  }
  return n;
}

size_t ovl__mismatch_key(const ovl_mismatches *m, size_t i,
                         const ovl__edited *map, uint64_t *w) {
  ovl_mismatch_finding f;
  size_t n = 0;
  ovl_mismatches_get(m, i, &f);
  w[n++] = (uint64_t)f.kind | (uint64_t)(uint32_t)f.ring << 8 |
           (uint64_t)f.differs << 40;
  w[n++] = (uint64_t)(uint32_t)(f.sender + 1) << 32 |
           (uint32_t)(f.receiver + 1);
  for (int k = 0; k < f.nsides && n + 2 <= OKEY_MAX_WORDS; k++) {
    const ovl_mismatch_side *s = &f.sides[k];
    w[n++] = (uint64_t)(uint32_t)s->rank << 1 | (uint64_t)(s->issues != 0);
    w[n++] = s->issues ? opos(map, s->line, s->col) ^
                             str_hash(s->op_name) * 5
                       : 0;
  }
  return n;
}

void ovl__okeys_free(okeys *k) {
  free(k->w);
  free(k->k);
  memset(k, 0, sizeof *k);
}

static bool okeys_add(okeys *k, int kind, const uint64_t *w, size_t n) {
  uint64_t h = mix(0x2545f4914f6cdd1dull, (uint64_t)kind);
  if (k->nw + n > k->capw) {
    size_t nc = k->capw ? 2 * k->capw : 256;
    uint64_t *a;
    while (nc < k->nw + n)
      nc *= 2;
    if ((a = realloc(k->w, nc * sizeof *a)) == NULL)
      return false;
    k->w = a;
    k->capw = nc;
  }
  if (k->n == k->cap) {
    size_t nc = k->cap ? 2 * k->cap : 32;
    struct okey *a = realloc(k->k, nc * sizeof *a);
    if (a == NULL)
      return false;
    k->k = a;
    k->cap = nc;
  }
  for (size_t j = 0; j < n; j++)
    h = mix(h, w[j]);
  memcpy(k->w + k->nw, w, n * sizeof *w);
  k->k[k->n].hash = h;
  k->k[k->n].off = k->nw;
  k->k[k->n].len = n;
  k->k[k->n].kind = kind;
  k->n++;
  k->nw += n;
  k->sorted = false;
  return true;
}

static int cmp_okey(const void *a, const void *b) {
  const struct okey *x = a, *y = b;
  return (x->hash > y->hash) - (x->hash < y->hash);
}

bool ovl__okeys_has(okeys *k, int kind, const uint64_t *w, size_t n) {
  uint64_t h = mix(0x2545f4914f6cdd1dull, (uint64_t)kind);
  size_t lo = 0, hi;
  if (!k->sorted) {
    if (k->n > 1)
      qsort(k->k, k->n, sizeof *k->k, cmp_okey);
    k->sorted = true;
  }
  for (size_t j = 0; j < n; j++)
    h = mix(h, w[j]);
  hi = k->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (k->k[mid].hash < h)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < k->n && k->k[lo].hash == h; lo++)
    if (k->k[lo].kind == kind && k->k[lo].len == n &&
        memcmp(k->w + k->k[lo].off, w, n * sizeof *w) == 0)
      return true;
  return false;
}

/* Every finding of the reports into keys. */
static bool keys_of(okeys *k, const ovl_mismatches *mm,
                    ovl__form_checks *f, size_t nf,
                    const ovl__edited *map) {
  uint64_t w[OKEY_MAX_WORDS];
  for (size_t i = 0; mm != NULL && i < ovl_mismatches_count(mm); i++)
    if (!okeys_add(k, OKEY_MISMATCH, w, ovl__mismatch_key(mm, i, map, w)))
      return false;
  for (size_t j = 0; j < nf; j++) {
    for (size_t i = 0; f[j].races != NULL && i < f[j].races->list.n; i++)
      if (!okeys_add(k, OKEY_RACE, w,
                     ovl__race_key(f[j].races, i, f[j].mode, map, w)))
        return false;
    for (size_t i = 0;
         f[j].deadlocks != NULL && i < ovl_deadlocks_count(f[j].deadlocks);
         i++)
      if (!okeys_add(k, OKEY_DEADLOCK, w,
                     ovl__deadlock_key(f[j].deadlocks, i, map, w)))
        return false;
  }
  return true;
}

/* ------------------------------------------------------------------ */
/* A whole check of a text                                             */
/* ------------------------------------------------------------------ */

void ovl__ochecked_free(ochecked *c) {
  ovl__okeys_free(&c->keys);
  ovl_mismatches_free(c->mm);
  for (size_t i = 0; i < OVL__MODE_COUNT; i++) {
    ovl_races_free(c->races_of[i]);
    ovl_deadlocks_free(c->dl_of[i]);
    ovl_program_free(c->forms[i]);
  }
  ovl_program_free(c->bound);
  memset(c, 0, sizeof *c);
}

ovl_status ovl__check_text(char *text, size_t len, const char *filename,
                           const ovl_bind_opts *opts, const omodes *m,
                           const ovl__edited *map, bool keep,
                           ochecked *out, bool *usable, ovl_error *err) {
  ovl_schedule *s = NULL;
  ovl_error e2 = {0};
  ovl__form_checks f[OVL__MODE_COUNT];
  ovl_status st = OVL_OK;
  memset(out, 0, sizeof *out);
  memset(f, 0, sizeof f);
  *usable = false;
  if (ovl__schedule_parse_owned(text, len, filename, &s, &e2) != OVL_OK)
    return e2.status == OVL_ENOMEM ? ovl__err(err, OVL_ENOMEM,
                                              "fix check: out of memory")
                                   : OVL_OK;
  if (ovl_schedule_bind(s, opts, &out->bound, &e2) != OVL_OK) {
    ovl_schedule_free(s);
    return e2.status == OVL_ENOMEM ? ovl__err(err, OVL_ENOMEM,
                                              "fix check: out of memory")
                                   : OVL_OK;
  }
  ovl_schedule_free(s);
  *usable = true;
  out->nops = out->bound->nops;
  if (m->mismatches)
    st = ovl_mismatch_check(out->bound, &out->mm, err);
  for (size_t i = 0; st == OVL_OK && i < m->n; i++) {
    st = ovl_program_transform(out->bound, m->mode[i], &out->forms[i], err);
    if (st == OVL_OK)
      st = ovl__race_check(out->forms[i], &out->races_of[i], err);
    if (st == OVL_OK)
      st = ovl__deadlock_check_graph(out->forms[i], m->graph,
                                     &out->dl_of[i], err);
    f[i].mode = m->mode[i];
    f[i].prog = out->forms[i];
    f[i].races = out->races_of[i];
    f[i].deadlocks = out->dl_of[i];
  }
  out->nforms = m->n;
  if (st == OVL_OK && !keys_of(&out->keys, out->mm, f, m->n, map))
    st = ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  if (st == OVL_OK) {
    out->mismatches = ovl_mismatches_count(out->mm) +
                      ovl_mismatches_more(out->mm);
    for (size_t i = 0; i < m->n; i++) {
      out->races += ovl_races_count(out->races_of[i]) +
                    ovl_races_more(out->races_of[i]);
      out->deadlocks += ovl_deadlocks_count(out->dl_of[i]) +
                        ovl_deadlocks_more(out->dl_of[i]);
    }
  }
  if (st != OVL_OK || !keep) {
    okeys k = out->keys;
    uint64_t nr = out->races, nm = out->mismatches, nd = out->deadlocks;
    size_t nops = out->nops;
    memset(&out->keys, 0, sizeof out->keys);
    ovl__ochecked_free(out);
    if (st == OVL_OK) {
      out->keys = k;
      out->nops = nops;
      out->races = nr;
      out->mismatches = nm;
      out->deadlocks = nd;
      out->nforms = m->n;
    } else {
      ovl__okeys_free(&k);
    }
  }
  return st;
}

/* ------------------------------------------------------------------ */
/* The re-check                                                        */
/* ------------------------------------------------------------------ */

/* What an edit did, kept by its text. */
typedef struct outcome {
  char *text;
  bool unusable; /* it does not apply, parse or bind */
  okeys keys;    /* the findings after it */
} outcome;

typedef struct ofixer {
  /* The forms' deadlock reports (what their executions never reached). */
  ovl__form_checks *f;
  size_t nf;
  const ovl_schedule *S;
  const ovl_bind_opts *opts;
  const ovl__lines *L;
  omodes modes;
  okeys before;
  outcome *out;
  size_t nout, cap;
  uint64_t spent;
} ofixer;

static void ofixer_free(ofixer *F) {
  for (size_t i = 0; i < F->nout; i++) {
    free(F->out[i].text);
    ovl__okeys_free(&F->out[i].keys);
  }
  free(F->out);
  ovl__okeys_free(&F->before);
}

/* The outcome of edit e: kept, or checked now (NULL in *o when the budget
 * is spent). */
static ovl_status outcome_of(ofixer *F, const ovl__edit *e,
                             const outcome **o, ovl_error *err) {
  char *text = ovl__edit_text(e);
  ovl__edited ed;
  outcome *n;
  ochecked c;
  bool usable;
  ovl_status st;
  int rc;
  *o = NULL;
  if (text == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  for (size_t i = 0; i < F->nout; i++)
    if (strcmp(F->out[i].text, text) == 0) {
      free(text);
      *o = &F->out[i];
      return OVL_OK;
    }
  if (F->spent >= ORDER_BUDGET) {
    free(text);
    return OVL_OK;
  }
  if (F->nout == F->cap) {
    size_t nc = F->cap ? 2 * F->cap : 8;
    outcome *a = realloc(F->out, nc * sizeof *a);
    if (a == NULL) {
      free(text);
      return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
    }
    F->out = a;
    F->cap = nc;
  }
  n = &F->out[F->nout++];
  memset(n, 0, sizeof *n);
  n->text = text;
  rc = ovl__edit_apply(F->L, e, &ed);
  if (rc < 0)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  if (rc > 0) {
    n->unusable = true;
    *o = n;
    return OVL_OK;
  }
  F->spent += ed.len / 4;
  /* The check takes the text. */
  st = ovl__check_text(ed.text, ed.len, ovl_schedule_filename(F->S), F->opts,
                       &F->modes, &ed, false, &c, &usable, err);
  ed.text = NULL;
  if (st == OVL_OK && usable) {
    n->keys = c.keys;
    memset(&c.keys, 0, sizeof c.keys);
    F->spent += (uint64_t)c.nops * (F->modes.n + 1) + 1;
  }
  ovl__ochecked_free(&c);
  ovl__edited_free(&ed);
  if (st != OVL_OK)
    return st;
  n->unusable = !usable;
  *o = n;
  return OVL_OK;
}

/* Whether a deadlock (its key: the positions of its comm ops) was out
 * of reach before: every position it goes through is one the execution
 * of a form never reached, being blocked earlier (an edit that removes a
 * deadlock lets the execution go on, and it may find the next). */
static bool out_of_reach(const ofixer *F, const uint64_t *w, size_t n) {
  for (size_t j = 0; j < F->nf; j++) {
    size_t k = 0;
    while (k < n && F->f[j].deadlocks != NULL &&
           ovl__deadlocks_unreached(F->f[j].deadlocks, w[k]))
      k++;
    if (n > 0 && k == n)
      return true;
  }
  return false;
}

/* Whether every finding after an edit was there before (or, a deadlock,
 * out of reach before). */
static bool none_new(ofixer *F, outcome *o) {
  for (size_t i = 0; i < o->keys.n; i++) {
    const uint64_t *w = o->keys.w + o->keys.k[i].off;
    size_t n = o->keys.k[i].len;
    if (ovl__okeys_has(&F->before, o->keys.k[i].kind, w, n))
      continue;
    if (o->keys.k[i].kind == OKEY_DEADLOCK && out_of_reach(F, w, n))
      continue;
    return false;
  }
  return true;
}

/* The candidates of a finding (its key `w` of kind `kind`) re-checked in
 * turn; the first that removes it and adds none is its fix. */
static ovl_status check_cands(ofixer *F, const ocands *cands,
                              const char *none, int kind, const uint64_t *w,
                              size_t nw, const char *what, char **fix,
                              bool *checked, char *why, size_t whysize,
                              ovl_error *err) {
  int tried = 0, unusable = 0, chosen = -1;
  bool removed = false, budget = false;
  *fix = NULL;
  *checked = false;
  why[0] = '\0';
  if (cands->n == 0) {
    snprintf(why, whysize, "%s", none != NULL ? none : "none known");
    return OVL_OK;
  }
  for (int k = 0; k < cands->n && chosen < 0; k++) {
    const outcome *o;
    ovl_status st = outcome_of(F, &cands->e[k], &o, err);
    if (st != OVL_OK)
      return st;
    if (o == NULL) {
      budget = true;
      break;
    }
    tried++;
    if (o->unusable) {
      unusable++;
      continue;
    }
    if (ovl__okeys_has((okeys *)&o->keys, kind, w, nw))
      continue;
    removed = true;
    if (none_new(F, (outcome *)o))
      chosen = k;
  }
  *fix = ovl__edit_text(&cands->e[chosen >= 0 ? chosen : 0]);
  if (*fix == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  if (chosen >= 0) {
    *checked = true;
    return OVL_OK;
  }
  if (budget)
    snprintf(why, whysize,
             "not checked: the re-check budget is spent (%d of %d "
             "candidates tried)",
             tried, cands->n);
  else if (removed)
    snprintf(why, whysize,
             "each candidate that removed the %s brought a new finding (%d "
             "tried)",
             what, tried);
  else if (unusable > 0)
    snprintf(why, whysize,
             "no candidate removed the %s (%d tried, %d of them could not "
             "be re-checked)",
             what, tried, unusable);
  else
    snprintf(why, whysize, "no candidate removed the %s (%d tried)", what,
             tried);
  return OVL_OK;
}

ovl_status ovl__order_check_fixes(const ovl_program *bound,
                                  ovl_mismatches *mm, ovl__form_checks *f,
                                  size_t nf, bool graph,
                                  const ovl_schedule *s,
                                  const ovl_bind_opts *opts, ovl_error *err) {
  ofixer F;
  ovl__lines L;
  ovl__match m;
  ocontext c;
  ocands *cands = NULL, *other = NULL;
  size_t len, nfind = mm != NULL ? ovl_mismatches_count(mm) : 0;
  const char *text;
  bool have_match = false;
  ovl_status st = OVL_OK;
  char why[256];
  uint64_t w[OKEY_MAX_WORDS];

  for (size_t j = 0; j < nf; j++)
    nfind += f[j].deadlocks != NULL ? ovl_deadlocks_count(f[j].deadlocks) : 0;
  if (nfind == 0 || s == NULL || bound == NULL)
    return OVL_OK;
  text = ovl__schedule_text(s, &len);
  memset(&F, 0, sizeof F);
  memset(&c, 0, sizeof c);
  F.f = f;
  F.nf = nf;
  F.S = s;
  F.opts = opts;
  F.L = &L;
  F.modes.graph = graph;
  F.modes.mismatches = mm != NULL;
  for (size_t j = 0; j < nf && j < OVL__MODE_COUNT; j++)
    F.modes.mode[F.modes.n++] = f[j].mode;
  if (!ovl__lines_make(&L, text, len))
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  if (ovl__program_ranks_differ(bound)) {
    if ((st = ovl__match_build(bound, &m, err)) != OVL_OK) {
      ovl__lines_free(&L);
      return st;
    }
    have_match = true;
  }
  cands = malloc(sizeof *cands);
  other = malloc(sizeof *other);
  if (cands == NULL || other == NULL ||
      !ovl__order_context_make(&c, bound,
                                                have_match ? &m : NULL, &L) ||
      !keys_of(&F.before, mm, f, nf, NULL))
    st = ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  /* Mismatches. */
  for (size_t i = 0; st == OVL_OK && mm != NULL &&
                     i < ovl_mismatches_count(mm);
       i++) {
    const char *none;
    char *fix;
    bool checked;
    size_t nw = ovl__mismatch_key(mm, i, NULL, w);
    ovl_mismatch_finding fi, fj;
    ovl__mismatch_candidates(&c, mm, i, false, cands, &none);
    /* One cause often makes several mismatches of a ring (a collective
     * some ranks skip shifts every later one): the earlier ones' fixes
     * are this one's candidates too; then the deletions, its own first. */
    ovl_mismatches_get(mm, i, &fi);
    for (int standins = 0; standins < 2; standins++) {
      const char *none2;
      if (standins) {
        ovl__mismatch_candidates(&c, mm, i, true, other, &none2);
        for (int k = 0; k < other->n; k++)
          ovl__ocands_add(cands, &other->e[k]);
      }
      for (size_t j = i, looked = 0; j-- > 0 && looked < 8;) {
        ovl_mismatches_get(mm, j, &fj);
        if (fj.ring != fi.ring)
          continue;
        looked++;
        ovl__mismatch_candidates(&c, mm, j, standins != 0, other, &none2);
        for (int k = 0; k < other->n; k++)
          ovl__ocands_add(cands, &other->e[k]);
      }
    }
    if (cands->n > 0)
      none = NULL;
    st = check_cands(&F, cands, none, OKEY_MISMATCH, w, nw, "mismatch", &fix,
                     &checked, why, sizeof why, err);
    if (st == OVL_OK &&
        !ovl__mismatch_set_fix(mm, i, fix, checked, checked ? NULL : why))
      st = ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  }
  /* Deadlocks, form by form (a deadlock must go from every form). */
  for (size_t j = 0; st == OVL_OK && j < nf; j++)
    for (size_t i = 0; st == OVL_OK && f[j].deadlocks != NULL &&
                       i < ovl_deadlocks_count(f[j].deadlocks);
         i++) {
      const char *none;
      char *fix;
      bool checked;
      size_t nw = ovl__deadlock_key(f[j].deadlocks, i, NULL, w);
      ovl__deadlock_candidates(&c, f[j].prog, f[j].deadlocks, i, cands,
                               &none);
      st = check_cands(&F, cands, none, OKEY_DEADLOCK, w, nw, "deadlock",
                       &fix, &checked, why, sizeof why, err);
      if (st == OVL_OK && !ovl__deadlock_set_fix(f[j].deadlocks, i, fix,
                                                 checked,
                                                 checked ? NULL : why))
        st = ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
    }
  free(cands);
  free(other);
  ovl__order_context_free(&c);
  if (have_match)
    ovl__match_free(&m);
  ovl__lines_free(&L);
  ofixer_free(&F);
  return st;
}
