/*
 * overlap_sim's model parts (docs/MODEL.md): --predict=PROFILE, beside a
 * real run the model's prediction of the same program (the profile, and
 * --machine's machine), printed against what was measured, mode by mode,
 * with the error; and past 64 ranks (the model's), the checks run at 64.
 * Not part of libovl.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_predict.h"
#include "sim_report.h"
#include "tool_util.h"

int sim_predict_world(const sim_options *o, int nranks, ovl_world **out) {
  ovl_world_opts wo = OVL_OPTS_INIT(ovl_world_opts);
  ovl_error err = {0};
  ovl_status st;
  *out = NULL;
  if (o->predict == NULL)
    return -1;
  wo.backend = "model";
  wo.nranks = nranks;
  st = ovl_world_create(&wo, out, &err);
  if (st == OVL_OK && o->common.machine != NULL)
    st = ovl_world_set(*out, "machine", o->common.machine, &err);
  if (st == OVL_OK)
    st = ovl_world_set(*out, "profile", o->predict, &err);
  if (st == OVL_OK)
    return -1;
  fprintf(stderr, "%s: --predict: %s\n", progname, err.msg);
  ovl_world_free(*out);
  *out = NULL;
  return st == OVL_ENOMEM ? TOOL_EXIT_RUNTIME : TOOL_EXIT_USAGE;
}

/* The median iteration of `mode` in a report, NaN where it did not run. */
static double median_of(const ovl_report *r, ovl_mode mode) {
  ovl_report_mode m;
  int i = ovl_report_find(r, mode);
  if (i < 0 || ovl_report_mode_get(r, (size_t)i, &m) != 0)
    return NAN;
  return m.median_s;
}

int sim_print_prediction(const sim_options *o, ovl_world *model,
                         const ovl_report *measured, unsigned modes) {
  const ovl_program *prog = ovl_report_program(measured);
  ovl_pipeline_opts pl = OVL_OPTS_INIT(ovl_pipeline_opts);
  ovl_run_opts ro = OVL_OPTS_INIT(ovl_run_opts);
  ovl_report *pred = NULL;
  ovl_report_summary ms, ps;
  ovl_error err = {0};
  char about[1024];
  double worst = 0;
  ovl_status st;
  pl.modes = modes;
  pl.run = 1;
  pl.trials = 1;
  ro.iters = 1;
  ro.graph = o->common.graph;
  pl.run_opts = &ro;
  st = ovl_pipeline_run(model, prog, &pl, &pred, &err);
  if (st != OVL_OK) {
    fprintf(stderr, "%s: --predict: %s\n", progname, err.msg);
    ovl_report_free(pred);
    return TOOL_EXIT_RUNTIME;
  }
  ovl_world_model_about(model, prog, about, sizeof about);
  printf("predicted by the model (%s):\n", about);
  printf("%-6s %14s %14s %8s\n", "mode", "measured(ms)", "predicted(ms)",
         "error");
  for (size_t i = 0; i < ovl_report_mode_count(measured); i++) {
    ovl_report_mode m;
    double p, e;
    ovl_report_mode_get(measured, i, &m);
    if (m.res == NULL)
      continue;
    p = median_of(pred, m.mode);
    e = (p - m.median_s) / m.median_s;
    if (fabs(e) > worst)
      worst = fabs(e);
    printf("%-6s %14.3f %14.3f %+7.1f%%\n", ovl_mode_name(m.mode),
           m.median_s * 1e3, p * 1e3, e * 100);
  }
  ovl_report_summary_get(measured, &ms);
  ovl_report_summary_get(pred, &ps);
  if (!isnan(ms.overlap_efficiency) && !isnan(ps.overlap_efficiency))
    printf("overlap efficiency: measured %.3f, predicted %.3f (%+.3f)\n",
           ms.overlap_efficiency, ps.overlap_efficiency,
           ps.overlap_efficiency - ms.overlap_efficiency);
  printf("prediction: largest error %.1f%% (%s)\n", worst * 100,
         worst <= 0.05 ? "within 5%" : "more than 5%");
  sim_print_explain(pred);
  ovl_report_free(pred);
  return -1;
}

/* Past 64 ranks (only the model goes there, with a schedule whose ranks
 * all run the same ops): the checks run on the schedule bound at 64
 * ranks, where the rank sets the checks keep end; every rank runs the
 * same ops, so what they find there they would find at any count. With
 * findings, they are printed as --races prints them, and the run stops
 * (exit 4). Returns -1 (then o->checks_at is 64), or the exit status. */
int sim_check_at_64(sim_options *o, const ovl_schedule *sched,
                    const ovl_bind_opts *bopts, const mem_plan *mem,
                    const ovl_pipeline_opts *pl) {
  ovl_bind_opts b = *bopts;
  ovl_pipeline_opts pc = *pl;
  ovl_program *p64 = NULL;
  ovl_report *rep = NULL;
  ovl_report_summary sum;
  ovl_error err = {0};
  int rc;
  b.nranks = 64;
  if ((rc = sim_bind_schedule(sched, &b, mem, &p64)) >= 0)
    return rc;
  pc.run = 0;
  pc.bind = &b;
  pc.progress = NULL;
  if (ovl_pipeline_run(NULL, p64, &pc, &rep, &err) != OVL_OK) {
    fprintf(stderr, "%s: %s\n", progname, err.msg);
    ovl_program_free(p64);
    return TOOL_EXIT_RUNTIME;
  }
  ovl_report_summary_get(rep, &sum);
  rc = -1;
  o->checks_at = 64;
  if (sum.races > 0 || sum.mismatches > 0 || sum.deadlocks > 0) {
    printf("checks at 64 ranks (past 64 they run there: every rank runs "
           "the same ops); nothing is predicted while they find "
           "something\n");
    if (sim_print_races(rep, false, stdout) < 0)
      rc = TOOL_EXIT_RUNTIME;
    else
      rc = SIM_EXIT_RACES;
    printf("check: ");
    sim_print_check_summary(rep, stdout);
    printf(" in %s (64 ranks)\n", ovl_program_filename(p64));
  }
  ovl_report_free(rep);
  ovl_program_free(p64);
  return rc;
}
