/*
 * The cuda backend's world: devices, the communicators of every ring (one
 * ncclCommInitAll per ring, in the main thread), tuning, abort and
 * teardown. See backend_cuda.c for the model.
 */
#include "backend/cuda.h"

/* "2 x NVIDIA H200"; mixed devices as "1 x NVIDIA H200, 1 x NVIDIA A100"
 * (runs of equal names, in rank order). */
static ovl_status describe_devices(ovl__bworld *bw, ovl_error *err) {
  char (*names)[128] = bw->names;
  size_t len = 0;
  FOR_LOCAL_RANKS(bw, r) {
    struct cudaDeviceProp prop;
    OVL__CUDACHECK(err, r, NULL, cudaGetDeviceProperties,
                   (&prop, bw->dev0 + r - bw->first));
    snprintf(names[r], sizeof names[r], "%.127s", prop.name);
  }
  bw->devices[0] = '\0';
  for (int r = bw->first; r < bw->first + bw->nlocal;) {
    int run = 1;
    while (r + run < bw->first + bw->nlocal &&
           strcmp(names[r + run], names[r]) == 0)
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
  FOR_LOCAL_RANKS(bw, r)
    pthread_mutex_destroy(&bw->nccl_lock[r]);
  free(bw);
}

ovl_status ovl__cuda_world_init(const ovl__layout *lay, double timeout_s,
                                  ovl__bworld **out, ovl_error *err) {
  ovl__bworld *bw;
  ovl_status st;
  int count = 0, nranks = lay->nranks;
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
  if (lay->procs == NULL && nranks > count)
    return ovl__err(err, OVL_ENODEV, "asked for %d ranks but %d GPU%s %s visible",
                    nranks, count, count == 1 ? "" : "s",
                    count == 1 ? "is" : "are");
  if (lay->procs != NULL && lay->dev0 + lay->nlocal > count)
    return ovl__err(err, OVL_ENODEV,
                    "this process drives %d rank%s from device %d, but %d "
                    "GPU%s %s visible",
                    lay->nlocal, lay->nlocal == 1 ? "" : "s", lay->dev0,
                    count, count == 1 ? "" : "s", count == 1 ? "is" : "are");

  bw = calloc(1, sizeof *bw);
  if (bw == NULL)
    return ovl__err(err, OVL_ENOMEM, "cuda backend: out of memory");
  bw->nranks = nranks;
  bw->first = lay->first;
  bw->nlocal = lay->nlocal;
  bw->procs = lay->procs;
  bw->dev0 = lay->dev0;
  bw->timeout_s = timeout_s > 0.0 ? timeout_s : DEFAULT_TIMEOUT_S;
  atomic_init(&bw->aborted, 0);
  atomic_init(&bw->dirty, 0);
  pthread_mutex_init(&bw->abort_lock, NULL);
  FOR_LOCAL_RANKS(bw, r)
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
  char where[64];
  const char *call = "ncclCommInitAll";
  ncclResult_t r;

  FOR_LOCAL_RANKS(bw, i)
    devlist[i] = bw->dev0 + i - bw->first;
  if (bw->procs == NULL && bw->nccl_min_ctas == 0 && bw->nccl_max_ctas == 0) {
    r = ncclCommInitAll(bw->comms[ring], bw->nranks, devlist);
  } else {
    /* ncclCommInitAll takes no config and knows one process only: its
     * documented equivalent, one ncclCommInitRank(Config) per local rank
     * inside one group, with one unique id, made by process 0 and
     * broadcast to the others when there are several. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    bool configured = bw->nccl_min_ctas > 0 || bw->nccl_max_ctas > 0;
    if (bw->nccl_min_ctas > 0)
      config.minCTAs = bw->nccl_min_ctas;
    if (bw->nccl_max_ctas > 0)
      config.maxCTAs = bw->nccl_max_ctas;
    memset(&id, 0, sizeof id);
    call = "ncclGetUniqueId";
    r = bw->procs == NULL || ovl__procs_rank(bw->procs) == 0
            ? ncclGetUniqueId(&id)
            : ncclSuccess;
    if (bw->procs != NULL) {
      /* Every process takes part, even one whose id failed: the id is
       * agreed after. */
      int ok = r == ncclSuccess;
      ovl_status st = ovl__procs_bcast(bw->procs, &id, sizeof id, 0, err);
      if (st == OVL_OK)
        st = ovl__procs_bcast(bw->procs, &ok, sizeof ok, 0, err);
      if (st != OVL_OK)
        return st;
      if (!ok && r == ncclSuccess)
        return ovl__err(err, OVL_EBACKEND,
                        "ring %d: process 0 could not make the NCCL unique "
                        "id",
                        ring);
    }
    if (r == ncclSuccess) {
      call = "ncclGroupStart";
      r = ncclGroupStart();
    }
    FOR_LOCAL_RANKS(bw, i) {
      if (r != ncclSuccess)
        break;
      if (cudaSetDevice(devlist[i]) != cudaSuccess) {
        r = ncclUnhandledCudaError;
        break;
      }
      call = configured ? "ncclCommInitRankConfig" : "ncclCommInitRank";
      r = configured ? ncclCommInitRankConfig(&bw->comms[ring][i],
                                              bw->nranks, id, i, &config)
                     : ncclCommInitRank(&bw->comms[ring][i], bw->nranks, id,
                                        i);
    }
    {
      ncclResult_t r2 = ncclGroupEnd();
      if (r == ncclSuccess && r2 != ncclSuccess) {
        call = "ncclGroupEnd";
        r = r2;
      }
    }
  }
  if (r != ncclSuccess) {
    snprintf(where, sizeof where, "ring %d (%d rank%s)", ring, bw->nranks,
             bw->nranks == 1 ? "" : "s");
    FOR_LOCAL_RANKS(bw, i)
      bw->comms[ring][i] = NULL;
    return ovl__cuda_nccl_fail(err, -1, where, call, r, NULL, __FILE__,
                               __LINE__);
  }
  return OVL_OK;
}

ovl_status ovl__cuda_world_rings(ovl__bworld *bw, int nrings,
                                 uint32_t comm_mask, ovl_error *err) {
  ovl_status st = OVL_OK;
  int device = -1;

  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: %d rings asked for; 0 to %d are possible",
                    nrings, OVL_MAX_RINGS);
  if (ovl__cuda_world_aborted(bw))
    return ovl__err(err, OVL_EABORTED,
                    "cuda backend: cannot create rings: the world was "
                    "aborted");
  /* A ring without collectives needs no communicator; one that an
   * earlier program needed is kept. */
  bool missing = false;
  for (int ring = 0; ring < nrings; ring++)
    missing |= ((comm_mask >> ring) & 1) && bw->comms[ring][bw->first] == NULL;
  if (!missing) {
    if (nrings > bw->nrings)
      bw->nrings = nrings;
    return OVL_OK;
  }
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
  for (int ring = 0; ring < nrings; ring++) {
    if (!((comm_mask >> ring) & 1) || bw->comms[ring][bw->first] != NULL)
      continue;
    st = comms_create(bw, ring, err);
    if (st != OVL_OK)
      break;
  }
  if (st == OVL_OK && nrings > bw->nrings)
    bw->nrings = nrings;
  (void)cudaSetDevice(device);
  return st;
}

/* One send and one receive of one element between every pair of ranks
 * (themselves included) of `ring`, all ranks in one group from this
 * thread: NCCL connects the point-to-point peers then, here, instead of
 * inside a rank's first ncclSend/ncclRecv. */
static ovl_status p2p_connect(ovl__bworld *bw, int ring, ovl_error *err) {
  const int n = bw->nranks;
  float *buf[OVL_MAX_RANKS] = {0};
  cudaStream_t s[OVL_MAX_RANKS] = {0};
  ovl_status st = OVL_OK;
  ncclResult_t r = ncclSuccess;
  const char *call = "ncclGroupStart";
  char where[64];
  int failed_rank = -1;

  snprintf(where, sizeof where, "ring %d (connecting point-to-point peers)",
           ring);
  FOR_LOCAL_RANKS(bw, i) {
    if (st != OVL_OK)
      break;
    OVL__CUDACHECK_GOTO(err, i, where, cudaSetDevice, (DEV(bw, i)), st, done);
    OVL__CUDACHECK_GOTO(err, i, where, cudaMalloc,
                        ((void **)&buf[i], 2 * (size_t)n * sizeof(float)), st,
                        done);
    OVL__CUDACHECK_GOTO(err, i, where, cudaMemset,
                        (buf[i], 0, 2 * (size_t)n * sizeof(float)), st, done);
    OVL__CUDACHECK_GOTO(err, i, where, cudaStreamCreateWithFlags,
                        (&s[i], cudaStreamNonBlocking), st, done);
  }
  r = ncclGroupStart();
  FOR_LOCAL_RANKS(bw, i)
    for (int peer = 0; r == ncclSuccess && peer < n; peer++) {
      call = "ncclSend";
      r = ncclSend(buf[i] + peer, 1, ncclFloat32, peer, bw->comms[ring][i],
                   s[i]);
      if (r == ncclSuccess) {
        call = "ncclRecv";
        r = ncclRecv(buf[i] + n + peer, 1, ncclFloat32, peer,
                     bw->comms[ring][i], s[i]);
      }
      if (r != ncclSuccess)
        failed_rank = i;
    }
  {
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess && e != ncclSuccess) {
      call = "ncclGroupEnd";
      r = e;
    }
  }
  if (r != ncclSuccess) {
    st = ovl__cuda_nccl_fail(err, failed_rank, where, call, r,
                             failed_rank >= 0 ? bw->comms[ring][failed_rank]
                                              : NULL,
                             __FILE__, __LINE__);
    goto done;
  }
  FOR_LOCAL_RANKS(bw, i) {
    if (st != OVL_OK)
      break;
    OVL__CUDACHECK_GOTO(err, i, where, cudaSetDevice, (DEV(bw, i)), st, done);
    OVL__CUDACHECK_GOTO(err, i, where, cudaStreamSynchronize, (s[i]), st,
                        done);
  }
done:
  FOR_LOCAL_RANKS(bw, i) {
    if (s[i] == NULL && buf[i] == NULL)
      continue;
    (void)cudaSetDevice(DEV(bw, i));
    if (s[i] != NULL)
      (void)cudaStreamDestroy(s[i]);
    if (buf[i] != NULL)
      (void)cudaFree(buf[i]);
  }
  (void)cudaGetLastError();
  return st;
}

ovl_status ovl__cuda_world_p2p(ovl__bworld *bw, uint32_t p2p_mask,
                               ovl_error *err) {
  ovl_status st = OVL_OK;
  int device = -1;
  if (ovl__cuda_world_aborted(bw))
    return ovl__err(err, OVL_EABORTED,
                    "cuda backend: cannot connect peers: the world was "
                    "aborted");
  OVL__CUDACHECK(err, -1, NULL, cudaGetDevice, (&device));
  for (int ring = 0; ring < bw->nrings && st == OVL_OK; ring++) {
    if (!((p2p_mask >> ring) & 1) || (bw->p2p_connected >> ring) & 1)
      continue;
    if (bw->comms[ring][bw->first] == NULL)
      return ovl__err(err, OVL_EINVAL,
                      "cuda backend: ring %d carries point-to-point but has "
                      "no communicator",
                      ring);
    st = p2p_connect(bw, ring, err);
    if (st == OVL_OK)
      bw->p2p_connected |= 1u << ring;
  }
  (void)cudaSetDevice(device);
  return st;
}

const char *ovl__cuda_world_devices(ovl__bworld *bw) { return bw->devices; }

const char *ovl__cuda_device_name(ovl__bworld *bw, int rank) {
  return bw->names[rank];
}

/* CUDA's version numbers are 1000 * major + 10 * minor. */
static void cuda_version(char *buf, size_t len, int v) {
  snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

void ovl__cuda_world_info(ovl__bworld *bw, ovl_world_info *info) {
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
  FOR_LOCAL_RANKS(bw, r)
    locked[r] = pthread_mutex_timedlock(&bw->nccl_lock[r], &deadline) == 0;

  have_device = cudaGetDevice(&device) == cudaSuccess;
  /*
   * Graphs hold references on the communicators of the NCCL calls they
   * captured, and ncclCommAbort (like ncclCommDestroy) waits until every
   * graph that references its communicator is gone (NCCL 2.26 and later):
   * the ranks' graphs go first, here. One in flight is freed when it
   * completes, which the abort below makes it do. No rank launches or
   * makes a graph any more (`aborted` is set; graph_launch and graph_end
   * hold the rank's lock), except one whose lock we could not take: its
   * graphs stay, and the abort may wait for them, a risk of the case
   * above. A capture in progress also holds references: its rank ends it
   * at its next NCCL call or graph_end, which now fail at once.
   */
  FOR_LOCAL_RANKS(bw, r)
    if (locked[r] && bw->ranks[r] != NULL)
      ovl__cuda_graphs_drop(bw->ranks[r]);
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
    FOR_LOCAL_RANKS(bw, r)
      if (bw->comms[ring][r] != NULL) {
        (void)ncclCommAbort(bw->comms[ring][r]);
        bw->comms[ring][r] = NULL;
      }
  (void)ncclGroupEnd();
  /* NCCL switches devices while it tears down. */
  if (have_device)
    (void)cudaSetDevice(device);
  (void)cudaGetLastError();

  FOR_LOCAL_RANKS(bw, r)
    if (locked[r])
      pthread_mutex_unlock(&bw->nccl_lock[r]);
}

void ovl__cuda_world_abort(ovl__bworld *bw) {
  if (bw == NULL)
    return;
  atomic_store_explicit(&bw->aborted, 1, memory_order_release);
  /* End delay kernels first: the communicators' teardown waits for them. */
  *(volatile int *)bw->abort_flag = 1;
  atomic_thread_fence(memory_order_seq_cst);
  pthread_mutex_lock(&bw->abort_lock);
  if (!bw->comms_released) {
    /* The flight record as it stands: once the communicators are aborted
     * their kernels leave and every progress event completes. */
    FOR_LOCAL_RANKS(bw, r) {
      ovl__brank *br = bw->ranks[r];
      if (br == NULL || atomic_load(&br->frozen))
        continue;
      for (int ring = 0; ring < br->nrings; ring++)
        br->frozen_done[ring] = ovl__cuda_progress_scan(br, ring);
      atomic_store(&br->frozen, true);
    }
    bw->comms_released = true;
    comms_abort(bw);
  }
  pthread_mutex_unlock(&bw->abort_lock);
}

/* Whether some communicator reports an asynchronous error (ncclCommDestroy
 * could then wait forever). Called with no rank threads running. */
static bool comms_broken(ovl__bworld *bw) {
  for (int ring = 0; ring < bw->nrings; ring++)
    FOR_LOCAL_RANKS(bw, r) {
      ncclResult_t async = ncclSuccess;
      if (bw->comms[ring][r] == NULL)
        continue;
      if (ncclCommGetAsyncError(bw->comms[ring][r], &async) != ncclSuccess ||
          (async != ncclSuccess && async != ncclInProgress))
        return true;
    }
  return false;
}

void ovl__cuda_world_fini(ovl__bworld *bw) {
  int device = -1;
  bool have_device;

  if (bw == NULL)
    return;
  if (ovl__cuda_world_aborted(bw) || atomic_load(&bw->dirty) || comms_broken(bw)) {
    ovl__cuda_world_abort(bw);
  } else {
    /* Sequential destroys from one thread are fine: NCCL defers the
     * intra-process teardown of a ring to the destroy of its last
     * communicator and runs it for all of them there. */
    have_device = cudaGetDevice(&device) == cudaSuccess;
    for (int ring = 0; ring < bw->nrings; ring++)
      FOR_LOCAL_RANKS(bw, r)
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

ovl_status ovl__cuda_world_set(ovl__bworld *bw, const char *key,
                               const char *value, ovl_error *err) {
  unsigned long n;
  int min, max;
  if (strcmp(key, "chaos_seed") == 0)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: chaos (seed %s): --chaos needs the cpu "
                    "backend, whose emulated streams it delays",
                    value);
  if (strcmp(key, "tf32") == 0) {
    /* Read by each matmul. */
    if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
      return ovl__err(err, OVL_EINVAL, "tf32: '%s' is not on or off", value);
    bw->tf32 = strcmp(value, "on") == 0;
    return OVL_OK;
  }
  if (bw->nrings > 0)
    return ovl__err(err, OVL_EINVAL,
                    "cuda backend: tuning must come before the first ring");
  if (strcmp(key, "comm_priority") == 0) {
    if (strcmp(value, "high") != 0 && strcmp(value, "default") != 0)
      return ovl__err(err, OVL_EINVAL,
                      "comm_priority: '%s' is not high or default", value);
    bw->comm_priority_high = strcmp(value, "high") == 0;
    return OVL_OK;
  }
  if (!ovl__parse_uint(value, INT_MAX, &n))
    return ovl__err(err, OVL_EINVAL, "%s: '%s' is not a number >= 0", key,
                    value);
  min = strcmp(key, "nccl_min_ctas") == 0 ? (int)n : bw->nccl_min_ctas;
  max = strcmp(key, "nccl_max_ctas") == 0 ? (int)n : bw->nccl_max_ctas;
  if (min > 0 && max > 0 && min > max)
    return ovl__err(err, OVL_EINVAL,
                    "NCCL CTA limits: min %d, max %d: need 0 <= min <= max",
                    min, max);
  bw->nccl_min_ctas = min;
  bw->nccl_max_ctas = max;
  return OVL_OK;
}

