/*
 * tools/overlap_sim's command line: its options, --help, and the parsing
 * of the flags (no schedule is read, no device touched). Separate from the
 * tool so that tests/fuzz/fuzz_flags.c fuzzes exactly this. Not part of
 * libovl.
 */
#include "sim_flags.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_flags.h"
#include "ovl.h"
#include "tool_util.h"

/* The codes of overlap_sim's own long flags that have no short name. */
enum {
  OPT_SHOW = 256,
  OPT_OP_TIMES,
  OPT_RACES,
  OPT_CHAOS,
  OPT_NO_RACES,
  OPT_JSON,
  OPT_TRACE,
  OPT_SVG,
  OPT_TRACE_ITER,
  OPT_REPLAY,
  OPT_REPLAY_DELAY,
  OPT_TRIALS,
  OPT_CHECK_ROWS,
  OPT_FIX,
  OPT_PREDICT,
  OPT_CALIBRATE
};

/* overlap_sim's own flags; those overlap_sweep takes too are
 * tools/common_flags.c's. */
static const struct option sim_longopts[] = {
    {"mode", required_argument, NULL, 'm'},
    {"trials", required_argument, NULL, OPT_TRIALS},
    {"define", required_argument, NULL, 'D'},
    {"show", required_argument, NULL, OPT_SHOW},
    {"op-times", no_argument, NULL, OPT_OP_TIMES},
    {"races", no_argument, NULL, OPT_RACES},
    {"chaos", required_argument, NULL, OPT_CHAOS},
    {"no-races", no_argument, NULL, OPT_NO_RACES},
    {"replay", optional_argument, NULL, OPT_REPLAY},
    {"replay-delay", required_argument, NULL, OPT_REPLAY_DELAY},
    {"fix", optional_argument, NULL, OPT_FIX},
    {"predict", required_argument, NULL, OPT_PREDICT},
    {"calibrate", required_argument, NULL, OPT_CALIBRATE},
    {"json", optional_argument, NULL, OPT_JSON},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"svg", required_argument, NULL, OPT_SVG},
    {"trace-iter", required_argument, NULL, OPT_TRACE_ITER},
    {"check-rows", required_argument, NULL, OPT_CHECK_ROWS},
    {"verbose", no_argument, NULL, 'v'},
    {NULL, 0, NULL, 0},
};

static int sim_take(void *opts, int c, const char *arg);

/* How overlap_sim takes the shared flags: every short name of the table,
 * help text from column 23. */
static const flag_set sim_flag_set = {.tool = "overlap_sim",
                                      .own = sim_longopts,
                                      .own_short = "m:D:v",
                                      .no_short = "",
                                      .column = 23,
                                      .usage = sim_usage,
                                      .take = sim_take};

void sim_options_init(sim_options *o) {
  memset(o, 0, sizeof *o);
  common_opts_init(&o->common);
  o->mode = "both";
  o->show = -1;
}

void sim_usage(FILE *f) {
  fprintf(f,
          "Usage: %s [OPTION]... [SCHEDULE]\n"
          "Run SCHEDULE (default: the seed benchmark, schedules/seed.sched) "
          "on every rank,\n"
          "one thread per device, in sync and async form; time both and check "
          "every\n"
          "fetched value against a float64 reference. (The default run "
          "shortens the seed's\n"
          "loop from 4 ranks on, -D steps=N, so that its values stay finite: "
          "see\ndocs/OVERLAP_SIM.md, \"The seed at any rank count\".)\n"
          "\n",
          progname);
  common_flag_help(f, &sim_flag_set, CF_BACKEND, NULL);
  common_flag_help(f, &sim_flag_set, CF_RANKS, NULL);
  common_flag_help(f, &sim_flag_set, CF_GPUS_PER_PROCESS, NULL);
  fputs(
      "  -m, --mode=MODE      both (sync and async, default), sync, async, "
      "comp, comm,\n"
      "                       all (sync, async, comp-only, comm-only: adds "
      "the ideal\n"
      "                       speedup and the overlap efficiency)\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_ITERS,
                   "timed iterations (default 8)");
  common_flag_help(f, &sim_flag_set, CF_WARMUP,
                   "untimed iterations before them (default 2; 2 + 8: the\n"
                   "seed's method, 10 runs and the last 8 timed; -n and -w\n"
                   "count as in nccl-tests and overlap_sweep)");
  fputs(
      "      --trials=K       repeat the whole measurement (every mode in "
      "turn) K times\n"
      "                       and print each figure's median, min and max, "
      "and the\n"
      "                       spread of the speedup (default: up to 5, as "
      "many as fit\n"
      "                       in about 10 s; 1: one, as before)\n"
      "  -D, --define=NAME=VALUE\n"
      "                       override a schedule param (repeatable)\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_RTOL, NULL);
  common_flag_help(f, &sim_flag_set, CF_ATOL, NULL);
  fputs(
      "      --show=N         after the run print, per rank and fetched "
      "variable,\n"
      "                       'rank R NAME [d0,d1]: ' and its first N values "
      "(%.9g)\n"
      "                       (values of the async run, or of the only mode "
      "run)\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_TIMEOUT, NULL);
  fputs(
      "      --races          check the schedule for ordering bugs without "
      "running\n"
      "                       anything; exit 4 if any: races (unordered "
      "accesses to a\n"
      "                       variable on a rank) and deadlocks (ranks, "
      "streams and\n"
      "                       host syncs waiting in a cycle) in each form a "
      "run would\n"
      "                       check (sync and async, or those --mode names; "
      "each\n"
      "                       section says its form), and mismatches (ranks "
      "that\n"
      "                       disagree on a collective or a send/recv of a "
      "ring) once\n"
      "      --no-races       skip the checks a run makes before it executes "
      "(a run\n"
      "                       checks the forms of every mode it runs, as "
      "--races does;\n"
      "                       a mismatch or a deadlock stops a run before it "
      "starts)\n"
      "      --replay[=K]     check for races as --races, then replay each "
      "race (or race\n"
      "                       K of each form): one run with the stream of its "
      "first\n"
      "                       access delayed just before it, so that the "
      "second access\n"
      "                       runs first; prints 'FORM race K shown: rank R "
      "VAR[i] got\n"
      "                       X expected Y', or 'not shown' and why; exit 4 "
      "if any race\n"
      "      --replay-delay=US  the replay's delay in microseconds (default: "
      "the\n"
      "                       larger of 20 ms and 4 x a plain run of the "
      "form)\n"
      "      --fix[=FILE]     check as --races, then apply every checked "
      "fix hint (of\n"
      "                       races, mismatches and deadlocks; a wait the "
      "hint makes\n"
      "                       redundant is moved, not duplicated) and write "
      "the fixed\n"
      "                       schedule to FILE, or without FILE print the "
      "change as a\n"
      "                       unified diff on stdout (what was applied goes "
      "to stderr);\n"
      "                       exit 0 when the fixed schedule has no "
      "findings, 4 if any\n"
      "                       are left\n"
      "      --calibrate=FILE  measure what the model backend needs to "
      "predict the\n"
      "                       schedule (its kernels, the host's costs, its "
      "collectives'\n"
      "                       and sends' times by size and beside compute) "
      "on a real\n"
      "                       backend, write it to FILE (a profile: "
      "--backend=model\n"
      "                       --profile=FILE) and run no mode; -n and -w "
      "per measurement\n"
      "      --json=FILE      the results of the run as JSON (docs/JSON.md;\n"
      "                       FILE '-' is stdout, the table then on "
      "stderr);\n"
      "                       with --races, --json[=FILE]: the check reports "
      "as JSON\n"
      "                       (on stdout, or FILE)\n"
      "      --trace=FILE     a Chrome trace of one timed iteration (open it "
      "in\n"
      "                       ui.perfetto.dev or chrome://tracing): per rank "
      "a track\n"
      "                       per stream and the host, a slice per op, arrows "
      "from\n"
      "                       event records to their waits; the accesses of "
      "each race\n"
      "                       found are marked 'race K' (with --replay: one "
      "run per race\n"
      "                       replayed)\n"
      "      --svg=FILE       a picture (SVG) of the same iteration: one lane "
      "per\n"
      "                       (rank, stream), one panel per mode on a common "
      "time axis,\n"
      "                       waits coloured by kind, races outlined and "
      "labelled\n"
      "      --trace-iter=K   the timed iteration --trace and --svg show "
      "(0-based;\n"
      "                       default: the last)\n"
      "      --op-times       time every op on its stream (device timers "
      "around\n"
      "                       each op; off by default: it perturbs what it "
      "measures)\n"
      "                       and print a table per source line, and the "
      "explain line:\n"
      "                       where the traced iteration went (with "
      "--mode=all, its\n"
      "                       contention too)\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_GRAPH,
                   "cuda: capture each rank's iteration once as CUDA graphs "
                   "and\n"
                   "replay them (the host launches a graph, not every op);\n"
                   "host syncs split it into segments, one graph each, and "
                   "a\n"
                   "host sync waits for its whole segment. Every mode,\n"
                   "--op-times, --trace and --svg work; not with --races,\n"
                   "--replay or --chaos");
  fputs(
      "      --chaos=SEED     cpu: seeded random delays before every op on "
      "every stream,\n"
      "                       so that a racy schedule shows wrong numbers "
      "(SEED >= 1;\n"
      "                       --replay is the deterministic way)\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_MACHINE, NULL);
  common_flag_help(f, &sim_flag_set, CF_PROFILE, NULL);
  fputs("      --predict=PROFILE  beside a real run, the model's prediction "
        "with PROFILE\n"
        "                       (and --machine): predicted against measured "
        "for every\n"
        "                       mode, and the error (docs/MODEL.md)\n",
        f);
  common_flag_help(f, &sim_flag_set, CF_COMM_PRIORITY, NULL);
  common_flag_help(f, &sim_flag_set, CF_NCCL_MIN_CTAS, NULL);
  common_flag_help(f, &sim_flag_set, CF_TF32,
                   "cuda: float32 matmul_v2 on TF32 tensor cores (faster, "
                   "~1e-3\n"
                   "off: check with --rtol=1e-2); default off, full float32");
  fputs(
      "      --check-rows=N|all  rows of each matmul_v2 result (and of what "
      "is computed\n"
      "                       from it) the float64 reference computes and the "
      "check\n"
      "                       compares, one per stratum of dim 0 (default 64; "
      "all:\n"
      "                       every row, a full float64 matmul on the host's "
      "CPUs)\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_QUIET,
                   "print only the result line and errors (--races: the\n"
                   "check line; no table, overlap, warning or 'wrote'\n"
                   "lines)");
  fputs(
      "  -v, --verbose        also print every timed iteration\n",
      f);
  common_flag_help(f, &sim_flag_set, CF_HELP, NULL);
  common_flag_help(f, &sim_flag_set, CF_VERSION, NULL);
  fputs(
      "\n"
      "SCHEDULE is a file. A relative name that is not a file from here (and "
      "does not\n"
      "start with ./ or ../) is looked up in each directory of "
      "$OVL_SCHEDULE_PATH\n"
      "(colon-separated), then in the schedules that come with the tool: "
      "those\n"
      "installed in DATADIR/overlap-sim/schedules (DATADIR as configured,\n"
      "/usr/local/share by default), or the source tree's schedules/ when the "
      "tool\n"
      "runs from its build tree. So 'overlap_sim bad/cross_ring.sched' runs "
      "that\n"
      "example from any directory. The default, seed.sched, is found the same "
      "way.\n"
      "\n"
      "Output files (--json, --trace, --svg) are checked before anything "
      "runs. A\n"
      "regular FILE is written whole to a new file beside it (.ovl-XXXXXX), "
      "given\n"
      "FILE's mode and owner, then renamed over FILE. /dev/stdout, "
      "/dev/stderr,\n"
      "/dev/fd/N and /proc/self/fd/N are written in place through that "
      "descriptor\n"
      "(appending where it appends), whatever it leads to; with --json=-, "
      "/dev/stdout\n"
      "is where the report goes (stderr). Anything else that is not a "
      "regular file\n"
      "(/dev/null, a FIFO) is written in place. A symbolic link is followed "
      "to its\n"
      "target. A FILE that is the schedule or another output is refused.\n"
      "\n"
      "After the table come the summary figures, a line 'warning: ...' for "
      "each that\n"
      "is noise (the async speedup's trials spread more than 0.3 of its "
      "median, an\n"
      "iteration under 1 ms, an overlap efficiency outside [0, 1]), and two "
      "verdicts\n"
      "kept apart: 'overlap: async 1.35x sync: faster' (or slower (no gain), "
      "no gain,\n"
      "unclear where the figures are noise; with the ideal speedup and the "
      "overlap\n"
      "efficiency, or the flag that gives them), what the overlap bought, "
      "and\n"
      "'result: PASS' or 'result: FAIL: ...', whether the numbers are right; "
      "on a\n"
      "terminal, a last line 'next: ...' says what to run next. Each output "
      "file\n"
      "written gets a line 'wrote FILE (json|trace|svg|fix)' on stderr.\n"
      "\n"
      "Exit status: 0 ok, 1 numeric mismatch (or a fetched NaN or infinity), "
      "2 usage or\n"
      "schedule error (also an output FILE that is the schedule or another "
      "output),\n"
      "3 runtime error (device, collective timeout, an output file or "
      "standard output\n"
      "not written), 4 races, mismatches or deadlocks found (numbers right, "
      "or nothing\n"
      "ran; --races and --replay: any found). An interrupt (SIGINT) prints\n"
      "'interrupted' and ends the tool as the signal does (130 in the "
      "shell), an output\n"
      "file being written removed, never left half-written; a reader of "
      "stdout that\n"
      "goes away (| head -1) ends it at once, quietly (SIGPIPE, 141).\n",
      f);
}

/* --check-rows=N|all: N from 1 to 2^31 - 1 (*value N), or all (-1).
 * Returns -1, or the exit status of a usage error (message printed). */
static int parse_check_rows(const char *arg, long *value) {
  int n;
  if (strcmp(arg, "all") == 0) {
    *value = -1;
    return -1;
  }
  if (!parse_int(arg, 1, INT_MAX, &n))
    return usage_error("--check-rows: '%s' is not a number from 1 to %d, "
                       "or all",
                       arg, INT_MAX);
  *value = n;
  return -1;
}

/* --replay[=K]: every race, or race K. */
static int parse_replay(const char *arg, long *replay) {
  char quoted[256];
  int k;
  if (arg == NULL) {
    *replay = OVL_REPLAY_ALL;
    return -1;
  }
  if (!parse_int(arg, 1, INT_MAX, &k))
    return usage_error("--replay=%s: not a race number (1, 2, ... as the "
                       "race report numbers them; --replay alone: every "
                       "race)",
                       escape_arg(arg, quoted, sizeof quoted));
  *replay = k;
  return -1;
}

/* -D NAME=VALUE, kept for binding. */
static int add_define(sim_options *o, const char *arg) {
  char quoted[256];
  if (strchr(arg, '=') == NULL || arg[0] == '=')
    return usage_error("-D: '%s' is not NAME=VALUE",
                       escape_arg(arg, quoted, sizeof quoted));
  if (o->ndefines == SIM_MAX_DEFINES)
    return usage_error("-D: more than %d defines", SIM_MAX_DEFINES);
  o->defines[o->ndefines++] = arg;
  return -1;
}

/* --json[=FILE], --trace=FILE, --svg=FILE. */
static int take_output(sim_options *o, int c, const char *arg) {
  if (c == OPT_JSON) {
    if (arg != NULL && arg[0] == '\0')
      return usage_error("--json=: empty file name");
    o->json = arg != NULL ? arg : "-";
    o->json_bare = arg == NULL;
    return -1;
  }
  if (arg[0] == '\0' || strcmp(arg, "-") == 0)
    return usage_error("%s: '%s' is not a file name",
                       c == OPT_TRACE ? "--trace" : "--svg", arg);
  if (c == OPT_TRACE)
    o->trace = arg;
  else
    o->svg = arg;
  return -1;
}

/* One of overlap_sim's own flags (flag_set.take). */
static int sim_take(void *opts, int c, const char *arg) {
  sim_options *o = opts;
  char quoted[256];
  int seed;

  switch (c) {
  case 'm':
    o->mode_given = 1;
    if (strcmp(arg, "both") && strcmp(arg, "all") && strcmp(arg, "sync") &&
        strcmp(arg, "async") && strcmp(arg, "comp") && strcmp(arg, "comm"))
      return usage_error("--mode: unknown mode '%s' (both, all, sync, "
                         "async, comp, comm)",
                         arg);
    o->mode = arg;
    return -1;
  case OPT_TRIALS:
    if (!parse_int(arg, 1, 1000, &o->trials))
      return usage_error("--trials: '%s' is not a number from 1 to 1000",
                         escape_arg(arg, quoted, sizeof quoted));
    return -1;
  case 'D':
    return add_define(o, arg);
  case OPT_SHOW:
    if (!parse_int(arg, 0, INT_MAX, &o->show))
      return usage_error("--show: '%s' is not a number from 0 to %d", arg,
                         INT_MAX);
    return -1;
  case OPT_OP_TIMES:
    o->op_times = 1;
    return -1;
  case OPT_RACES:
    o->races_only = 1;
    return -1;
  case OPT_CHAOS:
    if (!parse_int(arg, 1, INT_MAX, &seed))
      return usage_error("--chaos: '%s' is not a seed from 1 to %d", arg,
                         INT_MAX);
    o->chaos_seed = (unsigned)seed;
    return -1;
  case OPT_NO_RACES:
    o->no_races = 1;
    return -1;
  case OPT_REPLAY:
    return parse_replay(arg, &o->replay);
  case OPT_REPLAY_DELAY:
    if (!parse_double(arg, 1, 1e9, &o->replay_delay_us))
      return usage_error("--replay-delay: '%s' is not a number of "
                         "microseconds (1 to 1e9)",
                         escape_arg(arg, quoted, sizeof quoted));
    return -1;
  case OPT_JSON:
  case OPT_TRACE:
  case OPT_SVG:
    return take_output(o, c, arg);
  case OPT_TRACE_ITER:
    if (!parse_int(arg, 0, 999999, &o->trace_iter))
      return usage_error("--trace-iter: '%s' is not a number from 0 to "
                         "999999",
                         arg);
    o->trace_iter_given = 1;
    return -1;
  case OPT_CHECK_ROWS:
    return parse_check_rows(arg, &o->check_rows);
  case OPT_FIX:
    if (arg != NULL && (arg[0] == '\0' || strcmp(arg, "-") == 0))
      return usage_error("--fix=%s: not a file name (--fix alone prints a "
                         "diff on stdout)",
                         arg);
    o->fix = 1;
    o->fix_file = arg;
    return -1;
  case OPT_PREDICT:
    if (arg[0] == '\0')
      return usage_error("--predict: an empty path");
    o->predict = arg;
    return -1;
  case OPT_CALIBRATE:
    if (arg[0] == '\0' || strcmp(arg, "-") == 0)
      return usage_error("--calibrate=%s: not a file name", arg);
    o->calibrate = arg;
    return -1;
  case 'v':
    o->verbose = 1;
    return -1;
  default:
    return FLAG_UNKNOWN;
  }
}
/* What the flags exclude together, and what one needs of another.
 * Returns -1, or the exit status (message printed). */
static int sim_check_flags(const sim_options *o) {
  const common_opts *c = &o->common;
  int rc;
  if (o->calibrate != NULL && strcmp(c->backend, "model") == 0)
    return usage_error("--calibrate measures on a real backend (cpu, "
                       "cuda): the model backend predicts from the "
                       "profile it writes");
  if (o->calibrate != NULL &&
      (o->races_only || o->no_races || o->replay != 0 || o->fix ||
       o->json != NULL || o->trace != NULL || o->svg != NULL ||
       o->trials > 0 || o->mode_given || o->op_times || o->show >= 0 ||
       o->chaos_seed != 0 || c->graph || o->predict != NULL))
    return usage_error("--calibrate measures and runs no mode: it goes "
                       "with none of --races, --no-races, --replay, --fix, "
                       "--json, --trace, --svg, --trials, --mode, "
                       "--op-times, --show, --chaos, --graph, --predict");
  if (o->races_only && o->no_races)
    return usage_error("--races and --no-races exclude each other");
  if (o->replay != 0 && o->no_races)
    return usage_error("--replay replays the races the check finds: it "
                       "cannot go with --no-races");
  if (o->replay_delay_us > 0 && o->replay == 0)
    return usage_error("--replay-delay needs --replay");
  if (o->replay != 0 && o->chaos_seed != 0)
    return usage_error("--replay is deterministic: --chaos would add "
                       "random delays to it");
  if (o->json_bare && !o->races_only && !o->fix && o->replay == 0)
    return usage_error("--json needs a file for the results of a run "
                       "(--json=FILE, or --json=- for stdout); --json "
                       "alone is for --races and --replay");
  if (o->fix && o->replay != 0)
    return usage_error("--fix checks and fixes: it cannot go with --replay");
  if (o->fix && o->no_races)
    return usage_error("--fix applies the checks' hints: it cannot go with "
                       "--no-races");
  if (o->fix && (o->trace != NULL || o->svg != NULL))
    return usage_error("--fix runs nothing: %s needs a run",
                       o->trace != NULL ? "--trace" : "--svg");
  if (o->fix && o->fix_file == NULL && o->json != NULL &&
      strcmp(o->json, "-") == 0)
    return usage_error("--fix without FILE prints a diff on stdout: "
                       "--json needs a file then (--json=FILE)");
  if (o->races_only && o->replay == 0 &&
      (o->trace != NULL || o->svg != NULL))
    return usage_error("--races runs nothing: %s needs a run",
                       o->trace != NULL ? "--trace" : "--svg");
  if (o->replay != 0 && o->trace_iter_given)
    return usage_error("--replay makes runs of one iteration: --trace and "
                       "--svg show each replay whole (no --trace-iter)");
  if (c->graph && (o->races_only || o->fix) && o->replay == 0)
    return usage_error("%s runs nothing: --graph needs a run",
                       o->fix ? "--fix" : "--races");
  if (c->graph && o->replay != 0)
    return usage_error("--replay makes eager runs of one iteration: it "
                       "cannot go with --graph");
  if (c->graph && o->chaos_seed != 0)
    return usage_error("--graph needs the cuda backend and --chaos the cpu "
                       "backend: they cannot go together");
  if (o->predict != NULL) {
    /* --machine goes with the prediction (the model's machine). */
    common_opts cc = *c;
    if (strcmp(c->backend, "model") == 0)
      return usage_error("--predict=%s sets the model's prediction beside "
                         "a real run: with --backend=model, --profile=%s "
                         "gives the model its profile",
                         o->predict, o->predict);
    if (o->races_only || o->fix || o->replay != 0)
      return usage_error("--predict compares a prediction with a run: %s "
                         "runs nothing timed",
                         o->races_only ? "--races"
                         : o->fix      ? "--fix"
                                       : "--replay");
    if (c->profile != NULL)
      return usage_error("--predict=%s is the model's profile: --profile "
                         "is for --backend=model",
                         o->predict);
    cc.machine = NULL;
    if ((rc = common_flags_check(&cc)) >= 0)
      return rc;
  } else if ((rc = common_flags_check(c)) >= 0) {
    return rc;
  }
  if (o->trials > 0 && (o->races_only || o->replay != 0 || o->fix))
    return usage_error("--trials repeats a run: %s runs nothing timed",
                       o->races_only ? "--races"
                       : o->fix      ? "--fix"
                                     : "--replay");
  if (o->trace_iter_given && o->trace == NULL && o->svg == NULL)
    return usage_error("--trace-iter needs --trace or --svg");
  if (o->trace_iter_given && o->trace_iter >= c->iters)
    return usage_error("--trace-iter: %d: there are %d timed iterations "
                       "(0 to %d)",
                       o->trace_iter, c->iters, c->iters - 1);
  return -1;
}

int sim_parse_flags(int argc, char **argv, sim_options *o) {
  int rc = common_flags_scan(&sim_flag_set, argc, argv, &o->common, o);
  if (rc < 0)
    rc = sim_check_flags(o);
  if (rc >= 0)
    return rc;
  if (optind < argc)
    o->schedule = argv[optind++];
  if (optind < argc)
    return usage_error("one schedule at most (got '%s' too)", argv[optind]);
  return -1;
}

unsigned sim_modes(const sim_options *o) {
  if (strcmp(o->mode, "both") == 0)
    return OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC);
  if (strcmp(o->mode, "all") == 0)
    return OVL_MODE_BIT(OVL_MODE_SYNC) | OVL_MODE_BIT(OVL_MODE_ASYNC) |
           OVL_MODE_BIT(OVL_MODE_COMP) | OVL_MODE_BIT(OVL_MODE_COMM);
  for (int m = 0; m < OVL__MODE_COUNT; m++)
    if (strcmp(o->mode, ovl_mode_name((ovl_mode)m)) == 0)
      return OVL_MODE_BIT((ovl_mode)m);
  return 0;
}

/* The seed at any rank count (docs/OVERLAP_SIM.md, "The seed at any rank
 * count"): each of its allreduces multiplies c by the rank count N, so c
 * ends as 2a * N^steps, and float32 holds 2 * N^64 up to 3 ranks only.
 * The default run
 * (no schedule named) takes the largest steps, at most the seed's 64, with
 * N^steps <= 2^126, so that c < 2^127 stays finite: 64 up to 3 ranks
 * (Paddle's benchmark is 2), 63 at 4, 42 at 8, 21 at 64. Returns that, or
 * 0 where the seed's own 64 holds, -D steps= was given, or the default
 * schedule found (OVL_SCHEDULE_PATH) has no param `steps`. */
static int seed_steps(const sim_options *o, const ovl_schedule *sched,
                      int nranks) {
  double p = 1.0;
  int steps = 0;
  bool has = false;
  /* The model computes nothing: no value to overflow. */
  if (o->schedule != NULL || strcmp(o->common.backend, "model") == 0)
    return 0;
  for (size_t i = 0; i < o->ndefines; i++)
    if (strncmp(o->defines[i], "steps=", 6) == 0)
      return 0;
  for (size_t i = 0; i < ovl_schedule_param_count(sched); i++) {
    const char *name;
    ovl_schedule_param(sched, i, &name, NULL, NULL);
    has = has || strcmp(name, "steps") == 0;
  }
  if (!has)
    return 0;
  while (steps < 64 && p * nranks <= 0x1p126) {
    p *= nranks;
    steps++;
  }
  return steps < 64 ? steps : 0;
}

size_t sim_bind_defines(sim_options *o, const ovl_schedule *sched,
                        int nranks, const char **defs, char *buf,
                        size_t len) {
  size_t n = o->ndefines;
  memcpy(defs, o->defines, n * sizeof *defs);
  o->seed_steps = seed_steps(o, sched, nranks);
  if (o->seed_steps > 0) {
    snprintf(buf, len, "steps=%d", o->seed_steps);
    defs[n++] = buf;
  }
  return n;
}
