/*
 * Parse: tokens -> the statements of a schedule (lang/lang.h; docs/
 * ARCHITECTURE.md, "The pipeline"; README, "Schedules").
 *
 * One statement a line: `param NAME = VALUE [, cpu = VALUE]`, `repeat
 * COUNT {`, `group {`, `}`, or a call `[out, ... =] op(pos, ...,
 * key=value, ...)`. Each is read into a record of the schedule, in source
 * order, with its names and values as written: a name used as a value
 * stays a name (binding replaces the names of params by their values), so
 * nothing here depends on a rank count, a backend or a -D.
 *
 * Values (attribute values, list items, repeat counts, param values) may
 * be integer expressions: + - * / %, unary minus and parentheses over
 * ints, names (params), `rank` and `nranks`; an entry of ranks=[...] may be
 * a range A:B. One is kept as its nodes in postfix order (the schedule's
 * exprs and enodes), evaluated by binding (expr.c). A lone literal or name
 * stays a plain value.
 *
 * Checked here: the form of every statement and expression, the nesting
 * of blocks (balanced, at most MAX_DEPTH deep; a group holds only send_v2
 * and recv_v2, so no block), op names (with a suggestion for a misspelt
 * one), literal repeat counts, and param declarations (once each, at top
 * level, not a reserved word). The first error stops parsing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static ovl_status advance(syntax *X) {
  if (X->tok.s != NULL) /* NULL before the first token */
    X->prev_end = X->tok.s + X->tok.n;
  if (!ovl__lex_next(&X->lx, &X->tok))
    return perr(X, X->lx.err_line, X->lx.err_col, "%s", X->lx.err_msg);
  return OVL_OK;
}

static bool in_group(const syntax *X) {
  return X->depth > 0 && X->open[X->depth].group;
}

#define DESC(t) ovl__tok_desc((t), descbuf, sizeof descbuf)

static name tok_name(const token *t) {
  name nm = {t->s, t->n, t->line, t->col};
  return nm;
}

/* ------------------------------------------------------------------ */
/* Values and calls                                                    */
/* ------------------------------------------------------------------ */

/* A scalar value at the current token; a name stays a name. */
static ovl_status parse_scalar(syntax *X, scalar *v) {
  char descbuf[64];
  const token *t = &X->tok;
  memset(v, 0, sizeof *v);
  v->line = t->line;
  v->col = t->col;
  switch (t->type) {
  case T_INT:
    v->kind = V_INT;
    v->i = t->i;
    break;
  case T_FLOAT:
    v->kind = V_FLOAT;
    v->f = t->f;
    break;
  case T_IDENT:
    if (ovl__tok_is(t, T_IDENT, "true") || ovl__tok_is(t, T_IDENT, "false")) {
      v->kind = V_BOOL;
      v->b = ovl__tok_is(t, T_IDENT, "true");
    } else {
      v->kind = V_NAME;
      v->s = t->s;
      v->n = (uint32_t)t->n; /* at most MAX_IDENT */
    }
    break;
  case T_LBRACK:
    return perr(X, t->line, t->col, "nested lists are not supported");
  default:
    return perr(X, t->line, t->col, "expected a value, got %s", DESC(t));
  }
  return advance(X);
}

/* ------------------------------------------------------------------ */
/* Integer expressions                                                 */
/* ------------------------------------------------------------------ */

/* An expression being read: its nodes are appended to S->enodes. */
typedef struct ebuild {
  size_t first;
  int sp, max; /* the evaluation stack after the nodes so far; deepest */
  bool names_rank, names_nranks;
  int rank_line, rank_col;
} ebuild;

static ovl_status add_node(syntax *X, ebuild *eb, const scalar *node) {
  ovl_schedule *S = X->S;
  void *p = ovl__grow(S->enodes, &X->capenodes, S->nenodes + 1,
                      sizeof *S->enodes);
  if (p == NULL)
    return nomem(X);
  S->enodes = p;
  S->enodes[S->nenodes++] = *node;
  if (node->kind != V_OP)
    eb->sp++;
  else if (node->i != OP_NEG)
    eb->sp--;
  if (eb->sp > eb->max)
    eb->max = eb->sp;
  return OVL_OK;
}

static scalar op_node(const token *t, int op) {
  scalar v = {.kind = V_OP, .line = t->line, .col = t->col};
  v.i = op;
  return v;
}

static ovl_status parse_sum(syntax *X, ebuild *eb);

/* One more '(' or unary minus open. */
static ovl_status nest(syntax *X, const token *t) {
  if (++X->edepth > MAX_EXPR_DEPTH)
    return perr(X, t->line, t->col, "expression nested deeper than %d",
                MAX_EXPR_DEPTH);
  return OVL_OK;
}

/* -unary | (sum) | a value */
static ovl_status parse_unary(syntax *X, ebuild *eb) {
  char descbuf[64];
  token t = X->tok;
  scalar v;
  ovl_status st;
  if (t.type == T_MINUS || t.type == T_LPAREN) {
    if ((st = nest(X, &t)) != OVL_OK || (st = advance(X)) != OVL_OK)
      return st;
    if (t.type == T_MINUS) {
      scalar neg = op_node(&t, OP_NEG);
      if ((st = parse_unary(X, eb)) != OVL_OK ||
          (st = add_node(X, eb, &neg)) != OVL_OK)
        return st;
    } else {
      if ((st = parse_sum(X, eb)) != OVL_OK)
        return st;
      if (X->tok.type != T_RPAREN)
        return perr(X, X->tok.line, X->tok.col,
                    "expected ')' to close the '(' at %d:%d, got %s", t.line,
                    t.col, DESC(&X->tok));
      if ((st = advance(X)) != OVL_OK)
        return st;
    }
    X->edepth--;
    return OVL_OK;
  }
  /* A list inside an expression ('[' first in a list item is a nested
   * list: parse_scalar says so). */
  if (t.type == T_LBRACK && (X->edepth > 0 || X->S->nenodes > eb->first))
    return perr(X, t.line, t.col, "expected a value, got %s", DESC(&t));
  if ((st = parse_scalar(X, &v)) != OVL_OK)
    return st;
  if (v.kind == V_NAME && ovl__name_eq(v.s, v.n, "rank") &&
      !eb->names_rank) {
    eb->names_rank = true;
    eb->rank_line = v.line;
    eb->rank_col = v.col;
  }
  if (v.kind == V_NAME && ovl__name_eq(v.s, v.n, "nranks"))
    eb->names_nranks = true;
  return add_node(X, eb, &v);
}

/* unary (* / % unary)*; `first`, when not NULL, is the first operand,
 * read already. */
static ovl_status parse_term(syntax *X, ebuild *eb, const scalar *first) {
  ovl_status st = first != NULL ? add_node(X, eb, first) : parse_unary(X, eb);
  while (st == OVL_OK && (X->tok.type == T_STAR || X->tok.type == T_SLASH ||
                          X->tok.type == T_PERCENT)) {
    scalar op = op_node(&X->tok, *X->tok.s);
    if ((st = advance(X)) == OVL_OK && (st = parse_unary(X, eb)) == OVL_OK)
      st = add_node(X, eb, &op);
  }
  return st;
}

/* term (+ - term)*. The lexer reads `x -1` as x and the number -1: that
 * is x - 1 here. */
static ovl_status parse_sum(syntax *X, ebuild *eb) {
  ovl_status st = parse_term(X, eb, NULL);
  while (st == OVL_OK) {
    const token t = X->tok;
    if (t.type == T_PLUS || t.type == T_MINUS) {
      scalar op = op_node(&t, *t.s);
      if ((st = advance(X)) == OVL_OK && (st = parse_term(X, eb, NULL)) ==
                                             OVL_OK)
        st = add_node(X, eb, &op);
    } else if ((t.type == T_INT || t.type == T_FLOAT) && *t.s == '-') {
      scalar op = op_node(&t, '-');
      scalar rhs = {.kind = t.type == T_INT ? V_INT : V_FLOAT,
                    .line = t.line, .col = t.col + 1};
      if (t.type == T_FLOAT)
        rhs.f = -t.f;
      else if (t.i == INT64_MIN)
        return perr(X, t.line, t.col + 1, "integer %.*s%s out of range (int64)",
                    quote_len(t.n - 1), t.s + 1, quote_more(t.n - 1));
      else
        rhs.i = -t.i;
      if ((st = advance(X)) == OVL_OK &&
          (st = parse_term(X, eb, &rhs)) == OVL_OK)
        st = add_node(X, eb, &op);
    } else {
      break;
    }
  }
  return st;
}

/* A value at the current token: a scalar, or an integer expression
 * (V_EXPR); with `range` (an entry of ranks=[...]), also A:B (V_RANGE). */
static ovl_status parse_expr(syntax *X, scalar *v, bool range) {
  ovl_schedule *S = X->S;
  const token start = X->tok;
  ebuild eb = {.first = S->nenodes};
  bool is_range = false;
  size_t n;
  ovl_status st;
  X->edepth = 0;
  if ((st = parse_sum(X, &eb)) != OVL_OK)
    return st;
  if (X->tok.type == T_COLON) {
    scalar op = op_node(&X->tok, OP_RANGE);
    if (!range)
      return perr(X, X->tok.line, X->tok.col,
                  "a range (A:B) is allowed only in ranks=[...]");
    if ((st = advance(X)) != OVL_OK || (st = parse_sum(X, &eb)) != OVL_OK ||
        (st = add_node(X, &eb, &op)) != OVL_OK)
      return st;
    is_range = true;
  }
  n = S->nenodes - eb.first;
  if (n == 1 && !eb.names_rank && !eb.names_nranks) {
    /* A lone value: kept as itself. */
    *v = S->enodes[eb.first];
    S->nenodes = eb.first;
    return OVL_OK;
  }
  for (size_t k = eb.first; k < S->nenodes; k++) {
    char buf[64];
    const scalar *node = &S->enodes[k];
    if (node->kind == V_FLOAT || node->kind == V_BOOL)
      return perr(X, node->line, node->col,
                  "an expression takes ints, params, rank and nranks, got %s",
                  ovl__scalar_text(node, buf, sizeof buf));
  }
  if (eb.max > MAX_EXPR_STACK)
    return perr(X, start.line, start.col, "expression nested too deeply");
  void *p = ovl__grow(S->exprs, &X->capexprs, S->nexprs + 1,
                      sizeof *S->exprs);
  if (p == NULL)
    return nomem(X);
  S->exprs = p;
  if ((size_t)(X->prev_end - start.s) > UINT32_MAX || n > UINT32_MAX ||
      eb.first > UINT32_MAX)
    return perr(X, start.line, start.col, "expression too long");
  S->exprs[S->nexprs] = (sexpr){.text = start.s,
                                .len = (uint32_t)(X->prev_end - start.s),
                                .first = (uint32_t)eb.first,
                                .n = (uint32_t)n,
                                .rank_line = eb.rank_line,
                                .rank_col = eb.rank_col};
  memset(v, 0, sizeof *v);
  v->kind = is_range ? V_RANGE : V_EXPR;
  v->line = start.line;
  v->col = start.col;
  v->i = (int64_t)S->nexprs++;
  return OVL_OK;
}

/* [v, v, ...]; entries may be ranges with `range`. */
static ovl_status parse_list(syntax *X, value *val, bool range) {
  char descbuf[64];
  int line = X->tok.line, col = X->tok.col;
  ovl_status st = advance(X);
  if (st != OVL_OK)
    return st;
  val->v.kind = V_LIST;
  val->v.line = line;
  val->v.col = col;
  val->nitems = 0;
  if (X->tok.type == T_RBRACK)
    return advance(X);
  for (;;) {
    if (X->tok.type == T_EOF)
      break;
    if (val->nitems == MAX_LIST)
      return perr(X, X->tok.line, X->tok.col,
                  "list has more than %d elements", MAX_LIST);
    if ((st = parse_expr(X, &val->items[val->nitems++], range)) != OVL_OK)
      return st;
    if (X->tok.type == T_COMMA) {
      if ((st = advance(X)) != OVL_OK)
        return st;
      if (X->tok.type == T_RBRACK) /* a trailing comma */
        return advance(X);
      continue;
    }
    if (X->tok.type == T_RBRACK)
      return advance(X);
    if (X->tok.type == T_EOF)
      break;
    return perr(X, X->tok.line, X->tok.col,
                "expected ',' or ']' in the list opened at %d:%d, got %s",
                line, col, DESC(&X->tok));
  }
  return perr(X, line, col, "unterminated list: '[' has no matching ']'");
}

/* A keyword argument's value; `ranks`: it is ranks=[...] (ranges). */
static ovl_status parse_value(syntax *X, value *val, bool ranks) {
  memset(&val->v, 0, sizeof val->v);
  val->nitems = 0;
  if (X->tok.type == T_LBRACK)
    return parse_list(X, val, ranks);
  return parse_expr(X, &val->v, false);
}

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
          (st = parse_value(X, &kw->val,
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

static ovl_status unknown_op(syntax *X, const name *op) {
  const char *best = NULL;
  size_t bestd = 4; /* suggest within edit distance 3 */
  for (const ovl__opdef *d = ovl__optable;; d++) {
    const char *cand = d->name != NULL ? d->name : "data";
    size_t dist = edit_distance(op->s, op->n, cand, strlen(cand));
    if (dist < bestd && dist < op->n) {
      bestd = dist;
      best = cand;
    }
    if (d->name == NULL)
      break;
  }
  if (best != NULL)
    return perr(X, op->line, op->col,
                "unknown op '%.*s' (did you mean '%s'?)", (int)op->n, op->s,
                best);
  return perr(X, op->line, op->col, "unknown op '%.*s'", (int)op->n, op->s);
}

/* ------------------------------------------------------------------ */
/* The schedule's records                                              */
/* ------------------------------------------------------------------ */

static ovl_status add_stmt(syntax *X, stmt_kind kind, int line, int col,
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
static ovl_status add_item(syntax *X, const scalar *v, size_t *at) {
  ovl_schedule *S = X->S;
  void *p = ovl__grow(S->items, &X->capitems, S->nitems + 1, sizeof *S->items);
  if (p == NULL)
    return nomem(X);
  S->items = p;
  *at = S->nitems;
  S->items[S->nitems++] = *v;
  return OVL_OK;
}

static ovl_status add_name(syntax *X, const name *nm) {
  ovl_schedule *S = X->S;
  void *p = ovl__grow(S->names, &X->capnames, S->nnames + 1, sizeof *S->names);
  if (p == NULL)
    return nomem(X);
  S->names = p;
  S->names[S->nnames++] = *nm;
  return OVL_OK;
}

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
    if ((st = add_name(X, &c->out[i])) != OVL_OK)
      return st;
  for (int i = 0; i < c->npos && i < OVL_MAX_OP_INPUTS; i++)
    if ((st = add_name(X, &c->pos[i])) != OVL_OK)
      return st;
  for (int i = 0; i < c->nkw; i++) {
    const kwarg *kw = &c->kw[i];
    skw k = {.key = kw->key, .v = kw->val.v, .first = (uint32_t)S->nitems,
             .nitems = kw->val.nitems};
    size_t at;
    for (int j = 0; j < kw->val.nitems; j++)
      if ((st = add_item(X, &kw->val.items[j], &at)) != OVL_OK)
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
  return add_stmt(X, S_CALL, c->op.line, c->op.col, S->ncalls++);
}

/* ------------------------------------------------------------------ */
/* Statements: param, repeat, '}'                                      */
/* ------------------------------------------------------------------ */

/* After '=' or 'cpu =': one value (not a list; an integer expression
 * over ints, earlier params and nranks); its text. */
static ovl_status param_value(syntax *X, scalar *v, char **text) {
  const char *start;
  size_t n;
  ovl_status st;
  if (X->tok.type == T_LBRACK)
    return perr(X, X->tok.line, X->tok.col,
                "a param value is a number, bool or name, not a list");
  start = X->tok.s;
  if ((st = parse_expr(X, v, false)) != OVL_OK)
    return st;
  n = (size_t)(X->prev_end - start);
  if ((*text = malloc(n + 1)) == NULL)
    return nomem(X);
  ovl__one_line(start, n, *text, n + 1);
  return OVL_OK;
}

/* param NAME = VALUE [, cpu = VALUE] */
static ovl_status parse_param(syntax *X) {
  char descbuf[64];
  ovl_schedule *S = X->S;
  int line = X->tok.line, col = X->tok.col;
  const int64_t *old;
  ovl_status st;
  sparam *sp;
  void *p;

  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_IDENT)
    return perr(X, X->tok.line, X->tok.col,
                "expected a param name after 'param', got %s", DESC(&X->tok));
  name nm = tok_name(&X->tok);
  if (X->depth > 0)
    return perr(X, line, col,
                "param inside %s: declare params at top level",
                in_group(X) ? "group" : "repeat");
  if (ovl__is_reserved(nm.s, nm.n))
    return perr(X, nm.line, nm.col,
                "'%.*s' is reserved and cannot name a param", (int)nm.n,
                nm.s);
  if ((old = ovl__map_find(&S->pnames.index, nm.s, nm.n)) != NULL)
    return perr(X, nm.line, nm.col,
                "param '%.*s' re-declared (first declared at %d:%d)",
                (int)nm.n, nm.s, S->pnames.names[*old].line,
                S->pnames.names[*old].col);
  /* The record first, so that what it holds is freed with S on error. */
  if ((p = ovl__grow(S->params, &X->capparams, S->pnames.n + 1,
                     sizeof *S->params)) == NULL)
    return nomem(X);
  S->params = p;
  sp = &S->params[S->pnames.n];
  memset(sp, 0, sizeof *sp);
  if ((sp->name = ovl__strndup(nm.s, nm.n)) == NULL ||
      !ovl__names_add(&S->pnames, &nm)) {
    free(sp->name);
    return nomem(X);
  }
  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_EQUALS)
    return perr(X, X->tok.line, X->tok.col,
                "expected '=' after param '%.*s', got %s", (int)nm.n, nm.s,
                DESC(&X->tok));
  if ((st = advance(X)) != OVL_OK ||
      (st = param_value(X, &sp->dflt, &sp->plain)) != OVL_OK)
    return st;
  if (X->tok.type == T_COMMA) {
    if ((st = advance(X)) != OVL_OK)
      return st;
    if (!ovl__tok_is(&X->tok, T_IDENT, "cpu"))
      return perr(X, X->tok.line, X->tok.col,
                  "expected 'cpu = VALUE' after ',', got %s", DESC(&X->tok));
    if ((st = advance(X)) != OVL_OK)
      return st;
    if (X->tok.type != T_EQUALS)
      return perr(X, X->tok.line, X->tok.col, "expected '=' after cpu, got %s",
                  DESC(&X->tok));
    if ((st = advance(X)) != OVL_OK ||
        (st = param_value(X, &sp->cpu, &sp->cpu_plain)) != OVL_OK)
      return st;
  }
  return add_stmt(X, S_PARAM, line, col, S->pnames.n - 1);
}

/* A block opens at line:col. */
static ovl_status open_block(syntax *X, stmt_kind kind, int line, int col,
                             size_t index) {
  ovl_status st = add_stmt(X, kind, line, col, index);
  if (st != OVL_OK)
    return st;
  X->depth++;
  X->open[X->depth].line = line;
  X->open[X->depth].col = col;
  X->open[X->depth].group = kind == S_GROUP;
  return advance(X);
}

/* repeat COUNT { */
static ovl_status parse_repeat(syntax *X) {
  char descbuf[64];
  int line = X->tok.line, col = X->tok.col;
  scalar count;
  size_t at;
  ovl_status st;

  if (in_group(X))
    return perr(X, line, col,
                "repeat inside group: a group holds only send_v2 and recv_v2 "
                "(group at %d:%d)",
                X->open[X->depth].line, X->open[X->depth].col);
  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_INT && X->tok.type != T_FLOAT &&
      X->tok.type != T_IDENT && X->tok.type != T_LPAREN &&
      X->tok.type != T_MINUS)
    return perr(X, X->tok.line, X->tok.col,
                "expected a repeat count after 'repeat', got %s",
                DESC(&X->tok));
  if ((st = parse_expr(X, &count, false)) != OVL_OK)
    return st;
  /* A name or an expression is checked when it is bound (a param's value
   * or nranks). */
  if (count.kind != V_NAME && count.kind != V_EXPR &&
      (st = ovl__check_count(X->err, X->filename, &count, NULL)) != OVL_OK)
    return st;
  if (X->tok.type != T_LBRACE)
    return perr(X, X->tok.line, X->tok.col,
                "expected '{' after the repeat count, got %s", DESC(&X->tok));
  if (X->depth == MAX_DEPTH)
    return perr(X, line, col, "repeat blocks nested deeper than %d",
                MAX_DEPTH);
  if ((st = add_item(X, &count, &at)) != OVL_OK)
    return st;
  return open_block(X, S_REPEAT, line, col, at);
}

/* group { */
static ovl_status parse_group(syntax *X) {
  char descbuf[64];
  int line = X->tok.line, col = X->tok.col;
  ovl_status st;
  if (in_group(X))
    return perr(X, line, col,
                "group inside group: groups do not nest (group at %d:%d)",
                X->open[X->depth].line, X->open[X->depth].col);
  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_LBRACE)
    return perr(X, X->tok.line, X->tok.col, "expected '{' after 'group', got %s",
                DESC(&X->tok));
  if (X->depth == MAX_DEPTH)
    return perr(X, line, col, "group nested deeper than %d blocks",
                MAX_DEPTH);
  return open_block(X, S_GROUP, line, col, 0);
}

/* } */
static ovl_status close_block(syntax *X) {
  ovl_status st;
  if (X->depth == 0)
    return perr(X, X->tok.line, X->tok.col,
                "'}' without a matching repeat or group");
  if ((st = add_stmt(X, S_CLOSE, X->tok.line, X->tok.col, 0)) != OVL_OK)
    return st;
  X->depth--;
  return advance(X);
}

static ovl_status parse_statement(syntax *X) {
  char descbuf[64];
  const token *t = &X->tok;
  ovl_status st;
  if (ovl__tok_is(t, T_IDENT, "param"))
    return parse_param(X);
  if (ovl__tok_is(t, T_IDENT, "repeat"))
    return parse_repeat(X);
  if (ovl__tok_is(t, T_IDENT, "group"))
    return parse_group(X);
  if (t->type == T_RBRACE)
    return close_block(X);
  if (t->type != T_IDENT)
    return perr(X, t->line, t->col, "expected a statement, got %s", DESC(t));
  if ((st = parse_call(X, &X->call)) != OVL_OK)
    return st;
  return add_call(X, &X->call);
}

static ovl_status parse_file(syntax *X) {
  char descbuf[64];
  ovl_status st = advance(X);
  while (st == OVL_OK) {
    if (X->tok.type == T_NEWLINE) {
      st = advance(X);
      continue;
    }
    if (X->tok.type == T_EOF)
      break;
    if ((st = parse_statement(X)) != OVL_OK)
      return st;
    if (X->tok.type != T_NEWLINE && X->tok.type != T_EOF)
      return perr(X, X->tok.line, X->tok.col,
                  "unexpected %s after statement (one statement per line)",
                  DESC(&X->tok));
  }
  if (st != OVL_OK)
    return st;
  if (X->depth > 0)
    return perr(X, X->open[X->depth].line, X->open[X->depth].col,
                "%s block is not closed (missing '}')",
                in_group(X) ? "group" : "repeat");
  return OVL_OK;
}

ovl_status ovl__syntax_parse(ovl_schedule *S, ovl_error *err) {
  syntax *X = calloc(1, sizeof *X);
  ovl_status st;
  if (X == NULL)
    return ovl__lang_nomem(err, S->filename);
  X->filename = S->filename;
  X->err = err;
  X->S = S;
  ovl__lex_init(&X->lx, S->text, S->len);
  st = parse_file(X);
  if (st == OVL_OK) {
    S->stmts = ovl__shrink(S->stmts, S->nstmts, sizeof *S->stmts);
    S->calls = ovl__shrink(S->calls, S->ncalls, sizeof *S->calls);
    S->names = ovl__shrink(S->names, S->nnames, sizeof *S->names);
    S->kws = ovl__shrink(S->kws, S->nkws, sizeof *S->kws);
    S->items = ovl__shrink(S->items, S->nitems, sizeof *S->items);
    S->exprs = ovl__shrink(S->exprs, S->nexprs, sizeof *S->exprs);
    S->enodes = ovl__shrink(S->enodes, S->nenodes, sizeof *S->enodes);
  }
  free(X);
  return st;
}
