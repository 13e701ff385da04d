/*
 * The op model (docs/ARCHITECTURE.md, "The op table" and "Lowering").
 *
 * An op is one statement of a schedule. Everything the library knows about
 * an op is in its row of the op table (core/optable.c): what it takes, what
 * it reads and writes, where its work goes, its output's shape, its
 * element math (core/elemfn.h, shared by the cpu backend, the reference and
 * the CUDA kernels) and its lowering: the short list of stream primitives it
 * becomes. Everything downstream works on primitives: the executor runs
 * them, the race checker clocks them, the reference interprets them, the
 * timeline draws them. So no module outside the table and the lowering asks
 * which op it has.
 */
#ifndef OVL_CORE_OP_H
#define OVL_CORE_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "core/elemfn.h"

/* ------------------------------------------------------------------ */
/* Limits                                                              */
/* ------------------------------------------------------------------ */

#define OVL_MAX_DIMS 8
#define OVL_MAX_RINGS 16
/* Streams of a rank: calc, a comm stream per ring, and the user streams
 * (at most 64). */
#define OVL_MAX_STREAMS (1 + OVL_MAX_RINGS + 64)
#define OVL_MAX_RANKS 64
/* The model backend's most ranks. A program of more than OVL_MAX_RANKS
 * ranks binds only where every rank runs the same ops (no ranks=[...],
 * no rank-dependent attribute, no point-to-point: not rank_dependent):
 * its ops' rank sets are then all ones, and ovl__op_on_rank holds for
 * every rank. */
#define OVL_MAX_MODEL_RANKS 65536
#define OVL_MAX_OP_INPUTS 16
/* Largest program after repeat expansion (ops). */
#define OVL_MAX_OPS (1u << 24)
/* Largest variable (elements): its bytes in float64 must fit an int64. */
#define OVL_MAX_NUMEL (INT64_MAX / 8)
/* Most primitives one op lowers to. */
#define OVL_MAX_PRIMS_PER_OP 4

/* ------------------------------------------------------------------ */
/* Primitive vocabulary the backends speak                              */
/* ------------------------------------------------------------------ */

/* Collectives (NCCL's functions). ovl__redop is in core/elemfn.h. */
typedef enum {
  OVL_COLL_ALLREDUCE,
  OVL_COLL_BROADCAST,
  OVL_COLL_ALLGATHER,
  OVL_COLL_REDUCESCATTER,
  /* ncclReduce: the root's output gets the reduction; the other ranks'
   * outputs are not written (NCCL uses recvbuff on the root only). */
  OVL_COLL_REDUCE,
  /* Paddle's alltoall: the input split into nranks equal parts along dim
   * 0; part j goes to rank j, and the part from rank j lands at part j of
   * the output. cuda: grouped ncclSend/ncclRecv. Never in place. */
  OVL_COLL_ALLTOALL,
  /* Paddle's barrier: every rank of the ring meets; moves no data of the
   * schedule (cuda: a one-element allreduce of the backend's own). */
  OVL_COLL_BARRIER
} ovl__coll;

/* The element count a collective is called with, NCCL's convention: the
 * send count, except reducescatter's (the receive count). */
size_t ovl__coll_count(ovl__coll coll, int64_t send_numel,
                       int64_t recv_numel);
/* Whether element i of every rank's output depends only on element i of
 * the inputs (allreduce, broadcast, reduce, barrier): the reference
 * evaluates such runs of primitives block by block. */
bool ovl__coll_is_local(ovl__coll coll);
/* "allreduce", "broadcast", ...; "sum", "max", ... */
const char *ovl__coll_name(ovl__coll coll);
const char *ovl__redop_name(ovl__redop op);
/* Whether the collective takes a reduction; a root. */
bool ovl__coll_has_redop(ovl__coll coll);
bool ovl__coll_has_root(ovl__coll coll);

/* The number of variable inputs of an elementwise function. */
static inline int ovl__ew_arity(ovl__ew fn) {
  static const int arity[] = {
#define OVL__EW_ARITY(name, ar, expr) ar,
      OVL_EW_LIST(OVL__EW_ARITY)
#undef OVL__EW_ARITY
  };
  return arity[fn];
}

/* ------------------------------------------------------------------ */
/* The op table                                                        */
/* ------------------------------------------------------------------ */

/* Attributes an op may take (bit mask in ovl__opdef.attrs). */
enum {
  OVL_ATTR_RING_ID = 1u << 0,
  OVL_ATTR_USE_CALC_STREAM = 1u << 1,
  OVL_ATTR_SCALE = 1u << 2,
  OVL_ATTR_BIAS = 1u << 3,
  OVL_ATTR_ROOT = 1u << 4,
  OVL_ATTR_US = 1u << 5,
  OVL_ATTR_STREAM = 1u << 6,
  OVL_ATTR_EVENT = 1u << 7,
  /* Point-to-point (send_v2, recv_v2): the other rank, an integer
   * expression that may depend on `rank` (DESIGN.md 2.2). */
  OVL_ATTR_PEER = 1u << 8,
  /* recv_v2: the received variable's shape and dtype (as data()'s). */
  OVL_ATTR_OUT_SHAPE = 1u << 9,
  OVL_ATTR_DTYPE = 1u << 10,
  /* matmul_v2: multiply by the transpose of x, of y (Paddle's names). */
  OVL_ATTR_TRANS_X = 1u << 11,
  OVL_ATTR_TRANS_Y = 1u << 12
};
/* Every op also takes ranks=[...] (the ranks that run it; all of them
 * when absent): it is not a bit of `attrs`. */

/* What the KERNEL primitive of a compute row computes (ovl__opdef.kernel),
 * as `coll` says which collective a COLL primitive runs. */
typedef enum {
  /* The row's element function `ew`, element by element (index-local:
   * element i of the output depends on element i of the inputs only). */
  OVL_KERNEL_ELEMENTWISE = 0,
  /* matmul_v2: out[M, N] = op(x)[M, K] @ op(y)[K, N], row-major, op() the
   * transpose where trans_x / trans_y (backend matmul). Row i of the
   * output depends on row i of op(x) and on all of op(y). */
  OVL_KERNEL_MATMUL
} ovl__kernel;

/* Point-to-point direction of a row (ovl__opdef.p2p). */
typedef enum { OVL_P2P_NONE, OVL_P2P_SEND, OVL_P2P_RECV } ovl__p2p;

/* What the modes (core/transform.c) do with an op. */
enum {
  /* Compute work: the comm form drops it. */
  OVL_ROLE_COMPUTE = 1u << 0,
  /* Communication: the comp form drops it; the sync form sets its
   * use_calc_stream (and places it again). */
  OVL_ROLE_COMM = 1u << 1,
  /* Orders the calc and comm streams for the async form only (Paddle's
   * c_wait_compute / c_wait_comm): the sync form drops it. */
  OVL_ROLE_ASYNC_ORDER = 1u << 2
};

/* How an op uses the ring named by its ring_id, beyond its stream. */
enum {
  /* Runs a collective on the ring: the ring needs a communicator. */
  OVL_RING_COLLECTIVE = 1u << 0,
  /* Orders or syncs the ring's comm stream (the wait ops, c_sync_comm). */
  OVL_RING_ORDERS = 1u << 1
};

typedef struct ovl__op ovl__op;
typedef struct ovl__prim ovl__prim;

/* An op's output shape, for the shape rules. */
typedef struct ovl__shape {
  ovl_dtype dtype;
  int ndim;
  int64_t dims[OVL_MAX_DIMS];
} ovl__shape;

typedef struct ovl__opdef ovl__opdef;

/* A shape rule: the output's shape from the inputs' (in[0..nin)) and the
 * op's attributes (`op`, bound as far as its attributes; NULL means every
 * attribute at its default). Returns NULL, or a message (without
 * position: binding adds file:line:col) written into msg[0..size).
 * `names` are the inputs' variable names. */
typedef const char *(*ovl__shape_fn)(const ovl__opdef *def,
                                     const ovl__op *op,
                                     const ovl__shape *in,
                                     const char *const *names, int nin,
                                     int nranks, ovl__shape *out, char *msg,
                                     size_t size);

/* Lowering: write the primitives of `op` (at most OVL_MAX_PRIMS_PER_OP)
 * into out[] and return how many. `nrings` numbers the events (see
 * OVL_EVENT_*). Exactly one of them has `main` set. */
typedef int (*ovl__lower_fn)(const ovl__op *op, int nrings, ovl__prim *out);

struct ovl__opdef {
  const char *name;
  /* Positional variable arguments, outputs (0 or 1). */
  int min_in, max_in, max_out;
  /* With no output named, the op writes its first input in place
   * (collectives); else an output is required where max_out is 1. */
  bool inplace_default;
  /* Its output must be another variable than each of its inputs (alltoall
   * moves parts between ranks; a matmul reads all of an input while it
   * writes): binding refuses `x = OP(x, ...)`. */
  bool out_distinct;
  /* Attributes the op takes, and those it must be given. */
  unsigned attrs, required;
  unsigned roles;    /* OVL_ROLE_* */
  unsigned ring_use; /* OVL_RING_* */
  /* Effects on data, for the race checker, the reference's liveness and
   * the trace's byte counts. `reads`: its inputs are read by its work (the
   * wait and sync ops' inputs only name dependencies: they read nothing);
   * `writes`: it writes its output. fetch reads its inputs on the host. */
  bool reads, writes;
  /* What the op does to its stream, for messages ("run on", "record on",
   * "wait on", "sync"). */
  const char *stream_verb;
  /* The shape rule; NULL when the op has no output. */
  ovl__shape_fn shape;
  /* The lowering. */
  ovl__lower_fn lower;
  /* What the kernel of an op whose work is a kernel computes, and its
   * element math (core/elemfn.h) where that is elementwise; the
   * collective and reduction of one whose work is a collective. */
  ovl__kernel kernel;
  ovl__ew ew;
  ovl__coll coll;
  ovl__redop redop;
  /* send_v2 / recv_v2: which; OVL_P2P_NONE for every other row. */
  ovl__p2p p2p;
};

/* The table, terminated by a row with name == NULL. */
extern const ovl__opdef ovl__optable[];
const ovl__opdef *ovl__opdef_find(const char *name);

/* Shape rules of the table (core/optable.c): every input alike, output
 * the same; c_allgather's (dim 0 times the ranks); c_reducescatter's (dim 0
 * divided among them). */
const char *ovl__shape_same(const ovl__opdef *def, const ovl__op *op,
                            const ovl__shape *in, const char *const *names,
                            int nin, int nranks, ovl__shape *out, char *msg,
                            size_t size);
const char *ovl__shape_gather(const ovl__opdef *def, const ovl__op *op,
                              const ovl__shape *in, const char *const *names,
                              int nin, int nranks, ovl__shape *out,
                              char *msg, size_t size);
const char *ovl__shape_scatter(const ovl__opdef *def, const ovl__op *op,
                               const ovl__shape *in,
                               const char *const *names, int nin, int nranks,
                               ovl__shape *out, char *msg, size_t size);
/* matmul_v2's: x and y 2-D, of one dtype, op(x) [M, K] and op(y) [K, N]
 * (op: the transpose where the op's trans_x / trans_y is set); the output
 * [M, N]. */
const char *ovl__shape_matmul(const ovl__opdef *def, const ovl__op *op,
                              const ovl__shape *in, const char *const *names,
                              int nin, int nranks, ovl__shape *out,
                              char *msg, size_t size);
/* "[1000,100] float32"; the element count (-1 past OVL_MAX_NUMEL);
 * whether two shapes have the same dims. */
const char *ovl__shape_str(const ovl__shape *s, char *buf, size_t size);
int64_t ovl__shape_numel(const ovl__shape *s);
bool ovl__shape_dims_eq(const ovl__shape *a, const ovl__shape *b);

/* Lowerings of the table (core/lower.c). */
int ovl__lower_kernel(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_coll(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_wait_compute(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_wait_comm(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_sync_calc(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_sync_comm(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_delay(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_fetch(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_event_record(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_stream_wait_event(const ovl__op *op, int nrings,
                                 ovl__prim *out);
int ovl__lower_stream_sync(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_p2p(const ovl__op *op, int nrings, ovl__prim *out);
int ovl__lower_barrier(const ovl__op *op, int nrings, ovl__prim *out);
const char *ovl__shape_alltoall(const ovl__opdef *def, const ovl__op *op,
                                const ovl__shape *in,
                                const char *const *names, int nin,
                                int nranks, ovl__shape *out, char *msg,
                                size_t size);

/* ------------------------------------------------------------------ */
/* Programs                                                            */
/* ------------------------------------------------------------------ */

typedef enum {
  OVL_INIT_NONE,
  OVL_INIT_UNIFORM,
  OVL_INIT_FILL,
  /* Ordinary values mixed with NaN, infinities, signed zeros, denormals
   * and the largest finite value (ovl__var_init_value says how). */
  OVL_INIT_SPECIAL
} ovl__init;

typedef struct ovl__var {
  char *name;
  ovl_dtype dtype;
  int ndim;
  int64_t dims[OVL_MAX_DIMS];
  int64_t numel;
  /* Declared by data(): written by the host before every iteration. */
  ovl__init init;
  double fill;       /* OVL_INIT_FILL */
  uint64_t seed;     /* OVL_INIT_UNIFORM, OVL_INIT_SPECIAL */
  bool per_rank;     /* the same: different values on each rank */
  int line, col;     /* where it was declared */
} ovl__var;

/* Streams, as the lowering, the executor and the backends number them:
 * calc, one comm stream per ring named, then the user streams. OVL_STREAM_HOST
 * marks a primitive the host performs. */
#define OVL_STREAM_HOST (-1)
#define OVL_STREAM_CALC 0
#define OVL_STREAM_COMM(ring) (1 + (ring))
/* Events: per ring the two Paddle's wait ops use (reused by every wait of
 * that ring, as Paddle does), then the schedule's named events. */
#define OVL_EVENT_COMPUTE(ring) (2 * (ring))
#define OVL_EVENT_COMM(ring) (2 * (ring) + 1)
#define OVL_EVENT_NAMED(nrings, k) (2 * (nrings) + (k))

struct ovl__op {
  const ovl__opdef *def;
  int line, col;            /* source position of the op name */
  int nin;
  int in[OVL_MAX_OP_INPUTS]; /* variable indices */
  int out;                   /* variable index, or -1 */
  /* Attributes (defaults applied). */
  int ring_id;
  bool use_calc_stream;
  double scale, bias;
  /* matmul_v2: multiply by the transpose of its input x, of y. */
  bool trans_x, trans_y;
  int root;
  /* Its index in the program as bound (repeat blocks expanded), kept by
   * the transforms: with the program's blocks it says which iteration of
   * which repeat block the op belongs to (check/fix.c). */
  uint32_t src;
  double us;
  /* Where the op's work goes (ovl__op_place): a stream number, or
   * OVL_STREAM_HOST for host ops. */
  int stream;
  int event;                 /* named event: index into prog->events, or -1 */
  /* The ranks that run the op (bit r: rank r), from ranks=[...]; every
   * rank of the program (ovl__program_all_ranks) when absent. A rank
   * whose bit is clear skips the op entirely: it enqueues nothing, reads
   * and writes nothing, and does not take part in the op's collective. */
  uint64_t ranks;
  /* send_v2 / recv_v2: the other rank; c_broadcast / c_reduce_*: `root`
   * above. When either depends on `rank`, rank_attr >= 0 and the values of
   * rank r are prog->rank_attrs[rank_attr + 2 * r] (peer) and [... + 1]
   * (root), defined for the ranks in `ranks` (use ovl__op_peer and
   * ovl__op_root, never the fields, outside binding). -1: `peer` and
   * `root` hold the values of every rank. */
  int peer;
  int32_t rank_attr;
  /* NCCL group (`group { }`): 0 outside one; else the number of the
   * group's instance (1, 2, ... in program order; each iteration of a
   * repeat block around a group is a new instance). The ops of one
   * instance are consecutive in the program, share ring_id and stream,
   * and are send_v2 / recv_v2 only. */
  uint32_t group;
};

/* The stream an op's work goes to, from its row and attributes: for an op
 * with use_calc_stream, calc or its ring's comm stream; for one with
 * stream=, the stream it names (kept in op->stream by binding); for an
 * op with neither, OVL_STREAM_HOST (host ops; the wait and sync ops of a
 * ring, whose lowering says which streams they touch). */
int ovl__op_place(const ovl__op *op);

/* ------------------------------------------------------------------ */
/* Primitives                                                          */
/* ------------------------------------------------------------------ */

typedef enum {
  OVL_PRIM_KERNEL,    /* the op's elementwise kernel on `stream` */
  OVL_PRIM_COLL,      /* the op's collective on `stream`, ring op->ring_id */
  OVL_PRIM_DELAY,     /* `stream` spins op->us microseconds */
  OVL_PRIM_RECORD,    /* record `event` on `stream` */
  OVL_PRIM_WAIT,      /* `stream` waits for `event`'s last record */
  OVL_PRIM_HOST_SYNC, /* the host waits until `stream` is drained */
  OVL_PRIM_HOST_READ, /* the host copies the op's inputs to host memory */
  /* Point-to-point on `stream`, ring op->ring_id, with rank
   * ovl__op_peer(): send the op's input / receive into its output. The
   * consecutive SEND/RECV primitives of one group instance (op->group) on
   * a rank are issued as one backend call (NCCL group semantics). */
  OVL_PRIM_SEND,
  OVL_PRIM_RECV
} ovl__prim_kind;

struct ovl__prim {
  uint8_t kind; /* ovl__prim_kind */
  /* The op's main primitive: its span is the op's span (the wait of a
   * record + wait pair; the work of a kernel or collective). */
  uint8_t main;
  int16_t stream; /* OVL_STREAM_HOST for HOST_* */
  int32_t event;  /* RECORD, WAIT; else -1 */
};

/* Whether a primitive does work on its stream (and so can be timed there):
 * kernels, collectives, delays. */
static inline bool ovl__prim_works(const ovl__prim *p) {
  return p->kind == OVL_PRIM_KERNEL || p->kind == OVL_PRIM_COLL ||
         p->kind == OVL_PRIM_DELAY || p->kind == OVL_PRIM_SEND ||
         p->kind == OVL_PRIM_RECV;
}
/* Whether a primitive talks to other ranks (collective or
 * point-to-point): it is numbered on its ring (flight record) and matched
 * across ranks (check/). */
static inline bool ovl__prim_is_comm(const ovl__prim *p) {
  return p->kind == OVL_PRIM_COLL || p->kind == OVL_PRIM_SEND ||
         p->kind == OVL_PRIM_RECV;
}
static inline bool ovl__prim_on_host(const ovl__prim *p) {
  return p->kind == OVL_PRIM_HOST_SYNC || p->kind == OVL_PRIM_HOST_READ;
}

/* A repeat block of the program as bound (check/fix.c places a fix hint
 * by them): its iterations run `n` ops each (repeat blocks nested in it
 * expanded), the first starting `off` ops after the start of the
 * enclosing block's iteration (of the program, at top level). Blocks are
 * in the order they open, an enclosing block before those inside it;
 * blocks without ops are left out. */
typedef struct ovl__block {
  int line;       /* of `repeat` */
  int parent;     /* the enclosing block, or -1 */
  int64_t count;  /* iterations */
  uint64_t off, n;
} ovl__block;

typedef struct ovl__param {
  char *name;
  char *value;          /* bound value, as text */
  char *plain_default;  /* the value written after `=` */
  ovl_param_origin origin;
} ovl__param;

struct ovl_program_s {
  char *filename;
  int nranks;
  int nrings;          /* 1 + the highest ring id an op names, or 0 */
  /* Rings that carry a collective (bit R): they need a communicator. */
  uint32_t ring_comm;
  /* calc, a comm stream per ring, then the user streams (stream=NAME);
   * each one's name ("calc", "comm[0]", "side"). */
  int nstreams;
  char **stream_names;
  size_t nvars;
  ovl__var *vars;
  size_t nops;
  ovl__op *ops;
  /* The form this is (ovl_program_transform): OVL_MODE_ASYNC, the
   * schedule as written, for a bound program. */
  ovl_mode mode;
  /* The repeat blocks of the program as bound (op->src indexes it). */
  size_t nblocks;
  ovl__block *blocks;
  size_t nparams;
  ovl__param *params;
  /* The -D NAME=VALUE strings it was bound with, as given and in order
   * (the results JSON echoes them). */
  size_t ndefines;
  char **defines;
  size_t nfetch;
  int *fetch;          /* variable indices, in order of first fetch */
  /* Named events of event_record / stream_wait_event, in order of first
   * use. On a rank they come after the per-ring events: named event k is
   * event OVL_EVENT_NAMED(prog->nrings, k). */
  size_t nevents;
  char **events;
  /* The lowering (ovl__program_lower): op i is prims[first[i] ..
   * first[i + 1]). */
  size_t nprims;
  ovl__prim *prims;
  uint32_t *prim_first;
  /* Rank-dependent attributes (ovl__op.rank_attr): 2 * nranks ints per op
   * that has any (ops expanded from one statement share theirs). */
  size_t nrank_attrs;
  int32_t *rank_attrs;
  /* Whether some op runs on only some ranks, or has a rank-dependent
   * attribute, or is point-to-point: the ranks do not all run the same
   * program (the checks and the reference then look at every rank). */
  bool rank_dependent;
};

/* Every rank of the program: bits 0 .. nranks-1. */
static inline uint64_t ovl__program_all_ranks(const ovl_program *prog) {
  return prog->nranks >= 64 ? ~(uint64_t)0
                            : (((uint64_t)1 << prog->nranks) - 1);
}
/* Whether `rank` runs op `op`. */
static inline bool ovl__op_on_rank(const ovl__op *op, int rank) {
  return rank < 64 ? (op->ranks >> rank) & 1 : op->ranks == ~(uint64_t)0;
}
/* The peer and root of `op` on `rank` (a rank that runs it). */
static inline int ovl__op_peer(const ovl_program *prog, const ovl__op *op,
                               int rank) {
  return op->rank_attr < 0 ? op->peer
                           : prog->rank_attrs[op->rank_attr + 2 * rank];
}
static inline int ovl__op_root(const ovl_program *prog, const ovl__op *op,
                               int rank) {
  return op->rank_attr < 0 ? op->root
                           : prog->rank_attrs[op->rank_attr + 2 * rank + 1];
}

/* The primitives of op i. */
static inline const ovl__prim *ovl__op_prims(const ovl_program *prog,
                                             size_t i, size_t *n) {
  *n = prog->prim_first[i + 1] - prog->prim_first[i];
  return prog->prims + prog->prim_first[i];
}
/* The primitive index of op i's main primitive. */
size_t ovl__op_main_prim(const ovl_program *prog, size_t i);
/* Whether op i is performed by the host (all its primitives are host
 * primitives; an op that mixes them, barrier, starts with its stream
 * ones and is not). */
bool ovl__op_on_host(const ovl_program *prog, size_t i);
/* The stream op i does its work on (its kernel, collective or delay), or
 * OVL_STREAM_HOST when it does none. */
int ovl__op_work_stream(const ovl_program *prog, size_t i);

/* The rings that carry point-to-point traffic (bit R): a SEND or RECV
 * primitive, or an alltoall collective (grouped sends and receives on
 * cuda). */
uint32_t ovl__program_p2p_rings(const ovl_program *prog);

/* Total events of a rank: the per-ring ones, then the named ones. */
static inline int ovl__program_nevents(const ovl_program *prog) {
  return OVL_EVENT_NAMED(prog->nrings, (int)prog->nevents);
}

/* A stream's name in `prog` ("calc", "comm[2]", "side"), or "host" for
 * OVL_STREAM_HOST. */
const char *ovl__stream_name(const ovl_program *prog, int stream);

/* Lower every op of `prog` (replacing any earlier lowering); its streams
 * (nstreams) are numbered already. Binding and the transforms call it on
 * every program they make. */
ovl_status ovl__program_lower(ovl_program *prog, ovl_error *err);

/* The transform of `mode` (core/transform.c) applied to `p` itself (its
 * ops filtered and rewritten, p->mode set, lowered again); and whether the
 * form of `mode` keeps an op of row `def` (the sync form has no
 * c_wait_compute, the comp form no collective, ...). */
ovl_status ovl__program_transform_inplace(ovl_program *p, ovl_mode mode,
                                          ovl_error *err);
bool ovl__mode_keeps(ovl_mode mode, const ovl__opdef *def);

/* The -D strings a program was bound with, copied into it (replacing any
 * it had); OVL_ENOMEM leaves it with none. */
ovl_status ovl__program_set_defines(ovl_program *prog,
                                    const char *const *defines, size_t n,
                                    ovl_error *err);

/* Deep copy (used by transforms; core/program.c, with ovl_program_free
 * and the program's introspection). */
ovl_status ovl__program_clone(const ovl_program *prog, ovl_program **out,
                              ovl_error *err);

/* Edits (core/transform.c): a new program, lowered, that is `prog` with
 * `op` inserted before op `before` (0..nops; nops appends). `op` must be
 * bound for `prog` (its variables, stream and event numbered as prog's).
 * OVL_EINVAL for `before` out of range, OVL_ENOMEM past OVL_MAX_OPS. */
ovl_status ovl__program_insert(const ovl_program *prog, size_t before,
                               const ovl__op *op, ovl_program **out,
                               ovl_error *err);
/* The same with `delay(us=US, stream=S)` (S a stream of prog: calc, a comm
 * stream or a user stream; not the host), given the source position of the
 * op it is inserted before. */
ovl_status ovl__program_insert_delay(const ovl_program *prog, size_t before,
                                     int stream, double us,
                                     ovl_program **out, ovl_error *err);

/* Input generation (core/init.c): a pure function of (seed, rank, element
 * index), so any process can produce any rank's inputs. Returns the double
 * the element is initialised with, already rounded to the variable's
 * dtype. */
double ovl__var_init_value(const ovl__var *var, int rank, int64_t index);

#endif /* OVL_CORE_OP_H */
