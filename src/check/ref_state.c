/*
 * The reference's state (check/reference.h): made for a program and a
 * number of ranks, with every variable an op touches given its starting
 * values (data() inputs generated, the others NaN), the kernels nothing
 * observes marked dead, the sampled rows planned (check/ref_rows.c); and
 * freed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/reference.h"

/* Which variables some data primitive or the fetch list touches: only
 * those get memory. */
static void mark_used(const ovl_program *prog, bool *used) {
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    if (data_prim(prog, i) == NULL)
      continue;
    for (int k = 0; op->def->reads && k < op->nin; k++)
      used[op->in[k]] = true;
    if (op->def->writes && op->out >= 0)
      used[op->out] = true;
  }
  for (size_t i = 0; i < prog->nfetch; i++)
    used[prog->fetch[i]] = true;
}

/* Mark the kernels whose output is overwritten (or never looked at)
 * before any op reads it: skipping them cannot change a fetched value.
 * Liveness, from the last op back, over the ops of `rank` (-1: every op,
 * lock step); every kernel, collective and receive writes the whole of its
 * output (c_reduce_*: on its root only; in lock step it kills nothing).
 * `live` is scratch, one flag per variable, all false on entry.
 * Communication always runs (other ranks take part). */
static void mark_dead(const ovl_program *prog, int rank, bool *live,
                      bool *dead) {
  for (size_t i = prog->nops; i-- > 0;) {
    const ovl__op *op = &prog->ops[i];
    const ovl__prim *p = data_prim(prog, i);
    if (p == NULL || (rank >= 0 && !ovl__op_on_rank(op, rank)))
      continue; /* waits and syncs name variables but move no data */
    if (p->kind == OVL_PRIM_KERNEL && !live[op->out]) {
      dead[i] = true;
      continue;
    }
    if (writes_out(prog, i, rank) && !(rank < 0 && is_reduce(prog, i)))
      live[op->out] = false;
    for (int k = 0; op->def->reads && k < op->nin; k++)
      live[op->in[k]] = true;
  }
}

/* Bytes of `numel` doubles, or false if that does not fit in a size_t. */
static bool doubles_bytes(int64_t numel, size_t *bytes) {
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / sizeof(double))
    return false;
  *bytes = (size_t)numel * sizeof(double);
  return true;
}

/* Elements [lo, hi) of one rank's generated input (a parallel for). */
typedef struct gen_ctx {
  const ovl__var *var;
  int rank;
  double *p;
} gen_ctx;

static void gen_range(void *arg, size_t lo, size_t hi) {
  const gen_ctx *g = arg;
  for (size_t i = lo; i < hi; i++)
    g->p[i] = ovl__var_init_value(g->var, g->rank, (int64_t)i);
}

/* Fill a variable's arrays on every rank with its starting values. */
static void init_var(const ref_state *s, int v) {
  const ovl__var *var = &s->prog->vars[v];
  size_t n = (size_t)var->numel;
  double *first = var_val(s, 0, v);
  bool same_on_all = !var->per_rank || (var->init != OVL_INIT_UNIFORM &&
                                         var->init != OVL_INIT_SPECIAL);

  for (int r = 0; r < s->nranks; r++) {
    double *p = var_val(s, r, v);
    if (r > 0 && same_on_all) {
      memcpy(p, first, n * sizeof *p);
      continue;
    }
    if (var->init == OVL_INIT_NONE) {
      for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    } else if (var->init == OVL_INIT_FILL) {
      double x = ovl__var_init_value(var, r, 0);
      for (size_t i = 0; i < n; i++)
        p[i] = x;
    } else {
      /* A few ns an element: a 8192 x 8192 input takes a second alone. */
      gen_ctx g = {.var = var, .rank = r, .p = p};
      ovl__ref_parallel(n, ovl__ref_threads((double)n), gen_range, &g);
    }
  }
}

void ovl__ref_state_free(ref_state *s) {
  if (s->val != NULL) {
    size_t count = (size_t)s->nranks * s->prog->nvars;
    for (size_t i = 0; i < count; i++)
      free(s->val[i]);
  }
  free(s->val);
  free(s->fetch_slot);
  free(s->fetched);
  free(s->dead);
  free(s->scratch);
  free(s->op_rows);
  for (size_t k = 2; s->sets != NULL && k < s->nsets; k++)
    free(s->sets[k].bits);
  free(s->sets);
}

static ovl_status nomem(const ref_state *s, ovl_error *err, int v) {
  const ovl__var *var = &s->prog->vars[v];
  return ovl__err(err, OVL_ENOMEM,
                  "%s: reference: out of memory for variable '%s' (%lld "
                  "elements x %d ranks as float64)",
                  prog_name(s->prog), var->name, (long long)var->numel,
                  s->nranks);
}

ovl_status ovl__ref_state_init(ref_state *s, int64_t max_rows,
                               ovl_error *err) {
  const ovl_program *prog = s->prog;
  size_t nvars = prog->nvars, nfetch = prog->nfetch, bytes;
  size_t ndead = s->per_rank ? (size_t)s->nranks * prog->nops : prog->nops;
  bool *used;

  s->val = calloc((size_t)s->nranks * nvars + 1, sizeof *s->val);
  s->fetch_slot = malloc((nvars + 1) * sizeof *s->fetch_slot);
  s->fetched = calloc((size_t)s->nranks * nfetch + 1, sizeof *s->fetched);
  s->dead = calloc(ndead + 1, sizeof *s->dead);
  s->scratch = malloc(REF_BLOCK * sizeof *s->scratch);
  s->ref->fetched =
      calloc((size_t)s->nranks * nfetch + 1, sizeof *s->ref->fetched);
  s->ref->rows = calloc(nfetch + 1, sizeof *s->ref->rows);
  s->ref->nrows = calloc(nfetch + 1, sizeof *s->ref->nrows);
  used = calloc(nvars + 1, sizeof *used);
  if (s->val == NULL || s->fetch_slot == NULL || s->fetched == NULL ||
      s->dead == NULL || s->scratch == NULL || s->ref->fetched == NULL ||
      s->ref->rows == NULL || s->ref->nrows == NULL || used == NULL) {
    free(used);
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  }

  if (ovl__ref_plan_rows(s, max_rows, err) != OVL_OK) {
    free(used);
    return OVL_ENOMEM;
  }
  for (size_t v = 0; v < nvars; v++)
    s->fetch_slot[v] = -1;
  for (size_t i = 0; i < nfetch; i++)
    s->fetch_slot[prog->fetch[i]] = (int)i;

  if (!s->per_rank) {
    mark_dead(prog, -1, used, s->dead);
  } else {
    for (int r = 0; r < s->nranks; r++) {
      memset(used, 0, (nvars + 1) * sizeof *used);
      mark_dead(prog, r, used, s->dead + (size_t)r * prog->nops);
    }
  }
  memset(used, 0, (nvars + 1) * sizeof *used);
  mark_used(prog, used);
  for (size_t v = 0; v < nvars; v++) {
    if (!used[v])
      continue;
    for (int r = 0; r < s->nranks; r++) {
      double **p = &s->val[(size_t)r * nvars + v];
      if (!doubles_bytes(prog->vars[v].numel, &bytes) ||
          (*p = malloc(bytes + 1)) == NULL) {
        free(used);
        return nomem(s, err, (int)v);
      }
    }
    init_var(s, (int)v);
  }
  free(used);

  for (size_t i = 0; i < nfetch; i++) {
    int v = prog->fetch[i];
    for (int r = 0; r < s->nranks; r++) {
      double **p = &s->ref->fetched[(size_t)r * nfetch + i];
      if (!doubles_bytes(prog->vars[v].numel, &bytes) ||
          (*p = malloc(bytes + 1)) == NULL)
        return nomem(s, err, v);
    }
  }
  return OVL_OK;
}
