/*
 * The pipeline layer (src/pipeline/): every stage for the modes asked, on
 * top of the run (docs/ARCHITECTURE.md, "The pipeline"): pipeline.c (the
 * stages: forms, checks, reference, runs, comparisons, trials), report.c
 * (the report the stages fill, below: its lifetime, its getters, the
 * summary figures of its trials) and replay.c (the race replay), which
 * this header joins; pipeline.c calls the other two. The report is read
 * through the public API (ovl_report_*), by the tools and by the report
 * writers (src/report/).
 */
#ifndef OVL_PIPELINE_PIPELINE_H
#define OVL_PIPELINE_PIPELINE_H

#include "check/check.h"
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
  /* Traced (ovl_pipeline_opts.run_opts.trace): per item, the program run
   * (the form with its delay) and its result; NULL where not replayed. */
  ovl_program **progs;
  ovl_result **results;
} ovl__replay_form;

/* Replay the races `which` (OVL_REPLAY_ALL, or K >= 1) of `races`, found
 * in `form`, the form of `prog` for `mode`: a plain run, then one run per
 * race with its first access delayed, each compared with `ref` (rtol,
 * atol). `not_compared`: NULL, or why the form's numbers are not compared
 * (then nothing runs and every race says so; `ref` may be NULL).
 * `delay_us`: 0 for the default. With `trace` each replay is traced and
 * kept (out->progs, out->results), for its timeline. On failure `out` is
 * released. */
ovl_status ovl__replay_form_run(ovl_world *world, const ovl_program *prog,
                                const ovl_program *form,
                                const ovl_races *races, long which,
                                const char *not_compared,
                                const ovl_reference *ref, double rtol,
                                double atol, double delay_us, bool trace,
                                ovl__replay_form *out, ovl_error *err);
void ovl__replay_form_release(ovl__replay_form *f);

/* ------------------------------------------------------------------ */
/* The report (report.c; filled by pipeline.c)                         */
/* ------------------------------------------------------------------ */

/* One trial of one mode: its times and its comparison. */
typedef struct {
  double total, median, min, max;
  ovl_check check;
} trial_mode;

/* One mode of a report. */
typedef struct {
  ovl_mode mode;
  ovl_program *prog; /* its form: made by the race check or the run */
  ovl_races *races;  /* NULL without the race check */
  ovl_deadlocks *deadlocks; /* NULL without the check */
  ovl_result *res;   /* NULL until it ran; the last trial's run */
  bool checked;      /* its numbers are compared with the reference */
  /* The trial under way (or the last): */
  ovl_check check;
  double total, median, min, max;
  /* The trials before it, in order. */
  trial_mode *past;
  size_t npast;
  ovl__replay_form replay; /* with replay: its races replayed */
} report_mode;

struct ovl_report_s {
  const ovl_program *prog; /* the caller's */
  size_t nmodes;
  size_t ntrials; /* trials started */
  report_mode modes[OVL__MODE_COUNT]; /* in the order they ran */
  bool races; /* made with the race check */
  /* The mismatches of the program as bound (NULL without the check, or
   * when no form asked keeps the communication: comp alone). */
  ovl_mismatches *mismatches;
  /* Why nothing ran (mismatches or deadlocks found), or NULL. */
  const char *not_run;
  /* The distinct races and deadlocks of every form (a bug found in
   * several forms counts once: check/forms.c), and per mode the first
   * mode whose findings read the same (ovl_report_same_findings). */
  uint64_t races_found, deadlocks_found;
  int same[OVL__MODE_COUNT];
  bool replay; /* made with the race replay */
  /* The options it ran with, for whoever writes it out (report/json.c):
   * the pipeline's (their pointers to the caller's objects cleared; its
   * run_opts points at `run`), the runs', the world's timeout and tuning
   * (zero without a world). */
  ovl_pipeline_opts opts;
  ovl_run_opts run;
  double timeout_s;
  ovl__tuning tuning;
  /* The machine (with a run): copied from the world. */
  char *backend, *devices;
  char **device_names; /* [nranks] */
  int nranks;
  ovl_world_info info;
};

/* After the checks: every race and deadlock marked with the forms it is
 * in, the distinct ones counted, and the modes whose findings read the
 * same grouped (report.c). */
ovl_status ovl__report_findings(ovl_report *r, ovl_error *err);

/* qsort's order of doubles (report.c). */
int ovl__report_cmp_double(const void *a, const void *b);

#endif /* OVL_PIPELINE_PIPELINE_H */
