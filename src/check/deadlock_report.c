/*
 * The deadlock check's report (check/deadlock.h): its records, each a
 * cycle of steps with its message, keyed by its steps' positions in the
 * list of findings (check/findings.h), so that cycles alike on other
 * ranks are counted, not repeated; freed, read (ovl_deadlocks_*) and
 * written out as text and JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/deadlock.h"

/* ------------------------------------------------------------------ */
/* Records                                                             */
/* ------------------------------------------------------------------ */

static dl_rec *rec_at(const ovl_deadlocks *d, size_t i) {
  return ovl__flist_at(&d->list, i);
}

static void rec_free(void *rec, void *ctx) {
  dl_rec *r = rec;
  (void)ctx;
  for (size_t k = 0; r->names != NULL && k < r->nsteps; k++)
    free(r->names[k]);
  for (size_t k = 0; r->match != NULL && k < r->nsteps; k++)
    free((char *)r->match[k].after_stream_name);
  free(r->names);
  free(r->steps);
  free(r->match);
  free(r->message);
  free(r->key);
  ovl__fix_slot_free(&r->fix);
}

void ovl_deadlocks_free(ovl_deadlocks *d) {
  if (d == NULL)
    return;
  ovl__flist_free(&d->list, rec_free, NULL);
  free(d->unreached);
  free(d);
}

bool ovl__deadlocks_unreached(const ovl_deadlocks *d, uint64_t pos) {
  size_t lo = 0, hi = d != NULL ? d->nunreached : 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->unreached[mid] < pos)
      lo = mid + 1;
    else
      hi = mid;
  }
  return d != NULL && lo < d->nunreached && d->unreached[lo] == pos;
}

static void what_text(ovl__sbuf *b, const ovl_deadlock_step *s) {
  ovl__sb_puts(b, s->op_name);
  if (s->peer >= 0)
    ovl__sb_printf(b, " %s rank %d%s",
                   strcmp(s->op_name, "recv_v2") == 0 ? "from" : "to",
                   s->peer, s->in_group ? " in a group" : "");
  if (s->ring >= 0) {
    ovl__sb_printf(b, ", ring %d", s->ring);
    if (s->coll_index > 0)
      ovl__sb_printf(b, " collective #%llu",
                     (unsigned long long)s->coll_index);
  }
}

static char *cycle_text(const ovl_deadlock_step *st, size_t n, bool graph) {
  ovl__sbuf b = {0};
  ovl__sb_printf(&b, "deadlock: rank %d %s waits at line %d (", st[0].rank,
                 st[0].stream_name, st[0].line);
  what_text(&b, &st[0]);
  ovl__sb_puts(&b, ")");
  if (n == 1) {
    ovl__sb_puts(&b, " for itself: what it waits for is queued behind it on "
                     "the same ");
    ovl__sb_puts(&b, st[0].stream < 0 ? "host" : "stream");
  } else {
    for (size_t i = 1; i < n; i++) {
      if (st[i].rank != st[i - 1].rank)
        ovl__sb_printf(&b, " for rank %d, whose %s is blocked", st[i].rank,
                       st[i].stream_name);
      else
        ovl__sb_printf(&b, " for its %s, which is blocked",
                       st[i].stream_name);
      ovl__sb_printf(&b, " at line %d (", st[i].line);
      what_text(&b, &st[i]);
      ovl__sb_puts(&b, ") waiting");
    }
    ovl__sb_printf(&b, " for rank %d %s", st[0].rank, st[0].stream_name);
  }
  if (graph)
    ovl__sb_puts(&b, " (as graphs: a host sync waits for every stream of "
                     "its segment)");
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static bool key_eq(const void *rec, const void *key) {
  const dl_rec *r = rec;
  const uint64_t *k = key;
  return r->nsteps == k[0] &&
         memcmp(r->key, k, (2 * r->nsteps + 1) * sizeof *k) == 0;
}

bool ovl__deadlocks_add(ovl_deadlocks *res, ovl_deadlock_step *st,
                        dl_match *mt, size_t n) {
  uint64_t *key = malloc((2 * n + 1) * sizeof *key), h = 0x51ed27;
  void *rec;
  dl_rec *r;
  ovl__flist_got got;
  if (key == NULL) {
    free(st);
    free(mt);
    return false;
  }
  key[0] = n;
  for (size_t i = 0; i < n; i++) {
    key[1 + 2 * i] = (uint64_t)(uint32_t)st[i].line << 32 | (uint32_t)st[i].col;
    key[2 + 2 * i] = (uint64_t)(uint32_t)(st[i].stream + 1) |
                     (uint64_t)(st[i].rank != st[(i + 1) % n].rank) << 32;
  }
  for (size_t i = 0; i < 2 * n + 1; i++)
    h = mix(h, key[i]);
  got = ovl__flist_add(&res->list, h, key, &rec);
  if (got != OVL__FLIST_NEW) {
    if (got == OVL__FLIST_FOUND)
      ((dl_rec *)rec)->occurrences++;
    free(key);
    free(st);
    free(mt);
    return got != OVL__FLIST_NOMEM;
  }
  /* Its own copies of the stream names of what the steps wait for (the
   * program's until then). */
  const char **after = malloc((n + 1) * sizeof *after);
  if (after == NULL) {
    free(key);
    free(st);
    free(mt);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    after[i] = mt[i].after_stream_name;
    mt[i].after_stream_name = NULL;
  }
  /* The record owns the key, the steps and the matches from here on,
   * whatever fails next (ovl_deadlocks_free frees them). */
  r = rec;
  r->nsteps = n;
  r->steps = st;
  r->match = mt;
  r->key = key;
  r->occurrences = 1;
  for (size_t i = 0; i < n; i++)
    if (mt[i].rank >= 0 && after[i] != NULL &&
        (mt[i].after_stream_name = ovl__strdup(after[i])) == NULL) {
      free(after);
      return false;
    }
  free(after);
  r->names = calloc(n, sizeof *r->names);
  if (r->names == NULL)
    return false;
  for (size_t i = 0; i < n; i++) {
    if ((r->names[i] = ovl__strdup(st[i].stream_name)) == NULL)
      return false;
    st[i].stream_name = r->names[i];
  }
  r->message = cycle_text(st, n, res->graph);
  return r->message != NULL;
}

ovl_deadlocks *ovl__deadlocks_new(int nranks, bool graph) {
  ovl_deadlocks *res = calloc(1, sizeof *res);
  if (res == NULL)
    return NULL;
  ovl__flist_init(&res->list, sizeof(dl_rec), OVL_FINDINGS_LIST_MAX, key_eq);
  res->nranks = nranks;
  res->graph = graph;
  return res;
}

/* ------------------------------------------------------------------ */
/* Accessors and formatting                                            */
/* ------------------------------------------------------------------ */

size_t ovl_deadlocks_count(const ovl_deadlocks *d) {
  return d ? d->list.n : 0;
}
uint64_t ovl_deadlocks_more(const ovl_deadlocks *d) {
  return d ? d->list.more : 0;
}
uint64_t ovl_deadlocks_blocked(const ovl_deadlocks *d) {
  return d ? d->blocked : 0;
}

int ovl_deadlocks_get(const ovl_deadlocks *d, size_t i,
                      ovl_deadlock_finding *info) {
  if (info != NULL)
    memset(info, 0, sizeof *info);
  if (d == NULL || info == NULL || i >= d->list.n)
    return -1;
  info->nsteps = rec_at(d, i)->nsteps;
  info->steps = rec_at(d, i)->steps;
  info->occurrences = rec_at(d, i)->occurrences;
  info->message = rec_at(d, i)->message;
  return 0;
}

static void fmt_json(ovl__sbuf *b, const void *res, const ovl_program *prog,
                     const char *file) {
  const ovl_deadlocks *d = res;
  (void)prog;
  ovl__sb_puts(b, "{\"schedule\":");
  ovl__sb_json_str(b, file);
  ovl__sb_printf(b, ",\"ranks\":%d,\"deadlocks\":[", d->nranks);
  for (size_t i = 0; i < d->list.n; i++) {
    const dl_rec *r = rec_at(d, i);
    ovl__sb_printf(b, "%s{\"steps\":[", i ? "," : "");
    for (size_t k = 0; k < r->nsteps; k++) {
      const ovl_deadlock_step *s = &r->steps[k];
      ovl__sb_printf(b, "%s{\"rank\":%d,\"stream\":", k ? "," : "", s->rank);
      ovl__sb_json_str(b, s->stream_name);
      ovl__sb_puts(b, ",\"op\":");
      ovl__sb_json_str(b, s->op_name);
      ovl__sb_printf(b, ",\"line\":%d,\"col\":%d,\"ring\":", s->line,
                     s->col);
      if (s->ring >= 0)
        ovl__sb_printf(b, "%d", s->ring);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_puts(b, ",\"coll_index\":");
      if (s->coll_index > 0)
        ovl__sb_printf(b, "%llu", (unsigned long long)s->coll_index);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_puts(b, ",\"peer\":");
      if (s->peer >= 0)
        ovl__sb_printf(b, "%d", s->peer);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_printf(b, ",\"in_group\":%s,\"waits_for\":",
                     s->in_group ? "true" : "false");
      if (r->match == NULL || r->match[k].rank < 0) {
        ovl__sb_puts(b, "null}");
        continue;
      }
      {
        const dl_match *m = &r->match[k];
        ovl__sb_printf(b, "{\"rank\":%d,\"op\":", m->rank);
        ovl__sb_json_str(b, m->op_name);
        ovl__sb_printf(b, ",\"line\":%d,\"col\":%d,\"after_line\":",
                       m->line, m->col);
        if (m->after_op == OVL__NONE) {
          ovl__sb_puts(b, "null,\"after_op\":null,\"after_stream\":null}}");
          continue;
        }
        ovl__sb_printf(b, "%d,\"after_op\":", m->after_line);
        ovl__sb_json_str(b, m->after_op_name);
        ovl__sb_puts(b, ",\"after_stream\":");
        ovl__sb_json_str(b, m->after_stream_name != NULL
                                ? m->after_stream_name
                                : "host");
        ovl__sb_puts(b, "}}");
      }
    }
    ovl__sb_printf(b, "],\"occurrences\":%llu,\"message\":",
                   (unsigned long long)r->occurrences);
    ovl__sb_json_str(b, r->message);
    ovl__sb_puts(b, ",\"forms\":");
    ovl__findings_forms_json(b, r->forms);
    ovl__findings_fix_json(b, r->fix.text, r->fix.checked, r->fix.why);
    ovl__sb_puts(b, "}");
  }
  ovl__sb_printf(b, "],\"count\":%zu,\"more\":%llu,\"blocked\":%llu}\n",
                 d->list.n, (unsigned long long)d->list.more,
                 (unsigned long long)d->blocked);
}

/* Both ends of each comm step of a cycle, a line each: "  rank 0 at line
 * 5 (send_v2 to rank 1, ring 0) waits to match rank 1's recv_v2 at
 * FILE:6, issued only after line 5 (send_v2, where that rank's calc is
 * blocked)". */
static void match_lines(ovl__sbuf *b, const dl_rec *r, const char *file) {
  for (size_t k = 0; r->match != NULL && k < r->nsteps; k++) {
    const ovl_deadlock_step *s = &r->steps[k];
    const dl_match *m = &r->match[k];
    if (m->rank < 0)
      continue;
    ovl__sb_printf(b, "  rank %d at line %d (", s->rank, s->line);
    what_text(b, s);
    ovl__sb_puts(b, ") waits to match ");
    if (m->rank == s->rank)
      ovl__sb_printf(b, "its own %s at %s:%d", m->op_name, file, m->line);
    else
      ovl__sb_printf(b, "rank %d's %s at %s:%d", m->rank, m->op_name, file,
                     m->line);
    if (m->after_op == OVL__NONE) {
      ovl__sb_puts(b, "\n");
      continue;
    }
    ovl__sb_printf(b, ", issued only after line %d (%s, where %s %s is "
                      "blocked)\n",
                   m->after_line, m->after_op_name,
                   m->rank == s->rank ? "its" : "that rank's",
                   m->after_stream_name != NULL ? m->after_stream_name
                                                : "host");
  }
}

static void fmt_human(ovl__sbuf *b, const void *res,
                      const ovl_program *prog, const char *file) {
  const ovl_deadlocks *d = res;
  (void)prog;
  for (size_t i = 0; i < d->list.n; i++) {
    const dl_rec *r = rec_at(d, i);
    ovl__sb_printf(b, "deadlock %zu: %s", i + 1,
                   strncmp(r->message, "deadlock: ", 10) == 0
                       ? r->message + 10
                       : r->message);
    if (r->occurrences > 1)
      ovl__sb_printf(b, " (and %llu more cycle%s alike on other ranks)",
                     (unsigned long long)r->occurrences - 1,
                     r->occurrences == 2 ? "" : "s");
    ovl__sb_puts(b, "\n");
    match_lines(b, r, file);
    ovl__findings_forms_line(b, r->forms, r->forms_checked);
    ovl__findings_fix_line(b, r->fix.text, r->fix.checked, r->fix.why);
  }
  ovl__findings_close(b, d->list.n, d->list.more, "deadlock", "deadlock",
                      "deadlocks", file, d->nranks, "");
}

ovl_status ovl_deadlocks_format(const ovl_deadlocks *d,
                                const ovl_program *prog, int json,
                                char **text, ovl_error *err) {
  return ovl__findings_format(d, prog, json ? fmt_json : fmt_human,
                              "ovl_deadlocks_format", "deadlock report",
                              text, err);
}

unsigned ovl_deadlocks_forms(const ovl_deadlocks *d, size_t i) {
  return d != NULL && i < d->list.n ? rec_at(d, i)->forms : 0;
}

int ovl_deadlocks_match(const ovl_deadlocks *d, size_t i, size_t step,
                        ovl_deadlock_match *out) {
  const dl_rec *r;
  const dl_match *m;
  if (out != NULL) {
    memset(out, 0, sizeof *out);
    out->rank = -1;
    out->after_stream = -1;
  }
  if (d == NULL || out == NULL || i >= d->list.n ||
      step >= rec_at(d, i)->nsteps)
    return -1;
  r = rec_at(d, i);
  m = &r->match[step];
  if (m->rank < 0)
    return 0;
  out->rank = m->rank;
  out->op = m->op;
  out->op_name = m->op_name;
  out->line = m->line;
  out->col = m->col;
  out->after_line = m->after_op != OVL__NONE ? m->after_line : 0;
  out->after_op = m->after_op != OVL__NONE ? m->after_op : 0;
  out->after_stream = m->after_stream;
  return 0;
}

bool ovl__deadlock_set_fix(ovl_deadlocks *d, size_t i, char *text,
                           bool checked, const char *why) {
  return ovl__fix_slot_set(&rec_at(d, i)->fix, text, checked, why);
}

int ovl_deadlocks_fix(const ovl_deadlocks *d, size_t i, ovl_fix_info *out) {
  if (out != NULL)
    memset(out, 0, sizeof *out);
  if (d == NULL || out == NULL || i >= d->list.n)
    return -1;
  ovl__fix_slot_info(&rec_at(d, i)->fix, out);
  return 0;
}
