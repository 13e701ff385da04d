/*
 * tools/overlap_sim's command line (tools/sim_flags.c): the options, their
 * parsing, --help. Not part of libovl.
 */
#ifndef OVL_SIM_FLAGS_H
#define OVL_SIM_FLAGS_H

#include <stddef.h>
#include <stdio.h>

#define SIM_MAX_DEFINES 64

typedef struct {
  const char *backend;
  int ranks;
  const char *mode;
  int iters, warmup;
  const char *defines[SIM_MAX_DEFINES];
  size_t ndefines;
  double rtol, atol;
  int show;
  double timeout_s;
  int quiet, verbose;
  int op_times;
  int races_only, no_races;
  int mode_given;
  const char *json; /* --json[=FILE]: "-" for stdout */
  int json_bare;    /* --json without =FILE */
  const char *trace, *svg; /* --trace=FILE, --svg=FILE */
  int trace_iter;          /* --trace-iter=K; -1: the last */
  int trace_iter_given;
  int comm_priority_high;
  int nccl_min_ctas, nccl_max_ctas;
  int tf32;           /* --tf32=on */
  long check_rows;    /* --check-rows=N; -1: all; 0: the default */
  unsigned chaos_seed;
  /* --replay[=K]: 0 off, OVL_REPLAY_ALL every race, K race K; and
   * --replay-delay=US (0: the library's default). */
  long replay;
  double replay_delay_us;
  const char *schedule;
} sim_options;

/* The defaults: backend auto, mode both, 10 iterations of which 2 warmup,
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

#endif /* OVL_SIM_FLAGS_H */
