/*
 * Fix hints (docs/ARCHITECTURE.md, "Checks"; docs/ORDERING.md, "The
 * fix"): for each race, an edit of the schedule's text that orders its
 * two accesses; check/fix_check.c holds the re-check that shows it does.
 *
 * A hint is one edit, in one form that a person or a script applies
 * mechanically:
 *
 *   insert STATEMENT before line N
 *   insert STATEMENT and STATEMENT before line N
 *
 * Candidates. The ops a candidate names exist in the form that raced (the
 * sync form has no c_wait_compute / c_wait_comm: ovl__mode_keeps says),
 * in this order of preference:
 *   calc -> comm[R]        c_wait_compute(x, ring_id=R)
 *   comm[R] -> calc        c_wait_comm(x, ring_id=R)
 *   comm[R] -> comm[S]     c_wait_comm(x, ring_id=R) and
 *                          c_wait_compute(x, ring_id=S)
 *   any stream -> another  event_record(x, event=E, stream=first's) and
 *                          stream_wait_event(x, event=E, stream=second's)
 *   comm[R] -> host        c_sync_comm_stream(x, ring_id=R), c_wait_comm
 *                          (the fetch syncs calc), stream_sync
 *   calc -> host           c_sync_calc_stream(x), stream_sync
 *   user stream -> host    stream_sync(x, stream=NAME)
 * A record and its wait sit at the same point: the record captures all
 * that its stream has been given so far, the first access included. E is
 * a name the program does not use (x_ready, x_ready2, ...).
 *
 * Where: the latest point that orders the accesses. Just before the
 * second access, except that the point leaves every repeat block around
 * the second access whose iteration does not hold the first access: it
 * goes before that block's `repeat` line (a wait after a loop, not in
 * it). When the first access is in an earlier iteration of a block
 * around the second (the race is carried from one iteration to the next)
 * the point stays in that block, before the block inside it that holds
 * the second access, or before the second access. Where that point is
 * not just before the second access, the second access's line is also a
 * candidate, after the first point's. Which iteration of which block an
 * op is in comes from its index in the program as bound (op->src) and
 * the program's blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/fix.h"

/* Repeat blocks nest at most 64 deep (lang/lang.h). */
#define FIX_MAX_DEPTH 64

/* ------------------------------------------------------------------ */
/* Names the program uses, for a fresh event name                      */
/* ------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool names_make(const ovl_program *prog, names *nm) {
  size_t k = 0, n = prog->nvars + prog->nevents + prog->nparams +
                    (size_t)prog->nstreams;
  nm->s = malloc((n + 1) * sizeof *nm->s);
  if (nm->s == NULL)
    return false;
  for (size_t i = 0; i < prog->nvars; i++)
    nm->s[k++] = prog->vars[i].name;
  for (size_t i = 0; i < prog->nevents; i++)
    nm->s[k++] = prog->events[i];
  for (size_t i = 0; i < prog->nparams; i++)
    nm->s[k++] = prog->params[i].name;
  for (int i = 0; i < prog->nstreams; i++)
    nm->s[k++] = prog->stream_names[i];
  qsort(nm->s, k, sizeof *nm->s, cmp_str);
  nm->n = k;
  return true;
}

static bool names_has(const names *nm, const char *s) {
  return bsearch(&s, nm->s, nm->n, sizeof *nm->s, cmp_str) != NULL;
}

/* VAR_ready, VAR_ready2, ...: the first the program does not use (an
 * identifier is at most 255 bytes: a long VAR gives fix_ready). */
static void fresh_event(const names *nm, const char *var, char *buf,
                        size_t size) {
  const char *base = strlen(var) <= 200 ? var : "fix";
  snprintf(buf, size, "%s_ready", base);
  for (unsigned k = 2; names_has(nm, buf); k++)
    snprintf(buf, size, "%s_ready%u", base, k);
}

/* ------------------------------------------------------------------ */
/* Repeat blocks: which iteration of which block an op is in            */
/* ------------------------------------------------------------------ */

typedef struct step {
  uint32_t block;
  int64_t iter;
} step;

static bool blocks_make(const ovl_program *prog, blocks *bx) {
  size_t nb = prog->nblocks;
  bx->b = prog->blocks;
  bx->nb = nb;
  bx->first = calloc(nb + 2, sizeof *bx->first);
  bx->kids = malloc((nb + 1) * sizeof *bx->kids);
  if (bx->first == NULL || bx->kids == NULL)
    return false;
  for (size_t k = 0; k < nb; k++) {
    int p = bx->b[k].parent;
    bx->first[(p < 0 ? nb : (size_t)p) + 1]++;
  }
  for (size_t k = 0; k <= nb; k++)
    bx->first[k + 1] += bx->first[k];
  {
    uint32_t *fill = calloc(nb + 1, sizeof *fill);
    if (fill == NULL)
      return false;
    /* Blocks open in order, so each one's children come in order. */
    for (size_t k = 0; k < nb; k++) {
      int p = bx->b[k].parent;
      size_t q = p < 0 ? nb : (size_t)p;
      bx->kids[bx->first[q] + fill[q]++] = (uint32_t)k;
    }
    free(fill);
  }
  return true;
}

static void blocks_free(blocks *bx) {
  free(bx->first);
  free(bx->kids);
}

/* The blocks op `x` of the program as bound is in, outermost first, and
 * the iteration of each; returns how many. */
static int decode(const blocks *bx, uint64_t x, step *path) {
  size_t cur = bx->nb;
  uint64_t base = 0;
  int d = 0;
  while (d < FIX_MAX_DEPTH) {
    uint32_t lo = bx->first[cur], hi = bx->first[cur + 1];
    const ovl__block *c;
    uint64_t start, iter;
    /* The last child that starts at or before x. */
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo) / 2;
      if (base + bx->b[bx->kids[mid]].off <= x)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == bx->first[cur])
      return d;
    c = &bx->b[bx->kids[lo - 1]];
    start = base + c->off;
    if (x >= start + c->n * (uint64_t)c->count)
      return d;
    iter = (x - start) / c->n;
    path[d].block = bx->kids[lo - 1];
    path[d].iter = (int64_t)iter;
    d++;
    base = start + iter * c->n;
    cur = path[d - 1].block;
  }
  return d;
}

/* The line to insert before: the latest point after op i1 and before op
 * i2 (indices in `prog`) that is in no repeat block around i2 whose
 * iteration does not hold i1, unless i1 is in an earlier iteration of the
 * same block (then in it). */
static int place(const ovl_program *prog, const blocks *bx, size_t i1,
                 size_t i2) {
  step p1[FIX_MAX_DEPTH], p2[FIX_MAX_DEPTH];
  int d1, d2, m = 0, j;
  if (bx->nb == 0)
    return prog->ops[i2].line;
  d1 = decode(bx, prog->ops[i1].src, p1);
  d2 = decode(bx, prog->ops[i2].src, p2);
  while (m < d1 && m < d2 && p1[m].block == p2[m].block &&
         p1[m].iter == p2[m].iter)
    m++;
  /* The same block, an earlier iteration: carried by that block. */
  j = m < d1 && m < d2 && p1[m].block == p2[m].block ? m + 1 : m;
  return j < d2 ? bx->b[p2[j].block].line : prog->ops[i2].line;
}

/* ------------------------------------------------------------------ */
/* Candidates                                                          */
/* ------------------------------------------------------------------ */

static bool is_comm(const ovl_program *prog, int s) {
  return s >= OVL_STREAM_COMM(0) && s < OVL_STREAM_COMM(prog->nrings);
}

/* The attributes that name stream s: "stream=calc", "stream=comm,
 * ring_id=R" or "stream=NAME". */
static const char *stream_attrs(const ovl_program *prog, int s, char *buf,
                                size_t size) {
  if (is_comm(prog, s))
    snprintf(buf, size, "stream=comm, ring_id=%d", s - OVL_STREAM_COMM(0));
  else
    snprintf(buf, size, "stream=%s", ovl__stream_name(prog, s));
  return buf;
}

/* The ops a candidate may name; which of them a form has is a mask of
 * their bits (kept_ops). */
enum {
  OP_WAIT_COMPUTE,
  OP_WAIT_COMM,
  OP_SYNC_CALC,
  OP_SYNC_COMM,
  OP_STREAM_SYNC,
  OP_RECORD,
  OP_WAIT_EVENT,
  N_FIX_OPS
};
static const char *const fix_op_names[N_FIX_OPS] = {
    "c_wait_compute",     "c_wait_comm", "c_sync_calc_stream",
    "c_sync_comm_stream", "stream_sync", "event_record",
    "stream_wait_event"};

static unsigned kept_ops(const ovl_program *prog) {
  unsigned mask = 0;
  for (int k = 0; k < N_FIX_OPS; k++) {
    const ovl__opdef *def = ovl__opdef_find(fix_op_names[k]);
    if (def != NULL && ovl__mode_keeps(prog->mode, def))
      mask |= 1u << k;
  }
  return mask;
}

edit ovl__fix_cand(const cands *c, int k) {
  edit e = {0, NULL};
  if (k < c->n) {
    e.line = c->lines[k / c->nops];
    e.ops = &c->ops[k % c->nops];
  }
  return e;
}

/* Room for one more op candidate of `nstmts` statements that name the ops
 * of `bits`, if the form has them and fewer than `want` are made. */
static stmts *next_ops(cands *c, int want, unsigned kept, unsigned bits,
                       int nstmts) {
  stmts *e;
  if (c->nops >= want || c->nops >= FIX_MAX_CANDS / 2 || (kept & bits) != bits)
    return NULL;
  e = &c->ops[c->nops++];
  e->n = nstmts;
  return e;
}

#define BIT(op) (1u << (op))
#define STMT(e, k, ...) snprintf((e)->s[k], sizeof (e)->s[k], __VA_ARGS__)

/* Whether ops i and j are in one group instance. */
bool ovl__fix_same_group(const ovl_program *prog, size_t i, size_t j) {
  return prog->ops[i].group != 0 && prog->ops[i].group == prog->ops[j].group;
}

/* Where to insert "before op i": its line, or for an op inside a group
 * (nothing may go between a group's ops) the line of its `group {`: from
 * the text, the nearest line above the group's first op that holds a
 * statement (it is `group {`: one statement per line, blank lines and
 * comments between); without the text, the line above the first op. */
static int before_line(const hinter *h, size_t i) {
  const ovl_program *prog = h->prog;
  size_t j = i;
  int first;
  if (prog->ops[i].group == 0)
    return prog->ops[i].line;
  while (j > 0 && prog->ops[j - 1].group == prog->ops[i].group)
    j--;
  first = prog->ops[j].line;
  for (int l = first - 1; h->line_at != NULL && l >= 1; l--) {
    size_t a = h->line_at[l - 1];
    size_t b = (size_t)l < h->nlines ? h->line_at[l] : h->len;
    while (a < b && (h->text[a] == ' ' || h->text[a] == '\t'))
      a++;
    if (a >= b || h->text[a] == '\n' || h->text[a] == '\r' ||
        h->text[a] == '#')
      continue;
    if (b - a >= 5 && memcmp(h->text + a, "group", 5) == 0)
      return l;
    break;
  }
  return first > 1 ? first - 1 : first;
}

/* The candidates of race r of h->prog (whose form has the ops of
 * h->kept), in order of preference; at most `want` ops. None for two ops
 * of one group (nothing goes between them). */
void ovl__fix_candidates(const hinter *h, const race_rec *r, int want,
                         cands *c) {
  const ovl_program *prog = h->prog;
  unsigned kept = h->kept;
  const names *nm = &h->nm;
  int s1 = r->a[0].stream, s2 = r->a[1].stream;
  int r1 = s1 - OVL_STREAM_COMM(0), r2 = s2 - OVL_STREAM_COMM(0);
  char ev[300], at1[300], at2[300], x[300];
  stmts *e;
  c->n = c->nops = 0;
  if (ovl__fix_same_group(prog, r->a[0].op, r->a[1].op))
    return;
  /* The latest point, then just before the second access (before its
   * group, for an op of a group). */
  c->lines[0] = place(prog, &h->bx, r->a[0].op, r->a[1].op);
  if (c->lines[0] == prog->ops[r->a[1].op].line)
    c->lines[0] = before_line(h, r->a[1].op);
  c->lines[1] = before_line(h, r->a[1].op);
  c->nlines = c->lines[1] != c->lines[0] ? 2 : 1;
  /* The variable, as the new ops' (dependency) input, where it is declared
   * before both points: a wait at the top of a loop body that declares it
   * further down would name an undefined variable. Without it the ops
   * order the same streams. */
  int first_line = c->lines[0] < c->lines[1] ? c->lines[0] : c->lines[1];
  if (prog->vars[r->var].line < first_line)
    snprintf(x, sizeof x, "%s, ", r->var_name);
  else
    x[0] = '\0';
  if (s2 == OVL_STREAM_HOST) {
    /* The host reads (a fetch, which syncs calc only): sync the stream. */
    if (is_comm(prog, s1)) {
      if ((e = next_ops(c, want, kept, BIT(OP_SYNC_COMM), 1)) != NULL)
        STMT(e, 0, "c_sync_comm_stream(%sring_id=%d)", x, r1);
      if ((e = next_ops(c, want, kept, BIT(OP_WAIT_COMM), 1)) != NULL)
        STMT(e, 0, "c_wait_comm(%sring_id=%d)", x, r1);
    } else if (s1 == OVL_STREAM_CALC &&
               (e = next_ops(c, want, kept, BIT(OP_SYNC_CALC), 1)) != NULL) {
      STMT(e, 0, "c_sync_calc_stream(%.*s)",
           x[0] != '\0' ? (int)strlen(x) - 2 : 0, x);
    }
    if ((e = next_ops(c, want, kept, BIT(OP_STREAM_SYNC), 1)) != NULL)
      STMT(e, 0, "stream_sync(%s%s)", x,
           stream_attrs(prog, s1, at1, sizeof at1));
  } else {
    if (s1 == OVL_STREAM_CALC && is_comm(prog, s2)) {
      if ((e = next_ops(c, want, kept, BIT(OP_WAIT_COMPUTE), 1)) != NULL)
        STMT(e, 0, "c_wait_compute(%sring_id=%d)", x, r2);
    } else if (is_comm(prog, s1) && s2 == OVL_STREAM_CALC) {
      if ((e = next_ops(c, want, kept, BIT(OP_WAIT_COMM), 1)) != NULL)
        STMT(e, 0, "c_wait_comm(%sring_id=%d)", x, r1);
    } else if (is_comm(prog, s1) && is_comm(prog, s2)) {
      /* calc waits for comm[R], then comm[S] for calc. */
      if ((e = next_ops(c, want, kept,
                        BIT(OP_WAIT_COMM) | BIT(OP_WAIT_COMPUTE), 2)) != NULL) {
        STMT(e, 0, "c_wait_comm(%sring_id=%d)", x, r1);
        STMT(e, 1, "c_wait_compute(%sring_id=%d)", x, r2);
      }
    }
    if ((e = next_ops(c, want, kept, BIT(OP_RECORD) | BIT(OP_WAIT_EVENT),
                      2)) != NULL) {
      fresh_event(nm, r->var_name, ev, sizeof ev);
      STMT(e, 0, "event_record(%sevent=%s, %s)", x, ev,
           stream_attrs(prog, s1, at1, sizeof at1));
      STMT(e, 1, "stream_wait_event(%sevent=%s, %s)", x, ev,
           stream_attrs(prog, s2, at2, sizeof at2));
    }
  }
  c->n = c->nops * c->nlines;
}

/* "insert S before line N", "insert S and T before line N". */
char *ovl__fix_edit_text(const edit *e) {
  char buf[FIX_MAX_STMTS * FIX_STMT_MAX + 64];
  if (e->ops->n == 1)
    snprintf(buf, sizeof buf, "insert %s before line %d", e->ops->s[0],
             e->line);
  else
    snprintf(buf, sizeof buf, "insert %s and %s before line %d",
             e->ops->s[0], e->ops->s[1], e->line);
  return ovl__strdup(buf);
}

/* What a race with no candidate gets: two ops of one group (every form
 * has the generic stream ops, so no other race lacks one). */
char *ovl__fix_no_candidate(const hinter *h, const race_rec *r) {
  char buf[256];
  if (ovl__fix_same_group(h->prog, r->a[0].op, r->a[1].op))
    snprintf(buf, sizeof buf,
             "move line %d or line %d out of the group at line %d (the "
             "sends and receives of a group are not ordered)",
             r->a[0].line, r->a[1].line, before_line(h, r->a[0].op));
  else
    snprintf(buf, sizeof buf, "order line %d before line %d", r->a[0].line,
             r->a[1].line);
  return ovl__strdup(buf);
}

/* Set race r's fix: `text` (taken), checked or not and why. */
bool ovl__fix_set(race_rec *r, char *text, bool checked, const char *why) {
  return ovl__fix_slot_set(&r->fix, text, checked, why) && text != NULL;
}

void ovl__fix_hinter_free(hinter *h) {
  blocks_free(&h->bx);
  free(h->nm.s);
  free(h->line_at);
}

/* `text` (NULL: none) is the schedule's, of `len` bytes. */
bool ovl__fix_hinter_make(hinter *h, const ovl_program *prog,
                          const char *text, size_t len) {
  memset(h, 0, sizeof *h);
  h->prog = prog;
  h->kept = kept_ops(prog);
  if (!blocks_make(prog, &h->bx) || !names_make(prog, &h->nm))
    return false;
  if (text != NULL) {
    bool groups = false;
    for (size_t i = 0; i < prog->nops && !groups; i++)
      groups = prog->ops[i].group != 0;
    if (!groups)
      return true; /* no group: the text is never needed */
    h->text = text;
    h->len = len;
    h->nlines = 1;
    for (size_t k = 0; k < len; k++)
      h->nlines += text[k] == '\n';
    h->line_at = malloc(h->nlines * sizeof *h->line_at);
    if (h->line_at == NULL)
      return false;
    h->line_at[0] = 0;
    for (size_t k = 0, l = 1; k < len; k++)
      if (text[k] == '\n')
        h->line_at[l++] = k + 1;
  }
  return true;
}

ovl_status ovl__fix_hints(const ovl_program *prog, ovl_races *res,
                          const char *why, ovl_error *err) {
  hinter h;
  cands *c = malloc(sizeof *c);
  bool ok = c != NULL && ovl__fix_hinter_make(&h, prog, NULL, 0);
  for (size_t i = 0; ok && i < res->list.n; i++) {
    race_rec *r = ovl__races_at(res, i);
    ovl__fix_candidates(&h, r, 1, c);
    edit e = ovl__fix_cand(c, 0);
    ok = ovl__fix_set(r,
                      c->n > 0 ? ovl__fix_edit_text(&e)
                               : ovl__fix_no_candidate(&h, r),
                      false, why);
  }
  if (c != NULL)
    ovl__fix_hinter_free(&h);
  free(c);
  return ok ? OVL_OK : ovl__err(err, OVL_ENOMEM, "race check: out of memory");
}

/* The public race check: the checker's report (check/race.c), each race
 * with its hint, not re-checked here, since that needs the schedule
 * (ovl_races_check_fixes). */
ovl_status ovl_race_check(const ovl_program *prog, ovl_races **out,
                          ovl_error *err) {
  ovl_status st = ovl__race_check(prog, out, err);
  if (st != OVL_OK)
    return st;
  st = ovl__fix_hints(prog, *out, "not checked: no schedule given", err);
  if (st != OVL_OK) {
    ovl_races_free(*out);
    *out = NULL;
  }
  return st;
}
