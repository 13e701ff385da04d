/*
 * tools/overlap_sim's command line (tools/sim_flags.c): the options, their
 * parsing, --help. Not part of libovl.
 */
#ifndef OVL_SIM_FLAGS_H
#define OVL_SIM_FLAGS_H

#include <stddef.h>
#include <stdio.h>

#include "common_flags.h"
#include "ovl.h"

#define SIM_MAX_DEFINES 64
/* The default of --trials: up to 5 trials, a trial after the first only
 * while the trials so far and one more fit in about 10 s (so that a short
 * run is measured 5 times and a long one once). */
#define SIM_DEFAULT_TRIALS 5
#define SIM_TRIAL_BUDGET_S 10.0

typedef struct {
  /* The flags overlap_sweep takes too: --backend, --ranks,
   * --gpus-per-process, -n, -w, --timeout, --rtol, --atol, --graph, the
   * cuda tuning, -q. */
  common_opts common;
  const char *mode;
  /* --trials=K: the whole measurement K times; 0: the default, up to
   * SIM_DEFAULT_TRIALS within SIM_TRIAL_BUDGET_S. */
  int trials;
  const char *defines[SIM_MAX_DEFINES];
  size_t ndefines;
  int show;
  int verbose;
  int op_times;
  int races_only, no_races;
  int mode_given;
  const char *json; /* --json[=FILE]: "-" for stdout */
  int json_bare;    /* --json without =FILE */
  const char *trace, *svg; /* --trace=FILE, --svg=FILE */
  int trace_iter;          /* --trace-iter=K; -1: the last */
  int trace_iter_given;
  long check_rows;    /* --check-rows=N; -1: all; 0: the default */
  unsigned chaos_seed;
  /* --replay[=K]: 0 off, OVL_REPLAY_ALL every race, K race K; and
   * --replay-delay=US (0: the library's default). */
  long replay;
  double replay_delay_us;
  /* --fix[=FILE]: apply every checked hint; the fixed schedule to FILE
   * (fix_file), or without FILE a diff on stdout. */
  int fix;
  const char *fix_file;
  /* --predict=PROFILE: the model's prediction (with --machine's machine)
   * beside the real run, and its error. */
  const char *predict;
  /* --calibrate=FILE: measure the model's profile of the schedule into
   * FILE, run no mode (NULL: not asked). */
  const char *calibrate;
  const char *schedule;
  /* Set by the tool, not a flag: the seed's `steps` the default run chose
   * for its rank count (0: the seed's own, or a schedule was named). */
  int seed_steps;
  /* Set by the tool: the rank count the checks ran at, where it is not
   * the run's (past 64 ranks: 64); 0: the run's. */
  int checks_at;
} sim_options;

/* The defaults: backend auto, mode both, 2 warmup + 8 timed iterations,
 * rtol and atol OVL_TOL_DTYPE (each dtype's default), no --show. */
void sim_options_init(sim_options *o);

/* Parse the flags into `o` (getopt_long: reset optind to rescan). Returns
 * -1 to go on, or the exit status to end with: 0 after --help or
 * --version (printed on stdout), 2 after a usage error (message printed
 * on stderr). */
int sim_parse_flags(int argc, char **argv, sim_options *o);

/* --help. */
void sim_usage(FILE *f);

/* The modes the flags ask for, as ovl_pipeline_opts.modes: --mode's
 * (both: sync and async; all: the four), or with --races and no --mode
 * the schedule as written (async). */
unsigned sim_modes(const sim_options *o);

/* The defines to bind with: the flags' -D, and the default run's steps
 * (the seed at any rank count: o->seed_steps). `defs` has room for
 * SIM_MAX_DEFINES + 1, `buf` for "steps=N". */
size_t sim_bind_defines(sim_options *o, const ovl_schedule *sched,
                        int nranks, const char **defs, char *buf,
                        size_t len);

#endif /* OVL_SIM_FLAGS_H */
