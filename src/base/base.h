/*
 * The bottom layer of libovl (docs/ARCHITECTURE.md, "Layers"): errors, a
 * growing string, numbers from text, dtypes, the host clock. It knows
 * nothing of ops, programs or runs; every other layer may use it.
 */
#ifndef OVL_BASE_BASE_H
#define OVL_BASE_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ovl.h"

/* ------------------------------------------------------------------ */
/* Errors (base/error.c)                                               */
/* ------------------------------------------------------------------ */

/* Set err (if non-NULL) to `status` with a printf-style message and return
 * `status`, so callers can write `return ovl__err(err, OVL_EINVAL, ...)`. */
ovl_status ovl__err(ovl_error *err, ovl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ovl_status ovl__verr(ovl_error *err, ovl_status status, const char *fmt,
                     va_list ap);
/* Prefix the message already in err with more context ("rank 1: ..."). */
void ovl__err_prefix(ovl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Allocation helpers that never return NULL silently: they return NULL only
 * for failure, and callers map that to OVL_ENOMEM. */
char *ovl__strdup(const char *s);

/* ------------------------------------------------------------------ */
/* A growing string (base/strbuf.c)                                    */
/* ------------------------------------------------------------------ */

/* Appending never fails loudly: an allocation failure sets `fail`, later
 * appends do nothing, and the caller checks `fail` once at the end (then
 * frees `s`). Start with {0}. */
typedef struct ovl__sbuf {
  char *s;
  size_t len, cap;
  bool fail;
} ovl__sbuf;
bool ovl__sb_reserve(ovl__sbuf *b, size_t more);
void ovl__sb_printf(ovl__sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ovl__sb_puts(ovl__sbuf *b, const char *s);
/* A JSON string, quotes included. */
void ovl__sb_json_str(ovl__sbuf *b, const char *s);

/* ------------------------------------------------------------------ */
/* Numbers, dtypes, the clock (base/util.c)                            */
/* ------------------------------------------------------------------ */

/* A whole string as a decimal number in [0, max]; false if it is not one
 * (a sign, blanks, anything after the digits). */
bool ovl__parse_uint(const char *s, unsigned long max, unsigned long *out);

/* dtypes (the 16-bit conversions are in base/half.h).
 * ovl__dtype_round: v rounded to `dtype` (to nearest, ties to even, in one
 * step from the double; float64: v itself). ovl__dtype_load: element i of
 * an array of `dtype`, as a double (exact). ovl__dtype_store: v rounded to
 * `dtype` into element i. */
double ovl__dtype_round(ovl_dtype dtype, double v);
double ovl__dtype_load(ovl_dtype dtype, const void *base, size_t i);
void ovl__dtype_store(ovl_dtype dtype, void *base, size_t i, double v);

/* Option structs (ovl/base.h, OVL_OPTS_INIT): the caller's `src` (its
 * first member, a size_t, the size it was compiled with) into `dst`, the
 * library's struct of `dst_size` bytes: the bytes the caller has, the rest
 * zero (defaults); `src` NULL gives every default. A size of 0, or one that
 * does not hold the size itself, is OVL_EINVAL ("WHAT: ..."), and so is a
 * byte set beyond `dst_size` (a field of a later version). `dst`'s size is
 * set to dst_size. */
ovl_status ovl__opts_read(void *dst, size_t dst_size, const void *src,
                          const char *what, ovl_error *err);

/* Monotonic host clock in seconds. */
double ovl__now(void);

/* malloc's cost of an allocation of n bytes (glibc: a header word, in
 * 16-byte units, 32 at least), for the per-op memory figures. */
#define OVL_MALLOC_BYTES(n) ((n) + 8 <= 32 ? 32 : ((n) + 8 + 15) / 16 * 16)

#endif /* OVL_BASE_BASE_H */
