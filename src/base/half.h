/*
 * The 16-bit floating-point dtypes on the host: IEEE 754 binary16
 * (float16: 1 sign, 5 exponent, 10 fraction bits; largest finite 65504,
 * smallest subnormal 2^-24) and bfloat16 (1 sign, 8 exponent, 7 fraction
 * bits: float32's top half; largest finite 0x1.fep127, smallest subnormal
 * 2^-133), held as their bit patterns in uint16_t.
 *
 * Widening to float is exact. Narrowing (from float or from double, in one
 * step: ovl__dtype_round) rounds to nearest, ties to even, as
 * CUDA's __float2half_rn and __float2bfloat16_rn do: a value at or beyond
 * the largest finite plus half an ulp becomes an infinity of its sign, a
 * tiny one a subnormal or a zero of its sign, and a NaN stays a NaN
 * (quiet, its sign and top payload bits kept). The cpu backend computes an
 * op on 16-bit data in float and narrows each result once (core/elemfn.h),
 * as the CUDA kernels do. tests/test_half.c checks these against known bit
 * patterns.
 */
#ifndef OVL_HALF_H
#define OVL_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t ovl__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float ovl__f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* float16 bits -> float, exactly. */
static inline float ovl__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, frac = h & 0x3ffu;
  if (exp == 0x1f) /* inf, NaN (payload moved to the top of float's) */
    return ovl__f32_from_bits(sign | 0x7f800000u | (frac << 13));
  if (exp == 0) { /* zero, subnormal: frac * 2^-24, exact in float */
    float v = (float)frac * 0x1p-24f;
    return sign ? -v : v;
  }
  return ovl__f32_from_bits(sign | ((exp + 112u) << 23) | (frac << 13));
}

/* float -> float16 bits, round to nearest even. */
static inline uint16_t ovl__f32_to_f16(float f) {
  uint32_t x = ovl__f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN: quiet, top 9 payload bits kept */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x1ffu));
  if (a >= 0x47800000u) /* >= 2^16 (65520 and up round there too): inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* >= 2^-14: a normal float16 (or 65520..: inf) */
    /* Rebias the exponent, then round away the 13 low fraction bits: a
     * carry out of the fraction moves into the exponent, which is right
     * (and gives 0x7c00, inf, from 65520 up). */
    uint32_t odd = (a >> 13) & 1u;
    a -= (uint32_t)(127 - 15) << 23;
    a += 0xfffu + odd;
    return (uint16_t)(sign | (a >> 13));
  }
  /* Below 2^-14: a multiple of 2^-24 (subnormal, or 0x400 = 2^-14 after
   * rounding up). The float is m * 2^(e - 150) with m 24 bits; in units
   * of 2^-24 that is m >> (126 - e), rounded. */
  uint32_t e = a >> 23;
  if (e < 102) /* < 2^-24 / 2: rounds to zero (2^-25 itself ties to 0) */
    return sign;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - e; /* 14 .. 24 */
  uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u)))
    r++;
  return (uint16_t)(sign | r);
}

/* bfloat16 bits -> float, exactly. */
static inline float ovl__bf16_to_f32(uint16_t h) {
  return ovl__f32_from_bits((uint32_t)h << 16);
}

/* float -> bfloat16 bits, round to nearest even: the 16 low bits rounded
 * away; subnormals round the same way, and a carry into the exponent is
 * right (FLT_MAX becomes inf). */
static inline uint16_t ovl__f32_to_bf16(float f) {
  uint32_t x = ovl__f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, top payload kept */
    return (uint16_t)((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* v rounded to a binary format of `frac` fraction bits whose smallest
 * normal is 2^emin and largest finite value is `max`: to nearest, ties to
 * even, in one step from the double (never through float, which would
 * round twice). Within the format's normal range the double's fraction is
 * rounded in place (a carry into the exponent is right); below it, the
 * significand m (with its leading bit) times 2^(e - 52) is rounded to a
 * multiple of the format's smallest subnormal in integers. */
static inline double ovl__f64_round_format(double v, int frac, int emin,
                                           double max) {
  uint64_t u, m, r, rem, half;
  int e, shift;
  double scale;
  memcpy(&u, &v, sizeof u);
  e = (int)((u >> 52) & 0x7ff);
  if (e == 0x7ff) /* inf, NaN */
    return v;
  if (e - 1023 >= emin) {
    shift = 52 - frac;
    u += (1ull << (shift - 1)) - 1 + ((u >> shift) & 1);
    u &= ~((1ull << shift) - 1);
    memcpy(&v, &u, sizeof v);
    return v > max ? (double)INFINITY : v < -max ? -(double)INFINITY : v;
  }
  if (e == 0) /* zero, or a double subnormal: far below the format */
    return (u >> 63) ? -0.0 : 0.0;
  e -= 1023;
  m = (u & 0xfffffffffffffull) | (1ull << 52);
  shift = 52 - frac + emin - e;
  if (shift > 53) /* below half the smallest subnormal */
    return (u >> 63) ? -0.0 : 0.0;
  r = m >> shift;
  rem = m & ((1ull << shift) - 1);
  half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (r & 1)))
    r++;
  /* 2^(emin - frac): a normal double for both 16-bit formats. */
  u = (uint64_t)(emin - frac + 1023) << 52;
  memcpy(&scale, &u, sizeof scale);
  return (v < 0 ? -1.0 : 1.0) * ((double)r * scale);
}

static inline double ovl__f64_round_f16(double v) {
  return ovl__f64_round_format(v, 10, -14, 65504.0);
}

static inline double ovl__f64_round_bf16(double v) {
  return ovl__f64_round_format(v, 7, -126, 0x1.fep127);
}

#endif /* OVL_HALF_H */
