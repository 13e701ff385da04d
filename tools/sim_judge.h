/*
 * What tools/overlap_sim's verdict says of the figures of a run
 * (tools/sim_judge.c): which are noise, and what the overlap bought. Pure:
 * numbers in, text out (tools/sim_verdict.c takes the numbers from a
 * report; tests/test_tool_util.c gives its own). Not part of libovl.
 */
#ifndef OVL_SIM_JUDGE_H
#define OVL_SIM_JUDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Above this spread ((max - min) / median) the trials of a figure
 * disagree too much for their median to be read. */
#define SIM_NOISE_SPREAD 0.3
/* An iteration shorter than this (seconds) is mostly the barrier and the
 * clock around it. */
#define SIM_NOISE_ITER_S 1e-3
/* A speedup within this of 1 is no gain. */
#define SIM_SAME_BAND 0.02

/* The figures of a run that the verdict judges. */
typedef struct {
  /* sync / async (the median over the trials); NaN where the two did not
   * both run. Over `trials` trials: its least and greatest, and its
   * spread, (max - min) / median. */
  double speedup, speedup_min, speedup_max, spread;
  size_t trials;
  /* The ideal speedup and the overlap efficiency; NaN where comp and comm
   * did not run (`comp_comm` false) or give none. */
  double ideal, efficiency;
  bool comp_comm;
  /* The shortest median iteration of a mode that ran, `short_mode` its
   * name (seconds; NaN: none ran); `overlap_short`, the shorter of sync's
   * and async's (NaN where they did not both run). */
  double short_s;
  const char *short_mode;
  double overlap_short_s;
  /* Elements that failed the check, and races found: nothing is judged
   * of a run whose numbers are wrong or that races. */
  int64_t mismatched;
  uint64_t races;
  /* Predicted by the model: the same every time, and no clock around
   * it, so nothing in it is noise. */
  bool predicted;
} sim_figures;

/* The warnings of the figures that are noise, each a line "warning: ...\n"
 * (the speedup's spread above SIM_NOISE_SPREAD, an iteration under
 * SIM_NOISE_ITER_S, an overlap efficiency outside [0, 1]), into buf
 * (cut to len). Returns how many. */
int sim_judge_noise(const sim_figures *f, char *buf, size_t len);

/* The overlap line, without its newline: "overlap: async 1.35x sync:
 * faster" (or "slower (no gain)", "no gain (within 2%)", "unclear (noise:
 * see the warning above)", "unclear (its trials range from 0.95x to
 * 1.10x)"), then "; ideal 1.58x, overlap efficiency 0.63" or the flag
 * that gives them; "overlap: not judged: ..." where the numbers are wrong
 * or the checks found races. Returns false (buf empty) where sync and
 * async did not both run. */
bool sim_judge_overlap(const sim_figures *f, char *buf, size_t len);

/* Whether a figure of `f` is noise (what sim_judge_noise warns of). */
bool sim_judge_is_noise(const sim_figures *f);

#endif /* OVL_SIM_JUDGE_H */
