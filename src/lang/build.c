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
/* Names                                                               */
/* ------------------------------------------------------------------ */

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

static ovl_status wrong_type(binder *B, const char *opname, const kwarg *kw,
                             const char *want) {
  char buf[128];
  return perr(B, kw->val.v.line, kw->val.v.col,
              "attribute '%.*s' of %s wants %s, got %s", (int)kw->key.n,
              kw->key.s, opname, want, ovl__scalar_desc(&kw->val.v, buf, sizeof buf));
}

static ovl_status want_int(binder *B, const char *opname, const kwarg *kw,
                           int64_t *out) {
  if (kw->val.v.kind != V_INT)
    return wrong_type(B, opname, kw, "an int");
  *out = kw->val.v.i;
  return OVL_OK;
}

static ovl_status want_number(binder *B, const char *opname, const kwarg *kw,
                              double *out) {
  if (kw->val.v.kind == V_INT)
    *out = (double)kw->val.v.i;
  else if (kw->val.v.kind == V_FLOAT)
    *out = kw->val.v.f;
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
  if (ovl__name_eq(v->s, v->n, "host"))
    return perr(B, v->line, v->col,
                "stream=host: the host is not a stream (it runs fetch and "
                "the syncs)");
  st = name_index(B, v, &B->ustreams, &B->nustreams, &B->capustreams,
                  &B->ustreammap, MAX_USER_STREAMS, "user streams", &k);
  if (st == OVL_OK)
    op->stream = OVL__STREAM_USER_TAG(k);
  return st;
}

/* Apply one key=value to op; *stream_comm is set by stream=comm. */
static ovl_status apply_attr(binder *B, ovl__op *op, const kwarg *kw,
                             kw_seen *seen, bool *stream_comm) {
  const char *opname = op->def->name;
  char buf[160];
  size_t a;
  int64_t i = 0;
  double f = 0.0;
  ovl_status st;
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
    if (i < 0 || i >= OVL_MAX_RINGS)
      return perr(B, kw->val.v.line, kw->val.v.col,
                  "ring_id %lld out of range (0..%d)", (long long)i,
                  OVL_MAX_RINGS - 1);
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
      return perr(B, kw->val.v.line, kw->val.v.col,
                  "root %lld out of range for %d ranks (0..%d)", (long long)i,
                  B->nranks, B->nranks - 1);
    op->root = (int)i;
    return OVL_OK;
  case OVL_ATTR_US:
    if ((st = want_number(B, opname, kw, &f)) != OVL_OK)
      return st;
    if (f < 0)
      return perr(B, kw->val.v.line, kw->val.v.col, "us must be >= 0, got %s",
                  ovl__scalar_text(&kw->val.v, buf, sizeof buf));
    op->us = f;
    return OVL_OK;
  case OVL_ATTR_STREAM:
    return stream_attr(B, op, kw, stream_comm);
  case OVL_ATTR_EVENT:
    if (kw->val.v.kind != V_NAME)
      return wrong_type(B, opname, kw, "an event name");
    return event_index(B, &kw->val.v, &op->event);
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
             {OVL_ATTR_EVENT, A_EVENT, "event=NAME"}};
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
  if (op->def->shape(op->def, in, names, op->nin, B->nranks, out, msg,
                     sizeof msg) != NULL)
    return perr(B, op->line, op->col, "%s", msg);
  return OVL_OK;
}

static ovl_status build_data(binder *B, const call *c);

ovl_status ovl__build_call(binder *B, const ovl__opdef *def, const call *c) {
  ovl__op op;
  kw_seen seen;
  bool stream_comm = false, has_out;
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
    if ((st = apply_attr(B, &op, &c->kw[i], &seen, &stream_comm)) != OVL_OK)
      return st;
  if ((st = check_required(B, &op, &seen)) != OVL_OK)
    return st;
  /* stream=comm puts the op on the comm stream of its ring, which exists
   * for every ring a schedule names. */
  if ((def->attrs & OVL_ATTR_STREAM) && stream_comm) {
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
  return add_op(B, &op);
}

/* ------------------------------------------------------------------ */
/* data()                                                              */
/* ------------------------------------------------------------------ */

enum { D_SHAPE, D_DTYPE, D_INIT, D_SEED, D_VALUE, D_PER_RANK, D__COUNT };
static const char *const data_keys[] = {"shape", "dtype", "init",
                                        "seed",  "value", "per_rank"};

static ovl_status data_shape(binder *B, const kwarg *kw, shape *sh) {
  char buf[128];
  const value *v = &kw->val;
  if (v->v.kind != V_LIST)
    return perr(B, v->v.line, v->v.col,
                "shape wants a list of dims like [1000, 10000], got %s",
                ovl__scalar_desc(&v->v, buf, sizeof buf));
  if (v->nitems < 1 || v->nitems > OVL_MAX_DIMS)
    return perr(B, v->v.line, v->v.col, "shape has %d dims; it needs 1..%d",
                v->nitems, OVL_MAX_DIMS);
  sh->ndim = v->nitems;
  for (int i = 0; i < v->nitems; i++) {
    const scalar *d = &v->items[i];
    if (d->kind != V_INT)
      return perr(B, d->line, d->col, "shape dims must be ints, got %s",
                  ovl__scalar_desc(d, buf, sizeof buf));
    if (d->i < 1)
      return perr(B, d->line, d->col, "shape dims must be >= 1, got %lld",
                  (long long)d->i);
    sh->dims[i] = d->i;
  }
  if (ovl__shape_numel(sh) < 0)
    return perr(B, v->v.line, v->v.col, "shape has too many elements");
  return OVL_OK;
}

static ovl_status build_data(binder *B, const call *c) {
  static const char *const dtypes[] = {"float32", "float64", NULL};
  static const char *const inits[] = {"uniform", "fill", "special", NULL};
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
  if ((st = data_shape(B, kw[D_SHAPE], &sh)) != OVL_OK)
    return st;
  if (kw[D_DTYPE] != NULL && (dtype = pick(&kw[D_DTYPE]->val.v, dtypes)) < 0)
    return perr(B, kw[D_DTYPE]->val.v.line, kw[D_DTYPE]->val.v.col,
                "bad dtype %s (float32 or float64)",
                ovl__scalar_desc(&kw[D_DTYPE]->val.v, buf, sizeof buf));
  if (kw[D_INIT] != NULL && (init = pick(&kw[D_INIT]->val.v, inits)) < 0)
    return perr(B, kw[D_INIT]->val.v.line, kw[D_INIT]->val.v.col,
                "bad init %s (uniform, fill or special)",
                ovl__scalar_desc(&kw[D_INIT]->val.v, buf, sizeof buf));
  if (kw[D_SEED] != NULL) {
    if ((st = want_int(B, "data", kw[D_SEED], &seed)) != OVL_OK)
      return st;
    if (seed < 0)
      return perr(B, kw[D_SEED]->val.v.line, kw[D_SEED]->val.v.col,
                  "seed must be >= 0, got %lld", (long long)seed);
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
  sh.dtype = dtype == 1 ? OVL_DTYPE_FLOAT64 : OVL_DTYPE_FLOAT32;
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
