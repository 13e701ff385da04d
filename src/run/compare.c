/*
 * A run's fetched values compared with the float64 reference (the rule
 * is the check layer's: check/check.c). One process holds every rank's
 * values and compares them at once. Several processes each compare their
 * own ranks where the values are, and the comparisons are merged with the
 * rest of the result (ovl__result_merge): the values of every rank never
 * have to meet in one process (nranks x the fetched bytes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/run.h"

static const double *result_fetched(const void *ctx, int rank, size_t i) {
  return ovl_result_fetched((const ovl_result *)ctx, rank, i);
}

ovl_status ovl_check_result(const ovl_program *prog, const ovl_result *res,
                            const ovl_reference *ref, double rtol,
                            double atol, ovl_check *out, ovl_error *err) {
  if (prog == NULL || res == NULL) {
    if (out != NULL)
      memset(out, 0, sizeof *out);
    return ovl__err(err, OVL_EINVAL, "ovl_check_result: bad argument");
  }
  if (!res->all_held) {
    if (out != NULL)
      memset(out, 0, sizeof *out);
    return ovl__err(err, OVL_EINVAL,
                    "ovl_check_result: this result holds the fetched values "
                    "of ranks %d to %d only (a run of several processes whose "
                    "values were too large to gather): its run compares them "
                    "(the pipeline does)",
                    res->lo, res->hi - 1);
  }
  return ovl__check_arrays(prog, prog->nranks, result_fetched, res, ref,
                           rtol, atol, out, err);
}

void ovl__compare_local(ovl__compare *cmp, const ovl_result *res) {
  cmp->status = ovl__check_ranks(cmp->prog, cmp->prog->nranks, res->lo,
                                 res->hi, result_fetched, res, cmp->ref,
                                 cmp->rtol, cmp->atol, cmp->out, &cmp->err);
}

/* More than one process: each compared its own ranks; every process gets
 * the sums, every rank's mismatches (in rank order: processes hold
 * consecutive ranks) and the sampled rows' counts. Collective. */
static ovl_status check_merge(const ovl_program *prog, ovl_procs *p,
                              ovl_check *out, ovl_error *err) {
  int nprocs = ovl__procs_size(p);
  size_t nfetch = ovl_program_fetch_count(prog), row = 5 + nfetch;
  int64_t *mine = calloc(row, sizeof *mine);
  int64_t *all = calloc((size_t)nprocs * row, sizeof *all);
  int *counts = calloc((size_t)nprocs, sizeof *counts);
  ovl_mismatch *list = NULL;
  size_t total = 0;
  ovl_status st;
  if (mine == NULL || all == NULL || counts == NULL) {
    st = ovl__err(err, OVL_ENOMEM, "out of memory");
    goto done;
  }
  mine[0] = out->checked;
  mine[1] = out->unchecked;
  mine[2] = out->mismatched;
  mine[3] = out->nonfinite;
  mine[4] = (int64_t)out->nmismatch;
  for (size_t i = 0; out->var_unchecked != NULL && i < nfetch; i++)
    mine[5 + i] = out->var_unchecked[i];
  st = ovl__procs_allgather(p, mine, all, row * sizeof *mine, err);
  if (st != OVL_OK)
    goto done;
  out->checked = out->unchecked = out->mismatched = out->nonfinite = 0;
  for (int q = 0; q < nprocs; q++) {
    const int64_t *a = all + (size_t)q * row;
    out->checked += a[0];
    out->unchecked += a[1];
    out->mismatched += a[2];
    out->nonfinite += a[3];
    counts[q] = (int)a[4];
    total += (size_t)a[4];
    for (size_t i = 0; i < nfetch; i++) {
      if (a[5 + i] == 0)
        continue;
      if (out->var_unchecked == NULL &&
          (out->var_unchecked =
               calloc(nfetch + 1, sizeof *out->var_unchecked)) == NULL) {
        st = ovl__err(err, OVL_ENOMEM, "out of memory");
        goto done;
      }
      if (a[5 + i] > out->var_unchecked[i])
        out->var_unchecked[i] = a[5 + i];
    }
  }
  list = calloc(total + 1, sizeof *list);
  if (list == NULL) {
    st = ovl__err(err, OVL_ENOMEM, "out of memory");
    goto done;
  }
  {
    size_t before = 0;
    for (int q = 0; q < ovl__procs_rank(p); q++)
      before += (size_t)counts[q];
    if (out->nmismatch > 0)
      memcpy(list + before, out->mismatch,
             out->nmismatch * sizeof *out->mismatch);
    st = ovl__procs_allgather_rows(p, list + before, list, counts,
                                   sizeof *list, err);
  }
  if (st != OVL_OK)
    goto done;
  /* Names are pointers into each process's program: our own. */
  for (size_t k = 0; k < total; k++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, list[k].fetch_index, &v);
    list[k].var = v.name;
  }
  free(out->mismatch);
  out->mismatch = total > 0 ? list : NULL;
  out->nmismatch = total;
  if (total == 0)
    free(list);
  list = NULL;
done:
  free(list);
  free(mine);
  free(all);
  free(counts);
  if (st != OVL_OK)
    ovl_check_release(out);
  return st;
}

ovl_status ovl__compare_merge(ovl__compare *cmp, const ovl__layout *lay,
                              ovl_error *err) {
  ovl_error e = cmp->err;
  ovl_status st = ovl__procs_agree(lay->procs, cmp->status, &e);
  if (st != OVL_OK) {
    /* Every process fails the comparison alike, with the first message. */
    ovl_check_release(cmp->out);
    cmp->status = st;
    cmp->err = e;
    return OVL_OK;
  }
  return check_merge(cmp->prog, lay->procs, cmp->out, err);
}
