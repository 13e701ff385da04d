/*
 * The race check of a program's form, and the fixes it proposes.
 *
 * Part of the public API of libovl; include "ovl.h", which includes
 * every part (this one alone works too).
 */
#ifndef OVL_PUBLIC_RACES_H
#define OVL_PUBLIC_RACES_H

#include "ovl/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Race check: happens-before over the ops as they are enqueued.       */
/* ------------------------------------------------------------------ */

/*
 * Per rank, the calc stream, one comm stream per ring and the host each
 * carry a vector clock. An op enqueued on a stream is ordered after
 * everything the host has observed; event records snapshot the recording
 * stream (a new record replaces the old one), waits join the snapshot (a
 * never-recorded event adds nothing), host syncs join the stream into the
 * host; fetch syncs calc only, then reads on the host. Compute ops and
 * collectives read their inputs and write their output on their stream (a
 * variable an op both reads and writes is one access, a write); inputs
 * (data) are written before anything. A read races with the last write not
 * ordered before it; a write with the last write and every read since it
 * not ordered before it. One iteration is checked; nothing runs.
 *
 * Every rank runs the same program, so the analysis is done once and each
 * race is listed with all ranks. A race is identified by source position
 * (variable, both ops' line:col, streams, read/write): one inside a repeat
 * block is listed once, with its number of occurrences.
 */
typedef struct ovl_races_s ovl_races;

/* At most this many races are listed; unordered pairs beyond them are only
 * counted (ovl_races_more). */
#define OVL_RACES_LIST_MAX 10000

/* One access of a race. */
typedef struct ovl_race_access_s {
  size_t op;           /* index in the program (first occurrence) */
  const char *op_name; /* "scale", "c_allreduce_sum", "fetch", ... */
  int line, col;       /* source position of the op */
  int stream;          /* as ovl_program_op: 0 calc, 1 + R comm[R], -1 host */
  const char *stream_name; /* "calc", "comm[0]", "side" or "host" */
  int write;           /* 1: write, 0: read */
} ovl_race_access;

typedef struct ovl_race_info_s {
  const char *var;        /* the variable */
  ovl_race_access first;  /* the earlier access in program order */
  ovl_race_access second; /* the later one, not ordered after `first` */
  /* The fix: an edit of the schedule's text, in one form,
   *   insert STATEMENT before line N
   *   insert STATEMENT and STATEMENT before line N
   * (each STATEMENT one line of the language, ending with ')'; inserted in
   * that order as new lines just before line N of the file as it is), e.g.
   * "insert c_wait_compute(c, ring_id=0) before line 14". It names ops that
   * the form that raced has (the sync form has no c_wait_compute or
   * c_wait_comm), and puts them at the latest point that orders the two
   * accesses: just before the second, or before the `repeat` of each
   * block around the second access that does not hold the first in the
   * same iteration (a wait after a loop, not in it; a race from one
   * iteration to the next keeps it in the loop). */
  const char *fix;
  /* NULL, or why the second access is unordered where the schedule seems
   * to order it: "line 7 waits on event 'e', which was never recorded, so
   * it does not wait". */
  const char *note;
  uint64_t occurrences;   /* times the pair occurs in the expanded program */
  int nranks;             /* the ranks the race is on */
  const int *ranks;
  /* 1: the fix was applied to the schedule's text and the form re-checked
   * (ovl_races_check_fixes): this race is gone and no race appeared that
   * was not there before. 0: it was not, and fix_why says why: "no
   * candidate removed the race (N tried)", "not checked: ..." (`fix` is
   * then the first candidate). */
  int fix_checked;
  const char *fix_why; /* NULL when fix_checked */
} ovl_race_info;

/* Check `prog` (as given: transform it first for another mode). On success
 * *out holds the races found (maybe none); free it with ovl_races_free. The
 * result does not refer to `prog`. Each race's fix is its first candidate,
 * not re-checked (fix_why "not checked: no schedule given"):
 * ovl_races_check_fixes re-checks them. */
OVL_API ovl_status ovl_race_check(const ovl_program *prog, ovl_races **out,
                                  ovl_error *err);
/*
 * Re-check the fix of every race of `r`, the report of ovl_race_check on
 * `form`, which is a form (ovl_program_transform, or the program itself
 * for the schedule as written) of the program that `s` binds to with
 * `opts` (NULL: as ovl_schedule_bind's). For each race, its candidates in
 * order of preference (Paddle's wait op where the form has it, then an
 * event_record + stream_wait_event pair; for a fetch, a host sync of the
 * stream; at the latest point, then just before the second access): the
 * edit is applied to a copy of the text, which is parsed, bound with
 * `opts`, transformed into the form and race-checked; the first with this
 * race gone and no new race is the fix (fix_checked 1). An edit that does
 * not parse or bind does not count. An edit tried for one race is not
 * tried again for another.
 *
 * The work is bounded: at most about 16 million units (an op of the edited
 * program, or 4 bytes of its text) of re-checking for one report; races
 * left when it is spent keep their first candidate with fix_why "not
 * checked: the re-check budget is spent", and a report with more races
 * than it lists (ovl_races_more) is not re-checked ("not checked: more
 * races than are listed"). Memory at once: the copy of the text, its
 * schedule and program, and a race check's state. Errors: OVL_EINVAL (a
 * NULL argument, or `r` is not a report of `form`), OVL_ENOMEM; `r` keeps
 * its hints.
 */
OVL_API ovl_status ovl_races_check_fixes(ovl_races *r, const ovl_program *form,
                                         const ovl_schedule *s,
                                         const ovl_bind_opts *opts,
                                         ovl_error *err);
/* Races listed, sorted by (line of the first op, line of the second op,
 * variable). */
OVL_API size_t ovl_races_count(const ovl_races *r);
/* Unordered pairs found beyond the first OVL_RACES_LIST_MAX races. */
OVL_API uint64_t ovl_races_more(const ovl_races *r);
/* Ops checked. */
OVL_API size_t ovl_races_ops(const ovl_races *r);
/* Race i (0-based); returns 0, or -1 if i is out of range. The strings and
 * the rank list live as long as `r`. */
OVL_API int ovl_races_get(const ovl_races *r, size_t i, ovl_race_info *info);
/* The report as text (json == 0) or JSON; *text is malloc'd, free() it.
 * `prog` gives the schedule's file name. Text, per race:
 *   race 1: 'c' on ranks 0-1
 *     write  scale            file.sched:15  calc
 *     write  c_allreduce_sum  file.sched:16  comm[0]
 *     fix (checked): insert c_wait_compute(c, ring_id=0) before line 16
 * ("fix (unchecked): FIX (WHY)" when it was not re-checked or no candidate
 * removed the race), then "N race(s) in FILE (N ranks)", or "no races in
 * FILE (N ops checked)".
 * JSON: {"schedule", "ranks", "ops", "races": [{"var", "ranks": [...],
 * "first": {"line", "col", "op", "stream", "access"}, "second", "fix",
 * "fix_checked", "fix_why", "note", "occurrences", "forms" (the forms it
 * is in, as the pipeline marks them: ovl_races_forms; else null)}],
 * "count", "more"}. A race the pipeline found in several forms has "  found
 * in the sync and async forms" under it in the text. */
OVL_API ovl_status ovl_races_format(const ovl_races *r, const ovl_program *prog,
                                    int json, char **text, ovl_error *err);
OVL_API void ovl_races_free(ovl_races *r);

/* The forms race i was found in (OVL_MODE_BIT of each), as the pipeline
 * marks them: a race between the same two accesses (its variable, and
 * each access's line, column and kind) in several forms is one bug, which
 * the summary counts once (ovl_report_summary_get). 0 when not known (a
 * report made by ovl_race_check alone). */
OVL_API unsigned ovl_races_forms(const ovl_races *r, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* OVL_PUBLIC_RACES_H */
