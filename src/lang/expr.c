/*
 * Integer expressions (lang/lang.h; docs/LANGUAGE.md): `peer=(rank + 1)
 * % nranks`, `shape=[rows, cols / nranks]`, `ranks=[1:nranks]`, `repeat
 * 2 * n {`. Parsing (syntax.c) keeps one as its nodes in postfix order;
 * this evaluates them for binding, and gives their text to messages.
 *
 * Values are int64. `/` floors and `%` takes the divisor's sign (Python's
 * rules: (rank - 1) % nranks is the previous rank on rank 0 too); division
 * or modulo by zero and overflow are errors at the operator. Names are int
 * params declared above, `rank` (the rank the value is for) and `nranks`.
 */
#include <stdio.h>
#include <string.h>

#include "lang/lang.h"

ovl_status ovl__bind_not_later_param(binder *B, const char *s, size_t n,
                                     int line, int col) {
  const int64_t *i = ovl__map_find(&B->S->pnames.index, s, n);
  const name *at;
  if (i == NULL || (size_t)*i < B->nbound)
    return OVL_OK;
  at = &B->S->pnames.names[*i];
  return perr(B, line, col, "param '%.*s' used before its declaration at %d:%d",
              (int)n, s, at->line, at->col);
}

/* How much of an expression a message quotes. */
#define EXPR_QUOTE_MAX 60

const char *ovl__expr_text(const ovl_schedule *S, const scalar *v, char *buf,
                           size_t size) {
  const sexpr *e;
  if (v->kind != V_EXPR && v->kind != V_RANGE)
    return ovl__scalar_text(v, buf, size);
  e = &S->exprs[v->i];
  return ovl__one_line(e->text, e->len, buf,
                       size > EXPR_QUOTE_MAX + 4 ? EXPR_QUOTE_MAX + 4 : size);
}

bool ovl__expr_names_rank(const ovl_schedule *S, const scalar *v, int *line,
                          int *col) {
  const sexpr *e;
  if (v->kind != V_EXPR && v->kind != V_RANGE)
    return false;
  e = &S->exprs[v->i];
  if (e->rank_line == 0)
    return false;
  *line = e->rank_line;
  *col = e->rank_col;
  return true;
}

/* The value of a name node. */
static ovl_status name_value(binder *B, const scalar *node, int rank,
                             int64_t *out) {
  char buf[64], fbuf[DEFINE_FROM_SIZE];
  const bparam *p;
  ovl_status st;
  if (ovl__name_eq(node->s, node->n, "rank")) {
    if (rank < 0) /* callers refuse such expressions first */
      return perr(B, node->line, node->col, "rank is not allowed here");
    *out = rank;
    return OVL_OK;
  }
  if (ovl__name_eq(node->s, node->n, "nranks")) {
    *out = B->nranks;
    return OVL_OK;
  }
  if ((p = bind_find_param(B, node->s, node->n)) == NULL) {
    if ((st = ovl__bind_not_later_param(B, node->s, node->n, node->line,
                                        node->col)) != OVL_OK)
      return st;
    return perr(B, node->line, node->col,
                "'%.*s' is not a param (an expression takes ints, params, "
                "rank and nranks)",
                (int)node->n, node->s);
  }
  if (p->value.kind != V_INT)
    return perr(B, node->line, node->col, "param '%.*s' is %s, not an int%s",
                (int)node->n, node->s,
                ovl__scalar_desc(&p->value, buf, sizeof buf),
                ovl__from_define(p->from, fbuf, sizeof fbuf));
  *out = p->value.i;
  return OVL_OK;
}

/* Python's floor division and modulo; false on overflow. */
static bool floor_div(int64_t a, int64_t b, int64_t *q) {
  if (a == INT64_MIN && b == -1)
    return false;
  *q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0)))
    (*q)--;
  return true;
}

static int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r;
  if (b == -1)
    return 0;
  r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

/* Evaluate nodes [0, n) of expression `v` onto stack[0 .. *sp). */
static ovl_status eval_nodes(binder *B, const scalar *v, size_t n, int rank,
                             const char *what, int64_t *stack, int *sp) {
  const ovl_schedule *S = B->S;
  const sexpr *e = &S->exprs[v->i];
  char text[EXPR_QUOTE_MAX + 8], on[32] = "";
  int k = 0;
  ovl_status st;
  if (e->rank_line != 0)
    snprintf(on, sizeof on, " on rank %d", rank);
  for (size_t i = 0; i < n; i++) {
    const scalar *node = &S->enodes[e->first + i];
    int64_t a, b, r = 0;
    bool ok = true;
    switch (node->kind) {
    case V_INT:
      stack[k++] = node->i;
      continue;
    case V_NAME:
      if ((st = name_value(B, node, rank, &stack[k])) != OVL_OK)
        return st;
      k++;
      continue;
    case V_OP:
      break;
    default: /* parsing keeps nothing else */
      return perr(B, node->line, node->col, "bad expression");
    }
    if (node->i == OP_NEG) {
      a = stack[k - 1];
      ok = a != INT64_MIN;
      stack[k - 1] = ok ? -a : 0;
    } else {
      b = stack[--k];
      a = stack[k - 1];
      switch (node->i) {
      case '+':
        ok = !__builtin_add_overflow(a, b, &r);
        break;
      case '-':
        ok = !__builtin_sub_overflow(a, b, &r);
        break;
      case '*':
        ok = !__builtin_mul_overflow(a, b, &r);
        break;
      case '/':
      case '%':
        if (b == 0)
          return perr(B, node->line, node->col, "%s by zero in %s%s%s",
                      node->i == '/' ? "division" : "modulo", what,
                      ovl__expr_text(S, v, text, sizeof text), on);
        if (node->i == '/')
          ok = floor_div(a, b, &r);
        else
          r = floor_mod(a, b);
        break;
      default:
        return perr(B, node->line, node->col, "bad expression");
      }
      stack[k - 1] = r;
    }
    if (!ok)
      return perr(B, node->line, node->col, "integer overflow in %s%s%s",
                  what, ovl__expr_text(S, v, text, sizeof text), on);
  }
  *sp = k;
  return OVL_OK;
}

ovl_status ovl__expr_eval(binder *B, const scalar *v, int rank,
                          const char *what, int64_t *out) {
  int64_t stack[MAX_EXPR_STACK];
  int sp = 0;
  const sexpr *e = &B->S->exprs[v->i];
  ovl_status st = eval_nodes(B, v, e->n, rank, what, stack, &sp);
  if (st == OVL_OK)
    *out = stack[0];
  return st;
}

ovl_status ovl__range_eval(binder *B, const scalar *v, const char *what,
                           int64_t *lo, int64_t *hi) {
  int64_t stack[MAX_EXPR_STACK];
  int sp = 0;
  const sexpr *e = &B->S->exprs[v->i];
  /* The last node is the ':' */
  ovl_status st = eval_nodes(B, v, e->n - 1, -1, what, stack, &sp);
  if (st == OVL_OK) {
    *lo = stack[0];
    *hi = stack[1];
  }
  return st;
}

ovl_status ovl__int_value(binder *B, const scalar *v, const char *what,
                          const char *thing, int64_t *out, bool *is_int) {
  int line, col;
  *is_int = false;
  if (v->kind == V_INT) {
    *out = v->i;
    *is_int = true;
    return OVL_OK;
  }
  if (v->kind != V_EXPR)
    return OVL_OK;
  if (ovl__expr_names_rank(B->S, v, &line, &col))
    return perr(B, line, col,
                "%s cannot depend on rank: it must be the same on every "
                "rank (only peer and root may depend on rank)",
                thing);
  *is_int = true;
  return ovl__expr_eval(B, v, -1, what, out);
}
