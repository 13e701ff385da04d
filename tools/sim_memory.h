/*
 * Host memory of tools/overlap_sim (tools/sim_memory.c): what a run (or
 * --races) will hold, checked before anything big is allocated, so that a
 * schedule too big for the machine is refused with a message instead of
 * failing, or swapping, halfway. Not part of libovl.
 */
#ifndef OVL_SIM_MEMORY_H
#define OVL_SIM_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "ovl.h"
#include "sim_flags.h"

/* What the run does with the program, and what the machine has. */
typedef struct {
  ovl_op_memory_opts ops; /* what each op costs: ovl_host_bytes_per_op */
  uint64_t per_op;        /* host bytes per op */
  uint64_t have;          /* host_memory(); 0 if unknown */
  int nranks;             /* ranks that run; 0 for --races */
  int nmodes;             /* modes checked or run, all kept to the end */
  bool cpu;               /* the variables live in host memory */
} mem_plan;

/* The plan of --races (nranks 0: nothing runs) or of a run on `backend`
 * with `nmodes` modes. */
void sim_plan_memory(mem_plan *m, const sim_options *o, int nmodes,
                     const char *backend, int nranks);

/* Read and parse the schedule (no rank count needed: before the world is
 * made, so that a mistake in it shows at once). Returns -1, or the exit
 * status of a failure (message printed). */
int sim_parse_schedule(const char *path, ovl_schedule **sched);

/* Bind it, refused beyond the ops the plan's memory holds (bopts->max_ops
 * is set here). Returns -1, or the exit status of a failure (message
 * printed). */
int sim_bind_schedule(const ovl_schedule *sched, ovl_bind_opts *bopts,
                      const mem_plan *m, ovl_program **prog);

/* Everything the run holds at once, against the host's memory: per rank,
 * the variables on the cpu backend (its devices are host memory), the
 * float64 reference (8 bytes of every element, where `reference`), and the
 * float64 copy of every fetched value of every mode (the results are kept
 * to the end); and the ops at the plan's cost per op. --races counts the
 * ops only. Returns an exit status (message printed), or -1 to go on. */
int sim_check_host_memory(const ovl_program *prog, const char *path,
                          const mem_plan *m, bool reference);

#endif /* OVL_SIM_MEMORY_H */
