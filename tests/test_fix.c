/*
 * Fix hints (src/check/fix.c, issue 12): every race's fix is an edit of
 * the schedule's text ("insert S [and T] before line N") in ops the form
 * that raced has, at the latest point that orders the two accesses, and
 * re-checked (ovl_races_check_fixes): applied to the text, the form is
 * clean. Through the public API only (include/ovl.h).
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "ovl.h"


/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* A schedule text's form of `mode` on 2 ranks (bound with `bind`, NULL:
 * the defaults), its races, and their fixes re-checked. */
typedef struct checked {
  ovl_schedule *s;
  ovl_program *prog, *form;
  ovl_races *races;
} checked;

static checked check_with(const char *text, ovl_mode mode,
                          const ovl_bind_opts *bind) {
  checked c = {0};
  ovl_error err = {0};
  ck_assert_msg(ovl_schedule_parse(text, strlen(text), "t.sched", &c.s,
                                   &err) == OVL_OK,
                "parse: %s", err.msg);
  ck_assert_msg(ovl_schedule_bind(c.s, bind, &c.prog, &err) == OVL_OK,
                "bind: %s", err.msg);
  ck_assert_int_eq(ovl_program_transform(c.prog, mode, &c.form, &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_race_check(c.form, &c.races, &err), OVL_OK);
  ck_assert_msg(ovl_races_check_fixes(c.races, c.form, c.s, bind, &err) ==
                    OVL_OK,
                "fixes: %s", err.msg);
  return c;
}

static checked check_text(const char *text, ovl_mode mode) {
  return check_with(text, mode, NULL);
}

static void checked_free(checked *c) {
  ovl_races_free(c->races);
  ovl_program_free(c->form);
  ovl_program_free(c->prog);
  ovl_schedule_free(c->s);
}

static ovl_race_info info(const ovl_races *r, size_t i) {
  ovl_race_info in;
  memset(&in, 0, sizeof in);
  ck_assert_int_eq(ovl_races_get(r, i, &in), 0);
  return in;
}

/* The races of a schedule text in the form of `mode` (no fixes checked). */
static size_t count_races(const char *text, ovl_mode mode) {
  checked c = {0};
  ovl_error err = {0};
  size_t n;
  ck_assert_int_eq(
      ovl_schedule_parse(text, strlen(text), "t.sched", &c.s, &err), OVL_OK);
  ck_assert_int_eq(ovl_schedule_bind(c.s, NULL, &c.prog, &err), OVL_OK);
  ck_assert_int_eq(ovl_program_transform(c.prog, mode, &c.form, &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_race_check(c.form, &c.races, &err), OVL_OK);
  n = ovl_races_count(c.races);
  checked_free(&c);
  return n;
}

/* Line n (1-based) of a text, without its newline, into buf. */
static const char *line_of(const char *text, int n, char *buf, size_t size) {
  const char *p = text, *e;
  for (int l = 1; l < n && p != NULL; l++)
    if ((p = strchr(p, '\n')) != NULL)
      p++;
  ck_assert_ptr_nonnull(p);
  e = strchr(p, '\n');
  snprintf(buf, size, "%.*s", (int)(e != NULL ? e - p : (long)strlen(p)), p);
  return buf;
}

/* The text with a hint applied as its grammar says: "insert S [and T]
 * before line N" puts S (and T) as lines just before line N. malloc'd. */
static char *apply_hint(const char *text, const char *hint) {
  const char *at = strstr(hint, " before line "), *p = text;
  char stmts[4096], *out, *q;
  int line;
  size_t off;
  ck_assert_ptr_nonnull(at);
  ck_assert(strncmp(hint, "insert ", 7) == 0);
  line = atoi(at + 13);
  snprintf(stmts, sizeof stmts, "%.*s", (int)(at - hint - 7), hint + 7);
  /* ") and " separates the statements. */
  for (q = stmts; (q = strstr(q, ") and ")) != NULL;) {
    q[1] = '\n';
    memmove(q + 2, q + 6, strlen(q + 6) + 1);
    q += 2;
  }
  for (int l = 1; l < line; l++) {
    p = strchr(p, '\n');
    ck_assert_ptr_nonnull(p);
    p++;
  }
  off = (size_t)(p - text);
  out = malloc(strlen(text) + strlen(stmts) + 2);
  ck_assert_ptr_nonnull(out);
  memcpy(out, text, off);
  sprintf(out + off, "%s\n%s", stmts, text + off);
  return out;
}

/* Race i of c: fix checked, this text; applied, the form is clean. */
static void expect_checked(const checked *c, const char *text, size_t i,
                           ovl_mode mode, const char *fix) {
  ovl_race_info in = info(c->races, i);
  char *fixed;
  ck_assert_str_eq(in.fix, fix);
  ck_assert_int_eq(in.fix_checked, 1);
  ck_assert_ptr_null(in.fix_why);
  fixed = apply_hint(text, in.fix);
  ck_assert_uint_lt(count_races(fixed, mode), ovl_races_count(c->races));
  free(fixed);
}

/* ------------------------------------------------------------------ */
/* Which op                                                            */
/* ------------------------------------------------------------------ */

/* The sync form has no c_wait_comm: its fix is an event pair. */
START_TEST(sync_form_gets_an_event_pair) {
  char *text = tu_read_source_file("tests/schedules/sync_only_race.sched");
  checked c = check_text(text, OVL_MODE_SYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  expect_checked(&c, text, 0, OVL_MODE_SYNC,
                 "insert event_record(b, event=b_ready, stream=comm, "
                 "ring_id=0) and stream_wait_event(b, event=b_ready, "
                 "stream=calc) before line 8");
  ck_assert_ptr_null(strstr(info(c.races, 0).fix, "c_wait"));
  checked_free(&c);
  /* Unchecked too: the hint never names an op the form lacks. */
  {
    ovl_program *p = NULL, *q = NULL;
    ovl_races *r = NULL;
    ovl_error err = {0};
    ck_assert_int_eq(
        ovl_program_parse(text, strlen(text), "t.sched", NULL, &p, &err),
        OVL_OK);
    ck_assert_int_eq(ovl_program_transform(p, OVL_MODE_SYNC, &q, &err),
                     OVL_OK);
    ck_assert_int_eq(ovl_race_check(q, &r, &err), OVL_OK);
    ck_assert_ptr_null(strstr(info(r, 0).fix, "c_wait"));
    ck_assert_int_eq(info(r, 0).fix_checked, 0);
    ck_assert_str_eq(info(r, 0).fix_why, "not checked: no schedule given");
    ovl_races_free(r);
    ovl_program_free(q);
    ovl_program_free(p);
  }
  free(text);
}
END_TEST

/* A user stream has no Paddle wait op: an event pair. */
START_TEST(user_stream_gets_an_event_pair) {
  const char *text = "x = data(shape=[8], init=uniform)\n"       /* 1 */
                     "c = scale(x, scale=1.0, stream=side)\n"    /* 2 */
                     "y = scale(c, scale=2.0)\n"                 /* 3 */
                     "fetch(y)\n";                               /* 4 */
  checked c = check_text(text, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  expect_checked(&c, text, 0, OVL_MODE_ASYNC,
                 "insert event_record(c, event=c_ready, stream=side) and "
                 "stream_wait_event(c, event=c_ready, stream=calc) before "
                 "line 3");
  checked_free(&c);
}
END_TEST

/* An event name the program uses is not taken. */
START_TEST(event_name_is_fresh) {
  const char *text =
      "x = data(shape=[8], init=uniform)\n"               /* 1 */
      "event_record(x, event=c_ready, stream=calc)\n"     /* 2 */
      "c_ready2 = scale(x, scale=1.0)\n"                  /* 3 */
      "c = scale(x, scale=1.0, stream=side)\n"            /* 4 */
      "y = scale(c, scale=2.0)\n"                         /* 5 */
      "fetch(y, c_ready2)\n";                             /* 6 */
  checked c = check_text(text, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  expect_checked(&c, text, 0, OVL_MODE_ASYNC,
                 "insert event_record(c, event=c_ready3, stream=side) and "
                 "stream_wait_event(c, event=c_ready3, stream=calc) before "
                 "line 5");
  checked_free(&c);
}
END_TEST

/* The host reads what a stream wrote: a host sync of that stream. */
START_TEST(stream_to_host_gets_a_sync) {
  char *text = tu_read_source_file("schedules/bad/fetch_without_wait_comm.sched");
  checked c = check_text(text, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  expect_checked(&c, text, 0, OVL_MODE_ASYNC,
                 "insert c_sync_comm_stream(c, ring_id=0) before line 17");
  checked_free(&c);
  free(text);
  /* A user stream: stream_sync. */
  {
    const char *t2 = "x = data(shape=[8], init=uniform)\n"     /* 1 */
                     "d = scale(x, scale=3.0, stream=side)\n"  /* 2 */
                     "fetch(d)\n";                             /* 3 */
    c = check_text(t2, OVL_MODE_ASYNC);
    ck_assert_uint_eq(ovl_races_count(c.races), 1);
    expect_checked(&c, t2, 0, OVL_MODE_ASYNC,
                   "insert stream_sync(d, stream=side) before line 3");
    checked_free(&c);
  }
}
END_TEST

/* calc -> comm and comm -> calc in the async form: Paddle's wait ops;
 * across rings: both. */
START_TEST(async_form_gets_paddle_wait_ops) {
  char *t1 = tu_read_source_file("schedules/bad/missing_wait_compute.sched");
  char *t2 = tu_read_source_file("schedules/bad/missing_wait_comm.sched");
  char *t3 = tu_read_source_file("schedules/bad/cross_ring.sched");
  checked c = check_text(t1, OVL_MODE_ASYNC);
  expect_checked(&c, t1, 0, OVL_MODE_ASYNC,
                 "insert c_wait_compute(c, ring_id=0) before line 14");
  checked_free(&c);
  c = check_text(t2, OVL_MODE_ASYNC);
  expect_checked(&c, t2, 0, OVL_MODE_ASYNC,
                 "insert c_wait_comm(c, ring_id=0) before line 16");
  checked_free(&c);
  c = check_text(t3, OVL_MODE_ASYNC);
  expect_checked(&c, t3, 0, OVL_MODE_ASYNC,
                 "insert c_wait_comm(c, ring_id=0) and c_wait_compute(c, "
                 "ring_id=1) before line 21");
  checked_free(&c);
  free(t1);
  free(t2);
  free(t3);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Where                                                               */
/* ------------------------------------------------------------------ */

/* The seed without its final c_wait_comm: the wait goes after the loop
 * (before `out = elementwise_sub(c, d)`), not in it; without its
 * c_wait_compute, before the loop. */
START_TEST(seed_waits_go_outside_the_loop) {
  char *seed = tu_read_source_file("schedules/seed.sched");
  const char *cut[] = {"c_wait_comm(c, ring_id=0)\n",
                       "c_wait_compute(c, ring_id=0)\n"};
  const char *line[] = {"out = elementwise_sub(c, d)", "repeat steps {"};
  const char *op[] = {"c_wait_comm", "c_wait_compute"};
  for (int k = 0; k < 2; k++) {
    char *text = malloc(strlen(seed) + 1), *at, buf[256], want[256];
    checked c;
    ovl_race_info in;
    int n;
    ck_assert_ptr_nonnull(text);
    strcpy(text, seed);
    at = strstr(text, cut[k]);
    ck_assert_ptr_nonnull(at);
    memmove(at, at + strlen(cut[k]), strlen(at + strlen(cut[k])) + 1);
    c = check_text(text, OVL_MODE_ASYNC);
    ck_assert_uint_eq(ovl_races_count(c.races), 1);
    in = info(c.races, 0);
    ck_assert_uint_eq(in.occurrences, 1);
    ck_assert_int_eq(sscanf(strstr(in.fix, "before line "), "before line %d",
                            &n),
                     1);
    ck_assert_str_eq(line_of(text, n, buf, sizeof buf), line[k]);
    snprintf(want, sizeof want, "insert %s(c, ring_id=0) before line %d",
             op[k], n);
    expect_checked(&c, text, 0, OVL_MODE_ASYNC, want);
    checked_free(&c);
    free(text);
  }
  free(seed);
}
END_TEST

/* From one iteration to the next (the calc write of c at the end of
 * iteration k, the allreduce of c in iteration k + 1): the wait stays in
 * the loop, before the second access. */
START_TEST(loop_carried_race_keeps_its_wait_in_the_loop) {
  const char *text = "x = data(shape=[8], init=uniform)\n"   /* 1 */
                     "c = scale(x, scale=1.0)\n"             /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"        /* 3 */
                     "repeat 4 {\n"                          /* 4 */
                     "  c_allreduce_sum(c, ring_id=0)\n"     /* 5 */
                     "  c_wait_comm(c, ring_id=0)\n"         /* 6 */
                     "  y = scale(c, scale=2.0)\n"           /* 7 */
                     "  c = scale(y, scale=0.5)\n"           /* 8 */
                     "}\n"                                   /* 9 */
                     "fetch(c)\n";                           /* 10 */
  checked c = check_text(text, OVL_MODE_ASYNC);
  ovl_race_info in;
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  in = info(c.races, 0);
  ck_assert_int_eq(in.first.line, 8);
  ck_assert_int_eq(in.second.line, 5);
  ck_assert_uint_eq(in.occurrences, 3);
  expect_checked(&c, text, 0, OVL_MODE_ASYNC,
                 "insert c_wait_compute(c, ring_id=0) before line 5");
  checked_free(&c);
}
END_TEST

/* Both accesses in one iteration: just before the second, in the loop. */
START_TEST(race_within_an_iteration_waits_before_the_second) {
  const char *text = "x = data(shape=[8], init=uniform)\n"   /* 1 */
                     "c = scale(x, scale=1.0)\n"             /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"        /* 3 */
                     "repeat 4 {\n"                          /* 4 */
                     "  c_wait_compute(c, ring_id=0)\n"      /* 5 */
                     "  c_allreduce_sum(c, ring_id=0)\n"     /* 6 */
                     "  d = scale(x, scale=2.0)\n"           /* 7 */
                     "  y = scale(c, scale=2.0)\n"           /* 8 */
                     "  c_wait_comm(c, ring_id=0)\n"         /* 9 */
                     "}\n"                                   /* 10 */
                     "fetch(y, d)\n";                        /* 11 */
  checked c = check_text(text, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  ck_assert_uint_eq(info(c.races, 0).occurrences, 4);
  expect_checked(&c, text, 0, OVL_MODE_ASYNC,
                 "insert c_wait_comm(c, ring_id=0) before line 8");
  checked_free(&c);
}
END_TEST

/* Nested blocks: carried by the outer block into the inner block's first
 * iteration: in the outer block, before the inner one; within one outer
 * iteration, out of the inner block. */
START_TEST(nested_blocks) {
  const char *text = "x = data(shape=[8], init=uniform)\n"   /* 1 */
                     "c = scale(x, scale=1.0)\n"             /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"        /* 3 */
                     "repeat 4 {\n"                          /* 4 */
                     "  repeat 2 {\n"                        /* 5 */
                     "    y = scale(c, scale=2.0)\n"         /* 6 */
                     "  }\n"                                 /* 7 */
                     "  c_allreduce_sum(c, ring_id=0)\n"     /* 8 */
                     "}\n"                                   /* 9 */
                     "c_wait_comm(c, ring_id=0)\n"           /* 10 */
                     "fetch(y)\n";                           /* 11 */
  checked c = check_text(text, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), 2);
  /* Reads of c in the inner block, the allreduce after it. */
  ck_assert_int_eq(info(c.races, 0).first.line, 6);
  expect_checked(&c, text, 0, OVL_MODE_ASYNC,
                 "insert c_wait_compute(c, ring_id=0) before line 8");
  /* The allreduce, the next outer iteration's first inner read. */
  ck_assert_int_eq(info(c.races, 1).first.line, 8);
  expect_checked(&c, text, 1, OVL_MODE_ASYNC,
                 "insert c_wait_comm(c, ring_id=0) before line 5");
  checked_free(&c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* When it is not checked                                              */
/* ------------------------------------------------------------------ */

/* No candidate can be re-checked (the op limit leaves no room for one
 * more op): unchecked, the first candidate, and why. */
START_TEST(no_candidate_works) {
  char *text = tu_read_source_file("schedules/bad/missing_wait_compute.sched");
  ovl_bind_opts b = {.size = sizeof b, .nranks = 2, .max_ops = 5};
  checked c = check_with(text, OVL_MODE_ASYNC, &b);
  ovl_race_info in;
  ovl_error err = {0};
  char *t = NULL;
  ck_assert_uint_eq(ovl_program_op_count(c.prog), 5);
  ck_assert_uint_eq(ovl_races_count(c.races), 1);
  in = info(c.races, 0);
  ck_assert_int_eq(in.fix_checked, 0);
  ck_assert_str_eq(in.fix, "insert c_wait_compute(c, ring_id=0) before line 14");
  ck_assert_str_eq(in.fix_why, "no candidate removed the race (2 tried, 2 of "
                               "them could not be re-checked)");
  ck_assert_int_eq(ovl_races_format(c.races, c.form, 0, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(
      strstr(t, "\n  fix (unchecked): insert c_wait_compute(c, ring_id=0) "
                "before line 14 (no candidate removed the race (2 tried, 2 "
                "of them could not be re-checked))\n"));
  free(t);
  ck_assert_int_eq(ovl_races_format(c.races, c.form, 1, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, "\"fix_checked\":false,\"fix_why\":\"no "
                                  "candidate removed the race"));
  free(t);
  checked_free(&c);
  free(text);
}
END_TEST

/* A report that lists only the first OVL_RACES_LIST_MAX races is not
 * re-checked. */
START_TEST(more_races_than_listed_are_not_checked) {
  size_t n = OVL_RACES_LIST_MAX + 1, cap = n * 64 + 64, len = 0;
  char *text = malloc(cap);
  checked c;
  ck_assert_ptr_nonnull(text);
  len += (size_t)snprintf(text + len, cap - len,
                          "x = data(shape=[1], init=uniform)\n");
  for (size_t k = 0; k < n; k++)
    len += (size_t)snprintf(text + len, cap - len,
                            "v%zu = scale(x, scale=2.0)\n"
                            "c_allreduce_sum(v%zu, ring_id=0)\n",
                            k, k);
  c = check_text(text, OVL_MODE_ASYNC);
  ck_assert_uint_eq(ovl_races_count(c.races), OVL_RACES_LIST_MAX);
  ck_assert_uint_eq(ovl_races_more(c.races), 1);
  ck_assert_int_eq(info(c.races, 0).fix_checked, 0);
  ck_assert_str_eq(info(c.races, 0).fix_why,
                   "not checked: more races than are listed");
  checked_free(&c);
  free(text);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The API and the pipeline                                            */
/* ------------------------------------------------------------------ */

START_TEST(bad_arguments) {
  char *text = tu_read_source_file("schedules/bad/missing_wait_compute.sched");
  checked c = check_text(text, OVL_MODE_ASYNC);
  ovl_error err = {0};
  ovl_program *sync = NULL;
  ck_assert_int_eq(ovl_races_check_fixes(NULL, c.form, c.s, NULL, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_races_check_fixes(c.races, NULL, c.s, NULL, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_races_check_fixes(c.races, c.form, NULL, NULL, &err),
                   OVL_EINVAL);
  /* The report of another program. */
  ck_assert_int_eq(ovl_program_transform(c.prog, OVL_MODE_SYNC, &sync, &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_races_check_fixes(c.races, sync, c.s, NULL, &err),
                   OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "not of this program"));
  /* The hints are kept. */
  ck_assert_int_eq(info(c.races, 0).fix_checked, 1);
  ovl_program_free(sync);
  checked_free(&c);
  free(text);
}
END_TEST

/* Given the schedule, the pipeline re-checks every form's fixes. */
START_TEST(pipeline_checks_fixes_given_the_schedule) {
  char *text = tu_read_source_file("tests/schedules/sync_only_race.sched");
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_bind_opts b = {.size = sizeof b, .nranks = 2};
  ovl_pipeline_opts o = {.size = sizeof o,
                         .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                  OVL_MODE_BIT(OVL_MODE_ASYNC),
                         .races = 1};
  ovl_report *r = NULL;
  ovl_report_mode m;
  ovl_error err = {0};
  ck_assert_int_eq(
      ovl_schedule_parse(text, strlen(text), "t.sched", &s, &err), OVL_OK);
  ck_assert_int_eq(ovl_schedule_bind(s, &b, &p, &err), OVL_OK);
  o.schedule = s;
  o.bind = &b;
  ck_assert_int_eq(ovl_pipeline_run(NULL, p, &o, &r, &err), OVL_OK);
  ck_assert_int_eq(ovl_report_mode_get(r, 0, &m), 0);
  ck_assert_int_eq(m.mode, OVL_MODE_SYNC);
  ck_assert_uint_eq(ovl_races_count(m.races), 1);
  ck_assert_int_eq(info(m.races, 0).fix_checked, 1);
  ck_assert_ptr_nonnull(strstr(info(m.races, 0).fix, "event_record("));
  ovl_report_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
  free(text);
}
END_TEST

static Suite *fix_suite(void) {
  Suite *s = suite_create("fix");
  TCase *tc = tcase_create("which op");
  tcase_add_test(tc, sync_form_gets_an_event_pair);
  tcase_add_test(tc, user_stream_gets_an_event_pair);
  tcase_add_test(tc, event_name_is_fresh);
  tcase_add_test(tc, stream_to_host_gets_a_sync);
  tcase_add_test(tc, async_form_gets_paddle_wait_ops);
  suite_add_tcase(s, tc);

  tc = tcase_create("where");
  tcase_add_test(tc, seed_waits_go_outside_the_loop);
  tcase_add_test(tc, loop_carried_race_keeps_its_wait_in_the_loop);
  tcase_add_test(tc, race_within_an_iteration_waits_before_the_second);
  tcase_add_test(tc, nested_blocks);
  suite_add_tcase(s, tc);

  tc = tcase_create("unchecked");
  tcase_add_test(tc, no_candidate_works);
  tcase_add_test(tc, more_races_than_listed_are_not_checked);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);

  tc = tcase_create("api");
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, pipeline_checks_fixes_given_the_schedule);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(fix_suite()); }
