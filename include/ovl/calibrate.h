/*
 * Calibration: what the model backend needs to predict a program,
 * measured on a real backend (cpu or cuda) and given as a profile (JSON:
 * the model's --profile=FILE reads it).
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_CALIBRATE_H
#define OVL_PUBLIC_CALIBRATE_H

#include "ovl/world.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ovl_calibrate_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* Timed iterations per measurement; 0: 10. */
  int iters;
  /* Untimed iterations before them; 0: 2. */
  int warmup;
  /* Seconds; 0: 60. Once spent, no more sizes are measured for the
   * communication fits and no contention (what is measured is kept: each
   * kernel, the host costs and each communication kind's largest message
   * are always measured). */
  double budget_s;
  /* Optional: called from the calling thread before each measurement,
   * with what it measures ("kernel scale float32 [1000000]", "allreduce
   * 6 sizes (4096 B to 1048576 B)", "contention allreduce beside matmul
   * bfloat16 2048x2048x2048", ...). */
  void (*progress)(void *ctx, const char *what);
  void *ctx;
} ovl_calibrate_opts;

/*
 * Measure on `world` what the model backend needs to predict `prog`
 * (bound for the world's rank count), each measurement a small generated
 * schedule run with op times:
 *   - every distinct kernel of `prog` alone on the calc stream;
 *   - the host's cost of each primitive it enqueues (a kernel, a
 *     collective, a send or receive, an event record, a wait), of a host
 *     sync, and where the world has graphs (cuda) of a graph launch and
 *     the device's gap between two kernels;
 *   - for each kind of communication `prog` has (each collective, and
 *     point-to-point), its time on the calc stream at about 6 sizes up to
 *     the program's largest message (and the program's own sizes), fitted
 *     as latency + bytes / bandwidth;
 *   - for each of them, contention: the program's largest message on the
 *     comm stream beside a memory-bound kernel and beside a matmul on
 *     calc, and how much slower each side ran than alone;
 *   - the machine: the device, the rank count, the NCCL and CUDA
 *     versions, the date; the schedule's name and its ops' signature.
 * On success *out is the profile as JSON text (free() it). The world must
 * be a real backend's of one process (a model world, or one of an MPI
 * launch, is refused with OVL_EINVAL), and `prog` bound for its rank
 * count (else OVL_EINVAL). A failed measurement stops the calibration:
 * the message names it ("calibrate: kernel scale float32 [1000]: ...");
 * a run that fails aborts the world, as any run does.
 */
OVL_API ovl_status ovl_calibrate(ovl_world *world, const ovl_program *prog,
                                 const ovl_calibrate_opts *opts, char **out,
                                 ovl_error *err);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_CALIBRATE_H */
