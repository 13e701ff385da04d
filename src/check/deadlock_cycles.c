/*
 * What the blocked participants of the deadlock check's execution
 * (check/deadlock_exec.c) wait for, as a graph, and its cycles
 * (check/deadlock.h): Tarjan's strongly connected components, and one
 * cycle through each that has one, the shortest from its first
 * participant, as the steps of a deadlock (check/deadlock_report.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check/deadlock.h"

/* ------------------------------------------------------------------ */
/* What the blocked wait for, and its cycles                           */
/* ------------------------------------------------------------------ */

typedef struct edge {
  uint32_t to;
  uint32_t op;   /* the op the source is blocked at */
  uint32_t item; /* its comm item, or OVL__NONE */
  uint32_t wait; /* the item of `to`'s rank it waits for, or OVL__NONE */
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

static bool add_edge(graph *g, uint32_t to, uint32_t op, uint32_t item,
                     uint32_t wait) {
  if (g->ne == g->cap) {
    size_t nc = g->cap ? 2 * g->cap : 64;
    edge *ne = realloc(g->e, nc * sizeof *ne);
    if (ne == NULL)
      return false;
    g->e = ne;
    g->cap = nc;
  }
  g->e[g->ne++] = (edge){to, op, item, wait};
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
          !add_edge(g, owner(d, y), it->op, x, y))
        return false;
    }
    return true;
  }
  if (it->partner != OVL__NONE && d->ist[it->partner] == IT_NONE)
    return add_edge(g, owner(d, it->partner), it->op, x, it->partner);
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
                        OVL__NONE, OVL__NONE))
            return false;
        }
        continue;
      }
      {
        uint32_t prim = ovl__dl_next_prim(d, r, part);
        if (prim == UINT32_MAX)
          continue;
        g->blocked[v] = true;
        g->at[v] = d->op_of[prim];
        if (p->state == ST_WAIT) {
          if (!add_edge(g, (uint32_t)(r * d->np + p->wait_stream), g->at[v],
                        OVL__NONE, OVL__NONE))
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
                        OVL__NONE, OVL__NONE))
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
/* The cycles as steps                                                 */
/* ------------------------------------------------------------------ */

static bool op_has_ring(const ovl__op *o) {
  return (o->def->attrs & OVL_ATTR_RING_ID) &&
         (o->def->ring_use != 0 || o->def->p2p != OVL_P2P_NONE);
}

/* What a comm step waits to match: item y of another rank (or its own),
 * and where that rank is held back before it: its stream's head when y is
 * enqueued behind it, else (not enqueued, or a group the host has not
 * enqueued whole) the op its host is blocked at. */
static void fill_match(dl *d, uint32_t y, dl_match *m) {
  const ovl_program *prog = d->prog;
  const ovl__citem *it = &d->m->items[y];
  pstate *h = PS(d, it->rank, d->ns);
  uint32_t at = OVL__NONE;
  int where = -1;
  const ovl__op *o = &prog->ops[it->op];
  m->rank = it->rank;
  m->op = it->op;
  m->line = o->line;
  m->col = o->col;
  m->op_name = o->def->name;
  if (it->prim < h->hp) {
    uint32_t head = ovl__dl_next_prim(d, it->rank, it->stream);
    if (head != UINT32_MAX && d->op_of[head] != it->op &&
        !(it->group != 0 && prog->ops[d->op_of[head]].group == it->group)) {
      at = d->op_of[head];
      where = it->stream;
    }
  }
  if (at == OVL__NONE && h->state == ST_SYNC && h->hp < prog->nprims) {
    at = d->op_of[h->hp];
    where = -1;
  }
  m->after_op = at;
  m->after_line = at != OVL__NONE ? prog->ops[at].line : 0;
  m->after_op_name = at != OVL__NONE ? prog->ops[at].def->name : NULL;
  m->after_stream = where;
  /* The report copies it (the result does not refer to the program). */
  m->after_stream_name = ovl__stream_name(prog, where);
}

static void fill_step(dl *d, uint32_t v, const edge *e, ovl_deadlock_step *s,
                      dl_match *m) {
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
  memset(m, 0, sizeof *m);
  m->rank = -1;
  m->after_op = OVL__NONE;
  m->after_stream = -1;
  if (e->item != OVL__NONE && e->wait != OVL__NONE)
    fill_match(d, e->wait, m);
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
    dl_match *mt;
    for (uint32_t v = last; v != start; v = par[v])
      n++;
    st = calloc(n, sizeof *st);
    mt = calloc(n, sizeof *mt);
    if (st == NULL || mt == NULL) {
      free(st);
      free(mt);
      ok = false;
    } else {
      /* Walk back from `last`: step i is the node, with the edge it
       * leaves by. */
      size_t i = n - 1;
      fill_step(d, last, &g->e[back], &st[i], &mt[i]);
      for (uint32_t v = last; v != start; v = par[v]) {
        i--;
        fill_step(d, par[v], &g->e[pe[v]], &st[i], &mt[i]);
      }
      ok = ovl__deadlocks_add(res, st, mt, n);
    }
  }
  free(par);
  free(pe);
  free(q);
  return ok;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The positions of the comm ops no rank posted (of the positions of
 * every op whose item some rank posted, none): res->unreached. */
static bool unreached(dl *d, ovl_deadlocks *res) {
  size_t n = d->m->nitems, na = 0, nb = 0, k = 0;
  uint64_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
  if (a == NULL || b == NULL) {
    free(a);
    free(b);
    return false;
  }
  for (size_t x = 0; x < n; x++) {
    const ovl__op *o = &d->prog->ops[d->m->items[x].op];
    uint64_t pos = (uint64_t)(uint32_t)o->line << 32 | (uint32_t)o->col;
    if (d->ist[x] == IT_NONE)
      b[nb++] = pos;
    else
      a[na++] = pos;
  }
  qsort(a, na, sizeof *a, cmp_u64);
  qsort(b, nb, sizeof *b, cmp_u64);
  for (size_t i = 0, j = 0; i < nb; i++) {
    while (j < na && a[j] < b[i])
      j++;
    if ((j < na && a[j] == b[i]) || (k > 0 && b[k - 1] == b[i]))
      continue;
    b[k++] = b[i];
  }
  free(a);
  res->unreached = b;
  res->nunreached = k;
  return true;
}

ovl_status ovl__dl_find_cycles(dl *d, ovl_deadlocks *res, ovl_error *err) {
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
  ok = ok && unreached(d, res);
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
