/*
 * Calibration profiles (backend/model.h; docs/MODEL.md, "Profiles"): what
 * a real backend measured on one machine for one schedule, read back
 * with every key checked, written as JSON, and the fit of a
 * communication kind's times.
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/model_cfg.h"
#include "core/elemfn.h"

static const char *const ew_names[] = {
#define OVL__EW_NAME(name, arity, expr) #name,
    OVL_EW_LIST(OVL__EW_NAME)
#undef OVL__EW_NAME
};

/* "scale" for OVL_EW_SCALE. */
static void ew_name(int ew, char *buf, size_t size) {
  size_t i = 0;
  const char *s = ew >= 0 && ew < OVL__EW_COUNT ? ew_names[ew] : "?";
  for (; s[i] != '\0' && i + 1 < size; i++)
    buf[i] = (char)tolower((unsigned char)s[i]);
  buf[i] = '\0';
}

void ovl__mkernel_name(const ovl__mkernel *k, char *buf, size_t size) {
  char ew[16];
  if (k->matmul) {
    snprintf(buf, size, "matmul %s %lldx%lldx%lld%s%s",
             ovl_dtype_name((ovl_dtype)k->dtype), (long long)k->m,
             (long long)k->n, (long long)k->k, k->tx ? " (x^T)" : "",
             k->ty ? " (y^T)" : "");
    return;
  }
  ew_name(k->ew, ew, sizeof ew);
  snprintf(buf, size, "%s %s [%lld]", ew, ovl_dtype_name((ovl_dtype)k->dtype),
           (long long)k->numel);
}

uint64_t ovl__program_sig(const ovl_program *prog) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < prog->nops; i++)
    for (const char *s = prog->ops[i].def->name; *s != '\0'; s++) {
      h ^= (unsigned char)*s;
      h *= 1099511628211ull;
    }
  return h;
}

void ovl__fit_comm(const double *bytes, const double *secs, int n,
                   ovl__mfit *out) {
  /* Minimise sum ((lat + b x - t) / t)^2 over lat and b = 1 / bw: the
   * normal equations of a weighted least squares, weights 1 / t^2. */
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0, det;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < n; i++) {
    double w = 1.0 / (secs[i] * secs[i]);
    s00 += w;
    s01 += w * bytes[i];
    s11 += w * bytes[i] * bytes[i];
    r0 += w * secs[i];
    r1 += w * secs[i] * bytes[i];
  }
  det = s00 * s11 - s01 * s01;
  out->points = n;
  if (n >= 2 && det > 0) {
    double lat = (r0 * s11 - r1 * s01) / det;
    double b = (s00 * r1 - s01 * r0) / det;
    if (b > 0 && lat >= 0) {
      out->have = true;
      out->lat_s = lat;
      out->bw = 1.0 / b;
      return;
    }
    if (b > 0) { /* a negative intercept: through the origin */
      out->have = true;
      out->lat_s = 0;
      out->bw = s11 / r1;
      return;
    }
  }
  if (n >= 1) { /* too few points, or flat: latency only */
    out->have = true;
    out->lat_s = r0 / s00;
    out->bw = INFINITY;
  }
}

void ovl__profile_free(ovl__profile *p) {
  free(p->kernels);
  p->kernels = NULL;
  p->nkernels = 0;
}

static bool read_kernel(ovl__cfg *c, const ovl__json *o, ovl__mkernel *k) {
  static const char *const known[] = {"op", "dtype",   "numel",   "m",  "n",
                                      "k",  "trans_x", "trans_y", "us", NULL};
  char op[32] = "", dt[16] = "";
  ovl_dtype d;
  long v;
  memset(k, 0, sizeof *k);
  if (!ovl__cfg_object(c, o, "kernels[]", known) ||
      !ovl__cfg_str(c, o, "kernels[]", "op", false, op, sizeof op) ||
      !ovl__cfg_str(c, o, "kernels[]", "dtype", false, dt, sizeof dt) ||
      !ovl__cfg_num(c, o, "kernels[]", "us", 0, false, 1e-6, false, &k->s))
    return false;
  if (!ovl_dtype_from_name(dt, &d))
    return ovl__cfg_fail(c, ovl__json_get(o, "dtype"),
                         "'kernels[].dtype': unknown dtype '%s'", dt);
  k->dtype = (int)d;
  if (strcmp(op, "matmul") == 0) {
    k->matmul = true;
    if (!ovl__cfg_int(c, o, "kernels[]", "m", 1, LONG_MAX, false, &v))
      return false;
    k->m = v;
    if (!ovl__cfg_int(c, o, "kernels[]", "n", 1, LONG_MAX, false, &v))
      return false;
    k->n = v;
    if (!ovl__cfg_int(c, o, "kernels[]", "k", 1, LONG_MAX, false, &v))
      return false;
    k->k = v;
    return ovl__cfg_bool(c, o, "kernels[]", "trans_x", true, &k->tx) &&
           ovl__cfg_bool(c, o, "kernels[]", "trans_y", true, &k->ty);
  }
  k->ew = -1;
  for (int e = 0; e < OVL__EW_COUNT; e++) {
    char name[16];
    ew_name(e, name, sizeof name);
    if (strcmp(op, name) == 0)
      k->ew = e;
  }
  if (k->ew < 0)
    return ovl__cfg_fail(c, ovl__json_get(o, "op"),
                         "'kernels[].op': unknown kernel '%s' (matmul, "
                         "assign, add, sub, mul, div, max, scale)",
                         op);
  if (!ovl__cfg_int(c, o, "kernels[]", "numel", 1, LONG_MAX, false, &v))
    return false;
  k->numel = v;
  return true;
}

static void read_comm(ovl__cfg *c, const ovl__json *o, ovl__profile *p) {
  static const char *const known[] = {"lat_us", "GBps", "points", NULL};
  for (size_t i = 0; o != NULL && c->st == OVL_OK && i < o->n; i++) {
    int kind = ovl__comm_kind_from_name(o->keys[i]);
    const ovl__json *f = &o->items[i];
    ovl__mfit *fit;
    long pts = 0;
    if (kind < 0) {
      ovl__cfg_fail(c, f, "'comm': unknown kind '%s'", o->keys[i]);
      return;
    }
    fit = &p->fit[kind];
    if (!ovl__cfg_object(c, f, "comm.KIND", known) ||
        !ovl__cfg_num(c, f, "comm.KIND", "lat_us", 0, false, 1e-6, false,
                      &fit->lat_s) ||
        !ovl__cfg_num(c, f, "comm.KIND", "GBps", 0, true, 1e9, false,
                      &fit->bw) ||
        !ovl__cfg_int(c, f, "comm.KIND", "points", 1, 1000000, false, &pts))
      return;
    fit->points = (int)pts;
    fit->have = true;
  }
}

static void read_contention(ovl__cfg *c, const ovl__json *o, ovl__profile *p) {
  static const char *const known[] = {"kernel_slow", "comm_slow", NULL};
  static const char *const kc[] = {"mem", "matmul", NULL};
  for (size_t i = 0; o != NULL && c->st == OVL_OK && i < o->n; i++) {
    int kind = ovl__comm_kind_from_name(o->keys[i]);
    const ovl__json *e = &o->items[i], *ks, *cs;
    if (kind < 0) {
      ovl__cfg_fail(c, e, "'contention': unknown kind '%s'", o->keys[i]);
      return;
    }
    if (!ovl__cfg_object(c, e, "contention.KIND", known))
      return;
    ks = ovl__cfg_member(c, e, "contention.KIND", "kernel_slow", false);
    cs = ovl__cfg_member(c, e, "contention.KIND", "comm_slow", false);
    if (ks == NULL || cs == NULL ||
        !ovl__cfg_object(c, ks, "contention.KIND.kernel_slow", kc) ||
        !ovl__cfg_object(c, cs, "contention.KIND.comm_slow", kc))
      return;
    for (int k = 0; k < OVL__NKC; k++) {
      ovl__cfg_num(c, ks, "contention.KIND.kernel_slow", kc[k], 1, false, 1,
                   true, &p->kernel_slow[kind][k]);
      ovl__cfg_num(c, cs, "contention.KIND.comm_slow", kc[k], 1, false, 1, true,
                   &p->comm_slow[kind][k]);
    }
  }
}

ovl_status ovl__profile_load(const char *path, ovl__profile *p,
                             ovl_error *err) {
  static const char *const known[] = {"format",     "machine", "schedule",
                                      "host",       "kernels", "comm",
                                      "contention", NULL};
  static const char *const known_m[] = {"device", "devices",  "ranks", "nccl",
                                        "cuda",   "hostname", "date",  NULL};
  static const char *const known_s[] = {"name", "sig", NULL};
  ovl__json *j = NULL;
  ovl__cfg c = {.file = path, .err = err, .st = OVL_OK};
  const ovl__json *o;
  char format[64] = "", sig[32] = "", host[128];
  long v;
  ovl_status st = ovl__json_load(path, &j, err);
  if (st != OVL_OK)
    return st;
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", path);
  /* The format first: a machine file given as a profile says so. */
  if (j->type == OVL__J_OBJ &&
      ovl__cfg_str(&c, j, "", "format", false, format, sizeof format) &&
      strcmp(format, "overlap-sim profile 1") != 0)
    ovl__cfg_fail(&c, ovl__json_get(j, "format"),
                  "'format': expected \"overlap-sim profile 1\", found \"%s\" "
                  "(is this a profile? --calibrate writes one)",
                  format);
  ovl__cfg_object(&c, j, "", known);
  o = ovl__cfg_member(&c, j, "", "machine", false);
  if (o != NULL && ovl__cfg_object(&c, o, "machine", known_m)) {
    ovl__cfg_str(&c, o, "machine", "device", false, p->device,
                 sizeof p->device);
    if (ovl__cfg_int(&c, o, "machine", "devices", 1, 1 << 20, false, &v))
      p->ndevices = (int)v;
    if (ovl__cfg_int(&c, o, "machine", "ranks", 1, OVL_MAX_RANKS, false, &v))
      p->nranks = (int)v;
    ovl__cfg_str(&c, o, "machine", "nccl", false, p->nccl, sizeof p->nccl);
    ovl__cfg_str(&c, o, "machine", "cuda", false, p->cuda, sizeof p->cuda);
    ovl__cfg_str(&c, o, "machine", "hostname", true, host, sizeof host);
    ovl__cfg_str(&c, o, "machine", "date", false, p->date, sizeof p->date);
  }
  o = ovl__cfg_member(&c, j, "", "schedule", false);
  if (o != NULL && ovl__cfg_object(&c, o, "schedule", known_s)) {
    ovl__cfg_str(&c, o, "schedule", "name", false, p->schedule,
                 sizeof p->schedule);
    if (ovl__cfg_str(&c, o, "schedule", "sig", true, sig, sizeof sig) &&
        sig[0] != '\0') {
      p->have_sig = true;
      char *end;
      p->program_sig = strtoull(sig, &end, 16);
      if (strlen(sig) != 16 || *end != '\0')
        ovl__cfg_fail(&c, ovl__json_get(o, "sig"),
                      "'schedule.sig': expected 16 hex digits");
    }
  }
  ovl__cfg_host(&c, j, &p->host);
  o = ovl__cfg_member(&c, j, "", "kernels", false);
  if (o != NULL && c.st == OVL_OK) {
    if (o->type != OVL__J_ARR) {
      ovl__cfg_fail(&c, o, "'kernels': expected an array");
    } else if (o->n > 0) {
      p->kernels = calloc(o->n, sizeof *p->kernels);
      if (p->kernels == NULL)
        c.st = ovl__err(err, OVL_ENOMEM, "%s: out of memory", path);
      for (size_t i = 0; c.st == OVL_OK && i < o->n; i++)
        if (read_kernel(&c, &o->items[i], &p->kernels[i]))
          p->nkernels = i + 1;
    }
  }
  o = ovl__cfg_member(&c, j, "", "comm", false);
  if (o != NULL && c.st == OVL_OK && o->type != OVL__J_OBJ)
    ovl__cfg_fail(&c, o, "'comm': expected an object");
  read_comm(&c, o, p);
  o = ovl__cfg_member(&c, j, "", "contention", false);
  if (o != NULL && c.st == OVL_OK && o->type != OVL__J_OBJ)
    ovl__cfg_fail(&c, o, "'contention': expected an object");
  read_contention(&c, o, p);
  ovl__json_free(j);
  if (c.st != OVL_OK)
    ovl__profile_free(p);
  return c.st;
}

char *ovl__profile_json(const ovl__profile *p) {
  ovl__sbuf b = {0};
  char ew[16];
  ovl__sb_puts(&b, "{\n  \"format\": \"overlap-sim profile 1\",\n");
  ovl__sb_puts(&b, "  \"machine\": {\"device\": ");
  ovl__sb_json_str(&b, p->device);
  ovl__sb_printf(&b,
                 ", \"devices\": %d, \"ranks\": %d, \"nccl\": ", p->ndevices,
                 p->nranks);
  ovl__sb_json_str(&b, p->nccl);
  ovl__sb_puts(&b, ", \"cuda\": ");
  ovl__sb_json_str(&b, p->cuda);
  ovl__sb_puts(&b, ", \"date\": ");
  ovl__sb_json_str(&b, p->date);
  ovl__sb_puts(&b, "},\n  \"schedule\": {\"name\": ");
  ovl__sb_json_str(&b, p->schedule);
  ovl__sb_printf(&b, ", \"sig\": \"%016llx\"},\n  \"host\": {",
                 (unsigned long long)p->program_sig);
  for (int k = 0; k < OVL__NHOST; k++)
    ovl__sb_printf(&b, "\"%s\": %.4g, ", ovl__host_kind_name(k),
                   p->host.op_s[k] * 1e6);
  ovl__sb_printf(&b,
                 "\"graph_launch_us\": %.4g, \"sync_us\": %.4g, \"gap_us\": "
                 "%.4g, \"graph_gap_us\": %.4g, \"iter_us\": %.4g},\n  "
                 "\"kernels\": [",
                 p->host.graph_launch_s * 1e6, p->host.sync_s * 1e6,
                 p->host.gap_s * 1e6, p->host.graph_gap_s * 1e6,
                 p->host.iter_s * 1e6);
  for (size_t i = 0; i < p->nkernels; i++) {
    const ovl__mkernel *k = &p->kernels[i];
    const char *dt = ovl_dtype_name((ovl_dtype)k->dtype);
    ovl__sb_puts(&b, i ? ",\n    " : "\n    ");
    if (k->matmul) {
      ovl__sb_printf(&b,
                     "{\"op\": \"matmul\", \"dtype\": \"%s\", \"m\": %lld, "
                     "\"n\": %lld, \"k\": %lld, \"trans_x\": %s, \"trans_y\": "
                     "%s, \"us\": %.6g}",
                     dt, (long long)k->m, (long long)k->n, (long long)k->k,
                     k->tx ? "true" : "false", k->ty ? "true" : "false",
                     k->s * 1e6);
    } else {
      ew_name(k->ew, ew, sizeof ew);
      ovl__sb_printf(&b,
                     "{\"op\": \"%s\", \"dtype\": \"%s\", \"numel\": %lld, "
                     "\"us\": %.6g}",
                     ew, dt, (long long)k->numel, k->s * 1e6);
    }
  }
  ovl__sb_puts(&b, p->nkernels ? "\n  ],\n  \"comm\": {" : "],\n  \"comm\": {");
  for (int k = 0, n = 0; k < OVL__NCOMM; k++) {
    const ovl__mfit *f = &p->fit[k];
    if (!f->have)
      continue;
    ovl__sb_printf(&b,
                   "%s\n    \"%s\": {\"lat_us\": %.6g, \"GBps\": %.6g, "
                   "\"points\": %d}",
                   n++ ? "," : "", ovl__comm_kind_name(k), f->lat_s * 1e6,
                   isfinite(f->bw) ? f->bw / 1e9 : 1e9, f->points);
  }
  ovl__sb_puts(&b, "\n  },\n  \"contention\": {");
  for (int k = 0, n = 0; k < OVL__NCOMM; k++) {
    if (p->kernel_slow[k][0] == 0 && p->kernel_slow[k][1] == 0)
      continue;
    ovl__sb_printf(&b,
                   "%s\n    \"%s\": {\"kernel_slow\": {\"mem\": %.4f, "
                   "\"matmul\": %.4f}, \"comm_slow\": {\"mem\": %.4f, "
                   "\"matmul\": %.4f}}",
                   n++ ? "," : "", ovl__comm_kind_name(k),
                   p->kernel_slow[k][0] < 1 ? 1 : p->kernel_slow[k][0],
                   p->kernel_slow[k][1] < 1 ? 1 : p->kernel_slow[k][1],
                   p->comm_slow[k][0] < 1 ? 1 : p->comm_slow[k][0],
                   p->comm_slow[k][1] < 1 ? 1 : p->comm_slow[k][1]);
  }
  ovl__sb_puts(&b, "\n  }\n}\n");
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  return b.s;
}
