/*
 * The reference: a sequential float64 interpreter of a program
 * (docs/ARCHITECTURE.md, "Checks"). It gives the value every fetched
 * variable must have on every rank; ovl_check_result compares a run against
 * it. Like the executor it interprets the lowered program (core/lower.c):
 * the element math of a kernel and the reduction of a collective come from
 * the op's row (core/elemfn.h), so the reference, the cpu backend and the
 * CUDA kernels compute from one definition.
 *
 * Semantics: data() variables start with their generated inputs (already
 * rounded to the dtype), every other variable starts as NaN, like the
 * poisoned device buffers. A kernel is evaluated in double with its scale
 * and bias first converted to the output's dtype (as the device converts
 * them), and each result is stored in its variable's dtype, as a device
 * stores it: a float32 variable keeps float32 range (an overflow is inf on
 * the device and in the reference alike) and precision, and a float16 or
 * bfloat16 one its own (rounded to nearest even in one step from the
 * double, ovl__dtype_round), while the arithmetic of one op stays
 * exact-ish in double. Reductions (allreduce,
 * reduce, reducescatter) fold in rank order and round once, at the end;
 * c_reduce_* writes the root's output only (the other ranks' outputs keep
 * what they held; in place, their input). alltoall sends part j of rank
 * i's input (dim 0 split in nranks parts) to part i of rank j's output.
 * barrier, records, waits, syncs and delays order streams and ranks and
 * move no data, so they do nothing here. recv_v2's output gets the values
 * the matched send_v2's input held when that send was issued. A host read
 * (fetch) snapshots the variable on each rank that runs it; the last fetch
 * of a variable on a rank wins.
 *
 * Every rank computes in its own program order (the values an
 * ordering-correct run gives); ranks meet at communication only.
 * Matching, as NCCL's: the k-th collective a rank issues on ring R meets
 * the k-th collective of every other rank on R, whatever line each is on;
 * the k-th send_v2 from rank a to rank b on ring R meets the k-th recv_v2
 * of b from a on R. Two ways to get there:
 *
 *   - Lock step (prog->rank_dependent false: every rank runs every op, so
 *     the k-th op of every rank is the same statement). Every op except
 *     c_allgather, c_reducescatter, alltoall and matmul_v2 is index-local
 *     (element i of its output depends only on element i of its inputs,
 *     on every rank), so a run of such ops is evaluated one cache-sized
 *     block of indices at a time: all ops on block 0, then all ops on
 *     block 1, ... (a matmul between them is computed whole).
 *     The result is the same, element for element, as evaluating op after
 *     op over whole arrays. The seed program makes ~770 passes over 10M
 *     elements per rank; op by op it would be bound by memory bandwidth.
 *
 *   - Per rank (rank-dependent programs: ranks=[...], a peer or root that
 *     depends on rank, send_v2 / recv_v2). The matching is the check's
 *     (check/match.h, built from each rank's op sequence); ranks that
 *     disagree on it (a rank that never issues the k-th collective of a
 *     ring, the k-th collective differing in kind, count, dtype,
 *     reduction, root or variables, a send without its receive, a send and
 *     receive of different sizes) are an error (OVL_EMISMATCH, the first
 *     disagreement in the check's words; the check reports these before a
 *     run):
 *     ranks that reduce different variables of one size would mix them
 *     silently on the device, and no value is the right one. Then each rank
 *     is interpreted in turn: it runs until its next communication op
 *     cannot complete yet (a receive whose send has not been issued, a
 *     collective some rank has not reached); a send deposits a copy of its
 *     input and the sender moves on; a collective runs once every rank has
 *     reached its part of it. When no rank can move, a rank may run ahead
 *     past its blocked op, but only with ops that touch none of the
 *     variables a skipped op reads or writes (and do not write what it
 *     reads): the values are still those of program order, and programs
 *     whose streams let ranks issue collectives of two rings in different
 *     orders complete as they do on the device. When even that makes no
 *     progress the program cannot complete (a deadlock of data, or a
 *     mismatch): an error (OVL_EMISMATCH) names, per rank, the op it waits
 *     at and what for. Runs of compute ops between communication are still
 *     evaluated block by block.
 *
 * A kernel whose output is overwritten before anything reads it (the
 * seed's ten `e = 2 * d` in a row) is skipped, per rank in the second
 * case: it cannot change any fetched value.
 *
 * Sampled rows. A matmul is the one op whose reference costs more than a
 * pass over its data: out = op(x) @ op(y) is M * N * K multiply-adds
 * (check/ref_matmul.c, on every core). In a program with a matmul, a
 * fetched variable computed from a matmul's result, with more than
 * max_rows rows (dim 0), is checked on max_rows rows only (rows_sample),
 * and the reference computes what those rows depend on and nothing more
 * (plan_rows: a pass backwards from the fetches; README, "Matrix
 * multiply"). Every value in those rows is computed in full; the check
 * compares those rows (ovl_reference_rows).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "check/match.h"
#include "check/reference.h"

/* Elements per block: big enough to amortise the per-op dispatch, small
 * enough that the arrays one op touches on every rank stay in L1 (measured
 * on the seed program: 1024 beats 512 and 2048). */
#define REF_BLOCK 1024

struct ovl_reference_s {
  int nranks;
  size_t nfetch;
  /* [rank * nfetch + i]: the snapshot of fetched variable i, NULL if that
   * rank never fetched it. */
  double **fetched;
  /* [i]: the rows (of dim 0) of fetched variable i that were computed,
   * sorted, nrows[i] of them; NULL: all of them (see "Sampled rows"). */
  int64_t **rows;
  size_t *nrows;
};

/* A set of rows (of dim 0) of a variable, interned in ref_state.sets:
 * index ROWS_NONE, ROWS_ALL, or a bitmap of nbits rows. */
enum { ROWS_NONE = 0, ROWS_ALL = 1 };
typedef struct rowset {
  int64_t nbits;
  uint64_t *bits;
  uint64_t hash;
} rowset;

typedef struct rd_state rd_state;

/* The interpreter's state during one ovl_reference_compute. */
typedef struct ref_state {
  const ovl_program *prog;
  int nranks;
  /* Per rank (rank-dependent programs), or lock step. */
  bool per_rank;
  double **val;     /* [rank * nvars + var]; NULL for unused variables */
  int *fetch_slot;  /* var -> index in prog->fetch, or -1 */
  bool *fetched;    /* [rank * nfetch + i]: some fetch op has run */
  /* Per op (lock step) or [rank * nops + op] (per rank): a compute op
   * nothing observes. */
  bool *dead;
  /* REF_BLOCK doubles: c_reduce_*'s partial result. */
  double *scratch;
  rd_state *rd;     /* per rank: the matching and the ranks' progress */
  ovl_reference *ref;
  /* Sampled rows (a program with a matmul): per op, the rows of its
   * output it must compute (a set of `sets`); NULL: every op computes
   * all of its output. */
  uint32_t *op_rows;
  rowset *sets;
  size_t nsets, capsets;
  /* A matmul ran out of memory. */
  bool nomem;
} ref_state;

static double *var_val(const ref_state *s, int rank, int var) {
  return s->val[(size_t)rank * s->prog->nvars + (size_t)var];
}

static double *snapshot(const ref_state *s, int rank, int slot) {
  return s->ref->fetched[(size_t)rank * s->ref->nfetch + (size_t)slot];
}

static bool is_dead(const ref_state *s, int rank, size_t i) {
  return s->dead[s->per_rank ? (size_t)rank * s->prog->nops + i : i];
}

/* ------------------------------------------------------------------ */
/* Kernels: one tight loop per function, the switch outside it.        */
/* ------------------------------------------------------------------ */

/* out[j] = EXPR for j in [0, n), EXPR in x = xs[j] and y = ys[j] (elemfn.h
 * names). Four elements per step with every load before any store: out may
 * be the same array as xs or ys (never a partial overlap: distinct
 * variables are distinct allocations), and this shape still lets the
 * compiler use vector instructions at -O2. */
#define EW_LOOP(EXPR)                                                         \
  do {                                                                        \
    size_t i = 0;                                                             \
    for (; i + 4 <= n; i += 4) {                                              \
      double r[4];                                                            \
      for (int u = 0; u < 4; u++) {                                           \
        double x = xs[i + u], y = ys[i + u];                                  \
        (void)y;                                                              \
        r[u] = (EXPR);                                                        \
      }                                                                       \
      for (int u = 0; u < 4; u++)                                             \
        out[i + u] = r[u];                                                    \
    }                                                                         \
    for (; i < n; i++) {                                                      \
      double x = xs[i], y = ys[i];                                            \
      (void)y;                                                                \
      out[i] = (EXPR);                                                        \
    }                                                                         \
  } while (0)

/* A kernel's element math (core/elemfn.h) over n elements, in double. ys
 * is xs for the unary functions. */
#define DEFINE_EW_APPLY(NAME)                                                 \
  static void NAME(ovl__ew fn, double *out, const double *xs,                 \
                   const double *ys, double s, double b, size_t n) {          \
    (void)s;                                                                  \
    (void)b;                                                                  \
    if (fn == OVL_EW_ASSIGN) { /* the same, as a plain copy */                \
      if (out != xs)                                                          \
        memcpy(out, xs, n * sizeof *out);                                     \
      return;                                                                 \
    }                                                                         \
    switch (fn) {                                                             \
      OVL_EW_LIST(OVL__EW_CASE)                                               \
    default:                                                                  \
      break;                                                                  \
    }                                                                         \
  }
#define OVL__EW_CASE(name, arity, expr)                                       \
  case OVL_EW_##name:                                                         \
    EW_LOOP(expr);                                                            \
    break;

DEFINE_EW_APPLY(ew_apply)

/* The same for float32 and 16-bit variables, whose operands (and scale
 * and bias) are values of their dtype: their product is exact in double,
 * so fma(s, x, b) and s * x + b are the same double, and the plain
 * expression (inline, where fma is a library call without FMA
 * instructions) is used. */
#define fma(a, b, c) ((a) * (b) + (c))
DEFINE_EW_APPLY(ew_apply_narrow)
#undef fma
#undef OVL__EW_CASE

/* out[j] = fold(out[j], m * xs[j]) for j in [0, n), EXPR in a = out[j]
 * (the partial result) and b = m * xs[j] (one more rank's element, times
 * 1 or the premultiplier), with EW_LOOP's every-load-before-any-store
 * shape. */
#define RED_LOOP(EXPR)                                                        \
  do {                                                                        \
    size_t i = 0;                                                             \
    for (; i + 4 <= n; i += 4) {                                              \
      double r[4];                                                            \
      for (int u = 0; u < 4; u++) {                                           \
        double a = out[i + u], b = m * xs[i + u];                             \
        r[u] = (EXPR);                                                        \
      }                                                                       \
      for (int u = 0; u < 4; u++)                                             \
        out[i + u] = r[u];                                                    \
    }                                                                         \
    for (; i < n; i++) {                                                      \
      double a = out[i], b = m * xs[i];                                       \
      out[i] = (EXPR);                                                        \
    }                                                                         \
  } while (0)

/* The factor every input of reduction `op` is first multiplied by: 1, or
 * 1/nranks converted to the dtype (avg: NCCL's PreMulSum). For float32
 * and 16-bit values the product is exact in double; for float64 it
 * rounds, as the device's does. */
static double red_premul(ovl__redop op, ovl_dtype dtype, int nranks) {
  static const bool premul[] = {
#define OVL__RED_PREMUL(name, expr, pm) pm,
      OVL_RED_LIST(OVL__RED_PREMUL)
#undef OVL__RED_PREMUL
  };
  if (!premul[op])
    return 1.0;
  return ovl__dtype_round(dtype, 1.0 / nranks);
}

/* One more rank folded into the partial result (core/elemfn.h). */
static void red_apply(ovl__redop op, double *out, const double *xs,
                      double m, size_t n) {
  switch (op) {
#define OVL__RED_CASE(name, expr, premul)                                     \
  case OVL_RED_##name:                                                        \
    RED_LOOP(expr);                                                           \
    break;
    OVL_RED_LIST(OVL__RED_CASE)
#undef OVL__RED_CASE
  default:
    break;
  }
}

/* The partial result's start: rank 0's element times the premultiplier. */
static void red_first(double *acc, const double *x0, double m, size_t n) {
  if (m == 1.0) {
    if (acc != x0)
      memcpy(acc, x0, n * sizeof *acc);
    return;
  }
  for (size_t j = 0; j < n; j++)
    acc[j] = m * x0[j];
}

/* A scale or bias as the device uses it: converted to the dtype. */
static double in_dtype(ovl_dtype dtype, double v) {
  return ovl__dtype_round(dtype, v);
}


static const char *prog_name(const ovl_program *prog) {
  return prog->filename != NULL ? prog->filename : "<program>";
}

/* The primitive of op i that moves data or meets other ranks (kernel,
 * collective, send, receive, host read), or NULL: the others order streams
 * only. */
static const ovl__prim *data_prim(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (p[k].kind == OVL_PRIM_KERNEL || p[k].kind == OVL_PRIM_HOST_READ ||
        ovl__prim_is_comm(&p[k]))
      return &p[k];
  return NULL;
}

/* Whether op i talks to other ranks (collective, send, receive). */
static bool is_comm(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p != NULL && ovl__prim_is_comm(p);
}

/* Whether op i, a collective, is c_reduce_* (it writes the root's output
 * only). */
static bool is_reduce(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p != NULL && p->kind == OVL_PRIM_COLL &&
         prog->ops[i].def->coll == OVL_COLL_REDUCE;
}

/* Whether op i writes its output on `rank` (a rank that runs it; -1: on
 * some rank). */
static bool writes_out(const ovl_program *prog, size_t i, int rank) {
  const ovl__op *op = &prog->ops[i];
  if (!op->def->writes || op->out < 0 || data_prim(prog, i) == NULL)
    return false;
  return !is_reduce(prog, i) || rank < 0 ||
         ovl__op_root(prog, op, rank) == rank;
}

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

/* Which variables some data primitive or the fetch list touches: only
 * those get memory. */
static void mark_used(const ovl_program *prog, bool *used) {
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    if (data_prim(prog, i) == NULL)
      continue;
    for (int k = 0; op->def->reads && k < op->nin; k++)
      used[op->in[k]] = true;
    if (op->def->writes && op->out >= 0)
      used[op->out] = true;
  }
  for (size_t i = 0; i < prog->nfetch; i++)
    used[prog->fetch[i]] = true;
}

/* Mark the kernels whose output is overwritten (or never looked at)
 * before any op reads it: skipping them cannot change a fetched value.
 * Liveness, from the last op back, over the ops of `rank` (-1: every op,
 * lock step); every kernel, collective and receive writes the whole of its
 * output (c_reduce_*: on its root only; in lock step it kills nothing).
 * `live` is scratch, one flag per variable, all false on entry.
 * Communication always runs (other ranks take part). */
static void mark_dead(const ovl_program *prog, int rank, bool *live,
                      bool *dead) {
  for (size_t i = prog->nops; i-- > 0;) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = data_prim(prog, i);
    if (p == NULL || (rank >= 0 && !ovl__op_on_rank(op, rank)))
      continue; /* waits and syncs name variables but move no data */
    if (p->kind == OVL_PRIM_KERNEL && !live[op->out]) {
      dead[i] = true;
      continue;
    }
    if (writes_out(prog, i, rank) && !(rank < 0 && is_reduce(prog, i)))
      live[op->out] = false;
    for (int k = 0; op->def->reads && k < op->nin; k++)
      live[op->in[k]] = true;
  }
}

/* ------------------------------------------------------------------ */
/* Sampled rows                                                        */
/* ------------------------------------------------------------------ */

/* Rows of a variable (its dim 0) and elements per row. */
static int64_t var_rows(const ovl__var *v) { return v->dims[0]; }
static int64_t var_row_len(const ovl__var *v) {
  return v->dims[0] > 0 ? v->numel / v->dims[0] : 0;
}

/* Whether op i is a matmul (its kernel is not index-local). */
static bool is_matmul(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p != NULL && p->kind == OVL_PRIM_KERNEL &&
         prog->ops[i].def->kernel == OVL_KERNEL_MATMUL;
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
static ovl_status plan_rows(ref_state *s, int64_t max_rows, ovl_error *err) {
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
static bool op_needs(const ref_state *s, size_t i, size_t lo, size_t hi) {
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

/* Bytes of `numel` doubles, or false if that does not fit in a size_t. */
static bool doubles_bytes(int64_t numel, size_t *bytes) {
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / sizeof(double))
    return false;
  *bytes = (size_t)numel * sizeof(double);
  return true;
}

/* Elements [lo, hi) of one rank's generated input (a parallel for). */
typedef struct gen_ctx {
  const ovl__var *var;
  int rank;
  double *p;
} gen_ctx;

static void gen_range(void *arg, size_t lo, size_t hi) {
  const gen_ctx *g = arg;
  for (size_t i = lo; i < hi; i++)
    g->p[i] = ovl__var_init_value(g->var, g->rank, (int64_t)i);
}

/* Fill a variable's arrays on every rank with its starting values. */
static void init_var(const ref_state *s, int v) {
  const ovl__var *var = &s->prog->vars[v];
  size_t n = (size_t)var->numel;
  double *first = var_val(s, 0, v);
  bool same_on_all = !var->per_rank || (var->init != OVL_INIT_UNIFORM &&
                                         var->init != OVL_INIT_SPECIAL);

  for (int r = 0; r < s->nranks; r++) {
    double *p = var_val(s, r, v);
    if (r > 0 && same_on_all) {
      memcpy(p, first, n * sizeof *p);
      continue;
    }
    if (var->init == OVL_INIT_NONE) {
      for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    } else if (var->init == OVL_INIT_FILL) {
      double x = ovl__var_init_value(var, r, 0);
      for (size_t i = 0; i < n; i++)
        p[i] = x;
    } else {
      /* A few ns an element: a 8192 x 8192 input takes a second alone. */
      gen_ctx g = {.var = var, .rank = r, .p = p};
      ovl__ref_parallel(n, ovl__ref_threads((double)n), gen_range, &g);
    }
  }
}

static void rd_free(rd_state *d, int nranks);

static void state_free(ref_state *s) {
  if (s->val != NULL) {
    size_t count = (size_t)s->nranks * s->prog->nvars;
    for (size_t i = 0; i < count; i++)
      free(s->val[i]);
  }
  free(s->val);
  free(s->fetch_slot);
  free(s->fetched);
  free(s->dead);
  free(s->scratch);
  rd_free(s->rd, s->nranks);
  free(s->op_rows);
  for (size_t k = 2; s->sets != NULL && k < s->nsets; k++)
    free(s->sets[k].bits);
  free(s->sets);
}

static ovl_status nomem(const ref_state *s, ovl_error *err, int v) {
  const ovl__var *var = &s->prog->vars[v];
  return ovl__err(err, OVL_ENOMEM,
                  "%s: reference: out of memory for variable '%s' (%lld "
                  "elements x %d ranks as float64)",
                  prog_name(s->prog), var->name, (long long)var->numel,
                  s->nranks);
}

static ovl_status state_init(ref_state *s, int64_t max_rows,
                             ovl_error *err) {
  const ovl_program *prog = s->prog;
  size_t nvars = prog->nvars, nfetch = prog->nfetch, bytes;
  size_t ndead = s->per_rank ? (size_t)s->nranks * prog->nops : prog->nops;
  bool *used;

  s->val = calloc((size_t)s->nranks * nvars + 1, sizeof *s->val);
  s->fetch_slot = malloc((nvars + 1) * sizeof *s->fetch_slot);
  s->fetched = calloc((size_t)s->nranks * nfetch + 1, sizeof *s->fetched);
  s->dead = calloc(ndead + 1, sizeof *s->dead);
  s->scratch = malloc(REF_BLOCK * sizeof *s->scratch);
  s->ref->fetched =
      calloc((size_t)s->nranks * nfetch + 1, sizeof *s->ref->fetched);
  s->ref->rows = calloc(nfetch + 1, sizeof *s->ref->rows);
  s->ref->nrows = calloc(nfetch + 1, sizeof *s->ref->nrows);
  used = calloc(nvars + 1, sizeof *used);
  if (s->val == NULL || s->fetch_slot == NULL || s->fetched == NULL ||
      s->dead == NULL || s->scratch == NULL || s->ref->fetched == NULL ||
      s->ref->rows == NULL || s->ref->nrows == NULL || used == NULL) {
    free(used);
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  }

  if (plan_rows(s, max_rows, err) != OVL_OK) {
    free(used);
    return OVL_ENOMEM;
  }
  for (size_t v = 0; v < nvars; v++)
    s->fetch_slot[v] = -1;
  for (size_t i = 0; i < nfetch; i++)
    s->fetch_slot[prog->fetch[i]] = (int)i;

  if (!s->per_rank) {
    mark_dead(prog, -1, used, s->dead);
  } else {
    for (int r = 0; r < s->nranks; r++) {
      memset(used, 0, (nvars + 1) * sizeof *used);
      mark_dead(prog, r, used, s->dead + (size_t)r * prog->nops);
    }
  }
  memset(used, 0, (nvars + 1) * sizeof *used);
  mark_used(prog, used);
  for (size_t v = 0; v < nvars; v++) {
    if (!used[v])
      continue;
    for (int r = 0; r < s->nranks; r++) {
      double **p = &s->val[(size_t)r * nvars + v];
      if (!doubles_bytes(prog->vars[v].numel, &bytes) ||
          (*p = malloc(bytes + 1)) == NULL) {
        free(used);
        return nomem(s, err, (int)v);
      }
    }
    init_var(s, (int)v);
  }
  free(used);

  for (size_t i = 0; i < nfetch; i++) {
    int v = prog->fetch[i];
    for (int r = 0; r < s->nranks; r++) {
      double **p = &s->ref->fetched[(size_t)r * nfetch + i];
      if (!doubles_bytes(prog->vars[v].numel, &bytes) ||
          (*p = malloc(bytes + 1)) == NULL)
        return nomem(s, err, v);
    }
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Evaluation                                                          */
/* ------------------------------------------------------------------ */

/* Whether op i is index-local: its data primitive (if any) is not an
 * allgather, reducescatter or alltoall (nor a send or receive, which the
 * lock step never meets). */
static bool is_local(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p == NULL ||
         (p->kind != OVL_PRIM_SEND && p->kind != OVL_PRIM_RECV &&
          (p->kind != OVL_PRIM_COLL ||
           ovl__coll_is_local(prog->ops[i].def->coll)));
}

/* Elements [lo, hi) of a variable of `numel` elements: how many there are
 * (0 if the variable is shorter than lo). */
static size_t clip(int64_t numel, size_t lo, size_t hi) {
  size_t n = (size_t)numel;
  if (lo >= n)
    return 0;
  return (hi < n ? hi : n) - lo;
}

/* Store n results in `dtype`: float32 variables hold float32 values, and
 * 16-bit ones their values (rounded in one step from the double). */
static void store_round(ovl_dtype dtype, double *p, size_t n) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    for (size_t i = 0; i < n; i++)
      p[i] = (double)(float)p[i];
    break;
  case OVL_DTYPE_FLOAT16:
    for (size_t i = 0; i < n; i++)
      p[i] = ovl__f64_round_f16(p[i]);
    break;
  case OVL_DTYPE_BFLOAT16:
    for (size_t i = 0; i < n; i++)
      p[i] = ovl__f64_round_bf16(p[i]);
    break;
  default:
    break;
  }
}

/* A kernel on elements [lo, hi) of ranks [r0, r1). */
static void run_kernel(ref_state *s, const ovl__op *op, int r0, int r1,
                       size_t lo, size_t hi) {
  const ovl__var *o = &s->prog->vars[op->out];
  size_t n = clip(o->numel, lo, hi);
  for (int r = r0; r < r1 && n > 0; r++) {
    const double *x = var_val(s, r, op->in[0]) + lo;
    (o->dtype == OVL_DTYPE_FLOAT64 ? ew_apply : ew_apply_narrow)(
             op->def->ew, var_val(s, r, op->out) + lo, x,
             op->nin > 1 ? var_val(s, r, op->in[1]) + lo : x,
             in_dtype(o->dtype, op->scale), in_dtype(o->dtype, op->bias), n);
    store_round(o->dtype, var_val(s, r, op->out) + lo, n);
  }
}

/* The fold of a reduction over every rank's input, elements [lo, lo + n),
 * into acc: rank order, rounded once at the end. ops[r] is the op rank r
 * runs (the same statement in lock step; matched ones per rank). */
static void reduce_into(ref_state *s, const ovl__op *const *ops, double *acc,
                        size_t lo, size_t n) {
  const ovl__var *vars = s->prog->vars;
  ovl__redop redop = ops[0]->def->redop;
  ovl_dtype dtype = vars[ops[0]->in[0]].dtype;
  double m = red_premul(redop, dtype, s->nranks);
  red_first(acc, var_val(s, 0, ops[0]->in[0]) + lo, m, n);
  for (int q = 1; q < s->nranks; q++)
    red_apply(redop, acc, var_val(s, q, ops[q]->in[0]) + lo, m, n);
  store_round(dtype, acc, n);
}

/* An index-local collective (allreduce, broadcast, reduce, barrier) on
 * elements [lo, hi) of every rank; ops[r] is rank r's op, `root` the root
 * where the collective has one. Every rank's input is read before any
 * output is written where they may alias (in place, on one rank). */
static void run_local_coll(ref_state *s, const ovl__op *const *ops, int root,
                           size_t lo, size_t hi) {
  const ovl__var *vars = s->prog->vars;
  ovl__coll coll = ops[0]->def->coll;
  size_t n;

  if (coll == OVL_COLL_BARRIER || ops[0]->out < 0)
    return;
  n = clip(vars[ops[0]->out].numel, lo, hi);
  if (n == 0)
    return;
  switch (coll) {
  case OVL_COLL_ALLREDUCE: {
    /* Into rank 0's output, then copied out. */
    double *acc = var_val(s, 0, ops[0]->out) + lo;
    reduce_into(s, ops, acc, lo, n);
    for (int r = 1; r < s->nranks; r++)
      memcpy(var_val(s, r, ops[r]->out) + lo, acc, n * sizeof *acc);
    return;
  }
  case OVL_COLL_REDUCE:
    /* Into scratch (the root's output may be its input, and rank 0's
     * output is not written): n <= REF_BLOCK. */
    reduce_into(s, ops, s->scratch, lo, n);
    memcpy(var_val(s, root, ops[root]->out) + lo, s->scratch,
           n * sizeof *s->scratch);
    return;
  case OVL_COLL_BROADCAST: {
    const double *src = var_val(s, root, ops[root]->in[0]) + lo;
    for (int r = 0; r < s->nranks; r++) {
      double *dst = var_val(s, r, ops[r]->out) + lo;
      if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
    }
    return;
  }
  default:
    return;
  }
}

/* c_allgather, c_reducescatter or alltoall over whole arrays; ops[r] is
 * rank r's op. Output and input are distinct variables, except for one
 * rank, where allgather and reducescatter copy a variable onto itself. */
static void run_global_coll(ref_state *s, const ovl__op *const *ops) {
  const ovl__var *vars = s->prog->vars;
  int nr = s->nranks;

  switch (ops[0]->def->coll) {
  case OVL_COLL_ALLGATHER: {
    size_t n = (size_t)vars[ops[0]->in[0]].numel;
    for (int r = 0; r < nr; r++)
      for (int q = 0; q < nr; q++) {
        double *dst = var_val(s, r, ops[r]->out) + (size_t)q * n;
        const double *src = var_val(s, q, ops[q]->in[0]);
        if (dst != src)
          memcpy(dst, src, n * sizeof *dst);
      }
    return;
  }
  case OVL_COLL_REDUCESCATTER: {
    /* out_r[i] = reduce over q, in rank order, of x_q[r * len + i]. */
    size_t len = (size_t)vars[ops[0]->out].numel;
    for (int r = 0; r < nr; r++)
      reduce_into(s, ops, var_val(s, r, ops[r]->out), (size_t)r * len, len);
    return;
  }
  case OVL_COLL_ALLTOALL: {
    /* Part i of rank j's output = part j of rank i's input. */
    size_t part = (size_t)vars[ops[0]->in[0]].numel / (size_t)nr;
    for (int j = 0; j < nr; j++)
      for (int i = 0; i < nr; i++)
        memcpy(var_val(s, j, ops[j]->out) + (size_t)i * part,
               var_val(s, i, ops[i]->in[0]) + (size_t)j * part,
               part * sizeof(double));
    return;
  }
  default:
    return;
  }
}

/* A fetch: the snapshot of its variables, elements [lo, hi), on ranks
 * [r0, r1). */
static void run_host_read(ref_state *s, const ovl__op *op, int r0, int r1,
                          size_t lo, size_t hi) {
  size_t nfetch = s->prog->nfetch;
  for (int k = 0; k < op->nin; k++) {
    int v = op->in[k], slot = s->fetch_slot[v];
    size_t n = clip(s->prog->vars[v].numel, lo, hi);
    for (int r = r0; r < r1; r++) {
      s->fetched[(size_t)r * nfetch + (size_t)slot] = true;
      if (n > 0)
        memcpy(snapshot(s, r, slot) + lo, var_val(s, r, v) + lo,
               n * sizeof(double));
    }
  }
}

/* One index-local op on elements [lo, hi) of ranks [r0, r1) (a collective:
 * in lock step, every rank). */
static void run_local(ref_state *s, size_t i, int r0, int r1, size_t lo,
                      size_t hi) {
  const ovl__prim *p = data_prim(s->prog, i);
  const ovl__op *op = &s->prog->ops[i];
  if (p == NULL)
    return;
  switch ((ovl__prim_kind)p->kind) {
  case OVL_PRIM_KERNEL:
    run_kernel(s, op, r0, r1, lo, hi);
    return;
  case OVL_PRIM_COLL: {
    const ovl__op *ops[OVL_MAX_RANKS];
    for (int r = 0; r < s->nranks; r++)
      ops[r] = op;
    /* Lock step: root is the same on every rank (op->root). */
    run_local_coll(s, ops, op->root, lo, hi);
    return;
  }
  case OVL_PRIM_HOST_READ:
    run_host_read(s, op, r0, r1, lo, hi);
    return;
  default:
    return;
  }
}

/* Largest variable any op of [first, last) touches. */
static size_t segment_extent(const ref_state *s, size_t first, size_t last) {
  size_t extent = 0;
  for (size_t i = first; i < last; i++) {
    const ovl__op *op = &s->prog->ops[i];
    for (int k = 0; k < op->nin; k++)
      if ((size_t)s->prog->vars[op->in[k]].numel > extent)
        extent = (size_t)s->prog->vars[op->in[k]].numel;
    if (op->out >= 0 && (size_t)s->prog->vars[op->out].numel > extent)
      extent = (size_t)s->prog->vars[op->out].numel;
  }
  return extent;
}

/* The index-local ops [first, last) on ranks [r0, r1), block by block. Per
 * rank (r1 == r0 + 1): only the ops that run on r0, none of them a
 * collective. Dead kernels, and blocks of no row an op must compute
 * (sampled rows), are skipped. */
static void run_blocks(ref_state *s, size_t first, size_t last, int r0,
                       int r1) {
  const ovl_program *prog = s->prog;
  size_t extent = segment_extent(s, first, last);
  for (size_t lo = 0; lo < extent; lo += REF_BLOCK) {
    size_t hi = lo + REF_BLOCK < extent ? lo + REF_BLOCK : extent;
    for (size_t i = first; i < last; i++)
      if ((!s->per_rank || ovl__op_on_rank(&prog->ops[i], r0)) &&
          !is_dead(s, r0, i) && op_needs(s, i, lo, hi))
        run_local(s, i, r0, r1, lo, hi);
  }
  /* A fetch of only empty variables still counts as a fetch. */
  if (extent == 0)
    for (size_t i = first; i < last; i++)
      if (!s->per_rank || ovl__op_on_rank(&prog->ops[i], r0))
        run_local(s, i, r0, r1, 0, 0);
}

/* A matmul, op i, on ranks [r0, r1): the rows of its output the plan
 * asks for (all of them without a plan), in double, rounded to the
 * output's dtype. */
static void run_matmul(ref_state *s, size_t i, int r0, int r1) {
  const ovl__op *op = &s->prog->ops[i];
  const ovl__var *o = &s->prog->vars[op->out];
  const ovl__var *x = &s->prog->vars[op->in[0]];
  size_t m = (size_t)o->dims[0], n = (size_t)o->dims[1];
  size_t k = (size_t)x->dims[op->trans_x ? 0 : 1], nrows = m;
  int64_t *rows = NULL;
  uint32_t set = s->op_rows != NULL ? s->op_rows[i] : ROWS_ALL;

  if (set == ROWS_NONE)
    return;
  if (set != ROWS_ALL) {
    const rowset *rs = &s->sets[set];
    nrows = 0;
    rows = malloc((size_t)rs->nbits * sizeof *rows + 1);
    if (rows == NULL) {
      s->nomem = true;
      return;
    }
    for (int64_t r = 0; r < rs->nbits; r++)
      if ((rs->bits[r / 64] >> (r % 64)) & 1)
        rows[nrows++] = r;
  }
  for (int r = r0; r < r1; r++) {
    double *out = var_val(s, r, op->out);
    if (!ovl__ref_matmul(out, var_val(s, r, op->in[0]),
                         var_val(s, r, op->in[1]), m, n, k, op->trans_x,
                         op->trans_y, rows, rows != NULL ? nrows : 0)) {
      s->nomem = true;
      break;
    }
    for (size_t q = 0; q < nrows; q++)
      store_round(o->dtype, out + (rows != NULL ? (size_t)rows[q] : q) * n,
                  n);
  }
  free(rows);
}

/* Ops [first, last) on ranks [r0, r1) (per rank: r1 == r0 + 1, only the
 * ops that run on r0, none of them a collective; in lock step no
 * allgather, reducescatter or alltoall): index-local runs block by
 * block, a matmul whole. */
static void run_segment(ref_state *s, size_t first, size_t last, int r0,
                        int r1) {
  const ovl_program *prog = s->prog;
  while (first < last) {
    size_t b = first;
    while (b < last && !is_matmul(prog, b))
      b++;
    if (b > first)
      run_blocks(s, first, b, r0, r1);
    if (b < last) {
      if ((!s->per_rank || ovl__op_on_rank(&prog->ops[b], r0)) &&
          !is_dead(s, r0, b))
        run_matmul(s, b, r0, r1);
      b++;
    }
    first = b;
  }
}

/* Lock step: every rank runs every op. */
static void run_lock_step(ref_state *s) {
  const ovl_program *prog = s->prog;
  size_t first = 0;

  while (first < prog->nops) {
    size_t last = first;
    while (last < prog->nops && is_local(prog, last))
      last++;
    run_segment(s, first, last, 0, s->nranks);
    if (last < prog->nops) {
      const ovl__op *ops[OVL_MAX_RANKS];
      for (int r = 0; r < s->nranks; r++)
        ops[r] = &prog->ops[last];
      run_global_coll(s, ops);
      last++;
    }
    first = last;
  }
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
    run_global_coll(s, ops);
    return;
  }
  size_t extent = ops[0]->out >= 0
                      ? (size_t)s->prog->vars[ops[0]->out].numel
                      : 0;
  int root = ovl__op_root(s->prog, ops[0], 0);
  for (size_t lo = 0; lo < extent; lo += REF_BLOCK)
    run_local_coll(s, ops, root,
                   lo, lo + REF_BLOCK < extent ? lo + REF_BLOCK : extent);
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
    run_segment(s, i, i + 1, rank, rank + 1);
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
        run_segment(s, i, j, rank, rank + 1);
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
static ovl_status run_per_rank(ref_state *s, ovl_error *err) {
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

/* ------------------------------------------------------------------ */
/* Public API                                                          */
/* ------------------------------------------------------------------ */

void ovl_reference_free(ovl_reference *ref) {
  if (ref == NULL)
    return;
  if (ref->fetched != NULL)
    for (size_t i = 0; i < (size_t)ref->nranks * ref->nfetch; i++)
      free(ref->fetched[i]);
  free(ref->fetched);
  if (ref->rows != NULL)
    for (size_t i = 0; i < ref->nfetch; i++)
      free(ref->rows[i]);
  free(ref->rows);
  free(ref->nrows);
  free(ref);
}

ovl_status ovl_reference_compute(const ovl_program *prog, int nranks,
                                 ovl_reference **out, ovl_error *err) {
  return ovl_reference_compute_rows(prog, nranks, OVL_REFERENCE_ROWS_DEFAULT,
                                    out, err);
}

ovl_status ovl_reference_compute_rows(const ovl_program *prog, int nranks,
                                      int64_t max_rows, ovl_reference **out,
                                      ovl_error *err) {
  ref_state s = {0};
  ovl_status st;

  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_reference_compute: bad argument");
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_reference_compute: %d ranks (must be 1 to %d)",
                    nranks, OVL_MAX_RANKS);
  /* Shapes (allgather's, reducescatter's) and rank sets were fixed for
   * prog->nranks. */
  if (nranks != prog->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "%s: reference: the program is for %d ranks, not %d",
                    prog_name(prog), prog->nranks, nranks);

  s.prog = prog;
  s.nranks = nranks;
  s.per_rank = prog->rank_dependent;
  s.ref = calloc(1, sizeof *s.ref);
  if (s.ref == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  s.ref->nranks = nranks;
  s.ref->nfetch = prog->nfetch;

  st = state_init(&s, max_rows, err);
  if (st == OVL_OK) {
    if (s.per_rank)
      st = run_per_rank(&s, err);
    else
      run_lock_step(&s);
  }
  if (st == OVL_OK && s.nomem)
    st = ovl__err(err, OVL_ENOMEM,
                  "%s: reference: out of memory in a matmul",
                  prog_name(prog));
  if (st == OVL_OK) {
    /* A listed variable that no fetch op reached on a rank has no value
     * there. */
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < prog->nfetch; i++) {
        size_t k = (size_t)r * prog->nfetch + i;
        if (s.fetched[k])
          continue;
        free(s.ref->fetched[k]);
        s.ref->fetched[k] = NULL;
      }
  }
  state_free(&s);
  if (st != OVL_OK) {
    ovl_reference_free(s.ref);
    return st;
  }
  *out = s.ref;
  return OVL_OK;
}

const int64_t *ovl_reference_rows(const ovl_reference *ref, size_t i,
                                  size_t *n) {
  if (n != NULL)
    *n = 0;
  if (ref == NULL || i >= ref->nfetch || ref->rows[i] == NULL)
    return NULL;
  if (n != NULL)
    *n = ref->nrows[i];
  return ref->rows[i];
}

const double *ovl_reference_fetched(const ovl_reference *ref, int rank,
                                    size_t i) {
  if (ref == NULL || rank < 0 || rank >= ref->nranks || i >= ref->nfetch)
    return NULL;
  return ref->fetched[(size_t)rank * ref->nfetch + i];
}
