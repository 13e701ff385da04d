/*
 * The cpu backend's matrix multiply (matmul_v2): out[M, N] = op(x) @
 * op(y), row-major, op() the transpose where trans_x / trans_y says so.
 *
 * Correct, not fast: the emulated device runs small schedules. Tiles of
 * op(x) and op(y) are copied into contiguous blocks in the accumulation
 * type (float for float32, float16 and bfloat16, as cuBLAS accumulates
 * them; double for float64), so that the inner loop
 * runs over contiguous memory whatever the transposes; each output
 * element is the sum of its K products in order (t = 0, 1, ..., K - 1),
 * accumulated in that type and converted to the dtype once, at the end.
 * NaN, infinities and signed zeros follow IEEE arithmetic in the
 * accumulation type.
 */
#include <string.h>

#include "backend/cpu.h"
#include "base/half.h"

/* Tile sizes: an output tile of TM x TN accumulators, fed by TM x TK of
 * op(x) and TK x TN of op(y); 88 KB of doubles, on the worker's stack. */
#define TM 16
#define TN 64
#define TK 128

/* One dtype: S the stored type, A the accumulation type, LOAD(s) an
 * element as A (exact), STORE(a) the sum rounded to S. */
#define DEFINE_MATMUL(S, A, SUFFIX, LOAD, STORE)                              \
  static void matmul_##SUFFIX(S *out, const S *x, const S *y, size_t m,      \
                              size_t n, size_t k, bool tx, bool ty) {         \
    A a[TM][TK], b[TK][TN], c[TM][TN];                                        \
    for (size_t i0 = 0; i0 < m; i0 += TM) {                                   \
      size_t mb = m - i0 < TM ? m - i0 : TM;                                  \
      for (size_t j0 = 0; j0 < n; j0 += TN) {                                 \
        size_t nb = n - j0 < TN ? n - j0 : TN;                                \
        for (size_t i = 0; i < mb; i++)                                       \
          for (size_t j = 0; j < nb; j++)                                     \
            c[i][j] = 0;                                                      \
        for (size_t t0 = 0; t0 < k; t0 += TK) {                               \
          size_t kb = k - t0 < TK ? k - t0 : TK;                              \
          /* op(x)[i, t] is x[t, i] transposed, else x[i, t]. */              \
          for (size_t i = 0; i < mb; i++)                                     \
            for (size_t t = 0; t < kb; t++)                                   \
              a[i][t] = LOAD(tx ? x[(t0 + t) * m + i0 + i]                    \
                                : x[(i0 + i) * k + t0 + t]);                  \
          /* op(y)[t, j] is y[j, t] transposed, else y[t, j]. */              \
          for (size_t t = 0; t < kb; t++)                                     \
            for (size_t j = 0; j < nb; j++)                                   \
              b[t][j] = LOAD(ty ? y[(j0 + j) * k + t0 + t]                    \
                                : y[(t0 + t) * n + j0 + j]);                  \
          for (size_t i = 0; i < mb; i++)                                     \
            for (size_t t = 0; t < kb; t++) {                                 \
              const A av = a[i][t];                                           \
              for (size_t j = 0; j < nb; j++)                                 \
                c[i][j] += av * b[t][j];                                      \
            }                                                                 \
        }                                                                     \
        for (size_t i = 0; i < mb; i++)                                       \
          for (size_t j = 0; j < nb; j++)                                     \
            out[(i0 + i) * n + j0 + j] = STORE(c[i][j]);                     \
      }                                                                       \
    }                                                                         \
  }

#define SAME(v) (v)
DEFINE_MATMUL(float, float, f32, SAME, SAME)
DEFINE_MATMUL(double, double, f64, SAME, SAME)
DEFINE_MATMUL(uint16_t, float, f16, ovl__f16_to_f32, ovl__f32_to_f16)
DEFINE_MATMUL(uint16_t, float, bf16, ovl__bf16_to_f32, ovl__f32_to_bf16)

void ovl__cpu_matmul(ovl_dtype dtype, void *out, const void *x,
                     const void *y, size_t m, size_t n, size_t k, bool tx,
                     bool ty) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT64:
    matmul_f64(out, x, y, m, n, k, tx, ty);
    break;
  case OVL_DTYPE_FLOAT16:
    matmul_f16(out, x, y, m, n, k, tx, ty);
    break;
  case OVL_DTYPE_BFLOAT16:
    matmul_bf16(out, x, y, m, n, k, tx, ty);
    break;
  default:
    matmul_f32(out, x, y, m, n, k, tx, ty);
    break;
  }
}
