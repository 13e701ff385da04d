/*
 * The race replay (src/run/replay.c, include/ovl.h "Race replay"), through
 * the pipeline on the cpu backend: a race shown as wrong numbers, the
 * delay (default and given), races that cannot show and why, race K and
 * its range, the arguments refused, the JSON.
 *
 * A replay runs a racy schedule: its race on the emulated device memory is
 * real (streams run concurrently, as a GPU's do), so a ThreadSanitizer
 * build would rightly report it. Reports are off for this suite only
 * (__tsan_default_options below; tests/lib.sh does the same per run).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "ovl.h"

const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "report_bugs=0"; }

#define BOTH_MODES (OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC))
#define ASYNC OVL_MODE_BIT(OVL_MODE_ASYNC)

/* No c_wait_compute: the allreduce may read c before calc writes it; in
 * async form only (line 2 writes c on calc, line 3 allreduces it). */
static const char racy_text[] =
    "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n"
    "c = scale(x, scale=3.0)\n"
    "c_allreduce_sum(c, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n"
    "fetch(c)\n";

/* The same with c_wait_compute: no race. */
static const char clean_text[] =
    "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n"
    "c = scale(x, scale=3.0)\n"
    "c_wait_compute(c, ring_id=0)\n"
    "c_allreduce_sum(c, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n"
    "fetch(c)\n";

/* Two races on user streams, in every form: t is read on calc while side
 * writes it, and nothing fetched comes from t (race 1); w is written on
 * calc and on side with the same values (race 2). */
static const char quiet_text[] =
    "x = data(shape=[32], dtype=float32, init=uniform, seed=3)\n"
    "t = scale(x, scale=5.0, stream=side)\n"
    "u = scale(t, scale=1.0)\n"
    "w = scale(x, scale=7.0)\n"
    "w = scale(x, scale=7.0, stream=side)\n"
    "stream_sync(w, stream=side)\n"
    "fetch(w)\n";

/* The racy one with nothing fetched. */
static const char nofetch_text[] =
    "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n"
    "c = scale(x, scale=3.0)\n"
    "c_allreduce_sum(c, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n";

static ovl_program *parse(const char *text, const char *name) {
  return tu_parse(text, name, 2);
}

static ovl_world *make_world(double timeout_s) {
  return tu_cpu_world(2, timeout_s);
}

static ovl_pipeline_opts replay_opts(unsigned modes, long which) {
  ovl_pipeline_opts o = {.size = sizeof o, .modes = modes, .races = 1, .run = 0,
                         .rtol = 1e-5, .atol = 1e-6, .replay = which};
  return o;
}

static ovl_report *replay_ok(ovl_world *w, const ovl_program *p,
                             const ovl_pipeline_opts *o) {
  ovl_report *r = NULL;
  ovl_error err = {0};
  ovl_status st = ovl_pipeline_run(w, p, o, &r, &err);
  ck_assert_msg(st == OVL_OK, "pipeline: %s", err.msg);
  ck_assert_ptr_nonnull(r);
  return r;
}

/* The race shows: the allreduce ran before c was written (on the NaN of a
 * fresh buffer), and the late write left 3x where the sum is expected. */
START_TEST(replay_shows_the_race) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(racy_text, "racy.sched");
  ovl_pipeline_opts o = replay_opts(BOTH_MODES, OVL_REPLAY_ALL);
  ovl_report *r = replay_ok(w, p, &o);
  ovl_report_replay rp;
  ovl_report_mode m;
  const ovl_replay *x;

  /* sync: no races, nothing replayed, nothing run. */
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), 0);
  ck_assert_uint_eq(rp.n, 0);
  ck_assert_int_eq(rp.plain_ran, 0);
  ck_assert(isnan(rp.delay_us));
  /* async: its one race, shown. */
  ck_assert_int_eq(ovl_report_replay_get(r, 1, &rp), 0);
  ck_assert_uint_eq(rp.n, 1);
  ck_assert_int_eq(rp.plain_ran, 1);
  ck_assert(rp.plain_s > 0);
  ck_assert_int_eq(rp.plain_checked, 128);
  ck_assert_double_eq(rp.delay_us,
                      fmax(OVL_REPLAY_MIN_DELAY_US, 4 * rp.plain_s * 1e6));
  x = &rp.replays[0];
  ck_assert_uint_eq(x->race, 0);
  ck_assert_int_eq(x->shown, 1);
  ck_assert_ptr_null(x->why);
  ck_assert_int_eq(x->line, 2);
  ck_assert_int_eq(x->stream, 0);
  ck_assert_str_eq(x->stream_name, "calc");
  ck_assert_uint_eq(x->op, 0);
  ck_assert_double_eq(x->delay_us, rp.delay_us);
  ck_assert_int_eq(x->rank, 0);
  ck_assert_str_eq(x->var, "c");
  ck_assert_uint_eq(x->fetch_index, 0);
  ck_assert_int_eq(x->index, 0);
  /* 3x on each rank (the late write) where the sum of 3x is expected. */
  ck_assert(fabs(x->expected - 2 * x->got) <= 1e-5 * fabs(x->expected));
  ck_assert_int_eq(x->mismatched, 128);
  ck_assert_int_eq(x->checked, 128);
  ck_assert_int_eq(x->other_mismatched, 0);
  /* No timed run: the report's modes did not run. */
  ovl_report_mode_get(r, 1, &m);
  ck_assert_ptr_null(m.res);
  ck_assert_int_eq(ovl_report_replay_get(r, 2, &rp), -1);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* A delay given is the delay used. */
START_TEST(replay_delay_given) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(racy_text, "racy.sched");
  ovl_pipeline_opts o = replay_opts(ASYNC, 1);
  ovl_report *r;
  ovl_report_replay rp;
  o.replay_delay_us = 30000;
  r = replay_ok(w, p, &o);
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), 0);
  ck_assert_double_eq(rp.delay_us, 30000);
  ck_assert_uint_eq(rp.n, 1);
  ck_assert_double_eq(rp.replays[0].delay_us, 30000);
  ck_assert_int_eq(rp.replays[0].shown, 1);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* Races that cannot show, each with why: nothing fetched comes from t;
 * w's two writes agree. --replay=2 replays race 2 alone. */
START_TEST(replay_not_shown_says_why) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(quiet_text, "quiet.sched");
  ovl_pipeline_opts o = replay_opts(ASYNC, OVL_REPLAY_ALL);
  ovl_report *r = replay_ok(w, p, &o);
  ovl_report_replay rp;

  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), 0);
  ck_assert_uint_eq(rp.n, 2);
  ck_assert_int_eq(rp.plain_mismatched, 0);
  ck_assert_int_eq(rp.replays[0].shown, 0);
  ck_assert_str_eq(rp.replays[0].why,
                   "the numbers matched (nothing fetched is computed from "
                   "'t' after line 2)");
  ck_assert_str_eq(rp.replays[0].stream_name, "side");
  ck_assert(!isnan(rp.replays[0].delay_us));
  ck_assert_int_eq(rp.replays[0].checked, 0);
  ck_assert_int_eq(rp.replays[1].shown, 0);
  ck_assert_str_eq(rp.replays[1].why,
                   "the numbers matched (the two accesses in the other "
                   "order gave the same fetched values)");
  ck_assert_str_eq(rp.replays[1].stream_name, "calc");
  ck_assert_int_eq(rp.replays[1].line, 4);
  ck_assert_int_eq(rp.replays[1].checked, 64);
  ovl_report_free(r);

  o.replay = 2;
  r = replay_ok(w, p, &o);
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), 0);
  ck_assert_uint_eq(rp.n, 1);
  ck_assert_uint_eq(rp.replays[0].race, 1);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* Forms whose numbers are not compared: not replayed, nothing run. */
START_TEST(replay_not_compared) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(nofetch_text, "nofetch.sched");
  ovl_pipeline_opts o = replay_opts(ASYNC, OVL_REPLAY_ALL);
  ovl_report *r = replay_ok(w, p, &o);
  ovl_report_replay rp;
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), 0);
  ck_assert_uint_eq(rp.n, 1);
  ck_assert_int_eq(rp.plain_ran, 0);
  ck_assert(isnan(rp.delay_us));
  ck_assert_int_eq(rp.replays[0].shown, 0);
  ck_assert(isnan(rp.replays[0].delay_us));
  ck_assert_str_eq(rp.replays[0].why, "not replayed (nothing is fetched)");
  ovl_report_free(r);
  ovl_program_free(p);

  p = parse(quiet_text, "quiet.sched");
  o.modes = OVL_MODE_BIT(OVL_MODE_COMP);
  r = replay_ok(w, p, &o);
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), 0);
  ck_assert_uint_eq(rp.n, 2);
  ck_assert_str_eq(rp.replays[1].why,
                   "not replayed (comp-only numbers are not compared with "
                   "the reference)");
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* Race K that no form has: refused before anything runs, with what there
 * is. */
START_TEST(replay_race_out_of_range) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(racy_text, "racy.sched"), *q;
  ovl_pipeline_opts o = replay_opts(BOTH_MODES, 2);
  ovl_report *r = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_str_eq(err.msg, "replay: there is no race 2 to replay: the sync "
                            "form has no races; the async form has race 1 "
                            "only");
  q = parse(quiet_text, "quiet.sched");
  o.replay = 3;
  ck_assert_int_eq(ovl_pipeline_run(w, q, &o, &r, &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "the async form has races 1 to 2"));
  ovl_program_free(q);
  ovl_program_free(p);
  p = parse(clean_text, "clean.sched");
  o.replay = 1;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "replay: there is no race 1 to replay: no races "
                            "were found");
  /* Every race of a clean schedule: none, and that is fine. */
  o.replay = OVL_REPLAY_ALL;
  r = replay_ok(w, p, &o);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

START_TEST(replay_bad_arguments) {
  ovl_world *w = make_world(1);
  ovl_program *p = parse(racy_text, "racy.sched");
  ovl_pipeline_opts o = replay_opts(ASYNC, OVL_REPLAY_ALL);
  ovl_report *r = NULL;
  ovl_error err = {0};
  ovl_report_replay rp;

  /* A world is needed, and the race check. */
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_EINVAL);
  o.races = 0;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "replay needs the race check"));
  o.races = 1;
  o.replay = -5;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  o.replay = 1;
  o.replay_delay_us = NAN;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  /* Not shorter than the world's timeout (1 s). */
  o.replay_delay_us = 1e6;
  ck_assert_int_eq(ovl_pipeline_run(w, p, &o, &r, &err), OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "not shorter than the timeout"));
  ck_assert_ptr_null(r);
  /* A report without replay has none to give. */
  o.replay = 0;
  o.replay_delay_us = 0;
  r = replay_ok(NULL, p, &o);
  ck_assert_int_eq(ovl_report_replay_get(r, 0, &rp), -1);
  ck_assert_uint_eq(rp.n, 0);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The races JSON gets "replay" next to "modes". */
START_TEST(replay_as_json) {
  ovl_world *w = make_world(10);
  ovl_program *p = parse(racy_text, "racy.sched");
  ovl_pipeline_opts o = replay_opts(BOTH_MODES, OVL_REPLAY_ALL);
  ovl_report *r = replay_ok(w, p, &o);
  ovl_error err = {0};
  char *text = NULL;
  size_t len = 0;
  ck_assert_int_eq(ovl_report_races_json(r, &text, &len, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(text, ", \"replay\": {\"backend\": \"cpu\", "
                                     "\"ranks\": 2, \"modes\": {\"sync\": "
                                     "{\"plain\": null, \"delay_us\": null, "
                                     "\"races\": []}, \"async\": {\"plain\": "
                                     "{\"time_s\": "));
  ck_assert_ptr_nonnull(strstr(text, "\"races\": [{\"race\": 1, \"shown\": "
                                     "true, \"delay\": {\"stream\": \"calc\", "
                                     "\"op\": 0, \"line\": 2, \"us\": "));
  ck_assert_ptr_nonnull(strstr(text, "\"rank\": 0, \"var\": \"c\", "
                                     "\"index\": 0, \"at\": \"[0]\", "
                                     "\"got\": "));
  ck_assert_ptr_nonnull(strstr(text, "\"mismatched\": 128, \"checked\": "
                                     "128, \"other_mismatched\": 0, "
                                     "\"why\": null}]}}, \"count\": 1, "
                                     "\"shown\": 1}}\n"));
  ck_assert_uint_eq(len, strlen(text));
  free(text);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

static Suite *replay_suite(void) {
  Suite *s = suite_create("replay");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, replay_shows_the_race);
  tcase_add_test(tc, replay_delay_given);
  tcase_add_test(tc, replay_not_shown_says_why);
  tcase_add_test(tc, replay_not_compared);
  tcase_add_test(tc, replay_race_out_of_range);
  tcase_add_test(tc, replay_bad_arguments);
  tcase_add_test(tc, replay_as_json);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(replay_suite()); }
