/*
 * Tests of the float64 reference (reference.c) and of the numeric check
 * (check.c). Programs are built by hand here so that these tests depend on
 * neither the parser nor the world; the check is tested through
 * ovl__check_arrays with plain arrays.
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifdef __SANITIZE_ADDRESS__
/* The out-of-memory test needs malloc to return NULL for a huge request
 * instead of ASan aborting the process. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1";
}
#endif

/* ------------------------------------------------------------------ */
/* Building programs by hand                                           */
/* ------------------------------------------------------------------ */

static ovl_program *P;      /* the program of the current test */
static ovl_reference *REF;  /* its reference, freed by the fixture */

static void setup(void) {
  P = calloc(1, sizeof *P);
  ck_assert_ptr_nonnull(P);
  P->nranks = 2;
  REF = NULL;
}

static void teardown(void) {
  ovl_reference_free(REF);
  REF = NULL;
  ovl_program_free(P);
  P = NULL;
}

static void *grow(void *p, size_t n, size_t size) {
  p = realloc(p, n * size);
  ck_assert_ptr_nonnull(p);
  return p;
}

static int var_new(const char *name, ovl_dtype dtype, int64_t numel) {
  ovl__var *v;
  P->vars = grow(P->vars, P->nvars + 1, sizeof *P->vars);
  v = &P->vars[P->nvars];
  memset(v, 0, sizeof *v);
  v->name = ovl__strdup(name);
  ck_assert_ptr_nonnull(v->name);
  v->dtype = dtype;
  v->ndim = 1;
  v->dims[0] = numel;
  v->numel = numel;
  v->init = OVL_INIT_NONE;
  return (int)P->nvars++;
}

static int var_uniform(const char *name, ovl_dtype dtype, int64_t numel,
                       uint64_t seed, bool per_rank) {
  int v = var_new(name, dtype, numel);
  P->vars[v].init = OVL_INIT_UNIFORM;
  P->vars[v].seed = seed;
  P->vars[v].per_rank = per_rank;
  return v;
}

static int var_fill(const char *name, ovl_dtype dtype, int64_t numel,
                    double value) {
  int v = var_new(name, dtype, numel);
  P->vars[v].init = OVL_INIT_FILL;
  P->vars[v].fill = value;
  return v;
}

/* Append op `name` writing `out` (-1: none) from `nin` variables. The
 * returned pointer is valid until the next op is added. */
static ovl__op *op_add(const char *name, int out, int nin, ...) {
  va_list ap;
  ovl__op *op;
  P->ops = grow(P->ops, P->nops + 1, sizeof *P->ops);
  op = &P->ops[P->nops++];
  memset(op, 0, sizeof *op);
  op->def = ovl__opdef_find(name);
  ck_assert_msg(op->def != NULL, "no op %s", name);
  op->line = (int)P->nops;
  op->col = 1;
  op->out = out;
  op->nin = nin;
  va_start(ap, nin);
  for (int k = 0; k < nin; k++)
    op->in[k] = va_arg(ap, int);
  va_end(ap);
  op->scale = 1.0;
  op->bias = 0.0;
  op->stream = OVL_STREAM_CALC;
  if (op->def->kind == OVL_KIND_COLLECTIVE) {
    if (op->out < 0)
      op->out = op->in[0];
    op->stream = ovl__op_stream(op);
    if (P->nrings < 1)
      P->nrings = 1;
  }
  return op;
}

static ovl__op *scale_op(int out, int x, double scale, double bias) {
  ovl__op *op = op_add("scale", out, 1, x);
  op->scale = scale;
  op->bias = bias;
  return op;
}

/* A fetch op of one variable, listed in P->fetch on its first fetch. */
static void fetch(int v) {
  size_t i = 0;
  op_add("fetch", -1, 1, v);
  while (i < P->nfetch && P->fetch[i] != v)
    i++;
  if (i == P->nfetch) {
    P->fetch = grow(P->fetch, P->nfetch + 1, sizeof *P->fetch);
    P->fetch[P->nfetch++] = v;
  }
}

static size_t fetch_index(int v) {
  for (size_t i = 0; i < P->nfetch; i++)
    if (P->fetch[i] == v)
      return i;
  ck_abort_msg("variable %d is not fetched", v);
  return 0;
}

/* Compute REF for `nranks` ranks; it must succeed. */
static void run_ref(int nranks) {
  ovl_error err = {0};
  ovl_status st;
  P->nranks = nranks;
  st = ovl_reference_compute(P, nranks, &REF, &err);
  ck_assert_msg(st == OVL_OK, "reference: %s", err.msg);
  ck_assert_ptr_nonnull(REF);
}

/* The reference value of variable v on rank r. */
static const double *got_var(int r, int v) {
  const double *p = ovl_reference_fetched(REF, r, fetch_index(v));
  ck_assert_ptr_nonnull(p);
  return p;
}

static double init(int v, int r, int64_t i) {
  return ovl__var_init_value(&P->vars[v], r, i);
}

/* Compare n doubles exactly (NaN equal to NaN), naming the first
 * difference. */
static void assert_same(const double *got, const double *exp, size_t n,
                        const char *what, int rank) {
  for (size_t i = 0; i < n; i++) {
    if (got[i] == exp[i] || (isnan(got[i]) && isnan(exp[i])))
      continue;
    ck_abort_msg("%s rank %d [%zu]: got %.17g, expected %.17g", what, rank, i,
                 got[i], exp[i]);
  }
}

/* x stored in a float32 variable: the reference rounds every result once,
 * to the variable's dtype, as a device stores it. */
static double f32(double x) {
  return (double)(float)x;
}

/* x stored in a variable of dtype dt. */
static double stored(ovl_dtype dt, double x) {
  return dt == OVL_DTYPE_FLOAT32 ? f32(x) : x;
}

static double *xmalloc_doubles(size_t n) {
  double *p = malloc((n + 1) * sizeof *p);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* ------------------------------------------------------------------ */
/* Compute ops                                                         */
/* ------------------------------------------------------------------ */

/* Every compute op, on float32 (_i = 0) and float64 (_i = 1) inputs, over
 * more elements than one block of the interpreter. */
START_TEST(test_compute_ops) {
  ovl_dtype dt = _i == 0 ? OVL_DTYPE_FLOAT32 : OVL_DTYPE_FLOAT64;
  const int64_t n = 5000;
  int x = var_uniform("x", dt, n, 1, true);
  int y = var_uniform("y", dt, n, 2, true);
  int a = var_new("a", dt, n), s = var_new("s", dt, n);
  int d = var_new("d", dt, n), m = var_new("m", dt, n);
  int sc = var_new("sc", dt, n);
  int64_t rounded = 0;

  op_add("assign", a, 1, x);
  op_add("elementwise_add", s, 2, x, y);
  op_add("elementwise_sub", d, 2, x, y);
  op_add("elementwise_mul", m, 2, x, y);
  scale_op(sc, x, 3.0, -0.5);
  fetch(a);
  fetch(s);
  fetch(d);
  fetch(m);
  fetch(sc);
  run_ref(2);

  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < n; i++) {
      double xv = init(x, r, i), yv = init(y, r, i);
      ck_assert_double_eq(got_var(r, a)[i], xv);
      ck_assert_double_eq(got_var(r, s)[i], stored(dt, xv + yv));
      ck_assert_double_eq(got_var(r, d)[i], stored(dt, xv - yv));
      ck_assert_double_eq(got_var(r, m)[i], stored(dt, xv * yv));
      ck_assert_double_eq(got_var(r, sc)[i], stored(dt, 3.0 * xv + -0.5));
      if (got_var(r, m)[i] != xv * yv)
        rounded++;
    }
  }
  /* Each result is stored in the dtype: float32 products of 24-bit inputs
   * mostly need more than 24 bits, so most of them were rounded; float64
   * ones are exact double products. */
  if (dt == OVL_DTYPE_FLOAT32)
    ck_assert_int_gt(rounded, n);
  else
    ck_assert_int_eq(rounded, 0);
}
END_TEST

/* Outputs that are also inputs: out = f(out, ...), f(..., out), in place. */
START_TEST(test_aliasing) {
  const int64_t n = 3000;
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, n, 3, true);
  int y = var_uniform("y", OVL_DTYPE_FLOAT32, n, 4, false);

  op_add("elementwise_add", x, 2, x, x); /* x = 2x */
  op_add("elementwise_mul", x, 2, x, y); /* x = 2xy */
  scale_op(y, y, 2.0, 1.0);              /* y = 2y + 1 */
  op_add("elementwise_sub", x, 2, x, y); /* x = 2xy - (2y + 1) */
  op_add("assign", y, 1, y);             /* unchanged */
  op_add("elementwise_sub", y, 2, x, y); /* y = x - y, out is 2nd input */
  fetch(x);
  fetch(y);
  run_ref(2);

  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < n; i++) {
      double xv = init(x, r, i), yv = init(y, r, i);
      xv = xv + xv;
      xv = xv * yv;
      yv = f32(2.0 * yv + 1.0); /* y is float32 */
      xv = xv - yv;
      yv = f32(xv - yv);
      ck_assert_double_eq(got_var(r, x)[i], xv);
      ck_assert_double_eq(got_var(r, y)[i], yv);
    }
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Results stored in the dtype                                         */
/* ------------------------------------------------------------------ */

/* A float32 result is the double result rounded once to float; a float64
 * one is not rounded. What the next op reads is the stored value. */
START_TEST(test_float32_stored) {
  const int64_t n = 5;
  const double s = 1.0 + 0x1p-24, b = 0x1p-25;
  int x32 = var_fill("x32", OVL_DTYPE_FLOAT32, n, 1.0);
  int x64 = var_fill("x64", OVL_DTYPE_FLOAT64, n, 1.0);
  int t32 = var_new("t32", OVL_DTYPE_FLOAT32, n);
  int t64 = var_new("t64", OVL_DTYPE_FLOAT64, n);
  int n32 = var_new("n32", OVL_DTYPE_FLOAT32, n);
  int w64 = var_new("w64", OVL_DTYPE_FLOAT64, n);
  int diff = var_new("diff", OVL_DTYPE_FLOAT64, n);
  int once = var_new("once", OVL_DTYPE_FLOAT32, n);

  scale_op(t32, x32, 1.0 / 3.0, 0.0);       /* float32 from float32 */
  scale_op(t64, x64, 1.0 / 3.0, 0.0);       /* float64 from float64 */
  scale_op(n32, x64, 1.0 / 3.0, 0.0);       /* float32 from float64 */
  scale_op(w64, x32, 1.0 / 3.0, 0.0);       /* float64 from float32 */
  op_add("elementwise_sub", diff, 2, t32, t64); /* reads the stored t32 */
  scale_op(once, x32, s, b);                /* s * x + b, rounded once */
  fetch(t32);
  fetch(t64);
  fetch(n32);
  fetch(w64);
  fetch(diff);
  fetch(once);
  run_ref(2);

  ck_assert_double_ne(f32(1.0 / 3.0), 1.0 / 3.0);
  /* Rounding s * x and then s * x + b would give 1, not 1 + 2^-23. */
  ck_assert_double_eq(f32(f32(s * 1.0) + b), 1.0);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert_double_eq(got_var(r, t32)[i], (double)(float)(1.0 / 3.0));
      ck_assert_double_ne(got_var(r, t32)[i], 1.0 / 3.0);
      ck_assert_double_eq(got_var(r, t64)[i], 1.0 / 3.0);
      ck_assert_double_eq(got_var(r, n32)[i], f32(1.0 / 3.0));
      ck_assert_double_eq(got_var(r, w64)[i], 1.0 / 3.0);
      ck_assert_double_eq(got_var(r, diff)[i], f32(1.0 / 3.0) - 1.0 / 3.0);
      ck_assert_double_ne(got_var(r, diff)[i], 0.0);
      ck_assert_double_eq(got_var(r, once)[i], 1.0 + 0x1p-23);
    }
}
END_TEST

/* A float32 result beyond float32 range is +-inf, as on the device, and
 * stays inf once stored; the same ops on float64 variables stay finite.
 * Within one op the arithmetic is double: a float32 result computed from
 * values beyond float32 range is finite when it fits. */
START_TEST(test_float32_overflow) {
  const int64_t n = 3000; /* more than one block of the interpreter */
  int x32 = var_fill("x32", OVL_DTYPE_FLOAT32, n, 1e20);
  int x64 = var_fill("x64", OVL_DTYPE_FLOAT64, n, 1e20);
  int y32 = var_new("y32", OVL_DTYPE_FLOAT32, n);
  int y64 = var_new("y64", OVL_DTYPE_FLOAT64, n);
  int neg32 = var_new("neg32", OVL_DTYPE_FLOAT32, n);
  int back32 = var_new("back32", OVL_DTYPE_FLOAT32, n);
  int back64 = var_new("back64", OVL_DTYPE_FLOAT64, n);
  int fit32 = var_new("fit32", OVL_DTYPE_FLOAT32, n);
  int sq32 = var_new("sq32", OVL_DTYPE_FLOAT32, n);
  int big32 = var_fill("big32", OVL_DTYPE_FLOAT32, n, 2e38);
  int big64 = var_fill("big64", OVL_DTYPE_FLOAT64, n, 2e38);
  int sum32 = var_new("sum32", OVL_DTYPE_FLOAT32, n);

  scale_op(y32, x32, 1e30, 0.0);
  scale_op(y32, y32, 1e30, 0.0);
  scale_op(y64, x64, 1e30, 0.0);
  scale_op(y64, y64, 1e30, 0.0);
  scale_op(neg32, x32, -1e30, 0.0);
  scale_op(back32, x32, 1e30, 0.0);
  scale_op(back32, back32, 1e-30, 0.0);   /* inf * 1e-30 */
  scale_op(back64, x64, 1e30, 0.0);
  scale_op(back64, back64, 1e-30, 0.0);
  scale_op(fit32, y64, 1e-60, 0.0);       /* 1e80 * 1e-60 into float32 */
  op_add("elementwise_mul", sq32, 2, x32, x32);
  op_add("c_allreduce_sum", -1, 1, big32);
  op_add("c_allreduce_sum", sum32, 1, big64); /* float64 in, float32 out */
  op_add("c_allreduce_sum", -1, 1, big64);
  fetch(y32);
  fetch(y64);
  fetch(neg32);
  fetch(back32);
  fetch(back64);
  fetch(fit32);
  fetch(sq32);
  fetch(big32);
  fetch(big64);
  fetch(sum32);
  run_ref(2);

  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      double y = (1e20 * 1e30) * 1e30;
      ck_assert(isfinite(y));
      ck_assert_double_eq(got_var(r, y32)[i], INFINITY);
      ck_assert_double_eq(got_var(r, y64)[i], y);
      ck_assert_double_eq(got_var(r, neg32)[i], -INFINITY);
      ck_assert_double_eq(got_var(r, back32)[i], INFINITY);
      ck_assert_double_eq(got_var(r, back64)[i], (1e20 * 1e30) * 1e-30);
      ck_assert_double_eq(got_var(r, fit32)[i], f32(y * 1e-60));
      ck_assert(isfinite(got_var(r, fit32)[i]));
      ck_assert_double_eq(got_var(r, sq32)[i], INFINITY);
      ck_assert_double_eq(got_var(r, big32)[i], INFINITY);
      ck_assert_double_eq(got_var(r, sum32)[i], INFINITY);
      ck_assert_double_eq(got_var(r, big64)[i], 2e38 + 2e38);
    }
}
END_TEST

/* A float32 reduction over 4 ranks is done in double in rank order and
 * rounded once, at the end: not after each partial sum. The per-rank
 * inputs are float32 values, so their double sum is exact. */
START_TEST(test_float32_reduce_rounds_once) {
  const int nranks = 4;
  const int64_t n = 4096;
  int x = var_uniform("x", OVL_DTYPE_FLOAT32, n, 16, true);
  int o = var_new("o", OVL_DTYPE_FLOAT32, n);
  int rs = var_new("rs", OVL_DTYPE_FLOAT32, n / nranks);
  int64_t differ = 0;

  op_add("c_allreduce_sum", o, 1, x);
  op_add("c_reducescatter", rs, 1, x);
  fetch(o);
  fetch(rs);
  run_ref(nranks);

  for (int64_t i = 0; i < n; i++) {
    double once = init(x, 0, i), each = init(x, 0, i);
    for (int q = 1; q < nranks; q++) {
      once += init(x, q, i);
      each = f32(each + init(x, q, i));
    }
    once = f32(once);
    differ += once != each;
    for (int r = 0; r < nranks; r++) {
      ck_assert_double_eq(got_var(r, o)[i], once);
      if (i / (n / nranks) == r)
        ck_assert_double_eq(got_var(r, rs)[i % (n / nranks)], once);
    }
  }
  /* The inputs tell one rounding from a rounding per partial sum. */
  ck_assert_int_gt(differ, n / 10);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Collectives, for 1 to 4 ranks (_i)                                  */
/* ------------------------------------------------------------------ */

static double reduce2(ovl__redop op, double a, double b) {
  switch (op) {
  case OVL_RED_SUM:
    return a + b;
  case OVL_RED_PROD:
    return a * b;
  case OVL_RED_MAX:
    return fmax(a, b);
  case OVL_RED_MIN:
    return fmin(a, b);
  }
  return NAN;
}

START_TEST(test_allreduce) {
  static const char *const names[] = {"c_allreduce_sum", "c_allreduce_max",
                                      "c_allreduce_min", "c_allreduce_prod"};
  const int nranks = _i;
  const int64_t n = 3000;
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, n, 5, true);
  int o[4], c[4];
  char name[16];

  for (int k = 0; k < 4; k++) {
    snprintf(name, sizeof name, "o%d", k);
    o[k] = var_new(name, OVL_DTYPE_FLOAT32, n);
    snprintf(name, sizeof name, "c%d", k);
    c[k] = var_new(name, OVL_DTYPE_FLOAT32, n);
    op_add(names[k], o[k], 1, x);   /* out of place */
    op_add("assign", c[k], 1, x);
    op_add(names[k], -1, 1, c[k]);  /* in place */
    fetch(o[k]);
    fetch(c[k]);
  }
  fetch(x);
  run_ref(nranks);

  /* Reduced in double in rank order, then stored in float32 once. The
   * in-place copies c[k] reduce the float32 copies of x. */
  double *exp = xmalloc_doubles((size_t)n);
  double *exp_c = xmalloc_doubles((size_t)n);
  for (int k = 0; k < 4; k++) {
    ovl__redop op = ovl__opdef_find(names[k])->redop;
    for (int64_t i = 0; i < n; i++) {
      exp[i] = init(x, 0, i);
      exp_c[i] = f32(init(x, 0, i));
      for (int q = 1; q < nranks; q++) {
        exp[i] = reduce2(op, exp[i], init(x, q, i));
        exp_c[i] = reduce2(op, exp_c[i], f32(init(x, q, i)));
      }
      exp[i] = f32(exp[i]);
      exp_c[i] = f32(exp_c[i]);
    }
    for (int r = 0; r < nranks; r++) {
      assert_same(got_var(r, o[k]), exp, (size_t)n, names[k], r);
      assert_same(got_var(r, c[k]), exp_c, (size_t)n, names[k], r);
    }
  }
  /* The out-of-place input is left alone. */
  for (int r = 0; r < nranks; r++)
    for (int64_t i = 0; i < n; i++)
      ck_assert_double_eq(got_var(r, x)[i], init(x, r, i));
  free(exp);
  free(exp_c);
}
END_TEST

START_TEST(test_broadcast) {
  const int nranks = _i;
  const int64_t n = 2500;
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, n, 6, true);
  int o[4], c[4];
  char name[16];

  for (int root = 0; root < nranks; root++) {
    snprintf(name, sizeof name, "o%d", root);
    o[root] = var_new(name, OVL_DTYPE_FLOAT64, n);
    snprintf(name, sizeof name, "c%d", root);
    c[root] = var_new(name, OVL_DTYPE_FLOAT64, n);
    op_add("c_broadcast", o[root], 1, x)->root = root;
    op_add("assign", c[root], 1, x);
    op_add("c_broadcast", -1, 1, c[root])->root = root;
    fetch(o[root]);
    fetch(c[root]);
  }
  run_ref(nranks);

  for (int root = 0; root < nranks; root++)
    for (int r = 0; r < nranks; r++)
      for (int64_t i = 0; i < n; i++) {
        ck_assert_double_eq(got_var(r, o[root])[i], init(x, root, i));
        ck_assert_double_eq(got_var(r, c[root])[i], init(x, root, i));
      }
}
END_TEST

START_TEST(test_allgather) {
  const int nranks = _i;
  const int64_t n = 1500;
  int x = var_uniform("x", OVL_DTYPE_FLOAT32, n, 7, true);
  int g = var_new("g", OVL_DTYPE_FLOAT32, n * nranks);
  int h = var_new("h", OVL_DTYPE_FLOAT32, n * nranks);

  /* Local ops on both sides of the gather, so its neighbours are
   * evaluated block by block. */
  scale_op(x, x, 2.0, 0.0);
  op_add("c_allgather", g, 1, x);
  scale_op(h, g, 1.0, 1.0);
  if (nranks == 1)
    op_add("c_allgather", -1, 1, x); /* in place: a copy onto itself */
  fetch(g);
  fetch(h);
  fetch(x);
  run_ref(nranks);

  for (int r = 0; r < nranks; r++)
    for (int q = 0; q < nranks; q++)
      for (int64_t i = 0; i < n; i++) {
        double v = f32(2.0 * init(x, q, i));
        ck_assert_double_eq(got_var(r, g)[q * n + i], v);
        ck_assert_double_eq(got_var(r, h)[q * n + i], f32(v + 1.0));
      }
  for (int64_t i = 0; i < n; i++)
    ck_assert_double_eq(got_var(0, x)[i], f32(2.0 * init(x, 0, i)));
}
END_TEST

START_TEST(test_reducescatter) {
  const int nranks = _i;
  const int64_t m = 2100;
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, m * nranks, 8, true);
  int o = var_new("o", OVL_DTYPE_FLOAT64, m);
  int h = var_new("h", OVL_DTYPE_FLOAT64, m);

  op_add("c_reducescatter", o, 1, x);
  op_add("elementwise_add", h, 2, o, o);
  fetch(o);
  fetch(h);
  run_ref(nranks);

  for (int r = 0; r < nranks; r++)
    for (int64_t i = 0; i < m; i++) {
      double v = init(x, 0, r * m + i);
      for (int q = 1; q < nranks; q++)
        v += init(x, q, r * m + i);
      ck_assert_double_eq(got_var(r, o)[i], v);
      ck_assert_double_eq(got_var(r, h)[i], v + v);
    }
}
END_TEST

/* Variables of different sizes in one run of index-local ops: the
 * interpreter's blocks end inside the smaller ones. */
START_TEST(test_mixed_sizes) {
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, 3000, 13, true);
  int z = var_uniform("z", OVL_DTYPE_FLOAT64, 10000, 14, true);
  int w = var_fill("w", OVL_DTYPE_FLOAT32, 10, 0.5);

  scale_op(z, z, 2.0, 0.0);
  op_add("elementwise_add", x, 2, x, x);
  scale_op(w, w, 3.0, 1.0);
  op_add("c_allreduce_sum", -1, 1, z);
  op_add("c_broadcast", -1, 1, x)->root = 1;
  fetch(x);
  fetch(z);
  fetch(w);
  run_ref(2);
  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < 3000; i++)
      ck_assert_double_eq(got_var(r, x)[i], 2.0 * init(x, 1, i));
    for (int64_t i = 0; i < 10000; i++)
      ck_assert_double_eq(got_var(r, z)[i],
                          2.0 * init(z, 0, i) + 2.0 * init(z, 1, i));
    for (int64_t i = 0; i < 10; i++)
      ck_assert_double_eq(got_var(r, w)[i], f32(3.0 * 0.5 + 1.0));
  }
}
END_TEST

/* The interpreter skips a compute op whose output is overwritten before
 * anything reads it; every kind of read must keep the op. */
START_TEST(test_overwritten_outputs) {
  const int64_t n = 2000;
  int d = var_uniform("d", OVL_DTYPE_FLOAT64, n, 15, true);
  int e = var_new("e", OVL_DTYPE_FLOAT64, n);
  int f = var_new("f", OVL_DTYPE_FLOAT64, n);
  int g = var_new("g", OVL_DTYPE_FLOAT64, n);
  int h = var_new("h", OVL_DTYPE_FLOAT64, n);
  int k = var_new("k", OVL_DTYPE_FLOAT64, n);
  int p = var_new("p", OVL_DTYPE_FLOAT64, n);

  scale_op(e, d, 2.0, 0.0);
  op_add("assign", f, 1, e);               /* read by a compute op */
  scale_op(e, d, 3.0, 0.0);
  scale_op(g, d, 5.0, 0.0);
  scale_op(g, g, 7.0, 0.0);                /* read in place */
  scale_op(h, d, 2.0, 0.0);
  op_add("c_allreduce_sum", k, 1, h);      /* read by a collective */
  scale_op(h, d, 4.0, 0.0);
  scale_op(p, d, 2.0, 0.0);
  fetch(p);                                /* read by a fetch */
  scale_op(p, d, 3.0, 0.0);
  for (int i = 0; i < 3; i++)
    scale_op(e, d, 11.0 + i, 0.0);         /* only the last counts */
  fetch(e);
  fetch(f);
  fetch(g);
  fetch(h);
  fetch(k);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      double dv = init(d, r, i);
      ck_assert_double_eq(got_var(r, e)[i], 13.0 * dv);
      ck_assert_double_eq(got_var(r, f)[i], 2.0 * dv);
      ck_assert_double_eq(got_var(r, g)[i], 7.0 * (5.0 * dv));
      ck_assert_double_eq(got_var(r, h)[i], 4.0 * dv);
      ck_assert_double_eq(got_var(r, k)[i],
                          2.0 * init(d, 0, i) + 2.0 * init(d, 1, i));
      ck_assert_double_eq(got_var(r, p)[i], 2.0 * dv);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Inputs                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_per_rank_inputs) {
  const int64_t n = 1000;
  int u = var_uniform("u", OVL_DTYPE_FLOAT32, n, 9, true);
  int w = var_uniform("w", OVL_DTYPE_FLOAT32, n, 9, false);
  int same = 0;

  fetch(u);
  fetch(w);
  run_ref(3);

  for (int r = 0; r < 3; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert_double_eq(got_var(r, u)[i], init(u, r, i));
      ck_assert_double_eq(got_var(r, w)[i], init(w, r, i));
    }
  for (int r = 1; r < 3; r++) {
    ck_assert_mem_eq(got_var(r, w), got_var(0, w), (size_t)n * 8);
    for (int64_t i = 0; i < n; i++)
      same += got_var(r, u)[i] == got_var(0, u)[i];
  }
  ck_assert_int_lt(same, 5);
}
END_TEST

START_TEST(test_init_deterministic) {
  const int64_t n = 4000;
  int a = var_uniform("a", OVL_DTYPE_FLOAT64, n, 42, false);
  int b = var_uniform("b", OVL_DTYPE_FLOAT64, n, 43, false);
  int f = var_fill("f", OVL_DTYPE_FLOAT32, n, 0.1);
  ovl_reference *again = NULL;
  ovl_error err = {0};
  int same = 0;

  fetch(a);
  fetch(b);
  fetch(f);
  run_ref(2);
  ck_assert_int_eq(ovl_reference_compute(P, 2, &again, &err), OVL_OK);
  for (int r = 0; r < 2; r++)
    for (int v = 0; v < 3; v++)
      ck_assert_mem_eq(ovl_reference_fetched(REF, r, (size_t)v),
                       ovl_reference_fetched(again, r, (size_t)v),
                       (size_t)n * 8);
  ovl_reference_free(again);

  for (int64_t i = 0; i < n; i++) {
    ck_assert(got_var(0, a)[i] >= 0.0 && got_var(0, a)[i] < 1.0);
    same += got_var(0, a)[i] == got_var(0, b)[i];
    /* A float32 fill is rounded to float32 once, at initialisation. */
    ck_assert_double_eq(got_var(1, f)[i], (double)0.1f);
  }
  ck_assert_int_lt(same, 5);
  ck_assert_double_ne((double)0.1f, 0.1);
}
END_TEST

/* Variables not declared by data() start as NaN, like the poisoned device
 * buffers, and NaN flows through the ops. */
START_TEST(test_unwritten_is_nan) {
  const int64_t n = 3000;
  int t = var_new("t", OVL_DTYPE_FLOAT32, n);
  int x = var_fill("x", OVL_DTYPE_FLOAT32, n, 1.0);
  int s = var_new("s", OVL_DTYPE_FLOAT32, n);

  op_add("elementwise_add", s, 2, t, x);
  fetch(t);
  fetch(s);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert(isnan(got_var(r, t)[i]));
      ck_assert(isnan(got_var(r, s)[i]));
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The seed program (DESIGN.md §1), small                              */
/* ------------------------------------------------------------------ */

static int seed_out, seed_c, seed_a;

static void build_seed(int64_t numel) {
  int a = var_uniform("a", OVL_DTYPE_FLOAT32, numel, 0, false);
  int b = var_new("b", OVL_DTYPE_FLOAT32, numel);
  int c = var_new("c", OVL_DTYPE_FLOAT32, numel);
  int d = var_new("d", OVL_DTYPE_FLOAT32, numel);
  int e = var_new("e", OVL_DTYPE_FLOAT32, numel);
  int out = var_new("out", OVL_DTYPE_FLOAT32, numel);

  op_add("assign", b, 1, a);
  op_add("elementwise_add", c, 2, a, b);
  op_add("elementwise_add", d, 2, a, b);
  op_add("c_wait_compute", -1, 1, c);
  for (int i = 0; i < 64; i++) {
    op_add("c_allreduce_sum", -1, 1, c);
    for (int j = 0; j < 10; j++)
      scale_op(e, d, 2.0, 0.0);
    op_add("assign", d, 1, e);
  }
  op_add("c_wait_comm", -1, 1, c);
  op_add("elementwise_sub", out, 2, c, d);
  fetch(out);
  fetch(c);
  seed_out = out;
  seed_c = c;
  seed_a = a;
}

START_TEST(test_seed_two_ranks_zero) {
  const int64_t n = 1000 * 10;
  build_seed(n);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert_double_eq(got_var(r, seed_out)[i], 0.0);
      /* c = (a + a) * 2^64: 64 allreduces over 2 ranks, exact in
       * float32. */
      ck_assert_double_eq(got_var(r, seed_c)[i],
                          ldexp(2.0 * init(seed_a, r, i), 64));
    }
}
END_TEST

/* With 3 ranks c grows by 3 per allreduce and d by 2: out is not 0. */
START_TEST(test_seed_three_ranks_nonzero) {
  const int64_t n = 1000 * 10;
  int nonzero = 0;
  build_seed(n);
  run_ref(3);
  for (int64_t i = 0; i < n; i++)
    nonzero += got_var(2, seed_out)[i] != 0.0;
  ck_assert_int_gt(nonzero, n - 5);
}
END_TEST

/* With 4 ranks c = (a + a) * 4^64 = 2a * 2^128: stored in float32 it
 * overflows to inf wherever a >= 0.5, as on the device, and so does
 * out = c - d; below 0.5 it is exact (2a <= 1 - 2^-24). */
START_TEST(test_seed_four_ranks_overflow) {
  const int64_t n = 1000 * 10;
  int64_t inf = 0;
  build_seed(n);
  run_ref(4);
  for (int r = 0; r < 4; r++)
    for (int64_t i = 0; i < n; i++) {
      double av = init(seed_a, r, i);
      double c = got_var(r, seed_c)[i], out = got_var(r, seed_out)[i];
      if (av >= 0.5) {
        ck_assert_double_eq(c, INFINITY);
        ck_assert_double_eq(out, INFINITY);
        inf++;
      } else {
        ck_assert_double_eq(c, ldexp(2.0 * av, 128));
        ck_assert_double_eq(out, f32(c - ldexp(2.0 * av, 64)));
        ck_assert(isfinite(out));
      }
    }
  /* About half of the elements, on every rank. */
  ck_assert_int_gt(inf, 4 * n / 3);
  ck_assert_int_lt(inf, 4 * 2 * n / 3);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fetch                                                               */
/* ------------------------------------------------------------------ */

/* A fetch is a snapshot: later writes do not show in it. */
START_TEST(test_fetch_snapshot) {
  const int64_t n = 5000;
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, n, 10, true);
  fetch(x);
  scale_op(x, x, 2.0, 0.0);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++)
      ck_assert_double_eq(got_var(r, x)[i], init(x, r, i));
}
END_TEST

/* The last fetch of a variable wins. */
START_TEST(test_fetch_last_wins) {
  const int64_t n = 5000;
  int x = var_uniform("x", OVL_DTYPE_FLOAT64, n, 11, true);
  int y = var_fill("y", OVL_DTYPE_FLOAT64, 10, 5.0);
  fetch(x);
  scale_op(x, x, 2.0, 0.0);
  fetch(x);
  fetch(y);
  scale_op(x, x, 3.0, 0.0);
  ck_assert_uint_eq(P->nfetch, 2);
  run_ref(2);
  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < n; i++)
      ck_assert_double_eq(got_var(r, x)[i], 2.0 * init(x, r, i));
    ck_assert_double_eq(got_var(r, y)[9], 5.0);
  }
}
END_TEST

/* One fetch op of several variables. */
START_TEST(test_fetch_many) {
  int x = var_fill("x", OVL_DTYPE_FLOAT32, 7, 1.5);
  int y = var_fill("y", OVL_DTYPE_FLOAT64, 3000, -2.0);
  op_add("fetch", -1, 2, x, y);
  P->fetch = grow(NULL, 2, sizeof *P->fetch);
  P->fetch[0] = x;
  P->fetch[1] = y;
  P->nfetch = 2;
  run_ref(1);
  ck_assert_double_eq(got_var(0, x)[6], 1.5);
  ck_assert_double_eq(got_var(0, y)[2999], -2.0);
}
END_TEST

/* An empty variable is still fetched: its snapshot exists. */
START_TEST(test_fetch_empty) {
  int e = var_new("e", OVL_DTYPE_FLOAT32, 0);
  fetch(e);
  run_ref(2);
  ck_assert_ptr_nonnull(ovl_reference_fetched(REF, 0, 0));
  ck_assert_ptr_nonnull(ovl_reference_fetched(REF, 1, 0));
}
END_TEST

START_TEST(test_fetched_out_of_range) {
  int x = var_fill("x", OVL_DTYPE_FLOAT32, 4, 1.0);
  int y = var_fill("y", OVL_DTYPE_FLOAT32, 4, 2.0);
  fetch(x);
  /* Listed but never reached by a fetch op: no value. */
  P->fetch = grow(P->fetch, 2, sizeof *P->fetch);
  P->fetch[P->nfetch++] = y;
  run_ref(2);
  ck_assert_ptr_nonnull(ovl_reference_fetched(REF, 1, 0));
  ck_assert_ptr_null(ovl_reference_fetched(REF, 0, 1));
  ck_assert_ptr_null(ovl_reference_fetched(REF, 1, 1));
  ck_assert_ptr_null(ovl_reference_fetched(REF, -1, 0));
  ck_assert_ptr_null(ovl_reference_fetched(REF, 2, 0));
  ck_assert_ptr_null(ovl_reference_fetched(REF, 0, 2));
  ck_assert_ptr_null(ovl_reference_fetched(NULL, 0, 0));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static ovl_status ref_status(int nranks, ovl_error *err) {
  ovl_reference *ref = NULL;
  ovl_status st = ovl_reference_compute(P, nranks, &ref, err);
  if (st == OVL_OK)
    ovl_reference_free(ref);
  else
    ck_assert_ptr_null(ref);
  return st;
}

START_TEST(test_bad_ranks) {
  ovl_error err = {0};
  int x = var_fill("x", OVL_DTYPE_FLOAT32, 4, 1.0);
  fetch(x);
  ck_assert_int_eq(ref_status(0, &err), OVL_EINVAL);
  ck_assert_int_eq(ref_status(OVL_MAX_RANKS + 1, &err), OVL_EINVAL);
  ck_assert_int_eq(ref_status(OVL_MAX_RANKS, &err), OVL_OK);
}
END_TEST

START_TEST(test_bad_shapes) {
  ovl_error err = {0};
  int x = var_fill("x", OVL_DTYPE_FLOAT32, 4, 1.0);
  int y = var_fill("y", OVL_DTYPE_FLOAT32, 5, 1.0);
  int g = var_new("g", OVL_DTYPE_FLOAT32, 12);

  op_add("elementwise_add", x, 2, x, y);
  ck_assert_int_eq(ref_status(2, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "<program>:1:1: elementwise_add: reference: "
                            "operands differ in size");

  P->nops = 0;
  op_add("c_allgather", g, 1, x); /* 12 is 3 x 4, not 2 x 4 */
  ck_assert_int_eq(ref_status(2, &err), OVL_EINVAL);
  ck_assert_int_eq(ref_status(3, &err), OVL_OK);

  P->nops = 0;
  op_add("c_reducescatter", x, 1, g);
  ck_assert_int_eq(ref_status(2, &err), OVL_EINVAL);
  ck_assert_int_eq(ref_status(3, &err), OVL_OK);

  P->nops = 0;
  op_add("c_broadcast", -1, 1, x)->root = 2;
  ck_assert_int_eq(ref_status(2, &err), OVL_EINVAL);
  ck_assert_int_eq(ref_status(3, &err), OVL_OK);

  P->nops = 0;
  op_add("fetch", -1, 1, x); /* not in the fetch list */
  ck_assert_int_eq(ref_status(2, &err), OVL_EINVAL);
}
END_TEST

START_TEST(test_out_of_memory) {
  ovl_error err = {0};
  int small = var_fill("small", OVL_DTYPE_FLOAT32, 1000, 1.0);
  /* 2^47 doubles are 1 PiB: malloc fails. */
  int huge = var_new("huge", OVL_DTYPE_FLOAT32, (int64_t)1 << 47);
  fetch(small);
  op_add("assign", huge, 1, huge);
  ck_assert_int_eq(ref_status(2, &err), OVL_ENOMEM);
  ck_assert_ptr_nonnull(strstr(err.msg, "'huge'"));

  /* More bytes than a size_t holds: refused without calling malloc. */
  P->vars[huge].numel = INT64_MAX / 2;
  ck_assert_int_eq(ref_status(2, &err), OVL_ENOMEM);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The check                                                           */
/* ------------------------------------------------------------------ */

/* Values under test: got[rank][fetch index]. */
typedef struct {
  const double *got[4][8];
} got_table;

static const double *table_got(const void *ctx, int rank, size_t i) {
  return ((const got_table *)ctx)->got[rank][i];
}

static ovl_status check(const got_table *t, int nranks, double rtol,
                        double atol, ovl_check *out) {
  ovl_error err = {0};
  ovl_status st = ovl__check_arrays(P, nranks, table_got, t, REF, rtol, atol,
                                    out, &err);
  ck_assert_msg(st == OVL_OK, "check: %s", err.msg);
  return st;
}

/* Exactly at atol + rtol * |ref| matches, one ulp beyond does not; for
 * three (atol, rtol) pairs (_i), on both sides of a positive and a
 * negative reference. Tolerances stay under |ref| / 2, so the differences
 * are exact. */
START_TEST(test_check_tolerance_boundary) {
  static const double tols[3][2] = {{0.25, 0.25}, {1.0, 0.0}, {0.0, 0.25}};
  const double atol = tols[_i][0], rtol = tols[_i][1];
  const double refs[2] = {4.0, -8.0};
  int v[2] = {var_fill("p", OVL_DTYPE_FLOAT64, 4, refs[0]),
              var_fill("n", OVL_DTYPE_FLOAT64, 4, refs[1])};
  double got[2][4];
  got_table t = {0};
  ovl_check c;

  fetch(v[0]);
  fetch(v[1]);
  run_ref(1);
  for (int k = 0; k < 2; k++) {
    double e = refs[k], tol = atol + rtol * fabs(e);
    got[k][0] = e + tol;
    got[k][1] = e - tol;
    got[k][2] = nextafter(e + tol, INFINITY);
    got[k][3] = nextafter(e - tol, -INFINITY);
    t.got[0][k] = got[k];
  }
  check(&t, 1, rtol, atol, &c);
  ck_assert_double_eq(c.rtol, rtol);
  ck_assert_double_eq(c.atol, atol);
  ck_assert_int_eq(c.checked, 8);
  ck_assert_int_eq(c.mismatched, 4);
  ck_assert_uint_eq(c.nmismatch, 2);
  for (int k = 0; k < 2; k++) {
    ck_assert_int_eq(c.mismatch[k].count, 2);
    ck_assert_int_eq(c.mismatch[k].first_index, 2);
    ck_assert_double_eq(c.mismatch[k].got, got[k][2]);
    ck_assert_double_eq(c.mismatch[k].expected, refs[k]);
  }
  ovl_check_release(&c);
}
END_TEST

START_TEST(test_check_nan) {
  int u = var_new("u", OVL_DTYPE_FLOAT64, 3); /* never written: NaN */
  int e = var_fill("e", OVL_DTYPE_FLOAT64, 3, 1.0);
  const double gu[3] = {NAN, 0.0, INFINITY};
  const double ge[3] = {NAN, 1.0, -NAN};
  got_table t = {.got = {{gu, ge}}};
  ovl_check c;

  fetch(u);
  fetch(e);
  run_ref(1);
  /* Even an infinite tolerance does not let NaN match a number. */
  for (int pass = 0; pass < 2; pass++) {
    check(&t, 1, 0.0, pass == 0 ? 1e-3 : INFINITY, &c);
    ck_assert_int_eq(c.mismatched, 4);
    ck_assert_uint_eq(c.nmismatch, 2);
    ck_assert_int_eq(c.mismatch[0].count, 2);
    ck_assert_int_eq(c.mismatch[0].first_index, 1);
    ck_assert_double_eq(c.mismatch[0].got, 0.0);
    ck_assert(isnan(c.mismatch[0].expected));
    ck_assert_int_eq(c.mismatch[1].count, 2);
    ck_assert_int_eq(c.mismatch[1].first_index, 0);
    ck_assert(isnan(c.mismatch[1].got));
    ck_assert_double_eq(c.mismatch[1].expected, 1.0);
    ovl_check_release(&c);
  }
}
END_TEST

START_TEST(test_check_inf) {
  int pinf = var_fill("pinf", OVL_DTYPE_FLOAT64, 4, INFINITY);
  int ninf = var_fill("ninf", OVL_DTYPE_FLOAT64, 4, -INFINITY);
  int big = var_fill("big", OVL_DTYPE_FLOAT64, 2, 1e308);
  int one = var_fill("one", OVL_DTYPE_FLOAT64, 2, 1.0);
  const double gp[4] = {INFINITY, -INFINITY, 1e308, NAN};
  const double gn[4] = {-INFINITY, INFINITY, -1e308, -INFINITY};
  const double gb[2] = {INFINITY, 1e307};
  const double go[2] = {INFINITY, -20.0};
  got_table t = {.got = {{gp, gn, gb, go}}};
  ovl_check c;

  fetch(pinf);
  fetch(ninf);
  fetch(big);
  fetch(one);
  run_ref(1);

  /* An infinite atol: infinities still match only themselves. */
  check(&t, 1, 0.0, INFINITY, &c);
  ck_assert_uint_eq(c.nmismatch, 4);
  ck_assert_int_eq(c.mismatch[0].count, 3);
  ck_assert_int_eq(c.mismatch[0].first_index, 1);
  ck_assert_double_eq(c.mismatch[0].got, -INFINITY);
  ck_assert_double_eq(c.mismatch[0].expected, INFINITY);
  ck_assert_int_eq(c.mismatch[1].count, 2);
  ck_assert_int_eq(c.mismatch[1].first_index, 1);
  ck_assert_int_eq(c.mismatch[2].count, 1);
  ck_assert_int_eq(c.mismatch[2].first_index, 0);
  ck_assert_int_eq(c.mismatch[3].count, 1);
  ck_assert_int_eq(c.mismatch[3].first_index, 0);
  ck_assert_int_eq(c.mismatched, 7);
  ovl_check_release(&c);

  /* rtol * 1e308 overflows to infinity: inf still does not match 1e308,
   * 1e307 does; -20 is now more than 10 * 1 from 1. */
  check(&t, 1, 10.0, 0.0, &c);
  ck_assert_uint_eq(c.nmismatch, 4);
  ck_assert_str_eq(c.mismatch[2].var, "big");
  ck_assert_int_eq(c.mismatch[2].count, 1);
  ck_assert_double_eq(c.mismatch[2].got, INFINITY);
  ck_assert_int_eq(c.mismatch[3].count, 2);
  ck_assert_int_eq(c.mismatched, 8);
  ovl_check_release(&c);
}
END_TEST

/* Three ranks, two variables; got starts as a copy of the reference. */
static double *check_got[3][2];
static int check_x, check_y;

static void build_check_case(got_table *t) {
  check_x = var_uniform("x", OVL_DTYPE_FLOAT32, 10, 12, true);
  check_y = var_fill("y", OVL_DTYPE_FLOAT64, 7, 2.0);
  fetch(check_x);
  fetch(check_y);
  run_ref(3);
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 2; k++) {
      size_t n = k == 0 ? 10 : 7;
      check_got[r][k] = xmalloc_doubles(n);
      memcpy(check_got[r][k], ovl_reference_fetched(REF, r, (size_t)k),
             n * sizeof(double));
      t->got[r][k] = check_got[r][k];
    }
}

static void free_check_case(void) {
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 2; k++)
      free(check_got[r][k]);
}

START_TEST(test_check_all_match) {
  got_table t = {0};
  ovl_check c;
  build_check_case(&t);
  check(&t, 3, 0.0, 0.0, &c);
  ck_assert_int_eq(c.checked, 3 * 17);
  ck_assert_int_eq(c.mismatched, 0);
  ck_assert_uint_eq(c.nmismatch, 0);
  ck_assert_ptr_null(c.mismatch);
  ovl_check_release(&c);
  free_check_case();
}
END_TEST

START_TEST(test_check_entries) {
  got_table t = {0};
  ovl_check c;
  build_check_case(&t);
  check_got[1][1][3] = 2.5;
  check_got[1][1][5] = -1.0;
  check_got[2][0][9] += 1.0;
  check(&t, 3, 1e-6, 0.0, &c);
  ck_assert_int_eq(c.checked, 3 * 17);
  ck_assert_int_eq(c.mismatched, 3);
  ck_assert_uint_eq(c.nmismatch, 2);

  ck_assert_int_eq(c.mismatch[0].rank, 1);
  ck_assert_uint_eq(c.mismatch[0].fetch_index, 1);
  ck_assert_ptr_eq(c.mismatch[0].var, P->vars[check_y].name);
  ck_assert_int_eq(c.mismatch[0].count, 2);
  ck_assert_int_eq(c.mismatch[0].numel, 7);
  ck_assert_int_eq(c.mismatch[0].first_index, 3);
  ck_assert_double_eq(c.mismatch[0].got, 2.5);
  ck_assert_double_eq(c.mismatch[0].expected, 2.0);

  ck_assert_int_eq(c.mismatch[1].rank, 2);
  ck_assert_uint_eq(c.mismatch[1].fetch_index, 0);
  ck_assert_str_eq(c.mismatch[1].var, "x");
  ck_assert_int_eq(c.mismatch[1].count, 1);
  ck_assert_int_eq(c.mismatch[1].numel, 10);
  ck_assert_int_eq(c.mismatch[1].first_index, 9);
  ck_assert_double_eq(c.mismatch[1].expected, init(check_x, 2, 9));
  ck_assert_double_eq(c.mismatch[1].got, init(check_x, 2, 9) + 1.0);

  ovl_check_release(&c);
  ck_assert_ptr_null(c.mismatch);
  ck_assert_uint_eq(c.nmismatch, 0);
  ovl_check_release(&c); /* twice is harmless */
  ovl_check_release(NULL);
  free_check_case();
}
END_TEST

/* A variable the run never fetched is wrong as a whole. */
START_TEST(test_check_never_fetched) {
  got_table t = {0};
  ovl_check c;
  build_check_case(&t);
  t.got[0][1] = NULL;
  check(&t, 3, 0.0, 0.0, &c);
  ck_assert_int_eq(c.checked, 3 * 17);
  ck_assert_int_eq(c.mismatched, 7);
  ck_assert_uint_eq(c.nmismatch, 1);
  ck_assert_int_eq(c.mismatch[0].rank, 0);
  ck_assert_uint_eq(c.mismatch[0].fetch_index, 1);
  ck_assert_int_eq(c.mismatch[0].count, 7);
  ck_assert_int_eq(c.mismatch[0].first_index, 0);
  ck_assert(isnan(c.mismatch[0].got));
  ck_assert_double_eq(c.mismatch[0].expected, 2.0);
  ovl_check_release(&c);
  free_check_case();
}
END_TEST

/* Checking only the first ranks counts only theirs. */
START_TEST(test_check_counts_ranks) {
  got_table t = {0};
  ovl_check c;
  build_check_case(&t);
  check_got[2][0][0] = -7.0; /* outside the ranks checked */
  check(&t, 2, 0.0, 0.0, &c);
  ck_assert_int_eq(c.checked, 2 * 17);
  ck_assert_uint_eq(c.nmismatch, 0);
  ovl_check_release(&c);
  free_check_case();
}
END_TEST

START_TEST(test_check_bad_args) {
  got_table t = {0};
  ovl_check c;
  ovl_error err = {0};
  build_check_case(&t);
  ck_assert_int_eq(ovl__check_arrays(P, 3, table_got, &t, REF, -1e-6, 0.0,
                                     &c, &err),
                   OVL_EINVAL);
  ck_assert_ptr_null(c.mismatch);
  ck_assert_int_eq(ovl__check_arrays(P, 3, table_got, &t, REF, 0.0, NAN, &c,
                                     &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__check_arrays(P, 0, table_got, &t, REF, 0.0, 0.0, &c,
                                     &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__check_arrays(P, 3, table_got, &t, NULL, 0.0, 0.0,
                                     &c, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__check_arrays(P, 3, NULL, &t, REF, 0.0, 0.0, &c,
                                     &err),
                   OVL_EINVAL);
  /* The reference has 3 ranks; a 4th has no value to compare with. */
  t.got[3][0] = check_got[0][0];
  t.got[3][1] = check_got[0][1];
  ck_assert_int_eq(ovl__check_arrays(P, 4, table_got, &t, REF, 0.0, 0.0, &c,
                                     &err),
                   OVL_EINVAL);
  ck_assert_ptr_null(c.mismatch);
  ck_assert_ptr_nonnull(strstr(err.msg, "rank 3"));
  ovl_check_release(&c);
  free_check_case();
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *reference_suite(void) {
  Suite *s = suite_create("reference");
  TCase *tc = tcase_create("reference");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_compute_ops, 0, 2);
  tcase_add_test(tc, test_aliasing);
  tcase_add_test(tc, test_float32_stored);
  tcase_add_test(tc, test_float32_overflow);
  tcase_add_test(tc, test_float32_reduce_rounds_once);
  tcase_add_loop_test(tc, test_allreduce, 1, 5);
  tcase_add_loop_test(tc, test_broadcast, 1, 5);
  tcase_add_loop_test(tc, test_allgather, 1, 5);
  tcase_add_loop_test(tc, test_reducescatter, 1, 5);
  tcase_add_test(tc, test_mixed_sizes);
  tcase_add_test(tc, test_overwritten_outputs);
  tcase_add_test(tc, test_per_rank_inputs);
  tcase_add_test(tc, test_init_deterministic);
  tcase_add_test(tc, test_unwritten_is_nan);
  tcase_add_test(tc, test_seed_two_ranks_zero);
  tcase_add_test(tc, test_seed_three_ranks_nonzero);
  tcase_add_test(tc, test_seed_four_ranks_overflow);
  tcase_add_test(tc, test_fetch_snapshot);
  tcase_add_test(tc, test_fetch_last_wins);
  tcase_add_test(tc, test_fetch_many);
  tcase_add_test(tc, test_fetch_empty);
  tcase_add_test(tc, test_fetched_out_of_range);
  tcase_add_test(tc, test_bad_ranks);
  tcase_add_test(tc, test_bad_shapes);
  tcase_add_test(tc, test_out_of_memory);
  suite_add_tcase(s, tc);

  tc = tcase_create("check");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, test_check_tolerance_boundary, 0, 3);
  tcase_add_test(tc, test_check_nan);
  tcase_add_test(tc, test_check_inf);
  tcase_add_test(tc, test_check_all_match);
  tcase_add_test(tc, test_check_entries);
  tcase_add_test(tc, test_check_never_fetched);
  tcase_add_test(tc, test_check_counts_ranks);
  tcase_add_test(tc, test_check_bad_args);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(reference_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
