/*
 * What the reports of the checks share (check/race.c, check/mismatch.c,
 * check/deadlock.c): the list their findings are gathered in, the
 * formatting entry point (ovl_X_format) and the closing lines of the
 * mismatch and deadlock reports in text.
 */
#ifndef OVL_CHECK_FINDINGS_H
#define OVL_CHECK_FINDINGS_H

#include "core/op.h"

/* ------------------------------------------------------------------ */
/* The list of findings                                                */
/* ------------------------------------------------------------------ */

/* Whether record `rec` is the finding that `key` describes: the checker's
 * key, its own to define (a probe record, or the key words it keeps). */
typedef bool (*ovl__flist_eq)(const void *rec, const void *key);

/* A checker's findings: records of its own type (`size` bytes each), in
 * the order they were first found, no two alike by its key. A finding
 * found again is the record listed for it, for the checker to count; one
 * more finding once `max` are listed is only counted, in `more`. */
typedef struct ovl__flist {
  void *recs; /* n records, room for cap */
  size_t n, cap, size;
  size_t max;
  uint64_t more; /* findings not listed (beyond max) */
  ovl__flist_eq eq;
  /* While finding (until ovl__flist_end): each record's hash, and a table
   * over them (open addressing, record index + 1, at most half full). */
  uint64_t *hash;
  uint32_t *table;
  size_t tcap;
} ovl__flist;

/* What ovl__flist_add found. */
typedef enum ovl__flist_got {
  OVL__FLIST_NOMEM = -1, /* out of memory: *rec NULL, the list unchanged */
  OVL__FLIST_MORE,       /* not listed, the list is full: counted in more */
  OVL__FLIST_FOUND,      /* *rec: the record listed for the finding */
  OVL__FLIST_NEW         /* *rec: a new record, zeroed, last in the list */
} ovl__flist_got;

/* An empty list of records of `size` bytes, listing at most `max`, alike
 * by `eq`. */
void ovl__flist_init(ovl__flist *l, size_t size, size_t max,
                     ovl__flist_eq eq);

/* The finding `key`, whose hash is `hash` (the same for keys alike): the
 * record listed for it, or a new one, or none (the list is full). A new
 * record is the caller's to fill before the next add; *rec stays valid
 * until then. */
ovl__flist_got ovl__flist_add(ovl__flist *l, uint64_t hash, const void *key,
                              void **rec);

/* Record i (i < n). */
static inline void *ovl__flist_at(const ovl__flist *l, size_t i) {
  return (char *)l->recs + i * l->size;
}

/* The end of the finding: the table goes (no add after it), and the
 * records are sorted by `cmp` (qsort's; NULL: left in the order found). */
void ovl__flist_end(ovl__flist *l, int (*cmp)(const void *, const void *));

/* Free the list: `free_rec(rec, ctx)` first for every record (what it
 * owns; NULL: nothing). */
void ovl__flist_free(ovl__flist *l, void (*free_rec)(void *rec, void *ctx),
                     void *ctx);

/* ------------------------------------------------------------------ */
/* Formatting                                                          */
/* ------------------------------------------------------------------ */

/* Writes report `res` into `b`, in JSON or as text; `file` is the
 * program's name ("<program>" when it has none). */
typedef void (*ovl__findings_fmt)(ovl__sbuf *b, const void *res,
                                  const ovl_program *prog, const char *file);

/* The body of ovl_X_format: `fmt` (the JSON or the text formatter) on
 * `res`, the result in *text. A NULL `res` or `text` is "FN: bad
 * argument"; no memory, "WHAT: out of memory". */
ovl_status ovl__findings_format(const void *res, const ovl_program *prog,
                                ovl__findings_fmt fmt, const char *fn,
                                const char *what, char **text,
                                ovl_error *err);

/* The closing lines of a text report listing `n` findings, with `more`
 * not listed: "and M more UNLISTEDs not listed (the list stops at ...)",
 * then "no MANY in FILE (R ranks EXTRA)" when there are none, else
 * "N ONE|MANY in FILE (R ranks)". `extra` follows the ranks in the first
 * form only ("" for nothing). */
void ovl__findings_close(ovl__sbuf *b, size_t n, uint64_t more,
                         const char *unlisted, const char *one,
                         const char *many, const char *file, int nranks,
                         const char *extra);

/* ------------------------------------------------------------------ */
/* Forms                                                               */
/* ------------------------------------------------------------------ */

/* The line under a finding found in more than one form: "  found in the
 * sync and async forms" (nothing for a finding of one form: its section
 * says which). */
void ovl__findings_forms_line(ovl__sbuf *b, unsigned forms, unsigned checked);

/* JSON: ["sync", "async"] of a mask, or null for 0 (not known). */
void ovl__findings_forms_json(ovl__sbuf *b, unsigned forms);

/* A finding's fix (a race's, a mismatch's, a deadlock's): its text (NULL: none known),
 * whether it was re-checked, and why not (or why none is known); all
 * NULL/false until a hint is made. The finding owns the strings. */
typedef struct ovl__fix_slot {
  char *text;
  bool checked;
  char *why;
} ovl__fix_slot;

/* Set the slot: `text` (taken) and a copy of `why`; false where that
 * copy could not be made. */
bool ovl__fix_slot_set(ovl__fix_slot *s, char *text, bool checked,
                       const char *why);
/* The slot as the API gives it (ovl_mismatches_fix, ovl_deadlocks_fix). */
void ovl__fix_slot_info(const ovl__fix_slot *s, ovl_fix_info *out);
void ovl__fix_slot_free(ovl__fix_slot *s);

/* The fix line of a finding: "  fix (checked): FIX",
 * "  fix (unchecked): FIX (WHY)", or with no fix "  fix: WHY" (none
 * known); nothing when neither is set (no hint was made). JSON:
 * ,"fix":...,"fix_checked":...,"fix_why":... A race always has a FIX. */
void ovl__findings_fix_line(ovl__sbuf *b, const char *fix, bool checked,
                            const char *why);
void ovl__findings_fix_json(ovl__sbuf *b, const char *fix, bool checked,
                            const char *why);

#endif /* OVL_CHECK_FINDINGS_H */
