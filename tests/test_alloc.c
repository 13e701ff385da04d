/*
 * Allocation failures: each allocation the library makes in a call, one
 * at a time, fails, and the call must return OVL_ENOMEM with a message
 * (or succeed with the same result, where it can do without what it
 * asked for: a smaller block it could not shrink to), leave its
 * outputs NULL when it fails, and neither crash nor leak (AddressSanitizer
 * builds find a leak at the test's exit, valgrind too). The calls: parse
 * and bind, the static checks and their reports, the fixes (re-checked
 * and applied), the float64 reference, the pipeline without a run and
 * with one, a world, the report of a pipeline that ran (JSON,
 * timelines, trace, picture), and the strict JSON reader (a config file
 * from text and from a file).
 *
 * The suite is linked with -Wl,--wrap of malloc, calloc, realloc, strdup
 * and strndup (Makefile.am): the library's calls to them reach the
 * wrappers below, which count the allocations while a test has armed
 * them and fail the one asked for. The suite's own allocations and Check's
 * happen while disarmed. A sweep first counts the allocations of one call
 * (which must succeed), then makes each of them fail in turn, the call's
 * inputs made anew each time where the call changes them.
 *
 * Most calls allocate on the calling thread alone, so that "the k-th
 * allocation" is the same one on every run, and the sweep checks that it
 * happened. A run of a world is not (its ranks are threads, whose
 * allocations interleave differently each time): there the k-th
 * allocation may be another one, or none, and the call must still give
 * OVL_ENOMEM or its one result; a run that fails aborts its world, so each
 * call has a new world.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json_read.h"
#include "check_util.h"
#include "ovl.h"

/* ------------------------------------------------------------------ */
/* The wrappers                                                        */
/* ------------------------------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_int armed;      /* counting */
static atomic_long allocs;    /* allocations since armed */
static atomic_long fail_at;   /* the one that fails (1-based; 0: none) */
static atomic_long failed;    /* allocations failed since armed */

/* Whether this allocation fails. */
static int fail_now(void) {
  long k;
  if (!atomic_load(&armed))
    return 0;
  k = atomic_fetch_add(&allocs, 1) + 1;
  if (k != atomic_load(&fail_at))
    return 0;
  atomic_fetch_add(&failed, 1);
  return 1;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) {
  return fail_now() ? NULL : __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
  return fail_now() ? NULL : __real_realloc(p, n);
}
char *__wrap_strdup(const char *s) {
  return fail_now() ? NULL : __real_strdup(s);
}
char *__wrap_strndup(const char *s, size_t n) {
  return fail_now() ? NULL : __real_strndup(s, n);
}

/* What a call under test finds wrong while armed, checked once disarmed:
 * Check's own assertions allocate (they report to the parent process),
 * so none may run while armed. */
static const char *violation;
#define EXPECT(cond)                                                          \
  do {                                                                        \
    if (!(cond) && violation == NULL)                                         \
      violation = #cond;                                                      \
  } while (0)

/* What a call made, as a hash of the texts and numbers it gave (FNV-1a):
 * a call that did without an allocation must have made the same. */
static uint64_t digest;
static void digest_add(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    digest = (digest ^ b[i]) * 0x100000001b3ull;
}
static void digest_text(const char *s) {
  if (s != NULL)
    digest_add(s, strlen(s) + 1);
}

static void arm(long k) {
  atomic_store(&allocs, 0);
  atomic_store(&failed, 0);
  atomic_store(&fail_at, k);
  atomic_store(&armed, 1);
}

static void disarm(void) { atomic_store(&armed, 0); }

/* ------------------------------------------------------------------ */
/* The sweep                                                           */
/* ------------------------------------------------------------------ */

/* A call under test: prepare (disarmed, may be NULL) makes its inputs,
 * call (armed) makes the call and frees what it made, returning its
 * status and its error; done (disarmed, may be NULL) frees the inputs. */
typedef struct {
  const char *name;
  void (*prepare)(void *ctx);
  ovl_status (*call)(void *ctx, ovl_error *err);
  void (*done)(void *ctx);
  void *ctx;
  /* The call allocates in threads, in an order that varies: the k-th
   * allocation is not the same one each time, and may not happen. */
  bool threaded;
} sweep_case;

/* Counts of a sweep, for its checks. */
typedef struct {
  long allocs; /* of the call that succeeds */
  long enomem; /* failures that gave OVL_ENOMEM */
  long ok;     /* failures the call did without */
} sweep_counts;

static ovl_status run_once(const sweep_case *c, long k, ovl_error *err) {
  ovl_status st;
  memset(err, 0, sizeof *err);
  violation = NULL;
  digest = 0xcbf29ce484222325ull;
  if (c->prepare != NULL)
    c->prepare(c->ctx);
  arm(k);
  st = c->call(c->ctx, err);
  disarm();
  if (c->done != NULL)
    c->done(c->ctx);
  ck_assert_msg(violation == NULL, "%s: allocation %ld failing: not %s",
                c->name, k, violation);
  return st;
}

static sweep_counts sweep(const sweep_case *c) {
  sweep_counts n = {0};
  ovl_error err;
  ovl_status st = run_once(c, 0, &err);
  ck_assert_msg(st == OVL_OK, "%s: fails with no allocation failing: %s",
                c->name, err.msg);
  uint64_t want = digest;
  n.allocs = atomic_load(&allocs);
  ck_assert_msg(n.allocs > 0, "%s: no allocation seen (is the suite linked "
                "with -Wl,--wrap=malloc?)", c->name);
  for (long k = 1; k <= n.allocs; k++) {
    st = run_once(c, k, &err);
    ck_assert_msg(atomic_load(&failed) == 1 || c->threaded,
                  "%s: allocation %ld of %ld did not happen (the call "
                  "allocates differently from one run to the next)",
                  c->name, k, n.allocs);
    if (st == OVL_OK) {
      ck_assert_msg(digest == want,
                    "%s: allocation %ld of %ld failed, and the call "
                    "succeeded with another result", c->name, k, n.allocs);
      n.ok++;
      continue;
    }
    ck_assert_msg(st == OVL_ENOMEM,
                  "%s: allocation %ld of %ld failed: %s, expected "
                  "OVL_ENOMEM: %s",
                  c->name, k, n.allocs, ovl_err_name(st), err.msg);
    ck_assert_msg(err.msg[0] != '\0' && err.status == st,
                  "%s: allocation %ld failed: OVL_ENOMEM without its "
                  "message", c->name, k);
    n.enomem++;
  }
  /* Most allocations are needed: a call that shrugs off every failure
   * does not test what it claims to. */
  ck_assert_msg(n.enomem > 0, "%s: no failure gave OVL_ENOMEM", c->name);
  return n;
}

/* ------------------------------------------------------------------ */
/* The calls                                                           */
/* ------------------------------------------------------------------ */

/* A schedule of the source tree and what is made of it outside the
 * sweep. */
typedef struct {
  const char *file; /* under the source tree */
  int nranks;
  char *text;
  ovl_schedule *sched;
  ovl_program *prog;
  ovl_program *form; /* async */
} sched_ctx;

static void sched_load(sched_ctx *c) {
  ovl_error err = {0};
  ovl_bind_opts bo = {.size = sizeof bo, .nranks = c->nranks};
  if (c->text == NULL)
    c->text = tu_read_source_file(c->file);
  ck_assert_msg(ovl_schedule_parse(c->text, strlen(c->text), c->file,
                                   &c->sched, &err) == OVL_OK,
                "%s: %s", c->file, err.msg);
  ck_assert_msg(ovl_schedule_bind(c->sched, &bo, &c->prog, &err) == OVL_OK,
                "%s: %s", c->file, err.msg);
  ck_assert_msg(ovl_program_transform(c->prog, OVL_MODE_ASYNC, &c->form,
                                      &err) == OVL_OK,
                "%s: %s", c->file, err.msg);
}

static void sched_free(sched_ctx *c) {
  ovl_program_free(c->form);
  ovl_program_free(c->prog);
  ovl_schedule_free(c->sched);
  free(c->text);
  memset(c, 0, sizeof *c);
}

/* Parse and bind, with a -D define. */
static ovl_status call_parse(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_parse_opts po = {.size = sizeof po, .nranks = c->nranks};
  ovl_program *p = NULL;
  ovl_status st =
      ovl_program_parse(c->text, strlen(c->text), c->file, &po, &p, err);
  EXPECT(st == OVL_OK || p == NULL);
  if (st == OVL_OK) {
    uint64_t v[4] = {ovl_program_op_count(p), ovl_program_fetch_count(p),
                     ovl_program_bytes_per_rank(p),
                     (uint64_t)ovl_program_stream_count(p)};
    digest_add(v, sizeof v);
    for (int i = 0; i < ovl_program_stream_count(p); i++)
      digest_text(ovl_program_stream_name(p, i));
  }
  ovl_program_free(p);
  return st;
}

/* Each form, checked for races, the reports as text and JSON. */
static ovl_status call_races(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_races *r = NULL;
  char *text = NULL;
  ovl_status st = ovl_race_check(c->form, &r, err);
  if (st != OVL_OK) {
    EXPECT(r == NULL);
    return st;
  }
  st = ovl_races_format(r, c->form, 0, &text, err);
  digest_text(text);
  free(text);
  text = NULL;
  if (st == OVL_OK)
    st = ovl_races_format(r, c->form, 1, &text, err);
  digest_text(text);
  free(text);
  ovl_races_free(r);
  return st;
}

/* The races' fixes, re-checked against the schedule. */
static ovl_status call_race_fixes(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_races *r = NULL;
  char *text = NULL;
  ovl_status st;
  disarm();
  st = ovl_race_check(c->form, &r, err);
  atomic_store(&armed, 1);
  EXPECT(st == OVL_OK);
  if (st != OVL_OK)
    return st;
  st = ovl_races_check_fixes(r, c->form, c->sched, NULL, err);
  if (st == OVL_OK)
    st = ovl_races_format(r, c->form, 1, &text, err);
  digest_text(text);
  free(text);
  ovl_races_free(r);
  return st;
}

/* The mismatches and deadlocks of the program, their reports. */
static ovl_status call_order(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_mismatches *m = NULL;
  ovl_deadlocks *d = NULL;
  char *text = NULL;
  ovl_status st = ovl_mismatch_check(c->prog, &m, err);
  if (st != OVL_OK) {
    EXPECT(m == NULL);
    return st;
  }
  for (int json = 0; st == OVL_OK && json < 2; json++) {
    st = ovl_mismatches_format(m, c->prog, json, &text, err);
    digest_text(text);
    free(text);
    text = NULL;
  }
  ovl_mismatches_free(m);
  if (st != OVL_OK)
    return st;
  st = ovl_deadlock_check(c->form, &d, err);
  if (st != OVL_OK) {
    EXPECT(d == NULL);
    return st;
  }
  for (int json = 0; st == OVL_OK && json < 2; json++) {
    st = ovl_deadlocks_format(d, c->form, json, &text, err);
    digest_text(text);
    free(text);
    text = NULL;
  }
  ovl_deadlocks_free(d);
  return st;
}

/* The fixed schedule and its diff. */
static ovl_status call_fix(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_fixed *f = NULL;
  char *diff = NULL;
  size_t len = 0;
  ovl_bind_opts bo = {.size = sizeof bo, .nranks = c->nranks};
  ovl_status st = ovl_schedule_fix(
      c->sched, &bo,
      OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC), 0, &f, err);
  if (st != OVL_OK) {
    EXPECT(f == NULL);
    return st;
  }
  {
    uint64_t left[3];
    ovl_fixed_left(f, &left[0], &left[1], &left[2]);
    digest_add(left, sizeof left);
    digest_text(ovl_fixed_text(f, &len));
    for (size_t i = 0; i < ovl_fixed_count(f); i++)
      digest_text(ovl_fixed_hint(f, i));
  }
  st = ovl_fixed_diff(f, "a", "b", &diff, &len, err);
  digest_text(diff);
  free(diff);
  ovl_fixed_free(f);
  return st;
}

/* The float64 reference. */
static ovl_status call_reference(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_reference *ref = NULL;
  ovl_status st = ovl_reference_compute(c->prog, c->nranks, &ref, err);
  EXPECT(st == OVL_OK || ref == NULL);
  for (size_t i = 0; st == OVL_OK && i < ovl_program_fetch_count(c->prog);
       i++) {
    ovl_var_info v;
    ovl_program_fetch_info(c->prog, i, &v);
    for (int r = 0; r < c->nranks; r++) {
      const double *x = ovl_reference_fetched(ref, r, i);
      if (x != NULL)
        digest_add(x, (size_t)v.numel * sizeof *x);
    }
  }
  ovl_reference_free(ref);
  return st;
}

/* The pipeline without a run: every form checked, with the fixes
 * re-checked, and its reports. */
static ovl_status call_pipeline_check(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_pipeline_opts o = {.size = sizeof o,
                         .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                  OVL_MODE_BIT(OVL_MODE_ASYNC) |
                                  OVL_MODE_BIT(OVL_MODE_COMM),
                         .races = 1, .schedule = c->sched};
  ovl_report *r = NULL;
  char *text = NULL;
  size_t len = 0;
  ovl_status st = ovl_pipeline_run(NULL, c->prog, &o, &r, err);
  if (st != OVL_OK) {
    EXPECT(r == NULL);
    return st;
  }
  st = ovl_report_races_json(r, &text, &len, err);
  digest_text(text);
  free(text);
  ovl_report_free(r);
  return st;
}

/* The pipeline run on a world (its ranks are threads that allocate): a
 * clean schedule, so that its verdict is PASS whenever it runs. A world
 * whose run failed is aborted: each call has a new one. */
static ovl_world *world;
static void world_new(void *ctx) {
  (void)ctx;
  world = tu_cpu_world(2, 30);
}
static void world_free(void *ctx) {
  (void)ctx;
  ovl_world_free(world);
  world = NULL;
}
static ovl_status call_pipeline_run(void *ctx, ovl_error *err) {
  sched_ctx *c = ctx;
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0,
                     .op_times = 1, .trace = 1};
  ovl_pipeline_opts o = {.size = sizeof o,
                         .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                  OVL_MODE_BIT(OVL_MODE_ASYNC),
                         .run = 1, .run_opts = &ro, .rtol = 1e-5,
                         .atol = 1e-6};
  ovl_report *r = NULL;
  ovl_status st = ovl_pipeline_run(world, c->prog, &o, &r, err);
  if (st != OVL_OK) {
    EXPECT(r == NULL);
    return st;
  }
  digest_text(ovl_report_result(r));
  ovl_report_free(r);
  return st;
}

/* A cpu world of 2 ranks. */
static ovl_status call_world(void *ctx, ovl_error *err) {
  ovl_world_opts wo = {.size = sizeof wo, .backend = "cpu", .nranks = 2,
                       .timeout_s = 10};
  ovl_world *w = NULL;
  ovl_status st;
  (void)ctx;
  st = ovl_world_create(&wo, &w, err);
  EXPECT(st == OVL_OK || w == NULL);
  if (st == OVL_OK) {
    digest_text(ovl_world_devices(w));
    digest_text(ovl_world_backend_name(w));
  }
  ovl_world_free(w);
  return st;
}

/* What is made of a report that ran (traced, with op times), once the
 * runs are over: the results JSON, the races JSON, the timelines with
 * their races marked, as a trace and as a picture. */
static ovl_report *ran;
static ovl_status call_report(void *ctx, ovl_error *err) {
  ovl_timeline_run *runs = NULL;
  const ovl_timeline_marks *marks = NULL;
  size_t n = 0, len = 0;
  char *text = NULL;
  ovl_json_envelope env = {.size = sizeof env,
                           .head = "\"tool\": \"test_alloc\"",
                           .options = "\"x\": 1", .tail = "\"y\": 2"};
  ovl_status st;
  (void)ctx;
  st = ovl_report_json(ran, &env, &text, &len, err);
  digest_text(text);
  free(text);
  text = NULL;
  if (st == OVL_OK)
    st = ovl_report_races_json(ran, &text, &len, err);
  digest_text(text);
  free(text);
  text = NULL;
  if (st == OVL_OK)
    st = ovl_report_timelines(ran, &runs, &marks, &n, err);
  if (st != OVL_OK)
    return st;
  /* The times vary from run to run, not from call to call: the texts are
   * the same each time. */
  st = ovl_timeline_trace_marked(runs, marks, n, &text, &len, err);
  digest_text(text);
  free(text);
  text = NULL;
  if (st == OVL_OK)
    st = ovl_timeline_svg_marked(runs, marks, n, &text, &len, err);
  digest_text(text);
  free(text);
  free(runs);
  return st;
}

/* A config file as the strict JSON reader reads it (base/json_read.h):
 * objects and arrays that grow past their first blocks, strings with
 * escapes, a number longer than the reader's buffer on the stack. */
static const char json_text[] =
    "{\"machine\": {\"name\": \"h200 \\u00d7 8\", \"gpus\": 8, "
    "\"links\": [[0, 1, 450.5], [1, 2, 450.5], [2, 3, 450.5], [3, 0, 1e2], "
    "[0, 2, 25]], \"numa\": null, \"ok\": true},\n"
    " \"profile\": {\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": "
    "\"\\ud834\\udd1e\", \"f\": [], \"g\": {}, \"h\": 0.0000000000"
    "000000000000000000000000000000000000000000000000000000000000000000001}}";
static char json_path[64];

/* The tree as the digest sees it: every type, value, key and place. */
static void digest_json(const ovl__json *v) {
  int where[3] = {(int)v->type, v->line, v->col};
  digest_add(where, sizeof where);
  if (v->type == OVL__J_NUM)
    digest_add(&v->num, sizeof v->num);
  if (v->type == OVL__J_BOOL)
    digest_add(&v->b, sizeof v->b);
  digest_text(v->str);
  for (size_t i = 0; i < v->n; i++) {
    if (v->type == OVL__J_OBJ)
      digest_text(v->keys[i]);
    digest_json(&v->items[i]);
  }
}

static ovl_status call_json_parse(void *ctx, ovl_error *err) {
  ovl__json *v = NULL;
  ovl_status st;
  (void)ctx;
  st = ovl__json_parse(json_text, sizeof json_text - 1, "m.json", &v, err);
  EXPECT(st == OVL_OK || v == NULL);
  if (st == OVL_OK)
    digest_json(v);
  ovl__json_free(v);
  return st;
}

/* The same text from a file (json_path). */
static ovl_status call_json_load(void *ctx, ovl_error *err) {
  ovl__json *v = NULL;
  ovl_status st;
  (void)ctx;
  st = ovl__json_load(json_path, &v, err);
  EXPECT(st == OVL_OK || v == NULL);
  if (st == OVL_OK)
    digest_json(v);
  ovl__json_free(v);
  return st;
}

static sched_ctx *sched_case(const char *file, int nranks) {
  static sched_ctx c;
  c = (sched_ctx){.file = file, .nranks = nranks};
  sched_load(&c);
  return &c;
}

static void check_sweep(const char *name, ovl_status (*call)(void *, ovl_error *),
                        const char *file, int nranks) {
  sched_ctx *c = sched_case(file, nranks);
  sweep_case sc = {.name = name, .call = call, .ctx = c};
  struct timespec t0, t1;
  sweep_counts n;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  n = sweep(&sc);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%s (%s): %ld allocations, %ld failures gave OVL_ENOMEM, %ld "
         "were done without (%.2f s)\n", name, file, n.allocs, n.enomem, n.ok,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
  sched_free(c);
}

START_TEST(test_parse) {
  check_sweep("parse", call_parse, "tests/schedules/all_ops.sched", 2);
  check_sweep("parse", call_parse, "schedules/bad/pipeline_1f1b.sched", 2);
}
END_TEST

START_TEST(test_races) {
  check_sweep("races", call_races, "schedules/bad/missing_wait_comm.sched", 2);
  check_sweep("races", call_races, "schedules/bad/ddp_buckets.sched", 2);
}
END_TEST

START_TEST(test_race_fixes) {
  check_sweep("race fixes", call_race_fixes,
              "schedules/bad/missing_wait_comm.sched", 2);
}
END_TEST

START_TEST(test_order) {
  check_sweep("order", call_order, "tests/order/bad/skipped_collective.sched",
              2);
  check_sweep("order", call_order, "schedules/bad/pipeline_1f1b.sched", 2);
}
END_TEST

START_TEST(test_fix) {
  check_sweep("fix", call_fix, "schedules/bad/missing_wait_comm.sched", 2);
  check_sweep("fix", call_fix, "tests/order/bad/skipped_collective.sched", 2);
}
END_TEST

START_TEST(test_reference) {
  check_sweep("reference", call_reference, "tests/schedules/all_ops.sched", 3);
  check_sweep("reference", call_reference, "schedules/good/seed_small.sched",
              2);
}
END_TEST

START_TEST(test_pipeline_check) {
  check_sweep("pipeline check", call_pipeline_check,
              "schedules/bad/ddp_buckets.sched", 2);
}
END_TEST

START_TEST(test_pipeline_run) {
  static const char clean[] =
      "x = data(shape=[4, 8], dtype=float32, init=uniform, seed=7)\n"
      "c = scale(x, scale=3.0)\n"
      "c_wait_compute(c, ring_id=0)\n"
      "c_allreduce_sum(c, ring_id=0)\n"
      "c_wait_comm(c, ring_id=0)\n"
      "y = elementwise_add(c, x)\n"
      "fetch(y)\n";
  static sched_ctx ctx;
  sched_ctx *c = &ctx;
  sweep_case sc = {.name = "pipeline run", .call = call_pipeline_run,
                   .prepare = world_new, .done = world_free, .ctx = c,
                   .threaded = true};
  struct timespec t0, t1;
  sweep_counts n;
  ctx = (sched_ctx){.file = "clean.sched", .nranks = 2,
                    .text = strdup(clean)};
  sched_load(c);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  n = sweep(&sc);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("pipeline run: %ld allocations, %ld failures gave OVL_ENOMEM, %ld "
         "were done without (%.2f s)\n", n.allocs, n.enomem, n.ok,
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
  sched_free(c);
}
END_TEST

START_TEST(test_world) {
  sweep_case sc = {.name = "world", .call = call_world};
  sweep_counts n = sweep(&sc);
  printf("world: %ld allocations, %ld failures gave OVL_ENOMEM, %ld were "
         "done without\n", n.allocs, n.enomem, n.ok);
}
END_TEST

/* A racy schedule run (its numbers may be wrong: nothing compares them
 * here), on 2 ranks, in the sync and async forms, with the checks, traced,
 * with op times. */
START_TEST(test_report) {
  sched_ctx *c = sched_case("schedules/bad/missing_wait_comm.sched", 2);
  ovl_world *w = tu_cpu_world(2, 30);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0,
                     .op_times = 1, .trace = 1};
  ovl_pipeline_opts o = {.size = sizeof o,
                         .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                  OVL_MODE_BIT(OVL_MODE_ASYNC),
                         .races = 1, .run = 1, .run_opts = &ro,
                         .rtol = 1e-5, .atol = 1e-6, .schedule = c->sched};
  ovl_error err = {0};
  sweep_case sc = {.name = "report", .call = call_report};
  sweep_counts n;
  ck_assert_msg(ovl_pipeline_run(w, c->prog, &o, &ran, &err) == OVL_OK, "%s",
                err.msg);
  n = sweep(&sc);
  printf("report: %ld allocations, %ld failures gave OVL_ENOMEM, %ld were "
         "done without\n", n.allocs, n.enomem, n.ok);
  ovl_report_free(ran);
  ovl_world_free(w);
  sched_free(c);
}
END_TEST

START_TEST(test_json) {
  sweep_case sc = {.name = "json parse", .call = call_json_parse};
  sweep_counts n = sweep(&sc);
  int fd;
  printf("json parse: %ld allocations, %ld failures gave OVL_ENOMEM, %ld "
         "were done without\n", n.allocs, n.enomem, n.ok);
  ck_assert_int_eq(n.ok, 0);
  strcpy(json_path, "/tmp/ovl-alloc-XXXXXX");
  fd = mkstemp(json_path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, json_text, sizeof json_text - 1),
                   (ssize_t)sizeof json_text - 1);
  close(fd);
  sc = (sweep_case){.name = "json load", .call = call_json_load};
  n = sweep(&sc);
  unlink(json_path);
  printf("json load: %ld allocations, %ld failures gave OVL_ENOMEM, %ld "
         "were done without\n", n.allocs, n.enomem, n.ok);
  ck_assert_int_eq(n.ok, 0);
}
END_TEST

static Suite *alloc_suite(void) {
  Suite *s = suite_create("alloc");
  struct {
    const char *name;
    const TTest *test;
  } cases[] = {{"parse", test_parse},
               {"races", test_races},
               {"race_fixes", test_race_fixes},
               {"order", test_order},
               {"fix", test_fix},
               {"reference", test_reference},
               {"pipeline_check", test_pipeline_check},
               {"pipeline_run", test_pipeline_run},
               {"world", test_world},
               {"report", test_report},
               {"json", test_json}};
  /* A case each: CK_RUN_CASE=fix runs one. */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    TCase *tc = tcase_create(cases[i].name);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cases[i].test);
    suite_add_tcase(s, tc);
  }
  return s;
}

int main(void) { return tu_run_suite(alloc_suite()); }
