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

#include "ovl.h"
#include "tool_util.h"

void sim_options_init(sim_options *o) {
  memset(o, 0, sizeof *o);
  o->backend = "auto";
  o->mode = "both";
  o->iters = 8;
  o->warmup = 2;
  o->rtol = OVL_TOL_DTYPE;
  o->atol = OVL_TOL_DTYPE;
  o->show = -1;
}

void sim_usage(FILE *f) {
  fprintf(f,
          "Usage: %s [OPTION]... [SCHEDULE]\n"
          "Run SCHEDULE (default: the seed benchmark, schedules/seed.sched) "
          "on every rank,\n"
          "one thread per device, in sync and async form; time both and "
          "check every\n"
          "fetched value against a float64 reference. (The default run "
          "shortens the seed's\n"
          "loop from 4 ranks on, -D steps=N, so that its values stay "
          "finite: see README.)\n"
          "\n"
          "  -b, --backend=NAME   auto (cuda if a GPU is visible, else cpu), "
          "cpu, cuda\n"
          "  -r, --ranks=N        ranks (default: cpu 2, cuda every GPU)\n"
          "      --gpus-per-process=G\n"
          "                       under mpirun (a build with --with-mpi): "
          "the ranks each\n"
          "                       process drives, one thread each (default "
          "1; cpu: emulated\n"
          "                       ranks); ranks = processes x G, process p's "
          "from p x G\n"
          "  -m, --mode=MODE      both (sync and async, default), sync, "
          "async, comp, comm,\n"
          "                       all (sync, async, comp-only, comm-only: "
          "adds the ideal\n"
          "                       speedup and the overlap efficiency)\n"
          "  -n, --iters=N        timed iterations (default 8)\n"
          "  -w, --warmup=N       untimed iterations before them (default "
          "2; 2 + 8: the\n"
          "                       seed's method, 10 runs and the last 8 "
          "timed; -n and -w\n"
          "                       count as in nccl-tests and "
          "overlap_sweep)\n"
          "      --trials=K       repeat the whole measurement (every mode "
          "in turn) K times\n"
          "                       and print each figure's median, min and "
          "max, and the\n"
          "                       spread of the speedup (default: up to 5, "
          "as many as fit\n"
          "                       in about 10 s; 1: one, as before)\n"
          "  -D, --define=NAME=VALUE\n"
          "                       override a schedule param (repeatable)\n"
          "      --rtol=X         relative tolerance (default by the "
          "variable's dtype:\n"
          "                       float32, float64 1e-5; float16 2e-3; "
          "bfloat16 1.6e-2)\n"
          "      --atol=X         absolute tolerance (default by dtype: "
          "float32, float64\n"
          "                       1e-6; float16, bfloat16 1e-5)\n"
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
          "without running\n"
          "                       anything; exit 4 if any: races "
          "(unordered accesses to a\n"
          "                       variable on a rank) and deadlocks "
          "(ranks, streams and\n"
          "                       host syncs waiting in a cycle) in each "
          "form a run would\n"
          "                       check (sync and async, or those --mode "
          "names; each\n"
          "                       section says its form), and mismatches "
          "(ranks that\n"
          "                       disagree on a collective or a send/recv "
          "of a ring) once\n"
          "      --no-races       skip the checks a run makes before it "
          "executes (a run\n"
          "                       checks the forms of every mode it runs, "
          "as --races does;\n"
          "                       a mismatch or a deadlock stops a run "
          "before it starts)\n"
          "      --replay[=K]     check for races as --races, then replay "
          "each race (or race\n"
          "                       K of each form): one run with the stream "
          "of its first\n"
          "                       access delayed just before it, so that "
          "the second access\n"
          "                       runs first; prints 'FORM race K shown: "
          "rank R VAR[i] got\n"
          "                       X expected Y', or 'not shown' and why; "
          "exit 4 if any race\n"
          "      --replay-delay=US  the replay's delay in microseconds "
          "(default: the\n"
          "                       larger of 20 ms and 4 x a plain run of the "
          "form)\n"
          "      --json=FILE      the results of the run as JSON (stable "
          "keys, see README;\n"
          "                       FILE '-' is stdout, and the table then "
          "goes to stderr);\n"
          "                       with --races, --json[=FILE]: the "
          "check reports as JSON\n"
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
          "      --graph          cuda: capture each rank's iteration once "
          "as CUDA graphs and\n"
          "                       replay them (the host launches a graph, "
          "not every op);\n"
          "                       host syncs split it into segments, one "
          "graph each, and a\n"
          "                       host sync waits for its whole segment. "
          "Every mode,\n"
          "                       --op-times, --trace and --svg work; not "
          "with --races,\n"
          "                       --replay or --chaos\n"
          "      --chaos=SEED     cpu: seeded random delays before every op "
          "on every stream,\n"
          "                       so that a racy schedule shows wrong "
          "numbers (SEED >= 1;\n"
          "                       --replay is the deterministic way)\n"
          "      --comm-priority=high|default\n"
          "                       cuda: stream priority of the comm streams\n"
          "      --nccl-min-ctas=N, --nccl-max-ctas=N\n"
          "                       cuda: NCCL's CTA limits (ncclConfig_t); "
          "0 = NCCL's choice\n"
          "      --tf32=on|off    cuda: float32 matmul_v2 on TF32 tensor "
          "cores (faster, ~1e-3\n"
          "                       off: check with --rtol=1e-2); default "
          "off, full float32\n"
          "      --check-rows=N|all  rows of each matmul_v2 result (and of "
          "what is computed\n"
          "                       from it) the float64 reference computes "
          "and the check\n"
          "                       compares, one per stratum of dim 0 "
          "(default 64; all:\n"
          "                       every row, a full float64 matmul on the "
          "host's CPUs)\n"
          "  -q, --quiet          print only the verdict line and errors\n"
          "  -v, --verbose        also print every timed iteration\n"
          "  -h, --help           show this help and exit\n"
          "  -V, --version        show the version and exit\n"
          "\n"
          "SCHEDULE is a file. A relative name that is not a file from "
          "here (and does not\n"
          "start with ./ or ../) is looked up in each directory of "
          "$OVL_SCHEDULE_PATH\n"
          "(colon-separated), then in the schedules that come with the "
          "tool: those\n"
          "installed in DATADIR/overlap-sim/schedules (DATADIR as "
          "configured,\n"
          "/usr/local/share by default), or the source tree's schedules/ "
          "when the tool\n"
          "runs from its build tree. So 'overlap_sim bad/cross_ring.sched' "
          "runs that\n"
          "example from any directory. The default, seed.sched, is found "
          "the same way.\n"
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
          "Exit status: 0 ok, 1 numeric mismatch (or a fetched NaN or "
          "infinity), 2 usage or\n"
          "schedule error (also an output FILE that is the schedule or "
          "another output),\n"
          "3 runtime error (device, collective timeout, an output file or "
          "standard output\n"
          "not written), 4 races, mismatches or deadlocks found (numbers "
          "right, or nothing\n"
          "ran; --races and --replay: any found).\n",
          progname);
}

int sim_parse_flags(int argc, char **argv, sim_options *o) {
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
    OPT_TRACE_ITER,
    OPT_REPLAY,
    OPT_REPLAY_DELAY,
    OPT_GRAPH,
    OPT_TRIALS,
    OPT_TF32,
    OPT_CHECK_ROWS,
    OPT_GPUS_PER_PROCESS
  };
  static const struct option longopts[] = {
      {"backend", required_argument, NULL, 'b'},
      {"ranks", required_argument, NULL, 'r'},
      {"mode", required_argument, NULL, 'm'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, 'w'},
      {"trials", required_argument, NULL, OPT_TRIALS},
      {"gpus-per-process", required_argument, NULL, OPT_GPUS_PER_PROCESS},
      {"define", required_argument, NULL, 'D'},
      {"rtol", required_argument, NULL, OPT_RTOL},
      {"atol", required_argument, NULL, OPT_ATOL},
      {"show", required_argument, NULL, OPT_SHOW},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"op-times", no_argument, NULL, OPT_OP_TIMES},
      {"graph", no_argument, NULL, OPT_GRAPH},
      {"races", no_argument, NULL, OPT_RACES},
      {"chaos", required_argument, NULL, OPT_CHAOS},
      {"no-races", no_argument, NULL, OPT_NO_RACES},
      {"replay", optional_argument, NULL, OPT_REPLAY},
      {"replay-delay", required_argument, NULL, OPT_REPLAY_DELAY},
      {"json", optional_argument, NULL, OPT_JSON},
      {"trace", required_argument, NULL, OPT_TRACE},
      {"svg", required_argument, NULL, OPT_SVG},
      {"trace-iter", required_argument, NULL, OPT_TRACE_ITER},
      {"comm-priority", required_argument, NULL, OPT_COMM_PRIORITY},
      {"nccl-min-ctas", required_argument, NULL, OPT_MIN_CTAS},
      {"nccl-max-ctas", required_argument, NULL, OPT_MAX_CTAS},
      {"tf32", required_argument, NULL, OPT_TF32},
      {"check-rows", required_argument, NULL, OPT_CHECK_ROWS},
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
    case OPT_GPUS_PER_PROCESS: {
      int rc = parse_gpus_per_process(optarg, &o->gpus_per_process);
      if (rc >= 0)
        return rc;
      break;
    }
    case OPT_TRIALS:
      if (!parse_int(optarg, 1, 1000, &o->trials))
        return usage_error("--trials: '%s' is not a number from 1 to 1000",
                           escape_arg(optarg, quoted, sizeof quoted));
      break;
    case 'D':
      if (strchr(optarg, '=') == NULL || optarg[0] == '=')
        return usage_error("-D: '%s' is not NAME=VALUE",
                           escape_arg(optarg, quoted, sizeof quoted));
      if (o->ndefines == SIM_MAX_DEFINES)
        return usage_error("-D: more than %d defines", SIM_MAX_DEFINES);
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
    case OPT_GRAPH:
      o->graph = 1;
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
    case OPT_REPLAY: {
      int k;
      if (optarg == NULL) {
        o->replay = OVL_REPLAY_ALL;
        break;
      }
      if (!parse_int(optarg, 1, INT_MAX, &k))
        return usage_error("--replay=%s: not a race number (1, 2, ... as "
                           "the race report numbers them; --replay alone: "
                           "every race)",
                           escape_arg(optarg, quoted, sizeof quoted));
      o->replay = k;
      break;
    }
    case OPT_REPLAY_DELAY:
      if (!parse_double(optarg, 1, 1e9, &o->replay_delay_us))
        return usage_error("--replay-delay: '%s' is not a number of "
                           "microseconds (1 to 1e9)",
                           escape_arg(optarg, quoted, sizeof quoted));
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
    case OPT_TF32:
      if ((rc = parse_tuning_flag("--tf32", optarg, &o->tf32)) != 0)
        return rc;
      break;
    case OPT_CHECK_ROWS:
      if ((rc = parse_check_rows(optarg, &o->check_rows)) != 0)
        return rc;
      break;
    case 'q':
      o->quiet = 1;
      break;
    case 'v':
      o->verbose = 1;
      break;
    case 'h':
      sim_usage(stdout);
      /* Longer than stdout's buffer: a write error happens in there. */
      flush_output(stdout);
      return 0;
    case 'V':
      printf("overlap_sim (overlap-sim) %s\n", OVL_VERSION_STRING);
      return 0;
    case ':':
      return usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
      return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
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
  if (o->json_bare && !o->races_only && o->replay == 0)
    return usage_error("--json needs a file for the results of a run "
                       "(--json=FILE, or --json=- for stdout); --json "
                       "alone is for --races and --replay");
  if (o->races_only && o->replay == 0 &&
      (o->trace != NULL || o->svg != NULL))
    return usage_error("--races runs nothing: %s needs a run",
                       o->trace != NULL ? "--trace" : "--svg");
  if (o->replay != 0 && (o->trace != NULL || o->svg != NULL))
    return usage_error("--replay makes untimed runs of one iteration: %s "
                       "needs a run",
                       o->trace != NULL ? "--trace" : "--svg");
  if (o->graph && o->races_only && o->replay == 0)
    return usage_error("--races runs nothing: --graph needs a run");
  if (o->graph && o->replay != 0)
    return usage_error("--replay makes eager runs of one iteration: it "
                       "cannot go with --graph");
  if (o->graph && o->chaos_seed != 0)
    return usage_error("--graph needs the cuda backend and --chaos the cpu "
                       "backend: they cannot go together");
  if (o->graph && strcmp(o->backend, "cpu") == 0)
    return usage_error("--graph: the cpu backend has no graphs (CUDA "
                       "graphs need --backend=cuda or auto with a GPU)");
  if (o->trials > 0 && (o->races_only || o->replay != 0))
    return usage_error("--trials repeats a run: %s runs nothing timed",
                       o->races_only ? "--races" : "--replay");
  if (o->trace_iter_given && o->trace == NULL && o->svg == NULL)
    return usage_error("--trace-iter needs --trace or --svg");
  if (o->trace_iter_given && o->trace_iter >= o->iters)
    return usage_error("--trace-iter: %d: there are %d timed iterations "
                       "(0 to %d)",
                       o->trace_iter, o->iters, o->iters - 1);
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
