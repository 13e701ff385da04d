/*
 * Timelines (src/report/): the traced iteration of runs as slices, one per
 * stream primitive and one per host op, which report/trace.c writes as a
 * Chrome trace and report/svg.c draws. Internal to libovl.
 *
 * Times. Each rank's spans count from its base (a timer mark on its calc
 * stream right after the iteration's start barrier). The host clock of the
 * bases lines the ranks of a run up: a run's time 0 is its earliest base,
 * and every run starts at 0, so runs of several modes compare directly.
 * Times are whole nanoseconds here. On one lane (a stream, or the host)
 * ops follow each other, so a slice starts no earlier than the one before
 * it ended, and lasts at least 2 ns.
 */
#ifndef OVL_REPORT_SLICES_H
#define OVL_REPORT_SLICES_H

#include <stdbool.h>
#include <stdint.h>

#include "run/run.h"

/* ------------------------------------------------------------------ */
/* Slices                                                              */
/* ------------------------------------------------------------------ */

/* What an op is, for colours and trace categories; waits by kind. */
typedef enum {
  CAT_COMPUTE,
  CAT_COLLECTIVE, /* collectives, sends, receives */
  CAT_RECORD,     /* event records */
  CAT_DELAY,
  CAT_HOST,       /* the host reading what it fetches */
  CAT_EVENT_WAIT, /* a stream waiting for an event */
  CAT_HOST_SYNC,  /* the host waiting for a stream */
  CAT__COUNT
} cat_t;

extern const char *const ovl__tl_cat_names[CAT__COUNT];

typedef struct {
  size_t op;
  size_t prim;
  int lane;    /* stream number, or nstreams for the host */
  bool record; /* a record that is not its op's main primitive */
  cat_t cat;
  int64_t t0, t1; /* ns from the run's time 0 */
  /* A collective: until when it waited for its peers (the last rank's
   * start of it), or 0 when it did not. */
  int64_t t_peers;
  /* The first race it is marked with (K of "race K"), or 0. */
  int race;
} slice;

/* The slices of one rank of one run, in program order. */
typedef struct {
  slice *s;
  size_t n;
} rank_slices;

/* A run to draw: ovl_timeline_run's, its name and its marks
 * (ovl_timeline_marks). */
typedef struct tl_run {
  ovl_mode mode;
  const ovl_program *prog;
  const ovl_result *res;
  const char *label; /* NULL: the mode's name */
  const ovl_timeline_mark *marks;
  size_t nmarks;
} tl_run;

/* The runs with their marks (marks NULL: none); NULL when out of memory. */
tl_run *ovl__tl_runs(const ovl_timeline_run *runs,
                     const ovl_timeline_marks *marks, size_t nruns);

/* The category (colour) of a primitive. */
cat_t ovl__tl_prim_cat(const ovl__prim *p);
/* Every rank of every run; NULL when out of memory. [run * nranks +
 * rank]. Free with ovl__tl_free_all(all, nruns * nranks). */
rank_slices *ovl__tl_build_all(const tl_run *runs, size_t nruns,
                               int nranks);
void ovl__tl_free_all(rank_slices *all, size_t n);
/* "calc", "comm[0]", "side", or "host" for lane nstreams. */
const char *ovl__tl_lane_name(const ovl_program *prog, int lane);
/* Bytes op moves, as its row says (inputs read, output written). */
uint64_t ovl__tl_op_bytes(const ovl_program *prog, const ovl__op *op);
/* Per op, its number among the comm ops (collectives, sends, receives)
 * of its ring on `rank`, in one iteration (from 0), or -1 (not a comm
 * op, or not run on that rank); malloc'd. */
int *ovl__tl_comm_seqs(const ovl_program *prog, int rank);
const char *ovl__tl_base_name(const char *path);
/* The arguments of ovl_timeline_trace / _svg, checked. */
ovl_status ovl__tl_check_runs(const ovl_timeline_run *runs, size_t nruns,
                              char **text, ovl_error *err);
/* Hand the text over, or free it when building it failed. */
ovl_status ovl__tl_finish(ovl__sbuf *b, char **text, size_t *len,
                          ovl_error *err);

/* Host bytes per op of a timeline, for ovl_host_bytes_per_op
 * (report/memory.c): a Chrome trace's (trace_text) or a picture's, for one
 * rank of one run (report/svg.c). */
size_t ovl__timeline_bytes_per_op(bool trace_text);

/* The earliest trace base of a run's ranks (host clock, seconds): the
 * run's time 0, which every rank's spans are offset from. */
double ovl__tl_run_origin(const ovl_result *res, int nranks);

#endif /* OVL_REPORT_SLICES_H */
