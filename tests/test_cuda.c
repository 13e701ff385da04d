/*
 * Tests of the cuda backend on real GPUs: elementwise kernels against the
 * host, every collective on one GPU and on all of them, the wait-op event
 * semantics (a missing wait really reads stale data), NaN poison, the delay
 * kernel, the sync timeout that turns a stuck collective into an error,
 * the race replay (--replay) of every schedule in schedules/bad/, a
 * float16 and bfloat16 allreduce of two GPUs bit for bit against the
 * reference, matmul_v2 on cuBLAS against the float64 reference (every
 * dtype and transpose, on calc, comm and user streams, and the TF32
 * policy), and graphs (--graph: the case "graph", CK_RUN_CASE=graph runs
 * it alone). Kernels and collectives run in every dtype (float32, float64,
 * float16, bfloat16).
 *
 * Skips (exit 77) where no GPU is visible. CUDA is never initialised in this
 * process: main() counts devices in a forked child, and Check forks every
 * test, so each test initialises CUDA (and NCCL) in a child of its own.
 *
 * The backend is driven directly, as the executor drives it: world_init with
 * the GPUs, world_rings, then one thread per rank doing rank_init, the
 * test's body, rank_fini. Rank threads never call ck_assert (Check's failure
 * path is not meant for other threads): they note their first failure, abort
 * the world so that no other rank waits for them, and the test's own thread
 * asserts after joining them.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "base/half.h"
#include "run/run.h"

static const ovl__backend_ops *const B = &ovl__backend_cuda;

/* Visible GPUs, counted by main() before any test runs. */
static int ngpus;

#define CALC OVL_STREAM_CALC
#define COMM0 OVL_STREAM_COMM(0)
#define COMM1 OVL_STREAM_COMM(1)
#define EV_COMPUTE0 OVL_EVENT_COMPUTE(0)
#define EV_COMM0 OVL_EVENT_COMM(0)

/* The delay that makes a missing wait show: long against the microseconds
 * the host needs to queue the rest of the schedule. */
#define WAIT_DELAY_US 20000.0

static int all_ranks(void) {
  return ngpus < OVL_MAX_RANKS ? ngpus : OVL_MAX_RANKS;
}

/* ------------------------------------------------------------------ */
/* Counting GPUs without initialising CUDA here                        */
/* ------------------------------------------------------------------ */

static int probe_gpus(void) {
  pid_t pid;
  int status;

  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0)
    return 0;
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 0)
      n = 0;
    _exit(n > 255 ? 255 : n);
  }
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return 0;
  return WEXITSTATUS(status);
}

/* ------------------------------------------------------------------ */
/* A world run: one thread per rank                                    */
/* ------------------------------------------------------------------ */

typedef struct world_run world_run;
typedef void (*rank_body)(world_run *w, int rank, ovl__brank *br);

struct world_run {
  ovl__bworld *bw;
  int nranks;
  int stream_rings; /* rings passed to rank_init */
  rank_body body;
  /* A barrier that a failing rank breaks. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int waiting;
  unsigned long generation;
  bool broken;
  char fail[OVL_MAX_RANKS][OVL_ERROR_MSG_MAX + 64];
};

typedef struct rank_arg {
  world_run *w;
  int rank;
} rank_arg;

static void rank_fail(world_run *w, int rank, int line, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void rank_fail(world_run *w, int rank, int line, const char *fmt,
                      ...) {
  va_list ap;
  int n;
  if (w->fail[rank][0] == '\0') {
    n = snprintf(w->fail[rank], sizeof w->fail[rank], "line %d: ", line);
    va_start(ap, fmt);
    vsnprintf(w->fail[rank] + n, sizeof w->fail[rank] - (size_t)n, fmt, ap);
    va_end(ap);
  }
  pthread_mutex_lock(&w->mu);
  w->broken = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  B->world_abort(w->bw);
}

/* All ranks meet; false if some rank failed (the caller gives up). */
static bool rank_barrier(world_run *w) {
  bool ok;
  pthread_mutex_lock(&w->mu);
  if (w->broken) {
    pthread_mutex_unlock(&w->mu);
    return false;
  }
  unsigned long gen = w->generation;
  if (++w->waiting == w->nranks) {
    w->waiting = 0;
    w->generation++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return true;
  }
  while (gen == w->generation && !w->broken)
    pthread_cond_wait(&w->cv, &w->mu);
  ok = gen != w->generation;
  pthread_mutex_unlock(&w->mu);
  return ok;
}

/* In rank bodies (functions returning void, with `w` and `rank` in scope):
 * record the first failure and leave. RK_OK's call passes E as its error. */
#define RK_CHECK(cond, ...)                                                    \
  do {                                                                        \
    if (!(cond)) {                                                            \
      rank_fail(w, rank, __LINE__, __VA_ARGS__);                              \
      return;                                                                 \
    }                                                                         \
  } while (0)
#define RK_OK(call)                                                            \
  do {                                                                        \
    ovl_error e_;                                                             \
    ovl_status s_ = (call);                                                   \
    RK_CHECK(s_ == OVL_OK, "%s: %s: %s", #call, ovl_err_name(s_), e_.msg);    \
  } while (0)
#define E (&e_)
#define RK_BARRIER()                                                           \
  do {                                                                        \
    if (!rank_barrier(w))                                                     \
      return;                                                                 \
  } while (0)

static void *rank_main(void *p) {
  rank_arg *a = p;
  world_run *w = a->w;
  ovl__brank *br = NULL;
  ovl_error err;
  ovl_status st = B->rank_init(w->bw, a->rank, w->stream_rings, &br, &err);
  if (st != OVL_OK) {
    rank_fail(w, a->rank, __LINE__, "rank_init: %s: %s", ovl_err_name(st),
              err.msg);
    return NULL;
  }
  w->body(w, a->rank, br);
  B->rank_fini(br);
  return NULL;
}

#define CK_OK(call)                                                           \
  do {                                                                        \
    ovl_error e_;                                                             \
    ovl_status s_ = (call);                                                   \
    ck_assert_msg(s_ == OVL_OK, "%s: %s: %s", #call, ovl_err_name(s_),       \
                  s_ == OVL_OK ? "" : e_.msg);                                \
  } while (0)

/* Run `body` on nranks rank threads. Rings [0, comm_rings) get
 * communicators (made in two world_rings calls when there are several, to
 * exercise adding rings); every rank gets stream_rings comm streams. */
static void run_world(int nranks, int comm_rings, int stream_rings,
                      double timeout_s, rank_body body) {
  world_run *w = calloc(1, sizeof *w);
  pthread_t th[OVL_MAX_RANKS];
  rank_arg args[OVL_MAX_RANKS];
  char report[8192];
  size_t len = 0;

  ck_assert_ptr_nonnull(w);
  w->nranks = nranks;
  w->stream_rings = stream_rings;
  w->body = body;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  CK_OK(B->world_init(OVL__ONE_PROCESS(nranks), timeout_s, &w->bw, E));
  if (comm_rings > 1)
    CK_OK(B->world_rings(w->bw, 1, 1u, E));
  CK_OK(B->world_rings(w->bw, comm_rings, (1u << comm_rings) - 1, E));
  /* Every test may send and receive on its rings. */
  CK_OK(B->world_p2p(w->bw, (1u << comm_rings) - 1, E));
  for (int r = 0; r < nranks; r++) {
    args[r].w = w;
    args[r].rank = r;
    ck_assert_int_eq(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
  }
  for (int r = 0; r < nranks; r++)
    pthread_join(th[r], NULL);
  B->world_fini(w->bw);

  report[0] = '\0';
  for (int r = 0; r < nranks; r++)
    if (w->fail[r][0] != '\0' && len < sizeof report) {
      int n = snprintf(report + len, sizeof report - len, "\n  rank %d: %s",
                       r, w->fail[r]);
      if (n > 0)
        len += (size_t)n;
    }
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
  ck_assert_msg(len == 0, "%d rank(s) failed:%s", nranks, report);
}

/* ------------------------------------------------------------------ */
/* Host helpers                                                        */
/* ------------------------------------------------------------------ */

static size_t dsize(ovl_dtype dt) { return ovl_dtype_size(dt); }

/* Upload n doubles as dtype `dt` (exactly representable values only;
 * others are rounded to nearest even). */
static ovl_status upload(ovl__brank *br, void *dev, const double *h,
                         size_t n, ovl_dtype dt, ovl_error *err) {
  void *tmp = malloc(n * dsize(dt) + 1);
  ovl_status st;
  if (tmp == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    ovl__dtype_store(dt, tmp, i, h[i]);
  st = B->mem_upload(br, dev, tmp, n * dsize(dt), err);
  free(tmp);
  return st;
}

static ovl_status download(ovl__brank *br, double *h, const void *dev,
                           size_t n, ovl_dtype dt, ovl_error *err) {
  void *tmp = malloc(n * dsize(dt) + 1);
  ovl_status st;
  if (tmp == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  st = B->mem_download(br, tmp, dev, n * dsize(dt), err);
  for (size_t i = 0; st == OVL_OK && i < n; i++)
    h[i] = ovl__dtype_load(dt, tmp, i);
  free(tmp);
  return st;
}

/* Fill device memory with all-ones bytes (NaN), as mem_alloc does. */
static ovl_status poison(ovl__brank *br, void *dev, size_t bytes,
                         ovl_error *err) {
  void *tmp = malloc(bytes + 1);
  ovl_status st;
  if (tmp == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  memset(tmp, 0xFF, bytes);
  st = B->mem_upload(br, dev, tmp, bytes, err);
  free(tmp);
  return st;
}

/* Index of the first element where got != want (NaN never equal), or -1. */
static int64_t first_mismatch(const double *got, const double *want,
                              size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(got[i] == want[i]))
      return (int64_t)i;
  return -1;
}

#define RK_SAME(what, got, want, n)                                            \
  do {                                                                        \
    int64_t at_ = first_mismatch((got), (want), (n));                         \
    RK_CHECK(at_ < 0, "%s: element %lld of %zu is %.17g, expected %.17g",      \
            (what), (long long)at_, (size_t)(n),                              \
            at_ < 0 ? 0.0 : (got)[at_], at_ < 0 ? 0.0 : (want)[at_]);         \
  } while (0)

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Odd multiples of 1/128 in (-16, 16): exact in float32, never zero. */
static double sample(uint64_t seed, size_t i) {
  double v = (double)(int)(mix(seed * 0x100000001b3ull + i) % 2048) / 64.0;
  return v - 16.0 + 1.0 / 128.0;
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

/* The stream op i records its event on, in a record + wait pair. */
static int record_stream(const ovl_program *prog, size_t i) {
  for (size_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++)
    if (prog->prims[p].kind == OVL_PRIM_RECORD && !prog->prims[p].main)
      return prog->prims[p].stream;
  return -1;
}

START_TEST(test_devices) {
  ovl__bworld *bw = NULL;
  ovl_error err;
  struct cudaDeviceProp prop;
  char want[300];

  ck_assert_int_eq(B->device_count(), ngpus);
  ck_assert_int_eq(B->default_ranks(), all_ranks());

  if (ngpus < OVL_MAX_RANKS) {
    ck_assert_int_eq(B->world_init(OVL__ONE_PROCESS(ngpus + 1), 0, &bw, &err), OVL_ENODEV);
    ck_assert_ptr_null(bw);
    ck_assert_msg(strstr(err.msg, "asked for") != NULL &&
                      strstr(err.msg, "visible") != NULL,
                  "%s", err.msg);
  }
  ck_assert_int_eq(B->world_init(OVL__ONE_PROCESS(0), 0, &bw, &err), OVL_EINVAL);
  ck_assert_int_eq(B->world_init(OVL__ONE_PROCESS(1), -1.0, &bw, &err), OVL_EINVAL);

  CK_OK(B->world_init(OVL__ONE_PROCESS(all_ranks()), 0, &bw, E));
  ck_assert_int_eq(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  snprintf(want, sizeof want, " x %s", prop.name);
  ck_assert_msg(strstr(B->world_devices(bw), want) != NULL,
                "devices \"%s\" do not name \"%s\"", B->world_devices(bw),
                prop.name);
  B->world_fini(bw);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

static void poison_body(world_run *w, int rank, ovl__brank *br) {
  const size_t n = 1000003;
  double *h = malloc(n * sizeof *h);
  void *p = NULL;
  RK_CHECK(h != NULL, "out of memory");
  for (int dt = 0; dt < OVL_DTYPE_COUNT; dt++) {
    RK_OK(B->mem_alloc(br, n * dsize((ovl_dtype)dt), &p, E));
    RK_CHECK(p != NULL, "mem_alloc gave NULL");
    RK_OK(download(br, h, p, n, (ovl_dtype)dt, E));
    for (size_t i = 0; i < n; i++)
      RK_CHECK(isnan(h[i]), "%s element %zu of fresh memory is %g, not NaN",
              ovl_dtype_name((ovl_dtype)dt), i, h[i]);
    B->mem_free(br, p);
  }
  RK_OK(B->mem_alloc(br, 0, &p, E));
  RK_CHECK(p != NULL, "mem_alloc(0) gave NULL");
  B->mem_free(br, p);
  free(h);
}

START_TEST(test_poison) { run_world(all_ranks(), 0, 0, 30, poison_body); }
END_TEST

/* ------------------------------------------------------------------ */
/* Elementwise kernels                                                 */
/* ------------------------------------------------------------------ */

static const double EW_SCALE = 0.1, EW_BIAS = 1.0 / 3.0;

/* The host's result for one element, rounded as the device rounds: in the
 * element type, SCALE as one fused multiply-add; float16 and bfloat16 in
 * float (scale and bias converted to the dtype first), rounded once to the
 * dtype (base/half.h). */
static double ew_host(ovl__ew fn, ovl_dtype dt, double x, double y) {
  if (dt == OVL_DTYPE_FLOAT16 || dt == OVL_DTYPE_BFLOAT16) {
    float a = (float)x, b = (float)y, r;
    switch (fn) {
    case OVL_EW_ASSIGN:
      r = a;
      break;
    case OVL_EW_ADD:
      r = a + b;
      break;
    case OVL_EW_SUB:
      r = a - b;
      break;
    case OVL_EW_MUL:
      r = a * b;
      break;
    case OVL_EW_DIV:
      r = a / b;
      break;
    case OVL_EW_MAX:
      r = fmaxf(a, b);
      break;
    case OVL_EW_SCALE:
      r = fmaf((float)ovl__dtype_round(dt, EW_SCALE), a,
               (float)ovl__dtype_round(dt, EW_BIAS));
      break;
    default:
      return NAN;
    }
    return dt == OVL_DTYPE_FLOAT16 ? ovl__f16_to_f32(ovl__f32_to_f16(r))
                                   : ovl__bf16_to_f32(ovl__f32_to_bf16(r));
  }
  if (dt == OVL_DTYPE_FLOAT32) {
    float a = (float)x, b = (float)y;
    switch (fn) {
    case OVL_EW_ASSIGN:
      return a;
    case OVL_EW_ADD:
      return (float)(a + b);
    case OVL_EW_SUB:
      return (float)(a - b);
    case OVL_EW_MUL:
      return (float)(a * b);
    case OVL_EW_DIV:
      return (float)(a / b);
    case OVL_EW_MAX:
      return fmaxf(a, b);
    case OVL_EW_SCALE:
      return fmaf((float)EW_SCALE, a, (float)EW_BIAS);
    default:
      break;
    }
  } else {
    switch (fn) {
    case OVL_EW_ASSIGN:
      return x;
    case OVL_EW_ADD:
      return x + y;
    case OVL_EW_SUB:
      return x - y;
    case OVL_EW_MUL:
      return x * y;
    case OVL_EW_DIV:
      return x / y;
    case OVL_EW_MAX:
      return fmax(x, y);
    case OVL_EW_SCALE:
      return fma(EW_SCALE, x, EW_BIAS);
    default:
      break;
    }
  }
  return NAN;
}

static const char *const EW_NAMES[] = {"assign", "add", "sub", "mul",
                                       "div",    "max", "scale"};

enum {
  V_PLAIN,      /* separate, aligned buffers, calc stream */
  V_OUT_IS_X,   /* out = f(out, y) */
  V_OUT_IS_Y,   /* out = f(x, out) (binary functions only) */
  V_MISALIGNED, /* every pointer one element past a 16-byte boundary */
  V_MIXED,      /* out aligned, x and y one element past (scalar path) */
  V_COMM,       /* like V_PLAIN, on the comm stream of ring 0 */
  V_COUNT
};
static const char *const V_NAMES[] = {"plain",      "out=x", "out=y",
                                      "misaligned", "mixed", "comm stream"};

static void ew_body(world_run *w, int rank, ovl__brank *br) {
  static const size_t sizes[] = {1, 3, 4, 1000003};
  const size_t nmax = 1000003 + 1;
  double *hx = malloc(nmax * sizeof *hx), *hy = malloc(nmax * sizeof *hy);
  double *want = malloc(nmax * sizeof *want),
         *got = malloc(nmax * sizeof *got);
  RK_CHECK(hx && hy && want && got, "out of memory");

  for (int dti = 0; dti < OVL_DTYPE_COUNT; dti++) {
    const ovl_dtype dt = (ovl_dtype)dti;
    const size_t es = dsize(dt);
    void *x, *y, *o;
    RK_OK(B->mem_alloc(br, nmax * es, &x, E));
    RK_OK(B->mem_alloc(br, nmax * es, &y, E));
    RK_OK(B->mem_alloc(br, nmax * es, &o, E));
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      const size_t n = sizes[si];
      /* Values of the dtype (bfloat16 rounds the samples' 11 bits). */
      for (size_t i = 0; i < n + 1; i++) {
        hx[i] = ovl__dtype_round(dt, sample(2 * (uint64_t)rank + 1, i));
        hy[i] = ovl__dtype_round(dt, sample(2 * (uint64_t)rank + 2, i));
      }
      for (int fn = 0; fn < OVL__EW_COUNT; fn++) {
        const bool binary = ovl__ew_arity((ovl__ew)fn) == 2;
        for (int v = 0; v < V_COUNT; v++) {
          char what[128];
          const size_t off = v == V_MISALIGNED || v == V_MIXED ? es : 0;
          const int stream = v == V_COMM ? COMM0 : CALC;
          void *dx = (char *)x + off, *dy = (char *)y + off;
          void *dout = (char *)o + (v == V_MIXED ? 0 : off);
          if (v == V_OUT_IS_Y && !binary)
            continue;
          snprintf(what, sizeof what, "%s %s n=%zu %s", EW_NAMES[fn],
                   ovl_dtype_name(dt), n, V_NAMES[v]);
          RK_OK(upload(br, x, hx, n + 1, dt, E));
          RK_OK(upload(br, y, hy, n + 1, dt, E));
          RK_OK(poison(br, o, nmax * es, E));
          if (v == V_OUT_IS_X)
            dout = dx;
          if (v == V_OUT_IS_Y)
            dout = dy;
          /* The host values the pointers see (offset 1 when misaligned). */
          for (size_t i = 0; i < n; i++)
            want[i] = ew_host((ovl__ew)fn, dt, hx[i + off / es],
                              hy[i + off / es]);
          RK_OK(B->elementwise(br, stream, (ovl__ew)fn, dt, dout, dx,
                              binary ? dy : NULL, EW_SCALE, EW_BIAS, n, E));
          RK_OK(B->stream_sync(br, stream, E));
          RK_OK(download(br, got, dout, n, dt, E));
          RK_SAME(what, got, want, n);
          /* Nothing past the end was written. */
          if (v == V_PLAIN) {
            RK_OK(download(br, got, (char *)o + n * es, 1, dt, E));
            RK_CHECK(isnan(got[0]), "%s: wrote past the end", what);
          }
        }
      }
    }
    B->mem_free(br, x);
    B->mem_free(br, y);
    B->mem_free(br, o);
  }
  /* n == 0 queues nothing and accepts NULL buffers. */
  RK_OK(B->elementwise(br, CALC, OVL_EW_ADD, OVL_DTYPE_FLOAT32, NULL, NULL,
                      NULL, 1.0, 0.0, 0, E));
  free(hx);
  free(hy);
  free(want);
  free(got);
}

START_TEST(test_elementwise) { run_world(all_ranks(), 0, 1, 60, ew_body); }
END_TEST

/* ------------------------------------------------------------------ */
/* Collectives                                                         */
/* ------------------------------------------------------------------ */

/* Inputs whose reductions are exact in every dtype (bfloat16 included:
 * integers up to 256) in any order: small integers for sums, max and
 * min; powers of two for products. */
static double coll_value(ovl__redop op, int rank, size_t i) {
  static const double pow2[] = {1.0, 2.0, 0.5, -1.0, -2.0, 0.25};
  switch (op) {
  case OVL_RED_PROD:
    return pow2[(i + 3 * (size_t)rank) % 6];
  case OVL_RED_MAX:
  case OVL_RED_MIN:
    return (double)(int)((i * 31 + (size_t)rank * 17) % 101) - 50.0;
  case OVL_RED_SUM:
  default:
    return (double)(int)((i * 7 + (size_t)rank * 13) % 61) - 30.0;
  }
}

static double reduce2(ovl__redop op, double a, double b) {
  switch (op) {
  case OVL_RED_PROD:
    return a * b;
  case OVL_RED_MAX:
    return a > b ? a : b;
  case OVL_RED_MIN:
    return a < b ? a : b;
  case OVL_RED_SUM:
  default:
    return a + b;
  }
}


static void coll_body(world_run *w, int rank, ovl__brank *br) {
  static const size_t sizes[] = {1, 1000003};
  const int R = w->nranks;
  const int root = R > 1 ? 1 : 0;
  const size_t nmax = 1000003 * (size_t)R;
  double *h = malloc(nmax * sizeof *h), *want = malloc(nmax * sizeof *want),
         *got = malloc(nmax * sizeof *got);
  RK_CHECK(h && want && got, "out of memory");

  for (int dti = 0; dti < OVL_DTYPE_COUNT; dti++) {
    const ovl_dtype dt = (ovl_dtype)dti;
    void *s, *d;
    RK_OK(B->mem_alloc(br, nmax * dsize(dt), &s, E));
    RK_OK(B->mem_alloc(br, nmax * dsize(dt), &d, E));
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      const size_t n = sizes[si];
      char what[128];

      /* allreduce: out of place on the comm stream, in place on calc.
       * avg only where it is exact whatever NCCL's method (a sum divided
       * by the rank count, or each input multiplied by its inverse): with
       * a power-of-two rank count. */
      for (int op = 0; op < OVL__RED_COUNT; op++) {
        if (op == OVL_RED_AVG && (R & (R - 1)) != 0)
          continue;
        for (size_t i = 0; i < n; i++) {
          h[i] = coll_value((ovl__redop)op, rank, i);
          want[i] = coll_value((ovl__redop)op, 0, i);
          for (int q = 1; q < R; q++)
            want[i] = reduce2((ovl__redop)op, want[i],
                              coll_value((ovl__redop)op, q, i));
          if (op == OVL_RED_AVG)
            want[i] /= R;
        }
        snprintf(what, sizeof what, "allreduce %s %s n=%zu out of place",
                 ovl__redop_name((ovl__redop)op), ovl_dtype_name(dt), n);
        RK_OK(upload(br, s, h, n, dt, E));
        RK_OK(poison(br, d, n * dsize(dt), E));
        RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, (ovl__redop)op,
                           dt, s, d, n, 0, 0, E));
        RK_OK(B->stream_sync(br, COMM0, E));
        RK_OK(download(br, got, d, n, dt, E));
        RK_SAME(what, got, want, n);

        snprintf(what, sizeof what, "allreduce %s %s n=%zu in place",
                 ovl__redop_name((ovl__redop)op), ovl_dtype_name(dt), n);
        RK_OK(upload(br, d, h, n, dt, E));
        RK_OK(B->collective(br, CALC, 0, OVL_COLL_ALLREDUCE, (ovl__redop)op,
                           dt, d, d, n, 0, 0, E));
        RK_OK(B->stream_sync(br, CALC, E));
        RK_OK(download(br, got, d, n, dt, E));
        RK_SAME(what, got, want, n);
      }

      /* broadcast from `root`. */
      for (size_t i = 0; i < n; i++) {
        h[i] = coll_value(OVL_RED_SUM, rank, i);
        want[i] = coll_value(OVL_RED_SUM, root, i);
      }
      snprintf(what, sizeof what, "broadcast root %d %s n=%zu out of place",
               root, ovl_dtype_name(dt), n);
      RK_OK(upload(br, s, h, n, dt, E));
      RK_OK(poison(br, d, n * dsize(dt), E));
      RK_OK(B->collective(br, COMM0, 0, OVL_COLL_BROADCAST, OVL_RED_SUM, dt,
                         s, d, n, root, 0, E));
      RK_OK(B->stream_sync(br, COMM0, E));
      RK_OK(download(br, got, d, n, dt, E));
      RK_SAME(what, got, want, n);
      snprintf(what, sizeof what, "broadcast root %d %s n=%zu in place", root,
               ovl_dtype_name(dt), n);
      RK_OK(upload(br, d, h, n, dt, E));
      RK_OK(B->collective(br, CALC, 0, OVL_COLL_BROADCAST, OVL_RED_SUM, dt, d,
                         d, n, root, 0, E));
      RK_OK(B->stream_sync(br, CALC, E));
      RK_OK(download(br, got, d, n, dt, E));
      RK_SAME(what, got, want, n);

      /* allgather: n from each rank, in rank order. */
      for (size_t i = 0; i < n; i++)
        h[i] = coll_value(OVL_RED_SUM, rank, i);
      for (int q = 0; q < R; q++)
        for (size_t i = 0; i < n; i++)
          want[(size_t)q * n + i] = coll_value(OVL_RED_SUM, q, i);
      snprintf(what, sizeof what, "allgather %s n=%zu", ovl_dtype_name(dt),
               n);
      RK_OK(upload(br, s, h, n, dt, E));
      RK_OK(poison(br, d, n * (size_t)R * dsize(dt), E));
      RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLGATHER, OVL_RED_SUM, dt, s,
                         d, n, 0, 0, E));
      RK_OK(B->stream_sync(br, COMM0, E));
      RK_OK(download(br, got, d, n * (size_t)R, dt, E));
      RK_SAME(what, got, want, n * (size_t)R);

      /* reducescatter: n * R in, block `rank` of the reduction out. */
      for (int op = OVL_RED_SUM; op <= OVL_RED_MAX; op++) {
        for (size_t j = 0; j < n * (size_t)R; j++)
          h[j] = coll_value((ovl__redop)op, rank, j);
        for (size_t i = 0; i < n; i++) {
          size_t j = (size_t)rank * n + i;
          want[i] = coll_value((ovl__redop)op, 0, j);
          for (int q = 1; q < R; q++)
            want[i] = reduce2((ovl__redop)op, want[i],
                              coll_value((ovl__redop)op, q, j));
        }
        snprintf(what, sizeof what, "reducescatter %s %s n=%zu",
                 ovl__redop_name((ovl__redop)op), ovl_dtype_name(dt), n);
        RK_OK(upload(br, s, h, n * (size_t)R, dt, E));
        RK_OK(poison(br, d, n * dsize(dt), E));
        RK_OK(B->collective(br, CALC, 0, OVL_COLL_REDUCESCATTER,
                           (ovl__redop)op, dt, s, d, n, 0, 0, E));
        RK_OK(B->stream_sync(br, CALC, E));
        RK_OK(download(br, got, d, n, dt, E));
        RK_SAME(what, got, want, n);
      }
    }
    B->mem_free(br, s);
    B->mem_free(br, d);
  }
  free(h);
  free(want);
  free(got);
}

/* Issue 13's collectives and point-to-point, in every dtype: reduce
 * to the last rank (non-roots' outputs untouched), alltoall, barrier, a
 * ring exchange in a group (send to rank+1, receive from rank-1), and a
 * lone send/receive pair between ranks 0 and 1; ring_progress names the
 * last call done. */
static void p2p_body(world_run *w, int rank, ovl__brank *br) {
  const int R = w->nranks, root = R - 1;
  const size_t n = 1000003, part = 4099;
  double *h = malloc(n * R * sizeof *h), *want = malloc(n * R * sizeof *want),
         *got = malloc(n * R * sizeof *got);
  uint64_t tag = 0;
  RK_CHECK(h && want && got, "out of memory");
  for (int dti = 0; dti < OVL_DTYPE_COUNT; dti++) {
    const ovl_dtype dt = (ovl_dtype)dti;
    void *s, *d;
    char what[128];
    RK_OK(B->mem_alloc(br, n * R * dsize(dt), &s, E));
    RK_OK(B->mem_alloc(br, n * R * dsize(dt), &d, E));

    /* reduce sum to `root`, out of place on the comm stream. */
    for (size_t i = 0; i < n; i++) {
      h[i] = coll_value(OVL_RED_SUM, rank, i);
      want[i] = coll_value(OVL_RED_SUM, 0, i);
      for (int q = 1; q < R; q++)
        want[i] += coll_value(OVL_RED_SUM, q, i);
    }
    RK_OK(upload(br, s, h, n, dt, E));
    RK_OK(upload(br, d, h, n, dt, E)); /* non-roots keep this */
    RK_OK(B->collective(br, COMM0, 0, OVL_COLL_REDUCE, OVL_RED_SUM, dt, s, d,
                        n, root, ++tag, E));
    RK_OK(B->stream_sync(br, COMM0, E));
    RK_CHECK(B->ring_progress(br, 0) == tag, "progress %llu, want %llu",
             (unsigned long long)B->ring_progress(br, 0),
             (unsigned long long)tag);
    RK_OK(download(br, got, d, n, dt, E));
    snprintf(what, sizeof what, "reduce sum to %d %s on rank %d", root,
             ovl_dtype_name(dt), rank);
    RK_SAME(what, got, rank == root ? want : h, n);

    /* alltoall of R parts of `part` elements. */
    for (int q = 0; q < R; q++)
      for (size_t i = 0; i < part; i++) {
        h[(size_t)q * part + i] = coll_value(OVL_RED_SUM, rank, q * part + i);
        want[(size_t)q * part + i] =
            coll_value(OVL_RED_SUM, q, (size_t)rank * part + i);
      }
    RK_OK(upload(br, s, h, part * R, dt, E));
    RK_OK(poison(br, d, part * R * dsize(dt), E));
    RK_OK(B->collective(br, CALC, 0, OVL_COLL_ALLTOALL, OVL_RED_SUM, dt, s, d,
                        part * R, 0, ++tag, E));
    RK_OK(B->stream_sync(br, CALC, E));
    RK_OK(download(br, got, d, part * R, dt, E));
    snprintf(what, sizeof what, "alltoall %s on rank %d", ovl_dtype_name(dt),
             rank);
    RK_SAME(what, got, want, part * R);

    /* barrier: moves no data of ours. */
    RK_OK(B->collective(br, CALC, 0, OVL_COLL_BARRIER, OVL_RED_SUM, dt, NULL,
                        NULL, 1, 0, ++tag, E));
    RK_OK(B->stream_sync(br, CALC, E));

    /* A ring exchange in one group: to rank+1, from rank-1. */
    {
      ovl__p2p_item it[2];
      for (size_t i = 0; i < n; i++) {
        h[i] = coll_value(OVL_RED_SUM, rank, i);
        want[i] = coll_value(OVL_RED_SUM, (rank + R - 1) % R, i);
      }
      RK_OK(upload(br, s, h, n, dt, E));
      RK_OK(poison(br, d, n * dsize(dt), E));
      it[0] = (ovl__p2p_item){true, (rank + 1) % R, dt, s, n};
      it[1] = (ovl__p2p_item){false, (rank + R - 1) % R, dt, d, n};
      tag += 2;
      RK_OK(B->p2p(br, COMM0, 0, it, 2, tag, E));
      RK_OK(B->stream_sync(br, COMM0, E));
      RK_OK(download(br, got, d, n, dt, E));
      snprintf(what, sizeof what, "ring exchange %s on rank %d",
               ovl_dtype_name(dt), rank);
      RK_SAME(what, got, want, n);
    }
    /* A lone send from 0 and a lone receive on 1. */
    if (R >= 2 && rank < 2) {
      ovl__p2p_item it = {rank == 0, 1 - rank, dt, rank == 0 ? s : d, n};
      for (size_t i = 0; i < n; i++)
        want[i] = coll_value(OVL_RED_SUM, 0, i);
      RK_OK(B->p2p(br, CALC, 0, &it, 1, ++tag, E));
      RK_OK(B->stream_sync(br, CALC, E));
      if (rank == 1) {
        RK_OK(download(br, got, d, n, dt, E));
        RK_SAME("lone send/receive", got, want, n);
      }
    }
    RK_CHECK(B->ring_progress(br, 0) == tag, "progress %llu, want %llu",
             (unsigned long long)B->ring_progress(br, 0),
             (unsigned long long)tag);
    B->mem_free(br, s);
    B->mem_free(br, d);
  }
  free(h);
  free(want);
  free(got);
}

START_TEST(test_p2p) { run_world(all_ranks(), 1, 1, 60, p2p_body); }
END_TEST

/* A send that no rank receives: the sync times out, and the flight record
 * taken before the abort says the send (tag 2) never completed, while the
 * allreduce before it (tag 1) did. */
static void stuck_send_body(world_run *w, int rank, ovl__brank *br) {
  ovl_error err;
  ovl_status st;
  void *p;
  (void)w;
  RK_OK(B->mem_alloc(br, 1024 * sizeof(float), &p, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                      OVL_DTYPE_FLOAT32, p, p, 1024, 0, 1, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  if (rank == 0) {
    ovl__p2p_item it = {true, 1, OVL_DTYPE_FLOAT32, p, 1024};
    RK_OK(B->p2p(br, COMM0, 0, &it, 1, 2, E));
    st = B->stream_sync(br, COMM0, &err);
    RK_CHECK(st == OVL_ETIMEDOUT, "stuck send: %s", ovl_err_name(st));
    RK_CHECK(B->ring_progress(br, 0) == 1, "progress %llu, want 1",
             (unsigned long long)B->ring_progress(br, 0));
  }
  if (!rank_barrier(w))
    return;
  B->mem_free(br, p);
}

START_TEST(test_stuck_send) {
  if (ngpus < 2)
    return; /* one rank cannot wait for another */
  run_world(2, 1, 1, 2.0, stuck_send_body);
}
END_TEST

START_TEST(test_collectives_one_gpu) { run_world(1, 1, 1, 60, coll_body); }
END_TEST

START_TEST(test_collectives_all_gpus) {
  run_world(all_ranks(), 1, 1, 60, coll_body);
}
END_TEST

/* Two rings: the second made by a later world_rings call; each ring's
 * collective runs on its own comm stream. */
static void two_rings_body(world_run *w, int rank, ovl__brank *br) {
  const size_t n = 4096;
  double h[4096], got[4096];
  void *a, *b;
  RK_OK(B->mem_alloc(br, n * sizeof(float), &a, E));
  RK_OK(B->mem_alloc(br, n * sizeof(float), &b, E));
  for (size_t i = 0; i < n; i++)
    h[i] = (double)(rank + 1);
  RK_OK(upload(br, a, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(upload(br, b, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, a, a, n, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(B->collective(br, COMM1, 1, OVL_COLL_ALLREDUCE, OVL_RED_MAX,
                     OVL_DTYPE_FLOAT32, b, b, n, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM1, E));
  RK_OK(download(br, got, a, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == w->nranks * (w->nranks + 1) / 2.0 &&
              got[n - 1] == got[0],
          "ring 0 sum gave %g", got[0]);
  RK_OK(download(br, got, b, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == (double)w->nranks && got[n - 1] == got[0],
          "ring 1 max gave %g", got[0]);
  B->mem_free(br, a);
  B->mem_free(br, b);
}

START_TEST(test_two_rings) {
  run_world(all_ranks(), 2, 2, 60, two_rings_body);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Wait ops: event semantics on real streams                           */
/* ------------------------------------------------------------------ */

/*
 * Every case: X holds OLD; the calc stream is delayed, then writes NEW into
 * X; an allreduce of X into R runs on the comm stream of ring 0. Whether R
 * sees NEW depends only on how comm is ordered after calc.
 */
static const double OLD = 1.0, NEW = 2.0;

static void wait_body(world_run *w, int rank, ovl__brank *br) {
  const size_t n = 1 << 20;
  const double R = w->nranks;
  double *h = malloc(n * sizeof *h), *got = malloc(n * sizeof *got);
  void *x, *newv, *res;
  RK_CHECK(h && got, "out of memory");

  RK_OK(B->mem_alloc(br, n * sizeof(float), &x, E));
  RK_OK(B->mem_alloc(br, n * sizeof(float), &newv, E));
  RK_OK(B->mem_alloc(br, n * sizeof(float), &res, E));
  for (size_t i = 0; i < n; i++)
    h[i] = NEW;
  RK_OK(upload(br, newv, h, n, OVL_DTYPE_FLOAT32, E));
  for (size_t i = 0; i < n; i++)
    h[i] = OLD;
  /* Warm up the ring so that the cases below time only themselves. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, x, res, n, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM0, E));

  /* (a) c_wait_compute: comm waits for the write, R = nranks * NEW. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(poison(br, res, n * sizeof(float), E));
  RK_BARRIER();
  RK_OK(B->delay(br, CALC, WAIT_DELAY_US, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, newv,
                      NULL, 1.0, 0.0, n, E));
  RK_OK(B->event_record(br, EV_COMPUTE0, CALC, E));
  RK_OK(B->stream_wait_event(br, COMM0, EV_COMPUTE0, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, x, res, n, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(B->stream_sync(br, CALC, E));
  RK_OK(download(br, got, res, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == R * NEW && got[n - 1] == R * NEW,
          "with the wait: allreduce gave %g and %g, expected %g", got[0],
          got[n - 1], R * NEW);
  RK_BARRIER();

  /* (b) No wait (and a wait on comm_event, which was never recorded and so
   * orders nothing): the allreduce runs during the delay and reads OLD. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(poison(br, res, n * sizeof(float), E));
  RK_BARRIER();
  RK_OK(B->delay(br, CALC, WAIT_DELAY_US, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, newv,
                      NULL, 1.0, 0.0, n, E));
  RK_OK(B->stream_wait_event(br, COMM0, EV_COMM0, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, x, res, n, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(download(br, got, res, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == R * OLD && got[n - 1] == R * OLD,
          "missing wait: allreduce gave %g and %g, expected the stale %g",
          got[0], got[n - 1], R * OLD);
  RK_OK(B->stream_sync(br, CALC, E));
  RK_OK(download(br, got, x, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == NEW && got[n - 1] == NEW,
          "missing wait: X is %g after calc, expected %g", got[0], NEW);
  RK_BARRIER();

  /* (c) A record replaces the previous one: compute_event is recorded on
   * calc after the write, then again on the idle comm stream of ring 1.
   * The wait sees only the second record, so the allreduce reads OLD. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(poison(br, res, n * sizeof(float), E));
  RK_BARRIER();
  RK_OK(B->delay(br, CALC, WAIT_DELAY_US, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, newv,
                      NULL, 1.0, 0.0, n, E));
  RK_OK(B->event_record(br, EV_COMPUTE0, CALC, E));
  RK_OK(B->event_record(br, EV_COMPUTE0, COMM1, E));
  RK_OK(B->stream_wait_event(br, COMM0, EV_COMPUTE0, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, x, res, n, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(download(br, got, res, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == R * OLD && got[n - 1] == R * OLD,
          "re-recorded event: allreduce gave %g and %g, expected %g (the "
          "second record must replace the first)",
          got[0], got[n - 1], R * OLD);
  RK_OK(B->stream_sync(br, CALC, E));

  /* (d) c_wait_comm: calc waits for the allreduce before reading R. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(poison(br, res, n * sizeof(float), E));
  RK_BARRIER();
  RK_OK(B->delay(br, COMM0, WAIT_DELAY_US, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, x, res, n, 0, 0, E));
  RK_OK(B->event_record(br, EV_COMM0, COMM0, E));
  RK_OK(B->stream_wait_event(br, CALC, EV_COMM0, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, res,
                      NULL, 1.0, 0.0, n, E));
  RK_OK(B->stream_sync(br, CALC, E));
  RK_OK(download(br, got, x, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == R * OLD && got[n - 1] == R * OLD,
          "c_wait_comm: calc read %g and %g, expected %g", got[0], got[n - 1],
          R * OLD);
  RK_OK(B->stream_sync(br, COMM0, E));

  B->mem_free(br, x);
  B->mem_free(br, newv);
  B->mem_free(br, res);
  free(h);
  free(got);
}

START_TEST(test_wait_semantics) {
  run_world(all_ranks(), 1, 2, 60, wait_body);
}
END_TEST

/*
 * Named events (events_reserve): created after the per-ring ones, with the
 * same semantics. X holds OLD; calc is delayed, then writes NEW into X; the
 * comm stream copies X into R after waiting for a named event.
 */
static void named_events_body(world_run *w, int rank, ovl__brank *br) {
  const size_t n = 1 << 16;
  const int named0 = OVL_EVENT_NAMED(1, 0), named1 = OVL_EVENT_NAMED(1, 1);
  double *h = malloc(n * sizeof *h), *got = malloc(n * sizeof *got);
  void *x, *newv, *res;
  ovl_error err;
  RK_CHECK(h && got, "out of memory");

  /* Only the per-ring events before the reserve; it never shrinks. */
  RK_CHECK(B->event_record(br, named0, CALC, &err) == OVL_EINVAL,
           "named event before events_reserve");
  RK_CHECK(B->events_reserve(br, -1, &err) == OVL_EINVAL, "-1 events");
  RK_OK(B->events_reserve(br, 2, E));
  RK_OK(B->events_reserve(br, named1 + 1, E));
  RK_OK(B->events_reserve(br, 1, E));
  RK_CHECK(B->event_record(br, named1 + 1, CALC, &err) == OVL_EINVAL,
           "event past the reserve");

  RK_OK(B->mem_alloc(br, n * sizeof(float), &x, E));
  RK_OK(B->mem_alloc(br, n * sizeof(float), &newv, E));
  RK_OK(B->mem_alloc(br, n * sizeof(float), &res, E));
  for (size_t i = 0; i < n; i++)
    h[i] = NEW;
  RK_OK(upload(br, newv, h, n, OVL_DTYPE_FLOAT32, E));
  for (size_t i = 0; i < n; i++)
    h[i] = OLD;

  /* (a) A never-recorded named event orders nothing: comm reads OLD. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(B->delay(br, CALC, WAIT_DELAY_US, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, newv,
                       NULL, 1.0, 0.0, n, E));
  RK_OK(B->stream_wait_event(br, COMM0, named0, E));
  RK_OK(B->elementwise(br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, res, x,
                       NULL, 1.0, 0.0, n, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(download(br, got, res, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == OLD && got[n - 1] == OLD,
           "never-recorded named event: comm read %g, expected %g", got[0],
           OLD);
  RK_OK(B->stream_sync(br, CALC, E));

  /* (b) Recorded after the write: comm reads NEW. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(B->delay(br, CALC, WAIT_DELAY_US, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, newv,
                       NULL, 1.0, 0.0, n, E));
  RK_OK(B->event_record(br, named1, CALC, E));
  RK_OK(B->stream_wait_event(br, COMM0, named1, E));
  RK_OK(B->elementwise(br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, res, x,
                       NULL, 1.0, 0.0, n, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(download(br, got, res, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == NEW && got[n - 1] == NEW,
           "named event: comm read %g, expected %g", got[0], NEW);
  RK_OK(B->stream_sync(br, CALC, E));

  /* (c) Re-recorded on the idle comm stream: the wait no longer covers the
   * write, comm reads OLD. */
  RK_OK(upload(br, x, h, n, OVL_DTYPE_FLOAT32, E));
  RK_OK(B->delay(br, CALC, WAIT_DELAY_US, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, newv,
                       NULL, 1.0, 0.0, n, E));
  RK_OK(B->event_record(br, named1, CALC, E));
  RK_OK(B->event_record(br, named1, COMM0, E));
  RK_OK(B->stream_wait_event(br, COMM0, named1, E));
  RK_OK(B->elementwise(br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, res, x,
                       NULL, 1.0, 0.0, n, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(download(br, got, res, n, OVL_DTYPE_FLOAT32, E));
  RK_CHECK(got[0] == OLD && got[n - 1] == OLD,
           "re-recorded named event: comm read %g, expected %g", got[0], OLD);
  RK_OK(B->stream_sync(br, CALC, E));

  B->mem_free(br, x);
  B->mem_free(br, newv);
  B->mem_free(br, res);
  free(h);
  free(got);
}

START_TEST(test_named_events) { run_world(1, 0, 1, 30, named_events_body); }
END_TEST

/* Chaos belongs to the cpu backend: the cuda backend refuses it, and takes
 * its own knobs (ovl_world_set's keys), checked. */
START_TEST(test_chaos_refused) {
  ovl__bworld *bw;
  ovl_error err;
  CK_OK(B->world_init(OVL__ONE_PROCESS(1), 0, &bw, E));
  ck_assert_int_eq(B->world_set(bw, "chaos_seed", "42", &err), OVL_EINVAL);
  ck_assert_msg(strstr(err.msg, "--chaos needs the cpu backend") != NULL,
                "%s", err.msg);
  ck_assert_msg(strstr(err.msg, "chaos (seed 42)") != NULL, "%s", err.msg);
  /* Its own knobs it takes, and checks. */
  CK_OK(B->world_set(bw, "comm_priority", "high", E));
  CK_OK(B->world_set(bw, "nccl_min_ctas", "8", E));
  ck_assert_int_eq(B->world_set(bw, "nccl_max_ctas", "4", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "NCCL CTA limits: min 8, max 4: need 0 <= min "
                            "<= max");
  CK_OK(B->world_set(bw, "nccl_max_ctas", "16", E));
  ck_assert_int_eq(B->world_set(bw, "comm_priority", "max", &err),
                   OVL_EINVAL);
  B->world_fini(bw);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Delay, timeouts, aborts, bad arguments                              */
/* ------------------------------------------------------------------ */

static void delay_body(world_run *w, int rank, ovl__brank *br) {
  double t0, dt;
  RK_OK(B->stream_sync(br, CALC, E)); /* nothing queued: returns at once */
  t0 = ovl__now();
  RK_OK(B->delay(br, CALC, 50000.0, E));
  RK_OK(B->stream_sync(br, CALC, E));
  dt = ovl__now() - t0;
  RK_CHECK(dt >= 0.049 && dt < 1.0, "a 50 ms delay took %.4f s", dt);
  RK_OK(B->delay(br, COMM0, 0.0, E));
  RK_OK(B->stream_sync(br, COMM0, E));
}

START_TEST(test_delay) { run_world(1, 0, 1, 30, delay_body); }
END_TEST

/* A stream that stays busy past the timeout: the sync fails with
 * OVL_ETIMEDOUT, aborts the world, and later syncs and collectives fail
 * with OVL_EABORTED. */
static void timeout_body(world_run *w, int rank, ovl__brank *br) {
  ovl_error err;
  ovl_status st;
  double t0, dt;
  void *p;
  RK_OK(B->mem_alloc(br, 64, &p, E));
  RK_OK(B->delay(br, CALC, 3e6, E));
  t0 = ovl__now();
  st = B->stream_sync(br, CALC, &err);
  dt = ovl__now() - t0;
  RK_CHECK(st == OVL_ETIMEDOUT, "sync: %s: %s", ovl_err_name(st),
          st == OVL_OK ? "" : err.msg);
  RK_CHECK(strstr(err.msg, "rank 0: sync of calc stream: timed out after "
                          "0.5 s") != NULL,
          "message: %s", err.msg);
  RK_CHECK(dt >= 0.49 && dt < 2.5, "timed out after %.3f s", dt);
  st = B->stream_sync(br, CALC, &err);
  RK_CHECK(st == OVL_EABORTED, "second sync: %s", ovl_err_name(st));
  st = B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, p, p, 16, 0, 0, &err);
  RK_CHECK(st == OVL_EABORTED, "collective after abort: %s",
          ovl_err_name(st));
  B->mem_free(br, p);
}

START_TEST(test_timeout) { run_world(1, 1, 1, 0.5, timeout_body); }
END_TEST

/* A collective only rank 0 calls never finishes: its sync times out and
 * aborts the world, and rank 1's next sync fails with OVL_EABORTED instead
 * of waiting. No rank may hang in the enqueue itself. */
static void stuck_body(world_run *w, int rank, ovl__brank *br) {
  ovl_error err;
  ovl_status st;
  void *p;
  RK_OK(B->mem_alloc(br, 1024 * sizeof(float), &p, E));
  if (rank == 0) {
    RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p, p, 1024, 0, 0, E));
    st = B->stream_sync(br, COMM0, &err);
    RK_CHECK(st == OVL_ETIMEDOUT, "stuck sync: %s: %s", ovl_err_name(st),
            st == OVL_OK ? "" : err.msg);
    RK_CHECK(strstr(err.msg, "NCCL collective stuck?") != NULL, "message: %s",
            err.msg);
  }
  if (!rank_barrier(w))
    return;
  if (rank != 0) {
    st = B->stream_sync(br, CALC, &err);
    RK_CHECK(st == OVL_EABORTED, "sync on rank %d: %s", rank,
            ovl_err_name(st));
  }
  B->mem_free(br, p);
}

START_TEST(test_stuck_collective) {
  if (ngpus < 2)
    return; /* one rank cannot wait for another */
  run_world(2, 1, 1, 2.0, stuck_body);
}
END_TEST

static void invalid_body(world_run *w, int rank, ovl__brank *br) {
  ovl_error err;
  void *p;
  RK_OK(B->mem_alloc(br, 64, &p, E));
  /* One ring: streams 0 and 1, events 0 and 1, communicator of ring 0. */
  RK_CHECK(B->stream_sync(br, 2, &err) == OVL_EINVAL, "sync of stream 2");
  RK_CHECK(B->stream_sync(br, -1, &err) == OVL_EINVAL, "sync of stream -1");
  RK_CHECK(B->event_record(br, 2, CALC, &err) == OVL_EINVAL, "event 2");
  RK_CHECK(B->event_record(br, EV_COMPUTE0, 2, &err) == OVL_EINVAL,
          "record on stream 2");
  RK_CHECK(B->stream_wait_event(br, 2, EV_COMPUTE0, &err) == OVL_EINVAL,
          "wait on stream 2");
  RK_CHECK(B->stream_wait_event(br, CALC, -1, &err) == OVL_EINVAL,
          "wait for event -1");
  RK_CHECK(B->elementwise(br, 2, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, p, p, NULL,
                         1, 0, 4, &err) == OVL_EINVAL,
          "elementwise on stream 2");
  RK_CHECK(B->elementwise(br, CALC, OVL_EW_ADD, OVL_DTYPE_FLOAT32, p, p, NULL,
                         1, 0, 4, &err) == OVL_EINVAL,
          "add without y");
  RK_CHECK(B->delay(br, 2, 1.0, &err) == OVL_EINVAL, "delay on stream 2");
  RK_CHECK(B->delay(br, CALC, -1.0, &err) == OVL_EINVAL, "negative delay");
  RK_CHECK(B->collective(br, CALC, 1, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                        OVL_DTYPE_FLOAT32, p, p, 4, 0, 0, &err) == OVL_EINVAL,
          "collective on ring 1");
  RK_CHECK(strstr(err.msg, "ring 1") != NULL, "message: %s", err.msg);
  RK_CHECK(B->collective(br, CALC, 0, OVL_COLL_BROADCAST, OVL_RED_SUM,
                        OVL_DTYPE_FLOAT32, p, p, 4, w->nranks, 0,
                        &err) == OVL_EINVAL,
          "broadcast from a rank that does not exist");
  /* The world still works after all that. */
  RK_OK(B->event_record(br, EV_COMPUTE0, CALC, E));
  RK_OK(B->stream_wait_event(br, COMM0, EV_COMPUTE0, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                     OVL_DTYPE_FLOAT32, p, p, 4, 0, 0, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  B->mem_free(br, p);
}

START_TEST(test_invalid) {
  ovl__bworld *bw;
  ovl__brank *br = NULL;
  ovl_error err;
  run_world(1, 1, 1, 30, invalid_body);
  CK_OK(B->world_init(OVL__ONE_PROCESS(1), 0, &bw, E));
  ck_assert_int_eq(B->rank_init(bw, 1, 0, &br, &err), OVL_EINVAL);
  ck_assert_int_eq(B->rank_init(bw, 0, OVL_MAX_RINGS + 1, &br, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(B->world_rings(bw, OVL_MAX_RINGS + 1, 0, &err), OVL_EINVAL);
  B->world_fini(bw);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Traces through the executor (ovl_world_run), and the machine's info  */
/* ------------------------------------------------------------------ */

/* With timing events: every op has a span; the ops of one stream are in
 * order; a 20 ms delay spans >= 20 ms; the collective that waits on the
 * compute event starts after the delay before it ends; the op after
 * c_wait_comm starts after the collective ends. Ranks line up on the host
 * clock. The versions are known. */
static void trace_spans(bool graph) {
  static const char text[] =
      "x = data(shape=[1048576], init=uniform)\n"
      "y = scale(x, scale=2.0)\n"
      "delay(us=20000, stream=calc)\n"
      "c_wait_compute(y, ring_id=0)\n"
      "c_allreduce_sum(y, ring_id=0)\n"
      "z = scale(x, scale=3.0)\n"
      "c_wait_comm(y, ring_id=0)\n"
      "w = elementwise_add(y, z)\n"
      "fetch(w)\n";
  int nranks = ngpus < 2 ? ngpus : 2;
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = nranks, .timeout_s = 30};
  ovl_parse_opts po = {.size = sizeof po, .nranks = nranks};
  ovl_run_opts ro = {.size = sizeof ro,
                     .iters = 3,
                     .warmup = 1,
                     .trace = 1,
                     .trace_iter = -1,
                     .graph = graph,
                     .op_times = graph};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_result *res = NULL;
  ovl_world_info info;
  ovl_error err = {0};
  size_t delay = 1, ar = 3, add = 6, fetch = 7;

  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_program_parse(text, sizeof text - 1, "t.sched", &po,
                                  &prog, &err) == OVL_OK,
                "%s", err.msg);
  ck_assert_uint_eq(ovl_program_op_count(prog), 8);
  ck_assert_msg(ovl_world_run(world, prog, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_result_trace_iter(res), 2);
  for (int r = 0; r < nranks; r++) {
    double last[1 + OVL_MAX_RINGS] = {0}, s, e, s2, e2;
    for (size_t i = 0; i < ovl_program_op_count(prog); i++) {
      int st = prog->prims[ovl__op_main_prim(prog, i)].stream;
      ck_assert_int_eq(ovl_result_span(res, r, i, &s, &e), 0);
      ck_assert_msg(s >= 0 && e >= s, "rank %d op %zu: %g..%g", r, i, s, e);
      if (ovl_result_record_span(res, r, i, &s2, &e2) == 0) {
        int rec = record_stream(prog, i);
        ck_assert(s2 >= last[rec] && e2 >= s2);
        last[rec] = e2;
      }
      if (i == fetch)
        continue;
      ck_assert_msg(s >= last[st], "rank %d op %zu at %g, before %g", r, i,
                    s, last[st]);
      last[st] = e;
    }
    ovl_result_span(res, r, delay, &s, &e);
    ck_assert_msg(e - s >= 0.0199, "delay spans %g s", e - s);
    ovl_result_span(res, r, ar, &s2, &e2);
    ck_assert_msg(s2 >= e, "allreduce at %g, delay ends %g", s2, e);
    ovl_result_span(res, r, add, &s, &e);
    ck_assert_msg(s >= e2, "add at %g, allreduce ends %g", s, e2);
    ck_assert(isfinite(ovl_result_trace_base(res, r)));
    ck_assert_ptr_nonnull(ovl_world_device_name(world, r));
  }
  ovl_world_info_get(world, &info);
  ck_assert_str_ne(info.driver_version, "n/a");
  ck_assert_str_ne(info.runtime_version, "n/a");
  ck_assert_str_ne(info.nccl_version, "n/a");
  ck_assert_str_ne(info.nccl_version, "unknown");
  if (graph) {
    /* Op times from the timers inside the graphs: the delay's, summed
     * over the 3 timed iterations. */
    for (int r = 0; r < nranks; r++) {
      const double *t = ovl_result_op_times(res, r);
      ck_assert_ptr_nonnull(t);
      ck_assert_msg(t[delay] >= 3 * 0.0199 && t[delay] < 3 * 0.5,
                    "rank %d: delay op time %g s", r, t[delay]);
      ck_assert_msg(t[ar] > 0, "rank %d: allreduce op time %g", r, t[ar]);
    }
  }
  ovl_result_free(res);
  ovl_program_free(prog);
  ovl_world_free(world);
}

START_TEST(test_trace_spans) { trace_spans(false); }
END_TEST

/* ------------------------------------------------------------------ */
/* Graphs (ovl_run_opts.graph; backend graph_begin ... graph_launch)    */
/* ------------------------------------------------------------------ */

/* The backend's capture. Work on calc and comm[0] ordered by the wait
 * ops' events (an allreduce among them) is one graph; nothing runs until
 * it is launched; each launch reads the buffers as they are then (x is
 * uploaded anew before each), and a sync of calc waits for the comm
 * stream's part too. comm[0] is forked at the start of the capture: its
 * kernel does not wait for the 30 ms delay enqueued on calc before it
 * (timers inside the graph, recorded by every launch, say so). A wait for
 * an event recorded before the capture does nothing; what a capture
 * refuses; a capture abandoned half way leaves the streams usable. */
static void graph_body(world_run *w, int rank, ovl__brank *br) {
  enum { N = 4096 };
  static double h[OVL_MAX_RANKS][N], got[OVL_MAX_RANKS][N],
      want[OVL_MAX_RANKS][N];
  const ovl_dtype F = OVL_DTYPE_FLOAT32;
  const int named = OVL_EVENT_NAMED(1, 0);
  void *x, *y, *z, *v;
  ovl_error err;
  ovl_status st;
  int g = -1, g2 = -1;
  double t01, t03;

  RK_OK(B->mem_alloc(br, N * sizeof(float), &x, E));
  RK_OK(B->mem_alloc(br, N * sizeof(float), &y, E));
  RK_OK(B->mem_alloc(br, N * sizeof(float), &z, E));
  RK_OK(B->mem_alloc(br, N * sizeof(float), &v, E));
  RK_OK(B->events_reserve(br, named + 1, E));
  RK_OK(B->timers_reserve(br, 4, E));
  /* A record before the capture: the wait for it inside does nothing. */
  RK_OK(B->event_record(br, named, CALC, E));

  RK_OK(B->graph_begin(br, E));
  st = B->graph_begin(br, &err);
  RK_CHECK(st == OVL_EINVAL, "a second graph_begin: %s", ovl_err_name(st));
  st = B->stream_sync(br, CALC, &err);
  RK_CHECK(st == OVL_EINVAL &&
               strstr(err.msg, "sync of calc stream inside a graph capture") !=
                   NULL,
           "a sync inside the capture: %s: %s", ovl_err_name(st), err.msg);
  RK_OK(B->stream_wait_event(br, COMM0, named, E));
  RK_OK(B->timer_mark(br, 0, CALC, E));
  RK_OK(B->delay(br, CALC, 30000.0, E));
  RK_OK(B->timer_mark(br, 1, CALC, E));
  RK_OK(B->timer_mark(br, 2, COMM0, E));
  /* v = x + 5 on comm[0], beside the delay. */
  RK_OK(B->elementwise(br, COMM0, OVL_EW_SCALE, F, v, x, NULL, 1.0, 5.0, N,
                       E));
  RK_OK(B->timer_mark(br, 3, COMM0, E));
  /* y = 2x on calc; allreduced on comm[0]; z = y + v on calc. */
  RK_OK(B->elementwise(br, CALC, OVL_EW_SCALE, F, y, x, NULL, 2.0, 0.0, N,
                       E));
  RK_OK(B->event_record(br, EV_COMPUTE0, CALC, E));
  RK_OK(B->stream_wait_event(br, COMM0, EV_COMPUTE0, E));
  RK_OK(B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM, F, y, y,
                      N, 0, 1, E));
  RK_OK(B->event_record(br, EV_COMM0, COMM0, E));
  RK_OK(B->stream_wait_event(br, CALC, EV_COMM0, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_ADD, F, z, y, v, 1.0, 0.0, N, E));
  RK_OK(B->graph_end(br, &g, E));
  RK_CHECK(g == 0, "first graph numbered %d", g);
  st = B->graph_end(br, &g2, &err);
  RK_CHECK(st == OVL_EINVAL, "graph_end without a capture: %s",
           ovl_err_name(st));
  st = B->graph_launch(br, 1, &err);
  RK_CHECK(st == OVL_EINVAL, "launch of graph 1: %s", ovl_err_name(st));
  /* Captured, not run: z is still the NaN mem_alloc left. */
  RK_OK(download(br, got[rank], z, N, F, E));
  RK_CHECK(isnan(got[rank][0]) && isnan(got[rank][N - 1]),
           "z written by the capture: %g", got[rank][0]);

  for (int k = 1; k <= 3; k++) {
    for (size_t i = 0; i < N; i++) {
      h[rank][i] = k + (double)i / 4;
      want[rank][i] = 2.0 * w->nranks * h[rank][i] + h[rank][i] + 5.0;
    }
    RK_OK(upload(br, x, h[rank], N, F, E));
    RK_OK(B->graph_launch(br, g, E));
    RK_OK(B->stream_sync(br, CALC, E));
    RK_OK(download(br, got[rank], z, N, F, E));
    RK_SAME("z after a launch", got[rank], want[rank], N);
    RK_OK(B->timer_elapsed(br, 0, 1, &t01, E));
    RK_OK(B->timer_elapsed(br, 0, 3, &t03, E));
    RK_CHECK(t01 >= 0.0299 && t01 < 1.0, "launch %d: the delay took %g s", k,
             t01);
    RK_CHECK(t03 < 0.02, "launch %d: comm's kernel ended %g s after calc's "
                         "first timer (waited for the delay?)",
             k, t03);
  }

  /* A capture abandoned half way: nothing of it runs, and the streams
   * work eagerly after it. */
  RK_OK(B->graph_begin(br, E));
  RK_OK(B->elementwise(br, CALC, OVL_EW_SCALE, F, z, x, NULL, 0.0, 7.0, N,
                       E));
  RK_OK(B->elementwise(br, COMM0, OVL_EW_SCALE, F, v, x, NULL, 0.0, 7.0, N,
                       E));
  B->graph_abort(br);
  B->graph_abort(br); /* none open: nothing */
  RK_OK(B->stream_sync(br, CALC, E));
  RK_OK(B->stream_sync(br, COMM0, E));
  RK_OK(download(br, got[rank], z, N, F, E));
  RK_SAME("z after an abandoned capture", got[rank], want[rank], N);
  RK_OK(B->elementwise(br, CALC, OVL_EW_SCALE, F, z, x, NULL, 0.0, 7.0, N,
                       E));
  RK_OK(B->stream_sync(br, CALC, E));
  RK_OK(download(br, got[rank], z, 1, F, E));
  RK_CHECK(got[rank][0] == 7.0, "eager kernel after the abort: %g",
           got[rank][0]);
  st = B->graph_launch(br, 1, &err);
  RK_CHECK(st == OVL_EINVAL, "the abandoned capture made a graph");
  B->mem_free(br, x);
  B->mem_free(br, y);
  B->mem_free(br, z);
  B->mem_free(br, v);
}

START_TEST(test_graph_capture) { run_world(all_ranks(), 1, 1, 60, graph_body); }
END_TEST

/* Run `prog` with `ro` on `world`; fail the test with the message. */
static ovl_result *run_prog(ovl_world *world, const ovl_program *prog,
                            const ovl_run_opts *ro) {
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_world_run(world, prog, ro, &res, &err);
  ck_assert_msg(st == OVL_OK, "%s: %s: %s", ovl_program_filename(prog),
                ovl_err_name(st), err.msg);
  return res;
}

/* Graph and eager runs of `prog` fetch the same values, bit for bit (two
 * ranks: every sum is of two terms, the same in any order), and the
 * graphs' are right (the reference). Returns how many variables of how
 * many ranks were compared. */
static size_t graph_equals_eager(ovl_world *world, const ovl_program *prog) {
  ovl_run_opts eager = {.size = sizeof eager, .iters = 2, .warmup = 1};
  ovl_run_opts graph = {
      .size = sizeof graph, .iters = 2, .warmup = 1, .graph = 1};
  ovl_result *a = run_prog(world, prog, &eager);
  ovl_result *b = run_prog(world, prog, &graph);
  ovl_reference *ref = NULL;
  ovl_check chk;
  ovl_error err = {0};
  size_t compared = 0;

  for (int r = 0; r < ovl_program_nranks(prog); r++)
    for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
      ovl_var_info vi;
      const double *x = ovl_result_fetched(a, r, i),
                   *y = ovl_result_fetched(b, r, i);
      ovl_program_fetch_info(prog, i, &vi);
      ck_assert_msg((x == NULL) == (y == NULL),
                    "%s: rank %d %s fetched in one run only",
                    ovl_program_filename(prog), r, vi.name);
      if (x == NULL)
        continue;
      for (int64_t k = 0; k < vi.numel; k++)
        ck_assert_msg(memcmp(&x[k], &y[k], sizeof x[k]) == 0,
                      "%s: rank %d %s[%lld]: eager %.17g, graph %.17g",
                      ovl_program_filename(prog), r, vi.name, (long long)k,
                      x[k], y[k]);
      compared++;
    }
  if (ovl_program_fetch_count(prog) > 0) {
    ck_assert_msg(ovl_reference_compute(prog, ovl_program_nranks(prog), &ref,
                                        &err) == OVL_OK,
                  "%s", err.msg);
    ck_assert_msg(ovl_check_result(prog, b, ref, 1e-5, 1e-6, &chk, &err) ==
                      OVL_OK,
                  "%s", err.msg);
    ck_assert_msg(chk.mismatched == 0, "%s: %lld elements wrong in graphs",
                  ovl_program_filename(prog), (long long)chk.mismatched);
    ovl_check_release(&chk);
    ovl_reference_free(ref);
  }
  ovl_result_free(a);
  ovl_result_free(b);
  return compared;
}

/* Segments split at every host sync: a fetch reads what the ops before it
 * wrote, not what the ops after it write into the same variable (a is
 * fetched, then overwritten: one graph for the whole iteration would
 * fetch 5x); stream_sync of a user stream, c_sync_comm_stream, barrier and
 * c_sync_calc_stream end segments too; a wait for an event recorded in an
 * earlier segment does nothing; ops of one rank only, and sends and
 * receives in groups, are captured by the ranks that run them. */
START_TEST(test_graph_segments) {
  static const char text[] =
      "x = data(shape=[65536], init=uniform, seed=3)\n"
      "a = scale(x, scale=2.0)\n"
      "fetch(a)\n"
      "a = scale(x, scale=5.0)\n"
      "y = scale(x, scale=3.0)\n"
      "c_wait_compute(y, ring_id=0)\n"
      "c_allreduce_sum(y, ring_id=0)\n"
      "c_sync_comm_stream(y, ring_id=0)\n"
      "event_record(event=e1, stream=calc)\n"
      "stream_wait_event(event=e1, stream=side)\n"
      "z = scale(y, scale=0.5, stream=side)\n"
      "stream_sync(stream=side)\n"
      "stream_wait_event(event=e1, stream=side)\n"
      "w = elementwise_add(z, a, stream=side)\n"
      "event_record(event=e2, stream=side)\n"
      "stream_wait_event(event=e2, stream=calc)\n"
      "c_allreduce_max(w, ring_id=0, use_calc_stream=true)\n"
      "barrier(w, ring_id=0)\n"
      "u = scale(w, scale=1.0, ranks=[0])\n"
      "u = scale(w, scale=-1.0, ranks=[1])\n"
      "c_wait_compute(u, ring_id=1)\n"
      "group {\n"
      "  send_v2(u, peer=(rank + 1) % nranks, ring_id=1)\n"
      "  r = recv_v2(peer=(rank + nranks - 1) % nranks, out_shape=[65536], "
      "dtype=float32, ring_id=1)\n"
      "}\n"
      "c_sync_calc_stream(r)\n"
      "c_wait_compute(r, ring_id=1)\n"
      "c_sync_comm_stream(r, ring_id=1)\n"
      "fetch(y, z, w, r)\n";
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 2, .timeout_s = 30};
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_error err = {0};

  if (ngpus < 2)
    return; /* the ranks that differ need two */
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_program_parse(text, sizeof text - 1, "seg.sched", &po,
                                  &prog, &err) == OVL_OK,
                "%s", err.msg);
  ck_assert_uint_eq(graph_equals_eager(world, prog), 2 * 5);
  ovl_program_free(prog);
  ovl_world_free(world);
}
END_TEST

/* Every good schedule (and the test schedules of every op and of user
 * streams) on two GPUs: the graphs fetch what the eager runs fetch, and
 * it is right; in sync form too, through the pipeline with every check,
 * and the seed's comp and comm forms run. */
START_TEST(test_graph_schedules) {
  static const char *const extra[] = {"tests/schedules/all_ops.sched",
                                      "tests/schedules/user_streams.sched"};
  const char *dir = OVL_SRCDIR "/schedules/good";
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 2, .timeout_s = 30};
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_world *world = NULL;
  ovl_error err = {0};
  DIR *d;
  struct dirent *e;
  size_t files = 0;
  char path[4096];

  if (ngpus < 2)
    return;
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  for (size_t k = 0;; k++) {
    ovl_program *prog = NULL;
    ovl_report *rep = NULL;
    ovl_report_summary sum;
    ovl_pipeline_opts pl = {
        .size = sizeof pl,
        .modes = OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC),
        .races = 1,
        .run = 1,
        .rtol = 1e-5,
        .atol = 1e-6,
        .run_opts = &(ovl_run_opts){
            .size = sizeof(ovl_run_opts), .iters = 2, .warmup = 1, .graph = 1}};
    if (k < sizeof extra / sizeof extra[0]) {
      snprintf(path, sizeof path, "%s/%s", OVL_SRCDIR, extra[k]);
    } else {
      size_t n;
      if ((e = readdir(d)) == NULL)
        break;
      n = strlen(e->d_name);
      if (n < 6 || strcmp(e->d_name + n - 6, ".sched") != 0)
        continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    }
    ck_assert_msg(ovl_program_load(path, &po, &prog, &err) == OVL_OK,
                  "%s: %s", path, err.msg);
    graph_equals_eager(world, prog);
    if (strstr(path, "seed_small") != NULL)
      pl.modes |= OVL_MODE_BIT(OVL_MODE_COMP) | OVL_MODE_BIT(OVL_MODE_COMM);
    ck_assert_msg(ovl_pipeline_run(world, prog, &pl, &rep, &err) == OVL_OK,
                  "%s: %s", path, err.msg);
    ovl_report_summary_get(rep, &sum);
    ck_assert_msg(sum.mismatched == 0 && sum.races == 0 &&
                      sum.mismatches == 0 && sum.deadlocks == 0,
                  "%s under graphs: %lld wrong, %llu races", path,
                  (long long)sum.mismatched, (unsigned long long)sum.races);
    ovl_report_free(rep);
    ovl_program_free(prog);
    files++;
  }
  closedir(d);
  ck_assert_uint_ge(files, 2 + 16);
  ovl_world_free(world);
}
END_TEST

START_TEST(test_graph_trace_spans) { trace_spans(true); }
END_TEST

/* A run as graphs is checked for the deadlocks of graphs: a receive left
 * on comm[0] across a host sync of calc, whose send the peer enqueues
 * after its own host sync, would hang as graphs (the host sync waits for
 * the receive), so the pipeline stops before running anything. */
START_TEST(test_graph_deadlock_check) {
  static const char text[] =
      "x = data(shape=[16], init=uniform)\n"
      "y = recv_v2(peer=1 - rank, out_shape=[16], ring_id=0)\n"
      "c_sync_calc_stream(x)\n"
      "send_v2(x, peer=1 - rank, ring_id=0, use_calc_stream=true)\n"
      "c_sync_comm_stream(y, ring_id=0)\n"
      "fetch(y)\n";
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 2, .timeout_s = 10};
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_pipeline_opts pl = {
      .size = sizeof pl,
      .modes = OVL_MODE_BIT(OVL_MODE_ASYNC),
      .races = 1,
      .run = 1,
      .rtol = 1e-5,
      .atol = 1e-6,
      .run_opts = &(ovl_run_opts){
          .size = sizeof(ovl_run_opts), .iters = 1, .warmup = 0, .graph = 1}};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_report *rep = NULL;
  ovl_report_summary sum;
  ovl_report_mode m;
  ovl_error err = {0};

  if (ngpus < 2)
    return;
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_program_parse(text, sizeof text - 1, "dl.sched", &po,
                                  &prog, &err) == OVL_OK,
                "%s", err.msg);
  ck_assert_msg(ovl_pipeline_run(world, prog, &pl, &rep, &err) == OVL_OK,
                "%s", err.msg);
  ovl_report_summary_get(rep, &sum);
  ck_assert_uint_eq(sum.deadlocks, 1);
  ck_assert_ptr_nonnull(ovl_report_not_run(rep));
  ck_assert_int_eq(ovl_report_mode_get(rep, 0, &m), 0);
  ck_assert_ptr_null(m.res);
  ovl_report_free(rep);
  ovl_program_free(prog);
  ovl_world_free(world);
}
END_TEST

/* A replay that hangs times out like an eager run and aborts cleanly, on
 * one GPU: a delay longer than the timeout in the graph, an allreduce
 * behind it. The host sync after the segment gives up, the abort ends the
 * delay kernel inside the graph, and the flight record has the graph's
 * calls, enqueued and not completed. The send and receive to itself give
 * the graph an NCCL kernel, whose references on the communicator the
 * abort must not wait for forever (the graphs are destroyed first). */
START_TEST(test_graph_timeout_one_gpu) {
  static const char text[] =
      "x = data(shape=[1024], init=uniform)\n"
      "group {\n"
      "  send_v2(x, peer=0, ring_id=0, use_calc_stream=true)\n"
      "  y = recv_v2(peer=0, out_shape=[1024], ring_id=0, "
      "use_calc_stream=true)\n"
      "}\n"
      "delay(us=5000000, stream=calc)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true)\n"
      "fetch(x, y)\n";
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 1, .timeout_s = 1};
  ovl_parse_opts po = {.size = sizeof po, .nranks = 1};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 0, .graph = 1};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_status st;
  double t0;

  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_program_parse(text, sizeof text - 1, "slow.sched", &po,
                                  &prog, &err) == OVL_OK,
                "%s", err.msg);
  t0 = ovl__now();
  st = ovl_world_run(world, prog, &ro, &res, &err);
  ck_assert_msg(st == OVL_ETIMEDOUT, "%s: %s", ovl_err_name(st), err.msg);
  ck_assert_msg(ovl__now() - t0 < 4.5, "took %g s (the delay was not "
                                       "ended by the abort?)",
                ovl__now() - t0);
  ck_assert_ptr_null(res);
  ck_assert_msg(strncmp(err.msg, "slow.sched:8:1: fetch on calc stream: "
                                 "rank 0: sync of calc stream: timed out "
                                 "after 1 s",
                        strlen("slow.sched:8:1: fetch on calc stream: "
                               "rank 0: sync of calc stream: timed out "
                               "after 1 s")) == 0,
                "%s", err.msg);
  ck_assert_msg(strstr(err.msg, "; flight record: rank 0 ring 0: enqueued "
                                "#3 c_allreduce_sum (slow.sched:7), "
                                "completed nothing") != NULL,
                "%s", err.msg);
  ovl_program_free(prog);
  ovl_world_free(world);
}
END_TEST

/* The same on two GPUs, where the replay hangs for want of a peer: the
 * allreduce only rank 0 runs is captured there and never completes; its
 * host sync gives up after the timeout, and the flight record says what
 * rank 0 enqueued (the graph's call, numbered as eager) and that nothing
 * completed. */
START_TEST(test_graph_timeout) {
  static const char text[] =
      "x = data(shape=[1024], init=uniform)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true, ranks=[0])\n"
      "fetch(x)\n";
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 2, .timeout_s = 1.5};
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0, .graph = 1};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_status st;
  double t0;

  if (ngpus < 2)
    return;
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_program_parse(text, sizeof text - 1, "hang.sched", &po,
                                  &prog, &err) == OVL_OK,
                "%s", err.msg);
  t0 = ovl__now();
  st = ovl_world_run(world, prog, &ro, &res, &err);
  ck_assert_msg(st == OVL_ETIMEDOUT, "%s: %s", ovl_err_name(st), err.msg);
  ck_assert_msg(ovl__now() - t0 < 30, "took %g s", ovl__now() - t0);
  ck_assert_msg(strstr(err.msg, "hang.sched:3:1: fetch on calc stream: rank "
                                "0: sync of calc stream: timed out after "
                                "1.5 s") != NULL,
                "%s", err.msg);
  ck_assert_msg(strstr(err.msg, "flight record: rank 0 ring 0: enqueued #1 "
                                "c_allreduce_sum (hang.sched:2), completed "
                                "nothing") != NULL,
                "%s", err.msg);
  ovl_program_free(prog);
  ovl_world_free(world);
}
END_TEST

/* ------------------------------------------------------------------ */
/* matmul_v2 on cuBLAS, through the executor, against the reference     */
/* ------------------------------------------------------------------ */

/* Run `text` once (one iteration) on a cuda world of `nranks` ranks (tf32
 * on or off) and compare every row of every fetched variable with the
 * float64 reference, with tolerances rtol, atol (OVL_TOL_DTYPE: each
 * dtype's). Returns the mismatched elements; *max_rel gets the largest
 * relative difference of a finite element. */
static int64_t matmul_run(const char *text, int nranks, bool tf32,
                          double rtol, double atol, double *max_rel) {
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = nranks, .timeout_s = 60};
  ovl_parse_opts po = {.size = sizeof po, .nranks = nranks};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_result *res = NULL;
  ovl_reference *ref = NULL;
  ovl_check chk;
  ovl_error err = {0};
  int64_t bad;

  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  if (tf32)
    CK_OK(ovl_world_set(world, "tf32", "on", E));
  ck_assert_msg(ovl_program_parse(text, strlen(text), "mm.sched", &po, &prog,
                                  &err) == OVL_OK,
                "%s", err.msg);
  ck_assert_msg(ovl_world_run(world, prog, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  /* Every row: the reference computes the products in full. */
  CK_OK(ovl_reference_compute_rows(prog, nranks, 0, &ref, E));
  CK_OK(ovl_check_result(prog, res, ref, rtol, atol, &chk, E));
  ck_assert_int_eq(chk.unchecked, 0);
  *max_rel = 0;
  for (int r = 0; r < nranks; r++)
    for (size_t f = 0; f < ovl_program_fetch_count(prog); f++) {
      ovl_var_info v;
      const double *g = ovl_result_fetched(res, r, f);
      const double *e = ovl_reference_fetched(ref, r, f);
      ovl_program_fetch_info(prog, f, &v);
      for (int64_t i = 0; g != NULL && i < v.numel; i++)
        if (isfinite(e[i]) && e[i] != 0 &&
            fabs(g[i] - e[i]) / fabs(e[i]) > *max_rel)
          *max_rel = fabs(g[i] - e[i]) / fabs(e[i]);
    }
  for (size_t k = 0; k < chk.nmismatch; k++)
    printf("  matmul mismatch: rank %d %s: %lld of %lld; first [%lld] got "
           "%.9g expected %.9g\n",
           chk.mismatch[k].rank, chk.mismatch[k].var,
           (long long)chk.mismatch[k].count, (long long)chk.mismatch[k].numel,
           (long long)chk.mismatch[k].first_index, chk.mismatch[k].got,
           chk.mismatch[k].expected);
  bad = chk.mismatched;
  ovl_check_release(&chk);
  ovl_reference_free(ref);
  ovl_result_free(res);
  ovl_program_free(prog);
  ovl_world_free(world);
  return bad;
}

/* The four transposes of a 300 x 200 x 1030 product of `dt` (per-rank
 * uniform inputs), on calc, on ring 0's comm stream and on a user stream
 * (cuBLAS with the rank's workspace, and without one). */
static void matmul_text(char *buf, size_t size, ovl_dtype dt) {
  const char *d = ovl_dtype_name(dt);
  snprintf(buf, size,
           "a = data(shape=[300, 1030], dtype=%s, init=uniform, seed=1, "
           "per_rank=true)\n"
           "at = data(shape=[1030, 300], dtype=%s, init=uniform, seed=2, "
           "per_rank=true)\n"
           "b = data(shape=[1030, 200], dtype=%s, init=uniform, seed=3, "
           "per_rank=true)\n"
           "bt = data(shape=[200, 1030], dtype=%s, init=uniform, seed=4, "
           "per_rank=true)\n"
           "nn = matmul_v2(a, b)\n"
           "tn = matmul_v2(at, b, trans_x=true, stream=comm, ring_id=0)\n"
           "nt = matmul_v2(a, bt, trans_y=true, stream=side)\n"
           "tt = matmul_v2(at, bt, trans_x=true, trans_y=true)\n"
           "c_sync_comm_stream(tn, ring_id=0)\n"
           "stream_sync(nt, stream=side)\n"
           "fetch(nn, tn, nt, tt)\n",
           d, d, d, d);
}

/* cuBLAS against the float64 reference in every dtype and transpose, on
 * one GPU and on all: within each dtype's default tolerance (float32:
 * rtol 1e-5, TF32 off). */
START_TEST(test_matmul_cublas) {
  static const ovl_dtype dts[4] = {OVL_DTYPE_FLOAT32, OVL_DTYPE_FLOAT64,
                                   OVL_DTYPE_FLOAT16, OVL_DTYPE_BFLOAT16};
  char text[2048];
  for (int nr = 1; nr <= all_ranks() && nr <= 2; nr++)
    for (int d = 0; d < 4; d++) {
      double rel;
      matmul_text(text, sizeof text, dts[d]);
      ck_assert_int_eq(matmul_run(text, nr, false, OVL_TOL_DTYPE,
                                  OVL_TOL_DTYPE, &rel),
                       0);
      printf("matmul_v2 %s on %d GPU(s): largest relative difference from "
             "the float64 reference %.3g\n",
             ovl_dtype_name(dts[d]), nr, rel);
      if (dts[d] == OVL_DTYPE_FLOAT64)
        ck_assert(rel < 1e-12);
    }
}
END_TEST

/* The TF32 policy. Inputs 1 + 2^-12 (exact in float32, not in TF32's 10
 * fraction bits) times 1, summed 1030 times: the float32 product with
 * TF32 off is the reference's value exactly (every partial sum is exact
 * in float32); with tf32=on cuBLAS may round the inputs to 1, 2.4e-4 off,
 * and the results stay within TF32's 1e-3. */
START_TEST(test_matmul_tf32) {
  static const char text[] =
      "a = data(shape=[256, 1030], init=fill, value=1.000244140625)\n"
      "b = data(shape=[1030, 256], init=fill, value=1.0)\n"
      "c = matmul_v2(a, b)\n"
      "fetch(c)\n";
  double rel_off, rel_on;
  ck_assert_int_eq(matmul_run(text, 1, false, 0, 0, &rel_off), 0);
  ck_assert(rel_off == 0);
  ck_assert_int_eq(matmul_run(text, 1, true, 1e-3, 0, &rel_on), 0);
  printf("matmul_v2 float32: TF32 off exact; tf32=on relative difference "
         "%.3g (%s)\n",
         rel_on, rel_on > 0 ? "TF32 used" : "cuBLAS did not use TF32 here");
}
END_TEST

/* The tuning key: on or off, anything else refused. */
START_TEST(test_tf32_key) {
  ovl_world_opts wo = {.size = sizeof wo, .backend = "cuda", .nranks = 1};
  ovl_world *world = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_world_set(world, "tf32", "maybe", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "tf32: 'maybe' is not on or off");
  CK_OK(ovl_world_set(world, "tf32", "off", E));
  ovl_world_free(world);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The race replay (src/run/replay.c) on GPUs: every race of every     */
/* schedule in schedules/bad/ (as written, and without its own delay    */
/* lines), and of the seed without its final c_wait_comm, shows as      */
/* wrong numbers: the delay is the delay kernel on the first access's   */
/* stream.                                                             */
/* ------------------------------------------------------------------ */

#ifndef OVL_SRCDIR
#define OVL_SRCDIR "."
#endif

/* The file's text without the lines `drop` begins, after any blanks
 * (NULL: none); malloc'd, *len its length. */
static char *read_without(const char *path, const char *drop, size_t *len) {
  FILE *f = fopen(path, "r");
  char line[4096];
  char *text = NULL;
  size_t n = 0;
  ck_assert_msg(f != NULL, "cannot open %s", path);
  while (fgets(line, sizeof line, f) != NULL) {
    size_t k = strlen(line), lead = strspn(line, " \t");
    if (drop != NULL && strncmp(line + lead, drop, strlen(drop)) == 0)
      continue;
    text = realloc(text, n + k + 1);
    ck_assert_ptr_nonnull(text);
    memcpy(text + n, line, k + 1);
    n += k;
  }
  fclose(f);
  *len = n;
  return text;
}

/* Replay every race of `text` on `world`; every one must show. Returns how
 * many races were replayed. */
static size_t replay_all_shown(ovl_world *world, const char *name,
                               const char *text, size_t len, int nranks) {
  ovl_parse_opts po = {.size = sizeof po, .nranks = nranks};
  ovl_pipeline_opts pl = {.size = sizeof pl,
                          .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                   OVL_MODE_BIT(OVL_MODE_ASYNC),
                          .races = 1,
                          .rtol = 1e-5,
                          .atol = 1e-6,
                          .replay = OVL_REPLAY_ALL};
  ovl_program *prog = NULL;
  ovl_report *r = NULL;
  ovl_error err = {0};
  size_t total = 0;

  ck_assert_msg(ovl_program_parse(text, len, name, &po, &prog, &err) ==
                    OVL_OK,
                "%s: %s", name, err.msg);
  ck_assert_msg(ovl_pipeline_run(world, prog, &pl, &r, &err) == OVL_OK,
                "%s: %s", name, err.msg);
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_replay rp;
    ck_assert_int_eq(ovl_report_replay_get(r, i, &rp), 0);
    for (size_t k = 0; k < rp.n; k++) {
      const ovl_replay *x = &rp.replays[k];
      ck_assert_msg(x->shown, "%s: race %zu not shown (delay %g us on %s "
                              "before line %d, plain run %g s): %s",
                    name, x->race + 1, x->delay_us, x->stream_name, x->line,
                    rp.plain_s, x->why);
      ck_assert(x->mismatched > 0);
      total++;
    }
  }
  ovl_report_free(r);
  ovl_program_free(prog);
  return total;
}

START_TEST(test_replay_bad_schedules) {
  const char *dir = OVL_SRCDIR "/schedules/bad";
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 2, .timeout_s = 30};
  ovl_world *world = NULL;
  ovl_error err = {0};
  DIR *d;
  struct dirent *e;
  size_t files = 0, races = 0, len;
  char path[4096], *text;

  if (ngpus < 2)
    return; /* the collectives' races need two ranks to change a sum */
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 6, ".sched") != 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    text = read_without(path, NULL, &len);
    size_t shown = replay_all_shown(world, path, text, len, 2);
    free(text);
    if (shown == 0)
      continue; /* ranks that differ: a mismatch or deadlock, no race */
    races += shown;
    text = read_without(path, "delay(", &len);
    races += replay_all_shown(world, path, text, len, 2);
    free(text);
    files++;
  }
  closedir(d);
  ck_assert_uint_ge(files, 11);
  ck_assert_uint_ge(races, 2 * files);
  /* The seed without its final c_wait_comm, at full size. */
  text = read_without(OVL_SRCDIR "/schedules/seed.sched", "c_wait_comm",
                      &len);
  ck_assert_uint_eq(replay_all_shown(world, "seed_no_wait_comm.sched", text,
                                     len, 2),
                    1);
  free(text);
  ovl_world_free(world);
}
END_TEST

/* ------------------------------------------------------------------ */
/* float16 and bfloat16 allreduce of two GPUs, bit for bit             */
/* ------------------------------------------------------------------ */

/* Issue 17: a 16-bit allreduce of 2 ranks is one step of NCCL's FuncSum
 * (__hadd: a + b rounded once to nearest even), which is what the
 * reference predicts (its double a + b rounded once to the dtype) and the
 * cpu backend computes. Checked through the public API (the schedule
 * language, the executor, NCCL, the reference), bit for bit (zeros with
 * their sign), on a large buffer (NCCL's Simple protocol), a small one
 * (LL) in place on calc, and a product; against the reference and against
 * a + b (a * b) rounded here. The inputs round: the test counts the sums
 * that are not exact in the dtype and the ties among them, and needs both.
 * Differences are printed with their inputs, in hex, for the GPU log. */
static void half_allreduce_case(ovl_world *world, ovl_dtype dt) {
  const char *dn = ovl_dtype_name(dt);
  char text[1024];
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 0};
  ovl_program *prog = NULL;
  ovl_reference *ref = NULL;
  ovl_result *res = NULL;
  ovl_error err = {0};
  int64_t checked = 0, differ = 0, ref_differ = 0, rounded = 0, ties = 0;
  int printed = 0;

  snprintf(text, sizeof text,
           "x = data(shape=[4194304], dtype=%s, init=uniform, seed=11, "
           "per_rank=true)\n"
           "s = data(shape=[4099], dtype=%s, init=special, seed=12, "
           "per_rank=true)\n"
           "t = data(shape=[4099], dtype=%s, init=special, seed=13, "
           "per_rank=true)\n"
           "y = c_allreduce_sum(x, ring_id=0)\n"
           "c_allreduce_sum(s, ring_id=0, use_calc_stream=true)\n"
           "p = c_allreduce_prod(t, ring_id=0)\n"
           "c_wait_comm(y, p, ring_id=0)\n"
           "fetch(y, s, p)\n",
           dn, dn, dn);
  ck_assert_msg(ovl_program_parse(text, strlen(text), "half_allreduce.sched",
                                  &po, &prog, &err) == OVL_OK,
                "%s", err.msg);
  ck_assert_msg(ovl_reference_compute(prog, 2, &ref, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_world_run(world, prog, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  for (size_t f = 0; f < prog->nfetch; f++) {
    const ovl__var *out = &prog->vars[prog->fetch[f]];
    /* y = sum(x); s = sum(s) in place; p = prod(t). */
    const char *in_name = f == 0 ? "x" : f == 1 ? "s" : "t";
    const bool prod = f == 2;
    const ovl__var *in = NULL;
    for (size_t v = 0; v < prog->nvars; v++)
      if (strcmp(prog->vars[v].name, in_name) == 0)
        in = &prog->vars[v];
    ck_assert_ptr_nonnull(in);
    for (int r = 0; r < 2; r++) {
      const double *got = ovl_result_fetched(res, r, f);
      const double *exp = ovl_reference_fetched(ref, r, f);
      ck_assert(got != NULL && exp != NULL);
      for (int64_t i = 0; i < out->numel; i++) {
        double a = ovl__var_init_value(in, 0, i);
        double b = ovl__var_init_value(in, 1, i);
        double exact = prod ? a * b : a + b; /* exact in double */
        double want = ovl__dtype_round(dt, exact);
        bool same = (isnan(got[i]) && isnan(want)) ||
                    (got[i] == want && signbit(got[i]) == signbit(want));
        bool ref_same = (isnan(exp[i]) && isnan(want)) ||
                        (exp[i] == want && signbit(exp[i]) == signbit(want));
        checked++;
        if (r == 0 && !isnan(want) && want != exact && !isinf(want)) {
          rounded++;
          /* A tie: exactly halfway between want and its neighbour. */
          double other = ovl__dtype_round(dt, exact + (exact - want));
          ties += other != want && exact - want == (other - want) / 2;
        }
        ref_differ += !ref_same;
        if (same)
          continue;
        differ++;
        if (printed++ < 10)
          printf("%s %s rank %d %s[%lld]: got %a, want %a (%s of %a and %a; "
                 "reference %a)\n",
                 dn, prod ? "prod" : "sum", r, out->name, (long long)i,
                 got[i], want, prod ? "product" : "sum", a, b, exp[i]);
      }
    }
  }
  printf("%s allreduce on 2 GPUs: %lld elements checked bit for bit, %lld "
         "differ from a %s b rounded once (%lld results rounded, %lld of "
         "them ties); the reference differs at %lld\n",
         dn, (long long)checked, (long long)differ, "+", (long long)rounded,
         (long long)ties, (long long)ref_differ);
  fflush(stdout); /* Check's child: the lines reach the log before a
                   * failure ends it */
  ck_assert_msg(differ == 0, "%s: %lld of %lld elements differ", dn,
                (long long)differ, (long long)checked);
  ck_assert_msg(ref_differ == 0, "%s: the reference differs at %lld", dn,
                (long long)ref_differ);
  ck_assert_int_gt(rounded, 1000);
  ck_assert_int_gt(ties, 100);
  ovl_result_free(res);
  ovl_reference_free(ref);
  ovl_program_free(prog);
}

START_TEST(test_half_allreduce_two_gpus) {
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cuda", .nranks = 2, .timeout_s = 30};
  ovl_world *world = NULL;
  ovl_error err = {0};
  if (ngpus < 2)
    return;
  ck_assert_msg(ovl_world_create(&wo, &world, &err) == OVL_OK, "%s",
                err.msg);
  half_allreduce_case(world, OVL_DTYPE_BFLOAT16);
  half_allreduce_case(world, OVL_DTYPE_FLOAT16);
  ovl_world_free(world);
}
END_TEST

static Suite *cuda_suite(void) {
  Suite *s = suite_create("cuda");
  TCase *tc = tcase_create("cuda");
  /* NCCL setup alone takes seconds; CK_TIMEOUT_MULTIPLIER still applies. */
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_devices);
  tcase_add_test(tc, test_poison);
  tcase_add_test(tc, test_elementwise);
  tcase_add_test(tc, test_collectives_one_gpu);
  tcase_add_test(tc, test_collectives_all_gpus);
  tcase_add_test(tc, test_two_rings);
  tcase_add_test(tc, test_wait_semantics);
  tcase_add_test(tc, test_named_events);
  tcase_add_test(tc, test_chaos_refused);
  tcase_add_test(tc, test_delay);
  tcase_add_test(tc, test_timeout);
  tcase_add_test(tc, test_stuck_collective);
  tcase_add_test(tc, test_p2p);
  tcase_add_test(tc, test_stuck_send);
  tcase_add_test(tc, test_invalid);
  tcase_add_test(tc, test_trace_spans);
  tcase_add_test(tc, test_replay_bad_schedules);
  tcase_add_test(tc, test_half_allreduce_two_gpus);
  suite_add_tcase(s, tc);
  /* Its own case, so that CK_RUN_CASE=graph runs these alone. */
  tc = tcase_create("graph");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_graph_capture);
  tcase_add_test(tc, test_graph_segments);
  tcase_add_test(tc, test_graph_schedules);
  tcase_add_test(tc, test_graph_trace_spans);
  tcase_add_test(tc, test_graph_timeout_one_gpu);
  tcase_add_test(tc, test_graph_timeout);
  tcase_add_test(tc, test_graph_deadlock_check);
  suite_add_tcase(s, tc);

  /* CK_RUN_CASE=matmul runs these alone (.gpu scripts). */
  tc = tcase_create("matmul");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_matmul_cublas);
  tcase_add_test(tc, test_matmul_tf32);
  tcase_add_test(tc, test_tf32_key);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr;
  int failed;

  ngpus = probe_gpus();
  if (ngpus == 0) {
    printf("test_cuda: no GPU visible, skipping\n");
    return 77;
  }
  sr = srunner_create(cuda_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
