/*
 * The cpu backend's arithmetic: elementwise kernels and the reductions of
 * collectives, in the variable's dtype, expanded from the one definition of
 * every op's element math (core/elemfn.h), which the reference and the
 * CUDA kernels expand too. <tgmath.h> makes fma and fmax there resolve to
 * fmaf and fmaxf for float operands.
 *
 * float16 and bfloat16 (base/half.h) compute as the CUDA kernels and
 * NCCL's reductions do: each operand widened to float, the expression in
 * float, the result rounded once to the dtype, to nearest even. So a
 * reduction rounds at every pairwise step (rank order here; NCCL's order
 * is its ring's or tree's): on 2 ranks, one rounding of a + b.
 */
#include <string.h>
#include <tgmath.h>

#include "backend/cpu.h"
#include "base/clones.h"
#include "base/half.h"

/* On x86-64, fma and fmaf are library calls unless the compiler may use
 * the FMA instructions, which the baseline ISA lacks: the kernels are
 * built twice, and the loader picks the FMA build where the CPU has it
 * (every x86-64 CPU since 2013), so the emulated device computes the fused
 * multiply-add of `scale` at memory speed. The result is the same either
 * way: fma rounds once in both. */
#define KERNEL_CLONES OVL__CLONES("fma", "default")

/* One kernel per dtype; exact aliasing of out with x or y is fine because
 * element i is read before it is written. The scale and bias are converted
 * to T first, as the device converts them. */
#define DEFINE_ELEMENTWISE(T, SUFFIX)                                         \
  KERNEL_CLONES                                                               \
  static void elementwise_##SUFFIX(ovl__ew fn, T *out, const T *xs,           \
                                   const T *ys, double scale, double bias,    \
                                   size_t n) {                                \
    const T s = (T)scale, b = (T)bias;                                        \
    (void)s;                                                                  \
    (void)b;                                                                  \
    if (ys == NULL)                                                           \
      ys = xs;                                                                \
    switch (fn) {                                                             \
      OVL_EW_LIST(EW_CASE)                                                    \
    default:                                                                  \
      break;                                                                  \
    }                                                                         \
  }
#define EW_CASE(name, arity, expr)                                            \
  case OVL_EW_##name:                                                         \
    for (size_t i = 0; i < n; i++) {                                          \
      const __typeof__(*out) x = xs[i], y = ys[i];                            \
      (void)y;                                                                \
      out[i] = (expr);                                                        \
    }                                                                         \
    break;

DEFINE_ELEMENTWISE(float, f32)
DEFINE_ELEMENTWISE(double, f64)

/* 16-bit elements (uint16_t bit patterns): widened with WIDEN, computed in
 * float, narrowed with NARROW (once per element); the two are defined
 * around each use. The scale and bias are converted to the dtype first
 * (from the double in one step), then widened. */
#define DEFINE_ELEMENTWISE_16(SUFFIX, DTYPE)                                  \
  KERNEL_CLONES                                                               \
  static void elementwise_##SUFFIX(ovl__ew fn, uint16_t *out,                 \
                                   const uint16_t *xs, const uint16_t *ys,    \
                                   double scale, double bias, size_t n) {     \
    const float s = (float)ovl__dtype_round(DTYPE, scale);                    \
    const float b = (float)ovl__dtype_round(DTYPE, bias);                     \
    (void)s;                                                                  \
    (void)b;                                                                  \
    if (ys == NULL)                                                           \
      ys = xs;                                                                \
    switch (fn) {                                                             \
      OVL_EW_LIST(EW16_CASE)                                                  \
    default:                                                                  \
      break;                                                                  \
    }                                                                         \
  }
#define EW16_CASE(name, arity, expr)                                          \
  case OVL_EW_##name:                                                         \
    for (size_t i = 0; i < n; i++) {                                          \
      const float x = WIDEN(xs[i]), y = WIDEN(ys[i]);                         \
      (void)y;                                                                \
      out[i] = NARROW(expr);                                                  \
    }                                                                         \
    break;

#define WIDEN ovl__f16_to_f32
#define NARROW ovl__f32_to_f16
DEFINE_ELEMENTWISE_16(f16, OVL_DTYPE_FLOAT16)
#undef WIDEN
#undef NARROW
#define WIDEN ovl__bf16_to_f32
#define NARROW ovl__f32_to_bf16
DEFINE_ELEMENTWISE_16(bf16, OVL_DTYPE_BFLOAT16)
#undef WIDEN
#undef NARROW

void ovl__cpu_elementwise(ovl__ew fn, ovl_dtype dtype, void *out,
                          const void *x, const void *y, double scale,
                          double bias, size_t n) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT64:
    elementwise_f64(fn, out, x, y, scale, bias, n);
    break;
  case OVL_DTYPE_FLOAT16:
    elementwise_f16(fn, out, x, y, scale, bias, n);
    break;
  case OVL_DTYPE_BFLOAT16:
    elementwise_bf16(fn, out, x, y, scale, bias, n);
    break;
  default:
    elementwise_f32(fn, out, x, y, scale, bias, n);
    break;
  }
}

/* acc = op(acc, v) for a block (core/elemfn.h, OVL_RED_LIST): max and min
 * follow fmax/fmin, as NCCL's do, so a NaN loses to a number. */
#define DEFINE_REDUCE(T, SUFFIX)                                              \
  static void reduce_##SUFFIX(ovl__redop op, T *acc, const T *v, size_t n) { \
    switch (op) {                                                             \
      OVL_RED_LIST(RED_CASE)                                                  \
    default:                                                                  \
      break;                                                                  \
    }                                                                         \
  }
#define RED_CASE(name, expr, premul)                                         \
  case OVL_RED_##name:                                                        \
    for (size_t i = 0; i < n; i++) {                                          \
      const __typeof__(*acc) a = acc[i], b = v[i];                            \
      acc[i] = (expr);                                                        \
    }                                                                         \
    break;

DEFINE_REDUCE(float, f32)
DEFINE_REDUCE(double, f64)

/* The same on 16-bit elements: each step widened, in float, rounded. */
#define DEFINE_REDUCE_16(SUFFIX)                                              \
  static void reduce_##SUFFIX(ovl__redop op, uint16_t *acc,                   \
                              const uint16_t *v, size_t n) {                  \
    switch (op) {                                                             \
      OVL_RED_LIST(RED16_CASE)                                                \
    default:                                                                  \
      break;                                                                  \
    }                                                                         \
  }
#define RED16_CASE(name, expr, premul)                                        \
  case OVL_RED_##name:                                                        \
    for (size_t i = 0; i < n; i++) {                                          \
      const float a = WIDEN(acc[i]), b = WIDEN(v[i]);                         \
      acc[i] = NARROW(expr);                                                  \
    }                                                                         \
    break;

#define WIDEN ovl__f16_to_f32
#define NARROW ovl__f32_to_f16
DEFINE_REDUCE_16(f16)
#undef WIDEN
#undef NARROW
#define WIDEN ovl__bf16_to_f32
#define NARROW ovl__f32_to_bf16
DEFINE_REDUCE_16(bf16)
#undef WIDEN
#undef NARROW

static void reduce_block(ovl_dtype dtype, ovl__redop op, void *acc,
                         const void *v, size_t n) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT64:
    reduce_f64(op, acc, v, n);
    break;
  case OVL_DTYPE_FLOAT16:
    reduce_f16(op, acc, v, n);
    break;
  case OVL_DTYPE_BFLOAT16:
    reduce_bf16(op, acc, v, n);
    break;
  default:
    reduce_f32(op, acc, v, n);
    break;
  }
}

/* Whether the reduction multiplies every input by 1/nranks first
 * (avg, as NCCL's PreMulSum). */
static bool premul(ovl__redop op) {
  static const bool pre[] = {
#define RED_PREMUL(name, expr, pm) pm,
      OVL_RED_LIST(RED_PREMUL)
#undef RED_PREMUL
  };
  return pre[op];
}

/* dst = src * (1/nranks) for a block, in the dtype: 1/nranks converted to
 * the dtype, each product rounded. */
static void premul_block(ovl_dtype dtype, void *dst, const void *src,
                         size_t n, int nranks) {
  if (dtype == OVL_DTYPE_FLOAT64) {
    const double s = 1.0 / nranks, *x = src;
    double *d = dst;
    for (size_t i = 0; i < n; i++)
      d[i] = x[i] * s;
  } else if (dtype == OVL_DTYPE_FLOAT16) {
    const float s = (float)ovl__dtype_round(dtype, 1.0 / nranks);
    const uint16_t *x = src;
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++)
      d[i] = ovl__f32_to_f16(ovl__f16_to_f32(x[i]) * s);
  } else if (dtype == OVL_DTYPE_BFLOAT16) {
    const float s = (float)ovl__dtype_round(dtype, 1.0 / nranks);
    const uint16_t *x = src;
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++)
      d[i] = ovl__f32_to_bf16(ovl__bf16_to_f32(x[i]) * s);
  } else {
    const float s = (float)(1.0 / nranks), *x = src;
    float *d = dst;
    for (size_t i = 0; i < n; i++)
      d[i] = x[i] * s;
  }
}

/* acc = op(acc, v) for a block of rank q's input v, premultiplied where
 * the reduction says so (tmp: room for a block). */
static void fold_block(ovl_dtype dtype, ovl__redop op, void *acc,
                       const void *v, void *tmp, size_t n, int nranks) {
  if (premul(op)) {
    premul_block(dtype, tmp, v, n, nranks);
    v = tmp;
  }
  reduce_block(dtype, op, acc, v, n);
}

/* acc = rank 0's input v for a block, premultiplied where the reduction
 * says so. */
static void first_block(ovl_dtype dtype, ovl__redop op, void *acc,
                        const void *v, size_t n, int nranks) {
  if (premul(op))
    premul_block(dtype, acc, v, n, nranks);
  else
    memcpy(acc, v, n * ovl_dtype_size(dtype));
}

/* The last rank to arrive runs this for all, outside the ring lock: the
 * others wait for SLOT_DONE, so their buffers stay put. */
void ovl__cpu_collective_compute(const slot *sl, int nranks) {
  const arrival *a0 = &sl->a[0];
  const size_t esize = ovl_dtype_size(a0->dtype);
  const size_t count = a0->count;
  union {
    float f[BLOCK];
    double d[BLOCK];
  } acc, tmp;

  switch (a0->coll) {
  case OVL_COLL_ALLREDUCE:
    for (size_t off = 0; off < count; off += BLOCK) {
      size_t n = count - off < BLOCK ? count - off : BLOCK;
      first_block(a0->dtype, a0->redop, &acc,
                  (const char *)sl->a[0].send + off * esize, n, nranks);
      for (int q = 1; q < nranks; q++)
        fold_block(a0->dtype, a0->redop, &acc,
                   (const char *)sl->a[q].send + off * esize, &tmp, n,
                   nranks);
      for (int r = 0; r < nranks; r++)
        if (sl->a[r].recv != NULL)
          memcpy((char *)sl->a[r].recv + off * esize, &acc, n * esize);
    }
    break;
  case OVL_COLL_REDUCESCATTER:
    /* recv_r = reduction of the r-th piece of every send. In place (recv_r
     * inside send_r at r * count) reads each block before writing it. */
    for (int r = 0; r < nranks; r++) {
      if (sl->a[r].recv == NULL)
        continue;
      for (size_t off = 0; off < count; off += BLOCK) {
        size_t n = count - off < BLOCK ? count - off : BLOCK;
        size_t src = ((size_t)r * count + off) * esize;
        first_block(a0->dtype, a0->redop, &acc,
                    (const char *)sl->a[0].send + src, n, nranks);
        for (int q = 1; q < nranks; q++)
          fold_block(a0->dtype, a0->redop, &acc,
                     (const char *)sl->a[q].send + src, &tmp, n, nranks);
        memcpy((char *)sl->a[r].recv + off * esize, &acc, n * esize);
      }
    }
    break;
  case OVL_COLL_BROADCAST: {
    const void *src = sl->a[a0->root].send;
    for (int r = 0; r < nranks; r++)
      if (sl->a[r].recv != NULL && sl->a[r].recv != src)
        memmove(sl->a[r].recv, src, count * esize);
    break;
  }
  case OVL_COLL_ALLGATHER:
    for (int r = 0; r < nranks; r++)
      for (int q = 0; q < nranks && sl->a[r].recv != NULL; q++) {
        char *dst = (char *)sl->a[r].recv + (size_t)q * count * esize;
        if (dst != sl->a[q].send)
          memmove(dst, sl->a[q].send, count * esize);
      }
    break;
  case OVL_COLL_REDUCE:
    /* Only the root's output is written (NCCL uses recvbuff on the root
     * only); in place there, each block is read from every rank first. */
    for (size_t off = 0; off < count && sl->a[a0->root].recv != NULL;
         off += BLOCK) {
      size_t n = count - off < BLOCK ? count - off : BLOCK;
      first_block(a0->dtype, a0->redop, &acc,
                  (const char *)sl->a[0].send + off * esize, n, nranks);
      for (int q = 1; q < nranks; q++)
        fold_block(a0->dtype, a0->redop, &acc,
                   (const char *)sl->a[q].send + off * esize, &tmp, n,
                   nranks);
      memcpy((char *)sl->a[a0->root].recv + off * esize, &acc, n * esize);
    }
    break;
  case OVL_COLL_ALLTOALL: {
    /* Part j of rank i's input lands at part i of rank j's output (never
     * in place: the executor and the backend refuse send == recv). */
    size_t part = count / (size_t)nranks * esize;
    for (int i = 0; i < nranks; i++)
      for (int j = 0; j < nranks; j++)
        if (sl->a[j].recv != NULL)
          memcpy((char *)sl->a[j].recv + (size_t)i * part,
               (const char *)sl->a[i].send + (size_t)j * part, part);
    break;
  }
  case OVL_COLL_BARRIER:
    break; /* every rank met: nothing to move */
  }
}
