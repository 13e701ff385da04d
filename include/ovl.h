/*
 * overlap-sim: run one op schedule on every device of a machine, one thread
 * per device, and check that overlapping compute with communication is both
 * right and worth it.
 *
 * Public API of libovl. Every function that can fail returns an ovl_status
 * and, where an ovl_error is passed, fills it with a message that gives the
 * context (file:line:col for schedules, rank/op/stream for runtime errors).
 * The library never prints and never exits.
 */
#ifndef OVL_H
#define OVL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OVL_VERSION_STRING "0.1.0"

/*
 * OVL_API marks every function of the API. The library is compiled with
 * -fvisibility=hidden, so that the functions its files share (ovl__*) stay
 * out of the shared library's exports; this attribute exports the API
 * again. To a program that includes this header it changes nothing.
 */
#if defined(__GNUC__) || defined(__clang__)
#define OVL_API __attribute__((visibility("default")))
#else
#define OVL_API
#endif

/* One line per error: the enum name, and the text ovl_strerror() gives. */
#define OVL_ERRNO_MAP(X)                                                     \
  X(OK, "success")                                                           \
  X(EINVAL, "invalid argument")                                              \
  X(ENOMEM, "out of memory")                                                 \
  X(EIO, "I/O error")                                                        \
  X(EPARSE, "schedule error")                                                \
  X(ENODEV, "no such backend or device")                                     \
  X(EBACKEND, "backend error")                                               \
  X(ETIMEDOUT, "timed out")                                                  \
  X(EMISMATCH, "collective mismatch across ranks")                             \
  X(EABORTED, "aborted because another rank failed")

typedef enum {
#define OVL__ERR_ENUM(name, text) OVL_##name,
  OVL_ERRNO_MAP(OVL__ERR_ENUM)
#undef OVL__ERR_ENUM
  OVL__ERR_COUNT
} ovl_status;

/* The text of a status ("success", "schedule error", ...). */
OVL_API const char *ovl_strerror(ovl_status status);
/* The name of a status ("OVL_EPARSE", ...). */
OVL_API const char *ovl_err_name(ovl_status status);

/* Where a failing call leaves its diagnostic. msg is always terminated. */
#define OVL_ERROR_MSG_MAX 1024
typedef struct ovl_error_s {
  ovl_status status;
  char msg[OVL_ERROR_MSG_MAX];
} ovl_error;

/* ------------------------------------------------------------------ */
/* Schedules: the text of a schedule, parsed.                          */
/* ------------------------------------------------------------------ */

/*
 * A schedule is a file's statements as written, checked for syntax: no
 * rank count, no backend, no -D value is involved yet. Binding it (below)
 * makes a program for a rank count, -D values and a backend's defaults.
 * A schedule is immutable: it can be bound any number of times, from any
 * threads at once, and the programs it makes do not refer to it.
 *
 * What parsing checks: the text (at most 64 MiB, no NUL byte), its tokens
 * (numbers in range, identifiers at most 255 bytes), the form of every
 * statement, the nesting of repeat blocks (balanced, at most 64 deep), op
 * names (an unknown one is an error, with a suggestion when one is
 * close), literal repeat counts, and params (declared once, at top level,
 * not named true, false, param or repeat). What binding checks is
 * everything that depends on values: see ovl_schedule_bind.
 */
typedef struct ovl_schedule_s ovl_schedule;

/* Parse schedule text of `len` bytes (text may be NULL when len is 0).
 * `filename` names it in messages ("<string>" when NULL). On success
 * *out is a new schedule (free it with ovl_schedule_free); on failure
 * *out is left alone and the status is OVL_EPARSE with the message
 * "file:line:col: message" (or "file: ..." for the whole text), OVL_EINVAL
 * for a NULL argument, or OVL_ENOMEM. The text is copied. */
OVL_API ovl_status ovl_schedule_parse(const char *text, size_t len,
                                      const char *filename, ovl_schedule **out,
                                      ovl_error *err);
/* Read and parse a schedule file; `path` names it in messages. Errors as
 * ovl_schedule_parse, and OVL_EIO ("path: reason") when it cannot be read;
 * a file over 64 MiB is refused (OVL_EPARSE) before it is read. */
OVL_API ovl_status ovl_schedule_load(const char *path, ovl_schedule **out,
                                     ovl_error *err);
OVL_API void ovl_schedule_free(ovl_schedule *s);
/* The name given to ovl_schedule_parse (or the path). */
OVL_API const char *ovl_schedule_filename(const ovl_schedule *s);
/* Params in order of declaration. */
OVL_API size_t ovl_schedule_param_count(const ovl_schedule *s);
/* Param i: its name, its default as written ("10000", "2.", "rows"), and
 * its `cpu=` default as written, or NULL when it has none. Any pointer may
 * be NULL; an index out of range gives NULLs. The strings live as long as
 * the schedule. */
OVL_API void ovl_schedule_param(const ovl_schedule *s, size_t i,
                                const char **name, const char **plain_default,
                                const char **cpu_default);

typedef struct ovl_bind_opts_s {
  /* NAME=VALUE strings that override `param` defaults (-D); each VALUE is
   * one number, bool or name, and each NAME must be a param of the
   * schedule. The last define of a name wins. */
  const char *const *defines;
  size_t ndefines;
  /* Ranks the program will run on (1..64): the shapes of c_allgather and
   * c_reducescatter outputs and the range of c_broadcast's root depend on
   * it. */
  int nranks;
  /* Non-zero: use a param's `cpu=` default where it has one (the emulated
   * backend runs smaller sizes by default). */
  int cpu_defaults;
  /* The most ops the program may have after repeat expansion, as
   * ovl_parse_opts.max_ops. */
  uint64_t max_ops;
} ovl_bind_opts;

typedef struct ovl_program_s ovl_program;

/* Bind a schedule: give its params their values (a -D, else the cpu=
 * default with cpu_defaults, else the default), replace the names of
 * params by their values, check every statement against its op's row
 * (inputs, outputs, attributes and their values, variables, shapes and
 * dtypes for `nranks` ranks, rings), expand repeat blocks and lower the
 * program. opts NULL: 2 ranks, no defines, the plain defaults, the
 * built-in op limit. On success *out is a new program; on failure *out is
 * left alone and the status is OVL_EPARSE ("file:line:col: message", or
 * "-D NAME=VALUE: ..." for a define), OVL_EINVAL (a NULL argument or
 * define, nranks out of range), or OVL_ENOMEM (out of memory, or the
 * program is longer than max_ops: "file: the program has N ops after
 * repeat expansion; the limit is M", refused before the expansion is
 * allocated). `s` is not changed. */
OVL_API ovl_status ovl_schedule_bind(const ovl_schedule *s,
                                     const ovl_bind_opts *opts,
                                     ovl_program **out, ovl_error *err);

/* ------------------------------------------------------------------ */
/* Programs: bound schedules.                                          */
/* ------------------------------------------------------------------ */

/* Element types. float16 is IEEE 754 binary16, bfloat16 the top half of
 * a float32 (8 exponent bits, 7 fraction bits). Every op on a 16-bit
 * dtype computes in float and rounds its result once, to nearest even
 * (core/elemfn.h); the reference computes in float64 and rounds to the
 * variable's dtype after every op. */
typedef enum {
  OVL_DTYPE_FLOAT32 = 0,
  OVL_DTYPE_FLOAT64 = 1,
  OVL_DTYPE_FLOAT16 = 2,
  OVL_DTYPE_BFLOAT16 = 3
} ovl_dtype;
#define OVL_DTYPE_COUNT 4

/* Byte size of one element, and the schedule spelling ("float32",
 * "float64", "float16", "bfloat16"). */
OVL_API size_t ovl_dtype_size(ovl_dtype dtype);
OVL_API const char *ovl_dtype_name(ovl_dtype dtype);
/* The dtype of a schedule spelling; 0 (and *out untouched) for another
 * name. */
OVL_API int ovl_dtype_from_name(const char *name, ovl_dtype *out);

/* Default tolerances of the numeric check for values of `dtype`
 * (|got - ref| <= atol + rtol * |ref|): float32 and float64 rtol 1e-5,
 * atol 1e-6; float16 rtol 2e-3, atol 1e-5; bfloat16 rtol 1.6e-2, atol
 * 1e-5. The 16-bit ones are about 4 units of roundoff (2^-11, 2^-8): a
 * device sums a reduction's ranks rounding at every step, in its own
 * order, where the reference rounds once, and on 8 ranks that differs by
 * more than the 2 units PyTorch's float16 default (1e-3) allows. Pass
 * OVL_TOL_DTYPE as a tolerance to ovl_check_result or the pipeline to get
 * these, per fetched variable. */
#define OVL_TOL_DTYPE (-1.0)
OVL_API double ovl_dtype_rtol(ovl_dtype dtype);
OVL_API double ovl_dtype_atol(ovl_dtype dtype);

typedef struct ovl_parse_opts_s {
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
 * trace's text grows with the length of names and of the file's path. */
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

/* ------------------------------------------------------------------ */
/* Worlds: N ranks on one backend.                                     */
/* ------------------------------------------------------------------ */

typedef struct ovl_world_s ovl_world;

/*
 * More than one process: an MPI launch (`mpirun -np P tool ...`, built
 * with `configure --with-mpi`; docs/ARCHITECTURE.md, "More than one
 * process"). Every process runs the same calls in the same order: worlds,
 * runs, pipelines and checks are collective over the processes, and every
 * process gets the same report and the same errors.
 */
typedef struct ovl_procs_s ovl_procs;

/* 1 when the library was built with MPI. */
OVL_API int ovl_mpi_compiled(void);
/* This process's index in its launch, read from the launcher's
 * environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK) before any MPI
 * call; -1 when no MPI launcher started it. */
OVL_API int ovl_launcher_rank(void);
/* Join the launch: MPI_Init_thread (MPI_THREAD_MULTIPLE) when the library
 * was built with MPI and an MPI launcher started this process; else *out
 * is NULL (one process, as without MPI) and nothing happens. */
OVL_API ovl_status ovl_procs_init(int *argc, char ***argv, ovl_procs **out,
                                  ovl_error *err);
/* This process's index (0 for NULL) and how many there are (1). */
OVL_API int ovl_procs_rank(const ovl_procs *procs);
OVL_API int ovl_procs_size(const ovl_procs *procs);
/* Every process calls it with its exit code; each gets the largest. */
OVL_API int ovl_procs_agree_exit(ovl_procs *procs, int code);
/* Leave the launch (MPI_Finalize); NULL does nothing. */
OVL_API void ovl_procs_free(ovl_procs *procs);

typedef struct ovl_world_opts_s {
  /* "auto" (cuda when a GPU is visible, else cpu), "cpu" or "cuda". */
  const char *backend;
  /* Ranks; 0 means the backend's default (cpu: 2, cuda: every GPU). */
  int nranks;
  /* Seconds a collective or a stream may stay stuck before it is an error;
   * 0 means 60. */
  double timeout_s;
  /* More than one process (ovl_procs_init): NULL for one process. The
   * world's ranks are then those of every process, each process driving
   * `local_ranks` of them (0: one), process q's from the sum of the
   * local ranks of processes 0..q-1; `nranks`, when not 0, must be that
   * sum. Every process creates its world, with the same options. */
  ovl_procs *procs;
  int local_ranks;
} ovl_world_opts;

OVL_API ovl_status ovl_world_create(const ovl_world_opts *opts, ovl_world **out,
                                    ovl_error *err);
OVL_API void ovl_world_free(ovl_world *world);

/*
 * Tune the world's backend: one key, its value as text. Only before the
 * world's first run (OVL_EINVAL after it); a key the backend does not have
 * is refused with OVL_EINVAL and a message that says which backend has it.
 *   "comm_priority"  "high" | "default"  cuda: comm streams at the highest
 *                    stream priority, so that their NCCL kernels are
 *                    scheduled before queued compute blocks
 *   "nccl_min_ctas", "nccl_max_ctas"  N >= 0  cuda: NCCL's CTA limits
 *                    (ncclConfig_t minCTAs / maxCTAs; 0 = NCCL's choice).
 *                    Either one makes the communicators with
 *                    ncclCommInitRankConfig in one group instead of
 *                    ncclCommInitAll. Both set: min <= max.
 *   "tf32"           "on" | "off"  cuda: float32 matmul_v2 on TF32 tensor
 *                    cores (cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32: inputs cut
 *                    to 10 mantissa bits, float32 sums: several times
 *                    faster, and about 1e-3 off, which float32's default
 *                    tolerance does not pass). Default off: full float32
 *                    products (CUBLAS_COMPUTE_32F). bfloat16 and float16
 *                    use tensor cores either way; float64 is float64.
 *   "chaos_seed"     N >= 0  cpu: 0 = off; otherwise every stream worker
 *                    sleeps a pseudo-random 0..2 ms (mostly short, now and
 *                    then long) before each command it runs, so that
 *                    streams interleave in ways a plain run never shows and
 *                    a missing wait gives wrong numbers. The delays of each
 *                    (rank, stream) are one fixed sequence per seed.
 * Call from the thread that made the world. */
OVL_API ovl_status ovl_world_set(ovl_world *world, const char *key,
                                 const char *value, ovl_error *err);

OVL_API const char *ovl_world_backend_name(const ovl_world *world);
OVL_API int ovl_world_nranks(const ovl_world *world);
/* One line describing the devices ("2 x NVIDIA H200", "2 emulated"). */
OVL_API const char *ovl_world_devices(const ovl_world *world);
/* The device of one rank ("NVIDIA H200", "emulated (cpu)"); NULL if `rank`
 * is out of range. */
OVL_API const char *ovl_world_device_name(const ovl_world *world, int rank);
/* Whether the world's backend can run programs as graphs
 * (ovl_run_opts.graph): cuda yes, cpu no. */
OVL_API int ovl_world_has_graphs(const ovl_world *world);

/* The machine a world runs on, for reports. Strings are always terminated;
 * what does not apply to the backend is "n/a", what could not be found out
 * "unknown". */
typedef struct ovl_world_info_s {
  char hostname[256];
  char cpu_model[256];      /* /proc/cpuinfo "model name" */
  char driver_version[32];  /* cuda: the CUDA driver's version, "13.0" */
  char runtime_version[32]; /* cuda: the CUDA runtime's version, "13.0" */
  char nccl_version[32];    /* cuda: "2.28.9" */
} ovl_world_info;
/* Fill `info` (never fails; call from the thread that made the world). */
OVL_API void ovl_world_info_get(const ovl_world *world, ovl_world_info *info);

/* How many backends were compiled in, and whether `name` is one of them. */
OVL_API int ovl_backend_available(const char *name);

typedef struct ovl_run_opts_s {
  int iters;  /* timed iterations */
  int warmup; /* untimed iterations before them */
  /* Time every stream op on its stream (device timers around each op; off
   * by default, so that it does not perturb what it measures). */
  int op_times;
  /* Non-zero: record the timeline of one timed iteration (when every op
   * started and ended; see ovl_result_span). Off by default, for the same
   * reason. */
  int trace;
  /* The timed iteration traced, 0-based; a negative value counts from the
   * end (-1: the last). Out of range is an error. */
  int trace_iter;
  /*
   * Non-zero: run as graphs (CUDA graphs; the cpu backend has none and the
   * run is refused with OVL_EINVAL: ovl_world_has_graphs). Each rank
   * captures one iteration of its ops once, before the first iteration, and
   * every iteration (warmup included) replays it: the host enqueues a
   * launch instead of every kernel and collective. The host syncs (fetch,
   * c_sync_calc_stream, c_sync_comm_stream, stream_sync, barrier's) split
   * the iteration into segments, one graph each, replayed in order with the
   * host's primitive between them. A segment runs as one unit: a host sync
   * after it waits for all of its work, on every stream (eager, it waits
   * for its stream only), and a wait for an event recorded in an earlier
   * segment or iteration does nothing (that record has completed). The
   * fetched values come from the replays. Op times and the trace are
   * measured by timers recorded inside the graphs. A timeout's flight
   * record counts a segment's calls completed once a host sync after it
   * returned.
   */
  int graph;
} ovl_run_opts;

typedef struct ovl_result_s ovl_result;

/* Run `prog` on every rank: warmup + iters iterations. The program must have
 * been bound for ovl_world_nranks(world) ranks. */
OVL_API ovl_status ovl_world_run(ovl_world *world, const ovl_program *prog,
                                 const ovl_run_opts *opts, ovl_result **out,
                                 ovl_error *err);
OVL_API void ovl_result_free(ovl_result *res);

/* Seconds of each timed iteration (host clock, barrier before and after). */
OVL_API int ovl_result_iters(const ovl_result *res);
OVL_API const double *ovl_result_times(const ovl_result *res);
/* The last fetched value of fetched variable `i` on `rank`, converted to
 * double; NULL if it was never fetched. numel as in ovl_program_fetch_info. */
OVL_API const double *ovl_result_fetched(const ovl_result *res, int rank,
                                         size_t i);

/* The machine the run ran on, copied from its world when it ran: its rank
 * count, the backend's name ("cpu"), the line describing the devices ("2
 * emulated (cpu)", as ovl_world_devices) and the device of each rank (NULL
 * for a rank out of range). The strings live as long as `res`. */
OVL_API int ovl_result_nranks(const ovl_result *res);
OVL_API const char *ovl_result_backend(const ovl_result *res);
OVL_API const char *ovl_result_devices(const ovl_result *res);
OVL_API const char *ovl_result_device_name(const ovl_result *res, int rank);

/* With op_times: the seconds op `i` of the run's program took on its
 * stream on `rank`, summed over the timed iterations (0 for host ops);
 * NULL when the run did not time its ops. */
OVL_API const double *ovl_result_op_times(const ovl_result *res, int rank);

/*
 * With trace: the timeline of the traced iteration. Each rank has a base,
 * a timer mark enqueued on its calc stream right after the iteration's
 * start barrier (its streams are idle then); the host notes its clock when
 * it enqueues it. Stream ops are bracketed by timer marks on their stream
 * (cuda: timing events, read with cudaEventElapsedTime from the base, which
 * works across the streams of one device; cpu: the host clock when the
 * stream's worker reaches the mark); host ops (fetch, the syncs) by the host
 * clock, from the base's host time.
 */
/* The timed iteration traced (0-based), or -1 when the run made no trace. */
OVL_API int ovl_result_trace_iter(const ovl_result *res);
/* Where op `op` ran on `rank`, in seconds from the rank's base: on its
 * stream, or on the host for host ops; for c_wait_compute and c_wait_comm
 * the wait on the waiting stream (comm[R], calc), which lasts as long as
 * that stream stalled. Returns 0, or -1 when the run made no trace or an
 * argument is out of range. */
OVL_API int ovl_result_span(const ovl_result *res, int rank, size_t op,
                            double *start, double *end);
/* The event record of c_wait_compute (on calc) or c_wait_comm (on
 * comm[R]), as ovl_result_span; -1 for every other op. */
OVL_API int ovl_result_record_span(const ovl_result *res, int rank, size_t op,
                                   double *start, double *end);
/* The host clock (seconds, CLOCK_MONOTONIC) when `rank`'s base was
 * enqueued: add it to a span to line ranks up. NaN without a trace. */
OVL_API double ovl_result_trace_base(const ovl_result *res, int rank);

/* One op of a program: its name, source position and the stream its work
 * (a kernel, a collective or a delay) runs on: 0 = calc, 1 + R = comm
 * stream of ring R; -1 for an op that does no work on a stream (host ops,
 * event records and waits, syncs), and so has no op time. An index out of
 * range gives NULL, 0 and -1. */
OVL_API void ovl_program_op(const ovl_program *prog, size_t i,
                            const char **name, int *line, int *stream);

/* ------------------------------------------------------------------ */
/* Reference and numeric check.                                        */
/* ------------------------------------------------------------------ */

typedef struct ovl_reference_s ovl_reference;

/* Interpret `prog` sequentially in float64 for `nranks` ranks (its own rank
 * count): each rank in its program order, ranks meeting at communication
 * as NCCL matches it (README, "Ranks that differ"). OVL_EMISMATCH, with
 * the first disagreement named, for a program whose ranks disagree on the
 * matching or cannot all complete. */
OVL_API ovl_status ovl_reference_compute(const ovl_program *prog, int nranks,
                                         ovl_reference **out, ovl_error *err);
/*
 * Sampled rows (README, "Checking matrix multiplies"). A fetched variable
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

/* ------------------------------------------------------------------ */
/* Race check: happens-before over the ops as they are enqueued.       */
/* ------------------------------------------------------------------ */

/*
 * Per rank, the calc stream, one comm stream per ring and the host each
 * carry a vector clock. An op enqueued on a stream is ordered after
 * everything the host has observed; event records snapshot the recording
 * stream (a new record replaces the old one), waits join the snapshot (a
 * never-recorded event adds nothing), host syncs join the stream into the
 * host; fetch syncs calc only, then reads on the host. Compute ops and
 * collectives read their inputs and write their output on their stream (a
 * variable an op both reads and writes is one access, a write); inputs
 * (data) are written before anything. A read races with the last write not
 * ordered before it; a write with the last write and every read since it
 * not ordered before it. One iteration is checked; nothing runs.
 *
 * Every rank runs the same program, so the analysis is done once and each
 * race is listed with all ranks. A race is identified by source position
 * (variable, both ops' line:col, streams, read/write): one inside a repeat
 * block is listed once, with its number of occurrences.
 */
typedef struct ovl_races_s ovl_races;

/* At most this many races are listed; unordered pairs beyond them are only
 * counted (ovl_races_more). */
#define OVL_RACES_LIST_MAX 10000

/* One access of a race. */
typedef struct ovl_race_access_s {
  size_t op;           /* index in the program (first occurrence) */
  const char *op_name; /* "scale", "c_allreduce_sum", "fetch", ... */
  int line, col;       /* source position of the op */
  int stream;          /* as ovl_program_op: 0 calc, 1 + R comm[R], -1 host */
  const char *stream_name; /* "calc", "comm[0]", "side" or "host" */
  int write;           /* 1: write, 0: read */
} ovl_race_access;

typedef struct ovl_race_info_s {
  const char *var;        /* the variable */
  ovl_race_access first;  /* the earlier access in program order */
  ovl_race_access second; /* the later one, not ordered after `first` */
  /* The fix: an edit of the schedule's text, in one form,
   *   insert STATEMENT before line N
   *   insert STATEMENT and STATEMENT before line N
   * (each STATEMENT one line of the language, ending with ')'; inserted in
   * that order as new lines just before line N of the file as it is), e.g.
   * "insert c_wait_compute(c, ring_id=0) before line 14". It names ops that
   * the form that raced has (the sync form has no c_wait_compute or
   * c_wait_comm), and puts them at the latest point that orders the two
   * accesses: just before the second, or before the `repeat` of each
   * block around the second access that does not hold the first in the
   * same iteration (a wait after a loop, not in it; a race from one
   * iteration to the next keeps it in the loop). */
  const char *fix;
  /* NULL, or why the second access is unordered where the schedule seems
   * to order it: "line 7 waits on event 'e', which was never recorded, so
   * it does not wait". */
  const char *note;
  uint64_t occurrences;   /* times the pair occurs in the expanded program */
  int nranks;             /* the ranks the race is on */
  const int *ranks;
  /* 1: the fix was applied to the schedule's text and the form re-checked
   * (ovl_races_check_fixes): this race is gone and no race appeared that
   * was not there before. 0: it was not, and fix_why says why: "no
   * candidate removed the race (N tried)", "not checked: ..." (`fix` is
   * then the first candidate). */
  int fix_checked;
  const char *fix_why; /* NULL when fix_checked */
} ovl_race_info;

/* Check `prog` (as given: transform it first for another mode). On success
 * *out holds the races found (maybe none); free it with ovl_races_free. The
 * result does not refer to `prog`. Each race's fix is its first candidate,
 * not re-checked (fix_why "not checked: no schedule given"):
 * ovl_races_check_fixes re-checks them. */
OVL_API ovl_status ovl_race_check(const ovl_program *prog, ovl_races **out,
                                  ovl_error *err);
/*
 * Re-check the fix of every race of `r`, the report of ovl_race_check on
 * `form`, which is a form (ovl_program_transform, or the program itself
 * for the schedule as written) of the program that `s` binds to with
 * `opts` (NULL: as ovl_schedule_bind's). For each race, its candidates in
 * order of preference (Paddle's wait op where the form has it, then an
 * event_record + stream_wait_event pair; for a fetch, a host sync of the
 * stream; at the latest point, then just before the second access): the
 * edit is applied to a copy of the text, which is parsed, bound with
 * `opts`, transformed into the form and race-checked; the first with this
 * race gone and no new race is the fix (fix_checked 1). An edit that does
 * not parse or bind does not count. An edit tried for one race is not
 * tried again for another.
 *
 * The work is bounded: at most about 16 million units (an op of the edited
 * program, or 4 bytes of its text) of re-checking for one report; races
 * left when it is spent keep their first candidate with fix_why "not
 * checked: the re-check budget is spent", and a report with more races
 * than it lists (ovl_races_more) is not re-checked ("not checked: more
 * races than are listed"). Memory at once: the copy of the text, its
 * schedule and program, and a race check's state. Errors: OVL_EINVAL (a
 * NULL argument, or `r` is not a report of `form`), OVL_ENOMEM; `r` keeps
 * its hints.
 */
OVL_API ovl_status ovl_races_check_fixes(ovl_races *r, const ovl_program *form,
                                         const ovl_schedule *s,
                                         const ovl_bind_opts *opts,
                                         ovl_error *err);
/* Races listed, sorted by (line of the first op, line of the second op,
 * variable). */
OVL_API size_t ovl_races_count(const ovl_races *r);
/* Unordered pairs found beyond the first OVL_RACES_LIST_MAX races. */
OVL_API uint64_t ovl_races_more(const ovl_races *r);
/* Ops checked. */
OVL_API size_t ovl_races_ops(const ovl_races *r);
/* Race i (0-based); returns 0, or -1 if i is out of range. The strings and
 * the rank list live as long as `r`. */
OVL_API int ovl_races_get(const ovl_races *r, size_t i, ovl_race_info *info);
/* The report as text (json == 0) or JSON; *text is malloc'd, free() it.
 * `prog` gives the schedule's file name. Text, per race:
 *   race 1: 'c' on ranks 0-1
 *     write  scale            file.sched:15  calc
 *     write  c_allreduce_sum  file.sched:16  comm[0]
 *     fix (checked): insert c_wait_compute(c, ring_id=0) before line 16
 * ("fix (unchecked): FIX (WHY)" when it was not re-checked or no candidate
 * removed the race), then "N race(s) in FILE (N ranks)", or "no races in
 * FILE (N ops checked)".
 * JSON: {"schedule", "ranks", "ops", "races": [{"var", "ranks": [...],
 * "first": {"line", "col", "op", "stream", "access"}, "second", "fix",
 * "fix_checked", "fix_why", "note", "occurrences"}], "count", "more"}. */
OVL_API ovl_status ovl_races_format(const ovl_races *r, const ovl_program *prog,
                                    int json, char **text, ovl_error *err);
OVL_API void ovl_races_free(ovl_races *r);

/* ------------------------------------------------------------------ */
/* Mismatches: ranks that disagree on a communicator (DESIGN 2.4 #2).   */
/* ------------------------------------------------------------------ */

/*
 * Per ring, each rank's communication in program order (the order its host
 * enqueues it), matched across ranks as NCCL matches it:
 *   - the k-th collective a rank issues on ring R meets the k-th of every
 *     other rank (every rank is in every communicator);
 *   - the j-th send_v2 from rank a to rank b on ring R meets the j-th
 *     recv_v2 on b from a on ring R.
 * A mismatch: the k-th collective of ring R differs between ranks in op,
 * reduction, count, dtype, root or variable, or a rank never issues it; a
 * send with no matching receive, or a receive with no matching send; a
 * matched send and receive that differ in count or dtype. Mismatches of the
 * same size do not hang: they silently mix buffers; they are reported too.
 * A mismatch is identified by source position (the ring, and each rank's
 * op): one inside a repeat block is listed once, with its number of
 * occurrences. Every form that keeps the communication has the same
 * mismatches (the forms move it between streams or drop it all), so the
 * pipeline checks the program as bound. An SPMD program (no ranks=, no
 * rank-dependent attribute, no point-to-point) has none, found in O(1).
 */
typedef struct ovl_mismatches_s ovl_mismatches;

/* At most this many mismatches (and deadlocks) are listed; more are only
 * counted (ovl_mismatches_more). */
#define OVL_FINDINGS_LIST_MAX 1000

typedef enum {
  /* The k-th collective of the ring differs, or a rank never issues it. */
  OVL_MISMATCH_COLLECTIVE = 0,
  /* A send_v2 whose receiver never posts the matching recv_v2. */
  OVL_MISMATCH_UNMATCHED_SEND,
  /* A recv_v2 whose sender never issues the matching send_v2. */
  OVL_MISMATCH_UNMATCHED_RECV,
  /* A matched send_v2 / recv_v2 pair whose count or dtype differ. */
  OVL_MISMATCH_PAIR
} ovl_mismatch_kind;

/* What differs (ovl_mismatch_finding.differs), relative to the first rank
 * that issues the op. */
enum {
  OVL_DIFFERS_OP = 1u << 0,      /* another collective (allreduce, ...) */
  OVL_DIFFERS_REDOP = 1u << 1,   /* another reduction (sum, max, ...) */
  OVL_DIFFERS_COUNT = 1u << 2,   /* element count, as NCCL is called */
  OVL_DIFFERS_DTYPE = 1u << 3,
  OVL_DIFFERS_ROOT = 1u << 4,
  OVL_DIFFERS_VAR = 1u << 5,     /* another variable, same everything else */
  OVL_DIFFERS_MISSING = 1u << 6  /* a rank never issues it */
};

/* What one rank does at a mismatch. */
typedef struct ovl_mismatch_side_s {
  int rank;
  /* 0: the rank never issues it (the fields below are 0 / NULL / -1). */
  int issues;
  size_t op;           /* index in the program (first occurrence) */
  const char *op_name; /* "c_allreduce_sum", "send_v2", ... */
  int line, col;
  const char *var;     /* the input's variable (NULL: none) */
  const char *out_var; /* the output's (NULL: none) */
  ovl_dtype dtype;
  int64_t count;       /* elements, as NCCL is called */
  int root;            /* -1: the op has none */
  int peer;            /* send_v2 / recv_v2: the other rank; else -1 */
  int stream;          /* where it runs, as ovl_program_op */
  /* Its tag: 1 + its number among the rank's comm ops on the ring (one
   * iteration), as the flight record numbers them. 0: never issued. */
  uint64_t tag;
} ovl_mismatch_side;

typedef struct ovl_mismatch_finding_s {
  ovl_mismatch_kind kind;
  int ring;
  /* Collective: k (1-based: collective #k of the ring); point-to-point: j
   * (1-based: the j-th send from `sender` to `receiver` on the ring). Of
   * the first occurrence. */
  uint64_t index;
  int sender, receiver; /* point-to-point; -1 for a collective */
  unsigned differs;     /* OVL_DIFFERS_* */
  /* 1: every rank that issues it moves the same number of bytes (the run
   * would not hang; it would mix buffers silently). */
  int same_size;
  /* Collective: one side per rank, in rank order; point-to-point: the
   * sender's side, then the receiver's. */
  int nsides;
  const ovl_mismatch_side *sides;
  uint64_t occurrences; /* times it occurs in the expanded program */
  uint64_t ranks;       /* bit r: rank r takes part in some occurrence */
  /* One line: "ring 0 collective #3: rank 0 issues c_allreduce_sum of 'g'
   * (float32, 100 elements) at f.sched:12:3, rank 1 issues c_broadcast of
   * 'g' (float32, 100 elements, root 0) at f.sched:14:3; they differ in op
   * and root". */
  const char *message;
} ovl_mismatch_finding;

/* Check `prog` (lowered: as bound, or a form). On success *out holds the
 * mismatches (maybe none); free it with ovl_mismatches_free. The result
 * does not refer to `prog`. Time: O(ops + comm ops x ranks). */
OVL_API ovl_status ovl_mismatch_check(const ovl_program *prog,
                                      ovl_mismatches **out, ovl_error *err);
/* Mismatches listed, in order of ring, then first occurrence. */
OVL_API size_t ovl_mismatches_count(const ovl_mismatches *m);
/* Occurrences of mismatches not listed (beyond OVL_FINDINGS_LIST_MAX). */
OVL_API uint64_t ovl_mismatches_more(const ovl_mismatches *m);
/* Mismatch i (0-based); returns 0, or -1 (info zeroed) if i is out of
 * range. Strings and sides live as long as `m`. */
OVL_API int ovl_mismatches_get(const ovl_mismatches *m, size_t i,
                               ovl_mismatch_finding *info);
/* The report as text (json == 0) or JSON; *text is malloc'd. Text:
 *   mismatch 1: ring 0 collective #3: rank 0 issues ... (4 times in the
 *   expanded program)
 *   1 mismatch in FILE (2 ranks)
 * or "no mismatches in FILE (2 ranks, N comm ops checked)". JSON:
 * {"schedule", "ranks", "mismatches": [{"kind": "collective" |
 * "unmatched_send" | "unmatched_recv" | "pair", "ring", "index",
 * "sender", "receiver", "differs": ["op", ...], "same_size", "sides":
 * [{"rank", "issues", "op", "line", "col", "var", "out_var", "dtype",
 * "count", "root", "peer", "stream", "tag"}], "occurrences", "ranks":
 * [...], "message"}], "count", "more"}. */
OVL_API ovl_status ovl_mismatches_format(const ovl_mismatches *m,
                                         const ovl_program *prog, int json,
                                         char **text, ovl_error *err);
OVL_API void ovl_mismatches_free(ovl_mismatches *m);

/* ------------------------------------------------------------------ */
/* Deadlocks: an abstract execution of every rank (DESIGN 2.4 #3).      */
/* ------------------------------------------------------------------ */

/*
 * One iteration of the lowered program on every rank, with no timing: per
 * rank the host enqueues the primitives of the ops that run there in
 * program order and blocks only at host syncs (c_sync_calc_stream,
 * c_sync_comm_stream, stream_sync, fetch's sync of calc, barrier's) until
 * that stream is drained; each stream runs its primitives in order:
 * kernels and delays complete; a record snapshots its stream; a wait
 * blocks until the recording stream has passed the record it captured
 * (the last record of the event enqueued before the wait, host order; a
 * never-recorded event does not wait); a collective blocks until every
 * rank has its k-th collective of the ring at the head of one of its
 * streams; an ungrouped send_v2 / recv_v2 blocks until its partner is at
 * the head of a stream; the items of a group are posted together when the
 * group reaches the head of its stream (the host has enqueued all of
 * them), each completes when its partner is posted, and the stream moves
 * on when all did. Collectives meet by position alone (a mismatch in what
 * they move is a mismatch, not a deadlock).
 *
 * If the execution ends with something blocked, the participants (each
 * rank's host and streams) and what each waits for form a graph; each of
 * its cycles is a deadlock, reported as the cycle. Blocked participants
 * that wait on no cycle wait for a comm op some rank never issues: that is
 * a mismatch (ovl_mismatch_check), not reported again here. Time: linear
 * in primitives x ranks. An SPMD program cannot deadlock (every rank does
 * the same, so every collective meets), found in O(1).
 */
typedef struct ovl_deadlocks_s ovl_deadlocks;

/* One participant of a cycle: what it is blocked at, and whom it waits
 * for (the next step; the last step waits for the first). */
typedef struct ovl_deadlock_step_s {
  int rank;
  int stream;              /* as ovl_program_op; -1: the host */
  const char *stream_name; /* "calc", "comm[0]", "side", "host" */
  size_t op;               /* the op it is blocked at (program index) */
  const char *op_name;
  int line, col;
  int ring;                /* the op's ring; -1 when it has none */
  /* A collective: its number on the ring (1-based); else 0. */
  uint64_t coll_index;
  /* A send_v2 / recv_v2: the other rank; else -1. In a group: 1. */
  int peer;
  int in_group;
} ovl_deadlock_step;

typedef struct ovl_deadlock_finding_s {
  size_t nsteps;
  const ovl_deadlock_step *steps; /* step i waits for step (i+1) % nsteps */
  uint64_t occurrences; /* cycles alike (same steps but the ranks) */
  /* "deadlock: rank 0 calc waits at line 5 (c_allreduce_sum, ring 0
   * collective #1) for rank 1, whose calc is blocked at line 6
   * (c_allreduce_sum, ring 1 collective #1) waiting for rank 0 calc". */
  const char *message;
} ovl_deadlock_finding;

/* Check `prog` (lowered: a form, or as bound). On success *out holds the
 * deadlocks (maybe none); free it with ovl_deadlocks_free. The result does
 * not refer to `prog`. */
OVL_API ovl_status ovl_deadlock_check(const ovl_program *prog,
                                      ovl_deadlocks **out, ovl_error *err);
OVL_API size_t ovl_deadlocks_count(const ovl_deadlocks *d);
OVL_API uint64_t ovl_deadlocks_more(const ovl_deadlocks *d);
/* Participants (hosts and streams of all ranks) left blocked at the end,
 * whether on a cycle or behind a mismatch; 0 when every rank finished. */
OVL_API uint64_t ovl_deadlocks_blocked(const ovl_deadlocks *d);
OVL_API int ovl_deadlocks_get(const ovl_deadlocks *d, size_t i,
                              ovl_deadlock_finding *info);
/* Text: "deadlock 1: rank 0 calc waits ...", then "1 deadlock in FILE (2
 * ranks)" or "no deadlocks in FILE (2 ranks)". JSON: {"schedule",
 * "ranks", "deadlocks": [{"steps": [{"rank", "stream", "op", "line",
 * "col", "ring", "coll_index", "peer", "in_group"}], "occurrences",
 * "message"}], "count", "more", "blocked"}. */
OVL_API ovl_status ovl_deadlocks_format(const ovl_deadlocks *d,
                                        const ovl_program *prog, int json,
                                        char **text, ovl_error *err);
OVL_API void ovl_deadlocks_free(ovl_deadlocks *d);

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
   * pipeline. */
  OVL_PIPELINE_CHECKED = 0,
  /* The reference is ready (where needed); the runs start. */
  OVL_PIPELINE_READY,
  /* Mode `i` of the report has run and been compared: its
   * ovl_report_mode_get is complete (for the trial under way,
   * ovl_report_trial_count - 1). */
  OVL_PIPELINE_RAN
} ovl_pipeline_event;

typedef struct ovl_pipeline_opts_s {
  /* OVL_MODE_BIT of each mode asked (run in the order sync, async, comp,
   * comm, whatever the bits' order). */
  unsigned modes;
  /* Non-zero: check each mode's form (races, deadlocks) and the program
   * (mismatches) before anything runs. */
  int races;
  /* Non-zero: run each form on the world and compare; 0: check only (the
   * world may be NULL; nothing is run, no reference computed). */
  int run;
  ovl_run_opts run_opts;
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
  /* Races found, every form (listed and only counted). */
  uint64_t races;
  /* Mismatches across ranks (ovl_mismatch_check: collectives, sends and
   * receives; not elements out of tolerance, which `mismatched` counts),
   * listed and only counted; deadlocks, every form. */
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
 * The report as the results JSON of tools/overlap_sim --json=FILE (README,
 * "JSON results"): "tool", "version", "schedule", "machine", "options",
 * "modes" (per mode: times, "check", "races", "deadlocks", and with op
 * times "op_times"; the last trial's), "mismatches", "not_run", "speedup",
 * "ideal_speedup", "overlap_efficiency" (medians over the trials),
 * "trials" (every figure over the trials, and each trial), "result",
 * "exit_status". A report the checks stopped (ovl_report_not_run) has null
 * times, an empty "iter_s" and "check" "n/a" in every mode, and "not_run"
 * says why (else null). The
 * "options" object echoes the caller's options, given here; the report
 * gives the rest. Valid UTF-8 whatever the bytes of a path or a name.
 */
typedef struct ovl_report_json_opts_s {
  const char *tool;            /* "overlap_sim" */
  const char *mode;            /* as asked: "both", "all", "sync", ... */
  int iters, warmup;           /* iterations in all, the untimed ones */
  double rtol, atol;           /* OVL_TOL_DTYPE: null (per dtype) */
  double timeout_s;
  int races;                   /* the race check ran */
  int op_times;                /* also writes each mode's "op_times" */
  int graph;                   /* the runs were graphs (ovl_run_opts) */
  unsigned chaos_seed;
  const char *comm_priority;   /* "high" or "default" */
  int nccl_min_ctas, nccl_max_ctas;
  int trials;                  /* the trials asked; 0: the default (null) */
  const char *tf32;            /* "on" or "off" (NULL: "off") */
  int64_t check_rows;          /* as ovl_pipeline_opts.check_rows */
  const char *trace, *svg;     /* the files, or NULL (null) */
  int trace_iter;              /* the timed iteration traced; < 0: null */
  const char *const *defines;  /* -D NAME=VALUE, as given */
  size_t ndefines;
  int exit_status;             /* the caller's exit status */
} ovl_report_json_opts;
OVL_API ovl_status ovl_report_json(const ovl_report *r,
                                   const ovl_report_json_opts *opts,
                                   char **text, size_t *len, ovl_error *err);
/* The check reports of every mode of a report, as JSON (what
 * tools/overlap_sim --races --json writes), each under its form's name,
 * one alone too: {"modes": {"sync": REPORT, "async": REPORT}, "deadlocks":
 * {"sync": DEADLOCKS, "async": DEADLOCKS}, "mismatches": MISMATCHES} and
 * "\n", REPORT as ovl_races_format gives it, DEADLOCKS as
 * ovl_deadlocks_format, MISMATCHES as ovl_mismatches_format (null where
 * not checked). The report must have been made with the checks. A report
 * made with the replay has one more key, "replay" (what --replay --json
 * writes; README, "Finding ordering bugs"). *text is malloc'd (free()
 * it). */
OVL_API ovl_status ovl_report_races_json(const ovl_report *r, char **text,
                                         size_t *len, ovl_error *err);

#ifdef __cplusplus
}
#endif

#endif /* OVL_H */
