/*
 * The deadlock check (ovl.h, "Deadlocks"; docs/ARCHITECTURE.md, "Checks"):
 * an abstract execution of one iteration on every rank at once, then the
 * cycles of what the blocked participants wait for.
 *
 * Participants: per rank its host and its streams. The execution is a
 * worklist: a participant runs as far as it can and then blocks; whatever
 * it unblocks (a stream it drained for a host sync, a record a stream
 * waits for, the partner of a send, the last rank of a collective) goes on
 * the list. Every blocking condition stays true once it is met, so the
 * order the list is served in does not change where the execution ends.
 *
 * - A host runs the ops of its rank in program order; enqueueing is moving
 *   its frontier (hp: the primitives before it are enqueued). It blocks at
 *   a HOST_SYNC of a stream that still has enqueued work.
 * - A stream's primitives are the program's primitives on it, in order
 *   (one list per stream number, shared by the ranks; a rank skips those
 *   of ops it does not run). It runs those before its host's frontier.
 *   A WAIT captured the last record of its event enqueued before it (the
 *   program's previous RECORD of the event that this rank runs); it passes
 *   once the recording stream is past that record.
 * - Comm items (check/match.c): a collective, an ungrouped send or
 *   receive, or a whole group (the consecutive send / receive primitives
 *   of one group instance on the stream, once the host has enqueued all of
 *   them) is posted when it reaches the head of its stream; a collective
 *   completes when every rank posted its k-th collective of the ring, a
 *   send or receive when its partner is posted. The stream moves on when
 *   every item of its head completed.
 *
 * What is left blocked waits for: a host, the stream it syncs; a WAIT, the
 * recording stream; a comm item, each rank whose part is not posted (its
 * stream, or its host when it has not enqueued it yet), or nobody when
 * that part does not exist (a mismatch); a stream whose next primitive is
 * not enqueued, its host. The strongly connected components of that graph
 * (Tarjan) with a cycle are the deadlocks; each is reported as one cycle
 * through it, the shortest from its first participant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "check/findings.h"
#include "check/match.h"

typedef struct dl_step {
  ovl_deadlock_step s;
  char *stream_name;
} dl_step;

typedef struct dl_rec {
  size_t nsteps;
  ovl_deadlock_step *steps;
  char **names; /* the steps' stream names, owned */
  uint64_t occurrences;
  char *message;
  /* The key: per step its op's position, its stream and whether the next
   * step is on another rank (2 * nsteps + 1 words). */
  uint64_t *key;
} dl_rec;

struct ovl_deadlocks_s {
  /* The deadlocks (dl_rec), at most OVL_FINDINGS_LIST_MAX; its `more`:
   * the cycles not listed. */
  ovl__flist list;
  uint64_t blocked;
  int nranks;
  bool graph; /* checked as graphs run (ovl__deadlock_check_graph) */
};

static dl_rec *rec_at(const ovl_deadlocks *d, size_t i) {
  return ovl__flist_at(&d->list, i);
}

static void rec_free(void *rec, void *ctx) {
  dl_rec *r = rec;
  (void)ctx;
  for (size_t k = 0; r->names != NULL && k < r->nsteps; k++)
    free(r->names[k]);
  free(r->names);
  free(r->steps);
  free(r->message);
  free(r->key);
}

void ovl_deadlocks_free(ovl_deadlocks *d) {
  if (d == NULL)
    return;
  ovl__flist_free(&d->list, rec_free, NULL);
  free(d);
}

/* ------------------------------------------------------------------ */
/* The execution                                                       */
/* ------------------------------------------------------------------ */

enum { ST_IDLE, ST_RUN, ST_WAIT, ST_COMM, ST_SYNC, ST_DONE };
enum { IT_NONE = 0, IT_POSTED = 1, IT_DONE = 2 };

typedef struct pstate {
  uint8_t state;
  bool queued;
  int16_t wait_stream; /* ST_WAIT: the recording stream; host ST_SYNC */
  uint32_t wait_rec;   /* ST_WAIT: the record it waits for */
  /* Stream: the next primitive, as a position in its list; ST_COMM: the
   * position just past the head's items, and how many are not done. */
  uint32_t pos, entry_end, remaining;
  /* ST_COMM: the head's items: items[entry_item ..] of its rank, one per
   * primitive of the rank in [pos, entry_end). */
  uint32_t entry_item;
  /* Stream: a cursor into its rank's items (they are in program order). */
  size_t icur;
  /* Host: the next op, and its frontier (a primitive index). */
  uint32_t hop, hp;
} pstate;

typedef struct dl {
  const ovl_program *prog;
  const ovl__match *m;
  /* Graph mode: a host sync waits for every stream of its rank (the
   * segment before it is one graph). */
  bool graph;
  int nr, ns, np; /* ranks, streams, participants per rank (ns + 1) */
  /* Per op: its ranks (compact copy of ops[i].ranks). */
  uint64_t *opranks;
  /* Per primitive: its op; for a WAIT the program's last RECORD of its
   * event before it, for a RECORD the previous one (OVL__NONE: none). */
  uint32_t *op_of, *cap;
  /* Per stream s: its primitives slist[sfirst[s] .. sfirst[s + 1]), and
   * each one's ranks (sranks, beside it). */
  uint32_t *slist;
  uint64_t *sranks;
  size_t *sfirst;
  /* Per rank and participant (rank * np + part; part ns: the host). */
  pstate *ps;
  /* Comm items' state, and the collectives posted per (ring, k). */
  uint8_t *ist;
  uint32_t *ccount;
  size_t *coff; /* per ring: offset into ccount */
  /* The worklist (each participant at most once). */
  uint32_t *q;
  size_t qhead, qlen, qcap;
} dl;

#define PS(d, r, part) (&(d)->ps[(size_t)(r) * (size_t)(d)->np + (size_t)(part)])
#define ON(d, op, r) (((d)->opranks[op] >> (r)) & 1)

static void push(dl *d, int r, int part) {
  pstate *p = PS(d, r, part);
  if (p->queued)
    return;
  p->queued = true;
  d->q[(d->qhead + d->qlen) % d->qcap] = (uint32_t)(r * d->np + part);
  d->qlen++;
}

/* Skip the primitives of ops rank r does not run. */
static void norm(dl *d, int r, int s) {
  pstate *p = PS(d, r, s);
  size_t n = d->sfirst[s + 1] - d->sfirst[s];
  const uint64_t *rk = d->sranks + d->sfirst[s];
  while (p->pos < n && !((rk[p->pos] >> r) & 1))
    p->pos++;
}

/* The next primitive of stream s of rank r (UINT32_MAX: none left). */
static uint32_t next_prim(dl *d, int r, int s) {
  pstate *p = PS(d, r, s);
  norm(d, r, s);
  return p->pos < d->sfirst[s + 1] - d->sfirst[s]
             ? d->slist[d->sfirst[s] + p->pos]
             : UINT32_MAX;
}

/* Whether stream s of rank r is past primitive q (on it). */
static bool passed(dl *d, int r, int s, uint32_t q) {
  uint32_t p = next_prim(d, r, s);
  return p == UINT32_MAX || p > q;
}

/* Whether stream s has nothing enqueued left: its next primitive is not
 * before the host's frontier. */
static bool drained(dl *d, int r, int s) {
  uint32_t p = next_prim(d, r, s);
  return p == UINT32_MAX || p >= PS(d, r, d->ns)->hp;
}

/* The record a WAIT at p captured on rank r. */
static uint32_t captured(dl *d, int r, uint32_t p) {
  uint32_t q = d->cap[p];
  while (q != OVL__NONE && !ON(d, d->op_of[q], r))
    q = d->cap[q];
  return q;
}

static void complete(dl *d, uint32_t x) {
  const ovl__citem *it = &d->m->items[x];
  pstate *p = PS(d, it->rank, it->stream);
  d->ist[x] = IT_DONE;
  if (p->remaining > 0 && --p->remaining == 0)
    push(d, it->rank, it->stream);
}

static void post(dl *d, uint32_t x) {
  const ovl__citem *it = &d->m->items[x];
  d->ist[x] = IT_POSTED;
  if (it->kind == OVL__CI_COLL) {
    if (++d->ccount[d->coff[it->ring] + it->ord] == (uint32_t)d->nr)
      for (int r = 0; r < d->nr; r++)
        complete(d, ovl__match_coll(d->m, r, it->ring, it->ord));
  } else if (it->partner != OVL__NONE && d->ist[it->partner] == IT_POSTED) {
    complete(d, x);
    complete(d, it->partner);
  }
}

/* The item of primitive `prim` of rank r, from stream s's cursor. */
static uint32_t item_at(dl *d, int r, int s, uint32_t prim) {
  pstate *p = PS(d, r, s);
  size_t end = d->m->rank_first[r + 1];
  if (p->icur < d->m->rank_first[r])
    p->icur = d->m->rank_first[r];
  while (p->icur < end && d->m->items[p->icur].prim < prim)
    p->icur++;
  return p->icur < end && d->m->items[p->icur].prim == prim
             ? (uint32_t)p->icur
             : OVL__NONE;
}

/* Post the head of stream s (at position pos, primitive prim): one item,
 * or a group's. False when the host has not enqueued all of a group. */
static bool post_head(dl *d, int r, int s, uint32_t prim) {
  pstate *p = PS(d, r, s);
  const ovl__citem *items = d->m->items;
  const uint32_t *l = d->slist + d->sfirst[s];
  uint32_t end = p->pos + 1, first = item_at(d, r, s, prim), cnt = 1;
  if (first == OVL__NONE)
    return true; /* cannot happen: every comm primitive is an item */
  if (items[first].group != 0 && items[first].kind != OVL__CI_COLL) {
    /* The group's items on rank r: they follow, consecutive (a group's
     * ops are, and all on one stream). */
    uint32_t g = items[first].group, last = prim;
    size_t k = first + 1, kend = d->m->rank_first[r + 1];
    for (; k < kend && items[k].group == g; k++, cnt++)
      last = items[k].prim;
    if (last >= PS(d, r, d->ns)->hp)
      return false;
    while (l[end - 1] < last)
      end++;
  }
  p->state = ST_COMM;
  p->entry_end = end;
  p->entry_item = first;
  p->remaining = cnt;
  /* Post every item (the cursor walks them: they are consecutive). */
  for (size_t k = p->pos; k < end; k++) {
    uint32_t x;
    if (!ON(d, d->op_of[l[k]], r))
      continue;
    x = item_at(d, r, s, l[k]);
    if (x != OVL__NONE && d->ist[x] == IT_NONE)
      post(d, x);
  }
  return true;
}

static void wake_after_stream(dl *d, int r, int s) {
  pstate *h = PS(d, r, d->ns);
  if (h->state == ST_SYNC && h->wait_stream == s && drained(d, r, s))
    push(d, r, d->ns);
  for (int t = 0; t < d->ns; t++) {
    pstate *w = PS(d, r, t);
    if (w->state == ST_WAIT && w->wait_stream == s &&
        passed(d, r, s, w->wait_rec))
      push(d, r, t);
  }
}

static void run_stream(dl *d, int r, int s) {
  pstate *p = PS(d, r, s);
  const uint32_t *l = d->slist + d->sfirst[s];
  size_t n = d->sfirst[s + 1] - d->sfirst[s];
  uint32_t start = p->pos;
  for (;;) {
    uint32_t prim;
    const ovl__prim *pr;
    if (p->state == ST_COMM) {
      if (p->remaining > 0)
        break;
      p->pos = p->entry_end;
      p->state = ST_RUN;
    }
    norm(d, r, s);
    if (p->pos >= n) {
      p->state = ST_DONE;
      break;
    }
    prim = l[p->pos];
    if (prim >= PS(d, r, d->ns)->hp) {
      p->state = ST_IDLE;
      break;
    }
    pr = &d->prog->prims[prim];
    if (pr->kind == OVL_PRIM_WAIT) {
      uint32_t q = captured(d, r, prim);
      if (q != OVL__NONE && !passed(d, r, d->prog->prims[q].stream, q)) {
        p->state = ST_WAIT;
        p->wait_stream = d->prog->prims[q].stream;
        p->wait_rec = q;
        break;
      }
    } else if (ovl__prim_is_comm(pr)) {
      if (!post_head(d, r, s, prim)) {
        p->state = ST_IDLE;
        break;
      }
      continue;
    }
    p->state = ST_RUN;
    p->pos++;
  }
  if (p->pos != start)
    wake_after_stream(d, r, s);
}

/* Graph mode: the first stream of rank r with enqueued work, or -1. */
static int undrained(dl *d, int r) {
  for (int s = 0; s < d->ns; s++)
    if (!drained(d, r, s))
      return s;
  return -1;
}

static void run_host(dl *d, int r) {
  const ovl_program *prog = d->prog;
  pstate *h = PS(d, r, d->ns);
  if (h->state == ST_SYNC) {
    if (!drained(d, r, h->wait_stream))
      return;
    if (d->graph) {
      int t = undrained(d, r);
      if (t >= 0) {
        h->wait_stream = (int16_t)t;
        return;
      }
    }
    /* Past the sync. */
    h->hp++;
  }
  h->state = ST_RUN;
  while (h->hop < prog->nops) {
    uint32_t i = h->hop, lo = prog->prim_first[i], hi = prog->prim_first[i + 1];
    if (h->hp < lo)
      h->hp = lo;
    if (!ON(d, i, r)) {
      h->hop++;
      continue;
    }
    for (; h->hp < hi; h->hp++) {
      const ovl__prim *pr = &prog->prims[h->hp];
      if (pr->kind == OVL_PRIM_HOST_SYNC && !drained(d, r, pr->stream)) {
        h->state = ST_SYNC;
        h->wait_stream = pr->stream;
        break;
      }
      if (pr->kind == OVL_PRIM_HOST_SYNC && d->graph && undrained(d, r) >= 0) {
        h->state = ST_SYNC;
        h->wait_stream = (int16_t)undrained(d, r);
        break;
      }
    }
    if (h->state == ST_SYNC)
      break;
    h->hop++;
  }
  if (h->hop >= prog->nops) {
    h->hp = (uint32_t)prog->nprims;
    h->state = ST_DONE;
  }
  /* Streams waiting for something to run. */
  for (int s = 0; s < d->ns; s++) {
    pstate *p = PS(d, r, s);
    if (p->state == ST_IDLE) {
      uint32_t q = next_prim(d, r, s);
      if (q != UINT32_MAX && q < h->hp)
        push(d, r, s);
      else if (q == UINT32_MAX)
        p->state = ST_DONE;
    }
  }
}

static void dl_free(dl *d) {
  free(d->opranks);
  free(d->op_of);
  free(d->cap);
  free(d->slist);
  free(d->sranks);
  free(d->sfirst);
  free(d->ps);
  free(d->ist);
  free(d->ccount);
  free(d->coff);
  free(d->q);
}

static bool dl_init(dl *d, const ovl_program *prog, const ovl__match *m) {
  size_t np = prog->nprims, nev = (size_t)ovl__program_nevents(prog);
  uint32_t *last = NULL, *fill = NULL;
  size_t ctotal = 0;
  memset(d, 0, sizeof *d);
  d->prog = prog;
  d->m = m;
  d->nr = m->nranks;
  d->ns = prog->nstreams;
  d->np = d->ns + 1;
  d->opranks = malloc((prog->nops + 1) * sizeof *d->opranks);
  d->op_of = malloc((np + 1) * sizeof *d->op_of);
  d->cap = malloc((np + 1) * sizeof *d->cap);
  d->slist = malloc((np + 1) * sizeof *d->slist);
  d->sranks = malloc((np + 1) * sizeof *d->sranks);
  d->sfirst = calloc((size_t)d->ns + 2, sizeof *d->sfirst);
  d->ps = calloc((size_t)d->nr * (size_t)d->np, sizeof *d->ps);
  d->ist = calloc(m->nitems + 1, sizeof *d->ist);
  d->coff = calloc((size_t)m->nrings + 1, sizeof *d->coff);
  d->qcap = (size_t)d->nr * (size_t)d->np + 1;
  d->q = malloc(d->qcap * sizeof *d->q);
  last = malloc((nev + 1) * sizeof *last);
  fill = malloc(((size_t)d->ns + 1) * sizeof *fill);
  if (d->opranks == NULL || d->op_of == NULL || d->cap == NULL ||
      d->slist == NULL || d->sranks == NULL || d->sfirst == NULL ||
      d->ps == NULL ||
      d->ist == NULL || d->coff == NULL || d->q == NULL || last == NULL ||
      fill == NULL)
    goto fail;
  for (int R = 0; R < m->nrings; R++) {
    d->coff[R] = ctotal;
    ctotal += m->coll_max[R];
  }
  d->ccount = calloc(ctotal + 1, sizeof *d->ccount);
  if (d->ccount == NULL)
    goto fail;
  for (size_t e = 0; e < nev; e++)
    last[e] = OVL__NONE;
  for (size_t i = 0; i < prog->nops; i++) {
    d->opranks[i] = prog->ops[i].ranks;
    for (uint32_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++) {
      const ovl__prim *pr = &prog->prims[p];
      d->op_of[p] = (uint32_t)i;
      d->cap[p] = OVL__NONE;
      if ((pr->kind == OVL_PRIM_RECORD || pr->kind == OVL_PRIM_WAIT) &&
          pr->event >= 0 && (size_t)pr->event < nev) {
        d->cap[p] = last[pr->event];
        if (pr->kind == OVL_PRIM_RECORD)
          last[pr->event] = p;
      }
      if (!ovl__prim_on_host(pr) && pr->stream >= 0 && pr->stream < d->ns)
        d->sfirst[pr->stream + 1]++;
    }
  }
  for (int s = 0; s < d->ns; s++)
    d->sfirst[s + 1] += d->sfirst[s];
  for (int s = 0; s < d->ns; s++)
    fill[s] = (uint32_t)d->sfirst[s];
  for (uint32_t p = 0; p < np; p++) {
    const ovl__prim *pr = &prog->prims[p];
    if (!ovl__prim_on_host(pr) && pr->stream >= 0 && pr->stream < d->ns) {
      d->sranks[fill[pr->stream]] = d->opranks[d->op_of[p]];
      d->slist[fill[pr->stream]++] = p;
    }
  }
  for (int r = 0; r < d->nr; r++)
    for (int s = 0; s < d->ns; s++)
      PS(d, r, s)->state = ST_IDLE;
  free(last);
  free(fill);
  return true;
fail:
  free(last);
  free(fill);
  dl_free(d);
  return false;
}

static void execute(dl *d) {
  for (int r = 0; r < d->nr; r++)
    push(d, r, d->ns);
  while (d->qlen > 0) {
    uint32_t node = d->q[d->qhead];
    int r = (int)(node / (uint32_t)d->np), part = (int)(node % (uint32_t)d->np);
    d->qhead = (d->qhead + 1) % d->qcap;
    d->qlen--;
    PS(d, r, part)->queued = false;
    if (part == d->ns)
      run_host(d, r);
    else
      run_stream(d, r, part);
  }
}

/* ------------------------------------------------------------------ */
/* What the blocked wait for, and its cycles                           */
/* ------------------------------------------------------------------ */

typedef struct edge {
  uint32_t to;
  uint32_t op;   /* the op the source is blocked at */
  uint32_t item; /* its comm item, or OVL__NONE */
} edge;

typedef struct graph {
  size_t nn;
  size_t *first; /* edges of node v: e[first[v] .. first[v + 1]) */
  edge *e;
  size_t ne, cap;
  /* The op each blocked node is blocked at (for a node with no edge). */
  uint32_t *at;
  bool *blocked;
} graph;

static bool add_edge(graph *g, uint32_t to, uint32_t op, uint32_t item) {
  if (g->ne == g->cap) {
    size_t nc = g->cap ? 2 * g->cap : 64;
    edge *ne = realloc(g->e, nc * sizeof *ne);
    if (ne == NULL)
      return false;
    g->e = ne;
    g->cap = nc;
  }
  g->e[g->ne++] = (edge){to, op, item};
  return true;
}

/* The participant that must act for item y (not posted) to be posted: its
 * stream when enqueued, else its host. */
static uint32_t owner(dl *d, uint32_t y) {
  const ovl__citem *it = &d->m->items[y];
  int part = it->prim < PS(d, it->rank, d->ns)->hp ? it->stream : d->ns;
  return (uint32_t)(it->rank * d->np + part);
}

/* The edges of item x (of a blocked stream at op `op`). */
static bool item_edges(dl *d, graph *g, uint32_t x) {
  const ovl__citem *it = &d->m->items[x];
  if (d->ist[x] == IT_DONE)
    return true;
  if (it->kind == OVL__CI_COLL) {
    for (int r = 0; r < d->nr; r++) {
      uint32_t y = ovl__match_coll(d->m, r, it->ring, it->ord);
      if (y != OVL__NONE && d->ist[y] == IT_NONE &&
          !add_edge(g, owner(d, y), it->op, x))
        return false;
    }
    return true;
  }
  if (it->partner != OVL__NONE && d->ist[it->partner] == IT_NONE)
    return add_edge(g, owner(d, it->partner), it->op, x);
  return true;
}

static bool build_graph(dl *d, graph *g) {
  const ovl_program *prog = d->prog;
  g->nn = (size_t)d->nr * (size_t)d->np;
  g->first = calloc(g->nn + 1, sizeof *g->first);
  g->at = malloc((g->nn + 1) * sizeof *g->at);
  g->blocked = calloc(g->nn + 1, sizeof *g->blocked);
  if (g->first == NULL || g->at == NULL || g->blocked == NULL)
    return false;
  for (int r = 0; r < d->nr; r++)
    for (int part = 0; part < d->np; part++) {
      size_t v = (size_t)r * (size_t)d->np + (size_t)part;
      pstate *p = PS(d, r, part);
      g->first[v] = g->ne;
      g->at[v] = OVL__NONE;
      if (part == d->ns) {
        if (p->state == ST_SYNC) {
          g->blocked[v] = true;
          g->at[v] = d->op_of[p->hp];
          if (!add_edge(g, (uint32_t)(r * d->np + p->wait_stream), g->at[v],
                        OVL__NONE))
            return false;
        }
        continue;
      }
      {
        uint32_t prim = next_prim(d, r, part);
        if (prim == UINT32_MAX)
          continue;
        g->blocked[v] = true;
        g->at[v] = d->op_of[prim];
        if (p->state == ST_WAIT) {
          if (!add_edge(g, (uint32_t)(r * d->np + p->wait_stream), g->at[v],
                        OVL__NONE))
            return false;
        } else if (p->state == ST_COMM) {
          const uint32_t *l = d->slist + d->sfirst[part];
          uint32_t x = p->entry_item;
          for (size_t k = p->pos; k < p->entry_end; k++) {
            if (!ON(d, d->op_of[l[k]], r))
              continue;
            if (!item_edges(d, g, x++))
              return false;
          }
        } else {
          /* Its next primitive is not enqueued (or not all of its
           * group): it waits for its host. */
          if (!add_edge(g, (uint32_t)(r * d->np + d->ns), g->at[v],
                        OVL__NONE))
            return false;
        }
      }
    }
  g->first[g->nn] = g->ne;
  (void)prog;
  return true;
}

static void graph_free(graph *g) {
  free(g->first);
  free(g->e);
  free(g->at);
  free(g->blocked);
}

/* Tarjan's strongly connected components, iteratively: comp[v] is the
 * component of v (numbered in the order they close). */
static bool scc(const graph *g, uint32_t *comp, size_t *ncomp) {
  size_t nn = g->nn, idx = 0, sp = 0, cs = 0;
  uint32_t *index = malloc((nn + 1) * sizeof *index);
  uint32_t *low = malloc((nn + 1) * sizeof *low);
  uint32_t *stack = malloc((nn + 1) * sizeof *stack);
  bool *on = calloc(nn + 1, sizeof *on);
  uint32_t *cv = malloc((nn + 1) * sizeof *cv);  /* call stack: node */
  size_t *ce = malloc((nn + 1) * sizeof *ce);    /* and its next edge */
  bool ok = index != NULL && low != NULL && stack != NULL && on != NULL &&
            cv != NULL && ce != NULL;
  *ncomp = 0;
  for (size_t v = 0; ok && v < nn; v++)
    index[v] = UINT32_MAX;
  for (size_t s = 0; ok && s < nn; s++) {
    if (index[s] != UINT32_MAX)
      continue;
    cv[0] = (uint32_t)s;
    ce[0] = g->first[s];
    cs = 1;
    index[s] = low[s] = (uint32_t)idx++;
    stack[sp++] = (uint32_t)s;
    on[s] = true;
    while (cs > 0) {
      uint32_t v = cv[cs - 1];
      if (ce[cs - 1] < g->first[v + 1]) {
        uint32_t w = g->e[ce[cs - 1]++].to;
        if (index[w] == UINT32_MAX) {
          index[w] = low[w] = (uint32_t)idx++;
          stack[sp++] = w;
          on[w] = true;
          cv[cs] = w;
          ce[cs] = g->first[w];
          cs++;
        } else if (on[w] && index[w] < low[v]) {
          low[v] = index[w];
        }
        continue;
      }
      if (low[v] == index[v]) {
        uint32_t w;
        do {
          w = stack[--sp];
          on[w] = false;
          comp[w] = (uint32_t)*ncomp;
        } while (w != v);
        (*ncomp)++;
      }
      cs--;
      if (cs > 0 && low[v] < low[cv[cs - 1]])
        low[cv[cs - 1]] = low[v];
    }
  }
  free(index);
  free(low);
  free(stack);
  free(on);
  free(cv);
  free(ce);
  return ok;
}

/* ------------------------------------------------------------------ */
/* Findings                                                            */
/* ------------------------------------------------------------------ */

static bool op_has_ring(const ovl__op *o) {
  return (o->def->attrs & OVL_ATTR_RING_ID) &&
         (o->def->ring_use != 0 || o->def->p2p != OVL_P2P_NONE);
}

static void fill_step(dl *d, uint32_t v, const edge *e, ovl_deadlock_step *s) {
  const ovl_program *prog = d->prog;
  int r = (int)(v / (uint32_t)d->np), part = (int)(v % (uint32_t)d->np);
  const ovl__op *o = &prog->ops[e->op];
  memset(s, 0, sizeof *s);
  s->rank = r;
  s->stream = part == d->ns ? -1 : part;
  s->stream_name = ovl__stream_name(prog, s->stream);
  s->op = e->op;
  s->op_name = o->def->name;
  s->line = o->line;
  s->col = o->col;
  s->ring = op_has_ring(o) ? o->ring_id : -1;
  s->peer = -1;
  s->in_group = o->group != 0 && o->def->p2p != OVL_P2P_NONE;
  if (e->item != OVL__NONE) {
    const ovl__citem *it = &d->m->items[e->item];
    if (it->kind == OVL__CI_COLL)
      s->coll_index = (uint64_t)it->ord + 1;
    else
      s->peer = it->peer;
  }
}

static void what_text(ovl__sbuf *b, const ovl_deadlock_step *s) {
  ovl__sb_puts(b, s->op_name);
  if (s->peer >= 0)
    ovl__sb_printf(b, " %s rank %d%s",
                   strcmp(s->op_name, "recv_v2") == 0 ? "from" : "to",
                   s->peer, s->in_group ? " in a group" : "");
  if (s->ring >= 0) {
    ovl__sb_printf(b, ", ring %d", s->ring);
    if (s->coll_index > 0)
      ovl__sb_printf(b, " collective #%llu",
                     (unsigned long long)s->coll_index);
  }
}

static char *cycle_text(const ovl_deadlock_step *st, size_t n, bool graph) {
  ovl__sbuf b = {0};
  ovl__sb_printf(&b, "deadlock: rank %d %s waits at line %d (", st[0].rank,
                 st[0].stream_name, st[0].line);
  what_text(&b, &st[0]);
  ovl__sb_puts(&b, ")");
  if (n == 1) {
    ovl__sb_puts(&b, " for itself: what it waits for is queued behind it on "
                     "the same ");
    ovl__sb_puts(&b, st[0].stream < 0 ? "host" : "stream");
  } else {
    for (size_t i = 1; i < n; i++) {
      if (st[i].rank != st[i - 1].rank)
        ovl__sb_printf(&b, " for rank %d, whose %s is blocked", st[i].rank,
                       st[i].stream_name);
      else
        ovl__sb_printf(&b, " for its %s, which is blocked",
                       st[i].stream_name);
      ovl__sb_printf(&b, " at line %d (", st[i].line);
      what_text(&b, &st[i]);
      ovl__sb_puts(&b, ") waiting");
    }
    ovl__sb_printf(&b, " for rank %d %s", st[0].rank, st[0].stream_name);
  }
  if (graph)
    ovl__sb_puts(&b, " (as graphs: a host sync waits for every stream of "
                     "its segment)");
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static bool key_eq(const void *rec, const void *key) {
  const dl_rec *r = rec;
  const uint64_t *k = key;
  return r->nsteps == k[0] &&
         memcmp(r->key, k, (2 * r->nsteps + 1) * sizeof *k) == 0;
}

/* Add the cycle unless one alike is listed (it counts one more). The
 * steps are taken (kept or freed) whatever happens. */
static bool add_cycle(ovl_deadlocks *res, ovl_deadlock_step *st, size_t n) {
  uint64_t *key = malloc((2 * n + 1) * sizeof *key), h = 0x51ed27;
  void *rec;
  dl_rec *r;
  ovl__flist_got got;
  if (key == NULL) {
    free(st);
    return false;
  }
  key[0] = n;
  for (size_t i = 0; i < n; i++) {
    key[1 + 2 * i] = (uint64_t)(uint32_t)st[i].line << 32 | (uint32_t)st[i].col;
    key[2 + 2 * i] = (uint64_t)(uint32_t)(st[i].stream + 1) |
                     (uint64_t)(st[i].rank != st[(i + 1) % n].rank) << 32;
  }
  for (size_t i = 0; i < 2 * n + 1; i++)
    h = mix(h, key[i]);
  got = ovl__flist_add(&res->list, h, key, &rec);
  if (got != OVL__FLIST_NEW) {
    if (got == OVL__FLIST_FOUND)
      ((dl_rec *)rec)->occurrences++;
    free(key);
    free(st);
    return got != OVL__FLIST_NOMEM;
  }
  r = rec;
  r->nsteps = n;
  r->steps = st;
  r->occurrences = 1;
  r->key = key;
  r->names = calloc(n, sizeof *r->names);
  if (r->names == NULL)
    return false;
  for (size_t i = 0; i < n; i++) {
    if ((r->names[i] = ovl__strdup(st[i].stream_name)) == NULL)
      return false;
    st[i].stream_name = r->names[i];
  }
  r->message = cycle_text(st, n, res->graph);
  return r->message != NULL;
}

/* One cycle through component c, from its first node: the shortest
 * (breadth first inside the component). */
static bool report_component(dl *d, const graph *g, const uint32_t *comp,
                             uint32_t c, uint32_t start,
                             ovl_deadlocks *res) {
  size_t nn = g->nn, qh = 0, qt = 0;
  uint32_t *par = malloc((nn + 1) * sizeof *par);
  size_t *pe = malloc((nn + 1) * sizeof *pe);
  uint32_t *q = malloc((nn + 1) * sizeof *q);
  size_t back = SIZE_MAX; /* the edge that closes the cycle */
  uint32_t last = UINT32_MAX;
  bool ok = par != NULL && pe != NULL && q != NULL;
  for (size_t v = 0; ok && v < nn; v++)
    par[v] = UINT32_MAX;
  if (ok) {
    q[qt++] = start;
    par[start] = start;
  }
  while (ok && qh < qt && back == SIZE_MAX) {
    uint32_t v = q[qh++];
    for (size_t k = g->first[v]; k < g->first[v + 1]; k++) {
      uint32_t w = g->e[k].to;
      if (comp[w] != c)
        continue;
      if (w == start) {
        back = k;
        last = v;
        break;
      }
      if (par[w] == UINT32_MAX) {
        par[w] = v;
        pe[w] = k;
        q[qt++] = w;
      }
    }
  }
  if (ok && back != SIZE_MAX) {
    size_t n = 1;
    ovl_deadlock_step *st;
    for (uint32_t v = last; v != start; v = par[v])
      n++;
    st = calloc(n, sizeof *st);
    if (st == NULL) {
      ok = false;
    } else {
      /* Walk back from `last`: step i is the node, with the edge it
       * leaves by. */
      size_t i = n - 1;
      fill_step(d, last, &g->e[back], &st[i]);
      for (uint32_t v = last; v != start; v = par[v]) {
        i--;
        fill_step(d, par[v], &g->e[pe[v]], &st[i]);
      }
      ok = add_cycle(res, st, n);
    }
  }
  free(par);
  free(pe);
  free(q);
  return ok;
}

static ovl_status find_cycles(dl *d, ovl_deadlocks *res, ovl_error *err) {
  graph g;
  uint32_t *comp = NULL, *first = NULL, *size = NULL;
  bool *self = NULL;
  size_t ncomp = 0;
  bool ok;
  memset(&g, 0, sizeof g);
  ok = build_graph(d, &g);
  for (size_t v = 0; ok && v < g.nn; v++)
    res->blocked += g.blocked[v];
  if (ok && res->blocked == 0) {
    graph_free(&g);
    return OVL_OK;
  }
  comp = malloc((g.nn + 1) * sizeof *comp);
  ok = ok && comp != NULL && scc(&g, comp, &ncomp);
  if (ok) {
    first = malloc((ncomp + 1) * sizeof *first);
    size = calloc(ncomp + 1, sizeof *size);
    self = calloc(ncomp + 1, sizeof *self);
    ok = first != NULL && size != NULL && self != NULL;
  }
  for (size_t c = 0; ok && c < ncomp; c++)
    first[c] = UINT32_MAX;
  for (size_t v = 0; ok && v < g.nn; v++) {
    uint32_t c = comp[v];
    if (first[c] == UINT32_MAX)
      first[c] = (uint32_t)v;
    size[c]++;
    for (size_t k = g.first[v]; k < g.first[v + 1]; k++)
      if (g.e[k].to == v)
        self[c] = true;
  }
  /* Components in order of their first participant. */
  for (size_t v = 0; ok && v < g.nn; v++) {
    uint32_t c = comp[v];
    if (first[c] != v || (size[c] < 2 && !self[c]))
      continue;
    ok = report_component(d, &g, comp, c, (uint32_t)v, res);
  }
  free(comp);
  free(first);
  free(size);
  free(self);
  graph_free(&g);
  return ok ? OVL_OK
            : ovl__err(err, OVL_ENOMEM, "deadlock check: out of memory");
}

ovl_status ovl_deadlock_check(const ovl_program *prog, ovl_deadlocks **out,
                              ovl_error *err) {
  return ovl__deadlock_check_graph(prog, false, out, err);
}

ovl_status ovl__deadlock_check_graph(const ovl_program *prog, bool graph,
                                     ovl_deadlocks **out, ovl_error *err) {
  ovl_deadlocks *res;
  ovl__match m;
  dl d;
  ovl_status st;
  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_deadlock_check: bad argument");
  *out = NULL;
  if (prog->prim_first == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_deadlock_check: %s is not lowered",
                    prog->filename);
  if (prog->nprims >= UINT32_MAX - 1)
    return ovl__err(err, OVL_EINVAL, "ovl_deadlock_check: %s has too many "
                    "primitives", prog->filename);
  res = calloc(1, sizeof *res);
  if (res == NULL)
    return ovl__err(err, OVL_ENOMEM, "deadlock check: out of memory");
  ovl__flist_init(&res->list, sizeof(dl_rec), OVL_FINDINGS_LIST_MAX, key_eq);
  res->nranks = prog->nranks > 0 ? prog->nranks : 1;
  res->graph = graph;
  /* SPMD: every rank does the same, so every collective meets. */
  if (!ovl__program_ranks_differ(prog)) {
    *out = res;
    return OVL_OK;
  }
  if ((st = ovl__match_build(prog, &m, err)) != OVL_OK) {
    ovl_deadlocks_free(res);
    return st;
  }
  if (!dl_init(&d, prog, &m)) {
    ovl__match_free(&m);
    ovl_deadlocks_free(res);
    return ovl__err(err, OVL_ENOMEM, "deadlock check: out of memory");
  }
  d.graph = graph;
  execute(&d);
  st = find_cycles(&d, res, err);
  dl_free(&d);
  ovl__match_free(&m);
  if (st != OVL_OK) {
    ovl_deadlocks_free(res);
    return st;
  }
  *out = res;
  return OVL_OK;
}

size_t ovl__order_bytes_per_op(void) {
  return sizeof(uint64_t) +
         2 * (3 * sizeof(uint32_t) + sizeof(uint64_t)) +
         2 * (sizeof(ovl__citem) + 1);
}

/* ------------------------------------------------------------------ */
/* Accessors and formatting                                            */
/* ------------------------------------------------------------------ */

size_t ovl_deadlocks_count(const ovl_deadlocks *d) {
  return d ? d->list.n : 0;
}
uint64_t ovl_deadlocks_more(const ovl_deadlocks *d) {
  return d ? d->list.more : 0;
}
uint64_t ovl_deadlocks_blocked(const ovl_deadlocks *d) {
  return d ? d->blocked : 0;
}

int ovl_deadlocks_get(const ovl_deadlocks *d, size_t i,
                      ovl_deadlock_finding *info) {
  if (info != NULL)
    memset(info, 0, sizeof *info);
  if (d == NULL || info == NULL || i >= d->list.n)
    return -1;
  info->nsteps = rec_at(d, i)->nsteps;
  info->steps = rec_at(d, i)->steps;
  info->occurrences = rec_at(d, i)->occurrences;
  info->message = rec_at(d, i)->message;
  return 0;
}

static void fmt_json(ovl__sbuf *b, const void *res, const ovl_program *prog,
                     const char *file) {
  const ovl_deadlocks *d = res;
  (void)prog;
  ovl__sb_puts(b, "{\"schedule\":");
  ovl__sb_json_str(b, file);
  ovl__sb_printf(b, ",\"ranks\":%d,\"deadlocks\":[", d->nranks);
  for (size_t i = 0; i < d->list.n; i++) {
    const dl_rec *r = rec_at(d, i);
    ovl__sb_printf(b, "%s{\"steps\":[", i ? "," : "");
    for (size_t k = 0; k < r->nsteps; k++) {
      const ovl_deadlock_step *s = &r->steps[k];
      ovl__sb_printf(b, "%s{\"rank\":%d,\"stream\":", k ? "," : "", s->rank);
      ovl__sb_json_str(b, s->stream_name);
      ovl__sb_puts(b, ",\"op\":");
      ovl__sb_json_str(b, s->op_name);
      ovl__sb_printf(b, ",\"line\":%d,\"col\":%d,\"ring\":", s->line,
                     s->col);
      if (s->ring >= 0)
        ovl__sb_printf(b, "%d", s->ring);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_puts(b, ",\"coll_index\":");
      if (s->coll_index > 0)
        ovl__sb_printf(b, "%llu", (unsigned long long)s->coll_index);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_puts(b, ",\"peer\":");
      if (s->peer >= 0)
        ovl__sb_printf(b, "%d", s->peer);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_printf(b, ",\"in_group\":%s}", s->in_group ? "true" : "false");
    }
    ovl__sb_printf(b, "],\"occurrences\":%llu,\"message\":",
                   (unsigned long long)r->occurrences);
    ovl__sb_json_str(b, r->message);
    ovl__sb_puts(b, "}");
  }
  ovl__sb_printf(b, "],\"count\":%zu,\"more\":%llu,\"blocked\":%llu}\n",
                 d->list.n, (unsigned long long)d->list.more,
                 (unsigned long long)d->blocked);
}

static void fmt_human(ovl__sbuf *b, const void *res,
                      const ovl_program *prog, const char *file) {
  const ovl_deadlocks *d = res;
  (void)prog;
  for (size_t i = 0; i < d->list.n; i++) {
    const dl_rec *r = rec_at(d, i);
    ovl__sb_printf(b, "deadlock %zu: %s", i + 1,
                   strncmp(r->message, "deadlock: ", 10) == 0
                       ? r->message + 10
                       : r->message);
    if (r->occurrences > 1)
      ovl__sb_printf(b, " (and %llu more cycle%s alike on other ranks)",
                     (unsigned long long)r->occurrences - 1,
                     r->occurrences == 2 ? "" : "s");
    ovl__sb_puts(b, "\n");
  }
  ovl__findings_close(b, d->list.n, d->list.more, "deadlock", "deadlock",
                      "deadlocks", file, d->nranks, "");
}

ovl_status ovl_deadlocks_format(const ovl_deadlocks *d,
                                const ovl_program *prog, int json,
                                char **text, ovl_error *err) {
  return ovl__findings_format(d, prog, json ? fmt_json : fmt_human,
                              "ovl_deadlocks_format", "deadlock report",
                              text, err);
}
