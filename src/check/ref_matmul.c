/*
 * The reference's heavy loops (check/reference.h): some rows of a matrix
 * product in float64, and a parallel for; both on every online CPU.
 *
 * Each output element of a matmul is the sum of its K products in double,
 * in order of t (t = 0, 1, ..., K - 1: one running sum per element; the
 * order a cuBLAS kernel uses is its own, and the difference is far below
 * the rounding of any dtype but float64's). The caller rounds the result
 * to the output's dtype.
 *
 * Speed: a fetched value computed from a matmul is checked on sampled
 * rows (reference.c), so this computes R rows of an M x N x K product, R
 * * N * K multiply-adds. The R rows of op(x) are gathered once (R x K,
 * contiguous). The columns are cut into panels of JW; threads take panels
 * in turn. For a panel, op(y)'s K x JW block is copied into contiguous
 * memory (a transpose when y is transposed), KC rows of it at a time (128
 * KB: it stays in the core's L2 cache), and a register-blocked kernel runs
 * RG rows of the result against it: 2 x RG vectors of 8 running sums, each
 * step one broadcast of op(x)[i, t] per row and two vector loads of the
 * block's row t. Built for AVX-512, AVX2 and baseline x86-64 (the loader
 * picks), as the cpu backend's kernels are.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clones.h"
#include "check/reference.h"

/* Columns of a panel, rows of a register block, rows of a K block. */
#define JW 16
#define RG 4
#define KC 1024
/* Multiply-adds (or elements) below which one thread does it all. */
#define MIN_WORK_PER_THREAD (1u << 22)
#define MAX_THREADS 64

/* The product's inner loop for AVX-512 and AVX2 machines (base/clones.h). */
#define KERNEL_CLONES                                                         \
  OVL__CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default")

/* ------------------------------------------------------------------ */
/* A parallel for                                                      */
/* ------------------------------------------------------------------ */

typedef struct pf_job {
  void (*fn)(void *ctx, size_t lo, size_t hi);
  void *ctx;
  size_t lo, hi;
} pf_job;

static void *pf_main(void *arg) {
  pf_job *j = arg;
  if (j->lo < j->hi)
    j->fn(j->ctx, j->lo, j->hi);
  return NULL;
}

size_t ovl__ref_threads(double work) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t t = cpus > 0 ? (size_t)cpus : 1;
  double by_work = work / MIN_WORK_PER_THREAD;
  if ((double)t > by_work)
    t = (size_t)by_work;
  if (t > MAX_THREADS)
    t = MAX_THREADS;
  return t < 1 ? 1 : t;
}

void ovl__ref_parallel(size_t n, size_t nthreads,
                       void (*fn)(void *ctx, size_t lo, size_t hi),
                       void *ctx) {
  pf_job jobs[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  bool started[MAX_THREADS] = {false};
  if (nthreads > n)
    nthreads = n;
  if (nthreads > MAX_THREADS)
    nthreads = MAX_THREADS;
  if (nthreads <= 1) {
    if (n > 0)
      fn(ctx, 0, n);
    return;
  }
  for (size_t w = 0; w < nthreads; w++) {
    jobs[w].fn = fn;
    jobs[w].ctx = ctx;
    jobs[w].lo = n * w / nthreads;
    jobs[w].hi = n * (w + 1) / nthreads;
  }
  /* Job 0 runs here; a thread that cannot start leaves its job to this
   * thread too. */
  for (size_t w = 1; w < nthreads; w++)
    started[w] = pthread_create(&th[w], NULL, pf_main, &jobs[w]) == 0;
  pf_main(&jobs[0]);
  for (size_t w = 1; w < nthreads; w++) {
    if (started[w])
      pthread_join(th[w], NULL);
    else
      pf_main(&jobs[w]);
  }
}

/* ------------------------------------------------------------------ */
/* The matmul                                                          */
/* ------------------------------------------------------------------ */

typedef double v8 __attribute__((vector_size(64)));

typedef struct mm_ctx {
  double *out;
  const double *y;
  size_t n, k;
  bool ty;
  const double *xr;    /* the rows of op(x), nrows x k */
  const double *zeros; /* k zeros: the rows of a last, partial group */
  const int64_t *rows; /* the rows of out, or NULL: 0 .. nrows - 1 */
  size_t nrows;
  atomic_bool nomem;   /* a thread found no memory */
} mm_ctx;

/* acc[r][0..JW) += sum over t < kb of xr[r][t] * panel[t][0..JW), for the
 * RG rows xr[0..RG), in order of t. */
KERNEL_CLONES
static void mm_block(const double *const *xr, const double *panel,
                     size_t kb, double *acc) {
  v8 c[RG][2];
  memcpy(c, acc, sizeof c);
  for (size_t t = 0; t < kb; t++) {
    v8 p0, p1;
    memcpy(&p0, panel + t * JW, sizeof p0);
    memcpy(&p1, panel + t * JW + 8, sizeof p1);
    for (int r = 0; r < RG; r++) {
      const double a = xr[r][t];
      c[r][0] += a * p0;
      c[r][1] += a * p1;
    }
  }
  memcpy(acc, c, sizeof c);
}

/* Panels [lo, hi) of the columns. */
static void mm_panels(void *arg, size_t lo, size_t hi) {
  mm_ctx *m = arg;
  const size_t n = m->n, k = m->k, nrows = m->nrows;
  double *panel = malloc(KC * JW * sizeof *panel + 64);
  double *acc = malloc((nrows + RG) * JW * sizeof *acc + 64);
  if (panel == NULL || acc == NULL) {
    atomic_store(&m->nomem, true);
    free(panel);
    free(acc);
    return;
  }
  for (size_t pi = lo; pi < hi; pi++) {
    size_t j0 = pi * JW, jw = n - j0 < JW ? n - j0 : JW;
    memset(acc, 0, (nrows + RG) * JW * sizeof *acc);
    for (size_t t0 = 0; t0 < k; t0 += KC) {
      size_t kb = k - t0 < KC ? k - t0 : KC;
      /* op(y)[t0 + t, j0 + j]: y[j0 + j, t0 + t] transposed, else y[t0 +
       * t, j0 + j]; columns past n are zero. */
      for (size_t t = 0; t < kb; t++)
        for (size_t j = 0; j < JW; j++)
          panel[t * JW + j] =
              j >= jw  ? 0.0
              : m->ty ? m->y[(j0 + j) * k + t0 + t]
                      : m->y[(t0 + t) * n + j0 + j];
      for (size_t q0 = 0; q0 < nrows; q0 += RG) {
        const double *xr[RG];
        for (int r = 0; r < RG; r++)
          xr[r] = q0 + (size_t)r < nrows ? m->xr + (q0 + (size_t)r) * k + t0
                                          : m->zeros;
        mm_block(xr, panel, kb, acc + q0 * JW);
      }
    }
    for (size_t q = 0; q < nrows; q++) {
      size_t i = m->rows != NULL ? (size_t)m->rows[q] : q;
      memcpy(m->out + i * n + j0, acc + q * JW, jw * sizeof *acc);
    }
  }
  free(panel);
  free(acc);
}

bool ovl__ref_matmul(double *out, const double *x, const double *y,
                     size_t m, size_t n, size_t k, bool tx, bool ty,
                     const int64_t *rows, size_t nrows) {
  mm_ctx c = {0};
  double *xr, *zeros;
  atomic_init(&c.nomem, false);
  size_t npanels = (n + JW - 1) / JW;

  if (rows == NULL)
    nrows = m;
  if (nrows == 0 || n == 0)
    return true;
  xr = malloc(nrows * k * sizeof *xr + 1);
  zeros = calloc(k + 1, sizeof *zeros);
  if (xr == NULL || zeros == NULL) {
    free(xr);
    free(zeros);
    return false;
  }
  /* The rows of op(x): x's rows, or its columns when transposed. */
  for (size_t q = 0; q < nrows; q++) {
    size_t i = rows != NULL ? (size_t)rows[q] : q;
    if (tx)
      for (size_t t = 0; t < k; t++)
        xr[q * k + t] = x[t * m + i];
    else
      memcpy(xr + q * k, x + i * k, k * sizeof *xr);
  }
  c.out = out;
  c.y = y;
  c.n = n;
  c.k = k;
  c.ty = ty;
  c.xr = xr;
  c.zeros = zeros;
  c.rows = rows;
  c.nrows = nrows;
  ovl__ref_parallel(npanels,
                    ovl__ref_threads((double)nrows * (double)n * (double)k),
                    mm_panels, &c);
  free(xr);
  free(zeros);
  return !atomic_load(&c.nomem);
}
