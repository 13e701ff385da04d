/*
 * The MPI side of the processes (src/procs/, built with --with-mpi only):
 * the state of a launch, shared by procs.c (joining, the mailbox, leaving)
 * and ctl.c (the steps the main threads take together, which call the
 * mailbox: never the other way). Private to src/procs/.
 */
#ifndef OVL_PROCS_MPI_H
#define OVL_PROCS_MPI_H

#include <limits.h>
#include <mpi.h>
#include <pthread.h>

#include "procs/procs.h"

/* One send in flight: its request and the buffer it owns. */
typedef struct pend {
  struct pend *next;
  MPI_Request req;
  void *buf;
} pend;

struct ovl_procs_s {
  int rank, size, node_rank, node_size;
  MPI_Comm comm;
  /* Guards everything below and every MPI call of the mailbox. */
  pthread_mutex_t mu;
  ovl__msg *box; /* received, not yet taken; oldest first */
  pend *pending;
  uint64_t run;
  void (*on_abort)(void *ctx);
  void *abort_ctx;
  bool aborted;    /* another process aborted the current run */
  bool abort_sent; /* this process told the others */
  /* The steps taken together (ctl): how many so far, their deadline's
   * timeout, and whether the processes lost each other (then why). */
  uint64_t ctl_seq;
  double timeout_s;
  ovl_status broken;
  char broken_msg[OVL_ERROR_MSG_MAX];
  /* The last exit status agreed or given (ovl_procs_agree_exit). */
  int exit_code;
};

/* The wire header: the key, the aux fields and the payload's length. */
enum { W_KIND, W_RUN, W_RING, W_A, W_B, W_SEQ, W_AUX, W_LEN = W_AUX + OVL__MSG_AUX, W_N };
#define TAG 7

/* Receive everything that has come into the mailbox (with p->mu held);
 * whether an abort of the current run came. */
bool ovl__procs_poll_locked(ovl_procs *p);
/* Send a message (with p->mu held); the payload is copied. */
ovl_status ovl__procs_send_locked(ovl_procs *p, int to,
                                  const ovl__msg_key *key, const int64_t *aux,
                                  const void *data, size_t len,
                                  ovl_error *err);

#endif /* OVL_PROCS_MPI_H */
