/*
 * Helpers the command-line tools share (tools/overlap_sim, tools/overlap_sweep):
 * usage errors, numbers from text, checked output on stdout, host memory,
 * byte counts, an MPI launch. The flags both take are
 * tools/common_flags.h. Not part of libovl.
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
/* Exit status where the reader of stdout went away (128 + SIGPIPE, as a
 * death by SIGPIPE shows in the shell). */
#define TOOL_EXIT_PIPE 141

/* The tool's name in messages; each main sets it from argv[0]. */
extern const char *progname;

/* "PROG: message" and the --help hint on stderr; returns TOOL_EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A whole string as a number in [lo, hi]; false if it is not one. Every
 * flag's number syntax: decimal digits, a '-' first only where lo < 0, no
 * blank, '+', hex, "inf" or "nan"; a double may have a '.' and an
 * exponent ("0.5", "1e-3"). A double that underflows is the nearest one
 * (4.9e-324; 1e-400 is 0). */
bool parse_int(const char *s, long lo, long hi, int *out);
bool parse_double(const char *s, double lo, double hi, double *out);

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
 * for close_output(), which reports it. EPIPE (nobody reads stdout any
 * more, and SIGPIPE is ignored) ends the tool at once, quietly, with
 * TOOL_EXIT_PIPE. */
void flush_output(FILE *f);

/* At the start of a tool, before tool_procs_init: SIGPIPE's default
 * action (a reader that goes away ends the tool, `tool | head -1`,
 * whatever disposition was inherited), and SIGINT prints "PROG:
 * interrupted" before the tool dies of it (the shell's status 130); an
 * interrupt that was ignored stays ignored. The output files being
 * written are removed by their own handler first (tools/outfile.c). */
void tool_signals_init(void);
/* Under mpirun, process P > 0 says "process P: PROG: interrupted". */
void tool_signals_rank(int rank);
/* Where `fd` (the tool's stdout) is a pipe or a socket: a thread that ends
 * the tool (SIGPIPE) as soon as nobody can read it, rather than at the
 * next write, which may be minutes of a run away. */
void tool_watch_reader(int fd);

/* Join an MPI launch (ovl_procs_init) when an MPI launcher started the
 * tool. MPI's rank decides: process 0 prints the report; a process P > 0
 * prints nothing on stdout (every process gets the same report), and
 * what the tool says on its stderr stream (its own errors) goes at once
 * to the real standard error, each line led by "process P: " (the
 * descriptor itself is left alone: a sanitizer's report or MPI's own
 * messages arrive as they are). A process MPI finds alone where the
 * launcher's variables say process P > 0 or more than one process (a
 * variable left in the environment) leaves MPI and runs as without a
 * launcher, with a one-line note; a build without MPI says on every
 * process that each runs alone. Returns -1, or the exit status (message
 * printed). */
int tool_procs_init(int *argc, char ***argv, ovl_procs **out);
/* Under mpirun, after a step each process may fail alone (a file of its
 * host, an output only process 0 writes, its memory): every process
 * brings its status (-1: go on) and gets the largest, so that all stop
 * together, before the next collective step, instead of some waiting in
 * it for ever. Each failing process has said why on its stderr (process
 * P > 0: led by "process P: "). One process (procs NULL): rc. When the
 * processes have lost each other, 3 at least. */
int tool_agree(ovl_procs *procs, int rc);
/* Whether this process prints the report and the errors every process
 * shares: process 0 of an MPI launch, or the only process. */
bool tool_prints_report(void);
/* An error that every process got alike, the outcome of a step the
 * processes take together (a world, a run): "PROG: message" on stderr,
 * from process 0 alone, which speaks for all; not where it is the
 * message of processes that lost each other (tool_procs_end says it). */
void tool_shared_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* The end of a tool under mpirun: every process brings its exit status
 * and gets the largest (ovl_procs_agree_exit). Where the processes lost
 * each other (ovl_procs_error: a step timed out, a process took another
 * path or ended), every process says why on stderr, led by "process P: ",
 * and keeps its own status, 3 at least; then everything printed is
 * flushed and the launch is left (ovl_procs_free, which ends the whole
 * launch in that case). One process (procs NULL): rc. Returns the exit
 * status. */
int tool_procs_end(ovl_procs *procs, int rc);
/* Flushes and closes `f`, a stream of the tool's output (stdout) that
 * `name` names in the message ("standard output"). A write error on it,
 * now or earlier, is reported, and the exit status `status` becomes
 * TOOL_EXIT_RUNTIME unless it already is that or TOOL_EXIT_USAGE: output
 * that never arrived is not a success; EPIPE (the reader went away) is
 * TOOL_EXIT_PIPE, with no message. Returns the exit status. */
int close_output(FILE *f, const char *name, int status);

/* "240.0 MB": decimal units, one decimal. */
const char *format_bytes(uint64_t b, char *buf, size_t len);

#endif /* OVL_TOOL_UTIL_H */
