/*
 * The op table: one row per op, and the spec of each (core/op.h says what
 * a row holds; docs/ARCHITECTURE.md how to add one). Parsing (an op's
 * name) and binding (what it takes), the lowering, the transforms, the race
 * checker, the reference and the timeline all read it; none of them asks
 * which op it has.
 *
 * Adding an elementwise op: a line in OVL_EW_LIST (core/elemfn.h) and an
 * EW row here. Adding a collective with a new reduction: a line in
 * OVL_RED_LIST and a COLL row (and the reduction's NCCL name in the cuda
 * backend). A new kind of op: a row with its own shape rule and lowering
 * (core/lower.c).
 */
#include <stdio.h>
#include <string.h>

#include "core/op.h"

#define RING OVL_ATTR_RING_ID
#define CALC OVL_ATTR_USE_CALC_STREAM
#define STREAM OVL_ATTR_STREAM
#define EVENT OVL_ATTR_EVENT

/* Compute ops: a kernel on the calc stream, as Paddle's are, unless the
 * schedule puts them elsewhere with stream=comm, ring_id=R (a harness
 * extension). They read their inputs and write their output, which must be
 * named. */
#define EW(nm, fn, nin, at)                                                   \
  {.name = nm, .min_in = nin, .max_in = nin, .max_out = 1,                    \
   .attrs = (at) | STREAM | RING, .roles = OVL_ROLE_COMPUTE, .reads = true,   \
   .writes = true, .stream_verb = "run on", .shape = ovl__shape_same,        \
   .lower = ovl__lower_kernel, .ew = fn}

/* Collectives: on the calc stream with use_calc_stream=true, else on the
 * ring's comm stream. In place (into their input) unless an output is
 * named. */
#define COLL(nm, c, op, shp, at)                                              \
  {.name = nm, .min_in = 1, .max_in = 1, .max_out = 1,                       \
   .inplace_default = true, .attrs = RING | CALC | (at),                      \
   .roles = OVL_ROLE_COMM, .ring_use = OVL_RING_COLLECTIVE, .reads = true,    \
   .writes = true, .stream_verb = "run on", .shape = shp,                    \
   .lower = ovl__lower_coll, .coll = c, .redop = op}

/* Ops whose inputs only name dependencies (they move no data). */
#define CTRL(nm, at, req, role, ring, verb, low)                              \
  {.name = nm, .min_in = 0, .max_in = OVL_MAX_OP_INPUTS, .max_out = 0,       \
   .attrs = at, .required = req, .roles = role, .ring_use = ring,            \
   .stream_verb = verb, .lower = low}

const ovl__opdef ovl__optable[] = {
    EW("assign", OVL_EW_ASSIGN, 1, 0),
    EW("elementwise_add", OVL_EW_ADD, 2, 0),
    EW("elementwise_sub", OVL_EW_SUB, 2, 0),
    EW("elementwise_mul", OVL_EW_MUL, 2, 0),
    EW("elementwise_div", OVL_EW_DIV, 2, 0),
    EW("elementwise_max", OVL_EW_MAX, 2, 0),
    EW("scale", OVL_EW_SCALE, 1, OVL_ATTR_SCALE | OVL_ATTR_BIAS),
    /* Paddle's matmul_v2: out = op(x) @ op(y) of 2-D x and y, op() the
     * transpose where trans_x / trans_y is true; a kernel (cuda: cuBLAS;
     * cpu: a blocked loop) on calc, or where stream= puts it, like the
     * elementwise ops. The output must be a new variable: the kernel reads
     * all of its inputs while it writes. */
    {.name = "matmul_v2", .min_in = 2, .max_in = 2, .max_out = 1,
     .out_distinct = true,
     .attrs = OVL_ATTR_TRANS_X | OVL_ATTR_TRANS_Y | STREAM | RING,
     .roles = OVL_ROLE_COMPUTE, .reads = true, .writes = true,
     .stream_verb = "run on", .shape = ovl__shape_matmul,
     .lower = ovl__lower_kernel, .kernel = OVL_KERNEL_MATMUL},
    COLL("c_allreduce_sum", OVL_COLL_ALLREDUCE, OVL_RED_SUM, ovl__shape_same,
         0),
    COLL("c_allreduce_max", OVL_COLL_ALLREDUCE, OVL_RED_MAX, ovl__shape_same,
         0),
    COLL("c_allreduce_min", OVL_COLL_ALLREDUCE, OVL_RED_MIN, ovl__shape_same,
         0),
    COLL("c_allreduce_prod", OVL_COLL_ALLREDUCE, OVL_RED_PROD,
         ovl__shape_same, 0),
    COLL("c_allreduce_avg", OVL_COLL_ALLREDUCE, OVL_RED_AVG, ovl__shape_same,
         0),
    COLL("c_broadcast", OVL_COLL_BROADCAST, OVL_RED_SUM, ovl__shape_same,
         OVL_ATTR_ROOT),
    COLL("c_allgather", OVL_COLL_ALLGATHER, OVL_RED_SUM, ovl__shape_gather,
         0),
    COLL("c_reducescatter", OVL_COLL_REDUCESCATTER, OVL_RED_SUM,
         ovl__shape_scatter, 0),
    COLL("c_reduce_sum", OVL_COLL_REDUCE, OVL_RED_SUM, ovl__shape_same,
         OVL_ATTR_ROOT),
    COLL("c_reduce_max", OVL_COLL_REDUCE, OVL_RED_MAX, ovl__shape_same,
         OVL_ATTR_ROOT),
    COLL("c_reduce_min", OVL_COLL_REDUCE, OVL_RED_MIN, ovl__shape_same,
         OVL_ATTR_ROOT),
    COLL("c_reduce_prod", OVL_COLL_REDUCE, OVL_RED_PROD, ovl__shape_same,
         OVL_ATTR_ROOT),
    /* alltoall: out = alltoall(x); an output is required and must not be
     * x (binding checks it). */
    {.name = "alltoall", .min_in = 1, .max_in = 1, .max_out = 1,
     .out_distinct = true, .attrs = RING | CALC, .roles = OVL_ROLE_COMM,
     .ring_use = OVL_RING_COLLECTIVE, .reads = true, .writes = true,
     .stream_verb = "run on", .shape = ovl__shape_alltoall,
     .lower = ovl__lower_coll, .coll = OVL_COLL_ALLTOALL},
    /* Point-to-point (Paddle's send_v2 / recv_v2): the stream rule of the
     * collectives. recv_v2 declares its output from out_shape and dtype
     * (float32 by default), or writes into an existing variable of that
     * shape and dtype. */
    {.name = "send_v2", .min_in = 1, .max_in = 1, .max_out = 0,
     .attrs = RING | CALC | OVL_ATTR_PEER, .required = OVL_ATTR_PEER,
     .roles = OVL_ROLE_COMM, .ring_use = OVL_RING_COLLECTIVE, .reads = true,
     .stream_verb = "run on", .lower = ovl__lower_p2p, .p2p = OVL_P2P_SEND},
    {.name = "recv_v2", .min_in = 0, .max_in = 0, .max_out = 1,
     .attrs = RING | CALC | OVL_ATTR_PEER | OVL_ATTR_OUT_SHAPE |
              OVL_ATTR_DTYPE,
     .required = OVL_ATTR_PEER | OVL_ATTR_OUT_SHAPE, .roles = OVL_ROLE_COMM,
     .ring_use = OVL_RING_COLLECTIVE, .writes = true,
     .stream_verb = "run on", .lower = ovl__lower_p2p, .p2p = OVL_P2P_RECV},
    /* Paddle's barrier: a collective on the calc stream that every rank
     * of the ring meets at, then the host syncs calc. Its inputs only
     * name dependencies. */
    {.name = "barrier", .min_in = 0, .max_in = OVL_MAX_OP_INPUTS,
     .max_out = 0, .attrs = RING, .roles = OVL_ROLE_COMM,
     .ring_use = OVL_RING_COLLECTIVE, .stream_verb = "run on",
     .lower = ovl__lower_barrier, .coll = OVL_COLL_BARRIER},
    /* Paddle's ordering ops: an event record on one stream and a wait on
     * another (c_wait_compute: comm[R] waits for calc; c_wait_comm: calc
     * waits for comm[R]); the host does not block. */
    CTRL("c_wait_compute", RING, 0, OVL_ROLE_ASYNC_ORDER, OVL_RING_ORDERS,
         "order", ovl__lower_wait_compute),
    CTRL("c_wait_comm", RING, 0, OVL_ROLE_ASYNC_ORDER, OVL_RING_ORDERS,
         "order", ovl__lower_wait_comm),
    /* Host syncs. */
    CTRL("c_sync_calc_stream", 0, 0, 0, 0, "sync", ovl__lower_sync_calc),
    CTRL("c_sync_comm_stream", RING, 0, 0, OVL_RING_ORDERS, "sync",
         ovl__lower_sync_comm),
    /* Harness-only: keep a stream busy, to make a missing wait show. */
    {.name = "delay", .min_in = 0, .max_in = 0, .max_out = 0,
     .attrs = OVL_ATTR_US | STREAM | RING, .required = OVL_ATTR_US,
     .stream_verb = "run on", .lower = ovl__lower_delay},
    /* The host syncs the calc stream only (as Paddle's executor does), then
     * copies the variables to host memory. */
    {.name = "fetch", .min_in = 1, .max_in = OVL_MAX_OP_INPUTS, .max_out = 0,
     .reads = true, .stream_verb = "read", .lower = ovl__lower_fetch},
    /* Generic stream ops (harness-only, beyond Paddle's). */
    CTRL("event_record", EVENT | STREAM | RING, EVENT, 0, 0, "record on",
         ovl__lower_event_record),
    CTRL("stream_wait_event", EVENT | STREAM | RING, EVENT, 0, 0, "wait on",
         ovl__lower_stream_wait_event),
    CTRL("stream_sync", STREAM | RING, 0, 0, 0, "sync",
         ovl__lower_stream_sync),
    {.name = NULL},
};

const ovl__opdef *ovl__opdef_find(const char *name) {
  for (const ovl__opdef *d = ovl__optable; d->name != NULL; d++)
    if (strcmp(d->name, name) == 0)
      return d;
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Shape rules                                                         */
/* ------------------------------------------------------------------ */

bool ovl__shape_dims_eq(const ovl__shape *a, const ovl__shape *b) {
  if (a->ndim != b->ndim)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

const char *ovl__shape_str(const ovl__shape *s, char *buf, size_t size) {
  size_t k = 0;
  k += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < s->ndim && k < size; d++)
    k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? "," : "",
                          (long long)s->dims[d]);
  if (k < size)
    snprintf(buf + k, size - k, "] %s", ovl_dtype_name(s->dtype));
  return buf;
}

int64_t ovl__shape_numel(const ovl__shape *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++) {
    if (s->dims[d] > OVL_MAX_NUMEL / n)
      return -1;
    n *= s->dims[d];
  }
  return n;
}

/* Every input of the same shape and dtype; the output is that shape. */
const char *ovl__shape_same(const ovl__opdef *def, const ovl__op *op,
                            const ovl__shape *in, const char *const *names,
                            int nin, int nranks, ovl__shape *out, char *msg,
                            size_t size) {
  char a[160], b[160];
  (void)op;
  (void)nranks;
  *out = in[0];
  for (int k = 1; k < nin; k++)
    if (!ovl__shape_dims_eq(&in[0], &in[k]) || in[0].dtype != in[k].dtype) {
      snprintf(msg, size, "%s mismatch: %s of '%s' %s and '%s' %s",
               ovl__shape_dims_eq(&in[0], &in[k]) ? "dtype" : "shape", def->name,
               names[0], ovl__shape_str(&in[0], a, sizeof a), names[k],
               ovl__shape_str(&in[k], b, sizeof b));
      return msg;
    }
  return NULL;
}

/* c_allgather: dim 0 times the ranks. */
const char *ovl__shape_gather(const ovl__opdef *def, const ovl__op *op,
                              const ovl__shape *in, const char *const *names,
                              int nin, int nranks, ovl__shape *out,
                              char *msg, size_t size) {
  (void)op;
  (void)names;
  (void)nin;
  *out = in[0];
  out->dims[0] = in[0].dims[0] <= INT64_MAX / nranks
                     ? in[0].dims[0] * nranks
                     : -1;
  if (out->dims[0] < 0 || ovl__shape_numel(out) < 0) {
    snprintf(msg, size, "%s: the output for %d ranks has too many elements",
             def->name, nranks);
    return msg;
  }
  return NULL;
}

/* c_reducescatter: dim 0 divided among the ranks. */
const char *ovl__shape_scatter(const ovl__opdef *def, const ovl__op *op,
                               const ovl__shape *in,
                               const char *const *names, int nin, int nranks,
                               ovl__shape *out, char *msg, size_t size) {
  (void)op;
  (void)nin;
  *out = in[0];
  if (in[0].dims[0] % nranks != 0) {
    snprintf(msg, size,
             "%s: dim 0 of '%s' (%lld) is not divisible by %d ranks",
             def->name, names[0], (long long)in[0].dims[0], nranks);
    return msg;
  }
  out->dims[0] = in[0].dims[0] / nranks;
  return NULL;
}

/* matmul_v2: op(x) [M, K] times op(y) [K, N] is [M, N]. */
const char *ovl__shape_matmul(const ovl__opdef *def, const ovl__op *op,
                              const ovl__shape *in, const char *const *names,
                              int nin, int nranks, ovl__shape *out,
                              char *msg, size_t size) {
  char a[160], b[160];
  bool tx = op != NULL && op->trans_x, ty = op != NULL && op->trans_y;
  int64_t m, kx, ky, n;
  (void)nin;
  (void)nranks;
  for (int k = 0; k < 2; k++)
    if (in[k].ndim != 2) {
      snprintf(msg, size,
               "%s: '%s' is %s: it multiplies 2-D matrices (x [M, K] by y "
               "[K, N]; a batch of them is not modelled)",
               def->name, names[k], ovl__shape_str(&in[k], a, sizeof a));
      return msg;
    }
  if (in[0].dtype != in[1].dtype) {
    snprintf(msg, size, "dtype mismatch: %s of '%s' %s and '%s' %s",
             def->name, names[0], ovl__shape_str(&in[0], a, sizeof a),
             names[1], ovl__shape_str(&in[1], b, sizeof b));
    return msg;
  }
  m = in[0].dims[tx ? 1 : 0];
  kx = in[0].dims[tx ? 0 : 1];
  ky = in[1].dims[ty ? 1 : 0];
  n = in[1].dims[ty ? 0 : 1];
  if (kx != ky) {
    snprintf(msg, size,
             "shape mismatch: %s multiplies [M, K] by [K, N], but '%s' %s "
             "has K = %lld (its %s%s) and '%s' %s has K = %lld (its %s%s)",
             def->name, names[0], ovl__shape_str(&in[0], a, sizeof a),
             (long long)kx, tx ? "rows" : "columns",
             tx ? ", trans_x=true" : "", names[1],
             ovl__shape_str(&in[1], b, sizeof b), (long long)ky,
             ty ? "columns" : "rows", ty ? ", trans_y=true" : "");
    return msg;
  }
  *out = in[0];
  out->dims[0] = m;
  out->dims[1] = n;
  if (ovl__shape_numel(out) < 0) {
    snprintf(msg, size, "%s: the output [%lld,%lld] has too many elements",
             def->name, (long long)m, (long long)n);
    return msg;
  }
  return NULL;
}

/* alltoall: the input's shape, dim 0 divisible by the ranks. */
const char *ovl__shape_alltoall(const ovl__opdef *def, const ovl__op *op,
                                const ovl__shape *in,
                                const char *const *names, int nin,
                                int nranks, ovl__shape *out, char *msg,
                                size_t size) {
  (void)op;
  (void)nin;
  *out = in[0];
  if (in[0].dims[0] % nranks != 0) {
    snprintf(msg, size,
             "%s: dim 0 of '%s' (%lld) is not divisible by %d ranks",
             def->name, names[0], (long long)in[0].dims[0], nranks);
    return msg;
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Collectives and reductions: names and conventions                  */
/* ------------------------------------------------------------------ */

size_t ovl__coll_count(ovl__coll coll, int64_t send_numel,
                       int64_t recv_numel) {
  if (coll == OVL_COLL_BARRIER)
    return 1;
  return (size_t)(coll == OVL_COLL_REDUCESCATTER ? recv_numel : send_numel);
}

bool ovl__coll_is_local(ovl__coll coll) {
  return coll == OVL_COLL_ALLREDUCE || coll == OVL_COLL_BROADCAST ||
         coll == OVL_COLL_REDUCE || coll == OVL_COLL_BARRIER;
}

bool ovl__coll_has_redop(ovl__coll coll) {
  return coll == OVL_COLL_ALLREDUCE || coll == OVL_COLL_REDUCESCATTER ||
         coll == OVL_COLL_REDUCE;
}

bool ovl__coll_has_root(ovl__coll coll) {
  return coll == OVL_COLL_BROADCAST || coll == OVL_COLL_REDUCE;
}

const char *ovl__coll_name(ovl__coll coll) {
  static const char *const names[] = {"allreduce", "broadcast", "allgather",
                                      "reducescatter", "reduce", "alltoall",
                                      "barrier"};
  return (unsigned)coll < sizeof names / sizeof names[0] ? names[coll] : "?";
}

const char *ovl__redop_name(ovl__redop op) {
  static const char *const names[] = {"sum", "max", "min", "prod", "avg"};
  _Static_assert(sizeof names / sizeof names[0] == OVL__RED_COUNT,
                 "a name for every reduction of OVL_RED_LIST");
  return (unsigned)op < OVL__RED_COUNT ? names[op] : "?";
}
