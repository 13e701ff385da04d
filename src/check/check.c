/*
 * The numeric check: every fetched variable of every rank against the
 * reference. An element matches when |got - ref| <= atol + rtol * |ref|;
 * a NaN matches only a NaN, and an infinity only the same infinity (so a
 * tolerance that overflows to infinity never lets a finite value match an
 * infinite one). A tolerance given as OVL_TOL_DTYPE is, per fetched
 * variable, its dtype's default (ovl_dtype_rtol, ovl_dtype_atol). A rank
 * checks the variables it fetches: a fetch with
 * ranks=[...] fetches only there, and a rank that fetches nothing of a
 * variable has nothing of it to check. Where the reference sampled the
 * rows of a variable (ovl_reference_rows), those rows are compared and
 * the others counted as not checked.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool ovl__element_matches(double got, double exp, double rtol,
                          double atol) {
  if (isnan(got) || isnan(exp))
    return isnan(got) && isnan(exp);
  if (isinf(got) || isinf(exp))
    return got == exp;
  return fabs(got - exp) <= atol + rtol * fabs(exp);
}

/* Elements of got[0, n) out of tolerance; the first one's index in *first
 * (untouched when there is none). */
static int64_t count_mismatches(const double *got, const double *exp,
                                size_t n, double rtol, double atol,
                                size_t *first) {
  int64_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (ovl__element_matches(got[i], exp[i], rtol, atol))
      continue;
    if (count == 0)
      *first = i;
    count++;
  }
  return count;
}

/* Per (fetched variable i, rank r): whether some op that reads on the
 * host (fetch: a HOST_READ primitive) and runs on r names it; bit r of
 * on[i] (every bit for an op that runs on every rank). */
static bool fetched_on(const ovl_program *prog, uint64_t *on,
                       size_t nfetch) {
  uint64_t all = ovl__program_all_ranks(prog);
  /* Each variable's fetch index, + 1 (0: not fetched). */
  size_t *fi = calloc(prog->nvars + 1, sizeof *fi);
  if (fi == NULL)
    return false;
  for (size_t f = 0; f < nfetch; f++)
    if (prog->fetch[f] >= 0 && (size_t)prog->fetch[f] < prog->nvars)
      fi[prog->fetch[f]] = f + 1;
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *o = &prog->ops[i];
    size_t n;
    const ovl__prim *p = ovl__op_prims(prog, i, &n);
    bool reads = false;
    for (size_t k = 0; k < n; k++)
      reads |= p[k].kind == OVL_PRIM_HOST_READ;
    for (int k = 0; reads && k < o->nin; k++)
      if (o->in[k] >= 0 && fi[o->in[k]] != 0)
        on[fi[o->in[k]] - 1] |=
            (o->ranks & all) == all ? ~(uint64_t)0 : o->ranks;
  }
  free(fi);
  return true;
}

ovl_status ovl__check_arrays(const ovl_program *prog, int nranks,
                             const double *(*got)(const void *ctx, int rank,
                                                  size_t i),
                             const void *ctx, const ovl_reference *ref,
                             double rtol, double atol, ovl_check *out,
                             ovl_error *err) {
  size_t nfetch, cap;
  uint64_t *on;

  if (out != NULL)
    memset(out, 0, sizeof *out);
  if (prog == NULL || got == NULL || ref == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_check_result: bad argument");
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL, "ovl_check_result: %d ranks", nranks);
  /* Written so that NaN tolerances fail too. */
  if (!(rtol >= 0 || rtol == OVL_TOL_DTYPE) ||
      !(atol >= 0 || atol == OVL_TOL_DTYPE))
    return ovl__err(err, OVL_EINVAL,
                    "ovl_check_result: tolerances must be >= 0 or "
                    "OVL_TOL_DTYPE (rtol %g, atol %g)",
                    rtol, atol);
  out->rtol = rtol;
  out->atol = atol;

  nfetch = ovl_program_fetch_count(prog);
  cap = (size_t)nranks * nfetch;
  on = calloc(nfetch + 1, sizeof *on);
  if (on == NULL)
    return ovl__err(err, OVL_ENOMEM, "ovl_check_result: out of memory");
  if (cap > 0) {
    out->mismatch = calloc(cap, sizeof *out->mismatch);
    if (out->mismatch == NULL) {
      free(on);
      return ovl__err(err, OVL_ENOMEM, "ovl_check_result: out of memory");
    }
  }
  if (prog->prim_first == NULL)
    for (size_t i = 0; i < nfetch; i++)
      on[i] = ~(uint64_t)0;
  else if (!fetched_on(prog, on, nfetch)) {
    free(on);
    ovl_check_release(out);
    return ovl__err(err, OVL_ENOMEM, "ovl_check_result: out of memory");
  }

  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < nfetch; i++) {
      ovl_var_info info;
      const double *g = got(ctx, r, i);
      const double *e = ovl_reference_fetched(ref, r, i);
      const int64_t *rows;
      size_t n, first = 0, nrows;
      int64_t count;
      double vrtol, vatol;

      ovl_program_fetch_info(prog, i, &info);
      ovl_tolerance(rtol, atol, info.dtype, &vrtol, &vatol);
      if (!((on[i] >> r) & 1))
        continue; /* rank r does not fetch it */
      if (e == NULL) {
        free(on);
        ovl_check_release(out);
        return ovl__err(err, OVL_EINVAL,
                        "ovl_check_result: the reference has no value of "
                        "'%s' on rank %d",
                        info.name, r);
      }
      n = (size_t)info.numel;
      rows = ovl_reference_rows(ref, i, &nrows);
      if (g == NULL) {
        count = info.numel; /* never fetched: all of it is wrong */
        out->checked += info.numel;
      } else if (rows == NULL) {
        count = count_mismatches(g, e, n, vrtol, vatol, &first);
        out->checked += info.numel;
      } else {
        /* Sampled rows: only those hold reference values. */
        size_t len = info.dims[0] > 0 ? n / (size_t)info.dims[0] : 0;
        count = 0;
        for (size_t q = 0; q < nrows; q++) {
          size_t at = (size_t)rows[q] * len, f = 0;
          int64_t c = count_mismatches(g + at, e + at, len, vrtol, vatol, &f);
          if (c > 0 && count == 0)
            first = at + f;
          count += c;
        }
        out->checked += (int64_t)(nrows * len);
        out->unchecked += info.numel - (int64_t)(nrows * len);
        if (out->var_unchecked == NULL &&
            (out->var_unchecked = calloc(nfetch + 1,
                                         sizeof *out->var_unchecked)) ==
                NULL) {
          free(on);
          ovl_check_release(out);
          return ovl__err(err, OVL_ENOMEM,
                          "ovl_check_result: out of memory");
        }
        out->var_unchecked[i] = info.numel - (int64_t)(nrows * len);
      }
      if (count == 0 && g != NULL)
        continue;

      ovl_mismatch *m = &out->mismatch[out->nmismatch++];
      m->rank = r;
      m->fetch_index = i;
      m->var = info.name;
      m->count = count;
      m->numel = info.numel;
      m->first_index = (int64_t)first;
      m->rtol = vrtol;
      m->atol = vatol;
      m->got = g != NULL ? g[first] : NAN;
      m->expected = n > 0 ? e[first] : NAN;
      out->mismatched += count;
    }
  }
  free(on);
  if (out->nmismatch == 0) {
    free(out->mismatch);
    out->mismatch = NULL;
  }
  return OVL_OK;
}

void ovl_tolerance(double rtol, double atol, ovl_dtype dtype,
                   double *rtol_out, double *atol_out) {
  *rtol_out = rtol == OVL_TOL_DTYPE ? ovl_dtype_rtol(dtype) : rtol;
  *atol_out = atol == OVL_TOL_DTYPE ? ovl_dtype_atol(dtype) : atol;
}

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
  return ovl__check_arrays(prog, prog->nranks, result_fetched, res, ref,
                           rtol, atol, out, err);
}

void ovl_check_release(ovl_check *check) {
  if (check == NULL)
    return;
  free(check->mismatch);
  free(check->var_unchecked);
  check->var_unchecked = NULL;
  check->mismatch = NULL;
  check->nmismatch = 0;
}
