/*
 * Mismatches and deadlocks: the checks of ranks whose communication
 * differs.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_FINDINGS_H
#define OVL_PUBLIC_FINDINGS_H

#include "ovl/program.h"
#include "ovl/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Mismatches: ranks that disagree on a communicator (DESIGN 2.4 #2).   */
/* ------------------------------------------------------------------ */

/*
 * Per ring, each rank's communication in program order (the order its host
 * enqueues it), matched across ranks as NCCL matches it:
 *   - the k-th collective a rank issues on ring R meets the k-th of every
 *     other rank (every rank is in every communicator);
 *   - the j-th send_v2 from rank a to rank b on ring R meets the j-th
 *     recv_v2 on b from a on ring R.
 * A mismatch: the k-th collective of ring R differs between ranks in op,
 * reduction, count, dtype, root or variable, or a rank never issues it; a
 * send with no matching receive, or a receive with no matching send; a
 * matched send and receive that differ in count or dtype. Mismatches of the
 * same size do not hang: they silently mix buffers; they are reported too.
 * A mismatch is identified by source position (the ring, and each rank's
 * op): one inside a repeat block is listed once, with its number of
 * occurrences. Every form that keeps the communication has the same
 * mismatches (the forms move it between streams or drop it all), so the
 * pipeline checks the program as bound. An SPMD program (no ranks=, no
 * rank-dependent attribute, no point-to-point) has none, found in O(1).
 */
typedef struct ovl_mismatches_s ovl_mismatches;

/* At most this many mismatches (and deadlocks) are listed; more are only
 * counted (ovl_mismatches_more). */
#define OVL_FINDINGS_LIST_MAX 1000

typedef enum {
  /* The k-th collective of the ring differs, or a rank never issues it. */
  OVL_MISMATCH_COLLECTIVE = 0,
  /* A send_v2 whose receiver never posts the matching recv_v2. */
  OVL_MISMATCH_UNMATCHED_SEND,
  /* A recv_v2 whose sender never issues the matching send_v2. */
  OVL_MISMATCH_UNMATCHED_RECV,
  /* A matched send_v2 / recv_v2 pair whose count or dtype differ. */
  OVL_MISMATCH_PAIR
} ovl_mismatch_kind;

/* What differs (ovl_mismatch_finding.differs), relative to the first rank
 * that issues the op. */
enum {
  OVL_DIFFERS_OP = 1u << 0,      /* another collective (allreduce, ...) */
  OVL_DIFFERS_REDOP = 1u << 1,   /* another reduction (sum, max, ...) */
  OVL_DIFFERS_COUNT = 1u << 2,   /* element count, as NCCL is called */
  OVL_DIFFERS_DTYPE = 1u << 3,
  OVL_DIFFERS_ROOT = 1u << 4,
  OVL_DIFFERS_VAR = 1u << 5,     /* another variable, same everything else */
  OVL_DIFFERS_MISSING = 1u << 6  /* a rank never issues it */
};

/* What one rank does at a mismatch. */
typedef struct ovl_mismatch_side_s {
  int rank;
  /* 0: the rank never issues it (the fields below are 0 / NULL / -1). */
  int issues;
  size_t op;           /* index in the program (first occurrence) */
  const char *op_name; /* "c_allreduce_sum", "send_v2", ... */
  int line, col;
  const char *var;     /* the input's variable (NULL: none) */
  const char *out_var; /* the output's (NULL: none) */
  ovl_dtype dtype;
  int64_t count;       /* elements, as NCCL is called */
  int root;            /* -1: the op has none */
  int peer;            /* send_v2 / recv_v2: the other rank; else -1 */
  int stream;          /* where it runs, as ovl_program_op */
  /* Its tag: 1 + its number among the rank's comm ops on the ring (one
   * iteration), as the flight record numbers them. 0: never issued. */
  uint64_t tag;
} ovl_mismatch_side;

typedef struct ovl_mismatch_finding_s {
  ovl_mismatch_kind kind;
  int ring;
  /* Collective: k (1-based: collective #k of the ring); point-to-point: j
   * (1-based: the j-th send from `sender` to `receiver` on the ring). Of
   * the first occurrence. */
  uint64_t index;
  int sender, receiver; /* point-to-point; -1 for a collective */
  unsigned differs;     /* OVL_DIFFERS_* */
  /* 1: every rank that issues it moves the same number of bytes (the run
   * would not hang; it would mix buffers silently). */
  int same_size;
  /* Collective: one side per rank, in rank order; point-to-point: the
   * sender's side, then the receiver's. */
  int nsides;
  const ovl_mismatch_side *sides;
  uint64_t occurrences; /* times it occurs in the expanded program */
  uint64_t ranks;       /* bit r: rank r takes part in some occurrence */
  /* One line: "ring 0 collective #3: rank 0 issues c_allreduce_sum of 'g'
   * (float32, 100 elements) at f.sched:12:3, rank 1 issues c_broadcast of
   * 'g' (float32, 100 elements, root 0) at f.sched:14:3; they differ in op
   * and root". */
  const char *message;
} ovl_mismatch_finding;

/* Check `prog` (lowered: as bound, or a form). On success *out holds the
 * mismatches (maybe none); free it with ovl_mismatches_free. The result
 * does not refer to `prog`. Time: O(ops + comm ops x ranks). */
OVL_API ovl_status ovl_mismatch_check(const ovl_program *prog,
                                      ovl_mismatches **out, ovl_error *err);
/* Mismatches listed, in order of ring, then first occurrence. */
OVL_API size_t ovl_mismatches_count(const ovl_mismatches *m);
/* Occurrences of mismatches not listed (beyond OVL_FINDINGS_LIST_MAX). */
OVL_API uint64_t ovl_mismatches_more(const ovl_mismatches *m);
/* Mismatch i (0-based); returns 0, or -1 (info zeroed) if i is out of
 * range. Strings and sides live as long as `m`. */
OVL_API int ovl_mismatches_get(const ovl_mismatches *m, size_t i,
                               ovl_mismatch_finding *info);
/* The report as text (json == 0) or JSON; *text is malloc'd. Text:
 *   mismatch 1: ring 0 collective #3: rank 0 issues ... (4 times in the
 *   expanded program)
 *   1 mismatch in FILE (2 ranks)
 * or "no mismatches in FILE (2 ranks, N comm ops checked)". JSON:
 * {"schedule", "ranks", "mismatches": [{"kind": "collective" |
 * "unmatched_send" | "unmatched_recv" | "pair", "ring", "index",
 * "sender", "receiver", "differs": ["op", ...], "same_size", "sides":
 * [{"rank", "issues", "op", "line", "col", "var", "out_var", "dtype",
 * "count", "root", "peer", "stream", "tag"}], "occurrences", "ranks":
 * [...], "message", "fix", "fix_checked", "fix_why"}], "count", "more"}
 * (the fix: ovl_mismatches_fix; in the text "  fix (checked): ..." or
 * "  fix: none known (...)" under a mismatch). */
OVL_API ovl_status ovl_mismatches_format(const ovl_mismatches *m,
                                         const ovl_program *prog, int json,
                                         char **text, ovl_error *err);
OVL_API void ovl_mismatches_free(ovl_mismatches *m);

/* ------------------------------------------------------------------ */
/* Deadlocks: an abstract execution of every rank (DESIGN 2.4 #3).      */
/* ------------------------------------------------------------------ */

/*
 * One iteration of the lowered program on every rank, with no timing: per
 * rank the host enqueues the primitives of the ops that run there in
 * program order and blocks only at host syncs (c_sync_calc_stream,
 * c_sync_comm_stream, stream_sync, fetch's sync of calc, barrier's) until
 * that stream is drained; each stream runs its primitives in order:
 * kernels and delays complete; a record snapshots its stream; a wait
 * blocks until the recording stream has passed the record it captured
 * (the last record of the event enqueued before the wait, host order; a
 * never-recorded event does not wait); a collective blocks until every
 * rank has its k-th collective of the ring at the head of one of its
 * streams; an ungrouped send_v2 / recv_v2 blocks until its partner is at
 * the head of a stream; the items of a group are posted together when the
 * group reaches the head of its stream (the host has enqueued all of
 * them), each completes when its partner is posted, and the stream moves
 * on when all did. Collectives meet by position alone (a mismatch in what
 * they move is a mismatch, not a deadlock).
 *
 * If the execution ends with something blocked, the participants (each
 * rank's host and streams) and what each waits for form a graph; each of
 * its cycles is a deadlock, reported as the cycle. Blocked participants
 * that wait on no cycle wait for a comm op some rank never issues: that is
 * a mismatch (ovl_mismatch_check), not reported again here. Time: linear
 * in primitives x ranks. An SPMD program cannot deadlock (every rank does
 * the same, so every collective meets), found in O(1).
 */
typedef struct ovl_deadlocks_s ovl_deadlocks;

/* One participant of a cycle: what it is blocked at, and whom it waits
 * for (the next step; the last step waits for the first). */
typedef struct ovl_deadlock_step_s {
  int rank;
  int stream;              /* as ovl_program_op; -1: the host */
  const char *stream_name; /* "calc", "comm[0]", "side", "host" */
  size_t op;               /* the op it is blocked at (program index) */
  const char *op_name;
  int line, col;
  int ring;                /* the op's ring; -1 when it has none */
  /* A collective: its number on the ring (1-based); else 0. */
  uint64_t coll_index;
  /* A send_v2 / recv_v2: the other rank; else -1. In a group: 1. */
  int peer;
  int in_group;
} ovl_deadlock_step;

typedef struct ovl_deadlock_finding_s {
  size_t nsteps;
  const ovl_deadlock_step *steps; /* step i waits for step (i+1) % nsteps */
  uint64_t occurrences; /* cycles alike (same steps but the ranks) */
  /* "deadlock: rank 0 calc waits at line 5 (c_allreduce_sum, ring 0
   * collective #1) for rank 1, whose calc is blocked at line 6
   * (c_allreduce_sum, ring 1 collective #1) waiting for rank 0 calc". */
  const char *message;
} ovl_deadlock_finding;

/* Check `prog` (lowered: a form, or as bound). On success *out holds the
 * deadlocks (maybe none); free it with ovl_deadlocks_free. The result does
 * not refer to `prog`. */
OVL_API ovl_status ovl_deadlock_check(const ovl_program *prog,
                                      ovl_deadlocks **out, ovl_error *err);
OVL_API size_t ovl_deadlocks_count(const ovl_deadlocks *d);
OVL_API uint64_t ovl_deadlocks_more(const ovl_deadlocks *d);
/* Participants (hosts and streams of all ranks) left blocked at the end,
 * whether on a cycle or behind a mismatch; 0 when every rank finished. */
OVL_API uint64_t ovl_deadlocks_blocked(const ovl_deadlocks *d);
OVL_API int ovl_deadlocks_get(const ovl_deadlocks *d, size_t i,
                              ovl_deadlock_finding *info);
/* Text: "deadlock 1: rank 0 calc waits ...", a line per step blocked at a
 * comm op naming what it waits to match ("  rank 0 at line 5 (...) waits
 * to match rank 1's recv_v2 at FILE:6, issued only after line 5 (...)":
 * ovl_deadlocks_match), then "1 deadlock in FILE (2 ranks)" or "no
 * deadlocks in FILE (2 ranks)". JSON: {"schedule", "ranks", "deadlocks":
 * [{"steps": [{"rank", "stream", "op", "line", "col", "ring",
 * "coll_index", "peer", "in_group", "waits_for": {"rank", "op", "line",
 * "col", "after_line", "after_op", "after_stream"} or null}],
 * "occurrences", "message", "forms", "fix", "fix_checked", "fix_why"}],
 * "count", "more", "blocked"}. */
OVL_API ovl_status ovl_deadlocks_format(const ovl_deadlocks *d,
                                        const ovl_program *prog, int json,
                                        char **text, ovl_error *err);
OVL_API void ovl_deadlocks_free(ovl_deadlocks *d);

/* ------------------------------------------------------------------ */
/* Both ends of a deadlock, the forms, the fixes                       */
/* ------------------------------------------------------------------ */

/* The forms deadlock i was found in (OVL_MODE_BIT of each): a cycle
 * through the same comm ops (by line and column) in several forms is one
 * bug. 0 when not known (not made by the pipeline). */
OVL_API unsigned ovl_deadlocks_forms(const ovl_deadlocks *d, size_t i);

/* What step `step` of deadlock i waits to match (the comm op of the other
 * rank, or of its own rank, that its cycle waits for), and where that
 * rank is held back before it. rank -1: the step is not blocked at a comm
 * op (a host sync, an event wait). */
typedef struct ovl_deadlock_match_s {
  int rank;            /* the rank of the op waited for */
  size_t op;           /* that op (program index), its name and position */
  const char *op_name;
  int line, col;
  /* > 0: it is issued only after this line, where that rank's host
   * (after_stream -1) or the op's stream is blocked (op after_op). */
  int after_line;
  size_t after_op;
  int after_stream;
} ovl_deadlock_match;
/* Returns 0, or -1 (out zeroed, rank -1) when i or step is out of range.
 * Strings live as long as `d`. */
OVL_API int ovl_deadlocks_match(const ovl_deadlocks *d, size_t i,
                                size_t step, ovl_deadlock_match *out);

/* The fix hint of a mismatch or a deadlock (the pipeline makes them,
 * given the schedule): `fix` an edit of the schedule's text, in the
 * forms of a race's fix and more (docs/ORDERING.md):
 *   put lines N-K in one group        move lines N-K before line M
 *   remove ranks=[...] from line N    delete line N
 * (parts joined by "; ", every line one of the text as it is). checked 1:
 * the edited schedule was parsed, bound and checked again (every form
 * the report checks): the finding is gone and no finding appeared.
 * Otherwise `why` says why: "no candidate removed ...", or, with `fix`
 * NULL, "none known (...)" (no mechanical fix for this kind). All NULL:
 * no hint was made (a report made without the schedule). */
typedef struct ovl_fix_info_s {
  const char *fix;
  int checked;
  const char *why;
} ovl_fix_info;
/* Returns 0, or -1 (out zeroed) when i is out of range. */
OVL_API int ovl_mismatches_fix(const ovl_mismatches *m, size_t i,
                               ovl_fix_info *out);
OVL_API int ovl_deadlocks_fix(const ovl_deadlocks *d, size_t i,
                              ovl_fix_info *out);

/*
 * The fixed schedule: every checked hint applied to the text of `s`, one
 * at a time (the text checked again after each, bound with `opts` (NULL:
 * as ovl_schedule_bind's) in the forms of `modes` (OVL_MODE_BIT of each),
 * deadlocks as graphs run when `graph`), until no finding is left or no
 * hint removes one without adding one. Of the hints of one step, the one
 * that removes the most findings goes first (a hint that fixes every form
 * before one that fixes its own). A hint that inserts a wait moves the
 * next wait of the same kind below it in its block instead (deleted
 * there, its inputs merged into the new one) where that changes no
 * finding: a wait made redundant is moved, not duplicated. On success
 * *out holds the result (ovl_fixed_free); its text is the schedule's when
 * nothing was fixed. Errors: OVL_EINVAL (a NULL argument, no mode),
 * OVL_EPARSE (the schedule does not bind with `opts`), OVL_ENOMEM, and
 * the checks' own.
 */
typedef struct ovl_fixed_s ovl_fixed;
OVL_API ovl_status ovl_schedule_fix(const ovl_schedule *s,
                                    const ovl_bind_opts *opts,
                                    unsigned modes, int graph,
                                    ovl_fixed **out, ovl_error *err);
/* The fixed text (*len its bytes; every line ends with a newline). */
OVL_API const char *ovl_fixed_text(const ovl_fixed *f, size_t *len);
/* Hints applied, and hint i as applied (its lines those of the text as it
 * was when it was applied: after hints 0 .. i - 1). */
OVL_API size_t ovl_fixed_count(const ovl_fixed *f);
OVL_API const char *ovl_fixed_hint(const ovl_fixed *f, size_t i);
/* The findings the fixed text still has, each bug once. */
OVL_API void ovl_fixed_left(const ovl_fixed *f, uint64_t *races,
                            uint64_t *mismatches, uint64_t *deadlocks);
/* The difference from the schedule's text to the fixed one as a unified
 * diff (3 lines of context), headed "--- OLD_LABEL" and "+++ NEW_LABEL";
 * no hunk when nothing was fixed. *text is malloc'd. */
OVL_API ovl_status ovl_fixed_diff(const ovl_fixed *f, const char *old_label,
                                  const char *new_label, char **text,
                                  size_t *len, ovl_error *err);
OVL_API void ovl_fixed_free(ovl_fixed *f);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_FINDINGS_H */
