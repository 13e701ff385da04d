/* Small shared pieces: dtypes, modes, the host clock, input generation. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

bool ovl__parse_uint(const char *s, unsigned long max, unsigned long *out) {
  char *end;
  unsigned long v;
  if (s == NULL || *s < '0' || *s > '9')
    return false;
  errno = 0;
  v = strtoul(s, &end, 10);
  if (errno != 0 || *end != '\0' || v > max)
    return false;
  *out = v;
  return true;
}

size_t ovl_dtype_size(ovl_dtype dtype) {
  return dtype == OVL_DTYPE_FLOAT64 ? 8 : 4;
}

const char *ovl_dtype_name(ovl_dtype dtype) {
  return dtype == OVL_DTYPE_FLOAT64 ? "float64" : "float32";
}

const char *ovl_mode_name(ovl_mode mode) {
  switch (mode) {
  case OVL_MODE_ASYNC:
    return "async";
  case OVL_MODE_SYNC:
    return "sync";
  case OVL_MODE_COMP:
    return "comp";
  case OVL_MODE_COMM:
    return "comm";
  default:
    return "?";
  }
}

double ovl__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64's finaliser: a good 64-bit mix, cheap enough per element. */
static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double ovl__var_init_value(const ovl__var *var, int rank, int64_t index) {
  uint64_t key, h;
  switch (var->init) {
  case OVL_INIT_FILL:
    return var->dtype == OVL_DTYPE_FLOAT32 ? (double)(float)var->fill
                                           : var->fill;
  case OVL_INIT_UNIFORM:
    key = mix64(var->seed ^ (var->per_rank ? mix64((uint64_t)rank + 1) : 0));
    h = mix64(key ^ (uint64_t)index);
    /* 24 or 53 random bits: exact in the dtype, uniform in [0, 1). */
    if (var->dtype == OVL_DTYPE_FLOAT32)
      return (double)(h >> 40) * 0x1p-24;
    return (double)(h >> 11) * 0x1p-53;
  case OVL_INIT_NONE:
  default:
    return 0.0;
  }
}
