/*
 * What tools/overlap_sweep runs: the collectives' nccl-tests conventions
 * (sizes, busbw factors) and the schedules it generates as text (sweep.h).
 * Not part of libovl.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

const char *const placement_names[P__COUNT] = {"calc", "comm", "inplace",
                                               "comm+compute"};

bool has_inplace(coll c) {
  return c == C_ALLREDUCE || c == C_BROADCAST || c == C_REDUCE;
}

/* busbw = algbw * factor (nccl-tests' PERFORMANCE.md): allreduce moves
 * 2(n-1)/n of the buffer through each rank's link, allgather and
 * reducescatter (n-1)/n of the total, broadcast the buffer once. */
double busbw_factor(coll c, int n) {
  switch (c) {
  case C_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case C_ALLGATHER:
  case C_REDUCESCATTER:
  case C_ALLTOALL:
    return (double)(n - 1) / n;
  case C_BROADCAST:
  case C_REDUCE:
  case C_SENDRECV:
  default:
    return 1.0;
  }
}

const char *busbw_formula(coll c) {
  switch (c) {
  case C_ALLREDUCE:
    return "2(n-1)/n";
  case C_ALLGATHER:
  case C_REDUCESCATTER:
  case C_ALLTOALL:
    return "(n-1)/n";
  default:
    return "1";
  }
}

bool row_sizes_for(coll c, uint64_t bytes, size_t esize, int n,
                   row_sizes *rs) {
  uint64_t count = bytes / esize;
  memset(rs, 0, sizeof *rs);
  if (c == C_ALLREDUCE || c == C_BROADCAST || c == C_REDUCE ||
      c == C_SENDRECV) {
    rs->count = rs->nx = rs->ny = count;
  } else if (c == C_ALLTOALL) {
    uint64_t align = 16 / esize;
    uint64_t per = count / (uint64_t)n / align * align;
    rs->count = per;
    rs->nx = rs->ny = per * (uint64_t)n;
    count = per * (uint64_t)n;
  } else {
    uint64_t align = 16 / esize;
    uint64_t per = count / (uint64_t)n / align * align;
    rs->count = per;
    rs->nx = c == C_ALLGATHER ? per : per * (uint64_t)n;
    rs->ny = c == C_ALLGATHER ? per * (uint64_t)n : per;
    count = per * (uint64_t)n;
  }
  rs->size = count * esize;
  return rs->count > 0;
}

/* A growing string. */
typedef struct {
  char *s;
  size_t len, cap;
  bool failed;
} text;

static void tprintf(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tprintf(text *t, const char *fmt, ...) {
  va_list ap;
  int n;
  if (t->failed)
    return;
  for (;;) {
    size_t room = t->cap - t->len;
    va_start(ap, fmt);
    n = vsnprintf(t->s != NULL ? t->s + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap - t->len <= (size_t)n)
      cap *= 2;
    char *s = realloc(t->s, cap);
    if (s == NULL) {
      t->failed = true;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

/* The schedule of one measurement (sweep.h). */
char *gen_schedule(const sweep *s, const row_sizes *rs, uint64_t bytes,
                   placement p, int reps, int kernels, bool fetch) {
  text t = {0};
  const char *dt = ovl_dtype_name(s->o->dtype);
  /* In place, x is the collective's output. */
  const char *out = p == P_INPLACE ? "" : "y = ";
  const char *y = p == P_INPLACE ? "x" : "y";
  char collstr[256], kernstr[96];
  bool gemm = s->o->compute == K_MATMUL;

  if (gemm)
    snprintf(kernstr, sizeof kernstr, "w = matmul_v2(a, b)\n");
  else
    snprintf(kernstr, sizeof kernstr, "w = scale(z, scale=2.0)\n");
  if (reps == 0)
    tprintf(&t, "# overlap_sweep: the compute kernel alone\n");
  else
    tprintf(&t,
            "# overlap_sweep: %s %s %s, %llu B, %d a iteration, %son the "
            "%s stream%s\n",
            coll_names[s->o->coll],
            coll_reduces(s->o->coll) ? s->o->redop : "",
            dt, (unsigned long long)bytes, reps,
            p == P_INPLACE ? "in place, " : "",
            p == P_CALC ? "calc" : "comm",
            p != P_BOTH ? ""
            : gemm      ? ", with w = matmul_v2(a, b) beside it on the calc "
                          "stream"
                        : ", with w = scale(z) beside it on the calc stream");
  if (reps > 0)
    tprintf(&t,
            "x = data(shape=[%llu], dtype=%s, init=uniform, seed=1, "
            "per_rank=true)\n",
            (unsigned long long)rs->nx, dt);
  if (kernels > 0 && gemm)
    /* Uniform in [0, 1): sums of positive terms, no overflow. */
    tprintf(&t,
            "a = data(shape=[%llu, %llu], dtype=%s, init=uniform, seed=2)\n"
            "b = data(shape=[%llu, %llu], dtype=%s, init=uniform, seed=3)\n",
            (unsigned long long)s->matmul_n, (unsigned long long)s->matmul_n,
            dt, (unsigned long long)s->matmul_n,
            (unsigned long long)s->matmul_n, dt);
  else if (kernels > 0)
    tprintf(&t, "z = data(shape=[%llu], dtype=float32, init=fill, "
                "value=1.0)\n",
            (unsigned long long)s->kernel_numel);
  if (coll_has_root(s->o->coll))
    snprintf(collstr, sizeof collstr,
             "%s%s(x, root=%d, ring_id=0, use_calc_stream=%s)\n", out,
             s->op_name, s->o->root, p == P_CALC ? "true" : "false");
  else if (s->o->coll == C_SENDRECV)
    /* nccl-tests' sendrecv: to the next rank, from the previous one. */
    snprintf(collstr, sizeof collstr,
             "group {\n"
             "    send_v2(x, peer=(rank + 1) %% nranks, ring_id=0, "
             "use_calc_stream=%s)\n"
             "    y = recv_v2(peer=(rank - 1) %% nranks, out_shape=[%llu], "
             "dtype=%s, ring_id=0, use_calc_stream=%s)\n"
             "  }\n",
             p == P_CALC ? "true" : "false",
             (unsigned long long)(rs != NULL ? rs->ny : 0), dt,
             p == P_CALC ? "true" : "false");
  else
    snprintf(collstr, sizeof collstr,
             "%s%s(x, ring_id=0, use_calc_stream=%s)\n", out, s->op_name,
             p == P_CALC ? "true" : "false");

  if (kernels == 0) {
    tprintf(&t, "repeat %d {\n  %s}\n", reps, collstr);
  } else if (reps == 0) {
    tprintf(&t, "repeat %d {\n  %s}\n", kernels, kernstr);
  } else {
    /* Merge by position: kernel j at j/kernels, collective i at i/reps;
     * a kernel first on a tie. */
    int i = 0, j = 0;
    while (i < reps || j < kernels) {
      if (j < kernels &&
          (i == reps || (uint64_t)j * (uint64_t)reps <=
                            (uint64_t)i * (uint64_t)kernels)) {
        tprintf(&t, "%s", kernstr);
        j++;
      } else {
        tprintf(&t, "%s", collstr);
        i++;
      }
    }
  }
  if (reps > 0 && p != P_CALC)
    tprintf(&t, "c_wait_comm(%s, ring_id=0)\n", y);
  if (fetch && s->o->coll == C_REDUCE)
    /* Only the root's output is written. */
    tprintf(&t, "fetch(%s, ranks=[%d])\n", y, s->o->root);
  else if (fetch)
    tprintf(&t, "fetch(%s)\n", y);
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  return t.s;
}

/* Collectives per iteration when --reps is not given: about `target`
 * bytes moved per iteration (so that an iteration is long against its
 * launch and barrier costs), from 5 to 200 (as tools/bench/seed.sh did). */
int reps_for(const options *o, bool cpu, uint64_t size) {
  uint64_t target = cpu ? 16ULL << 20 : 2000000000ULL;
  uint64_t r = target / size;
  if (o->reps > 0)
    return o->reps;
  return r < 5 ? 5 : r > 200 ? 200 : (int)r;
}
