/*
 * Reports that count each bug once, name both ends, and write the fix
 * (issue 24): findings across forms (a bug in several forms is one), both
 * ends of a deadlock, a root that depends on rank, the fix hints of
 * mismatches and deadlocks (and the edits of the text they are), the
 * fixed schedule (ovl_schedule_fix) and its diff. tests/fix_apply.sh
 * runs the tool's --fix on every bad schedule.
 *
 * timelines_mark_the_races runs a racy schedule (and its replay): its race
 * on the emulated device memory is real, so a ThreadSanitizer build would
 * rightly report it. Reports are off for this suite (as in test_replay.c).
 */
#include <math.h>

#include "check/check.h"
#include "check/edit.h"
#include "check_util.h"

const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "report_bugs=0"; }

#define BOTH (OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC))

/* The pipeline's checks of `text` (2 ranks unless nranks), given the
 * schedule so that every hint is re-checked. *s and *p outlive the
 * report. */
static ovl_report *checks(const char *text, int nranks, unsigned modes,
                          ovl_schedule **s, ovl_program **p) {
  ovl_bind_opts bo = {.size = sizeof bo, .nranks = nranks};
  ovl_pipeline_opts o = {
      .size = sizeof o, .modes = modes, .races = 1, .bind = &bo};
  ovl_report *r = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_schedule_parse(text, strlen(text), "f.sched", s, &err) ==
                    OVL_OK,
                "%s", err.msg);
  ck_assert_msg(ovl_schedule_bind(*s, &bo, p, &err) == OVL_OK, "%s",
                err.msg);
  o.schedule = *s;
  ck_assert_msg(ovl_pipeline_run(NULL, *p, &o, &r, &err) == OVL_OK, "%s",
                err.msg);
  return r;
}

static ovl_report_mode mode_of(const ovl_report *r, size_t i) {
  ovl_report_mode m;
  ck_assert_int_eq(ovl_report_mode_get(r, i, &m), 0);
  return m;
}

/* A race between two user streams: the same in both forms. */
static const char user_streams[] =
    "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n" /* 1 */
    "c = scale(x, scale=3.0, stream=side)\n"                     /* 2 */
    "y = scale(c, scale=2.0, stream=copy)\n"                     /* 3 */
    "stream_sync(y, stream=copy)\n"                              /* 4 */
    "fetch(y)\n";                                                /* 5 */

/* Each rank sends first, outside a group, on calc: both forms alike. */
static const char send_send[] =
    "x = data(shape=[16], dtype=float32, init=uniform, seed=0)\n"      /* 1 */
    "y = data(shape=[16], dtype=float32, init=fill, value=0)\n"        /* 2 */
    "# the exchange\n"                                                /* 3 */
    "c_allreduce_sum(x, ring_id=1, use_calc_stream=true)\n"          /* 4 */
    "send_v2(x, peer=1 - rank, ring_id=0, use_calc_stream=true)\n"    /* 5 */
    "y = recv_v2(peer=1 - rank, out_shape=[16], dtype=float32, "
    "ring_id=0, use_calc_stream=true)\n"                              /* 6 */
    "fetch(y)\n";                                                     /* 7 */

/* ------------------------------------------------------------------ */
/* Across forms                                                        */
/* ------------------------------------------------------------------ */

START_TEST(a_race_in_both_forms_is_one) {
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_report *r = checks(user_streams, 2, BOTH, &s, &p);
  ovl_report_summary sum;
  ovl_report_mode m0 = mode_of(r, 0), m1 = mode_of(r, 1);
  char *t = NULL;
  size_t len;
  ovl_error err = {0};
  ck_assert_uint_eq(ovl_races_count(m0.races), 1);
  ck_assert_uint_eq(ovl_races_count(m1.races), 1);
  ck_assert_uint_eq(ovl_races_forms(m0.races, 0), BOTH);
  ck_assert_uint_eq(ovl_races_forms(m1.races, 0), BOTH);
  ck_assert_uint_eq(ovl_races_forms(m1.races, 1), 0);
  ovl_report_summary_get(r, &sum);
  ck_assert_uint_eq(sum.races, 1);
  ck_assert_str_eq(ovl_report_result(r), "FAIL: races");
  /* The two forms read the same: printed once. */
  ck_assert_int_eq(ovl_report_same_findings(r, 0), 0);
  ck_assert_int_eq(ovl_report_same_findings(r, 1), 0);
  ck_assert_int_eq(ovl_report_same_findings(r, 2), -1);
  ck_assert_int_eq(ovl_races_format(m1.races, p, 0, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, "\n  found in the sync and async forms\n"));
  free(t);
  ck_assert_int_eq(ovl_report_races_json(r, &t, &len, &err), OVL_OK);
  ck_assert_msg(tu_json_ok(t), "%s", t);
  ck_assert_ptr_nonnull(strstr(t, "\"forms\":[\"sync\",\"async\"]"));
  ck_assert_ptr_nonnull(strstr(t, "\"findings\": {\"races\": 1, \"mismatches\": "
                                  "0, \"deadlocks\": 0, \"same\": [[\"sync\", "
                                  "\"async\"]]}"));
  free(t);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
  /* One form alone: no "found in" line, the race counted once. */
  r = checks(user_streams, 2, OVL_MODE_BIT(OVL_MODE_ASYNC), &s, &p);
  m0 = mode_of(r, 0);
  ck_assert_uint_eq(ovl_races_forms(m0.races, 0), OVL_MODE_BIT(OVL_MODE_ASYNC));
  ck_assert_int_eq(ovl_races_format(m0.races, p, 0, &t, &err), OVL_OK);
  ck_assert_ptr_null(strstr(t, "found in"));
  free(t);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
}
END_TEST

/* A race of the async form only (the sync form puts both on calc): the
 * forms read differently, and its section says where it is. */
START_TEST(forms_that_differ_print_apart) {
  static const char text[] =
      "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n"
      "c = scale(x, scale=3.0)\n"
      "c_allreduce_sum(c, ring_id=0)\n"
      "c_wait_comm(c, ring_id=0)\n"
      "fetch(c)\n";
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_report *r = checks(text, 2, BOTH, &s, &p);
  ovl_report_mode m1 = mode_of(r, 1);
  ovl_report_summary sum;
  char *t = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_report_same_findings(r, 1), 1);
  ck_assert_uint_eq(ovl_races_forms(m1.races, 0),
                    OVL_MODE_BIT(OVL_MODE_ASYNC));
  ck_assert_int_eq(ovl_races_format(m1.races, p, 0, &t, &err), OVL_OK);
  ck_assert_ptr_null(strstr(t, "found in"));
  free(t);
  ovl_report_summary_get(r, &sum);
  ck_assert_uint_eq(sum.races, 1);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
}
END_TEST

/* One deadlock in both forms: one bug; both ends named. */
START_TEST(a_deadlock_in_both_forms_is_one) {
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_report *r = checks(send_send, 2, BOTH, &s, &p);
  ovl_report_summary sum;
  ovl_report_mode m0 = mode_of(r, 0), m1 = mode_of(r, 1);
  ovl_deadlock_match mt;
  ovl_error err = {0};
  char *t = NULL;
  ovl_report_summary_get(r, &sum);
  ck_assert_uint_eq(sum.deadlocks, 1);
  ck_assert_str_eq(ovl_report_not_run(r), "deadlocks found: a run would hang");
  ck_assert_uint_eq(ovl_deadlocks_forms(m0.deadlocks, 0), BOTH);
  ck_assert_uint_eq(ovl_deadlocks_forms(m1.deadlocks, 0), BOTH);
  ck_assert_int_eq(ovl_report_same_findings(r, 1), 0);
  /* Rank 0's send waits to match rank 1's receive, which rank 1 issues
   * only after its own send (its calc is blocked there). */
  ck_assert_int_eq(ovl_deadlocks_match(m1.deadlocks, 0, 0, &mt), 0);
  ck_assert_int_eq(mt.rank, 1);
  ck_assert_str_eq(mt.op_name, "recv_v2");
  ck_assert_int_eq(mt.line, 6);
  ck_assert_int_eq(mt.after_line, 5);
  ck_assert_int_eq(mt.after_stream, 0);
  ck_assert_int_eq(ovl_deadlocks_format(m1.deadlocks, p, 0, &t, &err),
                   OVL_OK);
  ck_assert_ptr_nonnull(
      strstr(t, "\n  rank 0 at line 5 (send_v2 to rank 1, ring 0) waits to "
                "match rank 1's recv_v2 at f.sched:6, issued only after line "
                "5 (send_v2, where that rank's calc is blocked)\n"));
  ck_assert_ptr_nonnull(
      strstr(t, "\n  fix (checked): put lines 5-6 in one group\n"));
  free(t);
  ck_assert_int_eq(ovl_deadlocks_format(m1.deadlocks, p, 1, &t, &err),
                   OVL_OK);
  ck_assert_msg(tu_json_ok(t), "%s", t);
  ck_assert_ptr_nonnull(strstr(
      t, "\"waits_for\":{\"rank\":1,\"op\":\"recv_v2\",\"line\":6,\"col\":5,"
         "\"after_line\":5,\"after_op\":\"send_v2\",\"after_stream\":"
         "\"calc\"}"));
  ck_assert_ptr_nonnull(strstr(t, "\"forms\":[\"sync\",\"async\"],\"fix\":"
                                  "\"put lines 5-6 in one group\","
                                  "\"fix_checked\":true,\"fix_why\":null}"));
  free(t);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A root that depends on rank                                         */
/* ------------------------------------------------------------------ */

START_TEST(a_root_from_rank) {
  static const char differ[] =
      "w = data(shape=[16], dtype=float32, init=uniform, seed=0, "
      "per_rank=true)\n"
      "c_broadcast(w, root=rank % 2, ring_id=0, use_calc_stream=true)\n"
      "fetch(w)\n";
  static const char agree[] =
      "w = data(shape=[16], dtype=float32, init=uniform, seed=0, "
      "per_rank=true)\n"
      "c_broadcast(w, root=nranks - 1 + rank / nranks, ring_id=0)\n"
      "c_wait_comm(w, ring_id=0)\n"
      "c_reduce_sum(w, root=(rank + nranks - rank) % nranks, ring_id=0, "
      "use_calc_stream=true)\n"
      "fetch(w)\n";
  ovl_program *p = tu_parse(differ, "r.sched", 4);
  ovl_mismatches *m = NULL;
  ovl_mismatch_finding f;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_mismatch_check(p, &m, &err), OVL_OK);
  ck_assert_uint_eq(ovl_mismatches_count(m), 1);
  ck_assert_int_eq(ovl_mismatches_get(m, 0, &f), 0);
  ck_assert_uint_eq(f.differs, OVL_DIFFERS_ROOT);
  for (int r = 0; r < 4; r++)
    ck_assert_int_eq(f.sides[r].root, r % 2);
  ck_assert_str_eq(f.message,
                   "ring 0 collective #1: ranks 0, 2 issue c_broadcast of "
                   "'w' (float32, 16 elements, root 0) at r.sched:2:1, ranks "
                   "1, 3 issue c_broadcast of 'w' (float32, 16 elements, "
                   "root 1) at r.sched:2:1; they differ in root (the same "
                   "size: a run would mix buffers silently)");
  ovl_mismatches_free(m);
  ovl_program_free(p);
  /* Agreeing: no mismatch, and it runs right (the root's values on every
   * rank, the reduction on rank 0 alone). */
  {
    ovl_world *w = tu_cpu_world(3, 10);
    ovl_pipeline_opts o = {
        .size = sizeof o,
        .modes = BOTH,
        .races = 1,
        .run = 1,
        .run_opts = &(ovl_run_opts){.size = sizeof(ovl_run_opts), .iters = 1},
        .rtol = OVL_TOL_DTYPE,
        .atol = OVL_TOL_DTYPE};
    ovl_report *r = NULL;
    ovl_report_summary sum;
    p = tu_parse(agree, "a.sched", 3);
    ck_assert(p->rank_dependent);
    ck_assert_int_eq(ovl__op_root(p, &p->ops[0], 1), 2);
    ck_assert_msg(ovl_pipeline_run(w, p, &o, &r, &err) == OVL_OK, "%s",
                  err.msg);
    ovl_report_summary_get(r, &sum);
    ck_assert_uint_eq(sum.mismatches, 0);
    ck_assert_int_eq(sum.mismatched, 0);
    ck_assert_str_eq(ovl_report_result(r), "PASS");
    ovl_report_free(r);
    ovl_program_free(p);
    ovl_world_free(w);
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Hints of mismatches and deadlocks                                   */
/* ------------------------------------------------------------------ */

START_TEST(mismatch_hints) {
  /* The last rank skips h inside a loop: widen its ranks=. */
  static const char skipped[] =
      "g = data(shape=[16], dtype=float32, init=uniform, seed=0)\n"
      "h = data(shape=[16], dtype=float32, init=uniform, seed=1)\n"
      "repeat 2 {\n"
      "  c_allreduce_sum(g, ring_id=0, use_calc_stream=true)\n"
      "  c_allreduce_sum(h, ring_id=0, use_calc_stream=true, "
      "ranks=[0:nranks - 1])\n"
      "}\n"
      "fetch(g, h)\n";
  /* A send and its receive of other dtypes: no mechanical fix. */
  static const char dtype[] =
      "x = data(shape=[16], dtype=float32, init=uniform, seed=0)\n"
      "send_v2(x, peer=1, ring_id=0, use_calc_stream=true, ranks=[0])\n"
      "y = recv_v2(peer=0, out_shape=[16], dtype=float64, ring_id=0, "
      "use_calc_stream=true, ranks=[1])\n"
      "fetch(x)\n";
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_report *r = checks(skipped, 2, BOTH, &s, &p);
  const ovl_mismatches *m = ovl_report_mismatches(r);
  ovl_fix_info fi;
  ovl_error err = {0};
  char *t = NULL;
  ck_assert_uint_eq(ovl_mismatches_count(m), 3);
  /* Every one of them, through the first's cause. */
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(ovl_mismatches_fix(m, i, &fi), 0);
    ck_assert_int_eq(fi.checked, 1);
    ck_assert_str_eq(fi.fix, "remove ranks=[0:nranks - 1] from line 5");
    ck_assert_ptr_null(fi.why);
  }
  ck_assert_int_eq(ovl_mismatches_fix(m, 3, &fi), -1);
  ck_assert_int_eq(ovl_mismatches_format(m, p, 1, &t, &err), OVL_OK);
  ck_assert_msg(tu_json_ok(t), "%s", t);
  ck_assert_ptr_nonnull(strstr(t, ",\"fix\":\"remove ranks=[0:nranks - 1] "
                                  "from line 5\",\"fix_checked\":true,"
                                  "\"fix_why\":null}"));
  free(t);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);

  r = checks(dtype, 2, BOTH, &s, &p);
  m = ovl_report_mismatches(r);
  ck_assert_int_eq(ovl_mismatches_fix(m, 0, &fi), 0);
  ck_assert_ptr_null(fi.fix);
  ck_assert_int_eq(fi.checked, 0);
  ck_assert_str_eq(fi.why, "none known (a send and its receive must agree on "
                           "count and dtype)");
  ck_assert_int_eq(ovl_mismatches_format(m, p, 0, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, "\n  fix: none known (a send and its "
                                  "receive must agree on count and dtype)\n"));
  free(t);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);

  /* Without the schedule no hint is made. */
  {
    ovl_mismatches *mm = NULL;
    p = tu_parse(dtype, "d.sched", 2);
    ck_assert_int_eq(ovl_mismatch_check(p, &mm, &err), OVL_OK);
    ck_assert_int_eq(ovl_mismatches_fix(mm, 0, &fi), 0);
    ck_assert_ptr_null(fi.fix);
    ck_assert_ptr_null(fi.why);
    ovl_mismatches_free(mm);
    ovl_program_free(p);
  }
}
END_TEST

/* Two rings in opposite orders through host syncs: move the rank's ring 0
 * collective (and its sync) before its ring 1 one. */
START_TEST(deadlock_hint_moves_a_run) {
  static const char text[] =
      "g = data(shape=[16], dtype=float32, init=uniform, seed=0)\n" /* 1 */
      "h = data(shape=[16], dtype=float32, init=uniform, seed=1)\n" /* 2 */
      "c_wait_compute(g, h, ring_id=0)\n"                           /* 3 */
      "c_wait_compute(g, h, ring_id=1)\n"                           /* 4 */
      "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"                  /* 5 */
      "c_sync_comm_stream(g, ring_id=0, ranks=[0])\n"               /* 6 */
      "c_allreduce_sum(h, ring_id=1)\n"                             /* 7 */
      "c_sync_comm_stream(h, ring_id=1)\n"                          /* 8 */
      "c_allreduce_sum(g, ring_id=0, ranks=[1])\n"                  /* 9 */
      "c_sync_comm_stream(g, ring_id=0, ranks=[1])\n"               /* 10 */
      "fetch(g, h)\n";                                              /* 11 */
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_report *r = checks(text, 2, BOTH, &s, &p);
  ovl_fix_info fi;
  for (size_t i = 0; i < 2; i++) {
    ovl_report_mode m = mode_of(r, i);
    ck_assert_uint_eq(ovl_deadlocks_count(m.deadlocks), 1);
    ck_assert_int_eq(ovl_deadlocks_fix(m.deadlocks, 0, &fi), 0);
    ck_assert_int_eq(fi.checked, 1);
    ck_assert_str_eq(fi.fix, "move lines 9-10 before line 7");
  }
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Edits of the text                                                   */
/* ------------------------------------------------------------------ */

static ovl__edited apply_text(const char *text, const char *hint) {
  ovl__lines L;
  ovl__edit *e = malloc(sizeof *e);
  ovl__edited out;
  char *back;
  ck_assert_ptr_nonnull(e);
  ck_assert(ovl__lines_make(&L, text, strlen(text)));
  ck_assert_msg(ovl__edit_parse(hint, e), "parse: %s", hint);
  back = ovl__edit_text(e);
  ck_assert_str_eq(back, hint);
  free(back);
  ck_assert_int_eq(ovl__edit_apply(&L, e, &out), 0);
  ovl__lines_free(&L);
  free(e);
  return out;
}

START_TEST(edits_of_the_text) {
  static const char text[] = "a\n"
                             "  b(x, ranks=[0:2])\n"
                             "  c(y, ring_id=0)\n"
                             "d";
  ovl__edited e;
  ovl__lines L;
  ovl__edit *x = malloc(sizeof *x);
  e = apply_text(text, "insert p(a) and q(b, k=1) before line 2");
  ck_assert_str_eq(e.text, "a\n  p(a)\n  q(b, k=1)\n  b(x, ranks=[0:2])\n"
                           "  c(y, ring_id=0)\nd\n");
  ck_assert_int_eq(e.nlines, 6);
  ck_assert_int_eq(e.orig[2], 0);
  ck_assert_int_eq(e.orig[4], 2);
  ck_assert_int_eq(e.orig[6], 4);
  ovl__edited_free(&e);
  e = apply_text(text, "put lines 2-3 in one group");
  ck_assert_str_eq(e.text, "a\n  group {\n    b(x, ranks=[0:2])\n"
                           "    c(y, ring_id=0)\n  }\nd\n");
  ck_assert_int_eq(e.orig[3], 2);
  ck_assert_int_eq(e.shift[3], 2);
  ck_assert_int_eq(e.orig[5], 0);
  ovl__edited_free(&e);
  e = apply_text(text, "move lines 2-3 before line 1; delete line 4");
  ck_assert_str_eq(e.text, "  b(x, ranks=[0:2])\n  c(y, ring_id=0)\na\n");
  ck_assert_int_eq(e.orig[1], 2);
  ck_assert_int_eq(e.orig[3], 1);
  ovl__edited_free(&e);
  e = apply_text(text, "remove ranks=[0:2] from line 2; move line 4 "
                       "before line 2");
  ck_assert_str_eq(e.text, "a\nd\n  b(x)\n  c(y, ring_id=0)\n");
  ovl__edited_free(&e);
  /* What does not apply: a line out of range, an attribute not there, a
   * move into itself; text that is no edit. */
  ck_assert(ovl__lines_make(&L, text, strlen(text)));
  ck_assert(ovl__edit_parse("delete line 5", x));
  ck_assert_int_eq(ovl__edit_apply(&L, x, &e), 1);
  ck_assert(ovl__edit_parse("remove ranks=[1] from line 2", x));
  ck_assert_int_eq(ovl__edit_apply(&L, x, &e), 1);
  ck_assert(ovl__edit_parse("move lines 1-3 before line 2", x));
  ck_assert_int_eq(ovl__edit_apply(&L, x, &e), 1);
  ck_assert(!ovl__edit_parse("move line 2 after line 3", x));
  ck_assert(!ovl__edit_parse("insert x() before line", x));
  ck_assert(!ovl__edit_parse("", x));
  ovl__lines_free(&L);
  free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The fixed schedule                                                  */
/* ------------------------------------------------------------------ */

static ovl_fixed *fix_of(const char *text, int nranks, unsigned modes) {
  ovl_schedule *s = NULL;
  ovl_bind_opts bo = {.size = sizeof bo, .nranks = nranks};
  ovl_fixed *f = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_schedule_parse(text, strlen(text), "f.sched", &s,
                                      &err),
                   OVL_OK);
  ck_assert_msg(ovl_schedule_fix(s, &bo, modes, 0, &f, &err) == OVL_OK, "%s",
                err.msg);
  ovl_schedule_free(s);
  return f;
}

START_TEST(fixed_schedule) {
  /* The hint inserts a wait before the write; the later wait of the same
   * kind moves there (its input merged), not duplicated. */
  static const char text[] =
      "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n" /* 1 */
      "c = scale(x, scale=3.0)\n"                                  /* 2 */
      "c_wait_compute(c, ring_id=0)\n"                             /* 3 */
      "s = c_allreduce_sum(c, ring_id=0)\n"                        /* 4 */
      "c = scale(x, scale=5.0)\n"                                  /* 5 */
      "c_wait_comm(s, ring_id=0)\n"                                /* 6 */
      "fetch(s)";                                                  /* 7 */
  ovl_fixed *f = fix_of(text, 2, BOTH);
  uint64_t r, m, d;
  size_t len;
  char *diff = NULL;
  ovl_error err = {0};
  ck_assert_uint_eq(ovl_fixed_count(f), 1);
  ck_assert_str_eq(ovl_fixed_hint(f, 0),
                   "insert c_wait_comm(c, s, ring_id=0) before line 5; "
                   "delete line 6");
  ck_assert_str_eq(ovl_fixed_text(f, &len),
                   "x = data(shape=[64], dtype=float32, init=uniform, "
                   "seed=7)\nc = scale(x, scale=3.0)\n"
                   "c_wait_compute(c, ring_id=0)\n"
                   "s = c_allreduce_sum(c, ring_id=0)\n"
                   "c_wait_comm(c, s, ring_id=0)\n"
                   "c = scale(x, scale=5.0)\nfetch(s)\n");
  ovl_fixed_left(f, &r, &m, &d);
  ck_assert_uint_eq(r + m + d, 0);
  ck_assert_int_eq(ovl_fixed_diff(f, "a/f.sched", "b/f.sched", &diff, &len,
                                  &err),
                   OVL_OK);
  ck_assert_str_eq(diff, "--- a/f.sched\n+++ b/f.sched\n"
                         "@@ -2,6 +2,6 @@\n"
                         " c = scale(x, scale=3.0)\n"
                         " c_wait_compute(c, ring_id=0)\n"
                         " s = c_allreduce_sum(c, ring_id=0)\n"
                         "+c_wait_comm(c, s, ring_id=0)\n"
                         " c = scale(x, scale=5.0)\n"
                         "-c_wait_comm(s, ring_id=0)\n"
                         "-fetch(s)\n"
                         "\\ No newline at end of file\n"
                         "+fetch(s)\n");
  ck_assert_uint_eq(len, strlen(diff));
  free(diff);
  ovl_fixed_free(f);

  /* A deadlock and a mismatch; then nothing to fix. */
  f = fix_of(send_send, 2, BOTH);
  ck_assert_uint_eq(ovl_fixed_count(f), 1);
  ck_assert_str_eq(ovl_fixed_hint(f, 0), "put lines 5-6 in one group");
  ck_assert_ptr_nonnull(strstr(ovl_fixed_text(f, NULL),
                               "\ngroup {\n  send_v2(x, peer=1 - rank"));
  ovl_fixed_left(f, &r, &m, &d);
  ck_assert_uint_eq(r + m + d, 0);
  ovl_fixed_free(f);
  f = fix_of(user_streams, 2, BOTH);
  ck_assert_uint_eq(ovl_fixed_count(f), 1);
  ovl_fixed_free(f);
  {
    static const char clean[] = "x = data(shape=[4])\ny = scale(x)\n"
                                "fetch(y)\n";
    f = fix_of(clean, 2, BOTH);
    ck_assert_uint_eq(ovl_fixed_count(f), 0);
    ck_assert_str_eq(ovl_fixed_text(f, NULL), clean);
    ck_assert_int_eq(ovl_fixed_diff(f, "a", "b", &diff, NULL, &err), OVL_OK);
    ck_assert_str_eq(diff, "--- a\n+++ b\n");
    free(diff);
    ovl_fixed_free(f);
  }
  /* No fix known: what is left is said. */
  {
    static const char dtype[] =
        "x = data(shape=[16], dtype=float32, init=uniform, seed=0)\n"
        "send_v2(x, peer=1, ring_id=0, use_calc_stream=true, ranks=[0])\n"
        "y = recv_v2(peer=0, out_shape=[16], dtype=float64, ring_id=0, "
        "use_calc_stream=true, ranks=[1])\n"
        "fetch(x)\n";
    f = fix_of(dtype, 2, BOTH);
    ck_assert_uint_eq(ovl_fixed_count(f), 0);
    ovl_fixed_left(f, &r, &m, &d);
    ck_assert_uint_eq(m, 1);
    ovl_fixed_free(f);
  }
  ck_assert_int_eq(ovl_schedule_fix(NULL, NULL, BOTH, 0, &f, &err),
                   OVL_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Timelines that show the bug                                         */
/* ------------------------------------------------------------------ */

START_TEST(timelines_mark_the_races) {
  static const char text[] =
      "x = data(shape=[64], dtype=float32, init=uniform, seed=7)\n" /* 1 */
      "c = scale(x, scale=3.0)\n"                                  /* 2 */
      "c_allreduce_sum(c, ring_id=0)\n"                            /* 3 */
      "c_wait_comm(c, ring_id=0)\n"                                /* 4 */
      "fetch(c)\n";                                                /* 5 */
  ovl_world *w = tu_cpu_world(2, 10);
  ovl_program *p = tu_parse(text, "t.sched", 2);
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1, .trace = 1,
                     .trace_iter = -1};
  ovl_pipeline_opts o = {.size = sizeof o, .modes = BOTH, .races = 1,
                         .run = 1, .run_opts = &ro, .rtol = OVL_TOL_DTYPE,
                         .atol = OVL_TOL_DTYPE};
  ovl_report *r = NULL;
  ovl_timeline_run *tl = NULL;
  const ovl_timeline_marks *tm = NULL;
  size_t n = 0, len;
  char *t = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_pipeline_run(w, p, &o, &r, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_report_timelines(r, &tl, &tm, &n, &err), OVL_OK);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(tl[1].mode, OVL_MODE_ASYNC);
  ck_assert_ptr_null(tm[1].label);
  ck_assert_uint_eq(tm[0].nmarks, 0); /* sync: no race */
  ck_assert_uint_eq(tm[1].nmarks, 2);
  ck_assert_int_eq(tm[1].marks[0].race, 1);
  ck_assert_uint_eq(tm[1].marks[0].ranks, 3);
  ck_assert_str_eq(tl[1].prog->ops[tm[1].marks[0].op].def->name, "scale");
  ck_assert_str_eq(tl[1].prog->ops[tm[1].marks[1].op].def->name,
                   "c_allreduce_sum");
  ck_assert_int_eq(ovl_timeline_trace_marked(tl, tm, n, &t, &len, &err),
                   OVL_OK);
  ck_assert_msg(tu_json_ok(t), "%s", t);
  ck_assert_ptr_nonnull(strstr(t, "\"name\":\"scale [race 1]\",\"cname\":"
                                  "\"terrible\""));
  ck_assert_ptr_nonnull(strstr(t, "\"cat\":\"event_wait\""));
  ck_assert_ptr_nonnull(strstr(t, "\"wait\":\"event\""));
  free(t);
  ck_assert_int_eq(ovl_timeline_svg_marked(tl, tm, n, &t, &len, &err),
                   OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, ">race 1</text>"));
  ck_assert_ptr_nonnull(strstr(t, "<rect class=\"rc\" x="));
  ck_assert_ptr_nonnull(strstr(t, "\" y=\"-1\" width="));
  free(t);
  /* Unmarked, as before: no race in the picture (the legend only). */
  ck_assert_int_eq(ovl_timeline_svg(tl, n, &t, &len, &err), OVL_OK);
  ck_assert_ptr_null(strstr(t, ">race 1</text>"));
  ck_assert_ptr_null(strstr(t, "\" y=\"-1\" width="));
  free(t);
  free(tl);
  ovl_report_free(r);

  /* Replayed and traced: one run per race, the accesses marked where
   * they are in the form with its delay. */
  o.run = 0;
  o.replay = OVL_REPLAY_ALL;
  ck_assert_msg(ovl_pipeline_run(w, p, &o, &r, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_report_timelines(r, &tl, &tm, &n, &err), OVL_OK);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(tm[0].label, "async race 1");
  ck_assert_str_eq(tl[0].prog->ops[tm[0].marks[0].op - 1].def->name,
                   "delay");
  ck_assert_str_eq(tl[0].prog->ops[tm[0].marks[0].op].def->name, "scale");
  ck_assert_int_eq(ovl_timeline_svg_marked(tl, tm, n, &t, &len, &err),
                   OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, ">async race 1</text>"));
  free(t);
  free(tl);
  ovl_report_free(r);
  /* Nothing traced. */
  ro.trace = 0;
  ck_assert_msg(ovl_pipeline_run(w, p, &o, &r, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_int_eq(ovl_report_timelines(r, &tl, &tm, &n, &err), OVL_EINVAL);
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_world_free(w);
}
END_TEST

/* The findings' getters on no findings and out of range: 0, -1 and
 * outputs cleared (a deadlock match's rank -1), as the header says; the
 * checks, the reports and the fixes refuse what is missing with
 * OVL_EINVAL. */
START_TEST(getters_and_bad_arguments) {
  char *text = tu_read_source_file("tests/order/bad/skipped_collective.sched");
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_bind_opts bo = {.size = sizeof bo, .nranks = 2};
  ovl_race_info ri;
  ovl_mismatch_finding mf;
  ovl_deadlock_finding df;
  ovl_deadlock_match dm;
  ovl_fix_info fi;
  ovl_mismatches *m = NULL;
  ovl_fixed *f = (ovl_fixed *)&fi;
  uint64_t left[3] = {1, 1, 1};
  size_t len = 9;
  char *t = (char *)&fi;
  ovl_error err = {0};

  ck_assert_uint_eq(ovl_races_count(NULL), 0);
  ck_assert_uint_eq(ovl_races_more(NULL), 0);
  ck_assert_uint_eq(ovl_races_ops(NULL), 0);
  ck_assert_int_eq(ovl_races_get(NULL, 0, &ri), -1);
  ck_assert_uint_eq(ovl_races_forms(NULL, 0), 0);
  ck_assert_uint_eq(ovl_mismatches_count(NULL), 0);
  ck_assert_uint_eq(ovl_mismatches_more(NULL), 0);
  ck_assert_int_eq(ovl_mismatches_get(NULL, 0, &mf), -1);
  ck_assert_int_eq(ovl_mismatches_get(NULL, 0, NULL), -1);
  ck_assert_int_eq(ovl_mismatches_fix(NULL, 0, &fi), -1);
  ck_assert_ptr_null(fi.fix);
  ck_assert_int_eq(ovl_mismatches_fix(NULL, 0, NULL), -1);
  ck_assert_uint_eq(ovl_deadlocks_count(NULL), 0);
  ck_assert_uint_eq(ovl_deadlocks_more(NULL), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(NULL), 0);
  ck_assert_int_eq(ovl_deadlocks_get(NULL, 0, &df), -1);
  ck_assert_uint_eq(df.nsteps, 0);
  ck_assert_int_eq(ovl_deadlocks_get(NULL, 0, NULL), -1);
  ck_assert_uint_eq(ovl_deadlocks_forms(NULL, 0), 0);
  ck_assert_int_eq(ovl_deadlocks_match(NULL, 0, 0, &dm), -1);
  ck_assert_int_eq(dm.rank, -1);
  ck_assert_int_eq(dm.after_stream, -1);
  ck_assert_int_eq(ovl_deadlocks_match(NULL, 0, 0, NULL), -1);
  ck_assert_int_eq(ovl_deadlocks_fix(NULL, 0, &fi), -1);
  ck_assert_int_eq(ovl_deadlocks_fix(NULL, 0, NULL), -1);
  ck_assert_int_eq(ovl_races_format(NULL, NULL, 0, &t, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_races_format: bad argument");
  ck_assert_int_eq(ovl_mismatches_format(NULL, NULL, 1, &t, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_deadlocks_format(NULL, NULL, 0, &t, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_race_check(NULL, NULL, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_mismatch_check(NULL, &m, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_mismatch_check: bad argument");
  ck_assert_int_eq(ovl_deadlock_check(NULL, NULL, &err), OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_deadlock_check: bad argument");
  /* No fixed schedule. */
  ck_assert_ptr_null(ovl_fixed_text(NULL, &len));
  ck_assert_uint_eq(len, 0);
  ck_assert_uint_eq(ovl_fixed_count(NULL), 0);
  ck_assert_ptr_null(ovl_fixed_hint(NULL, 0));
  ovl_fixed_left(NULL, &left[0], &left[1], &left[2]);
  ck_assert(left[0] == 0 && left[1] == 0 && left[2] == 0);
  ovl_fixed_left(NULL, NULL, NULL, NULL);
  ck_assert_int_eq(ovl_fixed_diff(NULL, "a", "b", &t, &len, &err),
                   OVL_EINVAL);
  ck_assert_str_eq(err.msg, "ovl_fixed_diff: bad argument");
  ck_assert_ptr_null(t);
  ovl_fixed_free(NULL);
  ck_assert_int_eq(ovl_schedule_fix(NULL, NULL, BOTH, 0, &f, &err),
                   OVL_EINVAL);
  ck_assert_ptr_null(f);
  ck_assert_str_eq(err.msg, "ovl_schedule_fix: bad argument");

  /* Findings out of range, and the fix's refusals given a schedule. */
  ck_assert_int_eq(ovl_schedule_parse(text, strlen(text), "s.sched", &s, &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_schedule_bind(s, &bo, &p, &err), OVL_OK);
  ck_assert_int_eq(ovl_mismatch_check(p, &m, &err), OVL_OK);
  ck_assert_uint_eq(ovl_mismatches_count(m), 3);
  ck_assert_int_eq(ovl_mismatches_get(m, 3, &mf), -1);
  ck_assert_int_eq(ovl_mismatches_fix(m, 3, &fi), -1);
  ck_assert_int_eq(ovl_mismatches_format(m, p, 0, NULL, &err), OVL_EINVAL);
  ovl_mismatches_free(m);
  ck_assert_int_eq(ovl_schedule_fix(s, &bo, 0, 0, &f, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_schedule_fix(s, &bo, 1u << 7, 0, &f, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_schedule_fix(s, &bo, BOTH, 0, NULL, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_schedule_fix(s, &bo, BOTH, 0, &f, &err), OVL_OK);
  ck_assert_ptr_null(ovl_fixed_hint(f, ovl_fixed_count(f)));
  ck_assert_int_eq(ovl_fixed_diff(f, NULL, "b", &t, &len, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_fixed_diff(f, "a", "b", NULL, &len, &err),
                   OVL_EINVAL);
  ovl_fixed_free(f);
  ovl_program_free(p);
  ovl_schedule_free(s);
  free(text);
}
END_TEST

static Suite *findings_suite(void) {
  Suite *s = suite_create("findings");
  TCase *tc = tcase_create("forms");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, a_race_in_both_forms_is_one);
  tcase_add_test(tc, forms_that_differ_print_apart);
  tcase_add_test(tc, a_deadlock_in_both_forms_is_one);
  tcase_add_test(tc, a_root_from_rank);
  suite_add_tcase(s, tc);
  tc = tcase_create("fixes");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, mismatch_hints);
  tcase_add_test(tc, deadlock_hint_moves_a_run);
  tcase_add_test(tc, edits_of_the_text);
  tcase_add_test(tc, fixed_schedule);
  tcase_add_test(tc, getters_and_bad_arguments);
  suite_add_tcase(s, tc);
  tc = tcase_create("timelines");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, timelines_mark_the_races);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(findings_suite()); }
