/*
 * Schedules: the text of a schedule, parsed, and its binding into a
 * program.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_SCHEDULE_H
#define OVL_PUBLIC_SCHEDULE_H

#include "ovl/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Schedules: the text of a schedule, parsed.                          */
/* ------------------------------------------------------------------ */

/*
 * A schedule is a file's statements as written, checked for syntax: no
 * rank count, no backend, no -D value is involved yet. Binding it (below)
 * makes a program for a rank count, -D values and a backend's defaults.
 * A schedule is immutable: it can be bound any number of times, from any
 * threads at once, and the programs it makes do not refer to it.
 *
 * What parsing checks: the text (at most 64 MiB, no NUL byte), its tokens
 * (numbers in range, identifiers at most 255 bytes), the form of every
 * statement, the nesting of repeat blocks (balanced, at most 64 deep), op
 * names (an unknown one is an error, with a suggestion when one is
 * close), literal repeat counts, and params (declared once, at top level,
 * not named true, false, param or repeat). What binding checks is
 * everything that depends on values: see ovl_schedule_bind.
 */
typedef struct ovl_schedule_s ovl_schedule;

/* Parse schedule text of `len` bytes (text may be NULL when len is 0).
 * `filename` names it in messages ("<string>" when NULL). On success
 * *out is a new schedule (free it with ovl_schedule_free); on failure
 * *out is left alone and the status is OVL_EPARSE with the message
 * "file:line:col: message" (or "file: ..." for the whole text), OVL_EINVAL
 * for a NULL argument, or OVL_ENOMEM. The text is copied. */
OVL_API ovl_status ovl_schedule_parse(const char *text, size_t len,
                                      const char *filename, ovl_schedule **out,
                                      ovl_error *err);
/* Read and parse a schedule file; `path` names it in messages. Errors as
 * ovl_schedule_parse, and OVL_EIO ("path: reason") when it cannot be read;
 * a file over 64 MiB is refused (OVL_EPARSE) before it is read. */
OVL_API ovl_status ovl_schedule_load(const char *path, ovl_schedule **out,
                                     ovl_error *err);
OVL_API void ovl_schedule_free(ovl_schedule *s);
/* The name given to ovl_schedule_parse (or the path). */
OVL_API const char *ovl_schedule_filename(const ovl_schedule *s);
/* Params in order of declaration. */
OVL_API size_t ovl_schedule_param_count(const ovl_schedule *s);
/* Param i: its name, its default as written ("10000", "2.", "rows"), and
 * its `cpu=` default as written, or NULL when it has none. Any pointer may
 * be NULL; an index out of range gives NULLs. The strings live as long as
 * the schedule. */
OVL_API void ovl_schedule_param(const ovl_schedule *s, size_t i,
                                const char **name, const char **plain_default,
                                const char **cpu_default);

typedef struct ovl_bind_opts_s {
  size_t size; /* OVL_OPTS_INIT (ovl/base.h) */
  /* NAME=VALUE strings that override `param` defaults (-D); each VALUE is
   * one number, bool or name, and each NAME must be a param of the
   * schedule. The last define of a name wins. */
  const char *const *defines;
  size_t ndefines;
  /* Ranks the program will run on (1..64): the shapes of c_allgather and
   * c_reducescatter outputs and the range of c_broadcast's root depend on
   * it. */
  int nranks;
  /* Non-zero: use a param's `cpu=` default where it has one (the emulated
   * backend runs smaller sizes by default). */
  int cpu_defaults;
  /* The most ops the program may have after repeat expansion, as
   * ovl_parse_opts.max_ops. */
  uint64_t max_ops;
} ovl_bind_opts;

/* Bind a schedule: give its params their values (a -D, else the cpu=
 * default with cpu_defaults, else the default), replace the names of
 * params by their values, check every statement against its op's row
 * (inputs, outputs, attributes and their values, variables, shapes and
 * dtypes for `nranks` ranks, rings), expand repeat blocks and lower the
 * program. opts NULL: 2 ranks, no defines, the plain defaults, the
 * built-in op limit. On success *out is a new program; on failure *out is
 * left alone and the status is OVL_EPARSE ("file:line:col: message", or
 * "-D NAME=VALUE: ..." for a define), OVL_EINVAL (a NULL argument or
 * define, nranks out of range), or OVL_ENOMEM (out of memory, or the
 * program is longer than max_ops: "file: the program has N ops after
 * repeat expansion; the limit is M", refused before the expansion is
 * allocated). `s` is not changed. */
OVL_API ovl_status ovl_schedule_bind(const ovl_schedule *s,
                                     const ovl_bind_opts *opts,
                                     ovl_program **out, ovl_error *err);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_SCHEDULE_H */
