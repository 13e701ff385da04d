/*
 * The model's streams and time (run/model_sim.h): a stream's head item
 * starts when enqueued and reached (a wait when its record has completed,
 * a collective when every rank has reached it, a send when its receive
 * has); work runs at a rate its neighbours set (contention); time jumps
 * to the next end or start. Where each rank's time goes is counted as it
 * passes (ovl_explain).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/model_sim.h"

/* ------------------------------------------------------------------ */
/* The streams                                                         */
/* ------------------------------------------------------------------ */

static int kernel_class(const ovl_program *prog, const item *it) {
  return prog->ops[it->op].def->kernel == OVL_KERNEL_MATMUL ? OVL__KC_MATMUL
                                                            : OVL__KC_MEM;
}

/* Start work on the parts chained from `first` (n items). */
static bool start_work(sim *s, int kind, int kc, int comm, double alone,
                       int first, int n) {
  work *w;
  if (!ovl__sim_grow((void **)&s->w, &s->wcap, s->nw + 1, sizeof *s->w))
    return ovl__sim_oom(s);
  w = &s->w[s->nw++];
  w->kind = kind;
  w->kc = kc;
  w->comm = comm;
  w->left = alone;
  w->rate = 1;
  w->first = first;
  w->n = n;
  for (int p = first; p >= 0; p = s->part_next[p]) {
    srank *r = &s->r[s->part_slot[p]];
    item *it = &r->items[s->part_item[p]];
    if (it->state == Q_ARRIVED)
      r->nblocked--;
    it->state = Q_RUNNING;
    if (kind == W_COMM && it->work_start < 0)
      it->work_start = s->now;
  }
  return true;
}

/* Rank r's item k joins instance `in` (one more part, one more transfer
 * it waits for); false: out of memory. */
static bool join(sim *s, inst *in, int slot, int k) {
  int part = ovl__sim_add_part(s, slot, k, in->first_part);
  if (part < 0)
    return false;
  in->first_part = part;
  s->r[slot].items[k].pending++;
  in->arrived++;
  return true;
}

/* Rank r's item k (a collective) reaches its stream's head. */
static bool arrive_coll(sim *s, int slot, int k) {
  srank *r = &s->r[slot];
  item *it = &r->items[k];
  const ovl__op *op = &s->prog->ops[it->op];
  uint32_t kth = r->ncoll[op->ring_id]++;
  int expected = s->nsim == 1 ? 1 : __builtin_popcountll(op->ranks);
  inst *in = ovl__sim_instance(
      s, 1ull << 62 | (uint64_t)op->ring_id << 40 | kth, expected);
  if (in == NULL || !join(s, in, slot, k))
    return false;
  if (in->arrived < in->expected)
    return true;
  return start_work(s, W_COMM, 0, (int)op->def->coll, it->alone, in->first_part,
                    in->arrived);
}

/* Rank r's item k (sends and receives, one call) reaches its stream's
 * head: each send meets its receive. */
static bool arrive_p2p(sim *s, int slot, int k) {
  srank *r = &s->r[slot];
  const ovl_program *prog = s->prog;
  item *it = &r->items[k];
  int gpn = s->m->mach.gpus_per_node;
  for (uint32_t p = it->p0; p < it->p1; p++) {
    const ovl__prim *pr = &prog->prims[p];
    size_t i = it->op;
    const ovl__op *op;
    int peer, src, dst;
    uint32_t kth;
    inst *in;
    while (i + 1 < prog->nops && prog->prim_first[i + 1] <= p)
      i++;
    op = &prog->ops[i];
    if (!ovl__op_on_rank(op, r->rank) ||
        (pr->kind != OVL_PRIM_SEND && pr->kind != OVL_PRIM_RECV))
      continue;
    peer = ovl__op_peer(prog, op, r->rank);
    if (pr->kind == OVL_PRIM_SEND) {
      src = r->rank;
      dst = peer;
      kth = r->nsend[op->ring_id * s->nranks + peer]++;
    } else {
      src = peer;
      dst = r->rank;
      kth = r->nrecv[op->ring_id * s->nranks + peer]++;
    }
    in = ovl__sim_instance(s,
                           2ull << 62 | (uint64_t)op->ring_id << 52 |
                               (uint64_t)src << 46 | (uint64_t)dst << 40 | kth,
                           2);
    if (in == NULL || !join(s, in, slot, k))
      return false;
    if (in->arrived == 2) {
      size_t count;
      int dtype;
      double alone;
      ovl__comm_msg(prog, op, pr->kind, &count, &dtype);
      alone = ovl__model_comm_s(s->m, OVL__COMM_P2P, count,
                                ovl_dtype_size((ovl_dtype)dtype), 2,
                                src / gpn != dst / gpn);
      if (!start_work(s, W_COMM, 0, OVL__COMM_P2P, alone, in->first_part, 2))
        return false;
    }
  }
  if (it->pending == 0) /* nothing of it runs here */
    it->state = Q_DONE;
  return true;
}

/* When the head item of a stream may start (enqueued; after the gap). */
static double head_ready(const sim *s, const srank *r, int q, const item *it) {
  double t = it->ready;
  if (it->kind == OVL_PRIM_KERNEL || it->kind == OVL_PRIM_COLL ||
      it->kind == OVL_PRIM_DELAY || it->kind == OVL_PRIM_SEND ||
      it->kind == OVL_PRIM_RECV) {
    double g = r->last_work_end[q] + ovl__model_gap_s(s->m, s->graph);
    if (g > t)
      t = g;
  }
  return t;
}

static void pop(srank *r, int q) {
  item *it = &r->items[r->qhead[q]];
  r->qhead[q] = it->next;
  if (r->qhead[q] < 0)
    r->qtail[q] = -1;
  r->qlen[q]--;
}

/* Move stream q of slot as far as it goes now. */
static bool stream_run(sim *s, int slot, int q) {
  srank *r = &s->r[slot];
  bool moved = false;
  while (r->qhead[q] >= 0 && s->st == OVL_OK) {
    int k = r->qhead[q];
    item *it = &r->items[k];
    if (it->state == Q_DONE) {
      pop(r, q);
      moved = true;
      continue;
    }
    if (it->state == Q_QUEUED) {
      if (head_ready(s, r, q, it) > s->now * (1 + 1e-12) + 1e-15)
        break;
      it->start = s->now;
      it->work_start = -1;
      moved = true;
      switch (it->kind) {
      case OVL_PRIM_RECORD:
        it->end = s->now;
        it->state = Q_DONE;
        continue;
      case OVL_PRIM_WAIT:
        it->state = Q_ARRIVED;
        r->nblocked++;
        break;
      case OVL_PRIM_KERNEL:
      case OVL_PRIM_DELAY: {
        int part = ovl__sim_add_part(s, slot, k, -1);
        it->pending = 1;
        it->work_start = s->now;
        if (part >= 0)
          start_work(s, it->kind == OVL_PRIM_KERNEL ? W_KERNEL : W_DELAY,
                     kernel_class(s->prog, it), 0, it->alone, part, 1);
        return moved;
      }
      case OVL_PRIM_COLL:
        it->state = Q_ARRIVED;
        r->nblocked++;
        arrive_coll(s, slot, k);
        return moved;
      default: /* SEND, RECV */
        it->state = Q_ARRIVED;
        r->nblocked++;
        arrive_p2p(s, slot, k);
        if (it->state == Q_DONE) {
          r->nblocked--;
          it->end = s->now;
          continue;
        }
        return moved;
      }
    }
    if (it->kind == OVL_PRIM_WAIT && it->state == Q_ARRIVED) {
      if (it->wait_rec >= 0 && r->items[it->wait_rec].state != Q_DONE)
        break;
      it->end = s->now;
      it->state = Q_DONE;
      r->nblocked--;
      moved = true;
      continue;
    }
    break;
  }
  return moved;
}

/* ------------------------------------------------------------------ */
/* Time                                                                */
/* ------------------------------------------------------------------ */

/* Each work's rate now, from what runs beside it on its ranks. */
static void rates(sim *s) {
  for (int i = 0; i < s->nsim; i++) {
    s->r[i].nk = 0;
    s->r[i].kmask = s->r[i].cmask = 0;
    s->r[i].kernel_rate = 0;
    s->r[i].comm_rate = 1;
  }
  for (size_t i = 0; i < s->nw; i++) {
    work *w = &s->w[i];
    for (int p = w->first; p >= 0; p = s->part_next[p]) {
      srank *r = &s->r[s->part_slot[p]];
      if (w->kind == W_KERNEL) {
        r->nk++;
        r->kmask |= 1u << w->kc;
      } else if (w->kind == W_COMM) {
        r->cmask |= 1u << w->comm;
      }
    }
  }
  for (size_t i = 0; i < s->nw; i++) {
    work *w = &s->w[i];
    if (w->kind == W_DELAY) {
      w->rate = 1;
      s->r[s->part_slot[w->first]].kernel_rate += 1;
    } else if (w->kind == W_KERNEL) {
      srank *r = &s->r[s->part_slot[w->first]];
      double slow = 1;
      for (int c = 0; c < OVL__NCOMM; c++)
        if (r->cmask >> c & 1) {
          double f = ovl__model_kernel_slow(s->m, c, w->kc);
          slow = f > slow ? f : slow;
        }
      w->rate = 1.0 / (r->nk * slow);
      r->kernel_rate += w->rate;
    } else {
      double rate = 1;
      for (int p = w->first; p >= 0; p = s->part_next[p]) {
        srank *r = &s->r[s->part_slot[p]];
        for (int kc = 0; kc < OVL__NKC; kc++)
          if (r->kmask >> kc & 1) {
            double f = 1.0 / ovl__model_comm_slow(s->m, w->comm, kc);
            rate = f < rate ? f : rate;
          }
      }
      w->rate = rate;
      for (int p = w->first; p >= 0; p = s->part_next[p]) {
        srank *r = &s->r[s->part_slot[p]];
        r->comm_rate = rate < r->comm_rate ? rate : r->comm_rate;
      }
    }
  }
}

/* Where [now, now + dt) went on each rank (ovl_explain's order: compute,
 * exposed communication, contention, host, waits). */
static void account(sim *s, double dt) {
  for (int i = 0; i < s->nsim; i++) {
    srank *r = &s->r[i];
    if (r->done)
      continue;
    if (r->kernel_rate > 0) {
      double p = r->kernel_rate < 1 ? r->kernel_rate : 1;
      r->explain[0] += dt * p;
      r->explain[2] += dt * (1 - p);
    } else if (r->cmask != 0) {
      r->explain[1] += dt * r->comm_rate;
      r->explain[2] += dt * (1 - r->comm_rate);
    } else if (r->nblocked > 0) {
      r->explain[4] += dt;
    } else {
      r->explain[3] += dt;
    }
  }
}

/* The works that end at `t` end: their items are done. */
static void finish_works(sim *s, double t) {
  for (size_t i = 0; i < s->nw;) {
    work *w = &s->w[i];
    if (w->left > 1e-15 + 1e-12 * t) {
      i++;
      continue;
    }
    for (int p = w->first; p >= 0; p = s->part_next[p]) {
      srank *r = &s->r[s->part_slot[p]];
      item *it = &r->items[s->part_item[p]];
      if (--it->pending == 0) {
        it->state = Q_DONE;
        it->end = t;
        r->last_work_end[it->stream] = t;
      }
    }
    s->w[i] = s->w[--s->nw];
  }
}

/* The next time something happens after now: a work ends, or a queued
 * item may start. */
static double next_time(sim *s) {
  double t = INFINITY;
  for (size_t i = 0; i < s->nw; i++) {
    double e = s->now + s->w[i].left / s->w[i].rate;
    t = e < t ? e : t;
  }
  for (int i = 0; i < s->nsim; i++)
    for (int q = 0; q < s->prog->nstreams; q++) {
      srank *r = &s->r[i];
      if (r->qhead[q] >= 0 && r->items[r->qhead[q]].state == Q_QUEUED) {
        double e = head_ready(s, r, q, &r->items[r->qhead[q]]);
        t = e < t ? e : t;
      }
    }
  return t;
}

static bool all_done(const sim *s) {
  for (int i = 0; i < s->nsim; i++)
    if (!s->r[i].done)
      return false;
  return true;
}

/* Where the first rank that cannot go on stands. */
static ovl_status stuck(sim *s) {
  const ovl_program *prog = s->prog;
  for (int i = 0; i < s->nsim; i++) {
    srank *r = &s->r[i];
    for (int q = 0; q < prog->nstreams; q++)
      if (r->qhead[q] >= 0) {
        const ovl__op *op = &prog->ops[r->items[r->qhead[q]].op];
        return ovl__err(s->err, OVL_EINVAL,
                        "model: rank %d cannot go on at %.6f s: its %s stream "
                        "waits at %s:%d:%d (%s) for something no rank will "
                        "do (the deadlock check did not stop this program)",
                        r->rank, s->now, prog->stream_names[q], prog->filename,
                        op->line, op->col, op->def->name);
      }
  }
  return ovl__err(s->err, OVL_EINVAL,
                  "model: the program cannot go on at "
                  "%.6f s",
                  s->now);
}

ovl_status ovl__sim_simulate(sim *s) {
  for (;;) {
    bool moved;
    double t, dt;
    do {
      moved = false;
      for (int i = 0; i < s->nsim; i++)
        moved |= ovl__sim_host_run(s, &s->r[i]);
      for (int i = 0; i < s->nsim; i++)
        for (int q = 0; q < s->prog->nstreams; q++)
          moved |= stream_run(s, i, q);
    } while (moved && s->st == OVL_OK);
    if (s->st != OVL_OK)
      return s->st;
    if (all_done(s))
      return OVL_OK;
    rates(s);
    t = next_time(s);
    if (!isfinite(t))
      return stuck(s);
    dt = t - s->now;
    if (dt < 0)
      dt = 0;
    account(s, dt);
    for (size_t i = 0; i < s->nw; i++)
      s->w[i].left -= s->w[i].rate * dt;
    s->now = t;
    finish_works(s, t);
  }
}

/* ------------------------------------------------------------------ */
/* The run                                                             */
/* ------------------------------------------------------------------ */

void ovl__sim_free(sim *s) {
  for (int i = 0; s->r != NULL && i < s->nsim; i++) {
    srank *r = &s->r[i];
    free(r->items);
    free(r->qhead);
    free(r->qtail);
    free(r->qlen);
    free(r->last_rec);
    free(r->last_work_end);
    free(r->hspan);
    free(r->ncoll);
    free(r->nsend);
    free(r->nrecv);
  }
  free(s->r);
  free(s->slot_of);
  free(s->w);
  free(s->part_slot);
  free(s->part_item);
  free(s->part_next);
  free(s->tab);
}

ovl_status ovl__sim_init(sim *s, const ovl__model *m, const ovl_program *prog,
                         bool graph, ovl_error *err) {
  int ns = prog->nstreams, nev = ovl__program_nevents(prog);
  int nrings = prog->nrings > 0 ? prog->nrings : 1;
  memset(s, 0, sizeof *s);
  s->m = m;
  s->prog = prog;
  s->graph = graph;
  s->err = err;
  s->nranks = prog->nranks;
  s->nsim = prog->rank_dependent ? prog->nranks : 1;
  s->r = calloc((size_t)s->nsim, sizeof *s->r);
  s->slot_of = malloc((size_t)prog->nranks * sizeof *s->slot_of);
  if (s->r == NULL || s->slot_of == NULL)
    return ovl__err(err, OVL_ENOMEM, "model: out of memory");
  for (int r = 0; r < prog->nranks; r++)
    s->slot_of[r] = s->nsim == 1 ? 0 : r;
  for (int i = 0; i < s->nsim; i++) {
    srank *r = &s->r[i];
    r->rank = i;
    r->block = -1;
    r->seg_launch = -1;
    r->qhead = malloc((size_t)ns * sizeof *r->qhead);
    r->qtail = malloc((size_t)ns * sizeof *r->qtail);
    r->qlen = calloc((size_t)ns, sizeof *r->qlen);
    r->last_rec = malloc((size_t)(nev ? nev : 1) * sizeof *r->last_rec);
    r->last_work_end = malloc((size_t)ns * sizeof *r->last_work_end);
    r->hspan = malloc((prog->nprims * 2 + 1) * sizeof *r->hspan);
    r->ncoll = calloc((size_t)nrings, sizeof *r->ncoll);
    r->nsend = calloc((size_t)nrings * (size_t)prog->nranks, sizeof *r->nsend);
    r->nrecv = calloc((size_t)nrings * (size_t)prog->nranks, sizeof *r->nrecv);
    if (!r->qhead || !r->qtail || !r->qlen || !r->last_rec ||
        !r->last_work_end || !r->hspan || !r->ncoll || !r->nsend || !r->nrecv)
      return ovl__err(err, OVL_ENOMEM, "model: out of memory");
    for (int q = 0; q < ns; q++) {
      r->qhead[q] = r->qtail[q] = -1;
      r->last_work_end[q] = -INFINITY;
    }
    for (int e = 0; e < nev; e++)
      r->last_rec[e] = -1;
    for (size_t p = 0; p < prog->nprims * 2; p++)
      r->hspan[p] = NAN;
  }
  return OVL_OK;
}
