/*
 * The numeric check: every fetched variable of every rank against the
 * reference. An element passes when it is finite and |got - ref| <= atol +
 * rtol * |ref|. A fetched NaN or infinity fails whatever the reference
 * says: a float32 that overflowed to infinity, or an inf - inf, is no
 * result, even where the float64 reference, rounded to float32, overflowed
 * the same way. The tolerance rule alone (ovl__element_matches, which the
 * conformance suite uses for special inputs) lets a NaN match only a NaN
 * and an infinity only the same infinity (so a tolerance that overflows to
 * infinity never lets a finite value match an infinite one). A tolerance
 * given as OVL_TOL_DTYPE is, per fetched variable, its dtype's default
 * (ovl_dtype_rtol, ovl_dtype_atol). A rank checks the variables it
 * fetches: a fetch with ranks=[...] fetches only there, and a rank that
 * fetches nothing of a variable has nothing of it to check. Where the reference sampled the
 * rows of a variable (ovl_reference_rows), those rows are compared and
 * the others counted as not checked.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"

bool ovl__element_matches(double got, double exp, double rtol,
                          double atol) {
  if (isnan(got) || isnan(exp))
    return isnan(got) && isnan(exp);
  if (isinf(got) || isinf(exp))
    return got == exp;
  return fabs(got - exp) <= atol + rtol * fabs(exp);
}

/* One variable's elements that fail. */
typedef struct {
  int64_t count;     /* out of tolerance or not finite */
  size_t first;      /* the first of them */
  int64_t nonfinite; /* fetched as NaN or an infinity */
  size_t first_nonfinite;
} failures;

/* The failures of got[0, n) against exp (indices untouched where there
 * are none). */
static void count_failures(const double *got, const double *exp, size_t n,
                           double rtol, double atol, failures *f) {
  for (size_t i = 0; i < n; i++) {
    bool finite = isfinite(got[i]);
    if (!finite) {
      if (f->nonfinite == 0)
        f->first_nonfinite = i;
      f->nonfinite++;
    }
    if (finite && ovl__element_matches(got[i], exp[i], rtol, atol))
      continue;
    if (f->count == 0)
      f->first = i;
    f->count++;
  }
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

ovl_status ovl__check_ranks(const ovl_program *prog, int nranks, int lo,
                            int hi, ovl__got_fn got, const void *ctx,
                            const ovl_reference *ref, double rtol,
                            double atol, ovl_check *out, ovl_error *err) {
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

  for (int r = lo; r < hi; r++) {
    for (size_t i = 0; i < nfetch; i++) {
      ovl_var_info info;
      const double *g = got(ctx, r, i);
      const double *e = ovl_reference_fetched(ref, r, i);
      const int64_t *rows;
      size_t n, nrows;
      failures f = {0};
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
        f.count = info.numel; /* never fetched: all of it is wrong */
        out->checked += info.numel;
      } else if (rows == NULL) {
        count_failures(g, e, n, vrtol, vatol, &f);
        out->checked += info.numel;
      } else {
        /* Sampled rows: only those hold reference values. */
        size_t len = info.dims[0] > 0 ? n / (size_t)info.dims[0] : 0;
        for (size_t q = 0; q < nrows; q++) {
          size_t at = (size_t)rows[q] * len;
          failures fr = {0};
          count_failures(g + at, e + at, len, vrtol, vatol, &fr);
          if (fr.count > 0 && f.count == 0)
            f.first = at + fr.first;
          if (fr.nonfinite > 0 && f.nonfinite == 0)
            f.first_nonfinite = at + fr.first_nonfinite;
          f.count += fr.count;
          f.nonfinite += fr.nonfinite;
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
      if (f.count == 0 && g != NULL)
        continue;

      ovl_mismatch *m = &out->mismatch[out->nmismatch++];
      m->rank = r;
      m->fetch_index = i;
      m->var = info.name;
      m->count = f.count;
      m->numel = info.numel;
      m->first_index = (int64_t)f.first;
      m->rtol = vrtol;
      m->atol = vatol;
      m->got = g != NULL ? g[f.first] : NAN;
      m->expected = n > 0 ? e[f.first] : NAN;
      m->nonfinite = f.nonfinite;
      m->first_nonfinite = f.nonfinite > 0 ? (int64_t)f.first_nonfinite : -1;
      out->mismatched += f.count;
      out->nonfinite += f.nonfinite;
    }
  }
  free(on);
  if (out->nmismatch == 0) {
    free(out->mismatch);
    out->mismatch = NULL;
  }
  return OVL_OK;
}

ovl_status ovl__check_arrays(const ovl_program *prog, int nranks,
                             ovl__got_fn got, const void *ctx,
                             const ovl_reference *ref, double rtol,
                             double atol, ovl_check *out, ovl_error *err) {
  return ovl__check_ranks(prog, nranks, 0, nranks, got, ctx, ref, rtol, atol,
                          out, err);
}

void ovl_tolerance(double rtol, double atol, ovl_dtype dtype,
                   double *rtol_out, double *atol_out) {
  *rtol_out = rtol == OVL_TOL_DTYPE ? ovl_dtype_rtol(dtype) : rtol;
  *atol_out = atol == OVL_TOL_DTYPE ? ovl_dtype_atol(dtype) : atol;
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
