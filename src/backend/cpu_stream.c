/*
 * The cpu backend's streams and events (see backend_cpu.c for the model).
 * Every stream is a FIFO of commands served by its own worker thread, so
 * streams of one rank really run at the same time and a missing wait really
 * shows as a wrong result. Events are host-side snapshots (stream, number
 * of commands enqueued so far), exactly as cudaEventRecord; a wait is a
 * command that blocks its worker until the source stream has finished that
 * many commands.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu.h"

/* ------------------------------------------------------------------ */
/* Workers                                                             */
/* ------------------------------------------------------------------ */

/* splitmix64: the chaos generator, and the mixing of its seed. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The first state of the chaos generator of (seed, rank, stream); never 0
 * (0 means off). */
static uint64_t chaos_init(unsigned seed, int rank, int stream_idx) {
  uint64_t st = (uint64_t)seed;
  uint64_t a = splitmix64(&st);
  st = a ^ ((uint64_t)(unsigned)rank << 32 | (uint64_t)(unsigned)stream_idx);
  a = splitmix64(&st);
  return a != 0 ? a : 1;
}

/* The next chaos delay of a stream, in microseconds. */
static double chaos_us(stream *s) {
  double u = (double)(splitmix64(&s->chaos) >> 11) * 0x1.0p-53;
  return CHAOS_MAX_US * u * u * u * u;
}

/* Block until src has finished `target` commands. */
static ovl_status run_wait(stream *s, const cmd *c, ovl_error *err) {
  ovl__bworld *bw = s->br->bw;
  stream *src = c->u.wait.src;
  const double start = ovl__now();
  ovl_status st = OVL_OK;
  char what[OVL_ERROR_MSG_MAX];

  /* The abort is looked at before the source's progress, every time: once
   * the world is aborted every wait fails (backend/backend.h, world_abort), also
   * one whose source finished meanwhile, which an abort makes likely (it
   * cuts the source's delays short). */
  pthread_mutex_lock(&src->mu);
  for (;;) {
    if (is_aborted(bw)) {
      snprintf(what, sizeof what, "wait for event %d of %s stream aborted",
               c->u.wait.event, src->name);
      st = OVL_EABORTED;
      break;
    }
    if (src->done >= c->u.wait.target)
      break;
    if (src->blocked) {
      /* It unblocks only by finishing, which broadcasts done_cv. */
      pthread_cond_wait(&src->done_cv, &src->mu);
      continue;
    }
    double since = src->progress_at > start ? src->progress_at : start;
    double now = ovl__now();
    if (now >= since + bw->timeout_s) {
      snprintf(what, sizeof what,
               "waited %.*f s for event %d of %s stream (%llu of the %llu "
               "commands it waits for done)",
               secs_prec(now - start), now - start, c->u.wait.event, src->name,
               (unsigned long long)src->done,
               (unsigned long long)c->u.wait.target);
      st = OVL_ETIMEDOUT;
      break;
    }
    cond_wait_until(&src->done_cv, &src->mu, since + bw->timeout_s);
  }
  pthread_mutex_unlock(&src->mu);
  if (st != OVL_OK)
    set_error(err, st, s, what);
  return st;
}

/* Sleep `us` microseconds, in slices of at most 10 ms so that an abort
 * ends a long delay promptly (a worker asleep in a 100 s delay would hold
 * up rank_fini, which joins it, long after the run failed). */
static void run_delay(ovl__bworld *bw, double us) {
  const double slice = 0.010;
  double end;
  if (!(us > 0))
    return;
  end = ovl__now() + us * 1e-6;
  for (;;) {
    struct timespec ts, rem;
    double left = end - ovl__now();
    if (left <= 0 || is_aborted(bw))
      return;
    if (left > slice)
      left = slice;
    ts.tv_sec = (time_t)left;
    ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR)
      ts = rem;
  }
}

/* Execute one command. A stream that already failed skips kernels, waits
 * and delays; it still shows up at its collectives, as skipped, so the
 * other ranks fail at once. */
static ovl_status run_cmd(stream *s, cmd *c, bool failed, ovl_error *err) {
  ovl__brank *br = s->br;
  ovl_status st;

  switch (c->kind) {
  case CMD_KERNEL:
    if (failed)
      return OVL_OK;
    ovl__cpu_elementwise(c->u.kernel.fn, c->u.kernel.dtype, c->u.kernel.out,
                         c->u.kernel.x, c->u.kernel.y, c->u.kernel.scale,
                         c->u.kernel.bias, c->u.kernel.n);
    return OVL_OK;
  case CMD_MATMUL:
    if (failed)
      return OVL_OK;
    ovl__cpu_matmul(c->u.matmul.dtype, c->u.matmul.out, c->u.matmul.x,
                    c->u.matmul.y, c->u.matmul.m, c->u.matmul.n,
                    c->u.matmul.k, c->u.matmul.trans_x, c->u.matmul.trans_y);
    return OVL_OK;
  case CMD_COLL:
    c->u.coll.a.skipped = failed;
    st = ovl__cpu_rendezvous(br->bw, c->u.coll.ring, c->u.coll.seq, br->rank,
                    &c->u.coll.a, err);
    if (st != OVL_OK)
      ovl__err_prefix(err, "rank %d: %s stream: ", br->rank, s->name);
    return failed ? OVL_OK : st;
  case CMD_P2P:
    st = ovl__cpu_p2p_run(br->bw, c->u.p2p.ring, br->rank, c->u.p2p.items,
                          c->u.p2p.n, failed, err);
    if (st != OVL_OK)
      ovl__err_prefix(err, "rank %d: %s stream: ", br->rank, s->name);
    return failed ? OVL_OK : st;
  case CMD_WAIT:
    return failed ? OVL_OK : run_wait(s, c, err);
  case CMD_DELAY:
    if (!failed)
      run_delay(br->bw, c->u.delay.us);
    return OVL_OK;
  case CMD_MARK:
    br->marks[c->u.mark.index] = ovl__now();
    return OVL_OK;
  }
  return OVL_OK;
}

/* Flight record: a collective or point-to-point command of ring `rg`
 * numbered `tag` completed on this rank. Streams of one rank may finish
 * commands of one ring out of order: keep the largest. */
static void note_progress(ovl__brank *br, const ring *rg, uint64_t tag) {
  _Atomic uint64_t *p = &br->progress[rg->id];
  uint64_t cur = atomic_load(p);
  while (tag > cur && !atomic_compare_exchange_weak(p, &cur, tag))
    ;
}

/* Free a command and what it owns. */
static void cmd_free(cmd *c) {
  if (c->kind == CMD_P2P)
    free(c->u.p2p.items);
  free(c);
}

void *ovl__cpu_worker_main(void *arg) {
  stream *s = arg;
  ovl_error err;

  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->exit)
      pthread_cond_wait(&s->work_cv, &s->mu);
    if (s->head == NULL)
      break; /* told to exit, and drained */
    cmd *c = s->head;
    s->head = c->next;
    if (s->head == NULL)
      s->tail = NULL;
    bool failed = s->status != OVL_OK;
    s->progress_at = ovl__now();
    s->blocked = !failed && (c->kind == CMD_COLL || c->kind == CMD_P2P ||
                             c->kind == CMD_WAIT);
    pthread_mutex_unlock(&s->mu);

    /* Chaos: a sleep before every command but the timer marks (which are
     * not ops); none once the stream failed or the world was aborted. */
    if (s->chaos != 0 && c->kind != CMD_MARK) {
      double us = chaos_us(s);
      if (!failed && !is_aborted(s->br->bw))
        run_delay(s->br->bw, us);
    }
    ovl_status st = run_cmd(s, c, failed, &err);
    if (st == OVL_OK && !failed && c->kind == CMD_COLL)
      note_progress(s->br, c->u.coll.ring, c->u.coll.tag);
    if (st == OVL_OK && !failed && c->kind == CMD_P2P)
      note_progress(s->br, c->u.p2p.ring, c->u.p2p.tag);
    cmd_free(c);

    pthread_mutex_lock(&s->mu);
    if (st != OVL_OK && s->status == OVL_OK) {
      s->status = st;
      memcpy(s->msg, err.msg, sizeof s->msg);
    }
    s->done++;
    s->progress_at = ovl__now();
    s->blocked = false;
    pthread_cond_broadcast(&s->done_cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

void ovl__cpu_stream_destroy(stream *s) {
  cmd *c, *next;
  for (c = s->head; c != NULL; c = next) {
    next = c->next;
    cmd_free(c);
  }
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->work_cv);
  pthread_mutex_destroy(&s->mu);
}

ovl_status ovl__cpu_stream_create(ovl__brank *br, int index,
                                  const char *name, stream *s,
                                  ovl_error *err) {
  memset(s, 0, sizeof *s);
  s->br = br;
  s->index = index;
  if (name != NULL)
    snprintf(s->name, sizeof s->name, "%s", name);
  else if (index == OVL_STREAM_CALC)
    snprintf(s->name, sizeof s->name, "calc");
  else
    snprintf(s->name, sizeof s->name, "comm[%d]", index - 1);
  s->status = OVL_OK;
  if (br->bw->chaos_seed != 0)
    s->chaos = chaos_init(br->bw->chaos_seed, br->rank, index);
  if (pthread_mutex_init(&s->mu, NULL) != 0)
    goto fail;
  if (cond_init(&s->work_cv) != 0) {
    pthread_mutex_destroy(&s->mu);
    goto fail;
  }
  if (cond_init(&s->done_cv) != 0) {
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    goto fail;
  }
  s->progress_at = ovl__now();
  return OVL_OK;
fail:
  return ovl__err(err, OVL_EBACKEND,
                  "rank %d: %s stream: cannot create its locks", br->rank,
                  s->name);
}

/* Every command ends by itself: after an abort, collectives and waits fail
 * at once and delays and chaos sleeps stop within a slice; a kernel runs
 * to its end. So this waits for no deadline. */
bool ovl__cpu_rank_quiesce(ovl__brank *br) {
  for (int i = 0; i < br->nstreams; i++) {
    stream *s = br->streams[i];
    pthread_mutex_lock(&s->mu);
    while (s->done < s->enq)
      pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
  }
  return true;
}

/* ------------------------------------------------------------------ */
/* Streams and events                                                  */
/* ------------------------------------------------------------------ */

/* The stream numbered `index`, or NULL (and OVL_EINVAL in err). */
stream *ovl__cpu_get_stream(ovl__brank *br, int index, ovl_error *err) {
  if (index < 0 || index >= br->nstreams) {
    ovl__err(err, OVL_EINVAL,
             "rank %d: no stream %d (it has calc, %d comm streams and %d "
             "more)",
             br->rank, index, br->nrings, br->nstreams - 1 - br->nrings);
    return NULL;
  }
  return br->streams[index];
}

/* Queue a copy of *tmpl on s. */
ovl_status ovl__cpu_enqueue(stream *s, const cmd *tmpl, ovl_error *err) {
  cmd *c = malloc(sizeof *c);
  if (c == NULL) {
    set_error(err, OVL_ENOMEM, s, "out of memory queuing a command");
    return OVL_ENOMEM;
  }
  *c = *tmpl;
  c->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->tail != NULL)
    s->tail->next = c;
  else
    s->head = c;
  s->tail = c;
  s->enq++;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  return OVL_OK;
}

ovl_status ovl__cpu_event_record(ovl__brank *br, int event, int stream_idx,
                                   ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  if (s == NULL)
    return OVL_EINVAL;
  if (event < 0 || event >= br->nevents)
    return ovl__err(err, OVL_EINVAL, "rank %d: no event %d", br->rank, event);
  pthread_mutex_lock(&s->mu);
  br->events[event].target = s->enq;
  pthread_mutex_unlock(&s->mu);
  br->events[event].src = s;
  br->events[event].recorded = true;
  return OVL_OK;
}

ovl_status ovl__cpu_stream_wait_event(ovl__brank *br, int stream_idx,
                                        int event, ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  if (event < 0 || event >= br->nevents)
    return ovl__err(err, OVL_EINVAL, "rank %d: no event %d", br->rank, event);
  if (!br->events[event].recorded)
    return OVL_OK; /* CUDA: waiting on a never-recorded event is a no-op. */
  memset(&c, 0, sizeof c);
  c.kind = CMD_WAIT;
  c.u.wait.src = br->events[event].src;
  c.u.wait.target = br->events[event].target;
  c.u.wait.event = event;
  return ovl__cpu_enqueue(s, &c, err);
}

ovl_status ovl__cpu_stream_sync(ovl__brank *br, int stream_idx,
                                  ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  ovl_status st;
  if (s == NULL)
    return OVL_EINVAL;
  const double start = ovl__now();
  const double timeout = br->bw->timeout_s;
  char what[128];

  pthread_mutex_lock(&s->mu);
  const uint64_t target = s->enq;
  /* After an abort the stream still drains promptly (its collectives and
   * waits fail at once), so keep waiting for it and return its error: the
   * caller may free buffers its commands use once this returns. */
  while (s->done < target) {
    if (s->blocked) {
      pthread_cond_wait(&s->done_cv, &s->mu);
      continue;
    }
    double since = s->progress_at > start ? s->progress_at : start;
    double now = ovl__now();
    if (now >= since + timeout) {
      snprintf(what, sizeof what,
               "sync timed out after %.*f s (%llu of %llu commands done)",
               secs_prec(now - start), now - start, (unsigned long long)s->done,
               (unsigned long long)target);
      pthread_mutex_unlock(&s->mu);
      set_error(err, OVL_ETIMEDOUT, s, what);
      return OVL_ETIMEDOUT;
    }
    cond_wait_until(&s->done_cv, &s->mu, since + timeout);
  }
  st = s->status;
  if (st != OVL_OK)
    ovl__err(err, st, "%s", s->msg);
  pthread_mutex_unlock(&s->mu);
  return st;
}

