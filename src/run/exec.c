/*
 * The executor: ovl_world_run runs a program on every rank of a world,
 * one thread per rank, every thread driving the same program
 * (docs/ARCHITECTURE.md, "The run"). It runs the program's primitives
 * (core/lower.c) and never asks which op it has.
 *
 * A run, per rank thread:
 *   bind device, create streams and events      (backend rank_init)
 *   allocate every variable; generate inputs    (before the timed loop)
 *   barrier
 *   per iteration: upload inputs (host, synchronous); barrier; t0;
 *                  enqueue the primitives; drain every stream; barrier; t1
 *                  (with op times or a trace, timer marks around them:
 *                  see "Timer marks" below)
 *   convert the last fetched values; quiesce; teardown barrier; free
 * Any failure aborts the whole world (backend world_abort and the barrier),
 * so no rank waits for a rank that has given up.
 *
 * With ovl_run_opts.graph the primitives are captured once, before the
 * first iteration, as graphs (one per segment: the stream work between
 * two host syncs), and every iteration replays them (see "Graphs" below).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run.h"

/* ------------------------------------------------------------------ */
/* The barrier                                                         */
/* ------------------------------------------------------------------ */

void ovl__barrier_init(ovl__barrier *b, int n) {
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->n = n;
  b->waiting = 0;
  b->gen = 0;
  b->aborted = false;
  b->outer = NULL;
  b->outer_ctx = NULL;
}

void ovl__barrier_destroy(ovl__barrier *b) {
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
}

bool ovl__barrier_wait(ovl__barrier *b) {
  bool ok;
  pthread_mutex_lock(&b->mu);
  if (!b->aborted) {
    unsigned long gen = b->gen;
    if (++b->waiting == b->n) {
      if (b->outer != NULL) {
        bool ok;
        pthread_mutex_unlock(&b->mu);
        ok = b->outer(b->outer_ctx);
        pthread_mutex_lock(&b->mu);
        if (!ok)
          b->aborted = true;
      }
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

/* Fewer threads will come from now on (n >= 0): release the ones waiting
 * if that completes the barrier. */
void ovl__barrier_resize(ovl__barrier *b, int n) {
  pthread_mutex_lock(&b->mu);
  b->n = n;
  if (b->waiting > 0 && b->waiting >= n) {
    b->waiting = 0;
    b->gen++;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
}

void ovl__barrier_abort(ovl__barrier *b) {
  pthread_mutex_lock(&b->mu);
  b->aborted = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* ------------------------------------------------------------------ */
/* Where the ranks are                                                 */
/* ------------------------------------------------------------------ */

/* Where a rank is, so that a failure can say where every rank was (a
 * timeout is only half the story without the others' positions). Packed
 * in one atomic word: kind, iteration, op index. */
typedef enum {
  AT_SETUP,
  AT_CAPTURE,
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
  ovl__barrier barrier;
  /* Every rank thread meets here before it frees its memory; never
   * aborted (see rank_teardown). */
  ovl__barrier teardown;
  pthread_mutex_t err_mu;
  bool failed;
  ovl_error first; /* the first error that is not a consequence of another */
  _Atomic uint64_t *pos; /* per rank: where it is now */
  uint64_t *pos_at_fail; /* per rank: where it was at the first failure */
  /* Per rank and ring, the last comm tag enqueued and its op (the rank's
   * thread writes them) and the last completed (read from the backend
   * once its streams are quiet). */
  ovl__flight flight;
  /* More than one process: the barriers met so far (the last local rank
   * to arrive meets the other processes: procs_barrier). */
  uint64_t barrier_seq;
} run_t;

/* Graph mode: one segment of an iteration, the stream work up to a host
 * sync (or to the end of the iteration), and the host primitives that end
 * it. */
typedef struct gseg_s {
  /* Its graph in each variant (0: plain, 1: the traced iteration's, with
   * a timer mark around every stream primitive); -1: no stream work. */
  int graph[2];
  size_t first_op;  /* its first op on this rank (positions) */
  size_t host_op;   /* the op whose host primitives end it; SIZE_MAX: none */
  size_t host_prim; /* the first of them, within the op */
} gseg;

typedef struct rank_s {
  run_t *run;
  int rank;
  ovl__brank *br;
  double base_host; /* host clock at the traced iteration's base mark */
  void **dev;        /* device buffer of each variable */
  void **host_in;    /* host copy of each data() input, else NULL */
  void **host_out;   /* host buffer of each fetched variable */
  bool *fetched;     /* whether fetched variable i was fetched */
  int *fetch_slot;   /* per variable: its index in prog->fetch, or -1 */
  /* Per ring, the tag of the last comm op enqueued (flight record). */
  uint64_t tag[OVL_MAX_RINGS];
  /* Room for the items of the largest group. */
  ovl__p2p_item *items;
  /* Graph mode: the segments; per segment and ring, the comm calls of the
   * ring in it and the op of the last ([seg * nrings + ring]); per ring,
   * the tag up to which every call completed (a host sync after its
   * segment returned). */
  bool graph;
  size_t nsegs;
  gseg *segs;
  uint64_t *seg_calls;
  uint32_t *seg_last;
  uint64_t done[OVL_MAX_RINGS];
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
    ovl__barrier_abort(&run->barrier);
    if (run->world->lay.procs != NULL)
      ovl__procs_abort_peers(run->world->lay.procs);
  }
}

/* ------------------------------------------------------------------ */
/* Between processes                                                   */
/* ------------------------------------------------------------------ */

/* Another process's rank failed: fail ours promptly too (their errors
 * are aborts; the agreement after the run keeps the real one). */
static void procs_on_abort(void *ctx) {
  run_t *run = ctx;
  run->world->be->world_abort(run->world->bw);
  ovl__barrier_abort(&run->barrier);
}

static bool procs_stop(void *ctx) {
  run_t *run = ctx;
  bool failed;
  pthread_mutex_lock(&run->err_mu);
  failed = run->failed;
  pthread_mutex_unlock(&run->err_mu);
  return failed;
}

/* The run barrier's outer part: this process's ranks are all there; meet
 * every other process's. The deadline is twice the timeout and more, so
 * that a process whose collective hangs fails by its own timeout (the
 * better message) before the others give up here. */
static bool procs_barrier(void *ctx) {
  run_t *run = ctx;
  const ovl__layout *lay = &run->world->lay;
  double wait_s = 2 * run->world->timeout_s + 5;
  ovl_error e;
  ovl_status st;
  int missing = -1;
  st = ovl__procs_barrier(lay->procs, ++run->barrier_seq,
                          ovl__now() + wait_s, procs_stop, run, &missing, &e);
  if (st == OVL_OK || st == OVL_EABORTED)
    return st == OVL_OK;
  if (st == OVL_ETIMEDOUT)
    ovl__err(&e, OVL_ETIMEDOUT,
             "the barrier of the processes: timed out after %.1f s "
             "waiting for process %d (ranks %d to %d)",
             wait_s, missing, lay->proc_first[missing],
             lay->proc_first[missing + 1] - 1);
  else
    ovl__err_prefix(&e, "the barrier of the processes: ");
  run_fail(run, &e);
  return false;
}

/* The flight record's and the positions' rows of every process, and the
 * one error every process ends with (ovl__procs_agree). */
static ovl_status procs_agree_failure(run_t *run) {
  const ovl__layout *lay = &run->world->lay;
  ovl_status st = run->failed ? run->first.status : OVL_OK;
  ovl_error e = run->first;
  size_t nr = (size_t)run->flight.nrings;
  st = ovl__procs_agree_failed(lay->procs, st, &e);
  if (st == OVL_OK)
    return OVL_OK;
  /* Where this process's ranks were: at their failure, or at the end. */
  if (!run->failed)
    for (int r = lay->first; r < lay->first + lay->nlocal; r++)
      run->pos_at_fail[r] = atomic_load(&run->pos[r]);
  {
    ovl_error ge;
    if (ovl__layout_gather(lay, run->pos_at_fail, sizeof *run->pos_at_fail,
                           &ge) != OVL_OK ||
        (nr > 0 &&
         (ovl__layout_gather(lay, run->flight.enq_tag,
                             nr * sizeof *run->flight.enq_tag,
                             &ge) != OVL_OK ||
          ovl__layout_gather(lay, run->flight.enq_op,
                             nr * sizeof *run->flight.enq_op, &ge) != OVL_OK ||
          ovl__layout_gather(lay, run->flight.done_tag,
                             nr * sizeof *run->flight.done_tag,
                             &ge) != OVL_OK)))
      ovl__err_prefix(&e, "(the other processes' positions could not be "
                          "gathered) ");
  }
  run->failed = true;
  run->first = e;
  run->first.status = st;
  return st;
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
  case AT_CAPTURE:
    if (o != NULL)
      snprintf(buf, len, "capturing the graphs, at %s:%d (%s)",
               run->prog->filename, o->line, o->def->name);
    else
      snprintf(buf, len, "capturing the graphs");
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

/* For ovl__group_ranks: ranks r and q were at the same place. */
static bool same_position(void *ctx, int r, int q) {
  const run_t *run = ctx;
  return run->pos_at_fail[q] == run->pos_at_fail[r];
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
    int count;
    if (done[r])
      continue;
    count = ovl__group_ranks(r, n, done, 1, same_position, run, list,
                             sizeof list);
    pos_text(run, run->pos_at_fail[r], text, sizeof text);
    if (len < sizeof run->first.msg)
      len += (size_t)snprintf(run->first.msg + len,
                              sizeof run->first.msg - len, "%s%s %s %s", sep,
                              count > 1 ? "ranks" : "rank", list, text);
    sep = "; ";
  }
  free(done);
}

/* ------------------------------------------------------------------ */
/* Primitives                                                          */
/* ------------------------------------------------------------------ */

static size_t var_bytes(const ovl__var *v) {
  return (size_t)v->numel * ovl_dtype_size(v->dtype);
}

/* The tag of op's next comm call on its ring (1, 2, ... per rank and
 * ring, across iterations). */
static uint64_t next_tag(rank_t *rk, const ovl__op *op) {
  return ++rk->tag[op->ring_id];
}

/* The flight record: the rank enqueued comm op `op` numbered `tag`. */
static void note_enqueued(rank_t *rk, const ovl__op *op, uint64_t tag) {
  ovl__flight *f = &rk->run->flight;
  size_t k = (size_t)rk->rank * (size_t)f->nrings + (size_t)op->ring_id;
  f->enq_tag[k] = tag;
  f->enq_op[k] = (uint32_t)(op - rk->run->prog->ops);
}

/* The send or receive of op (a SEND or RECV primitive p) on this rank. */
static ovl__p2p_item p2p_item(const rank_t *rk, const ovl__op *op,
                              const ovl__prim *p) {
  const ovl_program *prog = rk->run->prog;
  ovl__p2p_item it;
  int v = p->kind == OVL_PRIM_SEND ? op->in[0] : op->out;
  it.send = p->kind == OVL_PRIM_SEND;
  it.peer = ovl__op_peer(prog, op, rk->rank);
  it.dtype = prog->vars[v].dtype;
  it.buf = rk->dev[v];
  it.count = (size_t)prog->vars[v].numel;
  return it;
}

/* One point-to-point call of items[0..n) (the ops that end with `last`):
 * each item numbered on the ring, the call tagged with the last. */
static ovl_status exec_p2p(rank_t *rk, const ovl__op *last, int stream,
                           const ovl__p2p_item *items, int n,
                           ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  uint64_t tag;
  ovl_status st;
  if (be->p2p == NULL)
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: backend '%s' has no point-to-point", rk->rank,
                    be->name);
  rk->tag[last->ring_id] += (uint64_t)n;
  tag = rk->tag[last->ring_id];
  st = be->p2p(rk->br, stream, last->ring_id, items, n, tag, err);
  if (st == OVL_OK)
    note_enqueued(rk, last, tag);
  return st;
}

/* Enqueue (or, for host primitives, perform) primitive p of op `op`. */
static ovl_status exec_prim(rank_t *rk, const ovl__op *op,
                            const ovl__prim *p, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  const ovl__opdef *def = op->def;
  ovl__brank *br = rk->br;
  ovl_status st = OVL_OK;

  switch ((ovl__prim_kind)p->kind) {
  case OVL_PRIM_KERNEL: {
    const ovl__var *o = &prog->vars[op->out];
    if (def->kernel == OVL_KERNEL_MATMUL) {
      /* out [M, N]; x is [M, K], or [K, M] with trans_x. */
      const ovl__var *x = &prog->vars[op->in[0]];
      size_t k = (size_t)x->dims[op->trans_x ? 0 : 1];
      return be->matmul(br, p->stream, o->dtype, rk->dev[op->out],
                        rk->dev[op->in[0]], rk->dev[op->in[1]],
                        (size_t)o->dims[0], (size_t)o->dims[1], k,
                        op->trans_x, op->trans_y, err);
    }
    return be->elementwise(br, p->stream, def->ew, o->dtype, rk->dev[op->out],
                           rk->dev[op->in[0]],
                           op->nin > 1 ? rk->dev[op->in[1]] : NULL,
                           op->scale, op->bias, (size_t)o->numel, err);
  }
  case OVL_PRIM_COLL: {
    uint64_t tag = next_tag(rk, op);
    if (def->coll == OVL_COLL_BARRIER) {
      /* Its inputs only name dependencies: it moves no data. */
      st = be->collective(br, p->stream, op->ring_id, def->coll, def->redop,
                          OVL_DTYPE_FLOAT32, NULL, NULL, 1, 0, tag, err);
    } else {
      const ovl__var *x = &prog->vars[op->in[0]];
      const ovl__var *o = &prog->vars[op->out];
      st = be->collective(br, p->stream, op->ring_id, def->coll, def->redop,
                          x->dtype, rk->dev[op->in[0]], rk->dev[op->out],
                          ovl__coll_count(def->coll, x->numel, o->numel),
                          ovl__coll_has_root(def->coll)
                              ? ovl__op_root(prog, op, rk->rank)
                              : 0,
                          tag, err);
    }
    if (st == OVL_OK)
      note_enqueued(rk, op, tag);
    return st;
  }
  case OVL_PRIM_SEND:
  case OVL_PRIM_RECV: {
    /* Ungrouped: a lone send or receive (groups: exec_group). */
    ovl__p2p_item it = p2p_item(rk, op, p);
    return exec_p2p(rk, op, p->stream, &it, 1, err);
  }
  case OVL_PRIM_DELAY:
    return be->delay(br, p->stream, op->us, err);
  case OVL_PRIM_RECORD:
    return be->event_record(br, p->event, p->stream, err);
  case OVL_PRIM_WAIT:
    return be->stream_wait_event(br, p->stream, p->event, err);
  case OVL_PRIM_HOST_SYNC:
    if (rk->graph) {
      /* The segment's graph runs on calc, all of its streams inside: the
       * sync of any stream is the sync of calc. Then every comm call
       * enqueued so far has completed. */
      st = be->stream_sync(br, OVL_STREAM_CALC, err);
      if (st == OVL_OK)
        memcpy(rk->done, rk->tag, sizeof rk->done);
      else if (p->stream != OVL_STREAM_CALC)
        ovl__err_prefix(err, "the segment's graph, on the calc stream: ");
      return st;
    }
    return be->stream_sync(br, p->stream, err);
  case OVL_PRIM_HOST_READ:
    for (int k = 0; st == OVL_OK && k < op->nin; k++) {
      int v = op->in[k], slot = rk->fetch_slot[v];
      st = be->mem_download(br, rk->host_out[slot], rk->dev[v],
                            var_bytes(&prog->vars[v]), err);
      rk->fetched[slot] = true;
    }
    return st;
  }
  return ovl__err(err, OVL_EINVAL, "unknown primitive %d", p->kind);
}

/* ------------------------------------------------------------------ */
/* Timer marks                                                         */
/*                                                                     */
/* Mark 0 is a trace's base, on the calc stream right after the start  */
/* barrier. Primitive p has marks MARK_START(p) and MARK_END(p) around */
/* it on its stream. --op-times marks the primitives that do work      */
/* (kernels, collectives, delays) in every iteration and sums their    */
/* spans over the timed ones; a trace marks every stream primitive of  */
/* the traced iteration only, and notes the host clock around host     */
/* ops.                                                                */
/* ------------------------------------------------------------------ */

#define MARK_BASE 0
#define MARK_START(p) (1 + 2 * (size_t)(p))
#define MARK_END(p) (2 + 2 * (size_t)(p))

static double *span_of(rank_t *rk, size_t p) {
  ovl_result *res = rk->run->res;
  return res->spans + ((size_t)rk->rank * res->nprims + p) * 2;
}

/* Enqueue or perform primitives [k0, k1) of op i, with timer marks
 * around them where asked: `op_times` for --op-times, `trace` in the
 * traced iteration. */
static ovl_status exec_op_part(rank_t *rk, size_t i, size_t k0, size_t k1,
                               bool op_times, bool trace, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  const ovl__op *op = &prog->ops[i];
  size_t first = prog->prim_first[i], n;
  const ovl__prim *prims = ovl__op_prims(prog, i, &n);
  ovl_status st = OVL_OK;

  if (trace && ovl__op_on_host(prog, i)) {
    double *sp = span_of(rk, ovl__op_main_prim(prog, i));
    double h0 = ovl__now();
    for (size_t k = k0; st == OVL_OK && k < k1; k++)
      st = exec_prim(rk, op, &prims[k], err);
    sp[0] = h0 - rk->base_host;
    sp[1] = ovl__now() - rk->base_host;
    return st;
  }
  for (size_t k = k0; st == OVL_OK && k < k1; k++) {
    const ovl__prim *p = &prims[k];
    bool marked = trace || (op_times && ovl__prim_works(p));
    if (marked)
      st = be->timer_mark(rk->br, MARK_START(first + k), p->stream, err);
    if (st == OVL_OK)
      st = exec_prim(rk, op, p, err);
    if (st == OVL_OK && marked)
      st = be->timer_mark(rk->br, MARK_END(first + k), p->stream, err);
  }
  return st;
}

static ovl_status exec_op(rank_t *rk, size_t i, bool op_times, bool trace,
                          ovl_error *err) {
  size_t n;
  (void)ovl__op_prims(rk->run->prog, i, &n);
  return exec_op_part(rk, i, 0, n, op_times, trace, err);
}

/* The ops of a group instance that starts at op i: [i, end). */
static size_t group_end(const ovl_program *prog, size_t i) {
  size_t end = i + 1;
  while (end < prog->nops && prog->ops[end].group == prog->ops[i].group)
    end++;
  return end;
}

/* Enqueue the ops [i, end) of a group instance that run on this rank as
 * one point-to-point call (none: nothing), with timer marks around it for
 * each of them where asked. */
static ovl_status exec_group(rank_t *rk, size_t i, size_t end, bool op_times,
                             bool trace, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  const ovl__op *last = NULL;
  bool marked = trace || op_times;
  int n = 0, stream = OVL_STREAM_CALC;
  ovl_status st = OVL_OK;

  for (size_t k = i; k < end; k++) {
    const ovl__op *op = &prog->ops[k];
    const ovl__prim *p = &prog->prims[prog->prim_first[k]];
    if (!ovl__op_on_rank(op, rk->rank))
      continue;
    rk->items[n++] = p2p_item(rk, op, p);
    last = op;
    stream = p->stream;
  }
  if (n == 0)
    return OVL_OK;
  for (size_t k = i; marked && st == OVL_OK && k < end; k++)
    if (ovl__op_on_rank(&prog->ops[k], rk->rank))
      st = be->timer_mark(rk->br, MARK_START(prog->prim_first[k]), stream,
                          err);
  if (st == OVL_OK)
    st = exec_p2p(rk, last, stream, rk->items, n, err);
  for (size_t k = i; marked && st == OVL_OK && k < end; k++)
    if (ovl__op_on_rank(&prog->ops[k], rk->rank))
      st = be->timer_mark(rk->br, MARK_END(prog->prim_first[k]), stream,
                          err);
  return st;
}

/* After a drain: add each timed primitive's span to its op's time (ops
 * this rank does not run have none). */
static ovl_status collect_op_times(rank_t *rk, ovl_error *err) {
  const ovl_program *prog = rk->run->prog;
  double *sum = rk->run->res->op_times + (size_t)rk->rank * prog->nops;
  for (size_t i = 0; i < prog->nops; i++) {
    if (!ovl__op_on_rank(&prog->ops[i], rk->rank))
      continue;
    for (size_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++) {
      double sec;
      ovl_status st;
      if (!ovl__prim_works(&prog->prims[p]))
        continue;
      st = rk->run->world->be->timer_elapsed(rk->br, MARK_START(p),
                                             MARK_END(p), &sec, err);
      if (st != OVL_OK)
        return st;
      sum[i] += sec;
    }
  }
  return OVL_OK;
}

/* After the traced iteration's drain: every stream primitive's span from
 * the base (host ops were noted as they ran; ops this rank does not run
 * have none: their spans stay NaN). */
static ovl_status collect_spans(rank_t *rk, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  ovl_status st = OVL_OK;
  for (size_t i = 0; st == OVL_OK && i < prog->nops; i++) {
    if (!ovl__op_on_rank(&prog->ops[i], rk->rank))
      continue;
    for (size_t p = prog->prim_first[i];
         st == OVL_OK && p < prog->prim_first[i + 1]; p++) {
      double *sp = span_of(rk, p);
      if (ovl__prim_on_host(&prog->prims[p]))
        continue;
      st = be->timer_elapsed(rk->br, MARK_BASE, MARK_START(p), &sp[0], err);
      if (st == OVL_OK)
        st = be->timer_elapsed(rk->br, MARK_BASE, MARK_END(p), &sp[1], err);
    }
  }
  if (st != OVL_OK) {
    ovl__err_prefix(err, "reading the trace's timers: ");
    return st;
  }
  /* An idle stream may reach its first mark before calc reaches the base
   * (by the enqueue latency, microseconds): such a time reads 0. */
  for (size_t p = 0; p < prog->nprims; p++) {
    double *sp = span_of(rk, p);
    for (int k = 0; k < 2; k++)
      if (sp[k] < 0)
        sp[k] = 0;
  }
  rk->run->res->trace_base[rk->rank] = rk->base_host;
  return OVL_OK;
}

static ovl_status drain(rank_t *rk, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  ovl_status st = OVL_OK;
  for (int s = 0; st == OVL_OK && s < rk->run->prog->nstreams; s++)
    st = be->stream_sync(rk->br, s, err);
  if (st != OVL_OK)
    ovl__err_prefix(err, "at the end of an iteration: ");
  return st;
}

/* ------------------------------------------------------------------ */
/* A rank's thread                                                     */
/* ------------------------------------------------------------------ */

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
  rk->fetch_slot = malloc((prog->nvars ? prog->nvars : 1) *
                          sizeof *rk->fetch_slot);
  if (!rk->dev || !rk->host_in || !rk->host_out || !rk->fetched ||
      !rk->fetch_slot)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of host memory",
                    rk->rank);
  {
    size_t most = 1;
    for (size_t i = 0; i < prog->nops; i++)
      if (prog->ops[i].group != 0) {
        size_t end = group_end(prog, i);
        if (end - i > most)
          most = end - i;
        i = end - 1;
      }
    rk->items = malloc(most * sizeof *rk->items);
    if (rk->items == NULL)
      return ovl__err(err, OVL_ENOMEM, "rank %d: out of host memory",
                      rk->rank);
  }
  for (size_t v = 0; v < prog->nvars; v++)
    rk->fetch_slot[v] = -1;
  for (size_t i = 0; i < prog->nfetch; i++)
    rk->fetch_slot[prog->fetch[i]] = (int)i;
  /* calc and the comm streams rank_init made, then the user streams. */
  st = be->streams_reserve(rk->br, prog->nstreams,
                           (const char *const *)prog->stream_names, err);
  if (st != OVL_OK)
    return st;
  /* The per-ring events rank_init made, then the schedule's named ones. */
  st = be->events_reserve(rk->br, ovl__program_nevents(prog), err);
  if (st != OVL_OK)
    return st;
  for (size_t v = 0; v < prog->nvars; v++) {
    const ovl__var *var = &prog->vars[v];
    size_t bytes = var_bytes(var);
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
    for (int64_t i = 0; i < var->numel; i++)
      ovl__dtype_store(var->dtype, rk->host_in[v], (size_t)i,
                       ovl__var_init_value(var, rk->rank, i));
  }
  if (rk->run->opts.op_times || rk->run->traced >= 0) {
    st = be->timers_reserve(rk->br, MARK_END(prog->nprims), err);
    if (st != OVL_OK)
      return st;
  }
  for (size_t i = 0; i < prog->nfetch; i++) {
    const ovl__var *var = &prog->vars[prog->fetch[i]];
    st = be->host_alloc(rk->br, var_bytes(var), &rk->host_out[i], err);
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
        rk->br, rk->dev[v], rk->host_in[v], var_bytes(var), err);
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
    if (var->dtype == OVL_DTYPE_FLOAT64) {
      memcpy(d, rk->host_out[i], (size_t)var->numel * sizeof *d);
    } else if (var->dtype == OVL_DTYPE_FLOAT32) {
      const float *s = rk->host_out[i];
      for (int64_t k = 0; k < var->numel; k++)
        d[k] = s[k];
    } else {
      for (int64_t k = 0; k < var->numel; k++)
        d[k] = ovl__dtype_load(var->dtype, rk->host_out[i], (size_t)k);
    }
    res->fetched[(size_t)rk->rank * prog->nfetch + i] = d;
  }
  return OVL_OK;
}

/* "calc stream", or the streams of an op that touches several. */
static const char *op_where(const ovl_program *prog, size_t i, char *buf,
                            size_t size) {
  int s = ovl__op_work_stream(prog, i);
  if (s == OVL_STREAM_HOST)
    s = prog->prims[ovl__op_main_prim(prog, i)].stream;
  if (s == OVL_STREAM_HOST)
    s = OVL_STREAM_CALC;
  snprintf(buf, size, "%s stream", ovl__stream_name(prog, s));
  return buf;
}

/* "t.sched:7:1: c_allreduce_sum on comm stream: " (or the group's
 * lines) before a failure of op i (a group starts there). */
static void op_err_prefix(const ovl_program *prog, size_t i, ovl_error *err) {
  const ovl__op *op = &prog->ops[i];
  char where[48];
  if (op->group != 0) {
    size_t end = group_end(prog, i);
    ovl__err_prefix(err, "%s:%d:%d: %s (group of %zu ops, lines %d-%d) on "
                    "%s: ",
                    prog->filename, op->line, op->col, op->def->name, end - i,
                    op->line, prog->ops[end - 1].line,
                    op_where(prog, i, where, sizeof where));
    return;
  }
  ovl__err_prefix(err, "%s:%d:%d: %s on %s: ", prog->filename, op->line,
                  op->col, op->def->name,
                  op_where(prog, i, where, sizeof where));
}

/* ------------------------------------------------------------------ */
/* Graphs (ovl_run_opts.graph; docs/ARCHITECTURE.md, "Graphs")         */
/*                                                                     */
/* Before the first iteration each rank captures its own ops (those    */
/* its rank set gives it) as segments: the stream primitives from one  */
/* host sync to the next are one graph (backend graph_begin ...        */
/* graph_end), and the host primitives that end a segment (a fetch, a  */
/* c_sync_*_stream, a stream_sync, barrier's host sync) run on the     */
/* host between the replays. Every iteration, warmup included, then    */
/* launches the segments' graphs in order, each followed by its host   */
/* primitives: the fetched values come from the replays. A host sync   */
/* waits for its whole segment (the graph is one unit on calc), so a   */
/* replay orders at least what the eager run orders.                   */
/*                                                                     */
/* Two variants where a trace is asked for: the plain one, and the     */
/* traced iteration's, with timer marks around every stream primitive  */
/* (--op-times marks the working primitives in both).                  */
/*                                                                     */
/* The flight record: a captured call is not enqueued, so the executor */
/* notes each segment's comm calls as enqueued when it launches the    */
/* segment, and as completed when a host sync after it returns (the    */
/* backend's progress events are not recorded inside graphs).          */
/* ------------------------------------------------------------------ */

/* Open the capture of a segment that starts at op i, once. */
static ovl_status seg_open(rank_t *rk, bool *open, size_t i, ovl_error *err) {
  gseg *g = &rk->segs[rk->nsegs];
  ovl_status st;
  if (*open)
    return OVL_OK;
  st = rk->run->world->be->graph_begin(rk->br, err);
  if (st != OVL_OK)
    return st;
  *open = true;
  g->first_op = i;
  return OVL_OK;
}

/* Close the current segment, ended by primitives [host_prim, ...) of op
 * host_op (SIZE_MAX: the end of the iteration): its graph in `variant`,
 * and in variant 0 its comm calls (counted from `start`, the tags at its
 * start, which move on). */
static ovl_status seg_close(rank_t *rk, int variant, bool *open,
                            size_t host_op, size_t host_prim,
                            uint64_t *start, ovl_error *err) {
  const ovl__flight *f = &rk->run->flight;
  size_t k = rk->nsegs;
  gseg *g = &rk->segs[k];
  int nrings = rk->run->prog->nrings;
  ovl_status st;
  if (*open) {
    *open = false;
    st = rk->run->world->be->graph_end(rk->br, &g->graph[variant], err);
    if (st != OVL_OK)
      return st;
  } else {
    g->graph[variant] = -1;
    g->first_op = host_op;
  }
  if (variant == 0) {
    g->host_op = host_op;
    g->host_prim = host_prim;
    for (int r = 0; r < nrings; r++) {
      size_t fk = (size_t)rk->rank * (size_t)f->nrings + (size_t)r;
      rk->seg_calls[k * (size_t)nrings + (size_t)r] = rk->tag[r] - start[r];
      rk->seg_last[k * (size_t)nrings + (size_t)r] = f->enq_op[fk];
      start[r] = rk->tag[r];
    }
  } else if (g->host_op != host_op) {
    return ovl__err(err, OVL_EINVAL,
                    "rank %d: the traced graphs split at op %zu, the plain "
                    "ones at op %zu",
                    rk->rank, host_op, g->host_op);
  }
  rk->nsegs++;
  return OVL_OK;
}

/* Capture one variant of the iteration as segments (rk->nsegs counts
 * them from 0). */
static ovl_status graph_capture(rank_t *rk, int variant, ovl_error *err) {
  const ovl_program *prog = rk->run->prog;
  bool op_times = rk->run->opts.op_times != 0, trace = variant == 1;
  uint64_t start[OVL_MAX_RINGS];
  bool open = false;
  ovl_status st = OVL_OK;
  size_t i;

  memcpy(start, rk->tag, sizeof start);
  rk->nsegs = 0;
  for (i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    size_t n, h;
    const ovl__prim *prims;
    set_pos(rk, AT_CAPTURE, 0, i);
    if (op->group != 0) {
      size_t end = group_end(prog, i);
      bool mine = false;
      for (size_t k = i; k < end; k++)
        mine = mine || ovl__op_on_rank(&prog->ops[k], rk->rank);
      if (mine)
        st = seg_open(rk, &open, i, err);
      if (st == OVL_OK)
        st = exec_group(rk, i, end, op_times, trace, err);
      if (st != OVL_OK)
        break;
      i = end - 1;
      continue;
    }
    if (!ovl__op_on_rank(op, rk->rank))
      continue;
    prims = ovl__op_prims(prog, i, &n);
    for (h = 0; h < n && !ovl__prim_on_host(&prims[h]); h++)
      ;
    if (h > 0) {
      st = seg_open(rk, &open, i, err);
      if (st == OVL_OK)
        st = exec_op_part(rk, i, 0, h, op_times, trace, err);
    }
    if (st == OVL_OK && h < n)
      st = seg_close(rk, variant, &open, i, h, start, err);
    if (st != OVL_OK)
      break;
  }
  if (st != OVL_OK) {
    rk->run->world->be->graph_abort(rk->br);
    op_err_prefix(prog, i, err);
    ovl__err_prefix(err, "capturing the graphs: ");
    return st;
  }
  st = seg_close(rk, variant, &open, SIZE_MAX, 0, start, err);
  if (st != OVL_OK)
    ovl__err_prefix(err, "capturing the graphs (end of the iteration): ");
  return st;
}

/* Graph mode, before the first iteration: room for the segments, the
 * captures, and the tags back to where nothing was enqueued. */
static ovl_status graph_setup(rank_t *rk, ovl_error *err) {
  const ovl_program *prog = rk->run->prog;
  ovl__flight *f = &rk->run->flight;
  size_t most = 1, nsegs;
  ovl_status st;

  /* At most one segment per op that ends in host primitives, and one. */
  for (size_t i = 0; i < prog->nops; i++)
    if (ovl__prim_on_host(&prog->prims[prog->prim_first[i + 1] - 1]))
      most++;
  rk->segs = calloc(most, sizeof *rk->segs);
  rk->seg_calls = calloc(most * (size_t)(prog->nrings ? prog->nrings : 1),
                         sizeof *rk->seg_calls);
  rk->seg_last = calloc(most * (size_t)(prog->nrings ? prog->nrings : 1),
                        sizeof *rk->seg_last);
  if (rk->segs == NULL || rk->seg_calls == NULL || rk->seg_last == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of host memory",
                    rk->rank);
  st = graph_capture(rk, 0, err);
  nsegs = rk->nsegs;
  if (st == OVL_OK && rk->run->traced >= 0) {
    st = graph_capture(rk, 1, err);
    if (st == OVL_OK && rk->nsegs != nsegs)
      st = ovl__err(err, OVL_EINVAL,
                    "rank %d: %zu traced segments, %zu plain ones", rk->rank,
                    rk->nsegs, nsegs);
  }
  if (st != OVL_OK)
    return st;
  /* Nothing was enqueued: the replays number the calls from 1. */
  memset(rk->tag, 0, sizeof rk->tag);
  for (int r = 0; r < f->nrings; r++)
    f->enq_tag[(size_t)rk->rank * (size_t)f->nrings + (size_t)r] = 0;
  return OVL_OK;
}

/* Graph mode: one iteration, the segments in order, each launched and
 * followed by its host primitives. */
static ovl_status graph_replay(rank_t *rk, int it, bool trace,
                               ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  const ovl_program *prog = rk->run->prog;
  int nrings = prog->nrings;
  bool op_times = rk->run->opts.op_times != 0;
  ovl_status st;

  for (size_t k = 0; k < rk->nsegs; k++) {
    const gseg *g = &rk->segs[k];
    int graph = g->graph[trace ? 1 : 0];
    if (graph >= 0) {
      set_pos(rk, AT_OP, it, g->first_op);
      st = be->graph_launch(rk->br, graph, err);
      if (st != OVL_OK) {
        op_err_prefix(prog, g->first_op, err);
        ovl__err_prefix(err, "launching the graph of the segment from: ");
        return st;
      }
    }
    for (int r = 0; r < nrings; r++) {
      uint64_t n = rk->seg_calls[k * (size_t)nrings + (size_t)r];
      if (n == 0)
        continue;
      rk->tag[r] += n;
      note_enqueued(rk, &prog->ops[rk->seg_last[k * (size_t)nrings + (size_t)r]],
                    rk->tag[r]);
    }
    if (g->host_op == SIZE_MAX)
      continue;
    set_pos(rk, AT_OP, it, g->host_op);
    st = exec_op_part(rk, g->host_op, g->host_prim,
                      prog->prim_first[g->host_op + 1] -
                          prog->prim_first[g->host_op],
                      op_times, trace, err);
    if (st != OVL_OK) {
      op_err_prefix(prog, g->host_op, err);
      return st;
    }
  }
  return OVL_OK;
}

static ovl_status run_iterations(rank_t *rk, ovl_error *err) {
  run_t *run = rk->run;
  const ovl__backend_ops *be = run->world->be;
  const ovl_program *prog = run->prog;
  int total = run->opts.warmup + run->opts.iters;
  ovl_status st;

  if (rk->graph) {
    st = graph_setup(rk, err);
    if (st != OVL_OK)
      return st;
  }
  for (int it = 0; it < total; it++) {
    double t0 = 0;
    bool trace = it == run->traced;
    set_pos(rk, AT_UPLOAD, it, 0);
    st = upload_inputs(rk, err);
    if (st != OVL_OK)
      return st;
    set_pos(rk, AT_START_BARRIER, it, 0);
    if (!ovl__barrier_wait(&run->barrier))
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
    for (size_t i = 0; !rk->graph && i < prog->nops; i++) {
      const ovl__op *op = &prog->ops[i];
      if (op->group != 0) {
        size_t end = group_end(prog, i);
        set_pos(rk, AT_OP, it, i);
        st = exec_group(rk, i, end, run->opts.op_times != 0, trace, err);
        if (st != OVL_OK) {
          op_err_prefix(prog, i, err);
          return st;
        }
        i = end - 1;
        continue;
      }
      /* A rank not in the op's ranks skips it entirely. */
      if (!ovl__op_on_rank(op, rk->rank))
        continue;
      set_pos(rk, AT_OP, it, i);
      st = exec_op(rk, i, run->opts.op_times != 0, trace, err);
      if (st != OVL_OK) {
        op_err_prefix(prog, i, err);
        return st;
      }
    }
    if (rk->graph) {
      st = graph_replay(rk, it, trace, err);
      if (st != OVL_OK)
        return st;
    }
    set_pos(rk, AT_DRAIN, it, 0);
    st = drain(rk, err);
    if (st != OVL_OK)
      return st;
    memcpy(rk->done, rk->tag, sizeof rk->done);
    set_pos(rk, AT_END_BARRIER, it, 0);
    if (!ovl__barrier_wait(&run->barrier))
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
  bool idle = true;

  /* Nothing may still run on a buffer we free, on this rank or on another
   * (a collective writes into every rank's buffers): every rank first waits
   * until its own streams are idle, with no deadline (a failed run has
   * aborted the world, so that takes no longer than the kernels already
   * running), then all ranks meet at a barrier that no abort opens. A
   * rank whose streams would not empty leaks its memory instead. */
  if (rk->br != NULL)
    idle = be->rank_quiesce(rk->br);
  /* The flight record's last completed tags, while the rank exists. */
  if (rk->br != NULL && be->ring_progress != NULL) {
    ovl__flight *f = &rk->run->flight;
    for (int ring = 0; ring < f->nrings; ring++) {
      uint64_t done = be->ring_progress(rk->br, ring);
      /* Graph mode: the backend sees no captured call complete. */
      if (rk->graph && rk->done[ring] > done)
        done = rk->done[ring];
      f->done_tag[(size_t)rk->rank * (size_t)f->nrings + (size_t)ring] =
          done;
    }
  }
  ovl__barrier_wait(&rk->run->teardown);
  if (rk->br != NULL && idle) {
    for (size_t v = 0; rk->dev != NULL && v < prog->nvars; v++)
      if (rk->dev[v] != NULL)
        be->mem_free(rk->br, rk->dev[v]);
    for (size_t v = 0; rk->host_in != NULL && v < prog->nvars; v++)
      if (rk->host_in[v] != NULL)
        be->host_free(rk->br, rk->host_in[v]);
    for (size_t i = 0; rk->host_out != NULL && i < prog->nfetch; i++)
      if (rk->host_out[i] != NULL)
        be->host_free(rk->br, rk->host_out[i]);
  }
  if (rk->br != NULL)
    be->rank_fini(rk->br);
  free(rk->dev);
  free(rk->host_in);
  free(rk->host_out);
  free(rk->fetched);
  free(rk->fetch_slot);
  free(rk->items);
  free(rk->segs);
  free(rk->seg_calls);
  free(rk->seg_last);
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
  if (st == OVL_OK && !ovl__barrier_wait(&run->barrier))
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

/* ------------------------------------------------------------------ */
/* The run                                                             */
/* ------------------------------------------------------------------ */

static void flight_free(ovl__flight *f) {
  free(f->enq_tag);
  free(f->enq_op);
  free(f->done_tag);
}

ovl_status ovl_world_run(ovl_world *world, const ovl_program *prog,
                         const ovl_run_opts *opts, ovl_result **out,
                         ovl_error *err) {
  return ovl__world_run(world, prog, opts, NULL, out, err);
}

ovl_status ovl__world_run(ovl_world *world, const ovl_program *prog,
                          const ovl_run_opts *opts, ovl__compare *cmp,
                          ovl_result **out, ovl_error *err) {
  run_t run;
  rank_t *ranks;
  pthread_t *threads;
  ovl_status st;
  int started = 0;
  const ovl__layout *lay = world != NULL ? &world->lay : NULL;

  if (cmp != NULL) {
    cmp->status = OVL_OK;
    memset(cmp->out, 0, sizeof *cmp->out);
  }
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
  if (opts->graph && world->be->graph_begin == NULL)
    return ovl__err_no_graphs(err, world->be->name);
  /* No more tuning (ovl_world_set) from here on. */
  world->ran = true;
  /* Communicators are created here, on the main thread, before any rank
   * thread starts (ncclCommInitAll must see every device at once). */
  st = world->be->world_rings(world->bw, prog->nrings, prog->ring_comm, err);
  if (st == OVL_OK && world->be->world_p2p != NULL)
    st = world->be->world_p2p(world->bw, ovl__program_p2p_rings(prog), err);
  if (world->lay.procs != NULL)
    st = ovl__procs_agree(world->lay.procs, st, err);
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
  st = ovl__result_new(prog, world->nranks, opts->iters, opts->op_times != 0,
                       run.traced >= 0 ? run.traced - opts->warmup : -1,
                       &run.res, err);
  if (st == OVL_OK)
    st = ovl__result_set_machine(run.res, world, err);
  if (st != OVL_OK) {
    ovl_result_free(run.res);
    return st;
  }
  ranks = calloc((size_t)world->nranks, sizeof *ranks);
  threads = calloc((size_t)world->nranks, sizeof *threads);
  run.pos = calloc((size_t)world->nranks, sizeof *run.pos);
  run.pos_at_fail = calloc((size_t)world->nranks, sizeof *run.pos_at_fail);
  run.flight.nranks = world->nranks;
  run.flight.nrings = prog->nrings;
  run.flight.iters = opts->warmup + opts->iters;
  run.flight.have_done = world->be->ring_progress != NULL;
  {
    size_t n = (size_t)world->nranks * (size_t)prog->nrings + 1;
    run.flight.enq_tag = calloc(n, sizeof *run.flight.enq_tag);
    run.flight.enq_op = calloc(n, sizeof *run.flight.enq_op);
    run.flight.done_tag = calloc(n, sizeof *run.flight.done_tag);
  }
  if (ranks == NULL || threads == NULL || run.pos == NULL ||
      run.pos_at_fail == NULL || run.flight.enq_tag == NULL ||
      run.flight.enq_op == NULL || run.flight.done_tag == NULL) {
    free(ranks);
    free(threads);
    free((void *)run.pos);
    free(run.pos_at_fail);
    flight_free(&run.flight);
    ovl_result_free(run.res);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  for (int r = 0; r < world->nranks; r++)
    atomic_init(&run.pos[r], pos_pack(AT_SETUP, 0, 0));
  ovl__barrier_init(&run.barrier, lay->nlocal);
  ovl__barrier_init(&run.teardown, lay->nlocal);
  pthread_mutex_init(&run.err_mu, NULL);
  run.res->lo = lay->first;
  run.res->hi = lay->first + lay->nlocal;
  run.res->all_held = lay->procs == NULL;
  if (lay->procs != NULL) {
    run.barrier.outer = procs_barrier;
    run.barrier.outer_ctx = &run;
    ovl__procs_run_begin(lay->procs, procs_on_abort, &run);
  }

  /* This process's ranks, one thread each. */
  for (int r = lay->first; r < lay->first + lay->nlocal; r++) {
    ranks[r].run = &run;
    ranks[r].rank = r;
    ranks[r].graph = opts->graph != 0;
    if (pthread_create(&threads[r], NULL, rank_main, &ranks[r]) != 0) {
      ovl_error e;
      ovl__err(&e, OVL_EBACKEND, "could not start the thread of rank %d", r);
      run_fail(&run, &e);
      /* The ranks that will never start do not come to the teardown. */
      ovl__barrier_resize(&run.teardown, started);
      break;
    }
    started++;
  }
  for (int r = lay->first; r < lay->first + started; r++)
    pthread_join(threads[r], NULL);
  /* The comparison, where the values are: this process's ranks. */
  if (cmp != NULL && !run.failed)
    ovl__compare_local(cmp, run.res);
  if (lay->procs != NULL) {
    ovl_status ast;
    ovl__procs_run_end(lay->procs);
    /* Every process ends the same: the first real error of any, with
     * every rank's place and flight record; or every rank's result,
     * merged once, its comparison with it. */
    ast = procs_agree_failure(&run);
    if (ast == OVL_OK)
      ast = ovl__result_merge(run.res, lay, prog, &run.first);
    if (ast == OVL_OK && cmp != NULL)
      ast = ovl__compare_merge(cmp, lay, &run.first);
    if (ast != OVL_OK && !run.failed) {
      run.failed = true;
      run.first.status = ast;
    }
  }

  pthread_mutex_destroy(&run.err_mu);
  ovl__barrier_destroy(&run.barrier);
  ovl__barrier_destroy(&run.teardown);
  free(ranks);
  free(threads);
  if (run.failed && world->nranks > 1)
    append_positions(&run);
  /* A hang: what each rank's communication had reached, in the
   * iteration the ranks were in (the earliest, if they differ). */
  if (run.failed && run.first.status == OVL_ETIMEDOUT) {
    int total = opts->warmup + opts->iters;
    run.flight.iter = total - 1;
    for (int r = 0; r < world->nranks; r++) {
      int it = (int)((run.pos_at_fail[r] >> 32) & 0xffffff);
      if (it < run.flight.iter)
        run.flight.iter = it;
    }
    ovl__flight_append(prog, &run.flight, run.first.msg,
                       sizeof run.first.msg);
  }
  free((void *)run.pos);
  free(run.pos_at_fail);
  flight_free(&run.flight);
  if (run.failed) {
    ovl_result_free(run.res);
    if (err != NULL)
      *err = run.first;
    return run.first.status;
  }
  *out = run.res;
  return OVL_OK;
}
