/* Transforms: sync, async, comp, comm (docs/ARCHITECTURE.md, "Modes"). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
  ovl_parse_opts po = {.nranks = 2};
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
  ovl_parse_opts po = {.nranks = 2};
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
