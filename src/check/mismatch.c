/*
 * The mismatch check (ovl.h, "Mismatches"; docs/ARCHITECTURE.md,
 * "Checks"): every disagreement of the matching (check/match.c), keyed by
 * source position (the ring, the kind, what differs and each rank's op)
 * in the list of findings (check/findings.h), so that one inside a repeat
 * block is listed once with its number of occurrences.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/findings.h"
#include "check/match.h"

typedef struct mm_rec {
  int kind, ring;
  uint64_t index;
  int sender, receiver;
  unsigned differs;
  bool same_size;
  int nsides;
  ovl_mismatch_side *sides;
  uint64_t occurrences, ranks, first_tag;
  char *message;
  /* Its fix hint (check/order_fix.c): the edit, or NULL (none known, or
   * not made: why says which), and whether it was re-checked. */
  ovl__fix_slot fix;
  /* The key: kind, ring, differs and per item its op's position. */
  int nkey;
  uint64_t *key;
} mm_rec;

/* The key of an occurrence, to find its record. */
typedef struct mm_key {
  int nkey;
  const uint64_t *key;
} mm_key;

struct ovl_mismatches_s {
  /* The mismatches (mm_rec), at most OVL_FINDINGS_LIST_MAX; its `more`:
   * the occurrences not listed. */
  ovl__flist list;
  int nranks;
  uint64_t nitems; /* comm ops checked, all ranks */
  /* While checking: the matching. */
  const ovl__match *m;
};

static mm_rec *rec_at(const ovl_mismatches *mm, size_t i) {
  return ovl__flist_at(&mm->list, i);
}

static void rec_free(void *rec, void *ctx) {
  mm_rec *r = rec;
  (void)ctx;
  for (int k = 0; r->sides != NULL && k < r->nsides; k++) {
    free((char *)r->sides[k].var);
    free((char *)r->sides[k].out_var);
  }
  free(r->sides);
  free(r->message);
  free(r->key);
  ovl__fix_slot_free(&r->fix);
}

void ovl_mismatches_free(ovl_mismatches *mm) {
  if (mm == NULL)
    return;
  ovl__flist_free(&mm->list, rec_free, NULL);
  free(mm);
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/* The key of an occurrence into key[] (1 + nitems words); its hash. */
static uint64_t occ_key(const ovl__match *m, const ovl__occ *o,
                        uint64_t *key) {
  uint64_t h;
  key[0] = (uint64_t)o->kind | (uint64_t)o->ring << 8 |
           (uint64_t)o->differs << 16;
  h = mix(0x2545f4914f6cdd1dull, key[0]);
  for (int k = 0; k < o->nitems; k++) {
    uint64_t v = 0;
    if (o->items[k] != OVL__NONE) {
      const ovl__op *op = &m->prog->ops[m->items[o->items[k]].op];
      v = (uint64_t)(uint32_t)op->line << 32 | (uint32_t)op->col;
      v ^= (uint64_t)(uintptr_t)op->def << 1;
    }
    key[1 + k] = v;
    h = mix(h, v);
  }
  return h;
}

static bool key_eq(const void *rec, const void *key) {
  const mm_rec *r = rec;
  const mm_key *k = key;
  return r->nkey == k->nkey &&
         memcmp(r->key, k->key, (size_t)k->nkey * sizeof *k->key) == 0;
}

static uint64_t occ_ranks(const ovl__occ *o) {
  uint64_t r = 0;
  if (o->kind == OVL_MISMATCH_COLLECTIVE) {
    for (int k = 0; k < o->nitems; k++)
      r |= (uint64_t)1 << k;
  } else {
    r |= (uint64_t)1 << o->sender;
    r |= (uint64_t)1 << o->receiver;
  }
  return r;
}

static bool fill_side(const ovl__match *m, uint32_t item, int rank,
                      ovl_mismatch_side *s) {
  const ovl_program *prog = m->prog;
  const ovl__citem *it;
  ovl__citem_desc d;
  memset(s, 0, sizeof *s);
  s->rank = rank;
  s->root = s->peer = s->stream = -1;
  if (item == OVL__NONE)
    return true;
  it = &m->items[item];
  ovl__citem_describe(m, it, &d);
  s->issues = 1;
  s->op = it->op;
  s->op_name = d.op->def->name;
  s->line = d.op->line;
  s->col = d.op->col;
  s->dtype = d.dtype;
  s->count = d.count;
  s->root = d.root;
  s->peer = it->kind == OVL__CI_COLL ? -1 : it->peer;
  s->stream = it->stream;
  s->tag = it->tag;
  if (d.in >= 0 && (s->var = ovl__strdup(prog->vars[d.in].name)) == NULL)
    return false;
  if (d.out >= 0 &&
      (s->out_var = ovl__strdup(prog->vars[d.out].name)) == NULL)
    return false;
  return true;
}

static ovl_status add_occ(void *ctx, const ovl__occ *o, ovl_error *err) {
  ovl_mismatches *mm = ctx;
  const ovl__match *m = mm->m;
  uint64_t keybuf[1 + OVL_MAX_RANKS];
  uint64_t h = occ_key(m, o, keybuf);
  int nkey = 1 + o->nitems;
  mm_key key = {nkey, keybuf};
  void *rec;
  mm_rec *r;
  ovl__sbuf b = {0};

  switch (ovl__flist_add(&mm->list, h, &key, &rec)) {
  case OVL__FLIST_NOMEM:
    goto oom;
  case OVL__FLIST_MORE:
    return OVL_OK;
  case OVL__FLIST_FOUND:
    r = rec;
    r->occurrences++;
    r->ranks |= occ_ranks(o);
    return OVL_OK;
  case OVL__FLIST_NEW:
    break;
  }
  r = rec;
  r->kind = o->kind;
  r->ring = o->ring;
  r->index = o->index + 1;
  r->sender = o->sender;
  r->receiver = o->receiver;
  r->differs = o->differs;
  r->same_size = o->same_size;
  r->occurrences = 1;
  r->ranks = occ_ranks(o);
  r->first_tag = ovl__occ_first_tag(m, o);
  r->nkey = nkey;
  r->key = malloc((size_t)nkey * sizeof *r->key);
  r->nsides = o->nitems;
  r->sides = calloc((size_t)o->nitems, sizeof *r->sides);
  if (r->key == NULL || r->sides == NULL)
    goto oom;
  memcpy(r->key, keybuf, (size_t)nkey * sizeof *keybuf);
  for (int k = 0; k < o->nitems; k++) {
    int rank = o->kind == OVL_MISMATCH_COLLECTIVE ? k
               : k == 0                           ? o->sender
                                                  : o->receiver;
    if (!fill_side(m, o->items[k], rank, &r->sides[k]))
      goto oom;
  }
  ovl__occ_text(m, o, &b);
  if (b.fail || b.s == NULL) {
    free(b.s);
    goto oom;
  }
  r->message = b.s;
  return OVL_OK;
oom:
  return ovl__err(err, OVL_ENOMEM, "mismatch check: out of memory");
}

/* Ring, then the first occurrence's earliest tag, then kind and index. */
static int rec_cmp(const void *pa, const void *pb) {
  const mm_rec *a = pa, *b = pb;
#define CMP(x, y)                                                             \
  if ((x) != (y))                                                             \
    return (x) < (y) ? -1 : 1;
  CMP(a->ring, b->ring);
  CMP(a->first_tag, b->first_tag);
  CMP(a->kind, b->kind);
  CMP(a->sender, b->sender);
  CMP(a->receiver, b->receiver);
  CMP(a->index, b->index);
#undef CMP
  return 0;
}

/* Comm ops of the program, all ranks, without building the matching. */
static uint64_t count_comm(const ovl_program *prog) {
  uint64_t n = 0, all = ovl__program_all_ranks(prog);
  for (size_t i = 0; i < prog->nops; i++) {
    size_t np;
    const ovl__prim *p = ovl__op_prims(prog, i, &np);
    for (size_t k = 0; k < np; k++)
      if (ovl__prim_is_comm(&p[k])) {
        n += (uint64_t)__builtin_popcountll(prog->ops[i].ranks & all);
        break;
      }
  }
  return n;
}

ovl_status ovl_mismatch_check(const ovl_program *prog, ovl_mismatches **out,
                              ovl_error *err) {
  ovl_mismatches *mm;
  ovl__match m;
  ovl_status st;
  if (prog == NULL || out == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_mismatch_check: bad argument");
  *out = NULL;
  if (prog->prim_first == NULL)
    return ovl__err(err, OVL_EINVAL, "ovl_mismatch_check: %s is not lowered",
                    prog->filename);
  mm = calloc(1, sizeof *mm);
  if (mm == NULL)
    return ovl__err(err, OVL_ENOMEM, "mismatch check: out of memory");
  ovl__flist_init(&mm->list, sizeof(mm_rec), OVL_FINDINGS_LIST_MAX, key_eq);
  mm->nranks = prog->nranks > 0 ? prog->nranks : 1;
  if (!ovl__program_ranks_differ(prog)) {
    /* SPMD: every rank issues the same collectives in the same order. */
    mm->nitems = count_comm(prog);
    *out = mm;
    return OVL_OK;
  }
  if ((st = ovl__match_build(prog, &m, err)) != OVL_OK) {
    ovl_mismatches_free(mm);
    return st;
  }
  mm->nitems = m.nitems;
  mm->m = &m;
  st = ovl__match_scan(&m, -1, add_occ, mm, err);
  mm->m = NULL;
  ovl__match_free(&m);
  if (st != OVL_OK) {
    ovl_mismatches_free(mm);
    return st;
  }
  ovl__flist_end(&mm->list, rec_cmp);
  *out = mm;
  return OVL_OK;
}

size_t ovl_mismatches_count(const ovl_mismatches *m) {
  return m ? m->list.n : 0;
}
uint64_t ovl_mismatches_more(const ovl_mismatches *m) {
  return m ? m->list.more : 0;
}

int ovl_mismatches_get(const ovl_mismatches *m, size_t i,
                       ovl_mismatch_finding *info) {
  const mm_rec *r;
  if (info != NULL)
    memset(info, 0, sizeof *info);
  if (m == NULL || info == NULL || i >= m->list.n)
    return -1;
  r = rec_at(m, i);
  info->kind = (ovl_mismatch_kind)r->kind;
  info->ring = r->ring;
  info->index = r->index;
  info->sender = r->sender;
  info->receiver = r->receiver;
  info->differs = r->differs;
  info->same_size = r->same_size;
  info->nsides = r->nsides;
  info->sides = r->sides;
  info->occurrences = r->occurrences;
  info->ranks = r->ranks;
  info->message = r->message;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Formatting                                                          */
/* ------------------------------------------------------------------ */

static const char *kind_name(int kind) {
  switch (kind) {
  case OVL_MISMATCH_COLLECTIVE:
    return "collective";
  case OVL_MISMATCH_UNMATCHED_SEND:
    return "unmatched_send";
  case OVL_MISMATCH_UNMATCHED_RECV:
    return "unmatched_recv";
  default:
    return "pair";
  }
}

static void json_str_or_null(ovl__sbuf *b, const char *s) {
  if (s != NULL)
    ovl__sb_json_str(b, s);
  else
    ovl__sb_puts(b, "null");
}

static void fmt_json(ovl__sbuf *b, const void *res, const ovl_program *prog,
                     const char *file) {
  const ovl_mismatches *m = res;
  ovl__sb_puts(b, "{\"schedule\":");
  ovl__sb_json_str(b, file);
  ovl__sb_printf(b, ",\"ranks\":%d,\"comm_ops\":%llu,\"mismatches\":[",
                 m->nranks, (unsigned long long)m->nitems);
  for (size_t i = 0; i < m->list.n; i++) {
    const mm_rec *r = rec_at(m, i);
    int nd = 0;
    ovl__sb_printf(b, "%s{\"kind\":\"%s\",\"ring\":%d,\"index\":%llu,"
                      "\"sender\":%d,\"receiver\":%d,\"differs\":[",
                   i ? "," : "", kind_name(r->kind), r->ring,
                   (unsigned long long)r->index, r->sender, r->receiver);
    for (unsigned bit = 1; bit <= OVL_DIFFERS_MISSING; bit <<= 1)
      if (r->differs & bit)
        ovl__sb_printf(b, "%s\"%s\"", nd++ ? "," : "",
                       ovl__differs_name(bit));
    ovl__sb_printf(b, "],\"same_size\":%s,\"sides\":[",
                   r->same_size ? "true" : "false");
    for (int k = 0; k < r->nsides; k++) {
      const ovl_mismatch_side *s = &r->sides[k];
      ovl__sb_printf(b, "%s{\"rank\":%d,\"issues\":%s", k ? "," : "",
                     s->rank, s->issues ? "true" : "false");
      if (!s->issues) {
        ovl__sb_puts(b, "}");
        continue;
      }
      ovl__sb_puts(b, ",\"op\":");
      ovl__sb_json_str(b, s->op_name);
      ovl__sb_printf(b, ",\"line\":%d,\"col\":%d,\"var\":", s->line, s->col);
      json_str_or_null(b, s->var);
      ovl__sb_puts(b, ",\"out_var\":");
      json_str_or_null(b, s->out_var);
      ovl__sb_printf(b, ",\"dtype\":\"%s\",\"count\":%lld,\"root\":",
                     ovl_dtype_name(s->dtype), (long long)s->count);
      if (s->root >= 0)
        ovl__sb_printf(b, "%d", s->root);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_puts(b, ",\"peer\":");
      if (s->peer >= 0)
        ovl__sb_printf(b, "%d", s->peer);
      else
        ovl__sb_puts(b, "null");
      ovl__sb_puts(b, ",\"stream\":");
      ovl__sb_json_str(b, prog != NULL ? ovl__stream_name(prog, s->stream)
                                       : "?");
      ovl__sb_printf(b, ",\"tag\":%llu}", (unsigned long long)s->tag);
    }
    ovl__sb_printf(b, "],\"occurrences\":%llu,\"ranks\":[",
                   (unsigned long long)r->occurrences);
    for (int k = 0, n = 0; k < 64; k++)
      if ((r->ranks >> k) & 1)
        ovl__sb_printf(b, "%s%d", n++ ? "," : "", k);
    ovl__sb_puts(b, "],\"message\":");
    ovl__sb_json_str(b, r->message);
    ovl__findings_fix_json(b, r->fix.text, r->fix.checked, r->fix.why);
    ovl__sb_puts(b, "}");
  }
  ovl__sb_printf(b, "],\"count\":%zu,\"more\":%llu}\n", m->list.n,
                 (unsigned long long)m->list.more);
}

static void fmt_human(ovl__sbuf *b, const void *res,
                      const ovl_program *prog, const char *file) {
  const ovl_mismatches *m = res;
  char checked[64];
  (void)prog;
  for (size_t i = 0; i < m->list.n; i++) {
    const mm_rec *r = rec_at(m, i);
    ovl__sb_printf(b, "mismatch %zu: %s", i + 1, r->message);
    if (r->occurrences > 1) {
      ovl__sb_printf(b, " (%llu times in the expanded program, among ",
                     (unsigned long long)r->occurrences);
      ovl__ranks_text(b, r->ranks);
      ovl__sb_puts(b, ")");
    }
    ovl__sb_puts(b, "\n");
    ovl__findings_fix_line(b, r->fix.text, r->fix.checked, r->fix.why);
  }
  snprintf(checked, sizeof checked, ", %llu comm op%s checked",
           (unsigned long long)m->nitems, m->nitems == 1 ? "" : "s");
  ovl__findings_close(b, m->list.n, m->list.more, "mismatched comm op",
                      "mismatch", "mismatches", file, m->nranks, checked);
}

ovl_status ovl_mismatches_format(const ovl_mismatches *m,
                                 const ovl_program *prog, int json,
                                 char **text, ovl_error *err) {
  return ovl__findings_format(m, prog, json ? fmt_json : fmt_human,
                              "ovl_mismatches_format", "mismatch report",
                              text, err);
}

bool ovl__mismatch_set_fix(ovl_mismatches *m, size_t i, char *text,
                           bool checked, const char *why) {
  return ovl__fix_slot_set(&rec_at(m, i)->fix, text, checked, why);
}

int ovl_mismatches_fix(const ovl_mismatches *m, size_t i, ovl_fix_info *out) {
  if (out != NULL)
    memset(out, 0, sizeof *out);
  if (m == NULL || out == NULL || i >= m->list.n)
    return -1;
  ovl__fix_slot_info(&rec_at(m, i)->fix, out);
  return 0;
}
