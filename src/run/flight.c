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
 * the last it completed (ring_progress). The check's matching
 * (check/match.h, the one place that pairs comm ops across ranks) gives
 * every tag its op: on rank r, tag t of ring R is the item of tag
 * (t - 1) mod n + 1 of the n comm ops of ring R that run on r, in
 * iteration (t - 1) / n. From it the message names the first place where
 * the ranks cannot match (ovl__match_first_disagreement: NCCL's rules, the
 * k-th collective of a ring meets the k-th of every other rank, the k-th
 * send from a to b the k-th receive on b from a), or else the first tag
 * some rank has not completed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/match.h"
#include "run/run.h"

/* ------------------------------------------------------------------ */
/* Tags and the matching                                               */
/* ------------------------------------------------------------------ */

/* The item of tag t (>= 1, counted across iterations) of rank r on `ring`,
 * whose comm ops there number n an iteration; OVL__NONE past the end of
 * the run. */
static uint32_t tag_item(const ovl__match *m, int r, int ring, uint32_t n,
                         uint64_t t, int iters) {
  if (t == 0 || n == 0 || (t - 1) / n >= (uint64_t)iters)
    return OVL__NONE;
  return ovl__match_tag_item(m, r, ring, (t - 1) % n + 1);
}

/* "#3 (rank 1 #2): " then the matching's text of the first disagreement
 * on `ring` (ovl__match_first_disagreement), its tags those of iteration
 * `iter`: the earliest, then each rank's that differs from it. False when
 * the ranks agree on the ring (or out of memory). */
static bool say_disagreement(const ovl__match *m, int ring, int iter,
                             char *buf, size_t size) {
  ovl__disagreement *d = malloc(sizeof *d);
  ovl_error err;
  uint64_t first = UINT64_MAX;
  size_t len;
  int found = 0, n = 0;
  if (d == NULL ||
      ovl__match_first_disagreement(m, ring, d, &found, &err) != OVL_OK ||
      !found) {
    free(d);
    return false;
  }
  for (int r = 0; r < m->nranks && r < OVL_MAX_RANKS; r++)
    if (d->tag[r] != 0 && d->tag[r] + (uint64_t)iter * d->per_iter[r] < first)
      first = d->tag[r] + (uint64_t)iter * d->per_iter[r];
  len = (size_t)snprintf(buf, size, "#%llu", (unsigned long long)first);
  for (int r = 0; r < m->nranks && r < OVL_MAX_RANKS && len < size; r++) {
    uint64_t t = d->tag[r] + (uint64_t)iter * d->per_iter[r];
    if (d->tag[r] != 0 && t != first)
      len += (size_t)snprintf(buf + len, size - len, "%srank %d #%llu",
                              n++ ? ", " : " (", r, (unsigned long long)t);
  }
  if (len < size)
    snprintf(buf + len, size - len, "%s: %s", n ? ")" : "", d->text);
  free(d);
  return true;
}

bool ovl__comm_first_disagreement(const ovl_program *prog, int ring,
                                  int iter, char *buf, size_t size) {
  ovl__match m;
  ovl_error err;
  bool found = false;
  if (size > 0)
    buf[0] = '\0';
  if (prog->nrings == 0 || size == 0 || ring >= prog->nrings ||
      ovl__match_build(prog, &m, &err) != OVL_OK)
    return false;
  for (int g = ring < 0 ? 0 : ring;
       !found && g < (ring < 0 ? prog->nrings : ring + 1); g++)
    found = say_disagreement(&m, g, iter < 0 ? 0 : iter, buf, size);
  ovl__match_free(&m);
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

/* The flight record with the matching: the comm ops per iteration and
 * the last completed item of each (rank, ring). */
typedef struct flight_view {
  const ovl_program *prog;
  const ovl__flight *f;
  ovl__match m;
  uint32_t *len;       /* [rank * nrings + ring] */
  uint32_t *done_item; /* [rank * nrings + ring] */
} flight_view;

/* One rank's entry of a ring, in words (after "rank R ring G: "). */
static void say_entry(const flight_view *v, int r, int ring, char *buf,
                      size_t size) {
  const ovl__flight *f = v->f;
  size_t k = (size_t)r * (size_t)f->nrings + (size_t)ring;
  char e[160], d[160];
  say_tag(v->prog, f->enq_tag[k], f->enq_tag[k] ? (long)f->enq_op[k] : -1,
          e, sizeof e);
  if (!f->have_done) {
    snprintf(buf, size, "enqueued %s", e);
    return;
  }
  say_tag(v->prog, f->done_tag[k],
          v->done_item[k] != OVL__NONE ? (long)v->m.items[v->done_item[k]].op
                                       : -1,
          d, sizeof d);
  snprintf(buf, size, "enqueued %s, completed %s", e, d);
}

/* "first not completed: ring 0 #3: rank 0 recv_v2 into 'y' (float32, 8
 * elements) from rank 1 at p.sched:4:5, rank 1 ..." for the smallest tag
 * some rank enqueued and has not completed; false when there is none. */
static bool first_pending(const flight_view *v, ovl__sbuf *b) {
  const ovl__flight *f = v->f;
  uint64_t best = 0;
  int bring = -1, n = 0;
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
  ovl__sb_printf(b, "first not completed: ring %d #%llu:", bring,
                 (unsigned long long)best);
  for (int r = 0; r < f->nranks; r++) {
    size_t k = (size_t)r * (size_t)f->nrings + (size_t)bring;
    uint32_t it;
    if (!(f->enq_tag[k] > f->done_tag[k] && f->done_tag[k] + 1 == best))
      continue;
    it = tag_item(&v->m, r, bring, v->len[k], best, f->iters);
    if (it == OVL__NONE)
      continue;
    if (n++ == 4) {
      ovl__sb_puts(b, " ...");
      break;
    }
    ovl__sb_printf(b, "%s rank %d ", n > 1 ? "," : "", r);
    ovl__citem_where(&v->m, &v->m.items[it], b);
  }
  return true;
}

/* The conclusion: "; ranks disagree first at ..." (the first of each
 * ring, of the first three rings that have one), or "; ranks agree; first
 * not completed: ...". */
static void conclude(const flight_view *v, ovl__sbuf *b) {
  const ovl__flight *f = v->f;
  char text[OVL_ERROR_MSG_MAX];
  int found = 0;
  for (int ring = 0; ring < f->nrings; ring++) {
    if (!say_disagreement(&v->m, ring, f->iter, text, sizeof text))
      continue;
    if (++found <= 3)
      ovl__sb_printf(b, "%s%s",
                     found == 1 ? "; ranks disagree first at " : "; and at ",
                     text);
  }
  if (found > 3)
    ovl__sb_printf(b, " (and %d more rings)", found - 3);
  if (found == 0) {
    ovl__sbuf p = {0};
    if (first_pending(v, &p) && !p.fail)
      ovl__sb_printf(b, "; ranks agree; %s", p.s);
    free(p.s);
  }
}

int ovl__group_ranks(int r, int nranks, bool *done, size_t stride,
                     bool (*same)(void *ctx, int r, int q), void *ctx,
                     char *list, size_t size) {
  size_t off = 0;
  int count = 0;
  list[0] = '\0';
  for (int q = r; q < nranks; q++) {
    if (done[(size_t)q * stride] || !same(ctx, r, q))
      continue;
    done[(size_t)q * stride] = true;
    count++;
    if (off < size)
      off += (size_t)snprintf(list + off, size - off, "%s%d",
                              count > 1 ? "," : "", q);
  }
  return count;
}

/* For ovl__group_ranks: rank q has an entry on the ring, and it is the
 * same as `prev`. */
typedef struct same_entry {
  const flight_view *v;
  int ring;
  const char *prev;
} same_entry;

static bool same_entry_as(void *ctx, int r, int q) {
  const same_entry *se = ctx;
  const ovl__flight *f = se->v->f;
  char entry[400];
  (void)r;
  if (se->v->len[(size_t)q * (size_t)f->nrings + (size_t)se->ring] == 0)
    return false;
  say_entry(se->v, q, se->ring, entry, sizeof entry);
  return strcmp(entry, se->prev) == 0;
}

void ovl__flight_append(const ovl_program *prog, const ovl__flight *f,
                        char *msg, size_t size) {
  size_t len = strlen(msg), n = (size_t)f->nranks * (size_t)f->nrings;
  flight_view v = {.prog = prog, .f = f};
  ovl__sbuf tail = {0};
  ovl_error err;
  char prev[400];
  bool *done = NULL;
  int nentries = 0, shown = 0;

  if (prog->nrings == 0 || f->nrings != prog->nrings || len + 1 >= size ||
      ovl__match_build(prog, &v.m, &err) != OVL_OK)
    return;
  /* The message names the schedule's full path once already ("where the
   * ranks were"): positions here give its base name, so that the record
   * of every rank fits. */
  if (prog->filename != NULL)
    v.m.file = base_name(prog->filename);
  v.len = calloc(n + 1, sizeof *v.len);
  v.done_item = calloc(n + 1, sizeof *v.done_item);
  done = calloc(n + 1, sizeof *done);
  if (v.len == NULL || v.done_item == NULL || done == NULL)
    goto out;
  for (size_t k = 0; k < n; k++) {
    int r = (int)(k / (size_t)f->nrings), ring = (int)(k % (size_t)f->nrings);
    v.len[k] = ovl__match_ring_len(&v.m, r, ring);
    v.done_item[k] =
        tag_item(&v.m, r, ring, v.len[k], f->done_tag[k], f->iters);
    nentries += v.len[k] > 0;
  }
  if (nentries == 0)
    goto out; /* no communication: nothing to record */

  /* The conclusion first, so that the entries can be cut to fit. */
  conclude(&v, &tail);
  if (tail.fail)
    goto out;

  /* Entries, ranks with the same one grouped ("ranks 0,2 ring 0: ..."),
   * while they fit before the conclusion. */
  {
    size_t tl = tail.s != NULL ? strlen(tail.s) : 0;
    size_t budget = size - 1 > tl ? size - 1 - tl : 0;
    const char *sep = "; flight record: ";
    int left = nentries;
    for (int ring = 0; ring < f->nrings; ring++)
      for (int r = 0; r < f->nranks; r++) {
        size_t k = (size_t)r * (size_t)f->nrings + (size_t)ring;
        char ranks[256], text[700];
        int count;
        if (done[k] || v.len[k] == 0)
          continue;
        say_entry(&v, r, ring, prev, sizeof prev);
        {
          same_entry se = {&v, ring, prev};
          count = ovl__group_ranks(r, f->nranks, done + ring,
                                   (size_t)f->nrings, same_entry_as, &se,
                                   ranks, sizeof ranks);
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
          goto tail;
        }
        len += (size_t)snprintf(msg + len, size - len, "%s", text);
        sep = "; ";
        shown += count;
        left -= count;
      }
  }
tail:
  /* The conclusion, cut with "..." where even it does not fit. */
  if (tail.s != NULL && len < size) {
    snprintf(msg + len, size - len, "%s", tail.s);
    if (len + strlen(tail.s) >= size && size - len > 3)
      memcpy(msg + size - 4, "...", 3);
  }
out:
  ovl__match_free(&v.m);
  free(v.len);
  free(v.done_item);
  free(done);
  free(tail.s);
}
