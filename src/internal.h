/*
 * Internal interfaces of libovl: the program representation, the op table
 * and the backend seam. Nothing here is installed.
 */
#ifndef OVL_INTERNAL_H
#define OVL_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ovl.h"

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* Set err (if non-NULL) to `status` with a printf-style message and return
 * `status`, so callers can write `return ovl__err(err, OVL_EINVAL, ...)`. */
ovl_status ovl__err(ovl_error *err, ovl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ovl_status ovl__verr(ovl_error *err, ovl_status status, const char *fmt,
                     va_list ap);
/* Prefix the message already in err with more context ("rank 1: ..."). */
void ovl__err_prefix(ovl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A growing string. Appending never fails loudly: an allocation failure
 * sets `fail`, later appends do nothing, and the caller checks `fail` once
 * at the end (then frees `s`). Start with {0}. */
typedef struct ovl__sbuf {
  char *s;
  size_t len, cap;
  bool fail;
} ovl__sbuf;
bool ovl__sb_reserve(ovl__sbuf *b, size_t more);
void ovl__sb_printf(ovl__sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ovl__sb_puts(ovl__sbuf *b, const char *s);
/* A JSON string, quotes included. */
void ovl__sb_json_str(ovl__sbuf *b, const char *s);

/* Allocation helpers that never return NULL silently: they return NULL only
 * for failure, and callers map that to OVL_ENOMEM. */
char *ovl__strdup(const char *s);

/* ------------------------------------------------------------------ */
/* Limits                                                              */
/* ------------------------------------------------------------------ */

#define OVL_MAX_DIMS 8
#define OVL_MAX_RINGS 16
#define OVL_MAX_RANKS 64
#define OVL_MAX_OP_INPUTS 16
/* Largest program after repeat expansion (ops). */
#define OVL_MAX_OPS (1u << 24)

/* ------------------------------------------------------------------ */
/* Op table                                                            */
/* ------------------------------------------------------------------ */

typedef enum {
  OVL_KIND_COMPUTE,      /* elementwise kernel on a stream */
  OVL_KIND_COLLECTIVE,   /* NCCL collective */
  OVL_KIND_WAIT_COMPUTE, /* c_wait_compute */
  OVL_KIND_WAIT_COMM,    /* c_wait_comm */
  OVL_KIND_SYNC_CALC,    /* c_sync_calc_stream */
  OVL_KIND_SYNC_COMM,    /* c_sync_comm_stream */
  OVL_KIND_DELAY,        /* harness: spin a stream */
  OVL_KIND_FETCH,        /* host: sync calc, copy to host */
  /* Generic stream ops (harness-only, beyond Paddle's): */
  OVL_KIND_EVENT_RECORD,     /* event_record(event=E, stream=S, ring_id=R) */
  OVL_KIND_STREAM_WAIT_EVENT, /* stream_wait_event(event=E, stream=S, ...) */
  OVL_KIND_STREAM_SYNC       /* stream_sync(stream=S, ring_id=R): host */
} ovl__kind;

/* Elementwise compute functions. out = f(x[, y]). */
typedef enum {
  OVL_EW_ASSIGN, /* out = x */
  OVL_EW_ADD,    /* out = x + y */
  OVL_EW_SUB,    /* out = x - y */
  OVL_EW_MUL,    /* out = x * y */
  OVL_EW_SCALE   /* out = scale * x + bias */
} ovl__ew;

typedef enum {
  OVL_COLL_ALLREDUCE,
  OVL_COLL_BROADCAST,
  OVL_COLL_ALLGATHER,
  OVL_COLL_REDUCESCATTER
} ovl__coll;

typedef enum { OVL_RED_SUM, OVL_RED_MAX, OVL_RED_MIN, OVL_RED_PROD } ovl__redop;

/* Attributes an op may take (bit mask in ovl__opdef.attrs). */
enum {
  OVL_ATTR_RING_ID = 1u << 0,
  OVL_ATTR_USE_CALC_STREAM = 1u << 1,
  OVL_ATTR_SCALE = 1u << 2,
  OVL_ATTR_BIAS = 1u << 3,
  OVL_ATTR_ROOT = 1u << 4,
  OVL_ATTR_US = 1u << 5,
  OVL_ATTR_STREAM = 1u << 6,
  OVL_ATTR_EVENT = 1u << 7
};

typedef struct ovl__opdef {
  const char *name;
  ovl__kind kind;
  int min_in, max_in; /* positional variable arguments */
  int max_out;        /* 0 or 1 */
  /* The op writes its output in place into its first input when no output
   * is named (collectives). */
  bool inplace_default;
  unsigned attrs;
  ovl__ew ew;         /* OVL_KIND_COMPUTE */
  ovl__coll coll;     /* OVL_KIND_COLLECTIVE */
  ovl__redop redop;   /* OVL_COLL_ALLREDUCE, OVL_COLL_REDUCESCATTER */
} ovl__opdef;

/* The table, terminated by a row with name == NULL. */
extern const ovl__opdef ovl__optable[];
const ovl__opdef *ovl__opdef_find(const char *name);

/* ------------------------------------------------------------------ */
/* Programs                                                            */
/* ------------------------------------------------------------------ */

typedef enum { OVL_INIT_NONE, OVL_INIT_UNIFORM, OVL_INIT_FILL } ovl__init;

typedef struct ovl__var {
  char *name;
  ovl_dtype dtype;
  int ndim;
  int64_t dims[OVL_MAX_DIMS];
  int64_t numel;
  /* Declared by data(): written by the host before every iteration. */
  ovl__init init;
  double fill;       /* OVL_INIT_FILL */
  uint64_t seed;     /* OVL_INIT_UNIFORM */
  bool per_rank;     /* OVL_INIT_UNIFORM: different values on each rank */
  int line, col;     /* where it was declared */
} ovl__var;

/* Streams, as the executor and backends number them. */
#define OVL_STREAM_CALC 0
#define OVL_STREAM_COMM(ring) (1 + (ring))
/* Per-ring events, as Paddle names them. */
#define OVL_EVENT_COMPUTE(ring) (2 * (ring))
#define OVL_EVENT_COMM(ring) (2 * (ring) + 1)
#define OVL_EVENT_NAMED(nrings, k) (2 * (nrings) + (k))

typedef struct ovl__op {
  const ovl__opdef *def;
  int line, col;            /* source position of the op name */
  int nin;
  int in[OVL_MAX_OP_INPUTS]; /* variable indices */
  int out;                   /* variable index, or -1 */
  /* Attributes (defaults applied). */
  int ring_id;
  bool use_calc_stream;
  double scale, bias;
  int root;
  double us;
  int stream;                /* OVL_STREAM_CALC or OVL_STREAM_COMM(ring) */
  int event;                 /* named event: index into prog->events, or -1 */
} ovl__op;

typedef struct ovl__param {
  char *name;
  char *value;          /* bound value, as text */
  char *plain_default;  /* the value written after `=` */
  ovl_param_origin origin;
} ovl__param;

struct ovl_program_s {
  char *filename;
  int nranks;
  int nrings;          /* 1 + highest ring id used by any collective, or 0 */
  size_t nvars;
  ovl__var *vars;
  size_t nops;
  ovl__op *ops;
  size_t nparams;
  ovl__param *params;
  size_t nfetch;
  int *fetch;          /* variable indices, in order of first fetch */
  /* Named events of event_record / stream_wait_event, in order of first
   * use. On a rank they come after the per-ring events: named event k is
   * backend event OVL_EVENT_NAMED(prog->nrings, k). */
  size_t nevents;
  char **events;
};

/* The stream an op is enqueued on (for stream ops), from its attributes. */
int ovl__op_stream(const ovl__op *op);

/* Deep copy (used by transforms). */
ovl_status ovl__program_clone(const ovl_program *prog, ovl_program **out,
                              ovl_error *err);

/* Input generation: a pure function of (seed, rank, element index), so any
 * process can produce any rank's inputs. Returns the double the element is
 * initialised with, already rounded to the variable's dtype. */
double ovl__var_init_value(const ovl__var *var, int rank, int64_t index);

/* ------------------------------------------------------------------ */
/* Numeric check (check.c)                                             */
/* ------------------------------------------------------------------ */

/* The body of ovl_check_result, with the values under test read through
 * `got` instead of an ovl_result: got(ctx, rank, i) is fetched variable i
 * on `rank` as doubles (NULL: never fetched, which makes the whole variable
 * a mismatch). Compares ranks [0, nranks). ovl_check_result passes
 * prog->nranks and ovl_result_fetched; tests pass plain arrays. */
ovl_status ovl__check_arrays(const ovl_program *prog, int nranks,
                             const double *(*got)(const void *ctx, int rank,
                                                  size_t i),
                             const void *ctx, const ovl_reference *ref,
                             double rtol, double atol, ovl_check *out,
                             ovl_error *err);

/* ------------------------------------------------------------------ */
/* Backends                                                            */
/* ------------------------------------------------------------------ */

typedef struct ovl__bworld ovl__bworld; /* backend state of a world */
typedef struct ovl__brank ovl__brank;   /* backend state of one rank */

/*
 * The only seam between the model and the machine. Functions marked (main)
 * are called from the thread that owns the world, the others from the rank's
 * own thread. Stream numbers: OVL_STREAM_CALC, OVL_STREAM_COMM(ring).
 * Enqueue functions return as soon as the work is queued; errors of queued
 * work are reported by the next sync of that stream (sticky, as in CUDA).
 * Every error message names the rank, and the stream where one is involved;
 * the executor adds the op and its source line.
 */
typedef struct ovl__backend_ops {
  const char *name;
  /* (main) Devices usable by this backend; 0 if none. Never fails. */
  int (*device_count)(void);
  /* (main) Ranks used when the user asks for none. */
  int (*default_ranks)(void);
  /* (main) Set up a world of nranks ranks. */
  ovl_status (*world_init)(int nranks, double timeout_s, ovl__bworld **out,
                           ovl_error *err);
  /* (main) Make sure communicators exist for rings [0, nrings). Called
   * before the rank threads of a run start. */
  ovl_status (*world_rings)(ovl__bworld *bw, int nrings, ovl_error *err);
  /* (main) "2 x NVIDIA H200" or similar. */
  const char *(*world_devices)(ovl__bworld *bw);
  /* (main) The device of one rank ("NVIDIA H200"); rank is in range. */
  const char *(*device_name)(ovl__bworld *bw, int rank);
  /* (main) The versions in `info` (driver, runtime, NCCL); the caller has
   * set every field to "n/a" and fills hostname and cpu_model itself. */
  void (*world_info)(ovl__bworld *bw, ovl_world_info *info);
  void (*world_fini)(ovl__bworld *bw);
  /* (any thread) Another rank failed: make every blocked or future
   * collective and stream wait of this world fail promptly with
   * OVL_EABORTED instead of waiting for the timeout. */
  void (*world_abort)(ovl__bworld *bw);

  /* Bind this thread to the rank's device; create calc + nrings comm
   * streams and 2 * nrings events (timing disabled). */
  ovl_status (*rank_init)(ovl__bworld *bw, int rank, int nrings,
                          ovl__brank **out, ovl_error *err);
  /* Release streams and events; the rank's streams must be drained. */
  void (*rank_fini)(ovl__brank *br);
  /* Make sure the rank has at least `nevents` events (timing disabled),
   * numbered 0..nevents-1: the first 2 * nrings are the per-ring events
   * rank_init made, the rest are the schedule's named events
   * (OVL_EVENT_NAMED). Never shrinks; a new event starts never recorded. */
  ovl_status (*events_reserve)(ovl__brank *br, int nevents, ovl_error *err);

  /* Device memory, poisoned so that reading unwritten data shows (the CPU
   * backend fills with NaN). */
  ovl_status (*mem_alloc)(ovl__brank *br, size_t bytes, void **out,
                          ovl_error *err);
  void (*mem_free)(ovl__brank *br, void *ptr);
  /* Host memory for copies to and from the device: page-locked where the
   * backend has such a thing (a fetch is timed, and a copy to pageable
   * memory is several times slower). */
  ovl_status (*host_alloc)(ovl__brank *br, size_t bytes, void **out,
                           ovl_error *err);
  void (*host_free)(ovl__brank *br, void *ptr);
  /* Synchronous copies between host and device memory. */
  ovl_status (*mem_upload)(ovl__brank *br, void *dst, const void *src,
                           size_t bytes, ovl_error *err);
  ovl_status (*mem_download)(ovl__brank *br, void *dst, const void *src,
                             size_t bytes, ovl_error *err);

  /* Snapshot everything queued on `stream` so far into `event` (replaces any
   * earlier record). */
  ovl_status (*event_record)(ovl__brank *br, int event, int stream,
                             ovl_error *err);
  /* Work queued on `stream` after this waits for the event's last record;
   * no-op if it was never recorded. The host does not block. */
  ovl_status (*stream_wait_event)(ovl__brank *br, int stream, int event,
                                  ovl_error *err);
  /* Host blocks until `stream` has finished everything queued on it. */
  ovl_status (*stream_sync)(ovl__brank *br, int stream, ovl_error *err);

  /* out[i] = f(x[i], y[i]) for n elements; y unused by ASSIGN and SCALE. */
  ovl_status (*elementwise)(ovl__brank *br, int stream, ovl__ew fn,
                            ovl_dtype dtype, void *out, const void *x,
                            const void *y, double scale, double bias,
                            size_t n, ovl_error *err);
  /* Collective on `ring`, queued on `stream`. count is the element count of
   * `send` (allreduce, broadcast, allgather) or of `recv` (reducescatter, as
   * NCCL's recvcount). */
  ovl_status (*collective)(ovl__brank *br, int stream, int ring,
                           ovl__coll coll, ovl__redop redop, ovl_dtype dtype,
                           const void *send, void *recv, size_t count,
                           int root, ovl_error *err);
  /* Keep `stream` busy for `us` microseconds. */
  ovl_status (*delay)(ovl__brank *br, int stream, double us, ovl_error *err);

  /* Per-op device timing (--op-times, traces). Room for n marks is
   * reserved before the timed loop; mark i is taken when `stream` reaches
   * that point of its queue; once the streams are drained, *seconds is the
   * time from mark a to mark b (marks of different streams of the rank
   * compare: cuda events of one device, the host clock on cpu). */
  ovl_status (*timers_reserve)(ovl__brank *br, size_t n, ovl_error *err);
  ovl_status (*timer_mark)(ovl__brank *br, size_t i, int stream,
                           ovl_error *err);
  ovl_status (*timer_elapsed)(ovl__brank *br, size_t a, size_t b,
                              double *seconds, ovl_error *err);

  /* (main, optional: NULL where the backend has no such knobs) Apply the
   * tuning fields of `opts` (cuda: comm stream priority, NCCL CTA limits;
   * cpu: chaos_seed) before any ring or rank exists. Called only when one
   * of them is non-zero; a backend refuses the fields it does not have. */
  ovl_status (*world_tune)(ovl__bworld *bw, const ovl_world_opts *opts,
                           ovl_error *err);

  /* Host memory, for ovl_host_bytes_per_op: the bytes one command holds
   * while it waits on a stream (cpu: the queued command; 0 where the
   * queue is the driver's, and bounded), and one timer of timers_reserve
   * (cpu: a double; cuda: the event, with what the driver keeps for it). */
  size_t host_bytes_per_command, host_bytes_per_timer;
} ovl__backend_ops;

extern const ovl__backend_ops ovl__backend_cpu;
#ifdef HAVE_CUDA
extern const ovl__backend_ops ovl__backend_cuda;
#endif
/* NULL-terminated list of compiled-in backends, preferred first. */
extern const ovl__backend_ops *const ovl__backends[];
const ovl__backend_ops *ovl__backend_find(const char *name);

/* Host bytes per op, for ovl_host_bytes_per_op (world.c): the race
 * checker's state (race.c), and a timeline's for one rank of one run
 * (timeline.c): a Chrome trace (trace_text) or a picture. */
size_t ovl__race_bytes_per_op(void);
size_t ovl__timeline_bytes_per_op(bool trace_text);

/* malloc's cost of an allocation of n bytes (glibc: a header word, in
 * 16-byte units, 32 at least), for the per-op figures. */
#define OVL_MALLOC_BYTES(n) ((n) + 8 <= 32 ? 32 : ((n) + 8 + 15) / 16 * 16)

/* Monotonic host clock in seconds. */
double ovl__now(void);

#endif /* OVL_INTERNAL_H */
