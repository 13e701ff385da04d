/*
 * The cuda backend: real devices, CUDA streams and events, NCCL.
 *
 * Rank r drives CUDA device r from its own thread. Per rank: one calc
 * stream, one comm stream per ring (all created cudaStreamNonBlocking, so
 * nothing orders them but our events) and two events per ring created with
 * cudaEventDisableTiming, as Paddle does, then the schedule's named events
 * (events_reserve), made the same way. Per ring: one NCCL communicator
 * per rank, all made by one ncclCommInitAll() in the main thread. Per
 * rank: one cuBLAS handle for matmul_v2, with its workspace.
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
 *
 * Graphs (ovl_run_opts.graph): a rank's work captured on its streams as
 * CUDA graphs and launched on calc (cuda_graph.c). A graph holds
 * references on the communicators of the NCCL calls in it, and NCCL's
 * abort waits for every such graph to be destroyed: world_abort destroys
 * them first (comms_abort), and a rank makes or launches graphs under its
 * NCCL lock only.
 *
 * The files, each calling only those after it: backend_cuda.c (ranks,
 * events and syncs, kernels, timers, and the backend's table),
 * cuda_mem.c (memory: device and pinned host buffers, copies),
 * cuda_world.c (devices, communicators, tuning, abort, teardown),
 * cuda_comm.c (collectives, point-to-point, the flight record),
 * cuda_graph.c (graphs), cuda_util.c (error texts, names, the NCCL
 * section, the device count), kernels.cu (the CUDA C++ kernels).
 */
#include "backend/cuda.h"

/* ------------------------------------------------------------------ */
/* Ranks                                                               */
/* ------------------------------------------------------------------ */

static void rank_release(ovl__brank *br) {
  ovl__bworld *bw = br->bw;
  pthread_mutex_lock(&bw->abort_lock);
  if (bw->ranks[br->rank] == br)
    bw->ranks[br->rank] = NULL;
  pthread_mutex_unlock(&bw->abort_lock);
  for (int ring = 0; ring < OVL_MAX_RINGS; ring++) {
    if (br->progress[ring] != NULL)
      for (int k = 0; k < PROGRESS_EVENTS; k++)
        if (br->progress[ring][k] != NULL)
          (void)cudaEventDestroy(br->progress[ring][k]);
    free(br->progress[ring]);
    free(br->progress_tag[ring]);
  }
  ovl__cuda_graphs_release(br);
  if (br->barrier_buf != NULL)
    (void)cudaFree(br->barrier_buf);
  if (br->blas != NULL)
    (void)ovl__blas.Destroy(br->blas);
  for (int i = 0; i < OVL_MAX_STREAMS; i++)
    if (br->blas_ws[i] != NULL)
      (void)cudaFree(br->blas_ws[i]);
  for (size_t i = 0; i < br->ntimers; i++)
    (void)cudaEventDestroy(br->timers[i]);
  free(br->timers);
  for (int i = 0; i < br->nevents; i++)
    (void)cudaEventDestroy(br->events[i]);
  free(br->events);
  free(br->recorded);
  free(br->cap_recorded);
  for (int i = 0; i < br->nstreams; i++) {
    (void)cudaStreamDestroy(br->streams[i]);
    free(br->names[i]);
  }
  (void)cudaGetLastError();
  free(br);
}

static ovl_status blas_workspace(ovl__brank *br, int s, ovl_error *err);

/* User streams [nstreams, upto): non-blocking, the least priority (as
 * calc), named for messages, each with its cuBLAS workspace. On the rank's thread, its device current. */
static ovl_status cuda_streams_reserve(ovl__brank *br, int upto,
                                       const char *const *names,
                                       ovl_error *err) {
  char where[96];
  int least = 0, greatest = 0;
  if (upto < 0 || upto > OVL_MAX_STREAMS)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d streams, at most %d",
                    br->rank, upto, OVL_MAX_STREAMS);
  if (upto <= br->nstreams)
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank, NULL, cudaDeviceGetStreamPriorityRange,
                 (&least, &greatest));
  while (br->nstreams < upto) {
    int s = br->nstreams;
    br->names[s] = ovl__strdup(names != NULL && names[s] != NULL ? names[s]
                                                                  : "?");
    if (br->names[s] == NULL)
      return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", br->rank);
    OVL__CUDACHECK(err, br->rank,
                   ovl__cuda_stream_name(br, where, sizeof where, s),
                   cudaStreamCreateWithPriority,
                   (&br->streams[s], cudaStreamNonBlocking, least));
    br->nstreams++;
    if (br->blas != NULL) {
      ovl_status st = blas_workspace(br, s, err);
      if (st != OVL_OK)
        return st;
    }
  }
  return OVL_OK;
}

/* Grow the event arrays and create events up to `nevents` (timing
 * disabled, never recorded). On the rank's thread, its device current. */
static ovl_status cuda_events_reserve(ovl__brank *br, int nevents,
                                      ovl_error *err) {
  char where[96];
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
    rec = realloc(br->cap_recorded, (size_t)nevents * sizeof *rec);
    if (rec == NULL)
      return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %d events",
                      br->rank, nevents);
    br->cap_recorded = rec;
    br->capevents = nevents;
  }
  while (br->nevents < nevents) {
    int e = br->nevents;
    OVL__CUDACHECK(err, br->rank,
                   ovl__cuda_event_name(where, sizeof where, br->nrings, e),
                   cudaEventCreateWithFlags,
                   (&br->events[e], cudaEventDisableTiming));
    br->recorded[e] = false;
    br->cap_recorded[e] = false;
    br->nevents++;
  }
  return OVL_OK;
}

/* The cuBLAS workspace of stream s (made with the stream, before anything
 * runs: no cudaMalloc while NCCL kernels may be in flight). */
static ovl_status blas_workspace(ovl__brank *br, int s, ovl_error *err) {
  char where[96];
  size_t bytes = s == OVL_STREAM_CALC ? BLAS_WORKSPACE_BYTES
                                      : BLAS_SIDE_WORKSPACE_BYTES;
  ovl__cuda_stream_name(br, where, sizeof where, s);
  OVL__CUDACHECK(err, br->rank, where, cudaMalloc,
                 (&br->blas_ws[s], bytes));
  br->blas_ws_bytes[s] = bytes;
  return OVL_OK;
}

/* The rank's cuBLAS handle. Products of bfloat16 and float16 are summed
 * in float32 throughout: cuBLAS may not reduce the partial sums of a
 * split K in the input's precision. */
static ovl_status blas_init(ovl__brank *br, ovl_error *err) {
  ovl_status st = ovl__blas_load(br->rank, err);
  if (st != OVL_OK)
    return st;
  OVL__BLASCHECK(err, br->rank, NULL, Create, (&br->blas));
  OVL__BLASCHECK(err, br->rank, NULL, SetMathMode,
                 (br->blas, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  for (int s = 0; s < br->nstreams; s++) {
    st = blas_workspace(br, s, err);
    if (st != OVL_OK)
      return st;
  }
  return OVL_OK;
}

static ovl_status cuda_rank_init(ovl__bworld *bw, int rank, int nrings,
                                 ovl__brank **out, ovl_error *err) {
  ovl__brank *br;
  ovl_status st = OVL_OK;
  char where[96];

  *out = NULL;
  if (rank < bw->first || rank >= bw->first + bw->nlocal)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d is not one of this process's (%d to %d of %d "
                    "ranks)",
                    rank, bw->first, bw->first + bw->nlocal - 1, bw->nranks);
  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: %d rings asked for; 0 to %d are possible", rank,
                    nrings, OVL_MAX_RINGS);
  br = calloc(1, sizeof *br);
  if (br == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
  br->bw = bw;
  br->rank = rank;
  br->device = DEV(bw, rank);
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
      OVL__CUDACHECK_GOTO(err, rank, ovl__cuda_stream_name(br, where, sizeof where, s),
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
  /* barrier's buffer, and the flight record's events of every ring: made
   * here, before any collective runs. */
  OVL__CUDACHECK_GOTO(err, rank, "barrier buffer", cudaMalloc,
                      ((void **)&br->barrier_buf, sizeof(float)), st, fail);
  OVL__CUDACHECK_GOTO(err, rank, "barrier buffer", cudaMemset,
                      (br->barrier_buf, 0, sizeof(float)), st, fail);
  st = blas_init(br, err);
  if (st != OVL_OK)
    goto fail;
  for (int ring = 0; ring < nrings; ring++) {
    br->progress[ring] = calloc(PROGRESS_EVENTS, sizeof(cudaEvent_t));
    br->progress_tag[ring] = calloc(PROGRESS_EVENTS, sizeof(uint64_t));
    if (br->progress[ring] == NULL || br->progress_tag[ring] == NULL) {
      st = ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
      goto fail;
    }
    for (int k = 0; k < PROGRESS_EVENTS; k++)
      OVL__CUDACHECK_GOTO(err, rank, "flight record", cudaEventCreateWithFlags,
                          (&br->progress[ring][k], cudaEventDisableTiming),
                          st, fail);
  }
  pthread_mutex_lock(&bw->abort_lock);
  bw->ranks[rank] = br;
  pthread_mutex_unlock(&bw->abort_lock);
  *out = br;
  return OVL_OK;

fail:
  rank_release(br);
  return st;
}

/* After an abort NCCL's kernels leave and our delay kernels see the
 * abort flag, so a stream empties within the time its running kernels
 * take. A stream still busy after QUIESCE_GRACE_S (a kernel the abort did
 * not reach) is given up on: the caller then leaks the rank's memory rather
 * than free what the device may still write. */
static bool cuda_rank_quiesce(ovl__brank *br) {
  double deadline = ovl__now() + QUIESCE_GRACE_S;
  bool idle = true;
  for (int s = 0; s < br->nstreams; s++) {
    for (;;) {
      cudaError_t e = cudaStreamQuery(br->streams[s]);
      if (e != cudaErrorNotReady) {
        /* Done, or failed for good: either way nothing more runs. */
        (void)cudaGetLastError();
        break;
      }
      if (ovl__now() >= deadline) {
        idle = false;
        break;
      }
      ovl__cuda_sleep_ns(SYNC_SLEEP_NS);
    }
  }
  if (!idle)
    atomic_store(&br->bw->dirty, 1);
  return idle;
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
  char where[96], sname[80], ename[40];
  ovl_status st;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if ((st = check_event(br, event, err)) != OVL_OK)
    return st;
  /* A new record replaces the old one (CUDA semantics, and Paddle's). */
  OVL__CUDACHECK(err, br->rank,
                 (snprintf(where, sizeof where, "%s, %s",
                           ovl__cuda_event_name(ename, sizeof ename, br->nrings, event),
                           ovl__cuda_stream_name(br, sname, sizeof sname, stream)),
                  where),
                 cudaEventRecord, (br->events[event], br->streams[stream]));
  /* Inside a capture the record is an edge of the graph, not a record of
   * the event: only this capture's waits see it. */
  if (br->capturing)
    br->cap_recorded[event] = true;
  else
    br->recorded[event] = true;
  return OVL_OK;
}

static ovl_status cuda_stream_wait_event(ovl__brank *br, int stream,
                                         int event, ovl_error *err) {
  char where[96], sname[80], ename[40];
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
  if (!br->capturing && !br->recorded[event])
    return OVL_OK;
  /* Inside a capture, a wait for an event this capture did not record
   * does nothing either: its last record was in an earlier segment or
   * iteration, which completed before this graph can start (see
   * "Graphs"), or there was none; CUDA would not capture a wait on an
   * event recorded outside the capture as an edge. */
  if (br->capturing && !br->cap_recorded[event])
    return OVL_OK;
  OVL__CUDACHECK(err, br->rank,
                 (snprintf(where, sizeof where, "%s, %s",
                           ovl__cuda_stream_name(br, sname, sizeof sname, stream),
                           ovl__cuda_event_name(ename, sizeof ename, br->nrings, event)),
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
  if (!ovl__cuda_nccl_enter(br))
    return aborted_err(br, what, err);
  for (int ring = 0; ring < nrings && st == OVL_OK; ring++) {
    ncclComm_t comm = bw->comms[ring][br->rank];
    if (comm == NULL)
      continue; /* a ring without collectives */
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    char where[128];
    if (r != ncclSuccess) {
      snprintf(where, sizeof where, "ring %d (during %s)", ring, what);
      st = ovl__cuda_nccl_fail(err, br->rank, where, "ncclCommGetAsyncError", r, comm,
                     __FILE__, __LINE__);
    } else if (async != ncclSuccess && async != ncclInProgress) {
      snprintf(where, sizeof where, "ring %d (during %s)", ring, what);
      st = ovl__cuda_nccl_fail(err, br->rank, where, "NCCL asynchronous error", async,
                     comm, __FILE__, __LINE__);
      if (st == OVL_EINVAL)
        st = OVL_EBACKEND;
    }
  }
  ovl__cuda_nccl_leave(br);
  return st;
}

static ovl_status cuda_stream_sync(ovl__brank *br, int stream,
                                   ovl_error *err) {
  ovl__bworld *bw = br->bw;
  char sname[80], what[64];
  double start, now, next_check;
  ovl_status st;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  snprintf(what, sizeof what, "sync of %s",
           ovl__cuda_stream_name(br, sname, sizeof sname, stream));
  /* A query of a capturing stream would end the capture. */
  if (br->capturing)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: %s inside a graph capture (a host sync ends "
                    "a graph's segment)",
                    br->rank, what);
  start = ovl__now();
  next_check = start + SYNC_NCCL_CHECK_S;
  for (;;) {
    if (ovl__cuda_world_aborted(bw))
      return aborted_err(br, what, err);
    cudaError_t e = cudaStreamQuery(br->streams[stream]);
    if (e == cudaSuccess)
      return OVL_OK;
    if (e != cudaErrorNotReady)
      return ovl__cuda_fail(err, br->rank, sname, "cudaStreamQuery", e, __FILE__,
                       __LINE__);
    now = ovl__now();
    if (now >= next_check) {
      /* Another process's rank failed: fail at once too (the agreement
       * after the run keeps its error). */
      if (bw->procs != NULL && ovl__procs_aborted(bw->procs)) {
        ovl__cuda_world_abort(bw);
        return aborted_err(br, what, err);
      }
      st = comms_check(br, what, err);
      if (st != OVL_OK) {
        if (st != OVL_EABORTED)
          ovl__cuda_world_abort(bw);
        return st;
      }
      next_check = now + SYNC_NCCL_CHECK_S;
    }
    if (now - start >= bw->timeout_s) {
      ovl__cuda_world_abort(bw);
      return ovl__err(err, OVL_ETIMEDOUT,
                      "rank %d: %s: timed out after %g s (NCCL collective "
                      "stuck?)",
                      br->rank, what, bw->timeout_s);
    }
    if (now - start >= SYNC_SPIN_S)
      ovl__cuda_sleep_ns(SYNC_SLEEP_NS);
  }
}

/* ------------------------------------------------------------------ */
/* Work                                                                */
/* ------------------------------------------------------------------ */

static ovl_status cuda_elementwise(ovl__brank *br, int stream, ovl__ew fn,
                                   ovl_dtype dtype, void *out, const void *x,
                                   const void *y, double scale, double bias,
                                   size_t n, ovl_error *err) {
  char where[96];
  int kdtype;
  bool binary;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if ((unsigned)fn >= OVL__EW_COUNT)
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown elementwise function %d",
                    br->rank, (int)fn);
  binary = ovl__ew_arity(fn) == 2;
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    kdtype = OVL__KERNEL_FLOAT32;
    break;
  case OVL_DTYPE_FLOAT64:
    kdtype = OVL__KERNEL_FLOAT64;
    break;
  case OVL_DTYPE_FLOAT16:
    kdtype = OVL__KERNEL_FLOAT16;
    break;
  case OVL_DTYPE_BFLOAT16:
    kdtype = OVL__KERNEL_BFLOAT16;
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
                    ovl__cuda_stream_name(br, where, sizeof where, stream));
  OVL__CUDACHECK(err, br->rank, ovl__cuda_stream_name(br, where, sizeof where, stream),
                 ovl__kernel_elementwise_launch,
                 (br->streams[stream], br->sm_count, (int)fn, kdtype, out, x, y,
                  scale, bias, n));
  return OVL_OK;
}

/*
 * out = op(x) @ op(y), row-major, with cublasGemmEx. cuBLAS is
 * column-major: a row-major [R, C] matrix is its column-major [C, R]
 * transpose, so the row-major product out = op(x) op(y) is the
 * column-major out^T = op(y)^T op(x)^T: cuBLAS's A is y, its B is x, its
 * m, n, k are our N, M, K. y is [K, N] row-major (ld N; op N), or [N, K]
 * with trans_y (ld K; op T); x likewise with M.
 *
 * The handle takes the op's stream for each call; cublasSetStream puts
 * the handle back on cuBLAS's own workspace pool, so the stream's own
 * workspace is set after it: matmuls of two streams may run at the same
 * time, and one workspace must not serve both.
 */
static ovl_status cuda_matmul(ovl__brank *br, int stream, ovl_dtype dtype,
                              void *out, const void *x, const void *y,
                              size_t m, size_t n, size_t k, bool trans_x,
                              bool trans_y, ovl_error *err) {
  char where[96];
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  cudaDataType_t type;
  cublasComputeType_t compute;
  const void *alpha = &one_f, *beta = &zero_f;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  ovl__cuda_stream_name(br, where, sizeof where, stream);
  if (m == 0 || n == 0 || k == 0 || m > INT_MAX || n > INT_MAX ||
      k > INT_MAX)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: matmul on %s: M %zu, N %zu, K %zu: cuBLAS "
                    "takes 1 to %d",
                    br->rank, where, m, n, k, INT_MAX);
  if (out == NULL || x == NULL || y == NULL || out == x || out == y)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: matmul on %s: NULL or aliased buffer", br->rank,
                    where);
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    type = CUDA_R_32F;
    compute = br->bw->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                           : CUBLAS_COMPUTE_32F;
    break;
  case OVL_DTYPE_FLOAT64:
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
    alpha = &one_d;
    beta = &zero_d;
    break;
  case OVL_DTYPE_FLOAT16:
    /* Tensor cores, products summed in float32, one rounding at the end. */
    type = CUDA_R_16F;
    compute = CUBLAS_COMPUTE_32F;
    break;
  case OVL_DTYPE_BFLOAT16:
    type = CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
    break;
  default:
    return ovl__err(err, OVL_EINVAL, "rank %d: matmul: unknown dtype %d",
                    br->rank, (int)dtype);
  }
  OVL__BLASCHECK(err, br->rank, where, SetStream,
                 (br->blas, br->streams[stream]));
  OVL__BLASCHECK(err, br->rank, where, SetWorkspace,
                 (br->blas, br->blas_ws[stream], br->blas_ws_bytes[stream]));
  OVL__BLASCHECK(err, br->rank, where, GemmEx,
                 (br->blas, trans_y ? CUBLAS_OP_T : CUBLAS_OP_N,
                  trans_x ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                  (int)k, alpha, y, type, trans_y ? (int)k : (int)n, x, type,
                  trans_x ? (int)m : (int)k, beta, out, type, (int)n,
                  compute, CUBLAS_GEMM_DEFAULT));
  return OVL_OK;
}

static ovl_status cuda_delay(ovl__brank *br, int stream, double us,
                             ovl_error *err) {
  char where[96];

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  /* Up to about 11 days; anything longer is a typo. */
  if (!(us >= 0.0) || us > 1e12)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: delay of %g us: must be between 0 and 1e12",
                    br->rank, us);
  OVL__CUDACHECK(err, br->rank, ovl__cuda_stream_name(br, where, sizeof where, stream),
                 ovl__kernel_delay_launch,
                 (br->streams[stream], (unsigned long long)(us * 1e3 + 0.5),
                  br->abort_flag_dev));
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Tuning and op timers                                                */
/* ------------------------------------------------------------------ */

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
  char where[96];
  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if (i >= br->ntimers)
    return ovl__err(err, OVL_EINVAL, "rank %d: timer %zu of %zu", br->rank,
                    i, br->ntimers);
  /* Inside a capture: an event record node, so that the timer is
   * recorded each time the graph runs (a plain record would only be an
   * edge of the graph). */
  OVL__CUDACHECK(err, br->rank, ovl__cuda_stream_name(br, where, sizeof where, stream),
                 cudaEventRecordWithFlags,
                 (br->timers[i], br->streams[stream],
                  br->capturing ? cudaEventRecordExternal
                                : cudaEventRecordDefault));
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
    .device_count = ovl__cuda_device_count,
    .default_ranks = ovl__cuda_default_ranks,
    .world_init = ovl__cuda_world_init,
    .world_rings = ovl__cuda_world_rings,
    .world_p2p = ovl__cuda_world_p2p,
    .world_devices = ovl__cuda_world_devices,
    .device_name = ovl__cuda_device_name,
    .world_info = ovl__cuda_world_info,
    .world_fini = ovl__cuda_world_fini,
    .world_abort = ovl__cuda_world_abort,
    .rank_init = cuda_rank_init,
    .streams_reserve = cuda_streams_reserve,
    .rank_fini = cuda_rank_fini,
    .rank_quiesce = cuda_rank_quiesce,
    .events_reserve = cuda_events_reserve,
    .mem_alloc = ovl__cuda_mem_alloc,
    .mem_free = ovl__cuda_mem_free,
    .host_alloc = ovl__cuda_host_alloc,
    .host_free = ovl__cuda_host_free,
    .mem_upload = ovl__cuda_mem_upload,
    .mem_download = ovl__cuda_mem_download,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .stream_sync = cuda_stream_sync,
    .elementwise = cuda_elementwise,
    .matmul = cuda_matmul,
    .collective = ovl__cuda_collective,
    .p2p = ovl__cuda_p2p,
    .ring_progress = ovl__cuda_ring_progress,
    .delay = cuda_delay,
    .timers_reserve = cuda_timers_reserve,
    .timer_mark = cuda_timer_mark,
    .timer_elapsed = cuda_timer_elapsed,
    .graph_begin = ovl__cuda_graph_begin,
    .graph_end = ovl__cuda_graph_end,
    .graph_launch = ovl__cuda_graph_launch,
    .graph_abort = ovl__cuda_graph_abort,
    .world_set = ovl__cuda_world_set,
    /* The driver's command queue is bounded: the host blocks in a launch
     * rather than queueing more. */
    .host_bytes_per_command = 0,
    .host_bytes_per_timer = sizeof(cudaEvent_t) + CUDA_EVENT_HOST_BYTES,
};
