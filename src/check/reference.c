/*
 * The reference: a sequential float64 interpreter of a program
 * (docs/ARCHITECTURE.md, "Checks"). It gives the value every fetched
 * variable must have on every rank; ovl_check_result compares a run against
 * it. Like the executor it interprets the lowered program (core/lower.c):
 * the element math of a kernel and the reduction of a collective come from
 * the op's row (core/elemfn.h), so the reference, the cpu backend and the
 * CUDA kernels compute from one definition.
 *
 * Semantics: data() variables start with their generated inputs (already
 * rounded to the dtype), every other variable starts as NaN, like the
 * poisoned device buffers. A kernel is evaluated in double with its scale
 * and bias first converted to the output's dtype (as the device converts
 * them), and each result is stored in its variable's dtype, as a device
 * stores it: a float32 variable keeps float32 range (an overflow is inf on
 * the device and in the reference alike) and precision, and a float16 or
 * bfloat16 one its own (rounded to nearest even in one step from the
 * double, ovl__dtype_round), while the arithmetic of one op stays
 * exact-ish in double. Reductions (allreduce,
 * reduce, reducescatter) fold in rank order and round once, at the end;
 * c_reduce_* writes the root's output only (the other ranks' outputs keep
 * what they held; in place, their input). alltoall sends part j of rank
 * i's input (dim 0 split in nranks parts) to part i of rank j's output.
 * barrier, records, waits, syncs and delays order streams and ranks and
 * move no data, so they do nothing here. recv_v2's output gets the values
 * the matched send_v2's input held when that send was issued. A host read
 * (fetch) snapshots the variable on each rank that runs it; the last fetch
 * of a variable on a rank wins.
 *
 * Every rank computes in its own program order (the values an
 * ordering-correct run gives); ranks meet at communication only.
 * Matching, as NCCL's: the k-th collective a rank issues on ring R meets
 * the k-th collective of every other rank on R, whatever line each is on;
 * the k-th send_v2 from rank a to rank b on ring R meets the k-th recv_v2
 * of b from a on R. Two ways to get there:
 *
 *   - Lock step (prog->rank_dependent false: every rank runs every op, so
 *     the k-th op of every rank is the same statement). Every op except
 *     c_allgather, c_reducescatter, alltoall and matmul_v2 is index-local
 *     (element i of its output depends only on element i of its inputs,
 *     on every rank), so a run of such ops is evaluated one cache-sized
 *     block of indices at a time: all ops on block 0, then all ops on
 *     block 1, ... (a matmul between them is computed whole).
 *     The result is the same, element for element, as evaluating op after
 *     op over whole arrays. The seed program makes ~770 passes over 10M
 *     elements per rank; op by op it would be bound by memory bandwidth.
 *
 *   - Per rank (rank-dependent programs: ranks=[...], a peer or root that
 *     depends on rank, send_v2 / recv_v2). The matching is the check's
 *     (check/match.h, built from each rank's op sequence); ranks that
 *     disagree on it (a rank that never issues the k-th collective of a
 *     ring, the k-th collective differing in kind, count, dtype,
 *     reduction, root or variables, a send without its receive, a send and
 *     receive of different sizes) are an error (OVL_EMISMATCH, the first
 *     disagreement in the check's words; the check reports these before a
 *     run):
 *     ranks that reduce different variables of one size would mix them
 *     silently on the device, and no value is the right one. Then each rank
 *     is interpreted in turn: it runs until its next communication op
 *     cannot complete yet (a receive whose send has not been issued, a
 *     collective some rank has not reached); a send deposits a copy of its
 *     input and the sender moves on; a collective runs once every rank has
 *     reached its part of it. When no rank can move, a rank may run ahead
 *     past its blocked op, but only with ops that touch none of the
 *     variables a skipped op reads or writes (and do not write what it
 *     reads): the values are still those of program order, and programs
 *     whose streams let ranks issue collectives of two rings in different
 *     orders complete as they do on the device. When even that makes no
 *     progress the program cannot complete (a deadlock of data, or a
 *     mismatch): an error (OVL_EMISMATCH) names, per rank, the op it waits
 *     at and what for. Runs of compute ops between communication are still
 *     evaluated block by block.
 *
 * A kernel whose output is overwritten before anything reads it (the
 * seed's ten `e = 2 * d` in a row) is skipped, per rank in the second
 * case: it cannot change any fetched value.
 *
 * Sampled rows. A matmul is the one op whose reference costs more than a
 * pass over its data: out = op(x) @ op(y) is M * N * K multiply-adds
 * (check/ref_matmul.c, on every core). In a program with a matmul, a
 * fetched variable computed from a matmul's result, with more than
 * max_rows rows (dim 0), is checked on max_rows rows only (rows_sample),
 * and the reference computes what those rows depend on and nothing more
 * (ovl__ref_plan_rows, check/ref_rows.c: a pass backwards from the
 * fetches; docs/MATMUL.md, "Checking large products"). Every value in those rows is
 * computed in full; the check compares those rows (ovl_reference_rows).
 *
 * This file is the API: the state is check/ref_state.c's, the per-rank
 * interpreter check/ref_rank.c's, the evaluation (element math, blocks,
 * collectives, the lock step) check/ref_eval.c's (check/reference.h).
 */
#include <stdlib.h>

#include "check/reference.h"

/* ------------------------------------------------------------------ */
/* Public API                                                          */
/* ------------------------------------------------------------------ */

void ovl_reference_free(ovl_reference *ref) {
  if (ref == NULL)
    return;
  if (ref->fetched != NULL)
    for (size_t i = 0; i < (size_t)ref->nranks * ref->nfetch; i++)
      free(ref->fetched[i]);
  free(ref->fetched);
  if (ref->rows != NULL)
    for (size_t i = 0; i < ref->nfetch; i++)
      free(ref->rows[i]);
  free(ref->rows);
  free(ref->nrows);
  free(ref);
}

ovl_status ovl_reference_compute(const ovl_program *prog, int nranks,
                                 ovl_reference **out, ovl_error *err) {
  return ovl_reference_compute_rows(prog, nranks, OVL_REFERENCE_ROWS_DEFAULT,
                                    out, err);
}

ovl_status ovl_reference_compute_rows(const ovl_program *prog, int nranks,
                                      int64_t max_rows, ovl_reference **out,
                                      ovl_error *err) {
  ref_state s = {0};
  ovl_status st;

  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_reference_compute: bad argument");
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_reference_compute: %d ranks (must be 1 to %d)",
                    nranks, OVL_MAX_RANKS);
  /* Shapes (allgather's, reducescatter's) and rank sets were fixed for
   * prog->nranks. */
  if (nranks != prog->nranks)
    return ovl__err(err, OVL_EINVAL,
                    "%s: reference: the program is for %d ranks, not %d",
                    prog_name(prog), prog->nranks, nranks);

  s.prog = prog;
  s.nranks = nranks;
  s.per_rank = prog->rank_dependent;
  s.ref = calloc(1, sizeof *s.ref);
  if (s.ref == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  s.ref->nranks = nranks;
  s.ref->nfetch = prog->nfetch;

  st = ovl__ref_state_init(&s, max_rows, err);
  if (st == OVL_OK) {
    if (s.per_rank)
      st = ovl__ref_run_per_rank(&s, err);
    else
      ovl__ref_run_lock_step(&s);
  }
  if (st == OVL_OK && s.nomem)
    st = ovl__err(err, OVL_ENOMEM,
                  "%s: reference: out of memory in a matmul",
                  prog_name(prog));
  if (st == OVL_OK) {
    /* A listed variable that no fetch op reached on a rank has no value
     * there. */
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < prog->nfetch; i++) {
        size_t k = (size_t)r * prog->nfetch + i;
        if (s.fetched[k])
          continue;
        free(s.ref->fetched[k]);
        s.ref->fetched[k] = NULL;
      }
  }
  ovl__ref_state_free(&s);
  if (st != OVL_OK) {
    ovl_reference_free(s.ref);
    return st;
  }
  *out = s.ref;
  return OVL_OK;
}

const int64_t *ovl_reference_rows(const ovl_reference *ref, size_t i,
                                  size_t *n) {
  if (n != NULL)
    *n = 0;
  if (ref == NULL || i >= ref->nfetch || ref->rows[i] == NULL)
    return NULL;
  if (n != NULL)
    *n = ref->nrows[i];
  return ref->rows[i];
}

const double *ovl_reference_fetched(const ovl_reference *ref, int rank,
                                    size_t i) {
  if (ref == NULL || rank < 0 || rank >= ref->nranks || i >= ref->nfetch)
    return NULL;
  return ref->fetched[(size_t)rank * ref->nfetch + i];
}
