/*
 * A report as JSON (docs/ARCHITECTURE.md, "The pipeline"): the results of
 * a run, whose keys and layout docs/JSON.md documents and
 * tools/overlap_sim --json=FILE writes, and the race reports of several
 * forms in one object (--races --json). Every string goes through the
 * library's one JSON string writer (ovl__sb_json_str: valid UTF-8).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* A number; JSON has no NaN or infinity: those are "nan", "inf", "-inf". */
static void sb_num(ovl__sbuf *b, double v) {
  if (isnan(v))
    ovl__sb_puts(b, "\"nan\"");
  else if (isinf(v))
    ovl__sb_puts(b, v > 0 ? "\"inf\"" : "\"-inf\"");
  else
    ovl__sb_printf(b, "%.17g", v);
}

/* A time: %.9g as the "modes" object always wrote it, null when it did
 * not run (NaN). */
static void sb_time(ovl__sbuf *b, double v) {
  if (isnan(v))
    ovl__sb_puts(b, "null");
  else
    ovl__sb_printf(b, "%.9g", v);
}

/* A number, or null when it does not apply (NaN). */
static void sb_num_or_null(ovl__sbuf *b, double v) {
  if (isnan(v))
    ovl__sb_puts(b, "null");
  else
    sb_num(b, v);
}

/* A string, or null. */
static void sb_str_or_null(ovl__sbuf *b, const char *s) {
  if (s != NULL)
    ovl__sb_json_str(b, s);
  else
    ovl__sb_puts(b, "null");
}

void ovl_var_index_text(const ovl_var_info *v, int64_t flat, char *buf,
                        size_t len) {
  int64_t idx[OVL_MAX_DIMS];
  int ndim = v->ndim < OVL_MAX_DIMS ? v->ndim : OVL_MAX_DIMS;
  size_t off = 0;
  if (len == 0)
    return;
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = v->dims[d] > 0 ? flat % v->dims[d] : 0;
    flat = v->dims[d] > 0 ? flat / v->dims[d] : 0;
  }
  off += (size_t)snprintf(buf + off, len - off, "[");
  for (int d = 0; d < ndim && off < len; d++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? "," : "",
                            (long long)idx[d]);
  if (off < len)
    snprintf(buf + off, len - off, "]");
}

/* Text a check's format gave, without its newline (NULL: failed). */
static void sb_text(ovl__sbuf *b, char *text) {
  size_t n;
  if (text == NULL) {
    b->fail = true;
    return;
  }
  n = strlen(text);
  while (n > 0 && text[n - 1] == '\n')
    text[--n] = '\0';
  ovl__sb_puts(b, text);
  free(text);
}

/* A race report as ovl_races_format gives it, without its newline. */
static void sb_races(ovl__sbuf *b, const ovl_races *races,
                     const ovl_program *prog) {
  ovl_error err;
  char *text = NULL;
  if (ovl_races_format(races, prog, 1, &text, &err) != OVL_OK)
    text = NULL;
  sb_text(b, text);
}

/* A deadlock report as ovl_deadlocks_format gives it, or null. */
static void sb_deadlocks(ovl__sbuf *b, const ovl_deadlocks *d,
                         const ovl_program *prog) {
  ovl_error err;
  char *text = NULL;
  if (d == NULL) {
    ovl__sb_puts(b, "null");
    return;
  }
  if (ovl_deadlocks_format(d, prog, 1, &text, &err) != OVL_OK)
    text = NULL;
  sb_text(b, text);
}

/* The mismatch report of a report, or null. */
static void sb_mismatches(ovl__sbuf *b, const ovl_report *r) {
  const ovl_mismatches *m = ovl_report_mismatches(r);
  ovl_error err;
  char *text = NULL;
  if (m == NULL) {
    ovl__sb_puts(b, "null");
    return;
  }
  if (ovl_mismatches_format(m, ovl_report_program(r), 1, &text, &err) !=
      OVL_OK)
    text = NULL;
  sb_text(b, text);
}

/* "findings": each bug once, whatever the forms it is found in (the
 * summary's counts), and the groups of forms whose findings read the
 * same ([["sync", "async"]]: printed once). */
static void sb_findings(ovl__sbuf *b, const ovl_report *r) {
  ovl_report_summary sum;
  ovl_report_summary_get(r, &sum);
  ovl__sb_printf(b, "{\"races\": %llu, \"mismatches\": %llu, "
                    "\"deadlocks\": %llu, \"same\": [",
                 (unsigned long long)sum.races,
                 (unsigned long long)sum.mismatches,
                 (unsigned long long)sum.deadlocks);
  for (size_t i = 0, g = 0; i < ovl_report_mode_count(r); i++) {
    if (ovl_report_same_findings(r, i) != (int)i)
      continue;
    ovl__sb_puts(b, g++ ? ", [" : "[");
    for (size_t j = i, k = 0; j < ovl_report_mode_count(r); j++) {
      ovl_report_mode m;
      if (ovl_report_same_findings(r, j) != (int)i)
        continue;
      ovl_report_mode_get(r, j, &m);
      ovl__sb_printf(b, "%s\"%s\"", k++ ? ", " : "", ovl_mode_name(m.mode));
    }
    ovl__sb_puts(b, "]");
  }
  ovl__sb_puts(b, "]}");
}

static void json_schedule(ovl__sbuf *b, const ovl_program *prog) {
  ovl__sb_puts(b, "  \"schedule\": {\"path\": ");
  ovl__sb_json_str(b, ovl_program_filename(prog));
  ovl__sb_puts(b, ", \"params\": {");
  for (size_t i = 0; i < ovl_program_param_count(prog); i++) {
    const char *name, *value;
    ovl_program_param(prog, i, &name, &value, NULL, NULL);
    ovl__sb_puts(b, i ? ", " : "");
    ovl__sb_json_str(b, name);
    ovl__sb_puts(b, ": ");
    ovl__sb_json_str(b, value);
  }
  ovl__sb_printf(b, "}, \"ops\": %zu, \"fetched\": [",
                 ovl_program_op_count(prog));
  for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, i, &v);
    ovl__sb_puts(b, i ? ", " : "");
    ovl__sb_json_str(b, v.name);
  }
  ovl__sb_printf(b, "], \"bytes_per_rank\": %llu},\n",
                 (unsigned long long)ovl_program_bytes_per_rank(prog));
}

static void json_machine(ovl__sbuf *b, const ovl_report_machine *mc) {
  ovl__sb_puts(b, "  \"machine\": {\"backend\": ");
  ovl__sb_json_str(b, mc->backend);
  ovl__sb_printf(b, ", \"ranks\": %d, \"devices\": [", mc->nranks);
  for (int r = 0; r < mc->nranks; r++) {
    ovl__sb_puts(b, r ? ", " : "");
    ovl__sb_json_str(b, mc->device_names[r]);
  }
  ovl__sb_puts(b, "], \"device_summary\": ");
  ovl__sb_json_str(b, mc->devices);
  ovl__sb_puts(b, ", \"hostname\": ");
  ovl__sb_json_str(b, mc->info.hostname);
  ovl__sb_puts(b, ", \"cpu_model\": ");
  ovl__sb_json_str(b, mc->info.cpu_model);
  ovl__sb_puts(b, ", \"driver_version\": ");
  ovl__sb_json_str(b, mc->info.driver_version);
  ovl__sb_puts(b, ", \"cuda_runtime_version\": ");
  ovl__sb_json_str(b, mc->info.runtime_version);
  ovl__sb_puts(b, ", \"nccl_version\": ");
  ovl__sb_json_str(b, mc->info.nccl_version);
  ovl__sb_puts(b, "},\n");
}

/* A tolerance as given: a number, or null for each dtype's default. */
static void sb_tol(ovl__sbuf *b, double tol) {
  if (tol == OVL_TOL_DTYPE)
    ovl__sb_puts(b, "null");
  else
    ovl__sb_printf(b, "%.17g", tol);
}

/* "options": what the report ran with (the pipeline's and the runs'
 * options, the world's timeout and tuning, the program's -D values), then
 * the caller's own members (`more`: the tool's mode, its output files). */
static void json_options(ovl__sbuf *b, const ovl_report *r,
                         const char *more) {
  const ovl_pipeline_opts *o = &r->opts;
  const ovl_run_opts *ro = &r->run;
  const ovl__tuning *t = &r->tuning;
  const ovl_program *prog = r->prog;
  ovl__sb_printf(b, "  \"options\": {\"iters\": %d, \"warmup\": %d, "
                    "\"timed\": %d, \"rtol\": ",
                 ro->iters + ro->warmup, ro->warmup, ro->iters);
  sb_tol(b, o->rtol);
  ovl__sb_puts(b, ", \"atol\": ");
  sb_tol(b, o->atol);
  ovl__sb_printf(b, ", \"timeout_s\": %.17g, "
                    "\"races\": %s, \"op_times\": %s, \"graph\": %s, "
                    "\"chaos_seed\": %u, \"comm_priority\": \"%s\", "
                    "\"nccl_min_ctas\": %d, \"nccl_max_ctas\": %d, "
                    "\"tf32\": \"%s\"",
                 r->timeout_s, o->races ? "true" : "false",
                 ro->op_times ? "true" : "false", ro->graph ? "true" : "false",
                 t->chaos_seed, t->comm_priority_high ? "high" : "default",
                 t->nccl_min_ctas, t->nccl_max_ctas, t->tf32 ? "on" : "off");
  /* The model's files: null where not given. */
  ovl__sb_puts(b, ", \"machine\": ");
  if (t->machine[0] != '\0')
    ovl__sb_json_str(b, t->machine);
  else
    ovl__sb_puts(b, "null");
  ovl__sb_puts(b, ", \"profile\": ");
  if (t->profile[0] != '\0')
    ovl__sb_json_str(b, t->profile);
  else
    ovl__sb_puts(b, "null");
  /* The rows of a matmul's results checked: null for every row. */
  if (o->check_rows < 0)
    ovl__sb_puts(b, ", \"check_rows\": null");
  else
    ovl__sb_printf(b, ", \"check_rows\": %lld",
                   (long long)(o->check_rows == 0 ? OVL_REFERENCE_ROWS_DEFAULT
                                                  : o->check_rows));
  /* The trials asked (at most; one where 0 or 1 was asked), and the
   * budget that may stop them sooner (null: none). */
  ovl__sb_puts(b, ", \"trials\": ");
  if (o->trials > 0)
    ovl__sb_printf(b, "%d", o->trials);
  else
    ovl__sb_puts(b, "null");
  ovl__sb_puts(b, ", \"trial_budget_s\": ");
  if (o->trial_budget_s > 0)
    ovl__sb_printf(b, "%.17g", o->trial_budget_s);
  else
    ovl__sb_puts(b, "null");
  /* The timed iteration traced, counted from 0: null without a trace. */
  ovl__sb_puts(b, ", \"trace_iter\": ");
  if (ro->trace)
    ovl__sb_printf(b, "%d",
                   ro->trace_iter < 0 ? ro->iters + ro->trace_iter
                                      : ro->trace_iter);
  else
    ovl__sb_puts(b, "null");
  ovl__sb_puts(b, ", \"defines\": [");
  for (size_t i = 0; prog != NULL && i < prog->ndefines; i++) {
    ovl__sb_puts(b, i ? ", " : "");
    ovl__sb_json_str(b, prog->defines[i]);
  }
  ovl__sb_puts(b, "]");
  if (more != NULL && more[0] != '\0') {
    ovl__sb_puts(b, ", ");
    ovl__sb_puts(b, more);
  }
  ovl__sb_puts(b, "},\n");
}

/* One mode's "check": its status and, per (rank, fetched variable), what
 * differs. */
static void json_check(ovl__sbuf *b, const ovl_program *prog,
                       const ovl_report_mode *m, int nranks) {
  const ovl_check *c = m->check;
  ovl__sb_puts(b, "\"check\": {");
  if (c == NULL) {
    ovl__sb_puts(b, "\"status\": \"n/a\", \"reason\": ");
    ovl__sb_json_str(b, m->not_checked);
    ovl__sb_puts(b, ", \"checked\": 0, \"unchecked\": 0, "
                    "\"mismatched\": 0, \"nonfinite\": 0, \"vars\": []}");
    return;
  }
  ovl__sb_printf(b, "\"status\": \"%s\", \"checked\": %lld, "
                    "\"unchecked\": %lld, \"mismatched\": %lld, "
                    "\"nonfinite\": %lld, \"vars\": [",
                 c->mismatched == 0 ? "ok" : "mismatch",
                 (long long)c->checked, (long long)c->unchecked,
                 (long long)c->mismatched, (long long)c->nonfinite);
  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
      const ovl_mismatch *mm = NULL;
      ovl_var_info v;
      double rtol, atol;
      ovl_program_fetch_info(prog, i, &v);
      for (size_t k = 0; k < c->nmismatch; k++)
        if (c->mismatch[k].rank == r && c->mismatch[k].fetch_index == i)
          mm = &c->mismatch[k];
      ovl__sb_printf(b, "%s\n        {\"rank\": %d, \"var\": ",
                     r == 0 && i == 0 ? "" : ",", r);
      ovl__sb_json_str(b, v.name);
      ovl_tolerance(c->rtol, c->atol, v.dtype, &rtol, &atol);
      ovl__sb_printf(b, ", \"dtype\": \"%s\", \"rtol\": %.17g, "
                        "\"atol\": %.17g, \"checked\": %lld, "
                        "\"mismatched\": %lld, \"nonfinite\": %lld, "
                        "\"fetched\": %s, ",
                     ovl_dtype_name(v.dtype), rtol, atol,
                     (long long)(v.numel - (c->var_unchecked != NULL
                                                ? c->var_unchecked[i]
                                                : 0)),
                     (long long)(mm ? mm->count : 0),
                     (long long)(mm ? mm->nonfinite : 0),
                     ovl_result_fetched(m->res, r, i) != NULL ? "true"
                                                              : "false");
      if (mm != NULL && mm->nonfinite > 0)
        ovl__sb_printf(b, "\"first_nonfinite\": %lld, ",
                       (long long)mm->first_nonfinite);
      else
        ovl__sb_puts(b, "\"first_nonfinite\": null, ");
      if (mm == NULL) {
        ovl__sb_puts(b, "\"first_index\": null, \"first_at\": null, "
                        "\"got\": null, \"expected\": null}");
      } else {
        char idx[128];
        ovl_var_index_text(&v, mm->first_index, idx, sizeof idx);
        ovl__sb_printf(b, "\"first_index\": %lld, \"first_at\": ",
                       (long long)mm->first_index);
        ovl__sb_json_str(b, idx);
        ovl__sb_puts(b, ", \"got\": ");
        sb_num(b, mm->got);
        ovl__sb_puts(b, ", \"expected\": ");
        sb_num(b, mm->expected);
        ovl__sb_puts(b, "}");
      }
    }
  }
  ovl__sb_puts(b, "]}");
}

/* One mode's op times: the rows of ovl_report_op_times. */
static void json_op_times(ovl__sbuf *b, const ovl_report *r, size_t i) {
  ovl_op_time *g;
  size_t n;
  if (ovl_report_op_times(r, i, &g, &n, NULL) != OVL_OK) {
    b->fail = true;
    return;
  }
  ovl__sb_puts(b, "\"op_times\": [");
  for (size_t k = 0; k < n; k++) {
    ovl__sb_printf(b, "%s\n        {\"line\": %d, \"op\": ", k ? "," : "",
                   g[k].line);
    ovl__sb_json_str(b, g[k].op);
    ovl__sb_puts(b, ", \"stream\": ");
    ovl__sb_json_str(b, g[k].stream_name);
    ovl__sb_printf(b, ", \"count\": %ld, \"ms_per_iter\": %.9g, "
                      "\"us_per_op\": %.9g}",
                   g[k].count, g[k].sec_per_iter * 1e3,
                   g[k].sec_per_iter * 1e6 / (double)g[k].count);
  }
  ovl__sb_puts(b, "]");
  free(g);
}

/* A mode's "explain" (ovl_result_explain), or null where it has none:
 * seconds; "contention" null where not known. */
static void json_explain(ovl__sbuf *b, const ovl_report_mode *m) {
  ovl_explain x;
  bool have = false;
  if (m->res != NULL &&
      ovl__result_explain(m->prog, m->res, &x, &have, NULL) != OVL_OK)
    b->fail = true; /* out of memory: the writer says so */
  if (!have || b->fail) {
    ovl__sb_puts(b, "null");
    return;
  }
  ovl__sb_printf(b,
                 "{\"rank\": %d, \"total_s\": %.9g, \"compute_s\": %.9g, "
                 "\"exposed_comm_s\": %.9g, \"contention_s\": ",
                 x.rank, x.total, x.compute, x.exposed_comm);
  sb_time(b, x.contention);
  ovl__sb_printf(b, ", \"host_s\": %.9g, \"waits_s\": %.9g}", x.host,
                 x.waits);
}

static void json_modes(ovl__sbuf *b, const ovl_report *r, int nranks,
                       int op_times) {
  const ovl_program *prog = ovl_report_program(r);
  ovl__sb_puts(b, "  \"modes\": {");
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    int n;
    const double *t;
    ovl_report_mode_get(r, i, &m);
    n = m.res != NULL ? ovl_result_iters(m.res) : 0;
    t = m.res != NULL ? ovl_result_times(m.res) : NULL;
    ovl__sb_printf(b, "%s\n    \"%s\": {\"total_s\": ", i ? "," : "",
                   ovl_mode_name(m.mode));
    sb_time(b, m.total_s);
    ovl__sb_puts(b, ", \"median_s\": ");
    sb_time(b, m.median_s);
    ovl__sb_puts(b, ", \"min_s\": ");
    sb_time(b, m.min_s);
    ovl__sb_puts(b, ", \"max_s\": ");
    sb_time(b, m.max_s);
    ovl__sb_puts(b, ", \"iter_s\": [");
    for (int k = 0; k < n; k++)
      ovl__sb_printf(b, "%s%.9g", k ? ", " : "", t[k]);
    ovl__sb_printf(b, "], \"predicted\": %s,\n      \"explain\": ",
                   m.res != NULL && ovl_result_predicted(m.res) ? "true"
                                                                : "false");
    json_explain(b, &m);
    ovl__sb_puts(b, ",\n      ");
    json_check(b, prog, &m, nranks);
    ovl__sb_puts(b, ",\n      \"races\": ");
    if (m.races == NULL)
      ovl__sb_puts(b, "null");
    else
      sb_races(b, m.races, m.prog);
    ovl__sb_puts(b, ",\n      \"deadlocks\": ");
    sb_deadlocks(b, m.deadlocks, m.prog);
    if (op_times && m.res != NULL) {
      ovl__sb_puts(b, ",\n      ");
      json_op_times(b, r, i);
    }
    ovl__sb_puts(b, "}");
  }
  ovl__sb_puts(b, "\n  },\n");
}

/* {"min": .., "median": .., "max": ..}, or null where no trial gives it. */
static void sb_stat(ovl__sbuf *b, const ovl_stat *st) {
  if (isnan(st->median)) {
    ovl__sb_puts(b, "null");
    return;
  }
  ovl__sb_printf(b, "{\"min\": %.9g, \"median\": %.9g, \"max\": %.9g}",
                 st->min, st->median, st->max);
}

/* "trials": every figure over the trials, and each trial's modes. */
static void json_trials(ovl__sbuf *b, const ovl_report *r) {
  ovl_report_summary sum;
  ovl_report_trials tr;
  ovl_report_trials_get(r, &tr);
  ovl__sb_printf(b, "  \"trials\": {\"count\": %zu, \"total_s\": {", tr.n);
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    ovl__sb_printf(b, "%s\"%s\": ", i ? ", " : "", ovl_mode_name(m.mode));
    sb_stat(b, &tr.total_s[m.mode]);
  }
  ovl__sb_puts(b, "},\n    \"speedup\": ");
  sb_stat(b, &tr.speedup);
  ovl__sb_puts(b, ", \"speedup_spread\": ");
  sb_num_or_null(b, tr.speedup_spread);
  ovl__sb_puts(b, ",\n    \"ideal_speedup\": ");
  sb_stat(b, &tr.ideal_speedup);
  ovl__sb_puts(b, ", \"overlap_efficiency\": ");
  sb_stat(b, &tr.overlap_efficiency);
  ovl__sb_puts(b, ",\n    \"each\": [");
  for (size_t t = 0; t < tr.n; t++) {
    ovl__sb_puts(b, t ? ",\n      {" : "\n      {");
    for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
      ovl_report_mode m;
      if (ovl_report_trial_get(r, t, i, &m) != 0)
        continue;
      ovl__sb_printf(b, "%s\"%s\": {\"total_s\": %.9g, \"check\": ",
                     i ? ", " : "", ovl_mode_name(m.mode), m.total_s);
      if (m.check == NULL)
        ovl__sb_puts(b, "\"n/a\"}");
      else
        ovl__sb_printf(b, "\"%s\", \"mismatched\": %lld, \"nonfinite\": "
                          "%lld}",
                       m.check->mismatched == 0 ? "ok" : "mismatch",
                       (long long)m.check->mismatched,
                       (long long)m.check->nonfinite);
    }
    ovl_report_trial_summary_get(r, t, &sum);
    ovl__sb_puts(b, ", \"speedup\": ");
    sb_num_or_null(b, sum.speedup);
    ovl__sb_puts(b, ", \"ideal_speedup\": ");
    sb_num_or_null(b, sum.ideal_speedup);
    ovl__sb_puts(b, ", \"overlap_efficiency\": ");
    sb_num_or_null(b, sum.overlap_efficiency);
    ovl__sb_puts(b, "}");
  }
  ovl__sb_puts(b, "]},\n");
}

static ovl_status finish(ovl__sbuf *b, char **text, size_t *len,
                         ovl_error *err) {
  if (b->fail || b->s == NULL) {
    free(b->s);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  *text = b->s;
  if (len != NULL)
    *len = b->len;
  return OVL_OK;
}

ovl_status ovl_report_json(const ovl_report *r,
                           const ovl_json_envelope *envelope, char **text,
                           size_t *len, ovl_error *err) {
  ovl__sbuf b = {0};
  ovl_json_envelope env;
  ovl_report_machine mc;
  ovl_report_summary sum;
  ovl_status st;

  if (text != NULL)
    *text = NULL;
  if (r == NULL || text == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_report_json: bad argument");
  if ((st = ovl__opts_read(&env, sizeof env, envelope, "ovl_json_envelope",
                           err)) != OVL_OK)
    return st;
  ovl_report_machine_get(r, &mc);
  for (size_t i = 0; i < ovl_report_mode_count(r) && !ovl_report_not_run(r);
       i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    if (m.res == NULL)
      return ovl__err(err, OVL_EINVAL,
                      "ovl_report_json: the %s form did not run (a report "
                      "of runs is needed)",
                      ovl_mode_name(m.mode));
  }
  if (mc.backend == NULL)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_report_json: the report has no runs");
  ovl_report_summary_get(r, &sum);

  ovl__sb_puts(&b, "{\n");
  if (env.head != NULL && env.head[0] != '\0') {
    ovl__sb_puts(&b, "  ");
    ovl__sb_puts(&b, env.head);
    ovl__sb_puts(&b, ",\n");
  }
  ovl__sb_puts(&b, "  \"version\": \"" OVL_VERSION_STRING "\",\n");
  json_schedule(&b, ovl_report_program(r));
  json_machine(&b, &mc);
  json_options(&b, r, env.options);
  json_modes(&b, r, mc.nranks, r->run.op_times);
  ovl__sb_puts(&b, "  \"mismatches\": ");
  sb_mismatches(&b, r);
  ovl__sb_puts(&b, ",\n  \"findings\": ");
  if (ovl_report_same_findings(r, 0) >= 0)
    sb_findings(&b, r);
  else
    ovl__sb_puts(&b, "null");
  ovl__sb_puts(&b, ",\n  \"not_run\": ");
  sb_str_or_null(&b, ovl_report_not_run(r));
  ovl__sb_puts(&b, ",\n  \"speedup\": ");
  sb_num_or_null(&b, sum.speedup);
  ovl__sb_puts(&b, ",\n  \"ideal_speedup\": ");
  sb_num_or_null(&b, sum.ideal_speedup);
  ovl__sb_puts(&b, ",\n  \"overlap_efficiency\": ");
  sb_num_or_null(&b, sum.overlap_efficiency);
  ovl__sb_puts(&b, ",\n");
  json_trials(&b, r);
  ovl__sb_puts(&b, "  \"result\": ");
  ovl__sb_json_str(&b, ovl_report_result(r));
  if (env.tail != NULL && env.tail[0] != '\0') {
    ovl__sb_puts(&b, ",\n  ");
    ovl__sb_puts(&b, env.tail);
  }
  ovl__sb_puts(&b, "\n}\n");
  return finish(&b, text, len, err);
}

/* One race replayed (ovl.h, "Race replay"). */
static void json_replay_one(ovl__sbuf *b, const ovl_program *prog,
                            const ovl_replay *x) {
  ovl__sb_printf(b, "{\"race\": %zu, \"shown\": %s, \"delay\": ",
                 x->race + 1, x->shown ? "true" : "false");
  if (isnan(x->delay_us)) {
    ovl__sb_puts(b, "null");
  } else {
    ovl__sb_puts(b, "{\"stream\": ");
    ovl__sb_json_str(b, x->stream_name);
    ovl__sb_printf(b, ", \"op\": %zu, \"line\": %d, \"us\": ", x->op,
                   x->line);
    sb_num(b, x->delay_us);
    ovl__sb_puts(b, "}");
  }
  if (x->shown) {
    ovl_var_info v;
    char idx[128];
    ovl_program_fetch_info(prog, x->fetch_index, &v);
    ovl_var_index_text(&v, x->index, idx, sizeof idx);
    ovl__sb_printf(b, ", \"rank\": %d, \"var\": ", x->rank);
    ovl__sb_json_str(b, x->var);
    ovl__sb_printf(b, ", \"index\": %lld, \"at\": ", (long long)x->index);
    ovl__sb_json_str(b, idx);
    ovl__sb_puts(b, ", \"got\": ");
    sb_num(b, x->got);
    ovl__sb_puts(b, ", \"expected\": ");
    sb_num(b, x->expected);
  } else {
    ovl__sb_puts(b, ", \"rank\": null, \"var\": null, \"index\": null, "
                    "\"at\": null, \"got\": null, \"expected\": null");
  }
  ovl__sb_printf(b, ", \"mismatched\": %lld, \"checked\": %lld, "
                    "\"other_mismatched\": %lld, \"why\": ",
                 (long long)x->mismatched, (long long)x->checked,
                 (long long)x->other_mismatched);
  sb_str_or_null(b, x->why);
  ovl__sb_puts(b, "}");
}

/* The replay of every form of a report made with it, as the value of
 * "replay" (docs/ORDERING.md, "Showing a race"). */
static void json_replay(ovl__sbuf *b, const ovl_report *r) {
  ovl_report_machine mc;
  size_t count = 0, shown = 0;
  ovl_report_machine_get(r, &mc);
  ovl__sb_puts(b, "{\"backend\": ");
  sb_str_or_null(b, mc.backend);
  ovl__sb_printf(b, ", \"ranks\": %d, \"modes\": {", mc.nranks);
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_report_replay rp;
    ovl_report_mode_get(r, i, &m);
    ovl_report_replay_get(r, i, &rp);
    ovl__sb_printf(b, "%s\"%s\": {\"plain\": ", i ? ", " : "",
                   ovl_mode_name(m.mode));
    if (rp.plain_ran) {
      ovl__sb_puts(b, "{\"time_s\": ");
      sb_num(b, rp.plain_s);
      ovl__sb_printf(b, ", \"checked\": %lld, \"mismatched\": %lld}",
                     (long long)rp.plain_checked,
                     (long long)rp.plain_mismatched);
    } else {
      ovl__sb_puts(b, "null");
    }
    ovl__sb_puts(b, ", \"delay_us\": ");
    sb_num_or_null(b, rp.delay_us);
    ovl__sb_puts(b, ", \"races\": [");
    for (size_t k = 0; k < rp.n; k++) {
      ovl__sb_puts(b, k ? ", " : "");
      json_replay_one(b, ovl_report_program(r), &rp.replays[k]);
      count++;
      shown += rp.replays[k].shown != 0;
    }
    ovl__sb_puts(b, "]}");
  }
  ovl__sb_printf(b, "}, \"count\": %zu, \"shown\": %zu}", count, shown);
}

ovl_status ovl_report_races_json(const ovl_report *r, char **text,
                                 size_t *len, ovl_error *err) {
  ovl_report_replay rp;
  ovl__sbuf b = {0};
  size_t n = ovl_report_mode_count(r);

  if (text != NULL)
    *text = NULL;
  if (r == NULL || text == NULL || n == 0)
    return ovl__err(err, OVL_EINVAL, "ovl_report_races_json: bad argument");
  for (size_t i = 0; i < n; i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    if (m.races == NULL)
      return ovl__err(err, OVL_EINVAL,
                      "ovl_report_races_json: the %s form was not "
                      "race-checked",
                      ovl_mode_name(m.mode));
  }
  /* Every form under its name, one alone too. */
  ovl__sb_puts(&b, "{\"modes\": {");
  for (size_t i = 0; i < n; i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    ovl__sb_printf(&b, "%s\"%s\": ", i ? ", " : "", ovl_mode_name(m.mode));
    sb_races(&b, m.races, ovl_report_program(r));
  }
  ovl__sb_puts(&b, "}, \"deadlocks\": {");
  for (size_t i = 0; i < n; i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    ovl__sb_printf(&b, "%s\"%s\": ", i ? ", " : "", ovl_mode_name(m.mode));
    sb_deadlocks(&b, m.deadlocks, ovl_report_program(r));
  }
  ovl__sb_puts(&b, "}, \"mismatches\": ");
  sb_mismatches(&b, r);
  ovl__sb_puts(&b, ", \"findings\": ");
  sb_findings(&b, r);
  /* Made with the replay: its results too. */
  if (ovl_report_replay_get(r, 0, &rp) == 0) {
    ovl__sb_puts(&b, ", \"replay\": ");
    json_replay(&b, r);
  }
  ovl__sb_puts(&b, "}\n");
  return finish(&b, text, len, err);
}
