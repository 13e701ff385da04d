/*
 * What the reports of the checks share (check/race.c, check/mismatch.c,
 * check/deadlock.c): the formatting entry point (ovl_X_format) and the
 * closing lines of the mismatch and deadlock reports in text.
 */
#ifndef OVL_CHECK_FINDINGS_H
#define OVL_CHECK_FINDINGS_H

#include "core/op.h"

/* Writes report `res` into `b`, in JSON or as text; `file` is the
 * program's name ("<program>" when it has none). */
typedef void (*ovl__findings_fmt)(ovl__sbuf *b, const void *res,
                                  const ovl_program *prog, const char *file);

/* The body of ovl_X_format: `fmt` (the JSON or the text formatter) on
 * `res`, the result in *text. A NULL `res` or `text` is "FN: bad
 * argument"; no memory, "WHAT: out of memory". */
ovl_status ovl__findings_format(const void *res, const ovl_program *prog,
                                ovl__findings_fmt fmt, const char *fn,
                                const char *what, char **text,
                                ovl_error *err);

/* The closing lines of a text report listing `n` findings, with `more`
 * not listed: "and M more UNLISTEDs not listed (the list stops at ...)",
 * then "no MANY in FILE (R ranks EXTRA)" when there are none, else
 * "N ONE|MANY in FILE (R ranks)". `extra` follows the ranks in the first
 * form only ("" for nothing). */
void ovl__findings_close(ovl__sbuf *b, size_t n, uint64_t more,
                         const char *unlisted, const char *one,
                         const char *many, const char *file, int nranks,
                         const char *extra);

#endif /* OVL_CHECK_FINDINGS_H */
