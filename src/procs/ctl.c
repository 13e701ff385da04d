/*
 * The steps the processes' main threads take together (procs.h, "ctl"),
 * over the mailbox of procs.c. Without MPI there are no processes, and
 * the stubs of procs.c stand in.
 */
#ifdef HAVE_MPI

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procs/mpi.h"

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
      st = ovl__procs_send_locked(p, q, &key, aux, data, len, err);
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
      ovl__procs_poll_locked(p);
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

#else
/* ISO C forbids an empty translation unit. */
typedef int ovl__procs_ctl_needs_mpi;
#endif /* HAVE_MPI */
