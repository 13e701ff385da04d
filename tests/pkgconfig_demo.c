/*
 * A program built against the installed library with pkg-config only
 * (tests/install.sh, run by `make installcheck`):
 *
 *   cc $(pkg-config --cflags ovl) pkgconfig_demo.c $(pkg-config --libs ovl)
 *
 * It checks that the library it runs with is the version of the headers
 * it was compiled with, loads the installed seed schedule (argv[1])
 * small, runs it in sync and async form on 2 emulated cpu devices and
 * prints the library's version and the verdict: what a user of libovl
 * does first. Exit 0 when it passes.
 */
#include <ovl.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *defs[] = {"cols=10"};
  ovl_parse_opts po = {.size = sizeof po, .defines = defs, .ndefines = 1,
                       .nranks = 2, .cpu_defaults = 1};
  ovl_world_opts wo = {.size = sizeof wo, .backend = "cpu", .nranks = 2,
                       .timeout_s = 60};
  ovl_run_opts ro = {.size = sizeof ro, .iters = 2, .warmup = 1};
  ovl_pipeline_opts pl = {.size = sizeof pl,
                          .modes = OVL_MODE_BIT(OVL_MODE_SYNC) |
                                   OVL_MODE_BIT(OVL_MODE_ASYNC),
                          .races = 1, .run = 1, .run_opts = &ro,
                          .rtol = 1e-5, .atol = 1e-6};
  ovl_program *prog = NULL;
  ovl_world *world = NULL;
  ovl_report *report = NULL;
  ovl_error err = {0};
  int rc = 1;

  if (argc != 2) {
    fprintf(stderr, "usage: %s SCHEDULE\n", argv[0]);
    return 2;
  }
  if (ovl_version() != OVL_VERSION ||
      strcmp(ovl_version_string(), OVL_VERSION_STRING) != 0) {
    fprintf(stderr, "pkgconfig_demo: headers %s (%d), library %s (%d)\n",
            OVL_VERSION_STRING, OVL_VERSION, ovl_version_string(),
            ovl_version());
    return 1;
  }
  if (ovl_program_load(argv[1], &po, &prog, &err) != OVL_OK ||
      ovl_world_create(&wo, &world, &err) != OVL_OK ||
      ovl_pipeline_run(world, prog, &pl, &report, &err) != OVL_OK) {
    fprintf(stderr, "pkgconfig_demo: %s (%s)\n", err.msg,
            ovl_strerror(err.status));
  } else {
    const char *result = ovl_report_result(report);
    printf("libovl %s: %s: %s\n", ovl_version_string(), argv[1], result);
    rc = strcmp(result, "PASS") != 0;
  }
  ovl_report_free(report);
  ovl_world_free(world);
  ovl_program_free(prog);
  return rc;
}
