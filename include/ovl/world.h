/*
 * Worlds: N ranks on one backend, the runs of programs on them and their
 * results.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_WORLD_H
#define OVL_PUBLIC_WORLD_H

#include "ovl/procs.h"
#include "ovl/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Worlds: N ranks on one backend.                                     */
/* ------------------------------------------------------------------ */

typedef struct ovl_world_s ovl_world;

typedef struct ovl_world_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* "auto" (cuda when a GPU is visible, else cpu), "cpu" or "cuda". */
  const char *backend;
  /* Ranks; 0 means the backend's default (cpu: 2, cuda: every GPU). */
  int nranks;
  /* Seconds a collective or a stream may stay stuck before it is an error;
   * 0 means 60. */
  double timeout_s;
  /* More than one process (ovl_procs_init): NULL for one process. The
   * world's ranks are then those of every process, each process driving
   * `local_ranks` of them (0: one), process q's from the sum of the
   * local ranks of processes 0..q-1; `nranks`, when not 0, must be that
   * sum. Every process creates its world, with the same options. */
  ovl_procs *procs;
  int local_ranks;
} ovl_world_opts;

OVL_API ovl_status ovl_world_create(const ovl_world_opts *opts, ovl_world **out,
                                    ovl_error *err);
OVL_API void ovl_world_free(ovl_world *world);

/*
 * Tune the world's backend: one key, its value as text. Only before the
 * world's first run (OVL_EINVAL after it); a key the backend does not have
 * is refused with OVL_EINVAL and a message that says which backend has it.
 *   "comm_priority"  "high" | "default"  cuda: comm streams at the highest
 *                    stream priority, so that their NCCL kernels are
 *                    scheduled before queued compute blocks
 *   "nccl_min_ctas", "nccl_max_ctas"  N >= 0  cuda: NCCL's CTA limits
 *                    (ncclConfig_t minCTAs / maxCTAs; 0 = NCCL's choice).
 *                    Either one makes the communicators with
 *                    ncclCommInitRankConfig in one group instead of
 *                    ncclCommInitAll. Both set: min <= max.
 *   "tf32"           "on" | "off"  cuda: float32 matmul_v2 on TF32 tensor
 *                    cores (cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32: inputs cut
 *                    to 10 mantissa bits, float32 sums: several times
 *                    faster, and about 1e-3 off, which float32's default
 *                    tolerance does not pass). Default off: full float32
 *                    products (CUBLAS_COMPUTE_32F). bfloat16 and float16
 *                    use tensor cores either way; float64 is float64.
 *   "chaos_seed"     N >= 0  cpu: 0 = off; otherwise every stream worker
 *                    sleeps a pseudo-random 0..2 ms (mostly short, now and
 *                    then long) before each command it runs, so that
 *                    streams interleave in ways a plain run never shows and
 *                    a missing wait gives wrong numbers. The delays of each
 *                    (rank, stream) are one fixed sequence per seed.
 * Call from the thread that made the world. */
OVL_API ovl_status ovl_world_set(ovl_world *world, const char *key,
                                 const char *value, ovl_error *err);

OVL_API const char *ovl_world_backend_name(const ovl_world *world);
OVL_API int ovl_world_nranks(const ovl_world *world);
/* One line describing the devices ("2 x NVIDIA H200", "2 emulated"). */
OVL_API const char *ovl_world_devices(const ovl_world *world);
/* The device of one rank ("NVIDIA H200", "emulated (cpu)"); NULL if `rank`
 * is out of range. */
OVL_API const char *ovl_world_device_name(const ovl_world *world, int rank);
/* Whether the world's backend can run programs as graphs
 * (ovl_run_opts.graph): cuda yes, cpu no. */
OVL_API int ovl_world_has_graphs(const ovl_world *world);

/* The machine a world runs on, for reports. Strings are always terminated;
 * what does not apply to the backend is "n/a", what could not be found out
 * "unknown". */
typedef struct ovl_world_info_s {
  char hostname[256];
  char cpu_model[256];      /* /proc/cpuinfo "model name" */
  char driver_version[32];  /* cuda: the CUDA driver's version, "13.0" */
  char runtime_version[32]; /* cuda: the CUDA runtime's version, "13.0" */
  char nccl_version[32];    /* cuda: "2.28.9" */
} ovl_world_info;
/* Fill `info` (never fails; call from the thread that made the world). */
OVL_API void ovl_world_info_get(const ovl_world *world, ovl_world_info *info);

/* How many backends were compiled in, and whether `name` is one of them. */
OVL_API int ovl_backend_available(const char *name);

typedef struct ovl_run_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  int iters;  /* timed iterations */
  int warmup; /* untimed iterations before them */
  /* Time every stream op on its stream (device timers around each op; off
   * by default, so that it does not perturb what it measures). */
  int op_times;
  /* Non-zero: record the timeline of one timed iteration (when every op
   * started and ended; see ovl_result_span). Off by default, for the same
   * reason. */
  int trace;
  /* The timed iteration traced, 0-based; a negative value counts from the
   * end (-1: the last). Out of range is an error. */
  int trace_iter;
  /*
   * Non-zero: run as graphs (CUDA graphs; the cpu backend has none and the
   * run is refused with OVL_EINVAL: ovl_world_has_graphs). Each rank
   * captures one iteration of its ops once, before the first iteration, and
   * every iteration (warmup included) replays it: the host enqueues a
   * launch instead of every kernel and collective. The host syncs (fetch,
   * c_sync_calc_stream, c_sync_comm_stream, stream_sync, barrier's) split
   * the iteration into segments, one graph each, replayed in order with the
   * host's primitive between them. A segment runs as one unit: a host sync
   * after it waits for all of its work, on every stream (eager, it waits
   * for its stream only), and a wait for an event recorded in an earlier
   * segment or iteration does nothing (that record has completed). The
   * fetched values come from the replays. Op times and the trace are
   * measured by timers recorded inside the graphs. A timeout's flight
   * record counts a segment's calls completed once a host sync after it
   * returned.
   */
  int graph;
} ovl_run_opts;

typedef struct ovl_result_s ovl_result;

/* Run `prog` on every rank: warmup + iters iterations. The program must have
 * been bound for ovl_world_nranks(world) ranks. A run that fails once its
 * ranks have started (a timeout, a rank's error) aborts the world: a later
 * run on it is refused with OVL_EINVAL (create another world). */
OVL_API ovl_status ovl_world_run(ovl_world *world, const ovl_program *prog,
                                 const ovl_run_opts *opts, ovl_result **out,
                                 ovl_error *err);
OVL_API void ovl_result_free(ovl_result *res);

/* Seconds of each timed iteration (host clock, barrier before and after). */
OVL_API int ovl_result_iters(const ovl_result *res);
OVL_API const double *ovl_result_times(const ovl_result *res);
/* The last fetched value of fetched variable `i` on `rank`, converted to
 * double; NULL if it was never fetched. numel as in ovl_program_fetch_info. */
OVL_API const double *ovl_result_fetched(const ovl_result *res, int rank,
                                         size_t i);

/* The machine the run ran on, copied from its world when it ran: its rank
 * count, the backend's name ("cpu"), the line describing the devices ("2
 * emulated (cpu)", as ovl_world_devices) and the device of each rank (NULL
 * for a rank out of range). The strings live as long as `res`. */
OVL_API int ovl_result_nranks(const ovl_result *res);
OVL_API const char *ovl_result_backend(const ovl_result *res);
OVL_API const char *ovl_result_devices(const ovl_result *res);
OVL_API const char *ovl_result_device_name(const ovl_result *res, int rank);

/* The model backend: what it predicts `prog` from, a line ("machine
 * h200x2 (machines/h200x2.json), profile p.json (NVIDIA H200, 1 rank,
 * 2026-12-01T21:30:00Z); 1 of 3 kernels estimated from the machine's
 * bandwidth and FLOP rate (not in the profile): scale float32 [1000]")
 * into buf (cut to size). Returns 0, or -1 for another backend. */
OVL_API int ovl_world_model_about(const ovl_world *world,
                                  const ovl_program *prog, char *buf,
                                  size_t size);

/* Whether the run was predicted by the model backend (no device ran it,
 * nothing was computed: no fetched values). */
OVL_API int ovl_result_predicted(const ovl_result *res);

/* Where one rank's iteration went (the slowest rank's: its parts add up
 * to the iteration). Each instant of it is counted once, in the first of
 * these that holds: a kernel (or delay) runs: compute, except the part by
 * which its neighbours slowed it: contention; communication runs with no
 * kernel beside it: exposed communication (its own slowdown: contention);
 * a stream waits (for an event, for its peers): waits; nothing runs on
 * the device: host (the host enqueueing, launch gaps, host syncs). The
 * time a rank that finished early waits for the slowest is waits. */
typedef struct ovl_explain_s {
  double total, compute, exposed_comm, contention, host, waits; /* s */
  int rank;
} ovl_explain;
/* Returns 0 with *out filled: a predicted run's (the simulation's own
 * account), or a real run's traced iteration (ovl_run_opts.trace), read
 * from its spans: `prog` is the program that ran (ignored for a predicted
 * run). A real run knows contention only where the pipeline gave it each
 * op's own time (from the comp-only and comm-only forms, run with op
 * times): else `contention` is NaN and that time counts as compute or
 * exposed communication. -1: no trace, a program that does not match, or
 * out of memory. */
OVL_API int ovl_result_explain(const ovl_program *prog, const ovl_result *res,
                               ovl_explain *out);

/* With op_times: the seconds op `i` of the run's program took on its
 * stream on `rank`, summed over the timed iterations (0 for host ops);
 * NULL when the run did not time its ops. */
OVL_API const double *ovl_result_op_times(const ovl_result *res, int rank);

/*
 * With trace: the timeline of the traced iteration. Each rank has a base,
 * a timer mark enqueued on its calc stream right after the iteration's
 * start barrier (its streams are idle then); the host notes its clock when
 * it enqueues it. Stream ops are bracketed by timer marks on their stream
 * (cuda: timing events, read with cudaEventElapsedTime from the base, which
 * works across the streams of one device; cpu: the host clock when the
 * stream's worker reaches the mark); host ops (fetch, the syncs) by the host
 * clock, from the base's host time.
 */
/* The timed iteration traced (0-based), or -1 when the run made no trace. */
OVL_API int ovl_result_trace_iter(const ovl_result *res);
/* Where op `op` ran on `rank`, in seconds from the rank's base: on its
 * stream, or on the host for host ops; for c_wait_compute and c_wait_comm
 * the wait on the waiting stream (comm[R], calc), which lasts as long as
 * that stream stalled. Returns 0, or -1 when the run made no trace or an
 * argument is out of range. */
OVL_API int ovl_result_span(const ovl_result *res, int rank, size_t op,
                            double *start, double *end);
/* The event record of c_wait_compute (on calc) or c_wait_comm (on
 * comm[R]), as ovl_result_span; -1 for every other op. */
OVL_API int ovl_result_record_span(const ovl_result *res, int rank, size_t op,
                                   double *start, double *end);
/* The host clock (seconds, CLOCK_MONOTONIC) when `rank`'s base was
 * enqueued: add it to a span to line ranks up. NaN without a trace. */
OVL_API double ovl_result_trace_base(const ovl_result *res, int rank);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_WORLD_H */
