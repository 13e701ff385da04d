/*
 * Host memory a run needs per op, for a memory check before anything is
 * allocated (ovl_host_bytes_per_op). Each module says what its part costs:
 * the program (ops, their primitives), the race checker, the backend's
 * command queue and timers, the results, the timeline.
 */
#include "check/check.h"
#include "report/slices.h"

/* Per op: the op, at most two primitives (a record and a wait; a sync
 * and a read), and its index into them. */
#define PROGRAM_BYTES_PER_OP                                                  \
  (sizeof(ovl__op) + 2 * sizeof(ovl__prim) + sizeof(uint32_t))

/* Per op and rank: the timer marks a run reserves (two around each timed
 * primitive: op times time one primitive an op, a trace every stream
 * primitive, two at most), and what its result keeps (op times: a double;
 * a trace: two doubles a primitive). */
#define MARKS_PER_OP(op_times, trace) ((trace) ? 4 : (op_times) ? 2 : 0)
#define RESULT_BYTES_PER_OP(op_times, trace)                                  \
  (((op_times) ? 1 : 0) + ((trace) ? 4 : 0)) * sizeof(double)
/* Per op and run, with a trace: its main and record primitives. */
#define SPAN_INDEX_BYTES_PER_OP (sizeof(uint32_t) + sizeof(int64_t))

/* The compiled-in backend whose queue costs the host most. */
static const ovl__backend_ops *costliest_backend(void) {
  const ovl__backend_ops *be = ovl__backends[0];
  for (size_t i = 1; ovl__backends[i] != NULL; i++)
    if (ovl__backends[i]->host_bytes_per_command > be->host_bytes_per_command)
      be = ovl__backends[i];
  return be;
}

uint64_t ovl_host_bytes_per_op(const ovl_op_memory_opts *opts) {
  const ovl__backend_ops *be = NULL;
  ovl_op_memory_opts mo, *o = &mo;
  uint64_t nmodes, nranks, per_rank, total;
  size_t marks;
  if (opts == NULL)
    return PROGRAM_BYTES_PER_OP;
  /* A struct without its size (OVL_OPTS_INIT) fits nowhere. */
  if (ovl__opts_read(&mo, sizeof mo, opts, "ovl_op_memory_opts", NULL) !=
      OVL_OK)
    return UINT64_MAX;
  nmodes = o->nmodes > 0 ? (uint64_t)o->nmodes : 0;
  nranks = o->nranks > 0 ? (uint64_t)o->nranks : 0;
  total = PROGRAM_BYTES_PER_OP * (1 + nmodes);
  if (o->race_check)
    total += ovl__race_bytes_per_op();
  /* The re-check of a fix holds an edited program (made into its form in
   * place) beside the others; its race check comes after the form's. */
  if (o->race_check && o->fix_check)
    total += PROGRAM_BYTES_PER_OP;
  if (o->trace)
    total += nmodes * SPAN_INDEX_BYTES_PER_OP;
  if (o->backend != NULL)
    be = ovl__backend_find(o->backend);
  if (be == NULL)
    be = costliest_backend();
  /* Per rank: an iteration's commands may all wait in the backend's queue
   * (a primitive and, timed, the two marks around it), the marks reserved,
   * the results of every run, and a timeline of every run. */
  marks = MARKS_PER_OP(o->op_times, o->trace);
  per_rank = be->host_bytes_per_command * 2 * (1 + (marks > 0 ? 2 : 0)) +
             be->host_bytes_per_timer * marks +
             nmodes * RESULT_BYTES_PER_OP(o->op_times, o->trace);
  if (o->trace && (o->trace_text || o->svg))
    per_rank += nmodes * ovl__timeline_bytes_per_op(o->trace_text != 0);
  return total + nranks * per_rank;
}
