/*
 * The flags both tools take (tools/overlap_sim, tools/overlap_sweep), in
 * one table (tools/common_flags.c): each one's names, argument, range,
 * message and help line, defined once. Each tool's parser scans its own
 * flags and these together (common_flags_scan), and its --help prints
 * these with common_flag_help, so that a shared flag reads, parses and
 * fails the same in both. Also the world those flags ask for. Not part
 * of libovl.
 */
#ifndef OVL_COMMON_FLAGS_H
#define OVL_COMMON_FLAGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ovl.h"

/* --timeout's default, in seconds: the library's (a world's, and the
 * processes' of an MPI launch). */
#define COMMON_DEFAULT_TIMEOUT_S 60.0

/* What the shared flags set; common_opts_init gives the defaults. */
typedef struct {
  const char *backend;   /* --backend: auto, cpu, cuda, model */
  int ranks;             /* --ranks; 0: the backend's default */
  int gpus_per_process;  /* --gpus-per-process; 0: one */
  int iters, warmup;     /* -n: timed iterations; -w: untimed ones first */
  double timeout_s;      /* --timeout; 0: COMMON_DEFAULT_TIMEOUT_S */
  double rtol, atol;     /* --rtol, --atol; OVL_TOL_DTYPE: by dtype */
  int graph;             /* --graph */
  int comm_priority_high; /* --comm-priority=high */
  int nccl_min_ctas, nccl_max_ctas; /* 0: NCCL's choice */
  int tf32;              /* --tf32=on */
  /* --machine, --profile: the model backend's files (NULL: not given) */
  const char *machine, *profile;
  int quiet;             /* -q */
} common_opts;

/* The shared flags, in the table's order. */
typedef enum {
  CF_BACKEND,
  CF_RANKS,
  CF_GPUS_PER_PROCESS,
  CF_ITERS,
  CF_WARMUP,
  CF_TIMEOUT,
  CF_RTOL,
  CF_ATOL,
  CF_GRAPH,
  CF_COMM_PRIORITY,
  CF_NCCL_MIN_CTAS,
  CF_NCCL_MAX_CTAS,
  CF_TF32,
  CF_MACHINE,
  CF_PROFILE,
  CF_QUIET,
  CF_HELP,
  CF_VERSION,
  CF__COUNT
} common_flag;

typedef struct flag_def flag_def;

/* Reads `arg`, the value of flag `d`, into `field` (common_opts at
 * d->offset). Returns -1, or the exit status of a usage error (message
 * printed). The kinds (tools/common_flags.c): flag_int (an int in [lo,
 * hi]), flag_real (a finite number in [lo, hi]), flag_word (one of
 * `words`, kept as given: a const char *), flag_choice (one of `words`,
 * as its index: an int), and --gpus-per-process's own. */
typedef int (*flag_parser)(const flag_def *d, const char *arg, void *field);

/* One row of the table. */
struct flag_def {
  const char *name;    /* "backend": --backend */
  char short_name;     /* 'b': -b; 0: none */
  /* The value as --help shows it ("NAME", "high|default"); NULL: the flag
   * takes none (a switch: the field becomes 1). */
  const char *metavar;
  flag_parser parse;   /* how the value is read; NULL for a switch */
  size_t offset;       /* its field in common_opts */
  double lo, hi;       /* the range of a number */
  const char *words;   /* the words accepted, '|'-separated */
  /* What a bad value is told: "--NAME: 'VALUE' is not BAD"; flag_int's
   * says "a number from LO to HI"; flag_word's is "--NAME: unknown BAD
   * 'VALUE' (WORDS)". */
  const char *bad;
  bool with_next;      /* --help lists it on one line with the next */
  /* The help text, lines separated by '\n' (each indented to the tool's
   * column). NULL: what the flag does differs by tool, and each tool's
   * --help says it. */
  const char *help;
};

/* The table, indexed by common_flag. */
extern const flag_def common_flags[CF__COUNT];

/* flag_set.take's answer to a code that is none of the tool's flags. */
#define FLAG_UNKNOWN (-2)

/* How a tool takes the shared flags beside its own. */
typedef struct {
  const char *tool; /* "overlap_sim": --version says it */
  /* The tool's own long options ({0}-terminated; `val` below 0x1000) and
   * short ones (getopt's syntax, "m:D:v"). */
  const struct option *own;
  const char *own_short;
  /* Short options of the table the tool does not take (overlap_sweep:
   * "br", nccl-tests' -b for the smallest size and -r for the root). */
  const char *no_short;
  int column; /* where --help's text starts after the flags' names */
  void (*usage)(FILE *f); /* --help */
  /* One of the tool's own flags (getopt's code c, its value arg) into
   * opts. Returns -1, the exit status (message printed), or FLAG_UNKNOWN
   * for a code that is none of its flags (getopt's '?': the scan says
   * the option is unknown). */
  int (*take)(void *opts, int c, const char *arg);
} flag_set;

/* The defaults: backend auto, 8 timed iterations after 2 warmup ones,
 * rtol and atol OVL_TOL_DTYPE, the rest 0. */
void common_opts_init(common_opts *c);

/* Scans argv (getopt_long: reset optind to rescan) for the tool's own
 * flags (set->take, with `opts`) and the shared ones (into *c): an
 * unknown option or a missing value is a usage error; --help prints
 * set->usage on stdout, --version the tool's version. Returns -1 when the
 * flags are read (optind: the first operand), or the exit status to end
 * with: 0 after --help or --version, 2 after a usage error (message
 * printed), 3 when out of memory. */
int common_flags_scan(const flag_set *set, int argc, char **argv,
                      common_opts *c, void *opts);

/* What the shared flags exclude together (after the tool's own checks):
 * --graph with --backend=cpu, --nccl-min-ctas above --nccl-max-ctas.
 * Returns -1, or the exit status (message printed). */
int common_flags_check(const common_opts *c);

/* The help line of flag `id` (and of those listed with it) as `set`
 * lays it out: the names ("  -b, --backend=NAME", the short name only
 * where the tool takes it) then the text from the tool's column, on the
 * same line where the names leave room. `text`: the tool's own text
 * ('\n' between lines); NULL: the table's. */
void common_flag_help(FILE *f, const flag_set *set, common_flag id,
                      const char *text);

/* The world the shared flags ask for: --backend, --ranks, --timeout and
 * --gpus-per-process (with `procs`, an MPI launch's), tuned with
 * ovl_world_set (`chaos_seed` first, overlap_sim's --chaos, 0 for none;
 * then --comm-priority, --nccl-min-ctas, --nccl-max-ctas, --tf32), with
 * graphs where --graph asks for them. Returns -1, or the exit status
 * (message printed; *world is then NULL). */
int common_make_world(const common_opts *c, ovl_procs *procs,
                      unsigned chaos_seed, ovl_world **world);

#endif /* OVL_COMMON_FLAGS_H */
