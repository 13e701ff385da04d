/*
 * The op table: one row per op. The parser, the executor, the reference and
 * the transforms all read it, so adding an op is one row here plus, at most,
 * one kernel.
 */
#include <string.h>

#include "internal.h"

#define RING OVL_ATTR_RING_ID
#define CALC OVL_ATTR_USE_CALC_STREAM

#define STREAM OVL_ATTR_STREAM
#define EVENT OVL_ATTR_EVENT

/* Compute ops run on the calc stream, as Paddle's do, unless the schedule
 * puts them elsewhere with stream=comm, ring_id=R (a harness extension). */
#define EW(nm, fn, nin, at)                                                   \
  {.name = nm, .kind = OVL_KIND_COMPUTE, .min_in = nin, .max_in = nin,       \
   .max_out = 1, .attrs = (at) | STREAM | RING, .ew = fn}
#define COLL(nm, c, op, at)                                                   \
  {.name = nm, .kind = OVL_KIND_COLLECTIVE, .min_in = 1, .max_in = 1,        \
   .max_out = 1, .inplace_default = true, .attrs = RING | CALC | (at),        \
   .coll = c, .redop = op}
#define CTRL(nm, k, at)                                                       \
  {.name = nm, .kind = k, .min_in = 0, .max_in = OVL_MAX_OP_INPUTS,          \
   .max_out = 0, .attrs = at}

const ovl__opdef ovl__optable[] = {
    EW("assign", OVL_EW_ASSIGN, 1, 0),
    EW("elementwise_add", OVL_EW_ADD, 2, 0),
    EW("elementwise_sub", OVL_EW_SUB, 2, 0),
    EW("elementwise_mul", OVL_EW_MUL, 2, 0),
    EW("scale", OVL_EW_SCALE, 1, OVL_ATTR_SCALE | OVL_ATTR_BIAS),
    COLL("c_allreduce_sum", OVL_COLL_ALLREDUCE, OVL_RED_SUM, 0),
    COLL("c_allreduce_max", OVL_COLL_ALLREDUCE, OVL_RED_MAX, 0),
    COLL("c_allreduce_min", OVL_COLL_ALLREDUCE, OVL_RED_MIN, 0),
    COLL("c_allreduce_prod", OVL_COLL_ALLREDUCE, OVL_RED_PROD, 0),
    COLL("c_broadcast", OVL_COLL_BROADCAST, OVL_RED_SUM, OVL_ATTR_ROOT),
    COLL("c_allgather", OVL_COLL_ALLGATHER, OVL_RED_SUM, 0),
    COLL("c_reducescatter", OVL_COLL_REDUCESCATTER, OVL_RED_SUM, 0),
    CTRL("c_wait_compute", OVL_KIND_WAIT_COMPUTE, RING),
    CTRL("c_wait_comm", OVL_KIND_WAIT_COMM, RING),
    CTRL("c_sync_calc_stream", OVL_KIND_SYNC_CALC, 0),
    CTRL("c_sync_comm_stream", OVL_KIND_SYNC_COMM, RING),
    {.name = "delay", .kind = OVL_KIND_DELAY, .min_in = 0, .max_in = 0,
     .max_out = 0, .attrs = OVL_ATTR_US | OVL_ATTR_STREAM | RING},
    {.name = "fetch", .kind = OVL_KIND_FETCH, .min_in = 1,
     .max_in = OVL_MAX_OP_INPUTS, .max_out = 0, .attrs = 0},
    /* Generic stream ops (harness-only): like the wait ops, their inputs
     * are dependencies only. */
    CTRL("event_record", OVL_KIND_EVENT_RECORD, EVENT | STREAM | RING),
    CTRL("stream_wait_event", OVL_KIND_STREAM_WAIT_EVENT,
         EVENT | STREAM | RING),
    CTRL("stream_sync", OVL_KIND_STREAM_SYNC, STREAM | RING),
    {.name = NULL},
};

const ovl__opdef *ovl__opdef_find(const char *name) {
  for (const ovl__opdef *d = ovl__optable; d->name != NULL; d++)
    if (strcmp(d->name, name) == 0)
      return d;
  return NULL;
}

int ovl__op_stream(const ovl__op *op) {
  switch (op->def->kind) {
  case OVL_KIND_COLLECTIVE:
    return op->use_calc_stream ? OVL_STREAM_CALC
                               : OVL_STREAM_COMM(op->ring_id);
  case OVL_KIND_COMPUTE:
  case OVL_KIND_DELAY:
  /* The recording stream, the waiting stream, the synced stream. */
  case OVL_KIND_EVENT_RECORD:
  case OVL_KIND_STREAM_WAIT_EVENT:
  case OVL_KIND_STREAM_SYNC:
    return op->stream;
  case OVL_KIND_WAIT_COMPUTE:
  case OVL_KIND_SYNC_COMM:
    return OVL_STREAM_COMM(op->ring_id);
  case OVL_KIND_WAIT_COMM:
  case OVL_KIND_SYNC_CALC:
  case OVL_KIND_FETCH:
    return OVL_STREAM_CALC;
  }
  return OVL_STREAM_CALC;
}
