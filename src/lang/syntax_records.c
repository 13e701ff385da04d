/*
 * Parse: the schedule's records (lang/syntax.h): what the statements
 * read append to the schedule's arrays, each grown as it fills.
 */
#include "lang/syntax.h"

ovl_status ovl__syntax_add_stmt(syntax *X, stmt_kind kind, int line, int col,
                                size_t index) {
  ovl_schedule *S = X->S;
  void *p = ovl__grow(S->stmts, &X->capstmts, S->nstmts + 1, sizeof *S->stmts);
  if (p == NULL)
    return nomem(X);
  S->stmts = p;
  S->stmts[S->nstmts++] = (stmt){kind, line, col, (uint32_t)index};
  return OVL_OK;
}

/* A scalar appended to the schedule's items; *at is its index. */
ovl_status ovl__syntax_add_item(syntax *X, const scalar *v, size_t *at) {
  ovl_schedule *S = X->S;
  void *p = ovl__grow(S->items, &X->capitems, S->nitems + 1, sizeof *S->items);
  if (p == NULL)
    return nomem(X);
  S->items = p;
  *at = S->nitems;
  S->items[S->nitems++] = *v;
  return OVL_OK;
}

ovl_status ovl__syntax_add_name(syntax *X, const name *nm) {
  ovl_schedule *S = X->S;
  void *p = ovl__grow(S->names, &X->capnames, S->nnames + 1, sizeof *S->names);
  if (p == NULL)
    return nomem(X);
  S->names = p;
  S->names[S->nnames++] = *nm;
  return OVL_OK;
}
