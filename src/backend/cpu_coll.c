/*
 * The cpu backend's collectives (backend/cpu.h; point-to-point is
 * cpu_p2p.c).
 *
 * Collectives meet at a rendezvous per ring: the k-th collective a rank
 * enqueues on ring r (k counted from 0 on the host thread at enqueue time)
 * meets the k-th of every other rank, whatever stream each put it on. The
 * last rank to arrive checks that all agree, computes the result for every
 * rank (cpu_kernels.c: reducing in rank order, in the dtype) and wakes the
 * others.
 *
 * Between processes (an MPI launch: bw->lay.procs), each process holds
 * the rendezvous of its own ranks. A collective's slot fills with the
 * local arrivals; the last local rank then sends them (their calls, and
 * the data every process needs to compute its ranks' results) to every
 * other process and takes theirs from the mailbox (run/procs.h), so that
 * every process holds every rank's arrival; each checks that all agree,
 * as one process does, and computes its own ranks' results in rank order
 * from the same inputs: the numbers are those of one process, bit for
 * bit.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu.h"

/* "allreduce sum", "broadcast root=1", "allgather". */
static void describe_op(const arrival *a, char *buf, size_t size) {
  if (ovl__coll_has_redop(a->coll) && ovl__coll_has_root(a->coll))
    snprintf(buf, size, "%s %s root=%d", ovl__coll_name(a->coll),
             ovl__redop_name(a->redop), a->root);
  else if (ovl__coll_has_redop(a->coll))
    snprintf(buf, size, "%s %s", ovl__coll_name(a->coll), ovl__redop_name(a->redop));
  else if (ovl__coll_has_root(a->coll))
    snprintf(buf, size, "%s root=%d", ovl__coll_name(a->coll), a->root);
  else
    snprintf(buf, size, "%s", ovl__coll_name(a->coll));
}

/* "allreduce sum float32 count=100"; "barrier". */
static void describe_call(const arrival *a, char *buf, size_t size) {
  char op[64];
  describe_op(a, op, sizeof op);
  if (a->coll == OVL_COLL_BARRIER)
    snprintf(buf, size, "%s", op);
  else
    snprintf(buf, size, "%s %s count=%zu", op, ovl_dtype_name(a->dtype),
             a->count);
}

static bool same_call(const arrival *a, const arrival *b) {
  if (a->coll != b->coll)
    return false;
  if (a->coll == OVL_COLL_BARRIER)
    return true; /* moves no data */
  if (a->dtype != b->dtype || a->count != b->count)
    return false;
  if (ovl__coll_has_redop(a->coll) && a->redop != b->redop)
    return false;
  if (ovl__coll_has_root(a->coll) && a->root != b->root)
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
 * rank 1 issued broadcast root=0 float32 count=100" (collectives of a ring
 * numbered from 1 in messages, as the flight record's tags). False if all
 * agree. */
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
                                rg->id, (unsigned long long)sl->seq + 1);
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

/* ------------------------------------------------------------------ */
/* Between processes                                                   */
/* ------------------------------------------------------------------ */

/* The elements of a's send that another process needs: all of it, but
 * the root's alone for a broadcast and nothing for a barrier. */
static size_t coll_send_elems(const ovl__bworld *bw, const arrival *a,
                              int rank) {
  if (a->skipped || a->coll == OVL_COLL_BARRIER)
    return 0;
  if (a->coll == OVL_COLL_BROADCAST)
    return rank == a->root ? a->count : 0;
  if (a->coll == OVL_COLL_REDUCESCATTER)
    return a->count * (size_t)bw->nranks;
  return a->count;
}

/* Per arrival: the call, then the length of its data. */
enum { A_COLL, A_REDOP, A_DTYPE, A_COUNT, A_ROOT, A_SKIPPED, A_BYTES, A_N };

static bool stop_aborted(void *ctx) { return is_aborted(ctx); }

/* The last local rank of collective `sl`: send the local arrivals to every
 * other process and take theirs (into sl->a, their data left in the
 * messages, msgs[process], which the caller frees after computing).
 * On failure, its words in why. */
static ovl_status exchange(ovl__bworld *bw, ring *rg, slot *sl,
                           const char *op, ovl__msg **msgs, char *why,
                           size_t size) {
  const ovl__layout *lay = &bw->lay;
  ovl_procs *p = lay->procs;
  int me = ovl__procs_rank(p), nprocs = ovl__procs_size(p);
  double deadline = ovl__now() + bw->timeout_s;
  ovl__msg_key key = {OVL__MSG_COLL, 0, rg->id, 0, 0, sl->seq, -1};
  ovl_error e;
  size_t bytes = (size_t)lay->nlocal * A_N * sizeof(int64_t);
  unsigned char *buf, *at;
  ovl_status st = OVL_OK;
  int64_t aux[OVL__MSG_AUX] = {0};
  int missing = -1;

  for (int r = lay->first; r < lay->first + lay->nlocal; r++)
    bytes += coll_send_elems(bw, &sl->a[r], r) * ovl_dtype_size(sl->a[r].dtype);
  buf = malloc(bytes);
  if (buf == NULL) {
    snprintf(why, size, "ring %d collective #%llu (%s): out of memory",
             rg->id, (unsigned long long)sl->seq + 1, op);
    return OVL_ENOMEM;
  }
  at = buf;
  for (int r = lay->first; r < lay->first + lay->nlocal; r++) {
    const arrival *a = &sl->a[r];
    size_t b = coll_send_elems(bw, a, r) * ovl_dtype_size(a->dtype);
    int64_t h[A_N] = {a->coll,  a->redop, a->dtype,  (int64_t)a->count,
                      a->root,  a->skipped, (int64_t)b};
    memcpy(at, h, sizeof h);
    at += sizeof h;
    if (b > 0)
      memcpy(at, a->send, b);
    at += b;
  }
  aux[0] = lay->first;
  aux[1] = lay->nlocal;
  st = ovl__procs_exchange(p, &key, aux, buf, bytes, deadline, stop_aborted,
                           bw, msgs, &missing, &e);
  free(buf);
  if (st == OVL_ETIMEDOUT) {
    /* The ranks of the processes not heard from: `missing` and after. */
    size_t len = (size_t)snprintf(
        why, size,
        "ring %d collective #%llu (%s): timed out after %.*f s waiting "
        "for ",
        rg->id, (unsigned long long)sl->seq + 1, op,
        secs_prec(bw->timeout_s), bw->timeout_s);
    uint64_t ranks = 0;
    for (int q = missing; q < nprocs; q++)
      if (q != me)
        for (int r = lay->proc_first[q]; r < lay->proc_first[q + 1]; r++)
          ranks |= 1ull << r;
    len = append_ranks(why, size, len, ranks, bw->nranks);
    if (len < size)
      snprintf(why + len, size - len, " (another process)");
    return st;
  }
  if (st == OVL_EABORTED) {
    snprintf(why, size, "ring %d collective #%llu (%s): aborted", rg->id,
             (unsigned long long)sl->seq + 1, op);
    return st;
  }
  if (st != OVL_OK) {
    snprintf(why, size, "ring %d collective #%llu (%s): %.900s", rg->id,
             (unsigned long long)sl->seq + 1, op, e.msg);
    return st;
  }
  for (int q = 0; q < nprocs; q++) {
    const ovl__msg *m = msgs[q];
    int first, nlocal;
    if (m == NULL)
      continue; /* this process */
    first = (int)m->aux[0];
    nlocal = (int)m->aux[1];
    at = m->data;
    for (int r = first; r < first + nlocal; r++) {
      int64_t h[A_N];
      arrival *a = &sl->a[r];
      if (r < 0 || r >= bw->nranks ||
          (size_t)(at - m->data) + sizeof h > m->len) {
        snprintf(why, size,
                 "ring %d collective #%llu (%s): a malformed message from "
                 "process %d",
                 rg->id, (unsigned long long)sl->seq + 1, op, q);
        return OVL_EBACKEND;
      }
      memcpy(h, at, sizeof h);
      at += sizeof h;
      if (h[A_BYTES] < 0 ||
          (size_t)h[A_BYTES] > m->len - (size_t)(at - m->data)) {
        snprintf(why, size,
                 "ring %d collective #%llu (%s): a malformed message from "
                 "process %d",
                 rg->id, (unsigned long long)sl->seq + 1, op, q);
        return OVL_EBACKEND;
      }
      a->coll = (ovl__coll)h[A_COLL];
      a->redop = (ovl__redop)h[A_REDOP];
      a->dtype = (ovl_dtype)h[A_DTYPE];
      a->count = (size_t)h[A_COUNT];
      a->root = (int)h[A_ROOT];
      a->skipped = h[A_SKIPPED] != 0;
      a->send = h[A_BYTES] > 0 ? at : NULL;
      a->recv = NULL; /* written where it lives */
      at += h[A_BYTES];
      sl->arrived |= 1ull << r;
      if (a->skipped) {
        snprintf(why, size,
                 "ring %d collective #%llu (%s): rank %d did not take part "
                 "because its stream had already failed",
                 rg->id, (unsigned long long)sl->seq + 1, op, r);
        return OVL_EABORTED;
      }
    }
  }
  return OVL_OK;
}

/* Run one collective of rank `rank`: arrive, wait for the others, and
 * return OVL_OK once the result is in every recv buffer. */
ovl_status ovl__cpu_rendezvous(ovl__bworld *bw, ring *rg, uint64_t seq,
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
                    (unsigned long long)seq + 1, op);
  }
  sl->a[rank] = *a;
  sl->arrived |= 1ull << rank;
  sl->narrived++;

  if (sl->state == SLOT_FAILED) {
    /* The others gave up before this rank came. */
    st = ovl__err(err, sl->status,
                  "ring %d collective #%llu (%s): arrived after the other "
                  "ranks had failed: %s",
                  rg->id, (unsigned long long)seq + 1, op, sl->msg);
    slot_leave(rg, sl, bw->lay.nlocal);
    pthread_mutex_unlock(&rg->mu);
    return st;
  }
  if (a->skipped) {
    slot_fail(rg, sl, OVL_EABORTED,
              "ring %d collective #%llu (%s): rank %d did not take part "
              "because its stream had already failed",
              rg->id, (unsigned long long)seq + 1, op, rank);
  } else if (is_aborted(bw)) {
    slot_fail(rg, sl, OVL_EABORTED,
              "ring %d collective #%llu (%s): aborted", rg->id,
              (unsigned long long)seq + 1, op);
  } else if (sl->narrived == bw->lay.nlocal) {
    /* Every local rank is here; with other processes, meet their ranks
     * first. */
    ovl__msg *msgs[OVL_MAX_RANKS] = {0}; /* per process */
    ovl_status xst = OVL_OK;
    if (bw->lay.procs != NULL && ovl__procs_size(bw->lay.procs) > 1) {
      sl->state = SLOT_EXCHANGING;
      pthread_mutex_unlock(&rg->mu);
      xst = exchange(bw, rg, sl, op, msgs, buf, sizeof buf);
      pthread_mutex_lock(&rg->mu);
    }
    if (xst != OVL_OK) {
      slot_fail(rg, sl, xst, "%s", buf);
    } else if (find_mismatch(bw, rg, sl, buf, sizeof buf)) {
      slot_fail(rg, sl, OVL_EMISMATCH, "%s", buf);
    } else {
      sl->state = SLOT_COMPUTING;
      pthread_mutex_unlock(&rg->mu);
      ovl__cpu_collective_compute(sl, n);
      pthread_mutex_lock(&rg->mu);
      sl->state = SLOT_DONE;
      pthread_cond_broadcast(&rg->cv);
    }
    for (int q = 0; q < OVL_MAX_RANKS; q++)
      free(msgs[q]);
  } else {
    double deadline = ovl__now() + timeout;
    while (sl->state == SLOT_OPEN) {
      if (is_aborted(bw)) {
        slot_fail(rg, sl, OVL_EABORTED,
                  "ring %d collective #%llu (%s): aborted", rg->id,
                  (unsigned long long)seq + 1, op);
        break;
      }
      if (!cond_wait_until(&rg->cv, &rg->mu, deadline) &&
          sl->state == SLOT_OPEN) {
        size_t len = (size_t)snprintf(
            buf, sizeof buf,
            "ring %d collective #%llu (%s): timed out after %.*f s waiting "
            "for ",
            rg->id, (unsigned long long)seq + 1, op, secs_prec(timeout),
            timeout);
        uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
        append_ranks(buf, sizeof buf, len, all & ~sl->arrived, n);
        slot_fail(rg, sl, OVL_ETIMEDOUT, "%s", buf);
      }
    }
    /* The last rank is writing into every recv buffer (or meeting the
     * other processes first, under its own deadline): let it finish. */
    while (sl->state == SLOT_COMPUTING || sl->state == SLOT_EXCHANGING)
      pthread_cond_wait(&rg->cv, &rg->mu);
  }
  if (sl->state == SLOT_FAILED)
    st = ovl__err(err, sl->status, "%s", sl->msg);
  slot_leave(rg, sl, bw->lay.nlocal);
  pthread_mutex_unlock(&rg->mu);
  return st;
}
