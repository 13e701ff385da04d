/*
 * What tools/overlap_sim --calibrate=FILE does (tools/sim_calibrate.c):
 * the library measures the profile of the schedule (ovl_calibrate); the
 * tool says what it measures, writes the profile to FILE and says what
 * it holds. Not part of libovl.
 */
#ifndef OVL_SIM_CALIBRATE_H
#define OVL_SIM_CALIBRATE_H

#include "outfile.h"
#include "ovl.h"
#include "sim_flags.h"

/* Calibrate `prog` (the schedule at `path`, bound for the world) on
 * `world` with o's iterations; the profile to `out` (prepared:
 * --calibrate=FILE). A line per measurement on stdout and a last line
 * 'wrote FILE (...)' on stderr, none with -q. Returns the exit status (0,
 * or that of a failure, message printed). */
int sim_calibrate(const sim_options *o, ovl_world *world,
                  const ovl_program *prog, const char *path,
                  const outfile *out);

#endif /* OVL_SIM_CALIBRATE_H */
