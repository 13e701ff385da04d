/*
 * The backend layer (src/backend/): the only seam between the model and
 * the machine (docs/ARCHITECTURE.md, "Backends"). A backend gives streams,
 * events, memory, kernels, collectives, point-to-point and timers; the run
 * (src/run/) drives it. The cpu backend emulates devices (backend_cpu.c
 * and the cpu_*.c files, cpu.h); the cuda backend is CUDA + NCCL + cuBLAS
 * (backend_cuda.c, cuda_*.c, kernels.cu; cuda.h), compiled only with
 * CUDA. Nothing here knows programs or ops beyond the primitives' words
 * (core/op.h): what a kernel computes, which collective, which reduction.
 */
#ifndef OVL_BACKEND_BACKEND_H
#define OVL_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/op.h"
#include "procs/procs.h"

typedef struct ovl__bworld ovl__bworld; /* backend state of a world */
typedef struct ovl__brank ovl__brank;   /* backend state of one rank */

/*
 * The only seam between the model and the machine. Functions marked (main)
 * are called from the thread that owns the world, the others from the rank's
 * own thread. Stream numbers: OVL_STREAM_CALC, OVL_STREAM_COMM(ring).
 * Enqueue functions return as soon as the work is queued; errors of queued
 * work are reported by the next sync of that stream (sticky, as in CUDA).
 * Every error message names the rank, and the stream where one is involved;
 * the executor adds the op and its source line.
 */
/* One send or receive of a point-to-point call (backend p2p). */
typedef struct ovl__p2p_item {
  bool send;       /* else a receive */
  int peer;        /* the other rank */
  ovl_dtype dtype;
  void *buf;       /* send: read; receive: written */
  size_t count;    /* elements */
} ovl__p2p_item;

typedef struct ovl__backend_ops {
  const char *name;
  /* (main) Devices usable by this backend; 0 if none. Never fails. */
  int (*device_count)(void);
  /* (main) Ranks used when the user asks for none. */
  int (*default_ranks)(void);
  /* (main) Set up a world of layout->nranks ranks, of which this process
   * drives layout->nlocal (only those get rank_init; device_name, the
   * communicators and every per-rank call are of local ranks). With
   * procs, a collective call over the processes (cuda: the local ranks'
   * devices start at layout->dev0). */
  ovl_status (*world_init)(const ovl__layout *layout, double timeout_s,
                           ovl__bworld **out, ovl_error *err);
  /* (main) Make sure rings [0, nrings) exist, and a communicator for each
   * ring R whose bit is set in comm_mask (the rings that carry a
   * collective; a ring without one only has comm streams). Called before
   * the rank threads of a run start; never removes what an earlier call
   * made. */
  ovl_status (*world_rings)(ovl__bworld *bw, int nrings, uint32_t comm_mask,
                            ovl_error *err);
  /* (main, optional) Connect every pair of ranks of the rings whose bit
   * is set in p2p_mask (they carry point-to-point: send_v2, recv_v2,
   * alltoall) after world_rings made their communicators, so that a send
   * or receive never waits on the host for its peer to connect (cuda:
   * NCCL connects point-to-point peers lazily, inside the enqueue call,
   * where a peer that never comes would hang the host). Idempotent. */
  ovl_status (*world_p2p)(ovl__bworld *bw, uint32_t p2p_mask,
                          ovl_error *err);
  /* (main) "2 x NVIDIA H200" or similar. */
  const char *(*world_devices)(ovl__bworld *bw);
  /* (main) The device of one rank ("NVIDIA H200"); rank is in range. */
  const char *(*device_name)(ovl__bworld *bw, int rank);
  /* (main) The versions in `info` (driver, runtime, NCCL); the caller has
   * set every field to "n/a" and fills hostname and cpu_model itself. */
  void (*world_info)(ovl__bworld *bw, ovl_world_info *info);
  void (*world_fini)(ovl__bworld *bw);
  /* (any thread) Another rank failed: make every blocked or future
   * collective and stream wait of this world fail promptly with
   * OVL_EABORTED instead of waiting for the timeout. */
  void (*world_abort)(ovl__bworld *bw);

  /* Bind this thread to the rank's device; create calc + nrings comm
   * streams and 2 * nrings events (timing disabled). */
  ovl_status (*rank_init)(ovl__bworld *bw, int rank, int nrings,
                          ovl__brank **out, ovl_error *err);
  /* Release streams and events; the rank's streams must be drained. */
  void (*rank_fini)(ovl__brank *br);
  /* Wait until nothing queued on any stream of this rank runs or will
   * run, so that the memory its commands use can be freed. Not bounded by
   * the run's timeout: it is called at teardown, after world_abort when
   * the run failed, and then queued collectives and waits fail at once and
   * delays end, so what is left is kernels already running. Looks at every
   * stream even when one has failed. Returns false only if the backend had
   * to give up on a stream (cuda: still busy after a long grace); the
   * caller must then not free the rank's memory. */
  bool (*rank_quiesce)(ovl__brank *br);
  /* Make sure the rank has at least `nstreams` streams, numbered
   * 0..nstreams-1: calc and the comm streams rank_init made, then user
   * streams (non-blocking, default priority); names[s] is stream s's name
   * for messages ("side"). Never shrinks. */
  ovl_status (*streams_reserve)(ovl__brank *br, int nstreams,
                                const char *const *names, ovl_error *err);
  /* Make sure the rank has at least `nevents` events (timing disabled),
   * numbered 0..nevents-1: the first 2 * nrings are the per-ring events
   * rank_init made, the rest are the schedule's named events
   * (OVL_EVENT_NAMED). Never shrinks; a new event starts never recorded. */
  ovl_status (*events_reserve)(ovl__brank *br, int nevents, ovl_error *err);

  /* Device memory, poisoned so that reading unwritten data shows (the CPU
   * backend fills with NaN). */
  ovl_status (*mem_alloc)(ovl__brank *br, size_t bytes, void **out,
                          ovl_error *err);
  void (*mem_free)(ovl__brank *br, void *ptr);
  /* Host memory for copies to and from the device: page-locked where the
   * backend has such a thing (a fetch is timed, and a copy to pageable
   * memory is several times slower). */
  ovl_status (*host_alloc)(ovl__brank *br, size_t bytes, void **out,
                           ovl_error *err);
  void (*host_free)(ovl__brank *br, void *ptr);
  /* Synchronous copies between host and device memory. */
  ovl_status (*mem_upload)(ovl__brank *br, void *dst, const void *src,
                           size_t bytes, ovl_error *err);
  ovl_status (*mem_download)(ovl__brank *br, void *dst, const void *src,
                             size_t bytes, ovl_error *err);

  /* Snapshot everything queued on `stream` so far into `event` (replaces any
   * earlier record). */
  ovl_status (*event_record)(ovl__brank *br, int event, int stream,
                             ovl_error *err);
  /* Work queued on `stream` after this waits for the event's last record;
   * no-op if it was never recorded. The host does not block. */
  ovl_status (*stream_wait_event)(ovl__brank *br, int stream, int event,
                                  ovl_error *err);
  /* Host blocks until `stream` has finished everything queued on it. */
  ovl_status (*stream_sync)(ovl__brank *br, int stream, ovl_error *err);

  /* out[i] = f(x[i], y[i]) for n elements; y unused by ASSIGN and SCALE. */
  ovl_status (*elementwise)(ovl__brank *br, int stream, ovl__ew fn,
                            ovl_dtype dtype, void *out, const void *x,
                            const void *y, double scale, double bias,
                            size_t n, ovl_error *err);
  /* out[M, N] = op(x) @ op(y), row-major, queued on `stream`: x is [M, K]
   * ([K, M] with trans_x: op(x) is its transpose), y [K, N] ([N, K] with
   * trans_y), all three of `dtype`; out is another buffer than x and y.
   * The products are summed in float (float64 for float64) and the sum
   * rounded to the dtype once (cuda: cuBLAS, fp32 accumulation; float32
   * in TF32 only with the world's tf32 key). m, n >= 1; k >= 1. */
  ovl_status (*matmul)(ovl__brank *br, int stream, ovl_dtype dtype,
                       void *out, const void *x, const void *y, size_t m,
                       size_t n, size_t k, bool trans_x, bool trans_y,
                       ovl_error *err);
  /* Collective on `ring`, queued on `stream`. count is the element count of
   * `send` (allreduce, broadcast, allgather, reduce, alltoall: all of it,
   * nranks parts) or of `recv` (reducescatter, as NCCL's recvcount);
   * barrier: send and recv NULL, count 1. `tag`: the flight record's
   * number of this call (ring_progress). */
  ovl_status (*collective)(ovl__brank *br, int stream, int ring,
                           ovl__coll coll, ovl__redop redop, ovl_dtype dtype,
                           const void *send, void *recv, size_t count,
                           int root, uint64_t tag, ovl_error *err);
  /* Point-to-point on `ring`, queued on `stream`: items[0..n) progress
   * together, with NCCL group semantics (n == 1: a lone ncclSend or
   * ncclRecv; n > 1: ncclGroupStart, the items, ncclGroupEnd). The k-th
   * send from rank a to rank b on a ring matches the k-th receive on rank
   * b from rank a, counted in the order the host enqueues them; a matched
   * pair must agree on dtype and count. `tag`: as for collective, the
   * number of the last item. */
  ovl_status (*p2p)(ovl__brank *br, int stream, int ring,
                    const ovl__p2p_item *items, int n, uint64_t tag,
                    ovl_error *err);
  /* (the rank's thread, or main once the rank's thread is done) Flight
   * record: the tag of the last collective or point-to-point call of
   * `ring` this rank has completed (0: none). Works after a timeout and
   * after world_abort; never blocks. */
  uint64_t (*ring_progress)(ovl__brank *br, int ring);
  /* Keep `stream` busy for `us` microseconds. */
  ovl_status (*delay)(ovl__brank *br, int stream, double us, ovl_error *err);

  /* Per-op device timing (--op-times, traces). Room for n marks is
   * reserved before the timed loop; mark i is taken when `stream` reaches
   * that point of its queue; once the streams are drained, *seconds is the
   * time from mark a to mark b (marks of different streams of the rank
   * compare: cuda events of one device, the host clock on cpu). */
  ovl_status (*timers_reserve)(ovl__brank *br, size_t n, ovl_error *err);
  ovl_status (*timer_mark)(ovl__brank *br, size_t i, int stream,
                           ovl_error *err);
  ovl_status (*timer_elapsed)(ovl__brank *br, size_t a, size_t b,
                              double *seconds, ovl_error *err);

  /* Graphs (ovl_run_opts.graph; docs/ARCHITECTURE.md, "Graphs"). NULL
   * where the backend has none (cpu). graph_begin starts capturing: from
   * it to graph_end, what the rank enqueues on any of its streams is
   * recorded, not run; every stream starts the capture ordered after
   * nothing (it is forked from calc at graph_begin, before any work) and
   * is joined back to calc at graph_end, so that the capture is one graph.
   * Inside a capture: event_record and stream_wait_event become the
   * graph's edges; a wait for an event not recorded in this capture does
   * nothing (its last record, in an earlier segment or iteration, has
   * completed before the graph is launched: the executor launches a
   * segment only after the host sync that ends the one before);
   * timer_mark records its timer each time the graph runs; the flight
   * record's progress events are not recorded (the executor counts a
   * segment's calls as completed once the host sync after it returns);
   * stream_sync must not be called. graph_end instantiates the capture
   * and gives its number (0, 1, ... per rank); graph_launch runs graph
   * `graph` on the calc stream (the host does not block: stream_sync of
   * calc waits for all of it, whatever streams its work was captured
   * from). graph_abort ends a capture that failed half way, discarding
   * it (nothing if none is open). Graphs live until rank_fini. */
  ovl_status (*graph_begin)(ovl__brank *br, ovl_error *err);
  ovl_status (*graph_end)(ovl__brank *br, int *graph, ovl_error *err);
  ovl_status (*graph_launch)(ovl__brank *br, int graph, ovl_error *err);
  void (*graph_abort)(ovl__brank *br);

  /* (main) One tuning key of ovl_world_set (world.c has checked that it
   * is one of the keys, and that no run has started): apply it, or refuse
   * a key this backend does not have (OVL_EINVAL, the message saying which
   * backend has it) or a bad value. Called before any ring or rank exists;
   * cuda: comm_priority, nccl_min_ctas, nccl_max_ctas, tf32; cpu:
   * chaos_seed. */
  ovl_status (*world_set)(ovl__bworld *bw, const char *key,
                          const char *value, ovl_error *err);

  /* Host memory, for ovl_host_bytes_per_op: the bytes one command holds
   * while it waits on a stream (cpu: the queued command; 0 where the
   * queue is the driver's, and bounded), and one timer of timers_reserve
   * (cpu: a double; cuda: the event, with what the driver keeps for it). */
  size_t host_bytes_per_command, host_bytes_per_timer;
} ovl__backend_ops;

extern const ovl__backend_ops ovl__backend_cpu;
/* The model (backend/model.h): simulated, never picked by "auto". */
extern const ovl__backend_ops ovl__backend_model;
#ifdef HAVE_CUDA
extern const ovl__backend_ops ovl__backend_cuda;
#endif
/* NULL-terminated list of compiled-in backends, preferred first. */
extern const ovl__backend_ops *const ovl__backends[];
const ovl__backend_ops *ovl__backend_find(const char *name);

#endif /* OVL_BACKEND_BACKEND_H */
