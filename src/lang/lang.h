/*
 * The schedule language, internal to src/lang/ (docs/ARCHITECTURE.md, "The
 * pipeline"; docs/LANGUAGE.md). Two steps:
 *
 *   parse  text -> ovl_schedule: the statements as written, checked for
 *          syntax. No rank count, no backend, no -D: a param's name stays a
 *          name wherever it is used.
 *   bind   ovl_schedule + (ranks, -D, backend defaults) -> ovl_program:
 *          params given values, names of params replaced by them, every
 *          call checked against its op-table row (variables, attributes,
 *          shapes), repeat blocks expanded, the program lowered.
 *
 * The files:
 *   lex.c       bytes -> tokens (lex.h)
 *   syntax.c    tokens -> the statements of a schedule (parse)
 *   bind.c      the statements -> a program: params, repeat blocks, rings,
 *               the expansion and the assembly (bind)
 *   build.c     one call statement against its op-table row: variables,
 *               attributes, shapes, data() (for bind.c)
 *   expr.c      integer expressions: their text, their values (for
 *               bind.c and build.c)
 *   defines.c   -D NAME=VALUE: the values, and that each names a param
 *   common.c    what they share: a hash map of names, growable arrays, the
 *               text of values, diagnostics
 *   schedule.c  the public API of schedules, and ovl_program_parse/load
 *               (parse + bind); what the layers above get (schedule.h)
 *
 * The first error stops either step; its message is "file:line:col: ...".
 */
#ifndef OVL_LANG_LANG_H
#define OVL_LANG_LANG_H

#include "core/op.h"
#include "lang/lex.h"
#include "lang/schedule.h"

/* ------------------------------------------------------------------ */
/* Limits                                                              */
/* ------------------------------------------------------------------ */

/* Largest schedule: keeps every line and column number in an int, and
 * every index into a schedule's arrays in a uint32_t. */
#define MAX_TEXT ((size_t)64 << 20)
/* Deepest nesting of repeat blocks. */
#define MAX_DEPTH 64
/* Elements of one list value, keyword arguments and outputs of one call. */
#define MAX_LIST 16
#define MAX_KW 16
#define MAX_OUTS 8
/* Named events (event_record / stream_wait_event) of one program. */
#define MAX_EVENTS 4096
/* Deepest nesting of parentheses and unary minus in one expression, and
 * the deepest evaluation stack one may need. */
#define MAX_EXPR_DEPTH 64
#define MAX_EXPR_STACK (2 * MAX_EXPR_DEPTH + 8)

/* ------------------------------------------------------------------ */
/* Name tables and growable arrays (common.c)                          */
/* ------------------------------------------------------------------ */

/* Open addressing, keys borrowed (they outlive the map). */
typedef struct map_entry {
  const char *key; /* NULL: empty slot */
  size_t len;
  uint64_t hash;
  int64_t val;
} map_entry;

typedef struct map {
  map_entry *e;
  size_t cap, n; /* cap: 0 or a power of two */
} map;

/* The value of `key`, or NULL. */
int64_t *ovl__map_find(const map *m, const char *key, size_t len);
/* Add a key that is not in the map. False when out of memory. */
bool ovl__map_put(map *m, const char *key, size_t len, int64_t val);

/* `ptr` grown to hold at least n elements; NULL (ptr untouched) when out
 * of memory. */
void *ovl__grow(void *ptr, size_t *cap, size_t n, size_t size);
/* `ptr` cut down to n elements (freed for 0; kept if realloc fails). */
void *ovl__shrink(void *ptr, size_t n, size_t size);
char *ovl__strndup(const char *s, size_t n);

/* ------------------------------------------------------------------ */
/* Values and statements                                               */
/* ------------------------------------------------------------------ */

/* V_EXPR: an integer expression with an operator, parentheses, `rank` or
 * `nranks` (a lone literal or name stays what it is); V_RANGE: A:B, an
 * entry of ranks=[...]. Both are the schedule's exprs[i]. V_OP: an
 * operator node of an expression (below). */
typedef enum {
  V_INT,
  V_FLOAT,
  V_BOOL,
  V_NAME,
  V_LIST,
  V_EXPR,
  V_RANGE,
  V_OP
} vkind;

/* Operators of V_OP nodes (scalar.i): the binary ones by their character,
 * unary minus, and the ':' of a range (its last node). */
enum { OP_NEG = 'n', OP_RANGE = ':' };

/* 24 bytes: a schedule keeps one per value it holds. */
typedef struct scalar {
  vkind kind;
  int line, col; /* where it was written (for a param: where it is used) */
  uint32_t n;    /* V_NAME: the length of s (at most MAX_IDENT) */
  union {
    int64_t i;     /* V_INT; V_EXPR, V_RANGE: index in exprs; V_OP */
    double f;      /* V_FLOAT */
    bool b;        /* V_BOOL */
    const char *s; /* V_NAME (not terminated) */
  };
} scalar;

/* An integer expression as written: its nodes in postfix order (V_INT,
 * V_NAME: a param, `rank` or `nranks`; V_OP), each where it was written. */
typedef struct sexpr {
  const char *text; /* as written, in the schedule's text (messages) */
  uint32_t len;
  uint32_t first, n; /* the schedule's enodes[first .. first + n) */
  /* Where it first names `rank` (0: nowhere). */
  int rank_line, rank_col;
} sexpr;

typedef struct value {
  scalar v; /* kind V_LIST: v.line, v.col are those of the '[' */
  int nitems;
  scalar items[MAX_LIST];
} value;

/* The canonical text of a scalar: 10000, 2.5, true, calc. */
const char *ovl__scalar_text(const scalar *v, char *buf, size_t size);
/* s[0..n) on one line in buf: each run of blanks, newlines and comments
 * one blank; cut short with "..." when it does not fit in `size` (at
 * least 4). */
const char *ovl__one_line(const char *s, size_t n, char *buf, size_t size);
/* How a diagnostic shows a value: names are quoted. */
const char *ovl__scalar_desc(const scalar *v, char *buf, size_t size);
bool ovl__name_eq(const char *s, size_t n, const char *word);
/* true, false, param, repeat, group, rank, nranks. */
bool ovl__is_reserved(const char *s, size_t n);

typedef struct name {
  const char *s;
  size_t n;
  int line, col;
} name;

/* Names in order, and where each is (name -> index). */
typedef struct name_list {
  name *names;
  size_t n, cap;
  map index;
} name_list;
/* Add a name that is not in the list. False when out of memory. */
bool ovl__names_add(name_list *l, const name *nm);
void ovl__names_free(name_list *l);

struct define;

typedef struct kwarg {
  name key;
  value val;
  /* Binding: the -D that gave the value (from[0]) or list item j
   * (from[1 + j]), through a param; else NULL. Messages name it. */
  const struct define *from[1 + MAX_LIST];
} kwarg;

/* One call statement: [out, ... =] op(pos, ..., key=value, ...). */
typedef struct call {
  int nout; /* may exceed MAX_OUTS; only the first are kept */
  name out[MAX_OUTS];
  name op;
  int npos; /* may exceed OVL_MAX_OP_INPUTS; only the first are kept */
  name pos[OVL_MAX_OP_INPUTS];
  int nkw;
  kwarg kw[MAX_KW];
} call;

/* ------------------------------------------------------------------ */
/* Schedules: the statements as written (syntax.c)                     */
/* ------------------------------------------------------------------ */

/* S_GROUP: `group {`; S_CLOSE closes the innermost repeat or group. */
typedef enum { S_CALL, S_PARAM, S_REPEAT, S_GROUP, S_CLOSE } stmt_kind;

typedef struct stmt {
  stmt_kind kind;
  int line, col; /* of the op name of a call, else of the first token */
  /* S_CALL: calls[index]; S_PARAM: params[index]; S_REPEAT: its count,
   * items[index]. */
  uint32_t index;
} stmt;

/* A keyword argument; a list's items are items[first .. first + nitems). */
typedef struct skw {
  name key;
  scalar v;
  uint32_t first;
  int nitems;
} skw;

/* A call statement, packed: its outputs then its positional arguments
 * are names[first_name ...] (the first MAX_OUTS and OVL_MAX_OP_INPUTS of
 * them), its keyword arguments kws[first_kw .. first_kw + nkw). */
typedef struct scall {
  const ovl__opdef *def; /* NULL: data() */
  name op;
  int nout, npos, nkw;   /* as written */
  uint32_t first_name, first_kw;
} scall;

/* A param declaration: param NAME = VALUE [, cpu = VALUE]. Its name and
 * position are the schedule's pnames.names[i]. */
typedef struct sparam {
  char *name;      /* terminated */
  char *plain;     /* the default as written */
  char *cpu_plain; /* the cpu= default as written, or NULL */
  scalar dflt, cpu; /* as written: a V_NAME may name an earlier param */
} sparam;

struct ovl_schedule_s {
  char *filename;
  /* The text: every name and value points into it. Owned unless the
   * schedule lives only inside ovl_program_parse. */
  const char *text;
  size_t len;
  bool own_text;
  stmt *stmts;
  size_t nstmts;
  scall *calls;
  size_t ncalls;
  name *names;
  size_t nnames;
  skw *kws;
  size_t nkws;
  scalar *items; /* list items and repeat counts */
  size_t nitems;
  sexpr *exprs; /* integer expressions (V_EXPR, V_RANGE) */
  size_t nexprs;
  scalar *enodes; /* their nodes */
  size_t nenodes;
  /* Params in order of declaration: pnames.names[i] is params[i]'s name. */
  sparam *params;
  name_list pnames;
};

/* Read the statements of S->text into S (S->filename, text and len set,
 * the arrays empty). On error S holds what was read (ovl_schedule_free
 * frees it). */
ovl_status ovl__syntax_parse(ovl_schedule *S, ovl_error *err);

/* ------------------------------------------------------------------ */
/* Diagnostics (common.c)                                              */
/* ------------------------------------------------------------------ */

/* OVL_EPARSE with "filename:line:col: message". */
ovl_status ovl__lang_err(ovl_error *err, const char *filename, int line,
                         int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* OVL_ENOMEM with "filename: out of memory parsing the schedule". */
ovl_status ovl__lang_nomem(ovl_error *err, const char *filename);
/* For any state with `err` and `filename`. */
#define perr(P, line, col, ...)                                               \
  ovl__lang_err((P)->err, (P)->filename, (line), (col), __VA_ARGS__)
#define nomem(P) ovl__lang_nomem((P)->err, (P)->filename)

/* A repeat count must be an int >= 1. `from`: the -D it came from, or
 * NULL. */
ovl_status ovl__check_count(ovl_error *err, const char *filename,
                            const scalar *count,
                            const struct define *from);

/* ------------------------------------------------------------------ */
/* -D defines (defines.c)                                              */
/* ------------------------------------------------------------------ */

typedef struct define {
  const char *raw; /* "NAME=VALUE" as given (one token after '=') */
  const char *name;
  size_t n;
  scalar val; /* a V_NAME borrows raw */
} define;

typedef struct defines {
  define *d;
  size_t n;
} defines;

/* The values of NAME=VALUE strings (each value exactly one token).
 * `filename` names the schedule in an out-of-memory message. */
ovl_status ovl__defines_parse(const char *const *raw, size_t n,
                              const char *filename, defines *out,
                              ovl_error *err);
void ovl__defines_free(defines *d);
/* " (from -D NAME=VALUE)" for a value that came from `from`; "" for
 * NULL. buf holds DEFINE_FROM_SIZE (a define's name and value are at most
 * MAX_IDENT bytes each). */
#define DEFINE_FROM_SIZE (2 * MAX_IDENT + 32)
const char *ovl__from_define(const define *from, char *buf, size_t size);
/* The define of a name (the last one wins), or NULL. */
const define *ovl__define_find(const defines *d, const char *s, size_t n);
/* Every define names one of `params`, the params of `filename`. */
ovl_status ovl__defines_check(const defines *d, const name_list *params,
                              const char *filename, ovl_error *err);
/* Every `param NAME` at the start of a statement of `text`, by the lexer
 * alone; *complete is false when a lexical error ended the scan. */
ovl_status ovl__params_scan(const char *text, size_t len,
                            const char *filename, name_list *out,
                            bool *complete, ovl_error *err);

/* ------------------------------------------------------------------ */
/* Binding (bind.c, build.c)                                           */
/* ------------------------------------------------------------------ */

/* A param as bound. */
typedef struct bparam {
  scalar value; /* a V_NAME borrows the schedule's text or a -D */
  ovl_param_origin origin;
  const define *from; /* the -D its value comes from (maybe through
                       * another param), or NULL */
} bparam;

/* An open repeat block (frame 0 is the file itself). */
typedef struct frame {
  int line, col;   /* of `repeat` */
  int64_t count;
  uint64_t nops;   /* ops of the body so far, expanded */
  size_t block;    /* index in blocks */
} frame;

/* A repeat block as a range of the template: ops [first, end) run `count`
 * times. Blocks are kept in the order they open (outer before inner). For
 * the program's blocks (ovl__block): where `repeat` is, the enclosing
 * block (-1: none), where its first iteration starts in the enclosing
 * block's iteration and how many ops an iteration runs, expanded. */
typedef struct block {
  size_t first, end;
  int64_t count;
  int line;
  int parent;
  uint64_t off, n;
} block;

/* The first op that needs a ring's comm stream. */

/* Most user streams a schedule may name. */
#define MAX_USER_STREAMS (OVL_MAX_STREAMS - 1 - OVL_MAX_RINGS)
/* op->stream of user stream k while binding (below OVL_STREAM_HOST). */
#define OVL__STREAM_USER_TAG(k) (-2 - (int)(k))

typedef struct binder {
  const ovl_schedule *S;
  const char *filename;
  int nranks;
  bool cpu_defaults;
  const defines *defs;
  ovl_error *err;

  ovl__var *vars;
  size_t nvars, capvars;
  bool *fetched; /* per variable */
  size_t capfetched;
  map varmap; /* name -> index in vars */

  /* params[0 .. nbound): the params declared so far, as bound. */
  bparam *params;
  size_t nbound;

  ovl__op *ops; /* the template: one op per call statement */
  size_t nops, capops;
  block *blocks;
  size_t nblocks, capblocks;
  frame stack[MAX_DEPTH + 1];
  int depth;

  int *fetch;
  size_t nfetch, capfetch;

  /* Rings named (1 + the highest; each has a comm stream), and those that
   * carry a collective or point-to-point op (they need a communicator). */
  int nrings;
  bool ring_coll[OVL_MAX_RINGS];

  /* Per-rank peer and root (ovl__op.rank_attr): 2 * nranks ints per
   * template op that has them. */
  int32_t *rank_attrs;
  size_t nrank_attrs, caprank_attrs;

  /* Groups: the open one (a group holds no block, so it is innermost),
   * and for each group of the template (op->group - 1 in the template) its
   * first op, where each expanded instance starts. */
  bool in_group;
  size_t group_op0;  /* the open group's first op, or SIZE_MAX: none yet */
  size_t *group_first;
  size_t ngroups, capgroups;

  /* User streams (stream=NAME), in order of first use; an op on user
   * stream k has op->stream OVL__STREAM_USER_TAG(k) until assembly
   * numbers it after the comm streams. */
  char **ustreams;
  size_t nustreams, capustreams;
  map ustreammap; /* name -> index in ustreams */

  char **events; /* named events, in order of first use */
  size_t nevents, capevents;
  map eventmap; /* name -> index in events */

  call call; /* the statement being bound, its values resolved */
} binder;

/* A param declared before the statement being bound, or NULL. */
static inline const bparam *bind_find_param(const binder *B, const char *s,
                                            size_t n) {
  const int64_t *i = ovl__map_find(&B->S->pnames.index, s, n);
  return i != NULL && (size_t)*i < B->nbound ? &B->params[*i] : NULL;
}

static inline int bind_find_var(const binder *B, const char *s, size_t n) {
  const int64_t *i = ovl__map_find(&B->varmap, s, n);
  return i == NULL ? -1 : (int)*i;
}

/* A name that is not a param declared so far: an error if a param of
 * that name is declared further down (expr.c). */
ovl_status ovl__bind_not_later_param(binder *B, const char *s, size_t n,
                                     int line, int col);
/* Check a call against its row (def; NULL for data()) and add it to the
 * template (build.c). */
ovl_status ovl__build_call(binder *B, const ovl__opdef *def, const call *c);

/* ------------------------------------------------------------------ */
/* Integer expressions (expr.c)                                        */
/* ------------------------------------------------------------------ */

/* The text of V_EXPR or V_RANGE `v` as written (each run of blanks,
 * newlines and comments one blank; a long one cut short with "..."); a
 * plain value's text otherwise. */
const char *ovl__expr_text(const ovl_schedule *S, const scalar *v, char *buf,
                           size_t size);
/* Whether `v` (V_EXPR or V_RANGE) names `rank`, and where. */
bool ovl__expr_names_rank(const ovl_schedule *S, const scalar *v, int *line,
                          int *col);
/* The value of V_EXPR `v` on `rank` (unused when it names no rank).
 * `what` starts the messages of division by zero and overflow ("peer=",
 * "repeat "); names that are not int params are errors. */
ovl_status ovl__expr_eval(binder *B, const scalar *v, int rank,
                          const char *what, int64_t *out);
/* The bounds of V_RANGE `v` (it names no rank). */
ovl_status ovl__range_eval(binder *B, const scalar *v, const char *what,
                           int64_t *lo, int64_t *hi);
/* An int value that may be an expression over params and nranks (not
 * rank: "`thing` cannot depend on rank"): a V_INT as it is, a V_EXPR
 * evaluated; *is_int false (nothing reported) for any other value. */
ovl_status ovl__int_value(binder *B, const scalar *v, const char *what,
                          const char *thing, int64_t *out, bool *is_int);

/* Bind S (bind.c); `defs` parsed by ovl__defines_parse. */
ovl_status ovl__schedule_bind(const ovl_schedule *S, int nranks,
                              bool cpu_defaults, const defines *defs,
                              uint64_t max_ops, ovl_program **out,
                              ovl_error *err);

#endif /* OVL_LANG_LANG_H */
