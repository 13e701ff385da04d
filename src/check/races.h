/*
 * A race report (ovl_races), shared by the checker that makes it
 * (check/race.c: the clock engine), the report's own code (check/
 * race_report.c: its records, made, finished, freed and read;
 * check/race_format.c: as text and JSON) and the fix hints that it
 * carries (check/fix.c, check/fix_check.c).
 */
#ifndef OVL_CHECK_RACES_H
#define OVL_CHECK_RACES_H

#include "check/findings.h"
#include "core/op.h"

typedef struct race_rec {
  int var;
  char *var_name;
  ovl_race_access a[2]; /* first (earlier in program order), second */
  const ovl__opdef *def[2];
  uint64_t occurrences;
  /* The fix hint (check/fix.c): an edit of the schedule's text, whether
   * it was re-checked and removed the race, and if not, why (NULL when
   * it was). A race always has its text. */
  ovl__fix_slot fix;
  char *note; /* NULL, or why the second access is unordered */
  /* The ranks it is on (bit r), and as a list (res->ranks when it is on
   * every rank; else owned). */
  uint64_t rmask;
  int nranks;
  int *ranks;
  /* The forms it was found in, and the forms checked (OVL_MODE_BIT
   * masks; both 0 until the pipeline marks them: check/forms.c). */
  unsigned forms, forms_checked;
  /* While checking: the class of ranks that last found it (1 + its
   * number), and how many times that class did. */
  uint32_t cls_seen;
  uint64_t cls_occ;
} race_rec;

struct ovl_races_s {
  /* The races (race_rec), at most OVL_RACES_LIST_MAX; its `more`: the
   * unordered pairs not listed. */
  ovl__flist list;
  size_t nops;
  int nranks;
  int *ranks; /* 0..nranks-1 */
  /* Classes of ranks with the same ops (one analysis each): 1 for an
   * SPMD program. */
  int nclasses;
  /* The program's stream names (the result does not refer to it). */
  int nstreams;
  char **stream_names;
};

/* Race i of the report (i < res->list.n). */
static inline race_rec *ovl__races_at(const ovl_races *res, size_t i) {
  return ovl__flist_at(&res->list, i);
}

/* ------------------------------------------------------------------ */
/* The report (check/race_report.c)                                    */
/* ------------------------------------------------------------------ */

/* An empty report of `prog`'s race check: its ranks and stream names. */
ovl_status ovl__races_new(const ovl_program *prog, ovl_races **out,
                          ovl_error *err);

/* The race of `probe` (its key: var, a[], def[]): the record listed for
 * it, or a new one, last, that the checker fills (ovl__flist_add). */
ovl__flist_got ovl__races_find(ovl_races *res, const race_rec *probe,
                               race_rec **rec);

/* The end of the check: the races sorted (line of the first access, of
 * the second, variable, then the rest of the key), each with its ranks
 * as a list (rmask). */
ovl_status ovl__races_finish(ovl_races *res, ovl_error *err);

/* The race check of `prog`, without fix hints (every race's fix NULL):
 * the checker alone (check/race.c). ovl_race_check (check/fix.c) adds
 * the hints. */
ovl_status ovl__race_check(const ovl_program *prog, ovl_races **out,
                           ovl_error *err);

/* Give every race of `res` (the report of `prog`) its fix hint: the first
 * candidate, not re-checked, with `why` (check/fix.c). */
ovl_status ovl__fix_hints(const ovl_program *prog, ovl_races *res,
                          const char *why, ovl_error *err);

#endif /* OVL_CHECK_RACES_H */
