/*
 * The model backend (backend/model.h; docs/MODEL.md): a world of as many
 * ranks as asked, on a machine (a machine file, or the built-in one) and
 * a profile when one is given, and the costs the simulation
 * (run/model_run.c) asks for. It runs nothing: the run layer sees that a
 * world is a model's (ovl__model_of) and simulates instead of running.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/model.h"

struct ovl__bworld {
  ovl__model m;
  int nranks;
  char devices[192];
};

void ovl__mkernel_of(const ovl_program *prog, const ovl__op *op,
                     ovl__mkernel *out) {
  const ovl__var *o = &prog->vars[op->out];
  memset(out, 0, sizeof *out);
  out->dtype = (int)o->dtype;
  out->numel = o->numel;
  if (op->def->kernel == OVL_KERNEL_MATMUL) {
    const ovl__var *x = &prog->vars[op->in[0]];
    out->matmul = true;
    out->m = o->dims[0];
    out->n = o->dims[1];
    out->k = x->dims[op->trans_x ? 0 : 1];
    out->tx = op->trans_x;
    out->ty = op->trans_y;
  } else {
    out->ew = (int)op->def->ew;
  }
}

int ovl__comm_msg(const ovl_program *prog, const ovl__op *op, int pk,
                  size_t *count, int *dtype) {
  const ovl__var *v;
  if (pk == OVL_PRIM_SEND || pk == OVL_PRIM_RECV) {
    v = &prog->vars[pk == OVL_PRIM_SEND ? op->in[0] : op->out];
    *count = (size_t)v->numel;
    *dtype = (int)v->dtype;
    return OVL__COMM_P2P;
  }
  if (op->def->coll == OVL_COLL_BARRIER) {
    *count = 1;
    *dtype = OVL_DTYPE_FLOAT32;
    return OVL_COLL_BARRIER;
  }
  v = &prog->vars[op->in[0]];
  *count = ovl__coll_count(op->def->coll, v->numel, prog->vars[op->out].numel);
  *dtype = (int)v->dtype;
  return (int)op->def->coll;
}

bool ovl__mkernel_same(const ovl__mkernel *a, const ovl__mkernel *b) {
  if (a->matmul != b->matmul || a->dtype != b->dtype)
    return false;
  if (a->matmul)
    return a->m == b->m && a->n == b->n && a->k == b->k && a->tx == b->tx &&
           a->ty == b->ty;
  return a->ew == b->ew && a->numel == b->numel;
}

/* ------------------------------------------------------------------ */
/* The world                                                           */
/* ------------------------------------------------------------------ */

static int model_device_count(void) { return OVL_MAX_MODEL_RANKS; }
static int model_default_ranks(void) { return 8; }

static void set_devices(ovl__bworld *bw) {
  snprintf(bw->devices, sizeof bw->devices, "%d x %s (model of %s)", bw->nranks,
           bw->m.mach.device, bw->m.mach.name);
}

static ovl_status model_world_init(const ovl__layout *lay, double timeout_s,
                                   ovl__bworld **out, ovl_error *err) {
  ovl__bworld *bw;
  (void)timeout_s;
  if (lay->procs != NULL)
    return ovl__err(err, OVL_EINVAL,
                    "model backend: it runs in one process (no MPI "
                    "launch)");
  bw = calloc(1, sizeof *bw);
  if (bw == NULL)
    return ovl__err(err, OVL_ENOMEM, "model backend: out of memory");
  ovl__machine_default(&bw->m.mach);
  bw->nranks = lay->nranks;
  set_devices(bw);
  *out = bw;
  return OVL_OK;
}

static const char *model_world_devices(ovl__bworld *bw) { return bw->devices; }
static const char *model_device_name(ovl__bworld *bw, int rank) {
  (void)rank;
  return bw->m.mach.device;
}
static void model_world_info(ovl__bworld *bw, ovl_world_info *info) {
  if (bw->m.have_profile) {
    snprintf(info->nccl_version, sizeof info->nccl_version, "%s",
             bw->m.prof.nccl);
    snprintf(info->runtime_version, sizeof info->runtime_version, "%s",
             bw->m.prof.cuda);
  }
}
static void model_world_fini(ovl__bworld *bw) {
  if (bw == NULL)
    return;
  ovl__profile_free(&bw->m.prof);
  free(bw);
}
static void model_world_abort(ovl__bworld *bw) { (void)bw; }

/* A file of the caller's that cannot be read is the caller's mistake
 * (OVL_EINVAL, the message kept), not the machine's (OVL_EIO). */
static ovl_status callers_file(ovl_status st, ovl_error *err) {
  if (st != OVL_EIO)
    return st;
  if (err != NULL)
    err->status = OVL_EINVAL;
  return OVL_EINVAL;
}

static ovl_status model_world_set(ovl__bworld *bw, const char *key,
                                  const char *value, ovl_error *err) {
  ovl_status st;
  if (strcmp(key, "machine") == 0) {
    ovl__machine m;
    if ((st = ovl__machine_load(value, &m, err)) != OVL_OK)
      return callers_file(st, err);
    bw->m.mach = m;
    snprintf(bw->m.machine_path, sizeof bw->m.machine_path, "%s", value);
    set_devices(bw);
    return OVL_OK;
  }
  if (strcmp(key, "profile") == 0) {
    ovl__profile p;
    if ((st = ovl__profile_load(value, &p, err)) != OVL_OK)
      return callers_file(st, err);
    ovl__profile_free(&bw->m.prof);
    bw->m.prof = p;
    bw->m.have_profile = true;
    return OVL_OK;
  }
  return ovl__err(err, OVL_EINVAL,
                  "backend 'model' has no key '%s' (it takes machine and "
                  "profile; %s is %s's)",
                  key, key,
                  strcmp(key, "chaos_seed") == 0 ? "the cpu backend"
                                                 : "the cuda backend");
}

const ovl__backend_ops ovl__backend_model = {
    .name = "model",
    .device_count = model_device_count,
    .default_ranks = model_default_ranks,
    .world_init = model_world_init,
    .world_devices = model_world_devices,
    .device_name = model_device_name,
    .world_info = model_world_info,
    .world_fini = model_world_fini,
    .world_abort = model_world_abort,
    .world_set = model_world_set,
};

const ovl__model *ovl__model_of(const ovl__backend_ops *be, ovl__bworld *bw) {
  return be == &ovl__backend_model && bw != NULL ? &bw->m : NULL;
}

/* ------------------------------------------------------------------ */
/* Costs                                                               */
/* ------------------------------------------------------------------ */

ovl_status ovl__model_check(const ovl__model *m, const ovl_program *prog,
                            ovl_error *err) {
  uint64_t sig;
  const char *name = prog->filename ? prog->filename : "(text)";
  const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
  if (!m->have_profile || !m->prof.have_sig)
    return OVL_OK;
  sig = ovl__program_sig(prog);
  if (sig == m->prof.program_sig)
    return OVL_OK;
  if (strcmp(base, m->prof.schedule) == 0)
    return ovl__err(err, OVL_EINVAL,
                    "profile %s was calibrated on another version of %s "
                    "(its ops differ): calibrate again with "
                    "--calibrate=FILE on a real backend",
                    m->prof.path, m->prof.schedule);
  return ovl__err(err, OVL_EINVAL,
                  "profile %s was calibrated on %s, not on %s (its ops "
                  "differ): calibrate this schedule with --calibrate=FILE "
                  "on a real backend",
                  m->prof.path, m->prof.schedule, base);
}

void ovl__model_about(const ovl__model *m, const ovl_program *prog, char *buf,
                      size_t size) {
  size_t len = 0, nk = 0, nest = 0;
  ovl__mkernel seen[64];
  char names[512] = "";
  size_t nlen = 0;
#define PUT(...)                                                               \
  do {                                                                         \
    if (len < size)                                                            \
      len += (size_t)snprintf(buf + len, size - len, __VA_ARGS__);             \
  } while (0)
  if (size == 0)
    return;
  buf[0] = '\0';
  PUT("machine %s (%s)", m->mach.name,
      m->machine_path[0] ? m->machine_path : "built in");
  if (m->have_profile)
    PUT(", profile %s (%s, %d rank%s, %s)", m->prof.path, m->prof.device,
        m->prof.nranks, m->prof.nranks == 1 ? "" : "s", m->prof.date);
  else
    PUT(", no profile");
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    size_t n;
    const ovl__prim *pr = ovl__op_prims(prog, i, &n);
    ovl__mkernel k;
    bool est = false, dup = false;
    if (n == 0 || pr[0].kind != OVL_PRIM_KERNEL || op->out < 0)
      continue;
    ovl__mkernel_of(prog, op, &k);
    for (size_t j = 0; j < nk && j < 64 && !dup; j++)
      dup = ovl__mkernel_same(&seen[j], &k);
    if (dup)
      continue;
    if (nk < 64)
      seen[nk] = k;
    nk++;
    (void)ovl__model_kernel_s(m, &k, &est);
    if (est) {
      char kn[96];
      ovl__mkernel_name(&k, kn, sizeof kn);
      if (nlen < sizeof names)
        nlen += (size_t)snprintf(names + nlen, sizeof names - nlen, "%s%s",
                                 nest ? ", " : "", kn);
      nest++;
    }
  }
  if (nest > 0)
    PUT("; %zu of %zu kernel%s estimated from the machine's bandwidth and "
        "FLOP rate (not in %s): %s",
        nest, nk, nk == 1 ? "" : "s",
        m->have_profile ? "the profile" : "a profile", names);
#undef PUT
}

double ovl__model_kernel_s(const ovl__model *m, const ovl__mkernel *k,
                           bool *estimated) {
  const ovl__machine *mc = &m->mach;
  double esize = (double)ovl_dtype_size((ovl_dtype)k->dtype), t;
  if (m->have_profile)
    for (size_t i = 0; i < m->prof.nkernels; i++)
      if (ovl__mkernel_same(&m->prof.kernels[i], k)) {
        *estimated = false;
        return m->prof.kernels[i].s;
      }
  *estimated = true;
  if (k->matmul) {
    double flop = 2.0 * (double)k->m * (double)k->n * (double)k->k;
    double bytes =
        esize * ((double)k->m * (double)k->k + (double)k->k * (double)k->n +
                 (double)k->m * (double)k->n);
    t = flop / mc->flops[k->dtype];
    if (bytes / mc->mem_bw > t)
      t = bytes / mc->mem_bw;
  } else {
    /* Read the inputs, write the output. */
    int nin = k->ew == OVL_EW_ASSIGN || k->ew == OVL_EW_SCALE ? 1 : 2;
    t = (double)(nin + 1) * esize * (double)k->numel / mc->mem_bw;
  }
  return t > mc->kernel_min_s ? t : mc->kernel_min_s;
}

double ovl__model_comm_s(const ovl__model *m, int kind, size_t count,
                         size_t esize, int nranks, bool cross) {
  /* A collective's fit holds at the rank count it was measured at; a
   * send / receive pair's at any (a pair inside a node, as measured). */
  if (m->have_profile && m->prof.fit[kind].have &&
      (kind == OVL__COMM_P2P ? !cross : m->prof.nranks == nranks)) {
    const ovl__mfit *f = &m->prof.fit[kind];
    double bytes = (double)count * (double)esize;
    return f->lat_s + (isfinite(f->bw) ? bytes / f->bw : 0);
  }
  return ovl__machine_comm_s(&m->mach, kind, count, esize, nranks, cross);
}

double ovl__model_kernel_slow(const ovl__model *m, int kind, int kc) {
  double s = m->have_profile ? m->prof.kernel_slow[kind][kc] : 0;
  if (s <= 0)
    s = m->mach.kernel_slow[kc];
  return s < 1 ? 1 : s;
}
double ovl__model_comm_slow(const ovl__model *m, int kind, int kc) {
  double s = m->have_profile ? m->prof.comm_slow[kind][kc] : 0;
  if (s <= 0)
    s = m->mach.comm_slow[kc];
  return s < 1 ? 1 : s;
}
/* The host's costs: the profile's where there is one. */
static const ovl__mhost *host_of(const ovl__model *m) {
  return m->have_profile ? &m->prof.host : &m->mach.host;
}
double ovl__model_host_s(const ovl__model *m, int host_kind) {
  return host_of(m)->op_s[host_kind];
}
double ovl__model_graph_launch_s(const ovl__model *m) {
  return host_of(m)->graph_launch_s;
}
double ovl__model_sync_s(const ovl__model *m) { return host_of(m)->sync_s; }
double ovl__model_gap_s(const ovl__model *m, bool graph) {
  return graph ? host_of(m)->graph_gap_s : host_of(m)->gap_s;
}
double ovl__model_iter_s(const ovl__model *m) { return host_of(m)->iter_s; }
double ovl__model_d2h_s(const ovl__model *m, size_t bytes) {
  return m->mach.d2h.lat_s + (double)bytes / m->mach.d2h.bw;
}
