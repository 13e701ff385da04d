/*
 * The re-check of fix hints (docs/ARCHITECTURE.md, "Checks";
 * check/fix.c makes the candidates).
 *
 * The re-check (ovl_races_check_fixes): each candidate is applied to a
 * copy of the text, which is parsed, bound as the program was, made into
 * the same form and race-checked; the first with the race gone and no
 * race that was not there before is the fix. Races of the edited program
 * are matched with the original's by source position, with the lines
 * below the insertion moved back. An edit's outcome is kept, so that
 * races sharing a fix cost one re-check; the work is bounded (FIX_BUDGET).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/fix.h"
#include "lang/schedule.h"

/* Work of re-checks for one report: an op of an edited program, or 4
 * bytes of its text, is one unit (about 16 M units: 3 s on a 2-core
 * machine). */
#define FIX_BUDGET ((uint64_t)1 << 24)
#define FIX_TEXT_BYTES_PER_UNIT 4

/* ------------------------------------------------------------------ */
/* The re-check                                                        */
/* ------------------------------------------------------------------ */

/* A race by source position, the lines of an edited program moved back
 * to the original's. */
static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;
}

static uint64_t hash_int(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

/* Line `l` of an edited text with k lines inserted before line `at`, in
 * the original text. */
static int unshift(int l, int at, int k) { return l >= at + k ? l - k : l; }

static uint64_t race_hash(const race_rec *r, int at, int k) {
  uint64_t h = hash_str(0xcbf29ce484222325ull, r->var_name);
  for (int j = 0; j < 2; j++) {
    const ovl_race_access *a = &r->a[j];
    h = hash_int(h, (uint64_t)(uint32_t)unshift(a->line, at, k) << 32 |
                        (uint32_t)a->col);
    h = hash_int(h, (uint64_t)a->write);
    h = hash_str(h, a->stream_name);
    h = hash_str(h, a->op_name);
  }
  return h;
}

/* Whether race e (of the edited program) is race o (of the original). */
static bool race_same(const race_rec *o, const race_rec *e, int at, int k) {
  if (strcmp(o->var_name, e->var_name) != 0)
    return false;
  for (int j = 0; j < 2; j++) {
    const ovl_race_access *x = &o->a[j], *y = &e->a[j];
    if (x->line != unshift(y->line, at, k) || x->col != y->col ||
        x->write != y->write || strcmp(x->stream_name, y->stream_name) != 0 ||
        strcmp(x->op_name, y->op_name) != 0)
      return false;
  }
  return true;
}

/* What an edit did: which of the original races are gone (a bit each),
 * whether a race appeared, or whether the edit could not be checked (it
 * did not parse or bind, or the edited report lists too few races). */
typedef struct outcome {
  uint64_t key;
  int line;
  char *text; /* the edit's text: the key, with line */
  uint64_t *gone;
  bool added, unusable;
} outcome;

typedef struct fixer {
  const ovl_program *form;
  const ovl_schedule *S;
  const ovl_bind_opts *opts;
  ovl_races *res;
  const char *text;
  size_t len;
  /* The original races by position: index + 1, open addressing. */
  uint32_t *table;
  size_t tcap;
  size_t words; /* of a `gone` set */
  /* Outcomes of the edits tried, by their text: index + 1. */
  outcome *out;
  size_t nout, capout;
  uint32_t *otable;
  size_t ocap;
  uint64_t spent;
} fixer;

static void fixer_free(fixer *F) {
  for (size_t i = 0; i < F->nout; i++) {
    free(F->out[i].text);
    free(F->out[i].gone);
  }
  free(F->out);
  free(F->otable);
  free(F->table);
}

static bool fixer_index(fixer *F) {
  size_t cap = 16;
  while (cap < 2 * F->res->list.n + 2)
    cap *= 2;
  F->tcap = cap;
  F->table = calloc(cap, sizeof *F->table);
  if (F->table == NULL)
    return false;
  for (size_t i = 0; i < F->res->list.n; i++) {
    size_t j = race_hash(ovl__races_at(F->res, i), 0, 0) & (cap - 1);
    while (F->table[j] != 0)
      j = (j + 1) & (cap - 1);
    F->table[j] = (uint32_t)(i + 1);
  }
  F->words = (F->res->list.n + 63) / 64;
  return true;
}

/* The original race that race e of an edited program is, or -1. */
static long find_race(const fixer *F, const race_rec *e, int at, int k) {
  size_t j = race_hash(e, at, k) & (F->tcap - 1);
  for (; F->table[j] != 0; j = (j + 1) & (F->tcap - 1))
    if (race_same(ovl__races_at(F->res, F->table[j] - 1), e, at, k))
      return (long)F->table[j] - 1;
  return -1;
}

/* The text with edit e applied: its statements as lines (indented as line
 * e->line is) just before that line. NULL when out of memory; *len set. */
static char *apply(const fixer *F, const edit *e, size_t *len) {
  const char *t = F->text, *end = F->text + F->len, *p = t;
  size_t off, ind = 0, add = 0;
  char *out, *q;
  for (int l = 1; l < e->line && p < end; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl != NULL ? nl + 1 : end;
  }
  off = (size_t)(p - t);
  while (off + ind < F->len && (t[off + ind] == ' ' || t[off + ind] == '\t'))
    ind++;
  /* A last line without its newline gets one before the insertion. */
  bool nl_first = off == F->len && F->len > 0 && t[F->len - 1] != '\n';
  for (int k = 0; k < e->ops->n; k++)
    add += ind + strlen(e->ops->s[k]) + 1;
  *len = F->len + add + (nl_first ? 1 : 0);
  if ((out = malloc(*len + 1)) == NULL)
    return NULL;
  memcpy(out, t, off);
  q = out + off;
  if (nl_first)
    *q++ = '\n';
  for (int k = 0; k < e->ops->n; k++) {
    size_t n = strlen(e->ops->s[k]);
    memcpy(q, t + off, ind);
    q += ind;
    memcpy(q, e->ops->s[k], n);
    q += n;
    *q++ = '\n';
  }
  memcpy(q, t + off, F->len - off);
  return out;
}

/* Re-check edit e into *o. Errors: out of memory (in the parse or the
 * bind of the edited text too), or a failure of the form or its check (an
 * edit that does not parse or bind, or is longer than max_ops, is
 * unusable). */
static ovl_status recheck(fixer *F, const edit *e, outcome *o,
                          ovl_error *err) {
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_races *r2 = NULL;
  ovl_error e2 = {0};
  ovl_status st;
  size_t len;
  char *text = apply(F, e, &len);
  int k = e->ops->n;
  if (text == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  F->spent += len / FIX_TEXT_BYTES_PER_UNIT;
  o->gone = calloc(F->words + 1, sizeof *o->gone);
  if (o->gone == NULL) {
    free(text);
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  }
  if (ovl__schedule_parse_owned(text, len, ovl_schedule_filename(F->S), &s,
                                 &e2) !=
          OVL_OK ||
      ovl_schedule_bind(s, F->opts, &p, &e2) != OVL_OK) {
    ovl_schedule_free(s);
    if (e2.status == OVL_ENOMEM && !ovl__bind_over_limit(&e2))
      return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
    o->unusable = true;
    return OVL_OK;
  }
  ovl_schedule_free(s);
  F->spent += p->nops;
  st = ovl__program_transform_inplace(p, F->form->mode, err);
  if (st == OVL_OK)
    st = ovl__race_check(p, &r2, err);
  ovl_program_free(p);
  if (st != OVL_OK)
    return st;
  if (r2->list.more > 0)
    o->unusable = true;
  for (size_t i = 0; i < F->words; i++)
    o->gone[i] = ~(uint64_t)0;
  for (size_t i = 0; i < r2->list.n; i++) {
    long j = find_race(F, ovl__races_at(r2, i), e->line, k);
    if (j < 0)
      o->added = true;
    else
      o->gone[j / 64] &= ~((uint64_t)1 << (j % 64));
  }
  ovl_races_free(r2);
  return OVL_OK;
}

/* The outcome of edit e: kept from an earlier race, or re-checked now
 * (NULL in *o when the budget is spent). */
static ovl_status outcome_of(fixer *F, const edit *e, const outcome **o,
                             ovl_error *err) {
  char *text = ovl__fix_edit_text(e);
  uint64_t key;
  size_t j;
  outcome *n;
  ovl_status st;
  *o = NULL;
  if (text == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  key = hash_str(0xcbf29ce484222325ull, text);
  for (j = key & (F->ocap - 1); F->ocap > 0 && F->otable[j] != 0;
       j = (j + 1) & (F->ocap - 1)) {
    const outcome *c = &F->out[F->otable[j] - 1];
    if (c->key == key && strcmp(c->text, text) == 0) {
      free(text);
      *o = c;
      return OVL_OK;
    }
  }
  if (F->spent >= FIX_BUDGET) {
    free(text);
    return OVL_OK;
  }
  if (F->nout == F->capout || 2 * (F->nout + 1) > F->ocap) {
    /* Grow both; the table is rebuilt. */
    size_t ncap = F->capout ? 2 * F->capout : 16;
    outcome *no = realloc(F->out, ncap * sizeof *no);
    uint32_t *nt = calloc(2 * ncap, sizeof *nt);
    if (no != NULL)
      F->out = no;
    if (no == NULL || nt == NULL) {
      free(nt);
      free(text);
      return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
    }
    F->capout = ncap;
    free(F->otable);
    F->otable = nt;
    F->ocap = 2 * ncap;
    for (size_t i = 0; i < F->nout; i++) {
      size_t q = F->out[i].key & (F->ocap - 1);
      while (F->otable[q] != 0)
        q = (q + 1) & (F->ocap - 1);
      F->otable[q] = (uint32_t)(i + 1);
    }
  }
  n = &F->out[F->nout++];
  memset(n, 0, sizeof *n);
  n->key = key;
  n->line = e->line;
  n->text = text;
  if ((st = recheck(F, e, n, err)) != OVL_OK)
    return st;
  for (j = key & (F->ocap - 1); F->otable[j] != 0; j = (j + 1) & (F->ocap - 1))
    ;
  F->otable[j] = (uint32_t)F->nout;
  *o = n;
  return OVL_OK;
}

/* Race i: its candidates re-checked in order until one works. */
static ovl_status check_race(fixer *F, const hinter *h, size_t i, cands *c,
                             ovl_error *err) {
  race_rec *r = ovl__races_at(F->res, i);
  int tried = 0, unbound = 0, chosen = -1;
  bool removed = false, budget = false;
  char why[160];
  ovl_status st;
  ovl__fix_candidates(h, r, FIX_MAX_CANDS / 2, c);
  for (int k = 0; k < c->n && chosen < 0; k++) {
    const outcome *o;
    edit e = ovl__fix_cand(c, k);
    if ((st = outcome_of(F, &e, &o, err)) != OVL_OK)
      return st;
    if (o == NULL) {
      budget = true;
      break;
    }
    tried++;
    unbound += o->unusable;
    if (o->unusable || (o->gone[i / 64] >> (i % 64) & 1) == 0)
      continue;
    removed = true;
    if (!o->added)
      chosen = k;
  }
  if (chosen >= 0)
    why[0] = '\0';
  else if (c->n == 0 && ovl__fix_same_group(F->form, r->a[0].op, r->a[1].op))
    snprintf(why, sizeof why, "no edit orders two ops of one group");
  else if (c->n == 0)
    snprintf(why, sizeof why, "no candidate in this form");
  else if (budget)
    snprintf(why, sizeof why,
             "not checked: the re-check budget is spent (%d of %d "
             "candidates tried)",
             tried, c->n);
  else if (removed)
    snprintf(why, sizeof why,
             "each candidate that removed the race brought a new one (%d "
             "tried)",
             tried);
  else if (unbound > 0)
    snprintf(why, sizeof why,
             "no candidate removed the race (%d tried, %d of them could not "
             "be re-checked)",
             tried, unbound);
  else
    snprintf(why, sizeof why, "no candidate removed the race (%d tried)",
             tried);
  {
    edit e = ovl__fix_cand(c, chosen >= 0 ? chosen : 0);
    if (!ovl__fix_set(r,
                      c->n > 0 ? ovl__fix_edit_text(&e)
                               : ovl__fix_no_candidate(h, r),
                      chosen >= 0, chosen >= 0 ? NULL : why))
      return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  }
  return OVL_OK;
}
ovl_status ovl_races_check_fixes(ovl_races *r, const ovl_program *form,
                                 const ovl_schedule *s,
                                 const ovl_bind_opts *opts, ovl_error *err) {
  fixer F;
  hinter h;
  cands *c;
  ovl_status st = OVL_OK;
  if (r == NULL || form == NULL || s == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_races_check_fixes: bad argument");
  if (r->nops != form->nops)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_races_check_fixes: the report is not of this "
                    "program (%zu ops checked, the program has %zu)",
                    r->nops, form->nops);
  if (r->list.n == 0)
    return OVL_OK;
  if (r->list.more > 0)
    return ovl__fix_hints(form, r, "not checked: more races than are listed",
                          err);
  memset(&F, 0, sizeof F);
  F.form = form;
  F.S = s;
  F.opts = opts;
  F.res = r;
  F.text = ovl__schedule_text(s, &F.len);
  c = malloc(sizeof *c);
  if (c == NULL || !ovl__fix_hinter_make(&h, form, F.text, F.len) ||
      !fixer_index(&F))
    st = ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  for (size_t i = 0; st == OVL_OK && i < r->list.n; i++)
    st = check_race(&F, &h, i, c, err);
  if (c != NULL)
    ovl__fix_hinter_free(&h);
  free(c);
  fixer_free(&F);
  return st;
}
