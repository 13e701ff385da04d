/*
 * The reference's evaluation (check/reference.c, "Lock step"): a kernel's
 * element math and a reduction's fold in double, rounded to the
 * variable's dtype; index-local ops one block of elements at a time, a
 * matmul whole (check/ref_matmul.c), collectives; and the lock step of a
 * program every rank runs whole. The per-rank interpreter
 * (check/ref_rank.c) calls the same pieces.
 */
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "check/reference.h"

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
void ovl__ref_run_local_coll(ref_state *s, const ovl__op *const *ops,
                             int root, size_t lo, size_t hi) {
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
void ovl__ref_run_global_coll(ref_state *s, const ovl__op *const *ops) {
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
    /* Lock step: root is the same on every rank. */
    ovl__ref_run_local_coll(s, ops, ovl__op_root(s->prog, op, 0), lo, hi);
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
          !is_dead(s, r0, i) && ovl__ref_op_needs(s, i, lo, hi))
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
void ovl__ref_run_segment(ref_state *s, size_t first, size_t last, int r0,
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
void ovl__ref_run_lock_step(ref_state *s) {
  const ovl_program *prog = s->prog;
  size_t first = 0;

  while (first < prog->nops) {
    size_t last = first;
    while (last < prog->nops && is_local(prog, last))
      last++;
    ovl__ref_run_segment(s, first, last, 0, s->nranks);
    if (last < prog->nops) {
      const ovl__op *ops[OVL_MAX_RANKS];
      for (int r = 0; r < s->nranks; r++)
        ops[r] = &prog->ops[last];
      ovl__ref_run_global_coll(s, ops);
      last++;
    }
    first = last;
  }
}
