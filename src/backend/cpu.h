/*
 * The cpu backend's shared state. The backend is six files:
 *   backend_cpu.c  the seam (ovl__backend_cpu): world, ranks, memory, work
 *   cpu_stream.c   streams, events and their worker threads
 *   cpu_coll.c     collectives: the rendezvous of the ranks
 *   cpu_p2p.c      point-to-point: the messages of the ranks
 *   cpu_kernels.c  the element math of kernels and reductions
 *   cpu_matmul.c   the matrix multiply
 * Internal to the cpu backend.
 */
#ifndef OVL_CPU_H
#define OVL_CPU_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "backend/backend.h"

/*
 * Timeouts. A collective gives up `timeout_s` after this rank arrived. A
 * wait command or a host sync watches a stream; when that stream is itself
 * blocked in a collective or a wait, the watcher does not count the time:
 * the inner command has its own timeout and a better message ("waiting for
 * rank 3"), and its failure, counted as done, ends the watch. So only the
 * innermost timer of a chain runs, and a watcher times out only when the
 * stream it watches spent `timeout_s` in one kernel or delay.
 */

/* Elements reduced per block: in-place collectives read a whole block of
 * every rank before writing any of it. */
#define BLOCK 1024

/* Chaos: the longest sleep before a command. Delays are CHAOS_MAX_US * u^4
 * for u uniform in [0, 1): the median is 1/16 of the maximum (125 us) and
 * the mean 1/5 (400 us), but one command in ten waits over 1.1 ms. */
#define CHAOS_MAX_US 2000.0

typedef struct stream stream;
typedef struct ring ring;


/* ------------------------------------------------------------------ */
/* Commands                                                            */
/* ------------------------------------------------------------------ */

typedef enum {
  CMD_KERNEL,
  CMD_MATMUL,
  CMD_COLL,
  CMD_P2P,
  CMD_WAIT,
  CMD_DELAY,
  CMD_MARK
} cmd_kind;

/* What one rank brings to a collective. */
typedef struct arrival {
  ovl__coll coll;
  ovl__redop redop;
  ovl_dtype dtype;
  const void *send;
  void *recv;
  size_t count;
  int root;
  /* The rank's stream had already failed: it takes no part, and says so to
   * the others so that they fail at once instead of at the timeout. */
  bool skipped;
} arrival;

typedef struct pair pair;

/* One send or receive of a point-to-point command. */
typedef struct p2p_item {
  bool send;
  int peer;
  ovl_dtype dtype;
  void *buf;
  size_t count;
  /* The k-th message from the sender to the receiver on the ring (from 0),
   * counted on the host thread at enqueue time, per ordered pair. */
  uint64_t k;
  /* While the command runs: the pair it posted to; whether this rank
   * copies it. */
  pair *pr;
  bool copies;
  /* The peer is another process's (cpu_p2p.c, "Between processes"):
   * its process, and where the item is (REMOTE_*). */
  bool remote;
  int proc;
  int rstate;
} p2p_item;

typedef struct cmd {
  struct cmd *next;
  cmd_kind kind;
  union {
    struct {
      ovl__ew fn;
      ovl_dtype dtype;
      void *out;
      const void *x, *y;
      double scale, bias;
      size_t n;
    } kernel;
    struct {
      ovl_dtype dtype;
      bool trans_x, trans_y;
      void *out;
      const void *x, *y;
      size_t m, n, k;
    } matmul;
    struct {
      ring *ring;
      uint64_t seq;
      uint64_t tag; /* the flight record's number (ring_progress) */
      arrival a;
    } coll;
    struct {
      ring *ring;
      uint64_t tag;
      int n;
      p2p_item *items; /* [n], malloc'd; freed with the command */
    } p2p;
    struct {
      stream *src;
      uint64_t target;
      int event;
    } wait;
    struct {
      double us;
    } delay;
    struct {
      size_t index;
    } mark;
  } u;
} cmd;

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

struct stream {
  ovl__brank *br;
  int index;
  char name[72]; /* "calc", "comm[R]", or a user stream's name */
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* the worker waits for commands */
  pthread_cond_t done_cv; /* `done` moved, or the world was aborted */
  cmd *head, *tail;
  uint64_t enq;  /* commands enqueued (host thread) */
  uint64_t done; /* commands finished, failed or skipped (worker) */
  /* When the worker last started or finished a command: watchers measure
   * their timeout from it. */
  double progress_at;
  /* The worker is in a collective, a point-to-point command or a wait,
   * which time out by themselves:
   * watchers of this stream stop their clocks. */
  bool blocked;
  /* Sticky, as a CUDA error: the first failure, kept. */
  ovl_status status;
  char msg[OVL_ERROR_MSG_MAX];
  bool exit;
  bool started;
  pthread_t thread;
  /* Chaos generator state (worker thread only); 0 when chaos is off. */
  uint64_t chaos;
};

typedef struct event {
  bool recorded;
  stream *src;
  uint64_t target;
} event;

/* SLOT_EXCHANGING: every local rank arrived, and the last one is
 * exchanging the arrivals with the other processes. */
typedef enum {
  SLOT_OPEN,
  SLOT_EXCHANGING,
  SLOT_COMPUTING,
  SLOT_DONE,
  SLOT_FAILED
} slot_state;

/* One sequence number of one ring, while some rank is still in it. */
typedef struct slot {
  struct slot *next;
  uint64_t seq;
  slot_state state;
  uint64_t arrived; /* bit per rank */
  int narrived;
  int nleft;
  ovl_status status; /* SLOT_FAILED */
  char msg[OVL_ERROR_MSG_MAX];
  arrival a[]; /* nranks */
} slot;

typedef enum { PAIR_OPEN, PAIR_COPYING, PAIR_DONE, PAIR_FAILED } pair_state;

/* One message of point-to-point: the k-th send from rank `src` to rank
 * `dst` on a ring and the k-th receive on dst from src, while either side
 * is still in it. Whoever posts second checks that the sides agree and
 * copies (outside the ring lock, in PAIR_COPYING). */
struct pair {
  struct pair *next;
  int src, dst;
  uint64_t k;
  pair_state state;
  /* [0] the send, [1] the receive. */
  struct {
    bool posted;
    ovl_dtype dtype;
    size_t count;
    void *buf;
  } side[2];
  int nleft; /* sides that have left; the second frees it */
  ovl_status status; /* PAIR_FAILED */
  char msg[OVL_ERROR_MSG_MAX];
};

struct ring {
  int id;
  pthread_mutex_t mu;
  /* Any slot or pair of the ring changed state, or abort. */
  pthread_cond_t cv;
  slot *active;
  slot *free; /* reused once every rank has left */
  /* Point-to-point: per ordered pair (src * nranks + dst) the messages
   * some side is in, oldest first (allocated at the first send or
   * receive); pairs both sides have left, for reuse. */
  pair **chan;
  pair *pair_free;
};

struct ovl__bworld {
  int nranks;
  /* The ranks this process drives, and the processes (run/procs.h):
   * the others' ranks meet ours through MPI (cpu_coll.c, cpu_p2p.c). */
  ovl__layout lay;
  double timeout_s;
  unsigned chaos_seed; /* 0: off */
  atomic_int aborted;
  /* Guards nrings, rings[] and ranks[]. Lock order: world, then a ring or a
   * stream; nothing takes the world lock while holding another. */
  pthread_mutex_t mu;
  int nrings;
  ring *rings[OVL_MAX_RINGS];
  ovl__brank *ranks[OVL_MAX_RANKS];
  char devices[64];
};

struct ovl__brank {
  ovl__bworld *bw;
  int rank;
  int nrings;
  int nstreams;
  /* calc, nrings comm streams, then user streams (streams_reserve); each
   * allocated on its own (its worker holds its address). The array
   * changes only under the world's lock, which world_abort takes too. */
  stream **streams;
  event *events;   /* nevents (2 * nrings, then named); host thread only */
  int nevents;
  ring *rings[OVL_MAX_RINGS];
  uint64_t seq[OVL_MAX_RINGS]; /* next collective number, per ring */
  /* Point-to-point messages enqueued, per ring and other rank: sends to
   * it, receives from it (the next message's k). */
  uint64_t sent[OVL_MAX_RINGS][OVL_MAX_RANKS];
  uint64_t received[OVL_MAX_RINGS][OVL_MAX_RANKS];
  /* Flight record: per ring the largest tag of a collective or
   * point-to-point command that completed (workers write, ring_progress
   * reads). */
  _Atomic uint64_t progress[OVL_MAX_RINGS];
  /* Timer marks (--op-times): host clock when a stream reached each one.
   * Written by workers, read by the host after a sync of those streams. */
  double *marks;
  size_t nmarks;
};

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static inline int cond_init(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc != 0)
    return rc;
  rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
  return rc;
}

/* Wait on cv until signalled or `deadline` (ovl__now() seconds) passed.
 * Returns false once the deadline has passed. */
static inline bool cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
                            double deadline) {
  struct timespec ts;
  double now = ovl__now();
  if (now >= deadline)
    return false;
  double whole = (double)(time_t)deadline;
  ts.tv_sec = (time_t)deadline;
  ts.tv_nsec = (long)((deadline - whole) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return pthread_cond_timedwait(cv, mu, &ts) != ETIMEDOUT ||
         ovl__now() < deadline;
}

/* Decimals for a time in a message: a timeout of 0.005 s must not read
 * "0.0 s". */
static inline int secs_prec(double s) { return s >= 0.1 ? 1 : 3; }

static inline bool is_aborted(ovl__bworld *bw) {
  return atomic_load(&bw->aborted) != 0;
}

static inline void set_error(ovl_error *err, ovl_status status, const stream *s,
                      const char *what) {
  ovl__err(err, status, "rank %d: %s stream: %s", s->br->rank, s->name, what);
}

/* ------------------------------------------------------------------ */
/* Between the files                                                   */
/* ------------------------------------------------------------------ */

/* cpu_kernels.c: out[i] = fn(x[i], y[i]) in `dtype`; the reduction of a
 * collective for every rank, run by the last rank to arrive. */
void ovl__cpu_elementwise(ovl__ew fn, ovl_dtype dtype, void *out,
                          const void *x, const void *y, double scale,
                          double bias, size_t n);
void ovl__cpu_collective_compute(const slot *sl, int nranks);
/* cpu_matmul.c: out[m, n] = op(x) @ op(y) (backend matmul). */
void ovl__cpu_matmul(ovl_dtype dtype, void *out, const void *x,
                     const void *y, size_t m, size_t n, size_t k, bool tx,
                     bool ty);

/* cpu_coll.c: run one collective of `rank`: arrive, wait for the others,
 * return once the result is in every recv buffer. */
ovl_status ovl__cpu_rendezvous(ovl__bworld *bw, ring *rg, uint64_t seq,
                               int rank, const arrival *a, ovl_error *err);
/* cpu_p2p.c: run one point-to-point command of `rank` (items[0..n),
 * NCCL group semantics): post every item, copy the messages whose other
 * side is there, and return once every item completed, or one failed
 * (then the others still open are given up). `skipped`: the rank's stream
 * had already failed; its items only tell the other sides so. */
ovl_status ovl__cpu_p2p_run(ovl__bworld *bw, ring *rg, int rank,
                            p2p_item *items, int n, bool skipped,
                            ovl_error *err);
/* Free a ring's point-to-point state (world teardown). */
void ovl__cpu_ring_free_p2p(ring *rg, int nranks);

/* cpu_stream.c. */
ovl_status ovl__cpu_stream_create(ovl__brank *br, int index,
                                  const char *name, stream *s,
                                  ovl_error *err);
void ovl__cpu_stream_destroy(stream *s);
void *ovl__cpu_worker_main(void *arg);
stream *ovl__cpu_get_stream(ovl__brank *br, int index, ovl_error *err);
ovl_status ovl__cpu_enqueue(stream *s, const cmd *tmpl, ovl_error *err);
ovl_status ovl__cpu_event_record(ovl__brank *br, int event, int stream_idx,
                                 ovl_error *err);
ovl_status ovl__cpu_stream_wait_event(ovl__brank *br, int stream_idx,
                                      int event, ovl_error *err);
ovl_status ovl__cpu_stream_sync(ovl__brank *br, int stream_idx,
                                ovl_error *err);
bool ovl__cpu_rank_quiesce(ovl__brank *br);
ovl_status ovl__cpu_streams_reserve(ovl__brank *br, int nstreams,
                                    const char *const *names,
                                    ovl_error *err);

#endif /* OVL_CPU_H */
