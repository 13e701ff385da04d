/*
 * Lowering: every op becomes a short list of stream primitives (core/op.h,
 * ovl__prim). This is the one place that says what an op does to streams
 * and events; "c_wait_compute = record compute_event[R] on calc, then
 * comm[R] waits for it" is written here and nowhere else. The executor runs
 * the primitives, the race checker clocks them, the reference interprets
 * them and the timeline draws them.
 *
 * Rules every lowering keeps (ovl__program_lower checks them):
 *   - one primitive is the op's main one (the span the op is drawn and
 *     timed by);
 *   - an op's primitives are all host primitives, or stream primitives
 *     followed by host ones (barrier: its collective, then a host sync);
 *     the main one is a stream primitive in the second case.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/op.h"

/* The stream an op's work goes to (core/op.h): a lowering places its
 * primitives there. */
int ovl__op_place(const ovl__op *op) {
  unsigned at = op->def->attrs;
  if (at & OVL_ATTR_USE_CALC_STREAM)
    return op->use_calc_stream ? OVL_STREAM_CALC
                               : OVL_STREAM_COMM(op->ring_id);
  if (at & OVL_ATTR_STREAM)
    return op->stream;
  return OVL_STREAM_HOST;
}

static ovl__prim prim(ovl__prim_kind kind, int stream, int event, bool main) {
  ovl__prim p;
  p.kind = (uint8_t)kind;
  p.main = main;
  p.stream = (int16_t)stream;
  p.event = event;
  return p;
}

/* Compute ops: the kernel, on the stream the op was placed on. */
int ovl__lower_kernel(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)nrings;
  out[0] = prim(OVL_PRIM_KERNEL, ovl__op_place(op), -1, true);
  return 1;
}

/* Collectives: calc or the ring's comm stream (use_calc_stream). */
int ovl__lower_coll(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)nrings;
  out[0] = prim(OVL_PRIM_COLL, ovl__op_place(op), -1, true);
  return 1;
}

/* c_wait_compute(ring R): record compute_event[R] on calc; comm[R] waits
 * for it. */
int ovl__lower_wait_compute(const ovl__op *op, int nrings, ovl__prim *out) {
  int ev = OVL_EVENT_COMPUTE(op->ring_id);
  (void)nrings;
  out[0] = prim(OVL_PRIM_RECORD, OVL_STREAM_CALC, ev, false);
  out[1] = prim(OVL_PRIM_WAIT, OVL_STREAM_COMM(op->ring_id), ev, true);
  return 2;
}

/* c_wait_comm(ring R): record comm_event[R] on comm[R]; calc waits for
 * it. */
int ovl__lower_wait_comm(const ovl__op *op, int nrings, ovl__prim *out) {
  int ev = OVL_EVENT_COMM(op->ring_id);
  (void)nrings;
  out[0] = prim(OVL_PRIM_RECORD, OVL_STREAM_COMM(op->ring_id), ev, false);
  out[1] = prim(OVL_PRIM_WAIT, OVL_STREAM_CALC, ev, true);
  return 2;
}

int ovl__lower_sync_calc(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)op;
  (void)nrings;
  out[0] = prim(OVL_PRIM_HOST_SYNC, OVL_STREAM_CALC, -1, true);
  return 1;
}

int ovl__lower_sync_comm(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)nrings;
  out[0] = prim(OVL_PRIM_HOST_SYNC, OVL_STREAM_COMM(op->ring_id), -1, true);
  return 1;
}

/* send_v2 / recv_v2: calc or the ring's comm stream (use_calc_stream). */
int ovl__lower_p2p(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)nrings;
  out[0] = prim(op->def->p2p == OVL_P2P_SEND ? OVL_PRIM_SEND : OVL_PRIM_RECV,
                ovl__op_place(op), -1, true);
  return 1;
}

/* barrier (Paddle's barrier op): the collective on the calc stream, then
 * the host syncs calc. */
int ovl__lower_barrier(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)op;
  (void)nrings;
  out[0] = prim(OVL_PRIM_COLL, OVL_STREAM_CALC, -1, true);
  out[1] = prim(OVL_PRIM_HOST_SYNC, OVL_STREAM_CALC, -1, false);
  return 2;
}

int ovl__lower_delay(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)nrings;
  out[0] = prim(OVL_PRIM_DELAY, ovl__op_place(op), -1, true);
  return 1;
}

/* fetch: the host syncs the calc stream only (as Paddle's executor does),
 * then copies the variables to host memory. */
int ovl__lower_fetch(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)op;
  (void)nrings;
  out[0] = prim(OVL_PRIM_HOST_SYNC, OVL_STREAM_CALC, -1, true);
  out[1] = prim(OVL_PRIM_HOST_READ, OVL_STREAM_HOST, -1, false);
  return 2;
}

int ovl__lower_event_record(const ovl__op *op, int nrings, ovl__prim *out) {
  out[0] = prim(OVL_PRIM_RECORD, ovl__op_place(op),
                OVL_EVENT_NAMED(nrings, op->event), true);
  return 1;
}

int ovl__lower_stream_wait_event(const ovl__op *op, int nrings,
                                 ovl__prim *out) {
  out[0] = prim(OVL_PRIM_WAIT, ovl__op_place(op),
                OVL_EVENT_NAMED(nrings, op->event), true);
  return 1;
}

int ovl__lower_stream_sync(const ovl__op *op, int nrings, ovl__prim *out) {
  (void)nrings;
  out[0] = prim(OVL_PRIM_HOST_SYNC, ovl__op_place(op), -1, true);
  return 1;
}

/* ------------------------------------------------------------------ */
/* The program's lowering                                             */
/* ------------------------------------------------------------------ */

/* Whether a lowering keeps the rules of the file comment. */
static bool prims_ok(const ovl__prim *p, int n, int nstreams, int nevents) {
  int mains = 0, host = 0, main_host = 0;
  bool all_host = ovl__prim_on_host(&p[0]);
  if (n < 1 || n > OVL_MAX_PRIMS_PER_OP)
    return false;
  for (int k = 0; k < n; k++) {
    mains += p[k].main != 0;
    main_host += p[k].main && ovl__prim_on_host(&p[k]);
    if (k > 0 && ovl__prim_on_host(&p[k - 1]) && !ovl__prim_on_host(&p[k]))
      return false; /* a stream primitive after a host one */
    host += ovl__prim_on_host(&p[k]);
    if (p[k].kind != OVL_PRIM_HOST_READ &&
        (p[k].stream < 0 || p[k].stream >= nstreams))
      return false;
    if ((p[k].kind == OVL_PRIM_RECORD || p[k].kind == OVL_PRIM_WAIT) &&
        (p[k].event < 0 || p[k].event >= nevents))
      return false;
  }
  return mains == 1 && (all_host ? host == n : main_host == 0);
}

ovl_status ovl__program_lower(ovl_program *prog, ovl_error *err) {
  size_t cap = prog->nops + 1, n = 0;
  ovl__prim *prims = malloc(cap * sizeof *prims);
  uint32_t *first = malloc((prog->nops + 1) * sizeof *first);
  int nevents = ovl__program_nevents(prog);

  if (prims == NULL || first == NULL) {
    free(prims);
    free(first);
    return ovl__err(err, OVL_ENOMEM, "out of memory lowering %s",
                    prog->filename);
  }
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    ovl__prim buf[OVL_MAX_PRIMS_PER_OP];
    int k = op->def->lower(op, prog->nrings, buf);
    if (!prims_ok(buf, k, prog->nstreams, nevents)) {
      free(prims);
      free(first);
      return ovl__err(err, OVL_EINVAL,
                      "%s:%d:%d: %s: its lowering names a stream or event "
                      "the program does not have",
                      prog->filename, op->line, op->col, op->def->name);
    }
    if (n + (size_t)k > cap) {
      size_t ncap = 2 * cap + (size_t)k;
      ovl__prim *np = realloc(prims, ncap * sizeof *np);
      if (np == NULL) {
        free(prims);
        free(first);
        return ovl__err(err, OVL_ENOMEM, "out of memory lowering %s",
                        prog->filename);
      }
      prims = np;
      cap = ncap;
    }
    first[i] = (uint32_t)n;
    memcpy(prims + n, buf, (size_t)k * sizeof *buf);
    n += (size_t)k;
  }
  first[prog->nops] = (uint32_t)n;
  free(prog->prims);
  free(prog->prim_first);
  prog->prims = prims;
  prog->prim_first = first;
  prog->nprims = n;
  return OVL_OK;
}

size_t ovl__op_main_prim(const ovl_program *prog, size_t i) {
  size_t p = prog->prim_first[i];
  while (p + 1 < prog->prim_first[i + 1] && !prog->prims[p].main)
    p++;
  return p;
}

uint32_t ovl__program_p2p_rings(const ovl_program *prog) {
  uint32_t mask = 0;
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    size_t n;
    const ovl__prim *p = ovl__op_prims(prog, i, &n);
    for (size_t k = 0; k < n; k++)
      if (p[k].kind == OVL_PRIM_SEND || p[k].kind == OVL_PRIM_RECV ||
          (p[k].kind == OVL_PRIM_COLL && op->def->coll == OVL_COLL_ALLTOALL))
        mask |= 1u << op->ring_id;
  }
  return mask;
}

bool ovl__op_on_host(const ovl_program *prog, size_t i) {
  return ovl__prim_on_host(&prog->prims[prog->prim_first[i]]);
}

int ovl__op_work_stream(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (ovl__prim_works(&p[k]))
      return p[k].stream;
  return OVL_STREAM_HOST;
}

const char *ovl__stream_name(const ovl_program *prog, int stream) {
  if (stream < 0 || stream >= prog->nstreams || prog->stream_names == NULL)
    return "host";
  return prog->stream_names[stream];
}
