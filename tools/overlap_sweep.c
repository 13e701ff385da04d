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
#include "tool_util.h"

#define EXIT_WRONG 1
#define EXIT_USAGE TOOL_EXIT_USAGE
#define EXIT_RUNTIME TOOL_EXIT_RUNTIME

static ovl_status parse_text(const sweep *s, const char *txt,
                             const char *name, ovl_program **prog,
                             ovl_error *err) {
  ovl_parse_opts popts = {.nranks = s->nranks};
  return ovl_program_parse(txt, strlen(txt), name, &popts, prog, err);
}

/* ------------------------------------------------------------------ */
/* Measurements.                                                        */
/* ------------------------------------------------------------------ */

typedef struct {
  bool ran;
  double coll_dev;  /* device seconds per collective (mean) */
  double coll_host; /* host seconds per collective: total / (iters x reps) */
  double kern_dev;  /* device seconds per kernel (mean), P_BOTH */
  bool checked;
  int64_t wrong;
} measure;

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
  ovl_pipeline_opts pl = {.modes = OVL_MODE_BIT(OVL_MODE_ASYNC), .run = 1,
                          .run_opts = *ropts, .rtol = o->common.rtol,
                          .atol = o->common.atol, .reference = ref,
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
/* Output.                                                              */
/* ------------------------------------------------------------------ */

static void format_time(double us, char *buf, size_t len) {
  if (us >= 10000.0)
    snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(buf, len, "%7.1f", us);
  else
    snprintf(buf, len, "%7.2f", us);
}

/* nccl-tests' names. */
static const char *type_name(ovl_dtype d) {
  switch (d) {
  case OVL_DTYPE_FLOAT64:
    return "double";
  case OVL_DTYPE_FLOAT16:
    return "half";
  case OVL_DTYPE_BFLOAT16:
    return "bfloat16";
  default:
    return "float";
  }
}

static const char *redop_name(const options *o) {
  return coll_reduces(o->coll) ? o->redop : "none";
}

static void print_table_header(void) {
  printf("#%51s%-33s%-33s%-33s%-33s%s\n", "", "on the calc stream",
         "on a comm stream", "in place, on a comm stream",
         "comm stream, compute beside", "  slowdown");
  printf("# %10s  %12s  %8s  %6s  %4s", "size", "count", "type", "redop",
         "root");
  for (int p = 0; p < P__COUNT; p++)
    printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  printf("  %6s  %6s\n", "kernel", "coll");
  printf("# %10s  %12s  %8s  %6s  %4s", "(B)", "(elements)", "", "", "");
  for (int p = 0; p < P__COUNT; p++)
    printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  printf("  %6s  %6s\n", "(x)", "(x)");
}

/* --csv: one line of column names, then one line a row. `time`, `algbw`
 * and `busbw` use the clock --timing names (the `timing` column); both
 * clocks' times follow. `wrong` is empty where the row was not checked. */
static void print_csv_header(void) {
  printf("size,count,type,redop,root,ranks,reps,kernels,timing");
  for (int p = 0; p < P__COUNT; p++) {
    const char *n = p == P_CALC      ? "calc"
                    : p == P_COMM    ? "comm"
                    : p == P_INPLACE ? "inplace"
                                     : "both";
    printf(",%s_time_us,%s_algbw,%s_busbw,%s_wrong,%s_device_us,%s_host_us",
           n, n, n, n, n, n);
  }
  printf(",kernel_alone_us,kernel_beside_us,kernel_slowdown,coll_slowdown\n");
}

/* ------------------------------------------------------------------ */
/* The sweep, step by step.                                             */
/* ------------------------------------------------------------------ */

/* Under mpirun: the processes (tool_procs_init); NULL for one. */
static ovl_procs *procs;

/* One sweep: the flags, the world, the sizes, and the totals of the rows
 * so far. */
typedef struct {
  options o;
  sweep s; /* what the generated schedules share (s.o is &o) */
  char op_name[64];
  ovl_world *world;
  bool cpu;
  int nranks;
  uint64_t mem; /* host memory; 0: unknown */
  uint64_t sizes[MAX_SIZES];
  int nsizes;
  double kern_cal; /* seconds a kernel alone, to size the rows' */
  int64_t total_wrong;
  int rows, rows_unchecked;
  /* busbw of the out-of-place and in-place measurements, for the footer */
  double busbw_sum;
  int busbw_n;
} sweep_state;

/* One row: a size's measurements in every placement and their check. */
typedef struct {
  row_sizes rs;
  int reps;    /* collectives an iteration */
  int kernels; /* kernels beside them (P_BOTH), and alone */
  double kern_alone; /* device seconds a kernel, the kernels alone */
  measure m[P__COUNT];
  bool check; /* checked against the reference (else n/a) */
} row;

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

/* The '#' lines before anything runs: what is swept, how it is timed. */
static void print_header(const sweep_state *t) {
  const options *o = &t->o;
  printf("# overlap_sweep %s: %s, backend %s, %d ranks (%s)\n",
         OVL_VERSION_STRING, coll_names[o->coll],
         ovl_world_backend_name(t->world), t->nranks,
         ovl_world_devices(t->world));
  if (o->coll == C_SENDRECV)
    printf("# %s, out of place (group { send_v2(x, peer=rank + 1); y = "
           "recv_v2(peer=rank - 1) })",
           ovl_dtype_name(o->dtype));
  else
    printf("# %s %s, out of place (y = %s(x))", ovl_dtype_name(o->dtype),
           redop_name(o), t->s.op_name);
  if (has_inplace(o->coll))
    printf(" and in place (%s(x))", t->s.op_name);
  else
    printf(" (%s has no in-place form here: n/a)", coll_names[o->coll]);
  printf("; each measurement: %d warmup + %d timed iterations of reps "
         "%s back to back\n",
         o->common.warmup, o->common.iters,
         o->coll == C_SENDRECV ? "groups" : "collectives");
  if (o->common.graph)
    printf("# CUDA graphs: each measurement's iteration is captured once "
           "as graphs and replayed, one launch an iteration (nccl-tests "
           "-G: reps collectives a launch); the check's iteration too\n");
  if (o->host_timing)
    printf("# time: host clock, per collective: timed iterations' total "
           "/ (%d iterations x reps), as nccl-tests times (calc and comm: "
           "runs without per-op timing events; compute beside: the "
           "iteration, kernels included)\n",
           o->common.iters);
  else
    printf("# time: device clock, per collective: mean over %d timed "
           "iterations x reps collectives x %d ranks\n",
           o->common.iters, t->nranks);
  if (t->cpu)
    printf("# cpu backend: these times are an emulation on host cores "
           "(every stream a thread; %ld cores here), not device figures\n",
           sysconf(_SC_NPROCESSORS_ONLN));
  printf("# algbw = size / time; busbw = algbw x %.4g (%s)\n",
         busbw_factor(o->coll, t->nranks), busbw_formula(o->coll));
}

/* The kernel alone, once, to size each row's kernels (t->kern_cal): 20
 * kernels an iteration. Each row measures its kernels alone again.
 * Returns -1, or the exit status (message printed). */
static int calibrate_kernel(sweep_state *t) {
  ovl_run_opts ropts = {.iters = t->o.common.iters,
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

/* The '#' lines on the kernel beside, the slowdowns and #wrong, then the
 * table's column names. */
static void print_legend(const sweep_state *t) {
  const options *o = &t->o;
  const sweep *s = &t->s;
  char b[32];
  if (o->compute == K_MATMUL)
    printf("# compute beside: kernels w = matmul_v2(a, b) on the calc "
           "stream, a, b and w %llu x %llu of %s (about %.1f us a kernel "
           "alone, %.3g TFLOP/s), as many as take, alone, about as long "
           "as the row's collectives alone on comm\n",
           (unsigned long long)s->matmul_n, (unsigned long long)s->matmul_n,
           ovl_dtype_name(o->dtype), t->kern_cal * 1e6,
           t->kern_cal > 0 ? 2.0 * (double)s->matmul_n *
                                 (double)s->matmul_n * (double)s->matmul_n /
                                 t->kern_cal / 1e12
                           : 0.0);
  else
    printf("# compute beside: kernels w = scale(z) on the calc stream, z "
           "and w %s of float32 each (about %.1f us a kernel alone), as "
           "many as take, alone, about as long as the row's collectives "
           "alone on comm\n",
           format_bytes(s->kernel_numel * 4, b, sizeof b),
           t->kern_cal * 1e6);
  printf("# slowdown: kernel = a kernel's time beside the collectives / "
         "alone (the same kernels, measured alone for each row); coll = "
         "the collective's time beside the kernels / alone on comm\n");
  printf("# #wrong: elements of y off the float64 reference (or not "
         "finite) after one more iteration (in place: of x after one "
         "collective); n/a: not checked (reference > half of host "
         "memory, %s)\n",
         t->mem > 0 ? format_bytes(t->mem, b, sizeof b) : "unknown");
  print_table_header();
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
  ovl_run_opts ropts = {.iters = o->common.iters,
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
  ovl_run_opts ropts = {.iters = 1, .warmup = 0, .op_times = 0,
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
  r->check = t->mem == 0 || need <= t->mem / 2;
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

/* Row r as --csv's line. */
static void print_row_csv(const sweep_state *t, const row *r, double kslow,
                          double cslow) {
  const options *o = &t->o;
  double factor = busbw_factor(o->coll, t->nranks);
  printf("%llu,%llu,%s,%s,%d,%d,%d,%d,%s", (unsigned long long)r->rs.size,
         (unsigned long long)r->rs.count, type_name(o->dtype),
         redop_name(o), coll_has_root(o->coll) ? o->root : -1, t->nranks,
         r->reps, r->kernels, o->host_timing ? "host" : "device");
  for (int p = 0; p < P__COUNT; p++) {
    const measure *m = &r->m[p];
    double tm = o->host_timing ? m->coll_host : m->coll_dev;
    double alg = tm > 0 ? (double)r->rs.size / tm / 1e9 : 0;
    if (!m->ran) { /* no in-place form: empty fields */
      printf(",,,,,,");
      continue;
    }
    printf(",%.6g,%.6g,%.6g,", tm * 1e6, alg, alg * factor);
    if (m->checked)
      printf("%lld", (long long)m->wrong);
    printf(",%.6g,%.6g", m->coll_dev * 1e6, m->coll_host * 1e6);
  }
  printf(",%.6g,%.6g,%.6g,%.6g\n", r->kern_alone * 1e6,
         r->m[P_BOTH].kern_dev * 1e6, kslow, cslow);
}

/* Row r as the table's line. */
static void print_row_table(const sweep_state *t, const row *r,
                            double kslow, double cslow) {
  const options *o = &t->o;
  double factor = busbw_factor(o->coll, t->nranks);
  printf("  %10llu  %12llu  %8s  %6s  %4d", (unsigned long long)r->rs.size,
         (unsigned long long)r->rs.count, type_name(o->dtype),
         redop_name(o), coll_has_root(o->coll) ? o->root : -1);
  for (int p = 0; p < P__COUNT; p++) {
    const measure *m = &r->m[p];
    double tm = o->host_timing ? m->coll_host : m->coll_dev;
    double alg = tm > 0 ? (double)r->rs.size / tm / 1e9 : 0;
    char ts[32], ws[32];
    if (!m->ran) { /* no in-place form */
      printf("  %7s  %6s  %6s  %6s", "n/a", "n/a", "n/a", "n/a");
      continue;
    }
    format_time(tm * 1e6, ts, sizeof ts);
    if (m->checked)
      snprintf(ws, sizeof ws, "%lld", (long long)m->wrong);
    else
      snprintf(ws, sizeof ws, "n/a");
    printf("  %7s  %6.2f  %6.2f  %6s", ts, alg, alg * factor, ws);
  }
  printf("  %6.2f  %6.2f\n", kslow, cslow);
}

/* Row r, shown now; and its share of the footer's average. */
static void print_row(sweep_state *t, const row *r) {
  const options *o = &t->o;
  double factor = busbw_factor(o->coll, t->nranks);
  double kslow = r->kern_alone > 0 ? r->m[P_BOTH].kern_dev / r->kern_alone
                                   : 0;
  double cslow = r->m[P_COMM].coll_dev > 0
                     ? r->m[P_BOTH].coll_dev / r->m[P_COMM].coll_dev
                     : 0;
  if (o->csv)
    print_row_csv(t, r, kslow, cslow);
  else
    print_row_table(t, r, kslow, cslow);
  flush_output(stdout);
  /* nccl-tests' average: the busbw of every out-of-place and in-place
   * measurement (on a comm stream, nothing beside), by this table's
   * clock. */
  for (int p = P_COMM; p <= P_INPLACE; p++) {
    double tm = o->host_timing ? r->m[p].coll_host : r->m[p].coll_dev;
    if (r->m[p].ran && tm > 0) {
      t->busbw_sum += (double)r->rs.size / tm / 1e9 * factor;
      t->busbw_n++;
    }
  }
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
             (unsigned long long)bytes, type_name(t->o.dtype));
    return -1;
  }
  r.reps = reps_for(&t->o, t->cpu, r.rs.size);
  if ((rc = measure_row(t, &r)) >= 0 || (rc = check_row(t, &r)) >= 0)
    return rc;
  if (!r.check)
    t->rows_unchecked++;
  t->rows++;
  print_row(t, &r);
  return -1;
}

/* The '#' lines after the table: rows not checked, nccl-tests' average
 * bus bandwidth, the verdict. */
static void print_footer(const sweep_state *t) {
  if (t->rows_unchecked > 0)
    printf("# %d of %d rows not checked (n/a): the reference would need "
           "more than half of the host memory\n",
           t->rows_unchecked, t->rows);
  /* nccl-tests' footer line, which scripts grep for. */
  printf("# Avg bus bandwidth    : %g \n",
         t->busbw_n > 0 ? t->busbw_sum / t->busbw_n : 0.0);
  if (t->total_wrong > 0)
    printf("# result: FAIL: %lld wrong elements\n",
           (long long)t->total_wrong);
  else
    printf("# result: PASS\n");
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
    print_header(t);
    flush_output(stdout);
  }
  if ((rc = calibrate_kernel(t)) >= 0)
    return rc;
  if (comments)
    print_legend(t);
  else if (t->o.csv)
    print_csv_header();
  flush_output(stdout);
  for (int i = 0; i < t->nsizes; i++)
    if ((rc = sweep_size(t, t->sizes[i])) >= 0)
      return rc;
  /* Under mpirun the verdict is printed only where every process got
   * this far (one given more sizes stops it here, not after a PASS). */
  if ((rc = tool_agree(procs, -1)) >= 0)
    return rc;
  if (comments)
    print_footer(t);
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
  rc = tool_procs_init(&argc, &argv, &procs);
  if (rc >= 0)
    return rc;
  /* Every way out, --help included: the table must have arrived (a full
   * disk, a closed pipe), or the exit says so. */
  rc = close_output(stdout, "standard output", overlap_sweep(argc, argv));
  /* Under mpirun every process exits with the same status (or, where the
   * processes lost each other, says why and keeps its own). */
  return tool_procs_end(procs, rc);
}
