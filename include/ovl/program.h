/*
 * Programs: schedules bound for a rank count, their forms (modes) and
 * what tools and tests read of them.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_PROGRAM_H
#define OVL_PUBLIC_PROGRAM_H

#include "ovl/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Programs: bound schedules.                                          */
/* ------------------------------------------------------------------ */

typedef struct ovl_program_s ovl_program;

typedef struct ovl_parse_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* NAME=VALUE strings that override `param` defaults (-D). */
  const char *const *defines;
  size_t ndefines;
  /* Ranks the program will run on: the shapes of c_allgather and
   * c_reducescatter outputs depend on it. */
  int nranks;
  /* Non-zero: use a param's `cpu=` default where it has one (the emulated
   * backend runs smaller sizes by default). */
  int cpu_defaults;
  /* The most ops the program may have after repeat expansion; 0 means the
   * built-in limit (16777216), which also caps larger values. A longer
   * program is refused with OVL_ENOMEM and the message "FILE: the program
   * has N ops after repeat expansion; the limit is M", before anything is
   * allocated for the expansion: a caller with a memory budget (see
   * ovl_host_bytes_per_op) refuses a short schedule of many ops at once
   * instead of after building it. */
  uint64_t max_ops;
} ovl_parse_opts;

/* Parse and bind in one call: ovl_schedule_parse, then ovl_schedule_bind
 * with the same options (opts NULL: as for ovl_schedule_bind), then the
 * schedule is freed. `filename` is used in diagnostics only. The errors
 * are theirs, in this order: a NULL argument or nranks out of range, the
 * text, a malformed -D, a -D that names no param (reported before the
 * schedule's own errors when the text has no lexical error: it is a
 * mistake in the command), then the schedule's errors: syntax first, then
 * values, then the op limit. */
OVL_API ovl_status ovl_program_parse(const char *text, size_t len,
                                     const char *filename,
                                     const ovl_parse_opts *opts,
                                     ovl_program **out, ovl_error *err);
/* Read a schedule file, then as ovl_program_parse (errors as
 * ovl_schedule_load's and ovl_program_parse's). */
OVL_API ovl_status ovl_program_load(const char *path,
                                    const ovl_parse_opts *opts,
                                    ovl_program **out, ovl_error *err);
OVL_API void ovl_program_free(ovl_program *prog);

typedef enum {
  OVL_MODE_ASYNC = 0, /* the schedule as written */
  OVL_MODE_SYNC,      /* collectives on the calc stream, wait ops removed */
  OVL_MODE_COMP,      /* collectives removed */
  OVL_MODE_COMM,      /* compute ops removed */
  OVL__MODE_COUNT
} ovl_mode;

OVL_API const char *ovl_mode_name(ovl_mode mode);
/* Derive a new program; `prog` is not changed. */
OVL_API ovl_status ovl_program_transform(const ovl_program *prog, ovl_mode mode,
                                         ovl_program **out, ovl_error *err);

/* Introspection used by tools and tests. */
OVL_API const char *ovl_program_filename(const ovl_program *prog);
OVL_API size_t ovl_program_op_count(const ovl_program *prog);
OVL_API int ovl_program_ring_count(const ovl_program *prog);
/* Streams of every rank: calc (0), a comm stream per ring named (1 + R),
 * then the user streams (stream=NAME) in order of first use; and a
 * stream's name ("calc", "comm[0]", "side"; "host" for -1 or a number out
 * of range). */
OVL_API int ovl_program_stream_count(const ovl_program *prog);
OVL_API const char *ovl_program_stream_name(const ovl_program *prog,
                                            int stream);
OVL_API int ovl_program_nranks(const ovl_program *prog);
/* Params as finally bound: name and value as text ("10000"), and whether the
 * value came from a -D define, the `cpu=` default or the plain default. */
typedef enum {
  OVL_PARAM_DEFAULT = 0,
  OVL_PARAM_CPU_DEFAULT,
  OVL_PARAM_DEFINED
} ovl_param_origin;
OVL_API size_t ovl_program_param_count(const ovl_program *prog);
/* An index out of range gives NULLs (origin: OVL_PARAM_DEFAULT). */
OVL_API void ovl_program_param(const ovl_program *prog, size_t i,
                               const char **name, const char **value,
                               const char **plain_default,
                               ovl_param_origin *origin);
/* Total bytes of all variables on one rank. */
OVL_API uint64_t ovl_program_bytes_per_rank(const ovl_program *prog);
/* Total elements of all variables on one rank (the float64 reference keeps
 * 8 bytes of each, for every rank). Both sums saturate at UINT64_MAX. */
OVL_API uint64_t ovl_program_numel_per_rank(const ovl_program *prog);

/*
 * Host memory per op: what a program's ops cost in host memory through
 * the life a caller gives it, for a check before anything is allocated
 * (tools/overlap_sim refuses what does not fit). It depends on the run,
 * not on the program, so it can set ovl_parse_opts.max_ops (or
 * ovl_bind_opts.max_ops) before parsing.
 */
typedef struct ovl_op_memory_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* Programs derived with ovl_program_transform and kept, besides the
   * parsed one: each holds a copy of the op list. */
  int nmodes;
  /* Each of them is race-checked (ovl_race_check). */
  int race_check;
  /* And the races' fixes re-checked (ovl_races_check_fixes): one more
   * program at a time. */
  int fix_check;
  /* Each is run on this many ranks (ovl_world_run) and its result kept;
   * 0 when nothing runs. */
  int nranks;
  /* The world's backend ("cpu", "cuda"): the cpu backend queues every
   * command in host memory until its stream runs it. NULL or unknown: the
   * costliest compiled in. */
  const char *backend;
  /* The runs' ovl_run_opts.op_times and .trace. */
  int op_times, trace;
  /* The timelines made from the runs: ovl_timeline_trace, and
   * ovl_timeline_svg. */
  int trace_text, svg;
} ovl_op_memory_opts;

/* Host bytes per op of the program's life that `opts` describes: its op
 * list and one per derived program, the race checker's state, and per rank
 * the commands the backend queues (at most a whole iteration: the host may
 * enqueue that far ahead of a slow stream), the timer marks, the results'
 * op times and spans, and per rank and run the timeline's slices and text.
 * The parts are summed (memory freed between the phases is not always
 * given back to the system); measured with glibc on x86-64 for short
 * names, it is an upper estimate for runs whose streams keep up, and a
 * trace's text grows with the length of names and of the file's path.
 * NULL: the program's op list alone; a struct whose size is not set
 * (OVL_OPTS_INIT): UINT64_MAX, which fits nowhere. */
OVL_API uint64_t ovl_host_bytes_per_op(const ovl_op_memory_opts *opts);

/* Fetched variables (in order of first fetch). */
OVL_API size_t ovl_program_fetch_count(const ovl_program *prog);
typedef struct ovl_var_info_s {
  const char *name;
  ovl_dtype dtype;
  int ndim;
  const int64_t *dims;
  int64_t numel;
} ovl_var_info;
/* An index out of range leaves `info` zeroed (name NULL). */
OVL_API void ovl_program_fetch_info(const ovl_program *prog, size_t i,
                                    ovl_var_info *info);
/* Element `flat` (row-major) of a variable as its index in each
 * dimension, "[3,17]", in buf (always terminated, cut where it does not
 * fit). */
OVL_API void ovl_var_index_text(const ovl_var_info *v, int64_t flat, char *buf,
                                size_t len);

/* One op of a program: its name, source position and the stream its work
 * (a kernel, a collective or a delay) runs on: 0 = calc, 1 + R = comm
 * stream of ring R; -1 for an op that does no work on a stream (host ops,
 * event records and waits, syncs), and so has no op time. An index out of
 * range gives NULL, 0 and -1. */
OVL_API void ovl_program_op(const ovl_program *prog, size_t i,
                            const char **name, int *line, int *stream);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_PROGRAM_H */
