/*
 * The pipeline: the checks, the runs and the comparisons of the modes
 * asked, in one call that makes a report.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_PIPELINE_H
#define OVL_PUBLIC_PIPELINE_H

#include "ovl/reference.h"
#include "ovl/schedule.h"
#include "ovl/world.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* The pipeline: every stage, for the modes asked, as one report.      */
/* ------------------------------------------------------------------ */

/*
 * For each mode asked, in the order sync, async, comp, comm:
 *   1. its form of the program (ovl_program_transform) and, with `races`,
 *      its race check (ovl_race_check) and, given the schedule, the
 *      re-check of its fixes (ovl_races_check_fixes), and its deadlock
 *      check (ovl_deadlock_check); then, once, the mismatch check of the
 *      program as bound (ovl_mismatch_check; every form that keeps the
 *      communication has the same; none when comp is the only mode):
 *      every form is checked before anything runs. A mismatch or a
 *      deadlock stops the pipeline here, with a report (a run would hang
 *      or mix buffers): nothing runs, nothing is replayed, and
 *      ovl_report_not_run says why;
 *   2. with `run`: the float64 reference (ovl_reference_compute), once,
 *      only where a checked mode fetches something (sync and async are
 *      checked; comp and comm numbers are not), unless the caller gives
 *      one;
 *   3. with `run`, each form in turn: the run (ovl_world_run) and the
 *      comparison with the reference (ovl_check_result); with `trials`,
 *      step 3 again, each trial a whole measurement (every form in turn);
 * then the summary figures (ovl_report_summary_get, over the trials:
 * ovl_report_trials_get).
 *
 * The first error stops the pipeline: nothing is reported (*out is NULL)
 * and the message names the stage: "race check (sync): ...",
 * "reference: ...", "sync run failed: ..." (also when making the form
 * fails, without `races`), "check: ...".
 */

/* The bit of a mode in ovl_pipeline_opts.modes. */
#define OVL_MODE_BIT(mode) (1u << (unsigned)(mode))

typedef struct ovl_report_s ovl_report;

/* What ovl_pipeline_opts.progress is told, as it happens. */
typedef enum {
  /* Every check is done (with `races`; the forms are made); nothing has
   * run. The only event without `run`, or when the checks stop the
   * pipeline (ovl_report_not_run says so already). */
  OVL_PIPELINE_CHECKED = 0,
  /* The reference is ready (where needed); the runs start. */
  OVL_PIPELINE_READY,
  /* Mode `i` of the report has run and been compared: its
   * ovl_report_mode_get is complete (for the trial under way,
   * ovl_report_trial_count - 1). */
  OVL_PIPELINE_RAN
} ovl_pipeline_event;

typedef struct ovl_pipeline_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* OVL_MODE_BIT of each mode asked (run in the order sync, async, comp,
   * comm, whatever the bits' order). */
  unsigned modes;
  /* Non-zero: check each mode's form (races, deadlocks) and the program
   * (mismatches) before anything runs. */
  int races;
  /* Non-zero: run each form on the world and compare; 0: check only (the
   * world may be NULL; nothing is run, no reference computed). */
  int run;
  /* The runs' options (NULL: ovl_run_opts' defaults, one timed
   * iteration); by pointer, so that either struct can grow on its own. */
  const ovl_run_opts *run_opts;
  /* Tolerances of the comparison: |got - ref| <= atol + rtol * |ref|;
   * OVL_TOL_DTYPE: each fetched variable's dtype default. */
  double rtol, atol;
  /* Rows the reference computes of what a matmul_v2 gives (max_rows of
   * ovl_reference_compute_rows): 0 OVL_REFERENCE_ROWS_DEFAULT, < 0 every
   * row. */
  int64_t check_rows;
  /* A reference the caller computed for a program with the same fetched
   * variables (the same values expected), used instead of computing one;
   * NULL: the pipeline computes one where it is needed. */
  const ovl_reference *reference;
  /* Non-NULL: every error reads "LABEL: message" instead of naming the
   * stage (for a caller that runs many programs and names them). */
  const char *label;
  /* Called (if non-NULL) from the calling thread as the stages finish, so
   * that a caller can show the table as it fills; `i` is the mode's index
   * in the report for OVL_PIPELINE_RAN, else 0. The report is incomplete
   * (later modes have not run) and must not be freed. */
  void (*progress)(void *ctx, const ovl_report *report,
                   ovl_pipeline_event event, size_t i);
  void *progress_ctx;
  /* The schedule the program was bound from, and how (NULL: as
   * ovl_schedule_bind's defaults): with `races`, every form's fixes are
   * re-checked against it (ovl_races_check_fixes). NULL: the fixes are
   * not re-checked. It must outlive the call. */
  const ovl_schedule *schedule;
  const ovl_bind_opts *bind;
  /* Replay the races found (needs `races` and a world; see "Race replay"
   * below): 0 none; OVL_REPLAY_ALL every race of every form; K >= 1 race K
   * (as the race report numbers them: ovl_races_get(races, K - 1)) of each
   * form that has one. A K that no form has is refused (OVL_EINVAL, the
   * message says how many races each form has). */
  long replay;
  /* The replay's delay in microseconds; 0: the default (see "Race
   * replay"). It must be shorter than the world's timeout. */
  double replay_delay_us;
  /* With `run`: repeat the whole measurement (every form's run and
   * comparison, in order) up to `trials` times; 0 or 1: once. Where
   * trial_budget_s > 0, a trial after the first starts only if the trials
   * so far and one more at their mean wall time fit in it (so that long
   * runs are not repeated); 0: all `trials`. The race checks and the
   * reference are made once. Each trial's numbers are compared; only the
   * last trial's runs are kept (ovl_report_mode_get, the timelines). */
  int trials;
  double trial_budget_s;
} ovl_pipeline_opts;

/*
 * Race replay: a deterministic perturbation that makes a race show as
 * wrong numbers (ovl_pipeline_opts.replay). For race K of a form, the form
 * is run with one op inserted: delay(us=D) on the stream of the race's
 * first access, just before that access. The second access is not ordered
 * after the first, so nothing it waits for (streams, events, host syncs)
 * waits for the delay: its stream, or the host, runs ahead and the second
 * access happens before the first; on every rank alike. Each run is one
 * iteration with no warmup, so that a buffer that is not an input still
 * holds what the backend fills fresh memory with (NaN on cpu and cuda)
 * until it is written, and a read that comes too early cannot read a
 * right value left by an earlier iteration. The fetched values are
 * compared with the float64 reference (the pipeline's rtol and atol): the
 * race is *shown* when an element differs in a fetched variable that
 * depends on the race's variable (it, or one computed from it after the
 * first access), and the replay names the first (lowest rank, then fetched
 * variable, then element).
 *
 * Before its replays, a form is run once plainly (the same one iteration,
 * no delay): its time sets D, and its comparison says whether the numbers
 * were wrong without any delay. D is replay_delay_us, or by default
 * max(OVL_REPLAY_MIN_DELAY_US, 4 x the plain run's time): longer than
 * anything the second access can wait for, a whole iteration, with a
 * margin for a busy machine; at most half the world's timeout.
 *
 * A race is not replayed (shown 0, `why` says so) when its form's numbers
 * are not compared (comp, comm, or nothing fetched) or its first access is
 * on the host (there is no stream to delay; the host orders everything it
 * enqueues after its own accesses, so the race checker reports no such
 * race). A replay whose numbers match says why where it can tell: nothing
 * fetched is computed from the variable after the first access.
 */
#define OVL_REPLAY_ALL (-1L)
#define OVL_REPLAY_MIN_DELAY_US 20000.0

/* Run the pipeline of `opts` on `prog` (as parsed for the world's rank
 * count). `world` may be NULL when opts->run is 0. On success *out holds
 * the report (free it with ovl_report_free); it refers to `prog`, which
 * must outlive it. */
OVL_API ovl_status ovl_pipeline_run(ovl_world *world, const ovl_program *prog,
                                    const ovl_pipeline_opts *opts,
                                    ovl_report **out, ovl_error *err);
/* Whether ovl_pipeline_run(prog, opts) will compute a float64 reference
 * (it keeps 8 bytes of every element of every rank: for a memory check
 * before the run). */
OVL_API int ovl_pipeline_needs_reference(const ovl_program *prog,
                                         const ovl_pipeline_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_PIPELINE_H */
