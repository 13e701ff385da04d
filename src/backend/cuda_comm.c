/*
 * The cuda backend's collectives and point-to-point (backend_cuda.c says
 * how the backend is built): NCCL's types and reductions, the calls on a
 * ring's communicator under the rank's NCCL lock, and the flight record
 * (an event after each call, ring_progress). Every NCCL call is checked;
 * its error names the rank, the call, the stream and ring.
 */
#include "backend/cuda.h"

static ovl_status nccl_dtype(const ovl__brank *br, ovl_dtype dtype,
                             ncclDataType_t *out, ovl_error *err) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    *out = ncclFloat32;
    return OVL_OK;
  case OVL_DTYPE_FLOAT64:
    *out = ncclFloat64;
    return OVL_OK;
  /* NCCL reduces 16-bit elements pairwise, each step one rounding to the
   * element type (its FuncSum on half and bfloat16, __hadd), in the order
   * of its algorithm (ring or tree); on 2 ranks that is one rounding of
   * a + b, as the reference and the cpu backend give. */
  case OVL_DTYPE_FLOAT16:
    *out = ncclFloat16;
    return OVL_OK;
  case OVL_DTYPE_BFLOAT16:
    *out = ncclBfloat16;
    return OVL_OK;
  }
  return ovl__err(err, OVL_EINVAL, "rank %d: unknown dtype %d", br->rank,
                  (int)dtype);
}

static ovl_status nccl_redop(const ovl__brank *br, ovl__redop redop,
                             ncclRedOp_t *out, ovl_error *err) {
  switch (redop) {
  case OVL_RED_SUM:
    *out = ncclSum;
    return OVL_OK;
  case OVL_RED_MAX:
    *out = ncclMax;
    return OVL_OK;
  case OVL_RED_MIN:
    *out = ncclMin;
    return OVL_OK;
  case OVL_RED_PROD:
    *out = ncclProd;
    return OVL_OK;
  case OVL_RED_AVG:
    /* On one rank the average is its input (times 1.0: exact, NaN, inf
     * and -0 kept), which ncclSum gives too. ncclAvg is not used there:
     * NCCL 2.28.3 leaves float64 elements from index 1,000,000 on
     * unwritten on one rank (seen on an H200 for n = 1,000,001 to
     * 1,000,004; float32, and two ranks, are right). */
    *out = br->bw->nranks == 1 ? ncclSum : ncclAvg;
    return OVL_OK;
  default:
    break;
  }
  return ovl__err(err, OVL_EINVAL, "rank %d: unknown reduction %d", br->rank,
                  (int)redop);
}

/* The communicator of `ring` for this rank, inside an NCCL section
 * (ovl__cuda_nccl_enter done by the caller); NULL with *err set if the ring
 * has none. */
static ncclComm_t ring_comm(ovl__brank *br, int ring, ovl_status *st,
                            ovl_error *err) {
  ovl__bworld *bw = br->bw;
  ncclComm_t comm = ring >= 0 && ring < bw->nrings ? bw->comms[ring][br->rank]
                                                   : NULL;
  if (comm == NULL)
    *st = ovl__err(err, OVL_EINVAL,
                   "rank %d: ring %d has no communicator (no collective or "
                   "point-to-point op was declared on it)",
                   br->rank, ring);
  return comm;
}

/* The start of an NCCL call on `ring` from `stream`: its place in `where`
 * ("ring R, STREAM"), the NCCL section entered and the ring's
 * communicator; NULL with *st and *err set, and the section left, when
 * the world aborted or the ring has none. */
static ncclComm_t nccl_begin(ovl__brank *br, int ring, int stream,
                             char *where, size_t wsize, ovl_status *st,
                             ovl_error *err) {
  char sname[80];
  ncclComm_t comm;
  snprintf(where, wsize, "ring %d, %s", ring,
           ovl__cuda_stream_name(br, sname, sizeof sname, stream));
  if (!ovl__cuda_nccl_enter(br)) {
    *st = aborted_err(br, where, err);
    return NULL;
  }
  if ((comm = ring_comm(br, ring, st, err)) == NULL)
    ovl__cuda_nccl_leave(br);
  return comm;
}

/* Flight record: an event after the call tagged `tag` on `stream`. */
static ovl_status progress_record(ovl__brank *br, int ring, int stream,
                                  uint64_t tag, const char *where,
                                  ovl_error *err) {
  uint64_t k;
  if (ring < 0 || ring >= br->nrings || br->progress[ring] == NULL)
    return OVL_OK; /* a ring rank_init did not know: no record */
  /* A captured call is not enqueued: the executor keeps the flight
   * record of graphs (see "Graphs"). */
  if (br->capturing)
    return OVL_OK;
  k = br->progress_n[ring] % PROGRESS_EVENTS;
  OVL__CUDACHECK(err, br->rank, where, cudaEventRecord,
                 (br->progress[ring][k], br->streams[stream]));
  br->progress_tag[ring][k] = tag;
  br->progress_n[ring]++;
  return OVL_OK;
}

uint64_t ovl__cuda_progress_scan(ovl__brank *br, int ring) {
  uint64_t n, lo, done = 0;
  if (ring < 0 || ring >= br->nrings || br->progress[ring] == NULL)
    return 0;
  n = br->progress_n[ring];
  lo = n > PROGRESS_EVENTS ? n - PROGRESS_EVENTS : 0;
  /* Calls of one ring may sit on several streams: the last completed is
   * the largest tag whose event has completed. */
  for (uint64_t k = n; k-- > lo;) {
    uint64_t i = k % PROGRESS_EVENTS, tag = br->progress_tag[ring][i];
    if (tag > done && cudaEventQuery(br->progress[ring][i]) == cudaSuccess)
      done = tag;
  }
  (void)cudaGetLastError();
  if (done > br->done_cache[ring])
    br->done_cache[ring] = done;
  return br->done_cache[ring];
}

uint64_t ovl__cuda_ring_progress(ovl__brank *br, int ring) {
  if (ring < 0 || ring >= OVL_MAX_RINGS)
    return 0;
  if (atomic_load(&br->frozen))
    return br->frozen_done[ring];
  return ovl__cuda_progress_scan(br, ring);
}

ovl_status ovl__cuda_collective(ovl__brank *br, int stream, int ring,
                                  ovl__coll coll, ovl__redop redop,
                                  ovl_dtype dtype, const void *send,
                                  void *recv, size_t count, int root,
                                  uint64_t tag, ovl_error *err) {
  ovl__bworld *bw = br->bw;
  ncclDataType_t dt = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm;
  ncclResult_t r = ncclSuccess;
  const char *call;
  char where[128];
  ovl_status st = OVL_OK;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if (ring < 0 || ring >= bw->nrings)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: ring %d has no communicator (%d ring%s set up)",
                    br->rank, ring, bw->nrings, bw->nrings == 1 ? "" : "s");
  if (coll == OVL_COLL_BARRIER) {
    /* Paddle's barrier: a one-element allreduce; ours has its own buffer. */
    dtype = OVL_DTYPE_FLOAT32;
    send = recv = br->barrier_buf;
    count = 1;
    redop = OVL_RED_SUM;
  }
  if ((st = nccl_dtype(br, dtype, &dt, err)) != OVL_OK)
    return st;
  if (ovl__coll_has_redop(coll) && (st = nccl_redop(br, redop, &op, err)) != OVL_OK)
    return st;
  if (ovl__coll_has_root(coll) && (root < 0 || root >= bw->nranks))
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: %s root %d does not exist (%d ranks)", br->rank,
                    ovl__coll_name(coll), root, bw->nranks);
  if (count > 0 && (send == NULL || recv == NULL))
    return ovl__err(err, OVL_EINVAL, "rank %d: collective: NULL buffer",
                    br->rank);
  if (coll == OVL_COLL_ALLTOALL && (count % (size_t)bw->nranks != 0 ||
                                    send == recv))
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: alltoall of %zu elements on %d ranks: needs a "
                    "multiple of the ranks and distinct buffers",
                    br->rank, count, bw->nranks);

  if ((comm = nccl_begin(br, ring, stream, where, sizeof where, &st, err)) ==
      NULL)
    return st;
  cudaStream_t s = br->streams[stream];
  switch (coll) {
  case OVL_COLL_ALLREDUCE:
  case OVL_COLL_BARRIER:
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
  case OVL_COLL_REDUCE:
    call = "ncclReduce";
    r = ncclReduce(send, recv, count, dt, op, root, comm, s);
    break;
  case OVL_COLL_ALLTOALL: {
    /* As nccl-tests' alltoall: a send and a receive of one part with
     * every rank, itself included, in one group. */
    size_t part = count / (size_t)bw->nranks,
           bytes = part * ovl_dtype_size(dtype);
    call = "ncclGroupStart";
    r = ncclGroupStart();
    for (int peer = 0; r == ncclSuccess && peer < bw->nranks; peer++) {
      call = "ncclSend";
      r = ncclSend((const char *)send + (size_t)peer * bytes, part, dt, peer,
                   comm, s);
      if (r == ncclSuccess) {
        call = "ncclRecv";
        r = ncclRecv((char *)recv + (size_t)peer * bytes, part, dt, peer, comm,
                     s);
      }
    }
    {
      /* End the group even after a failure inside it. */
      ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess && e != ncclSuccess) {
        call = "ncclGroupEnd";
        r = e;
      }
    }
    break;
  }
  default:
    ovl__cuda_nccl_leave(br);
    return ovl__err(err, OVL_EINVAL, "rank %d: unknown collective %d",
                    br->rank, (int)coll);
  }
  if (r != ncclSuccess)
    st = ovl__cuda_nccl_fail(err, br->rank, where, call, r, comm, __FILE__, __LINE__);
  ovl__cuda_nccl_leave(br);
  if (st == OVL_OK)
    st = progress_record(br, ring, stream, tag, where, err);
  return st;
}

/* Point-to-point: one ncclSend/ncclRecv, or several in a group. */
ovl_status ovl__cuda_p2p(ovl__brank *br, int stream, int ring,
                           const ovl__p2p_item *items, int n, uint64_t tag,
                           ovl_error *err) {
  ovl__bworld *bw = br->bw;
  ncclComm_t comm;
  ncclResult_t r = ncclSuccess;
  const char *call = "ncclSend";
  char where[160], sname[80];
  ovl_status st = OVL_OK;
  bool group = n > 1;

  if (!stream_valid(br, stream))
    return bad_stream(br, stream, err);
  if (n < 1 || items == NULL)
    return ovl__err(err, OVL_EINVAL, "rank %d: point-to-point call of %d items",
                    br->rank, n);
  for (int k = 0; k < n; k++) {
    ncclDataType_t dt;
    if (items[k].peer < 0 || items[k].peer >= bw->nranks)
      return ovl__err(err, OVL_EINVAL,
                      "rank %d: %s peer %d does not exist (%d ranks)",
                      br->rank, items[k].send ? "send" : "receive",
                      items[k].peer, bw->nranks);
    if ((st = nccl_dtype(br, items[k].dtype, &dt, err)) != OVL_OK)
      return st;
    if (items[k].count > 0 && items[k].buf == NULL)
      return ovl__err(err, OVL_EINVAL, "rank %d: point-to-point: NULL buffer",
                      br->rank);
  }
  if ((comm = nccl_begin(br, ring, stream, where, sizeof where, &st, err)) ==
      NULL)
    return st;
  cudaStream_t s = br->streams[stream];
  if (group) {
    call = "ncclGroupStart";
    r = ncclGroupStart();
  }
  for (int k = 0; r == ncclSuccess && k < n; k++) {
    const ovl__p2p_item *it = &items[k];
    ncclDataType_t dt = ncclFloat32;
    (void)nccl_dtype(br, it->dtype, &dt, NULL); /* checked above */
    if (it->send) {
      call = "ncclSend";
      r = ncclSend(it->buf, it->count, dt, it->peer, comm, s);
    } else {
      call = "ncclRecv";
      r = ncclRecv(it->buf, it->count, dt, it->peer, comm, s);
    }
    if (r != ncclSuccess)
      snprintf(where, sizeof where, "ring %d, %s, %s rank %d", ring,
               ovl__cuda_stream_name(br, sname, sizeof sname, stream),
               it->send ? "send to" : "receive from", it->peer);
  }
  if (group) {
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess && e != ncclSuccess) {
      call = "ncclGroupEnd";
      r = e;
    }
  }
  if (r != ncclSuccess)
    st = ovl__cuda_nccl_fail(err, br->rank, where, call, r, comm, __FILE__,
                             __LINE__);
  ovl__cuda_nccl_leave(br);
  if (st == OVL_OK)
    st = progress_record(br, ring, stream, tag, where, err);
  return st;
}
