/*
 * The parts of the reference, private to them: check/reference.c (what
 * the reference does, and its API), ref_state.c (its state: made, with
 * every variable's starting values, and freed), ref_rank.c (the per-rank
 * interpreter), ref_eval.c (the evaluation: element math, ops block by
 * block, collectives, the lock step), ref_rows.c (sampled rows) and
 * ref_matmul.c (the matrix product and a parallel for). Each calls only
 * those after it in this list.
 */
#ifndef OVL_CHECK_REFERENCE_H
#define OVL_CHECK_REFERENCE_H

#include "core/op.h"

/* ------------------------------------------------------------------ */
/* The interpreter's state                                             */
/* ------------------------------------------------------------------ */

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

static inline double *var_val(const ref_state *s, int rank, int var) {
  return s->val[(size_t)rank * s->prog->nvars + (size_t)var];
}

static inline double *snapshot(const ref_state *s, int rank, int slot) {
  return s->ref->fetched[(size_t)rank * s->ref->nfetch + (size_t)slot];
}

static inline bool is_dead(const ref_state *s, int rank, size_t i) {
  return s->dead[s->per_rank ? (size_t)rank * s->prog->nops + i : i];
}

static inline const char *prog_name(const ovl_program *prog) {
  return prog->filename != NULL ? prog->filename : "<program>";
}

/* The primitive of op i that moves data or meets other ranks (kernel,
 * collective, send, receive, host read), or NULL: the others order streams
 * only. */
static inline const ovl__prim *data_prim(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (p[k].kind == OVL_PRIM_KERNEL || p[k].kind == OVL_PRIM_HOST_READ ||
        ovl__prim_is_comm(&p[k]))
      return &p[k];
  return NULL;
}

/* Whether op i, a collective, is c_reduce_* (it writes the root's output
 * only). */
static inline bool is_reduce(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p != NULL && p->kind == OVL_PRIM_COLL &&
         prog->ops[i].def->coll == OVL_COLL_REDUCE;
}

/* Whether op i writes its output on `rank` (a rank that runs it; -1: on
 * some rank). */
static inline bool writes_out(const ovl_program *prog, size_t i, int rank) {
  const ovl__op *op = &prog->ops[i];
  if (!op->def->writes || op->out < 0 || data_prim(prog, i) == NULL)
    return false;
  return !is_reduce(prog, i) || rank < 0 ||
         ovl__op_root(prog, op, rank) == rank;
}

/* Whether op i is a matmul (its kernel is not index-local). */
static inline bool is_matmul(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p != NULL && p->kind == OVL_PRIM_KERNEL &&
         prog->ops[i].def->kernel == OVL_KERNEL_MATMUL;
}

/* ------------------------------------------------------------------ */
/* The parts                                                           */
/* ------------------------------------------------------------------ */

/* check/ref_state.c: the state of s->prog for s->nranks ranks (s->per_rank
 * set), its reference s->ref (nranks, nfetch set) made ready to fill:
 * every variable an op touches with its starting values, the sampled rows
 * planned (at most max_rows a variable, ovl__ref_plan_rows), the dead
 * kernels marked. */
ovl_status ovl__ref_state_init(ref_state *s, int64_t max_rows,
                               ovl_error *err);
/* Frees what the state holds (not s->ref). */
void ovl__ref_state_free(ref_state *s);

/* check/ref_rank.c: the program interpreted rank by rank, meeting at
 * communication (rank-dependent programs). */
ovl_status ovl__ref_run_per_rank(ref_state *s, ovl_error *err);

/* check/ref_eval.c: every rank runs every op, in lock step. */
void ovl__ref_run_lock_step(ref_state *s);
/* Ops [first, last) on ranks [r0, r1) (per rank: r1 == r0 + 1, only the
 * ops that run on r0, none of them a collective; in lock step no
 * allgather, reducescatter or alltoall): index-local runs block by
 * block, a matmul whole. */
void ovl__ref_run_segment(ref_state *s, size_t first, size_t last, int r0,
                          int r1);
/* An index-local collective (allreduce, broadcast, reduce, barrier) on
 * elements [lo, hi) of every rank; ops[r] is rank r's op, `root` the root
 * where the collective has one. */
void ovl__ref_run_local_coll(ref_state *s, const ovl__op *const *ops,
                             int root, size_t lo, size_t hi);
/* c_allgather, c_reducescatter or alltoall over whole arrays; ops[r] is
 * rank r's op. */
void ovl__ref_run_global_coll(ref_state *s, const ovl__op *const *ops);

/* check/ref_rows.c: the plan of sampled rows (s->op_rows, s->sets and the
 * reference's rows; nothing without a matmul or with max_rows <= 0). */
ovl_status ovl__ref_plan_rows(ref_state *s, int64_t max_rows,
                              ovl_error *err);
/* Whether op i computes some of elements [lo, hi) of its output. */
bool ovl__ref_op_needs(const ref_state *s, size_t i, size_t lo, size_t hi);

/* ------------------------------------------------------------------ */
/* check/ref_matmul.c                                                  */
/* ------------------------------------------------------------------ */

/* Rows rows[0..nrows) (rows NULL: every row, 0 .. m - 1) of out[m, n] =
 * op(x) @ op(y) in float64, row-major: x is [m, k] ([k, m] with tx), y
 * [k, n] ([n, k] with ty); out is another array than x and y. The other
 * rows of out are not written. Uses every online CPU for large products
 * (check/ref_matmul.c). Returns false when out of memory (out is then
 * partly written). */
bool ovl__ref_matmul(double *out, const double *x, const double *y,
                     size_t m, size_t n, size_t k, bool tx, bool ty,
                     const int64_t *rows, size_t nrows);

/* Threads for `work` units (multiply-adds, elements) on this machine: one
 * per online CPU, fewer for small work (about 4 M units a thread), 1 at
 * least. */
size_t ovl__ref_threads(double work);

/* fn(ctx, lo, hi) over [0, n) cut into `nthreads` contiguous ranges, one
 * a thread (this thread takes the first); returns when all are done. fn
 * must be safe to run on disjoint ranges at once. */
void ovl__ref_parallel(size_t n, size_t nthreads,
                       void (*fn)(void *ctx, size_t lo, size_t hi),
                       void *ctx);

#endif /* OVL_CHECK_REFERENCE_H */
