/*
 * --fix[=FILE] (tools/sim_fix.h): the fixed schedule from the library
 * (ovl_schedule_fix), written or shown as a diff. Not part of libovl.
 */
#include "sim_fix.h"

#include <stdio.h>
#include <stdlib.h>

#include "tool_util.h"

/* "1 race, 0 mismatches, 2 deadlocks" */
static void counts(FILE *f, uint64_t r, uint64_t m, uint64_t d) {
  fprintf(f, "%llu race%s, %llu mismatch%s, %llu deadlock%s",
          (unsigned long long)r, r == 1 ? "" : "s", (unsigned long long)m,
          m == 1 ? "" : "es", (unsigned long long)d, d == 1 ? "" : "s");
}

int sim_fix(const ovl_schedule *sched, const ovl_bind_opts *opts,
            unsigned modes, const outfile *out, bool quiet) {
  ovl_fixed *fx = NULL;
  ovl_error err = {0};
  char *diff = NULL;
  const char *text;
  size_t len = 0, n;
  uint64_t r, m, d;
  FILE *say = out != NULL ? stdout : stderr;
  int rc = -1;

  if (ovl_schedule_fix(sched, opts, modes, 0, &fx, &err) != OVL_OK) {
    fprintf(stderr, "%s: fix: %s\n", progname, err.msg);
    return err.status == OVL_EPARSE || err.status == OVL_EINVAL
               ? TOOL_EXIT_USAGE
               : TOOL_EXIT_RUNTIME;
  }
  n = ovl_fixed_count(fx);
  ovl_fixed_left(fx, &r, &m, &d);
  text = ovl_fixed_text(fx, &len);
  if (out != NULL) {
    if (outfile_write(out, text, len) < 0)
      rc = TOOL_EXIT_RUNTIME;
  } else if (ovl_fixed_diff(fx, ovl_schedule_filename(sched),
                            ovl_schedule_filename(sched), &diff, &len,
                            &err) != OVL_OK) {
    fprintf(stderr, "%s: fix: %s\n", progname, err.msg);
    rc = TOOL_EXIT_RUNTIME;
  } else if (n > 0) {
    fputs(diff, stdout);
  }
  free(diff);
  if (rc < 0 && !quiet) {
    for (size_t i = 0; i < n; i++)
      fprintf(say, "fix: applied %s\n", ovl_fixed_hint(fx, i));
    fprintf(say, "fix: %zu hint%s applied", n, n == 1 ? "" : "s");
    if (out != NULL)
      fprintf(say, ", the fixed schedule written to %s", out->path);
    if (r + m + d == 0) {
      fprintf(say, "; it has no findings (--races passes)\n");
    } else {
      fprintf(say, "; left: ");
      counts(say, r, m, d);
      fprintf(say, " (no checked hint removes %s)\n",
              r + m + d == 1 ? "it" : "them");
    }
  }
  if (rc < 0 && r + m + d > 0)
    rc = 4;
  ovl_fixed_free(fx);
  return rc;
}
