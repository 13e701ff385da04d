/*
 * The model's simulation (run/model_run.c says what it simulates), shared
 * by its files: model_queue.c (storage; the host, which enqueues), then
 * model_sim.c (the streams, time, the run of one iteration), which calls
 * it; model_run.c (the result) calls model_sim.c. Internal to src/run/.
 */
#ifndef OVL_RUN_MODEL_SIM_H
#define OVL_RUN_MODEL_SIM_H

#include "backend/model.h"
#include "run/run.h"

enum { Q_QUEUED, Q_ARRIVED, Q_RUNNING, Q_DONE };
enum { W_KERNEL, W_DELAY, W_COMM };

typedef struct item {
  uint32_t op, p0, p1; /* its op; its primitives [p0, p1) (a group: all) */
  uint8_t kind;        /* ovl__prim_kind */
  uint8_t state;
  int16_t stream;
  int next;     /* the next item of its stream; -1 */
  int wait_rec; /* WAIT: the record item it waits for; -1: none */
  int pending;  /* COLL / SEND / RECV: transfers not done */
  double ready; /* enqueued by the host */
  double start, work_start, end;
  double alone; /* seconds of work alone (kernels, delays, comm) */
} item;

/* Work in progress: a kernel or delay on one rank, or a transfer (a
 * collective's, or one send / receive pair) shared by its ranks' items. */
typedef struct work {
  int kind, kc, comm;
  double left, rate;
  int n;     /* items */
  int first; /* in the run's part list: (rank slot, item) pairs */
} work;

typedef struct srank {
  int rank;
  item *items;
  size_t nitems, cap;
  /* Per stream: its items not done, in order (a list through next). */
  int *qhead, *qtail, *qlen;
  int *last_rec;         /* per event: its last record item; -1 */
  double *last_work_end; /* per stream */
  /* The host */
  size_t op; /* the next op */
  double h;
  int block; /* -1: not blocked; a stream; nstreams: every stream */
  size_t block_prim;
  bool draining, done;
  double seg_launch; /* graph mode: the current segment's launch; -1 */
  double *hspan;     /* per primitive: the host primitives' spans */
  /* Where its time went (ovl_explain's order), its end; per step: the
   * kernels running, the classes and comm kinds running, items blocked */
  double explain[5];
  double t_done;
  int nk, nblocked;
  unsigned kmask, cmask;
  double kernel_rate;
  double comm_rate;
  /* Per ring: collectives reached; per (ring, peer): sends / receives */
  uint32_t *ncoll;
  uint32_t *nsend, *nrecv;
} srank;

typedef struct inst {
  uint64_t key;
  int arrived, expected;
  int first_part; /* parts of its items, chained */
  int w;          /* its work, once started; -1 */
} inst;

typedef struct sim {
  const ovl__model *m;
  const ovl_program *prog;
  bool graph;
  int nranks, nsim, nrings;
  srank *r;
  int *slot_of; /* rank -> simulated slot, -1 */
  double now;
  work *w;
  size_t nw, wcap;
  int *part_slot, *part_item, *part_next;
  size_t nparts, pcap;
  inst *tab; /* open addressing */
  size_t tcap, tn;
  ovl_error *err;
  ovl_status st;
} sim;

/* model_queue.c */
bool ovl__sim_grow(void **p, size_t *cap, size_t need, size_t elem);
bool ovl__sim_oom(sim *s);
int ovl__sim_add_part(sim *s, int slot, int item, int next);
inst *ovl__sim_instance(sim *s, uint64_t key, int expected);
/* Run the host of a rank as far as it goes (true: it moved). */
bool ovl__sim_host_run(sim *s, srank *r);

/* model_sim.c: set up, run one iteration, free. */
ovl_status ovl__sim_init(sim *s, const ovl__model *m, const ovl_program *prog,
                         bool graph, ovl_error *err);
ovl_status ovl__sim_simulate(sim *s);
void ovl__sim_free(sim *s);

#endif /* OVL_RUN_MODEL_SIM_H */
