/*
 * The model backend (src/run/model_run.c on src/backend/model*.c): small
 * programs on hand-made profiles and machine files, whose times are
 * worked out by hand in the comments and asserted to 1e-9 s: the host's
 * cost per primitive, the gap between two work items of a stream, a
 * collective beside a kernel with and without contention, named events
 * (a wait for the last record when the wait was enqueued; none), host
 * syncs and fetches, graph segments, ranks that differ, point-to-point
 * pairs and groups; the explain split, op times and trace spans of those
 * runs; a predicted result's marks; the profile and machine file
 * readers' refusals; and a profile of another schedule refused by the
 * pipeline.
 *
 * Unless a test says otherwise, every program has 2 ranks, the profile
 * says 2 ranks (so its fits are used) and prices these kernels (float32):
 *   scale [1000] 100 us, add [1000] 50 us, scale [500] 20 us
 * and these communications:
 *   allreduce  200 us + bytes / 1e18 B/s (4000 bytes: 4e-15 s, nothing)
 *   p2p         30 us + bytes / 1e9 B/s  (4000 bytes: 4 us)
 * Times below are in microseconds.
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/model.h"
#include "check_util.h"
#include "ovl.h"

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/* The temporary files of the test under way (each test runs in its own
 * process); removed by cleanup(). */
#define MAX_TMP 32
static char tmp_paths[MAX_TMP][256];
static int ntmp;

/* `text` in a new temporary file; its path (lives until cleanup). */
static const char *tmp_file(const char *text) {
  const char *dir = getenv("TMPDIR");
  char *path;
  FILE *f;
  int fd;
  ck_assert_int_lt(ntmp, MAX_TMP);
  path = tmp_paths[ntmp++];
  snprintf(path, 256, "%s/ovl-model.XXXXXX",
           dir != NULL && dir[0] != '\0' ? dir : "/tmp");
  fd = mkstemp(path);
  ck_assert_msg(fd >= 0, "mkstemp %s", path);
  f = fdopen(fd, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

static void cleanup(void) {
  for (int i = 0; i < ntmp; i++)
    unlink(tmp_paths[i]);
  ntmp = 0;
}

/* ------------------------------------------------------------------ */
/* Profiles and machine files                                          */
/* ------------------------------------------------------------------ */

/* The host's costs (us), as a profile's "host" has them. */
typedef struct hostc {
  double kernel, coll, p2p, record, wait, delay, launch, sync, gap, ggap;
} hostc;

/* Nothing costs anything. */
static const hostc H0 = {0};

static const char KERNELS[] =
    "[{\"op\": \"scale\", \"dtype\": \"float32\", \"numel\": 1000, \"us\": 100}, "
    "{\"op\": \"add\", \"dtype\": \"float32\", \"numel\": 1000, \"us\": 50}, "
    "{\"op\": \"scale\", \"dtype\": \"float32\", \"numel\": 500, \"us\": 20}]";

static const char COMM[] =
    "{\"allreduce\": {\"lat_us\": 200, \"GBps\": 1e9, \"points\": 2}, "
    "\"p2p\": {\"lat_us\": 30, \"GBps\": 1, \"points\": 2}}";

/* No contention for the kinds used (the machine's defaults are not 1). */
static const char NO_SLOW[] =
    "{\"allreduce\": {\"kernel_slow\": {\"mem\": 1, \"matmul\": 1}, "
    "\"comm_slow\": {\"mem\": 1, \"matmul\": 1}}, "
    "\"p2p\": {\"kernel_slow\": {\"mem\": 1, \"matmul\": 1}, "
    "\"comm_slow\": {\"mem\": 1, \"matmul\": 1}}}";

/* A memory-bound kernel beside an allreduce runs at half speed, the
 * allreduce beside it at 1 / 1.5. */
static const char SLOW[] =
    "{\"allreduce\": {\"kernel_slow\": {\"mem\": 2, \"matmul\": 1}, "
    "\"comm_slow\": {\"mem\": 1.5, \"matmul\": 1}}, "
    "\"p2p\": {\"kernel_slow\": {\"mem\": 1, \"matmul\": 1}, "
    "\"comm_slow\": {\"mem\": 1, \"matmul\": 1}}}";

/* A profile: one key a line (the error tests count on it), line 4 the
 * host's costs. `schedule` is the "schedule" object. */
static char *profile_text_full(int ranks, const char *schedule, hostc h,
                               const char *kernels, const char *comm,
                               const char *contention) {
  char *t = malloc(8192);
  ck_assert_ptr_nonnull(t);
  snprintf(t, 8192,
           "{\"format\": \"overlap-sim profile 1\",\n"
           " \"machine\": {\"device\": \"test\", \"devices\": 1, \"ranks\": "
           "%d, \"nccl\": \"x\", \"cuda\": \"y\", \"date\": \"2026-12-01\"},\n"
           " \"schedule\": %s,\n"
           " \"host\": {\"kernel_us\": %.17g, \"coll_us\": %.17g, \"p2p_us\": "
           "%.17g, \"record_us\": %.17g, \"wait_us\": %.17g, \"delay_us\": "
           "%.17g, \"graph_launch_us\": %.17g, \"sync_us\": %.17g, "
           "\"gap_us\": %.17g, \"graph_gap_us\": %.17g},\n"
           " \"kernels\": %s,\n"
           " \"comm\": %s,\n"
           " \"contention\": %s}\n",
           ranks, schedule, h.kernel, h.coll, h.p2p, h.record, h.wait,
           h.delay, h.launch, h.sync, h.gap, h.ggap, kernels, comm,
           contention);
  return t;
}

static char *profile_text(hostc h, const char *contention) {
  return profile_text_full(2, "{\"name\": \"t.sched\"}", h, KERNELS, COMM,
                           contention);
}

/* A machine file: d2h 10 us + bytes / 1e9 B/s; its own host costs and
 * contention (overridden by a profile's where it has them). */
static const char MACHINE[] =
    "{\"format\": \"overlap-sim machine 1\",\n"
    " \"name\": \"testbox\", \"device\": \"Test GPU\", \"gpus_per_node\": 8,\n"
    " \"intra\": {\"busbw_GBps\": 100, \"lat_us\": 1},\n"
    " \"inter\": {\"busbw_GBps\": 10, \"lat_us\": 5},\n"
    " \"nccl\": {\"algorithm\": \"ring\", \"base_us\": 5, \"simple_base_us\": "
    "30, \"ll_bw_frac\": 0.25},\n"
    " \"device_perf\": {\"mem_GBps\": 1000, \"tflops\": {\"float32\": 10, "
    "\"float64\": 5, \"float16\": 100, \"bfloat16\": 100}, "
    "\"kernel_min_us\": 2},\n"
    " \"host\": {\"kernel_us\": 3, \"coll_us\": 4, \"p2p_us\": 4, "
    "\"record_us\": 1, \"wait_us\": 1, \"delay_us\": 3, \"graph_launch_us\": "
    "8, \"sync_us\": 6, \"gap_us\": 1, \"graph_gap_us\": 0.5},\n"
    " \"d2h\": {\"GBps\": 1, \"lat_us\": 10},\n"
    " \"contention\": {\"kernel_slow\": {\"mem\": 1, \"matmul\": 1}, "
    "\"comm_slow\": {\"mem\": 1, \"matmul\": 1}},\n"
    " \"sources\": [\"made up for tests/test_model.c\"]}\n";

/* ------------------------------------------------------------------ */
/* Worlds and runs                                                     */
/* ------------------------------------------------------------------ */

static ovl_world *model_world(int nranks) {
  ovl_world_opts wo = {.size = sizeof wo, .backend = "model",
                       .nranks = nranks};
  ovl_world *w = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_world_create(&wo, &w, &err);
  ck_assert_msg(st == OVL_OK, "model world: %s", err.msg);
  ck_assert_str_eq(ovl_world_backend_name(w), "model");
  ck_assert_int_eq(ovl_world_nranks(w), nranks);
  return w;
}

static void set_ok(ovl_world *w, const char *key, const char *path) {
  ovl_error err = {0};
  ovl_status st = ovl_world_set(w, key, path, &err);
  ck_assert_msg(st == OVL_OK, "%s %s: %s", key, path, err.msg);
}

/* A world of `nranks` ranks with `profile` (text; NULL: none) and
 * `machine` (text; NULL: the built-in one). */
static ovl_world *world_with(int nranks, const char *profile,
                             const char *machine) {
  ovl_world *w = model_world(nranks);
  if (machine != NULL)
    set_ok(w, "machine", tmp_file(machine));
  if (profile != NULL)
    set_ok(w, "profile", tmp_file(profile));
  return w;
}

/* What one run gives. */
typedef struct run_t {
  ovl_program *prog; /* the form run */
  ovl_result *res;
} run_t;

#define ITERS 3

/* `text` (bound for the world's ranks) in `mode`'s form, ITERS timed
 * iterations after one warmup, with op times and a trace of the last;
 * `graph` as ovl_run_opts. */
static run_t run_mode(ovl_world *w, const char *text, ovl_mode mode,
                      int graph) {
  ovl_program *p = tu_parse(text, "t.sched", ovl_world_nranks(w));
  ovl_run_opts ro = {.size = sizeof ro, .iters = ITERS, .warmup = 1,
                     .op_times = 1, .trace = 1, .trace_iter = -1,
                     .graph = graph};
  ovl_error err = {0};
  run_t r = {0};
  ovl_status st;
  if (mode != OVL_MODE_ASYNC) {
    st = ovl_program_transform(p, mode, &r.prog, &err);
    ck_assert_msg(st == OVL_OK, "transform: %s", err.msg);
    ovl_program_free(p);
  } else {
    r.prog = p;
  }
  st = ovl_world_run(w, r.prog, &ro, &r.res, &err);
  ck_assert_msg(st == OVL_OK, "model run: %s\n%s", err.msg, text);
  ck_assert_ptr_nonnull(r.res);
  return r;
}

static run_t run(ovl_world *w, const char *text) {
  return run_mode(w, text, OVL_MODE_ASYNC, 0);
}

static void run_free(run_t *r) {
  ovl_result_free(r->res);
  ovl_program_free(r->prog);
}

#define US 1e-6
#define TOL 1e-9

/* got (s) is want_us microseconds, to 1e-9 s. */
#define NEAR(got, want_us, ...)                                               \
  do {                                                                        \
    double g_ = (got), w_ = (want_us) * US;                                   \
    ck_assert_msg(fabs(g_ - w_) <= TOL, "%s: got %.6f us, expected %.6f us", \
                  #got, g_ / US, w_ / US);                                    \
  } while (0)

/* Every timed iteration took T (us). */
static void check_time(const run_t *r, double T) {
  ck_assert_int_eq(ovl_result_iters(r->res), ITERS);
  for (int i = 0; i < ITERS; i++)
    NEAR(ovl_result_times(r->res)[i], T);
}

/* The explain split of the run: each part (us), the rank it is of, and
 * that the parts add up to the iteration. */
static void check_explain(const run_t *r, double total, double compute,
                          double exposed, double contention, double host,
                          double waits, int rank) {
  ovl_explain e;
  ck_assert_int_eq(ovl_result_explain(r->prog, r->res, &e), 0);
  ck_assert_msg(fabs(e.compute + e.exposed_comm + e.contention + e.host +
                     e.waits - e.total) <= TOL,
                "explain does not add up: compute %.6f + exposed %.6f + "
                "contention %.6f + host %.6f + waits %.6f != total %.6f (us)",
                e.compute / US, e.exposed_comm / US, e.contention / US,
                e.host / US, e.waits / US, e.total / US);
  NEAR(e.total, total);
  NEAR(e.compute, compute);
  NEAR(e.exposed_comm, exposed);
  NEAR(e.contention, contention);
  NEAR(e.host, host);
  NEAR(e.waits, waits);
  ck_assert_int_eq(e.rank, rank);
}

/* Op `op` on `rank` ran from start to end (us) in the trace. */
static void check_span(const run_t *r, int rank, size_t op, double start,
                       double end) {
  double s = NAN, e = NAN;
  ck_assert_msg(ovl_result_span(r->res, rank, op, &s, &e) == 0,
                "no span for op %zu on rank %d", op, rank);
  ck_assert_msg(fabs(s - start * US) <= TOL && fabs(e - end * US) <= TOL,
                "op %zu on rank %d: span [%.6f, %.6f] us, expected [%.6f, "
                "%.6f]",
                op, rank, s / US, e / US, start, end);
}

static void check_record_span(const run_t *r, int rank, size_t op,
                              double start, double end) {
  double s = NAN, e = NAN;
  ck_assert_int_eq(ovl_result_record_span(r->res, rank, op, &s, &e), 0);
  ck_assert_msg(fabs(s - start * US) <= TOL && fabs(e - end * US) <= TOL,
                "op %zu on rank %d: record span [%.6f, %.6f] us, expected "
                "[%.6f, %.6f]",
                op, rank, s / US, e / US, start, end);
}

/* The op times of `rank`: us per iteration of each op, in program order
 * (summed over the ITERS timed iterations in the result). */
static void check_op_times(const run_t *r, int rank, const double *us,
                           size_t n) {
  const double *t = ovl_result_op_times(r->res, rank);
  ck_assert_ptr_nonnull(t);
  ck_assert_uint_eq(ovl_program_op_count(r->prog), n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(fabs(t[i] - us[i] * US * ITERS) <= TOL * ITERS,
                  "op %zu on rank %d: %.6f us per iteration, expected %.6f",
                  i, rank, t[i] / ITERS / US, us[i]);
}

/* The op named `name` is op i. */
static void check_op(const run_t *r, size_t i, const char *name) {
  const char *got = NULL;
  int line = 0, stream = 0;
  ovl_program_op(r->prog, i, &got, &line, &stream);
  ck_assert_ptr_nonnull(got);
  ck_assert_str_eq(got, name);
}

/* ------------------------------------------------------------------ */
/* (a) One kernel: the host's cost                                     */
/* ------------------------------------------------------------------ */

/* kernel_us 7, sync_us 3: the host enqueues the kernel at 7, it runs
 * 7..107, the iteration ends when the stream is drained, plus the sync:
 * 110. The device ran the kernel 100; nothing ran for the rest, the
 * host's: 10 (7 before, the final sync after). */
START_TEST(one_kernel_host_cost) {
  hostc h = H0;
  h.kernel = 7;
  h.sync = 3;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0)\n");
  check_time(&r, 110);
  check_op(&r, 0, "scale");
  check_span(&r, 0, 0, 7, 107);
  check_span(&r, 1, 0, 7, 107);
  check_op_times(&r, 0, (const double[]){100}, 1);
  check_op_times(&r, 1, (const double[]){100}, 1);
  check_explain(&r, 110, 100, 0, 0, 10, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* The same without the final sync's cost: the split's host part is the
 * host's 7 alone. (Separates the final sync from the enqueueing.) */
START_TEST(one_kernel_no_sync_cost) {
  hostc h = H0;
  h.kernel = 7;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0)\n");
  check_time(&r, 107);
  check_explain(&r, 107, 100, 0, 0, 7, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (b) Two kernels on one stream: the gap                              */
/* ------------------------------------------------------------------ */

static const char two_kernels[] = "a = data(shape=[1000], dtype=float32)\n"
                                  "b = scale(a, scale=2.0)\n"
                                  "c = elementwise_add(a, b)\n";

/* kernel_us 1, gap_us 5: scale 1..101; add, enqueued at 2, starts 5
 * after scale ended: 106..156. Host: 0..1 and the gap 101..106. */
START_TEST(two_kernels_gap) {
  hostc h = H0;
  h.kernel = 1;
  h.gap = 5;
  h.ggap = 1000; /* graph mode's: not used eager */
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, two_kernels);
  check_time(&r, 156);
  check_span(&r, 0, 0, 1, 101);
  check_span(&r, 0, 1, 106, 156);
  check_op_times(&r, 1, (const double[]){100, 50}, 2);
  check_explain(&r, 156, 150, 0, 0, 6, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A slow host (kernel_us 200): scale 200..300, add enqueued at 400 (later
 * than 300 + the gap): 400..450. */
START_TEST(two_kernels_slow_host) {
  hostc h = H0;
  h.kernel = 200;
  h.gap = 5;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, two_kernels);
  check_time(&r, 450);
  check_span(&r, 1, 0, 200, 300);
  check_span(&r, 1, 1, 400, 450);
  check_explain(&r, 450, 150, 0, 0, 300, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* The gap follows every work item of a stream (kernel, collective,
 * delay), counted from the last one's end: a record between two does not
 * restart it. gap_us 5, nothing paid by the host: scale 0..100, the
 * allreduce on calc 105..305, the record at 305, the delay 310..410. */
START_TEST(gap_after_every_work_item) {
  hostc h = H0;
  h.gap = 5;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0)\n"
                   "c_allreduce_sum(b, ring_id=0, use_calc_stream=true)\n"
                   "event_record(b, event=e, stream=calc)\n"
                   "delay(us=100, stream=calc)\n");
  check_time(&r, 410);
  check_span(&r, 0, 0, 0, 100);
  check_span(&r, 0, 1, 105, 305);
  check_span(&r, 0, 2, 305, 305);
  check_span(&r, 0, 3, 310, 410);
  check_explain(&r, 410, 200, 200, 0, 10, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (c) A collective beside a kernel                                    */
/* ------------------------------------------------------------------ */

/* Ops: 0 scale, 1 c_wait_compute, 2 c_allreduce_sum, 3 scale,
 * 4 c_wait_comm, 5 elementwise_add. */
static const char overlap_text[] =
    "a = data(shape=[1000], dtype=float32, init=uniform, seed=0)\n"
    "b = scale(a, scale=2.0)\n"
    "c_wait_compute(b, ring_id=0)\n"
    "c_allreduce_sum(b, ring_id=0, use_calc_stream=false)\n"
    "d = scale(a, scale=3.0)\n"
    "c_wait_comm(b, ring_id=0)\n"
    "e = elementwise_add(b, d)\n";

/* Every kernel, collective and p2p call costs the host 1. */
static hostc host1(void) {
  hostc h = H0;
  h.kernel = h.coll = h.p2p = h.delay = 1;
  return h;
}

/* Async, kernel_slow 2 and comm_slow 1.5 (allreduce, mem): the host
 * enqueues scale at 1, the record and the wait at 1, the allreduce at 2,
 * the second scale at 3, the record and the wait at 3, add at 4.
 *   calc:    scale 1..101; record 101; scale 101..? ; wait; add
 *   comm[0]: wait 1..101 (for calc's record); allreduce from 101.
 * 101..301: the second scale at 1/2 (100 us of work: 200 us), the
 * allreduce at 1/1.5: 133.33 of its 200 done; 301..367.67: the allreduce
 * alone, 66.67 more; the record at 367.67 frees calc's wait; add
 * 367.67..417.67 = 1253/3.
 * Split: compute 100 + 100 (the half speed's work) + 50 = 250; contention
 * 100 (the other half of 101..301); exposed 200/3; host 1. */
START_TEST(coll_beside_kernel_contention) {
  hostc h = host1();
  char *p = profile_text(h, SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, overlap_text);
  double end_ar = 101 + 200 + 200.0 / 3; /* 367.67 */
  check_op(&r, 1, "c_wait_compute");
  check_op(&r, 2, "c_allreduce_sum");
  check_op(&r, 4, "c_wait_comm");
  check_time(&r, 1253.0 / 3);
  for (int rank = 0; rank < 2; rank++) {
    check_span(&r, rank, 0, 1, 101);
    check_span(&r, rank, 1, 1, 101);   /* comm[0]'s wait */
    check_record_span(&r, rank, 1, 101, 101);
    check_span(&r, rank, 2, 101, end_ar);
    check_span(&r, rank, 3, 101, 301);
    check_span(&r, rank, 4, 301, end_ar); /* calc's wait */
    check_record_span(&r, rank, 4, end_ar, end_ar);
    check_span(&r, rank, 5, end_ar, end_ar + 50);
    check_op_times(&r, rank,
                   (const double[]){100, 0, end_ar - 101, 200, 0, 50}, 6);
  }
  check_explain(&r, 1253.0 / 3, 250, 200.0 / 3, 100, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Sync form: the allreduce on calc, the waits gone: scale 1..101,
 * allreduce 101..301, scale 301..401, add 401..451. */
START_TEST(coll_sync_form) {
  char *p = profile_text(host1(), SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run_mode(w, overlap_text, OVL_MODE_SYNC, 0);
  check_time(&r, 451);
  check_explain(&r, 451, 250, 200, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Async without contention: the second scale 101..201, the allreduce
 * 101..301, add after it 301..351; 201..301 the allreduce runs alone
 * (exposed), calc waiting. */
START_TEST(coll_beside_kernel_no_contention) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, overlap_text);
  check_time(&r, 351);
  check_span(&r, 0, 2, 101, 301);
  check_span(&r, 0, 3, 101, 201);
  check_span(&r, 0, 4, 201, 301);
  check_span(&r, 0, 5, 301, 351);
  check_explain(&r, 351, 250, 100, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Contention, the allreduce shorter than the kernel (lat_us 50): the
 * allreduce at 1/1.5 needs 75 (101..176); the scale at 1/2 does 37.5 of
 * its work by then and the other 62.5 alone: 101..238.5; add
 * 238.5..288.5. Split: compute 100 + 37.5 + 62.5 + 50, contention 37.5,
 * host 1. */
START_TEST(coll_shorter_than_kernel) {
  char *p = profile_text_full(
      2, "{\"name\": \"t.sched\"}", host1(), KERNELS,
      "{\"allreduce\": {\"lat_us\": 50, \"GBps\": 1e9, \"points\": 2}}", SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, overlap_text);
  check_time(&r, 288.5);
  check_span(&r, 1, 2, 101, 176);
  check_span(&r, 1, 3, 101, 238.5);
  check_span(&r, 1, 5, 238.5, 288.5);
  check_op_times(&r, 1, (const double[]){100, 0, 75, 137.5, 0, 50}, 6);
  check_explain(&r, 288.5, 250, 0, 37.5, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Two kernels at once on one rank share the device: a scale on a user
 * stream and one on calc, both enqueued at 1 and 2 (kernel_us 1): 1..2
 * the first alone (1 of its 100), then both at 1/2: the second (20 of
 * work, scale [500]) ends at 42, the first then has 100 - 1 - 20 = 79
 * left alone: 42..121. */
START_TEST(kernels_share_the_device) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "s = data(shape=[500], dtype=float32)\n"
                   "b = scale(a, scale=2.0, stream=side)\n"
                   "c = scale(s, scale=2.0)\n");
  check_time(&r, 121);
  check_span(&r, 0, 0, 1, 121);
  check_span(&r, 0, 1, 2, 42);
  check_explain(&r, 121, 120, 0, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Kernels are matched by op, dtype and numel, matmuls by m, n, k and
 * their transposes: matmul [64, 32] x [32, 16] (m 64, n 16, k 32) 70;
 * the same with x given transposed ([32, 64], trans_x) 90, not 70 nor
 * the entry of another k (11); scale of bfloat16 [1000] 33, not
 * float32's 100. In a row on calc, nothing paid by the host: 0..70,
 * 70..160, 160..193. */
static const char MATMUL_KERNELS[] =
    "[{\"op\": \"matmul\", \"dtype\": \"float32\", \"m\": 64, \"n\": 16, "
    "\"k\": 32, \"trans_x\": false, \"trans_y\": false, \"us\": 70}, "
    "{\"op\": \"matmul\", \"dtype\": \"float32\", \"m\": 64, \"n\": 16, "
    "\"k\": 32, \"trans_x\": true, \"trans_y\": false, \"us\": 90}, "
    "{\"op\": \"matmul\", \"dtype\": \"float32\", \"m\": 64, \"n\": 16, "
    "\"k\": 8, \"us\": 11}, "
    "{\"op\": \"scale\", \"dtype\": \"float32\", \"numel\": 1000, \"us\": 100}, "
    "{\"op\": \"scale\", \"dtype\": \"bfloat16\", \"numel\": 1000, \"us\": 33}]";

START_TEST(kernels_matched) {
  char *p = profile_text_full(2, "{\"name\": \"t.sched\"}", H0,
                              MATMUL_KERNELS, COMM, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "x = data(shape=[64, 32])\n"
                   "xt = data(shape=[32, 64])\n"
                   "v = data(shape=[32, 16])\n"
                   "h = data(shape=[1000], dtype=bfloat16)\n"
                   "o1 = matmul_v2(x, v)\n"
                   "o2 = matmul_v2(xt, v, trans_x=true)\n"
                   "b = scale(h, scale=2.0)\n");
  check_time(&r, 193);
  check_op_times(&r, 0, (const double[]){70, 90, 33}, 3);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A matmul beside an allreduce: its class's factors (kernel_slow 3,
 * comm_slow 1.25), not the memory-bound ones (2, 1.5). The allreduce
 * (no wait before it) is enqueued at 1 on comm[0], the matmul at 2:
 * 1..2 the allreduce alone (1 of 200); from 2 the matmul at 1/3 (70 of
 * work: 2..212) and the allreduce at 0.8 (168 more), 31 left alone:
 * 212..243. Split: host 1, exposed 1 + 31, compute 70, contention 140. */
START_TEST(matmul_contention) {
  char *p = profile_text_full(
      2, "{\"name\": \"t.sched\"}", host1(), MATMUL_KERNELS, COMM,
      "{\"allreduce\": {\"kernel_slow\": {\"mem\": 2, \"matmul\": 3}, "
      "\"comm_slow\": {\"mem\": 1.5, \"matmul\": 1.25}}}");
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "x = data(shape=[64, 32])\n"
                   "v = data(shape=[32, 16])\n"
                   "c = data(shape=[1000])\n"
                   "c_allreduce_sum(c, ring_id=0, use_calc_stream=false)\n"
                   "o = matmul_v2(x, v)\n");
  check_time(&r, 243);
  check_span(&r, 0, 0, 1, 243);
  check_span(&r, 0, 1, 2, 212);
  check_explain(&r, 243, 70, 32, 140, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Each collective priced by its kind's fit, bytes = NCCL's count x the
 * element size: allgather's count is each rank's part (1000: 4000 B,
 * 10 + 4), reducescatter's what each rank receives (1000 of the 2000:
 * 20 + 4), alltoall's all it sends (1000: 5 + 4), barrier's 1 element
 * (7). On calc, coll_us 1: 1..15, 15..39, 39..48, 48..55; the barrier's
 * host sync returns at 55 (sync_us 0). */
START_TEST(collective_kinds_priced) {
  char *p = profile_text_full(
      2, "{\"name\": \"t.sched\"}", host1(), KERNELS,
      "{\"allgather\": {\"lat_us\": 10, \"GBps\": 1, \"points\": 2}, "
      "\"reducescatter\": {\"lat_us\": 20, \"GBps\": 1, \"points\": 2}, "
      "\"alltoall\": {\"lat_us\": 5, \"GBps\": 1, \"points\": 2}, "
      "\"barrier\": {\"lat_us\": 7, \"GBps\": 1e9, \"points\": 1}}",
      "{}");
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "x = data(shape=[1000])\n"
                   "y = c_allgather(x, ring_id=0, use_calc_stream=true)\n"
                   "z = c_reducescatter(y, ring_id=0, use_calc_stream=true)\n"
                   "a = alltoall(x, ring_id=0, use_calc_stream=true)\n"
                   "barrier(z, ring_id=0)\n");
  check_time(&r, 55);
  check_span(&r, 1, 0, 1, 15);
  check_span(&r, 1, 1, 15, 39);
  check_span(&r, 1, 2, 39, 48);
  check_span(&r, 1, 3, 48, 55);
  check_explain(&r, 55, 0, 54, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A program that cannot finish (both ranks send first, lone sends: the
 * deadlock the check finds), run without the checks: refused, not a
 * hang. */
START_TEST(deadlock_refused) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  ovl_program *prog =
      tu_parse("x = data(shape=[1000])\n"
               "send_v2(x, peer=1 - rank, use_calc_stream=true)\n"
               "y = recv_v2(peer=1 - rank, out_shape=[1000], "
               "use_calc_stream=true)\n",
               "t.sched", 2);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1};
  ovl_result *res = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_EINVAL);
  ck_assert_ptr_null(res);
  ck_assert_msg(strncmp(err.msg, "model: rank 0 cannot go on at ", 30) == 0,
                "%s", err.msg);
  ck_assert_ptr_nonnull(strstr(err.msg, "t.sched:2:1 (send_v2)"));
  ovl_program_free(prog);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (d) Named events                                                    */
/* ------------------------------------------------------------------ */

/* Host: kernel 1, record 2, wait 3, delay 1. */
static hostc host_events(void) {
  hostc h = H0;
  h.kernel = 1;
  h.record = 2;
  h.wait = 3;
  h.delay = 1;
  return h;
}

/* A scale on the user stream `side` (enqueued at 1: 1..101), recorded
 * (enqueued at 3, completes at 101); calc waits for it (enqueued at 6,
 * done at 101); add (enqueued at 7) 101..151. */
START_TEST(event_orders_user_stream) {
  char *p = profile_text(host_events(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0, stream=side)\n"
                   "event_record(b, event=e1, stream=side)\n"
                   "stream_wait_event(b, event=e1, stream=calc)\n"
                   "c = elementwise_add(a, b)\n");
  check_time(&r, 151);
  check_span(&r, 0, 0, 1, 101);
  check_span(&r, 0, 1, 101, 101);
  check_span(&r, 0, 2, 6, 101);
  check_span(&r, 0, 3, 101, 151);
  check_explain(&r, 151, 150, 0, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A wait for an event never recorded does not wait: the delay on side
 * runs 1..101, calc's wait (enqueued at 4) is done at 4, add (enqueued at
 * 5) 5..55. The iteration ends when side is drained: 101. */
START_TEST(event_never_recorded) {
  char *p = profile_text(host_events(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "delay(us=100, stream=side)\n"
                   "stream_wait_event(event=never, stream=calc)\n"
                   "c = elementwise_add(a, a)\n");
  check_time(&r, 101);
  check_span(&r, 0, 0, 1, 101);
  check_span(&r, 1, 1, 4, 4);
  check_span(&r, 1, 2, 5, 55);
  check_op_times(&r, 0, (const double[]){100, 0, 50}, 3);
  check_explain(&r, 101, 100, 0, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A record replaced before the wait: calc records e at 2 (done at once),
 * side's delay 3..103 and its record of e (enqueued at 5) at 103; calc's
 * wait (enqueued at 8) waits for that one, the last when it was
 * enqueued: add 103..153. (Waiting for the first: add 9..59, and 103.) */
START_TEST(event_record_replaced_before_wait) {
  char *p = profile_text(host_events(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "event_record(event=e, stream=calc)\n"
                   "delay(us=100, stream=side)\n"
                   "event_record(event=e, stream=side)\n"
                   "stream_wait_event(event=e, stream=calc)\n"
                   "c = elementwise_add(a, a)\n");
  check_time(&r, 153);
  check_span(&r, 0, 0, 2, 2);
  check_span(&r, 0, 2, 103, 103);
  check_span(&r, 0, 3, 8, 103);
  check_span(&r, 0, 4, 103, 153);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A record after the wait does not move it: side's delay 1..101, its
 * record (enqueued at 3) at 101; calc's wait (enqueued at 6) done at 101;
 * side's second delay 101..301 and a second record of e at 301; add
 * (enqueued at 10) 101..151, not after 301. The iteration: 301. */
START_TEST(event_record_after_wait) {
  char *p = profile_text(host_events(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "delay(us=100, stream=side)\n"
                   "event_record(event=e, stream=side)\n"
                   "stream_wait_event(event=e, stream=calc)\n"
                   "delay(us=200, stream=side)\n"
                   "event_record(event=e, stream=side)\n"
                   "c = elementwise_add(a, a)\n");
  check_time(&r, 301);
  check_span(&r, 0, 2, 6, 101);
  check_span(&r, 0, 3, 101, 301);
  check_span(&r, 0, 4, 301, 301);
  check_span(&r, 0, 5, 101, 151);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (e) Host syncs and fetches; (k) a predicted result                  */
/* ------------------------------------------------------------------ */

/* Ops: 0 scale, 1 c_sync_calc_stream, 2 elementwise_add, 3 fetch. */
static const char sync_fetch_text[] = "a = data(shape=[1000], dtype=float32)\n"
                                      "b = scale(a, scale=2.0)\n"
                                      "c_sync_calc_stream(b)\n"
                                      "c = elementwise_add(a, b)\n"
                                      "fetch(c)\n";

/* kernel_us 1, sync_us 4; the machine's d2h: 10 + 4000 B / 1e9 B/s = 14.
 * scale 1..101; the host syncs calc from 1: drained at 101, back at 105;
 * add (enqueued at 106) 106..156; fetch syncs calc from 106: back at 160,
 * copies c: 174; the end of the iteration: 174 + 4 = 178. The device
 * ran 150 of it; nothing ran the rest: host 28. */
START_TEST(host_sync_and_fetch) {
  hostc h = H0;
  h.kernel = 1;
  h.sync = 4;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, MACHINE);
  run_t r = run(w, sync_fetch_text);
  check_time(&r, 178);
  check_span(&r, 0, 0, 1, 101);
  check_span(&r, 0, 1, 1, 105);
  check_span(&r, 0, 2, 106, 156);
  check_span(&r, 0, 3, 106, 160);
  check_op_times(&r, 0, (const double[]){100, 0, 50, 0}, 4);
  /* (k) Predicted: nothing computed, nothing fetched. */
  ck_assert_int_eq(ovl_result_predicted(r.res), 1);
  ck_assert_uint_eq(ovl_program_fetch_count(r.prog), 1);
  ck_assert_ptr_null(ovl_result_fetched(r.res, 0, 0));
  ck_assert_ptr_null(ovl_result_fetched(r.res, 1, 0));
  ck_assert_str_eq(ovl_result_backend(r.res), "model");
  ck_assert_int_eq(ovl_result_nranks(r.res), 2);
  ck_assert_ptr_nonnull(strstr(ovl_result_devices(r.res), "Test GPU"));
  ck_assert_str_eq(ovl_result_device_name(r.res, 1), "Test GPU");
  check_explain(&r, 178, 150, 0, 0, 28, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Eager, a host sync waits for its own stream only: a delay on side
 * (enqueued at 1) runs 1..301 while scale (enqueued at 2) runs 2..102;
 * the host is back from syncing calc at 106, add (enqueued at 107)
 * 107..157; the end: side drained at 301, + 4. */
static const char sync_one_stream_text[] =
    "a = data(shape=[1000], dtype=float32)\n"
    "delay(us=300, stream=side)\n"
    "b = scale(a, scale=2.0)\n"
    "c_sync_calc_stream(b)\n"
    "c = elementwise_add(a, a)\n";

START_TEST(host_sync_waits_for_its_stream) {
  hostc h = host1();
  h.sync = 4;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, sync_one_stream_text);
  check_time(&r, 305);
  check_span(&r, 0, 2, 2, 106);
  check_span(&r, 0, 3, 107, 157);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A fetch without the machine file: the built-in machine's d2h (10 us +
 * bytes / 50 GB/s: 4000 B, 10.08 us). scale 0..100 (kernel_us 0), the
 * fetch's sync back at 100, the copy to 110.08. */
START_TEST(fetch_default_machine) {
  char *p = profile_text(H0, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0)\n"
                   "fetch(b)\n");
  check_time(&r, 110.08);
  ck_assert_int_eq(ovl_result_predicted(r.res), 1);
  ck_assert_ptr_null(ovl_result_fetched(r.res, 0, 0));
  check_explain(&r, 110.08, 100, 0, 0, 10.08, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (f) Graphs                                                          */
/* ------------------------------------------------------------------ */

/* One segment: graph_launch_us 5 once, nothing per primitive (kernel_us
 * 1 is not paid), graph_gap_us 2 between the two kernels (not gap_us 7):
 * scale 5..105, add 107..157. Eager: scale 1..101, add (enqueued at 2)
 * 7 after scale: 108..158. */
START_TEST(graph_one_segment) {
  hostc h = H0;
  h.kernel = 1;
  h.launch = 5;
  h.gap = 7;
  h.ggap = 2;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t g = run_mode(w, two_kernels, OVL_MODE_ASYNC, 1);
  run_t e = run(w, two_kernels);
  check_time(&g, 157);
  check_span(&g, 0, 0, 5, 105);
  check_span(&g, 0, 1, 107, 157);
  check_explain(&g, 157, 150, 0, 0, 7, 0, 0);
  check_time(&e, 158);
  check_span(&e, 0, 1, 108, 158);
  run_free(&g);
  run_free(&e);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* Two segments (the host sync splits them); a host sync waits for its
 * whole segment, every stream: launch at 5, the delay 5..305 and scale
 * 5..105 (a delay does not share the device); the sync back at 305 + 4;
 * the second segment launched at 314: add 314..364; the end 368. */
START_TEST(graph_segments) {
  hostc h = host1();
  h.launch = 5;
  h.sync = 4;
  char *p = profile_text(h, NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run_mode(w, sync_one_stream_text, OVL_MODE_ASYNC, 1);
  check_time(&r, 368);
  check_span(&r, 0, 0, 5, 305);
  check_span(&r, 0, 1, 5, 105);
  check_span(&r, 0, 2, 5, 309);
  check_span(&r, 0, 3, 314, 364);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (g) Ranks that differ                                               */
/* ------------------------------------------------------------------ */

/* Rank 1 scales first (1..101); the allreduce (on calc) starts when both
 * reached it: rank 0 at 1 (coll_us 1), rank 1 at 101: 101..301; then
 * rank 0 alone adds (enqueued at 2): 301..351. The slowest rank, 0:
 * host 1, waits 100 (for rank 1), exposed 200, compute 50. */
START_TEST(ranks_differ_collective_waits) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0, ranks=[1])\n"
                   "c_allreduce_sum(a, ring_id=0, use_calc_stream=true)\n"
                   "d = elementwise_add(a, a, ranks=[0])\n");
  check_time(&r, 351);
  check_span(&r, 1, 0, 1, 101);
  check_span(&r, 0, 1, 1, 301);
  check_span(&r, 1, 1, 101, 301);
  check_span(&r, 0, 2, 301, 351);
  check_op_times(&r, 0, (const double[]){0, 300, 50}, 3);
  check_op_times(&r, 1, (const double[]){100, 200, 0}, 3);
  /* No span where an op does not run. */
  ck_assert_int_eq(ovl_result_span(r.res, 0, 0, NULL, NULL), -1);
  ck_assert_int_eq(ovl_result_span(r.res, 1, 2, NULL, NULL), -1);
  check_explain(&r, 351, 50, 200, 0, 1, 100, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* The same with the later rank last: rank 2 of 3 scales, the others wait
 * for it; the profile's fit is for 2 ranks, so this allreduce of 3 is
 * priced by the machine (no check of its length: only that all three
 * ranks start it at 101 and end it together). */
START_TEST(ranks_differ_three_ranks) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(3, p, NULL);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0, ranks=[2])\n"
                   "c_allreduce_sum(a, ring_id=0, use_calc_stream=true)\n");
  double s0, e0, s1, e1, s2, e2;
  ck_assert_int_eq(ovl_result_span(r.res, 0, 1, &s0, &e0), 0);
  ck_assert_int_eq(ovl_result_span(r.res, 1, 1, &s1, &e1), 0);
  ck_assert_int_eq(ovl_result_span(r.res, 2, 1, &s2, &e2), 0);
  NEAR(s0, 1);
  NEAR(s1, 1);
  NEAR(s2, 101);
  ck_assert(e0 > 101 * US);
  NEAR(e1, e0 / US);
  NEAR(e2, e0 / US);
  NEAR(ovl_result_times(r.res)[0], e0 / US);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* (h) Point-to-point                                                  */
/* ------------------------------------------------------------------ */

/* Rank 0 scales (1..101) and sends (enqueued at 2); rank 1's receive is
 * enqueued at 1; the transfer starts when both reached it, 101, and takes
 * 30 + 4000 B / 1e9 B/s = 34: 135. */
START_TEST(p2p_pair) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "x = data(shape=[1000], dtype=float32)\n"
                   "b = scale(x, scale=2.0, ranks=[0])\n"
                   "send_v2(b, peer=1, ring_id=0, use_calc_stream=true, "
                   "ranks=[0])\n"
                   "y = recv_v2(peer=0, out_shape=[1000], dtype=float32, "
                   "ring_id=0, use_calc_stream=true, ranks=[1])\n");
  check_time(&r, 135);
  check_span(&r, 0, 1, 101, 135);
  check_span(&r, 1, 2, 1, 135);
  check_op_times(&r, 0, (const double[]){100, 34, 0}, 3);
  check_op_times(&r, 1, (const double[]){0, 0, 134}, 3);
  /* The slowest: rank 0 (rank 1 ends with it; the first is taken). */
  check_explain(&r, 135, 100, 34, 0, 1, 0, 0);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* A group: one host call per rank (p2p_us 1) and its transfers together.
 * Rank 0 scales 1..101, its group (enqueued at 2) reaches calc's head at
 * 101; rank 1's group, enqueued at 1, at 1. Both pairs start at 101:
 * 0 -> 1, 4000 B: 34 (135); 1 -> 0, 2000 B: 32 (133); each rank's group
 * ends with its last: 135. Rank 1 then delays on side, enqueued at 1 + 1
 * (one host call for the group, not two): 2..202. */
START_TEST(p2p_group) {
  char *p = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, p, NULL);
  run_t r = run(w, "x = data(shape=[1000], dtype=float32)\n"
                   "v = data(shape=[500], dtype=float32)\n"
                   "b = scale(x, scale=2.0, ranks=[0])\n"
                   "group {\n"
                   "  send_v2(b, peer=1, use_calc_stream=true, ranks=[0])\n"
                   "  y = recv_v2(peer=0, out_shape=[1000], "
                   "use_calc_stream=true, ranks=[1])\n"
                   "  send_v2(v, peer=0, use_calc_stream=true, ranks=[1])\n"
                   "  z = recv_v2(peer=1, out_shape=[500], "
                   "use_calc_stream=true, ranks=[0])\n"
                   "}\n"
                   "delay(us=200, stream=side, ranks=[1])\n");
  check_time(&r, 202);
  check_span(&r, 0, 1, 101, 135);
  check_span(&r, 0, 4, 101, 135);
  check_span(&r, 1, 2, 1, 135);
  check_span(&r, 1, 3, 1, 135);
  check_span(&r, 1, 5, 2, 202);
  run_free(&r);
  ovl_world_free(w);
  free(p);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* The machine alone (no profile)                                      */
/* ------------------------------------------------------------------ */

/* The machine file's costs: kernel_us 3, coll_us 4, sync_us 6, gap_us 1;
 * scale [1000] float32 estimated: 2 x 4000 B / 1000 GB/s = 0.008 us, under
 * kernel_min_us: 2; an allreduce of 4000 B on 2 ranks (one node, ring):
 * bus bytes 4000 x 2 x 1 / 2, 2 steps of 1 us; LL: 5 + 2 + 4000 / 25 GB/s
 * = 7.16, Simple: 30 + 2 + 0.04: 7.16. scale 3..5; the allreduce
 * (enqueued at 7, on calc, 1 after scale) 7..14.16; + sync 6: 20.16. */
START_TEST(machine_file_alone) {
  ovl_world *w = world_with(2, NULL, MACHINE);
  run_t r = run(w, "a = data(shape=[1000], dtype=float32)\n"
                   "b = scale(a, scale=2.0)\n"
                   "c_allreduce_sum(b, ring_id=0, use_calc_stream=true)\n");
  check_time(&r, 20.16);
  check_span(&r, 0, 0, 3, 5);
  check_span(&r, 0, 1, 7, 14.16);
  ck_assert_str_eq(ovl_world_device_name(w, 0), "Test GPU");
  ck_assert_ptr_nonnull(strstr(ovl_world_devices(w), "testbox"));
  run_free(&r);
  ovl_world_free(w);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* Refusals: profiles and machine files                                */
/* ------------------------------------------------------------------ */

/* `text` set as `key` is refused with OVL_EINVAL, its message exactly
 * "PATH:" + `tail`. */
static void refused(const char *key, const char *text, const char *tail) {
  ovl_world *w = model_world(2);
  const char *path = tmp_file(text);
  char want[1024];
  ovl_error err = {0};
  ovl_status st = ovl_world_set(w, key, path, &err);
  ck_assert_msg(st == OVL_EINVAL, "%s accepted (%d: %s):\n%s", key, (int)st,
                err.msg, text);
  snprintf(want, sizeof want, "%s:%s", path, tail);
  ck_assert_str_eq(err.msg, want);
  ovl_world_free(w);
}

/* The valid profile with `from` (its first occurrence) replaced by `to`. */
static char *profile_edit(const char *from, const char *to) {
  char *base = profile_text(host1(), NO_SLOW);
  char *at = strstr(base, from);
  char *out = malloc(strlen(base) + strlen(to) + 1);
  ck_assert_msg(at != NULL, "'%s' not in the profile", from);
  ck_assert_ptr_nonnull(out);
  memcpy(out, base, (size_t)(at - base));
  strcpy(out + (at - base), to);
  strcat(out, at + strlen(from));
  free(base);
  return out;
}

static void profile_refused(const char *from, const char *to,
                            const char *tail) {
  char *t = profile_edit(from, to);
  refused("profile", t, tail);
  free(t);
}

/* The column of `needle` on line `line` (1-based) of `text`. */
static int col_of(const char *text, int line, const char *needle) {
  const char *l = text, *at;
  for (int i = 1; i < line; i++) {
    l = strchr(l, '\n');
    ck_assert_ptr_nonnull(l);
    l++;
  }
  at = strstr(l, needle);
  ck_assert_ptr_nonnull(at);
  ck_assert_ptr_null(memchr(l, '\n', (size_t)(at - l)));
  return (int)(at - l) + 1;
}

START_TEST(profile_valid_is_accepted) {
  char *t = profile_text(host1(), NO_SLOW);
  ovl_world *w = world_with(2, t, NULL);
  ovl_world_info info;
  ovl_world_info_get(w, &info);
  ck_assert_str_eq(info.nccl_version, "x");
  ck_assert_str_eq(info.runtime_version, "y");
  ovl_world_free(w);
  free(t);
  cleanup();
}
END_TEST

START_TEST(profile_refusals) {
  char *t, msg[512];
  int c;

  /* Not JSON: a comma before the end of the object. */
  refused("profile", "{\"format\": \"overlap-sim profile 1\",}\n",
          "1:36: trailing comma before '}'");

  /* An unknown key, its value's place. */
  t = profile_edit("\"coll_us\"", "\"coll_usx\"");
  c = col_of(t, 4, "\"coll_usx\": ") + (int)strlen("\"coll_usx\": ");
  snprintf(msg, sizeof msg,
           "4:%d: unknown key 'host.coll_usx' (known: kernel_us, coll_us, "
           "p2p_us, record_us, wait_us, delay_us, graph_launch_us, sync_us, "
           "gap_us, graph_gap_us, iter_us)",
           c);
  refused("profile", t, msg);
  free(t);

  /* A wrong type. */
  t = profile_edit("\"sync_us\": 0", "\"sync_us\": \"0\"");
  c = col_of(t, 4, "\"0\"");
  snprintf(msg, sizeof msg,
           "4:%d: 'host.sync_us': expected a number >= 0, found a string", c);
  refused("profile", t, msg);
  free(t);

  /* A negative number. */
  t = profile_edit("\"gap_us\": 0", "\"gap_us\": -1");
  c = col_of(t, 4, "-1");
  snprintf(msg, sizeof msg,
           "4:%d: 'host.gap_us': expected a number >= 0, found -1", c);
  refused("profile", t, msg);
  free(t);

  /* A missing key: the object that lacks it. */
  t = profile_edit(", \"graph_gap_us\": 0", "");
  c = col_of(t, 4, "{");
  snprintf(msg, sizeof msg, "4:%d: 'host.graph_gap_us' is missing", c);
  refused("profile", t, msg);
  free(t);
  t = profile_edit(" \"contention\": ", " \"contentions\": ");
  c = col_of(t, 7, "{");
  snprintf(msg, sizeof msg,
           "7:%d: unknown key 'contentions' (known: format, machine, "
           "schedule, host, kernels, comm, contention)",
           c);
  refused("profile", t, msg);
  free(t);
  /* A missing section. */
  snprintf(msg, sizeof msg, " \"comm\": %s,\n", COMM);
  t = profile_edit(msg, "");
  refused("profile", t, "1:1: 'comm' is missing");
  free(t);

  /* The format string. */
  profile_refused("overlap-sim profile 1", "overlap-sim profile 2",
                  "1:12: 'format': expected \"overlap-sim profile 1\", found "
                  "\"overlap-sim profile 2\" (is this a profile? --calibrate "
                  "writes one)");
  profile_refused("overlap-sim profile 1", "overlap-sim machine 1",
                  "1:12: 'format': expected \"overlap-sim profile 1\", found "
                  "\"overlap-sim machine 1\" (is this a profile? --calibrate "
                  "writes one)");

  /* A schedule signature that is not 16 hex digits. */
  t = profile_edit("{\"name\": \"t.sched\"}",
                   "{\"name\": \"t.sched\", \"sig\": \"12g\"}");
  c = col_of(t, 3, "\"12g\"");
  snprintf(msg, sizeof msg, "3:%d: 'schedule.sig': expected 16 hex digits",
           c);
  refused("profile", t, msg);
  free(t);

  /* A kernel of no op, of no dtype; a communication of no kind. */
  t = profile_edit("\"op\": \"add\"", "\"op\": \"relu\"");
  c = col_of(t, 5, "\"relu\"");
  snprintf(msg, sizeof msg,
           "5:%d: 'kernels[].op': unknown kernel 'relu' (matmul, assign, "
           "add, sub, mul, div, max, scale)",
           c);
  refused("profile", t, msg);
  free(t);
  t = profile_edit("\"dtype\": \"float32\"", "\"dtype\": \"float8\"");
  c = col_of(t, 5, "\"float8\"");
  snprintf(msg, sizeof msg, "5:%d: 'kernels[].dtype': unknown dtype 'float8'",
           c);
  refused("profile", t, msg);
  free(t);
  t = profile_edit("\"p2p\": {\"lat_us\"", "\"p3p\": {\"lat_us\"");
  c = col_of(t, 6, "{\"lat_us\": 30");
  snprintf(msg, sizeof msg, "6:%d: 'comm': unknown kind 'p3p'", c);
  refused("profile", t, msg);
  free(t);
  cleanup();
}
END_TEST

/* A profile that is not a file. */
START_TEST(profile_not_a_file) {
  ovl_world *w = model_world(2);
  ovl_error err = {0};
  ovl_status st = ovl_world_set(w, "profile", "/nonexistent/p.json", &err);
  ck_assert_int_ne(st, OVL_OK);
  ck_assert_str_eq(err.msg, "/nonexistent/p.json: No such file or directory");
  st = ovl_world_set(w, "machine", "/nonexistent/m.json", &err);
  ck_assert_int_ne(st, OVL_OK);
  ck_assert_str_eq(err.msg, "/nonexistent/m.json: No such file or directory");
  ovl_world_free(w);
}
END_TEST

/* The machine file with `from` replaced by `to`, refused: the message
 * "PATH:LINE:COL: " + `what`, COL where `needle` is on LINE. */
static void machine_refused(const char *from, const char *to, int line,
                            const char *needle, const char *what) {
  const char *at = strstr(MACHINE, from);
  char *t = malloc(sizeof MACHINE + strlen(to));
  char tail[512];
  ck_assert_msg(at != NULL, "'%s' not in the machine file", from);
  ck_assert_ptr_nonnull(t);
  memcpy(t, MACHINE, (size_t)(at - MACHINE));
  strcpy(t + (at - MACHINE), to);
  strcat(t, at + strlen(from));
  snprintf(tail, sizeof tail, "%d:%d: %s", line, col_of(t, line, needle),
           what);
  refused("machine", t, tail);
  free(t);
}

START_TEST(machine_refusals) {
  /* Not JSON: a value missing. */
  refused("machine", "{\"format\": }\n",
          "1:12: expected a value, found '}'");
  machine_refused("overlap-sim machine 1", "overlap-sim profile 1", 1,
                  "\"overlap-sim",
                  "'format': expected \"overlap-sim machine 1\", found "
                  "\"overlap-sim profile 1\" (is this a machine file?)");
  /* An unknown key (at its value). */
  machine_refused("\"busbw_GBps\": 100", "\"bw_GBps\": 100", 3, "100",
                  "unknown key 'intra.bw_GBps' (known: busbw_GBps, lat_us)");
  /* A wrong type. */
  machine_refused("\"lat_us\": 5}", "\"lat_us\": [5]}", 4, "[5]",
                  "'inter.lat_us': expected a number >= 0, found an array");
  /* A bandwidth of 0 (it must be > 0). */
  machine_refused("\"busbw_GBps\": 10,", "\"busbw_GBps\": 0,", 4, "0,",
                  "'inter.busbw_GBps': expected a number > 0, found 0");
  /* A missing key: d2h without GBps (at the object). */
  machine_refused("\"GBps\": 1, ", "", 8, "{",
                  "'d2h.GBps' is missing");
  /* A missing section. */
  machine_refused(" \"d2h\": {\"GBps\": 1, \"lat_us\": 10},\n", "", 1, "{",
                  "'d2h' is missing");
  /* An algorithm NCCL does not have; ll_bw_frac above 1. */
  machine_refused("\"ring\"", "\"star\"", 5, "\"star\"",
                  "'nccl.algorithm': expected \"ring\", \"tree\" or \"auto\", found "
                  "\"star\"");
  machine_refused("\"ll_bw_frac\": 0.25", "\"ll_bw_frac\": 1.5", 5, "1.5",
                  "'nccl.ll_bw_frac': expected a number in (0, 1]");
  /* A whole number expected. */
  machine_refused("\"gpus_per_node\": 8", "\"gpus_per_node\": 8.5", 2, "8.5",
                  "'gpus_per_node': expected a whole number 1..4096");
  /* A contention below 1. */
  machine_refused("\"comm_slow\": {\"mem\": 1,", "\"comm_slow\": {\"mem\": 0.5,",
                  9, "0.5",
                  "'contention.comm_slow.mem': expected a number >= 1, found "
                  "0.5");
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */
/* A profile of another schedule, through the pipeline                 */
/* ------------------------------------------------------------------ */

static ovl_status pipeline_with(const char *profile, const char *text,
                                ovl_error *err) {
  ovl_world *w = world_with(2, profile, NULL);
  ovl_program *p = tu_parse(text, "t.sched", 2);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1};
  ovl_pipeline_opts o = {.size = sizeof o,
                         .modes = OVL_MODE_BIT(OVL_MODE_ASYNC),
                         .run = 1,
                         .run_opts = &ro};
  ovl_report *r = NULL;
  ovl_status st = ovl_pipeline_run(w, p, &o, &r, err);
  if (st == OVL_OK) {
    ovl_report_mode m;
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(ovl_report_mode_get(r, 0, &m), 0);
    ck_assert_int_eq(ovl_result_predicted(m.res), 1);
    ovl_report_free(r);
  } else {
    ck_assert_ptr_null(r);
  }
  ovl_program_free(p);
  ovl_world_free(w);
  return st;
}

START_TEST(profile_of_another_schedule) {
  ovl_program *mine = tu_parse(overlap_text, "t.sched", 2);
  ovl_program *other = tu_parse(two_kernels, "other.sched", 2);
  char sched[256], want[1024];
  char *p;
  ovl_error err = {0};
  const char *path;

  /* Calibrated on other.sched (its sig): refused, both named. */
  snprintf(sched, sizeof sched, "{\"name\": \"other.sched\", \"sig\": "
           "\"%016llx\"}",
           (unsigned long long)ovl__program_sig(other));
  p = profile_text_full(2, sched, host1(), KERNELS, COMM, NO_SLOW);
  ck_assert_int_eq(pipeline_with(p, overlap_text, &err), OVL_EINVAL);
  path = tmp_paths[ntmp - 1];
  snprintf(want, sizeof want,
           "model: profile %s was calibrated on other.sched, not on t.sched "
           "(its ops differ): calibrate this schedule with --calibrate=FILE "
           "on a real backend",
           path);
  ck_assert_str_eq(err.msg, want);
  free(p);

  /* Named as this one but of other ops: another version of it. */
  snprintf(sched, sizeof sched, "{\"name\": \"t.sched\", \"sig\": "
           "\"%016llx\"}",
           (unsigned long long)ovl__program_sig(other));
  p = profile_text_full(2, sched, host1(), KERNELS, COMM, NO_SLOW);
  ck_assert_int_eq(pipeline_with(p, overlap_text, &err), OVL_EINVAL);
  path = tmp_paths[ntmp - 1];
  snprintf(want, sizeof want,
           "model: profile %s was calibrated on another version of t.sched "
           "(its ops differ): calibrate again with --calibrate=FILE on a "
           "real backend",
           path);
  ck_assert_str_eq(err.msg, want);
  free(p);

  /* Its own sig, and none: it runs. */
  snprintf(sched, sizeof sched, "{\"name\": \"t.sched\", \"sig\": "
           "\"%016llx\"}",
           (unsigned long long)ovl__program_sig(mine));
  p = profile_text_full(2, sched, host1(), KERNELS, COMM, NO_SLOW);
  ck_assert_msg(pipeline_with(p, overlap_text, &err) == OVL_OK, "%s",
                err.msg);
  free(p);
  p = profile_text_full(2, "{\"name\": \"elsewhere.sched\"}", host1(),
                        KERNELS, COMM, NO_SLOW);
  ck_assert_msg(pipeline_with(p, overlap_text, &err) == OVL_OK, "%s",
                err.msg);
  free(p);
  ovl_program_free(mine);
  ovl_program_free(other);
  cleanup();
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *model_suite(void) {
  Suite *s = suite_create("model");
  TCase *tc = tcase_create("sim");
  tcase_add_test(tc, one_kernel_host_cost);
  tcase_add_test(tc, one_kernel_no_sync_cost);
  tcase_add_test(tc, two_kernels_gap);
  tcase_add_test(tc, two_kernels_slow_host);
  tcase_add_test(tc, gap_after_every_work_item);
  tcase_add_test(tc, coll_beside_kernel_contention);
  tcase_add_test(tc, coll_sync_form);
  tcase_add_test(tc, coll_beside_kernel_no_contention);
  tcase_add_test(tc, coll_shorter_than_kernel);
  tcase_add_test(tc, kernels_share_the_device);
  tcase_add_test(tc, kernels_matched);
  tcase_add_test(tc, matmul_contention);
  tcase_add_test(tc, collective_kinds_priced);
  tcase_add_test(tc, deadlock_refused);
  tcase_add_test(tc, event_orders_user_stream);
  tcase_add_test(tc, event_never_recorded);
  tcase_add_test(tc, event_record_replaced_before_wait);
  tcase_add_test(tc, event_record_after_wait);
  tcase_add_test(tc, host_sync_and_fetch);
  tcase_add_test(tc, host_sync_waits_for_its_stream);
  tcase_add_test(tc, fetch_default_machine);
  tcase_add_test(tc, graph_one_segment);
  tcase_add_test(tc, graph_segments);
  tcase_add_test(tc, ranks_differ_collective_waits);
  tcase_add_test(tc, ranks_differ_three_ranks);
  tcase_add_test(tc, p2p_pair);
  tcase_add_test(tc, p2p_group);
  tcase_add_test(tc, machine_file_alone);
  suite_add_tcase(s, tc);
  tc = tcase_create("files");
  tcase_add_test(tc, profile_valid_is_accepted);
  tcase_add_test(tc, profile_refusals);
  tcase_add_test(tc, profile_not_a_file);
  tcase_add_test(tc, machine_refusals);
  tcase_add_test(tc, profile_of_another_schedule);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(model_suite()); }
