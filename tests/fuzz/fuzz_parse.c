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
 * The text is parsed and bound twice: by ovl_program_parse, and by
 * ovl_schedule_parse then ovl_schedule_bind with the same options. Both
 * must succeed or both fail, and make the same program (the target aborts
 * otherwise). The schedule is then bound again for another rank count
 * (byte 0 + 1) with a small op limit, to exercise binding one schedule
 * many times. A program that binds is inspected through every getter and,
 * when it is small, transformed into every mode and race-checked:
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
/* The op limit of the second bind. */
#define REBIND_MAX_OPS 65536

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

/* What two programs bound from the same text and options must share
 * (kept as numbers: the first is freed before the second is made, so that
 * at most one program of millions of ops is alive). */
typedef struct summary {
  size_t ops, fetch, params;
  int rings, ranks;
  uint64_t bytes;
} summary;

static summary summarize(const ovl_program *p) {
  summary s = {ovl_program_op_count(p), ovl_program_fetch_count(p),
               ovl_program_param_count(p), ovl_program_ring_count(p),
               ovl_program_nranks(p), ovl_program_bytes_per_rank(p)};
  return s;
}

static int same(const summary *a, const summary *b) {
  return a->ops == b->ops && a->fetch == b->fetch && a->params == b->params &&
         a->rings == b->rings && a->ranks == b->ranks && a->bytes == b->bytes;
}

/* Parse and bind `text` both ways (see the top of the file). */
static void parse_and_bind(const char *text, size_t len, const char *fname,
                           const ovl_parse_opts *po) {
  ovl_program *prog = NULL;
  ovl_schedule *sched = NULL;
  summary one = {0}, two;
  ovl_error err;
  ovl_status st1, st2;

  st1 = ovl_program_parse(text, len, fname, po, &prog, &err);
  if (st1 == OVL_OK) {
    one = summarize(prog);
    inspect(prog);
    ovl_program_free(prog);
  }
  st2 = ovl_schedule_parse(text, len, fname, &sched, &err);
  if (st2 == OVL_OK) {
    const char *name, *plain, *cpu;
    ovl_bind_opts bo = OVL_OPTS_INIT(ovl_bind_opts);
    (void)ovl_schedule_filename(sched);
    for (size_t i = 0; i <= ovl_schedule_param_count(sched); i++)
      ovl_schedule_param(sched, i, &name, &plain, &cpu);
    if (po != NULL)
      bo = (ovl_bind_opts){.size = sizeof(ovl_bind_opts),
                           .defines = po->defines,
                           .ndefines = po->ndefines,
                           .nranks = po->nranks,
                           .cpu_defaults = po->cpu_defaults,
                           .max_ops = po->max_ops};
    st2 = ovl_schedule_bind(sched, po != NULL ? &bo : NULL, &prog, &err);
    if (st2 == OVL_OK) {
      two = summarize(prog);
      ovl_program_free(prog);
      if (st1 == OVL_OK && !same(&one, &two))
        abort(); /* the one-call form made another program */
    }
  }
  if ((st1 == OVL_OK) != (st2 == OVL_OK))
    abort(); /* the one-call form and the two steps disagree */
  if (sched != NULL) {
    /* The same schedule again, for another rank count. */
    ovl_bind_opts again = {.size = sizeof again,
                           .nranks = (po != NULL ? po->nranks : 2) + 1,
                           .max_ops = REBIND_MAX_OPS};
    if (ovl_schedule_bind(sched, &again, &prog, &err) == OVL_OK) {
      inspect(prog);
      ovl_program_free(prog);
    }
    ovl_schedule_free(sched);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *defs[MAX_DEFINES] = {NULL};
  const char *defines[MAX_DEFINES];
  ovl_parse_opts opts = OVL_OPTS_INIT(ovl_parse_opts);
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

  parse_and_bind((const char *)data + k, size - k,
                 flags & 8 ? NULL : "fuzz.sched", flags & 16 ? NULL : &opts);
out:
  for (size_t i = 0; i < ndefs; i++)
    free(defs[i]);
  return 0;
}
