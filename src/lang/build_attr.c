/*
 * Build: the keyword arguments of a call (lang/build.h), each checked
 * against its op's row (known to the row, given once, of the right type
 * and range) and applied to the op: ring_id, use_calc_stream, scale, bias,
 * root, us, stream (calc, comm or a user stream), event (a named event),
 * peer (an int, or an expression of rank, evaluated later), out_shape and
 * dtype (kept for after), trans_x, trans_y, and ranks=[...], which every op
 * takes; then those the row requires. Also the values that data() shares:
 * ints, numbers, bools, shapes, dtypes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/build.h"

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

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

ovl_status ovl__build_check_dup(binder *B, kw_seen *seen, int slot,
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
const char *ovl__build_value_desc(const binder *B, const scalar *v, char *buf,
                                  size_t size) {
  char text[96];
  if (v->kind == V_EXPR || v->kind == V_RANGE) {
    snprintf(buf, size, "the expression %s",
             ovl__expr_text(B->S, v, text, sizeof text));
    return buf;
  }
  return ovl__scalar_desc(v, buf, size);
}

static ovl_status wrong_type(binder *B, const char *opname, const kwarg *kw,
                             const char *want) {
  char buf[128], fbuf[DEFINE_FROM_SIZE];
  return perr(B, kw->val.v.line, kw->val.v.col,
              "attribute '%.*s' of %s wants %s, got %s%s", (int)kw->key.n,
              kw->key.s, opname, want,
              ovl__build_value_desc(B, &kw->val.v, buf, sizeof buf),
              FROM(kw, -1));
}

/* "ring_id=" for the messages of an attribute's expression. */
static const char *key_eq(const kwarg *kw, char *buf, size_t size) {
  snprintf(buf, size, "%.*s=", (int)kw->key.n, kw->key.s);
  return buf;
}

/* An int attribute: an int, or an expression over params and nranks. */
ovl_status ovl__build_want_int(binder *B, const char *opname, const kwarg *kw,
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
ovl_status ovl__build_rank_out_of_range(binder *B, const scalar *v,
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

ovl_status ovl__build_want_number(binder *B, const char *opname,
                                  const kwarg *kw, double *out) {
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

ovl_status ovl__build_want_bool(binder *B, const char *opname, const kwarg *kw,
                                bool *out) {
  if (kw->val.v.kind != V_BOOL)
    return wrong_type(B, opname, kw, "true or false");
  *out = kw->val.v.b;
  return OVL_OK;
}

/* The index of a name value in a NULL-terminated list, or -1. */
int ovl__build_pick(const scalar *v, const char *const *choices) {
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

/* ------------------------------------------------------------------ */
/* Attributes                                                          */
/* ------------------------------------------------------------------ */

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


/* ranks=[...]: entries are ints or expressions over params and nranks
 * (a rank), or ranges A:B (A..B-1); at least one rank. */
static ovl_status ranks_attr(binder *B, const kwarg *kw, uint64_t *mask) {
  const value *v = &kw->val;
  char buf[128], text[160], fbuf[DEFINE_FROM_SIZE];
  const int last = B->nranks - 1;
  ovl_status st;
  *mask = 0;
  if (B->nranks > OVL_MAX_RANKS)
    return perr(B, kw->val.v.line, kw->val.v.col,
                "ranks=[...] needs at most %d ranks (bound for %d: past %d "
                "only schedules whose ranks all run the same ops bind, for "
                "the model backend)",
                OVL_MAX_RANKS, B->nranks, OVL_MAX_RANKS);
  if (v->v.kind != V_LIST)
    return perr(B, v->v.line, v->v.col,
                "ranks wants a list like [0, 2] or [1:nranks], got %s%s",
                ovl__build_value_desc(B, &v->v, buf, sizeof buf), FROM(kw, -1));
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
                    "every rank (only peer and root may depend on rank)");
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
                  ovl__build_value_desc(B, it, buf, sizeof buf), FROM(kw, j));
    if (lo < 0 || lo > last)
      return ovl__build_rank_out_of_range(
          B, it, it->kind == V_EXPR ? "ranks entry" : "rank", " ", lo, -1,
          kw->from[1 + j]);
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
  if ((st = ovl__build_want_int(B, op->def->name, kw, &i)) != OVL_OK)
    return st;
  if (i < 0 || i >= B->nranks)
    return ovl__build_rank_out_of_range(B, &kw->val.v, "peer", "=", i, -1,
                                        kw->from[0]);
  op->peer = (int)i;
  return OVL_OK;
}

/* Apply one key=value to op. */
ovl_status ovl__build_apply_attr(binder *B, ovl__op *op, const kwarg *kw,
                                 kw_seen *seen, call_attrs *ca) {
  const char *opname = op->def->name;
  char buf[160], fbuf[DEFINE_FROM_SIZE];
  size_t a;
  int line, col;
  int64_t i = 0;
  double f = 0.0;
  ovl_status st;
  if (ovl__name_eq(kw->key.s, kw->key.n, "ranks")) {
    if ((st = ovl__build_check_dup(B, seen, A_RANKS, kw)) != OVL_OK)
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
  if ((st = ovl__build_check_dup(B, seen, (int)a, kw)) != OVL_OK)
    return st;
  switch (attr_defs[a].bit) {
  case OVL_ATTR_RING_ID:
    if ((st = ovl__build_want_int(B, opname, kw, &i)) != OVL_OK)
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
    return ovl__build_want_bool(B, opname, kw, &op->use_calc_stream);
  case OVL_ATTR_SCALE:
    return ovl__build_want_number(B, opname, kw, &op->scale);
  case OVL_ATTR_BIAS:
    return ovl__build_want_number(B, opname, kw, &op->bias);
  case OVL_ATTR_ROOT:
    /* One that depends on rank is evaluated per rank, as peer. */
    if (ovl__expr_names_rank(B->S, &kw->val.v, &line, &col)) {
      ca->rank_root = kw;
      return OVL_OK;
    }
    if ((st = ovl__build_want_int(B, opname, kw, &i)) != OVL_OK)
      return st;
    if (i < 0 || i >= B->nranks)
      return ovl__build_rank_out_of_range(B, &kw->val.v, "root", "=", i, -1,
                                          kw->from[0]);
    op->root = (int)i;
    return OVL_OK;
  case OVL_ATTR_US:
    if ((st = ovl__build_want_number(B, opname, kw, &f)) != OVL_OK)
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
    return ovl__build_want_bool(B, opname, kw, &op->trans_x);
  case OVL_ATTR_TRANS_Y:
    return ovl__build_want_bool(B, opname, kw, &op->trans_y);
  default:
    return OVL_OK;
  }
}

/* Attributes the row requires, each with how to write it. */
ovl_status ovl__build_check_required(binder *B, const ovl__op *op,
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

/* ------------------------------------------------------------------ */
/* Shapes and dtypes                                                   */
/* ------------------------------------------------------------------ */

/* shape=[...] of data(), out_shape=[...] of recv_v2: dims are ints >= 1
 * or expressions over params and nranks. */
ovl_status ovl__build_shape_attr(binder *B, const kwarg *kw, shape *sh) {
  char buf[128], text[96], key[MAX_IDENT + 1], what[MAX_IDENT + 8];
  char fbuf[DEFINE_FROM_SIZE];
  const value *v = &kw->val;
  ovl_status st;
  snprintf(key, sizeof key, "%.*s", (int)kw->key.n, kw->key.s);
  snprintf(what, sizeof what, "%s dim ", key);
  if (v->v.kind != V_LIST)
    return perr(B, v->v.line, v->v.col,
                "%s wants a list of dims like [1000, 10000], got %s%s", key,
                ovl__build_value_desc(B, &v->v, buf, sizeof buf), FROM(kw, -1));
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
                  ovl__build_value_desc(B, d, buf, sizeof buf), FROM(kw, i));
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
ovl_status ovl__build_dtype_attr(binder *B, const kwarg *kw, ovl_dtype *dtype) {
  static const char *const dtypes[] = {"float32", "float64", "float16",
                                       "bfloat16", NULL};
  char buf[160], fbuf[DEFINE_FROM_SIZE];
  int k = ovl__build_pick(&kw->val.v, dtypes);
  if (k < 0)
    return perr(B, kw->val.v.line, kw->val.v.col,
                "bad dtype %s (float32, float64, float16 or bfloat16)%s",
                ovl__build_value_desc(B, &kw->val.v, buf, sizeof buf),
                FROM(kw, -1));
  *dtype = (ovl_dtype)k;
  return OVL_OK;
}
