/*
 * Build: one call statement, its values bound, against its op-table row
 * (core/op.h; docs/ARCHITECTURE.md, "The op table"), for bind.c. The row
 * says what the op takes; this checks the call has it: outputs, inputs
 * (declared variables: build_var.c), attributes (build_attr.c: known to
 * the row, given once, of the right type and range; those the row
 * requires), the output's shape by the row's shape rule for the rank
 * count, and the output variable (declared by its first write, with that
 * shape and dtype for good). Then the op is appended to the template, with
 * its stream, its named event, its ring's needs and what the host fetches.
 *
 * data() declares a variable: its shape, dtype and initial values
 * (build_data.c).
 *
 * Every op takes ranks=[...] (the ranks that run it: op->ranks). Int
 * attributes, list entries and dims may be integer expressions (expr.c)
 * over params and nranks; peer and root may depend on `rank` too, and are
 * then evaluated for each rank that runs the op into the binder's rank_attrs
 * (shared by the ops a repeat block makes of the statement). A statement
 * in a group block gets the template group's number (bind.c numbers the
 * instances once the program is expanded).
 *
 * Every statement is checked once, in source order. That is the same as
 * checking the expanded program: a variable's shape and dtype are fixed
 * when it is first declared, so later iterations of a block see what the
 * first one saw.
 */
#include <stdio.h>
#include <string.h>

#include "lang/build.h"

/* Append an op to the template and count it into the current block; an
 * error if the program grows past OVL_MAX_OPS. */
static ovl_status add_op(binder *B, const ovl__op *op) {
  void *p;
  frame *f = &B->stack[B->depth];
  if (f->nops + 1 > OVL_MAX_OPS)
    return perr(B, op->line, op->col, "program has more than %u ops",
                OVL_MAX_OPS);
  if ((p = ovl__grow(B->ops, &B->capops, B->nops + 1, sizeof *B->ops)) == NULL)
    return nomem(B);
  B->ops = p;
  B->ops[B->nops++] = *op;
  f->nops++;
  return OVL_OK;
}

static ovl_status add_fetch(binder *B, int var) {
  void *p;
  if (B->fetched[var])
    return OVL_OK;
  if ((p = ovl__grow(B->fetch, &B->capfetch, B->nfetch + 1, sizeof *B->fetch)) ==
      NULL)
    return nomem(B);
  B->fetch = p;
  B->fetch[B->nfetch++] = var;
  B->fetched[var] = true;
  return OVL_OK;
}

/* Ring R is named: it has a comm stream (the communicator is made only
 * where a collective runs on it). */
static void name_ring(binder *B, int ring) {
  if (ring + 1 > B->nrings)
    B->nrings = ring + 1;
}

/* The output shape of an op, by its row's shape rule. */
static ovl_status infer_shape(binder *B, const ovl__op *op, shape *out) {
  shape in[OVL_MAX_OP_INPUTS];
  const char *names[OVL_MAX_OP_INPUTS];
  char msg[512];
  for (int k = 0; k < op->nin; k++) {
    shape_of(&B->vars[op->in[k]], &in[k]);
    names[k] = B->vars[op->in[k]].name;
  }
  if (op->def->shape(op->def, op, in, names, op->nin, B->nranks, out, msg,
                     sizeof msg) != NULL)
    return perr(B, op->line, op->col, "%s", msg);
  return OVL_OK;
}

/* A peer or a root that depends on rank (`peer`, `root`: its attribute,
 * or NULL), on each rank that runs op: a new entry of the binder's
 * rank_attrs (2 ints per rank: peer, root; -1 for a rank that does not
 * run it). The other of the two keeps op's value on every rank. */
static ovl_status rank_attrs(binder *B, ovl__op *op, const kwarg *peer_kw,
                             const kwarg *root_kw) {
  size_t base = B->nrank_attrs, n = 2 * (size_t)B->nranks;
  void *p;
  ovl_status st;
  if (base > INT32_MAX - n)
    return perr(B, op->line, op->col,
                "more ops with a rank-dependent peer or root than a program "
                "can hold");
  if ((p = ovl__grow(B->rank_attrs, &B->caprank_attrs, base + n,
                     sizeof *B->rank_attrs)) == NULL)
    return nomem(B);
  B->rank_attrs = p;
  for (int r = 0; r < B->nranks; r++) {
    int64_t peer = -1, root = -1;
    if (ovl__op_on_rank(op, r)) {
      peer = op->peer;
      root = op->root;
      if (peer_kw != NULL &&
          (st = ovl__expr_eval(B, &peer_kw->val.v, r, "peer=", &peer)) !=
              OVL_OK)
        return st;
      if (peer_kw != NULL && (peer < 0 || peer >= B->nranks))
        return ovl__build_rank_out_of_range(B, &peer_kw->val.v, "peer", "=",
                                            peer, r, NULL);
      if (root_kw != NULL &&
          (st = ovl__expr_eval(B, &root_kw->val.v, r, "root=", &root)) !=
              OVL_OK)
        return st;
      if (root_kw != NULL && (root < 0 || root >= B->nranks))
        return ovl__build_rank_out_of_range(B, &root_kw->val.v, "root", "=",
                                            root, r, NULL);
    }
    B->rank_attrs[base + 2 * (size_t)r] = (int32_t)peer;
    B->rank_attrs[base + 2 * (size_t)r + 1] = (int32_t)root;
  }
  B->nrank_attrs = base + n;
  op->rank_attr = (int32_t)base;
  /* ovl__op_peer and ovl__op_root read rank_attrs */
  op->peer = -1;
  op->root = -1;
  return OVL_OK;
}

/* An op of the open group: the template group's number (a new group at
 * its first op), and the group's ring and stream. */
static ovl_status group_op(binder *B, ovl__op *op) {
  const ovl__op *first;
  void *p;
  if (B->group_op0 == SIZE_MAX) {
    if (B->ngroups >= UINT32_MAX)
      return perr(B, op->line, op->col, "too many groups");
    if ((p = ovl__grow(B->group_first, &B->capgroups, B->ngroups + 1,
                       sizeof *B->group_first)) == NULL)
      return nomem(B);
    B->group_first = p;
    B->group_first[B->ngroups++] = B->nops;
    B->group_op0 = B->nops;
    op->group = (uint32_t)B->ngroups;
    return OVL_OK;
  }
  first = &B->ops[B->group_op0];
  op->group = first->group;
  if (op->ring_id != first->ring_id)
    return perr(B, op->line, op->col,
                "%s has ring_id=%d but the first op of its group (%d:%d) has "
                "ring_id=%d: a group's ops share one ring",
                op->def->name, op->ring_id, first->line, first->col,
                first->ring_id);
  if (op->use_calc_stream != first->use_calc_stream)
    return perr(B, op->line, op->col,
                "%s has use_calc_stream=%s but the first op of its group "
                "(%d:%d) has use_calc_stream=%s: a group's ops share one "
                "stream",
                op->def->name, op->use_calc_stream ? "true" : "false",
                first->line, first->col,
                first->use_calc_stream ? "true" : "false");
  return OVL_OK;
}

/* The call's outputs and inputs, counted against op's row. */
static ovl_status check_arity(binder *B, const ovl__op *op, const call *c) {
  const ovl__opdef *def = op->def;
  if (c->nout > def->max_out) {
    const name *extra = &c->out[def->max_out];
    if (def->max_out == 0)
      return perr(B, extra->line, extra->col, "%s has no output", def->name);
    return perr(B, extra->line, extra->col, "%s has %d output, got %d",
                def->name, def->max_out, c->nout);
  }
  if (c->npos < def->min_in || c->npos > def->max_in) {
    if (def->min_in == def->max_in)
      return perr(B, op->line, op->col, "%s takes %d input%s, got %d",
                  def->name, def->min_in, def->min_in == 1 ? "" : "s", c->npos);
    return perr(B, op->line, op->col, "%s takes %s %d input%s, got %d",
                def->name, c->npos < def->min_in ? "at least" : "at most",
                c->npos < def->min_in ? def->min_in : def->max_in,
                (c->npos < def->min_in ? def->min_in : def->max_in) == 1 ? ""
                                                                         : "s",
                c->npos);
  }
  return OVL_OK;
}

/* The output's shape and dtype: by the row's shape rule (with no output
 * named, the op works in place, where its row allows), or, for a
 * receive, out_shape and dtype. */
static ovl_status output_shape(binder *B, ovl__op *op, const call *c,
                               const call_attrs *ca, shape *sh) {
  const ovl__opdef *def = op->def;
  bool has_out = c->nout > 0;
  ovl_status st;

  if (def->shape != NULL) {
    if ((st = infer_shape(B, op, sh)) != OVL_OK)
      return st;
    if (!has_out && !def->inplace_default)
      return perr(B, op->line, op->col,
                  "%s needs an output variable (out = %s(...))", def->name,
                  def->name);
    if (!has_out) {
      shape in;
      shape_of(&B->vars[op->in[0]], &in);
      if (!ovl__shape_dims_eq(&in, sh))
        return perr(B, op->line, op->col,
                    "%s needs an output variable: its output is nranks "
                    "times %s",
                    def->name, sh->dims[0] > in.dims[0] ? "larger" : "smaller");
      op->out = op->in[0];
    }
    /* alltoall moves parts of its input between ranks, a matmul reads
     * all of its inputs while it writes: never in place. */
    for (int k = 0; def->out_distinct && has_out && k < c->npos; k++)
      if (c->out[0].n == c->pos[k].n &&
          memcmp(c->out[0].s, c->pos[k].s, c->out[0].n) == 0)
        return perr(B, c->out[0].line, c->out[0].col,
                    "%s cannot work in place: its output must be another "
                    "variable than its input '%.*s'",
                    def->name, (int)c->pos[k].n, c->pos[k].s);
  }
  if (def->p2p == OVL_P2P_RECV) {
    /* The received variable: out_shape and dtype (float32 by default). */
    memset(sh, 0, sizeof *sh);
    sh->dtype = OVL_DTYPE_FLOAT32;
    if ((st = ovl__build_shape_attr(B, ca->out_shape, sh)) != OVL_OK ||
        (ca->dtype != NULL &&
         (st = ovl__build_dtype_attr(B, ca->dtype, &sh->dtype)) != OVL_OK))
      return st;
    if (!has_out)
      return perr(B, op->line, op->col,
                  "%s needs an output variable (y = %s(...))", def->name,
                  def->name);
  }
  return OVL_OK;
}

ovl_status ovl__build_call(binder *B, const ovl__opdef *def, const call *c) {
  ovl__op op;
  kw_seen seen;
  call_attrs ca = {0};
  bool has_out;
  shape sh;
  ovl_status st;

  if (def == NULL)
    return ovl__build_data(B, c);

  memset(&op, 0, sizeof op);
  op.def = def;
  op.line = c->op.line;
  op.col = c->op.col;
  op.out = -1;
  op.scale = 1.0;
  op.stream = OVL_STREAM_CALC;
  op.event = -1;
  op.ranks = B->nranks >= 64 ? ~(uint64_t)0
                             : (((uint64_t)1 << B->nranks) - 1);
  op.rank_attr = -1;

  if ((st = check_arity(B, &op, c)) != OVL_OK)
    return st;
  for (int i = 0; i < c->npos; i++)
    if ((st = ovl__build_resolve_var(B, &c->pos[i], &op.in[i])) != OVL_OK)
      return st;
  op.nin = c->npos;

  memset(&seen, 0, sizeof seen);
  for (int i = 0; i < c->nkw; i++)
    if ((st = ovl__build_apply_attr(B, &op, &c->kw[i], &seen, &ca)) != OVL_OK)
      return st;
  if ((st = ovl__build_check_required(B, &op, &seen)) != OVL_OK)
    return st;
  if ((ca.rank_peer != NULL || ca.rank_root != NULL) &&
      (st = rank_attrs(B, &op, ca.rank_peer, ca.rank_root)) != OVL_OK)
    return st;
  /* stream=comm puts the op on the comm stream of its ring, which exists
   * for every ring a schedule names. */
  if ((def->attrs & OVL_ATTR_STREAM) && ca.stream_comm) {
    op.stream = OVL_STREAM_COMM(op.ring_id);
    name_ring(B, op.ring_id);
  }
  op.stream = ovl__op_place(&op);

  has_out = c->nout > 0;
  if ((st = output_shape(B, &op, c, &ca, &sh)) != OVL_OK)
    return st;
  if (def->ring_use & OVL_RING_COLLECTIVE)
    B->ring_coll[op.ring_id] = true;
  if (def->ring_use & (OVL_RING_COLLECTIVE | OVL_RING_ORDERS))
    name_ring(B, op.ring_id);
  /* What the host reads is fetched: it comes back in the result. */
  if (def->reads && op.stream == OVL_STREAM_HOST)
    for (int i = 0; i < op.nin; i++)
      if ((st = add_fetch(B, op.in[i])) != OVL_OK)
        return st;
  if (has_out && (st = ovl__build_output(B, &c->out[0], &sh, def->name,
                                         &op.out)) != OVL_OK)
    return st;
  if (B->in_group && (st = group_op(B, &op)) != OVL_OK)
    return st;
  return add_op(B, &op);
}
