/*
 * Calibration (ovl/calibrate.h; docs/ARCHITECTURE.md, "Calibration"): a
 * profile for the model backend, measured on a real backend by running
 * small generated schedules (cal_run.c), for one program: each of its
 * kernels alone, the host's costs, its communication (cal_comm.c), the
 * machine. The profile is backend/model.h's, written as its JSON.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/calibrate.h"
#include "run/run.h"

/* ------------------------------------------------------------------ */
/* The program's kernels                                               */
/* ------------------------------------------------------------------ */

/* Whether `prog` runs a collective in place (its output is its input). */
static bool coll_in_place(const ovl_program *prog) {
  for (size_t i = 0; i < prog->nops; i++) {
    size_t n;
    const ovl__prim *p = ovl__op_prims(prog, i, &n);
    if (n > 0 && p[0].kind == OVL_PRIM_COLL && prog->ops[i].nin > 0 &&
        prog->ops[i].out == prog->ops[i].in[0])
      return true;
  }
  return false;
}

/* Whether op i of `prog` runs a kernel (its KERNEL primitive). */
static bool runs_kernel(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (p[k].kind == OVL_PRIM_KERNEL)
      return true;
  return false;
}

/* Whether some op of `prog` has a primitive of kind `a` or `b`. */
static bool has_prim(const ovl_program *prog, int a, int b) {
  for (size_t i = 0; i < prog->nprims; i++)
    if (prog->prims[i].kind == a || prog->prims[i].kind == b)
      return true;
  return false;
}

/* Every distinct kernel of the program, alone on calc. */
static ovl_status kernels(ovl__cal *c) {
  const ovl_program *prog = c->prog;
  ovl__profile *p = c->prof;
  size_t cap = 0;
  for (size_t i = 0; i < prog->nops; i++) {
    ovl__mkernel mk;
    ovl__cal_kernel k;
    char name[128];
    size_t j;
    ovl_status st;
    if (!runs_kernel(prog, i))
      continue;
    ovl__mkernel_of(prog, &prog->ops[i], &mk);
    for (j = 0; j < p->nkernels; j++)
      if (ovl__mkernel_same(&p->kernels[j], &mk))
        break;
    if (j < p->nkernels)
      continue;
    if (p->nkernels == cap) {
      size_t ncap = cap ? 2 * cap : 8;
      ovl__mkernel *q = realloc(p->kernels, ncap * sizeof *q);
      if (q == NULL)
        return ovl__err(c->err, OVL_ENOMEM, "calibrate: out of memory");
      p->kernels = q;
      cap = ncap;
    }
    ovl__mkernel_name(&mk, name, sizeof name);
    ovl__cal_begin(c, "kernel %s", name);
    ovl__cal_kernel_of(prog, i, &k);
    if ((st = ovl__cal_kernel_s(c, &k, &mk.s)) != OVL_OK)
      return st;
    p->kernels[p->nkernels++] = mk;
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* The host                                                            */
/* ------------------------------------------------------------------ */

/* Calls an iteration of the host measurements (eager), and of the two
 * graph sizes. */
#define N_HOST 200
#define N_HOST_COMM 100
#define N_GRAPH_FEW 50
#define N_GRAPH_MANY 400

static char *finish(ovl__sbuf *b) {
  if (b->fail) {
    free(b->s);
    return NULL;
  }
  return b->s;
}

/* `n` times `body` (lines, each ending in a newline) after `decl`. */
static char *repeat_text(const char *decl, int n, const char *body) {
  ovl__sbuf b = {0};
  ovl__sb_printf(&b, "# calibrate: the host's costs\n%srepeat %d {\n%s}\n",
                 decl, n, body);
  return finish(&b);
}

/* The median iteration of `text` (no op times: their timers would cost
 * the host), over `n` calls. */
static ovl_status per_call(ovl__cal *c, char *text, int n, bool graph,
                           double *out) {
  ovl__cal_meas m;
  ovl_status st =
      ovl__cal_run(c, text, c->o.warmup, c->o.iters, false, graph, &m);
  if (st != OVL_OK)
    return st;
  *out = ovl__cal_iter_s(&m) / n;
  ovl__cal_meas_free(&m);
  if (!(*out > 0))
    return ovl__cal_fail(c, OVL_EINVAL, "no iteration was timed");
  return OVL_OK;
}

static const char tiny_decl[] =
    "k0 = data(shape=[1], dtype=float32, init=fill, value=1.0)\n"
    "x = data(shape=[1], dtype=float32, init=fill, value=1.0)\n";
static const char tiny_kernel[] = "  y = scale(k0, scale=1.0)\n";

/*
 * What the host pays per primitive it enqueues, eagerly: the iteration of
 * N of them over N. Where the device is slower than the host at them (a
 * tiny collective), that is the device's rate, which bounds the host's
 * cost from above. A host sync: N kernels each followed by one, less the
 * kernels' launches and times. Graphs (where the world has them): N
 * kernels as one graph at two N, the slope the device's time per kernel
 * (less the kernel's own: the gap, taken for eager runs too) and the
 * intercept the launch.
 */
static ovl_status host_costs(ovl__cal *c) {
  ovl__profile *p = c->prof;
  ovl__cal_kernel tiny;
  double tiny_s, t, few, many;
  ovl_status st;
  char body[512];

  ovl__cal_kernel_scale(1, &tiny);
  ovl__cal_begin(c, "host: kernel scale float32 [1] alone");
  if ((st = ovl__cal_kernel_s(c, &tiny, &tiny_s)) != OVL_OK)
    return st;
  ovl__cal_begin(c, "host: %d kernel launches", N_HOST);
  if ((st = per_call(c, repeat_text(tiny_decl, N_HOST, tiny_kernel), N_HOST,
                     false, &t)) != OVL_OK)
    return st;
  p->host.op_s[OVL__H_KERNEL] = p->host.op_s[OVL__H_DELAY] = t;

  /* An iteration of one tiny kernel: what is left beyond its launch and
   * its time is the iteration's own (its barriers and drain). */
  ovl__cal_begin(c, "host: an iteration of one kernel");
  if ((st = per_call(c, repeat_text(tiny_decl, 1, tiny_kernel), 1, false,
                     &few)) != OVL_OK)
    return st;
  few -= p->host.op_s[OVL__H_KERNEL] + tiny_s;
  p->host.iter_s = few > 0 ? few : 0;

  ovl__cal_begin(c, "host: %d event records and waits", N_HOST);
  if ((st = per_call(c,
                     repeat_text("", N_HOST,
                                 "  event_record(event=e, stream=calc)\n"
                                 "  stream_wait_event(event=e, "
                                 "stream=side)\n"),
                     N_HOST, false, &t)) != OVL_OK)
    return st;
  p->host.op_s[OVL__H_RECORD] = p->host.op_s[OVL__H_WAIT] = t / 2;

  ovl__cal_begin(c, "host: %d kernels, each followed by a host sync", N_HOST);
  snprintf(body, sizeof body, "%s  c_sync_calc_stream()\n", tiny_kernel);
  if ((st = per_call(c, repeat_text(tiny_decl, N_HOST, body), N_HOST, false,
                     &t)) != OVL_OK)
    return st;
  t -= p->host.op_s[OVL__H_KERNEL] + tiny_s;
  p->host.sync_s = t > 0 ? t : 0;

  /* Collectives (the program has one): a tiny allreduce on comm[0].
   * Without one, a kernel's launch stands for it (the model never asks). */
  p->host.op_s[OVL__H_COLL] = p->host.op_s[OVL__H_KERNEL];
  if (has_prim(c->prog, OVL_PRIM_COLL, OVL_PRIM_COLL)) {
    ovl__cal_begin(c, "host: %d collective launches", N_HOST_COMM);
    /* In place where the program's are (on one rank NCCL then moves
     * nothing, and its launch costs less). */
    if ((st = per_call(c,
                       repeat_text(tiny_decl, N_HOST_COMM,
                                   coll_in_place(c->prog)
                                       ? "  c_allreduce_sum(x, ring_id=0, "
                                         "use_calc_stream=false)\n"
                                       : "  z = c_allreduce_sum(x, ring_id=0, "
                                         "use_calc_stream=false)\n"),
                       N_HOST_COMM, false, &t)) != OVL_OK)
      return st;
    p->host.op_s[OVL__H_COLL] = t;
  }
  p->host.op_s[OVL__H_P2P] = p->host.op_s[OVL__H_COLL];
  if (c->nranks >= 2 && has_prim(c->prog, OVL_PRIM_SEND, OVL_PRIM_RECV)) {
    ovl__cal_begin(c, "host: %d send and receive launches", N_HOST_COMM);
    if ((st = per_call(c,
                       repeat_text(tiny_decl, N_HOST_COMM,
                                   "  send_v2(x, peer=1, ring_id=0, "
                                   "use_calc_stream=false, ranks=[0])\n"
                                   "  z = recv_v2(peer=0, out_shape=[1], "
                                   "dtype=float32, ring_id=0, "
                                   "use_calc_stream=false, ranks=[1])\n"),
                       N_HOST_COMM, false, &t)) != OVL_OK)
      return st;
    p->host.op_s[OVL__H_P2P] = t;
  }

  p->host.graph_launch_s = p->host.graph_gap_s = p->host.gap_s = 0;
  if (!ovl_world_has_graphs(c->world))
    return OVL_OK;
  ovl__cal_begin(c, "host: graphs of %d and of %d kernels", N_GRAPH_FEW,
                 N_GRAPH_MANY);
  if ((st = per_call(c, repeat_text(tiny_decl, N_GRAPH_FEW, tiny_kernel), 1,
                     true, &few)) != OVL_OK ||
      (st = per_call(c, repeat_text(tiny_decl, N_GRAPH_MANY, tiny_kernel), 1,
                     true, &many)) != OVL_OK)
    return st;
  t = (many - few) / (N_GRAPH_MANY - N_GRAPH_FEW);
  p->host.graph_launch_s =
      few - N_GRAPH_FEW * t > 0 ? few - N_GRAPH_FEW * t : 0;
  /* A kernel's time is its pace as a graph (ovl__cal_kernel_s): the
   * graph's gap is in it; the eager gap is what eager kernels the device
   * paced took beyond it. */
  p->host.graph_gap_s = t - tiny_s > 0 ? t - tiny_s : 0;
  p->host.gap_s = c->gap_n > 0 ? c->gap_sum / c->gap_n : p->host.graph_gap_s;
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* The machine, and the entry                                          */
/* ------------------------------------------------------------------ */

static void machine(ovl__cal *c) {
  ovl__profile *p = c->prof;
  ovl_world_info info;
  const char *name = c->prog->filename ? c->prog->filename : "(text)";
  const char *slash = strrchr(name, '/');
  time_t now = time(NULL);
  struct tm tm;
  ovl_world_info_get(c->world, &info);
  snprintf(p->device, sizeof p->device, "%s",
           ovl_world_device_name(c->world, 0));
  p->ndevices = p->nranks = c->nranks;
  snprintf(p->nccl, sizeof p->nccl, "%s", info.nccl_version);
  snprintf(p->cuda, sizeof p->cuda, "%s", info.runtime_version);
  if (gmtime_r(&now, &tm) == NULL ||
      strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(p->date, sizeof p->date, "unknown");
  snprintf(p->schedule, sizeof p->schedule, "%s",
           slash != NULL ? slash + 1 : name);
  p->have_sig = true;
  p->program_sig = ovl__program_sig(c->prog);
}

/* The options, with their defaults; OVL_EINVAL for one out of range. */
static ovl_status read_opts(ovl__cal *c, const ovl_calibrate_opts *opts) {
  ovl_status st =
      ovl__opts_read(&c->o, sizeof c->o, opts, "ovl_calibrate_opts", c->err);
  if (st != OVL_OK)
    return st;
  if (c->o.iters < 0 || c->o.warmup < 0 || !(c->o.budget_s >= 0) ||
      isinf(c->o.budget_s))
    return ovl__err(c->err, OVL_EINVAL,
                    "ovl_calibrate_opts: iters (%d) and warmup (%d) must "
                    "be >= 0 and budget_s (%g) a number of seconds >= 0",
                    c->o.iters, c->o.warmup, c->o.budget_s);
  if (c->o.iters == 0)
    c->o.iters = 10;
  if (c->o.warmup == 0)
    c->o.warmup = 2;
  if (c->o.budget_s == 0)
    c->o.budget_s = 60;
  return OVL_OK;
}

ovl_status ovl_calibrate(ovl_world *world, const ovl_program *prog,
                         const ovl_calibrate_opts *opts, char **out,
                         ovl_error *err) {
  ovl__profile prof;
  ovl__cal c;
  ovl_status st;

  if (out != NULL)
    *out = NULL;
  if (world == NULL || prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_calibrate: a NULL argument");
  memset(&c, 0, sizeof c);
  memset(&prof, 0, sizeof prof);
  c.err = err;
  if ((st = read_opts(&c, opts)) != OVL_OK)
    return st;
  if (ovl__model_of(world->be, world->bw) != NULL)
    return ovl__err(err, OVL_EINVAL,
                    "calibrate: the model backend predicts from a profile: "
                    "calibration measures one on a real backend (cpu, "
                    "cuda)");
  if (world->lay.procs != NULL)
    return ovl__err(err, OVL_EINVAL,
                    "calibrate: the world spans %d processes: calibration "
                    "runs in one process (no MPI launch)",
                    ovl_procs_size(world->lay.procs));
  if (prog->nranks != world->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "calibrate: the program is bound for %d ranks, the "
                    "world has %d",
                    prog->nranks, world->nranks);
  c.world = world;
  c.prog = prog;
  c.nranks = world->nranks;
  c.cpu = strcmp(world->be->name, "cpu") == 0;
  c.t0 = ovl__now();
  c.prof = &prof;
  machine(&c);
  if ((st = kernels(&c)) == OVL_OK && (st = host_costs(&c)) == OVL_OK)
    st = ovl__cal_comm(&c);
  if (st == OVL_OK && (*out = ovl__profile_json(&prof)) == NULL)
    st = ovl__err(err, OVL_ENOMEM, "calibrate: out of memory");
  ovl__profile_free(&prof);
  return st;
}
