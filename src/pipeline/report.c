/*
 * The report of a pipeline (pipeline/pipeline.h; ovl.h, "The pipeline"):
 * its lifetime and what the public API reads of it: per mode its form,
 * checks, run, comparison and times, per trial the same, the summary
 * figures (speedup, ideal speedup, overlap efficiency) of each trial and
 * their min, median and max, the counts of what was found, the machine,
 * and the op times of a run grouped by source line. pipeline.c fills it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

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

int ovl__report_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

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
  if (m->res != NULL && m->res->predicted)
    info->not_checked = "predicted: nothing is computed";
  else if (m->res != NULL && m->checked)
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
  qsort(v, k, sizeof *v, ovl__report_cmp_double);
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
  double small[64], *v = small;
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
  /* Up to 64 trials on the stack, so that a report's figures (and its
   * JSON) never depend on memory; beyond, out of memory leaves the
   * figures NaN, as if no trial gave them. */
  if (n > sizeof small / sizeof small[0] &&
      (v = malloc(n * sizeof *v)) == NULL)
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
  if (v != small)
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
  }
  out->races = r->races_found;
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
  }
  /* Each bug once, whatever the forms it is found in. */
  out->races = r->races_found;
  out->deadlocks = r->deadlocks_found;
  if (r->mismatches != NULL)
    out->mismatches = ovl_mismatches_count(r->mismatches) +
                      ovl_mismatches_more(r->mismatches);
}

/* The text of mode m's findings (its races and deadlocks), or NULL. */
static char *findings_text(const ovl_report *r, const report_mode *m) {
  ovl__sbuf b = {0};
  char *t = NULL;
  if (m->races != NULL && ovl_races_format(m->races, r->prog, 0, &t,
                                           NULL) == OVL_OK) {
    ovl__sb_puts(&b, t);
    free(t);
  }
  t = NULL;
  if (m->deadlocks != NULL &&
      ovl_deadlocks_format(m->deadlocks, r->prog, 0, &t, NULL) == OVL_OK) {
    ovl__sb_puts(&b, t);
    free(t);
  }
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  return b.s != NULL ? b.s : ovl__strdup("");
}

ovl_status ovl__report_findings(ovl_report *r, ovl_error *err) {
  ovl__form_checks f[OVL__MODE_COUNT];
  char *text[OVL__MODE_COUNT] = {NULL};
  bool ok = true;
  for (size_t i = 0; i < r->nmodes; i++) {
    f[i].mode = r->modes[i].mode;
    f[i].prog = r->modes[i].prog;
    f[i].races = r->modes[i].races;
    f[i].deadlocks = r->modes[i].deadlocks;
  }
  if (!ovl__findings_across_forms(f, r->nmodes, &r->races_found,
                                  &r->deadlocks_found))
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  /* Forms whose findings read the same, to be printed once. */
  for (size_t i = 0; ok && i < r->nmodes; i++) {
    ok = (text[i] = findings_text(r, &r->modes[i])) != NULL;
    r->same[i] = (int)i;
    for (size_t j = 0; ok && j < i; j++)
      if (r->same[j] == (int)j && strcmp(text[i], text[j]) == 0) {
        r->same[i] = (int)j;
        break;
      }
  }
  for (size_t i = 0; i < r->nmodes; i++)
    free(text[i]);
  return ok ? OVL_OK : ovl__err(err, OVL_ENOMEM, "out of memory");
}

int ovl_report_same_findings(const ovl_report *r, size_t i) {
  if (r == NULL || i >= r->nmodes || !r->races)
    return -1;
  return r->same[i];
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

/* ------------------------------------------------------------------ */
/* Timelines                                                           */
/* ------------------------------------------------------------------ */

/* The ranks of race i of `races` as a mask. */
static uint64_t race_ranks(const ovl_races *races, size_t i) {
  ovl_race_info ri;
  uint64_t m = 0;
  ovl_races_get(races, i, &ri);
  for (int k = 0; k < ri.nranks; k++)
    if (ri.ranks[k] >= 0 && ri.ranks[k] < 64)
      m |= (uint64_t)1 << ri.ranks[k];
  return m;
}

ovl_status ovl_report_timelines(const ovl_report *r, ovl_timeline_run **runs,
                                const ovl_timeline_marks **runmarks,
                                size_t *n, ovl_error *err) {
  size_t nruns = 0, nmarks = 0, k = 0, mk = 0;
  bool replays = false;
  ovl_timeline_run *tl;
  ovl_timeline_marks *tm;
  ovl_timeline_mark *marks;
  char *labels;
  if (runs != NULL)
    *runs = NULL;
  if (runmarks != NULL)
    *runmarks = NULL;
  if (n != NULL)
    *n = 0;
  if (r == NULL || runs == NULL || runmarks == NULL || n == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_report_timelines: bad argument");
  /* The replays, where they were traced; else the runs. */
  for (size_t i = 0; i < r->nmodes; i++)
    for (size_t j = 0; r->modes[i].replay.results != NULL &&
                       j < r->modes[i].replay.n;
         j++)
      if (r->modes[i].replay.results[j] != NULL) {
        replays = true;
        nruns++;
        nmarks += 2;
      }
  for (size_t i = 0; !replays && i < r->nmodes; i++)
    if (r->modes[i].res != NULL && ovl_result_trace_iter(r->modes[i].res) >= 0) {
      nruns++;
      nmarks += 2 * ovl_races_count(r->modes[i].races);
    }
  if (nruns == 0)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_report_timelines: nothing was traced");
  tl = calloc(1, nruns * sizeof *tl + nruns * sizeof *tm +
                     (nmarks + 1) * sizeof *marks + nruns * 64);
  if (tl == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  tm = (ovl_timeline_marks *)(tl + nruns);
  marks = (ovl_timeline_mark *)(tm + nruns);
  labels = (char *)(marks + nmarks + 1);
  for (size_t i = 0; i < r->nmodes; i++) {
    const report_mode *m = &r->modes[i];
    if (replays) {
      for (size_t j = 0; m->replay.results != NULL && j < m->replay.n; j++) {
        const ovl_replay *it = &m->replay.items[j];
        ovl_race_info ri;
        if (m->replay.results[j] == NULL)
          continue;
        ovl_races_get(m->races, it->race, &ri);
        tl[k].mode = m->mode;
        tl[k].prog = m->replay.progs[j];
        tl[k].res = m->replay.results[j];
        /* The delay went in before the first access: every op from it
         * on is one further. */
        tm[k].marks = &marks[mk];
        tm[k].nmarks = 2;
        marks[mk].op = ri.first.op + 1;
        marks[mk + 1].op = ri.second.op + (ri.second.op >= ri.first.op);
        marks[mk].race = marks[mk + 1].race = (int)it->race + 1;
        marks[mk].ranks = marks[mk + 1].ranks = race_ranks(m->races, it->race);
        mk += 2;
        snprintf(labels + 64 * k, 64, "%s race %zu", ovl_mode_name(m->mode),
                 it->race + 1);
        tm[k].label = labels + 64 * k;
        k++;
      }
      continue;
    }
    if (m->res == NULL || ovl_result_trace_iter(m->res) < 0)
      continue;
    tl[k].mode = m->mode;
    tl[k].prog = m->prog;
    tl[k].res = m->res;
    tm[k].marks = &marks[mk];
    for (size_t j = 0; j < ovl_races_count(m->races); j++) {
      ovl_race_info ri;
      ovl_races_get(m->races, j, &ri);
      marks[mk].op = ri.first.op;
      marks[mk + 1].op = ri.second.op;
      marks[mk].race = marks[mk + 1].race = (int)j + 1;
      marks[mk].ranks = marks[mk + 1].ranks = race_ranks(m->races, j);
      mk += 2;
      tm[k].nmarks += 2;
    }
    k++;
  }
  *runs = tl;
  *runmarks = tm;
  *n = k;
  return OVL_OK;
}
