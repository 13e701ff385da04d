/*
 * The float64 reference of a program and the numeric check of a run's
 * results against it.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_REFERENCE_H
#define OVL_PUBLIC_REFERENCE_H

#include "ovl/world.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Reference and numeric check.                                        */
/* ------------------------------------------------------------------ */

typedef struct ovl_reference_s ovl_reference;

/* Interpret `prog` sequentially in float64 for `nranks` ranks (its own rank
 * count): each rank in its program order, ranks meeting at communication
 * as NCCL matches it (docs/LANGUAGE.md, "Ranks that differ"). OVL_EMISMATCH, with
 * the first disagreement named, for a program whose ranks disagree on the
 * matching or cannot all complete. */
OVL_API ovl_status ovl_reference_compute(const ovl_program *prog, int nranks,
                                         ovl_reference **out, ovl_error *err);
/*
 * Sampled rows (docs/MATMUL.md, "Checking large products"). A fetched variable
 * computed from a matmul_v2's output is checked on at most `max_rows`
 * rows of its dim 0, one in each of max_rows equal strata (the first and
 * the last row among them), on every rank; the reference computes only
 * what those rows depend on, found backwards from the fetches (row i of
 * a matmul's output needs row i of op(x) and all of op(y); an elementwise
 * op or an allreduce needs the same rows; other collectives all rows).
 * Every value in those rows is computed in full and checked exactly like
 * any other. Other fetched variables are computed whole. max_rows 0:
 * every row of everything (a full float64 matmul).
 * ovl_reference_compute: max_rows OVL_REFERENCE_ROWS_DEFAULT.
 */
#define OVL_REFERENCE_ROWS_DEFAULT 64
OVL_API ovl_status ovl_reference_compute_rows(const ovl_program *prog,
                                              int nranks, int64_t max_rows,
                                              ovl_reference **out,
                                              ovl_error *err);
OVL_API void ovl_reference_free(ovl_reference *ref);
/* The value fetched variable `i` must have on `rank` (NULL if that rank
 * never fetches it). Where the rows were sampled, only the rows
 * ovl_reference_rows lists hold values; the others hold anything. */
OVL_API const double *ovl_reference_fetched(const ovl_reference *ref, int rank,
                                            size_t i);
/* The rows (of dim 0) of fetched variable `i` the reference computed,
 * sorted, *n of them; NULL (and *n 0) when it computed all of them. */
OVL_API const int64_t *ovl_reference_rows(const ovl_reference *ref, size_t i,
                                          size_t *n);

typedef struct ovl_mismatch_s {
  int rank;
  size_t fetch_index; /* index of the fetched variable */
  const char *var;    /* its name */
  int64_t count;      /* elements that fail: out of tolerance or not finite */
  int64_t numel;
  int64_t first_index; /* the first element that fails */
  double got, expected;
  /* Of them, the elements fetched as NaN or an infinity, and the first
   * (-1 when there is none). */
  int64_t nonfinite;
  int64_t first_nonfinite;
  double rtol, atol;    /* the tolerance it was checked with */
} ovl_mismatch;

typedef struct ovl_check_s {
  double rtol, atol;    /* as given (OVL_TOL_DTYPE: per dtype) */
  int64_t checked;      /* elements compared, all ranks and variables */
  /* Elements not compared: rows the reference did not compute (sampled
   * rows of a matmul's results, ovl_reference_compute_rows). */
  int64_t unchecked;
  int64_t mismatched;   /* elements that fail: out of tolerance or not finite */
  int64_t nonfinite;    /* of them, elements fetched as NaN or an infinity */
  size_t nmismatch;     /* entries in `mismatch`, one per (rank, var) */
  ovl_mismatch *mismatch;
  /* Per fetched variable (by fetch index), its elements on one rank that
   * were not compared (sampled rows); NULL when `unchecked` is 0. */
  int64_t *var_unchecked;
} ovl_check;

/* Compare every fetched variable of every rank with the reference. An
 * element passes when it is finite and |got - ref| <= atol + rtol * |ref|:
 * a fetched NaN or infinity fails even where the reference has the same
 * (a float32 that overflowed is wrong however the reference overflowed).
 * rtol and atol are >= 0, or OVL_TOL_DTYPE: the default of each
 * variable's dtype. Fills `out` (free with ovl_check_release). */
OVL_API ovl_status ovl_check_result(const ovl_program *prog,
                                    const ovl_result *res,
                                    const ovl_reference *ref, double rtol,
                                    double atol, ovl_check *out,
                                    ovl_error *err);
OVL_API void ovl_check_release(ovl_check *check);
/* The tolerance values of `dtype` that (rtol, atol) give: each as it is,
 * or the dtype's default where it is OVL_TOL_DTYPE. */
OVL_API void ovl_tolerance(double rtol, double atol, ovl_dtype dtype,
                           double *rtol_out, double *atol_out);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_REFERENCE_H */
