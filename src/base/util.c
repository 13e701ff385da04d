/* Small shared pieces: numbers from text, dtypes, modes, the host clock. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "base/base.h"

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

