/*
 * Transforms: pure functions program -> program (docs/ARCHITECTURE.md,
 * "Modes"), decided by each op's roles in the op table:
 *   async  the schedule as written
 *   sync   ops with the communication role get use_calc_stream=true (and
 *          are placed again: onto calc); the async-only ordering ops
 *          (c_wait_compute, c_wait_comm) are dropped
 *   comp   communication dropped (compute alone)
 *   comm   compute dropped (communication alone), on whatever stream
 *          each was put
 * The ring count is kept, so every mode runs with the same streams; the
 * result is lowered again.
 *
 * sync rewrites Paddle's ops only: the generic stream ops (event_record,
 * stream_wait_event, stream_sync) and the stream= of compute ops and delays
 * are the schedule's own stream program and are kept as written, so a
 * schedule that puts work on a comm stream must order it itself, in every
 * mode.
 *
 * Edits (ovl__program_insert, ovl__program_insert_delay): one op inserted
 * into a bound program, lowered again; the race replay (run/replay.c)
 * delays a stream this way. An op inserted inside a group (`group { }`)
 * goes before the group instead: a group's ops stay consecutive.
 *
 * Ops keep their rank sets, peers, rank_attr indices and group numbers
 * through every transform (the clone copies prog->rank_attrs).
 */
#include <stdlib.h>
#include <string.h>

#include "core/op.h"

/* Whether `op` survives in `mode`; may rewrite it in place. */
static bool transform_op(ovl__op *op, ovl_mode mode) {
  unsigned roles = op->def->roles;
  switch (mode) {
  case OVL_MODE_SYNC:
    if (roles & OVL_ROLE_ASYNC_ORDER)
      return false;
    if ((roles & OVL_ROLE_COMM) &&
        (op->def->attrs & OVL_ATTR_USE_CALC_STREAM)) {
      op->use_calc_stream = true;
      op->stream = ovl__op_place(op);
    }
    return true;
  case OVL_MODE_COMP:
    return !(roles & OVL_ROLE_COMM);
  case OVL_MODE_COMM:
    return !(roles & OVL_ROLE_COMPUTE);
  case OVL_MODE_ASYNC:
  default:
    return true;
  }
}

bool ovl__mode_keeps(ovl_mode mode, const ovl__opdef *def) {
  ovl__op op = {.def = def};
  return transform_op(&op, mode);
}

ovl_status ovl__program_transform_inplace(ovl_program *p, ovl_mode mode,
                                          ovl_error *err) {
  size_t kept = 0;
  for (size_t i = 0; i < p->nops; i++) {
    ovl__op op = p->ops[i];
    if (transform_op(&op, mode))
      p->ops[kept++] = op;
  }
  p->nops = kept;
  p->mode = mode;
  return ovl__program_lower(p, err);
}

ovl_status ovl_program_transform(const ovl_program *prog, ovl_mode mode,
                                 ovl_program **out, ovl_error *err) {
  ovl_program *p;
  ovl_status st;

  if (prog == NULL || out == NULL || (int)mode < 0 || mode >= OVL__MODE_COUNT)
    return ovl__err(err, OVL_EINVAL, "ovl_program_transform: bad argument");
  st = ovl__program_clone(prog, &p, err);
  if (st != OVL_OK)
    return st;
  st = ovl__program_transform_inplace(p, mode, err);
  if (st != OVL_OK) {
    ovl_program_free(p);
    return st;
  }
  *out = p;
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Edits: one op inserted into a bound program (the race replay's      */
/* perturbation, run/replay.c).                                        */
/* ------------------------------------------------------------------ */

ovl_status ovl__program_insert(const ovl_program *prog, size_t before,
                               const ovl__op *op, ovl_program **out,
                               ovl_error *err) {
  ovl_program *p;
  ovl__op *ops;
  ovl_status st;

  if (prog == NULL || op == NULL || op->def == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl__program_insert: bad argument");
  if (before > prog->nops)
    return ovl__err(err, OVL_EINVAL,
                    "%s: cannot insert an op before op %zu: the program has "
                    "%zu ops",
                    prog->filename, before, prog->nops);
  if (prog->nops >= OVL_MAX_OPS)
    return ovl__err(err, OVL_ENOMEM,
                    "%s: cannot insert an op: the program has the most ops "
                    "a program may have (%u)",
                    prog->filename, (unsigned)OVL_MAX_OPS);
  /* Not between two ops of one group instance. */
  while (before > 0 && before < prog->nops && prog->ops[before].group != 0 &&
         prog->ops[before - 1].group == prog->ops[before].group)
    before--;
  st = ovl__program_clone(prog, &p, err);
  if (st != OVL_OK)
    return st;
  ops = malloc((prog->nops + 1) * sizeof *ops);
  if (ops == NULL) {
    ovl_program_free(p);
    return ovl__err(err, OVL_ENOMEM, "out of memory inserting an op");
  }
  if (before > 0)
    memcpy(ops, prog->ops, before * sizeof *ops);
  ops[before] = *op;
  if (prog->nops > before)
    memcpy(ops + before + 1, prog->ops + before,
           (prog->nops - before) * sizeof *ops);
  free(p->ops);
  p->ops = ops;
  p->nops = prog->nops + 1;
  /* The clone's lowering describes the old op list: make it again. */
  st = ovl__program_lower(p, err);
  if (st != OVL_OK) {
    ovl_program_free(p);
    return st;
  }
  *out = p;
  return OVL_OK;
}

ovl_status ovl__program_insert_delay(const ovl_program *prog, size_t before,
                                     int stream, double us,
                                     ovl_program **out, ovl_error *err) {
  const ovl__opdef *def = ovl__opdef_find("delay");
  const ovl__op *at;
  ovl__op op;

  if (prog == NULL || out == NULL || def == NULL)
    return ovl__err(err, OVL_EINVAL,
                    "ovl__program_insert_delay: bad argument");
  if (stream < 0 || stream >= prog->nstreams)
    return ovl__err(err, OVL_EINVAL,
                    "%s: cannot delay stream %d: the program has %d streams "
                    "(a delay needs a stream, not the host)",
                    prog->filename, stream, prog->nstreams);
  if (!(us >= 0.0) || us > 1e12)
    return ovl__err(err, OVL_EINVAL,
                    "%s: a delay of %g us: must be between 0 and 1e12",
                    prog->filename, us);
  if (before > prog->nops)
    return ovl__err(err, OVL_EINVAL,
                    "%s: cannot insert an op before op %zu: the program has "
                    "%zu ops",
                    prog->filename, before, prog->nops);
  /* As binding makes `delay(us=US, stream=...)`, written where the op it
   * delays is (or, at the end, where the last op is). */
  memset(&op, 0, sizeof op);
  op.def = def;
  at = before < prog->nops ? &prog->ops[before]
       : prog->nops > 0    ? &prog->ops[prog->nops - 1]
                           : NULL;
  op.line = at != NULL ? at->line : 0;
  op.col = at != NULL ? at->col : 0;
  /* In the same iteration of the same repeat block as that op. */
  op.src = at != NULL ? at->src : 0;
  op.out = -1;
  op.scale = 1.0;
  op.us = us;
  op.event = -1;
  /* On every rank (a replay delays the stream wherever it runs), with no
   * peer, root or group of its own. */
  op.ranks = ovl__program_all_ranks(prog);
  op.rank_attr = -1;
  op.group = 0;
  op.ring_id = stream >= OVL_STREAM_COMM(0) &&
                       stream < OVL_STREAM_COMM(prog->nrings)
                   ? stream - OVL_STREAM_COMM(0)
                   : 0;
  op.stream = stream;
  return ovl__program_insert(prog, before, &op, out, err);
}
