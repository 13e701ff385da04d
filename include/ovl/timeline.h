/*
 * Timelines: the traced iteration of runs, as a Chrome trace or an SVG
 * picture.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_TIMELINE_H
#define OVL_PUBLIC_TIMELINE_H

#include "ovl/world.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Timelines: the traced iteration of runs, as a trace or a picture.   */
/* ------------------------------------------------------------------ */

typedef struct ovl_timeline_run_s {
  ovl_mode mode;
  const ovl_program *prog; /* the program that ran (as transformed) */
  const ovl_result *res;   /* its result, run with ovl_run_opts.trace */
} ovl_timeline_run;

/*
 * A Chrome trace-event file (JSON object format: "traceEvents",
 * "displayTimeUnit", "otherData") of the traced iteration of each run, for
 * Perfetto or chrome://tracing. One process per (run, rank), named
 * "rank R (device)" (prefixed by the mode when there are several runs), with
 * one track per stream (calc, comm[R]) and one for the host; one complete
 * slice per op (ts and dur in microseconds, ranks aligned on the host clock,
 * each run starting at 0) with args source, bytes, mode, in, out (and
 * ring, seq for collectives, whose name reads "c_allreduce_sum #3 (ring
 * 0)", seq counted per ring from 0); the record of c_wait_compute /
 * c_wait_comm is a slice "NAME [record]" on the recording stream; a flow
 * arrow goes from every event record to each wait that consumes it.
 * The backend and the device names are the results' (ovl_result_backend,
 * ovl_result_device_name); every run must have the same rank count.
 * *text is malloc'd (free() it), *len its length. */
OVL_API ovl_status ovl_timeline_trace(const ovl_timeline_run *runs,
                                      size_t nruns, char **text, size_t *len,
                                      ovl_error *err);
/* A self-contained SVG picture of the same: a title line, a legend, one
 * panel per run on a common time axis (ms), one lane per (rank, stream) and
 * the host, ops coloured by kind, and per rank an "overlap" lane (and a
 * translucent band) where a collective and a compute op ran at once. */
OVL_API ovl_status ovl_timeline_svg(const ovl_timeline_run *runs, size_t nruns,
                                    char **text, size_t *len, ovl_error *err);

/* Timelines that show the bug: an op to mark, on the ranks of `ranks`
 * (bit r), outlined and labelled "race K" (race K of its form's report),
 * and per run its name (NULL: the mode's) and its marks. */
typedef struct ovl_timeline_mark_s {
  size_t op; /* in the run's program */
  uint64_t ranks;
  int race;
} ovl_timeline_mark;
typedef struct ovl_timeline_marks_s {
  const char *label;
  const ovl_timeline_mark *marks;
  size_t nmarks;
} ovl_timeline_marks;
/* ovl_timeline_trace and ovl_timeline_svg with marks[k] for runs[k]
 * (marks NULL: none): a marked op's slice is named "OP [race K]", red
 * (cname "terrible") with args "race": [K]; in the picture outlined and
 * labelled. Both also colour the waits by kind: an event wait, a host
 * sync, and the part of a collective before its last peer started it
 * (the trace: a slice "waiting for its peers" inside the collective's,
 * and args "wait"). */
OVL_API ovl_status ovl_timeline_trace_marked(const ovl_timeline_run *runs,
                                             const ovl_timeline_marks *marks,
                                             size_t nruns, char **text,
                                             size_t *len, ovl_error *err);
OVL_API ovl_status ovl_timeline_svg_marked(const ovl_timeline_run *runs,
                                           const ovl_timeline_marks *marks,
                                           size_t nruns, char **text,
                                           size_t *len, ovl_error *err);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_TIMELINE_H */
