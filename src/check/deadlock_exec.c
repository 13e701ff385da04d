/*
 * The deadlock check's abstract execution (check/deadlock.h; what it does:
 * check/deadlock.c): one iteration on every rank at once, a worklist of
 * participants, each running as far as it can. What is left blocked is
 * check/deadlock_cycles.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "check/deadlock.h"

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

uint32_t ovl__dl_next_prim(dl *d, int r, int s) {
  pstate *p = PS(d, r, s);
  norm(d, r, s);
  return p->pos < d->sfirst[s + 1] - d->sfirst[s]
             ? d->slist[d->sfirst[s] + p->pos]
             : UINT32_MAX;
}

/* Whether stream s of rank r is past primitive q (on it). */
static bool passed(dl *d, int r, int s, uint32_t q) {
  uint32_t p = ovl__dl_next_prim(d, r, s);
  return p == UINT32_MAX || p > q;
}

/* Whether stream s has nothing enqueued left: its next primitive is not
 * before the host's frontier. */
static bool drained(dl *d, int r, int s) {
  uint32_t p = ovl__dl_next_prim(d, r, s);
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
      uint32_t q = ovl__dl_next_prim(d, r, s);
      if (q != UINT32_MAX && q < h->hp)
        push(d, r, s);
      else if (q == UINT32_MAX)
        p->state = ST_DONE;
    }
  }
}

void ovl__dl_free(dl *d) {
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

bool ovl__dl_init(dl *d, const ovl_program *prog, const ovl__match *m) {
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
  ovl__dl_free(d);
  return false;
}

void ovl__dl_execute(dl *d) {
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
