/*
 * CUDA graphs of the cuda backend (ovl_run_opts.graph; backend_cuda.c says
 * how the backend is built): capture, instantiation, launch, and the
 * teardown that world_abort needs before NCCL's abort.
 */
#include "backend/cuda.h"

/* ------------------------------------------------------------------ */
/* Graphs                                                              */
/*                                                                     */
/* A capture opens on the calc stream in thread-local mode: each rank's */
/* thread captures its own device's work while the others capture      */
/* theirs, and NCCL calls inside are captured (NCCL supports this since */
/* 2.9; it relaxes the mode itself for what it must allocate). Every    */
/* other stream of the rank joins the capture at once: graph_event is   */
/* recorded on calc before any work, and each stream waits for it, so   */
/* that no stream's work is ordered after anything the schedule does    */
/* not order it after. At graph_end each stream records graph_event and */
/* calc waits for it: the capture is one graph, and its launch on calc  */
/* completes when all of its work, on every stream, has.                */
/* ------------------------------------------------------------------ */

/* Fork (record on `from`, the others wait) or join (each records, `to`
 * waits) the rank's streams through graph_event. */
static ovl_status graph_fork(ovl__brank *br, ovl_error *err) {
  char where[96];
  OVL__CUDACHECK(err, br->rank, "calc stream (fork of the capture)",
                 cudaEventRecord,
                 (br->graph_event, br->streams[OVL_STREAM_CALC]));
  for (int s = 0; s < br->nstreams; s++)
    if (s != OVL_STREAM_CALC)
      OVL__CUDACHECK(err, br->rank,
                     ovl__cuda_stream_name(br, where, sizeof where, s),
                     cudaStreamWaitEvent,
                     (br->streams[s], br->graph_event, 0));
  return OVL_OK;
}

static ovl_status graph_join(ovl__brank *br, ovl_error *err) {
  char where[96];
  for (int s = 0; s < br->nstreams; s++) {
    if (s == OVL_STREAM_CALC)
      continue;
    OVL__CUDACHECK(err, br->rank,
                   ovl__cuda_stream_name(br, where, sizeof where, s),
                   cudaEventRecord, (br->graph_event, br->streams[s]));
    OVL__CUDACHECK(err, br->rank, "calc stream (join of the capture)",
                   cudaStreamWaitEvent,
                   (br->streams[OVL_STREAM_CALC], br->graph_event, 0));
  }
  return OVL_OK;
}

void ovl__cuda_graph_abort(ovl__brank *br) {
  cudaGraph_t g = NULL;
  ovl_error ignored;
  if (!br->capturing)
    return;
  br->capturing = false;
  /* Join first, so that ending the capture ends it on every stream; an
   * invalidated capture refuses the joins, and ends all the same. */
  (void)graph_join(br, &ignored);
  if (cudaStreamEndCapture(br->streams[OVL_STREAM_CALC], &g) == cudaSuccess &&
      g != NULL)
    (void)cudaGraphDestroy(g);
  for (int s = 0; s < br->nstreams; s++) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(br->streams[s], &cs) == cudaSuccess &&
        cs != cudaStreamCaptureStatusNone) {
      g = NULL;
      if (cudaStreamEndCapture(br->streams[s], &g) == cudaSuccess &&
          g != NULL)
        (void)cudaGraphDestroy(g);
    }
  }
  (void)cudaGetLastError();
}

ovl_status ovl__cuda_graph_begin(ovl__brank *br, ovl_error *err) {
  ovl_status st;
  if (br->capturing)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: a graph capture is open already", br->rank);
  if (br->graph_event == NULL)
    OVL__CUDACHECK(err, br->rank, "the fork and join event of graphs",
                   cudaEventCreateWithFlags,
                   (&br->graph_event, cudaEventDisableTiming));
  OVL__CUDACHECK(err, br->rank, "calc stream", cudaStreamBeginCapture,
                 (br->streams[OVL_STREAM_CALC],
                  cudaStreamCaptureModeThreadLocal));
  br->capturing = true;
  for (int e = 0; e < br->nevents; e++)
    br->cap_recorded[e] = false;
  st = graph_fork(br, err);
  if (st != OVL_OK)
    ovl__cuda_graph_abort(br);
  return st;
}

ovl_status ovl__cuda_graph_end(ovl__brank *br, int *graph, ovl_error *err) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  cudaError_t e;
  ovl_status st;

  if (!br->capturing)
    return ovl__err(err, OVL_EINVAL, "rank %d: no graph capture is open",
                    br->rank);
  st = graph_join(br, err);
  if (st != OVL_OK) {
    ovl__cuda_graph_abort(br);
    return st;
  }
  br->capturing = false;
  e = cudaStreamEndCapture(br->streams[OVL_STREAM_CALC], &g);
  if (e != cudaSuccess) {
    br->capturing = true; /* so that the abort ends it on every stream */
    ovl__cuda_graph_abort(br);
    return ovl__cuda_fail(err, br->rank, "calc stream", "cudaStreamEndCapture",
                          e, __FILE__, __LINE__);
  }
  /* The rank's graphs change under its NCCL lock: world_abort destroys
   * them (they hold references on the communicators it aborts). */
  if (!ovl__cuda_nccl_enter(br)) {
    (void)cudaGraphDestroy(g);
    return aborted_err(br, "graph capture", err);
  }
  if (br->ngraphs == br->capgraphs) {
    int cap = br->capgraphs ? 2 * br->capgraphs : 8;
    cudaGraphExec_t *gs = realloc(br->graphs, (size_t)cap * sizeof *gs);
    if (gs == NULL) {
      ovl__cuda_nccl_leave(br);
      (void)cudaGraphDestroy(g);
      return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %d graphs",
                      br->rank, cap);
    }
    br->graphs = gs;
    br->capgraphs = cap;
  }
  e = cudaGraphInstantiateWithFlags(&exec, g, 0);
  (void)cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    ovl__cuda_nccl_leave(br);
    return ovl__cuda_fail(err, br->rank, NULL, "cudaGraphInstantiateWithFlags",
                          e, __FILE__, __LINE__);
  }
  br->graphs[br->ngraphs] = exec;
  *graph = br->ngraphs++;
  /* To the device now, so that its first launch does not upload it: the
   * traced iteration's graphs are launched once, inside a timed
   * iteration. */
  e = cudaGraphUpload(exec, br->streams[OVL_STREAM_CALC]);
  ovl__cuda_nccl_leave(br);
  if (e != cudaSuccess)
    return ovl__cuda_fail(err, br->rank, "calc stream", "cudaGraphUpload", e,
                          __FILE__, __LINE__);
  return OVL_OK;
}

ovl_status ovl__cuda_graph_launch(ovl__brank *br, int graph,
                                    ovl_error *err) {
  cudaError_t e;
  if (br->capturing)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: graph %d launched inside a capture", br->rank,
                    graph);
  /* A graph holds NCCL calls: never launched once the communicators are
   * aborted (their memory is going away, and world_abort destroyed the
   * graphs), as no collective is enqueued then. */
  if (!ovl__cuda_nccl_enter(br))
    return aborted_err(br, "graph launch", err);
  if (graph < 0 || graph >= br->ngraphs) {
    int n = br->ngraphs;
    ovl__cuda_nccl_leave(br);
    return ovl__err(err, OVL_EINVAL, "rank %d: graph %d does not exist (%d)",
                    br->rank, graph, n);
  }
  e = cudaGraphLaunch(br->graphs[graph], br->streams[OVL_STREAM_CALC]);
  ovl__cuda_nccl_leave(br);
  if (e != cudaSuccess)
    return ovl__cuda_fail(err, br->rank, "calc stream", "cudaGraphLaunch", e,
                          __FILE__, __LINE__);
  return OVL_OK;
}

void ovl__cuda_graphs_drop(ovl__brank *br) {
  int device = -1;
  bool have_device = cudaGetDevice(&device) == cudaSuccess;
  (void)cudaSetDevice(br->device);
  for (int i = 0; i < br->ngraphs; i++)
    (void)cudaGraphExecDestroy(br->graphs[i]);
  br->ngraphs = 0;
  if (have_device)
    (void)cudaSetDevice(device);
  (void)cudaGetLastError();
}

void ovl__cuda_graphs_release(ovl__brank *br) {
  ovl__cuda_graph_abort(br);
  ovl__cuda_graphs_drop(br);
  free(br->graphs);
  br->graphs = NULL;
  br->ngraphs = br->capgraphs = 0;
  if (br->graph_event != NULL)
    (void)cudaEventDestroy(br->graph_event);
  br->graph_event = NULL;
}
