/*
 * A rank's thread (run/exec.h): its setup (the backend's rank, streams and
 * events; a device buffer per variable; the inputs generated into host
 * copies; host buffers for the fetched values), every
 * iteration (upload, barrier, the ops enqueued or the graphs replayed,
 * drain, barrier, the times read), the fetched values kept as doubles,
 * and the teardown (quiesce, the flight record's last completed tags, a
 * barrier no abort opens, free).
 */
#include <stdlib.h>
#include <string.h>

#include "run/exec.h"

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

/* Eagerly, one iteration (`it`; `trace`: the traced one): this rank's ops
 * enqueued (or, on the host, performed) in program order, each group's as
 * one call. */
static ovl_status enqueue_ops(rank_t *rk, int it, bool trace,
                              ovl_error *err) {
  run_t *run = rk->run;
  const ovl_program *prog = run->prog;
  ovl_status st;

  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    if (op->group != 0) {
      size_t end = group_end(prog, i);
      set_pos(rk, AT_OP, it, i);
      st = ovl__exec_group(rk, i, end, run->opts.op_times != 0, trace, err);
      if (st != OVL_OK) {
        ovl__exec_op_err_prefix(prog, i, err);
        return st;
      }
      i = end - 1;
      continue;
    }
    /* A rank not in the op's ranks skips it entirely. */
    if (!ovl__op_on_rank(op, rk->rank))
      continue;
    set_pos(rk, AT_OP, it, i);
    st = ovl__exec_op(rk, i, run->opts.op_times != 0, trace, err);
    if (st != OVL_OK) {
      ovl__exec_op_err_prefix(prog, i, err);
      return st;
    }
  }
  return OVL_OK;
}

/* Every iteration, warmup included (graph mode: the captures first), then
 * the last fetched values kept. */
static ovl_status run_iterations(rank_t *rk, ovl_error *err) {
  run_t *run = rk->run;
  const ovl__backend_ops *be = run->world->be;
  int total = run->opts.warmup + run->opts.iters;
  ovl_status st;

  if (rk->graph) {
    st = ovl__exec_graph_setup(rk, err);
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
    st = rk->graph ? ovl__exec_graph_replay(rk, it, trace, err)
                   : enqueue_ops(rk, it, trace, err);
    if (st != OVL_OK)
      return st;
    set_pos(rk, AT_DRAIN, it, 0);
    st = ovl__exec_drain(rk, err);
    if (st != OVL_OK)
      return st;
    memcpy(rk->done, rk->tag, sizeof rk->done);
    set_pos(rk, AT_END_BARRIER, it, 0);
    if (!ovl__barrier_wait(&run->barrier))
      return OVL_EABORTED;
    if (rk->rank == 0 && it >= run->opts.warmup)
      run->res->times[it - run->opts.warmup] = ovl__now() - t0;
    if (run->opts.op_times && it >= run->opts.warmup) {
      st = ovl__exec_collect_op_times(rk, err);
      if (st != OVL_OK)
        return st;
    }
    if (trace) {
      st = ovl__exec_collect_spans(rk, err);
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

void *ovl__exec_rank_main(void *arg) {
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
    ovl__exec_fail(run, &err);
  }
  rank_teardown(rk);
  return NULL;
}
