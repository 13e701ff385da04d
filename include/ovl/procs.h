/*
 * Processes: one launch of many processes under MPI, or one process.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_PROCS_H
#define OVL_PUBLIC_PROCS_H

#include "ovl/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * More than one process: an MPI launch (`mpirun -np P tool ...`, built
 * with `configure --with-mpi`; docs/ARCHITECTURE.md, "More than one
 * process"). Every process runs the same calls in the same order: worlds,
 * runs, pipelines and checks are collective over the processes, and every
 * process gets the same report and the same errors.
 */
typedef struct ovl_procs_s ovl_procs;

/* 1 when the library was built with MPI. */
OVL_API int ovl_mpi_compiled(void);
/* This process's index in its launch, read from the launcher's
 * environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK) before any MPI
 * call; -1 when no MPI launcher started it. */
OVL_API int ovl_launcher_rank(void);
/* Join the launch: MPI_Init_thread (MPI_THREAD_MULTIPLE) when the library
 * was built with MPI and an MPI launcher started this process; else *out
 * is NULL (one process, as without MPI) and nothing happens. */
OVL_API ovl_status ovl_procs_init(int *argc, char ***argv, ovl_procs **out,
                                  ovl_error *err);
/* This process's index (0 for NULL) and how many there are (1). */
OVL_API int ovl_procs_rank(const ovl_procs *procs);
OVL_API int ovl_procs_size(const ovl_procs *procs);
/* Every process calls it with its exit code; each gets the largest. When
 * the processes have lost each other (ovl_procs_error), each gets its own
 * code, 3 at least. */
OVL_API int ovl_procs_agree_exit(ovl_procs *procs, int code);
/* The deadline of every step the processes take together (the agreements
 * and gathers of worlds, runs and the tools), in seconds plus a margin of
 * 5 s: a process that stops, dies or takes another path ends every
 * process within it. 60 s until set; a world sets its timeout
 * (ovl_world_opts.timeout_s). NULL, or a value that is not > 0, does
 * nothing. */
OVL_API void ovl_procs_set_timeout(ovl_procs *procs, double seconds);
/* Why the processes lost each other (a step timed out; a process took
 * another path or ended), led by "process P: "; NULL while they have not.
 * Every later step fails with it. */
OVL_API const char *ovl_procs_error(const ovl_procs *procs);
/* Leave the launch (MPI_Finalize); NULL does nothing. Processes that lost
 * each other end the whole launch instead (MPI_Abort with the last exit
 * status agreed or given): flush what was printed first. */
OVL_API void ovl_procs_free(ovl_procs *procs);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_PROCS_H */
