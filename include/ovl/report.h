/*
 * Reports: what a pipeline found and measured, and the report as
 * JSON.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_REPORT_H
#define OVL_PUBLIC_REPORT_H

#include "ovl/findings.h"
#include "ovl/pipeline.h"
#include "ovl/races.h"
#include "ovl/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

OVL_API void ovl_report_free(ovl_report *r);

/* The program the pipeline ran (as given to ovl_pipeline_run). */
OVL_API const ovl_program *ovl_report_program(const ovl_report *r);
/* Modes asked, in the order run. */
OVL_API size_t ovl_report_mode_count(const ovl_report *r);

/* One mode of a report. Pointers live as long as the report. */
typedef struct ovl_report_mode_s {
  ovl_mode mode;
  /* Its form of the program (what was checked and run); NULL when it was
   * never made (neither race-checked nor run). */
  const ovl_program *prog;
  /* Its race report; NULL without the race check. */
  const ovl_races *races;
  /* Its run; NULL when it did not run. */
  const ovl_result *res;
  /* Its comparison with the reference, every fetched variable of every
   * rank (mismatches name variables of ovl_report_program); NULL when the
   * numbers were not compared, and then `not_checked` says why: "comp-only
   * numbers are not checked" (comm alike), "nothing fetched", "not run". */
  const ovl_check *check;
  const char *not_checked;
  /* Seconds of the timed iterations (ovl_result_times): their sum, median,
   * min and max; NaN when it did not run. */
  double total_s, median_s, min_s, max_s;
  /* Its deadlock report; NULL without the check. */
  const ovl_deadlocks *deadlocks;
} ovl_report_mode;

/* Mode i (0-based, in the order run); returns 0, or -1 (info zeroed) if i
 * is out of range. */
OVL_API int ovl_report_mode_get(const ovl_report *r, size_t i,
                                ovl_report_mode *info);
/* The index of `mode` in the report if it ran, else -1. */
OVL_API int ovl_report_find(const ovl_report *r, ovl_mode mode);

/* The summary figures; NaN where the modes run do not give them. With
 * several trials, each figure is the median of the trials' figures
 * (ovl_report_trials_get). */
typedef struct ovl_report_summary_s {
  /* sync total / async total (sync and async ran). */
  double speedup;
  /* sync / max(comp, comm): the best any overlap can do (all four ran). */
  double ideal_speedup;
  /* (sync - async) / min(comp, comm): 1 = the shorter of compute and
   * communication fully hidden, 0 = nothing hidden (all four ran). */
  double overlap_efficiency;
  /* Elements that fail the check (out of tolerance or not finite), every
   * mode and trial; and of them, the elements fetched as NaN or an
   * infinity. */
  int64_t mismatched;
  int64_t nonfinite;
  /* Races found, every form (listed and only counted), each bug once: a
   * race between the same two accesses in several forms counts 1. */
  uint64_t races;
  /* Mismatches across ranks (ovl_mismatch_check: collectives, sends and
   * receives; not elements out of tolerance, which `mismatched` counts),
   * listed and only counted; deadlocks, every form, each once (a cycle
   * through the same comm ops in several forms counts 1). */
  uint64_t mismatches;
  uint64_t deadlocks;
} ovl_report_summary;
OVL_API void ovl_report_summary_get(const ovl_report *r,
                                    ovl_report_summary *out);
/* The mismatch report of the program as bound; NULL without the check (or
 * when no form asked keeps the communication). Lives as long as `r`. */
OVL_API const ovl_mismatches *ovl_report_mismatches(const ovl_report *r);
/* Why nothing ran although a run was asked for ("mismatches found: a run
 * would hang or mix buffers", "deadlocks found: a run would hang"), or
 * NULL. */
OVL_API const char *ovl_report_not_run(const ovl_report *r);

/* Trials (ovl_pipeline_opts.trials): how many have run (started, during
 * the progress callback), at least 1 once a run has started. */
OVL_API size_t ovl_report_trial_count(const ovl_report *r);
/* Mode i of trial t: its times and its comparison (`res` is NULL except in
 * the last trial, whose runs the report keeps). Returns 0, or -1 (info
 * zeroed) when t or i is out of range or the mode has not run in t. */
OVL_API int ovl_report_trial_get(const ovl_report *r, size_t t, size_t i,
                                 ovl_report_mode *info);

/* The summary of trial t alone: its figures, and its elements that fail
 * (races: as the report's). Zeroed, figures NaN, where t is out of range. */
OVL_API void ovl_report_trial_summary_get(const ovl_report *r, size_t t,
                                          ovl_report_summary *out);

/* The least, the median and the greatest of a figure over the trials;
 * NaN where no trial gives it. */
typedef struct ovl_stat_s {
  double min, median, max;
} ovl_stat;

/* Every figure over the trials. */
typedef struct ovl_report_trials_s {
  size_t n; /* trials run */
  /* Each mode's total (seconds of its timed iterations), indexed by
   * ovl_mode; NaN where the mode did not run. */
  ovl_stat total_s[OVL__MODE_COUNT];
  /* The summary figures of each trial, as ovl_report_summary_s says. */
  ovl_stat speedup, ideal_speedup, overlap_efficiency;
  /* (max - min) / median of the speedup: how far apart the trials are. */
  double speedup_spread;
} ovl_report_trials;
OVL_API void ovl_report_trials_get(const ovl_report *r, ovl_report_trials *out);

/* The machine the report's runs ran on, from the world (backend NULL and
 * nranks 0 when nothing ran). Strings live as long as the report. */
typedef struct ovl_report_machine_s {
  const char *backend;
  int nranks;
  const char *devices;             /* as ovl_world_devices */
  const char *const *device_names; /* [nranks], as ovl_world_device_name */
  ovl_world_info info;
} ovl_report_machine;
OVL_API void ovl_report_machine_get(const ovl_report *r,
                                    ovl_report_machine *out);

/* The op times of mode i (run with ovl_run_opts.op_times), one row per
 * (source line, op, stream) in program order: how many ops, and their
 * device seconds per iteration, averaged over the timed iterations and
 * the ranks. Host ops and ops without work on a stream have none. *rows
 * is malloc'd (free() it). */
typedef struct ovl_op_time_s {
  int line;
  const char *op;  /* its name, as ovl_program_op */
  int stream;      /* as ovl_program_stream_name */
  const char *stream_name; /* "calc", "comm[0]", "side": the program's */
  long count;
  double sec_per_iter;
} ovl_op_time;
OVL_API ovl_status ovl_report_op_times(const ovl_report *r, size_t i,
                                       ovl_op_time **rows, size_t *nrows,
                                       ovl_error *err);

/* One race replayed (see "Race replay"). Strings live as long as the
 * report (and `var` as the program given to ovl_pipeline_run). */
typedef struct ovl_replay_s {
  size_t race; /* its index in the form's race report: race + 1 as printed */
  /* 1: the numbers came out wrong. */
  int shown;
  /* Where the delay went: on `stream` just before op `op` of the form's
   * program (the race's first access), at source line `line`; stream -1
   * (host) when it was not replayed. */
  int stream;
  const char *stream_name;
  size_t op;
  int line;
  double delay_us; /* the delay; NaN when it was not replayed */
  /* When shown: the first element out of tolerance, on `rank`, of fetched
   * variable `fetch_index` (named `var`), at flat index `index`
   * (ovl_var_index_text); what it held and what the reference says. Only
   * fetched variables that depend on the race's variable count (fetched
   * at or after its first access, it or a variable computed from it): a
   * wrong value elsewhere comes from something else (another race). */
  int rank;
  size_t fetch_index;
  const char *var;
  int64_t index;
  double got, expected;
  /* Elements out of tolerance and compared, all ranks, in the fetched
   * variables that depend on the race's variable; and out of tolerance in
   * the other fetched variables. */
  int64_t mismatched, checked;
  int64_t other_mismatched;
  /* When not shown: why ("the numbers matched (nothing fetched is
   * computed from 't' after line 12)", "not replayed (comp-only numbers
   * are not compared with the reference)"). */
  const char *why;
} ovl_replay;

/* The replay of one form of a report. */
typedef struct ovl_report_replay_s {
  size_t n;                  /* races replayed (or not, with why) */
  const ovl_replay *replays; /* [n], in race order */
  /* The plain run (one iteration, no delay): whether it ran, its time,
   * and its comparison (elements compared, out of tolerance). */
  int plain_ran;
  double plain_s;
  int64_t plain_checked, plain_mismatched;
  /* The delay used; NaN when nothing was replayed. */
  double delay_us;
} ovl_report_replay;
/* The replay of mode i; returns 0, or -1 (out zeroed) when i is out of
 * range or the report was made without replay. A form none of whose races
 * was asked for has n == 0. */
OVL_API int ovl_report_replay_get(const ovl_report *r, size_t i,
                                  ovl_report_replay *out);

/* The verdict of a report: "PASS", "FAIL: non-finite values" (a fetched
 * NaN or infinity), "FAIL: numeric mismatch" (any other element out of
 * tolerance), "FAIL: mismatches", "FAIL: deadlocks", "FAIL: mismatches and
 * deadlocks" (nothing ran), or "FAIL: races" (numbers right, races found),
 * in that order of precedence. */
OVL_API const char *ovl_report_result(const ovl_report *r);

/*
 * The report as the results JSON of tools/overlap_sim --json=FILE
 * (docs/JSON.md): "version", "schedule", "machine", "options", "modes"
 * (per mode: times, "check", "races", "deadlocks", and with op times
 * "op_times"; the last trial's), "mismatches", "findings" (as
 * ovl_report_races_json's; null without the checks), "not_run",
 * "speedup", "ideal_speedup", "overlap_efficiency" (medians over the
 * trials), "trials" (every figure over the trials, and each trial),
 * "result". A report the checks stopped (ovl_report_not_run) has null
 * times, an empty "iter_s" and "check" "n/a" in every mode, and "not_run"
 * says why (else null). Everything comes from the report, which records
 * the options it ran with ("options": the pipeline's and the runs'
 * options, the world's timeout and tuning, the -D values of the program);
 * what only the caller knows it adds as its envelope. Valid UTF-8
 * whatever the bytes of a path or a name.
 */
typedef struct ovl_json_envelope_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* Members the caller adds, each a comma-separated list of JSON members
   * ("\"tool\": \"overlap_sim\"", its strings made with ovl_json_quote)
   * or NULL: `head` before the report's first member, `options` after the
   * last member of "options", `tail` after the report's last member. The
   * library does not read them; they must be valid JSON members. */
  const char *head, *options, *tail;
} ovl_json_envelope;
OVL_API ovl_status ovl_report_json(const ovl_report *r,
                                   const ovl_json_envelope *envelope,
                                   char **text, size_t *len, ovl_error *err);
/* The check reports of every mode of a report, as JSON (what
 * tools/overlap_sim --races --json writes), each under its form's name,
 * one alone too: {"modes": {"sync": REPORT, "async": REPORT}, "deadlocks":
 * {"sync": DEADLOCKS, "async": DEADLOCKS}, "mismatches": MISMATCHES} and
 * "\n", REPORT as ovl_races_format gives it, DEADLOCKS as
 * ovl_deadlocks_format, MISMATCHES as ovl_mismatches_format (null where
 * not checked), then "findings": {"races", "mismatches", "deadlocks" (the
 * summary's counts: each bug once), "same": [["sync", "async"], ...] (the
 * forms whose findings read the same, grouped)}. The report must have
 * been made with the checks. A report
 * made with the replay has one more key, "replay" (what --replay --json
 * writes; docs/ORDERING.md, "The fix"). *text is malloc'd (free()
 * it). */
OVL_API ovl_status ovl_report_races_json(const ovl_report *r, char **text,
                                         size_t *len, ovl_error *err);

/* The index (<= i) of the first mode of the report whose races and
 * deadlocks read the same as mode i's (i itself when none does): forms
 * whose findings are identical are printed once. -1: i out of range or
 * no checks. */
OVL_API int ovl_report_same_findings(const ovl_report *r, size_t i);

/* The timelines of a report, with its races marked: where its replays
 * were traced (ovl_pipeline_opts.replay with run_opts.trace), one run per
 * race replayed, labelled "FORM race K", marking the race's two accesses
 * in the form with its delay; else each mode that ran traced (the last
 * trial's run), marking the two accesses of each race of its form, on
 * the race's ranks. *runs (n of them) is malloc'd with *marks (free()
 * *runs alone); they point into the report. OVL_EINVAL when nothing was
 * traced. */
OVL_API ovl_status ovl_report_timelines(const ovl_report *r,
                                        ovl_timeline_run **runs,
                                        const ovl_timeline_marks **marks,
                                        size_t *n, ovl_error *err);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_REPORT_H */
