/*
 * overlap_sweep: one collective over a range of sizes, in nccl-tests'
 * shape, in three placements: on the calc stream, on a comm stream, and on
 * a comm stream with a memory-bound compute kernel running beside it on
 * the calc stream. The last placement gives what nobody else prints: how
 * much compute and communication slow each other down on this box.
 *
 * Every measurement is a schedule generated as text and parsed with
 * ovl_program_parse, so the sweep runs the same path as every schedule.
 *
 * Exit codes: 0 ok, 1 wrong results, 2 usage error, 3 runtime error (also
 * the table not written to stdout).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ovl.h"
#include "tool_util.h"

#define EXIT_WRONG 1
#define EXIT_USAGE 2
#define EXIT_RUNTIME 3

#define MAX_SIZES 256
/* Largest size accepted (1 TiB): far beyond any device, but no overflow in
 * the element counts below. */
#define MAX_BYTES (1ULL << 40)

/* ------------------------------------------------------------------ */
/* Collectives and their nccl-tests conventions.                        */
/* ------------------------------------------------------------------ */

typedef enum { C_ALLREDUCE, C_BROADCAST, C_ALLGATHER, C_REDUCESCATTER } coll;

static const char *const coll_names[] = {"allreduce", "broadcast",
                                         "allgather", "reducescatter"};

/* busbw = algbw * factor (nccl-tests' PERFORMANCE.md): allreduce moves
 * 2(n-1)/n of the buffer through each rank's link, allgather and
 * reducescatter (n-1)/n of the total, broadcast the buffer once. */
static double busbw_factor(coll c, int n) {
  switch (c) {
  case C_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case C_ALLGATHER:
  case C_REDUCESCATTER:
    return (double)(n - 1) / n;
  case C_BROADCAST:
  default:
    return 1.0;
  }
}

/* One row's sizes, as nccl-tests counts them. `size` (the size column and
 * what algbw divides) is the whole buffer for allreduce and broadcast, the
 * receive buffer (nranks x the send buffer) for allgather and the send
 * buffer (nranks x the receive buffer) for reducescatter. `count` is the
 * count passed to the collective: the buffer's elements for allreduce and
 * broadcast, one rank's share for allgather and reducescatter (whose share
 * is rounded down to 16 bytes, as nccl-tests does). */
typedef struct {
  uint64_t size;   /* bytes */
  uint64_t count;  /* elements */
  uint64_t nx, ny; /* elements of the input x and the output y, per rank */
} row_sizes;

static bool row_sizes_for(coll c, uint64_t bytes, size_t esize, int n,
                          row_sizes *rs) {
  uint64_t count = bytes / esize;
  memset(rs, 0, sizeof *rs);
  if (c == C_ALLREDUCE || c == C_BROADCAST) {
    rs->count = rs->nx = rs->ny = count;
  } else {
    uint64_t align = 16 / esize;
    uint64_t per = count / (uint64_t)n / align * align;
    rs->count = per;
    rs->nx = c == C_ALLGATHER ? per : per * (uint64_t)n;
    rs->ny = c == C_ALLGATHER ? per * (uint64_t)n : per;
    count = per * (uint64_t)n;
  }
  rs->size = count * esize;
  return rs->count > 0;
}

/* ------------------------------------------------------------------ */
/* Options.                                                            */
/* ------------------------------------------------------------------ */

typedef enum { P_CALC, P_COMM, P_BOTH, P__COUNT } placement;

typedef struct {
  coll coll;
  const char *redop; /* sum, max, min, prod */
  bool redop_given;
  ovl_dtype dtype;
  uint64_t minb, maxb;
  bool minb_given, maxb_given;
  uint64_t factor;
  uint64_t sizes[MAX_SIZES];
  int nsizes; /* --sizes; 0: -b .. -e by -f */
  int iters, warmup;
  int reps; /* collectives per iteration; 0: by size */
  uint64_t compute_bytes; /* 0: backend default */
  const char *backend;
  int ranks;
  double timeout_s;
  int root;
  bool root_given;
  bool host_timing;
  bool csv, quiet;
  double rtol, atol;
  int comm_priority_high;
  int nccl_min_ctas, nccl_max_ctas;
} options;


static void usage(FILE *f) {
  fprintf(
      f,
      "Usage: %s [OPTION]...\n"
      "Time one collective over a range of sizes, in nccl-tests' table "
      "shape, in three\n"
      "placements: on the calc stream, on a comm stream, and on a comm "
      "stream with a\n"
      "memory-bound kernel (w = scale(z)) running beside it on the calc "
      "stream; print\n"
      "how much the kernel and the collective slow each other down. Every "
      "measurement\n"
      "is a generated schedule, run on every rank (one thread per "
      "device).\n"
      "\n"
      "  -c, --collective=NAME  allreduce (default), broadcast, allgather, "
      "reducescatter\n"
      "  -o, --op=OP            sum (default), max, min, prod (allreduce); "
      "reducescatter\n"
      "                         has sum only; broadcast and allgather do "
      "not reduce\n"
      "  -d, --datatype=TYPE    float32 (float, default) or float64 "
      "(double)\n"
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
      "                         (as nccl-tests: -n counts the timed ones "
      "only)\n"
      "      --reps=N           collectives per iteration (default: by "
      "size, enough for\n"
      "                         iterations of a few ms; the table's time is "
      "per collective)\n"
      "      --compute-bytes=SIZE\n"
      "                         size of the kernel's buffers z and w "
      "(default: cpu 1M,\n"
      "                         cuda 256M: far beyond the L2 cache, so the "
      "kernel is\n"
      "                         memory-bound)\n"
      "      --root=R           broadcast's root rank (default 0)\n"
      "      --timing=device|host\n"
      "                         the table's time: device (default; device "
      "clock around\n"
      "                         each collective, mean over iterations, reps "
      "and ranks)\n"
      "                         or host (timed iterations' host-clock total "
      "/ (iters x\n"
      "                         reps), as nccl-tests times); --csv gives "
      "both\n"
      "      --csv              comma-separated values, one header line, "
      "no comments\n"
      "      --backend=NAME     auto (cuda if a GPU is visible, else cpu), "
      "cpu, cuda\n"
      "      --ranks=N          ranks (default: cpu 2, cuda every GPU)\n"
      "      --timeout=SEC      a collective or stream stuck this long is an "
      "error\n"
      "                         (default 60)\n"
      "      --rtol=X, --atol=X tolerances of the check (default 1e-5, "
      "1e-6)\n"
      "      --comm-priority=high|default\n"
      "                         cuda: stream priority of the comm streams\n"
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

/* Returns -1 to go on, or an exit status. */
static int parse_options(int argc, char **argv, options *o) {
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
    OPT_MAX_CTAS
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
      {"root", required_argument, NULL, OPT_ROOT},
      {"timing", required_argument, NULL, OPT_TIMING},
      {"csv", no_argument, NULL, OPT_CSV},
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"ranks", required_argument, NULL, OPT_RANKS},
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
      for (k = 0; k < 4; k++)
        if (strcmp(optarg, coll_names[k]) == 0)
          break;
      if (k == 4)
        return usage_error("--collective: unknown collective '%s' "
                           "(allreduce, broadcast, allgather, "
                           "reducescatter)",
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
      if (strcmp(optarg, "float32") == 0 || strcmp(optarg, "float") == 0)
        o->dtype = OVL_DTYPE_FLOAT32;
      else if (strcmp(optarg, "float64") == 0 ||
               strcmp(optarg, "double") == 0)
        o->dtype = OVL_DTYPE_FLOAT64;
      else
        return usage_error("--datatype: unknown type '%s' (float32, "
                           "float64)",
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
    case OPT_BACKEND:
      if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "cpu") != 0 &&
          strcmp(optarg, "cuda") != 0)
        return usage_error("--backend: unknown backend '%s' (auto, cpu, "
                           "cuda)",
                           optarg);
      o->backend = optarg;
      break;
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
      return EXIT_SUCCESS;
    case 'V':
      printf("overlap_sweep (overlap-sim) %s\n", OVL_VERSION_STRING);
      return EXIT_SUCCESS;
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
  if (o->redop_given && (o->coll == C_BROADCAST || o->coll == C_ALLGATHER))
    return usage_error("--op: %s does not reduce", coll_names[o->coll]);
  if (o->coll == C_REDUCESCATTER && strcmp(o->redop, "sum") != 0)
    return usage_error("--op: reducescatter has sum only (c_reducescatter), "
                       "not '%s'",
                       o->redop);
  if (o->root_given && o->coll != C_BROADCAST)
    return usage_error("--root: only broadcast has a root");
  if (o->nsizes > 0 && (o->minb_given || o->maxb_given))
    return usage_error("--sizes excludes -b/--minbytes and -e/--maxbytes");
  if (o->minb_given && o->maxb_given && o->minb > o->maxb)
    return usage_error("--minbytes (%llu) is larger than --maxbytes (%llu)",
                       (unsigned long long)o->minb,
                       (unsigned long long)o->maxb);
  if (o->nccl_min_ctas > 0 && o->nccl_max_ctas > 0 &&
      o->nccl_min_ctas > o->nccl_max_ctas)
    return usage_error("--nccl-min-ctas (%d) is larger than --nccl-max-ctas "
                       "(%d)",
                       o->nccl_min_ctas, o->nccl_max_ctas);
  return -1;
}

/* ------------------------------------------------------------------ */



/* ------------------------------------------------------------------ */
/* Generated schedules.                                                 */
/* ------------------------------------------------------------------ */

/* A growing string. */
typedef struct {
  char *s;
  size_t len, cap;
  bool failed;
} text;

static void tprintf(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tprintf(text *t, const char *fmt, ...) {
  va_list ap;
  int n;
  if (t->failed)
    return;
  for (;;) {
    size_t room = t->cap - t->len;
    va_start(ap, fmt);
    n = vsnprintf(t->s != NULL ? t->s + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap - t->len <= (size_t)n)
      cap *= 2;
    char *s = realloc(t->s, cap);
    if (s == NULL) {
      t->failed = true;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

typedef struct {
  const options *o;
  int nranks;
  size_t esize;
  const char *op_name;   /* c_allreduce_sum, c_broadcast, ... */
  uint64_t kernel_numel; /* elements of z and w (float32) */
} sweep;

static const char *placement_names[] = {"calc", "comm", "comm+compute"};

/* The schedule of one measurement: `reps` collectives y = coll(x) in the
 * placement, and for P_BOTH `kernels` kernels w = scale(z) on the calc
 * stream, interleaved in proportion so that both streams get work from
 * the start however fast the host enqueues. With `fetch`, y is fetched at
 * the end (the check run). reps == 0 and kernels > 0: the kernel alone. */
static char *gen_schedule(const sweep *s, const row_sizes *rs, uint64_t bytes,
                          placement p, int reps, int kernels, bool fetch) {
  text t = {0};
  const char *dt = ovl_dtype_name(s->o->dtype);
  char collstr[256];

  if (reps == 0)
    tprintf(&t, "# overlap_sweep: the compute kernel alone\n");
  else
    tprintf(&t,
            "# overlap_sweep: %s %s %s, %llu B, %d a iteration, on the %s "
            "stream%s\n",
            coll_names[s->o->coll],
            s->o->coll == C_ALLREDUCE || s->o->coll == C_REDUCESCATTER
                ? s->o->redop
                : "",
            dt, (unsigned long long)bytes, reps,
            p == P_CALC ? "calc" : "comm",
            p == P_BOTH ? ", with w = scale(z) beside it on the calc stream"
                        : "");
  if (reps > 0)
    tprintf(&t,
            "x = data(shape=[%llu], dtype=%s, init=uniform, seed=1, "
            "per_rank=true)\n",
            (unsigned long long)rs->nx, dt);
  if (kernels > 0)
    tprintf(&t, "z = data(shape=[%llu], dtype=float32, init=fill, "
                "value=1.0)\n",
            (unsigned long long)s->kernel_numel);
  if (s->o->coll == C_BROADCAST)
    snprintf(collstr, sizeof collstr,
             "y = %s(x, root=%d, ring_id=0, use_calc_stream=%s)\n",
             s->op_name, s->o->root, p == P_CALC ? "true" : "false");
  else
    snprintf(collstr, sizeof collstr,
             "y = %s(x, ring_id=0, use_calc_stream=%s)\n", s->op_name,
             p == P_CALC ? "true" : "false");

  if (kernels == 0) {
    tprintf(&t, "repeat %d {\n  %s}\n", reps, collstr);
  } else if (reps == 0) {
    tprintf(&t, "repeat %d {\n  w = scale(z, scale=2.0)\n}\n", kernels);
  } else {
    /* Merge by position: kernel j at j/kernels, collective i at i/reps;
     * a kernel first on a tie. */
    int i = 0, j = 0;
    while (i < reps || j < kernels) {
      if (j < kernels &&
          (i == reps || (uint64_t)j * (uint64_t)reps <=
                            (uint64_t)i * (uint64_t)kernels)) {
        tprintf(&t, "w = scale(z, scale=2.0)\n");
        j++;
      } else {
        tprintf(&t, "%s", collstr);
        i++;
      }
    }
  }
  if (reps > 0 && p != P_CALC)
    tprintf(&t, "c_wait_comm(y, ring_id=0)\n");
  if (fetch)
    tprintf(&t, "fetch(y)\n");
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  return t.s;
}

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

/* Mean device seconds per op named `name` (over the timed iterations, the
 * ops and the ranks). */
static double mean_op_time(const ovl_program *prog, const ovl_result *res,
                           int nranks, const char *name) {
  size_t nops = ovl_program_op_count(prog);
  double sum = 0;
  long count = 0;
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

/* Parse and run a generated schedule; on failure print why (the generated
 * text's name says which measurement) and return an exit status, else -1. */
static int run_schedule(ovl_world *world, const sweep *s, const char *txt,
                        const char *name, const ovl_run_opts *ropts,
                        ovl_program **prog, ovl_result **res) {
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
  st = ovl_world_run(world, *prog, ropts, res, &err);
  if (st != OVL_OK) {
    flush_output(stdout);
    fprintf(stderr, "%s: %s: %s\n", progname, name, err.msg);
    return EXIT_RUNTIME;
  }
  return -1;
}

/* Collectives per iteration when --reps is not given: about `target`
 * bytes moved per iteration (so that an iteration is long against its
 * launch and barrier costs), from 5 to 200 (as tools/bench/seed.sh did). */
static int reps_for(const options *o, bool cpu, uint64_t size) {
  uint64_t target = cpu ? 16ULL << 20 : 2000000000ULL;
  uint64_t r = target / size;
  if (o->reps > 0)
    return o->reps;
  return r < 5 ? 5 : r > 200 ? 200 : (int)r;
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

static const char *type_name(ovl_dtype d) {
  return d == OVL_DTYPE_FLOAT32 ? "float" : "double";
}

static const char *redop_name(const options *o) {
  return o->coll == C_ALLREDUCE || o->coll == C_REDUCESCATTER ? o->redop
                                                              : "none";
}

static void print_table_header(void) {
  printf("#%49s%-33s%-33s%-33s%s\n", "", "on the calc stream",
         "on a comm stream", "comm stream, compute beside", "  slowdown");
  printf("# %10s  %12s  %6s  %6s  %4s", "size", "count", "type", "redop",
         "root");
  for (int p = 0; p < P__COUNT; p++)
    printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  printf("  %6s  %6s\n", "kernel", "coll");
  printf("# %10s  %12s  %6s  %6s  %4s", "(B)", "(elements)", "", "", "");
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
    const char *n = p == P_CALC ? "calc" : p == P_COMM ? "comm" : "both";
    printf(",%s_time_us,%s_algbw,%s_busbw,%s_wrong,%s_device_us,%s_host_us",
           n, n, n, n, n, n);
  }
  printf(",kernel_alone_us,kernel_beside_us,kernel_slowdown,coll_slowdown\n");
}

/* ------------------------------------------------------------------ */

/* The tool; main() adds the check of what went to stdout. */
static int overlap_sweep(int argc, char **argv) {
  options o = {.coll = C_ALLREDUCE, .redop = "sum",
               .dtype = OVL_DTYPE_FLOAT32, .factor = 2, .iters = 8,
               .warmup = 2, .backend = "auto", .rtol = 1e-5, .atol = 1e-6};
  ovl_world_opts wopts = {0};
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
  char b1[32], b2[32];

  if (argc > 0 && argv[0] != NULL) {
    const char *slash = strrchr(argv[0], '/');
    progname = slash ? slash + 1 : argv[0];
  }
  rc = parse_options(argc, argv, &o);
  if (rc >= 0)
    return rc;

  wopts.backend = o.backend;
  wopts.nranks = o.ranks;
  wopts.timeout_s = o.timeout_s;
  st = ovl_world_create(&wopts, &world, &err);
  if (st == OVL_OK)
    st = tool_tune_world(world, 0, o.comm_priority_high, o.nccl_min_ctas,
                         o.nccl_max_ctas, &err);
  if (st != OVL_OK) {
    fprintf(stderr, "%s: %s\n", progname, err.msg);
    ovl_world_free(world);
    return st == OVL_ENODEV || st == OVL_EINVAL ? EXIT_USAGE : EXIT_RUNTIME;
  }
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
    if (o.coll == C_ALLREDUCE)
      snprintf(opbuf, sizeof opbuf, "c_allreduce_%s", o.redop);
    else
      snprintf(opbuf, sizeof opbuf, "c_%s", coll_names[o.coll]);
    s.op_name = opbuf;
  }
  if (o.compute_bytes == 0)
    o.compute_bytes = cpu ? 1ULL << 20 : 256ULL << 20;
  s.kernel_numel = o.compute_bytes / 4;

  /* The cpu backend's devices are host memory: refuse sizes that cannot
   * fit before running anything (x, y, z and w on every rank). */
  mem = host_memory();
  if (cpu && mem > 0) {
    for (int i = 0; i < nsizes; i++) {
      row_sizes rs;
      uint64_t need;
      if (!row_sizes_for(o.coll, sizes[i], s.esize, nranks, &rs))
        continue;
      need = mul_sat((rs.nx + rs.ny) * s.esize + 2 * s.kernel_numel * 4,
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

  if (!o.quiet && !o.csv) {
    printf("# overlap_sweep %s: %s, backend %s, %d ranks (%s)\n",
           OVL_VERSION_STRING, coll_names[o.coll],
           ovl_world_backend_name(world), nranks, ovl_world_devices(world));
    printf("# %s %s, out of place (y = %s(x)); each measurement: %d "
           "warmup + %d timed iterations of reps collectives back to back\n",
           ovl_dtype_name(o.dtype), redop_name(&o), s.op_name, o.warmup,
           o.iters);
    if (o.host_timing)
      printf("# time: host clock, per collective: timed iterations' total "
             "/ (%d iterations x reps), as nccl-tests times (calc and comm: "
             "runs without per-op timing events; compute beside: the "
             "iteration, kernels included)\n",
             o.iters);
    else
      printf("# time: device clock, per collective: mean over %d timed "
             "iterations x reps collectives x %d ranks\n",
             o.iters, nranks);
    printf("# algbw = size / time; busbw = algbw x %.4g (%s)\n",
           busbw_factor(o.coll, nranks),
           o.coll == C_ALLREDUCE   ? "2(n-1)/n"
           : o.coll == C_BROADCAST ? "1"
                                   : "(n-1)/n");
    flush_output(stdout);
  }

  /* The kernel alone, once, to size each row's kernels: 20 kernels an
   * iteration. Each row measures its kernels alone again. */
  {
    ovl_run_opts ropts = {.iters = o.iters, .warmup = o.warmup,
                          .op_times = 1};
    ovl_program *prog = NULL;
    ovl_result *res = NULL;
    char *txt = gen_schedule(&s, NULL, 0, P_CALC, 0, 20, false);
    rc = run_schedule(world, &s, txt, "<sweep:kernel-alone>", &ropts, &prog,
                      &res);
    if (rc < 0)
      kern_cal = mean_op_time(prog, res, nranks, "scale");
    free(txt);
    ovl_result_free(res);
    ovl_program_free(prog);
    if (rc >= 0)
      goto out;
  }
  if (!o.quiet && !o.csv) {
    printf("# compute beside: kernels w = scale(z) on the calc stream, z "
           "and w %s of float32 each (about %.1f us a kernel alone), as many "
           "as take, alone, about as long as the row's collectives alone on "
           "comm\n",
           format_bytes(s.kernel_numel * 4, b1, sizeof b1), kern_cal * 1e6);
    printf("# slowdown: kernel = a kernel's time beside the collectives / "
           "alone (the same kernels, measured alone for each row); coll = "
           "the collective's time beside the kernels / alone on comm\n");
    printf("# #wrong: elements of y off the float64 reference after one "
           "more iteration; n/a: not checked (reference > half of host "
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
      if (!o.quiet && !o.csv)
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
      ovl_run_opts ropts = {.iters = o.iters, .warmup = o.warmup,
                            .op_times = 1};
      ovl_program *prog = NULL;
      ovl_result *res = NULL;
      bool alone = p == P__COUNT; /* the kernels alone, last */
      char *txt;
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
      rc = run_schedule(world, &s, txt, name, &ropts, &prog, &res);
      if (rc < 0 && alone) {
        kern_alone = mean_op_time(prog, res, nranks, "scale");
      } else if (rc < 0) {
        const double *t = ovl_result_times(res);
        double total = 0;
        for (int i = 0; i < ovl_result_iters(res); i++)
          total += t[i];
        m[p].ran = true;
        m[p].coll_dev = mean_op_time(prog, res, nranks, s.op_name);
        m[p].coll_host = total / ((double)ovl_result_iters(res) * reps);
        if (p == P_BOTH)
          m[p].kern_dev = mean_op_time(prog, res, nranks, "scale");
      }
      if (rc < 0 && (p == P_CALC || p == P_COMM)) {
        /* The host-timed figure again, without the timing events around
         * every op: they cost a few microseconds a collective (measured on
         * 2 x H200: 163.5 us device-timed against 160.0 us host-timed
         * without them at 40 MB), and nccl-tests times with none. */
        ovl_result *clean = NULL;
        ovl_error e2 = {0};
        ropts.op_times = 0;
        if (ovl_world_run(world, prog, &ropts, &clean, &e2) != OVL_OK) {
          flush_output(stdout);
          fprintf(stderr, "%s: %s: %s\n", progname, name, e2.msg);
          rc = EXIT_RUNTIME;
        } else {
          const double *t = ovl_result_times(clean);
          double total = 0;
          for (int i = 0; i < ovl_result_iters(clean); i++)
            total += t[i];
          m[p].coll_host = total / ((double)ovl_result_iters(clean) * reps);
        }
        ovl_result_free(clean);
      }
      free(txt);
      ovl_result_free(res);
      ovl_program_free(prog);
    }
    if (rc >= 0)
      goto out;

    /* The check: one more iteration of each, with y fetched, against the
     * float64 reference (the same for the three placements: computed once,
     * from the comm-stream form). The reference keeps 8 bytes of every
     * element of every rank, and each check keeps y as doubles. */
    {
      uint64_t need = mul_sat(mul_sat(rs.nx + 2 * rs.ny, 8),
                              (uint64_t)nranks);
      if (cpu)
        need += mul_sat((rs.nx + rs.ny) * s.esize + 8 * s.kernel_numel,
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
      ovl_run_opts ropts = {.iters = 1, .warmup = 0, .op_times = 0};
      ovl_program *prog = NULL;
      ovl_result *res = NULL;
      ovl_check chk = {0};
      char *txt = gen_schedule(&s, &rs, rs.size, (placement)p, reps,
                               p == P_BOTH ? kernels : 0, true);
      snprintf(name, sizeof name, "<sweep:%s:%llu:%s:check>",
               coll_names[o.coll], (unsigned long long)rs.size,
               placement_names[p]);
      rc = run_schedule(world, &s, txt, name, &ropts, &prog, &res);
      /* y is the only fetched variable of both programs: the reference's
       * program describes it for this run's result too. */
      if (rc < 0) {
        st = ovl_check_result(ref_prog, res, ref, o.rtol, o.atol, &chk,
                              &err);
        if (st != OVL_OK) {
          fprintf(stderr, "%s: check of %s: %s\n", progname, name, err.msg);
          rc = EXIT_RUNTIME;
        } else {
          m[p].checked = true;
          m[p].wrong = chk.mismatched;
          total_wrong += chk.mismatched;
          for (size_t k = 0; k < chk.nmismatch && !o.csv; k++)
            fprintf(stderr,
                    "%s: %llu B on %s: rank %d: %lld of %lld elements "
                    "wrong; first at [%lld]: got %.9g, expected %.9g\n",
                    progname, (unsigned long long)rs.size,
                    placement_names[p], chk.mismatch[k].rank,
                    (long long)chk.mismatch[k].count,
                    (long long)chk.mismatch[k].numel,
                    (long long)chk.mismatch[k].first_index,
                    chk.mismatch[k].got, chk.mismatch[k].expected);
        }
      }
      ovl_check_release(&chk);
      free(txt);
      ovl_result_free(res);
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
      int root = o.coll == C_BROADCAST ? o.root : -1;
      if (o.csv) {
        printf("%llu,%llu,%s,%s,%d,%d,%d,%d,%s", (unsigned long long)rs.size,
               (unsigned long long)rs.count, type_name(o.dtype),
               redop_name(&o), root, nranks, reps, kernels,
               o.host_timing ? "host" : "device");
        for (int p = 0; p < P__COUNT; p++) {
          double t = o.host_timing ? m[p].coll_host : m[p].coll_dev;
          double alg = t > 0 ? (double)rs.size / t / 1e9 : 0;
          printf(",%.6g,%.6g,%.6g,", t * 1e6, alg, alg * factor);
          if (m[p].checked)
            printf("%lld", (long long)m[p].wrong);
          printf(",%.6g,%.6g", m[p].coll_dev * 1e6, m[p].coll_host * 1e6);
        }
        printf(",%.6g,%.6g,%.6g,%.6g\n", kern_alone * 1e6,
               m[P_BOTH].kern_dev * 1e6, kslow, cslow);
      } else {
        printf("  %10llu  %12llu  %6s  %6s  %4d",
               (unsigned long long)rs.size, (unsigned long long)rs.count,
               type_name(o.dtype), redop_name(&o), root);
        for (int p = 0; p < P__COUNT; p++) {
          double t = o.host_timing ? m[p].coll_host : m[p].coll_dev;
          double alg = t > 0 ? (double)rs.size / t / 1e9 : 0;
          char ts[32], ws[32];
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
    }
  }

  if (!o.quiet && !o.csv) {
    if (rows_unchecked > 0)
      printf("# %d of %d rows not checked (n/a): the reference would need "
             "more than half of the host memory\n",
             rows_unchecked, rows);
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
  /* Every way out, --help included: the table must have arrived (a full
   * disk, a closed pipe), or the exit says so. */
  return close_output(stdout, "standard output", overlap_sweep(argc, argv));
}
