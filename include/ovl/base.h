/*
 * libovl's base: the export macro (OVL_API), the version, statuses and
 * errors, and element types with their default tolerances. Every other
 * part of the API includes it.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_BASE_H
#define OVL_PUBLIC_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "ovl/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * OVL_API marks every function of the API. The library is compiled with
 * -fvisibility=hidden, so that the functions its files share (ovl__*) stay
 * out of the shared library's exports; this attribute exports the API
 * again. To a program that includes this header it changes nothing.
 */
#if defined(__GNUC__) || defined(__clang__)
#define OVL_API __attribute__((visibility("default")))
#else
#define OVL_API
#endif

/* The version of the library a program runs with, as one number
 * (MAJOR * 10000 + MINOR * 100 + PATCH, as OVL_VERSION_NUMBER makes it)
 * and as text ("0.1.0"; a static string). OVL_VERSION and
 * OVL_VERSION_STRING (ovl/version.h) are those of the headers a program
 * was compiled with: the shared library it finds when it runs may be
 * another version, which these say:
 *   if (ovl_version() < OVL_VERSION_NUMBER(0, 2, 0)) ... */
OVL_API int ovl_version(void);
OVL_API const char *ovl_version_string(void);

/* One line per error: the enum name, and the text ovl_strerror() gives. */
#define OVL_ERRNO_MAP(X)                                                     \
  X(OK, "success")                                                           \
  X(EINVAL, "invalid argument")                                              \
  X(ENOMEM, "out of memory")                                                 \
  X(EIO, "I/O error")                                                        \
  X(EPARSE, "schedule error")                                                \
  X(ENODEV, "no such backend or device")                                     \
  X(EBACKEND, "backend error")                                               \
  X(ETIMEDOUT, "timed out")                                                  \
  X(EMISMATCH, "collective mismatch across ranks")                             \
  X(EABORTED, "aborted because another rank failed")

typedef enum {
#define OVL__ERR_ENUM(name, text) OVL_##name,
  OVL_ERRNO_MAP(OVL__ERR_ENUM)
#undef OVL__ERR_ENUM
  OVL__ERR_COUNT
} ovl_status;

/* The text of a status ("success", "schedule error", ...). */
OVL_API const char *ovl_strerror(ovl_status status);
/* The name of a status ("OVL_EPARSE", ...). */
OVL_API const char *ovl_err_name(ovl_status status);

/* Where a failing call leaves its diagnostic. msg is always terminated. */
#define OVL_ERROR_MSG_MAX 1024
typedef struct ovl_error_s {
  ovl_status status;
  char msg[OVL_ERROR_MSG_MAX];
} ovl_error;

/*
 * Option structs (ovl_*_opts, ovl_json_envelope) can grow in later
 * versions without breaking a program built before: each begins with
 * `size`, the size of the struct the program was compiled with, and the
 * library reads no further than it; a field the program does not have
 * takes its default (the value 0 gives). Set it when the struct is made:
 *
 *     ovl_run_opts ro = OVL_OPTS_INIT(ovl_run_opts);
 *     ro.iters = 10;
 *
 * or `ovl_run_opts ro = {.size = sizeof ro, .iters = 10};`. A size of 0 (a
 * struct made without it) is refused with OVL_EINVAL, as are fields set
 * beyond what this library knows (a program built against a later one).
 */
#define OVL_OPTS_INIT(type) {.size = sizeof(type)}

/* `s` as a JSON string, quotes included, always valid UTF-8 (a byte of an
 * ill-formed sequence becomes U+FFFD), as the library writes every string
 * of its JSON: for a caller that adds members to the results JSON
 * (ovl_report_json's envelope). NULL gives "null". Malloc'd (free() it);
 * NULL when out of memory. */
OVL_API char *ovl_json_quote(const char *s);

/* Element types. float16 is IEEE 754 binary16, bfloat16 the top half of
 * a float32 (8 exponent bits, 7 fraction bits). Every op on a 16-bit
 * dtype computes in float and rounds its result once, to nearest even
 * (core/elemfn.h); the reference computes in float64 and rounds to the
 * variable's dtype after every op. */
typedef enum {
  OVL_DTYPE_FLOAT32 = 0,
  OVL_DTYPE_FLOAT64 = 1,
  OVL_DTYPE_FLOAT16 = 2,
  OVL_DTYPE_BFLOAT16 = 3
} ovl_dtype;
#define OVL_DTYPE_COUNT 4

/* Byte size of one element, and the schedule spelling ("float32",
 * "float64", "float16", "bfloat16"). */
OVL_API size_t ovl_dtype_size(ovl_dtype dtype);
OVL_API const char *ovl_dtype_name(ovl_dtype dtype);
/* The dtype of a schedule spelling; 0 (and *out untouched) for another
 * name. */
OVL_API int ovl_dtype_from_name(const char *name, ovl_dtype *out);

/* Default tolerances of the numeric check for values of `dtype`
 * (|got - ref| <= atol + rtol * |ref|): float32 and float64 rtol 1e-5,
 * atol 1e-6; float16 rtol 2e-3, atol 1e-5; bfloat16 rtol 1.6e-2, atol
 * 1e-5. The 16-bit ones are about 4 units of roundoff (2^-11, 2^-8): a
 * device sums a reduction's ranks rounding at every step, in its own
 * order, where the reference rounds once, and on 8 ranks that differs by
 * more than the 2 units PyTorch's float16 default (1e-3) allows. Pass
 * OVL_TOL_DTYPE as a tolerance to ovl_check_result or the pipeline to get
 * these, per fetched variable. */
#define OVL_TOL_DTYPE (-1.0)
OVL_API double ovl_dtype_rtol(ovl_dtype dtype);
OVL_API double ovl_dtype_atol(ovl_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_BASE_H */
