/*
 * The pipeline layer (src/pipeline/): every stage for the modes asked, on
 * top of the run (docs/ARCHITECTURE.md, "The pipeline"): pipeline.c
 * (forms, checks, reference, runs, comparisons, trials, summary) and
 * replay.c (the race replay), which this header joins. The report it
 * makes is read through the public API (ovl_report_*), by the tools and
 * by the report writers (src/report/).
 */
#ifndef OVL_PIPELINE_PIPELINE_H
#define OVL_PIPELINE_PIPELINE_H

#include "run/run.h"

/* The race replay of one form (pipeline/replay.c; ovl.h, "Race replay"). */
typedef struct ovl__replay_form {
  bool plain_ran;
  double plain_s;
  int64_t plain_checked, plain_mismatched;
  double delay_us; /* NaN when nothing was replayed */
  size_t n;
  ovl_replay *items; /* [n] */
  char **whys;       /* [n]: the items' `why`, owned */
} ovl__replay_form;

/* Replay the races `which` (OVL_REPLAY_ALL, or K >= 1) of `races`, found
 * in `form`, the form of `prog` for `mode`: a plain run, then one run per
 * race with its first access delayed, each compared with `ref` (rtol,
 * atol). `not_compared`: NULL, or why the form's numbers are not compared
 * (then nothing runs and every race says so; `ref` may be NULL).
 * `delay_us`: 0 for the default. On failure `out` is released. */
ovl_status ovl__replay_form_run(ovl_world *world, const ovl_program *prog,
                                const ovl_program *form,
                                const ovl_races *races, long which,
                                const char *not_compared,
                                const ovl_reference *ref, double rtol,
                                double atol, double delay_us,
                                ovl__replay_form *out, ovl_error *err);
void ovl__replay_form_release(ovl__replay_form *f);

#endif /* OVL_PIPELINE_PIPELINE_H */
