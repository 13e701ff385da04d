/*
 * The run between processes (an MPI launch; docs/ARCHITECTURE.md, "More
 * than one process"; run/exec.h): the run barrier's outer part, where the
 * last local rank to arrive meets every other process's; the abort that
 * another process's failure brings; and, after the threads end, the one
 * error every process agrees on, with every rank's position and flight
 * record rows gathered.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "run/exec.h"

/* Another process's rank failed: fail ours promptly too (their errors
 * are aborts; the agreement after the run keeps the real one). */
void ovl__exec_procs_on_abort(void *ctx) {
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
 * every other process's. The deadline is the timeout and the processes'
 * margin: every rank of a process that is not here yet is within its own
 * timeout of failing with a better message (a collective's flight
 * record), and the ranks here have completed every collective of the
 * iteration with it; a process that stopped or died is given no more. */
bool ovl__exec_procs_barrier(void *ctx) {
  run_t *run = ctx;
  const ovl__layout *lay = &run->world->lay;
  double wait_s = run->world->timeout_s + OVL__PROCS_MARGIN_S;
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
  ovl__exec_fail(run, &e);
  return false;
}

/* The flight record's and the positions' rows of every process, and the
 * one error every process ends with (ovl__procs_agree_failed: a process
 * whose run failed told the others to abort, so they come at once). */
ovl_status ovl__exec_procs_agree(run_t *run) {
  const ovl__layout *lay = &run->world->lay;
  ovl_status st = run->failed ? run->first.status : OVL_OK;
  ovl_error e = run->first;
  size_t nr = (size_t)run->flight.nrings;
  st = ovl__procs_agree_failed(lay->procs, st, &e);
  if (st == OVL_OK)
    return OVL_OK;
  /* The agreement itself failed (a process stopped, died or went another
   * way) after this process's run failed: its own error says more (a
   * collective's timeout, with the flight record); the processes' message
   * follows it. */
  if (run->failed && ovl_procs_error(lay->procs) != NULL) {
    char own[sizeof e.msg];
    snprintf(own, sizeof own, "%s", run->first.msg);
    ovl__err(&e, run->first.status, "%s; then the processes lost each "
             "other: %s", own, ovl_procs_error(lay->procs));
    st = run->first.status;
  }
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
