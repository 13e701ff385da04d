/*
 * Parse: a call statement (lang/syntax.h), `[out, ... =] op(pos, ...,
 * key=value, ...)`: its outputs, its op's name (an unknown one with a
 * suggestion: the nearest op name, by edit distance), its positional
 * arguments (names) and keyword arguments (values: syntax_expr.c); then
 * the call recorded in the schedule, as a statement. In a group, only
 * send_v2 and recv_v2.
 */
#include <stdio.h>
#include <string.h>

#include "lang/syntax.h"

/* ------------------------------------------------------------------ */
/* Calls                                                               */
/* ------------------------------------------------------------------ */

/* The argument list, from '(' to ')'. */
static ovl_status parse_args(syntax *X, call *c) {
  char descbuf[64];
  int line = X->tok.line, col = X->tok.col;
  bool kw_seen = false;
  ovl_status st = advance(X);
  if (st != OVL_OK)
    return st;
  if (X->tok.type == T_RPAREN)
    return advance(X);
  for (;;) {
    if (X->tok.type == T_EOF)
      break;
    if (X->tok.type != T_IDENT)
      return perr(X, X->tok.line, X->tok.col,
                  "expected a variable name or key=value, got %s",
                  DESC(&X->tok));
    name nm = tok_name(&X->tok);
    if ((st = advance(X)) != OVL_OK)
      return st;
    if (X->tok.type == T_EQUALS) {
      if (c->nkw == MAX_KW)
        return perr(X, nm.line, nm.col, "too many attributes (max %d)",
                    MAX_KW);
      kwarg *kw = &c->kw[c->nkw++];
      kw->key = nm;
      if ((st = advance(X)) != OVL_OK ||
          (st = ovl__syntax_value(X, &kw->val,
                                  ovl__name_eq(nm.s, nm.n, "ranks"))) != OVL_OK)
        return st;
      kw_seen = true;
    } else {
      if (kw_seen)
        return perr(X, nm.line, nm.col,
                    "positional argument '%.*s' after keyword arguments",
                    (int)nm.n, nm.s);
      if (c->npos < OVL_MAX_OP_INPUTS)
        c->pos[c->npos] = nm;
      c->npos++;
    }
    if (X->tok.type == T_COMMA) {
      if ((st = advance(X)) != OVL_OK)
        return st;
      if (X->tok.type == T_RPAREN) /* a trailing comma */
        return advance(X);
      continue;
    }
    if (X->tok.type == T_RPAREN)
      return advance(X);
    if (X->tok.type == T_EOF)
      break;
    return perr(X, X->tok.line, X->tok.col,
                "expected ',' or ')' in the arguments of %.*s (opened at "
                "%d:%d), got %s",
                (int)c->op.n, c->op.s, line, col, DESC(&X->tok));
  }
  return perr(X, line, col,
              "unterminated argument list: '(' has no matching ')'");
}

/* [out, ... =] op(args) */
static ovl_status parse_call(syntax *X, call *c) {
  char descbuf[64];
  ovl_status st;
  name first = tok_name(&X->tok);
  c->nout = c->npos = c->nkw = 0;
  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type == T_LPAREN) {
    c->op = first;
    return parse_args(X, c);
  }
  if (X->tok.type != T_COMMA && X->tok.type != T_EQUALS)
    return perr(X, X->tok.line, X->tok.col,
                "expected '(' or '=' after '%.*s', got %s", (int)first.n,
                first.s, DESC(&X->tok));
  c->out[c->nout++] = first;
  while (X->tok.type == T_COMMA) {
    if ((st = advance(X)) != OVL_OK)
      return st;
    if (X->tok.type != T_IDENT)
      return perr(X, X->tok.line, X->tok.col,
                  "expected an output name after ',', got %s", DESC(&X->tok));
    if (c->nout < MAX_OUTS)
      c->out[c->nout] = tok_name(&X->tok);
    c->nout++;
    if ((st = advance(X)) != OVL_OK)
      return st;
  }
  if (X->tok.type != T_EQUALS)
    return perr(X, X->tok.line, X->tok.col,
                "expected '=' after the outputs, got %s", DESC(&X->tok));
  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_IDENT)
    return perr(X, X->tok.line, X->tok.col,
                "expected an op name after '=', got %s", DESC(&X->tok));
  c->op = tok_name(&X->tok);
  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_LPAREN)
    return perr(X, X->tok.line, X->tok.col, "expected '(' after '%.*s', got %s",
                (int)c->op.n, c->op.s, DESC(&X->tok));
  return parse_args(X, c);
}

/* ------------------------------------------------------------------ */
/* Op names                                                            */
/* ------------------------------------------------------------------ */

static size_t edit_distance(const char *a, size_t na, const char *b,
                            size_t nb) {
  size_t row[64];
  if (nb >= sizeof row / sizeof row[0])
    return SIZE_MAX;
  for (size_t j = 0; j <= nb; j++)
    row[j] = j;
  for (size_t i = 1; i <= na; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[nb];
}

/* The op names a suggestion may give: every row of the op table, and
 * data (whose row is the table's end). */
static const char *op_name_at(const ovl__opdef *d) {
  return d->name != NULL ? d->name : "data";
}

/* Whether `cand` starts or ends with the n bytes of `s` (n >= 3, shorter
 * than cand): c_allreduce -> c_allreduce_sum, allreduce_sum ->
 * c_allreduce_sum. */
static bool affix_of(const char *s, size_t n, const char *cand) {
  size_t m = strlen(cand);
  return n >= 3 && n < m &&
         (memcmp(cand, s, n) == 0 || memcmp(cand + m - n, s, n) == 0);
}

#define MAX_SUGGEST 6

/* The names close to the op name `op`: those at the least edit distance,
 * at most 2 (and less than its length: 'ab' is close to nothing); else
 * those it is the start or the end of. At most MAX_SUGGEST, in table
 * order; returns how many. */
static size_t close_ops(const name *op, const char *out[MAX_SUGGEST]) {
  size_t n = 0, bestd = 3; /* a close name is at most 2 edits away */
  const ovl__opdef *d = ovl__optable;
  do {
    const char *cand = op_name_at(d);
    size_t dist = edit_distance(op->s, op->n, cand, strlen(cand));
    if (dist < bestd && dist < op->n) {
      bestd = dist;
      n = 0;
    }
    if (dist == bestd && bestd <= 2 && n < MAX_SUGGEST)
      out[n++] = cand;
  } while ((d++)->name != NULL);
  if (n > 0)
    return n;
  d = ovl__optable;
  do {
    if (affix_of(op->s, op->n, op_name_at(d)) && n < MAX_SUGGEST)
      out[n++] = op_name_at(d);
  } while ((d++)->name != NULL);
  return n;
}

/* "unknown op 'relu'", with "(did you mean 'assign'?)" or "(did you mean
 * 'c_allreduce_sum', ... or 'c_allreduce_avg'?)" where close names exist
 * (close_ops): a suggestion that is not close misleads. */
static ovl_status unknown_op(syntax *X, const name *op) {
  const char *best[MAX_SUGGEST];
  char list[MAX_SUGGEST * 40] = "";
  size_t n = close_ops(op, best), off = 0;
  if (n == 0)
    return perr(X, op->line, op->col, "unknown op '%.*s'", (int)op->n,
                op->s);
  for (size_t i = 0; i < n && off < sizeof list; i++)
    off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'",
                            i == 0 ? "" : i + 1 < n ? ", " : " or ",
                            best[i]);
  return perr(X, op->line, op->col, "unknown op '%.*s' (did you mean %s?)",
              (int)op->n, op->s, list);
}

/* ------------------------------------------------------------------ */
/* The call as a record                                                */
/* ------------------------------------------------------------------ */

/* The call just read, as a statement: its op must exist. */
static ovl_status add_call(syntax *X, const call *c) {
  ovl_schedule *S = X->S;
  const ovl__opdef *def = NULL;
  char opbuf[MAX_IDENT + 1];
  scall sc;
  ovl_status st;
  void *p;
  if (!ovl__name_eq(c->op.s, c->op.n, "data")) {
    memcpy(opbuf, c->op.s, c->op.n);
    opbuf[c->op.n] = '\0';
    if ((def = ovl__opdef_find(opbuf)) == NULL)
      return unknown_op(X, &c->op);
  }
  if (in_group(X) && (def == NULL || def->p2p == OVL_P2P_NONE))
    return perr(X, c->op.line, c->op.col,
                "a group holds only send_v2 and recv_v2, got %.*s (group "
                "at %d:%d)",
                (int)c->op.n, c->op.s, X->open[X->depth].line,
                X->open[X->depth].col);
  sc = (scall){.def = def, .op = c->op, .nout = c->nout, .npos = c->npos,
               .nkw = c->nkw, .first_name = (uint32_t)S->nnames,
               .first_kw = (uint32_t)S->nkws};
  for (int i = 0; i < c->nout && i < MAX_OUTS; i++)
    if ((st = ovl__syntax_add_name(X, &c->out[i])) != OVL_OK)
      return st;
  for (int i = 0; i < c->npos && i < OVL_MAX_OP_INPUTS; i++)
    if ((st = ovl__syntax_add_name(X, &c->pos[i])) != OVL_OK)
      return st;
  for (int i = 0; i < c->nkw; i++) {
    const kwarg *kw = &c->kw[i];
    skw k = {.key = kw->key, .v = kw->val.v, .first = (uint32_t)S->nitems,
             .nitems = kw->val.nitems};
    size_t at;
    for (int j = 0; j < kw->val.nitems; j++)
      if ((st = ovl__syntax_add_item(X, &kw->val.items[j], &at)) != OVL_OK)
        return st;
    if ((p = ovl__grow(S->kws, &X->capkws, S->nkws + 1, sizeof *S->kws)) ==
        NULL)
      return nomem(X);
    S->kws = p;
    S->kws[S->nkws++] = k;
  }
  if ((p = ovl__grow(S->calls, &X->capcalls, S->ncalls + 1,
                     sizeof *S->calls)) == NULL)
    return nomem(X);
  S->calls = p;
  S->calls[S->ncalls] = sc;
  return ovl__syntax_add_stmt(X, S_CALL, c->op.line, c->op.col, S->ncalls++);
}

/* A call statement at the current token, read and recorded. */
ovl_status ovl__syntax_call(syntax *X) {
  ovl_status st;
  if ((st = parse_call(X, &X->call)) != OVL_OK)
    return st;
  return add_call(X, &X->call);
}
