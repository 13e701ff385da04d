/*
 * tools/overlap_sim --calibrate=FILE (sim_calibrate.h): the profile the
 * model backend reads (--backend=model --profile=FILE), measured on a
 * real backend by the library (ovl_calibrate), written whole to FILE.
 * Not part of libovl.
 */
#include "sim_calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool_util.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_measure(void *ctx, const char *what) {
  (void)ctx;
  printf("calibrate: %s\n", what);
  /* Seen as it starts: a measurement may take seconds. */
  flush_output(stdout);
}

/* In the profile's JSON (the library's, one kernel an object with "op",
 * the fits an object whose keys are the kinds): how many kernels, and
 * the kinds of communication fitted ("allreduce, p2p") into buf. */
static int profile_summary(const char *json, char *buf, size_t size) {
  const char *s = strstr(json, "\"kernels\": [");
  const char *end = s != NULL ? strchr(s, ']') : NULL;
  int nk = 0;
  size_t len = 0;
  for (const char *q = s; q != NULL && q < end; q = strstr(q + 1, "{\"op\": "))
    nk += q != s;
  buf[0] = '\0';
  s = strstr(json, "\"comm\": {");
  end = s != NULL ? strstr(s, "\n  }") : NULL;
  /* Each kind: a line '    "KIND": {...'. */
  for (const char *q = s;
       q != NULL && (q = strstr(q, "\n    \"")) != NULL && q < end; q++) {
    const char *k = q + 6, *e = strchr(k, '"');
    if (e == NULL || len + (size_t)(e - k) + 3 >= size)
      break;
    len += (size_t)snprintf(buf + len, size - len, "%s%.*s", len ? ", " : "",
                            (int)(e - k), k);
  }
  if (len == 0)
    snprintf(buf, size, "none");
  return nk;
}

int sim_calibrate(const sim_options *o, ovl_world *world,
                  const ovl_program *prog, const char *path,
                  const outfile *out) {
  ovl_calibrate_opts co = OVL_OPTS_INIT(ovl_calibrate_opts);
  ovl_error err = {0};
  char *json = NULL, kinds[256];
  const char *base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
  double t0 = now_s();
  ovl_status st;
  int nk, rc;

  co.iters = o->common.iters;
  co.warmup = o->common.warmup;
  if (!o->common.quiet)
    co.progress = on_measure;
  st = ovl_calibrate(world, prog, &co, &json, &err);
  if (st != OVL_OK) {
    flush_output(stdout);
    fprintf(stderr, "%s: %s\n", progname, err.msg);
    return st == OVL_EINVAL ? TOOL_EXIT_USAGE : TOOL_EXIT_RUNTIME;
  }
  rc = outfile_write(out, json, strlen(json)) != 0 ? TOOL_EXIT_RUNTIME : 0;
  nk = profile_summary(json, kinds, sizeof kinds);
  if (rc == 0 && !o->common.quiet) {
    flush_output(stdout);
    fprintf(stderr,
            "wrote %s (profile of %s on %s: %d kernel%s, comm %s; "
            "%.1f s)\n",
            o->calibrate, base, ovl_world_device_name(world, 0), nk,
            nk == 1 ? "" : "s", kinds, now_s() - t0);
  }
  free(json);
  return rc;
}
