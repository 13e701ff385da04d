/*
 * Tests of the float64 reference (src/check/reference.c) and of the numeric
 * check (src/check/check.c). Every program is parsed from schedule text and
 * looked at through the public API (include/ovl.h), so these tests do not
 * depend on how the library represents ops inside. Two internal functions
 * remain: ovl__var_init_value, to predict the inputs data() generates, and
 * ovl__check_arrays, to test the check with plain arrays instead of a run.
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"

#ifdef __SANITIZE_ADDRESS__
/* The out-of-memory test needs malloc to return NULL for a huge request
 * instead of ASan aborting the process. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1";
}
#endif

/* The most ranks the library takes (docs/OVERLAP_SIM.md: --ranks from 1 to 64). */
#define MAX_RANKS 64

/* ------------------------------------------------------------------ */
/* Schedules                                                           */
/* ------------------------------------------------------------------ */

static ovl_program *P;      /* the program of the current test */
static ovl_reference *REF;  /* its reference, freed by the fixture */

static void setup(void) {
  P = NULL;
  REF = NULL;
}

static void teardown(void) {
  ovl_reference_free(REF);
  REF = NULL;
  ovl_program_free(P);
  P = NULL;
}

/* Schedule text being written: put() appends a printf-formatted piece. */
typedef struct {
  char s[16384];
  size_t n;
} sched_text;

static void put(sched_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(sched_text *t, const char *fmt, ...) {
  va_list ap;
  int k;
  va_start(ap, fmt);
  k = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
  va_end(ap);
  ck_assert_msg(k >= 0 && (size_t)k < sizeof t->s - t->n,
                "schedule text too long");
  t->n += (size_t)k;
}

/* Parse `text` for `nranks` ranks with `ndefines` -D NAME=VALUE strings;
 * it must parse. */
static ovl_program *parse_with(const char *text, int nranks,
                               const char *const *defines, size_t ndefines) {
  ovl_parse_opts po = {.size = sizeof po,
                       .defines = defines,
                       .ndefines = ndefines,
                       .nranks = nranks};
  ovl_error err = {0};
  ovl_program *p = NULL;
  ovl_status st =
      ovl_program_parse(text, strlen(text), "t.sched", &po, &p, &err);
  ck_assert_msg(st == OVL_OK, "parse: %s", err.msg);
  ck_assert_ptr_nonnull(p);
  return p;
}

static ovl_program *parse(const char *text, int nranks) {
  return parse_with(text, nranks, NULL, 0);
}

/* P = the schedule, parsed for `nranks` ranks. */
static void load(const char *text, int nranks) {
  P = parse(text, nranks);
}

/* The same with one -D define. */
static void load_defined(const char *text, int nranks, const char *define) {
  P = parse_with(text, nranks, &define, 1);
}

/* Compute REF for P on `nranks` ranks; it must succeed. */
static void run_ref(int nranks) {
  ovl_error err = {0};
  ovl_status st = ovl_reference_compute(P, nranks, &REF, &err);
  ck_assert_msg(st == OVL_OK, "reference: %s", err.msg);
  ck_assert_ptr_nonnull(REF);
}

/* The fetch index of variable `name` in P. */
static size_t fetch_index(const char *name) {
  size_t n = ovl_program_fetch_count(P);
  for (size_t i = 0; i < n; i++) {
    ovl_var_info vi;
    ovl_program_fetch_info(P, i, &vi);
    if (strcmp(vi.name, name) == 0)
      return i;
  }
  ck_abort_msg("variable '%s' is not fetched", name);
  return 0;
}

/* The dtype of fetched variable `name`. */
static ovl_dtype fetched_dtype(const char *name) {
  ovl_var_info vi;
  ovl_program_fetch_info(P, fetch_index(name), &vi);
  return vi.dtype;
}

/* The reference value of fetched variable `name` on rank r. */
static const double *got_var(int r, const char *name) {
  const double *p = ovl_reference_fetched(REF, r, fetch_index(name));
  ck_assert_msg(p != NULL, "no value of '%s' on rank %d", name, r);
  return p;
}

/* Element i on rank r of data(shape=..., dtype=dt, init=uniform, seed=seed,
 * per_rank=per_rank): the library's input generator, which the public API
 * does not expose. */
static double uniform(ovl_dtype dt, uint64_t seed, bool per_rank, int r,
                      int64_t i) {
  ovl__var v;
  memset(&v, 0, sizeof v);
  v.dtype = dt;
  v.init = OVL_INIT_UNIFORM;
  v.seed = seed;
  v.per_rank = per_rank;
  return ovl__var_init_value(&v, r, i);
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

/* The dtype a loop test (_i = 0, 1) runs with, and the -D that selects it
 * for a schedule that declares `param dt`. */
static ovl_dtype loop_dtype(int i) {
  return i == 0 ? OVL_DTYPE_FLOAT32 : OVL_DTYPE_FLOAT64;
}

static const char *dtype_define(ovl_dtype dt) {
  return dt == OVL_DTYPE_FLOAT32 ? "dt=float32" : "dt=float64";
}

/* ------------------------------------------------------------------ */
/* Compute ops                                                         */
/* ------------------------------------------------------------------ */

/* Every compute op, on float32 (_i = 0) and float64 (_i = 1) inputs (-D
 * dt=...), over more elements than one block of the interpreter. */
START_TEST(test_compute_ops) {
  const ovl_dtype dt = loop_dtype(_i);
  const int64_t n = 5000;
  int64_t rounded = 0;

  load_defined(
      "param dt = float32\n"
      "x = data(shape=[5000], dtype=dt, init=uniform, seed=1, per_rank=true)\n"
      "y = data(shape=[5000], dtype=dt, init=uniform, seed=2, per_rank=true)\n"
      "a = assign(x)\n"
      "s = elementwise_add(x, y)\n"
      "d = elementwise_sub(x, y)\n"
      "m = elementwise_mul(x, y)\n"
      "sc = scale(x, scale=3.0, bias=-0.5)\n"
      "fetch(a)\n"
      "fetch(s)\n"
      "fetch(d)\n"
      "fetch(m)\n"
      "fetch(sc)\n",
      2, dtype_define(dt));
  ck_assert_int_eq(fetched_dtype("m"), dt);
  run_ref(2);

  for (int r = 0; r < 2; r++) {
    const double *a = got_var(r, "a"), *s = got_var(r, "s");
    const double *d = got_var(r, "d"), *m = got_var(r, "m");
    const double *sc = got_var(r, "sc");
    for (int64_t i = 0; i < n; i++) {
      double xv = uniform(dt, 1, true, r, i), yv = uniform(dt, 2, true, r, i);
      ck_assert_double_eq(a[i], xv);
      ck_assert_double_eq(s[i], stored(dt, xv + yv));
      ck_assert_double_eq(d[i], stored(dt, xv - yv));
      ck_assert_double_eq(m[i], stored(dt, xv * yv));
      /* scale is one fused multiply-add (core/elemfn.h). */
      ck_assert_double_eq(sc[i], stored(dt, fma(3.0, xv, -0.5)));
      if (m[i] != xv * yv)
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

/* Outputs that are also inputs: out = f(out, ...), f(..., out), in place;
 * on float32 (_i = 0) and float64 (_i = 1) variables. (The hand-built
 * program this replaces mixed a float64 x with a float32 y in one op; a
 * schedule gives both operands of an elementwise op one dtype, so the test
 * runs once per dtype instead.) */
START_TEST(test_aliasing) {
  const ovl_dtype dt = loop_dtype(_i);
  const int64_t n = 3000;

  load_defined(
      "param dt = float64\n"
      "x = data(shape=[3000], dtype=dt, init=uniform, seed=3, per_rank=true)\n"
      "y = data(shape=[3000], dtype=dt, init=uniform, seed=4)\n"
      "x = elementwise_add(x, x)\n"          /* x = 2x */
      "x = elementwise_mul(x, y)\n"          /* x = 2xy */
      "y = scale(y, scale=2.0, bias=1.0)\n"  /* y = 2y + 1 */
      "x = elementwise_sub(x, y)\n"          /* x = 2xy - (2y + 1) */
      "y = assign(y)\n"                      /* unchanged */
      "y = elementwise_sub(x, y)\n"          /* y = x - y: out is 2nd input */
      "fetch(x)\n"
      "fetch(y)\n",
      2, dtype_define(dt));
  ck_assert_int_eq(fetched_dtype("y"), dt);
  run_ref(2);

  for (int r = 0; r < 2; r++) {
    const double *x = got_var(r, "x"), *y = got_var(r, "y");
    for (int64_t i = 0; i < n; i++) {
      double xv = uniform(dt, 3, true, r, i), yv = uniform(dt, 4, false, r, i);
      xv = stored(dt, xv + xv);
      xv = stored(dt, xv * yv);
      yv = stored(dt, 2.0 * yv + 1.0);
      xv = stored(dt, xv - yv);
      yv = stored(dt, xv - yv);
      ck_assert_double_eq(x[i], xv);
      ck_assert_double_eq(y[i], yv);
    }
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Results stored in the dtype                                         */
/* ------------------------------------------------------------------ */

/* A float32 result is the double result rounded once to float; a float64
 * one is not rounded. What the next op reads is the stored value. scale
 * and bias are converted to the dtype first, as the device converts them,
 * and scale is one fused multiply-add. (The language has no op that
 * changes a dtype, so the hand-built cases "float32 from float64" and
 * "float64 from float32" are gone; the stored float32 third is read by a
 * float32 op, 3 * t32 - 1; its float64 twin gives the fused residual of
 * the float64 third, -2^-54.) */
START_TEST(test_float32_stored) {
  const int64_t n = 5;
  const double third = 1.0 / 3.0;
  /* s, x and b are float32 values; s * x + b rounded once is 1 + 3 * 2^-23,
   * rounded twice (the product first) 1 + 2^-22. */
  const double s = 1.0 + 0x1p-23, b = 0x1p-24;
  sched_text t = {0};

  put(&t, "x32 = data(shape=[5], dtype=float32, init=fill, value=1.0)\n"
          "x64 = data(shape=[5], dtype=float64, init=fill, value=1.0)\n");
  put(&t, "t32 = scale(x32, scale=%.17g)\n", third);
  put(&t, "t64 = scale(x64, scale=%.17g)\n", third);
  /* Read the stored t32 and t64. */
  put(&t, "diff32 = scale(t32, scale=3.0, bias=-1.0)\n");
  put(&t, "diff64 = scale(t64, scale=3.0, bias=-1.0)\n");
  put(&t, "xs = data(shape=[5], dtype=float32, init=fill, value=%.17g)\n", s);
  put(&t, "once = scale(xs, scale=%.17g, bias=%.17g)\n", s, b);
  put(&t, "fetch(t32, t64, diff32, diff64, once)\n");
  load(t.s, 2);
  run_ref(2);

  ck_assert_double_ne(f32(third), third);
  ck_assert_double_eq(f32(f32(s * s) + b), 1.0 + 0x1p-22);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert_double_eq(got_var(r, "t32")[i], (double)(float)third);
      ck_assert_double_ne(got_var(r, "t32")[i], third);
      ck_assert_double_eq(got_var(r, "t64")[i], third);
      ck_assert_double_eq(got_var(r, "diff32")[i], f32(3.0 * f32(third) - 1.0));
      ck_assert_double_ne(got_var(r, "diff32")[i], 0.0);
      ck_assert_double_eq(got_var(r, "diff64")[i], fma(3.0, third, -1.0));
      ck_assert_double_eq(got_var(r, "once")[i], 1.0 + 3 * 0x1p-23);
    }
}
END_TEST

/* A float32 result beyond float32 range is +-inf, as on the device, and
 * stays inf once stored; the same ops on float64 variables stay finite.
 * A bias beyond float32 range is inf in a float32 op (the device converts
 * it to the dtype), finite in a float64 one. */
START_TEST(test_float32_overflow) {
  const int64_t n = 3000; /* more than one block of the interpreter */
  sched_text t = {0};

  put(&t,
      "x32 = data(shape=[3000], dtype=float32, init=fill, value=1e20)\n"
      "x64 = data(shape=[3000], dtype=float64, init=fill, value=1e20)\n"
      "y32 = scale(x32, scale=1e30)\n"
      "y32 = scale(y32, scale=1e30)\n"
      "y64 = scale(x64, scale=1e30)\n"
      "y64 = scale(y64, scale=1e30)\n"
      "neg32 = scale(x32, scale=-1e30)\n"
      "back32 = scale(x32, scale=1e30)\n"
      "back32 = scale(back32, scale=1e-30)\n" /* inf * 1e-30 */
      "back64 = scale(x64, scale=1e30)\n"
      "back64 = scale(back64, scale=1e-30)\n");
  put(&t, "infb32 = scale(x32, scale=1.0, bias=1e300)\n"
          "infb64 = scale(x64, scale=1.0, bias=1e300)\n");
  /* (The hand-built program also reduced a float64 variable into a float32
   * one; here the float32 sum is out of place, from a float32 input.) */
  put(&t,
      "sq32 = elementwise_mul(x32, x32)\n"
      "big32 = data(shape=[3000], dtype=float32, init=fill, value=2e38)\n"
      "big64 = data(shape=[3000], dtype=float64, init=fill, value=2e38)\n"
      "sum32 = c_allreduce_sum(big32, ring_id=0)\n"
      "c_allreduce_sum(big32, ring_id=0)\n"
      "c_allreduce_sum(big64, ring_id=0)\n"
      "fetch(y32, y64, neg32, back32, back64, infb32, infb64, sq32, big32)\n"
      "fetch(big64)\n"
      "fetch(sum32)\n");
  load(t.s, 2);
  run_ref(2);

  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      double y = (1e20 * 1e30) * 1e30;
      ck_assert(isfinite(y));
      ck_assert_double_eq(got_var(r, "y32")[i], INFINITY);
      ck_assert_double_eq(got_var(r, "y64")[i], y);
      ck_assert_double_eq(got_var(r, "neg32")[i], -INFINITY);
      ck_assert_double_eq(got_var(r, "back32")[i], INFINITY);
      ck_assert_double_eq(got_var(r, "back64")[i], (1e20 * 1e30) * 1e-30);
      ck_assert_double_eq(got_var(r, "infb32")[i], INFINITY);
      ck_assert_double_eq(got_var(r, "infb64")[i], 1e20 + 1e300);
      ck_assert_double_eq(got_var(r, "sq32")[i], INFINITY);
      ck_assert_double_eq(got_var(r, "big32")[i], INFINITY);
      ck_assert_double_eq(got_var(r, "sum32")[i], INFINITY);
      ck_assert_double_eq(got_var(r, "big64")[i], 2e38 + 2e38);
    }
}
END_TEST

/* A float32 reduction over 4 ranks is done in double in rank order and
 * rounded once, at the end: not after each partial sum. The per-rank
 * inputs are float32 values, so their double sum is exact. */
START_TEST(test_float32_reduce_rounds_once) {
  const int nranks = 4;
  const int64_t n = 4096;
  int64_t differ = 0;

  load("x = data(shape=[4096], dtype=float32, init=uniform, seed=16, "
       "per_rank=true)\n"
       "o = c_allreduce_sum(x)\n"
       "rs = c_reducescatter(x)\n"
       "fetch(o)\n"
       "fetch(rs)\n",
       nranks);
  run_ref(nranks);

  for (int64_t i = 0; i < n; i++) {
    double x0 = uniform(OVL_DTYPE_FLOAT32, 16, true, 0, i);
    double once = x0, each = x0;
    for (int q = 1; q < nranks; q++) {
      double xq = uniform(OVL_DTYPE_FLOAT32, 16, true, q, i);
      once += xq;
      each = f32(each + xq);
    }
    once = f32(once);
    differ += once != each;
    for (int r = 0; r < nranks; r++) {
      ck_assert_double_eq(got_var(r, "o")[i], once);
      if (i / (n / nranks) == r)
        ck_assert_double_eq(got_var(r, "rs")[i % (n / nranks)], once);
    }
  }
  /* The inputs tell one rounding from a rounding per partial sum. */
  ck_assert_int_gt(differ, n / 10);
}
END_TEST

/* float16 (_i = 0) and bfloat16 (_i = 1) variables hold values of their
 * dtype: each result is rounded once to it, to nearest even, in one step
 * from the double: 1/3 (a scale converted to the dtype first) and its
 * residual; ties (1 + ulp/2 to 1, 1 + 3 ulp/2 to 1 + 2 ulp); a product
 * rounded; overflow to inf. */
START_TEST(test_half_stored) {
  const ovl_dtype dt = _i == 0 ? OVL_DTYPE_FLOAT16 : OVL_DTYPE_BFLOAT16;
  const char *dn = ovl_dtype_name(dt);
  const double ulp = _i == 0 ? 0x1p-10 : 0x1p-7; /* at 1 */
  sched_text t = {0};

  put(&t, "x = data(shape=[7], dtype=%s, init=fill, value=1.0)\n", dn);
  put(&t, "third = scale(x, scale=%.17g)\n", 1.0 / 3.0);
  put(&t, "res = scale(third, scale=3.0, bias=-1.0)\n");
  put(&t, "h = data(shape=[7], dtype=%s, init=fill, value=%.17g)\n", dn,
      ulp / 2);
  put(&t, "tie = elementwise_add(x, h)\n");
  put(&t, "h3 = scale(h, scale=3.0)\n");
  put(&t, "tie3 = elementwise_add(x, h3)\n");
  put(&t, "y = data(shape=[7], dtype=%s, init=fill, value=%.17g)\n", dn,
      1.0 + ulp);
  put(&t, "sq = elementwise_mul(y, y)\n"); /* 1 + 2 ulp + ulp^2 */
  put(&t, "huge = scale(x, scale=1e300)\n");
  put(&t, "fetch(third, res, tie, tie3, sq, huge)\n");
  load(t.s, 1);
  run_ref(1);
  const double third = ovl__dtype_round(dt, 1.0 / 3.0);
  ck_assert_double_ne(third, 1.0 / 3.0);
  ck_assert_double_eq(ovl__dtype_round(dt, third), third);
  for (int64_t i = 0; i < 7; i++) {
    ck_assert_double_eq(got_var(0, "third")[i], third);
    ck_assert_double_eq(got_var(0, "res")[i],
                        ovl__dtype_round(dt, 3.0 * third - 1.0));
    ck_assert_double_ne(got_var(0, "res")[i], 0.0);
    ck_assert_double_eq(got_var(0, "tie")[i], 1.0);
    ck_assert_double_eq(got_var(0, "tie3")[i], 1.0 + 2 * ulp);
    ck_assert_double_eq(got_var(0, "sq")[i], 1.0 + 2 * ulp);
    ck_assert_double_eq(got_var(0, "huge")[i], INFINITY);
  }
}
END_TEST

/* The one place where the reference and the devices part: scale on a
 * 16-bit dtype whose fused s * x + b, rounded to float on the device (the
 * cpu backend and CUDA compute in float), lands exactly on a midpoint of
 * the dtype that the exact value is not on. Here (float16) s = -(1 + u)
 * u/2, x = 1 - u, b = 1 + u, u = 2^-10: s * x + b = 1 + u/2 + u^3/2,
 * above the midpoint 1 + u/2 by 2^-31, which float cannot hold: the float
 * is the midpoint, which ties to even, 1; the reference's double holds
 * it and rounds up, to 1 + u. (tests/test_backend_cpu checks the cpu
 * backend's 1; docs/LANGUAGE.md, "dtypes", says so.) */
START_TEST(test_half_scale_midpoint) {
  const double u = 0x1p-10, sc = -(1 + u) * u / 2;
  sched_text t = {0};
  put(&t, "x = data(shape=[3], dtype=float16, init=fill, value=%.17g)\n",
      1 - u);
  put(&t, "o = scale(x, scale=%.17g, bias=%.17g)\n", sc, 1 + u);
  put(&t, "fetch(o)\n");
  load(t.s, 1);
  run_ref(1);
  ck_assert_double_eq(ovl__dtype_round(OVL_DTYPE_FLOAT16, sc), sc);
  for (int64_t i = 0; i < 3; i++)
    ck_assert_double_eq(got_var(0, "o")[i], 1 + u);
}
END_TEST

/* A 16-bit reduction is rounded once: on 2 ranks that is a + b rounded
 * (what NCCL's __hadd gives), on 4 the whole sum rounded, which here
 * differs from a rounding after each partial sum (what devices do; the
 * check's tolerance covers it). */
START_TEST(test_half_reduce_rounds_once) {
  const ovl_dtype dt = _i == 0 ? OVL_DTYPE_FLOAT16 : OVL_DTYPE_BFLOAT16;
  const int64_t n = 4096;
  for (int nranks = 2; nranks <= 4; nranks += 2) {
    int64_t differ = 0, rounded = 0;
    sched_text t = {0};
    put(&t, "x = data(shape=[4096], dtype=%s, init=uniform, seed=17, "
            "per_rank=true)\n"
            "o = c_allreduce_sum(x)\n"
            "fetch(o)\n",
        ovl_dtype_name(dt));
    load(t.s, nranks);
    run_ref(nranks);
    for (int64_t i = 0; i < n; i++) {
      double once = 0, each = 0;
      for (int q = 0; q < nranks; q++) {
        double xq = uniform(dt, 17, true, q, i);
        once += xq;
        each = q == 0 ? xq : ovl__dtype_round(dt, each + xq);
      }
      rounded += ovl__dtype_round(dt, once) != once;
      once = ovl__dtype_round(dt, once);
      differ += once != each;
      for (int r = 0; r < nranks; r++)
        ck_assert_double_eq(got_var(r, "o")[i], once);
    }
    ck_assert_int_gt(rounded, n / 10);
    if (nranks == 4)
      ck_assert_int_gt(differ, n / 100);
    else
      ck_assert_int_eq(differ, 0);
    ovl_reference_free(REF);
    REF = NULL;
    ovl_program_free(P);
    P = NULL;
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Collectives, for 1 to 4 ranks (_i)                                  */
/* ------------------------------------------------------------------ */

typedef enum { RED_SUM, RED_MAX, RED_MIN, RED_PROD } redop;

static double reduce2(redop op, double a, double b) {
  switch (op) {
  case RED_SUM:
    return a + b;
  case RED_PROD:
    return a * b;
  case RED_MAX:
    return fmax(a, b);
  case RED_MIN:
    return fmin(a, b);
  }
  return NAN;
}

/* Every allreduce, out of place on float64 (x) and in place on float32
 * copies of a float32 input (xf). (The hand-built program reduced float64
 * x into float32 outputs; a schedule cannot change a dtype, so the float64
 * results are checked unrounded and the float32 ones come from a float32
 * input.) */
START_TEST(test_allreduce) {
  static const char *const names[] = {"c_allreduce_sum", "c_allreduce_max",
                                      "c_allreduce_min", "c_allreduce_prod"};
  static const redop ops[] = {RED_SUM, RED_MAX, RED_MIN, RED_PROD};
  const int nranks = _i;
  const int64_t n = 3000;
  sched_text t = {0};
  char o[16], c[16];

  put(&t, "x = data(shape=[3000], dtype=float64, init=uniform, seed=5, "
          "per_rank=true)\n"
          "xf = data(shape=[3000], dtype=float32, init=uniform, seed=5, "
          "per_rank=true)\n");
  for (int k = 0; k < 4; k++) {
    put(&t, "o%d = %s(x)\n", k, names[k]); /* out of place */
    put(&t, "c%d = assign(xf)\n", k);
    put(&t, "%s(c%d)\n", names[k], k);     /* in place */
    put(&t, "fetch(o%d)\nfetch(c%d)\n", k, k);
  }
  put(&t, "fetch(x)\n");
  load(t.s, nranks);
  run_ref(nranks);

  /* Reduced in double in rank order, then stored in the dtype once. */
  double *exp = xmalloc_doubles((size_t)n);
  double *exp_c = xmalloc_doubles((size_t)n);
  for (int k = 0; k < 4; k++) {
    for (int64_t i = 0; i < n; i++) {
      exp[i] = uniform(OVL_DTYPE_FLOAT64, 5, true, 0, i);
      exp_c[i] = uniform(OVL_DTYPE_FLOAT32, 5, true, 0, i);
      for (int q = 1; q < nranks; q++) {
        exp[i] = reduce2(ops[k], exp[i], uniform(OVL_DTYPE_FLOAT64, 5, true,
                                                 q, i));
        exp_c[i] = reduce2(ops[k], exp_c[i],
                           uniform(OVL_DTYPE_FLOAT32, 5, true, q, i));
      }
      exp_c[i] = f32(exp_c[i]);
    }
    snprintf(o, sizeof o, "o%d", k);
    snprintf(c, sizeof c, "c%d", k);
    for (int r = 0; r < nranks; r++) {
      assert_same(got_var(r, o), exp, (size_t)n, names[k], r);
      assert_same(got_var(r, c), exp_c, (size_t)n, names[k], r);
    }
  }
  /* The out-of-place input is left alone. */
  for (int r = 0; r < nranks; r++)
    for (int64_t i = 0; i < n; i++)
      ck_assert_double_eq(got_var(r, "x")[i],
                          uniform(OVL_DTYPE_FLOAT64, 5, true, r, i));
  free(exp);
  free(exp_c);
}
END_TEST

START_TEST(test_broadcast) {
  const int nranks = _i;
  const int64_t n = 2500;
  sched_text t = {0};
  char o[16], c[16];

  put(&t, "x = data(shape=[2500], dtype=float64, init=uniform, seed=6, "
          "per_rank=true)\n");
  for (int root = 0; root < nranks; root++) {
    put(&t, "o%d = c_broadcast(x, root=%d)\n", root, root);
    put(&t, "c%d = assign(x)\n", root);
    put(&t, "c_broadcast(c%d, root=%d)\n", root, root);
    put(&t, "fetch(o%d)\nfetch(c%d)\n", root, root);
  }
  load(t.s, nranks);
  run_ref(nranks);

  for (int root = 0; root < nranks; root++) {
    snprintf(o, sizeof o, "o%d", root);
    snprintf(c, sizeof c, "c%d", root);
    for (int r = 0; r < nranks; r++)
      for (int64_t i = 0; i < n; i++) {
        double v = uniform(OVL_DTYPE_FLOAT64, 6, true, root, i);
        ck_assert_double_eq(got_var(r, o)[i], v);
        ck_assert_double_eq(got_var(r, c)[i], v);
      }
  }
}
END_TEST

START_TEST(test_allgather) {
  const int nranks = _i;
  const int64_t n = 1500;
  sched_text t = {0};

  /* Local ops on both sides of the gather, so its neighbours are
   * evaluated block by block. */
  put(&t, "x = data(shape=[1500], dtype=float32, init=uniform, seed=7, "
          "per_rank=true)\n"
          "x = scale(x, scale=2.0)\n"
          "g = c_allgather(x)\n"
          "h = scale(g, scale=1.0, bias=1.0)\n");
  if (nranks == 1)
    put(&t, "c_allgather(x)\n"); /* in place: a copy onto itself */
  put(&t, "fetch(g)\nfetch(h)\nfetch(x)\n");
  load(t.s, nranks);
  run_ref(nranks);

  for (int r = 0; r < nranks; r++)
    for (int q = 0; q < nranks; q++)
      for (int64_t i = 0; i < n; i++) {
        double v = f32(2.0 * uniform(OVL_DTYPE_FLOAT32, 7, true, q, i));
        ck_assert_double_eq(got_var(r, "g")[q * n + i], v);
        ck_assert_double_eq(got_var(r, "h")[q * n + i], f32(v + 1.0));
      }
  for (int64_t i = 0; i < n; i++)
    ck_assert_double_eq(got_var(0, "x")[i],
                        f32(2.0 * uniform(OVL_DTYPE_FLOAT32, 7, true, 0, i)));
}
END_TEST

START_TEST(test_reducescatter) {
  const int nranks = _i;
  const int64_t m = 2100;
  sched_text t = {0};

  put(&t,
      "x = data(shape=[%lld], dtype=float64, init=uniform, seed=8, "
      "per_rank=true)\n"
      "o = c_reducescatter(x)\n"
      "h = elementwise_add(o, o)\n"
      "fetch(o)\nfetch(h)\n",
      (long long)(m * nranks));
  load(t.s, nranks);
  run_ref(nranks);

  for (int r = 0; r < nranks; r++)
    for (int64_t i = 0; i < m; i++) {
      double v = uniform(OVL_DTYPE_FLOAT64, 8, true, 0, r * m + i);
      for (int q = 1; q < nranks; q++)
        v += uniform(OVL_DTYPE_FLOAT64, 8, true, q, r * m + i);
      ck_assert_double_eq(got_var(r, "o")[i], v);
      ck_assert_double_eq(got_var(r, "h")[i], v + v);
    }
}
END_TEST

/* Every c_reduce_*, the root cycling through the ranks: the root's output
 * is the reduction in rank order rounded once (float32 in place, float64
 * out of place); the other ranks' outputs are not written: NaN out of
 * place, the input in place, and what an earlier op wrote (z: the kernel
 * before the reduce is not dead on them). */
START_TEST(test_reduce) {
  static const char *const names[] = {"c_reduce_sum", "c_reduce_max",
                                      "c_reduce_min", "c_reduce_prod"};
  static const redop ops[] = {RED_SUM, RED_MAX, RED_MIN, RED_PROD};
  const int nranks = _i;
  const int64_t n = 2500;
  sched_text t = {0};
  char name[16];

  put(&t, "x = data(shape=[2500], dtype=float64, init=uniform, seed=9, "
          "per_rank=true)\n"
          "xf = data(shape=[2500], dtype=float32, init=uniform, seed=9, "
          "per_rank=true)\n");
  for (int k = 0; k < 4; k++) {
    int root = (k + 1) % nranks;
    put(&t, "o%d = %s(x, root=%d)\n", k, names[k], root);
    put(&t, "c%d = assign(xf)\n%s(c%d, root=%d)\n", k, names[k], k, root);
    put(&t, "z%d = scale(x, scale=3.0)\nz%d = %s(x, root=%d)\n", k, k,
        names[k], root);
    put(&t, "fetch(o%d, c%d, z%d)\n", k, k, k);
  }
  load(t.s, nranks);
  run_ref(nranks);

  double *exp = xmalloc_doubles((size_t)n);
  double *exp_c = xmalloc_doubles((size_t)n);
  for (int k = 0; k < 4; k++) {
    int root = (k + 1) % nranks;
    for (int64_t i = 0; i < n; i++) {
      exp[i] = uniform(OVL_DTYPE_FLOAT64, 9, true, 0, i);
      exp_c[i] = uniform(OVL_DTYPE_FLOAT32, 9, true, 0, i);
      for (int q = 1; q < nranks; q++) {
        exp[i] = reduce2(ops[k], exp[i],
                         uniform(OVL_DTYPE_FLOAT64, 9, true, q, i));
        exp_c[i] = reduce2(ops[k], exp_c[i],
                           uniform(OVL_DTYPE_FLOAT32, 9, true, q, i));
      }
      exp_c[i] = f32(exp_c[i]);
    }
    for (int r = 0; r < nranks; r++) {
      snprintf(name, sizeof name, "o%d", k);
      const double *o = got_var(r, name);
      snprintf(name, sizeof name, "c%d", k);
      const double *c = got_var(r, name);
      snprintf(name, sizeof name, "z%d", k);
      const double *z = got_var(r, name);
      if (r == root) {
        assert_same(o, exp, (size_t)n, names[k], r);
        assert_same(c, exp_c, (size_t)n, names[k], r);
        assert_same(z, exp, (size_t)n, names[k], r);
        continue;
      }
      for (int64_t i = 0; i < n; i++) {
        ck_assert(isnan(o[i]));
        ck_assert_double_eq(c[i], uniform(OVL_DTYPE_FLOAT32, 9, true, r, i));
        ck_assert_double_eq(z[i],
                            3.0 * uniform(OVL_DTYPE_FLOAT64, 9, true, r, i));
      }
    }
  }
  free(exp);
  free(exp_c);
}
END_TEST

/* alltoall: part j of rank i's input (dim 0 split in nranks parts) is
 * part i of rank j's output; compute ops on both sides of it. */
START_TEST(test_alltoall) {
  const int nranks = _i;
  const int64_t part = 3 * 700;
  sched_text t = {0};

  put(&t,
      "x = data(shape=[%d, 700], dtype=float32, init=uniform, seed=10, "
      "per_rank=true)\n"
      "x = scale(x, scale=2.0)\n"
      "o = alltoall(x)\n"
      "h = scale(o, scale=1.0, bias=1.0)\n"
      "fetch(o, h)\n",
      3 * nranks);
  load(t.s, nranks);
  run_ref(nranks);

  for (int j = 0; j < nranks; j++)
    for (int i = 0; i < nranks; i++)
      for (int64_t e = 0; e < part; e++) {
        double v =
            f32(2.0 * uniform(OVL_DTYPE_FLOAT32, 10, true, i, j * part + e));
        ck_assert_double_eq(got_var(j, "o")[i * part + e], v);
        ck_assert_double_eq(got_var(j, "h")[i * part + e], f32(v + 1.0));
      }
}
END_TEST

/* barrier moves no data: its inputs only name dependencies. */
START_TEST(test_barrier) {
  load("x = data(shape=[1500], dtype=float64, init=uniform, seed=11, "
       "per_rank=true)\n"
       "y = scale(x, scale=2.0)\n"
       "barrier(y, ring_id=1)\n"
       "z = elementwise_add(y, x)\n"
       "barrier()\n"
       "fetch(y, z)\n",
       3);
  run_ref(3);
  for (int r = 0; r < 3; r++)
    for (int64_t i = 0; i < 1500; i++) {
      double x = uniform(OVL_DTYPE_FLOAT64, 11, true, r, i);
      ck_assert_double_eq(got_var(r, "y")[i], 2.0 * x);
      ck_assert_double_eq(got_var(r, "z")[i], 2.0 * x + x);
    }
}
END_TEST

/* Variables of different sizes in one run of index-local ops: the
 * interpreter's blocks end inside the smaller ones. */
START_TEST(test_mixed_sizes) {
  load("x = data(shape=[3000], dtype=float64, init=uniform, seed=13, "
       "per_rank=true)\n"
       "z = data(shape=[10000], dtype=float64, init=uniform, seed=14, "
       "per_rank=true)\n"
       "w = data(shape=[10], dtype=float32, init=fill, value=0.5)\n"
       "z = scale(z, scale=2.0)\n"
       "x = elementwise_add(x, x)\n"
       "w = scale(w, scale=3.0, bias=1.0)\n"
       "c_allreduce_sum(z)\n"
       "c_broadcast(x, root=1)\n"
       "fetch(x)\nfetch(z)\nfetch(w)\n",
       2);
  run_ref(2);
  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < 3000; i++)
      ck_assert_double_eq(got_var(r, "x")[i],
                          2.0 * uniform(OVL_DTYPE_FLOAT64, 13, true, 1, i));
    for (int64_t i = 0; i < 10000; i++)
      ck_assert_double_eq(got_var(r, "z")[i],
                          2.0 * uniform(OVL_DTYPE_FLOAT64, 14, true, 0, i) +
                              2.0 * uniform(OVL_DTYPE_FLOAT64, 14, true, 1, i));
    for (int64_t i = 0; i < 10; i++)
      ck_assert_double_eq(got_var(r, "w")[i], f32(3.0 * 0.5 + 1.0));
  }
}
END_TEST

/* The interpreter skips a compute op whose output is overwritten before
 * anything reads it; every kind of read must keep the op. */
START_TEST(test_overwritten_outputs) {
  const int64_t n = 2000;
  load("d = data(shape=[2000], dtype=float64, init=uniform, seed=15, "
       "per_rank=true)\n"
       "e = scale(d, scale=2.0)\n"
       "f = assign(e)\n"            /* read by a compute op */
       "e = scale(d, scale=3.0)\n"
       "g = scale(d, scale=5.0)\n"
       "g = scale(g, scale=7.0)\n"  /* read in place */
       "h = scale(d, scale=2.0)\n"
       "k = c_allreduce_sum(h)\n"   /* read by a collective */
       "h = scale(d, scale=4.0)\n"
       "p = scale(d, scale=2.0)\n"
       "fetch(p)\n"                 /* read by a fetch */
       "p = scale(d, scale=3.0)\n"
       "e = scale(d, scale=11.0)\n" /* only the last of these counts */
       "e = scale(d, scale=12.0)\n"
       "e = scale(d, scale=13.0)\n"
       "fetch(e)\nfetch(f)\nfetch(g)\nfetch(h)\nfetch(k)\n",
       2);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      double dv = uniform(OVL_DTYPE_FLOAT64, 15, true, r, i);
      ck_assert_double_eq(got_var(r, "e")[i], 13.0 * dv);
      ck_assert_double_eq(got_var(r, "f")[i], 2.0 * dv);
      ck_assert_double_eq(got_var(r, "g")[i], 7.0 * (5.0 * dv));
      ck_assert_double_eq(got_var(r, "h")[i], 4.0 * dv);
      ck_assert_double_eq(got_var(r, "k")[i],
                          2.0 * uniform(OVL_DTYPE_FLOAT64, 15, true, 0, i) +
                              2.0 * uniform(OVL_DTYPE_FLOAT64, 15, true, 1, i));
      ck_assert_double_eq(got_var(r, "p")[i], 2.0 * dv);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Inputs                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_per_rank_inputs) {
  const int64_t n = 1000;
  int same = 0;

  load("u = data(shape=[1000], dtype=float32, init=uniform, seed=9, "
       "per_rank=true)\n"
       "w = data(shape=[1000], dtype=float32, init=uniform, seed=9)\n"
       "fetch(u)\nfetch(w)\n",
       3);
  run_ref(3);

  for (int r = 0; r < 3; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert_double_eq(got_var(r, "u")[i],
                          uniform(OVL_DTYPE_FLOAT32, 9, true, r, i));
      ck_assert_double_eq(got_var(r, "w")[i],
                          uniform(OVL_DTYPE_FLOAT32, 9, false, r, i));
    }
  for (int r = 1; r < 3; r++) {
    ck_assert_mem_eq(got_var(r, "w"), got_var(0, "w"), (size_t)n * 8);
    for (int64_t i = 0; i < n; i++)
      same += got_var(r, "u")[i] == got_var(0, "u")[i];
  }
  ck_assert_int_lt(same, 5);
}
END_TEST

START_TEST(test_init_deterministic) {
  const int64_t n = 4000;
  ovl_reference *again = NULL;
  ovl_error err = {0};
  int same = 0;

  load("a = data(shape=[4000], dtype=float64, init=uniform, seed=42)\n"
       "b = data(shape=[4000], dtype=float64, init=uniform, seed=43)\n"
       "f = data(shape=[4000], dtype=float32, init=fill, value=0.1)\n"
       "g = data(shape=[4000], dtype=float64, init=fill, value=0.1)\n"
       "fetch(a)\nfetch(b)\nfetch(f)\nfetch(g)\n",
       2);
  run_ref(2);
  ck_assert_int_eq(ovl_reference_compute(P, 2, &again, &err), OVL_OK);
  for (int r = 0; r < 2; r++)
    for (size_t v = 0; v < 4; v++)
      ck_assert_mem_eq(ovl_reference_fetched(REF, r, v),
                       ovl_reference_fetched(again, r, v), (size_t)n * 8);
  ovl_reference_free(again);

  for (int64_t i = 0; i < n; i++) {
    ck_assert(got_var(0, "a")[i] >= 0.0 && got_var(0, "a")[i] < 1.0);
    same += got_var(0, "a")[i] == got_var(0, "b")[i];
    /* A fill is rounded to the variable's dtype once, at initialisation:
     * the float32 one holds 0.1f, the float64 one 0.1 itself. */
    ck_assert_double_eq(got_var(1, "f")[i], (double)0.1f);
    ck_assert_double_ne(got_var(1, "f")[i], 0.1);
    ck_assert_double_eq(got_var(1, "g")[i], 0.1);
  }
  ck_assert_int_lt(same, 5);
}
END_TEST

/* Variables not written by data() start as NaN, like the poisoned device
 * buffers, and NaN flows through the ops. A schedule declares a variable
 * by writing it, so t is written by a collective here and the program is
 * the comp form (collectives removed), in which nothing writes t. */
START_TEST(test_unwritten_is_nan) {
  const int64_t n = 3000;
  ovl_error err = {0};
  ovl_program *written =
      parse("x = data(shape=[3000], dtype=float32, init=fill, value=1.0)\n"
            "t = c_allreduce_sum(x, use_calc_stream=true)\n"
            "s = elementwise_add(t, x)\n"
            "fetch(t)\nfetch(s)\n",
            2);
  ck_assert_int_eq(ovl_program_transform(written, OVL_MODE_COMP, &P, &err),
                   OVL_OK);
  ck_assert_uint_eq(ovl_program_op_count(P),
                    ovl_program_op_count(written) - 1);
  ovl_program_free(written);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert(isnan(got_var(r, "t")[i]));
      ck_assert(isnan(got_var(r, "s")[i]));
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The seed program (schedules/seed.sched), small: -D cols=10          */
/* ------------------------------------------------------------------ */

/* The seed, fetching c as well as out. */
static const char seed_sched[] =
    "param rows = 1000\n"
    "param cols = 10000\n"
    "a = data(shape=[rows, cols], dtype=float32, init=uniform, seed=0)\n"
    "b = assign(a)\n"
    "c = elementwise_add(a, b)\n"
    "d = elementwise_add(a, b)\n"
    "c_wait_compute(c, ring_id=0)\n"
    "repeat 64 {\n"
    "  c_allreduce_sum(c, ring_id=0, use_calc_stream=false)\n"
    "  repeat 10 {\n"
    "    e = scale(d, scale=2.0)\n"
    "  }\n"
    "  d = assign(e)\n"
    "}\n"
    "c_wait_comm(c, ring_id=0)\n"
    "out = elementwise_sub(c, d)\n"
    "fetch(out)\n"
    "fetch(c)\n";

/* The seed's input a, element i on rank r. */
static double seed_a(int r, int64_t i) {
  return uniform(OVL_DTYPE_FLOAT32, 0, false, r, i);
}

static int64_t load_seed(int nranks) {
  ovl_var_info vi;
  load_defined(seed_sched, nranks, "cols=10");
  ovl_program_fetch_info(P, fetch_index("out"), &vi);
  ck_assert_int_eq(vi.numel, 1000 * 10);
  return vi.numel;
}

START_TEST(test_seed_two_ranks_zero) {
  const int64_t n = load_seed(2);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++) {
      ck_assert_double_eq(got_var(r, "out")[i], 0.0);
      /* c = (a + a) * 2^64: 64 allreduces over 2 ranks, exact in
       * float32. */
      ck_assert_double_eq(got_var(r, "c")[i], ldexp(2.0 * seed_a(r, i), 64));
    }
}
END_TEST

/* With 3 ranks c grows by 3 per allreduce and d by 2: out is not 0. */
START_TEST(test_seed_three_ranks_nonzero) {
  const int64_t n = load_seed(3);
  int nonzero = 0;
  run_ref(3);
  for (int64_t i = 0; i < n; i++)
    nonzero += got_var(2, "out")[i] != 0.0;
  ck_assert_int_gt(nonzero, n - 5);
}
END_TEST

/* With 4 ranks c = (a + a) * 4^64 = 2a * 2^128: stored in float32 it
 * overflows to inf wherever a >= 0.5, as on the device, and so does
 * out = c - d; below 0.5 it is exact (2a <= 1 - 2^-24). */
START_TEST(test_seed_four_ranks_overflow) {
  const int64_t n = load_seed(4);
  int64_t inf = 0;
  run_ref(4);
  for (int r = 0; r < 4; r++)
    for (int64_t i = 0; i < n; i++) {
      double av = seed_a(r, i);
      double c = got_var(r, "c")[i], out = got_var(r, "out")[i];
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
  load("x = data(shape=[5000], dtype=float64, init=uniform, seed=10, "
       "per_rank=true)\n"
       "fetch(x)\n"
       "x = scale(x, scale=2.0)\n",
       2);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++)
      ck_assert_double_eq(got_var(r, "x")[i],
                          uniform(OVL_DTYPE_FLOAT64, 10, true, r, i));
}
END_TEST

/* The last fetch of a variable wins. */
START_TEST(test_fetch_last_wins) {
  const int64_t n = 5000;
  load("x = data(shape=[5000], dtype=float64, init=uniform, seed=11, "
       "per_rank=true)\n"
       "y = data(shape=[10], dtype=float64, init=fill, value=5.0)\n"
       "fetch(x)\n"
       "x = scale(x, scale=2.0)\n"
       "fetch(x)\n"
       "fetch(y)\n"
       "x = scale(x, scale=3.0)\n",
       2);
  ck_assert_uint_eq(ovl_program_fetch_count(P), 2);
  run_ref(2);
  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < n; i++)
      ck_assert_double_eq(got_var(r, "x")[i],
                          2.0 * uniform(OVL_DTYPE_FLOAT64, 11, true, r, i));
    ck_assert_double_eq(got_var(r, "y")[9], 5.0);
  }
}
END_TEST

/* One fetch op of several variables. */
START_TEST(test_fetch_many) {
  load("x = data(shape=[7], dtype=float32, init=fill, value=1.5)\n"
       "y = data(shape=[3000], dtype=float64, init=fill, value=-2.0)\n"
       "fetch(x, y)\n",
       1);
  ck_assert_uint_eq(ovl_program_fetch_count(P), 2);
  run_ref(1);
  ck_assert_double_eq(got_var(0, "x")[6], 1.5);
  ck_assert_double_eq(got_var(0, "y")[2999], -2.0);
}
END_TEST

/* Out of range: no value. (The hand-built program also listed a variable
 * that no fetch op reached; a schedule lists exactly what it fetches, so
 * index 1 is simply out of range here.) */
START_TEST(test_fetched_out_of_range) {
  load("x = data(shape=[4], dtype=float32, init=fill, value=1.0)\n"
       "y = data(shape=[4], dtype=float32, init=fill, value=2.0)\n"
       "fetch(x)\n",
       2);
  ck_assert_uint_eq(ovl_program_fetch_count(P), 1);
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
  load("x = data(shape=[4], dtype=float32, init=fill, value=1.0)\n"
       "fetch(x)\n",
       2);
  ck_assert_int_eq(ref_status(0, &err), OVL_EINVAL);
  ck_assert_int_eq(ref_status(MAX_RANKS + 1, &err), OVL_EINVAL);
  /* A program is for the rank count it was parsed for. */
  ck_assert_int_eq(ref_status(3, &err), OVL_EINVAL);
  ck_assert_msg(strstr(err.msg, "is for 2 ranks, not 3") != NULL, "%s",
                err.msg);
  ck_assert_int_eq(ref_status(2, &err), OVL_OK);
  ovl_program_free(P);
  P = NULL;
  load("x = data(shape=[4], dtype=float32, init=fill, value=1.0)\n"
       "fetch(x)\n",
       MAX_RANKS);
  ck_assert_int_eq(ref_status(MAX_RANKS, &err), OVL_OK);
}
END_TEST

/* A program parsed for 3 ranks, interpreted for 2: the shapes of the
 * collectives (and a root) depend on the rank count, so the reference
 * refuses it whole, naming both counts. (Operands that differ in size and
 * a fetch missing from the fetch list, which the hand-built version also
 * tried, cannot be written as a schedule: the parser refuses the first and
 * makes the list.) */
START_TEST(test_bad_shapes) {
  static const char *const texts[] = {
      /* 12 is 3 x 4, not 2 x 4 */
      "x = data(shape=[4], dtype=float32, init=fill, value=1.0)\n"
      "g = c_allgather(x)\n",
      "g = data(shape=[12], dtype=float32, init=fill, value=1.0)\n"
      "x = c_reducescatter(g)\n",
      "x = data(shape=[4], dtype=float32, init=fill, value=1.0)\n"
      "c_broadcast(x, root=2)\n",
  };
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    ovl_error err = {0};
    load(texts[k], 3);
    ck_assert_int_eq(ref_status(2, &err), OVL_EINVAL);
    ck_assert_msg(strstr(err.msg, "t.sched: reference: the program is for 3 "
                                  "ranks, not 2") != NULL,
                  "%s", err.msg);
    ck_assert_int_eq(ref_status(3, &err), OVL_OK);
    ovl_program_free(P);
    P = NULL;
  }
}
END_TEST

START_TEST(test_out_of_memory) {
  ovl_error err = {0};
  /* 2^47 doubles are 1 PiB: malloc fails. */
  load("small = data(shape=[1000], dtype=float32, init=fill, value=1.0)\n"
       "huge = data(shape=[131072, 1073741824], dtype=float32)\n"
       "fetch(small)\n"
       "huge = assign(huge)\n",
       2);
  ck_assert_int_eq(ref_status(2, &err), OVL_ENOMEM);
  ck_assert_ptr_nonnull(strstr(err.msg, "'huge'"));
  ovl_program_free(P);

  /* The largest variable the parser takes (INT64_MAX / 8 elements, almost
   * 2^63 bytes as doubles) fails too. (The hand-built version went beyond,
   * to more bytes than a size_t holds, which no schedule can.) */
  load("small = data(shape=[1000], dtype=float32, init=fill, value=1.0)\n"
       "huge = data(shape=[1152921504606846975], dtype=float32)\n"
       "fetch(small)\n"
       "huge = assign(huge)\n",
       2);
  ck_assert_int_eq(ref_status(2, &err), OVL_ENOMEM);
  ck_assert_ptr_nonnull(strstr(err.msg, "'huge'"));
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
  double got[2][4];
  got_table t = {0};
  ovl_check c;

  load("p = data(shape=[4], dtype=float64, init=fill, value=4.0)\n"
       "n = data(shape=[4], dtype=float64, init=fill, value=-8.0)\n"
       "fetch(p)\nfetch(n)\n",
       1);
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

/* The tolerance rule alone (ovl__element_matches): a NaN matches only a
 * NaN, an infinity only the same infinity, whatever the tolerance. */
START_TEST(test_element_rule_nonfinite) {
  for (int pass = 0; pass < 2; pass++) {
    double atol = pass == 0 ? 1e-3 : INFINITY;
    ck_assert(ovl__element_matches(NAN, NAN, 0.0, atol));
    ck_assert(ovl__element_matches(-NAN, NAN, 0.0, atol));
    ck_assert(!ovl__element_matches(0.0, NAN, 0.0, atol));
    ck_assert(!ovl__element_matches(NAN, 1.0, 0.0, atol));
    ck_assert(!ovl__element_matches(INFINITY, NAN, 0.0, atol));
    ck_assert(ovl__element_matches(INFINITY, INFINITY, 0.0, atol));
    ck_assert(!ovl__element_matches(-INFINITY, INFINITY, 0.0, atol));
    ck_assert(!ovl__element_matches(1e308, INFINITY, 0.0, atol));
    ck_assert(!ovl__element_matches(INFINITY, 1e308, 0.0, atol));
  }
  /* rtol * 1e308 overflows to infinity: inf still does not match 1e308. */
  ck_assert(!ovl__element_matches(INFINITY, 1e308, 10.0, 0.0));
  ck_assert(ovl__element_matches(1e307, 1e308, 10.0, 0.0));
}
END_TEST

/* A NaN reference (u = inf - inf; the hand-built program left u unwritten
 * instead). A fetched NaN fails even against a NaN reference, and is
 * counted as not finite; a number against NaN fails as a mismatch. */
START_TEST(test_check_nan) {
  const double gu[3] = {NAN, 0.0, INFINITY};
  const double ge[3] = {1.0, NAN, -NAN};
  got_table t = {.got = {{gu, ge}}};
  ovl_check c;

  load("h = data(shape=[3], dtype=float64, init=fill, value=1e300)\n"
       "i = scale(h, scale=1e300)\n"
       "u = elementwise_sub(i, i)\n"
       "e = data(shape=[3], dtype=float64, init=fill, value=1.0)\n"
       "fetch(u)\nfetch(e)\n",
       1);
  run_ref(1);
  ck_assert(isnan(got_var(0, "u")[0]));
  /* Even an infinite tolerance does not let NaN pass. */
  for (int pass = 0; pass < 2; pass++) {
    check(&t, 1, 0.0, pass == 0 ? 1e-3 : INFINITY, &c);
    ck_assert_int_eq(c.mismatched, 5);
    ck_assert_int_eq(c.nonfinite, 4);
    ck_assert_uint_eq(c.nmismatch, 2);
    ck_assert_int_eq(c.mismatch[0].count, 3);
    ck_assert_int_eq(c.mismatch[0].nonfinite, 2);
    ck_assert_int_eq(c.mismatch[0].first_nonfinite, 0);
    ck_assert_int_eq(c.mismatch[0].first_index, 0);
    ck_assert(isnan(c.mismatch[0].got));
    ck_assert(isnan(c.mismatch[0].expected));
    ck_assert_int_eq(c.mismatch[1].count, 2);
    ck_assert_int_eq(c.mismatch[1].nonfinite, 2);
    ck_assert_int_eq(c.mismatch[1].first_nonfinite, 1);
    ck_assert_int_eq(c.mismatch[1].first_index, 1);
    ck_assert(isnan(c.mismatch[1].got));
    ck_assert_double_eq(c.mismatch[1].expected, 1.0);
    ovl_check_release(&c);
  }
}
END_TEST

/* Infinite references (a fill cannot be infinite, so pinf and ninf are
 * 1e300 scaled by +-1e300). A fetched infinity fails even where the
 * reference is the same infinity; a finite value against an infinite
 * reference fails as a mismatch, finite. */
START_TEST(test_check_inf) {
  const double gp[4] = {INFINITY, -INFINITY, 1e308, NAN};
  const double gn[4] = {-INFINITY, INFINITY, -1e308, -INFINITY};
  const double gb[2] = {1e308, 1e307};
  const double go[2] = {1.0, -20.0};
  got_table t = {.got = {{gp, gn, gb, go}}};
  ovl_check c;

  load("h = data(shape=[4], dtype=float64, init=fill, value=1e300)\n"
       "pinf = scale(h, scale=1e300)\n"
       "ninf = scale(h, scale=-1e300)\n"
       "big = data(shape=[2], dtype=float64, init=fill, value=1e308)\n"
       "one = data(shape=[2], dtype=float64, init=fill, value=1.0)\n"
       "fetch(pinf)\nfetch(ninf)\nfetch(big)\nfetch(one)\n",
       1);
  run_ref(1);
  ck_assert_double_eq(got_var(0, "pinf")[3], INFINITY);
  ck_assert_double_eq(got_var(0, "ninf")[3], -INFINITY);

  /* An infinite atol: every element of pinf and ninf fails (three are not
   * finite, one is finite against an infinity); big and one pass. */
  check(&t, 1, 0.0, INFINITY, &c);
  ck_assert_uint_eq(c.nmismatch, 2);
  ck_assert_int_eq(c.mismatch[0].count, 4);
  ck_assert_int_eq(c.mismatch[0].nonfinite, 3);
  ck_assert_int_eq(c.mismatch[0].first_index, 0);
  ck_assert_int_eq(c.mismatch[0].first_nonfinite, 0);
  ck_assert_double_eq(c.mismatch[0].got, INFINITY);
  ck_assert_double_eq(c.mismatch[0].expected, INFINITY);
  ck_assert_int_eq(c.mismatch[1].count, 4);
  ck_assert_int_eq(c.mismatch[1].nonfinite, 3);
  ck_assert_int_eq(c.mismatched, 8);
  ck_assert_int_eq(c.nonfinite, 6);
  ovl_check_release(&c);

  /* rtol 10: 1e307 is within 10 * 1e308 of 1e308; -20 is more than 10 * 1
   * from 1. A finite mismatch has no non-finite index. */
  check(&t, 1, 10.0, 0.0, &c);
  ck_assert_uint_eq(c.nmismatch, 3);
  ck_assert_str_eq(c.mismatch[2].var, "one");
  ck_assert_int_eq(c.mismatch[2].count, 1);
  ck_assert_int_eq(c.mismatch[2].first_index, 1);
  ck_assert_int_eq(c.mismatch[2].nonfinite, 0);
  ck_assert_int_eq(c.mismatch[2].first_nonfinite, -1);
  ck_assert_int_eq(c.mismatched, 9);
  ck_assert_int_eq(c.nonfinite, 6);
  ovl_check_release(&c);
}
END_TEST

/* Three ranks, two variables; got starts as a copy of the reference. */
static double *check_got[3][2];

static void build_check_case(got_table *t) {
  load("x = data(shape=[10], dtype=float32, init=uniform, seed=12, "
       "per_rank=true)\n"
       "y = data(shape=[7], dtype=float64, init=fill, value=2.0)\n"
       "fetch(x)\nfetch(y)\n",
       3);
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
  ovl_var_info y;
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
  ovl_program_fetch_info(P, 1, &y);
  ck_assert_ptr_eq(c.mismatch[0].var, y.name); /* the program's string */
  ck_assert_int_eq(c.mismatch[0].count, 2);
  ck_assert_int_eq(c.mismatch[0].numel, 7);
  ck_assert_int_eq(c.mismatch[0].first_index, 3);
  ck_assert_double_eq(c.mismatch[0].got, 2.5);
  ck_assert_double_eq(c.mismatch[0].expected, 2.0);
  ck_assert_int_eq(c.mismatch[0].nonfinite, 0);
  ck_assert_int_eq(c.mismatch[0].first_nonfinite, -1);
  ck_assert_int_eq(c.nonfinite, 0);

  ck_assert_int_eq(c.mismatch[1].rank, 2);
  ck_assert_uint_eq(c.mismatch[1].fetch_index, 0);
  ck_assert_str_eq(c.mismatch[1].var, "x");
  ck_assert_int_eq(c.mismatch[1].count, 1);
  ck_assert_int_eq(c.mismatch[1].numel, 10);
  ck_assert_int_eq(c.mismatch[1].first_index, 9);
  ck_assert_double_eq(c.mismatch[1].expected,
                      uniform(OVL_DTYPE_FLOAT32, 12, true, 2, 9));
  ck_assert_double_eq(c.mismatch[1].got,
                      uniform(OVL_DTYPE_FLOAT32, 12, true, 2, 9) + 1.0);

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
/* Ranks that differ: ranks=[...], send_v2 / recv_v2, per-rank roots   */
/* ------------------------------------------------------------------ */

/* Compute REF for P on `nranks` ranks; it must fail with `status`, and
 * its message must contain every string of `parts` (NULL-terminated). */
static void ref_fails(int nranks, ovl_status status, const char *const *parts) {
  ovl_error err = {0};
  ovl_status st = ovl_reference_compute(P, nranks, &REF, &err);
  ck_assert_msg(st == status, "status %d (%s), expected %d", st, err.msg,
                status);
  ck_assert_ptr_null(REF);
  for (size_t k = 0; parts[k] != NULL; k++)
    ck_assert_msg(strstr(err.msg, parts[k]) != NULL,
                  "'%s' not in the message: %s", parts[k], err.msg);
}

/* An op on some ranks only: the others skip it (their variable keeps what
 * it held); a fetch on some ranks only has no value on the others. */
START_TEST(test_ranks_subset) {
  const int nranks = 4;
  load("x = data(shape=[1500], dtype=float64, init=uniform, seed=20, "
       "per_rank=true)\n"
       "y = scale(x, scale=2.0, ranks=[0])\n"
       "y = scale(x, scale=3.0, ranks=[1:nranks])\n"
       "y = scale(y, scale=5.0, ranks=[1, nranks - 1])\n"
       "z = assign(x, ranks=[2])\n"
       "fetch(y)\n"
       "fetch(z, ranks=[2, 3])\n",
       nranks);
  ck_assert(P->rank_dependent);
  run_ref(nranks);
  for (int r = 0; r < nranks; r++) {
    const double *y = got_var(r, "y");
    const double *z = ovl_reference_fetched(REF, r, fetch_index("z"));
    for (int64_t i = 0; i < 1500; i++) {
      double x = uniform(OVL_DTYPE_FLOAT64, 20, true, r, i);
      ck_assert_double_eq(y[i], r == 0                ? 2.0 * x
                                : r == 1 || r == 3 ? 5.0 * (3.0 * x)
                                                   : 3.0 * x);
    }
    if (r < 2) {
      ck_assert_ptr_null(z);
      continue;
    }
    ck_assert_ptr_nonnull(z);
    for (int64_t i = 0; i < 1500; i++)
      if (r == 2)
        ck_assert_double_eq(z[i], uniform(OVL_DTYPE_FLOAT64, 20, true, r, i));
      else
        ck_assert(isnan(z[i]));
  }
}
END_TEST

/* A pipeline of nranks stages (_i): stage r receives from r - 1, adds its
 * own input and sends to r + 1; the last one fetches. Each value is
 * received as the send found it, whatever the sender does afterwards. */
START_TEST(test_p2p_chain) {
  const int nranks = _i;
  const int64_t n = 2000;
  load("x = data(shape=[2000], dtype=float64, init=uniform, seed=21, "
       "per_rank=true)\n"
       "a = scale(x, scale=1.0, ranks=[0])\n"
       "a = recv_v2(peer=rank - 1, out_shape=[2000], dtype=float64, "
       "ranks=[1:nranks])\n"
       "a = elementwise_add(a, x, ranks=[1:nranks])\n"
       "send_v2(a, peer=rank + 1, ranks=[0:nranks - 1])\n"
       "a = scale(a, scale=0.0, ranks=[0:nranks - 1])\n"
       "fetch(a)\n",
       nranks);
  run_ref(nranks);
  for (int64_t i = 0; i < n; i++) {
    double v = 0;
    for (int r = 0; r < nranks; r++) {
      v += uniform(OVL_DTYPE_FLOAT64, 21, true, r, i);
      ck_assert_double_eq(got_var(r, "a")[i], r == nranks - 1 ? v : 0.0);
    }
  }
}
END_TEST

/* Matching: the k-th send from a to b on a ring meets the k-th receive of
 * b from a on that ring, whatever the lines; rings and pairs are
 * independent (ring 1's pair goes first on the receiver); recv_v2 writes
 * into an existing variable. */
START_TEST(test_p2p_order) {
  load("x = data(shape=[700], dtype=float32, init=uniform, seed=22, "
       "per_rank=true)\n"
       "y = data(shape=[700], dtype=float32, init=fill, value=7.0)\n"
       "x2 = scale(x, scale=2.0)\n"
       "x3 = scale(x, scale=3.0)\n"
       "send_v2(x, peer=1, ring_id=0, ranks=[0])\n"
       "send_v2(x2, peer=1, ring_id=0, ranks=[0])\n"
       "send_v2(x3, peer=1, ring_id=1, ranks=[0])\n"
       "c = recv_v2(peer=0, out_shape=[700], ring_id=1, ranks=[1])\n"
       "a = recv_v2(peer=0, out_shape=[700], ring_id=0, ranks=[1])\n"
       "y = recv_v2(peer=0, out_shape=[700], ring_id=0, ranks=[1])\n"
       "fetch(a, y, c)\n",
       2);
  run_ref(2);
  for (int64_t i = 0; i < 700; i++) {
    double x = uniform(OVL_DTYPE_FLOAT32, 22, true, 0, i);
    ck_assert(isnan(got_var(0, "a")[i]));
    ck_assert_double_eq(got_var(0, "y")[i], 7.0);
    ck_assert_double_eq(got_var(1, "a")[i], x);
    ck_assert_double_eq(got_var(1, "y")[i], f32(2.0 * x));
    ck_assert_double_eq(got_var(1, "c")[i], f32(3.0 * x));
  }
}
END_TEST

/* A group: every rank sends to the next and receives from the one before
 * (on one rank, from itself); then the receive comes before the send in
 * program order, which a rank that waited at the receive could not get
 * past. */
START_TEST(test_p2p_group_shift) {
  const int nranks = _i;
  load("x = data(shape=[900], dtype=float64, init=uniform, seed=23, "
       "per_rank=true)\n"
       "group {\n"
       "  send_v2(x, peer=(rank + 1) % nranks)\n"
       "  o = recv_v2(peer=(rank - 1) % nranks, out_shape=[900], "
       "dtype=float64)\n"
       "}\n"
       "group {\n"
       "  p = recv_v2(peer=(rank + 1) % nranks, out_shape=[900], "
       "dtype=float64)\n"
       "  send_v2(x, peer=(rank - 1) % nranks)\n"
       "}\n"
       "fetch(o, p)\n",
       nranks);
  run_ref(nranks);
  for (int r = 0; r < nranks; r++)
    for (int64_t i = 0; i < 900; i++) {
      ck_assert_double_eq(
          got_var(r, "o")[i],
          uniform(OVL_DTYPE_FLOAT64, 23, true, (r + nranks - 1) % nranks, i));
      ck_assert_double_eq(
          got_var(r, "p")[i],
          uniform(OVL_DTYPE_FLOAT64, 23, true, (r + 1) % nranks, i));
    }
}
END_TEST

/* Collectives meet by their sequence number on a ring, whatever the line:
 * rank 0 issues ring 0's then ring 1's, the others ring 1's then ring 0's
 * (on comm streams that is no deadlock); ring 0's second collective is on
 * another line on rank 0 than elsewhere. */
START_TEST(test_coll_sequence) {
  const int nranks = 3;
  load("a = data(shape=[1200], dtype=float64, init=uniform, seed=24, "
       "per_rank=true)\n"
       "b = data(shape=[1200], dtype=float64, init=uniform, seed=25, "
       "per_rank=true)\n"
       "c_wait_compute(a, b, ring_id=0)\n"
       "c_wait_compute(a, b, ring_id=1)\n"
       "s = c_allreduce_sum(a, ring_id=0, ranks=[0])\n"
       "m = c_allreduce_max(b, ring_id=1)\n"
       "s = c_allreduce_sum(a, ring_id=0, ranks=[1:nranks])\n"
       "c_allreduce_sum(a, ring_id=0, ranks=[0])\n"
       "b = scale(b, scale=2.0)\n"
       "c_allreduce_sum(a, ring_id=0, ranks=[1:nranks])\n"
       "c_wait_comm(s, m, a, b, ring_id=0)\n"
       "c_wait_comm(s, m, ring_id=1)\n"
       "fetch(s, m, a, b)\n",
       nranks);
  run_ref(nranks);
  for (int64_t i = 0; i < 1200; i++) {
    double s = 0, m = -INFINITY;
    for (int q = 0; q < nranks; q++) {
      s += uniform(OVL_DTYPE_FLOAT64, 24, true, q, i);
      m = fmax(m, uniform(OVL_DTYPE_FLOAT64, 25, true, q, i));
    }
    for (int r = 0; r < nranks; r++) {
      ck_assert_double_eq(got_var(r, "s")[i], s);
      ck_assert_double_eq(got_var(r, "m")[i], m);
      ck_assert_double_eq(got_var(r, "a")[i], s);
      ck_assert_double_eq(got_var(r, "b")[i],
                          2.0 * uniform(OVL_DTYPE_FLOAT64, 25, true, r, i));
    }
  }
}
END_TEST

/* c_reduce_sum's root given as an expression over nranks; a broadcast
 * whose root each rank names on its own line. */
START_TEST(test_root_expr) {
  const int nranks = 4;
  load("x = data(shape=[600], dtype=float64, init=uniform, seed=26, "
       "per_rank=true)\n"
       "o = c_reduce_sum(x, root=nranks - 1)\n"
       "b = c_broadcast(x, root=2, ranks=[0, 2])\n"
       "b = c_broadcast(x, root=2, ranks=[1, 3])\n"
       "fetch(o, b)\n",
       nranks);
  run_ref(nranks);
  for (int64_t i = 0; i < 600; i++) {
    double s = 0;
    for (int q = 0; q < nranks; q++)
      s += uniform(OVL_DTYPE_FLOAT64, 26, true, q, i);
    for (int r = 0; r < nranks; r++) {
      if (r == nranks - 1)
        ck_assert_double_eq(got_var(r, "o")[i], s);
      else
        ck_assert(isnan(got_var(r, "o")[i]));
      ck_assert_double_eq(got_var(r, "b")[i],
                          uniform(OVL_DTYPE_FLOAT64, 26, true, 2, i));
    }
  }
}
END_TEST

/* A rank-dependent program that every rank runs alike (a delay on one
 * rank only) gives what lock step gives: the seed at a small size. */
START_TEST(test_per_rank_matches_lock_step) {
  static const char *const defs[] = {"cols=30"};
  const int nranks = 3;
  ovl_reference *lock = NULL;
  ovl_error err = {0};
  sched_text t = {0};

  put(&t, "%sdelay(us=1, stream=calc, ranks=[1])\n", seed_sched);
  P = parse_with(seed_sched, nranks, defs, 1);
  ck_assert(!P->rank_dependent);
  ck_assert_int_eq(ovl_reference_compute(P, nranks, &lock, &err), OVL_OK);
  ovl_program_free(P);
  P = parse_with(t.s, nranks, defs, 1);
  ck_assert(P->rank_dependent);
  run_ref(nranks);
  for (int r = 0; r < nranks; r++)
    for (size_t f = 0; f < 2; f++)
      assert_same(ovl_reference_fetched(REF, r, f),
                  ovl_reference_fetched(lock, r, f), 1000 * 30, "seed", r);
  ovl_reference_free(lock);
}
END_TEST

/* Ranks that disagree on the matching: an error naming the op, the ring
 * and the ranks, not a hang; the first disagreement of the check's
 * matching (check/match.h), in its words, at the op where it shows first
 * (the earliest on its ring). */
START_TEST(test_mismatch_errors) {
  static const struct {
    const char *text;
    const char *parts[4];
  } cases[] = {
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "c_allreduce_sum(x, ring_id=2, ranks=[0])\n"
       "fetch(x)\n",
       {"t.sched:2:1: reference: ring 2 collective #1: rank 0 issues "
        "c_allreduce_sum of 'x' (float32, 8 elements) at t.sched:2:1, rank 1 "
        "never issues it (it issues 0 collectives on ring 2)",
        NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "y = data(shape=[4], init=fill, value=1.0)\n"
       "c_allreduce_sum(x, ranks=[0])\n"
       "c_allreduce_sum(y, ranks=[1])\n"
       "fetch(x)\n",
       {"t.sched:3:1: reference: ring 0 collective #1: rank 0 issues "
        "c_allreduce_sum of 'x' (float32, 8 elements) at t.sched:3:1, rank 1 "
        "issues c_allreduce_sum of 'y' (float32, 4 elements) at t.sched:4:1; "
        "they differ in count",
        NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "y = data(shape=[8], init=fill, value=1.0)\n"
       "o = c_allreduce_sum(x, ranks=[0])\n"
       "o = c_allreduce_sum(y, ranks=[1])\n"
       "c_allreduce_sum(x, ranks=[0])\n"
       "y = c_allreduce_sum(x, ranks=[1])\n"
       "fetch(o)\n",
       {"t.sched:3:5: reference: ring 0 collective #1: rank 0 issues "
        "c_allreduce_sum of 'x' into 'o' (float32, 8 elements) at t.sched:3:5, "
        "rank 1 issues c_allreduce_sum of 'y' into 'o' (float32, 8 elements) "
        "at t.sched:4:5; they differ in variable (the same size: a run would "
        "mix buffers silently)",
        NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "c_allreduce_sum(x, ranks=[0])\n"
       "c_allreduce_max(x, ranks=[1])\n"
       "fetch(x)\n",
       {"rank 1 issues c_allreduce_max of 'x' (float32, 8 elements) at "
        "t.sched:3:1; they differ in reduction",
        NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "c_broadcast(x, root=0, ranks=[0])\n"
       "c_broadcast(x, root=1, ranks=[1])\n"
       "fetch(x)\n",
       {"c_broadcast of 'x' (float32, 8 elements, root 0) at t.sched:2:1",
        "c_broadcast of 'x' (float32, 8 elements, root 1) at t.sched:3:1",
        "they differ in root", NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "send_v2(x, peer=1, ranks=[0])\n"
       "send_v2(x, peer=1, ranks=[0])\n"
       "x = recv_v2(peer=0, out_shape=[8], ranks=[1])\n"
       "fetch(x)\n",
       {"t.sched:3:1: reference: ring 0: rank 0 issues send_v2 of 'x' "
        "(float32, 8 elements) to rank 1 at t.sched:3:1 (its send #2 to rank "
        "1), and rank 1 never receives it (it posts 1 receive from rank 0 on "
        "ring 0)",
        NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "x = recv_v2(peer=0, out_shape=[8], ring_id=1, ranks=[1])\n"
       "fetch(x)\n",
       {"t.sched:2:5: reference: ring 1: rank 1 issues recv_v2 into 'x' "
        "(float32, 8 elements) from rank 0 at t.sched:2:5 (its receive #1 "
        "from rank 0), and rank 0 never sends it (it issues 0 sends to rank 1 "
        "on ring 1)",
        NULL}},
      {"x = data(shape=[8], init=fill, value=1.0)\n"
       "send_v2(x, peer=1, ranks=[0])\n"
       "y = recv_v2(peer=0, out_shape=[4], ranks=[1])\n"
       "fetch(y)\n",
       {"t.sched:2:1: reference: ring 0 send #1 from rank 0 to rank 1: rank 0 "
        "issues send_v2 of 'x' (float32, 8 elements) at t.sched:2:1, rank 1 "
        "issues recv_v2 into 'y' (float32, 4 elements) at t.sched:3:5; they "
        "differ in count",
        NULL}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    load(cases[k].text, 2);
    ref_fails(2, OVL_EMISMATCH, cases[k].parts);
    ovl_program_free(P);
    P = NULL;
  }
}
END_TEST

/* Programs that cannot complete: each rank receives into the buffer it
 * then sends (no run ahead can help), and a collective that one rank
 * reaches only after a receive whose send comes after the collective on
 * the other. An error naming where each rank waits. */
START_TEST(test_cannot_complete) {
  static const char *const swap_parts[] = {
      "t.sched:2:5: reference: the ranks cannot complete",
      "rank 0 waits at line 2 (recv_v2 from rank 1, ring 0) for rank 1's "
      "send_v2 at line 3",
      "rank 1 waits at line 2 (recv_v2 from rank 0, ring 0) for rank 0's "
      "send_v2 at line 3",
      NULL};
  static const char *const coll_parts[] = {
      "cannot complete",
      "rank 0 waits at line 2 (c_allreduce_sum of 'x' (float32, 8 "
      "elements), ring 0 collective #1) for rank 1 (line 5)",
      "rank 1 waits at line 3 (recv_v2 from rank 0, ring 0) for rank 0's "
      "send_v2 at line 4",
      NULL};
  load("x = data(shape=[8], init=fill, value=1.0)\n"
       "x = recv_v2(peer=1 - rank, out_shape=[8])\n"
       "send_v2(x, peer=1 - rank)\n"
       "fetch(x)\n",
       2);
  ref_fails(2, OVL_EMISMATCH, swap_parts);
  ovl_program_free(P);
  load("x = data(shape=[8], init=fill, value=1.0)\n"
       "c_allreduce_sum(x, ranks=[0], use_calc_stream=true)\n"
       "x = recv_v2(peer=0, out_shape=[8], ranks=[1])\n"
       "send_v2(x, peer=1, ranks=[0])\n"
       "c_allreduce_sum(x, ranks=[1], use_calc_stream=true)\n"
       "fetch(x)\n",
       2);
  ref_fails(2, OVL_EMISMATCH, coll_parts);
}
END_TEST

/* Both ranks receive before they send, into other buffers: a deadlock on
 * the device without a group (the check says so), but the values are
 * defined, and the reference runs ahead to them. */
START_TEST(test_run_ahead) {
  load("x = data(shape=[64], dtype=float64, init=uniform, seed=27, "
       "per_rank=true)\n"
       "y = recv_v2(peer=1 - rank, out_shape=[64], dtype=float64)\n"
       "x = scale(x, scale=2.0)\n"
       "send_v2(x, peer=1 - rank)\n"
       "z = elementwise_add(y, x)\n"
       "fetch(z)\n",
       2);
  run_ref(2);
  for (int r = 0; r < 2; r++)
    for (int64_t i = 0; i < 64; i++)
      ck_assert_double_eq(
          got_var(r, "z")[i],
          2.0 * uniform(OVL_DTYPE_FLOAT64, 27, true, 1 - r, i) +
              2.0 * uniform(OVL_DTYPE_FLOAT64, 27, true, r, i));
}
END_TEST

/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* matmul_v2                                                           */
/* ------------------------------------------------------------------ */

/* op(a)[i, t] of a row-major a of rows x cols, transposed or not. */
static double op_at(const double *a, int64_t cols, bool trans, int64_t i,
                    int64_t t) {
  return trans ? a[t * cols + i] : a[i * cols + t];
}

/* The inputs of a fetched variable made by data(): generated here. */
static double *gen_input(ovl_dtype dt, uint64_t seed, int r, int64_t n) {
  double *a = xmalloc_doubles((size_t)n);
  for (int64_t i = 0; i < n; i++)
    a[i] = uniform(dt, seed, true, r, i);
  return a;
}

/* out = op(x) @ op(y) for M x K x N, the products summed in order of t in
 * double and rounded once to the dtype: what the reference computes. */
static void naive_matmul(ovl_dtype dt, const double *x, const double *y,
                         int64_t m, int64_t n, int64_t k, bool tx, bool ty,
                         double *out) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t t = 0; t < k; t++)
        s += op_at(x, tx ? m : k, tx, i, t) * op_at(y, ty ? k : n, ty, t, j);
      out[i * n + j] = ovl__dtype_round(dt, s);
    }
}

/* Every transpose (_i: bit 0 trans_x, bit 1 trans_y) in every dtype
 * (bits 2-3): the reference's matmul is the plain sum in order in double,
 * rounded once to the dtype, exactly.
 * N = 45 is not a multiple of the kernel's panels, K = 1030 spans two of
 * its K blocks. */
START_TEST(test_matmul_values) {
  static const ovl_dtype dts[4] = {OVL_DTYPE_FLOAT32, OVL_DTYPE_FLOAT64,
                                   OVL_DTYPE_FLOAT16, OVL_DTYPE_BFLOAT16};
  const bool tx = _i & 1, ty = (_i >> 1) & 1;
  const ovl_dtype dt = dts[(_i >> 2) & 3];
  const int64_t m = 37, n = 45, k = 1030;
  sched_text t = {.n = 0};
  put(&t, "x = data(shape=[%lld, %lld], dtype=%s, init=uniform, seed=5, "
          "per_rank=true)\n",
      (long long)(tx ? k : m), (long long)(tx ? m : k), ovl_dtype_name(dt));
  put(&t, "y = data(shape=[%lld, %lld], dtype=%s, init=uniform, seed=6, "
          "per_rank=true)\n",
      (long long)(ty ? n : k), (long long)(ty ? k : n), ovl_dtype_name(dt));
  put(&t, "o = matmul_v2(x, y, trans_x=%s, trans_y=%s)\nfetch(o)\n",
      tx ? "true" : "false", ty ? "true" : "false");
  load(t.s, 2);
  run_ref(2);
  ck_assert_ptr_null(ovl_reference_rows(REF, 0, NULL));
  for (int r = 0; r < 2; r++) {
    double *x = gen_input(dt, 5, r, m * k), *y = gen_input(dt, 6, r, k * n);
    double *want = xmalloc_doubles((size_t)(m * n));
    naive_matmul(dt, x, y, m, n, k, tx, ty, want);
    assert_same(got_var(r, "o"), want, (size_t)(m * n), "o", r);
    free(x);
    free(y);
    free(want);
  }
}
END_TEST

/* A product large enough to be cut among threads (on a machine with more
 * than one CPU) is still the plain sum in order. */
START_TEST(test_matmul_threads) {
  const int64_t m = 256, n = 200, k = 160;
  double *x = gen_input(OVL_DTYPE_FLOAT64, 1, 0, m * k);
  double *y = gen_input(OVL_DTYPE_FLOAT64, 2, 0, k * n);
  double *want = xmalloc_doubles((size_t)(m * n));
  ovl_error err = {0};
  load("x = data(shape=[256, 160], dtype=float64, init=uniform, seed=1, "
       "per_rank=true)\n"
       "y = data(shape=[160, 200], dtype=float64, init=uniform, seed=2, "
       "per_rank=true)\n"
       "o = matmul_v2(x, y)\nfetch(o)\n",
       1);
  /* Every row: 0 (256 rows is more than the default sample). */
  ck_assert_int_eq(ovl_reference_compute_rows(P, 1, 0, &REF, &err), OVL_OK);
  naive_matmul(OVL_DTYPE_FLOAT64, x, y, m, n, k, false, false, want);
  assert_same(got_var(0, "o"), want, (size_t)(m * n), "o", 0);
  free(x);
  free(y);
  free(want);
}
END_TEST

/* NaN and infinities follow IEEE arithmetic in double: inf * 0 is NaN,
 * inf + -inf is NaN, an overflow of the float32 result is inf. */
START_TEST(test_matmul_special) {
  load("x = data(shape=[10, 4], dtype=float32, init=special, seed=3, "
       "per_rank=true)\n"
       "y = data(shape=[4, 10], dtype=float32, init=special, seed=4, "
       "per_rank=true)\n"
       "o = matmul_v2(x, y)\nfetch(o)\n",
       2);
  run_ref(2);
  for (int r = 0; r < 2; r++) {
    ovl__var vx = {0}, vy = {0};
    double x[40], y[40], want[100];
    int nan = 0, inf = 0;
    vx.dtype = vy.dtype = OVL_DTYPE_FLOAT32;
    vx.init = vy.init = OVL_INIT_SPECIAL;
    vx.seed = 3;
    vy.seed = 4;
    vx.per_rank = vy.per_rank = true;
    for (int i = 0; i < 40; i++) {
      x[i] = ovl__var_init_value(&vx, r, i);
      y[i] = ovl__var_init_value(&vy, r, i);
    }
    naive_matmul(OVL_DTYPE_FLOAT32, x, y, 10, 10, 4, false, false, want);
    assert_same(got_var(r, "o"), want, 100, "o", r);
    for (int i = 0; i < 100; i++) {
      nan += isnan(want[i]) != 0;
      inf += isinf(want[i]) != 0;
    }
    /* The inputs make both show up: the test tests something. */
    ck_assert_int_gt(nan, 0);
    ck_assert_int_gt(inf + nan, 1);
  }
}
END_TEST

/* A fetched variable computed from a matmul, with more rows than the
 * sample: the reference computes 64 rows (one a stratum, the first and the
 * last), the same values as the full product there, and the check
 * compares those rows only. */
START_TEST(test_matmul_sampled_rows) {
  const int64_t m = 300, n = 20;
  ovl_reference *full = NULL;
  ovl_error err = {0};
  const int64_t *rows;
  size_t nrows;
  got_table t = {0};
  double *bad;
  ovl_check c;

  load("x = data(shape=[300, 40], dtype=float32, init=uniform, seed=1, "
       "per_rank=true)\n"
       "y = data(shape=[40, 20], dtype=float32, init=uniform, seed=2)\n"
       "o = matmul_v2(x, y)\nfetch(o)\n",
       2);
  run_ref(2);
  ck_assert_int_eq(ovl_reference_compute_rows(P, 2, 0, &full, &err), OVL_OK);
  rows = ovl_reference_rows(REF, 0, &nrows);
  ck_assert_ptr_nonnull(rows);
  ck_assert_uint_eq(nrows, OVL_REFERENCE_ROWS_DEFAULT);
  ck_assert_int_eq(rows[0], 0);
  ck_assert_int_eq(rows[nrows - 1], m - 1);
  for (size_t q = 1; q < nrows; q++) {
    /* Sorted, one in each stratum of 300 / 64 rows. */
    ck_assert_int_gt(rows[q], rows[q - 1]);
    ck_assert_int_ge(rows[q], (int64_t)q * (m / 64) + ((int64_t)q < m % 64 ? (int64_t)q : m % 64));
  }
  ck_assert_ptr_null(ovl_reference_rows(full, 0, &nrows));
  ck_assert_uint_eq(nrows, 0);
  for (int r = 0; r < 2; r++)
    for (size_t q = 0; q < OVL_REFERENCE_ROWS_DEFAULT; q++)
      assert_same(got_var(r, "o") + rows[q] * n,
                  ovl_reference_fetched(full, r, 0) + rows[q] * n,
                  (size_t)n, "o (sampled row)", r);

  /* The check: the full values pass and count the sampled rows only; a
   * wrong value in a sampled row fails, one elsewhere is not seen. */
  t.got[0][0] = ovl_reference_fetched(full, 0, 0);
  t.got[1][0] = ovl_reference_fetched(full, 1, 0);
  check(&t, 2, 0, 0, &c);
  ck_assert_int_eq(c.mismatched, 0);
  ck_assert_int_eq(c.checked, 2 * 64 * n);
  ck_assert_int_eq(c.unchecked, 2 * (m - 64) * n);
  ck_assert_ptr_nonnull(c.var_unchecked);
  ck_assert_int_eq(c.var_unchecked[0], (m - 64) * n);
  ovl_check_release(&c);
  bad = xmalloc_doubles((size_t)(m * n));
  memcpy(bad, t.got[1][0], (size_t)(m * n) * sizeof *bad);
  bad[rows[5] * n + 3] += 1.0;
  t.got[1][0] = bad;
  check(&t, 2, 1e-6, 0, &c);
  ck_assert_int_eq(c.mismatched, 1);
  ck_assert_int_eq(c.mismatch[0].rank, 1);
  ck_assert_int_eq(c.mismatch[0].first_index, rows[5] * n + 3);
  ovl_check_release(&c);
  bad[rows[5] * n + 3] -= 1.0;
  bad[(rows[5] + 1) * n] += 1.0; /* rows[5] + 1 is not sampled */
  ck_assert_int_ne(rows[6], rows[5] + 1);
  check(&t, 2, 1e-6, 0, &c);
  ck_assert_int_eq(c.mismatched, 0);
  ovl_check_release(&c);
  free(bad);
  ovl_reference_free(full);
}
END_TEST

/* What a sampled fetch depends on is computed in full, through
 * elementwise ops, an allreduce, matmuls on either side (a transposed x,
 * and y, need all the rows of what they read), a variable overwritten in
 * a loop, and in a program whose ranks differ (_i = 1): every fetched
 * value in the sampled rows equals the full reference's. Variables not
 * computed from a matmul are computed and compared whole. */
START_TEST(test_matmul_sampled_dependencies) {
  ovl_reference *full = NULL;
  ovl_error err = {0};
  sched_text t = {.n = 0};
  put(&t,
      "x = data(shape=[200, 30], dtype=float64, init=uniform, seed=1, "
      "per_rank=true)\n"
      "y = data(shape=[30, 50], dtype=float64, init=uniform, seed=2)\n"
      "w = data(shape=[50, 70], dtype=float64, init=uniform, seed=3)\n"
      "v = data(shape=[200, 40], dtype=float64, init=uniform, seed=4, "
      "per_rank=true)\n"
      "z = data(shape=[200, 50], dtype=float64, init=uniform, seed=5, "
      "per_rank=true)\n"
      "o = matmul_v2(x, y)\n"
      "p = elementwise_add(o, z)\n"
      "repeat 2 {\n"
      "  p = scale(p, scale=0.5, bias=1.0)\n"
      "}\n"
      "c_wait_compute(p, ring_id=0)\n"
      "c_allreduce_sum(p, ring_id=0)\n"
      "c_wait_comm(p, ring_id=0)\n"
      "q = matmul_v2(p, w)\n"
      "r = matmul_v2(v, p, trans_x=true)\n"
      "s = matmul_v2(q, p, trans_x=true)\n"
      "w2 = data(shape=[60, 50], dtype=float64, init=uniform, seed=6)\n"
      "s2 = matmul_v2(p, w2, trans_y=true)\n"
      "u = elementwise_mul(z, z)\n"
      "%s"
      "fetch(q, r, s, o, u, s2)\n",
      _i ? "u = scale(u, scale=3.0, ranks=[1])\n" : "");
  load(t.s, 2);
  run_ref(2);
  ck_assert_int_eq(ovl_reference_compute_rows(P, 2, 0, &full, &err), OVL_OK);
  for (size_t f = 0; f < ovl_program_fetch_count(P); f++) {
    ovl_var_info vi;
    size_t nrows;
    const int64_t *rows = ovl_reference_rows(REF, f, &nrows);
    int64_t len;
    ovl_program_fetch_info(P, f, &vi);
    len = vi.numel / vi.dims[0];
    /* q [200, 70], o [200, 50], s [70, 50] and s2 [200, 60]: sampled;
     * r [40, 50] has fewer rows than the sample; u is not from a
     * matmul. */
    if (strcmp(vi.name, "r") != 0 && strcmp(vi.name, "u") != 0)
      ck_assert_uint_eq(nrows, 64);
    else
      ck_assert_ptr_null(rows);
    for (int rk = 0; rk < 2; rk++) {
      const double *a = ovl_reference_fetched(REF, rk, f);
      const double *b = ovl_reference_fetched(full, rk, f);
      if (rows == NULL)
        assert_same(a, b, (size_t)vi.numel, vi.name, rk);
      for (size_t q = 0; rows != NULL && q < nrows; q++)
        assert_same(a + rows[q] * len, b + rows[q] * len, (size_t)len,
                    vi.name, rk);
    }
  }
  ovl_reference_free(full);
}
END_TEST

/* A program without a matmul samples nothing, whatever its sizes. */
START_TEST(test_matmul_no_sampling_without) {
  size_t n = 7;
  load("a = data(shape=[1000, 3], dtype=float32, init=uniform, seed=1)\n"
       "b = scale(a, scale=2.0)\nfetch(b)\n",
       2);
  run_ref(2);
  ck_assert_ptr_null(ovl_reference_rows(REF, 0, &n));
  ck_assert_uint_eq(n, 0);
  ck_assert_ptr_null(ovl_reference_rows(REF, 1, &n));
  ck_assert_ptr_null(ovl_reference_rows(NULL, 0, &n));
}
END_TEST

static Suite *reference_suite(void) {
  Suite *s = suite_create("reference");
  TCase *tc = tcase_create("reference");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_compute_ops, 0, 2);
  tcase_add_loop_test(tc, test_aliasing, 0, 2);
  tcase_add_test(tc, test_float32_stored);
  tcase_add_test(tc, test_float32_overflow);
  tcase_add_test(tc, test_float32_reduce_rounds_once);
  tcase_add_loop_test(tc, test_half_stored, 0, 2);
  tcase_add_test(tc, test_half_scale_midpoint);
  tcase_add_loop_test(tc, test_half_reduce_rounds_once, 0, 2);
  tcase_add_loop_test(tc, test_allreduce, 1, 5);
  tcase_add_loop_test(tc, test_broadcast, 1, 5);
  tcase_add_loop_test(tc, test_allgather, 1, 5);
  tcase_add_loop_test(tc, test_reducescatter, 1, 5);
  tcase_add_loop_test(tc, test_reduce, 1, 5);
  tcase_add_loop_test(tc, test_alltoall, 1, 5);
  tcase_add_test(tc, test_barrier);
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
  tcase_add_test(tc, test_fetched_out_of_range);
  tcase_add_test(tc, test_bad_ranks);
  tcase_add_test(tc, test_bad_shapes);
  tcase_add_test(tc, test_out_of_memory);
  suite_add_tcase(s, tc);

  tc = tcase_create("ranks");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_ranks_subset);
  tcase_add_loop_test(tc, test_p2p_chain, 2, 9);
  tcase_add_test(tc, test_p2p_order);
  tcase_add_loop_test(tc, test_p2p_group_shift, 1, 5);
  tcase_add_test(tc, test_coll_sequence);
  tcase_add_test(tc, test_root_expr);
  tcase_add_test(tc, test_per_rank_matches_lock_step);
  tcase_add_test(tc, test_mismatch_errors);
  tcase_add_test(tc, test_cannot_complete);
  tcase_add_test(tc, test_run_ahead);
  suite_add_tcase(s, tc);

  tc = tcase_create("check");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, test_check_tolerance_boundary, 0, 3);
  tcase_add_test(tc, test_element_rule_nonfinite);
  tcase_add_test(tc, test_check_nan);
  tcase_add_test(tc, test_check_inf);
  tcase_add_test(tc, test_check_all_match);
  tcase_add_test(tc, test_check_entries);
  tcase_add_test(tc, test_check_never_fetched);
  tcase_add_test(tc, test_check_counts_ranks);
  tcase_add_test(tc, test_check_bad_args);
  suite_add_tcase(s, tc);

  tc = tcase_create("matmul");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_matmul_values, 0, 16);
  tcase_add_test(tc, test_matmul_threads);
  tcase_add_test(tc, test_matmul_special);
  tcase_add_test(tc, test_matmul_sampled_rows);
  tcase_add_loop_test(tc, test_matmul_sampled_dependencies, 0, 2);
  tcase_add_test(tc, test_matmul_no_sampling_without);
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
