/*
 * The reference: a sequential float64 interpreter of a program, all ranks in
 * lock step (docs/ARCHITECTURE.md, "Checks"). It gives the value every
 * fetched variable must have; ovl_check_result compares a run against it.
 * Like the executor it interprets the lowered program (core/lower.c): the
 * element math of a kernel and the reduction of a collective come from the
 * op's row (core/elemfn.h), so the reference, the cpu backend and the CUDA
 * kernels compute from one definition.
 *
 * Semantics: data() variables start with their generated inputs (already
 * rounded to the dtype), every other variable starts as NaN, like the
 * poisoned device buffers. A kernel is evaluated in double with its scale
 * and bias first converted to the output's dtype (as the device converts
 * them), and each result is stored in its variable's dtype, as a device
 * stores it: a float32 variable keeps float32 range (an overflow is inf on
 * the device and in the reference alike) and precision, while the
 * arithmetic of one op stays exact-ish in double. Collectives reduce in
 * rank order and round once, at the end. Records, waits, syncs and delays
 * order streams and move no data, so they do nothing here. A host read
 * (fetch) snapshots the variable on every rank; the last fetch of a
 * variable wins.
 *
 * Speed: the seed program makes ~770 passes over 10M elements per rank, so
 * running it op by op would be bound by memory bandwidth. Every op except
 * c_allgather and c_reducescatter is index-local (element i of its output
 * depends only on element i of its inputs, on every rank), so a run of such
 * ops is evaluated one cache-sized block of indices at a time: all ops on
 * block 0, then all ops on block 1, ... The result is the same, element for
 * element, as evaluating op after op over whole arrays. And a kernel
 * whose output is overwritten before anything reads it (the seed's ten
 * `e = 2 * d` in a row) is skipped: it cannot change any fetched value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Elements per block: big enough to amortise the per-op dispatch, small
 * enough that the arrays one op touches on every rank stay in L1 (measured
 * on the seed program: 1024 beats 512 and 2048). */
#define REF_BLOCK 1024

struct ovl_reference_s {
  int nranks;
  size_t nfetch;
  /* [rank * nfetch + i]: the snapshot of fetched variable i, NULL if it was
   * never fetched. */
  double **fetched;
};

/* The interpreter's state during one ovl_reference_compute. */
typedef struct ref_state {
  const ovl_program *prog;
  int nranks;
  double **val;     /* [rank * nvars + var]; NULL for unused variables */
  int *fetch_slot;  /* var -> index in prog->fetch, or -1 */
  bool *fetched;    /* per fetch index: some fetch op has run */
  bool *dead;       /* per op: a compute op nothing observes */
  ovl_reference *ref;
} ref_state;

static double *var_val(const ref_state *s, int rank, int var) {
  return s->val[(size_t)rank * s->prog->nvars + (size_t)var];
}

static double *snapshot(const ref_state *s, int rank, int slot) {
  return s->ref->fetched[(size_t)rank * s->ref->nfetch + (size_t)slot];
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

/* The same for float32 variables, whose operands (and scale and bias) are
 * float32 values: their product is exact in double, so fma(s, x, b) and
 * s * x + b are the same double, and the plain expression (inline, where
 * fma is a library call without FMA instructions) is used. */
#define fma(a, b, c) ((a) * (b) + (c))
DEFINE_EW_APPLY(ew_apply_f32)
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
 * values the product is exact in double; for float64 it rounds, as the
 * device's does. */
static double red_premul(ovl__redop op, ovl_dtype dtype, int nranks) {
  static const bool premul[] = {
#define OVL__RED_PREMUL(name, expr, pm) pm,
      OVL_RED_LIST(OVL__RED_PREMUL)
#undef OVL__RED_PREMUL
  };
  if (!premul[op])
    return 1.0;
  return dtype == OVL_DTYPE_FLOAT32 ? (double)(float)(1.0 / nranks)
                                    : 1.0 / nranks;
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
  return dtype == OVL_DTYPE_FLOAT32 ? (double)(float)v : v;
}

static const char *prog_name(const ovl_program *prog) {
  return prog->filename != NULL ? prog->filename : "<program>";
}

/* The primitive of op i that moves data (kernel, collective, host read),
 * or NULL: the others order streams only. */
static const ovl__prim *data_prim(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (p[k].kind == OVL_PRIM_KERNEL || p[k].kind == OVL_PRIM_COLL ||
        p[k].kind == OVL_PRIM_HOST_READ)
      return &p[k];
  return NULL;
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
 * Liveness, from the last op back; every kernel and collective writes the
 * whole of its output. `live` is scratch, one flag per variable, all
 * false on entry. Collectives are always run (every rank takes part). */
static void mark_dead(const ovl_program *prog, bool *live, bool *dead) {
  for (size_t i = prog->nops; i-- > 0;) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = data_prim(prog, i);
    if (p == NULL)
      continue; /* waits and syncs name variables but move no data */
    if (p->kind == OVL_PRIM_KERNEL && !live[op->out]) {
      dead[i] = true;
      continue;
    }
    if (op->def->writes && op->out >= 0)
      live[op->out] = false;
    for (int k = 0; op->def->reads && k < op->nin; k++)
      live[op->in[k]] = true;
  }
}

/* Bytes of `numel` doubles, or false if that does not fit in a size_t. */
static bool doubles_bytes(int64_t numel, size_t *bytes) {
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / sizeof(double))
    return false;
  *bytes = (size_t)numel * sizeof(double);
  return true;
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
      for (size_t i = 0; i < n; i++)
        p[i] = ovl__var_init_value(var, r, (int64_t)i);
    }
  }
}

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
}

static ovl_status nomem(const ref_state *s, ovl_error *err, int v) {
  const ovl__var *var = &s->prog->vars[v];
  return ovl__err(err, OVL_ENOMEM,
                  "%s: reference: out of memory for variable '%s' (%lld "
                  "elements x %d ranks as float64)",
                  prog_name(s->prog), var->name, (long long)var->numel,
                  s->nranks);
}

static ovl_status state_init(ref_state *s, ovl_error *err) {
  const ovl_program *prog = s->prog;
  size_t nvars = prog->nvars, nfetch = prog->nfetch, bytes;
  bool *used;

  s->val = calloc((size_t)s->nranks * nvars + 1, sizeof *s->val);
  s->fetch_slot = malloc((nvars + 1) * sizeof *s->fetch_slot);
  s->fetched = calloc(nfetch + 1, sizeof *s->fetched);
  s->dead = calloc(prog->nops + 1, sizeof *s->dead);
  s->ref->fetched =
      calloc((size_t)s->nranks * nfetch + 1, sizeof *s->ref->fetched);
  used = calloc(nvars + 1, sizeof *used);
  if (s->val == NULL || s->fetch_slot == NULL || s->fetched == NULL ||
      s->dead == NULL || s->ref->fetched == NULL || used == NULL) {
    free(used);
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  }

  for (size_t v = 0; v < nvars; v++)
    s->fetch_slot[v] = -1;
  for (size_t i = 0; i < nfetch; i++)
    s->fetch_slot[prog->fetch[i]] = (int)i;

  mark_dead(prog, used, s->dead);
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
 * allgather or reducescatter. */
static bool is_local(const ovl_program *prog, size_t i) {
  const ovl__prim *p = data_prim(prog, i);
  return p == NULL || p->kind != OVL_PRIM_COLL ||
         ovl__coll_is_local(prog->ops[i].def->coll);
}

/* Elements [lo, hi) of a variable of `numel` elements: how many there are
 * (0 if the variable is shorter than lo). */
static size_t clip(int64_t numel, size_t lo, size_t hi) {
  size_t n = (size_t)numel;
  if (lo >= n)
    return 0;
  return (hi < n ? hi : n) - lo;
}

/* Store n results in `dtype`: float32 variables hold float32 values. */
static void store_round(ovl_dtype dtype, double *p, size_t n) {
  if (dtype != OVL_DTYPE_FLOAT32)
    return;
  for (size_t i = 0; i < n; i++)
    p[i] = (double)(float)p[i];
}

static void run_kernel(ref_state *s, const ovl__op *op, size_t lo,
                       size_t hi) {
  const ovl__var *o = &s->prog->vars[op->out];
  size_t n = clip(o->numel, lo, hi);
  for (int r = 0; r < s->nranks && n > 0; r++) {
    const double *x = var_val(s, r, op->in[0]) + lo;
    (o->dtype == OVL_DTYPE_FLOAT32 ? ew_apply_f32 : ew_apply)(
             op->def->ew, var_val(s, r, op->out) + lo, x,
             op->nin > 1 ? var_val(s, r, op->in[1]) + lo : x,
             in_dtype(o->dtype, op->scale), in_dtype(o->dtype, op->bias), n);
    store_round(o->dtype, var_val(s, r, op->out) + lo, n);
  }
}

/* allreduce or broadcast on elements [lo, hi) of every rank. */
static void run_local_coll(ref_state *s, const ovl__op *op, size_t lo,
                           size_t hi) {
  const ovl__var *vars = s->prog->vars;
  int x = op->in[0], out = op->out;
  size_t n = clip(vars[out].numel, lo, hi);
  if (n == 0)
    return;
  if (op->def->coll == OVL_COLL_ALLREDUCE) {
    /* Reduce into rank 0's output (every rank's input has been read
     * before any other rank's output is written), then copy it out. */
    double *acc = var_val(s, 0, out) + lo;
    double m = red_premul(op->def->redop, vars[out].dtype, s->nranks);
    red_first(acc, var_val(s, 0, x) + lo, m, n);
    for (int q = 1; q < s->nranks; q++)
      red_apply(op->def->redop, acc, var_val(s, q, x) + lo, m, n);
    store_round(vars[out].dtype, acc, n);
    for (int r = 1; r < s->nranks; r++)
      memcpy(var_val(s, r, out) + lo, acc, n * sizeof *acc);
  } else { /* broadcast */
    const double *src = var_val(s, op->root, x) + lo;
    for (int r = 0; r < s->nranks; r++) {
      double *dst = var_val(s, r, out) + lo;
      if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
    }
  }
}

static void run_host_read(ref_state *s, const ovl__op *op, size_t lo,
                          size_t hi) {
  for (int k = 0; k < op->nin; k++) {
    int v = op->in[k], slot = s->fetch_slot[v];
    size_t n = clip(s->prog->vars[v].numel, lo, hi);
    s->fetched[slot] = true;
    for (int r = 0; r < s->nranks && n > 0; r++)
      memcpy(snapshot(s, r, slot) + lo, var_val(s, r, v) + lo,
             n * sizeof(double));
  }
}

/* One index-local op on elements [lo, hi) of every rank. */
static void run_local(ref_state *s, size_t i, size_t lo, size_t hi) {
  const ovl__prim *p = data_prim(s->prog, i);
  const ovl__op *op = &s->prog->ops[i];
  if (p == NULL)
    return;
  switch ((ovl__prim_kind)p->kind) {
  case OVL_PRIM_KERNEL:
    run_kernel(s, op, lo, hi);
    return;
  case OVL_PRIM_COLL:
    run_local_coll(s, op, lo, hi);
    return;
  case OVL_PRIM_HOST_READ:
    run_host_read(s, op, lo, hi);
    return;
  default:
    return;
  }
}

/* c_allgather or c_reducescatter over whole arrays. */
static void run_gather_scatter(ref_state *s, const ovl__op *op) {
  int x = op->in[0], out = op->out;

  if (op->def->coll == OVL_COLL_ALLGATHER) {
    size_t n = (size_t)s->prog->vars[x].numel;
    for (int r = 0; r < s->nranks; r++)
      for (int q = 0; q < s->nranks; q++) {
        double *dst = var_val(s, r, out) + (size_t)q * n;
        const double *src = var_val(s, q, x);
        if (dst != src)
          memcpy(dst, src, n * sizeof *dst);
      }
    return;
  }
  /* reducescatter: out_r[i] = reduce over q, in rank order, of
   * x_q[r * m + i]. Output and input are distinct variables unless there
   * is one rank, where this is a copy onto itself. */
  size_t len = (size_t)s->prog->vars[out].numel;
  double m = red_premul(op->def->redop, s->prog->vars[out].dtype, s->nranks);
  for (int r = 0; r < s->nranks; r++) {
    double *acc = var_val(s, r, out);
    red_first(acc, var_val(s, 0, x) + (size_t)r * len, m, len);
    for (int q = 1; q < s->nranks; q++)
      red_apply(op->def->redop, acc, var_val(s, q, x) + (size_t)r * len, m,
                len);
    store_round(s->prog->vars[out].dtype, acc, len);
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

static void run_program(ref_state *s) {
  const ovl_program *prog = s->prog;
  size_t first = 0;

  while (first < prog->nops) {
    size_t last = first;
    while (last < prog->nops && is_local(prog, last))
      last++;
    size_t extent = segment_extent(s, first, last);
    for (size_t lo = 0; lo < extent; lo += REF_BLOCK) {
      size_t hi = lo + REF_BLOCK < extent ? lo + REF_BLOCK : extent;
      for (size_t i = first; i < last; i++)
        if (!s->dead[i])
          run_local(s, i, lo, hi);
    }
    /* A fetch of only empty variables still counts as a fetch. */
    if (extent == 0)
      for (size_t i = first; i < last; i++)
        run_local(s, i, 0, 0);
    if (last < prog->nops)
      run_gather_scatter(s, &prog->ops[last++]);
    first = last;
  }
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
  free(ref);
}

ovl_status ovl_reference_compute(const ovl_program *prog, int nranks,
                                 ovl_reference **out, ovl_error *err) {
  ref_state s = {0};
  ovl_status st;

  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_reference_compute: bad argument");
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_reference_compute: %d ranks (must be 1 to %d)",
                    nranks, OVL_MAX_RANKS);
  /* Shapes (allgather's, reducescatter's) were fixed for prog->nranks. */
  if (nranks != prog->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "%s: reference: the program is for %d ranks, not %d",
                    prog_name(prog), prog->nranks, nranks);

  s.prog = prog;
  s.nranks = nranks;
  s.ref = calloc(1, sizeof *s.ref);
  if (s.ref == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  s.ref->nranks = nranks;
  s.ref->nfetch = prog->nfetch;

  st = state_init(&s, err);
  if (st == OVL_OK) {
    run_program(&s);
    /* A listed variable that no fetch op reached has no value. */
    for (size_t i = 0; i < prog->nfetch; i++) {
      if (s.fetched[i])
        continue;
      for (int r = 0; r < nranks; r++) {
        free(s.ref->fetched[(size_t)r * prog->nfetch + i]);
        s.ref->fetched[(size_t)r * prog->nfetch + i] = NULL;
      }
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

const double *ovl_reference_fetched(const ovl_reference *ref, int rank,
                                    size_t i) {
  if (ref == NULL || rank < 0 || rank >= ref->nranks || i >= ref->nfetch)
    return NULL;
  return ref->fetched[(size_t)rank * ref->nfetch + i];
}
