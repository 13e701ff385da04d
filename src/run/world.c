/*
 * Worlds: N ranks on one backend (docs/ARCHITECTURE.md, "The run"). A
 * world picks the backend, checks the rank count against its devices and
 * takes the backend's tuning (ovl_world_set) until its first run;
 * ovl_world_run (run/exec.c) runs programs on it.
 */
#include <limits.h>
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
      if (ovl__backends[i] != &ovl__backend_model &&
          ovl__backends[i]->device_count() > 0)
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
      ovl__err(err, OVL_ENODEV, "unknown backend '%s' (auto, cpu, cuda, model)",
               name);
    return NULL;
  }
  return be;
}

/* The layout of a world of several processes: every process's local
 * ranks, gathered; errors agreed, so that every process fails alike. */
static ovl_status procs_layout(const ovl__backend_ops *be, int ndev,
                               const ovl_world_opts *o, ovl__layout *lay,
                               ovl_error *err) {
  ovl_procs *p = o->procs;
  int nprocs = ovl__procs_size(p), me = ovl__procs_rank(p);
  int local = o->local_ranks == 0 ? 1 : o->local_ranks;
  int *counts;
  long total = 0;
  ovl_status st = OVL_OK;

  counts = calloc((size_t)nprocs, sizeof *counts);
  if (counts == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  /* Every process takes part in both collectives whatever it found;
   * then they agree. */
  {
    char mine[16] = {0}, first[16] = {0};
    ovl_status cst;
    snprintf(mine, sizeof mine, "%s", be->name);
    memcpy(first, mine, sizeof first);
    cst = ovl__procs_allgather(p, &local, counts, sizeof local, err);
    if (cst == OVL_OK)
      cst = ovl__procs_bcast(p, first, sizeof first, 0, err);
    if (cst != OVL_OK) {
      free(counts);
      return cst; /* MPI itself failed: nothing more to agree over */
    }
    if (local < 1 || local > OVL_MAX_RANKS)
      st = ovl__err(err, OVL_EINVAL,
                    "ranks per process must be 1..%d, got %d",
                    OVL_MAX_RANKS, local);
    /* One backend for all ('auto' decides by what each host shows). */
    else if (strcmp(first, mine) != 0)
      st = ovl__err(err, OVL_ENODEV,
                    "process %d has backend '%s' but process 0 has '%s' "
                    "(--backend picks one for all)",
                    me, mine, first);
  }
  st = ovl__procs_agree(p, st, err);
  if (st != OVL_OK) {
    free(counts);
    return st;
  }
  lay->procs = p;
  lay->nlocal = local;
  lay->first = 0;
  lay->proc_first = calloc((size_t)nprocs + 1, sizeof *lay->proc_first);
  if (lay->proc_first == NULL) {
    free(counts);
    return ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  }
  for (int q = 0; q < nprocs; q++) {
    if (q < me)
      lay->first += counts[q];
    total += counts[q];
    lay->proc_first[q + 1] =
        (int)(total < OVL_MAX_RANKS ? total : OVL_MAX_RANKS);
  }
  free(counts);
  if (total > OVL_MAX_RANKS)
    st = ovl__err(err, OVL_EINVAL,
                  "%d processes of %d rank%s make %ld ranks; at most %d",
                  nprocs, local, local == 1 ? "" : "s", total,
                  OVL_MAX_RANKS);
  else if (o->nranks != 0 && o->nranks != total)
    st = ovl__err(err, OVL_EINVAL,
                  "asked for %d ranks, but %d process%s of %d rank%s each "
                  "make %ld (ranks = processes x ranks per process)",
                  o->nranks, nprocs, nprocs == 1 ? "" : "es", local,
                  local == 1 ? "" : "s", total);
  else if (local > ndev)
    st = ovl__err(err, OVL_ENODEV,
                  "backend '%s': process %d drives %d rank%s but %d "
                  "device%s visible to it",
                  be->name, me, local, local == 1 ? "" : "s", ndev,
                  ndev == 1 ? " is" : "s are");
  /* The processes of a node share its devices when it has enough for all
   * (process k of the node from device k * local); else each process has
   * its own (a launcher that sets CUDA_VISIBLE_DEVICES per process, as
   * Slurm's --gpus-per-task does) and starts at device 0. */
  lay->dev0 = ovl__procs_node_size(p) * local <= ndev
                  ? ovl__procs_node_rank(p) * local
                  : 0;
  lay->nranks = (int)total;
  return ovl__procs_agree(p, st, err);
}

/* Every rank's device name, and the devices in words ("4 x emulated
 * (cpu) in 2 processes"), gathered. */
static ovl_status procs_devices(ovl_world *w, ovl_error *err) {
  const ovl__layout *lay = &w->lay;
  int nprocs = ovl__procs_size(lay->procs);
  int *counts = calloc((size_t)nprocs, sizeof *counts);
  ovl_status st;
  size_t len = 0;
  w->names = calloc((size_t)w->nranks, sizeof *w->names);
  if (counts == NULL || w->names == NULL) {
    free(counts);
    return ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  }
  for (int i = 0; i < lay->nlocal; i++)
    snprintf(w->names[lay->first + i], sizeof w->names[0], "%s",
             w->be->device_name(w->bw, lay->first + i));
  st = ovl__procs_allgather(lay->procs, &lay->nlocal, counts,
                            sizeof lay->nlocal, err);
  if (st == OVL_OK)
    st = ovl__procs_allgather_rows(lay->procs, w->names[lay->first],
                                   w->names, counts, sizeof w->names[0],
                                   err);
  free(counts);
  if (st != OVL_OK)
    return st;
  for (int r = 0; r < w->nranks;) {
    int run = 1;
    while (r + run < w->nranks && strcmp(w->names[r + run], w->names[r]) == 0)
      run++;
    if (len < sizeof w->devices)
      len += (size_t)snprintf(w->devices + len, sizeof w->devices - len,
                              "%s%d x %s", r > 0 ? ", " : "", run,
                              w->names[r]);
    r += run;
  }
  if (len < sizeof w->devices)
    snprintf(w->devices + len, sizeof w->devices - len, " in %d process%s",
             nprocs, nprocs == 1 ? "" : "es");
  return OVL_OK;
}

/* ovl_world_create of a world of several processes: each step that one
 * process may fail alone (no backend, no device, memory) is agreed before
 * the next collective one, so that every process fails alike and none
 * waits in a collective the others left. */
static ovl_status world_create_procs(const ovl_world_opts *o,
                                     ovl_world **out, ovl_error *err) {
  const ovl__backend_ops *be = pick_backend(o->backend, err);
  ovl_world *w = NULL;
  ovl_status st = OVL_OK;
  int ndev = 0;
  if (be == NULL)
    st = OVL_ENODEV;
  else if ((ndev = be->device_count()) <= 0)
    st = ovl__err(err, OVL_ENODEV, "backend '%s': no device is visible",
                  be->name);
  else if ((w = calloc(1, sizeof *w)) == NULL)
    st = ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  st = ovl__procs_agree(o->procs, st, err);
  if (st == OVL_OK)
    st = procs_layout(be, ndev, o, &w->lay, err);
  if (st != OVL_OK) {
    if (w != NULL)
      free(w->lay.proc_first);
    free(w);
    return st;
  }
  w->be = be;
  w->nranks = w->lay.nranks;
  w->timeout_s = o->timeout_s;
  st = be->world_init(&w->lay, o->timeout_s, &w->bw, err);
  st = ovl__procs_agree(o->procs, st, err);
  if (st == OVL_OK)
    st = procs_devices(w, err);
  if (st != OVL_OK) {
    if (w->bw != NULL)
      be->world_fini(w->bw);
    free(w->names);
    free(w->lay.proc_first);
    free(w);
    return st;
  }
  *out = w;
  return OVL_OK;
}

ovl_status ovl_world_create(const ovl_world_opts *opts, ovl_world **out,
                            ovl_error *err) {
  ovl_world_opts o;
  const ovl__backend_ops *be;
  ovl_world *w;
  ovl_status st;
  int ndev;

  if (out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_create: out is NULL");
  if ((st = ovl__opts_read(&o, sizeof o, opts, "ovl_world_opts", err)) !=
      OVL_OK)
    return st;
  if (o.timeout_s <= 0)
    o.timeout_s = 60.0;
  if (o.procs != NULL) {
    /* Every step the processes take together from here is bounded by
     * the world's timeout. */
    ovl_procs_set_timeout(o.procs, o.timeout_s);
    return world_create_procs(&o, out, err);
  }
  be = pick_backend(o.backend, err);
  if (be == NULL)
    return OVL_ENODEV;
  ndev = be->device_count();
  if (ndev <= 0)
    return ovl__err(err, OVL_ENODEV, "backend '%s': no device is visible",
                    be->name);
  if (o.nranks == 0)
    o.nranks = be->default_ranks();
  if (o.nranks < 1 ||
      o.nranks > (be == &ovl__backend_model ? OVL_MAX_MODEL_RANKS
                                            : OVL_MAX_RANKS))
    return ovl__err(err, OVL_EINVAL, "ranks must be 1..%d%s, got %d",
                    be == &ovl__backend_model ? OVL_MAX_MODEL_RANKS
                                              : OVL_MAX_RANKS,
                    be == &ovl__backend_model ? "" : " (the model: 65536)",
                    o.nranks);
  if (o.nranks > ndev)
    return ovl__err(err, OVL_ENODEV,
                    "backend '%s': asked for %d ranks but %d device%s "
                    "visible",
                    be->name, o.nranks, ndev, ndev == 1 ? " is" : "s are");
  w = calloc(1, sizeof *w);
  if (w == NULL)
    return ovl__err(err, OVL_ENOMEM, "out of memory creating the world");
  w->be = be;
  w->nranks = o.nranks;
  w->timeout_s = o.timeout_s;
  w->lay.nranks = o.nranks;
  w->lay.nlocal = o.nranks;
  st = be->world_init(&w->lay, o.timeout_s, &w->bw, err);
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
                                          "tf32", "machine", "profile"};

/* What a backend accepted, as the reports echo it (the backends have
 * checked the value's form). */
static void record_tuning(ovl__tuning *t, const char *key,
                          const char *value) {
  unsigned long n = 0;
  (void)ovl__parse_uint(value, UINT_MAX, &n);
  if (strcmp(key, "chaos_seed") == 0)
    t->chaos_seed = (unsigned)n;
  else if (strcmp(key, "comm_priority") == 0)
    t->comm_priority_high = strcmp(value, "high") == 0;
  else if (strcmp(key, "nccl_min_ctas") == 0)
    t->nccl_min_ctas = (int)n;
  else if (strcmp(key, "nccl_max_ctas") == 0)
    t->nccl_max_ctas = (int)n;
  else if (strcmp(key, "tf32") == 0)
    t->tf32 = strcmp(value, "on") == 0;
  else if (strcmp(key, "machine") == 0)
    snprintf(t->machine, sizeof t->machine, "%s", value);
  else if (strcmp(key, "profile") == 0)
    snprintf(t->profile, sizeof t->profile, "%s", value);
}

ovl_status ovl_world_set(ovl_world *world, const char *key,
                         const char *value, ovl_error *err) {
  bool known = false;
  ovl_status st;
  if (world == NULL || key == NULL || value == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_world_set: NULL argument");
  for (size_t i = 0; i < sizeof tuning_keys / sizeof tuning_keys[0]; i++)
    known = known || strcmp(key, tuning_keys[i]) == 0;
  if (!known)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_world_set: unknown key '%s' (comm_priority, "
                    "nccl_min_ctas, nccl_max_ctas, chaos_seed, tf32, "
                    "machine, profile)",
                    key);
  if (world->ran)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_world_set: %s: the world has run already (tuning "
                    "comes before the first run)",
                    key);
  if (world->be->world_set == NULL)
    return ovl__err(err, OVL_EINVAL, "backend '%s' has no tuning knobs",
                    world->be->name);
  st = world->be->world_set(world->bw, key, value, err);
  if (st == OVL_OK)
    record_tuning(&world->tuning, key, value);
  return st;
}

void ovl_world_free(ovl_world *world) {
  if (world == NULL)
    return;
  world->be->world_fini(world->bw);
  free(world->names);
  free(world->lay.proc_first);
  free(world);
}

const char *ovl_world_backend_name(const ovl_world *world) {
  return world->be->name;
}
int ovl_world_nranks(const ovl_world *world) { return world->nranks; }
const char *ovl_world_devices(const ovl_world *world) {
  if (world->lay.procs != NULL)
    return world->devices;
  return world->be->world_devices(world->bw);
}
int ovl_world_has_graphs(const ovl_world *world) {
  return world != NULL && (world->be->graph_begin != NULL ||
                           ovl__model_of(world->be, world->bw) != NULL);
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
  if (world->lay.procs != NULL)
    return world->names[rank];
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


int ovl_world_model_about(const ovl_world *world, const ovl_program *prog,
                          char *buf, size_t size) {
  const ovl__model *m =
      world != NULL ? ovl__model_of(world->be, world->bw) : NULL;
  if (m == NULL || prog == NULL || buf == NULL)
    return -1;
  ovl__model_about(m, prog, buf, size);
  return 0;
}
