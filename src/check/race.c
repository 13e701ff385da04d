/*
 * The race checker: happens-before over the primitives of one iteration,
 * as they are enqueued (docs/ARCHITECTURE.md, "Checks"). It clocks the
 * lowered program (core/lower.c) and never asks which op it has: what an
 * op reads and writes comes from its row of the op table.
 *
 * Participants of a rank: its streams (calc, one comm stream per ring) and
 * the host. Each has a vector clock over all of them.
 *
 * - A primitive enqueued on stream S (kernel, collective, delay) first
 *   joins the host's clock into S (the host enqueues it, after everything
 *   it has observed), then ticks S's own entry; its accesses carry (S, S's
 *   epoch).
 * - A record snapshots the recording stream's clock (host joined first) and
 *   replaces any earlier snapshot of that event; a wait joins the snapshot
 *   into the waiting stream; a never-recorded event adds nothing.
 * - A host sync of S joins S's clock into the host's. A host read (fetch)
 *   is a host access, one host tick.
 * - Inputs (data) are written by the host before anything: no access.
 * - Accesses: a kernel or collective reads its op's inputs (when the row
 *   says it reads them) and writes its output; a variable an op both reads
 *   and writes (in place) is one access, a write. Delays, records, waits
 *   and syncs access nothing.
 * - Access a (participant P, epoch e) happens before an op on participant T
 *   iff e <= clock_T[P]. A read races with the last write unless it is
 *   ordered after it; a write races with the last write and with every read
 *   since it that it is not ordered after. Reads never race with reads.
 *
 * Per variable the checker keeps the last write and the reads since it, in
 * program order. A read costs one comparison; a write scans the reads since
 * the last write once and then drops them, so every read is looked at by at
 * most one write: O(1) amortised per access, plus O(participants) per
 * primitive to join the host clock (skipped when the host's clock has not
 * changed since the stream last joined it).
 *
 * - A group (`group { }`, op->group) is one NCCL call: its sends and
 *   receives on a rank run together, unordered among themselves. The
 *   group's first item ticks the stream and the others share its epoch
 *   (what follows the group is ordered after all of it); two items of one
 *   group that touch the same variable, one of them writing, race (found
 *   by comparing the group's accesses directly).
 *
 * The ordering rules do not depend on data, so ranks that run the same ops
 * have the same races: the ranks are split into classes by the ops they
 * run (op->ranks; partition refinement over the distinct rank sets) and
 * each class is analysed once, from its first rank. An SPMD program is one
 * class: one analysis, every race on all ranks. A race found by several
 * classes is listed once, on the union of their ranks, with the most
 * occurrences any of them saw. Races are keyed by source position
 * (variable, both ops' line/col, streams and access kinds), so a race
 * inside a repeat block is reported once with its number of occurrences
 * in the expanded program.
 *
 * This file is the clock engine and the classes of ranks; the report's
 * records, their key and order are check/race_report.c's, its text and
 * JSON check/race_format.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "check/findings.h"
#include "check/match.h"
#include "check/races.h"

/* ------------------------------------------------------------------ */
/* Checker state                                                       */
/* ------------------------------------------------------------------ */

typedef struct acc {
  uint32_t op;
  uint32_t epoch;
  int32_t part;
} acc;

typedef struct varstate {
  acc w;
  bool has_w;
  uint32_t nreads, rcap;
  acc *reads;
} varstate;

typedef struct checker {
  const ovl_program *prog;
  ovl_races *res;
  int np;             /* participants: the streams and the host */
  int host;           /* participant index of the host */
  uint32_t *clk;      /* np x np */
  uint64_t host_ver;  /* bumped whenever the host clock changes */
  uint64_t *joined;   /* per participant: host_ver it last joined */
  size_t nev;
  uint32_t *snap;     /* nev x np */
  bool *recorded;
  /* Per participant: the last wait it made on an event never recorded
   * (which did not wait, as in CUDA): its op, +1 (0: none), and event. */
  uint32_t *blind_op;
  size_t *blind_ev;
  uint32_t cur_op;    /* the op being stepped */
  varstate *vs;
  /* The class of ranks analysed: its first rank (whose ops are stepped),
   * its number and its ranks. */
  int rank;
  uint32_t cls;
  uint64_t cls_mask;
  /* The group being stepped (op->group; 0: none), its stream, and the
   * accesses of its items so far. */
  uint32_t grp;
  int grp_stream;
  size_t ngacc, gcap;
  struct gacc {
    int var;
    bool write;
    acc a;
  } *gacc;
  /* Set while reporting a race between two items of one group. */
  bool in_group_race;
  /* Every rank of the program; set when an op runs on only some. */
  uint64_t all;
  bool partial;
} checker;

#define CLK(c, p) (&(c)->clk[(size_t)(p) * (size_t)(c)->np])

static int part_stream(const checker *c, int part) {
  return part == c->host ? -1 : part;
}

static bool join_into(uint32_t *dst, const uint32_t *src, int np) {
  bool changed = false;
  for (int q = 0; q < np; q++)
    if (src[q] > dst[q]) {
      dst[q] = src[q];
      changed = true;
    }
  return changed;
}

/* The host enqueues something on stream s: s is ordered after everything
 * the host has observed. */
static void host_enqueue(checker *c, int s) {
  if (c->joined[s] != c->host_ver) {
    join_into(CLK(c, s), CLK(c, c->host), c->np);
    c->joined[s] = c->host_ver;
  }
}

static void host_sync(checker *c, int s) {
  if (join_into(CLK(c, c->host), CLK(c, s), c->np))
    c->host_ver++;
}

static void record(checker *c, size_t ev, int s) {
  host_enqueue(c, s);
  memcpy(&c->snap[ev * (size_t)c->np], CLK(c, s),
         (size_t)c->np * sizeof *c->snap);
  c->recorded[ev] = true;
}

static void wait_event(checker *c, int s, size_t ev) {
  host_enqueue(c, s);
  if (c->recorded[ev]) {
    join_into(CLK(c, s), &c->snap[ev * (size_t)c->np], c->np);
  } else {
    c->blind_op[s] = c->cur_op + 1;
    c->blind_ev[s] = ev;
  }
}

/* ------------------------------------------------------------------ */
/* Race records                                                        */
/* ------------------------------------------------------------------ */

static void fill_access(const checker *c, ovl_race_access *a, uint32_t op,
                        int part, bool write) {
  const ovl__op *o = &c->prog->ops[op];
  a->op = op;
  a->op_name = o->def->name;
  a->line = o->line;
  a->col = o->col;
  a->stream = part_stream(c, part);
  a->stream_name = a->stream < 0 ? "host" : c->res->stream_names[a->stream];
  a->write = write;
}

/* Where the second access's participant waited, after the first access,
 * on an event never recorded (a wait that did not wait, as in CUDA): the
 * note that says so, in *note (NULL when there was none). False only when
 * out of memory. */
static bool blind_note(const checker *c, int part, uint32_t first_op,
                       char **note) {
  const ovl_program *prog = c->prog;
  char buf[512];
  size_t ev, named;
  *note = NULL;
  if (part == c->host || c->blind_op[part] == 0 ||
      c->blind_op[part] - 1 <= first_op)
    return true;
  ev = c->blind_ev[part];
  named = ev - (size_t)OVL_EVENT_NAMED(prog->nrings, 0);
  /* A record later in the program does not help the wait before it. */
  int later = 0;
  for (size_t i = c->blind_op[part]; later == 0 && i < prog->nops; i++) {
    size_t n;
    const ovl__prim *p = ovl__op_prims(prog, i, &n);
    for (size_t k = 0; k < n; k++)
      if (p[k].kind == OVL_PRIM_RECORD && p[k].event == (int)ev)
        later = prog->ops[i].line;
  }
  char when[64] = "was never recorded";
  if (later > 0)
    snprintf(when, sizeof when, "is not recorded before it (line %d records "
             "it)", later);
  snprintf(buf, sizeof buf, "line %d waits on event '%s', which %s, so it "
           "does not wait",
           prog->ops[c->blind_op[part] - 1].line,
           ev >= (size_t)OVL_EVENT_NAMED(prog->nrings, 0) &&
                   named < prog->nevents
               ? prog->events[named]
               : "?",
           when);
  *note = ovl__strdup(buf);
  return *note != NULL;
}

/* An unordered pair on `var`: `first` (already recorded) and the current
 * op. Found before by this class of ranks, one more occurrence; by
 * another, its ranks join (the most occurrences any class saw count). */
static ovl_status report(checker *c, int var, const acc *first,
                         bool first_write, uint32_t op, int part,
                         bool write, ovl_error *err) {
  race_rec probe, *r;
  ovl__flist_got got;

  memset(&probe, 0, sizeof probe);
  probe.var = var;
  fill_access(c, &probe.a[0], first->op, first->part, first_write);
  fill_access(c, &probe.a[1], op, part, write);
  probe.def[0] = c->prog->ops[first->op].def;
  probe.def[1] = c->prog->ops[op].def;
  got = ovl__races_find(c->res, &probe, &r);
  if (got == OVL__FLIST_NOMEM)
    return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  if (got == OVL__FLIST_MORE)
    return OVL_OK;
  if (got == OVL__FLIST_FOUND) {
    if (r->cls_seen != c->cls + 1) {
      r->cls_seen = c->cls + 1;
      r->cls_occ = 0;
      r->rmask |= c->cls_mask;
    }
    if (++r->cls_occ > r->occurrences)
      r->occurrences = r->cls_occ;
    return OVL_OK;
  }
  r->var = var;
  r->a[0] = probe.a[0];
  r->a[1] = probe.a[1];
  r->def[0] = probe.def[0];
  r->def[1] = probe.def[1];
  r->occurrences = 1;
  r->rmask = c->cls_mask;
  r->cls_seen = c->cls + 1;
  r->cls_occ = 1;
  r->var_name = ovl__strdup(c->prog->vars[var].name);
  if (r->var_name == NULL)
    return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  if (c->in_group_race) {
    char buf[256];
    snprintf(buf, sizeof buf,
             "lines %d and %d are in one group: its sends and receives "
             "progress together, in no order",
             c->prog->ops[first->op].line, c->prog->ops[op].line);
    r->note = ovl__strdup(buf);
    if (r->note == NULL)
      return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  } else if (!blind_note(c, part, first->op, &r->note)) {
    return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Accesses                                                            */
/* ------------------------------------------------------------------ */

static ovl_status do_read(checker *c, int var, uint32_t op, int part,
                          const uint32_t *clock, ovl_error *err) {
  varstate *v = &c->vs[var];
  ovl_status st;
  if (v->has_w && v->w.epoch > clock[v->w.part] &&
      (st = report(c, var, &v->w, true, op, part, false, err)) != OVL_OK)
    return st;
  if (v->nreads == v->rcap) {
    uint32_t ncap = v->rcap ? v->rcap * 2 : 4;
    acc *nr = realloc(v->reads, (size_t)ncap * sizeof *nr);
    if (nr == NULL)
      return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
    v->reads = nr;
    v->rcap = ncap;
  }
  v->reads[v->nreads++] = (acc){op, clock[part], part};
  return OVL_OK;
}

static ovl_status do_write(checker *c, int var, uint32_t op, int part,
                           const uint32_t *clock, ovl_error *err) {
  varstate *v = &c->vs[var];
  ovl_status st;
  if (v->has_w && v->w.epoch > clock[v->w.part] &&
      (st = report(c, var, &v->w, true, op, part, true, err)) != OVL_OK)
    return st;
  for (uint32_t i = 0; i < v->nreads; i++) {
    const acc *r = &v->reads[i];
    if (r->epoch > clock[r->part] &&
        (st = report(c, var, r, false, op, part, true, err)) != OVL_OK)
      return st;
  }
  v->nreads = 0;
  v->w = (acc){op, clock[part], part};
  v->has_w = true;
  return OVL_OK;
}

/* An access of an item of the group being stepped: it races with every
 * earlier item's access to the same variable where one of them writes
 * (the items of a group are not ordered); then it joins them. */
static ovl_status group_access(checker *c, int var, uint32_t op, int part,
                               bool write, ovl_error *err) {
  ovl_status st;
  for (size_t k = 0; k < c->ngacc; k++) {
    const struct gacc *g = &c->gacc[k];
    if (g->var != var || g->a.op == op || (!g->write && !write))
      continue;
    c->in_group_race = true;
    st = report(c, var, &g->a, g->write, op, part, write, err);
    c->in_group_race = false;
    if (st != OVL_OK)
      return st;
  }
  if (c->ngacc == c->gcap) {
    size_t ncap = c->gcap ? 2 * c->gcap : 8;
    struct gacc *ng = realloc(c->gacc, ncap * sizeof *ng);
    if (ng == NULL)
      return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
    c->gacc = ng;
    c->gcap = ncap;
  }
  c->gacc[c->ngacc++] =
      (struct gacc){var, write, (acc){op, CLK(c, part)[part], part}};
  return OVL_OK;
}

/* The reads of an op (distinct, minus its output), as its row says it
 * reads, and its write. */
static ovl_status op_accesses(checker *c, const ovl__op *o, uint32_t op,
                              int part, ovl_error *err) {
  const uint32_t *clock = CLK(c, part);
  bool grouped = o->group != 0 && o->def->p2p != OVL_P2P_NONE;
  ovl_status st;
  for (int k = 0; o->def->reads && k < o->nin; k++) {
    int v = o->in[k];
    bool seen = v == o->out;
    for (int j = 0; j < k && !seen; j++)
      seen = o->in[j] == v;
    if (seen)
      continue;
    if (grouped && (st = group_access(c, v, op, part, false, err)) != OVL_OK)
      return st;
    if ((st = do_read(c, v, op, part, clock, err)) != OVL_OK)
      return st;
  }
  if (o->def->writes && o->out >= 0) {
    if (grouped &&
        (st = group_access(c, o->out, op, part, true, err)) != OVL_OK)
      return st;
    return do_write(c, o->out, op, part, clock, err);
  }
  return OVL_OK;
}

/* One primitive of op i. */
static ovl_status step_prim(checker *c, const ovl__op *o, uint32_t i,
                            const ovl__prim *p, ovl_error *err) {
  int s = p->stream;
  switch ((ovl__prim_kind)p->kind) {
  case OVL_PRIM_SEND:
  case OVL_PRIM_RECV:
    /* The items of a group after its first share its epoch. */
    if (o->group != 0 && o->group == c->grp && s == c->grp_stream) {
      host_enqueue(c, s);
      return op_accesses(c, o, i, s, err);
    }
    c->grp = o->group;
    c->grp_stream = s;
    c->ngacc = 0;
    host_enqueue(c, s);
    CLK(c, s)[s]++;
    return op_accesses(c, o, i, s, err);
  case OVL_PRIM_KERNEL:
  case OVL_PRIM_COLL:
  case OVL_PRIM_DELAY:
    host_enqueue(c, s);
    CLK(c, s)[s]++;
    return p->kind == OVL_PRIM_DELAY ? OVL_OK
                                     : op_accesses(c, o, i, s, err);
  case OVL_PRIM_RECORD:
    record(c, (size_t)p->event, s);
    return OVL_OK;
  case OVL_PRIM_WAIT:
    wait_event(c, s, (size_t)p->event);
    return OVL_OK;
  case OVL_PRIM_HOST_SYNC:
    host_sync(c, s);
    return OVL_OK;
  case OVL_PRIM_HOST_READ:
    CLK(c, c->host)[c->host]++;
    c->host_ver++;
    return op_accesses(c, o, i, c->host, err);
  }
  return ovl__err(err, OVL_EINVAL, "race check: unknown primitive %d",
                  p->kind);
}

static ovl_status step(checker *c, uint32_t i, ovl_error *err) {
  size_t n;
  const ovl__prim *p = ovl__op_prims(c->prog, i, &n);
  ovl_status st = OVL_OK;
  if ((c->prog->ops[i].ranks & c->all) != c->all)
    c->partial = true;
  if (!ovl__op_on_rank(&c->prog->ops[i], c->rank))
    return OVL_OK;
  /* Anything but an item of the group being stepped ends the group. */
  if (c->grp != 0 && c->prog->ops[i].group != c->grp) {
    c->grp = 0;
    c->ngacc = 0;
  }
  c->cur_op = i;
  for (size_t k = 0; st == OVL_OK && k < n; k++)
    st = step_prim(c, &c->prog->ops[i], i, &p[k], err);
  return st;
}

/* A read is kept until the variable's next write, in an array that
 * doubles: a program that only reads a variable keeps up to two per op.
 * The mismatch and deadlock checks of a program whose ranks differ come
 * after it (check/deadlock.c says what they keep). */
size_t ovl__race_bytes_per_op(void) {
  return 2 * sizeof(acc) + ovl__order_bytes_per_op();
}

static void checker_free(checker *c) {
  if (c->vs != NULL)
    for (size_t v = 0; v < c->prog->nvars; v++)
      free(c->vs[v].reads);
  free(c->vs);
  free(c->clk);
  free(c->joined);
  free(c->snap);
  free(c->recorded);
  free(c->blind_op);
  free(c->blind_ev);
  free(c->gacc);
}

/* A fresh checker for `prog`, the class `cls` (its first rank and its
 * ranks). False when out of memory (c is then freed). */
static bool checker_init(checker *c, const ovl_program *prog, ovl_races *res,
                         uint32_t cls, int rank, uint64_t mask) {
  memset(c, 0, sizeof *c);
  c->prog = prog;
  c->res = res;
  c->np = prog->nstreams + 1;
  c->host = prog->nstreams;
  c->nev = (size_t)ovl__program_nevents(prog);
  c->rank = rank;
  c->cls = cls;
  c->cls_mask = mask;
  c->all = ovl__program_all_ranks(prog);
  c->clk = calloc((size_t)c->np * (size_t)c->np, sizeof *c->clk);
  c->joined = calloc((size_t)c->np, sizeof *c->joined);
  c->snap = calloc(c->nev * (size_t)c->np + 1, sizeof *c->snap);
  c->recorded = calloc(c->nev + 1, sizeof *c->recorded);
  c->blind_op = calloc((size_t)c->np, sizeof *c->blind_op);
  c->blind_ev = calloc((size_t)c->np, sizeof *c->blind_ev);
  c->vs = calloc(prog->nvars + 1, sizeof *c->vs);
  /* host_ver starts at 1 so that every stream joins the (zero) host clock
   * once; harmless and keeps the invariant simple. */
  c->host_ver = 1;
  if (c->clk == NULL || c->joined == NULL || c->snap == NULL ||
      c->recorded == NULL || c->blind_op == NULL || c->blind_ev == NULL ||
      c->vs == NULL) {
    checker_free(c);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------ */
/* Classes of ranks                                                    */
/* ------------------------------------------------------------------ */

/* Split the ranks into classes that run the same ops: cls[r] is rank r's
 * (numbered in order of their first rank). Partition refinement: each
 * distinct rank set of an op (consecutive repeats and sets seen before are
 * skipped) splits every class into its ranks in the set and those not.
 * Returns the number of classes, or -1 when out of memory. */
static int rank_classes(const ovl_program *prog, int nranks, int *cls) {
  uint64_t all = ovl__program_all_ranks(prog), prev = all;
  enum { SEEN_CAP = 1024 };
  uint64_t *seen = calloc(SEEN_CAP, sizeof *seen);
  int ncls = 1, map[2 * OVL_MAX_RANKS];
  size_t nseen = 0;
  if (seen == NULL)
    return -1;
  for (int r = 0; r < nranks; r++)
    cls[r] = 0;
  for (size_t i = 0; i < prog->nops && ncls < nranks; i++) {
    uint64_t m = prog->ops[i].ranks & all;
    size_t j;
    int n = 0;
    if (m == all || m == prev || m == 0)
      continue;
    prev = m;
    /* A set seen before splits nothing more. A table half full is
     * forgotten (correct, only slower). */
    if (2 * nseen >= SEEN_CAP) {
      memset(seen, 0, SEEN_CAP * sizeof *seen);
      nseen = 0;
    }
    for (j = (size_t)((m * 0x9e3779b97f4a7c15ull) >> 54) & (SEEN_CAP - 1);
         seen[j] != 0 && seen[j] != m; j = (j + 1) & (SEEN_CAP - 1))
      ;
    if (seen[j] == m)
      continue;
    seen[j] = m;
    nseen++;
    for (int k = 0; k < 2 * ncls; k++)
      map[k] = -1;
    for (int r = 0; r < nranks; r++) {
      int k = 2 * cls[r] + (int)((m >> r) & 1);
      if (map[k] < 0)
        map[k] = n++;
      cls[r] = map[k];
    }
    ncls = n;
  }
  free(seen);
  return ncls;
}

/* One analysis: the ops of `rank`, the first rank of class `cls` (its
 * ranks: `mask`), stepped in program order; *partial is set when some op
 * runs on only some ranks. */
static ovl_status analyse(const ovl_program *prog, ovl_races *res,
                          uint32_t cls, int rank, uint64_t mask,
                          bool *partial, ovl_error *err) {
  checker c;
  ovl_status st = OVL_OK;
  if (!checker_init(&c, prog, res, cls, rank, mask))
    return ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  for (size_t i = 0; st == OVL_OK && i < prog->nops; i++)
    st = step(&c, (uint32_t)i, err);
  checker_free(&c);
  *partial = c.partial;
  return st;
}

ovl_status ovl__race_check(const ovl_program *prog, ovl_races **out,
                           ovl_error *err) {
  ovl_races *res;
  ovl_status st;
  int cls[OVL_MAX_RANKS], ncls;
  bool partial = false;

  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_race_check: bad argument");
  *out = NULL;
  if (prog->prim_first == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_race_check: %s is not lowered",
                    prog->filename);
  if ((st = ovl__races_new(prog, &res, err)) != OVL_OK)
    return st;
  /* Rank 0 first: its analysis also finds whether some op runs on only
   * some ranks. Not (SPMD): it is every rank's, one analysis as ever.
   * Else the classes, rank 0's first (class 0), then one analysis per
   * other class, from its first rank. */
  st = analyse(prog, res, 0, 0, 1, &partial, err);
  ncls = 1;
  for (int r = 0; r < res->nranks; r++)
    cls[r] = 0;
  if (st == OVL_OK && partial)
    ncls = rank_classes(prog, res->nranks, cls);
  if (st == OVL_OK && ncls < 0)
    st = ovl__err(err, OVL_ENOMEM, "race check: out of memory");
  if (st != OVL_OK) {
    ovl_races_free(res);
    return st;
  }
  res->nclasses = ncls;
  {
    uint64_t mask0 = 0;
    for (int r = 0; r < res->nranks; r++)
      if (cls[r] == 0)
        mask0 |= (uint64_t)1 << r;
    for (size_t i = 0; i < res->list.n; i++)
      ovl__races_at(res, i)->rmask = mask0;
  }
  for (int k = 1; st == OVL_OK && k < ncls; k++) {
    uint64_t mask = 0;
    int first = -1;
    for (int r = 0; r < res->nranks; r++)
      if (cls[r] == k) {
        mask |= (uint64_t)1 << r;
        if (first < 0)
          first = r;
      }
    st = analyse(prog, res, (uint32_t)k, first, mask, &partial, err);
  }
  if (st == OVL_OK)
    st = ovl__races_finish(res, err);
  if (st != OVL_OK) {
    ovl_races_free(res);
    return st;
  }
  *out = res;
  return OVL_OK;
}
