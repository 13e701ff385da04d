/*
 * race_bench: how fast the race checker is (issue 4 asks for 1,000,000 ops
 * checked in under a second).
 *
 *   race_bench [-n OPS] [-r REPS] [-p seed|random|all]
 *
 * Generates a schedule of about OPS ops (default 1,000,000), parses it
 * (timed apart), then runs ovl_race_check REPS times (default 5) and prints
 * the best time as ops/s. Patterns:
 *   seed    the seed benchmark's loop (allreduce on a comm stream, ten
 *           scales and an assign on calc, waits around it) repeated in a
 *           `repeat` block: clean.
 *   random  OPS distinct lines of compute ops, collectives on 2 rings
 *           (in place and out of place), waits, syncs and fetches over 64
 *           variables, from a fixed LCG: racy (exercises the report path
 *           and the 10,000-race cap).
 * Exit status 0, or 1 on an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ovl.h"

#define BENCH_NAME "race_bench"
#include "bench.h"

static unsigned long long lcg = 0x2545f4914f6cdd1dull;
static unsigned rnd(unsigned n) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)((lcg >> 33) % n);
}

#define NVARS 64
static void gen_random(buf *b, long ops) {
  put(b, "x = data(shape=[4], dtype=float32, init=uniform, seed=1)\n");
  for (int v = 0; v < NVARS; v++)
    put(b, "v%d = assign(x)\n", v);
  /* Both rings need a collective. */
  put(b, "c_allreduce_sum(v0, ring_id=0)\nc_allreduce_sum(v1, ring_id=1)\n");
  for (long i = NVARS + 2; i < ops; i++) {
    unsigned k = rnd(100), a = rnd(NVARS), c = rnd(NVARS), r = rnd(2);
    unsigned d = rnd(NVARS);
    if (k < 40)
      put(b, "v%u = elementwise_add(v%u, v%u)\n", a, c, d);
    else if (k < 50)
      put(b, "v%u = scale(v%u, scale=0.5)\n", a, c);
    else if (k < 60)
      put(b, "c_allreduce_sum(v%u, ring_id=%u)\n", a, r);
    else if (k < 68)
      put(b, "v%u = c_allreduce_max(v%u, ring_id=%u)\n", a, c, r);
    else if (k < 78)
      put(b, "c_wait_compute(v%u, ring_id=%u)\n", a, r);
    else if (k < 88)
      put(b, "c_wait_comm(v%u, ring_id=%u)\n", a, r);
    else if (k < 93)
      put(b, "fetch(v%u)\n", a);
    else if (k < 96)
      put(b, "c_sync_comm_stream(v%u, ring_id=%u)\n", a, r);
    else if (k < 98)
      put(b, "c_sync_calc_stream(v%u)\n", a);
    else
      put(b, "delay(us=1, stream=comm, ring_id=%u)\n", r);
  }
}

static int bench(const char *pattern, long ops, int reps) {
  buf b = {NULL, 0, 0};
  ovl_parse_opts po = {.size = sizeof po, .nranks = 2};
  ovl_program *prog = NULL;
  ovl_races *races = NULL;
  ovl_error err = {0};
  double t0, tparse, best = 1e30;
  size_t n;

  if (strcmp(pattern, "seed") == 0)
    gen_seed(&b, ops);
  else
    gen_random(&b, ops);
  t0 = now();
  if (ovl_program_parse(b.s, b.n, pattern, &po, &prog, &err) != OVL_OK) {
    fprintf(stderr, "race_bench: %s\n", err.msg);
    free(b.s);
    return 1;
  }
  tparse = now() - t0;
  free(b.s);
  n = ovl_program_op_count(prog);
  for (int i = 0; i < reps; i++) {
    double t;
    ovl_races_free(races);
    races = NULL;
    t0 = now();
    if (ovl_race_check(prog, &races, &err) != OVL_OK) {
      fprintf(stderr, "race_bench: %s\n", err.msg);
      ovl_program_free(prog);
      return 1;
    }
    t = now() - t0;
    if (t < best)
      best = t;
  }
  printf("%-6s %9zu ops  parse %7.3f s  check %7.4f s (best of %d)  "
         "%7.2f M ops/s  %zu race%s listed, %llu more pairs\n",
         pattern, n, tparse, best, reps, (double)n / best / 1e6,
         ovl_races_count(races), ovl_races_count(races) == 1 ? "" : "s",
         (unsigned long long)ovl_races_more(races));
  ovl_races_free(races);
  ovl_program_free(prog);
  return 0;
}

int main(int argc, char **argv) {
  long ops = 1000000;
  int reps = 5, rc = 0;
  const char *pattern = "all";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      ops = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
      pattern = argv[++i];
    else {
      fprintf(stderr, "usage: race_bench [-n OPS] [-r REPS] "
                      "[-p seed|random|all]\n");
      return 1;
    }
  }
  if (ops < 100 || reps < 1) {
    fprintf(stderr, "race_bench: want -n >= 100 and -r >= 1\n");
    return 1;
  }
  if (strcmp(pattern, "seed") == 0 || strcmp(pattern, "all") == 0)
    rc |= bench("seed", ops, reps);
  if (strcmp(pattern, "random") == 0 || strcmp(pattern, "all") == 0)
    rc |= bench("random", ops, reps);
  return rc;
}
