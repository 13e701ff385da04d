/*
 * The race replay (include/ovl.h, "Race replay"; docs/ARCHITECTURE.md,
 * "The pipeline"): for each race a form's check found, a deterministic
 * perturbation that makes it show as wrong numbers. The stream of the
 * race's first access is delayed just before that access
 * (ovl__program_insert_delay); nothing the second access waits for waits
 * for that delay, so the second access runs first. One iteration, no
 * warmup: buffers that are not inputs hold the backend's poison (NaN) until
 * written, so a read that comes too early cannot find a right value. The
 * fetched values are compared with the reference.
 *
 * Called by the pipeline (pipeline/pipeline.c) after the race checks; it runs
 * on the world, never prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* Times the plain run's time that the default delay is, at least. */
#define REPLAY_DELAY_FACTOR 4.0

void ovl__replay_form_release(ovl__replay_form *f) {
  if (f == NULL)
    return;
  for (size_t i = 0; f->whys != NULL && i < f->n; i++)
    free(f->whys[i]);
  for (size_t i = 0; f->progs != NULL && i < f->n; i++)
    ovl_program_free(f->progs[i]);
  for (size_t i = 0; f->results != NULL && i < f->n; i++)
    ovl_result_free(f->results[i]);
  free(f->progs);
  free(f->results);
  free(f->whys);
  free(f->items);
  memset(f, 0, sizeof *f);
  f->delay_us = NAN;
}

/* Run `p` once (one iteration, no warmup) and compare its fetched values
 * with `ref`, as `prog`'s (the same fetched variables). With `keep` the
 * run is traced and its result kept in *keep. */
static ovl_status run_once(ovl_world *world, const ovl_program *prog,
                           const ovl_program *p, const ovl_reference *ref,
                           double rtol, double atol, ovl_check *chk,
                           double *secs, ovl_result **keep, ovl_error *err) {
  ovl_run_opts ro = {.size = sizeof ro,
                     .iters = 1,
                     .warmup = 0,
                     .trace_iter = -1,
                     .trace = keep != NULL};
  ovl_result *res = NULL;
  ovl__compare cmp = {prog, ref, rtol, atol, chk, OVL_OK, {0}};
  ovl_status st = ovl__world_run(world, p, &ro, &cmp, &res, err);
  if (st != OVL_OK)
    return st;
  *secs = ovl_result_times(res)[0];
  if (keep != NULL)
    *keep = res;
  else
    ovl_result_free(res);
  if (cmp.status != OVL_OK && err != NULL)
    *err = cmp.err;
  return cmp.status;
}

/* The variable named `name` in `p`, or -1. */
static int var_index(const ovl_program *p, const char *name) {
  for (size_t v = 0; v < p->nvars; v++)
    if (strcmp(p->vars[v].name, name) == 0)
      return (int)v;
  return -1;
}

/* Whether op i reads its inputs on the host into what is fetched. */
static bool op_fetches(const ovl_program *p, size_t i) {
  size_t n;
  const ovl__prim *pr = ovl__op_prims(p, i, &n);
  for (size_t k = 0; k < n; k++)
    if (pr[k].kind == OVL_PRIM_HOST_READ)
      return true;
  return false;
}

/* Which fetched variables depend on variable `var` from op `from` on:
 * dep[i] for fetched variable i (prog->fetch), set when a fetch at or
 * after `from` reads `var`, or a variable computed from it (by an op that
 * reads it, at or after `from`), and so on. Over-approximates (a variable
 * once computed from `var` stays so). Returns how many, or -1 when out of
 * memory. */
static long fetched_depends(const ovl_program *p, int var, size_t from,
                            bool *dep) {
  bool *tainted = calloc(p->nvars ? p->nvars : 1, sizeof *tainted);
  long n = 0;
  if (tainted == NULL)
    return -1;
  memset(dep, 0, (p->nfetch ? p->nfetch : 1) * sizeof *dep);
  tainted[var] = true;
  for (size_t i = from; i < p->nops; i++) {
    const ovl__op *op = &p->ops[i];
    bool reads = false, fetches;
    if (!op->def->reads)
      continue;
    fetches = op_fetches(p, i);
    for (int k = 0; k < op->nin; k++) {
      if (!tainted[op->in[k]])
        continue;
      reads = true;
      for (size_t f = 0; fetches && f < p->nfetch; f++)
        if (p->fetch[f] == op->in[k] && !dep[f]) {
          dep[f] = true;
          n++;
        }
    }
    if (reads && !fetches && op->def->writes && op->out >= 0)
      tainted[op->out] = true;
  }
  free(tainted);
  return n;
}

/* The delay of the replays: the caller's, or the default from the plain
 * run's time; at most half the world's timeout. */
static ovl_status choose_delay(const ovl_world *world, double given_us,
                               double plain_s, double *us, ovl_error *err) {
  double cap = 0.5 * world->timeout_s * 1e6;
  if (given_us > 0) {
    if (given_us >= world->timeout_s * 1e6)
      return ovl__err(err, OVL_EINVAL,
                      "a delay of %g s is not shorter than the timeout "
                      "(%g s): a stream waiting for the delayed one would "
                      "time out",
                      given_us * 1e-6, world->timeout_s);
    *us = given_us;
    return OVL_OK;
  }
  *us = fmax(OVL_REPLAY_MIN_DELAY_US, REPLAY_DELAY_FACTOR * plain_s * 1e6);
  if (*us > cap)
    *us = cap;
  return OVL_OK;
}

/* Fill `it` from the replay's comparison: shown when a fetched variable
 * that depends on the race's variable (dep[]) differs; the first such
 * element, and the counts over those variables. Else *why (owned) says
 * why not. False only when out of memory. */
static bool judge(const ovl_program *prog, const ovl_race_info *info,
                  const ovl_check *chk, const bool *dep, long ndep,
                  int nranks, ovl_replay *it, char **why) {
  const ovl_mismatch *first = NULL, *other = NULL;
  char buf[512];
  it->checked = 0;
  for (size_t f = 0; f < prog->nfetch; f++)
    if (dep[f])
      it->checked += (int64_t)nranks * prog->vars[prog->fetch[f]].numel;
  for (size_t k = 0; k < chk->nmismatch; k++) {
    const ovl_mismatch *mm = &chk->mismatch[k];
    if (dep[mm->fetch_index]) {
      it->mismatched += mm->count;
      if (first == NULL)
        first = mm;
    } else {
      it->other_mismatched += mm->count;
      if (other == NULL)
        other = mm;
    }
  }
  if (first != NULL) {
    it->shown = 1;
    it->rank = first->rank;
    it->fetch_index = first->fetch_index;
    it->var = prog->vars[prog->fetch[first->fetch_index]].name;
    it->index = first->first_index;
    it->got = first->got;
    it->expected = first->expected;
    return true;
  }
  if (ndep == 0)
    snprintf(buf, sizeof buf,
             "the numbers matched (nothing fetched is computed from '%s' "
             "after line %d)",
             info->var, info->first.line);
  else if (other != NULL)
    snprintf(buf, sizeof buf,
             "the numbers matched where they depend on '%s' ('%s' differs, "
             "but does not depend on it: another race)",
             info->var, prog->vars[prog->fetch[other->fetch_index]].name);
  else
    snprintf(buf, sizeof buf,
             "the numbers matched (the two accesses in the other order "
             "gave the same fetched values)");
  return (*why = ovl__strdup(buf)) != NULL;
}

/* Replay one race (its info in `info`) with the delay `us`; fills `it`
 * and its why (*why, owned). */
static ovl_status replay_one(ovl_world *world, const ovl_program *prog,
                             const ovl_program *form,
                             const ovl_race_info *info,
                             const ovl_reference *ref, double rtol,
                             double atol, double us, ovl_replay *it,
                             char **why, ovl_program **keep_prog,
                             ovl_result **keep_res, ovl_error *err) {
  ovl_program *edited = NULL;
  ovl_check chk;
  bool *dep;
  long ndep;
  int v = var_index(form, info->var);
  double secs;
  ovl_status st;

  memset(&chk, 0, sizeof chk);
  dep = calloc(form->nfetch ? form->nfetch : 1, sizeof *dep);
  if (dep == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  /* A variable the checker names is the form's; else count every fetched
   * variable as depending on it. */
  if (v >= 0) {
    ndep = fetched_depends(form, v, info->first.op, dep);
  } else {
    for (size_t f = 0; f < form->nfetch; f++)
      dep[f] = true;
    ndep = (long)form->nfetch;
  }
  if (ndep < 0) {
    free(dep);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  st = ovl__program_insert_delay(form, info->first.op, info->first.stream,
                                 us, &edited, err);
  if (st == OVL_OK)
    st = run_once(world, prog, edited, ref, rtol, atol, &chk, &secs,
                  keep_res, err);
  /* Traced: the program stays with its run, for the timeline. */
  if (st == OVL_OK && keep_prog != NULL) {
    *keep_prog = edited;
    edited = NULL;
  }
  ovl_program_free(edited);
  if (st != OVL_OK) {
    free(dep);
    ovl_check_release(&chk);
    return st;
  }
  it->delay_us = us;
  if (!judge(prog, info, &chk, dep, ndep, ovl_world_nranks(world), it, why))
    st = ovl__err(err, OVL_ENOMEM, "out of memory");
  free(dep);
  ovl_check_release(&chk);
  return st;
}

ovl_status ovl__replay_form_run(ovl_world *world, const ovl_program *prog,
                                const ovl_program *form,
                                const ovl_races *races, long which,
                                const char *not_compared,
                                const ovl_reference *ref, double rtol,
                                double atol, double delay_us, bool trace,
                                ovl__replay_form *out, ovl_error *err) {
  size_t count = ovl_races_count(races), lo, hi;
  ovl_status st = OVL_OK;

  memset(out, 0, sizeof *out);
  out->delay_us = NAN;
  if (which == OVL_REPLAY_ALL) {
    lo = 0;
    hi = count;
  } else if (which >= 1 && (size_t)which <= count) {
    lo = (size_t)which - 1;
    hi = lo + 1;
  } else {
    return OVL_OK; /* this form has no race `which` */
  }
  if (hi == lo)
    return OVL_OK;
  out->items = calloc(hi - lo, sizeof *out->items);
  out->whys = calloc(hi - lo, sizeof *out->whys);
  if (trace) {
    out->progs = calloc(hi - lo, sizeof *out->progs);
    out->results = calloc(hi - lo, sizeof *out->results);
  }
  if (out->items == NULL || out->whys == NULL ||
      (trace && (out->progs == NULL || out->results == NULL))) {
    ovl__replay_form_release(out);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  out->n = hi - lo;
  for (size_t k = lo; k < hi; k++) {
    ovl_replay *it = &out->items[k - lo];
    ovl_race_info info;
    ovl_races_get(races, k, &info);
    it->race = k;
    it->stream = info.first.stream;
    it->stream_name = ovl_program_stream_name(form, info.first.stream);
    it->op = info.first.op;
    it->line = info.first.line;
    it->delay_us = NAN;
    it->got = it->expected = NAN;
  }

  if (not_compared == NULL) {
    ovl_check chk;
    memset(&chk, 0, sizeof chk);
    st = run_once(world, prog, form, ref, rtol, atol, &chk, &out->plain_s,
                  NULL, err);
    if (st == OVL_OK) {
      out->plain_ran = true;
      out->plain_checked = chk.checked;
      out->plain_mismatched = chk.mismatched;
      st = choose_delay(world, delay_us, out->plain_s, &out->delay_us, err);
    } else {
      ovl__err_prefix(err, "the plain run: ");
    }
    ovl_check_release(&chk);
  }
  for (size_t k = 0; st == OVL_OK && k < out->n; k++) {
    ovl_replay *it = &out->items[k];
    ovl_race_info info;
    char buf[256];
    ovl_races_get(races, it->race, &info);
    if (not_compared != NULL || info.first.stream < 0) {
      if (not_compared != NULL)
        snprintf(buf, sizeof buf, "not replayed (%s)", not_compared);
      else
        snprintf(buf, sizeof buf,
                 "not replayed (the first access, line %d, is on the host: "
                 "there is no stream to delay)",
                 info.first.line);
      if ((out->whys[k] = ovl__strdup(buf)) == NULL)
        st = ovl__err(err, OVL_ENOMEM, "out of memory");
      continue;
    }
    st = replay_one(world, prog, form, &info, ref, rtol, atol, out->delay_us,
                    it, &out->whys[k], trace ? &out->progs[k] : NULL,
                    trace ? &out->results[k] : NULL, err);
    if (st != OVL_OK)
      ovl__err_prefix(err, "race %zu: ", it->race + 1);
  }
  for (size_t k = 0; k < out->n; k++)
    out->items[k].why = out->whys[k];
  if (st != OVL_OK)
    ovl__replay_form_release(out);
  return st;
}
