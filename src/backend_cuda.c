/*
 * The cuda backend: real devices, CUDA streams and events, NCCL.
 *
 * Rank r drives CUDA device r from its own thread. Per rank: one calc
 * stream, one comm stream per ring (all created cudaStreamNonBlocking, so
 * nothing orders them but our events) and two events per ring created with
 * cudaEventDisableTiming, as Paddle does, then the schedule's named events
 * (events_reserve), made the same way. Per ring: one NCCL communicator
 * per rank, all made by one ncclCommInitAll() in the main thread.
 *
 * Every CUDA and NCCL call is checked; a failure returns an ovl_status with
 * a message naming the rank, the call, the stream where one is involved, the
 * library's own error text (for NCCL also ncclGetLastError()) and
 * file:line. Nothing here prints or exits.
 *
 * Hangs. A collective whose peers never come (a schedule bug, which is what
 * this tool hunts) spins on the device forever. stream_sync therefore polls
 * instead of blocking: it gives up after the world's timeout, and it watches
 * ncclCommGetAsyncError(); either way it aborts every communicator of the
 * world so that all stuck kernels exit, and every other rank's next sync or
 * collective fails with OVL_EABORTED.
 *
 * Aborting safely. NCCL forbids aborting a communicator while another thread
 * is inside an NCCL call on it. Each rank's NCCL calls (enqueue, async error
 * query) therefore run under that rank's `nccl_lock`, after checking the
 * world's `aborted` flag; world_abort sets the flag first and then takes
 * every rank's lock before it calls ncclCommAbort. Once the flag is set no
 * rank enters NCCL again. See comms_abort for the one case this cannot cover.
 * NCCL's teardown frees device memory, and cudaFree waits for every kernel
 * on the device; so before it, world_abort also raises a flag in host-mapped
 * memory that ends our own delay kernels, which could otherwise hold the
 * abort up for as long as they were asked to spin.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "internal.h"
#include "kernels.h"

/* stream_sync polling: busy for the first SYNC_SPIN_S (a sync that ends
 * soon must not pay a sleep's latency, since iteration times are measured
 * through it), then sleeps of SYNC_SLEEP_NS between polls (Linux adds its
 * timer slack, 50 us by default, to each sleep). NCCL's async errors are
 * looked at every SYNC_NCCL_CHECK_S. */
#define SYNC_SPIN_S 200e-6
#define SYNC_SLEEP_NS 20000L
#define SYNC_NCCL_CHECK_S 1e-3
/* world_abort waits this long in all for ranks to leave the NCCL call they
 * are in (an enqueue takes microseconds). */
#define ABORT_LOCK_WAIT_S 2
#define DEFAULT_TIMEOUT_S 60.0
/* Host memory the driver keeps for one event made by cudaEventCreate (a
 * timer), for ovl_host_bytes_per_op: 620 bytes of RSS an event, its 8-byte
 * handle included, for 0.5 to 2 million events, recorded or not (driver
 * 580.159.04, CUDA 13.0, H200; 520 bytes without timing). */
#define CUDA_EVENT_HOST_BYTES 612

struct ovl__bworld {
  int nranks;
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
  /* Tuning (world_tune): comm streams at the highest priority; NCCL CTA
   * limits (0 = NCCL's choice). */
  bool comm_priority_high;
  int nccl_min_ctas, nccl_max_ctas;
};

struct ovl__brank {
  ovl__bworld *bw;
  int rank;
  int device;
  int nrings;
  int sm_count;
  /* streams[OVL_STREAM_CALC], streams[OVL_STREAM_COMM(ring)]. */
  int nstreams;
  cudaStream_t streams[1 + OVL_MAX_RINGS];
  /* events[OVL_EVENT_COMPUTE(ring)], events[OVL_EVENT_COMM(ring)], then
   * the named events, events[OVL_EVENT_NAMED(nrings, k)]; `capevents`
   * entries allocated, the first `nevents` created. */
  int nevents, capevents;
  cudaEvent_t *events;
  /* Whether the event was ever recorded: see cuda_stream_wait_event. */
  bool *recorded;
  /* The world's abort_flag as this device addresses it. */
  const volatile int *abort_flag_dev;
  /* Timing events for --op-times (created with timing enabled). */
  size_t ntimers;
  cudaEvent_t *timers;
};

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
static ovl_status cuda_fail(ovl_error *err, int rank, const char *where,
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
static ovl_status nccl_fail(ovl_error *err, int rank, const char *where,
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

/* CUDA calls, nccl-tests style, except that a failure returns a status
 * (or jumps to the function's cleanup label) instead of exiting. `where`
 * (a stream, a ring) is evaluated only on failure; NULL leaves it out. */
#define OVL__CUDACHECK(err, rank, where, fn, args)                            \
  do {                                                                        \
    cudaError_t ovl__e = fn args;                                             \
    if (ovl__e != cudaSuccess)                                                \
      return cuda_fail((err), (rank), (where), #fn, ovl__e, __FILE__,         \
                       __LINE__);                                             \
  } while (0)

#define OVL__CUDACHECK_GOTO(err, rank, where, fn, args, st, label)            \
  do {                                                                        \
    cudaError_t ovl__e = fn args;                                             \
    if (ovl__e != cudaSuccess) {                                              \
      (st) = cuda_fail((err), (rank), (where), #fn, ovl__e, __FILE__,         \
                       __LINE__);                                             \
      goto label;                                                             \
    }                                                                         \
  } while (0)

/* "calc stream", "comm stream of ring 2". */
static const char *stream_name(char *buf, size_t size, int stream) {
  if (stream == OVL_STREAM_CALC)
    snprintf(buf, size, "calc stream");
  else
    snprintf(buf, size, "comm stream of ring %d", stream - 1);
  return buf;
}

/* "compute_event[ring 0]", "comm_event[ring 1]", "named event 3". */
static const char *event_name(char *buf, size_t size, int nrings,
                              int event) {
  if (event >= 2 * nrings)
    snprintf(buf, size, "named event %d", event - 2 * nrings);
  else
    snprintf(buf, size, "%s[ring %d]",
             event % 2 == 0 ? "compute_event" : "comm_event", event / 2);
  return buf;
}

static bool stream_valid(const ovl__brank *br, int stream) {
  return stream >= 0 && stream < br->nstreams;
}

static ovl_status bad_stream(const ovl__brank *br, int stream,
                             ovl_error *err) {
  return ovl__err(err, OVL_EINVAL,
                  "rank %d: stream %d does not exist (calc is 0, comm streams "
                  "are 1 + ring for %d ring%s)",
                  br->rank, stream, br->nrings, br->nrings == 1 ? "" : "s");
}

static bool world_aborted(const ovl__bworld *bw) {
  return atomic_load_explicit(&bw->aborted, memory_order_acquire) != 0;
}

static ovl_status aborted_err(const ovl__brank *br, const char *what,
                              ovl_error *err) {
  return ovl__err(err, OVL_EABORTED,
                  "rank %d: %s: aborted because another rank failed",
                  br->rank, what);
}

/* ------------------------------------------------------------------ */
/* NCCL access under the rank's lock                                   */
/* ------------------------------------------------------------------ */

/* Enter an NCCL section of this rank: false (and no lock held) if the
 * world is aborted, in which case its communicators must not be touched. */
static bool nccl_enter(ovl__brank *br) {
  pthread_mutex_lock(&br->bw->nccl_lock[br->rank]);
  if (world_aborted(br->bw)) {
    pthread_mutex_unlock(&br->bw->nccl_lock[br->rank]);
    return false;
  }
  return true;
}

static void nccl_leave(ovl__brank *br) {
  pthread_mutex_unlock(&br->bw->nccl_lock[br->rank]);
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

static int cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    /* Leave no error behind for a later cudaGetLastError(). */
    (void)cudaGetLastError();
    return 0;
  }
  return n > 0 ? n : 0;
}

static int cuda_default_ranks(void) {
  int n = cuda_device_count();
  return n > OVL_MAX_RANKS ? OVL_MAX_RANKS : n;
}

/* "2 x NVIDIA H200"; mixed devices as "1 x NVIDIA H200, 1 x NVIDIA A100"
 * (runs of equal names, in rank order). */
static ovl_status describe_devices(ovl__bworld *bw, ovl_error *err) {
  char (*names)[128] = bw->names;
  size_t len = 0;
  for (int r = 0; r < bw->nranks; r++) {
    struct cudaDeviceProp prop;
    OVL__CUDACHECK(err, -1, NULL, cudaGetDeviceProperties, (&prop, r));
    snprintf(names[r], sizeof names[r], "%.127s", prop.name);
  }
  bw->devices[0] = '\0';
  for (int r = 0; r < bw->nranks;) {
    int run = 1;
    while (r + run < bw->nranks && strcmp(names[r + run], names[r]) == 0)
      run++;
    int w = snprintf(bw->devices + len, sizeof bw->devices - len, "%s%d x %s",
                     len > 0 ? ", " : "", run, names[r]);
    if (w < 0 || (size_t)w >= sizeof bw->devices - len)
      break; /* truncated: the start says enough */
    len += (size_t)w;
    r += run;
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* World                                                               */
/* ------------------------------------------------------------------ */

static void world_free(ovl__bworld *bw) {
  if (bw->abort_flag != NULL && cudaFreeHost(bw->abort_flag) != cudaSuccess)
    (void)cudaGetLastError();
  pthread_mutex_destroy(&bw->abort_lock);
  for (int r = 0; r < bw->nranks; r++)
    pthread_mutex_destroy(&bw->nccl_lock[r]);
  free(bw);
}

static ovl_status cuda_world_init(int nranks, double timeout_s,
                                  ovl__bworld **out, ovl_error *err) {
  ovl__bworld *bw;
  ovl_status st;
  int count = 0;
  cudaError_t e;

  *out = NULL;
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: %d ranks asked for; 1 to %d are possible",
                    nranks, OVL_MAX_RANKS);
  if (!(timeout_s >= 0.0) || isinf(timeout_s))
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: timeout of %g s: must be a finite number "
                    "of seconds >= 0",
                    timeout_s);
  e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ovl__err(err, OVL_ENODEV,
                    "cuda backend: no usable GPU: cudaGetDeviceCount: %s (%s)",
                    cudaGetErrorString(e), cudaGetErrorName(e));
  }
  if (nranks > count)
    return ovl__err(err, OVL_ENODEV, "asked for %d ranks but %d GPU%s %s visible",
                    nranks, count, count == 1 ? "" : "s",
                    count == 1 ? "is" : "are");

  bw = calloc(1, sizeof *bw);
  if (bw == NULL)
    return ovl__err(err, OVL_ENOMEM, "cuda backend: out of memory");
  bw->nranks = nranks;
  bw->timeout_s = timeout_s > 0.0 ? timeout_s : DEFAULT_TIMEOUT_S;
  atomic_init(&bw->aborted, 0);
  atomic_init(&bw->dirty, 0);
  pthread_mutex_init(&bw->abort_lock, NULL);
  for (int r = 0; r < nranks; r++)
    pthread_mutex_init(&bw->nccl_lock[r], NULL);

  st = describe_devices(bw, err);
  if (st != OVL_OK)
    goto fail;
  /* Portable: pinned and mapped for every device's context. */
  OVL__CUDACHECK_GOTO(err, -1, NULL, cudaHostAlloc,
                      ((void **)&bw->abort_flag, sizeof *bw->abort_flag,
                       cudaHostAllocMapped | cudaHostAllocPortable),
                      st, fail);
  *(volatile int *)bw->abort_flag = 0;
  *out = bw;
  return OVL_OK;

fail:
  world_free(bw);
  return st;
}

/* Create the communicators of `ring`, one per rank on device `rank`.
 *
 * This is the one place that creates communicators. To pass an
 * ncclConfig_t later (CTA limits, ...), replace the ncclCommInitAll call by
 * its documented equivalent: ncclGetUniqueId(&id); ncclGroupStart(); for
 * each rank { cudaSetDevice(rank); ncclCommInitRankConfig(&comms[rank],
 * nranks, id, rank, &config); } ncclGroupEnd(); and restore the device.
 * Nothing else depends on how they were made. */
static ovl_status comms_create(ovl__bworld *bw, int ring, ovl_error *err) {
  int devlist[OVL_MAX_RANKS];
  char where[48];
  ncclResult_t r;

  for (int i = 0; i < bw->nranks; i++)
    devlist[i] = i;
  if (bw->nccl_min_ctas == 0 && bw->nccl_max_ctas == 0) {
    r = ncclCommInitAll(bw->comms[ring], bw->nranks, devlist);
  } else {
    /* ncclCommInitAll takes no config: its documented equivalent, one
     * ncclCommInitRankConfig per device inside one group. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    if (bw->nccl_min_ctas > 0)
      config.minCTAs = bw->nccl_min_ctas;
    if (bw->nccl_max_ctas > 0)
      config.maxCTAs = bw->nccl_max_ctas;
    r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
      r = ncclGroupStart();
    for (int i = 0; r == ncclSuccess && i < bw->nranks; i++) {
      if (cudaSetDevice(devlist[i]) != cudaSuccess) {
        r = ncclUnhandledCudaError;
        break;
      }
      r = ncclCommInitRankConfig(&bw->comms[ring][i], bw->nranks, id, i,
                                 &config);
    }
    {
      ncclResult_t r2 = ncclGroupEnd();
      if (r == ncclSuccess)
        r = r2;
    }
  }
  if (r != ncclSuccess) {
    snprintf(where, sizeof where, "ring %d (%d rank%s)", ring, bw->nranks,
             bw->nranks == 1 ? "" : "s");
    for (int i = 0; i < bw->nranks; i++)
      bw->comms[ring][i] = NULL;
    return nccl_fail(err, -1, where, "ncclCommInitAll", r, NULL, __FILE__,
                     __LINE__);
  }
  return OVL_OK;
}

static ovl_status cuda_world_rings(ovl__bworld *bw, int nrings,
                                   ovl_error *err) {
  ovl_status st = OVL_OK;
  int device = -1;

  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: %d rings asked for; 0 to %d are possible",
                    nrings, OVL_MAX_RINGS);
  if (world_aborted(bw))
    return ovl__err(err, OVL_EABORTED,
                    "cuda backend: cannot create rings: the world was "
                    "aborted");
  if (nrings <= bw->nrings)
    return OVL_OK;
  /*
   * Connect every peer when the communicator is made, not at its first
   * collective (NCCL_RUNTIME_CONNECT=1 is NCCL's default since 2.22).
   * A lazy connect happens inside the enqueue call and waits on the host
   * for the peers to connect too: a collective that some rank never calls
   * would then hang in ncclAllReduce() itself, where no timeout can see it.
   * Connected up front, the same collective spins on the device, where
   * stream_sync times it out and aborts it. (Seen on 2 x H200, NCCL 2.28.3:
   * test_stuck_collective hangs in the enqueue with NCCL_RUNTIME_CONNECT=1
   * and passes in 2 s without it; the suite took as long either way.) A
   * value the user set wins. NCCL reads it once, at its first communicator.
   */
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  /* NCCL switches devices while it builds the communicators. */
  OVL__CUDACHECK(err, -1, NULL, cudaGetDevice, (&device));
  for (int ring = bw->nrings; ring < nrings; ring++) {
    st = comms_create(bw, ring, err);
    if (st != OVL_OK)
      break;
    bw->nrings = ring + 1;
  }
  (void)cudaSetDevice(device);
  return st;
}

static const char *cuda_world_devices(ovl__bworld *bw) { return bw->devices; }

static const char *cuda_device_name(ovl__bworld *bw, int rank) {
  return bw->names[rank];
}

/* CUDA's version numbers are 1000 * major + 10 * minor. */
static void cuda_version(char *buf, size_t len, int v) {
  snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

static void cuda_world_info(ovl__bworld *bw, ovl_world_info *info) {
  int v = 0;
  (void)bw;
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
    cuda_version(info->driver_version, sizeof info->driver_version, v);
  else
    snprintf(info->driver_version, sizeof info->driver_version, "unknown");
  v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess && v > 0)
    cuda_version(info->runtime_version, sizeof info->runtime_version, v);
  else
    snprintf(info->runtime_version, sizeof info->runtime_version,
             "unknown");
  (void)cudaGetLastError();
  v = 0;
  /* NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9 (X * 1000 +
   * Y * 100 + Z before). */
  if (ncclGetVersion(&v) == ncclSuccess && v > 0) {
    if (v >= 20900)
      snprintf(info->nccl_version, sizeof info->nccl_version, "%d.%d.%d",
               v / 10000, (v / 100) % 100, v % 100);
    else
      snprintf(info->nccl_version, sizeof info->nccl_version, "%d.%d.%d",
               v / 1000, (v / 100) % 10, v % 100);
  } else {
    snprintf(info->nccl_version, sizeof info->nccl_version, "unknown");
  }
}

/* Abort every communicator, once. Callers hold abort_lock and have set
 * `aborted`. */
static void comms_abort(ovl__bworld *bw) {
  struct timespec deadline;
  bool locked[OVL_MAX_RANKS];
  int device = -1;
  bool have_device;

  /*
   * Wait for each rank to leave the NCCL call it may be in; after that it
   * sees `aborted` and stays out. A rank still inside one at the deadline is
   * blocked in the enqueue itself: its device is stuck behind a collective
   * and the launch queue is full. Only the abort can free it, so we abort
   * anyway; NCCL may then touch freed memory on its way out, which is a
   * risk taken only when the run is already lost.
   */
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += ABORT_LOCK_WAIT_S;
  for (int r = 0; r < bw->nranks; r++)
    locked[r] = pthread_mutex_timedlock(&bw->nccl_lock[r], &deadline) == 0;

  have_device = cudaGetDevice(&device) == cudaSuccess;
  /*
   * One group: each ncclCommAbort sets its communicator's abort flags at
   * once, and NCCL runs the reclaim work (which waits for the kernels of
   * that communicator to leave) at ncclGroupEnd. So every flag is set before
   * anything waits, and a kernel of one ring stuck in front of a kernel of
   * another ring cannot block the abort. Errors are of no use here: the
   * communicators are gone either way.
   */
  (void)ncclGroupStart();
  for (int ring = 0; ring < bw->nrings; ring++)
    for (int r = 0; r < bw->nranks; r++)
      if (bw->comms[ring][r] != NULL) {
        (void)ncclCommAbort(bw->comms[ring][r]);
        bw->comms[ring][r] = NULL;
      }
  (void)ncclGroupEnd();
  /* NCCL switches devices while it tears down. */
  if (have_device)
    (void)cudaSetDevice(device);
  (void)cudaGetLastError();

  for (int r = 0; r < bw->nranks; r++)
    if (locked[r])
      pthread_mutex_unlock(&bw->nccl_lock[r]);
}

static void cuda_world_abort(ovl__bworld *bw) {
  if (bw == NULL)
    return;
  atomic_store_explicit(&bw->aborted, 1, memory_order_release);
  /* End delay kernels first: the communicators' teardown waits for them. */
  *(volatile int *)bw->abort_flag = 1;
  atomic_thread_fence(memory_order_seq_cst);
  pthread_mutex_lock(&bw->abort_lock);
  if (!bw->comms_released) {
    bw->comms_released = true;
    comms_abort(bw);
  }
  pthread_mutex_unlock(&bw->abort_lock);
}

/* Whether some communicator reports an asynchronous error (ncclCommDestroy
 * could then wait forever). Called with no rank threads running. */
static bool comms_broken(ovl__bworld *bw) {
  for (int ring = 0; ring < bw->nrings; ring++)
    for (int r = 0; r < bw->nranks; r++) {
      ncclResult_t async = ncclSuccess;
      if (bw->comms[ring][r] == NULL)
        continue;
      if (ncclCommGetAsyncError(bw->comms[ring][r], &async) != ncclSuccess ||
          (async != ncclSuccess && async != ncclInProgress))
        return true;
    }
  return false;
}

static void cuda_world_fini(ovl__bworld *bw) {
  int device = -1;
  bool have_device;

  if (bw == NULL)
    return;
  if (world_aborted(bw) || atomic_load(&bw->dirty) || comms_broken(bw)) {
    cuda_world_abort(bw);
  } else {
    /* Sequential destroys from one thread are fine: NCCL defers the
     * intra-process teardown of a ring to the destroy of its last
     * communicator and runs it for all of them there. */
    have_device = cudaGetDevice(&device) == cudaSuccess;
    for (int ring = 0; ring < bw->nrings; ring++)
      for (int r = 0; r < bw->nranks; r++)
        if (bw->comms[ring][r] != NULL) {
          (void)ncclCommDestroy(bw->comms[ring][r]);
          bw->comms[ring][r] = NULL;
        }
    if (have_device)
      (void)cudaSetDevice(device);
    (void)cudaGetLastError();
  }
  world_free(bw);
}

/* ------------------------------------------------------------------ */
/* Ranks                                                               */
/* ------------------------------------------------------------------ */

static void rank_release(ovl__brank *br) {
  for (size_t i = 0; i < br->ntimers; i++)
    (void)cudaEventDestroy(br->timers[i]);
  free(br->timers);
  for (int i = 0; i < br->nevents; i++)
    (void)cudaEventDestroy(br->events[i]);
  free(br->events);
  free(br->recorded);
  for (int i = 0; i < br->nstreams; i++)
    (void)cudaStreamDestroy(br->streams[i]);
  (void)cudaGetLastError();
  free(br);
}

/* Grow the event arrays and create events up to `nevents` (timing
 * disabled, never recorded). On the rank's thread, its device current. */
static ovl_status cuda_events_reserve(ovl__brank *br, int nevents,
                                      ovl_error *err) {
  char where[48];
  if (nevents < 0)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d events asked for",
                    br->rank, nevents);
  if (nevents <= br->nevents)
    return OVL_OK;
  if (nevents > br->capevents) {
    cudaEvent_t *ev = realloc(br->events, (size_t)nevents * sizeof *ev);
    if (ev == NULL)
      return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %d events",
                      br->rank, nevents);
    br->events = ev;
    bool *rec = realloc(br->recorded, (size_t)nevents * sizeof *rec);
    if (rec == NULL)
      return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %d events",
                      br->rank, nevents);
    br->recorded = rec;
    br->capevents = nevents;
  }
  while (br->nevents < nevents) {
    int e = br->nevents;
    OVL__CUDACHECK(err, br->rank,
                   event_name(where, sizeof where, br->nrings, e),
                   cudaEventCreateWithFlags,
                   (&br->events[e], cudaEventDisableTiming));
    br->recorded[e] = false;
    br->nevents++;
  }
  return OVL_OK;
}

static ovl_status cuda_rank_init(ovl__bworld *bw, int rank, int nrings,
                                 ovl__brank **out, ovl_error *err) {
  ovl__brank *br;
  ovl_status st = OVL_OK;
  char where[48];

  *out = NULL;
  if (rank < 0 || rank >= bw->nranks)
    return ovl__err(err, OVL_EINVAL, "rank %d does not exist (%d ranks)",
                    rank, bw->nranks);
  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: %d rings asked for; 0 to %d are possible", rank,
                    nrings, OVL_MAX_RINGS);
  br = calloc(1, sizeof *br);
  if (br == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
  br->bw = bw;
  br->rank = rank;
  br->device = rank;
  br->nrings = nrings;

  OVL__CUDACHECK_GOTO(err, rank, NULL, cudaSetDevice, (br->device), st, fail);
  OVL__CUDACHECK_GOTO(err, rank, NULL, cudaDeviceGetAttribute,
                      (&br->sm_count, cudaDevAttrMultiProcessorCount,
                       br->device),
                      st, fail);
  {
    /* Lower numbers are higher priorities: greatest is the highest. */
    int least = 0, greatest = 0;
    OVL__CUDACHECK_GOTO(err, rank, NULL, cudaDeviceGetStreamPriorityRange,
                        (&least, &greatest), st, fail);
    for (int s = 0; s < 1 + nrings; s++) {
      int prio = s != OVL_STREAM_CALC && bw->comm_priority_high ? greatest
                                                                : least;
      OVL__CUDACHECK_GOTO(err, rank, stream_name(where, sizeof where, s),
                          cudaStreamCreateWithPriority,
                          (&br->streams[s], cudaStreamNonBlocking, prio), st,
                          fail);
      br->nstreams++;
    }
  }
  {
    void *flag = NULL;
    OVL__CUDACHECK_GOTO(err, rank, NULL, cudaHostGetDevicePointer,
                        (&flag, bw->abort_flag, 0), st, fail);
    br->abort_flag_dev = flag;
  }
  st = cuda_events_reserve(br, 2 * nrings, err);
  if (st != OVL_OK)
    goto fail;
  *out = br;
  return OVL_OK;

fail:
  rank_release(br);
  return st;
}

static void cuda_rank_fini(ovl__brank *br) {
  if (br == NULL)
    return;
  /* Work still queued (a run that failed) makes a plain destroy of the
   * communicators unsafe: tell world_fini to abort them. */
  for (int s = 0; s < br->nstreams; s++)
    if (cudaStreamQuery(br->streams[s]) != cudaSuccess)
      atomic_store(&br->bw->dirty, 1);
  rank_release(br);
}

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

/*
 * Memory operations go through the legacy default stream and wait for it
 * before they return. Our streams are all non-blocking (and so are NCCL's),
 * so this neither waits for queued work nor can hang on a stuck collective;
 * ordering against our streams is the caller's (the executor syncs the calc
 * stream before a fetch). The wait matters for uploads: cudaMemcpy from
 * pageable memory may return before the data has reached the device.
 */
static ovl_status cuda_mem_alloc(ovl__brank *br, size_t bytes, void **out,
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

static void cuda_mem_free(ovl__brank *br, void *ptr) {
  (void)br;
  if (ptr != NULL && cudaFree(ptr) != cudaSuccess)
    (void)cudaGetLastError();
}

static ovl_status cuda_host_alloc(ovl__brank *br, size_t bytes, void **out,
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

static void cuda_host_free(ovl__brank *br, void *ptr) {
  (void)br;
  if (ptr != NULL && cudaFreeHost(ptr) != cudaSuccess)
    (void)cudaGetLastError();
}

static ovl_status cuda_mem_upload(ovl__brank *br, void *dst, const void *src,
                                  size_t bytes, ovl_error *err) {
  if (bytes == 0)
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank, NULL, cudaMemcpyAsync,
                 (dst, src, bytes, cudaMemcpyHostToDevice, cudaStreamLegacy));
  OVL__CUDACHECK(err, br->rank, NULL, cudaStreamSynchronize,
                 (cudaStreamLegacy));
  return OVL_OK;
}

static ovl_status cuda_mem_download(ovl__brank *br, void *dst,
                                    const void *src, size_t bytes,
                                    ovl_error *err) {
  if (bytes == 0)
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank, NULL, cudaMemcpyAsync,
                 (dst, src, bytes, cudaMemcpyDeviceToHost, cudaStreamLegacy));
  OVL__CUDACHECK(err, br->rank, NULL, cudaStreamSynchronize,
                 (cudaStreamLegacy));
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Events and syncs                                                    */
/* ------------------------------------------------------------------ */

static ovl_status check_event(const ovl__brank *br, int event,
                              ovl_error *err) {
  if (event < 0 || event >= br->nevents)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: event %d does not exist (%d ring%s, 2 events "
                    "each, and %d named)",
                    br->rank, event, br->nrings, br->nrings == 1 ? "" : "s",
                    br->nevents - 2 * br->nrings);
  return OVL_OK;
}

static ovl_status cuda_event_record(ovl__brank *br, int event, int stream,
                                    ovl_error *err) {
  char where[96], sname[40], ename[40];
  ovl_status st;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if ((st = check_event(br, event, err)) != OVL_OK)
    return st;
  /* A new record replaces the old one (CUDA semantics, and Paddle's). */
  OVL__CUDACHECK(err, br->rank,
                 (snprintf(where, sizeof where, "%s, %s",
                           event_name(ename, sizeof ename, br->nrings, event),
                           stream_name(sname, sizeof sname, stream)),
                  where),
                 cudaEventRecord, (br->events[event], br->streams[stream]));
  br->recorded[event] = true;
  return OVL_OK;
}

static ovl_status cuda_stream_wait_event(ovl__brank *br, int stream,
                                         int event, ovl_error *err) {
  char where[96], sname[40], ename[40];
  ovl_status st;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if ((st = check_event(br, event, err)) != OVL_OK)
    return st;
  /*
   * A wait on an event that was never recorded does not wait. CUDA itself
   * guarantees this (cudaStreamWaitEvent on a never-recorded event is a
   * functional no-op, as if the record had already completed), so calling
   * it would be equally right; the flag states the rule here, where the
   * model needs it, instead of leaving it implicit in the driver.
   */
  if (!br->recorded[event])
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank,
                 (snprintf(where, sizeof where, "%s, %s",
                           stream_name(sname, sizeof sname, stream),
                           event_name(ename, sizeof ename, br->nrings, event)),
                  where),
                 cudaStreamWaitEvent,
                 (br->streams[stream], br->events[event], 0));
  return OVL_OK;
}

/* While a sync waits: an NCCL communicator of this rank with an
 * asynchronous error fails the sync (its collectives will never finish). */
static ovl_status comms_check(ovl__brank *br, const char *what,
                              ovl_error *err) {
  ovl__bworld *bw = br->bw;
  ovl_status st = OVL_OK;
  int nrings = bw->nrings;

  if (nrings == 0)
    return OVL_OK;
  if (!nccl_enter(br))
    return aborted_err(br, what, err);
  for (int ring = 0; ring < nrings && st == OVL_OK; ring++) {
    ncclComm_t comm = bw->comms[ring][br->rank];
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    char where[128];
    if (r != ncclSuccess) {
      snprintf(where, sizeof where, "ring %d (during %s)", ring, what);
      st = nccl_fail(err, br->rank, where, "ncclCommGetAsyncError", r, comm,
                     __FILE__, __LINE__);
    } else if (async != ncclSuccess && async != ncclInProgress) {
      snprintf(where, sizeof where, "ring %d (during %s)", ring, what);
      st = nccl_fail(err, br->rank, where, "NCCL asynchronous error", async,
                     comm, __FILE__, __LINE__);
      if (st == OVL_EINVAL)
        st = OVL_EBACKEND;
    }
  }
  nccl_leave(br);
  return st;
}

static void sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

static ovl_status cuda_stream_sync(ovl__brank *br, int stream,
                                   ovl_error *err) {
  ovl__bworld *bw = br->bw;
  char sname[40], what[64];
  double start, now, next_check;
  ovl_status st;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  snprintf(what, sizeof what, "sync of %s",
           stream_name(sname, sizeof sname, stream));
  start = ovl__now();
  next_check = start + SYNC_NCCL_CHECK_S;
  for (;;) {
    if (world_aborted(bw))
      return aborted_err(br, what, err);
    cudaError_t e = cudaStreamQuery(br->streams[stream]);
    if (e == cudaSuccess)
      return OVL_OK;
    if (e != cudaErrorNotReady)
      return cuda_fail(err, br->rank, sname, "cudaStreamQuery", e, __FILE__,
                       __LINE__);
    now = ovl__now();
    if (now >= next_check) {
      st = comms_check(br, what, err);
      if (st != OVL_OK) {
        if (st != OVL_EABORTED)
          cuda_world_abort(bw);
        return st;
      }
      next_check = now + SYNC_NCCL_CHECK_S;
    }
    if (now - start >= bw->timeout_s) {
      cuda_world_abort(bw);
      return ovl__err(err, OVL_ETIMEDOUT,
                      "rank %d: %s: timed out after %g s (NCCL collective "
                      "stuck?)",
                      br->rank, what, bw->timeout_s);
    }
    if (now - start >= SYNC_SPIN_S)
      sleep_ns(SYNC_SLEEP_NS);
  }
}

/* ------------------------------------------------------------------ */
/* Work                                                                */
/* ------------------------------------------------------------------ */

static ovl_status cuda_elementwise(ovl__brank *br, int stream, ovl__ew fn,
                                   ovl_dtype dtype, void *out, const void *x,
                                   const void *y, double scale, double bias,
                                   size_t n, ovl_error *err) {
  char where[40];
  int kfn, kdtype;
  bool binary = false;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  switch (fn) {
  case OVL_EW_ASSIGN:
    kfn = OVL__KERNEL_EW_ASSIGN;
    break;
  case OVL_EW_ADD:
    kfn = OVL__KERNEL_EW_ADD;
    binary = true;
    break;
  case OVL_EW_SUB:
    kfn = OVL__KERNEL_EW_SUB;
    binary = true;
    break;
  case OVL_EW_MUL:
    kfn = OVL__KERNEL_EW_MUL;
    binary = true;
    break;
  case OVL_EW_SCALE:
    kfn = OVL__KERNEL_EW_SCALE;
    break;
  default:
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown elementwise function %d",
                    br->rank, (int)fn);
  }
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    kdtype = OVL__KERNEL_FLOAT32;
    break;
  case OVL_DTYPE_FLOAT64:
    kdtype = OVL__KERNEL_FLOAT64;
    break;
  default:
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown dtype %d", br->rank,
                    (int)dtype);
  }
  if (n == 0)
    return OVL_OK;
  if (out == NULL || x == NULL || (binary && y == NULL))
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: elementwise on %s: NULL buffer", br->rank,
                    stream_name(where, sizeof where, stream));
  OVL__CUDACHECK(err, br->rank, stream_name(where, sizeof where, stream),
                 ovl__kernel_elementwise_launch,
                 (br->streams[stream], br->sm_count, kfn, kdtype, out, x, y,
                  scale, bias, n));
  return OVL_OK;
}

static ovl_status cuda_collective(ovl__brank *br, int stream, int ring,
                                  ovl__coll coll, ovl__redop redop,
                                  ovl_dtype dtype, const void *send,
                                  void *recv, size_t count, int root,
                                  ovl_error *err) {
  ovl__bworld *bw = br->bw;
  ncclDataType_t dt;
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm;
  ncclResult_t r;
  const char *call;
  char where[64], sname[40];
  ovl_status st = OVL_OK;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if (ring < 0 || ring >= bw->nrings)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: ring %d has no communicator (%d ring%s set up)",
                    br->rank, ring, bw->nrings, bw->nrings == 1 ? "" : "s");
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    dt = ncclFloat32;
    break;
  case OVL_DTYPE_FLOAT64:
    dt = ncclFloat64;
    break;
  default:
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown dtype %d", br->rank,
                    (int)dtype);
  }
  switch (redop) {
  case OVL_RED_SUM:
    op = ncclSum;
    break;
  case OVL_RED_MAX:
    op = ncclMax;
    break;
  case OVL_RED_MIN:
    op = ncclMin;
    break;
  case OVL_RED_PROD:
    op = ncclProd;
    break;
  default:
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown reduction %d",
                    br->rank, (int)redop);
  }
  if (coll == OVL_COLL_BROADCAST && (root < 0 || root >= bw->nranks))
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: broadcast root %d does not exist (%d ranks)",
                    br->rank, root, bw->nranks);
  if (count > 0 && (send == NULL || recv == NULL))
    return ovl__err(err, OVL_EINVAL, "rank %d: collective: NULL buffer",
                    br->rank);
  snprintf(where, sizeof where, "ring %d, %s", ring,
           stream_name(sname, sizeof sname, stream));

  if (!nccl_enter(br))
    return aborted_err(br, where, err);
  comm = bw->comms[ring][br->rank];
  cudaStream_t s = br->streams[stream];
  switch (coll) {
  case OVL_COLL_ALLREDUCE:
    call = "ncclAllReduce";
    r = ncclAllReduce(send, recv, count, dt, op, comm, s);
    break;
  case OVL_COLL_BROADCAST:
    call = "ncclBroadcast";
    r = ncclBroadcast(send, recv, count, dt, root, comm, s);
    break;
  case OVL_COLL_ALLGATHER:
    call = "ncclAllGather";
    r = ncclAllGather(send, recv, count, dt, comm, s);
    break;
  case OVL_COLL_REDUCESCATTER:
    call = "ncclReduceScatter";
    r = ncclReduceScatter(send, recv, count, dt, op, comm, s);
    break;
  default:
    nccl_leave(br);
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown collective %d",
                    br->rank, (int)coll);
  }
  if (r != ncclSuccess)
    st = nccl_fail(err, br->rank, where, call, r, comm, __FILE__, __LINE__);
  nccl_leave(br);
  return st;
}

static ovl_status cuda_delay(ovl__brank *br, int stream, double us,
                             ovl_error *err) {
  char where[40];

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  /* Up to about 11 days; anything longer is a typo. */
  if (!(us >= 0.0) || us > 1e12)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: delay of %g us: must be between 0 and 1e12",
                    br->rank, us);
  OVL__CUDACHECK(err, br->rank, stream_name(where, sizeof where, stream),
                 ovl__kernel_delay_launch,
                 (br->streams[stream], (unsigned long long)(us * 1e3 + 0.5),
                  br->abort_flag_dev));
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Tuning and op timers                                                */
/* ------------------------------------------------------------------ */

static ovl_status cuda_world_tune(ovl__bworld *bw, const ovl_world_opts *o,
                                  ovl_error *err) {
  if (o->chaos_seed != 0)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: chaos (seed %u): --chaos needs the cpu "
                    "backend, whose emulated streams it delays",
                    o->chaos_seed);
  if (bw->nrings > 0)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: tuning must come before the first ring");
  if (o->nccl_min_ctas < 0 || o->nccl_max_ctas < 0 ||
      (o->nccl_min_ctas > 0 && o->nccl_max_ctas > 0 &&
       o->nccl_min_ctas > o->nccl_max_ctas))
    return ovl__err(err, OVL_EINVAL,
                    "NCCL CTA limits: min %d, max %d: need 0 <= min <= max",
                    o->nccl_min_ctas, o->nccl_max_ctas);
  bw->comm_priority_high = o->comm_priority_high != 0;
  bw->nccl_min_ctas = o->nccl_min_ctas;
  bw->nccl_max_ctas = o->nccl_max_ctas;
  return OVL_OK;
}

static ovl_status cuda_timers_reserve(ovl__brank *br, size_t n,
                                      ovl_error *err) {
  cudaEvent_t *t;
  if (n <= br->ntimers)
    return OVL_OK;
  t = realloc(br->timers, n * sizeof *t);
  if (t == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %zu timers",
                    br->rank, n);
  br->timers = t;
  while (br->ntimers < n) {
    OVL__CUDACHECK(err, br->rank, NULL, cudaEventCreate,
                   (&br->timers[br->ntimers]));
    br->ntimers++;
  }
  return OVL_OK;
}

static ovl_status cuda_timer_mark(ovl__brank *br, size_t i, int stream,
                                  ovl_error *err) {
  char where[48];
  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if (i >= br->ntimers)
    return ovl__err(err, OVL_EINVAL, "rank %d: timer %zu of %zu", br->rank,
                    i, br->ntimers);
  OVL__CUDACHECK(err, br->rank, stream_name(where, sizeof where, stream),
                 cudaEventRecord, (br->timers[i], br->streams[stream]));
  return OVL_OK;
}

static ovl_status cuda_timer_elapsed(ovl__brank *br, size_t a, size_t b,
                                     double *seconds, ovl_error *err) {
  float ms = 0;
  if (a >= br->ntimers || b >= br->ntimers)
    return ovl__err(err, OVL_EINVAL, "rank %d: timers %zu, %zu of %zu",
                    br->rank, a, b, br->ntimers);
  OVL__CUDACHECK(err, br->rank, NULL, cudaEventElapsedTime,
                 (&ms, br->timers[a], br->timers[b]));
  *seconds = (double)ms * 1e-3;
  return OVL_OK;
}

const ovl__backend_ops ovl__backend_cuda = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .default_ranks = cuda_default_ranks,
    .world_init = cuda_world_init,
    .world_rings = cuda_world_rings,
    .world_devices = cuda_world_devices,
    .device_name = cuda_device_name,
    .world_info = cuda_world_info,
    .world_fini = cuda_world_fini,
    .world_abort = cuda_world_abort,
    .rank_init = cuda_rank_init,
    .rank_fini = cuda_rank_fini,
    .events_reserve = cuda_events_reserve,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .mem_upload = cuda_mem_upload,
    .mem_download = cuda_mem_download,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .stream_sync = cuda_stream_sync,
    .elementwise = cuda_elementwise,
    .collective = cuda_collective,
    .delay = cuda_delay,
    .timers_reserve = cuda_timers_reserve,
    .timer_mark = cuda_timer_mark,
    .timer_elapsed = cuda_timer_elapsed,
    .world_tune = cuda_world_tune,
    /* The driver's command queue is bounded: the host blocks in a launch
     * rather than queueing more. */
    .host_bytes_per_command = 0,
    .host_bytes_per_timer = sizeof(cudaEvent_t) + CUDA_EVENT_HOST_BYTES,
};
