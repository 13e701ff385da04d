/*
 * overlap_sweep's output (tools/sweep_print.c): the '#' header and legend,
 * the table's or the CSV's rows, nccl-tests' footer. The sweep
 * (tools/overlap_sweep.c) measures and checks; this prints what it found,
 * and calls nothing of it.
 */
#ifndef OVL_SWEEP_PRINT_H
#define OVL_SWEEP_PRINT_H

#include <stdbool.h>
#include <stdint.h>

#include "ovl.h"
#include "sweep.h"

/* One placement of a row, measured. */
typedef struct {
  bool ran;
  double coll_dev;  /* device seconds per collective (mean) */
  double coll_host; /* host seconds per collective: total / (iters x reps) */
  double kern_dev;  /* device seconds per kernel (mean), P_BOTH */
  bool checked;
  int64_t wrong;
} measure;

/* One sweep: the flags, the world, the sizes, and the totals of the rows
 * so far. */
typedef struct {
  options o;
  sweep s; /* what the generated schedules share (s.o is &o) */
  char op_name[64];
  ovl_world *world;
  bool cpu;
  int nranks;
  uint64_t mem; /* host memory; 0: unknown */
  uint64_t sizes[MAX_SIZES];
  int nsizes;
  double kern_cal; /* seconds a kernel alone, to size the rows' */
  int64_t total_wrong;
  int rows, rows_unchecked;
  /* busbw of the out-of-place and in-place measurements, for the footer */
  double busbw_sum;
  int busbw_n;
} sweep_state;

/* One row: a size's measurements in every placement and their check. */
typedef struct {
  row_sizes rs;
  int reps;    /* collectives an iteration */
  int kernels; /* kernels beside them (P_BOTH), and alone */
  double kern_alone; /* device seconds a kernel, the kernels alone */
  measure m[P__COUNT];
  bool check; /* checked against the reference (else n/a) */
} row;

/* A dtype as nccl-tests names it ("float", "double", "half", "bfloat16"). */
const char *sweep_type_name(ovl_dtype d);
/* The column headers of the table, of the CSV. */
void sweep_print_table_header(void);
void sweep_print_csv_header(void);
/* The '#' lines before anything runs: what is swept, how it is timed. */
void sweep_print_header(const sweep_state *t);
/* What the columns mean (not with --csv or -q). */
void sweep_print_legend(const sweep_state *t);
/* Row r, as a table row or CSV; adds its busbw to the footer's. */
void sweep_print_row(sweep_state *t, const row *r);
/* nccl-tests' '# Avg bus bandwidth' footer. */
void sweep_print_footer(const sweep_state *t);

#endif /* OVL_SWEEP_PRINT_H */
