/*
 * Worlds: N ranks on one backend (docs/ARCHITECTURE.md, "The run"). A
 * world picks the backend, checks the rank count against its devices and
 * takes the backend's tuning (ovl_world_set) until its first run;
 * ovl_world_run (run/exec.c) runs programs on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/run.h"

static const ovl__backend_ops *pick_backend(const char *name,
                                            ovl_error *err) {
  const ovl__backend_ops *be;
  if (name == NULL || strcmp(name, "auto") == 0) {
    for (size_t i = 0; ovl__backends[i] != NULL; i++)
      if (ovl__backends[i]->device_count() > 0)
        return ovl__backends[i];
    ovl__err(err, OVL_ENODEV, "no backend has a usable device");
    return NULL;
  }
  be = ovl__backend_find(name);
  if (be == NULL) {
    if (strcmp(name, "cuda") == 0)
      ovl__err(err, OVL_ENODEV,
               "backend 'cuda' was not compiled in (configure found no "
               "CUDA/NCCL)");
    else
      ovl__err(err, OVL_ENODEV, "unknown backend '%s' (auto, cpu, cuda)",
               name);
    return NULL;
  }
  return be;
}

ovl_status ovl_world_create(const ovl_world_opts *opts, ovl_world **out,
                            ovl_error *err) {
  ovl_world_opts o = {0};
  const ovl__backend_ops *be;
  ovl_world *w;
  ovl_status st;
  int ndev;

  if (out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_create: out is NULL");
  if (opts != NULL)
    o = *opts;
  be = pick_backend(o.backend, err);
  if (be == NULL)
    return OVL_ENODEV;
  ndev = be->device_count();
  if (ndev <= 0)
    return ovl__err(err, OVL_ENODEV, "backend '%s': no device is visible",
                    be->name);
  if (o.nranks == 0)
    o.nranks = be->default_ranks();
  if (o.nranks < 1 || o.nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL, "ranks must be 1..%d, got %d",
                    OVL_MAX_RANKS, o.nranks);
  if (o.nranks > ndev)
    return ovl__err(err, OVL_ENODEV,
                    "backend '%s': asked for %d ranks but %d device%s "
                    "visible",
                    be->name, o.nranks, ndev, ndev == 1 ? " is" : "s are");
  if (o.timeout_s <= 0)
    o.timeout_s = 60.0;
  w = calloc(1, sizeof *w);
  if (w == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  w->be = be;
  w->nranks = o.nranks;
  w->timeout_s = o.timeout_s;
  st = be->world_init(o.nranks, o.timeout_s, &w->bw, err);
  if (st != OVL_OK) {
    free(w);
    return st;
  }
  *out = w;
  return OVL_OK;
}

/* The keys of ovl_world_set; each backend has some of them. */
static const char *const tuning_keys[] = {"comm_priority", "nccl_min_ctas",
                                          "nccl_max_ctas", "chaos_seed",
                                          "tf32"};

ovl_status ovl_world_set(ovl_world *world, const char *key,
                         const char *value, ovl_error *err) {
  bool known = false;
  if (world == NULL || key == NULL || value == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_set: NULL argument");
  for (size_t i = 0; i < sizeof tuning_keys / sizeof tuning_keys[0]; i++)
    known = known || strcmp(key, tuning_keys[i]) == 0;
  if (!known)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_world_set: unknown key '%s' (comm_priority, "
                    "nccl_min_ctas, nccl_max_ctas, chaos_seed, tf32)",
                    key);
  if (world->ran)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_world_set: %s: the world has run already (tuning "
                    "comes before the first run)",
                    key);
  if (world->be->world_set == NULL)
    return ovl__err(err, OVL_EINVAL, "backend '%s' has no tuning knobs",
                    world->be->name);
  return world->be->world_set(world->bw, key, value, err);
}

void ovl_world_free(ovl_world *world) {
  if (world == NULL)
    return;
  world->be->world_fini(world->bw);
  free(world);
}

const char *ovl_world_backend_name(const ovl_world *world) {
  return world->be->name;
}
int ovl_world_nranks(const ovl_world *world) { return world->nranks; }
const char *ovl_world_devices(const ovl_world *world) {
  return world->be->world_devices(world->bw);
}
int ovl_world_has_graphs(const ovl_world *world) {
  return world != NULL && world->be->graph_begin != NULL;
}

ovl_status ovl__err_no_graphs(ovl_error *err, const char *backend) {
  return ovl__err(err, OVL_EINVAL,
                  "graphs: backend '%s' cannot run a program as graphs "
                  "(CUDA graphs need the cuda backend)",
                  backend);
}

const char *ovl_world_device_name(const ovl_world *world, int rank) {
  if (world == NULL || rank < 0 || rank >= world->nranks)
    return NULL;
  return world->be->device_name(world->bw, rank);
}

/* The "model name" line of /proc/cpuinfo, or "unknown". */
static void cpu_model(char *buf, size_t len) {
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(buf, len, "unknown");
  if (f == NULL)
    return;
  while (fgets(line, sizeof line, f) != NULL) {
    char *colon = strchr(line, ':');
    size_t n;
    if (strncmp(line, "model name", 10) != 0 || colon == NULL)
      continue;
    colon++;
    while (*colon == ' ' || *colon == '\t')
      colon++;
    n = strcspn(colon, "\n");
    if (n > 0)
      snprintf(buf, len, "%.*s", (int)n, colon);
    break;
  }
  fclose(f);
}

void ovl_world_info_get(const ovl_world *world, ovl_world_info *info) {
  if (info == NULL)
    return;
  memset(info, 0, sizeof *info);
  snprintf(info->driver_version, sizeof info->driver_version, "n/a");
  snprintf(info->runtime_version, sizeof info->runtime_version, "n/a");
  snprintf(info->nccl_version, sizeof info->nccl_version, "n/a");
  if (gethostname(info->hostname, sizeof info->hostname - 1) != 0 ||
      info->hostname[0] == '\0')
    snprintf(info->hostname, sizeof info->hostname, "unknown");
  info->hostname[sizeof info->hostname - 1] = '\0';
  cpu_model(info->cpu_model, sizeof info->cpu_model);
  if (world != NULL)
    world->be->world_info(world->bw, info);
}

