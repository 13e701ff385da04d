/*
 * Parse: tokens -> the statements of a schedule (lang/lang.h; docs/
 * ARCHITECTURE.md, "The pipeline"; docs/LANGUAGE.md).
 *
 * One statement a line: `param NAME = VALUE [, cpu = VALUE]`, `repeat
 * COUNT {`, `group {`, `}` (this file), or a call `[out, ... =] op(pos,
 * ..., key=value, ...)` (syntax_call.c). Each is read into a record of the
 * schedule (syntax_records.c), in source order, with its names and values
 * as written: a name used as a value stays a name (binding replaces the
 * names of params by their values), so nothing here depends on a rank
 * count, a backend or a -D.
 *
 * Values (attribute values, list items, repeat counts, param values) may
 * be integer expressions: + - * / %, unary minus and parentheses over
 * ints, names (params), `rank` and `nranks`; an entry of ranks=[...] may be
 * a range A:B (syntax_expr.c). One is kept as its nodes in postfix order
 * (the schedule's exprs and enodes), evaluated by binding (expr.c). A lone
 * literal or name stays a plain value.
 *
 * Checked here: the form of every statement and expression, the nesting
 * of blocks (balanced, at most MAX_DEPTH deep; a group holds only send_v2
 * and recv_v2, so no block), op names (with a suggestion for a misspelt
 * one), literal repeat counts, and param declarations (once each, at top
 * level, not a reserved word). A statement of another language (`if rank
 * == 0 {`, `for`, `while`, a bare `{`) says what this one has instead. The
 * first error stops parsing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/syntax.h"

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
  if ((st = ovl__syntax_expr(X, v, false)) != OVL_OK)
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
  return ovl__syntax_add_stmt(X, S_PARAM, line, col, S->pnames.n - 1);
}

/* A block opens at line:col. */
static ovl_status open_block(syntax *X, stmt_kind kind, int line, int col,
                             size_t index) {
  ovl_status st = ovl__syntax_add_stmt(X, kind, line, col, index);
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
  if ((st = ovl__syntax_expr(X, &count, false)) != OVL_OK)
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
  if ((st = ovl__syntax_add_item(X, &count, &at)) != OVL_OK)
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
  if ((st = ovl__syntax_add_stmt(X, S_CLOSE, X->tok.line, X->tok.col, 0)) !=
      OVL_OK)
    return st;
  X->depth--;
  return advance(X);
}

/* ------------------------------------------------------------------ */
/* Syntax of other languages                                           */
/* ------------------------------------------------------------------ */

/* What the language has instead of branches on the rank. */
static const char ranks_hint[] =
    "an op runs on the ranks of its ranks=[...] argument (b = scale(a, "
    "ranks=[0]) runs on rank 0 alone), and peer= and root= take "
    "expressions of rank and nranks (peer=(rank + 1) % nranks); see "
    "\"Ranks that differ\" in docs/LANGUAGE.md";

/* The kind of statement of another language that the word `t` begins
 * (when not followed by '=' or ',': a variable may be named so): 1 a
 * branch, 2 a loop, 0 neither. */
static int foreign_word(const syntax *X, const token *t) {
  static const char *const branch[] = {"if", "elif", "else", "switch",
                                        "case", "unless"};
  static const char *const loop[] = {"for", "foreach", "while", "do",
                                      "loop", "until"};
  const char *p = t->s + t->n;
  while (p < X->lx.end && (*p == ' ' || *p == '\t'))
    p++;
  if (p < X->lx.end &&
      (*p == ',' || (*p == '=' && (p + 1 == X->lx.end || p[1] != '='))))
    return 0;
  for (size_t i = 0; i < sizeof branch / sizeof branch[0]; i++)
    if (ovl__name_eq(t->s, t->n, branch[i]))
      return 1;
  for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++)
    if (ovl__name_eq(t->s, t->n, loop[i]))
      return 2;
  return 0;
}

/* `if rank == 0 {`, `for i in ...`, `while`, a bare `{`: the error says
 * what the language has instead (docs/LANGUAGE.md, "Ranks that differ").
 * Decided on the first token, before the rest of the line is read (its
 * ';' or '==' would be an error of its own). */
static ovl_status foreign_statement(syntax *X, int kind) {
  const token *t = &X->tok;
  if (kind == 1)
    return perr(X, t->line, t->col,
                "'%.*s' is not in the schedule language: there are no "
                "branches; %s",
                (int)t->n, t->s, ranks_hint);
  if (kind == 2)
    return perr(X, t->line, t->col,
                "'%.*s' is not in the schedule language: a loop is "
                "'repeat N {' ... '}' (N an int, a param or an expression "
                "of nranks); for ops that differ by rank, %s",
                (int)t->n, t->s, ranks_hint);
  return perr(X, t->line, t->col,
              "'{' opens a block only after 'repeat N' or 'group'; for ops "
              "that differ by rank, %s",
              ranks_hint);
}

static ovl_status parse_statement(syntax *X) {
  char descbuf[64];
  const token *t = &X->tok;
  int foreign = t->type == T_IDENT ? foreign_word(X, t) : 0;
  if (foreign != 0 || t->type == T_LBRACE)
    return foreign_statement(X, foreign);
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
  return ovl__syntax_call(X);
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
    if (X->tok.type == T_IDENT && foreign_word(X, &X->tok) != 0)
      return foreign_statement(X, foreign_word(X, &X->tok));
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
