/*
 * Calibration (ovl/calibrate.h; docs/ARCHITECTURE.md, "Calibration"):
 * what the model backend needs, measured on a real backend by running
 * small generated schedules. Internal to the pipeline layer:
 *
 *   calibrate.c   ovl_calibrate: the options, the program's kernels, the
 *                 host costs, the machine, the profile as JSON
 *   cal_comm.c    the communication fits and the contention
 *   cal_run.c     one measurement: a schedule's text, parsed, bound, run
 *                 and its op times read; the kernels' text
 *
 * calibrate.c calls cal_comm.c and cal_run.c, cal_comm.c calls
 * cal_run.c; nothing calls back.
 */
#ifndef OVL_PIPELINE_CALIBRATE_H
#define OVL_PIPELINE_CALIBRATE_H

#include <stdbool.h>

#include "backend/model.h"
#include "base/base.h"
#include "core/op.h"

/* A calibration under way. */
typedef struct ovl__cal {
  ovl_world *world;
  const ovl_program *prog;
  ovl_calibrate_opts o; /* defaults applied */
  int nranks;
  bool cpu;  /* the cpu backend: smaller buffers */
  double t0; /* ovl__now() at the start, for the budget */
  ovl_error *err;
  char what[192]; /* what is measured now, for messages */
  ovl__profile *prof;
  /* Per kernel the device set the pace of (its eager calls no slower
   * than its timed ones): its eager pace less its pace as a graph, the
   * device's gap between eager kernels; summed, and counted. */
  double gap_sum;
  int gap_n;
} ovl__cal;

/* A kernel to run alone or beside communication: the op `name` on
 * inputs of these shapes (of one dtype), with scale's and matmul_v2's
 * attributes. */
typedef struct ovl__cal_kernel {
  const char *name;
  int nin;
  int dtype;
  int ndim[2];
  int64_t dims[2][OVL_MAX_DIMS];
  double scale, bias;
  bool tx, ty;
} ovl__cal_kernel;

/* One run of a generated schedule: its program and result. */
typedef struct ovl__cal_meas {
  ovl_program *prog;
  ovl_result *res;
} ovl__cal_meas;

/* ---- cal_run.c ---- */
/* A new measurement: name it (for messages) and tell opts.progress. */
void ovl__cal_begin(ovl__cal *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Whether the budget is spent. */
bool ovl__cal_spent(const ovl__cal *c);
/* A failure of the measurement under way: "calibrate: WHAT: message". */
ovl_status ovl__cal_fail(ovl__cal *c, ovl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* `text` (NULL: out of memory) parsed and bound for the world's ranks,
 * run with `warmup` + `iters` iterations (op times, graphs as asked);
 * `text` is freed. On failure *m is empty and the message names the
 * measurement. */
ovl_status ovl__cal_run(ovl__cal *c, char *text, int warmup, int iters,
                        bool op_times, bool graph, ovl__cal_meas *m);
void ovl__cal_meas_free(ovl__cal_meas *m);
/* Seconds per call of the ops named `name` (on the ranks that run them),
 * mean over the timed iterations; NaN when none was timed. */
double ovl__cal_op_s(const ovl__cal_meas *m, const char *name);
/* The median of the timed iterations' seconds; NaN when none was timed
 * (or out of memory). */
double ovl__cal_iter_s(const ovl__cal_meas *m);
/* Repeats so that `est_s` each fill about `target_s` (lo..hi). */
int ovl__cal_reps(double est_s, double target_s, int lo, int hi);
/* The kernel of op i of `prog`, as run alone. */
void ovl__cal_kernel_of(const ovl_program *prog, size_t i, ovl__cal_kernel *k);
/* A scale of a float32 [numel]; a matmul_v2 of dtype [m, k] x [k, n]. */
void ovl__cal_kernel_scale(int64_t numel, ovl__cal_kernel *k);
void ovl__cal_kernel_matmul(int dtype, int64_t m, int64_t n, int64_t kk,
                            bool tx, bool ty, ovl__cal_kernel *k);
/* The kernel's inputs (data() lines, variables k0, k1) and one call of
 * it into `out`. */
void ovl__cal_kernel_decl(ovl__sbuf *b, const ovl__cal_kernel *k);
void ovl__cal_kernel_call(ovl__sbuf *b, const ovl__cal_kernel *k,
                          const char *out);
/* Seconds one call of `k` takes alone on the calc stream (a short run
 * first to choose the repeats; then opts' iterations). */
ovl_status ovl__cal_kernel_s(ovl__cal *c, const ovl__cal_kernel *k,
                             double *out);

/* ---- cal_comm.c ---- */
/* The fit of every communication kind `prog` has (profile.fit), then,
 * while the budget lasts, their contention with a memory-bound kernel
 * and a matmul (profile.kernel_slow, comm_slow). */
ovl_status ovl__cal_comm(ovl__cal *c);

#endif /* OVL_PIPELINE_CALIBRATE_H */
