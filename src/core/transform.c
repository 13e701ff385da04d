/*
 * Transforms: pure functions program -> program (DESIGN.md §3).
 *   async  the schedule as written
 *   sync   collectives on the calc stream, wait ops removed
 *   comp   collectives removed (compute alone)
 *   comm   compute ops removed (communication alone), on whatever stream
 *          each was put
 * The ring count is kept, so every mode runs with the same streams.
 *
 * sync rewrites Paddle's ops only: it moves the collectives and drops
 * c_wait_compute / c_wait_comm. The generic stream ops (event_record,
 * stream_wait_event, stream_sync) and the stream= of compute ops and delays
 * are the schedule's own stream program and are kept as written, so a
 * schedule that puts work on a comm stream must order it itself, in every
 * mode.
 */
#include "internal.h"

/* Whether `op` survives in `mode`; may rewrite it in place. */
static bool transform_op(ovl__op *op, ovl_mode mode) {
  ovl__kind kind = op->def->kind;
  switch (mode) {
  case OVL_MODE_SYNC:
    if (kind == OVL_KIND_WAIT_COMPUTE || kind == OVL_KIND_WAIT_COMM)
      return false;
    if (kind == OVL_KIND_COLLECTIVE) {
      op->use_calc_stream = true;
      op->stream = ovl__op_stream(op);
    }
    return true;
  case OVL_MODE_COMP:
    return kind != OVL_KIND_COLLECTIVE;
  case OVL_MODE_COMM:
    return kind != OVL_KIND_COMPUTE;
  case OVL_MODE_ASYNC:
  default:
    return true;
  }
}

ovl_status ovl_program_transform(const ovl_program *prog, ovl_mode mode,
                                 ovl_program **out, ovl_error *err) {
  ovl_program *p;
  ovl_status st;
  size_t kept = 0;

  if (prog == NULL || out == NULL || (int)mode < 0 || mode >= OVL__MODE_COUNT)
    return ovl__err(err, OVL_EINVAL, "ovl_program_transform: bad argument");
  st = ovl__program_clone(prog, &p, err);
  if (st != OVL_OK)
    return st;
  for (size_t i = 0; i < p->nops; i++) {
    ovl__op op = p->ops[i];
    if (transform_op(&op, mode))
      p->ops[kept++] = op;
  }
  p->nops = kept;
  *out = p;
  return OVL_OK;
}
