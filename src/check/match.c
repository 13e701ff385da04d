/*
 * The matching of communication across ranks (check/match.h): per rank its
 * comm ops in program order, per ring the collectives by position and the
 * sends and receives by NCCL's rule; and the flight record's first
 * disagreement (ovl__match_first_disagreement).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/match.h"

bool ovl__program_ranks_differ(const ovl_program *prog) {
  uint64_t all = ovl__program_all_ranks(prog);
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *o = &prog->ops[i];
    if ((o->ranks & all) != all || o->rank_attr >= 0 ||
        o->def->p2p != OVL_P2P_NONE)
      return true;
  }
  return false;
}

void ovl__match_free(ovl__match *m) {
  free(m->items);
  free(m->rank_first);
  free(m->coll);
  free(m->cfirst);
  free(m->coll_max);
  free(m->send);
  free(m->recv);
  free(m->sfirst);
  free(m->rfirst);
  memset(m, 0, sizeof *m);
}

/* The comm primitive of op i (its COLL, SEND or RECV), or OVL__NONE. */
static uint32_t comm_prim(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (ovl__prim_is_comm(&p[k]))
      return prog->prim_first[i] + (uint32_t)k;
  return OVL__NONE;
}

/* Prefix sums in place: counts c[0..n) become starts, c[n] the total. */
static void prefix(size_t *c, size_t n) {
  size_t sum = 0;
  for (size_t k = 0; k < n; k++) {
    size_t v = c[k];
    c[k] = sum;
    sum += v;
  }
  c[n] = sum;
}

/* The ops with a comm primitive, in order, and each one's primitive: n of
 * them (one pass over the compact primitives; the ops, large, are read
 * only for these). NULL arrays when out of memory. */
static size_t comm_ops(const ovl_program *prog, uint32_t **ops,
                       uint32_t **prims) {
  size_t n = 0, cap = 1024;
  *ops = malloc(cap * sizeof **ops);
  *prims = malloc(cap * sizeof **prims);
  if (*ops == NULL || *prims == NULL)
    goto oom;
  for (size_t i = 0; i < prog->nops; i++) {
    uint32_t p = comm_prim(prog, i);
    if (p == OVL__NONE)
      continue;
    if (n == cap) {
      uint32_t *a, *b;
      cap *= 2;
      a = realloc(*ops, cap * sizeof *a);
      if (a != NULL)
        *ops = a;
      b = realloc(*prims, cap * sizeof *b);
      if (b != NULL)
        *prims = b;
      if (a == NULL || b == NULL)
        goto oom;
    }
    (*ops)[n] = (uint32_t)i;
    (*prims)[n++] = p;
  }
  return n;
oom:
  free(*ops);
  free(*prims);
  *ops = *prims = NULL;
  return 0;
}

ovl_status ovl__match_build(const ovl_program *prog, ovl__match *m,
                            ovl_error *err) {
  int nr = prog->nranks > 0 ? prog->nranks : 1;
  int ng = prog->nrings > 0 ? prog->nrings : 1;
  size_t npair = (size_t)ng * (size_t)nr * (size_t)nr;
  size_t nrr = (size_t)nr * (size_t)ng;
  uint64_t all = ovl__program_all_ranks(prog);
  size_t *fill = NULL, *cfill = NULL, *sfill = NULL, *rfill = NULL;
  uint32_t *tagc = NULL, *cops = NULL, *cprims = NULL;
  size_t ncomm = comm_ops(prog, &cops, &cprims);

  memset(m, 0, sizeof *m);
  m->prog = prog;
  m->nranks = nr;
  m->nrings = ng;
  m->rank_first = calloc((size_t)nr + 1, sizeof *m->rank_first);
  m->cfirst = calloc(nrr + 1, sizeof *m->cfirst);
  m->coll_max = calloc((size_t)ng, sizeof *m->coll_max);
  m->sfirst = calloc(npair + 1, sizeof *m->sfirst);
  m->rfirst = calloc(npair + 1, sizeof *m->rfirst);
  tagc = calloc(nrr, sizeof *tagc);
  if (m->rank_first == NULL || m->cfirst == NULL || m->coll_max == NULL ||
      m->sfirst == NULL || m->rfirst == NULL || tagc == NULL || cops == NULL)
    goto oom;

  /* Count: items per rank, collectives per (rank, ring), sends and
   * receives per (ring, from, to). */
  for (size_t c = 0; c < ncomm; c++) {
    const ovl__op *o = &prog->ops[cops[c]];
    uint64_t ranks = o->ranks & all;
    if (c + 16 < ncomm) /* ops far apart in a large program */
      __builtin_prefetch(&prog->ops[cops[c + 16]]);
    for (; ranks != 0; ranks &= ranks - 1) {
      int r = __builtin_ctzll(ranks);
      m->rank_first[r]++;
      if (o->def->p2p == OVL_P2P_NONE) {
        m->cfirst[(size_t)r * (size_t)ng + (size_t)o->ring_id]++;
      } else {
        int peer = ovl__op_peer(prog, o, r);
        if (peer < 0 || peer >= nr)
          continue; /* binding refuses it; never matched */
        if (o->def->p2p == OVL_P2P_SEND)
          m->sfirst[ovl__match_pair(m, o->ring_id, r, peer)]++;
        else
          m->rfirst[ovl__match_pair(m, o->ring_id, r, peer)]++;
      }
    }
  }
  for (int R = 0; R < ng; R++)
    for (int r = 0; r < nr; r++) {
      size_t c = m->cfirst[(size_t)r * (size_t)ng + (size_t)R];
      if (c > m->coll_max[R])
        m->coll_max[R] = (uint32_t)c;
    }
  prefix(m->rank_first, (size_t)nr);
  prefix(m->cfirst, nrr);
  prefix(m->sfirst, npair);
  prefix(m->rfirst, npair);
  m->nitems = m->rank_first[nr];
  m->items = malloc((m->nitems + 1) * sizeof *m->items);
  m->coll = malloc((m->cfirst[nrr] + 1) * sizeof *m->coll);
  m->send = malloc((m->sfirst[npair] + 1) * sizeof *m->send);
  m->recv = malloc((m->rfirst[npair] + 1) * sizeof *m->recv);
  fill = malloc(((size_t)nr + 1) * sizeof *fill);
  cfill = malloc((nrr + 1) * sizeof *cfill);
  sfill = malloc((npair + 1) * sizeof *sfill);
  rfill = malloc((npair + 1) * sizeof *rfill);
  if (m->items == NULL || m->coll == NULL || m->send == NULL ||
      m->recv == NULL || fill == NULL || cfill == NULL || sfill == NULL ||
      rfill == NULL)
    goto oom;
  memcpy(fill, m->rank_first, ((size_t)nr + 1) * sizeof *fill);
  memcpy(cfill, m->cfirst, (nrr + 1) * sizeof *cfill);
  memcpy(sfill, m->sfirst, (npair + 1) * sizeof *sfill);
  memcpy(rfill, m->rfirst, (npair + 1) * sizeof *rfill);

  /* Fill, in program order. */
  for (size_t c = 0; c < ncomm; c++) {
    size_t i = cops[c];
    const ovl__op *o = &prog->ops[i];
    uint64_t ranks = o->ranks & all;
    uint32_t p = cprims[c];
    if (c + 16 < ncomm) /* ops far apart in a large program */
      __builtin_prefetch(&prog->ops[cops[c + 16]]);
    for (; ranks != 0; ranks &= ranks - 1) {
      int r = __builtin_ctzll(ranks);
      size_t rr = (size_t)r * (size_t)ng + (size_t)o->ring_id;
      uint32_t idx = (uint32_t)fill[r]++;
      ovl__citem *it = &m->items[idx];
      it->op = (uint32_t)i;
      it->prim = p;
      it->partner = OVL__NONE;
      it->group = o->group;
      it->stream = prog->prims[p].stream;
      it->ring = (uint8_t)o->ring_id;
      it->rank = (uint8_t)r;
      it->tag = ++tagc[rr];
      if (o->def->p2p == OVL_P2P_NONE) {
        it->kind = OVL__CI_COLL;
        it->peer = 0;
        it->ord = (uint32_t)(cfill[rr] - m->cfirst[rr]);
        m->coll[cfill[rr]++] = idx;
      } else {
        int peer = ovl__op_peer(prog, o, r);
        size_t q;
        it->kind = o->def->p2p == OVL_P2P_SEND ? OVL__CI_SEND : OVL__CI_RECV;
        it->peer = (uint8_t)(peer >= 0 && peer < nr ? peer : r);
        if (peer < 0 || peer >= nr) {
          it->ord = OVL__NONE;
          continue;
        }
        q = ovl__match_pair(m, o->ring_id, r, peer);
        if (it->kind == OVL__CI_SEND) {
          it->ord = (uint32_t)(sfill[q] - m->sfirst[q]);
          m->send[sfill[q]++] = idx;
        } else {
          it->ord = (uint32_t)(rfill[q] - m->rfirst[q]);
          m->recv[rfill[q]++] = idx;
        }
      }
    }
  }
  /* Partners: the j-th send from a to b, the j-th receive on b from a. */
  for (int R = 0; R < ng; R++)
    for (int a = 0; a < nr; a++)
      for (int b = 0; b < nr; b++) {
        size_t ps = ovl__match_pair(m, R, a, b);
        size_t pr = ovl__match_pair(m, R, b, a);
        size_t ns = m->sfirst[ps + 1] - m->sfirst[ps];
        size_t nrv = m->rfirst[pr + 1] - m->rfirst[pr];
        size_t n = ns < nrv ? ns : nrv;
        for (size_t j = 0; j < n; j++) {
          uint32_t s = m->send[m->sfirst[ps] + j];
          uint32_t v = m->recv[m->rfirst[pr] + j];
          m->items[s].partner = v;
          m->items[v].partner = s;
        }
      }
  free(fill);
  free(cfill);
  free(sfill);
  free(rfill);
  free(tagc);
  free(cops);
  free(cprims);
  return OVL_OK;
oom:
  free(fill);
  free(cfill);
  free(sfill);
  free(rfill);
  free(tagc);
  free(cops);
  free(cprims);
  ovl__match_free(m);
  return ovl__err(err, OVL_ENOMEM, "communication check: out of memory");
}

/* ------------------------------------------------------------------ */
/* Finding an item                                                     */
/* ------------------------------------------------------------------ */

void ovl__match_item_table(const ovl__match *m, uint32_t *of) {
  size_t nops = m->prog->nops;
  for (size_t k = 0; k < (size_t)m->nranks * nops; k++)
    of[k] = OVL__NONE;
  for (size_t i = 0; i < m->nitems; i++)
    of[(size_t)m->items[i].rank * nops + m->items[i].op] = (uint32_t)i;
}

uint32_t ovl__match_ring_len(const ovl__match *m, int rank, int ring) {
  uint32_t n = 0;
  if (rank < 0 || rank >= m->nranks)
    return 0;
  /* The last item of the rank on the ring carries its count as its tag. */
  for (size_t i = m->rank_first[rank]; i < m->rank_first[rank + 1]; i++)
    if (m->items[i].ring == ring)
      n = m->items[i].tag;
  return n;
}

uint32_t ovl__match_tag_item(const ovl__match *m, int rank, int ring,
                             uint64_t tag) {
  if (rank < 0 || rank >= m->nranks || tag == 0)
    return OVL__NONE;
  for (size_t i = m->rank_first[rank]; i < m->rank_first[rank + 1]; i++)
    if (m->items[i].ring == ring && m->items[i].tag == tag)
      return (uint32_t)i;
  return OVL__NONE;
}

/* ------------------------------------------------------------------ */
/* Describing an item                                                  */
/* ------------------------------------------------------------------ */

void ovl__citem_describe(const ovl__match *m, const ovl__citem *it,
                         ovl__citem_desc *d) {
  const ovl_program *prog = m->prog;
  const ovl__op *o = &prog->ops[it->op];
  int64_t in_n = 0, out_n = 0;
  d->op = o;
  d->in = o->def->reads && o->nin > 0 ? o->in[0] : -1;
  d->out = o->def->writes ? o->out : -1;
  d->dtype = OVL_DTYPE_FLOAT32;
  if (d->in >= 0) {
    in_n = prog->vars[d->in].numel;
    d->dtype = prog->vars[d->in].dtype;
  }
  if (d->out >= 0) {
    out_n = prog->vars[d->out].numel;
    if (d->in < 0)
      d->dtype = prog->vars[d->out].dtype;
  }
  d->root = -1;
  if (it->kind == OVL__CI_COLL) {
    if (o->def->coll == OVL_COLL_BARRIER) {
      d->in = d->out = -1;
      d->count = 0;
    } else {
      d->count = (int64_t)ovl__coll_count(o->def->coll, in_n, out_n);
    }
    if (ovl__coll_has_root(o->def->coll))
      d->root = ovl__op_root(prog, o, it->rank);
  } else {
    d->count = it->kind == OVL__CI_SEND ? in_n : out_n;
  }
}

void ovl__citem_text(const ovl__match *m, const ovl__citem *it, char *buf,
                     size_t size) {
  const ovl_program *prog = m->prog;
  ovl__citem_desc d;
  char root[32] = "";
  ovl__citem_describe(m, it, &d);
  if (d.root >= 0)
    snprintf(root, sizeof root, ", root %d", d.root);
  if (it->kind == OVL__CI_COLL && d.op->def->coll == OVL_COLL_BARRIER)
    snprintf(buf, size, "%s", d.op->def->name);
  else if (it->kind == OVL__CI_RECV || d.in < 0)
    snprintf(buf, size, "%s into '%s' (%s, %lld elements%s)",
             d.op->def->name, d.out >= 0 ? prog->vars[d.out].name : "?",
             ovl_dtype_name(d.dtype), (long long)d.count, root);
  else if (d.out >= 0 && d.out != d.in)
    snprintf(buf, size, "%s of '%s' into '%s' (%s, %lld elements%s)",
             d.op->def->name, prog->vars[d.in].name, prog->vars[d.out].name,
             ovl_dtype_name(d.dtype), (long long)d.count, root);
  else
    snprintf(buf, size, "%s of '%s' (%s, %lld elements%s)", d.op->def->name,
             prog->vars[d.in].name, ovl_dtype_name(d.dtype),
             (long long)d.count, root);
}

static void at_text(ovl__sbuf *b, const ovl__match *m, uint32_t op) {
  ovl__sb_printf(b, " at %s:%d:%d",
                 m->file != NULL ? m->file
                 : m->prog->filename != NULL ? m->prog->filename
                                             : "<program>",
                 m->prog->ops[op].line, m->prog->ops[op].col);
}

void ovl__citem_where(const ovl__match *m, const ovl__citem *it,
                      ovl__sbuf *b) {
  char d[512];
  ovl__citem_text(m, it, d, sizeof d);
  ovl__sb_puts(b, d);
  if (it->kind != OVL__CI_COLL)
    ovl__sb_printf(b, " %s rank %d", it->kind == OVL__CI_SEND ? "to" : "from",
                   it->peer);
  at_text(b, m, it->op);
}

/* ------------------------------------------------------------------ */
/* Comparing                                                           */
/* ------------------------------------------------------------------ */

/* What differs between two collectives (OVL_DIFFERS_*). */
static unsigned coll_differs(const ovl__match *m, const ovl__citem *a,
                             const ovl__citem *b) {
  const ovl__op *oa = &m->prog->ops[a->op], *ob = &m->prog->ops[b->op];
  ovl__citem_desc da, db;
  unsigned d = 0;
  if (a->op == b->op && oa->rank_attr < 0)
    return 0;
  ovl__citem_describe(m, a, &da);
  ovl__citem_describe(m, b, &db);
  if (oa->def->coll != ob->def->coll)
    d |= OVL_DIFFERS_OP;
  else if (ovl__coll_has_redop(oa->def->coll) &&
           oa->def->redop != ob->def->redop)
    d |= OVL_DIFFERS_REDOP;
  if (da.count != db.count)
    d |= OVL_DIFFERS_COUNT;
  if (da.dtype != db.dtype && oa->def->coll != OVL_COLL_BARRIER &&
      ob->def->coll != OVL_COLL_BARRIER)
    d |= OVL_DIFFERS_DTYPE;
  if (da.root != db.root)
    d |= OVL_DIFFERS_ROOT;
  if (d == 0 && (da.in != db.in || da.out != db.out))
    d |= OVL_DIFFERS_VAR;
  return d;
}

bool ovl__match_coll_agree(const ovl__match *m, uint32_t a, uint32_t b) {
  return m->items[a].kind == OVL__CI_COLL && m->items[b].kind == OVL__CI_COLL &&
         coll_differs(m, &m->items[a], &m->items[b]) == 0;
}

static unsigned pair_differs(const ovl__match *m, const ovl__citem *s,
                             const ovl__citem *r) {
  ovl__citem_desc ds, dr;
  unsigned d = 0;
  ovl__citem_describe(m, s, &ds);
  ovl__citem_describe(m, r, &dr);
  if (ds.count != dr.count)
    d |= OVL_DIFFERS_COUNT;
  if (ds.dtype != dr.dtype)
    d |= OVL_DIFFERS_DTYPE;
  return d;
}

static int64_t item_bytes(const ovl__match *m, const ovl__citem *it) {
  ovl__citem_desc d;
  ovl__citem_describe(m, it, &d);
  return d.count * (int64_t)ovl_dtype_size(d.dtype);
}

/* ------------------------------------------------------------------ */
/* The scan: every disagreement, in order                              */
/* ------------------------------------------------------------------ */

uint64_t ovl__occ_first_tag(const ovl__match *m, const ovl__occ *o) {
  uint64_t t = UINT64_MAX;
  for (int k = 0; k < o->nitems; k++)
    if (o->items[k] != OVL__NONE && m->items[o->items[k]].tag < t)
      t = m->items[o->items[k]].tag;
  return t;
}

ovl_status ovl__match_scan(const ovl__match *m, int ring,
                           ovl_status (*fn)(void *ctx, const ovl__occ *o,
                                            ovl_error *err),
                           void *ctx, ovl_error *err) {
  int nr = m->nranks;
  uint32_t *row = malloc((size_t)nr * sizeof *row);
  ovl_status st = OVL_OK;
  if (row == NULL)
    return ovl__err(err, OVL_ENOMEM, "communication check: out of memory");
  int lo = ring < 0 ? 0 : ring, hi = ring < 0 ? m->nrings : ring + 1;
  for (int R = lo; st == OVL_OK && R < hi; R++) {
    /* Collectives, position by position. */
    for (size_t k = 0; st == OVL_OK && k < m->coll_max[R]; k++) {
      uint32_t first = OVL__NONE;
      unsigned d = 0;
      bool same_size = true;
      int64_t bytes = -1;
      for (int r = 0; r < nr; r++) {
        uint32_t it = ovl__match_coll(m, r, R, k);
        row[r] = it;
        if (it == OVL__NONE) {
          d |= OVL_DIFFERS_MISSING;
          continue;
        }
        if (first == OVL__NONE) {
          first = it;
          continue;
        }
        d |= coll_differs(m, &m->items[first], &m->items[it]);
      }
      if (d == 0)
        continue;
      for (int r = 0; r < nr; r++) {
        int64_t b;
        if (row[r] == OVL__NONE)
          continue;
        b = item_bytes(m, &m->items[row[r]]);
        if (bytes >= 0 && b != bytes)
          same_size = false;
        bytes = b;
      }
      ovl__occ o = {.kind = OVL_MISMATCH_COLLECTIVE,
                    .ring = R,
                    .index = k,
                    .sender = -1,
                    .receiver = -1,
                    .differs = d,
                    .same_size = same_size && !(d & OVL_DIFFERS_MISSING),
                    .nitems = nr,
                    .items = row};
      st = fn(ctx, &o, err);
    }
    /* Sends and receives, pair by pair. */
    for (int a = 0; st == OVL_OK && a < nr; a++)
      for (int b = 0; st == OVL_OK && b < nr; b++) {
        size_t ps = ovl__match_pair(m, R, a, b);
        size_t pr = ovl__match_pair(m, R, b, a);
        size_t ns = m->sfirst[ps + 1] - m->sfirst[ps];
        size_t nrv = m->rfirst[pr + 1] - m->rfirst[pr];
        size_t n = ns > nrv ? ns : nrv;
        for (size_t j = 0; st == OVL_OK && j < n; j++) {
          uint32_t pair[2] = {j < ns ? m->send[m->sfirst[ps] + j] : OVL__NONE,
                              j < nrv ? m->recv[m->rfirst[pr] + j]
                                      : OVL__NONE};
          /* Ops far apart in a large program: fetch ahead. */
          if (j + 16 < ns && j + 16 < nrv) {
            __builtin_prefetch(
                &m->prog->ops[m->items[m->send[m->sfirst[ps] + j + 16]].op]);
            __builtin_prefetch(
                &m->prog->ops[m->items[m->recv[m->rfirst[pr] + j + 16]].op]);
          }
          ovl__occ o = {.ring = R, .index = j, .sender = a, .receiver = b,
                        .nitems = 2, .items = pair};
          if (pair[1] == OVL__NONE) {
            o.kind = OVL_MISMATCH_UNMATCHED_SEND;
            o.differs = OVL_DIFFERS_MISSING;
          } else if (pair[0] == OVL__NONE) {
            o.kind = OVL_MISMATCH_UNMATCHED_RECV;
            o.differs = OVL_DIFFERS_MISSING;
          } else {
            o.kind = OVL_MISMATCH_PAIR;
            o.differs = pair_differs(m, &m->items[pair[0]],
                                     &m->items[pair[1]]);
            if (o.differs == 0)
              continue;
            o.same_size = item_bytes(m, &m->items[pair[0]]) ==
                          item_bytes(m, &m->items[pair[1]]);
          }
          st = fn(ctx, &o, err);
        }
      }
  }
  free(row);
  return st;
}

/* ------------------------------------------------------------------ */
/* The text of an occurrence                                           */
/* ------------------------------------------------------------------ */

/* "rank 3", "ranks 0-2", "ranks 0, 2-3" of a mask. */
void ovl__ranks_text(ovl__sbuf *b, uint64_t mask) {
  int n = __builtin_popcountll(mask);
  bool first = true;
  ovl__sb_puts(b, n == 1 ? "rank " : "ranks ");
  for (int r = 0; r < 64;) {
    int e;
    if (!((mask >> r) & 1)) {
      r++;
      continue;
    }
    e = r;
    while (e + 1 < 64 && ((mask >> (e + 1)) & 1))
      e++;
    ovl__sb_printf(b, "%s%d", first ? "" : ", ", r);
    if (e > r)
      ovl__sb_printf(b, "-%d", e);
    first = false;
    r = e + 1;
  }
}

static void differs_text(ovl__sbuf *b, unsigned d) {
  static const char *const names[] = {"op",   "reduction", "count", "dtype",
                                      "root", "variable"};
  int n = 0, k;
  unsigned dd = d & ~(unsigned)OVL_DIFFERS_MISSING;
  int total = __builtin_popcount(dd);
  if (total == 0)
    return;
  ovl__sb_puts(b, "; they differ in ");
  for (k = 0; k < 6; k++) {
    if (!(dd & (1u << k)))
      continue;
    if (n > 0)
      ovl__sb_puts(b, n == total - 1 ? " and " : ", ");
    ovl__sb_puts(b, names[k]);
    n++;
  }
}

const char *ovl__differs_name(unsigned bit) {
  switch (bit) {
  case OVL_DIFFERS_OP:
    return "op";
  case OVL_DIFFERS_REDOP:
    return "reduction";
  case OVL_DIFFERS_COUNT:
    return "count";
  case OVL_DIFFERS_DTYPE:
    return "dtype";
  case OVL_DIFFERS_ROOT:
    return "root";
  case OVL_DIFFERS_VAR:
    return "variable";
  case OVL_DIFFERS_MISSING:
    return "missing";
  default:
    return "?";
  }
}

void ovl__occ_text(const ovl__match *m, const ovl__occ *o, ovl__sbuf *b) {
  char d[512];
  if (o->kind == OVL_MISMATCH_COLLECTIVE) {
    /* Ranks that issue the same (op, root) together, in order of their
     * first rank; then those that never issue it. */
    uint64_t done = 0, missing = 0;
    bool first = true;
    ovl__sb_printf(b, "ring %d collective #%llu: ", o->ring,
                   (unsigned long long)o->index + 1);
    for (int r = 0; r < o->nitems; r++) {
      uint64_t same = 0;
      const ovl__citem *it;
      if ((done >> r) & 1)
        continue;
      if (o->items[r] == OVL__NONE) {
        missing |= (uint64_t)1 << r;
        continue;
      }
      it = &m->items[o->items[r]];
      for (int q = r; q < o->nitems; q++) {
        const ovl__citem *iq;
        if (o->items[q] == OVL__NONE)
          continue;
        iq = &m->items[o->items[q]];
        if (iq->op == it->op && coll_differs(m, it, iq) == 0)
          same |= (uint64_t)1 << q;
      }
      done |= same;
      ovl__citem_text(m, it, d, sizeof d);
      ovl__sb_puts(b, first ? "" : ", ");
      ovl__ranks_text(b, same);
      ovl__sb_printf(b, " %s %s", __builtin_popcountll(same) == 1 ? "issues"
                                                                  : "issue",
                     d);
      at_text(b, m, it->op);
      first = false;
    }
    if (missing != 0) {
      ovl__sb_puts(b, first ? "" : ", ");
      ovl__ranks_text(b, missing);
      if (__builtin_popcountll(missing) == 1) {
        int r = __builtin_ctzll(missing);
        size_t n = ovl__match_ncoll(m, r, o->ring);
        ovl__sb_printf(b, " never issues it (it issues %zu collective%s on "
                          "ring %d)",
                       n, n == 1 ? "" : "s", o->ring);
      } else {
        ovl__sb_puts(b, " never issue it");
      }
    }
    differs_text(b, o->differs);
    if (o->same_size && o->differs != 0)
      ovl__sb_puts(b, " (the same size: a run would mix buffers silently)");
    return;
  }
  {
    int a = o->sender, rc = o->receiver;
    size_t ps = ovl__match_pair(m, o->ring, a, rc);
    size_t pr = ovl__match_pair(m, o->ring, rc, a);
    size_t ns = m->sfirst[ps + 1] - m->sfirst[ps];
    size_t nrv = m->rfirst[pr + 1] - m->rfirst[pr];
    if (o->kind == OVL_MISMATCH_UNMATCHED_SEND) {
      ovl__sb_printf(b, "ring %d: rank %d issues ", o->ring, a);
      ovl__citem_where(m, &m->items[o->items[0]], b);
      ovl__sb_printf(b, " (its send #%llu to rank %d), and rank %d never "
                        "receives it (it posts %zu receive%s from rank %d on "
                        "ring %d)",
                     (unsigned long long)o->index + 1, rc, rc, nrv,
                     nrv == 1 ? "" : "s", a, o->ring);
    } else if (o->kind == OVL_MISMATCH_UNMATCHED_RECV) {
      ovl__sb_printf(b, "ring %d: rank %d issues ", o->ring, rc);
      ovl__citem_where(m, &m->items[o->items[1]], b);
      ovl__sb_printf(b, " (its receive #%llu from rank %d), and rank %d "
                        "never sends it (it issues %zu send%s to rank %d on "
                        "ring %d)",
                     (unsigned long long)o->index + 1, a, a, ns,
                     ns == 1 ? "" : "s", rc, o->ring);
    } else {
      const ovl__citem *s = &m->items[o->items[0]];
      const ovl__citem *v = &m->items[o->items[1]];
      ovl__sb_printf(b, "ring %d send #%llu from rank %d to rank %d: ",
                     o->ring, (unsigned long long)o->index + 1, a, rc);
      ovl__citem_text(m, s, d, sizeof d);
      ovl__sb_printf(b, "rank %d issues %s", a, d);
      at_text(b, m, s->op);
      ovl__citem_text(m, v, d, sizeof d);
      ovl__sb_printf(b, ", rank %d issues %s", rc, d);
      at_text(b, m, v->op);
      differs_text(b, o->differs);
      if (o->same_size)
        ovl__sb_puts(b, " (the same size: the bytes arrive, reinterpreted)");
    }
  }
}

/* ------------------------------------------------------------------ */
/* The flight record's first disagreement                              */
/* ------------------------------------------------------------------ */

typedef struct first_ctx {
  const ovl__match *m;
  uint64_t best;
  ovl__disagreement *out;
  bool found;
} first_ctx;

static ovl_status first_fn(void *ctx, const ovl__occ *o, ovl_error *err) {
  first_ctx *f = ctx;
  uint64_t t = ovl__occ_first_tag(f->m, o);
  ovl__sbuf b = {0};
  (void)err;
  if (f->found && t >= f->best)
    return OVL_OK;
  f->found = true;
  f->best = t;
  f->out->ranks = 0;
  f->out->item = OVL__NONE;
  for (int k = 0; k < o->nitems; k++)
    if (o->items[k] != OVL__NONE && f->m->items[o->items[k]].tag == t &&
        (f->out->item == OVL__NONE ||
         f->m->items[o->items[k]].rank < f->m->items[f->out->item].rank))
      f->out->item = o->items[k];
  memset(f->out->tag, 0, sizeof f->out->tag);
  if (o->kind == OVL_MISMATCH_COLLECTIVE) {
    for (int r = 0; r < o->nitems; r++) {
      f->out->ranks |= (uint64_t)1 << r;
      if (o->items[r] != OVL__NONE)
        f->out->tag[r] = f->m->items[o->items[r]].tag;
    }
  } else {
    f->out->ranks |= (uint64_t)1 << o->sender;
    f->out->ranks |= (uint64_t)1 << o->receiver;
    if (o->items[0] != OVL__NONE)
      f->out->tag[o->sender] = f->m->items[o->items[0]].tag;
    if (o->items[1] != OVL__NONE)
      f->out->tag[o->receiver] = f->m->items[o->items[1]].tag;
  }
  ovl__occ_text(f->m, o, &b);
  snprintf(f->out->text, sizeof f->out->text, "%s",
           b.s != NULL && !b.fail ? b.s : "?");
  free(b.s);
  return OVL_OK;
}

ovl_status ovl__match_first_disagreement(const ovl__match *m, int ring,
                                         ovl__disagreement *out, int *found,
                                         ovl_error *err) {
  first_ctx f;
  ovl_status st;
  if (found != NULL)
    *found = 0;
  if (m == NULL || out == NULL || found == NULL)
    return ovl__err(err, OVL_EINVAL, "first disagreement: bad argument");
  memset(out, 0, sizeof *out);
  if (ring < 0 || ring >= m->prog->nrings)
    return ovl__err(err, OVL_EINVAL, "first disagreement: ring %d of %d",
                    ring, m->prog->nrings);
  for (int r = 0; r < m->nranks && r < OVL_MAX_RANKS; r++)
    out->per_iter[r] = ovl__match_ring_len(m, r, ring);
  memset(&f, 0, sizeof f);
  f.m = m;
  f.out = out;
  st = ovl__match_scan(m, ring, first_fn, &f, err);
  if (st == OVL_OK)
    *found = f.found;
  return st;
}
