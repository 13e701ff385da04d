/*
 * Tests of the cpu backend: streams that really run concurrently, CUDA event
 * semantics, elementwise kernels, and collectives that rendezvous across
 * rank threads.
 *
 * Rank threads never call ck_assert (Check's failure path is not meant for
 * other threads): they note the first failure in their rank_arg, and the
 * test's own thread asserts after joining them.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "check_util.h"

static const ovl__backend_ops *const B = &ovl__backend_cpu;

#define CALC OVL_STREAM_CALC
#define COMM0 OVL_STREAM_COMM(0)
#define EV_COMPUTE0 OVL_EVENT_COMPUTE(0)
#define EV_COMM0 OVL_EVENT_COMM(0)

static void sleep_s(double s) {
  struct timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  nanosleep(&ts, NULL);
}

#define CK_OK(call)                                                           \
  do {                                                                        \
    ovl_error e_;                                                             \
    ovl_status s_ = (call);                                                   \
    ck_assert_msg(s_ == OVL_OK, "%s: %s: %s", #call, ovl_err_name(s_),       \
                  s_ == OVL_OK ? "" : e_.msg);                                \
  } while (0)
/* CK_OK's calls pass &e_ as their error argument. */
#define E (&e_)

/* ------------------------------------------------------------------ */
/* One rank driven by the test's own thread                            */
/* ------------------------------------------------------------------ */

typedef struct env {
  ovl__bworld *bw;
  ovl__brank *br;
} env;

static void env_open(env *v, int nrings, double timeout_s) {
  CK_OK(B->world_init(OVL__ONE_PROCESS(1), timeout_s, &v->bw, E));
  CK_OK(B->world_rings(v->bw, nrings, (1u << nrings) - 1, E));
  CK_OK(B->rank_init(v->bw, 0, nrings, &v->br, E));
}

static void env_close(env *v) {
  B->rank_fini(v->br);
  B->world_fini(v->bw);
}

static float *f32_buf(ovl__brank *br, size_t n, float fill) {
  void *p;
  CK_OK(B->mem_alloc(br, n * sizeof(float), &p, E));
  if (!isnan(fill)) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
      h[i] = fill;
    CK_OK(B->mem_upload(br, p, h, n * sizeof *h, E));
    free(h);
  }
  return p;
}

static float f32_at(ovl__brank *br, const float *dev, size_t i) {
  float v;
  CK_OK(B->mem_download(br, &v, dev + i, sizeof v, E));
  return v;
}

/* ------------------------------------------------------------------ */
/* Several rank threads                                                */
/* ------------------------------------------------------------------ */

#define MAX_T 8

typedef struct rank_arg {
  ovl__bworld *bw;
  int rank, nranks;
  void *ctx;
  void (*fn)(struct rank_arg *);
  char fail[1024];          /* first failed expectation */
  ovl_status st[MAX_T];     /* statuses a test wants to look at */
  char msg[MAX_T][OVL_ERROR_MSG_MAX];
  double t[MAX_T];          /* durations a test wants to look at */
} rank_arg;

static void rfail(rank_arg *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rfail(rank_arg *a, const char *fmt, ...) {
  va_list ap;
  if (a->fail[0] != '\0')
    return;
  int n = snprintf(a->fail, sizeof a->fail, "rank %d: ", a->rank);
  va_start(ap, fmt);
  vsnprintf(a->fail + n, sizeof a->fail - (size_t)n, fmt, ap);
  va_end(ap);
}

#define RCHECK(a, cond, ...)                                                  \
  do {                                                                        \
    if (!(cond))                                                              \
      rfail(a, __VA_ARGS__);                                                  \
  } while (0)

#define ROK(a, call)                                                          \
  do {                                                                        \
    ovl_error e_;                                                             \
    ovl_status s_ = (call);                                                   \
    RCHECK(a, s_ == OVL_OK, "%s: %s: %s", #call, ovl_err_name(s_),           \
           s_ == OVL_OK ? "" : e_.msg);                                       \
  } while (0)

static void *rank_main(void *p) {
  rank_arg *a = p;
  a->fn(a);
  return NULL;
}

/* Run fn on nranks threads and assert that none noted a failure. */
static void run_ranks(ovl__bworld *bw, int nranks, void (*fn)(rank_arg *),
                      void *ctx, rank_arg *args) {
  pthread_t th[OVL_MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    memset(&args[r], 0, sizeof args[r]);
    args[r].bw = bw;
    args[r].rank = r;
    args[r].nranks = nranks;
    args[r].ctx = ctx;
    args[r].fn = fn;
    ck_assert_int_eq(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
  }
  for (int r = 0; r < nranks; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < nranks; r++)
    ck_assert_msg(args[r].fail[0] == '\0', "%s", args[r].fail);
}

/* ------------------------------------------------------------------ */
/* Basics                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_basics) {
  ovl__bworld *bw;
  ovl__brank *br;
  ovl_error err;
  void *p;

  ck_assert_str_eq(B->name, "cpu");
  ck_assert_int_ge(B->device_count(), OVL_MAX_RANKS);
  ck_assert_int_eq(B->default_ranks(), 2);
  ck_assert_int_eq(B->world_init(OVL__ONE_PROCESS(0), 0, &bw, &err), OVL_EINVAL);
  ck_assert_int_eq(B->world_init(OVL__ONE_PROCESS(OVL_MAX_RANKS + 1), 0, &bw, &err), OVL_EINVAL);
  CK_OK(B->world_init(OVL__ONE_PROCESS(3), 0, &bw, E));
  ck_assert_str_eq(B->world_devices(bw), "3 emulated (cpu)");
  CK_OK(B->world_rings(bw, 1, 1u, E));
  CK_OK(B->world_rings(bw, 2, 3u, E)); /* grows */
  CK_OK(B->world_rings(bw, 1, 1u, E)); /* never shrinks */
  ck_assert_int_eq(B->world_rings(bw, OVL_MAX_RINGS + 1, 0, &err), OVL_EINVAL);
  ck_assert_int_eq(B->rank_init(bw, 3, 1, &br, &err), OVL_EINVAL);
  CK_OK(B->rank_init(bw, 1, 2, &br, E));
  ck_assert_int_eq(B->stream_sync(br, OVL_STREAM_COMM(2), &err), OVL_EINVAL);
  ck_assert_int_eq(B->event_record(br, 4, CALC, &err), OVL_EINVAL);
  ck_assert_int_eq(B->stream_wait_event(br, CALC, -1, &err), OVL_EINVAL);
  CK_OK(B->mem_alloc(br, 16, &p, E));
  ck_assert_int_eq(B->collective(br, CALC, 2, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                                 OVL_DTYPE_FLOAT32, p, p, 4, 0, 0, &err),
                   OVL_EINVAL);
  ck_assert_msg(strstr(err.msg, "rank 1") != NULL, "%s", err.msg);
  ck_assert_int_eq(B->collective(br, CALC, 0, OVL_COLL_BROADCAST, OVL_RED_SUM,
                                 OVL_DTYPE_FLOAT32, p, p, 4, 3, 0, &err),
                   OVL_EINVAL);
  /* Nothing was queued by the refused calls. */
  CK_OK(B->stream_sync(br, CALC, E));
  B->mem_free(br, p);
  B->rank_fini(br);
  B->world_fini(bw);
}
END_TEST

START_TEST(test_alloc_poison) {
  env v;
  void *p;
  env_open(&v, 1, 0);
  CK_OK(B->mem_alloc(v.br, 100 * sizeof(float), &p, E));
  ck_assert_uint_eq((uintptr_t)p % 64, 0);
  float f[100];
  CK_OK(B->mem_download(v.br, f, p, sizeof f, E));
  for (int i = 0; i < 100; i++)
    ck_assert_msg(isnan(f[i]), "float %d not NaN", i);
  B->mem_free(v.br, p);

  CK_OK(B->mem_alloc(v.br, 100 * sizeof(double), &p, E));
  ck_assert_uint_eq((uintptr_t)p % 64, 0);
  double d[100], h[100];
  CK_OK(B->mem_download(v.br, d, p, sizeof d, E));
  for (int i = 0; i < 100; i++) {
    ck_assert_msg(isnan(d[i]), "double %d not NaN", i);
    h[i] = i * 0.5;
  }
  CK_OK(B->mem_upload(v.br, p, h, sizeof h, E));
  CK_OK(B->mem_download(v.br, d, p, sizeof d, E));
  ck_assert(memcmp(d, h, sizeof d) == 0);
  B->mem_free(v.br, p);
  env_close(&v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Streams and events                                                  */
/* ------------------------------------------------------------------ */

START_TEST(test_streams_concurrent) {
  env v;
  env_open(&v, 1, 0);
  float *x = f32_buf(v.br, 8, 5.0f), *y = f32_buf(v.br, 8, 0.0f);
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 300e3, E));
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, x,
                       NULL, 0, 0, 8, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  double t_comm = ovl__now() - t0;
  ck_assert_msg(t_comm < 0.15, "comm waited %.3f s for calc's delay", t_comm);
  ck_assert_float_eq(f32_at(v.br, y, 7), 5.0f);
  CK_OK(B->stream_sync(v.br, CALC, E));
  double t_calc = ovl__now() - t0;
  ck_assert_msg(t_calc >= 0.299, "calc delay took only %.3f s", t_calc);
  B->mem_free(v.br, x);
  B->mem_free(v.br, y);
  env_close(&v);
}
END_TEST

START_TEST(test_fifo) {
  env v;
  env_open(&v, 1, 0);
  float *x = f32_buf(v.br, 16, 3.0f), *a = f32_buf(v.br, 16, NAN);
  /* A delay first, so that the rest is queued before any of it runs. */
  CK_OK(B->delay(v.br, CALC, 20e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, a, x,
                       NULL, 0, 0, 16, E)); /* 3 */
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_SCALE, OVL_DTYPE_FLOAT32, a, a,
                       NULL, 2, 0, 16, E)); /* 6 */
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_SCALE, OVL_DTYPE_FLOAT32, a, a,
                       NULL, 1, 3, 16, E)); /* 9 */
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_MUL, OVL_DTYPE_FLOAT32, a, a, a,
                       0, 0, 16, E)); /* 81 */
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_SUB, OVL_DTYPE_FLOAT32, a, a, x,
                       0, 0, 16, E)); /* 78 */
  CK_OK(B->stream_sync(v.br, CALC, E));
  for (int i = 0; i < 16; i++)
    ck_assert_float_eq(f32_at(v.br, a, (size_t)i), 78.0f);
  B->mem_free(v.br, x);
  B->mem_free(v.br, a);
  env_close(&v);
}
END_TEST

/* A later record replaces the earlier one: the wait is for op2. */
START_TEST(test_event_record_replaces) {
  env v;
  env_open(&v, 1, 0);
  float *one = f32_buf(v.br, 4, 1.0f), *two = f32_buf(v.br, 4, 2.0f);
  float *x = f32_buf(v.br, 4, 0.0f), *y = f32_buf(v.br, 4, 0.0f);
  CK_OK(B->delay(v.br, CALC, 30e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, one,
                       NULL, 0, 0, 4, E)); /* op1 */
  CK_OK(B->event_record(v.br, EV_COMPUTE0, CALC, E));
  CK_OK(B->delay(v.br, CALC, 150e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, two,
                       NULL, 0, 0, 4, E)); /* op2 */
  CK_OK(B->event_record(v.br, EV_COMPUTE0, CALC, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, EV_COMPUTE0, E));
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, x,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  ck_assert_float_eq(f32_at(v.br, y, 0), 2.0f);
  CK_OK(B->stream_sync(v.br, CALC, E));
  B->mem_free(v.br, one);
  B->mem_free(v.br, two);
  B->mem_free(v.br, x);
  B->mem_free(v.br, y);
  env_close(&v);
}
END_TEST

/* The record is a snapshot taken when it is called: work queued after it
 * is not waited for, even though it is queued before the wait. */
START_TEST(test_event_snapshot) {
  env v;
  env_open(&v, 1, 0);
  float *one = f32_buf(v.br, 4, 1.0f), *two = f32_buf(v.br, 4, 2.0f);
  float *x = f32_buf(v.br, 4, 0.0f), *y = f32_buf(v.br, 4, 0.0f);
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 30e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, one,
                       NULL, 0, 0, 4, E));
  CK_OK(B->event_record(v.br, EV_COMPUTE0, CALC, E));
  CK_OK(B->delay(v.br, CALC, 300e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, two,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, EV_COMPUTE0, E));
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, x,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  double t = ovl__now() - t0;
  ck_assert_float_eq(f32_at(v.br, y, 0), 1.0f);
  ck_assert_msg(t >= 0.029 && t < 0.2, "comm finished after %.3f s", t);
  CK_OK(B->stream_sync(v.br, CALC, E));
  ck_assert_float_eq(f32_at(v.br, x, 0), 2.0f);
  B->mem_free(v.br, one);
  B->mem_free(v.br, two);
  B->mem_free(v.br, x);
  B->mem_free(v.br, y);
  env_close(&v);
}
END_TEST

START_TEST(test_wait_never_recorded) {
  env v;
  env_open(&v, 1, 0);
  float *x = f32_buf(v.br, 4, 4.0f), *y = f32_buf(v.br, 4, 0.0f);
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 300e3, E));
  /* A record of another event changes nothing for this one. */
  CK_OK(B->event_record(v.br, EV_COMM0, CALC, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, EV_COMPUTE0, E));
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, x,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  double t = ovl__now() - t0;
  ck_assert_msg(t < 0.15, "comm blocked %.3f s on a never-recorded event", t);
  ck_assert_float_eq(f32_at(v.br, y, 0), 4.0f);
  CK_OK(B->stream_sync(v.br, CALC, E));
  B->mem_free(v.br, x);
  B->mem_free(v.br, y);
  env_close(&v);
}
END_TEST

/* calc: delay, x = 7; comm reads x with or without waiting for calc. */
static float producer_consumer(bool wait, bool upload_x) {
  env v;
  env_open(&v, 1, 0);
  float *seven = f32_buf(v.br, 4, 7.0f);
  float *x = f32_buf(v.br, 4, upload_x ? 0.0f : NAN);
  float *y = f32_buf(v.br, 4, -1.0f);
  CK_OK(B->delay(v.br, CALC, 50e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, seven,
                       NULL, 0, 0, 4, E));
  if (wait) {
    CK_OK(B->event_record(v.br, EV_COMPUTE0, CALC, E));
    CK_OK(B->stream_wait_event(v.br, COMM0, EV_COMPUTE0, E));
  }
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, x,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  float got = f32_at(v.br, y, 3);
  CK_OK(B->stream_sync(v.br, CALC, E));
  ck_assert_float_eq(f32_at(v.br, x, 3), 7.0f);
  B->mem_free(v.br, seven);
  B->mem_free(v.br, x);
  B->mem_free(v.br, y);
  env_close(&v);
  return got;
}

START_TEST(test_wait_orders) { ck_assert_float_eq(producer_consumer(true, true), 7.0f); }
END_TEST

START_TEST(test_missing_wait_races) {
  ck_assert_float_eq(producer_consumer(false, true), 0.0f);
  ck_assert(isnan(producer_consumer(false, false)));
}
END_TEST

START_TEST(test_sync_blocks) {
  env v;
  env_open(&v, 1, 0);
  float *seven = f32_buf(v.br, 4, 7.0f), *x = f32_buf(v.br, 4, 0.0f);
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 100e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, seven,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, CALC, E));
  double t = ovl__now() - t0;
  ck_assert_msg(t >= 0.099, "sync returned after %.3f s", t);
  ck_assert_float_eq(f32_at(v.br, x, 0), 7.0f);
  /* A sync of an idle stream returns at once. */
  t0 = ovl__now();
  CK_OK(B->stream_sync(v.br, CALC, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  ck_assert(ovl__now() - t0 < 0.05);
  B->mem_free(v.br, seven);
  B->mem_free(v.br, x);
  env_close(&v);
}
END_TEST

/* A wait whose source spends a timeout in one command (here a delay) fails
 * its stream; a host sync of such a stream fails too. The host sync of the
 * waiting stream does not time out itself: it reports the wait's error. */
START_TEST(test_wait_and_sync_timeout) {
  env v;
  ovl_error err;
  env_open(&v, 1, 0.2);
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 1.0e6, E));
  CK_OK(B->event_record(v.br, EV_COMPUTE0, CALC, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, EV_COMPUTE0, E));
  ck_assert_int_eq(B->stream_sync(v.br, COMM0, &err), OVL_ETIMEDOUT);
  double t = ovl__now() - t0;
  ck_assert_msg(t > 0.15 && t < 0.5, "wait failed after %.3f s", t);
  ck_assert_msg(strstr(err.msg, "rank 0: comm[0] stream: waited") != NULL &&
                    strstr(err.msg, "of calc stream") != NULL,
                "%s", err.msg);
  ck_assert_int_eq(B->stream_sync(v.br, CALC, &err), OVL_ETIMEDOUT);
  ck_assert_msg(strstr(err.msg, "rank 0: calc stream: sync timed out") != NULL,
                "%s", err.msg);
  t = ovl__now() - t0;
  ck_assert_msg(t < 0.99, "sync failed after %.3f s", t);
  env_close(&v); /* joins the worker once its delay is over */
}
END_TEST

/* events_reserve: named events after the per-ring ones, with the same
 * semantics; never shrinks; a new event starts never recorded. */
START_TEST(test_events_reserve) {
  env v;
  ovl_error err;
  env_open(&v, 1, 0);
  const int named0 = OVL_EVENT_NAMED(1, 0), named2 = OVL_EVENT_NAMED(1, 2);
  ck_assert_int_eq(named0, 2);
  /* Only the 2 per-ring events exist before the reserve. */
  ck_assert_int_eq(B->event_record(v.br, named0, CALC, &err), OVL_EINVAL);
  ck_assert_int_eq(B->stream_wait_event(v.br, COMM0, named0, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(B->events_reserve(v.br, -1, &err), OVL_EINVAL);
  CK_OK(B->events_reserve(v.br, 2, E)); /* what it has: nothing to do */
  CK_OK(B->events_reserve(v.br, named2 + 1, E));
  CK_OK(B->events_reserve(v.br, 1, E)); /* never shrinks */
  ck_assert_int_eq(B->event_record(v.br, named2 + 1, CALC, &err), OVL_EINVAL);

  float *one = f32_buf(v.br, 4, 1.0f), *two = f32_buf(v.br, 4, 2.0f);
  float *x = f32_buf(v.br, 4, 0.0f), *y = f32_buf(v.br, 4, 0.0f);
  float *z = f32_buf(v.br, 4, 0.0f);
  /* A never-recorded named event orders nothing. */
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 300e3, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, named0, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  ck_assert_msg(ovl__now() - t0 < 0.15, "waited on a never-recorded event");
  /* Recorded after x = 1 on calc: comm reads 1, and the per-ring events
   * are independent of it. */
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, one,
                       NULL, 0, 0, 4, E));
  CK_OK(B->event_record(v.br, named2, CALC, E));
  CK_OK(B->event_record(v.br, EV_COMPUTE0, COMM0, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, named2, E));
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, x,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  ck_assert_float_eq(f32_at(v.br, y, 0), 1.0f);
  /* Re-recorded on the idle comm stream: the wait no longer covers calc's
   * delayed write of 2, so comm reads the old 1. */
  CK_OK(B->delay(v.br, CALC, 100e3, E));
  CK_OK(B->elementwise(v.br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, x, two,
                       NULL, 0, 0, 4, E));
  CK_OK(B->event_record(v.br, named2, CALC, E));
  CK_OK(B->event_record(v.br, named2, COMM0, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, named2, E));
  CK_OK(B->elementwise(v.br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, z, x,
                       NULL, 0, 0, 4, E));
  CK_OK(B->stream_sync(v.br, COMM0, E));
  ck_assert_float_eq(f32_at(v.br, z, 0), 1.0f);
  CK_OK(B->stream_sync(v.br, CALC, E));
  ck_assert_float_eq(f32_at(v.br, x, 0), 2.0f);
  B->mem_free(v.br, one);
  B->mem_free(v.br, two);
  B->mem_free(v.br, x);
  B->mem_free(v.br, y);
  B->mem_free(v.br, z);
  env_close(&v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Chaos                                                               */
/* ------------------------------------------------------------------ */

/* Seconds one stream takes to run `n` tiny kernels, with chaos `seed`
 * (0: off). */
static double time_kernels(unsigned seed, int n) {
  ovl__bworld *bw;
  ovl__brank *br;
  char v[32];
  snprintf(v, sizeof v, "%u", seed);
  CK_OK(B->world_init(OVL__ONE_PROCESS(1), 0, &bw, E));
  if (seed != 0)
    CK_OK(B->world_set(bw, "chaos_seed", v, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  CK_OK(B->rank_init(bw, 0, 1, &br, E));
  float *x[2] = {f32_buf(br, 4, 1.0f), f32_buf(br, 4, 1.0f)};
  double t0 = ovl__now();
  for (int i = 0; i < n; i++)
    CK_OK(B->elementwise(br, i % 2 ? COMM0 : CALC, OVL_EW_SCALE,
                         OVL_DTYPE_FLOAT32, x[i % 2], x[i % 2], NULL, 1.0,
                         0.0, 4, E));
  CK_OK(B->stream_sync(br, CALC, E));
  CK_OK(B->stream_sync(br, COMM0, E));
  double t = ovl__now() - t0;
  B->mem_free(br, x[0]);
  B->mem_free(br, x[1]);
  B->rank_fini(br);
  B->world_fini(bw);
  return t;
}

/* With a seed, every command waits a little first (0.4 ms on average).
 * The delays are a fixed sequence per (seed, rank, stream): with seed
 * 12345, the first 100 of rank 0's calc stream add up to 44.4 ms and those
 * of its comm[0] stream to 44.7 ms, so 100 kernels on each of the two take
 * at least 44 ms, where they take microseconds without chaos. */
START_TEST(test_chaos_delays_commands) {
  double off = time_kernels(0, 200);
  double on = time_kernels(12345, 200);
  ck_assert_msg(on >= 0.044, "200 kernels with chaos took %.4f s", on);
  ck_assert_msg(on < 10.0, "200 kernels with chaos took %.4f s", on);
  ck_assert_msg(off < 10.0, "200 kernels without chaos took %.4f s", off);
}
END_TEST

/* Chaos is the cpu backend's only knob: the cuda ones are refused with the
 * message the executor gave before the backend had any, whatever their
 * value; a seed that is not a number is refused too. */
START_TEST(test_tune_refuses_cuda_knobs) {
  ovl__bworld *bw;
  ovl_error err;
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 0, &bw, E));
  ck_assert_int_eq(B->world_set(bw, "comm_priority", "high", &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "backend 'cpu' has no comm stream priority or "
                            "NCCL CTA limits (the cuda backend has)");
  ck_assert_int_eq(B->world_set(bw, "nccl_min_ctas", "2", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "backend 'cpu' has no comm stream priority or "
                            "NCCL CTA limits (the cuda backend has)");
  ck_assert_int_eq(B->world_set(bw, "nccl_max_ctas", "0", &err), OVL_EINVAL);
  ck_assert_int_eq(B->world_set(bw, "tf32", "on", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "backend 'cpu' has no TF32 matrix multiply "
                            "(tf32=on: the cuda backend has, for float32 on "
                            "cuBLAS)");
  ck_assert_int_eq(B->world_set(bw, "chaos_seed", "-3", &err), OVL_EINVAL);
  ck_assert_int_eq(B->world_set(bw, "chaos_seed", "3x", &err), OVL_EINVAL);
  CK_OK(B->world_set(bw, "chaos_seed", "3", E));
  B->world_fini(bw);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Elementwise kernels                                                 */
/* ------------------------------------------------------------------ */

#define EW_N 1000
static const double EW_SCALE = 0.3, EW_BIAS = 1.7;

static double ew_in(int which, int i) {
  return (which ? -1.0 : 1.0) * (double)((i * 37 + which * 11) % 101) / 7.0 +
         (double)i * 1e-3;
}

/* The expected result, computed in T: each op's rule of core/elemfn.h,
 * written out again here as an independent oracle (SCALE is one fused
 * multiply-add; MAX follows fmax). */
#define DEFINE_EW_EXPECT(T, SUFFIX, FMA, FMAX)                                \
  static void ew_expect_##SUFFIX(ovl__ew fn, T *out, const T *x, const T *y,  \
                                 int n) {                                     \
    for (int i = 0; i < n; i++) {                                             \
      T r = 0;                                                                \
      switch (fn) {                                                           \
      case OVL_EW_ASSIGN: r = x[i]; break;                                    \
      case OVL_EW_ADD: r = x[i] + y[i]; break;                                \
      case OVL_EW_SUB: r = x[i] - y[i]; break;                                \
      case OVL_EW_MUL: r = x[i] * y[i]; break;                                \
      case OVL_EW_DIV: r = x[i] / y[i]; break;                                \
      case OVL_EW_MAX: r = FMAX(x[i], y[i]); break;                           \
      case OVL_EW_SCALE: r = FMA((T)EW_SCALE, x[i], (T)EW_BIAS); break;       \
      default: break;                                                         \
      }                                                                       \
      out[i] = r;                                                             \
    }                                                                         \
  }
DEFINE_EW_EXPECT(float, f32, fmaf, fmaxf)
DEFINE_EW_EXPECT(double, f64, fma, fmax)

/* float16 and bfloat16: the exact result (in double: x, y, scale and bias
 * are values of the dtype, so +, -, * and the fma are exact there, and /
 * rounds harmlessly) rounded once to the dtype. The backend computes in
 * float and rounds, which must give the same value. */
static void ew_expect_16(ovl_dtype dt, ovl__ew fn, void *out, const void *x,
                         const void *y, int n) {
  const double s = ovl__dtype_round(dt, EW_SCALE);
  const double b = ovl__dtype_round(dt, EW_BIAS);
  for (int i = 0; i < n; i++) {
    double a = ovl__dtype_load(dt, x, (size_t)i);
    double c = ovl__dtype_load(dt, y, (size_t)i), r = 0;
    switch (fn) {
    case OVL_EW_ASSIGN: r = a; break;
    case OVL_EW_ADD: r = a + c; break;
    case OVL_EW_SUB: r = a - c; break;
    case OVL_EW_MUL: r = a * c; break;
    case OVL_EW_DIV: r = a / c; break;
    case OVL_EW_MAX: r = fmax(a, c); break;
    case OVL_EW_SCALE: r = fma(s, a, b); break;
    default: break;
    }
    ovl__dtype_store(dt, out, (size_t)i, r);
  }
}

static void ew_case(env *v, ovl_dtype dtype, ovl__ew fn, int alias) {
  size_t es = ovl_dtype_size(dtype), bytes = EW_N * es;
  char hx[EW_N * 8], hy[EW_N * 8], want[EW_N * 8], got[EW_N * 8];
  void *x, *y, *out;
  for (int i = 0; i < EW_N; i++) {
    ovl__dtype_store(dtype, hx, (size_t)i, ew_in(0, i));
    ovl__dtype_store(dtype, hy, (size_t)i, ew_in(1, i));
  }
  CK_OK(B->mem_alloc(v->br, bytes, &x, E));
  CK_OK(B->mem_alloc(v->br, bytes, &y, E));
  CK_OK(B->mem_alloc(v->br, bytes, &out, E));
  CK_OK(B->mem_upload(v->br, x, hx, bytes, E));
  CK_OK(B->mem_upload(v->br, y, hy, bytes, E));
  /* alias 0: out apart; 1: out == x; 2: out == y; 3: out == x == y. */
  const void *ex = hx, *ey = hy;
  void *dx = x, *dy = y, *dout = out;
  if (alias == 1)
    dout = dx;
  if (alias == 2)
    dout = dy;
  if (alias == 3) {
    dout = dy = dx;
    ey = hx;
  }
  if (dtype == OVL_DTYPE_FLOAT32)
    ew_expect_f32(fn, (float *)want, ex, ey, EW_N);
  else if (dtype == OVL_DTYPE_FLOAT64)
    ew_expect_f64(fn, (double *)want, ex, ey, EW_N);
  else
    ew_expect_16(dtype, fn, want, ex, ey, EW_N);
  CK_OK(B->elementwise(v->br, CALC, fn, dtype, dout, dx, dy, EW_SCALE,
                       EW_BIAS, EW_N, E));
  CK_OK(B->stream_sync(v->br, CALC, E));
  CK_OK(B->mem_download(v->br, got, dout, bytes, E));
  ck_assert_msg(memcmp(got, want, bytes) == 0, "%s fn %d alias %d differs",
                ovl_dtype_name(dtype), (int)fn, alias);
  B->mem_free(v->br, x);
  B->mem_free(v->br, y);
  B->mem_free(v->br, out);
}

START_TEST(test_elementwise) {
  env v;
  env_open(&v, 1, 0);
  for (int d = 0; d < OVL_DTYPE_COUNT; d++)
    for (int fn = 0; fn < OVL__EW_COUNT; fn++)
      for (int alias = 0; alias < 4; alias++)
        ew_case(&v, (ovl_dtype)d, (ovl__ew)fn, alias);
  env_close(&v);
}
END_TEST

/* The data can tell one rounding from two in SCALE (a fused multiply-add
 * from a product rounded to float32 and then added), so the elementwise
 * test would catch a kernel that does not fuse. */
START_TEST(test_elementwise_data_discriminates) {
  int differs = 0;
  for (int i = 0; i < EW_N; i++) {
    float x = (float)ew_in(0, i), t = (float)EW_SCALE * x;
    float two = t + (float)EW_BIAS;
    float one = fmaf((float)EW_SCALE, x, (float)EW_BIAS);
    differs += memcmp(&one, &two, sizeof one) != 0;
  }
  ck_assert_int_gt(differs, 0);
}
END_TEST

/* 16-bit kernels compute in float and round once, bit for bit as CUDA's
 * (__float2half_rn, __float2bfloat16_rn): known patterns. Ties to even
 * (bfloat16 1 + 2^-8 is halfway: 1); overflow (float16 300 * 300 is inf);
 * a subnormal product (float16 2^-14 * 2^-5 = 2^-19, 0x0020); and
 * scale's fused multiply-add, rounded to float before the dtype: for
 * float16 s = -(1 + u) u/2, x = 1 - u, b = 1 + u (u = 2^-10) the exact
 * 1 + u/2 + 2^-31 is a float midpoint 1 + u/2, which ties to even, 1
 * (0x3c00): the reference, in double, gives 1 + u (test_reference's
 * test_half_scale_midpoint; docs/LANGUAGE.md, "dtypes"). */
START_TEST(test_elementwise_half_bits) {
  const double u = 0x1p-10;
  static const struct {
    ovl_dtype dt;
    ovl__ew fn;
    double x, y, s, b;
    uint16_t want;
  } t[] = {
      {OVL_DTYPE_BFLOAT16, OVL_EW_ADD, 1.0, 0x1p-8, 0, 0, 0x3f80},
      {OVL_DTYPE_BFLOAT16, OVL_EW_ADD, 1.0 + 0x1p-7, 0x1p-8, 0, 0, 0x3f82},
      {OVL_DTYPE_FLOAT16, OVL_EW_MUL, 300.0, 300.0, 0, 0, 0x7c00},
      {OVL_DTYPE_FLOAT16, OVL_EW_MUL, -300.0, 300.0, 0, 0, 0xfc00},
      {OVL_DTYPE_FLOAT16, OVL_EW_MUL, 0x1p-14, 0x1p-5, 0, 0, 0x0020},
      {OVL_DTYPE_FLOAT16, OVL_EW_SUB, 1.0, 1.0, 0, 0, 0x0000},
      {OVL_DTYPE_BFLOAT16, OVL_EW_DIV, 1.0, 3.0, 0, 0, 0x3eab},
      {OVL_DTYPE_FLOAT16, OVL_EW_DIV, 1.0, 3.0, 0, 0, 0x3555},
      {OVL_DTYPE_FLOAT16, OVL_EW_SCALE, 1 - 0x1p-10, 0, -(1 + u) * u / 2,
       1 + u, 0x3c00},
  };
  env v;
  env_open(&v, 1, 0);
  for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
    uint16_t hx, hy, got = 0;
    void *x, *y, *o;
    ovl__dtype_store(t[k].dt, &hx, 0, t[k].x);
    ovl__dtype_store(t[k].dt, &hy, 0, t[k].y);
    ck_assert_double_eq(ovl__dtype_load(t[k].dt, &hx, 0), t[k].x);
    ck_assert_double_eq(ovl__dtype_load(t[k].dt, &hy, 0), t[k].y);
    CK_OK(B->mem_alloc(v.br, 2, &x, E));
    CK_OK(B->mem_alloc(v.br, 2, &y, E));
    CK_OK(B->mem_alloc(v.br, 2, &o, E));
    CK_OK(B->mem_upload(v.br, x, &hx, 2, E));
    CK_OK(B->mem_upload(v.br, y, &hy, 2, E));
    CK_OK(B->elementwise(v.br, CALC, t[k].fn, t[k].dt, o, x, y, t[k].s,
                         t[k].b, 1, E));
    CK_OK(B->stream_sync(v.br, CALC, E));
    CK_OK(B->mem_download(v.br, &got, o, 2, E));
    ck_assert_msg(got == t[k].want, "case %zu (%s fn %d): 0x%04x, want 0x%04x",
                  k, ovl_dtype_name(t[k].dt), (int)t[k].fn, got, t[k].want);
    B->mem_free(v.br, x);
    B->mem_free(v.br, y);
    B->mem_free(v.br, o);
  }
  env_close(&v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Matrix multiply                                                     */
/* ------------------------------------------------------------------ */

/* An input of the matmul tests: ordinary values of either sign, and NaN,
 * infinities and zeros at a few places. */
static double mm_in(int which, int i) {
  if (i % 97 == 13)
    return which ? INFINITY : 0.0;
  if (i % 89 == 7)
    return NAN;
  return ((double)((i * 37 + which * 11) % 101) - 50.0) / 16.0;
}

/* out = op(x) @ op(y) on the backend against the same sum in order, in
 * float (double for float64) and rounded once to the dtype, for every
 * transpose and dtype; M, N, K that the kernel's tiles do not divide. */
static void mm_expect(ovl_dtype dt, double *out, const double *x,
                      const double *y, size_t m, size_t n, size_t k, bool tx,
                      bool ty) {
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      float sf = 0;
      double sd = 0;
      for (size_t t = 0; t < k; t++) {
        double a = tx ? x[t * m + i] : x[i * k + t];
        double b = ty ? y[j * k + t] : y[t * n + j];
        sf += (float)a * (float)b;
        sd += a * b;
      }
      out[i * n + j] =
          dt == OVL_DTYPE_FLOAT64 ? sd : ovl__dtype_round(dt, (double)sf);
    }
}

START_TEST(test_matmul) {
  static const ovl_dtype dts[4] = {OVL_DTYPE_FLOAT32, OVL_DTYPE_FLOAT64,
                                   OVL_DTYPE_FLOAT16, OVL_DTYPE_BFLOAT16};
  const size_t m = 21, n = 70, k = 300;
  env v;
  env_open(&v, 1, 0);
  for (int d = 0; d < 4; d++)
    for (int tr = 0; tr < 4; tr++) {
      ovl_dtype dt = dts[d];
      bool tx = tr & 1, ty = tr & 2;
      size_t es = ovl_dtype_size(dt);
      double *hx = malloc(m * k * sizeof *hx), *hy = malloc(k * n * sizeof *hy);
      double *want = malloc(m * n * sizeof *want);
      char *bx = malloc(m * k * es), *by = malloc(k * n * es);
      char *got = malloc(m * n * es);
      void *x, *y, *out;
      int nan = 0;
      /* The inputs as the dtype holds them (16-bit: rounded). */
      for (size_t i = 0; i < m * k; i++) {
        ovl__dtype_store(dt, bx, i, mm_in(0, (int)i));
        hx[i] = ovl__dtype_load(dt, bx, i);
      }
      for (size_t i = 0; i < k * n; i++) {
        ovl__dtype_store(dt, by, i, mm_in(1, (int)i));
        hy[i] = ovl__dtype_load(dt, by, i);
      }
      CK_OK(B->mem_alloc(v.br, m * k * es, &x, E));
      CK_OK(B->mem_alloc(v.br, k * n * es, &y, E));
      CK_OK(B->mem_alloc(v.br, m * n * es, &out, E));
      CK_OK(B->mem_upload(v.br, x, bx, m * k * es, E));
      CK_OK(B->mem_upload(v.br, y, by, k * n * es, E));
      CK_OK(B->matmul(v.br, COMM0, dt, out, x, y, m, n, k, tx, ty, E));
      CK_OK(B->stream_sync(v.br, COMM0, E));
      CK_OK(B->mem_download(v.br, got, out, m * n * es, E));
      mm_expect(dt, want, hx, hy, m, n, k, tx, ty);
      for (size_t i = 0; i < m * n; i++) {
        double g = ovl__dtype_load(dt, got, i), w = want[i];
        nan += isnan(w) != 0;
        ck_assert_msg(g == w || (isnan(g) && isnan(w)),
                      "%s tx %d ty %d [%zu]: got %g, want %g",
                      ovl_dtype_name(dt), tx, ty, i, g, w);
      }
      ck_assert_int_gt(nan, 0); /* the specials reached the output */
      B->mem_free(v.br, x);
      B->mem_free(v.br, y);
      B->mem_free(v.br, out);
      free(hx);
      free(hy);
      free(want);
      free(bx);
      free(by);
      free(got);
    }
  env_close(&v);
}
END_TEST

/* Bad arguments are refused when enqueued, naming the stream. */
START_TEST(test_matmul_bad_args) {
  env v;
  ovl_error err;
  void *a, *b;
  env_open(&v, 1, 0);
  CK_OK(B->mem_alloc(v.br, 64, &a, E));
  CK_OK(B->mem_alloc(v.br, 64, &b, E));
  ck_assert_int_eq(B->matmul(v.br, CALC, OVL_DTYPE_FLOAT32, a, a, b, 2, 2, 2,
                             false, false, &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg,
                   "rank 0: calc stream: invalid matmul arguments");
  ck_assert_int_eq(B->matmul(v.br, CALC, OVL_DTYPE_FLOAT32, a, b, b, 2, 0, 2,
                             false, false, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(B->matmul(v.br, 9, OVL_DTYPE_FLOAT32, a, b, b, 2, 2, 2,
                             false, false, &err),
                   OVL_EINVAL);
  B->mem_free(v.br, a);
  B->mem_free(v.br, b);
  env_close(&v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Collectives                                                         */
/* ------------------------------------------------------------------ */

#define COLL_N 2500 /* more than one reduction block, and not a multiple */

/* Rank r's send value at index i: mixed signs and magnitudes, so that
 * float32 sums depend on the order of the ranks. */
static double coll_in(int r, size_t i) {
  uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 32;
  double m = (double)(int)(h % 2001) - 1000.0;
  return m / 7.0 * ldexp(1.0, (int)((h >> 16) % 25) - 12);
}

typedef struct coll_case {
  ovl__coll coll;
  ovl__redop redop;
  bool inplace;
} coll_case;

static const coll_case coll_cases[] = {
    {OVL_COLL_ALLREDUCE, OVL_RED_SUM, false},
    {OVL_COLL_ALLREDUCE, OVL_RED_SUM, true},
    {OVL_COLL_ALLREDUCE, OVL_RED_MAX, false},
    {OVL_COLL_ALLREDUCE, OVL_RED_MIN, true},
    {OVL_COLL_ALLREDUCE, OVL_RED_PROD, false},
    {OVL_COLL_ALLREDUCE, OVL_RED_PROD, true},
    {OVL_COLL_ALLREDUCE, OVL_RED_AVG, false},
    {OVL_COLL_ALLREDUCE, OVL_RED_AVG, true},
    {OVL_COLL_BROADCAST, OVL_RED_SUM, false},
    {OVL_COLL_BROADCAST, OVL_RED_SUM, true},
    {OVL_COLL_ALLGATHER, OVL_RED_SUM, false},
    {OVL_COLL_ALLGATHER, OVL_RED_SUM, true},
    {OVL_COLL_REDUCESCATTER, OVL_RED_SUM, false},
    {OVL_COLL_REDUCESCATTER, OVL_RED_MAX, true},
    {OVL_COLL_REDUCESCATTER, OVL_RED_AVG, false},
};
#define NCASES (sizeof coll_cases / sizeof coll_cases[0])

/* acc = op(acc, v) as the backend must do it, in T (max and min as fmax
 * and fmin, as NCCL; avg sums inputs premultiplied by 1/n: coll_expect). */
#define DEFINE_RED(T, SUFFIX, FMAX, FMIN)                                     \
  static T red_##SUFFIX(ovl__redop op, T acc, T v) {                          \
    switch (op) {                                                             \
    case OVL_RED_SUM: return acc + v;                                         \
    case OVL_RED_AVG: return acc + v;                                         \
    case OVL_RED_PROD: return acc * v;                                        \
    case OVL_RED_MAX: return FMAX(acc, v);                                    \
    case OVL_RED_MIN: return FMIN(acc, v);                                    \
    default: break;                                                           \
    }                                                                         \
    return acc;                                                               \
  }
DEFINE_RED(float, f32, fmaxf, fminf)
DEFINE_RED(double, f64, fmax, fmin)

/* What rank r's recv must hold at index i, reducing in the given rank
 * order (1: 0..n-1, -1: n-1..0). */
static double coll_expect(const coll_case *c, ovl_dtype dt, int n, int r,
                          size_t i, int order) {
  int root = n - 1;
  size_t src = i;
  switch (c->coll) {
  case OVL_COLL_BROADCAST:
    return ovl__dtype_round(dt, coll_in(root, i));
  case OVL_COLL_ALLGATHER:
    return ovl__dtype_round(dt, coll_in((int)(i / COLL_N), i % COLL_N));
  case OVL_COLL_REDUCESCATTER:
    src = (size_t)r * COLL_N + i;
    break;
  case OVL_COLL_ALLREDUCE:
    break;
  case OVL_COLL_REDUCE:
  case OVL_COLL_ALLTOALL:
  case OVL_COLL_BARRIER:
    break; /* not in coll_cases: test_reduce_alltoall_barrier */
  }
  int q0 = order > 0 ? 0 : n - 1;
  if (dt == OVL_DTYPE_FLOAT16 || dt == OVL_DTYPE_BFLOAT16) {
    /* Each step rounded to the dtype (NCCL's __hadd): a + b exactly, in
     * double, rounded once. */
    double m = c->redop == OVL_RED_AVG ? ovl__dtype_round(dt, 1.0 / n) : 1.0;
    double acc = ovl__dtype_round(
        dt, ovl__dtype_round(dt, coll_in(q0, src)) * m);
    for (int k = 1; k < n; k++) {
      double v = ovl__dtype_round(
          dt, ovl__dtype_round(dt, coll_in(q0 + order * k, src)) * m);
      acc = ovl__dtype_round(dt, red_f64(c->redop, acc, v));
    }
    return acc;
  }
  if (dt == OVL_DTYPE_FLOAT32) {
    /* avg: NCCL's PreMulSum, every input times (float)(1/n) first. */
    float m = c->redop == OVL_RED_AVG ? (float)(1.0 / n) : 1.0f;
    float acc = (float)coll_in(q0, src) * m;
    for (int k = 1; k < n; k++)
      acc = red_f32(c->redop, acc, (float)coll_in(q0 + order * k, src) * m);
    return acc;
  }
  double m = c->redop == OVL_RED_AVG ? 1.0 / n : 1.0;
  double acc = coll_in(q0, src) * m;
  for (int k = 1; k < n; k++)
    acc = red_f64(c->redop, acc, coll_in(q0 + order * k, src) * m);
  return acc;
}

typedef struct coll_ctx {
  ovl_dtype dtype;
} coll_ctx;

static void coll_rank(rank_arg *a) {
  coll_ctx *cx = a->ctx;
  ovl__brank *br;
  const int n = a->nranks, r = a->rank;
  const ovl_dtype dt = cx->dtype;
  const size_t es = ovl_dtype_size(dt);
  const size_t big = (size_t)n * COLL_N;

  ROK(a, B->rank_init(a->bw, r, 1, &br, E));
  if (a->fail[0])
    return;
  void *hbuf = malloc(big * es);
  for (size_t ci = 0; ci < NCASES && !a->fail[0]; ci++) {
    const coll_case *c = &coll_cases[ci];
    size_t send_n = COLL_N, recv_n = COLL_N;
    if (c->coll == OVL_COLL_ALLGATHER)
      recv_n = big;
    if (c->coll == OVL_COLL_REDUCESCATTER)
      send_n = big;
    void *sendbuf, *recvbuf, *send, *recv;
    ROK(a, B->mem_alloc(br, send_n * es, &sendbuf, E));
    ROK(a, B->mem_alloc(br, recv_n * es, &recvbuf, E));
    send = sendbuf;
    recv = recvbuf;
    /* NCCL's in-place layouts. */
    if (c->inplace) {
      if (c->coll == OVL_COLL_ALLGATHER)
        send = (char *)recvbuf + (size_t)r * COLL_N * es;
      else if (c->coll == OVL_COLL_REDUCESCATTER)
        recv = (char *)sendbuf + (size_t)r * COLL_N * es;
      else
        recv = send;
    }
    for (size_t i = 0; i < send_n; i++)
      ovl__dtype_store(dt, hbuf, i, coll_in(r, i));
    ROK(a, B->mem_upload(br, send, hbuf, send_n * es, E));
    /* Alternate the streams: the ring does not care which one. */
    int stream = (int)(ci + (size_t)r) % 2 ? CALC : COMM0;
    ROK(a, B->collective(br, stream, 0, c->coll, c->redop, dt, send, recv,
                         c->coll == OVL_COLL_REDUCESCATTER ? recv_n : send_n,
                         n - 1, 0, E));
    ROK(a, B->stream_sync(br, stream, E));
    ROK(a, B->mem_download(br, hbuf, recv, recv_n * es, E));
    for (size_t i = 0; i < recv_n; i++) {
      double want = coll_expect(c, dt, n, r, i, 1);
      double got = ovl__dtype_load(dt, hbuf, i);
      if (memcmp(&got, &want, sizeof got) != 0) {
        rfail(a, "%s %s %s%s, %d ranks: recv[%zu] = %.9g, want %.9g",
              ovl__coll_name(c->coll), ovl__redop_name(c->redop),
              ovl_dtype_name(dt),
              c->inplace ? " in place" : "", n, i, got, want);
        break;
      }
    }
    B->mem_free(br, sendbuf);
    B->mem_free(br, recvbuf);
  }
  free(hbuf);
  B->rank_fini(br);
}

static void collectives_for(int n) {
  ovl__bworld *bw;
  rank_arg args[OVL_MAX_RANKS];
  for (int d = 0; d < OVL_DTYPE_COUNT; d++) {
    coll_ctx cx = {(ovl_dtype)d};
    CK_OK(B->world_init(OVL__ONE_PROCESS(n), 5.0, &bw, E));
    CK_OK(B->world_rings(bw, 1, 1u, E));
    run_ranks(bw, n, coll_rank, &cx, args);
    B->world_fini(bw);
  }
}

START_TEST(test_collectives_1) { collectives_for(1); }
END_TEST
START_TEST(test_collectives_2) { collectives_for(2); }
END_TEST
START_TEST(test_collectives_3) { collectives_for(3); }
END_TEST
START_TEST(test_collectives_4) { collectives_for(4); }
END_TEST

/* The test data makes the float32 and 16-bit sums depend on the rank
 * order, so the collective tests would catch a reduction in another
 * order; and the 16-bit sums differ from one rounding of the whole sum
 * (what the reference computes), so they would catch a backend that does
 * not round at every step. On 2 ranks the sum rounds (one rounding). */
START_TEST(test_collective_data_discriminates) {
  static const ovl_dtype dts[3] = {OVL_DTYPE_FLOAT32, OVL_DTYPE_FLOAT16,
                                   OVL_DTYPE_BFLOAT16};
  for (int d = 0; d < 3; d++)
    for (int n = 3; n <= 4; n++) {
      int differs = 0, once = 0;
      for (size_t i = 0; i < COLL_N; i++) {
        double fwd = coll_expect(&coll_cases[0], dts[d], n, 0, i, 1);
        double sum = 0;
        differs += fwd != coll_expect(&coll_cases[0], dts[d], n, 0, i, -1);
        for (int q = 0; q < n; q++)
          sum += ovl__dtype_round(dts[d], coll_in(q, i));
        once += fwd != ovl__dtype_round(dts[d], sum);
      }
      ck_assert_msg(differs > 0, "%s n=%d: order never matters",
                    ovl_dtype_name(dts[d]), n);
      if (dts[d] != OVL_DTYPE_FLOAT32)
        ck_assert_msg(once > 0, "%s n=%d: rounding at each step never "
                      "matters", ovl_dtype_name(dts[d]), n);
    }
  for (int d = 1; d < 3; d++) {
    int rounded = 0;
    for (size_t i = 0; i < COLL_N; i++) {
      double a = ovl__dtype_round(dts[d], coll_in(0, i));
      double b = ovl__dtype_round(dts[d], coll_in(1, i));
      rounded += ovl__dtype_round(dts[d], a + b) != a + b;
    }
    ck_assert_msg(rounded > 0, "%s: no sum of 2 rounds",
                  ovl_dtype_name(dts[d]));
  }
}
END_TEST

/* ---- errors ---- */

typedef struct err_ctx {
  int variant;
} err_ctx;

/* Two good allreduces, then #3: ranks 0 and 2 allreduce, rank 1
 * broadcasts (variant 0) or allreduces one element more (variant 1). */
static void mismatch_rank(rank_arg *a) {
  err_ctx *cx = a->ctx;
  ovl__brank *br;
  void *p;
  ovl_error err;
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  ROK(a, B->mem_alloc(br, 64 * sizeof(float), &p, E));
  for (int k = 0; k < 2; k++)
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, p, p, 10, 0, 0, E));
  if (a->rank == 1 && cx->variant == 0)
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_BROADCAST, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, p, p, 10, 0, 0, E));
  else
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, p, p,
                         a->rank == 1 ? 11 : 10, 0, 0, E));
  a->st[0] = B->stream_sync(br, COMM0, &err);
  memcpy(a->msg[0], err.msg, sizeof err.msg);
  B->mem_free(br, p);
  B->rank_fini(br);
}

START_TEST(test_mismatch) {
  ovl__bworld *bw;
  rank_arg args[3];
  for (int variant = 0; variant < 2; variant++) {
    err_ctx cx = {variant};
    CK_OK(B->world_init(OVL__ONE_PROCESS(3), 5.0, &bw, E));
    CK_OK(B->world_rings(bw, 1, 1u, E));
    run_ranks(bw, 3, mismatch_rank, &cx, args);
    for (int r = 0; r < 3; r++) {
      const char *m = args[r].msg[0];
      char prefix[64];
      ck_assert_msg(args[r].st[0] == OVL_EMISMATCH, "rank %d: %s: %s", r,
                    ovl_err_name(args[r].st[0]), m);
      snprintf(prefix, sizeof prefix, "rank %d: comm[0] stream: ", r);
      ck_assert_msg(strstr(m, prefix) == m, "%s", m);
      ck_assert_msg(strstr(m, "ring 0 collective #3") != NULL, "%s", m);
      if (variant == 0)
        ck_assert_msg(
            strstr(m, "ranks 0,2 issued allreduce sum float32 count=10") &&
                strstr(m, "rank 1 issued broadcast root=0 float32 count=10"),
            "%s", m);
      else
        ck_assert_msg(strstr(m, "ranks 0,2 issued allreduce sum float32 "
                                "count=10") &&
                          strstr(m, "rank 1 issued allreduce sum float32 "
                                    "count=11"),
                      "%s", m);
    }
    B->world_fini(bw);
  }
}
END_TEST

/* Rank 2 never comes to collective #1 in time: 0 and 1 time out; when 2
 * comes late it fails at once. */
static void timeout_rank(rank_arg *a) {
  pthread_barrier_t *bar = a->ctx;
  ovl__brank *br;
  void *p;
  ovl_error err;
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  ROK(a, B->mem_alloc(br, 16 * sizeof(float), &p, E));
  if (a->rank == 2)
    pthread_barrier_wait(bar); /* until the others have failed */
  double t0 = ovl__now();
  ROK(a, B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p, p, 16, 0, 0, E));
  a->st[0] = B->stream_sync(br, COMM0, &err);
  a->t[0] = ovl__now() - t0;
  memcpy(a->msg[0], err.msg, sizeof err.msg);
  if (a->rank != 2)
    pthread_barrier_wait(bar);
  B->mem_free(br, p);
  B->rank_fini(br);
}

START_TEST(test_timeout) {
  ovl__bworld *bw;
  rank_arg args[3];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 3);
  CK_OK(B->world_init(OVL__ONE_PROCESS(3), 0.3, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, 3, timeout_rank, &bar, args);
  for (int r = 0; r < 2; r++) {
    const char *m = args[r].msg[0];
    ck_assert_msg(args[r].st[0] == OVL_ETIMEDOUT, "rank %d: %s: %s", r,
                  ovl_err_name(args[r].st[0]), m);
    ck_assert_msg(args[r].t[0] >= 0.25 && args[r].t[0] < 0.6,
                  "rank %d failed after %.3f s", r, args[r].t[0]);
    ck_assert_msg(strstr(m, "ring 0 collective #1 (allreduce sum): timed out "
                            "after 0.3 s waiting for rank 2") != NULL,
                  "%s", m);
  }
  ck_assert_msg(args[2].st[0] == OVL_ETIMEDOUT, "rank 2: %s",
                ovl_err_name(args[2].st[0]));
  ck_assert_msg(args[2].t[0] < 0.2, "latecomer failed after %.3f s",
                args[2].t[0]);
  ck_assert_msg(strstr(args[2].msg[0], "rank 2: comm[0] stream: ring 0 "
                                       "collective #1") != NULL,
                "%s", args[2].msg[0]);
  B->world_fini(bw);
  pthread_barrier_destroy(&bar);
}
END_TEST

typedef struct abort_ctx {
  ovl__bworld *bw;
  double delay_s;
} abort_ctx;

static void *abort_later(void *p) {
  abort_ctx *cx = p;
  sleep_s(cx->delay_s);
  B->world_abort(cx->bw);
  return NULL;
}

static void abort_rank(rank_arg *a) {
  ovl__brank *br;
  void *p;
  ovl_error err;
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  ROK(a, B->mem_alloc(br, 16 * sizeof(float), &p, E));
  if (a->rank == 0) {
    double t0 = ovl__now();
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, p, p, 16, 0, 0, E));
    a->st[0] = B->stream_sync(br, COMM0, &err);
    a->t[0] = ovl__now() - t0;
    memcpy(a->msg[0], err.msg, sizeof err.msg);
    /* After the abort, a new collective fails at once. */
    t0 = ovl__now();
    ROK(a, B->collective(br, CALC, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, p, p, 16, 0, 0, E));
    a->st[1] = B->stream_sync(br, CALC, &err);
    a->t[1] = ovl__now() - t0;
  }
  B->mem_free(br, p);
  B->rank_fini(br);
}

START_TEST(test_abort_collective) {
  ovl__bworld *bw;
  rank_arg args[2];
  pthread_t th;
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 10.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  abort_ctx cx = {bw, 0.1};
  pthread_create(&th, NULL, abort_later, &cx);
  run_ranks(bw, 2, abort_rank, NULL, args);
  pthread_join(th, NULL);
  ck_assert_msg(args[0].st[0] == OVL_EABORTED, "%s: %s",
                ovl_err_name(args[0].st[0]), args[0].msg[0]);
  ck_assert_msg(args[0].t[0] < 1.0, "abort took %.3f s", args[0].t[0]);
  ck_assert_msg(strstr(args[0].msg[0], "rank 0: comm[0] stream: ring 0 "
                                       "collective #1") != NULL,
                "%s", args[0].msg[0]);
  ck_assert_int_eq(args[0].st[1], OVL_EABORTED);
  ck_assert_msg(args[0].t[1] < 0.5, "after abort: %.3f s", args[0].t[1]);
  B->world_fini(bw);
}
END_TEST

START_TEST(test_abort_wait) {
  env v;
  ovl_error err;
  pthread_t th;
  env_open(&v, 1, 10.0);
  abort_ctx cx = {v.bw, 0.1};
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, CALC, 600e3, E));
  CK_OK(B->event_record(v.br, EV_COMPUTE0, CALC, E));
  CK_OK(B->stream_wait_event(v.br, COMM0, EV_COMPUTE0, E));
  pthread_create(&th, NULL, abort_later, &cx);
  ck_assert_int_eq(B->stream_sync(v.br, COMM0, &err), OVL_EABORTED);
  double t = ovl__now() - t0;
  pthread_join(th, NULL);
  ck_assert_msg(t < 0.4, "the wait ended after %.3f s", t);
  ck_assert_msg(strstr(err.msg, "rank 0: comm[0] stream:") == err.msg &&
                    strstr(err.msg, "calc") != NULL,
                "%s", err.msg);
  /* The abort also cuts calc's delay short: the host sync of calc waits
   * for the stream to drain, which now takes no longer. */
  CK_OK(B->stream_sync(v.br, CALC, E));
  t = ovl__now() - t0;
  ck_assert_msg(t < 0.4, "calc drained after %.3f s", t);
  env_close(&v);
}
END_TEST

/* A delay far longer than any timeout (a stream that never finishes) ends
 * soon after an abort, so the rank's streams drain and rank_fini, which
 * joins the workers, returns instead of hanging for the delay. */
START_TEST(test_abort_ends_long_delay) {
  env v;
  pthread_t th;
  env_open(&v, 1, 10.0);
  abort_ctx cx = {v.bw, 0.05};
  double t0 = ovl__now();
  CK_OK(B->delay(v.br, COMM0, 100e6, E));
  pthread_create(&th, NULL, abort_later, &cx);
  CK_OK(B->stream_sync(v.br, COMM0, E));
  pthread_join(th, NULL);
  env_close(&v);
  double t = ovl__now() - t0;
  ck_assert_msg(t < 1.0, "a 100 s delay held the stream %.3f s after abort",
                t);
}
END_TEST

/* A mismatch fails the calc stream of both ranks: later kernels there are
 * skipped, the error is sticky, a wait on it does not hang, and a
 * collective queued on the failed stream makes the other rank fail at once
 * instead of at the timeout. */
static void sticky_rank(rank_arg *a) {
  ovl__brank *br;
  ovl_error err;
  float *p = NULL, *y = NULL, *z = NULL, *one = NULL;
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  ROK(a, B->mem_alloc(br, 16 * sizeof(float), (void **)&p, E));
  ROK(a, B->mem_alloc(br, 16 * sizeof(float), (void **)&y, E));
  ROK(a, B->mem_alloc(br, 16 * sizeof(float), (void **)&z, E));
  ROK(a, B->mem_alloc(br, 16 * sizeof(float), (void **)&one, E));
  float h[16];
  for (int i = 0; i < 16; i++)
    h[i] = 1.0f;
  ROK(a, B->mem_upload(br, one, h, sizeof h, E));
  /* #1 mismatches (counts 16 and 8) on calc. */
  ROK(a, B->collective(br, CALC, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p, p, a->rank ? 8 : 16, 0, 0, E));
  ROK(a, B->elementwise(br, CALC, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, y, one,
                        NULL, 0, 0, 16, E));
  ROK(a, B->event_record(br, EV_COMPUTE0, CALC, E));
  ROK(a, B->stream_wait_event(br, COMM0, EV_COMPUTE0, E));
  ROK(a, B->elementwise(br, COMM0, OVL_EW_ASSIGN, OVL_DTYPE_FLOAT32, z, one,
                        NULL, 0, 0, 16, E));
  ROK(a, B->stream_sync(br, COMM0, E));
  float v;
  ROK(a, B->mem_download(br, &v, z, sizeof v, E));
  RCHECK(a, v == 1.0f, "comm after the failed calc: z = %g", v);
  for (int k = 0; k < 2; k++) {
    a->st[k] = B->stream_sync(br, CALC, &err);
    memcpy(a->msg[k], err.msg, sizeof err.msg);
  }
  ROK(a, B->mem_download(br, &v, y, sizeof v, E));
  RCHECK(a, isnan(v), "a kernel after the failure ran: y = %g", v);
  /* #2: rank 0 on its failed calc stream, rank 1 on its healthy comm. */
  double t0 = ovl__now();
  ROK(a, B->collective(br, a->rank ? COMM0 : CALC, 0, OVL_COLL_ALLREDUCE,
                       OVL_RED_SUM, OVL_DTYPE_FLOAT32, p, p, 16, 0, 0, E));
  a->st[2] = B->stream_sync(br, a->rank ? COMM0 : CALC, &err);
  a->t[2] = ovl__now() - t0;
  memcpy(a->msg[2], err.msg, sizeof err.msg);
  B->mem_free(br, p);
  B->mem_free(br, y);
  B->mem_free(br, z);
  B->mem_free(br, one);
  B->rank_fini(br);
}

START_TEST(test_sticky_error) {
  ovl__bworld *bw;
  rank_arg args[2];
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, 2, sticky_rank, NULL, args);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 2; k++) {
      ck_assert_msg(args[r].st[k] == OVL_EMISMATCH, "rank %d sync %d: %s", r,
                    k, ovl_err_name(args[r].st[k]));
      ck_assert_msg(strstr(args[r].msg[k], "calc stream: ring 0 collective "
                                           "#1") != NULL,
                    "%s", args[r].msg[k]);
    }
  /* Rank 0's calc still reports its first error; rank 1 learns at once
   * that rank 0 will not come. */
  ck_assert_int_eq(args[0].st[2], OVL_EMISMATCH);
  ck_assert_msg(args[1].st[2] == OVL_EABORTED, "%s: %s",
                ovl_err_name(args[1].st[2]), args[1].msg[2]);
  ck_assert_msg(strstr(args[1].msg[2], "collective #2") != NULL &&
                    strstr(args[1].msg[2], "rank 0 did not take part") !=
                        NULL,
                "%s", args[1].msg[2]);
  ck_assert_msg(args[1].t[2] < 1.0, "took %.3f s", args[1].t[2]);
  B->world_fini(bw);
}
END_TEST

/* 1000 collectives per rank over two rings: y += allreduce_sum(one). */
static void many_rank(rank_arg *a) {
  ovl__brank *br;
  float *one, *t, *y;
  const int K = 1000;
  ROK(a, B->rank_init(a->bw, a->rank, 2, &br, E));
  ROK(a, B->mem_alloc(br, 4 * sizeof(float), (void **)&one, E));
  ROK(a, B->mem_alloc(br, 4 * sizeof(float), (void **)&t, E));
  ROK(a, B->mem_alloc(br, 4 * sizeof(float), (void **)&y, E));
  float h[4] = {1, 1, 1, 1}, z[4] = {0, 0, 0, 0};
  ROK(a, B->mem_upload(br, one, h, sizeof h, E));
  ROK(a, B->mem_upload(br, y, z, sizeof z, E));
  for (int k = 0; k < K; k++) {
    ROK(a, B->collective(br, CALC, k % 2, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, one, t, 4, 0, 0, E));
    ROK(a, B->elementwise(br, CALC, OVL_EW_ADD, OVL_DTYPE_FLOAT32, y, y, t, 0,
                          0, 4, E));
  }
  ROK(a, B->stream_sync(br, CALC, E));
  ROK(a, B->mem_download(br, h, y, sizeof h, E));
  RCHECK(a, h[0] == (float)(K * a->nranks) && h[3] == h[0], "y = %g", h[0]);
  B->mem_free(br, one);
  B->mem_free(br, t);
  B->mem_free(br, y);
  B->rank_fini(br);
}

START_TEST(test_many_collectives) {
  ovl__bworld *bw;
  rank_arg args[4];
  CK_OK(B->world_init(OVL__ONE_PROCESS(4), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 2, 3u, E));
  run_ranks(bw, 4, many_rank, NULL, args);
  B->world_fini(bw);
}
END_TEST

/* Sequence numbers come from the order of enqueue, not of execution: rank 0
 * queues #0 on a delayed comm stream and #1 on calc, so its #1 arrives
 * first; rank 1 queues both on calc. #0 and #1 differ in size, so a
 * pairing by arrival would mismatch. */
static void seq_rank(rank_arg *a) {
  ovl__brank *br;
  float *p0, *p1;
  float h[8];
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  ROK(a, B->mem_alloc(br, 8 * sizeof(float), (void **)&p0, E));
  ROK(a, B->mem_alloc(br, 8 * sizeof(float), (void **)&p1, E));
  for (int i = 0; i < 8; i++)
    h[i] = (float)(a->rank + 1);
  ROK(a, B->mem_upload(br, p0, h, sizeof h, E));
  ROK(a, B->mem_upload(br, p1, h, sizeof h, E));
  int s0 = a->rank == 0 ? COMM0 : CALC;
  if (a->rank == 0)
    ROK(a, B->delay(br, COMM0, 100e3, E));
  ROK(a, B->collective(br, s0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p0, p0, 8, 0, 0, E));
  ROK(a, B->collective(br, CALC, 0, OVL_COLL_ALLREDUCE, OVL_RED_MAX,
                       OVL_DTYPE_FLOAT32, p1, p1, 4, 0, 0, E));
  ROK(a, B->stream_sync(br, s0, E));
  ROK(a, B->stream_sync(br, CALC, E));
  ROK(a, B->mem_download(br, h, p0, sizeof h, E));
  RCHECK(a, h[7] == 3.0f, "#0 gave %g", h[7]);
  ROK(a, B->mem_download(br, h, p1, sizeof h, E));
  RCHECK(a, h[3] == 2.0f && h[4] == (float)(a->rank + 1), "#1 gave %g %g",
         h[3], h[4]);
  B->mem_free(br, p0);
  B->mem_free(br, p1);
  B->rank_fini(br);
}

START_TEST(test_seq_by_enqueue) {
  ovl__bworld *bw;
  rank_arg args[2];
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, 2, seq_rank, NULL, args);
  B->world_fini(bw);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Reduce, alltoall, barrier                                           */
/* ------------------------------------------------------------------ */

/* Rank r's input at i: exact in float32 (small integers and halves). */
static double rab_in(int r, size_t i) {
  return (double)((int)((size_t)r * 37 + i * 11) % 53) - 20.0 + 0.5 * r;
}

static void *buf_of(ovl__brank *br, rank_arg *a, ovl_dtype dt, size_t n,
                    int r, double fill) {
  size_t es = ovl_dtype_size(dt);
  void *p, *h = malloc(n * es + 1);
  ROK(a, B->mem_alloc(br, n * es, &p, E));
  for (size_t i = 0; i < n; i++) {
    double v = isnan(fill) ? rab_in(r, i) : fill;
    if (dt == OVL_DTYPE_FLOAT32)
      ((float *)h)[i] = (float)v;
    else
      ((double *)h)[i] = v;
  }
  ROK(a, B->mem_upload(br, p, h, n * es, E));
  free(h);
  return p;
}

static double at_of(ovl__brank *br, rank_arg *a, ovl_dtype dt, const void *p,
                    size_t i) {
  if (dt == OVL_DTYPE_FLOAT32) {
    float v;
    ROK(a, B->mem_download(br, &v, (const float *)p + i, sizeof v, E));
    return v;
  }
  double v;
  ROK(a, B->mem_download(br, &v, (const double *)p + i, sizeof v, E));
  return v;
}

#define RAB_N 12 /* elements per rank (alltoall: 12 * nranks) */

/* Per dtype: reduce sum and max to every root (out of place, and in
 * place on the root), alltoall, and a barrier that holds every rank until
 * the last (who comes 40 ms late per rank). */
static void rab_rank(rank_arg *a) {
  ovl__brank *br;
  const int n = a->nranks, r = a->rank;
  ROK(a, B->rank_init(a->bw, r, 1, &br, E));
  if (a->fail[0])
    return;
  for (int d = 0; d < 2 && !a->fail[0]; d++) {
    ovl_dtype dt = d ? OVL_DTYPE_FLOAT64 : OVL_DTYPE_FLOAT32;
    for (int root = 0; root < n; root++)
      for (int v = 0; v < 4; v++) {
        ovl__redop op = v % 2 ? OVL_RED_MAX : OVL_RED_SUM;
        bool inplace = v >= 2;
        void *x = buf_of(br, a, dt, RAB_N, r, NAN);
        void *y = inplace ? x : buf_of(br, a, dt, RAB_N, r, -7.0);
        ROK(a, B->collective(br, (root + r) % 2 ? CALC : COMM0, 0,
                             OVL_COLL_REDUCE, op, dt, x, y, RAB_N, root, 0,
                             E));
        ROK(a, B->stream_sync(br, CALC, E));
        ROK(a, B->stream_sync(br, COMM0, E));
        for (size_t i = 0; i < RAB_N; i++) {
          double want = rab_in(0, i);
          for (int q = 1; q < n; q++)
            want = op == OVL_RED_MAX ? fmax(want, rab_in(q, i))
                                     : want + rab_in(q, i);
          if (r != root)
            want = inplace ? rab_in(r, i) : -7.0;
          double got = at_of(br, a, dt, y, i);
          RCHECK(a, got == want,
                 "reduce %s root %d %s%s: y[%zu] = %g, want %g",
                 ovl__redop_name(op), root, ovl_dtype_name(dt),
                 inplace ? " in place" : "", i, got, want);
        }
        B->mem_free(br, x);
        if (!inplace)
          B->mem_free(br, y);
      }
    size_t total = (size_t)RAB_N * (size_t)n;
    void *x = buf_of(br, a, dt, total, r, NAN);
    void *y = buf_of(br, a, dt, total, r, -7.0);
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_ALLTOALL, OVL_RED_SUM, dt, x,
                         y, total, 0, 0, E));
    ROK(a, B->stream_sync(br, COMM0, E));
    for (int j = 0; j < n; j++)
      for (size_t e = 0; e < RAB_N; e++) {
        /* Part j of our output is part r of rank j's input. */
        double want = rab_in(j, (size_t)r * RAB_N + e);
        double got = at_of(br, a, dt, y, (size_t)j * RAB_N + e);
        RCHECK(a, got == want, "alltoall %s: y[%zu] = %g, want %g",
               ovl_dtype_name(dt), (size_t)j * RAB_N + e, got, want);
      }
    B->mem_free(br, x);
    B->mem_free(br, y);
  }
  double t0 = ovl__now();
  ROK(a, B->delay(br, CALC, 40e3 * r, E));
  ROK(a, B->collective(br, CALC, 0, OVL_COLL_BARRIER, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, NULL, NULL, 1, 0, 0, E));
  ROK(a, B->stream_sync(br, CALC, E));
  a->t[0] = ovl__now() - t0;
  B->rank_fini(br);
}

static void reduce_alltoall_barrier_for(int n) {
  ovl__bworld *bw;
  rank_arg args[OVL_MAX_RANKS];
  CK_OK(B->world_init(OVL__ONE_PROCESS(n), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, n, rab_rank, NULL, args);
  for (int r = 0; r < n; r++)
    ck_assert_msg(args[r].t[0] >= 0.039 * (n - 1),
                  "rank %d left the barrier after %.3f s", r, args[r].t[0]);
  B->world_fini(bw);
}

START_TEST(test_reduce_alltoall_barrier) {
  reduce_alltoall_barrier_for(_i);
}
END_TEST

/* Refused before anything is queued: alltoall in place or in parts that
 * do not divide, a barrier with buffers, a reduce to a rank out of range;
 * a barrier and a reduce that disagree between ranks mismatch. */
START_TEST(test_reduce_alltoall_barrier_args) {
  ovl__bworld *bw;
  ovl__brank *br;
  ovl_error err;
  void *p, *q;
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 1.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  CK_OK(B->rank_init(bw, 0, 1, &br, E));
  CK_OK(B->mem_alloc(br, 16 * sizeof(float), &p, E));
  CK_OK(B->mem_alloc(br, 16 * sizeof(float), &q, E));
  ck_assert_int_eq(B->collective(br, CALC, 0, OVL_COLL_ALLTOALL, OVL_RED_SUM,
                                 OVL_DTYPE_FLOAT32, p, p, 16, 0, 0, &err),
                   OVL_EINVAL);
  ck_assert_msg(strstr(err.msg, "rank 0: calc stream: invalid arguments to "
                                "a collective (alltoall) on ring 0") != NULL,
                "%s", err.msg);
  ck_assert_int_eq(B->collective(br, CALC, 0, OVL_COLL_ALLTOALL, OVL_RED_SUM,
                                 OVL_DTYPE_FLOAT32, p, q, 15, 0, 0, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(B->collective(br, CALC, 0, OVL_COLL_BARRIER, OVL_RED_SUM,
                                 OVL_DTYPE_FLOAT32, p, p, 1, 0, 0, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(B->collective(br, CALC, 0, OVL_COLL_REDUCE, OVL_RED_SUM,
                                 OVL_DTYPE_FLOAT32, p, q, 16, 2, 0, &err),
                   OVL_EINVAL);
  CK_OK(B->stream_sync(br, CALC, E));
  B->mem_free(br, p);
  B->mem_free(br, q);
  B->rank_fini(br);
  B->world_fini(bw);
}
END_TEST

/* Rank 1's reduce has another root than rank 0's; then rank 0 meets a
 * barrier where rank 1 allreduces. */
static void rab_mismatch_rank(rank_arg *a) {
  ovl__brank *br;
  ovl_error err;
  void *p;
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  ROK(a, B->mem_alloc(br, 8 * sizeof(float), &p, E));
  ROK(a, B->collective(br, CALC, 0, OVL_COLL_REDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p, p, 8, a->rank, 0, E));
  a->st[0] = B->stream_sync(br, CALC, &err);
  memcpy(a->msg[0], err.msg, sizeof err.msg);
  if (a->rank == 0)
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_BARRIER, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, NULL, NULL, 1, 0, 0, E));
  else
    ROK(a, B->collective(br, COMM0, 0, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                         OVL_DTYPE_FLOAT32, p, p, 8, 0, 0, E));
  a->st[1] = B->stream_sync(br, COMM0, &err);
  memcpy(a->msg[1], err.msg, sizeof err.msg);
  B->mem_free(br, p);
  B->rank_fini(br);
}

START_TEST(test_reduce_barrier_mismatch) {
  ovl__bworld *bw;
  rank_arg args[2];
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, 2, rab_mismatch_rank, NULL, args);
  for (int r = 0; r < 2; r++) {
    ck_assert_msg(args[r].st[0] == OVL_EMISMATCH, "%s",
                  ovl_err_name(args[r].st[0]));
    ck_assert_msg(strstr(args[r].msg[0],
                         "ring 0 collective #1: rank 0 issued reduce sum "
                         "root=0 float32 count=8; rank 1 issued reduce sum "
                         "root=1 float32 count=8") != NULL,
                  "%s", args[r].msg[0]);
    ck_assert_msg(args[r].st[1] == OVL_EMISMATCH, "%s",
                  ovl_err_name(args[r].st[1]));
    ck_assert_msg(strstr(args[r].msg[1],
                         "ring 0 collective #2: rank 0 issued barrier; "
                         "rank 1 issued allreduce sum float32 count=8") !=
                      NULL,
                  "%s", args[r].msg[1]);
  }
  B->world_fini(bw);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Point-to-point                                                      */
/* ------------------------------------------------------------------ */

#define P2P_N 64

static ovl__p2p_item p2p_send(int peer, void *buf, size_t n) {
  ovl__p2p_item it = {.send = true, .peer = peer,
                      .dtype = OVL_DTYPE_FLOAT32, .buf = buf, .count = n};
  return it;
}

static ovl__p2p_item p2p_recv(int peer, void *buf, size_t n) {
  ovl__p2p_item it = {.send = false, .peer = peer,
                      .dtype = OVL_DTYPE_FLOAT32, .buf = buf, .count = n};
  return it;
}

/* Message m of rank r, element i. */
static float msg_val(int r, int m, size_t i) {
  return (float)(r * 1000 + m * 100) + (float)i * 0.5f;
}

static float *msg_buf(rank_arg *a, ovl__brank *br, int r, int m) {
  float h[P2P_N], *p;
  for (size_t i = 0; i < P2P_N; i++)
    h[i] = msg_val(r, m, i);
  ROK(a, B->mem_alloc(br, sizeof h, (void **)&p, E));
  ROK(a, B->mem_upload(br, p, h, sizeof h, E));
  return p;
}

/* Whether dev holds message m of rank r (else a failure noted). */
static void expect_msg(rank_arg *a, ovl__brank *br, const float *dev, int r,
                       int m, const char *what) {
  float h[P2P_N];
  ROK(a, B->mem_download(br, h, dev, sizeof h, E));
  for (size_t i = 0; i < P2P_N; i++)
    if (h[i] != msg_val(r, m, i)) {
      rfail(a, "%s: [%zu] = %g, want message %d of rank %d (%g)", what, i,
            h[i], m, r, msg_val(r, m, i));
      return;
    }
}

/* Matching by enqueue order, per ordered pair, whatever the streams:
 * rank 0 sends message 0 on calc and message 1 on comm[0]; rank 1
 * receives into x on a delayed calc stream and into y on comm[0]. y gets
 * message 1 at once (matched by number, not by arrival), x message 0
 * after the delay; rank 0's calc send waits for it (a rendezvous). Then
 * rank 1 answers with two sends to rank 0 in one stream. ring_progress:
 * the largest tag completed. */
static void p2p_order_rank(rank_arg *a) {
  ovl__brank *br;
  int r = a->rank;
  ROK(a, B->rank_init(a->bw, r, 1, &br, E));
  RCHECK(a, B->ring_progress(br, 0) == 0, "progress before anything");
  float *m0 = msg_buf(a, br, r, 0), *m1 = msg_buf(a, br, r, 1);
  float *x = msg_buf(a, br, r, 7), *y = msg_buf(a, br, r, 7);
  double t0 = ovl__now();
  if (r == 0) {
    ovl__p2p_item s0 = p2p_send(1, m0, P2P_N), s1 = p2p_send(1, m1, P2P_N);
    ROK(a, B->p2p(br, CALC, 0, &s0, 1, 1, E));
    ROK(a, B->p2p(br, COMM0, 0, &s1, 1, 2, E));
    ROK(a, B->stream_sync(br, COMM0, E));
    a->t[0] = ovl__now() - t0; /* comm: at once */
    ROK(a, B->stream_sync(br, CALC, E));
    a->t[1] = ovl__now() - t0; /* calc: after rank 1's delay */
    ovl__p2p_item r0 = p2p_recv(1, x, P2P_N), r1 = p2p_recv(1, y, P2P_N);
    ROK(a, B->p2p(br, CALC, 0, &r0, 1, 3, E));
    ROK(a, B->p2p(br, CALC, 0, &r1, 1, 4, E));
    ROK(a, B->stream_sync(br, CALC, E));
    expect_msg(a, br, x, 1, 0, "rank 0's x");
    expect_msg(a, br, y, 1, 1, "rank 0's y");
  } else {
    ovl__p2p_item r0 = p2p_recv(0, x, P2P_N), r1 = p2p_recv(0, y, P2P_N);
    ROK(a, B->delay(br, CALC, 150e3, E));
    ROK(a, B->p2p(br, CALC, 0, &r0, 1, 1, E));
    ROK(a, B->p2p(br, COMM0, 0, &r1, 1, 2, E));
    ROK(a, B->stream_sync(br, COMM0, E));
    expect_msg(a, br, y, 0, 1, "rank 1's y");
    RCHECK(a, B->ring_progress(br, 0) == 2, "progress %llu after tag 2",
           (unsigned long long)B->ring_progress(br, 0));
    ROK(a, B->stream_sync(br, CALC, E));
    expect_msg(a, br, x, 0, 0, "rank 1's x");
    ovl__p2p_item s0 = p2p_send(0, m0, P2P_N), s1 = p2p_send(0, m1, P2P_N);
    ROK(a, B->p2p(br, COMM0, 0, &s0, 1, 3, E));
    ROK(a, B->p2p(br, COMM0, 0, &s1, 1, 4, E));
    ROK(a, B->stream_sync(br, COMM0, E));
  }
  RCHECK(a, B->ring_progress(br, 0) == 4, "progress %llu at the end",
         (unsigned long long)B->ring_progress(br, 0));
  B->mem_free(br, m0);
  B->mem_free(br, m1);
  B->mem_free(br, x);
  B->mem_free(br, y);
  B->rank_fini(br);
}

START_TEST(test_p2p_order) {
  ovl__bworld *bw;
  rank_arg args[2];
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, 2, p2p_order_rank, NULL, args);
  ck_assert_msg(args[0].t[0] < 0.1, "rank 0's comm send took %.3f s",
                args[0].t[0]);
  ck_assert_msg(args[0].t[1] >= 0.14, "rank 0's calc send took %.3f s",
                args[0].t[1]);
  B->world_fini(bw);
}
END_TEST

/* A ring shift in a group (send to the next rank, receive from the
 * previous: alone, every rank would wait in its send), twice, with the
 * items in either order; with one rank, both items are with oneself. */
static void p2p_group_rank(rank_arg *a) {
  ovl__brank *br;
  int r = a->rank, n = a->nranks;
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  ROK(a, B->rank_init(a->bw, r, 1, &br, E));
  float *m0 = msg_buf(a, br, r, 0), *m1 = msg_buf(a, br, r, 1);
  float *x = msg_buf(a, br, r, 7), *y = msg_buf(a, br, r, 7);
  ovl__p2p_item g0[2] = {p2p_send(next, m0, P2P_N),
                         p2p_recv(prev, x, P2P_N)};
  ovl__p2p_item g1[2] = {p2p_recv(prev, y, P2P_N),
                         p2p_send(next, m1, P2P_N)};
  ROK(a, B->p2p(br, COMM0, 0, g0, 2, 2, E));
  ROK(a, B->p2p(br, COMM0, 0, g1, 2, 4, E));
  ROK(a, B->stream_sync(br, COMM0, E));
  expect_msg(a, br, x, prev, 0, "x");
  expect_msg(a, br, y, prev, 1, "y");
  RCHECK(a, B->ring_progress(br, 0) == 4, "progress %llu",
         (unsigned long long)B->ring_progress(br, 0));
  B->mem_free(br, m0);
  B->mem_free(br, m1);
  B->mem_free(br, x);
  B->mem_free(br, y);
  B->rank_fini(br);
}

START_TEST(test_p2p_group) {
  ovl__bworld *bw;
  rank_arg args[OVL_MAX_RANKS];
  int n = _i;
  CK_OK(B->world_init(OVL__ONE_PROCESS(n), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, n, p2p_group_rank, NULL, args);
  B->world_fini(bw);
}
END_TEST

/* A send to oneself: in a group with its receive, into another buffer or
 * the same one; alone, it waits for a receive that can never be posted,
 * and times out saying so. */
START_TEST(test_p2p_self) {
  env v;
  ovl_error err;
  env_open(&v, 1, 0.2);
  float *m0 = f32_buf(v.br, P2P_N, 5.0f), *x = f32_buf(v.br, P2P_N, NAN);
  ovl__p2p_item g[2] = {p2p_recv(0, x, P2P_N), p2p_send(0, m0, P2P_N)};
  CK_OK(B->p2p(v.br, CALC, 0, g, 2, 2, E));
  ovl__p2p_item h[2] = {p2p_send(0, x, P2P_N), p2p_recv(0, x, P2P_N)};
  CK_OK(B->p2p(v.br, CALC, 0, h, 2, 4, E));
  CK_OK(B->stream_sync(v.br, CALC, E));
  ck_assert_float_eq(f32_at(v.br, x, P2P_N - 1), 5.0f);
  ck_assert_uint_eq(B->ring_progress(v.br, 0), 4);
  ovl__p2p_item s = p2p_send(0, m0, P2P_N);
  double t0 = ovl__now();
  CK_OK(B->p2p(v.br, CALC, 0, &s, 1, 5, E));
  ck_assert_int_eq(B->stream_sync(v.br, CALC, &err), OVL_ETIMEDOUT);
  double t = ovl__now() - t0;
  ck_assert_msg(t >= 0.19 && t < 1.0, "timed out after %.3f s", t);
  ck_assert_str_eq(err.msg, "rank 0: calc stream: ring 0 p2p: send #3 to "
                            "rank 0 (float32 count=64) timed out after 0.2 s "
                            "waiting for rank 0's recv #3 from rank 0");
  ck_assert_uint_eq(B->ring_progress(v.br, 0), 4);
  B->mem_free(v.br, m0);
  B->mem_free(v.br, x);
  env_close(&v);
}
END_TEST

/* The sides of a message disagree (variant 0: count, 1: dtype): both
 * ranks fail with the same message; the next message is unaffected on a
 * healthy stream. */
static void p2p_mismatch_rank(rank_arg *a) {
  err_ctx *cx = a->ctx;
  ovl__brank *br;
  ovl_error err;
  int r = a->rank;
  ROK(a, B->rank_init(a->bw, r, 1, &br, E));
  float *m0 = msg_buf(a, br, r, 0), *x = msg_buf(a, br, r, 7);
  ovl__p2p_item it = r == 0 ? p2p_send(1, m0, 8) : p2p_recv(0, x, 8);
  if (r == 1 && cx->variant == 0)
    it.count = 16;
  if (r == 1 && cx->variant == 1) {
    it.dtype = OVL_DTYPE_FLOAT64;
    it.count = 8;
  }
  ROK(a, B->p2p(br, CALC, 0, &it, 1, 1, E));
  a->st[0] = B->stream_sync(br, CALC, &err);
  memcpy(a->msg[0], err.msg, sizeof err.msg);
  ovl__p2p_item it2 = r == 0 ? p2p_send(1, m0, P2P_N) : p2p_recv(0, x, P2P_N);
  ROK(a, B->p2p(br, COMM0, 0, &it2, 1, 2, E));
  ROK(a, B->stream_sync(br, COMM0, E));
  if (r == 1)
    expect_msg(a, br, x, 0, 0, "the second message");
  RCHECK(a, B->ring_progress(br, 0) == 2, "progress %llu",
         (unsigned long long)B->ring_progress(br, 0));
  B->mem_free(br, m0);
  B->mem_free(br, x);
  B->rank_fini(br);
}

START_TEST(test_p2p_mismatch) {
  ovl__bworld *bw;
  rank_arg args[2];
  for (int variant = 0; variant < 2; variant++) {
    err_ctx cx = {variant};
    CK_OK(B->world_init(OVL__ONE_PROCESS(2), 5.0, &bw, E));
    CK_OK(B->world_rings(bw, 1, 1u, E));
    run_ranks(bw, 2, p2p_mismatch_rank, &cx, args);
    for (int r = 0; r < 2; r++) {
      char want[256];
      snprintf(want, sizeof want,
               "rank %d: calc stream: ring 0 p2p: send #1 from rank 0 to "
               "rank 1 is float32 count=8, but the matching recv on rank 1 "
               "is %s",
               r, variant == 0 ? "float32 count=16" : "float64 count=8");
      ck_assert_msg(args[r].st[0] == OVL_EMISMATCH, "rank %d: %s: %s", r,
                    ovl_err_name(args[r].st[0]), args[r].msg[0]);
      ck_assert_str_eq(args[r].msg[0], want);
    }
    B->world_fini(bw);
  }
}
END_TEST

/* Both ranks receive first, then send, without a group: a deadlock. Each
 * times out in its receive, naming the ring, the pair and what it waits
 * for; the sends queued behind are skipped. Then rank 0 alone posts a
 * group of two whose other sides never come: it gives up both. */
static void p2p_timeout_rank(rank_arg *a) {
  pthread_barrier_t *bar = a->ctx;
  ovl__brank *br;
  ovl_error err;
  int r = a->rank, peer = 1 - r;
  ROK(a, B->rank_init(a->bw, r, 1, &br, E));
  float *m0 = msg_buf(a, br, r, 0), *x = msg_buf(a, br, r, 7);
  ovl__p2p_item rv = p2p_recv(peer, x, P2P_N), sd = p2p_send(peer, m0, P2P_N);
  double t0 = ovl__now();
  ROK(a, B->p2p(br, CALC, 0, &rv, 1, 1, E));
  ROK(a, B->p2p(br, CALC, 0, &sd, 1, 2, E));
  a->st[0] = B->stream_sync(br, CALC, &err);
  a->t[0] = ovl__now() - t0;
  memcpy(a->msg[0], err.msg, sizeof err.msg);
  RCHECK(a, B->ring_progress(br, 0) == 0, "progress %llu",
         (unsigned long long)B->ring_progress(br, 0));
  pthread_barrier_wait(bar);
  if (r == 0) {
    ovl__p2p_item g[2] = {p2p_send(1, m0, P2P_N), p2p_recv(1, x, 4)};
    t0 = ovl__now();
    ROK(a, B->p2p(br, COMM0, 0, g, 2, 4, E));
    a->st[1] = B->stream_sync(br, COMM0, &err);
    a->t[1] = ovl__now() - t0;
    memcpy(a->msg[1], err.msg, sizeof err.msg);
  }
  pthread_barrier_wait(bar);
  if (r == 1) {
    /* Late: the other side has given up, so this fails at once. */
    ovl__p2p_item rv2 = p2p_recv(0, x, P2P_N);
    t0 = ovl__now();
    ROK(a, B->p2p(br, COMM0, 0, &rv2, 1, 3, E));
    a->st[1] = B->stream_sync(br, COMM0, &err);
    a->t[1] = ovl__now() - t0;
    memcpy(a->msg[1], err.msg, sizeof err.msg);
  }
  B->mem_free(br, m0);
  B->mem_free(br, x);
  B->rank_fini(br);
}

START_TEST(test_p2p_timeout) {
  ovl__bworld *bw;
  rank_arg args[2];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 0.3, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  run_ranks(bw, 2, p2p_timeout_rank, &bar, args);
  /* The first to time out skips its send, which tells the other at once
   * that its receive will never be matched (when its own clock has not
   * run out first). */
  int timed_out = 0;
  for (int r = 0; r < 2; r++) {
    char want[256], told[256];
    snprintf(want, sizeof want,
             "rank %d: calc stream: ring 0 p2p: recv #1 from rank %d "
             "(float32 count=64) timed out after 0.3 s waiting for rank "
             "%d's send #1 to rank %d",
             r, 1 - r, 1 - r, r);
    snprintf(told, sizeof told,
             "rank %d: calc stream: ring 0 p2p: send #1 to rank %d of rank "
             "%d: rank %d did not take part because its stream had already "
             "failed",
             r, r, 1 - r, 1 - r);
    if (args[r].st[0] == OVL_ETIMEDOUT) {
      ck_assert_str_eq(args[r].msg[0], want);
      timed_out++;
    } else {
      ck_assert_msg(args[r].st[0] == OVL_EABORTED, "rank %d: %s: %s", r,
                    ovl_err_name(args[r].st[0]), args[r].msg[0]);
      ck_assert_str_eq(args[r].msg[0], told);
    }
    ck_assert_msg(args[r].t[0] >= 0.29 && args[r].t[0] < 1.0,
                  "rank %d failed after %.3f s", r, args[r].t[0]);
  }
  ck_assert_int_ge(timed_out, 1);
  ck_assert_int_eq(args[0].st[1], OVL_ETIMEDOUT);
  ck_assert_str_eq(args[0].msg[1],
                   "rank 0: comm[0] stream: ring 0 p2p: send #2 to rank 1 "
                   "(float32 count=64) timed out after 0.3 s waiting for "
                   "rank 1's recv #2 from rank 0 (and 1 more items of its "
                   "group)");
  ck_assert_msg(args[0].t[1] >= 0.29 && args[0].t[1] < 1.0, "%.3f s",
                args[0].t[1]);
  ck_assert_int_eq(args[1].st[1], OVL_ETIMEDOUT);
  ck_assert_msg(strstr(args[1].msg[1],
                       "rank 1: comm[0] stream: ring 0 p2p: recv #2 from "
                       "rank 0: arrived after the other side had failed: "
                       "ring 0 p2p: send #2 to rank 1 of rank 0 timed out") ==
                    args[1].msg[1],
                "%s", args[1].msg[1]);
  ck_assert_msg(args[1].t[1] < 0.2, "the latecomer took %.3f s",
                args[1].t[1]);
  B->world_fini(bw);
  pthread_barrier_destroy(&bar);
}
END_TEST

/* An abort ends a receive whose sender never comes, at once, and a later
 * point-to-point call fails at once. */
static void p2p_abort_rank(rank_arg *a) {
  ovl__brank *br;
  ovl_error err;
  ROK(a, B->rank_init(a->bw, a->rank, 1, &br, E));
  float *x = msg_buf(a, br, a->rank, 7);
  if (a->rank == 0) {
    ovl__p2p_item rv = p2p_recv(1, x, P2P_N);
    double t0 = ovl__now();
    ROK(a, B->p2p(br, COMM0, 0, &rv, 1, 1, E));
    a->st[0] = B->stream_sync(br, COMM0, &err);
    a->t[0] = ovl__now() - t0;
    memcpy(a->msg[0], err.msg, sizeof err.msg);
    t0 = ovl__now();
    ROK(a, B->p2p(br, CALC, 0, &rv, 1, 2, E));
    a->st[1] = B->stream_sync(br, CALC, &err);
    a->t[1] = ovl__now() - t0;
    memcpy(a->msg[1], err.msg, sizeof err.msg);
  }
  B->mem_free(br, x);
  B->rank_fini(br);
}

START_TEST(test_p2p_abort) {
  ovl__bworld *bw;
  rank_arg args[2];
  pthread_t th;
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 10.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  abort_ctx cx = {bw, 0.1};
  pthread_create(&th, NULL, abort_later, &cx);
  run_ranks(bw, 2, p2p_abort_rank, NULL, args);
  pthread_join(th, NULL);
  ck_assert_msg(args[0].st[0] == OVL_EABORTED, "%s: %s",
                ovl_err_name(args[0].st[0]), args[0].msg[0]);
  ck_assert_msg(args[0].t[0] < 1.0, "abort took %.3f s", args[0].t[0]);
  ck_assert_str_eq(args[0].msg[0], "rank 0: comm[0] stream: ring 0 p2p: "
                                   "recv #1 from rank 1: aborted");
  ck_assert_int_eq(args[0].st[1], OVL_EABORTED);
  ck_assert_msg(args[0].t[1] < 0.5, "after abort: %.3f s", args[0].t[1]);
  ck_assert_msg(strstr(args[0].msg[1], "recv #2 from rank 1 of rank 0: "
                                       "aborted") != NULL,
                "%s", args[0].msg[1]);
  B->world_fini(bw);
}
END_TEST

/* Refused before anything is queued. */
START_TEST(test_p2p_args) {
  ovl__bworld *bw;
  ovl__brank *br;
  ovl_error err;
  void *p;
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 1.0, &bw, E));
  CK_OK(B->world_rings(bw, 1, 1u, E));
  CK_OK(B->rank_init(bw, 1, 1, &br, E));
  CK_OK(B->mem_alloc(br, 16 * sizeof(float), &p, E));
  ovl__p2p_item it = p2p_send(2, p, 4);
  ck_assert_int_eq(B->p2p(br, CALC, 0, &it, 1, 1, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "rank 1: calc stream: invalid send (item 1 of 1) "
                            "on ring 0: peer 2 of 2 ranks");
  it = p2p_recv(0, NULL, 4);
  ck_assert_int_eq(B->p2p(br, CALC, 0, &it, 1, 1, &err), OVL_EINVAL);
  it = p2p_recv(0, p, 4);
  ck_assert_int_eq(B->p2p(br, CALC, 1, &it, 1, 1, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "rank 1: calc stream: no ring 1 (the rank has 1)");
  ck_assert_int_eq(B->p2p(br, CALC, 0, &it, 0, 1, &err), OVL_EINVAL);
  CK_OK(B->stream_sync(br, CALC, E));
  ck_assert_uint_eq(B->ring_progress(br, 0), 0);
  B->mem_free(br, p);
  B->rank_fini(br);
  B->world_fini(bw);
}
END_TEST

/* Tags of collectives are what ring_progress reports once they are done;
 * one that fails is not progress. */
static void progress_rank(rank_arg *a) {
  ovl__brank *br;
  ovl_error err;
  void *p;
  ROK(a, B->rank_init(a->bw, a->rank, 2, &br, E));
  ROK(a, B->mem_alloc(br, 8 * sizeof(float), &p, E));
  ROK(a, B->collective(br, CALC, 1, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p, p, 8, 0, 7, E));
  ROK(a, B->collective(br, COMM0, 1, OVL_COLL_BARRIER, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, NULL, NULL, 1, 0, 8, E));
  ROK(a, B->stream_sync(br, CALC, E));
  ROK(a, B->stream_sync(br, COMM0, E));
  RCHECK(a, B->ring_progress(br, 1) == 8 && B->ring_progress(br, 0) == 0,
         "progress %llu %llu", (unsigned long long)B->ring_progress(br, 0),
         (unsigned long long)B->ring_progress(br, 1));
  ROK(a, B->collective(br, CALC, 1, OVL_COLL_ALLREDUCE, OVL_RED_SUM,
                       OVL_DTYPE_FLOAT32, p, p, a->rank ? 4 : 8, 0, 9, E));
  a->st[0] = B->stream_sync(br, CALC, &err);
  RCHECK(a, B->ring_progress(br, 1) == 8, "progress %llu after a failure",
         (unsigned long long)B->ring_progress(br, 1));
  B->mem_free(br, p);
  B->rank_fini(br);
}

START_TEST(test_ring_progress) {
  ovl__bworld *bw;
  rank_arg args[2];
  CK_OK(B->world_init(OVL__ONE_PROCESS(2), 5.0, &bw, E));
  CK_OK(B->world_rings(bw, 2, 3u, E));
  run_ranks(bw, 2, progress_rank, NULL, args);
  ck_assert_int_eq(args[0].st[0], OVL_EMISMATCH);
  B->world_fini(bw);
}
END_TEST

static Suite *backend_cpu_suite(void) {
  Suite *s = suite_create("backend_cpu");
  TCase *tc;

  tc = tcase_create("streams");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_basics);
  tcase_add_test(tc, test_alloc_poison);
  tcase_add_test(tc, test_streams_concurrent);
  tcase_add_test(tc, test_fifo);
  tcase_add_test(tc, test_event_record_replaces);
  tcase_add_test(tc, test_event_snapshot);
  tcase_add_test(tc, test_wait_never_recorded);
  tcase_add_test(tc, test_wait_orders);
  tcase_add_test(tc, test_missing_wait_races);
  tcase_add_test(tc, test_sync_blocks);
  tcase_add_test(tc, test_wait_and_sync_timeout);
  tcase_add_test(tc, test_events_reserve);
  tcase_add_test(tc, test_chaos_delays_commands);
  tcase_add_test(tc, test_tune_refuses_cuda_knobs);
  suite_add_tcase(s, tc);

  tc = tcase_create("kernels");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_elementwise);
  tcase_add_test(tc, test_elementwise_data_discriminates);
  tcase_add_test(tc, test_elementwise_half_bits);
  tcase_add_test(tc, test_matmul);
  tcase_add_test(tc, test_matmul_bad_args);
  suite_add_tcase(s, tc);

  tc = tcase_create("collectives");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_collective_data_discriminates);
  tcase_add_test(tc, test_collectives_1);
  tcase_add_test(tc, test_collectives_2);
  tcase_add_test(tc, test_collectives_3);
  tcase_add_test(tc, test_collectives_4);
  tcase_add_test(tc, test_seq_by_enqueue);
  tcase_add_test(tc, test_many_collectives);
  suite_add_tcase(s, tc);

  tc = tcase_create("failures");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_mismatch);
  tcase_add_test(tc, test_timeout);
  tcase_add_test(tc, test_abort_collective);
  tcase_add_test(tc, test_abort_wait);
  tcase_add_test(tc, test_abort_ends_long_delay);
  tcase_add_test(tc, test_sticky_error);
  suite_add_tcase(s, tc);

  tc = tcase_create("reduce_alltoall_barrier");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_reduce_alltoall_barrier, 1, 5);
  tcase_add_test(tc, test_reduce_alltoall_barrier_args);
  tcase_add_test(tc, test_reduce_barrier_mismatch);
  tcase_add_test(tc, test_ring_progress);
  suite_add_tcase(s, tc);

  tc = tcase_create("p2p");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_p2p_order);
  tcase_add_loop_test(tc, test_p2p_group, 1, 5);
  tcase_add_test(tc, test_p2p_self);
  tcase_add_test(tc, test_p2p_mismatch);
  tcase_add_test(tc, test_p2p_timeout);
  tcase_add_test(tc, test_p2p_abort);
  tcase_add_test(tc, test_p2p_args);
  suite_add_tcase(s, tc);
  return s;
}

/* Every case of the suite, run side by side (tu_run_suite_cases: the
 * streams' and point-to-point cases mostly wait): a new case is a name
 * here. */
static const char *const backend_cpu_cases[] = {
    "streams", "kernels", "collectives", "failures", "reduce_alltoall_barrier",
    "p2p",     NULL};

int main(void) {
  return tu_run_suite_cases(backend_cpu_suite(), backend_cpu_cases);
}
