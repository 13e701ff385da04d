/*
 * Backend conformance: every row of the op table (core/optable.c) on every
 * compiled backend, against the reference, with special inputs.
 *
 * For each backend (cpu; cuda when it is compiled in and a GPU is visible),
 * each rank count (1..4 on cpu, 1..min(4, GPUs) on cuda), each dtype
 * (float32, float64, float16, bfloat16) and each mode where the modes
 * differ (async as
 * written, and sync), the suite generates schedule text, parses it with
 * ovl_program_parse, runs 2 iterations on a world of that backend and rank
 * count, and checks every fetched value with ovl_check_result against
 * ovl_reference_compute. Inputs are data(init=special, per_rank=true): NaN,
 * infinities, signed zeros, denormals and the largest finite value mixed
 * with ordinary values.
 *
 * The cases come from the table, so a row added later is covered without
 * touching this file where the suite knows its kind:
 *   - matrix multiply rows (matmul_v2): every transpose, non-square, on
 *     special inputs and on a longer sum of ordinary ones (put_matmul_case);
 *     an element that differs from the reference by more than the dtype's
 *     tolerance passes only within the error bound of a float sum in any
 *     order (matmul_explains), and one whose partial sums may overflow in
 *     some order is counted with the order-dependent reductions;
 *   - compute rows (OVL_ROLE_COMPUTE): out = OP(inputs) three times over
 *     the two inputs in different orders (and x with itself), with scale
 *     and bias where the row takes them;
 *   - collective rows (OVL_RING_COLLECTIVE): out of place on ring 0, and in
 *     place where the output has the input's shape (not alltoall), root =
 *     the last rank (c_reduce_*: the other ranks' outputs stay untouched);
 *     barrier between a compute op that writes and one that reads;
 *   - point-to-point (send_v2 and recv_v2, one case for both): a ring shift
 *     in a group (each rank sends to the next and receives from the one
 *     before; one rank sends to itself), and on 2 ranks or more rank 0
 *     sending to every other rank one by one (ranks=[0]; recv_v2 into an
 *     existing variable on ranks=[1:nranks]) and receiving from every
 *     other rank in a group;
 *   - ops that move no data (the waits, syncs, event ops, delay): a few
 *     fixed schedules in which they order a compute op and a collective
 *     (ordering_recipes[]).
 * Each schedule is also checked race-free, and free of mismatches and
 * deadlocks between ranks.
 * Every case is counted for every row that occurs in the program that ran,
 * and the suite fails when a row has no case on a backend it ran on.
 *
 * Exact where the math is exact: a case is checked with tolerance 0 when
 * every op in it is exact on that backend (op_exact), else with rtol 1e-12,
 * atol 1e-300 (float64) or the dtype's default tolerance (float32 rtol
 * 1e-5, atol 1e-6; float16 2e-3, 1e-5; bfloat16 1.6e-2, 1e-5). The
 * 16-bit dtypes compute every op in float and round once, which gives
 * the reference's value (its double rounded once) for every compute op
 * and for a reduction of 2 ranks (one rounding of a + b), on cpu and on
 * NCCL alike. The check
 * itself lets a NaN match only a NaN and an infinity only the same
 * infinity, whatever the tolerance. It cannot tell -0 from +0, so an exact
 * case must also give the reference's zeros, sign included, where IEEE 754
 * says which zero an op gives (zero_sign_defined).
 *
 * Order: a sum, product or average over 3 ranks or more rounds at every
 * step of its fold, in an order the backend picks (the cpu backend: rank
 * order; NCCL: its ring or tree); where a partial result overflows or
 * underflows, different orders give different values (-max + -max + max:
 * -inf or -max), and no reference can say which the device must give.
 * Such an element (order_dependent: the folds in every order of the ranks,
 * rounded in the dtype at each step, do not all agree) does not fail a
 * case when it differs from the reference; the suite counts these and
 * prints the count. In the 16-bit dtypes sums of ordinary values round
 * too: there an element also passes when every order folds to one value
 * that the backend gave, other than the reference's single rounding.
 * Every other element must match.
 *
 * The cuda part runs in this process, after the cpu part; CUDA is never
 * initialised here before that: the GPUs are counted in a forked child.
 * Check runs the tests without forking (CK_NOFORK), so that the counts
 * reach the summary line.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "check/check.h"

#define MAX_RANKS 4
/* Dim 0 is divisible by every rank count 1..4 (c_reducescatter). */
#define DIM0 12
#define DIM1 25
#define ITERS 2
/* Mismatch lines printed per backend at most (the count is always
 * printed). */
#define MAX_DETAIL 40

/* ------------------------------------------------------------------ */
/* Ordering recipes: schedules for the ops that move no data           */
/* ------------------------------------------------------------------ */

/* Each body follows two inputs x and y (the suite declares them) and
 * orders a compute op on calc with a collective on ring 0's comm stream,
 * both ways: the collective reads what calc wrote, and calc then reads
 * what the collective wrote. A missing or broken ordering op gives wrong
 * numbers (the delays make sure of it) or a race. */
typedef struct recipe {
  const char *name;
  const char *body;
} recipe;

static const recipe ordering_recipes[] = {
    {"paddle_waits",
     "a = elementwise_mul(x, y)\n"
     "c_wait_compute(a, ring_id=0)\n"
     "c_allreduce_sum(a, ring_id=0)\n"
     "c_wait_comm(a, ring_id=0)\n"
     "b = elementwise_add(a, y)\n"
     "fetch(a, b)\n"},
    {"host_syncs",
     "a = elementwise_mul(x, y)\n"
     "c_sync_calc_stream(a)\n"
     "c_allreduce_sum(a, ring_id=0)\n"
     "c_sync_comm_stream(a, ring_id=0)\n"
     "b = elementwise_add(a, y)\n"
     "fetch(a, b)\n"},
    {"named_events",
     "a = elementwise_mul(x, y)\n"
     "event_record(a, event=computed, stream=calc)\n"
     "stream_wait_event(a, event=computed, stream=comm, ring_id=0)\n"
     "c_allreduce_sum(a, ring_id=0)\n"
     "event_record(a, event=reduced, stream=comm, ring_id=0)\n"
     "stream_wait_event(a, event=reduced, stream=calc)\n"
     "b = elementwise_add(a, y)\n"
     "fetch(a, b)\n"},
    {"stream_syncs",
     "a = elementwise_mul(x, y)\n"
     "stream_sync(a, stream=calc)\n"
     "c_allreduce_sum(a, ring_id=0)\n"
     "stream_sync(a, stream=comm, ring_id=0)\n"
     "b = elementwise_add(a, y)\n"
     "fetch(a, b)\n"},
    /* The delays hold back the stream that must be waited for: without
     * the c_wait_compute the collective would read `a` before it is
     * written, without the c_wait_comm the add would read it before the
     * collective has written it. */
    {"delayed_waits",
     "delay(us=300, stream=calc)\n"
     "a = elementwise_mul(x, y)\n"
     "c_wait_compute(a, ring_id=0)\n"
     "delay(us=300, stream=comm, ring_id=0)\n"
     "c_allreduce_sum(a, ring_id=0)\n"
     "c_wait_comm(a, ring_id=0)\n"
     "b = elementwise_add(a, y)\n"
     "fetch(a, b)\n"},
};
#define NRECIPES (sizeof ordering_recipes / sizeof ordering_recipes[0])

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

typedef struct text {
  char buf[4096];
  size_t len;
} text;

static void tput(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tput(text *t, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
  va_end(ap);
  ck_assert_msg(n >= 0 && (size_t)n < sizeof t->buf - t->len,
                "schedule text too long");
  t->len += (size_t)n;
}

/* Seeds from the row's (or recipe's) name, so that a row added to the
 * table does not change the inputs of the others. */
static unsigned name_seed(const char *name) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const char *p = name; *p != '\0'; p++)
    h = (h ^ (unsigned char)*p) * 16777619u;
  return h % 1000000u;
}

/* A recipe's body. The recipes test ordering, not rounding: in the 16-bit
 * dtypes their collective is c_allreduce_max instead of the sum, since a
 * sum of 3 ranks or more of the products before it rounds at each step
 * of an order the backend picks (the reference rounds once), and where
 * the products cancel that differs beyond any tolerance relative to the
 * result. (The sums themselves are checked in the collective rows' cases,
 * on the inputs, where the folds can be reproduced.) */
static void put_recipe(text *t, const char *body, ovl_dtype dtype) {
  const char *sum = "c_allreduce_sum", *p;
  if (dtype != OVL_DTYPE_FLOAT16 && dtype != OVL_DTYPE_BFLOAT16) {
    tput(t, "%s", body);
    return;
  }
  while ((p = strstr(body, sum)) != NULL) {
    tput(t, "%.*sc_allreduce_max", (int)(p - body), body);
    body = p + strlen(sum);
  }
  tput(t, "%s", body);
}

/* The two inputs every schedule starts from. */
static void put_inputs(text *t, ovl_dtype dtype, unsigned seed) {
  for (int k = 0; k < 2; k++)
    tput(t,
         "%c = data(shape=[%d, %d], dtype=%s, init=special, seed=%u, "
         "per_rank=true)\n",
         "xy"[k], DIM0, DIM1, ovl_dtype_name(dtype), seed + (unsigned)k);
}

/* Compute rows: out = OP(args) for three choices of arguments: x y x y...,
 * y x y x..., x x x x...; with scale and bias where the row takes them
 * (one rounding, a multiply by 0, and a negative zero bias). */
static void put_compute_case(text *t, const ovl__opdef *def) {
  static const char *const attr_sets[3] = {"scale=-0.3, bias=1.7",
                                           "scale=0, bias=0",
                                           "scale=2.5, bias=-0.0"};
  for (int v = 0; v < 3; v++) {
    tput(t, "o%d = %s(", v, def->name);
    for (int k = 0; k < def->min_in; k++) {
      int which = v == 2 ? 0 : (k + v) % 2;
      tput(t, "%s%c", k > 0 ? ", " : "", "xy"[which]);
    }
    if (def->attrs & OVL_ATTR_SCALE)
      tput(t, "%s%s", def->min_in > 0 ? ", " : "", attr_sets[v]);
    else if (def->attrs & OVL_ATTR_BIAS)
      tput(t, "%sbias=%s", def->min_in > 0 ? ", " : "",
           v == 0 ? "1.7" : v == 1 ? "0" : "-0.0");
    tput(t, ")\n");
  }
  tput(t, "fetch(o0, o1, o2)\n");
}

/* Matrix multiply rows (ovl__opdef.kernel OVL_KERNEL_MATMUL): every
 * transpose on non-square special inputs (K = 5 and 12: some results
 * finite, some NaN or infinite), on calc and on a user stream, and a
 * longer sum (K = 40) of ordinary values. */
static void put_matmul_case(text *t, const ovl__opdef *def, ovl_dtype dtype,
                            unsigned seed) {
  const char *dt = ovl_dtype_name(dtype);
  tput(t, "a = data(shape=[%d, 5], dtype=%s, init=special, seed=%u, "
          "per_rank=true)\n", DIM0, dt, seed);
  tput(t, "b = data(shape=[5, 9], dtype=%s, init=special, seed=%u, "
          "per_rank=true)\n", dt, seed + 1);
  tput(t, "c = data(shape=[9, 5], dtype=%s, init=special, seed=%u, "
          "per_rank=true)\n", dt, seed + 2);
  tput(t, "u = data(shape=[%d, 40], dtype=%s, init=uniform, seed=%u, "
          "per_rank=true)\n", DIM0, dt, seed + 3);
  tput(t, "w = data(shape=[9, 40], dtype=%s, init=uniform, seed=%u, "
          "per_rank=true)\n", dt, seed + 4);
  tput(t, "o0 = %s(a, b)\n", def->name);
  tput(t, "o1 = %s(b, a, trans_x=true, trans_y=true)\n", def->name);
  tput(t, "o2 = %s(a, c, trans_y=true, stream=side)\n", def->name);
  tput(t, "event_record(o2, event=mm, stream=side)\n");
  tput(t, "stream_wait_event(o2, event=mm, stream=calc)\n");
  tput(t, "o3 = %s(a, a, trans_x=true)\n", def->name);
  tput(t, "o4 = %s(u, w, trans_y=true)\n", def->name);
  tput(t, "fetch(o0, o1, o2, o3, o4)\n");
}

/* Collective rows: out of place from x, in place on y where the output
 * has its input's shape; fetched after a c_wait_comm. */
static void put_collective_case(text *t, const ovl__opdef *def, int nranks,
                                ovl_dtype dtype) {
  char root[32] = "";
  ovl__shape in = {.dtype = dtype, .ndim = 2, .dims = {DIM0, DIM1}}, out;
  const char *names[1] = {"x"};
  char msg[256];
  bool inplace;

  if (def->attrs & OVL_ATTR_ROOT)
    snprintf(root, sizeof root, ", root=%d", nranks - 1);
  ck_assert_msg(def->shape(def, NULL, &in, names, 1, nranks, &out, msg,
                           sizeof msg) == NULL,
                "%s: %s", def->name, msg);
  /* alltoall's output must not be its input. */
  inplace = ovl__shape_dims_eq(&in, &out) && def->coll != OVL_COLL_ALLTOALL;
  tput(t, "o = %s(x, ring_id=0%s)\n", def->name, root);
  if (inplace)
    tput(t, "%s(y, ring_id=0%s)\n", def->name, root);
  tput(t, "c_wait_comm(o%s, ring_id=0)\n", inplace ? ", y" : "");
  tput(t, "fetch(o%s)\n", inplace ? ", y" : "");
}

/* barrier: orders nothing on the device that calc does not order
 * already; its inputs only name dependencies. */
static void put_barrier_case(text *t, const ovl__opdef *def) {
  tput(t, "a = elementwise_mul(x, y)\n");
  tput(t, "%s(a, x, ring_id=0)\n", def->name);
  tput(t, "b = elementwise_add(a, y)\n");
  tput(t, "%s(ring_id=0)\n", def->name);
  tput(t, "fetch(a, b)\n");
}

/* Point-to-point, case `which` (0: the ring shift in a group; 1: rank 0 to
 * every other rank and back, 2 ranks or more). Returns false where the
 * case does not exist for `nranks`. */
static bool put_p2p_case(text *t, int which, int nranks, ovl_dtype dtype) {
  const char *dt = ovl_dtype_name(dtype);
  if (which == 0) {
    /* o = x of the rank before; on one rank, the rank's own x. */
    tput(t, "group {\n"
            "  send_v2(x, peer=(rank + 1) %% nranks, ring_id=0)\n"
            "  o = recv_v2(peer=(rank - 1) %% nranks, out_shape=[%d, %d], "
            "dtype=%s, ring_id=0)\n"
            "}\n",
         DIM0, DIM1, dt);
    tput(t, "c_wait_comm(o, ring_id=0)\n");
    tput(t, "fetch(o)\n");
    return true;
  }
  if (nranks < 2)
    return false;
  /* Out: one send at a time to each rank (rendezvous, no group); y on the
   * other ranks becomes rank 0's x, rank 0's y stays its input. Back: every
   * other rank sends x to rank 0, which receives them in a group (b<k> is
   * rank k's x on rank 0, NaN elsewhere: never written). */
  for (int k = 1; k < nranks; k++)
    tput(t, "send_v2(x, peer=%d, ring_id=0, ranks=[0])\n", k);
  tput(t, "y = recv_v2(peer=0, out_shape=[%d, %d], dtype=%s, ring_id=0, "
          "ranks=[1:nranks])\n",
       DIM0, DIM1, dt);
  tput(t, "send_v2(x, peer=0, ring_id=0, ranks=[1:nranks])\n");
  tput(t, "group {\n");
  for (int k = 1; k < nranks; k++)
    tput(t, "  b%d = recv_v2(peer=%d, out_shape=[%d, %d], dtype=%s, "
            "ring_id=0, ranks=[0])\n",
         k, k, DIM0, DIM1, dt);
  tput(t, "}\n");
  tput(t, "c_wait_comm(y, ring_id=0)\n");
  tput(t, "fetch(y");
  for (int k = 1; k < nranks; k++)
    tput(t, ", b%d", k);
  tput(t, ")\n");
  return true;
}

/* ------------------------------------------------------------------ */
/* Exactness                                                           */
/* ------------------------------------------------------------------ */

/* Elementwise functions whose result the reference reproduces exactly:
 * each is exact or one IEEE rounding (core/elemfn.h), and the reference's
 * double evaluation rounded to float32 gives the same float (for + - * /
 * double rounding is innocuous, 53 >= 2 * 24 + 2; for scale's fma it is
 * because s * x + b is exact in double for these inputs: x has 8
 * significant bits, or is a special value for which b or s * x alone
 * decides the float). A function added later is checked with the
 * tolerance until it is listed here. */
static bool ew_exact(ovl__ew fn) {
  switch (fn) {
  case OVL_EW_ASSIGN:
  case OVL_EW_ADD:
  case OVL_EW_SUB:
  case OVL_EW_MUL:
  case OVL_EW_DIV:
  case OVL_EW_MAX:
  case OVL_EW_SCALE:
    return true;
  default:
    return false;
  }
}

static bool is_16bit(ovl_dtype dt) {
  return dt == OVL_DTYPE_FLOAT16 || dt == OVL_DTYPE_BFLOAT16;
}

/* Whether op `def` on `dtype` values of `nranks` ranks gives exactly the
 * reference's value on backend `be`. Collectives that only move data are
 * exact, and so are max and min (fmax/fmin, in any order). Sums, products
 * and averages over 2 ranks or more: the cpu backend folds in rank order,
 * like the reference, in the dtype: float64 is the reference's own
 * arithmetic; float32 rounds at each step where the reference rounds once
 * at the end, which is the same float for one step (2 ranks: sum, prod),
 * not for more, nor for avg's division after a rounded sum. NCCL reduces
 * in its own order, and its avg multiplies every input by 1/nranks before
 * summing. */
static bool op_exact(const char *be, const ovl__opdef *def, ovl_dtype dtype,
                     int nranks) {
  if (def->kernel == OVL_KERNEL_MATMUL)
    return false; /* sums in float, in the backend's order */
  if (def->roles & OVL_ROLE_COMPUTE)
    return ew_exact(def->ew);
  if (!(def->ring_use & OVL_RING_COLLECTIVE) || def->p2p != OVL_P2P_NONE)
    return true; /* moves no data (fetch copies), or copies it (p2p) */
  if (!ovl__coll_has_redop(def->coll) || def->redop == OVL_RED_MAX ||
      def->redop == OVL_RED_MIN || nranks == 1)
    return true;
  if (strcmp(be, "cpu") == 0)
    return dtype == OVL_DTYPE_FLOAT64 ||
           (nranks == 2 &&
            (def->redop == OVL_RED_SUM || def->redop == OVL_RED_PROD));
  /* NCCL on 2 ranks: one step, a + b (b + a is the same), rounded once;
   * checked so for the 16-bit dtypes, whose sums round (issue 17: a
   * bfloat16 allreduce of two GPUs is the reference's bit for bit). */
  return nranks == 2 && is_16bit(dtype) &&
         (def->redop == OVL_RED_SUM || def->redop == OVL_RED_PROD);
}

static bool program_exact(const char *be, const ovl_program *prog,
                          ovl_dtype dtype, int nranks) {
  for (size_t i = 0; i < prog->nops; i++)
    if (!op_exact(be, prog->ops[i].def, dtype, nranks))
      return false;
  return true;
}

/* Whether IEEE 754 says which zero every op of `prog` gives: not for
 * fmax and fmin (maxNum, minNum), which may return either zero of
 * fmax(-0, +0). Where it does, an exact case must also give the
 * reference's zeros, sign included (the numeric check cannot tell -0 from
 * +0). */
static bool zero_sign_defined(const ovl__opdef *def) {
  if (def->roles & OVL_ROLE_COMPUTE)
    return def->ew != OVL_EW_MAX;
  if ((def->ring_use & OVL_RING_COLLECTIVE) && def->p2p == OVL_P2P_NONE)
    return !ovl__coll_has_redop(def->coll) ||
           (def->redop != OVL_RED_MAX && def->redop != OVL_RED_MIN);
  return true;
}

static bool zero_signs_defined(const ovl_program *prog) {
  for (size_t i = 0; i < prog->nops; i++)
    if (!zero_sign_defined(prog->ops[i].def))
      return false;
  return true;
}

/* Whether the async and sync forms differ: some op is a collective or an
 * async-only ordering op. */
static bool modes_differ(const ovl_program *prog) {
  for (size_t i = 0; i < prog->nops; i++)
    if (prog->ops[i].def->roles & (OVL_ROLE_COMM | OVL_ROLE_ASYNC_ORDER))
      return true;
  return false;
}

/* ------------------------------------------------------------------ */
/* One backend                                                         */
/* ------------------------------------------------------------------ */

typedef struct backend_state {
  const char *name;
  int maxranks;
  bool ran;
  int64_t *row_cases; /* per row of ovl__optable */
  int64_t cases, failed, details;
  int64_t order_skipped; /* elements not compared: order_dependent */
  double seconds;
} backend_state;

static size_t nrows;
static backend_state cpu_state = {.name = "cpu", .maxranks = MAX_RANKS};
static backend_state cuda_state = {.name = "cuda"};
/* Why the cuda part did not run (empty: it ran). */
static char cuda_skip[128];

/* A case counts once for every row that occurs in the program it ran. */
static void count_rows(backend_state *bs, const ovl_program *prog) {
  for (size_t r = 0; r < nrows; r++)
    for (size_t i = 0; i < prog->nops; i++)
      if (prog->ops[i].def == &ovl__optable[r]) {
        bs->row_cases[r]++;
        break;
      }
}

/* The index of the input an output element came from (allgather,
 * alltoall, recv_v2: on rank *src_rank; reducescatter: on every rank; else
 * the same index). */
static int64_t source_index(const ovl_program *prog, int fetch_var,
                            int rank, int64_t i, int *src_rank) {
  *src_rank = -1;
  for (size_t k = prog->nops; k-- > 0;) {
    const ovl__op *op = &prog->ops[k];
    if (!op->def->writes || op->out != fetch_var)
      continue;
    if (!(op->def->ring_use & OVL_RING_COLLECTIVE))
      break;
    if (op->def->p2p == OVL_P2P_RECV) {
      if (ovl__op_on_rank(op, rank))
        *src_rank = ovl__op_peer(prog, op, rank);
      return i;
    }
    int64_t n_in = prog->vars[op->in[0]].numel;
    int64_t n_out = prog->vars[op->out].numel;
    if (op->def->coll == OVL_COLL_ALLGATHER) {
      *src_rank = (int)(i / n_in);
      return i % n_in;
    }
    if (op->def->coll == OVL_COLL_REDUCESCATTER)
      return (int64_t)rank * n_out + i;
    if (op->def->coll == OVL_COLL_ALLTOALL) {
      int64_t part = n_in / prog->nranks;
      *src_rank = (int)(i / part);
      return (int64_t)rank * part + i % part;
    }
    break;
  }
  return i;
}

/* One line per (rank, variable) that differs, with the inputs at the
 * element the first difference came from. */
static void print_mismatches(backend_state *bs, const char *label,
                             const ovl_program *prog, const ovl_check *chk) {
  for (size_t m = 0; m < chk->nmismatch; m++) {
    const ovl_mismatch *mm = &chk->mismatch[m];
    int src_rank;
    int64_t src;
    if (bs->details++ >= MAX_DETAIL)
      return;
    printf("  MISMATCH %s: rank %d %s: %lld of %lld elements; first [%lld]: "
           "got %.9g (%a), expected %.9g (%a)\n",
           label, mm->rank, mm->var, (long long)mm->count,
           (long long)mm->numel, (long long)mm->first_index, mm->got,
           mm->got, mm->expected, mm->expected);
    src = source_index(prog, prog->fetch[mm->fetch_index], mm->rank,
                       mm->first_index, &src_rank);
    for (size_t v = 0; v < prog->nvars; v++) {
      const ovl__var *var = &prog->vars[v];
      if (var->init == OVL_INIT_NONE)
        continue;
      printf("    %s[%lld] on ranks %d..%d:", var->name, (long long)src,
             src_rank >= 0 ? src_rank : 0,
             src_rank >= 0 ? src_rank : prog->nranks - 1);
      for (int r = 0; r < prog->nranks; r++)
        if (src_rank < 0 || r == src_rank)
          printf(" %.9g", ovl__var_init_value(var, r, src));
      printf("\n");
    }
  }
}

/* Elements that are zeros of the other sign than the reference's; one
 * line per (rank, variable) with some. */
static int64_t zero_sign_mismatches(backend_state *bs, const char *label,
                                    const ovl_program *prog,
                                    const ovl_result *res,
                                    const ovl_reference *ref) {
  int64_t total = 0;
  for (int r = 0; r < prog->nranks; r++)
    for (size_t f = 0; f < prog->nfetch; f++) {
      const double *got = ovl_result_fetched(res, r, f);
      const double *exp = ovl_reference_fetched(ref, r, f);
      int64_t n = prog->vars[prog->fetch[f]].numel, count = 0, first = -1;
      for (int64_t i = 0; i < n; i++)
        if (got[i] == 0 && exp[i] == 0 && signbit(got[i]) != signbit(exp[i])) {
          if (first < 0)
            first = i;
          count++;
        }
      total += count;
      if (count > 0 && bs->details++ < MAX_DETAIL)
        printf("  ZERO SIGN %s: rank %d %s: %lld of %lld elements; first "
               "[%lld]: got %g, expected %g\n",
               label, r, prog->vars[prog->fetch[f]].name, (long long)count,
               (long long)n, (long long)first, got[first], exp[first]);
    }
  return total;
}

/* The collective that last wrote fetched variable `var`, or NULL (also
 * when a compute op or recv_v2 did). */
static const ovl__op *writer(const ovl_program *prog, int var) {
  for (size_t k = prog->nops; k-- > 0;)
    if (prog->ops[k].def->writes && prog->ops[k].out == var)
      return (prog->ops[k].def->ring_use & OVL_RING_COLLECTIVE) &&
                     prog->ops[k].def->p2p == OVL_P2P_NONE
                 ? &prog->ops[k]
                 : NULL;
  return NULL;
}

/* The fold of v[perm[0..n)] as the backend folds (core/elemfn.h): in the
 * dtype, rounded at each step (16-bit: each step computed in float, which
 * rounds to the same value: 24 >= 2 * 11 + 2); avg premultiplies every
 * input. */
static double fold(ovl__redop op, ovl_dtype dt, const double *v,
                   const int *perm, int n) {
  double m = ovl__dtype_round(dt, op == OVL_RED_AVG ? 1.0 / n : 1.0),
         acc = 0;
  for (int k = 0; k < n; k++) {
    double b = ovl__dtype_round(dt, v[perm[k]] * m);
    if (k == 0)
      acc = b;
    else if (op == OVL_RED_MAX)
      acc = fmax(acc, b);
    else if (op == OVL_RED_MIN)
      acc = fmin(acc, b);
    else if (op == OVL_RED_PROD)
      acc = acc * b;
    else
      acc = acc + b;
    acc = ovl__dtype_round(dt, acc);
  }
  return acc;
}

static bool same_value(double a, double b) {
  return (isnan(a) && isnan(b)) || a == b;
}

/* Whether the next permutation of perm[0..n) exists (lexicographic). */
static bool next_perm(int *perm, int n) {
  int i = n - 2, j = n - 1;
  while (i >= 0 && perm[i] >= perm[i + 1])
    i--;
  if (i < 0)
    return false;
  while (perm[j] <= perm[i])
    j--;
  int t = perm[i];
  perm[i] = perm[j];
  perm[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) {
    t = perm[a];
    perm[a] = perm[b];
    perm[b] = t;
  }
  return true;
}

/* Whether element i of fetched variable `var` on `rank`, `got` where the
 * reference says something else, is the result of a reduction whose value
 * depends on how the backend folds (see the file comment): the folds in
 * every order of the ranks, rounded at each step, disagree; or, in the
 * 16-bit dtypes (whose sums of ordinary values round), they all agree on
 * a value other than the reference's single rounding, and `got` is that
 * value. */
static bool order_dependent(const ovl_program *prog, int var, int rank,
                            int64_t i, double got) {
  const ovl__op *op = writer(prog, var);
  double v[MAX_RANKS];
  int perm[MAX_RANKS], n = prog->nranks, src_rank;
  double first;
  if (op == NULL || !ovl__coll_has_redop(op->def->coll) || n < 3)
    return false;
  int64_t src = source_index(prog, var, rank, i, &src_rank);
  for (int r = 0; r < n; r++) {
    v[r] = ovl__var_init_value(&prog->vars[op->in[0]], r, src);
    perm[r] = r;
  }
  first = fold(op->def->redop, prog->vars[var].dtype, v, perm, n);
  while (next_perm(perm, n))
    if (!same_value(fold(op->def->redop, prog->vars[var].dtype, v, perm, n),
                    first))
      return true;
  return is_16bit(prog->vars[var].dtype) && same_value(got, first);
}

/* The matmul that last wrote `var`, or NULL. */
static const ovl__op *matmul_writer(const ovl_program *prog, int var) {
  for (size_t k = prog->nops; k-- > 0;)
    if (prog->ops[k].def->writes && prog->ops[k].out == var)
      return prog->ops[k].def->kernel == OVL_KERNEL_MATMUL ? &prog->ops[k]
                                                           : NULL;
  return NULL;
}

/* What a matmul's element that differs from the reference is. A backend
 * sums the K products in float (float64: double), in an order of its own
 * (cuBLAS: tiles, maybe split K), and rounds once to the dtype; the
 * reference sums in double, in order, and rounds once. Where no partial
 * sum can overflow, the two differ by at most the accumulation's error,
 * (K + 1) u |p|_1 (u the accumulation's unit roundoff, |p|_1 the sum of
 * the products' magnitudes; a product of float32 inputs may round once
 * more), plus K times the smallest normal (products that are subnormal or
 * flushed), plus one rounding of the dtype on each side: within that it
 * is ACCEPTED. Where the finite products' magnitudes add up past the
 * accumulation type's largest value, or the sum lies within that error of
 * the dtype's overflow threshold, the result depends on the order
 * (an infinity or not): ORDER, counted with the reductions'; so is an
 * element with a product of finite inputs that overflows the accumulation
 * type (float64's: an FMA keeps it exact). Anything else is a mismatch (NaN and infinities from NaN, inf * 0 or infinite
 * products are the same in every order, so they must match). */
enum { MM_MISMATCH, MM_ACCEPTED, MM_ORDER };
static int matmul_explains(const ovl_program *prog, int var, int rank,
                           int64_t idx, double got, double exp) {
  const ovl__op *op = matmul_writer(prog, var);
  const ovl__var *o, *x, *y;
  ovl_dtype dt;
  int64_t m, n, k, i, j;
  double abs_sum = 0, u_acc, acc_max, tiny, u_dt, thr, err;
  if (op == NULL)
    return MM_MISMATCH;
  o = &prog->vars[var];
  x = &prog->vars[op->in[0]];
  y = &prog->vars[op->in[1]];
  dt = o->dtype;
  m = o->dims[0];
  n = o->dims[1];
  k = x->dims[op->trans_x ? 0 : 1];
  i = idx / n;
  j = idx % n;
  (void)m;
  for (int64_t t = 0; t < k; t++) {
    double a = ovl__var_init_value(
        x, rank, op->trans_x ? t * x->dims[1] + i : i * k + t);
    double b = ovl__var_init_value(
        y, rank, op->trans_y ? j * k + t : t * n + j);
    double p = a * b;
    /* Finite inputs whose product overflows the accumulation type (only
     * float64's can): a backend that contracts to FMA (cuBLAS) keeps the
     * exact product, so whether the sum overflows, and to which infinity
     * (or NaN, where both signs do), depends on the order and on the
     * contraction. Seen on an H200 (cuBLAS 13.1 DGEMM): -inf where the
     * reference's rounded products give inf - inf = NaN. */
    if (isfinite(a) && isfinite(b) && !isfinite(p))
      return MM_ORDER;
    if (isfinite(p))
      abs_sum += fabs(p);
  }
  if (dt == OVL_DTYPE_FLOAT64) {
    u_acc = 0x1p-53;
    acc_max = DBL_MAX;
    tiny = DBL_MIN;
    u_dt = 0;
    thr = INFINITY;
  } else {
    u_acc = 0x1p-24;
    acc_max = FLT_MAX;
    tiny = FLT_MIN;
    u_dt = dt == OVL_DTYPE_FLOAT32   ? 0x1p-24
           : dt == OVL_DTYPE_FLOAT16 ? 0x1p-11
                                     : 0x1p-8;
    /* The largest finite plus half an ulp: at and beyond, an infinity. */
    thr = dt == OVL_DTYPE_FLOAT32   ? 0x1.ffffffp127
          : dt == OVL_DTYPE_FLOAT16 ? 65520.0
                                    : 0x1.ffp127;
  }
  if (!(abs_sum <= acc_max))
    return MM_ORDER;
  err = (double)(k + 1) * u_acc * abs_sum + (double)k * tiny;
  if (isfinite(exp) && fabs(fabs(exp) - thr) <= 2 * err + u_dt * thr)
    return MM_ORDER;
  if (isnan(got) || isnan(exp) || isinf(got) || isinf(exp))
    return MM_MISMATCH;
  if (fabs(got - exp) <=
      err + u_dt * (fabs(exp) + fabs(got)) + 2 * err * u_dt +
          ovl_dtype_atol(dt))
    return MM_ACCEPTED;
  return MM_MISMATCH;
}

/* The check's mismatches, less the elements whose value depends on the
 * reduction order: their count goes to bs->order_skipped, the rest stay
 * mismatches (chk->mismatched is recounted). */
static void drop_order_dependent(backend_state *bs, const ovl_program *prog,
                                 const ovl_result *res,
                                 const ovl_reference *ref, ovl_check *chk) {
  size_t kept = 0;
  chk->mismatched = 0;
  for (size_t m = 0; m < chk->nmismatch; m++) {
    ovl_mismatch *mm = &chk->mismatch[m];
    int var = prog->fetch[mm->fetch_index];
    const double *got = ovl_result_fetched(res, mm->rank, mm->fetch_index);
    const double *exp = ovl_reference_fetched(ref, mm->rank, mm->fetch_index);
    int64_t count = 0, first = -1;
    for (int64_t i = 0; got != NULL && i < mm->numel; i++) {
      int why;
      if (ovl__element_matches(got[i], exp[i], chk->rtol, chk->atol))
        continue;
      why = got != NULL ? matmul_explains(prog, var, mm->rank, i, got[i],
                                          exp[i])
                        : MM_MISMATCH;
      if (why == MM_ACCEPTED)
        continue;
      if (why == MM_ORDER || order_dependent(prog, var, mm->rank, i, got[i])) {
        bs->order_skipped++;
        continue;
      }
      if (first < 0)
        first = i;
      count++;
    }
    if (got == NULL)
      count = mm->numel, first = 0;
    if (count == 0)
      continue;
    mm->count = count;
    mm->first_index = first;
    mm->got = got != NULL ? got[first] : NAN;
    mm->expected = exp[first];
    chk->mismatch[kept++] = *mm;
    chk->mismatched += count;
  }
  chk->nmismatch = kept;
}

/* Run one schedule text on `world` in every mode where the modes differ;
 * count the cases, and the rows of the programs that ran. */
static void run_text(backend_state *bs, ovl_world *world, const char *what,
                     const text *t, int nranks, ovl_dtype dtype) {
  ovl_parse_opts po = {.size = sizeof po, .nranks = nranks};
  ovl_run_opts ro = {.size = sizeof ro, .iters = ITERS, .warmup = 0};
  ovl_program *prog = NULL;
  ovl_reference *ref = NULL;
  ovl_error err = {0};
  ovl_status st;
  char label[256];

  st = ovl_program_parse(t->buf, t->len, what, &po, &prog, &err);
  if (st == OVL_OK)
    st = ovl_reference_compute(prog, nranks, &ref, &err);
  if (st != OVL_OK) {
    bs->cases++;
    bs->failed++;
    printf("  FAIL %s %s %s %d ranks: %s\n%s", bs->name, what,
           ovl_dtype_name(dtype), nranks, err.msg, t->buf);
    ovl_program_free(prog);
    return;
  }
  bool exact = program_exact(bs->name, prog, dtype, nranks);
  double rtol = exact                          ? 0
                : dtype == OVL_DTYPE_FLOAT64 ? 1e-12
                                             : ovl_dtype_rtol(dtype);
  double atol = exact                          ? 0
                : dtype == OVL_DTYPE_FLOAT64 ? 1e-300
                                             : ovl_dtype_atol(dtype);
  ovl_mode modes[2] = {OVL_MODE_ASYNC, OVL_MODE_SYNC};
  int nmodes = modes_differ(prog) ? 2 : 1;

  for (int m = 0; m < nmodes; m++) {
    ovl_program *p = NULL;
    ovl_races *races = NULL;
    ovl_result *res = NULL;
    ovl_check chk = {0};
    const char *why = NULL;

    snprintf(label, sizeof label, "%s %s %s %d ranks %s (%s)", bs->name,
             what, ovl_dtype_name(dtype), nranks, ovl_mode_name(modes[m]),
             exact ? "exact" : "tolerance");
    bs->cases++;
    st = ovl_program_transform(prog, modes[m], &p, &err);
    if (st == OVL_OK) {
      count_rows(bs, p);
      st = ovl_race_check(p, &races, &err);
    }
    if (st == OVL_OK && ovl_races_count(races) > 0) {
      char *report = NULL;
      ovl_races_format(races, p, 0, &report, NULL);
      snprintf(err.msg, sizeof err.msg, "the schedule races:\n%s",
               report != NULL ? report : "");
      free(report);
      why = err.msg;
    }
    /* Nor may its ranks disagree (the point-to-point cases). */
    if (st == OVL_OK && why == NULL) {
      ovl_mismatches *mm = NULL;
      ovl_deadlocks *dl = NULL;
      st = ovl_mismatch_check(p, &mm, &err);
      if (st == OVL_OK)
        st = ovl_deadlock_check(p, &dl, &err);
      if (st == OVL_OK &&
          (ovl_mismatches_count(mm) > 0 || ovl_deadlocks_count(dl) > 0)) {
        snprintf(err.msg, sizeof err.msg,
                 "the check finds %zu mismatches, %zu deadlocks",
                 ovl_mismatches_count(mm), ovl_deadlocks_count(dl));
        why = err.msg;
      }
      ovl_mismatches_free(mm);
      ovl_deadlocks_free(dl);
    }
    if (st == OVL_OK && why == NULL)
      st = ovl_world_run(world, p, &ro, &res, &err);
    if (st == OVL_OK && why == NULL)
      st = ovl_check_result(prog, res, ref, rtol, atol, &chk, &err);
    if (st == OVL_OK && why == NULL && chk.mismatched > 0)
      drop_order_dependent(bs, prog, res, ref, &chk);
    if (st != OVL_OK)
      why = err.msg;
    if (why != NULL) {
      bs->failed++;
      printf("  FAIL %s: %s\n", label, why);
    } else if (chk.mismatched > 0) {
      bs->failed++;
      print_mismatches(bs, label, prog, &chk);
    } else if (exact && zero_signs_defined(prog) &&
               zero_sign_mismatches(bs, label, prog, res, ref) > 0) {
      bs->failed++;
    }
    ovl_check_release(&chk);
    ovl_result_free(res);
    ovl_races_free(races);
    ovl_program_free(p);
  }
  ovl_reference_free(ref);
  ovl_program_free(prog);
}

static void run_backend(backend_state *bs) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bs->row_cases = calloc(nrows + 1, sizeof *bs->row_cases);
  ck_assert_ptr_nonnull(bs->row_cases);
  bs->ran = true;

  for (int nranks = 1; nranks <= bs->maxranks; nranks++) {
    ovl_world_opts wo = {.size = sizeof wo,
                         .backend = bs->name,
                         .nranks = nranks,
                         .timeout_s = 30};
    ovl_world *world = NULL;
    ovl_error err = {0};
    ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK,
                  "%s world of %d ranks: %s", bs->name, nranks, err.msg);

    for (int d = 0; d < OVL_DTYPE_COUNT; d++) {
      ovl_dtype dtype = (ovl_dtype)d;
      for (const ovl__opdef *def = ovl__optable; def->name != NULL; def++) {
        text t = {.len = 0};
        if (def->p2p == OVL_P2P_SEND) {
          for (int which = 0; which < 2; which++) {
            text tp = {.len = 0};
            put_inputs(&tp, dtype, name_seed(def->name) + (unsigned)which);
            if (put_p2p_case(&tp, which, nranks, dtype))
              run_text(bs, world, which == 0 ? "p2p_ring_shift" : "p2p_star",
                       &tp, nranks, dtype);
          }
          continue;
        }
        if (def->p2p == OVL_P2P_RECV)
          continue; /* in send_v2's cases */
        if (def->kernel == OVL_KERNEL_MATMUL) {
          put_matmul_case(&t, def, dtype, name_seed(def->name));
        } else if (def->roles & OVL_ROLE_COMPUTE) {
          put_inputs(&t, dtype, name_seed(def->name));
          put_compute_case(&t, def);
        } else if ((def->ring_use & OVL_RING_COLLECTIVE) &&
                   def->coll == OVL_COLL_BARRIER) {
          put_inputs(&t, dtype, name_seed(def->name));
          put_barrier_case(&t, def);
        } else if (def->ring_use & OVL_RING_COLLECTIVE) {
          put_inputs(&t, dtype, name_seed(def->name));
          put_collective_case(&t, def, nranks, dtype);
        } else {
          continue; /* covered by the recipes, or by no case at all */
        }
        run_text(bs, world, def->name, &t, nranks, dtype);
      }
      for (size_t k = 0; k < NRECIPES; k++) {
        text t = {.len = 0};
        put_inputs(&t, dtype, name_seed(ordering_recipes[k].name));
        put_recipe(&t, ordering_recipes[k].body, dtype);
        run_text(bs, world, ordering_recipes[k].name, &t, nranks, dtype);
      }
    }
    ovl_world_free(world);
  }

  clock_gettime(CLOCK_MONOTONIC, &t1);
  bs->seconds = (double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  int missing = 0;
  for (size_t r = 0; r < nrows; r++) {
    printf("conformance %-5s %-20s %4lld cases%s\n", bs->name,
           ovl__optable[r].name, (long long)bs->row_cases[r],
           bs->row_cases[r] == 0 ? "  <- NO CASE" : "");
    missing += bs->row_cases[r] == 0;
  }
  printf("conformance %s: %lld cases (1..%d ranks, float32, float64, "
         "float16 and bfloat16), %lld failed, %lld differing elements not "
         "counted (their value depends on how the reduction is folded: the "
         "order, or the rounding at each step), %.2f s\n",
         bs->name, (long long)bs->cases, bs->maxranks,
         (long long)bs->failed, (long long)bs->order_skipped, bs->seconds);
  fflush(stdout);
  ck_assert_msg(missing == 0, "%s: %d op-table rows have no case", bs->name,
                missing);
  ck_assert_msg(bs->failed == 0, "%s: %lld of %lld cases failed", bs->name,
                (long long)bs->failed, (long long)bs->cases);
}

START_TEST(conformance_cpu) { run_backend(&cpu_state); }
END_TEST

START_TEST(conformance_cuda) { run_backend(&cuda_state); }
END_TEST

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

/* GPUs the cuda backend sees, counted in a forked child so that CUDA is
 * never initialised in this process before the cuda part runs; -1 when the
 * backend is not compiled in. */
static int probe_gpus(void) {
  const ovl__backend_ops *cuda = ovl__backend_find("cuda");
  pid_t pid;
  int status;

  if (cuda == NULL)
    return -1;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0)
    return 0;
  if (pid == 0) {
    int n = cuda->device_count();
    _exit(n < 0 ? 0 : n > 255 ? 255 : n);
  }
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return 0;
  return WEXITSTATUS(status);
}

int main(void) {
  Suite *s = suite_create("conformance");
  TCase *tc = tcase_create("backends");
  SRunner *sr;
  int failed, ngpus;

  while (ovl__optable[nrows].name != NULL)
    nrows++;
  ngpus = probe_gpus();
  tcase_add_test(tc, conformance_cpu);
  if (ngpus > 0) {
    cuda_state.maxranks = ngpus < MAX_RANKS ? ngpus : MAX_RANKS;
    tcase_add_test(tc, conformance_cuda);
  } else {
    snprintf(cuda_skip, sizeof cuda_skip, "%s",
             ngpus < 0 ? "not compiled in" : "no GPU visible");
  }
  suite_add_tcase(s, tc);
  sr = srunner_create(s);
  /* The counts live in this process (and CUDA may be initialised in it
   * by the cuda part, after the probe's fork). */
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);

  if (cuda_skip[0] != '\0')
    printf("conformance cuda: skipped (%s)\n", cuda_skip);
  printf("conformance: %zu rows x %lld cases on cpu%s\n", nrows,
         (long long)(cpu_state.cases + cuda_state.cases),
         cuda_state.ran ? ", cuda" : "");
  free(cpu_state.row_cases);
  free(cuda_state.row_cases);
  return failed == 0 ? 0 : 1;
}
