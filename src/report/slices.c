/*
 * Slices of the traced iteration (report/slices.h), shared by the trace
 * and the picture.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/slices.h"

const char *const ovl__tl_cat_names[CAT__COUNT] = {
    "compute", "collective", "record",   "delay",
    "host",    "event_wait", "host_sync"};

/* The category (colour) of a primitive. */
cat_t ovl__tl_prim_cat(const ovl__prim *p) {
  switch ((ovl__prim_kind)p->kind) {
  case OVL_PRIM_KERNEL:
    return CAT_COMPUTE;
  case OVL_PRIM_COLL:
  case OVL_PRIM_SEND:
  case OVL_PRIM_RECV:
    return CAT_COLLECTIVE;
  case OVL_PRIM_DELAY:
    return CAT_DELAY;
  case OVL_PRIM_HOST_SYNC:
    return CAT_HOST_SYNC;
  case OVL_PRIM_HOST_READ:
    return CAT_HOST;
  case OVL_PRIM_WAIT:
    return CAT_EVENT_WAIT;
  case OVL_PRIM_RECORD:
  default:
    return CAT_RECORD;
  }
}

int64_t ovl__tl_to_ns(double offset_s, double s) {
  return (int64_t)llround((offset_s + s) * 1e9);
}

/* Earliest base of a run's ranks (its time 0). */
double ovl__tl_run_origin(const ovl_result *res, int nranks) {
  double o = INFINITY;
  for (int r = 0; r < nranks; r++)
    o = fmin(o, ovl_result_trace_base(res, r));
  return o;
}

/* Append the slice of primitive p (op i) spanning [a, b] on `lane`. */
static void add_slice(rank_slices *out, int64_t *last, const ovl_program *prog,
                      size_t i, size_t p, int lane, double offset, double a,
                      double b) {
  const ovl__prim *pr = &prog->prims[p];
  slice *sl = &out->s[out->n++];
  sl->op = i;
  sl->prim = p;
  sl->lane = lane;
  sl->record = pr->kind == OVL_PRIM_RECORD && !pr->main;
  sl->cat = ovl__tl_prim_cat(pr);
  sl->t_peers = 0;
  sl->race = 0;
  sl->t0 = ovl__tl_to_ns(offset, a);
  sl->t1 = ovl__tl_to_ns(offset, b);
  if (sl->t0 < last[lane])
    sl->t0 = last[lane];
  if (sl->t1 < sl->t0 + 2)
    sl->t1 = sl->t0 + 2;
  last[lane] = sl->t1;
}

/* Build one rank's slices: one per stream primitive, one per host op.
 * Returns false when out of memory. */
bool ovl__tl_build_slices(const ovl_program *prog, const ovl_result *res,
                         int rank, double origin, rank_slices *out) {
  int nstreams = prog->nstreams;
  int64_t *last = calloc((size_t)nstreams + 1, sizeof *last);
  double offset = ovl_result_trace_base(res, rank) - origin;
  out->n = 0;
  out->s = malloc((prog->nprims + 1) * sizeof *out->s);
  if (out->s == NULL || last == NULL) {
    free(out->s);
    free(last);
    out->s = NULL;
    return false;
  }
  for (size_t i = 0; i < prog->nops; i++) {
    double a, b;
    if (ovl__op_on_host(prog, i)) {
      size_t m = ovl__op_main_prim(prog, i);
      /* fetch reads on the host after its sync: the read's colour. */
      if (ovl__result_prim_span(res, rank, m, &a, &b) == 0)
        add_slice(out, last, prog, i, m, nstreams, offset, a, b);
      continue;
    }
    for (size_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++)
      if (ovl__result_prim_span(res, rank, p, &a, &b) == 0)
        add_slice(out, last, prog, i, p, prog->prims[p].stream, offset, a, b);
  }
  free(last);
  return true;
}

/* The first race of the run's marks on op `op` of `rank`, or 0. */
static int race_of(const tl_run *run, size_t op, int rank) {
  for (size_t k = 0; k < run->nmarks; k++)
    if (run->marks[k].op == op && ((run->marks[k].ranks >> rank) & 1))
      return run->marks[k].race;
  return 0;
}

/* The collectives of a run: each rank's k-th on a ring waits for its
 * peers until the last rank starts its k-th (ranks lined up on the host
 * clock). False when out of memory. */
static bool peer_waits(const tl_run *run, rank_slices *rs,
                       int nranks) {
  const ovl_program *prog = run->prog;
  int nrings = prog->nrings > 0 ? prog->nrings : 1;
  size_t ncoll = 0;
  int64_t *start;
  uint32_t *k;
  for (size_t i = 0; i < prog->nops; i++)
    ncoll += prog->prims[ovl__op_main_prim(prog, i)].kind == OVL_PRIM_COLL;
  start = calloc((size_t)nrings * (ncoll + 1), sizeof *start);
  k = calloc((size_t)nrings, sizeof *k);
  if (start == NULL || k == NULL) {
    free(start);
    free(k);
    return false;
  }
  /* The latest start of each (ring, k), then each rank's wait. */
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < nranks; r++) {
      memset(k, 0, (size_t)nrings * sizeof *k);
      for (size_t j = 0; j < rs[r].n; j++) {
        slice *sl = &rs[r].s[j];
        int ring = prog->ops[sl->op].ring_id;
        int64_t *at;
        if (prog->prims[sl->prim].kind != OVL_PRIM_COLL || ring < 0 ||
            ring >= nrings)
          continue;
        at = &start[(size_t)ring * (ncoll + 1) + k[ring]++];
        if (pass == 0 && sl->t0 > *at)
          *at = sl->t0;
        else if (pass == 1 && *at > sl->t0)
          sl->t_peers = *at < sl->t1 ? *at : sl->t1;
      }
    }
  free(start);
  free(k);
  return true;
}

/* All ranks of all runs; NULL when out of memory. [run * nranks + rank] */
rank_slices *ovl__tl_build_all(const tl_run *runs, size_t nruns,
                              int nranks) {
  rank_slices *all = calloc(nruns * (size_t)nranks + 1, sizeof *all);
  if (all == NULL)
    return NULL;
  for (size_t k = 0; k < nruns; k++) {
    double origin = ovl__tl_run_origin(runs[k].res, nranks);
    bool ok = true;
    for (int r = 0; ok && r < nranks; r++) {
      rank_slices *rs = &all[k * (size_t)nranks + (size_t)r];
      ok = ovl__tl_build_slices(runs[k].prog, runs[k].res, r, origin, rs);
      for (size_t j = 0; ok && runs[k].nmarks > 0 && j < rs->n; j++)
        rs->s[j].race = race_of(&runs[k], rs->s[j].op, r);
    }
    if (!ok || !peer_waits(&runs[k], &all[k * (size_t)nranks], nranks)) {
      for (size_t j = 0; j < nruns * (size_t)nranks; j++)
        free(all[j].s);
      free(all);
      return NULL;
    }
  }
  return all;
}

void ovl__tl_free_all(rank_slices *all, size_t n) {
  if (all == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    free(all[i].s);
  free(all);
}

const char *ovl__tl_lane_name(const ovl_program *prog, int lane) {
  return ovl__stream_name(prog, lane == prog->nstreams ? OVL_STREAM_HOST
                                                       : lane);
}

uint64_t ovl__tl_var_bytes(const ovl_program *prog, int v) {
  return (uint64_t)prog->vars[v].numel * ovl_dtype_size(prog->vars[v].dtype);
}

/* Bytes an op moves, as its row says: the inputs it reads and the output
 * it writes (fetch: what it copies to the host); none for waits, syncs and
 * delays. */
uint64_t ovl__tl_op_bytes(const ovl_program *prog, const ovl__op *op) {
  uint64_t n = 0;
  for (int k = 0; op->def->reads && k < op->nin; k++)
    n += ovl__tl_var_bytes(prog, op->in[k]);
  if (op->def->writes && op->out >= 0)
    n += ovl__tl_var_bytes(prog, op->out);
  return n;
}

/* Per op, its number among the comm ops (collectives, sends, receives)
 * of its ring on `rank` (from 0), or -1: not a comm op, or not run there. */
int *ovl__tl_comm_seqs(const ovl_program *prog, int rank) {
  int next[OVL_MAX_RINGS] = {0};
  int *seq = malloc((prog->nops + 1) * sizeof *seq);
  if (seq == NULL)
    return NULL;
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    seq[i] = -1;
    if (ovl__prim_is_comm(&prog->prims[ovl__op_main_prim(prog, i)]) &&
        ovl__op_on_rank(op, rank) && op->ring_id >= 0 &&
        op->ring_id < OVL_MAX_RINGS)
      seq[i] = next[op->ring_id]++;
  }
  return seq;
}

const char *ovl__tl_base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

ovl_status ovl__tl_check_runs(const ovl_timeline_run *runs, size_t nruns,
                              char **text, ovl_error *err) {
  if (text != NULL)
    *text = NULL;
  if (runs == NULL || nruns == 0 || text == NULL)
    return ovl__err(err, OVL_EINVAL, "timeline: bad argument");
  for (size_t k = 0; k < nruns; k++) {
    if (runs[k].prog == NULL || runs[k].res == NULL)
      return ovl__err(err, OVL_EINVAL, "timeline: run %zu has no result",
                      k);
    if (ovl_result_trace_iter(runs[k].res) < 0)
      return ovl__err(err, OVL_EINVAL,
                      "timeline: the %s run was not traced (run it with "
                      "ovl_run_opts.trace)",
                      ovl_mode_name(runs[k].mode));
    if (runs[k].prog->nranks != ovl_result_nranks(runs[k].res) ||
        ovl_result_nranks(runs[k].res) != ovl_result_nranks(runs[0].res))
      return ovl__err(err, OVL_EINVAL,
                      "timeline: the %s run has %d ranks (its program %d), "
                      "the %s run %d",
                      ovl_mode_name(runs[k].mode),
                      ovl_result_nranks(runs[k].res), runs[k].prog->nranks,
                      ovl_mode_name(runs[0].mode),
                      ovl_result_nranks(runs[0].res));
  }
  return OVL_OK;
}

ovl_status ovl__tl_finish(ovl__sbuf *b, char **text, size_t *len, ovl_error *err) {
  if (b->fail || b->s == NULL) {
    free(b->s);
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  }
  *text = b->s;
  if (len != NULL)
    *len = b->len;
  return OVL_OK;
}

tl_run *ovl__tl_runs(const ovl_timeline_run *runs,
                     const ovl_timeline_marks *marks, size_t nruns) {
  tl_run *t = calloc(nruns + 1, sizeof *t);
  if (t == NULL)
    return NULL;
  for (size_t k = 0; k < nruns; k++) {
    t[k].mode = runs[k].mode;
    t[k].prog = runs[k].prog;
    t[k].res = runs[k].res;
    if (marks != NULL) {
      t[k].label = marks[k].label;
      t[k].marks = marks[k].marks;
      t[k].nmarks = marks[k].marks != NULL ? marks[k].nmarks : 0;
    }
  }
  return t;
}
