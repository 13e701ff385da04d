/*
 * The flight record (docs/ARCHITECTURE.md, "The flight record"): what a
 * run that timed out says about its communication, so that a hang the
 * static check did not see (or was not asked to look for) is explained
 * after the fact, as PyTorch's NCCL flight recorder does, without a
 * separate tool to diff the ranks' logs.
 *
 * The executor numbers a rank's communication ops per ring: tag 1, 2, ...
 * per op (a collective, or one send or receive of a group), across
 * iterations. It notes the last tag each rank enqueued, and the backend
 * the last it completed (ring_progress). The static sequences give every
 * tag its op: on rank r, tag t of ring R is the ((t - 1) mod n)-th of the
 * n comm ops of ring R that run on r, in program order, in iteration
 * (t - 1) / n. From them the message names the first place where the
 * ranks' sequences cannot match (NCCL's rules: the k-th collective of a
 * ring meets the k-th of every other rank; the k-th send from a to b the
 * k-th receive on b from a), or else the first tag some rank has not
 * completed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run.h"

/* ------------------------------------------------------------------ */
/* The static sequences                                                */
/* ------------------------------------------------------------------ */

/* The comm ops of one ring on one rank, one iteration, program order. */
typedef struct seq {
  uint32_t len;
  uint32_t *op;  /* [len] op index */
  uint32_t *cls; /* [len] index within its class (the k-th collective, the
                    k-th send to its peer, the k-th receive from it) */
  uint32_t ncoll;
  uint32_t *coll_at;       /* [ncoll] entry of the k-th collective */
  uint32_t *send_off;      /* [nranks + 1] into send_at, by peer */
  uint32_t *send_at;       /* entry of the k-th send to each peer */
  uint32_t *recv_off, *recv_at;
} seq;

typedef struct seqs {
  int nranks, nrings;
  seq *s; /* [rank * nrings + ring] */
} seqs;

/* The comm primitive of op i, or NULL: an op has at most one. */
static const ovl__prim *comm_prim(const ovl_program *prog, size_t i) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(prog, i, &n);
  for (size_t k = 0; k < n; k++)
    if (ovl__prim_is_comm(&p[k]))
      return &p[k];
  return NULL;
}

static void seqs_free(seqs *ss) {
  if (ss == NULL)
    return;
  for (int k = 0; ss->s != NULL && k < ss->nranks * ss->nrings; k++) {
    seq *q = &ss->s[k];
    free(q->op);
    free(q->cls);
    free(q->coll_at);
    free(q->send_off);
    free(q->send_at);
    free(q->recv_off);
    free(q->recv_at);
  }
  free(ss->s);
  free(ss);
}

/* Every rank's sequence of every ring; NULL when out of memory. */
static seqs *seqs_build(const ovl_program *prog) {
  int nranks = prog->nranks, nrings = prog->nrings;
  seqs *ss = calloc(1, sizeof *ss);
  bool ok;
  if (ss == NULL)
    return NULL;
  ss->nranks = nranks;
  ss->nrings = nrings;
  ss->s = calloc((size_t)nranks * (size_t)(nrings > 0 ? nrings : 1),
                 sizeof *ss->s);
  ok = ss->s != NULL;
  /* Count, allocate, fill. */
  for (size_t i = 0; ok && i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = comm_prim(prog, i);
    if (p == NULL || op->ring_id < 0 || op->ring_id >= nrings)
      continue;
    for (int r = 0; r < nranks; r++)
      if (ovl__op_on_rank(op, r))
        ss->s[r * nrings + op->ring_id].len++;
  }
  for (int k = 0; ok && k < nranks * nrings; k++) {
    seq *q = &ss->s[k];
    size_t n = q->len ? q->len : 1;
    q->op = malloc(n * sizeof *q->op);
    q->cls = malloc(n * sizeof *q->cls);
    q->coll_at = malloc(n * sizeof *q->coll_at);
    q->send_at = malloc(n * sizeof *q->send_at);
    q->recv_at = malloc(n * sizeof *q->recv_at);
    q->send_off = calloc((size_t)nranks + 1, sizeof *q->send_off);
    q->recv_off = calloc((size_t)nranks + 1, sizeof *q->recv_off);
    ok = q->op && q->cls && q->coll_at && q->send_at && q->recv_at &&
         q->send_off && q->recv_off;
    q->len = 0;
  }
  for (size_t i = 0; ok && i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = comm_prim(prog, i);
    if (p == NULL || op->ring_id < 0 || op->ring_id >= nrings)
      continue;
    for (int r = 0; r < nranks; r++) {
      seq *q = &ss->s[r * nrings + op->ring_id];
      if (!ovl__op_on_rank(op, r))
        continue;
      q->op[q->len] = (uint32_t)i;
      if (p->kind == OVL_PRIM_COLL) {
        q->cls[q->len] = q->ncoll;
        q->coll_at[q->ncoll++] = q->len;
      } else {
        int peer = ovl__op_peer(prog, op, r);
        uint32_t *off = p->kind == OVL_PRIM_SEND ? q->send_off : q->recv_off;
        if (peer >= 0 && peer < nranks)
          q->cls[q->len] = off[peer + 1]++; /* counts, for now */
      }
      q->len++;
    }
  }
  /* The p2p entries by peer: offsets from the counts, then the entries. */
  for (int k = 0; ok && k < nranks * nrings; k++) {
    seq *q = &ss->s[k];
    int r = k / (nrings > 0 ? nrings : 1);
    for (int p = 0; p < nranks; p++) {
      q->send_off[p + 1] += q->send_off[p];
      q->recv_off[p + 1] += q->recv_off[p];
    }
    for (uint32_t e = 0; e < q->len; e++) {
      const ovl__op *op = &prog->ops[q->op[e]];
      const ovl__prim *p = comm_prim(prog, q->op[e]);
      int peer;
      if (p->kind == OVL_PRIM_COLL)
        continue;
      peer = ovl__op_peer(prog, op, r);
      if (peer < 0 || peer >= nranks)
        continue;
      if (p->kind == OVL_PRIM_SEND)
        q->send_at[q->send_off[peer] + q->cls[e]] = e;
      else
        q->recv_at[q->recv_off[peer] + q->cls[e]] = e;
    }
  }
  if (!ok) {
    seqs_free(ss);
    return NULL;
  }
  return ss;
}

static const seq *seq_of(const seqs *ss, int rank, int ring) {
  return &ss->s[rank * ss->nrings + ring];
}

/* The op of tag t (>= 1) of q, or -1 past the end of the run. */
static long tag_op(const seq *q, uint64_t t, int iters) {
  if (t == 0 || q->len == 0 || (t - 1) / q->len >= (uint64_t)iters)
    return -1;
  return (long)q->op[(t - 1) % q->len];
}

/* ------------------------------------------------------------------ */
/* The first disagreement                                              */
/* ------------------------------------------------------------------ */

/* What has to agree between the two sides of a comm op. */
typedef struct sig {
  const ovl__opdef *def;
  ovl_dtype dtype;
  size_t count;
  int root; /* -1: none */
} sig;

static sig sig_of(const ovl_program *prog, size_t i, int rank) {
  const ovl__op *op = &prog->ops[i];
  const ovl__prim *p = comm_prim(prog, i);
  sig s = {op->def, OVL_DTYPE_FLOAT32, 1, -1};
  if (p->kind == OVL_PRIM_COLL) {
    if (op->def->coll != OVL_COLL_BARRIER && op->nin > 0) {
      const ovl__var *x = &prog->vars[op->in[0]];
      const ovl__var *o = &prog->vars[op->out >= 0 ? op->out : op->in[0]];
      s.dtype = x->dtype;
      s.count = ovl__coll_count(op->def->coll, x->numel, o->numel);
    }
    if (ovl__coll_has_root(op->def->coll))
      s.root = ovl__op_root(prog, op, rank);
  } else {
    const ovl__var *v =
        &prog->vars[p->kind == OVL_PRIM_SEND ? op->in[0] : op->out];
    s.dtype = v->dtype;
    s.count = (size_t)v->numel;
  }
  return s;
}

static bool sig_eq(const sig *a, const sig *b, bool p2p) {
  /* A send and its receive are different rows that agree on the data. */
  return (p2p || a->def == b->def) && a->dtype == b->dtype &&
         a->count == b->count && a->root == b->root;
}

/* "c_allreduce_sum (line 14)", "send_v2 to rank 1 float32 count=100
 * (line 14)": the details when `detail`. */
static void describe(const ovl_program *prog, size_t i, int rank,
                     bool detail, char *buf, size_t size) {
  const ovl__op *op = &prog->ops[i];
  const ovl__prim *p = comm_prim(prog, i);
  sig s = sig_of(prog, i, rank);
  size_t len = (size_t)snprintf(buf, size, "%s", op->def->name);
  if (p->kind != OVL_PRIM_COLL && len < size)
    len += (size_t)snprintf(buf + len, size - len, " %s rank %d",
                            p->kind == OVL_PRIM_SEND ? "to" : "from",
                            ovl__op_peer(prog, op, rank));
  if (detail && len < size)
    len += (size_t)snprintf(buf + len, size - len, " %s count=%zu",
                            ovl_dtype_name(s.dtype), s.count);
  if (detail && s.root >= 0 && len < size)
    len += (size_t)snprintf(buf + len, size - len, " root=%d", s.root);
  if (len < size)
    snprintf(buf + len, size - len, " (line %d)", op->line);
}

/* "ring 0 #5: rank 0 X (line 14), rank 1 Y (line 20)", the second tag
 * shown where it differs; tb == 0: rank b never issues the other side. */
static void say_disagree(const ovl_program *prog, int ring, int ra,
                         uint64_t ta, long oa, int rb, uint64_t tb, long ob,
                         bool p2p, char *buf, size_t size) {
  char da[160], db[160];
  bool detail = false;
  if (ob >= 0) {
    sig sa = sig_of(prog, (size_t)oa, ra), sb = sig_of(prog, (size_t)ob, rb);
    detail = p2p || sa.def == sb.def;
  }
  describe(prog, (size_t)oa, ra, detail, da, sizeof da);
  if (ob < 0) {
    snprintf(buf, size, "ring %d #%llu: rank %d %s, rank %d never issues %s",
             ring, (unsigned long long)ta, ra, da, rb,
             !p2p ? "it"
             : comm_prim(prog, (size_t)oa)->kind == OVL_PRIM_SEND
                 ? "the matching recv_v2"
                 : "the matching send_v2");
    return;
  }
  describe(prog, (size_t)ob, rb, detail, db, sizeof db);
  if (tb == ta)
    snprintf(buf, size, "ring %d #%llu: rank %d %s, rank %d %s", ring,
             (unsigned long long)ta, ra, da, rb, db);
  else
    snprintf(buf, size, "ring %d #%llu: rank %d %s, rank %d #%llu %s", ring,
             (unsigned long long)ta, ra, da, rb, (unsigned long long)tb, db);
}

/* Whether entry e of rank r's sequence of `ring` has a matching other
 * side on every rank it needs, within one iteration (the ranks meet at a
 * barrier between iterations: nothing of one meets anything of the next);
 * if not, the words in buf, tags those of iteration `iter`. */
static bool check_entry(const ovl_program *prog, const seqs *ss, int ring,
                        int r, uint32_t e, int iter, char *buf,
                        size_t size) {
  const seq *q = seq_of(ss, r, ring);
  uint64_t ta = (uint64_t)iter * q->len + e + 1;
  long oa = (long)q->op[e];
  const ovl__prim *p = comm_prim(prog, (size_t)oa);
  sig sa = sig_of(prog, (size_t)oa, r);
  uint32_t g = q->cls[e];

  if (p->kind == OVL_PRIM_COLL) {
    /* Rank 0's against every other rank's, the others' against rank 0's
     * only: agreeing is transitive, so that finds every disagreement in
     * O(ranks) per collective. */
    for (int b = r == 0 ? 1 : 0; b < (r == 0 ? ss->nranks : 1); b++) {
      const seq *qb = seq_of(ss, b, ring);
      uint64_t tb = 0;
      long ob = -1;
      if (g < qb->ncoll) {
        tb = (uint64_t)iter * qb->len + qb->coll_at[g] + 1;
        ob = (long)qb->op[qb->coll_at[g]];
        sig sb = sig_of(prog, (size_t)ob, b);
        if (sig_eq(&sa, &sb, false))
          continue;
      }
      say_disagree(prog, ring, r, ta, oa, b, tb, ob, false, buf, size);
      return false;
    }
    return true;
  }
  {
    int peer = ovl__op_peer(prog, &prog->ops[oa], r);
    bool send = p->kind == OVL_PRIM_SEND;
    const seq *qb;
    const uint32_t *off;
    uint64_t tb = 0;
    long ob = -1;
    if (peer < 0 || peer >= ss->nranks)
      return true;
    qb = seq_of(ss, peer, ring);
    off = send ? qb->recv_off : qb->send_off;
    if (g < off[r + 1] - off[r]) {
      uint32_t eb = (send ? qb->recv_at : qb->send_at)[off[r] + g];
      tb = (uint64_t)iter * qb->len + eb + 1;
      ob = (long)qb->op[eb];
      sig sb = sig_of(prog, (size_t)ob, peer);
      if (sig_eq(&sa, &sb, true))
        return true;
    }
    say_disagree(prog, ring, r, ta, oa, peer, tb, ob, true, buf, size);
    return false;
  }
}

/* The first entry of `ring` (by position in the iteration, then rank)
 * that has no match. */
static bool first_disagreement(const ovl_program *prog, const seqs *ss,
                               int ring, int iter, char *buf, size_t size) {
  uint32_t longest = 0;
  for (int r = 0; r < ss->nranks; r++)
    if (seq_of(ss, r, ring)->len > longest)
      longest = seq_of(ss, r, ring)->len;
  buf[0] = '\0';
  for (uint32_t e = 0; e < longest; e++)
    for (int r = 0; r < ss->nranks; r++)
      if (e < seq_of(ss, r, ring)->len &&
          !check_entry(prog, ss, ring, r, e, iter, buf, size))
        return true;
  return false;
}

bool ovl__comm_first_disagreement(const ovl_program *prog, int ring,
                                  int iter, char *buf, size_t size) {
  seqs *ss;
  bool found = false;
  if (size > 0)
    buf[0] = '\0';
  if (prog->nrings == 0 || size == 0 || ring >= prog->nrings)
    return false;
  ss = seqs_build(prog);
  if (ss == NULL)
    return false;
  for (int g = ring < 0 ? 0 : ring;
       !found && g < (ring < 0 ? prog->nrings : ring + 1); g++)
    found = first_disagreement(prog, ss, g, iter < 0 ? 0 : iter, buf, size);
  seqs_free(ss);
  return found;
}

/* ------------------------------------------------------------------ */
/* The message                                                         */
/* ------------------------------------------------------------------ */

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

/* "#12 send_v2 (pipe.sched:14)", or "nothing". */
static void say_tag(const ovl_program *prog, uint64_t tag, long op,
                    char *buf, size_t size) {
  if (tag == 0)
    snprintf(buf, size, "nothing");
  else if (op < 0)
    snprintf(buf, size, "#%llu", (unsigned long long)tag);
  else
    snprintf(buf, size, "#%llu %s (%s:%d)", (unsigned long long)tag,
             prog->ops[op].def->name, base_name(prog->filename),
             prog->ops[op].line);
}

/* One rank's entry of a ring, in words (after "rank R ring G: "). */
static void say_entry(const ovl_program *prog, const seqs *ss,
                      const ovl__flight *f, int r, int ring, char *buf,
                      size_t size) {
  size_t k = (size_t)r * (size_t)f->nrings + (size_t)ring;
  char e[160], d[160];
  say_tag(prog, f->enq_tag[k], f->enq_tag[k] ? (long)f->enq_op[k] : -1, e,
          sizeof e);
  if (!f->have_done) {
    snprintf(buf, size, "enqueued %s", e);
    return;
  }
  say_tag(prog, f->done_tag[k],
          tag_op(seq_of(ss, r, ring), f->done_tag[k], f->iters), d,
          sizeof d);
  snprintf(buf, size, "enqueued %s, completed %s", e, d);
}

/* "; ranks agree ..., the first not completed is ring 0 #3: rank 0
 * recv_v2 from rank 1 (line 4), rank 1 ..." for the smallest tag some
 * rank enqueued and has not completed; false when there is none. */
static bool first_pending(const ovl_program *prog, const seqs *ss,
                          const ovl__flight *f, char *buf, size_t size) {
  uint64_t best = 0;
  int bring = -1;
  size_t len;
  if (!f->have_done)
    return false;
  for (int ring = 0; ring < f->nrings; ring++)
    for (int r = 0; r < f->nranks; r++) {
      size_t k = (size_t)r * (size_t)f->nrings + (size_t)ring;
      if (f->enq_tag[k] > f->done_tag[k] &&
          (best == 0 || f->done_tag[k] + 1 < best)) {
        best = f->done_tag[k] + 1;
        bring = ring;
      }
    }
  if (best == 0)
    return false;
  len = (size_t)snprintf(buf, size, "first not completed: ring %d #%llu:",
                         bring, (unsigned long long)best);
  for (int r = 0, n = 0; r < f->nranks && len < size; r++) {
    size_t k = (size_t)r * (size_t)f->nrings + (size_t)bring;
    long op;
    char d[160];
    if (!(f->enq_tag[k] > f->done_tag[k] && f->done_tag[k] + 1 == best))
      continue;
    op = tag_op(seq_of(ss, r, bring), best, f->iters);
    if (op < 0)
      continue;
    if (n++ == 4) {
      len += (size_t)snprintf(buf + len, size - len, " ...");
      break;
    }
    describe(prog, (size_t)op, r, false, d, sizeof d);
    len += (size_t)snprintf(buf + len, size - len, "%s rank %d %s",
                            n > 1 ? "," : "", r, d);
  }
  return true;
}

void ovl__flight_append(const ovl_program *prog, const ovl__flight *f,
                        char *msg, size_t size) {
  size_t len = strlen(msg);
  seqs *ss;
  char tail[512], entry[400], prev[400];
  bool *done;
  int nentries = 0, shown = 0;
  bool any = false;

  if (prog->nrings == 0 || f->nrings != prog->nrings || len + 1 >= size)
    return;
  ss = seqs_build(prog);
  done = calloc((size_t)f->nranks * (size_t)f->nrings, sizeof *done);
  if (ss == NULL || done == NULL)
    goto out;
  for (int k = 0; k < f->nranks * f->nrings; k++)
    if (seq_of(ss, k / f->nrings, k % f->nrings)->len > 0) {
      nentries++;
      any = true;
    }
  if (!any)
    goto out; /* no communication: nothing to record */

  /* The conclusion first, so that the entries can be cut to fit. */
  {
    char text[400];
    size_t tl = 0;
    int found = 0;
    tail[0] = '\0';
    /* The first of each ring, of the first three rings that have one. */
    for (int ring = 0; ring < f->nrings; ring++) {
      if (!first_disagreement(prog, ss, ring, f->iter, text, sizeof text))
        continue;
      if (++found > 3)
        continue;
      if (tl < sizeof tail)
        tl += (size_t)snprintf(tail + tl, sizeof tail - tl, "%s%s",
                               found == 1 ? "; ranks disagree first at "
                                          : "; and at ",
                               text);
    }
    if (found > 3 && tl < sizeof tail)
      snprintf(tail + tl, sizeof tail - tl, " (and %d more rings)",
               found - 3);
    if (found == 0 && first_pending(prog, ss, f, text, sizeof text))
      snprintf(tail, sizeof tail, "; ranks agree; %s", text);
  }

  /* Entries, ranks with the same one grouped ("ranks 0,2 ring 0: ..."),
   * while they fit before the conclusion. */
  {
    size_t budget = size - 1 - strlen(tail);
    const char *sep = "; flight record: ";
    int left = nentries;
    for (int ring = 0; ring < f->nrings; ring++)
      for (int r = 0; r < f->nranks; r++) {
        size_t k = (size_t)r * (size_t)f->nrings + (size_t)ring;
        char ranks[256], text[700];
        size_t rl;
        int count = 0;
        if (done[k] || seq_of(ss, r, ring)->len == 0)
          continue;
        say_entry(prog, ss, f, r, ring, prev, sizeof prev);
        rl = 0;
        for (int q = r; q < f->nranks; q++) {
          size_t kq = (size_t)q * (size_t)f->nrings + (size_t)ring;
          if (done[kq] || seq_of(ss, q, ring)->len == 0)
            continue;
          say_entry(prog, ss, f, q, ring, entry, sizeof entry);
          if (strcmp(entry, prev) != 0)
            continue;
          done[kq] = true;
          count++;
          if (rl < sizeof ranks)
            rl += (size_t)snprintf(ranks + rl, sizeof ranks - rl, "%s%d",
                                   count > 1 ? "," : "", q);
        }
        snprintf(text, sizeof text, "%s%s %s ring %d: %s", sep,
                 count > 1 ? "ranks" : "rank", ranks, ring, prev);
        /* Room for this one and for saying how many more there are. */
        if (len + strlen(text) + (left > count ? 40 : 0) > budget) {
          if (len < budget)
            len += (size_t)snprintf(msg + len, size - len,
                                    "%s(%d more rank and ring entries)",
                                    shown ? "; " : "; flight record: ",
                                    left);
          goto conclude;
        }
        len += (size_t)snprintf(msg + len, size - len, "%s", text);
        sep = "; ";
        shown += count;
        left -= count;
      }
  }
conclude:
  if (len < size)
    snprintf(msg + len, size - len, "%s", tail);
out:
  seqs_free(ss);
  free(done);
}
