/*
 * The world and its executor: N ranks on one backend, one thread per rank,
 * every thread driving the same program (DESIGN.md §3).
 *
 * A run, per rank thread:
 *   bind device, create streams and events      (backend rank_init)
 *   allocate every variable; generate inputs    (before the timed loop)
 *   barrier
 *   per iteration: upload inputs (host, synchronous); barrier; t0;
 *                  enqueue the ops; drain every stream; barrier; t1
 *                  (with op times or a trace, timer marks around the ops:
 *                  see "Timer marks" below)
 *   convert the last fetched values; barrier; free; release streams
 * Any failure aborts the whole world (backend world_abort and the barrier),
 * so no rank waits for a rank that has given up.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct ovl_world_s {
  const ovl__backend_ops *be;
  ovl__bworld *bw;
  int nranks;
  double timeout_s;
};

struct ovl_result_s {
  int nranks;
  size_t nfetch;
  int iters;
  double *times;
  double **fetched; /* [rank * nfetch + i], NULL where never fetched */
  size_t nops;
  double *op_times; /* [rank * nops + op], summed; NULL unless asked for */
  /* The trace: the timed iteration traced (-1: none); per (rank, op) four
   * seconds from the rank's base: start and end on the op's stream (or the
   * host), start and end of the record half of c_wait_compute/comm (NaN
   * for other ops); per rank the base's host clock. */
  int trace_iter;
  double *spans;      /* [(rank * nops + op) * 4 + k] */
  double *trace_base; /* [rank] */
};

/* ------------------------------------------------------------------ */
/* World                                                               */
/* ------------------------------------------------------------------ */

static const ovl__backend_ops *pick_backend(const char *name,
                                            ovl_error *err) {
  const ovl__backend_ops *be;
  if (name == NULL || strcmp(name, "auto") == 0) {
    for (size_t i = 0; ovl__backends[i] != NULL; i++)
      if (ovl__backends[i]->device_count() > 0)
        return ovl__backends[i];
    ovl__err(err, OVL_ENODEV, "no backend has a usable device");
    return NULL;
  }
  be = ovl__backend_find(name);
  if (be == NULL) {
    if (strcmp(name, "cuda") == 0)
      ovl__err(err, OVL_ENODEV,
               "backend 'cuda' was not compiled in (configure found no "
               "CUDA/NCCL)");
    else
      ovl__err(err, OVL_ENODEV, "unknown backend '%s' (auto, cpu, cuda)",
               name);
    return NULL;
  }
  return be;
}

ovl_status ovl_world_create(const ovl_world_opts *opts, ovl_world **out,
                            ovl_error *err) {
  ovl_world_opts o = {0};
  const ovl__backend_ops *be;
  ovl_world *w;
  ovl_status st;
  int ndev;

  if (out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_create: out is NULL");
  if (opts != NULL)
    o = *opts;
  be = pick_backend(o.backend, err);
  if (be == NULL)
    return OVL_ENODEV;
  ndev = be->device_count();
  if (ndev <= 0)
    return ovl__err(err, OVL_ENODEV, "backend '%s': no device is visible",
                    be->name);
  if (o.nranks == 0)
    o.nranks = be->default_ranks();
  if (o.nranks < 1 || o.nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL, "ranks must be 1..%d, got %d",
                    OVL_MAX_RANKS, o.nranks);
  if (o.nranks > ndev)
    return ovl__err(err, OVL_ENODEV,
                    "backend '%s': asked for %d ranks but %d device%s "
                    "visible",
                    be->name, o.nranks, ndev, ndev == 1 ? " is" : "s are");
  if (o.timeout_s <= 0)
    o.timeout_s = 60.0;
  w = calloc(1, sizeof *w);
  if (w == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  w->be = be;
  w->nranks = o.nranks;
  w->timeout_s = o.timeout_s;
  st = be->world_init(o.nranks, o.timeout_s, &w->bw, err);
  if (st != OVL_OK) {
    free(w);
    return st;
  }
  if (o.comm_priority_high || o.nccl_min_ctas || o.nccl_max_ctas ||
      o.chaos_seed) {
    st = be->world_tune != NULL
             ? be->world_tune(w->bw, &o, err)
             : ovl__err(err, OVL_EINVAL, "backend '%s' has no tuning knobs",
                        be->name);
    if (st != OVL_OK) {
      ovl_world_free(w);
      return st;
    }
  }
  *out = w;
  return OVL_OK;
}

void ovl_world_free(ovl_world *world) {
  if (world == NULL)
    return;
  world->be->world_fini(world->bw);
  free(world);
}

const char *ovl_world_backend_name(const ovl_world *world) {
  return world->be->name;
}
int ovl_world_nranks(const ovl_world *world) { return world->nranks; }
const char *ovl_world_devices(const ovl_world *world) {
  return world->be->world_devices(world->bw);
}
const char *ovl_world_device_name(const ovl_world *world, int rank) {
  if (world == NULL || rank < 0 || rank >= world->nranks)
    return NULL;
  return world->be->device_name(world->bw, rank);
}

/* The "model name" line of /proc/cpuinfo, or "unknown". */
static void cpu_model(char *buf, size_t len) {
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(buf, len, "unknown");
  if (f == NULL)
    return;
  while (fgets(line, sizeof line, f) != NULL) {
    char *colon = strchr(line, ':');
    size_t n;
    if (strncmp(line, "model name", 10) != 0 || colon == NULL)
      continue;
    colon++;
    while (*colon == ' ' || *colon == '\t')
      colon++;
    n = strcspn(colon, "\n");
    if (n > 0)
      snprintf(buf, len, "%.*s", (int)n, colon);
    break;
  }
  fclose(f);
}

void ovl_world_info_get(const ovl_world *world, ovl_world_info *info) {
  if (info == NULL)
    return;
  memset(info, 0, sizeof *info);
  snprintf(info->driver_version, sizeof info->driver_version, "n/a");
  snprintf(info->runtime_version, sizeof info->runtime_version, "n/a");
  snprintf(info->nccl_version, sizeof info->nccl_version, "n/a");
  if (gethostname(info->hostname, sizeof info->hostname - 1) != 0 ||
      info->hostname[0] == '\0')
    snprintf(info->hostname, sizeof info->hostname, "unknown");
  info->hostname[sizeof info->hostname - 1] = '\0';
  cpu_model(info->cpu_model, sizeof info->cpu_model);
  if (world != NULL)
    world->be->world_info(world->bw, info);
}

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

void ovl_result_free(ovl_result *res) {
  if (res == NULL)
    return;
  if (res->fetched != NULL)
    for (size_t i = 0; i < (size_t)res->nranks * res->nfetch; i++)
      free(res->fetched[i]);
  free(res->fetched);
  free(res->times);
  free(res->op_times);
  free(res->spans);
  free(res->trace_base);
  free(res);
}

int ovl_result_iters(const ovl_result *res) { return res->iters; }
const double *ovl_result_times(const ovl_result *res) { return res->times; }
const double *ovl_result_fetched(const ovl_result *res, int rank, size_t i) {
  if (rank < 0 || rank >= res->nranks || i >= res->nfetch)
    return NULL;
  return res->fetched[(size_t)rank * res->nfetch + i];
}

int ovl_result_trace_iter(const ovl_result *res) {
  return res != NULL && res->spans != NULL ? res->trace_iter : -1;
}

static int get_span(const ovl_result *res, int rank, size_t op, int k,
                    double *start, double *end) {
  const double *s;
  if (res == NULL || res->spans == NULL || rank < 0 || rank >= res->nranks ||
      op >= res->nops)
    return -1;
  s = res->spans + ((size_t)rank * res->nops + op) * 4 + k;
  if (isnan(s[0]) || isnan(s[1]))
    return -1;
  if (start != NULL)
    *start = s[0];
  if (end != NULL)
    *end = s[1];
  return 0;
}

int ovl_result_span(const ovl_result *res, int rank, size_t op,
                    double *start, double *end) {
  return get_span(res, rank, op, 0, start, end);
}

int ovl_result_record_span(const ovl_result *res, int rank, size_t op,
                           double *start, double *end) {
  return get_span(res, rank, op, 2, start, end);
}

double ovl_result_trace_base(const ovl_result *res, int rank) {
  if (res == NULL || res->trace_base == NULL || rank < 0 ||
      rank >= res->nranks)
    return NAN;
  return res->trace_base[rank];
}

/* ------------------------------------------------------------------ */
/* An abortable barrier: a failed rank must not leave the others       */
/* waiting.                                                            */
/* ------------------------------------------------------------------ */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, waiting;
  unsigned long gen;
  bool aborted;
} barrier_t;

static void barrier_init(barrier_t *b, int n) {
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->n = n;
  b->waiting = 0;
  b->gen = 0;
  b->aborted = false;
}

static void barrier_destroy(barrier_t *b) {
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
}

/* False when the run was aborted. */
static bool barrier_wait(barrier_t *b) {
  bool ok;
  pthread_mutex_lock(&b->mu);
  if (!b->aborted) {
    unsigned long gen = b->gen;
    if (++b->waiting == b->n) {
      b->waiting = 0;
      b->gen++;
      pthread_cond_broadcast(&b->cv);
    } else {
      while (gen == b->gen && !b->aborted)
        pthread_cond_wait(&b->cv, &b->mu);
    }
  }
  ok = !b->aborted;
  pthread_mutex_unlock(&b->mu);
  return ok;
}

static void barrier_abort(barrier_t *b) {
  pthread_mutex_lock(&b->mu);
  b->aborted = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* ------------------------------------------------------------------ */
/* The run                                                             */
/* ------------------------------------------------------------------ */

/* Where a rank is, so that a failure can say where every rank was (a
 * timeout is only half the story without the others' positions). Packed
 * in one atomic word: kind, iteration, op index. */
typedef enum {
  AT_SETUP,
  AT_UPLOAD,
  AT_START_BARRIER,
  AT_OP,
  AT_DRAIN,
  AT_END_BARRIER,
  AT_DONE
} at_kind;

static uint64_t pos_pack(at_kind kind, int iter, size_t op) {
  return (uint64_t)kind << 56 | (uint64_t)(iter & 0xffffff) << 32 |
         (uint64_t)(op & 0xffffffffu);
}

typedef struct run_s {
  ovl_world *world;
  const ovl_program *prog;
  ovl_run_opts opts;
  int traced; /* the iteration traced, counting warmup; -1: none */
  ovl_result *res;
  barrier_t barrier;
  pthread_mutex_t err_mu;
  bool failed;
  ovl_error first; /* the first error that is not a consequence of another */
  _Atomic uint64_t *pos; /* per rank: where it is now */
  uint64_t *pos_at_fail; /* per rank: where it was at the first failure */
} run_t;

typedef struct rank_s {
  run_t *run;
  int rank;
  ovl__brank *br;
  double base_host; /* host clock at the traced iteration's base mark */
  void **dev;        /* device buffer of each variable */
  void **host_in;    /* host copy of each data() input, else NULL */
  void **host_out;   /* host buffer of each fetched variable */
  bool *fetched;     /* whether fetched variable i was fetched */
} rank_t;

/* Record a rank's failure; the first real error wins over the aborts it
 * causes in the other ranks. Aborts the world so nobody waits. */
static void run_fail(run_t *run, const ovl_error *e) {
  bool abort_now = false;
  pthread_mutex_lock(&run->err_mu);
  if (!run->failed ||
      (run->first.status == OVL_EABORTED && e->status != OVL_EABORTED)) {
    run->first = *e;
  }
  if (!run->failed) {
    run->failed = true;
    abort_now = true;
    for (int r = 0; r < run->world->nranks; r++)
      run->pos_at_fail[r] = atomic_load(&run->pos[r]);
  }
  pthread_mutex_unlock(&run->err_mu);
  if (abort_now) {
    run->world->be->world_abort(run->world->bw);
    barrier_abort(&run->barrier);
  }
}

static void set_pos(rank_t *rk, at_kind kind, int iter, size_t op) {
  atomic_store_explicit(&rk->run->pos[rk->rank], pos_pack(kind, iter, op),
                        memory_order_relaxed);
}

/* One position in words: "at t.sched:9 (fetch, iteration 2 of 10)". */
static void pos_text(const run_t *run, uint64_t pos, char *buf, size_t len) {
  at_kind kind = (at_kind)(pos >> 56);
  int iter = (int)((pos >> 32) & 0xffffff) + 1;
  size_t op = (size_t)(pos & 0xffffffffu);
  int total = run->opts.warmup + run->opts.iters;
  const ovl__op *o = op < run->prog->nops ? &run->prog->ops[op] : NULL;
  switch (kind) {
  case AT_SETUP:
    snprintf(buf, len, "setting up");
    break;
  case AT_UPLOAD:
    snprintf(buf, len, "uploading inputs (iteration %d of %d)", iter, total);
    break;
  case AT_START_BARRIER:
    snprintf(buf, len, "at the barrier before iteration %d of %d", iter,
             total);
    break;
  case AT_OP:
    if (o != NULL)
      snprintf(buf, len, "at %s:%d (%s, iteration %d of %d)",
               run->prog->filename, o->line, o->def->name, iter, total);
    else
      snprintf(buf, len, "in iteration %d of %d", iter, total);
    break;
  case AT_DRAIN:
    snprintf(buf, len,
             "draining its streams after the ops of iteration %d of %d",
             iter, total);
    break;
  case AT_END_BARRIER:
    snprintf(buf, len, "at the barrier after iteration %d of %d", iter,
             total);
    break;
  case AT_DONE:
  default:
    snprintf(buf, len, "done");
    break;
  }
}

/* Append "; where the ranks were: ranks 0,1 at ...; rank 2 ..." to the
 * failure's message, ranks at the same place grouped. */
static void append_positions(run_t *run) {
  int n = run->world->nranks;
  bool *done = calloc((size_t)n, sizeof *done);
  char text[256], list[256];
  size_t len = strlen(run->first.msg);
  const char *sep = "; where the ranks were: ";
  if (done == NULL)
    return;
  for (int r = 0; r < n; r++) {
    int count = 0;
    size_t off = 0;
    if (done[r])
      continue;
    list[0] = '\0';
    for (int q = r; q < n; q++) {
      if (done[q] || run->pos_at_fail[q] != run->pos_at_fail[r])
        continue;
      done[q] = true;
      count++;
      if (off < sizeof list)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d",
                                count > 1 ? "," : "", q);
    }
    pos_text(run, run->pos_at_fail[r], text, sizeof text);
    if (len < sizeof run->first.msg)
      len += (size_t)snprintf(run->first.msg + len,
                              sizeof run->first.msg - len, "%s%s %s %s", sep,
                              count > 1 ? "ranks" : "rank", list, text);
    sep = "; ";
  }
  free(done);
}

static const char *stream_name(int stream, char *buf, size_t len) {
  if (stream == OVL_STREAM_CALC)
    snprintf(buf, len, "calc");
  else
    snprintf(buf, len, "comm[%d]", stream - 1);
  return buf;
}

/* Enqueue (or, for host ops, perform) one op on this rank. */
static ovl_status exec_op(rank_t *rk, const ovl__op *op, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  const ovl__opdef *def = op->def;
  ovl__brank *br = rk->br;
  int stream = ovl__op_stream(op);
  ovl_status st = OVL_OK;

  switch (def->kind) {
  case OVL_KIND_COMPUTE: {
    const ovl__var *o = &prog->vars[op->out];
    return be->elementwise(br, stream, def->ew, o->dtype, rk->dev[op->out],
                           rk->dev[op->in[0]],
                           op->nin > 1 ? rk->dev[op->in[1]] : NULL,
                           op->scale, op->bias, (size_t)o->numel, err);
  }
  case OVL_KIND_COLLECTIVE: {
    const ovl__var *x = &prog->vars[op->in[0]];
    const ovl__var *o = &prog->vars[op->out];
    size_t count = (size_t)(def->coll == OVL_COLL_REDUCESCATTER ? o->numel
                                                                 : x->numel);
    return be->collective(br, stream, op->ring_id, def->coll, def->redop,
                          x->dtype, rk->dev[op->in[0]], rk->dev[op->out],
                          count, op->root, err);
  }
  case OVL_KIND_WAIT_COMPUTE:
    st = be->event_record(br, OVL_EVENT_COMPUTE(op->ring_id), OVL_STREAM_CALC,
                          err);
    if (st == OVL_OK)
      st = be->stream_wait_event(br, OVL_STREAM_COMM(op->ring_id),
                                 OVL_EVENT_COMPUTE(op->ring_id), err);
    return st;
  case OVL_KIND_WAIT_COMM:
    st = be->event_record(br, OVL_EVENT_COMM(op->ring_id),
                          OVL_STREAM_COMM(op->ring_id), err);
    if (st == OVL_OK)
      st = be->stream_wait_event(br, OVL_STREAM_CALC,
                                 OVL_EVENT_COMM(op->ring_id), err);
    return st;
  case OVL_KIND_SYNC_CALC:
  case OVL_KIND_SYNC_COMM:
  case OVL_KIND_STREAM_SYNC:
    return be->stream_sync(br, stream, err);
  case OVL_KIND_EVENT_RECORD:
    return be->event_record(br, OVL_EVENT_NAMED(prog->nrings, op->event),
                            stream, err);
  case OVL_KIND_STREAM_WAIT_EVENT:
    return be->stream_wait_event(br, stream,
                                 OVL_EVENT_NAMED(prog->nrings, op->event),
                                 err);
  case OVL_KIND_DELAY:
    return be->delay(br, stream, op->us, err);
  case OVL_KIND_FETCH:
    /* As Paddle's executor: the host syncs the calc stream only. */
    st = be->stream_sync(br, OVL_STREAM_CALC, err);
    for (int k = 0; st == OVL_OK && k < op->nin; k++) {
      int v = op->in[k];
      for (size_t i = 0; i < prog->nfetch; i++) {
        if (prog->fetch[i] != v)
          continue;
        st = be->mem_download(br, rk->host_out[i], rk->dev[v],
                              (size_t)prog->vars[v].numel *
                                  ovl_dtype_size(prog->vars[v].dtype),
                              err);
        rk->fetched[i] = true;
      }
    }
    return st;
  }
  return ovl__err(err, OVL_EINVAL, "unknown op kind");
}

const double *ovl_result_op_times(const ovl_result *res, int rank) {
  if (res->op_times == NULL || rank < 0 || rank >= res->nranks)
    return NULL;
  return res->op_times + (size_t)rank * res->nops;
}


/* ------------------------------------------------------------------ */
/* Timer marks                                                         */
/*                                                                     */
/* Mark 0 is a trace's base, on the calc stream right after the start  */
/* barrier. Op i has marks MARK_START(i) and MARK_END(i) around it on  */
/* its stream; with a trace, c_wait_compute and c_wait_comm also have  */
/* MARK_REC_START(i) and MARK_REC_END(i) around their event record on  */
/* the recording stream. --op-times marks the ops that do work         */
/* (op_on_stream) in every iteration and sums their spans over the     */
/* timed ones; a trace marks every stream op of the traced iteration   */
/* only, and notes the host clock around host ops.                     */
/* ------------------------------------------------------------------ */

#define MARK_BASE 0
#define MARK_START(i) (1 + 2 * (size_t)(i))
#define MARK_END(i) (2 + 2 * (size_t)(i))
#define MARK_REC_START(nops, i) (1 + 2 * (size_t)(nops) + 2 * (size_t)(i))
#define MARK_REC_END(nops, i) (2 + 2 * (size_t)(nops) + 2 * (size_t)(i))

/* Ops that do work on a stream, and so can be timed there. */
static bool op_on_stream(const ovl__op *op) {
  ovl__kind k = op->def->kind;
  return k == OVL_KIND_COMPUTE || k == OVL_KIND_COLLECTIVE ||
         k == OVL_KIND_DELAY;
}

/* Ops the host performs (it blocks in them). */
static bool op_on_host(const ovl__op *op) {
  ovl__kind k = op->def->kind;
  return k == OVL_KIND_FETCH || k == OVL_KIND_SYNC_CALC ||
         k == OVL_KIND_SYNC_COMM || k == OVL_KIND_STREAM_SYNC;
}

/* c_wait_compute / c_wait_comm: an event record on one stream and a wait
 * on another. */
static bool op_is_wait_pair(const ovl__op *op) {
  ovl__kind k = op->def->kind;
  return k == OVL_KIND_WAIT_COMPUTE || k == OVL_KIND_WAIT_COMM;
}

static double *span_of(rank_t *rk, size_t op) {
  ovl_result *res = rk->run->res;
  return res->spans + ((size_t)rk->rank * res->nops + op) * 4;
}

/* Enqueue or perform op i, with timer marks around it where asked: `ops`
 * for --op-times, `trace` in the traced iteration. */
static ovl_status exec_marked(rank_t *rk, size_t i, bool op_times,
                              bool trace, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  const ovl__op *op = &prog->ops[i];
  ovl__brank *br = rk->br;
  int stream = ovl__op_stream(op);
  ovl_status st = OVL_OK;

  if (trace && op_on_host(op)) {
    double *sp = span_of(rk, i);
    double h0 = ovl__now();
    st = exec_op(rk, op, err);
    sp[0] = h0 - rk->base_host;
    sp[1] = ovl__now() - rk->base_host;
    return st;
  }
  if (trace && op_is_wait_pair(op)) {
    bool wc = op->def->kind == OVL_KIND_WAIT_COMPUTE;
    int rec = wc ? OVL_STREAM_CALC : OVL_STREAM_COMM(op->ring_id);
    int ev = wc ? OVL_EVENT_COMPUTE(op->ring_id) : OVL_EVENT_COMM(op->ring_id);
    st = be->timer_mark(br, MARK_REC_START(prog->nops, i), rec, err);
    if (st == OVL_OK)
      st = be->event_record(br, ev, rec, err);
    if (st == OVL_OK)
      st = be->timer_mark(br, MARK_REC_END(prog->nops, i), rec, err);
    if (st == OVL_OK)
      st = be->timer_mark(br, MARK_START(i), stream, err);
    if (st == OVL_OK)
      st = be->stream_wait_event(br, stream, ev, err);
    if (st == OVL_OK)
      st = be->timer_mark(br, MARK_END(i), stream, err);
    return st;
  }
  bool marked = (op_times && op_on_stream(op)) || (trace && !op_on_host(op));
  if (marked)
    st = be->timer_mark(br, MARK_START(i), stream, err);
  if (st == OVL_OK)
    st = exec_op(rk, op, err);
  if (st == OVL_OK && marked)
    st = be->timer_mark(br, MARK_END(i), stream, err);
  return st;
}

/* After a drain: add each timed op's span to the result. */
static ovl_status collect_op_times(rank_t *rk, ovl_error *err) {
  const ovl_program *prog = rk->run->prog;
  double *sum = rk->run->res->op_times + (size_t)rk->rank * prog->nops;
  for (size_t i = 0; i < prog->nops; i++) {
    double sec;
    ovl_status st;
    if (!op_on_stream(&prog->ops[i]))
      continue;
    st = rk->run->world->be->timer_elapsed(rk->br, MARK_START(i),
                                           MARK_END(i), &sec, err);
    if (st != OVL_OK)
      return st;
    sum[i] += sec;
  }
  return OVL_OK;
}

/* After the traced iteration's drain: every stream op's span from the
 * base (host ops were noted as they ran). */
static ovl_status collect_spans(rank_t *rk, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  ovl_status st = OVL_OK;
  for (size_t i = 0; st == OVL_OK && i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    double *sp = span_of(rk, i);
    if (op_on_host(op))
      continue;
    st = be->timer_elapsed(rk->br, MARK_BASE, MARK_START(i), &sp[0], err);
    if (st == OVL_OK)
      st = be->timer_elapsed(rk->br, MARK_BASE, MARK_END(i), &sp[1], err);
    if (st == OVL_OK && op_is_wait_pair(op))
      st = be->timer_elapsed(rk->br, MARK_BASE, MARK_REC_START(prog->nops, i),
                             &sp[2], err);
    if (st == OVL_OK && op_is_wait_pair(op))
      st = be->timer_elapsed(rk->br, MARK_BASE, MARK_REC_END(prog->nops, i),
                             &sp[3], err);
  }
  if (st != OVL_OK) {
    ovl__err_prefix(err, "reading the trace's timers: ");
    return st;
  }
  /* An idle stream may reach its first mark before calc reaches the base
   * (by the enqueue latency, microseconds): such a time reads 0. */
  for (size_t i = 0; i < 4 * prog->nops; i++) {
    double *t = rk->run->res->spans + (size_t)rk->rank * prog->nops * 4 + i;
    if (*t < 0)
      *t = 0;
  }
  rk->run->res->trace_base[rk->rank] = rk->base_host;
  return OVL_OK;
}

static ovl_status drain(rank_t *rk, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  ovl_status st = be->stream_sync(rk->br, OVL_STREAM_CALC, err);
  for (int r = 0; st == OVL_OK && r < rk->run->prog->nrings; r++)
    st = be->stream_sync(rk->br, OVL_STREAM_COMM(r), err);
  if (st != OVL_OK)
    ovl__err_prefix(err, "at the end of an iteration: ");
  return st;
}

/* Allocate device buffers and host staging; generate this rank's inputs. */
static ovl_status rank_setup(rank_t *rk, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  ovl_status st;

  rk->dev = calloc(prog->nvars ? prog->nvars : 1, sizeof *rk->dev);
  rk->host_in = calloc(prog->nvars ? prog->nvars : 1, sizeof *rk->host_in);
  rk->host_out = calloc(prog->nfetch ? prog->nfetch : 1,
                        sizeof *rk->host_out);
  rk->fetched = calloc(prog->nfetch ? prog->nfetch : 1, sizeof *rk->fetched);
  if (!rk->dev || !rk->host_in || !rk->host_out || !rk->fetched)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of host memory",
                    rk->rank);
  /* The per-ring events rank_init made, then the schedule's named ones. */
  st = be->events_reserve(rk->br,
                          OVL_EVENT_NAMED(prog->nrings, (int)prog->nevents),
                          err);
  if (st != OVL_OK)
    return st;
  for (size_t v = 0; v < prog->nvars; v++) {
    const ovl__var *var = &prog->vars[v];
    size_t bytes = (size_t)var->numel * ovl_dtype_size(var->dtype);
    st = be->mem_alloc(rk->br, bytes, &rk->dev[v], err);
    if (st != OVL_OK) {
      ovl__err_prefix(err, "allocating '%s' (%zu bytes): ", var->name,
                      bytes);
      return st;
    }
    if (var->init == OVL_INIT_NONE)
      continue;
    st = be->host_alloc(rk->br, bytes, &rk->host_in[v], err);
    if (st != OVL_OK) {
      ovl__err_prefix(err, "host copy of input '%s': ", var->name);
      return st;
    }
    if (var->dtype == OVL_DTYPE_FLOAT32) {
      float *p = rk->host_in[v];
      for (int64_t i = 0; i < var->numel; i++)
        p[i] = (float)ovl__var_init_value(var, rk->rank, i);
    } else {
      double *p = rk->host_in[v];
      for (int64_t i = 0; i < var->numel; i++)
        p[i] = ovl__var_init_value(var, rk->rank, i);
    }
  }
  if (rk->run->opts.op_times || rk->run->traced >= 0) {
    st = be->timers_reserve(rk->br,
                            rk->run->traced >= 0
                                ? MARK_REC_END(prog->nops, prog->nops)
                                : MARK_END(prog->nops),
                            err);
    if (st != OVL_OK)
      return st;
  }
  for (size_t i = 0; i < prog->nfetch; i++) {
    const ovl__var *var = &prog->vars[prog->fetch[i]];
    st = be->host_alloc(rk->br,
                        (size_t)var->numel * ovl_dtype_size(var->dtype),
                        &rk->host_out[i], err);
    if (st != OVL_OK) {
      ovl__err_prefix(err, "host buffer of fetched '%s': ", var->name);
      return st;
    }
  }
  return OVL_OK;
}

static ovl_status upload_inputs(rank_t *rk, ovl_error *err) {
  const ovl_program *prog = rk->run->prog;
  for (size_t v = 0; v < prog->nvars; v++) {
    const ovl__var *var = &prog->vars[v];
    if (rk->host_in[v] == NULL)
      continue;
    ovl_status st = rk->run->world->be->mem_upload(
        rk->br, rk->dev[v], rk->host_in[v],
        (size_t)var->numel * ovl_dtype_size(var->dtype), err);
    if (st != OVL_OK) {
      ovl__err_prefix(err, "uploading input '%s': ", var->name);
      return st;
    }
  }
  return OVL_OK;
}

/* Keep the last fetched values, as doubles, in the result. */
static ovl_status keep_fetched(rank_t *rk, ovl_error *err) {
  const ovl_program *prog = rk->run->prog;
  ovl_result *res = rk->run->res;
  for (size_t i = 0; i < prog->nfetch; i++) {
    const ovl__var *var = &prog->vars[prog->fetch[i]];
    double *d;
    if (!rk->fetched[i])
      continue;
    d = malloc((size_t)var->numel * sizeof *d);
    if (d == NULL)
      return ovl__err(err, OVL_ENOMEM, "rank %d: out of host memory",
                      rk->rank);
    if (var->dtype == OVL_DTYPE_FLOAT32) {
      const float *s = rk->host_out[i];
      for (int64_t k = 0; k < var->numel; k++)
        d[k] = s[k];
    } else {
      memcpy(d, rk->host_out[i], (size_t)var->numel * sizeof *d);
    }
    res->fetched[(size_t)rk->rank * prog->nfetch + i] = d;
  }
  return OVL_OK;
}

static ovl_status run_iterations(rank_t *rk, ovl_error *err) {
  run_t *run = rk->run;
  const ovl__backend_ops *be = run->world->be;
  const ovl_program *prog = run->prog;
  int total = run->opts.warmup + run->opts.iters;
  ovl_status st;
  char sname[32];

  for (int it = 0; it < total; it++) {
    double t0 = 0;
    bool trace = it == run->traced;
    set_pos(rk, AT_UPLOAD, it, 0);
    st = upload_inputs(rk, err);
    if (st != OVL_OK)
      return st;
    set_pos(rk, AT_START_BARRIER, it, 0);
    if (!barrier_wait(&run->barrier))
      return OVL_EABORTED;
    if (rk->rank == 0)
      t0 = ovl__now();
    if (trace) {
      rk->base_host = ovl__now();
      st = be->timer_mark(rk->br, MARK_BASE, OVL_STREAM_CALC, err);
      if (st != OVL_OK) {
        ovl__err_prefix(err, "the trace's base mark: ");
        return st;
      }
    }
    for (size_t i = 0; i < prog->nops; i++) {
      const ovl__op *op = &prog->ops[i];
      set_pos(rk, AT_OP, it, i);
      st = exec_marked(rk, i, run->opts.op_times != 0, trace, err);
      if (st != OVL_OK) {
        ovl__err_prefix(err, "%s:%d:%d: %s on %s stream: ", prog->filename,
                        op->line, op->col, op->def->name,
                        stream_name(ovl__op_stream(op), sname, sizeof sname));
        return st;
      }
    }
    set_pos(rk, AT_DRAIN, it, 0);
    st = drain(rk, err);
    if (st != OVL_OK)
      return st;
    set_pos(rk, AT_END_BARRIER, it, 0);
    if (!barrier_wait(&run->barrier))
      return OVL_EABORTED;
    if (rk->rank == 0 && it >= run->opts.warmup)
      run->res->times[it - run->opts.warmup] = ovl__now() - t0;
    if (run->opts.op_times && it >= run->opts.warmup) {
      st = collect_op_times(rk, err);
      if (st != OVL_OK)
        return st;
    }
    if (trace) {
      st = collect_spans(rk, err);
      if (st != OVL_OK)
        return st;
    }
  }
  set_pos(rk, AT_DONE, total, 0);
  return keep_fetched(rk, err);
}

static void rank_teardown(rank_t *rk) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  ovl_error ignored;

  if (rk->br != NULL) {
    /* Nothing may still run on a buffer we free: drain first (after an
     * abort the backend returns promptly). Then wait for every rank, so no
     * rank frees memory while another's collectives may touch the device.
     */
    (void)drain(rk, &ignored);
    (void)barrier_wait(&rk->run->barrier);
    for (size_t v = 0; rk->dev != NULL && v < prog->nvars; v++)
      if (rk->dev[v] != NULL)
        be->mem_free(rk->br, rk->dev[v]);
    for (size_t v = 0; rk->host_in != NULL && v < prog->nvars; v++)
      if (rk->host_in[v] != NULL)
        be->host_free(rk->br, rk->host_in[v]);
    for (size_t i = 0; rk->host_out != NULL && i < prog->nfetch; i++)
      if (rk->host_out[i] != NULL)
        be->host_free(rk->br, rk->host_out[i]);
    be->rank_fini(rk->br);
  }
  free(rk->dev);
  free(rk->host_in);
  free(rk->host_out);
  free(rk->fetched);
}

static void *rank_main(void *arg) {
  rank_t *rk = arg;
  run_t *run = rk->run;
  ovl_error err = {0};
  ovl_status st;

  st = run->world->be->rank_init(run->world->bw, rk->rank, run->prog->nrings,
                                 &rk->br, &err);
  if (st == OVL_OK)
    st = rank_setup(rk, &err);
  if (st == OVL_OK && !barrier_wait(&run->barrier))
    st = ovl__err(&err, OVL_EABORTED, "rank %d: aborted: another rank failed",
                  rk->rank);
  if (st == OVL_OK)
    st = run_iterations(rk, &err);
  if (st == OVL_EABORTED && err.msg[0] == '\0')
    ovl__err(&err, OVL_EABORTED, "rank %d: aborted: another rank failed",
             rk->rank);
  if (st != OVL_OK) {
    err.status = st;
    run_fail(run, &err);
  }
  rank_teardown(rk);
  return NULL;
}

/* Per op and rank: the timer marks a run reserves (MARK_END for op times,
 * MARK_REC_END for a trace), and what its result keeps (op times: a
 * double; a trace: four, the spans). */
#define MARKS_PER_OP(op_times, trace) ((trace) ? 4 : (op_times) ? 2 : 0)
#define RESULT_BYTES_PER_OP(op_times, trace)                                  \
  (((op_times) ? 1 : 0) + ((trace) ? 4 : 0)) * sizeof(double)

/* The compiled-in backend whose queue costs the host most. */
static const ovl__backend_ops *costliest_backend(void) {
  const ovl__backend_ops *be = ovl__backends[0];
  for (size_t i = 1; ovl__backends[i] != NULL; i++)
    if (ovl__backends[i]->host_bytes_per_command > be->host_bytes_per_command)
      be = ovl__backends[i];
  return be;
}

uint64_t ovl_host_bytes_per_op(const ovl_op_memory_opts *o) {
  const ovl__backend_ops *be = NULL;
  uint64_t nmodes, nranks, per_rank, total;
  size_t marks;
  if (o == NULL)
    return sizeof(ovl__op);
  nmodes = o->nmodes > 0 ? (uint64_t)o->nmodes : 0;
  nranks = o->nranks > 0 ? (uint64_t)o->nranks : 0;
  total = sizeof(ovl__op) * (1 + nmodes);
  if (o->race_check)
    total += ovl__race_bytes_per_op();
  if (o->backend != NULL)
    be = ovl__backend_find(o->backend);
  if (be == NULL)
    be = costliest_backend();
  /* Per rank: an iteration's commands may all wait in the backend's queue
   * (an op and, timed, the two marks around it), the marks reserved, the
   * results of every run, and a timeline of every run. */
  marks = MARKS_PER_OP(o->op_times, o->trace);
  per_rank = be->host_bytes_per_command * (1 + (marks > 0 ? 2 : 0)) +
             be->host_bytes_per_timer * marks +
             nmodes * RESULT_BYTES_PER_OP(o->op_times, o->trace);
  if (o->trace && (o->trace_text || o->svg))
    per_rank += nmodes * ovl__timeline_bytes_per_op(o->trace_text != 0);
  return total + nranks * per_rank;
}

static ovl_status result_new(const ovl_program *prog, int nranks, int iters,
                             bool op_times, int trace_iter, ovl_result **out,
                             ovl_error *err) {
  ovl_result *res = calloc(1, sizeof *res);
  if (res == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  res->nranks = nranks;
  res->nfetch = prog->nfetch;
  res->iters = iters;
  res->times = calloc(iters > 0 ? (size_t)iters : 1, sizeof *res->times);
  res->fetched = calloc((size_t)nranks * prog->nfetch + 1,
                        sizeof *res->fetched);
  res->nops = prog->nops;
  if (op_times)
    res->op_times = calloc((size_t)nranks * prog->nops + 1,
                           sizeof *res->op_times);
  res->trace_iter = trace_iter;
  if (trace_iter >= 0) {
    size_t n = (size_t)nranks * prog->nops * 4;
    res->spans = malloc((n ? n : 1) * sizeof *res->spans);
    res->trace_base = calloc((size_t)nranks, sizeof *res->trace_base);
    for (size_t i = 0; res->spans != NULL && i < n; i++)
      res->spans[i] = NAN;
  }
  if (res->times == NULL || res->fetched == NULL ||
      (op_times && res->op_times == NULL) ||
      (trace_iter >= 0 && (res->spans == NULL || res->trace_base == NULL))) {
    ovl_result_free(res);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  *out = res;
  return OVL_OK;
}

ovl_status ovl_world_run(ovl_world *world, const ovl_program *prog,
                         const ovl_run_opts *opts, ovl_result **out,
                         ovl_error *err) {
  run_t run;
  rank_t *ranks;
  pthread_t *threads;
  ovl_status st;
  int started = 0;

  if (world == NULL || prog == NULL || opts == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_run: NULL argument");
  if (opts->iters < 1 || opts->warmup < 0)
    return ovl__err(err, OVL_EINVAL,
                    "iterations must be >= 1 and warmup >= 0 (got %d, %d)",
                    opts->iters, opts->warmup);
  if (prog->nranks != world->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "%s was parsed for %d ranks but the world has %d",
                    prog->filename, prog->nranks, world->nranks);
  /* Communicators are created here, on the main thread, before any rank
   * thread starts (ncclCommInitAll must see every device at once). */
  st = world->be->world_rings(world->bw, prog->nrings, err);
  if (st != OVL_OK)
    return st;

  memset(&run, 0, sizeof run);
  run.world = world;
  run.prog = prog;
  run.opts = *opts;
  run.traced = -1;
  if (opts->trace) {
    int k = opts->trace_iter < 0 ? opts->iters + opts->trace_iter
                                 : opts->trace_iter;
    if (k < 0 || k >= opts->iters)
      return ovl__err(err, OVL_EINVAL,
                      "trace iteration %d: there are %d timed iterations "
                      "(0 to %d, or -1 to -%d from the end)",
                      opts->trace_iter, opts->iters, opts->iters - 1,
                      opts->iters);
    run.traced = opts->warmup + k;
  }
  st = result_new(prog, world->nranks, opts->iters, opts->op_times != 0,
                  run.traced >= 0 ? run.traced - opts->warmup : -1,
                  &run.res, err);
  if (st != OVL_OK)
    return st;
  ranks = calloc((size_t)world->nranks, sizeof *ranks);
  threads = calloc((size_t)world->nranks, sizeof *threads);
  run.pos = calloc((size_t)world->nranks, sizeof *run.pos);
  run.pos_at_fail = calloc((size_t)world->nranks, sizeof *run.pos_at_fail);
  if (ranks == NULL || threads == NULL || run.pos == NULL ||
      run.pos_at_fail == NULL) {
    free(ranks);
    free(threads);
    free((void *)run.pos);
    free(run.pos_at_fail);
    ovl_result_free(run.res);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  for (int r = 0; r < world->nranks; r++)
    atomic_init(&run.pos[r], pos_pack(AT_SETUP, 0, 0));
  barrier_init(&run.barrier, world->nranks);
  pthread_mutex_init(&run.err_mu, NULL);

  for (int r = 0; r < world->nranks; r++) {
    ranks[r].run = &run;
    ranks[r].rank = r;
    if (pthread_create(&threads[r], NULL, rank_main, &ranks[r]) != 0) {
      ovl_error e;
      ovl__err(&e, OVL_EBACKEND, "could not start the thread of rank %d", r);
      run_fail(&run, &e);
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++)
    pthread_join(threads[r], NULL);

  pthread_mutex_destroy(&run.err_mu);
  barrier_destroy(&run.barrier);
  free(ranks);
  free(threads);
  if (run.failed && world->nranks > 1)
    append_positions(&run);
  free((void *)run.pos);
  free(run.pos_at_fail);
  if (run.failed) {
    ovl_result_free(run.res);
    if (err != NULL)
      *err = run.first;
    return run.first.status;
  }
  *out = run.res;
  return OVL_OK;
}
