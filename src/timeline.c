/*
 * Timelines: the traced iteration of runs (ovl_run_opts.trace) as a Chrome
 * trace-event file, for Perfetto and chrome://tracing, or as an SVG
 * picture. Both read the spans the run recorded and the op table; the
 * library builds the text, the caller writes it.
 *
 * Times. Each rank's spans count from its base (a timer mark on its calc
 * stream right after the iteration's start barrier). The host clock of the
 * bases lines the ranks of a run up: a run's time 0 is its earliest base,
 * and every run starts at 0, so runs of several modes compare directly.
 * Times are whole nanoseconds here. On one lane (a stream, or the host)
 * ops follow each other, so a slice starts no earlier than the one before
 * it ended, and lasts at least 2 ns: a flow arrow binds to the slice that
 * encloses its time, and is put in the middle of it, strictly inside.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json_str.h"

/* ------------------------------------------------------------------ */
/* Text for the picture (the growing string is ovl__sbuf, strbuf.c)    */
/* ------------------------------------------------------------------ */

/* Text for XML (element content or an attribute value), valid UTF-8 like
 * the JSON (json_str.h): an ill-formed sequence becomes U+FFFD. */
static void sb_xml_str(ovl__sbuf *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    size_t n, bad;
    if (*p >= 0x80) {
      if ((n = ovl__utf8_len(p, &bad)) > 0)
        ovl__sb_printf(b, "%.*s", (int)n, (const char *)p);
      else
        ovl__sb_puts(b, "\xef\xbf\xbd");
      p += (n > 0 ? n : bad) - 1;
      continue;
    }
    switch (*p) {
    case '&':
      ovl__sb_puts(b, "&amp;");
      break;
    case '<':
      ovl__sb_puts(b, "&lt;");
      break;
    case '>':
      ovl__sb_puts(b, "&gt;");
      break;
    case '"':
      ovl__sb_puts(b, "&quot;");
      break;
    default:
      /* XML 1.0 has no other control characters than tab and newline. */
      ovl__sb_printf(b, "%c", *p < 0x20 && *p != '\t' && *p != '\n' ? '?' : *p);
    }
  }
}

/* ------------------------------------------------------------------ */
/* Slices                                                              */
/* ------------------------------------------------------------------ */

/* What an op is, for colours and trace categories. */
typedef enum {
  CAT_COMPUTE,
  CAT_COLLECTIVE,
  CAT_WAIT, /* waits, event records */
  CAT_DELAY,
  CAT_HOST, /* fetch, syncs */
  CAT__COUNT
} cat_t;

static const char *const cat_names[CAT__COUNT] = {
    "compute", "collective", "wait", "delay", "host"};

typedef struct {
  size_t op;
  int lane;    /* stream number, or nstreams for the host */
  bool record; /* the record half of c_wait_compute / c_wait_comm */
  cat_t cat;
  int64_t t0, t1; /* ns from the run's time 0 */
} slice;

/* The slices of one rank of one run, in program order. */
typedef struct {
  slice *s;
  size_t n;
} rank_slices;

static bool is_host_op(const ovl__op *op) {
  ovl__kind k = op->def->kind;
  return k == OVL_KIND_FETCH || k == OVL_KIND_SYNC_CALC ||
         k == OVL_KIND_SYNC_COMM || k == OVL_KIND_STREAM_SYNC;
}

static cat_t op_cat(const ovl__op *op) {
  switch (op->def->kind) {
  case OVL_KIND_COMPUTE:
    return CAT_COMPUTE;
  case OVL_KIND_COLLECTIVE:
    return CAT_COLLECTIVE;
  case OVL_KIND_DELAY:
    return CAT_DELAY;
  case OVL_KIND_FETCH:
  case OVL_KIND_SYNC_CALC:
  case OVL_KIND_SYNC_COMM:
  case OVL_KIND_STREAM_SYNC:
    return CAT_HOST;
  default:
    return CAT_WAIT;
  }
}

/* The stream an op's record half is on. */
static int record_stream(const ovl__op *op) {
  return op->def->kind == OVL_KIND_WAIT_COMPUTE ? OVL_STREAM_CALC
                                                : OVL_STREAM_COMM(op->ring_id);
}

static int64_t to_ns(double offset_s, double s) {
  return (int64_t)llround((offset_s + s) * 1e9);
}

/* Earliest base of a run's ranks (its time 0). */
static double run_origin(const ovl_result *res, int nranks) {
  double o = INFINITY;
  for (int r = 0; r < nranks; r++)
    o = fmin(o, ovl_result_trace_base(res, r));
  return o;
}

/* Build one rank's slices. Returns false when out of memory. */
static bool build_slices(const ovl_program *prog, const ovl_result *res,
                         int rank, double origin, rank_slices *out) {
  int nstreams = 1 + prog->nrings;
  int64_t *last = calloc((size_t)nstreams + 1, sizeof *last);
  double offset = ovl_result_trace_base(res, rank) - origin;
  out->n = 0;
  out->s = malloc((2 * prog->nops + 1) * sizeof *out->s);
  if (out->s == NULL || last == NULL) {
    free(out->s);
    free(last);
    out->s = NULL;
    return false;
  }
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    double a, b;
    for (int part = 0; part < 2; part++) {
      slice *sl = &out->s[out->n];
      if (part == 0) {
        if (ovl_result_record_span(res, rank, i, &a, &b) != 0)
          continue;
        sl->lane = record_stream(op);
        sl->record = true;
      } else {
        if (ovl_result_span(res, rank, i, &a, &b) != 0)
          continue;
        sl->lane = is_host_op(op) ? nstreams : ovl__op_stream(op);
        sl->record = false;
      }
      if (sl->lane < 0 || sl->lane > nstreams)
        continue;
      sl->op = i;
      sl->cat = op_cat(op);
      sl->t0 = to_ns(offset, a);
      sl->t1 = to_ns(offset, b);
      if (sl->t0 < last[sl->lane])
        sl->t0 = last[sl->lane];
      if (sl->t1 < sl->t0 + 2)
        sl->t1 = sl->t0 + 2;
      last[sl->lane] = sl->t1;
      out->n++;
    }
  }
  free(last);
  return true;
}

/* All ranks of all runs; NULL when out of memory. [run * nranks + rank] */
static rank_slices *build_all(const ovl_timeline_run *runs, size_t nruns,
                              int nranks) {
  rank_slices *all = calloc(nruns * (size_t)nranks + 1, sizeof *all);
  if (all == NULL)
    return NULL;
  for (size_t k = 0; k < nruns; k++) {
    double origin = run_origin(runs[k].res, nranks);
    for (int r = 0; r < nranks; r++)
      if (!build_slices(runs[k].prog, runs[k].res, r, origin,
                        &all[k * (size_t)nranks + (size_t)r])) {
        for (size_t j = 0; j < nruns * (size_t)nranks; j++)
          free(all[j].s);
        free(all);
        return NULL;
      }
  }
  return all;
}

static void free_all(rank_slices *all, size_t n) {
  if (all == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    free(all[i].s);
  free(all);
}

static const char *lane_name(int lane, int nstreams, char *buf, size_t len) {
  if (lane == nstreams)
    snprintf(buf, len, "host");
  else if (lane == OVL_STREAM_CALC)
    snprintf(buf, len, "calc");
  else
    snprintf(buf, len, "comm[%d]", lane - 1);
  return buf;
}

static uint64_t var_bytes(const ovl_program *prog, int v) {
  return (uint64_t)prog->vars[v].numel * ovl_dtype_size(prog->vars[v].dtype);
}

/* Bytes an op moves: the inputs it reads and the output it writes (fetch:
 * what it copies to the host); none for waits, syncs and delays. */
static uint64_t op_bytes(const ovl_program *prog, const ovl__op *op) {
  uint64_t n = 0;
  switch (op->def->kind) {
  case OVL_KIND_COMPUTE:
  case OVL_KIND_COLLECTIVE:
    for (int k = 0; k < op->nin; k++)
      n += var_bytes(prog, op->in[k]);
    if (op->out >= 0)
      n += var_bytes(prog, op->out);
    return n;
  case OVL_KIND_FETCH:
    for (int k = 0; k < op->nin; k++)
      n += var_bytes(prog, op->in[k]);
    return n;
  default:
    return 0;
  }
}

/* Per op, its collective's number on its ring (from 0), or -1. */
static int *collective_seqs(const ovl_program *prog) {
  int next[OVL_MAX_RINGS] = {0};
  int *seq = malloc((prog->nops + 1) * sizeof *seq);
  if (seq == NULL)
    return NULL;
  for (size_t i = 0; i < prog->nops; i++) {
    const ovl__op *op = &prog->ops[i];
    seq[i] = -1;
    if (op->def->kind == OVL_KIND_COLLECTIVE && op->ring_id >= 0 &&
        op->ring_id < OVL_MAX_RINGS)
      seq[i] = next[op->ring_id]++;
  }
  return seq;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

static ovl_status check_runs(const ovl_world *world,
                             const ovl_timeline_run *runs, size_t nruns,
                             char **text, ovl_error *err) {
  if (text != NULL)
    *text = NULL;
  if (world == NULL || runs == NULL || nruns == 0 || text == NULL)
    return ovl__err(err, OVL_EINVAL, "timeline: bad argument");
  for (size_t k = 0; k < nruns; k++) {
    if (runs[k].prog == NULL || runs[k].res == NULL)
      return ovl__err(err, OVL_EINVAL, "timeline: run %zu has no result",
                      k);
    if (ovl_result_trace_iter(runs[k].res) < 0)
      return ovl__err(err, OVL_EINVAL,
                      "timeline: the %s run was not traced (run it with "
                      "ovl_run_opts.trace)",
                      ovl_mode_name(runs[k].mode));
    if (runs[k].prog->nranks != ovl_world_nranks(world))
      return ovl__err(err, OVL_EINVAL,
                      "timeline: the %s run has %d ranks, the world %d",
                      ovl_mode_name(runs[k].mode), runs[k].prog->nranks,
                      ovl_world_nranks(world));
  }
  return OVL_OK;
}

static ovl_status finish(ovl__sbuf *b, char **text, size_t *len, ovl_error *err) {
  if (b->fail || b->s == NULL) {
    free(b->s);
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  }
  *text = b->s;
  if (len != NULL)
    *len = b->len;
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Chrome trace-event JSON                                             */
/* ------------------------------------------------------------------ */

#define TID_HOST 100

static int lane_tid(int lane, int nstreams) {
  return lane == nstreams ? TID_HOST : 1 + lane;
}

/* "12.345" microseconds from nanoseconds. */
static void sb_us(ovl__sbuf *b, int64_t ns) {
  ovl__sb_printf(b, "%lld.%03lld", (long long)(ns / 1000),
            (long long)(ns % 1000));
}

static void trace_meta(ovl__sbuf *b, int pid, int tid, const char *what,
                       const char *key, const char *sval, int ival) {
  ovl__sb_printf(b, ",\n{\"ph\":\"M\",\"pid\":%d,", pid);
  if (tid >= 0)
    ovl__sb_printf(b, "\"tid\":%d,", tid);
  ovl__sb_printf(b, "\"name\":\"%s\",\"args\":{\"%s\":", what, key);
  if (sval != NULL)
    ovl__sb_json_str(b, sval);
  else
    ovl__sb_printf(b, "%d", ival);
  ovl__sb_puts(b, "}}");
}

static void trace_slice(ovl__sbuf *b, const ovl_timeline_run *run, int pid,
                        int nstreams, const slice *sl, const int *seq) {
  const ovl_program *prog = run->prog;
  const ovl__op *op = &prog->ops[sl->op];
  char lname[32];
  ovl__sb_printf(b, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", pid,
            lane_tid(sl->lane, nstreams));
  sb_us(b, sl->t0);
  ovl__sb_puts(b, ",\"dur\":");
  sb_us(b, sl->t1 - sl->t0);
  ovl__sb_puts(b, ",\"name\":");
  if (seq[sl->op] >= 0) {
    char name[128];
    snprintf(name, sizeof name, "%s #%d (ring %d)", op->def->name,
             seq[sl->op], op->ring_id);
    ovl__sb_json_str(b, name);
  } else if (sl->record) {
    char name[128];
    snprintf(name, sizeof name, "%s [record]", op->def->name);
    ovl__sb_json_str(b, name);
  } else {
    ovl__sb_json_str(b, op->def->name);
  }
  ovl__sb_printf(b, ",\"cat\":\"%s\",\"args\":{\"op\":%zu,\"source\":",
            cat_names[sl->cat], sl->op);
  {
    size_t n = strlen(prog->filename) + 32;
    char *src = malloc(n);
    if (src == NULL) {
      b->fail = true;
      return;
    }
    snprintf(src, n, "%s:%d", prog->filename, op->line);
    ovl__sb_json_str(b, src);
    free(src);
  }
  ovl__sb_printf(b, ",\"mode\":\"%s\",\"stream\":\"%s\",\"bytes\":%llu",
            ovl_mode_name(run->mode),
            lane_name(sl->lane, nstreams, lname, sizeof lname),
            (unsigned long long)(sl->record ? 0 : op_bytes(prog, op)));
  ovl__sb_puts(b, ",\"in\":[");
  for (int k = 0; k < op->nin; k++) {
    if (k)
      ovl__sb_puts(b, ",");
    ovl__sb_json_str(b, prog->vars[op->in[k]].name);
  }
  ovl__sb_puts(b, "]");
  if (op->out >= 0) {
    ovl__sb_puts(b, ",\"out\":");
    ovl__sb_json_str(b, prog->vars[op->out].name);
  }
  if (seq[sl->op] >= 0)
    ovl__sb_printf(b, ",\"ring\":%d,\"seq\":%d", op->ring_id, seq[sl->op]);
  if (op->def->kind == OVL_KIND_WAIT_COMPUTE ||
      op->def->kind == OVL_KIND_WAIT_COMM)
    ovl__sb_printf(b, ",\"ring\":%d,\"part\":\"%s\"", op->ring_id,
              sl->record ? "record" : "wait");
  if (op->event >= 0 && (size_t)op->event < prog->nevents) {
    ovl__sb_puts(b, ",\"event\":");
    ovl__sb_json_str(b, prog->events[op->event]);
  }
  ovl__sb_puts(b, "}}");
}

static void trace_flow(ovl__sbuf *b, int pid, int nstreams, long id,
                       const slice *from, const slice *to) {
  ovl__sb_printf(b,
            ",\n{\"ph\":\"s\",\"id\":%ld,\"pid\":%d,\"tid\":%d,\"ts\":", id,
            pid, lane_tid(from->lane, nstreams));
  sb_us(b, from->t0 + (from->t1 - from->t0) / 2);
  ovl__sb_puts(b, ",\"name\":\"event\",\"cat\":\"event\"}");
  ovl__sb_printf(b,
            ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%ld,\"pid\":%d,\"tid\":%d,"
            "\"ts\":",
            id, pid, lane_tid(to->lane, nstreams));
  sb_us(b, to->t0 + (to->t1 - to->t0) / 2);
  ovl__sb_puts(b, ",\"name\":\"event\",\"cat\":\"event\"}");
}

/* Flow arrows of one rank: from each event record to the waits that
 * consume it (its own wait for c_wait_compute / c_wait_comm; for a named
 * event, every stream_wait_event until the next record). */
static void trace_flows(ovl__sbuf *b, const ovl_program *prog, int pid,
                        int nstreams, const rank_slices *rs, long *id) {
  const slice **last_rec =
      calloc(prog->nevents + 1, sizeof *last_rec);
  const slice *pending = NULL; /* record half just seen */
  if (last_rec == NULL) {
    b->fail = true;
    return;
  }
  for (size_t j = 0; j < rs->n; j++) {
    const slice *sl = &rs->s[j];
    const ovl__op *op = &prog->ops[sl->op];
    if (sl->record) {
      pending = sl;
      continue;
    }
    if (pending != NULL && pending->op == sl->op)
      trace_flow(b, pid, nstreams, (*id)++, pending, sl);
    pending = NULL;
    if (op->event < 0 || (size_t)op->event >= prog->nevents)
      continue;
    if (op->def->kind == OVL_KIND_EVENT_RECORD)
      last_rec[op->event] = sl;
    else if (op->def->kind == OVL_KIND_STREAM_WAIT_EVENT &&
             last_rec[op->event] != NULL)
      trace_flow(b, pid, nstreams, (*id)++, last_rec[op->event], sl);
  }
  free(last_rec);
}

static void sb_params(ovl__sbuf *b, const ovl_program *prog) {
  ovl__sb_puts(b, "{");
  for (size_t i = 0; i < prog->nparams; i++) {
    if (i)
      ovl__sb_puts(b, ",");
    ovl__sb_json_str(b, prog->params[i].name);
    ovl__sb_puts(b, ":");
    ovl__sb_json_str(b, prog->params[i].value);
  }
  ovl__sb_puts(b, "}");
}

ovl_status ovl_timeline_trace(const ovl_world *world,
                              const ovl_timeline_run *runs, size_t nruns,
                              char **text, size_t *len, ovl_error *err) {
  ovl_status st = check_runs(world, runs, nruns, text, err);
  int nranks;
  rank_slices *all;
  ovl__sbuf b = {0};
  long flow_id = 1;
  size_t first;

  if (st != OVL_OK)
    return st;
  nranks = ovl_world_nranks(world);
  all = build_all(runs, nruns, nranks);
  if (all == NULL)
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");

  ovl__sb_puts(&b, "{\"traceEvents\":[");
  first = b.len; /* every event starts with ",\n": the first one's goes */
  for (size_t k = 0; k < nruns; k++) {
    const ovl_program *prog = runs[k].prog;
    int nstreams = 1 + prog->nrings;
    int *seq = collective_seqs(prog);
    if (seq == NULL) {
      b.fail = true;
      break;
    }
    for (int r = 0; r < nranks; r++) {
      int pid = 1 + (int)k * nranks + r;
      const rank_slices *rs = &all[k * (size_t)nranks + (size_t)r];
      char pname[256], lname[32];
      if (nruns > 1)
        snprintf(pname, sizeof pname, "%s: rank %d (%s)",
                 ovl_mode_name(runs[k].mode), r,
                 ovl_world_device_name(world, r));
      else
        snprintf(pname, sizeof pname, "rank %d (%s)", r,
                 ovl_world_device_name(world, r));
      trace_meta(&b, pid, -1, "process_name", "name", pname, 0);
      trace_meta(&b, pid, -1, "process_sort_index", "sort_index", NULL, pid);
      for (int lane = 0; lane <= nstreams; lane++) {
        int tid = lane_tid(lane, nstreams);
        trace_meta(&b, pid, tid, "thread_name", "name",
                   lane_name(lane, nstreams, lname, sizeof lname), 0);
        trace_meta(&b, pid, tid, "thread_sort_index", "sort_index", NULL,
                   lane);
      }
      for (size_t j = 0; j < rs->n; j++)
        trace_slice(&b, &runs[k], pid, nstreams, &rs->s[j], seq);
      trace_flows(&b, prog, pid, nstreams, rs, &flow_id);
    }
    free(seq);
  }
  if (!b.fail && b.len > first && b.s[first] == ',')
    b.s[first] = ' ';
  ovl__sb_puts(&b, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{");
  ovl__sb_printf(&b, "\"tool\":\"overlap-sim\",\"version\":\"%s\",",
            OVL_VERSION_STRING);
  ovl__sb_puts(&b, "\"backend\":");
  ovl__sb_json_str(&b, ovl_world_backend_name(world));
  ovl__sb_printf(&b, ",\"ranks\":%d,\"devices\":", nranks);
  ovl__sb_json_str(&b, ovl_world_devices(world));
  ovl__sb_puts(&b, ",\"schedule\":");
  ovl__sb_json_str(&b, runs[0].prog->filename);
  ovl__sb_puts(&b, ",\"params\":");
  sb_params(&b, runs[0].prog);
  ovl__sb_printf(&b, ",\"trace_iter\":%d,\"modes\":[",
            ovl_result_trace_iter(runs[0].res));
  for (size_t k = 0; k < nruns; k++)
    ovl__sb_printf(&b, "%s\"%s\"", k ? "," : "", ovl_mode_name(runs[k].mode));
  ovl__sb_puts(&b, "],\"iteration_s\":{");
  for (size_t k = 0; k < nruns; k++)
    ovl__sb_printf(&b, "%s\"%s\":%.9g", k ? "," : "",
              ovl_mode_name(runs[k].mode),
              ovl_result_times(runs[k].res)[ovl_result_trace_iter(
                  runs[k].res)]);
  ovl__sb_puts(&b, "},\"time\":\"microseconds; each mode's run starts at 0; "
              "ranks lined up on the host clock\"}}\n");
  free_all(all, nruns * (size_t)nranks);
  return finish(&b, text, len, err);
}

/* ------------------------------------------------------------------ */
/* SVG                                                                 */
/* ------------------------------------------------------------------ */

#define SVG_W 1200
#define SVG_LEFT 118   /* lane labels */
#define SVG_RIGHT 24
#define LANE_H 12
#define LANE_GAP 3
#define OVERLAP_H 6
#define RANK_GAP 8
#define PANEL_HEAD 20
#define AXIS_H 30

static const char *const cat_colour[CAT__COUNT] = {
    "#4e79a7", "#f28e2b", "#a0a0a0", "#9c755f", "#b07aa1"};
#define OVERLAP_COLOUR "#59a14f"

typedef struct {
  int64_t t0, t1;
} interval;

typedef struct {
  interval *v;
  size_t n, cap;
} ivec;

static bool iv_push(ivec *iv, int64_t t0, int64_t t1) {
  if (iv->n == iv->cap) {
    size_t cap = iv->cap ? 2 * iv->cap : 64;
    interval *v = realloc(iv->v, cap * sizeof *v);
    if (v == NULL)
      return false;
    iv->v = v;
    iv->cap = cap;
  }
  iv->v[iv->n].t0 = t0;
  iv->v[iv->n].t1 = t1;
  iv->n++;
  return true;
}

/* A Chrome trace's text per op, rank and run: 198.5 bytes measured for
 * `b = scale(a)` ops of a file named ops1000k.sched (the event's args
 * quote the file, the op and its variables, so longer names take more). */
#define TRACE_EVENT_BYTES 200

/* Per op, rank and run: up to two slices (the record of a wait is one
 * more), and either the collectives' numbers and the trace's text, or the
 * picture's intervals (made one rank at a time; the picture's own text
 * merges what is narrower than a pixel). */
size_t ovl__timeline_bytes_per_op(bool trace_text) {
  return 2 * sizeof(slice) + (trace_text ? sizeof(int) + TRACE_EVENT_BYTES
                                         : 2 * sizeof(interval));
}

static int cmp_interval(const void *a, const void *b) {
  const interval *x = a, *y = b;
  return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* Sort and merge overlapping intervals in place. */
static void iv_union(ivec *iv) {
  size_t w = 0;
  if (iv->n == 0)
    return;
  qsort(iv->v, iv->n, sizeof *iv->v, cmp_interval);
  for (size_t i = 1; i < iv->n; i++) {
    if (iv->v[i].t0 <= iv->v[w].t1) {
      if (iv->v[i].t1 > iv->v[w].t1)
        iv->v[w].t1 = iv->v[i].t1;
    } else {
      iv->v[++w] = iv->v[i];
    }
  }
  iv->n = w + 1;
}

static int64_t iv_total(const ivec *iv) {
  int64_t t = 0;
  for (size_t i = 0; i < iv->n; i++)
    t += iv->v[i].t1 - iv->v[i].t0;
  return t;
}

/* Where a collective and a compute op (or a delay) of one rank ran at the
 * same time; *coll gets the collectives' union. False: out of memory. */
static bool overlap_of(const rank_slices *rs, ivec *out, ivec *coll) {
  ivec comp = {0};
  bool ok = true;
  size_t i = 0, j = 0;
  out->n = 0;
  coll->n = 0;
  for (size_t k = 0; ok && k < rs->n; k++) {
    const slice *sl = &rs->s[k];
    if (sl->cat == CAT_COLLECTIVE)
      ok = iv_push(coll, sl->t0, sl->t1);
    else if (sl->cat == CAT_COMPUTE || sl->cat == CAT_DELAY)
      ok = iv_push(&comp, sl->t0, sl->t1);
  }
  iv_union(coll);
  iv_union(&comp);
  while (ok && i < coll->n && j < comp.n) {
    int64_t a = coll->v[i].t0 > comp.v[j].t0 ? coll->v[i].t0 : comp.v[j].t0;
    int64_t b = coll->v[i].t1 < comp.v[j].t1 ? coll->v[i].t1 : comp.v[j].t1;
    if (a < b)
      ok = iv_push(out, a, b);
    if (coll->v[i].t1 < comp.v[j].t1)
      i++;
    else
      j++;
  }
  free(comp.v);
  return ok;
}

/* A tick step of 1, 2 or 5 times a power of ten giving 5 to 12 ticks. */
static double tick_step(double span) {
  double p = pow(10, floor(log10(span)));
  const double m[] = {0.1, 0.2, 0.5, 1, 2, 5, 10};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (span / (m[i] * p) <= 12)
      return m[i] * p;
  return 10 * p;
}

/* A lane's rects: one per slice, except that consecutive slices of one
 * kind narrower than a pixel, less than a pixel apart, are one rect. Rects
 * 2 px wide or more have a tooltip (<title>). */
typedef struct {
  bool open;
  cat_t cat;
  double x0, x1;
  size_t count, op;
  bool record;
  int64_t busy; /* ns of the slices in it */
} pending_rect;

typedef struct {
  ovl__sbuf *b;
  const ovl_program *prog;
  const int *seq;
  double scale; /* px per ns */
} lane_ctx;

static void flush_rect(lane_ctx *lc, pending_rect *p) {
  ovl__sbuf *b = lc->b;
  double w;
  if (!p->open)
    return;
  w = p->x1 - p->x0;
  if (w < 0.5)
    w = 0.5;
  /* The lane's <g> gives y; a tooltip where there is room to hover. */
  ovl__sb_printf(b, "<rect class=\"k%d\" x=\"%.1f\" width=\"%.1f\" height=\"%d\"",
            (int)p->cat, p->x0, w, LANE_H);
  if (w < 2) {
    ovl__sb_puts(b, "/>\n");
  } else if (p->count == 1) {
    ovl__sb_puts(b, "><title>");
    const ovl__op *op = &lc->prog->ops[p->op];
    sb_xml_str(b, op->def->name);
    if (lc->seq[p->op] >= 0)
      ovl__sb_printf(b, " #%d (ring %d)", lc->seq[p->op], op->ring_id);
    if (p->record)
      ovl__sb_puts(b, " [record]");
    ovl__sb_printf(b, " :%d %.3f ms", op->line, (double)p->busy * 1e-6);
    ovl__sb_puts(b, "</title></rect>\n");
  } else {
    ovl__sb_printf(b, "><title>%zu %s ops %.3f ms</title></rect>\n", p->count,
              cat_names[p->cat], (double)p->busy * 1e-6);
  }
  p->open = false;
}

static void draw_lane(lane_ctx *lc, const rank_slices *rs, int lane) {
  pending_rect p = {0};
  for (size_t k = 0; k < rs->n; k++) {
    const slice *sl = &rs->s[k];
    double x0, x1;
    bool small;
    if (sl->lane != lane)
      continue;
    x0 = SVG_LEFT + (double)sl->t0 * lc->scale;
    x1 = SVG_LEFT + (double)sl->t1 * lc->scale;
    small = x1 - x0 < 1.0;
    if (p.open && small && p.cat == sl->cat && p.x1 - p.x0 < 1e9 &&
        x0 - p.x1 < 1.0 && (p.count > 1 || p.x1 - p.x0 < 1.0)) {
      p.x1 = x1 > p.x1 ? x1 : p.x1;
      p.count++;
      p.busy += sl->t1 - sl->t0;
      continue;
    }
    flush_rect(lc, &p);
    p.open = true;
    p.cat = sl->cat;
    p.x0 = x0;
    p.x1 = x1;
    p.count = 1;
    p.op = sl->op;
    p.record = sl->record;
    p.busy = sl->t1 - sl->t0;
  }
  flush_rect(lc, &p);
}

/* Intervals as rects of `cls`, merging those less than a pixel apart. */
static void draw_intervals(ovl__sbuf *b, const ivec *iv, double scale, double y,
                           int h, const char *cls) {
  size_t i = 0;
  while (i < iv->n) {
    double x0 = SVG_LEFT + (double)iv->v[i].t0 * scale;
    double x1 = SVG_LEFT + (double)iv->v[i].t1 * scale;
    for (i++; i < iv->n && SVG_LEFT + (double)iv->v[i].t0 * scale - x1 < 1.0;
         i++)
      x1 = SVG_LEFT + (double)iv->v[i].t1 * scale;
    ovl__sb_printf(b, "<rect class=\"%s\" x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" "
                 "height=\"%d\"/>\n",
              cls, x0, y, x1 - x0 < 0.5 ? 0.5 : x1 - x0, h);
  }
}

static int rank_block_height(int nstreams) {
  return (nstreams + 1) * (LANE_H + LANE_GAP) + OVERLAP_H + RANK_GAP;
}

static void svg_axis(ovl__sbuf *b, double y, double scale, double step_ms,
                     int64_t tmax, const char *label) {
  double x_end = SVG_LEFT + (double)tmax * scale;
  ovl__sb_printf(b, "<line class=\"ax\" x1=\"%d\" y1=\"%.0f\" x2=\"%.1f\" "
               "y2=\"%.0f\"/>\n",
            SVG_LEFT, y, x_end, y);
  for (int i = 0;; i++) {
    double t_ms = i * step_ms;
    double x = SVG_LEFT + t_ms * 1e6 * scale;
    if (x > x_end + 0.5)
      break;
    ovl__sb_printf(b, "<line class=\"ax\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" "
                 "y2=\"%.0f\"/><text x=\"%.1f\" y=\"%.0f\" "
                 "text-anchor=\"middle\">%g</text>\n",
              x, y, x, y + 4, x, y + 15, t_ms);
  }
  ovl__sb_printf(b, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">%s</text>\n",
            SVG_LEFT - 6, y + 15, label);
}

ovl_status ovl_timeline_svg(const ovl_world *world,
                            const ovl_timeline_run *runs, size_t nruns,
                            char **text, size_t *len, ovl_error *err) {
  ovl_status st = check_runs(world, runs, nruns, text, err);
  int nranks;
  rank_slices *all;
  ovl__sbuf b = {0};
  int64_t tmax = 1;
  int height, y;
  double scale, step_ms;
  ivec ov = {0}, coll = {0};

  if (st != OVL_OK)
    return st;
  nranks = ovl_world_nranks(world);
  all = build_all(runs, nruns, nranks);
  if (all == NULL)
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  for (size_t i = 0; i < nruns * (size_t)nranks; i++)
    for (size_t k = 0; k < all[i].n; k++)
      if (all[i].s[k].t1 > tmax)
        tmax = all[i].s[k].t1;
  scale = (double)(SVG_W - SVG_LEFT - SVG_RIGHT) / (double)tmax;
  step_ms = tick_step((double)tmax * 1e-6);

  height = 58;
  for (size_t k = 0; k < nruns; k++)
    height += PANEL_HEAD + nranks * rank_block_height(1 + runs[k].prog->nrings) +
              AXIS_H;
  height += 6;

  ovl__sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                "height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            SVG_W, height, SVG_W, height);
  ovl__sb_puts(&b, "<style>text{font-family:DejaVu Sans,Arial,sans-serif;"
              "font-size:11px;fill:#222}.ti{font-size:14px;font-weight:bold}"
              ".ph{font-size:12px;font-weight:bold}.ax{stroke:#444;"
              "stroke-width:1}.gr{stroke:#e4e4e4;stroke-width:1}");
  for (int c = 0; c < CAT__COUNT; c++)
    ovl__sb_printf(&b, ".k%d{fill:%s}", c, cat_colour[c]);
  ovl__sb_puts(&b, ".ov{fill:" OVERLAP_COLOUR "}.bd{fill:" OVERLAP_COLOUR
              ";fill-opacity:0.16}</style>\n");
  ovl__sb_printf(&b, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", SVG_W,
            height);

  /* Title line: schedule and params, modes, backend, iteration. */
  {
    const ovl_program *p0 = runs[0].prog;
    const ovl_result *r0 = runs[0].res;
    ovl__sb_puts(&b, "<text class=\"ti\" x=\"10\" y=\"20\">");
    sb_xml_str(&b, base_name(p0->filename));
    for (size_t i = 0; i < p0->nparams; i++) {
      ovl__sb_puts(&b, i ? " " : " (");
      sb_xml_str(&b, p0->params[i].name);
      ovl__sb_puts(&b, "=");
      sb_xml_str(&b, p0->params[i].value);
      if (i + 1 == p0->nparams)
        ovl__sb_puts(&b, ")");
    }
    ovl__sb_puts(&b, " \xe2\x80\x94 ");
    for (size_t k = 0; k < nruns; k++)
      ovl__sb_printf(&b, "%s%s", k ? (k + 1 == nruns ? " vs " : ", ") : "",
                ovl_mode_name(runs[k].mode));
    ovl__sb_puts(&b, " \xe2\x80\x94 backend ");
    sb_xml_str(&b, ovl_world_backend_name(world));
    ovl__sb_puts(&b, ", ");
    sb_xml_str(&b, ovl_world_devices(world));
    ovl__sb_printf(&b, " \xe2\x80\x94 timed iteration %d (0-based) of %d</text>\n",
              ovl_result_trace_iter(r0), ovl_result_iters(r0));
  }
  /* Legend. */
  {
    static const char *const labels[CAT__COUNT] = {
        "compute", "collective", "wait / event record", "delay",
        "host (fetch, sync)"};
    double x = 10;
    for (int c = 0; c < CAT__COUNT; c++) {
      ovl__sb_printf(&b, "<rect class=\"k%d\" x=\"%.0f\" y=\"32\" width=\"14\" "
                    "height=\"10\"/><text x=\"%.0f\" y=\"41\">%s</text>\n",
                c, x, x + 18, labels[c]);
      x += 18 + 7.0 * (double)strlen(labels[c]) + 16;
    }
    ovl__sb_printf(&b, "<rect class=\"ov\" x=\"%.0f\" y=\"32\" width=\"14\" "
                  "height=\"10\"/><text x=\"%.0f\" y=\"41\">overlap: a "
                  "collective and compute at the same time</text>\n",
              x, x + 18);
  }

  y = 58;
  for (size_t k = 0; k < nruns && !b.fail; k++) {
    const ovl_program *prog = runs[k].prog;
    const ovl_result *res = runs[k].res;
    int nstreams = 1 + prog->nrings;
    int panel_top = y, panel_bottom;
    int64_t coll_sum = 0, ov_sum = 0;
    int *seq = collective_seqs(prog);
    lane_ctx lc = {.b = &b, .prog = prog, .seq = seq, .scale = scale};
    if (seq == NULL) {
      b.fail = true;
      break;
    }
    for (int r = 0; r < nranks; r++) {
      if (!overlap_of(&all[k * (size_t)nranks + (size_t)r], &ov, &coll)) {
        b.fail = true;
        break;
      }
      coll_sum += iv_total(&coll);
      ov_sum += iv_total(&ov);
    }
    panel_bottom = panel_top + PANEL_HEAD +
                   nranks * rank_block_height(nstreams) - RANK_GAP;
    /* Grid lines first, under everything. */
    for (int i = 1;; i++) {
      double x = SVG_LEFT + i * step_ms * 1e6 * scale;
      if (x > SVG_LEFT + (double)tmax * scale + 0.5)
        break;
      ovl__sb_printf(&b, "<line class=\"gr\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" "
                    "y2=\"%d\"/>\n",
                x, panel_top + PANEL_HEAD - 2, x, panel_bottom + 2);
    }
    ovl__sb_printf(&b, "<text class=\"ph\" x=\"10\" y=\"%d\">%s</text>",
              y + 14, ovl_mode_name(runs[k].mode));
    ovl__sb_printf(&b, "<text x=\"%d\" y=\"%d\">iteration %.3f ms (host clock, "
                  "barrier to barrier); collectives %.3f ms per rank, "
                  "%.0f%% of it beside compute</text>\n",
              SVG_LEFT, y + 14,
              ovl_result_times(res)[ovl_result_trace_iter(res)] * 1e3,
              (double)coll_sum * 1e-6 / nranks,
              coll_sum > 0 ? 100.0 * (double)ov_sum / (double)coll_sum : 0.0);
    y += PANEL_HEAD;
    for (int r = 0; r < nranks && !b.fail; r++) {
      const rank_slices *rs = &all[k * (size_t)nranks + (size_t)r];
      int top = y;
      char lname[32];
      if (!overlap_of(rs, &ov, &coll)) {
        b.fail = true;
        break;
      }
      /* The band behind the rank's lanes, then the lanes. */
      draw_intervals(&b, &ov, scale, top - 1,
                     (nstreams + 1) * (LANE_H + LANE_GAP) + OVERLAP_H, "bd");
      for (int lane = 0; lane <= nstreams; lane++) {
        ovl__sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">r%d ",
                  SVG_LEFT - 6, y + LANE_H - 2, r);
        ovl__sb_puts(&b, lane_name(lane, nstreams, lname, sizeof lname));
        ovl__sb_puts(&b, "</text>\n");
        ovl__sb_printf(&b, "<g transform=\"translate(0,%d)\">\n", y);
        draw_lane(&lc, rs, lane);
        ovl__sb_puts(&b, "</g>\n");
        y += LANE_H + LANE_GAP;
      }
      ovl__sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" "
                    "font-size=\"9\">overlap</text>\n",
                SVG_LEFT - 6, y + OVERLAP_H);
      draw_intervals(&b, &ov, scale, y, OVERLAP_H, "ov");
      y += OVERLAP_H + RANK_GAP;
    }
    free(seq);
    y -= RANK_GAP;
    svg_axis(&b, y + 4, scale, step_ms, tmax, "time (ms)");
    y += AXIS_H + RANK_GAP;
  }
  ovl__sb_puts(&b, "</svg>\n");
  free(ov.v);
  free(coll.v);
  free_all(all, nruns * (size_t)nranks);
  return finish(&b, text, len, err);
}
