/*
 * Helpers the command-line tools share (tools/overlap_sim, tools/overlap_sweep):
 * flag parsing, the backend tuning, usage errors, checked output on stdout,
 * host memory, byte counts. Not part of libovl.
 */
#ifndef OVL_TOOL_UTIL_H
#define OVL_TOOL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ovl.h"

/* Exit status of a usage or schedule error, in every tool. */
#define TOOL_EXIT_USAGE 2
/* Exit status of a runtime error (a device, an output not written). */
#define TOOL_EXIT_RUNTIME 3

/* The tool's name in messages; each main sets it from argv[0]. */
extern const char *progname;

/* "PROG: message" and the --help hint on stderr; returns TOOL_EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A whole string as a number in [lo, hi]; false if it is not one. */
bool parse_int(const char *s, long lo, long hi, int *out);
bool parse_double(const char *s, double lo, double hi, double *out);

/* The cuda tuning flags both tools take: --comm-priority=high|default
 * (*value 1 or 0), --tf32=on|off (1 or 0), --nccl-min-ctas=N and
 * --nccl-max-ctas=N (0..64). `flag` is the flag's name as given
 * ("--nccl-max-ctas"). Returns 0, or the exit status of a usage error
 * (message printed). */
int parse_tuning_flag(const char *flag, const char *arg, int *value);

/* --check-rows=N|all: N from 1 to 2^31 - 1 (*value N), or all (-1).
 * Returns 0, or the exit status of a usage error (message printed). */
int parse_check_rows(const char *arg, long *value);

/* The backend tuning both tools take, applied to a new world with
 * ovl_world_set: --chaos (overlap_sim only; 0: not given), then
 * --comm-priority=high (1), --nccl-min-ctas, --nccl-max-ctas (0: not
 * given), --tf32=on (1). Chaos goes first, so that each backend refuses
 * what it lacks in the order it always did (cuda: the chaos; cpu: the
 * cuda knobs). */
ovl_status tool_tune_world(ovl_world *world, unsigned chaos_seed,
                           int comm_priority_high, int nccl_min_ctas,
                           int nccl_max_ctas, int tf32, ovl_error *err);

/* A command-line argument for a message, on one line: printable ASCII as
 * is, anything else escaped (\n, \t, \r, \\, \xNN); cut with "..." where it
 * does not fit in `len` bytes. Returns buf. */
const char *escape_arg(const char *s, char *buf, size_t len);

/* Saturating arithmetic for byte counts. */
uint64_t mul_sat(uint64_t a, uint64_t b);
uint64_t add_sat(uint64_t a, uint64_t b);

/* Physical memory, or the memory limit of this process's cgroup where that
 * is lower; 0 if unknown. The environment variable OVL_HOST_MEMORY=BYTES
 * overrides it (a testing knob: tests of the memory check must not depend
 * on the machine). */
uint64_t host_memory(void);
/* Whether OVL_HOST_MEMORY set what host_memory() returns. */
bool host_memory_overridden(void);
/* host_memory's reading of the cgroups, from the files given: the
 * process's cgroups as /proc/self/cgroup lists them (`proc_cgroup`), the
 * cgroup mounts under `cgroup_root` (/sys/fs/cgroup: v2's files there,
 * v1's memory controller in memory/). The smallest limit of the process's
 * cgroup and its ancestors, v2 (memory.max) and v1
 * (memory.limit_in_bytes) alike, or `phys` where that is lower or there is
 * none ("max", or v1's number near 2^63). Only when proc_cgroup cannot be
 * read, the limits of the mounts' roots. */
uint64_t host_memory_from(const char *proc_cgroup, const char *cgroup_root,
                          uint64_t phys);

/* fflush(f) where the output must show now (a table's row), or right after
 * a long printf; an error, of the flush or of a write before it, is kept
 * for close_output(), which reports it. */
void flush_output(FILE *f);

/* Join an MPI launch (ovl_procs_init) when an MPI launcher started the
 * tool: every process but process 0 then prints nothing (every process
 * gets the same report and errors): its stdout goes to /dev/null, its
 * stderr is kept aside for tool_agree. A build without MPI says once that
 * each process runs alone. Returns -1, or the exit status (message
 * printed). */
int tool_procs_init(int *argc, char ***argv, ovl_procs **out);
/* Under mpirun, after a step each process may fail alone (a file of its
 * host, an output only process 0 writes, its memory): every process
 * brings its status (-1: go on) and gets the largest, so that all stop
 * together, before the next collective step, instead of some waiting in
 * it for ever. A process other than 0 that failed when process 0 did not
 * prints what it wrote to stderr since the last step, each line led by
 * "process P: ". One process (procs NULL): rc. */
int tool_agree(ovl_procs *procs, int rc);
/* --gpus-per-process=G: 1 to 64, and only under an MPI launch of a build
 * with MPI. Returns -1, or the exit status (message printed). */
int parse_gpus_per_process(const char *arg, int *out);

/* Flushes and closes `f`, a stream of the tool's output (stdout) that
 * `name` names in the message ("standard output"). A write error on it,
 * now or earlier, is reported, and the exit status `status` becomes
 * TOOL_EXIT_RUNTIME unless it already is that or TOOL_EXIT_USAGE: output
 * that never arrived is not a success. Returns the exit status. */
int close_output(FILE *f, const char *name, int status);

/* "240.0 MB": decimal units, one decimal. */
const char *format_bytes(uint64_t b, char *buf, size_t len);

#endif /* OVL_TOOL_UTIL_H */
