/*
 * The cpu backend: emulated devices with real concurrency.
 *
 * Every stream is a FIFO of commands served by its own worker thread, so
 * streams of one rank really run at the same time and a missing wait really
 * shows as a wrong result. Events are host-side snapshots (stream, number of
 * commands enqueued so far), exactly as cudaEventRecord; a wait is a command
 * that blocks its worker until the source stream has finished that many
 * commands.
 *
 * Collectives meet at a rendezvous per ring: the k-th collective a rank
 * enqueues on ring r (k counted from 0 on the host thread at enqueue time)
 * meets the k-th of every other rank, whatever stream each put it on. The
 * last rank to arrive checks that all agree, computes the result for every
 * rank (reducing in rank order, in the dtype) and wakes the others.
 *
 * Every wait is on a condition variable (timed ones on CLOCK_MONOTONIC);
 * nothing polls; only the delay command and chaos sleep.
 *
 * Chaos (world_tune with chaos_seed != 0): each worker sleeps a
 * pseudo-random 0..CHAOS_MAX_US before every command it runs, drawn from a
 * generator of its own seeded from (seed, rank, stream), so each stream's
 * sequence of delays is fixed by the seed. Streams then interleave in ways
 * a plain run never shows: work that nothing orders after other work gets a
 * fair chance to run before it, and a missing wait gives wrong numbers.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

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

typedef enum { CMD_KERNEL, CMD_COLL, CMD_WAIT, CMD_DELAY, CMD_MARK } cmd_kind;

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
      ring *ring;
      uint64_t seq;
      arrival a;
    } coll;
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
  char name[24]; /* "calc" or "comm[R]" */
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* the worker waits for commands */
  pthread_cond_t done_cv; /* `done` moved, or the world was aborted */
  cmd *head, *tail;
  uint64_t enq;  /* commands enqueued (host thread) */
  uint64_t done; /* commands finished, failed or skipped (worker) */
  /* When the worker last started or finished a command: watchers measure
   * their timeout from it. */
  double progress_at;
  /* The worker is in a collective or a wait, which time out by themselves:
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

typedef enum { SLOT_OPEN, SLOT_COMPUTING, SLOT_DONE, SLOT_FAILED } slot_state;

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

struct ring {
  int id;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* any slot of the ring changed state, or abort */
  slot *active;
  slot *free; /* reused once every rank has left */
};

struct ovl__bworld {
  int nranks;
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
  stream *streams; /* 1 + nrings */
  event *events;   /* nevents (2 * nrings, then named); host thread only */
  int nevents;
  ring *rings[OVL_MAX_RINGS];
  uint64_t seq[OVL_MAX_RINGS]; /* next collective number, per ring */
  /* Timer marks (--op-times): host clock when a stream reached each one.
   * Written by workers, read by the host after a sync of those streams. */
  double *marks;
  size_t nmarks;
};

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static int cond_init(pthread_cond_t *cv) {
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
static bool cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
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

static bool is_aborted(ovl__bworld *bw) {
  return atomic_load(&bw->aborted) != 0;
}

static const char *coll_name(ovl__coll coll) {
  switch (coll) {
  case OVL_COLL_ALLREDUCE:
    return "allreduce";
  case OVL_COLL_BROADCAST:
    return "broadcast";
  case OVL_COLL_ALLGATHER:
    return "allgather";
  case OVL_COLL_REDUCESCATTER:
    return "reducescatter";
  }
  return "?";
}

static const char *redop_name(ovl__redop op) {
  switch (op) {
  case OVL_RED_SUM:
    return "sum";
  case OVL_RED_MAX:
    return "max";
  case OVL_RED_MIN:
    return "min";
  case OVL_RED_PROD:
    return "prod";
  }
  return "?";
}

static bool has_redop(ovl__coll coll) {
  return coll == OVL_COLL_ALLREDUCE || coll == OVL_COLL_REDUCESCATTER;
}

/* "allreduce sum", "broadcast root=1", "allgather". */
static void describe_op(const arrival *a, char *buf, size_t size) {
  if (has_redop(a->coll))
    snprintf(buf, size, "%s %s", coll_name(a->coll), redop_name(a->redop));
  else if (a->coll == OVL_COLL_BROADCAST)
    snprintf(buf, size, "%s root=%d", coll_name(a->coll), a->root);
  else
    snprintf(buf, size, "%s", coll_name(a->coll));
}

/* "allreduce sum float32 count=100". */
static void describe_call(const arrival *a, char *buf, size_t size) {
  char op[64];
  describe_op(a, op, sizeof op);
  snprintf(buf, size, "%s %s count=%zu", op, ovl_dtype_name(a->dtype),
           a->count);
}

static bool same_call(const arrival *a, const arrival *b) {
  if (a->coll != b->coll || a->dtype != b->dtype || a->count != b->count)
    return false;
  if (has_redop(a->coll) && a->redop != b->redop)
    return false;
  if (a->coll == OVL_COLL_BROADCAST && a->root != b->root)
    return false;
  return true;
}

/* Append "rank 2" or "ranks 1,3" for the ranks whose bit is set in `set`. */
static size_t append_ranks(char *buf, size_t size, size_t len, uint64_t set,
                           int nranks) {
  int n = 0;
  for (int r = 0; r < nranks; r++)
    n += (set >> r) & 1;
  if (len < size)
    len += (size_t)snprintf(buf + len, size - len, n == 1 ? "rank " : "ranks ");
  for (int r = 0, first = 1; r < nranks; r++) {
    if (!((set >> r) & 1) || len >= size)
      continue;
    len += (size_t)snprintf(buf + len, size - len, first ? "%d" : ",%d", r);
    first = 0;
  }
  return len;
}

static void set_error(ovl_error *err, ovl_status status, const stream *s,
                      const char *what) {
  ovl__err(err, status, "rank %d: %s stream: %s", s->br->rank, s->name, what);
}

/* ------------------------------------------------------------------ */
/* Kernels                                                             */
/* ------------------------------------------------------------------ */

/* One kernel per dtype; exact aliasing of out with x or y is fine because
 * element i is read before it is written. SCALE rounds the product to T
 * before adding, as (T)scale * x + (T)bias written in two statements (no
 * contraction into a fused multiply-add). */
#define DEFINE_ELEMENTWISE(T, SUFFIX)                                         \
  static void elementwise_##SUFFIX(ovl__ew fn, T *out, const T *x,            \
                                   const T *y, double scale, double bias,     \
                                   size_t n) {                                \
    const T s = (T)scale, b = (T)bias;                                        \
    switch (fn) {                                                             \
    case OVL_EW_ASSIGN:                                                       \
      if (out != x)                                                           \
        memmove(out, x, n * sizeof(T));                                       \
      break;                                                                  \
    case OVL_EW_ADD:                                                          \
      for (size_t i = 0; i < n; i++)                                          \
        out[i] = x[i] + y[i];                                                 \
      break;                                                                  \
    case OVL_EW_SUB:                                                          \
      for (size_t i = 0; i < n; i++)                                          \
        out[i] = x[i] - y[i];                                                 \
      break;                                                                  \
    case OVL_EW_MUL:                                                          \
      for (size_t i = 0; i < n; i++)                                          \
        out[i] = x[i] * y[i];                                                 \
      break;                                                                  \
    case OVL_EW_SCALE:                                                        \
      for (size_t i = 0; i < n; i++) {                                        \
        T t = s * x[i];                                                       \
        out[i] = t + b;                                                       \
      }                                                                       \
      break;                                                                  \
    }                                                                         \
  }

DEFINE_ELEMENTWISE(float, f32)
DEFINE_ELEMENTWISE(double, f64)

/* acc = op(acc, v) for a block. max and min propagate NaN (a poisoned,
 * never written input must show in the result, not vanish). */
#define DEFINE_REDUCE(T, SUFFIX)                                              \
  static void reduce_##SUFFIX(ovl__redop op, T *acc, const T *v, size_t n) { \
    switch (op) {                                                             \
    case OVL_RED_SUM:                                                         \
      for (size_t i = 0; i < n; i++)                                          \
        acc[i] = acc[i] + v[i];                                               \
      break;                                                                  \
    case OVL_RED_PROD:                                                        \
      for (size_t i = 0; i < n; i++)                                          \
        acc[i] = acc[i] * v[i];                                               \
      break;                                                                  \
    case OVL_RED_MAX:                                                         \
      for (size_t i = 0; i < n; i++)                                          \
        if (v[i] != v[i] || v[i] > acc[i])                                    \
          acc[i] = acc[i] != acc[i] ? acc[i] : v[i];                          \
      break;                                                                  \
    case OVL_RED_MIN:                                                         \
      for (size_t i = 0; i < n; i++)                                          \
        if (v[i] != v[i] || v[i] < acc[i])                                    \
          acc[i] = acc[i] != acc[i] ? acc[i] : v[i];                          \
      break;                                                                  \
    }                                                                         \
  }

DEFINE_REDUCE(float, f32)
DEFINE_REDUCE(double, f64)

static void reduce_block(ovl_dtype dtype, ovl__redop op, void *acc,
                         const void *v, size_t n) {
  if (dtype == OVL_DTYPE_FLOAT64)
    reduce_f64(op, acc, v, n);
  else
    reduce_f32(op, acc, v, n);
}

/* The last rank to arrive runs this for all, outside the ring lock: the
 * others wait for SLOT_DONE, so their buffers stay put. */
static void compute_collective(const slot *sl, int nranks) {
  const arrival *a0 = &sl->a[0];
  const size_t esize = ovl_dtype_size(a0->dtype);
  const size_t count = a0->count;
  union {
    float f[BLOCK];
    double d[BLOCK];
  } acc;

  switch (a0->coll) {
  case OVL_COLL_ALLREDUCE:
    for (size_t off = 0; off < count; off += BLOCK) {
      size_t n = count - off < BLOCK ? count - off : BLOCK;
      memcpy(&acc, (const char *)sl->a[0].send + off * esize, n * esize);
      for (int q = 1; q < nranks; q++)
        reduce_block(a0->dtype, a0->redop, &acc,
                     (const char *)sl->a[q].send + off * esize, n);
      for (int r = 0; r < nranks; r++)
        memcpy((char *)sl->a[r].recv + off * esize, &acc, n * esize);
    }
    break;
  case OVL_COLL_REDUCESCATTER:
    /* recv_r = reduction of the r-th piece of every send. In place (recv_r
     * inside send_r at r * count) reads each block before writing it. */
    for (int r = 0; r < nranks; r++) {
      for (size_t off = 0; off < count; off += BLOCK) {
        size_t n = count - off < BLOCK ? count - off : BLOCK;
        size_t src = ((size_t)r * count + off) * esize;
        memcpy(&acc, (const char *)sl->a[0].send + src, n * esize);
        for (int q = 1; q < nranks; q++)
          reduce_block(a0->dtype, a0->redop, &acc,
                       (const char *)sl->a[q].send + src, n);
        memcpy((char *)sl->a[r].recv + off * esize, &acc, n * esize);
      }
    }
    break;
  case OVL_COLL_BROADCAST: {
    const void *src = sl->a[a0->root].send;
    for (int r = 0; r < nranks; r++)
      if (sl->a[r].recv != src)
        memmove(sl->a[r].recv, src, count * esize);
    break;
  }
  case OVL_COLL_ALLGATHER:
    for (int r = 0; r < nranks; r++)
      for (int q = 0; q < nranks; q++) {
        char *dst = (char *)sl->a[r].recv + (size_t)q * count * esize;
        if (dst != sl->a[q].send)
          memmove(dst, sl->a[q].send, count * esize);
      }
    break;
  }
}

/* ------------------------------------------------------------------ */
/* Rendezvous                                                          */
/* ------------------------------------------------------------------ */

static slot *slot_get(ring *rg, uint64_t seq, int nranks) {
  slot *sl;
  for (sl = rg->active; sl != NULL; sl = sl->next)
    if (sl->seq == seq)
      return sl;
  if (rg->free != NULL) {
    sl = rg->free;
    rg->free = sl->next;
  } else {
    sl = malloc(sizeof *sl + (size_t)nranks * sizeof(arrival));
    if (sl == NULL)
      return NULL;
  }
  sl->seq = seq;
  sl->state = SLOT_OPEN;
  sl->arrived = 0;
  sl->narrived = 0;
  sl->nleft = 0;
  sl->status = OVL_OK;
  sl->msg[0] = '\0';
  sl->next = rg->active;
  rg->active = sl;
  return sl;
}

/* A rank is done with the slot; the last of all ranks recycles it. A slot
 * that failed before every rank arrived stays until the missing ranks come
 * (they fail at once) or the world ends. */
static void slot_leave(ring *rg, slot *sl, int nranks) {
  if (++sl->nleft < nranks)
    return;
  for (slot **p = &rg->active; *p != NULL; p = &(*p)->next)
    if (*p == sl) {
      *p = sl->next;
      break;
    }
  sl->next = rg->free;
  rg->free = sl;
}

static void slot_fail(ring *rg, slot *sl, ovl_status status, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void slot_fail(ring *rg, slot *sl, ovl_status status, const char *fmt,
                      ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sl->msg, sizeof sl->msg, fmt, ap);
  va_end(ap);
  sl->status = status;
  sl->state = SLOT_FAILED;
  pthread_cond_broadcast(&rg->cv);
}

/* "ring 0 collective #3: ranks 0,2 issued allreduce sum float32 count=100;
 * rank 1 issued broadcast root=0 float32 count=100". False if all agree. */
static bool find_mismatch(const ovl__bworld *bw, const ring *rg,
                          const slot *sl, char *buf, size_t size) {
  int n = bw->nranks;
  int r;
  for (r = 1; r < n; r++)
    if (!same_call(&sl->a[0], &sl->a[r]))
      break;
  if (r == n)
    return false;
  size_t len = (size_t)snprintf(buf, size, "ring %d collective #%llu: ",
                                rg->id, (unsigned long long)sl->seq);
  uint64_t described = 0;
  for (r = 0; r < n; r++) {
    if ((described >> r) & 1)
      continue;
    uint64_t group = 0;
    for (int q = r; q < n; q++)
      if (same_call(&sl->a[r], &sl->a[q]))
        group |= 1ull << q;
    described |= group;
    char call[128];
    describe_call(&sl->a[r], call, sizeof call);
    if (r > 0 && len < size)
      len += (size_t)snprintf(buf + len, size - len, "; ");
    len = append_ranks(buf, size, len, group, n);
    if (len < size)
      len += (size_t)snprintf(buf + len, size - len, " issued %s", call);
  }
  return true;
}

/* Run one collective of rank `rank`: arrive, wait for the others, and
 * return OVL_OK once the result is in every recv buffer. */
static ovl_status rendezvous(ovl__bworld *bw, ring *rg, uint64_t seq,
                             int rank, const arrival *a, ovl_error *err) {
  const int n = bw->nranks;
  const double timeout = bw->timeout_s;
  char op[64], buf[OVL_ERROR_MSG_MAX];
  ovl_status st = OVL_OK;
  slot *sl;

  describe_op(a, op, sizeof op);
  pthread_mutex_lock(&rg->mu);
  sl = slot_get(rg, seq, n);
  if (sl == NULL) {
    pthread_mutex_unlock(&rg->mu);
    return ovl__err(err, OVL_ENOMEM,
                    "ring %d collective #%llu (%s): out of memory", rg->id,
                    (unsigned long long)seq, op);
  }
  sl->a[rank] = *a;
  sl->arrived |= 1ull << rank;
  sl->narrived++;

  if (sl->state == SLOT_FAILED) {
    /* The others gave up before this rank came. */
    st = ovl__err(err, sl->status,
                  "ring %d collective #%llu (%s): arrived after the other "
                  "ranks had failed: %s",
                  rg->id, (unsigned long long)seq, op, sl->msg);
    slot_leave(rg, sl, n);
    pthread_mutex_unlock(&rg->mu);
    return st;
  }
  if (a->skipped) {
    slot_fail(rg, sl, OVL_EABORTED,
              "ring %d collective #%llu (%s): rank %d did not take part "
              "because its stream had already failed",
              rg->id, (unsigned long long)seq, op, rank);
  } else if (is_aborted(bw)) {
    slot_fail(rg, sl, OVL_EABORTED,
              "ring %d collective #%llu (%s): aborted", rg->id,
              (unsigned long long)seq, op);
  } else if (sl->narrived == n) {
    if (find_mismatch(bw, rg, sl, buf, sizeof buf)) {
      slot_fail(rg, sl, OVL_EMISMATCH, "%s", buf);
    } else {
      sl->state = SLOT_COMPUTING;
      pthread_mutex_unlock(&rg->mu);
      compute_collective(sl, n);
      pthread_mutex_lock(&rg->mu);
      sl->state = SLOT_DONE;
      pthread_cond_broadcast(&rg->cv);
    }
  } else {
    double deadline = ovl__now() + timeout;
    while (sl->state == SLOT_OPEN) {
      if (is_aborted(bw)) {
        slot_fail(rg, sl, OVL_EABORTED,
                  "ring %d collective #%llu (%s): aborted", rg->id,
                  (unsigned long long)seq, op);
        break;
      }
      if (!cond_wait_until(&rg->cv, &rg->mu, deadline) &&
          sl->state == SLOT_OPEN) {
        size_t len = (size_t)snprintf(
            buf, sizeof buf,
            "ring %d collective #%llu (%s): timed out after %.1f s waiting "
            "for ",
            rg->id, (unsigned long long)seq, op, timeout);
        uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
        append_ranks(buf, sizeof buf, len, all & ~sl->arrived, n);
        slot_fail(rg, sl, OVL_ETIMEDOUT, "%s", buf);
      }
    }
    /* The last rank is writing into every recv buffer: let it finish. */
    while (sl->state == SLOT_COMPUTING)
      pthread_cond_wait(&rg->cv, &rg->mu);
  }
  if (sl->state == SLOT_FAILED)
    st = ovl__err(err, sl->status, "%s", sl->msg);
  slot_leave(rg, sl, n);
  pthread_mutex_unlock(&rg->mu);
  return st;
}

/* ------------------------------------------------------------------ */
/* Workers                                                             */
/* ------------------------------------------------------------------ */

/* splitmix64: the chaos generator, and the mixing of its seed. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The first state of the chaos generator of (seed, rank, stream); never 0
 * (0 means off). */
static uint64_t chaos_init(unsigned seed, int rank, int stream_idx) {
  uint64_t st = (uint64_t)seed;
  uint64_t a = splitmix64(&st);
  st = a ^ ((uint64_t)(unsigned)rank << 32 | (uint64_t)(unsigned)stream_idx);
  a = splitmix64(&st);
  return a != 0 ? a : 1;
}

/* The next chaos delay of a stream, in microseconds. */
static double chaos_us(stream *s) {
  double u = (double)(splitmix64(&s->chaos) >> 11) * 0x1.0p-53;
  return CHAOS_MAX_US * u * u * u * u;
}

/* Block until src has finished `target` commands. */
static ovl_status run_wait(stream *s, const cmd *c, ovl_error *err) {
  ovl__bworld *bw = s->br->bw;
  stream *src = c->u.wait.src;
  const double start = ovl__now();
  ovl_status st = OVL_OK;
  char what[OVL_ERROR_MSG_MAX];

  pthread_mutex_lock(&src->mu);
  while (src->done < c->u.wait.target) {
    if (is_aborted(bw)) {
      snprintf(what, sizeof what, "wait for event %d of %s stream aborted",
               c->u.wait.event, src->name);
      st = OVL_EABORTED;
      break;
    }
    if (src->blocked) {
      /* It unblocks only by finishing, which broadcasts done_cv. */
      pthread_cond_wait(&src->done_cv, &src->mu);
      continue;
    }
    double since = src->progress_at > start ? src->progress_at : start;
    if (ovl__now() >= since + bw->timeout_s) {
      snprintf(what, sizeof what,
               "waited %.1f s for event %d of %s stream (%llu of the %llu "
               "commands it waits for done)",
               ovl__now() - start, c->u.wait.event, src->name,
               (unsigned long long)src->done,
               (unsigned long long)c->u.wait.target);
      st = OVL_ETIMEDOUT;
      break;
    }
    cond_wait_until(&src->done_cv, &src->mu, since + bw->timeout_s);
  }
  pthread_mutex_unlock(&src->mu);
  if (st != OVL_OK)
    set_error(err, st, s, what);
  return st;
}

/* Sleep `us` microseconds, in slices of at most 10 ms so that an abort
 * ends a long delay promptly (a worker asleep in a 100 s delay would hold
 * up rank_fini, which joins it, long after the run failed). */
static void run_delay(ovl__bworld *bw, double us) {
  const double slice = 0.010;
  double end;
  if (!(us > 0))
    return;
  end = ovl__now() + us * 1e-6;
  for (;;) {
    struct timespec ts, rem;
    double left = end - ovl__now();
    if (left <= 0 || is_aborted(bw))
      return;
    if (left > slice)
      left = slice;
    ts.tv_sec = (time_t)left;
    ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR)
      ts = rem;
  }
}

/* Execute one command. A stream that already failed skips kernels, waits
 * and delays; it still shows up at its collectives, as skipped, so the
 * other ranks fail at once. */
static ovl_status run_cmd(stream *s, cmd *c, bool failed, ovl_error *err) {
  ovl__brank *br = s->br;
  ovl_status st;

  switch (c->kind) {
  case CMD_KERNEL:
    if (failed)
      return OVL_OK;
    if (c->u.kernel.dtype == OVL_DTYPE_FLOAT64)
      elementwise_f64(c->u.kernel.fn, c->u.kernel.out, c->u.kernel.x,
                      c->u.kernel.y, c->u.kernel.scale, c->u.kernel.bias,
                      c->u.kernel.n);
    else
      elementwise_f32(c->u.kernel.fn, c->u.kernel.out, c->u.kernel.x,
                      c->u.kernel.y, c->u.kernel.scale, c->u.kernel.bias,
                      c->u.kernel.n);
    return OVL_OK;
  case CMD_COLL:
    c->u.coll.a.skipped = failed;
    st = rendezvous(br->bw, c->u.coll.ring, c->u.coll.seq, br->rank,
                    &c->u.coll.a, err);
    if (st != OVL_OK)
      ovl__err_prefix(err, "rank %d: %s stream: ", br->rank, s->name);
    return failed ? OVL_OK : st;
  case CMD_WAIT:
    return failed ? OVL_OK : run_wait(s, c, err);
  case CMD_DELAY:
    if (!failed)
      run_delay(br->bw, c->u.delay.us);
    return OVL_OK;
  case CMD_MARK:
    br->marks[c->u.mark.index] = ovl__now();
    return OVL_OK;
  }
  return OVL_OK;
}

static void *worker_main(void *arg) {
  stream *s = arg;
  ovl_error err;

  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->exit)
      pthread_cond_wait(&s->work_cv, &s->mu);
    if (s->head == NULL)
      break; /* told to exit, and drained */
    cmd *c = s->head;
    s->head = c->next;
    if (s->head == NULL)
      s->tail = NULL;
    bool failed = s->status != OVL_OK;
    s->progress_at = ovl__now();
    s->blocked = !failed && (c->kind == CMD_COLL || c->kind == CMD_WAIT);
    pthread_mutex_unlock(&s->mu);

    /* Chaos: a sleep before every command but the timer marks (which are
     * not ops); none once the stream failed or the world was aborted. */
    if (s->chaos != 0 && c->kind != CMD_MARK) {
      double us = chaos_us(s);
      if (!failed && !is_aborted(s->br->bw))
        run_delay(s->br->bw, us);
    }
    ovl_status st = run_cmd(s, c, failed, &err);
    free(c);

    pthread_mutex_lock(&s->mu);
    if (st != OVL_OK && s->status == OVL_OK) {
      s->status = st;
      memcpy(s->msg, err.msg, sizeof s->msg);
    }
    s->done++;
    s->progress_at = ovl__now();
    s->blocked = false;
    pthread_cond_broadcast(&s->done_cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* World                                                               */
/* ------------------------------------------------------------------ */

static int cpu_device_count(void) { return OVL_MAX_RANKS; }

static int cpu_default_ranks(void) { return 2; }

static ovl_status cpu_world_init(int nranks, double timeout_s,
                                 ovl__bworld **out, ovl_error *err) {
  ovl__bworld *bw;
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "cpu backend: %d ranks requested, it emulates 1 to %d",
                    nranks, OVL_MAX_RANKS);
  bw = calloc(1, sizeof *bw);
  if (bw == NULL)
    return ovl__err(err, OVL_ENOMEM, "cpu backend: out of memory");
  if (pthread_mutex_init(&bw->mu, NULL) != 0) {
    free(bw);
    return ovl__err(err, OVL_EBACKEND, "cpu backend: pthread_mutex_init failed");
  }
  bw->nranks = nranks;
  bw->timeout_s = timeout_s > 0 ? timeout_s : 60.0;
  atomic_init(&bw->aborted, 0);
  snprintf(bw->devices, sizeof bw->devices, "%d emulated (cpu)", nranks);
  *out = bw;
  return OVL_OK;
}

static void ring_free(ring *rg) {
  slot *sl, *next;
  for (sl = rg->active; sl != NULL; sl = next) {
    next = sl->next;
    free(sl);
  }
  for (sl = rg->free; sl != NULL; sl = next) {
    next = sl->next;
    free(sl);
  }
  pthread_cond_destroy(&rg->cv);
  pthread_mutex_destroy(&rg->mu);
  free(rg);
}

/* With bw->mu held. */
static ovl_status ensure_rings(ovl__bworld *bw, int nrings, ovl_error *err) {
  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL,
                    "cpu backend: %d rings requested, at most %d", nrings,
                    OVL_MAX_RINGS);
  while (bw->nrings < nrings) {
    ring *rg = calloc(1, sizeof *rg);
    if (rg == NULL)
      return ovl__err(err, OVL_ENOMEM, "cpu backend: out of memory");
    if (pthread_mutex_init(&rg->mu, NULL) != 0) {
      free(rg);
      return ovl__err(err, OVL_EBACKEND,
                      "cpu backend: pthread_mutex_init failed");
    }
    if (cond_init(&rg->cv) != 0) {
      pthread_mutex_destroy(&rg->mu);
      free(rg);
      return ovl__err(err, OVL_EBACKEND,
                      "cpu backend: pthread_cond_init failed");
    }
    rg->id = bw->nrings;
    bw->rings[bw->nrings++] = rg;
  }
  return OVL_OK;
}

static ovl_status cpu_world_rings(ovl__bworld *bw, int nrings,
                                  ovl_error *err) {
  pthread_mutex_lock(&bw->mu);
  ovl_status st = ensure_rings(bw, nrings, err);
  pthread_mutex_unlock(&bw->mu);
  return st;
}

static const char *cpu_world_devices(ovl__bworld *bw) { return bw->devices; }

static const char *cpu_device_name(ovl__bworld *bw, int rank) {
  (void)bw;
  (void)rank;
  return "emulated (cpu)";
}

/* No driver, runtime or NCCL: the fields stay "n/a". */
static void cpu_world_info(ovl__bworld *bw, ovl_world_info *info) {
  (void)bw;
  (void)info;
}

/* Chaos is this backend's only knob; the cuda ones are refused. */
static ovl_status cpu_world_tune(ovl__bworld *bw, const ovl_world_opts *o,
                                 ovl_error *err) {
  if (o->comm_priority_high || o->nccl_min_ctas || o->nccl_max_ctas)
    return ovl__err(err, OVL_EINVAL,
                    "backend 'cpu' has no comm stream priority or NCCL CTA "
                    "limits (the cuda backend has)");
  /* Read by each rank_init: it applies from the next run on. */
  bw->chaos_seed = o->chaos_seed;
  return OVL_OK;
}

static void cpu_world_fini(ovl__bworld *bw) {
  if (bw == NULL)
    return;
  for (int i = 0; i < bw->nrings; i++)
    ring_free(bw->rings[i]);
  pthread_mutex_destroy(&bw->mu);
  free(bw);
}

/* Set the flag, then broadcast under every lock a waiter may hold while it
 * checks the flag, so no waiter misses the wake-up. */
static void cpu_world_abort(ovl__bworld *bw) {
  atomic_store(&bw->aborted, 1);
  pthread_mutex_lock(&bw->mu);
  for (int i = 0; i < bw->nrings; i++) {
    pthread_mutex_lock(&bw->rings[i]->mu);
    pthread_cond_broadcast(&bw->rings[i]->cv);
    pthread_mutex_unlock(&bw->rings[i]->mu);
  }
  for (int r = 0; r < bw->nranks; r++) {
    ovl__brank *br = bw->ranks[r];
    if (br == NULL)
      continue;
    for (int i = 0; i < br->nstreams; i++) {
      pthread_mutex_lock(&br->streams[i].mu);
      pthread_cond_broadcast(&br->streams[i].done_cv);
      pthread_mutex_unlock(&br->streams[i].mu);
    }
  }
  pthread_mutex_unlock(&bw->mu);
}

/* ------------------------------------------------------------------ */
/* Ranks                                                               */
/* ------------------------------------------------------------------ */

static void stream_destroy(stream *s) {
  cmd *c, *next;
  for (c = s->head; c != NULL; c = next) {
    next = c->next;
    free(c);
  }
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->work_cv);
  pthread_mutex_destroy(&s->mu);
}

static ovl_status stream_create(ovl__brank *br, int index, stream *s,
                                ovl_error *err) {
  memset(s, 0, sizeof *s);
  s->br = br;
  s->index = index;
  if (index == OVL_STREAM_CALC)
    snprintf(s->name, sizeof s->name, "calc");
  else
    snprintf(s->name, sizeof s->name, "comm[%d]", index - 1);
  s->status = OVL_OK;
  if (br->bw->chaos_seed != 0)
    s->chaos = chaos_init(br->bw->chaos_seed, br->rank, index);
  if (pthread_mutex_init(&s->mu, NULL) != 0)
    goto fail;
  if (cond_init(&s->work_cv) != 0) {
    pthread_mutex_destroy(&s->mu);
    goto fail;
  }
  if (cond_init(&s->done_cv) != 0) {
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    goto fail;
  }
  s->progress_at = ovl__now();
  return OVL_OK;
fail:
  return ovl__err(err, OVL_EBACKEND,
                  "rank %d: %s stream: cannot create its locks", br->rank,
                  s->name);
}

/* Tell every worker to exit once drained, join them, and free. */
static void rank_destroy(ovl__brank *br, int ncreated) {
  for (int i = 0; i < ncreated; i++) {
    stream *s = &br->streams[i];
    pthread_mutex_lock(&s->mu);
    s->exit = true;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
  }
  for (int i = 0; i < ncreated; i++)
    if (br->streams[i].started)
      pthread_join(br->streams[i].thread, NULL);
  for (int i = 0; i < ncreated; i++)
    stream_destroy(&br->streams[i]);
  free(br->streams);
  free(br->events);
  free(br->marks);
  free(br);
}

static ovl_status cpu_rank_init(ovl__bworld *bw, int rank, int nrings,
                                ovl__brank **out, ovl_error *err) {
  ovl__brank *br;
  ovl_status st = OVL_OK;
  int created = 0;

  if (rank < 0 || rank >= bw->nranks)
    return ovl__err(err, OVL_EINVAL, "rank %d: not in a world of %d ranks",
                    rank, bw->nranks);
  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d rings, at most %d", rank,
                    nrings, OVL_MAX_RINGS);
  br = calloc(1, sizeof *br);
  if (br == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
  br->bw = bw;
  br->rank = rank;
  br->nrings = nrings;
  br->nstreams = 1 + nrings;
  br->streams = calloc((size_t)br->nstreams, sizeof *br->streams);
  br->events = calloc(2 * (size_t)nrings + 1, sizeof *br->events);
  br->nevents = 2 * nrings;
  if (br->streams == NULL || br->events == NULL) {
    st = ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
    goto fail;
  }
  for (; created < br->nstreams; created++) {
    st = stream_create(br, created, &br->streams[created], err);
    if (st != OVL_OK)
      goto fail;
  }
  for (int i = 0; i < br->nstreams; i++) {
    stream *s = &br->streams[i];
    if (pthread_create(&s->thread, NULL, worker_main, s) != 0) {
      st = ovl__err(err, OVL_EBACKEND,
                    "rank %d: %s stream: cannot start its worker thread",
                    rank, s->name);
      goto fail;
    }
    s->started = true;
  }

  pthread_mutex_lock(&bw->mu);
  if (bw->ranks[rank] != NULL)
    st = ovl__err(err, OVL_EINVAL, "rank %d: initialised twice", rank);
  else
    st = ensure_rings(bw, nrings, err);
  if (st == OVL_OK) {
    for (int i = 0; i < nrings; i++)
      br->rings[i] = bw->rings[i];
    bw->ranks[rank] = br;
  }
  pthread_mutex_unlock(&bw->mu);
  if (st != OVL_OK)
    goto fail;
  *out = br;
  return OVL_OK;

fail:
  if (br->streams != NULL)
    rank_destroy(br, created);
  else {
    free(br->events);
    free(br);
  }
  return st;
}

static ovl_status cpu_events_reserve(ovl__brank *br, int nevents,
                                     ovl_error *err) {
  event *ev;
  if (nevents < 0)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d events", br->rank,
                    nevents);
  if (nevents <= br->nevents)
    return OVL_OK;
  ev = realloc(br->events, (size_t)nevents * sizeof *ev);
  if (ev == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %d events",
                    br->rank, nevents);
  memset(ev + br->nevents, 0, (size_t)(nevents - br->nevents) * sizeof *ev);
  br->events = ev;
  br->nevents = nevents;
  return OVL_OK;
}

static void cpu_rank_fini(ovl__brank *br) {
  ovl__bworld *bw;
  if (br == NULL)
    return;
  bw = br->bw;
  /* Leave the world first, so that an abort never touches freed streams. */
  pthread_mutex_lock(&bw->mu);
  if (bw->ranks[br->rank] == br)
    bw->ranks[br->rank] = NULL;
  pthread_mutex_unlock(&bw->mu);
  rank_destroy(br, br->nstreams);
}

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

static ovl_status cpu_mem_alloc(ovl__brank *br, size_t bytes, void **out,
                                ovl_error *err) {
  void *p = NULL;
  size_t size = (bytes + 63) & ~(size_t)63;
  if (size < bytes || posix_memalign(&p, 64, size ? size : 64) != 0)
    return ovl__err(err, OVL_ENOMEM, "rank %d: cannot allocate %zu bytes",
                    br->rank, bytes);
  /* All-ones bytes are a NaN in both float32 and float64. */
  memset(p, 0xFF, size ? size : 64);
  *out = p;
  return OVL_OK;
}

static void cpu_mem_free(ovl__brank *br, void *ptr) {
  (void)br;
  free(ptr);
}

/* Host buffers are plain memory: the emulated device copies with memcpy. */
static ovl_status cpu_host_alloc(ovl__brank *br, size_t bytes, void **out,
                                 ovl_error *err) {
  *out = malloc(bytes ? bytes : 1);
  if (*out == NULL)
    return ovl__err(err, OVL_ENOMEM,
                    "rank %d: cannot allocate %zu bytes of host memory",
                    br->rank, bytes);
  return OVL_OK;
}

static ovl_status cpu_mem_upload(ovl__brank *br, void *dst, const void *src,
                                 size_t bytes, ovl_error *err) {
  (void)br;
  (void)err;
  if (bytes > 0)
    memcpy(dst, src, bytes);
  return OVL_OK;
}

static ovl_status cpu_mem_download(ovl__brank *br, void *dst,
                                   const void *src, size_t bytes,
                                   ovl_error *err) {
  (void)br;
  (void)err;
  if (bytes > 0)
    memcpy(dst, src, bytes);
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Streams and events                                                  */
/* ------------------------------------------------------------------ */

/* The stream numbered `index`, or NULL (and OVL_EINVAL in err). */
static stream *get_stream(ovl__brank *br, int index, ovl_error *err) {
  if (index < 0 || index >= br->nstreams) {
    ovl__err(err, OVL_EINVAL,
             "rank %d: no stream %d (it has calc and %d comm streams)",
             br->rank, index, br->nrings);
    return NULL;
  }
  return &br->streams[index];
}

/* Queue a copy of *tmpl on s. */
static ovl_status enqueue(stream *s, const cmd *tmpl, ovl_error *err) {
  cmd *c = malloc(sizeof *c);
  if (c == NULL) {
    set_error(err, OVL_ENOMEM, s, "out of memory queuing a command");
    return OVL_ENOMEM;
  }
  *c = *tmpl;
  c->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->tail != NULL)
    s->tail->next = c;
  else
    s->head = c;
  s->tail = c;
  s->enq++;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  return OVL_OK;
}

static ovl_status cpu_event_record(ovl__brank *br, int event, int stream_idx,
                                   ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  if (s == NULL)
    return OVL_EINVAL;
  if (event < 0 || event >= br->nevents)
    return ovl__err(err, OVL_EINVAL, "rank %d: no event %d", br->rank, event);
  pthread_mutex_lock(&s->mu);
  br->events[event].target = s->enq;
  pthread_mutex_unlock(&s->mu);
  br->events[event].src = s;
  br->events[event].recorded = true;
  return OVL_OK;
}

static ovl_status cpu_stream_wait_event(ovl__brank *br, int stream_idx,
                                        int event, ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  if (event < 0 || event >= br->nevents)
    return ovl__err(err, OVL_EINVAL, "rank %d: no event %d", br->rank, event);
  if (!br->events[event].recorded)
    return OVL_OK; /* CUDA: waiting on a never-recorded event is a no-op. */
  memset(&c, 0, sizeof c);
  c.kind = CMD_WAIT;
  c.u.wait.src = br->events[event].src;
  c.u.wait.target = br->events[event].target;
  c.u.wait.event = event;
  return enqueue(s, &c, err);
}

static ovl_status cpu_stream_sync(ovl__brank *br, int stream_idx,
                                  ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  ovl_status st;
  if (s == NULL)
    return OVL_EINVAL;
  const double start = ovl__now();
  const double timeout = br->bw->timeout_s;
  char what[128];

  pthread_mutex_lock(&s->mu);
  const uint64_t target = s->enq;
  /* After an abort the stream still drains promptly (its collectives and
   * waits fail at once), so keep waiting for it and return its error: the
   * caller may free buffers its commands use once this returns. */
  while (s->done < target) {
    if (s->blocked) {
      pthread_cond_wait(&s->done_cv, &s->mu);
      continue;
    }
    double since = s->progress_at > start ? s->progress_at : start;
    if (ovl__now() >= since + timeout) {
      snprintf(what, sizeof what,
               "sync timed out after %.1f s (%llu of %llu commands done)",
               ovl__now() - start, (unsigned long long)s->done,
               (unsigned long long)target);
      pthread_mutex_unlock(&s->mu);
      set_error(err, OVL_ETIMEDOUT, s, what);
      return OVL_ETIMEDOUT;
    }
    cond_wait_until(&s->done_cv, &s->mu, since + timeout);
  }
  st = s->status;
  if (st != OVL_OK)
    ovl__err(err, st, "%s", s->msg);
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* ------------------------------------------------------------------ */
/* Work                                                                */
/* ------------------------------------------------------------------ */

static bool dtype_ok(ovl_dtype dtype) {
  return dtype == OVL_DTYPE_FLOAT32 || dtype == OVL_DTYPE_FLOAT64;
}

static ovl_status cpu_elementwise(ovl__brank *br, int stream_idx, ovl__ew fn,
                                  ovl_dtype dtype, void *out, const void *x,
                                  const void *y, double scale, double bias,
                                  size_t n, ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  bool binary = fn == OVL_EW_ADD || fn == OVL_EW_SUB || fn == OVL_EW_MUL;
  if (fn < OVL_EW_ASSIGN || fn > OVL_EW_SCALE || !dtype_ok(dtype) ||
      (n > 0 && (out == NULL || x == NULL || (binary && y == NULL)))) {
    set_error(err, OVL_EINVAL, s, "invalid elementwise kernel arguments");
    return OVL_EINVAL;
  }
  memset(&c, 0, sizeof c);
  c.kind = CMD_KERNEL;
  c.u.kernel.fn = fn;
  c.u.kernel.dtype = dtype;
  c.u.kernel.out = out;
  c.u.kernel.x = x;
  c.u.kernel.y = y;
  c.u.kernel.scale = scale;
  c.u.kernel.bias = bias;
  c.u.kernel.n = n;
  return enqueue(s, &c, err);
}

static ovl_status cpu_collective(ovl__brank *br, int stream_idx, int ring_id,
                                 ovl__coll coll, ovl__redop redop,
                                 ovl_dtype dtype, const void *send, void *recv,
                                 size_t count, int root, ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  cmd c;
  char what[128];
  ovl_status st;
  if (s == NULL)
    return OVL_EINVAL;
  if (ring_id < 0 || ring_id >= br->nrings) {
    snprintf(what, sizeof what, "no ring %d (the rank has %d)", ring_id,
             br->nrings);
    set_error(err, OVL_EINVAL, s, what);
    return OVL_EINVAL;
  }
  if (coll < OVL_COLL_ALLREDUCE || coll > OVL_COLL_REDUCESCATTER ||
      redop < OVL_RED_SUM || redop > OVL_RED_PROD || !dtype_ok(dtype) ||
      (coll == OVL_COLL_BROADCAST && (root < 0 || root >= br->bw->nranks)) ||
      (count > 0 && (send == NULL || recv == NULL))) {
    snprintf(what, sizeof what,
             "invalid arguments to a collective on ring %d", ring_id);
    set_error(err, OVL_EINVAL, s, what);
    return OVL_EINVAL;
  }
  memset(&c, 0, sizeof c);
  c.kind = CMD_COLL;
  c.u.coll.ring = br->rings[ring_id];
  c.u.coll.seq = br->seq[ring_id];
  c.u.coll.a.coll = coll;
  c.u.coll.a.redop = redop;
  c.u.coll.a.dtype = dtype;
  c.u.coll.a.send = send;
  c.u.coll.a.recv = recv;
  c.u.coll.a.count = count;
  c.u.coll.a.root = coll == OVL_COLL_BROADCAST ? root : 0;
  st = enqueue(s, &c, err);
  if (st == OVL_OK)
    br->seq[ring_id]++;
  return st;
}

static ovl_status cpu_delay(ovl__brank *br, int stream_idx, double us,
                            ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  memset(&c, 0, sizeof c);
  c.kind = CMD_DELAY;
  c.u.delay.us = us;
  return enqueue(s, &c, err);
}

static ovl_status cpu_timers_reserve(ovl__brank *br, size_t n,
                                     ovl_error *err) {
  double *m = realloc(br->marks, (n ? n : 1) * sizeof *m);
  if (m == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %zu timers",
                    br->rank, n);
  for (size_t i = 0; i < n; i++)
    m[i] = NAN;
  br->marks = m;
  br->nmarks = n;
  return OVL_OK;
}

static ovl_status cpu_timer_mark(ovl__brank *br, size_t i, int stream_idx,
                                 ovl_error *err) {
  stream *s = get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  if (i >= br->nmarks)
    return ovl__err(err, OVL_EINVAL, "rank %d: timer %zu of %zu", br->rank,
                    i, br->nmarks);
  memset(&c, 0, sizeof c);
  c.kind = CMD_MARK;
  c.u.mark.index = i;
  return enqueue(s, &c, err);
}

static ovl_status cpu_timer_elapsed(ovl__brank *br, size_t a, size_t b,
                                    double *seconds, ovl_error *err) {
  if (a >= br->nmarks || b >= br->nmarks || isnan(br->marks[a]) ||
      isnan(br->marks[b]))
    return ovl__err(err, OVL_EINVAL, "rank %d: timers %zu, %zu not taken",
                    br->rank, a, b);
  *seconds = br->marks[b] - br->marks[a];
  return OVL_OK;
}

const ovl__backend_ops ovl__backend_cpu = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .default_ranks = cpu_default_ranks,
    .world_init = cpu_world_init,
    .world_rings = cpu_world_rings,
    .world_devices = cpu_world_devices,
    .device_name = cpu_device_name,
    .world_info = cpu_world_info,
    .world_fini = cpu_world_fini,
    .world_abort = cpu_world_abort,
    .rank_init = cpu_rank_init,
    .rank_fini = cpu_rank_fini,
    .events_reserve = cpu_events_reserve,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_mem_free,
    .mem_upload = cpu_mem_upload,
    .mem_download = cpu_mem_download,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .stream_sync = cpu_stream_sync,
    .elementwise = cpu_elementwise,
    .collective = cpu_collective,
    .delay = cpu_delay,
    .timers_reserve = cpu_timers_reserve,
    .timer_mark = cpu_timer_mark,
    .timer_elapsed = cpu_timer_elapsed,
    .world_tune = cpu_world_tune,
    /* Every command is malloc'd when enqueued and freed when run. */
    .host_bytes_per_command = OVL_MALLOC_BYTES(sizeof(cmd)),
    .host_bytes_per_timer = sizeof(double),
};
