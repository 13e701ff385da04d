/*
 * Build: data() (lang/build.h), which declares a variable on every rank:
 * its shape (shape=[...], dims that may be integer expressions), its
 * dtype (float32 by default), and its initial values (init=uniform, with
 * a seed, per rank or not; fill, with a value; special).
 */
#include <string.h>

#include "lang/build.h"

enum { D_SHAPE, D_DTYPE, D_INIT, D_SEED, D_VALUE, D_PER_RANK, D__COUNT };
static const char *const data_keys[] = {"shape", "dtype", "init",
                                        "seed",  "value", "per_rank"};

ovl_status ovl__build_data(binder *B, const call *c) {
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
  if ((st = ovl__build_check_var_name(B, nm)) != OVL_OK)
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
    if ((st = ovl__build_check_dup(B, &seen, a, k)) != OVL_OK)
      return st;
    kw[a] = k;
  }
  if (kw[D_SHAPE] == NULL)
    return perr(B, c->op.line, c->op.col, "data() needs shape=[...]");
  memset(&sh, 0, sizeof sh);
  if ((st = ovl__build_shape_attr(B, kw[D_SHAPE], &sh)) != OVL_OK)
    return st;
  if (kw[D_DTYPE] != NULL &&
      (st = ovl__build_dtype_attr(B, kw[D_DTYPE], &dtype)) != OVL_OK)
    return st;
  if (kw[D_INIT] != NULL &&
      (init = ovl__build_pick(&kw[D_INIT]->val.v, inits)) < 0)
    return perr(B, kw[D_INIT]->val.v.line, kw[D_INIT]->val.v.col,
                "bad init %s (uniform, fill or special)%s",
                ovl__build_value_desc(B, &kw[D_INIT]->val.v, buf, sizeof buf),
                FROM(kw[D_INIT], -1));
  if (kw[D_SEED] != NULL) {
    if ((st = ovl__build_want_int(B, "data", kw[D_SEED], &seed)) != OVL_OK)
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
    if ((st = ovl__build_want_number(B, "data", kw[D_VALUE], &fill)) != OVL_OK)
      return st;
  }
  if (kw[D_PER_RANK] != NULL) {
    if (init == 1)
      return perr(B, kw[D_PER_RANK]->key.line, kw[D_PER_RANK]->key.col,
                  "per_rank= needs init=uniform or special");
    if ((st = ovl__build_want_bool(B, "data", kw[D_PER_RANK], &per_rank)) !=
        OVL_OK)
      return st;
  }
  sh.dtype = dtype;
  if ((st = ovl__build_declare_var(B, nm, &sh, &idx)) != OVL_OK)
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
