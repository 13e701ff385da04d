/*
 * CUDA kernels of the cuda backend: elementwise compute ops and the delay
 * spin. See kernels.h for the contract of each launcher.
 *
 * The elementwise kernels are memory bound; what matters is keeping enough
 * bytes in flight to saturate HBM:
 *   - 16-byte accesses (float4 / double2) when all pointers are equally far
 *     from a 16-byte boundary, after a few single elements if that distance
 *     is not 0 (cudaMalloc'd buffers: it is 0);
 *   - a grid-stride loop whose body first issues UNROLL independent loads
 *     per input and only then computes and stores: 64 bytes per input per
 *     thread in flight. The binary ops need about 64 registers for that, so
 *     4 blocks of 256 threads are resident per SM: 128 KiB of loads in
 *     flight per SM, several times what HBM latency needs. The scalar path
 *     (pointers that disagree modulo 16) loads as many bytes per trip, in
 *     single elements;
 *   - a grid of exactly the blocks that are resident at once (one wave, no
 *     tail wave; the CUDA occupancy calculator says how many), fewer when n
 *     is small.
 * No __restrict__: out may alias x or y. Plain loads are as fast as the
 * read-only path for data that is streamed through once.
 *
 * Measured on one H200 (CUDA 13.0), 2^26 elements, against cudaMemcpy
 * device to device counted the same way (bytes read + written, 4.15 TB/s):
 * aligned assign/scale 91-93%, add/sub/mul 97-98% (float32 and float64);
 * equally misaligned buffers 78-94%, mismatched ones (scalar path) 80-96%.
 * At the seed's 10^7 floats, which partly stay in the 60 MB L2, every op
 * runs at or above the copy's rate.
 *
 * float16 and bfloat16 elements move the same way (16-byte vectors of 8)
 * and compute in float, each result rounded once (Elem below).
 */
#include <stdint.h>

#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/kernels.h"

namespace {

const int THREADS = 256;
/* Items per thread and loop trip: 4 vectors of 16 bytes, or as many bytes
 * in single elements (16 floats, 8 doubles) on the scalar path. */
const int UNROLL = 4;
template <typename T> struct ScalarUnroll {
  static const int value = UNROLL * 16 / (int)sizeof(T);
};
/* Used when the occupancy calculator fails (it should not). */
const int FALLBACK_BLOCKS_PER_SM = 4;

template <int FN> struct HasY {
  static const bool value = false;
};
#define OVL__HAS_Y(name, arity, expr)                                        \
  template <> struct HasY<OVL_EW_##name> {                                   \
    static const bool value = (arity) == 2;                                  \
  };
OVL_EW_LIST(OVL__HAS_Y)
#undef OVL__HAS_Y

/* An element type T and the type C its ops compute in: float and double
 * compute in themselves; float16 and bfloat16 in float, each result
 * rounded once to the element type, to nearest even (__float2half_rn,
 * __float2bfloat16_rn: an overflow is an infinity, a NaN stays a NaN), as
 * the cpu backend does (base/half.h). `param` is a scale or bias as the
 * kernel uses it: converted to T (to nearest even, from the double in one
 * step), held as a C. */
template <typename T> struct Elem; /* only the four below */
template <typename T> struct ElemSelf {
  typedef T C;
  static __device__ __forceinline__ C load(T v) { return v; }
  static __device__ __forceinline__ T store(C v) { return v; }
  static C param(double v) { return (T)v; }
};
template <> struct Elem<float> : ElemSelf<float> {};
template <> struct Elem<double> : ElemSelf<double> {};
template <> struct Elem<__half> {
  typedef float C;
  static __device__ __forceinline__ float load(__half v) {
    return __half2float(v);
  }
  static __device__ __forceinline__ __half store(float v) {
    return __float2half_rn(v);
  }
  static float param(double v) { return __half2float(__double2half(v)); }
};
template <> struct Elem<__nv_bfloat16> {
  typedef float C;
  static __device__ __forceinline__ float load(__nv_bfloat16 v) {
    return __bfloat162float(v);
  }
  static __device__ __forceinline__ __nv_bfloat16 store(float v) {
    return __float2bfloat16_rn(v);
  }
  static float param(double v) {
    return __bfloat162float(__double2bfloat16(v));
  }
};

/* One element: the expression of OVL_EW_LIST (core/elemfn.h), in C. fma,
 * fmax resolve to the float or double overloads of CUDA's math library,
 * which round correctly (fma is one fused rounding); nothing else is
 * fused: the build passes no fast-math flag, and one operation leaves the
 * compiler nothing to contract. */
template <int FN, typename C>
__device__ __forceinline__ C apply_c(C x, C y, C s, C b) {
  switch (FN) {
#define OVL__EW_APPLY(name, arity, expr)                                      \
  case OVL_EW_##name:                                                         \
    return (expr);
    OVL_EW_LIST(OVL__EW_APPLY)
#undef OVL__EW_APPLY
  default:
    return x;
  }
}

/* One element of type T: widened, computed, rounded once. */
template <int FN, typename T>
__device__ __forceinline__ T apply(T x, T y, typename Elem<T>::C s,
                                   typename Elem<T>::C b) {
  return Elem<T>::store(
      apply_c<FN>(Elem<T>::load(x), Elem<T>::load(y), s, b));
}

/* 16 bytes of 16-bit elements. */
template <typename T> struct __align__(16) Vec8 {
  T v[8];
};

/* A 16-byte vector, lane by lane. */
template <int FN>
__device__ __forceinline__ float4 apply(float4 x, float4 y, float s,
                                        float b) {
  return make_float4(apply<FN>(x.x, y.x, s, b), apply<FN>(x.y, y.y, s, b),
                     apply<FN>(x.z, y.z, s, b), apply<FN>(x.w, y.w, s, b));
}
template <int FN>
__device__ __forceinline__ double2 apply(double2 x, double2 y, double s,
                                         double b) {
  return make_double2(apply<FN>(x.x, y.x, s, b), apply<FN>(x.y, y.y, s, b));
}
template <int FN, typename T>
__device__ __forceinline__ Vec8<T> apply(Vec8<T> x, Vec8<T> y, float s,
                                         float b) {
  Vec8<T> r;
#pragma unroll
  for (int k = 0; k < 8; k++)
    r.v[k] = apply<FN>(x.v[k], y.v[k], s, b);
  return r;
}

/* The grid-stride loop over n items of type E (elements, E == T, or
 * 16-byte vectors of them), U items per thread and trip; C is the type
 * the elements compute in. */
template <int FN, int U, typename E, typename C>
__device__ __forceinline__ void ew_loop(E *out, const E *x, const E *y, C s,
                                        C b, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride * U) {
    E xs[U], ys[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t j = i + u * stride;
      if (j < n) {
        xs[u] = x[j];
        ys[u] = HasY<FN>::value ? y[j] : xs[u];
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t j = i + u * stride;
      if (j < n)
        out[j] = apply<FN>(xs[u], ys[u], s, b);
    }
  }
}

template <typename T> struct Vec16;
template <> struct Vec16<float> {
  typedef float4 type;
  static const int width = 4;
};
template <> struct Vec16<double> {
  typedef double2 type;
  static const int width = 2;
};
template <> struct Vec16<__half> {
  typedef Vec8<__half> type;
  static const int width = 8;
};
template <> struct Vec16<__nv_bfloat16> {
  typedef Vec8<__nv_bfloat16> type;
  static const int width = 8;
};

/* Elements [head, head + nvec * width) are 16-byte aligned in all three
 * arrays and move as vectors; the `head` elements before them and the
 * fewer than width after them go one per thread to the first threads of
 * the grid. */
template <int FN, typename T>
__global__ void __launch_bounds__(THREADS)
    ew_vec_kernel(T *out, const T *x, const T *y, typename Elem<T>::C s,
                  typename Elem<T>::C b, size_t head, size_t nvec,
                  size_t n) {
  typedef typename Vec16<T>::type V;
  const int W = Vec16<T>::width;
  ew_loop<FN, UNROLL, V>(reinterpret_cast<V *>(out + head),
                            reinterpret_cast<const V *>(x + head),
                            reinterpret_cast<const V *>(y + head), s, b,
                            nvec);
  const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < head)
    out[t] = apply<FN>(x[t], HasY<FN>::value ? y[t] : x[t], s, b);
  const size_t u = head + nvec * W + t;
  if (u < n)
    out[u] = apply<FN>(x[u], HasY<FN>::value ? y[u] : x[u], s, b);
}

/* Pointers that disagree modulo 16 bytes: one element per access. */
template <int FN, typename T>
__global__ void __launch_bounds__(THREADS)
    ew_scalar_kernel(T *out, const T *x, const T *y, typename Elem<T>::C s,
                     typename Elem<T>::C b, size_t n) {
  ew_loop<FN, ScalarUnroll<T>::value, T>(out, x, y, s, b, n);
}

unsigned misalign16(const void *p) { return (unsigned)((uintptr_t)p & 15u); }

/* Blocks of `kernel` one multiprocessor holds at once. Asked once per
 * kernel and remembered (`cache`, 0 until known): every rank's device is
 * assumed to be of the same kind, and a wrong guess on a mixed machine only
 * costs a partial second wave. */
template <typename K>
int blocks_per_sm(K kernel, std::atomic<int> *cache) {
  int n = cache->load(std::memory_order_relaxed);
  if (n > 0)
    return n;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, THREADS,
                                                    0) != cudaSuccess ||
      n < 1) {
    (void)cudaGetLastError();
    n = FALLBACK_BLOCKS_PER_SM;
  }
  cache->store(n, std::memory_order_relaxed);
  return n;
}

/* Blocks for `items` work items taken `unroll` at a time by each thread:
 * enough for one pass over them, at most one full wave. */
unsigned grid_size(int sm_count, int per_sm, size_t items, int unroll) {
  const size_t per_block = (size_t)THREADS * unroll;
  size_t blocks = (items + per_block - 1) / per_block;
  size_t cap = (size_t)(sm_count > 0 ? sm_count : 1) * per_sm;
  if (blocks > cap)
    blocks = cap;
  if (blocks < 1)
    blocks = 1;
  return (unsigned)blocks;
}

template <int FN, typename T>
cudaError_t ew_launch(cudaStream_t stream, int sm_count, void *out,
                      const void *x, const void *y, double scale,
                      double bias, size_t n) {
  T *o = static_cast<T *>(out);
  const T *xp = static_cast<const T *>(x);
  /* Unused by ASSIGN and SCALE, which may pass NULL: give them x. */
  const T *yp = HasY<FN>::value ? static_cast<const T *>(y) : xp;
  const typename Elem<T>::C s = Elem<T>::param(scale),
                            b = Elem<T>::param(bias);
  const size_t W = Vec16<T>::width;
  static std::atomic<int> vec_per_sm(0), scalar_per_sm(0);
  const unsigned mis = misalign16(o);
  if (misalign16(xp) == mis && misalign16(yp) == mis &&
      mis % sizeof(T) == 0) {
    /* Equally misaligned (cudaMalloc'd buffers: not at all): elements up to
     * the next 16-byte boundary first. */
    size_t head = mis == 0 ? 0 : (16 - mis) / sizeof(T);
    if (head > n)
      head = n;
    const size_t nvec = (n - head) / W;
    /* Sized for the vectors: even one block has threads enough for the
     * fewer than W single elements at each end. */
    const int per_sm = blocks_per_sm(ew_vec_kernel<FN, T>, &vec_per_sm);
    ew_vec_kernel<FN, T>
        <<<grid_size(sm_count, per_sm, nvec, UNROLL), THREADS, 0,
           stream>>>(o, xp, yp, s, b, head, nvec, n);
  } else {
    const int per_sm =
        blocks_per_sm(ew_scalar_kernel<FN, T>, &scalar_per_sm);
    ew_scalar_kernel<FN, T>
        <<<grid_size(sm_count, per_sm, n, ScalarUnroll<T>::value), THREADS,
           0, stream>>>(o, xp, yp, s, b, n);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t ew_dispatch(cudaStream_t stream, int sm_count, int fn, void *out,
                        const void *x, const void *y, double scale,
                        double bias, size_t n) {
  switch (fn) {
#define OVL__EW_LAUNCH(name, arity, expr)                                     \
  case OVL_EW_##name:                                                         \
    return ew_launch<OVL_EW_##name, T>(stream, sm_count, out, x, y, scale,   \
                                       bias, n);
    OVL_EW_LIST(OVL__EW_LAUNCH)
#undef OVL__EW_LAUNCH
  default:
    return cudaErrorInvalidValue;
  }
}

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void delay_kernel(unsigned long long ns,
                             const volatile int *abort_flag) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < ns) {
    if (abort_flag != NULL && *abort_flag != 0)
      return;
#if __CUDA_ARCH__ >= 700
    /* Leave the issue slots of the SM to whatever runs beside us. */
    __nanosleep(256);
#endif
  }
}

} // namespace

extern "C" cudaError_t
ovl__kernel_elementwise_launch(cudaStream_t stream, int sm_count, int fn,
                               int dtype, void *out, const void *x,
                               const void *y, double scale, double bias,
                               size_t n) {
  if (fn < 0 || fn >= OVL__EW_COUNT)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  /* A failed call before this one (even one whose error was handled) can
   * leave the thread's last error set; clear it so that the status read
   * after the launch is the launch's own. Sticky errors stay: the launch
   * reports them again. */
  (void)cudaGetLastError();
  switch (dtype) {
  case OVL__KERNEL_FLOAT32:
    return ew_dispatch<float>(stream, sm_count, fn, out, x, y, scale, bias,
                              n);
  case OVL__KERNEL_FLOAT64:
    return ew_dispatch<double>(stream, sm_count, fn, out, x, y, scale, bias,
                               n);
  case OVL__KERNEL_FLOAT16:
    return ew_dispatch<__half>(stream, sm_count, fn, out, x, y, scale, bias,
                               n);
  case OVL__KERNEL_BFLOAT16:
    return ew_dispatch<__nv_bfloat16>(stream, sm_count, fn, out, x, y, scale,
                                      bias, n);
  default:
    return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t
ovl__kernel_delay_launch(cudaStream_t stream, unsigned long long ns,
                         const volatile int *abort_flag) {
  (void)cudaGetLastError();
  delay_kernel<<<1, 1, 0, stream>>>(ns, abort_flag);
  return cudaGetLastError();
}
