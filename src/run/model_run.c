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

#include "backend/model.h"
#include "run/run.h"

enum { Q_QUEUED, Q_ARRIVED, Q_RUNNING, Q_DONE };
enum { W_KERNEL, W_DELAY, W_COMM };

typedef struct item {
  uint32_t op, p0, p1; /* its op; its primitives [p0, p1) (a group: all) */
  uint8_t kind;        /* ovl__prim_kind */
  uint8_t state;
  int16_t stream;
  int next;       /* the next item of its stream; -1 */
  int wait_rec;   /* WAIT: the record item it waits for; -1: none */
  int pending;    /* COLL / SEND / RECV: transfers not done */
  double ready;   /* enqueued by the host */
  double start, work_start, end;
  double alone;   /* seconds of work alone (kernels, delays, comm) */
} item;

/* Work in progress: a kernel or delay on one rank, or a transfer (a
 * collective's, or one send / receive pair) shared by its ranks' items. */
typedef struct work {
  int kind, kc, comm;
  double left, rate;
  int n;         /* items */
  int first;     /* in the run's part list: (rank slot, item) pairs */
} work;

typedef struct srank {
  int rank;
  item *items;
  size_t nitems, cap;
  /* Per stream: its items not done, in order (a list through next). */
  int *qhead, *qtail, *qlen;
  int *last_rec; /* per event: its last record item; -1 */
  double *last_work_end; /* per stream */
  /* The host */
  size_t op;    /* the next op */
  double h;
  int block;    /* -1: not blocked; a stream; nstreams: every stream */
  size_t block_prim;
  bool draining, done;
  double seg_launch; /* graph mode: the current segment's launch; -1 */
  double *hspan; /* per primitive: the host primitives' spans */
  /* Where its time went (ovl_explain's order), its end; per step: the
   * kernels running, the classes and comm kinds running, items blocked */
  double explain[5];
  double t_done;
  int nk, nblocked;
  unsigned kmask, cmask;
  double kernel_rate;
  double comm_rate;
  /* Per ring: collectives reached; per (ring, peer): sends / receives */
  uint32_t *ncoll;
  uint32_t *nsend, *nrecv;
} srank;

typedef struct inst {
  uint64_t key;
  int arrived, expected;
  int first_part; /* parts of its items, chained */
  int w;          /* its work, once started; -1 */
} inst;

typedef struct sim {
  const ovl__model *m;
  const ovl_program *prog;
  bool graph;
  int nranks, nsim, nrings;
  srank *r;
  int *slot_of; /* rank -> simulated slot, -1 */
  double now;
  work *w;
  size_t nw, wcap;
  int *part_slot, *part_item, *part_next;
  size_t nparts, pcap;
  inst *tab; /* open addressing */
  size_t tcap, tn;
  ovl_error *err;
  ovl_status st;
} sim;

/* ------------------------------------------------------------------ */
/* Storage                                                             */
/* ------------------------------------------------------------------ */

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  size_t n = *cap ? *cap : 16;
  void *q;
  if (need <= *cap)
    return true;
  while (n < need)
    n *= 2;
  q = realloc(*p, n * elem);
  if (q == NULL)
    return false;
  *p = q;
  *cap = n;
  return true;
}

static bool oom(sim *s) {
  if (s->st == OVL_OK)
    s->st = ovl__err(s->err, OVL_ENOMEM, "model: out of memory");
  return false;
}

static int add_part(sim *s, int slot, int item, int next) {
  size_t c0 = s->pcap;
  if (s->nparts + 1 > s->pcap) {
    size_t c = c0;
    if (!grow((void **)&s->part_slot, &c, s->nparts + 1, sizeof(int)))
      return oom(s), -1;
    c = c0;
    if (!grow((void **)&s->part_item, &c, s->nparts + 1, sizeof(int)))
      return oom(s), -1;
    if (!grow((void **)&s->part_next, &s->pcap, s->nparts + 1, sizeof(int)))
      return oom(s), -1;
  }
  s->part_slot[s->nparts] = slot;
  s->part_item[s->nparts] = item;
  s->part_next[s->nparts] = next;
  return (int)s->nparts++;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/* The instance of `key` (a collective of a ring, or a send / receive
 * pair), made on first use. */
static inst *instance(sim *s, uint64_t key, int expected) {
  size_t i;
  if ((s->tn + 1) * 2 > s->tcap) {
    size_t ncap = s->tcap ? s->tcap * 2 : 256;
    inst *nt = calloc(ncap, sizeof *nt);
    if (nt == NULL)
      return oom(s), NULL;
    for (size_t k = 0; k < s->tcap; k++)
      if (s->tab[k].expected != 0) {
        size_t j = mix(s->tab[k].key) & (ncap - 1);
        while (nt[j].expected != 0)
          j = (j + 1) & (ncap - 1);
        nt[j] = s->tab[k];
      }
    free(s->tab);
    s->tab = nt;
    s->tcap = ncap;
  }
  i = mix(key) & (s->tcap - 1);
  while (s->tab[i].expected != 0 && s->tab[i].key != key)
    i = (i + 1) & (s->tcap - 1);
  if (s->tab[i].expected == 0) {
    s->tab[i].key = key;
    s->tab[i].expected = expected;
    s->tab[i].first_part = -1;
    s->tab[i].w = -1;
    s->tn++;
  }
  return &s->tab[i];
}

static item *push_item(sim *s, srank *r, int stream) {
  item *it;
  int k = (int)r->nitems;
  if (!grow((void **)&r->items, &r->cap, r->nitems + 1, sizeof *r->items))
    return oom(s), NULL;
  it = &r->items[r->nitems++];
  memset(it, 0, sizeof *it);
  it->stream = (int16_t)stream;
  it->wait_rec = -1;
  it->next = -1;
  it->state = Q_QUEUED;
  if (r->qtail[stream] >= 0)
    r->items[r->qtail[stream]].next = k;
  else
    r->qhead[stream] = k;
  r->qtail[stream] = k;
  r->qlen[stream]++;
  return it;
}

/* ------------------------------------------------------------------ */
/* The host                                                            */
/* ------------------------------------------------------------------ */

static int host_kind(uint8_t kind) {
  switch (kind) {
  case OVL_PRIM_KERNEL:
    return OVL__H_KERNEL;
  case OVL_PRIM_COLL:
    return OVL__H_COLL;
  case OVL_PRIM_SEND:
  case OVL_PRIM_RECV:
    return OVL__H_P2P;
  case OVL_PRIM_RECORD:
    return OVL__H_RECORD;
  case OVL_PRIM_WAIT:
    return OVL__H_WAIT;
  default:
    return OVL__H_DELAY;
  }
}

/* Every item enqueued on `stream` (nstreams: on every stream) is done. */
static bool drained(const sim *s, const srank *r, int stream) {
  for (int q = 0; q < s->prog->nstreams; q++)
    if ((stream == s->prog->nstreams || q == stream) && r->qlen[q] > 0)
      return false;
  return true;
}

/* The seconds of work of a stream primitive alone, and what it is. */
static void price(sim *s, srank *r, item *it, const ovl__op *op) {
  const ovl_program *prog = s->prog;
  const ovl__prim *p = &prog->prims[it->p0];
  if (p->kind == OVL_PRIM_KERNEL) {
    ovl__mkernel k;
    bool est;
    ovl__mkernel_of(prog, op, &k);
    it->alone = ovl__model_kernel_s(s->m, &k, &est);
  } else if (p->kind == OVL_PRIM_DELAY) {
    it->alone = op->us * 1e-6;
  } else if (p->kind == OVL_PRIM_COLL) {
    int n = __builtin_popcountll(op->ranks);
    int gpn = s->m->mach.gpus_per_node;
    if (op->def->coll == OVL_COLL_BARRIER) {
      it->alone = ovl__model_comm_s(s->m, OVL_COLL_BARRIER, 1, 4, n, n > gpn);
    } else {
      const ovl__var *x = &prog->vars[op->in[0]], *o = &prog->vars[op->out];
      it->alone = ovl__model_comm_s(
          s->m, (int)op->def->coll,
          ovl__coll_count(op->def->coll, x->numel, o->numel),
          ovl_dtype_size(x->dtype), n, n > gpn);
    }
  }
  (void)r;
}

/* Enqueue the stream primitives of op i from primitive k on, and perform
 * its host primitives, until the host blocks. Returns false when it
 * blocked (r->block set, r->op and r->block_prim where to go on). */
static bool host_op(sim *s, srank *r, size_t i, size_t k0) {
  const ovl_program *prog = s->prog;
  const ovl__op *op = &prog->ops[i];
  size_t p0 = prog->prim_first[i], p1 = prog->prim_first[i + 1];
  for (size_t p = p0 + k0; p < p1; p++) {
    const ovl__prim *pr = &prog->prims[p];
    item *it;
    if (pr->kind == OVL_PRIM_HOST_SYNC) {
      r->hspan[2 * p] = r->h;
      r->block = s->graph ? prog->nstreams : pr->stream;
      r->block_prim = p;
      r->op = i;
      return false;
    }
    if (pr->kind == OVL_PRIM_HOST_READ)
      continue; /* priced when the sync before it returns (host_resume) */
    if (s->graph && r->seg_launch < 0) {
      r->h += ovl__model_graph_launch_s(s->m);
      r->seg_launch = r->h;
    }
    if (!s->graph)
      r->h += ovl__model_host_s(s->m, host_kind(pr->kind));
    it = push_item(s, r, pr->stream);
    if (it == NULL)
      return false;
    it->op = (uint32_t)i;
    it->p0 = (uint32_t)p;
    it->p1 = (uint32_t)p + 1;
    it->kind = pr->kind;
    it->ready = s->graph ? r->seg_launch : r->h;
    if (pr->kind == OVL_PRIM_RECORD)
      r->last_rec[pr->event] = (int)(it - r->items);
    else if (pr->kind == OVL_PRIM_WAIT)
      it->wait_rec = r->last_rec[pr->event];
    price(s, r, it, op);
  }
  return true;
}

/* A group instance's sends and receives on this rank: one item, one
 * host call. */
static bool host_group(sim *s, srank *r, size_t i, size_t end) {
  const ovl_program *prog = s->prog;
  size_t first = SIZE_MAX, last = 0;
  item *it;
  for (size_t j = i; j < end; j++)
    if (ovl__op_on_rank(&prog->ops[j], r->rank)) {
      if (first == SIZE_MAX)
        first = j;
      last = j;
    }
  if (first == SIZE_MAX)
    return true;
  if (s->graph && r->seg_launch < 0) {
    r->h += ovl__model_graph_launch_s(s->m);
    r->seg_launch = r->h;
  }
  if (!s->graph)
    r->h += ovl__model_host_s(s->m, OVL__H_P2P);
  it = push_item(s, r, prog->prims[prog->prim_first[first]].stream);
  if (it == NULL)
    return false;
  it->op = (uint32_t)first;
  it->p0 = prog->prim_first[first];
  it->p1 = prog->prim_first[last + 1];
  it->kind = OVL_PRIM_SEND;
  it->ready = s->graph ? r->seg_launch : r->h;
  return true;
}

/* Run the host of rank r as far as it goes. */
static bool host_run(sim *s, srank *r) {
  const ovl_program *prog = s->prog;
  bool moved = false;
  if (r->done)
    return false;
  if (r->block >= 0) {
    const ovl__prim *pr;
    if (!drained(s, r, r->block))
      return false;
    r->h = (r->h > s->now ? r->h : s->now) + ovl__model_sync_s(s->m);
    if (!r->draining)
      r->hspan[2 * r->block_prim + 1] = r->h;
    r->block = -1;
    r->seg_launch = -1;
    moved = true;
    if (r->draining) {
      r->done = true;
      r->t_done = r->h;
      return true;
    }
    /* The host primitives after the sync: the fetch's copies. */
    for (size_t p = r->block_prim + 1; p < prog->prim_first[r->op + 1]; p++) {
      pr = &prog->prims[p];
      if (pr->kind == OVL_PRIM_HOST_READ) {
        const ovl__op *op = &prog->ops[r->op];
        size_t bytes = 0;
        for (int k = 0; k < op->nin; k++)
          bytes += (size_t)prog->vars[op->in[k]].numel *
                   ovl_dtype_size(prog->vars[op->in[k]].dtype);
        r->hspan[2 * p] = r->h;
        r->h += ovl__model_d2h_s(s->m, bytes);
        r->hspan[2 * p + 1] = r->h;
      }
    }
    if (!host_op(s, r, r->op, r->block_prim + 1 - prog->prim_first[r->op]))
      return moved;
    r->op++;
  }
  while (r->op < prog->nops && s->st == OVL_OK) {
    size_t i = r->op;
    const ovl__op *op = &prog->ops[i];
    if (op->group != 0) {
      size_t end = i + 1;
      while (end < prog->nops && prog->ops[end].group == op->group)
        end++;
      if (!host_group(s, r, i, end))
        return true;
      r->op = end;
      moved = true;
      continue;
    }
    if (ovl__op_on_rank(op, r->rank) && !host_op(s, r, i, 0))
      return true;
    r->op++;
    moved = true;
  }
  if (s->st == OVL_OK && !r->draining) {
    /* The end of the iteration: every stream drained. */
    r->draining = true;
    r->block = prog->nstreams;
    moved = true;
  }
  return moved;
}

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
  if (!grow((void **)&s->w, &s->wcap, s->nw + 1, sizeof *s->w))
    return oom(s);
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

/* Rank r's item k (a collective) reaches its stream's head. */
static bool arrive_coll(sim *s, int slot, int k) {
  srank *r = &s->r[slot];
  item *it = &r->items[k];
  const ovl__op *op = &s->prog->ops[it->op];
  uint32_t kth = r->ncoll[op->ring_id]++;
  int expected = s->nsim == 1 ? 1 : __builtin_popcountll(op->ranks);
  inst *in = instance(s, 1ull << 62 | (uint64_t)op->ring_id << 40 | kth,
                      expected);
  int part;
  if (in == NULL)
    return false;
  part = add_part(s, slot, k, in->first_part);
  if (part < 0)
    return false;
  in->first_part = part;
  it->pending = 1;
  if (++in->arrived < in->expected)
    return true;
  return start_work(s, W_COMM, 0, (int)op->def->coll, it->alone,
                    in->first_part, in->arrived);
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
    int peer, src, dst, v, part;
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
      v = op->in[0];
    } else {
      src = peer;
      dst = r->rank;
      kth = r->nrecv[op->ring_id * s->nranks + peer]++;
      v = op->out;
    }
    in = instance(s,
                  2ull << 62 | (uint64_t)op->ring_id << 52 |
                      (uint64_t)src << 46 | (uint64_t)dst << 40 | kth,
                  2);
    if (in == NULL)
      return false;
    part = add_part(s, slot, k, in->first_part);
    if (part < 0)
      return false;
    in->first_part = part;
    it->pending++;
    if (++in->arrived == 2) {
      double alone = ovl__model_comm_s(
          s->m, OVL__COMM_P2P, (size_t)prog->vars[v].numel,
          ovl_dtype_size(prog->vars[v].dtype), 2, src / gpn != dst / gpn);
      if (!start_work(s, W_COMM, 0, OVL__COMM_P2P, alone, in->first_part, 2))
        return false;
    }
  }
  if (it->pending == 0) /* nothing of it runs here */
    it->state = Q_DONE;
  return true;
}

/* When the head item of a stream may start (enqueued; after the gap). */
static double head_ready(const sim *s, const srank *r, int q,
                         const item *it) {
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
        int part = add_part(s, slot, k, -1);
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
                        r->rank, s->now, prog->stream_names[q],
                        prog->filename, op->line, op->col, op->def->name);
      }
  }
  return ovl__err(s->err, OVL_EINVAL, "model: the program cannot go on at "
                                      "%.6f s", s->now);
}

static ovl_status simulate(sim *s) {
  for (;;) {
    bool moved;
    double t, dt;
    do {
      moved = false;
      for (int i = 0; i < s->nsim; i++)
        moved |= host_run(s, &s->r[i]);
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

static void sim_free(sim *s) {
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

static ovl_status sim_init(sim *s, const ovl__model *m,
                           const ovl_program *prog, bool graph,
                           ovl_error *err) {
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
    r->nsend = calloc((size_t)nrings * (size_t)prog->nranks,
                      sizeof *r->nsend);
    r->nrecv = calloc((size_t)nrings * (size_t)prog->nranks,
                      sizeof *r->nrecv);
    if (!r->qhead || !r->qtail || !r->qlen || !r->last_rec ||
        !r->last_work_end || !r->hspan || !r->ncoll || !r->nsend ||
        !r->nrecv)
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

/* The simulated iteration into the result: every iteration's time, the
 * op times, the trace, where the time went. */
static void fill_result(const sim *s, const ovl_run_opts *o,
                        ovl_result *res) {
  const ovl_program *prog = s->prog;
  double T = 0;
  int slowest = 0;
  for (int i = 0; i < s->nsim; i++)
    if (s->r[i].t_done > T) {
      T = s->r[i].t_done;
      slowest = i;
    }
  for (int it = 0; it < res->iters; it++)
    res->times[it] = T;
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
    res->explain.host = r->explain[3];
    res->explain.waits = r->explain[4] + (T - r->t_done);
    res->explain.rank = r->rank;
  }
  res->predicted = true;
  (void)o;
}

ovl_status ovl__model_run(ovl_world *world, const ovl__model *m,
                          const ovl_program *prog, const ovl_run_opts *o,
                          ovl__compare *cmp, ovl_result **out,
                          ovl_error *err) {
  sim s = {0};
  ovl_result *res = NULL;
  int traced = -1;
  ovl_status st;
  if (o->iters < 1 || o->warmup < 0)
    return ovl__err(err, OVL_EINVAL,
                    "iterations must be >= 1 and warmup >= 0 (got %d, %d)",
                    o->iters, o->warmup);
  if (prog->nranks != world->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "%s was parsed for %d ranks but the world has %d",
                    prog->filename, prog->nranks, world->nranks);
  if (o->trace) {
    traced = o->trace_iter < 0 ? o->iters + o->trace_iter : o->trace_iter;
    if (traced < 0 || traced >= o->iters)
      return ovl__err(err, OVL_EINVAL,
                      "trace iteration %d: there are %d timed iterations "
                      "(0 to %d, or -1 to -%d from the end)",
                      o->trace_iter, o->iters, o->iters - 1, o->iters);
  }
  world->ran = true;
  st = ovl__result_new(prog, world->nranks, o->iters, o->op_times != 0,
                       traced, &res, err);
  if (st == OVL_OK)
    st = ovl__result_set_machine(res, world, err);
  if (st == OVL_OK)
    st = sim_init(&s, m, prog, o->graph != 0, err);
  if (st == OVL_OK) {
    st = simulate(&s);
    if (st == OVL_OK)
      fill_result(&s, o, res);
  }
  sim_free(&s);
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
