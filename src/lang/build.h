/*
 * The build step's own header (src/lang/build*.c; lang/lang.h says what
 * building is): one call statement, its values bound, against its
 * op-table row. The files, each calling only those after it:
 *   build.c       a call: its arity, attributes, output and ring, the op
 *                 appended to the template (ovl__build_call)
 *   build_data.c  data(): a variable declared, its shape, dtype and
 *                 initial values
 *   build_attr.c  keyword arguments: each checked against the row and
 *                 applied to the op; the values of attributes
 *   build_var.c   variables: declared, looked up, written
 * Internal to src/lang/.
 */
#ifndef OVL_LANG_BUILD_H
#define OVL_LANG_BUILD_H

#include <string.h>

#include "lang/lang.h"

typedef ovl__shape shape;

static inline void shape_of(const ovl__var *v, shape *s) {
  s->dtype = v->dtype;
  s->ndim = v->ndim;
  memcpy(s->dims, v->dims, sizeof s->dims);
}

/* Keyword arguments are checked in order; `seen` remembers where each was
 * first given, to report duplicates. */
typedef struct kw_seen {
  const kwarg *at[MAX_KW];
} kw_seen;

/* What the keyword arguments of a call leave for after them. */
typedef struct call_attrs {
  bool stream_comm;       /* stream=comm: the comm stream of op's ring */
  const kwarg *rank_peer; /* a peer that depends on rank */
  const kwarg *rank_root; /* a root that depends on rank */
  const kwarg *out_shape, *dtype;
} call_attrs;

/* " (from -D NAME=VALUE)" when the value (item -1) or list item `item` of
 * kw came from a -D. */
#define FROM(kw, item) ovl__from_define((kw)->from[1 + (item)], fbuf, sizeof fbuf)

/* ------------------------------------------------------------------ */
/* data() (build_data.c)                                               */
/* ------------------------------------------------------------------ */

/* Declare the variable of a data() call, with its shape, dtype and
 * initial values. */
ovl_status ovl__build_data(binder *B, const call *c);

/* ------------------------------------------------------------------ */
/* Attributes (build_attr.c)                                           */
/* ------------------------------------------------------------------ */

/* Apply one key=value to op (a peer that depends on rank, out_shape and
 * dtype are left in `ca`). */
ovl_status ovl__build_apply_attr(binder *B, ovl__op *op, const kwarg *kw,
                                 kw_seen *seen, call_attrs *ca);
/* Attributes the row requires, each with how to write it. */
ovl_status ovl__build_check_required(binder *B, const ovl__op *op,
                                     const kw_seen *seen);
/* kw, the keyword argument of slot `slot`, must not have been given
 * before. */
ovl_status ovl__build_check_dup(binder *B, kw_seen *seen, int slot,
                                const kwarg *kw);
/* How a message shows a value: names quoted, an expression as written. */
const char *ovl__build_value_desc(const binder *B, const scalar *v,
                                  char *buf, size_t size);
/* The value of an int, number or bool attribute of op `opname`; an error
 * names what it wants. */
ovl_status ovl__build_want_int(binder *B, const char *opname,
                               const kwarg *kw, int64_t *out);
ovl_status ovl__build_want_number(binder *B, const char *opname,
                                  const kwarg *kw, double *out);
ovl_status ovl__build_want_bool(binder *B, const char *opname,
                                const kwarg *kw, bool *out);
/* The index of a name value in a NULL-terminated list, or -1. */
int ovl__build_pick(const scalar *v, const char *const *choices);
/* An int that names a rank out of 0..nranks-1, in words (`rank` >= 0: it
 * depends on rank, and this is its value there). */
ovl_status ovl__build_rank_out_of_range(binder *B, const scalar *v,
                                        const char *what, const char *sep,
                                        int64_t val, int rank,
                                        const define *from);
/* shape=[...] of data(), out_shape=[...] of recv_v2; dtype=... of both. */
ovl_status ovl__build_shape_attr(binder *B, const kwarg *kw, shape *sh);
ovl_status ovl__build_dtype_attr(binder *B, const kwarg *kw,
                                 ovl_dtype *dtype);

/* ------------------------------------------------------------------ */
/* Variables (build_var.c)                                             */
/* ------------------------------------------------------------------ */

/* A new variable named nm, of shape sh; *idx its index. */
ovl_status ovl__build_declare_var(binder *B, const name *nm, const shape *sh,
                                  int *idx);
/* A name that may be written as a variable: not a param, not reserved. */
ovl_status ovl__build_check_var_name(binder *B, const name *nm);
/* A positional argument: a declared variable. */
ovl_status ovl__build_resolve_var(binder *B, const name *nm, int *idx);
/* The output of an op: a new variable of the inferred shape, or an
 * existing one of exactly that shape and dtype. */
ovl_status ovl__build_output(binder *B, const name *nm, const shape *sh,
                             const char *opname, int *idx);

#endif /* OVL_LANG_BUILD_H */
