/*
 * check_bench: how fast the static check is on ranks that differ (issue 13
 * asks for a 1,000,000-op program on 8 ranks checked in under 2 s: races,
 * mismatches and deadlocks together).
 *
 *   check_bench [-n OPS] [-r RANKS] [-R REPS] [-p pipeline|spmd|all]
 *
 * Generates a schedule of about OPS ops (default 1,000,000) for RANKS ranks
 * (default 8), parses and binds it (timed apart), then times, best of REPS
 * (default 3):
 *   races      ovl_race_check of the program as bound (one analysis per
 *              class of ranks with the same ops)
 *   mismatch   ovl_mismatch_check
 *   deadlock   ovl_deadlock_check (the abstract execution of every rank)
 *   all three  the sum of the three
 *   --races    ovl_pipeline_run with the checks and no run, for the sync
 *              and async forms (what `overlap_sim --races` does: both
 *              forms made and race- and deadlock-checked, the mismatches
 *              once)
 * Patterns:
 *   pipeline  a pipeline of RANKS stages: per step each stage receives its
 *             input from the previous stage (ranks=[1:nranks]), computes,
 *             sends to the next (ranks=[0:nranks - 1]) on the comm stream
 *             of ring 0, and all-reduces a gradient on ring 1's; every
 *             rank's op set differs from its neighbours': 3 classes of
 *             ranks, point-to-point matching, clean.
 *   spmd      the seed benchmark's loop (race_bench's seed): one class, and
 *             the mismatch and deadlock checks find it SPMD at once.
 * Exit status 0, or 1 on an error (or a finding: the patterns are clean).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ovl.h"

#define BENCH_NAME "check_bench"
#include "bench.h"

/* 4 + 16 * steps + 2 ops. */
static void gen_pipeline(buf *b, long ops) {
  long steps = (ops - 6 + 15) / 16;
  put(b,
      "x = data(shape=[64], dtype=float32, init=uniform, seed=0)\n"
      "a = assign(x)\n"
      "g = assign(x)\n"
      "b = assign(x)\n"
      "repeat %ld {\n"
      "  # forward: the previous stage's activation, then compute\n"
      "  c_wait_compute(a, ring_id=0)\n"
      "  a = recv_v2(peer=rank - 1, out_shape=[64], dtype=float32, "
      "ring_id=0, use_calc_stream=false, ranks=[1:nranks])\n"
      "  c_wait_comm(a, ring_id=0)\n"
      "  b = scale(a, scale=0.5)\n"
      "  b = elementwise_add(b, x)\n"
      "  b = scale(b, scale=2.0)\n"
      "  b = elementwise_mul(b, x)\n"
      "  # to the next stage\n"
      "  c_wait_compute(b, ring_id=0)\n"
      "  send_v2(b, peer=rank + 1, ring_id=0, use_calc_stream=false, "
      "ranks=[0:nranks - 1])\n"
      "  c_wait_comm(b, ring_id=0)\n"
      "  # the gradient, all-reduced on ring 1\n"
      "  g = elementwise_add(g, b)\n"
      "  c_wait_compute(g, ring_id=1)\n"
      "  c_allreduce_sum(g, ring_id=1, use_calc_stream=false)\n"
      "  c_wait_comm(g, ring_id=1)\n"
      "  a = scale(g, scale=0.25)\n"
      "  g = scale(g, scale=0.5)\n"
      "}\n"
      "c_wait_comm(g, ring_id=1)\n"
      "fetch(g)\n",
      steps);
}

static int fail(const char *what, const ovl_error *err) {
  fprintf(stderr, "check_bench: %s: %s\n", what, err->msg);
  return 1;
}

static int bench(const char *pattern, long ops, int nranks, int reps) {
  buf b = {NULL, 0, 0};
  ovl_parse_opts po = {.size = sizeof po, .nranks = nranks};
  ovl_program *prog = NULL;
  ovl_error err = {0};
  double t0, tparse, best[4] = {1e30, 1e30, 1e30, 1e30};
  size_t nr = 0, nm = 0, nd = 0;
  uint64_t found = 0;

  if (strcmp(pattern, "pipeline") == 0)
    gen_pipeline(&b, ops);
  else
    gen_seed(&b, ops); /* spmd */
  t0 = now();
  if (ovl_program_parse(b.s, b.n, pattern, &po, &prog, &err) != OVL_OK) {
    free(b.s);
    return fail("parse", &err);
  }
  tparse = now() - t0;
  free(b.s);
  for (int i = 0; i < reps; i++) {
    ovl_races *races = NULL;
    ovl_mismatches *mm = NULL;
    ovl_deadlocks *dl = NULL;
    ovl_report *rep = NULL;
    ovl_pipeline_opts pl = {.size = sizeof pl,
                            .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                     OVL_MODE_BIT(OVL_MODE_ASYNC),
                            .races = 1};
    double t[5];
    t[0] = now();
    if (ovl_race_check(prog, &races, &err) != OVL_OK)
      return fail("race check", &err);
    t[1] = now();
    if (ovl_mismatch_check(prog, &mm, &err) != OVL_OK)
      return fail("mismatch check", &err);
    t[2] = now();
    if (ovl_deadlock_check(prog, &dl, &err) != OVL_OK)
      return fail("deadlock check", &err);
    t[3] = now();
    if (ovl_pipeline_run(NULL, prog, &pl, &rep, &err) != OVL_OK)
      return fail("pipeline", &err);
    t[4] = now();
    for (int k = 0; k < 3; k++)
      if (t[k + 1] - t[k] < best[k])
        best[k] = t[k + 1] - t[k];
    if (t[4] - t[3] < best[3])
      best[3] = t[4] - t[3];
    nr = ovl_races_count(races);
    nm = ovl_mismatches_count(mm);
    nd = ovl_deadlocks_count(dl);
    {
      ovl_report_summary s;
      ovl_report_summary_get(rep, &s);
      found = s.races + s.mismatches + s.deadlocks;
    }
    ovl_races_free(races);
    ovl_mismatches_free(mm);
    ovl_deadlocks_free(dl);
    ovl_report_free(rep);
  }
  printf("%-8s %9zu ops x %d ranks  parse %6.3f s  races %6.3f s  "
         "mismatch %6.3f s  deadlock %6.3f s  all three %6.3f s  "
         "--races (sync+async) %6.3f s  (best of %d; %zu races, %zu "
         "mismatches, %zu deadlocks)\n",
         pattern, ovl_program_op_count(prog), nranks, tparse, best[0],
         best[1], best[2], best[0] + best[1] + best[2], best[3], reps, nr,
         nm, nd);
  ovl_program_free(prog);
  return nr + nm + nd + found > 0 ? 1 : 0;
}

int main(int argc, char **argv) {
  long ops = 1000000;
  int reps = 3, nranks = 8, rc = 0;
  const char *pattern = "all";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      ops = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
      nranks = atoi(argv[++i]);
    else if (strcmp(argv[i], "-R") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
      pattern = argv[++i];
    else {
      fprintf(stderr, "usage: check_bench [-n OPS] [-r RANKS] [-R REPS] "
                      "[-p pipeline|spmd|all]\n");
      return 1;
    }
  }
  if (ops < 100 || reps < 1 || nranks < 2 || nranks > 64) {
    fprintf(stderr, "check_bench: want -n >= 100, -R >= 1, 2 <= -r <= 64\n");
    return 1;
  }
  if (strcmp(pattern, "pipeline") == 0 || strcmp(pattern, "all") == 0)
    rc |= bench("pipeline", ops, nranks, reps);
  if (strcmp(pattern, "spmd") == 0 || strcmp(pattern, "all") == 0)
    rc |= bench("spmd", ops, nranks, reps);
  return rc;
}
