/*
 * tools/overlap_sim's host memory check (sim_memory.h). Not part of
 * libovl.
 */
#include "sim_memory.h"

#include <stdio.h>
#include <string.h>

#include "tool_util.h"

/* The plan of --races (nranks 0: nothing runs) or of a run on `backend`. */
void sim_plan_memory(mem_plan *m, const sim_options *o, int nmodes,
                     const char *backend, int nranks) {
  memset(m, 0, sizeof *m);
  m->ops.size = sizeof m->ops;
  m->ops.nmodes = nmodes;
  m->ops.race_check = o->races_only || !o->no_races;
  m->ops.fix_check = m->ops.race_check;
  m->ops.nranks = nranks;
  m->ops.backend = backend;
  m->ops.op_times = o->op_times;
  m->ops.trace = o->trace != NULL || o->svg != NULL;
  m->ops.trace_text = o->trace != NULL;
  m->ops.svg = o->svg != NULL;
  m->per_op = ovl_host_bytes_per_op(&m->ops);
  m->have = host_memory();
  m->nranks = nranks;
  m->nmodes = nmodes;
  m->cpu = backend != NULL && strcmp(backend, "cpu") == 0;
}

/* ovl_parse_opts.max_ops: as many ops as the whole host memory holds at
 * the plan's cost, so that a schedule of far more ops is refused before it
 * is expanded (0: no limit, the memory is unknown). What else the run
 * needs is counted once the program is known (sim_check_host_memory). */
static uint64_t plan_max_ops(const mem_plan *m) {
  uint64_t n;
  if (m->have == 0 || m->per_op == 0)
    return 0;
  n = m->have / m->per_op;
  return n > 0 ? n : 1;
}

/* What the per-op figure covers, for the messages. */
static const char *per_op_parts(const mem_plan *m, char *buf, size_t len) {
  snprintf(buf, len,
           "%d op lists (the schedule's%s)%s%s%s%s%s%s",
           1 + m->nmodes + (m->ops.fix_check ? 1 : 0),
           m->ops.fix_check ? ", each mode's and a fix's re-check"
                            : " and each mode's",
           m->ops.race_check ? ", race check" : "",
           m->nranks > 0 && m->cpu ? ", command queues" : "",
           m->ops.op_times || m->ops.trace ? ", timer marks" : "",
           m->ops.op_times ? ", op times" : "",
           m->ops.trace ? ", spans" : "",
           m->ops.trace_text ? ", trace text"
           : m->ops.svg      ? ", picture"
                             : "");
  return buf;
}

/* "24.1 GB", and where the figure came from when a test set it. */
static const char *machine_memory(const mem_plan *m, char *buf, size_t len) {
  char b[32];
  snprintf(buf, len, "%s%s", format_bytes(m->have, b, sizeof b),
           host_memory_overridden() ? ", from OVL_HOST_MEMORY" : "");
  return buf;
}

/* The load refused the program for its op count (OVL_ENOMEM with max_ops
 * set): the library's message, and where the limit comes from. */
static void report_too_many_ops(const mem_plan *m, const char *msg) {
  char b1[32], b2[64], parts[256];
  fprintf(stderr,
          "%s: %s (%s of host memory an op: %s; this machine has %s). Use "
          "fewer or smaller repeat blocks%s.\n",
          progname, msg, format_bytes(m->per_op, b1, sizeof b1),
          per_op_parts(m, parts, sizeof parts),
          machine_memory(m, b2, sizeof b2),
          m->nranks > 1 ? " or fewer --ranks" : "");
}

int sim_parse_schedule(const char *path, ovl_schedule **sched) {
  ovl_error err = {0};
  if (ovl_schedule_load(path, sched, &err) == OVL_OK)
    return -1;
  fprintf(stderr, "%s: %s\n", progname, err.msg);
  return TOOL_EXIT_USAGE;
}

int sim_bind_schedule(const ovl_schedule *sched, ovl_bind_opts *bopts,
                      const mem_plan *m, ovl_program **prog) {
  ovl_error err = {0};
  ovl_status st;
  bopts->max_ops = plan_max_ops(m);
  st = ovl_schedule_bind(sched, bopts, prog, &err);
  if (st == OVL_OK)
    return -1;
  if (st == OVL_ENOMEM && bopts->max_ops > 0)
    report_too_many_ops(m, err.msg);
  else
    fprintf(stderr, "%s: %s\n", progname, err.msg);
  return TOOL_EXIT_USAGE;
}

/* Bytes of every fetched value of one rank as float64: what a result
 * keeps of each mode's run. */
static uint64_t fetched_f64_bytes(const ovl_program *prog) {
  uint64_t total = 0;
  for (size_t i = 0; i < ovl_program_fetch_count(prog); i++) {
    ovl_var_info v;
    ovl_program_fetch_info(prog, i, &v);
    total = add_sat(total, mul_sat((uint64_t)v.numel, sizeof(double)));
  }
  return total;
}

/* Everything the run holds at once, against the host's memory: per rank,
 * the variables on the cpu backend (its devices are host memory), the
 * float64 reference (8 bytes of every element), and the float64 copy of
 * every fetched value of every mode (the results are kept to the end);
 * and the ops at the plan's cost per op. --races counts the ops only.
 * Returns an exit status, or -1 to go on. */
/* The model allocates nothing of the schedule's: nothing to check. */
static int check_host_memory(const ovl_program *prog, const char *path,
                             const mem_plan *m, bool reference);
int sim_check_host_memory(const ovl_program *prog, const char *path,
                          const mem_plan *m, bool reference) {
  if (m->ops.backend != NULL && strcmp(m->ops.backend, "model") == 0)
    return -1;
  return check_host_memory(prog, path, m, reference);
}

static int check_host_memory(const ovl_program *prog, const char *path,
                             const mem_plan *m, bool reference) {
  uint64_t dev = m->cpu ? ovl_program_bytes_per_rank(prog) : 0;
  uint64_t ref = reference ? mul_sat(ovl_program_numel_per_rank(prog), 8)
                           : 0;
  uint64_t fetched = fetched_f64_bytes(prog);
  uint64_t per_rank = add_sat(add_sat(dev, ref),
                              mul_sat((uint64_t)m->nmodes, fetched));
  uint64_t nops = ovl_program_op_count(prog);
  uint64_t ops = mul_sat(nops, m->per_op);
  uint64_t need = add_sat(mul_sat(per_rank, (uint64_t)m->nranks), ops);
  char b[5][32], have[64], parts[256];
  if (m->have == 0 || need <= m->have)
    return -1;
  per_op_parts(m, parts, sizeof parts);
  machine_memory(m, have, sizeof have);
  if (m->nranks == 0) {
    fprintf(stderr,
            "%s: %s: needs about %s of host memory (%llu op%s x %s: %s); "
            "this machine has %s. Use fewer or smaller repeat blocks.\n",
            progname, path, format_bytes(need, b[0], sizeof b[0]),
            (unsigned long long)nops, nops == 1 ? "" : "s",
            format_bytes(m->per_op, b[1], sizeof b[1]), parts, have);
    return TOOL_EXIT_USAGE;
  }
  fprintf(stderr,
          "%s: %s: needs about %s of host memory (%d ranks x (%s of "
          "variables on the %s backend + %s for the float64 reference + "
          "%d mode%s x %s of fetched values as float64) + %llu op%s x %s: "
          "%s); this machine has %s. Use smaller -D sizes, fewer --ranks or "
          "fewer ops.\n",
          progname, path, format_bytes(need, b[0], sizeof b[0]), m->nranks,
          format_bytes(dev, b[1], sizeof b[1]), m->cpu ? "cpu" : "device",
          format_bytes(ref, b[2], sizeof b[2]), m->nmodes,
          m->nmodes == 1 ? "" : "s", format_bytes(fetched, b[3], sizeof b[3]),
          (unsigned long long)nops, nops == 1 ? "" : "s",
          format_bytes(m->per_op, b[4], sizeof b[4]), parts, have);
  return TOOL_EXIT_USAGE;
}
