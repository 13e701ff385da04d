/*
 * The verdict of a run of tools/overlap_sim (tools/sim_verdict.c): right
 * and worth it, said apart. Output goes to stdout. Not part of libovl.
 */
#ifndef OVL_SIM_VERDICT_H
#define OVL_SIM_VERDICT_H

#include "ovl.h"
#include "sim_flags.h"

/* A "warning: ..." line for each figure that is noise: the async
 * speedup's trials spread more than 0.3 of its median, an iteration under
 * 1 ms (the shortest mode named), an overlap efficiency outside [0, 1]. */
void sim_print_noise(const ovl_report *r);

/* The verdict lines: "overlap: async 1.35x sync: faster; ..." where sync
 * and async ran (what the overlap bought: faster, slower (no gain), no
 * gain (within 2%), or unclear where the figures are noise; not judged
 * where the numbers are wrong or the checks found races; the ideal speedup
 * and the overlap efficiency, or the flag that gives them), then the
 * result line ("result: PASS", "result: FAIL: ..."; values not finite
 * counted per run, not summed over the trials); with -q the result line
 * alone. On a terminal (not -q), a last line "next: ..." says what to run
 * next. */
void sim_print_verdict(const ovl_report *r, const sim_options *o);

#endif /* OVL_SIM_VERDICT_H */
