/*
 * NCCL's own estimate of a collective's time (ncclGroupSimulateEnd,
 * ncclSimInfo_t.estimatedTime, NCCL >= 2.22), beside which
 * tools/bench/model_validate.sh prints the model's: one allreduce,
 * allgather or reducescatter of float32 over every visible GPU
 * (ncclCommInitAll, one process), at each size given in bytes.
 *
 *   nccl_estimate allreduce 4096 40000000 ...
 *   -> "allreduce 40000000 B on 2 GPUs: NCCL estimates 160.2 us"
 *
 * Not built by make (it needs NCCL's 2.22 API, which configure does not
 * ask for): model_validate.sh builds it with the CUDA toolkit's compiler
 * on the GPU machine. Exit 0, or 1 with a message naming the call.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "nccl_estimate: %s: %s\n", #call,                        \
              cudaGetErrorString(e_));                                         \
      return 1;                                                                \
    }                                                                          \
  } while (0)
#define CHECK_NCCL(call)                                                       \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess) {                                                   \
      fprintf(stderr, "nccl_estimate: %s: %s\n", #call,                        \
              ncclGetErrorString(r_));                                         \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  int n = 0;
  size_t most = 0;
  ncclComm_t *comms;
  void **bufs;
  if (argc < 3 ||
      (strcmp(argv[1], "allreduce") != 0 && strcmp(argv[1], "allgather") != 0 &&
       strcmp(argv[1], "reducescatter") != 0)) {
    fprintf(stderr, "usage: nccl_estimate allreduce|allgather|reducescatter "
                    "BYTES...\n");
    return 2;
  }
  CHECK_CUDA(cudaGetDeviceCount(&n));
  for (int i = 2; i < argc; i++) {
    size_t b = strtoull(argv[i], NULL, 10);
    most = b > most ? b : most;
  }
  comms = calloc((size_t)n, sizeof *comms);
  bufs = calloc((size_t)n, sizeof *bufs);
  if (comms == NULL || bufs == NULL)
    return 1;
  CHECK_NCCL(ncclCommInitAll(comms, n, NULL));
  for (int d = 0; d < n; d++) {
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaMalloc(&bufs[d], most * (size_t)n + 64));
  }
  for (int i = 2; i < argc; i++) {
    size_t bytes = strtoull(argv[i], NULL, 10), count = bytes / 4;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < n; d++) {
      char *buf = bufs[d];
      if (strcmp(argv[1], "allreduce") == 0)
        CHECK_NCCL(
            ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comms[d], 0));
      else if (strcmp(argv[1], "allgather") == 0)
        CHECK_NCCL(ncclAllGather(buf, buf, count, ncclFloat32, comms[d], 0));
      else
        CHECK_NCCL(ncclReduceScatter(buf, buf, count, ncclFloat32, ncclSum,
                                     comms[d], 0));
    }
    CHECK_NCCL(ncclGroupSimulateEnd(&sim));
    printf("%s %zu B on %d GPU%s: NCCL estimates %.1f us\n", argv[1], bytes, n,
           n == 1 ? "" : "s", sim.estimatedTime);
  }
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    cudaFree(bufs[d]);
    ncclCommDestroy(comms[d]);
  }
  free(comms);
  free(bufs);
  return 0;
}
