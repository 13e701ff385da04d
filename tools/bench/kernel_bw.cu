/*
 * Bandwidth of the cuda backend's elementwise kernels against a
 * device-to-device cudaMemcpy of the same bytes (read + written), on one
 * GPU, at the seed's size and at a large one. It also times, at each size,
 * the same kernels run back to back, as the seed runs them: e = 2 * d ten
 * times between two buffers.
 *
 * `make` builds it where CUDA is configured (not installed); it calls the
 * kernels' internal launcher, so it links the library's convenience
 * archive, not the shared library. On the GPU machine:
 *
 *   make tools/bench/kernel_bw && tools/bench/kernel_bw
 */
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include "backend/kernels.h"

#define CK(x)                                                                 \
  do {                                                                        \
    cudaError_t e_ = (x);                                                     \
    if (e_ != cudaSuccess) {                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,             \
              cudaGetErrorString(e_));                                        \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static int sm_count;

/* Mean seconds of `reps` back-to-back calls of f, after 5 untimed. */
template <typename F> static double timeit(cudaStream_t s, int reps, F f) {
  cudaEvent_t a, b;
  float ms;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; i++)
    f(i);
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; i++)
    f(i);
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1e-3 / reps;
}

int main() {
  cudaStream_t s;
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t sizes[] = {10000000, (size_t)1 << 26};
  printf("%12s %-10s %10s %10s %8s\n", "floats", "op", "us", "GB/s", "%copy");
  for (size_t n : sizes) {
    float *x, *y, *z;
    size_t bytes = n * sizeof(float);
    CK(cudaMalloc(&x, bytes));
    CK(cudaMalloc(&y, bytes));
    CK(cudaMalloc(&z, bytes));
    CK(cudaMemset(x, 0, bytes));
    CK(cudaMemset(y, 0, bytes));
    double copy = timeit(s, 100, [&](int) {
      CK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
    });
    printf("%12zu %-10s %10.1f %10.0f %8.1f\n", n, "memcpy", copy * 1e6,
           2 * bytes / copy / 1e9, 100.0);
    struct {
      const char *name;
      int fn;
      int nin;
    } ops[] = {{"assign", OVL_EW_ASSIGN, 1},
               {"scale", OVL_EW_SCALE, 1},
               {"add", OVL_EW_ADD, 2}};
    for (auto &op : ops) {
      double t = timeit(s, 100, [&](int i) {
        /* Alternate buffers as the seed's e = 2 * d does. */
        float *in = i % 2 ? y : x, *out = i % 2 ? x : y;
        CK(ovl__kernel_elementwise_launch(s, sm_count, op.fn,
                                          OVL__KERNEL_FLOAT32, out, in, z,
                                          2.0, 0.0, n));
      });
      double moved = (double)bytes * (op.nin + 1);
      printf("%12zu %-10s %10.1f %10.0f %8.1f\n", n, op.name, t * 1e6,
             moved / t / 1e9, 100.0 * (moved / t) / (2 * bytes / copy));
    }
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(z));
  }
  return 0;
}
