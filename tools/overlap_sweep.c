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
    fprintf(stderr, "%s: %s\n", progname, err.msg);
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

/* Under mpirun: the processes (tool_procs_init); NULL for one. */
static ovl_procs *procs;

/* The tool; main() adds the check of what went to stdout. */
static int overlap_sweep(int argc, char **argv) {
  options o;
  ovl_world *world = NULL;
  ovl_error err = {0};
  ovl_status st;
  sweep s;
  uint64_t sizes[MAX_SIZES];
  int nsizes = 0, rc;
  bool cpu;
  int nranks;
  uint64_t mem;
  int64_t total_wrong = 0;
  int rows_unchecked = 0, rows = 0;
  double kern_cal = 0; /* seconds a kernel alone, to size the rows' */
  /* busbw of the out-of-place and in-place measurements, for the footer */
  double busbw_sum = 0;
  int busbw_n = 0;
  char b1[32], b2[32];

  if (argc > 0 && argv[0] != NULL) {
    const char *slash = strrchr(argv[0], '/');
    progname = slash ? slash + 1 : argv[0];
  }
  sweep_options_init(&o);
  rc = tool_agree(procs, sweep_parse_flags(argc, argv, &o));
  if (rc >= 0)
    return rc;

  rc = common_make_world(&o.common, procs, 0, &world);
  if (rc >= 0)
    return rc;
  cpu = strcmp(ovl_world_backend_name(world), "cpu") == 0;
  nranks = ovl_world_nranks(world);
  if (o.root >= nranks) {
    rc = usage_error("--root: %d is not a rank (0 to %d)", o.root,
                     nranks - 1);
    goto out;
  }

  /* Sizes: the list, or -b .. -e by -f (defaults by backend). */
  if (o.nsizes > 0) {
    memcpy(sizes, o.sizes, (size_t)o.nsizes * sizeof sizes[0]);
    nsizes = o.nsizes;
  } else {
    uint64_t b = o.minb_given ? o.minb : cpu ? 1ULL << 10 : 1ULL << 20;
    uint64_t e = o.maxb_given ? o.maxb : cpu ? 1ULL << 20 : 1ULL << 30;
    if (b > e) {
      rc = usage_error("--minbytes (%llu) is larger than --maxbytes (%llu)",
                       (unsigned long long)b, (unsigned long long)e);
      goto out;
    }
    for (uint64_t v = b; v <= e; v *= o.factor) {
      if (nsizes == MAX_SIZES) {
        rc = usage_error("more than %d sizes from %llu to %llu by %llu",
                         MAX_SIZES, (unsigned long long)b,
                         (unsigned long long)e,
                         (unsigned long long)o.factor);
        goto out;
      }
      sizes[nsizes++] = v;
      if (v > UINT64_MAX / o.factor)
        break;
    }
  }

  memset(&s, 0, sizeof s);
  s.o = &o;
  s.nranks = nranks;
  s.esize = ovl_dtype_size(o.dtype);
  {
    static char opbuf[64];
    if (o.coll == C_ALLREDUCE || o.coll == C_REDUCE)
      snprintf(opbuf, sizeof opbuf, "c_%s_%s", coll_names[o.coll], o.redop);
    else if (o.coll == C_ALLTOALL)
      snprintf(opbuf, sizeof opbuf, "alltoall");
    else if (o.coll == C_SENDRECV)
      /* The group's span: its send_v2 and recv_v2 share it. */
      snprintf(opbuf, sizeof opbuf, "send_v2");
    else
      snprintf(opbuf, sizeof opbuf, "c_%s", coll_names[o.coll]);
    s.op_name = opbuf;
  }
  if (o.compute_bytes == 0)
    o.compute_bytes = cpu ? 1ULL << 20 : 256ULL << 20;
  s.kernel_numel = o.compute_bytes / 4;
  if (o.matmul_n == 0)
    o.matmul_n = cpu ? 64 : 8192;
  s.matmul_n = o.matmul_n;
  s.kernel_op = o.compute == K_MATMUL ? "matmul_v2" : "scale";

  /* The cpu backend's devices are host memory: refuse sizes that cannot
   * fit before running anything (x, y, z and w on every rank). */
  mem = host_memory();
  if (cpu && mem > 0) {
    for (int i = 0; i < nsizes; i++) {
      row_sizes rs;
      uint64_t need;
      if (!row_sizes_for(o.coll, sizes[i], s.esize, nranks, &rs))
        continue;
      need = mul_sat((rs.nx + rs.ny) * s.esize + kernel_bytes(&s),
                     (uint64_t)nranks);
      if (need > mem) {
        fprintf(stderr,
                "%s: size %llu needs %s of host memory on the cpu backend "
                "(%d ranks); this machine has %s. Use a smaller "
                "-e/--maxbytes or fewer --ranks.\n",
                progname, (unsigned long long)sizes[i],
                format_bytes(need, b1, sizeof b1), nranks,
                format_bytes(mem, b2, sizeof b2));
        rc = EXIT_USAGE;
        goto out;
      }
    }
  }

  if (!o.common.quiet && !o.csv) {
    printf("# overlap_sweep %s: %s, backend %s, %d ranks (%s)\n",
           OVL_VERSION_STRING, coll_names[o.coll],
           ovl_world_backend_name(world), nranks, ovl_world_devices(world));
    if (o.coll == C_SENDRECV)
      printf("# %s, out of place (group { send_v2(x, peer=rank + 1); y = "
             "recv_v2(peer=rank - 1) })",
             ovl_dtype_name(o.dtype));
    else
      printf("# %s %s, out of place (y = %s(x))", ovl_dtype_name(o.dtype),
             redop_name(&o), s.op_name);
    if (has_inplace(o.coll))
      printf(" and in place (%s(x))", s.op_name);
    else
      printf(" (%s has no in-place form here: n/a)", coll_names[o.coll]);
    printf("; each measurement: %d warmup + %d timed iterations of reps "
           "%s back to back\n",
           o.common.warmup, o.common.iters,
           o.coll == C_SENDRECV ? "groups" : "collectives");
    if (o.common.graph)
      printf("# CUDA graphs: each measurement's iteration is captured once "
             "as graphs and replayed, one launch an iteration (nccl-tests "
             "-G: reps collectives a launch); the check's iteration too\n");
    if (o.host_timing)
      printf("# time: host clock, per collective: timed iterations' total "
             "/ (%d iterations x reps), as nccl-tests times (calc and comm: "
             "runs without per-op timing events; compute beside: the "
             "iteration, kernels included)\n",
             o.common.iters);
    else
      printf("# time: device clock, per collective: mean over %d timed "
             "iterations x reps collectives x %d ranks\n",
             o.common.iters, nranks);
    if (cpu)
      printf("# cpu backend: these times are an emulation on host cores "
             "(every stream a thread; %ld cores here), not device figures\n",
             sysconf(_SC_NPROCESSORS_ONLN));
    printf("# algbw = size / time; busbw = algbw x %.4g (%s)\n",
           busbw_factor(o.coll, nranks), busbw_formula(o.coll));
    flush_output(stdout);
  }

  /* The kernel alone, once, to size each row's kernels: 20 kernels an
   * iteration. Each row measures its kernels alone again. */
  {
    ovl_run_opts ropts = {.iters = o.common.iters, .warmup = o.common.warmup,
                          .op_times = 1, .graph = o.common.graph};
    ovl_program *prog = NULL;
    ovl_report *rep = NULL;
    char *txt = gen_schedule(&s, NULL, 0, P_CALC, 0, 20, false);
    rc = run_schedule(world, &s, txt, "<sweep:kernel-alone>", &ropts, NULL,
                      &prog, &rep);
    if (rc < 0)
      kern_cal = mean_op_time(rep, nranks, s.kernel_op);
    free(txt);
    ovl_report_free(rep);
    ovl_program_free(prog);
    if (rc >= 0)
      goto out;
  }
  if (!o.common.quiet && !o.csv) {
    if (o.compute == K_MATMUL)
      printf("# compute beside: kernels w = matmul_v2(a, b) on the calc "
             "stream, a, b and w %llu x %llu of %s (about %.1f us a kernel "
             "alone, %.3g TFLOP/s), as many as take, alone, about as long "
             "as the row's collectives alone on comm\n",
             (unsigned long long)s.matmul_n, (unsigned long long)s.matmul_n,
             ovl_dtype_name(o.dtype), kern_cal * 1e6,
             kern_cal > 0 ? 2.0 * (double)s.matmul_n * (double)s.matmul_n *
                                (double)s.matmul_n / kern_cal / 1e12
                          : 0.0);
    else
      printf("# compute beside: kernels w = scale(z) on the calc stream, z "
             "and w %s of float32 each (about %.1f us a kernel alone), as "
             "many as take, alone, about as long as the row's collectives "
             "alone on comm\n",
             format_bytes(s.kernel_numel * 4, b1, sizeof b1),
             kern_cal * 1e6);
    printf("# slowdown: kernel = a kernel's time beside the collectives / "
           "alone (the same kernels, measured alone for each row); coll = "
           "the collective's time beside the kernels / alone on comm\n");
    printf("# #wrong: elements of y off the float64 reference (or not "
           "finite) after one more iteration (in place: of x after one "
           "collective); n/a: not checked (reference > half of host "
           "memory, %s)\n",
           mem > 0 ? format_bytes(mem, b1, sizeof b1) : "unknown");
    print_table_header();
  } else if (o.csv) {
    print_csv_header();
  }
  flush_output(stdout);

  for (int si = 0; si < nsizes; si++) {
    row_sizes rs;
    measure m[P__COUNT];
    int reps, kernels = 0;
    double kern_alone = 0;
    ovl_program *ref_prog = NULL;
    ovl_reference *ref = NULL;
    bool check;
    char name[128];

    memset(m, 0, sizeof m);
    if (!row_sizes_for(o.coll, sizes[si], s.esize, nranks, &rs)) {
      if (!o.common.quiet && !o.csv)
        printf("# %llu B: too small for one %s element per rank; "
               "skipped\n",
               (unsigned long long)sizes[si], type_name(o.dtype));
      continue;
    }
    reps = reps_for(&o, cpu, rs.size);

    /* The timed measurements: the collective on calc, on comm, on comm
     * with kernels beside it (as many kernels as take, alone, about as long
     * as the collectives alone on comm), then those kernels alone. */
    for (int p = 0; p <= P__COUNT && rc < 0; p++) {
      ovl_run_opts ropts = {.iters = o.common.iters, .warmup = o.common.warmup,
                            .op_times = 1, .graph = o.common.graph};
      ovl_program *prog = NULL;
      ovl_report *rep = NULL;
      bool alone = p == P__COUNT; /* the kernels alone, last */
      char *txt;
      if (p == P_INPLACE && !has_inplace(o.coll))
        continue;
      if (p == P_BOTH) {
        double span = m[P_COMM].coll_dev * reps;
        double k = kern_cal > 0 ? span / kern_cal : 1;
        kernels = k < 1 ? 1 : k > 100000 ? 100000 : (int)lround(k);
      }
      if (alone)
        txt = gen_schedule(&s, NULL, 0, P_CALC, 0, kernels, false);
      else
        txt = gen_schedule(&s, &rs, rs.size, (placement)p, reps,
                           p == P_BOTH ? kernels : 0, false);
      snprintf(name, sizeof name, "<sweep:%s:%llu:%s>", coll_names[o.coll],
               (unsigned long long)rs.size,
               alone ? "kernels-alone" : placement_names[p]);
      rc = run_schedule(world, &s, txt, name, &ropts, NULL, &prog, &rep);
      if (rc < 0 && alone) {
        kern_alone = mean_op_time(rep, nranks, s.kernel_op);
      } else if (rc < 0) {
        m[p].ran = true;
        m[p].coll_dev = mean_op_time(rep, nranks, s.op_name);
        m[p].coll_host = host_per_coll(rep, reps);
        if (p == P_BOTH)
          m[p].kern_dev = mean_op_time(rep, nranks, s.kernel_op);
      }
      if (rc < 0 && (p == P_CALC || p == P_COMM || p == P_INPLACE)) {
        /* The host-timed figure again, without the timing events around
         * every op: they cost a few microseconds a collective (measured on
         * 2 x H200: 163.5 us device-timed against 160.0 us host-timed
         * without them at 40 MB), and nccl-tests times with none. */
        ovl_report *clean = NULL;
        ropts.op_times = 0;
        rc = run_program(world, &o, prog, name, &ropts, NULL, &clean);
        if (rc < 0)
          m[p].coll_host = host_per_coll(clean, reps);
        ovl_report_free(clean);
      }
      free(txt);
      ovl_report_free(rep);
      ovl_program_free(prog);
    }
    if (rc >= 0)
      goto out;

    /* The check: one more iteration of each, with y fetched, against the
     * float64 reference (the same for the three out-of-place placements:
     * computed once, from the comm-stream form; in place, its own). The
     * reference keeps 8 bytes of every element of every rank, and each
     * check keeps y as doubles. */
    {
      uint64_t need = mul_sat(mul_sat(rs.nx + 2 * rs.ny, 8),
                              (uint64_t)nranks);
      if (cpu)
        need += mul_sat((rs.nx + rs.ny) * s.esize + kernel_bytes(&s),
                        (uint64_t)nranks);
      check = mem == 0 || need <= mem / 2;
    }
    if (check) {
      char *txt = gen_schedule(&s, &rs, rs.size, P_COMM, reps, 0, true);
      snprintf(name, sizeof name, "<sweep:%s:%llu:reference>",
               coll_names[o.coll], (unsigned long long)rs.size);
      st = txt == NULL ? OVL_ENOMEM
                       : parse_text(&s, txt, name, &ref_prog, &err);
      if (st == OVL_OK)
        st = ovl_reference_compute(ref_prog, nranks, &ref, &err);
      free(txt);
      if (st != OVL_OK) {
        fprintf(stderr, "%s: reference of %s: %s\n", progname, name,
                txt == NULL ? "out of memory" : err.msg);
        ovl_program_free(ref_prog);
        rc = EXIT_RUNTIME;
        goto out;
      }
    }
    for (int p = 0; check && p < P__COUNT && rc < 0; p++) {
      ovl_run_opts ropts = {.iters = 1, .warmup = 0, .op_times = 0,
                            .graph = o.common.graph};
      ovl_program *prog = NULL;
      ovl_report *rep = NULL;
      bool inplace = p == P_INPLACE;
      char *txt;
      if (inplace && !has_inplace(o.coll))
        continue;
      /* In place, one collective: each sum multiplies x by the rank
       * count, and reps of them would overflow (a value that is not
       * finite fails the check); its own reference, from the pipeline. */
      txt = gen_schedule(&s, &rs, rs.size, (placement)p, inplace ? 1 : reps,
                         p == P_BOTH ? kernels : 0, true);
      snprintf(name, sizeof name, "<sweep:%s:%llu:%s:check>",
               coll_names[o.coll], (unsigned long long)rs.size,
               placement_names[p]);
      /* y is the only fetched variable of both programs, with the same
       * values expected: the pipeline compares this run with `ref`. */
      rc = run_schedule(world, &s, txt, name, &ropts, inplace ? NULL : ref,
                        &prog, &rep);
      if (rc < 0) {
        ovl_report_mode rm;
        const ovl_check *chk;
        ovl_report_mode_get(rep, 0, &rm);
        chk = rm.check;
        m[p].checked = true;
        m[p].wrong = chk->mismatched;
        total_wrong += chk->mismatched;
        for (size_t k = 0; k < chk->nmismatch && !o.csv; k++)
          fprintf(stderr,
                  "%s: %llu B on %s: rank %d: %lld of %lld elements "
                  "wrong; first at [%lld]: got %.9g, expected %.9g\n",
                  progname, (unsigned long long)rs.size, placement_names[p],
                  chk->mismatch[k].rank, (long long)chk->mismatch[k].count,
                  (long long)chk->mismatch[k].numel,
                  (long long)chk->mismatch[k].first_index,
                  chk->mismatch[k].got, chk->mismatch[k].expected);
      }
      free(txt);
      ovl_report_free(rep);
      ovl_program_free(prog);
    }
    ovl_reference_free(ref);
    ovl_program_free(ref_prog);
    if (rc >= 0)
      goto out;
    if (!check)
      rows_unchecked++;
    rows++;

    /* The row. */
    {
      double factor = busbw_factor(o.coll, nranks);
      double kslow = kern_alone > 0 ? m[P_BOTH].kern_dev / kern_alone : 0;
      double cslow = m[P_COMM].coll_dev > 0
                         ? m[P_BOTH].coll_dev / m[P_COMM].coll_dev
                         : 0;
      int root = coll_has_root(o.coll) ? o.root : -1;
      if (o.csv) {
        printf("%llu,%llu,%s,%s,%d,%d,%d,%d,%s", (unsigned long long)rs.size,
               (unsigned long long)rs.count, type_name(o.dtype),
               redop_name(&o), root, nranks, reps, kernels,
               o.host_timing ? "host" : "device");
        for (int p = 0; p < P__COUNT; p++) {
          double t = o.host_timing ? m[p].coll_host : m[p].coll_dev;
          double alg = t > 0 ? (double)rs.size / t / 1e9 : 0;
          if (!m[p].ran) { /* no in-place form: empty fields */
            printf(",,,,,,");
            continue;
          }
          printf(",%.6g,%.6g,%.6g,", t * 1e6, alg, alg * factor);
          if (m[p].checked)
            printf("%lld", (long long)m[p].wrong);
          printf(",%.6g,%.6g", m[p].coll_dev * 1e6, m[p].coll_host * 1e6);
        }
        printf(",%.6g,%.6g,%.6g,%.6g\n", kern_alone * 1e6,
               m[P_BOTH].kern_dev * 1e6, kslow, cslow);
      } else {
        printf("  %10llu  %12llu  %8s  %6s  %4d",
               (unsigned long long)rs.size, (unsigned long long)rs.count,
               type_name(o.dtype), redop_name(&o), root);
        for (int p = 0; p < P__COUNT; p++) {
          double t = o.host_timing ? m[p].coll_host : m[p].coll_dev;
          double alg = t > 0 ? (double)rs.size / t / 1e9 : 0;
          char ts[32], ws[32];
          if (!m[p].ran) { /* no in-place form */
            printf("  %7s  %6s  %6s  %6s", "n/a", "n/a", "n/a", "n/a");
            continue;
          }
          format_time(t * 1e6, ts, sizeof ts);
          if (m[p].checked)
            snprintf(ws, sizeof ws, "%lld", (long long)m[p].wrong);
          else
            snprintf(ws, sizeof ws, "n/a");
          printf("  %7s  %6.2f  %6.2f  %6s", ts, alg, alg * factor, ws);
        }
        printf("  %6.2f  %6.2f\n", kslow, cslow);
      }
      flush_output(stdout);
      /* nccl-tests' average: the busbw of every out-of-place and in-place
       * measurement (on a comm stream, nothing beside), by this table's
       * clock. */
      for (int p = P_COMM; p <= P_INPLACE; p++) {
        double t = o.host_timing ? m[p].coll_host : m[p].coll_dev;
        if (m[p].ran && t > 0) {
          busbw_sum += (double)rs.size / t / 1e9 * factor;
          busbw_n++;
        }
      }
    }
  }

  if (!o.common.quiet && !o.csv) {
    if (rows_unchecked > 0)
      printf("# %d of %d rows not checked (n/a): the reference would need "
             "more than half of the host memory\n",
             rows_unchecked, rows);
    /* nccl-tests' footer line, which scripts grep for. */
    printf("# Avg bus bandwidth    : %g \n",
           busbw_n > 0 ? busbw_sum / busbw_n : 0.0);
    if (total_wrong > 0)
      printf("# result: FAIL: %lld wrong elements\n",
             (long long)total_wrong);
    else
      printf("# result: PASS\n");
  }
  rc = total_wrong > 0 ? EXIT_WRONG : EXIT_SUCCESS;

out:
  ovl_world_free(world);
  return rc;
}

int main(int argc, char **argv) {
  int rc = tool_procs_init(&argc, &argv, &procs);
  if (rc >= 0)
    return rc;
  /* Every way out, --help included: the table must have arrived (a full
   * disk, a closed pipe), or the exit says so. */
  rc = close_output(stdout, "standard output", overlap_sweep(argc, argv));
  /* Under mpirun every process exits with the same status. */
  rc = ovl_procs_agree_exit(procs, rc);
  ovl_procs_free(procs);
  return rc;
}
