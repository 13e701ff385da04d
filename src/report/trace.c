/*
 * The traced iteration of runs as a Chrome trace-event file, for Perfetto
 * and chrome://tracing (report/slices.h says what a slice is). A flow
 * arrow goes from the start of an event record's slice to the end of the
 * wait's: a wait ends once the record has been reached, so the arrow never
 * points back in time, however long the wait stalled. Each end binds to
 * the slice that encloses its time, 1 ns inside it (a slice lasts at least
 * 2 ns), so that a neighbour starting where it ends is not taken instead.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/slices.h"

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

/* Whether op i records on one stream and waits on another: its record
 * is not its main primitive (barrier's second primitive is a host sync,
 * not a part of its own). */
static bool has_record_part(const ovl_program *prog, size_t i) {
  for (size_t p = prog->prim_first[i]; p < prog->prim_first[i + 1]; p++)
    if (prog->prims[p].kind == OVL_PRIM_RECORD && !prog->prims[p].main)
      return true;
  return false;
}

/* The colour of a slice in chrome://tracing (its reserved colour names):
 * waits by kind, a raced op in red; NULL: the viewer's own. */
static const char *slice_cname(const slice *sl) {
  if (sl->race > 0)
    return "terrible";
  switch (sl->cat) {
  case CAT_EVENT_WAIT:
    return "yellow";
  case CAT_HOST_SYNC:
    return "thread_state_iowait";
  case CAT_RECORD:
    return "grey";
  default:
    return NULL;
  }
}

/* "race 1", "race 1, race 3": every race of `run` marking op `op` on
 * `rank`, as a JSON array of its numbers into b, and its name suffix
 * into suffix. */
static void race_args(ovl__sbuf *b, const tl_run *run, size_t op,
                      int rank, char *suffix, size_t size) {
  size_t off = 0;
  int n = 0;
  suffix[0] = '\0';
  for (size_t k = 0; k < run->nmarks; k++) {
    if (run->marks[k].op != op || !((run->marks[k].ranks >> rank) & 1))
      continue;
    ovl__sb_printf(b, "%s%d", n ? "," : ",\"race\":[", run->marks[k].race);
    if (off < size)
      off += (size_t)snprintf(suffix + off, size - off, "%srace %d",
                              n ? ", " : " [", run->marks[k].race);
    n++;
  }
  if (n > 0) {
    ovl__sb_puts(b, "]");
    if (off < size)
      snprintf(suffix + off, size - off, "]");
  }
}

static void trace_slice(ovl__sbuf *b, const tl_run *run, int pid,
                        int rank, int nstreams, const slice *sl,
                        const int *seq) {
  const ovl_program *prog = run->prog;
  const ovl__op *op = &prog->ops[sl->op];
  const char *cname = slice_cname(sl);
  char name[256], suffix[128];
  ovl__sbuf races = {0};
  race_args(&races, run, sl->op, rank, suffix, sizeof suffix);
  ovl__sb_printf(b, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", pid,
            lane_tid(sl->lane, nstreams));
  sb_us(b, sl->t0);
  ovl__sb_puts(b, ",\"dur\":");
  sb_us(b, sl->t1 - sl->t0);
  ovl__sb_puts(b, ",\"name\":");
  if (seq[sl->op] >= 0)
    snprintf(name, sizeof name, "%s #%d (ring %d)%s", op->def->name,
             seq[sl->op], op->ring_id, suffix);
  else if (sl->record)
    snprintf(name, sizeof name, "%s [record]%s", op->def->name, suffix);
  else
    snprintf(name, sizeof name, "%s%s", op->def->name, suffix);
  ovl__sb_json_str(b, name);
  if (cname != NULL)
    ovl__sb_printf(b, ",\"cname\":\"%s\"", cname);
  ovl__sb_printf(b, ",\"cat\":\"%s\",\"args\":{\"op\":%zu,\"source\":",
            ovl__tl_cat_names[sl->cat], sl->op);
  {
    size_t n = strlen(prog->filename) + 32;
    char *src = malloc(n);
    if (src == NULL) {
      b->fail = true;
      free(races.s);
      return;
    }
    snprintf(src, n, "%s:%d", prog->filename, op->line);
    ovl__sb_json_str(b, src);
    free(src);
  }
  ovl__sb_printf(b, ",\"mode\":\"%s\",\"stream\":\"%s\",\"bytes\":%llu",
            ovl_mode_name(run->mode),
            ovl__tl_lane_name(prog, sl->lane),
            (unsigned long long)(sl->record ? 0 : ovl__tl_op_bytes(prog, op)));
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
  /* The two halves of an op that records on one stream and waits on
   * another (c_wait_compute, c_wait_comm). */
  if (has_record_part(prog, sl->op))
    ovl__sb_printf(b, ",\"ring\":%d,\"part\":\"%s\"", op->ring_id,
                   sl->record ? "record" : "wait");
  if (op->event >= 0 && (size_t)op->event < prog->nevents) {
    ovl__sb_puts(b, ",\"event\":");
    ovl__sb_json_str(b, prog->events[op->event]);
  }
  /* Waits by kind; a collective's wait for its peers. */
  if (sl->cat == CAT_EVENT_WAIT)
    ovl__sb_puts(b, ",\"wait\":\"event\"");
  else if (sl->cat == CAT_HOST_SYNC)
    ovl__sb_puts(b, ",\"wait\":\"host_sync\"");
  if (sl->t_peers > sl->t0) {
    ovl__sb_puts(b, ",\"wait\":\"peers\",\"waiting_for_peers_us\":");
    sb_us(b, sl->t_peers - sl->t0);
  }
  if (races.fail)
    b->fail = true;
  else if (races.s != NULL)
    ovl__sb_puts(b, races.s);
  free(races.s);
  ovl__sb_puts(b, "}}");
  /* The wait for the peers as a slice inside the collective's. */
  if (sl->t_peers > sl->t0) {
    ovl__sb_printf(b, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
                   pid, lane_tid(sl->lane, nstreams));
    sb_us(b, sl->t0);
    ovl__sb_puts(b, ",\"dur\":");
    sb_us(b, sl->t_peers - sl->t0);
    ovl__sb_printf(b, ",\"name\":\"waiting for its peers\",\"cname\":"
                      "\"thread_state_sleeping\",\"cat\":\"peer_wait\","
                      "\"args\":{\"op\":%zu,\"source\":",
                   sl->op);
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
    ovl__sb_printf(b, ",\"mode\":\"%s\",\"stream\":\"%s\",\"bytes\":0,"
                      "\"wait\":\"peers\"}}",
                   ovl_mode_name(run->mode), ovl__tl_lane_name(prog, sl->lane));
  }
}

static void trace_flow(ovl__sbuf *b, int pid, int nstreams, long id,
                       const slice *from, const slice *to) {
  ovl__sb_printf(b,
            ",\n{\"ph\":\"s\",\"id\":%ld,\"pid\":%d,\"tid\":%d,\"ts\":", id,
            pid, lane_tid(from->lane, nstreams));
  /* 1 ns inside each end's slice; at the slice itself where it is
   * shorter than that (a predicted record or wait can take no time). */
  sb_us(b, from->t1 - from->t0 >= 2 ? from->t0 + 1 : from->t0);
  ovl__sb_puts(b, ",\"name\":\"event\",\"cat\":\"event\"}");
  ovl__sb_printf(b,
            ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%ld,\"pid\":%d,\"tid\":%d,"
            "\"ts\":",
            id, pid, lane_tid(to->lane, nstreams));
  sb_us(b, to->t1 - to->t0 >= 2 ? to->t1 - 1 : to->t1);
  ovl__sb_puts(b, ",\"name\":\"event\",\"cat\":\"event\"}");
}

/* Flow arrows of one rank: from each event record to the waits that
 * consume it (its own wait for c_wait_compute / c_wait_comm; for a named
 * event, every stream_wait_event until the next record). */
static void trace_flows(ovl__sbuf *b, const ovl_program *prog, int pid,
                        int nstreams, const rank_slices *rs, long *id) {
  int nevents = ovl__program_nevents(prog);
  const slice **last_rec = calloc((size_t)nevents + 1, sizeof *last_rec);
  if (last_rec == NULL) {
    b->fail = true;
    return;
  }
  for (size_t j = 0; j < rs->n; j++) {
    const slice *sl = &rs->s[j];
    const ovl__prim *p = &prog->prims[sl->prim];
    if (p->kind == OVL_PRIM_RECORD)
      last_rec[p->event] = sl;
    else if (p->kind == OVL_PRIM_WAIT && last_rec[p->event] != NULL)
      trace_flow(b, pid, nstreams, (*id)++, last_rec[p->event], sl);
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

ovl_status ovl_timeline_trace(const ovl_timeline_run *runs, size_t nruns,
                              char **text, size_t *len, ovl_error *err) {
  return ovl_timeline_trace_marked(runs, NULL, nruns, text, len, err);
}

ovl_status ovl_timeline_trace_marked(const ovl_timeline_run *truns,
                                     const ovl_timeline_marks *marks,
                                     size_t nruns, char **text, size_t *len,
                                     ovl_error *err) {
  ovl_status st = ovl__tl_check_runs(truns, nruns, text, err);
  const ovl_result *res0;
  int nranks;
  rank_slices *all;
  ovl__sbuf b = {0};
  long flow_id = 1;
  size_t first;
  tl_run *runs;

  if (st != OVL_OK)
    return st;
  if ((runs = ovl__tl_runs(truns, marks, nruns)) == NULL)
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  res0 = runs[0].res;
  nranks = ovl_result_nranks(res0);
  all = ovl__tl_build_all(runs, nruns, nranks);
  if (all == NULL) {
    free(runs);
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  }

  ovl__sb_puts(&b, "{\"traceEvents\":[");
  first = b.len; /* every event starts with ",\n": the first one's goes */
  for (size_t k = 0; k < nruns; k++) {
    const ovl_program *prog = runs[k].prog;
    int nstreams = prog->nstreams;
    for (int r = 0; r < nranks && !b.fail; r++) {
      int pid = 1 + (int)k * nranks + r;
      /* Numbered per rank: ranks that differ issue different ones. */
      int *seq = ovl__tl_comm_seqs(prog, r);
      if (seq == NULL) {
        b.fail = true;
        break;
      }
      const rank_slices *rs = &all[k * (size_t)nranks + (size_t)r];
      char pname[256];
      if (nruns > 1 || runs[k].label != NULL)
        snprintf(pname, sizeof pname, "%s: rank %d (%s)",
                 runs[k].label != NULL ? runs[k].label
                                       : ovl_mode_name(runs[k].mode),
                 r, ovl_result_device_name(runs[k].res, r));
      else
        snprintf(pname, sizeof pname, "rank %d (%s)", r,
                 ovl_result_device_name(runs[k].res, r));
      trace_meta(&b, pid, -1, "process_name", "name", pname, 0);
      trace_meta(&b, pid, -1, "process_sort_index", "sort_index", NULL, pid);
      for (int lane = 0; lane <= nstreams; lane++) {
        int tid = lane_tid(lane, nstreams);
        trace_meta(&b, pid, tid, "thread_name", "name",
                   ovl__tl_lane_name(prog, lane), 0);
        trace_meta(&b, pid, tid, "thread_sort_index", "sort_index", NULL,
                   lane);
      }
      for (size_t j = 0; j < rs->n; j++)
        trace_slice(&b, &runs[k], pid, r, nstreams, &rs->s[j], seq);
      trace_flows(&b, prog, pid, nstreams, rs, &flow_id);
      free(seq);
    }
  }
  if (!b.fail && b.len > first && b.s[first] == ',')
    b.s[first] = ' ';
  ovl__sb_puts(&b, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{");
  ovl__sb_printf(&b, "\"tool\":\"overlap-sim\",\"version\":\"%s\",",
            OVL_VERSION_STRING);
  ovl__sb_puts(&b, "\"backend\":");
  ovl__sb_json_str(&b, ovl_result_backend(res0));
  ovl__sb_printf(&b, ",\"ranks\":%d,\"predicted\":%s,\"devices\":", nranks,
                 ovl_result_predicted(res0) ? "true" : "false");
  ovl__sb_json_str(&b, ovl_result_devices(res0));
  ovl__sb_puts(&b, ",\"schedule\":");
  ovl__sb_json_str(&b, runs[0].prog->filename);
  ovl__sb_puts(&b, ",\"params\":");
  sb_params(&b, runs[0].prog);
  ovl__sb_printf(&b, ",\"trace_iter\":%d,\"modes\":[",
            ovl_result_trace_iter(runs[0].res));
  for (size_t k = 0; k < nruns; k++) {
    ovl__sb_puts(&b, k ? "," : "");
    ovl__sb_json_str(&b, runs[k].label != NULL ? runs[k].label
                                               : ovl_mode_name(runs[k].mode));
  }
  ovl__sb_puts(&b, "],\"iteration_s\":{");
  for (size_t k = 0; k < nruns; k++) {
    ovl__sb_puts(&b, k ? "," : "");
    ovl__sb_json_str(&b, runs[k].label != NULL ? runs[k].label
                                               : ovl_mode_name(runs[k].mode));
    ovl__sb_printf(&b, ":%.9g",
                   ovl_result_times(runs[k].res)[ovl_result_trace_iter(
                       runs[k].res)]);
  }
  ovl__sb_puts(&b, "},\"time\":\"microseconds; each mode's run starts at 0; "
              "ranks lined up on the host clock\"}}\n");
  ovl__tl_free_all(all, nruns * (size_t)nranks);
  free(runs);
  return ovl__tl_finish(&b, text, len, err);
}

