/*
 * Fix hints of mismatches and deadlocks (docs/ARCHITECTURE.md, "Checks";
 * docs/ORDERING.md), private to their parts:
 * check/order_fix.c makes the candidates of a finding from the program
 * and the schedule's text; check/order_fix_check.c checks a whole text
 * (every check of every form, its findings as keys of the original's
 * lines) and re-checks the candidates with it; check/fix_apply.c (the
 * fixed schedule) checks texts with it too. Each calls only those before
 * it in this list. The records' setters are check/mismatch.c's and
 * check/deadlock_report.c's.
 */
#ifndef OVL_CHECK_ORDER_FIX_H
#define OVL_CHECK_ORDER_FIX_H

#include "check/check.h"
#include "check/edit.h"
#include "check/match.h"

/* Set finding i's hint: `text` (taken; NULL: none), checked or not and
 * why (copied). False when out of memory. */
bool ovl__mismatch_set_fix(ovl_mismatches *m, size_t i, char *text,
                           bool checked, const char *why);
bool ovl__deadlock_set_fix(ovl_deadlocks *d, size_t i, char *text,
                           bool checked, const char *why);

/* ------------------------------------------------------------------ */
/* Candidates (check/order_fix.c)                                      */
/* ------------------------------------------------------------------ */

#define ORDER_MAX_CANDS 8

typedef struct ocands {
  int n;
  ovl__edit e[ORDER_MAX_CANDS];
} ocands;

/* What the candidates are made from: the program as bound, its matching
 * (NULL for an SPMD program), the schedule's lines, and per line the
 * first op of the program on it (UINT32_MAX: none). */
typedef struct ocontext {
  const ovl_program *bound;
  const ovl__match *m;
  const ovl__lines *L;
  uint32_t *line_op; /* [L->n + 2] */
} ocontext;

/* One more candidate (a copy of e), unless it is there or there is no
 * room. */
void ovl__ocands_add(ocands *out, const ovl__edit *e);

bool ovl__order_context_make(ocontext *c, const ovl_program *bound,
                             const ovl__match *m, const ovl__lines *L);
void ovl__order_context_free(ocontext *c);

/* The candidates of mismatch i, in order of preference: widen a
 * collective's ranks= to every rank, or move the collective that should
 * come first before the one that does; with `standins` instead (to try
 * after those), widen deleting what the ranks it skipped did instead.
 * None: *none says why (without `standins`). */
void ovl__mismatch_candidates(const ocontext *c, const ovl_mismatches *mm,
                              size_t i, bool standins, ocands *out,
                              const char **none);
/* The candidates of deadlock i of `form` (a form of c->bound): put an
 * ungrouped send and receive that wait for each other in one group, or
 * move the comm op a rank waits for before what holds it back. */
void ovl__deadlock_candidates(const ocontext *c, const ovl_program *form,
                              const ovl_deadlocks *d, size_t i, ocands *out,
                              const char **none);

/* ------------------------------------------------------------------ */
/* Checking a text (check/order_fix_check.c)                           */
/* ------------------------------------------------------------------ */

/* Findings as keys, in the lines of the original text: races (per form),
 * deadlocks (by the comm ops of their cycle) and mismatches (by kind,
 * ring, what differs and each rank's op). */
typedef struct okeys {
  uint64_t *w; /* the words of every key */
  size_t nw, capw;
  struct okey {
    uint64_t hash;
    size_t off, len;
    int kind; /* OKEY_* */
  } *k;
  size_t n, cap;
  bool sorted;
} okeys;

enum { OKEY_RACE, OKEY_DEADLOCK, OKEY_MISMATCH };

void ovl__okeys_free(okeys *k);
/* Whether `k` holds a key `kind` of words w[0 .. n) (k sorted). */
bool ovl__okeys_has(okeys *k, int kind, const uint64_t *w, size_t n);

/* What a whole check of a text gave: its findings as keys, how many of
 * each kind, and its reports (owned: kept when `keep`). */
typedef struct ochecked {
  okeys keys;
  uint64_t races, mismatches, deadlocks; /* per form, listed and more */
  size_t nforms;
  size_t nops; /* of the program as bound */
  ovl_program *bound;
  ovl_mismatches *mm;
  ovl_program *forms[OVL__MODE_COUNT];
  ovl_races *races_of[OVL__MODE_COUNT];
  ovl_deadlocks *dl_of[OVL__MODE_COUNT];
} ochecked;

/* The modes to check, and how. */
typedef struct omodes {
  ovl_mode mode[OVL__MODE_COUNT];
  size_t n;
  bool graph; /* deadlocks as graphs run (ovl__deadlock_check_graph) */
  bool mismatches; /* some mode keeps the communication */
} omodes;

/* Check `text` (len bytes; taken: freed whatever happens) as the
 * schedule `filename` bound with `opts`: the mismatches of the program
 * and the races and deadlocks of each of m's modes. `map` (NULL: none)
 * gives each line's line in the original text. *usable false: it does
 * not parse or bind (nothing else set). With `keep` the programs and
 * reports stay in *out (ochecked_free). Errors: out of memory, a check's
 * failure. */
ovl_status ovl__check_text(char *text, size_t len, const char *filename,
                           const ovl_bind_opts *opts, const omodes *m,
                           const ovl__edited *map, bool keep,
                           ochecked *out, bool *usable, ovl_error *err);
void ovl__ochecked_free(ochecked *c);

/* The keys of one race, deadlock or mismatch (w: room for
 * OKEY_MAX_WORDS), in the lines of the original (map NULL: as they are).
 * Returns the words written. */
#define OKEY_MAX_WORDS (4 + 4 * OVL_MAX_RANKS)
size_t ovl__race_key(const ovl_races *r, size_t i, ovl_mode mode,
                     const ovl__edited *map, uint64_t *w);
size_t ovl__deadlock_key(const ovl_deadlocks *d, size_t i,
                         const ovl__edited *map, uint64_t *w);
size_t ovl__mismatch_key(const ovl_mismatches *m, size_t i,
                         const ovl__edited *map, uint64_t *w);

/* ovl__order_check_fixes (check/check.h) is this file's entry: bounded
 * as the race hints' re-check (about 16 M units). */

#endif /* OVL_CHECK_ORDER_FIX_H */
