/*
 * tools/overlap_sweep's command line: --help and the parsing of the flags
 * (sweep.h). Not part of libovl.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_flags.h"
#include "sweep.h"
#include "tool_util.h"

const char *const coll_names[C__COUNT] = {
    "allreduce", "broadcast", "allgather", "reducescatter",
    "reduce",    "alltoall",  "sendrecv"};

bool coll_reduces(coll c) {
  return c == C_ALLREDUCE || c == C_REDUCESCATTER || c == C_REDUCE;
}

bool coll_has_root(coll c) { return c == C_BROADCAST || c == C_REDUCE; }

/* The codes of overlap_sweep's own long flags that have no short name. */
enum {
  OPT_ROOT = 256,
  OPT_SIZES,
  OPT_REPS,
  OPT_COMPUTE_BYTES,
  OPT_TIMING,
  OPT_CSV,
  OPT_COMPUTE,
  OPT_MATMUL_SIZE
};

/* overlap_sweep's own flags; those overlap_sim takes too are
 * tools/common_flags.c's. */
static const struct option sweep_longopts[] = {
    {"collective", required_argument, NULL, 'c'},
    {"op", required_argument, NULL, 'o'},
    {"datatype", required_argument, NULL, 'd'},
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"reps", required_argument, NULL, OPT_REPS},
    {"compute-bytes", required_argument, NULL, OPT_COMPUTE_BYTES},
    {"compute", required_argument, NULL, OPT_COMPUTE},
    {"matmul-size", required_argument, NULL, OPT_MATMUL_SIZE},
    {"root", required_argument, NULL, OPT_ROOT},
    {"timing", required_argument, NULL, OPT_TIMING},
    {"csv", no_argument, NULL, OPT_CSV},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f);
static int sweep_take(void *opts, int c, const char *arg);

/* How overlap_sweep takes the shared flags: -b and -r are nccl-tests'
 * (the smallest size; the root, which is --root here), so --backend and
 * --ranks have no short name; help text from column 25. */
static const flag_set sweep_flag_set = {.tool = "overlap_sweep",
                                        .own = sweep_longopts,
                                        .own_short = "c:o:d:b:e:f:",
                                        .no_short = "br",
                                        .column = 25,
                                        .usage = usage,
                                        .take = sweep_take};

void sweep_options_init(options *o) {
  memset(o, 0, sizeof *o);
  common_opts_init(&o->common);
  o->coll = C_ALLREDUCE;
  o->redop = "sum";
  o->dtype = OVL_DTYPE_FLOAT32;
  o->factor = 2;
}

static void usage(FILE *f) {
  fprintf(f,
          "Usage: %s [OPTION]...\n"
          "Time one collective over a range of sizes, in nccl-tests' table "
          "shape, in four\n"
          "placements: on the calc stream, on a comm stream out of place and "
          "in place\n"
          "(nccl-tests' two groups; in place: allreduce, broadcast and "
          "reduce), and on a\n"
          "comm stream with a kernel running beside it on the calc stream: a "
          "memory-bound\n"
          "one (w = scale(z)), or a matrix multiply (w = matmul_v2(a, b), "
          "--compute=matmul);\n"
          "print how much the kernel and the collective slow each other down, "
          "and\n"
          "nccl-tests' '# Avg bus bandwidth' footer (the out-of-place and "
          "in-place groups).\n"
          "Every measurement is a generated schedule, run on every rank (one "
          "thread per\n"
          "device).\n"
          "\n"
          "  -c, --collective=NAME  allreduce (default), broadcast, "
          "allgather, reducescatter,\n"
          "                         reduce, alltoall, or sendrecv "
          "(nccl-tests': each rank sends\n"
          "                         to rank + 1 and receives from rank - 1 in "
          "one group)\n"
          "  -o, --op=OP            sum (default), max, min, prod (allreduce, "
          "reduce);\n"
          "                         reducescatter has sum only; the others do "
          "not reduce\n"
          "  -d, --datatype=TYPE    float32 (float, default), float64 "
          "(double), float16\n"
          "                         (half) or bfloat16\n"
          "  -b, --minbytes=SIZE    smallest size (default: cpu 1K, cuda 1M)\n"
          "  -e, --maxbytes=SIZE    largest size (default: cpu 1M, cuda 1G)\n"
          "  -f, --stepfactor=N     multiply the size by N each row (default "
          "2)\n"
          "      --sizes=LIST       the sizes, comma-separated, instead of "
          "-b, -e, -f\n"
          "                         SIZE: bytes, with K, M, G suffixes "
          "(x1024, as nccl-tests)\n",
          progname);
  common_flag_help(f, &sweep_flag_set, CF_ITERS,
                   "timed iterations per measurement (default 8)");
  common_flag_help(f, &sweep_flag_set, CF_WARMUP,
                   "untimed iterations before them (default 2)\n"
                   "(-n and -w count as in nccl-tests and overlap_sim)");
  fputs(
      "      --reps=N           collectives per iteration (default: by size, "
      "enough for\n"
      "                         iterations of a few ms; the table's time is "
      "per collective)\n"
      "      --compute=scale|matmul\n"
      "                         the kernel beside the collectives: scale "
      "(default; w =\n"
      "                         scale(z), memory-bound) or matmul (w = "
      "matmul_v2(a, b),\n"
      "                         square, of the collective's datatype: it "
      "competes for\n"
      "                         the SMs; cuda: cuBLAS)\n"
      "      --compute-bytes=SIZE\n"
      "                         size of scale's buffers z and w (default: cpu "
      "1M,\n"
      "                         cuda 256M: far beyond the L2 cache, so the "
      "kernel is\n"
      "                         memory-bound)\n"
      "      --matmul-size=N    matmul's a, b and w are N x N (default: cpu "
      "64, cuda 8192)\n"
      "      --root=R           broadcast's and reduce's root rank (default "
      "0)\n"
      "      --timing=device|host\n"
      "                         the table's time: device (default; device "
      "clock around\n"
      "                         each collective, mean over iterations, reps "
      "and ranks)\n"
      "                         or host (timed iterations' host-clock total / "
      "(iters x\n"
      "                         reps), as nccl-tests times); --csv gives "
      "both\n",
      f);
  common_flag_help(f, &sweep_flag_set, CF_GRAPH,
                   "cuda: each measurement's iteration (its reps "
                   "collectives,\n"
                   "and kernels) is captured once as a CUDA graph and\n"
                   "replayed, one launch an iteration (as nccl-tests -G: "
                   "the\n"
                   "time is still per collective)");
  fputs(
      "      --csv              comma-separated values, one header line, no "
      "comments\n",
      f);
  common_flag_help(f, &sweep_flag_set, CF_BACKEND, NULL);
  common_flag_help(f, &sweep_flag_set, CF_RANKS, NULL);
  common_flag_help(f, &sweep_flag_set, CF_GPUS_PER_PROCESS, NULL);
  common_flag_help(f, &sweep_flag_set, CF_TIMEOUT, NULL);
  common_flag_help(f, &sweep_flag_set, CF_RTOL, NULL);
  common_flag_help(f, &sweep_flag_set, CF_ATOL, NULL);
  common_flag_help(f, &sweep_flag_set, CF_COMM_PRIORITY, NULL);
  common_flag_help(f, &sweep_flag_set, CF_TF32,
                   "cuda: a float32 matmul on TF32 tensor cores (default "
                   "off)");
  common_flag_help(f, &sweep_flag_set, CF_NCCL_MIN_CTAS, NULL);
  common_flag_help(f, &sweep_flag_set, CF_QUIET,
                   "the table's rows only (no '#' lines)");
  common_flag_help(f, &sweep_flag_set, CF_HELP, NULL);
  common_flag_help(f, &sweep_flag_set, CF_VERSION, NULL);
  fputs(
      "\n"
      "#wrong: elements of the output that differ from the float64 reference "
      "after one\n"
      "more iteration (n/a: not checked, because the reference would need "
      "more than\n"
      "half of the host memory).\n"
      "\n"
      "Exit status: 0 ok, 1 wrong results, 2 usage error, 3 runtime error "
      "(device,\n"
      "collective timeout, a write error on standard output).\n",
      f);
}

/* "1024", "1K", "40M", "1g": bytes, with nccl-tests' 1024-based suffixes.
 * [s, s + len) need not be terminated. */
static bool parse_size_n(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0, mult = 1;
  size_t i = 0;
  if (len == 0 || !isdigit((unsigned char)s[0]))
    return false;
  for (; i < len && isdigit((unsigned char)s[i]); i++) {
    v = v * 10 + (uint64_t)(s[i] - '0');
    if (v > MAX_BYTES)
      return false;
  }
  if (i < len) {
    switch (s[i]) {
    case 'k': case 'K': mult = 1ULL << 10; break;
    case 'm': case 'M': mult = 1ULL << 20; break;
    case 'g': case 'G': mult = 1ULL << 30; break;
    default: return false;
    }
    if (++i != len)
      return false;
  }
  if (v == 0 || v > MAX_BYTES / mult)
    return false;
  *out = v * mult;
  return true;
}

static bool parse_size(const char *s, uint64_t *out) {
  return parse_size_n(s, strlen(s), out);
}

/* --collective=NAME. */
static int parse_coll(const char *arg, coll *out) {
  for (int k = 0; k < C__COUNT; k++)
    if (strcmp(arg, coll_names[k]) == 0) {
      *out = (coll)k;
      return -1;
    }
  return usage_error("--collective: unknown collective '%s' (allreduce, "
                     "broadcast, allgather, reducescatter, reduce, "
                     "alltoall, sendrecv)",
                     arg);
}

/* --datatype=TYPE: the schedule's names, and nccl-tests' (float, double,
 * half). */
static int parse_dtype(const char *arg, ovl_dtype *out) {
  if (strcmp(arg, "float") == 0)
    *out = OVL_DTYPE_FLOAT32;
  else if (strcmp(arg, "double") == 0)
    *out = OVL_DTYPE_FLOAT64;
  else if (strcmp(arg, "half") == 0)
    *out = OVL_DTYPE_FLOAT16;
  else if (!ovl_dtype_from_name(arg, out))
    return usage_error("--datatype: unknown type '%s' (float32, float64, "
                       "float16, bfloat16)",
                       arg);
  return -1;
}

/* --sizes=LIST: comma-separated sizes. */
static int parse_sizes(const char *arg, options *o) {
  const char *p = arg;
  o->nsizes = 0;
  for (;;) {
    const char *q = strchr(p, ',');
    size_t len = q != NULL ? (size_t)(q - p) : strlen(p);
    if (o->nsizes == MAX_SIZES)
      return usage_error("--sizes: more than %d sizes", MAX_SIZES);
    if (!parse_size_n(p, len, &o->sizes[o->nsizes]))
      return usage_error("--sizes: '%.*s' is not a size from 1 to 1024G "
                         "(bytes, with K, M, G suffixes)",
                         (int)(len < 64 ? len : 64), p);
    o->nsizes++;
    if (q == NULL)
      return -1;
    p = q + 1;
  }
}

/* -b SIZE, -e SIZE: the smallest and the largest size. */
static int parse_bound(const char *flag, const char *arg, uint64_t *bytes,
                       bool *given) {
  if (!parse_size(arg, bytes))
    return usage_error("%s: '%s' is not a size from 1 to 1024G (bytes, "
                       "with K, M, G suffixes)",
                       flag, arg);
  *given = true;
  return -1;
}

/* The flags of what runs beside the collectives, of its sizes and of the
 * table: --reps, --compute, --compute-bytes, --matmul-size, --root,
 * --timing, --csv. */
static int take_run_flag(options *o, int c, const char *arg) {
  int n;
  switch (c) {
  case OPT_REPS:
    if (!parse_int(arg, 1, 100000, &o->reps))
      return usage_error("--reps: '%s' is not a number from 1 to 100000",
                         arg);
    return -1;
  case OPT_COMPUTE_BYTES:
    if (!parse_size(arg, &o->compute_bytes) || o->compute_bytes < 4)
      return usage_error("--compute-bytes: '%s' is not a size from 4 to "
                         "1024G (bytes, with K, M, G suffixes)",
                         arg);
    o->compute_bytes_given = true;
    return -1;
  case OPT_COMPUTE:
    if (strcmp(arg, "scale") == 0)
      o->compute = K_SCALE;
    else if (strcmp(arg, "matmul") == 0)
      o->compute = K_MATMUL;
    else
      return usage_error("--compute: '%s' is not scale or matmul", arg);
    return -1;
  case OPT_MATMUL_SIZE:
    if (!parse_int(arg, 1, 65536, &n))
      return usage_error("--matmul-size: '%s' is not a number from 1 to "
                         "65536",
                         arg);
    o->matmul_n = (uint64_t)n;
    o->matmul_n_given = true;
    return -1;
  case OPT_ROOT:
    if (!parse_int(arg, 0, 63, &o->root))
      return usage_error("--root: '%s' is not a rank from 0 to 63", arg);
    o->root_given = true;
    return -1;
  case OPT_TIMING:
    if (strcmp(arg, "device") == 0)
      o->host_timing = false;
    else if (strcmp(arg, "host") == 0)
      o->host_timing = true;
    else
      return usage_error("--timing: '%s' is not device or host", arg);
    return -1;
  case OPT_CSV:
    o->csv = true;
    return -1;
  default:
    return FLAG_UNKNOWN;
  }
}

/* One of overlap_sweep's own flags (flag_set.take): the collective and
 * its sizes here, the rest in take_run_flag. */
static int sweep_take(void *opts, int c, const char *arg) {
  options *o = opts;
  int f;
  switch (c) {
  case 'c':
    return parse_coll(arg, &o->coll);
  case 'o':
    if (strcmp(arg, "sum") && strcmp(arg, "max") && strcmp(arg, "min") &&
        strcmp(arg, "prod"))
      return usage_error("--op: unknown reduction '%s' (sum, max, min, "
                         "prod)",
                         arg);
    o->redop = arg;
    o->redop_given = true;
    return -1;
  case 'd':
    return parse_dtype(arg, &o->dtype);
  case 'b':
    return parse_bound("--minbytes", arg, &o->minb, &o->minb_given);
  case 'e':
    return parse_bound("--maxbytes", arg, &o->maxb, &o->maxb_given);
  case 'f':
    if (!parse_int(arg, 2, 1 << 20, &f))
      return usage_error("--stepfactor: '%s' is not a factor from 2 to %d",
                         arg, 1 << 20);
    o->factor = (uint64_t)f;
    return -1;
  case OPT_SIZES:
    return parse_sizes(arg, o);
  default:
    return take_run_flag(o, c, arg);
  }
}

/* What the flags exclude together, and what one needs of another.
 * Returns -1, or the exit status (message printed). */
static int sweep_check_flags(const options *o) {
  if (o->redop_given && !coll_reduces(o->coll))
    return usage_error("--op: %s does not reduce", coll_names[o->coll]);
  if (o->coll == C_REDUCESCATTER && strcmp(o->redop, "sum") != 0)
    return usage_error("--op: reducescatter has sum only (c_reducescatter), "
                       "not '%s'",
                       o->redop);
  if (o->root_given && !coll_has_root(o->coll))
    return usage_error("--root: only broadcast and reduce have a root");
  if (o->nsizes > 0 && (o->minb_given || o->maxb_given))
    return usage_error("--sizes excludes -b/--minbytes and -e/--maxbytes");
  if (o->minb_given && o->maxb_given && o->minb > o->maxb)
    return usage_error("--minbytes (%llu) is larger than --maxbytes (%llu)",
                       (unsigned long long)o->minb,
                       (unsigned long long)o->maxb);
  if (o->compute_bytes_given && o->compute == K_MATMUL)
    return usage_error("--compute-bytes sizes scale's buffers: with "
                       "--compute=matmul, --matmul-size=N sizes the "
                       "matrices");
  if (o->matmul_n_given && o->compute != K_MATMUL)
    return usage_error("--matmul-size needs --compute=matmul");
  return common_flags_check(&o->common);
}

int sweep_parse_flags(int argc, char **argv, options *o) {
  int rc = common_flags_scan(&sweep_flag_set, argc, argv, &o->common, o);
  if (rc >= 0)
    return rc;
  if (optind < argc)
    return usage_error("unexpected argument '%s' (overlap_sweep takes no "
                       "schedule; it generates its own)",
                       argv[optind]);
  return sweep_check_flags(o);
}
