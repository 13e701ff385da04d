/*
 * The processes of an MPI launch (run/procs.c; docs/ARCHITECTURE.md,
 * "More than one process"). Internal to libovl; compiled with or without
 * MPI (without: nothing is ever made, and these are never called with a
 * non-NULL ovl_procs).
 *
 * Two duplicated communicators. `ctl`: blocking collectives, called only
 * by the main thread when no rank thread runs (a world's layout, the
 * agreement and the merge after a run), where every process is known to
 * arrive (every wait of a run is bounded by its timeout). The mailbox:
 * every message between rank threads of different processes (collective
 * contributions, point-to-point data and acknowledgements, barriers and
 * aborts) is a header and a payload sent with MPI_Isend; a waiting thread
 * polls (MPI_Improbe + MPI_Mrecv into the mailbox, under one lock) and
 * takes the message it waits for by its key, so that every wait has a
 * deadline and sees an abort, which MPI's blocking calls do not.
 */
#ifndef OVL_PROCS_H
#define OVL_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef enum {
  OVL__MSG_ABORT = 1, /* a rank of the sender's process failed in run `run` */
  OVL__MSG_BARRIER,   /* the sender's ranks reached barrier `seq` */
  OVL__MSG_COLL,      /* ring's collective `seq`: the sender's arrivals */
  OVL__MSG_DATA,      /* send (a -> b, k = seq) of ring: dtype, count, data */
  OVL__MSG_ACK,       /* recv (a -> b, k = seq) of ring: taken, or refused */
  OVL__MSG_FIN        /* the sender is done (ovl_procs_free) */
} ovl__msg_kind;

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

/* ---- ctl: blocking collectives (main thread, no rank thread running) */

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

#endif /* OVL_PROCS_H */
