/*
 * The reference's per-rank interpreter (check/reference.c, "Per rank"),
 * for programs whose ranks differ: the check's matching (check/match.h),
 * which the ranks must agree on, then each rank in turn until its next
 * communication cannot complete, running ahead when no rank can move
 * otherwise; the error that names, per rank, where it waits when even
 * that makes no progress.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/match.h"
#include "check/reference.h"

/* Whether op i talks to other ranks (collective, send, receive). */
static bool is_comm(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p != NULL && ovl__prim_is_comm(p);
}

/* ------------------------------------------------------------------ */
/* Per rank: the matching                                              */
/* ------------------------------------------------------------------ */

typedef struct u32vec {
  uint32_t *v;
  size_t n, cap;
} u32vec;

static bool u32_push(u32vec *a, uint32_t x) {
  if (a->n == a->cap) {
    size_t cap = a->cap < 8 ? 8 : 2 * a->cap;
    uint32_t *v = realloc(a->v, cap * sizeof *v);
    if (v == NULL)
      return false;
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return true;
}

/* The state of a rank's op (rd_state.st). */
enum {
  RD_NEW = 0,
  /* Reached, and nothing before it on its rank touches its variables: it
   * waits for its partners only (communication). */
  RD_POSTED = 1,
  RD_DONE = 2
};

struct rd_state {
  /* The check's matching (check/match.h): the k-th collective of a ring
   * on every rank, the k-th send from a to b with b's k-th receive from
   * a. */
  ovl__match m;
  size_t nops;
  uint8_t *st;      /* [rank * nops + op]: RD_* */
  uint32_t *item;   /* [rank * nops + op]: its item in m */
  /* By item: on rank 0's item of a collective, how many ranks posted that
   * collective; on a send, whether it was issued and its input as it was
   * sent, until received. */
  int *posted;
  bool *sent;
  double **buf;
  /* Per rank: the next op not yet reached, and the ops reached but not
   * done, in program order. */
  size_t *cursor;
  u32vec *pend;
  /* Conflict marks of one walk over a rank's pending ops: a variable some
   * pending op writes (reads) has wstamp (rstamp) == epoch. */
  uint32_t epoch;
  uint32_t *wstamp, *rstamp;
  bool nomem;
};

static void rd_free(rd_state *d, int nranks) {
  if (d == NULL)
    return;
  free(d->st);
  free(d->item);
  free(d->posted);
  free(d->sent);
  for (size_t k = 0; d->buf != NULL && k < d->m.nitems; k++)
    free(d->buf[k]);
  free(d->buf);
  ovl__match_free(&d->m);
  free(d->cursor);
  for (int r = 0; d->pend != NULL && r < nranks; r++)
    free(d->pend[r].v);
  free(d->pend);
  free(d->wstamp);
  free(d->rstamp);
  free(d);
}

/* Ranks that disagree on the matching: a peer out of range, or the first
 * disagreement of the first ring that has one (the check's first
 * mismatch, in its words), at the op where it shows first. */
static ovl_status rd_disagreement(const ref_state *s, ovl_error *err) {
  const ovl__match *m = &s->rd->m;
  const ovl_program *prog = s->prog;
  ovl__disagreement d;
  ovl_status st = OVL_OK;
  for (size_t k = 0; k < m->nitems; k++) {
    const ovl__citem *it = &m->items[k];
    const ovl__op *op = &prog->ops[it->op];
    if (it->kind == OVL__CI_COLL || it->ord != OVL__NONE)
      continue;
    return ovl__err(err, OVL_EINVAL,
                    "%s:%d:%d: reference: %s has peer %d on rank %d; ranks "
                    "are 0..%d",
                    prog_name(prog), op->line, op->col, op->def->name,
                    ovl__op_peer(prog, op, it->rank), it->rank,
                    s->nranks - 1);
  }
  for (int R = 0; R < prog->nrings && st == OVL_OK; R++) {
    int found = 0;
    st = ovl__match_first_disagreement(m, R, &d, &found, err);
    if (st == OVL_OK && found) {
      const ovl__op *op = &prog->ops[m->items[d.item].op];
      return ovl__err(err, OVL_EMISMATCH, "%s:%d:%d: reference: %s",
                      prog_name(prog), op->line, op->col, d.text);
    }
  }
  return st;
}

/* The matching of every rank's communication, which the ranks must agree
 * on, and the interpreter's state. */
static ovl_status rd_init(ref_state *s, ovl_error *err) {
  const ovl_program *prog = s->prog;
  size_t nr = (size_t)s->nranks, nops = prog->nops;
  rd_state *d;
  ovl_status st;

  d = s->rd = calloc(1, sizeof *d);
  if (d == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  if ((st = ovl__match_build(prog, &d->m, err)) != OVL_OK)
    return st;
  if ((st = rd_disagreement(s, err)) != OVL_OK)
    return st;
  d->nops = nops;
  d->st = calloc(nr * nops + 1, sizeof *d->st);
  d->item = malloc((nr * nops + 1) * sizeof *d->item);
  d->posted = calloc(d->m.nitems + 1, sizeof *d->posted);
  d->sent = calloc(d->m.nitems + 1, sizeof *d->sent);
  d->buf = calloc(d->m.nitems + 1, sizeof *d->buf);
  d->cursor = calloc(nr, sizeof *d->cursor);
  d->pend = calloc(nr, sizeof *d->pend);
  d->wstamp = calloc(prog->nvars + 1, sizeof *d->wstamp);
  d->rstamp = calloc(prog->nvars + 1, sizeof *d->rstamp);
  if (d->st == NULL || d->item == NULL || d->posted == NULL ||
      d->sent == NULL || d->buf == NULL || d->cursor == NULL ||
      d->pend == NULL || d->wstamp == NULL || d->rstamp == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  ovl__match_item_table(&d->m, d->item);
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Per rank: the interpreter                                           */
/* ------------------------------------------------------------------ */

static uint8_t *rd_st(const ref_state *s, int rank, size_t i) {
  return &s->rd->st[(size_t)rank * s->rd->nops + i];
}

/* Rank r's item of comm op i. */
static const ovl__citem *rd_item(const ref_state *s, int rank, size_t i) {
  return &s->rd->m.items[s->rd->item[(size_t)rank * s->rd->nops + i]];
}

/* Rank r's part of the k-th collective of `ring`. */
static const ovl__citem *rd_coll(const ref_state *s, int rank, int ring,
                                 uint32_t k) {
  return &s->rd->m.items[ovl__match_coll(&s->rd->m, rank, ring, k)];
}

/* Whether op i of `rank` must wait for an earlier op of its rank not yet
 * done (the marks of rd_mark): it reads a variable one writes, or writes
 * one that one reads or writes. A dead kernel touches nothing. */
static bool rd_blocked(const ref_state *s, int rank, size_t i) {
  const rd_state *d = s->rd;
  const ovl__op *op = &s->prog->ops[i];
  if (data_prim(s->prog, i) == NULL || is_dead(s, rank, i))
    return false;
  for (int k = 0; op->def->reads && k < op->nin; k++)
    if (d->wstamp[op->in[k]] == d->epoch)
      return true;
  return writes_out(s->prog, i, rank) &&
         (d->wstamp[op->out] == d->epoch || d->rstamp[op->out] == d->epoch);
}

/* Mark the variables op i of `rank` (not yet done) reads and writes. */
static void rd_mark(ref_state *s, int rank, size_t i) {
  rd_state *d = s->rd;
  const ovl__op *op = &s->prog->ops[i];
  if (data_prim(s->prog, i) == NULL || is_dead(s, rank, i))
    return;
  for (int k = 0; op->def->reads && k < op->nin; k++)
    d->rstamp[op->in[k]] = d->epoch;
  if (writes_out(s->prog, i, rank))
    d->wstamp[op->out] = d->epoch;
}

/* Run the collective of item `it` (the k-th of its ring) on every rank. */
static void rd_run_coll(ref_state *s, const ovl__citem *it) {
  const ovl__op *ops[OVL_MAX_RANKS];
  for (int r = 0; r < s->nranks; r++) {
    uint32_t op = rd_coll(s, r, it->ring, it->ord)->op;
    ops[r] = &s->prog->ops[op];
    *rd_st(s, r, op) = RD_DONE;
  }
  if (!ovl__coll_is_local(ops[0]->def->coll)) {
    ovl__ref_run_global_coll(s, ops);
    return;
  }
  size_t extent = ops[0]->out >= 0
                      ? (size_t)s->prog->vars[ops[0]->out].numel
                      : 0;
  int root = ovl__op_root(s->prog, ops[0], 0);
  for (size_t lo = 0; lo < extent; lo += REF_BLOCK)
    ovl__ref_run_local_coll(s, ops, root, lo,
                            lo + REF_BLOCK < extent ? lo + REF_BLOCK : extent);
}

/* Op i of `rank`, which nothing earlier on its rank holds back: run it if
 * its partners are there (a collective every rank has posted, a receive
 * whose send was issued), else post it. Returns whether it ran; *changed
 * is set if anything changed. */
static bool rd_try(ref_state *s, int rank, size_t i, bool *changed) {
  rd_state *d = s->rd;
  const ovl_program *prog = s->prog;
  const ovl__prim *p = data_prim(prog, i);
  uint8_t *st = rd_st(s, rank, i);

  if (p == NULL || !ovl__prim_is_comm(p)) {
    ovl__ref_run_segment(s, i, i + 1, rank, rank + 1);
    *st = RD_DONE;
    *changed = true;
    return true;
  }
  const ovl__citem *it = rd_item(s, rank, i);
  if (p->kind == OVL_PRIM_COLL) {
    /* Counted on rank 0's part of it. */
    size_t id = (size_t)(rd_coll(s, 0, it->ring, it->ord) - d->m.items);
    if (*st == RD_NEW) {
      *st = RD_POSTED;
      *changed = true;
      if (++d->posted[id] == s->nranks) {
        rd_run_coll(s, it);
        return true;
      }
    }
    return false;
  }
  /* The send (this one, or the receive's partner). */
  size_t snd = p->kind == OVL_PRIM_SEND ? (size_t)(it - d->m.items)
                                        : (size_t)it->partner;
  if (p->kind == OVL_PRIM_SEND) {
    const ovl__var *x = &prog->vars[prog->ops[i].in[0]];
    size_t bytes = (size_t)x->numel * sizeof(double);
    d->buf[snd] = malloc(bytes + 1);
    if (d->buf[snd] == NULL)
      d->nomem = true;
    else
      memcpy(d->buf[snd], var_val(s, rank, prog->ops[i].in[0]), bytes);
    d->sent[snd] = true;
    *st = RD_DONE;
    *changed = true;
    return true;
  }
  if (!d->sent[snd]) {
    if (*st == RD_NEW)
      *changed = true;
    *st = RD_POSTED;
    return false;
  }
  if (d->buf[snd] != NULL) {
    const ovl__var *y = &prog->vars[prog->ops[i].out];
    memcpy(var_val(s, rank, prog->ops[i].out), d->buf[snd],
           (size_t)y->numel * sizeof(double));
    free(d->buf[snd]);
    d->buf[snd] = NULL;
  }
  *st = RD_DONE;
  *changed = true;
  return true;
}

/* One turn of `rank`: its pending ops in order (each runs if nothing
 * pending before it holds it back and its partners are there), then new
 * ops. `ahead`: run ahead past pending ops, until a communication op is
 * posted or run; else stop at the first op that waits (and run the compute
 * ops before it block by block). Returns whether anything changed. */
static bool rd_turn(ref_state *s, int rank, bool ahead) {
  rd_state *d = s->rd;
  const ovl_program *prog = s->prog;
  u32vec *pend = &d->pend[rank];
  size_t keep = 0, *cursor = &d->cursor[rank];
  bool changed = false;

  if (++d->epoch == 0) { /* wrapped: clear the marks */
    memset(d->wstamp, 0, (prog->nvars + 1) * sizeof *d->wstamp);
    memset(d->rstamp, 0, (prog->nvars + 1) * sizeof *d->rstamp);
    d->epoch = 1;
  }
  for (size_t k = 0; k < pend->n; k++) {
    size_t i = pend->v[k];
    if (*rd_st(s, rank, i) == RD_DONE)
      continue; /* a collective another rank completed */
    if (!rd_blocked(s, rank, i) && rd_try(s, rank, i, &changed))
      continue;
    rd_mark(s, rank, i);
    pend->v[keep++] = (uint32_t)i;
  }
  pend->n = keep;

  while (*cursor < prog->nops && !d->nomem) {
    size_t i = *cursor;
    if (!ovl__op_on_rank(&prog->ops[i], rank)) {
      (*cursor)++;
      continue;
    }
    bool comm = is_comm(prog, i);
    if (!ahead) {
      if (pend->n > 0)
        break;
      if (!comm) { /* compute up to the next communication, by blocks */
        size_t j = i;
        while (j < prog->nops &&
               !(ovl__op_on_rank(&prog->ops[j], rank) && is_comm(prog, j)))
          j++;
        ovl__ref_run_segment(s, i, j, rank, rank + 1);
        for (size_t k = i; k < j; k++)
          if (ovl__op_on_rank(&prog->ops[k], rank))
            *rd_st(s, rank, k) = RD_DONE;
        *cursor = j;
        changed = true;
        continue;
      }
    }
    (*cursor)++;
    changed = true;
    if (!rd_blocked(s, rank, i) && rd_try(s, rank, i, &changed)) {
      if (ahead && comm)
        break;
      continue;
    }
    rd_mark(s, rank, i);
    if (!u32_push(pend, (uint32_t)i)) {
      d->nomem = true;
      break;
    }
    if (ahead && comm && *rd_st(s, rank, i) == RD_POSTED)
      break;
  }
  return changed;
}

/* Append printf-formatted text to buf[0..size) at *len (cut at the end). */
static void msg_put(char *buf, size_t size, size_t *len, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));
static void msg_put(char *buf, size_t size, size_t *len, const char *fmt,
                    ...) {
  va_list ap;
  int n;
  if (*len >= size)
    return;
  va_start(ap, fmt);
  n = vsnprintf(buf + *len, size - *len, fmt, ap);
  va_end(ap);
  if (n > 0)
    *len = *len + (size_t)n < size ? *len + (size_t)n : size;
}

/* Why the ranks cannot move: per rank, the first op it has not done and
 * what that op waits for. */
static ovl_status rd_stuck(ref_state *s, ovl_error *err) {
  const ovl_program *prog = s->prog;
  rd_state *d = s->rd;
  char msg[OVL_ERROR_MSG_MAX], da[512];
  size_t len = 0;
  int first_line = 0, first_col = 0;

  for (int r = 0; r < s->nranks; r++) {
    const u32vec *pend = &d->pend[r];
    size_t k = 0;
    while (k < pend->n && *rd_st(s, r, pend->v[k]) == RD_DONE)
      k++;
    if (k == pend->n)
      continue;
    size_t i = pend->v[k];
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = data_prim(prog, i);
    if (first_line == 0) {
      first_line = op->line;
      first_col = op->col;
    }
    msg_put(msg, sizeof msg, &len, "; rank %d waits at line %d ", r,
            op->line);
    const ovl__citem *it = rd_item(s, r, i);
    if (p->kind == OVL_PRIM_COLL) {
      int nmissing = 0;
      ovl__citem_text(&d->m, it, da, sizeof da);
      msg_put(msg, sizeof msg, &len, "(%s, ring %d collective #%u) for", da,
              it->ring, it->ord + 1);
      for (int q = 0; q < s->nranks; q++) {
        uint32_t qop = rd_coll(s, q, it->ring, it->ord)->op;
        if (*rd_st(s, q, qop) != RD_POSTED)
          msg_put(msg, sizeof msg, &len, "%s rank %d (line %d)",
                  nmissing++ > 0 ? "," : "", q, prog->ops[qop].line);
      }
    } else {
      const ovl__citem *snd = &d->m.items[it->partner];
      msg_put(msg, sizeof msg, &len,
              "(recv_v2 from rank %d, ring %d) for rank %d's send_v2 at "
              "line %d",
              snd->rank, op->ring_id, snd->rank, prog->ops[snd->op].line);
    }
  }
  return ovl__err(err, OVL_EMISMATCH,
                  "%s:%d:%d: reference: the ranks cannot complete the program "
                  "(a deadlock or mismatch between ranks: the check names "
                  "it)%.*s",
                  prog_name(prog), first_line, first_col, (int)len, msg);
}

/* Per rank: turns until every rank is done, running ahead when no rank can
 * move otherwise. */
static ovl_status rd_run(ref_state *s, ovl_error *err) {
  rd_state *d;
  ovl_status st = rd_init(s, err);
  if (st != OVL_OK)
    return st;
  d = s->rd;
  for (;;) {
    bool changed = false, done = true;
    for (int r = 0; r < s->nranks; r++)
      changed |= rd_turn(s, r, false);
    if (!changed) {
      for (int r = 0; r < s->nranks; r++)
        done &= d->cursor[r] == s->prog->nops && d->pend[r].n == 0;
      if (done)
        break;
      for (int r = 0; r < s->nranks; r++)
        changed |= rd_turn(s, r, true);
      if (!changed && !d->nomem)
        return rd_stuck(s, err);
    }
    if (d->nomem)
      return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                      prog_name(s->prog));
  }
  return OVL_OK;
}

/* The interpreter's state (s->rd) is its own: freed when it returns. */
ovl_status ovl__ref_run_per_rank(ref_state *s, ovl_error *err) {
  ovl_status st = rd_run(s, err);
  rd_free(s->rd, s->nranks);
  s->rd = NULL;
  return st;
}
