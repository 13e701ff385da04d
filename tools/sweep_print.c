/* overlap_sweep's output: see sweep_print.h. */
#include "sweep_print.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tool_util.h"

static void format_time(double us, char *buf, size_t len) {
  if (us >= 10000.0)
    snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(buf, len, "%7.1f", us);
  else
    snprintf(buf, len, "%7.2f", us);
}

/* nccl-tests' names. */
const char *sweep_type_name(ovl_dtype d) {
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

void sweep_print_table_header(void) {
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
void sweep_print_csv_header(void) {
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

/* The '#' lines before anything runs: what is swept, how it is timed. */
void sweep_print_header(const sweep_state *t) {
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
    /* The cpu backend's timers: the host clock as each emulated stream
     * reaches them, no device clock. */
    printf("# time: %s, per collective: mean over %d timed iterations x "
           "reps collectives x %d ranks\n",
           t->cpu ? "host clock as each emulated stream reaches the op"
                  : "device clock",
           o->common.iters, t->nranks);
  if (t->cpu)
    printf("# cpu backend: these times are an emulation on host cores "
           "(every stream a thread; %ld cores here), not device figures\n",
           sysconf(_SC_NPROCESSORS_ONLN));
  printf("# algbw = size / time; busbw = algbw x %.4g (%s)\n",
         busbw_factor(o->coll, t->nranks), busbw_formula(o->coll));
}

/* The '#' lines on the kernel beside, the slowdowns and #wrong, then the
 * table's column names. */
void sweep_print_legend(const sweep_state *t) {
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
  if (strcmp(ovl_world_backend_name(t->world), "model") == 0)
    printf("# model backend: the times are predicted (docs/MODEL.md); "
           "#wrong is n/a: nothing is computed\n");
  else
    printf("# #wrong: elements of y off the float64 reference (or not "
           "finite) after one more iteration (in place: of x after one "
           "collective); n/a: not checked (reference > half of host "
           "memory, %s)\n",
           t->mem > 0 ? format_bytes(t->mem, b, sizeof b) : "unknown");
  sweep_print_table_header();
}

/* Row r as --csv's line. */
static void print_row_csv(const sweep_state *t, const row *r, double kslow,
                          double cslow) {
  const options *o = &t->o;
  double factor = busbw_factor(o->coll, t->nranks);
  printf("%llu,%llu,%s,%s,%d,%d,%d,%d,%s", (unsigned long long)r->rs.size,
         (unsigned long long)r->rs.count, sweep_type_name(o->dtype),
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
         (unsigned long long)r->rs.count, sweep_type_name(o->dtype),
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
void sweep_print_row(sweep_state *t, const row *r) {
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

/* The '#' lines after the table: rows not checked, nccl-tests' average
 * bus bandwidth, the verdict. */
void sweep_print_footer(const sweep_state *t) {
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
