/*
 * What tools/overlap_sim --replay prints (sim_replay.h). Not part of
 * libovl.
 */
#include "sim_replay.h"

#include <math.h>
#include <stdio.h>

/* A delay in words: "20 ms", "81.25 ms", "1.5 s". */
static const char *delay_text(double us, char *buf, size_t len) {
  if (us >= 1e6)
    snprintf(buf, len, "%.4g s", us * 1e-6);
  else
    snprintf(buf, len, "%.4g ms", us * 1e-3);
  return buf;
}

/* A value as %.9g, a NaN as "nan" whatever its sign (fresh buffers are
 * NaN: a read that came before any write). */
static const char *num_text(double v, char *buf, size_t len) {
  if (isnan(v))
    snprintf(buf, len, "nan");
  else
    snprintf(buf, len, "%.9g", v);
  return buf;
}

long sim_print_replay(const ovl_report *r) {
  const ovl_program *prog = ovl_report_program(r);
  ovl_report_machine mc;
  long shown = 0, total = 0;
  char d[32];

  ovl_report_machine_get(r, &mc);
  if (ovl_report_not_run(r) != NULL) {
    printf("replay: nothing replayed (%s)\n", ovl_report_not_run(r));
    return 0;
  }
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_replay rp;
    if (ovl_report_replay_get(r, i, &rp) == 0)
      total += (long)rp.n;
  }
  if (total == 0) {
    printf("replay: no races to replay\n");
    return 0;
  }
  total = 0;
  printf("replay: backend %s, %d rank%s: each race run once with the "
         "stream of its first access delayed just before it\n",
         mc.backend != NULL ? mc.backend : "?", mc.nranks,
         mc.nranks == 1 ? "" : "s");
  for (size_t i = 0; i < ovl_report_mode_count(r); i++) {
    ovl_report_mode m;
    ovl_report_replay rp;
    const char *mode;
    ovl_report_mode_get(r, i, &m);
    if (ovl_report_replay_get(r, i, &rp) != 0 || rp.n == 0)
      continue;
    mode = ovl_mode_name(m.mode);
    if (rp.plain_ran) {
      if (rp.plain_mismatched == 0)
        printf("%s: plain run ok (%lld elements, %.3g ms); delay %s\n", mode,
               (long long)rp.plain_checked, rp.plain_s * 1e3,
               delay_text(rp.delay_us, d, sizeof d));
      else
        printf("%s: plain run MISMATCH (%lld of %lld elements, %.3g ms): "
               "wrong even without a delay; delay %s\n",
               mode, (long long)rp.plain_mismatched,
               (long long)rp.plain_checked, rp.plain_s * 1e3,
               delay_text(rp.delay_us, d, sizeof d));
    }
    for (size_t k = 0; k < rp.n; k++) {
      const ovl_replay *x = &rp.replays[k];
      total++;
      if (x->shown) {
        ovl_var_info v;
        char idx[128], got[40], exp[40];
        ovl_program_fetch_info(prog, x->fetch_index, &v);
        ovl_var_index_text(&v, x->index, idx, sizeof idx);
        printf("%s race %zu shown: rank %d %s%s got %s expected %s "
               "(%lld of %lld elements differ; %s delayed %s before line "
               "%d)\n",
               mode, x->race + 1, x->rank, x->var, idx,
               num_text(x->got, got, sizeof got),
               num_text(x->expected, exp, sizeof exp),
               (long long)x->mismatched, (long long)x->checked,
               x->stream_name, delay_text(x->delay_us, d, sizeof d),
               x->line);
        shown++;
      } else if (!isnan(x->delay_us)) {
        printf("%s race %zu not shown: %s; %s delayed %s before line %d\n",
               mode, x->race + 1, x->why, x->stream_name,
               delay_text(x->delay_us, d, sizeof d), x->line);
      } else {
        printf("%s race %zu not shown: %s\n", mode, x->race + 1, x->why);
      }
    }
  }
  printf("replay: %ld of %ld race%s shown as wrong numbers\n", shown, total,
         total == 1 ? "" : "s");
  return shown;
}
