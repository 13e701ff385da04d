/*
 * overlap_sim --predict=PROFILE (tools/sim_predict.c): the model's
 * prediction beside a real run. Not part of libovl.
 */
#ifndef OVL_SIM_PREDICT_H
#define OVL_SIM_PREDICT_H

#include "ovl.h"
#include "sim_flags.h"
#include "sim_memory.h"

/* The model's world for --predict: `nranks` ranks, --machine's machine,
 * the profile (*out NULL without --predict). Returns -1, or the exit
 * status (message printed: a bad file is a usage error). */
int sim_predict_world(const sim_options *o, int nranks, ovl_world **out);
/* Run the program of `measured`, its `modes`, on the model and print them
 * against `measured`:
 * measured, predicted, error per mode; the overlap efficiency of both;
 * the largest error; the predicted explain line. Returns -1, or the exit
 * status (message printed). */
int sim_print_prediction(const sim_options *o, ovl_world *model,
                         const ovl_report *measured, unsigned modes);

/* overlap_sim's exit status when the checks find something. */
#define SIM_EXIT_RACES 4

/* Past 64 ranks (only the model goes there, with a schedule whose ranks
 * all run the same ops): the checks of `pl` on the schedule bound at 64
 * ranks. Findings are printed as --races prints them, and the status is
 * SIM_EXIT_RACES; else -1, o->checks_at set to 64. */
int sim_check_at_64(sim_options *o, const ovl_schedule *sched,
                    const ovl_bind_opts *bopts, const mem_plan *mem,
                    const ovl_pipeline_opts *pl);

#endif /* OVL_SIM_PREDICT_H */
