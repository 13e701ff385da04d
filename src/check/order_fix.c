/*
 * The candidate fixes of mismatches and deadlocks (check/order_fix.h;
 * check/order_fix_check.c re-checks them). Each is an edit of the
 * schedule's text (check/edit.h) made from the finding, the program as
 * bound and what each line of the text holds:
 *
 * - A collective some ranks skip (its ranks= leaves them out, so the k-th
 *   collective of the ring differs between ranks, or some never issue
 *   it): widen it to every rank ("remove ranks=[...] from line N"); then
 *   the same, deleting the ops near it that only the skipping ranks run
 *   and that write what the collective writes (their stand-in for it).
 * - Collectives in different orders on different ranks (one ring, or two
 *   rings through host syncs or a shared stream): move the collective
 *   that should come first, with the run of lines around it that run on
 *   the same ranks, before the run holding what that rank does instead
 *   ("move lines N-K before line M").
 * - An ungrouped send and receive that wait for each other (each rank
 *   sends first, or receives first): put the run of lone sends and
 *   receives holding both in one group ("put lines N-K in one group"),
 *   so that they progress together.
 *
 * A run is the statements next to each other in one block (no `{` or
 * `}` between) whose ops run on the same ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/order_fix.h"

/* ------------------------------------------------------------------ */
/* Lines and runs                                                      */
/* ------------------------------------------------------------------ */

bool ovl__order_context_make(ocontext *c, const ovl_program *bound,
                             const ovl__match *m, const ovl__lines *L) {
  memset(c, 0, sizeof *c);
  c->bound = bound;
  c->m = m;
  c->L = L;
  c->line_op = malloc(((size_t)L->n + 2) * sizeof *c->line_op);
  if (c->line_op == NULL)
    return false;
  for (int l = 0; l <= L->n + 1; l++)
    c->line_op[l] = UINT32_MAX;
  for (size_t i = bound->nops; i-- > 0;) {
    int l = bound->ops[i].line;
    if (l >= 1 && l <= L->n)
      c->line_op[l] = (uint32_t)i;
  }
  return true;
}

void ovl__order_context_free(ocontext *c) {
  free(c->line_op);
  c->line_op = NULL;
}

static uint64_t line_ranks(const ocontext *c, int l) {
  return c->bound->ops[c->line_op[l]].ranks &
         ovl__program_all_ranks(c->bound);
}

/* The next statement line from l in direction `dir` (+1, -1), skipping
 * blank lines and comments; 0 at a brace or the end of the text. */
static int next_stmt(const ocontext *c, int l, int dir) {
  for (l += dir; l >= 1 && l <= c->L->n; l += dir) {
    int k = ovl__line_kind(c->L, l);
    if (k == LINE_STMT)
      return l;
    if (k == LINE_BRACE)
      return 0;
  }
  return 0;
}

/* The run of line l: the statements next to it in its block whose ops
 * run on the same ranks (a statement with no op, data() or a param, ends
 * it). */
static void run_of(const ocontext *c, int l, int *lo, int *hi) {
  uint64_t r = line_ranks(c, l);
  int k;
  *lo = *hi = l;
  while ((k = next_stmt(c, *lo, -1)) > 0 && c->line_op[k] != UINT32_MAX &&
         line_ranks(c, k) == r)
    *lo = k;
  while ((k = next_stmt(c, *hi, +1)) > 0 && c->line_op[k] != UINT32_MAX &&
         line_ranks(c, k) == r)
    *hi = k;
}

/* Whether lines a .. b (a <= b) are in one block: no brace between. */
static bool one_block(const ocontext *c, int a, int b) {
  for (int l = a; l <= b; l++)
    if (ovl__line_kind(c->L, l) == LINE_BRACE)
      return false;
  return true;
}

/* ------------------------------------------------------------------ */
/* Candidates                                                          */
/* ------------------------------------------------------------------ */

static bool same_edit(const ovl__edit *a, const ovl__edit *b) {
  if (a->n != b->n)
    return false;
  for (int i = 0; i < a->n; i++)
    if (a->part[i].kind != b->part[i].kind ||
        a->part[i].line != b->part[i].line ||
        a->part[i].last != b->part[i].last || a->part[i].to != b->part[i].to ||
        strcmp(a->part[i].text, b->part[i].text) != 0)
      return false;
  return true;
}

/* Room for one more candidate (a copy of `e`), unless it is there. */
void ovl__ocands_add(ocands *out, const ovl__edit *e) {
  if (out->n >= ORDER_MAX_CANDS || e->n == 0)
    return;
  for (int i = 0; i < out->n; i++)
    if (same_edit(&out->e[i], e))
      return;
  out->e[out->n++] = *e;
}

/* "move the run of line `from` before the run of line `at`": the runs
 * when their ranks differ, else the lines alone. False when it is no
 * move (the same place, or across a block). */
static bool move_edit(const ocontext *c, int from, int at, ovl__edit *e) {
  int flo = from, fhi = from, alo = at, ahi = at;
  ed_part *p = &e->part[0];
  memset(e, 0, sizeof *e);
  if (line_ranks(c, from) != line_ranks(c, at)) {
    run_of(c, from, &flo, &fhi);
    run_of(c, at, &alo, &ahi);
  }
  if (alo == flo || (alo > flo && alo <= fhi + 1))
    return false;
  if (!one_block(c, alo < flo ? alo : fhi, alo < flo ? fhi : alo))
    return false;
  p->kind = ED_MOVE;
  p->line = flo;
  p->last = fhi;
  p->to = alo;
  e->n = 1;
  return true;
}

/* The ranks= attribute on line l, as written ("ranks=[0:nranks - 1]"),
 * into buf; false when the line has none. */
static bool ranks_attr(const ocontext *c, int l, char *buf, size_t size) {
  size_t n;
  const char *s = ovl__line(c->L, l, &n);
  for (size_t k = 0; k + 6 <= n; k++) {
    size_t j = k + 5, depth = 0;
    if (memcmp(s + k, "ranks", 5) != 0 ||
        (k > 0 && (s[k - 1] == '_' || (s[k - 1] >= 'a' && s[k - 1] <= 'z') ||
                   (s[k - 1] >= 'A' && s[k - 1] <= 'Z') ||
                   (s[k - 1] >= '0' && s[k - 1] <= '9'))))
      continue;
    while (j < n && s[j] == ' ')
      j++;
    if (j >= n || s[j] != '=')
      continue;
    for (j++; j < n && s[j] == ' '; j++)
      ;
    if (j >= n || s[j] != '[')
      continue;
    for (; j < n; j++) {
      depth += s[j] == '[';
      if (s[j] == ']' && --depth == 0)
        break;
    }
    if (j >= n || j + 1 - k >= size)
      return false;
    snprintf(buf, size, "%.*s", (int)(j + 1 - k), s + k);
    return true;
  }
  return false;
}

/* The variable a collective op writes (its output, or its input in
 * place), or -1. */
static int coll_writes(const ovl__op *o) {
  if (!o->def->writes)
    return -1;
  return o->out >= 0 ? o->out : (o->nin > 0 ? o->in[0] : -1);
}

/* Widen op o (of the bound program) to every rank; with `standins`, also
 * delete the ops of its block near it that run only on the ranks it skips
 * and write what it writes (only then: a move goes before a deletion). */
static void widen(const ocontext *c, uint32_t op, bool standins,
                  ocands *out) {
  const ovl__op *o = &c->bound->ops[op];
  uint64_t all = ovl__program_all_ranks(c->bound);
  uint64_t skip = all & ~o->ranks;
  int v = coll_writes(o), ndel = 0;
  ovl__edit e;
  memset(&e, 0, sizeof e);
  if (skip == 0 || o->line < 1 || o->line > c->L->n ||
      !ranks_attr(c, o->line, e.part[0].text, sizeof e.part[0].text))
    return;
  e.part[0].kind = ED_DROP;
  e.part[0].line = o->line;
  e.n = 1;
  if (!standins) {
    ovl__ocands_add(out, &e);
    return;
  }
  /* The stand-ins: up to 3, within 8 statements either way. */
  for (int dir = -1; dir <= 1; dir += 2) {
    int l = o->line;
    for (int k = 0; k < 8 && ndel < EDIT_MAX_PARTS - 1; k++) {
      const ovl__op *q;
      if ((l = next_stmt(c, l, dir)) == 0 || c->line_op[l] == UINT32_MAX)
        break;
      q = &c->bound->ops[c->line_op[l]];
      if ((q->ranks & all & ~skip) == 0 && q->def->writes && v >= 0 &&
          q->out == v) {
        ed_part *p = &e.part[e.n++];
        memset(p, 0, sizeof *p);
        p->kind = ED_DELETE;
        p->line = l;
        ndel++;
      }
    }
  }
  if (ndel > 0)
    ovl__ocands_add(out, &e);
}

/* On rank r, the first collective of ring R after position k that agrees
 * with item `like`: its item, or OVL__NONE. */
static uint32_t later_agreeing(const ovl__match *m, int r, int ring,
                               size_t k, uint32_t like) {
  size_t n = ovl__match_ncoll(m, r, ring);
  for (size_t j = k + 1; j < n; j++) {
    uint32_t it = ovl__match_coll(m, r, ring, j);
    if (it != OVL__NONE && ovl__match_coll_agree(m, like, it))
      return it;
  }
  return OVL__NONE;
}

void ovl__mismatch_candidates(const ocontext *c, const ovl_mismatches *mm,
                              size_t i, bool standins, ocands *out,
                              const char **none) {
  ovl_mismatch_finding f;
  const ovl__match *m = c->m;
  out->n = 0;
  *none = NULL;
  if (ovl_mismatches_get(mm, i, &f) != 0)
    return;
  switch (f.kind) {
  case OVL_MISMATCH_UNMATCHED_SEND:
    *none = "none known (a send with no receive: which rank should post it "
            "is the schedule's to say)";
    return;
  case OVL_MISMATCH_UNMATCHED_RECV:
    *none = "none known (a receive with no send: which rank should issue "
            "it is the schedule's to say)";
    return;
  case OVL_MISMATCH_PAIR:
    *none = "none known (a send and its receive must agree on count and "
            "dtype)";
    return;
  default:
    break;
  }
  /* Last, widening while deleting what the skipped ranks did instead. */
  if (standins) {
    for (int s = 0; s < f.nsides; s++)
      if (f.sides[s].issues)
        widen(c, (uint32_t)f.sides[s].op, true, out);
    return;
  }
  /* A collective: widen the sides' ops that skip ranks. */
  for (int s = 0; s < f.nsides; s++)
    if (f.sides[s].issues)
      widen(c, (uint32_t)f.sides[s].op, false, out);
  /* Move: for each rank that issues another op here than the first rank
   * that issues one, its later collective that agrees with the first's,
   * before its own; and the other way round. */
  if (m != NULL && f.index >= 1) {
    size_t k = f.index - 1;
    int ra = -1;
    for (int r = 0; r < f.nsides && ra < 0; r++)
      if (f.sides[r].issues)
        ra = f.sides[r].rank;
    for (int s = 0; ra >= 0 && s < f.nsides; s++) {
      int rb = f.sides[s].rank;
      uint32_t a = ovl__match_coll(m, ra, f.ring, k);
      uint32_t b = ovl__match_coll(m, rb, f.ring, k);
      uint32_t x;
      ovl__edit e;
      if (a == OVL__NONE || b == OVL__NONE || m->items[a].op == m->items[b].op ||
          ovl__match_coll_agree(m, a, b))
        continue;
      if ((x = later_agreeing(m, rb, f.ring, k, a)) != OVL__NONE &&
          move_edit(c, c->bound->ops[m->items[x].op].line,
                    c->bound->ops[m->items[b].op].line, &e))
        ovl__ocands_add(out, &e);
      if ((x = later_agreeing(m, ra, f.ring, k, b)) != OVL__NONE &&
          move_edit(c, c->bound->ops[m->items[x].op].line,
                    c->bound->ops[m->items[a].op].line, &e))
        ovl__ocands_add(out, &e);
    }
  }
  if (out->n == 0)
    *none = f.differs & OVL_DIFFERS_ROOT
                ? "none known (the ranks must agree on one root)"
                : "none known";
}

/* Whether op i of `p` is a send or receive outside a group. */
static bool lone_p2p(const ovl_program *p, size_t i) {
  return p->ops[i].def->p2p != OVL_P2P_NONE && p->ops[i].group == 0;
}

/* Whether line l holds a lone send or receive (of the bound program). */
static bool lone_p2p_line(const ocontext *c, int l) {
  return c->line_op[l] != UINT32_MAX && lone_p2p(c->bound, c->line_op[l]);
}

/* Group the lone sends and receives of lines a .. b: the longest run of
 * them around, then a .. b alone. */
static void group_cands(const ocontext *c, int a, int b, ocands *out) {
  int lo = a, hi = b, k;
  ovl__edit e;
  for (int l = next_stmt(c, a - 1, +1); l > 0 && l <= b;
       l = next_stmt(c, l, +1))
    if (!lone_p2p_line(c, l))
      return;
  if (!one_block(c, a, b))
    return;
  while ((k = next_stmt(c, lo, -1)) > 0 && lone_p2p_line(c, k))
    lo = k;
  while ((k = next_stmt(c, hi, +1)) > 0 && lone_p2p_line(c, k))
    hi = k;
  memset(&e, 0, sizeof e);
  e.n = 1;
  e.part[0].kind = ED_GROUP;
  e.part[0].line = lo;
  e.part[0].last = hi;
  ovl__ocands_add(out, &e);
  e.part[0].line = a;
  e.part[0].last = b;
  ovl__ocands_add(out, &e);
}

void ovl__deadlock_candidates(const ocontext *c, const ovl_program *form,
                              const ovl_deadlocks *d, size_t i, ocands *out,
                              const char **none) {
  ovl_deadlock_finding f;
  out->n = 0;
  *none = NULL;
  if (ovl_deadlocks_get(d, i, &f) != 0)
    return;
  /* Groups first (the fix that does not depend on the rank count), then
   * moves, over the steps in order. */
  for (int pass = 0; pass < 2; pass++)
    for (size_t k = 0; k < f.nsteps; k++) {
      ovl_deadlock_match mt;
      int ly, ln;
      if (ovl_deadlocks_match(d, i, k, &mt) != 0 || mt.rank < 0 ||
          mt.after_line <= 0 || mt.op >= form->nops ||
          mt.after_op >= form->nops)
        continue;
      ly = form->ops[mt.op].line;
      ln = form->ops[mt.after_op].line;
      if (ly < 1 || ly > c->L->n || ln < 1 || ln > c->L->n ||
          c->line_op[ly] == UINT32_MAX || c->line_op[ln] == UINT32_MAX)
        continue;
      if (pass == 0) {
        if (lone_p2p(form, mt.op) && lone_p2p(form, mt.after_op))
          group_cands(c, ln < ly ? ln : ly, ln < ly ? ly : ln, out);
      } else if (ly > ln) {
        ovl__edit e;
        if (move_edit(c, ly, ln, &e))
          ovl__ocands_add(out, &e);
      }
    }
  if (out->n == 0)
    *none = "none known";
}
