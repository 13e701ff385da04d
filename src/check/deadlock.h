/*
 * The parts of the deadlock check, private to them (docs/ARCHITECTURE.md,
 * "Checks"): check/deadlock.c, the check (what it does, and its entry);
 * check/deadlock_exec.c, the abstract execution; check/deadlock_cycles.c,
 * what the blocked participants wait for and its cycles;
 * check/deadlock_report.c, the report (ovl_deadlocks). Each calls only
 * those after it in this list.
 */
#ifndef OVL_CHECK_DEADLOCK_H
#define OVL_CHECK_DEADLOCK_H

#include "check/findings.h"
#include "check/match.h"

/* ------------------------------------------------------------------ */
/* The report (check/deadlock_report.c)                                */
/* ------------------------------------------------------------------ */

/* What a step blocked at a comm op waits to match: the other rank's op,
 * and where that rank is held back before it (ovl_deadlock_match). */
typedef struct dl_match {
  int rank; /* -1: the step is not blocked at a comm op */
  uint32_t op;
  int line, col;
  const char *op_name;
  /* The op the other rank is blocked at first (its host, or the stream of
   * the op): the op waited for is issued only after it. */
  uint32_t after_op;
  int after_line;
  const char *after_op_name;
  int after_stream; /* -1: the host */
  const char *after_stream_name; /* "host", "calc", ...: owned by the record */
} dl_match;

typedef struct dl_rec {
  size_t nsteps;
  ovl_deadlock_step *steps;
  dl_match *match; /* per step */
  char **names; /* the steps' stream names, owned */
  uint64_t occurrences;
  char *message;
  /* The key: the number of steps, then per step its op's position, and
   * its stream and whether the next step is on another rank (2 * nsteps
   * + 1 words). */
  uint64_t *key;
  /* The forms it was found in, and the forms checked (as race_rec's:
   * check/forms.c). */
  unsigned forms, forms_checked;
  /* Its fix hint (check/order_fix.c), as a mismatch's. */
  ovl__fix_slot fix;
} dl_rec;

struct ovl_deadlocks_s {
  /* The deadlocks (dl_rec), at most OVL_FINDINGS_LIST_MAX; its `more`:
   * the cycles not listed. */
  ovl__flist list;
  uint64_t blocked;
  int nranks;
  bool graph; /* checked as graphs run (ovl__deadlock_check_graph) */
  /* With something blocked: the positions (line << 32 | col) of the comm
   * ops the execution never reached (no rank posted one of them), sorted:
   * a deadlock there was not looked for. */
  uint64_t *unreached;
  size_t nunreached;
};

/* Whether the execution of `d` never reached the comm ops at position
 * `pos` (line << 32 | col). */
bool ovl__deadlocks_unreached(const ovl_deadlocks *d, uint64_t pos);

/* An empty report, for `nranks` ranks, checked as graphs run when
 * `graph`; NULL when out of memory. */
ovl_deadlocks *ovl__deadlocks_new(int nranks, bool graph);

/* Add the cycle of steps st[0 .. n), with what each waits to match
 * (mt[0 .. n)), unless one alike is listed (it counts one more). Both are
 * taken (kept or freed) whatever happens. False when out of memory. */
bool ovl__deadlocks_add(ovl_deadlocks *res, ovl_deadlock_step *st,
                        dl_match *mt, size_t n);

/* ------------------------------------------------------------------ */
/* The execution (check/deadlock_exec.c)                               */
/* ------------------------------------------------------------------ */

enum { ST_IDLE, ST_RUN, ST_WAIT, ST_COMM, ST_SYNC, ST_DONE };
enum { IT_NONE = 0, IT_POSTED = 1, IT_DONE = 2 };

typedef struct pstate {
  uint8_t state;
  bool queued;
  int16_t wait_stream; /* ST_WAIT: the recording stream; host ST_SYNC */
  uint32_t wait_rec;   /* ST_WAIT: the record it waits for */
  /* Stream: the next primitive, as a position in its list; ST_COMM: the
   * position just past the head's items, and how many are not done. */
  uint32_t pos, entry_end, remaining;
  /* ST_COMM: the head's items: items[entry_item ..] of its rank, one per
   * primitive of the rank in [pos, entry_end). */
  uint32_t entry_item;
  /* Stream: a cursor into its rank's items (they are in program order). */
  size_t icur;
  /* Host: the next op, and its frontier (a primitive index). */
  uint32_t hop, hp;
} pstate;

typedef struct dl {
  const ovl_program *prog;
  const ovl__match *m;
  /* Graph mode: a host sync waits for every stream of its rank (the
   * segment before it is one graph). */
  bool graph;
  int nr, ns, np; /* ranks, streams, participants per rank (ns + 1) */
  /* Per op: its ranks (compact copy of ops[i].ranks). */
  uint64_t *opranks;
  /* Per primitive: its op; for a WAIT the program's last RECORD of its
   * event before it, for a RECORD the previous one (OVL__NONE: none). */
  uint32_t *op_of, *cap;
  /* Per stream s: its primitives slist[sfirst[s] .. sfirst[s + 1]), and
   * each one's ranks (sranks, beside it). */
  uint32_t *slist;
  uint64_t *sranks;
  size_t *sfirst;
  /* Per rank and participant (rank * np + part; part ns: the host). */
  pstate *ps;
  /* Comm items' state, and the collectives posted per (ring, k). */
  uint8_t *ist;
  uint32_t *ccount;
  size_t *coff; /* per ring: offset into ccount */
  /* The worklist (each participant at most once). */
  uint32_t *q;
  size_t qhead, qlen, qcap;
} dl;

#define PS(d, r, part) (&(d)->ps[(size_t)(r) * (size_t)(d)->np + (size_t)(part)])
#define ON(d, op, r) (((d)->opranks[op] >> (r)) & 1)

/* The state of the execution of `prog`, whose matching is `m`; nothing
 * has run. False when out of memory (d is then freed). */
bool ovl__dl_init(dl *d, const ovl_program *prog, const ovl__match *m);
void ovl__dl_free(dl *d);

/* Run every participant as far as it can: what is left is blocked. */
void ovl__dl_execute(dl *d);

/* The next primitive of stream s of rank r (UINT32_MAX: none left). */
uint32_t ovl__dl_next_prim(dl *d, int r, int s);

/* ------------------------------------------------------------------ */
/* The cycles (check/deadlock_cycles.c)                                */
/* ------------------------------------------------------------------ */

/* After the execution: how many participants are blocked (res->blocked),
 * and the cycles of what they wait for, each one into `res`. */
ovl_status ovl__dl_find_cycles(dl *d, ovl_deadlocks *res, ovl_error *err);

#endif /* OVL_CHECK_DEADLOCK_H */
