/*
 * The run (run/exec.h; docs/ARCHITECTURE.md, "The run"): ovl_world_run
 * checks its arguments, makes the world's communicators, sets up the
 * run's state (its traced iteration, its result, the ranks' positions,
 * the flight record, the barriers), starts one thread per local rank
 * (exec_rank.c) and waits for them all; then, with more than one process,
 * every process agrees on one outcome and gathers every rank's result
 * (exec_procs.c). A failure ends with where every rank was (exec_fail.c)
 * and, for a hang, the flight record (run/flight.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "run/exec.h"

static void flight_free(ovl__flight *f) {
  free(f->enq_tag);
  free(f->enq_op);
  free(f->done_tag);
}

/* The run's arguments checked against the world, and the world's
 * communicators made. */
static ovl_status run_prepare(ovl_world *world, const ovl_program *prog,
                              const ovl_run_opts *opts, ovl_error *err) {
  ovl_status st = ovl__run_check(world, prog, opts, err);
  if (st != OVL_OK)
    return st;
  if (opts->graph && world->be->graph_begin == NULL)
    return ovl__err_no_graphs(err, world->be->name);
  if (world->aborted)
    return ovl__err(err, OVL_EINVAL,
                    "an earlier run on this world failed and aborted it: "
                    "create another world to run again");
  /* No more tuning (ovl_world_set) from here on. */
  world->ran = true;
  /* Communicators are created here, on the main thread, before any rank
   * thread starts (ncclCommInitAll must see every device at once). */
  st = world->be->world_rings(world->bw, prog->nrings, prog->ring_comm, err);
  if (st == OVL_OK && world->be->world_p2p != NULL)
    st = world->be->world_p2p(world->bw, ovl__program_p2p_rings(prog), err);
  if (world->lay.procs != NULL)
    st = ovl__procs_agree(world->lay.procs, st, err);
  return st;
}

/* The run's state: its traced iteration, its result, per rank its thread
 * and where it is, the flight record, the barriers; on failure nothing is
 * left allocated. With more than one process, the run barrier's last
 * local arrival meets the other processes, and their failures abort this
 * run. */
static ovl_status run_init(run_t *run, ovl_world *world,
                           const ovl_program *prog, const ovl_run_opts *opts,
                           ovl_error *err) {
  const ovl__layout *lay = &world->lay;
  ovl_status st;

  memset(run, 0, sizeof *run);
  run->world = world;
  run->prog = prog;
  run->opts = *opts;
  if ((st = ovl__run_traced(opts, &run->traced, err)) != OVL_OK)
    return st;
  if (run->traced >= 0)
    run->traced += opts->warmup;
  st = ovl__result_new(prog, world->nranks, opts->iters, opts->op_times != 0,
                       run->traced >= 0 ? run->traced - opts->warmup : -1,
                       &run->res, err);
  if (st == OVL_OK)
    st = ovl__result_set_machine(run->res, world, err);
  if (st != OVL_OK) {
    ovl_result_free(run->res);
    return st;
  }
  run->ranks = calloc((size_t)world->nranks, sizeof *run->ranks);
  run->threads = calloc((size_t)world->nranks, sizeof *run->threads);
  run->pos = calloc((size_t)world->nranks, sizeof *run->pos);
  run->pos_at_fail = calloc((size_t)world->nranks, sizeof *run->pos_at_fail);
  run->flight.nranks = world->nranks;
  run->flight.nrings = prog->nrings;
  run->flight.iters = opts->warmup + opts->iters;
  run->flight.have_done = world->be->ring_progress != NULL;
  {
    size_t n = (size_t)world->nranks * (size_t)prog->nrings + 1;
    run->flight.enq_tag = calloc(n, sizeof *run->flight.enq_tag);
    run->flight.enq_op = calloc(n, sizeof *run->flight.enq_op);
    run->flight.done_tag = calloc(n, sizeof *run->flight.done_tag);
  }
  if (run->ranks == NULL || run->threads == NULL || run->pos == NULL ||
      run->pos_at_fail == NULL || run->flight.enq_tag == NULL ||
      run->flight.enq_op == NULL || run->flight.done_tag == NULL) {
    free(run->ranks);
    free(run->threads);
    free((void *)run->pos);
    free(run->pos_at_fail);
    flight_free(&run->flight);
    ovl_result_free(run->res);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  for (int r = 0; r < world->nranks; r++)
    atomic_init(&run->pos[r], pos_pack(AT_SETUP, 0, 0));
  ovl__barrier_init(&run->barrier, lay->nlocal);
  ovl__barrier_init(&run->teardown, lay->nlocal);
  pthread_mutex_init(&run->err_mu, NULL);
  run->res->lo = lay->first;
  run->res->hi = lay->first + lay->nlocal;
  run->res->all_held = lay->procs == NULL;
  if (lay->procs != NULL) {
    run->barrier.outer = ovl__exec_procs_barrier;
    run->barrier.outer_ctx = run;
    ovl__procs_run_begin(lay->procs, ovl__exec_procs_on_abort, run);
  }
  return OVL_OK;
}

/* This process's ranks, one thread each; returns once all have ended. */
static void run_ranks(run_t *run) {
  const ovl__layout *lay = &run->world->lay;
  int started = 0;
  for (int r = lay->first; r < lay->first + lay->nlocal; r++) {
    run->ranks[r].run = run;
    run->ranks[r].rank = r;
    run->ranks[r].graph = run->opts.graph != 0;
    if (pthread_create(&run->threads[r], NULL, ovl__exec_rank_main,
                       &run->ranks[r]) != 0) {
      ovl_error e;
      ovl__err(&e, OVL_EBACKEND, "could not start the thread of rank %d", r);
      ovl__exec_fail(run, &e);
      /* The ranks that will never start do not come to the teardown. */
      ovl__barrier_resize(&run->teardown, started);
      break;
    }
    started++;
  }
  for (int r = lay->first; r < lay->first + started; r++)
    pthread_join(run->threads[r], NULL);
}

/* After the threads: the comparison (`cmp`, or NULL), where the values
 * are: this process's ranks. With more than one process, every process
 * ends the same. */
static void run_end(run_t *run, ovl__compare *cmp) {
  const ovl__layout *lay = &run->world->lay;
  if (cmp != NULL && !run->failed)
    ovl__compare_local(cmp, run->res);
  if (lay->procs != NULL) {
    ovl_status ast;
    ovl__procs_run_end(lay->procs);
    /* Every process ends the same: the first real error of any, with
     * every rank's place and flight record; or every rank's result,
     * merged once, its comparison with it. */
    ast = ovl__exec_procs_agree(run);
    if (ast == OVL_OK)
      ast = ovl__result_merge(run->res, lay, run->prog, &run->first);
    if (ast == OVL_OK && cmp != NULL)
      ast = ovl__compare_merge(cmp, lay, &run->first);
    if (ast != OVL_OK && !run->failed) {
      run->failed = true;
      run->first.status = ast;
    }
  }
}

/* The run's state freed, and its outcome: the result (*out), or the
 * failure, which says where every rank was and, for a hang, what each
 * rank's communication had reached. */
static ovl_status run_finish(run_t *run, ovl_result **out, ovl_error *err) {
  int nranks = run->world->nranks;
  pthread_mutex_destroy(&run->err_mu);
  ovl__barrier_destroy(&run->barrier);
  ovl__barrier_destroy(&run->teardown);
  free(run->ranks);
  free(run->threads);
  if (run->failed && nranks > 1)
    ovl__exec_append_positions(run);
  /* A hang: what each rank's communication had reached, in the
   * iteration the ranks were in (the earliest, if they differ). */
  if (run->failed && run->first.status == OVL_ETIMEDOUT) {
    int total = run->opts.warmup + run->opts.iters;
    run->flight.iter = total - 1;
    for (int r = 0; r < nranks; r++) {
      int it = (int)((run->pos_at_fail[r] >> 32) & 0xffffff);
      if (it < run->flight.iter)
        run->flight.iter = it;
    }
    ovl__flight_append(run->prog, &run->flight, run->first.msg,
                       sizeof run->first.msg);
  }
  free((void *)run->pos);
  free(run->pos_at_fail);
  flight_free(&run->flight);
  if (run->failed) {
    run->world->aborted = true;
    ovl_result_free(run->res);
    if (err != NULL)
      *err = run->first;
    return run->first.status;
  }
  *out = run->res;
  return OVL_OK;
}

ovl_status ovl_world_run(ovl_world *world, const ovl_program *prog,
                         const ovl_run_opts *opts, ovl_result **out,
                         ovl_error *err) {
  return ovl__world_run(world, prog, opts, NULL, out, err);
}

ovl_status ovl__world_run(ovl_world *world, const ovl_program *prog,
                          const ovl_run_opts *opts_in, ovl__compare *cmp,
                          ovl_result **out, ovl_error *err) {
  ovl_run_opts o, *opts = &o;
  run_t run;
  ovl_status st;

  if (cmp != NULL) {
    cmp->status = OVL_OK;
    memset(cmp->out, 0, sizeof *cmp->out);
  }
  if (world == NULL || prog == NULL || opts_in == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_run: NULL argument");
  if ((st = ovl__opts_read(&o, sizeof o, opts_in, "ovl_run_opts", err)) !=
      OVL_OK)
    return st;
  {
    const ovl__model *m = ovl__model_of(world->be, world->bw);
    if (m != NULL)
      return ovl__model_run(world, m, prog, opts, cmp, out, err);
  }
  st = run_prepare(world, prog, opts, err);
  if (st == OVL_OK)
    st = run_init(&run, world, prog, opts, err);
  if (st != OVL_OK)
    return st;
  run_ranks(&run);
  run_end(&run, cmp);
  return run_finish(&run, out, err);
}
