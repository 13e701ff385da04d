/*
 * The fix hints' parts, private to them: check/fix.c makes the candidates
 * of a race (and gives each race its first, ovl__fix_hints);
 * check/fix_check.c re-checks them against the schedule
 * (ovl_races_check_fixes), calling fix.c, never the other way.
 */
#ifndef OVL_CHECK_FIX_H
#define OVL_CHECK_FIX_H

#include "check/races.h"

/* Statements of an edit, candidates of a race, and their text. */
#define FIX_MAX_STMTS 2
#define FIX_MAX_CANDS 8
#define FIX_STMT_MAX 1024

/* The statements of a candidate, and a candidate: them at a line. */
typedef struct stmts {
  int n;
  char s[FIX_MAX_STMTS][FIX_STMT_MAX];
} stmts;

typedef struct edit {
  int line; /* insert before this line */
  const stmts *ops;
} edit;

/* The names a program uses (sorted), for a fresh event name. */
typedef struct names {
  const char **s;
  size_t n;
} names;

/* The blocks of a program, each with its children (kids[first[k] ..
 * first[k + 1]), in order; the program itself is block nblocks). */
typedef struct blocks {
  const ovl__block *b;
  size_t nb;
  uint32_t *first, *kids;
} blocks;

/* The context of the hints of one report: the program (a form), the ops
 * its form has, its blocks and names, and the schedule's text when there
 * is one (to find a group's line). */
typedef struct hinter {
  const ovl_program *prog;
  unsigned kept; /* kept_ops */
  blocks bx;
  names nm;
  const char *text;
  size_t len;
  size_t *line_at; /* offset of line l + 1 (0-based l), nlines of them */
  size_t nlines;
} hinter;

/* The candidates of a race: each of its ops (in order) at its first line,
 * then each at its second line (when it has one): n of them. */
typedef struct cands {
  stmts ops[FIX_MAX_CANDS / 2];
  int nops;
  int lines[2];
  int nlines;
  int n;
} cands;

/* The context of the hints of `prog` (a form); `text` (NULL: none) is
 * the schedule's, of `len` bytes. False when out of memory (free it
 * still). */
bool ovl__fix_hinter_make(hinter *h, const ovl_program *prog,
                          const char *text, size_t len);
void ovl__fix_hinter_free(hinter *h);

/* The candidates of race r of h->prog (whose form has the ops of
 * h->kept), in order of preference; at most `want` ops. None for two ops
 * of one group (nothing goes between them). */
void ovl__fix_candidates(const hinter *h, const race_rec *r, int want,
                         cands *c);

/* Candidate k of c (k < c->n; else an edit of no statements). */
edit ovl__fix_cand(const cands *c, int k);

/* "insert S before line N", "insert S and T before line N" (allocated;
 * NULL when out of memory). */
char *ovl__fix_edit_text(const edit *e);

/* What a race with no candidate gets (allocated; NULL when out of
 * memory). */
char *ovl__fix_no_candidate(const hinter *h, const race_rec *r);

/* Set race r's fix: `text` (taken), checked or not and why. False when
 * out of memory. */
bool ovl__fix_set(race_rec *r, char *text, bool checked, const char *why);

/* Whether ops i and j of `prog` are in one group instance. */
bool ovl__fix_same_group(const ovl_program *prog, size_t i, size_t j);

#endif /* OVL_CHECK_FIX_H */
