/*
 * The cpu backend's collectives and point-to-point.
 *
 * Collectives meet at a rendezvous per ring: the k-th collective a rank
 * enqueues on ring r (k counted from 0 on the host thread at enqueue time)
 * meets the k-th of every other rank, whatever stream each put it on. The
 * last rank to arrive checks that all agree, computes the result for every
 * rank (cpu_kernels.c: reducing in rank order, in the dtype) and wakes the
 * others.
 *
 * Point-to-point follows NCCL's rule: the k-th send from rank a to rank b
 * on ring r matches the k-th receive on b from a on r (both counted on the
 * host threads at enqueue time, per ordered pair). A command is a group
 * of items (one item: a lone send or receive). When a stream reaches it,
 * every item is posted at once; an item completes when the other side of
 * its message is posted too (whoever posts second checks the two agree and
 * copies); the command finishes when all its items have. So a lone send
 * is a rendezvous of the two streams' heads, and a group lets its items
 * progress together (a send to oneself in a group is fine; alone it waits
 * forever, as NCCL's does).
 *
 * Between processes (an MPI launch: bw->lay.procs), each process holds
 * the rendezvous of its own ranks. A collective's slot fills with the
 * local arrivals; the last local rank then sends them (their calls, and
 * the data every process needs to compute its ranks' results) to every
 * other process and takes theirs from the mailbox (run/procs.h), so that
 * every process holds every rank's arrival; each checks that all agree,
 * as one process does, and computes its own ranks' results in rank order
 * from the same inputs: the numbers are those of one process, bit for
 * bit. A point-to-point message between processes is a DATA message from
 * the sender, posted when its stream reaches the send, and an ACK from
 * the receiver once its receive is posted and has taken it (or refused
 * it: dtype or count differ); the send completes at the ACK, so a send
 * still waits for its receive, as within a process.
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

/* ------------------------------------------------------------------ */
/* Point-to-point                                                      */
/* ------------------------------------------------------------------ */

/* The message (src -> dst, k) of ring rg, made on first use; NULL when out
 * of memory. With rg->mu held. */
static pair *pair_get(ring *rg, int nranks, int src, int dst, uint64_t k) {
  pair **head, *p;
  if (rg->chan == NULL) {
    rg->chan = calloc((size_t)nranks * (size_t)nranks, sizeof *rg->chan);
    if (rg->chan == NULL)
      return NULL;
  }
  head = &rg->chan[(size_t)src * (size_t)nranks + (size_t)dst];
  for (p = *head; p != NULL; p = p->next)
    if (p->k == k)
      return p;
  if (rg->pair_free != NULL) {
    p = rg->pair_free;
    rg->pair_free = p->next;
  } else {
    p = malloc(sizeof *p);
    if (p == NULL)
      return NULL;
  }
  memset(p, 0, offsetof(pair, msg));
  p->msg[0] = '\0';
  p->src = src;
  p->dst = dst;
  p->k = k;
  p->state = PAIR_OPEN;
  p->status = OVL_OK;
  /* Oldest first: append. */
  while (*head != NULL)
    head = &(*head)->next;
  *head = p;
  return p;
}

/* One side is done with the message; the second recycles it. A message
 * that failed before its other side came stays until that side comes
 * (and fails at once) or the world ends. */
static void pair_leave(ring *rg, int nranks, pair *p) {
  if (++p->nleft < 2)
    return;
  for (pair **q = &rg->chan[(size_t)p->src * (size_t)nranks + (size_t)p->dst];
       *q != NULL; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  p->next = rg->pair_free;
  rg->pair_free = p;
}

static void pair_fail(ring *rg, pair *p, ovl_status status, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void pair_fail(ring *rg, pair *p, ovl_status status, const char *fmt,
                      ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->msg, sizeof p->msg, fmt, ap);
  va_end(ap);
  p->status = status;
  p->state = PAIR_FAILED;
  pthread_cond_broadcast(&rg->cv);
}

/* A matched send and receive that disagree, in words: "ring 0 p2p: send
 * #2 from rank 0 to rank 1 is float32 count=8, but the matching recv on
 * rank 1 is float32 count=16" (message k, from 0). */
static void pair_mismatch_text(char *buf, size_t size, int ring, uint64_t k,
                               int src, int dst, ovl_dtype send_dtype,
                               size_t send_count, ovl_dtype recv_dtype,
                               size_t recv_count) {
  snprintf(buf, size,
           "ring %d p2p: send #%llu from rank %d to rank %d is %s count=%zu, "
           "but the matching recv on rank %d is %s count=%zu",
           ring, (unsigned long long)k + 1, src, dst,
           ovl_dtype_name(send_dtype), send_count, dst,
           ovl_dtype_name(recv_dtype), recv_count);
}

/* An item as its rank sees it: "send #3 to rank 1", "recv #3 from rank
 * 0" (messages of the pair numbered from 1). */
static void describe_item(const p2p_item *it, char *buf, size_t size) {
  snprintf(buf, size, it->send ? "send #%llu to rank %d"
                               : "recv #%llu from rank %d",
           (unsigned long long)it->k + 1, it->peer);
}

/* What an item waits for: "rank 1's recv #3 from rank 0". */
static void describe_partner(const p2p_item *it, int rank, char *buf,
                             size_t size) {
  snprintf(buf, size, it->send ? "rank %d's recv #%llu from rank %d"
                               : "rank %d's send #%llu to rank %d",
           it->peer, (unsigned long long)it->k + 1, rank);
}

void ovl__cpu_ring_free_p2p(ring *rg, int nranks) {
  pair *p, *next;
  if (rg->chan != NULL)
    for (size_t c = 0; c < (size_t)nranks * (size_t)nranks; c++)
      for (p = rg->chan[c]; p != NULL; p = next) {
        next = p->next;
        free(p);
      }
  for (p = rg->pair_free; p != NULL; p = next) {
    next = p->next;
    free(p);
  }
  free(rg->chan);
  rg->chan = NULL;
  rg->pair_free = NULL;
}

/* Post item `it` of `rank` to its message; with rg->mu held. Sets
 * it->copies when this side completes the message (then the caller copies
 * outside the lock); fails the message when the sides disagree, the
 * stream had failed (skipped) or the world was aborted. Returns false
 * when the message had failed before this side came (why: the reason). */
static bool p2p_post(ovl__bworld *bw, ring *rg, int rank, p2p_item *it,
                     bool skipped, char *why, size_t size) {
  int sd = it->send ? 0 : 1;
  pair *p = it->pr;
  char item[96];
  describe_item(it, item, sizeof item);
  p->side[sd].posted = true;
  p->side[sd].dtype = it->dtype;
  p->side[sd].count = it->count;
  p->side[sd].buf = it->buf;
  if (p->state == PAIR_FAILED) {
    snprintf(why, size,
             "ring %d p2p: %s: arrived after the other side had failed: "
             "%.800s",
             rg->id, item, p->msg);
    return false;
  }
  if (skipped) {
    pair_fail(rg, p, OVL_EABORTED,
              "ring %d p2p: %s of rank %d: rank %d did not take part "
              "because its stream had already failed",
              rg->id, item, rank, rank);
  } else if (is_aborted(bw)) {
    pair_fail(rg, p, OVL_EABORTED, "ring %d p2p: %s of rank %d: aborted",
              rg->id, item, rank);
  } else if (p->side[1 - sd].posted) {
    if (p->side[0].dtype != p->side[1].dtype ||
        p->side[0].count != p->side[1].count) {
      char text[OVL_ERROR_MSG_MAX];
      pair_mismatch_text(text, sizeof text, rg->id, p->k, p->src, p->dst,
                         p->side[0].dtype, p->side[0].count,
                         p->side[1].dtype, p->side[1].count);
      pair_fail(rg, p, OVL_EMISMATCH, "%s", text);
    } else {
      p->state = PAIR_COPYING;
      it->copies = true;
    }
  }
  return true;
}

/* Where a point-to-point item with another process's peer is. */
enum { R_WAIT, R_DONE, R_FAILED };
/* DATA's aux: dtype, count, status (not OVL_OK: the sender gave up, the
 * payload says why); ACK's: status (not OVL_OK: refused or given up, the
 * payload says why). */
enum { D_DTYPE, D_COUNT, D_STATUS };

static ovl__msg_key item_key(const ring *rg, int rank, const p2p_item *it,
                             int kind) {
  ovl__msg_key k = {kind, 0, rg->id, 0, 0, it->k, it->proc};
  /* DATA and ACK are both keyed by the message: (sender, receiver, k). */
  k.a = it->send ? rank : it->peer;
  k.b = it->send ? it->peer : rank;
  return k;
}

/* Send an item's DATA (a send) or ACK (a receive) with `status` and, when
 * it is not OVL_OK, `why`. */
static void remote_say(ovl__bworld *bw, const ring *rg, int rank,
                       const p2p_item *it, ovl_status status,
                       const char *why) {
  ovl__msg_key k = item_key(rg, rank, it, it->send ? OVL__MSG_DATA
                                                   : OVL__MSG_ACK);
  int64_t aux[OVL__MSG_AUX] = {0};
  const void *data = why;
  size_t len = why != NULL ? strlen(why) + 1 : 0;
  if (it->send) {
    aux[D_DTYPE] = it->dtype;
    aux[D_COUNT] = (int64_t)it->count;
    aux[D_STATUS] = status;
    if (status == OVL_OK) {
      data = it->buf;
      len = it->count * ovl_dtype_size(it->dtype);
    }
  } else {
    aux[0] = status;
  }
  /* A send that fails leaves the peer to its timeout or to the abort that
   * this rank's failure sends every process. */
  (void)ovl__procs_send(bw->lay.procs, it->proc, &k, aux, data, len, NULL);
}

/* Take what an open remote item waits for, if it came: the ACK of a send,
 * the DATA of a receive (then check, copy and acknowledge it). Sets
 * it->rstate; on failure *st and why (when *st was OVL_OK). */
static void remote_poll(ovl__bworld *bw, const ring *rg, int rank,
                        p2p_item *it, ovl_status *st, char *why,
                        size_t size) {
  ovl__msg_key k = item_key(rg, rank, it, it->send ? OVL__MSG_ACK
                                                   : OVL__MSG_DATA);
  ovl__msg *m = ovl__procs_take(bw->lay.procs, &k);
  ovl_status fail = OVL_OK;
  char text[OVL_ERROR_MSG_MAX];
  if (m == NULL)
    return;
  if (it->send || m->aux[D_STATUS] != OVL_OK) {
    fail = (ovl_status)(it->send ? m->aux[0] : m->aux[D_STATUS]);
    snprintf(text, sizeof text, "%.*s", (int)(m->len < sizeof text ? m->len : sizeof text - 1),
             (const char *)m->data);
  } else if ((ovl_dtype)m->aux[D_DTYPE] != it->dtype ||
             (size_t)m->aux[D_COUNT] != it->count) {
    fail = OVL_EMISMATCH;
    pair_mismatch_text(text, sizeof text, rg->id, it->k, it->peer, rank,
                       (ovl_dtype)m->aux[D_DTYPE], (size_t)m->aux[D_COUNT],
                       it->dtype, it->count);
    remote_say(bw, rg, rank, it, fail, text);
  } else {
    size_t bytes = it->count * ovl_dtype_size(it->dtype);
    if (bytes > 0 && m->len >= bytes)
      memcpy(it->buf, m->data, bytes);
    remote_say(bw, rg, rank, it, OVL_OK, NULL);
  }
  if (fail == OVL_OK) {
    it->rstate = R_DONE;
  } else {
    it->rstate = R_FAILED;
    if (*st == OVL_OK) {
      *st = fail;
      snprintf(why, size, "%s", text);
    }
  }
  free(m);
}

ovl_status ovl__cpu_p2p_run(ovl__bworld *bw, ring *rg, int rank,
                            p2p_item *items, int n, bool skipped,
                            ovl_error *err) {
  const int nranks = bw->nranks;
  const double timeout = bw->timeout_s;
  ovl_status st = OVL_OK; /* the command's outcome, once decided */
  char why[OVL_ERROR_MSG_MAX] = "", late[OVL_ERROR_MSG_MAX];
  char item[96], partner[96];
  bool copies = false, timed_out = false;
  int nremote = 0;
  double deadline;

  /* Items whose peer is another process's: posted first, without the
   * ring's lock (a send's DATA goes out now). */
  for (int i = 0; i < n; i++) {
    p2p_item *it = &items[i];
    it->proc = ovl__layout_proc(&bw->lay, it->peer);
    it->remote = bw->lay.procs != NULL &&
                 it->proc != ovl__procs_rank(bw->lay.procs);
    it->pr = NULL;
    if (!it->remote)
      continue;
    nremote++;
    it->rstate = R_WAIT;
    if (skipped) {
      describe_item(it, item, sizeof item);
      snprintf(late, sizeof late,
               "ring %d p2p: %s of rank %d: rank %d did not take part "
               "because its stream had already failed",
               rg->id, item, rank, rank);
      remote_say(bw, rg, rank, it, OVL_EABORTED, late);
      it->rstate = R_FAILED;
      if (st == OVL_OK) {
        st = OVL_EABORTED;
        memcpy(why, late, sizeof why);
      }
    } else if (it->send) {
      remote_say(bw, rg, rank, it, OVL_OK, NULL);
    }
  }

  pthread_mutex_lock(&rg->mu);
  for (int i = 0; i < n; i++) {
    p2p_item *it = &items[i];
    it->copies = false;
    if (it->remote)
      continue;
    it->pr = pair_get(rg, nranks, it->send ? rank : it->peer,
                      it->send ? it->peer : rank, it->k);
    if (it->pr == NULL) {
      if (st == OVL_OK) {
        describe_item(it, item, sizeof item);
        st = OVL_ENOMEM;
        snprintf(why, sizeof why, "ring %d p2p: %s: out of memory", rg->id,
                 item);
      }
      continue;
    }
    if (!p2p_post(bw, rg, rank, it, skipped, late, sizeof late) &&
        st == OVL_OK) {
      st = it->pr->status;
      memcpy(why, late, sizeof why);
    }
    copies |= it->copies;
  }
  if (copies) {
    pthread_mutex_unlock(&rg->mu);
    for (int i = 0; i < n; i++) {
      pair *p = items[i].pr;
      size_t bytes;
      if (!items[i].copies)
        continue;
      bytes = p->side[0].count * ovl_dtype_size(p->side[0].dtype);
      if (bytes > 0 && p->side[1].buf != p->side[0].buf)
        memmove(p->side[1].buf, p->side[0].buf, bytes);
    }
    pthread_mutex_lock(&rg->mu);
    for (int i = 0; i < n; i++)
      if (items[i].copies)
        items[i].pr->state = PAIR_DONE;
    pthread_cond_broadcast(&rg->cv);
  }

  /* Wait until every item is done or failed. Once one fails (or the
   * world is aborted, or the timeout passes) the items still open are
   * given up, so that their other sides fail at once too; messages being
   * copied are let finish (the copier writes into a buffer of ours).
   * Remote items are polled, outside the lock, between short waits. */
  deadline = ovl__now() + timeout;
  for (unsigned round = 0;; round++) {
    int open = 0, copying = 0, first_open = -1, bad = -1, ropen = 0;
    if (nremote > 0 && st == OVL_OK) {
      pthread_mutex_unlock(&rg->mu);
      for (int i = 0; i < n; i++)
        if (items[i].remote && items[i].rstate == R_WAIT)
          remote_poll(bw, rg, rank, &items[i], &st, why, sizeof why);
      pthread_mutex_lock(&rg->mu);
    }
    for (int i = 0; i < n; i++) {
      pair *p = items[i].pr;
      if (items[i].remote) {
        if (items[i].rstate == R_WAIT && open++ == 0)
          first_open = i;
        ropen += items[i].rstate == R_WAIT;
        continue;
      }
      if (p == NULL)
        continue;
      if (p->state == PAIR_OPEN && open++ == 0)
        first_open = i;
      copying += p->state == PAIR_COPYING;
      if (p->state == PAIR_FAILED && bad < 0)
        bad = i;
    }
    if (st == OVL_OK && bad >= 0) {
      st = items[bad].pr->status;
      snprintf(why, sizeof why, "%s", items[bad].pr->msg);
    }
    if (st == OVL_OK && open > 0 && is_aborted(bw)) {
      describe_item(&items[first_open], item, sizeof item);
      st = OVL_EABORTED;
      snprintf(why, sizeof why, "ring %d p2p: %s: aborted", rg->id, item);
    }
    if (st == OVL_OK && open > 0 && timed_out) {
      const p2p_item *it = &items[first_open];
      size_t len;
      describe_item(it, item, sizeof item);
      describe_partner(it, rank, partner, sizeof partner);
      st = OVL_ETIMEDOUT;
      len = (size_t)snprintf(why, sizeof why,
                             "ring %d p2p: %s (%s count=%zu) timed out after "
                             "%.*f s waiting for %s",
                             rg->id, item, ovl_dtype_name(it->dtype),
                             it->count, secs_prec(timeout), timeout,
                             partner);
      if (open > 1 && len < sizeof why)
        snprintf(why + len, sizeof why - len,
                 " (and %d more items of its group)", open - 1);
    }
    if (st != OVL_OK && open > 0) {
      /* Give up the rest: each message says why to its other side. */
      for (int i = 0; i < n; i++) {
        p2p_item *it = &items[i];
        if (it->remote) {
          if (it->rstate != R_WAIT)
            continue;
          it->rstate = R_FAILED;
          if (it->send)
            continue; /* its DATA is out; the abort tells the rest */
          describe_item(it, item, sizeof item);
          snprintf(late, sizeof late, "ring %d p2p: %s of rank %d given up: %.800s",
                   rg->id, item, rank, why);
          remote_say(bw, rg, rank, it, st == OVL_ETIMEDOUT ? OVL_EABORTED : st,
                     late);
          continue;
        }
        if (it->pr == NULL || it->pr->state != PAIR_OPEN)
          continue;
        describe_item(it, item, sizeof item);
        if (timed_out && st == OVL_ETIMEDOUT) {
          describe_partner(it, rank, partner, sizeof partner);
          pair_fail(rg, it->pr, OVL_ETIMEDOUT,
                    "ring %d p2p: %s of rank %d timed out after %.*f s "
                    "waiting for %s",
                    rg->id, item, rank, secs_prec(timeout), timeout,
                    partner);
        } else {
          pair_fail(rg, it->pr, OVL_EABORTED,
                    "ring %d p2p: %s of rank %d given up: %s", rg->id, item,
                    rank, why);
        }
      }
      continue;
    }
    if (open == 0 && copying == 0)
      break;
    if (open == 0) {
      pthread_cond_wait(&rg->cv, &rg->mu);
    } else if (ropen > 0) {
      /* Poll again soon: 10 us, doubling to 1 ms. */
      double step = 1e-5 * (double)(1u << (round < 7 ? round : 7));
      double until = ovl__now() + (step < 1e-3 ? step : 1e-3);
      if (!cond_wait_until(&rg->cv, &rg->mu,
                           until < deadline ? until : deadline) &&
          ovl__now() >= deadline)
        timed_out = true;
    } else if (!cond_wait_until(&rg->cv, &rg->mu, deadline)) {
      timed_out = true;
    }
  }
  for (int i = 0; i < n; i++)
    if (items[i].pr != NULL)
      pair_leave(rg, nranks, items[i].pr);
  pthread_mutex_unlock(&rg->mu);
  if (st != OVL_OK)
    ovl__err(err, st, "%s", why);
  return st;
}
