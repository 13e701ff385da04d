/*
 * tools/overlap_sweep's command line: --help and the parsing of the flags
 * (sweep.h). Not part of libovl.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"
#include "tool_util.h"

const char *const coll_names[C__COUNT] = {
    "allreduce", "broadcast", "allgather", "reducescatter",
    "reduce",    "alltoall",  "sendrecv"};

bool coll_reduces(coll c) {
  return c == C_ALLREDUCE || c == C_REDUCESCATTER || c == C_REDUCE;
}

bool coll_has_root(coll c) { return c == C_BROADCAST || c == C_REDUCE; }

static void usage(FILE *f) {
  fprintf(
      f,
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
      "  -c, --collective=NAME  allreduce (default), broadcast, allgather, "
      "reducescatter,\n"
      "                         reduce, alltoall, or sendrecv (nccl-tests': "
      "each rank sends\n"
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
      "      --sizes=LIST       the sizes, comma-separated, instead of -b, "
      "-e, -f\n"
      "                         SIZE: bytes, with K, M, G suffixes (x1024, "
      "as nccl-tests)\n"
      "  -n, --iters=N          timed iterations per measurement (default "
      "8)\n"
      "  -w, --warmup=N         untimed iterations before them (default "
      "2)\n"
      "                         (-n and -w count as in nccl-tests and "
      "overlap_sim)\n"
      "      --reps=N           collectives per iteration (default: by "
      "size, enough for\n"
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
      "                         size of scale's buffers z and w "
      "(default: cpu 1M,\n"
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
      "                         or host (timed iterations' host-clock total "
      "/ (iters x\n"
      "                         reps), as nccl-tests times); --csv gives "
      "both\n"
      "      --graph            cuda: each measurement's iteration (its "
      "reps collectives,\n"
      "                         and kernels) is captured once as a CUDA "
      "graph and\n"
      "                         replayed, one launch an iteration (as "
      "nccl-tests -G: the\n"
      "                         time is still per collective)\n"
      "      --csv              comma-separated values, one header line, "
      "no comments\n"
      "      --backend=NAME     auto (cuda if a GPU is visible, else cpu), "
      "cpu, cuda\n"
      "      --ranks=N          ranks (default: cpu 2, cuda every GPU)\n"
      "      --gpus-per-process=G  under mpirun (a build with --with-mpi): "
      "the ranks\n"
      "                         each process drives (default 1); ranks = "
      "processes x G\n"
      "      --timeout=SEC      a collective or stream stuck this long is an "
      "error\n"
      "                         (default 60)\n"
      "      --rtol=X, --atol=X tolerances of the check (default by "
      "dtype: rtol, atol\n"
      "                         float32, float64 1e-5, 1e-6; float16 "
      "2e-3, 1e-5;\n"
      "                         bfloat16 1.6e-2, 1e-5)\n"
      "      --comm-priority=high|default\n"
      "                         cuda: stream priority of the comm streams\n"
      "      --tf32=on|off      cuda: a float32 matmul on TF32 tensor cores "
      "(default off)\n"
      "      --nccl-min-ctas=N, --nccl-max-ctas=N\n"
      "                         cuda: NCCL's CTA limits (ncclConfig_t); 0 = "
      "NCCL's choice\n"
      "  -q, --quiet            the table's rows only (no '#' lines)\n"
      "  -h, --help             show this help and exit\n"
      "  -V, --version          show the version and exit\n"
      "\n"
      "#wrong: elements of the output that differ from the float64 "
      "reference after one\n"
      "more iteration (n/a: not checked, because the reference would need "
      "more than\n"
      "half of the host memory).\n"
      "\n"
      "Exit status: 0 ok, 1 wrong results, 2 usage error, 3 runtime error "
      "(device,\n"
      "collective timeout, a write error on standard output).\n",
      progname);
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

int sweep_parse_flags(int argc, char **argv, options *o) {
  enum {
    OPT_BACKEND = 256,
    OPT_RANKS,
    OPT_TIMEOUT,
    OPT_ROOT,
    OPT_SIZES,
    OPT_REPS,
    OPT_COMPUTE_BYTES,
    OPT_TIMING,
    OPT_CSV,
    OPT_RTOL,
    OPT_ATOL,
    OPT_COMM_PRIORITY,
    OPT_MIN_CTAS,
    OPT_MAX_CTAS,
    OPT_GRAPH,
    OPT_COMPUTE,
    OPT_MATMUL_SIZE,
    OPT_TF32,
    OPT_GPUS_PER_PROCESS
  };
  static const struct option longopts[] = {
      {"collective", required_argument, NULL, 'c'},
      {"op", required_argument, NULL, 'o'},
      {"datatype", required_argument, NULL, 'd'},
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, 'w'},
      {"sizes", required_argument, NULL, OPT_SIZES},
      {"reps", required_argument, NULL, OPT_REPS},
      {"compute-bytes", required_argument, NULL, OPT_COMPUTE_BYTES},
      {"compute", required_argument, NULL, OPT_COMPUTE},
      {"matmul-size", required_argument, NULL, OPT_MATMUL_SIZE},
      {"tf32", required_argument, NULL, OPT_TF32},
      {"root", required_argument, NULL, OPT_ROOT},
      {"timing", required_argument, NULL, OPT_TIMING},
      {"csv", no_argument, NULL, OPT_CSV},
      {"graph", no_argument, NULL, OPT_GRAPH},
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"ranks", required_argument, NULL, OPT_RANKS},
      {"gpus-per-process", required_argument, NULL, OPT_GPUS_PER_PROCESS},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"rtol", required_argument, NULL, OPT_RTOL},
      {"atol", required_argument, NULL, OPT_ATOL},
      {"comm-priority", required_argument, NULL, OPT_COMM_PRIORITY},
      {"nccl-min-ctas", required_argument, NULL, OPT_MIN_CTAS},
      {"nccl-max-ctas", required_argument, NULL, OPT_MAX_CTAS},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  int c, rc;

  opterr = 0;
  while ((c = getopt_long(argc, argv, ":c:o:d:b:e:f:n:w:qhV", longopts,
                          NULL)) != -1) {
    switch (c) {
    case 'c': {
      int k;
      for (k = 0; k < C__COUNT; k++)
        if (strcmp(optarg, coll_names[k]) == 0)
          break;
      if (k == C__COUNT)
        return usage_error("--collective: unknown collective '%s' "
                           "(allreduce, broadcast, allgather, "
                           "reducescatter, reduce, alltoall, sendrecv)",
                           optarg);
      o->coll = (coll)k;
      break;
    }
    case 'o':
      if (strcmp(optarg, "sum") && strcmp(optarg, "max") &&
          strcmp(optarg, "min") && strcmp(optarg, "prod"))
        return usage_error("--op: unknown reduction '%s' (sum, max, min, "
                           "prod)",
                           optarg);
      o->redop = optarg;
      o->redop_given = true;
      break;
    case 'd':
      /* The schedule's names, and nccl-tests' (float, double, half). */
      if (strcmp(optarg, "float") == 0)
        o->dtype = OVL_DTYPE_FLOAT32;
      else if (strcmp(optarg, "double") == 0)
        o->dtype = OVL_DTYPE_FLOAT64;
      else if (strcmp(optarg, "half") == 0)
        o->dtype = OVL_DTYPE_FLOAT16;
      else if (!ovl_dtype_from_name(optarg, &o->dtype))
        return usage_error("--datatype: unknown type '%s' (float32, "
                           "float64, float16, bfloat16)",
                           optarg);
      break;
    case 'b':
      if (!parse_size(optarg, &o->minb))
        return usage_error("--minbytes: '%s' is not a size (bytes >= 1, "
                           "with K, M, G suffixes)",
                           optarg);
      o->minb_given = true;
      break;
    case 'e':
      if (!parse_size(optarg, &o->maxb))
        return usage_error("--maxbytes: '%s' is not a size (bytes >= 1, "
                           "with K, M, G suffixes)",
                           optarg);
      o->maxb_given = true;
      break;
    case 'f': {
      int f;
      if (!parse_int(optarg, 2, 1 << 20, &f))
        return usage_error("--stepfactor: '%s' is not a factor from 2 to "
                           "%d",
                           optarg, 1 << 20);
      o->factor = (uint64_t)f;
      break;
    }
    case OPT_SIZES: {
      const char *p = optarg;
      o->nsizes = 0;
      for (;;) {
        const char *q = strchr(p, ',');
        size_t len = q != NULL ? (size_t)(q - p) : strlen(p);
        if (o->nsizes == MAX_SIZES)
          return usage_error("--sizes: more than %d sizes", MAX_SIZES);
        if (!parse_size_n(p, len, &o->sizes[o->nsizes]))
          return usage_error("--sizes: '%.*s' is not a size (bytes >= 1, "
                             "with K, M, G suffixes)",
                             (int)(len < 64 ? len : 64), p);
        o->nsizes++;
        if (q == NULL)
          break;
        p = q + 1;
      }
      break;
    }
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
    case OPT_REPS:
      if (!parse_int(optarg, 1, 100000, &o->reps))
        return usage_error("--reps: '%s' is not a number from 1 to 100000",
                           optarg);
      break;
    case OPT_COMPUTE_BYTES:
      if (!parse_size(optarg, &o->compute_bytes) || o->compute_bytes < 4)
        return usage_error("--compute-bytes: '%s' is not a size (bytes >= "
                           "4, with K, M, G suffixes)",
                           optarg);
      o->compute_bytes_given = true;
      break;
    case OPT_COMPUTE:
      if (strcmp(optarg, "scale") == 0)
        o->compute = K_SCALE;
      else if (strcmp(optarg, "matmul") == 0)
        o->compute = K_MATMUL;
      else
        return usage_error("--compute: '%s' is not scale or matmul",
                           optarg);
      break;
    case OPT_MATMUL_SIZE: {
      int n;
      if (!parse_int(optarg, 1, 65536, &n))
        return usage_error("--matmul-size: '%s' is not a number from 1 to "
                           "65536",
                           optarg);
      o->matmul_n = (uint64_t)n;
      o->matmul_n_given = true;
      break;
    }
    case OPT_TF32:
      if ((rc = parse_tuning_flag("--tf32", optarg, &o->tf32)) != 0)
        return rc;
      break;
    case OPT_ROOT:
      if (!parse_int(optarg, 0, 63, &o->root))
        return usage_error("--root: '%s' is not a rank from 0 to 63",
                           optarg);
      o->root_given = true;
      break;
    case OPT_TIMING:
      if (strcmp(optarg, "device") == 0)
        o->host_timing = false;
      else if (strcmp(optarg, "host") == 0)
        o->host_timing = true;
      else
        return usage_error("--timing: '%s' is not device or host", optarg);
      break;
    case OPT_CSV:
      o->csv = true;
      break;
    case OPT_GRAPH:
      o->graph = true;
      break;
    case OPT_BACKEND:
      if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "cpu") != 0 &&
          strcmp(optarg, "cuda") != 0)
        return usage_error("--backend: unknown backend '%s' (auto, cpu, "
                           "cuda)",
                           optarg);
      o->backend = optarg;
      break;
    case OPT_GPUS_PER_PROCESS: {
      int rc = parse_gpus_per_process(optarg, &o->gpus_per_process);
      if (rc >= 0)
        return rc;
      break;
    }
    case OPT_RANKS:
      if (!parse_int(optarg, 1, 64, &o->ranks))
        return usage_error("--ranks: '%s' is not a number from 1 to 64",
                           optarg);
      break;
    case OPT_TIMEOUT:
      if (!parse_double(optarg, 0.001, 1e6, &o->timeout_s))
        return usage_error("--timeout: '%s' is not a number of seconds "
                           "(0.001 to 1e6)",
                           optarg);
      break;
    case OPT_RTOL:
      if (!parse_double(optarg, 0, 1e300, &o->rtol))
        return usage_error("--rtol: '%s' is not a number >= 0", optarg);
      break;
    case OPT_ATOL:
      if (!parse_double(optarg, 0, 1e300, &o->atol))
        return usage_error("--atol: '%s' is not a number >= 0", optarg);
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
      o->quiet = true;
      break;
    case 'h':
      usage(stdout);
      /* Longer than stdout's buffer: a write error happens in there. */
      flush_output(stdout);
      return 0;
    case 'V':
      printf("overlap_sweep (overlap-sim) %s\n", OVL_VERSION_STRING);
      return 0;
    case ':':
      return usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
      return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    return usage_error("unexpected argument '%s' (overlap_sweep takes no "
                       "schedule; it generates its own)",
                       argv[optind]);
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
  if (o->graph && strcmp(o->backend, "cpu") == 0)
    return usage_error("--graph: the cpu backend has no graphs (CUDA "
                       "graphs need --backend=cuda or auto with a GPU)");
  if (o->compute_bytes_given && o->compute == K_MATMUL)
    return usage_error("--compute-bytes sizes scale's buffers: with "
                       "--compute=matmul, --matmul-size=N sizes the "
                       "matrices");
  if (o->matmul_n_given && o->compute != K_MATMUL)
    return usage_error("--matmul-size needs --compute=matmul");
  if (o->nccl_min_ctas > 0 && o->nccl_max_ctas > 0 &&
      o->nccl_min_ctas > o->nccl_max_ctas)
    return usage_error("--nccl-min-ctas (%d) is larger than --nccl-max-ctas "
                       "(%d)",
                       o->nccl_min_ctas, o->nccl_max_ctas);
  return -1;
}
