/*
 * The checks of ranks that differ (issue 13): the mismatch check, the
 * deadlock check (public API: ovl_mismatch_check, ovl_deadlock_check),
 * races per rank, the flight record's first disagreement
 * (ovl__match_first_disagreement), and the pipeline stopping on a finding.
 * tests/order.sh checks the tool on the schedules of tests/order/.
 */
#include <math.h>

#include "check/check.h"
#include "check/match.h"
#include "check_util.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static ovl_mismatches *mismatches_of(const ovl_program *p) {
  ovl_mismatches *m = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_mismatch_check(p, &m, &err) == OVL_OK, "%s", err.msg);
  ck_assert_ptr_nonnull(m);
  return m;
}

static ovl_deadlocks *deadlocks_of(const ovl_program *p) {
  ovl_deadlocks *d = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_deadlock_check(p, &d, &err) == OVL_OK, "%s", err.msg);
  ck_assert_ptr_nonnull(d);
  return d;
}

static ovl_races *races_of(const ovl_program *p) {
  ovl_races *r = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_race_check(p, &r, &err) == OVL_OK, "%s", err.msg);
  return r;
}

static ovl_program *form(const ovl_program *p, ovl_mode mode) {
  ovl_program *f = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_program_transform(p, mode, &f, &err) == OVL_OK, "%s",
                err.msg);
  return f;
}

static char *mm_text(const ovl_mismatches *m, const ovl_program *p,
                     int json) {
  char *t = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_mismatches_format(m, p, json, &t, &err) == OVL_OK, "%s",
                err.msg);
  return t;
}

static char *dl_text(const ovl_deadlocks *d, const ovl_program *p,
                     int json) {
  char *t = NULL;
  ovl_error err = {0};
  ck_assert_msg(ovl_deadlocks_format(d, p, json, &t, &err) == OVL_OK, "%s",
                err.msg);
  return t;
}

static ovl_mismatch_finding mm_get(const ovl_mismatches *m, size_t i) {
  ovl_mismatch_finding f;
  ck_assert_int_eq(ovl_mismatches_get(m, i, &f), 0);
  return f;
}

static ovl_deadlock_finding dl_get(const ovl_deadlocks *d, size_t i) {
  ovl_deadlock_finding f;
  ck_assert_int_eq(ovl_deadlocks_get(d, i, &f), 0);
  return f;
}

#define DATA(v, n)                                                           \
  #v " = data(shape=[" #n "], dtype=float32, init=uniform, seed=1)\n"

/* ------------------------------------------------------------------ */
/* SPMD programs                                                       */
/* ------------------------------------------------------------------ */

START_TEST(spmd_has_no_mismatch_and_no_deadlock) {
  char *text = tu_read_source_file("schedules/seed.sched"), *t;
  ovl_program *p = tu_parse(text, "seed.sched", 4);
  ovl_mismatches *m = mismatches_of(p);
  ovl_deadlocks *d = deadlocks_of(p);
  ck_assert_uint_eq(ovl_mismatches_count(m), 0);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 0);
  t = mm_text(m, p, 0);
  /* 65 collectives (64 in the loop, the seed's fetch is not one) on 4
   * ranks, counted without building the matching. */
  ck_assert_str_eq(t, "no mismatches in seed.sched (4 ranks, 256 comm ops "
                      "checked)\n");
  free(t);
  t = dl_text(d, p, 0);
  ck_assert_str_eq(t, "no deadlocks in seed.sched (4 ranks)\n");
  free(t);
  t = mm_text(m, p, 1);
  ck_assert(tu_json_ok(t));
  ck_assert_str_eq(t, "{\"schedule\":\"seed.sched\",\"ranks\":4,"
                      "\"comm_ops\":256,\"mismatches\":[],\"count\":0,"
                      "\"more\":0}\n");
  free(t);
  t = dl_text(d, p, 1);
  ck_assert(tu_json_ok(t));
  ck_assert_str_eq(t, "{\"schedule\":\"seed.sched\",\"ranks\":4,"
                      "\"deadlocks\":[],\"count\":0,\"more\":0,"
                      "\"blocked\":0}\n");
  free(t);
  ovl_mismatches_free(m);
  ovl_deadlocks_free(d);
  ovl_program_free(p);
  free(text);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Mismatches                                                          */
/* ------------------------------------------------------------------ */

static const char swapped[] =
    DATA(g, 16)                                              /* 1 */
    DATA(h, 16)                                              /* 2 */
    "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"             /* 3 */
    "c_allreduce_sum(h, ring_id=0)\n"                        /* 4 */
    "c_allreduce_sum(g, ring_id=0, ranks=[1])\n"             /* 5 */
    "c_wait_comm(g, ring_id=0)\n"                            /* 6 */
    "fetch(g, h)\n";                                         /* 7 */

START_TEST(collectives_in_opposite_orders) {
  ovl_program *p = tu_parse(swapped, "s.sched", 2);
  ovl_mismatches *m = mismatches_of(p);
  ovl_mismatch_finding f;
  char *t;
  ck_assert_uint_eq(ovl_mismatches_count(m), 2);
  ck_assert_uint_eq(ovl_mismatches_more(m), 0);
  f = mm_get(m, 0);
  ck_assert_int_eq(f.kind, OVL_MISMATCH_COLLECTIVE);
  ck_assert_int_eq(f.ring, 0);
  ck_assert_uint_eq(f.index, 1);
  ck_assert_int_eq(f.sender, -1);
  ck_assert_uint_eq(f.differs, OVL_DIFFERS_VAR);
  ck_assert_int_eq(f.same_size, 1);
  ck_assert_uint_eq(f.occurrences, 1);
  ck_assert_uint_eq(f.ranks, 3);
  ck_assert_int_eq(f.nsides, 2);
  ck_assert_int_eq(f.sides[0].rank, 0);
  ck_assert_int_eq(f.sides[0].issues, 1);
  ck_assert_str_eq(f.sides[0].op_name, "c_allreduce_sum");
  ck_assert_int_eq(f.sides[0].line, 3);
  ck_assert_int_eq(f.sides[0].col, 1);
  ck_assert_str_eq(f.sides[0].var, "g");
  ck_assert_str_eq(f.sides[0].out_var, "g");
  ck_assert_int_eq(f.sides[0].count, 16);
  ck_assert_int_eq(f.sides[0].dtype, OVL_DTYPE_FLOAT32);
  ck_assert_int_eq(f.sides[0].root, -1);
  ck_assert_int_eq(f.sides[0].peer, -1);
  ck_assert_int_eq(f.sides[0].stream, 1);
  ck_assert_uint_eq(f.sides[0].tag, 1);
  ck_assert_int_eq(f.sides[1].rank, 1);
  ck_assert_str_eq(f.sides[1].var, "h");
  ck_assert_int_eq(f.sides[1].line, 4);
  f = mm_get(m, 1);
  ck_assert_uint_eq(f.index, 2);
  ck_assert_int_eq(f.sides[0].line, 4);
  ck_assert_int_eq(f.sides[1].line, 5);
  ck_assert_uint_eq(f.sides[1].tag, 2);
  t = mm_text(m, p, 0);
  ck_assert_str_eq(
      t,
      "mismatch 1: ring 0 collective #1: rank 0 issues c_allreduce_sum of "
      "'g' (float32, 16 elements) at s.sched:3:1, rank 1 issues "
      "c_allreduce_sum of 'h' (float32, 16 elements) at s.sched:4:1; they "
      "differ in variable (the same size: a run would mix buffers "
      "silently)\n"
      "mismatch 2: ring 0 collective #2: rank 0 issues c_allreduce_sum of "
      "'h' (float32, 16 elements) at s.sched:4:1, rank 1 issues "
      "c_allreduce_sum of 'g' (float32, 16 elements) at s.sched:5:1; they "
      "differ in variable (the same size: a run would mix buffers "
      "silently)\n"
      "2 mismatches in s.sched (2 ranks)\n");
  free(t);
  t = mm_text(m, p, 1);
  ck_assert_msg(tu_json_ok(t), "not JSON: %s", t);
  ck_assert_ptr_nonnull(strstr(
      t, "{\"kind\":\"collective\",\"ring\":0,\"index\":1,\"sender\":-1,"
         "\"receiver\":-1,\"differs\":[\"variable\"],\"same_size\":true,"
         "\"sides\":[{\"rank\":0,\"issues\":true,\"op\":\"c_allreduce_sum\","
         "\"line\":3,\"col\":1,\"var\":\"g\",\"out_var\":\"g\",\"dtype\":"
         "\"float32\",\"count\":16,\"root\":null,\"peer\":null,\"stream\":"
         "\"comm[0]\",\"tag\":1},"));
  free(t);
  ovl_mismatches_free(m);
  /* Every form that keeps the collectives has them; comp has none. */
  for (ovl_mode mode = OVL_MODE_ASYNC; mode < OVL__MODE_COUNT; mode++) {
    ovl_program *fp = form(p, mode);
    m = mismatches_of(fp);
    ck_assert_uint_eq(ovl_mismatches_count(m), mode == OVL_MODE_COMP ? 0 : 2);
    ovl_mismatches_free(m);
    ovl_program_free(fp);
  }
  ovl_program_free(p);
}
END_TEST

/* The same collectives from different lines are no mismatch. */
START_TEST(same_collective_from_different_lines_matches) {
  ovl_program *p = tu_parse(DATA(g, 16)
                            "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                            "c_allreduce_sum(g, ring_id=0, ranks=[1:nranks])\n"
                            "c_wait_comm(g, ring_id=0)\n"
                            "fetch(g)\n",
                            "t.sched", 3);
  ovl_mismatches *m = mismatches_of(p);
  ovl_deadlocks *d = deadlocks_of(p);
  ck_assert_uint_eq(ovl_mismatches_count(m), 0);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 0);
  ovl_mismatches_free(m);
  ovl_deadlocks_free(d);
  ovl_program_free(p);
}
END_TEST

/* What differs: op, reduction, count, dtype, root; and a rank that never
 * issues it. */
START_TEST(what_differs) {
  static const struct {
    const char *text;
    unsigned differs;
    int same_size;
  } cases[] = {
      {DATA(g, 16) "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                   "c_broadcast(g, root=0, ring_id=0, ranks=[1])\n",
       OVL_DIFFERS_OP | OVL_DIFFERS_ROOT, 1},
      {DATA(g, 16) "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                   "c_allreduce_prod(g, ring_id=0, ranks=[1])\n",
       OVL_DIFFERS_REDOP, 1},
      {DATA(g, 16) DATA(h, 8) "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                              "c_allreduce_sum(h, ring_id=0, ranks=[1])\n",
       OVL_DIFFERS_COUNT, 0},
      {DATA(g, 16) "h = data(shape=[16], dtype=float64, init=fill, value=1)\n"
                   "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                   "c_allreduce_sum(h, ring_id=0, ranks=[1])\n",
       OVL_DIFFERS_DTYPE, 0},
      {DATA(g, 16) "c_broadcast(g, root=0, ring_id=0, ranks=[0])\n"
                   "c_broadcast(g, root=1, ring_id=0, ranks=[1])\n",
       OVL_DIFFERS_ROOT, 1},
      {DATA(g, 16) "c_allreduce_sum(g, ring_id=0, ranks=[0])\n",
       OVL_DIFFERS_MISSING, 0},
      {DATA(g, 16) "y = c_allgather(g, ring_id=0, ranks=[0])\n"
                   "z = c_allgather(g, ring_id=0, ranks=[1])\n",
       OVL_DIFFERS_VAR, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ovl_program *p = tu_parse(cases[i].text, "t.sched", 2);
    ovl_mismatches *m = mismatches_of(p);
    ovl_mismatch_finding f;
    ck_assert_msg(ovl_mismatches_count(m) == 1, "case %zu: %zu", i,
                  ovl_mismatches_count(m));
    f = mm_get(m, 0);
    ck_assert_msg(f.differs == cases[i].differs, "case %zu: differs 0x%x",
                  i, f.differs);
    ck_assert_msg(f.same_size == cases[i].same_size, "case %zu: same_size",
                  i);
    if (cases[i].differs == OVL_DIFFERS_MISSING) {
      ck_assert_int_eq(f.sides[1].issues, 0);
      ck_assert_ptr_null(f.sides[1].op_name);
      ck_assert_uint_eq(f.sides[1].tag, 0);
      ck_assert_ptr_nonnull(strstr(f.message, ", rank 1 never issues it (it "
                                              "issues 0 collectives on ring "
                                              "0)"));
    }
    ovl_mismatches_free(m);
    ovl_program_free(p);
  }
}
END_TEST

/* A mismatch inside a repeat block is one finding, with its count; its
 * ranks are every rank it occurs on. */
START_TEST(repeated_mismatch_is_one_finding) {
  ovl_program *p = tu_parse(DATA(g, 16) DATA(h, 16)
                            "repeat 5 {\n"
                            "  c_allreduce_sum(g, ring_id=1, ranks=[0, 2])\n"
                            "  c_allreduce_sum(h, ring_id=1, ranks=[1])\n"
                            "}\n",
                            "r.sched", 3);
  ovl_mismatches *m = mismatches_of(p);
  ovl_mismatch_finding f;
  char *t;
  ck_assert_uint_eq(ovl_mismatches_count(m), 1);
  f = mm_get(m, 0);
  ck_assert_uint_eq(f.occurrences, 5);
  ck_assert_int_eq(f.ring, 1);
  ck_assert_uint_eq(f.ranks, 7);
  t = mm_text(m, p, 0);
  ck_assert_str_eq(t, "mismatch 1: ring 1 collective #1: ranks 0, 2 issue "
                      "c_allreduce_sum of 'g' (float32, 16 elements) at "
                      "r.sched:4:3, rank 1 issues c_allreduce_sum of 'h' "
                      "(float32, 16 elements) at r.sched:5:3; they differ "
                      "in variable (the same size: a run would mix buffers "
                      "silently) (5 times in the expanded program, among "
                      "ranks 0-2)\n"
                      "1 mismatch in r.sched (3 ranks)\n");
  free(t);
  ovl_mismatches_free(m);
  ovl_program_free(p);
}
END_TEST

START_TEST(sends_and_receives) {
  /* Rank 0 sends x twice to 1, y once to 2; rank 1 receives once (a
   * smaller buffer), rank 2 twice. */
  ovl_program *p = tu_parse(
      DATA(x, 16) DATA(y, 16)                                          /* 1-2 */
      "send_v2(x, peer=1, ring_id=0, ranks=[0])\n"                     /* 3 */
      "send_v2(x, peer=1, ring_id=0, ranks=[0])\n"                     /* 4 */
      "send_v2(y, peer=2, ring_id=0, ranks=[0])\n"                     /* 5 */
      "a = recv_v2(peer=0, out_shape=[8], ring_id=0, ranks=[1])\n"     /* 6 */
      "b = recv_v2(peer=0, out_shape=[16], ring_id=0, ranks=[2])\n"    /* 7 */
      "c = recv_v2(peer=0, out_shape=[16], ring_id=0, ranks=[2])\n",   /* 8 */
      "p.sched", 3);
  ovl_mismatches *m = mismatches_of(p);
  ovl_mismatch_finding f;
  ck_assert_uint_eq(ovl_mismatches_count(m), 3);
  /* By first tag: rank 0's send #1 to 1 (tag 1, pair differs), send #2
   * (tag 2, unmatched), rank 2's receive #2 (tag 2, unmatched). */
  f = mm_get(m, 0);
  ck_assert_int_eq(f.kind, OVL_MISMATCH_PAIR);
  ck_assert_int_eq(f.sender, 0);
  ck_assert_int_eq(f.receiver, 1);
  ck_assert_uint_eq(f.index, 1);
  ck_assert_uint_eq(f.differs, OVL_DIFFERS_COUNT);
  ck_assert_int_eq(f.same_size, 0);
  ck_assert_int_eq(f.nsides, 2);
  ck_assert_int_eq(f.sides[0].rank, 0);
  ck_assert_int_eq(f.sides[0].peer, 1);
  ck_assert_str_eq(f.sides[0].op_name, "send_v2");
  ck_assert_int_eq(f.sides[1].rank, 1);
  ck_assert_int_eq(f.sides[1].count, 8);
  ck_assert_str_eq(f.sides[1].out_var, "a");
  ck_assert_ptr_null(f.sides[1].var);
  ck_assert_str_eq(f.message,
                   "ring 0 send #1 from rank 0 to rank 1: rank 0 issues "
                   "send_v2 of 'x' (float32, 16 elements) at p.sched:3:1, "
                   "rank 1 issues recv_v2 into 'a' (float32, 8 elements) at "
                   "p.sched:6:5; they differ in count");
  f = mm_get(m, 1);
  ck_assert_int_eq(f.kind, OVL_MISMATCH_UNMATCHED_SEND);
  ck_assert_uint_eq(f.index, 2);
  ck_assert_int_eq(f.sides[1].issues, 0);
  ck_assert_str_eq(f.message,
                   "ring 0: rank 0 issues send_v2 of 'x' (float32, 16 "
                   "elements) to rank 1 at p.sched:4:1 (its send #2 to rank "
                   "1), and rank 1 never receives it (it posts 1 receive "
                   "from rank 0 on ring 0)");
  f = mm_get(m, 2);
  ck_assert_int_eq(f.kind, OVL_MISMATCH_UNMATCHED_RECV);
  ck_assert_int_eq(f.sender, 0);
  ck_assert_int_eq(f.receiver, 2);
  ck_assert_int_eq(f.sides[0].issues, 0);
  ck_assert_str_eq(f.message,
                   "ring 0: rank 2 issues recv_v2 into 'c' (float32, 16 "
                   "elements) from rank 0 at p.sched:8:5 (its receive #2 "
                   "from rank 0), and rank 0 never sends it (it issues 1 "
                   "send to rank 2 on ring 0)");
  ovl_mismatches_free(m);
  ovl_program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The flight record's first disagreement                              */
/* ------------------------------------------------------------------ */

START_TEST(first_disagreement) {
  ovl_program *p = tu_parse(
      DATA(g, 16) DATA(x, 16)
      "send_v2(x, peer=1, ring_id=0, ranks=[0])\n"       /* 3: tag 1 on 0 */
      "y = recv_v2(peer=0, out_shape=[16], ring_id=0, ranks=[1])\n" /* 4 */
      "c_allreduce_sum(g, ring_id=0)\n"                  /* 5: tag 2 */
      "c_allreduce_sum(x, ring_id=0, ranks=[1])\n"       /* 6: 1's tag 3 */
      "c_allreduce_sum(g, ring_id=1)\n"                  /* 7: ring 1 */
      "c_wait_comm(g, ring_id=0)\n"
      "c_wait_comm(g, ring_id=1)\n",
      "f.sched", 2);
  ovl__match m;
  ovl__disagreement d;
  ovl_error err = {0};
  int found = -1;
  ck_assert_int_eq(ovl__match_build(p, &m, &err), OVL_OK);
  ck_assert_int_eq(ovl__match_first_disagreement(&m, 0, &d, &found, &err),
                   OVL_OK);
  ck_assert_int_eq(found, 1);
  ck_assert_uint_eq(d.ranks, 3);
  ck_assert_uint_eq(d.tag[0], 0); /* rank 0 never issues it */
  ck_assert_uint_eq(d.tag[1], 3);
  ck_assert_uint_eq(d.item, ovl__match_tag_item(&m, 1, 0, 3));
  ck_assert_uint_eq(d.per_iter[0], 2);
  ck_assert_uint_eq(d.per_iter[1], 3);
  /* The lookups: by tag (within one iteration) and by (rank, op). */
  {
    uint32_t *of = malloc(2 * p->nops * sizeof *of);
    uint32_t it = ovl__match_tag_item(&m, 1, 0, 3);
    ck_assert_ptr_nonnull(of);
    ovl__match_item_table(&m, of);
    ck_assert_uint_ne(it, OVL__NONE);
    ck_assert_int_eq(p->ops[m.items[it].op].line, 6);
    ck_assert_uint_eq(of[1 * p->nops + m.items[it].op], it);
    ck_assert_uint_eq(of[0 * p->nops + m.items[it].op], OVL__NONE);
    ck_assert_int_eq(p->ops[m.items[it].op - 2].line, 4);
    ck_assert_uint_eq(of[0 * p->nops + m.items[it].op - 2],
                      OVL__NONE); /* line 4: the receive, rank 1 only */
    ck_assert_uint_ne(of[0 * p->nops + m.items[it].op - 1],
                      OVL__NONE); /* line 5 */
    ck_assert_int_eq(p->ops[m.items[it].op + 2].line, 8);
    ck_assert_uint_eq(of[0 * p->nops + m.items[it].op + 2],
                      OVL__NONE); /* line 8: a wait, no communication */
    it = ovl__match_tag_item(&m, 0, 0, 1);
    ck_assert_int_eq(p->ops[m.items[it].op].line, 3);
    ck_assert_uint_eq(of[0 * p->nops + m.items[it].op], it);
    ck_assert_uint_eq(ovl__match_tag_item(&m, 0, 0, 3), OVL__NONE);
    ck_assert_uint_eq(ovl__match_tag_item(&m, 0, 0, 0), OVL__NONE);
    ck_assert_uint_eq(ovl__match_ring_len(&m, 0, 1), 1);
    it = ovl__match_tag_item(&m, 0, 1, 1);
    ck_assert_int_eq(p->ops[m.items[it].op].line, 7);
    free(of);
  }
  ck_assert_str_eq(d.text, "ring 0 collective #2: rank 1 issues "
                           "c_allreduce_sum of 'x' (float32, 16 elements) at "
                           "f.sched:6:1, rank 0 never issues it (it issues 1 "
                           "collective on ring 0)");
  /* Ring 1 agrees. */
  ck_assert_int_eq(ovl__match_first_disagreement(&m, 1, &d, &found, &err),
                   OVL_OK);
  ck_assert_int_eq(found, 0);
  ck_assert_uint_eq(d.per_iter[0], 1);
  ck_assert_uint_eq(d.per_iter[1], 1);
  /* Out of range, and NULLs. */
  ck_assert_int_eq(ovl__match_first_disagreement(&m, 2, &d, &found, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__match_first_disagreement(NULL, 0, &d, &found, &err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl__match_first_disagreement(&m, 0, NULL, &found, &err),
                   OVL_EINVAL);
  ovl__match_free(&m);
  ovl_program_free(p);
}
END_TEST

/* The earliest disagreement, by tag, over collectives and sends. */
START_TEST(first_disagreement_is_the_earliest) {
  ovl_program *p = tu_parse(
      DATA(g, 16) DATA(x, 16)
      "c_allreduce_sum(g, ring_id=0)\n"                  /* tag 1 */
      "send_v2(x, peer=1, ring_id=0, ranks=[0])\n"       /* 0's tag 2 */
      "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"       /* 0's tag 3 */
      "c_allreduce_sum(x, ring_id=0, ranks=[1])\n"       /* 1's tag 2 */
      "c_wait_comm(g, ring_id=0)\n",
      "e.sched", 2);
  ovl__match m;
  ovl__disagreement d;
  ovl_error err = {0};
  int found = 0;
  ck_assert_int_eq(ovl__match_build(p, &m, &err), OVL_OK);
  ck_assert_int_eq(ovl__match_first_disagreement(&m, 0, &d, &found, &err),
                   OVL_OK);
  ck_assert_int_eq(found, 1);
  /* The collectives #2 (tags 3 and 2: earliest 2) and the send (tag 2):
   * the collective comes first in scan order at the same tag. */
  ck_assert_uint_eq(d.tag[0], 3);
  ck_assert_uint_eq(d.tag[1], 2);
  ck_assert_uint_eq(d.item, ovl__match_tag_item(&m, 1, 0, 2));
  ck_assert_ptr_nonnull(strstr(d.text, "ring 0 collective #2: "));
  ovl__match_free(&m);
  ovl_program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Deadlocks                                                           */
/* ------------------------------------------------------------------ */

static const char rings_opposite[] =
    DATA(g, 16)                                              /* 1 */
    DATA(h, 16)                                              /* 2 */
    "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"             /* 3 */
    "c_sync_comm_stream(g, ring_id=0, ranks=[0])\n"          /* 4 */
    "c_allreduce_sum(h, ring_id=1)\n"                        /* 5 */
    "c_sync_comm_stream(h, ring_id=1)\n"                     /* 6 */
    "c_allreduce_sum(g, ring_id=0, ranks=[1])\n"             /* 7 */
    "c_sync_comm_stream(g, ring_id=0, ranks=[1])\n"          /* 8 */
    "fetch(g, h)\n";                                         /* 9 */

START_TEST(rings_in_opposite_orders_through_host_syncs) {
  ovl_program *p = tu_parse(rings_opposite, "d.sched", 2);
  ovl_deadlocks *d = deadlocks_of(p);
  ovl_deadlock_finding f;
  char *t;
  ck_assert_uint_eq(ovl_deadlocks_count(d), 1);
  /* Both hosts and both comm streams on the cycle, and the comm stream
   * of each rank whose collective its host has not enqueued. */
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 6);
  f = dl_get(d, 0);
  ck_assert_uint_eq(f.nsteps, 4);
  ck_assert_uint_eq(f.occurrences, 1);
  ck_assert_int_eq(f.steps[0].rank, 0);
  ck_assert_str_eq(f.steps[0].stream_name, "comm[0]");
  ck_assert_int_eq(f.steps[0].stream, 1);
  ck_assert_int_eq(f.steps[0].line, 3);
  ck_assert_str_eq(f.steps[0].op_name, "c_allreduce_sum");
  ck_assert_int_eq(f.steps[0].ring, 0);
  ck_assert_uint_eq(f.steps[0].coll_index, 1);
  ck_assert_int_eq(f.steps[0].peer, -1);
  ck_assert_int_eq(f.steps[1].rank, 1);
  ck_assert_int_eq(f.steps[1].stream, -1);
  ck_assert_str_eq(f.steps[1].stream_name, "host");
  ck_assert_int_eq(f.steps[1].line, 6);
  ck_assert_int_eq(f.steps[1].ring, 1);
  ck_assert_uint_eq(f.steps[1].coll_index, 0);
  ck_assert_int_eq(f.steps[2].rank, 1);
  ck_assert_str_eq(f.steps[2].stream_name, "comm[1]");
  ck_assert_int_eq(f.steps[2].line, 5);
  ck_assert_int_eq(f.steps[3].rank, 0);
  ck_assert_str_eq(f.steps[3].stream_name, "host");
  ck_assert_int_eq(f.steps[3].line, 4);
  ck_assert_str_eq(
      f.message,
      "deadlock: rank 0 comm[0] waits at line 3 (c_allreduce_sum, ring 0 "
      "collective #1) for rank 1, whose host is blocked at line 6 "
      "(c_sync_comm_stream, ring 1) waiting for its comm[1], which is "
      "blocked at line 5 (c_allreduce_sum, ring 1 collective #1) waiting "
      "for rank 0, whose host is blocked at line 4 (c_sync_comm_stream, "
      "ring 0) waiting for rank 0 comm[0]");
  t = dl_text(d, p, 0);
  ck_assert_str_eq(t + strlen(t) - strlen("1 deadlock in d.sched (2 "
                                          "ranks)\n"),
                   "1 deadlock in d.sched (2 ranks)\n");
  ck_assert_ptr_nonnull(strstr(t, "deadlock 1: rank 0 comm[0] waits at "));
  free(t);
  t = dl_text(d, p, 1);
  ck_assert_msg(tu_json_ok(t), "not JSON: %s", t);
  ck_assert_ptr_nonnull(strstr(
      t, "{\"steps\":[{\"rank\":0,\"stream\":\"comm[0]\",\"op\":"
         "\"c_allreduce_sum\",\"line\":3,\"col\":1,\"ring\":0,"
         "\"coll_index\":1,\"peer\":null,\"in_group\":false,"
         "\"waits_for\":{\"rank\":1,\"op\":\"c_allreduce_sum\",\"line\":7,"
         "\"col\":1,\"after_line\":6,\"after_op\":\"c_sync_comm_stream\","
         "\"after_stream\":\"host\"}},"));
  /* A host sync waits for its stream, not to match a comm op. */
  ck_assert_ptr_nonnull(strstr(t, "\"in_group\":false,\"waits_for\":null}"));
  free(t);
  /* Both ends: rank 0's ring 0 collective waits to match rank 1's, which
   * rank 1's host issues only after its sync of ring 1 (line 6). */
  {
    ovl_deadlock_match mt;
    ck_assert_int_eq(ovl_deadlocks_match(d, 0, 0, &mt), 0);
    ck_assert_int_eq(mt.rank, 1);
    ck_assert_str_eq(mt.op_name, "c_allreduce_sum");
    ck_assert_int_eq(mt.line, 7);
    ck_assert_int_eq(mt.after_line, 6);
    ck_assert_int_eq(mt.after_stream, -1);
    ck_assert_int_eq(ovl_deadlocks_match(d, 0, 1, &mt), 0);
    ck_assert_int_eq(mt.rank, -1);
    ck_assert_int_eq(ovl_deadlocks_match(d, 0, 2, &mt), 0);
    ck_assert_int_eq(mt.rank, 0);
    ck_assert_int_eq(mt.line, 5);
    ck_assert_int_eq(mt.after_line, 4);
    ck_assert_int_eq(ovl_deadlocks_match(d, 0, 4, &mt), -1);
    ck_assert_int_eq(ovl_deadlocks_match(d, 1, 0, &mt), -1);
    t = dl_text(d, p, 0);
    ck_assert_ptr_nonnull(strstr(
        t, "\n  rank 0 at line 3 (c_allreduce_sum, ring 0 collective #1) "
           "waits to match rank 1's c_allreduce_sum at d.sched:7, issued "
           "only after line 6 (c_sync_comm_stream, where that rank's host "
           "is blocked)\n  rank 1 at line 5 (c_allreduce_sum, ring 1 "
           "collective #1) waits to match rank 0's c_allreduce_sum at "
           "d.sched:5, issued only after line 4 (c_sync_comm_stream, where "
           "that rank's host is blocked)\n1 deadlock in d.sched"));
    free(t);
  }
  ovl_deadlocks_free(d);
  /* The sync form: the same collectives on calc, a cycle of two. */
  {
    ovl_program *s = form(p, OVL_MODE_SYNC);
    d = deadlocks_of(s);
    ck_assert_uint_eq(ovl_deadlocks_count(d), 1);
    f = dl_get(d, 0);
    ck_assert_uint_eq(f.nsteps, 2);
    ck_assert_str_eq(f.message,
                     "deadlock: rank 0 calc waits at line 3 "
                     "(c_allreduce_sum, ring 0 collective #1) for rank 1, "
                     "whose calc is blocked at line 5 (c_allreduce_sum, ring "
                     "1 collective #1) waiting for rank 0 calc");
    /* Rank 1's collective of ring 0 is queued on its calc behind its
     * ring 1 collective, line 5. */
    {
      ovl_deadlock_match mt;
      ck_assert_int_eq(ovl_deadlocks_match(d, 0, 0, &mt), 0);
      ck_assert_int_eq(mt.rank, 1);
      ck_assert_int_eq(mt.line, 7);
      ck_assert_int_eq(mt.after_line, 5);
      ck_assert_int_eq(mt.after_stream, 0);
      ck_assert_str_eq(mt.op_name, "c_allreduce_sum");
    }
    ovl_deadlocks_free(d);
    ovl_program_free(s);
  }
  ovl_program_free(p);
}
END_TEST

/* Opposite orders without host syncs are fine on separate comm streams,
 * and a deadlock on calc (the sync form). */
START_TEST(opposite_orders_without_syncs) {
  ovl_program *p = tu_parse(DATA(g, 16) DATA(h, 16)
                            "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                            "c_allreduce_sum(h, ring_id=1)\n"
                            "c_allreduce_sum(g, ring_id=0, ranks=[1])\n"
                            "c_wait_comm(g, ring_id=0)\n"
                            "c_wait_comm(h, ring_id=1)\n"
                            "fetch(g, h)\n",
                            "o.sched", 2);
  ovl_program *s = form(p, OVL_MODE_SYNC);
  ovl_deadlocks *d = deadlocks_of(p);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 0);
  ovl_deadlocks_free(d);
  d = deadlocks_of(s);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 1);
  ovl_deadlocks_free(d);
  ovl_program_free(s);
  ovl_program_free(p);
}
END_TEST

/* A collective a rank never issues leaves the others blocked, with no
 * cycle: a mismatch, not a deadlock. */
START_TEST(blocked_by_a_mismatch_is_no_deadlock) {
  ovl_program *p = tu_parse(DATA(g, 16)
                            "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                            "c_sync_comm_stream(g, ring_id=0)\n"
                            "fetch(g)\n",
                            "m.sched", 2);
  ovl_deadlocks *d = deadlocks_of(p);
  ovl_mismatches *m = mismatches_of(p);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 0);
  /* Rank 0's comm[0] and its host. */
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 2);
  ck_assert_uint_eq(ovl_mismatches_count(m), 1);
  ovl_deadlocks_free(d);
  ovl_mismatches_free(m);
  ovl_program_free(p);
}
END_TEST

START_TEST(point_to_point_deadlocks) {
  static const struct {
    const char *text;
    int nranks;
    size_t count, nsteps;
  } cases[] = {
      /* Both send first (ungrouped): a cycle of 2. */
      {DATA(x, 16) "send_v2(x, peer=1 - rank, ring_id=0)\n"
                   "y = recv_v2(peer=1 - rank, out_shape=[16], ring_id=0)\n",
       2, 1, 2},
      /* Both receive first. */
      {DATA(x, 16) "y = recv_v2(peer=1 - rank, out_shape=[16], ring_id=0)\n"
                   "send_v2(x, peer=1 - rank, ring_id=0)\n",
       2, 1, 2},
      /* A ring shift on 3 ranks: a cycle of 3. */
      {DATA(x, 16) "send_v2(x, peer=(rank + 1) % nranks, ring_id=0)\n"
                   "y = recv_v2(peer=(rank - 1) % nranks, out_shape=[16], "
                   "ring_id=0)\n",
       3, 1, 3},
      /* A send to oneself: a cycle of one, on each rank (alike: one). */
      {DATA(x, 16) "send_v2(x, peer=rank, ring_id=0)\n"
                   "y = recv_v2(peer=rank, out_shape=[16], ring_id=0)\n",
       2, 1, 1},
      /* In a group, all of them are fine. */
      {DATA(x, 16) "group {\n"
                   "  send_v2(x, peer=(rank + 1) % nranks, ring_id=0)\n"
                   "  y = recv_v2(peer=(rank - 1) % nranks, out_shape=[16], "
                   "ring_id=0)\n}\n",
       3, 0, 0},
      {DATA(x, 16) "group {\n"
                   "  y = recv_v2(peer=rank, out_shape=[16], ring_id=0)\n"
                   "  send_v2(x, peer=rank, ring_id=0)\n}\n",
       2, 0, 0},
      /* An ungrouped send meets a grouped receive. */
      {DATA(x, 16) "send_v2(x, peer=1, ring_id=0, ranks=[0])\n"
                   "group {\n"
                   "  y = recv_v2(peer=0, out_shape=[16], ring_id=0, "
                   "ranks=[1])\n"
                   "  send_v2(x, peer=0, ring_id=0, ranks=[1])\n}\n"
                   "z = recv_v2(peer=1, out_shape=[16], ring_id=0, "
                   "ranks=[0])\n",
       2, 0, 0},
      /* On two streams, a send to oneself meets its receive. */
      {DATA(x, 16) "send_v2(x, peer=rank, ring_id=0, use_calc_stream=true)\n"
                   "y = recv_v2(peer=rank, out_shape=[16], ring_id=0)\n",
       2, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ovl_program *p = tu_parse(cases[i].text, "p.sched", cases[i].nranks);
    ovl_deadlocks *d = deadlocks_of(p);
    ck_assert_msg(ovl_deadlocks_count(d) == cases[i].count,
                  "case %zu: %zu deadlocks", i, ovl_deadlocks_count(d));
    if (cases[i].count > 0)
      ck_assert_msg(dl_get(d, 0).nsteps == cases[i].nsteps,
                    "case %zu: %zu steps", i, dl_get(d, 0).nsteps);
    else
      ck_assert_msg(ovl_deadlocks_blocked(d) == 0, "case %zu: blocked", i);
    ovl_deadlocks_free(d);
    ovl_program_free(p);
  }
}
END_TEST

/* As graphs (ovl__deadlock_check_graph, what a run with
 * ovl_run_opts.graph is checked with), a host sync waits for every stream
 * of its segment: a receive left running on comm[0] across a host sync of
 * calc, whose send the peer enqueues only after its own host sync,
 * deadlocks there and not in the eager check; with the receive after the
 * sync, neither does. */
START_TEST(graph_host_syncs_wait_for_every_stream) {
  static const char bad[] =
      DATA(x, 16) "y = recv_v2(peer=1 - rank, out_shape=[16], ring_id=0)\n"
                  "c_sync_calc_stream(x)\n"
                  "send_v2(x, peer=1 - rank, ring_id=0, use_calc_stream=true)\n"
                  "c_sync_comm_stream(y, ring_id=0)\n";
  static const char good[] =
      DATA(x, 16) "c_sync_calc_stream(x)\n"
                  "y = recv_v2(peer=1 - rank, out_shape=[16], ring_id=0)\n"
                  "send_v2(x, peer=1 - rank, ring_id=0, use_calc_stream=true)\n"
                  "c_sync_comm_stream(y, ring_id=0)\n";
  ovl_program *p = tu_parse(bad, "p.sched", 2);
  ovl_deadlocks *d = deadlocks_of(p);
  ovl_error err = {0};
  ovl_deadlock_finding f;
  ck_assert_uint_eq(ovl_deadlocks_count(d), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 0);
  ovl_deadlocks_free(d);
  d = NULL;
  ck_assert_msg(ovl__deadlock_check_graph(p, true, &d, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 1);
  f = dl_get(d, 0);
  ck_assert_uint_eq(f.nsteps, 4);
  ck_assert_str_eq(f.message,
                   "deadlock: rank 0 comm[0] waits at line 2 (recv_v2 from "
                   "rank 1, ring 0) for rank 1, whose host is blocked at "
                   "line 3 (c_sync_calc_stream) waiting for its comm[0], "
                   "which is blocked at line 2 (recv_v2 from rank 0, ring 0) "
                   "waiting for rank 0, whose host is blocked at line 3 "
                   "(c_sync_calc_stream) waiting for rank 0 comm[0] (as "
                   "graphs: a host sync waits for every stream of its "
                   "segment)");
  ovl_deadlocks_free(d);
  ovl_program_free(p);
  p = tu_parse(good, "p.sched", 2);
  d = NULL;
  ck_assert_msg(ovl__deadlock_check_graph(p, true, &d, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_uint_eq(ovl_deadlocks_count(d), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(d), 0);
  ovl_deadlocks_free(d);
  ovl_program_free(p);
}
END_TEST

/* Events: a wait blocks until the recording stream passes the record it
 * captured (the last before it, of the ops that run on the rank); a
 * never-recorded event does not wait. */
START_TEST(event_waits) {
  static const struct {
    const char *text;
    size_t count;
  } cases[] = {
      /* Rank 0's comm[0] waits for calc, whose allreduce on ring 1 waits
       * for rank 1, whose calc waits (c_wait_comm) for its comm[0], whose
       * allreduce on ring 0 waits for rank 0's comm[0]. */
      {DATA(g, 16) DATA(h, 16)
       "c_allreduce_sum(h, ring_id=1, use_calc_stream=true, ranks=[0])\n"
       "c_wait_compute(g, ring_id=0, ranks=[0])\n"
       "c_allreduce_sum(g, ring_id=0)\n"
       "c_wait_comm(g, ring_id=0, ranks=[1])\n"
       "c_allreduce_sum(h, ring_id=1, use_calc_stream=true, ranks=[1])\n",
       1},
      /* Rank 0 records on calc only; rank 1's wait is on an event it never
       * recorded: it does not wait, and nothing blocks. */
      {DATA(g, 16)
       "c_allreduce_sum(g, ring_id=1, use_calc_stream=true, ranks=[0])\n"
       "event_record(g, event=e, stream=calc, ranks=[0])\n"
       "stream_wait_event(g, event=e, stream=comm, ring_id=0)\n"
       "c_allreduce_sum(g, ring_id=0)\n"
       "c_allreduce_sum(g, ring_id=1, use_calc_stream=true, ranks=[1])\n",
       0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ovl_program *p = tu_parse(cases[i].text, "e.sched", 2);
    ovl_deadlocks *d = deadlocks_of(p);
    ck_assert_msg(ovl_deadlocks_count(d) == cases[i].count,
                  "case %zu: %zu deadlocks", i, ovl_deadlocks_count(d));
    ovl_deadlocks_free(d);
    ovl_program_free(p);
  }
}
END_TEST

/* Cycles alike on other ranks are one finding; their count. */
START_TEST(cycles_alike_are_one_finding) {
  ovl_program *p = tu_parse(DATA(x, 16)
                            "send_v2(x, peer=rank + 1, ring_id=0, "
                            "ranks=[0, 2])\n"
                            "send_v2(x, peer=rank - 1, ring_id=0, "
                            "ranks=[1, 3])\n"
                            "y = recv_v2(peer=rank + 1, out_shape=[16], "
                            "ring_id=0, ranks=[0, 2])\n"
                            "z = recv_v2(peer=rank - 1, out_shape=[16], "
                            "ring_id=0, ranks=[1, 3])\n",
                            "c.sched", 4);
  ovl_deadlocks *d = deadlocks_of(p);
  ovl_deadlock_finding f;
  char *t;
  ck_assert_uint_eq(ovl_deadlocks_count(d), 1);
  f = dl_get(d, 0);
  ck_assert_uint_eq(f.occurrences, 2);
  ck_assert_int_eq(f.steps[0].rank, 0);
  ck_assert_int_eq(f.steps[1].rank, 1);
  t = dl_text(d, p, 0);
  ck_assert_ptr_nonnull(strstr(t, "(and 1 more cycle alike on other "
                                  "ranks)\n"));
  free(t);
  ovl_deadlocks_free(d);
  ovl_program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Races per rank                                                      */
/* ------------------------------------------------------------------ */

START_TEST(races_per_rank) {
  /* Rank 1 alone lacks the wait; ranks 0 and 2 run the same ops. */
  ovl_program *p = tu_parse(DATA(g, 16)
                            "g = scale(g, scale=2.0)\n"
                            "c_wait_compute(g, ring_id=0, ranks=[0, 2])\n"
                            "c_allreduce_sum(g, ring_id=0)\n"
                            "c_wait_comm(g, ring_id=0)\n"
                            "fetch(g)\n",
                            "r.sched", 3);
  ovl_races *r = races_of(p);
  ovl_race_info in;
  char *t = NULL;
  ovl_error err = {0};
  ck_assert_uint_eq(ovl_races_count(r), 1);
  ck_assert_int_eq(ovl_races_get(r, 0, &in), 0);
  ck_assert_int_eq(in.nranks, 1);
  ck_assert_int_eq(in.ranks[0], 1);
  ck_assert_int_eq(ovl_races_format(r, p, 0, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, "race 1: 'g' on rank 1\n"));
  ck_assert_ptr_nonnull(strstr(t, "1 race in r.sched (3 ranks)\n"));
  free(t);
  ck_assert_int_eq(ovl_races_format(r, p, 1, &t, &err), OVL_OK);
  ck_assert(tu_json_ok(t));
  ck_assert_ptr_nonnull(strstr(t, "\"ranks\":[1],"));
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
  /* Ranks 0 and 2: a list with a gap. */
  p = tu_parse(DATA(g, 16)
               "g = scale(g, scale=2.0)\n"
               "c_wait_compute(g, ring_id=0, ranks=[1, 3])\n"
               "c_allreduce_sum(g, ring_id=0)\n"
               "c_wait_comm(g, ring_id=0)\n"
               "fetch(g)\n",
               "r.sched", 4);
  r = races_of(p);
  ck_assert_int_eq(ovl_races_format(r, p, 0, &t, &err), OVL_OK);
  ck_assert_ptr_nonnull(strstr(t, "race 1: 'g' on ranks 0, 2\n"));
  free(t);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

/* The same race in two classes of ranks: one race, on both, with the most
 * occurrences either saw. */
START_TEST(race_of_two_classes_is_one) {
  ovl_program *p = tu_parse(DATA(g, 16)
                            "repeat 3 {\n"
                            "  g = scale(g, scale=2.0)\n"
                            "  c_allreduce_sum(g, ring_id=0)\n"
                            "  c_wait_comm(g, ring_id=0)\n"
                            "}\n"
                            "g = scale(g, scale=2.0, ranks=[1])\n"
                            "c_allreduce_sum(g, ring_id=0, ranks=[1])\n"
                            "c_allreduce_sum(g, ring_id=0, ranks=[0])\n"
                            "c_wait_comm(g, ring_id=0)\n"
                            "fetch(g)\n",
                            "c.sched", 2);
  ovl_races *r = races_of(p);
  ovl_race_info in;
  ck_assert_uint_eq(ovl_races_count(r), 2);
  /* Lines 3 and 4: 3 times on rank 0, 3 on rank 1: on both. */
  ck_assert_int_eq(ovl_races_get(r, 0, &in), 0);
  ck_assert_int_eq(in.first.line, 3);
  ck_assert_int_eq(in.second.line, 4);
  ck_assert_int_eq(in.nranks, 2);
  ck_assert_uint_eq(in.occurrences, 3);
  /* Lines 7 and 8: rank 1 only. */
  ck_assert_int_eq(ovl_races_get(r, 1, &in), 0);
  ck_assert_int_eq(in.first.line, 7);
  ck_assert_int_eq(in.nranks, 1);
  ck_assert_int_eq(in.ranks[0], 1);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

/* A group's sends and receives are unordered among themselves; the group
 * as a whole is ordered with what follows; a fix goes before the group. */
START_TEST(races_and_groups) {
  ovl_program *p = tu_parse(DATA(x, 16)                       /* 1 */
                            "y = assign(x)\n"                 /* 2 */
                            "group {\n"                       /* 3 */
                            "  # a comment\n"                 /* 4 */
                            "  send_v2(x, peer=1 - rank, ring_id=0)\n" /* 5 */
                            "  x = recv_v2(peer=1 - rank, out_shape=[16], "
                            "ring_id=0)\n"                    /* 6 */
                            "  y = recv_v2(peer=1 - rank, out_shape=[16], "
                            "ring_id=0)\n"                    /* 7 */
                            "  send_v2(x, peer=1 - rank, ring_id=0)\n" /* 8 */
                            "}\n"                             /* 9 */
                            "c_wait_comm(x, ring_id=0)\n"     /* 10 */
                            "fetch(x, y)\n",                  /* 11 */
                            "g.sched", 2);
  ovl_races *r = races_of(p);
  ovl_race_info in;
  size_t n = ovl_races_count(r);
  bool send_recv = false, recv_send = false, calc = false;
  /* 5 (read x) / 6 (write x), 6 / 8 (read x): in the group; 2 (assign,
   * reads x on calc) / 6 (writes x on comm[0]) and 2 (writes y) / 7. */
  ck_assert_uint_eq(n, 4);
  for (size_t i = 0; i < n; i++) {
    ck_assert_int_eq(ovl_races_get(r, i, &in), 0);
    if (in.first.line == 5 && in.second.line == 6) {
      send_recv = true;
      ck_assert_str_eq(in.note, "lines 5 and 6 are in one group: its sends "
                                "and receives progress together, in no "
                                "order");
      ck_assert_str_eq(in.fix, "move line 5 or line 6 out of the group at "
                               "line 4 (the sends and receives of a group "
                               "are not ordered)");
    }
    if (in.first.line == 6 && in.second.line == 8)
      recv_send = true;
    if (in.first.line == 2 && in.second.line == 7) {
      calc = true;
      /* Without the text, the line above the group's first op. */
      ck_assert_str_eq(in.fix,
                       "insert c_wait_compute(y, ring_id=0) before line 4");
    }
  }
  ck_assert(send_recv && recv_send && calc);
  ovl_races_free(r);
  ovl_program_free(p);
}
END_TEST

/* Checked against the schedule, the fix goes before `group {` itself. */
START_TEST(group_fix_checked_before_the_group) {
  const char *text = DATA(x, 16)                              /* 1 */
                     "y = assign(x)\n"                        /* 2 */
                     "group {\n"                              /* 3 */
                     "  # the exchange\n"                     /* 4 */
                     "\n"                                     /* 5 */
                     "  send_v2(x, peer=1 - rank, ring_id=0)\n" /* 6 */
                     "  y = recv_v2(peer=1 - rank, out_shape=[16], "
                     "ring_id=0)\n"                           /* 7 */
                     "}\n"                                    /* 8 */
                     "c_wait_comm(y, ring_id=0)\n"            /* 9 */
                     "fetch(y)\n";                            /* 10 */
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_races *r;
  ovl_race_info in;
  ovl_error err = {0};
  ovl_bind_opts bo = {.size = sizeof bo, .nranks = 2};
  ck_assert_int_eq(ovl_schedule_parse(text, strlen(text), "g.sched", &s,
                                      &err),
                   OVL_OK);
  ck_assert_int_eq(ovl_schedule_bind(s, &bo, &p, &err), OVL_OK);
  r = races_of(p);
  ck_assert_uint_eq(ovl_races_count(r), 1);
  ck_assert_int_eq(ovl_races_check_fixes(r, p, s, &bo, &err), OVL_OK);
  ck_assert_int_eq(ovl_races_get(r, 0, &in), 0);
  ck_assert_int_eq(in.fix_checked, 1);
  ck_assert_str_eq(in.fix, "insert c_wait_compute(y, ring_id=0) before line "
                           "3");
  ovl_races_free(r);
  ovl_program_free(p);
  ovl_schedule_free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The pipeline                                                        */
/* ------------------------------------------------------------------ */

/* A deadlock stops the pipeline after the checks: nothing runs (the run
 * would hang), and the report says why. */
START_TEST(pipeline_stops_on_a_deadlock) {
  ovl_program *p = tu_parse(rings_opposite, "d.sched", 2);
  ovl_world *w = tu_cpu_world(2, 5);
  ovl_pipeline_opts o = {
      .size = sizeof o,
      .modes = OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC),
      .races = 1,
      .run = 1,
      .run_opts = &(ovl_run_opts){.size = sizeof(ovl_run_opts), .iters = 1},
      .rtol = 1e-5};
  ovl_report *rep = NULL;
  ovl_report_summary sum;
  ovl_report_mode m;
  ovl_json_envelope jo = {.size = sizeof jo, .head = "\"tool\": \"t\"",
                          .tail = "\"exit_status\": 4"};
  ovl_error err = {0};
  char *t = NULL;
  size_t len = 0;
  ck_assert_msg(ovl_pipeline_run(w, p, &o, &rep, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_str_eq(ovl_report_not_run(rep),
                   "deadlocks found: a run would hang");
  ovl_report_summary_get(rep, &sum);
  /* One deadlock, found in both forms: counted once. */
  ck_assert_uint_eq(sum.deadlocks, 1);
  ck_assert_uint_eq(sum.mismatches, 0);
  ck_assert_uint_eq(sum.races, 0);
  ck_assert(isnan(sum.speedup));
  ck_assert_str_eq(ovl_report_result(rep), "FAIL: deadlocks");
  ck_assert_int_eq(ovl_report_find(rep, OVL_MODE_ASYNC), -1);
  ck_assert_int_eq(ovl_report_mode_get(rep, 1, &m), 0);
  ck_assert_ptr_null(m.res);
  ck_assert_ptr_nonnull(m.deadlocks);
  ck_assert_uint_eq(ovl_deadlocks_count(m.deadlocks), 1);
  ck_assert_str_eq(m.not_checked, "deadlocks found: a run would hang");
  ck_assert_ptr_nonnull(ovl_report_mismatches(rep));
  ck_assert_uint_eq(ovl_mismatches_count(ovl_report_mismatches(rep)), 0);
  /* The results JSON of a report that did not run. */
  ck_assert_msg(ovl_report_json(rep, &jo, &t, &len, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_msg(tu_json_ok(t), "not JSON: %s", t);
  ck_assert_ptr_nonnull(
      strstr(t, "\"not_run\": \"deadlocks found: a run would hang\""));
  ck_assert_ptr_nonnull(strstr(t, "\"total_s\": null"));
  ck_assert_ptr_nonnull(strstr(t, "\"mismatches\": {\"schedule\""));
  ck_assert_ptr_nonnull(strstr(t, "\"deadlocks\": {\"schedule\""));
  ck_assert_ptr_nonnull(strstr(t, "\"result\": \"FAIL: deadlocks\""));
  free(t);
  ck_assert_int_eq(ovl_report_races_json(rep, &t, &len, &err), OVL_OK);
  ck_assert_msg(tu_json_ok(t), "not JSON: %s", t);
  ck_assert_ptr_nonnull(strstr(t, "\"deadlocks\": {\"sync\": {"));
  free(t);
  ovl_report_free(rep);
  ovl_world_free(w);
  ovl_program_free(p);
}
END_TEST

/* Mismatches alike; and comp alone checks no mismatch. */
START_TEST(pipeline_stops_on_a_mismatch) {
  ovl_program *p = tu_parse(swapped, "s.sched", 2);
  ovl_world *w = tu_cpu_world(2, 5);
  ovl_pipeline_opts o = {
      .size = sizeof o,
      .modes = OVL_MODE_BIT(OVL_MODE_ASYNC),
      .races = 1,
      .run = 1,
      .run_opts = &(ovl_run_opts){.size = sizeof(ovl_run_opts), .iters = 1}};
  ovl_report *rep = NULL;
  ovl_report_summary sum;
  ovl_error err = {0};
  ck_assert_msg(ovl_pipeline_run(w, p, &o, &rep, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_str_eq(ovl_report_not_run(rep),
                   "mismatches found: a run would hang or mix buffers");
  ovl_report_summary_get(rep, &sum);
  ck_assert_uint_eq(sum.mismatches, 2);
  ck_assert_str_eq(ovl_report_result(rep), "FAIL: mismatches");
  ovl_report_free(rep);
  o.modes = OVL_MODE_BIT(OVL_MODE_COMP);
  o.run = 0;
  ck_assert_msg(ovl_pipeline_run(NULL, p, &o, &rep, &err) == OVL_OK, "%s",
                err.msg);
  ck_assert_ptr_null(ovl_report_mismatches(rep));
  ck_assert_ptr_null(ovl_report_not_run(rep));
  ovl_report_free(rep);
  ovl_world_free(w);
  ovl_program_free(p);
}
END_TEST

/* The numeric check compares a variable on the ranks that fetch it:
 * fetch(..., ranks=[...]) fetches only there, and the others are not
 * checked (nor wrong for having nothing). */
static const double *fetched_rank1(const void *ctx, int rank, size_t i) {
  (void)i;
  return rank == 1 ? (const double *)ctx : NULL;
}

START_TEST(numeric_check_of_a_fetch_on_some_ranks) {
  ovl_program *p = tu_parse("x = data(shape=[4], init=fill, value=2.0)\n"
                            "y = scale(x, scale=3.0)\n"
                            "fetch(y, ranks=[1])\n",
                            "f.sched", 2);
  ovl_reference *ref = NULL;
  ovl_check c;
  ovl_error err = {0};
  const double got[4] = {6, 6, 6, 7};
  ck_assert_int_eq(ovl_reference_compute(p, 2, &ref, &err), OVL_OK);
  ck_assert_int_eq(ovl__check_arrays(p, 2, fetched_rank1, got, ref, 0.0,
                                     0.0, &c, &err),
                   OVL_OK);
  /* Rank 1's 4 elements, one wrong; rank 0 not compared. */
  ck_assert_int_eq(c.checked, 4);
  ck_assert_int_eq(c.mismatched, 1);
  ck_assert_uint_eq(c.nmismatch, 1);
  ck_assert_int_eq(c.mismatch[0].rank, 1);
  ovl_check_release(&c);
  ovl_reference_free(ref);
  ovl_program_free(p);
}
END_TEST

START_TEST(bad_arguments) {
  ovl_program *p = tu_parse(swapped, "s.sched", 2);
  ovl_mismatches *m = (ovl_mismatches *)1;
  ovl_deadlocks *d = (ovl_deadlocks *)1;
  ovl_mismatch_finding mf;
  ovl_deadlock_finding df;
  ovl_error err = {0};
  char *t = (char *)1;
  ck_assert_int_eq(ovl_mismatch_check(NULL, &m, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_mismatch_check(p, NULL, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_deadlock_check(NULL, &d, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_deadlock_check(p, NULL, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_mismatches_format(NULL, p, 0, &t, &err), OVL_EINVAL);
  ck_assert_int_eq(ovl_deadlocks_format(NULL, p, 0, &t, &err), OVL_EINVAL);
  ck_assert_uint_eq(ovl_mismatches_count(NULL), 0);
  ck_assert_uint_eq(ovl_deadlocks_count(NULL), 0);
  ck_assert_uint_eq(ovl_deadlocks_blocked(NULL), 0);
  ck_assert_int_eq(ovl_mismatches_get(NULL, 0, &mf), -1);
  ck_assert_int_eq(ovl_deadlocks_get(NULL, 0, &df), -1);
  m = mismatches_of(p);
  ck_assert_int_eq(ovl_mismatches_get(m, 2, &mf), -1);
  ck_assert_ptr_null(mf.message);
  ovl_mismatches_free(m);
  ovl_mismatches_free(NULL);
  ovl_deadlocks_free(NULL);
  ovl_program_free(p);
}
END_TEST

static Suite *order_suite(void) {
  Suite *s = suite_create("order");
  TCase *tc = tcase_create("mismatches");
  tcase_add_test(tc, spmd_has_no_mismatch_and_no_deadlock);
  tcase_add_test(tc, collectives_in_opposite_orders);
  tcase_add_test(tc, same_collective_from_different_lines_matches);
  tcase_add_test(tc, what_differs);
  tcase_add_test(tc, repeated_mismatch_is_one_finding);
  tcase_add_test(tc, sends_and_receives);
  tcase_add_test(tc, first_disagreement);
  tcase_add_test(tc, first_disagreement_is_the_earliest);
  suite_add_tcase(s, tc);
  tc = tcase_create("deadlocks");
  tcase_add_test(tc, rings_in_opposite_orders_through_host_syncs);
  tcase_add_test(tc, opposite_orders_without_syncs);
  tcase_add_test(tc, blocked_by_a_mismatch_is_no_deadlock);
  tcase_add_test(tc, point_to_point_deadlocks);
  tcase_add_test(tc, event_waits);
  tcase_add_test(tc, graph_host_syncs_wait_for_every_stream);
  tcase_add_test(tc, cycles_alike_are_one_finding);
  suite_add_tcase(s, tc);
  tc = tcase_create("races");
  tcase_add_test(tc, races_per_rank);
  tcase_add_test(tc, race_of_two_classes_is_one);
  tcase_add_test(tc, races_and_groups);
  tcase_add_test(tc, group_fix_checked_before_the_group);
  suite_add_tcase(s, tc);
  tc = tcase_create("pipeline");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, pipeline_stops_on_a_deadlock);
  tcase_add_test(tc, pipeline_stops_on_a_mismatch);
  tcase_add_test(tc, numeric_check_of_a_fetch_on_some_ranks);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(order_suite()); }
