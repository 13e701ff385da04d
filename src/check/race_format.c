/*
 * The race report (check/races.h) written out: as text, one race after
 * another with its accesses, note and fix, then the closing line; and as
 * JSON (ovl_races_format).
 */
#include <stdio.h>

#include "check/races.h"

/* "rank 0", "ranks 0-1", "ranks 0, 2-3". */
static void fmt_ranks(ovl__sbuf *b, const race_rec *rr) {
  bool first = true;
  ovl__sb_puts(b, rr->nranks == 1 ? "rank " : "ranks ");
  for (int k = 0; k < rr->nranks;) {
    int e = k;
    while (e + 1 < rr->nranks && rr->ranks[e + 1] == rr->ranks[e] + 1)
      e++;
    ovl__sb_printf(b, "%s%d", first ? "" : ", ", rr->ranks[k]);
    if (e > k)
      ovl__sb_printf(b, "-%d", rr->ranks[e]);
    first = false;
    k = e + 1;
  }
}

static void fmt_human(ovl__sbuf *b, const void *res,
                      const ovl_program *prog, const char *file) {
  const ovl_races *r = res;
  (void)prog;
  for (size_t i = 0; i < r->list.n; i++) {
    const race_rec *rr = ovl__races_at(r, i);
    int w0 = snprintf(NULL, 0, "%s:%d", file, rr->a[0].line);
    int w1 = snprintf(NULL, 0, "%s:%d", file, rr->a[1].line);
    int w = w0 > w1 ? w0 : w1;
    ovl__sb_printf(b, "race %zu: '%s' on ", i + 1, rr->var_name);
    fmt_ranks(b, rr);
    if (rr->occurrences > 1)
      ovl__sb_printf(b, " (%llu times in the expanded program)",
                (unsigned long long)rr->occurrences);
    ovl__sb_printf(b, "\n");
    for (int k = 0; k < 2; k++) {
      const ovl_race_access *a = &rr->a[k];
      ovl__sb_printf(b, "  %-6s %-16s %s:%d%*s  %s\n", a->write ? "write" : "read",
                a->op_name, file, a->line, w - (k ? w1 : w0), "",
                a->stream_name);
    }
    if (rr->note != NULL)
      ovl__sb_printf(b, "  note: %s\n", rr->note);
    ovl__findings_forms_line(b, rr->forms, rr->forms_checked);
    ovl__findings_fix_line(b, rr->fix.text, rr->fix.checked, rr->fix.why);
  }
  if (r->list.more > 0)
    ovl__sb_printf(b,
              "and %llu more unordered pair%s not listed (the list stops at "
              "%d races)\n",
              (unsigned long long)r->list.more,
              r->list.more == 1 ? "" : "s", OVL_RACES_LIST_MAX);
  if (r->list.n == 0 && r->list.more == 0)
    ovl__sb_printf(b, "no races in %s (%zu op%s checked)\n", file, r->nops,
              r->nops == 1 ? "" : "s");
  else
    ovl__sb_printf(b, "%zu race%s in %s (%d rank%s)\n", r->list.n,
              r->list.n == 1 ? "" : "s", file, r->nranks,
              r->nranks == 1 ? "" : "s");
}

static void fmt_json_access(ovl__sbuf *b, const ovl_race_access *a) {
  ovl__sb_printf(b, "{\"line\":%d,\"col\":%d,\"op\":", a->line, a->col);
  ovl__sb_json_str(b, a->op_name);
  ovl__sb_printf(b, ",\"stream\":");
  ovl__sb_json_str(b, a->stream_name);
  ovl__sb_printf(b, ",\"access\":\"%s\"}", a->write ? "write" : "read");
}

static void fmt_json(ovl__sbuf *b, const void *res, const ovl_program *prog,
                     const char *file) {
  const ovl_races *r = res;
  (void)prog;
  ovl__sb_printf(b, "{\"schedule\":");
  ovl__sb_json_str(b, file);
  ovl__sb_printf(b, ",\"ranks\":%d,\"ops\":%zu,\"races\":[", r->nranks, r->nops);
  for (size_t i = 0; i < r->list.n; i++) {
    const race_rec *rr = ovl__races_at(r, i);
    ovl__sb_printf(b, "%s{\"var\":", i ? "," : "");
    ovl__sb_json_str(b, rr->var_name);
    ovl__sb_printf(b, ",\"ranks\":[");
    for (int k = 0; k < rr->nranks; k++)
      ovl__sb_printf(b, "%s%d", k ? "," : "", rr->ranks[k]);
    ovl__sb_printf(b, "],\"first\":");
    fmt_json_access(b, &rr->a[0]);
    ovl__sb_printf(b, ",\"second\":");
    fmt_json_access(b, &rr->a[1]);
    ovl__findings_fix_json(b, rr->fix.text, rr->fix.checked, rr->fix.why);
    ovl__sb_printf(b, ",\"note\":");
    if (rr->note != NULL)
      ovl__sb_json_str(b, rr->note);
    else
      ovl__sb_puts(b, "null");
    ovl__sb_printf(b, ",\"occurrences\":%llu,\"forms\":",
              (unsigned long long)rr->occurrences);
    ovl__findings_forms_json(b, rr->forms);
    ovl__sb_puts(b, "}");
  }
  ovl__sb_printf(b, "],\"count\":%zu,\"more\":%llu}\n", r->list.n,
            (unsigned long long)r->list.more);
}

ovl_status ovl_races_format(const ovl_races *r, const ovl_program *prog,
                            int json, char **text, ovl_error *err) {
  return ovl__findings_format(r, prog, json ? fmt_json : fmt_human,
                              "ovl_races_format", "race report", text, err);
}
