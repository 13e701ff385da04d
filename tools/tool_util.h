/*
 * Helpers the command-line tools share (tools/overlap_sim, tools/overlap_sweep):
 * flag parsing, usage errors, checked output on stdout, host memory, byte
 * counts. Not part of libovl.
 */
#ifndef OVL_TOOL_UTIL_H
#define OVL_TOOL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
 * (*value 1 or 0), --nccl-min-ctas=N and --nccl-max-ctas=N (0..64). `flag`
 * is the flag's name as given ("--nccl-max-ctas"). Returns 0, or the exit
 * status of a usage error (message printed). */
int parse_tuning_flag(const char *flag, const char *arg, int *value);

/* Saturating arithmetic for byte counts. */
uint64_t mul_sat(uint64_t a, uint64_t b);
uint64_t add_sat(uint64_t a, uint64_t b);

/* Physical memory, or the memory limit of this process's cgroup (v2 or v1)
 * where that is lower; 0 if unknown. */
uint64_t host_memory(void);

/* fflush(f) where the output must show now (a table's row); an error is
 * kept for close_output(), which reports it. */
void flush_output(FILE *f);

/* Flushes and closes `f`, a stream of the tool's output (stdout) that
 * `name` names in the message ("standard output"). A write error on it,
 * now or earlier, is reported, and the exit status `status` becomes
 * TOOL_EXIT_RUNTIME unless it already is that or TOOL_EXIT_USAGE: output
 * that never arrived is not a success. Returns the exit status. */
int close_output(FILE *f, const char *name, int status);

/* "240.0 MB": decimal units, one decimal. */
const char *format_bytes(uint64_t b, char *buf, size_t len);

#endif /* OVL_TOOL_UTIL_H */
