/*
 * What tools/overlap_sim --fix[=FILE] does after the checks
 * (tools/sim_fix.c): the library applies every checked hint
 * (ovl_schedule_fix); the tool writes the fixed schedule to FILE, or
 * without FILE prints the difference as a unified diff on stdout, and
 * says what it applied. Not part of libovl.
 */
#ifndef OVL_SIM_FIX_H
#define OVL_SIM_FIX_H

#include <stdbool.h>

#include "outfile.h"
#include "ovl.h"

/* Fix `sched` (bound with `opts`, checked in the forms of `modes`). With
 * `out` (prepared: --fix=FILE) the fixed text goes to it and the lines
 * saying what was applied to stdout; without (`out` NULL) the diff goes
 * to stdout and those lines to stderr (none with `quiet`). Returns -1 when
 * the fixed schedule has no findings, 4 (EXIT_RACES) when some are left,
 * or the exit status of a failure (message printed). */
int sim_fix(const ovl_schedule *sched, const ovl_bind_opts *opts,
            unsigned modes, const outfile *out, bool quiet);

#endif /* OVL_SIM_FIX_H */
