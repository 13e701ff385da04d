/*
 * Build: one call statement, its values bound, against its op-table row
 * (core/op.h; docs/ARCHITECTURE.md, "The op table"), for bind.c. The row
 * says what the op takes; this checks the call has it: outputs, inputs
 * (declared variables), attributes (known to the row, given once, of the
 * right type and range; those the row requires), the output's shape by the
 * row's shape rule for the rank count, and the output variable (declared
 * by its first write, with that shape and dtype for good). Then the op is
 * appended to the template, with its stream, its named event, its ring's
 * needs and what the host fetches.
 *
 * data() declares a variable: its shape, dtype and initial values.
 *
 * Every op takes ranks=[...] (the ranks that run it: op->ranks). Int
 * attributes, list entries and dims may be integer expressions (expr.c)
 * over params and nranks; peer may depend on `rank` too, and is then
 * evaluated for each rank that runs the op into the binder's rank_attrs
 * (shared by the ops a repeat block makes of the statement). A statement
 * in a group block gets the template group's number (bind.c numbers the
 * instances once the program is expanded).
 *
 * Every statement is checked once, in source order. That is the same as
 * checking the expanded program: a variable's shape and dtype are fixed
 * when it is first declared, so later iterations of a block see what the
 * first one saw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"

/* ------------------------------------------------------------------ */
/* Variables and shapes                                                */
/* ------------------------------------------------------------------ */

typedef ovl__shape shape;

static void shape_of(const ovl__var *v, shape *s) {
  s->dtype = v->dtype;
  s->ndim = v->ndim;
  memcpy(s->dims, v->dims, sizeof s->dims);
}

static ovl_status declare_var(binder *B, const name *nm, const shape *sh,
                              int *idx) {
  void *p;
  ovl__var *v;
  char *s = ovl__strndup(nm->s, nm->n);
  if (s == NULL)
    return nomem(B);
  if ((p = ovl__grow(B->vars, &B->capvars, B->nvars + 1, sizeof *B->vars)) ==
      NULL) {
    free(s);
    return nomem(B);
  }
  B->vars = p;
  if ((p = ovl__grow(B->fetched, &B->capfetched, B->nvars + 1,
                sizeof *B->fetched)) == NULL) {
    free(s);
    return nomem(B);
  }
  B->fetched = p;
  if (!ovl__map_put(&B->varmap, s, nm->n, (int64_t)B->nvars)) {
    free(s);
    return nomem(B);
  }
  v = &B->vars[B->nvars];
  memset(v, 0, sizeof *v);
  v->name = s;
  v->dtype = sh->dtype;
  v->ndim = sh->ndim;
  memcpy(v->dims, sh->dims, sizeof v->dims);
  v->numel = ovl__shape_numel(sh);
  v->init = OVL_INIT_NONE;
  v->line = nm->line;
  v->col = nm->col;
  B->fetched[B->nvars] = false;
  *idx = (int)B->nvars++;
  return OVL_OK;
}

/* A name that may be written as a variable: not a param, not reserved. */
static ovl_status check_var_name(binder *B, const name *nm) {
  if (ovl__is_reserved(nm->s, nm->n))
    return perr(B, nm->line, nm->col,
                "'%.*s' is reserved and cannot name a variable", (int)nm->n,
                nm->s);
  if (bind_find_param(B, nm->s, nm->n) != NULL)
    return perr(B, nm->line, nm->col, "'%.*s' is a param, not a variable",
                (int)nm->n, nm->s);
  return OVL_OK;
}

/* A positional argument: a declared variable. */
static ovl_status resolve_var(binder *B, const name *nm, int *idx) {
  ovl_status st;
  if (bind_find_param(B, nm->s, nm->n) != NULL)
    return perr(B, nm->line, nm->col, "'%.*s' is a param, not a variable",
                (int)nm->n, nm->s);
  *idx = bind_find_var(B, nm->s, nm->n);
  if (*idx >= 0)
    return OVL_OK;
  if ((st = ovl__bind_not_later_param(B, nm->s, nm->n, nm->line, nm->col)) !=
      OVL_OK)
    return st;
  return perr(B, nm->line, nm->col, "undefined variable '%.*s'", (int)nm->n,
              nm->s);
}

/* The output of an op: a new variable of the inferred shape, or an existing
 * one of exactly that shape and dtype. */
static ovl_status bind_output(binder *B, const name *nm, const shape *sh,
                              const char *opname, int *idx) {
  char a[160], b[160];
  shape have;
  ovl_status st = check_var_name(B, nm);
  if (st != OVL_OK)
    return st;
  *idx = bind_find_var(B, nm->s, nm->n);
  if (*idx < 0)
    return declare_var(B, nm, sh, idx);
  shape_of(&B->vars[*idx], &have);
  if (!ovl__shape_dims_eq(&have, sh) || have.dtype != sh->dtype)
    return perr(B, nm->line, nm->col, "%s mismatch: '%.*s' is %s but %s gives %s",
                ovl__shape_dims_eq(&have, sh) ? "dtype" : "shape", (int)nm->n, nm->s,
                ovl__shape_str(&have, a, sizeof a), opname,
                ovl__shape_str(sh, b, sizeof b));
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Attributes                                                          */
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
  A_EVENT,
  A_PEER,
  A_OUT_SHAPE,
  A_DTYPE,
  A_TRANS_X,
  A_TRANS_Y
};
static const struct attr_def {
  const char *name;
  unsigned bit;
} attr_defs[] = {
    {"ring_id", OVL_ATTR_RING_ID}, {"use_calc_stream", OVL_ATTR_USE_CALC_STREAM},
    {"scale", OVL_ATTR_SCALE},     {"bias", OVL_ATTR_BIAS},
    {"root", OVL_ATTR_ROOT},       {"us", OVL_ATTR_US},
    {"stream", OVL_ATTR_STREAM},   {"event", OVL_ATTR_EVENT},
    {"peer", OVL_ATTR_PEER},       {"out_shape", OVL_ATTR_OUT_SHAPE},
    {"dtype", OVL_ATTR_DTYPE},     {"trans_x", OVL_ATTR_TRANS_X},
    {"trans_y", OVL_ATTR_TRANS_Y},
};
#define NATTR (sizeof attr_defs / sizeof attr_defs[0])
/* ranks=[...], which every op takes, is not a bit of a row's attrs: its
 * slot in kw_seen comes after theirs. */
#define A_RANKS ((int)NATTR)

/* Keyword arguments are checked in order; `seen` remembers where each was
 * first given, to report duplicates. */
typedef struct kw_seen {
  const kwarg *at[MAX_KW];
} kw_seen;

static ovl_status check_dup(binder *B, kw_seen *seen, int slot,
                            const kwarg *kw) {
  const kwarg *first = seen->at[slot];
  if (first != NULL)
    return perr(B, kw->key.line, kw->key.col,
                "duplicate attribute '%.*s' (first given at %d:%d)",
                (int)kw->key.n, kw->key.s, first->key.line, first->key.col);
  seen->at[slot] = kw;
  return OVL_OK;
}

/* How a message shows a value: names quoted, an expression as written. */
static const char *value_desc(const binder *B, const scalar *v, char *buf,
                              size_t size) {
  char text[96];
  if (v->kind == V_EXPR || v->kind == V_RANGE) {
    snprintf(buf, size, "the expression %s",
             ovl__expr_text(B->S, v, text, sizeof text));
    return buf;
  }
  return ovl__scalar_desc(v, buf, size);
}

/* " (from -D NAME=VALUE)" when the value (item -1) or list item `item` of
 * kw came from a -D. */
#define FROM(kw, item) ovl__from_define((kw)->from[1 + (item)], fbuf, sizeof fbuf)

static ovl_status wrong_type(binder *B, const char *opname, const kwarg *kw,
                             const char *want) {
  char buf[128], fbuf[DEFINE_FROM_SIZE];
  return perr(B, kw->val.v.line, kw->val.v.col,
              "attribute '%.*s' of %s wants %s, got %s%s", (int)kw->key.n,
              kw->key.s, opname, want,
              value_desc(B, &kw->val.v, buf, sizeof buf), FROM(kw, -1));
}

/* "ring_id=" for the messages of an attribute's expression. */
static const char *key_eq(const kwarg *kw, char *buf, size_t size) {
  snprintf(buf, size, "%.*s=", (int)kw->key.n, kw->key.s);
  return buf;
}

/* An int attribute: an int, or an expression over params and nranks. */
static ovl_status want_int(binder *B, const char *opname, const kwarg *kw,
                           int64_t *out) {
  char what[MAX_IDENT + 2], thing[MAX_IDENT + 1];
  bool is_int;
  ovl_status st;
  snprintf(thing, sizeof thing, "%.*s", (int)kw->key.n, kw->key.s);
  st = ovl__int_value(B, &kw->val.v, key_eq(kw, what, sizeof what), thing,
                      out, &is_int);
  if (st == OVL_OK && !is_int)
    return wrong_type(B, opname, kw, "an int");
  return st;
}

/* An int that names a rank out of 0..nranks-1, as messages say it: "root
 * 3 out of range for 2 ranks (0..1)" for a literal, "peer=rank - 1 is -1
 * on rank 0; ranks are 0..3" for an expression (`rank` >= 0: it depends
 * on rank). `what` names it ("peer"); `from` the -D of a literal. */
static ovl_status rank_out_of_range(binder *B, const scalar *v,
                                    const char *what, const char *sep,
                                    int64_t val, int rank,
                                    const define *from) {
  char text[96], on[32] = "", fbuf[DEFINE_FROM_SIZE];
  if (v->kind != V_EXPR)
    return perr(B, v->line, v->col,
                "%s %lld out of range for %d rank%s (0..%d)%s", what,
                (long long)val, B->nranks, B->nranks == 1 ? "" : "s",
                B->nranks - 1, ovl__from_define(from, fbuf, sizeof fbuf));
  if (rank >= 0)
    snprintf(on, sizeof on, " on rank %d", rank);
  return perr(B, v->line, v->col, "%s%s%s is %lld%s; ranks are 0..%d", what,
              sep, ovl__expr_text(B->S, v, text, sizeof text),
              (long long)val, on, B->nranks - 1);
}

static ovl_status want_number(binder *B, const char *opname, const kwarg *kw,
                              double *out) {
  if (kw->val.v.kind == V_INT)
    *out = (double)kw->val.v.i;
  else if (kw->val.v.kind == V_FLOAT)
    *out = kw->val.v.f;
  else if (kw->val.v.kind == V_EXPR)
    return wrong_type(B, opname, kw,
                      "a number (integer expressions are for int "
                      "attributes)");
  else
    return wrong_type(B, opname, kw, "a number");
  return OVL_OK;
}

static ovl_status want_bool(binder *B, const char *opname, const kwarg *kw,
                            bool *out) {
  if (kw->val.v.kind != V_BOOL)
    return wrong_type(B, opname, kw, "true or false");
  *out = kw->val.v.b;
  return OVL_OK;
}

/* The index of a name value in a NULL-terminated list, or -1. */
static int pick(const scalar *v, const char *const *choices) {
  if (v->kind == V_NAME)
    for (int i = 0; choices[i] != NULL; i++)
      if (ovl__name_eq(v->s, v->n, choices[i]))
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

/* The index of name `v` in a table of names (the named events, the user
 * streams), added at the end if it is new; at most `max` of them. */
static ovl_status name_index(binder *B, const scalar *v, char ***names,
                             size_t *n, size_t *cap, map *index, size_t max,
                             const char *what, int *idx) {
  const int64_t *have = ovl__map_find(index, v->s, v->n);
  char *name;
  void *p;
  if (have != NULL) {
    *idx = (int)*have;
    return OVL_OK;
  }
  if (*n == max)
    return perr(B, v->line, v->col, "more than %zu %s", max, what);
  if ((p = ovl__grow(*names, cap, *n + 1, sizeof **names)) == NULL)
    return nomem(B);
  *names = p;
  if ((name = ovl__strndup(v->s, v->n)) == NULL)
    return nomem(B);
  if (!ovl__map_put(index, name, v->n, (int64_t)*n)) {
    free(name);
    return nomem(B);
  }
  (*names)[*n] = name;
  *idx = (int)(*n)++;
  return OVL_OK;
}

static ovl_status event_index(binder *B, const scalar *v, int *idx) {
  return name_index(B, v, &B->events, &B->nevents, &B->capevents,
                    &B->eventmap, MAX_EVENTS, "named events", idx);
}

/* stream=NAME: calc, comm (the comm stream of the op's ring), or a user
 * stream of that name. */
static ovl_status stream_attr(binder *B, ovl__op *op, const kwarg *kw,
                              bool *stream_comm) {
  const scalar *v = &kw->val.v;
  int k;
  ovl_status st;
  if (v->kind != V_NAME)
    return wrong_type(B, op->def->name, kw,
                      "calc, comm or the name of a stream");
  if (ovl__name_eq(v->s, v->n, "calc")) {
    op->stream = OVL_STREAM_CALC;
    return OVL_OK;
  }
  if (ovl__name_eq(v->s, v->n, "comm")) {
    *stream_comm = true;
    return OVL_OK;
  }
  if (ovl__name_eq(v->s, v->n, "host")) {
    char fbuf[DEFINE_FROM_SIZE];
    return perr(B, v->line, v->col,
                "stream=host: the host is not a stream (it runs fetch and "
                "the syncs)%s",
                FROM(kw, -1));
  }
  st = name_index(B, v, &B->ustreams, &B->nustreams, &B->capustreams,
                  &B->ustreammap, MAX_USER_STREAMS, "user streams", &k);
  if (st == OVL_OK)
    op->stream = OVL__STREAM_USER_TAG(k);
  return st;
}

/* What the keyword arguments of a call leave for after them. */
typedef struct call_attrs {
  bool stream_comm;       /* stream=comm: the comm stream of op's ring */
  const kwarg *rank_peer; /* a peer that depends on rank */
  const kwarg *out_shape, *dtype;
} call_attrs;

/* ranks=[...]: entries are ints or expressions over params and nranks
 * (a rank), or ranges A:B (A..B-1); at least one rank. */
static ovl_status ranks_attr(binder *B, const kwarg *kw, uint64_t *mask) {
  const value *v = &kw->val;
  char buf[128], text[160], fbuf[DEFINE_FROM_SIZE];
  const int last = B->nranks - 1;
  ovl_status st;
  *mask = 0;
  if (v->v.kind != V_LIST)
    return perr(B, v->v.line, v->v.col,
                "ranks wants a list like [0, 2] or [1:nranks], got %s%s",
                value_desc(B, &v->v, buf, sizeof buf), FROM(kw, -1));
  for (int j = 0; j < v->nitems; j++) {
    const scalar *it = &v->items[j];
    int64_t lo, hi;
    bool is_int;
    if (it->kind == V_RANGE) {
      int line, col;
      char want[64];
      if (ovl__expr_names_rank(B->S, it, &line, &col))
        return perr(B, line, col,
                    "ranks cannot depend on rank: it must be the same on "
                    "every rank (only peer may depend on rank)");
      if ((st = ovl__range_eval(B, it, "ranks range ", &lo, &hi)) != OVL_OK)
        return st;
      ovl__expr_text(B->S, it, text, sizeof text);
      snprintf(want, sizeof want, "%lld:%lld", (long long)lo, (long long)hi);
      /* "2:5", or "1:nranks + 1 (1:5)" */
      if (strcmp(text, want) != 0) {
        size_t k = strlen(text);
        snprintf(text + k, sizeof text - k, " (%s)", want);
      }
      if (lo > hi)
        return perr(B, it->line, it->col, "ranks range %s runs backwards",
                    text);
      if (lo < 0 || hi > B->nranks)
        return perr(B, it->line, it->col,
                    "ranks range %s goes past the ranks; ranks are 0..%d",
                    text, last);
      for (int64_t r = lo; r < hi; r++)
        *mask |= (uint64_t)1 << r;
      continue;
    }
    if ((st = ovl__int_value(B, it, "ranks entry ", "ranks", &lo, &is_int)) !=
        OVL_OK)
      return st;
    if (!is_int)
      return perr(B, it->line, it->col,
                  "ranks entries are ranks (ints) or ranges A:B, got %s%s",
                  value_desc(B, it, buf, sizeof buf), FROM(kw, j));
    if (lo < 0 || lo > last)
      return rank_out_of_range(B, it, it->kind == V_EXPR ? "ranks entry"
                                                         : "rank",
                               " ", lo, -1, kw->from[1 + j]);
    *mask |= (uint64_t)1 << lo;
  }
  if (*mask == 0) {
    size_t k = 0;
    buf[0] = '\0';
    for (int j = 0; j < v->nitems && k < sizeof buf; j++)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", j ? ", " : "",
                            ovl__expr_text(B->S, &v->items[j], text,
                                           sizeof text));
    return perr(B, v->v.line, v->v.col,
                "ranks=[%s] names no rank; ranks are 0..%d", buf, last);
  }
  return OVL_OK;
}

/* peer=: a rank; one that depends on rank is left in `ca` for later (it
 * is evaluated on the ranks that run the op, known once every attribute
 * is read). */
static ovl_status peer_attr(binder *B, ovl__op *op, const kwarg *kw,
                            call_attrs *ca) {
  int line, col;
  int64_t i;
  ovl_status st;
  if (ovl__expr_names_rank(B->S, &kw->val.v, &line, &col)) {
    ca->rank_peer = kw;
    return OVL_OK;
  }
  if ((st = want_int(B, op->def->name, kw, &i)) != OVL_OK)
    return st;
  if (i < 0 || i >= B->nranks)
    return rank_out_of_range(B, &kw->val.v, "peer", "=", i, -1,
                             kw->from[0]);
  op->peer = (int)i;
  return OVL_OK;
}

/* Apply one key=value to op. */
static ovl_status apply_attr(binder *B, ovl__op *op, const kwarg *kw,
                             kw_seen *seen, call_attrs *ca) {
  const char *opname = op->def->name;
  char buf[160], fbuf[DEFINE_FROM_SIZE];
  size_t a;
  int64_t i = 0;
  double f = 0.0;
  ovl_status st;
  if (ovl__name_eq(kw->key.s, kw->key.n, "ranks")) {
    if ((st = check_dup(B, seen, A_RANKS, kw)) != OVL_OK)
      return st;
    return ranks_attr(B, kw, &op->ranks);
  }
  for (a = 0; a < NATTR; a++)
    if (ovl__name_eq(kw->key.s, kw->key.n, attr_defs[a].name))
      break;
  if (a == NATTR || !(op->def->attrs & attr_defs[a].bit)) {
    if (op->def->attrs == 0)
      return perr(B, kw->key.line, kw->key.col,
                  "%s has no attribute '%.*s' (it takes none)", opname,
                  (int)kw->key.n, kw->key.s);
    return perr(B, kw->key.line, kw->key.col,
                "%s has no attribute '%.*s' (allowed: %s)", opname,
                (int)kw->key.n, kw->key.s,
                attr_list(op->def->attrs, buf, sizeof buf));
  }
  if ((st = check_dup(B, seen, (int)a, kw)) != OVL_OK)
    return st;
  switch (attr_defs[a].bit) {
  case OVL_ATTR_RING_ID:
    if ((st = want_int(B, opname, kw, &i)) != OVL_OK)
      return st;
    if (i < 0 || i >= OVL_MAX_RINGS) {
      char text[96];
      return perr(B, kw->val.v.line, kw->val.v.col,
                  "ring_id %s%s%lld out of range (0..%d)%s",
                  kw->val.v.kind == V_EXPR
                      ? ovl__expr_text(B->S, &kw->val.v, text, sizeof text)
                      : "",
                  kw->val.v.kind == V_EXPR ? " = " : "", (long long)i,
                  OVL_MAX_RINGS - 1, FROM(kw, -1));
    }
    op->ring_id = (int)i;
    return OVL_OK;
  case OVL_ATTR_USE_CALC_STREAM:
    return want_bool(B, opname, kw, &op->use_calc_stream);
  case OVL_ATTR_SCALE:
    return want_number(B, opname, kw, &op->scale);
  case OVL_ATTR_BIAS:
    return want_number(B, opname, kw, &op->bias);
  case OVL_ATTR_ROOT:
    if ((st = want_int(B, opname, kw, &i)) != OVL_OK)
      return st;
    if (i < 0 || i >= B->nranks)
      return rank_out_of_range(B, &kw->val.v, "root", "=", i, -1,
                               kw->from[0]);
    op->root = (int)i;
    return OVL_OK;
  case OVL_ATTR_US:
    if ((st = want_number(B, opname, kw, &f)) != OVL_OK)
      return st;
    if (f < 0)
      return perr(B, kw->val.v.line, kw->val.v.col,
                  "us must be >= 0, got %s%s",
                  ovl__scalar_text(&kw->val.v, buf, sizeof buf), FROM(kw, -1));
    op->us = f;
    return OVL_OK;
  case OVL_ATTR_STREAM:
    return stream_attr(B, op, kw, &ca->stream_comm);
  case OVL_ATTR_EVENT:
    if (kw->val.v.kind != V_NAME)
      return wrong_type(B, opname, kw, "an event name");
    return event_index(B, &kw->val.v, &op->event);
  case OVL_ATTR_PEER:
    return peer_attr(B, op, kw, ca);
  case OVL_ATTR_OUT_SHAPE:
    ca->out_shape = kw;
    return OVL_OK;
  case OVL_ATTR_DTYPE:
    ca->dtype = kw;
    return OVL_OK;
  case OVL_ATTR_TRANS_X:
    return want_bool(B, opname, kw, &op->trans_x);
  case OVL_ATTR_TRANS_Y:
    return want_bool(B, opname, kw, &op->trans_y);
  default:
    return OVL_OK;
  }
}

/* ------------------------------------------------------------------ */
/* Ops                                                                 */
/* ------------------------------------------------------------------ */

/* Append an op to the template and count it into the current block; an
 * error if the program grows past OVL_MAX_OPS. */
static ovl_status add_op(binder *B, const ovl__op *op) {
  void *p;
  frame *f = &B->stack[B->depth];
  if (f->nops + 1 > OVL_MAX_OPS)
    return perr(B, op->line, op->col, "program has more than %u ops",
                OVL_MAX_OPS);
  if ((p = ovl__grow(B->ops, &B->capops, B->nops + 1, sizeof *B->ops)) == NULL)
    return nomem(B);
  B->ops = p;
  B->ops[B->nops++] = *op;
  f->nops++;
  return OVL_OK;
}

static ovl_status add_fetch(binder *B, int var) {
  void *p;
  if (B->fetched[var])
    return OVL_OK;
  if ((p = ovl__grow(B->fetch, &B->capfetch, B->nfetch + 1, sizeof *B->fetch)) ==
      NULL)
    return nomem(B);
  B->fetch = p;
  B->fetch[B->nfetch++] = var;
  B->fetched[var] = true;
  return OVL_OK;
}

/* Ring R is named: it has a comm stream (the communicator is made only
 * where a collective runs on it). */
static void name_ring(binder *B, int ring) {
  if (ring + 1 > B->nrings)
    B->nrings = ring + 1;
}

/* Attributes the row requires, each with how to write it. */
static ovl_status check_required(binder *B, const ovl__op *op,
                                 const kw_seen *seen) {
  static const struct {
    unsigned bit;
    int slot;
    const char *how;
  } req[] = {{OVL_ATTR_US, A_US, "us=N (microseconds)"},
             {OVL_ATTR_EVENT, A_EVENT, "event=NAME"},
             {OVL_ATTR_PEER, A_PEER, "peer=RANK (the other rank)"},
             {OVL_ATTR_OUT_SHAPE, A_OUT_SHAPE,
              "out_shape=[...] (the shape it receives)"}};
  for (size_t k = 0; k < sizeof req / sizeof req[0]; k++)
    if ((op->def->required & req[k].bit) && seen->at[req[k].slot] == NULL)
      return perr(B, op->line, op->col, "%s needs %s", op->def->name,
                  req[k].how);
  return OVL_OK;
}

/* The output shape of an op, by its row's shape rule. */
static ovl_status infer_shape(binder *B, const ovl__op *op, shape *out) {
  shape in[OVL_MAX_OP_INPUTS];
  const char *names[OVL_MAX_OP_INPUTS];
  char msg[512];
  for (int k = 0; k < op->nin; k++) {
    shape_of(&B->vars[op->in[k]], &in[k]);
    names[k] = B->vars[op->in[k]].name;
  }
  if (op->def->shape(op->def, op, in, names, op->nin, B->nranks, out, msg,
                     sizeof msg) != NULL)
    return perr(B, op->line, op->col, "%s", msg);
  return OVL_OK;
}

static ovl_status build_data(binder *B, const call *c);
static ovl_status shape_attr(binder *B, const kwarg *kw, ovl__shape *sh);
static ovl_status dtype_attr(binder *B, const kwarg *kw, ovl_dtype *dtype);

/* A peer that depends on rank, on each rank that runs op: a new entry of
 * the binder's rank_attrs (2 ints per rank: peer, root; -1 for a rank that
 * does not run it). */
static ovl_status rank_peers(binder *B, ovl__op *op, const kwarg *kw) {
  size_t base = B->nrank_attrs, n = 2 * (size_t)B->nranks;
  void *p;
  ovl_status st;
  if (base > INT32_MAX - n)
    return perr(B, op->line, op->col,
                "more ops with a rank-dependent peer than a program can hold");
  if ((p = ovl__grow(B->rank_attrs, &B->caprank_attrs, base + n,
                     sizeof *B->rank_attrs)) == NULL)
    return nomem(B);
  B->rank_attrs = p;
  for (int r = 0; r < B->nranks; r++) {
    int64_t peer = -1;
    if (ovl__op_on_rank(op, r)) {
      if ((st = ovl__expr_eval(B, &kw->val.v, r, "peer=", &peer)) != OVL_OK)
        return st;
      if (peer < 0 || peer >= B->nranks)
        return rank_out_of_range(B, &kw->val.v, "peer", "=", peer, r, NULL);
    }
    B->rank_attrs[base + 2 * (size_t)r] = (int32_t)peer;
    B->rank_attrs[base + 2 * (size_t)r + 1] = op->root;
  }
  B->nrank_attrs = base + n;
  op->rank_attr = (int32_t)base;
  op->peer = -1; /* ovl__op_peer reads rank_attrs */
  return OVL_OK;
}

/* An op of the open group: the template group's number (a new group at
 * its first op), and the group's ring and stream. */
static ovl_status group_op(binder *B, ovl__op *op) {
  const ovl__op *first;
  void *p;
  if (B->group_op0 == SIZE_MAX) {
    if (B->ngroups >= UINT32_MAX)
      return perr(B, op->line, op->col, "too many groups");
    if ((p = ovl__grow(B->group_first, &B->capgroups, B->ngroups + 1,
                       sizeof *B->group_first)) == NULL)
      return nomem(B);
    B->group_first = p;
    B->group_first[B->ngroups++] = B->nops;
    B->group_op0 = B->nops;
    op->group = (uint32_t)B->ngroups;
    return OVL_OK;
  }
  first = &B->ops[B->group_op0];
  op->group = first->group;
  if (op->ring_id != first->ring_id)
    return perr(B, op->line, op->col,
                "%s has ring_id=%d but the first op of its group (%d:%d) has "
                "ring_id=%d: a group's ops share one ring",
                op->def->name, op->ring_id, first->line, first->col,
                first->ring_id);
  if (op->use_calc_stream != first->use_calc_stream)
    return perr(B, op->line, op->col,
                "%s has use_calc_stream=%s but the first op of its group "
                "(%d:%d) has use_calc_stream=%s: a group's ops share one "
                "stream",
                op->def->name, op->use_calc_stream ? "true" : "false",
                first->line, first->col,
                first->use_calc_stream ? "true" : "false");
  return OVL_OK;
}

ovl_status ovl__build_call(binder *B, const ovl__opdef *def, const call *c) {
  ovl__op op;
  kw_seen seen;
  call_attrs ca = {0};
  bool has_out;
  shape sh;
  ovl_status st;

  if (def == NULL)
    return build_data(B, c);

  memset(&op, 0, sizeof op);
  op.def = def;
  op.line = c->op.line;
  op.col = c->op.col;
  op.out = -1;
  op.scale = 1.0;
  op.stream = OVL_STREAM_CALC;
  op.event = -1;
  op.ranks = B->nranks >= 64 ? ~(uint64_t)0
                             : (((uint64_t)1 << B->nranks) - 1);
  op.rank_attr = -1;

  if (c->nout > def->max_out) {
    const name *extra = &c->out[def->max_out];
    if (def->max_out == 0)
      return perr(B, extra->line, extra->col, "%s has no output", def->name);
    return perr(B, extra->line, extra->col, "%s has %d output, got %d",
                def->name, def->max_out, c->nout);
  }
  if (c->npos < def->min_in || c->npos > def->max_in) {
    if (def->min_in == def->max_in)
      return perr(B, op.line, op.col, "%s takes %d input%s, got %d", def->name,
                  def->min_in, def->min_in == 1 ? "" : "s", c->npos);
    return perr(B, op.line, op.col, "%s takes %s %d input%s, got %d",
                def->name, c->npos < def->min_in ? "at least" : "at most",
                c->npos < def->min_in ? def->min_in : def->max_in,
                (c->npos < def->min_in ? def->min_in : def->max_in) == 1 ? ""
                                                                         : "s",
                c->npos);
  }
  for (int i = 0; i < c->npos; i++)
    if ((st = resolve_var(B, &c->pos[i], &op.in[i])) != OVL_OK)
      return st;
  op.nin = c->npos;

  memset(&seen, 0, sizeof seen);
  for (int i = 0; i < c->nkw; i++)
    if ((st = apply_attr(B, &op, &c->kw[i], &seen, &ca)) != OVL_OK)
      return st;
  if ((st = check_required(B, &op, &seen)) != OVL_OK)
    return st;
  if (ca.rank_peer != NULL && (st = rank_peers(B, &op, ca.rank_peer)) != OVL_OK)
    return st;
  /* stream=comm puts the op on the comm stream of its ring, which exists
   * for every ring a schedule names. */
  if ((def->attrs & OVL_ATTR_STREAM) && ca.stream_comm) {
    op.stream = OVL_STREAM_COMM(op.ring_id);
    name_ring(B, op.ring_id);
  }
  op.stream = ovl__op_place(&op);

  has_out = c->nout > 0;
  if (def->shape != NULL) {
    if ((st = infer_shape(B, &op, &sh)) != OVL_OK)
      return st;
    if (!has_out && !def->inplace_default)
      return perr(B, op.line, op.col,
                  "%s needs an output variable (out = %s(...))", def->name,
                  def->name);
    if (!has_out) {
      shape in;
      shape_of(&B->vars[op.in[0]], &in);
      if (!ovl__shape_dims_eq(&in, &sh))
        return perr(B, op.line, op.col,
                    "%s needs an output variable: its output is nranks "
                    "times %s",
                    def->name, sh.dims[0] > in.dims[0] ? "larger" : "smaller");
      op.out = op.in[0];
    }
    /* alltoall moves parts of its input between ranks, a matmul reads
     * all of its inputs while it writes: never in place. */
    for (int k = 0; def->out_distinct && has_out && k < c->npos; k++)
      if (c->out[0].n == c->pos[k].n &&
          memcmp(c->out[0].s, c->pos[k].s, c->out[0].n) == 0)
        return perr(B, c->out[0].line, c->out[0].col,
                    "%s cannot work in place: its output must be another "
                    "variable than its input '%.*s'",
                    def->name, (int)c->pos[k].n, c->pos[k].s);
  }
  if (def->p2p == OVL_P2P_RECV) {
    /* The received variable: out_shape and dtype (float32 by default). */
    memset(&sh, 0, sizeof sh);
    sh.dtype = OVL_DTYPE_FLOAT32;
    if ((st = shape_attr(B, ca.out_shape, &sh)) != OVL_OK ||
        (ca.dtype != NULL && (st = dtype_attr(B, ca.dtype, &sh.dtype)) !=
                                 OVL_OK))
      return st;
    if (!has_out)
      return perr(B, op.line, op.col,
                  "%s needs an output variable (y = %s(...))", def->name,
                  def->name);
  }
  if (def->ring_use & OVL_RING_COLLECTIVE)
    B->ring_coll[op.ring_id] = true;
  if (def->ring_use & (OVL_RING_COLLECTIVE | OVL_RING_ORDERS))
    name_ring(B, op.ring_id);
  /* What the host reads is fetched: it comes back in the result. */
  if (def->reads && op.stream == OVL_STREAM_HOST)
    for (int i = 0; i < op.nin; i++)
      if ((st = add_fetch(B, op.in[i])) != OVL_OK)
        return st;
  if (has_out && (st = bind_output(B, &c->out[0], &sh, def->name, &op.out)) !=
                     OVL_OK)
    return st;
  if (B->in_group && (st = group_op(B, &op)) != OVL_OK)
    return st;
  return add_op(B, &op);
}

/* ------------------------------------------------------------------ */
/* data()                                                              */
/* ------------------------------------------------------------------ */

enum { D_SHAPE, D_DTYPE, D_INIT, D_SEED, D_VALUE, D_PER_RANK, D__COUNT };
static const char *const data_keys[] = {"shape", "dtype", "init",
                                        "seed",  "value", "per_rank"};

/* shape=[...] of data(), out_shape=[...] of recv_v2: dims are ints >= 1
 * or expressions over params and nranks. */
static ovl_status shape_attr(binder *B, const kwarg *kw, shape *sh) {
  char buf[128], text[96], key[MAX_IDENT + 1], what[MAX_IDENT + 8];
  char fbuf[DEFINE_FROM_SIZE];
  const value *v = &kw->val;
  ovl_status st;
  snprintf(key, sizeof key, "%.*s", (int)kw->key.n, kw->key.s);
  snprintf(what, sizeof what, "%s dim ", key);
  if (v->v.kind != V_LIST)
    return perr(B, v->v.line, v->v.col,
                "%s wants a list of dims like [1000, 10000], got %s%s", key,
                value_desc(B, &v->v, buf, sizeof buf), FROM(kw, -1));
  if (v->nitems < 1 || v->nitems > OVL_MAX_DIMS)
    return perr(B, v->v.line, v->v.col, "%s has %d dims; it needs 1..%d",
                key, v->nitems, OVL_MAX_DIMS);
  sh->ndim = v->nitems;
  for (int i = 0; i < v->nitems; i++) {
    const scalar *d = &v->items[i];
    int64_t dim;
    bool is_int;
    if ((st = ovl__int_value(B, d, what, key, &dim, &is_int)) != OVL_OK)
      return st;
    if (!is_int)
      return perr(B, d->line, d->col, "%s dims must be ints, got %s%s", key,
                  value_desc(B, d, buf, sizeof buf), FROM(kw, i));
    if (dim < 1)
      return perr(B, d->line, d->col, "%s dims must be >= 1, got %s%s%lld%s",
                  key,
                  d->kind == V_EXPR ? ovl__expr_text(B->S, d, text,
                                                     sizeof text)
                                    : "",
                  d->kind == V_EXPR ? " = " : "", (long long)dim,
                  FROM(kw, i));
    sh->dims[i] = dim;
  }
  if (ovl__shape_numel(sh) < 0)
    return perr(B, v->v.line, v->v.col, "%s has too many elements", key);
  return OVL_OK;
}

/* dtype=float32|float64|float16|bfloat16 (data(), recv_v2), in the
 * order of ovl_dtype. */
static ovl_status dtype_attr(binder *B, const kwarg *kw, ovl_dtype *dtype) {
  static const char *const dtypes[] = {"float32", "float64", "float16",
                                       "bfloat16", NULL};
  char buf[160], fbuf[DEFINE_FROM_SIZE];
  int k = pick(&kw->val.v, dtypes);
  if (k < 0)
    return perr(B, kw->val.v.line, kw->val.v.col,
                "bad dtype %s (float32, float64, float16 or bfloat16)%s",
                value_desc(B, &kw->val.v, buf, sizeof buf), FROM(kw, -1));
  *dtype = (ovl_dtype)k;
  return OVL_OK;
}

static ovl_status build_data(binder *B, const call *c) {
  static const char *const inits[] = {"uniform", "fill", "special", NULL};
  const kwarg *kw[D__COUNT] = {NULL};
  kw_seen seen;
  shape sh;
  ovl_dtype dtype = OVL_DTYPE_FLOAT32;
  int init = 0, idx;
  int64_t seed = 0;
  double fill = 0.0;
  bool per_rank = false;
  char buf[160], fbuf[DEFINE_FROM_SIZE];
  ovl_status st;

  if (c->nout != 1) {
    if (c->nout == 0)
      return perr(B, c->op.line, c->op.col,
                  "data() needs a variable to declare (NAME = data(...))");
    return perr(B, c->out[1].line, c->out[1].col,
                "data() declares one variable, got %d", c->nout);
  }
  if (B->depth > 0)
    return perr(B, c->op.line, c->op.col,
                "data() inside repeat: declare variables at top level");
  if (c->npos > 0)
    return perr(B, c->pos[0].line, c->pos[0].col,
                "data() takes no positional arguments, got '%.*s'",
                (int)c->pos[0].n, c->pos[0].s);
  const name *nm = &c->out[0];
  if ((st = check_var_name(B, nm)) != OVL_OK)
    return st;
  if ((idx = bind_find_var(B, nm->s, nm->n)) >= 0)
    return perr(B, nm->line, nm->col,
                "variable '%.*s' re-declared (first declared at %d:%d)",
                (int)nm->n, nm->s, B->vars[idx].line, B->vars[idx].col);

  memset(&seen, 0, sizeof seen);
  for (int i = 0; i < c->nkw; i++) {
    const kwarg *k = &c->kw[i];
    int a;
    for (a = 0; a < D__COUNT; a++)
      if (ovl__name_eq(k->key.s, k->key.n, data_keys[a]))
        break;
    if (a == D__COUNT && ovl__name_eq(k->key.s, k->key.n, "ranks"))
      return perr(B, k->key.line, k->key.col,
                  "data() declares a variable on every rank: it takes no "
                  "ranks=");
    if (a == D__COUNT)
      return perr(B, k->key.line, k->key.col,
                  "data has no attribute '%.*s' (allowed: shape, dtype, init, "
                  "seed, value, per_rank)",
                  (int)k->key.n, k->key.s);
    if ((st = check_dup(B, &seen, a, k)) != OVL_OK)
      return st;
    kw[a] = k;
  }
  if (kw[D_SHAPE] == NULL)
    return perr(B, c->op.line, c->op.col, "data() needs shape=[...]");
  memset(&sh, 0, sizeof sh);
  if ((st = shape_attr(B, kw[D_SHAPE], &sh)) != OVL_OK)
    return st;
  if (kw[D_DTYPE] != NULL && (st = dtype_attr(B, kw[D_DTYPE], &dtype)) !=
                                 OVL_OK)
    return st;
  if (kw[D_INIT] != NULL && (init = pick(&kw[D_INIT]->val.v, inits)) < 0)
    return perr(B, kw[D_INIT]->val.v.line, kw[D_INIT]->val.v.col,
                "bad init %s (uniform, fill or special)%s",
                value_desc(B, &kw[D_INIT]->val.v, buf, sizeof buf),
                FROM(kw[D_INIT], -1));
  if (kw[D_SEED] != NULL) {
    if ((st = want_int(B, "data", kw[D_SEED], &seed)) != OVL_OK)
      return st;
    if (seed < 0)
      return perr(B, kw[D_SEED]->val.v.line, kw[D_SEED]->val.v.col,
                  "seed must be >= 0, got %lld%s", (long long)seed,
                  FROM(kw[D_SEED], -1));
  }
  if (kw[D_VALUE] != NULL) {
    if (init != 1)
      return perr(B, kw[D_VALUE]->key.line, kw[D_VALUE]->key.col,
                  "value= needs init=fill");
    if ((st = want_number(B, "data", kw[D_VALUE], &fill)) != OVL_OK)
      return st;
  }
  if (kw[D_PER_RANK] != NULL) {
    if (init == 1)
      return perr(B, kw[D_PER_RANK]->key.line, kw[D_PER_RANK]->key.col,
                  "per_rank= needs init=uniform or special");
    if ((st = want_bool(B, "data", kw[D_PER_RANK], &per_rank)) != OVL_OK)
      return st;
  }
  sh.dtype = dtype;
  if ((st = declare_var(B, nm, &sh, &idx)) != OVL_OK)
    return st;
  ovl__var *v = &B->vars[idx];
  v->init = init == 1   ? OVL_INIT_FILL
            : init == 2 ? OVL_INIT_SPECIAL
                        : OVL_INIT_UNIFORM;
  v->fill = fill;
  v->seed = (uint64_t)seed;
  v->per_rank = per_rank;
  return OVL_OK;
}
