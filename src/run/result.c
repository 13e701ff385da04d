/*
 * Results of a run: iteration times, the last fetched values, op times,
 * the trace's spans and the machine (see run/run.h for the layout).
 * Filled by ovl_world_run (run/exec.c) and its rank threads, read through
 * the public API.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/run.h"

void ovl_result_free(ovl_result *res) {
  if (res == NULL)
    return;
  if (res->fetched != NULL)
    for (size_t i = 0; i < (size_t)res->nranks * res->nfetch; i++)
      free(res->fetched[i]);
  free(res->fetched);
  free(res->times);
  free(res->op_times);
  free(res->spans);
  free(res->alone);
  free(res->span_main);
  free(res->span_record);
  free(res->trace_base);
  if (res->device_names != NULL)
    for (int r = 0; r < res->nranks; r++)
      free(res->device_names[r]);
  free(res->device_names);
  free(res->backend);
  free(res->devices);
  free(res);
}

ovl_status ovl__result_set_machine(ovl_result *res, const ovl_world *world,
                                   ovl_error *err) {
  bool ok;
  res->backend = ovl__strdup(ovl_world_backend_name(world));
  res->devices = ovl__strdup(ovl_world_devices(world));
  res->device_names = calloc((size_t)res->nranks + 1,
                             sizeof *res->device_names);
  ok = res->backend != NULL && res->devices != NULL &&
       res->device_names != NULL;
  for (int r = 0; ok && r < res->nranks; r++)
    ok = (res->device_names[r] =
              ovl__strdup(ovl_world_device_name(world, r))) != NULL;
  return ok ? OVL_OK : ovl__err(err, OVL_ENOMEM, "out of memory");
}

/* Per op, its main primitive and the record primitive beside it. */
static bool span_index(ovl_result *res, const ovl_program *prog) {
  res->span_main = malloc((prog->nops + 1) * sizeof *res->span_main);
  res->span_record = malloc((prog->nops + 1) * sizeof *res->span_record);
  if (res->span_main == NULL || res->span_record == NULL)
    return false;
  for (size_t i = 0; i < prog->nops; i++) {
    size_t main = ovl__op_main_prim(prog, i);
    res->span_main[i] = (uint32_t)main;
    res->span_record[i] = -1;
    for (size_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++)
      if (p != main && prog->prims[p].kind == OVL_PRIM_RECORD) {
        res->span_record[i] = (int64_t)p;
        break;
      }
  }
  return true;
}

ovl_status ovl__result_new(const ovl_program *prog, int nranks, int iters,
                           bool op_times, int trace_iter, ovl_result **out,
                           ovl_error *err) {
  ovl_result *res = calloc(1, sizeof *res);
  bool ok;
  if (res == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  res->nranks = nranks;
  res->lo = 0;
  res->hi = nranks;
  res->all_held = true;
  res->nfetch = prog->nfetch;
  res->iters = iters;
  res->times = calloc(iters > 0 ? (size_t)iters : 1, sizeof *res->times);
  res->fetched = calloc((size_t)nranks * prog->nfetch + 1,
                        sizeof *res->fetched);
  res->nops = prog->nops;
  res->nprims = prog->nprims;
  ok = res->times != NULL && res->fetched != NULL;
  if (ok && op_times) {
    res->op_times = calloc((size_t)nranks * prog->nops + 1,
                           sizeof *res->op_times);
    ok = res->op_times != NULL;
  }
  res->trace_iter = trace_iter;
  if (ok && trace_iter >= 0) {
    size_t n = (size_t)nranks * prog->nprims * 2;
    res->spans = malloc((n ? n : 1) * sizeof *res->spans);
    res->trace_base = calloc((size_t)nranks, sizeof *res->trace_base);
    ok = res->spans != NULL && res->trace_base != NULL &&
         span_index(res, prog);
    for (size_t i = 0; ok && i < n; i++)
      res->spans[i] = NAN;
  }
  if (!ok) {
    ovl_result_free(res);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  *out = res;
  return OVL_OK;
}

int ovl_result_iters(const ovl_result *res) { return res->iters; }
int ovl_result_nranks(const ovl_result *res) { return res->nranks; }
const char *ovl_result_backend(const ovl_result *res) { return res->backend; }
const char *ovl_result_devices(const ovl_result *res) { return res->devices; }
const char *ovl_result_device_name(const ovl_result *res, int rank) {
  if (res == NULL || res->device_names == NULL || rank < 0 ||
      rank >= res->nranks)
    return NULL;
  return res->device_names[rank];
}
const double *ovl_result_times(const ovl_result *res) { return res->times; }
const double *ovl_result_fetched(const ovl_result *res, int rank, size_t i) {
  if (rank < 0 || rank >= res->nranks || i >= res->nfetch)
    return NULL;
  return res->fetched[(size_t)rank * res->nfetch + i];
}

const double *ovl_result_op_times(const ovl_result *res, int rank) {
  if (res->op_times == NULL || rank < 0 || rank >= res->nranks)
    return NULL;
  return res->op_times + (size_t)rank * res->nops;
}

int ovl_result_trace_iter(const ovl_result *res) {
  return res != NULL && res->spans != NULL ? res->trace_iter : -1;
}

int ovl__result_prim_span(const ovl_result *res, int rank, size_t p,
                          double *start, double *end) {
  const double *s;
  if (res == NULL || res->spans == NULL || rank < 0 || rank >= res->nranks ||
      p >= res->nprims)
    return -1;
  s = res->spans + ((size_t)rank * res->nprims + p) * 2;
  if (isnan(s[0]) || isnan(s[1]))
    return -1;
  if (start != NULL)
    *start = s[0];
  if (end != NULL)
    *end = s[1];
  return 0;
}

int ovl_result_span(const ovl_result *res, int rank, size_t op,
                    double *start, double *end) {
  if (res == NULL || res->spans == NULL || op >= res->nops)
    return -1;
  return ovl__result_prim_span(res, rank, res->span_main[op], start, end);
}

int ovl_result_record_span(const ovl_result *res, int rank, size_t op,
                           double *start, double *end) {
  if (res == NULL || res->spans == NULL || op >= res->nops ||
      res->span_record[op] < 0)
    return -1;
  return ovl__result_prim_span(res, rank, (size_t)res->span_record[op],
                               start, end);
}

double ovl_result_trace_base(const ovl_result *res, int rank) {
  if (res == NULL || res->trace_base == NULL || rank < 0 ||
      rank >= res->nranks)
    return NAN;
  return res->trace_base[rank];
}

/* ------------------------------------------------------------------ */
/* More than one process                                               */
/* ------------------------------------------------------------------ */

/* Fetched variable i of every rank, as rows of 1 + numel doubles (the
 * first: whether the rank fetched it). */
static ovl_status merge_fetched(ovl_result *res, const ovl__layout *lay,
                                size_t i, size_t numel, ovl_error *err) {
  size_t row = numel + 1;
  double *all = malloc((size_t)res->nranks * row * sizeof *all + 1);
  ovl_status st;
  if (all == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  for (int r = lay->first; r < lay->first + lay->nlocal; r++) {
    double *at = all + (size_t)r * row;
    const double *v = res->fetched[(size_t)r * res->nfetch + i];
    at[0] = v != NULL;
    if (v != NULL && numel > 0)
      memcpy(at + 1, v, numel * sizeof *v);
  }
  st = ovl__layout_gather(lay, all, row * sizeof *all, err);
  for (int r = 0; st == OVL_OK && r < res->nranks; r++) {
    double **slot = &res->fetched[(size_t)r * res->nfetch + i];
    if ((r >= lay->first && r < lay->first + lay->nlocal) ||
        all[(size_t)r * row] == 0)
      continue;
    *slot = malloc((numel ? numel : 1) * sizeof **slot);
    if (*slot == NULL)
      st = ovl__err(err, OVL_ENOMEM, "out of memory");
    else if (numel > 0)
      memcpy(*slot, all + (size_t)r * row + 1, numel * sizeof **slot);
  }
  free(all);
  return st;
}

ovl_status ovl__result_merge(ovl_result *res, const ovl__layout *lay,
                             const ovl_program *prog, ovl_error *err) {
  ovl_status st = ovl__procs_bcast(lay->procs, res->times,
                                   (size_t)res->iters * sizeof *res->times, 0,
                                   err);
  if (st == OVL_OK && res->op_times != NULL && res->nops > 0)
    st = ovl__layout_gather(lay, res->op_times,
                            res->nops * sizeof *res->op_times, err);
  if (st == OVL_OK && res->spans != NULL && res->nprims > 0)
    st = ovl__layout_gather(lay, res->spans,
                            res->nprims * 2 * sizeof *res->spans, err);
  if (st == OVL_OK && res->trace_base != NULL)
    st = ovl__layout_gather(lay, res->trace_base, sizeof *res->trace_base,
                            err);
  res->all_held = true;
  for (size_t i = 0; st == OVL_OK && i < res->nfetch; i++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, i, &v);
    if ((size_t)v.numel * (size_t)res->nranks * sizeof(double) <=
        OVL__GATHER_FETCHED_MAX)
      st = merge_fetched(res, lay, i, (size_t)v.numel, err);
    else
      res->all_held = false;
  }
  return st;
}

int ovl_result_predicted(const ovl_result *res) {
  return res != NULL && res->predicted;
}

ovl_status ovl__result_set_alone(ovl_result *res, const double *alone,
                                 ovl_error *err) {
  size_t n = (size_t)res->nranks * res->nprims;
  double *a = malloc((n ? n : 1) * sizeof *a);
  if (a == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  memcpy(a, alone, n * sizeof *a);
  free(res->alone);
  res->alone = a;
  return OVL_OK;
}

ovl_status ovl__run_check(const ovl_world *world, const ovl_program *prog,
                          const ovl_run_opts *opts, ovl_error *err) {
  if (opts->iters < 1 || opts->warmup < 0)
    return ovl__err(err, OVL_EINVAL,
                    "iterations must be >= 1 and warmup >= 0 (got %d, %d)",
                    opts->iters, opts->warmup);
  if (prog->nranks != world->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "%s was parsed for %d ranks but the world has %d",
                    prog->filename, prog->nranks, world->nranks);
  return OVL_OK;
}

ovl_status ovl__run_traced(const ovl_run_opts *opts, int *traced,
                           ovl_error *err) {
  int k;
  *traced = -1;
  if (!opts->trace)
    return OVL_OK;
  k = opts->trace_iter < 0 ? opts->iters + opts->trace_iter : opts->trace_iter;
  if (k < 0 || k >= opts->iters)
    return ovl__err(err, OVL_EINVAL,
                    "trace iteration %d: there are %d timed iterations "
                    "(0 to %d, or -1 to -%d from the end)",
                    opts->trace_iter, opts->iters, opts->iters - 1,
                    opts->iters);
  *traced = k;
  return OVL_OK;
}
