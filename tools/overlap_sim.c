/*
 * overlap_sim: run a schedule in sync and async form on every rank, time
 * both, check the numbers against the float64 reference, and say how close
 * the overlap comes to its ideal.
 *
 * Exit codes: 0 ok, 1 numeric mismatch, 2 usage or schedule error (also an
 * output file that is the schedule or another output), 3 runtime error
 * (also an output file or stdout not written), 4 races.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json_str.h"
#include "outfile.h"
#include "ovl.h"
#include "tool_util.h"

#define EXIT_MISMATCH 1
#define EXIT_USAGE 2
#define EXIT_RUNTIME 3
#define EXIT_RACES 4

#ifndef OVL_SRCDIR
#define OVL_SRCDIR "."
#endif
#ifndef OVL_PKGDATADIR
#define OVL_PKGDATADIR "/usr/local/share/overlap-sim"
#endif

#define MAX_DEFINES 64

/* The output files, checked before anything runs (outfile_prepare); an
 * entry whose path is NULL is not wanted (or is --json=-, stdout). */
enum { OUT_JSON, OUT_TRACE, OUT_SVG, N_OUTPUTS };

typedef struct {
  const char *backend;
  int ranks;
  const char *mode;
  int iters, warmup;
  const char *defines[MAX_DEFINES];
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
  unsigned chaos_seed;
  const char *schedule;
} options;


static void usage(FILE *f) {
  fprintf(f,
          "Usage: %s [OPTION]... [SCHEDULE]\n"
          "Run SCHEDULE (default: the seed benchmark, schedules/seed.sched) "
          "on every rank,\n"
          "one thread per device, in sync and async form; time both and "
          "check every\n"
          "fetched value against a float64 reference.\n"
          "\n"
          "  -b, --backend=NAME   auto (cuda if a GPU is visible, else cpu), "
          "cpu, cuda\n"
          "  -r, --ranks=N        ranks (default: cpu 2, cuda every GPU)\n"
          "  -m, --mode=MODE      both (sync and async, default), sync, "
          "async, comp, comm,\n"
          "                       all (sync, async, comp-only, comm-only: "
          "adds the ideal\n"
          "                       speedup and the overlap efficiency)\n"
          "  -n, --iters=N        iterations in all (default 10)\n"
          "  -w, --warmup=N       how many of them run untimed first "
          "(default 2: the\n"
          "                       seed's method, 10 runs and the last 8 "
          "timed)\n"
          "  -D NAME=VALUE        override a schedule param (repeatable)\n"
          "      --rtol=X         relative tolerance (default 1e-5)\n"
          "      --atol=X         absolute tolerance (default 1e-6)\n"
          "      --show=N         after the run print, per rank and fetched "
          "variable,\n"
          "                       'rank R NAME [d0,d1]: ' and its first N "
          "values (%%.9g)\n"
          "                       (values of the async run, or of the only "
          "mode run)\n"
          "      --timeout=SEC    a collective or stream stuck this long is "
          "an error\n"
          "                       (default 60)\n"
          "      --races          check the schedule for ordering bugs "
          "(unordered accesses\n"
          "                       to a variable) without running anything; "
          "exit 4 if any\n"
          "                       (the form checked: async, or those "
          "--mode names)\n"
          "      --no-races       skip the race check a run makes before "
          "it executes\n"
          "      --json=FILE      the results of the run as JSON (stable "
          "keys, see README;\n"
          "                       FILE '-' is stdout, and the table then "
          "goes to stderr);\n"
          "                       with --races, --json[=FILE]: the race "
          "report as JSON\n"
          "                       (on stdout, or FILE)\n"
          "      --trace=FILE     a Chrome trace of one timed iteration "
          "(open it in\n"
          "                       ui.perfetto.dev or chrome://tracing): per "
          "rank a track\n"
          "                       per stream and the host, a slice per op, "
          "arrows from\n"
          "                       event records to their waits\n"
          "      --svg=FILE       a picture (SVG) of the same iteration: one "
          "lane per\n"
          "                       (rank, stream), one panel per mode on a "
          "common time axis\n"
          "      --trace-iter=K   the timed iteration --trace and --svg show "
          "(0-based;\n"
          "                       default: the last)\n"
          "      --op-times       time every op on its stream (device "
          "timers around\n"
          "                       each op; off by default: it perturbs what "
          "it measures)\n"
          "                       and print a table per source line\n"
          "      --chaos=SEED     cpu: seeded random delays before every op "
          "on every stream,\n"
          "                       so that a racy schedule shows wrong "
          "numbers (SEED >= 1)\n"
          "      --comm-priority=high|default\n"
          "                       cuda: stream priority of the comm streams\n"
          "      --nccl-min-ctas=N, --nccl-max-ctas=N\n"
          "                       cuda: NCCL's CTA limits (ncclConfig_t); "
          "0 = NCCL's choice\n"
          "  -q, --quiet          print only the verdict line and errors\n"
          "  -v, --verbose        also print every timed iteration\n"
          "  -h, --help           show this help and exit\n"
          "  -V, --version        show the version and exit\n"
          "\n"
          "Output files (--json, --trace, --svg) are checked before "
          "anything runs. A\n"
          "regular FILE is written whole to FILE.tmp, then renamed over "
          "FILE; anything\n"
          "else (/dev/null, a FIFO) is written in place. A symbolic link "
          "is followed to\n"
          "its target. A FILE that is the schedule or another output is "
          "refused.\n"
          "\n"
          "Exit status: 0 ok, 1 numeric mismatch, 2 usage or schedule "
          "error (also an\n"
          "output FILE that is the schedule or another output), 3 runtime "
          "error (device,\n"
          "collective timeout, an output file or standard output not "
          "written), 4 races\n"
          "found (numbers right).\n",
          progname);
}




/* Returns -1 to go on, or an exit status. */
static int parse_options(int argc, char **argv, options *o) {
  enum {
    OPT_RTOL = 256,
    OPT_ATOL,
    OPT_SHOW,
    OPT_TIMEOUT,
    OPT_OP_TIMES,
    OPT_RACES,
    OPT_CHAOS,
    OPT_NO_RACES,
    OPT_JSON,
    OPT_COMM_PRIORITY,
    OPT_MIN_CTAS,
    OPT_MAX_CTAS,
    OPT_TRACE,
    OPT_SVG,
    OPT_TRACE_ITER
  };
  static const struct option longopts[] = {
      {"backend", required_argument, NULL, 'b'},
      {"ranks", required_argument, NULL, 'r'},
      {"mode", required_argument, NULL, 'm'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, 'w'},
      {"define", required_argument, NULL, 'D'},
      {"rtol", required_argument, NULL, OPT_RTOL},
      {"atol", required_argument, NULL, OPT_ATOL},
      {"show", required_argument, NULL, OPT_SHOW},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"op-times", no_argument, NULL, OPT_OP_TIMES},
      {"races", no_argument, NULL, OPT_RACES},
      {"chaos", required_argument, NULL, OPT_CHAOS},
      {"no-races", no_argument, NULL, OPT_NO_RACES},
      {"json", optional_argument, NULL, OPT_JSON},
      {"trace", required_argument, NULL, OPT_TRACE},
      {"svg", required_argument, NULL, OPT_SVG},
      {"trace-iter", required_argument, NULL, OPT_TRACE_ITER},
      {"comm-priority", required_argument, NULL, OPT_COMM_PRIORITY},
      {"nccl-min-ctas", required_argument, NULL, OPT_MIN_CTAS},
      {"nccl-max-ctas", required_argument, NULL, OPT_MAX_CTAS},
      {"quiet", no_argument, NULL, 'q'},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  int c, rc;
  char quoted[256];

  opterr = 0;
  while ((c = getopt_long(argc, argv, ":b:r:m:n:w:D:qvhV", longopts,
                          NULL)) != -1) {
    switch (c) {
    case 'b':
      if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "cpu") != 0 &&
          strcmp(optarg, "cuda") != 0)
        return usage_error("--backend: unknown backend '%s' (auto, cpu, "
                           "cuda)",
                           optarg);
      o->backend = optarg;
      break;
    case 'r':
      if (!parse_int(optarg, 1, 64, &o->ranks))
        return usage_error("--ranks: '%s' is not a number from 1 to 64",
                           optarg);
      break;
    case 'm':
      o->mode_given = 1;
      if (strcmp(optarg, "both") && strcmp(optarg, "all") &&
          strcmp(optarg, "sync") && strcmp(optarg, "async") &&
          strcmp(optarg, "comp") && strcmp(optarg, "comm"))
        return usage_error("--mode: unknown mode '%s' (both, all, sync, "
                           "async, comp, comm)",
                           optarg);
      o->mode = optarg;
      break;
    case 'n':
      if (!parse_int(optarg, 1, 1000000, &o->iters))
        return usage_error("--iters: '%s' is not a number from 1 to "
                           "1000000",
                           optarg);
      break;
    case 'w':
      if (!parse_int(optarg, 0, 1000000, &o->warmup))
        return usage_error("--warmup: '%s' is not a number from 0 to "
                           "1000000",
                           optarg);
      break;
    case 'D':
      if (strchr(optarg, '=') == NULL || optarg[0] == '=')
        return usage_error("-D: '%s' is not NAME=VALUE",
                           escape_arg(optarg, quoted, sizeof quoted));
      if (o->ndefines == MAX_DEFINES)
        return usage_error("-D: more than %d defines", MAX_DEFINES);
      o->defines[o->ndefines++] = optarg;
      break;
    case OPT_RTOL:
      if (!parse_double(optarg, 0, 1e300, &o->rtol))
        return usage_error("--rtol: '%s' is not a number >= 0", optarg);
      break;
    case OPT_ATOL:
      if (!parse_double(optarg, 0, 1e300, &o->atol))
        return usage_error("--atol: '%s' is not a number >= 0", optarg);
      break;
    case OPT_SHOW:
      if (!parse_int(optarg, 0, INT_MAX, &o->show))
        return usage_error("--show: '%s' is not a number >= 0", optarg);
      break;
    case OPT_TIMEOUT:
      if (!parse_double(optarg, 0.001, 1e6, &o->timeout_s))
        return usage_error("--timeout: '%s' is not a number of seconds "
                           "(0.001 to 1e6)",
                           optarg);
      break;
    case OPT_OP_TIMES:
      o->op_times = 1;
      break;
    case OPT_RACES:
      o->races_only = 1;
      break;
    case OPT_CHAOS: {
      int seed;
      if (!parse_int(optarg, 1, INT_MAX, &seed))
        return usage_error("--chaos: '%s' is not a seed from 1 to %d",
                           optarg, INT_MAX);
      o->chaos_seed = (unsigned)seed;
      break;
    }
    case OPT_NO_RACES:
      o->no_races = 1;
      break;
    case OPT_JSON:
      if (optarg != NULL && optarg[0] == '\0')
        return usage_error("--json=: empty file name");
      o->json = optarg != NULL ? optarg : "-";
      o->json_bare = optarg == NULL;
      break;
    case OPT_TRACE:
    case OPT_SVG:
      if (optarg[0] == '\0' || strcmp(optarg, "-") == 0)
        return usage_error("%s: '%s' is not a file name",
                           c == OPT_TRACE ? "--trace" : "--svg", optarg);
      if (c == OPT_TRACE)
        o->trace = optarg;
      else
        o->svg = optarg;
      break;
    case OPT_TRACE_ITER:
      if (!parse_int(optarg, 0, 999999, &o->trace_iter))
        return usage_error("--trace-iter: '%s' is not a number from 0 to "
                           "999999",
                           optarg);
      o->trace_iter_given = 1;
      break;
    case OPT_COMM_PRIORITY:
      if ((rc = parse_tuning_flag("--comm-priority", optarg,
                                  &o->comm_priority_high)) != 0)
        return rc;
      break;
    case OPT_MIN_CTAS:
      if ((rc = parse_tuning_flag("--nccl-min-ctas", optarg,
                                  &o->nccl_min_ctas)) != 0)
        return rc;
      break;
    case OPT_MAX_CTAS:
      if ((rc = parse_tuning_flag("--nccl-max-ctas", optarg,
                                  &o->nccl_max_ctas)) != 0)
        return rc;
      break;
    case 'q':
      o->quiet = 1;
      break;
    case 'v':
      o->verbose = 1;
      break;
    case 'h':
      usage(stdout);
      return EXIT_SUCCESS;
    case 'V':
      printf("overlap_sim (overlap-sim) %s\n", OVL_VERSION_STRING);
      return EXIT_SUCCESS;
    case ':':
      return usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
      return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (o->races_only && o->no_races)
    return usage_error("--races and --no-races exclude each other");
  if (o->json_bare && !o->races_only)
    return usage_error("--json needs a file for the results of a run "
                       "(--json=FILE, or --json=- for stdout); --json "
                       "alone is for --races");
  if (o->races_only && (o->trace != NULL || o->svg != NULL))
    return usage_error("--races runs nothing: %s needs a run",
                       o->trace != NULL ? "--trace" : "--svg");
  if (o->trace_iter_given && o->trace == NULL && o->svg == NULL)
    return usage_error("--trace-iter needs --trace or --svg");
  if (o->warmup >= o->iters)
    return usage_error("--warmup (%d) must be less than --iters (%d): no "
                       "iteration would be timed",
                       o->warmup, o->iters);
  if (o->trace_iter_given && o->trace_iter >= o->iters - o->warmup)
    return usage_error("--trace-iter: %d: there are %d timed iterations "
                       "(0 to %d)",
                       o->trace_iter, o->iters - o->warmup,
                       o->iters - o->warmup - 1);
  if (optind < argc)
    o->schedule = argv[optind++];
  if (optind < argc)
    return usage_error("one schedule at most (got '%s' too)", argv[optind]);
  return -1;
}

/* The default schedule: from the source tree when run from the build tree,
 * else from where `make install` put it. */
static const char *default_schedule(void) {
  static char path[4096];
  const char *dir = getenv("OVL_SCHEDULE_DIR");
  if (dir != NULL) {
    snprintf(path, sizeof path, "%s/seed.sched", dir);
    return path;
  }
  snprintf(path, sizeof path, "%s/schedules/seed.sched", OVL_SRCDIR);
  if (access(path, R_OK) == 0)
    return path;
  snprintf(path, sizeof path, "%s/schedules/seed.sched", OVL_PKGDATADIR);
  return path;
}

/* ------------------------------------------------------------------ */

typedef struct {
  ovl_mode mode;
  ovl_program *prog; /* the transformed program that ran */
  ovl_races *races;  /* its race report, unless --no-races */
  bool ran;
  bool checked; /* numeric check applies (sync, async) */
  ovl_result *res;
  ovl_check check;
  double total, median, min, max;
} mode_run;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void summarise_times(mode_run *m) {
  int n = ovl_result_iters(m->res);
  const double *t = ovl_result_times(m->res);
  double *s = malloc((size_t)n * sizeof *s);
  m->total = 0;
  for (int i = 0; i < n; i++)
    m->total += t[i];
  if (s == NULL) {
    m->median = m->min = m->max = m->total / n;
    return;
  }
  memcpy(s, t, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  m->min = s[0];
  m->max = s[n - 1];
  m->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
}

static void format_shape(const ovl_var_info *v, char *buf, size_t len) {
  size_t off = 0;
  off += (size_t)snprintf(buf + off, len - off, "[");
  for (int d = 0; d < v->ndim && off < len; d++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? "," : "",
                            (long long)v->dims[d]);
  if (off < len)
    snprintf(buf + off, len - off, "]");
}

static void format_index(const ovl_var_info *v, int64_t flat, char *buf,
                         size_t len) {
  int64_t idx[16];
  size_t off = 0;
  for (int d = v->ndim - 1; d >= 0; d--) {
    idx[d] = flat % v->dims[d];
    flat /= v->dims[d];
  }
  off += (size_t)snprintf(buf + off, len - off, "[");
  for (int d = 0; d < v->ndim && off < len; d++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? "," : "",
                            (long long)idx[d]);
  if (off < len)
    snprintf(buf + off, len - off, "]");
}

/* `per_op`: the host bytes an op costs this run (ovl_host_bytes_per_op). */
static void print_header(const options *o, ovl_world *world,
                         const ovl_program *prog, const char *path,
                         uint64_t per_op) {
  size_t np = ovl_program_param_count(prog);
  bool cpu_default = false;
  uint64_t vars = ovl_program_bytes_per_rank(prog);
  uint64_t ops = mul_sat(ovl_program_op_count(prog), per_op);
  double mb = (double)vars / 1e6;
  char b[32];

  printf("overlap_sim %s: backend %s, %d ranks (%s), schedule %s",
         OVL_VERSION_STRING, ovl_world_backend_name(world),
         ovl_world_nranks(world), ovl_world_devices(world), path);
  for (size_t i = 0; i < np; i++) {
    const char *name, *value, *plain;
    ovl_param_origin origin;
    ovl_program_param(prog, i, &name, &value, &plain, &origin);
    printf("%s %s=%s", i ? "" : ",", name, value);
    if (origin == OVL_PARAM_CPU_DEFAULT) {
      printf("*");
      cpu_default = true;
    }
  }
  printf(", %.1f MB/rank", mb);
  /* Where the ops take more memory than the variables, MB/rank alone would
   * hide what the run costs. */
  if (ops > vars)
    printf(", %zu ops (%s of host memory)", ovl_program_op_count(prog),
           format_bytes(ops, b, sizeof b));
  printf(", %d iterations (%d warmup, %d timed)\n", o->iters, o->warmup,
         o->iters - o->warmup);
  if (cpu_default) {
    printf("  * smaller default for the cpu backend; full size:");
    for (size_t i = 0; i < np; i++) {
      const char *name, *plain;
      ovl_param_origin origin;
      ovl_program_param(prog, i, &name, NULL, &plain, &origin);
      if (origin == OVL_PARAM_CPU_DEFAULT)
        printf(" -D %s=%s", name, plain);
    }
    printf("\n");
  }
}

static void print_mismatches(const ovl_program *prog, const mode_run *m) {
  for (size_t k = 0; k < m->check.nmismatch; k++) {
    const ovl_mismatch *mm = &m->check.mismatch[k];
    ovl_var_info v;
    char idx[128];
    ovl_program_fetch_info(prog, mm->fetch_index, &v);
    format_index(&v, mm->first_index, idx, sizeof idx);
    printf("  %s: rank %d %s: %lld of %lld elements differ; first at %s: "
           "got %.9g, expected %.9g\n",
           ovl_mode_name(m->mode), mm->rank, mm->var, (long long)mm->count,
           (long long)mm->numel, idx, mm->got, mm->expected);
  }
}

static void print_row(const mode_run *m) {
  char check[256];
  if (!m->checked && (m->mode == OVL_MODE_COMP || m->mode == OVL_MODE_COMM))
    snprintf(check, sizeof check, "n/a (%s-only numbers are not checked)",
             ovl_mode_name(m->mode));
  else if (!m->checked)
    snprintf(check, sizeof check, "n/a (nothing fetched)");
  else if (m->check.mismatched == 0)
    snprintf(check, sizeof check, "ok (%lld elements)",
             (long long)m->check.checked);
  else
    snprintf(check, sizeof check, "MISMATCH (%lld of %lld elements)",
             (long long)m->check.mismatched, (long long)m->check.checked);
  if (m->races != NULL) {
    size_t n = strlen(check);
    uint64_t nr = ovl_races_count(m->races) + ovl_races_more(m->races);
    if (nr == 0)
      snprintf(check + n, sizeof check - n, "; no races");
    else
      snprintf(check + n, sizeof check - n, "; RACES: %llu (below)",
               (unsigned long long)nr);
  }
  printf("%-6s %10.4f %12.3f %12.3f %12.3f  %s\n", ovl_mode_name(m->mode),
         m->total, m->median * 1e3, m->min * 1e3, m->max * 1e3, check);
}

static void print_show(const ovl_program *prog, const mode_run *m, int nranks,
                       int n) {
  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
      ovl_var_info v;
      char shape[256];
      const double *vals = ovl_result_fetched(m->res, r, i);
      ovl_program_fetch_info(prog, i, &v);
      format_shape(&v, shape, sizeof shape);
      printf("rank %d %s %s:", r, v.name, shape);
      for (int64_t k = 0; vals != NULL && k < v.numel && k < n; k++)
        printf(" %.9g", vals[k]);
      printf("\n");
    }
  }
}

/* The op times of one run, grouped per (source line, op, stream) in
 * program order: how many ops, and their device time per iteration,
 * averaged over the timed iterations and the ranks. */
typedef struct {
  int line;
  const char *name;
  char stream[32];
  long count;
  double sec_per_iter;
} op_time_group;

/* Returns the number of groups (*out malloc'd), or -1 out of memory. */
static long op_time_groups(const mode_run *m, int nranks,
                           op_time_group **out) {
  const ovl_program *p = m->prog;
  size_t nops = ovl_program_op_count(p);
  int iters = ovl_result_iters(m->res);
  bool *done = calloc(nops ? nops : 1, sizeof *done);
  op_time_group *g = malloc((nops ? nops : 1) * sizeof *g);
  long n = 0;
  if (done == NULL || g == NULL) {
    free(done);
    free(g);
    return -1;
  }
  for (size_t i = 0; i < nops; i++) {
    const char *name, *name2;
    int line, line2, stream, stream2;
    ovl_program_op(p, i, &name, &line, &stream);
    if (done[i] || stream < 0)
      continue;
    g[n].line = line;
    g[n].name = name;
    g[n].count = 0;
    g[n].sec_per_iter = 0;
    for (size_t j = i; j < nops; j++) {
      ovl_program_op(p, j, &name2, &line2, &stream2);
      if (line2 != line || stream2 != stream || strcmp(name, name2) != 0)
        continue;
      done[j] = true;
      g[n].count++;
      for (int r = 0; r < nranks; r++)
        g[n].sec_per_iter += ovl_result_op_times(m->res, r)[j];
    }
    g[n].sec_per_iter /= (double)nranks * iters;
    if (stream == 0)
      snprintf(g[n].stream, sizeof g[n].stream, "calc");
    else
      snprintf(g[n].stream, sizeof g[n].stream, "comm[%d]", stream - 1);
    n++;
  }
  free(done);
  *out = g;
  return n;
}

static void print_op_times(const mode_run *m, int nranks) {
  op_time_group *g;
  long n = op_time_groups(m, nranks, &g);
  for (long k = 0; k < n; k++)
    printf("%-6s %5d  %-18s %-8s %6ld %10.3f %10.1f\n",
           ovl_mode_name(m->mode), g[k].line, g[k].name, g[k].stream,
           g[k].count, g[k].sec_per_iter * 1e3,
           g[k].sec_per_iter * 1e6 / (double)g[k].count);
  if (n >= 0)
    free(g);
}

static mode_run *find_run(mode_run *runs, int nruns, ovl_mode mode) {
  for (int i = 0; i < nruns; i++)
    if (runs[i].mode == mode && runs[i].ran)
      return &runs[i];
  return NULL;
}

static void print_summary(mode_run *runs, int nruns) {
  mode_run *s = find_run(runs, nruns, OVL_MODE_SYNC);
  mode_run *a = find_run(runs, nruns, OVL_MODE_ASYNC);
  mode_run *cp = find_run(runs, nruns, OVL_MODE_COMP);
  mode_run *cm = find_run(runs, nruns, OVL_MODE_COMM);
  if (s != NULL && a != NULL && a->total > 0)
    printf("async speedup: %.3fx (sync %.4f s / async %.4f s)\n",
           s->total / a->total, s->total, a->total);
  if (s != NULL && a != NULL && cp != NULL && cm != NULL) {
    double hi = fmax(cp->total, cm->total), lo = fmin(cp->total, cm->total);
    if (hi > 0)
      printf("ideal speedup: %.3fx (sync / max(comp %.4f s, comm %.4f s))\n",
             s->total / hi, cp->total, cm->total);
    if (lo > 0)
      printf("overlap efficiency: %.3f ((sync - async) / min(comp, comm); "
             "1 = the shorter part fully hidden)\n",
             (s->total - a->total) / lo);
  }
}





/* ------------------------------------------------------------------ */
/* Host memory: what a run (or --races) will hold, checked before anything
 * big is allocated, so that a schedule too big for the machine is refused
 * with a message instead of failing, or swapping, halfway. */

/* What the run does with the program, and what the machine has. */
typedef struct {
  ovl_op_memory_opts ops; /* what each op costs: ovl_host_bytes_per_op */
  uint64_t per_op;        /* host bytes per op */
  uint64_t have;          /* host_memory(); 0 if unknown */
  int nranks;             /* ranks that run; 0 for --races */
  int nmodes;             /* modes checked or run, all kept to the end */
  bool cpu;               /* the variables live in host memory */
} mem_plan;

/* The plan of --races (nranks 0: nothing runs) or of a run on `backend`. */
static void plan_memory(mem_plan *m, const options *o, int nmodes,
                        const char *backend, int nranks) {
  memset(m, 0, sizeof *m);
  m->ops.nmodes = nmodes;
  m->ops.race_check = o->races_only || !o->no_races;
  m->ops.nranks = nranks;
  m->ops.backend = backend;
  m->ops.op_times = o->op_times;
  m->ops.trace = o->trace != NULL || o->svg != NULL;
  m->ops.trace_text = o->trace != NULL;
  m->ops.svg = o->svg != NULL;
  m->per_op = ovl_host_bytes_per_op(&m->ops);
  m->have = host_memory();
  m->nranks = nranks;
  m->nmodes = nmodes;
  m->cpu = backend != NULL && strcmp(backend, "cpu") == 0;
}

/* ovl_parse_opts.max_ops: as many ops as the whole host memory holds at
 * the plan's cost, so that a schedule of far more ops is refused before it
 * is expanded (0: no limit, the memory is unknown). What else the run
 * needs is counted once the program is known (check_host_memory). */
static uint64_t plan_max_ops(const mem_plan *m) {
  uint64_t n;
  if (m->have == 0 || m->per_op == 0)
    return 0;
  n = m->have / m->per_op;
  return n > 0 ? n : 1;
}

/* What the per-op figure covers, for the messages. */
static const char *per_op_parts(const mem_plan *m, char *buf, size_t len) {
  snprintf(buf, len,
           "%d op lists (the schedule's and each mode's)%s%s%s%s%s%s",
           1 + m->nmodes, m->ops.race_check ? ", race check" : "",
           m->nranks > 0 && m->cpu ? ", command queues" : "",
           m->ops.op_times || m->ops.trace ? ", timer marks" : "",
           m->ops.op_times ? ", op times" : "",
           m->ops.trace ? ", spans" : "",
           m->ops.trace_text ? ", trace text"
           : m->ops.svg      ? ", picture"
                             : "");
  return buf;
}

/* "24.1 GB", and where the figure came from when a test set it. */
static const char *machine_memory(const mem_plan *m, char *buf, size_t len) {
  char b[32];
  snprintf(buf, len, "%s%s", format_bytes(m->have, b, sizeof b),
           host_memory_overridden() ? ", from OVL_HOST_MEMORY" : "");
  return buf;
}

/* The load refused the program for its op count (OVL_ENOMEM with max_ops
 * set): the library's message, and where the limit comes from. */
static void report_too_many_ops(const mem_plan *m, const char *msg) {
  char b1[32], b2[64], parts[256];
  fprintf(stderr,
          "%s: %s (%s of host memory an op: %s; this machine has %s). Use "
          "fewer or smaller repeat blocks%s.\n",
          progname, msg, format_bytes(m->per_op, b1, sizeof b1),
          per_op_parts(m, parts, sizeof parts),
          machine_memory(m, b2, sizeof b2),
          m->nranks > 1 ? " or fewer --ranks" : "");
}

/* Load the schedule, refused beyond the ops the plan's memory holds.
 * Returns -1, or the exit status of a failure (message printed). */
static int load_schedule(const char *path, ovl_parse_opts *popts,
                         const mem_plan *m, ovl_program **prog) {
  ovl_error err = {0};
  ovl_status st;
  popts->max_ops = plan_max_ops(m);
  st = ovl_program_load(path, popts, prog, &err);
  if (st == OVL_OK)
    return -1;
  if (st == OVL_ENOMEM && popts->max_ops > 0)
    report_too_many_ops(m, err.msg);
  else
    fprintf(stderr, "%s: %s\n", progname, err.msg);
  return EXIT_USAGE;
}

/* Bytes of every fetched value of one rank as float64: what a result
 * keeps of each mode's run. */
static uint64_t fetched_f64_bytes(const ovl_program *prog) {
  uint64_t total = 0;
  for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, i, &v);
    total = add_sat(total, mul_sat((uint64_t)v.numel, sizeof(double)));
  }
  return total;
}

/* Everything the run holds at once, against the host's memory: per rank,
 * the variables on the cpu backend (its devices are host memory), the
 * float64 reference (8 bytes of every element), and the float64 copy of
 * every fetched value of every mode (the results are kept to the end);
 * and the ops at the plan's cost per op. --races counts the ops only.
 * Returns an exit status, or -1 to go on. */
static int check_host_memory(const ovl_program *prog, const char *path,
                             const mem_plan *m, bool reference) {
  uint64_t dev = m->cpu ? ovl_program_bytes_per_rank(prog) : 0;
  uint64_t ref = reference ? mul_sat(ovl_program_numel_per_rank(prog), 8)
                           : 0;
  uint64_t fetched = fetched_f64_bytes(prog);
  uint64_t per_rank = add_sat(add_sat(dev, ref),
                              mul_sat((uint64_t)m->nmodes, fetched));
  uint64_t nops = ovl_program_op_count(prog);
  uint64_t ops = mul_sat(nops, m->per_op);
  uint64_t need = add_sat(mul_sat(per_rank, (uint64_t)m->nranks), ops);
  char b[5][32], have[64], parts[256];
  if (m->have == 0 || need <= m->have)
    return -1;
  per_op_parts(m, parts, sizeof parts);
  machine_memory(m, have, sizeof have);
  if (m->nranks == 0) {
    fprintf(stderr,
            "%s: %s: needs about %s of host memory (%llu op%s x %s: %s); "
            "this machine has %s. Use fewer or smaller repeat blocks.\n",
            progname, path, format_bytes(need, b[0], sizeof b[0]),
            (unsigned long long)nops, nops == 1 ? "" : "s",
            format_bytes(m->per_op, b[1], sizeof b[1]), parts, have);
    return EXIT_USAGE;
  }
  fprintf(stderr,
          "%s: %s: needs about %s of host memory (%d ranks x (%s of "
          "variables on the %s backend + %s for the float64 reference + "
          "%d mode%s x %s of fetched values as float64) + %llu op%s x %s: "
          "%s); this machine has %s. Use smaller -D sizes, fewer --ranks or "
          "fewer ops.\n",
          progname, path, format_bytes(need, b[0], sizeof b[0]), m->nranks,
          format_bytes(dev, b[1], sizeof b[1]), m->cpu ? "cpu" : "device",
          format_bytes(ref, b[2], sizeof b[2]), m->nmodes,
          m->nmodes == 1 ? "" : "s", format_bytes(fetched, b[3], sizeof b[3]),
          (unsigned long long)nops, nops == 1 ? "" : "s",
          format_bytes(m->per_op, b[4], sizeof b[4]), parts, have);
  return EXIT_USAGE;
}

static int runtime_exit(ovl_status st) {
  return st == OVL_EPARSE || st == OVL_EINVAL ? EXIT_USAGE : EXIT_RUNTIME;
}

/* ------------------------------------------------------------------ */
/* Output files (--json=FILE, --trace, --svg): checked before the run and
 * written after it by tools/outfile.c (a regular file whole to FILE.tmp,
 * then renamed over FILE, so that nobody reads half a file). */

/* --json=-: the real stdout (the human report goes to stderr). */
static FILE *json_stdout;
/* Where the stream stdout writes: stderr with --json=-. */
static const char *stdout_name = "standard output";

/* The output files, each checked (outfile_prepare) before anything runs:
 * a path that cannot be written, or that would overwrite the schedule or
 * another output, ends the tool now rather than after the run. Returns -1
 * to go on, or the exit status (message printed). */
static int prepare_outputs(const options *o, const char *schedule,
                           outfile outs[N_OUTPUTS]) {
  const char *const inputs[] = {schedule};
  const char *flags[N_OUTPUTS] = {"--json", "--trace", "--svg"};
  const char *paths[N_OUTPUTS] = {o->json, o->trace, o->svg};

  for (int i = 0; i < N_OUTPUTS; i++) {
    if (paths[i] == NULL || strcmp(paths[i], "-") == 0)
      continue;
    int rc = outfile_prepare(&outs[i], flags[i], paths[i], inputs, 1, outs,
                             (size_t)i);
    if (rc != 0)
      return rc;
  }
  return -1;
}

static void release_outputs(outfile outs[N_OUTPUTS]) {
  for (int i = 0; i < N_OUTPUTS; i++)
    outfile_release(&outs[i]);
}

/* `text` as the whole of an output: its file, or for --json=- (no file)
 * the real stdout. Returns 0, or -1 with the message printed (it names the
 * flag and the path). */
static int write_output(const outfile *out, const char *text, size_t len) {
  if (out->path != NULL)
    return outfile_write(out, text, len);
  if (fwrite(text, 1, len, json_stdout) != len ||
      fflush(json_stdout) != 0) {
    fprintf(stderr, "%s: --json=-: writing to stdout: %s\n", progname,
            strerror(errno));
    /* Said once: main's close_output() must not report it again. */
    (void)fclose(json_stdout);
    json_stdout = NULL;
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */

/* Race reports of the given modes, printed to `f` as text or JSON;
 * returns the number of races found, or -1 on error (message printed). */
static long report_races(const ovl_program *prog, mode_run *runs, int nruns,
                         bool json, FILE *f) {
  long total = 0;
  bool many = nruns > 1;

  if (json && many)
    fprintf(f, "{\"modes\": {");
  for (int i = 0; i < nruns; i++) {
    ovl_error err = {0};
    char *text = NULL;
    ovl_status st = ovl_races_format(runs[i].races, prog, json,
                                     &text, &err);
    if (st != OVL_OK) {
      fprintf(stderr, "%s: races: %s\n", progname, err.msg);
      return -1;
    }
    if (json && many) {
      size_t n = strlen(text);
      while (n > 0 && text[n - 1] == '\n')
        text[--n] = '\0';
      fprintf(f, "%s\"%s\": ", i ? ", " : "", ovl_mode_name(runs[i].mode));
    }
    else if (many)
      fprintf(f, "== %s ==\n", ovl_mode_name(runs[i].mode));
    fputs(text, f);
    if (json && !many)
      fputc('\n', f);
    free(text);
    total += (long)(ovl_races_count(runs[i].races) +
                    ovl_races_more(runs[i].races));
  }
  if (json && many)
    fprintf(f, "}}\n");
  return total;
}

/* Race-check each mode's form of the program (run->prog, run->races). */
static int check_races(const ovl_program *prog, mode_run *runs, int nruns) {
  for (int i = 0; i < nruns; i++) {
    ovl_error err = {0};
    ovl_status st = ovl_program_transform(prog, runs[i].mode, &runs[i].prog,
                                          &err);
    if (st == OVL_OK)
      st = ovl_race_check(runs[i].prog, &runs[i].races, &err);
    if (st != OVL_OK) {
      fprintf(stderr, "%s: race check (%s): %s\n", progname,
              ovl_mode_name(runs[i].mode), err.msg);
      return runtime_exit(st);
    }
  }
  return -1;
}

/* --races: the reports on stdout, or as JSON to --json=FILE, which is
 * written whole as a run's output files are. Returns the exit status. */
static int races_output(const options *o, const ovl_program *prog,
                        mode_run *runs, int nruns, const outfile *json) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = json->path != NULL ? open_memstream(&text, &len) : stdout;
  long found;

  if (f == NULL) {
    fprintf(stderr, "%s: --json=%s: %s\n", progname, json->path,
            strerror(errno));
    return EXIT_RUNTIME;
  }
  found = report_races(prog, runs, nruns, o->json != NULL, f);
  if (f != stdout) {
    if (fclose(f) != 0 && found >= 0) {
      fprintf(stderr, "%s: --json=%s: out of memory\n", progname,
              json->path);
      found = -1;
    }
    if (found >= 0 && write_output(json, text, len) < 0)
      found = -1;
    free(text);
  }
  return found < 0 ? EXIT_RUNTIME : found > 0 ? EXIT_RACES : EXIT_SUCCESS;
}

/* --races: parse and check, run nothing (no device is touched). */
static int races_only(const options *o, const char *path, mode_run *runs,
                      int nruns, const outfile *json) {
  ovl_parse_opts popts = {.defines = o->defines, .ndefines = o->ndefines,
                          .nranks = o->ranks > 0 ? o->ranks : 2};
  ovl_program *prog = NULL;
  mem_plan mem;
  int rc;

  plan_memory(&mem, o, nruns, NULL, 0);
  if ((rc = load_schedule(path, &popts, &mem, &prog)) >= 0)
    return rc;
  rc = check_host_memory(prog, path, &mem, false);
  if (rc < 0)
    rc = check_races(prog, runs, nruns);
  if (rc < 0)
    rc = races_output(o, prog, runs, nruns, json);
  for (int i = 0; i < nruns; i++) {
    ovl_races_free(runs[i].races);
    ovl_program_free(runs[i].prog);
    runs[i].races = NULL;
    runs[i].prog = NULL;
  }
  ovl_program_free(prog);
  return rc;
}

/* ------------------------------------------------------------------ */

/* A growing string for the JSON results. */
typedef struct {
  char *s;
  size_t len, cap;
  bool fail;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
  va_list ap;
  int n;
  if (b->fail)
    return;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->fail = true;
    return;
  }
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    char *p;
    while (cap < b->len + (size_t)n + 1)
      cap *= 2;
    p = realloc(b->s, cap);
    if (p == NULL) {
      b->fail = true;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* A JSON string, valid UTF-8 whatever the bytes of s (json_str.h: the
 * library's JSON writer uses the same rules). */
static void sb_str(strbuf *b, const char *s) {
  char esc[8];
  size_t n, skip;
  sb_printf(b, "\"");
  do {
    n = ovl__json_span(s, esc, &skip);
    sb_printf(b, "%.*s%s", (int)n, s, esc);
    s += n + skip;
  } while (skip > 0);
  sb_printf(b, "\"");
}

/* A number; JSON has no NaN or infinity: those are "nan", "inf", "-inf". */
static void sb_num(strbuf *b, double v) {
  if (isnan(v))
    sb_printf(b, "\"nan\"");
  else if (isinf(v))
    sb_printf(b, v > 0 ? "\"inf\"" : "\"-inf\"");
  else
    sb_printf(b, "%.17g", v);
}

/* A number, or null when it does not apply (NaN). */
static void sb_num_or_null(strbuf *b, double v) {
  if (isnan(v))
    sb_printf(b, "null");
  else
    sb_num(b, v);
}

/* The lines print_summary prints, as numbers (NaN: not computed). */
static void summary_numbers(mode_run *runs, int nruns, double *speedup,
                            double *ideal, double *efficiency) {
  mode_run *s = find_run(runs, nruns, OVL_MODE_SYNC);
  mode_run *a = find_run(runs, nruns, OVL_MODE_ASYNC);
  mode_run *cp = find_run(runs, nruns, OVL_MODE_COMP);
  mode_run *cm = find_run(runs, nruns, OVL_MODE_COMM);
  *speedup = *ideal = *efficiency = NAN;
  if (s != NULL && a != NULL && a->total > 0)
    *speedup = s->total / a->total;
  if (s != NULL && a != NULL && cp != NULL && cm != NULL) {
    double hi = fmax(cp->total, cm->total), lo = fmin(cp->total, cm->total);
    if (hi > 0)
      *ideal = s->total / hi;
    if (lo > 0)
      *efficiency = (s->total - a->total) / lo;
  }
}

static void json_check(strbuf *b, const ovl_program *prog,
                       const mode_run *m, int nranks) {
  sb_printf(b, "\"check\": {");
  if (!m->checked) {
    sb_printf(b, "\"status\": \"n/a\", \"reason\": ");
    if (m->mode == OVL_MODE_COMP || m->mode == OVL_MODE_COMM)
      sb_printf(b, "\"%s-only numbers are not checked\"",
                ovl_mode_name(m->mode));
    else
      sb_printf(b, "\"nothing fetched\"");
    sb_printf(b, ", \"checked\": 0, \"mismatched\": 0, \"vars\": []}");
    return;
  }
  sb_printf(b, "\"status\": \"%s\", \"checked\": %lld, "
               "\"mismatched\": %lld, \"vars\": [",
            m->check.mismatched == 0 ? "ok" : "mismatch",
            (long long)m->check.checked, (long long)m->check.mismatched);
  for (int r = 0; r < nranks; r++) {
    for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
      const ovl_mismatch *mm = NULL;
      ovl_var_info v;
      ovl_program_fetch_info(prog, i, &v);
      for (size_t k = 0; k < m->check.nmismatch; k++)
        if (m->check.mismatch[k].rank == r &&
            m->check.mismatch[k].fetch_index == i)
          mm = &m->check.mismatch[k];
      sb_printf(b, "%s\n        {\"rank\": %d, \"var\": ",
                r == 0 && i == 0 ? "" : ",", r);
      sb_str(b, v.name);
      sb_printf(b, ", \"checked\": %lld, \"mismatched\": %lld, "
                   "\"fetched\": %s, ",
                (long long)v.numel, (long long)(mm ? mm->count : 0),
                ovl_result_fetched(m->res, r, i) != NULL ? "true" : "false");
      if (mm == NULL) {
        sb_printf(b, "\"first_index\": null, \"first_at\": null, "
                     "\"got\": null, \"expected\": null}");
      } else {
        char idx[128];
        format_index(&v, mm->first_index, idx, sizeof idx);
        sb_printf(b, "\"first_index\": %lld, \"first_at\": ",
                  (long long)mm->first_index);
        sb_str(b, idx);
        sb_printf(b, ", \"got\": ");
        sb_num(b, mm->got);
        sb_printf(b, ", \"expected\": ");
        sb_num(b, mm->expected);
        sb_printf(b, "}");
      }
    }
  }
  sb_printf(b, "]}");
}

/* The --op-times table of one mode: per (source line, op, stream). */
static void json_op_times(strbuf *b, const mode_run *m, int nranks) {
  op_time_group *g;
  long n = op_time_groups(m, nranks, &g);
  if (n < 0) {
    b->fail = true;
    return;
  }
  sb_printf(b, "\"op_times\": [");
  for (long k = 0; k < n; k++)
    sb_printf(b, "%s\n        {\"line\": %d, \"op\": \"%s\", \"stream\": "
                 "\"%s\", \"count\": %ld, \"ms_per_iter\": %.9g, "
                 "\"us_per_op\": %.9g}",
              k ? "," : "", g[k].line, g[k].name, g[k].stream, g[k].count,
              g[k].sec_per_iter * 1e3,
              g[k].sec_per_iter * 1e6 / (double)g[k].count);
  sb_printf(b, "]");
  free(g);
}

/* The results of a run as JSON (README, "JSON results"). */
static char *results_json(const options *o, ovl_world *world,
                          const ovl_program *prog, const char *path,
                          mode_run *runs, int nruns, const char *result,
                          int exit_status, size_t *len) {
  strbuf b = {0};
  ovl_world_info info;
  int nranks = ovl_world_nranks(world);
  double speedup, ideal, eff;

  ovl_world_info_get(world, &info);
  sb_printf(&b, "{\n  \"tool\": \"overlap_sim\",\n  \"version\": \"%s\",\n",
            OVL_VERSION_STRING);
  sb_printf(&b, "  \"schedule\": {\"path\": ");
  sb_str(&b, path);
  sb_printf(&b, ", \"params\": {");
  for (size_t i = 0; i < ovl_program_param_count(prog); i++) {
    const char *name, *value;
    ovl_program_param(prog, i, &name, &value, NULL, NULL);
    sb_printf(&b, "%s", i ? ", " : "");
    sb_str(&b, name);
    sb_printf(&b, ": ");
    sb_str(&b, value);
  }
  sb_printf(&b, "}, \"ops\": %zu, \"fetched\": [",
            ovl_program_op_count(prog));
  for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, i, &v);
    sb_printf(&b, "%s", i ? ", " : "");
    sb_str(&b, v.name);
  }
  sb_printf(&b, "], \"bytes_per_rank\": %llu},\n",
            (unsigned long long)ovl_program_bytes_per_rank(prog));
  sb_printf(&b, "  \"machine\": {\"backend\": \"%s\", \"ranks\": %d, "
                "\"devices\": [",
            ovl_world_backend_name(world), nranks);
  for (int r = 0; r < nranks; r++) {
    sb_printf(&b, "%s", r ? ", " : "");
    sb_str(&b, ovl_world_device_name(world, r));
  }
  sb_printf(&b, "], \"device_summary\": ");
  sb_str(&b, ovl_world_devices(world));
  sb_printf(&b, ", \"hostname\": ");
  sb_str(&b, info.hostname);
  sb_printf(&b, ", \"cpu_model\": ");
  sb_str(&b, info.cpu_model);
  sb_printf(&b, ", \"driver_version\": ");
  sb_str(&b, info.driver_version);
  sb_printf(&b, ", \"cuda_runtime_version\": ");
  sb_str(&b, info.runtime_version);
  sb_printf(&b, ", \"nccl_version\": ");
  sb_str(&b, info.nccl_version);
  sb_printf(&b, "},\n");
  sb_printf(&b, "  \"options\": {\"mode\": \"%s\", \"iters\": %d, "
                "\"warmup\": %d, \"timed\": %d, \"rtol\": %.17g, "
                "\"atol\": %.17g, \"timeout_s\": %.17g, \"races\": %s, "
                "\"op_times\": %s, \"chaos_seed\": %u, \"comm_priority\": "
                "\"%s\", \"nccl_min_ctas\": %d, \"nccl_max_ctas\": %d, "
                "\"trace\": ",
            o->mode, o->iters, o->warmup, o->iters - o->warmup, o->rtol,
            o->atol, o->timeout_s > 0 ? o->timeout_s : 60.0,
            o->no_races ? "false" : "true", o->op_times ? "true" : "false",
            o->chaos_seed, o->comm_priority_high ? "high" : "default",
            o->nccl_min_ctas, o->nccl_max_ctas);
  if (o->trace != NULL)
    sb_str(&b, o->trace);
  else
    sb_printf(&b, "null");
  sb_printf(&b, ", \"svg\": ");
  if (o->svg != NULL)
    sb_str(&b, o->svg);
  else
    sb_printf(&b, "null");
  sb_printf(&b, ", \"trace_iter\": ");
  if (o->trace != NULL || o->svg != NULL)
    sb_printf(&b, "%d", o->trace_iter_given ? o->trace_iter
                                            : o->iters - o->warmup - 1);
  else
    sb_printf(&b, "null");
  sb_printf(&b, ", \"defines\": [");
  for (size_t i = 0; i < o->ndefines; i++) {
    sb_printf(&b, "%s", i ? ", " : "");
    sb_str(&b, o->defines[i]);
  }
  sb_printf(&b, "]},\n  \"modes\": {");
  for (int i = 0; i < nruns; i++) {
    mode_run *m = &runs[i];
    int n = ovl_result_iters(m->res);
    const double *t = ovl_result_times(m->res);
    sb_printf(&b, "%s\n    \"%s\": {\"total_s\": %.9g, \"median_s\": %.9g, "
                  "\"min_s\": %.9g, \"max_s\": %.9g, \"iter_s\": [",
              i ? "," : "", ovl_mode_name(m->mode), m->total, m->median,
              m->min, m->max);
    for (int k = 0; k < n; k++)
      sb_printf(&b, "%s%.9g", k ? ", " : "", t[k]);
    sb_printf(&b, "],\n      ");
    json_check(&b, prog, m, nranks);
    sb_printf(&b, ",\n      \"races\": ");
    if (m->races == NULL) {
      sb_printf(&b, "null");
    } else {
      ovl_error err = {0};
      char *text = NULL;
      if (ovl_races_format(m->races, m->prog, 1, &text, &err) != OVL_OK) {
        b.fail = true;
      } else {
        size_t l = strlen(text);
        while (l > 0 && text[l - 1] == '\n')
          text[--l] = '\0';
        sb_printf(&b, "%s", text);
      }
      free(text);
    }
    if (o->op_times) {
      sb_printf(&b, ",\n      ");
      json_op_times(&b, m, nranks);
    }
    sb_printf(&b, "}");
  }
  summary_numbers(runs, nruns, &speedup, &ideal, &eff);
  sb_printf(&b, "\n  },\n  \"speedup\": ");
  sb_num_or_null(&b, speedup);
  sb_printf(&b, ",\n  \"ideal_speedup\": ");
  sb_num_or_null(&b, ideal);
  sb_printf(&b, ",\n  \"overlap_efficiency\": ");
  sb_num_or_null(&b, eff);
  sb_printf(&b, ",\n  \"result\": ");
  sb_str(&b, result);
  sb_printf(&b, ",\n  \"exit_status\": %d\n}\n", exit_status);
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  *len = b.len;
  return b.s;
}

/* --trace, --svg and --json=FILE after a run. Returns -1, or EXIT_RUNTIME
 * with the message printed. */
static int write_run_outputs(const options *o,
                             const outfile outs[N_OUTPUTS], ovl_world *world,
                             const ovl_program *prog, const char *path,
                             mode_run *runs, int nruns, const char *result,
                             int exit_status) {
  ovl_timeline_run tl[4];
  size_t ntl = 0;
  char *text = NULL;
  size_t len = 0;
  ovl_error err = {0};

  for (int i = 0; i < nruns; i++) {
    if (!runs[i].ran)
      continue;
    tl[ntl].mode = runs[i].mode;
    tl[ntl].prog = runs[i].prog;
    tl[ntl].res = runs[i].res;
    ntl++;
  }
  if (o->trace != NULL) {
    if (ovl_timeline_trace(tl, ntl, &text, &len, &err) != OVL_OK) {
      fprintf(stderr, "%s: --trace=%s: %s\n", progname, o->trace, err.msg);
      return EXIT_RUNTIME;
    }
    int w = write_output(&outs[OUT_TRACE], text, len);
    free(text);
    if (w < 0)
      return EXIT_RUNTIME;
  }
  if (o->svg != NULL) {
    if (ovl_timeline_svg(tl, ntl, &text, &len, &err) != OVL_OK) {
      fprintf(stderr, "%s: --svg=%s: %s\n", progname, o->svg, err.msg);
      return EXIT_RUNTIME;
    }
    int w = write_output(&outs[OUT_SVG], text, len);
    free(text);
    if (w < 0)
      return EXIT_RUNTIME;
  }
  if (o->json != NULL) {
    text = results_json(o, world, prog, path, runs, nruns, result,
                        exit_status, &len);
    if (text == NULL) {
      fprintf(stderr, "%s: --json=%s: out of memory\n", progname, o->json);
      return EXIT_RUNTIME;
    }
    int w = write_output(&outs[OUT_JSON], text, len);
    free(text);
    if (w < 0)
      return EXIT_RUNTIME;
  }
  return -1;
}

/* The tool; main() adds the check of what went to stdout. */
static int overlap_sim(int argc, char **argv) {
  options o = {.backend = "auto", .mode = "both", .iters = 10, .warmup = 2,
               .rtol = 1e-5, .atol = 1e-6, .show = -1};
  ovl_world_opts wopts = {0};
  ovl_parse_opts popts = {0};
  mem_plan mem;
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_reference *ref = NULL;
  ovl_error err = {0};
  mode_run runs[4];
  outfile outs[N_OUTPUTS];
  int nruns = 0, rc;
  const char *path;
  ovl_status st;
  bool mismatch = false;
  uint64_t races = 0;

  if (argc > 0 && argv[0] != NULL) {
    const char *slash = strrchr(argv[0], '/');
    progname = slash ? slash + 1 : argv[0];
  }
  rc = parse_options(argc, argv, &o);
  if (rc >= 0)
    return rc;
  path = o.schedule != NULL ? o.schedule : default_schedule();
  memset(runs, 0, sizeof runs);
  memset(outs, 0, sizeof outs);
  rc = prepare_outputs(&o, path, outs);
  if (rc >= 0)
    goto out;

  /* Modes, in the order they run. --races alone checks the schedule as
   * written (async) unless --mode names the forms. */
  if (o.races_only && !o.mode_given) {
    runs[nruns++].mode = OVL_MODE_ASYNC;
  } else if (strcmp(o.mode, "both") == 0 || strcmp(o.mode, "all") == 0) {
    runs[nruns++].mode = OVL_MODE_SYNC;
    runs[nruns++].mode = OVL_MODE_ASYNC;
    if (strcmp(o.mode, "all") == 0) {
      runs[nruns++].mode = OVL_MODE_COMP;
      runs[nruns++].mode = OVL_MODE_COMM;
    }
  } else {
    for (int m = 0; m < OVL__MODE_COUNT; m++)
      if (strcmp(o.mode, ovl_mode_name((ovl_mode)m)) == 0)
        runs[nruns++].mode = (ovl_mode)m;
  }

  if (o.races_only) {
    rc = races_only(&o, path, runs, nruns, &outs[OUT_JSON]);
    goto out;
  }

  /* --json=-: the JSON alone on stdout; what the tool prints goes to
   * stderr. */
  if (o.json != NULL && strcmp(o.json, "-") == 0) {
    int fd = dup(STDOUT_FILENO);
    if (fd >= 0)
      (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (fd < 0 || (json_stdout = fdopen(fd, "w")) == NULL ||
        dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      fprintf(stderr, "%s: --json=-: %s\n", progname, strerror(errno));
      rc = EXIT_RUNTIME;
      goto out;
    }
    stdout_name = "standard error (the report, with --json=-)";
  }

  wopts.backend = o.backend;
  wopts.nranks = o.ranks;
  wopts.timeout_s = o.timeout_s;
  st = ovl_world_create(&wopts, &world, &err);
  if (st == OVL_OK)
    st = tool_tune_world(world, o.chaos_seed, o.comm_priority_high,
                         o.nccl_min_ctas, o.nccl_max_ctas, &err);
  if (st != OVL_OK) {
    fprintf(stderr, "%s: %s\n", progname, err.msg);
    rc = st == OVL_ENODEV || st == OVL_EINVAL ? EXIT_USAGE : EXIT_RUNTIME;
    goto out;
  }

  plan_memory(&mem, &o, nruns, ovl_world_backend_name(world),
              ovl_world_nranks(world));
  popts.defines = o.defines;
  popts.ndefines = o.ndefines;
  popts.nranks = ovl_world_nranks(world);
  popts.cpu_defaults = strcmp(ovl_world_backend_name(world), "cpu") == 0;
  if ((rc = load_schedule(path, &popts, &mem, &prog)) >= 0)
    goto out;
  {
    bool reference = false;
    for (int i = 0; i < nruns; i++)
      if (runs[i].mode == OVL_MODE_SYNC || runs[i].mode == OVL_MODE_ASYNC)
        reference = ovl_program_fetch_count(prog) > 0;
    rc = check_host_memory(prog, path, &mem, reference);
    if (rc >= 0)
      goto out;
  }
  if (!o.no_races) {
    rc = check_races(prog, runs, nruns);
    if (rc >= 0)
      goto out;
  }
  if (!o.quiet)
    print_header(&o, world, prog, path, mem.per_op);

  for (int i = 0; i < nruns; i++) {
    mode_run *m = &runs[i];
    /* Nothing fetched, nothing to check: skip the reference too (a sweep
     * of a 1 GiB collective need not interpret it in float64). */
    m->checked = (m->mode == OVL_MODE_SYNC || m->mode == OVL_MODE_ASYNC) &&
                 ovl_program_fetch_count(prog) > 0;
    if (m->checked && ref == NULL) {
      st = ovl_reference_compute(prog, ovl_world_nranks(world), &ref, &err);
      if (st != OVL_OK) {
        fprintf(stderr, "%s: reference: %s\n", progname, err.msg);
        rc = runtime_exit(st);
        goto out;
      }
    }
  }

  if (!o.quiet)
    printf("%-6s %10s %12s %12s %12s  %s\n", "mode", "total(s)",
           "median(ms)", "min(ms)", "max(ms)", "check");
  for (int i = 0; i < nruns; i++) {
    mode_run *m = &runs[i];
    ovl_run_opts ropts = {.iters = o.iters - o.warmup, .warmup = o.warmup,
                          .op_times = o.op_times,
                          .trace = o.trace != NULL || o.svg != NULL,
                          .trace_iter = o.trace_iter_given ? o.trace_iter
                                                           : -1};

    st = m->prog != NULL ? OVL_OK
                         : ovl_program_transform(prog, m->mode, &m->prog,
                                                 &err);
    if (st == OVL_OK)
      st = ovl_world_run(world, m->prog, &ropts, &m->res, &err);
    if (st != OVL_OK) {
      flush_output(stdout);
      fprintf(stderr, "%s: %s run failed: %s\n", progname,
              ovl_mode_name(m->mode), err.msg);
      rc = runtime_exit(st);
      goto out;
    }
    m->ran = true;
    summarise_times(m);
    if (m->checked) {
      st = ovl_check_result(prog, m->res, ref, o.rtol, o.atol, &m->check,
                            &err);
      if (st != OVL_OK) {
        fprintf(stderr, "%s: check: %s\n", progname, err.msg);
        rc = runtime_exit(st);
        goto out;
      }
      if (m->check.mismatched > 0)
        mismatch = true;
    }
    if (!o.quiet) {
      print_row(m);
      if (o.verbose) {
        const double *t = ovl_result_times(m->res);
        printf("       iterations (ms):");
        for (int k = 0; k < ovl_result_iters(m->res); k++)
          printf(" %.3f", t[k] * 1e3);
        printf("\n");
      }
      flush_output(stdout);
    }
  }
  if (!o.quiet && o.op_times) {
    printf("op times (device clock, per iteration, mean over %d timed "
           "iterations and %d ranks):\n",
           o.iters - o.warmup, ovl_world_nranks(world));
    printf("%-6s %5s  %-18s %-8s %6s %10s %10s\n", "mode", "line", "op",
           "stream", "count", "ms/iter", "us/op");
    for (int i = 0; i < nruns; i++)
      print_op_times(&runs[i], ovl_world_nranks(world));
  }
  if (!o.quiet) {
    print_summary(runs, nruns);
    for (int i = 0; i < nruns; i++)
      print_mismatches(prog, &runs[i]);
  }
  for (int i = 0; i < nruns && !o.no_races; i++)
    races += ovl_races_count(runs[i].races) + ovl_races_more(runs[i].races);
  if (races > 0 && !o.quiet) {
    mode_run racy[4];
    int n = 0;
    for (int i = 0; i < nruns; i++)
      if (ovl_races_count(runs[i].races) + ovl_races_more(runs[i].races))
        racy[n++] = runs[i];
    if (report_races(prog, racy, n, false, stdout) < 0) {
      rc = EXIT_RUNTIME;
      goto out;
    }
  }
  if (o.show >= 0) {
    mode_run *m = find_run(runs, nruns, OVL_MODE_ASYNC);
    print_show(prog, m != NULL ? m : &runs[0], ovl_world_nranks(world),
               o.show);
  }
  rc = write_run_outputs(&o, outs, world, prog, path, runs, nruns,
                         mismatch      ? "FAIL: numeric mismatch"
                         : races > 0   ? "FAIL: races"
                                       : "PASS",
                         mismatch      ? EXIT_MISMATCH
                         : races > 0   ? EXIT_RACES
                                       : EXIT_SUCCESS);
  if (rc >= 0)
    goto out;
  if (mismatch) {
    printf("result: FAIL: numeric mismatch (tolerance |got-ref| <= %g + %g "
           "* |ref|)%s\n",
           o.atol, o.rtol, races > 0 ? ", and races" : "");
    rc = EXIT_MISMATCH;
  } else if (races > 0) {
    printf("result: FAIL: %llu race%s (the numbers matched this time)\n",
           (unsigned long long)races, races == 1 ? "" : "s");
    rc = EXIT_RACES;
  } else {
    printf("result: PASS\n");
    rc = EXIT_SUCCESS;
  }

out:
  for (int i = 0; i < nruns; i++) {
    ovl_result_free(runs[i].res);
    ovl_program_free(runs[i].prog);
    ovl_races_free(runs[i].races);
    ovl_check_release(&runs[i].check);
  }
  ovl_reference_free(ref);
  ovl_program_free(prog);
  ovl_world_free(world);
  release_outputs(outs);
  return rc;
}

int main(int argc, char **argv) {
  int rc = overlap_sim(argc, argv);
  /* Every way out, --help and --races included: what went to stdout must
   * have arrived (a full disk, a closed pipe), or the exit says so. */
  if (json_stdout != NULL)
    rc = close_output(json_stdout, "standard output (--json=-)", rc);
  return close_output(stdout, stdout_name, rc);
}
