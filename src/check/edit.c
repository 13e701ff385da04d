/*
 * Edits of a schedule's text (check/edit.h): their text, parsed back, and
 * applied with a map of where each line of the result comes from, so that
 * a finding of the edited schedule is matched with one of the original.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/edit.h"

/* ------------------------------------------------------------------ */
/* Lines                                                               */
/* ------------------------------------------------------------------ */

bool ovl__lines_make(ovl__lines *L, const char *text, size_t len) {
  int n = 0;
  memset(L, 0, sizeof *L);
  L->text = text;
  L->len = len;
  for (size_t k = 0; k < len; k++)
    n += text[k] == '\n';
  if (len > 0 && text[len - 1] != '\n')
    n++;
  L->at = malloc(((size_t)n + 2) * sizeof *L->at);
  if (L->at == NULL)
    return false;
  L->n = n;
  L->at[0] = 0;
  for (size_t k = 0, l = 1; k < len; k++)
    if (text[k] == '\n' && (int)l <= n)
      L->at[l++] = k + 1;
  L->at[n] = len;
  return true;
}

void ovl__lines_free(ovl__lines *L) {
  free(L->at);
  L->at = NULL;
}

const char *ovl__line(const ovl__lines *L, int l, size_t *n) {
  size_t a, b;
  if (l < 1 || l > L->n) {
    *n = 0;
    return "";
  }
  a = L->at[l - 1];
  b = L->at[l];
  if (b > a && L->text[b - 1] == '\n')
    b--;
  if (b > a && L->text[b - 1] == '\r')
    b--;
  *n = b - a;
  return L->text + a;
}

int ovl__line_kind(const ovl__lines *L, int l) {
  size_t n, k = 0;
  const char *s = ovl__line(L, l, &n);
  while (k < n && (s[k] == ' ' || s[k] == '\t'))
    k++;
  if (k == n || s[k] == '#')
    return LINE_NONE;
  for (size_t j = k; j < n && s[j] != '#'; j++)
    if (s[j] == '{' || s[j] == '}')
      return LINE_BRACE;
  return LINE_STMT;
}

/* The indentation of line l (its leading blanks), *n bytes. */
static const char *indent_of(const ovl__lines *L, int l, size_t *n) {
  size_t len, k = 0;
  const char *s = ovl__line(L, l, &len);
  while (k < len && (s[k] == ' ' || s[k] == '\t'))
    k++;
  *n = k;
  return s;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

char *ovl__edit_text(const ovl__edit *e) {
  ovl__sbuf b = {0};
  for (int i = 0; i < e->n; i++) {
    const ed_part *p = &e->part[i];
    if (i > 0)
      ovl__sb_puts(&b, "; ");
    switch (p->kind) {
    case ED_INSERT: {
      const char *s = p->text;
      ovl__sb_puts(&b, "insert ");
      for (bool first = true; *s != '\0'; first = false) {
        const char *nl = strchr(s, '\n');
        size_t n = nl != NULL ? (size_t)(nl - s) : strlen(s);
        ovl__sb_printf(&b, "%s%.*s", first ? "" : " and ", (int)n, s);
        s += n + (nl != NULL);
      }
      ovl__sb_printf(&b, " before line %d", p->line);
      break;
    }
    case ED_DELETE:
      ovl__sb_printf(&b, "delete line %d", p->line);
      break;
    case ED_MOVE:
      if (p->last > p->line)
        ovl__sb_printf(&b, "move lines %d-%d before line %d", p->line,
                       p->last, p->to);
      else
        ovl__sb_printf(&b, "move line %d before line %d", p->line, p->to);
      break;
    case ED_GROUP:
      ovl__sb_printf(&b, "put lines %d-%d in one group", p->line, p->last);
      break;
    case ED_DROP:
      ovl__sb_printf(&b, "remove %s from line %d", p->text, p->line);
      break;
    }
  }
  if (b.fail) {
    free(b.s);
    return NULL;
  }
  return b.s != NULL ? b.s : ovl__strdup("");
}

/* A number at *s, moved past. */
static bool take_int(const char **s, int *v) {
  char *end;
  long x = strtol(*s, &end, 10);
  if (end == *s || x < 1 || x > 1000000000)
    return false;
  *v = (int)x;
  *s = end;
  return true;
}

static bool take_word(const char **s, const char *w) {
  size_t n = strlen(w);
  if (strncmp(*s, w, n) != 0)
    return false;
  *s += n;
  return true;
}

/* One part, `n` bytes at s. */
static bool parse_part(const char *s, size_t n, ed_part *p) {
  char buf[EDIT_TEXT_MAX + 64];
  const char *q = buf, *tail;
  if (n >= sizeof buf)
    return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  memset(p, 0, sizeof *p);
  if (take_word(&q, "delete line ")) {
    p->kind = ED_DELETE;
    return take_int(&q, &p->line) && *q == '\0';
  }
  if (take_word(&q, "move line")) {
    p->kind = ED_MOVE;
    if (take_word(&q, "s ")) {
      if (!take_int(&q, &p->line) || !take_word(&q, "-") ||
          !take_int(&q, &p->last))
        return false;
    } else if (!take_word(&q, " ") || !take_int(&q, &p->line)) {
      return false;
    } else {
      p->last = p->line;
    }
    return take_word(&q, " before line ") && take_int(&q, &p->to) &&
           *q == '\0' && p->last >= p->line;
  }
  if (take_word(&q, "put lines ")) {
    p->kind = ED_GROUP;
    return take_int(&q, &p->line) && take_word(&q, "-") &&
           take_int(&q, &p->last) && take_word(&q, " in one group") &&
           *q == '\0' && p->last >= p->line;
  }
  if (take_word(&q, "remove ")) {
    tail = strstr(q, " from line ");
    if (tail == NULL || tail == q)
      return false;
    p->kind = ED_DROP;
    snprintf(p->text, sizeof p->text, "%.*s", (int)(tail - q), q);
    q = tail + strlen(" from line ");
    return take_int(&q, &p->line) && *q == '\0';
  }
  if (take_word(&q, "insert ")) {
    /* "S and T before line N": statements end with ')' ("S) and T"). */
    size_t k = 0;
    tail = strstr(q, " before line ");
    while (tail != NULL && strstr(tail + 1, " before line ") != NULL)
      tail = strstr(tail + 1, " before line ");
    if (tail == NULL || tail == q)
      return false;
    p->kind = ED_INSERT;
    for (const char *r = q; r < tail && k + 1 < sizeof p->text;) {
      if (strncmp(r, ") and ", 6) == 0 && r + 6 <= tail) {
        p->text[k++] = ')';
        if (k + 1 < sizeof p->text)
          p->text[k++] = '\n';
        r += 6;
        continue;
      }
      p->text[k++] = *r++;
    }
    p->text[k] = '\0';
    q = tail + strlen(" before line ");
    return take_int(&q, &p->line) && *q == '\0';
  }
  return false;
}

bool ovl__edit_parse(const char *hint, ovl__edit *e) {
  const char *s = hint;
  memset(e, 0, sizeof *e);
  while (*s != '\0') {
    const char *semi = strstr(s, "; ");
    size_t n = semi != NULL ? (size_t)(semi - s) : strlen(s);
    if (e->n == EDIT_MAX_PARTS || !parse_part(s, n, &e->part[e->n]))
      return false;
    e->n++;
    s += n + (semi != NULL ? 2 : 0);
  }
  return e->n > 0;
}

/* ------------------------------------------------------------------ */
/* Applying                                                            */
/* ------------------------------------------------------------------ */

/* A line to write: text (n bytes), after `ind` of indentation (from
 * `ind_s`), from original line `orig` (0: new), moved right by `shift`. */
typedef struct piece {
  const char *s;
  size_t n;
  const char *ind_s;
  size_t ind;
  int orig, shift;
} piece;

typedef struct plan {
  /* Per original line l (1 .. n + 1, n + 1 the end): what goes before it,
   * pieces[first[l] ...] in a list (next), and whether it is deleted. */
  piece *pc;
  int *next, *head, *tail;
  size_t npc, cap;
  bool *deleted;
  int *shift;           /* per line: columns added (a group's lines) */
  char **repl;          /* per line: its new text (a dropped attribute) */
  size_t *repl_n;
} plan;

static bool add_piece(plan *P, int before, piece pc) {
  if (P->npc == P->cap) {
    size_t nc = P->cap ? 2 * P->cap : 16;
    piece *a = realloc(P->pc, nc * sizeof *a);
    int *b;
    if (a == NULL)
      return false;
    P->pc = a;
    b = realloc(P->next, nc * sizeof *b);
    if (b == NULL)
      return false;
    P->next = b;
    P->cap = nc;
  }
  P->pc[P->npc] = pc;
  P->next[P->npc] = -1;
  if (P->tail[before] >= 0)
    P->next[P->tail[before]] = (int)P->npc;
  else
    P->head[before] = (int)P->npc;
  P->tail[before] = (int)P->npc;
  P->npc++;
  return true;
}

/* Line l without the attribute `attr` (and the ", " that separates it
 * from what comes before, or after): into P->repl[l]. 1: not there. */
static int drop_attr(const ovl__lines *L, plan *P, int l, const char *attr) {
  size_t n, an = strlen(attr), a, b;
  const char *s = ovl__line(L, l, &n);
  const char *hit = NULL;
  char *r;
  for (size_t k = 0; an > 0 && k + an <= n && hit == NULL; k++)
    if (memcmp(s + k, attr, an) == 0)
      hit = s + k;
  if (hit == NULL)
    return 1;
  a = (size_t)(hit - s);
  b = a + an;
  if (a >= 2 && s[a - 2] == ',' && s[a - 1] == ' ')
    a -= 2;
  else if (a >= 1 && s[a - 1] == ',')
    a -= 1;
  else if (b + 2 <= n && s[b] == ',' && s[b + 1] == ' ')
    b += 2;
  else if (b + 1 <= n && s[b] == ',')
    b += 1;
  if ((r = malloc(n + 1)) == NULL)
    return -1;
  memcpy(r, s, a);
  memcpy(r + a, s + b, n - b);
  free(P->repl[l]);
  P->repl[l] = r;
  P->repl_n[l] = n - (b - a);
  return 0;
}

static void plan_free(plan *P, int n) {
  for (int l = 0; P->repl != NULL && l <= n + 1; l++)
    free(P->repl[l]);
  free(P->repl);
  free(P->repl_n);
  free(P->pc);
  free(P->next);
  free(P->head);
  free(P->tail);
  free(P->deleted);
  free(P->shift);
}

/* Original line l as a piece (its replacement, if any). */
static piece line_piece(const ovl__lines *L, const plan *P, int l) {
  piece pc = {0};
  if (P->repl[l] != NULL) {
    pc.s = P->repl[l];
    pc.n = P->repl_n[l];
  } else {
    pc.s = ovl__line(L, l, &pc.n);
  }
  pc.orig = l;
  pc.shift = P->shift[l];
  if (pc.shift > 0) {
    pc.ind_s = "  ";
    pc.ind = (size_t)pc.shift;
  }
  return pc;
}

/* The parts of e into the plan. 1: an edit that does not apply. */
static int plan_edit(const ovl__lines *L, plan *P, const ovl__edit *e) {
  int n = L->n;
  for (int i = 0; i < e->n; i++) {
    const ed_part *p = &e->part[i];
    switch (p->kind) {
    case ED_DROP: {
      int rc;
      if (p->line < 1 || p->line > n)
        return 1;
      if ((rc = drop_attr(L, P, p->line, p->text)) != 0)
        return rc;
      break;
    }
    case ED_GROUP:
      if (p->line < 1 || p->last > n || p->last < p->line)
        return 1;
      for (int l = p->line; l <= p->last; l++)
        P->shift[l] += 2;
      break;
    case ED_DELETE:
      if (p->line < 1 || p->line > n)
        return 1;
      P->deleted[p->line] = true;
      break;
    case ED_MOVE:
      if (p->line < 1 || p->last > n || p->last < p->line || p->to < 1 ||
          p->to > n + 1 || (p->to > p->line && p->to <= p->last))
        return 1;
      for (int l = p->line; l <= p->last; l++)
        P->deleted[l] = true;
      break;
    case ED_INSERT:
      if (p->line < 1 || p->line > n + 1)
        return 1;
      break;
    }
  }
  /* The new lines, in the order of the parts. */
  for (int i = 0; i < e->n; i++) {
    const ed_part *p = &e->part[i];
    size_t ind;
    const char *ind_s;
    if (p->kind == ED_INSERT) {
      const char *s = p->text;
      ind_s = indent_of(L, p->line, &ind);
      while (*s != '\0') {
        const char *nl = strchr(s, '\n');
        size_t k = nl != NULL ? (size_t)(nl - s) : strlen(s);
        piece pc = {s, k, ind_s, ind, 0, 0};
        if (!add_piece(P, p->line, pc))
          return -1;
        s += k + (nl != NULL);
      }
    } else if (p->kind == ED_GROUP) {
      piece open = {"group {", 7, NULL, 0, 0, 0};
      piece close = {"}", 1, NULL, 0, 0, 0};
      open.ind_s = close.ind_s = indent_of(L, p->line, &open.ind);
      close.ind = open.ind;
      if (!add_piece(P, p->line, open) || !add_piece(P, p->last + 1, close))
        return -1;
    } else if (p->kind == ED_MOVE) {
      for (int l = p->line; l <= p->last; l++)
        if (!add_piece(P, p->to, line_piece(L, P, l)))
          return -1;
    }
  }
  return 0;
}

static bool put_piece(ovl__sbuf *b, const piece *pc, ovl__edited *out,
                      int *cap) {
  if (out->nlines + 1 >= *cap) {
    int nc = *cap * 2;
    int *o = realloc(out->orig, (size_t)nc * sizeof *o);
    int *s;
    if (o == NULL)
      return false;
    out->orig = o;
    s = realloc(out->shift, (size_t)nc * sizeof *s);
    if (s == NULL)
      return false;
    out->shift = s;
    *cap = nc;
  }
  out->nlines++;
  out->orig[out->nlines] = pc->orig;
  out->shift[out->nlines] = pc->shift;
  if (pc->ind > 0)
    ovl__sb_printf(b, "%.*s", (int)pc->ind, pc->ind_s);
  ovl__sb_printf(b, "%.*s\n", (int)pc->n, pc->s);
  return !b->fail;
}

int ovl__edit_apply(const ovl__lines *L, const ovl__edit *e,
                    ovl__edited *out) {
  int n = L->n, rc = -1, cap = n + 16;
  plan P;
  ovl__sbuf b = {0};
  memset(out, 0, sizeof *out);
  memset(&P, 0, sizeof P);
  P.head = malloc(((size_t)n + 2) * sizeof *P.head);
  P.tail = malloc(((size_t)n + 2) * sizeof *P.tail);
  P.deleted = calloc((size_t)n + 2, sizeof *P.deleted);
  P.shift = calloc((size_t)n + 2, sizeof *P.shift);
  P.repl = calloc((size_t)n + 2, sizeof *P.repl);
  P.repl_n = calloc((size_t)n + 2, sizeof *P.repl_n);
  out->orig = malloc((size_t)cap * sizeof *out->orig);
  out->shift = malloc((size_t)cap * sizeof *out->shift);
  if (P.head == NULL || P.tail == NULL || P.deleted == NULL ||
      P.shift == NULL || P.repl == NULL || P.repl_n == NULL ||
      out->orig == NULL || out->shift == NULL)
    goto done;
  for (int l = 0; l <= n + 1; l++)
    P.head[l] = P.tail[l] = -1;
  if ((rc = plan_edit(L, &P, e)) != 0)
    goto done;
  out->orig[0] = out->shift[0] = 0;
  rc = -1;
  for (int l = 1; l <= n + 1; l++) {
    for (int k = P.head[l]; k >= 0; k = P.next[k])
      if (!put_piece(&b, &P.pc[k], out, &cap))
        goto done;
    if (l <= n && !P.deleted[l]) {
      piece pc = line_piece(L, &P, l);
      if (!put_piece(&b, &pc, out, &cap))
        goto done;
    }
  }
  out->text = b.s != NULL ? b.s : ovl__strdup("");
  b.s = NULL;
  out->len = out->text != NULL ? strlen(out->text) : 0;
  rc = out->text != NULL ? 0 : -1;
done:
  free(b.s);
  plan_free(&P, n);
  if (rc != 0)
    ovl__edited_free(out);
  return rc;
}

void ovl__edited_free(ovl__edited *x) {
  free(x->text);
  free(x->orig);
  free(x->shift);
  memset(x, 0, sizeof *x);
}
