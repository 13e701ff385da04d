/* Program lifetime and introspection. Programs are immutable once built. */
#include <stdlib.h>
#include <string.h>

#include "core/op.h"

void ovl_program_free(ovl_program *prog) {
  if (prog == NULL)
    return;
  for (size_t i = 0; i < prog->nvars; i++)
    free(prog->vars[i].name);
  for (size_t i = 0; i < prog->nparams; i++) {
    free(prog->params[i].name);
    free(prog->params[i].value);
    free(prog->params[i].plain_default);
  }
  for (size_t i = 0; i < prog->nevents; i++)
    free(prog->events[i]);
  for (size_t i = 0; i < prog->ndefines; i++)
    free(prog->defines[i]);
  free(prog->defines);
  free(prog->events);
  free(prog->vars);
  free(prog->ops);
  free(prog->blocks);
  free(prog->params);
  free(prog->fetch);
  free(prog->prims);
  free(prog->prim_first);
  free(prog->rank_attrs);
  for (int i = 0; prog->stream_names != NULL && i < prog->nstreams; i++)
    free(prog->stream_names[i]);
  free(prog->stream_names);
  free(prog->filename);
  free(prog);
}

static void *dup_array(const void *src, size_t n, size_t size, bool *fail) {
  void *p;
  if (n == 0)
    return NULL;
  p = malloc(n * size);
  if (p == NULL)
    *fail = true;
  else
    memcpy(p, src, n * size);
  return p;
}

static char *dup_str(const char *s, bool *fail) {
  char *p;
  if (s == NULL)
    return NULL;
  p = ovl__strdup(s);
  if (p == NULL)
    *fail = true;
  return p;
}

ovl_status ovl__program_clone(const ovl_program *prog, ovl_program **out,
                              ovl_error *err) {
  bool fail = false;
  ovl_program *p = calloc(1, sizeof *p);
  if (p == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory copying a program");
  *p = *prog;
  p->filename = dup_str(prog->filename, &fail);
  p->vars = dup_array(prog->vars, prog->nvars, sizeof *p->vars, &fail);
  p->ops = dup_array(prog->ops, prog->nops, sizeof *p->ops, &fail);
  p->blocks = dup_array(prog->blocks, prog->nblocks, sizeof *p->blocks,
                        &fail);
  p->params = dup_array(prog->params, prog->nparams, sizeof *p->params, &fail);
  p->fetch = dup_array(prog->fetch, prog->nfetch, sizeof *p->fetch, &fail);
  p->events = dup_array(prog->events, prog->nevents, sizeof *p->events, &fail);
  p->defines = dup_array(prog->defines, prog->ndefines, sizeof *p->defines,
                         &fail);
  p->prims = dup_array(prog->prims, prog->nprims, sizeof *p->prims, &fail);
  /* Ops keep their rank sets, peers, rank_attr indices and group numbers
   * (they are copied with the ops); the per-rank values they index: */
  p->rank_attrs = dup_array(prog->rank_attrs, prog->nrank_attrs,
                            sizeof *p->rank_attrs, &fail);
  p->stream_names = dup_array(prog->stream_names, (size_t)prog->nstreams,
                              sizeof *p->stream_names, &fail);
  p->prim_first = prog->prim_first == NULL
                      ? NULL
                      : dup_array(prog->prim_first, prog->nops + 1,
                                  sizeof *p->prim_first, &fail);
  /* The arrays hold borrowed strings until each is duplicated; on failure
   * clear the ones not yet owned so ovl_program_free stays correct. */
  if (p->vars == NULL)
    p->nvars = 0;
  if (p->params == NULL)
    p->nparams = 0;
  if (p->events == NULL)
    p->nevents = 0;
  if (p->defines == NULL)
    p->ndefines = 0;
  for (size_t i = 0; i < p->nvars; i++)
    p->vars[i].name = dup_str(prog->vars[i].name, &fail);
  for (size_t i = 0; i < p->nparams; i++) {
    p->params[i].name = dup_str(prog->params[i].name, &fail);
    p->params[i].value = dup_str(prog->params[i].value, &fail);
    p->params[i].plain_default = dup_str(prog->params[i].plain_default, &fail);
  }
  for (size_t i = 0; i < p->nevents; i++)
    p->events[i] = dup_str(prog->events[i], &fail);
  for (size_t i = 0; i < p->ndefines; i++)
    p->defines[i] = dup_str(prog->defines[i], &fail);
  if (p->stream_names == NULL)
    p->nstreams = 0;
  for (int i = 0; i < p->nstreams; i++)
    p->stream_names[i] = dup_str(prog->stream_names[i], &fail);
  if (fail) {
    ovl_program_free(p);
    return ovl__err(err, OVL_ENOMEM, "out of memory copying a program");
  }
  *out = p;
  return OVL_OK;
}

ovl_status ovl__program_set_defines(ovl_program *prog,
                                    const char *const *defines, size_t n,
                                    ovl_error *err) {
  bool fail = false;
  for (size_t i = 0; i < prog->ndefines; i++)
    free(prog->defines[i]);
  free(prog->defines);
  prog->defines = NULL;
  prog->ndefines = 0;
  if (n == 0)
    return OVL_OK;
  prog->defines = calloc(n, sizeof *prog->defines);
  if (prog->defines == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory");
  prog->ndefines = n;
  for (size_t i = 0; i < n; i++)
    prog->defines[i] = dup_str(defines[i], &fail);
  return fail ? ovl__err(err, OVL_ENOMEM, "out of memory") : OVL_OK;
}

const char *ovl_program_filename(const ovl_program *prog) {
  return prog->filename;
}
size_t ovl_program_op_count(const ovl_program *prog) { return prog->nops; }
int ovl_program_ring_count(const ovl_program *prog) { return prog->nrings; }
int ovl_program_stream_count(const ovl_program *prog) {
  return prog->nstreams;
}
const char *ovl_program_stream_name(const ovl_program *prog, int stream) {
  return ovl__stream_name(prog, stream);
}
int ovl_program_nranks(const ovl_program *prog) { return prog->nranks; }
size_t ovl_program_param_count(const ovl_program *prog) {
  return prog->nparams;
}

void ovl_program_param(const ovl_program *prog, size_t i, const char **name,
                       const char **value, const char **plain_default,
                       ovl_param_origin *origin) {
  const ovl__param *p = i < prog->nparams ? &prog->params[i] : NULL;
  static const ovl__param none = {NULL, NULL, NULL, OVL_PARAM_DEFAULT};
  if (p == NULL)
    p = &none;
  if (name != NULL)
    *name = p->name;
  if (value != NULL)
    *value = p->value;
  if (plain_default != NULL)
    *plain_default = p->plain_default;
  if (origin != NULL)
    *origin = p->origin;
}

/* Sums saturate at UINT64_MAX: many huge variables must not wrap around to
 * a small size that passes a memory check. */
static uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t ovl_program_bytes_per_rank(const ovl_program *prog) {
  uint64_t total = 0;
  for (size_t i = 0; i < prog->nvars; i++)
    total = add_sat(total, (uint64_t)prog->vars[i].numel *
                               ovl_dtype_size(prog->vars[i].dtype));
  return total;
}

uint64_t ovl_program_numel_per_rank(const ovl_program *prog) {
  uint64_t total = 0;
  for (size_t i = 0; i < prog->nvars; i++)
    total = add_sat(total, (uint64_t)prog->vars[i].numel);
  return total;
}

size_t ovl_program_fetch_count(const ovl_program *prog) {
  return prog->nfetch;
}

void ovl_program_fetch_info(const ovl_program *prog, size_t i,
                            ovl_var_info *info) {
  const ovl__var *v;
  memset(info, 0, sizeof *info);
  if (i >= prog->nfetch)
    return;
  v = &prog->vars[prog->fetch[i]];
  info->name = v->name;
  info->dtype = v->dtype;
  info->ndim = v->ndim;
  info->dims = v->dims;
  info->numel = v->numel;
}

void ovl_program_op(const ovl_program *prog, size_t i, const char **name,
                    int *line, int *stream) {
  const ovl__op *op = i < prog->nops ? &prog->ops[i] : NULL;
  if (name != NULL)
    *name = op != NULL ? op->def->name : NULL;
  if (line != NULL)
    *line = op != NULL ? op->line : 0;
  if (stream != NULL)
    *stream = op != NULL ? ovl__op_work_stream(prog, i) : OVL_STREAM_HOST;
}
