/* Transforms: sync, async, comp, comm (docs/ARCHITECTURE.md, "Modes"). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/op.h"

static const char seed_text[] =
    "a = data(shape=[4, 8], init=uniform)\n"
    "b = assign(a)\n"
    "c = elementwise_add(a, b)\n"
    "c_wait_compute(c, ring_id=0)\n"
    "repeat 3 {\n"
    "  c_allreduce_sum(c, ring_id=0)\n"
    "  d = scale(b, scale=2.0)\n"
    "}\n"
    "delay(us=10, stream=comm, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n"
    "c_sync_comm_stream(c, ring_id=0)\n"
    "out = elementwise_sub(c, d)\n"
    "fetch(out)\n";

static ovl_program *seed;

static void setup(void) {
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_error err = {0};
  ovl_status st = ovl_program_parse(seed_text, strlen(seed_text), "t.sched",
                                    &po, &seed, &err);
  ck_assert_msg(st == OVL_OK, "%s", err.msg);
}

static void teardown(void) { ovl_program_free(seed); }

static ovl_program *xform(ovl_mode mode) {
  ovl_program *p = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_program_transform(seed, mode, &p, &err), OVL_OK);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* Ops whose main primitive (core/lower.c) is of `kind`: kernels are the
 * compute ops, collectives the communication. */
static size_t count_prim(const ovl_program *p, ovl__prim_kind kind) {
  size_t n = 0;
  for (size_t i = 0; i < p->nops; i++)
    n += p->prims[ovl__op_main_prim(p, i)].kind == kind;
  return n;
}

static size_t count_op(const ovl_program *p, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < p->nops; i++)
    n += strcmp(p->ops[i].def->name, name) == 0;
  return n;
}

static bool is_prim(const ovl_program *p, size_t i, ovl__prim_kind kind) {
  return p->prims[ovl__op_main_prim(p, i)].kind == kind;
}

/* The stream of op i's main primitive. */
static int op_stream(const ovl_program *p, size_t i) {
  return p->prims[ovl__op_main_prim(p, i)].stream;
}

START_TEST(async_is_the_schedule_as_written) {
  ovl_program *p = xform(OVL_MODE_ASYNC);
  ck_assert_uint_eq(p->nops, seed->nops);
  for (size_t i = 0; i < p->nops; i++) {
    ck_assert_ptr_eq(p->ops[i].def, seed->ops[i].def);
    ck_assert_int_eq(p->ops[i].line, seed->ops[i].line);
    ck_assert_int_eq(op_stream(p, i), op_stream(seed, i));
  }
  ovl_program_free(p);
}
END_TEST

START_TEST(sync_moves_collectives_to_calc_and_drops_waits) {
  ovl_program *p = xform(OVL_MODE_SYNC);
  ck_assert_uint_eq(count_op(p, "c_wait_compute"), 0);
  ck_assert_uint_eq(count_op(p, "c_wait_comm"), 0);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_COLL), 3);
  ck_assert_uint_eq(p->nops, seed->nops - 2);
  for (size_t i = 0; i < p->nops; i++) {
    if (!is_prim(p, i, OVL_PRIM_COLL))
      continue;
    ck_assert(p->ops[i].use_calc_stream);
    ck_assert_int_eq(op_stream(p, i), OVL_STREAM_CALC);
    ck_assert_int_eq(p->ops[i].stream, OVL_STREAM_CALC);
  }
  /* The source is untouched. */
  ck_assert_uint_eq(count_op(seed, "c_wait_comm"), 1);
  ck_assert_int_eq(op_stream(seed, 3), OVL_STREAM_COMM(0));
  ck_assert_int_eq(p->nrings, seed->nrings);
  ovl_program_free(p);
}
END_TEST

START_TEST(comp_drops_collectives_only) {
  ovl_program *p = xform(OVL_MODE_COMP);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_COLL), 0);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_KERNEL),
                    count_prim(seed, OVL_PRIM_KERNEL));
  ck_assert_uint_eq(p->nops, seed->nops - 3);
  ck_assert_int_eq(p->nrings, 1);
  ovl_program_free(p);
}
END_TEST

START_TEST(comm_drops_compute_only) {
  ovl_program *p = xform(OVL_MODE_COMM);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_KERNEL), 0);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_COLL), 3);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_DELAY), 1);
  ck_assert_uint_eq(count_op(p, "fetch"), 1);
  ck_assert_uint_eq(p->nops,
                    seed->nops - count_prim(seed, OVL_PRIM_KERNEL));
  ovl_program_free(p);
}
END_TEST

START_TEST(transform_keeps_vars_and_fetches) {
  for (ovl_mode m = 0; m < OVL__MODE_COUNT; m++) {
    ovl_program *p = xform(m);
    ck_assert_uint_eq(p->nvars, seed->nvars);
    ck_assert_uint_eq(p->nfetch, seed->nfetch);
    for (size_t i = 0; i < p->nvars; i++)
      ck_assert_str_eq(p->vars[i].name, seed->vars[i].name);
    ck_assert_str_eq(ovl_program_filename(p), "t.sched");
    ovl_program_free(p);
  }
}
END_TEST

/* A stream program of its own: compute on a comm stream, named events,
 * stream_sync. */
static const char generic_text[] =
    "a = data(shape=[8], init=uniform)\n"
    "b = scale(a, scale=3.0)\n"
    "event_record(b, event=b_ready, stream=calc)\n"
    "stream_wait_event(event=b_ready, stream=comm, ring_id=0)\n"
    "c = scale(b, scale=2.0, stream=comm, ring_id=0)\n"
    "c_allreduce_sum(c, ring_id=0)\n"
    "event_record(event=c_done, stream=comm, ring_id=0)\n"
    "c_wait_comm(c, ring_id=0)\n"
    "stream_wait_event(event=c_done, stream=calc)\n"
    "stream_sync(stream=comm, ring_id=0)\n"
    "fetch(c)\n";

static ovl_program *parse_generic(void) {
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_error err = {0};
  ovl_program *p = NULL;
  ovl_status st = ovl_program_parse(generic_text, strlen(generic_text),
                                    "g.sched", &po, &p, &err);
  ck_assert_msg(st == OVL_OK, "%s", err.msg);
  return p;
}

static ovl_program *xform_of(const ovl_program *prog, ovl_mode mode) {
  ovl_program *p = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_program_transform(prog, mode, &p, &err), OVL_OK);
  return p;
}

/* sync rewrites Paddle's ops only: the collective moves to calc and
 * c_wait_comm goes; the generic ops and the compute op's comm stream stay
 * as written. */
START_TEST(sync_keeps_generic_stream_ops) {
  ovl_program *g = parse_generic();
  ovl_program *p = xform_of(g, OVL_MODE_SYNC);
  ck_assert_uint_eq(p->nops, g->nops - 1);
  ck_assert_uint_eq(count_op(p, "c_wait_comm"), 0);
  ck_assert_uint_eq(count_op(p, "event_record"), 2);
  ck_assert_uint_eq(count_op(p, "stream_wait_event"), 2);
  ck_assert_uint_eq(count_op(p, "stream_sync"), 1);
  for (size_t i = 0, j = 0; i < g->nops; i++) {
    const ovl__op *o = &g->ops[i];
    if (strcmp(o->def->name, "c_wait_comm") == 0)
      continue;
    const ovl__op *q = &p->ops[j];
    ck_assert_ptr_eq(q->def, o->def);
    ck_assert_int_eq(q->event, o->event);
    if (is_prim(g, i, OVL_PRIM_COLL))
      ck_assert_int_eq(op_stream(p, j), OVL_STREAM_CALC);
    else
      ck_assert_int_eq(op_stream(p, j), op_stream(g, i));
    j++;
  }
  ck_assert_int_eq(op_stream(p, 3), OVL_STREAM_COMM(0));
  /* The named events are copied, not shared. */
  ck_assert_uint_eq(p->nevents, 2);
  ck_assert_str_eq(p->events[0], "b_ready");
  ck_assert_str_eq(p->events[1], "c_done");
  ck_assert_ptr_ne(p->events[0], g->events[0]);
  ovl_program_free(p);
  ovl_program_free(g);
}
END_TEST

/* comm drops every compute op, on whatever stream; comp drops the
 * collective only. Both keep the generic ops and the events. */
START_TEST(comm_and_comp_with_generic_ops) {
  ovl_program *g = parse_generic();
  ovl_program *p = xform_of(g, OVL_MODE_COMM);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_KERNEL), 0);
  ck_assert_uint_eq(p->nops, g->nops - 2);
  ck_assert_uint_eq(count_op(p, "event_record"), 2);
  ck_assert_uint_eq(count_op(p, "stream_wait_event"), 2);
  ck_assert_uint_eq(count_op(p, "stream_sync"), 1);
  ck_assert_uint_eq(p->nevents, 2);
  ovl_program_free(p);
  p = xform_of(g, OVL_MODE_COMP);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_COLL), 0);
  ck_assert_uint_eq(count_prim(p, OVL_PRIM_KERNEL), 2);
  ck_assert_uint_eq(p->nops, g->nops - 1);
  ck_assert_int_eq(p->nrings, 1);
  ovl_program_free(p);
  p = xform_of(g, OVL_MODE_ASYNC);
  ck_assert_uint_eq(p->nops, g->nops);
  ck_assert_str_eq(p->events[1], "c_done");
  ovl_program_free(p);
  ovl_program_free(g);
}
END_TEST

START_TEST(transform_rejects_bad_mode) {
  ovl_program *p = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_program_transform(seed, OVL__MODE_COUNT, &p, &err),
                   OVL_EINVAL);
  ck_assert_ptr_null(p);
}
END_TEST

START_TEST(mode_names) {
  ck_assert_str_eq(ovl_mode_name(OVL_MODE_SYNC), "sync");
  ck_assert_str_eq(ovl_mode_name(OVL_MODE_ASYNC), "async");
  ck_assert_str_eq(ovl_mode_name(OVL_MODE_COMP), "comp");
  ck_assert_str_eq(ovl_mode_name(OVL_MODE_COMM), "comm");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Edits: an op inserted into a bound program (the race replay's       */
/* delay).                                                             */
/* ------------------------------------------------------------------ */

/* The seed's op i, by name, stream and line, for comparisons. */
static void assert_same_op(const ovl_program *a, size_t i,
                           const ovl_program *b, size_t j) {
  ck_assert_ptr_eq(a->ops[i].def, b->ops[j].def);
  ck_assert_int_eq(a->ops[i].line, b->ops[j].line);
  ck_assert_int_eq(a->ops[i].col, b->ops[j].col);
  ck_assert_int_eq(op_stream(a, i), op_stream(b, j));
}

/* A delay before the first allreduce (op 3), on its comm stream: one more
 * op, there, at the allreduce's source position; every other op as it was,
 * shifted; the lowering made again; the original left alone. */
START_TEST(insert_delay_before_an_op) {
  ovl_program *p = NULL;
  ovl_error err = {0};
  size_t at = 3, n;
  const ovl__prim *pr;
  ck_assert_str_eq(seed->ops[at].def->name, "c_allreduce_sum");
  ck_assert_int_eq(ovl__program_insert_delay(seed, at, OVL_STREAM_COMM(0),
                                             20000.0, &p, &err),
                   OVL_OK);
  ck_assert_uint_eq(p->nops, seed->nops + 1);
  ck_assert_str_eq(p->ops[at].def->name, "delay");
  ck_assert_double_eq(p->ops[at].us, 20000.0);
  ck_assert_int_eq(p->ops[at].ring_id, 0);
  ck_assert_int_eq(p->ops[at].out, -1);
  ck_assert_int_eq(p->ops[at].nin, 0);
  ck_assert_int_eq(p->ops[at].line, seed->ops[at].line);
  ck_assert_int_eq(p->ops[at].col, seed->ops[at].col);
  pr = ovl__op_prims(p, at, &n);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(pr[0].kind, OVL_PRIM_DELAY);
  ck_assert_int_eq(pr[0].stream, OVL_STREAM_COMM(0));
  ck_assert_int_eq(ovl__op_work_stream(p, at), OVL_STREAM_COMM(0));
  for (size_t i = 0; i < at; i++)
    assert_same_op(p, i, seed, i);
  for (size_t i = at; i < seed->nops; i++)
    assert_same_op(p, i + 1, seed, i);
  ck_assert_uint_eq(p->nprims, seed->nprims + 1);
  ck_assert_uint_eq(p->prim_first[p->nops], p->nprims);
  ck_assert_uint_eq(p->nvars, seed->nvars);
  ck_assert_uint_eq(p->nfetch, seed->nfetch);
  ck_assert_int_eq(p->nstreams, seed->nstreams);
  /* The original is untouched: its op there is still the allreduce. */
  ck_assert_str_eq(seed->ops[at].def->name, "c_allreduce_sum");
  ck_assert_uint_eq(seed->prim_first[seed->nops], seed->nprims);
  ovl_program_free(p);
}
END_TEST

/* At the start (before op 0) on calc, and at the end (before = nops),
 * which takes the last op's position. */
START_TEST(insert_delay_at_either_end) {
  ovl_program *p = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl__program_insert_delay(seed, 0, OVL_STREAM_CALC, 5.0,
                                             &p, &err),
                   OVL_OK);
  ck_assert_str_eq(p->ops[0].def->name, "delay");
  ck_assert_int_eq(op_stream(p, 0), OVL_STREAM_CALC);
  ck_assert_int_eq(p->ops[0].line, seed->ops[0].line);
  assert_same_op(p, 1, seed, 0);
  ovl_program_free(p);
  p = NULL;
  ck_assert_int_eq(ovl__program_insert_delay(seed, seed->nops,
                                             OVL_STREAM_CALC, 0.0, &p, &err),
                   OVL_OK);
  ck_assert_uint_eq(p->nops, seed->nops + 1);
  ck_assert_str_eq(p->ops[seed->nops].def->name, "delay");
  ck_assert_int_eq(p->ops[seed->nops].line, seed->ops[seed->nops - 1].line);
  assert_same_op(p, seed->nops - 1, seed, seed->nops - 1);
  ovl_program_free(p);
}
END_TEST

/* A user stream (stream=side) is a stream like any other. */
START_TEST(insert_delay_on_a_user_stream) {
  static const char text[] =
      "x = data(shape=[4], init=uniform)\n"
      "y = scale(x, scale=2.0, stream=side)\n"
      "fetch(x)\n";
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_program *g = NULL, *p = NULL;
  ovl_error err = {0};
  int side;
  ck_assert_int_eq(ovl_program_parse(text, strlen(text), "u.sched", &po, &g,
                                     &err),
                   OVL_OK);
  side = op_stream(g, 0);
  ck_assert_str_eq(ovl__stream_name(g, side), "side");
  ck_assert_int_eq(ovl__program_insert_delay(g, 0, side, 10.0, &p, &err),
                   OVL_OK);
  ck_assert_int_eq(op_stream(p, 0), side);
  ck_assert_int_eq(p->ops[0].ring_id, 0);
  ovl_program_free(p);
  ovl_program_free(g);
}
END_TEST

/* The race checker sees the same races in the edited program: a delay
 * orders nothing. The race's ops move up by one past the insertion. */
START_TEST(insert_delay_keeps_the_races) {
  static const char text[] =
      "x = data(shape=[4], init=uniform)\n"
      "c = scale(x, scale=3.0)\n"
      "c_allreduce_sum(c, ring_id=0)\n"
      "c_wait_comm(c, ring_id=0)\n"
      "fetch(c)\n";
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_program *g = NULL, *p = NULL;
  ovl_races *r0 = NULL, *r1 = NULL;
  ovl_race_info a, b;
  ovl_error err = {0};
  ck_assert_int_eq(ovl_program_parse(text, strlen(text), "r.sched", &po, &g,
                                     &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_race_check(g, &r0, &err), OVL_OK);
  ck_assert_uint_eq(ovl_races_count(r0), 1);
  ck_assert_int_eq(ovl_races_get(r0, 0, &a), 0);
  ck_assert_int_eq(ovl__program_insert_delay(g, a.first.op, a.first.stream,
                                             100.0, &p, &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_race_check(p, &r1, &err), OVL_OK);
  ck_assert_uint_eq(ovl_races_count(r1), 1);
  ck_assert_int_eq(ovl_races_get(r1, 0, &b), 0);
  ck_assert_uint_eq(b.first.op, a.first.op + 1);
  ck_assert_uint_eq(b.second.op, a.second.op + 1);
  ck_assert_int_eq(b.first.line, a.first.line);
  ck_assert_str_eq(b.var, a.var);
  ovl_races_free(r0);
  ovl_races_free(r1);
  ovl_program_free(p);
  ovl_program_free(g);
}
END_TEST

/* Out of range: the position, the stream (the host is none), the delay.
 * Nothing is made. */
START_TEST(insert_delay_refuses_bad_arguments) {
  ovl_program *p = NULL;
  ovl_error err = {0};
  ck_assert_int_eq(ovl__program_insert_delay(seed, seed->nops + 1,
                                             OVL_STREAM_CALC, 1.0, &p, &err),
                   OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "the program has"));
  ck_assert_int_eq(ovl__program_insert_delay(seed, 0, OVL_STREAM_HOST, 1.0,
                                             &p, &err),
                   OVL_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "not the host"));
  ck_assert_int_eq(ovl__program_insert_delay(seed, 0, seed->nstreams, 1.0,
                                             &p, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__program_insert_delay(seed, 0, OVL_STREAM_CALC, -1.0,
                                             &p, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__program_insert_delay(seed, 0, OVL_STREAM_CALC,
                                             NAN, &p, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__program_insert(seed, 0, NULL, &p, &err), OVL_EINVAL);
  ck_assert_ptr_null(p);
}
END_TEST

static Suite *transform_suite(void) {
  Suite *s = suite_create("transform");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, async_is_the_schedule_as_written);
  tcase_add_test(tc, sync_moves_collectives_to_calc_and_drops_waits);
  tcase_add_test(tc, comp_drops_collectives_only);
  tcase_add_test(tc, comm_drops_compute_only);
  tcase_add_test(tc, transform_keeps_vars_and_fetches);
  tcase_add_test(tc, transform_rejects_bad_mode);
  tcase_add_test(tc, sync_keeps_generic_stream_ops);
  tcase_add_test(tc, comm_and_comp_with_generic_ops);
  tcase_add_test(tc, mode_names);
  tcase_add_test(tc, insert_delay_before_an_op);
  tcase_add_test(tc, insert_delay_at_either_end);
  tcase_add_test(tc, insert_delay_on_a_user_stream);
  tcase_add_test(tc, insert_delay_keeps_the_races);
  tcase_add_test(tc, insert_delay_refuses_bad_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(transform_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
