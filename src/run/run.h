/*
 * The run layer (src/run/): worlds (world.c), the executor (exec.c and
 * the exec_*.c it calls, which share run/exec.h), results (result.c) and
 * their comparison with a reference (compare.c), the flight record of a
 * run that timed out (flight.c), and the abortable barrier the rank
 * threads meet at (barrier.c). What it offers the layers above it beyond
 * the public API (ovl_world_*, ovl_result_*, ovl_check_result). Internal
 * to libovl.
 */
#ifndef OVL_RUN_H
#define OVL_RUN_H

#include <pthread.h>
#include <stdbool.h>

#include "backend/backend.h"
#include "backend/model.h"
#include "check/check.h"
#include "procs/procs.h"

/* The tuning a world's backend accepted (ovl_world_set), as reports echo
 * it: 0, false where not set. */
typedef struct ovl__tuning {
  unsigned chaos_seed;
  bool comm_priority_high;
  int nccl_min_ctas, nccl_max_ctas;
  bool tf32;
  /* model: the machine file and the profile ("" where not given) */
  char machine[256], profile[256];
} ovl__tuning;

struct ovl_world_s {
  const ovl__backend_ops *be;
  ovl__bworld *bw;
  int nranks;
  double timeout_s;
  bool ran; /* ovl_world_run was called: no more tuning */
  /* A run failed, which aborted the backend's world (world_abort: every
   * later collective and wait would fail at once): later runs are
   * refused. */
  bool aborted;
  ovl__tuning tuning;
  /* More than one process: the layout (procs NULL for one process); per
   * rank its device's name and the world's devices in words, gathered
   * from every process. */
  ovl__layout lay;
  char (*names)[64];
  char devices[192];
};

struct ovl_result_s {
  int nranks;
  size_t nfetch;
  int iters;
  double *times;
  double **fetched; /* [rank * nfetch + i], NULL where never fetched */
  size_t nops;
  double *op_times; /* [rank * nops + op], summed; NULL unless asked for */
  /* The trace: the timed iteration traced (-1: none); per (rank,
   * primitive) its start and end in seconds from the rank's base (NaN for
   * a primitive not timed: the host primitives of an op other than its
   * main one); per op its main primitive and the record primitive that is
   * not its main one (-1: none); per rank the base's host clock. */
  int trace_iter;
  size_t nprims;
  double *spans; /* [(rank * nprims + p) * 2 + k] */
  uint32_t *span_main;
  int64_t *span_record;
  double *trace_base; /* [rank] */
  /* The machine, copied from the world (ovl__result_set_machine). */
  char *backend, *devices;
  char **device_names; /* [rank] */
  /* The ranks whose values this process fetched, [lo, hi) ([0, nranks)
   * for one process), and whether the fetched values of every rank are
   * here (one process; or several, when ovl__result_merge could gather
   * them all), so that ovl_check_result can compare every rank. */
  int lo, hi;
  bool all_held;
  /* The model's (run/model_run.c): the times are predicted, and where
   * the iteration went. */
  bool predicted, have_explain;
  ovl_explain explain;
  /* Per (rank, primitive): the seconds of work the primitive takes alone
   * (NaN: not known); NULL when nothing is known (run/explain.c). */
  double *alone;
};

/* A comparison a run makes of its fetched values with a reference
 * (run/compare.c): where the values are, each process its own ranks, and
 * merged with the rest of the result (ovl__result_merge), so that the
 * values of every rank never have to meet in one process. The caller sets
 * the first five fields; the run fills `out` (every rank's comparison, as
 * ovl_check_result gives it), `status` and `err` (the comparison's own
 * failure: the run itself went well). */
typedef struct ovl__compare {
  const ovl_program *prog; /* names the fetched variables */
  const ovl_reference *ref;
  double rtol, atol;
  ovl_check *out;
  ovl_status status;
  ovl_error err;
} ovl__compare;

/* Run `prog` as ovl_world_run does and, when `cmp` is not NULL and the run
 * succeeded, compare its fetched values (cmp->out, cmp->status). */
ovl_status ovl__world_run(ovl_world *world, const ovl_program *prog,
                          const ovl_run_opts *opts, ovl__compare *cmp,
                          ovl_result **out, ovl_error *err);

/* This process's ranks [res->lo, res->hi) of `res` compared (into
 * cmp->out, cmp->status and cmp->err). */
void ovl__compare_local(ovl__compare *cmp, const ovl_result *res);
/* After ovl__compare_local on every process: one status for all (the
 * first failure), then every process gets every rank's comparison.
 * Collective; a failure to exchange is returned (in err). */
ovl_status ovl__compare_merge(ovl__compare *cmp, const ovl__layout *lay,
                              ovl_error *err);

/* After a run of several processes that every process completed: gather
 * into `res` every rank's op times, spans and trace base, process 0's
 * iteration times (rank 0's clock decides), and the fetched values of
 * every rank when they are at most OVL__GATHER_FETCHED_MAX bytes (as
 * doubles, all ranks) per variable. Collective. The run merges its
 * comparison (ovl__compare_merge) right after: one merge of the result. */
#define OVL__GATHER_FETCHED_MAX ((size_t)64 << 20)
ovl_status ovl__result_merge(ovl_result *res, const ovl__layout *lay,
                             const ovl_program *prog, ovl_error *err);

/* The model backend's run (run/model_run.c): `prog` simulated on the
 * world's model `m`, as ovl__world_run runs it (opts read; cmp, when
 * given, says nothing was compared). */
ovl_status ovl__model_run(ovl_world *world, const ovl__model *m,
                          const ovl_program *prog, const ovl_run_opts *o,
                          ovl__compare *cmp, ovl_result **out,
                          ovl_error *err);

/* Where rank `rank`'s traced iteration went, from its spans
 * (run/explain.c); with `segs`, also the instants of each class in time
 * order (kind: 0 compute, 1 exposed communication, 2 contention, 3 host,
 * 4 waits; an instant is contention where more than half of it is), a
 * malloc'd array. */
typedef struct ovl__xseg {
  double t0, t1;
  uint8_t kind;
} ovl__xseg;
ovl_status ovl__explain_segments(const ovl_program *prog,
                                 const ovl_result *res, int rank,
                                 ovl_explain *out, ovl__xseg **segs,
                                 size_t *nsegs, ovl_error *err);
/* ovl_result_explain, with out of memory told apart (OVL_ENOMEM) from a
 * result that cannot say (OVL_OK, *have false). */
ovl_status ovl__result_explain(const ovl_program *prog,
                               const ovl_result *res, ovl_explain *out,
                               bool *have, ovl_error *err);
/* Give a result each primitive's own time: alone[rank * nprims + p],
 * copied (NaN where not known). */
ovl_status ovl__result_set_alone(ovl_result *res, const double *alone,
                                 ovl_error *err);

/* The refusal of graph mode (ovl_run_opts.graph) by a backend that has
 * no graphs: OVL_EINVAL. */
ovl_status ovl__err_no_graphs(ovl_error *err, const char *backend);

/* A run's options against its world and program (iterations, warmup,
 * the program's rank count): OVL_EINVAL with the message the executor
 * and the model both give. */
ovl_status ovl__run_check(const ovl_world *world, const ovl_program *prog,
                          const ovl_run_opts *opts, ovl_error *err);
/* The timed iteration traced (0-based), or -1 without a trace; a
 * trace_iter out of range is OVL_EINVAL. */
ovl_status ovl__run_traced(const ovl_run_opts *opts, int *traced,
                           ovl_error *err);

/* A result for `prog` on `nranks` ranks: iters timed iterations, op times
 * if asked for, spans if trace_iter >= 0 (the timed iteration traced). */
ovl_status ovl__result_new(const ovl_program *prog, int nranks, int iters,
                           bool op_times, int trace_iter, ovl_result **out,
                           ovl_error *err);
/* Copy the world's backend name and device names into `res`. */
ovl_status ovl__result_set_machine(ovl_result *res, const ovl_world *world,
                                   ovl_error *err);
/* Primitive p's span on `rank`, as ovl_result_span. */
int ovl__result_prim_span(const ovl_result *res, int rank, size_t p,
                          double *start, double *end);

/* The flight record of a run (run/flight.c): per rank and ring (index
 * rank * nrings + ring) the last comm tag the rank enqueued and its op,
 * and the last the backend completed (ring_progress; have_done false
 * when the backend cannot say). `iters`: the iterations the run does,
 * warmup included; `iter`: the one it failed in (0-based). */
typedef struct ovl__flight {
  int nranks, nrings, iters, iter;
  uint64_t *enq_tag;
  uint32_t *enq_op;
  uint64_t *done_tag;
  bool have_done;
} ovl__flight;

/* Append the flight record of a run of `prog` that timed out to `msg`
 * (a terminated string in a buffer of `size`): "; flight record: rank 0
 * ring 0: enqueued #12 send_v2 (pipe.sched:14), completed #11 recv_v2
 * (pipe.sched:9); ..." (ranks with the same entry grouped, cut to fit),
 * then "; ranks disagree first at #T ..." (ovl__comm_first_disagreement's
 * text, of the first ring that has one; "; and at ..." for the next two)
 * or "; ranks agree; first not completed: ring R #T: rank r recv_v2 into
 * 'y' (float32, 8 elements) from rank 1 at FILE:LINE:COL, ..." (the
 * matching's words, check/match.h). The conclusion comes before the
 * entries when room is short (cut with "..." where even it does not fit).
 * Nothing for a program without communication. */
void ovl__flight_append(const ovl_program *prog, const ovl__flight *f,
                        char *msg, size_t size);

/* Rank r grouped with the ranks after it (up to nranks) that are not done
 * (done[q * stride]) and whose entry is the same as its own (same(ctx, r,
 * q); rank r's own is the same): marks them done, lists them in `list`
 * ("0,2,5", cut to its size) and returns how many (run/flight.c). */
int ovl__group_ranks(int r, int nranks, bool *done, size_t stride,
                     bool (*same)(void *ctx, int r, int q), void *ctx,
                     char *list, size_t size);

/* The first place where the ranks' communication cannot match, from the
 * check's matching (ovl__match_first_disagreement: the k-th collective of
 * a ring meets the k-th of every other rank and must agree in op,
 * reduction, count, dtype, root and variable; the k-th send from a to b
 * on a ring meets the k-th receive on b from a, of the same dtype and
 * count), on ring `ring` (-1: the first ring that has one). Writes its
 * tag, the other ranks' where they differ, then the matching's text:
 * "#1 (rank 1 #2): ring 0 collective #1: rank 0 issues c_allreduce_sum of
 * 'x' (float32, 8 elements) at f.sched:2:1, rank 1 issues c_allreduce_max
 * of 'x' (...) at f.sched:5:1; they differ in reduction (...)", and
 * returns true; false when everything matches (or out of memory). Tags
 * are those of iteration `iter` (0-based): per rank and ring from 1 across
 * iterations, as the executor numbers them. */
bool ovl__comm_first_disagreement(const ovl_program *prog, int ring,
                                  int iter, char *buf, size_t size);

/* A barrier that a failed rank can open for everyone (barrier_abort), and
 * whose count can drop (threads that will never come). */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, waiting;
  unsigned long gen;
  bool aborted;
  /* When set, the last thread to arrive calls it (without the lock)
   * before it lets everyone go: the other processes' ranks meet there
   * (false: it failed, the barrier is aborted). */
  bool (*outer)(void *ctx);
  void *outer_ctx;
} ovl__barrier;

void ovl__barrier_init(ovl__barrier *b, int n);
void ovl__barrier_destroy(ovl__barrier *b);
/* False when the barrier was aborted. */
bool ovl__barrier_wait(ovl__barrier *b);
void ovl__barrier_resize(ovl__barrier *b, int n);
void ovl__barrier_abort(ovl__barrier *b);

#endif /* OVL_RUN_H */
