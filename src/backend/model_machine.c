/*
 * Machine files and NCCL's formulas (backend/model.h; docs/MODEL.md,
 * "Machine files" and "Beyond the box"): what a machine is, the built-in
 * default, and the seconds a collective takes on it at any rank count.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/model_cfg.h"

/* One node of 8 H200 joined by NVSwitch, 8 x 400 Gb/s InfiniBand to the
 * other nodes: machines/h200-8x400g.json, whose "sources" say where each
 * figure comes from. Kept equal to that file (tests/machines.sh checks). */
void ovl__machine_default(ovl__machine *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "h200-8x400g");
  snprintf(m->device, sizeof m->device, "NVIDIA H200");
  m->gpus_per_node = 8;
  m->intra = (ovl__link){.bw = 370e9, .lat_s = 1.0e-6};
  m->inter = (ovl__link){.bw = 370e9, .lat_s = 6.0e-6};
  m->algo = OVL__ALGO_AUTO;
  m->coll_base_s = 5.0e-6;
  m->simple_base_s = 36.9e-6;
  m->ll_bw_frac = 0.25;
  m->mem_bw = 3.95e12;
  m->flops[OVL_DTYPE_FLOAT32] = 60e12;
  m->flops[OVL_DTYPE_FLOAT64] = 60e12;
  m->flops[OVL_DTYPE_FLOAT16] = 830e12;
  m->flops[OVL_DTYPE_BFLOAT16] = 830e12;
  m->kernel_min_s = 1.15e-6;
  m->host.op_s[OVL__H_KERNEL] = 3.9e-6;
  m->host.op_s[OVL__H_COLL] = 5.5e-6;
  m->host.op_s[OVL__H_P2P] = 5.5e-6;
  m->host.op_s[OVL__H_RECORD] = 1.0e-6;
  m->host.op_s[OVL__H_WAIT] = 1.0e-6;
  m->host.op_s[OVL__H_DELAY] = 3.9e-6;
  m->host.graph_launch_s = 10e-6;
  m->host.sync_s = 8e-6;
  m->host.gap_s = 2.3e-6;
  m->host.graph_gap_s = 0.3e-6;
  m->d2h = (ovl__link){.bw = 50e9, .lat_s = 10e-6};
  m->kernel_slow[OVL__KC_MEM] = 1.17;
  m->kernel_slow[OVL__KC_MATMUL] = 1.2;
  m->comm_slow[OVL__KC_MEM] = 1.60;
  m->comm_slow[OVL__KC_MATMUL] = 1.20;
}

static void read_link(ovl__cfg *c, const ovl__json *top, const char *key,
                      ovl__link *l) {
  static const char *const known[] = {"busbw_GBps", "lat_us", NULL};
  const ovl__json *o = ovl__cfg_member(c, top, "", key, false);
  if (o == NULL || !ovl__cfg_object(c, o, key, known))
    return;
  ovl__cfg_num(c, o, key, "busbw_GBps", 0, true, 1e9, false, &l->bw);
  ovl__cfg_num(c, o, key, "lat_us", 0, false, 1e-6, false, &l->lat_s);
}

static void read_device(ovl__cfg *c, const ovl__json *top, ovl__machine *m) {
  static const char *const known[] = {"mem_GBps", "tflops", "kernel_min_us",
                                      NULL};
  static const char *const dts[] = {"float32", "float64", "float16", "bfloat16",
                                    NULL};
  const ovl__json *o = ovl__cfg_member(c, top, "", "device_perf", false);
  const ovl__json *t;
  if (o == NULL || !ovl__cfg_object(c, o, "device_perf", known))
    return;
  ovl__cfg_num(c, o, "device_perf", "mem_GBps", 0, true, 1e9, false,
               &m->mem_bw);
  ovl__cfg_num(c, o, "device_perf", "kernel_min_us", 0, false, 1e-6, false,
               &m->kernel_min_s);
  t = ovl__cfg_member(c, o, "device_perf", "tflops", false);
  if (t == NULL || !ovl__cfg_object(c, t, "device_perf.tflops", dts))
    return;
  for (int d = 0; d < OVL_DTYPE_COUNT; d++)
    ovl__cfg_num(c, t, "device_perf.tflops", dts[d], 0, true, 1e12, false,
                 &m->flops[d]);
}

static void read_slow(ovl__cfg *c, const ovl__json *o, const char *path,
                      double *slow) {
  static const char *const known[] = {"mem", "matmul", NULL};
  if (o == NULL || !ovl__cfg_object(c, o, path, known))
    return;
  ovl__cfg_num(c, o, path, "mem", 1, false, 1, false, &slow[OVL__KC_MEM]);
  ovl__cfg_num(c, o, path, "matmul", 1, false, 1, false, &slow[OVL__KC_MATMUL]);
}

static void read_coll(ovl__cfg *c, const ovl__json *top, ovl__machine *m) {
  static const char *const known[] = {"algorithm", "base_us", "simple_base_us",
                                      "ll_bw_frac", NULL};
  const ovl__json *o = ovl__cfg_member(c, top, "", "nccl", false);
  char algo[16] = "";
  if (o == NULL || !ovl__cfg_object(c, o, "nccl", known))
    return;
  if (ovl__cfg_str(c, o, "nccl", "algorithm", false, algo, sizeof algo)) {
    if (strcmp(algo, "ring") == 0)
      m->algo = OVL__ALGO_RING;
    else if (strcmp(algo, "tree") == 0)
      m->algo = OVL__ALGO_TREE;
    else if (strcmp(algo, "auto") == 0)
      m->algo = OVL__ALGO_AUTO;
    else
      ovl__cfg_fail(c, ovl__json_get(o, "algorithm"),
                    "'nccl.algorithm': expected \"ring\", \"tree\" or "
                    "\"auto\", found \"%s\"",
                    algo);
  }
  ovl__cfg_num(c, o, "nccl", "base_us", 0, false, 1e-6, false, &m->coll_base_s);
  ovl__cfg_num(c, o, "nccl", "simple_base_us", 0, false, 1e-6, false,
               &m->simple_base_s);
  ovl__cfg_num(c, o, "nccl", "ll_bw_frac", 0, true, 1, false, &m->ll_bw_frac);
  if (c->st == OVL_OK && m->ll_bw_frac > 1)
    ovl__cfg_fail(c, ovl__json_get(o, "ll_bw_frac"),
                  "'nccl.ll_bw_frac': expected a number in (0, 1]");
}

ovl_status ovl__machine_load(const char *path, ovl__machine *m,
                             ovl_error *err) {
  static const char *const known[] = {
      "format",     "name",    "device",      "gpus_per_node", "intra",
      "inter",      "nccl",    "device_perf", "host",          "d2h",
      "contention", "sources", NULL};
  static const char *const known_cont[] = {"kernel_slow", "comm_slow", NULL};
  static const char *const known_d2h[] = {"GBps", "lat_us", NULL};
  ovl__json *j = NULL;
  ovl__cfg c = {.file = path, .err = err, .st = OVL_OK};
  char format[64] = "";
  long gpn = 0;
  ovl_status st = ovl__json_load(path, &j, err);
  if (st != OVL_OK)
    return st;
  memset(m, 0, sizeof *m);
  /* The format first: a profile given as a machine file says so. */
  if (j->type == OVL__J_OBJ &&
      ovl__cfg_str(&c, j, "", "format", false, format, sizeof format) &&
      strcmp(format, "overlap-sim machine 1") != 0)
    ovl__cfg_fail(&c, ovl__json_get(j, "format"),
                  "'format': expected \"overlap-sim machine 1\", found "
                  "\"%s\" (is this a machine file?)",
                  format);
  ovl__cfg_object(&c, j, "", known);
  ovl__cfg_str(&c, j, "", "name", false, m->name, sizeof m->name);
  ovl__cfg_str(&c, j, "", "device", false, m->device, sizeof m->device);
  if (ovl__cfg_int(&c, j, "", "gpus_per_node", 1, 4096, false, &gpn))
    m->gpus_per_node = (int)gpn;
  read_link(&c, j, "intra", &m->intra);
  read_link(&c, j, "inter", &m->inter);
  read_coll(&c, j, m);
  read_device(&c, j, m);
  ovl__cfg_host(&c, j, &m->host);
  {
    const ovl__json *o = ovl__cfg_member(&c, j, "", "d2h", false);
    if (o != NULL && ovl__cfg_object(&c, o, "d2h", known_d2h)) {
      ovl__cfg_num(&c, o, "d2h", "GBps", 0, true, 1e9, false, &m->d2h.bw);
      ovl__cfg_num(&c, o, "d2h", "lat_us", 0, false, 1e-6, false,
                   &m->d2h.lat_s);
    }
  }
  {
    const ovl__json *o = ovl__cfg_member(&c, j, "", "contention", false);
    if (o != NULL && ovl__cfg_object(&c, o, "contention", known_cont)) {
      read_slow(&c, ovl__cfg_member(&c, o, "contention", "kernel_slow", false),
                "contention.kernel_slow", m->kernel_slow);
      read_slow(&c, ovl__cfg_member(&c, o, "contention", "comm_slow", false),
                "contention.comm_slow", m->comm_slow);
    }
  }
  {
    const ovl__json *s = ovl__cfg_member(&c, j, "", "sources", true);
    if (s != NULL && s->type != OVL__J_ARR)
      ovl__cfg_fail(&c, s, "'sources': expected an array of strings");
  }
  ovl__json_free(j);
  return c.st;
}

/* ------------------------------------------------------------------ */
/* NCCL's formulas                                                     */
/* ------------------------------------------------------------------ */

/* nccl-tests' "size" of a collective called with NCCL's count, and its
 * bus factor (nccl-tests doc/PERFORMANCE.md): the bytes each rank moves
 * over its links are size * factor. */
static double bus_bytes(int kind, size_t count, size_t esize, int n,
                        double *steps) {
  double bytes = (double)count * (double)esize, f;
  switch (kind) {
  case OVL_COLL_ALLREDUCE:
    f = 2.0 * (n - 1) / n;
    *steps = 2.0 * (n - 1);
    return bytes * f;
  case OVL_COLL_ALLGATHER: /* count: each rank's part */
  case OVL_COLL_REDUCESCATTER:
    f = (double)(n - 1) / n;
    *steps = n - 1;
    return bytes * n * f;
  case OVL_COLL_ALLTOALL: /* count: all of it */
    f = (double)(n - 1) / n;
    *steps = n - 1;
    return bytes * f;
  case OVL_COLL_BARRIER:
    *steps = 2.0 * (n - 1);
    return 0;
  default: /* broadcast, reduce: pipelined along the ring */
    *steps = n - 1;
    return n > 1 ? bytes : 0;
  }
}

/* The faster of NCCL's two regimes (LL, Simple) after latency `lat`,
 * moving `bytes` over a link of bandwidth bw. */
static double regimes(const ovl__machine *m, double lat, double bytes,
                      double bw) {
  double t_ll = m->coll_base_s + lat + bytes / (bw * m->ll_bw_frac);
  double t_simple = m->simple_base_s + lat + bytes / bw;
  return t_ll < t_simple ? t_ll : t_simple;
}

double ovl__machine_comm_s(const ovl__machine *m, int kind, size_t count,
                           size_t esize, int nranks, bool cross) {
  int n = nranks < 1 ? 1 : nranks;
  int gpn = m->gpus_per_node < 1 ? 1 : m->gpus_per_node;
  int nodes = (n + gpn - 1) / gpn;
  const ovl__link *bot = nodes > 1 ? &m->inter : &m->intra;
  double steps = 0, bytes, ring, tree, cross_frac;
  if (kind == OVL__COMM_P2P) {
    const ovl__link *l = cross ? &m->inter : &m->intra;
    return regimes(m, l->lat_s, (double)count * (double)esize, l->bw);
  }
  if (n == 1) /* a copy on the device, or nothing */
    return m->coll_base_s + 2.0 * (double)count * (double)esize / m->mem_bw;
  bytes = bus_bytes(kind, count, esize, n, &steps);
  /* A ring: of its steps, one in gpn crosses between nodes. */
  cross_frac = nodes > 1 ? (double)nodes / n : 0;
  ring = regimes(
      m,
      steps * ((1 - cross_frac) * m->intra.lat_s + cross_frac * m->inter.lat_s),
      bytes, bot->bw);
  if (nodes == 1 || m->algo == OVL__ALGO_RING ||
      (kind != OVL_COLL_ALLREDUCE && kind != OVL_COLL_BARRIER))
    return ring;
  /* A double binary tree between nodes, a chain inside each, up and down:
   * its latency grows with log2 of the nodes; the same bus bytes. */
  tree = regimes(m,
                 2.0 * (ceil(log2((double)nodes)) * m->inter.lat_s +
                        (gpn - 1) * m->intra.lat_s),
                 bytes, bot->bw);
  if (m->algo == OVL__ALGO_TREE)
    return tree;
  return tree < ring ? tree : ring;
}
