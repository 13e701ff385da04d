/*
 * The CUDA kernels of the cuda backend, behind small C-callable launchers.
 *
 * kernels.cu is the only CUDA C++ file; everything that calls it is C. The
 * launchers only queue work: they return the launch status
 * (cudaGetLastError() right after the launch) and never synchronize. Errors
 * of the running kernel show up at the next sync of the stream, as usual in
 * CUDA.
 */
#ifndef OVL_KERNELS_H
#define OVL_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elementwise functions: ovl__ew of core/elemfn.h, the one definition of
 * every op's element math (this header depends on nothing else of
 * libovl). */
#include "core/elemfn.h"

/* Element types. */
enum {
  OVL__KERNEL_FLOAT32 = 0,
  OVL__KERNEL_FLOAT64 = 1,
  OVL__KERNEL_FLOAT16 = 2,
  OVL__KERNEL_BFLOAT16 = 3
};

/*
 * Queue out[i] = fn(x[i], y[i]) for i in [0, n) on `stream`.
 *
 * fn is an ovl__ew; its element math is OVL_EW_LIST's (core/elemfn.h). y
 * is read only by the functions of two inputs (it may be NULL otherwise).
 * out may be the same buffer as x or y: every element is read and written
 * by one thread, reads first. scale and bias are converted to the element
 * type first; SCALE computes fma(scale, x, bias) with one rounding, so a
 * host check can reproduce it bit for bit with fmaf()/fma(). float16 and
 * bfloat16 elements compute in float (scale and bias: converted to the
 * element type, then widened), and each result is rounded once to the
 * element type, to nearest even.
 *
 * When out, x and y sit at the same offset from a 16-byte boundary (all
 * cudaMalloc'd buffers do: offset 0), the kernel moves 16 bytes per access
 * (float4 / double2 / 8 16-bit elements) and does the few elements before
 * the first and after the last boundary one by one; otherwise it runs a
 * scalar loop, which is
 * slower (about half the bandwidth for float32). sm_count is the device's
 * multiprocessor count: the grid is sized from it (see kernels.cu). n == 0
 * queues nothing.
 *
 * Returns cudaErrorInvalidValue for an unknown fn or dtype, else the launch
 * status.
 */
cudaError_t ovl__kernel_elementwise_launch(cudaStream_t stream, int sm_count,
                                           int fn, int dtype, void *out,
                                           const void *x, const void *y,
                                           double scale, double bias,
                                           size_t n);

/* Queue a kernel of one thread that spins on the GPU's global timer for
 * `ns` nanoseconds, keeping `stream` busy for that long. It ends early once
 * *abort_flag is non-zero: abort_flag (or NULL for none) points to
 * host-mapped memory (cudaHostAllocMapped) that the host may set while the
 * kernel runs. */
cudaError_t ovl__kernel_delay_launch(cudaStream_t stream,
                                     unsigned long long ns,
                                     const volatile int *abort_flag);

#ifdef __cplusplus
}
#endif

#endif /* OVL_KERNELS_H */
