/* What the verdict says of a run's figures; see sim_judge.h. */
#include "sim_judge.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* snprintf at *off into buf, which stays terminated when cut. */
static void add(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *off, const char *fmt, ...) {
  va_list ap;
  int n;
  if (*off >= len)
    return;
  va_start(ap, fmt);
  n = vsnprintf(buf + *off, len - *off, fmt, ap);
  va_end(ap);
  *off = n < 0 ? len : *off + (size_t)n;
}

static bool spread_noise(const sim_figures *f) {
  return f->trials > 1 && f->spread > SIM_NOISE_SPREAD;
}

static bool efficiency_noise(const sim_figures *f) {
  return !isnan(f->efficiency) && (f->efficiency < 0 || f->efficiency > 1);
}

bool sim_judge_is_noise(const sim_figures *f) {
  if (f->predicted)
    return false;
  return spread_noise(f) || f->short_s < SIM_NOISE_ITER_S ||
         efficiency_noise(f);
}

int sim_judge_noise(const sim_figures *f, char *buf, size_t len) {
  size_t off = 0;
  int n = 0;
  if (len > 0)
    buf[0] = '\0';
  if (f->predicted)
    return 0;
  n += spread_noise(f);
  if (spread_noise(f))
    add(buf, len, &off,
        "warning: the async speedup is noise: its trials spread %.2f of "
        "the median (more than %.1f); more --trials, larger sizes (-D) or "
        "a quieter machine steady it\n",
        f->spread, SIM_NOISE_SPREAD);
  n += f->short_s < SIM_NOISE_ITER_S;
  if (f->short_s < SIM_NOISE_ITER_S)
    add(buf, len, &off,
        "warning: the times are noise: an iteration takes under 1 ms (%s "
        "%.3f ms), mostly the barrier and the clock around it; larger "
        "sizes (-D) steady them\n",
        f->short_mode, f->short_s * 1e3);
  n += efficiency_noise(f);
  if (efficiency_noise(f))
    add(buf, len, &off,
        "warning: the overlap efficiency %.3f is outside [0, 1]: noise, "
        "or the comp and comm runs are not the two halves of sync "
        "(docs/OVERLAP_SIM.md, \"What it prints\")\n",
        f->efficiency);
  return n;
}

/* What the speedup says, given its noise. */
static void overlap_word(const sim_figures *f, char *buf, size_t len,
                         size_t *off) {
  double s = f->speedup;
  if (!f->predicted &&
      (spread_noise(f) || f->overlap_short_s < SIM_NOISE_ITER_S))
    add(buf, len, off, "unclear (noise: see the warning above)");
  else if (f->trials > 1 && f->speedup_min < 1 - SIM_SAME_BAND &&
           f->speedup_max > 1 + SIM_SAME_BAND)
    add(buf, len, off, "unclear (its trials range from %.2fx to %.2fx)",
        f->speedup_min, f->speedup_max);
  else
    add(buf, len, off, "%s",
        s >= 1 + SIM_SAME_BAND   ? "faster"
        : s <= 1 - SIM_SAME_BAND ? "slower (no gain)"
                                 : "no gain (within 2%)");
}

bool sim_judge_overlap(const sim_figures *f, char *buf, size_t len) {
  size_t off = 0;
  if (len > 0)
    buf[0] = '\0';
  if (isnan(f->speedup))
    return false;
  if (f->mismatched > 0) {
    add(buf, len, &off,
        "overlap: not judged: the numbers are wrong (the result below)");
    return true;
  }
  if (f->races > 0) {
    add(buf, len, &off,
        "overlap: not judged: the checks found races (the result below)");
    return true;
  }
  add(buf, len, &off, "overlap: async %.2fx sync: ", f->speedup);
  overlap_word(f, buf, len, &off);
  if (!isnan(f->ideal))
    add(buf, len, &off, "; ideal %.2fx, overlap efficiency %.2f", f->ideal,
        f->efficiency);
  else if (!f->comp_comm)
    add(buf, len, &off,
        "; --mode=all adds the ideal speedup and the overlap efficiency");
  return true;
}
