/*
 * The schedule parser: text -> ovl_program (docs/ARCHITECTURE.md, "The
 * pipeline"; README, "Schedules").
 *
 * Three layers, each talking only to the next:
 *   - the lexer (lang/lex.c) turns bytes into tokens that carry their line
 *     and column;
 *   - the statement parser reads one statement (param, repeat, '}' or a
 *     call) into a small syntax record, replacing param names by values;
 *   - the builder checks a call against its op-table row, infers shapes,
 *     declares variables and appends the op to a template.
 *
 * repeat blocks are kept as ranges over the template and expanded once, at
 * the end, after their expanded size has been checked: a huge repeat count
 * is rejected before anything is allocated for it.
 *
 * Every statement is checked once, in source order. That is the same as
 * checking the expanded program: a variable's shape and dtype are fixed when
 * it is first declared, so later iterations of a block see what the first
 * one saw.
 *
 * The first error stops parsing. Float literals are read and written with
 * strtod and printf, which assume LC_NUMERIC is "C" (the default of every
 * program that does not call setlocale).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "lang/lex.h"

/* Largest schedule: keeps every line and column number in an int. */
#define MAX_TEXT ((size_t)64 << 20)
/* Deepest nesting of repeat blocks. */
#define MAX_DEPTH 64
/* Elements of one list value, keyword arguments and outputs of one call. */
#define MAX_LIST 16
#define MAX_KW 16
#define MAX_OUTS 8
/* Named events (event_record / stream_wait_event) of one schedule. */
#define MAX_EVENTS 4096

/* ------------------------------------------------------------------ */
/* Name tables and growable arrays                                     */
/* ------------------------------------------------------------------ */

/* Open addressing, keys borrowed (they outlive the map). */
typedef struct map_entry {
  const char *key; /* NULL: empty slot */
  size_t len;
  uint64_t hash;
  int64_t val;
} map_entry;

typedef struct map {
  map_entry *e;
  size_t cap, n; /* cap: 0 or a power of two */
} map;

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

static int64_t *map_find(const map *m, const char *key, size_t len) {
  if (m->cap == 0)
    return NULL;
  uint64_t h = hash_bytes(key, len);
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    map_entry *e = &m->e[i];
    if (e->key == NULL)
      return NULL;
    if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
      return &e->val;
  }
}

static void map_insert(map_entry *e, size_t cap, const map_entry *ent) {
  size_t i = ent->hash & (cap - 1);
  while (e[i].key != NULL)
    i = (i + 1) & (cap - 1);
  e[i] = *ent;
}

/* Add a key that is not in the map. False when out of memory. */
static bool map_put(map *m, const char *key, size_t len, int64_t val) {
  if (2 * (m->n + 1) > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    map_entry *e = calloc(cap, sizeof *e);
    if (e == NULL)
      return false;
    for (size_t i = 0; i < m->cap; i++)
      if (m->e[i].key != NULL)
        map_insert(e, cap, &m->e[i]);
    free(m->e);
    m->e = e;
    m->cap = cap;
  }
  map_entry ent = {key, len, hash_bytes(key, len), val};
  map_insert(m->e, m->cap, &ent);
  m->n++;
  return true;
}

/* `ptr` grown to hold at least n elements; NULL (ptr untouched) when out of
 * memory. */
static void *grow(void *ptr, size_t *cap, size_t n, size_t size) {
  size_t c = *cap;
  void *p;
  if (n <= c)
    return ptr;
  if (c == 0)
    c = 16;
  while (c < n) {
    if (c > SIZE_MAX / 2)
      return NULL;
    c *= 2;
  }
  if (c > SIZE_MAX / size)
    return NULL;
  p = realloc(ptr, c * size);
  if (p != NULL)
    *cap = c;
  return p;
}

static char *strndup_(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p != NULL) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

typedef enum { V_INT, V_FLOAT, V_BOOL, V_NAME, V_LIST } vkind;

typedef struct scalar {
  vkind kind;
  int line, col;   /* where it was written (for a param: where it is used) */
  int64_t i;       /* V_INT */
  double f;        /* V_FLOAT */
  bool b;          /* V_BOOL */
  const char *s;   /* V_NAME (not terminated) */
  size_t n;
} scalar;

typedef struct value {
  scalar v; /* kind V_LIST: v.line, v.col are those of the '[' */
  int nitems;
  scalar items[MAX_LIST];
} value;

/* The shortest "%.*g" that reads back as x, always with a '.' or an
 * exponent so that it reads back as a float. */
static void fmt_double(double x, char *buf, size_t size) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, x);
    if (strtod(buf, NULL) == x)
      break;
  }
  if (strpbrk(buf, ".eEn") == NULL && strlen(buf) + 3 <= size)
    strcat(buf, ".0");
}

/* The canonical text of a scalar: 10000, 2.5, true, calc. */
static const char *scalar_text(const scalar *v, char *buf, size_t size) {
  switch (v->kind) {
  case V_INT:
    snprintf(buf, size, "%lld", (long long)v->i);
    break;
  case V_FLOAT:
    fmt_double(v->f, buf, size);
    break;
  case V_BOOL:
    snprintf(buf, size, "%s", v->b ? "true" : "false");
    break;
  case V_NAME:
    snprintf(buf, size, "%.*s", (int)v->n, v->s);
    break;
  case V_LIST:
    snprintf(buf, size, "a list");
    break;
  }
  return buf;
}

/* How a diagnostic shows a value: names are quoted. */
static const char *scalar_desc(const scalar *v, char *buf, size_t size) {
  if (v->kind == V_NAME) {
    snprintf(buf, size, "'%.*s'", (int)v->n, v->s);
    return buf;
  }
  return scalar_text(v, buf, size);
}

static bool name_eq(const char *s, size_t n, const char *word) {
  return strlen(word) == n && memcmp(s, word, n) == 0;
}

static bool is_reserved(const char *s, size_t n) {
  return name_eq(s, n, "true") || name_eq(s, n, "false") ||
         name_eq(s, n, "param") || name_eq(s, n, "repeat");
}

/* ------------------------------------------------------------------ */
/* Parser state                                                        */
/* ------------------------------------------------------------------ */

typedef struct name {
  const char *s;
  size_t n;
  int line, col;
} name;

typedef struct kwarg {
  name key;
  value val;
} kwarg;

/* One call statement: [out, ... =] op(pos, ..., key=value, ...). */
typedef struct call {
  int nout; /* may exceed MAX_OUTS; only the first are kept */
  name out[MAX_OUTS];
  name op;
  int npos; /* may exceed OVL_MAX_OP_INPUTS; only the first are kept */
  name pos[OVL_MAX_OP_INPUTS];
  int nkw;
  kwarg kw[MAX_KW];
} call;

typedef struct pparam {
  char *name;
  scalar value;      /* bound value; a V_NAME borrows the text or a -D */
  char *plain;       /* the text after '=' */
  ovl_param_origin origin;
  int line, col;
} pparam;

typedef struct define {
  const char *raw; /* "NAME=VALUE" as given */
  const char *name;
  size_t n;
  scalar val;
} define;

/* An open repeat block (frame 0 is the file itself). */
typedef struct frame {
  int line, col;   /* of `repeat` */
  int64_t count;
  uint64_t nops;   /* ops of the body so far, expanded */
  size_t block;    /* index in blocks */
} frame;

/* A repeat block as a range of the template: ops [first, end) run `count`
 * times. Blocks are kept in the order they open (outer before inner). */
typedef struct block {
  size_t first, end;
  int64_t count;
} block;

/* The first op that needs a ring's comm stream. */
typedef struct ring_need {
  bool set;
  int line, col;
  const char *op;
  /* It runs on the comm stream (stream=comm: delay, compute ops, the
   * generic stream ops) rather than ordering it (the Paddle wait ops). */
  bool on_stream;
  const ovl__opdef *def;
} ring_need;

typedef struct parser {
  const char *filename;
  const char *text;
  size_t len;
  int nranks;
  bool cpu_defaults;
  ovl_error *err;

  lexer lx;
  token tok; /* the current token */

  ovl__var *vars;
  size_t nvars, capvars;
  bool *fetched; /* per variable */
  size_t capfetched;
  map varmap; /* name -> index in vars */

  pparam *params;
  size_t nparams, capparams;
  map parammap; /* name -> index in params */

  /* Every `param NAME` of the file (a first pass), to tell "used before
   * its declaration" from "not a param", and to check -D early. */
  map allparams; /* name -> line << 32 | col */
  name *allnames;
  size_t nallnames, capallnames;
  bool scanned; /* the first pass read the whole file */

  define *defs;
  size_t ndefs;
  bool defs_checked;

  ovl__op *ops; /* the template: one op per call statement */
  size_t nops, capops;
  block *blocks;
  size_t nblocks, capblocks;
  frame stack[MAX_DEPTH + 1];
  int depth;

  int *fetch;
  size_t nfetch, capfetch;

  int nrings;
  bool ring_coll[OVL_MAX_RINGS];
  ring_need ring_need[OVL_MAX_RINGS];

  char **events; /* named events, in order of first use */
  size_t nevents, capevents;
  map eventmap; /* name -> index in events */

  call call; /* scratch for the statement being read */
} parser;

static ovl_status perr(parser *P, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ovl_status perr(parser *P, int line, int col, const char *fmt, ...) {
  char msg[OVL_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ovl__err(P->err, OVL_EPARSE, "%s:%d:%d: %s", P->filename, line, col,
                  msg);
}

static ovl_status nomem(parser *P) {
  return ovl__err(P->err, OVL_ENOMEM, "%s: out of memory parsing the schedule",
                  P->filename);
}

static ovl_status advance(parser *P) {
  if (!ovl__lex_next(&P->lx, &P->tok))
    return perr(P, P->lx.err_line, P->lx.err_col, "%s", P->lx.err_msg);
  return OVL_OK;
}

#define DESC(t) ovl__tok_desc((t), descbuf, sizeof descbuf)

static const pparam *find_param(const parser *P, const char *s, size_t n) {
  const int64_t *i = map_find(&P->parammap, s, n);
  return i == NULL ? NULL : &P->params[*i];
}

static int find_var(const parser *P, const char *s, size_t n) {
  const int64_t *i = map_find(&P->varmap, s, n);
  return i == NULL ? -1 : (int)*i;
}

/* A name that is not a declared param: an error if a param of that name is
 * declared further down. */
static ovl_status check_not_later_param(parser *P, const char *s, size_t n,
                                        int line, int col) {
  const int64_t *pos = map_find(&P->allparams, s, n);
  if (pos == NULL)
    return OVL_OK;
  return perr(P, line, col, "param '%.*s' used before its declaration at %d:%d",
              (int)n, s, (int)(*pos >> 32), (int)(*pos & 0xffffffff));
}

/* ------------------------------------------------------------------ */
/* Statement parser: values and calls                                  */
/* ------------------------------------------------------------------ */

/* A scalar value at the current token; a name of a param becomes the
 * param's value. */
static ovl_status parse_scalar(parser *P, scalar *v) {
  char descbuf[64];
  const token *t = &P->tok;
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
      const pparam *p = find_param(P, t->s, t->n);
      if (p != NULL) {
        *v = p->value;
        v->line = t->line;
        v->col = t->col;
      } else {
        ovl_status st = check_not_later_param(P, t->s, t->n, t->line, t->col);
        if (st != OVL_OK)
          return st;
        v->kind = V_NAME;
        v->s = t->s;
        v->n = t->n;
      }
    }
    break;
  case T_LBRACK:
    return perr(P, t->line, t->col, "nested lists are not supported");
  default:
    return perr(P, t->line, t->col, "expected a value, got %s", DESC(t));
  }
  return advance(P);
}

/* [v, v, ...] */
static ovl_status parse_list(parser *P, value *val) {
  char descbuf[64];
  int line = P->tok.line, col = P->tok.col;
  ovl_status st = advance(P);
  if (st != OVL_OK)
    return st;
  val->v.kind = V_LIST;
  val->v.line = line;
  val->v.col = col;
  val->nitems = 0;
  if (P->tok.type == T_RBRACK)
    return advance(P);
  for (;;) {
    if (P->tok.type == T_EOF)
      break;
    if (val->nitems == MAX_LIST)
      return perr(P, P->tok.line, P->tok.col,
                  "list has more than %d elements", MAX_LIST);
    if ((st = parse_scalar(P, &val->items[val->nitems++])) != OVL_OK)
      return st;
    if (P->tok.type == T_COMMA) {
      if ((st = advance(P)) != OVL_OK)
        return st;
      if (P->tok.type == T_RBRACK) /* a trailing comma */
        return advance(P);
      continue;
    }
    if (P->tok.type == T_RBRACK)
      return advance(P);
    if (P->tok.type == T_EOF)
      break;
    return perr(P, P->tok.line, P->tok.col,
                "expected ',' or ']' in the list opened at %d:%d, got %s",
                line, col, DESC(&P->tok));
  }
  return perr(P, line, col, "unterminated list: '[' has no matching ']'");
}

static ovl_status parse_value(parser *P, value *val) {
  val->nitems = 0;
  if (P->tok.type == T_LBRACK)
    return parse_list(P, val);
  return parse_scalar(P, &val->v);
}

static name tok_name(const token *t) {
  name nm = {t->s, t->n, t->line, t->col};
  return nm;
}

/* The argument list, from '(' to ')'. */
static ovl_status parse_args(parser *P, call *c) {
  char descbuf[64];
  int line = P->tok.line, col = P->tok.col;
  bool kw_seen = false;
  ovl_status st = advance(P);
  if (st != OVL_OK)
    return st;
  if (P->tok.type == T_RPAREN)
    return advance(P);
  for (;;) {
    if (P->tok.type == T_EOF)
      break;
    if (P->tok.type != T_IDENT)
      return perr(P, P->tok.line, P->tok.col,
                  "expected a variable name or key=value, got %s",
                  DESC(&P->tok));
    name nm = tok_name(&P->tok);
    if ((st = advance(P)) != OVL_OK)
      return st;
    if (P->tok.type == T_EQUALS) {
      if (c->nkw == MAX_KW)
        return perr(P, nm.line, nm.col, "too many attributes (max %d)",
                    MAX_KW);
      kwarg *kw = &c->kw[c->nkw++];
      kw->key = nm;
      if ((st = advance(P)) != OVL_OK ||
          (st = parse_value(P, &kw->val)) != OVL_OK)
        return st;
      kw_seen = true;
    } else {
      if (kw_seen)
        return perr(P, nm.line, nm.col,
                    "positional argument '%.*s' after keyword arguments",
                    (int)nm.n, nm.s);
      if (c->npos < OVL_MAX_OP_INPUTS)
        c->pos[c->npos] = nm;
      c->npos++;
    }
    if (P->tok.type == T_COMMA) {
      if ((st = advance(P)) != OVL_OK)
        return st;
      if (P->tok.type == T_RPAREN) /* a trailing comma */
        return advance(P);
      continue;
    }
    if (P->tok.type == T_RPAREN)
      return advance(P);
    if (P->tok.type == T_EOF)
      break;
    return perr(P, P->tok.line, P->tok.col,
                "expected ',' or ')' in the arguments of %.*s (opened at "
                "%d:%d), got %s",
                (int)c->op.n, c->op.s, line, col, DESC(&P->tok));
  }
  return perr(P, line, col,
              "unterminated argument list: '(' has no matching ')'");
}

/* [out, ... =] op(args) */
static ovl_status parse_call(parser *P, call *c) {
  char descbuf[64];
  ovl_status st;
  name first = tok_name(&P->tok);
  c->nout = c->npos = c->nkw = 0;
  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type == T_LPAREN) {
    c->op = first;
    return parse_args(P, c);
  }
  if (P->tok.type != T_COMMA && P->tok.type != T_EQUALS)
    return perr(P, P->tok.line, P->tok.col,
                "expected '(' or '=' after '%.*s', got %s", (int)first.n,
                first.s, DESC(&P->tok));
  c->out[c->nout++] = first;
  while (P->tok.type == T_COMMA) {
    if ((st = advance(P)) != OVL_OK)
      return st;
    if (P->tok.type != T_IDENT)
      return perr(P, P->tok.line, P->tok.col,
                  "expected an output name after ',', got %s", DESC(&P->tok));
    if (c->nout < MAX_OUTS)
      c->out[c->nout] = tok_name(&P->tok);
    c->nout++;
    if ((st = advance(P)) != OVL_OK)
      return st;
  }
  if (P->tok.type != T_EQUALS)
    return perr(P, P->tok.line, P->tok.col,
                "expected '=' after the outputs, got %s", DESC(&P->tok));
  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type != T_IDENT)
    return perr(P, P->tok.line, P->tok.col,
                "expected an op name after '=', got %s", DESC(&P->tok));
  c->op = tok_name(&P->tok);
  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type != T_LPAREN)
    return perr(P, P->tok.line, P->tok.col, "expected '(' after '%.*s', got %s",
                (int)c->op.n, c->op.s, DESC(&P->tok));
  return parse_args(P, c);
}

/* ------------------------------------------------------------------ */
/* Builder: variables and shapes                                       */
/* ------------------------------------------------------------------ */

typedef ovl__shape shape;

static void shape_of(const ovl__var *v, shape *s) {
  s->dtype = v->dtype;
  s->ndim = v->ndim;
  memcpy(s->dims, v->dims, sizeof s->dims);
}

static ovl_status declare_var(parser *P, const name *nm, const shape *sh,
                              int *idx) {
  void *p;
  ovl__var *v;
  char *s = strndup_(nm->s, nm->n);
  if (s == NULL)
    return nomem(P);
  if ((p = grow(P->vars, &P->capvars, P->nvars + 1, sizeof *P->vars)) ==
      NULL) {
    free(s);
    return nomem(P);
  }
  P->vars = p;
  if ((p = grow(P->fetched, &P->capfetched, P->nvars + 1,
                sizeof *P->fetched)) == NULL) {
    free(s);
    return nomem(P);
  }
  P->fetched = p;
  if (!map_put(&P->varmap, s, nm->n, (int64_t)P->nvars)) {
    free(s);
    return nomem(P);
  }
  v = &P->vars[P->nvars];
  memset(v, 0, sizeof *v);
  v->name = s;
  v->dtype = sh->dtype;
  v->ndim = sh->ndim;
  memcpy(v->dims, sh->dims, sizeof v->dims);
  v->numel = ovl__shape_numel(sh);
  v->init = OVL_INIT_NONE;
  v->line = nm->line;
  v->col = nm->col;
  P->fetched[P->nvars] = false;
  *idx = (int)P->nvars++;
  return OVL_OK;
}

/* A name that may be written as a variable: not a param, not reserved. */
static ovl_status check_var_name(parser *P, const name *nm) {
  if (is_reserved(nm->s, nm->n))
    return perr(P, nm->line, nm->col,
                "'%.*s' is reserved and cannot name a variable", (int)nm->n,
                nm->s);
  if (find_param(P, nm->s, nm->n) != NULL)
    return perr(P, nm->line, nm->col, "'%.*s' is a param, not a variable",
                (int)nm->n, nm->s);
  return OVL_OK;
}

/* A positional argument: a declared variable. */
static ovl_status resolve_var(parser *P, const name *nm, int *idx) {
  ovl_status st;
  if (find_param(P, nm->s, nm->n) != NULL)
    return perr(P, nm->line, nm->col, "'%.*s' is a param, not a variable",
                (int)nm->n, nm->s);
  *idx = find_var(P, nm->s, nm->n);
  if (*idx >= 0)
    return OVL_OK;
  if ((st = check_not_later_param(P, nm->s, nm->n, nm->line, nm->col)) !=
      OVL_OK)
    return st;
  return perr(P, nm->line, nm->col, "undefined variable '%.*s'", (int)nm->n,
              nm->s);
}

/* The output of an op: a new variable of the inferred shape, or an existing
 * one of exactly that shape and dtype. */
static ovl_status bind_output(parser *P, const name *nm, const shape *sh,
                              const char *opname, int *idx) {
  char a[160], b[160];
  shape have;
  ovl_status st = check_var_name(P, nm);
  if (st != OVL_OK)
    return st;
  *idx = find_var(P, nm->s, nm->n);
  if (*idx < 0)
    return declare_var(P, nm, sh, idx);
  shape_of(&P->vars[*idx], &have);
  if (!ovl__shape_dims_eq(&have, sh) || have.dtype != sh->dtype)
    return perr(P, nm->line, nm->col, "%s mismatch: '%.*s' is %s but %s gives %s",
                ovl__shape_dims_eq(&have, sh) ? "dtype" : "shape", (int)nm->n, nm->s,
                ovl__shape_str(&have, a, sizeof a), opname,
                ovl__shape_str(sh, b, sizeof b));
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Builder: attributes                                                 */
/* ------------------------------------------------------------------ */

/* In the order of attr_defs. */
enum {
  A_RING_ID,
  A_USE_CALC_STREAM,
  A_SCALE,
  A_BIAS,
  A_ROOT,
  A_US,
  A_STREAM,
  A_EVENT
};
static const struct attr_def {
  const char *name;
  unsigned bit;
} attr_defs[] = {
    {"ring_id", OVL_ATTR_RING_ID}, {"use_calc_stream", OVL_ATTR_USE_CALC_STREAM},
    {"scale", OVL_ATTR_SCALE},     {"bias", OVL_ATTR_BIAS},
    {"root", OVL_ATTR_ROOT},       {"us", OVL_ATTR_US},
    {"stream", OVL_ATTR_STREAM},   {"event", OVL_ATTR_EVENT},
};
#define NATTR (sizeof attr_defs / sizeof attr_defs[0])

/* Keyword arguments are checked in order; `seen` remembers where each was
 * first given, to report duplicates. */
typedef struct kw_seen {
  const kwarg *at[MAX_KW];
} kw_seen;

static ovl_status check_dup(parser *P, kw_seen *seen, int slot,
                            const kwarg *kw) {
  const kwarg *first = seen->at[slot];
  if (first != NULL)
    return perr(P, kw->key.line, kw->key.col,
                "duplicate attribute '%.*s' (first given at %d:%d)",
                (int)kw->key.n, kw->key.s, first->key.line, first->key.col);
  seen->at[slot] = kw;
  return OVL_OK;
}

static ovl_status wrong_type(parser *P, const char *opname, const kwarg *kw,
                             const char *want) {
  char buf[128];
  return perr(P, kw->val.v.line, kw->val.v.col,
              "attribute '%.*s' of %s wants %s, got %s", (int)kw->key.n,
              kw->key.s, opname, want, scalar_desc(&kw->val.v, buf, sizeof buf));
}

static ovl_status want_int(parser *P, const char *opname, const kwarg *kw,
                           int64_t *out) {
  if (kw->val.v.kind != V_INT)
    return wrong_type(P, opname, kw, "an int");
  *out = kw->val.v.i;
  return OVL_OK;
}

static ovl_status want_number(parser *P, const char *opname, const kwarg *kw,
                              double *out) {
  if (kw->val.v.kind == V_INT)
    *out = (double)kw->val.v.i;
  else if (kw->val.v.kind == V_FLOAT)
    *out = kw->val.v.f;
  else
    return wrong_type(P, opname, kw, "a number");
  return OVL_OK;
}

static ovl_status want_bool(parser *P, const char *opname, const kwarg *kw,
                            bool *out) {
  if (kw->val.v.kind != V_BOOL)
    return wrong_type(P, opname, kw, "true or false");
  *out = kw->val.v.b;
  return OVL_OK;
}

/* The index of a name value in a NULL-terminated list, or -1. */
static int pick(const scalar *v, const char *const *choices) {
  if (v->kind == V_NAME)
    for (int i = 0; choices[i] != NULL; i++)
      if (name_eq(v->s, v->n, choices[i]))
        return i;
  return -1;
}

/* "ring_id, use_calc_stream" */
static const char *attr_list(unsigned mask, char *buf, size_t size) {
  size_t k = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < NATTR && k < size; i++)
    if (mask & attr_defs[i].bit)
      k += (size_t)snprintf(buf + k, size - k, "%s%s", k ? ", " : "",
                            attr_defs[i].name);
  return buf;
}

/* The index of the named event `v`, added at the end if it is new. */
static ovl_status event_index(parser *P, const scalar *v, int *idx) {
  const int64_t *have = map_find(&P->eventmap, v->s, v->n);
  char *name;
  void *p;
  if (have != NULL) {
    *idx = (int)*have;
    return OVL_OK;
  }
  if (P->nevents == MAX_EVENTS)
    return perr(P, v->line, v->col, "more than %d named events", MAX_EVENTS);
  if ((p = grow(P->events, &P->capevents, P->nevents + 1,
                sizeof *P->events)) == NULL)
    return nomem(P);
  P->events = p;
  if ((name = strndup_(v->s, v->n)) == NULL)
    return nomem(P);
  if (!map_put(&P->eventmap, name, v->n, (int64_t)P->nevents)) {
    free(name);
    return nomem(P);
  }
  P->events[P->nevents] = name;
  *idx = (int)P->nevents++;
  return OVL_OK;
}

/* Apply one key=value to op; *stream_comm is set by stream=comm. */
static ovl_status apply_attr(parser *P, ovl__op *op, const kwarg *kw,
                             kw_seen *seen, bool *stream_comm) {
  static const char *const streams[] = {"calc", "comm", NULL};
  const char *opname = op->def->name;
  char buf[160];
  size_t a;
  int64_t i = 0;
  double f = 0.0;
  int which;
  ovl_status st;
  for (a = 0; a < NATTR; a++)
    if (name_eq(kw->key.s, kw->key.n, attr_defs[a].name))
      break;
  if (a == NATTR || !(op->def->attrs & attr_defs[a].bit)) {
    if (op->def->attrs == 0)
      return perr(P, kw->key.line, kw->key.col,
                  "%s has no attribute '%.*s' (it takes none)", opname,
                  (int)kw->key.n, kw->key.s);
    return perr(P, kw->key.line, kw->key.col,
                "%s has no attribute '%.*s' (allowed: %s)", opname,
                (int)kw->key.n, kw->key.s,
                attr_list(op->def->attrs, buf, sizeof buf));
  }
  if ((st = check_dup(P, seen, (int)a, kw)) != OVL_OK)
    return st;
  switch (attr_defs[a].bit) {
  case OVL_ATTR_RING_ID:
    if ((st = want_int(P, opname, kw, &i)) != OVL_OK)
      return st;
    if (i < 0 || i >= OVL_MAX_RINGS)
      return perr(P, kw->val.v.line, kw->val.v.col,
                  "ring_id %lld out of range (0..%d)", (long long)i,
                  OVL_MAX_RINGS - 1);
    op->ring_id = (int)i;
    return OVL_OK;
  case OVL_ATTR_USE_CALC_STREAM:
    return want_bool(P, opname, kw, &op->use_calc_stream);
  case OVL_ATTR_SCALE:
    return want_number(P, opname, kw, &op->scale);
  case OVL_ATTR_BIAS:
    return want_number(P, opname, kw, &op->bias);
  case OVL_ATTR_ROOT:
    if ((st = want_int(P, opname, kw, &i)) != OVL_OK)
      return st;
    if (i < 0 || i >= P->nranks)
      return perr(P, kw->val.v.line, kw->val.v.col,
                  "root %lld out of range for %d ranks (0..%d)", (long long)i,
                  P->nranks, P->nranks - 1);
    op->root = (int)i;
    return OVL_OK;
  case OVL_ATTR_US:
    if ((st = want_number(P, opname, kw, &f)) != OVL_OK)
      return st;
    if (f < 0)
      return perr(P, kw->val.v.line, kw->val.v.col, "us must be >= 0, got %s",
                  scalar_text(&kw->val.v, buf, sizeof buf));
    op->us = f;
    return OVL_OK;
  case OVL_ATTR_STREAM:
    if ((which = pick(&kw->val.v, streams)) < 0)
      return wrong_type(P, opname, kw, "calc or comm");
    *stream_comm = which == 1;
    return OVL_OK;
  case OVL_ATTR_EVENT:
    if (kw->val.v.kind != V_NAME)
      return wrong_type(P, opname, kw, "an event name");
    return event_index(P, &kw->val.v, &op->event);
  default:
    return OVL_OK;
  }
}

/* ------------------------------------------------------------------ */
/* Builder: ops                                                        */
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

static ovl_status unknown_op(parser *P, const name *op) {
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
    return perr(P, op->line, op->col,
                "unknown op '%.*s' (did you mean '%s'?)", (int)op->n, op->s,
                best);
  return perr(P, op->line, op->col, "unknown op '%.*s'", (int)op->n, op->s);
}

/* Append an op to the template and count it into the current block; an
 * error if the program grows past OVL_MAX_OPS. */
static ovl_status add_op(parser *P, const ovl__op *op) {
  void *p;
  frame *f = &P->stack[P->depth];
  if (f->nops + 1 > OVL_MAX_OPS)
    return perr(P, op->line, op->col, "program has more than %u ops",
                OVL_MAX_OPS);
  if ((p = grow(P->ops, &P->capops, P->nops + 1, sizeof *P->ops)) == NULL)
    return nomem(P);
  P->ops = p;
  P->ops[P->nops++] = *op;
  f->nops++;
  return OVL_OK;
}

static ovl_status add_fetch(parser *P, int var) {
  void *p;
  if (P->fetched[var])
    return OVL_OK;
  if ((p = grow(P->fetch, &P->capfetch, P->nfetch + 1, sizeof *P->fetch)) ==
      NULL)
    return nomem(P);
  P->fetch = p;
  P->fetch[P->nfetch++] = var;
  P->fetched[var] = true;
  return OVL_OK;
}

static void need_ring(parser *P, const ovl__op *op, bool on_stream) {
  ring_need *r = &P->ring_need[op->ring_id];
  if (r->set)
    return;
  r->set = true;
  r->line = op->line;
  r->col = op->col;
  r->op = op->def->name;
  r->on_stream = on_stream;
  r->def = op->def;
}

/* Attributes the row requires, each with how to write it. */
static ovl_status check_required(parser *P, const ovl__op *op,
                                 const kw_seen *seen) {
  static const struct {
    unsigned bit;
    int slot;
    const char *how;
  } req[] = {{OVL_ATTR_US, A_US, "us=N (microseconds)"},
             {OVL_ATTR_EVENT, A_EVENT, "event=NAME"}};
  for (size_t k = 0; k < sizeof req / sizeof req[0]; k++)
    if ((op->def->required & req[k].bit) && seen->at[req[k].slot] == NULL)
      return perr(P, op->line, op->col, "%s needs %s", op->def->name,
                  req[k].how);
  return OVL_OK;
}

/* The output shape of an op, by its row's shape rule. */
static ovl_status infer_shape(parser *P, const ovl__op *op, shape *out) {
  shape in[OVL_MAX_OP_INPUTS];
  const char *names[OVL_MAX_OP_INPUTS];
  char msg[512];
  for (int k = 0; k < op->nin; k++) {
    shape_of(&P->vars[op->in[k]], &in[k]);
    names[k] = P->vars[op->in[k]].name;
  }
  if (op->def->shape(op->def, in, names, op->nin, P->nranks, out, msg,
                     sizeof msg) != NULL)
    return perr(P, op->line, op->col, "%s", msg);
  return OVL_OK;
}

static ovl_status build_data(parser *P, const call *c);

static ovl_status build_call(parser *P) {
  const call *c = &P->call;
  const ovl__opdef *def;
  char opbuf[MAX_IDENT + 1];
  ovl__op op;
  kw_seen seen;
  bool stream_comm = false, has_out;
  shape sh;
  ovl_status st;

  if (name_eq(c->op.s, c->op.n, "data"))
    return build_data(P, c);
  memcpy(opbuf, c->op.s, c->op.n);
  opbuf[c->op.n] = '\0';
  if ((def = ovl__opdef_find(opbuf)) == NULL)
    return unknown_op(P, &c->op);

  memset(&op, 0, sizeof op);
  op.def = def;
  op.line = c->op.line;
  op.col = c->op.col;
  op.out = -1;
  op.scale = 1.0;
  op.stream = OVL_STREAM_CALC;
  op.event = -1;

  if (c->nout > def->max_out) {
    const name *extra = &c->out[def->max_out];
    if (def->max_out == 0)
      return perr(P, extra->line, extra->col, "%s has no output", def->name);
    return perr(P, extra->line, extra->col, "%s has %d output, got %d",
                def->name, def->max_out, c->nout);
  }
  if (c->npos < def->min_in || c->npos > def->max_in) {
    if (def->min_in == def->max_in)
      return perr(P, op.line, op.col, "%s takes %d input%s, got %d", def->name,
                  def->min_in, def->min_in == 1 ? "" : "s", c->npos);
    return perr(P, op.line, op.col, "%s takes %s %d input%s, got %d",
                def->name, c->npos < def->min_in ? "at least" : "at most",
                c->npos < def->min_in ? def->min_in : def->max_in,
                (c->npos < def->min_in ? def->min_in : def->max_in) == 1 ? ""
                                                                         : "s",
                c->npos);
  }
  for (int i = 0; i < c->npos; i++)
    if ((st = resolve_var(P, &c->pos[i], &op.in[i])) != OVL_OK)
      return st;
  op.nin = c->npos;

  memset(&seen, 0, sizeof seen);
  for (int i = 0; i < c->nkw; i++)
    if ((st = apply_attr(P, &op, &c->kw[i], &seen, &stream_comm)) != OVL_OK)
      return st;
  if ((st = check_required(P, &op, &seen)) != OVL_OK)
    return st;
  /* stream=comm puts the op on the comm stream of its ring, which exists
   * only where a collective runs on that ring. */
  if ((def->attrs & OVL_ATTR_STREAM) && stream_comm) {
    op.stream = OVL_STREAM_COMM(op.ring_id);
    need_ring(P, &op, true);
  }
  op.stream = ovl__op_place(&op);

  has_out = c->nout > 0;
  if (def->shape != NULL) {
    if ((st = infer_shape(P, &op, &sh)) != OVL_OK)
      return st;
    if (!has_out && !def->inplace_default)
      return perr(P, op.line, op.col,
                  "%s needs an output variable (out = %s(...))", def->name,
                  def->name);
    if (!has_out) {
      shape in;
      shape_of(&P->vars[op.in[0]], &in);
      if (!ovl__shape_dims_eq(&in, &sh))
        return perr(P, op.line, op.col,
                    "%s needs an output variable: its output is nranks "
                    "times %s",
                    def->name, sh.dims[0] > in.dims[0] ? "larger" : "smaller");
      op.out = op.in[0];
    }
  }
  if (def->ring_use & OVL_RING_COLLECTIVE) {
    P->ring_coll[op.ring_id] = true;
    if (op.ring_id + 1 > P->nrings)
      P->nrings = op.ring_id + 1;
  }
  if (def->ring_use & OVL_RING_ORDERS)
    need_ring(P, &op, false);
  /* What the host reads is fetched: it comes back in the result. */
  if (def->reads && op.stream == OVL_STREAM_HOST)
    for (int i = 0; i < op.nin; i++)
      if ((st = add_fetch(P, op.in[i])) != OVL_OK)
        return st;
  if (has_out && (st = bind_output(P, &c->out[0], &sh, def->name, &op.out)) !=
                     OVL_OK)
    return st;
  return add_op(P, &op);
}

/* ------------------------------------------------------------------ */
/* Builder: data()                                                     */
/* ------------------------------------------------------------------ */

enum { D_SHAPE, D_DTYPE, D_INIT, D_SEED, D_VALUE, D_PER_RANK, D__COUNT };
static const char *const data_keys[] = {"shape", "dtype", "init",
                                        "seed",  "value", "per_rank"};

static ovl_status data_shape(parser *P, const kwarg *kw, shape *sh) {
  char buf[128];
  const value *v = &kw->val;
  if (v->v.kind != V_LIST)
    return perr(P, v->v.line, v->v.col,
                "shape wants a list of dims like [1000, 10000], got %s",
                scalar_desc(&v->v, buf, sizeof buf));
  if (v->nitems < 1 || v->nitems > OVL_MAX_DIMS)
    return perr(P, v->v.line, v->v.col, "shape has %d dims; it needs 1..%d",
                v->nitems, OVL_MAX_DIMS);
  sh->ndim = v->nitems;
  for (int i = 0; i < v->nitems; i++) {
    const scalar *d = &v->items[i];
    if (d->kind != V_INT)
      return perr(P, d->line, d->col, "shape dims must be ints, got %s",
                  scalar_desc(d, buf, sizeof buf));
    if (d->i < 1)
      return perr(P, d->line, d->col, "shape dims must be >= 1, got %lld",
                  (long long)d->i);
    sh->dims[i] = d->i;
  }
  if (ovl__shape_numel(sh) < 0)
    return perr(P, v->v.line, v->v.col, "shape has too many elements");
  return OVL_OK;
}

static ovl_status build_data(parser *P, const call *c) {
  static const char *const dtypes[] = {"float32", "float64", NULL};
  static const char *const inits[] = {"uniform", "fill", NULL};
  const kwarg *kw[D__COUNT] = {NULL};
  kw_seen seen;
  shape sh;
  int dtype = 0, init = 0, idx;
  int64_t seed = 0;
  double fill = 0.0;
  bool per_rank = false;
  char buf[160];
  ovl_status st;

  if (c->nout != 1) {
    if (c->nout == 0)
      return perr(P, c->op.line, c->op.col,
                  "data() needs a variable to declare (NAME = data(...))");
    return perr(P, c->out[1].line, c->out[1].col,
                "data() declares one variable, got %d", c->nout);
  }
  if (P->depth > 0)
    return perr(P, c->op.line, c->op.col,
                "data() inside repeat: declare variables at top level");
  if (c->npos > 0)
    return perr(P, c->pos[0].line, c->pos[0].col,
                "data() takes no positional arguments, got '%.*s'",
                (int)c->pos[0].n, c->pos[0].s);
  const name *nm = &c->out[0];
  if ((st = check_var_name(P, nm)) != OVL_OK)
    return st;
  if ((idx = find_var(P, nm->s, nm->n)) >= 0)
    return perr(P, nm->line, nm->col,
                "variable '%.*s' re-declared (first declared at %d:%d)",
                (int)nm->n, nm->s, P->vars[idx].line, P->vars[idx].col);

  memset(&seen, 0, sizeof seen);
  for (int i = 0; i < c->nkw; i++) {
    const kwarg *k = &c->kw[i];
    int a;
    for (a = 0; a < D__COUNT; a++)
      if (name_eq(k->key.s, k->key.n, data_keys[a]))
        break;
    if (a == D__COUNT)
      return perr(P, k->key.line, k->key.col,
                  "data has no attribute '%.*s' (allowed: shape, dtype, init, "
                  "seed, value, per_rank)",
                  (int)k->key.n, k->key.s);
    if ((st = check_dup(P, &seen, a, k)) != OVL_OK)
      return st;
    kw[a] = k;
  }
  if (kw[D_SHAPE] == NULL)
    return perr(P, c->op.line, c->op.col, "data() needs shape=[...]");
  memset(&sh, 0, sizeof sh);
  if ((st = data_shape(P, kw[D_SHAPE], &sh)) != OVL_OK)
    return st;
  if (kw[D_DTYPE] != NULL && (dtype = pick(&kw[D_DTYPE]->val.v, dtypes)) < 0)
    return perr(P, kw[D_DTYPE]->val.v.line, kw[D_DTYPE]->val.v.col,
                "bad dtype %s (float32 or float64)",
                scalar_desc(&kw[D_DTYPE]->val.v, buf, sizeof buf));
  if (kw[D_INIT] != NULL && (init = pick(&kw[D_INIT]->val.v, inits)) < 0)
    return perr(P, kw[D_INIT]->val.v.line, kw[D_INIT]->val.v.col,
                "bad init %s (uniform or fill)",
                scalar_desc(&kw[D_INIT]->val.v, buf, sizeof buf));
  if (kw[D_SEED] != NULL) {
    if ((st = want_int(P, "data", kw[D_SEED], &seed)) != OVL_OK)
      return st;
    if (seed < 0)
      return perr(P, kw[D_SEED]->val.v.line, kw[D_SEED]->val.v.col,
                  "seed must be >= 0, got %lld", (long long)seed);
  }
  if (kw[D_VALUE] != NULL) {
    if (init != 1)
      return perr(P, kw[D_VALUE]->key.line, kw[D_VALUE]->key.col,
                  "value= needs init=fill");
    if ((st = want_number(P, "data", kw[D_VALUE], &fill)) != OVL_OK)
      return st;
  }
  if (kw[D_PER_RANK] != NULL) {
    if (init != 0)
      return perr(P, kw[D_PER_RANK]->key.line, kw[D_PER_RANK]->key.col,
                  "per_rank= needs init=uniform");
    if ((st = want_bool(P, "data", kw[D_PER_RANK], &per_rank)) != OVL_OK)
      return st;
  }
  sh.dtype = dtype == 1 ? OVL_DTYPE_FLOAT64 : OVL_DTYPE_FLOAT32;
  if ((st = declare_var(P, nm, &sh, &idx)) != OVL_OK)
    return st;
  ovl__var *v = &P->vars[idx];
  v->init = init == 1 ? OVL_INIT_FILL : OVL_INIT_UNIFORM;
  v->fill = fill;
  v->seed = (uint64_t)seed;
  v->per_rank = per_rank;
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Statements: param, repeat, '}'                                      */
/* ------------------------------------------------------------------ */

static const define *find_define(const parser *P, const char *s, size_t n) {
  for (size_t i = P->ndefs; i-- > 0;) /* the last -D of a name wins */
    if (P->defs[i].n == n && memcmp(P->defs[i].name, s, n) == 0)
      return &P->defs[i];
  return NULL;
}

/* param NAME = VALUE [, cpu = VALUE] */
static ovl_status parse_param(parser *P) {
  char descbuf[64];
  int line = P->tok.line, col = P->tok.col;
  scalar dflt, cpu;
  bool has_cpu = false;
  memset(&cpu, 0, sizeof cpu);
  const char *text_start, *text_end;
  ovl_status st;
  const pparam *old;
  void *p;
  int idx;

  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type != T_IDENT)
    return perr(P, P->tok.line, P->tok.col,
                "expected a param name after 'param', got %s", DESC(&P->tok));
  name nm = tok_name(&P->tok);
  if (P->depth > 0)
    return perr(P, line, col,
                "param inside repeat: declare params at top level");
  if (is_reserved(nm.s, nm.n))
    return perr(P, nm.line, nm.col,
                "'%.*s' is reserved and cannot name a param", (int)nm.n,
                nm.s);
  if ((old = find_param(P, nm.s, nm.n)) != NULL)
    return perr(P, nm.line, nm.col,
                "param '%.*s' re-declared (first declared at %d:%d)",
                (int)nm.n, nm.s, old->line, old->col);
  if ((idx = find_var(P, nm.s, nm.n)) >= 0)
    return perr(P, nm.line, nm.col,
                "'%.*s' is already a variable (declared at %d:%d)", (int)nm.n,
                nm.s, P->vars[idx].line, P->vars[idx].col);
  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type != T_EQUALS)
    return perr(P, P->tok.line, P->tok.col,
                "expected '=' after param '%.*s', got %s", (int)nm.n, nm.s,
                DESC(&P->tok));
  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type == T_LBRACK)
    return perr(P, P->tok.line, P->tok.col,
                "a param value is a number, bool or name, not a list");
  text_start = P->tok.s;
  text_end = P->tok.s + P->tok.n;
  if ((st = parse_scalar(P, &dflt)) != OVL_OK)
    return st;
  if (P->tok.type == T_COMMA) {
    if ((st = advance(P)) != OVL_OK)
      return st;
    if (!ovl__tok_is(&P->tok, T_IDENT, "cpu"))
      return perr(P, P->tok.line, P->tok.col,
                  "expected 'cpu = VALUE' after ',', got %s", DESC(&P->tok));
    if ((st = advance(P)) != OVL_OK)
      return st;
    if (P->tok.type != T_EQUALS)
      return perr(P, P->tok.line, P->tok.col, "expected '=' after cpu, got %s",
                  DESC(&P->tok));
    if ((st = advance(P)) != OVL_OK)
      return st;
    if (P->tok.type == T_LBRACK)
      return perr(P, P->tok.line, P->tok.col,
                  "a param value is a number, bool or name, not a list");
    if ((st = parse_scalar(P, &cpu)) != OVL_OK)
      return st;
    has_cpu = true;
  }

  if ((p = grow(P->params, &P->capparams, P->nparams + 1,
                sizeof *P->params)) == NULL)
    return nomem(P);
  P->params = p;
  pparam *pp = &P->params[P->nparams];
  memset(pp, 0, sizeof *pp);
  pp->line = nm.line;
  pp->col = nm.col;
  pp->name = strndup_(nm.s, nm.n);
  pp->plain = strndup_(text_start, (size_t)(text_end - text_start));
  if (pp->name == NULL || pp->plain == NULL ||
      !map_put(&P->parammap, pp->name, nm.n, (int64_t)P->nparams)) {
    free(pp->name);
    free(pp->plain);
    return nomem(P);
  }
  P->nparams++;
  const define *d = find_define(P, nm.s, nm.n);
  if (d != NULL) {
    pp->value = d->val;
    pp->origin = OVL_PARAM_DEFINED;
  } else if (P->cpu_defaults && has_cpu) {
    pp->value = cpu;
    pp->origin = OVL_PARAM_CPU_DEFAULT;
  } else {
    pp->value = dflt;
    pp->origin = OVL_PARAM_DEFAULT;
  }
  return OVL_OK;
}

/* repeat COUNT { */
static ovl_status parse_repeat(parser *P) {
  char descbuf[64], buf[64];
  int line = P->tok.line, col = P->tok.col;
  scalar count;
  ovl_status st;
  void *p;

  if ((st = advance(P)) != OVL_OK)
    return st;
  if (P->tok.type != T_INT && P->tok.type != T_FLOAT &&
      P->tok.type != T_IDENT)
    return perr(P, P->tok.line, P->tok.col,
                "expected a repeat count after 'repeat', got %s",
                DESC(&P->tok));
  if ((st = parse_scalar(P, &count)) != OVL_OK)
    return st;
  if (count.kind != V_INT)
    return perr(P, count.line, count.col,
                "repeat count must be an int or an int param, got %s",
                scalar_desc(&count, buf, sizeof buf));
  if (count.i < 1)
    return perr(P, count.line, count.col, "repeat count must be >= 1, got %lld",
                (long long)count.i);
  if (P->tok.type != T_LBRACE)
    return perr(P, P->tok.line, P->tok.col,
                "expected '{' after the repeat count, got %s", DESC(&P->tok));
  if (P->depth == MAX_DEPTH)
    return perr(P, line, col, "repeat blocks nested deeper than %d",
                MAX_DEPTH);
  if ((p = grow(P->blocks, &P->capblocks, P->nblocks + 1,
                sizeof *P->blocks)) == NULL)
    return nomem(P);
  P->blocks = p;
  P->blocks[P->nblocks].first = P->nops;
  P->blocks[P->nblocks].end = P->nops;
  P->blocks[P->nblocks].count = count.i;
  frame *f = &P->stack[++P->depth];
  f->line = line;
  f->col = col;
  f->count = count.i;
  f->nops = 0;
  f->block = P->nblocks++;
  return advance(P);
}

/* } */
static ovl_status close_block(parser *P) {
  if (P->depth == 0)
    return perr(P, P->tok.line, P->tok.col, "'}' without a matching repeat");
  frame *f = &P->stack[P->depth--];
  frame *parent = &P->stack[P->depth];
  if (f->nops == 0) {
    /* Nothing to expand. Blocks nested in it were empty too and are gone,
     * so it is the last one. */
    P->nblocks--;
    return advance(P);
  }
  P->blocks[f->block].end = P->nops;
  if ((uint64_t)f->count > OVL_MAX_OPS / f->nops ||
      parent->nops + f->nops * (uint64_t)f->count > OVL_MAX_OPS)
    return perr(P, f->line, f->col,
                "repeat makes the program longer than %u ops", OVL_MAX_OPS);
  parent->nops += f->nops * (uint64_t)f->count;
  return advance(P);
}

static ovl_status parse_statement(parser *P) {
  char descbuf[64];
  const token *t = &P->tok;
  ovl_status st;
  if (ovl__tok_is(t, T_IDENT, "param"))
    return parse_param(P);
  if (ovl__tok_is(t, T_IDENT, "repeat"))
    return parse_repeat(P);
  if (t->type == T_RBRACE)
    return close_block(P);
  if (t->type != T_IDENT)
    return perr(P, t->line, t->col, "expected a statement, got %s", DESC(t));
  if ((st = parse_call(P, &P->call)) != OVL_OK)
    return st;
  return build_call(P);
}

static ovl_status parse_file(parser *P) {
  char descbuf[64];
  ovl_status st = advance(P);
  while (st == OVL_OK) {
    if (P->tok.type == T_NEWLINE) {
      st = advance(P);
      continue;
    }
    if (P->tok.type == T_EOF)
      break;
    if ((st = parse_statement(P)) != OVL_OK)
      return st;
    if (P->tok.type != T_NEWLINE && P->tok.type != T_EOF)
      return perr(P, P->tok.line, P->tok.col,
                  "unexpected %s after statement (one statement per line)",
                  DESC(&P->tok));
  }
  if (st != OVL_OK)
    return st;
  if (P->depth > 0)
    return perr(P, P->stack[P->depth].line, P->stack[P->depth].col,
                "repeat block is not closed (missing '}')");
  return OVL_OK;
}

/* A ring op without a collective on its ring orders nothing: report the
 * first one in the file. */
static ovl_status check_rings(parser *P) {
  const ring_need *first = NULL;
  int ring = 0;
  for (int r = 0; r < OVL_MAX_RINGS; r++) {
    const ring_need *n = &P->ring_need[r];
    if (!n->set || P->ring_coll[r])
      continue;
    if (first == NULL || n->line < first->line ||
        (n->line == first->line && n->col < first->col)) {
      first = n;
      ring = r;
    }
  }
  if (first == NULL)
    return OVL_OK;
  if (first->on_stream)
    return perr(P, first->line, first->col,
                "ring %d has no collective: %s(stream=comm, ring_id=%d) "
                "has no comm stream to %s",
                ring, first->op, ring, first->def->stream_verb);
  return perr(P, first->line, first->col,
              "ring %d has no collective: %s(ring_id=%d) has no comm stream "
              "to order",
              ring, first->op, ring);
}

/* ------------------------------------------------------------------ */
/* -D defines and the first pass                                       */
/* ------------------------------------------------------------------ */

/* How much of a -D a message quotes, and room for that much escaped (each
 * byte at most 4 characters) with "..." after it. */
#define DEFINE_QUOTE_MAX 120
#define DEFINE_QUOTE_SIZE (4 * DEFINE_QUOTE_MAX + 4)

/* One byte of a command-line argument as a message shows it: printable
 * ASCII as itself, anything else escaped (\n, \t, \r, \\, \xNN). A -D may
 * hold any byte, and a message must stay on one line. */
static const char *escape_byte(unsigned char c, char buf[5]) {
  const char *e = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                  : c == '\r' ? "\\r" : NULL;
  if (e != NULL)
    snprintf(buf, 5, "%s", e);
  else if (c >= 0x20 && c < 0x7f)
    snprintf(buf, 5, "%c", c);
  else
    snprintf(buf, 5, "\\x%02x", c);
  return buf;
}

/* The first n bytes of s, escaped byte by byte; past DEFINE_QUOTE_MAX
 * bytes, "..." instead of the rest. buf holds DEFINE_QUOTE_SIZE. */
static const char *escape_text(const char *s, size_t n, char *buf) {
  char one[5];
  buf[0] = '\0';
  for (size_t i = 0; i < n && i < DEFINE_QUOTE_MAX; i++)
    strcat(buf, escape_byte((unsigned char)s[i], one));
  if (n > DEFINE_QUOTE_MAX)
    strcat(buf, "...");
  return buf;
}

/* The value of a -D as a scalar: exactly one token, an int, a float, true,
 * false or a name. The lexer alone skips blanks and takes '#' for the start
 * of a comment, so "5#x" and "5\t" would read as 5: anything before or
 * after the token is an error here, as a second token is. */
static ovl_status define_value(parser *P, const char *raw, const char *val,
                               scalar *v) {
  char shown[DEFINE_QUOTE_SIZE], found[5];
  size_t len = strlen(val), at = 0;
  lexer lx;
  token t = {.type = T_EOF};
  escape_text(raw, strlen(raw), shown);
  if (len == 0)
    return ovl__err(P->err, OVL_EPARSE, "-D %s: expected a value after '='",
                    shown);
  ovl__lex_init(&lx, val, len);
  if (!is_blank((unsigned char)val[0]) && val[0] != '#' && val[0] != '\n') {
    if (!ovl__lex_next(&lx, &t))
      return ovl__err(P->err, OVL_EPARSE, "-D %s: %s", shown, lx.err_msg);
    if (t.type == T_INT || t.type == T_FLOAT || t.type == T_IDENT)
      at = t.n; /* a value token: what follows it is the error, if any */
  }
  if (at == 0 || at < len)
    return ovl__err(P->err, OVL_EPARSE,
                    "-D %s: the value must be one number, bool or name "
                    "(found '%s' at column %zu)",
                    shown, escape_byte((unsigned char)val[at], found), at + 1);
  memset(v, 0, sizeof *v);
  if (t.type == T_INT) {
    v->kind = V_INT;
    v->i = t.i;
  } else if (t.type == T_FLOAT) {
    v->kind = V_FLOAT;
    v->f = t.f;
  } else if (ovl__tok_is(&t, T_IDENT, "true") || ovl__tok_is(&t, T_IDENT, "false")) {
    v->kind = V_BOOL;
    v->b = ovl__tok_is(&t, T_IDENT, "true");
  } else {
    v->kind = V_NAME;
    v->s = t.s;
    v->n = t.n;
  }
  return OVL_OK;
}

static ovl_status parse_defines(parser *P, const ovl_parse_opts *opts) {
  char shown[DEFINE_QUOTE_SIZE], name[DEFINE_QUOTE_SIZE];
  if (opts == NULL || opts->ndefines == 0)
    return OVL_OK;
  if (opts->defines == NULL)
    return ovl__err(P->err, OVL_EINVAL, "defines is NULL");
  P->defs = calloc(opts->ndefines, sizeof *P->defs);
  if (P->defs == NULL)
    return nomem(P);
  for (size_t i = 0; i < opts->ndefines; i++) {
    const char *raw = opts->defines[i], *eq;
    define *d = &P->defs[P->ndefs];
    ovl_status st;
    if (raw == NULL)
      return ovl__err(P->err, OVL_EINVAL, "define %zu is NULL", i);
    if ((eq = strchr(raw, '=')) == NULL)
      return ovl__err(P->err, OVL_EPARSE, "-D %s: expected NAME=VALUE",
                      escape_text(raw, strlen(raw), shown));
    d->raw = raw;
    d->name = raw;
    d->n = (size_t)(eq - raw);
    bool ok = d->n > 0 && d->n <= MAX_IDENT && is_alpha(raw[0]);
    for (size_t k = 0; ok && k < d->n; k++)
      ok = is_alnum(raw[k]);
    if (!ok)
      return ovl__err(P->err, OVL_EPARSE, "-D %s: bad param name '%s'",
                      escape_text(raw, strlen(raw), shown),
                      escape_text(raw, d->n, name));
    if ((st = define_value(P, raw, eq + 1, &d->val)) != OVL_OK)
      return st;
    P->ndefs++;
  }
  return OVL_OK;
}

/* Find every `param NAME` at the start of a statement. Lexical errors end
 * the scan quietly: the real pass reports them where they are. */
static ovl_status scan_params(parser *P) {
  lexer lx;
  token t, first;
  size_t k = 0; /* index of t in its statement */
  void *p;
  ovl__lex_init(&lx, P->text, P->len);
  memset(&first, 0, sizeof first);
  while (ovl__lex_next(&lx, &t)) {
    if (t.type == T_EOF) {
      P->scanned = true;
      return OVL_OK;
    }
    if (t.type == T_NEWLINE) {
      k = 0;
      continue;
    }
    if (k++ == 0)
      first = t;
    if (k == 2 && t.type == T_IDENT && ovl__tok_is(&first, T_IDENT, "param") &&
        map_find(&P->allparams, t.s, t.n) == NULL) {
      if ((p = grow(P->allnames, &P->capallnames, P->nallnames + 1,
                    sizeof *P->allnames)) == NULL)
        return nomem(P);
      P->allnames = p;
      P->allnames[P->nallnames++] = tok_name(&t);
      if (!map_put(&P->allparams, t.s, t.n,
                   (int64_t)t.line << 32 | (int64_t)t.col))
        return nomem(P);
    }
  }
  return OVL_OK;
}

/* Every -D must name a param of the schedule. */
static ovl_status check_defines(parser *P) {
  char list[512];
  size_t k = 0;
  list[0] = '\0';
  for (size_t i = 0; i < P->ndefs; i++) {
    const define *d = &P->defs[i];
    if (map_find(&P->allparams, d->name, d->n) != NULL)
      continue;
    for (size_t j = 0; j < P->nallnames && k < sizeof list; j++)
      k += (size_t)snprintf(list + k, sizeof list - k, "%s%.*s",
                            j ? ", " : "", (int)P->allnames[j].n,
                            P->allnames[j].s);
    if (P->nallnames == 0)
      return ovl__err(P->err, OVL_EPARSE,
                      "-D %s: no such param in %s (it declares no params)",
                      d->raw, P->filename);
    return ovl__err(P->err, OVL_EPARSE,
                    "-D %s: no such param in %s (params: %s)", d->raw,
                    P->filename, list);
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Assembly: the program                                               */
/* ------------------------------------------------------------------ */

/* Write the template ops [lo, hi) with their blocks expanded, starting at
 * block *b; returns how many ops were written. Recursion depth is bounded
 * by MAX_DEPTH. */
static size_t emit(const parser *P, size_t lo, size_t hi, size_t *b,
                   ovl__op *out) {
  size_t k = 0, i = lo;
  while (i < hi) {
    if (*b < P->nblocks && P->blocks[*b].first == i) {
      const block *bl = &P->blocks[(*b)++];
      size_t n = emit(P, bl->first, bl->end, b, out + k);
      for (int64_t r = 1; r < bl->count; r++)
        memcpy(out + k + (size_t)r * n, out + k, n * sizeof *out);
      k += n * (size_t)bl->count;
      i = bl->end;
    } else {
      out[k++] = P->ops[i++];
    }
  }
  return k;
}

static void *shrink(void *ptr, size_t n, size_t size) {
  void *p;
  if (n == 0) {
    free(ptr);
    return NULL;
  }
  p = realloc(ptr, n * size);
  return p != NULL ? p : ptr;
}

static ovl_status assemble(parser *P, ovl_program **out) {
  char buf[64];
  size_t total = (size_t)P->stack[0].nops, b = 0;
  ovl_program *prog = calloc(1, sizeof *prog);
  if (prog == NULL)
    return nomem(P);
  prog->nranks = P->nranks;
  prog->nrings = P->nrings;
  if ((prog->filename = ovl__strdup(P->filename)) == NULL)
    goto nomem;
  if (P->nparams > 0) {
    prog->params = calloc(P->nparams, sizeof *prog->params);
    if (prog->params == NULL)
      goto nomem;
    for (size_t i = 0; i < P->nparams; i++) {
      ovl__param *q = &prog->params[i];
      pparam *pp = &P->params[i];
      prog->nparams++;
      q->origin = pp->origin;
      q->value = ovl__strdup(scalar_text(&pp->value, buf, sizeof buf));
      q->name = ovl__strdup(pp->name);
      q->plain_default = ovl__strdup(pp->plain);
      if (q->value == NULL || q->name == NULL || q->plain_default == NULL)
        goto nomem;
    }
  }
  if (P->nblocks == 0) {
    prog->ops = shrink(P->ops, total, sizeof *P->ops);
    P->ops = NULL;
  } else if (total > 0) {
    if ((prog->ops = malloc(total * sizeof *prog->ops)) == NULL)
      goto nomem;
    emit(P, 0, P->nops, &b, prog->ops);
  }
  prog->nops = total;
  prog->vars = shrink(P->vars, P->nvars, sizeof *P->vars);
  prog->nvars = P->nvars;
  P->vars = NULL;
  P->nvars = 0;
  prog->fetch = shrink(P->fetch, P->nfetch, sizeof *P->fetch);
  prog->nfetch = P->nfetch;
  P->fetch = NULL;
  prog->events = shrink(P->events, P->nevents, sizeof *P->events);
  prog->nevents = P->nevents;
  P->events = NULL;
  P->nevents = 0;
  {
    ovl_status st = ovl__program_lower(prog, P->err);
    if (st != OVL_OK) {
      ovl_program_free(prog);
      return st;
    }
  }
  *out = prog;
  return OVL_OK;
nomem:
  ovl_program_free(prog);
  return nomem(P);
}

static void parser_free(parser *P) {
  for (size_t i = 0; i < P->nvars; i++)
    free(P->vars[i].name);
  free(P->vars);
  free(P->fetched);
  free(P->varmap.e);
  for (size_t i = 0; i < P->nparams; i++) {
    free(P->params[i].name);
    free(P->params[i].plain);
  }
  free(P->params);
  free(P->parammap.e);
  free(P->allparams.e);
  free(P->allnames);
  free(P->defs);
  free(P->ops);
  free(P->blocks);
  free(P->fetch);
  for (size_t i = 0; i < P->nevents; i++)
    free(P->events[i]);
  free(P->events);
  free(P->eventmap.e);
  free(P);
}

/* The caller's limit on the expanded program (ovl_parse_opts.max_ops),
 * checked once the whole file is read and before anything is allocated
 * for the expansion: its length is known from the template. */
static ovl_status check_max_ops(parser *P, uint64_t max_ops) {
  uint64_t n = P->stack[0].nops;
  if (max_ops == 0 || n <= max_ops)
    return OVL_OK;
  return ovl__err(P->err, OVL_ENOMEM,
                  "%s: the program has %llu ops after repeat expansion; the "
                  "limit is %llu",
                  P->filename, (unsigned long long)n,
                  (unsigned long long)max_ops);
}

/* The line and column of text[off]. */
static void text_pos(const char *text, size_t off, int *line, int *col) {
  const char *start = text, *p = text, *end = text + off;
  *line = 1;
  while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
    (*line)++;
    start = ++p;
  }
  *col = (int)(end - start) + 1;
}

/* ------------------------------------------------------------------ */
/* Public API                                                          */
/* ------------------------------------------------------------------ */

ovl_status ovl_program_parse(const char *text, size_t len,
                             const char *filename,
                             const ovl_parse_opts *opts, ovl_program **out,
                             ovl_error *err) {
  const char *nul;
  parser *P;
  ovl_status st;
  if (filename == NULL)
    filename = "<string>";
  if ((text == NULL && len > 0) || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_program_parse: %s is NULL",
                    out == NULL ? "out" : "text");
  if (opts != NULL && (opts->nranks < 1 || opts->nranks > OVL_MAX_RANKS))
    return ovl__err(err, OVL_EINVAL, "nranks must be 1..%d, got %d",
                    OVL_MAX_RANKS, opts->nranks);
  if (len > MAX_TEXT)
    return ovl__err(err, OVL_EPARSE,
                    "%s: schedule too large (%zu bytes; max %zu MiB)",
                    filename, len, MAX_TEXT >> 20);
  if (len > 0 && (nul = memchr(text, '\0', len)) != NULL) {
    int line, col;
    text_pos(text, (size_t)(nul - text), &line, &col);
    return ovl__err(err, OVL_EPARSE, "%s:%d:%d: binary data (NUL byte)",
                    filename, line, col);
  }
  if ((P = calloc(1, sizeof *P)) == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: out of memory parsing the schedule",
                    filename);
  P->filename = filename;
  P->text = len > 0 ? text : "";
  P->len = len;
  P->nranks = opts != NULL ? opts->nranks : 2;
  P->cpu_defaults = opts != NULL && opts->cpu_defaults != 0;
  P->err = err;
  ovl__lex_init(&P->lx, P->text, P->len);

  st = parse_defines(P, opts);
  if (st == OVL_OK)
    st = scan_params(P);
  /* When the first pass read everything, a -D that names no param is
   * reported before any schedule error: it is a mistake in the command. */
  if (st == OVL_OK && P->scanned) {
    st = check_defines(P);
    P->defs_checked = true;
  }
  if (st == OVL_OK)
    st = parse_file(P);
  if (st == OVL_OK)
    st = check_rings(P);
  if (st == OVL_OK && !P->defs_checked)
    st = check_defines(P);
  if (st == OVL_OK && opts != NULL)
    st = check_max_ops(P, opts->max_ops);
  if (st == OVL_OK)
    st = assemble(P, out);
  parser_free(P);
  return st;
}

ovl_status ovl_program_load(const char *path, const ovl_parse_opts *opts,
                            ovl_program **out, ovl_error *err) {
  FILE *f;
  struct stat sb;
  char *buf = NULL, *p;
  size_t len = 0, cap = 0, n;
  ovl_status st;
  if (path == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_program_load: %s is NULL",
                    path == NULL ? "path" : "out");
  if ((f = fopen(path, "rb")) == NULL)
    return ovl__err(err, OVL_EIO, "%s: %s", path, strerror(errno));
  /* A regular file's size is known up front; pipes are read up to the
   * limit. */
  if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
      (uint64_t)sb.st_size > MAX_TEXT) {
    fclose(f);
    return ovl__err(err, OVL_EPARSE, "%s: file too large (max %zu MiB)", path,
                    MAX_TEXT >> 20);
  }
  for (;;) {
    if (len == cap) {
      if (cap > MAX_TEXT) {
        st = ovl__err(err, OVL_EPARSE, "%s: file too large (max %zu MiB)",
                      path, MAX_TEXT >> 20);
        goto out;
      }
      cap = cap ? 2 * cap : 65536;
      if ((p = realloc(buf, cap)) == NULL) {
        st = ovl__err(err, OVL_ENOMEM, "%s: out of memory reading it", path);
        goto out;
      }
      buf = p;
    }
    n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) {
      if (ferror(f)) {
        st = ovl__err(err, OVL_EIO, "%s: %s", path, strerror(errno));
        goto out;
      }
      break;
    }
  }
  if (len > MAX_TEXT) {
    st = ovl__err(err, OVL_EPARSE, "%s: file too large (max %zu MiB)", path,
                  MAX_TEXT >> 20);
    goto out;
  }
  st = ovl_program_parse(buf, len, path, opts, out, err);
out:
  free(buf);
  fclose(f);
  return st;
}
