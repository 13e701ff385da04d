/* Small shared pieces: dtypes, modes, the host clock, input generation. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
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
  switch (dtype) {
  case OVL_DTYPE_FLOAT64:
    return 8;
  case OVL_DTYPE_FLOAT16:
  case OVL_DTYPE_BFLOAT16:
    return 2;
  case OVL_DTYPE_FLOAT32:
  default:
    return 4;
  }
}

static const char *const dtype_names[OVL_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16"};

const char *ovl_dtype_name(ovl_dtype dtype) {
  return (unsigned)dtype < OVL_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

int ovl_dtype_from_name(const char *name, ovl_dtype *out) {
  for (int k = 0; name != NULL && k < OVL_DTYPE_COUNT; k++)
    if (strcmp(name, dtype_names[k]) == 0) {
      *out = (ovl_dtype)k;
      return 1;
    }
  return 0;
}

double ovl_dtype_rtol(ovl_dtype dtype) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT16:
    return 2e-3;
  case OVL_DTYPE_BFLOAT16:
    return 1.6e-2;
  default:
    return 1e-5;
  }
}

double ovl_dtype_atol(ovl_dtype dtype) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT16:
  case OVL_DTYPE_BFLOAT16:
    return 1e-5;
  default:
    return 1e-6;
  }
}

double ovl__dtype_round(ovl_dtype dtype, double v) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    return (double)(float)v;
  case OVL_DTYPE_FLOAT16:
    return ovl__f64_round_f16(v);
  case OVL_DTYPE_BFLOAT16:
    return ovl__f64_round_bf16(v);
  case OVL_DTYPE_FLOAT64:
  default:
    return v;
  }
}

double ovl__dtype_load(ovl_dtype dtype, const void *base, size_t i) {
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    return ((const float *)base)[i];
  case OVL_DTYPE_FLOAT16:
    return ovl__f16_to_f32(((const uint16_t *)base)[i]);
  case OVL_DTYPE_BFLOAT16:
    return ovl__bf16_to_f32(((const uint16_t *)base)[i]);
  case OVL_DTYPE_FLOAT64:
  default:
    return ((const double *)base)[i];
  }
}

void ovl__dtype_store(ovl_dtype dtype, void *base, size_t i, double v) {
  /* A 16-bit value, once rounded, is a float exactly. */
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    ((float *)base)[i] = (float)v;
    break;
  case OVL_DTYPE_FLOAT16:
    ((uint16_t *)base)[i] =
        ovl__f32_to_f16((float)ovl__dtype_round(dtype, v));
    break;
  case OVL_DTYPE_BFLOAT16:
    ((uint16_t *)base)[i] =
        ovl__f32_to_bf16((float)ovl__dtype_round(dtype, v));
    break;
  case OVL_DTYPE_FLOAT64:
  default:
    ((double *)base)[i] = v;
    break;
  }
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

/* init=special: one element in 4 (hash bits 0-1 zero) is one of these, of
 * the variable's dtype; the others are ordinary values. Independent hashes
 * per variable make both operands of a binary op special at the same index
 * one time in 16. */
#define SPECIAL_COUNT 11
static double special_value(ovl_dtype dtype, uint64_t k) {
  static const double f32[SPECIAL_COUNT] = {
      NAN, INFINITY, -INFINITY, 0.0, -0.0,
      0x1p-149, -0x1p-149,                     /* smallest denormals */
      0x1.fffffcp-127, -0x1.fffffcp-127,       /* largest denormals */
      0x1.fffffep+127, -0x1.fffffep+127};      /* largest finite (FLT_MAX) */
  static const double f64[SPECIAL_COUNT] = {
      NAN, INFINITY, -INFINITY, 0.0, -0.0,
      0x1p-1074, -0x1p-1074,
      0x0.fffffffffffffp-1022, -0x0.fffffffffffffp-1022,
      0x1.fffffffffffffp+1023, -0x1.fffffffffffffp+1023};
  static const double f16[SPECIAL_COUNT] = {
      NAN, INFINITY, -INFINITY, 0.0, -0.0,
      0x1p-24, -0x1p-24,                       /* 0x0001 */
      0x1.ff8p-15, -0x1.ff8p-15,               /* 0x03ff */
      65504.0, -65504.0};                      /* 0x7bff */
  static const double bf16[SPECIAL_COUNT] = {
      NAN, INFINITY, -INFINITY, 0.0, -0.0,
      0x1p-133, -0x1p-133,                     /* 0x0001 */
      0x1.fcp-127, -0x1.fcp-127,               /* 0x007f */
      0x1.fep127, -0x1.fep127};                /* 0x7f7f */
  k %= SPECIAL_COUNT;
  switch (dtype) {
  case OVL_DTYPE_FLOAT32:
    return f32[k];
  case OVL_DTYPE_FLOAT16:
    return f16[k];
  case OVL_DTYPE_BFLOAT16:
    return bf16[k];
  default:
    return f64[k];
  }
}

/* An ordinary value of init=special: either sign, 8 significant bits, an
 * exponent from -6 to 6 (magnitudes 2^-6 to 2^7), exact in every dtype.
 * Sums of up to 4 of them are exact in float32 (22 bits at most), so a
 * result that differs from the reference differs for what the special
 * values did, not for how a backend happened to round an ordinary sum (in
 * the 16-bit dtypes they round, and the order of a sum of 3 or more
 * matters). */
static double ordinary_value(uint64_t h) {
  double mant = (double)(128 + ((h >> 20) & 127)); /* 1.xxxxxxx * 2^7 */
  int exp = (int)((h >> 9) % 13) - 6;
  double v = ldexp(mant, exp - 7);
  return (h >> 8) & 1 ? -v : v;
}

double ovl__var_init_value(const ovl__var *var, int rank, int64_t index) {
  uint64_t key, h;
  switch (var->init) {
  case OVL_INIT_FILL:
    return ovl__dtype_round(var->dtype, var->fill);
  case OVL_INIT_UNIFORM:
  case OVL_INIT_SPECIAL:
    key = mix64(var->seed ^ (var->per_rank ? mix64((uint64_t)rank + 1) : 0));
    h = mix64(key ^ (uint64_t)index);
    if (var->init == OVL_INIT_SPECIAL)
      return (h & 3) == 0 ? special_value(var->dtype, h >> 2)
                          : ordinary_value(h);
    /* As many random bits as the dtype's significand holds (24, 53, 11,
     * 8): exact in the dtype, uniform in [0, 1). */
    switch (var->dtype) {
    case OVL_DTYPE_FLOAT32:
      return (double)(h >> 40) * 0x1p-24;
    case OVL_DTYPE_FLOAT16:
      return (double)(h >> 53) * 0x1p-11;
    case OVL_DTYPE_BFLOAT16:
      return (double)(h >> 56) * 0x1p-8;
    default:
      return (double)(h >> 11) * 0x1p-53;
    }
  case OVL_INIT_NONE:
  default:
    return 0.0;
  }
}
