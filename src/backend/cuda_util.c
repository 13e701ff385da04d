/*
 * What the whole cuda backend shares (backend_cuda.c says how the backend
 * is built): the error texts of CUDA, NCCL and cuBLAS failures, the names
 * of streams and events in messages, the rank's NCCL section, and the
 * devices this machine has.
 */
#include "backend/cuda.h"

/* ------------------------------------------------------------------ */
/* Error reporting                                                     */
/* ------------------------------------------------------------------ */

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

/* "rank 1: " (or "" for world-level calls, rank < 0). */
static const char *rank_prefix(char *buf, size_t size, int rank) {
  if (rank < 0)
    buf[0] = '\0';
  else
    snprintf(buf, size, "rank %d: ", rank);
  return buf;
}

static ovl_status cuda_status(cudaError_t e) {
  switch (e) {
  case cudaErrorMemoryAllocation:
    return OVL_ENOMEM;
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorInvalidDevice:
    return OVL_ENODEV;
  default:
    return OVL_EBACKEND;
  }
}

/* "rank R: CALL on WHERE: TEXT (NAME) at FILE:LINE". */
ovl_status ovl__cuda_fail(ovl_error *err, int rank, const char *where,
                           const char *call, cudaError_t e, const char *file,
                           int line) {
  char prefix[32];
  return ovl__err(err, cuda_status(e), "%s%s%s%s: %s (%s) at %s:%d",
                  rank_prefix(prefix, sizeof prefix, rank), call,
                  where != NULL ? " on " : "", where != NULL ? where : "",
                  cudaGetErrorString(e), cudaGetErrorName(e),
                  base_name(file), line);
}

/* "rank R: CALL on WHERE: TEXT: LAST ERROR at FILE:LINE". comm may be NULL
 * (ncclCommInitAll). */
ovl_status ovl__cuda_nccl_fail(ovl_error *err, int rank, const char *where,
                            const char *call, ncclResult_t r, ncclComm_t comm,
                            const char *file, int line) {
  char prefix[32];
  const char *last = ncclGetLastError(comm);
  bool has_last = last != NULL && last[0] != '\0';
  return ovl__err(err, r == ncclInvalidArgument ? OVL_EINVAL : OVL_EBACKEND,
                  "%s%s%s%s: %s%s%s at %s:%d",
                  rank_prefix(prefix, sizeof prefix, rank), call,
                  where != NULL ? " on " : "", where != NULL ? where : "",
                  ncclGetErrorString(r), has_last ? ": " : "",
                  has_last ? last : "", base_name(file), line);
}

ovl_status ovl__cuda_blas_fail(ovl_error *err, int rank, const char *where,
                               const char *call, cublasStatus_t s,
                               const char *file, int line) {
  char prefix[32];
  ovl_status st = OVL_EBACKEND;
  if (s == CUBLAS_STATUS_ALLOC_FAILED)
    st = OVL_ENOMEM;
  else if (s == CUBLAS_STATUS_INVALID_VALUE)
    st = OVL_EINVAL;
  return ovl__err(err, st, "%s%s%s%s: %s (%s) at %s:%d",
                  rank_prefix(prefix, sizeof prefix, rank), call,
                  where != NULL ? " on " : "", where != NULL ? where : "",
                  ovl__blas.GetStatusString(s), ovl__blas.GetStatusName(s),
                  base_name(file), line);
}

const char *ovl__cuda_stream_name(const ovl__brank *br, char *buf,
                                  size_t size, int stream) {
  if (stream == OVL_STREAM_CALC)
    snprintf(buf, size, "calc stream");
  else if (stream <= br->nrings)
    snprintf(buf, size, "comm stream of ring %d", stream - 1);
  else
    snprintf(buf, size, "stream %s",
             br->names[stream] != NULL ? br->names[stream] : "?");
  return buf;
}

/* "compute_event[ring 0]", "comm_event[ring 1]", "named event 3". */
const char *ovl__cuda_event_name(char *buf, size_t size, int nrings,
                              int event) {
  if (event >= 2 * nrings)
    snprintf(buf, size, "named event %d", event - 2 * nrings);
  else
    snprintf(buf, size, "%s[ring %d]",
             event % 2 == 0 ? "compute_event" : "comm_event", event / 2);
  return buf;
}

/* ------------------------------------------------------------------ */
/* NCCL access under the rank's lock                                   */
/* ------------------------------------------------------------------ */

/* Enter an NCCL section of this rank: false (and no lock held) if the
 * world is aborted, in which case its communicators must not be touched.
 * The lock is only ever held by the rank's own thread and by world_abort,
 * which sets `aborted` before it takes it: a lock that is taken means an
 * abort, and the rank does not wait for it to end (the abort may be
 * waiting for this rank to end a graph capture that holds references on
 * the communicators: see comms_abort). */
bool ovl__cuda_nccl_enter(ovl__brank *br) {
  if (ovl__cuda_world_aborted(br->bw) ||
      pthread_mutex_trylock(&br->bw->nccl_lock[br->rank]) != 0)
    return false;
  if (ovl__cuda_world_aborted(br->bw)) {
    pthread_mutex_unlock(&br->bw->nccl_lock[br->rank]);
    return false;
  }
  return true;
}

void ovl__cuda_nccl_leave(ovl__brank *br) {
  pthread_mutex_unlock(&br->bw->nccl_lock[br->rank]);
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

int ovl__cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    /* Leave no error behind for a later cudaGetLastError(). */
    (void)cudaGetLastError();
    return 0;
  }
  return n > 0 ? n : 0;
}

int ovl__cuda_default_ranks(void) {
  int n = ovl__cuda_device_count();
  return n > OVL_MAX_RANKS ? OVL_MAX_RANKS : n;
}

void ovl__cuda_sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}
