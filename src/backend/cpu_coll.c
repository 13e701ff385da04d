/*
 * The cpu backend's collectives. They meet at a rendezvous per ring: the
 * k-th collective a rank enqueues on ring r (k counted from 0 on the host
 * thread at enqueue time) meets the k-th of every other rank, whatever
 * stream each put it on. The last rank to arrive checks that all agree,
 * computes the result for every rank (cpu_kernels.c: reducing in rank
 * order, in the dtype) and wakes the others.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu.h"

/* "allreduce sum", "broadcast root=1", "allgather". */
static void describe_op(const arrival *a, char *buf, size_t size) {
  if (ovl__coll_has_redop(a->coll))
    snprintf(buf, size, "%s %s", ovl__coll_name(a->coll), ovl__redop_name(a->redop));
  else if (a->coll == OVL_COLL_BROADCAST)
    snprintf(buf, size, "%s root=%d", ovl__coll_name(a->coll), a->root);
  else
    snprintf(buf, size, "%s", ovl__coll_name(a->coll));
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
  if (ovl__coll_has_redop(a->coll) && a->redop != b->redop)
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
      ovl__cpu_collective_compute(sl, n);
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
            "ring %d collective #%llu (%s): timed out after %.*f s waiting "
            "for ",
            rg->id, (unsigned long long)seq, op, secs_prec(timeout),
            timeout);
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
