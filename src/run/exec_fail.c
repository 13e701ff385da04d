/*
 * A rank's failure, and where every rank was (run/exec.h): the first
 * failure of a run aborts the world and the barrier so that no rank waits
 * for one that has given up, and keeps where each rank was at that moment;
 * at the end the failure's message says so, ranks at the same place
 * grouped.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/exec.h"

/* Record a rank's failure; the first real error wins over the aborts it
 * causes in the other ranks. Aborts the world so nobody waits. */
void ovl__exec_fail(run_t *run, const ovl_error *e) {
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
void ovl__exec_append_positions(run_t *run) {
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
