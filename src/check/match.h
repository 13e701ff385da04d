/*
 * The matching of communication across ranks (check/match.c): the one
 * place that decides which comm op meets which. Shared by the mismatch
 * check (check/mismatch.c), the deadlock check (check/deadlock.c), the
 * reference's per-rank interpreter (check/reference.c) and the executor's
 * flight record (run/flight.c: a higher layer).
 *
 * Per rank, every op that runs there and talks to other ranks (its
 * primitives hold a COLL, SEND or RECV) is an *item*, in program order (the
 * order the rank's host enqueues them). Per ring:
 *   - collectives: the k-th collective a rank issues on ring R meets the
 *     k-th of every other rank (all ranks are in every communicator);
 *   - point-to-point (NCCL's rule): the j-th send from a to b on ring R
 *     matches the j-th receive on b from a on ring R.
 * Building it is one pass over the ops per rank set bit: O(comm ops x
 * ranks) time and memory.
 */
#ifndef OVL_CHECK_MATCH_H
#define OVL_CHECK_MATCH_H

#include "core/op.h"

#define OVL__NONE UINT32_MAX

/* What an item is. */
enum { OVL__CI_COLL = 0, OVL__CI_SEND = 1, OVL__CI_RECV = 2 };

typedef struct ovl__citem {
  uint32_t op;      /* its op (index in the program) */
  uint32_t prim;    /* its COLL / SEND / RECV primitive (global index) */
  /* Collective: k, its number (0-based) among the rank's collectives on
   * the ring. Send (receive): j, its number among the rank's sends to
   * (receives from) `peer` on the ring. */
  uint32_t ord;
  /* 1 + its number among all the rank's comm ops on the ring (collectives
   * and point-to-point), within one iteration: the executor's tag in the
   * first iteration (flight record). */
  uint32_t tag;
  /* Send / receive: the item it matches, or OVL__NONE. */
  uint32_t partner;
  /* Its op's group instance (op->group; 0: none). */
  uint32_t group;
  int16_t stream;
  uint8_t kind; /* OVL__CI_* */
  uint8_t ring;
  uint8_t rank;
  uint8_t peer; /* send / receive: the other rank */
} ovl__citem;

typedef struct ovl__match {
  const ovl_program *prog;
  /* The file name positions are given with (" at FILE:LINE:COL"): NULL
   * for prog->filename; the flight record sets a shorter one (the
   * message it goes into has the full path once already). */
  const char *file;
  int nranks, nrings;
  size_t nitems;
  /* By rank, then in program order: rank r's are items[rank_first[r] ..
   * rank_first[r + 1]). */
  ovl__citem *items;
  size_t *rank_first;
  /* Collectives of rank r on ring R, in order: items
   * coll[cfirst[r * nrings + R] + k], k < ncoll(r, R). */
  uint32_t *coll;
  size_t *cfirst;
  /* The most collectives any rank issues on ring R. */
  uint32_t *coll_max;
  /* Sends from a to b on ring R, in order: items send[sfirst[P] + j],
   * P = (R * nranks + a) * nranks + b; receives on b from a:
   * recv[rfirst[Q] + j], Q = (R * nranks + b) * nranks + a. */
  uint32_t *send, *recv;
  size_t *sfirst, *rfirst;
} ovl__match;

/* Whether the ranks of `prog` may run different programs: some op runs on
 * only some ranks, has a rank-dependent attribute, or is point-to-point
 * (an SPMD program has no mismatch and no deadlock: every rank issues the
 * same collectives in the same order). Computed from the ops (it does not
 * trust prog->rank_dependent). */
bool ovl__program_ranks_differ(const ovl_program *prog);

/* The matching of `prog` (lowered). On failure (OVL_ENOMEM) `m` is
 * released. */
ovl_status ovl__match_build(const ovl_program *prog, ovl__match *m,
                            ovl_error *err);
void ovl__match_free(ovl__match *m);

static inline size_t ovl__match_ncoll(const ovl__match *m, int rank,
                                      int ring) {
  size_t k = (size_t)rank * (size_t)m->nrings + (size_t)ring;
  return m->cfirst[k + 1] - m->cfirst[k];
}
/* Rank r's k-th collective on ring R (an item index), or OVL__NONE. */
static inline uint32_t ovl__match_coll(const ovl__match *m, int rank,
                                       int ring, size_t k) {
  size_t b = (size_t)rank * (size_t)m->nrings + (size_t)ring;
  return k < m->cfirst[b + 1] - m->cfirst[b] ? m->coll[m->cfirst[b] + k]
                                             : OVL__NONE;
}
static inline size_t ovl__match_pair(const ovl__match *m, int ring, int a,
                                     int b) {
  return ((size_t)ring * (size_t)m->nranks + (size_t)a) * (size_t)m->nranks +
         (size_t)b;
}

/* Rank r's item of op i (an index in the program), for every (rank, op)
 * at once: of[r * prog->nops + i] (nranks * nops entries, all written),
 * OVL__NONE where op i does not run on r or does not communicate. */
void ovl__match_item_table(const ovl__match *m, uint32_t *of);
/* Rank r's comm ops on ring R in one iteration (the last one's tag). */
uint32_t ovl__match_ring_len(const ovl__match *m, int rank, int ring);
/* Rank r's item of tag `tag` on ring R (1 ... ovl__match_ring_len: within
 * one iteration), or OVL__NONE. Both walk the rank's items. */
uint32_t ovl__match_tag_item(const ovl__match *m, int rank, int ring,
                             uint64_t tag);

/* How an item's op reads: its input's variable (-1: none), its output's,
 * its dtype and element count (as NCCL is called: ovl__coll_count for a
 * collective; the variable's for send / receive), root (-1: none). */
typedef struct ovl__citem_desc {
  const ovl__op *op;
  int in, out;
  ovl_dtype dtype;
  int64_t count;
  int root;
} ovl__citem_desc;
void ovl__citem_describe(const ovl__match *m, const ovl__citem *it,
                         ovl__citem_desc *d);
/* "c_allreduce_sum of 'g' (float32, 100 elements)", "c_broadcast of 'g'
 * (float32, 100 elements, root 0)", "c_allgather of 'x' into 'y' (...)",
 * "barrier", "send_v2 of 'x' (...)", "recv_v2 into 'y' (...)". */
void ovl__citem_text(const ovl__match *m, const ovl__citem *it, char *buf,
                     size_t size);
/* ovl__citem_text, then " to rank P" (a send) or " from rank P" (a
 * receive), then " at FILE:LINE:COL": "recv_v2 into 'y' (float32, 8
 * elements) from rank 1 at p.sched:4:5". */
void ovl__citem_where(const ovl__match *m, const ovl__citem *it,
                      ovl__sbuf *b);

/* Whether collectives a and b (items) agree: the same collective,
 * reduction, count, dtype, root and variables. */
bool ovl__match_coll_agree(const ovl__match *m, uint32_t a, uint32_t b);

/* ------------------------------------------------------------------ */
/* Disagreements (mismatches), one occurrence at a time                */
/* ------------------------------------------------------------------ */

/* One occurrence of a disagreement. */
typedef struct ovl__occ {
  int kind; /* ovl_mismatch_kind */
  int ring;
  uint64_t index;       /* k or j, 0-based */
  int sender, receiver; /* point-to-point; -1 for a collective */
  unsigned differs;     /* OVL_DIFFERS_* */
  bool same_size;
  /* Collective: per rank its k-th item (OVL__NONE: it never issues it);
   * point-to-point: the send, then the receive (either OVL__NONE). */
  int nitems;
  const uint32_t *items;
} ovl__occ;

/* Call fn for every disagreement on ring `ring` (-1: every ring), ring by
 * ring: the collectives by position, then the pairs (from, to) in order,
 * each by position. Stops at the first status fn returns that is not
 * OVL_OK. */
ovl_status ovl__match_scan(const ovl__match *m, int ring,
                           ovl_status (*fn)(void *ctx, const ovl__occ *o,
                                            ovl_error *err),
                           void *ctx, ovl_error *err);
/* The earliest tag of an occurrence, over the ranks that issue it. */
uint64_t ovl__occ_first_tag(const ovl__match *m, const ovl__occ *o);
/* The one-line text of an occurrence (mismatch findings' message). */
void ovl__occ_text(const ovl__match *m, const ovl__occ *o, ovl__sbuf *b);
/* "rank 3", "ranks 0-2", "ranks 0, 2-3". */
void ovl__ranks_text(ovl__sbuf *b, uint64_t mask);
/* "op", "count", ... of one OVL_DIFFERS_* bit. */
const char *ovl__differs_name(unsigned bit);

/* Host bytes per op the mismatch and deadlock checks keep at once, for
 * ovl_host_bytes_per_op: per op its ranks, per primitive (two an op) its
 * op, its record, its place in its stream's list and its ranks, and per
 * comm op its items on two ranks and their states (an SPMD program keeps
 * nothing; an op that runs on more ranks keeps more). */
size_t ovl__order_bytes_per_op(void);

/* ------------------------------------------------------------------ */
/* The flight record's first disagreement                              */
/* ------------------------------------------------------------------ */

typedef struct ovl__disagreement {
  /* Bit r: rank r takes part (issues the comm op at the disagreement, or
   * should and never does). */
  uint64_t ranks;
  /* Per rank of `ranks`: the tag of its comm op at the disagreement (1, 2,
   * ... its number among its comm ops on the ring, within one iteration:
   * the executor's tag in the first iteration); 0: the rank never issues
   * it. 0 for ranks not in `ranks`. */
  uint64_t tag[OVL_MAX_RANKS];
  /* Per rank: its comm ops on the ring in one iteration (iteration i's
   * tags are i * per_iter[r] + 1 ...). */
  uint64_t per_iter[OVL_MAX_RANKS];
  /* The item of the earliest tag (the lowest rank's on a tie): where the
   * disagreement shows first. */
  uint32_t item;
  /* One line, no position prefix: "collective #3: rank 0 issues
   * c_allreduce_sum of 'g' (float32, 100 elements) at f.sched:12:3, rank 1
   * issues c_broadcast of 'g' (...) at f.sched:14:3", "rank 0 sends 'x'
   * (...) to rank 1 at f.sched:5:3 (its send #2 to rank 1), rank 1 never
   * receives it (it posts 1 receive from rank 0)". */
  char text[1024];
} ovl__disagreement;

/* The first place where the ranks of the matching `m` disagree on ring
 * `ring`: the k-th collective differs between ranks or a rank never issues
 * it, a send without its receive (or a receive without its send), or a
 * matched pair whose count or dtype differ (what ovl__match_scan walks);
 * "first": the one whose earliest tag on any rank is lowest, the earlier
 * in scan order at the same tag. *found is 1 and `out` filled, or *found
 * is 0 when the ranks agree on the ring (out->per_iter is filled either
 * way). Errors: OVL_EINVAL (a NULL argument, ring out of range),
 * OVL_ENOMEM. Pure: safe to call from any thread while `m` and its program
 * are shared read-only. */
ovl_status ovl__match_first_disagreement(const ovl__match *m, int ring,
                                         ovl__disagreement *out, int *found,
                                         ovl_error *err);

#endif /* OVL_CHECK_MATCH_H */
