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

/* One point-to-point command of one rank while it runs: its items, and
 * its outcome once decided (st; why: its words). */
typedef struct p2p_cmd {
  ovl__bworld *bw;
  ring *rg;
  int rank;
  p2p_item *items;
  int n;
  bool skipped;
  ovl_status st;
  char why[OVL_ERROR_MSG_MAX];
} p2p_cmd;

/* Items whose peer is another process's: posted first, without the
 * ring's lock (a send's DATA goes out now). Returns how many. */
static int post_remote(p2p_cmd *c) {
  char late[OVL_ERROR_MSG_MAX], item[96];
  int nremote = 0;
  for (int i = 0; i < c->n; i++) {
    p2p_item *it = &c->items[i];
    it->proc = ovl__layout_proc(&c->bw->lay, it->peer);
    it->remote = c->bw->lay.procs != NULL &&
                 it->proc != ovl__procs_rank(c->bw->lay.procs);
    it->pr = NULL;
    if (!it->remote)
      continue;
    nremote++;
    it->rstate = R_WAIT;
    if (c->skipped) {
      describe_item(it, item, sizeof item);
      snprintf(late, sizeof late,
               "ring %d p2p: %s of rank %d: rank %d did not take part "
               "because its stream had already failed",
               c->rg->id, item, c->rank, c->rank);
      remote_say(c->bw, c->rg, c->rank, it, OVL_EABORTED, late);
      it->rstate = R_FAILED;
      if (c->st == OVL_OK) {
        c->st = OVL_EABORTED;
        memcpy(c->why, late, sizeof c->why);
      }
    } else if (it->send) {
      remote_say(c->bw, c->rg, c->rank, it, OVL_OK, NULL);
    }
  }
  return nremote;
}

/* The items of this process: each posted to its message; with rg->mu
 * held. True when this side completes some message (it copies). */
static bool post_local(p2p_cmd *c) {
  char late[OVL_ERROR_MSG_MAX], item[96];
  bool copies = false;
  for (int i = 0; i < c->n; i++) {
    p2p_item *it = &c->items[i];
    it->copies = false;
    if (it->remote)
      continue;
    it->pr = pair_get(c->rg, c->bw->nranks, it->send ? c->rank : it->peer,
                      it->send ? it->peer : c->rank, it->k);
    if (it->pr == NULL) {
      if (c->st == OVL_OK) {
        describe_item(it, item, sizeof item);
        c->st = OVL_ENOMEM;
        snprintf(c->why, sizeof c->why, "ring %d p2p: %s: out of memory",
                 c->rg->id, item);
      }
      continue;
    }
    if (!p2p_post(c->bw, c->rg, c->rank, it, c->skipped, late,
                  sizeof late) &&
        c->st == OVL_OK) {
      c->st = it->pr->status;
      memcpy(c->why, late, sizeof c->why);
    }
    copies |= it->copies;
  }
  return copies;
}

/* The messages this side completes, copied outside the lock (rg->mu held
 * on entry and on return), then done. */
static void copy_local(p2p_cmd *c) {
  ring *rg = c->rg;
  pthread_mutex_unlock(&rg->mu);
  for (int i = 0; i < c->n; i++) {
    pair *p = c->items[i].pr;
    size_t bytes;
    if (!c->items[i].copies)
      continue;
    bytes = p->side[0].count * ovl_dtype_size(p->side[0].dtype);
    if (bytes > 0 && p->side[1].buf != p->side[0].buf)
      memmove(p->side[1].buf, p->side[0].buf, bytes);
  }
  pthread_mutex_lock(&rg->mu);
  for (int i = 0; i < c->n; i++)
    if (c->items[i].copies)
      c->items[i].pr->state = PAIR_DONE;
  pthread_cond_broadcast(&rg->cv);
}

/* The open remote items: what they wait for taken, if it came (rg->mu
 * held on entry and on return, released while polling). */
static void poll_remote(p2p_cmd *c) {
  pthread_mutex_unlock(&c->rg->mu);
  for (int i = 0; i < c->n; i++)
    if (c->items[i].remote && c->items[i].rstate == R_WAIT)
      remote_poll(c->bw, c->rg, c->rank, &c->items[i], &c->st, c->why,
                  sizeof c->why);
  pthread_mutex_lock(&c->rg->mu);
}

/* Where a command's items are, in one round of its wait. */
typedef struct p2p_tally {
  int open;       /* items not done or failed */
  int copying;    /* messages the other side is copying */
  int first_open; /* the first open item, or -1 */
  int bad;        /* the first failed message, or -1 */
  int ropen;      /* open remote items */
} p2p_tally;

static p2p_tally tally(const p2p_cmd *c) {
  p2p_tally t = {0, 0, -1, -1, 0};
  for (int i = 0; i < c->n; i++) {
    const p2p_item *it = &c->items[i];
    pair *p = it->pr;
    if (it->remote) {
      if (it->rstate == R_WAIT && t.open++ == 0)
        t.first_open = i;
      t.ropen += it->rstate == R_WAIT;
      continue;
    }
    if (p == NULL)
      continue;
    if (p->state == PAIR_OPEN && t.open++ == 0)
      t.first_open = i;
    t.copying += p->state == PAIR_COPYING;
    if (p->state == PAIR_FAILED && t.bad < 0)
      t.bad = i;
  }
  return t;
}

/* The command's outcome, if this round decides it: a message failed, the
 * world was aborted, or the wait timed out with items still open. */
static void decide(p2p_cmd *c, const p2p_tally *t, bool timed_out) {
  const double timeout = c->bw->timeout_s;
  char item[96], partner[96];
  if (c->st == OVL_OK && t->bad >= 0) {
    c->st = c->items[t->bad].pr->status;
    snprintf(c->why, sizeof c->why, "%s", c->items[t->bad].pr->msg);
  }
  if (c->st == OVL_OK && t->open > 0 && is_aborted(c->bw)) {
    describe_item(&c->items[t->first_open], item, sizeof item);
    c->st = OVL_EABORTED;
    snprintf(c->why, sizeof c->why, "ring %d p2p: %s: aborted", c->rg->id,
             item);
  }
  if (c->st == OVL_OK && t->open > 0 && timed_out) {
    const p2p_item *it = &c->items[t->first_open];
    size_t len;
    describe_item(it, item, sizeof item);
    describe_partner(it, c->rank, partner, sizeof partner);
    c->st = OVL_ETIMEDOUT;
    len = (size_t)snprintf(c->why, sizeof c->why,
                           "ring %d p2p: %s (%s count=%zu) timed out after "
                           "%.*f s waiting for %s",
                           c->rg->id, item, ovl_dtype_name(it->dtype),
                           it->count, secs_prec(timeout), timeout, partner);
    if (t->open > 1 && len < sizeof c->why)
      snprintf(c->why + len, sizeof c->why - len,
               " (and %d more items of its group)", t->open - 1);
  }
}

/* The command failed: give up the items still open, each message saying
 * why to its other side. */
static void give_up(p2p_cmd *c, bool timed_out) {
  const double timeout = c->bw->timeout_s;
  char late[OVL_ERROR_MSG_MAX], item[96], partner[96];
  for (int i = 0; i < c->n; i++) {
    p2p_item *it = &c->items[i];
    if (it->remote) {
      if (it->rstate != R_WAIT)
        continue;
      it->rstate = R_FAILED;
      if (it->send)
        continue; /* its DATA is out; the abort tells the rest */
      describe_item(it, item, sizeof item);
      snprintf(late, sizeof late, "ring %d p2p: %s of rank %d given up: %.800s",
               c->rg->id, item, c->rank, c->why);
      remote_say(c->bw, c->rg, c->rank, it,
                 c->st == OVL_ETIMEDOUT ? OVL_EABORTED : c->st, late);
      continue;
    }
    if (it->pr == NULL || it->pr->state != PAIR_OPEN)
      continue;
    describe_item(it, item, sizeof item);
    if (timed_out && c->st == OVL_ETIMEDOUT) {
      describe_partner(it, c->rank, partner, sizeof partner);
      pair_fail(c->rg, it->pr, OVL_ETIMEDOUT,
                "ring %d p2p: %s of rank %d timed out after %.*f s "
                "waiting for %s",
                c->rg->id, item, c->rank, secs_prec(timeout), timeout,
                partner);
    } else {
      pair_fail(c->rg, it->pr, OVL_EABORTED,
                "ring %d p2p: %s of rank %d given up: %s", c->rg->id, item,
                c->rank, c->why);
    }
  }
}

/* Wait for the ring to move, until `deadline`; remote items are polled
 * again soon: 10 us, doubling to 1 ms, by `round`. True when the wait
 * timed out. */
static bool wait_round(p2p_cmd *c, const p2p_tally *t, unsigned round,
                       double deadline) {
  ring *rg = c->rg;
  if (t->open == 0) {
    pthread_cond_wait(&rg->cv, &rg->mu);
  } else if (t->ropen > 0) {
    double step = 1e-5 * (double)(1u << (round < 7 ? round : 7));
    double until = ovl__now() + (step < 1e-3 ? step : 1e-3);
    if (!cond_wait_until(&rg->cv, &rg->mu,
                         until < deadline ? until : deadline) &&
        ovl__now() >= deadline)
      return true;
  } else if (!cond_wait_until(&rg->cv, &rg->mu, deadline)) {
    return true;
  }
  return false;
}

/* Wait until every item is done or failed; with rg->mu held. Once one
 * fails (or the world is aborted, or the timeout passes) the items still
 * open are given up, so that their other sides fail at once too; messages
 * being copied are let finish (the copier writes into a buffer of ours).
 * Remote items are polled, outside the lock, between short waits. */
static void wait_items(p2p_cmd *c, int nremote) {
  double deadline = ovl__now() + c->bw->timeout_s;
  bool timed_out = false;
  for (unsigned round = 0;; round++) {
    p2p_tally t;
    if (nremote > 0 && c->st == OVL_OK)
      poll_remote(c);
    t = tally(c);
    decide(c, &t, timed_out);
    if (c->st != OVL_OK && t.open > 0) {
      give_up(c, timed_out);
      continue;
    }
    if (t.open == 0 && t.copying == 0)
      break;
    if (wait_round(c, &t, round, deadline))
      timed_out = true;
  }
}

ovl_status ovl__cpu_p2p_run(ovl__bworld *bw, ring *rg, int rank,
                            p2p_item *items, int n, bool skipped,
                            ovl_error *err) {
  p2p_cmd c = {bw, rg, rank, items, n, skipped, OVL_OK, ""};
  int nremote = post_remote(&c);

  pthread_mutex_lock(&rg->mu);
  if (post_local(&c))
    copy_local(&c);
  wait_items(&c, nremote);
  for (int i = 0; i < n; i++)
    if (items[i].pr != NULL)
      pair_leave(rg, bw->nranks, items[i].pr);
  pthread_mutex_unlock(&rg->mu);
  if (c.st != OVL_OK)
    ovl__err(err, c.st, "%s", c.why);
  return c.st;
}
