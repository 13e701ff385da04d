/*
 * The cuda backend's memory (backend_cuda.c says how the backend is
 * built): device buffers, filled with NaN when made; pinned host buffers;
 * and the copies between them.
 *
 * Memory operations go through the legacy default stream and wait for it
 * before they return. Our streams are all non-blocking (and so are NCCL's),
 * so this neither waits for queued work nor can hang on a stuck collective;
 * ordering against our streams is the caller's (the executor syncs the calc
 * stream before a fetch). The wait matters for uploads: cudaMemcpy from
 * pageable memory may return before the data has reached the device.
 */
#include "backend/cuda.h"

ovl_status ovl__cuda_mem_alloc(ovl__brank *br, size_t bytes, void **out,
                               ovl_error *err) {
  void *p = NULL;
  ovl_status st = OVL_OK;

  *out = NULL;
  /* cudaMalloc(0) gives NULL, which callers would take for a failure. */
  if (bytes == 0)
    bytes = 1;
  OVL__CUDACHECK(err, br->rank, NULL, cudaMalloc, (&p, bytes));
  /* All-ones bytes are a NaN in both float32 and float64. */
  OVL__CUDACHECK_GOTO(err, br->rank, NULL, cudaMemsetAsync,
                      (p, 0xFF, bytes, cudaStreamLegacy), st, fail);
  OVL__CUDACHECK_GOTO(err, br->rank, NULL, cudaStreamSynchronize,
                      (cudaStreamLegacy), st, fail);
  *out = p;
  return OVL_OK;

fail:
  (void)cudaFree(p);
  return st;
}

void ovl__cuda_mem_free(ovl__brank *br, void *ptr) {
  (void)br;
  if (ptr != NULL && cudaFree(ptr) != cudaSuccess)
    (void)cudaGetLastError();
}

ovl_status ovl__cuda_host_alloc(ovl__brank *br, size_t bytes, void **out,
                                ovl_error *err) {
  void *p = NULL;
  *out = NULL;
  if (bytes == 0)
    bytes = 1;
  OVL__CUDACHECK(err, br->rank, NULL, cudaHostAlloc,
                 (&p, bytes, cudaHostAllocPortable));
  *out = p;
  return OVL_OK;
}

void ovl__cuda_host_free(ovl__brank *br, void *ptr) {
  (void)br;
  if (ptr != NULL && cudaFreeHost(ptr) != cudaSuccess)
    (void)cudaGetLastError();
}

ovl_status ovl__cuda_mem_upload(ovl__brank *br, void *dst, const void *src,
                                size_t bytes, ovl_error *err) {
  if (bytes == 0)
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank, NULL, cudaMemcpyAsync,
                 (dst, src, bytes, cudaMemcpyHostToDevice, cudaStreamLegacy));
  OVL__CUDACHECK(err, br->rank, NULL, cudaStreamSynchronize,
                 (cudaStreamLegacy));
  return OVL_OK;
}

ovl_status ovl__cuda_mem_download(ovl__brank *br, void *dst, const void *src,
                                  size_t bytes, ovl_error *err) {
  if (bytes == 0)
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank, NULL, cudaMemcpyAsync,
                 (dst, src, bytes, cudaMemcpyDeviceToHost, cudaStreamLegacy));
  OVL__CUDACHECK(err, br->rank, NULL, cudaStreamSynchronize,
                 (cudaStreamLegacy));
  return OVL_OK;
}
