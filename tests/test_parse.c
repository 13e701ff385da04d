/* Tests of the schedule language (src/lang/): ovl_schedule_parse and
 * ovl_schedule_bind, and ovl_program_parse / ovl_program_load, which do
 * both. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/op.h"

static const char seed_sched[] =
    "param rows = 1000\n"
    "param cols = 10000, cpu = 100\n"
    "a = data(shape=[rows, cols], dtype=float32, init=uniform, seed=0)\n"
    "b = assign(a)\n"
    "c = elementwise_add(a, b)\n"
    "d = elementwise_add(a, b)\n"
    "c_wait_compute(c, ring_id=0)\n"
    "repeat 64 {\n"
    "  c_allreduce_sum(c, ring_id=0, use_calc_stream=false)\n"
    "  repeat 10 {\n"
    "    e = scale(d, scale=2.0)\n"
    "  }\n"
    "  d = assign(e)\n"
    "}\n"
    "c_wait_comm(c, ring_id=0)\n"
    "out = elementwise_sub(c, d)\n"
    "fetch(out)\n";

/* A data() line most tests start from. */
#define A10 "a = data(shape=[10], dtype=float32)\n"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static ovl_error last_err;
static int sentinel;
#define SENTINEL ((ovl_program *)&sentinel)

static ovl_status try_parse(const char *src, size_t len,
                            const ovl_parse_opts *opts, ovl_program **out) {
  memset(&last_err, 0, sizeof last_err);
  return ovl_program_parse(src, len, NULL, opts, out, &last_err);
}

static ovl_program *parse_with(const char *src, const ovl_parse_opts *opts) {
  ovl_program *p = NULL;
  ovl_status st = try_parse(src, strlen(src), opts, &p);
  ck_assert_msg(st == OVL_OK, "parse failed: %s: %s", ovl_err_name(st),
                last_err.msg);
  ck_assert_ptr_nonnull(p);
  return p;
}
#define PARSE_OK(src) parse_with((src), NULL)

/* The parse fails with `want_st_`, leaves *out alone, and the message starts
 * with `prefix` and contains `needle`. */
#define EXPECT_STATUS(src, len, opts, want_st_, prefix, needle)                 \
  do {                                                                        \
    ovl_program *p_ = SENTINEL;                                               \
    ovl_status st_ = try_parse((src), (len), (opts), &p_);                    \
    ck_assert_msg(st_ == (want_st_), "want %s, got %s (%s)",                    \
                  ovl_err_name(want_st_), ovl_err_name(st_), last_err.msg);     \
    ck_assert_msg(p_ == SENTINEL, "*out was written on error");               \
    ck_assert_int_eq(last_err.status, (want_st_));                              \
    ck_assert_msg(strncmp(last_err.msg, (prefix), strlen(prefix)) == 0,       \
                  "want prefix \"%s\" in \"%s\"", (prefix), last_err.msg);    \
    ck_assert_msg(strstr(last_err.msg, (needle)) != NULL,                     \
                  "want \"%s\" in \"%s\"", (needle), last_err.msg);           \
  } while (0)
#define EXPECT_ERR_OPTS(src, opts, prefix, needle)                            \
  EXPECT_STATUS(src, strlen(src), opts, OVL_EPARSE, prefix, needle)
#define EXPECT_ERR(src, prefix, needle)                                       \
  EXPECT_ERR_OPTS(src, NULL, prefix, needle)
#define EXPECT_ERR_STATUS(src, opts, want_st_, prefix, needle)                 \
  EXPECT_STATUS(src, strlen(src), opts, want_st_, prefix, needle)

/* The stream of op i's main primitive (its wait, its kernel, ...; calc
 * for the host ops that sync calc). */
static int main_stream(const ovl_program *p, size_t i) {
  return p->prims[ovl__op_main_prim(p, i)].stream;
}

static int var_index(const ovl_program *p, const char *name) {
  for (size_t i = 0; i < p->nvars; i++)
    if (strcmp(p->vars[i].name, name) == 0)
      return (int)i;
  return -1;
}

static const ovl__var *var(const ovl_program *p, const char *name) {
  int i = var_index(p, name);
  ck_assert_msg(i >= 0, "no variable '%s'", name);
  return &p->vars[i];
}

static const char *opname(const ovl_program *p, size_t i) {
  return p->ops[i].def->name;
}

/* ------------------------------------------------------------------ */
/* Programs that parse                                                 */
/* ------------------------------------------------------------------ */

START_TEST(test_seed_program) {
  ovl_program *p = PARSE_OK(seed_sched);
  ck_assert_uint_eq(p->nops, 1 + 1 + 1 + 1 + 64 * (1 + 10 + 1) + 1 + 1 + 1);
  ck_assert_int_eq(p->nrings, 1);
  ck_assert_int_eq(p->nranks, 2);
  ck_assert_str_eq(p->filename, "<string>");
  ck_assert_uint_eq(p->nvars, 6);
  ck_assert_int_eq(var(p, "a")->init, OVL_INIT_UNIFORM);
  ck_assert_int_eq(var(p, "a")->ndim, 2);
  ck_assert_int_eq(var(p, "a")->dims[0], 1000);
  ck_assert_int_eq(var(p, "a")->dims[1], 10000);
  ck_assert_int_eq(var(p, "a")->numel, 10000000);
  ck_assert_int_eq(var(p, "a")->line, 3);
  ck_assert_int_eq(var(p, "a")->col, 1);
  ck_assert_int_eq(var(p, "e")->init, OVL_INIT_NONE);
  ck_assert_int_eq(var(p, "e")->numel, 10000000);

  ck_assert_str_eq(opname(p, 0), "assign");
  ck_assert_str_eq(opname(p, 3), "c_wait_compute");
  ck_assert_int_eq(main_stream(p, 3), OVL_STREAM_COMM(0));
  /* First iteration: allreduce, 10 x scale, assign. */
  ck_assert_str_eq(opname(p, 4), "c_allreduce_sum");
  ck_assert_int_eq(p->ops[4].out, var_index(p, "c"));
  ck_assert_int_eq(p->ops[4].in[0], var_index(p, "c"));
  ck_assert_int_eq(p->ops[4].stream, OVL_STREAM_COMM(0));
  ck_assert_int_eq(p->ops[4].line, 9);
  ck_assert_int_eq(p->ops[4].col, 3);
  for (int i = 5; i < 15; i++) {
    ck_assert_str_eq(opname(p, (size_t)i), "scale");
    ck_assert_double_eq(p->ops[i].scale, 2.0);
    ck_assert_double_eq(p->ops[i].bias, 0.0);
    ck_assert_int_eq(p->ops[i].line, 11);
    ck_assert_int_eq(p->ops[i].stream, OVL_STREAM_CALC);
  }
  ck_assert_str_eq(opname(p, 15), "assign");
  ck_assert_str_eq(opname(p, 16), "c_allreduce_sum");
  ck_assert_str_eq(opname(p, 4 + 64 * 12 - 1), "assign");
  ck_assert_str_eq(opname(p, 772), "c_wait_comm");
  ck_assert_int_eq(main_stream(p, 772), OVL_STREAM_CALC);
  ck_assert_str_eq(opname(p, 773), "elementwise_sub");
  ck_assert_str_eq(opname(p, 774), "fetch");
  ck_assert_int_eq(p->ops[774].line, 17);

  ck_assert_uint_eq(ovl_program_fetch_count(p), 1);
  ovl_var_info info;
  ovl_program_fetch_info(p, 0, &info);
  ck_assert_str_eq(info.name, "out");
  ck_assert_int_eq(info.numel, 10000000);

  ck_assert_uint_eq(ovl_program_param_count(p), 2);
  const char *name, *value, *plain;
  ovl_param_origin origin;
  ovl_program_param(p, 1, &name, &value, &plain, &origin);
  ck_assert_str_eq(name, "cols");
  ck_assert_str_eq(value, "10000");
  ck_assert_str_eq(plain, "10000");
  ck_assert_int_eq(origin, OVL_PARAM_DEFAULT);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_cpu_defaults) {
  ovl_parse_opts o = {.size = sizeof o, .nranks = 2, .cpu_defaults = 1};
  ovl_program *p = parse_with(seed_sched, &o);
  const char *name, *value, *plain;
  ovl_param_origin origin;
  ovl_program_param(p, 0, &name, &value, &plain, &origin);
  ck_assert_str_eq(value, "1000");
  ck_assert_int_eq(origin, OVL_PARAM_DEFAULT);
  ovl_program_param(p, 1, &name, &value, &plain, &origin);
  ck_assert_str_eq(value, "100");
  ck_assert_str_eq(plain, "10000");
  ck_assert_int_eq(origin, OVL_PARAM_CPU_DEFAULT);
  ck_assert_int_eq(var(p, "a")->dims[1], 100);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_defines_override) {
  const char *defs[] = {"cols=500", "rows=7"};
  ovl_parse_opts o = {.size = sizeof o,
                      .defines = defs,
                      .ndefines = 2,
                      .nranks = 4,
                      .cpu_defaults = 1};
  ovl_program *p = parse_with(seed_sched, &o);
  const char *value;
  ovl_param_origin origin;
  ovl_program_param(p, 1, NULL, &value, NULL, &origin);
  ck_assert_str_eq(value, "500");
  ck_assert_int_eq(origin, OVL_PARAM_DEFINED);
  ck_assert_int_eq(var(p, "a")->dims[0], 7);
  ck_assert_int_eq(var(p, "a")->dims[1], 500);
  ck_assert_int_eq(p->nranks, 4);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_define_changes_type) {
  const char *defs[] = {"s=2.5", "s=0.25"}; /* the last one wins */
  ovl_parse_opts o = {
      .size = sizeof o, .defines = defs, .ndefines = 2, .nranks = 2};
  ovl_program *p = parse_with("param s = 2\n" A10 "b = scale(a, scale=s)\n", &o);
  const char *value;
  ovl_program_param(p, 0, NULL, &value, NULL, NULL);
  ck_assert_str_eq(value, "0.25");
  ck_assert_double_eq(p->ops[0].scale, 0.25);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_param_values_as_text) {
  ovl_program *p = PARSE_OK("param i = -3\n"
                            "param f = 1e-3\n"
                            "param g = 2.\n"
                            "param b = true\n"
                            "param s = comm\n"
                            "param j = i\n");
  static const char *want[][2] = {{"-3", "-3"},   {"0.001", "1e-3"},
                                  {"2.0", "2."},  {"true", "true"},
                                  {"comm", "comm"}, {"-3", "i"}};
  ck_assert_uint_eq(p->nparams, 6);
  for (size_t i = 0; i < 6; i++) {
    ck_assert_str_eq(p->params[i].value, want[i][0]);
    ck_assert_str_eq(p->params[i].plain_default, want[i][1]);
  }
  ovl_program_free(p);
}
END_TEST

START_TEST(test_empty_programs) {
  static const char *srcs[] = {"", "\n\n\n", "# only a comment",
                               "  # comment\n\t\r\n", A10};
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    ovl_program *p = PARSE_OK(srcs[i]);
    ck_assert_uint_eq(p->nops, 0);
    ck_assert_ptr_null(p->ops);
    ck_assert_uint_eq(p->nfetch, 0);
    ck_assert_int_eq(p->nrings, 0);
    ovl_program_free(p);
  }
  /* NULL text with length 0 is the empty program too. */
  ovl_program *p = NULL;
  ck_assert_int_eq(ovl_program_parse(NULL, 0, "x", NULL, &p, NULL), OVL_OK);
  ck_assert_str_eq(p->filename, "x");
  ovl_program_free(p);
}
END_TEST

START_TEST(test_data_attributes) {
  ovl_program *p = PARSE_OK(
      "a = data(shape=[2, 3, 4])\n"
      "b = data(shape=[5], dtype=float64, init=fill, value=1.5)\n"
      "c = data(shape=[5], init=uniform, seed=42, per_rank=true)\n"
      "d = data(shape=[1], init=fill)\n"
      "e = data(dtype=float64, shape=[1], init=fill, value=-2)\n");
  const ovl__var *a = var(p, "a"), *b = var(p, "b"), *c = var(p, "c");
  ck_assert_int_eq(a->dtype, OVL_DTYPE_FLOAT32);
  ck_assert_int_eq(a->init, OVL_INIT_UNIFORM);
  ck_assert_int_eq(a->ndim, 3);
  ck_assert_int_eq(a->numel, 24);
  ck_assert_uint_eq(a->seed, 0);
  ck_assert(!a->per_rank);
  ck_assert_int_eq(b->dtype, OVL_DTYPE_FLOAT64);
  ck_assert_int_eq(b->init, OVL_INIT_FILL);
  ck_assert_double_eq(b->fill, 1.5);
  ck_assert_uint_eq(c->seed, 42);
  ck_assert(c->per_rank);
  ck_assert_double_eq(var(p, "d")->fill, 0.0);
  ck_assert_double_eq(var(p, "e")->fill, -2.0);
  ck_assert_uint_eq(ovl_program_bytes_per_rank(p), 24 * 4 + 5 * 8 + 5 * 4 +
                                                       4 + 8);
  ovl_program_free(p);
}
END_TEST

/* init=special: ordinary values of both signs mixed with every special
 * value of the dtype, about one element in 4; a pure function of (seed,
 * rank, index), per rank with per_rank=true; float32 variables get float32
 * values. */
START_TEST(test_data_special) {
  enum { N = 4000, KINDS = 11 };
  ovl_program *p = PARSE_OK(
      "a = data(shape=[4000], init=special, seed=7, per_rank=true)\n"
      "b = data(shape=[4000], dtype=float64, init=special, seed=7)\n"
      "c = data(shape=[4000], init=special, seed=8, per_rank=true)\n");
  const ovl__var *a = var(p, "a"), *b = var(p, "b"), *c = var(p, "c");
  ck_assert_int_eq(a->init, OVL_INIT_SPECIAL);
  ck_assert_uint_eq(a->seed, 7);
  ck_assert(a->per_rank);
  ck_assert_int_eq(b->init, OVL_INIT_SPECIAL);
  ck_assert(!b->per_rank);

  for (int k = 0; k < 2; k++) {
    const ovl__var *v = k == 0 ? a : b;
    const double dmin = k == 0 ? 0x1p-149 : 0x1p-1074;
    const double dmax = k == 0 ? 0x1.fffffcp-127 : 0x0.fffffffffffffp-1022;
    const double fmax = k == 0 ? 0x1.fffffep+127 : 0x1.fffffffffffffp+1023;
    const double want[KINDS] = {INFINITY, -INFINITY, 0.0,   -0.0,
                                dmin,     -dmin,     dmax,  -dmax,
                                fmax,     -fmax,     NAN};
    int seen[KINDS] = {0}, special = 0, pos = 0, neg = 0, differ = 0;
    for (int64_t i = 0; i < N; i++) {
      double x = ovl__var_init_value(v, 0, i);
      ck_assert(memcmp(&x, &(double){ovl__var_init_value(v, 0, i)},
                       sizeof x) == 0);
      if (k == 0 && !isnan(x))
        ck_assert_msg((double)(float)x == x, "a[%lld] = %a", (long long)i,
                      x);
      differ += memcmp(&x, &(double){ovl__var_init_value(v, 1, i)},
                       sizeof x) != 0;
      int kind = -1;
      for (int w = 0; w < KINDS; w++)
        if (isnan(x) ? isnan(want[w])
                     : x == want[w] && signbit(x) == signbit(want[w]))
          kind = w;
      if (kind >= 0) {
        seen[kind]++;
        special++;
        continue;
      }
      ck_assert_msg(fabs(x) >= 0x1p-6 && fabs(x) < 0x1p7, "%a", x);
      pos += x > 0;
      neg += x < 0;
    }
    for (int w = 0; w < KINDS; w++)
      ck_assert_msg(seen[w] > 0, "%s: no %a", v->name, want[w]);
    ck_assert_msg(special > N / 5 && special < N * 3 / 10, "%d special",
                  special);
    ck_assert(pos > N / 4 && neg > N / 4);
    /* per_rank=true: ranks differ; false: every rank the same. */
    if (v->per_rank)
      ck_assert_int_gt(differ, N / 2);
    else
      ck_assert_int_eq(differ, 0);
  }
  /* Two variables are special at the same index now and then. */
  int both = 0;
  for (int64_t i = 0; i < N; i++) {
    double x = ovl__var_init_value(a, 0, i), y = ovl__var_init_value(c, 0, i);
    both += (!isfinite(x) || x == 0 || fabs(x) < 0x1p-6 || fabs(x) > 0x1p7) &&
            (!isfinite(y) || y == 0 || fabs(y) < 0x1p-6 || fabs(y) > 0x1p7);
  }
  ck_assert_msg(both > N / 32 && both < N / 8, "both special at %d", both);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_multiline_and_comments) {
  ovl_program *p = PARSE_OK("# header\n"
                            "a = data(  # the input\n"
                            "  shape=[\n"
                            "    4,   # rows\n"
                            "    8,\n"
                            "  ],\n"
                            ")\n"
                            "\n"
                            "b = scale(a,\n"
                            "          scale=.5, bias=-1e-3)   # trailing\n"
                            "fetch(b)");
  ck_assert_int_eq(var(p, "a")->dims[1], 8);
  ck_assert_uint_eq(p->nops, 2);
  ck_assert_int_eq(p->ops[0].line, 9);
  ck_assert_double_eq(p->ops[0].scale, 0.5);
  ck_assert_double_eq(p->ops[0].bias, -1e-3);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_collective_shapes) {
  ovl_parse_opts o = {.size = sizeof o, .nranks = 4};
  ovl_program *p = parse_with(
      "x = data(shape=[8, 3])\n"
      "g = c_allgather(x, ring_id=2)\n"
      "r = c_reducescatter(x, ring_id=1, use_calc_stream=true)\n"
      "c_broadcast(x, root=3)\n"
      "m = c_allreduce_max(x)\n",
      &o);
  ck_assert_int_eq(var(p, "g")->dims[0], 32);
  ck_assert_int_eq(var(p, "g")->dims[1], 3);
  ck_assert_int_eq(var(p, "r")->dims[0], 2);
  ck_assert_int_eq(p->ops[0].stream, OVL_STREAM_COMM(2));
  ck_assert_int_eq(p->ops[1].stream, OVL_STREAM_CALC);
  ck_assert(p->ops[1].use_calc_stream);
  ck_assert_int_eq(p->ops[2].root, 3);
  ck_assert_int_eq(p->ops[2].out, p->ops[2].in[0]); /* in place */
  ck_assert_int_eq(p->ops[3].out, var_index(p, "m"));
  ck_assert_int_eq(p->nrings, 3);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_inplace_allgather_one_rank) {
  ovl_parse_opts o = {.size = sizeof o, .nranks = 1};
  ovl_program *p = parse_with(A10 "c_allgather(a)\nc_reducescatter(a)\n", &o);
  ck_assert_int_eq(p->ops[0].out, 0);
  ck_assert_int_eq(p->ops[1].out, 0);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_op_streams) {
  ovl_program *p = PARSE_OK(A10 "c_allreduce_sum(a, ring_id=1)\n"
                                "c_wait_compute(a, ring_id=1)\n"
                                "c_wait_comm(ring_id=1)\n"
                                "c_sync_comm_stream(a, ring_id=1)\n"
                                "c_sync_calc_stream(a)\n"
                                "delay(us=5, stream=comm, ring_id=1)\n"
                                "delay(us=2.5)\n"
                                "delay(us=0, stream=calc, ring_id=1)\n");
  static const int want[] = {OVL_STREAM_COMM(1), OVL_STREAM_COMM(1),
                             OVL_STREAM_CALC,    OVL_STREAM_COMM(1),
                             OVL_STREAM_CALC,    OVL_STREAM_COMM(1),
                             OVL_STREAM_CALC,    OVL_STREAM_CALC};
  ck_assert_uint_eq(p->nops, 8);
  for (size_t i = 0; i < p->nops; i++) {
    ck_assert_int_eq(main_stream(p, i), want[i]);
  }
  ck_assert_int_eq(p->ops[2].nin, 0);
  ck_assert_double_eq(p->ops[5].us, 5.0);
  ck_assert_double_eq(p->ops[6].us, 2.5);
  ck_assert_int_eq(p->nrings, 2);
  ovl_program_free(p);
}
END_TEST

/* Compute ops take stream=calc|comm (with ring_id); the generic stream ops
 * run on the stream they name. */
START_TEST(test_generic_op_streams) {
  ovl_program *p = PARSE_OK(
      A10 "c_allreduce_sum(a, ring_id=2)\n"
          "b = assign(a)\n"
          "c = elementwise_add(a, b, stream=comm, ring_id=2)\n"
          "d = scale(c, scale=2, stream=calc, ring_id=5)\n"
          "e = elementwise_mul(a, a, stream=comm, ring_id=2)\n"
          "event_record(c, event=x, stream=comm, ring_id=2)\n"
          "stream_wait_event(event=x, stream=calc)\n"
          "stream_wait_event(a, b, event=y, stream=comm, ring_id=2)\n"
          "event_record(event=y)\n"
          "stream_sync(stream=comm, ring_id=2)\n"
          "stream_sync()\n"
          "event_record(event=x, stream=calc)\n");
  static const int want[] = {
      OVL_STREAM_COMM(2), OVL_STREAM_CALC,    OVL_STREAM_COMM(2),
      OVL_STREAM_CALC,    OVL_STREAM_COMM(2), OVL_STREAM_COMM(2),
      OVL_STREAM_CALC,    OVL_STREAM_COMM(2), OVL_STREAM_CALC,
      OVL_STREAM_COMM(2), OVL_STREAM_CALC,    OVL_STREAM_CALC};
  static const int want_event[] = {-1, -1, -1, -1, -1, 0, 0, 1, 1, -1, -1, 0};
  ck_assert_uint_eq(p->nops, 12);
  for (size_t i = 0; i < p->nops; i++) {
    ck_assert_int_eq(main_stream(p, i), want[i]);
    ck_assert_int_eq(p->ops[i].event, want_event[i]);
  }
  ck_assert_str_eq(p->ops[5].def->name, "event_record");
  ck_assert_int_eq(p->ops[5].nin, 1);
  ck_assert_int_eq(p->ops[5].out, -1);
  ck_assert_str_eq(p->ops[6].def->name, "stream_wait_event");
  ck_assert_int_eq(p->ops[7].nin, 2);
  ck_assert_str_eq(p->ops[9].def->name, "stream_sync");
  ck_assert_int_eq(p->ops[10].nin, 0);
  ck_assert_double_eq(p->ops[3].scale, 2.0);
  /* Named events, in order of first use. */
  ck_assert_uint_eq(p->nevents, 2);
  ck_assert_str_eq(p->events[0], "x");
  ck_assert_str_eq(p->events[1], "y");
  ck_assert_int_eq(p->nrings, 3);
  ovl_program_free(p);

  /* No named events: none in the program. */
  p = PARSE_OK(A10 "b = assign(a)\n");
  ck_assert_uint_eq(p->nevents, 0);
  ck_assert_ptr_null(p->events);
  ck_assert_int_eq(p->ops[0].event, -1);
  ovl_program_free(p);
}
END_TEST

/* Event names are names (a param may give one), kept across repeats, and
 * the same name in different ops is one event. */
START_TEST(test_event_names) {
  const char *defs[] = {"ev=late"};
  ovl_parse_opts o = {
      .size = sizeof o, .defines = defs, .ndefines = 1, .nranks = 2};
  ovl_program *p = parse_with("param ev = early\n" A10
                              "c_allreduce_sum(a, ring_id=0)\n"
                              "repeat 3 {\n"
                              "  event_record(event=ev)\n"
                              "  stream_wait_event(event=ev, stream=comm)\n"
                              "  event_record(event=other)\n"
                              "}\n"
                              "stream_wait_event(event=late, stream=comm)\n",
                              &o);
  ck_assert_uint_eq(p->nops, 1 + 3 * 3 + 1);
  ck_assert_uint_eq(p->nevents, 2);
  ck_assert_str_eq(p->events[0], "late");
  ck_assert_str_eq(p->events[1], "other");
  for (size_t i = 1; i < p->nops; i++)
    ck_assert_int_eq(p->ops[i].event, (i % 3 == 0) ? 1 : 0);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_fetch_order) {
  ovl_program *p = PARSE_OK(A10 "b = assign(a)\nc = assign(a)\n"
                                "fetch(c, a)\nfetch(b, c, b)\nfetch(a)\n");
  ck_assert_uint_eq(p->nfetch, 3);
  ck_assert_int_eq(p->fetch[0], var_index(p, "c"));
  ck_assert_int_eq(p->fetch[1], var_index(p, "a"));
  ck_assert_int_eq(p->fetch[2], var_index(p, "b"));
  ck_assert_int_eq(p->ops[3].nin, 3);
  ck_assert_str_eq(p->ops[3].def->name, "fetch");
  ovl_program_free(p);
}
END_TEST

/* The introspection calls take any index: out of range gives nothing
 * rather than reading past the arrays. */
START_TEST(test_introspection_out_of_range) {
  ovl_program *p = PARSE_OK(A10 "b = assign(a)\nfetch(b)\n");
  ovl_var_info info;
  const char *name = "x", *value = "x", *plain = "x";
  ovl_param_origin origin = OVL_PARAM_DEFINED;
  int line = 7, stream = 7;
  ovl_program_fetch_info(p, 1, &info);
  ck_assert_ptr_null(info.name);
  ck_assert_int_eq(info.numel, 0);
  ovl_program_fetch_info(p, 0, &info);
  ck_assert_str_eq(info.name, "b");
  ovl_program_op(p, 99, &name, &line, &stream);
  ck_assert_ptr_null(name);
  ck_assert_int_eq(line, 0);
  ck_assert_int_eq(stream, -1);
  ovl_program_op(p, 0, &name, &line, &stream);
  ck_assert_str_eq(name, "assign");
  ck_assert_int_eq(stream, 0);
  ovl_program_op(p, 1, &name, &line, &stream);
  ck_assert_int_eq(stream, -1); /* fetch: a host op */
  ovl_program_param(p, 0, &name, &value, &plain, &origin);
  ck_assert_ptr_null(name);
  ck_assert_ptr_null(value);
  ck_assert_ptr_null(plain);
  ck_assert_int_eq(origin, OVL_PARAM_DEFAULT);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_repeat_expansion_order) {
  ovl_program *p = PARSE_OK(A10 "repeat 2 {\n"
                                "  x = assign(a)\n"
                                "  repeat 3 {\n"
                                "    y = scale(a)\n"
                                "  }\n"
                                "  repeat 5 {\n" /* empty blocks vanish */
                                "    repeat 2 {\n"
                                "    }\n"
                                "  }\n"
                                "  z = elementwise_mul(x, y)\n"
                                "}\n"
                                "fetch(z)\n");
  static const char *want[] = {"assign", "scale", "scale", "scale",
                               "elementwise_mul"};
  ck_assert_uint_eq(p->nops, 11);
  for (size_t i = 0; i < 10; i++)
    ck_assert_str_eq(opname(p, i), want[i % 5]);
  ck_assert_str_eq(opname(p, 10), "fetch");
  ck_assert_int_eq(p->ops[6].line, 5);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_repeat_count_param) {
  const char *defs[] = {"n=7"};
  ovl_parse_opts o = {
      .size = sizeof o, .defines = defs, .ndefines = 1, .nranks = 2};
  const char *src = "param n = 3\n" A10 "repeat n {\n b = assign(a)\n}\n";
  ovl_program *p = PARSE_OK(src);
  ck_assert_uint_eq(p->nops, 3);
  ovl_program_free(p);
  p = parse_with(src, &o);
  ck_assert_uint_eq(p->nops, 7);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_large_repeat_ok) {
  ovl_program *p = PARSE_OK(A10 "repeat 1000 {\n repeat 100 {\n"
                                "  b = assign(a)\n }\n}\n");
  ck_assert_uint_eq(p->nops, 100000);
  ck_assert_str_eq(opname(p, 99999), "assign");
  ck_assert_int_eq(p->ops[99999].line, 4);
  ovl_program_free(p);
}
END_TEST

/* ovl_parse_opts.max_ops: the caller's limit on the expanded program. */
START_TEST(test_max_ops) {
  static const char src[] = A10 "repeat 1000 {\n repeat 1000 {\n"
                                "  b = assign(a)\n }\n}\nfetch(b)\n";
  ovl_parse_opts o = {.size = sizeof o, .nranks = 2, .max_ops = 1000001};
  ovl_program *p = parse_with(src, &o);
  ck_assert_uint_eq(p->nops, 1000001);
  ovl_program_free(p);
  o.max_ops = 1000000;
  EXPECT_STATUS(src, strlen(src), &o, OVL_ENOMEM,
                "<string>: the program has 1000001 ops after repeat "
                "expansion; the limit is 1000000",
                "");
  /* Without repeat blocks too. */
  o.max_ops = 1;
  EXPECT_ERR_STATUS(A10 "b = assign(a)\nc = assign(a)\n", &o, OVL_ENOMEM,
                "<string>: the program has 2 ops after repeat expansion; "
                "the limit is 1",
                "");
  /* A schedule error is reported first: it is what the user must fix. */
  EXPECT_ERR_OPTS(A10 "repeat 100 {\n b = assign(q)\n}\n", &o,
                  "<string>:3:13: undefined variable 'q'", "");
  /* Above the built-in limit, the built-in limit holds. */
  o.max_ops = (uint64_t)1 << 40;
  EXPECT_ERR_OPTS(A10 "repeat 20000000 {\n b = assign(a)\n}\n", &o,
                  "<string>:2:1: ",
                  "repeat makes the program longer than 16777216 ops");
}
END_TEST

/* A schedule of 16.7 M ops over the limit is refused before it is
 * expanded: at once, whatever its expanded size. */
START_TEST(test_max_ops_refused_at_once) {
  static const char src[] = A10 "repeat 4096 {\n repeat 4095 {\n"
                                "  b = scale(a, scale=2)\n }\n}\n";
  ovl_parse_opts o = {.size = sizeof o, .nranks = 2, .max_ops = 1000};
  double t0 = ovl__now();
  EXPECT_STATUS(src, strlen(src), &o, OVL_ENOMEM,
                "<string>: the program has 16773120 ops after repeat "
                "expansion; the limit is 1000",
                "");
  ck_assert_double_lt(ovl__now() - t0, 0.5);
}
END_TEST

START_TEST(test_write_to_data_var) {
  ovl_program *p = PARSE_OK(A10 "b = data(shape=[10], init=fill)\n"
                                "b = elementwise_add(a, b)\n"
                                "a = c_allreduce_sum(b)\n");
  ck_assert_int_eq(p->ops[0].out, var_index(p, "b"));
  ck_assert_int_eq(p->ops[1].out, var_index(p, "a"));
  ovl_program_free(p);
}
END_TEST

START_TEST(test_param_name_values) {
  ovl_program *p =
      PARSE_OK("param st = comm\nparam dt = float64\nparam n = 4\n"
               "param k = n\n"
               "a = data(shape=[n, k], dtype=dt)\n"
               "c_allreduce_sum(a)\n"
               "delay(us=1, stream=st)\n");
  ck_assert_int_eq(var(p, "a")->dtype, OVL_DTYPE_FLOAT64);
  ck_assert_int_eq(var(p, "a")->dims[1], 4);
  ck_assert_int_eq(p->ops[1].stream, OVL_STREAM_COMM(0));
  ovl_program_free(p);
}
END_TEST

START_TEST(test_many_variables) {
  /* The variable table is hashed: 100k names stay fast. */
  size_t n = 100000, cap = n * 40 + 100, k = 0;
  char *src = malloc(cap);
  ck_assert_ptr_nonnull(src);
  k += (size_t)snprintf(src + k, cap - k, "v0 = data(shape=[1])\n");
  for (size_t i = 1; i < n; i++)
    k += (size_t)snprintf(src + k, cap - k, "v%zu = assign(v%zu)\n", i, i - 1);
  ovl_program *p = PARSE_OK(src);
  ck_assert_uint_eq(p->nvars, n);
  ck_assert_uint_eq(p->nops, n - 1);
  ovl_program_free(p);
  free(src);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Lexical errors                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_err_unexpected_character) {
  EXPECT_ERR(A10 "b = assign(a) @\n", "<string>:2:15: ",
             "unexpected character '@'");
  EXPECT_ERR("b = assign(a;)\n", "<string>:1:13: ", "unexpected character ';'");
  EXPECT_ERR("x = \xc3\xa9(a)\n", "<string>:1:5: ", "unexpected byte 0xc3");
  EXPECT_ERR("-x = assign(a)\n", "<string>:1:1: ",
             "expected a statement, got '-'");
}
END_TEST

START_TEST(test_err_nul_byte) {
  static const char src[] = "a = data(shape=[1])\nb =\0 assign(a)\n";
  EXPECT_STATUS(src, sizeof src - 1, NULL, OVL_EPARSE, "<string>:2:4: ",
                "binary data (NUL byte)");
  /* Even inside a comment. */
  static const char src2[] = "# x\0y\n";
  EXPECT_STATUS(src2, sizeof src2 - 1, NULL, OVL_EPARSE, "<string>:1:4: ",
                "NUL byte");
}
END_TEST

START_TEST(test_err_numbers) {
  EXPECT_ERR("param n = 9223372036854775808\n", "<string>:1:11: ",
             "out of range (int64)");
  EXPECT_ERR("param n = -9223372036854775809\n", "<string>:1:11: ",
             "out of range (int64)");
  EXPECT_ERR("param f = 1e999\n", "<string>:1:11: ", "out of range (float64)");
  EXPECT_ERR("param f = 12abc\n", "<string>:1:11: ", "malformed number '12abc'");
  EXPECT_ERR("param f = 1.2.3\n", "<string>:1:11: ", "malformed number '1.2.3'");
  EXPECT_ERR("param f = 1e+\n", "<string>:1:11: ", "malformed number");
  /* The extreme int64 values themselves are fine. */
  ovl_program *p = PARSE_OK("param a = -9223372036854775808\n"
                            "param b = 9223372036854775807\n");
  ck_assert_str_eq(p->params[0].value, "-9223372036854775808");
  ck_assert_str_eq(p->params[1].value, "9223372036854775807");
  ovl_program_free(p);
}
END_TEST

START_TEST(test_err_identifier_too_long) {
  char src[700];
  memset(src, 'x', 256);
  strcpy(src + 256, " = assign(a)\n");
  EXPECT_ERR(src, "<string>:1:1: ", "identifier too long (256 chars; max 255)");
  /* 255 is the limit. */
  memcpy(src, "a = data(shape=[1])\n", 20);
  memset(src + 20, 'y', 255);
  strcpy(src + 275, " = assign(a)\n");
  ovl_program *p = PARSE_OK(src);
  ck_assert_uint_eq(strlen(p->vars[1].name), 255);
  ovl_program_free(p);
  memset(src, '1', 300);
  strcpy(src + 300, "\n");
  EXPECT_ERR(src, "<string>:1:1: ", "number too long");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Syntax errors                                                       */
/* ------------------------------------------------------------------ */

START_TEST(test_err_unterminated_paren) {
  EXPECT_ERR(A10 "b = assign(a", "<string>:2:11: ",
             "unterminated argument list: '(' has no matching ')'");
  EXPECT_ERR(A10 "b = assign(a,\n\n", "<string>:2:11: ", "unterminated");
}
END_TEST

START_TEST(test_err_missing_paren) {
  EXPECT_ERR(A10 "b = assign(a\nc = assign(b)\n", "<string>:3:1: ",
             "expected ',' or ')' in the arguments of assign (opened at 2:11),"
             " got 'c'");
}
END_TEST

START_TEST(test_err_unterminated_list) {
  EXPECT_ERR("a = data(shape=[10, 20", "<string>:1:16: ",
             "unterminated list: '[' has no matching ']'");
  EXPECT_ERR("a = data(shape=[10, 20)\n", "<string>:1:23: ",
             "expected ',' or ']' in the list opened at 1:16, got ')'");
  EXPECT_ERR("a = data(shape=[[1]])\n", "<string>:1:17: ",
             "nested lists are not supported");
  EXPECT_ERR("a = data(shape=[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1])\n",
             "<string>:1:49: ", "list has more than 16 elements");
}
END_TEST

START_TEST(test_err_junk_after_statement) {
  EXPECT_ERR(A10 "b = assign(a) c\n", "<string>:2:15: ",
             "unexpected 'c' after statement");
  EXPECT_ERR(A10 "repeat 2 { b = assign(a)\n}\n", "<string>:2:12: ",
             "after statement");
  EXPECT_ERR(A10 "repeat 2 {\n b = assign(a)\n} }\n", "<string>:4:3: ",
             "after statement");
  EXPECT_ERR("param n = 3 4\n", "<string>:1:13: ", "after statement");
}
END_TEST

START_TEST(test_err_bad_statement_start) {
  EXPECT_ERR("= assign(a)\n", "<string>:1:1: ",
             "expected a statement, got '='");
  EXPECT_ERR("b assign(a)\n", "<string>:1:3: ",
             "expected '(' or '=' after 'b', got 'assign'");
  EXPECT_ERR("b, = assign(a)\n", "<string>:1:4: ",
             "expected an output name after ','");
  EXPECT_ERR("b = 3\n", "<string>:1:5: ", "expected an op name after '='");
  EXPECT_ERR("b = assign\n", "<string>:1:11: ",
             "expected '(' after 'assign', got end of line");
  EXPECT_ERR(A10 "b = assign(3)\n", "<string>:2:12: ",
             "expected a variable name or key=value, got '3'");
  EXPECT_ERR(A10 "b = scale(a, scale=)\n", "<string>:2:20: ",
             "expected a value, got ')'");
  EXPECT_ERR(A10 "b = scale(a,,)\n", "<string>:2:13: ",
             "expected a variable name or key=value, got ','");
  EXPECT_ERR("a = data(shape=[1,,2])\n", "<string>:1:19: ",
             "expected a value, got ','");
  EXPECT_ERR("a = data(shape=[,])\n", "<string>:1:17: ",
             "expected a value, got ','");
}
END_TEST

START_TEST(test_err_positional_after_keyword) {
  EXPECT_ERR(A10 "b = data(shape=[10])\nc = elementwise_add(a, b)\n"
                 "c_wait_compute(ring_id=0, c)\n",
             "<string>:4:27: ",
             "positional argument 'c' after keyword arguments");
}
END_TEST

START_TEST(test_err_too_many_attributes) {
  EXPECT_ERR(A10 "delay(us=1, us=1, us=1, us=1, us=1, us=1, us=1, us=1, us=1, "
                 "us=1, us=1, us=1, us=1, us=1, us=1, us=1, us=1)\n",
             "<string>:2:", "too many attributes");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Ops, arity, variables                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_err_unknown_op) {
  EXPECT_ERR(A10 "c_allreduce_summ(a)\n", "<string>:2:1: ",
             "unknown op 'c_allreduce_summ' (did you mean 'c_allreduce_sum'?)");
  EXPECT_ERR(A10 "b = asign(a)\n", "<string>:2:5: ",
             "unknown op 'asign' (did you mean 'assign'?)");
  EXPECT_ERR(A10 "b = frobnicate(a)\n", "<string>:2:5: ",
             "unknown op 'frobnicate'");
  EXPECT_ERR("a = dta(shape=[1])\n", "<string>:1:5: ", "did you mean 'data'?");
  /* Every name it starts or ends, listed, where none is 2 edits away. */
  EXPECT_ERR(A10 "c_allreduce(a)\n", "<string>:2:1: ",
             "unknown op 'c_allreduce' (did you mean 'c_allreduce_sum', "
             "'c_allreduce_max', 'c_allreduce_min', 'c_allreduce_prod' or "
             "'c_allreduce_avg'?)");
  EXPECT_ERR(A10 "b = allreduce_sum(a)\n", "<string>:2:5: ",
             "(did you mean 'c_allreduce_sum'?)");
  EXPECT_ERR(A10 "b = matmul(a, a)\n", "<string>:2:5: ",
             "(did you mean 'matmul_v2'?)");
  /* No suggestion when nothing is close: relu is 3 edits from delay,
   * gelu too; zz, ab are short. */
  static const char *const far[] = {"b = zz(a)\n", "b = relu(a)\n",
                                    "b = gelu(a)\n", "b = ab(a)\n"};
  for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
    ovl_program *p = SENTINEL;
    try_parse(far[i], strlen(far[i]), NULL, &p);
    ck_assert_msg(strstr(last_err.msg, "unknown op") != NULL &&
                      strstr(last_err.msg, "did you mean") == NULL,
                  "%s: %s", far[i], last_err.msg);
  }
}
END_TEST

/* Statements of other languages: what the language has instead. */
START_TEST(test_err_foreign_syntax) {
  EXPECT_ERR(A10 "if rank == 0 {\n  b = scale(a)\n}\n", "<string>:2:1: ",
             "'if' is not in the schedule language: there are no branches; "
             "an op runs on the ranks of its ranks=[...] argument");
  EXPECT_ERR(A10 "if (rank == 0) {\n", "<string>:2:1: ",
             "peer=(rank + 1) % nranks");
  EXPECT_ERR(A10 "for (i = 0; i < 4; i++) {\n", "<string>:2:1: ",
             "'for' is not in the schedule language: a loop is 'repeat N {'");
  EXPECT_ERR(A10 "while true {\n", "<string>:2:1: ", "'while' is not in");
  EXPECT_ERR(A10 "{\n", "<string>:2:1: ",
             "'{' opens a block only after 'repeat N' or 'group'");
  EXPECT_ERR(A10 "repeat 2 {\n  b = scale(a)\n} else {\n}\n",
             "<string>:4:3: ", "'else' is not in the schedule language");
  /* A variable may still be named so. */
  ovl_program_free(PARSE_OK(A10 "if = assign(a)\nfor = scale(if)\n"));
}
END_TEST

START_TEST(test_err_arity) {
  EXPECT_ERR(A10 "c = elementwise_add(a)\n", "<string>:2:5: ",
             "elementwise_add takes 2 inputs, got 1");
  EXPECT_ERR(A10 "b = assign(a, a)\n", "<string>:2:5: ",
             "assign takes 1 input, got 2");
  EXPECT_ERR(A10 "fetch()\n", "<string>:2:1: ",
             "fetch takes at least 1 input, got 0");
  EXPECT_ERR(A10 "c_allreduce_sum()\n", "<string>:2:1: ",
             "c_allreduce_sum takes 1 input, got 0");
  EXPECT_ERR(A10 "c_wait_comm(a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a)\n",
             "<string>:2:1: ", "c_wait_comm takes at most 16 inputs, got 17");
  EXPECT_ERR(A10 "delay(a, us=1)\n", "<string>:2:1: ",
             "delay takes 0 inputs, got 1");
}
END_TEST

START_TEST(test_err_output_count) {
  EXPECT_ERR(A10 "c_allreduce_sum(a)\nx = c_wait_comm(a)\n", "<string>:3:1: ",
             "c_wait_comm has no output");
  EXPECT_ERR(A10 "x = fetch(a)\n", "<string>:2:1: ", "fetch has no output");
  EXPECT_ERR(A10 "x, y = assign(a)\n", "<string>:2:4: ",
             "assign has 1 output, got 2");
  EXPECT_ERR(A10 "assign(a)\n", "<string>:2:1: ",
             "assign needs an output variable");
}
END_TEST

START_TEST(test_err_undefined_variable) {
  EXPECT_ERR(A10 "b = elementwise_add(a, q)\n", "<string>:2:24: ",
             "undefined variable 'q'");
  EXPECT_ERR("fetch(x)\n", "<string>:1:7: ", "undefined variable 'x'");
  /* Inside a repeat, a variable written later in the body is not yet
   * declared on the first iteration. */
  EXPECT_ERR(A10 "repeat 2 {\n b = assign(c)\n c = assign(a)\n}\n",
             "<string>:3:13: ", "undefined variable 'c'");
}
END_TEST

START_TEST(test_err_redeclared_variable) {
  EXPECT_ERR("\n\n" A10 "b = assign(a)\na = data(shape=[10])\n",
             "<string>:5:1: ", "variable 'a' re-declared (first declared at 3:1)");
  EXPECT_ERR(A10 "b = assign(a)\nb = data(shape=[10])\n", "<string>:3:1: ",
             "variable 'b' re-declared (first declared at 2:1)");
}
END_TEST

START_TEST(test_err_reserved_names) {
  EXPECT_ERR(A10 "true = assign(a)\n", "<string>:2:1: ",
             "'true' is reserved");
  EXPECT_ERR("param false = 1\n", "<string>:1:7: ", "'false' is reserved");
  EXPECT_ERR(A10 "b = assign(true)\n", "<string>:2:12: ",
             "undefined variable 'true'");
}
END_TEST

START_TEST(test_err_param_as_variable) {
  EXPECT_ERR("param cols = 3\n" A10 "b = assign(cols)\n", "<string>:3:12: ",
             "'cols' is a param, not a variable");
  EXPECT_ERR("param cols = 3\n" A10 "cols = assign(a)\n", "<string>:3:1: ",
             "'cols' is a param, not a variable");
  EXPECT_ERR("param cols = 3\ncols = data(shape=[1])\n", "<string>:2:1: ",
             "'cols' is a param, not a variable");
  EXPECT_ERR(A10 "param a = 3\n", "<string>:2:7: ",
             "'a' is already a variable (declared at 1:1)");
}
END_TEST

START_TEST(test_err_shape_mismatch_output) {
  EXPECT_ERR("a = data(shape=[1000, 10000])\nd = data(shape=[10])\n"
             "d = assign(a)\n",
             "<string>:3:1: ",
             "shape mismatch: 'd' is [10] float32 but assign gives "
             "[1000,10000] float32");
  EXPECT_ERR(A10 "d = data(shape=[1000, 10000])\nd = scale(a)\n",
             "<string>:3:1: ",
             "shape mismatch: 'd' is [1000,10000] float32 but scale gives [10]"
             " float32");
}
END_TEST

START_TEST(test_err_dtype_mismatch_output) {
  EXPECT_ERR(A10 "d = data(shape=[10], dtype=float64)\nd = assign(a)\n",
             "<string>:3:1: ",
             "dtype mismatch: 'd' is [10] float64 but assign gives [10] "
             "float32");
}
END_TEST

START_TEST(test_err_elementwise_mismatch) {
  EXPECT_ERR(A10 "b = data(shape=[20])\nc = elementwise_add(a, b)\n",
             "<string>:3:5: ",
             "shape mismatch: elementwise_add of 'a' [10] float32 and 'b' [20]"
             " float32");
  EXPECT_ERR(A10 "b = data(shape=[10], dtype=float64)\n"
                 "c = elementwise_mul(a, b)\n",
             "<string>:3:5: ", "dtype mismatch: elementwise_mul of 'a'");
  EXPECT_ERR(A10 "b = data(shape=[10, 1])\nc = elementwise_sub(b, a)\n",
             "<string>:3:5: ", "shape mismatch");
}
END_TEST

START_TEST(test_err_collective_shapes) {
  ovl_parse_opts o3 = {.size = sizeof o3, .nranks = 3};
  EXPECT_ERR_OPTS(A10 "r = c_reducescatter(a)\n", &o3, "<string>:2:5: ",
                  "c_reducescatter: dim 0 of 'a' (10) is not divisible by 3 "
                  "ranks");
  EXPECT_ERR(A10 "c_allgather(a)\n", "<string>:2:1: ",
             "c_allgather needs an output variable: its output is nranks "
             "times larger");
  EXPECT_ERR(A10 "c_reducescatter(a)\n", "<string>:2:1: ",
             "c_reducescatter needs an output variable");
  EXPECT_ERR(A10 "a = c_allgather(a)\n", "<string>:2:1: ",
             "shape mismatch: 'a' is [10] float32 but c_allgather gives [20]");
  EXPECT_ERR("a = data(shape=[576460752303423488])\nb = c_allgather(a)\n",
             "<string>:2:5: ", "too many elements");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Attributes                                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_err_bad_attribute_name) {
  EXPECT_ERR(A10 "c_allreduce_sum(a, ring=0)\n", "<string>:2:20: ",
             "c_allreduce_sum has no attribute 'ring' (allowed: ring_id, "
             "use_calc_stream)");
  EXPECT_ERR(A10 "b = scale(a, root=0)\n", "<string>:2:14: ",
             "scale has no attribute 'root' (allowed: ring_id, scale, bias, "
             "stream)");
  EXPECT_ERR(A10 "b = assign(a, scale=2)\n", "<string>:2:15: ",
             "assign has no attribute 'scale' (allowed: ring_id, stream)");
  EXPECT_ERR(A10 "fetch(a, ring_id=0)\n", "<string>:2:10: ",
             "fetch has no attribute 'ring_id' (it takes none)");
  EXPECT_ERR(A10 "c_broadcast(a, root=0, us=1)\n", "<string>:2:24: ",
             "(allowed: ring_id, use_calc_stream, root)");
}
END_TEST

START_TEST(test_err_duplicate_attribute) {
  EXPECT_ERR(A10 "c_allreduce_sum(a, ring_id=0, ring_id=1)\n",
             "<string>:2:31: ",
             "duplicate attribute 'ring_id' (first given at 2:20)");
  EXPECT_ERR("a = data(shape=[1], shape=[2])\n", "<string>:1:21: ",
             "duplicate attribute 'shape'");
}
END_TEST

START_TEST(test_err_attribute_type) {
  EXPECT_ERR(A10 "c_allreduce_sum(a, ring_id=2.5)\n", "<string>:2:28: ",
             "attribute 'ring_id' of c_allreduce_sum wants an int, got 2.5");
  EXPECT_ERR(A10 "c_allreduce_sum(a, use_calc_stream=1)\n", "<string>:2:36: ",
             "attribute 'use_calc_stream' of c_allreduce_sum wants true or "
             "false, got 1");
  EXPECT_ERR(A10 "b = scale(a, scale=yes)\n", "<string>:2:20: ",
             "attribute 'scale' of scale wants a number, got 'yes'");
  EXPECT_ERR(A10 "b = scale(a, bias=[1])\n", "<string>:2:19: ",
             "wants a number, got a list");
  EXPECT_ERR(A10 "delay(us=1, stream=host)\n", "<string>:2:20: ",
             "stream=host: the host is not a stream (it runs fetch and the "
             "syncs)");
  EXPECT_ERR("param r = 1.5\n" A10 "c_allreduce_sum(a, ring_id=r)\n",
             "<string>:3:28: ", "wants an int, got 1.5");
}
END_TEST

START_TEST(test_err_attribute_range) {
  EXPECT_ERR(A10 "c_allreduce_sum(a, ring_id=99)\n", "<string>:2:28: ",
             "ring_id 99 out of range (0..15)");
  EXPECT_ERR(A10 "c_allreduce_sum(a, ring_id=-1)\n", "<string>:2:28: ",
             "ring_id -1 out of range");
  EXPECT_ERR(A10 "c_broadcast(a, root=2)\n", "<string>:2:21: ",
             "root 2 out of range for 2 ranks (0..1)");
  EXPECT_ERR(A10 "c_broadcast(a, root=-1)\n", "<string>:2:21: ",
             "root -1 out of range");
  EXPECT_ERR(A10 "delay(us=-5)\n", "<string>:2:10: ", "us must be >= 0, got -5");
  EXPECT_ERR(A10 "delay(stream=calc)\n", "<string>:2:1: ",
             "delay needs us=N");
}
END_TEST

/* The generic stream ops and stream= on compute ops. */
START_TEST(test_err_generic_ops) {
  EXPECT_ERR(A10 "event_record(a)\n", "<string>:2:1: ",
             "event_record needs event=NAME");
  EXPECT_ERR(A10 "stream_wait_event(stream=calc)\n", "<string>:2:1: ",
             "stream_wait_event needs event=NAME");
  EXPECT_ERR(A10 "event_record(event=3)\n", "<string>:2:20: ",
             "attribute 'event' of event_record wants an event name, got 3");
  EXPECT_ERR(A10 "stream_wait_event(event=true)\n", "<string>:2:25: ",
             "wants an event name, got true");
  EXPECT_ERR(A10 "event_record(event=[e])\n", "<string>:2:20: ",
             "wants an event name, got a list");
  EXPECT_ERR(A10 "event_record(event=e, event=f)\n", "<string>:2:23: ",
             "duplicate attribute 'event' (first given at 2:14)");
  EXPECT_ERR(A10 "stream_sync(event=e)\n", "<string>:2:13: ",
             "stream_sync has no attribute 'event' (allowed: ring_id, "
             "stream)");
  EXPECT_ERR(A10 "b = assign(a, event=e)\n", "<string>:2:15: ",
             "assign has no attribute 'event'");
  EXPECT_ERR(A10 "c_wait_comm(a, event=e)\n", "<string>:2:16: ",
             "c_wait_comm has no attribute 'event' (allowed: ring_id)");
  EXPECT_ERR(A10 "x = event_record(a, event=e)\n", "<string>:2:1: ",
             "event_record has no output");
  EXPECT_ERR(A10 "x = stream_sync()\n", "<string>:2:1: ",
             "stream_sync has no output");
  EXPECT_ERR(A10 "stream_sync(a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a)\n",
             "<string>:2:1: ", "stream_sync takes at most 16 inputs, got 17");
  EXPECT_ERR(A10 "event_record(q, event=e)\n", "<string>:2:14: ",
             "undefined variable 'q'");
  EXPECT_ERR(A10 "b = assign(a, stream=2.5)\n", "<string>:2:22: ",
             "attribute 'stream' of assign wants calc, comm or the name of a "
             "stream, got 2.5");
  EXPECT_ERR(A10 "stream_sync(stream=1)\n", "<string>:2:20: ",
             "attribute 'stream' of stream_sync wants calc, comm or the name "
             "of a stream, got 1");
  EXPECT_ERR(A10 "b = scale(a, stream=comm, ring_id=16)\n", "<string>:2:35: ",
             "ring_id 16 out of range (0..15)");
  EXPECT_ERR(A10 "b = scale(a, stream=calc, stream=comm)\n",
             "<string>:2:27: ", "duplicate attribute 'stream'");
}
END_TEST

/* More than MAX_EVENTS (4096) distinct event names. */
START_TEST(test_err_too_many_events) {
  size_t cap = 4097 * 40 + 64, len = 0;
  char *s = malloc(cap);
  ck_assert_ptr_nonnull(s);
  for (int i = 0; i < 4096; i++)
    len += (size_t)snprintf(s + len, cap - len, "event_record(event=e%d)\n",
                            i);
  ovl_program *p = PARSE_OK(s);
  ck_assert_uint_eq(p->nevents, 4096);
  ck_assert_str_eq(p->events[4095], "e4095");
  ovl_program_free(p);
  /* A name used before is not a new event. */
  snprintf(s + len, cap - len, "event_record(event=e17)\n");
  p = PARSE_OK(s);
  ck_assert_uint_eq(p->nevents, 4096);
  ovl_program_free(p);
  snprintf(s + len, cap - len, "event_record(event=e4096)\n");
  EXPECT_ERR(s, "<string>:4097:20: ", "more than 4096 named events");
  free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Blocks                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_err_unbalanced_close) {
  EXPECT_ERR(A10 "b = assign(a)\n  }\n", "<string>:3:3: ",
             "'}' without a matching repeat");
}
END_TEST

START_TEST(test_err_unbalanced_open) {
  EXPECT_ERR(A10 "repeat 2 {\n  b = assign(a)\n", "<string>:2:1: ",
             "repeat block is not closed (missing '}')");
  /* The innermost block still open is the one reported. */
  EXPECT_ERR(A10 "repeat 2 {\n  repeat 3 {\n    b = assign(a)\n  }\n"
                 "  repeat 4 {\n",
             "<string>:6:3: ", "repeat block is not closed");
}
END_TEST

START_TEST(test_err_repeat_count) {
  EXPECT_ERR(A10 "repeat 0 {\n}\n", "<string>:2:8: ",
             "repeat count must be >= 1, got 0");
  EXPECT_ERR(A10 "repeat -1 {\n}\n", "<string>:2:8: ",
             "repeat count must be >= 1, got -1");
  EXPECT_ERR(A10 "repeat 2.5 {\n}\n", "<string>:2:8: ",
             "repeat count must be an int or an int param, got 2.5");
  EXPECT_ERR(A10 "repeat n {\n}\n", "<string>:2:8: ",
             "repeat count must be an int or an int param, got 'n'");
  EXPECT_ERR("param n = 1.5\nrepeat n {\n}\n", "<string>:2:8: ",
             "got 1.5");
  EXPECT_ERR(A10 "repeat 99999999999999999999 {\n}\n", "<string>:2:8: ",
             "out of range (int64)");
  EXPECT_ERR(A10 "repeat {\n}\n", "<string>:2:8: ",
             "expected a repeat count after 'repeat', got '{'");
  EXPECT_ERR(A10 "repeat 3\n}\n", "<string>:2:9: ",
             "expected '{' after the repeat count, got end of line");
}
END_TEST

START_TEST(test_err_repeat_too_large) {
  EXPECT_ERR(A10 "repeat 100000 {\n  repeat 1000 {\n    b = assign(a)\n"
                 "  }\n}\n",
             "<string>:2:1: ", "repeat makes the program longer than 16777216 ops");
  EXPECT_ERR(A10 "repeat 9223372036854775807 {\n b = assign(a)\n}\n",
             "<string>:2:1: ", "longer than");
  /* Two siblings that fit alone but not together. */
  EXPECT_ERR(A10 "repeat 10000000 {\n b = assign(a)\n}\n"
                 "repeat 10000000 {\n b = assign(a)\n}\n",
             "<string>:5:1: ", "longer than");
  /* A huge count over an empty body expands to nothing. */
  ovl_program *p = PARSE_OK("repeat 9223372036854775807 {\n}\n");
  ck_assert_uint_eq(p->nops, 0);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_err_nesting_too_deep) {
  char src[2000] = "";
  for (int i = 0; i < 65; i++)
    strcat(src, "repeat 1 {\n");
  EXPECT_ERR(src, "<string>:65:1: ", "repeat blocks nested deeper than 64");
}
END_TEST

START_TEST(test_err_declarations_in_repeat) {
  EXPECT_ERR(A10 "repeat 2 {\n  b = data(shape=[1])\n}\n", "<string>:3:7: ",
             "data() inside repeat");
  EXPECT_ERR(A10 "repeat 2 {\n  param n = 1\n}\n", "<string>:3:3: ",
             "param inside repeat");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Params                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_err_param_redeclared) {
  EXPECT_ERR("param n = 1\n\nparam n = 2\n", "<string>:3:7: ",
             "param 'n' re-declared (first declared at 1:7)");
}
END_TEST

START_TEST(test_err_param_before_declaration) {
  EXPECT_ERR("a = data(shape=[rows])\nparam rows = 4\n", "<string>:1:17: ",
             "param 'rows' used before its declaration at 2:7");
  EXPECT_ERR("repeat n {\n}\nparam n = 4\n", "<string>:1:8: ",
             "param 'n' used before its declaration at 3:7");
  EXPECT_ERR("b = assign(n)\nparam n = 4\n", "<string>:1:12: ",
             "param 'n' used before its declaration");
}
END_TEST

START_TEST(test_err_param_syntax) {
  EXPECT_ERR("param = 3\n", "<string>:1:7: ",
             "expected a param name after 'param', got '='");
  EXPECT_ERR("param n 3\n", "<string>:1:9: ", "expected '=' after param 'n'");
  EXPECT_ERR("param n = [1, 2]\n", "<string>:1:11: ", "not a list");
  EXPECT_ERR("param n = 1, gpu = 2\n", "<string>:1:14: ",
             "expected 'cpu = VALUE' after ','");
  EXPECT_ERR("param n = 1, cpu 2\n", "<string>:1:18: ", "expected '=' after cpu");
  EXPECT_ERR("param n =\n", "<string>:1:10: ", "expected a value, got end of line");
}
END_TEST

/* ------------------------------------------------------------------ */
/* data()                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_err_data_shape) {
  EXPECT_ERR("a = data(dtype=float32)\n", "<string>:1:5: ",
             "data() needs shape=[...]");
  EXPECT_ERR("a = data(shape=10)\n", "<string>:1:16: ",
             "shape wants a list of dims");
  EXPECT_ERR("a = data(shape=[])\n", "<string>:1:16: ",
             "shape has 0 dims; it needs 1..8");
  EXPECT_ERR("a = data(shape=[1,1,1,1,1,1,1,1,1])\n", "<string>:1:16: ",
             "shape has 9 dims");
  EXPECT_ERR("a = data(shape=[4, 0])\n", "<string>:1:20: ",
             "shape dims must be >= 1, got 0");
  EXPECT_ERR("a = data(shape=[4, 2.0])\n", "<string>:1:20: ",
             "shape dims must be ints, got 2.0");
  EXPECT_ERR("a = data(shape=[4, n])\n", "<string>:1:20: ",
             "shape dims must be ints, got 'n'");
  EXPECT_ERR("a = data(shape=[4294967296, 4294967296])\n", "<string>:1:16: ",
             "shape has too many elements");
}
END_TEST

START_TEST(test_err_data_attributes) {
  EXPECT_ERR("a = data(shape=[1], dtype=half)\n", "<string>:1:27: ",
             "bad dtype 'half' (float32, float64, float16 or bfloat16)");
  EXPECT_ERR("a = data(shape=[1], init=zeros)\n", "<string>:1:26: ",
             "bad init 'zeros' (uniform, fill or special)");
  EXPECT_ERR("a = data(shape=[1], value=2)\n", "<string>:1:21: ",
             "value= needs init=fill");
  EXPECT_ERR("a = data(shape=[1], init=fill, per_rank=true)\n",
             "<string>:1:32: ", "per_rank= needs init=uniform or special");
  EXPECT_ERR("a = data(shape=[1], seed=-1)\n", "<string>:1:26: ",
             "seed must be >= 0");
  EXPECT_ERR("a = data(shape=[1], seed=1.5)\n", "<string>:1:26: ",
             "attribute 'seed' of data wants an int, got 1.5");
  EXPECT_ERR("a = data(shape=[1], per_rank=1)\n", "<string>:1:30: ",
             "wants true or false");
  EXPECT_ERR("a = data(shape=[1], size=3)\n", "<string>:1:21: ",
             "data has no attribute 'size'");
}
END_TEST

START_TEST(test_err_data_form) {
  EXPECT_ERR("data(shape=[1])\n", "<string>:1:1: ",
             "data() needs a variable to declare");
  EXPECT_ERR("a, b = data(shape=[1])\n", "<string>:1:4: ",
             "data() declares one variable, got 2");
  EXPECT_ERR(A10 "b = data(a, shape=[1])\n", "<string>:2:10: ",
             "data() takes no positional arguments, got 'a'");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rings                                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_ring_without_collective) {
  /* A ring that no collective uses still has its comm stream (DESIGN 2.1):
   * every op that takes stream=comm, and the Paddle wait and sync ops,
   * name it; only the rings with a collective need a communicator. */
  ovl_program *p = PARSE_OK(A10 "c_allreduce_sum(a, ring_id=1)\n"
                                "c_wait_comm(a, ring_id=3)\n"
                                "c_wait_compute(a)\n"
                                "c_sync_comm_stream(a, ring_id=2)\n"
                                "delay(us=1, stream=comm, ring_id=5)\n"
                                "b = scale(a, stream=comm)\n"
                                "event_record(event=e, stream=comm, "
                                "ring_id=6)\n"
                                "stream_wait_event(event=e, stream=comm)\n"
                                "stream_sync(a, stream=comm, ring_id=4)\n");
  ck_assert_int_eq(p->nrings, 7);
  ck_assert_uint_eq(p->ring_comm, 1u << 1);
  ck_assert_int_eq(p->nstreams, 8);
  ck_assert_str_eq(ovl_program_stream_name(p, 6), "comm[5]");
  ck_assert_int_eq(p->ops[4].stream, OVL_STREAM_COMM(5));
  ck_assert_int_eq(p->ops[5].stream, OVL_STREAM_COMM(0));
  ovl_program_free(p);
  /* stream=calc with any ring is fine: it runs on calc, and names no
   * ring. */
  p = PARSE_OK(A10 "b = scale(a, stream=calc, ring_id=4)\n"
                   "event_record(event=e, ring_id=4)\n"
                   "stream_wait_event(event=e, ring_id=9)\n"
                   "stream_sync(ring_id=9)\n");
  ck_assert_int_eq(p->nrings, 0);
  ck_assert_int_eq(p->nstreams, 1);
  for (size_t i = 0; i < p->nops; i++)
    ck_assert_int_eq(p->ops[i].stream, OVL_STREAM_CALC);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_user_streams) {
  /* stream=NAME: a user stream per name, numbered after the comm streams in
   * order of first use, whatever ring the schedule names later. */
  ovl_program *p = PARSE_OK(A10 "b = scale(a, stream=copy)\n"
                                "event_record(b, event=e, stream=copy)\n"
                                "stream_wait_event(event=e, stream=side2)\n"
                                "c = assign(b, stream=side2)\n"
                                "c_allreduce_sum(c, ring_id=1)\n"
                                "delay(us=3, stream=copy)\n"
                                "stream_sync(c, stream=side2)\n");
  ck_assert_int_eq(p->nrings, 2);
  ck_assert_int_eq(ovl_program_stream_count(p), 5);
  ck_assert_str_eq(ovl_program_stream_name(p, 0), "calc");
  ck_assert_str_eq(ovl_program_stream_name(p, 2), "comm[1]");
  ck_assert_str_eq(ovl_program_stream_name(p, 3), "copy");
  ck_assert_str_eq(ovl_program_stream_name(p, 4), "side2");
  ck_assert_str_eq(ovl_program_stream_name(p, -1), "host");
  ck_assert_str_eq(ovl_program_stream_name(p, 5), "host");
  ck_assert_int_eq(p->ops[0].stream, 3);
  ck_assert_int_eq(p->ops[1].stream, 3);
  ck_assert_int_eq(p->ops[2].stream, 4);
  ck_assert_int_eq(p->ops[3].stream, 4);
  ck_assert_int_eq(p->ops[5].stream, 3);
  /* Lowered onto those streams. */
  ck_assert_int_eq(p->prims[p->prim_first[0]].stream, 3);
  ck_assert_int_eq(p->prims[p->prim_first[2]].stream, 4);
  /* Transforms keep them (sync moves collectives, not user streams). */
  ovl_program *q = NULL;
  ck_assert_int_eq(ovl_program_transform(p, OVL_MODE_SYNC, &q, &last_err),
                   OVL_OK);
  ck_assert_int_eq(ovl_program_stream_count(q), 5);
  ck_assert_str_eq(ovl_program_stream_name(q, 4), "side2");
  ck_assert_int_eq(q->ops[0].stream, 3);
  ovl_program_free(q);
  ovl_program_free(p);
  /* Too many: the 65th name is refused where it appears. */
  char src[8192];
  size_t n = (size_t)snprintf(src, sizeof src, "%s", A10);
  for (int k = 0; k <= 64; k++)
    n += (size_t)snprintf(src + n, sizeof src - n,
                          "delay(us=1, stream=s%d)\n", k);
  EXPECT_ERR(src, "<string>:66:20: ", "more than 64 user streams");
}
END_TEST

START_TEST(test_ring_collective_later_is_fine) {
  ovl_program *p = PARSE_OK(A10 "c_wait_compute(a, ring_id=1)\n"
                                "delay(us=1, stream=calc, ring_id=7)\n"
                                "c_sync_calc_stream()\n"
                                "c_allreduce_sum(a, ring_id=1)\n"
                                "c_wait_comm(a, ring_id=1)\n");
  ck_assert_uint_eq(p->nops, 5);
  ck_assert_int_eq(p->nrings, 2);
  ovl_program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Options and -D                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_err_define_unknown) {
  const char *defs[] = {"rows=10", "foo=3"};
  ovl_parse_opts o = {
      .size = sizeof o, .defines = defs, .ndefines = 2, .nranks = 2};
  ovl_program *p = SENTINEL;
  ovl_status st = ovl_program_parse(seed_sched, strlen(seed_sched),
                                    "schedule.sched", &o, &p, &last_err);
  ck_assert_int_eq(st, OVL_EPARSE);
  ck_assert_ptr_eq(p, SENTINEL);
  ck_assert_str_eq(last_err.msg, "-D foo=3: no such param in schedule.sched "
                                 "(params: rows, cols)");
  const char *defs2[] = {"x=1"};
  ovl_parse_opts o2 = {
      .size = sizeof o2, .defines = defs2, .ndefines = 1, .nranks = 2};
  EXPECT_ERR_OPTS(A10, &o2, "-D x=1: ", "(it declares no params)");
}
END_TEST

START_TEST(test_err_define_malformed) {
  static const char *bad[][2] = {
      {"rows", "-D rows: expected NAME=VALUE"},
      {"=3", "-D =3: bad param name ''"},
      {"1x=3", "-D 1x=3: bad param name '1x'"},
      {"rows=", "-D rows=: expected a value after '='"},
      {"rows=1 2", "-D rows=1 2: the value must be one number, bool or name"},
      {"rows=[1]", "-D rows=[1]: the value must be one number"},
      {"rows=1x", "-D rows=1x: malformed number '1x'"},
      {"rows=@", "-D rows=@: unexpected character '@'"},
      /* One token and nothing else: the lexer alone would skip the blank
       * and the comment and read 5. */
      {"rows=5#x", "-D rows=5#x: the value must be one number, bool or name "
                   "(found '#' at column 2)"},
      {"rows=5\t", "-D rows=5\\t: the value must be one number, bool or "
                   "name (found '\\t' at column 2)"},
      {"rows= 5", "-D rows= 5: the value must be one number, bool or name "
                  "(found ' ' at column 1)"},
      {"rows=#", "-D rows=#: the value must be one number, bool or name "
                 "(found '#' at column 1)"},
      {"rows=5 6", "-D rows=5 6: the value must be one number, bool or name "
                   "(found ' ' at column 2)"},
      {"rows=1,2", "-D rows=1,2: the value must be one number, bool or name "
                   "(found ',' at column 2)"},
      {"rows=[1]", "-D rows=[1]: the value must be one number, bool or name "
                   "(found '[' at column 1)"},
      {"rows=true x", "-D rows=true x: the value must be one number, bool or "
                      "name (found ' ' at column 5)"},
      /* Any byte may come from the command line; messages stay one line. */
      {"rows=5\n6", "-D rows=5\\n6: the value must be one number, bool or "
                    "name (found '\\n' at column 2)"},
      {"rows=\n", "-D rows=\\n: the value must be one number, bool or name "
                  "(found '\\n' at column 1)"},
      {"ro\nws=1", "-D ro\\nws=1: bad param name 'ro\\nws'"},
      {"rows\r", "-D rows\\r: expected NAME=VALUE"},
      {"rows=\x7f", "-D rows=\\x7f: unexpected byte 0x7f"},
      {"r\\s=1", "-D r\\\\s=1: bad param name 'r\\\\s'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *defs[] = {bad[i][0]};
    ovl_parse_opts o = {
        .size = sizeof o, .defines = defs, .ndefines = 1, .nranks = 2};
    EXPECT_ERR_OPTS(seed_sched, &o, bad[i][1], "");
    ck_assert_msg(strpbrk(last_err.msg, "\n\r\t") == NULL,
                  "a control character in \"%s\"", last_err.msg);
  }
}
END_TEST

/* A long -D is quoted in part: the message keeps its end. */
START_TEST(test_err_define_long) {
  char def[1000];
  const char *defs[] = {def};
  ovl_parse_opts o = {
      .size = sizeof o, .defines = defs, .ndefines = 1, .nranks = 2};
  snprintf(def, sizeof def, "rows=1 %0500d", 0);
  EXPECT_ERR_OPTS(seed_sched, &o, "-D rows=1 000",
                  "...: the value must be one number, bool or name (found ' ' "
                  "at column 2)");
  ck_assert_uint_lt(strlen(last_err.msg), 300);
}
END_TEST

START_TEST(test_define_bool_and_name) {
  const char *defs[] = {"calc=true", "st=comm"};
  ovl_parse_opts o = {
      .size = sizeof o, .defines = defs, .ndefines = 2, .nranks = 2};
  ovl_program *p =
      parse_with("param calc = false\nparam st = calc\n" A10
                 "c_allreduce_sum(a, use_calc_stream=calc)\n"
                 "delay(us=1, stream=st)\n",
                 &o);
  ck_assert(p->ops[0].use_calc_stream);
  ck_assert_int_eq(p->ops[1].stream, OVL_STREAM_COMM(0));
  ovl_program_free(p);
}
END_TEST

START_TEST(test_err_nranks) {
  ovl_parse_opts o = {.size = sizeof o, .nranks = 0};
  EXPECT_STATUS("", 0, &o, OVL_EINVAL, "nranks must be 1..65536", "got 0");
  o.nranks = 65537;
  EXPECT_STATUS("", 0, &o, OVL_EINVAL, "nranks must be 1..65536",
                "got 65537");
  ovl_program *p = NULL;
  ck_assert_int_eq(ovl_program_parse("", 0, NULL, NULL, NULL, &last_err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_program_parse(NULL, 3, NULL, NULL, &p, NULL),
                   OVL_EINVAL);
  const char *defs[] = {NULL};
  ovl_parse_opts o2 = {
      .size = sizeof o2, .defines = defs, .ndefines = 1, .nranks = 2};
  EXPECT_STATUS("", 0, &o2, OVL_EINVAL, "define 0 is NULL", "");
}
END_TEST

START_TEST(test_filename_in_messages) {
  ovl_program *p = SENTINEL;
  ovl_status st = ovl_program_parse("b = assign(x)\n", 14, "my.sched", NULL,
                                    &p, &last_err);
  ck_assert_int_eq(st, OVL_EPARSE);
  ck_assert_str_eq(last_err.msg, "my.sched:1:12: undefined variable 'x'");
  /* A NULL error pointer is allowed. */
  ck_assert_int_eq(ovl_program_parse("b = assign(x)\n", 14, "my.sched", NULL,
                                     &p, NULL),
                   OVL_EPARSE);
  ck_assert_ptr_eq(p, SENTINEL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* ovl_program_load                                                    */
/* ------------------------------------------------------------------ */

static char tmp_path[64];

static void write_tmp(const void *data, size_t len) {
  strcpy(tmp_path, "/tmp/test_parse_XXXXXX");
  int fd = mkstemp(tmp_path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

START_TEST(test_load_ok) {
  ovl_program *p = NULL;
  write_tmp(seed_sched, strlen(seed_sched));
  ck_assert_int_eq(ovl_program_load(tmp_path, NULL, &p, &last_err), OVL_OK);
  ck_assert_str_eq(p->filename, tmp_path);
  ck_assert_uint_eq(p->nops, 775);
  ovl_program_free(p);
  unlink(tmp_path);
}
END_TEST

START_TEST(test_load_errors_name_file) {
  ovl_program *p = SENTINEL;
  char want[128];
  write_tmp("a = data(shape=[2])\nb = assign(q)\n", 34);
  ck_assert_int_eq(ovl_program_load(tmp_path, NULL, &p, &last_err),
                   OVL_EPARSE);
  snprintf(want, sizeof want, "%s:2:12: undefined variable 'q'", tmp_path);
  ck_assert_str_eq(last_err.msg, want);
  unlink(tmp_path);
  ck_assert_ptr_eq(p, SENTINEL);
}
END_TEST

START_TEST(test_load_missing_file) {
  ovl_program *p = SENTINEL;
  ck_assert_int_eq(
      ovl_program_load("/nonexistent/x.sched", NULL, &p, &last_err), OVL_EIO);
  ck_assert_str_eq(last_err.msg,
                   "/nonexistent/x.sched: No such file or directory");
  ck_assert_int_eq(ovl_program_load("/tmp", NULL, &p, &last_err), OVL_EIO);
  ck_assert_str_eq(last_err.msg, "/tmp: Is a directory");
  ck_assert_ptr_eq(p, SENTINEL);
  ck_assert_int_eq(ovl_program_load(NULL, NULL, &p, &last_err), OVL_EINVAL);
}
END_TEST

START_TEST(test_load_binary) {
  ovl_program *p = SENTINEL;
  char want[128];
  write_tmp("a = 1\nabcd\0efgh", 15);
  ck_assert_int_eq(ovl_program_load(tmp_path, NULL, &p, &last_err),
                   OVL_EPARSE);
  snprintf(want, sizeof want, "%s:2:5: binary data (NUL byte)", tmp_path);
  ck_assert_str_eq(last_err.msg, want);
  unlink(tmp_path);
  ck_assert_ptr_eq(p, SENTINEL);
}
END_TEST

START_TEST(test_load_too_large) {
  ovl_program *p = SENTINEL;
  write_tmp("#", 1);
  ck_assert_int_eq(truncate(tmp_path, (off_t)(64 << 20) + 1), 0);
  ck_assert_int_eq(ovl_program_load(tmp_path, NULL, &p, &last_err),
                   OVL_EPARSE);
  ck_assert_ptr_nonnull(strstr(last_err.msg, "file too large"));
  unlink(tmp_path);
  ck_assert_ptr_eq(p, SENTINEL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Schedules: parse once, bind many times                              */
/* ------------------------------------------------------------------ */

static ovl_schedule *sched_ok(const char *src) {
  ovl_schedule *s = NULL;
  memset(&last_err, 0, sizeof last_err);
  ovl_status st = ovl_schedule_parse(src, strlen(src), NULL, &s, &last_err);
  ck_assert_msg(st == OVL_OK, "parse failed: %s: %s", ovl_err_name(st),
                last_err.msg);
  ck_assert_ptr_nonnull(s);
  return s;
}

static ovl_program *bind_ok(const ovl_schedule *s, const ovl_bind_opts *o) {
  ovl_program *p = NULL;
  memset(&last_err, 0, sizeof last_err);
  ovl_status st = ovl_schedule_bind(s, o, &p, &last_err);
  ck_assert_msg(st == OVL_OK, "bind failed: %s: %s", ovl_err_name(st),
                last_err.msg);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* ovl_schedule_parse fails with `want` and exactly the message `text`. */
#define EXPECT_PARSE_ERR(src, want, text)                                      \
  do {                                                                        \
    ovl_schedule *s_ = (ovl_schedule *)&sentinel;                             \
    ovl_status st_ = ovl_schedule_parse((src), strlen(src), NULL, &s_,       \
                                        &last_err);                           \
    ck_assert_msg(st_ == (want), "want %s, got %s (%s)", ovl_err_name(want), \
                  ovl_err_name(st_), last_err.msg);                           \
    ck_assert_ptr_eq(s_, (ovl_schedule *)&sentinel);                          \
    ck_assert_str_eq(last_err.msg, (text));                                   \
  } while (0)

/* The schedule parses, and binding it with `opts` fails with `want` and
 * exactly the message `text`. */
#define EXPECT_BIND_ERR(src, opts, want, text)                                 \
  do {                                                                        \
    ovl_schedule *s_ = sched_ok(src);                                         \
    ovl_program *p_ = SENTINEL;                                               \
    ovl_status st_ = ovl_schedule_bind(s_, (opts), &p_, &last_err);          \
    ck_assert_msg(st_ == (want), "want %s, got %s (%s)", ovl_err_name(want), \
                  ovl_err_name(st_), last_err.msg);                           \
    ck_assert_ptr_eq(p_, SENTINEL);                                           \
    ck_assert_str_eq(last_err.msg, (text));                                   \
    ovl_schedule_free(s_);                                                    \
  } while (0)

/* One schedule, parsed with no rank count, bound to 1, 2 and 4 ranks: the
 * outputs of c_allgather and c_reducescatter follow the rank count. */
START_TEST(test_schedule_binds_to_rank_counts) {
  ovl_schedule *s = sched_ok("x = data(shape=[8, 3], init=uniform)\n"
                             "g = c_allgather(x, ring_id=0)\n"
                             "r = c_reducescatter(x, ring_id=0)\n"
                             "c_broadcast(x, ring_id=0, root=0)\n"
                             "fetch(g, r)\n");
  static const int ranks[] = {1, 2, 4};
  ck_assert_str_eq(ovl_schedule_filename(s), "<string>");
  for (size_t i = 0; i < 3; i++) {
    ovl_bind_opts o = {.size = sizeof o, .nranks = ranks[i]};
    ovl_program *p = bind_ok(s, &o);
    ovl_var_info g, r;
    ck_assert_int_eq(ovl_program_nranks(p), ranks[i]);
    ck_assert_uint_eq(ovl_program_op_count(p), 4);
    ovl_program_fetch_info(p, 0, &g);
    ovl_program_fetch_info(p, 1, &r);
    ck_assert_str_eq(g.name, "g");
    ck_assert_int_eq(g.dims[0], 8 * ranks[i]);
    ck_assert_int_eq(g.dims[1], 3);
    ck_assert_int_eq(r.dims[0], 8 / ranks[i]);
    ck_assert_str_eq(ovl_program_filename(p), "<string>");
    ovl_program_free(p);
  }
  /* A program outlives its schedule. */
  ovl_bind_opts o = {.size = sizeof o, .nranks = 2};
  ovl_program *p = bind_ok(s, &o);
  ovl_schedule_free(s);
  ck_assert_int_eq(var(p, "g")->dims[0], 16);
  ck_assert_str_eq(ovl_program_filename(p), "<string>");
  ovl_program_free(p);
  /* opts NULL: 2 ranks. */
  s = sched_ok("x = data(shape=[8])\ng = c_allgather(x)\n");
  p = bind_ok(s, NULL);
  ck_assert_int_eq(ovl_program_nranks(p), 2);
  ck_assert_int_eq(var(p, "g")->dims[0], 16);
  ovl_program_free(p);
  ovl_schedule_free(s);
}
END_TEST

/* Binding twice with different -D gives different programs, and leaves
 * the schedule as it was. */
START_TEST(test_schedule_bind_defines) {
  ovl_schedule *s = sched_ok("param n = 3\nparam cols = 10, cpu = 4\n"
                             "param st = calc\n"
                             "a = data(shape=[2, cols])\n"
                             "repeat n {\n"
                             "  b = scale(a, scale=n, stream=st)\n"
                             "}\n"
                             "c_allreduce_sum(a)\n");
  const char *d1[] = {"n=5", "cols=7"}, *d2[] = {"n=2", "st=comm"};
  ovl_bind_opts o1 = {
      .size = sizeof o1, .defines = d1, .ndefines = 2, .nranks = 2};
  ovl_bind_opts o2 = {.size = sizeof o2,
                      .defines = d2,
                      .ndefines = 2,
                      .nranks = 2,
                      .cpu_defaults = 1};
  ovl_program *p1 = bind_ok(s, &o1), *p2 = bind_ok(s, &o2),
              *p3 = bind_ok(s, NULL);
  const char *value;
  ovl_param_origin origin;
  ck_assert_uint_eq(p1->nops, 5 + 1);
  ck_assert_int_eq(var(p1, "a")->dims[1], 7);
  ck_assert_double_eq(p1->ops[0].scale, 5.0);
  ck_assert_int_eq(p1->ops[0].stream, OVL_STREAM_CALC);
  ovl_program_param(p1, 1, NULL, &value, NULL, &origin);
  ck_assert_str_eq(value, "7");
  ck_assert_int_eq(origin, OVL_PARAM_DEFINED);

  ck_assert_uint_eq(p2->nops, 2 + 1);
  ck_assert_int_eq(var(p2, "a")->dims[1], 4); /* the cpu= default */
  ck_assert_double_eq(p2->ops[0].scale, 2.0);
  ck_assert_int_eq(p2->ops[0].stream, OVL_STREAM_COMM(0));
  ovl_program_param(p2, 1, NULL, &value, NULL, &origin);
  ck_assert_str_eq(value, "4");
  ck_assert_int_eq(origin, OVL_PARAM_CPU_DEFAULT);

  ck_assert_uint_eq(p3->nops, 3 + 1);
  ck_assert_int_eq(var(p3, "a")->dims[1], 10);
  ovl_program_param(p3, 0, NULL, &value, NULL, &origin);
  ck_assert_str_eq(value, "3");
  ck_assert_int_eq(origin, OVL_PARAM_DEFAULT);
  ovl_program_free(p1);
  ovl_program_free(p2);
  ovl_program_free(p3);
  ovl_schedule_free(s);
}
END_TEST

/* Errors of the text and of its syntax come from ovl_schedule_parse, with
 * no rank count. */
START_TEST(test_schedule_parse_errors) {
  EXPECT_PARSE_ERR(A10 "b = assign(a) @\n", OVL_EPARSE,
                   "<string>:2:15: unexpected character '@'");
  EXPECT_PARSE_ERR(A10 "b = asign(a)\n", OVL_EPARSE,
                   "<string>:2:5: unknown op 'asign' (did you mean "
                   "'assign'?)");
  EXPECT_PARSE_ERR(A10 "b = assign(a\n", OVL_EPARSE,
                   "<string>:2:11: unterminated argument list: '(' has no "
                   "matching ')'");
  EXPECT_PARSE_ERR(A10 "repeat 2 {\n", OVL_EPARSE,
                   "<string>:2:1: repeat block is not closed (missing '}')");
  EXPECT_PARSE_ERR("}\n", OVL_EPARSE,
                   "<string>:1:1: '}' without a matching repeat or group");
  EXPECT_PARSE_ERR("param n = 1\nparam n = 2\n", OVL_EPARSE,
                   "<string>:2:7: param 'n' re-declared (first declared at "
                   "1:7)");
  EXPECT_PARSE_ERR("repeat 2 {\nparam n = 1\n}\n", OVL_EPARSE,
                   "<string>:2:1: param inside repeat: declare params at top "
                   "level");
  EXPECT_PARSE_ERR(A10 "repeat 0 {\n}\n", OVL_EPARSE,
                   "<string>:2:8: repeat count must be >= 1, got 0");
  /* A syntax error is found before a value error above it: parsing reads
   * the whole text first. */
  EXPECT_PARSE_ERR("b = assign(q)\nc = (\n", OVL_EPARSE,
                   "<string>:2:5: expected an op name after '=', got '('");
  ovl_schedule *s = (ovl_schedule *)&sentinel;
  ck_assert_int_eq(ovl_schedule_parse("a\0", 2, "x.sched", &s, &last_err),
                   OVL_EPARSE);
  ck_assert_str_eq(last_err.msg, "x.sched:1:2: binary data (NUL byte)");
  ck_assert_int_eq(ovl_schedule_parse(NULL, 1, NULL, &s, &last_err),
                   OVL_EINVAL);
  ck_assert_int_eq(ovl_schedule_parse("", 0, NULL, NULL, &last_err),
                   OVL_EINVAL);
  ck_assert_ptr_eq(s, (ovl_schedule *)&sentinel);
  /* NULL text of length 0 is the empty schedule. */
  ck_assert_int_eq(ovl_schedule_parse(NULL, 0, "e", &s, NULL), OVL_OK);
  ck_assert_uint_eq(ovl_schedule_param_count(s), 0);
  ovl_program *p = bind_ok(s, NULL);
  ck_assert_uint_eq(p->nops, 0);
  ovl_program_free(p);
  ovl_schedule_free(s);
  ovl_schedule_free(NULL);
}
END_TEST

/* Errors that depend on values come from ovl_schedule_bind: the schedule
 * parses, and may bind for other values. */
START_TEST(test_schedule_bind_errors) {
  ovl_bind_opts o2 = {.size = sizeof o2, .nranks = 2},
                o3 = {.size = sizeof o3, .nranks = 3};
  EXPECT_BIND_ERR(A10 "b = assign(q)\n", NULL, OVL_EPARSE,
                  "<string>:2:12: undefined variable 'q'");
  EXPECT_BIND_ERR(A10 "b = data(shape=[5])\nc = elementwise_add(a, b)\n",
                  NULL, OVL_EPARSE,
                  "<string>:3:5: shape mismatch: elementwise_add of 'a' [10] "
                  "float32 and 'b' [5] float32");
  EXPECT_BIND_ERR(A10 "r = c_reducescatter(a)\n", &o3, OVL_EPARSE,
                  "<string>:2:5: c_reducescatter: dim 0 of 'a' (10) is not "
                  "divisible by 3 ranks");
  EXPECT_BIND_ERR("a = data(shape=[rows])\nparam rows = 4\n", NULL,
                  OVL_EPARSE,
                  "<string>:1:17: param 'rows' used before its declaration "
                  "at 2:7");
  EXPECT_BIND_ERR("param n = 1.5\nrepeat n {\n}\n", NULL, OVL_EPARSE,
                  "<string>:2:8: repeat count must be an int or an int "
                  "param, got 1.5");
  /* The same schedule, bound for 4 ranks and for 2. */
  ovl_schedule *s = sched_ok(A10 "c_broadcast(a, root=3)\n");
  ovl_bind_opts o4 = {.size = sizeof o4, .nranks = 4};
  ovl_program *p = bind_ok(s, &o4), *q = SENTINEL;
  ck_assert_int_eq(p->ops[0].root, 3);
  ovl_program_free(p);
  ck_assert_int_eq(ovl_schedule_bind(s, &o2, &q, &last_err), OVL_EPARSE);
  ck_assert_str_eq(last_err.msg, "<string>:2:21: root 3 out of range for 2 "
                                 "ranks (0..1)");
  ck_assert_ptr_eq(q, SENTINEL);
  /* -D: malformed, naming no param, a NULL; nranks out of range. */
  const char *bad[] = {"rows=1,2"}, *nosuch[] = {"x=1"}, *null[] = {NULL};
  ovl_bind_opts ob = {
      .size = sizeof ob, .defines = bad, .ndefines = 1, .nranks = 2};
  ck_assert_int_eq(ovl_schedule_bind(s, &ob, &q, &last_err), OVL_EPARSE);
  ck_assert_str_eq(last_err.msg, "-D rows=1,2: the value must be one number, "
                                 "bool or name (found ',' at column 2)");
  ob.defines = nosuch;
  ck_assert_int_eq(ovl_schedule_bind(s, &ob, &q, &last_err), OVL_EPARSE);
  ck_assert_str_eq(last_err.msg,
                   "-D x=1: no such param in <string> (it declares no "
                   "params)");
  ob.defines = null;
  ck_assert_int_eq(ovl_schedule_bind(s, &ob, &q, &last_err), OVL_EINVAL);
  ck_assert_str_eq(last_err.msg, "define 0 is NULL");
  o4.nranks = 65537;
  ck_assert_int_eq(ovl_schedule_bind(s, &o4, &q, &last_err), OVL_EINVAL);
  ck_assert_str_eq(last_err.msg, "nranks must be 1..65536, got 65537");
  ck_assert_int_eq(ovl_schedule_bind(NULL, &o2, &q, &last_err), OVL_EINVAL);
  ck_assert_int_eq(ovl_schedule_bind(s, &o2, NULL, &last_err), OVL_EINVAL);
  ck_assert_ptr_eq(q, SENTINEL);
  ovl_schedule_free(s);
}
END_TEST

/* max_ops is checked at bind, before the expansion is allocated. */
START_TEST(test_schedule_bind_max_ops) {
  ovl_schedule *s = sched_ok(A10 "repeat 4096 {\n repeat 4095 {\n"
                                 "  b = scale(a, scale=2)\n }\n}\n");
  ovl_bind_opts o = {.size = sizeof o, .nranks = 2, .max_ops = 1000};
  ovl_program *p = SENTINEL;
  double t0 = ovl__now();
  ck_assert_int_eq(ovl_schedule_bind(s, &o, &p, &last_err), OVL_ENOMEM);
  ck_assert_double_lt(ovl__now() - t0, 0.5);
  ck_assert_str_eq(last_err.msg, "<string>: the program has 16773120 ops "
                                 "after repeat expansion; the limit is 1000");
  ck_assert_ptr_eq(p, SENTINEL);
  ovl_schedule_free(s);
}
END_TEST

START_TEST(test_schedule_params) {
  ovl_schedule *s = sched_ok(seed_sched);
  const char *name = "x", *plain = "x", *cpu = "x";
  ck_assert_uint_eq(ovl_schedule_param_count(s), 2);
  ovl_schedule_param(s, 0, &name, &plain, &cpu);
  ck_assert_str_eq(name, "rows");
  ck_assert_str_eq(plain, "1000");
  ck_assert_ptr_null(cpu);
  ovl_schedule_param(s, 1, &name, &plain, &cpu);
  ck_assert_str_eq(name, "cols");
  ck_assert_str_eq(plain, "10000");
  ck_assert_str_eq(cpu, "100");
  ovl_schedule_param(s, 2, &name, &plain, &cpu);
  ck_assert_ptr_null(name);
  ck_assert_ptr_null(plain);
  ck_assert_ptr_null(cpu);
  ovl_schedule_param(s, 1, NULL, NULL, &cpu);
  ck_assert_str_eq(cpu, "100");
  ovl_schedule_free(s);
  /* As written: a float, a name, another param. */
  s = sched_ok("param f = 2., cpu = 1e-3\nparam g = f, cpu = comm\n");
  ovl_schedule_param(s, 0, &name, &plain, &cpu);
  ck_assert_str_eq(plain, "2.");
  ck_assert_str_eq(cpu, "1e-3");
  ovl_schedule_param(s, 1, &name, &plain, &cpu);
  ck_assert_str_eq(plain, "f");
  ck_assert_str_eq(cpu, "comm");
  ovl_schedule_free(s);
}
END_TEST

/* ovl_program_parse is ovl_schedule_parse + ovl_schedule_bind. */
START_TEST(test_schedule_wrapper_agrees) {
  const char *defs[] = {"cols=50"};
  ovl_parse_opts po = {.size = sizeof po,
                       .defines = defs,
                       .ndefines = 1,
                       .nranks = 3,
                       .cpu_defaults = 1};
  ovl_bind_opts bo = {.size = sizeof bo,
                      .defines = defs,
                      .ndefines = 1,
                      .nranks = 3,
                      .cpu_defaults = 1};
  ovl_program *a = parse_with(seed_sched, &po);
  ovl_schedule *s = sched_ok(seed_sched);
  ovl_program *b = bind_ok(s, &bo);
  ck_assert_uint_eq(a->nops, b->nops);
  ck_assert_uint_eq(a->nvars, b->nvars);
  ck_assert_uint_eq(a->nprims, b->nprims);
  for (size_t i = 0; i < a->nvars; i++) {
    ck_assert_str_eq(a->vars[i].name, b->vars[i].name);
    ck_assert_int_eq(a->vars[i].numel, b->vars[i].numel);
  }
  for (size_t i = 0; i < a->nops; i++) {
    ck_assert_ptr_eq(a->ops[i].def, b->ops[i].def);
    ck_assert_int_eq(a->ops[i].line, b->ops[i].line);
    ck_assert_int_eq(a->ops[i].stream, b->ops[i].stream);
  }
  ck_assert_int_eq(var(b, "a")->dims[1], 50);
  ovl_program_free(a);
  ovl_program_free(b);
  ovl_schedule_free(s);
  /* The wrapper reports a -D naming no param before a syntax error (a
   * mistake in the command); the schedule API parses first. */
  const char *nosuch[] = {"nosuch=1"};
  ovl_parse_opts o = {
      .size = sizeof o, .defines = nosuch, .ndefines = 1, .nranks = 2};
  EXPECT_ERR_OPTS("param n = 1\nb = (\n", &o,
                  "-D nosuch=1: no such param in <string> (params: n)", "");
  EXPECT_PARSE_ERR("param n = 1\nb = (\n", OVL_EPARSE,
                   "<string>:2:5: expected an op name after '=', got '('");
}
END_TEST

START_TEST(test_schedule_load) {
  ovl_schedule *s = (ovl_schedule *)&sentinel;
  char want[128];
  write_tmp(seed_sched, strlen(seed_sched));
  ck_assert_int_eq(ovl_schedule_load(tmp_path, &s, &last_err), OVL_OK);
  ck_assert_str_eq(ovl_schedule_filename(s), tmp_path);
  ovl_program *p = bind_ok(s, NULL);
  ck_assert_str_eq(ovl_program_filename(p), tmp_path);
  ck_assert_uint_eq(p->nops, 775);
  ovl_program_free(p);
  ovl_schedule_free(s);
  unlink(tmp_path);
  s = (ovl_schedule *)&sentinel;
  write_tmp("a = data(shape=[2])\nb = assign(\n", 32);
  ck_assert_int_eq(ovl_schedule_load(tmp_path, &s, &last_err), OVL_EPARSE);
  snprintf(want, sizeof want,
           "%s:2:11: unterminated argument list: '(' has no matching ')'",
           tmp_path);
  ck_assert_str_eq(last_err.msg, want);
  unlink(tmp_path);
  ck_assert_int_eq(ovl_schedule_load("/nonexistent/x.sched", &s, &last_err),
                   OVL_EIO);
  ck_assert_str_eq(last_err.msg,
                   "/nonexistent/x.sched: No such file or directory");
  ck_assert_int_eq(ovl_schedule_load(NULL, &s, &last_err), OVL_EINVAL);
  ck_assert_ptr_eq(s, (ovl_schedule *)&sentinel);
}
END_TEST

/* A schedule is only read by binding: threads may bind it at once. */
typedef struct bind_job {
  const ovl_schedule *s;
  int nranks;
  ovl_status st;
  int64_t dim0;
} bind_job;

static void *bind_thread(void *arg) {
  bind_job *j = arg;
  for (int it = 0; it < 50; it++) {
    ovl_bind_opts o = {.size = sizeof o, .nranks = j->nranks};
    ovl_program *p = NULL;
    j->st = ovl_schedule_bind(j->s, &o, &p, NULL);
    if (j->st != OVL_OK)
      return NULL;
    j->dim0 = p->vars[1].dims[0];
    ovl_program_free(p);
  }
  return NULL;
}

START_TEST(test_schedule_bind_threads) {
  char src[sizeof seed_sched + 64];
  snprintf(src, sizeof src, "%sg = c_allgather(out, ring_id=0)\n",
           seed_sched);
  ovl_schedule *s = sched_ok(src);
  bind_job jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (bind_job){.s = s, .nranks = i + 1};
    ck_assert_int_eq(pthread_create(&th[i], NULL, bind_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_int_eq(jobs[i].st, OVL_OK);
  }
  ovl_schedule_free(s);
}
END_TEST


/* ------------------------------------------------------------------ */
/* Robustness                                                          */
/* ------------------------------------------------------------------ */

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Parsing must answer OK or a schedule error, never crash or leak. */
static void parse_any(const char *buf, size_t len) {
  ovl_program *p = NULL;
  ovl_status st = try_parse(buf, len, NULL, &p);
  ck_assert_msg(st == OVL_OK || st == OVL_EPARSE, "status %s: %s",
                ovl_err_name(st), last_err.msg);
  if (st == OVL_OK)
    ovl_program_free(p);
  else
    ck_assert_msg(strncmp(last_err.msg, "<string>:", 9) == 0, "%s",
                  last_err.msg);
}

START_TEST(test_random_bytes) {
  char buf[256];
  rng_state = 0x9e3779b97f4a7c15ull;
  for (int it = 0; it < 3000; it++) {
    size_t len = rng() % sizeof buf;
    for (size_t i = 0; i < len; i++)
      buf[i] = (char)rng();
    parse_any(buf, len);
  }
}
END_TEST

START_TEST(test_mutated_seed) {
  static const char alphabet[] = "()[]{},=#\n -.e0123456789abc_ \t";
  size_t n = strlen(seed_sched);
  char *buf = malloc(n + 64);
  ck_assert_ptr_nonnull(buf);
  rng_state = 12345;
  for (int it = 0; it < 4000; it++) {
    size_t len = n;
    memcpy(buf, seed_sched, n);
    int edits = 1 + (int)(rng() % 4);
    for (int e = 0; e < edits; e++) {
      size_t at = rng() % len;
      switch (rng() % 3) {
      case 0: /* replace */
        buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
        break;
      case 1: /* delete */
        memmove(buf + at, buf + at + 1, len - at - 1);
        len--;
        break;
      default: /* insert */
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
        len++;
        break;
      }
    }
    parse_any(buf, len);
    parse_any(buf, rng() % (len + 1)); /* truncated too */
  }
  free(buf);
}
END_TEST

static char *repeat_str(const char *unit, size_t times, const char *tail) {
  size_t u = strlen(unit), t = strlen(tail);
  char *s = malloc(u * times + t + 1);
  ck_assert_ptr_nonnull(s);
  for (size_t i = 0; i < times; i++)
    memcpy(s + i * u, unit, u);
  memcpy(s + u * times, tail, t + 1);
  return s;
}

START_TEST(test_deep_nesting) {
  char *s = repeat_str("(", 200000, "");
  EXPECT_ERR(s, "<string>:1:1: ", "expected a statement");
  free(s);
  s = repeat_str("[", 200000, "");
  EXPECT_ERR(s, "<string>:1:1: ", "expected a statement");
  free(s);
  s = repeat_str("(", 200000, "");
  memcpy(s, "a=b(c", 5);
  EXPECT_ERR(s, "<string>:1:6: ", "expected ',' or ')'");
  free(s);
  s = repeat_str("[", 200000, "");
  memcpy(s, "a=b(c=", 6);
  EXPECT_ERR(s, "<string>:1:8: ", "nested lists are not supported");
  free(s);
  s = repeat_str("repeat 1 {\n", 100000, "");
  EXPECT_ERR(s, "<string>:65:1: ", "nested deeper than 64");
  free(s);
  s = repeat_str("}\n", 100000, "");
  EXPECT_ERR(s, "<string>:1:1: ", "'}' without a matching repeat");
  free(s);
}
END_TEST

START_TEST(test_long_lines) {
  char *s = repeat_str(" ", 1 << 20, "a = data(shape=[3])\n");
  ovl_program *p = PARSE_OK(s);
  ck_assert_int_eq(p->vars[0].col, (1 << 20) + 1);
  ovl_program_free(p);
  free(s);
  s = repeat_str("x", 1 << 20, " = assign(a)\n");
  EXPECT_ERR(s, "<string>:1:1: ", "identifier too long (1048576 chars");
  free(s);
  s = repeat_str("9", 1 << 20, "\n");
  EXPECT_ERR(s, "<string>:1:1: ", "number too long");
  free(s);
  s = repeat_str("# comment comment comment\n", 100000, "b = assign(a)\n");
  EXPECT_ERR(s, "<string>:100001:12: ", "undefined variable 'a'");
  free(s);
  s = repeat_str("a, ", 100000, "a)\n");
  memcpy(s, "fetch(", 6);
  EXPECT_ERR(s, "<string>:1:1: ", "fetch takes at most 16 inputs, got 99999");
  free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Ranks that differ: ranks=, expressions, send/recv, groups            */
/* ------------------------------------------------------------------ */

static ovl_program *parse_ranks(const char *src, int nranks) {
  ovl_parse_opts o = {.size = sizeof o, .nranks = nranks};
  return parse_with(src, &o);
}

/* The parse for `nranks` ranks fails with exactly `text`. */
#define EXPECT_RANKS_ERR(src, nranks_, text)                                   \
  do {                                                                         \
    ovl_parse_opts o_ = {.size = sizeof o_, .nranks = (nranks_)};              \
    EXPECT_ERR_OPTS(src, &o_, text, "");                                       \
    ck_assert_str_eq(last_err.msg, (text));                                    \
  } while (0)

/* Every op runs on every rank unless it says otherwise; a program where
 * that is so, with no point-to-point, is not rank-dependent. */
START_TEST(test_ranks_default) {
  ovl_program *p = parse_ranks(seed_sched, 4);
  for (size_t i = 0; i < p->nops; i++) {
    ck_assert_uint_eq(p->ops[i].ranks, 0xf);
    ck_assert_int_eq(p->ops[i].rank_attr, -1);
    ck_assert_uint_eq(p->ops[i].group, 0);
  }
  ck_assert(!p->rank_dependent);
  ck_assert_uint_eq(p->nrank_attrs, 0);
  ck_assert_ptr_null(p->rank_attrs);
  ovl_program_free(p);
  p = parse_ranks(A10 "b = assign(a)\n", 64);
  ck_assert_uint_eq(p->ops[0].ranks, ~(uint64_t)0);
  ck_assert(!p->rank_dependent);
  ovl_program_free(p);
  /* ranks= naming every rank is the same as none. */
  p = parse_ranks(A10 "b = assign(a, ranks=[0:nranks])\n", 3);
  ck_assert_uint_eq(p->ops[0].ranks, 7);
  ck_assert(!p->rank_dependent);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_ranks_lists) {
  ovl_program *p = parse_ranks(
      "param last = 3\n" A10
      "b = assign(a, ranks=[0])\n"
      "c = assign(a, ranks=[1, 3])\n"
      "d = assign(a, ranks=[1:nranks])\n"
      "e = assign(a, ranks=[0:2, last])\n"
      "f = assign(a, ranks=[nranks - 1, 0, 0])\n"
      "g = assign(a, ranks=[1:1, 2])\n"
      "fetch(b, ranks=[last - 1:nranks - 1,])\n"
      "c_allreduce_sum(a, ranks=[\n  0, # first\n  2,\n])\n"
      "h = assign(a, ranks=[(nranks - 1) / 2 : (nranks + 1) / 2 + 1])\n",
      4);
  static const uint64_t want[] = {0x1, 0xa, 0xe, 0xb, 0x9, 0x4, 0x4, 0x5, 0x6};
  ck_assert_uint_eq(p->nops, 9);
  for (size_t i = 0; i < p->nops; i++)
    ck_assert_msg(p->ops[i].ranks == want[i], "op %zu: ranks %#llx", i,
                  (unsigned long long)p->ops[i].ranks);
  ck_assert(p->rank_dependent);
  ck_assert(ovl__op_on_rank(&p->ops[1], 3));
  ck_assert(!ovl__op_on_rank(&p->ops[1], 2));
  ovl_program_free(p);
}
END_TEST

/* send_v2 / recv_v2 with a constant peer, and one that depends on rank:
 * evaluated on the ranks that run the op, into rank_attrs. */
START_TEST(test_send_recv) {
  ovl_program *p = parse_ranks(
      "x = data(shape=[4, 8])\n"
      "send_v2(x, peer=1, ranks=[0])\n"
      "y = recv_v2(peer=0, out_shape=[4, 8], ranks=[1], ring_id=2)\n"
      "send_v2(x, peer=(rank + 1) % nranks, use_calc_stream=true)\n"
      "z = recv_v2(peer=(rank - 1) % nranks, out_shape=[4, 2 * 4], "
      "dtype=float64, use_calc_stream=true)\n"
      "send_v2(x, peer=rank - 1, ranks=[1:nranks])\n"
      "y = recv_v2(peer=nranks - 1, out_shape=[4, 8], ring_id=2)\n",
      4);
  const ovl__op *op = p->ops;
  ck_assert_uint_eq(p->nops, 6);
  ck_assert(p->rank_dependent);
  ck_assert_str_eq(opname(p, 0), "send_v2");
  ck_assert_int_eq(op[0].peer, 1);
  ck_assert_int_eq(op[0].rank_attr, -1);
  ck_assert_int_eq(op[0].in[0], var_index(p, "x"));
  ck_assert_int_eq(op[0].out, -1);
  ck_assert_int_eq(op[0].stream, OVL_STREAM_COMM(0));
  ck_assert_int_eq(ovl__op_peer(p, &op[0], 0), 1);
  ck_assert_int_eq(op[1].peer, 0);
  ck_assert_int_eq(op[1].out, var_index(p, "y"));
  ck_assert_int_eq(op[1].nin, 0);
  ck_assert_int_eq(op[1].stream, OVL_STREAM_COMM(2));
  ck_assert_int_eq(var(p, "y")->ndim, 2);
  ck_assert_int_eq(var(p, "y")->dims[1], 8);
  ck_assert_int_eq(var(p, "y")->dtype, OVL_DTYPE_FLOAT32);
  ck_assert_int_eq(var(p, "y")->init, OVL_INIT_NONE);
  ck_assert_int_eq(var(p, "z")->dtype, OVL_DTYPE_FLOAT64);
  ck_assert_int_eq(op[2].stream, OVL_STREAM_CALC);
  /* Per rank: next, previous, previous on ranks 1..3. */
  ck_assert_int_ge(op[2].rank_attr, 0);
  ck_assert_int_ge(op[3].rank_attr, 0);
  ck_assert_int_ge(op[4].rank_attr, 0);
  ck_assert_uint_eq(p->nrank_attrs, 3 * 2 * 4);
  for (int r = 0; r < 4; r++) {
    ck_assert_int_eq(ovl__op_peer(p, &op[2], r), (r + 1) % 4);
    ck_assert_int_eq(ovl__op_peer(p, &op[3], r), (r + 3) % 4);
    if (r > 0)
      ck_assert_int_eq(ovl__op_peer(p, &op[4], r), r - 1);
    ck_assert_int_eq(ovl__op_root(p, &op[2], r), 0);
  }
  /* A rank that does not run it has no peer. */
  ck_assert_int_eq(p->rank_attrs[op[4].rank_attr], -1);
  ck_assert_int_eq(op[5].peer, 3);
  ck_assert_int_eq(op[5].out, var_index(p, "y"));
  /* Rings with send/recv have a communicator. */
  ck_assert_uint_eq(p->ring_comm, (1u << 0) | (1u << 2));
  /* The lowering: SEND / RECV on the op's stream. */
  ck_assert_int_eq(p->prims[p->prim_first[0]].kind, OVL_PRIM_SEND);
  ck_assert_int_eq(p->prims[p->prim_first[1]].kind, OVL_PRIM_RECV);
  ck_assert_int_eq(p->prims[p->prim_first[1]].stream, OVL_STREAM_COMM(2));
  ovl_program_free(p);
}
END_TEST

/* Ops of one statement share their rank_attrs entry; a repeat block does
 * not multiply it. */
START_TEST(test_rank_attrs_shared) {
  ovl_program *p = parse_ranks("x = data(shape=[4])\n"
                               "repeat 5 {\n"
                               "  send_v2(x, peer=(rank + 1) % nranks)\n"
                               "  y = recv_v2(peer=(rank + nranks - 1) % "
                               "nranks, out_shape=[4])\n"
                               "}\n",
                               3);
  ck_assert_uint_eq(p->nops, 10);
  ck_assert_uint_eq(p->nrank_attrs, 2 * 2 * 3);
  for (size_t i = 0; i < p->nops; i++) {
    ck_assert_int_eq(p->ops[i].rank_attr, p->ops[i % 2].rank_attr);
    ck_assert_uint_eq(p->ops[i].src, i);
  }
  ck_assert_int_eq(ovl__op_peer(p, &p->ops[9], 0), 2);
  ovl_program_free(p);
}
END_TEST

/* A root that depends on rank (dist.broadcast(t, src=rank)): evaluated
 * on the ranks that run the op, into rank_attrs beside the peer; the
 * program is rank-dependent (the mismatch check compares the roots). */
START_TEST(test_rank_root) {
  ovl_program *p = parse_ranks("x = data(shape=[4])\n"
                               "c_broadcast(x, root=rank % 2)\n"
                               "c_reduce_sum(x, root=rank / nranks, "
                               "ranks=[1:nranks])\n"
                               "send_v2(x, peer=(rank + 1) % nranks)\n"
                               "c_broadcast(x, root=2)\n",
                               4);
  const ovl__op *op = p->ops;
  ck_assert_uint_eq(p->nops, 4);
  ck_assert(p->rank_dependent);
  ck_assert_int_ge(op[0].rank_attr, 0);
  ck_assert_int_ge(op[1].rank_attr, 0);
  ck_assert_int_eq(op[3].rank_attr, -1);
  for (int r = 0; r < 4; r++) {
    ck_assert_int_eq(ovl__op_root(p, &op[0], r), r % 2);
    if (r > 0)
      ck_assert_int_eq(ovl__op_root(p, &op[1], r), 0);
    /* A rank-dependent peer keeps the op's root. */
    ck_assert_int_eq(ovl__op_peer(p, &op[2], r), (r + 1) % 4);
    ck_assert_int_eq(ovl__op_root(p, &op[3], r), 2);
  }
  /* A rank that does not run it has no root. */
  ck_assert_int_eq(p->rank_attrs[op[1].rank_attr + 1], -1);
  ovl_program_free(p);
}
END_TEST

/* group { }: every expanded instance numbered, in program order. */
START_TEST(test_groups) {
  ovl_program *p = parse_ranks(
      "x = data(shape=[4])\n"
      "group {\n"
      "  send_v2(x, peer=(rank + 1) % nranks, ring_id=1)\n"
      "  y = recv_v2(peer=(rank - 1) % nranks, out_shape=[4], ring_id=1)\n"
      "}\n"
      "b = assign(x)\n"
      "repeat 3 {\n"
      "  group {\n"
      "    send_v2(x, peer=1, ranks=[0])\n"
      "    y = recv_v2(peer=0, out_shape=[4], ranks=[1])\n"
      "  }\n"
      "  group {\n"
      "  }\n"
      "  group {\n"
      "    send_v2(b, peer=0, ranks=[1], use_calc_stream=true)\n"
      "  }\n"
      "}\n"
      "group {\n"
      "}\n",
      2);
  static const uint32_t want[] = {1, 1, 0, 2, 2, 3, 4, 4, 5, 6, 6, 7};
  ck_assert_uint_eq(p->nops, 12);
  for (size_t i = 0; i < p->nops; i++)
    ck_assert_msg(p->ops[i].group == want[i], "op %zu: group %u", i,
                  p->ops[i].group);
  ck_assert_int_eq(p->ops[0].stream, OVL_STREAM_COMM(1));
  ck_assert_int_eq(p->ops[5].stream, OVL_STREAM_CALC);
  ovl_program_free(p);
  /* The transforms keep groups, rank sets and peers. */
  p = parse_ranks("x = data(shape=[4])\n"
                  "group {\n"
                  "  send_v2(x, peer=(rank + 1) % nranks, ranks=[0:2])\n"
                  "  y = recv_v2(peer=(rank - 1) % nranks, out_shape=[4])\n"
                  "}\n",
                  3);
  for (int m = 0; m < OVL__MODE_COUNT; m++) {
    ovl_program *q = NULL;
    ck_assert_int_eq(ovl_program_transform(p, (ovl_mode)m, &q, &last_err),
                     OVL_OK);
    if (m == OVL_MODE_COMP) {
      ck_assert_uint_eq(q->nops, 0);
    } else {
      ck_assert_uint_eq(q->nops, 2);
      ck_assert_uint_eq(q->ops[0].group, 1);
      ck_assert_uint_eq(q->ops[1].group, 1);
      ck_assert_uint_eq(q->ops[0].ranks, 3);
      ck_assert_uint_eq(q->nrank_attrs, p->nrank_attrs);
      ck_assert_ptr_ne(q->rank_attrs, p->rank_attrs);
      ck_assert_int_eq(ovl__op_peer(q, &q->ops[1], 0), 2);
      ck_assert_int_eq(ovl__op_peer(q, &q->ops[0], 1), 2);
      ck_assert(q->rank_dependent);
      ck_assert(q->ops[0].use_calc_stream == (m == OVL_MODE_SYNC));
    }
    ovl_program_free(q);
  }
  ovl_program_free(p);
}
END_TEST


/* Integer expressions: precedence, Python's floor division and modulo,
 * a '-' that the lexer reads with a number, params and nranks. Params
 * may be expressions too (over ints, earlier params and nranks). */
START_TEST(test_expressions) {
  static const struct {
    const char *expr;
    long long want;
  } cases[] = {
      {"1 + 2 * 3 - 4 / 2 % 3", 5}, {"(1 + 2) * 3", 9},
      {"-7 / 2", -4},              {"7 / -2", -4},
      {"-7 % 3", 2},               {"7 % -3", -2},
      {"-7 % -3", -1},             {"7 % 3", 1},
      {"-(3 - 5) * 2", 4},         {"- -3", 3},
      {"2 - -3", 5},               {"2 -3", -1},
      {"nranks-1", 3},             {"nranks*-1", -4},
      {"(nranks - 5) % nranks", 3}, {"n * n - n", 6},
      {"((((((1))))))", 1},        {"10 / 3 / 2", 1},
      {"2 * 3 % 4", 2},            {"-nranks", -4},
      {"9223372036854775807 + 0", 9223372036854775807LL},
      {"-9223372036854775807 - 1", -9223372036854775807LL - 1},
      {"(-9223372036854775807 - 1) % -1", 0},
      {"3 - 2 - 1", 0},            {"(n\n  # comment\n  + 1)", 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char src[256];
    snprintf(src, sizeof src, "param n = 3\nparam x = %s\n", cases[i].expr);
    ovl_program *p = parse_ranks(src, 4);
    char want[32];
    snprintf(want, sizeof want, "%lld", cases[i].want);
    ck_assert_msg(strcmp(p->params[1].value, want) == 0, "%s = %s, want %s",
                  cases[i].expr, p->params[1].value, want);
    if (strchr(cases[i].expr, '\n') == NULL)
      ck_assert_str_eq(p->params[1].plain_default, cases[i].expr);
    else /* on one line */
      ck_assert_str_eq(p->params[1].plain_default, "(n + 1)");
    ovl_program_free(p);
  }
  /* Where they go: repeat counts, dims, ring_id, root, seed, cpu= and
   * -D'd params. */
  const char *defs[] = {"m=3"};
  ovl_parse_opts o = {
      .size = sizeof o, .nranks = 4, .defines = defs, .ndefines = 1};
  ovl_program *p = parse_with(
      "param m = 1\nparam h = nranks / 2, cpu = m * 2\n"
      "a = data(shape=[nranks * 2, m + h], seed=m * 10)\n"
      "repeat nranks - 1 {\n"
      "  repeat (m) {\n"
      "    c_broadcast(a, root=nranks - 1, ring_id=h + 1)\n"
      "  }\n"
      "}\n",
      &o);
  ck_assert_int_eq(var(p, "a")->dims[0], 8);
  ck_assert_int_eq(var(p, "a")->dims[1], 5);
  ck_assert_uint_eq(var(p, "a")->seed, 30);
  ck_assert_uint_eq(p->nops, 9);
  ck_assert_int_eq(p->ops[8].root, 3);
  ck_assert_int_eq(p->ops[8].ring_id, 3);
  ck_assert_int_eq(p->nrings, 4);
  ck_assert(!p->rank_dependent);
  ovl_program_free(p);
  o.cpu_defaults = 1;
  p = parse_with("param m = 1\nparam h = nranks / 2, cpu = m * 2\n", &o);
  ck_assert_str_eq(p->params[1].value, "6");
  ck_assert_str_eq(p->params[1].plain_default, "nranks / 2");
  ovl_program_free(p);
  /* As written in the schedule API. */
  ovl_schedule *sc = sched_ok("param h = nranks / 2, cpu = (3)\n");
  const char *plain, *cpu;
  ovl_schedule_param(sc, 0, NULL, &plain, &cpu);
  ck_assert_str_eq(plain, "nranks / 2");
  ck_assert_str_eq(cpu, "(3)");
  ovl_schedule_free(sc);
}
END_TEST

/* Errors of expressions: the text, and then the values at bind time. */
START_TEST(test_err_expressions) {
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=(rank + 1)\n", 4,
                   "<string>:2:8: unterminated argument list: '(' has no "
                   "matching ')'");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank +)\n", 4,
                   "<string>:2:23: expected a value, got ')'");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=(rank + 1 ranks=[0])\n", 4,
                   "<string>:2:27: expected ')' to close the '(' at 2:17, "
                   "got 'ranks'");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank - 1.5)\n", 4,
                   "<string>:2:24: an expression takes ints, params, rank "
                   "and nranks, got 1.5");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank -1.5)\n", 4,
                   "<string>:2:23: an expression takes ints, params, rank "
                   "and nranks, got 1.5");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=true * rank)\n", 4,
                   "<string>:2:17: an expression takes ints, params, rank "
                   "and nranks, got true");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank -9223372036854775808)\n", 4,
                   "<string>:2:23: integer 9223372036854775808 out of range "
                   "(int64)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank:1)\n", 4,
                   "<string>:2:21: a range (A:B) is allowed only in "
                   "ranks=[...]");
  EXPECT_RANKS_ERR("b = data(shape=[2, 1:2])\n", 4,
                   "<string>:1:21: a range (A:B) is allowed only in "
                   "ranks=[...]");
  EXPECT_RANKS_ERR("b = data(shape=[2, 1 + [3]])\n", 4,
                   "<string>:1:24: expected a value, got '['");
  EXPECT_RANKS_ERR("b = data(shape=[2, *3])\n", 4,
                   "<string>:1:20: expected a value, got '*'");
  EXPECT_RANKS_ERR("param n = 3 +\n", 4,
                   "<string>:1:14: expected a value, got end of line");
  EXPECT_RANKS_ERR("param n = 3 4\n", 4,
                   "<string>:1:13: unexpected '4' after statement (one "
                   "statement per line)");
  /* 64 nested parentheses are fine, 65 are not. */
  char deep[512];
  size_t k;
  k = (size_t)snprintf(deep, sizeof deep, "param n = ");
  for (int i = 0; i < 64; i++)
    deep[k++] = '(';
  deep[k++] = '1';
  for (int i = 0; i < 64; i++)
    deep[k++] = ')';
  strcpy(deep + k, "\n");
  ovl_program *p = parse_ranks(deep, 2);
  ck_assert_str_eq(p->params[0].value, "1");
  ovl_program_free(p);
  k = (size_t)snprintf(deep, sizeof deep, "param n = ");
  for (int i = 0; i < 65; i++)
    deep[k++] = '(';
  strcpy(deep + k, "1)\n");
  EXPECT_RANKS_ERR(deep, 2, "<string>:1:75: expression nested deeper than "
                            "64");
  k = (size_t)snprintf(deep, sizeof deep, "param n = ");
  for (int i = 0; i < 65; i++) {
    deep[k++] = '-';
    deep[k++] = ' ';
  }
  strcpy(deep + k, "1\n");
  EXPECT_RANKS_ERR(deep, 2, "<string>:1:139: expression nested deeper than "
                            "64");
  /* Names: params declared above, ints. */
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=x + 1)\n", 4,
                   "<string>:2:17: 'x' is not a param (an expression takes "
                   "ints, params, rank and nranks)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=a + rank)\n", 4,
                   "<string>:2:17: 'a' is not a param (an expression takes "
                   "ints, params, rank and nranks)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=n + 1)\nparam n = 1\n", 4,
                   "<string>:2:17: param 'n' used before its declaration at "
                   "3:7");
  EXPECT_RANKS_ERR("param n = 1.5\n" A10 "send_v2(a, peer=n + rank)\n", 4,
                   "<string>:3:17: param 'n' is 1.5, not an int");
  EXPECT_RANKS_ERR("param s = calc\nparam n = s * 2\n", 4,
                   "<string>:2:11: param 's' is 'calc', not an int");
  /* Values: division and modulo by zero (with the rank when it depends
   * on rank), overflow. */
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=(rank + 1) / (rank - 1), "
                       "ranks=[1, 2])\n",
                   4,
                   "<string>:2:28: division by zero in peer=(rank + 1) / "
                   "(rank - 1) on rank 1");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=(rank # c\n  + 1) % (nranks - 4))\n",
                   4,
                   "<string>:3:8: modulo by zero in peer=(rank + 1) % "
                   "(nranks - 4) on rank 0");
  EXPECT_RANKS_ERR(A10 "c_broadcast(a, root=nranks % 0)\n", 4,
                   "<string>:2:28: modulo by zero in root=nranks % 0");
  EXPECT_RANKS_ERR("param n = nranks / (nranks - 2)\n", 2,
                   "<string>:1:18: division by zero in param n = nranks / "
                   "(nranks - 2)");
  EXPECT_RANKS_ERR("b = data(shape=[4 / (nranks - 2)])\n", 2,
                   "<string>:1:19: division by zero in shape dim 4 / "
                   "(nranks - 2)");
  EXPECT_RANKS_ERR("repeat nranks / 0 {\n}\n", 2,
                   "<string>:1:15: division by zero in repeat nranks / 0");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[1 % (nranks - 2)])\n", 2,
                   "<string>:2:24: modulo by zero in ranks entry 1 % "
                   "(nranks - 2)");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[0:1 / (nranks - 2)])\n", 2,
                   "<string>:2:26: division by zero in ranks range 0:1 / "
                   "(nranks - 2)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=9223372036854775807 + rank, "
                       "ranks=[1])\n",
                   4,
                   "<string>:2:37: integer overflow in "
                   "peer=9223372036854775807 + rank on rank 1");
  EXPECT_RANKS_ERR("param n = -9223372036854775807 - 1 - nranks\n", 4,
                   "<string>:1:36: integer overflow in param n = "
                   "-9223372036854775807 - 1 - nranks");
  EXPECT_RANKS_ERR("param n = (-9223372036854775807 - 1) / -1\n", 4,
                   "<string>:1:38: integer overflow in param n = "
                   "(-9223372036854775807 - 1) / -1");
  EXPECT_RANKS_ERR("param n = -(-9223372036854775807 - (nranks - 3))\n", 4,
                   "<string>:1:11: integer overflow in param n = "
                   "-(-9223372036854775807 - (nranks - 3))");
  EXPECT_RANKS_ERR("param n = 4294967296 * 4294967296 * nranks\n", 4,
                   "<string>:1:22: integer overflow in param n = "
                   "4294967296 * 4294967296 * nranks");
  /* A long expression is quoted in part. */
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=(((((rank + 1111111111) * "
                       "22222222222) + 3333333333333) / 44444444) % "
                       "555555555555555) + rank - nranks * 1000000000000)\n",
                   4,
                   "<string>:2:41: integer overflow in peer=(((((rank + "
                   "1111111111) * 22222222222) + 3333333333333) / 44... on "
                   "rank 0");
  /* Integer expressions are for int attributes. */
  EXPECT_RANKS_ERR(A10 "b = scale(a, scale=nranks * 2)\n", 4,
                   "<string>:2:20: attribute 'scale' of scale wants a number "
                   "(integer expressions are for int attributes), got the "
                   "expression nranks * 2");
  EXPECT_RANKS_ERR(A10 "c_allreduce_sum(a, use_calc_stream=rank)\n", 4,
                   "<string>:2:36: attribute 'use_calc_stream' of "
                   "c_allreduce_sum wants true or false, got the expression "
                   "rank");
  EXPECT_RANKS_ERR(A10 "delay(us=1, stream=nranks)\n", 4,
                   "<string>:2:20: attribute 'stream' of delay wants calc, "
                   "comm or the name of a stream, got the expression "
                   "nranks");
  EXPECT_RANKS_ERR(A10 "c_allreduce_sum(a, ring_id=nranks * 5)\n", 4,
                   "<string>:2:28: ring_id nranks * 5 = 20 out of range "
                   "(0..15)");
  EXPECT_RANKS_ERR("b = data(shape=[2, nranks * 0])\n", 4,
                   "<string>:1:20: shape dims must be >= 1, got nranks * 0 = "
                   "0");
  EXPECT_RANKS_ERR("b = data(shape=[2], seed=nranks - 5)\n", 4,
                   "<string>:1:26: seed must be >= 0, got -1");
  EXPECT_RANKS_ERR("repeat nranks - 4 {\n}\n", 4,
                   "<string>:1:8: repeat count must be >= 1, got nranks - 4 "
                   "= 0");
  EXPECT_RANKS_ERR("repeat (nranks {\n}\n", 4,
                   "<string>:1:16: expected ')' to close the '(' at 1:8, got "
                   "'{'");
  EXPECT_RANKS_ERR("param n = 1.5\nrepeat n + 1 {\n}\n", 4,
                   "<string>:2:8: param 'n' is 1.5, not an int");
  /* `rank` only in peer. */
  EXPECT_RANKS_ERR(A10 "c_allreduce_sum(a, ring_id=rank % 2)\n", 4,
                   "<string>:2:28: ring_id cannot depend on rank: it must be "
                   "the same on every rank (only peer and root may depend on rank)");
  /* A root may (test_rank_root); each rank's must be one of them. */
  EXPECT_RANKS_ERR(A10 "c_broadcast(a, root=rank + 1)\n", 4,
                   "<string>:2:21: root=rank + 1 is 4 on rank 3; ranks are "
                   "0..3");
  EXPECT_RANKS_ERR("b = data(shape=[2, rank + 1])\n", 4,
                   "<string>:1:20: shape cannot depend on rank: it must be "
                   "the same on every rank (only peer and root may depend on rank)");
  EXPECT_RANKS_ERR("b = data(shape=[2], seed=rank)\n", 4,
                   "<string>:1:26: seed cannot depend on rank: it must be "
                   "the same on every rank (only peer and root may depend on rank)");
  EXPECT_RANKS_ERR("repeat rank + 1 {\n}\n", 4,
                   "<string>:1:8: a repeat count cannot depend on rank: it "
                   "must be the same on every rank (only peer and root may "
                   "depend on rank)");
  EXPECT_RANKS_ERR("param n = 2 * rank\n", 4,
                   "<string>:1:15: a param cannot depend on rank: it must be "
                   "the same on every rank (only peer and root may depend on rank)");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[rank])\n", 4,
                   "<string>:2:22: ranks cannot depend on rank: it must be "
                   "the same on every rank (only peer and root may depend on rank)");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[0:rank])\n", 4,
                   "<string>:2:24: ranks cannot depend on rank: it must be "
                   "the same on every rank (only peer and root may depend on rank)");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[rank])\n", 4,
                   "<string>:2:32: out_shape cannot depend on rank: it must "
                   "be the same on every rank (only peer and root may depend "
                   "on rank)");
  /* rank, nranks and group are reserved. */
  EXPECT_RANKS_ERR(A10 "rank = assign(a)\n", 4,
                   "<string>:2:1: 'rank' is reserved and cannot name a "
                   "variable");
  EXPECT_RANKS_ERR("param nranks = 3\n", 4,
                   "<string>:1:7: 'nranks' is reserved and cannot name a "
                   "param");
  EXPECT_RANKS_ERR("nranks = data(shape=[1])\n", 4,
                   "<string>:1:1: 'nranks' is reserved and cannot name a "
                   "variable");
  EXPECT_RANKS_ERR(A10 "group = assign(a)\n", 4,
                   "<string>:2:7: expected '{' after 'group', got '='");
  EXPECT_RANKS_ERR(A10 "b = assign(rank)\n", 4,
                   "<string>:2:12: undefined variable 'rank'");
}
END_TEST

/* ranks=[...]: what it takes, and the ranks it names. */
START_TEST(test_err_ranks) {
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[4])\n", 4,
                   "<string>:2:22: rank 4 out of range for 4 ranks (0..3)");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[0, -1])\n", 4,
                   "<string>:2:25: rank -1 out of range for 4 ranks (0..3)");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[nranks])\n", 4,
                   "<string>:2:22: ranks entry nranks is 4; ranks are 0..3");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[])\n", 4,
                   "<string>:2:21: ranks=[] names no rank; ranks are 0..3");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[2:2])\n", 4,
                   "<string>:2:21: ranks=[2:2] names no rank; ranks are "
                   "0..3");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[1:nranks, 1:1])\n", 1,
                   "<string>:2:21: ranks=[1:nranks, 1:1] names no rank; ranks "
                   "are 0..0");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[3:1])\n", 4,
                   "<string>:2:22: ranks range 3:1 runs backwards");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[nranks:1])\n", 4,
                   "<string>:2:22: ranks range nranks:1 (4:1) runs "
                   "backwards");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[0:nranks + 1])\n", 4,
                   "<string>:2:22: ranks range 0:nranks + 1 (0:5) goes past "
                   "the ranks; ranks are 0..3");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[-1:2])\n", 4,
                   "<string>:2:22: ranks range -1:2 goes past the ranks; "
                   "ranks are 0..3");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=3)\n", 4,
                   "<string>:2:21: ranks wants a list like [0, 2] or "
                   "[1:nranks], got 3");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=nranks - 1)\n", 4,
                   "<string>:2:21: ranks wants a list like [0, 2] or "
                   "[1:nranks], got the expression nranks - 1");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[x])\n", 4,
                   "<string>:2:22: ranks entries are ranks (ints) or ranges "
                   "A:B, got 'x'");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[1.5])\n", 4,
                   "<string>:2:22: ranks entries are ranks (ints) or ranges "
                   "A:B, got 1.5");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[[0]])\n", 4,
                   "<string>:2:22: nested lists are not supported");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[0:1:2])\n", 4,
                   "<string>:2:25: expected ',' or ']' in the list opened at "
                   "2:21, got ':'");
  EXPECT_RANKS_ERR(A10 "b = assign(a, ranks=[0], ranks=[1])\n", 4,
                   "<string>:2:26: duplicate attribute 'ranks' (first given "
                   "at 2:15)");
  EXPECT_RANKS_ERR("a = data(shape=[8], ranks=[0])\n", 4,
                   "<string>:1:21: data() declares a variable on every rank: "
                   "it takes no ranks=");
  /* A param gives an entry; a -D gives the param. */
  const char *defs[] = {"r=7"};
  ovl_parse_opts o = {
      .size = sizeof o, .nranks = 4, .defines = defs, .ndefines = 1};
  EXPECT_ERR_OPTS("param r = 1\n" A10 "b = assign(a, ranks=[r])\n", &o,
                  "<string>:3:22: rank 7 out of range for 4 ranks (0..3) "
                  "(from -D r=7)",
                  "");
  ck_assert_str_eq(last_err.msg, "<string>:3:22: rank 7 out of range for 4 "
                                 "ranks (0..3) (from -D r=7)");
}
END_TEST

/* Ops that run on some ranks only, and their rank-dependent peers: the
 * peer is evaluated only where the op runs. */
START_TEST(test_err_peer_root) {
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank - 1)\n", 4,
                   "<string>:2:17: peer=rank - 1 is -1 on rank 0; ranks are "
                   "0..3");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=rank + 1, ranks=[1:nranks])\n", 4,
                   "<string>:2:17: peer=rank + 1 is 4 on rank 3; ranks are "
                   "0..3");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=4)\n", 4,
                   "<string>:2:17: peer 4 out of range for 4 ranks (0..3)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=1)\n", 1,
                   "<string>:2:17: peer 1 out of range for 1 rank (0..0)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=-1)\n", 4,
                   "<string>:2:17: peer -1 out of range for 4 ranks (0..3)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=nranks)\n", 4,
                   "<string>:2:17: peer=nranks is 4; ranks are 0..3");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=x)\n", 4,
                   "<string>:2:17: attribute 'peer' of send_v2 wants an int, "
                   "got 'x'");
  EXPECT_RANKS_ERR(A10 "send_v2(a)\n", 4,
                   "<string>:2:1: send_v2 needs peer=RANK (the other rank)");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(out_shape=[10])\n", 4,
                   "<string>:2:5: recv_v2 needs peer=RANK (the other rank)");
  EXPECT_RANKS_ERR(A10 "c_broadcast(a, root=nranks)\n", 4,
                   "<string>:2:21: root=nranks is 4; ranks are 0..3");
  EXPECT_RANKS_ERR(A10 "c_reduce_min(a, root=4)\n", 4,
                   "<string>:2:22: root 4 out of range for 4 ranks (0..3)");
  EXPECT_RANKS_ERR(A10 "b = assign(a, peer=1)\n", 4,
                   "<string>:2:15: assign has no attribute 'peer' (allowed: "
                   "ring_id, stream)");
  EXPECT_RANKS_ERR(A10 "c_allreduce_sum(a, peer=1)\n", 4,
                   "<string>:2:20: c_allreduce_sum has no attribute 'peer' "
                   "(allowed: ring_id, use_calc_stream)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=1, root=0)\n", 4,
                   "<string>:2:20: send_v2 has no attribute 'root' (allowed: "
                   "ring_id, use_calc_stream, peer)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=1, out_shape=[10])\n", 4,
                   "<string>:2:20: send_v2 has no attribute 'out_shape' "
                   "(allowed: ring_id, use_calc_stream, peer)");
  EXPECT_RANKS_ERR(A10 "send_v2(a, peer=1, peer=2)\n", 4,
                   "<string>:2:20: duplicate attribute 'peer' (first given at "
                   "2:12)");
  /* A send to itself is fine (in a group; alone, it deadlocks: the check
   * says so). */
  ovl_program *p = parse_ranks(A10 "send_v2(a, peer=rank)\n", 3);
  for (int r = 0; r < 3; r++)
    ck_assert_int_eq(ovl__op_peer(p, &p->ops[0], r), r);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_err_send_recv) {
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1)\n", 4,
                   "<string>:2:5: recv_v2 needs out_shape=[...] (the shape it "
                   "receives)");
  EXPECT_RANKS_ERR(A10 "recv_v2(peer=1, out_shape=[8])\n", 4,
                   "<string>:2:1: recv_v2 needs an output variable (y = "
                   "recv_v2(...))");
  EXPECT_RANKS_ERR(A10 "a = recv_v2(peer=1, out_shape=[4])\n", 4,
                   "<string>:2:1: shape mismatch: 'a' is [10] float32 but "
                   "recv_v2 gives [4] float32");
  EXPECT_RANKS_ERR(A10 "a = recv_v2(peer=1, out_shape=[10], dtype=float64)\n",
                   4,
                   "<string>:2:1: dtype mismatch: 'a' is [10] float32 but "
                   "recv_v2 gives [10] float64");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[8], dtype=int8)\n", 4,
                   "<string>:2:42: bad dtype 'int8' (float32, float64, float16 or "
                   "bfloat16)");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(a, peer=1, out_shape=[8])\n", 4,
                   "<string>:2:5: recv_v2 takes 0 inputs, got 1");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=8)\n", 4,
                   "<string>:2:31: out_shape wants a list of dims like [1000, "
                   "10000], got 8");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[])\n", 4,
                   "<string>:2:31: out_shape has 0 dims; it needs 1..8");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[2.5])\n", 4,
                   "<string>:2:32: out_shape dims must be ints, got 2.5");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[nranks - 4])\n", 4,
                   "<string>:2:32: out_shape dims must be >= 1, got nranks - "
                   "4 = 0");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[4294967296, "
                       "4294967296])\n",
                   4, "<string>:2:31: out_shape has too many elements");
  EXPECT_RANKS_ERR(A10 "y = send_v2(a, peer=1)\n", 4,
                   "<string>:2:1: send_v2 has no output");
  EXPECT_RANKS_ERR(A10 "send_v2(peer=1)\n", 4,
                   "<string>:2:1: send_v2 takes 1 input, got 0");
  EXPECT_RANKS_ERR(A10 "send_v2(q, peer=1)\n", 4,
                   "<string>:2:9: undefined variable 'q'");
  EXPECT_RANKS_ERR(A10 "y = recv_v2(peer=1, out_shape=[8], scale=2)\n", 4,
                   "<string>:2:36: recv_v2 has no attribute 'scale' (allowed: "
                   "ring_id, use_calc_stream, peer, out_shape, dtype)");
  /* recv_v2 into an existing variable of its shape and dtype. */
  ovl_program *p = parse_ranks(
      "a = data(shape=[2, 5], dtype=float64)\n"
      "a = recv_v2(peer=0, out_shape=[2, nranks + 1], dtype=float64)\n",
      4);
  ck_assert_uint_eq(p->nvars, 1);
  ck_assert_int_eq(p->ops[0].out, 0);
  ovl_program_free(p);
}
END_TEST

/* matmul_v2: its output's shape for every transpose, its attributes, a
 * KERNEL primitive on calc or where stream= puts it; the errors are in
 * tests/bad_input.tsv. */
START_TEST(test_matmul_v2) {
  ovl_program *p = PARSE_OK("x = data(shape=[3, 5], dtype=float64)\n"
                            "y = data(shape=[5, 7])\n"
                            "yt = data(shape=[7, 5])\n"
                            "xf = data(shape=[3, 5])\n"
                            "a = matmul_v2(xf, y)\n"
                            "b = matmul_v2(xf, xf, trans_x=true)\n"
                            "c = matmul_v2(xf, yt, trans_y=true)\n"
                            "d = matmul_v2(y, xf, trans_x=true, "
                            "trans_y=true, stream=side)\n"
                            "e = matmul_v2(x, x, trans_y=true, "
                            "stream=comm, ring_id=2)\n"
                            "fetch(a, b, c, d, e)\n");
  static const struct {
    const char *name;
    int64_t d0, d1;
    ovl_dtype dt;
  } want[] = {{"a", 3, 7, OVL_DTYPE_FLOAT32},
              {"b", 5, 5, OVL_DTYPE_FLOAT32},
              {"c", 3, 7, OVL_DTYPE_FLOAT32},
              {"d", 7, 3, OVL_DTYPE_FLOAT32},
              {"e", 3, 3, OVL_DTYPE_FLOAT64}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    const ovl__var *v = var(p, want[k].name);
    ck_assert_int_eq(v->ndim, 2);
    ck_assert_int_eq(v->dims[0], want[k].d0);
    ck_assert_int_eq(v->dims[1], want[k].d1);
    ck_assert_int_eq(v->dtype, want[k].dt);
  }
  for (size_t i = 0; i < 5; i++) {
    size_t n;
    const ovl__prim *pr = ovl__op_prims(p, i, &n);
    ck_assert_str_eq(opname(p, i), "matmul_v2");
    ck_assert_int_eq(p->ops[i].def->kernel, OVL_KERNEL_MATMUL);
    ck_assert(p->ops[i].def->roles & OVL_ROLE_COMPUTE);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(pr[0].kind, OVL_PRIM_KERNEL);
    ck_assert_int_eq(pr[0].stream, i == 3   ? 1 + p->nrings
                                   : i == 4 ? OVL_STREAM_COMM(2)
                                            : OVL_STREAM_CALC);
  }
  ck_assert(!p->ops[0].trans_x && !p->ops[0].trans_y);
  ck_assert(p->ops[1].trans_x && !p->ops[1].trans_y);
  ck_assert(!p->ops[2].trans_x && p->ops[2].trans_y);
  ck_assert(p->ops[3].trans_x && p->ops[3].trans_y);
  /* An elementwise row is the other kind of kernel. */
  ck_assert_int_eq(ovl__opdef_find("scale")->kernel, OVL_KERNEL_ELEMENTWISE);
  ovl_program_free(p);
}
END_TEST

START_TEST(test_collectives_issue13) {
  ovl_program *p = parse_ranks(
      "x = data(shape=[8, 3])\n"
      "c_reduce_sum(x, root=nranks - 1)\n"
      "m = c_reduce_max(x, root=1, ring_id=2, use_calc_stream=true)\n"
      "c_reduce_min(x)\n"
      "y = c_reduce_prod(x, root=0, ranks=[0:nranks])\n"
      "w = alltoall(x, ring_id=1)\n"
      "barrier(x, w, ring_id=3)\n"
      "barrier()\n"
      "fetch(w, m)\n",
      4);
  ck_assert_uint_eq(p->nops, 8);
  ck_assert_int_eq(p->ops[0].root, 3);
  ck_assert_int_eq(p->ops[0].out, p->ops[0].in[0]); /* in place */
  ck_assert_int_eq(p->ops[0].stream, OVL_STREAM_COMM(0));
  ck_assert_int_eq(p->ops[1].root, 1);
  ck_assert_int_eq(p->ops[1].stream, OVL_STREAM_CALC);
  ck_assert_int_eq(p->ops[2].root, 0);
  ck_assert_int_eq(var(p, "w")->dims[0], 8);
  ck_assert_int_ne(p->ops[4].out, p->ops[4].in[0]);
  ck_assert_int_eq(p->ops[5].nin, 2);
  ck_assert_int_eq(p->ops[5].out, -1);
  ck_assert_int_eq(p->ops[6].nin, 0);
  ck_assert_int_eq(p->ops[6].ring_id, 0);
  /* Every ring with a collective has a communicator; barrier's ring too. */
  ck_assert_uint_eq(p->ring_comm, 0xf);
  ck_assert(!p->rank_dependent);
  /* barrier: the collective on calc, then the host syncs calc. */
  size_t n;
  const ovl__prim *pr = ovl__op_prims(p, 5, &n);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(pr[0].kind, OVL_PRIM_COLL);
  ck_assert_int_eq(pr[0].stream, OVL_STREAM_CALC);
  ck_assert_int_eq(pr[1].kind, OVL_PRIM_HOST_SYNC);
  ovl_program_free(p);
  EXPECT_RANKS_ERR(A10 "a = alltoall(a)\n", 2,
                   "<string>:2:1: alltoall cannot work in place: its output "
                   "must be another variable than its input 'a'");
  EXPECT_RANKS_ERR(A10 "alltoall(a)\n", 2,
                   "<string>:2:1: alltoall needs an output variable (out = "
                   "alltoall(...))");
  EXPECT_RANKS_ERR(A10 "w = alltoall(a)\n", 3,
                   "<string>:2:5: alltoall: dim 0 of 'a' (10) is not "
                   "divisible by 3 ranks");
  EXPECT_RANKS_ERR(A10 "b = data(shape=[10], dtype=float64)\nb = "
                       "alltoall(a)\n",
                   2,
                   "<string>:3:1: dtype mismatch: 'b' is [10] float64 but "
                   "alltoall gives [10] float32");
  EXPECT_RANKS_ERR(A10 "barrier(a, root=2)\n", 2,
                   "<string>:2:12: barrier has no attribute 'root' (allowed: "
                   "ring_id)");
  EXPECT_RANKS_ERR(A10 "x = barrier(a)\n", 2,
                   "<string>:2:1: barrier has no output");
  EXPECT_RANKS_ERR(A10 "c_reduce_sum(a, root=rank + 2)\n", 2,
                   "<string>:2:22: root=rank + 2 is 2 on rank 0; ranks are "
                   "0..1");
}
END_TEST

/* group { }: what it holds, and its ops' ring and stream. */
START_TEST(test_err_groups) {
  EXPECT_RANKS_ERR(A10 "group {\n send_v2(a, peer=1)\n b = assign(a)\n}\n", 2,
                   "<string>:4:6: a group holds only send_v2 and recv_v2, "
                   "got assign (group at 2:1)");
  EXPECT_RANKS_ERR(A10 "group {\n c_allreduce_sum(a)\n}\n", 2,
                   "<string>:3:2: a group holds only send_v2 and recv_v2, "
                   "got c_allreduce_sum (group at 2:1)");
  EXPECT_RANKS_ERR(A10 "group {\n b = data(shape=[2])\n}\n", 2,
                   "<string>:3:6: a group holds only send_v2 and recv_v2, "
                   "got data (group at 2:1)");
  EXPECT_RANKS_ERR(A10 "group {\n group {\n }\n}\n", 2,
                   "<string>:3:2: group inside group: groups do not nest "
                   "(group at 2:1)");
  EXPECT_RANKS_ERR(A10 "repeat 2 {\n group {\n  repeat 2 {\n  }\n }\n}\n", 2,
                   "<string>:4:3: repeat inside group: a group holds only "
                   "send_v2 and recv_v2 (group at 3:2)");
  EXPECT_RANKS_ERR(A10 "group {\n param n = 2\n}\n", 2,
                   "<string>:3:2: param inside group: declare params at top "
                   "level");
  EXPECT_RANKS_ERR(A10 "group {\n send_v2(a, peer=1)\n", 2,
                   "<string>:2:1: group block is not closed (missing '}')");
  EXPECT_RANKS_ERR(A10 "group\n", 2,
                   "<string>:2:6: expected '{' after 'group', got end of "
                   "line");
  EXPECT_RANKS_ERR(A10 "group { send_v2(a, peer=1) }\n", 2,
                   "<string>:2:9: unexpected 'send_v2' after statement (one "
                   "statement per line)");
  EXPECT_RANKS_ERR(A10 "group {\n send_v2(a, peer=1)\n send_v2(a, peer=0, "
                       "ring_id=1)\n}\n",
                   2,
                   "<string>:4:2: send_v2 has ring_id=1 but the first op of "
                   "its group (3:2) has ring_id=0: a group's ops share one "
                   "ring");
  EXPECT_RANKS_ERR(A10 "group {\n send_v2(a, peer=1, use_calc_stream=true)\n"
                       " y = recv_v2(peer=1, out_shape=[10])\n}\n",
                   2,
                   "<string>:4:6: recv_v2 has use_calc_stream=false but the "
                   "first op of its group (3:2) has use_calc_stream=true: a "
                   "group's ops share one stream");
  /* Each group instance is checked on its own. */
  ovl_program *p = parse_ranks(A10 "group {\n send_v2(a, peer=1, ring_id=1)\n"
                                   "}\ngroup {\n send_v2(a, peer=1)\n}\n",
                               2);
  ck_assert_uint_eq(p->ops[0].group, 1);
  ck_assert_uint_eq(p->ops[1].group, 2);
  ovl_program_free(p);
  /* 64 blocks deep, a group still opens at the 64th. */
  char *open = repeat_str("repeat 1 {\n", 63, "group {\n");
  char *close = repeat_str("}\n", 64, "");
  char *src = malloc(strlen(open) + strlen(close) + 1);
  ck_assert_ptr_nonnull(src);
  strcat(strcpy(src, open), close);
  p = PARSE_OK(src);
  ck_assert_uint_eq(p->nops, 0);
  ovl_program_free(p);
  /* One more repeat and the group is the 65th block. */
  free(open);
  open = repeat_str("repeat 1 {\n", 64, "group {\n");
  EXPECT_ERR(open, "<string>:65:1: ", "group nested deeper than 64 blocks");
  free(open);
  free(close);
  free(src);
}
END_TEST

/* Issue 16 item 8: a value that came from -D names the -D. */
START_TEST(test_err_from_define) {
  static const struct {
    const char *src, *def, *want;
  } cases[] = {
      {"param cols = 4\na = data(shape=[2, cols])\n", "cols=abc",
       "<string>:2:20: shape dims must be ints, got 'abc' (from -D cols=abc)"},
      {"param cols = 4\na = data(shape=[2, cols])\n", "cols=0",
       "<string>:2:20: shape dims must be >= 1, got 0 (from -D cols=0)"},
      {"param cols = 4\na = data(shape=[2, cols])\n", "cols=1.5",
       "<string>:2:20: shape dims must be ints, got 1.5 (from -D cols=1.5)"},
      /* Through another param. */
      {"param n = 4\nparam cols = n\na = data(shape=[cols])\n", "n=x",
       "<string>:3:17: shape dims must be ints, got 'x' (from -D n=x)"},
      {"param n = 4\na = data(shape=[n * 2])\n", "n=x",
       "<string>:2:17: param 'n' is 'x', not an int (from -D n=x)"},
      {"param s = 4\na = data(shape=s)\n", "s=3",
       "<string>:2:16: shape wants a list of dims like [1000, 10000], got 3 "
       "(from -D s=3)"},
      {"param n = 4\nrepeat n {\n}\n", "n=0",
       "<string>:2:8: repeat count must be >= 1, got 0 (from -D n=0)"},
      {"param n = 4\nrepeat n {\n}\n", "n=x",
       "<string>:2:8: repeat count must be an int or an int param, got 'x' "
       "(from -D n=x)"},
      {"param r = 0\n" A10 "c_allreduce_sum(a, ring_id=r)\n", "r=20",
       "<string>:3:28: ring_id 20 out of range (0..15) (from -D r=20)"},
      {"param r = 0\n" A10 "c_allreduce_sum(a, ring_id=r)\n", "r=comm",
       "<string>:3:28: attribute 'ring_id' of c_allreduce_sum wants an int, "
       "got 'comm' (from -D r=comm)"},
      {"param r = 0\n" A10 "c_broadcast(a, root=r)\n", "r=2",
       "<string>:3:21: root 2 out of range for 2 ranks (0..1) (from -D r=2)"},
      {"param p = 0\n" A10 "send_v2(a, peer=p)\n", "p=5",
       "<string>:3:17: peer 5 out of range for 2 ranks (0..1) (from -D p=5)"},
      {"param u = 0\n" A10 "delay(us=u)\n", "u=-1",
       "<string>:3:10: us must be >= 0, got -1 (from -D u=-1)"},
      {"param s = calc\n" A10 "delay(us=1, stream=s)\n", "s=host",
       "<string>:3:20: stream=host: the host is not a stream (it runs fetch "
       "and the syncs) (from -D s=host)"},
      {"param d = float32\na = data(shape=[1], dtype=d)\n", "d=half",
       "<string>:2:27: bad dtype 'half' (float32, float64, float16 or "
       "bfloat16) (from -D d=half)"},
      {"param i = uniform\na = data(shape=[1], init=i)\n", "i=zeros",
       "<string>:2:26: bad init 'zeros' (uniform, fill or special) (from -D "
       "i=zeros)"},
      {"param s = 0\na = data(shape=[1], seed=s)\n", "s=-2",
       "<string>:2:26: seed must be >= 0, got -2 (from -D s=-2)"},
      {"param c = true\n" A10 "c_allreduce_sum(a, use_calc_stream=c)\n",
       "c=1",
       "<string>:3:36: attribute 'use_calc_stream' of c_allreduce_sum wants "
       "true or false, got 1 (from -D c=1)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *defs[] = {cases[i].def};
    ovl_parse_opts o = {
        .size = sizeof o, .nranks = 2, .defines = defs, .ndefines = 1};
    EXPECT_ERR_OPTS(cases[i].src, &o, cases[i].want, "");
    ck_assert_str_eq(last_err.msg, cases[i].want);
  }
  /* The same values written in the schedule say nothing of a -D. */
  EXPECT_ERR("a = data(shape=[2, abc])\n",
             "<string>:1:20: shape dims must be ints, got 'abc'", "");
  ck_assert_str_eq(last_err.msg,
                   "<string>:1:20: shape dims must be ints, got 'abc'");
  /* The seed, as the tools load it. */
  ovl_program *p = SENTINEL;
  const char *defs[] = {"cols=abc"};
  ovl_parse_opts o = {
      .size = sizeof o, .nranks = 2, .defines = defs, .ndefines = 1};
  char path[512];
  snprintf(path, sizeof path, "%s/schedules/seed.sched", OVL_SRCDIR);
  ck_assert_int_eq(ovl_program_load(path, &o, &p, &last_err), OVL_EPARSE);
  ck_assert_ptr_eq(p, SENTINEL);
  ck_assert_ptr_nonnull(strstr(last_err.msg,
                               "seed.sched:25:23: shape dims must be ints, "
                               "got 'abc' (from -D cols=abc)"));
}
END_TEST

/* Inserting an op (the race replay's delay) keeps a group whole and runs
 * on every rank. */
START_TEST(test_insert_keeps_groups) {
  ovl_program *p = parse_ranks("x = data(shape=[4])\n"
                               "b = assign(x, ranks=[0])\n"
                               "group {\n"
                               "  send_v2(x, peer=(rank + 1) % nranks)\n"
                               "  y = recv_v2(peer=(rank - 1) % nranks, "
                               "out_shape=[4])\n"
                               "}\n",
                               2);
  ovl_program *q = NULL;
  ck_assert_int_eq(ovl__program_insert_delay(p, 2, OVL_STREAM_COMM(0), 5.0,
                                             &q, &last_err),
                   OVL_OK);
  ck_assert_uint_eq(q->nops, 4);
  ck_assert_str_eq(opname(q, 1), "delay");
  ck_assert_uint_eq(q->ops[1].ranks, 3);
  ck_assert_uint_eq(q->ops[1].group, 0);
  ck_assert_int_eq(q->ops[1].rank_attr, -1);
  ck_assert_str_eq(opname(q, 2), "send_v2");
  ck_assert_uint_eq(q->ops[2].group, 1);
  ck_assert_uint_eq(q->ops[3].group, 1);
  ck_assert_int_eq(ovl__op_peer(q, &q->ops[3], 0), 1);
  ck_assert_uint_eq(q->ops[0].ranks, 1);
  ovl_program_free(q);
  /* Before the group's first op: where it was asked. */
  ck_assert_int_eq(ovl__program_insert_delay(p, 1, OVL_STREAM_CALC, 5.0, &q,
                                             &last_err),
                   OVL_OK);
  ck_assert_str_eq(opname(q, 1), "delay");
  ovl_program_free(q);
  ovl_program_free(p);
}
END_TEST

/* Random edits of a schedule full of expressions, ranks and groups:
 * parsing and binding answer OK or a schedule error, for several rank
 * counts. */
static const char ranks_sched[] =
    "param n = 2\n"
    "param h = nranks / 2\n"
    "x = data(shape=[nranks * 2, n + 1], init=uniform, per_rank=true)\n"
    "repeat (n - 1) * 2 {\n"
    "  group {\n"
    "    send_v2(x, peer=(rank + 1) % nranks, ranks=[0:nranks - 1])\n"
    "    y = recv_v2(peer=(rank - 1) % nranks, out_shape=[nranks * 2, 3],"
    " ranks=[1:nranks])\n"
    "  }\n"
    "  c_reduce_sum(x, root=nranks - 1, ranks=[0, h:nranks])\n"
    "  w = alltoall(x, ring_id=h % 2)\n"
    "}\n"
    "barrier(x, ring_id=1)\n"
    "fetch(w)\n";

START_TEST(test_mutated_ranks) {
  static const char alphabet[] = "()[]{},=:+-*/%#\n -0123456789nrk_ ";
  size_t n = strlen(ranks_sched);
  char *buf = malloc(n + 64);
  ck_assert_ptr_nonnull(buf);
  for (int r = 2; r <= 4; r++) {
    ovl_program *p = parse_ranks(ranks_sched, r);
    ck_assert(p->rank_dependent);
    ovl_program_free(p);
  }
  /* On one rank, ranks=[0:nranks - 1] names none. */
  EXPECT_RANKS_ERR(ranks_sched, 1,
                   "<string>:6:48: ranks=[0:nranks - 1] names no rank; ranks "
                   "are 0..0");
  rng_state = 777;
  for (int it = 0; it < 3000; it++) {
    size_t len = n;
    memcpy(buf, ranks_sched, n);
    int edits = 1 + (int)(rng() % 3);
    for (int e = 0; e < edits; e++) {
      size_t at = rng() % len;
      switch (rng() % 3) {
      case 0:
        buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
        break;
      case 1:
        memmove(buf + at, buf + at + 1, len - at - 1);
        len--;
        break;
      default:
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
        len++;
        break;
      }
    }
    ovl_parse_opts o = {.size = sizeof o, .nranks = 1 + (int)(rng() % 5)};
    ovl_program *p = NULL;
    ovl_status st = try_parse(buf, len, &o, &p);
    ck_assert_msg(st == OVL_OK || st == OVL_EPARSE, "status %s: %s",
                  ovl_err_name(st), last_err.msg);
    if (st == OVL_OK)
      ovl_program_free(p);
    else
      ck_assert_msg(strncmp(last_err.msg, "<string>:", 9) == 0, "%s",
                    last_err.msg);
  }
  free(buf);
}
END_TEST

static Suite *parse_suite(void) {
  Suite *s = suite_create("parse");
  TCase *tc = tcase_create("ok");
  /* test_max_ops and test_many_variables take 2 s each under
   * ThreadSanitizer, and more on a loaded machine: not Check's 4 s. */
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_seed_program);
  tcase_add_test(tc, test_introspection_out_of_range);
  tcase_add_test(tc, test_cpu_defaults);
  tcase_add_test(tc, test_defines_override);
  tcase_add_test(tc, test_define_changes_type);
  tcase_add_test(tc, test_define_bool_and_name);
  tcase_add_test(tc, test_param_values_as_text);
  tcase_add_test(tc, test_empty_programs);
  tcase_add_test(tc, test_data_attributes);
  tcase_add_test(tc, test_data_special);
  tcase_add_test(tc, test_multiline_and_comments);
  tcase_add_test(tc, test_collective_shapes);
  tcase_add_test(tc, test_inplace_allgather_one_rank);
  tcase_add_test(tc, test_op_streams);
  tcase_add_test(tc, test_generic_op_streams);
  tcase_add_test(tc, test_event_names);
  tcase_add_test(tc, test_fetch_order);
  tcase_add_test(tc, test_repeat_expansion_order);
  tcase_add_test(tc, test_repeat_count_param);
  tcase_add_test(tc, test_large_repeat_ok);
  tcase_add_test(tc, test_max_ops);
  tcase_add_test(tc, test_max_ops_refused_at_once);
  tcase_add_test(tc, test_write_to_data_var);
  tcase_add_test(tc, test_param_name_values);
  tcase_add_test(tc, test_ring_collective_later_is_fine);
  tcase_add_test(tc, test_many_variables);
  suite_add_tcase(s, tc);

  tc = tcase_create("errors");
  tcase_add_test(tc, test_err_unexpected_character);
  tcase_add_test(tc, test_err_nul_byte);
  tcase_add_test(tc, test_err_numbers);
  tcase_add_test(tc, test_err_identifier_too_long);
  tcase_add_test(tc, test_err_unterminated_paren);
  tcase_add_test(tc, test_err_missing_paren);
  tcase_add_test(tc, test_err_unterminated_list);
  tcase_add_test(tc, test_err_junk_after_statement);
  tcase_add_test(tc, test_err_bad_statement_start);
  tcase_add_test(tc, test_err_positional_after_keyword);
  tcase_add_test(tc, test_err_too_many_attributes);
  tcase_add_test(tc, test_err_unknown_op);
  tcase_add_test(tc, test_err_foreign_syntax);
  tcase_add_test(tc, test_err_arity);
  tcase_add_test(tc, test_err_output_count);
  tcase_add_test(tc, test_err_undefined_variable);
  tcase_add_test(tc, test_err_redeclared_variable);
  tcase_add_test(tc, test_err_reserved_names);
  tcase_add_test(tc, test_err_param_as_variable);
  tcase_add_test(tc, test_err_shape_mismatch_output);
  tcase_add_test(tc, test_err_dtype_mismatch_output);
  tcase_add_test(tc, test_err_elementwise_mismatch);
  tcase_add_test(tc, test_err_collective_shapes);
  tcase_add_test(tc, test_err_bad_attribute_name);
  tcase_add_test(tc, test_err_duplicate_attribute);
  tcase_add_test(tc, test_err_attribute_type);
  tcase_add_test(tc, test_err_attribute_range);
  tcase_add_test(tc, test_err_generic_ops);
  tcase_add_test(tc, test_err_too_many_events);
  tcase_add_test(tc, test_err_unbalanced_close);
  tcase_add_test(tc, test_err_unbalanced_open);
  tcase_add_test(tc, test_err_repeat_count);
  tcase_add_test(tc, test_err_repeat_too_large);
  tcase_add_test(tc, test_err_nesting_too_deep);
  tcase_add_test(tc, test_err_declarations_in_repeat);
  tcase_add_test(tc, test_err_param_redeclared);
  tcase_add_test(tc, test_err_param_before_declaration);
  tcase_add_test(tc, test_err_param_syntax);
  tcase_add_test(tc, test_err_data_shape);
  tcase_add_test(tc, test_err_data_attributes);
  tcase_add_test(tc, test_err_data_form);
  tcase_add_test(tc, test_ring_without_collective);
  tcase_add_test(tc, test_user_streams);
  tcase_add_test(tc, test_err_define_unknown);
  tcase_add_test(tc, test_err_define_malformed);
  tcase_add_test(tc, test_err_define_long);
  tcase_add_test(tc, test_err_nranks);
  tcase_add_test(tc, test_filename_in_messages);
  suite_add_tcase(s, tc);

  tc = tcase_create("load");
  tcase_add_test(tc, test_load_ok);
  tcase_add_test(tc, test_load_errors_name_file);
  tcase_add_test(tc, test_load_missing_file);
  tcase_add_test(tc, test_load_binary);
  tcase_add_test(tc, test_load_too_large);
  suite_add_tcase(s, tc);

  tc = tcase_create("schedule");
  tcase_add_test(tc, test_schedule_binds_to_rank_counts);
  tcase_add_test(tc, test_schedule_bind_defines);
  tcase_add_test(tc, test_schedule_parse_errors);
  tcase_add_test(tc, test_schedule_bind_errors);
  tcase_add_test(tc, test_schedule_bind_max_ops);
  tcase_add_test(tc, test_schedule_params);
  tcase_add_test(tc, test_schedule_wrapper_agrees);
  tcase_add_test(tc, test_schedule_load);
  tcase_add_test(tc, test_schedule_bind_threads);
  suite_add_tcase(s, tc);

  tc = tcase_create("ranks");
  tcase_add_test(tc, test_ranks_default);
  tcase_add_test(tc, test_ranks_lists);
  tcase_add_test(tc, test_send_recv);
  tcase_add_test(tc, test_rank_attrs_shared);
  tcase_add_test(tc, test_rank_root);
  tcase_add_test(tc, test_groups);
  tcase_add_test(tc, test_expressions);
  tcase_add_test(tc, test_err_expressions);
  tcase_add_test(tc, test_err_ranks);
  tcase_add_test(tc, test_err_peer_root);
  tcase_add_test(tc, test_err_send_recv);
  tcase_add_test(tc, test_collectives_issue13);
  tcase_add_test(tc, test_matmul_v2);
  tcase_add_test(tc, test_err_groups);
  tcase_add_test(tc, test_err_from_define);
  tcase_add_test(tc, test_insert_keeps_groups);
  tcase_add_test(tc, test_mutated_ranks);
  tcase_set_timeout(tc, 30);
  suite_add_tcase(s, tc);

  tc = tcase_create("robustness");
  tcase_add_test(tc, test_random_bytes);
  tcase_add_test(tc, test_mutated_seed);
  tcase_add_test(tc, test_deep_nesting);
  tcase_add_test(tc, test_long_lines);
  /* Sanitizer builds are slower; the default 4 s is tight for them. */
  tcase_set_timeout(tc, 30);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(parse_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
