/*
 * Parse: values (lang/syntax.h): a scalar (an int, a float, true or
 * false, or a name, which stays a name), a list of them, and integer
 * expressions: + - * / %, unary minus and parentheses over ints, names
 * (params), `rank` and `nranks`; an entry of ranks=[...] may be a range
 * A:B. An expression is kept as its nodes in postfix order (the
 * schedule's exprs and enodes), evaluated by binding (expr.c); a lone
 * literal or name stays a plain value.
 */
#include <string.h>

#include "lang/syntax.h"

/* ------------------------------------------------------------------ */
/* Scalars                                                             */
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
ovl_status ovl__syntax_expr(syntax *X, scalar *v, bool range) {
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
    if ((st = ovl__syntax_expr(X, &val->items[val->nitems++], range)) != OVL_OK)
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
ovl_status ovl__syntax_value(syntax *X, value *val, bool ranks) {
  memset(&val->v, 0, sizeof val->v);
  val->nitems = 0;
  if (X->tok.type == T_LBRACK)
    return parse_list(X, val, ranks);
  return ovl__syntax_expr(X, &val->v, false);
}
