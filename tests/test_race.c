/*
 * The race checker (src/check/race.c, issue 4): happens-before over
 * enqueued ops. Every program is parsed from schedule text and inspected
 * through the public API only (include/ovl.h), so these tests do not
 * depend on how the library represents ops inside.
 */
#include <check.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "ovl.h"


/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* Every program here comes from schedule text, through the parser, and is
 * looked at only through the public API (ovl.h). */
static ovl_program *parse_as(const char *text, const char *file, int nranks) {
  return tu_parse(text, file, nranks);
}

static ovl_program *parse(const char *text, int nranks) {
  return parse_as(text, "t.sched", nranks);
}

static ovl_races *check(const ovl_program *p) {
  ovl_error err = {0};
  ovl_races *r = NULL;
  ovl_status st = ovl_race_check(p, &r, &err);
  ck_assert_msg(st == OVL_OK, "race check: %s", err.msg);
  ck_assert_ptr_nonnull(r);
  return r;
}

/* The races of a schedule text (the report does not refer to the
 * program, which is freed here). */
static ovl_races *races_of(const char *text, int nranks) {
  ovl_program *p = parse(text, nranks);
  ovl_races *r = check(p);
  ovl_program_free(p);
  return r;
}

static char *format(const ovl_races *r, const ovl_program *p, int json) {
  ovl_error err = {0};
  char *t = NULL;
  ck_assert_int_eq(ovl_races_format(r, p, json, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(t);
  return t;
}

static ovl_race_info info(const ovl_races *r, size_t i) {
  ovl_race_info in;
  memset(&in, 0, sizeof in);
  ck_assert_int_eq(ovl_races_get(r, i, &in), 0);
  return in;
}

/* How many races a schedule text has, on 2 ranks. */
static size_t count_races(const char *text) {
  ovl_races *r = races_of(text, 2);
  size_t n = ovl_races_count(r);
  ovl_races_free(r);
  return n;
}

static void assert_access(const ovl_race_access *a, const char *op, int line,
                          int stream, int write) {
  ck_assert_str_eq(a->op_name, op);
  ck_assert_int_eq(a->line, line);
  ck_assert_int_eq(a->stream, stream);
  ck_assert_int_eq(a->write, write);
}

/* Exactly one race, with these accesses and this fix, on 2 ranks. */
static void expect_one(const char *text, const char *var, const char *op1,
                       int line1, int s1, int w1, const char *op2, int line2,
                       int s2, int w2, const char *fix) {
  ovl_races *r = races_of(text, 2);
  ovl_race_info in;
  ck_assert_uint_eq(ovl_races_count(r), 1);
  ck_assert_uint_eq(ovl_races_more(r), 0);
  in = info(r, 0);
  ck_assert_str_eq(in.var, var);
  assert_access(&in.first, op1, line1, s1, w1);
  assert_access(&in.second, op2, line2, s2, w2);
  ck_assert_str_eq(in.fix, fix);
  ck_assert_int_eq(in.nranks, 2);
  ck_assert_int_eq(in.ranks[0], 0);
  ck_assert_int_eq(in.ranks[1], 1);
  ck_assert_uint_eq(in.occurrences, 1);
  ovl_races_free(r);
}

/* `text` with its one line that is exactly `line` (no newline) blanked,
 * so that every other line keeps its number; malloc'd. */
static char *without_line(const char *text, const char *line) {
  size_t n = strlen(line);
  char *copy = strdup(text), *at = copy, *found = NULL;
  ck_assert_ptr_nonnull(copy);
  while ((at = strstr(at, line)) != NULL) {
    bool whole = (at == copy || at[-1] == '\n') &&
                 (at[n] == '\n' || at[n] == '\0');
    if (whole) {
      ck_assert_msg(found == NULL, "'%s' is on more than one line", line);
      found = at;
    }
    at += n;
  }
  ck_assert_msg(found != NULL, "no line '%s'", line);
  memmove(found, found + n, strlen(found + n) + 1);
  return copy;
}

/* JSON well-formedness: tests/check_util.h. */
#define json_ok tu_json_ok

/* ------------------------------------------------------------------ */
/* Schedules                                                           */
/* ------------------------------------------------------------------ */

/* The bad example: lines 5 and 6 race. */
static const char missing_wait_compute[] =
    "param n = 16\n"                                         /* 1 */
    "\n"                                                      /* 2 */
    "x = data(shape=[n], dtype=float32, init=uniform, seed=7)\n" /* 3 */
    "delay(us=200, stream=calc)\n"                            /* 4 */
    "c = scale(x, scale=3.0)\n"                               /* 5 */
    "c_allreduce_sum(c, ring_id=0)\n"                         /* 6 */
    "c_wait_comm(c, ring_id=0)\n"                             /* 7 */
    "fetch(c)\n";                                             /* 8 */

START_TEST(seed_is_clean_in_async_and_sync_modes) {
  char *text = tu_read_source_file("schedules/seed.sched"), *no_wait;
  ovl_error err = {0};
  ovl_program *seed = parse_as(text, "seed.sched", 2), *p;
  ovl_races *r;
  for (ovl_mode m = OVL_MODE_ASYNC; m <= OVL_MODE_SYNC; m++) {
    char *t;
    p = NULL;
    ck_assert_int_eq(ovl_program_transform(seed, m, &p, &err), OVL_OK);
    r = check(p);
    ck_assert_msg(ovl_races_count(r) == 0, "mode %s: %zu races",
                  ovl_mode_name(m), ovl_races_count(r));
    ck_assert_uint_eq(ovl_races_ops(r), ovl_program_op_count(p));
    t = format(r, p, 0);
    ck_assert_str_eq(strstr(t, "no races in "), t);
    ovl_races_free(r);
    ovl_program_free(p);
    free(t);
  }
  /* The seed's collectives really are on a comm stream in async mode: with
   * its c_wait_comm removed (its line blanked: one op less), it races. */
  no_wait = without_line(text, "c_wait_comm(c, ring_id=0)");
  p = parse_as(no_wait, "seed.sched", 2);
  ck_assert_uint_eq(ovl_program_op_count(p), ovl_program_op_count(seed) - 1);
  r = check(p);
  ck_assert_uint_ge(ovl_races_count(r), 1);
  ovl_races_free(r);
  ovl_program_free(p);
  ovl_program_free(seed);
  free(no_wait);
  free(text);
}
END_TEST

START_TEST(missing_wait_compute_full_report) {
  ovl_program *p = parse_as(missing_wait_compute,
                            "schedules/bad/missing_wait_compute.sched", 2);
  ovl_races *r = check(p);
  char *t = format(r, p, 0);
  ck_assert_str_eq(
      t,
      "race 1: 'c' on ranks 0-1\n"
      "  write  scale            schedules/bad/missing_wait_compute.sched:5  "
      "calc\n"
      "  write  c_allreduce_sum  schedules/bad/missing_wait_compute.sched:6  "
      "comm[0]\n"
      "  fix (unchecked): insert c_wait_compute(c, ring_id=0) before line 6 "
      "(not checked: no schedule given)\n"
      "1 race in schedules/bad/missing_wait_compute.sched (2 ranks)\n");
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

START_TEST(missing_wait_compute_fix_and_fixed_twin) {
  /* In place: the allreduce is one access, a write. */
  expect_one(missing_wait_compute, "c", "scale", 5, 0, 1, "c_allreduce_sum",
             6, 1, 1, "insert c_wait_compute(c, ring_id=0) before line 6");
  /* Out of place: the allreduce reads c. */
  expect_one("x = data(shape=[4], init=uniform)\n"
             "c = scale(x, scale=3.0)\n"
             "y = c_allreduce_sum(c, ring_id=0)\n"
             "c_wait_comm(y, ring_id=0)\n"
             "fetch(y)\n",
             "c", "scale", 2, 0, 1, "c_allreduce_sum", 3, 1, 0,
             "insert c_wait_compute(c, ring_id=0) before line 3");
  /* The fix applied: clean. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = scale(x, scale=3.0)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_wait_comm(c, ring_id=0)\n"
                                "fetch(c)\n"),
                    0);
  /* The other fix: the collective on the calc stream. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = scale(x, scale=3.0)\n"
                                "c_allreduce_sum(c, ring_id=0, "
                                "use_calc_stream=true)\n"
                                "fetch(c)\n"),
                    0);
}
END_TEST

START_TEST(missing_wait_comm_before_compute_consumer) {
  const char *text = "x = data(shape=[4], init=uniform)\n"      /* 1 */
                     "c = assign(x)\n"                         /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"          /* 3 */
                     "c_allreduce_sum(c, ring_id=0)\n"         /* 4 */
                     "d = scale(x, scale=2.0)\n"               /* 5 */
                     "out = elementwise_sub(c, d)\n"           /* 6 */
                     "fetch(out)\n";                           /* 7 */
  expect_one(text, "c", "c_allreduce_sum", 4, 1, 1, "elementwise_sub", 6, 0,
             0, "insert c_wait_comm(c, ring_id=0) before line 6");
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = assign(x)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_wait_comm(c, ring_id=0)\n"
                                "d = scale(x, scale=2.0)\n"
                                "out = elementwise_sub(c, d)\n"
                                "fetch(out)\n"),
                    0);
}
END_TEST

START_TEST(fetch_of_comm_result_without_wait_comm) {
  const char *text = "x = data(shape=[4], init=uniform)\n"   /* 1 */
                     "c = assign(x)\n"                      /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"       /* 3 */
                     "c_allreduce_sum(c, ring_id=0)\n"      /* 4 */
                     "fetch(c)\n";                          /* 5 */
  expect_one(text, "c", "c_allreduce_sum", 4, 1, 1, "fetch", 5, -1, 0,
             "insert c_sync_comm_stream(c, ring_id=0) before line 5");
  /* A host sync of calc alone does not help. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = assign(x)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_sync_calc_stream(c)\n"
                                "fetch(c)\n"),
                    1);
}
END_TEST

START_TEST(sync_comm_stream_makes_fetch_clean) {
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = assign(x)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_sync_comm_stream(c, ring_id=0)\n"
                                "fetch(c)\n"),
                    0);
  /* The sync of another ring's stream does not. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = assign(x)\n"
                                "z = assign(x)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_wait_compute(z, ring_id=1)\n"
                                "c_allreduce_sum(z, ring_id=1)\n"
                                "c_sync_comm_stream(c, ring_id=1)\n"
                                "c_sync_comm_stream(z, ring_id=1)\n"
                                "fetch(c)\n"),
                    1);
}
END_TEST

START_TEST(write_to_buffer_a_pending_collective_reads) {
  const char *text = "x = data(shape=[4], init=uniform)\n"   /* 1 */
                     "g = assign(x)\n"                      /* 2 */
                     "c_wait_compute(g, ring_id=0)\n"       /* 3 */
                     "s = c_allreduce_sum(g, ring_id=0)\n"  /* 4 */
                     "g = scale(x, scale=0.5)\n"            /* 5 */
                     "c_wait_comm(s, ring_id=0)\n"          /* 6 */
                     "fetch(s, g)\n";                       /* 7 */
  expect_one(text, "g", "c_allreduce_sum", 4, 1, 0, "scale", 5, 0, 1,
             "insert c_wait_comm(g, ring_id=0) before line 5");
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "g = assign(x)\n"
                                "c_wait_compute(g, ring_id=0)\n"
                                "s = c_allreduce_sum(g, ring_id=0)\n"
                                "c_wait_comm(g, ring_id=0)\n"
                                "g = scale(x, scale=0.5)\n"
                                "fetch(s, g)\n"),
                    0);
}
END_TEST

START_TEST(cross_ring) {
  const char *text = "x = data(shape=[4], init=uniform)\n"   /* 1 */
                     "c = assign(x)\n"                      /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"       /* 3 */
                     "c_allreduce_sum(c, ring_id=0)\n"      /* 4 */
                     "c_wait_compute(c, ring_id=1)\n"       /* 5 */
                     "c_allreduce_max(c, ring_id=1)\n"      /* 6 */
                     "c_wait_comm(c, ring_id=1)\n"          /* 7 */
                     "fetch(c)\n";                          /* 8 */
  expect_one(text, "c", "c_allreduce_sum", 4, 1, 1, "c_allreduce_max", 6, 2,
             1,
             "insert c_wait_comm(c, ring_id=0) and "
             "c_wait_compute(c, ring_id=1) before line 6");
  /* The fix applied. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = assign(x)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_wait_comm(c, ring_id=0)\n"
                                "c_wait_compute(c, ring_id=1)\n"
                                "c_allreduce_max(c, ring_id=1)\n"
                                "c_wait_comm(c, ring_id=1)\n"
                                "fetch(c)\n"),
                    0);
}
END_TEST

START_TEST(read_read_never_races) {
  /* c is read on comm[0], calc and comm[1] with no order among the reads. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = scale(x, scale=2.0)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_wait_compute(c, ring_id=1)\n"
                                "y = c_allreduce_sum(c, ring_id=0)\n"
                                "w = c_broadcast(c, ring_id=1, root=0)\n"
                                "z = scale(c, scale=2.0)\n"
                                "c_wait_comm(y, ring_id=0)\n"
                                "c_wait_comm(w, ring_id=1)\n"
                                "fetch(y, z, w, c)\n"),
                    0);
  /* Inputs (data) may be read by every stream at once. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "y = c_allreduce_sum(x, ring_id=0)\n"
                                "z = scale(x, scale=2.0)\n"
                                "c_wait_comm(y, ring_id=0)\n"
                                "fetch(y, z, x)\n"),
                    0);
}
END_TEST

START_TEST(in_place_is_one_write) {
  /* c = scale(c) on calc while the allreduce of c runs: one race, both
   * writes (no separate read of c). */
  const char *text = "x = data(shape=[4], init=uniform)\n"  /* 1 */
                     "c = assign(x)\n"                     /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"      /* 3 */
                     "c_allreduce_sum(c, ring_id=0)\n"     /* 4 */
                     "c = scale(c, scale=2.0)\n"           /* 5 */
                     "c_wait_comm(c, ring_id=0)\n"         /* 6 */
                     "fetch(c)\n";                         /* 7 */
  expect_one(text, "c", "c_allreduce_sum", 4, 1, 1, "scale", 5, 0, 1,
             "insert c_wait_comm(c, ring_id=0) before line 5");
  /* A compute op reading the same var twice: one read. */
  expect_one("x = data(shape=[4], init=uniform)\n"
             "c = assign(x)\n"
             "c_wait_compute(c, ring_id=0)\n"
             "c_allreduce_sum(c, ring_id=0)\n"
             "d = elementwise_mul(c, c)\n"
             "c_wait_comm(c, ring_id=0)\n"
             "fetch(d, c)\n",
             "c", "c_allreduce_sum", 4, 1, 1, "elementwise_mul", 5, 0, 0,
             "insert c_wait_comm(c, ring_id=0) before line 5");
}
END_TEST

START_TEST(same_race_reported_once) {
  /* In a loop: every iteration repeats the pair; listed once, with its
   * count. */
  const char *text = "x = data(shape=[4], init=uniform)\n"  /* 1 */
                     "c = assign(x)\n"                     /* 2 */
                     "repeat 5 {\n"                        /* 3 */
                     "  c = scale(c, scale=1.0)\n"         /* 4 */
                     "  c_allreduce_sum(c, ring_id=0)\n"   /* 5 */
                     "  c_wait_comm(c, ring_id=0)\n"       /* 6 */
                     "}\n"                                 /* 7 */
                     "fetch(c)\n";                         /* 8 */
  ovl_program *p = parse(text, 2);
  ovl_races *r = check(p);
  ovl_race_info in;
  char *t;
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  assert_access(&in.first, "scale", 4, 0, 1);
  assert_access(&in.second, "c_allreduce_sum", 5, 1, 1);
  ck_assert_uint_eq(in.occurrences, 5);
  ck_assert_str_eq(in.fix, "insert c_wait_compute(c, ring_id=0) before line 5");
  t = format(r, p, 0);
  ck_assert_str_eq(t, "race 1: 'c' on ranks 0-1 (5 times in the expanded "
                      "program)\n"
                      "  write  scale            t.sched:4  calc\n"
                      "  write  c_allreduce_sum  t.sched:5  comm[0]\n"
                      "  fix (unchecked): insert c_wait_compute(c, ring_id=0) "
                      "before line 5 (not checked: no schedule given)\n"
                      "1 race in t.sched (2 ranks)\n");
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
  /* A read racing with the last write and then the write racing with that
   * read are different pairs; each pair appears once. */
  {
    const char *t2 = "x = data(shape=[4], init=uniform)\n"  /* 1 */
                     "c = assign(x)\n"                     /* 2 */
                     "c_wait_compute(c, ring_id=0)\n"      /* 3 */
                     "c_allreduce_sum(c, ring_id=0)\n"     /* 4 */
                     "d = scale(c, scale=2.0)\n"           /* 5 */
                     "c = assign(x)\n"                     /* 6 */
                     "c_wait_comm(c, ring_id=0)\n"         /* 7 */
                     "fetch(c, d)\n";                      /* 8 */
    p = parse(t2, 2);
    r = check(p);
    /* 4w-5r and 4w-6w; 5r-6w are on one stream. */
    ck_assert_uint_eq(ovl_races_count(r), 2);
    in = info(r, 0);
    assert_access(&in.first, "c_allreduce_sum", 4, 1, 1);
    assert_access(&in.second, "scale", 5, 0, 0);
    in = info(r, 1);
    assert_access(&in.first, "c_allreduce_sum", 4, 1, 1);
    assert_access(&in.second, "assign", 6, 0, 1);
    ovl_races_free(r);
    ovl_program_free(p);
  }
}
END_TEST

START_TEST(host_ordering) {
  /* An op enqueued after a host sync of calc is ordered after calc's
   * earlier ops, even on a comm stream, without any wait op. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = scale(x, scale=3.0)\n"
                                "c_sync_calc_stream(c)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_sync_comm_stream(c, ring_id=0)\n"
                                "fetch(c)\n"),
                    0);
  /* fetch syncs calc too: an op after it is ordered after calc's ops and
   * after the host's read. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = scale(x, scale=3.0)\n"
                                "fetch(c)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_wait_comm(c, ring_id=0)\n"
                                "fetch(c)\n"),
                    0);
  /* Without the sync the same ops race. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = scale(x, scale=3.0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_sync_comm_stream(c, ring_id=0)\n"
                                "fetch(c)\n"),
                    1);
  /* A host sync of comm[0], then work on calc: ordered after comm[0]. */
  ck_assert_uint_eq(count_races("x = data(shape=[4], init=uniform)\n"
                                "c = assign(x)\n"
                                "c_wait_compute(c, ring_id=0)\n"
                                "c_allreduce_sum(c, ring_id=0)\n"
                                "c_sync_comm_stream(c, ring_id=0)\n"
                                "d = scale(c, scale=2.0)\n"
                                "fetch(d)\n"),
                    0);
}
END_TEST

START_TEST(sorted_and_stable_output) {
  const char *text = "x = data(shape=[4], init=uniform)\n"   /* 1 */
                     "b = assign(x)\n"                      /* 2 */
                     "a = assign(x)\n"                      /* 3 */
                     "a_sum = c_allreduce_sum(a, ring_id=0)\n" /* 4 */
                     "b_sum = c_allreduce_sum(b, ring_id=0)\n" /* 5 */
                     "out = elementwise_add(a_sum, b_sum)\n" /* 6 */
                     "fetch(out)\n";                        /* 7 */
  const char *expect =
      "race 1: 'b' on ranks 0-2\n"
      "  write  assign           t.sched:2  calc\n"
      "  read   c_allreduce_sum  t.sched:5  comm[0]\n"
      "  fix (unchecked): insert c_wait_compute(b, ring_id=0) before line 5 "
      "(not checked: no schedule given)\n"
      "race 2: 'a' on ranks 0-2\n"
      "  write  assign           t.sched:3  calc\n"
      "  read   c_allreduce_sum  t.sched:4  comm[0]\n"
      "  fix (unchecked): insert c_wait_compute(a, ring_id=0) before line 4 "
      "(not checked: no schedule given)\n"
      "race 3: 'a_sum' on ranks 0-2\n"
      "  write  c_allreduce_sum  t.sched:4  comm[0]\n"
      "  read   elementwise_add  t.sched:6  calc\n"
      "  fix (unchecked): insert c_wait_comm(a_sum, ring_id=0) before line 6 "
      "(not checked: no schedule given)\n"
      "race 4: 'b_sum' on ranks 0-2\n"
      "  write  c_allreduce_sum  t.sched:5  comm[0]\n"
      "  read   elementwise_add  t.sched:6  calc\n"
      "  fix (unchecked): insert c_wait_comm(b_sum, ring_id=0) before line 6 "
      "(not checked: no schedule given)\n"
      "4 races in t.sched (3 ranks)\n";
  for (int k = 0; k < 3; k++) {
    ovl_program *p = parse(text, 3);
    ovl_races *r = check(p);
    char *t = format(r, p, 0);
    ck_assert_str_eq(t, expect);
    ck_assert_uint_eq(ovl_races_count(r), 4);
    free(t);
    ovl_races_free(r);
    ovl_program_free(p);
  }
}
END_TEST

START_TEST(sort_order_is_by_first_line) {
  const char *text = "x = data(shape=[4], init=uniform)\n"   /* 1 */
                     "b = assign(x)\n"                      /* 2 */
                     "a = assign(x)\n"                      /* 3 */
                     "a_sum = c_allreduce_sum(a, ring_id=0)\n" /* 4 */
                     "b_sum = c_allreduce_sum(b, ring_id=0)\n" /* 5 */
                     "c_wait_comm(x, ring_id=0)\n"          /* 6 */
                     "fetch(a_sum, b_sum)\n";               /* 7 */
  ovl_races *r = races_of(text, 2);
  ck_assert_uint_eq(ovl_races_count(r), 2);
  ck_assert_str_eq(info(r, 0).var, "b");
  ck_assert_int_eq(info(r, 0).first.line, 2);
  ck_assert_str_eq(info(r, 1).var, "a");
  ck_assert_int_eq(info(r, 1).first.line, 3);
  ck_assert_int_eq(ovl_races_get(r, 2, &(ovl_race_info){0}), -1);
  ovl_races_free(r);
}
END_TEST

START_TEST(clean_report_text) {
  ovl_program *p = parse_as("x = data(shape=[4], init=uniform)\n"
                           "c = scale(x, scale=3.0)\n"
                           "fetch(c)\n",
                           "good.sched", 1);
  ovl_races *r = check(p);
  char *t = format(r, p, 0);
  ck_assert_str_eq(t, "no races in good.sched (2 ops checked)\n");
  free(t);
  t = format(r, p, 1);
  ck_assert_str_eq(t, "{\"schedule\":\"good.sched\",\"ranks\":1,\"ops\":2,"
                      "\"races\":[],\"count\":0,\"more\":0}\n");
  ck_assert(json_ok(t));
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

START_TEST(json_is_well_formed) {
  /* A file name that needs escaping. */
  ovl_program *p =
      parse_as(missing_wait_compute, "we\"ird\\dir\t/bad.sched", 2);
  ovl_races *r = check(p);
  char *t = format(r, p, 1);
  ck_assert_msg(json_ok(t), "not JSON: %s", t);
  ck_assert_str_eq(
      t, "{\"schedule\":\"we\\\"ird\\\\dir\\t/bad.sched\",\"ranks\":2,"
         "\"ops\":5,\"races\":[{\"var\":\"c\",\"ranks\":[0,1],"
         "\"first\":{\"line\":5,\"col\":5,\"op\":\"scale\",\"stream\":"
         "\"calc\",\"access\":\"write\"},"
         "\"second\":{\"line\":6,\"col\":1,\"op\":\"c_allreduce_sum\","
         "\"stream\":\"comm[0]\",\"access\":\"write\"},"
         "\"fix\":\"insert c_wait_compute(c, ring_id=0) before line 6\","
         "\"fix_checked\":false,"
         "\"fix_why\":\"not checked: no schedule given\","
         "\"note\":null,\"occurrences\":1,\"forms\":null}],"
                   "\"count\":1,\"more\":0}\n");
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
  /* The checker's own validator rejects broken JSON. */
  ck_assert(!json_ok("{\"a\":1,}"));
  ck_assert(!json_ok("{\"a\":\"x\ty\"}"));
  ck_assert(json_ok("{\"a\":[1,2,{\"b\":\"\\u0001\"}]}"));
}
END_TEST

/* ---- generic stream ops: event_record, stream_wait_event, stream_sync,
 * stream= on compute ops ---- */

/* ---- the JSON report is valid UTF-8 whatever the schedule's path ---- */

START_TEST(json_report_of_a_latin1_path) {
  ovl_program *p = parse_as(missing_wait_compute, "dir\xff-\xc3\xa9/bad.sched", 2);
  ovl_races *r = check(p);
  char *t = format(r, p, 1);
  ck_assert_msg(json_ok(t), "not JSON: %s", t);
  ck_assert(tu_utf8_valid((const unsigned char *)t));
  ck_assert_ptr_nonnull(strstr(t, "\"schedule\":\"dir\\ufffd-\xc3\xa9/bad.sched\""));
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

/* ---- generic stream ops, hand-built ---- */

START_TEST(event_ops_order_streams) {
  /* c = scale(x) on calc; record E on calc; comm[0] waits E; allreduce c. */
  ck_assert_uint_eq(
      count_races("x = data(shape=[4], init=uniform)\n"                /* 1 */
                  "c = scale(x, scale=3.0)\n"                          /* 2 */
                  "event_record(event=E, stream=calc)\n"               /* 3 */
                  "stream_wait_event(event=E, stream=comm, ring_id=0)\n" /* 4 */
                  "c_allreduce_sum(c, ring_id=0)\n"                    /* 5 */
                  "stream_sync(stream=comm, ring_id=0)\n"              /* 6 */
                  "fetch(c)\n"),                                       /* 7 */
      0);
}
END_TEST

START_TEST(wait_on_never_recorded_event_adds_nothing) {
  /* Line 3 waits on E before anything recorded it. */
  const char *text =
      "x = data(shape=[4], init=uniform)\n"                  /* 1 */
      "c = scale(x, scale=3.0)\n"                            /* 2 */
      "stream_wait_event(event=E, stream=comm, ring_id=0)\n" /* 3 */
      "c_allreduce_sum(c, ring_id=0)\n"                      /* 4 */
      "event_record(event=E, stream=comm, ring_id=0)\n"      /* 5 */
      "stream_wait_event(event=E, stream=calc)\n"            /* 6 */
      "fetch(c)\n";                                          /* 7 */
  ovl_races *r = races_of(text, 2);
  ovl_race_info in;
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  assert_access(&in.first, "scale", 2, 0, 1);
  assert_access(&in.second, "c_allreduce_sum", 4, 1, 1);
  ck_assert_str_eq(in.fix, "insert c_wait_compute(c, ring_id=0) before line 4");
  /* The report says why the wait of line 3 did not order them. */
  ck_assert_ptr_nonnull(in.note);
  ck_assert_str_eq(in.note, "line 3 waits on event 'E', which is not "
                            "recorded before it (line 5 records it), so it "
                            "does not wait");
  ovl_races_free(r);
  /* Without the later record: never recorded at all. */
  const char *never =
      "x = data(shape=[4], init=uniform)\n"                  /* 1 */
      "c = scale(x, scale=3.0)\n"                            /* 2 */
      "stream_wait_event(event=E, stream=comm, ring_id=0)\n" /* 3 */
      "c_allreduce_sum(c, ring_id=0)\n"                      /* 4 */
      "c_wait_comm(c, ring_id=0)\n"                          /* 5 */
      "fetch(c)\n";                                          /* 6 */
  r = races_of(never, 2);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  ck_assert_ptr_nonnull(in.note);
  ck_assert_str_eq(in.note, "line 3 waits on event 'E', which was never "
                            "recorded, so it does not wait");
  ovl_races_free(r);
}
END_TEST

/* A wait on a never-recorded event before the first access explains
 * nothing about the pair: no note. Nor has a race without such a wait. */
START_TEST(never_recorded_note_only_where_it_applies) {
  const char *before =
      "x = data(shape=[4], init=uniform)\n"                  /* 1 */
      "stream_wait_event(event=E, stream=comm, ring_id=0)\n" /* 2 */
      "c = scale(x, scale=3.0)\n"                            /* 3 */
      "c_allreduce_sum(c, ring_id=0)\n"                      /* 4 */
      "c_wait_comm(c, ring_id=0)\n"                          /* 5 */
      "fetch(c)\n";                                          /* 6 */
  ovl_races *r = races_of(before, 2);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  ck_assert_ptr_null(info(r, 0).note);
  ovl_races_free(r);
  r = races_of(missing_wait_compute, 2);
  ck_assert_uint_ge(ovl_races_count(r), 1);
  ck_assert_ptr_null(info(r, 0).note);
  ovl_races_free(r);
}
END_TEST

START_TEST(re_recorded_event_no_longer_covers_write) {
  /* E is recorded on comm[0] after the allreduce of c, then re-recorded on
   * calc before calc waits on it: the wait covers calc only, and reading c
   * on calc races with the allreduce. */
  const char *lines[] = {
      "x = data(shape=[4], init=uniform)\n",                 /* 1 */
      "c = assign(x)\n",                                     /* 2 */
      "event_record(event=E, stream=calc)\n",                /* 3 */
      "stream_wait_event(event=E, stream=comm, ring_id=0)\n", /* 4 */
      "c_allreduce_sum(c, ring_id=0)\n",                     /* 5 */
      "event_record(event=E, stream=comm, ring_id=0)\n",     /* 6 */
      "event_record(event=E, stream=calc)\n",                /* 7: replaces */
      "stream_wait_event(event=E, stream=calc)\n",           /* 8 */
      "d = scale(c, scale=2.0)\n",                           /* 9 */
      "fetch(d)\n",                                          /* 10 */
  };
  char text[1024];
  ovl_races *r;
  ovl_race_info in;
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, lines[i]);
  r = races_of(text, 2);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  ck_assert_str_eq(in.var, "c");
  assert_access(&in.first, "c_allreduce_sum", 5, 1, 1);
  assert_access(&in.second, "scale", 9, 0, 0);
  ck_assert_str_eq(in.fix, "insert c_wait_comm(c, ring_id=0) before line 9");
  ovl_races_free(r);
  /* Without the re-record (line 7, left blank) it is clean. */
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, i == 6 ? "\n" : lines[i]);
  ck_assert_uint_eq(count_races(text), 0);
}
END_TEST

START_TEST(compute_on_comm_stream_and_stream_sync) {
  /* d = scale(x) on comm[0] (stream= attribute); calc reads d without a
   * wait: race. Then a host stream_sync of comm[0] orders the fetch.
   * The comm stream of ring 0 exists only where a collective runs on ring
   * 0, so lines 8-9 add one on an unrelated variable z, after everything
   * the test looks at (the hand-built program this replaces had ring 0
   * without a collective). */
  const char *lines[] = {
      "x = data(shape=[4], init=uniform)\n",               /* 1 */
      "d = scale(x, scale=2.0, stream=comm, ring_id=0)\n", /* 2 */
      "o = assign(d)\n",                                   /* 3 */
      "y = scale(x, scale=2.0, stream=comm, ring_id=0)\n", /* 4 */
      "stream_sync(stream=comm, ring_id=0)\n",             /* 5 */
      "fetch(o)\n",                                        /* 6 */
      "fetch(y)\n",                                        /* 7 */
      "z = data(shape=[4], init=uniform)\n",               /* 8 */
      "c_allreduce_sum(z, ring_id=0)\n",                   /* 9 */
  };
  char text[1024];
  ovl_races *r;
  ovl_race_info in;
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, lines[i]);
  r = races_of(text, 2);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  ck_assert_str_eq(in.var, "d");
  assert_access(&in.first, "scale", 2, 1, 1);
  assert_access(&in.second, "assign", 3, 0, 0);
  ck_assert_str_eq(in.fix, "insert c_wait_comm(d, ring_id=0) before line 3");
  ovl_races_free(r);
  /* stream_sync of calc instead does not order the comm[0] result. */
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, i == 4 ? "stream_sync(stream=calc)\n" : lines[i]);
  r = races_of(text, 2);
  ck_assert_uint_eq(ovl_races_count(r), 2);
  in = info(r, 1);
  ck_assert_str_eq(in.var, "y");
  assert_access(&in.second, "fetch", 7, -1, 0);
  ovl_races_free(r);
}
END_TEST

/* Named events in both directions, each wait removed in turn (its line
 * left blank). */
START_TEST(event_ops_in_both_directions) {
  const char *lines[] = {
      "x = data(shape=[4], init=uniform)\n",                     /* 1 */
      "c = scale(x, scale=3.0)\n",                               /* 2 */
      "event_record(event=ready, stream=calc)\n",                /* 3 */
      "stream_wait_event(event=ready, stream=comm, ring_id=0)\n", /* 4 */
      "c_allreduce_sum(c, ring_id=0)\n",                         /* 5 */
      "event_record(event=done, stream=comm, ring_id=0)\n",      /* 6 */
      "stream_wait_event(event=done, stream=calc)\n",            /* 7 */
      "d = scale(c, scale=2.0)\n",                               /* 8 */
      "stream_sync(stream=comm, ring_id=0)\n",                   /* 9 */
      "fetch(c, d)\n",                                           /* 10 */
  };
  char text[1024];
  ovl_races *r;
  ovl_race_info in;
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, lines[i]);
  ck_assert_uint_eq(count_races(text), 0);
  /* Without the wait on line 4: the allreduce races with line 2. */
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, i == 3 ? "\n" : lines[i]);
  r = races_of(text, 2);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  assert_access(&in.first, "scale", 2, 0, 1);
  assert_access(&in.second, "c_allreduce_sum", 5, 1, 1);
  ck_assert_str_eq(in.fix, "insert c_wait_compute(c, ring_id=0) before line 5");
  ovl_races_free(r);
  /* Without the wait on line 7: calc reads c (line 8) unordered. */
  text[0] = '\0';
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    strcat(text, i == 6 ? "\n" : lines[i]);
  r = races_of(text, 2);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  in = info(r, 0);
  assert_access(&in.first, "c_allreduce_sum", 5, 1, 1);
  assert_access(&in.second, "scale", 8, 0, 0);
  ovl_races_free(r);
}
END_TEST

/* The public entry points refuse what is not a program or a report. (A
 * malformed program, with a variable, ring or event that does not exist,
 * cannot be made through the parser: see tests/bad_input.tsv.) */
START_TEST(bad_arguments_are_rejected) {
  ovl_program *p = parse("x = data(shape=[4], init=uniform)\n"
                         "c = scale(x, scale=3.0)\n",
                         2);
  ovl_races *r = NULL;
  ovl_error err = {0};
  char *t = NULL;
  ck_assert_int_eq(ovl_race_check(NULL, &r, &err), OVL_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(err.status, OVL_EINVAL);
  ck_assert_int_eq(ovl_race_check(p, NULL, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_races_format(NULL, p, 0, &t, &err), OVL_EINVAL);
  ck_assert_ptr_null(t);
  r = check(p);
  ck_assert_int_eq(ovl_races_format(r, p, 0, NULL, &err), OVL_EINVAL);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

START_TEST(list_is_capped) {
  /* One allreduce result read unordered by many distinct lines. */
  size_t n = OVL_RACES_LIST_MAX + 7, cap = 64 + n * 24, len = 0;
  char *text = malloc(cap);
  ovl_program *p;
  ovl_races *r;
  char *t;
  ck_assert_ptr_nonnull(text);
  len += (size_t)snprintf(text + len, cap - len,
                          "x = data(shape=[4], init=uniform)\n"
                          "s = c_allreduce_sum(x, ring_id=0)\n");
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(text + len, cap - len, "y = assign(s)\n");
  p = parse(text, 2);
  free(text);
  r = check(p);
  ck_assert_uint_eq(ovl_races_count(r), OVL_RACES_LIST_MAX);
  ck_assert_uint_eq(ovl_races_more(r), 7);
  t = format(r, p, 0);
  ck_assert_ptr_nonnull(strstr(t, "\nand 7 more unordered pairs not listed "
                                  "(the list stops at 10000 races)\n"
                                  "10000 races in t.sched (2 ranks)\n"));
  free(t);
  t = format(r, p, 1);
  ck_assert(json_ok(t));
  ck_assert_ptr_nonnull(strstr(t, "\"count\":10000,\"more\":7}"));
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

START_TEST(sync_mode_of_bad_schedules_is_clean) {
  const char *texts[] = {
      missing_wait_compute,
      "x = data(shape=[4], init=uniform)\n"
      "c = assign(x)\n"
      "c_allreduce_sum(c, ring_id=0)\n"
      "c_allreduce_sum(c, ring_id=1)\n"
      "d = scale(c, scale=2.0)\n"
      "fetch(c, d)\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    ovl_program *p = parse(texts[i], 2), *q = NULL;
    ovl_error err = {0};
    ovl_races *r = check(p);
    ck_assert_uint_ge(ovl_races_count(r), 1);
    ovl_races_free(r);
    ck_assert_int_eq(ovl_program_transform(p, OVL_MODE_SYNC, &q, &err),
                     OVL_OK);
    r = check(q);
    ck_assert_uint_eq(ovl_races_count(r), 0);
    ovl_races_free(r);
    ovl_program_free(q);
    ovl_program_free(p);
  }
}
END_TEST

static Suite *race_suite(void) {
  Suite *s = suite_create("race");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, seed_is_clean_in_async_and_sync_modes);
  tcase_add_test(tc, missing_wait_compute_full_report);
  tcase_add_test(tc, missing_wait_compute_fix_and_fixed_twin);
  tcase_add_test(tc, missing_wait_comm_before_compute_consumer);
  tcase_add_test(tc, fetch_of_comm_result_without_wait_comm);
  tcase_add_test(tc, sync_comm_stream_makes_fetch_clean);
  tcase_add_test(tc, write_to_buffer_a_pending_collective_reads);
  tcase_add_test(tc, cross_ring);
  tcase_add_test(tc, read_read_never_races);
  tcase_add_test(tc, in_place_is_one_write);
  tcase_add_test(tc, same_race_reported_once);
  tcase_add_test(tc, host_ordering);
  tcase_add_test(tc, sorted_and_stable_output);
  tcase_add_test(tc, sort_order_is_by_first_line);
  tcase_add_test(tc, clean_report_text);
  tcase_add_test(tc, json_is_well_formed);
  tcase_add_test(tc, event_ops_order_streams);
  tcase_add_test(tc, wait_on_never_recorded_event_adds_nothing);
  tcase_add_test(tc, never_recorded_note_only_where_it_applies);
  tcase_add_test(tc, re_recorded_event_no_longer_covers_write);
  tcase_add_test(tc, compute_on_comm_stream_and_stream_sync);
  tcase_add_test(tc, event_ops_in_both_directions);
  tcase_add_test(tc, bad_arguments_are_rejected);
  tcase_add_test(tc, list_is_capped);
  tcase_add_test(tc, sync_mode_of_bad_schedules_is_clean);
  suite_add_tcase(s, tc);

  tc = tcase_create("json strings");
  tcase_add_test(tc, json_report_of_a_latin1_path);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(race_suite()); }
