/*
 * Fix hints (docs/ARCHITECTURE.md, "Checks"; README, "Finding ordering
 * bugs"): for each race, an edit of the schedule's text that orders its
 * two accesses, and the re-check that shows it does.
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
 *
 * The re-check (ovl_races_check_fixes): each candidate is applied to a
 * copy of the text, which is parsed, bound as the program was, made into
 * the same form and race-checked; the first with the race gone and no
 * race that was not there before is the fix. Races of the edited program
 * are matched with the original's by source position, with the lines
 * below the insertion moved back. An edit's outcome is kept, so that
 * races sharing a fix cost one re-check; the work is bounded (FIX_BUDGET).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/races.h"
#include "lang/schedule.h"

/* Work of re-checks for one report: an op of an edited program, or 4
 * bytes of its text, is one unit (about 16 M units: 3 s on a 2-core
 * machine). */
#define FIX_BUDGET ((uint64_t)1 << 24)
#define FIX_TEXT_BYTES_PER_UNIT 4
/* Statements of an edit, candidates of a race, and their text. */
#define FIX_MAX_STMTS 2
#define FIX_MAX_CANDS 8
#define FIX_STMT_MAX 1024
/* Repeat blocks nest at most 64 deep (lang/lang.h). */
#define FIX_MAX_DEPTH 64

/* The statements of a candidate, and a candidate: them at a line. */
typedef struct stmts {
  int n;
  char s[FIX_MAX_STMTS][FIX_STMT_MAX];
} stmts;

typedef struct edit {
  int line; /* insert before this line */
  const stmts *ops;
} edit;

/* ------------------------------------------------------------------ */
/* Names the program uses, for a fresh event name                      */
/* ------------------------------------------------------------------ */

typedef struct names {
  const char **s;
  size_t n;
} names;

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

/* The blocks of a program, each with its children (kids[first[k] ..
 * first[k + 1]), in order; the program itself is block nblocks). */
typedef struct blocks {
  const ovl__block *b;
  size_t nb;
  uint32_t *first, *kids;
} blocks;

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

/* The candidates of a race: each of its ops (in order) at its first line,
 * then each at its second line (when it has one): n of them. */
typedef struct cands {
  stmts ops[FIX_MAX_CANDS / 2];
  int nops;
  int lines[2];
  int nlines;
  int n;
} cands;

static edit cand(const cands *c, int k) {
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

/* The context of the hints of one report: the program (a form), the ops
 * its form has, its blocks and names, and the schedule's text when there
 * is one (to find a group's line). */
typedef struct hinter {
  const ovl_program *prog;
  unsigned kept; /* kept_ops */
  blocks bx;
  names nm;
  const char *text;
  size_t len;
  size_t *line_at; /* offset of line l + 1 (0-based l), nlines of them */
  size_t nlines;
} hinter;

/* Whether ops i and j are in one group instance. */
static bool same_group(const ovl_program *prog, size_t i, size_t j) {
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
static void candidates(const hinter *h, const race_rec *r, int want,
                       cands *c) {
  const ovl_program *prog = h->prog;
  unsigned kept = h->kept;
  const names *nm = &h->nm;
  int s1 = r->a[0].stream, s2 = r->a[1].stream;
  int r1 = s1 - OVL_STREAM_COMM(0), r2 = s2 - OVL_STREAM_COMM(0);
  char ev[300], at1[300], at2[300], x[300];
  stmts *e;
  c->n = c->nops = 0;
  if (same_group(prog, r->a[0].op, r->a[1].op))
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
static char *edit_text(const edit *e) {
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
static char *no_candidate(const hinter *h, const race_rec *r) {
  char buf[256];
  if (same_group(h->prog, r->a[0].op, r->a[1].op))
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
static bool set_fix(race_rec *r, char *text, bool checked, const char *why) {
  free(r->fix);
  free(r->fix_why);
  r->fix = text;
  r->fix_checked = checked;
  r->fix_why = why != NULL ? ovl__strdup(why) : NULL;
  return text != NULL && (why == NULL || r->fix_why != NULL);
}

static void hinter_free(hinter *h) {
  blocks_free(&h->bx);
  free(h->nm.s);
  free(h->line_at);
}

/* `text` (NULL: none) is the schedule's, of `len` bytes. */
static bool hinter_make(hinter *h, const ovl_program *prog, const char *text,
                        size_t len) {
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
  bool ok = c != NULL && hinter_make(&h, prog, NULL, 0);
  for (size_t i = 0; ok && i < res->list.n; i++) {
    race_rec *r = ovl__races_at(res, i);
    candidates(&h, r, 1, c);
    edit e = cand(c, 0);
    ok = set_fix(r, c->n > 0 ? edit_text(&e) : no_candidate(&h, r), false,
                 why);
  }
  if (c != NULL)
    hinter_free(&h);
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

/* ------------------------------------------------------------------ */
/* The re-check                                                        */
/* ------------------------------------------------------------------ */

/* A race by source position, the lines of an edited program moved back
 * to the original's. */
static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;
}

static uint64_t hash_int(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

/* Line `l` of an edited text with k lines inserted before line `at`, in
 * the original text. */
static int unshift(int l, int at, int k) { return l >= at + k ? l - k : l; }

static uint64_t race_hash(const race_rec *r, int at, int k) {
  uint64_t h = hash_str(0xcbf29ce484222325ull, r->var_name);
  for (int j = 0; j < 2; j++) {
    const ovl_race_access *a = &r->a[j];
    h = hash_int(h, (uint64_t)(uint32_t)unshift(a->line, at, k) << 32 |
                        (uint32_t)a->col);
    h = hash_int(h, (uint64_t)a->write);
    h = hash_str(h, a->stream_name);
    h = hash_str(h, a->op_name);
  }
  return h;
}

/* Whether race e (of the edited program) is race o (of the original). */
static bool race_same(const race_rec *o, const race_rec *e, int at, int k) {
  if (strcmp(o->var_name, e->var_name) != 0)
    return false;
  for (int j = 0; j < 2; j++) {
    const ovl_race_access *x = &o->a[j], *y = &e->a[j];
    if (x->line != unshift(y->line, at, k) || x->col != y->col ||
        x->write != y->write || strcmp(x->stream_name, y->stream_name) != 0 ||
        strcmp(x->op_name, y->op_name) != 0)
      return false;
  }
  return true;
}

/* What an edit did: which of the original races are gone (a bit each),
 * whether a race appeared, or whether the edit could not be checked (it
 * did not parse or bind, or the edited report lists too few races). */
typedef struct outcome {
  uint64_t key;
  int line;
  char *text; /* the edit's text: the key, with line */
  uint64_t *gone;
  bool added, unusable;
} outcome;

typedef struct fixer {
  const ovl_program *form;
  const ovl_schedule *S;
  const ovl_bind_opts *opts;
  ovl_races *res;
  const char *text;
  size_t len;
  /* The original races by position: index + 1, open addressing. */
  uint32_t *table;
  size_t tcap;
  size_t words; /* of a `gone` set */
  /* Outcomes of the edits tried, by their text: index + 1. */
  outcome *out;
  size_t nout, capout;
  uint32_t *otable;
  size_t ocap;
  uint64_t spent;
} fixer;

static void fixer_free(fixer *F) {
  for (size_t i = 0; i < F->nout; i++) {
    free(F->out[i].text);
    free(F->out[i].gone);
  }
  free(F->out);
  free(F->otable);
  free(F->table);
}

static bool fixer_index(fixer *F) {
  size_t cap = 16;
  while (cap < 2 * F->res->list.n + 2)
    cap *= 2;
  F->tcap = cap;
  F->table = calloc(cap, sizeof *F->table);
  if (F->table == NULL)
    return false;
  for (size_t i = 0; i < F->res->list.n; i++) {
    size_t j = race_hash(ovl__races_at(F->res, i), 0, 0) & (cap - 1);
    while (F->table[j] != 0)
      j = (j + 1) & (cap - 1);
    F->table[j] = (uint32_t)(i + 1);
  }
  F->words = (F->res->list.n + 63) / 64;
  return true;
}

/* The original race that race e of an edited program is, or -1. */
static long find_race(const fixer *F, const race_rec *e, int at, int k) {
  size_t j = race_hash(e, at, k) & (F->tcap - 1);
  for (; F->table[j] != 0; j = (j + 1) & (F->tcap - 1))
    if (race_same(ovl__races_at(F->res, F->table[j] - 1), e, at, k))
      return (long)F->table[j] - 1;
  return -1;
}

/* The text with edit e applied: its statements as lines (indented as line
 * e->line is) just before that line. NULL when out of memory; *len set. */
static char *apply(const fixer *F, const edit *e, size_t *len) {
  const char *t = F->text, *end = F->text + F->len, *p = t;
  size_t off, ind = 0, add = 0;
  char *out, *q;
  for (int l = 1; l < e->line && p < end; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl != NULL ? nl + 1 : end;
  }
  off = (size_t)(p - t);
  while (off + ind < F->len && (t[off + ind] == ' ' || t[off + ind] == '\t'))
    ind++;
  /* A last line without its newline gets one before the insertion. */
  bool nl_first = off == F->len && F->len > 0 && t[F->len - 1] != '\n';
  for (int k = 0; k < e->ops->n; k++)
    add += ind + strlen(e->ops->s[k]) + 1;
  *len = F->len + add + (nl_first ? 1 : 0);
  if ((out = malloc(*len + 1)) == NULL)
    return NULL;
  memcpy(out, t, off);
  q = out + off;
  if (nl_first)
    *q++ = '\n';
  for (int k = 0; k < e->ops->n; k++) {
    size_t n = strlen(e->ops->s[k]);
    memcpy(q, t + off, ind);
    q += ind;
    memcpy(q, e->ops->s[k], n);
    q += n;
    *q++ = '\n';
  }
  memcpy(q, t + off, F->len - off);
  return out;
}

/* Re-check edit e into *o. Errors: out of memory, or a failure of the
 * form or its check (an edit that does not parse or bind is unusable). */
static ovl_status recheck(fixer *F, const edit *e, outcome *o,
                          ovl_error *err) {
  ovl_schedule *s = NULL;
  ovl_program *p = NULL;
  ovl_races *r2 = NULL;
  ovl_error e2 = {0};
  ovl_status st;
  size_t len;
  char *text = apply(F, e, &len);
  int k = e->ops->n;
  if (text == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  F->spent += len / FIX_TEXT_BYTES_PER_UNIT;
  o->gone = calloc(F->words + 1, sizeof *o->gone);
  if (o->gone == NULL) {
    free(text);
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  }
  if (ovl__schedule_parse_owned(text, len, ovl_schedule_filename(F->S), &s,
                                 &e2) !=
          OVL_OK ||
      ovl_schedule_bind(s, F->opts, &p, &e2) != OVL_OK) {
    ovl_schedule_free(s);
    o->unusable = true;
    return OVL_OK;
  }
  ovl_schedule_free(s);
  F->spent += p->nops;
  st = ovl__program_transform_inplace(p, F->form->mode, err);
  if (st == OVL_OK)
    st = ovl__race_check(p, &r2, err);
  ovl_program_free(p);
  if (st != OVL_OK)
    return st;
  if (r2->list.more > 0)
    o->unusable = true;
  for (size_t i = 0; i < F->words; i++)
    o->gone[i] = ~(uint64_t)0;
  for (size_t i = 0; i < r2->list.n; i++) {
    long j = find_race(F, ovl__races_at(r2, i), e->line, k);
    if (j < 0)
      o->added = true;
    else
      o->gone[j / 64] &= ~((uint64_t)1 << (j % 64));
  }
  ovl_races_free(r2);
  return OVL_OK;
}

/* The outcome of edit e: kept from an earlier race, or re-checked now
 * (NULL in *o when the budget is spent). */
static ovl_status outcome_of(fixer *F, const edit *e, const outcome **o,
                             ovl_error *err) {
  char *text = edit_text(e);
  uint64_t key;
  size_t j;
  outcome *n;
  ovl_status st;
  *o = NULL;
  if (text == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  key = hash_str(0xcbf29ce484222325ull, text);
  for (j = key & (F->ocap - 1); F->ocap > 0 && F->otable[j] != 0;
       j = (j + 1) & (F->ocap - 1)) {
    const outcome *c = &F->out[F->otable[j] - 1];
    if (c->key == key && strcmp(c->text, text) == 0) {
      free(text);
      *o = c;
      return OVL_OK;
    }
  }
  if (F->spent >= FIX_BUDGET) {
    free(text);
    return OVL_OK;
  }
  if (F->nout == F->capout || 2 * (F->nout + 1) > F->ocap) {
    /* Grow both; the table is rebuilt. */
    size_t ncap = F->capout ? 2 * F->capout : 16;
    outcome *no = realloc(F->out, ncap * sizeof *no);
    uint32_t *nt = calloc(2 * ncap, sizeof *nt);
    if (no != NULL)
      F->out = no;
    if (no == NULL || nt == NULL) {
      free(nt);
      free(text);
      return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
    }
    F->capout = ncap;
    free(F->otable);
    F->otable = nt;
    F->ocap = 2 * ncap;
    for (size_t i = 0; i < F->nout; i++) {
      size_t q = F->out[i].key & (F->ocap - 1);
      while (F->otable[q] != 0)
        q = (q + 1) & (F->ocap - 1);
      F->otable[q] = (uint32_t)(i + 1);
    }
  }
  n = &F->out[F->nout++];
  memset(n, 0, sizeof *n);
  n->key = key;
  n->line = e->line;
  n->text = text;
  if ((st = recheck(F, e, n, err)) != OVL_OK)
    return st;
  for (j = key & (F->ocap - 1); F->otable[j] != 0; j = (j + 1) & (F->ocap - 1))
    ;
  F->otable[j] = (uint32_t)F->nout;
  *o = n;
  return OVL_OK;
}

/* Race i: its candidates re-checked in order until one works. */
static ovl_status check_race(fixer *F, const hinter *h, size_t i, cands *c,
                             ovl_error *err) {
  race_rec *r = ovl__races_at(F->res, i);
  int tried = 0, unbound = 0, chosen = -1;
  bool removed = false, budget = false;
  char why[160];
  ovl_status st;
  candidates(h, r, FIX_MAX_CANDS / 2, c);
  for (int k = 0; k < c->n && chosen < 0; k++) {
    const outcome *o;
    edit e = cand(c, k);
    if ((st = outcome_of(F, &e, &o, err)) != OVL_OK)
      return st;
    if (o == NULL) {
      budget = true;
      break;
    }
    tried++;
    unbound += o->unusable;
    if (o->unusable || (o->gone[i / 64] >> (i % 64) & 1) == 0)
      continue;
    removed = true;
    if (!o->added)
      chosen = k;
  }
  if (chosen >= 0)
    why[0] = '\0';
  else if (c->n == 0 && same_group(F->form, r->a[0].op, r->a[1].op))
    snprintf(why, sizeof why, "no edit orders two ops of one group");
  else if (c->n == 0)
    snprintf(why, sizeof why, "no candidate in this form");
  else if (budget)
    snprintf(why, sizeof why,
             "not checked: the re-check budget is spent (%d of %d "
             "candidates tried)",
             tried, c->n);
  else if (removed)
    snprintf(why, sizeof why,
             "each candidate that removed the race brought a new one (%d "
             "tried)",
             tried);
  else if (unbound > 0)
    snprintf(why, sizeof why,
             "no candidate removed the race (%d tried, %d of them could not "
             "be re-checked)",
             tried, unbound);
  else
    snprintf(why, sizeof why, "no candidate removed the race (%d tried)",
             tried);
  {
    edit e = cand(c, chosen >= 0 ? chosen : 0);
    if (!set_fix(r, c->n > 0 ? edit_text(&e) : no_candidate(h, r),
                 chosen >= 0,
                 chosen >= 0 ? NULL : why))
      return ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  }
  return OVL_OK;
}
ovl_status ovl_races_check_fixes(ovl_races *r, const ovl_program *form,
                                 const ovl_schedule *s,
                                 const ovl_bind_opts *opts, ovl_error *err) {
  fixer F;
  hinter h;
  cands *c;
  ovl_status st = OVL_OK;
  if (r == NULL || form == NULL || s == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_races_check_fixes: bad argument");
  if (r->nops != form->nops)
    return ovl__err(err, OVL_EINVAL,
                    "ovl_races_check_fixes: the report is not of this "
                    "program (%zu ops checked, the program has %zu)",
                    r->nops, form->nops);
  if (r->list.n == 0)
    return OVL_OK;
  if (r->list.more > 0)
    return ovl__fix_hints(form, r, "not checked: more races than are listed",
                          err);
  memset(&F, 0, sizeof F);
  F.form = form;
  F.S = s;
  F.opts = opts;
  F.res = r;
  F.text = ovl__schedule_text(s, &F.len);
  c = malloc(sizeof *c);
  if (c == NULL || !hinter_make(&h, form, F.text, F.len) || !fixer_index(&F))
    st = ovl__err(err, OVL_ENOMEM, "fix check: out of memory");
  for (size_t i = 0; st == OVL_OK && i < r->list.n; i++)
    st = check_race(&F, &h, i, c, err);
  if (c != NULL)
    hinter_free(&h);
  free(c);
  fixer_free(&F);
  return st;
}
