/*
 * The processes of an MPI launch: joining it, the steps the processes
 * take together (each with a deadline), and the mailbox they talk through (see
 * procs.h and docs/ARCHITECTURE.md, "More than one process"). Without MPI
 * (configure without --with-mpi) only the public functions exist, and
 * ovl_procs_init never makes an ovl_procs.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "procs/procs.h"

/* The launcher's environment: Open MPI (OMPI_COMM_WORLD_RANK; PMIX_RANK
 * with Open MPI 5 and PRRTE), MPICH's Hydra and Slurm's PMI (PMI_RANK). */
int ovl_launcher_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                     "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    unsigned long r;
    if (v != NULL && ovl__parse_uint(v, 1u << 30, &r))
      return (int)r;
  }
  return -1;
}

#ifndef HAVE_MPI

int ovl_mpi_compiled(void) { return 0; }

ovl_status ovl_procs_init(int *argc, char ***argv, ovl_procs **out,
                          ovl_error *err) {
  (void)argc;
  (void)argv;
  if (out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_procs_init: out is NULL");
  *out = NULL;
  return OVL_OK;
}
int ovl_procs_rank(const ovl_procs *procs) {
  (void)procs;
  return 0;
}
int ovl_procs_size(const ovl_procs *procs) {
  (void)procs;
  return 1;
}
int ovl_procs_agree_exit(ovl_procs *procs, int code) {
  (void)procs;
  return code;
}
void ovl_procs_set_timeout(ovl_procs *procs, double seconds) {
  (void)procs;
  (void)seconds;
}
const char *ovl_procs_error(const ovl_procs *procs) {
  (void)procs;
  return NULL;
}
void ovl_procs_free(ovl_procs *procs) { (void)procs; }

/* Never called without MPI (there is no ovl_procs to call them with). */
int ovl__procs_rank(const ovl_procs *p) {
  (void)p;
  return 0;
}
int ovl__procs_size(const ovl_procs *p) {
  (void)p;
  return 1;
}
int ovl__procs_node_rank(const ovl_procs *p) {
  (void)p;
  return 0;
}
int ovl__procs_node_size(const ovl_procs *p) {
  (void)p;
  return 1;
}
static ovl_status no_mpi(ovl_error *err) {
  return ovl__err(err, OVL_EINVAL, "built without MPI");
}
ovl_status ovl__procs_allgather(ovl_procs *p, const void *in, void *out,
                                size_t bytes, ovl_error *err) {
  (void)p;
  (void)err;
  memmove(out, in, bytes);
  return OVL_OK;
}
ovl_status ovl__procs_allgather_rows(ovl_procs *p, const void *in, void *out,
                                     const int *counts, size_t row,
                                     ovl_error *err) {
  (void)p;
  (void)err;
  memmove(out, in, (size_t)counts[0] * row);
  return OVL_OK;
}
ovl_status ovl__procs_agree(ovl_procs *p, ovl_status st, ovl_error *err) {
  (void)p;
  (void)err;
  return st;
}
ovl_status ovl__procs_agree_failed(ovl_procs *p, ovl_status st,
                                   ovl_error *err) {
  (void)p;
  (void)err;
  return st;
}
ovl_status ovl__procs_bcast(ovl_procs *p, void *buf, size_t bytes, int root,
                            ovl_error *err) {
  (void)p;
  (void)buf;
  (void)bytes;
  (void)root;
  (void)err;
  return OVL_OK;
}
uint64_t ovl__procs_run_begin(ovl_procs *p, void (*on_abort)(void *ctx),
                              void *ctx) {
  (void)p;
  (void)on_abort;
  (void)ctx;
  return 0;
}
void ovl__procs_run_end(ovl_procs *p) { (void)p; }
void ovl__procs_abort_peers(ovl_procs *p) { (void)p; }
bool ovl__procs_aborted(ovl_procs *p) {
  (void)p;
  return false;
}
ovl_status ovl__procs_send(ovl_procs *p, int to, const ovl__msg_key *key,
                           const int64_t *aux, const void *data, size_t len,
                           ovl_error *err) {
  (void)p;
  (void)to;
  (void)key;
  (void)aux;
  (void)data;
  (void)len;
  return no_mpi(err);
}
ovl__msg *ovl__procs_take(ovl_procs *p, const ovl__msg_key *key) {
  (void)p;
  (void)key;
  return NULL;
}
ovl_status ovl__procs_wait(ovl_procs *p, const ovl__msg_key *key,
                           double deadline, bool (*stop)(void *ctx),
                           void *ctx, ovl__msg **out) {
  (void)p;
  (void)key;
  (void)deadline;
  (void)stop;
  (void)ctx;
  *out = NULL;
  return OVL_EINVAL;
}
ovl_status ovl__procs_exchange(ovl_procs *p, const ovl__msg_key *key,
                               const int64_t *aux, const void *data,
                               size_t len, double deadline,
                               bool (*stop)(void *ctx), void *ctx,
                               ovl__msg **msgs, int *missing,
                               ovl_error *err) {
  (void)p;
  (void)key;
  (void)aux;
  (void)data;
  (void)len;
  (void)deadline;
  (void)stop;
  (void)ctx;
  (void)msgs;
  (void)missing;
  return no_mpi(err);
}
void ovl__procs_backoff(unsigned n) { (void)n; }

#else /* HAVE_MPI */

#include <limits.h>
#include <mpi.h>
#include <pthread.h>

int ovl_mpi_compiled(void) { return 1; }

/* One send in flight: its request and the buffer it owns. */
typedef struct pend {
  struct pend *next;
  MPI_Request req;
  void *buf;
} pend;

struct ovl_procs_s {
  int rank, size, node_rank, node_size;
  MPI_Comm comm;
  /* Guards everything below and every MPI call of the mailbox. */
  pthread_mutex_t mu;
  ovl__msg *box; /* received, not yet taken; oldest first */
  pend *pending;
  uint64_t run;
  void (*on_abort)(void *ctx);
  void *abort_ctx;
  bool aborted;    /* another process aborted the current run */
  bool abort_sent; /* this process told the others */
  /* The steps taken together (ctl): how many so far, their deadline's
   * timeout, and whether the processes lost each other (then why). */
  uint64_t ctl_seq;
  double timeout_s;
  ovl_status broken;
  char broken_msg[OVL_ERROR_MSG_MAX];
  /* The last exit status agreed or given (ovl_procs_agree_exit). */
  int exit_code;
};

/* The wire header: the key, the aux fields and the payload's length. */
enum { W_KIND, W_RUN, W_RING, W_A, W_B, W_SEQ, W_AUX, W_LEN = W_AUX + OVL__MSG_AUX, W_N };
#define TAG 7

static ovl_status mpi_err(ovl_error *err, int rc, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "error %d", rc);
  return ovl__err(err, OVL_EBACKEND, "MPI: %s: %s", what, text);
}

ovl_status ovl_procs_init(int *argc, char ***argv, ovl_procs **out,
                          ovl_error *err) {
  ovl_procs *p;
  int provided = 0, rc, inited = 0;
  MPI_Comm node;

  if (out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_procs_init: out is NULL");
  *out = NULL;
  if (ovl_launcher_rank() < 0)
    return OVL_OK;
  MPI_Initialized(&inited);
  if (!inited) {
    rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      return mpi_err(err, rc, "MPI_Init_thread");
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    ovl__err(err, OVL_EBACKEND,
             "MPI: the library gives thread level %d, not "
             "MPI_THREAD_MULTIPLE (%d), which one thread per rank needs",
             provided, MPI_THREAD_MULTIPLE);
    MPI_Finalize();
    return OVL_EBACKEND;
  }
  p = calloc(1, sizeof *p);
  if (p == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p->size);
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &p->comm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, p->rank,
                             MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) {
    free(p);
    return mpi_err(err, rc, "MPI_Comm_dup");
  }
  MPI_Comm_rank(node, &p->node_rank);
  MPI_Comm_size(node, &p->node_size);
  MPI_Comm_free(&node);
  MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN);
  pthread_mutex_init(&p->mu, NULL);
  p->timeout_s = OVL__PROCS_DEFAULT_TIMEOUT_S;
  *out = p;
  return OVL_OK;
}

int ovl_procs_rank(const ovl_procs *procs) {
  return procs == NULL ? 0 : procs->rank;
}
int ovl_procs_size(const ovl_procs *procs) {
  return procs == NULL ? 1 : procs->size;
}
int ovl__procs_rank(const ovl_procs *p) { return p->rank; }
int ovl__procs_size(const ovl_procs *p) { return p->size; }
int ovl__procs_node_rank(const ovl_procs *p) { return p->node_rank; }
int ovl__procs_node_size(const ovl_procs *p) { return p->node_size; }


/* ---- the mailbox -------------------------------------------------- */

static bool key_match(const ovl__msg_key *want, const ovl__msg_key *got) {
  return want->kind == got->kind && want->run == got->run &&
         want->ring == got->ring && want->a == got->a && want->b == got->b &&
         want->seq == got->seq && (want->from < 0 || want->from == got->from);
}

/* Finished sends give their buffers back. With mu held. */
static void reap_sends(ovl_procs *p) {
  for (pend **q = &p->pending; *q != NULL;) {
    int done = 0;
    pend *s = *q;
    if (MPI_Test(&s->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      done = 1; /* an error: the peer is gone; nothing more will come */
    if (done) {
      *q = s->next;
      free(s->buf);
      free(s);
    } else {
      q = &s->next;
    }
  }
}

/* Receive everything that has come into the mailbox. With mu held.
 * Returns whether an abort of the current run came. */
static bool poll_locked(ovl_procs *p) {
  bool abort_now = false;
  for (;;) {
    int flag = 0, count = 0;
    MPI_Message m;
    MPI_Status status;
    int64_t *buf;
    ovl__msg *msg, **tail;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG, p->comm, &flag, &m, &status) !=
            MPI_SUCCESS ||
        !flag)
      break;
    MPI_Get_count(&status, MPI_BYTE, &count);
    buf = malloc(count > 0 ? (size_t)count : 1);
    if (buf == NULL || MPI_Mrecv(buf, count, MPI_BYTE, &m, &status) !=
                           MPI_SUCCESS ||
        (size_t)count < W_N * sizeof(int64_t)) {
      free(buf);
      continue;
    }
    {
      size_t len = (size_t)buf[W_LEN];
      if (len > (size_t)count - W_N * sizeof(int64_t) ||
          (msg = malloc(sizeof *msg + len)) == NULL) {
        free(buf);
        continue;
      }
      msg->next = NULL;
      msg->key.kind = (int)buf[W_KIND];
      msg->key.run = (uint64_t)buf[W_RUN];
      msg->key.ring = (int)buf[W_RING];
      msg->key.a = (int)buf[W_A];
      msg->key.b = (int)buf[W_B];
      msg->key.seq = (uint64_t)buf[W_SEQ];
      msg->key.from = status.MPI_SOURCE;
      memcpy(msg->aux, buf + W_AUX, sizeof msg->aux);
      msg->len = len;
      msg->data = (unsigned char *)(msg + 1);
      if (len > 0)
        memcpy(msg->data, buf + W_N, len);
      free(buf);
    }
    if (msg->key.kind != OVL__MSG_FIN && msg->key.kind != OVL__MSG_CTL &&
        msg->key.run < p->run) {
      free(msg); /* of a run that is over */
      continue;
    }
    if (msg->key.kind == OVL__MSG_ABORT && msg->key.run == p->run &&
        !p->aborted) {
      p->aborted = true;
      abort_now = p->on_abort != NULL;
    }
    for (tail = &p->box; *tail != NULL; tail = &(*tail)->next)
      ;
    *tail = msg;
  }
  reap_sends(p);
  return abort_now;
}

/* Poll; call the run's abort callback, outside the lock, if an abort
 * came. */
static void poll(ovl_procs *p) {
  void (*cb)(void *) = NULL;
  void *ctx = NULL;
  pthread_mutex_lock(&p->mu);
  if (poll_locked(p)) {
    cb = p->on_abort;
    ctx = p->abort_ctx;
  }
  pthread_mutex_unlock(&p->mu);
  if (cb != NULL)
    cb(ctx);
}

uint64_t ovl__procs_run_begin(ovl_procs *p, void (*on_abort)(void *ctx),
                              void *ctx) {
  uint64_t run;
  bool aborted = false;
  pthread_mutex_lock(&p->mu);
  run = ++p->run;
  p->on_abort = on_abort;
  p->abort_ctx = ctx;
  p->aborted = false;
  p->abort_sent = false;
  poll_locked(p);
  for (ovl__msg **q = &p->box; *q != NULL;) {
    ovl__msg *m = *q;
    if (m->key.kind != OVL__MSG_FIN && m->key.kind != OVL__MSG_CTL &&
        m->key.run < run) {
      *q = m->next;
      free(m);
      continue;
    }
    if (m->key.kind == OVL__MSG_ABORT && m->key.run == run)
      aborted = true;
    q = &m->next;
  }
  p->aborted = aborted;
  pthread_mutex_unlock(&p->mu);
  if (aborted && on_abort != NULL)
    on_abort(ctx);
  return run;
}

void ovl__procs_run_end(ovl_procs *p) {
  pthread_mutex_lock(&p->mu);
  p->on_abort = NULL;
  p->abort_ctx = NULL;
  pthread_mutex_unlock(&p->mu);
}

/* Whether another process aborted the current run, as last polled. */
static bool aborted_flag(ovl_procs *p) {
  bool a;
  pthread_mutex_lock(&p->mu);
  a = p->aborted;
  pthread_mutex_unlock(&p->mu);
  return a;
}

bool ovl__procs_aborted(ovl_procs *p) {
  poll(p);
  return aborted_flag(p);
}

static ovl_status send_locked(ovl_procs *p, int to, const ovl__msg_key *key,
                              const int64_t *aux, const void *data,
                              size_t len, ovl_error *err) {
  size_t bytes = W_N * sizeof(int64_t) + len;
  int64_t *buf;
  pend *s;
  int rc;
  if (bytes > INT_MAX)
    return ovl__err(err, OVL_EINVAL,
                    "MPI: a message of %zu bytes to process %d (at most "
                    "%d)",
                    bytes, to, INT_MAX);
  buf = malloc(bytes);
  s = malloc(sizeof *s);
  if (buf == NULL || s == NULL) {
    free(buf);
    free(s);
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  }
  buf[W_KIND] = key->kind;
  buf[W_RUN] = (int64_t)key->run;
  buf[W_RING] = key->ring;
  buf[W_A] = key->a;
  buf[W_B] = key->b;
  buf[W_SEQ] = (int64_t)key->seq;
  for (int i = 0; i < OVL__MSG_AUX; i++)
    buf[W_AUX + i] = aux != NULL ? aux[i] : 0;
  buf[W_LEN] = (int64_t)len;
  if (len > 0)
    memcpy(buf + W_N, data, len);
  rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, TAG, p->comm, &s->req);
  if (rc != MPI_SUCCESS) {
    free(buf);
    free(s);
    return mpi_err(err, rc, "MPI_Isend");
  }
  s->buf = buf;
  s->next = p->pending;
  p->pending = s;
  return OVL_OK;
}

ovl_status ovl__procs_send(ovl_procs *p, int to, const ovl__msg_key *key,
                           const int64_t *aux, const void *data, size_t len,
                           ovl_error *err) {
  ovl_status st;
  ovl__msg_key k = *key;
  k.from = p->rank;
  pthread_mutex_lock(&p->mu);
  k.run = p->run;
  st = send_locked(p, to, &k, aux, data, len, err);
  pthread_mutex_unlock(&p->mu);
  return st;
}

void ovl__procs_abort_peers(ovl_procs *p) {
  ovl__msg_key k = {OVL__MSG_ABORT, 0, 0, 0, 0, 0, 0};
  pthread_mutex_lock(&p->mu);
  if (!p->abort_sent) {
    p->abort_sent = true;
    k.run = p->run;
    k.from = p->rank;
    for (int q = 0; q < p->size; q++)
      if (q != p->rank)
        send_locked(p, q, &k, NULL, NULL, 0, NULL);
  }
  pthread_mutex_unlock(&p->mu);
}

ovl__msg *ovl__procs_take(ovl_procs *p, const ovl__msg_key *key) {
  ovl__msg *found = NULL;
  ovl__msg_key k = *key;
  poll(p);
  pthread_mutex_lock(&p->mu);
  k.run = p->run;
  for (ovl__msg **q = &p->box; *q != NULL; q = &(*q)->next)
    if (key_match(&k, &(*q)->key)) {
      found = *q;
      *q = found->next;
      found->next = NULL;
      break;
    }
  pthread_mutex_unlock(&p->mu);
  return found;
}

void ovl__procs_backoff(unsigned n) {
  /* 10 us, doubling to 1 ms: a message that comes at once is taken at
   * once, and a long wait costs little. */
  long ns = 10000L << (n < 7 ? n : 7);
  struct timespec ts = {0, ns > 1000000L ? 1000000L : ns};
  nanosleep(&ts, NULL);
}

ovl_status ovl__procs_wait(ovl_procs *p, const ovl__msg_key *key,
                           double deadline, bool (*stop)(void *ctx),
                           void *ctx, ovl__msg **out) {
  *out = NULL;
  for (unsigned n = 0;; n++) {
    /* take polled: the abort flag is fresh. */
    *out = ovl__procs_take(p, key);
    if (*out != NULL)
      return OVL_OK;
    if ((stop != NULL && stop(ctx)) || aborted_flag(p))
      return OVL_EABORTED;
    if (ovl__now() >= deadline)
      return OVL_ETIMEDOUT;
    ovl__procs_backoff(n);
  }
}

ovl_status ovl__procs_exchange(ovl_procs *p, const ovl__msg_key *key,
                               const int64_t *aux, const void *data,
                               size_t len, double deadline,
                               bool (*stop)(void *ctx), void *ctx,
                               ovl__msg **msgs, int *missing,
                               ovl_error *err) {
  ovl__msg_key k = *key;
  ovl_status st = OVL_OK;
  for (int q = 0; q < p->size; q++)
    msgs[q] = NULL;
  for (int q = 0; q < p->size && st == OVL_OK; q++)
    if (q != p->rank)
      st = ovl__procs_send(p, q, key, aux, data, len, err);
  for (int q = 0; q < p->size && st == OVL_OK; q++) {
    if (q == p->rank)
      continue;
    k.from = q;
    st = ovl__procs_wait(p, &k, deadline, stop, ctx, &msgs[q]);
    if (st != OVL_OK)
      *missing = q;
  }
  return st;
}

/* ---- ctl: the steps every process takes together ------------------ */

/*
 * Not MPI's collectives, which have no deadline and hang (or fail with
 * MPI_ERR_TRUNCATE) when the processes call different ones: each step is
 * messages between the processes through the mailbox, numbered by the
 * step (ctl_seq, the same on every process while they take the same
 * steps) and carrying what the step is (its kind and size). A process
 * that took another step is found at once; one that stopped, died or
 * went another way is waited for until the deadline (the timeout, plus
 * a margin); either way the processes are broken from then on, every
 * later step fails at once with the same message, and ovl_procs_free
 * ends the whole launch (MPI_Abort) instead of waiting for them.
 */
enum { CTL_GATHER = 1, CTL_BCAST, CTL_AGREE, CTL_EXIT };

static const char *ctl_name(int64_t op) {
  switch (op) {
  case CTL_GATHER:
    return "a gather";
  case CTL_BCAST:
    return "a broadcast";
  case CTL_AGREE:
    return "the agreement on an outcome";
  case CTL_EXIT:
    return "the agreement on the exit status";
  default:
    return "an unknown step";
  }
}

/* Broken: every later step fails with this message. */
static ovl_status ctl_break(ovl_procs *p, ovl_status st, ovl_error *err,
                            const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ovl_status ctl_break(ovl_procs *p, ovl_status st, ovl_error *err,
                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->broken_msg, sizeof p->broken_msg, fmt, ap);
  va_end(ap);
  p->broken = st;
  return ovl__err(err, st, "%s", p->broken_msg);
}

/* The message of step `seq` from process q, or NULL (not yet). A message
 * that says process q has left (FIN) is returned too. With mu held. */
static ovl__msg *ctl_find(ovl_procs *p, int q, uint64_t seq) {
  for (ovl__msg **m = &p->box; *m != NULL; m = &(*m)->next) {
    ovl__msg *found = *m;
    if (found->key.from != q ||
        !(found->key.kind == OVL__MSG_FIN ||
          (found->key.kind == OVL__MSG_CTL && found->key.seq == seq)))
      continue;
    *m = found->next;
    found->next = NULL;
    return found;
  }
  return NULL;
}

/* One step: `data` (len bytes) to every other process (from = -1) or,
 * for a broadcast, from process `from` to the others; then the message
 * of each process that sends, into msgs[q] (NULL for this process; the
 * caller frees them, on failure too). */
static ovl_status ctl_step(ovl_procs *p, int op, const void *data,
                           size_t len, int from, double wait_s,
                           ovl__msg **msgs, ovl_error *err) {
  ovl__msg_key key = {OVL__MSG_CTL, 0, 0, 0, 0, 0, 0};
  int64_t aux[OVL__MSG_AUX] = {op, (int64_t)len};
  double deadline;
  ovl_status st = OVL_OK;
  uint64_t seq;

  for (int q = 0; q < p->size; q++)
    msgs[q] = NULL;
  if (p->broken != OVL_OK)
    return ovl__err(err, p->broken, "%s", p->broken_msg);
  seq = ++p->ctl_seq;
  key.seq = seq;
  key.from = p->rank;
  pthread_mutex_lock(&p->mu);
  for (int q = 0; q < p->size && st == OVL_OK; q++)
    if (q != p->rank && (from < 0 || from == p->rank))
      st = send_locked(p, q, &key, aux, data, len, err);
  pthread_mutex_unlock(&p->mu);
  if (st != OVL_OK)
    return ctl_break(p, st, err, "%s", err != NULL ? err->msg : "MPI_Isend");
  deadline = ovl__now() + wait_s;
  for (int q = 0; q < p->size; q++) {
    ovl__msg *m = NULL;
    if (q == p->rank || (from >= 0 && q != from))
      continue;
    for (unsigned n = 0; m == NULL; n++) {
      pthread_mutex_lock(&p->mu);
      poll_locked(p);
      m = ctl_find(p, q, seq);
      pthread_mutex_unlock(&p->mu);
      if (m == NULL && ovl__now() >= deadline)
        return ctl_break(p, OVL_ETIMEDOUT, err,
                         "process %d: timed out after %.1f s waiting for "
                         "process %d at step %llu (%s): it stopped, died "
                         "or took another path",
                         p->rank, wait_s, q,
                         (unsigned long long)seq, ctl_name(op));
      if (m == NULL)
        ovl__procs_backoff(n);
    }
    msgs[q] = m;
    if (m->key.kind == OVL__MSG_FIN)
      return ctl_break(p, OVL_EBACKEND, err,
                       "process %d: process %d has ended while this one "
                       "is at step %llu (%s)",
                       p->rank, q, (unsigned long long)seq, ctl_name(op));
    if (m->aux[0] != op)
      return ctl_break(p, OVL_EBACKEND, err,
                       "process %d: the processes took different paths: "
                       "process %d is at %s where this one is at %s (step "
                       "%llu)",
                       p->rank, q, ctl_name(m->aux[0]), ctl_name(op),
                       (unsigned long long)seq);
  }
  return OVL_OK;
}

/* How long a step waits for the other processes. */
static double ctl_wait(const ovl_procs *p) {
  return p->timeout_s + OVL__PROCS_MARGIN_S;
}

static ovl_status agree(ovl_procs *p, ovl_status st, double wait_s,
                        ovl_error *err);

static void ctl_free(ovl_procs *p, ovl__msg **msgs) {
  for (int q = 0; q < p->size; q++)
    free(msgs[q]);
  free(msgs);
}

/* A step whose messages from process q must hold `want` bytes. */
static ovl_status ctl_sizes(ovl_procs *p, ovl__msg **msgs, int q,
                            size_t want, int op, ovl_error *err) {
  if (msgs[q] == NULL || msgs[q]->len == want)
    return OVL_OK;
  return ctl_break(p, OVL_EBACKEND, err,
                   "process %d: the processes took different paths: "
                   "process %d brings %zu bytes to %s (step %llu) where "
                   "this one expects %zu",
                   p->rank, q, msgs[q]->len, ctl_name(op),
                   (unsigned long long)p->ctl_seq, want);
}

void ovl_procs_set_timeout(ovl_procs *procs, double seconds) {
  if (procs != NULL && seconds > 0 && seconds < 1e9)
    procs->timeout_s = seconds;
}

const char *ovl_procs_error(const ovl_procs *procs) {
  return procs != NULL && procs->broken != OVL_OK ? procs->broken_msg : NULL;
}

int ovl_procs_agree_exit(ovl_procs *procs, int code) {
  ovl_procs *p = procs;
  ovl__msg **msgs;
  int all = code;
  int32_t mine = code;
  if (p == NULL)
    return code;
  p->exit_code = code;
  msgs = calloc((size_t)p->size, sizeof *msgs);
  if (msgs == NULL ||
      ctl_step(p, CTL_EXIT, &mine, sizeof mine, -1, ctl_wait(p), msgs,
                   NULL) != OVL_OK) {
    if (msgs != NULL)
      ctl_free(p, msgs);
    /* The processes lost each other: exit 3 (an error of the run) unless
     * this one already has a worse status. */
    p->exit_code = code > 3 ? code : 3;
    return p->exit_code;
  }
  for (int q = 0; q < p->size; q++) {
    int32_t c;
    if (msgs[q] == NULL || msgs[q]->len != sizeof c)
      continue;
    memcpy(&c, msgs[q]->data, sizeof c);
    if (c > all)
      all = c;
  }
  ctl_free(p, msgs);
  p->exit_code = all;
  return all;
}

ovl_status ovl__procs_allgather(ovl_procs *p, const void *in, void *out,
                                size_t bytes, ovl_error *err) {
  ovl__msg **msgs = calloc((size_t)p->size, sizeof *msgs);
  ovl_status st;
  if (msgs == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  memmove((char *)out + (size_t)p->rank * bytes, in, bytes);
  st = ctl_step(p, CTL_GATHER, in, bytes, -1, ctl_wait(p), msgs, err);
  for (int q = 0; q < p->size && st == OVL_OK; q++)
    st = ctl_sizes(p, msgs, q, bytes, CTL_GATHER, err);
  for (int q = 0; q < p->size && st == OVL_OK; q++)
    if (msgs[q] != NULL && bytes > 0)
      memcpy((char *)out + (size_t)q * bytes, msgs[q]->data, bytes);
  ctl_free(p, msgs);
  return st;
}

ovl_status ovl__procs_allgather_rows(ovl_procs *p, const void *in, void *out,
                                     const int *counts, size_t row,
                                     ovl_error *err) {
  ovl__msg **msgs = calloc((size_t)p->size, sizeof *msgs);
  size_t at = 0, mine;
  ovl_status st;
  if (msgs == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  for (int q = 0; q < p->rank; q++)
    at += (size_t)counts[q] * row;
  mine = (size_t)counts[p->rank] * row;
  /* `in` may lie inside `out` (at this process's own rows). */
  memmove((char *)out + at, in, mine);
  st = ctl_step(p, CTL_GATHER, (char *)out + at, mine, -1, ctl_wait(p),
                msgs, err);
  at = 0;
  for (int q = 0; q < p->size && st == OVL_OK; q++) {
    size_t b = (size_t)counts[q] * row;
    st = ctl_sizes(p, msgs, q, b, CTL_GATHER, err);
    if (st == OVL_OK && msgs[q] != NULL && b > 0)
      memcpy((char *)out + at, msgs[q]->data, b);
    at += b;
  }
  ctl_free(p, msgs);
  return st;
}

ovl_status ovl__procs_bcast(ovl_procs *p, void *buf, size_t bytes, int root,
                            ovl_error *err) {
  ovl__msg **msgs = calloc((size_t)p->size, sizeof *msgs);
  ovl_status st;
  if (msgs == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  st = ctl_step(p, CTL_BCAST, buf, bytes, root, ctl_wait(p), msgs, err);
  if (st == OVL_OK)
    st = ctl_sizes(p, msgs, root, bytes, CTL_BCAST, err);
  if (st == OVL_OK && msgs[root] != NULL && bytes > 0)
    memcpy(buf, msgs[root]->data, bytes);
  ctl_free(p, msgs);
  return st;
}

ovl_status ovl__procs_agree(ovl_procs *p, ovl_status st, ovl_error *err) {
  return agree(p, st, ctl_wait(p), err);
}

ovl_status ovl__procs_agree_failed(ovl_procs *p, ovl_status st,
                                   ovl_error *err) {
  return agree(p, st, st != OVL_OK ? OVL__PROCS_MARGIN_S : ctl_wait(p), err);
}

static ovl_status agree(ovl_procs *p, ovl_status st, double wait_s,
                        ovl_error *err) {
  typedef struct {
    int32_t status;
    char msg[OVL_ERROR_MSG_MAX];
  } one;
  one mine;
  ovl__msg **msgs = calloc((size_t)p->size, sizeof *msgs);
  ovl_status rc;
  const one *pick = NULL;
  int who = -1;
  memset(&mine, 0, sizeof mine);
  mine.status = (int32_t)st;
  if (st != OVL_OK && err != NULL)
    memcpy(mine.msg, err->msg, sizeof mine.msg);
  mine.msg[sizeof mine.msg - 1] = '\0';
  if (msgs == NULL)
    return st != OVL_OK ? st : ovl__err(err, OVL_ENOMEM, "out of memory");
  rc = ctl_step(p, CTL_AGREE, &mine, sizeof mine, -1, wait_s, msgs, err);
  for (int q = 0; q < p->size && rc == OVL_OK; q++)
    rc = ctl_sizes(p, msgs, q, sizeof mine, CTL_AGREE, err);
  if (rc != OVL_OK) {
    ctl_free(p, msgs);
    return rc;
  }
  for (int q = 0; q < p->size; q++) {
    const one *o = q == p->rank ? &mine : (const one *)msgs[q]->data;
    if (o->status != OVL_OK &&
        (pick == NULL ||
         (pick->status == OVL_EABORTED && o->status != OVL_EABORTED))) {
      pick = o;
      who = q;
    }
  }
  if (pick == NULL) {
    ctl_free(p, msgs);
    return OVL_OK;
  }
  rc = (ovl_status)pick->status;
  if (who == 0 || strstr(pick->msg, "rank ") != NULL)
    ovl__err(err, rc, "%.*s", (int)sizeof pick->msg - 1, pick->msg);
  else
    ovl__err(err, rc, "process %d: %.*s", who, (int)sizeof pick->msg - 1,
             pick->msg);
  ctl_free(p, msgs);
  return rc;
}

void ovl_procs_free(ovl_procs *procs) {
  ovl_procs *p = procs;
  ovl__msg_key fin = {OVL__MSG_FIN, 0, 0, 0, 0, 0, 0};
  double deadline;
  int fins = 0;
  if (p == NULL)
    return;
  /* Processes that lost each other (a step timed out, or they took
   * different paths): waiting for them, here or in MPI_Finalize, could
   * be forever (a process stopped, or one in a blocking call). End the
   * whole launch, with this process's exit status. */
  if (p->broken != OVL_OK)
    MPI_Abort(MPI_COMM_WORLD, p->exit_code != 0 ? p->exit_code : 3);
  /* Say goodbye, and keep receiving (and dropping) what comes until every
   * other process has said it, and our sends are done: a send that no one
   * receives would hold MPI_Finalize. Bounded: a process that is gone
   * does not hold us for more than a few seconds. */
  fin.from = p->rank;
  pthread_mutex_lock(&p->mu);
  for (int q = 0; q < p->size; q++)
    if (q != p->rank)
      send_locked(p, q, &fin, NULL, NULL, 0, NULL);
  pthread_mutex_unlock(&p->mu);
  deadline = ovl__now() + 10.0;
  for (unsigned n = 0; ovl__now() < deadline; n++) {
    bool idle;
    pthread_mutex_lock(&p->mu);
    poll_locked(p);
    for (ovl__msg **q = &p->box; *q != NULL;) {
      ovl__msg *m = *q;
      *q = m->next;
      fins += m->key.kind == OVL__MSG_FIN;
      free(m);
    }
    idle = p->pending == NULL;
    pthread_mutex_unlock(&p->mu);
    if (idle && fins >= p->size - 1)
      break;
    ovl__procs_backoff(n);
  }
  pthread_mutex_destroy(&p->mu);
  /* Sends still in flight (a process that is gone): their buffers are
   * left to the end of the process, which MPI may still read. */
  for (pend *s = p->pending, *next; s != NULL; s = next) {
    next = s->next;
    MPI_Cancel(&s->req);
    MPI_Request_free(&s->req);
    free(s);
  }
  MPI_Comm_free(&p->comm);
  free(p);
  MPI_Finalize();
}

#endif /* HAVE_MPI */
