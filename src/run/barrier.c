/*
 * The abortable barrier the rank threads of a run meet at (run/run.h):
 * a failed rank opens it for everyone (ovl__barrier_abort), its count can
 * drop (threads that will never come), and the last thread to arrive may
 * meet the other processes first (its `outer` part).
 */
#include <pthread.h>

#include "run/run.h"

void ovl__barrier_init(ovl__barrier *b, int n) {
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->n = n;
  b->waiting = 0;
  b->gen = 0;
  b->aborted = false;
  b->outer = NULL;
  b->outer_ctx = NULL;
}

void ovl__barrier_destroy(ovl__barrier *b) {
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
}

bool ovl__barrier_wait(ovl__barrier *b) {
  bool ok;
  pthread_mutex_lock(&b->mu);
  if (!b->aborted) {
    unsigned long gen = b->gen;
    if (++b->waiting == b->n) {
      if (b->outer != NULL) {
        bool ok;
        pthread_mutex_unlock(&b->mu);
        ok = b->outer(b->outer_ctx);
        pthread_mutex_lock(&b->mu);
        if (!ok)
          b->aborted = true;
      }
      b->waiting = 0;
      b->gen++;
      pthread_cond_broadcast(&b->cv);
    } else {
      while (gen == b->gen && !b->aborted)
        pthread_cond_wait(&b->cv, &b->mu);
    }
  }
  ok = !b->aborted;
  pthread_mutex_unlock(&b->mu);
  return ok;
}

/* Fewer threads will come from now on (n >= 0): release the ones waiting
 * if that completes the barrier. */
void ovl__barrier_resize(ovl__barrier *b, int n) {
  pthread_mutex_lock(&b->mu);
  b->n = n;
  if (b->waiting > 0 && b->waiting >= n) {
    b->waiting = 0;
    b->gen++;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
}

void ovl__barrier_abort(ovl__barrier *b) {
  pthread_mutex_lock(&b->mu);
  b->aborted = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}
