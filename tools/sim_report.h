/*
 * What tools/overlap_sim prints (tools/sim_report.c): the header, the
 * table of modes, the op times, the summary lines, the mismatches, the
 * race reports and --show, all from the pipeline's report. Output goes to
 * stdout (the caller checks it at exit). Not part of libovl.
 */
#ifndef OVL_SIM_REPORT_H
#define OVL_SIM_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ovl.h"
#include "sim_flags.h"

/* The header: backend, ranks and devices, the schedule and its params, the
 * memory per rank (and the ops' host memory where that is more: `per_op`
 * is ovl_host_bytes_per_op), the iterations, or where the checks stopped
 * the run (`not_run`: ovl_report_not_run) "nothing ran (WHY)"; then the
 * line giving the full sizes where the cpu backend's smaller defaults were
 * used, and the cpu backend's note on its times (where there are). */
void sim_print_header(const sim_options *o, const ovl_world *world,
                      const ovl_program *prog, const char *path,
                      uint64_t per_op, const char *not_run);

/* The table's column names; with `trials`, a column for the trial. */
void sim_print_table_header(bool trials);

/* Mode i's row in the trial under way (`trial` its number from 1, in the
 * trial column; 0: no column), and with `verbose` every timed iteration. */
void sim_print_row(const ovl_report *r, size_t i, size_t trial,
                   bool verbose);

/* --op-times: the table per (source line, op, stream) of every mode. */
void sim_print_op_times(const ovl_report *r, const sim_options *o);

/* The summary lines: async speedup, ideal speedup, overlap efficiency,
 * where the modes run give them; after several trials, each mode's total
 * too, each figure as its median and range over the trials, and the
 * spread of the speedup. */
/* The explain line: where the async iteration went (predicted, or a
 * traced real run: --op-times). */
void sim_print_explain(const ovl_report *r);
void sim_print_summary(const ovl_report *r);

/* One line per (mode, rank, variable) that differs from the reference, in
 * every trial ("async (trial 2): ..." after several). */
void sim_print_mismatches(const ovl_report *r);
/* "tolerance |got-ref| <= 1e-06 + 1e-05 * |ref|": the tolerance the
 * variables that differ were checked with (one per dtype; when they
 * differ, each dtype's). */
void sim_print_tolerance(const ovl_report *r);

/* The check reports as text, on `f`: per mode, headed "== MODE ==", its
 * races and its deadlocks (forms whose findings read the same once,
 * headed "== sync, async (the same findings) =="), then the mismatches of
 * the program (headed "== mismatches (every form) =="); with `racy_only`,
 * only the reports that found something. Returns the number of findings
 * printed, or -1 on error (message printed). */
long sim_print_races(const ovl_report *r, bool racy_only, FILE *f);

/* "1 race, 0 mismatches, 2 deadlocks" (no newline). */
void sim_print_check_summary(const ovl_report *r, FILE *f);

/* --show=N: per rank and fetched variable, its first N values (of the
 * async run, or of the only mode run). */
void sim_print_show(const ovl_report *r, int n);

/* The tool's envelope of the results JSON (ovl_json_envelope): "tool"
 * first; "mode" (as asked), "trace" and "svg" (the files, or null) in
 * "options"; "exit_status" last. Each malloc'd; 0, or -1 out of memory
 * (nothing to free). */
int sim_json_envelope(const sim_options *o, int exit_status, char **head,
                      char **opts, char **tail);

#endif /* OVL_SIM_REPORT_H */
