/*
 * The model's storage and hosts (run/model_sim.h): growing arrays, the
 * parts of a work, the instances of collectives and send / receive pairs;
 * each rank's host, which enqueues its stream primitives in program order
 * (paying the host cost of each, or one graph launch per segment) and
 * blocks at host syncs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/model_sim.h"

/* ------------------------------------------------------------------ */
/* Storage                                                             */
/* ------------------------------------------------------------------ */

bool ovl__sim_grow(void **p, size_t *cap, size_t need, size_t elem) {
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

bool ovl__sim_oom(sim *s) {
  if (s->st == OVL_OK)
    s->st = ovl__err(s->err, OVL_ENOMEM, "model: out of memory");
  return false;
}

int ovl__sim_add_part(sim *s, int slot, int item, int next) {
  size_t c0 = s->pcap;
  if (s->nparts + 1 > s->pcap) {
    size_t c = c0;
    if (!ovl__sim_grow((void **)&s->part_slot, &c, s->nparts + 1, sizeof(int)))
      return ovl__sim_oom(s), -1;
    c = c0;
    if (!ovl__sim_grow((void **)&s->part_item, &c, s->nparts + 1, sizeof(int)))
      return ovl__sim_oom(s), -1;
    if (!ovl__sim_grow((void **)&s->part_next, &s->pcap, s->nparts + 1,
                       sizeof(int)))
      return ovl__sim_oom(s), -1;
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
inst *ovl__sim_instance(sim *s, uint64_t key, int expected) {
  size_t i;
  if ((s->tn + 1) * 2 > s->tcap) {
    size_t ncap = s->tcap ? s->tcap * 2 : 256;
    inst *nt = calloc(ncap, sizeof *nt);
    if (nt == NULL)
      return ovl__sim_oom(s), NULL;
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
  if (!ovl__sim_grow((void **)&r->items, &r->cap, r->nitems + 1,
                     sizeof *r->items))
    return ovl__sim_oom(s), NULL;
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
    /* Past 64 ranks every op runs on all of them (core/op.h). */
    int n = op->ranks == ovl__program_all_ranks(prog)
                ? prog->nranks
                : __builtin_popcountll(op->ranks);
    size_t count;
    int dtype, kind = ovl__comm_msg(prog, op, p->kind, &count, &dtype);
    it->alone =
        ovl__model_comm_s(s->m, kind, count, ovl_dtype_size((ovl_dtype)dtype),
                          n, n > s->m->mach.gpus_per_node);
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
bool ovl__sim_host_run(sim *s, srank *r) {
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
      /* The host's last steps (the copies of a fetch, the syncs) after
       * the device went quiet: host time. */
      r->done = true;
      r->t_done = r->h;
      r->explain[3] += r->t_done - s->now;
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
