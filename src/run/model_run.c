/*
 * The model's run (docs/ARCHITECTURE.md, "The model backend"; docs/MODEL.md):
 * a program's primitives, as the executor would enqueue them, run by a
 * discrete-event simulation instead of a machine. Each rank has a host
 * (it enqueues every stream primitive in program order, paying the
 * profile's host cost for each, eager, or one graph launch per segment
 * with --graph; it blocks at host syncs) and streams (queues: a primitive
 * starts when its stream reaches it and it has been enqueued; a wait
 * until the record it refers to, the event's last record when the wait
 * was enqueued, has completed; a collective when every rank that runs it
 * has reached it; a send and its receive when both have; work takes the
 * cost model's seconds, stretched while its neighbours slow it:
 * contention). No number is computed: a run gives times, op times and a
 * trace, marked predicted, and where each rank's iteration went
 * (ovl_explain), never fetched values.
 *
 * Every iteration of a run is the same (the executor drains every stream
 * and meets at a barrier between iterations), so one is simulated and its
 * time given to all. Ranks that run the same program (no ranks=[...], no
 * rank-dependent attribute, no point-to-point) are simulated once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/model_sim.h"

/* The simulated iteration into the result: every iteration's time, the
 * op times, the trace, where the time went. */
static ovl_status fill_result(const sim *s, const ovl_run_opts *o,
                              ovl_result *res, ovl_error *err) {
  const ovl_program *prog = s->prog;
  double T = 0, done = 0, iter_s = ovl__model_iter_s(s->m);
  int slowest = 0;
  for (int i = 0; i < s->nsim; i++)
    if (s->r[i].t_done > done) {
      done = s->r[i].t_done;
      slowest = i;
    }
  /* The iteration's own cost (its barriers, its drain) comes on top. */
  T = done + iter_s;
  for (int it = 0; it < res->iters; it++)
    res->times[it] = T;
  if (res->spans != NULL) {
    /* Each work primitive's own time: the picture's contention. */
    size_t n = (size_t)s->nranks * prog->nprims;
    res->alone = malloc((n ? n : 1) * sizeof *res->alone);
    if (res->alone == NULL)
      return ovl__err(err, OVL_ENOMEM, "model: out of memory");
    for (size_t k = 0; k < n; k++)
      res->alone[k] = NAN;
  }
  for (int rank = 0; rank < s->nranks; rank++) {
    const srank *r = &s->r[s->slot_of[rank]];
    for (size_t k = 0; k < r->nitems; k++) {
      const item *it = &r->items[k];
      for (uint32_t p = it->p0; p < it->p1; p++) {
        size_t i = it->op;
        while (i + 1 < prog->nops && prog->prim_first[i + 1] <= p)
          i++;
        if (!ovl__op_on_rank(&prog->ops[i], r->rank))
          continue;
        if (res->op_times != NULL && ovl__prim_works(&prog->prims[p]))
          res->op_times[(size_t)rank * prog->nops + i] +=
              (it->end - it->start) * res->iters;
        if (res->spans != NULL) {
          double *sp = res->spans + ((size_t)rank * prog->nprims + p) * 2;
          sp[0] = it->start;
          sp[1] = it->end;
        }
      }
    }
    if (res->alone != NULL)
      for (size_t k = 0; k < r->nitems; k++) {
        const item *it = &r->items[k];
        if (it->p1 == it->p0 + 1 && ovl__prim_works(&prog->prims[it->p0]) &&
            it->kind != OVL_PRIM_SEND && it->kind != OVL_PRIM_RECV)
          res->alone[(size_t)rank * prog->nprims + it->p0] = it->alone;
      }
    if (res->spans != NULL) {
      for (size_t p = 0; p < prog->nprims; p++)
        if (ovl__prim_on_host(&prog->prims[p]) && !isnan(r->hspan[2 * p])) {
          double *sp = res->spans + ((size_t)rank * prog->nprims + p) * 2;
          sp[0] = r->hspan[2 * p];
          sp[1] = r->hspan[2 * p + 1];
        }
      res->trace_base[rank] = 0;
    }
  }
  {
    const srank *r = &s->r[slowest];
    res->have_explain = true;
    res->explain.total = T;
    res->explain.compute = r->explain[0];
    res->explain.exposed_comm = r->explain[1];
    res->explain.contention = r->explain[2];
    res->explain.host = r->explain[3] + iter_s;
    res->explain.waits = r->explain[4] + (done - r->t_done);
    res->explain.rank = r->rank;
  }
  res->predicted = true;
  (void)o;
  return OVL_OK;
}

ovl_status ovl__model_run(ovl_world *world, const ovl__model *m,
                          const ovl_program *prog, const ovl_run_opts *o,
                          ovl__compare *cmp, ovl_result **out, ovl_error *err) {
  sim s = {0};
  ovl_result *res = NULL;
  int traced;
  ovl_status st = ovl__run_check(world, prog, o, err);
  if (st == OVL_OK)
    st = ovl__run_traced(o, &traced, err);
  if (st != OVL_OK)
    return st;
  world->ran = true;
  st = ovl__result_new(prog, world->nranks, o->iters, o->op_times != 0, traced,
                       &res, err);
  if (st == OVL_OK)
    st = ovl__result_set_machine(res, world, err);
  if (st == OVL_OK)
    st = ovl__sim_init(&s, m, prog, o->graph != 0, err);
  if (st == OVL_OK) {
    st = ovl__sim_simulate(&s);
    if (st == OVL_OK)
      st = fill_result(&s, o, res, err);
  }
  ovl__sim_free(&s);
  if (st != OVL_OK) {
    ovl_result_free(res);
    return st;
  }
  if (cmp != NULL) {
    /* Nothing was computed: there is nothing to compare. */
    cmp->status = OVL_OK;
  }
  *out = res;
  return OVL_OK;
}
