/*
 * One measurement of a calibration (pipeline/calibrate.h): a generated
 * schedule's text parsed, bound for the world's ranks and run, and what
 * is read of the run (op times, iteration times); and the text of a
 * kernel run alone or beside communication.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/calibrate.h"

void ovl__cal_begin(ovl__cal *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->what, sizeof c->what, fmt, ap);
  va_end(ap);
  if (c->o.progress != NULL)
    c->o.progress(c->o.ctx, c->what);
}

bool ovl__cal_spent(const ovl__cal *c) {
  return ovl__now() - c->t0 >= c->o.budget_s;
}

ovl_status ovl__cal_fail(ovl__cal *c, ovl_status st, const char *fmt, ...) {
  char msg[OVL_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ovl__err(c->err, st, "calibrate: %s: %s", c->what, msg);
}

void ovl__cal_meas_free(ovl__cal_meas *m) {
  ovl_result_free(m->res);
  ovl_program_free(m->prog);
  m->res = NULL;
  m->prog = NULL;
}

ovl_status ovl__cal_run(ovl__cal *c, char *text, int warmup, int iters,
                        bool op_times, bool graph, ovl__cal_meas *m) {
  ovl_parse_opts po = {.size = sizeof po, .nranks = c->nranks};
  ovl_run_opts ro = {.size = sizeof ro,
                     .iters = iters,
                     .warmup = warmup,
                     .op_times = op_times,
                     .graph = graph};
  ovl_status st;
  memset(m, 0, sizeof *m);
  if (text == NULL)
    return ovl__cal_fail(c, OVL_ENOMEM, "out of memory");
  st = ovl_program_parse(text, strlen(text), "<calibrate>", &po, &m->prog,
                         c->err);
  free(text);
  if (st == OVL_OK)
    st = ovl_world_run(c->world, m->prog, &ro, &m->res, c->err);
  if (st != OVL_OK) {
    ovl__err_prefix(c->err, "calibrate: %s: ", c->what);
    ovl__cal_meas_free(m);
  }
  return st;
}

double ovl__cal_op_s(const ovl__cal_meas *m, const char *name) {
  const ovl_program *p = m->prog;
  int iters = ovl_result_iters(m->res);
  double sum = 0;
  long n = 0;
  for (int r = 0; r < p->nranks; r++) {
    const double *t = ovl_result_op_times(m->res, r);
    if (t == NULL)
      continue;
    for (size_t i = 0; i < p->nops; i++)
      if (ovl__op_on_rank(&p->ops[i], r) &&
          strcmp(p->ops[i].def->name, name) == 0) {
        sum += t[i];
        n++;
      }
  }
  return n > 0 && iters > 0 ? sum / ((double)n * iters) : NAN;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double ovl__cal_iter_s(const ovl__cal_meas *m) {
  int n = ovl_result_iters(m->res);
  const double *t = ovl_result_times(m->res);
  double *buf, med;
  if (n <= 0 || t == NULL || (buf = malloc((size_t)n * sizeof *buf)) == NULL)
    return NAN;
  memcpy(buf, t, (size_t)n * sizeof *buf);
  qsort(buf, (size_t)n, sizeof *buf, cmp_double);
  med = n % 2 ? buf[n / 2] : (buf[n / 2 - 1] + buf[n / 2]) / 2;
  free(buf);
  return med;
}

int ovl__cal_reps(double est_s, double target_s, int lo, int hi) {
  double r;
  if (!(est_s > 0))
    return hi;
  r = ceil(target_s / est_s);
  return r < lo ? lo : r > hi ? hi : (int)r;
}

/* ------------------------------------------------------------------ */
/* Kernels                                                             */
/* ------------------------------------------------------------------ */

void ovl__cal_kernel_of(const ovl_program *prog, size_t i, ovl__cal_kernel *k) {
  const ovl__op *op = &prog->ops[i];
  memset(k, 0, sizeof *k);
  k->name = op->def->name;
  k->nin = op->nin > 2 ? 2 : op->nin;
  k->dtype = (int)prog->vars[op->out].dtype;
  for (int j = 0; j < k->nin; j++) {
    const ovl__var *v = &prog->vars[op->in[j]];
    k->ndim[j] = v->ndim;
    memcpy(k->dims[j], v->dims, sizeof v->dims);
  }
  k->scale = op->scale;
  k->bias = op->bias;
  k->tx = op->trans_x;
  k->ty = op->trans_y;
}

void ovl__cal_kernel_scale(int64_t numel, ovl__cal_kernel *k) {
  memset(k, 0, sizeof *k);
  k->name = "scale";
  k->nin = 1;
  k->dtype = OVL_DTYPE_FLOAT32;
  k->ndim[0] = 1;
  k->dims[0][0] = numel;
  k->scale = 1.0;
}

void ovl__cal_kernel_matmul(int dtype, int64_t m, int64_t n, int64_t kk,
                            bool tx, bool ty, ovl__cal_kernel *k) {
  memset(k, 0, sizeof *k);
  k->name = "matmul_v2";
  k->nin = 2;
  k->dtype = dtype;
  k->ndim[0] = k->ndim[1] = 2;
  k->dims[0][0] = tx ? kk : m;
  k->dims[0][1] = tx ? m : kk;
  k->dims[1][0] = ty ? n : kk;
  k->dims[1][1] = ty ? kk : n;
  k->tx = tx;
  k->ty = ty;
}

void ovl__cal_kernel_decl(ovl__sbuf *b, const ovl__cal_kernel *k) {
  /* A constant fill: generated fast, and no value slows a kernel down
   * (no denormal, no infinity). */
  for (int j = 0; j < k->nin; j++) {
    ovl__sb_printf(b, "k%d = data(shape=[", j);
    for (int d = 0; d < k->ndim[j]; d++)
      ovl__sb_printf(b, "%s%lld", d ? ", " : "", (long long)k->dims[j][d]);
    ovl__sb_printf(b, "], dtype=%s, init=fill, value=1.0)\n",
                   ovl_dtype_name((ovl_dtype)k->dtype));
  }
}

void ovl__cal_kernel_call(ovl__sbuf *b, const ovl__cal_kernel *k,
                          const char *out) {
  ovl__sb_printf(b, "%s = %s(", out, k->name);
  for (int j = 0; j < k->nin; j++)
    ovl__sb_printf(b, "%sk%d", j ? ", " : "", j);
  if (strcmp(k->name, "scale") == 0)
    ovl__sb_printf(b, ", scale=%.17g, bias=%.17g", k->scale, k->bias);
  if (strcmp(k->name, "matmul_v2") == 0)
    ovl__sb_printf(b, ", trans_x=%s, trans_y=%s", k->tx ? "true" : "false",
                   k->ty ? "true" : "false");
  ovl__sb_puts(b, ")\n");
}

/* `k` alone on calc, `reps` calls an iteration. */
static char *kernel_text(const ovl__cal_kernel *k, int reps) {
  ovl__sbuf b = {0};
  ovl__sb_puts(&b, "# calibrate: a kernel alone on the calc stream\n");
  ovl__cal_kernel_decl(&b, k);
  ovl__sb_printf(&b, "repeat %d {\n  ", reps);
  ovl__cal_kernel_call(&b, k, "y");
  ovl__sb_puts(&b, "}\n");
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

/* Seconds per iteration a measurement aims at (the repeats of an op). */
#define TARGET_S 4e-3

ovl_status ovl__cal_kernel_s(ovl__cal *c, const ovl__cal_kernel *k,
                             double *out) {
  ovl__cal_meas m;
  ovl_status st;
  double t, op_t, eager = NAN;
  int reps;
  /* A short run (one iteration after one warmup) sets the repeats. */
  st = ovl__cal_run(c, kernel_text(k, 2), 1, 1, true, false, &m);
  if (st != OVL_OK)
    return st;
  t = ovl__cal_op_s(&m, k->name);
  ovl__cal_meas_free(&m);
  reps = ovl__cal_reps(t, TARGET_S, 1, 200);
  st = ovl__cal_run(c, kernel_text(k, reps), c->o.warmup, c->o.iters, true,
                    false, &m);
  if (st != OVL_OK)
    return st;
  t = ovl__cal_op_s(&m, k->name);
  ovl__cal_meas_free(&m);
  if (!(t > 0))
    return ovl__cal_fail(c, OVL_EINVAL, "no op time was measured");
  /* The timers around each call cost the device time too (cuda: about a
   * microsecond an event pair): the same run untimed, its iteration over
   * its calls, is the better figure where the device, not the host,
   * sets the pace (then it is the smaller). */
  st = ovl__cal_run(c, kernel_text(k, reps), c->o.warmup, c->o.iters, false,
                    false, &m);
  if (st != OVL_OK)
    return st;
  op_t = t;
  eager = ovl__cal_iter_s(&m) / reps;
  if (eager > 0 && eager < t)
    t = eager;
  ovl__cal_meas_free(&m);
  /* As a graph the host launches them all at once: the device's own
   * pace, also where the host's launches are slower than the kernels.
   * Where the device set the eager pace too, the difference is the gap
   * the device leaves between eager kernels (the model adds it back:
   * host.gap_us). */
  if (ovl_world_has_graphs(c->world)) {
    double g;
    st = ovl__cal_run(c, kernel_text(k, reps), c->o.warmup, c->o.iters, false,
                      true, &m);
    if (st != OVL_OK)
      return st;
    g = ovl__cal_iter_s(&m) / reps;
    ovl__cal_meas_free(&m);
    if (g > 0 && g < t) {
      if (eager > 0 && eager <= 1.1 * op_t && eager > g) {
        c->gap_sum += eager - g;
        c->gap_n++;
      }
      t = g;
    }
  }
  *out = t;
  return OVL_OK;
}
