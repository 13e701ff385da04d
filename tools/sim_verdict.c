/*
 * The verdict of a run of tools/overlap_sim (sim_verdict.h): whether the
 * numbers are right (the result line) and, apart from it, what the
 * overlap bought (the overlap line), with a warning where a figure is
 * noise and, on a terminal, the next step. Not part of libovl.
 */
#include "sim_verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim_judge.h"
#include "sim_report.h"
#include "tool_util.h"

/* The figures of a report, for sim_judge.h. */
static void figures_of(const ovl_report *r, sim_figures *f) {
  ovl_report_trials tr;
  ovl_report_summary s;
  double sync_s = NAN, async_s = NAN;
  memset(f, 0, sizeof *f);
  ovl_report_trials_get(r, &tr);
  ovl_report_summary_get(r, &s);
  f->speedup = s.speedup;
  f->speedup_min = tr.speedup.min;
  f->speedup_max = tr.speedup.max;
  f->spread = tr.speedup_spread;
  f->trials = tr.n;
  f->ideal = s.ideal_speedup;
  f->efficiency = s.overlap_efficiency;
  f->comp_comm = ovl_report_find(r, OVL_MODE_COMP) >= 0 &&
                 ovl_report_find(r, OVL_MODE_COMM) >= 0;
  f->short_s = NAN;
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    if (m.res == NULL)
      continue;
    f->predicted = f->predicted || ovl_result_predicted(m.res);
    if (isnan(f->short_s) || m.median_s < f->short_s) {
      f->short_s = m.median_s;
      f->short_mode = ovl_mode_name(m.mode);
    }
    if (m.mode == OVL_MODE_SYNC)
      sync_s = m.median_s;
    if (m.mode == OVL_MODE_ASYNC)
      async_s = m.median_s;
  }
  f->overlap_short_s = sync_s < async_s ? sync_s : async_s;
  f->mismatched = s.mismatched;
  f->races = s.races;
}

void sim_print_noise(const ovl_report *r) {
  sim_figures f;
  char buf[1024];
  figures_of(r, &f);
  if (sim_judge_noise(&f, buf, sizeof buf) > 0)
    fputs(buf, stdout);
}

/* The overlap line: what the async form bought over the sync form, where
 * both ran. */
static void print_overlap(const ovl_report *r) {
  sim_figures f;
  char buf[512];
  figures_of(r, &f);
  if (sim_judge_overlap(&f, buf, sizeof buf))
    printf("%s\n", buf);
}

/* The fetched values that are not finite, per run (a trial's modes):
 * the same in every trial, or the most of one. */
static void print_nonfinite(const ovl_report *r, const ovl_report_summary *s) {
  size_t nt = ovl_report_trial_count(r);
  int64_t most = 0;
  bool same = true;
  for (size_t t = 0; t < nt; t++) {
    ovl_report_summary ts;
    ovl_report_trial_summary_get(r, t, &ts);
    same = same && (t == 0 || ts.nonfinite == most);
    if (ts.nonfinite > most)
      most = ts.nonfinite;
  }
  if (nt == 0)
    most = s->nonfinite;
  printf("result: FAIL: %lld fetched value%s not finite (NaN or an "
         "infinity)",
         (long long)most, most == 1 ? " is" : "s are");
  if (nt > 1)
    printf(same ? " in each of %zu trials" : " in the worst of %zu trials",
           nt);
  printf("%s%s\n", s->mismatched > s->nonfinite ? ", and numeric mismatch"
                                                : "",
         s->races > 0 ? ", and races" : "");
}

/* Whether the report's runs were predicted (the model backend). */
static bool predicted(const ovl_report *r) {
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    if (m.res != NULL && ovl_result_predicted(m.res))
      return true;
  }
  return false;
}

/* The result line: whether the numbers are right. */
static void print_result(const ovl_report *r) {
  ovl_report_summary s;
  ovl_report_summary_get(r, &s);
  if (s.nonfinite > 0)
    print_nonfinite(r, &s);
  else if (s.mismatched > 0) {
    printf("result: FAIL: numeric mismatch (");
    sim_print_tolerance(r);
    printf(")%s\n", s.races > 0 ? ", and races" : "");
  } else if (s.races > 0 || s.mismatches > 0 || s.deadlocks > 0) {
    printf("result: FAIL: ");
    sim_print_check_summary(r, stdout);
    if (ovl_report_not_run(r) != NULL)
      printf(" (nothing ran: %s)\n", ovl_report_not_run(r));
    else if (predicted(r))
      printf(" (predicted: nothing was computed)\n");
    else
      printf(" (the numbers matched this time)\n");
  } else
    printf("result: PASS\n");
}

/* The next step, one line: what to run to learn more. */
static void print_next(const ovl_report *r, const sim_options *o) {
  const char *sched = o->schedule != NULL ? o->schedule : "";
  const char *sp = o->schedule != NULL ? " " : "";
  sim_figures f;
  figures_of(r, &f);
  printf("next: ");
  if (ovl_report_not_run(r) != NULL)
    printf("%s --fix%s%s prints the checked fixes as a diff (--fix=FILE "
           "writes the fixed schedule)\n",
           progname, sp, sched);
  else if (f.races > 0)
    printf("%s --replay%s%s shows each race as wrong numbers; --fix "
           "applies the checked fixes\n",
           progname, sp, sched);
  else if (f.mismatched > 0)
    printf("--show=8 prints the first values fetched; --rtol and --atol "
           "set the tolerance (docs/OVERLAP_SIM.md)\n");
  else if (sim_judge_is_noise(&f))
    printf("--trials=10 and larger sizes (-D) give steadier figures\n");
  else if (isnan(f.speedup))
    printf("--mode=both (the default) runs sync and async and says what "
           "the overlap buys\n");
  else if (!f.comp_comm)
    printf("%s --mode=all%s%s times the comp-only and comm-only forms "
           "too\n",
           progname, sp, sched);
  else
    printf("%s --svg=run.svg%s%s draws what overlaps what "
           "(docs/TIMELINES.md)\n",
           progname, sp, sched);
}

void sim_print_verdict(const ovl_report *r, const sim_options *o) {
  if (!o->common.quiet)
    print_overlap(r);
  print_result(r);
  if (!o->common.quiet && isatty(STDOUT_FILENO))
    print_next(r, o);
}
