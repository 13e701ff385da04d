/*
 * overlap_sim: run a schedule in sync and async form on every rank, time
 * both, check the numbers against the float64 reference, and say how close
 * the overlap comes to its ideal.
 *
 * The tool parses flags and formats what the library reports: flags
 * (tools/sim_flags.c) -> world -> load -> memory check (tools/sim_memory.c)
 * -> the pipeline (ovl_pipeline_run: forms, race checks, reference, runs,
 * comparisons) -> the table, summary, mismatches, races, --show, op times
 * (tools/sim_report.c) -> the output files (tools/outfile.c; their text
 * from the library). --races stops after the checks (races, mismatches,
 * deadlocks); --replay replays the races found instead of the timed runs
 * (tools/sim_replay.c). A mismatch or a deadlock stops a run after the
 * checks too (the library does: ovl_report_not_run).
 *
 * Exit codes: 0 ok, 1 numeric mismatch, 2 usage or schedule error (also an
 * output file that is the schedule or another output), 3 runtime error
 * (also an output file or stdout not written), 4 races, mismatches or
 * deadlocks; a death by SIGINT ("interrupted": the shell's 130) or by
 * SIGPIPE, or 141 where stdout's reader went away (tool_util.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_flags.h"
#include "outfile.h"
#include "ovl.h"
#include "sim_calibrate.h"
#include "sim_fix.h"
#include "sim_flags.h"
#include "sim_memory.h"
#include "sim_predict.h"
#include "sim_replay.h"
#include "sim_report.h"
#include "sim_verdict.h"
#include "tool_util.h"

#define EXIT_MISMATCH 1
#define EXIT_USAGE TOOL_EXIT_USAGE
#define EXIT_RUNTIME TOOL_EXIT_RUNTIME
#define EXIT_RACES SIM_EXIT_RACES

/* OVL_SRCDIR, OVL_BUILDDIR, OVL_PKGDATADIR: made by make from configure's
 * directories (Makefile.am, "tools/paths.h"). */
#include "paths.h"

/* The output files, checked before anything runs (outfile_prepare); an
 * entry whose path is NULL is not wanted (or is --json=-, stdout). */
enum { OUT_JSON, OUT_TRACE, OUT_SVG, OUT_FIX, OUT_CAL, N_OUTPUTS };

/* Whether this executable lies in the build tree (under OVL_BUILDDIR, as
 * libtool's tools/.libs/ does), rather than installed. */
static bool in_build_tree(void) {
  char exe[PATH_MAX], build[PATH_MAX];
  size_t n;
  if (realpath("/proc/self/exe", exe) == NULL ||
      realpath(OVL_BUILDDIR, build) == NULL)
    return false;
  n = strlen(build);
  return strncmp(exe, build, n) == 0 && exe[n] == '/';
}

/* The tool's own schedules: the source tree's when it runs from the build
 * tree, else those `make install` put in $(pkgdatadir)/schedules (an
 * installed tool never reads a source tree that happens to exist). */
static const char *tool_schedules(void) {
  return in_build_tree() ? OVL_SRCDIR "/schedules"
                         : OVL_PKGDATADIR "/schedules";
}

/* DIR/NAME in buf (DIR: its first dlen bytes) if that is a file that can
 * be read. */
static bool try_dir(const char *dir, size_t dlen, const char *name,
                    char *buf, size_t len) {
  struct stat st;
  if (dlen == 0 ||
      (size_t)snprintf(buf, len, "%.*s/%s", (int)dlen, dir, name) >= len)
    return false;
  return stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
         access(buf, R_OK) == 0;
}

/* The schedule to read (--help, "SCHEDULE"): NAME as given when it is
 * absolute, starts with ./ or ../, or (named on the command line) exists
 * from here; else the first DIR/NAME that is a file, DIR in
 * $OVL_SCHEDULE_PATH (colon-separated), then $OVL_SCHEDULE_DIR, then the
 * tool's own schedules. Found nowhere: NAME as given (the default: where
 * the tool's own would be), so that the error names it. The default,
 * seed.sched, is looked up from the path on: a seed.sched of the current
 * directory is not it. */
static const char *resolve_schedule(const char *name, bool is_default) {
  static char path[PATH_MAX];
  const char *list = getenv("OVL_SCHEDULE_PATH");
  const char *dir = getenv("OVL_SCHEDULE_DIR");
  struct stat st;
  if (name[0] == '/' || strncmp(name, "./", 2) == 0 ||
      strncmp(name, "../", 3) == 0 || (!is_default && stat(name, &st) == 0))
    return name;
  while (list != NULL) {
    const char *colon = strchr(list, ':');
    size_t n = colon != NULL ? (size_t)(colon - list) : strlen(list);
    if (try_dir(list, n, name, path, sizeof path))
      return path;
    list = colon != NULL ? colon + 1 : NULL;
  }
  if (dir != NULL && try_dir(dir, strlen(dir), name, path, sizeof path))
    return path;
  if (try_dir(tool_schedules(), strlen(tool_schedules()), name, path,
              sizeof path))
    return path;
  if (!is_default)
    return name;
  snprintf(path, sizeof path, "%s/%s", tool_schedules(), name);
  return path;
}

/* Parse the schedule at `path` (resolve_schedule's); where a name that
 * was looked up is nowhere, the error says where it was looked for.
 * Returns -1, or the exit status (message printed). */
static int parse_schedule(const sim_options *o, const char *path,
                          ovl_schedule **sched) {
  const char *name = o->schedule;
  int rc = sim_parse_schedule(path, sched);
  if (rc >= 0 && name != NULL && path == name && name[0] != '/' &&
      strncmp(name, "./", 2) != 0 && strncmp(name, "../", 3) != 0 &&
      access(name, F_OK) != 0)
    fprintf(stderr,
            "%s: (looked for %s here, in $OVL_SCHEDULE_PATH and in %s)\n",
            progname, name, tool_schedules());
  return rc;
}

/* ------------------------------------------------------------------ */
/* Output files (--json=FILE, --trace, --svg): checked before the run and
 * written after it by tools/outfile.c (a regular file whole to FILE.tmp,
 * then renamed over FILE, so that nobody reads half a file). */

/* --json=-: the real stdout (the human report goes to stderr). */
static FILE *json_stdout;
/* Under mpirun: the processes (tool_procs_init); NULL for one. */
static ovl_procs *procs;
/* Where the stream stdout writes: stderr with --json=-. */
static const char *stdout_name = "standard output";

/* The output files, each checked (outfile_prepare) before anything runs:
 * a path that cannot be written, or that would overwrite the schedule or
 * another output, ends the tool now rather than after the run. Returns -1
 * to go on, or the exit status (message printed). */
static int prepare_outputs(const sim_options *o, const char *schedule,
                           outfile outs[N_OUTPUTS]) {
  const char *const inputs[] = {schedule};
  const char *flags[N_OUTPUTS] = {"--json", "--trace", "--svg", "--fix",
                                  "--calibrate"};
  const char *paths[N_OUTPUTS] = {o->json, o->trace, o->svg, o->fix_file,
                                  o->calibrate};

  /* Under mpirun, process 0 alone writes (every process has the same
   * report). */
  if (ovl_procs_rank(procs) > 0)
    return -1;
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

/* -q: no "wrote" lines. */
static bool quiet;

/* `text` as the whole of an output: its file, or for --json=- (no file)
 * the real stdout. A file gets a line "wrote FILE (KIND)" on stderr (not
 * with -q, nor for a descriptor of the tool's, /dev/stdout and the like,
 * whose text is where the reader looks): stdout carries the report, or
 * the JSON of --json=-, and stays whole. Returns 0, or -1 with the
 * message printed (it names the flag and the path). */
static int write_output(const outfile *out, const char *text, size_t len) {
  if (ovl_procs_rank(procs) > 0)
    return 0;
  if (out->path != NULL) {
    if (outfile_write(out, text, len) != 0)
      return -1;
    if (!quiet && out->fd < 0) {
      /* After what the report printed so far, where both reach one file. */
      flush_output(stdout);
      fprintf(stderr, "wrote %s (%s)\n", out->path, out->flag + 2);
    }
    return 0;
  }
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

/* --json=-: the JSON alone on stdout (json_stdout, a copy of the
 * descriptor); what the tool prints goes to stderr (the descriptor of
 * stdout becomes a copy of stderr's). Process 0 alone (the others print
 * nothing on stdout). Returns -1, or the exit status (message printed). */
static int route_json_stdout(const sim_options *o) {
  int fd;
  if (o->json == NULL || strcmp(o->json, "-") != 0 || !tool_prints_report())
    return -1;
  fd = dup(STDOUT_FILENO);
  if (fd >= 0)
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  /* What the table has printed so far goes where it was going. */
  fflush(stdout);
  if (fd < 0 || (json_stdout = fdopen(fd, "w")) == NULL ||
      dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    fprintf(stderr, "%s: --json=-: %s\n", progname, strerror(errno));
    return EXIT_RUNTIME;
  }
  stdout_name = "standard error (the report, with --json=-)";
  return -1;
}

static int runtime_exit(ovl_status st) {
  return st == OVL_EPARSE || st == OVL_EINVAL ? EXIT_USAGE : EXIT_RUNTIME;
}

static int count_modes(unsigned modes) {
  int n = 0;
  for (; modes != 0; modes &= modes - 1)
    n++;
  return n;
}

/* ------------------------------------------------------------------ */
/* --races: parse and check, run nothing (no device is touched).        */
/* ------------------------------------------------------------------ */

/* The reports on stdout and the summary line "check: ..." (-q: that
 * line alone; with --replay, the replay lines after them, -q: those
 * only), or as JSON on stdout (--json) or to --json=FILE, which is
 * written whole as a run's output files are. Returns -1, or the exit
 * status of a failure. */
static int races_output(const sim_options *o, const ovl_report *report,
                        const outfile *json) {
  ovl_error err = {0};
  char *text = NULL;
  size_t len = 0;

  if (o->json == NULL) {
    /* -q: the summary line alone (with --replay, the replay's lines). */
    if (!(o->replay != 0 && o->common.quiet)) {
      if (!o->common.quiet && sim_print_races(report, false, stdout) < 0)
        return EXIT_RUNTIME;
      printf("check: ");
      sim_print_check_summary(report, stdout);
      printf(" in %s (%d rank%s)\n", ovl_program_filename(ovl_report_program(report)),
             ovl_program_nranks(ovl_report_program(report)),
             ovl_program_nranks(ovl_report_program(report)) == 1 ? "" : "s");
    }
    if (o->replay != 0)
      sim_print_replay(report);
    return -1;
  }
  if (ovl_report_races_json(report, &text, &len, &err) != OVL_OK) {
    fprintf(stderr, "%s: races: %s\n", progname, err.msg);
    return EXIT_RUNTIME;
  }
  if (json->path != NULL) {
    int w = write_output(json, text, len);
    free(text);
    return w < 0 ? EXIT_RUNTIME : -1;
  }
  /* A write error shows at close_output(). */
  (void)fwrite(text, 1, len, stdout);
  free(text);
  return -1;
}

/* ------------------------------------------------------------------ */
/* --races and --replay: no timed run                                   */
/* ------------------------------------------------------------------ */

/* The race check of every form asked; with --replay, then the replay of
 * every race found (or race K) on the world the flags ask for. --races
 * alone touches no device: it binds for --ranks (default 2; under mpirun,
 * processes x --gpus-per-process) with the plain defaults. */
static int write_timelines(const sim_options *o,
                           const outfile outs[N_OUTPUTS],
                           const ovl_report *report);

static int check_only(sim_options *o, const char *path, unsigned modes,
                      const outfile outs[N_OUTPUTS]) {
  const outfile *json = &outs[OUT_JSON], *fix = &outs[OUT_FIX];
  const char *defs[SIM_MAX_DEFINES + 1];
  char stepsdef[32];
  ovl_bind_opts bopts = {.size = sizeof bopts, .defines = defs,
                         .nranks = o->common.ranks > 0 ? o->common.ranks : 2};
  ovl_schedule *sched = NULL;
  ovl_run_opts ro = {.size = sizeof ro, .iters = 1};
  ovl_pipeline_opts pl = {.size = sizeof pl, .modes = modes,
                          .races = 1,
                          .run_opts = &ro,
                          .run = 0,
                          .rtol = o->common.rtol,
                          .atol = o->common.atol,
                          .check_rows = o->check_rows,
                          .replay = o->replay,
                          .replay_delay_us = o->replay_delay_us};
  ovl_world *world = NULL;
  ovl_program *prog = NULL;
  ovl_report *report = NULL;
  ovl_error err = {0};
  ovl_status st;
  mem_plan mem;
  int rc;

  if ((rc = tool_agree(procs, parse_schedule(o, path, &sched))) >= 0)
    return rc;
  /* Under mpirun: the ranks of every process, as a run would have. */
  if (procs != NULL && o->common.ranks == 0)
    bopts.nranks =
        ovl_procs_size(procs) *
        (o->common.gpus_per_process > 0 ? o->common.gpus_per_process : 1);
  if (o->replay != 0) {
    if ((rc = common_make_world(&o->common, procs, o->chaos_seed,
                                &world)) >= 0)
      goto out;
    /* --trace, --svg: each replay traced, its race marked. */
    ro.trace = o->trace != NULL || o->svg != NULL;
    bopts.nranks = ovl_world_nranks(world);
    bopts.cpu_defaults = strcmp(ovl_world_backend_name(world), "cpu") == 0;
  }
  bopts.ndefines =
      sim_bind_defines(o, sched, bopts.nranks, defs, stepsdef,
                       sizeof stepsdef);
  sim_plan_memory(&mem, o, count_modes(modes),
                  world != NULL ? ovl_world_backend_name(world) : NULL,
                  world != NULL ? ovl_world_nranks(world) : 0);
  if ((rc = tool_agree(procs, sim_bind_schedule(sched, &bopts, &mem,
                                                 &prog))) >= 0)
    goto out;
  /* The fixes are re-checked against the schedule: kept to the end. */
  pl.schedule = sched;
  pl.bind = &bopts;
  rc = tool_agree(procs,
                  sim_check_host_memory(prog, path, &mem,
                                        ovl_pipeline_needs_reference(prog,
                                                                     &pl)));
  if (rc >= 0)
    goto out;
  st = ovl_pipeline_run(world, prog, &pl, &report, &err);
  if (st != OVL_OK) {
    tool_shared_error("%s", err.msg);
    rc = runtime_exit(st);
    goto out;
  }
  /* --fix alone: the diff alone on stdout (-q: nothing but it). */
  rc = o->fix && (o->fix_file == NULL || o->common.quiet) && o->json == NULL
           ? -1
           : races_output(o, report, json);
  if (rc < 0) {
    ovl_report_summary sum;
    ovl_report_summary_get(report, &sum);
    rc = sum.races > 0 || sum.mismatches > 0 || sum.deadlocks > 0
             ? EXIT_RACES
             : EXIT_SUCCESS;
  }
  if (o->replay != 0 && (rc == EXIT_RACES || rc == EXIT_SUCCESS)) {
    int w = write_timelines(o, outs, report);
    if (w >= 0)
      rc = w;
  }
  /* --fix: the exit status is the fixed schedule's. */
  if (o->fix && (rc == EXIT_RACES || rc == EXIT_SUCCESS) &&
      tool_prints_report()) {
    int frc = sim_fix(sched, &bopts, modes,
                      o->fix_file != NULL ? fix : NULL, o->common.quiet);
    rc = frc >= 0 ? frc : EXIT_SUCCESS;
  }
out:
  ovl_schedule_free(sched);
  ovl_report_free(report);
  ovl_program_free(prog);
  ovl_world_free(world);
  return rc;
}

/* ------------------------------------------------------------------ */
/* A run                                                               */
/* ------------------------------------------------------------------ */

/* The table as the pipeline fills it: the header once the race checks
 * are done, the column names once the reference is ready, each row as its
 * mode has run. */
typedef struct {
  const sim_options *o;
  const ovl_world *world;
  const char *path;
  uint64_t per_op;
  bool ready; /* the runs have started */
} table_ctx;

static void on_progress(void *ctx, const ovl_report *report,
                        ovl_pipeline_event ev, size_t i) {
  table_ctx *t = ctx;
  if (ev == OVL_PIPELINE_READY)
    t->ready = true;
  if (t->o->common.quiet)
    return;
  switch (ev) {
  case OVL_PIPELINE_CHECKED:
    sim_print_header(t->o, t->world, ovl_report_program(report), t->path,
                     t->per_op, ovl_report_not_run(report));
    /* Seen before the first row, which may be minutes away (stdout a
     * pipe or a file is not flushed at a newline). */
    flush_output(stdout);
    break;
  case OVL_PIPELINE_READY:
    sim_print_table_header(t->o->trials != 1);
    flush_output(stdout);
    break;
  case OVL_PIPELINE_RAN:
  default:
    sim_print_row(report, i,
                  t->o->trials != 1 ? ovl_report_trial_count(report) : 0,
                  t->o->verbose);
    flush_output(stdout);
    break;
  }
}

/* --trace and --svg: the timelines of the report (the library's: its
 * runs, or its replays, with the races marked). Returns -1, or
 * EXIT_RUNTIME with the message printed. */
static int write_timelines(const sim_options *o,
                           const outfile outs[N_OUTPUTS],
                           const ovl_report *report) {
  ovl_timeline_run *tl = NULL;
  const ovl_timeline_marks *tm = NULL;
  size_t ntl = 0;
  char *text = NULL;
  size_t len = 0;
  ovl_error err = {0};

  /* Under mpirun, process 0 alone writes them (and says what it did not
   * write). */
  if ((o->trace == NULL && o->svg == NULL) || !tool_prints_report())
    return -1;
  /* Nothing ran: no timeline to write. */
  if (ovl_report_not_run(report) != NULL) {
    if (o->trace != NULL)
      fprintf(stderr, "%s: --trace=%s not written: nothing ran\n", progname,
              o->trace);
    if (o->svg != NULL)
      fprintf(stderr, "%s: --svg=%s not written: nothing ran\n", progname,
              o->svg);
    return -1;
  }
  if (ovl_report_timelines(report, &tl, &tm, &ntl, &err) != OVL_OK) {
    fprintf(stderr, "%s: %s=%s not written: nothing was traced (%s)\n",
            progname, o->trace != NULL ? "--trace" : "--svg",
            o->trace != NULL ? o->trace : o->svg, err.msg);
    return -1;
  }
  if (o->trace != NULL && ntl > 0) {
    if (ovl_timeline_trace_marked(tl, tm, ntl, &text, &len, &err) !=
        OVL_OK) {
      fprintf(stderr, "%s: --trace=%s: %s\n", progname, o->trace, err.msg);
      free(tl);
      return EXIT_RUNTIME;
    }
    int w = write_output(&outs[OUT_TRACE], text, len);
    free(text);
    if (w < 0) {
      free(tl);
      return EXIT_RUNTIME;
    }
  }
  if (o->svg != NULL && ntl > 0) {
    if (ovl_timeline_svg_marked(tl, tm, ntl, &text, &len, &err) != OVL_OK) {
      fprintf(stderr, "%s: --svg=%s: %s\n", progname, o->svg, err.msg);
      free(tl);
      return EXIT_RUNTIME;
    }
    int w = write_output(&outs[OUT_SVG], text, len);
    free(text);
    if (w < 0) {
      free(tl);
      return EXIT_RUNTIME;
    }
  }
  free(tl);
  return -1;
}

/* --trace, --svg and --json=FILE after a run. Returns -1, or EXIT_RUNTIME
 * with the message printed. */
static int write_run_outputs(const sim_options *o,
                             const outfile outs[N_OUTPUTS],
                             const ovl_report *report, int exit_status) {
  char *text = NULL;
  size_t len = 0;
  ovl_error err = {0};
  ovl_status st;
  int rc;

  /* Under mpirun, process 0 alone writes them. */
  if (!tool_prints_report())
    return -1;
  if ((rc = write_timelines(o, outs, report)) >= 0)
    return rc;
  if (o->json != NULL) {
    /* The report writes what it ran with; the tool adds its envelope. */
    char *head = NULL, *opts = NULL, *tail = NULL;
    ovl_json_envelope jo = OVL_OPTS_INIT(ovl_json_envelope);
    if (sim_json_envelope(o, exit_status, &head, &opts, &tail) != 0) {
      fprintf(stderr, "%s: --json=%s: out of memory\n", progname, o->json);
      return EXIT_RUNTIME;
    }
    jo.head = head;
    jo.options = opts;
    jo.tail = tail;
    st = ovl_report_json(report, &jo, &text, &len, &err);
    free(head);
    free(opts);
    free(tail);
    if (st != OVL_OK) {
      fprintf(stderr, "%s: --json=%s: %s\n", progname, o->json, err.msg);
      return EXIT_RUNTIME;
    }
    int w = write_output(&outs[OUT_JSON], text, len);
    free(text);
    if (w < 0)
      return EXIT_RUNTIME;
  }
  return -1;
}

/* Everything printed after the table, the output files, and the verdict.
 * Returns the exit status. */
static int finish_run(const sim_options *o, const outfile outs[N_OUTPUTS],
                      const ovl_report *report, ovl_world *model,
                      unsigned modes) {
  ovl_report_summary sum;
  int status, rc;

  ovl_report_summary_get(report, &sum);
  if (!o->common.quiet && o->op_times)
    sim_print_op_times(report, o);
  if (!o->common.quiet) {
    sim_print_summary(report);
    sim_print_explain(report);
    sim_print_noise(report);
    sim_print_mismatches(report);
  }
  if (model != NULL &&
      (rc = sim_print_prediction(o, model, report, modes)) >= 0)
    return rc;
  bool found = sum.races > 0 || sum.mismatches > 0 || sum.deadlocks > 0;
  if (found && !o->common.quiet &&
      sim_print_races(report, true, stdout) < 0)
    return EXIT_RUNTIME;
  if (o->show >= 0)
    sim_print_show(report, o->show);
  status = sum.mismatched > 0 ? EXIT_MISMATCH
           : found            ? EXIT_RACES
                              : EXIT_SUCCESS;
  /* Process 0 writes the outputs; every process learns how that went,
   * and the verdict is printed only where every process got this far (a
   * process that took another path stops it here, not after a PASS). */
  rc = tool_agree(procs, write_run_outputs(o, outs, report, status));
  if (rc >= 0)
    return rc;
  sim_print_verdict(report, o);
  return status;
}

/* The tool; main() adds the check of what went to stdout. */
static int overlap_sim(int argc, char **argv) {
  sim_options o;
  ovl_bind_opts bopts = OVL_OPTS_INIT(ovl_bind_opts);
  ovl_pipeline_opts pl = OVL_OPTS_INIT(ovl_pipeline_opts);
  ovl_run_opts ro = OVL_OPTS_INIT(ovl_run_opts);
  ovl_schedule *sched = NULL;
  table_ctx table = {0};
  mem_plan mem;
  ovl_world *world = NULL, *model = NULL;
  ovl_program *prog = NULL;
  ovl_report *report = NULL;
  ovl_error err = {0};
  outfile outs[N_OUTPUTS];
  const char *defs[SIM_MAX_DEFINES + 1];
  char stepsdef[32];
  unsigned modes;
  int rc;
  const char *path;
  ovl_status st;

  sim_options_init(&o);
  rc = sim_parse_flags(argc, argv, &o);
  quiet = o.common.quiet != 0;
  /* Under mpirun: every step the processes take together, from the
   * agreement on the flags on, ends within --timeout (plus the library's
   * margin), even where the processes were given different flags. */
  ovl_procs_set_timeout(procs, o.common.timeout_s > 0
                                   ? o.common.timeout_s
                                   : COMMON_DEFAULT_TIMEOUT_S);
  if ((rc = tool_agree(procs, rc)) >= 0)
    return rc;
  path = o.schedule != NULL ? resolve_schedule(o.schedule, false)
                            : resolve_schedule("seed.sched", true);
  memset(outs, 0, sizeof outs);
  /* Modes, in the order they run: sync, async, comp, comm. */
  modes = sim_modes(&o);
  /* --json=- is routed before any output path is resolved, so that a
   * path naming standard output (/dev/stdout) names what it will be. */
  if (o.replay == 0 && !o.races_only && !o.fix)
    rc = route_json_stdout(&o);
  if ((rc = tool_agree(procs, rc)) >= 0)
    goto out;
  /* `overlap_sim | head -1` ends when head does, not at the next row. */
  if (tool_prints_report())
    tool_watch_reader(json_stdout != NULL ? fileno(json_stdout)
                                          : STDOUT_FILENO);
  /* Under mpirun only process 0 has outputs: every process learns whether
   * it can go on (tool_agree), as after each step that one process may
   * fail alone. */
  rc = tool_agree(procs, prepare_outputs(&o, path, outs));
  if (rc >= 0)
    goto out;
  if (o.replay != 0 || o.races_only || o.fix) {
    rc = check_only(&o, path, modes, outs);
    goto out;
  }

  /* Parse before making the world (which may take seconds on GPUs); bind
   * once its rank count and backend are known. */
  if ((rc = tool_agree(procs, parse_schedule(&o, path, &sched))) >= 0)
    goto out;
  if ((rc = common_make_world(&o.common, procs, o.chaos_seed, &world)) >= 0)
    goto out;
  /* --predict: its files are checked before anything runs. */
  if ((rc = tool_agree(procs, sim_predict_world(&o, ovl_world_nranks(world),
                                                &model))) >= 0)
    goto out;
  sim_plan_memory(&mem, &o, count_modes(modes),
                  ovl_world_backend_name(world), ovl_world_nranks(world));
  bopts.defines = defs;
  bopts.ndefines = sim_bind_defines(&o, sched, ovl_world_nranks(world), defs,
                                stepsdef, sizeof stepsdef);
  bopts.nranks = ovl_world_nranks(world);
  bopts.cpu_defaults = strcmp(ovl_world_backend_name(world), "cpu") == 0;
  rc = tool_agree(procs, sim_bind_schedule(sched, &bopts, &mem, &prog));
  if (rc >= 0)
    goto out;
  if (o.calibrate != NULL) { /* the profile, and no mode */
    rc = sim_calibrate(&o, world, prog, path, &outs[OUT_CAL]);
    goto out;
  }
  if (o.no_races) {
    ovl_schedule_free(sched);
    sched = NULL;
  }

  pl.modes = modes;
  pl.races = !o.no_races;
  /* The race check's fixes are re-checked against the schedule. */
  pl.schedule = sched;
  pl.bind = &bopts;
  pl.run = 1;
  pl.trials = o.trials > 0 ? o.trials : SIM_DEFAULT_TRIALS;
  pl.trial_budget_s = o.trials > 0 ? 0 : SIM_TRIAL_BUDGET_S;
  ro.iters = o.common.iters;
  ro.warmup = o.common.warmup;
  ro.op_times = o.op_times;
  ro.graph = o.common.graph;
  /* --op-times explains the traced iteration (ovl_result_explain). */
  ro.trace = o.trace != NULL || o.svg != NULL || o.op_times;
  ro.trace_iter = o.trace_iter_given ? o.trace_iter : -1;
  pl.run_opts = &ro;
  pl.rtol = o.common.rtol;
  pl.atol = o.common.atol;
  pl.check_rows = o.check_rows;
  pl.progress = on_progress;
  pl.progress_ctx = &table;
  table.o = &o;
  table.world = world;
  table.path = path;
  table.per_op = mem.per_op;
  if (pl.races && ovl_world_nranks(world) > 64) {
    if ((rc = sim_check_at_64(&o, sched, &bopts, &mem, &pl)) >= 0)
      goto out;
    pl.races = 0;
  }
  rc = tool_agree(procs,
                  sim_check_host_memory(prog, path, &mem,
                                        ovl_pipeline_needs_reference(prog,
                                                                     &pl)));
  if (rc >= 0)
    goto out;
  st = ovl_pipeline_run(world, prog, &pl, &report, &err);
  if (st != OVL_OK) {
    /* What the table has so far shows before the message of a run. */
    if (table.ready)
      flush_output(stdout);
    tool_shared_error("%s", err.msg);
    rc = runtime_exit(st);
    goto out;
  }
  rc = finish_run(&o, outs, report, model, modes);

out:
  ovl_schedule_free(sched);
  ovl_report_free(report);
  ovl_program_free(prog);
  ovl_world_free(world);
  ovl_world_free(model);
  release_outputs(outs);
  return rc;
}

int main(int argc, char **argv) {
  int rc;
  /* The name in messages, those of joining an MPI launch too. */
  if (argc > 0 && argv[0] != NULL) {
    const char *slash = strrchr(argv[0], '/');
    progname = slash ? slash + 1 : argv[0];
  }
  /* SIGINT says "interrupted"; a reader that goes away ends the tool. */
  tool_signals_init();
  rc = tool_procs_init(&argc, &argv, &procs);
  if (rc >= 0)
    return rc;
  tool_signals_rank(ovl_procs_rank(procs));
  rc = overlap_sim(argc, argv);
  /* Every way out, --help and --races included: what went to stdout must
   * have arrived (a full disk, a closed pipe), or the exit says so. */
  if (json_stdout != NULL)
    rc = close_output(json_stdout, "standard output (--json=-)", rc);
  rc = close_output(stdout, stdout_name, rc);
  /* Under mpirun every process exits with the same status (or, where the
   * processes lost each other, says why and keeps its own). */
  return tool_procs_end(procs, rc);
}
