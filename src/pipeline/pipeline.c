/*
 * The pipeline's stages (docs/ARCHITECTURE.md, "The pipeline"): for each
 * mode asked, in the order sync, async, comp, comm, the mode's form of the
 * program and its checks (races and deadlocks per form, mismatches once
 * for the program as bound; every form checked before anything runs), the
 * float64 reference (once, only where a checked mode fetches something),
 * the race replay when asked, the run and the comparison, trial after
 * trial. A mismatch or a deadlock stops the pipeline after the checks: a
 * run would hang or mix buffers. Everything lands in one report
 * (report.c, which also gives its summary figures), which report/json.c
 * writes as JSON and the tools format.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* The order the modes run in, whatever the order of their bits. */
static const ovl_mode run_order[] = {OVL_MODE_SYNC, OVL_MODE_ASYNC,
                                     OVL_MODE_COMP, OVL_MODE_COMM};
#define N_ORDER (sizeof run_order / sizeof run_order[0])
_Static_assert(N_ORDER == OVL__MODE_COUNT, "a report has room for each mode");

/* Sync and async numbers are compared with the reference, when something
 * is fetched; comp and comm numbers are not (half the work is missing). */
static bool mode_checked(const ovl_program *prog, ovl_mode mode) {
  return (mode == OVL_MODE_SYNC || mode == OVL_MODE_ASYNC) &&
         ovl_program_fetch_count(prog) > 0;
}

int ovl_pipeline_needs_reference(const ovl_program *prog,
                                 const ovl_pipeline_opts *opts) {
  ovl_pipeline_opts po, *o = &po;
  if (prog == NULL || opts == NULL ||
      ovl__opts_read(&po, sizeof po, opts, "ovl_pipeline_opts", NULL) !=
          OVL_OK)
    return 0;
  /* A replay may need it (whether it does depends on the races found). */
  if ((!o->run && o->replay == 0) || o->reference != NULL)
    return 0;
  for (size_t k = 0; k < N_ORDER; k++)
    if ((o->modes & OVL_MODE_BIT(run_order[k])) &&
        mode_checked(prog, run_order[k]))
      return 1;
  return 0;
}

/* A stage failed with *e: say which (or the caller's label). */
static ovl_status stage_failed(ovl_error *e, const ovl_pipeline_opts *o,
                               const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ovl_status stage_failed(ovl_error *e, const ovl_pipeline_opts *o,
                               const char *fmt, ...) {
  char stage[128];
  va_list ap;
  if (o->label != NULL) {
    ovl__err_prefix(e, "%s: ", o->label);
  } else {
    va_start(ap, fmt);
    vsnprintf(stage, sizeof stage, fmt, ap);
    va_end(ap);
    ovl__err_prefix(e, "%s: ", stage);
  }
  return e->status;
}

/* Sum, median, min and max of the timed iterations. */
static bool summarise_times(report_mode *m) {
  int n = ovl_result_iters(m->res);
  const double *t = ovl_result_times(m->res);
  double *s = malloc((size_t)n * sizeof *s);
  if (s == NULL)
    return false;
  m->total = 0;
  for (int i = 0; i < n; i++)
    m->total += t[i];
  memcpy(s, t, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, ovl__report_cmp_double);
  m->min = s[0];
  m->max = s[n - 1];
  m->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return true;
}

/* The machine of the world, for the report (JSON's "machine"). */
static ovl_status copy_machine(ovl_report *r, const ovl_world *world,
                               ovl_error *err) {
  bool ok;
  r->nranks = ovl_world_nranks(world);
  r->backend = ovl__strdup(ovl_world_backend_name(world));
  r->devices = ovl__strdup(ovl_world_devices(world));
  r->device_names = calloc((size_t)r->nranks + 1, sizeof *r->device_names);
  ok = r->backend != NULL && r->devices != NULL && r->device_names != NULL;
  for (int k = 0; ok && k < r->nranks; k++)
    ok = (r->device_names[k] =
              ovl__strdup(ovl_world_device_name(world, k))) != NULL;
  if (!ok)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  ovl_world_info_get(world, &r->info);
  return OVL_OK;
}

static void progress(const ovl_pipeline_opts *o, const ovl_report *r,
                     ovl_pipeline_event ev, size_t i) {
  if (o->progress != NULL)
    o->progress(o->progress_ctx, r, ev, i);
}

/* Every mode's form race-checked (and its fixes re-checked, given the
 * schedule) and deadlock-checked, and the program's mismatches, before
 * anything runs. */
static ovl_status check_races(ovl_report *r, const ovl_pipeline_opts *o,
                              ovl_error *e) {
  bool comm = false;
  for (size_t i = 0; i < r->nmodes; i++) {
    report_mode *m = &r->modes[i];
    ovl_status st = ovl_program_transform(r->prog, m->mode, &m->prog, e);
    if (st == OVL_OK)
      st = ovl_race_check(m->prog, &m->races, e);
    if (st == OVL_OK && o->schedule != NULL)
      st = ovl_races_check_fixes(m->races, m->prog, o->schedule, o->bind, e);
    if (st != OVL_OK)
      return stage_failed(e, o, "race check (%s)", ovl_mode_name(m->mode));
    /* A run as graphs waits at each host sync for every stream. */
    if (ovl__deadlock_check_graph(m->prog, o->run && o->run_opts->graph != 0,
                                  &m->deadlocks, e) != OVL_OK)
      return stage_failed(e, o, "deadlock check (%s)",
                          ovl_mode_name(m->mode));
    comm |= m->mode != OVL_MODE_COMP;
  }
  /* Every form that keeps the communication keeps all of it, in the same
   * order on every rank: one check of the program as bound. */
  if (comm && ovl_mismatch_check(r->prog, &r->mismatches, e) != OVL_OK)
    return stage_failed(e, o, "mismatch check");
  /* Given the schedule, the fixes of the mismatches and deadlocks are
   * re-checked against it, as the races' are. */
  if (o->schedule != NULL) {
    ovl__form_checks f[OVL__MODE_COUNT];
    for (size_t i = 0; i < r->nmodes; i++) {
      f[i].mode = r->modes[i].mode;
      f[i].prog = r->modes[i].prog;
      f[i].races = r->modes[i].races;
      f[i].deadlocks = r->modes[i].deadlocks;
    }
    if (ovl__order_check_fixes(r->prog, r->mismatches, f, r->nmodes,
                               o->run && o->run_opts->graph != 0,
                               o->schedule, o->bind, e) != OVL_OK)
      return stage_failed(e, o, "fix check");
  }
  /* A bug found in several forms is one. */
  if (ovl__report_findings(r, e) != OVL_OK)
    return stage_failed(e, o, "check");
  return OVL_OK;
}

/* Why the checks stop the pipeline, or NULL. */
static const char *findings_stop(const ovl_report *r) {
  bool dl = false, mm = r->mismatches != NULL &&
                         (ovl_mismatches_count(r->mismatches) > 0 ||
                          ovl_mismatches_more(r->mismatches) > 0);
  for (size_t i = 0; i < r->nmodes; i++)
    dl |= r->modes[i].deadlocks != NULL &&
          (ovl_deadlocks_count(r->modes[i].deadlocks) > 0 ||
           ovl_deadlocks_more(r->modes[i].deadlocks) > 0);
  if (mm && dl)
    return "mismatches and deadlocks found: a run would hang";
  if (mm)
    return "mismatches found: a run would hang or mix buffers";
  if (dl)
    return "deadlocks found: a run would hang";
  return NULL;
}

/* Mode m's trial so far becomes a past one (its comparison moves there,
 * its run is freed), so that the next trial's run takes its place. */
static bool keep_past_trial(report_mode *m) {
  trial_mode *p = realloc(m->past, (m->npast + 1) * sizeof *p);
  if (p == NULL)
    return false;
  m->past = p;
  p[m->npast].total = m->total;
  p[m->npast].median = m->median;
  p[m->npast].min = m->min;
  p[m->npast].max = m->max;
  p[m->npast].check = m->check;
  m->npast++;
  memset(&m->check, 0, sizeof m->check);
  ovl_result_free(m->res);
  m->res = NULL;
  m->total = m->median = m->min = m->max = NAN;
  return true;
}

/* Mode i: its form (unless the race check made it), the run, the
 * comparison. */
static ovl_status run_mode(ovl_report *r, size_t i, ovl_world *world,
                           const ovl_reference *ref,
                           const ovl_pipeline_opts *o, ovl_error *e) {
  report_mode *m = &r->modes[i];
  ovl_status st = OVL_OK;
  if (m->res != NULL && !keep_past_trial(m))
    return ovl__err(e, OVL_ENOMEM, "out of memory");
  if (m->prog == NULL)
    st = ovl_program_transform(r->prog, m->mode, &m->prog, e);
  /* The run compares its numbers where they are (run/compare.c). */
  ovl__compare cmp = {r->prog, ref, o->rtol, o->atol, &m->check, OVL_OK, {0}};
  if (st == OVL_OK)
    st = ovl__world_run(world, m->prog, o->run_opts,
                        m->checked ? &cmp : NULL, &m->res, e);
  if (st == OVL_OK && !summarise_times(m))
    st = ovl__err(e, OVL_ENOMEM, "out of memory");
  if (st != OVL_OK)
    return stage_failed(e, o, "%s run failed", ovl_mode_name(m->mode));
  if (m->checked && cmp.status != OVL_OK) {
    *e = cmp.err;
    return stage_failed(e, o, "check");
  }
  return OVL_OK;
}

/* Whether the replay asks for a race of mode m. */
static bool replay_selects(const report_mode *m, long which) {
  size_t n = m->races != NULL ? ovl_races_count(m->races) : 0;
  return which == OVL_REPLAY_ALL ? n > 0
                                 : which >= 1 && (size_t)which <= n;
}

/* Race K of the replay must be in some form: else say what there is. */
static ovl_status check_replay_race(const ovl_report *r,
                                    const ovl_pipeline_opts *o,
                                    ovl_error *e) {
  char list[512];
  size_t off = 0;
  if (o->replay == OVL_REPLAY_ALL)
    return OVL_OK;
  for (size_t i = 0; i < r->nmodes; i++)
    if (replay_selects(&r->modes[i], o->replay))
      return OVL_OK;
  list[0] = '\0';
  for (size_t i = 0; i < r->nmodes; i++)
    off += ovl_races_count(r->modes[i].races);
  if (off == 0) {
    ovl__err(e, OVL_EINVAL, "there is no race %ld to replay: no races were "
             "found", o->replay);
    return stage_failed(e, o, "replay");
  }
  off = 0;
  for (size_t i = 0; i < r->nmodes && off < sizeof list; i++) {
    size_t n = ovl_races_count(r->modes[i].races);
    const char *name = ovl_mode_name(r->modes[i].mode);
    if (n == 0)
      off += (size_t)snprintf(list + off, sizeof list - off,
                              "%sthe %s form has no races", i ? "; " : "",
                              name);
    else if (n == 1)
      off += (size_t)snprintf(list + off, sizeof list - off,
                              "%sthe %s form has race 1 only", i ? "; " : "",
                              name);
    else
      off += (size_t)snprintf(list + off, sizeof list - off,
                              "%sthe %s form has races 1 to %zu",
                              i ? "; " : "", name, n);
  }
  ovl__err(e, OVL_EINVAL, "there is no race %ld to replay: %s", o->replay,
           list);
  return stage_failed(e, o, "replay");
}

/* Why mode m's numbers are not compared with the reference, or NULL. */
static const char *not_compared(const ovl_program *prog, ovl_mode mode) {
  if (mode_checked(prog, mode))
    return NULL;
  if (mode == OVL_MODE_COMP)
    return "comp-only numbers are not compared with the reference";
  if (mode == OVL_MODE_COMM)
    return "comm-only numbers are not compared with the reference";
  return "nothing is fetched";
}

/* Every form's races asked for, replayed (ovl.h, "Race replay"). */
static ovl_status replay_races(ovl_report *r, ovl_world *world,
                               const ovl_reference *ref,
                               const ovl_pipeline_opts *o, ovl_error *e) {
  for (size_t i = 0; i < r->nmodes; i++) {
    report_mode *m = &r->modes[i];
    ovl_status st;
    if (!replay_selects(m, o->replay))
      continue;
    st = ovl__replay_form_run(world, r->prog, m->prog, m->races, o->replay,
                              not_compared(r->prog, m->mode), ref, o->rtol,
                              o->atol, o->replay_delay_us,
                              o->run_opts->trace != 0, &m->replay, e);
    if (st != OVL_OK)
      return stage_failed(e, o, "replay (%s)", ovl_mode_name(m->mode));
  }
  return OVL_OK;
}

/* The runs: every mode in turn, as many trials as asked (and, with a
 * budget, as fit in it). */
static ovl_status run_trials(ovl_report *r, ovl_world *world,
                             const ovl_reference *ref,
                             const ovl_pipeline_opts *o, ovl_error *e) {
  /* The model gives the same times every time: one trial. */
  size_t want = o->trials > 1 && ovl__model_of(world->be, world->bw) == NULL
                    ? (size_t)o->trials
                    : 1;
  double spent = 0;
  ovl_status st = OVL_OK;
  for (size_t t = 0; t < want && st == OVL_OK; t++) {
    double t0;
    /* The next trial at the mean time of those so far must fit. */
    if (t > 0 && o->trial_budget_s > 0 &&
        spent + spent / (double)t > o->trial_budget_s)
      break;
    r->ntrials = t + 1;
    t0 = ovl__now();
    for (size_t i = 0; i < r->nmodes && st == OVL_OK; i++) {
      st = run_mode(r, i, world, ref, o, e);
      if (st == OVL_OK)
        progress(o, r, OVL_PIPELINE_RAN, i);
    }
    spent += ovl__now() - t0;
    /* More than one process: process 0's clock decides, so that every
     * process runs as many trials. */
    if (world->lay.procs != NULL && st == OVL_OK)
      st = ovl__procs_bcast(world->lay.procs, &spent, sizeof spent, 0, e);
  }
  return st;
}

/* Per op of the program as bound (its src), its index in mode m's form,
 * or -1 (*map: r->prog->nops entries, malloc'd); *map NULL where m did
 * not run with op times. False: out of memory. */
static bool src_map(const ovl_report *r, int m, int32_t **map) {
  const report_mode *rm;
  *map = NULL;
  if (m < 0)
    return true;
  rm = &r->modes[m];
  if (rm->res == NULL || rm->res->op_times == NULL || rm->res->predicted)
    return true;
  if ((*map = malloc((r->prog->nops + 1) * sizeof **map)) == NULL)
    return false;
  for (size_t i = 0; i < r->prog->nops; i++)
    (*map)[i] = -1;
  for (size_t i = 0; i < rm->prog->nops; i++)
    if (rm->prog->ops[i].src < r->prog->nops)
      (*map)[rm->prog->ops[i].src] = (int32_t)i;
  return true;
}

/* A real run's own time of each work primitive (run/explain.c: the
 * contention of its explain), from the comp-only form's op times
 * (kernels, delays) and the comm-only form's (communication), where they
 * ran with op times; given to every traced result of the last trial. */
static ovl_status attach_alone(ovl_report *r, ovl_error *e) {
  int ic = ovl_report_find(r, OVL_MODE_COMP);
  int im = ovl_report_find(r, OVL_MODE_COMM);
  int32_t *cmap = NULL, *mmap = NULL;
  ovl_status st = OVL_OK;
  if (!src_map(r, ic, &cmap) || !src_map(r, im, &mmap))
    st = ovl__err(e, OVL_ENOMEM, "out of memory");
  for (size_t i = 0; st == OVL_OK && (cmap || mmap) && i < r->nmodes; i++) {
    report_mode *m = &r->modes[i];
    const ovl_program *prog = m->prog;
    size_t n;
    double *alone;
    if (m->res == NULL || m->res->spans == NULL || m->res->predicted)
      continue;
    n = (size_t)m->res->nranks * prog->nprims;
    if ((alone = malloc((n ? n : 1) * sizeof *alone)) == NULL) {
      st = ovl__err(e, OVL_ENOMEM, "out of memory");
      break;
    }
    for (size_t k = 0; k < n; k++)
      alone[k] = NAN;
    for (int rank = 0; rank < m->res->nranks; rank++)
      for (size_t j = 0; j < prog->nops; j++) {
        const ovl__op *op = &prog->ops[j];
        for (size_t p = prog->prim_first[j]; p < prog->prim_first[j + 1];
             p++) {
          const ovl__prim *pr = &prog->prims[p];
          bool comm = ovl__prim_is_comm(pr);
          const int32_t *map = comm ? mmap : cmap;
          const ovl_result *src = comm ? r->modes[im].res : r->modes[ic].res;
          int32_t k;
          if (!ovl__prim_works(pr) || map == NULL || op->src >= r->prog->nops ||
              (k = map[op->src]) < 0)
            continue;
          alone[(size_t)rank * prog->nprims + p] =
              src->op_times[(size_t)rank * src->nops + (size_t)k] / src->iters;
        }
      }
    st = ovl__result_set_alone(m->res, alone, e);
    free(alone);
  }
  free(cmap);
  free(mmap);
  return st;
}

static ovl_status pipeline(ovl_report *r, ovl_world *world,
                           const ovl_pipeline_opts *o, ovl_error *e) {
  ovl_reference *own = NULL;
  const ovl_reference *ref = o->reference;
  const ovl__model *model =
      world != NULL ? ovl__model_of(world->be, world->bw) : NULL;
  ovl_status st = OVL_OK;

  if (model != NULL && (o->run || o->replay != 0)) {
    /* A profile is of one schedule; a replay needs numbers. */
    if ((st = ovl__model_check(model, r->prog, e)) != OVL_OK)
      return stage_failed(e, o, "model");
    if (o->replay != 0) {
      ovl__err(e, OVL_EINVAL, "the model backend computes no numbers: a "
                              "replay needs a real backend (cpu, cuda)");
      return stage_failed(e, o, "replay");
    }
  }
  if (o->races && (st = check_races(r, o, e)) != OVL_OK)
    return st;
  /* Nothing runs after a mismatch or a deadlock (not even a replay): the
   * progress callback hears it with the checks (ovl_report_not_run). */
  r->not_run = findings_stop(r);
  progress(o, r, OVL_PIPELINE_CHECKED, 0);
  if (r->not_run != NULL)
    return OVL_OK;
  if (o->replay != 0 && (st = check_replay_race(r, o, e)) != OVL_OK)
    return st;
  if (!o->run && o->replay == 0)
    return OVL_OK;

  /* Nothing fetched, nothing to compare: no reference either (a sweep of
   * a 1 GiB collective need not interpret it in float64). The runs and
   * the replays share it. */
  for (size_t i = 0; i < r->nmodes; i++) {
    report_mode *m = &r->modes[i];
    /* The model computes nothing: nothing to compare. */
    m->checked = model == NULL && mode_checked(r->prog, m->mode);
    if (m->checked && ref == NULL &&
        (o->run || (o->replay != 0 && replay_selects(m, o->replay)))) {
      st = ovl_reference_compute_rows(
          r->prog, ovl_world_nranks(world),
          o->check_rows == 0 ? OVL_REFERENCE_ROWS_DEFAULT
          : o->check_rows < 0 ? 0
                              : o->check_rows,
          &own, e);
      /* The reference's own errors name it after their place
       * ("FILE:L:C: reference: ..."): not twice. */
      if (st != OVL_OK && (o->label != NULL ||
                           strstr(e->msg, ": reference: ") == NULL))
        return stage_failed(e, o, "reference");
      if (st != OVL_OK)
        return st;
      ref = own;
    }
  }
  if (o->replay != 0 && (st = replay_races(r, world, ref, o, e)) != OVL_OK) {
    ovl_reference_free(own);
    return st;
  }
  if (!o->run) {
    ovl_reference_free(own);
    return OVL_OK;
  }
  progress(o, r, OVL_PIPELINE_READY, 0);
  st = run_trials(r, world, ref, o, e);
  if (st == OVL_OK)
    st = attach_alone(r, e);
  ovl_reference_free(own);
  return st;
}

/* The caller's options, whole: the pipeline's and the runs' (NULL: one
 * timed iteration), each as large as this library knows it. */
static ovl_status read_opts(const ovl_pipeline_opts *in, ovl_pipeline_opts *o,
                            ovl_run_opts *run, ovl_error *err) {
  ovl_status st = ovl__opts_read(o, sizeof *o, in, "ovl_pipeline_opts", err);
  if (st != OVL_OK)
    return st;
  st = ovl__opts_read(run, sizeof *run, o->run_opts,
                      "ovl_pipeline_opts.run_opts", err);
  if (st == OVL_OK && o->run_opts == NULL)
    run->iters = 1;
  o->run_opts = run;
  return st;
}

ovl_status ovl_pipeline_run(ovl_world *world, const ovl_program *prog,
                            const ovl_pipeline_opts *opts_in,
                            ovl_report **out, ovl_error *err) {
  unsigned all = 0;
  ovl_error e = {0};
  ovl_pipeline_opts po, *opts = &po;
  ovl_run_opts ro;
  ovl_report *r;
  ovl_status st = OVL_OK;

  for (size_t k = 0; k < N_ORDER; k++)
    all |= OVL_MODE_BIT(run_order[k]);
  if (out != NULL)
    *out = NULL;
  if (prog == NULL || opts_in == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_pipeline_run: bad argument");
  if ((st = read_opts(opts_in, &po, &ro, err)) != OVL_OK)
    return st;
  if ((opts->run || opts->replay != 0) && world == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_pipeline_run: bad argument");
  if (opts->replay != 0 &&
      (!opts->races || (opts->replay != OVL_REPLAY_ALL && opts->replay < 1)))
    return ovl__err(err, OVL_EINVAL,
                    "ovl_pipeline_run: replay %ld: replay needs the race "
                    "check, and a race number >= 1 or OVL_REPLAY_ALL",
                    opts->replay);
  if (!(opts->replay_delay_us >= 0) || opts->replay_delay_us > 1e12)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_pipeline_run: replay delay %g us: must be between "
                    "0 (the default) and 1e12",
                    opts->replay_delay_us);
  /* A stream waiting for the delayed one would time out. */
  if (opts->replay != 0 && world != NULL &&
      opts->replay_delay_us >= world->timeout_s * 1e6)
    return ovl__err(err, OVL_EINVAL,
                    "replay: a delay of %g s is not shorter than the "
                    "timeout (%g s): a stream waiting for the delayed one "
                    "would time out",
                    opts->replay_delay_us * 1e-6, world->timeout_s);
  if ((opts->modes & ~all) != 0)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_pipeline_run: unknown mode bits 0x%x",
                    opts->modes & ~all);
  if (opts->trials < 0 || !(opts->trial_budget_s >= 0))
    return ovl__err(err, OVL_EINVAL,
                    "ovl_pipeline_run: trials %d, budget %g s: must be >= 0",
                    opts->trials, opts->trial_budget_s);
  /* Before the checks and the reference, which may take long. */
  if (opts->run && opts->run_opts->graph && !ovl_world_has_graphs(world))
    return ovl__err_no_graphs(err, world->be->name);
  r = calloc(1, sizeof *r);
  if (r == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  r->prog = prog;
  r->races = opts->races != 0;
  r->replay = opts->replay != 0;
  /* What it ran with, kept (the caller's objects are the caller's). */
  r->run = ro;
  r->opts = po;
  r->opts.run_opts = &r->run;
  r->opts.reference = NULL;
  r->opts.label = NULL;
  r->opts.progress = NULL;
  r->opts.progress_ctx = NULL;
  r->opts.schedule = NULL;
  r->opts.bind = NULL;
  if (world != NULL) {
    r->timeout_s = world->timeout_s;
    r->tuning = world->tuning;
  }
  for (size_t k = 0; k < N_ORDER; k++) {
    report_mode *m = &r->modes[r->nmodes];
    if (!(opts->modes & OVL_MODE_BIT(run_order[k])))
      continue;
    m->mode = run_order[k];
    m->total = m->median = m->min = m->max = NAN;
    m->replay.delay_us = NAN;
    r->nmodes++;
  }
  if (opts->run || opts->replay != 0)
    st = copy_machine(r, world, &e);
  if (st == OVL_OK)
    st = pipeline(r, world, opts, &e);
  if (st != OVL_OK) {
    ovl_report_free(r);
    if (err != NULL)
      *err = e;
    return st;
  }
  *out = r;
  return OVL_OK;
}
