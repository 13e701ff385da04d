/*
 * The pipeline (src/run/pipeline.c) and its report, on the cpu backend:
 * the order of the modes and of the stages, the race check per form, the
 * reference only where it is needed, the summary figures, the errors, the
 * machine and the op times, the report as JSON (src/report/json.c), and
 * timelines made from a report after its world is gone.
 *
 * Only clean schedules run: a racy one races for real on the emulated
 * device memory (ThreadSanitizer builds would report it); racy ones are
 * only checked, with nothing run.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "core/op.h"
#include "ovl.h"

#ifndef OVL_SRCDIR
#define OVL_SRCDIR "."
#endif

#define ALL_MODES                                                             \
  (OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC) |              \
   OVL_MODE_BIT(OVL_MODE_COMP) | OVL_MODE_BIT(OVL_MODE_COMM))
#define BOTH_MODES (OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC))

/* Clean: c_wait_compute orders the collective after the kernel. */
static const char clean_text[] =
    "x = data(shape=[4, 16], dtype=float32, init=uniform, seed=7)\n"
    "c = scale(x, scale=3.0)\n"
    "c_wait_compute(c, ring_id=0)\n"
    "c_allreduce_sum(c, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n"
    "fetch(c)\n";

/* The same without c_wait_compute: a race in async form only. */
static const char racy_text[] =
    "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n"
    "c = scale(x, scale=3.0)\n"
    "c_allreduce_sum(c, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n"
    "fetch(c)\n";

/* Nothing fetched (and race-free: it runs, under ThreadSanitizer too). */
static const char nofetch_text[] =
    "x = data(shape=[64], init=fill, value=1.0)\n"
    "y = scale(x, scale=2.0)\n"
    "c_wait_compute(y, ring_id=0)\n"
    "c_allreduce_sum(y, ring_id=0)\n"
    "c_wait_comm(y, ring_id=0)\n";

static ovl_program *parse(const char *text, const char *name) {
  return tu_parse(text, name, 2);
}

static ovl_world *make_world(double timeout_s) {
  return tu_cpu_world(2, timeout_s);
}

/* The runs' options of the test under way (each test runs in its own
 * process): run_opts() points the pipeline's at them. */
static ovl_run_opts RO;

static ovl_pipeline_opts run_opts(unsigned modes) {
  ovl_pipeline_opts o = {.size = sizeof o, .modes = modes, .races = 1,
                         .run = 1, .rtol = 1e-5, .atol = 1e-6,
                         .run_opts = &RO};
  RO = (ovl_run_opts){.size = sizeof RO, .iters = 2, .warmup = 1};
  return o;
}

static ovl_report *run_ok(ovl_world *w, const ovl_program *p,
                          const ovl_pipeline_opts *o) {
  ovl_report *r = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_pipeline_run(w, p, o, &r, &err);
  ck_assert_msg(st == OVL_OK, "pipeline: %s", err.msg);
  ck_assert_ptr_nonnull(r);
  return r;
}

/* What the progress callback saw: "C" checked, "R" ready, "0".."3" ran. */
typedef struct {
  char seen[16];
  size_t n;
} events;

static void record(void *ctx, const ovl_report *r, ovl_pipeline_event ev,
                   size_t i) {
  events *e = ctx;
  ovl_report_mode m;
  if (ev == OVL_PIPELINE_RAN) {
    /* The mode that ran is complete when it is announced. */
    ck_assert_int_eq(ovl_report_mode_get(r, i, &m), 0);
    ck_assert_ptr_nonnull(m.res);
    ck_assert(!isnan(m.total_s));
  }
  if (e->n + 1 < sizeof e->seen)
    e->seen[e->n++] = ev == OVL_PIPELINE_CHECKED ? 'C'
                      : ev == OVL_PIPELINE_READY ? 'R'
                                                 : (char)('0' + i);
}

/* ------------------------------------------------------------------ */

START_TEST(modes_run_in_order) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(ALL_MODES);
  events ev = {{0}, 0};
  ovl_report *r;
  static const ovl_mode want[] = {OVL_MODE_SYNC, OVL_MODE_ASYNC,
                                  OVL_MODE_COMP, OVL_MODE_COMM};

  o.progress = record;
  o.progress_ctx = &ev;
  r = run_ok(w, p, &o);
  ck_assert_str_eq(ev.seen, "CR0123");
  ck_assert_ptr_eq(ovl_report_program(r), p);
  ck_assert_uint_eq(ovl_report_mode_count(r), 4);
  for (size_t i = 0; i < 4; i++) {
    ovl_report_mode m;
    ck_assert_int_eq(ovl_report_mode_get(r, i, &m), 0);
    ck_assert_int_eq(m.mode, want[i]);
    ck_assert_int_eq(ovl_report_find(r, want[i]), (int)i);
    ck_assert_ptr_nonnull(m.prog);
    ck_assert_ptr_nonnull(m.res);
    ck_assert_ptr_nonnull(m.races);
    ck_assert_uint_eq(ovl_races_count(m.races), 0);
    ck_assert_int_eq(ovl_result_iters(m.res), 2);
    ck_assert(m.min_s <= m.median_s && m.median_s <= m.max_s);
    ck_assert(fabs(m.total_s - (ovl_result_times(m.res)[0] +
                                ovl_result_times(m.res)[1])) < 1e-12);
  }
  ck_assert_int_eq(ovl_report_mode_get(r, 4, NULL), -1);
  {
    ovl_report_mode m;
    ck_assert_int_eq(ovl_report_mode_get(r, 4, &m), -1);
    ck_assert_ptr_null(m.prog);
  }
  /* Whatever the order of the bits: the same order. */
  ovl_report_free(r);
  o = run_opts(OVL_MODE_BIT(OVL_MODE_COMM) | OVL_MODE_BIT(OVL_MODE_SYNC));
  r = run_ok(w, p, &o);
  ck_assert_uint_eq(ovl_report_mode_count(r), 2);
  ck_assert_int_eq(ovl_report_find(r, OVL_MODE_SYNC), 0);
  ck_assert_int_eq(ovl_report_find(r, OVL_MODE_COMM), 1);
  ck_assert_int_eq(ovl_report_find(r, OVL_MODE_ASYNC), -1);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* Trials: the whole measurement again (every mode in order, each run
 * announced), the last trial's runs kept, each trial's times and check
 * kept, the figures over the trials as min <= median <= max with the
 * summary their medians; values that are not finite fail in every trial,
 * and the summary counts them all. */
START_TEST(trials_repeat_the_measurement) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(ALL_MODES);
  events ev = {{0}, 0};
  ovl_report_trials tr;
  ovl_report_summary sum, one;
  ovl_report *r;
  double v[3];

  o.trials = 3;
  o.progress = record;
  o.progress_ctx = &ev;
  r = run_ok(w, p, &o);
  ck_assert_str_eq(ev.seen, "CR012301230123");
  ck_assert_uint_eq(ovl_report_trial_count(r), 3);
  ovl_report_trials_get(r, &tr);
  ck_assert_uint_eq(tr.n, 3);
  for (size_t i = 0; i < 4; i++) {
    ovl_report_mode m, last;
    for (size_t t = 0; t < 3; t++) {
      ck_assert_int_eq(ovl_report_trial_get(r, t, i, &m), 0);
      ck_assert(m.min_s <= m.median_s && m.median_s <= m.max_s);
      /* Only the last trial keeps its run; every trial its check. */
      ck_assert(t == 2 ? m.res != NULL : m.res == NULL);
      ck_assert(i < 2 ? m.check != NULL && m.check->mismatched == 0
                      : m.check == NULL);
      v[t] = m.total_s;
    }
    ck_assert_int_eq(ovl_report_trial_get(r, 3, i, &m), -1);
    ovl_report_mode_get(r, i, &last);
    ck_assert_double_eq(last.total_s, v[2]);
    ck_assert_double_eq(tr.total_s[last.mode].min,
                        fmin(v[0], fmin(v[1], v[2])));
    ck_assert_double_eq(tr.total_s[last.mode].max,
                        fmax(v[0], fmax(v[1], v[2])));
    ck_assert(tr.total_s[last.mode].min <= tr.total_s[last.mode].median &&
              tr.total_s[last.mode].median <= tr.total_s[last.mode].max);
  }
  for (size_t t = 0; t < 3; t++) {
    ovl_report_trial_summary_get(r, t, &one);
    v[t] = one.speedup;
  }
  ck_assert_double_eq(tr.speedup.min, fmin(v[0], fmin(v[1], v[2])));
  ck_assert_double_eq(tr.speedup.max, fmax(v[0], fmax(v[1], v[2])));
  ck_assert(tr.speedup.min <= tr.speedup.median &&
            tr.speedup.median <= tr.speedup.max);
  ck_assert_double_eq_tol(tr.speedup_spread,
                          (tr.speedup.max - tr.speedup.min) /
                              tr.speedup.median,
                          1e-12);
  ovl_report_summary_get(r, &sum);
  ck_assert_double_eq(sum.speedup, tr.speedup.median);
  ck_assert_double_eq(sum.overlap_efficiency, tr.overlap_efficiency.median);
  ck_assert(!isnan(tr.ideal_speedup.median));
  ovl_report_free(r);

  /* A budget: a second trial starts only if two fit (a tiny one does not
   * fit a budget of a nanosecond); 0 and 1 trials mean one. */
  o = run_opts(BOTH_MODES);
  o.trials = 5;
  o.trial_budget_s = 1e-9;
  r = run_ok(w, p, &o);
  ck_assert_uint_eq(ovl_report_trial_count(r), 1);
  ovl_report_trials_get(r, &tr);
  ck_assert_double_eq(tr.speedup.min, tr.speedup.max);
  ck_assert_double_eq(tr.speedup_spread, 0.0);
  ovl_report_free(r);
  o.trial_budget_s = 3600;
  r = run_ok(w, p, &o);
  ck_assert_uint_eq(ovl_report_trial_count(r), 5);
  ovl_report_free(r);
  o.trials = -1;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, NULL), OVL_EINVAL);

  /* Every trial of non-finite values fails; the summary counts them all. */
  o = run_opts(OVL_MODE_BIT(OVL_MODE_ASYNC));
  o.trials = 2;
  o.races = 0;
  {
    const char *t = "x = data(shape=[64], dtype=float32, init=fill, "
                    "value=1e30)\ny = scale(x, scale=1e30)\nfetch(y)\n";
    ovl_program *inf = parse(t, "inf.sched");
    r = run_ok(w, inf, &o);
    ovl_report_summary_get(r, &sum);
    ck_assert_int_eq(sum.nonfinite, 2 * 2 * 64);
    ovl_report_trial_summary_get(r, 0, &one);
    ck_assert_int_eq(one.nonfinite, 2 * 64);
    ovl_report_free(r);
    ovl_program_free(inf);
  }
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* Sync and async are compared with the reference; comp and comm are not,
 * and say why. */
START_TEST(checks_and_reasons) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(ALL_MODES);
  ovl_report *r = run_ok(w, p, &o);
  ovl_report_mode m;
  ovl_report_summary s;

  for (size_t i = 0; i < 2; i++) {
    ovl_report_mode_get(r, i, &m);
    ck_assert_ptr_nonnull(m.check);
    ck_assert_ptr_null(m.not_checked);
    ck_assert_int_eq(m.check->checked, 2 * 64);
    ck_assert_int_eq(m.check->mismatched, 0);
  }
  ovl_report_mode_get(r, 2, &m);
  ck_assert_ptr_null(m.check);
  ck_assert_str_eq(m.not_checked, "comp-only numbers are not checked");
  ovl_report_mode_get(r, 3, &m);
  ck_assert_str_eq(m.not_checked, "comm-only numbers are not checked");
  ovl_report_summary_get(r, &s);
  ck_assert_int_eq(s.mismatched, 0);
  ck_assert_uint_eq(s.races, 0);
  ck_assert_str_eq(ovl_report_result(r), "PASS");
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The race check of every form, before anything runs; without a run
 * (no world) it is all there is. */
START_TEST(races_reported_per_mode) {
  ovl_program *p = parse(racy_text, "racy.sched");
  ovl_pipeline_opts o = {
      .size = sizeof o, .modes = BOTH_MODES, .races = 1, .run = 0};
  events ev = {{0}, 0};
  ovl_report *r = NULL;
  ovl_report_mode m;
  ovl_report_summary s;
  ovl_report_machine mc;
  ovl_error err = {0};
  ovl_race_info info;

  o.progress = record;
  o.progress_ctx = &ev;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_OK);
  ck_assert_str_eq(ev.seen, "C");
  ovl_report_mode_get(r, 0, &m);
  ck_assert_int_eq(m.mode, OVL_MODE_SYNC);
  ck_assert_uint_eq(ovl_races_count(m.races), 0);
  ck_assert_ptr_null(m.res);
  ck_assert_ptr_null(m.check);
  ck_assert_str_eq(m.not_checked, "not run");
  ck_assert(isnan(m.total_s));
  ovl_report_mode_get(r, 1, &m);
  ck_assert_int_eq(m.mode, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(m.races), 1);
  ck_assert_int_eq(ovl_races_get(m.races, 0, &info), 0);
  ck_assert_str_eq(info.var, "c");
  ck_assert_str_eq(info.fix, "insert c_wait_compute(c, ring_id=0) before line 3");
  /* Not given the schedule, the pipeline does not re-check the fix. */
  ck_assert_int_eq(info.fix_checked, 0);
  ck_assert_str_eq(info.fix_why, "not checked: no schedule given");
  ck_assert_int_eq(ovl_report_find(r, OVL_MODE_ASYNC), -1); /* not run */
  ovl_report_summary_get(r, &s);
  ck_assert_uint_eq(s.races, 1);
  ck_assert(isnan(s.speedup));
  ck_assert_str_eq(ovl_report_result(r), "FAIL: races");
  ovl_report_machine_get(r, &mc);
  ck_assert_ptr_null(mc.backend);
  ck_assert_int_eq(mc.nranks, 0);
  ovl_report_free(r);

  /* Without the race check, nothing at all is made. */
  o.races = 0;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_OK);
  ovl_report_mode_get(r, 1, &m);
  ck_assert_ptr_null(m.races);
  ck_assert_ptr_null(m.prog);
  ovl_report_free(r);
  ovl_program_free(p);
}
END_TEST

/* A run reports each form's races beside its numbers (a clean schedule:
 * none, but the reports are there); with races == 0 there are none. */
START_TEST(races_in_a_run) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_report *r = run_ok(w, p, &o);
  ovl_report_mode m;
  for (size_t i = 0; i < 2; i++) {
    ovl_report_mode_get(r, i, &m);
    ck_assert_ptr_nonnull(m.races);
    ck_assert_uint_eq(ovl_races_ops(m.races), ovl_program_op_count(m.prog));
  }
  ovl_report_free(r);
  o.races = 0;
  r = run_ok(w, p, &o);
  ovl_report_mode_get(r, 1, &m);
  ck_assert_ptr_null(m.races);
  ck_assert_ptr_nonnull(m.prog); /* made at run time */
  ck_assert_ptr_nonnull(m.check);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The reference is computed only where a checked mode fetches something,
 * and not when the caller gives one. */
START_TEST(reference_only_when_needed) {
  ovl_world *w = make_world(10);
  ovl_program *fetch = parse(clean_text, "clean.sched");
  ovl_program *nofetch = parse(nofetch_text, "nofetch.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_reference *ref = NULL;
  ovl_report *r;
  ovl_report_mode m;
  ovl_error err = {0};

  ck_assert_int_eq(ovl_pipeline_needs_reference(fetch, &o), 1);
  ck_assert_int_eq(ovl_pipeline_needs_reference(nofetch, &o), 0);
  o.modes = OVL_MODE_BIT(OVL_MODE_COMP) | OVL_MODE_BIT(OVL_MODE_COMM);
  ck_assert_int_eq(ovl_pipeline_needs_reference(fetch, &o), 0);
  o.modes = BOTH_MODES;
  o.run = 0;
  ck_assert_int_eq(ovl_pipeline_needs_reference(fetch, &o), 0);
  o.run = 1;
  ck_assert_int_eq(ovl_pipeline_needs_reference(NULL, &o), 0);

  r = run_ok(w, nofetch, &o);
  for (size_t i = 0; i < 2; i++) {
    ovl_report_mode_get(r, i, &m);
    ck_assert_ptr_null(m.check);
    ck_assert_str_eq(m.not_checked, "nothing fetched");
  }
  ovl_report_free(r);

  /* A reference of the caller's: used as given. */
  ck_assert_int_eq(ovl_reference_compute(fetch, 2, &ref, &err), OVL_OK);
  o.reference = ref;
  ck_assert_int_eq(ovl_pipeline_needs_reference(fetch, &o), 0);
  r = run_ok(w, fetch, &o);
  ovl_report_mode_get(r, 1, &m);
  ck_assert_int_eq(m.check->checked, 128);
  ck_assert_int_eq(m.check->mismatched, 0);
  ovl_report_free(r);
  ovl_reference_free(ref);
  ovl_program_free(fetch);
  ovl_program_free(nofetch);
  ovl_world_free(w);
}
END_TEST

START_TEST(summary_figures) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(ALL_MODES);
  ovl_report *r = run_ok(w, p, &o);
  ovl_report_summary s;
  double t[4];
  for (size_t i = 0; i < 4; i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    t[i] = m.total_s; /* sync, async, comp, comm */
  }
  ovl_report_summary_get(r, &s);
  ck_assert_double_eq_tol(s.speedup, t[0] / t[1], 1e-12);
  ck_assert_double_eq_tol(s.ideal_speedup, t[0] / fmax(t[2], t[3]), 1e-12);
  ck_assert_double_eq_tol(s.overlap_efficiency,
                          (t[0] - t[1]) / fmin(t[2], t[3]), 1e-12);
  ovl_report_free(r);

  /* Sync and async alone: the speedup only. */
  o.modes = BOTH_MODES;
  r = run_ok(w, p, &o);
  ovl_report_summary_get(r, &s);
  ck_assert(!isnan(s.speedup));
  ck_assert(isnan(s.ideal_speedup));
  ck_assert(isnan(s.overlap_efficiency));
  ovl_report_free(r);

  /* One mode: nothing. */
  o.modes = OVL_MODE_BIT(OVL_MODE_ASYNC);
  r = run_ok(w, p, &o);
  ovl_report_summary_get(r, &s);
  ck_assert(isnan(s.speedup));
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* A failing run stops the pipeline: no report, the stage in the message
 * (or the caller's label), nothing announced after it. */
START_TEST(failing_run_error) {
  char path[4096];
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_program *p = NULL;
  ovl_world *w = make_world(0.3);
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  events ev = {{0}, 0};
  ovl_report *r = (ovl_report *)&ev; /* set to NULL on failure */
  ovl_error err = {0};
  ovl_status st;

  snprintf(path, sizeof path, "%s/tests/schedules/hang_stream.sched",
           OVL_SRCDIR);
  ck_assert_int_eq(ovl_program_load(path, &po, &p, &err), OVL_OK);
  RO.iters = 1;
  RO.warmup = 0;
  o.progress = record;
  o.progress_ctx = &ev;
  st = ovl_pipeline_run(w, p, &o, &r, &err);
  ck_assert_int_eq(st, OVL_ETIMEDOUT);
  ck_assert_int_eq(err.status, OVL_ETIMEDOUT);
  ck_assert_ptr_null(r);
  ck_assert_msg(strncmp(err.msg, "sync run failed: ", 17) == 0, "%s",
                err.msg);
  ck_assert_msg(strstr(err.msg, "timed out") != NULL, "%s", err.msg);
  ck_assert_str_eq(ev.seen, "CR");

  /* The world is aborted now: a new one. */
  ovl_world_free(w);
  w = make_world(0.3);
  o.label = "<run 7>";
  o.progress = NULL;
  st = ovl_pipeline_run(w, p, &o, &r, &err);
  ck_assert_int_eq(st, OVL_ETIMEDOUT);
  ck_assert_msg(strncmp(err.msg, "<run 7>: ", 9) == 0, "%s", err.msg);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The comparison fails (a reference without the fetched variable): the
 * check stage says so. */
START_TEST(failing_check_error) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_program *nofetch = parse(nofetch_text, "nofetch.sched");
  ovl_pipeline_opts o = run_opts(OVL_MODE_BIT(OVL_MODE_ASYNC));
  ovl_reference *ref = NULL;
  ovl_report *r = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_reference_compute(nofetch, 2, &ref, &err), OVL_OK);
  o.reference = ref;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_str_eq(err.msg, "check: ovl_check_result: the reference has no "
                            "value of 'c' on rank 0");
  ovl_reference_free(ref);
  ovl_program_free(nofetch);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

START_TEST(bad_arguments) {
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_report *r = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_pipeline_run: bad argument");
  ck_assert_int_eq(ovl_pipeline_run(NULL, NULL, &o, &r, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, NULL, &r, &err), OVL_EINVAL);
  o.run = 0;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, NULL, &err), OVL_EINVAL);
  o.modes = 1u << 7;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_pipeline_run: unknown mode bits 0x80");
  ck_assert_ptr_null(r);
  ovl_report_free(NULL);
  ovl_program_free(p);
}
END_TEST

/* A report's getters on no report, and out of range on one: their
 * documented nothing (0, -1, NULL, NaN figures), outputs cleared; the
 * writers refuse with OVL_EINVAL. */
START_TEST(report_getters_without_a_report) {
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_report *r;
  ovl_report_mode m;
  ovl_report_summary s;
  ovl_report_trials tr;
  ovl_report_machine mc;
  ovl_report_replay rp;
  ovl_timeline_run *runs = (ovl_timeline_run *)&m;
  const ovl_timeline_marks *marks = (const ovl_timeline_marks *)&m;
  ovl_op_time *rows = (ovl_op_time *)&m;
  size_t n = 7, len = 0;
  char *text = (char *)&m;
  ovl_error err = {0};

  ck_assert_ptr_null(ovl_report_program(NULL));
  ck_assert_uint_eq(ovl_report_mode_count(NULL), 0);
  ck_assert_int_eq(ovl_report_mode_get(NULL, 0, &m), -1);
  ck_assert_ptr_null(m.prog);
  ck_assert_int_eq(ovl_report_find(NULL, OVL_MODE_SYNC), -1);
  ck_assert_int_eq(ovl_report_trial_get(NULL, 0, 0, &m), -1);
  ck_assert_int_eq(ovl_report_trial_get(NULL, 0, 0, NULL), -1);
  ck_assert_uint_eq(ovl_report_trial_count(NULL), 0);
  ovl_report_summary_get(NULL, &s);
  ck_assert(isnan(s.speedup) && isnan(s.ideal_speedup) &&
            isnan(s.overlap_efficiency) && s.races == 0);
  ovl_report_summary_get(NULL, NULL);
  ovl_report_trial_summary_get(NULL, 0, &s);
  ck_assert(isnan(s.speedup) && s.mismatched == 0);
  ovl_report_trial_summary_get(NULL, 0, NULL);
  ovl_report_trials_get(NULL, &tr);
  ck_assert_uint_eq(tr.n, 0);
  ck_assert(isnan(tr.speedup.median) && isnan(tr.total_s[0].min) &&
            isnan(tr.speedup_spread));
  ovl_report_trials_get(NULL, NULL);
  ovl_report_machine_get(NULL, &mc);
  ck_assert_ptr_null(mc.backend);
  ck_assert_int_eq(mc.nranks, 0);
  ovl_report_machine_get(NULL, NULL);
  ck_assert_int_eq(ovl_report_replay_get(NULL, 0, &rp), -1);
  ck_assert(rp.n == 0 && isnan(rp.plain_s) && isnan(rp.delay_us));
  ck_assert_int_eq(ovl_report_replay_get(NULL, 0, NULL), -1);
  ck_assert_ptr_null(ovl_report_mismatches(NULL));
  ck_assert_ptr_null(ovl_report_not_run(NULL));
  ck_assert_str_eq(ovl_report_result(NULL), "PASS");
  ck_assert_int_eq(ovl_report_same_findings(NULL, 0), -1);
  ck_assert_int_eq(ovl_report_op_times(NULL, 0, &rows, &n, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_report_op_times: bad argument");
  ck_assert(rows == NULL && n == 0);
  n = 7;
  ck_assert_int_eq(ovl_report_timelines(NULL, &runs, &marks, &n, &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_report_timelines: bad argument");
  ck_assert(runs == NULL && marks == NULL && n == 0);
  ck_assert_int_eq(ovl_report_json(NULL, NULL, &text, &len, &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_report_json: bad argument");
  ck_assert_ptr_null(text);
  text = (char *)&m;
  ck_assert_int_eq(ovl_report_races_json(NULL, &text, &len, &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_report_races_json: bad argument");
  ck_assert_ptr_null(text);

  /* A report of the checks alone, out of range and where nothing ran. */
  o.run = 0;
  r = run_ok(NULL, p, &o);
  ck_assert_int_eq(ovl_report_mode_get(r, 2, &m), -1);
  ck_assert_int_eq(ovl_report_trial_get(r, 0, 2, &m), -1);
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), -1); /* no replay */
  ck_assert_int_eq(ovl_report_same_findings(r, 2), -1);
  ck_assert_int_eq(ovl_report_same_findings(r, 0), 0);
  ck_assert_int_eq(ovl_report_find(r, OVL_MODE_SYNC), -1); /* not run */
  ovl_report_machine_get(r, &mc);
  ck_assert_ptr_null(mc.backend); /* no world */
  ck_assert_int_eq(ovl_report_op_times(r, 2, &rows, &n, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_report_op_times(r, 0, &rows, &n, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg,
                   "ovl_report_op_times: the sync run did not time its ops");
  ck_assert_int_eq(ovl_report_op_times(r, 0, NULL, &n, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_report_json(r, NULL, NULL, &len, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_report_timelines(r, NULL, &marks, &n, &err),
                   OVL_EINVAL);
  ovl_report_free(r);
  ovl_program_free(p);
}
END_TEST

/* The machine the report keeps, and the op times of a mode. */
START_TEST(machine_and_op_times) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_report *r;
  ovl_report_machine mc;
  ovl_op_time *rows = NULL;
  size_t nrows = 0;
  ovl_error err = {0};

  RO.op_times = 1;
  r = run_ok(w, p, &o);
  ovl_report_machine_get(r, &mc);
  ck_assert_str_eq(mc.backend, "cpu");
  ck_assert_int_eq(mc.nranks, 2);
  ck_assert_str_eq(mc.devices, ovl_world_devices(w));
  ck_assert_str_eq(mc.device_names[1], "emulated (cpu)");
  ck_assert_str_eq(mc.info.nccl_version, "n/a");

  /* Per (line, op, stream), in program order. */
  ck_assert_int_eq(ovl_report_op_times(r, 1, &rows, &nrows, &err), OVL_OK);
  ck_assert_uint_eq(nrows, 2);
  ck_assert_int_eq(rows[0].line, 2);
  ck_assert_str_eq(rows[0].op, "scale");
  ck_assert_str_eq(rows[0].stream_name, "calc");
  ck_assert_int_eq(rows[1].line, 4);
  ck_assert_str_eq(rows[1].op, "c_allreduce_sum");
  ck_assert_str_eq(rows[1].stream_name, "comm[0]");
  ck_assert_int_eq(rows[1].stream, 1);
  ck_assert_int_eq(rows[1].count, 1);
  ck_assert(rows[1].sec_per_iter > 0);
  free(rows);
  /* The sync form has the collective on calc. */
  ck_assert_int_eq(ovl_report_op_times(r, 0, &rows, &nrows, &err), OVL_OK);
  ck_assert_str_eq(rows[1].stream_name, "calc");
  free(rows);
  ck_assert_int_eq(ovl_report_op_times(r, 2, &rows, &nrows, &err),
                   OVL_EINVAL);
  ovl_report_free(r);

  /* Run without op times: none to give. */
  RO.op_times = 0;
  r = run_ok(w, p, &o);
  ck_assert_int_eq(ovl_report_op_times(r, 0, &rows, &nrows, &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_report_op_times: the sync run did not "
                            "time its ops");
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The results JSON: the keys and layout docs/JSON.md documents. */
START_TEST(report_as_json) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  /* The tool's envelope: its members placed as given. */
  ovl_json_envelope jo = {.size = sizeof jo,
                          .head = "\"tool\": \"overlap_sim\"",
                          .options = "\"mode\": \"both\", \"trace\": null, "
                                     "\"svg\": null",
                          .tail = "\"exit_status\": 0"};
  const char *defs[] = {"n=\xff"};
  ovl_report *r;
  size_t len = 0;
  char *text = NULL;
  ovl_error err = {0};

  RO.op_times = 1;
  /* The -D values the program was bound with, as given (the JSON keeps
   * them valid UTF-8). */
  ck_assert_int_eq(ovl__program_set_defines(p, defs, 1, &err), OVL_OK);
  r = run_ok(w, p, &o);
  ck_assert_int_eq(ovl_report_json(r, &jo, &text, &len, &err), OVL_OK);
  ck_assert_uint_eq(strlen(text), len);
  {
    static const char head[] =
        "{\n  \"tool\": \"overlap_sim\",\n  \"version\": \"" OVL_VERSION_STRING
        "\",\n  \"schedule\": {\"path\": \"clean.sched\", \"params\": {}, "
        "\"ops\": 5, \"fetched\": [\"c\"], \"bytes_per_rank\": 512},\n  "
        "\"machine\": {\"backend\": \"cpu\", \"ranks\": 2, ";
    ck_assert_msg(strncmp(text, head, strlen(head)) == 0, "%s", text);
  }
  /* What the report ran with: the runs' options, the pipeline's, the
   * world's timeout, the program's -D values; then the envelope's. */
  ck_assert_ptr_nonnull(strstr(text, "\"options\": {\"iters\": 3, "
                                     "\"warmup\": 1, \"timed\": 2, "
                                     "\"rtol\": 1.0000000000000001e-05, "));
  ck_assert_ptr_nonnull(strstr(text, "\"timeout_s\": 10, \"races\": true, "
                                     "\"op_times\": true, \"graph\": false, "
                                     "\"chaos_seed\": 0, \"comm_priority\": "
                                     "\"default\", "));
  ck_assert_msg(strstr(text, "\"trials\": null, \"trial_budget_s\": null, "
                             "\"trace_iter\": null, \"defines\": "
                             "[\"n=\\ufffd\"], \"mode\": \"both\", "
                             "\"trace\": null, \"svg\": null},\n  "
                             "\"modes\": {\n    \"sync\": {\"total_s\": "),
                "%.3000s", strstr(text, "\"options\""));
  ck_assert_ptr_nonnull(strstr(text, "\"status\": \"ok\", \"checked\": 128, "
                                     "\"unchecked\": 0, \"mismatched\": 0, "
                                     "\"nonfinite\": 0, \"vars\": [\n"));
  ck_assert_ptr_nonnull(strstr(text, "\"mismatched\": 0, \"nonfinite\": 0, "
                                     "\"fetched\": true, \"first_nonfinite\": "
                                     "null, \"first_index\": null"));
  ck_assert_ptr_nonnull(strstr(text, "\"op\": \"c_allreduce_sum\", "
                                     "\"stream\": \"comm[0]\", \"count\": 1"));
  ck_assert_ptr_nonnull(strstr(text, ",\n  \"ideal_speedup\": null,\n"));
  {
    static const char tail[] = "\"result\": \"PASS\",\n  \"exit_status\": "
                               "0\n}\n";
    ck_assert_str_eq(text + len - strlen(tail), tail);
  }
  free(text);
  ovl_report_free(r);

  /* A report of no runs has no results to write. */
  o.run = 0;
  r = run_ok(NULL, p, &o);
  ck_assert_int_eq(ovl_report_json(r, &jo, &text, &len, &err), OVL_EINVAL);
  ck_assert_ptr_null(text);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* Values that overflowed fail the check, though the reference (rounded
 * to float32) overflowed the same way: y = 1e30 * 1e30 is inf in float32,
 * z = y - y NaN. Both modes, every element; the verdict and the JSON say
 * how many are not finite, per variable and where the first is. */
static const char overflow_text[] =
    "h = data(shape=[2, 3], dtype=float32, init=fill, value=1e30)\n"
    "y = scale(h, scale=1e30)\n"
    "z = elementwise_sub(y, y)\n"
    "k = data(shape=[5], dtype=float32, init=fill, value=2.0)\n"
    "fetch(y, z, k)\n";

START_TEST(nonfinite_values_fail) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(overflow_text, "overflow.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_json_envelope jo = {.size = sizeof jo,
                          .head = "\"tool\": \"overlap_sim\"",
                          .tail = "\"exit_status\": 1"};
  ovl_report_summary sum;
  ovl_report_mode m;
  ovl_report *r = run_ok(w, p, &o);
  ovl_error err = {0};
  char *text = NULL;
  size_t len = 0;

  for (size_t i = 0; i < 2; i++) {
    ovl_report_mode_get(r, i, &m);
    ck_assert_ptr_nonnull(m.check);
    ck_assert_int_eq(m.check->checked, 2 * (6 + 6 + 5));
    ck_assert_int_eq(m.check->mismatched, 2 * 12);
    ck_assert_int_eq(m.check->nonfinite, 2 * 12);
    ck_assert_uint_eq(m.check->nmismatch, 4); /* y and z on both ranks */
    for (size_t k = 0; k < 4; k++) {
      const ovl_mismatch *mm = &m.check->mismatch[k];
      ck_assert_str_eq(mm->var, k % 2 == 0 ? "y" : "z");
      ck_assert_int_eq(mm->count, 6);
      ck_assert_int_eq(mm->nonfinite, 6);
      ck_assert_int_eq(mm->first_nonfinite, 0);
      ck_assert_int_eq(mm->first_index, 0);
      if (k % 2 == 0) {
        ck_assert_double_eq(mm->got, INFINITY);
        ck_assert_double_eq(mm->expected, INFINITY);
      } else {
        ck_assert(isnan(mm->got) && isnan(mm->expected));
      }
    }
  }
  ovl_report_summary_get(r, &sum);
  ck_assert_int_eq(sum.mismatched, 4 * 12);
  ck_assert_int_eq(sum.nonfinite, 4 * 12);
  ck_assert_str_eq(ovl_report_result(r), "FAIL: non-finite values");
  ck_assert_int_eq(ovl_report_json(r, &jo, &text, &len, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(text, "\"status\": \"mismatch\", \"checked\": "
                                     "34, \"unchecked\": 0, \"mismatched\": "
                                     "24, \"nonfinite\": 24, \"vars\": [\n"));
  ck_assert_ptr_nonnull(strstr(text, "{\"rank\": 1, \"var\": \"z\", "
                                     "\"dtype\": \"float32\", \"rtol\": "));
  ck_assert_ptr_nonnull(strstr(text, "\"checked\": 6, \"mismatched\": 6, "
                                     "\"nonfinite\": 6, \"fetched\": true, "
                                     "\"first_nonfinite\": 0, \"first_index\": "
                                     "0, \"first_at\": \"[0,0]\", \"got\": "
                                     "\"nan\", \"expected\": \"nan\"}"));
  ck_assert_ptr_nonnull(strstr(text, "{\"rank\": 1, \"var\": \"k\", "
                                     "\"dtype\": \"float32\", \"rtol\": "));
  ck_assert_ptr_nonnull(strstr(text, "\"checked\": 5, \"mismatched\": 0, "
                                     "\"nonfinite\": 0, "));
  ck_assert_ptr_nonnull(strstr(text, "\"result\": \"FAIL: non-finite "
                                     "values\""));
  free(text);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* --races --json: every form under its name, one alone too. */
START_TEST(races_as_json) {
  ovl_program *p = parse(racy_text, "racy.sched");
  ovl_pipeline_opts o = {
      .size = sizeof o, .modes = OVL_MODE_BIT(OVL_MODE_ASYNC), .races = 1};
  ovl_report *r = NULL;
  ovl_error err = {0};
  char *text = NULL, *one = NULL;
  size_t len = 0;

  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_OK);
  ck_assert_int_eq(ovl_report_races_json(r, &text, &len, &err), OVL_OK);
  {
    ovl_report_mode m;
    ovl_report_mode_get(r, 0, &m);
    ck_assert_int_eq(ovl_races_format(m.races, p, 1, &one, &err), OVL_OK);
  }
  /* One form: still under its name; then its deadlocks, and the
   * mismatches of the program. */
  {
    const char *head = "{\"modes\": {\"async\": ";
    const char *tail = "}, \"deadlocks\": {\"async\": {\"schedule\":"
                       "\"racy.sched\",\"ranks\":2,\"deadlocks\":[],"
                       "\"count\":0,\"more\":0,\"blocked\":0}}, "
                       "\"mismatches\": {\"schedule\":\"racy.sched\","
                       "\"ranks\":2,\"comm_ops\":2,\"mismatches\":[],"
                       "\"count\":0,\"more\":0}, \"findings\": "
                       "{\"races\": 1, \"mismatches\": 0, \"deadlocks\": 0, "
                       "\"same\": [[\"async\"]]}}\n";
    size_t n1 = strlen(one), nh = strlen(head);
    while (n1 > 0 && one[n1 - 1] == '\n')
      n1--;
    ck_assert_uint_eq(len, nh + n1 + strlen(tail));
    ck_assert(strncmp(text, head, nh) == 0);
    ck_assert(strncmp(text + nh, one, n1) == 0);
    ck_assert_str_eq(text + nh + n1, tail);
  }
  free(text);
  ovl_report_free(r);

  o.modes = BOTH_MODES;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_OK);
  ck_assert_int_eq(ovl_report_races_json(r, &text, &len, &err), OVL_OK);
  ck_assert_msg(strncmp(text, "{\"modes\": {\"sync\": {\"schedule\":\"racy."
                              "sched\",",
                        38) == 0,
                "%.3000s", strstr(text, "\"options\""));
  ck_assert_ptr_nonnull(strstr(text, "\"more\":0}, \"async\": {\"schedule\""));
  ck_assert_ptr_nonnull(strstr(text, "}, \"deadlocks\": {\"sync\": {"));
  ck_assert_str_eq(text + len - 4, "]}}\n");
  /* Its one race is in the async form only. */
  ck_assert_ptr_nonnull(strstr(text, "\"forms\":[\"async\"]"));
  ck_assert_ptr_nonnull(strstr(text, "\"findings\": {\"races\": 1, "));
  free(text);
  free(one);
  ovl_report_free(r);

  /* Not race-checked: nothing to write. */
  o.races = 0;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_OK);
  ck_assert_int_eq(ovl_report_races_json(r, &text, &len, &err), OVL_EINVAL);
  ck_assert_ptr_null(text);
  ovl_report_free(r);
  ovl_program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Flow arrows in the Chrome trace                                     */
/* ------------------------------------------------------------------ */

/* One event of a trace, from its line: every event is one line. */
typedef struct {
  char ph;
  long id;
  int pid, tid;
  int64_t ts, dur; /* ns */
  char name[64];
} trace_ev;

/* "KEY":NUMBER in `line`: microseconds with 3 decimals, as ns. */
static int64_t trace_ns(const char *line, const char *key) {
  const char *p = strstr(line, key);
  long long us = 0, frac = 0;
  ck_assert_msg(p != NULL, "no %s in %s", key, line);
  ck_assert_int_eq(sscanf(p + strlen(key), "%lld.%3lld", &us, &frac), 2);
  return (int64_t)(us * 1000 + frac);
}

static long trace_int(const char *line, const char *key) {
  const char *p = strstr(line, key);
  ck_assert_msg(p != NULL, "no %s in %s", key, line);
  return strtol(p + strlen(key), NULL, 10);
}

/* The slices, flow starts and flow ends of a trace's text. */
static size_t trace_parse(const char *text, trace_ev *ev, size_t cap) {
  size_t n = 0;
  for (const char *l = text; l != NULL && *l; l = strchr(l, '\n')) {
    char ph;
    while (*l == '\n' || *l == ' ')
      l++;
    if (strncmp(l, "{\"ph\":\"", 7) != 0)
      continue;
    ph = l[7];
    if (ph != 'X' && ph != 's' && ph != 'f')
      continue;
    ck_assert_uint_lt(n, cap);
    memset(&ev[n], 0, sizeof ev[n]);
    ev[n].ph = ph;
    ev[n].pid = (int)trace_int(l, "\"pid\":");
    ev[n].tid = (int)trace_int(l, "\"tid\":");
    ev[n].ts = trace_ns(l, "\"ts\":");
    if (ph == 'X') {
      const char *nm = strstr(l, "\"name\":\"") + 8;
      size_t k = 0;
      ev[n].dur = trace_ns(l, "\"dur\":");
      while (nm[k] != '"' && k + 1 < sizeof ev[n].name) {
        ev[n].name[k] = nm[k];
        k++;
      }
    } else {
      ev[n].id = trace_int(l, "\"id\":");
      ck_assert(ph == 's' || strstr(l, "\"bp\":\"e\"") != NULL);
    }
    n++;
  }
  return n;
}

/* The slice of `e`'s (pid, tid) that encloses e's time, or NULL. */
static const trace_ev *enclosing(const trace_ev *ev, size_t n,
                                 const trace_ev *e) {
  for (size_t k = 0; k < n; k++)
    if (ev[k].ph == 'X' && ev[k].pid == e->pid && ev[k].tid == e->tid &&
        ev[k].ts <= e->ts && e->ts <= ev[k].ts + ev[k].dur)
      return &ev[k];
  return NULL;
}

/* Every arrow goes from an event record to the end of the wait that
 * consumed it, never back in time. calc is held up 20 ms by a delay
 * before the record of c_wait_compute, so comm's wait stalls for about
 * that long: the middle of its slice (where arrows used to end) comes
 * before the record. */
START_TEST(trace_arrows_end_where_the_wait_ends) {
  static const char text[] =
      "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n"
      "delay(us=20000, stream=calc)\n"
      "c = scale(x, scale=3.0)\n"
      "c_wait_compute(c, ring_id=0)\n"
      "c_allreduce_sum(c, ring_id=0)\n"
      "c_wait_comm(c, ring_id=0)\n"
      "y = scale(c, scale=0.5)\n"
      "fetch(y)\n";
  ovl_world *w = make_world(10);
  ovl_program *p = parse(text, "stall.sched");
  ovl_pipeline_opts o = run_opts(OVL_MODE_BIT(OVL_MODE_ASYNC));
  static trace_ev ev[512];
  ovl_timeline_run tl;
  ovl_report_mode m;
  ovl_report *r;
  ovl_error err = {0};
  char *trace = NULL;
  size_t len, n, flows = 0, stalled = 0;

  RO.trace = 1;
  RO.trace_iter = -1;
  r = run_ok(w, p, &o);
  ovl_report_mode_get(r, 0, &m);
  tl.mode = m.mode;
  tl.prog = m.prog;
  tl.res = m.res;
  ck_assert_int_eq(ovl_timeline_trace(&tl, 1, &trace, &len, &err), OVL_OK);
  n = trace_parse(trace, ev, sizeof ev / sizeof ev[0]);
  for (size_t i = 0; i < n; i++) {
    const trace_ev *f = &ev[i], *s = NULL, *from, *to;
    if (f->ph != 'f')
      continue;
    for (size_t k = 0; k < n; k++)
      if (ev[k].ph == 's' && ev[k].id == f->id)
        s = &ev[k];
    ck_assert_ptr_nonnull(s);
    from = enclosing(ev, n, s);
    to = enclosing(ev, n, f);
    ck_assert_ptr_nonnull(from);
    ck_assert_ptr_nonnull(to);
    ck_assert_msg(strstr(from->name, "[record]") != NULL, "%s", from->name);
    ck_assert_msg(strncmp(to->name, "c_wait_", 7) == 0, "%s", to->name);
    /* At the end of the wait (1 ns inside it), after the record began. */
    ck_assert_int_eq(f->ts, to->ts + to->dur - 1);
    ck_assert_int_eq(s->ts, from->ts + 1);
    ck_assert_msg(f->ts >= s->ts, "flow %ld ends at %lld ns, before it "
                  "starts at %lld", f->id, (long long)f->ts,
                  (long long)s->ts);
    if (to->dur > 10000000 && strcmp(to->name, "c_wait_compute") == 0) {
      stalled++;
      /* What made the old arrows point back: the middle of the wait. */
      ck_assert(to->ts + to->dur / 2 < from->ts);
    }
    flows++;
  }
  /* Two waits per rank (c_wait_compute, c_wait_comm), on 2 ranks; comm's
   * wait for calc stalled on each. */
  ck_assert_uint_eq(flows, 4);
  ck_assert_uint_eq(stalled, 2);
  free(trace);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The timelines need the runs only: the names come with the results. */
START_TEST(timeline_outlives_the_world) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(clean_text, "clean.sched");
  ovl_pipeline_opts o = run_opts(BOTH_MODES);
  ovl_timeline_run tl[2];
  ovl_report *r;
  char *text = NULL;
  size_t len = 0;
  ovl_error err = {0};

  RO.trace = 1;
  RO.trace_iter = -1;
  r = run_ok(w, p, &o);
  ovl_world_free(w);
  for (size_t i = 0; i < 2; i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    tl[i].mode = m.mode;
    tl[i].prog = m.prog;
    tl[i].res = m.res;
  }
  ck_assert_int_eq(ovl_timeline_trace(tl, 2, &text, &len, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(text, "\"name\":\"process_name\",\"args\":"
                                     "{\"name\":\"async: rank 1 (emulated "
                                     "(cpu))\"}"));
  ck_assert_ptr_nonnull(strstr(text, "\"otherData\":{\"tool\":\"overlap-sim\","
                                     "\"version\":\"" OVL_VERSION_STRING
                                     "\",\"backend\":\"cpu\",\"ranks\":2,"));
  free(text);
  ck_assert_int_eq(ovl_timeline_svg(tl, 2, &text, &len, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(text, " \xe2\x80\x94 sync vs async \xe2\x80\x94"
                                     " backend cpu, "));
  free(text);
  ck_assert_int_eq(ovl_timeline_trace(NULL, 0, &text, &len, &err),
                   OVL_EINVAL);
  ovl_report_free(r);
  ovl_program_free(p);
}
END_TEST

static Suite *pipeline_suite(void) {
  Suite *s = suite_create("pipeline");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, modes_run_in_order);
  tcase_add_test(tc, trials_repeat_the_measurement);
  tcase_add_test(tc, checks_and_reasons);
  tcase_add_test(tc, races_reported_per_mode);
  tcase_add_test(tc, races_in_a_run);
  tcase_add_test(tc, reference_only_when_needed);
  tcase_add_test(tc, summary_figures);
  tcase_add_test(tc, failing_run_error);
  tcase_add_test(tc, failing_check_error);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, report_getters_without_a_report);
  tcase_add_test(tc, machine_and_op_times);
  tcase_add_test(tc, report_as_json);
  tcase_add_test(tc, nonfinite_values_fail);
  tcase_add_test(tc, races_as_json);
  tcase_add_test(tc, timeline_outlives_the_world);
  tcase_add_test(tc, trace_arrows_end_where_the_wait_ends);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(pipeline_suite()); }
