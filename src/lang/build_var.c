/*
 * Build: the variables of a program (lang/build.h): declared by data() or
 * by an op's first write, with a shape and dtype for good; looked up for
 * an op's inputs; written by an op's output, which must have the shape
 * and dtype its row gives.
 */
#include <stdlib.h>
#include <string.h>

#include "lang/build.h"

ovl_status ovl__build_declare_var(binder *B, const name *nm, const shape *sh,
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
ovl_status ovl__build_check_var_name(binder *B, const name *nm) {
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
ovl_status ovl__build_resolve_var(binder *B, const name *nm, int *idx) {
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
ovl_status ovl__build_output(binder *B, const name *nm, const shape *sh,
                             const char *opname, int *idx) {
  char a[160], b[160];
  shape have;
  ovl_status st = ovl__build_check_var_name(B, nm);
  if (st != OVL_OK)
    return st;
  *idx = bind_find_var(B, nm->s, nm->n);
  if (*idx < 0)
    return ovl__build_declare_var(B, nm, sh, idx);
  shape_of(&B->vars[*idx], &have);
  if (!ovl__shape_dims_eq(&have, sh) || have.dtype != sh->dtype)
    return perr(B, nm->line, nm->col, "%s mismatch: '%.*s' is %s but %s gives %s",
                ovl__shape_dims_eq(&have, sh) ? "dtype" : "shape", (int)nm->n, nm->s,
                ovl__shape_str(&have, a, sizeof a), opname,
                ovl__shape_str(sh, b, sizeof b));
  return OVL_OK;
}
