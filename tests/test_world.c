/*
 * End-to-end runs on the cpu backend: schedules through the executor,
 * checked against the reference.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#include "run/run.h"

/* Built with ThreadSanitizer (gcc defines __SANITIZE_THREAD__, clang has
 * the feature test). */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#ifndef OVL_SRCDIR
#define OVL_SRCDIR "."
#endif

/* A cpu world; chaos_seed 0 is no chaos. */
static ovl_world *make_chaos_world(int nranks, unsigned chaos_seed) {
  ovl_world *w = tu_cpu_world(nranks, 10);
  ovl_error err = {0};
  char seed[32];
  ovl_status st;
  snprintf(seed, sizeof seed, "%u", chaos_seed);
  st = ovl_world_set(w, "chaos_seed", seed, &err);
  ck_assert_msg(st == OVL_OK, "chaos_seed: %s", err.msg);
  return w;
}

static ovl_world *make_world(int nranks) { return tu_cpu_world(nranks, 10); }

static ovl_program *load(const char *rel, int nranks, const char **defines,
                         size_t ndefines) {
  char path[4096];
  ovl_parse_opts po = {.size = sizeof po,
                       .defines = defines,
                       .ndefines = ndefines,
                       .nranks = nranks};
  ovl_program *p = NULL;
  ovl_error err = {0};
  snprintf(path, sizeof path, "%s/%s", OVL_SRCDIR, rel);
  ovl_status st = ovl_program_load(path, &po, &p, &err);
  ck_assert_msg(st == OVL_OK, "load %s: %s", rel, err.msg);
  return p;
}

static ovl_program *parse_text(const char *text, int nranks) {
  return tu_parse(text, "t.sched", nranks);
}

/* Run `prog` in `mode` for warmup + iters iterations, check the last
 * against the reference; returns the number of mismatched elements. The
 * result is left in *res_out if asked. */
static int64_t run_checked_iters(ovl_world *w, const ovl_program *prog,
                                 ovl_mode mode, int iters, int warmup,
                                 ovl_result **res_out) {
  ovl_program *p = NULL;
  ovl_reference *ref = NULL;
  ovl_result *res = NULL;
  ovl_check chk = {0};
  ovl_error err = {0};
  ovl_run_opts ro = {.size = sizeof ro, .iters = iters, .warmup = warmup};
  int64_t bad;

  ck_assert_int_eq(ovl_program_transform(prog, mode, &p, &err), OVL_OK);
  ovl_status st = ovl_world_run(w, p, &ro, &res, &err);
  ck_assert_msg(st == OVL_OK, "run: %s", err.msg);
  ck_assert_int_eq(ovl_result_iters(res), iters);
  for (int i = 0; i < iters; i++)
    ck_assert(ovl_result_times(res)[i] > 0);
  st = ovl_reference_compute(prog, ovl_world_nranks(w), &ref, &err);
  ck_assert_msg(st == OVL_OK, "reference: %s", err.msg);
  st = ovl_check_result(prog, res, ref, 1e-5, 1e-6, &chk, &err);
  ck_assert_msg(st == OVL_OK, "check: %s", err.msg);
  ck_assert(chk.checked > 0);
  bad = chk.mismatched;
  ovl_check_release(&chk);
  ovl_reference_free(ref);
  ovl_program_free(p);
  if (res_out != NULL)
    *res_out = res;
  else
    ovl_result_free(res);
  return bad;
}

static int64_t run_checked(ovl_world *w, const ovl_program *prog,
                           ovl_mode mode, ovl_result **res_out) {
  return run_checked_iters(w, prog, mode, 2, 1, res_out);
}

/* run_checked with one warmup iteration and one timed: for the tests of
 * every schedule under schedules/, where the schedule is the point, not
 * how many iterations run (a second still runs after the first). */
static int64_t run_checked_short(ovl_world *w, const ovl_program *prog,
                                 ovl_mode mode) {
  return run_checked_iters(w, prog, mode, 1, 1, NULL);
}

/* The seed gives exactly 0.0 on 2 ranks, in both modes. */
static void seed_exact_zero(ovl_mode mode) {
  const char *defs[] = {"cols=50"};
  ovl_world *w = make_world(2);
  ovl_program *prog = load("schedules/seed.sched", 2, defs, 1);
  ovl_result *res = NULL;
  ovl_var_info v;

  ck_assert_int_eq(run_checked(w, prog, mode, &res), 0);
  ck_assert_uint_eq(ovl_program_fetch_count(prog), 1);
  ovl_program_fetch_info(prog, 0, &v);
  ck_assert_str_eq(v.name, "out");
  ck_assert_int_eq(v.numel, 1000 * 50);
  for (int r = 0; r < 2; r++) {
    const double *out = ovl_result_fetched(res, r, 0);
    ck_assert_ptr_nonnull(out);
    for (int64_t i = 0; i < v.numel; i++)
      ck_assert_msg(out[i] == 0.0, "rank %d out[%lld] = %g", r,
                    (long long)i, out[i]);
  }
  ovl_result_free(res);
  ovl_program_free(prog);
  ovl_world_free(w);
}

/* The stream op i records its event on, in a record + wait pair. */
static int record_stream(const ovl_program *prog, size_t i) {
  for (size_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++)
    if (prog->prims[p].kind == OVL_PRIM_RECORD && !prog->prims[p].main)
      return prog->prims[p].stream;
  return -1;
}

START_TEST(seed_sync_is_zero) { seed_exact_zero(OVL_MODE_SYNC); }
END_TEST

START_TEST(seed_async_is_zero) { seed_exact_zero(OVL_MODE_ASYNC); }
END_TEST

/* The comp-only and comm-only forms run (their numbers are not checked). */
START_TEST(seed_comp_and_comm_run) {
  const char *defs[] = {"cols=20"};
  ovl_world *w = make_world(2);
  ovl_program *prog = load("schedules/seed.sched", 2, defs, 1);
  for (ovl_mode m = OVL_MODE_COMP; m <= OVL_MODE_COMM; m++) {
    ovl_program *p = NULL;
    ovl_result *res = NULL;
    ovl_error err = {0};
    ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0};
    ck_assert_int_eq(ovl_program_transform(prog, m, &p, &err), OVL_OK);
    ck_assert_msg(ovl_world_run(w, p, &ro, &res, &err) == OVL_OK, "%s",
                  err.msg);
    ovl_result_free(res);
    ovl_program_free(p);
  }
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

/* The harness shows a real ordering bug: without c_wait_compute the
 * allreduce reads c before the delayed calc stream writes it. */
START_TEST(missing_wait_compute_gives_wrong_result) {
  ovl_world *w = make_world(2);
  ovl_program *bad = load("schedules/bad/missing_wait_compute.sched", 2,
                          NULL, 0);
  ovl_program *good =
      load("schedules/good/missing_wait_compute.sched", 2, NULL, 0);
  /* That race is real, on the emulated device memory (the streams run
   * concurrently, as a GPU's do): ThreadSanitizer rightly reports it and
   * fails the test, so under TSan only the race-free runs are made. */
  if (!UNDER_TSAN)
    ck_assert_int_gt(run_checked(w, bad, OVL_MODE_ASYNC, NULL), 0);
  ck_assert_int_eq(run_checked(w, good, OVL_MODE_ASYNC, NULL), 0);
  /* In sync form the collective runs on the calc stream: no race. */
  ck_assert_int_eq(run_checked(w, bad, OVL_MODE_SYNC, NULL), 0);
  ovl_program_free(bad);
  ovl_program_free(good);
  ovl_world_free(w);
}
END_TEST

/* Every op against the reference, on 1..4 ranks, both modes. */
START_TEST(all_ops_match_reference) {
  int nranks = _i;
  char root[32];
  const char *defs[] = {root};
  snprintf(root, sizeof root, "root=%d", nranks - 1);
  ovl_world *w = make_world(nranks);
  ovl_program *prog = load("tests/schedules/all_ops.sched", nranks, defs, 1);
  ck_assert_int_eq(run_checked(w, prog, OVL_MODE_ASYNC, NULL), 0);
  ck_assert_int_eq(run_checked(w, prog, OVL_MODE_SYNC, NULL), 0);
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

START_TEST(world_rejects_bad_options) {
  ovl_world *w = NULL;
  ovl_error err = {0};
  ovl_world_opts bad_backend = {.size = sizeof bad_backend, .backend = "tpu"};
  ovl_world_opts too_many = {
      .size = sizeof too_many, .backend = "cpu", .nranks = 1000};
  ck_assert_int_eq(ovl_world_create(&bad_backend, &w, &err), OVL_ENODEV);
  ck_assert_ptr_nonnull(strstr(err.msg, "tpu"));
  ck_assert_int_eq(ovl_world_create(&too_many, &w, &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "1000"));
  ck_assert_ptr_null(w);
}
END_TEST

/* Without an MPI launcher's environment there is one process: no MPI
 * call is made, with or without MPI built in, and the stubs say so. */
START_TEST(procs_one_process_without_launcher) {
  ovl_procs *p = (ovl_procs *)1;
  ovl_error err = {0};
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("PMIX_RANK");
  unsetenv("PMI_RANK");
  ck_assert_int_eq(ovl_launcher_rank(), -1);
  ck_assert_int_eq(ovl_procs_init(NULL, NULL, &p, &err), OVL_OK);
  ck_assert_ptr_null(p);
  ck_assert_int_eq(ovl_procs_rank(NULL), 0);
  ck_assert_int_eq(ovl_procs_size(NULL), 1);
  ck_assert_int_eq(ovl_procs_agree_exit(NULL, 4), 4);
  ovl_procs_set_timeout(NULL, 5.0);
  ck_assert_ptr_null(ovl_procs_error(NULL));
  ovl_procs_free(NULL);
  ck_assert_int_eq(ovl_procs_init(NULL, NULL, NULL, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_procs_init: out is NULL");
  /* The launcher's variables, in their order; junk is no rank. */
  setenv("PMI_RANK", "3", 1);
  ck_assert_int_eq(ovl_launcher_rank(), 3);
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ck_assert_int_eq(ovl_launcher_rank(), 1);
  setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
  ck_assert_int_eq(ovl_launcher_rank(), 3);
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("PMI_RANK");
}
END_TEST

START_TEST(run_rejects_program_for_other_rank_count) {
  ovl_world *w = make_world(2);
  ovl_program *prog = load("schedules/good/seed_small.sched", 3, NULL, 0);
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0};
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "3 ranks"));
  ck_assert_ptr_null(res);
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

/* A fetch reads after syncing the calc stream only: the value of a comm
 * stream result fetched without c_wait_comm is not guaranteed; with
 * c_sync_comm_stream it is. */
START_TEST(sync_comm_stream_orders_fetch) {
  static const char text[] =
      "x = data(shape=[256], init=uniform, seed=5, per_rank=true)\n"
      "c_allreduce_sum(x, ring_id=0)\n"
      "c_sync_comm_stream(x, ring_id=0)\n"
      "fetch(x)\n";
  ovl_parse_opts po = {.size = sizeof po, .nranks = 3};
  ovl_program *prog = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_program_parse(text, sizeof text - 1, "t.sched", &po,
                                     &prog, &err),
                   OVL_OK);
  ovl_world *w = make_world(3);
  ck_assert_int_eq(run_checked(w, prog, OVL_MODE_ASYNC, NULL), 0);
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

/* The host memory per op (ovl_host_bytes_per_op) grows with every part
 * of a program's life, and the per-rank parts with the ranks. */
START_TEST(host_bytes_per_op_parts) {
  ovl_op_memory_opts o = OVL_OPTS_INIT(ovl_op_memory_opts);
  /* An op in a program: the op, its primitives (two at most) and their
   * index. */
  uint64_t op = sizeof(ovl__op) + 2 * sizeof(ovl__prim) + sizeof(uint32_t);
  uint64_t base, one, two, four, plain, traced, svg;
  ck_assert_uint_eq(ovl_host_bytes_per_op(NULL), op);
  ck_assert_uint_eq(ovl_host_bytes_per_op(&o), op);
  /* The op list of each mode's form; the race checker's reads. */
  o.nmodes = 2;
  ck_assert_uint_eq(ovl_host_bytes_per_op(&o), 3 * op);
  o.race_check = 1;
  base = ovl_host_bytes_per_op(&o);
  ck_assert_uint_eq(base, 3 * op + ovl__race_bytes_per_op());
  /* Re-checking the fixes holds one more program (with the race check
   * only). */
  o.fix_check = 1;
  ck_assert_uint_eq(ovl_host_bytes_per_op(&o), base + op);
  o.race_check = 0;
  ck_assert_uint_eq(ovl_host_bytes_per_op(&o), 3 * op);
  o.race_check = 1;
  o.fix_check = 0;
  /* The cpu backend queues commands on the host, linearly in ranks. */
  o.backend = "cpu";
  o.nranks = 1;
  one = ovl_host_bytes_per_op(&o);
  o.nranks = 2;
  two = ovl_host_bytes_per_op(&o);
  o.nranks = 4;
  four = ovl_host_bytes_per_op(&o);
  ck_assert_uint_gt(one, base);
  ck_assert_uint_eq(two - base, 2 * (one - base));
  ck_assert_uint_eq(four - base, 4 * (one - base));
  /* A backend not compiled in (or none named) counts as the costliest. */
  o.backend = "no such backend";
  ck_assert_uint_eq(ovl_host_bytes_per_op(&o), four);
  o.backend = NULL;
  ck_assert_uint_eq(ovl_host_bytes_per_op(&o), four);
  /* Op times, spans, and the timelines made from them. */
  o.backend = "cpu";
  o.nranks = 2;
  plain = ovl_host_bytes_per_op(&o);
  o.op_times = 1;
  ck_assert_uint_gt(ovl_host_bytes_per_op(&o), plain);
  o.op_times = 0;
  o.trace = 1;
  traced = ovl_host_bytes_per_op(&o);
  ck_assert_uint_gt(traced, plain);
  o.svg = 1;
  svg = ovl_host_bytes_per_op(&o);
  ck_assert_uint_gt(svg, traced);
  o.trace_text = 1;
  ck_assert_uint_gt(ovl_host_bytes_per_op(&o), svg);
  /* The trace's text: about 200 bytes an op per rank and mode. */
  ck_assert_uint_ge(ovl_host_bytes_per_op(&o) - svg, 2 * 2 * 150);
}
END_TEST

/* --op-times: every stream op gets its own device time; a delay of 20 ms
 * takes at least 20 ms on its stream; host ops get none. */
START_TEST(op_times_measure_stream_ops) {
  static const char text[] =
      "x = data(shape=[64], init=uniform)\n"
      "delay(us=20000, stream=calc)\n"
      "y = scale(x, scale=2.0)\n"
      "c_wait_compute(y, ring_id=0)\n"
      "c_allreduce_sum(y, ring_id=0)\n"
      "c_wait_comm(y, ring_id=0)\n"
      "fetch(y)\n";
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_program *prog = NULL;
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 1, .op_times = 1};
  ck_assert_int_eq(ovl_program_parse(text, sizeof text - 1, "t.sched", &po,
                                     &prog, &err),
                   OVL_OK);
  ovl_world *w = make_world(2);
  ck_assert_msg(ovl_world_run(w, prog, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  for (int r = 0; r < 2; r++) {
    const double *t = ovl_result_op_times(res, r);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < ovl_program_op_count(prog); i++) {
      const char *name;
      int line, stream;
      ovl_program_op(prog, i, &name, &line, &stream);
      if (strcmp(name, "delay") == 0)
        ck_assert_msg(t[i] >= 2 * 0.020, "delay took %g s", t[i]);
      else if (stream < 0)
        ck_assert(t[i] == 0.0);
      else
        ck_assert_msg(t[i] > 0.0 && t[i] < 2 * 0.020, "%s: %g s", name,
                      t[i]);
    }
  }
  ovl_result_free(res);
  /* Off by default. */
  ro.op_times = 0;
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_OK);
  ck_assert_ptr_null(ovl_result_op_times(res, 0));
  ovl_result_free(res);
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

/* Index of the n-th (0-based) op named `name`. */
static size_t find_op(const ovl_program *prog, const char *name, int n) {
  for (size_t i = 0; i < ovl_program_op_count(prog); i++) {
    const char *nm;
    ovl_program_op(prog, i, &nm, NULL, NULL);
    if (strcmp(nm, name) == 0 && n-- == 0)
      return i;
  }
  ck_abort_msg("no op %s", name);
  return 0;
}

/* A trace: every op has a span; the spans of one stream (the record halves
 * of the wait ops included) are in program order and do not overlap; a
 * delay of 20 ms spans at least 20 ms; the collective that waits on the
 * compute event starts after the compute op before it ends, and the op
 * after c_wait_comm after the collective ends; fetch returns after the
 * last calc op. Off by default; trace_iter picks the iteration. */
START_TEST(trace_spans_order_and_durations) {
  static const char text[] =
      "x = data(shape=[4096], init=uniform)\n"
      "y = scale(x, scale=2.0)\n"
      "delay(us=20000, stream=calc)\n"
      "c_wait_compute(y, ring_id=0)\n"
      "c_allreduce_sum(y, ring_id=0)\n"
      "z = scale(x, scale=3.0)\n"
      "c_wait_comm(y, ring_id=0)\n"
      "w = elementwise_add(y, z)\n"
      "fetch(w)\n";
  ovl_program *prog = parse_text(text, 2);
  ovl_world *w = make_world(2);
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_run_opts ro = {
      .size = sizeof ro, .iters = 3, .warmup = 1, .trace = 1, .trace_iter = -1};
  size_t nops = ovl_program_op_count(prog);
  size_t delay = find_op(prog, "delay", 0);
  size_t wcomp = find_op(prog, "c_wait_compute", 0);
  size_t ar = find_op(prog, "c_allreduce_sum", 0);
  size_t wcomm = find_op(prog, "c_wait_comm", 0);
  size_t add = find_op(prog, "elementwise_add", 0);
  size_t fetch = find_op(prog, "fetch", 0);
  double s, e, s2, e2;

  ck_assert_msg(ovl_world_run(w, prog, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_result_trace_iter(res), 2);
  for (int r = 0; r < 2; r++) {
    double last_end[1 + OVL_MAX_RINGS];
    ck_assert(isfinite(ovl_result_trace_base(res, r)));
    for (int k = 0; k < 1 + OVL_MAX_RINGS; k++)
      last_end[k] = 0;
    for (size_t i = 0; i < nops; i++) {
      int st = prog->prims[ovl__op_main_prim(prog, i)].stream;
      ck_assert_int_eq(ovl_result_span(res, r, i, &s, &e), 0);
      ck_assert_msg(s >= 0 && e >= s, "rank %d op %zu: %g..%g", r, i, s, e);
      if (ovl_result_record_span(res, r, i, &s2, &e2) == 0) {
        int rec = record_stream(prog, i);
        ck_assert_msg(s2 >= last_end[rec] && e2 >= s2,
                      "rank %d op %zu record: %g..%g after %g", r, i, s2, e2,
                      last_end[rec]);
        last_end[rec] = e2;
      }
      if (i == fetch)
        continue; /* the host's */
      ck_assert_msg(s >= last_end[st], "rank %d op %zu starts at %g before "
                    "its stream's last op ended (%g)", r, i, s, last_end[st]);
      last_end[st] = e;
    }
    ck_assert_int_eq(ovl_result_record_span(res, r, delay, NULL, NULL), -1);
    ck_assert_int_eq(ovl_result_record_span(res, r, wcomp, NULL, NULL), 0);
    ck_assert_int_eq(ovl_result_record_span(res, r, wcomm, NULL, NULL), 0);
    ovl_result_span(res, r, delay, &s, &e);
    ck_assert_msg(e - s >= 0.020, "delay spans %g s", e - s);
    ovl_result_span(res, r, ar, &s2, &e2);
    ck_assert_msg(s2 >= e, "allreduce starts at %g, delay ends at %g", s2,
                  e);
    ovl_result_span(res, r, add, &s, &e);
    ck_assert_msg(s >= e2, "add starts at %g, allreduce ends at %g", s, e2);
    ovl_result_span(res, r, fetch, &s2, &e2);
    ck_assert_msg(e2 >= e, "fetch returns at %g, add ends at %g", e2, e);
  }
  /* The ranks' bases are on one host clock, and close. */
  ck_assert(fabs(ovl_result_trace_base(res, 0) -
                 ovl_result_trace_base(res, 1)) < 1.0);
  ck_assert_int_eq(ovl_result_span(res, 2, 0, &s, &e), -1);
  ck_assert_int_eq(ovl_result_span(res, 0, nops, &s, &e), -1);
  ovl_result_free(res);

  ro.trace_iter = 0;
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_OK);
  ck_assert_int_eq(ovl_result_trace_iter(res), 0);
  ovl_result_free(res);
  ro.trace_iter = 3;
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_EINVAL);
  ro.trace_iter = -4;
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_EINVAL);

  /* Off by default. */
  ro = (ovl_run_opts){.size = sizeof(ovl_run_opts), .iters = 2, .warmup = 0};
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_OK);
  ck_assert_int_eq(ovl_result_trace_iter(res), -1);
  ck_assert_int_eq(ovl_result_span(res, 0, 0, &s, &e), -1);
  ck_assert(isnan(ovl_result_trace_base(res, 0)));
  ovl_result_free(res);
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

/* What ovl_world_info_get must give as hostname: gethostname()'s answer,
 * or "unknown" when it fails or is empty. */
static void expected_hostname(char *buf, size_t len) {
  memset(buf, 0, len);
  if (gethostname(buf, len - 1) != 0 || buf[0] == '\0')
    snprintf(buf, len, "unknown");
}

/* What it must give as cpu_model, read here independently: the value of
 * the first "model name" line of /proc/cpuinfo (after the colon and its
 * blanks), or "unknown" when there is no such file, line or value. */
static void expected_cpu_model(char *buf, size_t len) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char *line = NULL;
  size_t cap = 0;
  snprintf(buf, len, "unknown");
  if (f == NULL)
    return;
  while (getline(&line, &cap, f) >= 0) {
    const char *v = strchr(line, ':');
    size_t n;
    if (strncmp(line, "model name", strlen("model name")) != 0 || v == NULL)
      continue;
    v += 1 + strspn(v + 1, " \t");
    n = strcspn(v, "\n");
    if (n > 0)
      snprintf(buf, len, "%.*s", (int)n, v);
    break;
  }
  free(line);
  fclose(f);
}

/* The machine: per-rank device names and the info struct. */
START_TEST(world_info_and_device_names) {
  ovl_world *w = make_world(3);
  ovl_world_info info;
  char want[sizeof info.hostname];
  ck_assert_str_eq(ovl_world_device_name(w, 2), "emulated (cpu)");
  ck_assert_ptr_null(ovl_world_device_name(w, 3));
  ck_assert_ptr_null(ovl_world_device_name(w, -1));
  ovl_world_info_get(w, &info);
  ck_assert_str_eq(info.driver_version, "n/a");
  ck_assert_str_eq(info.runtime_version, "n/a");
  ck_assert_str_eq(info.nccl_version, "n/a");
  expected_hostname(want, sizeof want);
  ck_assert_str_eq(info.hostname, want);
  expected_cpu_model(want, sizeof want);
  ck_assert_str_eq(info.cpu_model, want);
  ovl_world_free(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Example schedules: the check finds every bad one, its twin is right */
/* ------------------------------------------------------------------ */

#define MAX_SCHEDULES 64

/* The *.sched files of a directory under the source tree, sorted. */
static int list_schedules(const char *rel, char names[][256]) {
  char path[4096];
  DIR *d;
  struct dirent *e;
  int n = 0;
  snprintf(path, sizeof path, "%s/%s", OVL_SRCDIR, rel);
  d = opendir(path);
  ck_assert_msg(d != NULL, "cannot list %s", path);
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 7 || strcmp(e->d_name + len - 6, ".sched") != 0)
      continue;
    ck_assert_int_lt(n, MAX_SCHEDULES);
    ck_assert_uint_lt(len, 256);
    memcpy(names[n++], e->d_name, len + 1);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0],
        (int (*)(const void *, const void *))strcmp);
  return n;
}

/* The races the checker finds in `prog`'s form for `mode`. */
static size_t races_in(const ovl_program *prog, ovl_mode mode) {
  ovl_program *p = NULL;
  ovl_races *r = NULL;
  ovl_error err = {0};
  size_t n;
  ck_assert_int_eq(ovl_program_transform(prog, mode, &p, &err), OVL_OK);
  ovl_status st = ovl_race_check(p, &r, &err);
  ck_assert_msg(st == OVL_OK, "race check: %s", err.msg);
  n = ovl_races_count(r);
  ovl_races_free(r);
  ovl_program_free(p);
  return n;
}

/* The mismatches the checker finds in `prog` (every form has the same). */
static size_t mismatches_in(const ovl_program *prog) {
  ovl_mismatches *m = NULL;
  ovl_error err = {0};
  size_t n;
  ovl_status st = ovl_mismatch_check(prog, &m, &err);
  ck_assert_msg(st == OVL_OK, "mismatch check: %s", err.msg);
  n = ovl_mismatches_count(m);
  ovl_mismatches_free(m);
  return n;
}

/* The deadlocks the checker finds in `prog`'s form for `mode`. */
static size_t deadlocks_in(const ovl_program *prog, ovl_mode mode) {
  ovl_program *p = NULL;
  ovl_deadlocks *d = NULL;
  ovl_error err = {0};
  size_t n;
  ck_assert_int_eq(ovl_program_transform(prog, mode, &p, &err), OVL_OK);
  ovl_status st = ovl_deadlock_check(p, &d, &err);
  ck_assert_msg(st == OVL_OK, "deadlock check: %s", err.msg);
  n = ovl_deadlocks_count(d);
  ovl_deadlocks_free(d);
  ovl_program_free(p);
  return n;
}

/* The fewest ranks a schedule runs on: N from a "# min-ranks: N" line of
 * its header (a pipeline needs a first and a last stage: ranks=[1:nranks]
 * names no rank on one), else 1. */
static int min_ranks(const char *rel) {
  char path[4096], line[512];
  int n = 1;
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", OVL_SRCDIR, rel);
  f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  while (fgets(line, sizeof line, f) != NULL && line[0] == '#')
    if (sscanf(line, "# min-ranks: %d", &n) == 1)
      break;
  fclose(f);
  return n;
}

/* Each schedules/bad/X.sched has one kind of ordering bug, which the check
 * finds on 2 ranks:
 *   - a race (in async form): the run gives a numeric mismatch there (its
 *     delay makes the bug show without chaos). Its sync form gives a
 *     mismatch too where it races (a bug in the schedule's own stream
 *     program, which sync form keeps: user streams, compute on a comm
 *     stream, named events) and none where it does not (a bug in Paddle's
 *     ordering, which sync form removes);
 *   - ranks that differ (issue 13): a mismatch between ranks or a
 *     deadlock, and no race. Nothing of it runs: a deadlock hangs until
 *     the timeout, a mismatch mixes buffers or hangs (tests/examples.sh
 *     runs one to its flight record).
 * Its twin schedules/good/X.sched has no race in either form, no mismatch,
 * no deadlock, and gives no numeric mismatch in either mode. A bad schedule
 * that stops failing fails this test. The racy runs race for real on the
 * emulated device memory, which ThreadSanitizer rightly reports: under TSan
 * only the race-free runs are made (here and in the tests below). */
START_TEST(bad_schedules_fail_good_twins_pass) {
  static char bad[MAX_SCHEDULES][256];
  char rel[512];
  int nbad = list_schedules("schedules/bad", bad);
  int racy = 0, mismatched = 0, deadlocked = 0;
  ovl_world *w = make_world(2);
  for (int i = 0; i < nbad; i++) {
    snprintf(rel, sizeof rel, "schedules/bad/%.255s", bad[i]);
    ck_assert_int_le(min_ranks(rel), 2);
    ovl_program *b = load(rel, 2, NULL, 0);
    size_t mm = mismatches_in(b);
    size_t dl = deadlocks_in(b, OVL_MODE_ASYNC) + deadlocks_in(b, OVL_MODE_SYNC);
    if (races_in(b, OVL_MODE_ASYNC) == 0) {
      ck_assert_msg(mm + dl > 0, "%s: no race, mismatch or deadlock", rel);
      ck_assert_msg(races_in(b, OVL_MODE_SYNC) == 0, "%s: races in sync form",
                    rel);
      mismatched += mm > 0;
      deadlocked += dl > 0;
      ovl_program_free(b);
    } else {
      racy++;
      ck_assert_msg(mm == 0 && dl == 0, "%s: mismatches or deadlocks", rel);
      if (!UNDER_TSAN)
        ck_assert_msg(run_checked_short(w, b, OVL_MODE_ASYNC) > 0,
                      "%s: no mismatch in async mode", rel);
      if (races_in(b, OVL_MODE_SYNC) == 0)
        ck_assert_msg(run_checked_short(w, b, OVL_MODE_SYNC) == 0,
                      "%s: mismatch in sync mode, which has no race", rel);
      else if (!UNDER_TSAN)
        ck_assert_msg(run_checked_short(w, b, OVL_MODE_SYNC) > 0,
                      "%s: no mismatch in sync mode, which races", rel);
      ovl_program_free(b);
    }
    snprintf(rel, sizeof rel, "schedules/good/%.255s", bad[i]);
    ovl_program *g = load(rel, 2, NULL, 0);
    ck_assert_msg(races_in(g, OVL_MODE_ASYNC) == 0, "%s: races in async form",
                  rel);
    ck_assert_msg(races_in(g, OVL_MODE_SYNC) == 0, "%s: races in sync form",
                  rel);
    ck_assert_msg(mismatches_in(g) == 0, "%s: mismatches", rel);
    ck_assert_msg(deadlocks_in(g, OVL_MODE_ASYNC) == 0 &&
                      deadlocks_in(g, OVL_MODE_SYNC) == 0,
                  "%s: deadlocks", rel);
    ck_assert_msg(run_checked_short(w, g, OVL_MODE_ASYNC) == 0,
                  "%s: mismatch in async mode", rel);
    ck_assert_msg(run_checked_short(w, g, OVL_MODE_SYNC) == 0,
                  "%s: mismatch in sync mode", rel);
    ovl_program_free(g);
  }
  /* One per kind of race, at least, and of the ranks' bugs. */
  ck_assert_int_ge(racy, 11);
  ck_assert_int_ge(mismatched, 2);
  ck_assert_int_ge(deadlocked, 2);
  ovl_world_free(w);
}
END_TEST

/* Every good schedule (twins and the rest) is right on 1, 2, 3, 4 and 8
 * ranks (from its min-ranks), in both modes, and has no race, mismatch or
 * deadlock there. */
static const int good_rank_counts[] = {1, 2, 3, 4, 8};

START_TEST(good_schedules_pass) {
  static char good[MAX_SCHEDULES][256];
  char rel[512];
  int nranks = good_rank_counts[_i];
  int ngood = list_schedules("schedules/good", good);
  ovl_world *w = make_world(nranks);
  ck_assert_int_ge(ngood, 15);
  for (int i = 0; i < ngood; i++) {
    snprintf(rel, sizeof rel, "schedules/good/%.255s", good[i]);
    if (nranks < min_ranks(rel))
      continue;
    ovl_program *g = load(rel, nranks, NULL, 0);
    ck_assert_msg(races_in(g, OVL_MODE_ASYNC) == 0 &&
                      races_in(g, OVL_MODE_SYNC) == 0,
                  "%s on %d ranks: races", rel, nranks);
    ck_assert_msg(mismatches_in(g) == 0, "%s on %d ranks: mismatches", rel,
                  nranks);
    ck_assert_msg(deadlocks_in(g, OVL_MODE_ASYNC) == 0 &&
                      deadlocks_in(g, OVL_MODE_SYNC) == 0,
                  "%s on %d ranks: deadlocks", rel, nranks);
    ck_assert_msg(run_checked_short(w, g, OVL_MODE_ASYNC) == 0,
                  "%s on %d ranks: mismatch in async mode", rel, nranks);
    ck_assert_msg(run_checked_short(w, g, OVL_MODE_SYNC) == 0,
                  "%s on %d ranks: mismatch in sync mode", rel, nranks);
    ovl_program_free(g);
  }
  ovl_world_free(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Generic stream ops                                                  */
/* ------------------------------------------------------------------ */

/* A compute op on the comm stream reads (and writes in place) what the
 * delayed calc stream wrote: right when a named event orders it, wrong
 * without. sync mode keeps the schedule's own stream program, so it is as
 * right, or as wrong, as async. (The way back to calc is a named event too:
 * sync mode drops c_wait_comm, and the allreduce it moves to calc would
 * then race with the compute op on comm.) */
START_TEST(named_event_orders_compute_on_comm) {
  static const char head[] =
      "x = data(shape=[256], init=uniform, seed=3)\n"
      "delay(us=20000, stream=calc)\n"
      "y = scale(x, scale=3.0)\n";
  static const char order[] =
      "event_record(y, event=y_ready, stream=calc)\n"
      "stream_wait_event(event=y_ready, stream=comm, ring_id=0)\n";
  static const char tail[] =
      "y = scale(y, scale=2.0, stream=comm, ring_id=0)\n"
      "event_record(y, event=y_scaled, stream=comm, ring_id=0)\n"
      "stream_wait_event(event=y_scaled, stream=calc)\n"
      "c_allreduce_sum(y, ring_id=0)\n"
      "c_wait_comm(y, ring_id=0)\n"
      "fetch(y)\n";
  char text[1024];
  ovl_world *w = make_world(2);

  snprintf(text, sizeof text, "%s%s%s", head, order, tail);
  ovl_program *ok = parse_text(text, 2);
  ck_assert_uint_eq(ok->nevents, 2);
  ck_assert_int_eq(run_checked(w, ok, OVL_MODE_ASYNC, NULL), 0);
  ck_assert_int_eq(run_checked(w, ok, OVL_MODE_SYNC, NULL), 0);
  ovl_program_free(ok);

  snprintf(text, sizeof text, "%s%s", head, tail);
  ovl_program *racy = parse_text(text, 2);
  if (!UNDER_TSAN) {
    ck_assert_int_gt(run_checked(w, racy, OVL_MODE_ASYNC, NULL), 0);
    ck_assert_int_gt(run_checked(w, racy, OVL_MODE_SYNC, NULL), 0);
  }
  ovl_program_free(racy);
  ovl_world_free(w);
}
END_TEST

/* The other direction: calc waits for a named event recorded on comm after
 * the delayed allreduce, as c_wait_comm does. */
START_TEST(named_event_orders_calc_after_comm) {
  static const char head[] =
      "x = data(shape=[256], init=uniform, seed=3)\n"
      "c = scale(x, scale=3.0)\n"
      "event_record(event=c_written, stream=calc)\n"
      "stream_wait_event(c, event=c_written, stream=comm, ring_id=0)\n"
      "delay(us=20000, stream=comm, ring_id=0)\n"
      "c_allreduce_sum(c, ring_id=0)\n";
  static const char order[] =
      "event_record(c, event=c_reduced, stream=comm, ring_id=0)\n"
      "stream_wait_event(event=c_reduced, stream=calc)\n";
  static const char tail[] = "y = scale(c, scale=2.0)\nfetch(y)\n";
  char text[1024];
  ovl_world *w = make_world(2);

  snprintf(text, sizeof text, "%s%s%s", head, order, tail);
  ovl_program *ok = parse_text(text, 2);
  ck_assert_int_eq(run_checked(w, ok, OVL_MODE_ASYNC, NULL), 0);
  ovl_program_free(ok);
  snprintf(text, sizeof text, "%s%s", head, tail);
  ovl_program *racy = parse_text(text, 2);
  if (!UNDER_TSAN)
    ck_assert_int_gt(run_checked(w, racy, OVL_MODE_ASYNC, NULL), 0);
  ovl_program_free(racy);
  ovl_world_free(w);
}
END_TEST

/* A later record of an event replaces the earlier one. Recorded again on
 * calc after a second (delayed) write, the wait covers that write too;
 * without the second record it covers only the first write; recorded again
 * on the idle comm stream it covers neither. */
START_TEST(rerecorded_event_replaces) {
  static const char fmt[] =
      "x = data(shape=[256], init=uniform, seed=3)\n"
      "y = scale(x, scale=3.0)\n"
      "event_record(y, event=e, stream=calc)\n"
      "delay(us=20000, stream=calc)\n"
      "w = scale(x, scale=5.0)\n"
      "%s"
      "stream_wait_event(event=e, stream=comm, ring_id=0)\n"
      "w = elementwise_add(w, y, stream=comm, ring_id=0)\n"
      "c_allreduce_sum(w, ring_id=0)\n"
      "c_wait_comm(w, ring_id=0)\n"
      "fetch(w)\n";
  static const struct {
    const char *again;
    bool right;
  } cases[] = {
      {"event_record(w, event=e, stream=calc)\n", true},
      {"", false},
      {"event_record(event=e, stream=comm, ring_id=0)\n", false},
  };
  char text[1024];
  ovl_world *w = make_world(2);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (UNDER_TSAN && !cases[i].right)
      continue;
    snprintf(text, sizeof text, fmt, cases[i].again);
    ovl_program *p = parse_text(text, 2);
    int64_t wrong = run_checked(w, p, OVL_MODE_ASYNC, NULL);
    if (cases[i].right)
      ck_assert_msg(wrong == 0, "case %zu: %lld wrong", i, (long long)wrong);
    else
      ck_assert_msg(wrong > 0, "case %zu: right by luck?", i);
    ovl_program_free(p);
  }
  ovl_world_free(w);
}
END_TEST

/* stream_sync(stream=comm) makes the host wait for the comm stream, so a
 * fetch after it sees the allreduce. */
START_TEST(stream_sync_orders_fetch) {
  static const char fmt[] =
      "x = data(shape=[256], init=uniform, seed=5, per_rank=true)\n"
      "c = scale(x, scale=3.0)\n"
      "c_wait_compute(c, ring_id=0)\n"
      "delay(us=20000, stream=comm, ring_id=0)\n"
      "c_allreduce_sum(c, ring_id=0)\n"
      "%s"
      "fetch(c)\n";
  char text[1024];
  ovl_world *w = make_world(3);
  snprintf(text, sizeof text, fmt, "stream_sync(c, stream=comm, ring_id=0)\n");
  ovl_program *ok = parse_text(text, 3);
  ck_assert_int_eq(run_checked(w, ok, OVL_MODE_ASYNC, NULL), 0);
  ovl_program_free(ok);
  /* Syncing the calc stream is what fetch does anyway: not enough. */
  snprintf(text, sizeof text, fmt, "stream_sync(c, stream=calc)\n");
  ovl_program *racy = parse_text(text, 3);
  if (!UNDER_TSAN)
    ck_assert_int_gt(run_checked(w, racy, OVL_MODE_ASYNC, NULL), 0);
  ovl_program_free(racy);
  ovl_world_free(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Chaos                                                               */
/* ------------------------------------------------------------------ */

static const unsigned chaos_seeds[] = {1, 2, 3, 0xC0FFEEu};
#define NCHAOS_SEEDS ((int)(sizeof chaos_seeds / sizeof chaos_seeds[0]))

/* Clean schedules stay right under chaos, in both modes, for every seed:
 * the seed benchmark at a small size (16 of its 64 steps: each step is the
 * same ops, and chaos sleeps before every one), every good schedule, and
 * every op. */
START_TEST(chaos_keeps_clean_schedules_right) {
  static char good[MAX_SCHEDULES][256];
  unsigned seed = chaos_seeds[_i];
  const char *seed_defs[] = {"rows=16", "cols=16", "steps=16"};
  char rel[512], root[32];
  const char *all_defs[] = {root};
  ovl_world *w = make_chaos_world(2, seed);

  ovl_program *p = load("schedules/seed.sched", 2, seed_defs, 3);
  ck_assert_msg(run_checked_iters(w, p, OVL_MODE_ASYNC, 1, 1, NULL) == 0,
                "seed.sched async, chaos seed %u", seed);
  ck_assert_msg(run_checked_iters(w, p, OVL_MODE_SYNC, 1, 1, NULL) == 0,
                "seed.sched sync, chaos seed %u", seed);
  ovl_program_free(p);

  int ngood = list_schedules("schedules/good", good);
  for (int i = 0; i < ngood; i++) {
    snprintf(rel, sizeof rel, "schedules/good/%.255s", good[i]);
    p = load(rel, 2, NULL, 0);
    ck_assert_msg(run_checked_iters(w, p, OVL_MODE_ASYNC, 1, 1, NULL) == 0,
                  "%s async, chaos seed %u", rel, seed);
    ck_assert_msg(run_checked_iters(w, p, OVL_MODE_SYNC, 1, 1, NULL) == 0,
                  "%s sync, chaos seed %u", rel, seed);
    ovl_program_free(p);
  }

  snprintf(root, sizeof root, "root=1");
  p = load("tests/schedules/all_ops.sched", 2, all_defs, 1);
  ck_assert_msg(run_checked_iters(w, p, OVL_MODE_ASYNC, 1, 1, NULL) == 0,
                "all_ops.sched async, chaos seed %u", seed);
  ck_assert_msg(run_checked_iters(w, p, OVL_MODE_SYNC, 1, 1, NULL) == 0,
                "all_ops.sched sync, chaos seed %u", seed);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* A racy schedule stays wrong under chaos. */
START_TEST(chaos_keeps_missing_wait_wrong) {
  unsigned seed = chaos_seeds[_i];
  if (UNDER_TSAN)
    return; /* a real race on device memory, which TSan reports */
  ovl_world *w = make_chaos_world(2, seed);
  ovl_program *p = load("schedules/bad/missing_wait_compute.sched", 2, NULL,
                        0);
  ck_assert_msg(run_checked_iters(w, p, OVL_MODE_ASYNC, 1, 1, NULL) > 0,
                "chaos seed %u: right by luck?", seed);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* A result says where it ran, and still does once the world is gone; its
 * getters out of range, and a run's refusals before it starts. */
START_TEST(result_keeps_the_machine) {
  ovl_world *w = make_world(3);
  ovl_program *p = load("schedules/good/missing_wait_compute.sched", 3, NULL,
                        0);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0};
  ovl_result *res = NULL;
  ovl_error err = {0};
  char devices[256];
  double t0 = 1, t1 = 1;
  /* What a run refuses before it starts. */
  ck_assert_int_eq(ovl_world_run(NULL, p, &ro, &res, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_world_run: NULL argument");
  ck_assert_int_eq(ovl_world_run(w, p, NULL, &res, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_world_run(w, p, &ro, NULL, &err), OVL_EINVAL);
  ro.iters = 0;
  ck_assert_int_eq(ovl_world_run(w, p, &ro, &res, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "iterations must be >= 1 and warmup >= 0 (got "
                            "0, 0)");
  ro.iters = 1;
  ck_assert_ptr_null(res);
  ck_assert_msg(ovl_world_run(w, p, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  snprintf(devices, sizeof devices, "%s", ovl_world_devices(w));
  ck_assert_ptr_null(ovl_world_device_name(w, 3));
  ck_assert_ptr_null(ovl_world_device_name(NULL, 0));
  ovl_world_info_get(w, NULL);
  ovl_world_free(w);
  ck_assert_int_eq(ovl_result_nranks(res), 3);
  ck_assert_str_eq(ovl_result_backend(res), "cpu");
  ck_assert_str_eq(ovl_result_devices(res), devices);
  ck_assert_str_eq(ovl_result_device_name(res, 2), "emulated (cpu)");
  ck_assert_ptr_null(ovl_result_device_name(res, 3));
  ck_assert_ptr_null(ovl_result_device_name(res, -1));
  ck_assert_ptr_null(ovl_result_device_name(NULL, 0));
  /* Out of range, and what the run was not asked for: no op times, no
   * trace. */
  ck_assert_ptr_nonnull(ovl_result_fetched(res, 2, 0));
  ck_assert_ptr_null(ovl_result_fetched(res, 3, 0));
  ck_assert_ptr_null(ovl_result_fetched(res, -1, 0));
  ck_assert_ptr_null(ovl_result_fetched(res, 0, ovl_program_fetch_count(p)));
  ck_assert_ptr_null(ovl_result_op_times(res, 0));
  ck_assert_int_eq(ovl_result_trace_iter(res), -1);
  ck_assert_int_eq(ovl_result_trace_iter(NULL), -1);
  ck_assert_int_eq(ovl_result_span(res, 0, 0, &t0, &t1), -1);
  ck_assert_int_eq(ovl_result_span(NULL, 0, 0, &t0, &t1), -1);
  ck_assert_int_eq(ovl_result_record_span(res, 0, 0, &t0, &t1), -1);
  ck_assert_int_eq(ovl_result_record_span(NULL, 0, 0, &t0, &t1), -1);
  ck_assert(t0 == 1 && t1 == 1);
  ck_assert(isnan(ovl_result_trace_base(res, 0)));
  ck_assert(isnan(ovl_result_trace_base(NULL, 0)));
  /* The comparison with the reference refuses what is missing and
   * tolerances that are not >= 0 (NaN included); OVL_TOL_DTYPE is each
   * variable's default. */
  {
    ovl_reference *ref = NULL;
    ovl_check chk;
    ck_assert_int_eq(ovl_reference_compute(p, 3, &ref, &err), OVL_OK);
    ck_assert_int_eq(ovl_check_result(NULL, res, ref, 0, 0, &chk, &err),
                     OVL_EINVAL);
    ck_assert_str_eq(err.msg, "ovl_check_result: bad argument");
    ck_assert_int_eq(ovl_check_result(p, NULL, ref, 0, 0, &chk, &err),
                     OVL_EINVAL);
    ck_assert_int_eq(ovl_check_result(p, res, NULL, 0, 0, &chk, &err),
                     OVL_EINVAL);
    ck_assert_int_eq(ovl_check_result(p, res, ref, 0, 0, NULL, &err),
                     OVL_EINVAL);
    ck_assert_int_eq(ovl_check_result(p, res, ref, -1e-5, 0, &chk, &err),
                     OVL_EINVAL);
    ck_assert_str_eq(err.msg, "ovl_check_result: tolerances must be >= 0 or "
                              "OVL_TOL_DTYPE (rtol -1e-05, atol 0)");
    ck_assert_int_eq(ovl_check_result(p, res, ref, 0, NAN, &chk, &err),
                     OVL_EINVAL);
    ck_assert_int_eq(ovl_check_result(p, res, ref, OVL_TOL_DTYPE,
                                      OVL_TOL_DTYPE, &chk, &err),
                     OVL_OK);
    ck_assert(chk.checked > 0 && chk.mismatched == 0);
    ovl_check_release(&chk);
    ovl_check_release(NULL);
    ovl_reference_free(ref);
  }
  ovl_result_free(res);
  ovl_result_free(NULL);
  ovl_program_free(p);
}
END_TEST

/* ovl_world_set: the cpu backend refuses the cuda knobs (with chaos set
 * as well), an unknown key is refused, and nothing is taken once the
 * world has run. */
START_TEST(cpu_backend_refuses_cuda_tuning) {
  ovl_world *w = make_world(2);
  ovl_error err = {0};
  ck_assert_int_eq(ovl_world_set(w, "nccl_max_ctas", "4", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "backend 'cpu' has no comm stream priority or "
                            "NCCL CTA limits (the cuda backend has)");
  ck_assert_int_eq(ovl_world_set(w, "chaos_seed", "7", &err), OVL_OK);
  ck_assert_int_eq(ovl_world_set(w, "comm_priority", "high", &err),
                   OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "cuda backend"));
  ck_assert_int_eq(ovl_world_set(w, "nccl_min_ctas", "1", &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "cuda backend"));
  ck_assert_int_eq(ovl_world_set(w, "chaos", "7", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_world_set: unknown key 'chaos' "
                            "(comm_priority, nccl_min_ctas, nccl_max_ctas, "
                            "chaos_seed, tf32, machine, profile)");
  /* tf32 is a key, and the cpu backend says it has no TF32. */
  ck_assert_int_eq(ovl_world_set(w, "tf32", "on", &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "no TF32"));
  ck_assert_int_eq(ovl_world_set(w, "chaos_seed", NULL, &err), OVL_EINVAL);
  ovl_world_free(w);
}
END_TEST

/* Graph mode (ovl_run_opts.graph) needs the cuda backend: the cpu backend
 * refuses it, in ovl_world_run and in the pipeline before any check,
 * reference or run (which would take long on a big program). */
START_TEST(cpu_backend_refuses_graphs) {
  ovl_world *w = make_world(2);
  ovl_program *p = load("schedules/good/missing_wait_compute.sched", 2, NULL,
                        0);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0, .graph = 1};
  ovl_pipeline_opts pl = {.size = sizeof pl,
                          .modes = OVL_MODE_BIT(OVL_MODE_ASYNC),
                          .races = 1,
                          .run = 1,
                          .run_opts = &ro};
  ovl_result *res = NULL;
  ovl_report *rep = NULL;
  ovl_error err = {0};
  const char *msg = "graphs: backend 'cpu' cannot run a program as graphs "
                    "(CUDA graphs need the cuda backend)";
  ck_assert_int_eq(ovl_world_has_graphs(w), 0);
  ck_assert_int_eq(ovl_world_has_graphs(NULL), 0);
  ck_assert_int_eq(ovl_world_run(w, p, &ro, &res, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, msg);
  ck_assert_ptr_null(res);
  memset(&err, 0, sizeof err);
  ck_assert_int_eq(ovl_pipeline_run(w, p, &pl, &rep, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, msg);
  ck_assert_ptr_null(rep);
  /* Without graphs the same world runs it. */
  ro.graph = 0;
  ck_assert_int_eq(ovl_world_run(w, p, &ro, &res, &err), OVL_OK);
  ovl_result_free(res);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

START_TEST(tuning_only_before_the_first_run) {
  ovl_world *w = make_world(2);
  ovl_program *p = load("schedules/good/missing_wait_compute.sched", 2, NULL,
                        0);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0};
  ovl_result *res = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_world_set(w, "chaos_seed", "5", &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(ovl_world_run(w, p, &ro, &res, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_world_set(w, "chaos_seed", "6", &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_world_set: chaos_seed: the world has run "
                            "already (tuning comes before the first run)");
  ovl_result_free(res);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* A failure says where every rank was: a stream that never finishes
 * times out at the fetch on each of 3 ranks, and the message lists them. */
START_TEST(failure_says_where_the_ranks_were) {
  ovl_world_opts wo = {
      .size = sizeof wo, .backend = "cpu", .nranks = 3, .timeout_s = 0.3};
  ovl_world *w = NULL;
  ovl_program *prog = load("tests/schedules/hang_stream.sched", 3, NULL, 0);
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .warmup = 0};
  ck_assert_int_eq(ovl_world_create(&wo, &w, &err), OVL_OK);
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_ETIMEDOUT);
  ck_assert_ptr_null(res);
  ck_assert_msg(strstr(err.msg, "; where the ranks were: ranks 0,1,2 at ") !=
                        NULL &&
                    strstr(err.msg, "hang_stream.sched:9 (fetch, iteration "
                                    "1 of 1)") != NULL,
                "%s", err.msg);
  /* The failure aborted the world: another run on it is refused at once
   * (before, it started, and failed in its first wait as aborted). */
  memset(&err, 0, sizeof err);
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_EINVAL);
  ck_assert_ptr_null(res);
  ck_assert_msg(strstr(err.msg, "an earlier run on this world failed and "
                                "aborted it: create another world") != NULL,
                "%s", err.msg);
  ovl_program_free(prog);
  ovl_world_free(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Ranks that differ                                                   */
/* ------------------------------------------------------------------ */

/* Run `prog` (as given) on a fresh cpu world of its ranks; fails the test
 * with the library's message unless the run succeeds. */
static ovl_result *run_ok(const ovl_program *prog, const ovl_run_opts *ro) {
  ovl_world *w = make_world(prog->nranks);
  ovl_result *res = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_world_run(w, prog, ro, &res, &err);
  ck_assert_msg(st == OVL_OK, "run: %s", err.msg);
  ovl_world_free(w);
  return res;
}

/* The fetched values of variable `name` on `rank` (NULL: never fetched
 * there). */
static const double *fetched(const ovl_result *res, const ovl_program *prog,
                             int rank, const char *name) {
  for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, i, &v);
    if (strcmp(v.name, name) == 0)
      return ovl_result_fetched(res, rank, i);
  }
  ck_abort_msg("%s is not fetched", name);
  return NULL;
}

/* Count of `needle` in `hay`. */
static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p != NULL;
       p = strstr(p + 1, needle))
    n++;
  return n;
}

/* A rank outside an op's ranks skips it: no work (y keeps its input on
 * rank 1), no fetch (NULL), no op time, no span. The trace and the
 * picture of such a run are made, numbering each rank's own collectives
 * (rank 0's allreduce of w and rank 1's of x are each rank's first). */
START_TEST(ranks_skip_ops) {
  static const char text[] =
      "x = data(shape=[4], init=fill, value=1.0)\n"
      "y = data(shape=[4], init=fill, value=5.0)\n"
      "w = data(shape=[4], init=fill, value=2.0)\n"
      "y = scale(x, scale=3.0, ranks=[0])\n"
      "delay(us=2000, stream=calc, ranks=[1])\n"
      "z = scale(y, scale=2.0)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true, ranks=[1])\n"
      "c_allreduce_sum(w, ring_id=0, use_calc_stream=true, ranks=[0])\n"
      "c_allreduce_sum(z, ring_id=0, use_calc_stream=true)\n"
      "fetch(z, w)\n"
      "fetch(y, ranks=[0])\n"
      "fetch(x, ranks=[1])\n";
  ovl_program *prog = parse_text(text, 2);
  ovl_run_opts ro = {
      .size = sizeof ro, .iters = 2, .warmup = 1, .op_times = 1, .trace = 1};
  size_t sc = find_op(prog, "scale", 0), dl = find_op(prog, "delay", 0);
  size_t fy = find_op(prog, "fetch", 1);
  ovl_result *res = run_ok(prog, &ro);
  ovl_timeline_run tr = {OVL_MODE_ASYNC, prog, res};
  char *out = NULL;
  size_t len = 0;
  ovl_error err = {0};
  const double *t0 = ovl_result_op_times(res, 0);
  const double *t1 = ovl_result_op_times(res, 1);

  for (int r = 0; r < 2; r++) {
    const double *z = fetched(res, prog, r, "z");
    const double *w = fetched(res, prog, r, "w");
    ck_assert_ptr_nonnull(z);
    ck_assert_msg(z[3] == 16.0, "rank %d: z = %g", r, z[3]);
    ck_assert_msg(w[0] == (r == 0 ? 3.0 : 2.0), "rank %d: w = %g", r, w[0]);
  }
  ck_assert_ptr_nonnull(fetched(res, prog, 0, "y"));
  ck_assert(fetched(res, prog, 0, "y")[0] == 3.0);
  ck_assert_ptr_null(fetched(res, prog, 1, "y"));
  ck_assert_ptr_null(fetched(res, prog, 0, "x"));
  ck_assert(fetched(res, prog, 1, "x")[2] == 3.0);
  /* Op times: none where the op did not run. */
  ck_assert(t0[sc] > 0 && t1[sc] == 0.0);
  ck_assert(t0[dl] == 0.0);
  ck_assert_msg(t1[dl] >= 2 * 0.002, "delay: %g s", t1[dl]);
  /* Spans likewise. */
  ck_assert_int_eq(ovl_result_span(res, 0, sc, NULL, NULL), 0);
  ck_assert_int_eq(ovl_result_span(res, 1, sc, NULL, NULL), -1);
  ck_assert_int_eq(ovl_result_span(res, 0, dl, NULL, NULL), -1);
  ck_assert_int_eq(ovl_result_span(res, 1, dl, NULL, NULL), 0);
  ck_assert_int_eq(ovl_result_span(res, 0, fy, NULL, NULL), 0);
  ck_assert_int_eq(ovl_result_span(res, 1, fy, NULL, NULL), -1);
  ck_assert_msg(ovl_timeline_trace(&tr, 1, &out, &len, &err) == OVL_OK,
                "%s", err.msg);
  ck_assert_int_eq(count_of(out, "\"c_allreduce_sum #0 (ring 0)\""), 2);
  ck_assert_int_eq(count_of(out, "\"c_allreduce_sum #1 (ring 0)\""), 2);
  ck_assert_int_eq(count_of(out, "#2 (ring 0)"), 0);
  ck_assert_int_eq(count_of(out, "\"name\":\"delay\""), 1);
  free(out);
  ck_assert_msg(ovl_timeline_svg(&tr, 1, &out, &len, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert(len > 0);
  free(out);
  ovl_result_free(res);
  ovl_program_free(prog);
}
END_TEST

/* A forward pipeline: rank r > 0 receives from r - 1, every rank adds its
 * 1, rank r < nranks - 1 sends on: rank r ends with r + 1. */
START_TEST(pipeline_send_recv) {
  static const char text[] =
      "x = data(shape=[16], init=fill, value=1.0)\n"
      "h = data(shape=[16], init=fill, value=0.0)\n"
      "h = recv_v2(peer=rank - 1, out_shape=[16], ring_id=0,\n"
      "            use_calc_stream=true, ranks=[1:nranks])\n"
      "h = elementwise_add(h, x)\n"
      "send_v2(h, peer=rank + 1, ring_id=0, use_calc_stream=true,\n"
      "        ranks=[0:nranks - 1])\n"
      "fetch(h)\n";
  static const int sizes[] = {2, 3, 4, 8};
  int n = sizes[_i];
  ovl_program *prog = parse_text(text, n);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 1};
  ovl_result *res = run_ok(prog, &ro);
  for (int r = 0; r < n; r++) {
    const double *h = fetched(res, prog, r, "h");
    for (int i = 0; i < 16; i++)
      ck_assert_msg(h[i] == r + 1.0, "%d ranks: rank %d h[%d] = %g", n, r, i,
                    h[i]);
  }
  ovl_result_free(res);
  ovl_program_free(prog);
}
END_TEST

/* A ring shift in a group (alone, every rank would wait in its send;
 * with one rank, a send to oneself), and a group whose ops run on one
 * rank each (rank 0 sends, rank 1 receives, the others have none). */
START_TEST(group_ring_shift) {
  static const char text[] =
      "x = data(shape=[8], init=uniform, per_rank=true)\n"
      "group {\n"
      "  send_v2(x, peer=(rank + 1) % nranks, ring_id=0,\n"
      "          use_calc_stream=true)\n"
      "  y = recv_v2(peer=(rank - 1) % nranks, out_shape=[8], ring_id=0,\n"
      "              use_calc_stream=true)\n"
      "}\n"
      "fetch(x, y)\n";
  static const char text2[] =
      "x = data(shape=[8], init=uniform, per_rank=true)\n"
      "repeat 2 {\n"
      "  group {\n"
      "    send_v2(x, peer=1, ring_id=0, use_calc_stream=true, ranks=[0])\n"
      "    y = recv_v2(peer=0, out_shape=[8], ring_id=0,\n"
      "                use_calc_stream=true, ranks=[1])\n"
      "  }\n"
      "}\n"
      "fetch(x)\n"
      "fetch(y, ranks=[1])\n";
  int n = _i;
  ovl_program *prog = parse_text(text, n);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 1};
  ovl_result *res = run_ok(prog, &ro);
  for (int r = 0; r < n; r++) {
    const double *x = fetched(res, prog, (r + n - 1) % n, "x");
    const double *y = fetched(res, prog, r, "y");
    for (int i = 0; i < 8; i++)
      ck_assert_msg(y[i] == x[i], "%d ranks: rank %d y[%d] = %g, want %g", n,
                    r, i, y[i], x[i]);
  }
  ovl_result_free(res);
  ovl_program_free(prog);
  if (n < 2)
    return;
  prog = parse_text(text2, n);
  res = run_ok(prog, &ro);
  for (int i = 0; i < 8; i++)
    ck_assert(fetched(res, prog, 1, "y")[i] ==
              fetched(res, prog, 0, "x")[i]);
  ck_assert_ptr_null(fetched(res, prog, 0, "y"));
  ovl_result_free(res);
  ovl_program_free(prog);
}
END_TEST

/* c_reduce_sum to the last rank (the others' outputs untouched), alltoall
 * and barrier through the executor, on 1 to 4 ranks. */
START_TEST(reduce_alltoall_barrier_run) {
  static const char text[] =
      "x = data(shape=[12], init=uniform, per_rank=true)\n"
      "s = data(shape=[12], init=fill, value=-7.0)\n"
      "s = c_reduce_sum(x, root=nranks - 1, ring_id=0, use_calc_stream=true)\n"
      "a = alltoall(x, ring_id=0, use_calc_stream=true)\n"
      "barrier(x, ring_id=0)\n"
      "fetch(x, s, a)\n";
  int n = _i, part = 12 / n;
  ovl_program *prog = parse_text(text, n);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 1};
  ovl_result *res = run_ok(prog, &ro);
  for (int r = 0; r < n; r++) {
    const double *s = fetched(res, prog, r, "s");
    const double *a = fetched(res, prog, r, "a");
    for (int i = 0; i < 12; i++) {
      float sum = (float)fetched(res, prog, 0, "x")[i];
      for (int q = 1; q < n; q++)
        sum += (float)fetched(res, prog, q, "x")[i];
      double want = r == n - 1 ? (double)sum : -7.0;
      ck_assert_msg(s[i] == want, "%d ranks: rank %d s[%d] = %g, want %g", n,
                    r, i, s[i], want);
      /* Part j of a is part r of rank j's x. */
      int j = i / part, e = i % part;
      ck_assert_msg(a[i] == fetched(res, prog, j, "x")[r * part + e],
                    "%d ranks: rank %d a[%d] = %g", n, r, i, a[i]);
    }
  }
  ovl_result_free(res);
  ovl_program_free(prog);
}
END_TEST

/* Run `text` on `nranks` cpu ranks with a 0.3 s timeout: it must time out
 * within a few seconds; the message is returned (static). */
static const char *timeout_msg(const char *text, int nranks, int iters,
                               int warmup) {
  static ovl_error err;
  ovl_program *prog = parse_text(text, nranks);
  ovl_world *w = tu_cpu_world(nranks, 0.3);
  ovl_run_opts ro = {.size = sizeof ro, .iters = iters, .warmup = warmup};
  ovl_result *res = NULL;
  double t0 = ovl__now();
  memset(&err, 0, sizeof err);
  ck_assert_int_eq(ovl_world_run(w, prog, &ro, &res, &err), OVL_ETIMEDOUT);
  ck_assert_msg(ovl__now() - t0 < 5.0, "the hang took %.1f s to end",
                ovl__now() - t0);
  ck_assert_ptr_null(res);
  ovl_world_free(w);
  ovl_program_free(prog);
  return err.msg;
}

/* Ends with `tail`. */
#define CK_ENDS_WITH(s, tail)                                                 \
  ck_assert_msg(strlen(s) >= strlen(tail) &&                                  \
                    strcmp((s) + strlen(s) - strlen(tail), (tail)) == 0,      \
                "%s\n  does not end with\n%s", (s), (tail))

/* Both ranks receive first, then send, outside a group: a deadlock of
 * order (every send has its receive). The run times out at once, and the
 * message says where each rank's communication was and which tag none
 * of them completed. */
START_TEST(flight_record_deadlock) {
  static const char text[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "y = recv_v2(peer=(rank + 1) % nranks, out_shape=[8], ring_id=0)\n"
      "send_v2(x, peer=(rank + 1) % nranks, ring_id=0)\n"
      "c_sync_comm_stream(y, ring_id=0)\n"
      "fetch(y)\n";
  const char *m = timeout_msg(text, 2, 1, 0);
  ck_assert_msg(strstr(m, "comm[0] stream: ring 0 p2p: recv #1 from rank ") !=
                        NULL &&
                    strstr(m, "(float32 count=8) timed out after 0.3 s "
                              "waiting for rank ") != NULL,
                "%s", m);
  ck_assert_msg(strstr(m, "; where the ranks were: ranks 0,1 at t.sched:4 "
                          "(c_sync_comm_stream, iteration 1 of 1); ") != NULL,
                "%s", m);
  CK_ENDS_WITH(m, "; flight record: ranks 0,1 ring 0: enqueued #2 send_v2 "
                  "(t.sched:3), completed nothing; ranks agree; first not "
                  "completed: ring 0 #1: rank 0 recv_v2 into 'y' (float32, 8 "
                  "elements) from rank 1 at t.sched:2:5, rank 1 recv_v2 into "
                  "'y' (float32, 8 elements) from rank 0 at t.sched:2:5");
}
END_TEST

/* Rank 2 never issues the second allreduce: ranks 0 and 1 wait in it. A
 * send with no receive (ring 1, in the first of three iterations, the
 * warmup) likewise, named by its own tag. */
START_TEST(flight_record_disagreement) {
  static const char text[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true, ranks=[0, 1])\n"
      "fetch(x)\n";
  static const char text2[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "c_allreduce_sum(x, ring_id=1, use_calc_stream=true)\n"
      "send_v2(x, peer=1, ring_id=1, use_calc_stream=true, ranks=[0])\n"
      "fetch(x)\n";
  const char *m = timeout_msg(text, 3, 1, 0);
  CK_ENDS_WITH(m, "; flight record: ranks 0,1 ring 0: enqueued #2 "
                  "c_allreduce_sum (t.sched:3), completed #1 c_allreduce_sum "
                  "(t.sched:2); rank 2 ring 0: enqueued #1 c_allreduce_sum "
                  "(t.sched:2), completed #1 c_allreduce_sum (t.sched:2); "
                  "ranks disagree first at #2: ring 0 collective #2: ranks "
                  "0-1 issue c_allreduce_sum of 'x' (float32, 8 elements) at "
                  "t.sched:3:1, rank 2 never issues it (it issues 1 "
                  "collective on ring 0)");
  m = timeout_msg(text2, 2, 2, 1);
  ck_assert_msg(strstr(m, "ring 1 p2p: send #1 to rank 1 (float32 count=8) "
                          "timed out after 0.3 s waiting for rank 1's recv "
                          "#1 from rank 0; where the ranks were: rank 0 at "
                          "t.sched:4 (fetch, iteration 1 of 3); rank 1 at "
                          "the barrier after iteration 1 of 3; ") != NULL,
                "%s", m);
  CK_ENDS_WITH(m, "; flight record: rank 0 ring 1: enqueued #2 send_v2 "
                  "(t.sched:3), completed #1 c_allreduce_sum (t.sched:2); "
                  "rank 1 ring 1: enqueued #1 c_allreduce_sum (t.sched:2), "
                  "completed #1 c_allreduce_sum (t.sched:2); ranks disagree "
                  "first at #2: ring 1: rank 0 issues send_v2 of 'x' "
                  "(float32, 8 elements) to rank 1 at t.sched:3:1 (its send "
                  "#1 to rank 1), and rank 1 never receives it (it posts 0 "
                  "receives from rank 0 on ring 1)");
}
END_TEST

/* A message with little room left: the entries give way to the
 * conclusion, which is cut with "..." where even it does not fit. */
START_TEST(flight_record_cut) {
  static const char text[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true)\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true, ranks=[0, 1])\n"
      "fetch(x)\n";
  ovl_program *p = parse_text(text, 3);
  uint64_t enq[3] = {2, 2, 1}, done[3] = {1, 1, 1};
  uint32_t op[3];
  ovl__flight f = {.nranks = 3, .nrings = 1, .iters = 1, .iter = 0,
                   .enq_tag = enq, .enq_op = op, .done_tag = done,
                   .have_done = true};
  char msg[400];
  for (size_t i = 0; i < p->nops; i++)
    if (p->ops[i].line == 3)
      op[0] = op[1] = (uint32_t)i;
    else if (p->ops[i].line == 2)
      op[2] = (uint32_t)i;
  /* Room for the conclusion, not for the entries. */
  memset(msg, 'm', 150);
  msg[150] = '\0';
  ovl__flight_append(p, &f, msg, sizeof msg);
  ck_assert_msg(strlen(msg) < sizeof msg, "%zu", strlen(msg));
  CK_ENDS_WITH(msg, "mmm; flight record: (3 more rank and ring entries); "
                    "ranks disagree first at #2: ring 0 collective #2: ranks "
                    "0-1 issue c_allreduce_sum of 'x' (float32, 8 elements) "
                    "at t.sched:3:1, rank 2 never issues it (it issues 1 "
                    "collective on ring 0)");
  /* Not even for the conclusion. */
  memset(msg, 'm', 300);
  msg[300] = '\0';
  ovl__flight_append(p, &f, msg, sizeof msg);
  ck_assert_uint_eq(strlen(msg), sizeof msg - 1);
  CK_ENDS_WITH(msg, "mmm; ranks disagree first at #2: ring 0 collective #2: "
                    "ranks 0-1 issue c_allreduce_sum of 'x' (floa...");
  ovl_program_free(p);
}
END_TEST

/* The flight record's sentence of the matching on its own: collectives
 * that differ (the other rank's tag shown where it differs, and in the
 * numbers of a later iteration), a send and a receive of different sizes,
 * collectives on different variables of one size (the check's mismatch),
 * and programs whose ranks match. */
START_TEST(first_disagreement_static) {
  static const char coll[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "c_allreduce_sum(x, ring_id=0, ranks=[0])\n"
      "send_v2(x, peer=0, ring_id=0, ranks=[1])\n"
      "y = recv_v2(peer=1, out_shape=[8], ring_id=0, ranks=[0])\n"
      "c_allreduce_max(x, ring_id=0)\n";
  static const char sizes[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "group {\n"
      "  send_v2(x, peer=1, ring_id=0, ranks=[0])\n"
      "  y = recv_v2(peer=0, out_shape=[4], ring_id=0, ranks=[1])\n"
      "}\n";
  static const char vars[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "c_allreduce_sum(x, ring_id=0, ranks=[0])\n"
      "send_v2(x, peer=0, ring_id=0, ranks=[1])\n"
      "y = recv_v2(peer=1, out_shape=[8], ring_id=0, ranks=[0])\n"
      "c_allreduce_sum(y, ring_id=0, ranks=[1])\n";
  static const char fine[] =
      "x = data(shape=[8], init=fill, value=1.0)\n"
      "c_allreduce_sum(x, ring_id=0, ranks=[0])\n"
      "send_v2(x, peer=0, ring_id=0, ranks=[1])\n"
      "y = recv_v2(peer=1, out_shape=[8], ring_id=0, ranks=[0])\n"
      "c_allreduce_sum(x, ring_id=0, ranks=[1])\n";
  char buf[1024];
  ovl_program *p = parse_text(coll, 2);
  ck_assert(ovl__comm_first_disagreement(p, -1, 0, buf, sizeof buf));
  ck_assert_str_eq(buf, "#1 (rank 1 #2): ring 0 collective #1: rank 0 issues "
                        "c_allreduce_sum of 'x' (float32, 8 elements) at "
                        "t.sched:2:1, rank 1 issues c_allreduce_max of 'x' "
                        "(float32, 8 elements) at t.sched:5:1; they differ in "
                        "reduction (the same size: a run would mix buffers "
                        "silently)");
  ck_assert(ovl__comm_first_disagreement(p, 0, 2, buf, sizeof buf));
  ck_assert_str_eq(buf, "#6 (rank 0 #7): ring 0 collective #1: rank 0 issues "
                        "c_allreduce_sum of 'x' (float32, 8 elements) at "
                        "t.sched:2:1, rank 1 issues c_allreduce_max of 'x' "
                        "(float32, 8 elements) at t.sched:5:1; they differ in "
                        "reduction (the same size: a run would mix buffers "
                        "silently)");
  ovl_program_free(p);
  p = parse_text(sizes, 2);
  ck_assert(ovl__comm_first_disagreement(p, -1, 0, buf, sizeof buf));
  ck_assert_str_eq(buf, "#1: ring 0 send #1 from rank 0 to rank 1: rank 0 "
                        "issues send_v2 of 'x' (float32, 8 elements) at "
                        "t.sched:3:3, rank 1 issues recv_v2 into 'y' "
                        "(float32, 4 elements) at t.sched:4:7; they differ in "
                        "count");
  ovl_program_free(p);
  p = parse_text(fine, 2);
  ck_assert(!ovl__comm_first_disagreement(p, -1, 0, buf, sizeof buf));
  ck_assert_str_eq(buf, "");
  ovl_program_free(p);
  /* Rank 1 reduces y, rank 0 x: the same size, other variables. */
  p = parse_text(vars, 2);
  ck_assert(ovl__comm_first_disagreement(p, -1, 0, buf, sizeof buf));
  ck_assert_msg(strstr(buf, "; they differ in variable (the same size: a run "
                            "would mix buffers silently)") != NULL,
                "%s", buf);
  ovl_program_free(p);
  p = load("schedules/seed.sched", 2, NULL, 0);
  ck_assert(!ovl__comm_first_disagreement(p, -1, 0, buf, sizeof buf));
  ovl_program_free(p);
}
END_TEST

/* The suite's cases, which run side by side (tu_run_suite_cases): a new
 * case is a name here. */
static const char *const world_cases[] = {
    "cpu",   "bad_schedules", "schedules",   "generic_ops", "ranks_differ",
    "chaos", "chaos_more",    "chaos_wrong", NULL};

static Suite *world_suite(void) {
  Suite *s = suite_create("world");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, seed_sync_is_zero);
  tcase_add_test(tc, seed_async_is_zero);
  tcase_add_test(tc, seed_comp_and_comm_run);
  tcase_add_test(tc, missing_wait_compute_gives_wrong_result);
  tcase_add_loop_test(tc, all_ops_match_reference, 1, 5);
  tcase_add_test(tc, world_rejects_bad_options);
  tcase_add_test(tc, procs_one_process_without_launcher);
  tcase_add_test(tc, run_rejects_program_for_other_rank_count);
  tcase_add_test(tc, sync_comm_stream_orders_fetch);
  tcase_add_test(tc, op_times_measure_stream_ops);
  tcase_add_test(tc, host_bytes_per_op_parts);
  tcase_add_test(tc, failure_says_where_the_ranks_were);
  tcase_add_test(tc, trace_spans_order_and_durations);
  tcase_add_test(tc, world_info_and_device_names);
  tcase_add_test(tc, result_keeps_the_machine);
  tcase_add_test(tc, cpu_backend_refuses_cuda_tuning);
  tcase_add_test(tc, cpu_backend_refuses_graphs);
  tcase_add_test(tc, tuning_only_before_the_first_run);
  suite_add_tcase(s, tc);

  tc = tcase_create("bad_schedules");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, bad_schedules_fail_good_twins_pass);
  suite_add_tcase(s, tc);

  tc = tcase_create("schedules");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, good_schedules_pass, 0,
                      (int)(sizeof good_rank_counts /
                            sizeof good_rank_counts[0]));
  suite_add_tcase(s, tc);

  tc = tcase_create("generic_ops");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, named_event_orders_compute_on_comm);
  tcase_add_test(tc, named_event_orders_calc_after_comm);
  tcase_add_test(tc, rerecorded_event_replaces);
  tcase_add_test(tc, stream_sync_orders_fetch);
  suite_add_tcase(s, tc);

  tc = tcase_create("ranks_differ");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, ranks_skip_ops);
  tcase_add_loop_test(tc, pipeline_send_recv, 0, 4);
  tcase_add_loop_test(tc, group_ring_shift, 1, 5);
  tcase_add_loop_test(tc, reduce_alltoall_barrier_run, 1, 5);
  tcase_add_test(tc, flight_record_deadlock);
  tcase_add_test(tc, flight_record_disagreement);
  tcase_add_test(tc, flight_record_cut);
  tcase_add_test(tc, first_disagreement_static);
  suite_add_tcase(s, tc);

  tc = tcase_create("chaos");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, chaos_keeps_clean_schedules_right, 0,
                      NCHAOS_SEEDS / 2);
  suite_add_tcase(s, tc);

  tc = tcase_create("chaos_more");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, chaos_keeps_clean_schedules_right, NCHAOS_SEEDS / 2,
                      NCHAOS_SEEDS);
  suite_add_tcase(s, tc);

  tc = tcase_create("chaos_wrong");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, chaos_keeps_missing_wait_wrong, 0,
                      (int)(sizeof chaos_seeds / sizeof chaos_seeds[0]));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite_cases(world_suite(), world_cases); }
