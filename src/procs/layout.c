/*
 * The layout of a world's ranks over the processes of a launch, and the
 * steps every process takes together that are built on procs.c's
 * primitives (a barrier, rows gathered by rank). MPI-agnostic: without
 * MPI a layout has no processes and none of these is called with any.
 */
#include <stdlib.h>

#include "procs/procs.h"

int ovl__layout_proc(const ovl__layout *lay, int rank) {
  int q = 0;
  if (lay->procs == NULL)
    return 0;
  while (q + 1 < ovl__procs_size(lay->procs) && rank >= lay->proc_first[q + 1])
    q++;
  return q;
}

int *ovl__layout_counts(const ovl__layout *lay) {
  int nprocs = ovl__procs_size(lay->procs);
  int *counts = malloc((size_t)nprocs * sizeof *counts);
  if (counts == NULL)
    return NULL;
  for (int q = 0; q < nprocs; q++)
    counts[q] = lay->proc_first[q + 1] - lay->proc_first[q];
  return counts;
}

ovl_status ovl__layout_gather(const ovl__layout *lay, void *rows, size_t row,
                              ovl_error *err) {
  int *counts = ovl__layout_counts(lay);
  ovl_status st;
  if (counts == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  st = ovl__procs_allgather_rows(lay->procs,
                                 (char *)rows + (size_t)lay->first * row,
                                 rows, counts, row, err);
  free(counts);
  return st;
}

ovl_status ovl__procs_barrier(ovl_procs *p, uint64_t seq, double deadline,
                              bool (*stop)(void *ctx), void *ctx,
                              int *missing, ovl_error *err) {
  ovl__msg_key key = {OVL__MSG_BARRIER, 0, 0, 0, 0, 0, -1};
  int n = ovl__procs_size(p);
  ovl__msg **msgs = calloc((size_t)n, sizeof *msgs);
  ovl_status st;
  if (msgs == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  key.seq = seq;
  st = ovl__procs_exchange(p, &key, NULL, NULL, 0, deadline, stop, ctx, msgs,
                           missing, err);
  for (int q = 0; q < n; q++)
    free(msgs[q]);
  free(msgs);
  return st;
}
