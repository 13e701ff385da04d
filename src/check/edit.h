/*
 * Edits of a schedule's text (check/edit.c), the fix hints' common form:
 * the race hints (check/fix.c) insert statements; the hints of mismatches
 * and deadlocks (check/order_fix.c) also delete a line, move lines, put
 * lines in a group or drop a ranks= attribute; the fixed schedule
 * (check/fix_apply.c) applies them. Every line an edit names is a line of
 * the text as it is (before any part of the edit). An edit reads as one
 * line of text, its parts joined by "; ":
 *
 *   insert S before line N              insert S and T before line N
 *   delete line N
 *   move line N before line M           move lines N-K before line M
 *   put lines N-K in one group
 *   remove ATTR from line N             (ATTR: "ranks=[0:nranks - 1]")
 *
 * and is parsed back from that text (ovl__edit_parse).
 */
#ifndef OVL_CHECK_EDIT_H
#define OVL_CHECK_EDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/op.h"

#define EDIT_MAX_PARTS 4
#define EDIT_TEXT_MAX 2200

typedef enum { ED_INSERT, ED_DELETE, ED_MOVE, ED_GROUP, ED_DROP } ed_kind;

typedef struct ed_part {
  ed_kind kind;
  /* INSERT: before `line`; DELETE, DROP: `line`; MOVE, GROUP: lines
   * line .. last. */
  int line, last;
  int to; /* MOVE: before line `to` */
  /* INSERT: the statements, one a line ('\n' between); DROP: the
   * attribute as written. */
  char text[EDIT_TEXT_MAX];
} ed_part;

typedef struct ovl__edit {
  int n;
  ed_part part[EDIT_MAX_PARTS];
} ovl__edit;

/* The lines of a text: line l (1-based) starts at at[l - 1]; n lines (a
 * last line without its newline counts). */
typedef struct ovl__lines {
  const char *text;
  size_t len;
  size_t *at;
  int n;
} ovl__lines;

bool ovl__lines_make(ovl__lines *L, const char *text, size_t len);
void ovl__lines_free(ovl__lines *L);
/* Line l without its newline (*n bytes); "" out of range. */
const char *ovl__line(const ovl__lines *L, int l, size_t *n);
/* What line l holds: nothing (blank or a comment), a statement, or a
 * brace (a block's `repeat ... {`, `group {` or `}`). */
enum { LINE_NONE, LINE_STMT, LINE_BRACE };
int ovl__line_kind(const ovl__lines *L, int l);

/* A text with an edit applied, and where its lines come from: line l of
 * it is line orig[l] of the original (0: a new line), moved right by
 * shift[l] columns (the lines of a new group are indented). */
typedef struct ovl__edited {
  char *text;
  size_t len;
  int nlines;
  int *orig, *shift; /* [nlines + 1] */
} ovl__edited;

/* Apply `e` to the text of L into *out. 0; 1 when it does not apply (a
 * line out of range, an attribute not on its line): *out empty; -1 out of
 * memory. Every line of the result ends with a newline. */
int ovl__edit_apply(const ovl__lines *L, const ovl__edit *e,
                    ovl__edited *out);
void ovl__edited_free(ovl__edited *x);

/* The text of an edit (allocated; NULL when out of memory). */
char *ovl__edit_text(const ovl__edit *e);
/* An edit from its text; false when it is not one. */
bool ovl__edit_parse(const char *hint, ovl__edit *e);

#endif /* OVL_CHECK_EDIT_H */
