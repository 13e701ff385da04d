/*
 * libFuzzer target: tools/overlap_sim's command line (`make fuzz`).
 *
 * The tool's flag parsing (tools/sim_flags.c, with the shared flags of
 * tools/common_flags.c) is linked in and fuzzed as the tool runs it. The
 * input is the argument vector: arguments separated by NUL bytes (at most
 * 32). When the flags are accepted, their -D defines are applied to a
 * small schedule with params, as the tool would apply them to its
 * schedule.
 *
 * Run with -close_fd_mask=3: the tool prints its usage and errors.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ovl.h"
#include "sim_flags.h"

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char schedule[] =
    "param rows = 2\n"
    "param cols = 8, cpu = 4\n"
    "param steps = 3\n"
    "param s = 1.5\n"
    "a = data(shape=[rows, cols], dtype=float32, init=uniform, seed=0)\n"
    "repeat steps {\n"
    "  b = scale(a, scale=s)\n"
    "  c_allreduce_sum(b, ring_id=0, use_calc_stream=false)\n"
    "}\n"
    "c_wait_comm(b, ring_id=0)\n"
    "fetch(b)\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  sim_options o;

  if (buf == NULL)
    return 0;
  sim_options_init(&o);
  memcpy(buf, data, size);
  buf[size] = '\0';
  argv[argc++] = (char *)"overlap_sim";
  for (size_t i = 0; i < size && argc <= MAX_ARGS;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;

  optind = 0; /* glibc: start a new scan */
  if (sim_parse_flags(argc, argv, &o) < 0 && o.ndefines > 0) {
    ovl_parse_opts popts = {.size = sizeof popts, .defines = o.defines,
                            .ndefines = o.ndefines,
                            .nranks = o.common.ranks > 0 ? o.common.ranks : 2,
                            .cpu_defaults =
                                strcmp(o.common.backend, "cuda") != 0,
                            /* The tool bounds the ops by its memory plan;
                             * a -D steps=10000000 would otherwise spend
                             * the run building long programs. */
                            .max_ops = 4096};
    ovl_program *prog = NULL;
    ovl_error err;
    if (ovl_program_parse(schedule, sizeof schedule - 1, "flags.sched",
                          &popts, &prog, &err) == OVL_OK)
      ovl_program_free(prog);
  }
  free(buf);
  return 0;
}
