/*
 * The executor (docs/ARCHITECTURE.md, "The run"): ovl_world_run runs a
 * program on every rank of a world, one thread per rank, every thread
 * driving the same program. It runs the program's primitives
 * (core/lower.c) and never asks which op it has.
 *
 * A run, per rank thread:
 *   bind device, create streams and events      (backend rank_init)
 *   allocate every variable; generate inputs    (before the timed loop)
 *   barrier
 *   per iteration: upload inputs (host, synchronous); barrier; t0;
 *                  enqueue the primitives; drain every stream; barrier; t1
 *                  (with op times or a trace, timer marks around them:
 *                  see "Timer marks" below)
 *   convert the last fetched values; quiesce; teardown barrier; free
 * Any failure aborts the whole world (backend world_abort and the barrier),
 * so no rank waits for a rank that has given up.
 *
 * With ovl_run_opts.graph the primitives are captured once, before the
 * first iteration, as graphs (one per segment: the stream work between
 * two host syncs), and every iteration replays them (exec_graph.c).
 *
 * This header is the executor's own: the state of a run and of each
 * rank's thread, where each rank is, and what its files call of each
 * other. The files, each calling only those after it:
 *   exec.c        the run: its checks, its state, the threads, the end
 *   exec_rank.c   a rank's thread: setup and memory, the iterations,
 *                 teardown
 *   exec_graph.c  graph mode: the segments captured and replayed
 *   exec_prim.c   the primitives, an op's and a group's, with their timer
 *                 marks; the spans and op times read back
 *   exec_procs.c  between processes: the run barrier's outer part, the
 *                 abort from another process, the agreement on a failure
 *   exec_fail.c   a rank's failure, and where every rank was
 *   barrier.c     the abortable barrier (run/run.h)
 * Internal to src/run/.
 */
#ifndef OVL_RUN_EXEC_H
#define OVL_RUN_EXEC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "run/run.h"

/* ------------------------------------------------------------------ */
/* Where the ranks are                                                 */
/* ------------------------------------------------------------------ */

/* Where a rank is, so that a failure can say where every rank was (a
 * timeout is only half the story without the others' positions). Packed
 * in one atomic word: kind, iteration, op index. */
typedef enum {
  AT_SETUP,
  AT_CAPTURE,
  AT_UPLOAD,
  AT_START_BARRIER,
  AT_OP,
  AT_DRAIN,
  AT_END_BARRIER,
  AT_DONE
} at_kind;

static inline uint64_t pos_pack(at_kind kind, int iter, size_t op) {
  return (uint64_t)kind << 56 | (uint64_t)(iter & 0xffffff) << 32 |
         (uint64_t)(op & 0xffffffffu);
}

/* ------------------------------------------------------------------ */
/* A run and its ranks                                                 */
/* ------------------------------------------------------------------ */

typedef struct rank_s rank_t;

typedef struct run_s {
  ovl_world *world;
  const ovl_program *prog;
  ovl_run_opts opts;
  int traced; /* the iteration traced, counting warmup; -1: none */
  ovl_result *res;
  ovl__barrier barrier;
  /* Every rank thread meets here before it frees its memory; never
   * aborted (see rank_teardown in exec_rank.c). */
  ovl__barrier teardown;
  pthread_mutex_t err_mu;
  bool failed;
  ovl_error first; /* the first error that is not a consequence of another */
  _Atomic uint64_t *pos; /* per rank: where it is now */
  uint64_t *pos_at_fail; /* per rank: where it was at the first failure */
  /* Per rank and ring, the last comm tag enqueued and its op (the rank's
   * thread writes them) and the last completed (read from the backend
   * once its streams are quiet). */
  ovl__flight flight;
  /* More than one process: the barriers met so far (the last local rank
   * to arrive meets the other processes: exec_procs.c). */
  uint64_t barrier_seq;
  /* Per rank, its thread's state and its thread (this process's ranks
   * only). */
  rank_t *ranks;
  pthread_t *threads;
} run_t;

/* Graph mode: one segment of an iteration, the stream work up to a host
 * sync (or to the end of the iteration), and the host primitives that end
 * it. */
typedef struct gseg_s {
  /* Its graph in each variant (0: plain, 1: the traced iteration's, with
   * a timer mark around every stream primitive); -1: no stream work. */
  int graph[2];
  size_t first_op;  /* its first op on this rank (positions) */
  size_t host_op;   /* the op whose host primitives end it; SIZE_MAX: none */
  size_t host_prim; /* the first of them, within the op */
} gseg;

struct rank_s {
  run_t *run;
  int rank;
  ovl__brank *br;
  double base_host; /* host clock at the traced iteration's base mark */
  void **dev;        /* device buffer of each variable */
  void **host_in;    /* host copy of each data() input, else NULL */
  void **host_out;   /* host buffer of each fetched variable */
  bool *fetched;     /* whether fetched variable i was fetched */
  int *fetch_slot;   /* per variable: its index in prog->fetch, or -1 */
  /* Per ring, the tag of the last comm op enqueued (flight record). */
  uint64_t tag[OVL_MAX_RINGS];
  /* Room for the items of the largest group. */
  ovl__p2p_item *items;
  /* Graph mode: the segments; per segment and ring, the comm calls of the
   * ring in it and the op of the last ([seg * nrings + ring]); per ring,
   * the tag up to which every call completed (a host sync after its
   * segment returned). */
  bool graph;
  size_t nsegs;
  gseg *segs;
  uint64_t *seg_calls;
  uint32_t *seg_last;
  uint64_t done[OVL_MAX_RINGS];
};

static inline void set_pos(rank_t *rk, at_kind kind, int iter, size_t op) {
  atomic_store_explicit(&rk->run->pos[rk->rank], pos_pack(kind, iter, op),
                        memory_order_relaxed);
}

static inline size_t var_bytes(const ovl__var *v) {
  return (size_t)v->numel * ovl_dtype_size(v->dtype);
}

/* The ops of a group instance that starts at op i: [i, end). */
static inline size_t group_end(const ovl_program *prog, size_t i) {
  size_t end = i + 1;
  while (end < prog->nops && prog->ops[end].group == prog->ops[i].group)
    end++;
  return end;
}

/* ------------------------------------------------------------------ */
/* Timer marks                                                         */
/*                                                                     */
/* Mark 0 is a trace's base, on the calc stream right after the start  */
/* barrier. Primitive p has marks MARK_START(p) and MARK_END(p) around */
/* it on its stream. --op-times marks the primitives that do work      */
/* (kernels, collectives, delays) in every iteration and sums their    */
/* spans over the timed ones; a trace marks every stream primitive of  */
/* the traced iteration only, and notes the host clock around host     */
/* ops.                                                                */
/* ------------------------------------------------------------------ */

#define MARK_BASE 0
#define MARK_START(p) (1 + 2 * (size_t)(p))
#define MARK_END(p) (2 + 2 * (size_t)(p))

/* ------------------------------------------------------------------ */
/* Between the files                                                   */
/* ------------------------------------------------------------------ */

/* exec_rank.c: the thread of rank `arg` (a rank_t): set up, run every
 * iteration, tear down; a failure is the run's (ovl__exec_fail). */
void *ovl__exec_rank_main(void *arg);

/* exec_graph.c: graph mode, before the first iteration: room for the
 * segments, the captures, and the tags back to where nothing was
 * enqueued. Then each iteration `it` (`trace`: the traced one): the
 * segments in order, each launched and followed by its host primitives. */
ovl_status ovl__exec_graph_setup(rank_t *rk, ovl_error *err);
ovl_status ovl__exec_graph_replay(rank_t *rk, int it, bool trace,
                                  ovl_error *err);

/* exec_prim.c. */
/* The flight record: the rank enqueued comm op `op` numbered `tag`. */
void ovl__exec_note_enqueued(rank_t *rk, const ovl__op *op, uint64_t tag);
/* Enqueue or perform primitives [k0, k1) of op i, with timer marks
 * around them where asked: `op_times` for --op-times, `trace` in the
 * traced iteration. ovl__exec_op: all of them. */
ovl_status ovl__exec_op_part(rank_t *rk, size_t i, size_t k0, size_t k1,
                             bool op_times, bool trace, ovl_error *err);
ovl_status ovl__exec_op(rank_t *rk, size_t i, bool op_times, bool trace,
                        ovl_error *err);
/* Enqueue the ops [i, end) of a group instance that run on this rank as
 * one point-to-point call (none: nothing), with timer marks around it for
 * each of them where asked. */
ovl_status ovl__exec_group(rank_t *rk, size_t i, size_t end, bool op_times,
                           bool trace, ovl_error *err);
/* After a drain: add each timed primitive's span to its op's time (ops
 * this rank does not run have none). */
ovl_status ovl__exec_collect_op_times(rank_t *rk, ovl_error *err);
/* After the traced iteration's drain: every stream primitive's span from
 * the base (host ops were noted as they ran; ops this rank does not run
 * have none: their spans stay NaN). */
ovl_status ovl__exec_collect_spans(rank_t *rk, ovl_error *err);
/* Sync every stream of the rank, at the end of an iteration. */
ovl_status ovl__exec_drain(rank_t *rk, ovl_error *err);
/* "t.sched:7:1: c_allreduce_sum on comm stream: " (or the group's
 * lines) before a failure of op i (a group starts there). */
void ovl__exec_op_err_prefix(const ovl_program *prog, size_t i,
                             ovl_error *err);

/* exec_procs.c: more than one process. Another process's rank failed
 * (ovl__procs_run_begin's callback, ctx the run); the run barrier's outer
 * part (ovl__barrier.outer); after the threads end, the flight record's
 * and the positions' rows of every process, and the one error every
 * process ends with (OVL_OK: none failed). */
void ovl__exec_procs_on_abort(void *ctx);
bool ovl__exec_procs_barrier(void *ctx);
ovl_status ovl__exec_procs_agree(run_t *run);

/* exec_fail.c: record a rank's failure; the first real error wins over
 * the aborts it causes in the other ranks. Aborts the world so nobody
 * waits. Then, at the end, append "; where the ranks were: ranks 0,1 at
 * ...; rank 2 ..." to the failure's message, ranks at the same place
 * grouped. */
void ovl__exec_fail(run_t *run, const ovl_error *e);
void ovl__exec_append_positions(run_t *run);

#endif /* OVL_RUN_EXEC_H */
