/*
 * The parser's own header (src/lang/syntax*.c; lang/lang.h says what
 * parsing is): its state, its token helpers, and what its files call of
 * each other. The files, each calling only those after it:
 *   syntax.c          the file, its statements (param, repeat, group,
 *                     '}'), and the schedule as parsed
 *   syntax_call.c     a call statement: outputs, op name (a misspelt one
 *                     with a suggestion), arguments; recorded
 *   syntax_expr.c     values: scalars, lists and integer expressions
 *   syntax_records.c  the schedule's records: statements, items, names
 * Internal to src/lang/.
 */
#ifndef OVL_LANG_SYNTAX_H
#define OVL_LANG_SYNTAX_H

#include "lang/lang.h"

typedef struct syntax {
  const char *filename;
  ovl_error *err;
  ovl_schedule *S;
  lexer lx;
  token tok; /* the current token */
  size_t capstmts, capcalls, capnames, capkws, capitems, capparams;
  size_t capexprs, capenodes;
  /* Open blocks: where each `repeat` or `group` is. A group is always the
   * innermost (it holds no block). */
  int depth;
  struct {
    int line, col;
    bool group;
  } open[MAX_DEPTH + 1];
  call call; /* the call statement being read */
  /* The end of the last token read (the text of an expression). */
  const char *prev_end;
  /* Parentheses and unary minus open in the expression being read. */
  int edepth;
} syntax;

static inline ovl_status advance(syntax *X) {
  if (X->tok.s != NULL) /* NULL before the first token */
    X->prev_end = X->tok.s + X->tok.n;
  if (!ovl__lex_next(&X->lx, &X->tok))
    return perr(X, X->lx.err_line, X->lx.err_col, "%s", X->lx.err_msg);
  return OVL_OK;
}

static inline bool in_group(const syntax *X) {
  return X->depth > 0 && X->open[X->depth].group;
}

#define DESC(t) ovl__tok_desc((t), descbuf, sizeof descbuf)

static inline name tok_name(const token *t) {
  name nm = {t->s, t->n, t->line, t->col};
  return nm;
}

/* ------------------------------------------------------------------ */
/* Between the files                                                   */
/* ------------------------------------------------------------------ */

/* syntax_call.c: a call statement at the current token (an identifier),
 * read into X->call and recorded: its op must exist. */
ovl_status ovl__syntax_call(syntax *X);

/* syntax_expr.c: a value at the current token: a scalar, or an integer
 * expression (V_EXPR); with `range` (an entry of ranks=[...]), also A:B
 * (V_RANGE). A keyword argument's value (a list too); `ranks`: it is
 * ranks=[...] (ranges). */
ovl_status ovl__syntax_expr(syntax *X, scalar *v, bool range);
ovl_status ovl__syntax_value(syntax *X, value *val, bool ranks);

/* syntax_records.c: a statement, a scalar (*at: its index in the
 * schedule's items) and a name appended to the schedule. */
ovl_status ovl__syntax_add_stmt(syntax *X, stmt_kind kind, int line,
                                int col, size_t index);
ovl_status ovl__syntax_add_item(syntax *X, const scalar *v, size_t *at);
ovl_status ovl__syntax_add_name(syntax *X, const name *nm);

#endif /* OVL_LANG_SYNTAX_H */
