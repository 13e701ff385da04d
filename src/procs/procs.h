/*
 * The processes of an MPI launch (src/procs/; docs/ARCHITECTURE.md, "More
 * than one process"): the one module that speaks MPI (procs.c), and the
 * layout of a world's ranks over the processes (layout.c). A world owns
 * its processes (ovl_world_opts.procs) and hands them, in its layout, to
 * the backends and the run. Internal to libovl; compiled with or without
 * MPI (without: nothing is ever made, and these are never called with a
 * non-NULL ovl_procs).
 *
 * One duplicated communicator, and a mailbox over it: every message
 * between processes (the steps the main threads take together: a world's
 * layout, the agreement and the merge after a run; and those of the rank
 * threads: collective contributions, point-to-point data and
 * acknowledgements, barriers and aborts) is a header and a payload sent
 * with MPI_Isend; a waiting thread polls (MPI_Improbe + MPI_Mrecv into the
 * mailbox, under one lock) and takes the message it waits for by its key,
 * so that every wait has a deadline and sees an abort, which MPI's
 * blocking calls do not. The main threads' steps are numbered and say
 * what they are, so processes that take different paths find out at once
 * rather than hang (procs.c, "ctl").
 */
#ifndef OVL_PROCS_H
#define OVL_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum {
  OVL__MSG_ABORT = 1, /* a rank of the sender's process failed in run `run` */
  OVL__MSG_BARRIER,   /* the sender's ranks reached barrier `seq` */
  OVL__MSG_COLL,      /* ring's collective `seq`: the sender's arrivals */
  OVL__MSG_DATA,      /* send (a -> b, k = seq) of ring: dtype, count, data */
  OVL__MSG_ACK,       /* recv (a -> b, k = seq) of ring: taken, or refused */
  OVL__MSG_FIN,       /* the sender is done (ovl_procs_free) */
  OVL__MSG_CTL        /* step `seq` of the main threads (aux: what, bytes) */
} ovl__msg_kind;

/* The deadline of a step the main threads take together: the processes'
 * timeout (ovl_procs_set_timeout; a world sets its own) plus this margin,
 * so that a run's own timeout, with its better message, comes first. */
#define OVL__PROCS_DEFAULT_TIMEOUT_S 60.0
#define OVL__PROCS_MARGIN_S 5.0

/* What identifies a message; `from`: the sending process (-1: any);
 * `run`: filled in by ovl__procs_send and ovl__procs_take (the current
 * run's). */
typedef struct ovl__msg_key {
  int kind;
  uint64_t run;
  int ring, a, b;
  uint64_t seq;
  int from;
} ovl__msg_key;

#define OVL__MSG_AUX 6

typedef struct ovl__msg {
  struct ovl__msg *next;
  ovl__msg_key key;
  int64_t aux[OVL__MSG_AUX]; /* the kind's small fields */
  size_t len;
  unsigned char *data; /* [len], in the same allocation */
} ovl__msg;

/* This process, the number of processes, and its place among those of its
 * node (MPI_COMM_TYPE_SHARED). */
int ovl__procs_rank(const ovl_procs *p);
int ovl__procs_size(const ovl_procs *p);
int ovl__procs_node_rank(const ovl_procs *p);
int ovl__procs_node_size(const ovl_procs *p);

/* ---- ctl: steps every process's main thread takes together, while no
 * rank thread runs; each bounded by the timeout. A failure (a timeout, a
 * process that took another step or ended) breaks the processes: every
 * later step fails at once with the same message (ovl_procs_error), and
 * ovl_procs_free ends the launch. */

/* out[q * bytes ...] = process q's `in` (bytes each). */
ovl_status ovl__procs_allgather(ovl_procs *p, const void *in, void *out,
                                size_t bytes, ovl_error *err);
/* Rows: process q gives counts[q] rows of `row` bytes, its own at `in`;
 * out holds them all in process order. */
ovl_status ovl__procs_allgather_rows(ovl_procs *p, const void *in, void *out,
                                     const int *counts, size_t row,
                                     ovl_error *err);
/* buf (bytes) from process `root` to every process. */
ovl_status ovl__procs_bcast(ovl_procs *p, void *buf, size_t bytes, int root,
                            ovl_error *err);

/* Every process brings its status and error (err: its message, may be
 * NULL when st is OVL_OK); every process gets back the same: OVL_OK if
 * all are, else the error of the first process whose error is not an
 * abort caused by another (else the first), its message led by "process
 * Q: " when Q is not 0 and it names no rank. */
ovl_status ovl__procs_agree(ovl_procs *p, ovl_status st, ovl_error *err);
/* The same after a run, where a process whose run failed has told the
 * others (ovl__procs_abort_peers), so that they come at once: it waits
 * OVL__PROCS_MARGIN_S for them, not the whole timeout (its run has already
 * waited that long for a process that stopped). */
ovl_status ovl__procs_agree_failed(ovl_procs *p, ovl_status st,
                                   ovl_error *err);

/* ---- the mailbox (any thread) */

/* A run begins: its number (the same on every process: runs are counted
 * alike) and what to call when another process aborts it (from whichever
 * thread polls; never with a lock of the caller's held by procs). An
 * abort that came before the run began is acted on at once. Messages of
 * earlier runs are dropped. */
uint64_t ovl__procs_run_begin(ovl_procs *p, void (*on_abort)(void *ctx),
                              void *ctx);
void ovl__procs_run_end(ovl_procs *p);
/* Tell every other process that this one's run failed (once per run). */
void ovl__procs_abort_peers(ovl_procs *p);
/* Whether another process aborted the current run. */
bool ovl__procs_aborted(ovl_procs *p);

/* Send a message to process `to` (the payload is copied). */
ovl_status ovl__procs_send(ovl_procs *p, int to, const ovl__msg_key *key,
                           const int64_t *aux, const void *data, size_t len,
                           ovl_error *err);
/* Poll once; the message matching `key` if it has come (the caller frees
 * it with free()), else NULL. */
ovl__msg *ovl__procs_take(ovl_procs *p, const ovl__msg_key *key);
/* Poll until the message matching `key` comes (OVL_OK, *out set), the
 * `deadline` (ovl__now() seconds) passes (OVL_ETIMEDOUT) or stop(ctx) is
 * true or the run was aborted by another process (OVL_EABORTED). No error
 * message is written: the caller knows what it waited for. */
ovl_status ovl__procs_wait(ovl_procs *p, const ovl__msg_key *key,
                           double deadline, bool (*stop)(void *ctx),
                           void *ctx, ovl__msg **out);
/* Send the same message (key, aux, data) to every other process, then
 * take each one's message of that key (ovl__procs_wait), into msgs[q]
 * (msgs: [nprocs]; NULL for this process; the caller frees what is
 * there, on failure too). OVL_OK; OVL_ETIMEDOUT or OVL_EABORTED with
 * *missing the first process not heard from (no message written); or a
 * send's error (in err). */
ovl_status ovl__procs_exchange(ovl_procs *p, const ovl__msg_key *key,
                               const int64_t *aux, const void *data,
                               size_t len, double deadline,
                               bool (*stop)(void *ctx), void *ctx,
                               ovl__msg **msgs, int *missing,
                               ovl_error *err);
/* Sleep a little between polls (the n-th time in a row). */
void ovl__procs_backoff(unsigned n);

/* Meet every other process at barrier `seq` (the same on every process):
 * ovl__procs_exchange of an empty OVL__MSG_BARRIER message. OVL_OK;
 * OVL_ETIMEDOUT or OVL_EABORTED with *missing the first process not
 * heard from; or a send's error (in err). */
ovl_status ovl__procs_barrier(ovl_procs *p, uint64_t seq, double deadline,
                              bool (*stop)(void *ctx), void *ctx,
                              int *missing, ovl_error *err);

/* ------------------------------------------------------------------ */
/* The layout of a world's ranks over the processes (procs/layout.c)   */
/* ------------------------------------------------------------------ */

/* A world's ranks and which of them this process drives: ranks
 * [first, first + nlocal) of nranks, one thread each; procs: the
 * processes of an MPI launch, NULL for one process (then first 0 and
 * nlocal nranks). Ranks are numbered globally everywhere. */
typedef struct ovl__layout {
  int nranks, first, nlocal;
  ovl_procs *procs;
  /* With procs: process q drives ranks [proc_first[q], proc_first[q +
   * 1]) ([nprocs + 1], owned by the world). */
  int *proc_first;
  /* The device of this process's first rank (the others follow it). */
  int dev0;
} ovl__layout;

/* The layout of one process driving all of n ranks (a compound literal:
 * for world_init in tests). */
#define OVL__ONE_PROCESS(n) (&(ovl__layout){.nranks = (n), .nlocal = (n)})

/* The process that drives `rank` (0 for one process). */
int ovl__layout_proc(const ovl__layout *lay, int rank);
/* Per process, its number of ranks ([nprocs], malloc'd; NULL when out of
 * memory). */
int *ovl__layout_counts(const ovl__layout *lay);
/* Rows of `row` bytes, one per rank, in an array of every rank's rows
 * (`rows`, [nranks]): every process's local ranks' rows to every process
 * (ovl__procs_allgather_rows). Collective over the processes. */
ovl_status ovl__layout_gather(const ovl__layout *lay, void *rows, size_t row,
                              ovl_error *err);

#endif /* OVL_PROCS_H */
