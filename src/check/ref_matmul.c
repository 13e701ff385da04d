/*
 * The reference's matrix multiply (check/reference.h): some rows of
 * op(x) @ op(y) in float64, on every core.
 *
 * Each output element is the sum of its K products in double, in order of
 * t (one partial sum per element: the order a cuBLAS kernel uses is its
 * own, and the difference is far below any dtype's rounding but
 * float64's). The caller rounds the result to the output's dtype.
 *
 * Speed: the fetched values of a matmul are checked on sampled rows
 * (reference.c), so this computes R rows of an M x N x K product: R * N *
 * K multiply-adds. The columns are split among threads (one per online
 * CPU, fewer for small products); each takes up to RB rows at a time and
 * streams op(y) once per group of rows:
 *   - y not transposed (op(y) row t is y's row t): for a tile of JB
 *     columns, acc[r][j] += op(x)[i_r, t] * y[t, j] over t, so the inner
 *     loop runs over contiguous y and acc and vectorizes;
 *   - y transposed (op(y) column j is y's row j): for each column j,
 *     acc[r] += op(x)[i_r, t] * y[j, t] over t, with op(x)'s RB rows
 *     interleaved (xt[t][r]) so that the RB sums are independent and the
 *     loop over r vectorizes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/reference.h"

/* Rows at a time, and columns of a tile (RB x JB doubles of sums: 32 KB). */
#define RB 16
#define JB 256
/* Multiply-adds below which one thread does it all, and per thread at
 * least. */
#define MIN_WORK_PER_THREAD (1u << 22)
#define MAX_THREADS 64

typedef struct mm_job {
  double *out;
  const double *x, *y;
  size_t m, n, k;
  bool tx, ty;
  const int64_t *rows; /* the rows, or NULL: 0 .. nrows - 1 */
  size_t nrows;
  size_t j0, j1; /* this job's columns */
  bool nomem;
} mm_job;

static size_t row_at(const mm_job *jb, size_t q) {
  return jb->rows != NULL ? (size_t)jb->rows[q] : q;
}

/* Rows q0 .. q0 + rb of the job, columns [j0, j1); xr holds op(x)'s rows
 * (rb x k), xt the same interleaved (k x RB). */
static void mm_rows(const mm_job *jb, size_t q0, size_t rb, double *xr,
                    double *xt) {
  const size_t m = jb->m, n = jb->n, k = jb->k;
  for (size_t r = 0; r < rb; r++) {
    size_t i = row_at(jb, q0 + r);
    if (jb->tx)
      for (size_t t = 0; t < k; t++)
        xr[r * k + t] = jb->x[t * m + i];
    else
      memcpy(xr + r * k, jb->x + i * k, k * sizeof *xr);
  }
  if (!jb->ty) {
    double acc[RB][JB];
    for (size_t c0 = jb->j0; c0 < jb->j1; c0 += JB) {
      size_t nb = jb->j1 - c0 < JB ? jb->j1 - c0 : JB;
      for (size_t r = 0; r < rb; r++)
        for (size_t j = 0; j < nb; j++)
          acc[r][j] = 0.0;
      for (size_t t = 0; t < k; t++) {
        const double *yt = jb->y + t * n + c0;
        for (size_t r = 0; r < rb; r++) {
          const double a = xr[r * k + t];
          for (size_t j = 0; j < nb; j++)
            acc[r][j] += a * yt[j];
        }
      }
      for (size_t r = 0; r < rb; r++)
        memcpy(jb->out + row_at(jb, q0 + r) * n + c0, acc[r],
               nb * sizeof(double));
    }
    return;
  }
  for (size_t t = 0; t < k; t++)
    for (size_t r = 0; r < RB; r++)
      xt[t * RB + r] = r < rb ? xr[r * k + t] : 0.0;
  for (size_t j = jb->j0; j < jb->j1; j++) {
    const double *yj = jb->y + j * k;
    double acc[RB] = {0};
    for (size_t t = 0; t < k; t++) {
      const double b = yj[t];
      for (size_t r = 0; r < RB; r++)
        acc[r] += xt[t * RB + r] * b;
    }
    for (size_t r = 0; r < rb; r++)
      jb->out[row_at(jb, q0 + r) * n + j] = acc[r];
  }
}

static void *mm_main(void *arg) {
  mm_job *jb = arg;
  double *xr = malloc(RB * jb->k * sizeof *xr + 1);
  double *xt = jb->ty ? malloc(RB * jb->k * sizeof *xt + 1) : NULL;
  if (xr == NULL || (jb->ty && xt == NULL)) {
    jb->nomem = true;
  } else {
    for (size_t q0 = 0; q0 < jb->nrows; q0 += RB)
      mm_rows(jb, q0, jb->nrows - q0 < RB ? jb->nrows - q0 : RB, xr, xt);
  }
  free(xr);
  free(xt);
  return NULL;
}

/* Threads for `work` multiply-adds over n columns. */
static size_t mm_threads(double work, size_t n) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t t = cpus > 0 ? (size_t)cpus : 1;
  size_t by_work = (size_t)(work / MIN_WORK_PER_THREAD);
  if (t > by_work)
    t = by_work;
  if (t > n / 16)
    t = n / 16; /* at least 16 columns a thread */
  if (t > MAX_THREADS)
    t = MAX_THREADS;
  return t < 1 ? 1 : t;
}

bool ovl__ref_matmul(double *out, const double *x, const double *y,
                     size_t m, size_t n, size_t k, bool tx, bool ty,
                     const int64_t *rows, size_t nrows) {
  mm_job jobs[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  bool started[MAX_THREADS] = {false};
  size_t nt;
  bool ok = true;

  if (rows == NULL)
    nrows = m;
  if (nrows == 0 || n == 0)
    return true;
  nt = mm_threads((double)nrows * (double)n * (double)k, n);
  for (size_t w = 0; w < nt; w++) {
    mm_job *jb = &jobs[w];
    jb->out = out;
    jb->x = x;
    jb->y = y;
    jb->m = m;
    jb->n = n;
    jb->k = k;
    jb->tx = tx;
    jb->ty = ty;
    jb->rows = rows;
    jb->nrows = nrows;
    jb->j0 = n * w / nt;
    jb->j1 = n * (w + 1) / nt;
    jb->nomem = false;
  }
  /* Job 0 runs here; a thread that cannot start leaves its job to this
   * thread too. */
  for (size_t w = 1; w < nt; w++)
    started[w] = pthread_create(&th[w], NULL, mm_main, &jobs[w]) == 0;
  mm_main(&jobs[0]);
  for (size_t w = 1; w < nt; w++) {
    if (started[w])
      pthread_join(th[w], NULL);
    else
      mm_main(&jobs[w]);
  }
  for (size_t w = 0; w < nt; w++)
    ok = ok && !jobs[w].nomem;
  return ok;
}
