/*
 * Internal pieces of the reference (check/reference.c).
 */
#ifndef OVL_CHECK_REFERENCE_H
#define OVL_CHECK_REFERENCE_H

#include "core/op.h"

/* Rows rows[0..nrows) (rows NULL: every row, 0 .. m - 1) of out[m, n] =
 * op(x) @ op(y) in float64, row-major: x is [m, k] ([k, m] with tx), y
 * [k, n] ([n, k] with ty); out is another array than x and y. The other
 * rows of out are not written. Uses every online CPU for large products
 * (check/ref_matmul.c). Returns false when out of memory (out is then
 * partly written). */
bool ovl__ref_matmul(double *out, const double *x, const double *y,
                     size_t m, size_t n, size_t k, bool tx, bool ty,
                     const int64_t *rows, size_t nrows);

/* Threads for `work` units (multiply-adds, elements) on this machine: one
 * per online CPU, fewer for small work (about 4 M units a thread), 1 at
 * least. */
size_t ovl__ref_threads(double work);

/* fn(ctx, lo, hi) over [0, n) cut into `nthreads` contiguous ranges, one
 * a thread (this thread takes the first); returns when all are done. fn
 * must be safe to run on disjoint ranges at once. */
void ovl__ref_parallel(size_t n, size_t nthreads,
                       void (*fn)(void *ctx, size_t lo, size_t hi),
                       void *ctx);

#endif /* OVL_CHECK_REFERENCE_H */
