/*
 * Sampled rows (check/reference.c, "Sampled rows"; docs/ARCHITECTURE.md,
 * "Checks"): in a program with a matmul, the rows of each op's output the
 * reference computes, and the rows of each fetched variable the check
 * compares. Row sets are bitmaps interned in the state (ROWS_NONE,
 * ROWS_ALL, then the rest).
 */
#include <stdlib.h>
#include <string.h>

#include "check/reference.h"

/* Rows of a variable (its dim 0) and elements per row. */
static int64_t var_rows(const ovl__var *v) { return v->dims[0]; }
static int64_t var_row_len(const ovl__var *v) {
  return v->dims[0] > 0 ? v->numel / v->dims[0] : 0;
}

/* Whether op i writes all of its output on every rank, so that the value
 * its output held before is dead after it (c_reduce_* writes the root's
 * only; an op on some ranks leaves the others' alone). */
static bool kills_out(const ovl_program *prog, size_t i) {
  const ovl__op *op = &prog->ops[i];
  uint64_t all = ovl__program_all_ranks(prog);
  return (op->ranks & all) == all && writes_out(prog, i, -1) &&
         !is_reduce(prog, i);
}

/* More distinct sets than this: the analysis gives up on precision
 * (ROWS_ALL), not on correctness. */
#define MAX_ROWSETS 4096

static uint64_t rows_hash(const uint64_t *bits, size_t words,
                          int64_t nbits) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)nbits;
  for (size_t w = 0; w < words; w++)
    h = (h ^ bits[w]) * 1099511628211ull;
  return h;
}

static size_t rows_words(int64_t nbits) {
  return (size_t)((nbits + 63) / 64);
}

/* The set of rows `bits` (nbits of them; taken over: kept, or freed if
 * the set is known); ROWS_ALL when there are too many sets or no memory
 * for one more. */
static uint32_t rows_intern(ref_state *s, uint64_t *bits, int64_t nbits) {
  size_t words = rows_words(nbits);
  uint64_t h = rows_hash(bits, words, nbits);
  for (size_t k = 2; k < s->nsets; k++)
    if (s->sets[k].hash == h && s->sets[k].nbits == nbits &&
        memcmp(s->sets[k].bits, bits, words * sizeof *bits) == 0) {
      free(bits);
      return (uint32_t)k;
    }
  if (s->nsets == s->capsets) {
    size_t cap = s->capsets * 2;
    rowset *ns = cap <= MAX_ROWSETS ? realloc(s->sets, cap * sizeof *ns)
                                    : NULL;
    if (ns == NULL) {
      free(bits);
      return ROWS_ALL;
    }
    s->sets = ns;
    s->capsets = cap;
  }
  s->sets[s->nsets].nbits = nbits;
  s->sets[s->nsets].bits = bits;
  s->sets[s->nsets].hash = h;
  return (uint32_t)s->nsets++;
}

static uint32_t rows_union(ref_state *s, uint32_t a, uint32_t b) {
  uint64_t *bits;
  size_t words;
  if (a == ROWS_NONE || a == b)
    return b;
  if (b == ROWS_NONE)
    return a;
  if (a == ROWS_ALL || b == ROWS_ALL || s->sets[a].nbits != s->sets[b].nbits)
    return ROWS_ALL;
  words = rows_words(s->sets[a].nbits);
  if ((bits = malloc(words * sizeof *bits + 1)) == NULL)
    return ROWS_ALL;
  for (size_t w = 0; w < words; w++)
    bits[w] = s->sets[a].bits[w] | s->sets[b].bits[w];
  return rows_intern(s, bits, s->sets[a].nbits);
}

/* The rows a fetched variable of `nrows` rows is checked on: `max` of
 * them, one in each of `max` strata of (nearly) equal size, at a place in
 * its stratum that a hash of the stratum's number picks (the first and
 * the last row of the matrix always): every region of the matrix is
 * looked at, and not always at the same offset within a kernel's tiles.
 * The same rows for every variable of that many rows, so that sets meet
 * and stay few. */
static uint32_t rows_sample(ref_state *s, int64_t nrows, int64_t max) {
  uint64_t *bits = calloc(rows_words(nrows) + 1, sizeof *bits);
  int64_t q = nrows / max, rem = nrows % max;
  if (bits == NULL)
    return ROWS_ALL;
  for (int64_t j = 0; j < max; j++) {
    int64_t lo = j * q + (j < rem ? j : rem), size = q + (j < rem);
    uint64_t h = (uint64_t)j * 0x9e3779b97f4a7c15ull;
    int64_t row;
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    row = j == 0 ? 0 : j == max - 1 ? nrows - 1 : lo + (int64_t)(h % (uint64_t)size);
    bits[row / 64] |= (uint64_t)1 << (row % 64);
  }
  return rows_intern(s, bits, nrows);
}

/* The rows input k of op i needs for its output's rows `need`: the same
 * rows for an index-local op (elementwise, allreduce, broadcast, reduce)
 * and for a matmul's x (row i of the output is row i of op(x) times
 * op(y)); all of them for a matmul's y, a transposed x, and every other
 * op (allgather, reducescatter, alltoall, send: rows move between
 * ranks). */
static uint32_t in_rows(const ovl_program *prog, size_t i, int k,
                        uint32_t need) {
  const ovl__prim *p = data_prim(prog, i);
  const ovl__op *op = &prog->ops[i];
  if (need == ROWS_NONE)
    return ROWS_NONE;
  if (p->kind == OVL_PRIM_KERNEL) {
    if (op->def->kernel != OVL_KERNEL_MATMUL)
      return need;
    return k == 0 && !op->trans_x ? need : ROWS_ALL;
  }
  if (p->kind == OVL_PRIM_COLL && ovl__coll_is_local(op->def->coll))
    return need;
  return ROWS_ALL;
}

/* The plan of sampled rows (the file comment): for a program with a
 * matmul and max_rows > 0, the rows of its output every op computes
 * (s->op_rows), and the rows of every fetched variable the check looks
 * at (s->ref->rows). Otherwise nothing: every op computes everything. */
ovl_status ovl__ref_plan_rows(ref_state *s, int64_t max_rows,
                              ovl_error *err) {
  const ovl_program *prog = s->prog;
  size_t nv = prog->nvars;
  bool any = false, *taint = NULL, *sampled = NULL;
  uint32_t *cur = NULL, *fetch_set = NULL;
  ovl_status st = OVL_OK;

  for (size_t i = 0; i < prog->nops && !any; i++)
    any = is_matmul(prog, i);
  if (!any || max_rows <= 0)
    return OVL_OK;
  s->op_rows = calloc(prog->nops + 1, sizeof *s->op_rows);
  s->capsets = 16;
  s->sets = calloc(s->capsets, sizeof *s->sets);
  s->nsets = 2; /* ROWS_NONE, ROWS_ALL */
  taint = calloc(nv + 1, sizeof *taint);
  sampled = calloc(nv + 1, sizeof *sampled);
  cur = calloc(nv + 1, sizeof *cur);
  fetch_set = calloc(nv + 1, sizeof *fetch_set);
  if (s->op_rows == NULL || s->sets == NULL || taint == NULL ||
      sampled == NULL || cur == NULL || fetch_set == NULL) {
    st = ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                  prog_name(prog));
    goto done;
  }

  /* Forward: which values are computed from a matmul's output; a fetch
   * of such a value is sampled. */
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = data_prim(prog, i);
    bool t;
    if (p == NULL)
      continue;
    if (p->kind == OVL_PRIM_HOST_READ) {
      for (int k = 0; k < op->nin; k++)
        sampled[op->in[k]] |= taint[op->in[k]];
      continue;
    }
    if (!op->def->writes || op->out < 0)
      continue;
    t = is_matmul(prog, i);
    for (int k = 0; op->def->reads && k < op->nin; k++)
      t |= taint[op->in[k]];
    taint[op->out] = kills_out(prog, i) ? t : (taint[op->out] || t);
  }
  for (size_t v = 0; v < nv; v++)
    fetch_set[v] = sampled[v] && var_rows(&prog->vars[v]) > max_rows
                       ? rows_sample(s, var_rows(&prog->vars[v]), max_rows)
                       : ROWS_ALL;

  /* Backward, from the fetches: the rows each op must compute, and those
   * of its inputs that those need. */
  for (size_t i = prog->nops; i-- > 0;) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = data_prim(prog, i);
    uint32_t need = ROWS_ALL;
    if (p == NULL)
      continue;
    if (p->kind == OVL_PRIM_HOST_READ) {
      for (int k = 0; k < op->nin; k++)
        cur[op->in[k]] = rows_union(s, cur[op->in[k]], fetch_set[op->in[k]]);
      s->op_rows[i] = ROWS_ALL;
      continue;
    }
    if (op->def->writes && op->out >= 0) {
      need = cur[op->out];
      if (kills_out(prog, i))
        cur[op->out] = ROWS_NONE;
    }
    s->op_rows[i] = need;
    for (int k = 0; op->def->reads && k < op->nin; k++)
      cur[op->in[k]] =
          rows_union(s, cur[op->in[k]], in_rows(prog, i, k, need));
  }

  /* What the check compares: the sampled rows of each fetched variable. */
  for (size_t f = 0; f < prog->nfetch; f++) {
    uint32_t set = fetch_set[prog->fetch[f]];
    const rowset *rs;
    size_t n = 0;
    if (set == ROWS_ALL)
      continue;
    rs = &s->sets[set];
    s->ref->rows[f] = malloc((size_t)max_rows * sizeof **s->ref->rows + 1);
    if (s->ref->rows[f] == NULL) {
      st = ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
      goto done;
    }
    for (int64_t r = 0; r < rs->nbits; r++)
      if ((rs->bits[r / 64] >> (r % 64)) & 1)
        s->ref->rows[f][n++] = r;
    s->ref->nrows[f] = n;
  }

done:
  free(taint);
  free(sampled);
  free(cur);
  free(fetch_set);
  return st;
}

/* Whether op i computes some of elements [lo, hi) of its output (every
 * element without a plan). */
bool ovl__ref_op_needs(const ref_state *s, size_t i, size_t lo,
                       size_t hi) {
  const rowset *rs;
  const ovl__op *op = &s->prog->ops[i];
  int64_t len, r0, r1;
  if (s->op_rows == NULL || s->op_rows[i] == ROWS_ALL)
    return true;
  if (s->op_rows[i] == ROWS_NONE || op->out < 0 || hi <= lo)
    return false;
  rs = &s->sets[s->op_rows[i]];
  len = var_row_len(&s->prog->vars[op->out]);
  if (len <= 0)
    return false;
  r0 = (int64_t)lo / len;
  r1 = (int64_t)(hi - 1) / len;
  if (r1 >= rs->nbits)
    r1 = rs->nbits - 1;
  for (int64_t r = r0; r <= r1; r++)
    if ((rs->bits[r / 64] >> (r % 64)) & 1)
      return true;
  return false;
}
