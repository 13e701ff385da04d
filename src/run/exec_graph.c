/*
 * Graph mode of the executor (ovl_run_opts.graph; docs/ARCHITECTURE.md,
 * "Graphs"; run/exec.h): a rank's ops captured as graphs, segment by
 * segment, before the first iteration, and each iteration's replay.
 *
 * Before the first iteration each rank captures its own ops (those
 * its rank set gives it) as segments: the stream primitives from one
 * host sync to the next are one graph (backend graph_begin ...
 * graph_end), and the host primitives that end a segment (a fetch, a
 * c_sync_*_stream, a stream_sync, barrier's host sync) run on the
 * host between the replays. Every iteration, warmup included, then
 * launches the segments' graphs in order, each followed by its host
 * primitives: the fetched values come from the replays. A host sync
 * waits for its whole segment (the graph is one unit on calc), so a
 * replay orders at least what the eager run orders.
 *
 * Two variants where a trace is asked for: the plain one, and the
 * traced iteration's, with timer marks around every stream primitive
 * (--op-times marks the working primitives in both).
 *
 * The flight record: a captured call is not enqueued, so the executor
 * notes each segment's comm calls as enqueued when it launches the
 * segment, and as completed when a host sync after it returns (the
 * backend's progress events are not recorded inside graphs).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "run/exec.h"

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
        st = ovl__exec_group(rk, i, end, op_times, trace, err);
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
        st = ovl__exec_op_part(rk, i, 0, h, op_times, trace, err);
    }
    if (st == OVL_OK && h < n)
      st = seg_close(rk, variant, &open, i, h, start, err);
    if (st != OVL_OK)
      break;
  }
  if (st != OVL_OK) {
    rk->run->world->be->graph_abort(rk->br);
    ovl__exec_op_err_prefix(prog, i, err);
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
ovl_status ovl__exec_graph_setup(rank_t *rk, ovl_error *err) {
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
ovl_status ovl__exec_graph_replay(rank_t *rk, int it, bool trace,
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
        ovl__exec_op_err_prefix(prog, g->first_op, err);
        ovl__err_prefix(err, "launching the graph of the segment from: ");
        return st;
      }
    }
    for (int r = 0; r < nrings; r++) {
      uint64_t n = rk->seg_calls[k * (size_t)nrings + (size_t)r];
      if (n == 0)
        continue;
      rk->tag[r] += n;
      ovl__exec_note_enqueued(
          rk, &prog->ops[rk->seg_last[k * (size_t)nrings + (size_t)r]],
          rk->tag[r]);
    }
    if (g->host_op == SIZE_MAX)
      continue;
    set_pos(rk, AT_OP, it, g->host_op);
    st = ovl__exec_op_part(rk, g->host_op, g->host_prim,
                           prog->prim_first[g->host_op + 1] -
                               prog->prim_first[g->host_op],
                           op_times, trace, err);
    if (st != OVL_OK) {
      ovl__exec_op_err_prefix(prog, g->host_op, err);
      return st;
    }
  }
  return OVL_OK;
}
