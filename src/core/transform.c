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
 */
#include "internal.h"

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
