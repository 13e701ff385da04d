/*
 * What the check layer (src/check/) offers the layers above it beyond the
 * public API (ovl_race_check, ovl_mismatch_check, ovl_deadlock_check,
 * ovl_reference_*, ovl_tolerance): the numeric comparison over plain
 * arrays, the graph form of the deadlock check, and the race checker's
 * memory per op. The matching of communication across ranks, which the
 * run's flight record also uses, is in check/match.h.
 *
 * Nothing here runs anything: a check reads a program (and values handed
 * to it) and writes a report.
 */
#ifndef OVL_CHECK_CHECK_H
#define OVL_CHECK_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/op.h"

/* ------------------------------------------------------------------ */
/* The numeric check (check/check.c)                                   */
/* ------------------------------------------------------------------ */

/* The tolerance rule for one element: NaN matches NaN only, an infinity
 * only itself, anything else within atol + rtol * |exp|. The check adds
 * that a fetched value must be finite. */
bool ovl__element_matches(double got, double exp, double rtol, double atol);

/* Where the values under test come from: got(ctx, rank, i) is fetched
 * variable i on `rank` as doubles (NULL: never fetched, which makes the
 * whole variable a mismatch). */
typedef const double *(*ovl__got_fn)(const void *ctx, int rank, size_t i);

/* Compare the fetched variables of ranks [lo, hi) of a program of
 * `nranks` ranks with the reference (ovl_check_result's rule and
 * messages; *out zeroed first, every count and mismatch of those ranks
 * only). */
ovl_status ovl__check_ranks(const ovl_program *prog, int nranks, int lo,
                            int hi, ovl__got_fn got, const void *ctx,
                            const ovl_reference *ref, double rtol,
                            double atol, ovl_check *out, ovl_error *err);
/* The same for every rank, [0, nranks). Tests pass plain arrays. */
ovl_status ovl__check_arrays(const ovl_program *prog, int nranks,
                             ovl__got_fn got, const void *ctx,
                             const ovl_reference *ref, double rtol,
                             double atol, ovl_check *out, ovl_error *err);

/* ------------------------------------------------------------------ */
/* The deadlock check (check/deadlock.c) and the race checker          */
/* ------------------------------------------------------------------ */

/* The deadlock check of a program run as graphs (ovl_run_opts.graph) when
 * `graph`: a host sync waits for every stream of its rank, as the segment
 * before it is one graph; each cycle's message says so.
 * ovl_deadlock_check is this with `graph` false. */
ovl_status ovl__deadlock_check_graph(const ovl_program *prog, bool graph,
                                     ovl_deadlocks **out, ovl_error *err);

/* Host bytes per op of the race checker's state (check/race.c), for
 * ovl_host_bytes_per_op. */
size_t ovl__race_bytes_per_op(void);

/* ------------------------------------------------------------------ */
/* Findings across forms (check/forms.c)                               */
/* ------------------------------------------------------------------ */

/* The checks of one form: its races and deadlocks (either NULL: not
 * checked). */
typedef struct ovl__form_checks {
  ovl_mode mode;
  const ovl_program *prog; /* the form */
  ovl_races *races;
  ovl_deadlocks *deadlocks;
} ovl__form_checks;

/* Mark every race and deadlock of the forms f[0 .. n) with the forms it
 * was found in (ovl_races_forms, ovl_deadlocks_forms: the same two
 * accesses, by variable, line, column and kind; the same comm ops in the
 * cycle, by line and column), and count the distinct ones: those listed,
 * each once, and as many not listed as the form that left the most out.
 * False when out of memory. */
bool ovl__findings_across_forms(ovl__form_checks *f, size_t n,
                                uint64_t *races, uint64_t *deadlocks);

/* Give every mismatch of `mm` (the report of `bound`, the program as
 * bound; NULL: none) and every deadlock of the forms f[0 .. n) its fix
 * hint, re-checked against the schedule `s` bound with `opts` as the
 * races' are (check/order_fix_check.c; ovl_mismatches_fix): the edited
 * text parsed, bound and checked in every form of f (deadlocks as graphs
 * run with `graph`); the first candidate that removes the finding and
 * adds none is checked; where no edit is known, why. */
ovl_status ovl__order_check_fixes(const ovl_program *bound,
                                  ovl_mismatches *mm, ovl__form_checks *f,
                                  size_t n, bool graph,
                                  const ovl_schedule *s,
                                  const ovl_bind_opts *opts, ovl_error *err);

#endif /* OVL_CHECK_CHECK_H */
