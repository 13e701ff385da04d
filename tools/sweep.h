/*
 * tools/overlap_sweep's pieces (not part of libovl): its options and their
 * parsing (tools/sweep_flags.c), the collectives' nccl-tests conventions
 * and the schedules it generates (tools/sweep_schedule.c); the tool itself
 * (tools/overlap_sweep.c) measures and prints.
 */
#ifndef OVL_SWEEP_H
#define OVL_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common_flags.h"
#include "ovl.h"

#define MAX_SIZES 256
/* Largest size accepted (1 TiB): far beyond any device, but no overflow in
 * the element counts below. */
#define MAX_BYTES (1ULL << 40)

/* The collectives, and their names ("allreduce", ...). */
typedef enum {
  C_ALLREDUCE,
  C_BROADCAST,
  C_ALLGATHER,
  C_REDUCESCATTER,
  C_REDUCE,
  C_ALLTOALL,
  /* nccl-tests' sendrecv: each rank sends to rank + 1 and receives from
   * rank - 1, in one group (send_v2 and recv_v2). */
  C_SENDRECV,
  C__COUNT
} coll;
extern const char *const coll_names[C__COUNT];
/* Whether the collective takes --op; --root. */
bool coll_reduces(coll c);
bool coll_has_root(coll c);

/* Where the collectives run: on the calc stream, on a comm stream (out of
 * place: y = coll(x)), in place on a comm stream (coll(x): nccl-tests'
 * in-place group; allreduce and broadcast only), on a comm stream with
 * kernels beside them on the calc stream. */
typedef enum { P_CALC, P_COMM, P_INPLACE, P_BOTH, P__COUNT } placement;

/* The kernel beside the collectives (--compute): w = scale(z), memory-bound;
 * or w = matmul_v2(a, b), a square GEMM of the collective's dtype. */
typedef enum { K_SCALE, K_MATMUL } kernel_kind;

/* The flags. */
typedef struct {
  /* The flags overlap_sim takes too: --backend, --ranks,
   * --gpus-per-process, -n, -w, --timeout, --rtol, --atol, --graph (every
   * run as CUDA graphs), the cuda tuning, -q. */
  common_opts common;
  coll coll;
  const char *redop; /* sum, max, min, prod */
  bool redop_given;
  ovl_dtype dtype;
  uint64_t minb, maxb;
  bool minb_given, maxb_given;
  uint64_t factor;
  uint64_t sizes[MAX_SIZES];
  int nsizes; /* --sizes; 0: -b .. -e by -f */
  int reps; /* collectives per iteration; 0: by size */
  uint64_t compute_bytes; /* 0: backend default */
  kernel_kind compute;    /* --compute */
  uint64_t matmul_n;      /* --matmul-size; 0: backend default */
  bool compute_bytes_given, matmul_n_given;
  int root;
  bool root_given;
  bool host_timing;
  bool csv;
} options;

/* The placements' names: "calc", "comm", "inplace", "comm+compute". */
extern const char *const placement_names[P__COUNT];

/* The defaults: allreduce sum of float32, sizes by a factor of 2, the
 * shared flags' (common_opts_init). */
void sweep_options_init(options *o);

/* Parse the flags into `o` (sweep_options_init's defaults first). Returns
 * -1 to go on, or the exit status to end with (0 after --help, --version;
 * 2 after a usage error, message printed). */
int sweep_parse_flags(int argc, char **argv, options *o);

/* busbw = algbw * factor (nccl-tests' PERFORMANCE.md): allreduce moves
 * 2(n-1)/n of the buffer through each rank's link, allgather,
 * reducescatter and alltoall (n-1)/n of the total, broadcast, reduce and
 * sendrecv the buffer once. */
double busbw_factor(coll c, int n);
/* The factor as a formula, for the header: "2(n-1)/n", "(n-1)/n", "1". */
const char *busbw_formula(coll c);

/* One row's sizes, as nccl-tests counts them. `size` (the size column and
 * what algbw divides) is the whole buffer for allreduce, broadcast, reduce
 * and sendrecv, the receive buffer (nranks x the send buffer) for
 * allgather, the send buffer (nranks x the receive buffer) for
 * reducescatter, and either buffer (nranks parts) for alltoall. `count`
 * is nccl-tests' count column: the buffer's elements for allreduce,
 * broadcast, reduce and sendrecv, one rank's share (one part) for
 * allgather, reducescatter and alltoall (rounded down to 16 bytes, as
 * nccl-tests does). */
typedef struct {
  uint64_t size;   /* bytes */
  uint64_t count;  /* elements */
  uint64_t nx, ny; /* elements of the input x and the output y, per rank */
} row_sizes;

bool row_sizes_for(coll c, uint64_t bytes, size_t esize, int n,
                   row_sizes *rs);

/* Whether the collective has an in-place form here: allreduce, broadcast
 * and reduce (allgather's and reducescatter's in-place buffers are a slice
 * of the other, which a schedule's variables cannot be; alltoall is never
 * in place; sendrecv's receive is its own variable). */
bool has_inplace(coll c);

/* What every generated schedule of a sweep shares. */
typedef struct {
  const options *o;
  int nranks;
  size_t esize;
  const char *op_name;   /* c_allreduce_sum, c_broadcast, ... */
  uint64_t kernel_numel; /* elements of z and w (float32), K_SCALE */
  uint64_t matmul_n;     /* a, b and w are [n, n] (the dtype), K_MATMUL */
  const char *kernel_op; /* "scale" or "matmul_v2" */
} sweep;

/* The schedule of one measurement: `reps` collectives y = coll(x) in the
 * placement (P_INPLACE: coll(x), x in place), and for P_BOTH `kernels`
 * kernels w = scale(z) (w = matmul_v2(a, b) with --compute=matmul) on the
 * calc stream, interleaved in proportion so that both streams get work
 * from the start however fast the host enqueues. With `fetch`, the output
 * (y, or x in place) is fetched at the end (the check run). reps == 0 and
 * kernels > 0: the kernel alone.
 * malloc'd; NULL when out of memory. */
char *gen_schedule(const sweep *s, const row_sizes *rs, uint64_t bytes,
                   placement p, int reps, int kernels, bool fetch);

/* Collectives per iteration: --reps, or by size (about 16 MiB moved an
 * iteration on the cpu backend, 2 GB on cuda; from 5 to 200). */
int reps_for(const options *o, bool cpu, uint64_t size);

#endif /* OVL_SWEEP_H */
