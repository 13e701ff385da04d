/*
 * The deadlock check (ovl.h, "Deadlocks"; docs/ARCHITECTURE.md, "Checks"):
 * an abstract execution of one iteration on every rank at once, then the
 * cycles of what the blocked participants wait for.
 *
 * Participants: per rank its host and its streams. The execution is a
 * worklist: a participant runs as far as it can and then blocks; whatever
 * it unblocks (a stream it drained for a host sync, a record a stream
 * waits for, the partner of a send, the last rank of a collective) goes on
 * the list. Every blocking condition stays true once it is met, so the
 * order the list is served in does not change where the execution ends.
 *
 * - A host runs the ops of its rank in program order; enqueueing is moving
 *   its frontier (hp: the primitives before it are enqueued). It blocks at
 *   a HOST_SYNC of a stream that still has enqueued work.
 * - A stream's primitives are the program's primitives on it, in order
 *   (one list per stream number, shared by the ranks; a rank skips those
 *   of ops it does not run). It runs those before its host's frontier.
 *   A WAIT captured the last record of its event enqueued before it (the
 *   program's previous RECORD of the event that this rank runs); it passes
 *   once the recording stream is past that record.
 * - Comm items (check/match.c): a collective, an ungrouped send or
 *   receive, or a whole group (the consecutive send / receive primitives
 *   of one group instance on the stream, once the host has enqueued all of
 *   them) is posted when it reaches the head of its stream; a collective
 *   completes when every rank posted its k-th collective of the ring, a
 *   send or receive when its partner is posted. The stream moves on when
 *   every item of its head completed.
 *
 * What is left blocked waits for: a host, the stream it syncs; a WAIT, the
 * recording stream; a comm item, each rank whose part is not posted (its
 * stream, or its host when it has not enqueued it yet), or nobody when
 * that part does not exist (a mismatch); a stream whose next primitive is
 * not enqueued, its host. The strongly connected components of that graph
 * (Tarjan) with a cycle are the deadlocks; each is reported as one cycle
 * through it, the shortest from its first participant.
 *
 * This file is the check's entry; the execution is check/deadlock_exec.c,
 * the graph and its cycles check/deadlock_cycles.c, the report
 * check/deadlock_report.c (check/deadlock.h).
 */
#include <stdlib.h>

#include "check/check.h"
#include "check/deadlock.h"

ovl_status ovl_deadlock_check(const ovl_program *prog, ovl_deadlocks **out,
                              ovl_error *err) {
  return ovl__deadlock_check_graph(prog, false, out, err);
}

ovl_status ovl__deadlock_check_graph(const ovl_program *prog, bool graph,
                                     ovl_deadlocks **out, ovl_error *err) {
  ovl_deadlocks *res;
  ovl__match m;
  dl d;
  ovl_status st;
  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_deadlock_check: bad argument");
  *out = NULL;
  if (prog->prim_first == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_deadlock_check: %s is not lowered",
                    prog->filename);
  if (prog->nprims >= UINT32_MAX - 1)
    return ovl__err(err, OVL_EINVAL, "ovl_deadlock_check: %s has too many "
                    "primitives", prog->filename);
  res = ovl__deadlocks_new(prog->nranks > 0 ? prog->nranks : 1, graph);
  if (res == NULL)
    return ovl__err(err, OVL_ENOMEM, "deadlock check: out of memory");
  /* SPMD: every rank does the same, so every collective meets. */
  if (!ovl__program_ranks_differ(prog)) {
    *out = res;
    return OVL_OK;
  }
  if ((st = ovl__match_build(prog, &m, err)) != OVL_OK) {
    ovl_deadlocks_free(res);
    return st;
  }
  if (!ovl__dl_init(&d, prog, &m)) {
    ovl__match_free(&m);
    ovl_deadlocks_free(res);
    return ovl__err(err, OVL_ENOMEM, "deadlock check: out of memory");
  }
  d.graph = graph;
  ovl__dl_execute(&d);
  st = ovl__dl_find_cycles(&d, res, err);
  ovl__dl_free(&d);
  ovl__match_free(&m);
  if (st != OVL_OK) {
    ovl_deadlocks_free(res);
    return st;
  }
  *out = res;
  return OVL_OK;
}

size_t ovl__order_bytes_per_op(void) {
  return sizeof(uint64_t) +
         2 * (3 * sizeof(uint32_t) + sizeof(uint64_t)) +
         2 * (sizeof(ovl__citem) + 1);
}
