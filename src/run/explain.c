/*
 * Where a traced iteration went (ovl_result_explain; docs/MODEL.md,
 * "Explain"), from its spans: each instant of a rank's iteration counted
 * once, in the first class that holds (include/ovl/world.h, ovl_explain).
 * A predicted run's figures come from the simulation itself, which
 * counts them as time passes (run/model_sim.c); its spans give the same
 * classes here, for the picture (ovl__explain_segments).
 *
 * A work primitive's own time ("alone": kernels, delays, communication)
 * is in res->alone where known (the model's costs; a real run's from the
 * comp-only and comm-only forms, ovl__result_set_alone): a primitive that
 * took longer was slowed by its neighbours, and that part of its span is
 * contention. A collective's span starts when its stream reached it; its
 * transfer starts when the last rank reached it (ranks lined up on the
 * host clock of their bases): before that it waits for its peers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/run.h"

typedef struct span {
  double t0, ws, t1; /* start, transfer start (work), end */
  double eff;        /* alone / (t1 - ws), at most 1; 1 where unknown */
  uint8_t cls;       /* 0 compute, 1 communication, 2 a stream wait */
} span;

typedef struct edge {
  double t;
  int k; /* span */
  bool open;
} edge;

static int edge_cmp(const void *a, const void *b) {
  const edge *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return (int)x->open - (int)y->open; /* closes first */
}

static const double *span_at(const ovl_result *res, int rank, size_t p) {
  return res->spans + ((size_t)rank * res->nprims + p) * 2;
}

/* The latest start over the ranks (host clock) of each ring's k-th
 * collective, late[ring * ncoll + k] (-INFINITY where no rank timed it):
 * a collective's transfer starts when its last rank has reached it.
 * NULL: out of memory. */
static double *latest_starts(const ovl_program *prog, const ovl_result *res,
                             size_t *ncoll) {
  size_t n = 0, rings = prog->nrings > 0 ? (size_t)prog->nrings : 1;
  double *late;
  for (size_t p = 0; p < prog->nprims; p++)
    n += prog->prims[p].kind == OVL_PRIM_COLL;
  *ncoll = n;
  late = malloc((rings * n + 1) * sizeof *late);
  if (late == NULL)
    return NULL;
  for (size_t k = 0; k < rings * n; k++)
    late[k] = -INFINITY;
  for (int r = 0; r < res->nranks; r++) {
    size_t cnt[OVL_MAX_RINGS] = {0};
    for (size_t j = 0; j < prog->nops; j++) {
      const ovl__op *op = &prog->ops[j];
      if (!ovl__op_on_rank(op, r))
        continue;
      for (size_t q = prog->prim_first[j]; q < prog->prim_first[j + 1]; q++)
        if (prog->prims[q].kind == OVL_PRIM_COLL) {
          double *l = &late[(size_t)op->ring_id * n + cnt[op->ring_id]++];
          double t = res->trace_base[r] + span_at(res, r, q)[0];
          if (!isnan(t) && t > *l)
            *l = t;
        }
    }
  }
  return late;
}

ovl_status ovl__explain_segments(const ovl_program *prog, const ovl_result *res,
                                 int rank, ovl_explain *out, ovl__xseg **segs,
                                 size_t *nsegs, ovl_error *err) {
  span *sp = malloc((prog->nprims + 1) * sizeof *sp);
  edge *ev = malloc((2 * prog->nprims + 1) * sizeof *ev);
  ovl__xseg *sg = NULL;
  size_t n = 0, ne = 0, ns = 0;
  double T = res->times[res->trace_iter], acc[5] = {0}, t = 0;
  double *late = NULL;
  size_t ncoll = 0, cnt[OVL_MAX_RINGS] = {0};
  bool *on = NULL;
  if (segs != NULL)
    sg = malloc((4 * prog->nprims + 2) * sizeof *sg);
  on = calloc(prog->nprims + 1, sizeof *on);
  late = latest_starts(prog, res, &ncoll);
  if (sp == NULL || ev == NULL || on == NULL || late == NULL ||
      (segs != NULL && sg == NULL)) {
    free(sp);
    free(ev);
    free(sg);
    free(on);
    free(late);
    return ovl__err(err, OVL_ENOMEM, "explain: out of memory");
  }
  for (size_t j = 0; j < prog->nops; j++) {
    const ovl__op *op = &prog->ops[j];
    if (!ovl__op_on_rank(op, rank))
      continue;
    for (size_t p = prog->prim_first[j]; p < prog->prim_first[j + 1]; p++) {
      const ovl__prim *pr = &prog->prims[p];
      const double *s = span_at(res, rank, p);
      span *x = &sp[n];
      /* This rank's k-th collective of its ring (counted whether timed). */
      size_t k = pr->kind == OVL_PRIM_COLL ? cnt[op->ring_id]++ : 0;
      if (ovl__prim_on_host(pr) || isnan(s[0]) || isnan(s[1]))
        continue;
      if (pr->kind == OVL_PRIM_WAIT)
        x->cls = 2;
      else if (ovl__prim_is_comm(pr))
        x->cls = 1;
      else if (ovl__prim_works(pr))
        x->cls = 0;
      else
        continue;
      x->t0 = s[0];
      x->t1 = s[1] > s[0] ? s[1] : s[0];
      x->ws =
          pr->kind == OVL_PRIM_COLL
              ? late[(size_t)op->ring_id * ncoll + k] - res->trace_base[rank]
              : x->t0;
      if (x->ws < x->t0)
        x->ws = x->t0;
      if (x->ws > x->t1)
        x->ws = x->t1;
      x->eff = 1;
      if (res->alone != NULL && x->cls != 2) {
        double a = res->alone[(size_t)rank * res->nprims + p];
        if (!isnan(a) && x->t1 > x->ws && a < x->t1 - x->ws)
          x->eff = a / (x->t1 - x->ws);
      }
      ev[ne++] = (edge){x->t0, (int)n, true};
      ev[ne++] = (edge){x->t1, (int)n, false};
      n++;
    }
  }
  free(late);
  qsort(ev, ne, sizeof *ev, edge_cmp);
  for (size_t e = 0; e <= ne; e++) {
    double te = e < ne ? ev[e].t : T, dt;
    if (te > T)
      te = T;
    dt = te - t;
    if (dt > 0) {
      /* What holds over [t, te): the spans open now. */
      double kr = 0, ce = 2;
      bool comm = false, wait = false;
      int cls;
      for (size_t k = 0; k < n; k++) {
        if (!on[k])
          continue;
        if (sp[k].cls == 0)
          kr += sp[k].eff;
        else if (sp[k].cls == 1 && t >= sp[k].ws) {
          comm = true;
          ce = sp[k].eff < ce ? sp[k].eff : ce;
        } else {
          wait = true;
        }
      }
      if (kr > 0) {
        double p = kr < 1 ? kr : 1;
        acc[0] += dt * p;
        acc[2] += dt * (1 - p);
        cls = p < 0.5 ? 2 : 0;
      } else if (comm) {
        acc[1] += dt * ce;
        acc[2] += dt * (1 - ce);
        cls = ce < 0.5 ? 2 : 1;
      } else if (wait) {
        acc[4] += dt;
        cls = 4;
      } else {
        acc[3] += dt;
        cls = 3;
      }
      if (sg != NULL) {
        if (ns > 0 && sg[ns - 1].kind == cls && sg[ns - 1].t1 == t)
          sg[ns - 1].t1 = te;
        else
          sg[ns++] = (ovl__xseg){t, te, (uint8_t)cls};
      }
      t = te;
    }
    if (e < ne)
      on[ev[e].k] = ev[e].open;
  }
  out->total = T;
  out->compute = acc[0];
  out->exposed_comm = acc[1];
  out->contention = res->alone != NULL ? acc[2] : NAN;
  out->host = acc[3];
  out->waits = acc[4];
  out->rank = rank;
  free(sp);
  free(ev);
  free(on);
  if (segs != NULL) {
    *segs = sg;
    *nsegs = ns;
  }
  return OVL_OK;
}

/* The rank whose last stream work ends last. */
static int slowest_rank(const ovl_program *prog, const ovl_result *res) {
  int best = 0;
  double most = -INFINITY;
  for (int r = 0; r < res->nranks; r++)
    for (size_t p = 0; p < prog->nprims; p++) {
      double e = span_at(res, r, p)[1];
      if (!ovl__prim_on_host(&prog->prims[p]) && !isnan(e) && e > most) {
        most = e;
        best = r;
      }
    }
  return best;
}

ovl_status ovl__result_explain(const ovl_program *prog, const ovl_result *res,
                               ovl_explain *out, bool *have, ovl_error *err) {
  *have = false;
  if (res->have_explain) {
    *out = res->explain;
    *have = true;
    return OVL_OK;
  }
  if (prog == NULL || res->spans == NULL || res->trace_iter < 0 ||
      prog->nprims != res->nprims || prog->nranks != res->nranks)
    return OVL_OK;
  *have = true;
  return ovl__explain_segments(prog, res, slowest_rank(prog, res), out, NULL,
                               NULL, err);
}

int ovl_result_explain(const ovl_program *prog, const ovl_result *res,
                       ovl_explain *out) {
  bool have;
  if (res == NULL || out == NULL ||
      ovl__result_explain(prog, res, out, &have, NULL) != OVL_OK)
    return -1;
  return have ? 0 : -1;
}
