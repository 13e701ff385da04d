/*
 * The reference: a sequential float64 interpreter of a program, all ranks in
 * lock step (DESIGN.md §3). It gives the value every fetched variable must
 * have; ovl_check_result compares a run against it.
 *
 * Semantics: data() variables start with their generated inputs (already
 * rounded to the dtype), every other variable starts as NaN, like the
 * poisoned device buffers. Compute ops and collectives are evaluated in
 * double, and each result is stored in its variable's dtype, as a device
 * stores it: a float32 variable keeps float32 range (an overflow is inf on
 * the device and in the reference alike) and precision, while the
 * arithmetic of one op stays exact-ish in double. Collectives reduce in
 * rank order and round once, at the end.
 * Wait, sync and delay ops order streams and move no data, so they do
 * nothing here. A fetch snapshots the variable on every rank; the last fetch
 * of a variable wins.
 *
 * Speed: the seed program makes ~770 passes over 10M elements per rank, so
 * running it op by op would be bound by memory bandwidth. Every op except
 * c_allgather and c_reducescatter is index-local (element i of its output
 * depends only on element i of its inputs, on every rank), so a run of such
 * ops is evaluated one cache-sized block of indices at a time: all ops on
 * block 0, then all ops on block 1, ... The result is the same, element for
 * element, as evaluating op after op over whole arrays. And a compute op
 * whose output is overwritten before anything reads it (the seed's ten
 * `e = 2 * d` in a row) is skipped: it cannot change any fetched value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Elements per block: big enough to amortise the per-op dispatch, small
 * enough that the arrays one op touches on every rank stay in L1 (measured
 * on the seed program: 1024 beats 512 and 2048). */
#define REF_BLOCK 1024

struct ovl_reference_s {
  int nranks;
  size_t nfetch;
  /* [rank * nfetch + i]: the snapshot of fetched variable i, NULL if it was
   * never fetched. */
  double **fetched;
};

/* The interpreter's state during one ovl_reference_compute. */
typedef struct ref_state {
  const ovl_program *prog;
  int nranks;
  double **val;     /* [rank * nvars + var]; NULL for unused variables */
  int *fetch_slot;  /* var -> index in prog->fetch, or -1 */
  bool *fetched;    /* per fetch index: some fetch op has run */
  bool *dead;       /* per op: a compute op nothing observes */
  ovl_reference *ref;
} ref_state;

static double *var_val(const ref_state *s, int rank, int var) {
  return s->val[(size_t)rank * s->prog->nvars + (size_t)var];
}

static double *snapshot(const ref_state *s, int rank, int slot) {
  return s->ref->fetched[(size_t)rank * s->ref->nfetch + (size_t)slot];
}

/* ------------------------------------------------------------------ */
/* Kernels: one tight loop per function, the switch outside it.        */
/* ------------------------------------------------------------------ */

/* out[j] = EXPR for j in [0, n). Four elements per step with every load
 * before any store: out may be the same array as x or y (never a partial
 * overlap: distinct variables are distinct allocations), and this shape
 * still lets the compiler use vector instructions at -O2. */
#define EW_LOOP(EXPR)                                                         \
  do {                                                                        \
    size_t i = 0, j;                                                          \
    for (; i + 4 <= n; i += 4) {                                              \
      double r0, r1, r2, r3;                                                  \
      j = i;                                                                  \
      r0 = (EXPR);                                                            \
      j = i + 1;                                                              \
      r1 = (EXPR);                                                            \
      j = i + 2;                                                              \
      r2 = (EXPR);                                                            \
      j = i + 3;                                                              \
      r3 = (EXPR);                                                            \
      out[i] = r0;                                                            \
      out[i + 1] = r1;                                                        \
      out[i + 2] = r2;                                                        \
      out[i + 3] = r3;                                                        \
    }                                                                         \
    for (j = i; j < n; j++)                                                   \
      out[j] = (EXPR);                                                        \
  } while (0)

static void ew_apply(ovl__ew fn, double *out, const double *x,
                     const double *y, double scale, double bias, size_t n) {
  switch (fn) {
  case OVL_EW_ASSIGN:
    if (out != x)
      memcpy(out, x, n * sizeof *out);
    break;
  case OVL_EW_ADD:
    EW_LOOP(x[j] + y[j]);
    break;
  case OVL_EW_SUB:
    EW_LOOP(x[j] - y[j]);
    break;
  case OVL_EW_MUL:
    EW_LOOP(x[j] * y[j]);
    break;
  case OVL_EW_SCALE:
    EW_LOOP(scale * x[j] + bias);
    break;
  }
}

/* out[i] = out[i] (op) x[i]. max/min follow fmax/fmin, as NCCL's float
 * reductions do (fmaxf/fminf): a NaN loses to a number. */
static void red_apply(ovl__redop op, double *out, const double *x, size_t n) {
  switch (op) {
  case OVL_RED_SUM:
    EW_LOOP(out[j] + x[j]);
    break;
  case OVL_RED_PROD:
    EW_LOOP(out[j] * x[j]);
    break;
  case OVL_RED_MAX:
    EW_LOOP(fmax(out[j], x[j]));
    break;
  case OVL_RED_MIN:
    EW_LOOP(fmin(out[j], x[j]));
    break;
  }
}

/* ------------------------------------------------------------------ */
/* Checking the program before anything is allocated                  */
/* ------------------------------------------------------------------ */

static const char *prog_name(const ovl_program *prog) {
  return prog->filename != NULL ? prog->filename : "<program>";
}

static ovl_status op_err(const ovl_program *prog, const ovl__op *op,
                         ovl_error *err, const char *what) {
  return ovl__err(err, OVL_EINVAL, "%s:%d:%d: %s: reference: %s",
                  prog_name(prog), op->line, op->col,
                  op->def != NULL ? op->def->name : "?", what);
}

static bool var_ok(const ovl_program *prog, int v) {
  return v >= 0 && (size_t)v < prog->nvars;
}

/* The variable a collective writes: its output, or its input in place. */
static int coll_out(const ovl__op *op) {
  return op->out >= 0 ? op->out : op->in[0];
}

/* Where `v` is in the fetch list, or prog->nfetch if it is not. */
static size_t fetch_index(const ovl_program *prog, int v) {
  size_t i = 0;
  while (i < prog->nfetch && prog->fetch[i] != v)
    i++;
  return i;
}

static ovl_status check_op(const ovl_program *prog, int nranks,
                           const ovl__op *op, ovl_error *err) {
  const ovl__var *vars = prog->vars;
  int64_t nx, no;

  if (op->def == NULL)
    return op_err(prog, op, err, "op without a definition");
  if (op->nin < 0 || op->nin > OVL_MAX_OP_INPUTS)
    return op_err(prog, op, err, "bad input count");
  for (int k = 0; k < op->nin; k++)
    if (!var_ok(prog, op->in[k]))
      return op_err(prog, op, err, "input is not a variable");

  switch (op->def->kind) {
  case OVL_KIND_COMPUTE: {
    int need = (op->def->ew == OVL_EW_ASSIGN || op->def->ew == OVL_EW_SCALE)
                   ? 1
                   : 2;
    if (op->nin != need)
      return op_err(prog, op, err, "wrong number of inputs");
    if (!var_ok(prog, op->out))
      return op_err(prog, op, err, "output is not a variable");
    no = vars[op->out].numel;
    for (int k = 0; k < op->nin; k++)
      if (vars[op->in[k]].numel != no)
        return op_err(prog, op, err, "operands differ in size");
    return OVL_OK;
  }
  case OVL_KIND_COLLECTIVE:
    if (op->nin < 1)
      return op_err(prog, op, err, "collective without an input");
    if (!var_ok(prog, coll_out(op)))
      return op_err(prog, op, err, "output is not a variable");
    nx = vars[op->in[0]].numel;
    no = vars[coll_out(op)].numel;
    switch (op->def->coll) {
    case OVL_COLL_ALLREDUCE:
    case OVL_COLL_BROADCAST:
      if (nx != no)
        return op_err(prog, op, err, "input and output differ in size");
      if (op->def->coll == OVL_COLL_BROADCAST &&
          (op->root < 0 || op->root >= nranks))
        return op_err(prog, op, err, "root is not a rank");
      break;
    case OVL_COLL_ALLGATHER:
      if (no != nx * nranks)
        return op_err(prog, op, err, "output is not nranks x input");
      break;
    case OVL_COLL_REDUCESCATTER:
      if (nx != no * nranks)
        return op_err(prog, op, err, "input is not nranks x output");
      break;
    }
    return OVL_OK;
  case OVL_KIND_FETCH:
    for (int k = 0; k < op->nin; k++)
      if (fetch_index(prog, op->in[k]) == prog->nfetch)
        return op_err(prog, op, err, "fetched variable not in the fetch list");
    return OVL_OK;
  default:
    return OVL_OK;
  }
}

static ovl_status check_program(const ovl_program *prog, int nranks,
                                ovl_error *err) {
  ovl_status st;
  for (size_t v = 0; v < prog->nvars; v++)
    if (prog->vars[v].numel < 0)
      return ovl__err(err, OVL_EINVAL,
                      "%s: reference: variable '%s' has a negative size",
                      prog_name(prog), prog->vars[v].name);
  for (size_t i = 0; i < prog->nfetch; i++) {
    if (!var_ok(prog, prog->fetch[i]))
      return ovl__err(err, OVL_EINVAL,
                      "%s: reference: fetch list entry %zu is not a variable",
                      prog_name(prog), i);
    if (fetch_index(prog, prog->fetch[i]) != i)
      return ovl__err(err, OVL_EINVAL,
                      "%s: reference: variable '%s' is twice in the fetch "
                      "list",
                      prog_name(prog), prog->vars[prog->fetch[i]].name);
  }
  for (size_t i = 0; i < prog->nops; i++) {
    st = check_op(prog, nranks, &prog->ops[i], err);
    if (st != OVL_OK)
      return st;
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

/* Which variables some op or the fetch list touches: only those get
 * memory. */
static void mark_used(const ovl_program *prog, bool *used) {
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    ovl__kind kind = op->def->kind;
    if (kind != OVL_KIND_COMPUTE && kind != OVL_KIND_COLLECTIVE &&
        kind != OVL_KIND_FETCH)
      continue;
    for (int k = 0; k < op->nin; k++)
      used[op->in[k]] = true;
    if (kind == OVL_KIND_COMPUTE)
      used[op->out] = true;
    else if (kind == OVL_KIND_COLLECTIVE)
      used[coll_out(op)] = true;
  }
  for (size_t i = 0; i < prog->nfetch; i++)
    used[prog->fetch[i]] = true;
}

/* Mark the compute ops whose output is overwritten (or never looked at)
 * before any op reads it: skipping them cannot change a fetched value.
 * Liveness, from the last op back; every compute op and collective writes
 * the whole of its output. `live` is scratch, one flag per variable, all
 * false on entry. Collectives are always run. */
static void mark_dead(const ovl_program *prog, bool *live, bool *dead) {
  for (size_t i = prog->nops; i-- > 0;) {
    const ovl__op *op = &prog->ops[i];
    switch (op->def->kind) {
    case OVL_KIND_COMPUTE:
      if (!live[op->out]) {
        dead[i] = true;
        break;
      }
      live[op->out] = false;
      for (int k = 0; k < op->nin; k++)
        live[op->in[k]] = true;
      break;
    case OVL_KIND_COLLECTIVE:
      live[coll_out(op)] = false;
      live[op->in[0]] = true;
      break;
    case OVL_KIND_FETCH:
      for (int k = 0; k < op->nin; k++)
        live[op->in[k]] = true;
      break;
    default:
      break; /* waits and syncs name variables but move no data */
    }
  }
}

/* Bytes of `numel` doubles, or false if that does not fit in a size_t. */
static bool doubles_bytes(int64_t numel, size_t *bytes) {
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / sizeof(double))
    return false;
  *bytes = (size_t)numel * sizeof(double);
  return true;
}

/* Fill a variable's arrays on every rank with its starting values. */
static void init_var(const ref_state *s, int v) {
  const ovl__var *var = &s->prog->vars[v];
  size_t n = (size_t)var->numel;
  double *first = var_val(s, 0, v);
  bool same_on_all = var->init != OVL_INIT_UNIFORM || !var->per_rank;

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
      for (size_t i = 0; i < n; i++)
        p[i] = ovl__var_init_value(var, r, (int64_t)i);
    }
  }
}

static void state_free(ref_state *s) {
  if (s->val != NULL) {
    size_t count = (size_t)s->nranks * s->prog->nvars;
    for (size_t i = 0; i < count; i++)
      free(s->val[i]);
  }
  free(s->val);
  free(s->fetch_slot);
  free(s->fetched);
  free(s->dead);
}

static ovl_status nomem(const ref_state *s, ovl_error *err, int v) {
  const ovl__var *var = &s->prog->vars[v];
  return ovl__err(err, OVL_ENOMEM,
                  "%s: reference: out of memory for variable '%s' (%lld "
                  "elements x %d ranks as float64)",
                  prog_name(s->prog), var->name, (long long)var->numel,
                  s->nranks);
}

static ovl_status state_init(ref_state *s, ovl_error *err) {
  const ovl_program *prog = s->prog;
  size_t nvars = prog->nvars, nfetch = prog->nfetch, bytes;
  bool *used;

  s->val = calloc((size_t)s->nranks * nvars + 1, sizeof *s->val);
  s->fetch_slot = malloc((nvars + 1) * sizeof *s->fetch_slot);
  s->fetched = calloc(nfetch + 1, sizeof *s->fetched);
  s->dead = calloc(prog->nops + 1, sizeof *s->dead);
  s->ref->fetched =
      calloc((size_t)s->nranks * nfetch + 1, sizeof *s->ref->fetched);
  used = calloc(nvars + 1, sizeof *used);
  if (s->val == NULL || s->fetch_slot == NULL || s->fetched == NULL ||
      s->dead == NULL || s->ref->fetched == NULL || used == NULL) {
    free(used);
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  }

  for (size_t v = 0; v < nvars; v++)
    s->fetch_slot[v] = -1;
  for (size_t i = 0; i < nfetch; i++)
    s->fetch_slot[prog->fetch[i]] = (int)i;

  mark_dead(prog, used, s->dead);
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

/* ------------------------------------------------------------------ */
/* Evaluation                                                          */
/* ------------------------------------------------------------------ */

static bool is_local(const ovl__op *op) {
  return op->def->kind != OVL_KIND_COLLECTIVE ||
         op->def->coll == OVL_COLL_ALLREDUCE ||
         op->def->coll == OVL_COLL_BROADCAST;
}

/* Elements [lo, hi) of a variable of `numel` elements: how many there are
 * (0 if the variable is shorter than lo). */
static size_t clip(int64_t numel, size_t lo, size_t hi) {
  size_t n = (size_t)numel;
  if (lo >= n)
    return 0;
  return (hi < n ? hi : n) - lo;
}

/* Store n results in `dtype`: float32 variables hold float32 values. */
static void store_round(ovl_dtype dtype, double *p, size_t n) {
  if (dtype != OVL_DTYPE_FLOAT32)
    return;
  for (size_t i = 0; i < n; i++)
    p[i] = (double)(float)p[i];
}

/* One index-local op on elements [lo, hi) of every rank. */
static void run_local(ref_state *s, const ovl__op *op, size_t lo, size_t hi) {
  const ovl__var *vars = s->prog->vars;
  size_t n;

  switch (op->def->kind) {
  case OVL_KIND_COMPUTE:
    n = clip(vars[op->out].numel, lo, hi);
    if (n == 0)
      return;
    for (int r = 0; r < s->nranks; r++) {
      ew_apply(op->def->ew, var_val(s, r, op->out) + lo,
               var_val(s, r, op->in[0]) + lo,
               op->nin > 1 ? var_val(s, r, op->in[1]) + lo : NULL, op->scale,
               op->bias, n);
      store_round(vars[op->out].dtype, var_val(s, r, op->out) + lo, n);
    }
    return;
  case OVL_KIND_COLLECTIVE: {
    int x = op->in[0], out = coll_out(op);
    n = clip(vars[out].numel, lo, hi);
    if (n == 0)
      return;
    if (op->def->coll == OVL_COLL_ALLREDUCE) {
      /* Reduce into rank 0's output (every rank's input has been read
       * before any other rank's output is written), then copy it out. */
      double *acc = var_val(s, 0, out) + lo;
      const double *x0 = var_val(s, 0, x) + lo;
      if (acc != x0)
        memcpy(acc, x0, n * sizeof *acc);
      for (int q = 1; q < s->nranks; q++)
        red_apply(op->def->redop, acc, var_val(s, q, x) + lo, n);
      store_round(vars[out].dtype, acc, n);
      for (int r = 1; r < s->nranks; r++)
        memcpy(var_val(s, r, out) + lo, acc, n * sizeof *acc);
    } else { /* broadcast */
      const double *src = var_val(s, op->root, x) + lo;
      for (int r = 0; r < s->nranks; r++) {
        double *dst = var_val(s, r, out) + lo;
        if (dst != src)
          memcpy(dst, src, n * sizeof *dst);
      }
    }
    return;
  }
  case OVL_KIND_FETCH:
    for (int k = 0; k < op->nin; k++) {
      int v = op->in[k], slot = s->fetch_slot[v];
      n = clip(vars[v].numel, lo, hi);
      s->fetched[slot] = true;
      for (int r = 0; r < s->nranks && n > 0; r++)
        memcpy(snapshot(s, r, slot) + lo, var_val(s, r, v) + lo,
               n * sizeof(double));
    }
    return;
  default:
    return; /* waits, syncs and delays move no data */
  }
}

/* c_allgather or c_reducescatter over whole arrays. */
static void run_gather_scatter(ref_state *s, const ovl__op *op) {
  int x = op->in[0], out = coll_out(op);

  if (op->def->coll == OVL_COLL_ALLGATHER) {
    size_t n = (size_t)s->prog->vars[x].numel;
    for (int r = 0; r < s->nranks; r++)
      for (int q = 0; q < s->nranks; q++) {
        double *dst = var_val(s, r, out) + (size_t)q * n;
        const double *src = var_val(s, q, x);
        if (dst != src)
          memcpy(dst, src, n * sizeof *dst);
      }
    return;
  }
  /* reducescatter: out_r[i] = reduce over q, in rank order, of
   * x_q[r * m + i]. Output and input are distinct variables unless there
   * is one rank, where this is a copy onto itself. */
  size_t m = (size_t)s->prog->vars[out].numel;
  for (int r = 0; r < s->nranks; r++) {
    double *acc = var_val(s, r, out);
    const double *x0 = var_val(s, 0, x) + (size_t)r * m;
    if (acc != x0)
      memcpy(acc, x0, m * sizeof *acc);
    for (int q = 1; q < s->nranks; q++)
      red_apply(op->def->redop, acc, var_val(s, q, x) + (size_t)r * m, m);
    store_round(s->prog->vars[out].dtype, acc, m);
  }
}

/* Largest variable any op of [first, last) touches. */
static size_t segment_extent(const ref_state *s, size_t first, size_t last) {
  size_t extent = 0;
  for (size_t i = first; i < last; i++) {
    const ovl__op *op = &s->prog->ops[i];
    for (int k = 0; k < op->nin; k++)
      if ((size_t)s->prog->vars[op->in[k]].numel > extent)
        extent = (size_t)s->prog->vars[op->in[k]].numel;
    if (op->out >= 0 && (size_t)s->prog->vars[op->out].numel > extent)
      extent = (size_t)s->prog->vars[op->out].numel;
  }
  return extent;
}

static void run_program(ref_state *s) {
  const ovl_program *prog = s->prog;
  size_t first = 0;

  while (first < prog->nops) {
    size_t last = first;
    while (last < prog->nops && is_local(&prog->ops[last]))
      last++;
    size_t extent = segment_extent(s, first, last);
    for (size_t lo = 0; lo < extent; lo += REF_BLOCK) {
      size_t hi = lo + REF_BLOCK < extent ? lo + REF_BLOCK : extent;
      for (size_t i = first; i < last; i++)
        if (!s->dead[i])
          run_local(s, &prog->ops[i], lo, hi);
    }
    /* A fetch of only empty variables still counts as a fetch. */
    if (extent == 0)
      for (size_t i = first; i < last; i++)
        run_local(s, &prog->ops[i], 0, 0);
    if (last < prog->nops)
      run_gather_scatter(s, &prog->ops[last++]);
    first = last;
  }
}

/* ------------------------------------------------------------------ */
/* Public API                                                          */
/* ------------------------------------------------------------------ */

void ovl_reference_free(ovl_reference *ref) {
  if (ref == NULL)
    return;
  if (ref->fetched != NULL)
    for (size_t i = 0; i < (size_t)ref->nranks * ref->nfetch; i++)
      free(ref->fetched[i]);
  free(ref->fetched);
  free(ref);
}

ovl_status ovl_reference_compute(const ovl_program *prog, int nranks,
                                 ovl_reference **out, ovl_error *err) {
  ref_state s = {0};
  ovl_status st;

  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_reference_compute: bad argument");
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_reference_compute: %d ranks (must be 1 to %d)",
                    nranks, OVL_MAX_RANKS);
  st = check_program(prog, nranks, err);
  if (st != OVL_OK)
    return st;

  s.prog = prog;
  s.nranks = nranks;
  s.ref = calloc(1, sizeof *s.ref);
  if (s.ref == NULL)
    return ovl__err(err, OVL_ENOMEM, "%s: reference: out of memory",
                    prog_name(prog));
  s.ref->nranks = nranks;
  s.ref->nfetch = prog->nfetch;

  st = state_init(&s, err);
  if (st == OVL_OK) {
    run_program(&s);
    /* A listed variable that no fetch op reached has no value. */
    for (size_t i = 0; i < prog->nfetch; i++) {
      if (s.fetched[i])
        continue;
      for (int r = 0; r < nranks; r++) {
        free(s.ref->fetched[(size_t)r * prog->nfetch + i]);
        s.ref->fetched[(size_t)r * prog->nfetch + i] = NULL;
      }
    }
  }
  state_free(&s);
  if (st != OVL_OK) {
    ovl_reference_free(s.ref);
    return st;
  }
  *out = s.ref;
  return OVL_OK;
}

const double *ovl_reference_fetched(const ovl_reference *ref, int rank,
                                    size_t i) {
  if (ref == NULL || rank < 0 || rank >= ref->nranks || i >= ref->nfetch)
    return NULL;
  return ref->fetched[(size_t)rank * ref->nfetch + i];
}
