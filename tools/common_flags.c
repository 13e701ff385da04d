/*
 * The flags both tools take, in one table, their scan beside a tool's own
 * flags, their help lines, and the world they ask for; see
 * common_flags.h. Not part of libovl.
 */
#include "common_flags.h"

#include <stdlib.h>
#include <string.h>

#include "tool_util.h"

/* getopt_long's code of shared flag `id`: above every tool's own. */
#define CODE_BASE 0x1000

/* ------------------------------------------------------------------ */
/* The value parsers, one per argument kind.                            */
/* ------------------------------------------------------------------ */

/* An int in [lo, hi]. */
static int flag_int(const flag_def *d, const char *arg, void *field) {
  if (parse_int(arg, (long)d->lo, (long)d->hi, field))
    return -1;
  return usage_error("--%s: '%s' is not a number from %ld to %ld", d->name,
                     arg, (long)d->lo, (long)d->hi);
}

/* --ranks: an int in [lo, hi], where hi is the model's most; the message
 * says the real backends' most (common_flags_check refuses more than
 * that without the model). */
static int flag_ranks(const flag_def *d, const char *arg, void *field) {
  if (parse_int(arg, (long)d->lo, (long)d->hi, field))
    return -1;
  return usage_error("--%s: '%s' is not a number from 1 to 64 (the model "
                     "backend: up to %ld)",
                     d->name, arg, (long)d->hi);
}

/* A number in [lo, hi] (finite). */
static int flag_real(const flag_def *d, const char *arg, void *field) {
  if (parse_double(arg, d->lo, d->hi, field))
    return -1;
  return usage_error("--%s: '%s' is not %s", d->name, arg, d->bad);
}

/* The index of `arg` in d->words ('|'-separated), or -1. */
static int word_index(const flag_def *d, const char *arg) {
  size_t n = strlen(arg);
  int k = 0;
  for (const char *w = d->words; w != NULL; k++) {
    const char *bar = strchr(w, '|');
    size_t len = bar != NULL ? (size_t)(bar - w) : strlen(w);
    if (len == n && strncmp(w, arg, n) == 0)
      return k;
    w = bar != NULL ? bar + 1 : NULL;
  }
  return -1;
}

/* One of the words, kept as given (a const char *). */
static int flag_word(const flag_def *d, const char *arg, void *field) {
  char words[128];
  size_t n = 0;
  if (word_index(d, arg) >= 0) {
    *(const char **)field = arg;
    return -1;
  }
  /* "auto|cpu|cuda" -> "auto, cpu, cuda" */
  for (const char *w = d->words; *w != '\0' && n + 3 < sizeof words; w++)
    if (*w == '|') {
      words[n++] = ',';
      words[n++] = ' ';
    } else {
      words[n++] = *w;
    }
  words[n] = '\0';
  return usage_error("--%s: unknown %s '%s' (%s)", d->name, d->bad, arg,
                     words);
}

/* A file's path (not empty), kept as given. */
static int flag_path(const flag_def *d, const char *arg, void *field) {
  if (arg[0] == '\0')
    return usage_error("--%s: an empty path", d->name);
  *(const char **)field = arg;
  return -1;
}

/* One of the words, as its index (an int). */
static int flag_choice(const flag_def *d, const char *arg, void *field) {
  int k = word_index(d, arg);
  if (k < 0)
    return usage_error("--%s: '%s' is not %s", d->name, arg, d->bad);
  *(int *)field = k;
  return -1;
}

/* --gpus-per-process: an int as flag_int (the value escaped in the
 * message), and only under an MPI launcher of a build with MPI. */
static int flag_gpus(const flag_def *d, const char *arg, void *field) {
  char quoted[64];
  if (!parse_int(arg, (long)d->lo, (long)d->hi, field))
    return usage_error("--%s: '%s' is not a number from %ld to %ld",
                       d->name, escape_arg(arg, quoted, sizeof quoted),
                       (long)d->lo, (long)d->hi);
  if (!ovl_mpi_compiled())
    return usage_error("--%s: this build has no MPI (./configure "
                       "--with-mpi)",
                       d->name);
  if (ovl_launcher_rank() < 0)
    return usage_error("--%s: only under an MPI launcher (mpirun -np P %s "
                       "...)",
                       d->name, progname);
  return -1;
}

/* ------------------------------------------------------------------ */
/* The table.                                                           */
/* ------------------------------------------------------------------ */

#define AT(field) offsetof(common_opts, field)

const flag_def common_flags[CF__COUNT] = {
    [CF_BACKEND] = {.name = "backend", .short_name = 'b', .metavar = "NAME",
                    .parse = flag_word, .offset = AT(backend),
                    .words = "auto|cpu|cuda|model",
                    .bad = "backend",
                    .help = "auto (cuda if a GPU is visible, else cpu), cpu, "
                            "cuda,\n"
                            "model (predicted: docs/MODEL.md)"},
    [CF_RANKS] = {.name = "ranks", .short_name = 'r', .metavar = "N",
                  .parse = flag_ranks, .offset = AT(ranks), .lo = 1,
                  .hi = 65536,
                  .help = "ranks (default: cpu 2, cuda every GPU, model "
                          "8)"},
    [CF_GPUS_PER_PROCESS] =
        {.name = "gpus-per-process", .metavar = "G", .parse = flag_gpus,
         .offset = AT(gpus_per_process), .lo = 1, .hi = 64,
         .help = "under mpirun (a build with --with-mpi): the ranks each\n"
                 "process drives, one thread each (default 1; cpu: "
                 "emulated\n"
                 "ranks); ranks = processes x G, process p's from p x G"},
    [CF_ITERS] = {.name = "iters", .short_name = 'n', .metavar = "N",
                  .parse = flag_int, .offset = AT(iters), .lo = 1,
                  .hi = 1000000},
    [CF_WARMUP] = {.name = "warmup", .short_name = 'w', .metavar = "N",
                   .parse = flag_int, .offset = AT(warmup), .lo = 0,
                   .hi = 1000000},
    [CF_TIMEOUT] = {.name = "timeout", .metavar = "SEC", .parse = flag_real,
                    .offset = AT(timeout_s), .lo = 0.001, .hi = 1e6,
                    .bad = "a number of seconds (0.001 to 1e6)",
                    .help = "a collective or stream stuck this long is an "
                            "error\n"
                            "(default 60)"},
    [CF_RTOL] = {.name = "rtol", .metavar = "X", .parse = flag_real,
                 .offset = AT(rtol), .lo = 0, .hi = 1e300,
                 .bad = "a number from 0 to 1e300",
                 .help = "relative tolerance (default by the variable's "
                         "dtype:\n"
                         "float32, float64 1e-5; float16 2e-3; bfloat16 "
                         "1.6e-2)"},
    [CF_ATOL] = {.name = "atol", .metavar = "X", .parse = flag_real,
                 .offset = AT(atol), .lo = 0, .hi = 1e300,
                 .bad = "a number from 0 to 1e300",
                 .help = "absolute tolerance (default by dtype: float32, "
                         "float64\n"
                         "1e-6; float16, bfloat16 1e-5)"},
    [CF_GRAPH] = {.name = "graph", .offset = AT(graph)},
    [CF_COMM_PRIORITY] = {.name = "comm-priority", .metavar = "high|default",
                          .parse = flag_choice,
                          .offset = AT(comm_priority_high),
                          .words = "default|high",
                          .bad = "high or default",
                          .help = "cuda: stream priority of the comm "
                                  "streams"},
    [CF_NCCL_MIN_CTAS] = {.name = "nccl-min-ctas", .metavar = "N",
                          .parse = flag_int, .offset = AT(nccl_min_ctas),
                          .lo = 0, .hi = 64, .with_next = true},
    [CF_NCCL_MAX_CTAS] = {.name = "nccl-max-ctas", .metavar = "N",
                          .parse = flag_int, .offset = AT(nccl_max_ctas),
                          .lo = 0, .hi = 64,
                          .help = "cuda: NCCL's CTA limits (ncclConfig_t); "
                                  "0 = NCCL's choice"},
    [CF_TF32] = {.name = "tf32", .metavar = "on|off", .parse = flag_choice,
                 .offset = AT(tf32), .words = "off|on", .bad = "on or off"},
    [CF_MACHINE] = {.name = "machine", .metavar = "FILE", .parse = flag_path,
                    .offset = AT(machine),
                    .help = "model: the machine (a machine file; default the\n"
                            "built-in h200-8x400g: 8 H200 a node, 400 Gb/s "
                            "IB)"},
    [CF_PROFILE] = {.name = "profile", .metavar = "FILE", .parse = flag_path,
                    .offset = AT(profile),
                    .help = "model: what --calibrate measured (default: "
                            "none,\n"
                            "every kernel estimated from the machine)"},
    [CF_QUIET] = {.name = "quiet", .short_name = 'q', .offset = AT(quiet)},
    [CF_HELP] = {.name = "help", .short_name = 'h',
                 .help = "show this help and exit"},
    [CF_VERSION] = {.name = "version", .short_name = 'V',
                    .help = "show the version and exit"},
};

void common_opts_init(common_opts *c) {
  memset(c, 0, sizeof *c);
  c->backend = "auto";
  c->iters = 8;
  c->warmup = 2;
  c->rtol = OVL_TOL_DTYPE;
  c->atol = OVL_TOL_DTYPE;
}

/* ------------------------------------------------------------------ */
/* The scan.                                                            */
/* ------------------------------------------------------------------ */

/* Whether the tool takes the short name of flag `id`. */
static bool takes_short(const flag_set *set, common_flag id) {
  char s = common_flags[id].short_name;
  return s != 0 && (set->no_short == NULL || strchr(set->no_short, s) == NULL);
}

/* The shared flag of getopt's code c (its long code, or a short name the
 * tool takes), or -1: one of the tool's own. */
static int flag_of_code(const flag_set *set, int c) {
  if (c >= CODE_BASE && c < CODE_BASE + CF__COUNT)
    return c - CODE_BASE;
  for (int id = 0; id < CF__COUNT; id++)
    if (common_flags[id].short_name == c && takes_short(set, id))
      return id;
  return -1;
}

/* getopt_long's options: the tool's own, then the table's. malloc'd;
 * NULL when out of memory. */
static struct option *long_options(const flag_set *set) {
  size_t nown = 0, k;
  struct option *all;
  while (set->own[nown].name != NULL)
    nown++;
  all = calloc(nown + CF__COUNT + 1, sizeof *all);
  if (all == NULL)
    return NULL;
  memcpy(all, set->own, nown * sizeof *all);
  for (k = 0; k < CF__COUNT; k++) {
    all[nown + k].name = common_flags[k].name;
    all[nown + k].has_arg =
        common_flags[k].metavar != NULL ? required_argument : no_argument;
    all[nown + k].val = CODE_BASE + (int)k;
  }
  return all;
}

/* getopt's short options: ':' (a missing value is reported as such), the
 * tool's own, then the table's the tool takes. */
static void short_options(const flag_set *set, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, ":%s", set->own_short);
  for (int id = 0; id < CF__COUNT && n + 3 < len; id++) {
    if (!takes_short(set, id))
      continue;
    buf[n++] = common_flags[id].short_name;
    if (common_flags[id].metavar != NULL)
      buf[n++] = ':';
    buf[n] = '\0';
  }
}

/* Shared flag `id` with its value. */
static int take_common(const flag_set *set, common_flag id, const char *arg,
                       common_opts *c) {
  const flag_def *d = &common_flags[id];
  void *field = (char *)c + d->offset;
  if (id == CF_HELP) {
    set->usage(stdout);
    /* Longer than stdout's buffer: a write error happens in there. */
    flush_output(stdout);
    return 0;
  }
  if (id == CF_VERSION) {
    printf("%s (overlap-sim) %s\n", set->tool, OVL_VERSION_STRING);
    return 0;
  }
  if (d->parse == NULL) {
    *(int *)field = 1;
    return -1;
  }
  return d->parse(d, arg, field);
}

int common_flags_scan(const flag_set *set, int argc, char **argv,
                      common_opts *c, void *opts) {
  struct option *longopts = long_options(set);
  char shortopts[128];
  int code, rc = -1;

  if (longopts == NULL) {
    fprintf(stderr, "%s: out of memory\n", progname);
    return TOOL_EXIT_RUNTIME;
  }
  short_options(set, shortopts, sizeof shortopts);
  opterr = 0;
  while (rc < 0 &&
         (code = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    int id = flag_of_code(set, code);
    if (id >= 0)
      rc = take_common(set, (common_flag)id, optarg, c);
    else if (code == ':')
      rc = usage_error("option '%s' needs a value", argv[optind - 1]);
    else
      rc = set->take(opts, code, optarg);
    if (rc == FLAG_UNKNOWN)
      rc = usage_error("unknown option '%s'", argv[optind - 1]);
  }
  free(longopts);
  return rc;
}

int common_flags_check(const common_opts *c) {
  if (c->ranks > 64 && strcmp(c->backend, "model") != 0)
    return usage_error("--ranks: '%d' is not a number from 1 to 64 (the "
                       "model backend: up to 65536)",
                       c->ranks);
  if ((c->machine != NULL || c->profile != NULL) &&
      strcmp(c->backend, "model") != 0)
    return usage_error("--%s: only with --backend=model (the model's %s; "
                       "--predict=PROFILE sets a prediction beside a real "
                       "run)",
                       c->machine != NULL ? "machine" : "profile",
                       c->machine != NULL ? "machine file" : "profile");
  if (c->graph && strcmp(c->backend, "cpu") == 0)
    return usage_error("--graph: the cpu backend has no graphs (CUDA "
                       "graphs need --backend=cuda or auto with a GPU)");
  if (c->nccl_min_ctas > 0 && c->nccl_max_ctas > 0 &&
      c->nccl_min_ctas > c->nccl_max_ctas)
    return usage_error("--nccl-min-ctas (%d) is larger than --nccl-max-ctas "
                       "(%d)",
                       c->nccl_min_ctas, c->nccl_max_ctas);
  return -1;
}

/* ------------------------------------------------------------------ */
/* --help.                                                              */
/* ------------------------------------------------------------------ */

/* Appends flag id's names to buf (n bytes so far, as snprintf counts):
 * "  -b, --backend=NAME", or "      --backend=NAME" where the tool does
 * not take the short name; after others, ", --nccl-max-ctas=N". Returns
 * the new count. */
static size_t add_names(const flag_set *set, common_flag id, char *buf,
                        size_t len, size_t n) {
  const flag_def *d = &common_flags[id];
  char shortname[8] = "";
  int k;
  if (takes_short(set, id))
    snprintf(shortname, sizeof shortname, "-%c, ", d->short_name);
  /* The first: the short name's column, blank where there is none. */
  if (n == 0 && shortname[0] == '\0')
    snprintf(shortname, sizeof shortname, "    ");
  k = snprintf(buf + n, len - n, "%s%s--%s%s%s", n > 0 ? ", " : "  ",
               shortname, d->name, d->metavar != NULL ? "=" : "",
               d->metavar != NULL ? d->metavar : "");
  n += k > 0 ? (size_t)k : 0;
  return n < len ? n : len - 1;
}

void common_flag_help(FILE *f, const flag_set *set, common_flag id,
                      const char *text) {
  char names[256];
  size_t n = add_names(set, id, names, sizeof names, 0);
  while (common_flags[id].with_next && id + 1 < CF__COUNT)
    n = add_names(set, ++id, names, sizeof names, n);
  if (text == NULL)
    text = common_flags[id].help;
  /* The text beside the names where they leave two blanks before the
   * column, else under them. */
  if (n + 2 <= (size_t)set->column)
    fprintf(f, "%-*s", set->column, names);
  else
    fprintf(f, "%s\n%*s", names, set->column, "");
  for (const char *p = text != NULL ? text : ""; *p != '\0'; p++)
    if (*p == '\n')
      fprintf(f, "\n%*s", set->column, "");
    else
      fputc(*p, f);
  fputc('\n', f);
}

/* ------------------------------------------------------------------ */
/* The world.                                                           */
/* ------------------------------------------------------------------ */

/* The backend tuning, applied to a new world with ovl_world_set: the
 * chaos (overlap_sim's --chaos; 0: none), then --comm-priority=high,
 * --nccl-min-ctas, --nccl-max-ctas (0: not given), --tf32=on. Chaos goes
 * first, so that each backend refuses what it lacks in the order it
 * always did (cuda: the chaos; cpu: the cuda knobs). */
static ovl_status tune_world(ovl_world *world, const common_opts *c,
                             unsigned chaos_seed, ovl_error *err) {
  char v[32];
  ovl_status st = OVL_OK;
  if (chaos_seed != 0) {
    snprintf(v, sizeof v, "%u", chaos_seed);
    st = ovl_world_set(world, "chaos_seed", v, err);
  }
  if (st == OVL_OK && c->comm_priority_high)
    st = ovl_world_set(world, "comm_priority", "high", err);
  if (st == OVL_OK && c->nccl_min_ctas != 0) {
    snprintf(v, sizeof v, "%d", c->nccl_min_ctas);
    st = ovl_world_set(world, "nccl_min_ctas", v, err);
  }
  if (st == OVL_OK && c->nccl_max_ctas != 0) {
    snprintf(v, sizeof v, "%d", c->nccl_max_ctas);
    st = ovl_world_set(world, "nccl_max_ctas", v, err);
  }
  if (st == OVL_OK && c->tf32)
    st = ovl_world_set(world, "tf32", "on", err);
  if (st == OVL_OK && c->machine != NULL)
    st = ovl_world_set(world, "machine", c->machine, err);
  if (st == OVL_OK && c->profile != NULL)
    st = ovl_world_set(world, "profile", c->profile, err);
  return st;
}

int common_make_world(const common_opts *c, ovl_procs *procs,
                      unsigned chaos_seed, ovl_world **world) {
  ovl_world_opts wopts = {.size = sizeof wopts,
                          .backend = c->backend,
                          .nranks = c->ranks,
                          .timeout_s = c->timeout_s,
                          .procs = procs,
                          .local_ranks = c->gpus_per_process};
  ovl_error err = {0};
  ovl_status st = ovl_world_create(&wopts, world, &err);
  int rc = -1;
  if (st == OVL_OK)
    st = tune_world(*world, c, chaos_seed, &err);
  if (st != OVL_OK) {
    /* World creation is agreed: every process has this message. */
    tool_shared_error("%s", err.msg);
    rc = st == OVL_ENODEV || st == OVL_EINVAL ? TOOL_EXIT_USAGE
                                              : TOOL_EXIT_RUNTIME;
  } else if (c->graph && !ovl_world_has_graphs(*world)) {
    rc = usage_error("--graph: the %s backend has no graphs (CUDA graphs "
                     "need the cuda backend: a GPU, or --backend=cuda)",
                     ovl_world_backend_name(*world));
  }
  if (rc >= 0) {
    ovl_world_free(*world);
    *world = NULL;
  }
  return rc;
}
