/*
 * The pipeline (docs/ARCHITECTURE.md, "The pipeline"): for each mode asked,
 * in the order sync, async, comp, comm, the mode's form of the program and
 * its checks (races and deadlocks per form, mismatches once for the
 * program as bound; every form checked before anything runs), the float64
 * reference (once, only where a checked mode fetches something), the run
 * and the comparison; then the summary figures. A mismatch or a deadlock
 * stops the pipeline after the checks: a run would hang or mix buffers.
 * Everything lands in one report, which report/json.c writes as JSON and
 * the tools format.
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
  report_mode modes[N_ORDER];
  bool races; /* made with the race check */
  /* The mismatches of the program as bound (NULL without the check, or
   * when no form asked keeps the communication: comp alone). */
  ovl_mismatches *mismatches;
  /* Why nothing ran (mismatches or deadlocks found), or NULL. */
  const char *not_run;
  bool replay; /* made with the race replay */
  /* The machine (with a run): copied from the world. */
  char *backend, *devices;
  char **device_names; /* [nranks] */
  int nranks;
  ovl_world_info info;
};

void ovl_report_free(ovl_report *r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->nmodes; i++) {
    report_mode *m = &r->modes[i];
    ovl_result_free(m->res);
    ovl_races_free(m->races);
    ovl_deadlocks_free(m->deadlocks);
    ovl_program_free(m->prog);
    ovl_check_release(&m->check);
    for (size_t t = 0; t < m->npast; t++)
      ovl_check_release(&m->past[t].check);
    free(m->past);
    ovl__replay_form_release(&m->replay);
  }
  if (r->device_names != NULL)
    for (int k = 0; k < r->nranks; k++)
      free(r->device_names[k]);
  free(r->device_names);
  ovl_mismatches_free(r->mismatches);
  free(r->backend);
  free(r->devices);
  free(r);
}

/* Sync and async numbers are compared with the reference, when something
 * is fetched; comp and comm numbers are not (half the work is missing). */
static bool mode_checked(const ovl_program *prog, ovl_mode mode) {
  return (mode == OVL_MODE_SYNC || mode == OVL_MODE_ASYNC) &&
         ovl_program_fetch_count(prog) > 0;
}

int ovl_pipeline_needs_reference(const ovl_program *prog,
                                 const ovl_pipeline_opts *o) {
  /* A replay may need it (whether it does depends on the races found). */
  if (prog == NULL || o == NULL || (!o->run && o->replay == 0) ||
      o->reference != NULL)
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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
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
  qsort(s, (size_t)n, sizeof *s, cmp_double);
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
    if (ovl__deadlock_check_graph(m->prog, o->run && o->run_opts.graph != 0,
                                  &m->deadlocks, e) != OVL_OK)
      return stage_failed(e, o, "deadlock check (%s)",
                          ovl_mode_name(m->mode));
    comm |= m->mode != OVL_MODE_COMP;
  }
  /* Every form that keeps the communication keeps all of it, in the same
   * order on every rank: one check of the program as bound. */
  if (comm && ovl_mismatch_check(r->prog, &r->mismatches, e) != OVL_OK)
    return stage_failed(e, o, "mismatch check");
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
    st = ovl__world_run(world, m->prog, &o->run_opts,
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
                              o->atol, o->replay_delay_us, &m->replay, e);
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
  size_t want = o->trials > 1 ? (size_t)o->trials : 1;
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

static ovl_status pipeline(ovl_report *r, ovl_world *world,
                           const ovl_pipeline_opts *o, ovl_error *e) {
  ovl_reference *own = NULL;
  const ovl_reference *ref = o->reference;
  ovl_status st = OVL_OK;

  if (o->races && (st = check_races(r, o, e)) != OVL_OK)
    return st;
  progress(o, r, OVL_PIPELINE_CHECKED, 0);
  /* Nothing runs after a mismatch or a deadlock (not even a replay). */
  if ((r->not_run = findings_stop(r)) != NULL)
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
    m->checked = mode_checked(r->prog, m->mode);
    if (m->checked && ref == NULL &&
        (o->run || (o->replay != 0 && replay_selects(m, o->replay)))) {
      st = ovl_reference_compute_rows(
          r->prog, ovl_world_nranks(world),
          o->check_rows == 0 ? OVL_REFERENCE_ROWS_DEFAULT
          : o->check_rows < 0 ? 0
                              : o->check_rows,
          &own, e);
      if (st != OVL_OK)
        return stage_failed(e, o, "reference");
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
  ovl_reference_free(own);
  return st;
}

ovl_status ovl_pipeline_run(ovl_world *world, const ovl_program *prog,
                            const ovl_pipeline_opts *opts, ovl_report **out,
                            ovl_error *err) {
  unsigned all = 0;
  ovl_error e = {0};
  ovl_report *r;
  ovl_status st = OVL_OK;

  for (size_t k = 0; k < N_ORDER; k++)
    all |= OVL_MODE_BIT(run_order[k]);
  if (out != NULL)
    *out = NULL;
  if (prog == NULL || opts == NULL || out == NULL ||
      ((opts->run || opts->replay != 0) && world == NULL))
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
  if (opts->run && opts->run_opts.graph && !ovl_world_has_graphs(world))
    return ovl__err_no_graphs(err, world->be->name);
  r = calloc(1, sizeof *r);
  if (r == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  r->prog = prog;
  r->races = opts->races != 0;
  r->replay = opts->replay != 0;
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

/* ------------------------------------------------------------------ */
/* Reading a report                                                    */
/* ------------------------------------------------------------------ */

const ovl_program *ovl_report_program(const ovl_report *r) {
  return r != NULL ? r->prog : NULL;
}

size_t ovl_report_mode_count(const ovl_report *r) {
  return r != NULL ? r->nmodes : 0;
}

int ovl_report_mode_get(const ovl_report *r, size_t i,
                        ovl_report_mode *info) {
  const report_mode *m;
  if (info == NULL)
    return -1;
  memset(info, 0, sizeof *info);
  if (r == NULL || i >= r->nmodes)
    return -1;
  m = &r->modes[i];
  info->mode = m->mode;
  info->prog = m->prog;
  info->races = m->races;
  info->deadlocks = m->deadlocks;
  info->res = m->res;
  if (m->res != NULL && m->checked)
    info->check = &m->check;
  else if (m->res == NULL && r->not_run != NULL)
    info->not_checked = r->not_run;
  else if (m->res == NULL)
    info->not_checked = "not run";
  else if (m->mode == OVL_MODE_COMP)
    info->not_checked = "comp-only numbers are not checked";
  else if (m->mode == OVL_MODE_COMM)
    info->not_checked = "comm-only numbers are not checked";
  else
    info->not_checked = "nothing fetched";
  info->total_s = m->total;
  info->median_s = m->median;
  info->min_s = m->min;
  info->max_s = m->max;
  return 0;
}

int ovl_report_find(const ovl_report *r, ovl_mode mode) {
  for (size_t i = 0; r != NULL && i < r->nmodes; i++)
    if (r->modes[i].mode == mode && r->modes[i].res != NULL)
      return (int)i;
  return -1;
}

int ovl_report_replay_get(const ovl_report *r, size_t i,
                          ovl_report_replay *out) {
  const ovl__replay_form *f;
  if (out == NULL)
    return -1;
  memset(out, 0, sizeof *out);
  out->plain_s = out->delay_us = NAN;
  if (r == NULL || i >= r->nmodes || !r->replay)
    return -1;
  f = &r->modes[i].replay;
  out->n = f->n;
  out->replays = f->items;
  out->plain_ran = f->plain_ran;
  out->plain_s = f->plain_ran ? f->plain_s : NAN;
  out->plain_checked = f->plain_checked;
  out->plain_mismatched = f->plain_mismatched;
  out->delay_us = f->delay_us;
  return 0;
}

/* Mode m in trial t (the past ones, then the one under way or the
 * last), or NULL where it has not run in t. *cur holds the latter. */
static const trial_mode *mode_trial(const report_mode *m, size_t t,
                                    trial_mode *cur) {
  if (t < m->npast)
    return &m->past[t];
  if (t > m->npast || m->res == NULL)
    return NULL;
  cur->total = m->total;
  cur->median = m->median;
  cur->min = m->min;
  cur->max = m->max;
  cur->check = m->check;
  return cur;
}

/* The total of `mode` in trial t, or NaN where it did not run. */
static double trial_total(const ovl_report *r, ovl_mode mode, size_t t) {
  for (size_t i = 0; i < r->nmodes; i++) {
    trial_mode cur;
    const trial_mode *tm;
    if (r->modes[i].mode != mode)
      continue;
    tm = mode_trial(&r->modes[i], t, &cur);
    return tm != NULL ? tm->total : NAN;
  }
  return NAN;
}

/* The summary figures of trial t: [0] speedup, [1] ideal speedup, [2]
 * overlap efficiency; NaN where the modes run do not give them. */
static void trial_figures(const ovl_report *r, size_t t, double f[3]) {
  double s = trial_total(r, OVL_MODE_SYNC, t);
  double a = trial_total(r, OVL_MODE_ASYNC, t);
  double cp = trial_total(r, OVL_MODE_COMP, t);
  double cm = trial_total(r, OVL_MODE_COMM, t);
  f[0] = f[1] = f[2] = NAN;
  if (!isnan(s) && !isnan(a) && a > 0)
    f[0] = s / a;
  if (!isnan(s) && !isnan(a) && !isnan(cp) && !isnan(cm)) {
    double hi = fmax(cp, cm), lo = fmin(cp, cm);
    if (hi > 0)
      f[1] = s / hi;
    if (lo > 0)
      f[2] = (s - a) / lo;
  }
}

/* Min, median and max of v[0, n), NaNs left out (v is sorted). */
static ovl_stat stat_of(double *v, size_t n) {
  ovl_stat st = {NAN, NAN, NAN};
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!isnan(v[i]))
      v[k++] = v[i];
  if (k == 0)
    return st;
  qsort(v, k, sizeof *v, cmp_double);
  st.min = v[0];
  st.max = v[k - 1];
  st.median = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
  return st;
}

size_t ovl_report_trial_count(const ovl_report *r) {
  return r != NULL ? r->ntrials : 0;
}

int ovl_report_trial_get(const ovl_report *r, size_t t, size_t i,
                         ovl_report_mode *info) {
  trial_mode cur;
  const trial_mode *tm;
  if (info == NULL)
    return -1;
  memset(info, 0, sizeof *info);
  if (r == NULL || i >= r->nmodes ||
      (tm = mode_trial(&r->modes[i], t, &cur)) == NULL)
    return -1;
  if (ovl_report_mode_get(r, i, info) != 0)
    return -1;
  if (t < r->modes[i].npast) {
    info->res = NULL;
    if (r->modes[i].checked)
      info->check = &r->modes[i].past[t].check;
  }
  info->total_s = tm->total;
  info->median_s = tm->median;
  info->min_s = tm->min;
  info->max_s = tm->max;
  return 0;
}

void ovl_report_trials_get(const ovl_report *r, ovl_report_trials *out) {
  const ovl_stat none = {NAN, NAN, NAN};
  size_t n;
  double *v;
  if (out == NULL)
    return;
  memset(out, 0, sizeof *out);
  for (int k = 0; k < OVL__MODE_COUNT; k++)
    out->total_s[k] = none;
  out->speedup = out->ideal_speedup = out->overlap_efficiency = none;
  out->speedup_spread = NAN;
  if (r == NULL || r->ntrials == 0)
    return;
  n = r->ntrials;
  out->n = n;
  /* Out of memory leaves the figures NaN, as if no trial gave them. */
  if ((v = malloc(n * sizeof *v)) == NULL)
    return;
  for (size_t i = 0; i < r->nmodes; i++) {
    for (size_t t = 0; t < n; t++)
      v[t] = trial_total(r, r->modes[i].mode, t);
    out->total_s[r->modes[i].mode] = stat_of(v, n);
  }
  for (int f = 0; f < 3; f++) {
    ovl_stat *dst = f == 0   ? &out->speedup
                    : f == 1 ? &out->ideal_speedup
                             : &out->overlap_efficiency;
    for (size_t t = 0; t < n; t++) {
      double fig[3];
      trial_figures(r, t, fig);
      v[t] = fig[f];
    }
    *dst = stat_of(v, n);
  }
  if (out->speedup.median > 0)
    out->speedup_spread =
        (out->speedup.max - out->speedup.min) / out->speedup.median;
  free(v);
}

void ovl_report_trial_summary_get(const ovl_report *r, size_t t,
                                  ovl_report_summary *out) {
  double f[3];
  if (out == NULL)
    return;
  memset(out, 0, sizeof *out);
  out->speedup = out->ideal_speedup = out->overlap_efficiency = NAN;
  if (r == NULL || t >= r->ntrials)
    return;
  trial_figures(r, t, f);
  out->speedup = f[0];
  out->ideal_speedup = f[1];
  out->overlap_efficiency = f[2];
  for (size_t i = 0; i < r->nmodes; i++) {
    const report_mode *m = &r->modes[i];
    trial_mode cur;
    const trial_mode *tm = mode_trial(m, t, &cur);
    if (tm != NULL) {
      out->mismatched += tm->check.mismatched;
      out->nonfinite += tm->check.nonfinite;
    }
    if (m->races != NULL)
      out->races += ovl_races_count(m->races) + ovl_races_more(m->races);
  }
}

void ovl_report_summary_get(const ovl_report *r, ovl_report_summary *out) {
  ovl_report_trials tr;
  if (out == NULL)
    return;
  memset(out, 0, sizeof *out);
  out->speedup = out->ideal_speedup = out->overlap_efficiency = NAN;
  if (r == NULL)
    return;
  /* One trial: its figures; several: their medians. */
  ovl_report_trials_get(r, &tr);
  out->speedup = tr.speedup.median;
  out->ideal_speedup = tr.ideal_speedup.median;
  out->overlap_efficiency = tr.overlap_efficiency.median;
  for (size_t i = 0; i < r->nmodes; i++) {
    const report_mode *m = &r->modes[i];
    out->mismatched += m->check.mismatched;
    out->nonfinite += m->check.nonfinite;
    for (size_t t = 0; t < m->npast; t++) {
      out->mismatched += m->past[t].check.mismatched;
      out->nonfinite += m->past[t].check.nonfinite;
    }
    if (m->races != NULL)
      out->races += ovl_races_count(m->races) + ovl_races_more(m->races);
    if (m->deadlocks != NULL)
      out->deadlocks += ovl_deadlocks_count(m->deadlocks) +
                        ovl_deadlocks_more(m->deadlocks);
  }
  if (r->mismatches != NULL)
    out->mismatches = ovl_mismatches_count(r->mismatches) +
                      ovl_mismatches_more(r->mismatches);
}

const ovl_mismatches *ovl_report_mismatches(const ovl_report *r) {
  return r != NULL ? r->mismatches : NULL;
}

const char *ovl_report_not_run(const ovl_report *r) {
  return r != NULL ? r->not_run : NULL;
}

const char *ovl_report_result(const ovl_report *r) {
  ovl_report_summary s;
  ovl_report_summary_get(r, &s);
  if (s.nonfinite > 0)
    return "FAIL: non-finite values";
  if (s.mismatched > 0)
    return "FAIL: numeric mismatch";
  if (s.mismatches > 0 && s.deadlocks > 0)
    return "FAIL: mismatches and deadlocks";
  if (s.mismatches > 0)
    return "FAIL: mismatches";
  if (s.deadlocks > 0)
    return "FAIL: deadlocks";
  return s.races > 0 ? "FAIL: races" : "PASS";
}

void ovl_report_machine_get(const ovl_report *r, ovl_report_machine *out) {
  if (out == NULL)
    return;
  memset(out, 0, sizeof *out);
  if (r == NULL || r->backend == NULL)
    return;
  out->backend = r->backend;
  out->nranks = r->nranks;
  out->devices = r->devices;
  out->device_names = (const char *const *)r->device_names;
  out->info = r->info;
}

ovl_status ovl_report_op_times(const ovl_report *r, size_t i,
                               ovl_op_time **rows, size_t *nrows,
                               ovl_error *err) {
  const report_mode *m;
  const ovl_program *p;
  size_t nops, n = 0;
  int iters, nranks;
  bool *done;
  ovl_op_time *g;

  if (rows != NULL)
    *rows = NULL;
  if (nrows != NULL)
    *nrows = 0;
  if (r == NULL || i >= r->nmodes || rows == NULL || nrows == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_report_op_times: bad argument");
  m = &r->modes[i];
  if (m->res == NULL || ovl_result_op_times(m->res, 0) == NULL)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_report_op_times: the %s run did not time its ops",
                    ovl_mode_name(m->mode));
  p = m->prog;
  nops = ovl_program_op_count(p);
  iters = ovl_result_iters(m->res);
  nranks = ovl_result_nranks(m->res);
  done = calloc(nops ? nops : 1, sizeof *done);
  g = malloc((nops ? nops : 1) * sizeof *g);
  if (done == NULL || g == NULL) {
    free(done);
    free(g);
    return ovl__err(err, OVL_ENOMEM, "op times: out of memory");
  }
  /* Each row gathers the ops of its (line, name, stream), in program
   * order of their first op. */
  for (size_t k = 0; k < nops; k++) {
    const char *name, *name2;
    int line, line2, stream, stream2;
    ovl_program_op(p, k, &name, &line, &stream);
    if (done[k] || stream < 0)
      continue;
    g[n].line = line;
    g[n].op = name;
    g[n].stream = stream;
    g[n].count = 0;
    g[n].sec_per_iter = 0;
    /* Averaged over the ranks that run some op of the row (ranks=[...]). */
    uint64_t ran = 0;
    int nran = 0;
    for (size_t j = k; j < nops; j++) {
      ovl_program_op(p, j, &name2, &line2, &stream2);
      if (line2 != line || stream2 != stream || strcmp(name, name2) != 0)
        continue;
      done[j] = true;
      g[n].count++;
      ran |= p->ops[j].ranks;
      for (int rk = 0; rk < nranks; rk++)
        g[n].sec_per_iter += ovl_result_op_times(m->res, rk)[j];
    }
    for (int rk = 0; rk < nranks; rk++)
      nran += (ran >> rk) & 1;
    if (nran > 0)
      g[n].sec_per_iter /= (double)nran * iters;
    g[n].stream_name = ovl_program_stream_name(p, stream);
    n++;
  }
  free(done);
  *rows = g;
  *nrows = n;
  return OVL_OK;
}
