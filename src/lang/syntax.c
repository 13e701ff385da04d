/*
 * Parse: tokens -> the statements of a schedule (lang/lang.h; docs/
 * ARCHITECTURE.md, "The pipeline"; README, "Schedules").
 *
 * One statement a line: `param NAME = VALUE [, cpu = VALUE]`, `repeat
 * COUNT {`, `}`, or a call `[out, ... =] op(pos, ..., key=value, ...)`. Each
 * is read into a record of the schedule, in source order, with its names
 * and values as written: a name used as a value stays a name (binding
 * replaces the names of params by their values), so nothing here depends
 * on a rank count, a backend or a -D.
 *
 * Checked here: the form of every statement, the nesting of repeat blocks
 * (balanced, at most MAX_DEPTH deep), op names (with a suggestion for a
 * misspelt one), literal repeat counts, and param declarations (once each,
 * at top level, not a reserved word). The first error stops parsing.
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
  /* Open repeat blocks: where each `repeat` is. */
  int depth;
  struct {
    int line, col;
  } open[MAX_DEPTH + 1];
  call call; /* the call statement being read */
} syntax;

static ovl_status advance(syntax *X) {
  if (!ovl__lex_next(&X->lx, &X->tok))
    return perr(X, X->lx.err_line, X->lx.err_col, "%s", X->lx.err_msg);
  return OVL_OK;
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

/* [v, v, ...] */
static ovl_status parse_list(syntax *X, value *val) {
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
    if ((st = parse_scalar(X, &val->items[val->nitems++])) != OVL_OK)
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

static ovl_status parse_value(syntax *X, value *val) {
  memset(&val->v, 0, sizeof val->v);
  val->nitems = 0;
  if (X->tok.type == T_LBRACK)
    return parse_list(X, val);
  return parse_scalar(X, &val->v);
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
          (st = parse_value(X, &kw->val)) != OVL_OK)
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

/* After '=' or 'cpu =': one scalar value (not a list); its text. */
static ovl_status param_value(syntax *X, scalar *v, char **text) {
  const char *start;
  size_t n;
  ovl_status st;
  if (X->tok.type == T_LBRACK)
    return perr(X, X->tok.line, X->tok.col,
                "a param value is a number, bool or name, not a list");
  start = X->tok.s;
  n = X->tok.n;
  if ((st = parse_scalar(X, v)) != OVL_OK)
    return st;
  if ((*text = ovl__strndup(start, n)) == NULL)
    return nomem(X);
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
                "param inside repeat: declare params at top level");
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

/* repeat COUNT { */
static ovl_status parse_repeat(syntax *X) {
  char descbuf[64];
  int line = X->tok.line, col = X->tok.col;
  scalar count;
  size_t at;
  ovl_status st;

  if ((st = advance(X)) != OVL_OK)
    return st;
  if (X->tok.type != T_INT && X->tok.type != T_FLOAT &&
      X->tok.type != T_IDENT)
    return perr(X, X->tok.line, X->tok.col,
                "expected a repeat count after 'repeat', got %s",
                DESC(&X->tok));
  if ((st = parse_scalar(X, &count)) != OVL_OK)
    return st;
  /* A name is checked when it is bound (it may be a param). */
  if (count.kind != V_NAME &&
      (st = ovl__check_count(X->err, X->filename, &count)) != OVL_OK)
    return st;
  if (X->tok.type != T_LBRACE)
    return perr(X, X->tok.line, X->tok.col,
                "expected '{' after the repeat count, got %s", DESC(&X->tok));
  if (X->depth == MAX_DEPTH)
    return perr(X, line, col, "repeat blocks nested deeper than %d",
                MAX_DEPTH);
  if ((st = add_item(X, &count, &at)) != OVL_OK ||
      (st = add_stmt(X, S_REPEAT, line, col, at)) != OVL_OK)
    return st;
  X->depth++;
  X->open[X->depth].line = line;
  X->open[X->depth].col = col;
  return advance(X);
}

/* } */
static ovl_status close_block(syntax *X) {
  ovl_status st;
  if (X->depth == 0)
    return perr(X, X->tok.line, X->tok.col, "'}' without a matching repeat");
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
                "repeat block is not closed (missing '}')");
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
  }
  free(X);
  return st;
}
