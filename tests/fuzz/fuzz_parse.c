/*
 * libFuzzer target: the schedule parser (`make fuzz`).
 *
 * The input's first bytes choose the parse options, the rest is the
 * schedule text, given with its exact length (NUL bytes included):
 *
 *   byte 0   nranks = byte % 66, so 0 and 65 (refused) occur too
 *   byte 1   bit 0: cpu_defaults; bits 1-2: how many -D defines follow
 *            (0-3); bit 3: filename NULL; bit 4: opts NULL
 *   then     each define as one line of text (up to '\n'), e.g. "cols=7"
 *   rest     the schedule
 *
 * A program that parses is also freed, inspected through every getter,
 * and, when it is small, transformed into every mode and race-checked:
 * everything downstream of the parser that allocates no variable.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ovl.h"

#define MAX_DEFINES 3
/* Programs with more ops than this are only parsed: transforms and the
 * race check are linear in ops, and repeat blocks make millions. */
#define MAX_CHECKED_OPS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inspect(const ovl_program *prog) {
  const char *name, *value, *plain;
  ovl_param_origin origin;
  ovl_var_info info;
  int line, stream;
  size_t nops = ovl_program_op_count(prog);

  (void)ovl_program_filename(prog);
  (void)ovl_program_ring_count(prog);
  (void)ovl_program_nranks(prog);
  (void)ovl_program_bytes_per_rank(prog);
  (void)ovl_program_numel_per_rank(prog);
  for (size_t i = 0; i < ovl_program_param_count(prog); i++)
    ovl_program_param(prog, i, &name, &value, &plain, &origin);
  for (size_t i = 0; i < ovl_program_fetch_count(prog); i++)
    ovl_program_fetch_info(prog, i, &info);
  for (size_t i = 0; i < nops && i < MAX_CHECKED_OPS; i++)
    ovl_program_op(prog, i, &name, &line, &stream);
  if (nops > MAX_CHECKED_OPS)
    return;
  for (int m = 0; m < OVL__MODE_COUNT; m++) {
    ovl_program *t = NULL;
    ovl_races *races = NULL;
    ovl_error err;
    char *text = NULL;
    if (ovl_program_transform(prog, (ovl_mode)m, &t, &err) != OVL_OK)
      continue;
    if (ovl_race_check(t, &races, &err) == OVL_OK) {
      if (ovl_races_format(races, t, m & 1, &text, &err) == OVL_OK)
        free(text);
      ovl_races_free(races);
    }
    ovl_program_free(t);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *defs[MAX_DEFINES] = {NULL};
  const char *defines[MAX_DEFINES];
  ovl_parse_opts opts = {0};
  ovl_program *prog = NULL;
  ovl_error err;
  size_t ndefs, k = 2;
  int flags;

  if (size < 2)
    return 0;
  opts.nranks = data[0] % 66;
  flags = data[1];
  opts.cpu_defaults = flags & 1;
  ndefs = (size_t)(flags >> 1) & 3;
  for (size_t i = 0; i < ndefs; i++) {
    const uint8_t *nl = k < size ? memchr(data + k, '\n', size - k) : NULL;
    size_t n = nl != NULL ? (size_t)(nl - (data + k)) : size - k;
    /* A C string: text after a NUL byte is not part of the define. */
    defs[i] = malloc(n + 1);
    if (defs[i] == NULL)
      goto out;
    memcpy(defs[i], data + k, n);
    defs[i][n] = '\0';
    defines[i] = defs[i];
    k += n + (nl != NULL);
  }
  opts.defines = defines;
  opts.ndefines = ndefs;

  if (ovl_program_parse((const char *)data + k, size - k,
                        flags & 8 ? NULL : "fuzz.sched",
                        flags & 16 ? NULL : &opts, &prog, &err) == OVL_OK) {
    inspect(prog);
    ovl_program_free(prog);
  }
out:
  for (size_t i = 0; i < ndefs; i++)
    free(defs[i]);
  return 0;
}
