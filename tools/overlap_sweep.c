/*
 * overlap_sweep: one collective over a range of sizes, in nccl-tests'
 * shape, in four placements: on the calc stream, on a comm stream (out of
 * place, and in place: nccl-tests' two groups), and on a comm stream with
 * a compute kernel running beside it on the calc stream: a memory-bound
 * one (scale), or a matrix multiply (matmul_v2, --compute=matmul), which
 * competes with NCCL's kernels for the SMs. The
 * last placement gives what nobody else prints: how much compute and
 * communication slow each other down on this box.
 *
 * Every measurement is a schedule generated as text (tools/sweep_schedule.c)
 * and parsed with ovl_program_parse, and runs through the library's
 * pipeline (ovl_pipeline_run), so the sweep runs the same path as every
 * schedule; the flags are tools/sweep_flags.c.
 *
 * Exit codes: 0 ok, 1 wrong results, 2 usage error, 3 runtime error (also
 * the table not written to stdout).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_flags.h"
#include "ovl.h"
#include "sweep.h"
#include "sweep_print.h"
#include "tool_util.h"

#define EXIT_WRONG 1
#define EXIT_USAGE TOOL_EXIT_USAGE
#define EXIT_RUNTIME TOOL_EXIT_RUNTIME

static ovl_status parse_text(const sweep *s, const char *txt,
                             const char *name, ovl_program **prog,
                             ovl_error *err) {
  ovl_parse_opts popts = {.size = sizeof popts, .nranks = s->nranks};
  return ovl_program_parse(txt, strlen(txt), name, &popts, prog, err);
}

/* ------------------------------------------------------------------ */
/* Measurements.                                                        */
/* ------------------------------------------------------------------ */

/* Mean device seconds per op named `name` of a report's run (over the
 * timed iterations, the ops and the ranks). */
static double mean_op_time(const ovl_report *rep, int nranks,
                           const char *name) {
  ovl_report_mode m;
  const ovl_program *prog;
  const ovl_result *res;
  size_t nops;
  double sum = 0;
  long count = 0;
  ovl_report_mode_get(rep, 0, &m);
  prog = m.prog;
  res = m.res;
  nops = ovl_program_op_count(prog);
  for (size_t i = 0; i < nops; i++) {
    const char *n;
    int line, stream;
    ovl_program_op(prog, i, &n, &line, &stream);
    if (stream < 0 || strcmp(n, name) != 0)
      continue;
    count++;
    for (int r = 0; r < nranks; r++) {
      const double *t = ovl_result_op_times(res, r);
      if (t != NULL)
        sum += t[i];
    }
  }
  if (count == 0)
    return 0;
  return sum / ((double)count * nranks * ovl_result_iters(res));
}

/* Seconds per collective on the host clock: the timed iterations' total /
 * (iterations x reps). */
static double host_per_coll(const ovl_report *rep, int reps) {
  ovl_report_mode m;
  ovl_report_mode_get(rep, 0, &m);
  return m.total_s / ((double)ovl_result_iters(m.res) * reps);
}

/* Run a generated program through the pipeline: its one form, as written
 * (async), with `ropts`; with `ref`, its fetched y is compared with that
 * reference. On failure print why (`name`, the generated text's, says
 * which measurement) and return an exit status, else -1 with the report
 * in *rep. */
static int run_program(ovl_world *world, const options *o,
                       const ovl_program *prog, const char *name,
                       const ovl_run_opts *ropts, const ovl_reference *ref,
                       ovl_report **rep) {
  ovl_pipeline_opts pl = {.size = sizeof pl,
                          .modes = OVL_MODE_BIT(OVL_MODE_ASYNC),
                          .run = 1,
                          .run_opts = ropts,
                          .rtol = o->common.rtol,
                          .atol = o->common.atol,
                          .reference = ref,
                          .label = name};
  ovl_error err = {0};
  if (ovl_pipeline_run(world, prog, &pl, rep, &err) != OVL_OK) {
    flush_output(stdout);
    tool_shared_error("%s", err.msg);
    return EXIT_RUNTIME;
  }
  return -1;
}

/* Parse a generated schedule and run it (run_program); on failure print
 * why and return an exit status, else -1. *prog is the caller's to free
 * either way. */
static int run_schedule(ovl_world *world, const sweep *s, const char *txt,
                        const char *name, const ovl_run_opts *ropts,
                        const ovl_reference *ref, ovl_program **prog,
                        ovl_report **rep) {
  ovl_error err = {0};
  ovl_status st;
  if (txt == NULL) {
    fprintf(stderr, "%s: %s: out of memory\n", progname, name);
    return EXIT_RUNTIME;
  }
  st = parse_text(s, txt, name, prog, &err);
  if (st != OVL_OK) {
    /* A generated schedule that does not parse is a bug here, unless the
     * size cannot be represented. */
    fprintf(stderr, "%s: generated schedule %s: %s\n", progname, name,
            err.msg);
    return EXIT_RUNTIME;
  }
  return run_program(world, s->o, *prog, name, ropts, ref, rep);
}

/* Device bytes of the kernel's buffers on a rank: z and w (float32), or
 * a, b and w (n x n of the dtype). */
static uint64_t kernel_bytes(const sweep *s) {
  if (s->o->compute == K_MATMUL)
    return mul_sat(mul_sat(s->matmul_n, s->matmul_n), 3 * s->esize);
  return 2 * s->kernel_numel * 4;
}

/* ------------------------------------------------------------------ */
/* The sweep, step by step.                                             */
/* ------------------------------------------------------------------ */

/* Under mpirun: the processes (tool_procs_init); NULL for one. */
static ovl_procs *procs;

/* The world the flags ask for, and a --root within it. Returns -1, or the
 * exit status (message printed). */
static int open_world(sweep_state *t) {
  int rc = common_make_world(&t->o.common, procs, 0, &t->world);
  if (rc >= 0)
    return rc;
  t->cpu = strcmp(ovl_world_backend_name(t->world), "cpu") == 0;
  t->nranks = ovl_world_nranks(t->world);
  if (t->o.root >= t->nranks)
    return usage_error("--root: %d is not a rank (0 to %d)", t->o.root,
                       t->nranks - 1);
  return -1;
}

/* The sizes: the list, or -b .. -e by -f (defaults by backend). Returns
 * -1, or the exit status (message printed). */
static int list_sizes(sweep_state *t) {
  const options *o = &t->o;
  uint64_t b, e;
  if (o->nsizes > 0) {
    memcpy(t->sizes, o->sizes, (size_t)o->nsizes * sizeof t->sizes[0]);
    t->nsizes = o->nsizes;
    return -1;
  }
  b = o->minb_given ? o->minb : t->cpu ? 1ULL << 10 : 1ULL << 20;
  e = o->maxb_given ? o->maxb : t->cpu ? 1ULL << 20 : 1ULL << 30;
  if (b > e)
    return usage_error("--minbytes (%llu) is larger than --maxbytes (%llu)",
                       (unsigned long long)b, (unsigned long long)e);
  for (uint64_t v = b; v <= e; v *= o->factor) {
    if (t->nsizes == MAX_SIZES)
      return usage_error("more than %d sizes from %llu to %llu by %llu",
                         MAX_SIZES, (unsigned long long)b,
                         (unsigned long long)e,
                         (unsigned long long)o->factor);
    t->sizes[t->nsizes++] = v;
    if (v > UINT64_MAX / o->factor)
      break;
  }
  return -1;
}

/* What every generated schedule shares: the op's name, the kernel's
 * sizes (defaults by backend). */
static void setup_schedules(sweep_state *t) {
  options *o = &t->o;
  sweep *s = &t->s;
  memset(s, 0, sizeof *s);
  s->o = o;
  s->nranks = t->nranks;
  s->esize = ovl_dtype_size(o->dtype);
  if (o->coll == C_ALLREDUCE || o->coll == C_REDUCE)
    snprintf(t->op_name, sizeof t->op_name, "c_%s_%s", coll_names[o->coll],
             o->redop);
  else if (o->coll == C_ALLTOALL)
    snprintf(t->op_name, sizeof t->op_name, "alltoall");
  else if (o->coll == C_SENDRECV)
    /* The group's span: its send_v2 and recv_v2 share it. */
    snprintf(t->op_name, sizeof t->op_name, "send_v2");
  else
    snprintf(t->op_name, sizeof t->op_name, "c_%s", coll_names[o->coll]);
  s->op_name = t->op_name;
  if (o->compute_bytes == 0)
    o->compute_bytes = t->cpu ? 1ULL << 20 : 256ULL << 20;
  s->kernel_numel = o->compute_bytes / 4;
  if (o->matmul_n == 0)
    o->matmul_n = t->cpu ? 64 : 8192;
  s->matmul_n = o->matmul_n;
  s->kernel_op = o->compute == K_MATMUL ? "matmul_v2" : "scale";
}

/* The cpu backend's devices are host memory: refuse sizes that cannot fit
 * before running anything (x, y, z and w on every rank). Returns -1, or
 * the exit status (message printed). */
static int check_cpu_memory(sweep_state *t) {
  char b1[32], b2[32];
  t->mem = host_memory();
  if (!t->cpu || t->mem == 0)
    return -1;
  for (int i = 0; i < t->nsizes; i++) {
    row_sizes rs;
    uint64_t need;
    if (!row_sizes_for(t->o.coll, t->sizes[i], t->s.esize, t->nranks, &rs))
      continue;
    need = mul_sat((rs.nx + rs.ny) * t->s.esize + kernel_bytes(&t->s),
                   (uint64_t)t->nranks);
    if (need > t->mem) {
      fprintf(stderr,
              "%s: size %llu needs %s of host memory on the cpu backend "
              "(%d ranks); this machine has %s. Use a smaller "
              "-e/--maxbytes or fewer --ranks.\n",
              progname, (unsigned long long)t->sizes[i],
              format_bytes(need, b1, sizeof b1), t->nranks,
              format_bytes(t->mem, b2, sizeof b2));
      return EXIT_USAGE;
    }
  }
  return -1;
}

/* The kernel alone, once, to size each row's kernels (t->kern_cal): 20
 * kernels an iteration. Each row measures its kernels alone again.
 * Returns -1, or the exit status (message printed). */
static int calibrate_kernel(sweep_state *t) {
  ovl_run_opts ropts = {.size = sizeof ropts, .iters = t->o.common.iters,
                        .warmup = t->o.common.warmup, .op_times = 1,
                        .graph = t->o.common.graph};
  ovl_program *prog = NULL;
  ovl_report *rep = NULL;
  char *txt = gen_schedule(&t->s, NULL, 0, P_CALC, 0, 20, false);
  int rc = run_schedule(t->world, &t->s, txt, "<sweep:kernel-alone>", &ropts,
                        NULL, &prog, &rep);
  if (rc < 0)
    t->kern_cal = mean_op_time(rep, t->nranks, t->s.kernel_op);
  free(txt);
  ovl_report_free(rep);
  ovl_program_free(prog);
  return rc;
}

/* "<sweep:allreduce:1024:WHAT>": a measurement's name, in its messages. */
static void measurement_name(const sweep_state *t, const row *r,
                             const char *what, char *buf, size_t len) {
  snprintf(buf, len, "<sweep:%s:%llu:%s>", coll_names[t->o.coll],
           (unsigned long long)r->rs.size, what);
}

/* One timed measurement of row r: the collectives in placement p, with
 * kernels beside them for P_BOTH; or with p == P__COUNT, the kernels
 * alone. Calc and comm are timed again on the host clock without per-op
 * timing events. Returns -1, or the exit status (message printed). */
static int measure_placement(sweep_state *t, row *r, int p) {
  const options *o = &t->o;
  ovl_run_opts ropts = {.size = sizeof ropts, .iters = o->common.iters,
                        .warmup = o->common.warmup, .op_times = 1,
                        .graph = o->common.graph};
  ovl_program *prog = NULL;
  ovl_report *rep = NULL;
  bool alone = p == P__COUNT; /* the kernels alone, last */
  char name[128];
  char *txt;
  int rc;
  if (alone)
    txt = gen_schedule(&t->s, NULL, 0, P_CALC, 0, r->kernels, false);
  else
    txt = gen_schedule(&t->s, &r->rs, r->rs.size, (placement)p, r->reps,
                       p == P_BOTH ? r->kernels : 0, false);
  measurement_name(t, r, alone ? "kernels-alone" : placement_names[p], name,
                   sizeof name);
  rc = run_schedule(t->world, &t->s, txt, name, &ropts, NULL, &prog, &rep);
  if (rc < 0 && alone) {
    r->kern_alone = mean_op_time(rep, t->nranks, t->s.kernel_op);
  } else if (rc < 0) {
    r->m[p].ran = true;
    r->m[p].coll_dev = mean_op_time(rep, t->nranks, t->s.op_name);
    r->m[p].coll_host = host_per_coll(rep, r->reps);
    if (p == P_BOTH)
      r->m[p].kern_dev = mean_op_time(rep, t->nranks, t->s.kernel_op);
  }
  if (rc < 0 && (p == P_CALC || p == P_COMM || p == P_INPLACE)) {
    /* The host-timed figure again, without the timing events around
     * every op: they cost a few microseconds a collective (measured on
     * 2 x H200: 163.5 us device-timed against 160.0 us host-timed
     * without them at 40 MB), and nccl-tests times with none. */
    ovl_report *clean = NULL;
    ropts.op_times = 0;
    rc = run_program(t->world, o, prog, name, &ropts, NULL, &clean);
    if (rc < 0)
      r->m[p].coll_host = host_per_coll(clean, r->reps);
    ovl_report_free(clean);
  }
  free(txt);
  ovl_report_free(rep);
  ovl_program_free(prog);
  return rc;
}

/* The timed measurements of row r: the collective on calc, on comm, in
 * place on comm, on comm with kernels beside it (as many kernels as take,
 * alone, about as long as the collectives alone on comm), then those
 * kernels alone. Returns -1, or the exit status (message printed). */
static int measure_row(sweep_state *t, row *r) {
  int rc = -1;
  for (int p = 0; p <= P__COUNT && rc < 0; p++) {
    if (p == P_INPLACE && !has_inplace(t->o.coll))
      continue;
    if (p == P_BOTH) {
      double span = r->m[P_COMM].coll_dev * r->reps;
      double k = t->kern_cal > 0 ? span / t->kern_cal : 1;
      r->kernels = k < 1 ? 1 : k > 100000 ? 100000 : (int)lround(k);
    }
    rc = measure_placement(t, r, p);
  }
  return rc;
}

/* The float64 reference of row r's out-of-place placements: computed
 * once, from the comm-stream form. Returns -1, or the exit status
 * (message printed). *ref_prog is the caller's to free either way. */
static int compute_reference(const sweep_state *t, const row *r,
                             ovl_program **ref_prog, ovl_reference **ref) {
  char *txt = gen_schedule(&t->s, &r->rs, r->rs.size, P_COMM, r->reps, 0,
                           true);
  ovl_error err = {0};
  ovl_status st;
  char name[128];
  measurement_name(t, r, "reference", name, sizeof name);
  st = txt == NULL ? OVL_ENOMEM : parse_text(&t->s, txt, name, ref_prog,
                                             &err);
  if (st == OVL_OK)
    st = ovl_reference_compute(*ref_prog, t->nranks, ref, &err);
  if (st != OVL_OK)
    fprintf(stderr, "%s: reference of %s: %s\n", progname, name,
            txt == NULL ? "out of memory" : err.msg);
  free(txt);
  return st != OVL_OK ? EXIT_RUNTIME : -1;
}

/* The check of placement p of row r: one more iteration, y fetched, and
 * compared with `ref` (in place: with its own reference, from the
 * pipeline). Each mismatch is said on stderr (not with --csv). Returns
 * -1, or the exit status (message printed). */
static int check_placement(sweep_state *t, row *r, int p,
                           const ovl_reference *ref) {
  ovl_run_opts ropts = {.size = sizeof ropts,
                        .iters = 1,
                        .warmup = 0,
                        .op_times = 0,
                        .graph = t->o.common.graph};
  ovl_program *prog = NULL;
  ovl_report *rep = NULL;
  bool inplace = p == P_INPLACE;
  char name[128], what[64];
  int rc;
  /* In place, one collective: each sum multiplies x by the rank count,
   * and reps of them would overflow (a value that is not finite fails the
   * check). */
  char *txt = gen_schedule(&t->s, &r->rs, r->rs.size, (placement)p,
                           inplace ? 1 : r->reps,
                           p == P_BOTH ? r->kernels : 0, true);
  snprintf(what, sizeof what, "%s:check", placement_names[p]);
  measurement_name(t, r, what, name, sizeof name);
  /* y is the only fetched variable of both programs, with the same values
   * expected: the pipeline compares this run with `ref`. */
  rc = run_schedule(t->world, &t->s, txt, name, &ropts, inplace ? NULL : ref,
                    &prog, &rep);
  if (rc < 0) {
    ovl_report_mode rm;
    const ovl_check *chk;
    ovl_report_mode_get(rep, 0, &rm);
    chk = rm.check;
    r->m[p].checked = true;
    r->m[p].wrong = chk->mismatched;
    t->total_wrong += chk->mismatched;
    /* The report: process 0's to print under mpirun. */
    for (size_t k = 0;
         k < chk->nmismatch && !t->o.csv && tool_prints_report(); k++)
      fprintf(stderr,
              "%s: %llu B on %s: rank %d: %lld of %lld elements "
              "wrong; first at [%lld]: got %.9g, expected %.9g\n",
              progname, (unsigned long long)r->rs.size, placement_names[p],
              chk->mismatch[k].rank, (long long)chk->mismatch[k].count,
              (long long)chk->mismatch[k].numel,
              (long long)chk->mismatch[k].first_index,
              chk->mismatch[k].got, chk->mismatch[k].expected);
  }
  free(txt);
  ovl_report_free(rep);
  ovl_program_free(prog);
  return rc;
}

/* The check of row r: one more iteration of each placement against the
 * float64 reference, where the host has the memory for it (the reference
 * keeps 8 bytes of every element of every rank, and each check keeps y
 * as doubles; else the row's #wrong is n/a). Returns -1, or the exit
 * status (message printed). */
static int check_row(sweep_state *t, row *r) {
  ovl_program *ref_prog = NULL;
  ovl_reference *ref = NULL;
  uint64_t need = mul_sat(mul_sat(r->rs.nx + 2 * r->rs.ny, 8),
                          (uint64_t)t->nranks);
  int rc;
  if (t->cpu)
    need += mul_sat((r->rs.nx + r->rs.ny) * t->s.esize + kernel_bytes(&t->s),
                    (uint64_t)t->nranks);
  /* The model computes nothing: nothing to check (#wrong n/a). */
  r->check = (t->mem == 0 || need <= t->mem / 2) &&
             strcmp(ovl_world_backend_name(t->world), "model") != 0;
  if (!r->check)
    return -1;
  rc = compute_reference(t, r, &ref_prog, &ref);
  for (int p = 0; p < P__COUNT && rc < 0; p++)
    if (p != P_INPLACE || has_inplace(t->o.coll))
      rc = check_placement(t, r, p, ref);
  ovl_reference_free(ref);
  ovl_program_free(ref_prog);
  return rc;
}

/* The row of size `bytes`: measured, checked, printed. Returns -1, or the
 * exit status (message printed). */
static int sweep_size(sweep_state *t, uint64_t bytes) {
  row r;
  int rc;
  memset(&r, 0, sizeof r);
  if (!row_sizes_for(t->o.coll, bytes, t->s.esize, t->nranks, &r.rs)) {
    if (!t->o.common.quiet && !t->o.csv)
      printf("# %llu B: too small for one %s element per rank; skipped\n",
             (unsigned long long)bytes, sweep_type_name(t->o.dtype));
    return -1;
  }
  r.reps = reps_for(&t->o, t->cpu, r.rs.size);
  if ((rc = measure_row(t, &r)) >= 0 || (rc = check_row(t, &r)) >= 0)
    return rc;
  if (!r.check)
    t->rows_unchecked++;
  t->rows++;
  sweep_print_row(t, &r);
  return -1;
}

/* The sweep after the flags: world, sizes, header, the kernel's
 * calibration, the rows, the footer. Returns the exit status. */
static int run_sweep(sweep_state *t) {
  bool comments = !t->o.common.quiet && !t->o.csv;
  int rc;
  if ((rc = open_world(t)) >= 0 || (rc = list_sizes(t)) >= 0)
    return rc;
  setup_schedules(t);
  if ((rc = check_cpu_memory(t)) >= 0)
    return rc;
  if (comments) {
    sweep_print_header(t);
    flush_output(stdout);
  }
  if ((rc = calibrate_kernel(t)) >= 0)
    return rc;
  if (comments)
    sweep_print_legend(t);
  else if (t->o.csv)
    sweep_print_csv_header();
  flush_output(stdout);
  for (int i = 0; i < t->nsizes; i++)
    if ((rc = sweep_size(t, t->sizes[i])) >= 0)
      return rc;
  /* Under mpirun the verdict is printed only where every process got
   * this far (one given more sizes stops it here, not after a PASS). */
  if ((rc = tool_agree(procs, -1)) >= 0)
    return rc;
  if (comments)
    sweep_print_footer(t);
  return t->total_wrong > 0 ? EXIT_WRONG : EXIT_SUCCESS;
}

/* The tool; main() adds the check of what went to stdout. */
static int overlap_sweep(int argc, char **argv) {
  sweep_state t;
  int rc;
  memset(&t, 0, sizeof t);
  sweep_options_init(&t.o);
  rc = sweep_parse_flags(argc, argv, &t.o);
  /* Under mpirun: every step the processes take together, from the
   * agreement on the flags on, ends within --timeout (plus the library's
   * margin). */
  ovl_procs_set_timeout(procs, t.o.common.timeout_s > 0
                                   ? t.o.common.timeout_s
                                   : COMMON_DEFAULT_TIMEOUT_S);
  rc = tool_agree(procs, rc);
  if (rc < 0)
    rc = run_sweep(&t);
  ovl_world_free(t.world);
  return rc;
}

int main(int argc, char **argv) {
  int rc;
  /* The name in messages, those of joining an MPI launch too. */
  if (argc > 0 && argv[0] != NULL) {
    const char *slash = strrchr(argv[0], '/');
    progname = slash ? slash + 1 : argv[0];
  }
  /* SIGINT says "interrupted"; a reader that goes away (`| head`) ends the
   * sweep at once. */
  tool_signals_init();
  rc = tool_procs_init(&argc, &argv, &procs);
  if (rc >= 0)
    return rc;
  tool_signals_rank(ovl_procs_rank(procs));
  if (tool_prints_report())
    tool_watch_reader(STDOUT_FILENO);
  /* Every way out, --help included: the table must have arrived (a full
   * disk, a closed pipe), or the exit says so. */
  rc = close_output(stdout, "standard output", overlap_sweep(argc, argv));
  /* Under mpirun every process exits with the same status (or, where the
   * processes lost each other, says why and keeps its own). */
  return tool_procs_end(procs, rc);
}
