/*
 * overlap-sim: run one op schedule on every device of a machine, one thread
 * per device, and check that overlapping compute with communication is both
 * right and worth it.
 *
 * Public API of libovl. Every function that can fail returns an ovl_status
 * and, where an ovl_error is passed, fills it with a message that gives the
 * context (file:line:col for schedules, rank/op/stream for runtime errors).
 * The library never prints and never exits.
 */
#ifndef OVL_H
#define OVL_H

/* The API in parts, in the order they build on each other. */
#include "ovl/base.h"
#include "ovl/schedule.h"
#include "ovl/program.h"
#include "ovl/procs.h"
#include "ovl/world.h"
#include "ovl/reference.h"
#include "ovl/races.h"
#include "ovl/findings.h"
#include "ovl/timeline.h"
#include "ovl/pipeline.h"
#include "ovl/calibrate.h"
#include "ovl/report.h"

#endif /* OVL_H */
