/*
 * Bind: a schedule's statements -> a program, for a rank count, -D values
 * and a backend's defaults (lang/lang.h; docs/ARCHITECTURE.md, "The
 * pipeline"). The schedule is only read: it can be bound any number of
 * times, at once, and the program refers to nothing of it.
 *
 * The statements are walked once, in source order:
 *   - a param gets its value: a -D, else its cpu= default when the
 *     backend's defaults are asked for, else its default;
 *   - a call gets its values (a name of a param declared above becomes the
 *     param's value; one declared below is an error) and is built against
 *     its op-table row by build.c, which appends one op to a template;
 *   - repeat blocks are kept as ranges over the template, their expanded
 *     size counted as they close: a huge repeat count is refused before
 *     anything is allocated for it;
 *   - a group block marks its ops with the template group's number.
 * Then the caller's op limit is checked, and the template is expanded
 * (each expanded instance of a group numbered in program order),
 * assembled and lowered.
 *
 * Everything that depends on values is checked here: -D, params, repeat
 * counts given by params, variables, attributes, shapes and dtypes, ranks,
 * rings. The first error stops binding; its message is "file:line:col:
 * message" as parsing's are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/* A value as written, with the name of a param declared above replaced by
 * the param's value (at the position where it is used); *from is the -D
 * that value came from, or NULL. Expressions are evaluated where they are
 * used (build.c). */
static ovl_status resolve(binder *B, scalar *v, const define **from) {
  const bparam *p;
  int line = v->line, col = v->col;
  *from = NULL;
  if (v->kind != V_NAME)
    return OVL_OK;
  if ((p = bind_find_param(B, v->s, v->n)) == NULL)
    return ovl__bind_not_later_param(B, v->s, v->n, line, col);
  *v = p->value;
  v->line = line;
  v->col = col;
  *from = p->from;
  return OVL_OK;
}

/* The call statement sc into B->call, its values resolved in the order
 * they are written. */
static ovl_status unpack(binder *B, const scall *sc) {
  const ovl_schedule *S = B->S;
  call *c = &B->call;
  int kout = sc->nout < MAX_OUTS ? sc->nout : MAX_OUTS;
  int kpos = sc->npos < OVL_MAX_OP_INPUTS ? sc->npos : OVL_MAX_OP_INPUTS;
  ovl_status st;
  c->op = sc->op;
  c->nout = sc->nout;
  c->npos = sc->npos;
  c->nkw = sc->nkw;
  /* (S->names is NULL in a schedule that names nothing.) */
  for (int i = 0; i < kout; i++)
    c->out[i] = S->names[sc->first_name + (uint32_t)i];
  for (int i = 0; i < kpos; i++)
    c->pos[i] = S->names[sc->first_name + (uint32_t)(kout + i)];
  for (int i = 0; i < sc->nkw; i++) {
    const skw *k = &S->kws[sc->first_kw + (uint32_t)i];
    kwarg *kw = &c->kw[i];
    kw->key = k->key;
    kw->val.v = k->v;
    kw->val.nitems = k->nitems;
    if (k->v.kind != V_LIST) {
      if ((st = resolve(B, &kw->val.v, &kw->from[0])) != OVL_OK)
        return st;
      continue;
    }
    kw->from[0] = NULL;
    for (int j = 0; j < k->nitems; j++) {
      kw->val.items[j] = S->items[k->first + (uint32_t)j];
      if ((st = resolve(B, &kw->val.items[j], &kw->from[1 + j])) != OVL_OK)
        return st;
    }
  }
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Statements: param, repeat, '}'                                      */
/* ------------------------------------------------------------------ */

/* param i: its value (an expression's, evaluated). */
static ovl_status bind_param(binder *B, size_t i) {
  const sparam *sp = &B->S->params[i];
  const name *nm = &B->S->pnames.names[i];
  scalar dflt = sp->dflt, cpu = sp->cpu;
  const define *dflt_from, *cpu_from = NULL;
  bparam *bp = &B->params[i];
  const define *d;
  ovl_status st;
  int idx;
  if ((idx = bind_find_var(B, nm->s, nm->n)) >= 0)
    return perr(B, nm->line, nm->col,
                "'%.*s' is already a variable (declared at %d:%d)", (int)nm->n,
                nm->s, B->vars[idx].line, B->vars[idx].col);
  if ((st = resolve(B, &dflt, &dflt_from)) != OVL_OK ||
      (sp->cpu_plain != NULL &&
       (st = resolve(B, &cpu, &cpu_from)) != OVL_OK))
    return st;
  if ((d = ovl__define_find(B->defs, nm->s, nm->n)) != NULL) {
    bp->value = d->val;
    bp->origin = OVL_PARAM_DEFINED;
    bp->from = d;
  } else if (B->cpu_defaults && sp->cpu_plain != NULL) {
    bp->value = cpu;
    bp->origin = OVL_PARAM_CPU_DEFAULT;
    bp->from = cpu_from;
  } else {
    bp->value = dflt;
    bp->origin = OVL_PARAM_DEFAULT;
    bp->from = dflt_from;
  }
  if (bp->value.kind == V_EXPR) {
    char what[MAX_IDENT + 16];
    int64_t v;
    bool is_int;
    snprintf(what, sizeof what, "param %.*s = ", (int)nm->n, nm->s);
    if ((st = ovl__int_value(B, &bp->value, what, "a param", &v, &is_int)) !=
        OVL_OK)
      return st;
    bp->value.kind = V_INT;
    bp->value.i = v;
  }
  B->nbound = i + 1;
  return OVL_OK;
}

/* repeat COUNT { */
static ovl_status open_block(binder *B, const stmt *s) {
  scalar count = B->S->items[s->index];
  const define *from;
  ovl_status st;
  void *p;
  /* A literal count was checked when it was parsed. */
  if (count.kind == V_NAME &&
      ((st = resolve(B, &count, &from)) != OVL_OK ||
       (st = ovl__check_count(B->err, B->filename, &count, from)) != OVL_OK))
    return st;
  if (count.kind == V_EXPR) {
    char text[96];
    int64_t n;
    bool is_int;
    if ((st = ovl__int_value(B, &count, "repeat ", "a repeat count", &n,
                             &is_int)) != OVL_OK)
      return st;
    if (n < 1)
      return perr(B, count.line, count.col,
                  "repeat count must be >= 1, got %s = %lld",
                  ovl__expr_text(B->S, &count, text, sizeof text),
                  (long long)n);
    count.kind = V_INT;
    count.i = n;
  }
  if ((p = ovl__grow(B->blocks, &B->capblocks, B->nblocks + 1,
                     sizeof *B->blocks)) == NULL)
    return nomem(B);
  B->blocks = p;
  B->blocks[B->nblocks].first = B->nops;
  B->blocks[B->nblocks].end = B->nops;
  B->blocks[B->nblocks].count = count.i;
  B->blocks[B->nblocks].line = s->line;
  B->blocks[B->nblocks].parent =
      B->depth > 0 ? (int)B->stack[B->depth].block : -1;
  B->blocks[B->nblocks].off = B->stack[B->depth].nops;
  frame *f = &B->stack[++B->depth];
  f->line = s->line;
  f->col = s->col;
  f->count = count.i;
  f->nops = 0;
  f->block = B->nblocks++;
  return OVL_OK;
}

/* } (balanced: parsing checked it) */
static ovl_status close_block(binder *B) {
  frame *f = &B->stack[B->depth--];
  frame *parent = &B->stack[B->depth];
  if (f->nops == 0) {
    /* Nothing to expand. Blocks nested in it were empty too and are gone,
     * so it is the last one. */
    B->nblocks--;
    return OVL_OK;
  }
  B->blocks[f->block].end = B->nops;
  B->blocks[f->block].n = f->nops;
  if ((uint64_t)f->count > OVL_MAX_OPS / f->nops ||
      parent->nops + f->nops * (uint64_t)f->count > OVL_MAX_OPS)
    return perr(B, f->line, f->col,
                "repeat makes the program longer than %u ops", OVL_MAX_OPS);
  parent->nops += f->nops * (uint64_t)f->count;
  return OVL_OK;
}

static ovl_status bind_statements(binder *B) {
  const ovl_schedule *S = B->S;
  ovl_status st = OVL_OK;
  for (size_t i = 0; i < S->nstmts && st == OVL_OK; i++) {
    const stmt *s = &S->stmts[i];
    switch (s->kind) {
    case S_CALL:
      if ((st = unpack(B, &S->calls[s->index])) == OVL_OK)
        st = ovl__build_call(B, S->calls[s->index].def, &B->call);
      break;
    case S_PARAM:
      st = bind_param(B, s->index);
      break;
    case S_REPEAT:
      st = open_block(B, s);
      break;
    case S_GROUP:
      B->in_group = true;
      B->group_op0 = SIZE_MAX;
      break;
    case S_CLOSE:
      /* A group holds no block: it is the innermost one open. */
      if (B->in_group)
        B->in_group = false;
      else
        st = close_block(B);
      break;
    }
  }
  return st;
}

/* The caller's limit on the expanded program (ovl_bind_opts.max_ops),
 * checked once every statement is bound and before anything is allocated
 * for the expansion: its length is known from the template. */
#define OVER_LIMIT " ops after repeat expansion; the limit is "
static ovl_status check_max_ops(binder *B, uint64_t max_ops) {
  uint64_t n = B->stack[0].nops;
  if (max_ops == 0 || n <= max_ops)
    return OVL_OK;
  return ovl__err(B->err, OVL_ENOMEM,
                  "%s: the program has %llu" OVER_LIMIT "%llu", B->filename,
                  (unsigned long long)n, (unsigned long long)max_ops);
}

bool ovl__bind_over_limit(const ovl_error *err) {
  return err->status == OVL_ENOMEM && strstr(err->msg, OVER_LIMIT) != NULL;
}

/* ------------------------------------------------------------------ */
/* Assembly: the program                                               */
/* ------------------------------------------------------------------ */

/* Write the template ops [lo, hi) with their blocks expanded, starting at
 * block *b; returns how many ops were written. Recursion depth is bounded
 * by MAX_DEPTH. */
static size_t emit(const binder *B, size_t lo, size_t hi, size_t *b,
                   ovl__op *out) {
  size_t k = 0, i = lo;
  while (i < hi) {
    if (*b < B->nblocks && B->blocks[*b].first == i) {
      const block *bl = &B->blocks[(*b)++];
      size_t n = emit(B, bl->first, bl->end, b, out + k);
      for (int64_t r = 1; r < bl->count; r++)
        memcpy(out + k + (size_t)r * n, out + k, n * sizeof *out);
      k += n * (size_t)bl->count;
      i = bl->end;
    } else {
      out[k++] = B->ops[i++];
    }
  }
  return k;
}

/* The program's streams: calc, a comm stream per ring named, then the
 * user streams in order of first use, each with its name; ops on user
 * streams get their numbers; the rings that need a communicator. False
 * when out of memory. */
static bool number_streams(binder *B, ovl_program *prog) {
  int first_user = 1 + B->nrings;
  prog->nstreams = first_user + (int)B->nustreams;
  prog->stream_names = calloc((size_t)prog->nstreams,
                              sizeof *prog->stream_names);
  if (prog->stream_names == NULL)
    return false;
  for (int s = 0; s < prog->nstreams; s++) {
    char buf[32];
    const char *name = buf;
    if (s == OVL_STREAM_CALC)
      name = "calc";
    else if (s < first_user)
      snprintf(buf, sizeof buf, "comm[%d]", s - 1);
    else
      name = B->ustreams[s - first_user];
    if ((prog->stream_names[s] = ovl__strdup(name)) == NULL)
      return false;
  }
  for (size_t i = 0; i < prog->nops; i++)
    if (prog->ops[i].stream < OVL_STREAM_HOST)
      prog->ops[i].stream = first_user + (-2 - prog->ops[i].stream);
  for (int r = 0; r < B->nrings; r++)
    if (B->ring_coll[r])
      prog->ring_comm |= 1u << r;
  return true;
}

/* The expanded ops: each instance of a group numbered, in program order
 * (op->src holds the template index until here), then op->src set. */
static void number_ops(const binder *B, ovl__op *ops, size_t n) {
  uint32_t instance = 0;
  for (size_t i = 0; i < n; i++) {
    ovl__op *op = &ops[i];
    if (op->group != 0) {
      if (op->src == B->group_first[op->group - 1])
        instance++;
      op->group = instance;
    }
    op->src = (uint32_t)i;
  }
}

/* Whether the ranks do not all run the same program: an op runs on some
 * ranks only, has a rank-dependent attribute, or is point-to-point. */
static bool rank_dependent(const binder *B) {
  const uint64_t all = B->nranks >= 64 ? ~(uint64_t)0
                                       : (((uint64_t)1 << B->nranks) - 1);
  for (size_t k = 0; k < B->nops; k++) {
    const ovl__op *op = &B->ops[k];
    if (op->ranks != all || op->rank_attr >= 0 ||
        op->def->p2p != OVL_P2P_NONE)
      return true;
  }
  return false;
}

static ovl_status assemble(binder *B, ovl_program **out) {
  const ovl_schedule *S = B->S;
  char buf[64];
  size_t total = (size_t)B->stack[0].nops, b = 0;
  ovl_program *prog;
  /* Past OVL_MAX_RANKS every rank must run the same ops (core/op.h). */
  if (B->nranks > OVL_MAX_RANKS && rank_dependent(B))
    for (size_t k = 0; k < B->nops; k++)
      if (B->ops[k].rank_attr >= 0 || B->ops[k].def->p2p != OVL_P2P_NONE)
        return perr(B, B->ops[k].line, B->ops[k].col,
                    "%s: %s on %d ranks: past %d only schedules whose "
                    "ranks all run the same ops bind (no point-to-point, "
                    "no peer or root that depends on rank)",
                    B->ops[k].def->name,
                    B->ops[k].def->p2p != OVL_P2P_NONE
                        ? "point-to-point"
                        : "an attribute that depends on rank",
                    B->nranks, OVL_MAX_RANKS);
  prog = calloc(1, sizeof *prog);
  if (prog == NULL)
    return nomem(B);
  prog->nranks = B->nranks;
  prog->nrings = B->nrings;
  prog->rank_dependent = rank_dependent(B);
  for (size_t k = 0; k < B->nops; k++)
    B->ops[k].src = (uint32_t)k;
  if ((prog->filename = ovl__strdup(B->filename)) == NULL)
    goto nomem;
  if (S->pnames.n > 0) {
    prog->params = calloc(S->pnames.n, sizeof *prog->params);
    if (prog->params == NULL)
      goto nomem;
    for (size_t i = 0; i < S->pnames.n; i++) {
      ovl__param *q = &prog->params[i];
      const bparam *bp = &B->params[i];
      prog->nparams++;
      q->origin = bp->origin;
      q->value = ovl__strdup(ovl__scalar_text(&bp->value, buf, sizeof buf));
      q->name = ovl__strdup(S->params[i].name);
      q->plain_default = ovl__strdup(S->params[i].plain);
      if (q->value == NULL || q->name == NULL || q->plain_default == NULL)
        goto nomem;
    }
  }
  if (B->nblocks == 0) {
    prog->ops = ovl__shrink(B->ops, total, sizeof *B->ops);
    B->ops = NULL;
  } else if (total > 0) {
    if ((prog->ops = malloc(total * sizeof *prog->ops)) == NULL)
      goto nomem;
    emit(B, 0, B->nops, &b, prog->ops);
  }
  prog->nops = total;
  number_ops(B, prog->ops, total);
  prog->rank_attrs = ovl__shrink(B->rank_attrs, B->nrank_attrs,
                                 sizeof *B->rank_attrs);
  prog->nrank_attrs = B->nrank_attrs;
  B->rank_attrs = NULL;
  B->nrank_attrs = 0;
  if (B->nblocks > 0) {
    if ((prog->blocks = malloc(B->nblocks * sizeof *prog->blocks)) == NULL)
      goto nomem;
    prog->nblocks = B->nblocks;
    for (size_t k = 0; k < B->nblocks; k++) {
      const block *bl = &B->blocks[k];
      prog->blocks[k] = (ovl__block){.line = bl->line,
                                     .parent = bl->parent,
                                     .count = bl->count,
                                     .off = bl->off,
                                     .n = bl->n};
    }
  }
  prog->vars = ovl__shrink(B->vars, B->nvars, sizeof *B->vars);
  prog->nvars = B->nvars;
  B->vars = NULL;
  B->nvars = 0;
  prog->fetch = ovl__shrink(B->fetch, B->nfetch, sizeof *B->fetch);
  prog->nfetch = B->nfetch;
  B->fetch = NULL;
  prog->events = ovl__shrink(B->events, B->nevents, sizeof *B->events);
  prog->nevents = B->nevents;
  B->events = NULL;
  B->nevents = 0;
  if (!number_streams(B, prog))
    goto nomem;
  {
    ovl_status st = ovl__program_lower(prog, B->err);
    if (st != OVL_OK) {
      ovl_program_free(prog);
      return st;
    }
  }
  *out = prog;
  return OVL_OK;
nomem:
  ovl_program_free(prog);
  return nomem(B);
}

static void binder_free(binder *B) {
  for (size_t i = 0; i < B->nvars; i++)
    free(B->vars[i].name);
  free(B->vars);
  free(B->fetched);
  free(B->varmap.e);
  free(B->params);
  free(B->ops);
  free(B->blocks);
  free(B->fetch);
  free(B->rank_attrs);
  free(B->group_first);
  for (size_t i = 0; i < B->nevents; i++)
    free(B->events[i]);
  free(B->events);
  free(B->eventmap.e);
  for (size_t i = 0; i < B->nustreams; i++)
    free(B->ustreams[i]);
  free(B->ustreams);
  free(B->ustreammap.e);
  free(B);
}

ovl_status ovl__schedule_bind(const ovl_schedule *S, int nranks,
                              bool cpu_defaults, const defines *defs,
                              uint64_t max_ops, ovl_program **out,
                              ovl_error *err) {
  binder *B;
  ovl_status st;
  if ((B = calloc(1, sizeof *B)) == NULL)
    return ovl__lang_nomem(err, S->filename);
  B->S = S;
  B->filename = S->filename;
  B->nranks = nranks;
  B->cpu_defaults = cpu_defaults;
  B->defs = defs;
  B->err = err;
  st = ovl__defines_check(defs, &S->pnames, S->filename, err);
  if (st == OVL_OK && S->pnames.n > 0 &&
      (B->params = calloc(S->pnames.n, sizeof *B->params)) == NULL)
    st = nomem(B);
  if (st == OVL_OK)
    st = bind_statements(B);
  if (st == OVL_OK)
    st = check_max_ops(B, max_ops);
  if (st == OVL_OK)
    st = assemble(B, out);
  binder_free(B);
  return st;
}
