/*
 * The executor's primitives (run/exec.h; docs/ARCHITECTURE.md,
 * "Lowering"): each primitive of an op enqueued on the backend (or, on the
 * host, performed), an op's primitives and a group's one point-to-point
 * call with their timer marks, the comm calls numbered for the flight
 * record, and after a drain the spans and op times read back from the
 * marks. It never asks which op it has: the primitive says what to do.
 */
#include <stdio.h>
#include <string.h>

#include "run/exec.h"

/* ------------------------------------------------------------------ */
/* Primitives                                                          */
/* ------------------------------------------------------------------ */

/* The tag of op's next comm call on its ring (1, 2, ... per rank and
 * ring, across iterations). */
static uint64_t next_tag(rank_t *rk, const ovl__op *op) {
  return ++rk->tag[op->ring_id];
}

/* The flight record: the rank enqueued comm op `op` numbered `tag`. */
void ovl__exec_note_enqueued(rank_t *rk, const ovl__op *op, uint64_t tag) {
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
    ovl__exec_note_enqueued(rk, last, tag);
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
      ovl__exec_note_enqueued(rk, op, tag);
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
/* Ops and groups, with their timer marks (run/exec.h, "Timer marks") */
/* ------------------------------------------------------------------ */

static double *span_of(rank_t *rk, size_t p) {
  ovl_result *res = rk->run->res;
  return res->spans + ((size_t)rk->rank * res->nprims + p) * 2;
}

/* Enqueue or perform primitives [k0, k1) of op i, with timer marks
 * around them where asked: `op_times` for --op-times, `trace` in the
 * traced iteration. */
ovl_status ovl__exec_op_part(rank_t *rk, size_t i, size_t k0, size_t k1,
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

ovl_status ovl__exec_op(rank_t *rk, size_t i, bool op_times, bool trace,
                        ovl_error *err) {
  size_t n;
  (void)ovl__op_prims(rk->run->prog, i, &n);
  return ovl__exec_op_part(rk, i, 0, n, op_times, trace, err);
}

/* Enqueue the ops [i, end) of a group instance that run on this rank as
 * one point-to-point call (none: nothing), with timer marks around it for
 * each of them where asked. */
ovl_status ovl__exec_group(rank_t *rk, size_t i, size_t end, bool op_times,
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
ovl_status ovl__exec_collect_op_times(rank_t *rk, ovl_error *err) {
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
ovl_status ovl__exec_collect_spans(rank_t *rk, ovl_error *err) {
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

ovl_status ovl__exec_drain(rank_t *rk, ovl_error *err) {
  const ovl__backend_ops *be = rk->run->world->be;
  ovl_status st = OVL_OK;
  for (int s = 0; st == OVL_OK && s < rk->run->prog->nstreams; s++)
    st = be->stream_sync(rk->br, s, err);
  if (st != OVL_OK)
    ovl__err_prefix(err, "at the end of an iteration: ");
  return st;
}

/* ------------------------------------------------------------------ */
/* Where an op failed                                                  */
/* ------------------------------------------------------------------ */

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
void ovl__exec_op_err_prefix(const ovl_program *prog, size_t i,
                             ovl_error *err) {
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
