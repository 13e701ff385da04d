/*
 * Input generation (DESIGN.md 3, "reference"): the value a data() variable
 * holds at an element is a pure function of (seed, rank, element index),
 * so that any process, and the float64 reference, can produce any rank's
 * inputs without communication.
 */
#include <math.h>

#include "core/op.h"

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
