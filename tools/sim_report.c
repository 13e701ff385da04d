/*
 * What tools/overlap_sim prints, from the pipeline's report (sim_report.h).
 * Not part of libovl.
 */
#include "sim_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool_util.h"

static void format_shape(const ovl_var_info *v, char *buf, size_t len) {
  size_t off = 0;
  off += (size_t)snprintf(buf + off, len - off, "[");
  for (int d = 0; d < v->ndim && off < len; d++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? "," : "",
                            (long long)v->dims[d]);
  if (off < len)
    snprintf(buf + off, len - off, "]");
}

void sim_print_header(const sim_options *o, const ovl_world *world,
                      const ovl_program *prog, const char *path,
                      uint64_t per_op, const char *not_run) {
  size_t np = ovl_program_param_count(prog);
  bool cpu_default = false;
  uint64_t vars = ovl_program_bytes_per_rank(prog);
  uint64_t ops = mul_sat(ovl_program_op_count(prog), per_op);
  double mb = (double)vars / 1e6;
  char b[32];

  printf("overlap_sim %s: backend %s, %d ranks (%s), schedule %s",
         OVL_VERSION_STRING, ovl_world_backend_name(world),
         ovl_world_nranks(world), ovl_world_devices(world), path);
  for (size_t i = 0; i < np; i++) {
    const char *name, *value, *plain;
    ovl_param_origin origin;
    ovl_program_param(prog, i, &name, &value, &plain, &origin);
    printf("%s %s=%s", i ? "" : ",", name, value);
    if (origin == OVL_PARAM_CPU_DEFAULT) {
      printf("*");
      cpu_default = true;
    }
    if (o->seed_steps > 0 && strcmp(name, "steps") == 0)
      printf("+");
  }
  printf(", %.1f MB/rank", mb);
  /* Where the ops take more memory than the variables, MB/rank alone would
   * hide what the run costs. */
  if (ops > vars)
    printf(", %zu ops (%s of host memory)", ovl_program_op_count(prog),
           format_bytes(ops, b, sizeof b));
  /* A run the checks stopped ran no iteration: its header says so. */
  if (not_run != NULL)
    printf(", nothing ran (%s)\n", not_run);
  else
    printf(", %d iteration%s (%d warmup, %d timed)%s\n",
           o->common.warmup + o->common.iters,
           o->common.warmup + o->common.iters == 1 ? "" : "s",
           o->common.warmup, o->common.iters,
           o->common.graph ? ", as CUDA graphs (captured once, replayed "
                             "every iteration)"
                           : "");
  if (cpu_default) {
    printf("  * smaller default for the cpu backend; full size:");
    for (size_t i = 0; i < np; i++) {
      const char *name, *plain;
      ovl_param_origin origin;
      ovl_program_param(prog, i, &name, NULL, &plain, &origin);
      if (origin == OVL_PARAM_CPU_DEFAULT)
        printf(" -D %s=%s", name, plain);
    }
    printf("\n");
  }
  if (o->checks_at > 0)
    printf("  checks: at %d ranks, where their rank sets end (every rank "
           "runs the same ops: what they find there holds at %d): no "
           "races, mismatches or deadlocks\n",
           o->checks_at, ovl_world_nranks(world));
  if (not_run == NULL) {
    char about[1024];
    if (ovl_world_model_about(world, prog, about, sizeof about) == 0)
      printf("  model: predicted, nothing runs: %s\n", about);
  }
  if (strcmp(ovl_world_backend_name(world), "cpu") == 0 && not_run == NULL)
    printf("  cpu backend: these times are an emulation on host cores (every "
           "stream a thread; %ld cores here), not device figures\n",
           sysconf(_SC_NPROCESSORS_ONLN));
  if (o->seed_steps > 0)
    printf("  + fewer steps than the seed's 64 at %d ranks: each allreduce "
           "multiplies c by %d, and %d^64 overflows float32 (64 steps "
           "hold up to 3 ranks; Paddle's benchmark is 2)\n",
           ovl_world_nranks(world), ovl_world_nranks(world),
           ovl_world_nranks(world));
}

void sim_print_table_header(bool trials) {
  printf("%-6s%s %10s %12s %12s %12s  %s\n", "mode", trials ? " trial" : "",
         "total(s)", "median(ms)", "min(ms)", "max(ms)", "check");
}

void sim_print_row(const ovl_report *r, size_t i, size_t trial,
                   bool verbose) {
  ovl_report_mode m;
  char check[256], col[32] = "";
  ovl_report_mode_get(r, i, &m);
  if (trial > 0)
    snprintf(col, sizeof col, " %5zu", trial);
  if (m.check == NULL)
    snprintf(check, sizeof check, "n/a (%s)", m.not_checked);
  else if (m.check->mismatched == 0)
    snprintf(check, sizeof check, "ok (%lld elements)",
             (long long)m.check->checked);
  else if (m.check->nonfinite == 0)
    snprintf(check, sizeof check, "MISMATCH (%lld of %lld elements)",
             (long long)m.check->mismatched, (long long)m.check->checked);
  else
    snprintf(check, sizeof check,
             "MISMATCH (%lld of %lld elements, %lld not finite)",
             (long long)m.check->mismatched, (long long)m.check->checked,
             (long long)m.check->nonfinite);
  if (m.check != NULL && m.check->unchecked > 0) {
    /* "ok (4096 elements" -> "ok (4096 elements; rows sampled, 65536
     * not checked)". */
    size_t n = strlen(check);
    if (n > 0 && check[n - 1] == ')')
      snprintf(check + n - 1, sizeof check - (n - 1),
               " in sampled rows; %lld not checked)",
               (long long)m.check->unchecked);
  }
  if (m.races != NULL) {
    size_t n = strlen(check);
    uint64_t nr = ovl_races_count(m.races) + ovl_races_more(m.races);
    if (nr == 0)
      snprintf(check + n, sizeof check - n, "; no races");
    else
      snprintf(check + n, sizeof check - n, "; RACES: %llu (below)",
               (unsigned long long)nr);
  }
  printf("%-6s%s %10.4f %12.3f %12.3f %12.3f  %s\n", ovl_mode_name(m.mode),
         col, m.total_s, m.median_s * 1e3, m.min_s * 1e3, m.max_s * 1e3,
         check);
  if (verbose) {
    const double *t = ovl_result_times(m.res);
    printf("       iterations (ms):");
    for (int k = 0; k < ovl_result_iters(m.res); k++)
      printf(" %.3f", t[k] * 1e3);
    printf("\n");
  }
}

void sim_print_op_times(const ovl_report *r, const sim_options *o) {
  ovl_report_machine mc;
  ovl_report_machine_get(r, &mc);
  /* The cpu backend's timers are the host clock as each emulated stream
   * reaches them: no device clock. */
  printf("op times (%s, per iteration, mean over %d timed iterations and "
         "%d ranks):\n",
         mc.backend != NULL && strcmp(mc.backend, "cpu") == 0
             ? "host clock as each emulated stream reaches the op"
             : "device clock",
         o->common.iters, mc.nranks);
  printf("%-6s %5s  %-18s %-8s %6s %10s %10s\n", "mode", "line", "op",
         "stream", "count", "ms/iter", "us/op");
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_op_time *g;
    size_t n;
    ovl_report_mode m;
    const char *mode;
    ovl_report_mode_get(r, i, &m);
    mode = ovl_mode_name(m.mode);
    /* Only out of memory fails: that mode's rows are left out. */
    if (ovl_report_op_times(r, i, &g, &n, NULL) != OVL_OK)
      continue;
    for (size_t k = 0; k < n; k++)
      printf("%-6s %5d  %-18s %-8s %6ld %10.3f %10.1f\n", mode, g[k].line,
             g[k].op, g[k].stream_name, g[k].count, g[k].sec_per_iter * 1e3,
             g[k].sec_per_iter * 1e6 / (double)g[k].count);
    free(g);
  }
}

/* The total of a mode that ran. */
static double total_of(const ovl_report *r, ovl_mode mode) {
  ovl_report_mode m;
  ovl_report_mode_get(r, (size_t)ovl_report_find(r, mode), &m);
  return m.total_s;
}

/* "LABEL: MEDIAN (MIN to MAX" of a figure over the trials, `digits`
 * decimals and `unit` after each number; the caller ends the line. */
static void print_stat(const char *label, const ovl_stat *st, int digits,
                       const char *unit) {
  printf("%s: %.*f%s (%.*f%s to %.*f%s", label, digits, st->median, unit,
         digits, st->min, unit, digits, st->max, unit);
}

/* The explain line (ovl_explain): where the async iteration went (else
 * the first mode's that has it). */
void sim_print_explain(const ovl_report *r) {
  ovl_report_mode m = {0};
  ovl_explain x;
  int i = ovl_report_find(r, OVL_MODE_ASYNC);
  bool got = false;
  if (i >= 0) {
    ovl_report_mode_get(r, (size_t)i, &m);
    got = ovl_result_explain(m.prog, m.res, &x) == 0;
  }
  for (size_t k = 0; !got && k < ovl_report_mode_count(r); k++) {
    ovl_report_mode_get(r, k, &m);
    got = m.res != NULL && ovl_result_explain(m.prog, m.res, &x) == 0;
  }
  if (!got)
    return;
  printf("explain (%s, %s, rank %d): %.3f ms = compute %.3f + exposed comm "
         "%.3f + contention ",
         ovl_mode_name(m.mode),
         ovl_result_predicted(m.res) ? "predicted" : "traced iteration",
         x.rank, x.total * 1e3, x.compute * 1e3, x.exposed_comm * 1e3);
  if (isnan(x.contention))
    printf("n/a (--mode=all --op-times measures it)");
  else
    printf("%.3f", x.contention * 1e3);
  printf(" + host %.3f + waits %.3f\n", x.host * 1e3, x.waits * 1e3);
}

void sim_print_summary(const ovl_report *r) {
  ovl_report_summary s;
  ovl_report_trials tr;
  ovl_report_summary_get(r, &s);
  ovl_report_trials_get(r, &tr);
  if (tr.n > 1) {
    printf("%zu trials: each figure's median (min to max)\n", tr.n);
    for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
      ovl_report_mode m;
      char label[32];
      ovl_report_mode_get(r, i, &m);
      snprintf(label, sizeof label, "%s total", ovl_mode_name(m.mode));
      print_stat(label, &tr.total_s[m.mode], 4, " s");
      printf(")\n");
    }
    if (!isnan(tr.speedup.median)) {
      print_stat("async speedup", &tr.speedup, 3, "x");
      printf("; spread %.2f = (max - min) / median)\n", tr.speedup_spread);
    }
    if (!isnan(tr.ideal_speedup.median)) {
      print_stat("ideal speedup", &tr.ideal_speedup, 3, "x");
      printf(")\n");
    }
    if (!isnan(tr.overlap_efficiency.median)) {
      print_stat("overlap efficiency", &tr.overlap_efficiency, 3, "");
      printf(")\n");
    }
    return;
  }
  if (!isnan(s.speedup))
    printf("async speedup: %.3fx (sync %.4f s / async %.4f s)\n", s.speedup,
           total_of(r, OVL_MODE_SYNC), total_of(r, OVL_MODE_ASYNC));
  if (!isnan(s.ideal_speedup))
    printf("ideal speedup: %.3fx (sync / max(comp %.4f s, comm %.4f s))\n",
           s.ideal_speedup, total_of(r, OVL_MODE_COMP),
           total_of(r, OVL_MODE_COMM));
  if (!isnan(s.overlap_efficiency))
    printf("overlap efficiency: %.3f ((sync - async) / min(comp, comm); "
           "1 = the shorter part fully hidden)\n",
           s.overlap_efficiency);
}

/* The lines of mode check `c`, labelled `label`. */
static void print_check_lines(const ovl_program *prog, const char *label,
                              const ovl_check *c) {
  for (size_t k = 0; k < c->nmismatch; k++) {
    const ovl_mismatch *mm = &c->mismatch[k];
    ovl_var_info v;
    char idx[128];
    ovl_program_fetch_info(prog, mm->fetch_index, &v);
    ovl_var_index_text(&v, mm->first_index, idx, sizeof idx);
    printf("  %s: rank %d %s: ", label, mm->rank, mm->var);
    /* A NaN or an infinity fails even where the reference has the same:
     * say so, or "got inf, expected inf" reads like a pass. */
    if (mm->nonfinite > 0) {
      char nf[128];
      ovl_var_index_text(&v, mm->first_nonfinite, nf, sizeof nf);
      printf("%lld of %lld elements are not finite (NaN or an infinity), "
             "first at %s",
             (long long)mm->nonfinite, (long long)mm->numel, nf);
      if (mm->count == mm->nonfinite) {
        printf(": got %.9g, expected %.9g\n", mm->got, mm->expected);
        continue;
      }
      printf("; ");
    }
    printf("%lld of %lld elements differ; first at %s: got %.9g, "
           "expected %.9g\n",
           (long long)mm->count, (long long)mm->numel, idx, mm->got,
           mm->expected);
  }
}

void sim_print_mismatches(const ovl_report *r) {
  const ovl_program *prog = ovl_report_program(r);
  size_t ntrials = ovl_report_trial_count(r);
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    const char *name;
    char label[48], list[256];
    size_t first = 0, failed = 0, off = 0;
    ovl_report_mode m;
    /* After several trials: the lines of the first that failed, and which
     * failed (the same lines again and again would hide the table). */
    for (size_t t = 0; t < ntrials; t++) {
      if (ovl_report_trial_get(r, t, i, &m) != 0 || m.check == NULL ||
          m.check->nmismatch == 0)
        continue;
      if (failed++ == 0)
        first = t;
      if (off < sizeof list)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%zu",
                                failed > 1 ? ", " : "", t + 1);
    }
    if (failed == 0)
      continue;
    ovl_report_trial_get(r, first, i, &m);
    name = ovl_mode_name(m.mode);
    if (ntrials > 1)
      snprintf(label, sizeof label, "%s (trial %zu)", name, first + 1);
    else
      snprintf(label, sizeof label, "%s", name);
    print_check_lines(prog, label, m.check);
    if (ntrials > 1)
      printf("  %s: the check failed in %zu of %zu trials (%s)\n", name,
             failed, ntrials, list);
  }
}

void sim_print_tolerance(const ovl_report *r) {
  const ovl_program *prog = ovl_report_program(r);
  /* The distinct tolerances of the variables that differ, with their
   * dtypes (a dtype has one tolerance in a run). */
  double rt[OVL_DTYPE_COUNT], at[OVL_DTYPE_COUNT];
  bool seen[OVL_DTYPE_COUNT] = {false};
  int n = 0, first = -1;
  bool same = true;
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_report_mode_get(r, i, &m);
    for (size_t k = 0; m.check != NULL && k < m.check->nmismatch; k++) {
      const ovl_mismatch *mm = &m.check->mismatch[k];
      ovl_var_info v;
      ovl_program_fetch_info(prog, mm->fetch_index, &v);
      if ((unsigned)v.dtype >= OVL_DTYPE_COUNT || seen[v.dtype])
        continue;
      seen[v.dtype] = true;
      rt[v.dtype] = mm->rtol;
      at[v.dtype] = mm->atol;
      if (first < 0)
        first = v.dtype;
      else if (mm->rtol != rt[first] || mm->atol != at[first])
        same = false;
      n++;
    }
  }
  if (n == 0)
    return;
  if (same) {
    printf("tolerance |got-ref| <= %g + %g * |ref|", at[first], rt[first]);
    return;
  }
  printf("tolerance |got-ref| <= atol + rtol * |ref|:");
  for (int d = 0, k = 0; d < OVL_DTYPE_COUNT; d++)
    if (seen[d])
      printf("%s %s %g + %g", k++ ? "," : "", ovl_dtype_name((ovl_dtype)d),
             at[d], rt[d]);
}

/* Races listed and counted of one form; deadlocks alike. */
static uint64_t races_of(const ovl_report_mode *m) {
  return m->races != NULL
             ? ovl_races_count(m->races) + ovl_races_more(m->races)
             : 0;
}
static uint64_t deadlocks_of(const ovl_report_mode *m) {
  return m->deadlocks != NULL ? ovl_deadlocks_count(m->deadlocks) +
                                    ovl_deadlocks_more(m->deadlocks)
                              : 0;
}

/* A report's text on f (its format already called: text or NULL on
 * failure, err says why). Returns 0, or -1 with the message printed. */
static int put_text(FILE *f, char *text, const ovl_error *err,
                    const char *what) {
  if (text == NULL) {
    fprintf(stderr, "%s: %s: %s\n", progname, what, err->msg);
    return -1;
  }
  fputs(text, f);
  free(text);
  return 0;
}

/* "== sync ==", or for forms whose findings read the same (the library
 * says which: ovl_report_same_findings) "== sync, async (the same
 * findings) ==", printed once. */
static void print_section_head(const ovl_report *r, size_t i, FILE *f) {
  ovl_report_mode m;
  size_t n = 0;
  fputs("== ", f);
  for (size_t j = i; j < ovl_report_mode_count(r); j++) {
    if (ovl_report_same_findings(r, j) != (int)i)
      continue;
    ovl_report_mode_get(r, j, &m);
    fprintf(f, "%s%s", n++ ? ", " : "", ovl_mode_name(m.mode));
  }
  if (n == 0) {
    ovl_report_mode_get(r, i, &m);
    fputs(ovl_mode_name(m.mode), f);
  }
  fprintf(f, "%s ==\n", n > 1 ? " (the same findings)" : "");
}

long sim_print_races(const ovl_report *r, bool racy_only, FILE *f) {
  const ovl_program *prog = ovl_report_program(r);
  const ovl_mismatches *mm = ovl_report_mismatches(r);
  long total = 0;
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_error err = {0};
    char *text = NULL;
    bool races, deadlocks;
    int same = ovl_report_same_findings(r, i);
    ovl_report_mode_get(r, i, &m);
    races = m.races != NULL && (!racy_only || races_of(&m) > 0);
    deadlocks = m.deadlocks != NULL && (!racy_only || deadlocks_of(&m) > 0);
    /* A form that reads as an earlier one was printed with it. */
    if ((!races && !deadlocks) || (same >= 0 && same != (int)i))
      continue;
    /* Every section says which form(s) it checked. */
    print_section_head(r, i, f);
    if (races) {
      if (ovl_races_format(m.races, prog, 0, &text, &err) != OVL_OK)
        text = NULL;
      if (put_text(f, text, &err, "races") < 0)
        return -1;
    }
    if (deadlocks) {
      if (ovl_deadlocks_format(m.deadlocks, prog, 0, &text, &err) != OVL_OK)
        text = NULL;
      if (put_text(f, text, &err, "deadlocks") < 0)
        return -1;
    }
    total += (long)(races_of(&m) + deadlocks_of(&m));
  }
  if (mm != NULL && (!racy_only || ovl_mismatches_count(mm) > 0 ||
                     ovl_mismatches_more(mm) > 0)) {
    ovl_error err = {0};
    char *text = NULL;
    /* The forms that keep the communication all have the same. */
    fprintf(f, "== mismatches (every form) ==\n");
    if (ovl_mismatches_format(mm, prog, 0, &text, &err) != OVL_OK)
      text = NULL;
    if (put_text(f, text, &err, "mismatches") < 0)
      return -1;
    total += (long)(ovl_mismatches_count(mm) + ovl_mismatches_more(mm));
  }
  return total;
}

void sim_print_check_summary(const ovl_report *r, FILE *f) {
  ovl_report_summary s;
  ovl_report_summary_get(r, &s);
  fprintf(f, "%llu race%s, %llu mismatch%s, %llu deadlock%s",
          (unsigned long long)s.races, s.races == 1 ? "" : "s",
          (unsigned long long)s.mismatches, s.mismatches == 1 ? "" : "es",
          (unsigned long long)s.deadlocks, s.deadlocks == 1 ? "" : "s");
}

void sim_print_show(const ovl_report *r, int n) {
  const ovl_program *prog = ovl_report_program(r);
  int i = ovl_report_find(r, OVL_MODE_ASYNC);
  ovl_report_mode m;
  ovl_report_mode_get(r, i >= 0 ? (size_t)i : 0, &m);
  if (m.res == NULL)
    return;
  for (int rk = 0; rk < ovl_result_nranks(m.res); rk++) {
    for (size_t k = 0; k < ovl_program_fetch_count(prog); k++) {
      ovl_var_info v;
      char shape[256];
      const double *vals = ovl_result_fetched(m.res, rk, k);
      ovl_program_fetch_info(prog, k, &v);
      format_shape(&v, shape, sizeof shape);
      printf("rank %d %s %s:", rk, v.name, shape);
      for (int64_t e = 0; vals != NULL && e < v.numel && e < n; e++)
        printf(" %.9g", vals[e]);
      printf("\n");
    }
  }
}

int sim_json_envelope(const sim_options *o, int exit_status, char **head,
                      char **opts, char **tail) {
  char *mode = ovl_json_quote(o->mode != NULL ? o->mode : "both");
  char *trace = ovl_json_quote(o->trace), *svg = ovl_json_quote(o->svg);
  int ok = mode != NULL && trace != NULL && svg != NULL;
  *head = *opts = *tail = NULL;
  if (ok) {
    *head = strdup("\"tool\": \"overlap_sim\"");
    *opts = malloc(strlen(mode) + strlen(trace) + strlen(svg) + 64);
    *tail = malloc(64);
    ok = *head != NULL && *opts != NULL && *tail != NULL;
  }
  if (ok) {
    sprintf(*opts, "\"mode\": %s, \"trace\": %s, \"svg\": %s", mode, trace,
            svg);
    sprintf(*tail, "\"exit_status\": %d", exit_status);
  }
  free(mode);
  free(trace);
  free(svg);
  if (!ok) {
    free(*head);
    free(*opts);
    free(*tail);
    *head = *opts = *tail = NULL;
    return -1;
  }
  return 0;
}
