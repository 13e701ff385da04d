/*
 * What the checkers' benchmarks share (race_bench.c, check_bench.c): the
 * clock, the growing buffer they generate a schedule into, and the seed
 * benchmark's loop. Define BENCH_NAME (the program's name, for its
 * out-of-memory message) before including it.
 */
#ifndef OVL_BENCH_H
#define OVL_BENCH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
  char *s;
  size_t n, cap;
} buf;

/* Appends to `b`, growing it; out of memory exits 1. */
static inline void put(buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void put(buf *b, const char *fmt, ...) {
  va_list ap;
  int len;
  for (;;) {
    va_start(ap, fmt);
    len = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (len >= 0 && (size_t)len < b->cap - b->n)
      break;
    b->cap = b->cap * 2 + (size_t)(len > 0 ? len : 0) + 1024;
    if ((b->s = realloc(b->s, b->cap)) == NULL) {
      fprintf(stderr, BENCH_NAME ": out of memory\n");
      exit(1);
    }
  }
  b->n += (size_t)len;
}

/* The seed benchmark's loop, 4 + 14 * steps + 3 ops: at least `ops`
 * (race_bench's seed, check_bench's spmd). */
static inline void gen_seed(buf *b, long ops) {
  long steps = (ops - 7 + 13) / 14;
  put(b, "a = data(shape=[4, 4], dtype=float32, init=uniform, seed=0)\n"
         "b = assign(a)\n"
         "c = elementwise_add(a, b)\n"
         "d = elementwise_add(a, b)\n"
         "c_wait_compute(c, ring_id=0)\n"
         "repeat %ld {\n"
         "  c_allreduce_sum(c, ring_id=0, use_calc_stream=false)\n"
         "  repeat 10 {\n"
         "    e = scale(d, scale=2.0)\n"
         "  }\n"
         "  d = assign(e)\n"
         "  c_wait_comm(c, ring_id=0)\n"
         "  c_wait_compute(c, ring_id=0)\n"
         "}\n"
         "c_wait_comm(c, ring_id=0)\n"
         "out = elementwise_sub(c, d)\n"
         "fetch(out)\n",
         steps);
}

#endif /* OVL_BENCH_H */
