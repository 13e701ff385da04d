/* Helpers the command-line tools share; see tool_util.h. */
#include "tool_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *progname = "overlap-sim";

int usage_error(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", progname);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help' for more information.\n", progname);
  return TOOL_EXIT_USAGE;
}

bool parse_int(const char *s, long lo, long hi, int *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    return false;
  *out = (int)v;
  return true;
}

bool parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < lo ||
      v > hi)
    return false;
  *out = v;
  return true;
}

int parse_tuning_flag(const char *flag, const char *arg, int *value) {
  if (strcmp(flag, "--comm-priority") == 0) {
    if (strcmp(arg, "high") == 0)
      *value = 1;
    else if (strcmp(arg, "default") == 0)
      *value = 0;
    else
      return usage_error("--comm-priority: '%s' is not high or default", arg);
    return 0;
  }
  if (!parse_int(arg, 0, 64, value))
    return usage_error("%s: '%s' is not a number from 0 to 64", flag, arg);
  return 0;
}

const char *escape_arg(const char *s, char *buf, size_t len) {
  size_t k = 0;
  if (len == 0)
    return buf;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char one[5];
    const char *e = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n"
                    : *p == '\t' ? "\\t" : *p == '\r' ? "\\r" : NULL;
    if (e == NULL && *p >= 0x20 && *p < 0x7f)
      snprintf(one, sizeof one, "%c", *p);
    else if (e == NULL)
      snprintf(one, sizeof one, "\\x%02x", *p);
    size_t n = strlen(e != NULL ? e : one);
    if (k + n + sizeof "..." > len) {
      snprintf(buf + k, len - k, "...");
      return buf;
    }
    memcpy(buf + k, e != NULL ? e : one, n);
    k += n;
  }
  buf[k] = '\0';
  return buf;
}

uint64_t mul_sat(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* A limit from a cgroup file ("max" or a number of bytes), or 0. */
static uint64_t cgroup_limit(const char *file) {
  FILE *f = fopen(file, "r");
  unsigned long long v = 0;
  if (f == NULL)
    return 0;
  if (fscanf(f, "%llu", &v) != 1)
    v = 0;
  fclose(f);
  return (uint64_t)v;
}

uint64_t host_memory(void) {
  static const char *const limits[] = {
      "/sys/fs/cgroup/memory.max",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes",
  };
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  uint64_t mem = pages > 0 && size > 0
                     ? mul_sat((uint64_t)pages, (uint64_t)size)
                     : 0;
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    uint64_t lim = cgroup_limit(limits[i]);
    if (lim > 0 && (mem == 0 || lim < mem))
      mem = lim;
  }
  return mem;
}

const char *format_bytes(uint64_t b, char *buf, size_t len) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB",
                                      "EB"};
  double v = (double)b;
  size_t u = 0;
  while (v >= 1000 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1000;
    u++;
  }
  snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}
