/*
 * The cuda backend's shared state and helpers. The backend is six C files
 * and the kernels, each file calling only those after it:
 *   backend_cuda.c  the seam (ovl__backend_cuda): ranks, events, syncs,
 *                   work, timers
 *   cuda_mem.c      memory: device and pinned host buffers, copies
 *   cuda_world.c    devices, communicators, tuning, abort, teardown
 *   cuda_comm.c     collectives, point-to-point, the flight record
 *   cuda_graph.c    graphs
 *   cuda_util.c     error texts, names, the NCCL section, the device count
 *   cuda_blas.c     cuBLAS, loaded by the first rank (ovl__blas)
 *   kernels.cu      the CUDA kernels (kernels.h)
 * See backend_cuda.c for the model. Internal to the cuda backend.
 */
#ifndef OVL_CUDA_H
#define OVL_CUDA_H

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backend/backend.h"
#include "backend/kernels.h"

/* stream_sync polling: busy for the first SYNC_SPIN_S (a sync that ends
 * soon must not pay a sleep's latency, since iteration times are measured
 * through it), then sleeps of SYNC_SLEEP_NS between polls (Linux adds its
 * timer slack, 50 us by default, to each sleep). NCCL's async errors are
 * looked at every SYNC_NCCL_CHECK_S. */
#define SYNC_SPIN_S 200e-6
#define SYNC_SLEEP_NS 20000L
#define SYNC_NCCL_CHECK_S 1e-3

/* The local ranks of a world, in a for loop. */
/* The device of local rank r. */
#define DEV(bw, r) ((bw)->dev0 + (r) - (bw)->first)
#define FOR_LOCAL_RANKS(bw, r) \
  for (int r = (bw)->first; r < (bw)->first + (bw)->nlocal; r++)
/* world_abort waits this long in all for ranks to leave the NCCL call they
 * are in (an enqueue takes microseconds). */
#define ABORT_LOCK_WAIT_S 2
#define DEFAULT_TIMEOUT_S 60.0
/* Host memory the driver keeps for one event made by cudaEventCreate (a
 * timer), for ovl_host_bytes_per_op: 620 bytes of RSS an event, its 8-byte
 * handle included, for 0.5 to 2 million events, recorded or not (driver
 * 580.159.04, CUDA 13.0, H200; 520 bytes without timing). */
#define CUDA_EVENT_HOST_BYTES 612
/* Flight record: events recorded after each collective or point-to-point
 * call of a ring, per rank, reused round robin. The last completed call
 * is found among the last PROGRESS_EVENTS enqueued. */
#define PROGRESS_EVENTS 256
/* cuBLAS's workspace for matmul_v2, one per stream (two streams' GEMMs may
 * run at once, and must not share one): on calc NVIDIA's recommendation for
 * Hopper, and what PyTorch gives cuBLAS there; on the other streams what
 * PyTorch gives older GPUs (cuBLAS needs 16 KiB not to fail). */
#define BLAS_WORKSPACE_BYTES (32u << 20)
#define BLAS_SIDE_WORKSPACE_BYTES (4u << 20)
/* rank_quiesce gives a stream this long to empty after an abort. */
#define QUIESCE_GRACE_S 30.0

struct ovl__bworld {
  int nranks;
  /* The ranks this process drives, [first, first + nlocal), on devices
   * dev0, dev0 + 1, ...; the processes (NULL: one). Per-rank state is
   * indexed by the global rank and exists for local ranks only. */
  int first, nlocal, dev0;
  ovl_procs *procs;
  double timeout_s;
  /* Rings [0, nrings) have communicators: comms[ring][rank]. */
  int nrings;
  ncclComm_t comms[OVL_MAX_RINGS][OVL_MAX_RANKS];
  char devices[256];
  char names[OVL_MAX_RANKS][128]; /* each rank's device */
  /* Set once, never cleared: communicators are (being) aborted. */
  atomic_int aborted;
  /* Host-mapped, pinned: set to 1 by world_abort to end delay kernels. */
  int *abort_flag;
  /* A rank released its streams while work was still queued: destroying
   * the communicators could block on it, so world_fini aborts instead. */
  atomic_int dirty;
  /* Serializes world_abort; comms_released says it already ran. */
  pthread_mutex_t abort_lock;
  bool comms_released;
  /* Held by rank r's thread around its NCCL calls, and by world_abort. */
  pthread_mutex_t nccl_lock[OVL_MAX_RANKS];
  /* The ranks' state while they exist (rank_init to rank_fini), for
   * world_abort's snapshot of the flight record; under abort_lock. */
  ovl__brank *ranks[OVL_MAX_RANKS];
  /* Rings whose point-to-point peers are connected (world_p2p). */
  uint32_t p2p_connected;
  /* Tuning (world_set): comm streams at the highest priority; NCCL CTA
   * limits (0 = NCCL's choice). */
  bool comm_priority_high;
  int nccl_min_ctas, nccl_max_ctas;
  /* float32 matmul_v2 on TF32 tensor cores (key tf32; default off). */
  bool tf32;
};

struct ovl__brank {
  ovl__bworld *bw;
  int rank;
  int device;
  int nrings;
  int sm_count;
  /* streams[OVL_STREAM_CALC], streams[OVL_STREAM_COMM(ring)], then the
   * user streams (streams_reserve), named in names[] for messages. */
  int nstreams;
  cudaStream_t streams[OVL_MAX_STREAMS];
  char *names[OVL_MAX_STREAMS];
  /* events[OVL_EVENT_COMPUTE(ring)], events[OVL_EVENT_COMM(ring)], then
   * the named events, events[OVL_EVENT_NAMED(nrings, k)]; `capevents`
   * entries allocated, the first `nevents` created. */
  int nevents, capevents;
  cudaEvent_t *events;
  /* Whether the event was ever recorded: see cuda_stream_wait_event. */
  bool *recorded;
  /* Graphs (backend_cuda.c, "Graphs"): a capture is open on the calc
   * stream; per event, whether this capture recorded it; the event that
   * forks the streams from calc and joins them back (made at the first
   * capture); the instantiated graphs, numbered as graph_end gave them. */
  bool capturing;
  bool *cap_recorded;
  cudaEvent_t graph_event;
  int ngraphs, capgraphs;
  cudaGraphExec_t *graphs;
  /* The world's abort_flag as this device addresses it. */
  const volatile int *abort_flag_dev;
  /* Timing events for --op-times (created with timing enabled). */
  size_t ntimers;
  cudaEvent_t *timers;
  /* Flight record, per ring: progress[ring][k % PROGRESS_EVENTS] recorded
   * after the call tagged progress_tag[ring][k % ...] (NULL until the
   * ring's first call); progress_n[ring] calls recorded so far. `frozen`:
   * world_abort took the snapshot frozen_done[] before it aborted the
   * communicators (after which every event completes). */
  cudaEvent_t *progress[OVL_MAX_RINGS];
  uint64_t *progress_tag[OVL_MAX_RINGS];
  uint64_t progress_n[OVL_MAX_RINGS];
  uint64_t done_cache[OVL_MAX_RINGS];
  atomic_bool frozen;
  uint64_t frozen_done[OVL_MAX_RINGS];
  /* barrier's one-element buffer. */
  float *barrier_buf;
  /* matmul_v2: the rank's cuBLAS handle, used only from its thread (made
   * by rank_init), and a workspace per stream (made with the stream, by
   * rank_init or streams_reserve), blas_ws_bytes[s] bytes. */
  cublasHandle_t blas;
  void *blas_ws[OVL_MAX_STREAMS];
  size_t blas_ws_bytes[OVL_MAX_STREAMS];
};

/* ------------------------------------------------------------------ */
/* Errors, names, devices (cuda_util.c)                                  */
/* ------------------------------------------------------------------ */

/* "rank R: CALL on WHERE: TEXT (NAME) at FILE:LINE"; rank < 0: the world. */
ovl_status ovl__cuda_fail(ovl_error *err, int rank, const char *where,
                          const char *call, cudaError_t e, const char *file,
                          int line);
/* "rank R: CALL on WHERE: TEXT: LAST ERROR at FILE:LINE". comm may be NULL
 * (ncclCommInitAll). */
ovl_status ovl__cuda_nccl_fail(ovl_error *err, int rank, const char *where,
                               const char *call, ncclResult_t r,
                               ncclComm_t comm, const char *file, int line);

/* "rank R: CALL on WHERE: STATUS TEXT (NAME) at FILE:LINE" for cuBLAS. */
ovl_status ovl__cuda_blas_fail(ovl_error *err, int rank, const char *where,
                               const char *call, cublasStatus_t s,
                               const char *file, int line);

/* cuBLAS's functions, loaded (cuda_blas.c): ovl__blas_load fills
 * ovl__blas once per process, before any rank calls them; rank_init
 * calls it. The library is not linked (its initializers cost every run
 * of the tools about 80 ms of CPU, cpu runs included). */
typedef struct {
  __typeof__(cublasCreate_v2) *Create;
  __typeof__(cublasDestroy_v2) *Destroy;
  __typeof__(cublasSetMathMode) *SetMathMode;
  __typeof__(cublasSetStream_v2) *SetStream;
  __typeof__(cublasSetWorkspace_v2) *SetWorkspace;
  __typeof__(cublasGemmEx) *GemmEx;
  __typeof__(cublasGetStatusString) *GetStatusString;
  __typeof__(cublasGetStatusName) *GetStatusName;
} ovl__blas_api;
extern ovl__blas_api ovl__blas;
/* OVL_EBACKEND "rank R: cuBLAS (for matmul_v2): cannot load ..." where
 * the library or one of its functions is missing. */
ovl_status ovl__blas_load(int rank, ovl_error *err);

/* OVL__BLASCHECK(err, rank, where, GemmEx, (args)): ovl__blas.GemmEx
 * called, its failure named "cublasGemmEx". */
#define OVL__BLASCHECK(err, rank, where, fn, args)                            \
  do {                                                                        \
    cublasStatus_t ovl__s = ovl__blas.fn args;                                \
    if (ovl__s != CUBLAS_STATUS_SUCCESS)                                      \
      return ovl__cuda_blas_fail((err), (rank), (where), "cublas" #fn,       \
                                 ovl__s, __FILE__, __LINE__);                 \
  } while (0)

/* CUDA calls, nccl-tests style, except that a failure returns a status
 * (or jumps to the function's cleanup label) instead of exiting. `where`
 * (a stream, a ring) is evaluated only on failure; NULL leaves it out. */
#define OVL__CUDACHECK(err, rank, where, fn, args)                            \
  do {                                                                        \
    cudaError_t ovl__e = fn args;                                             \
    if (ovl__e != cudaSuccess)                                                \
      return ovl__cuda_fail((err), (rank), (where), #fn, ovl__e, __FILE__,    \
                            __LINE__);                                        \
  } while (0)

#define OVL__CUDACHECK_GOTO(err, rank, where, fn, args, st, label)            \
  do {                                                                        \
    cudaError_t ovl__e = fn args;                                             \
    if (ovl__e != cudaSuccess) {                                              \
      (st) = ovl__cuda_fail((err), (rank), (where), #fn, ovl__e, __FILE__,    \
                            __LINE__);                                        \
      goto label;                                                             \
    }                                                                         \
  } while (0)

/* "calc stream", "comm stream of ring 2", "stream side". */
const char *ovl__cuda_stream_name(const ovl__brank *br, char *buf,
                                  size_t size, int stream);
/* "compute_event[ring 0]", "comm_event[ring 1]", "named event 3". */
const char *ovl__cuda_event_name(char *buf, size_t size, int nrings,
                                 int event);

static inline bool ovl__cuda_world_aborted(const ovl__bworld *bw) {
  return atomic_load_explicit(&bw->aborted, memory_order_acquire) != 0;
}

static inline bool stream_valid(const ovl__brank *br, int stream) {
  return stream >= 0 && stream < br->nstreams;
}

static inline ovl_status bad_stream(const ovl__brank *br, int stream,
                             ovl_error *err) {
  return ovl__err(err, OVL_EINVAL,
                  "rank %d: stream %d does not exist (calc is 0, comm streams "
                  "are 1 + ring for %d ring%s)",
                  br->rank, stream, br->nrings, br->nrings == 1 ? "" : "s");
}

static inline ovl_status aborted_err(const ovl__brank *br, const char *what,
                              ovl_error *err) {
  return ovl__err(err, OVL_EABORTED,
                  "rank %d: %s: aborted because another rank failed",
                  br->rank, what);
}

/* Enter an NCCL section of this rank: false (and no lock held) if the
 * world is aborted, in which case its communicators must not be touched. */
bool ovl__cuda_nccl_enter(ovl__brank *br);
void ovl__cuda_nccl_leave(ovl__brank *br);
void ovl__cuda_sleep_ns(long ns);

/* ------------------------------------------------------------------ */
/* Memory (cuda_mem.c)                                                 */
/* ------------------------------------------------------------------ */

/* The backend's mem_alloc, mem_free, host_alloc, host_free, mem_upload
 * and mem_download (backend/backend.h). */
ovl_status ovl__cuda_mem_alloc(ovl__brank *br, size_t bytes, void **out,
                               ovl_error *err);
void ovl__cuda_mem_free(ovl__brank *br, void *ptr);
ovl_status ovl__cuda_host_alloc(ovl__brank *br, size_t bytes, void **out,
                                ovl_error *err);
void ovl__cuda_host_free(ovl__brank *br, void *ptr);
ovl_status ovl__cuda_mem_upload(ovl__brank *br, void *dst, const void *src,
                                size_t bytes, ovl_error *err);
ovl_status ovl__cuda_mem_download(ovl__brank *br, void *dst, const void *src,
                                  size_t bytes, ovl_error *err);

/* ------------------------------------------------------------------ */
/* Collectives and point-to-point (cuda_comm.c)                        */
/* ------------------------------------------------------------------ */

/* The backend's collective, p2p and ring_progress (backend/backend.h). */
ovl_status ovl__cuda_collective(ovl__brank *br, int stream, int ring,
                                ovl__coll coll, ovl__redop redop,
                                ovl_dtype dtype, const void *send, void *recv,
                                size_t count, int root, uint64_t tag,
                                ovl_error *err);
ovl_status ovl__cuda_p2p(ovl__brank *br, int stream, int ring,
                         const ovl__p2p_item *items, int n, uint64_t tag,
                         ovl_error *err);
uint64_t ovl__cuda_ring_progress(ovl__brank *br, int ring);
/* The tag of the last completed call of `ring` on `br` among those still
 * recorded (0: none known). Never blocks (cudaEventQuery). */
uint64_t ovl__cuda_progress_scan(ovl__brank *br, int ring);

/* ------------------------------------------------------------------ */
/* Graphs (cuda_graph.c)                                               */
/* ------------------------------------------------------------------ */

/* The backend's graph_begin, graph_end, graph_launch, graph_abort. */
ovl_status ovl__cuda_graph_begin(ovl__brank *br, ovl_error *err);
ovl_status ovl__cuda_graph_end(ovl__brank *br, int *graph, ovl_error *err);
ovl_status ovl__cuda_graph_launch(ovl__brank *br, int graph, ovl_error *err);
void ovl__cuda_graph_abort(ovl__brank *br);
/* Destroy the rank's graphs (world_abort, holding the rank's NCCL lock;
 * one in flight is freed when it completes). */
void ovl__cuda_graphs_drop(ovl__brank *br);
/* Everything of the rank's graphs, at rank_fini: an open capture ended,
 * the graphs destroyed, the fork event. */
void ovl__cuda_graphs_release(ovl__brank *br);

/* ------------------------------------------------------------------ */
/* The world (cuda_world.c)                                            */
/* ------------------------------------------------------------------ */

int ovl__cuda_device_count(void);
int ovl__cuda_default_ranks(void);
ovl_status ovl__cuda_world_init(const ovl__layout *lay, double timeout_s,
                                ovl__bworld **out, ovl_error *err);
ovl_status ovl__cuda_world_rings(ovl__bworld *bw, int nrings,
                                 uint32_t comm_mask, ovl_error *err);
ovl_status ovl__cuda_world_p2p(ovl__bworld *bw, uint32_t p2p_mask,
                               ovl_error *err);
const char *ovl__cuda_world_devices(ovl__bworld *bw);
const char *ovl__cuda_device_name(ovl__bworld *bw, int rank);
void ovl__cuda_world_info(ovl__bworld *bw, ovl_world_info *info);
void ovl__cuda_world_fini(ovl__bworld *bw);
/* Abort every communicator, once; end our delay kernels first. */
void ovl__cuda_world_abort(ovl__bworld *bw);
ovl_status ovl__cuda_world_set(ovl__bworld *bw, const char *key,
                               const char *value, ovl_error *err);

#endif /* OVL_CUDA_H */
