/*
 * What the reports of the checks share (check/findings.h).
 */
#include <stdlib.h>

#include "check/findings.h"

ovl_status ovl__findings_format(const void *res, const ovl_program *prog,
                                ovl__findings_fmt fmt, const char *fn,
                                const char *what, char **text,
                                ovl_error *err) {
  ovl__sbuf b = {0};
  const char *file = prog != NULL && prog->filename != NULL ? prog->filename
                                                            : "<program>";
  if (res == NULL || text == NULL)
    return ovl__err(err, OVL_EINVAL, "%s: bad argument", fn);
  *text = NULL;
  fmt(&b, res, prog, file);
  if (b.fail || b.s == NULL) {
    free(b.s);
    return ovl__err(err, OVL_ENOMEM, "%s: out of memory", what);
  }
  *text = b.s;
  return OVL_OK;
}

void ovl__findings_close(ovl__sbuf *b, size_t n, uint64_t more,
                         const char *unlisted, const char *one,
                         const char *many, const char *file, int nranks,
                         const char *extra) {
  if (more > 0)
    ovl__sb_printf(b, "and %llu more %s%s not listed (the list stops at "
                      "%d)\n",
                   (unsigned long long)more, unlisted, more == 1 ? "" : "s",
                   OVL_FINDINGS_LIST_MAX);
  if (n == 0 && more == 0)
    ovl__sb_printf(b, "no %s in %s (%d rank%s%s)\n", many, file, nranks,
                   nranks == 1 ? "" : "s", extra);
  else
    ovl__sb_printf(b, "%zu %s in %s (%d rank%s)\n", n, n == 1 ? one : many,
                   file, nranks, nranks == 1 ? "" : "s");
}
