/*
 * overlap_sim --predict=PROFILE (tools/sim_predict.c): the model's
 * prediction beside a real run. Not part of libovl.
 */
#ifndef OVL_SIM_PREDICT_H
#define OVL_SIM_PREDICT_H

#include "ovl.h"
#include "sim_flags.h"

/* The model's world for --predict: `nranks` ranks, --machine's machine,
 * the profile. Returns -1, or the exit status (message printed: a bad
 * file is a usage error). */
int sim_predict_world(const sim_options *o, int nranks, ovl_world **out);
/* Run `prog`'s modes on the model and print them against `measured`:
 * measured, predicted, error per mode; the overlap efficiency of both;
 * the largest error; the predicted explain line. Returns -1, or the exit
 * status (message printed). */
int sim_print_prediction(const sim_options *o, ovl_world *model,
                         const ovl_program *prog, unsigned modes,
                         const ovl_report *measured);

#endif /* OVL_SIM_PREDICT_H */
