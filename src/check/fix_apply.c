/*
 * The fixed schedule (ovl_schedule_fix; docs/ARCHITECTURE.md, "Checks";
 * docs/ORDERING.md, "The fix"): every checked hint applied to the
 * schedule's text, and the difference as a unified diff.
 *
 * One hint at a time, until none is left or none helps: the text is
 * checked whole (check/order_fix_check.c: the mismatches, every form's
 * races and deadlocks) and its hints made and re-checked as the pipeline
 * makes them (ovl_races_check_fixes, ovl__order_check_fixes); each
 * checked hint is applied to a copy and the copy checked, and the one
 * that removes the most findings without adding one is kept (a hint of
 * one form that fixes the others too goes first). Where a hint inserts a
 * wait and a wait of the same kind follows further down the same block,
 * the later one is moved up instead (deleted there, its inputs merged
 * into the new one) when the check says that changes nothing: a wait the
 * hint makes redundant is moved, not duplicated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/deadlock.h"
#include "check/order_fix.h"
#include "check/races.h"
#include "lang/schedule.h"

/* Hints applied at most (each removes a finding). */
#define FIX_MAX_STEPS 64

struct ovl_fixed_s {
  char *text;
  size_t len;
  char *orig; /* the schedule's text */
  size_t orig_len;
  char **hints; /* [n]: each as applied, on the text as it was then */
  size_t n;
  uint64_t races, mismatches, deadlocks; /* left, each bug once */
};

void ovl_fixed_free(ovl_fixed *f) {
  if (f == NULL)
    return;
  for (size_t i = 0; i < f->n; i++)
    free(f->hints[i]);
  free(f->hints);
  free(f->text);
  free(f->orig);
  free(f);
}

const char *ovl_fixed_text(const ovl_fixed *f, size_t *len) {
  if (len != NULL)
    *len = f != NULL ? f->len : 0;
  return f != NULL ? f->text : NULL;
}

size_t ovl_fixed_count(const ovl_fixed *f) { return f != NULL ? f->n : 0; }

const char *ovl_fixed_hint(const ovl_fixed *f, size_t i) {
  return f != NULL && i < f->n ? f->hints[i] : NULL;
}

void ovl_fixed_left(const ovl_fixed *f, uint64_t *races,
                    uint64_t *mismatches, uint64_t *deadlocks) {
  if (races != NULL)
    *races = f != NULL ? f->races : 0;
  if (mismatches != NULL)
    *mismatches = f != NULL ? f->mismatches : 0;
  if (deadlocks != NULL)
    *deadlocks = f != NULL ? f->deadlocks : 0;
}

/* ------------------------------------------------------------------ */
/* One step                                                            */
/* ------------------------------------------------------------------ */

typedef struct stepper {
  const char *filename;
  const ovl_bind_opts *opts;
  omodes modes;
} stepper;

/* The checked hints of the text `text` (its check `c`, kept), deduped,
 * into *hints (n of them). */
static ovl_status checked_hints(const stepper *S, const char *text,
                                size_t len, ochecked *c, char ***hints,
                                size_t *n, ovl_error *err) {
  ovl_schedule *s = NULL;
  ovl__form_checks f[OVL__MODE_COUNT];
  ovl_status st;
  size_t cap = 16;
  *n = 0;
  *hints = malloc(cap * sizeof **hints);
  if (*hints == NULL)
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  if ((st = ovl_schedule_parse(text, len, S->filename, &s, err)) != OVL_OK)
    return st;
  for (size_t i = 0; i < c->nforms; i++) {
    f[i].mode = S->modes.mode[i];
    f[i].prog = c->forms[i];
    f[i].races = c->races_of[i];
    f[i].deadlocks = c->dl_of[i];
    /* The race check of ovl__check_text gave no hints: the first
     * candidate, then the re-check. */
    st = ovl__fix_hints(c->forms[i], c->races_of[i], NULL, err);
    if (st == OVL_OK)
      st = ovl_races_check_fixes(c->races_of[i], c->forms[i], s, S->opts,
                                 err);
    if (st != OVL_OK) {
      ovl_schedule_free(s);
      return st;
    }
  }
  st = ovl__order_check_fixes(c->bound, c->mm, f, c->nforms,
                               S->modes.graph, s, S->opts, err);
  ovl_schedule_free(s);
  if (st != OVL_OK)
    return st;
  /* Every checked hint: races form by form, mismatches, deadlocks. */
  for (int kind = 0; kind < 3; kind++)
    for (size_t i = 0; i < (kind == 1 ? 1 : c->nforms); i++) {
      size_t m = kind == 0   ? ovl_races_count(c->races_of[i])
                 : kind == 1 ? ovl_mismatches_count(c->mm)
                             : ovl_deadlocks_count(c->dl_of[i]);
      for (size_t j = 0; j < m; j++) {
        const char *h = NULL;
        bool dup = false;
        if (kind == 0) {
          ovl_race_info ri;
          ovl_races_get(c->races_of[i], j, &ri);
          h = ri.fix_checked ? ri.fix : NULL;
        } else {
          ovl_fix_info fi;
          if (kind == 1)
            ovl_mismatches_fix(c->mm, j, &fi);
          else
            ovl_deadlocks_fix(c->dl_of[i], j, &fi);
          h = fi.checked ? fi.fix : NULL;
        }
        for (size_t k = 0; h != NULL && k < *n && !dup; k++)
          dup = strcmp((*hints)[k], h) == 0;
        if (h == NULL || dup)
          continue;
        if (*n == cap) {
          char **a = realloc(*hints, 2 * cap * sizeof *a);
          if (a == NULL)
            return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
          *hints = a;
          cap *= 2;
        }
        if (((*hints)[*n] = ovl__strdup(h)) == NULL)
          return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
        (*n)++;
      }
    }
  return OVL_OK;
}

/* What an edit of the current text does: findings gone, findings new
 * (a deadlock the current text's execution never reached is not new). */
typedef struct effect {
  bool usable;
  size_t gone, added;
} effect;

static ovl_status effect_of(const stepper *S, const ovl__lines *L,
                            ochecked *cur, const ovl__edit *e, effect *ef,
                            ovl_error *err) {
  ovl__edited ed;
  ochecked c;
  bool usable;
  ovl_status st;
  int rc = ovl__edit_apply(L, e, &ed);
  memset(ef, 0, sizeof *ef);
  if (rc < 0)
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  if (rc > 0)
    return OVL_OK;
  st = ovl__check_text(ed.text, ed.len, S->filename, S->opts, &S->modes, &ed,
                       false, &c, &usable, err);
  ed.text = NULL;
  ovl__edited_free(&ed);
  if (st != OVL_OK || !usable) {
    ovl__ochecked_free(&c);
    return st;
  }
  ef->usable = true;
  for (size_t i = 0; i < cur->keys.n; i++)
    ef->gone += !ovl__okeys_has(&c.keys, cur->keys.k[i].kind,
                                cur->keys.w + cur->keys.k[i].off,
                                cur->keys.k[i].len);
  for (size_t i = 0; i < c.keys.n; i++) {
    const uint64_t *w = c.keys.w + c.keys.k[i].off;
    size_t n = c.keys.k[i].len, k = 0;
    bool reach = false;
    if (ovl__okeys_has(&cur->keys, c.keys.k[i].kind, w, n))
      continue;
    for (size_t f = 0; c.keys.k[i].kind == OKEY_DEADLOCK && f < cur->nforms &&
                       !reach;
         f++) {
      for (k = 0; k < n && ovl__deadlocks_unreached(cur->dl_of[f], w[k]); k++)
        ;
      reach = n > 0 && k == n;
    }
    ef->added += !reach;
  }
  ovl__ochecked_free(&c);
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* A redundant wait, moved                                             */
/* ------------------------------------------------------------------ */

/* A statement's op name and keyword arguments (ranks= left out), and its
 * positional arguments, from its text "NAME(a, b, k=v, ...)". */
typedef struct call_text {
  char name[256];
  char kw[1024];   /* ", "-joined, in order */
  char args[1024]; /* ", "-joined */
} call_text;

static bool split_call(const char *s, size_t n, call_text *c) {
  size_t k = 0, a = 0, b = 0;
  const char *open, *close;
  memset(c, 0, sizeof *c);
  while (k < n && (s[k] == ' ' || s[k] == '\t'))
    k++;
  open = memchr(s + k, '(', n - k);
  if (open == NULL || (size_t)(open - s - k) >= sizeof c->name)
    return false;
  /* "y = op(...)": a statement with an output is no wait. */
  if (memchr(s + k, '=', (size_t)(open - s - k)) != NULL)
    return false;
  memcpy(c->name, s + k, (size_t)(open - s - k));
  close = s + n;
  while (close > open && close[-1] != ')')
    close--;
  if (close <= open + 1)
    return true;
  for (const char *p = open + 1; p < close - 1;) {
    const char *e = p;
    int depth = 0;
    size_t len;
    while (e < close - 1 && (depth > 0 || *e != ',')) {
      depth += (*e == '[') - (*e == ']');
      e++;
    }
    while (p < e && *p == ' ')
      p++;
    len = (size_t)(e - p);
    if (len > 0 && memchr(p, '=', len) != NULL) {
      if (strncmp(p, "ranks", 5) != 0 && b + len + 3 < sizeof c->kw)
        b += (size_t)snprintf(c->kw + b, sizeof c->kw - b, "%s%.*s",
                              b ? ", " : "", (int)len, p);
    } else if (len > 0 && a + len + 3 < sizeof c->args) {
      a += (size_t)snprintf(c->args + a, sizeof c->args - a, "%s%.*s",
                            a ? ", " : "", (int)len, p);
    }
    p = e < close - 1 ? e + 1 : e;
  }
  return true;
}

/* Whether `name` is one of the positional arguments of c. */
static bool has_arg(const call_text *c, const char *name) {
  size_t n = strlen(name);
  for (const char *p = c->args; *p;) {
    const char *e = strstr(p, ", ");
    size_t k = e != NULL ? (size_t)(e - p) : strlen(p);
    if (k == n && strncmp(p, name, n) == 0)
      return true;
    p += k + (e != NULL ? 2 : 0);
  }
  return false;
}

/* The variable named by the n bytes at s, declared before line `before`
 * in `prog`. */
static bool declared_before(const ovl_program *prog, const char *s,
                            size_t n, int before) {
  for (size_t v = 0; v < prog->nvars; v++)
    if (strlen(prog->vars[v].name) == n &&
        strncmp(prog->vars[v].name, s, n) == 0)
      return prog->vars[v].line < before;
  return false;
}

/* For an edit that inserts one wait (or sync) before line L: the same
 * edit, the first statement of the same op and attributes below it in
 * its block deleted and its inputs merged into the new one. False when
 * there is none. */
static bool moved_wait(const ovl__lines *L, const ovl_program *prog,
                       const ovl__edit *e, ovl__edit *out) {
  const ed_part *p = &e->part[0];
  call_text ins, cand;
  int at = p->line;
  if (e->n != 1 || p->kind != ED_INSERT || strchr(p->text, '\n') != NULL ||
      !split_call(p->text, strlen(p->text), &ins) ||
      (strncmp(ins.name, "c_wait_", 7) != 0 &&
       strncmp(ins.name, "c_sync_", 7) != 0 &&
       strcmp(ins.name, "stream_sync") != 0))
    return false;
  for (int l = at; l >= 1 && l <= L->n; l++) {
    size_t n;
    const char *s;
    int kind = ovl__line_kind(L, l);
    if (kind == LINE_BRACE)
      return false;
    if (kind != LINE_STMT)
      continue;
    s = ovl__line(L, l, &n);
    if (!split_call(s, n, &cand) || strcmp(cand.name, ins.name) != 0 ||
        strcmp(cand.kw, ins.kw) != 0 || memmem(s, n, "ranks", 5) != NULL)
      continue;
    /* Merge: the new wait's inputs, then the later one's declared above
     * the new place. */
    {
      char args[1024];
      size_t a = (size_t)snprintf(args, sizeof args, "%s", ins.args);
      for (const char *q = cand.args; *q;) {
        const char *comma = strstr(q, ", ");
        size_t k = comma != NULL ? (size_t)(comma - q) : strlen(q);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)k, q);
        if (k < sizeof name && !has_arg(&ins, name) &&
            declared_before(prog, q, k, at) && a + k + 3 < sizeof args)
          a += (size_t)snprintf(args + a, sizeof args - a, "%s%s",
                                a ? ", " : "", name);
        q += k + (comma != NULL ? 2 : 0);
      }
      memset(out, 0, sizeof *out);
      out->n = 2;
      out->part[0].kind = ED_INSERT;
      out->part[0].line = at;
      snprintf(out->part[0].text, sizeof out->part[0].text,
               "%.255s(%.900s%s%.900s)", ins.name, args,
               args[0] && ins.kw[0] ? ", " : "", ins.kw);
      out->part[1].kind = ED_DELETE;
      out->part[1].line = l;
    }
    return true;
  }
  return false;
}

/* ------------------------------------------------------------------ */
/* The loop                                                            */
/* ------------------------------------------------------------------ */

/* The findings of a check, each bug once (the forms' alike counted
 * once). */
static bool count_left(ochecked *c, const stepper *S, ovl_fixed *f) {
  ovl__form_checks fc[OVL__MODE_COUNT];
  for (size_t i = 0; i < c->nforms; i++) {
    fc[i].mode = S->modes.mode[i];
    fc[i].prog = c->forms[i];
    fc[i].races = c->races_of[i];
    fc[i].deadlocks = c->dl_of[i];
  }
  f->mismatches = ovl_mismatches_count(c->mm) + ovl_mismatches_more(c->mm);
  return ovl__findings_across_forms(fc, c->nforms, &f->races,
                                    &f->deadlocks);
}

/* One step: the best hint applied to f->text. *done when none helps. */
static ovl_status step(const stepper *S, ovl_fixed *f, bool *done,
                       ovl_error *err) {
  ochecked cur;
  ovl__lines L;
  char **hints = NULL, *best_text = NULL;
  size_t nh = 0;
  bool usable;
  effect best = {0};
  ovl__edit *e = malloc(sizeof *e), *alt = malloc(sizeof *alt),
            *chosen = malloc(sizeof *chosen);
  char *copy = malloc(f->len + 1);
  ovl_status st = OVL_OK;
  *done = true;
  memset(&cur, 0, sizeof cur);
  memset(&L, 0, sizeof L);
  if (e == NULL || alt == NULL || chosen == NULL || copy == NULL) {
    free(e);
    free(alt);
    free(chosen);
    free(copy);
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  }
  memcpy(copy, f->text, f->len);
  copy[f->len] = '\0';
  st = ovl__check_text(copy, f->len, S->filename, S->opts, &S->modes, NULL,
                       true, &cur, &usable, err);
  if (st == OVL_OK && !usable)
    st = ovl__err(err, OVL_EPARSE, "fix: the schedule does not bind");
  if (st == OVL_OK && !count_left(&cur, S, f))
    st = ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  if (st == OVL_OK && cur.keys.n == 0)
    goto out; /* clean */
  if (st == OVL_OK)
    st = checked_hints(S, f->text, f->len, &cur, &hints, &nh, err);
  if (st == OVL_OK && !ovl__lines_make(&L, f->text, f->len))
    st = ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  for (size_t i = 0; st == OVL_OK && i < nh; i++) {
    effect ef;
    if (!ovl__edit_parse(hints[i], e))
      continue;
    st = effect_of(S, &L, &cur, e, &ef, err);
    if (st != OVL_OK || !ef.usable || ef.gone == 0 || ef.added > 0)
      continue;
    /* A wait it makes redundant further down: moved, not duplicated. */
    if (moved_wait(&L, cur.bound, e, alt)) {
      effect ea;
      st = effect_of(S, &L, &cur, alt, &ea, err);
      if (st == OVL_OK && ea.usable && ea.added == 0 && ea.gone >= ef.gone) {
        *e = *alt;
        ef = ea;
      }
    }
    if (st == OVL_OK && ef.gone > best.gone) {
      best = ef;
      *chosen = *e;
    }
  }
  if (st == OVL_OK && best.gone > 0) {
    ovl__edited ed;
    int rc = ovl__edit_apply(&L, chosen, &ed);
    char **h = realloc(f->hints, (f->n + 1) * sizeof *h);
    if (h != NULL)
      f->hints = h;
    best_text = ovl__edit_text(chosen);
    if (rc != 0 || h == NULL || best_text == NULL) {
      if (rc == 0)
        ovl__edited_free(&ed);
      free(best_text);
      st = ovl__err(err, OVL_ENOMEM, "fix: out of memory");
    } else {
      f->hints[f->n++] = best_text;
      free(f->text);
      f->text = ed.text;
      f->len = ed.len;
      ed.text = NULL;
      ovl__edited_free(&ed);
      *done = false;
    }
  }
out:
  for (size_t i = 0; i < nh; i++)
    free(hints[i]);
  free(hints);
  ovl__lines_free(&L);
  ovl__ochecked_free(&cur);
  free(e);
  free(alt);
  free(chosen);
  return st;
}

ovl_status ovl_schedule_fix(const ovl_schedule *s, const ovl_bind_opts *opts,
                            unsigned modes, int graph, ovl_fixed **out,
                            ovl_error *err) {
  static const ovl_mode order[] = {OVL_MODE_SYNC, OVL_MODE_ASYNC,
                                   OVL_MODE_COMP, OVL_MODE_COMM};
  stepper S;
  ovl_fixed *f;
  const char *text;
  size_t len;
  bool done = false;
  ovl_status st = OVL_OK;
  if (out != NULL)
    *out = NULL;
  if (s == NULL || out == NULL || modes == 0 ||
      (modes & ~((1u << OVL__MODE_COUNT) - 1)) != 0)
    return ovl__err(err, OVL_EINVAL, "ovl_schedule_fix: bad argument");
  memset(&S, 0, sizeof S);
  S.filename = ovl_schedule_filename(s);
  S.opts = opts;
  S.modes.graph = graph != 0;
  for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
    if (modes & OVL_MODE_BIT(order[k])) {
      S.modes.mode[S.modes.n++] = order[k];
      S.modes.mismatches |= order[k] != OVL_MODE_COMP;
    }
  text = ovl__schedule_text(s, &len);
  f = calloc(1, sizeof *f);
  if (f == NULL || (f->text = malloc(len + 1)) == NULL ||
      (f->orig = malloc(len + 1)) == NULL) {
    ovl_fixed_free(f);
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  }
  memcpy(f->text, text, len);
  memcpy(f->orig, text, len);
  f->text[len] = f->orig[len] = '\0';
  f->len = f->orig_len = len;
  for (int k = 0; st == OVL_OK && !done && k <= FIX_MAX_STEPS; k++)
    st = step(&S, f, &done, err);
  if (st != OVL_OK) {
    ovl_fixed_free(f);
    return st;
  }
  *out = f;
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* The difference, as a unified diff                                   */
/* ------------------------------------------------------------------ */

/* An edit script over lines: for each line of a and b, whether it is
 * kept (in both), removed (a only) or added (b only). */
enum { D_KEEP, D_DEL, D_ADD };

typedef struct dline {
  int op;
  int ai, bi; /* 0-based line in a (KEEP, DEL), b (KEEP, ADD) */
} dline;

/* Whether 0-based line i of a text has no newline (its last, cut off). */
static bool no_newline(const ovl__lines *X, int i) {
  return i + 1 == X->n && X->len > 0 && X->text[X->len - 1] != '\n';
}

static bool line_eq(const ovl__lines *A, int i, const ovl__lines *B, int j) {
  size_t n, m;
  const char *a = ovl__line(A, i + 1, &n), *b = ovl__line(B, j + 1, &m);
  return n == m && memcmp(a, b, n) == 0 && no_newline(A, i) == no_newline(B, j);
}

/* The script: common head and tail, the middle by longest common
 * subsequence (or, past 16 M cells, removed and added whole). */
static dline *script(const ovl__lines *A, const ovl__lines *B, size_t *n) {
  int na = A->n, nb = B->n, h = 0, t = 0;
  dline *d = malloc(((size_t)na + (size_t)nb + 1) * sizeof *d);
  size_t k = 0;
  if (d == NULL)
    return NULL;
  while (h < na && h < nb && line_eq(A, h, B, h))
    h++;
  while (t < na - h && t < nb - h && line_eq(A, na - 1 - t, B, nb - 1 - t))
    t++;
  for (int i = 0; i < h; i++)
    d[k++] = (dline){D_KEEP, i, i};
  {
    int ma = na - h - t, mb = nb - h - t;
    uint32_t *L = NULL;
    if ((uint64_t)(ma + 1) * (uint64_t)(mb + 1) <= ((uint64_t)1 << 24))
      L = calloc(((size_t)ma + 1) * ((size_t)mb + 1), sizeof *L);
    if (L != NULL) {
#define AT(i, j) L[(size_t)(i) * ((size_t)mb + 1) + (size_t)(j)]
      for (int i = ma - 1; i >= 0; i--)
        for (int j = mb - 1; j >= 0; j--)
          AT(i, j) = line_eq(A, h + i, B, h + j)
                         ? AT(i + 1, j + 1) + 1
                         : (AT(i + 1, j) > AT(i, j + 1) ? AT(i + 1, j)
                                                        : AT(i, j + 1));
      for (int i = 0, j = 0; i < ma || j < mb;) {
        if (i < ma && j < mb && line_eq(A, h + i, B, h + j)) {
          d[k++] = (dline){D_KEEP, h + i, h + j};
          i++;
          j++;
        } else if (i < ma && (j == mb || AT(i + 1, j) >= AT(i, j + 1))) {
          /* Removed lines before added ones, as diff -u writes them. */
          d[k++] = (dline){D_DEL, h + i, -1};
          i++;
        } else {
          d[k++] = (dline){D_ADD, -1, h + j};
          j++;
        }
      }
#undef AT
      free(L);
    } else {
      for (int i = 0; i < ma; i++)
        d[k++] = (dline){D_DEL, h + i, -1};
      for (int j = 0; j < mb; j++)
        d[k++] = (dline){D_ADD, -1, h + j};
    }
  }
  for (int i = 0; i < t; i++)
    d[k++] = (dline){D_KEEP, na - t + i, nb - t + i};
  *n = k;
  return d;
}

ovl_status ovl_fixed_diff(const ovl_fixed *f, const char *old_label,
                          const char *new_label, char **text, size_t *len,
                          ovl_error *err) {
  ovl__lines A, B;
  ovl__sbuf b = {0};
  dline *d;
  size_t n;
  const int ctx = 3;
  if (text != NULL)
    *text = NULL;
  if (f == NULL || text == NULL || old_label == NULL || new_label == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_fixed_diff: bad argument");
  if (!ovl__lines_make(&A, f->orig, f->orig_len))
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  if (!ovl__lines_make(&B, f->text, f->len)) {
    ovl__lines_free(&A);
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  }
  d = script(&A, &B, &n);
  if (d == NULL) {
    ovl__lines_free(&A);
    ovl__lines_free(&B);
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  }
  ovl__sb_printf(&b, "--- %s\n+++ %s\n", old_label, new_label);
  for (size_t i = 0; i < n;) {
    size_t lo, hi, j;
    int a0, b0, ca = 0, cb = 0;
    if (d[i].op == D_KEEP) {
      i++;
      continue;
    }
    /* A hunk: from ctx lines before this change to ctx lines after the
     * last change less than 2 ctx lines further on. */
    lo = i >= (size_t)ctx ? i - (size_t)ctx : 0;
    while (lo < i && d[lo].op != D_KEEP)
      lo++;
    hi = i;
    for (j = i; j < n; j++) {
      if (d[j].op != D_KEEP) {
        hi = j;
        continue;
      }
      if (j - hi > (size_t)(2 * ctx))
        break;
    }
    hi = hi + (size_t)ctx + 1 < n ? hi + (size_t)ctx + 1 : n;
    a0 = b0 = -1;
    for (j = lo; j < hi; j++) {
      if (d[j].op != D_ADD) {
        ca++;
        if (a0 < 0)
          a0 = d[j].ai;
      }
      if (d[j].op != D_DEL) {
        cb++;
        if (b0 < 0)
          b0 = d[j].bi;
      }
    }
    /* An empty side names the line before it, as diff -u does. */
    if (a0 < 0) {
      for (j = lo; j-- > 0 && a0 < 0;)
        if (d[j].op != D_ADD)
          a0 = d[j].ai + 1;
      a0 = a0 < 0 ? 0 : a0;
      ovl__sb_printf(&b, "@@ -%d,0", a0);
    } else {
      ovl__sb_printf(&b, "@@ -%d,%d", a0 + 1, ca);
    }
    if (b0 < 0) {
      for (j = lo; j-- > 0 && b0 < 0;)
        if (d[j].op != D_DEL)
          b0 = d[j].bi + 1;
      b0 = b0 < 0 ? 0 : b0;
      ovl__sb_printf(&b, " +%d,0 @@\n", b0);
    } else {
      ovl__sb_printf(&b, " +%d,%d @@\n", b0 + 1, cb);
    }
    for (j = lo; j < hi; j++) {
      size_t m;
      const char *s = d[j].op == D_ADD ? ovl__line(&B, d[j].bi + 1, &m)
                                       : ovl__line(&A, d[j].ai + 1, &m);
      ovl__sb_printf(&b, "%c%.*s\n",
                     d[j].op == D_KEEP  ? ' '
                     : d[j].op == D_DEL ? '-'
                                        : '+',
                     (int)m, s);
      /* A last line without its newline. */
      if (d[j].op == D_ADD ? no_newline(&B, d[j].bi) : no_newline(&A, d[j].ai))
        ovl__sb_puts(&b, "\\ No newline at end of file\n");
    }
    i = hi;
  }
  free(d);
  ovl__lines_free(&A);
  ovl__lines_free(&B);
  if (b.fail) {
    free(b.s);
    return ovl__err(err, OVL_ENOMEM, "fix: out of memory");
  }
  *text = b.s != NULL ? b.s : ovl__strdup("");
  if (len != NULL)
    *len = *text != NULL ? strlen(*text) : 0;
  return *text != NULL ? OVL_OK : ovl__err(err, OVL_ENOMEM, "out of memory");
}
