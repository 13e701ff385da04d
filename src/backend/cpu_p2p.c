/*
 * The cpu backend's point-to-point (backend/cpu.h).
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
 * Between processes (an MPI launch: bw->lay.procs), a message whose other
 * side is another process's rank is a DATA message from the sender,
 * posted when its stream reaches the send, and an ACK from the receiver
 * once its receive is posted and has taken it (or refused it: dtype or
 * count differ); the send completes at the ACK, so a send still waits for
 * its receive, as within a process.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu.h"
/* ------------------------------------------------------------------ */
/* Messages                                                            */
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

/* ------------------------------------------------------------------ */
/* Between processes                                                   */
/* ------------------------------------------------------------------ */

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


/* ------------------------------------------------------------------ */
/* A command                                                           */
/* ------------------------------------------------------------------ */

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
