/*
 * Calibration (ovl_calibrate, src/pipeline/calibrate.c) on the cpu
 * backend: a profile of a small schedule that loads back
 * (ovl__profile_load) with every kernel, the host's costs, a fit and
 * the contention of each kind of communication and the schedule's
 * signature, and that the model backend predicts the schedule with; the
 * refusals (a model world, options without their size, a program of
 * another rank count). Small sizes and few iterations: a few seconds.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/model.h"
#include "check_util.h"
#include "ovl.h"

/* A scale, then its allreduce on the comm stream, ordered both ways. */
static const char seed_text[] =
    "x = data(shape=[16, 16], dtype=float32, init=uniform, seed=1)\n"
    "y = scale(x, scale=2.0, bias=0.5)\n"
    "c_wait_compute(y, ring_id=0)\n"
    "c_allreduce_sum(y, ring_id=0, use_calc_stream=false)\n"
    "c_wait_comm(y, ring_id=0)\n"
    "fetch(y)\n";

/* Every other kind of communication, a matmul and two elementwise ops
 * (the add twice: one kernel). */
static const char kinds_text[] =
    "a = data(shape=[8, 4], dtype=float32, init=uniform, seed=1)\n"
    "b = data(shape=[4, 6], dtype=float32, init=uniform, seed=2)\n"
    "m = matmul_v2(a, b)\n"
    "s = elementwise_add(a, a)\n"
    "s = elementwise_add(s, a)\n"
    "c_broadcast(m, root=1, ring_id=0, use_calc_stream=true)\n"
    "g = c_allgather(s, ring_id=0, use_calc_stream=true)\n"
    "r = c_reducescatter(g, ring_id=0, use_calc_stream=true)\n"
    "c_reduce_max(m, root=0, ring_id=0, use_calc_stream=true)\n"
    "t = alltoall(s, ring_id=0, use_calc_stream=true)\n"
    "barrier(ring_id=0)\n"
    "send_v2(m, peer=1, ranks=[0], ring_id=0, use_calc_stream=true)\n"
    "q = recv_v2(peer=0, out_shape=[8, 6], ranks=[1], ring_id=0, "
    "use_calc_stream=true)\n";

/* The progress lines, joined. */
typedef struct {
  char text[16384];
  int n;
} progress_log;

static void on_progress(void *ctx, const char *what) {
  progress_log *l = ctx;
  size_t len = strlen(l->text);
  snprintf(l->text + len, sizeof l->text - len, "%s\n", what);
  l->n++;
}

/* `prog` calibrated on a cpu world of 2 ranks, loaded back into *p. */
static void calibrate(const ovl_program *prog, progress_log *log,
                      ovl__profile *p, char path[64]) {
  ovl_world *w = tu_cpu_world(2, 30);
  ovl_calibrate_opts co = OVL_OPTS_INIT(ovl_calibrate_opts);
  ovl_error err = {0};
  char *json = NULL;
  ovl_status st;
  FILE *f;
  int fd;
  co.iters = 2;
  co.warmup = 1;
  co.budget_s = 20;
  co.progress = on_progress;
  co.ctx = log;
  st = ovl_calibrate(w, prog, &co, &json, &err);
  ck_assert_msg(st == OVL_OK, "calibrate: %s", err.msg);
  ck_assert_ptr_nonnull(json);
  ovl_world_free(w);
  snprintf(path, 64, "/tmp/ovl-cal-XXXXXX");
  fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  f = fdopen(fd, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fputs(json, f) >= 0, 1);
  ck_assert_int_eq(fclose(f), 0);
  free(json);
  st = ovl__profile_load(path, p, &err);
  ck_assert_msg(st == OVL_OK, "load: %s", err.msg);
}

static void check_contention(const ovl__profile *p, int kind) {
  for (int kc = 0; kc < OVL__NKC; kc++) {
    ck_assert_msg(p->kernel_slow[kind][kc] >= 1, "%s kernel_slow[%d] %g",
                  ovl__comm_kind_name(kind), kc, p->kernel_slow[kind][kc]);
    ck_assert_msg(p->comm_slow[kind][kc] >= 1, "%s comm_slow[%d] %g",
                  ovl__comm_kind_name(kind), kc, p->comm_slow[kind][kc]);
  }
}

START_TEST(profile_of_a_schedule) {
  ovl_program *prog = tu_parse(seed_text, "sub/cal.sched", 2);
  progress_log log = {{0}, 0};
  ovl__profile p;
  char path[64];
  calibrate(prog, &log, &p, path);

  ck_assert_str_eq(p.schedule, "cal.sched");
  ck_assert_int_eq(p.nranks, 2);
  ck_assert_int_eq(p.ndevices, 2);
  ck_assert_str_eq(p.device, "emulated (cpu)");
  ck_assert_int_eq(strlen(p.date), 20);
  ck_assert(p.have_sig);
  ck_assert_uint_eq(p.program_sig, ovl__program_sig(prog));
  /* The one kernel, by its shape (as the model asks for it). */
  ck_assert_uint_eq(p.nkernels, 1);
  ck_assert(!p.kernels[0].matmul);
  ck_assert_int_eq(p.kernels[0].ew, OVL_EW_SCALE);
  ck_assert_int_eq(p.kernels[0].numel, 256);
  ck_assert(p.kernels[0].s > 0);
  for (int k = 0; k < OVL__NHOST; k++)
    ck_assert_msg(p.host.op_s[k] > 0, "host %s: %g", ovl__host_kind_name(k),
                  p.host.op_s[k]);
  ck_assert(p.host.sync_s >= 0);
  /* cpu: no graphs. */
  ck_assert(p.host.graph_launch_s == 0 && p.host.graph_gap_s == 0 && p.host.gap_s == 0);
  ck_assert(p.fit[OVL_COLL_ALLREDUCE].have);
  ck_assert_int_ge(p.fit[OVL_COLL_ALLREDUCE].points, 2);
  ck_assert(p.fit[OVL_COLL_ALLREDUCE].lat_s >= 0);
  ck_assert(p.fit[OVL_COLL_ALLREDUCE].bw > 0);
  for (int k = 0; k < OVL__NCOMM; k++)
    if (k != OVL_COLL_ALLREDUCE)
      ck_assert_msg(!p.fit[k].have, "a fit of %s", ovl__comm_kind_name(k));
  check_contention(&p, OVL_COLL_ALLREDUCE);
  ck_assert_msg(strstr(log.text, "kernel scale float32 [256]\n") != NULL,
                "%s", log.text);
  ck_assert_msg(strstr(log.text, "allreduce float32 [256] (1024 B) on "
                                 "calc\n") != NULL,
                "%s", log.text);

  /* The model predicts the schedule with it. */
  {
    ovl_world_opts wo = {.size = sizeof wo, .backend = "model", .nranks = 2};
    ovl_run_opts ro = {.size = sizeof ro, .iters = 1};
    ovl_world *mw = NULL;
    ovl_result *res = NULL;
    ovl_error err = {0};
    ck_assert_int_eq(ovl_world_create(&wo, &mw, &err), OVL_OK);
    ck_assert_msg(ovl_world_set(mw, "profile", path, &err) == OVL_OK, "%s",
                  err.msg);
    ck_assert_msg(ovl_world_run(mw, prog, &ro, &res, &err) == OVL_OK, "%s",
                  err.msg);
    ck_assert(ovl_result_predicted(res));
    ck_assert(ovl_result_times(res)[0] > 0);
    ovl_result_free(res);
    ovl_world_free(mw);
  }
  ovl__profile_free(&p);
  unlink(path);
  ovl_program_free(prog);
}
END_TEST

START_TEST(every_kind_of_communication) {
  ovl_program *prog = tu_parse(kinds_text, "kinds.sched", 2);
  progress_log log = {{0}, 0};
  ovl__profile p;
  char path[64];
  bool seen[2] = {false, false};
  calibrate(prog, &log, &p, path);
  /* The matmul and the add (twice, one kernel). */
  ck_assert_uint_eq(p.nkernels, 2);
  for (size_t i = 0; i < p.nkernels; i++) {
    const ovl__mkernel *k = &p.kernels[i];
    ck_assert(k->s > 0);
    if (k->matmul && k->m == 8 && k->n == 6 && k->k == 4)
      seen[0] = true;
    else if (!k->matmul && k->ew == OVL_EW_ADD && k->numel == 32)
      seen[1] = true;
  }
  ck_assert_msg(seen[0] && seen[1], "%s", log.text);
  for (int k = 0; k < OVL__NCOMM; k++) {
    if (k == OVL_COLL_ALLREDUCE) {
      ck_assert(!p.fit[k].have);
      continue;
    }
    ck_assert_msg(p.fit[k].have, "no fit of %s", ovl__comm_kind_name(k));
    if (k != OVL_COLL_BARRIER)
      check_contention(&p, k);
  }
  /* The barrier moves nothing: one point, its latency. */
  ck_assert_int_eq(p.fit[OVL_COLL_BARRIER].points, 1);
  ck_assert(p.kernel_slow[OVL_COLL_BARRIER][0] == 0);
  /* The program's own matmul is the one beside communication. */
  ck_assert_msg(strstr(log.text, "beside matmul_v2") != NULL, "%s",
                log.text);
  ck_assert_msg(strstr(log.text, "kernel matmul float32 8x6x4\n") != NULL,
                "%s", log.text);
  ck_assert_msg(strstr(log.text, "p2p float32 [48] (192 B) on calc\n") !=
                    NULL,
                "%s", log.text);
  ovl__profile_free(&p);
  unlink(path);
  ovl_program_free(prog);
}
END_TEST

START_TEST(refusals) {
  ovl_program *prog = tu_parse(seed_text, "cal.sched", 2);
  ovl_program *three = tu_parse(seed_text, "cal.sched", 3);
  ovl_world *w = tu_cpu_world(2, 30);
  ovl_world_opts wo = {.size = sizeof wo, .backend = "model", .nranks = 2};
  ovl_calibrate_opts co = OVL_OPTS_INIT(ovl_calibrate_opts);
  ovl_calibrate_opts zero = {0};
  ovl_world *mw = NULL;
  ovl_error err = {0};
  char *json = (char *)"x";

  /* A model world: it predicts, it measures nothing. */
  ck_assert_int_eq(ovl_world_create(&wo, &mw, &err), OVL_OK);
  ck_assert_int_eq(ovl_calibrate(mw, prog, &co, &json, &err), OVL_EINVAL);
  ck_assert_ptr_null(json);
  ck_assert_msg(strstr(err.msg, "real backend (cpu, cuda)") != NULL, "%s",
                err.msg);
  /* Options made without their size. */
  ck_assert_int_eq(ovl_calibrate(w, prog, &zero, &json, &err), OVL_EINVAL);
  ck_assert_msg(strstr(err.msg, "ovl_calibrate_opts: its size is 0") !=
                    NULL,
                "%s", err.msg);
  co.iters = -1;
  ck_assert_int_eq(ovl_calibrate(w, prog, &co, &json, &err), OVL_EINVAL);
  ck_assert_msg(strstr(err.msg, "iters (-1)") != NULL, "%s", err.msg);
  co.iters = 0;
  /* A program bound for another rank count. */
  ck_assert_int_eq(ovl_calibrate(w, three, &co, &json, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "calibrate: the program is bound for 3 ranks, "
                            "the world has 2");
  ck_assert_int_eq(ovl_calibrate(NULL, prog, &co, &json, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_calibrate(w, prog, &co, NULL, &err), OVL_EINVAL);
  ck_assert_ptr_null(json);
  ovl_world_free(mw);
  ovl_world_free(w);
  ovl_program_free(three);
  ovl_program_free(prog);
}
END_TEST

/* A measurement that fails says which it was: here the first, on a
 * world that an earlier run aborted (rank 1 late to a collective). */
START_TEST(a_failed_measurement_is_named) {
  ovl_program *hang = tu_parse(
      "x = data(shape=[16], init=fill, value=1.0)\n"
      "delay(us=1000000, stream=calc, ranks=[1])\n"
      "c_allreduce_sum(x, ring_id=0, use_calc_stream=true)\n",
      "hang.sched", 2);
  ovl_program *prog = tu_parse(seed_text, "cal.sched", 2);
  ovl_world *w = tu_cpu_world(2, 0.2);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1};
  ovl_result *res = NULL;
  ovl_error err = {0};
  char *json = NULL;
  ck_assert_int_ne(ovl_world_run(w, hang, &ro, &res, &err), OVL_OK);
  ck_assert_int_eq(ovl_calibrate(w, prog, NULL, &json, &err), OVL_EINVAL);
  ck_assert_ptr_null(json);
  ck_assert_msg(strncmp(err.msg,
                        "calibrate: kernel scale float32 [256]: an earlier "
                        "run on this world failed",
                        strlen("calibrate: kernel scale float32 [256]: an "
                               "earlier run on this world failed")) == 0,
                "%s", err.msg);
  ovl_world_free(w);
  ovl_program_free(prog);
  ovl_program_free(hang);
}
END_TEST

static Suite *calibrate_suite(void) {
  Suite *s = suite_create("calibrate");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, profile_of_a_schedule);
  tcase_add_test(tc, every_kind_of_communication);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, a_failed_measurement_is_named);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(calibrate_suite()); }
