/*
 * Calibration's communication (pipeline/calibrate.h): for each kind of
 * communication a program has (each collective, and point-to-point), its
 * time on the calc stream alone at about 6 sizes up to the program's
 * largest message, and the program's own sizes, fitted as latency +
 * bytes / bandwidth; then its contention: the largest message on the
 * comm stream beside a memory-bound kernel, and beside a matmul, on calc.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/calibrate.h"

/* A message: NCCL's count (the send count; reducescatter's receive
 * count; p2p's message) of one element type. */
typedef struct msg {
  int64_t count;
  int dtype;
} msg;

/* The program's sizes of one kind kept (the distinct ones, up to this). */
#define MAX_OWN 64
/* Sizes measured for a fit: 6 from the largest / 256 to the largest, and
 * up to 4 of the program's own. */
#define N_SWEEP 6
#define N_OWN 4
#define MAX_SIZES (N_SWEEP + N_OWN)

typedef struct kind_info {
  bool used;
  /* The program runs it in place (its output is its input): measured so,
   * since on one rank NCCL has nothing to move then. */
  bool inplace;
  msg big;          /* the largest message */
  const char *name; /* its op */
  msg own[MAX_OWN]; /* the distinct messages (the first MAX_OWN) */
  int nown;
} kind_info;

static double msg_bytes(const msg *m) {
  return (double)m->count * (double)ovl_dtype_size((ovl_dtype)m->dtype);
}

/* The message of op i of `prog`, and its kind; false for an op that does
 * not communicate. */
static bool op_msg(const ovl_program *prog, size_t i, int *kind, msg *m) {
  size_t n, count;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (ovl__prim_is_comm(&p[k])) {
      *kind = ovl__comm_msg(prog, &prog->ops[i], p[k].kind, &count, &m->dtype);
      m->count = (int64_t)count;
      return true;
    }
  return false;
}

static void collect(const ovl_program *prog, kind_info *ki) {
  memset(ki, 0, OVL__NCOMM * sizeof *ki);
  for (size_t i = 0; i < prog->nops; i++) {
    int kind, j;
    msg m;
    kind_info *k;
    if (!op_msg(prog, i, &kind, &m))
      continue;
    k = &ki[kind];
    if (kind != OVL__COMM_P2P && kind != OVL_COLL_BARRIER &&
        prog->ops[i].nin > 0 && prog->ops[i].out == prog->ops[i].in[0])
      k->inplace = true;
    for (j = 0; j < k->nown; j++)
      if (k->own[j].count == m.count && k->own[j].dtype == m.dtype)
        break;
    if (j == k->nown && k->nown < MAX_OWN)
      k->own[k->nown++] = m;
    if (!k->used || msg_bytes(&m) > msg_bytes(&k->big)) {
      k->big = m;
      k->name = prog->ops[i].def->name;
    }
    k->used = true;
  }
}

static int cmp_bytes_desc(const void *a, const void *b) {
  double x = msg_bytes(a), y = msg_bytes(b);
  return x > y ? -1 : x < y;
}

/* The sizes to measure for `kind`, largest first; returns how many. */
static int sizes_of(const kind_info *k, int kind, int nranks,
                    msg out[MAX_SIZES]) {
  msg own[MAX_OWN];
  int n = 0, nrest = 0, kept = 0;
  int64_t least = kind == OVL_COLL_ALLTOALL ? nranks : 1;
  if (kind == OVL_COLL_BARRIER) {
    out[0] = k->big;
    return 1;
  }
  for (int j = 0; j < N_SWEEP; j++) {
    msg m = k->big;
    m.count = (int64_t)llround((double)m.count / pow(256.0, j / 5.0));
    if (kind == OVL_COLL_ALLTOALL)
      m.count = m.count / nranks * nranks;
    if (m.count < least)
      m.count = least;
    out[n++] = m;
  }
  /* The program's own, but the largest (the first above): up to N_OWN,
   * evenly spread over them. */
  for (int j = 0; j < k->nown; j++)
    if (msg_bytes(&k->own[j]) < msg_bytes(&k->big))
      own[nrest++] = k->own[j];
  qsort(own, (size_t)nrest, sizeof *own, cmp_bytes_desc);
  for (int j = 0; j < N_OWN && j < nrest; j++)
    out[n++] = own[nrest <= N_OWN
                       ? j
                       : (int)lround((double)j * (nrest - 1) / (N_OWN - 1))];
  qsort(out, (size_t)n, sizeof *out, cmp_bytes_desc);
  /* The same bytes once. */
  for (int j = 0; j < n; j++)
    if (kept == 0 || msg_bytes(&out[j]) != msg_bytes(&out[kept - 1]))
      out[kept++] = out[j];
  return kept;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

static void comm_decl(ovl__sbuf *b, int kind, const msg *m, int nranks) {
  int64_t n = m->count;
  if (kind == OVL_COLL_BARRIER)
    return;
  if (kind == OVL_COLL_REDUCESCATTER)
    n *= nranks;
  ovl__sb_printf(b, "x = data(shape=[%lld], dtype=%s, init=fill, value=1.0)\n",
                 (long long)n, ovl_dtype_name((ovl_dtype)m->dtype));
}

/* One communication of `kind` (op `name`) of x; on calc, or on comm[0]. */
static void comm_call(ovl__sbuf *b, int kind, const char *name, const msg *m,
                      bool calc, bool inplace) {
  const char *cs = calc ? "true" : "false";
  const char *z = inplace ? "" : "z = ";
  if (kind == OVL_COLL_BARRIER)
    ovl__sb_puts(b, "barrier(ring_id=0)\n");
  else if (kind == OVL__COMM_P2P)
    ovl__sb_printf(b,
                   "send_v2(x, peer=1, ring_id=0, use_calc_stream=%s, "
                   "ranks=[0])\n"
                   "  z = recv_v2(peer=0, out_shape=[%lld], dtype=%s, "
                   "ring_id=0, use_calc_stream=%s, ranks=[1])\n",
                   cs, (long long)m->count, ovl_dtype_name((ovl_dtype)m->dtype),
                   cs);
  else if (ovl__coll_has_root((ovl__coll)kind))
    ovl__sb_printf(b, "%s%s(x, root=0, ring_id=0, use_calc_stream=%s)\n", z,
                   name, cs);
  else
    ovl__sb_printf(b, "%s%s(x, ring_id=0, use_calc_stream=%s)\n", z, name, cs);
}

/* The op whose time is the communication's: the receive of a p2p. */
static const char *timed_op(int kind, const char *name) {
  return kind == OVL__COMM_P2P ? "recv_v2" : name;
}

static char *finish(ovl__sbuf *b) {
  if (b->fail) {
    free(b->s);
    return NULL;
  }
  return b->s;
}

static char *alone_text(const ovl__cal *c, int kind, const char *name,
                        const msg *m, bool calc, bool inplace, int reps) {
  ovl__sbuf b = {0};
  ovl__sb_printf(&b, "# calibrate: %s alone on the %s stream\n",
                 ovl__comm_kind_name(kind), calc ? "calc" : "comm");
  comm_decl(&b, kind, m, c->nranks);
  ovl__sb_printf(&b, "repeat %d {\n  ", reps);
  comm_call(&b, kind, name, m, calc, inplace);
  ovl__sb_puts(&b, "}\n");
  return finish(&b);
}

/* `rc` communications on comm[0] beside `rk` calls of kernel `k` on calc,
 * merged by position (a kernel first on a tie), as overlap_sweep does. */
static char *beside_text(const ovl__cal *c, int kind, const char *name,
                         const msg *m, bool inplace, const ovl__cal_kernel *k,
                         int rc, int rk) {
  ovl__sbuf b = {0};
  int i = 0, j = 0;
  ovl__sb_printf(&b, "# calibrate: %s on the comm stream beside %s\n",
                 ovl__comm_kind_name(kind), k->name);
  comm_decl(&b, kind, m, c->nranks);
  ovl__cal_kernel_decl(&b, k);
  while (i < rc || j < rk) {
    if (j < rk && (i == rc || (int64_t)j * rc <= (int64_t)i * rk)) {
      ovl__cal_kernel_call(&b, k, "w");
      j++;
    } else {
      comm_call(&b, kind, name, m, false, inplace);
      i++;
    }
  }
  return finish(&b);
}

/* ------------------------------------------------------------------ */
/* Measurements                                                        */
/* ------------------------------------------------------------------ */

#define TARGET_S 2e-3

/* Seconds one communication of `m` takes alone (on calc or comm[0]);
 * est_s: what it is expected to take (<= 0: unknown, a short run
 * first). */
static ovl_status comm_s(ovl__cal *c, int kind, const char *name, const msg *m,
                         bool calc, bool inplace, double est_s, double *out) {
  ovl__cal_meas r;
  ovl_status st;
  double t;
  if (!(est_s > 0)) {
    st = ovl__cal_run(c, alone_text(c, kind, name, m, calc, inplace, 2), 1, 1,
                      true, false, &r);
    if (st != OVL_OK)
      return st;
    est_s = ovl__cal_op_s(&r, timed_op(kind, name));
    ovl__cal_meas_free(&r);
  }
  st = ovl__cal_run(c,
                    alone_text(c, kind, name, m, calc, inplace,
                               ovl__cal_reps(est_s, TARGET_S, 1, 50)),
                    c->o.warmup, c->o.iters, true, false, &r);
  if (st != OVL_OK)
    return st;
  t = ovl__cal_op_s(&r, timed_op(kind, name));
  ovl__cal_meas_free(&r);
  if (!(t > 0))
    return ovl__cal_fail(c, OVL_EINVAL, "no op time was measured");
  *out = t;
  return OVL_OK;
}

static void msg_name(int kind, const msg *m, char *buf, size_t size) {
  snprintf(buf, size, "%s %s [%lld] (%.0f B)", ovl__comm_kind_name(kind),
           ovl_dtype_name((ovl_dtype)m->dtype), (long long)m->count,
           msg_bytes(m));
}

/* The fit of `kind`: its sizes, largest first, while the budget lasts
 * (the largest always). */
static ovl_status fit_kind(ovl__cal *c, const kind_info *k, int kind) {
  msg sizes[MAX_SIZES];
  double bytes[MAX_SIZES], secs[MAX_SIZES], est = 0;
  int n = sizes_of(k, kind, c->nranks, sizes), done = 0;
  char name[128];
  for (int j = 0; j < n; j++) {
    ovl_status st;
    if (j > 0 && ovl__cal_spent(c))
      break;
    msg_name(kind, &sizes[j], name, sizeof name);
    ovl__cal_begin(c, "%s on calc", name);
    /* The previous (larger) size's time: an upper bound. */
    st =
        comm_s(c, kind, k->name, &sizes[j], true, k->inplace, est, &secs[done]);
    if (st != OVL_OK)
      return st;
    est = secs[done];
    bytes[done++] = msg_bytes(&sizes[j]);
  }
  ovl__fit_comm(bytes, secs, done, &c->prof->fit[kind]);
  return OVL_OK;
}

/* The matmul of the contention: the program's largest (its time alone
 * measured already), or one of the backend's size. */
static ovl_status pick_matmul(ovl__cal *c, ovl__cal_kernel *k, double *alone) {
  const ovl__mkernel *best = NULL;
  char name[128];
  for (size_t i = 0; i < c->prof->nkernels; i++) {
    const ovl__mkernel *q = &c->prof->kernels[i];
    if (q->matmul && (best == NULL || (double)q->m * q->n * q->k >
                                          (double)best->m * best->n * best->k))
      best = q;
  }
  if (best != NULL) {
    ovl__cal_kernel_matmul(best->dtype, best->m, best->n, best->k, best->tx,
                           best->ty, k);
    *alone = best->s;
    return OVL_OK;
  }
  if (c->cpu)
    ovl__cal_kernel_matmul(OVL_DTYPE_FLOAT32, 96, 96, 96, false, false, k);
  else
    ovl__cal_kernel_matmul(OVL_DTYPE_BFLOAT16, 2048, 2048, 2048, false, false,
                           k);
  snprintf(name, sizeof name, "matmul %s %lldx%lldx%lld",
           ovl_dtype_name((ovl_dtype)k->dtype), (long long)k->dims[0][0],
           (long long)k->dims[1][1], (long long)k->dims[0][1]);
  ovl__cal_begin(c, "contention: kernel %s alone", name);
  return ovl__cal_kernel_s(c, k, alone);
}

/* The communication `m` on comm[0] beside kernel `k` on calc, each
 * repeated to fill about the same time; the slowdowns of each against
 * its time alone, into the profile's [kind][kc]. */
static ovl_status beside(ovl__cal *c, const kind_info *ki, int kind,
                         const msg *m, double comm_alone,
                         const ovl__cal_kernel *k, double k_alone, int kc) {
  double span = 4 * (comm_alone > k_alone ? comm_alone : k_alone);
  int rc, rk;
  ovl__cal_meas r;
  ovl_status st;
  double tk, tc;
  if (span < 4 * TARGET_S)
    span = 4 * TARGET_S;
  rc = ovl__cal_reps(comm_alone, span, 4, 200);
  rk = ovl__cal_reps(k_alone, span, 4, 200);
  ovl__cal_begin(c, "contention: %s beside %s (%d and %d an iteration)",
                 ovl__comm_kind_name(kind), k->name, rc, rk);
  st =
      ovl__cal_run(c, beside_text(c, kind, ki->name, m, ki->inplace, k, rc, rk),
                   c->o.warmup, c->o.iters, true, false, &r);
  if (st != OVL_OK)
    return st;
  tk = ovl__cal_op_s(&r, k->name);
  tc = ovl__cal_op_s(&r, timed_op(kind, ki->name));
  ovl__cal_meas_free(&r);
  if (!(tk > 0) || !(tc > 0))
    return ovl__cal_fail(c, OVL_EINVAL, "no op time was measured");
  c->prof->kernel_slow[kind][kc] = tk / k_alone < 1 ? 1 : tk / k_alone;
  c->prof->comm_slow[kind][kc] = tc / comm_alone < 1 ? 1 : tc / comm_alone;
  return OVL_OK;
}

/* The contention of `kind`: its largest message alone on comm[0], a
 * scale sized to take about as long, then each kernel beside it. */
static ovl_status contention(ovl__cal *c, const kind_info *ki, int kind,
                             ovl__cal_kernel *mm, double *mm_alone) {
  const msg *m = &ki->big;
  const ovl__mfit *f = &c->prof->fit[kind];
  /* At most 64 Mi elements (256 MiB; 16 Mi on cpu): the host makes its
   * input element by element for each run. A shorter kernel than the
   * message is repeated more. */
  int64_t cap = c->cpu ? (int64_t)1 << 24 : (int64_t)1 << 26, n0, n;
  double tc, tk,
      est =
          f->have ? f->lat_s + (isfinite(f->bw) ? msg_bytes(m) / f->bw : 0) : 0;
  ovl__cal_kernel k;
  char name[128];
  ovl_status st;

  msg_name(kind, m, name, sizeof name);
  ovl__cal_begin(c, "contention: %s alone on comm", name);
  if ((st = comm_s(c, kind, ki->name, m, false, ki->inplace, est, &tc)) !=
      OVL_OK)
    return st;
  /* A scale of about the message's bytes, then of the size that takes
   * as long as the message (a memory-bound kernel's time grows with its
   * size). */
  n0 = (int64_t)(msg_bytes(m) / 4);
  n0 = n0 < 1024 ? 1024 : n0 > cap ? cap : n0;
  ovl__cal_kernel_scale(n0, &k);
  ovl__cal_begin(c, "contention: kernel scale float32 [%lld] alone",
                 (long long)n0);
  if ((st = ovl__cal_kernel_s(c, &k, &tk)) != OVL_OK)
    return st;
  n = (int64_t)((double)n0 * tc / tk);
  n = n < 1024 ? 1024 : n > cap ? cap : n;
  if (fabs((double)n / (double)n0 - 1) > 0.25) {
    ovl__cal_kernel_scale(n, &k);
    ovl__cal_begin(c, "contention: kernel scale float32 [%lld] alone",
                   (long long)n);
    if ((st = ovl__cal_kernel_s(c, &k, &tk)) != OVL_OK)
      return st;
  }
  if ((st = beside(c, ki, kind, m, tc, &k, tk, OVL__KC_MEM)) != OVL_OK)
    return st;
  if (!(*mm_alone > 0) && (st = pick_matmul(c, mm, mm_alone)) != OVL_OK)
    return st;
  return beside(c, ki, kind, m, tc, mm, *mm_alone, OVL__KC_MATMUL);
}

ovl_status ovl__cal_comm(ovl__cal *c) {
  kind_info ki[OVL__NCOMM];
  ovl__cal_kernel mm;
  double mm_alone = 0;
  ovl_status st;
  collect(c->prog, ki);
  /* Point-to-point needs two ranks. */
  if (c->nranks < 2)
    ki[OVL__COMM_P2P].used = false;
  for (int kind = 0; kind < OVL__NCOMM; kind++)
    if (ki[kind].used && (st = fit_kind(c, &ki[kind], kind)) != OVL_OK)
      return st;
  /* The barrier runs on calc only: it is never beside a kernel. */
  for (int kind = 0; kind < OVL__NCOMM; kind++) {
    if (!ki[kind].used || kind == OVL_COLL_BARRIER)
      continue;
    if (ovl__cal_spent(c))
      break;
    if ((st = contention(c, &ki[kind], kind, &mm, &mm_alone)) != OVL_OK)
      return st;
  }
  return OVL_OK;
}
