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

/* Never called without MPI (there is no ovl_procs to call them with):
 * not counted in the coverage report (docs/TESTING.md, "Coverage"). */
/* GCOVR_EXCL_START */
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
/* GCOVR_EXCL_STOP */

#else /* HAVE_MPI */

#include "procs/mpi.h"

int ovl_mpi_compiled(void) { return 1; }

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
bool ovl__procs_poll_locked(ovl_procs *p) {
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
  if (ovl__procs_poll_locked(p)) {
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
  ovl__procs_poll_locked(p);
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

ovl_status ovl__procs_send_locked(ovl_procs *p, int to,
                                  const ovl__msg_key *key, const int64_t *aux,
                                  const void *data, size_t len,
                                  ovl_error *err) {
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
  st = ovl__procs_send_locked(p, to, &k, aux, data, len, err);
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
        ovl__procs_send_locked(p, q, &k, NULL, NULL, 0, NULL);
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

#ifdef OVL_COVERAGE
/* gcov's runtime (configure --enable-coverage): it writes the counters
 * at exit, which MPI_Abort skips; they are written before it, so that the
 * coverage report counts what the processes that lost each other ran
 * (docs/TESTING.md, "Coverage"). */
void __gcov_dump(void);
#endif

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
  if (p->broken != OVL_OK) {
#ifdef OVL_COVERAGE
    __gcov_dump();
#endif
    MPI_Abort(MPI_COMM_WORLD, p->exit_code != 0 ? p->exit_code : 3);
  }
  /* Say goodbye, and keep receiving (and dropping) what comes until every
   * other process has said it, and our sends are done: a send that no one
   * receives would hold MPI_Finalize. Bounded: a process that is gone
   * does not hold us for more than a few seconds. */
  fin.from = p->rank;
  pthread_mutex_lock(&p->mu);
  for (int q = 0; q < p->size; q++)
    if (q != p->rank)
      ovl__procs_send_locked(p, q, &fin, NULL, NULL, 0, NULL);
  pthread_mutex_unlock(&p->mu);
  deadline = ovl__now() + 10.0;
  for (unsigned n = 0; ovl__now() < deadline; n++) {
    bool idle;
    pthread_mutex_lock(&p->mu);
    ovl__procs_poll_locked(p);
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
