/*
 * The traced iteration of runs as a self-contained SVG picture
 * (report/slices.h says what a slice is).
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_str.h"
#include "report/slices.h"

/* ------------------------------------------------------------------ */
/* Text for the picture (the growing string is ovl__sbuf, strbuf.c)    */
/* ------------------------------------------------------------------ */

/* Text for XML (element content or an attribute value), valid UTF-8 like
 * the JSON (base/json_str.h): an ill-formed sequence becomes U+FFFD. */
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

/* compute, collective, record, delay, host read, event wait, host sync;
 * a collective's wait for its peers is drawn over its start; a raced op
 * is outlined and labelled. */
static const char *const cat_colour[CAT__COUNT] = {
    "#4e79a7", "#f28e2b", "#bab0ac", "#9c755f",
    "#b07aa1", "#edc948", "#ff9da7"};
#define OVERLAP_COLOUR "#59a14f"
#define PEER_WAIT_COLOUR "#76b7b2"
#define RACE_COLOUR "#d62728"
/* Where the time went (ovl_explain's classes, run/explain.c): compute,
 * exposed communication, contention, host, waits. */
static const char *const where_colour[5] = {"#5b9bd5", "#e15759", "#f1a340",
                                            "#d9d9d9", "#f6e58d"};
static const char *const where_label[5] = {
    "compute", "exposed comm", "contention", "host / launch", "waits"};

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

/* Per op, rank and run: up to two slices (one per stream primitive), and
 * either the collectives' numbers and the trace's text, or the picture's
 * intervals (made one rank at a time; the picture's own text merges what is
 * narrower than a pixel). */
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
  int race;     /* a raced op's K (never merged) */
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
    if (p->race > 0)
      ovl__sb_printf(b, " (race %d)", p->race);
    ovl__sb_puts(b, "</title></rect>\n");
  } else {
    ovl__sb_printf(b, "><title>%zu %s ops %.3f ms</title></rect>\n", p->count,
              ovl__tl_cat_names[p->cat], (double)p->busy * 1e-6);
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
    small = x1 - x0 < 1.0 && sl->race == 0;
    if (p.open && small && p.race == 0 && p.cat == sl->cat &&
        p.x1 - p.x0 < 1e9 &&
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
    p.race = sl->race;
    p.busy = sl->t1 - sl->t0;
  }
  flush_rect(lc, &p);
  /* Over the lane: each collective's wait for its peers, then each raced
   * op outlined and labelled "race K". */
  for (size_t k = 0; k < rs->n; k++) {
    const slice *sl = &rs->s[k];
    double x0 = SVG_LEFT + (double)sl->t0 * lc->scale;
    double xp = SVG_LEFT + (double)sl->t_peers * lc->scale;
    if (sl->lane != lane || sl->t_peers <= sl->t0 || xp - x0 < 0.5)
      continue;
    ovl__sb_printf(lc->b, "<rect class=\"pw\" x=\"%.1f\" width=\"%.1f\" "
                          "height=\"%d\"><title>waiting for its peers "
                          "%.3f ms</title></rect>\n",
                   x0, xp - x0, LANE_H,
                   (double)(sl->t_peers - sl->t0) * 1e-6);
  }
  for (size_t k = 0; k < rs->n; k++) {
    const slice *sl = &rs->s[k];
    double x0 = SVG_LEFT + (double)sl->t0 * lc->scale;
    double x1 = SVG_LEFT + (double)sl->t1 * lc->scale;
    if (sl->lane != lane || sl->race == 0)
      continue;
    if (x1 - x0 < 2)
      x1 = x0 + 2;
    ovl__sb_printf(lc->b, "<rect class=\"rc\" x=\"%.1f\" y=\"-1\" "
                          "width=\"%.1f\" height=\"%d\"/><text class=\"rl\" "
                          "x=\"%.1f\" y=\"%d\">race %d</text>\n",
                   x0, x1 - x0, LANE_H + 2, x1 + 2, LANE_H - 2, sl->race);
  }
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
  return (nstreams + 1) * (LANE_H + LANE_GAP) + 2 * OVERLAP_H + 2 +
         RANK_GAP;
}

/* The "where" lane of a rank: its traced iteration's instants by class
 * (ovl__explain_segments), on the run's time axis; nothing where the run
 * cannot say. */
static void draw_where(ovl__sbuf *b, const ovl_program *prog,
                       const ovl_result *res, int rank, double origin,
                       double scale, double y) {
  ovl_explain x;
  ovl__xseg *sg = NULL;
  size_t n = 0;
  double off = ovl_result_trace_base(res, rank) - origin;
  if (res->spans == NULL || res->trace_iter < 0)
    return;
  if (ovl__explain_segments(prog, res, rank, &x, &sg, &n, NULL) != OVL_OK) {
    b->fail = true; /* out of memory: the writer says so */
    return;
  }
  for (size_t i = 0; i < n; i++) {
    double x0 = SVG_LEFT + (double)llround((off + sg[i].t0) * 1e9) * scale;
    double x1 = SVG_LEFT + (double)llround((off + sg[i].t1) * 1e9) * scale;
    if (x1 - x0 < 0.05)
      continue;
    ovl__sb_printf(b, "<rect class=\"w%d\" x=\"%.1f\" y=\"%.0f\" "
                      "width=\"%.1f\" height=\"%d\"/>\n",
                   sg[i].kind, x0, y, x1 - x0, OVERLAP_H);
  }
  free(sg);
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

ovl_status ovl_timeline_svg(const ovl_timeline_run *runs, size_t nruns,
                            char **text, size_t *len, ovl_error *err) {
  return ovl_timeline_svg_marked(runs, NULL, nruns, text, len, err);
}

ovl_status ovl_timeline_svg_marked(const ovl_timeline_run *truns,
                                   const ovl_timeline_marks *marks,
                                   size_t nruns, char **text, size_t *len,
                                   ovl_error *err) {
  ovl_status st = ovl__tl_check_runs(truns, nruns, text, err);
  int nranks;
  rank_slices *all;
  ovl__sbuf b = {0};
  int64_t tmax = 1;
  int height, y;
  double scale, step_ms;
  ivec ov = {0}, coll = {0};
  tl_run *runs;

  if (st != OVL_OK)
    return st;
  if ((runs = ovl__tl_runs(truns, marks, nruns)) == NULL)
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  nranks = ovl_result_nranks(runs[0].res);
  all = ovl__tl_build_all(runs, nruns, nranks);
  if (all == NULL) {
    free(runs);
    return ovl__err(err, OVL_ENOMEM, "timeline: out of memory");
  }
  for (size_t i = 0; i < nruns * (size_t)nranks; i++)
    for (size_t k = 0; k < all[i].n; k++)
      if (all[i].s[k].t1 > tmax)
        tmax = all[i].s[k].t1;
  scale = (double)(SVG_W - SVG_LEFT - SVG_RIGHT) / (double)tmax;
  step_ms = tick_step((double)tmax * 1e-6);

  height = 70;
  for (size_t k = 0; k < nruns; k++)
    height += PANEL_HEAD + nranks * rank_block_height(runs[k].prog->nstreams) +
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
  for (int c = 0; c < 5; c++)
    ovl__sb_printf(&b, ".w%d{fill:%s}", c, where_colour[c]);
  ovl__sb_puts(&b, ".ov{fill:" OVERLAP_COLOUR "}.bd{fill:" OVERLAP_COLOUR
              ";fill-opacity:0.16}.pw{fill:" PEER_WAIT_COLOUR "}"
              ".rc{fill:none;stroke:" RACE_COLOUR ";stroke-width:2}"
              ".rl{font-size:9px;font-weight:bold;fill:" RACE_COLOUR
              "}</style>\n");
  ovl__sb_printf(&b, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", SVG_W,
            height);

  /* Title line: schedule and params, modes, backend, iteration. */
  {
    const ovl_program *p0 = runs[0].prog;
    const ovl_result *r0 = runs[0].res;
    ovl__sb_puts(&b, "<text class=\"ti\" x=\"10\" y=\"20\">");
    sb_xml_str(&b, ovl__tl_base_name(p0->filename));
    for (size_t i = 0; i < p0->nparams; i++) {
      ovl__sb_puts(&b, i ? " " : " (");
      sb_xml_str(&b, p0->params[i].name);
      ovl__sb_puts(&b, "=");
      sb_xml_str(&b, p0->params[i].value);
      if (i + 1 == p0->nparams)
        ovl__sb_puts(&b, ")");
    }
    ovl__sb_puts(&b, " \xe2\x80\x94 ");
    for (size_t k = 0; k < nruns; k++) {
      ovl__sb_puts(&b, k ? (k + 1 == nruns ? " vs " : ", ") : "");
      sb_xml_str(&b, runs[k].label != NULL ? runs[k].label
                                           : ovl_mode_name(runs[k].mode));
    }
    ovl__sb_puts(&b, " \xe2\x80\x94 backend ");
    sb_xml_str(&b, ovl_result_backend(r0));
    if (ovl_result_predicted(r0))
      ovl__sb_puts(&b, " (predicted)");
    ovl__sb_puts(&b, ", ");
    sb_xml_str(&b, ovl_result_devices(r0));
    ovl__sb_printf(&b, " \xe2\x80\x94 timed iteration %d (0-based) of %d</text>\n",
              ovl_result_trace_iter(r0), ovl_result_iters(r0));
  }
  /* Legend: the kinds of op, the waits by kind, the overlap, a race. */
  {
    static const char *const labels[CAT__COUNT] = {
        "compute",    "collective",    "event record", "delay",
        "fetch (host)", "event wait", "host sync"};
    double x = 10;
    for (int c = 0; c < CAT__COUNT; c++) {
      ovl__sb_printf(&b, "<rect class=\"k%d\" x=\"%.0f\" y=\"32\" width=\"14\" "
                    "height=\"10\"/><text x=\"%.0f\" y=\"41\">%s</text>\n",
                c, x, x + 18, labels[c]);
      x += 18 + 6.2 * (double)strlen(labels[c]) + 12;
    }
    ovl__sb_printf(&b, "<rect class=\"pw\" x=\"%.0f\" y=\"32\" width=\"14\" "
                  "height=\"10\"/><text x=\"%.0f\" y=\"41\">collective "
                  "waiting for its peers</text>\n",
              x, x + 18);
    x += 18 + 6.2 * 30 + 12;
    ovl__sb_printf(&b, "<rect class=\"rc\" x=\"%.0f\" y=\"32\" width=\"14\" "
                  "height=\"10\"/><text x=\"%.0f\" y=\"41\">race K: an "
                  "access of race K</text>\n",
              x, x + 18);
    ovl__sb_printf(&b, "<rect class=\"ov\" x=\"10\" y=\"%d\" width=\"14\" "
                  "height=\"10\"/><text x=\"28\" y=\"%d\">overlap: a "
                  "collective and compute at the same time</text>\n",
              46, 55);
    x = 28 + 6.2 * 46 + 12;
    ovl__sb_printf(&b, "<text x=\"%.0f\" y=\"55\">where (the time went):"
                       "</text>\n", x);
    x += 6.2 * 22 + 6;
    for (int c = 0; c < 5; c++) {
      ovl__sb_printf(&b, "<rect class=\"w%d\" x=\"%.0f\" y=\"46\" "
                         "width=\"14\" height=\"10\"/><text x=\"%.0f\" "
                         "y=\"55\">%s</text>\n",
                     c, x, x + 18, where_label[c]);
      x += 18 + 6.2 * (double)strlen(where_label[c]) + 12;
    }
  }

  y = 70;
  for (size_t k = 0; k < nruns && !b.fail; k++) {
    const ovl_program *prog = runs[k].prog;
    const ovl_result *res = runs[k].res;
    int nstreams = prog->nstreams;
    double origin = ovl__tl_run_origin(res, nranks);
    int panel_top = y, panel_bottom;
    int64_t coll_sum = 0, ov_sum = 0, ops_end = 0;
    lane_ctx lc = {.b = &b, .prog = prog, .seq = NULL, .scale = scale};
    for (int r = 0; r < nranks; r++) {
      if (!overlap_of(&all[k * (size_t)nranks + (size_t)r], &ov, &coll)) {
        b.fail = true;
        break;
      }
      coll_sum += iv_total(&coll);
      ov_sum += iv_total(&ov);
      for (size_t j = 0; j < all[k * (size_t)nranks + (size_t)r].n; j++)
        if (all[k * (size_t)nranks + (size_t)r].s[j].t1 > ops_end)
          ops_end = all[k * (size_t)nranks + (size_t)r].s[j].t1;
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
    ovl__sb_printf(&b, "<text class=\"ph\" x=\"10\" y=\"%d\">", y + 14);
    sb_xml_str(&b, runs[k].label != NULL ? runs[k].label
                                         : ovl_mode_name(runs[k].mode));
    ovl__sb_puts(&b, "</text>");
    /* The iteration is rank 0's barrier to barrier, which also holds
     * what follows the last op (every stream drained, the slowest rank
     * awaited at the end barrier): say where the ops drawn end too. */
    ovl__sb_printf(&b, "<text x=\"%d\" y=\"%d\">ops end at %.3f ms; "
                  "iteration %.3f ms (rank 0, barrier to barrier); "
                  "collectives %.3f ms per rank, %.0f%% of it beside "
                  "compute</text>\n",
              SVG_LEFT, y + 14, (double)ops_end * 1e-6,
              ovl_result_times(res)[ovl_result_trace_iter(res)] * 1e3,
              (double)coll_sum * 1e-6 / nranks,
              coll_sum > 0 ? 100.0 * (double)ov_sum / (double)coll_sum : 0.0);
    y += PANEL_HEAD;
    for (int r = 0; r < nranks && !b.fail; r++) {
      const rank_slices *rs = &all[k * (size_t)nranks + (size_t)r];
      int top = y;
      /* Numbered per rank: ranks that differ issue different ones. */
      int *seq = ovl__tl_comm_seqs(prog, r);
      if (seq == NULL || !overlap_of(rs, &ov, &coll)) {
        free(seq);
        b.fail = true;
        break;
      }
      lc.seq = seq;
      /* The band behind the rank's lanes, then the lanes. */
      draw_intervals(&b, &ov, scale, top - 1,
                     (nstreams + 1) * (LANE_H + LANE_GAP) + OVERLAP_H, "bd");
      for (int lane = 0; lane <= nstreams; lane++) {
        ovl__sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">r%d ",
                  SVG_LEFT - 6, y + LANE_H - 2, r);
        ovl__sb_puts(&b, ovl__tl_lane_name(prog, lane));
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
      y += OVERLAP_H + 2;
      ovl__sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" "
                         "font-size=\"9\">where</text>\n",
                     SVG_LEFT - 6, y + OVERLAP_H);
      draw_where(&b, prog, res, r, origin, scale, y);
      y += OVERLAP_H + RANK_GAP;
      free(seq);
      lc.seq = NULL;
    }
    y -= RANK_GAP;
    svg_axis(&b, y + 4, scale, step_ms, tmax, "time (ms)");
    y += AXIS_H + RANK_GAP;
  }
  ovl__sb_puts(&b, "</svg>\n");
  free(ov.v);
  free(coll.v);
  ovl__tl_free_all(all, nruns * (size_t)nranks);
  free(runs);
  return ovl__tl_finish(&b, text, len, err);
}
