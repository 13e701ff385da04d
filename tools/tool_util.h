/*
 * Helpers the command-line tools share (tools/overlap_sim, tools/overlap_sweep):
 * flag parsing, usage errors, host memory, byte counts. Not part of libovl.
 */
#ifndef OVL_TOOL_UTIL_H
#define OVL_TOOL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of a usage or schedule error, in every tool. */
#define TOOL_EXIT_USAGE 2

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

/* A command-line argument for a message, on one line: printable ASCII as
 * is, anything else escaped (\n, \t, \r, \\, \xNN); cut with "..." where it
 * does not fit in `len` bytes. Returns buf. */
const char *escape_arg(const char *s, char *buf, size_t len);

/* Saturating arithmetic for byte counts. */
uint64_t mul_sat(uint64_t a, uint64_t b);
uint64_t add_sat(uint64_t a, uint64_t b);

/* Physical memory, or the memory limit of this process's cgroup (v2 or v1)
 * where that is lower; 0 if unknown. */
uint64_t host_memory(void);

/* "240.0 MB": decimal units, one decimal. */
const char *format_bytes(uint64_t b, char *buf, size_t len);

#endif /* OVL_TOOL_UTIL_H */
