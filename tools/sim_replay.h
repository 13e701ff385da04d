/*
 * What tools/overlap_sim --replay prints (tools/sim_replay.c): per form
 * replayed, its plain run and the delay, then one line per race replayed,
 * then the count of races shown, all from the pipeline's report (include/
 * ovl.h, "Race replay"). Output goes to stdout (the caller checks it at
 * exit). Not part of libovl.
 */
#ifndef OVL_SIM_REPLAY_H
#define OVL_SIM_REPLAY_H

#include "ovl.h"

/* The replay lines:
 *   replay: backend cpu, 2 ranks: each race run once with the stream of its first access delayed just before it
 *   async: plain run ok (8192 elements, 1.9 ms); delay 20 ms
 *   async race 1 shown: rank 0 c[0] got 2.16452456 expected 4.32904911 (8192 of 8192 elements differ; calc delayed 20 ms before line 13)
 *   replay: 1 of 1 race shown as wrong numbers
 * or "replay: no races to replay". Returns how many races were shown. */
long sim_print_replay(const ovl_report *r);

#endif /* OVL_SIM_REPLAY_H */
