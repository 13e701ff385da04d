/*
 * The cpu backend: emulated devices with real concurrency.
 *
 * Every stream is a FIFO of commands served by its own worker thread, so
 * streams of one rank really run at the same time and a missing wait really
 * shows as a wrong result. Events are host-side snapshots (stream, number of
 * commands enqueued so far), exactly as cudaEventRecord; a wait is a command
 * that blocks its worker until the source stream has finished that many
 * commands.
 *
 * Collectives meet at a rendezvous per ring: the k-th collective a rank
 * enqueues on ring r (k counted from 0 on the host thread at enqueue time)
 * meets the k-th of every other rank, whatever stream each put it on. The
 * last rank to arrive checks that all agree, computes the result for every
 * rank (reducing in rank order, in the dtype) and wakes the others.
 * Point-to-point matches the k-th send from a to b on a ring with the k-th
 * receive on b from a (cpu_p2p.c); a group is one command whose items
 * progress together.
 *
 * Every wait is on a condition variable (timed ones on CLOCK_MONOTONIC);
 * nothing polls; only the delay command and chaos sleep.
 *
 * Chaos (world_set "chaos_seed", not 0): each worker sleeps a
 * pseudo-random 0..CHAOS_MAX_US before every command it runs, drawn from a
 * generator of its own seeded from (seed, rank, stream), so each stream's
 * sequence of delays is fixed by the seed. Streams then interleave in ways
 * a plain run never shows: work that nothing orders after other work gets a
 * fair chance to run before it, and a missing wait gives wrong numbers.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu.h"

/* ------------------------------------------------------------------ */
/* World                                                               */
/* ------------------------------------------------------------------ */

static int cpu_device_count(void) { return OVL_MAX_RANKS; }

static int cpu_default_ranks(void) { return 2; }

static ovl_status cpu_world_init(const ovl__layout *lay, double timeout_s,
                                 ovl__bworld **out, ovl_error *err) {
  ovl__bworld *bw;
  int nranks = lay->nranks;
  if (nranks < 1 || nranks > OVL_MAX_RANKS)
    return ovl__err(err, OVL_EINVAL,
                    "cpu backend: %d ranks requested, it emulates 1 to %d",
                    nranks, OVL_MAX_RANKS);
  bw = calloc(1, sizeof *bw);
  if (bw == NULL)
    return ovl__err(err, OVL_ENOMEM, "cpu backend: out of memory");
  if (pthread_mutex_init(&bw->mu, NULL) != 0) {
    free(bw);
    return ovl__err(err, OVL_EBACKEND, "cpu backend: pthread_mutex_init failed");
  }
  bw->nranks = nranks;
  bw->lay = *lay;
  bw->timeout_s = timeout_s > 0 ? timeout_s : 60.0;
  atomic_init(&bw->aborted, 0);
  snprintf(bw->devices, sizeof bw->devices, "%d emulated (cpu)",
           lay->nlocal);
  *out = bw;
  return OVL_OK;
}

static void ring_free(ring *rg, int nranks) {
  slot *sl, *next;
  ovl__cpu_ring_free_p2p(rg, nranks);
  for (sl = rg->active; sl != NULL; sl = next) {
    next = sl->next;
    free(sl);
  }
  for (sl = rg->free; sl != NULL; sl = next) {
    next = sl->next;
    free(sl);
  }
  pthread_cond_destroy(&rg->cv);
  pthread_mutex_destroy(&rg->mu);
  free(rg);
}

/* With bw->mu held. */
static ovl_status ensure_rings(ovl__bworld *bw, int nrings, ovl_error *err) {
  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL,
                    "cpu backend: %d rings requested, at most %d", nrings,
                    OVL_MAX_RINGS);
  while (bw->nrings < nrings) {
    ring *rg = calloc(1, sizeof *rg);
    if (rg == NULL)
      return ovl__err(err, OVL_ENOMEM, "cpu backend: out of memory");
    if (pthread_mutex_init(&rg->mu, NULL) != 0) {
      free(rg);
      return ovl__err(err, OVL_EBACKEND,
                      "cpu backend: pthread_mutex_init failed");
    }
    if (cond_init(&rg->cv) != 0) {
      pthread_mutex_destroy(&rg->mu);
      free(rg);
      return ovl__err(err, OVL_EBACKEND,
                      "cpu backend: pthread_cond_init failed");
    }
    rg->id = bw->nrings;
    bw->rings[bw->nrings++] = rg;
  }
  return OVL_OK;
}

/* Every ring gets its rendezvous, whether or not comm_mask says it carries
 * collectives or point-to-point: it costs nothing until one meets there. */
static ovl_status cpu_world_rings(ovl__bworld *bw, int nrings,
                                  uint32_t comm_mask, ovl_error *err) {
  (void)comm_mask;
  pthread_mutex_lock(&bw->mu);
  ovl_status st = ensure_rings(bw, nrings, err);
  pthread_mutex_unlock(&bw->mu);
  return st;
}

static const char *cpu_world_devices(ovl__bworld *bw) { return bw->devices; }

static const char *cpu_device_name(ovl__bworld *bw, int rank) {
  (void)bw;
  (void)rank;
  return "emulated (cpu)";
}

/* No driver, runtime or NCCL: the fields stay "n/a". */
static void cpu_world_info(ovl__bworld *bw, ovl_world_info *info) {
  (void)bw;
  (void)info;
}

/* Chaos is this backend's only knob; the cuda ones are refused. */
static ovl_status cpu_world_set(ovl__bworld *bw, const char *key,
                                const char *value, ovl_error *err) {
  unsigned long seed;
  if (strcmp(key, "tf32") == 0)
    return ovl__err(err, OVL_EINVAL,
                    "backend 'cpu' has no TF32 matrix multiply (tf32=%s: the "
                    "cuda backend has, for float32 on cuBLAS)",
                    value);
  if (strcmp(key, "chaos_seed") != 0)
    return ovl__err(err, OVL_EINVAL,
                    "backend 'cpu' has no comm stream priority or NCCL CTA "
                    "limits (the cuda backend has)");
  if (!ovl__parse_uint(value, UINT_MAX, &seed))
    return ovl__err(err, OVL_EINVAL,
                    "chaos_seed: '%s' is not a number from 0 to %u", value,
                    UINT_MAX);
  /* Read by each rank_init. */
  bw->chaos_seed = (unsigned)seed;
  return OVL_OK;
}

static void cpu_world_fini(ovl__bworld *bw) {
  if (bw == NULL)
    return;
  for (int i = 0; i < bw->nrings; i++)
    ring_free(bw->rings[i], bw->nranks);
  pthread_mutex_destroy(&bw->mu);
  free(bw);
}

/* Set the flag, then broadcast under every lock a waiter may hold while it
 * checks the flag, so no waiter misses the wake-up. */
static void cpu_world_abort(ovl__bworld *bw) {
  atomic_store(&bw->aborted, 1);
  pthread_mutex_lock(&bw->mu);
  for (int i = 0; i < bw->nrings; i++) {
    pthread_mutex_lock(&bw->rings[i]->mu);
    pthread_cond_broadcast(&bw->rings[i]->cv);
    pthread_mutex_unlock(&bw->rings[i]->mu);
  }
  for (int r = 0; r < bw->nranks; r++) {
    ovl__brank *br = bw->ranks[r];
    if (br == NULL)
      continue;
    for (int i = 0; i < br->nstreams; i++) {
      pthread_mutex_lock(&br->streams[i]->mu);
      pthread_cond_broadcast(&br->streams[i]->done_cv);
      pthread_mutex_unlock(&br->streams[i]->mu);
    }
  }
  pthread_mutex_unlock(&bw->mu);
}

/* ------------------------------------------------------------------ */
/* Ranks                                                               */
/* ------------------------------------------------------------------ */

/* Tell every worker to exit once drained, join them, and free. */
static void rank_destroy(ovl__brank *br) {
  for (int i = 0; i < br->nstreams; i++) {
    stream *s = br->streams[i];
    pthread_mutex_lock(&s->mu);
    s->exit = true;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
  }
  for (int i = 0; i < br->nstreams; i++)
    pthread_join(br->streams[i]->thread, NULL);
  for (int i = 0; i < br->nstreams; i++) {
    ovl__cpu_stream_destroy(br->streams[i]);
    free(br->streams[i]);
  }
  free(br->streams);
  free(br->events);
  free(br->marks);
  free(br);
}

/* Make streams [br->nstreams, upto), each with its worker; names[s] (or
 * NULL: calc and comm[R]) for messages. The new array goes in under the
 * world's lock, so that an abort sees either array whole. */
static ovl_status add_streams(ovl__brank *br, int upto,
                              const char *const *names, ovl_error *err) {
  int have = br->nstreams, made = 0;
  stream **arr;
  ovl_status st = OVL_OK;
  if (upto <= have)
    return OVL_OK;
  arr = malloc((size_t)upto * sizeof *arr);
  if (arr == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", br->rank);
  if (have > 0)
    memcpy(arr, br->streams, (size_t)have * sizeof *arr);
  for (int i = have; i < upto; i++, made++) {
    stream *s = malloc(sizeof *s);
    if (s == NULL) {
      st = ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", br->rank);
      break;
    }
    st = ovl__cpu_stream_create(br, i, names != NULL ? names[i] : NULL, s,
                                err);
    if (st == OVL_OK &&
        pthread_create(&s->thread, NULL, ovl__cpu_worker_main, s) != 0) {
      st = ovl__err(err, OVL_EBACKEND,
                    "rank %d: %s stream: cannot start its worker thread",
                    br->rank, s->name);
      ovl__cpu_stream_destroy(s);
    }
    if (st != OVL_OK) {
      free(s);
      break;
    }
    arr[i] = s;
  }
  pthread_mutex_lock(&br->bw->mu);
  free(br->streams);
  br->streams = arr;
  br->nstreams = have + made;
  pthread_mutex_unlock(&br->bw->mu);
  return st;
}

static ovl_status cpu_rank_init(ovl__bworld *bw, int rank, int nrings,
                                ovl__brank **out, ovl_error *err) {
  ovl__brank *br;
  ovl_status st = OVL_OK;

  if (rank < 0 || rank >= bw->nranks)
    return ovl__err(err, OVL_EINVAL, "rank %d: not in a world of %d ranks",
                    rank, bw->nranks);
  if (nrings < 0 || nrings > OVL_MAX_RINGS)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d rings, at most %d", rank,
                    nrings, OVL_MAX_RINGS);
  br = calloc(1, sizeof *br);
  if (br == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
  br->bw = bw;
  br->rank = rank;
  br->nrings = nrings;
  for (int i = 0; i < OVL_MAX_RINGS; i++)
    atomic_init(&br->progress[i], 0);
  br->events = calloc(2 * (size_t)nrings + 1, sizeof *br->events);
  br->nevents = 2 * nrings;
  if (br->events == NULL) {
    free(br);
    return ovl__err(err, OVL_ENOMEM, "rank %d: out of memory", rank);
  }
  st = add_streams(br, 1 + nrings, NULL, err);
  if (st != OVL_OK)
    goto fail;

  pthread_mutex_lock(&bw->mu);
  if (bw->ranks[rank] != NULL)
    st = ovl__err(err, OVL_EINVAL, "rank %d: initialised twice", rank);
  else
    st = ensure_rings(bw, nrings, err);
  if (st == OVL_OK) {
    for (int i = 0; i < nrings; i++)
      br->rings[i] = bw->rings[i];
    bw->ranks[rank] = br;
  }
  pthread_mutex_unlock(&bw->mu);
  if (st != OVL_OK)
    goto fail;
  *out = br;
  return OVL_OK;

fail:
  rank_destroy(br);
  return st;
}

static ovl_status cpu_streams_reserve(ovl__brank *br, int nstreams,
                                      const char *const *names,
                                      ovl_error *err) {
  if (nstreams < 0 || nstreams > OVL_MAX_STREAMS)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d streams, at most %d",
                    br->rank, nstreams, OVL_MAX_STREAMS);
  return add_streams(br, nstreams, names, err);
}

static ovl_status cpu_events_reserve(ovl__brank *br, int nevents,
                                     ovl_error *err) {
  event *ev;
  if (nevents < 0)
    return ovl__err(err, OVL_EINVAL, "rank %d: %d events", br->rank,
                    nevents);
  if (nevents <= br->nevents)
    return OVL_OK;
  ev = realloc(br->events, (size_t)nevents * sizeof *ev);
  if (ev == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %d events",
                    br->rank, nevents);
  memset(ev + br->nevents, 0, (size_t)(nevents - br->nevents) * sizeof *ev);
  br->events = ev;
  br->nevents = nevents;
  return OVL_OK;
}

static void cpu_rank_fini(ovl__brank *br) {
  ovl__bworld *bw;
  if (br == NULL)
    return;
  bw = br->bw;
  /* Leave the world first, so that an abort never touches freed streams. */
  pthread_mutex_lock(&bw->mu);
  if (bw->ranks[br->rank] == br)
    bw->ranks[br->rank] = NULL;
  pthread_mutex_unlock(&bw->mu);
  rank_destroy(br);
}

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

static ovl_status cpu_mem_alloc(ovl__brank *br, size_t bytes, void **out,
                                ovl_error *err) {
  void *p = NULL;
  size_t size = (bytes + 63) & ~(size_t)63;
  if (size < bytes || posix_memalign(&p, 64, size ? size : 64) != 0)
    return ovl__err(err, OVL_ENOMEM, "rank %d: cannot allocate %zu bytes",
                    br->rank, bytes);
  /* All-ones bytes are a NaN in both float32 and float64. */
  memset(p, 0xFF, size ? size : 64);
  *out = p;
  return OVL_OK;
}

static void cpu_mem_free(ovl__brank *br, void *ptr) {
  (void)br;
  free(ptr);
}

/* Host buffers are plain memory: the emulated device copies with memcpy. */
static ovl_status cpu_host_alloc(ovl__brank *br, size_t bytes, void **out,
                                 ovl_error *err) {
  *out = malloc(bytes ? bytes : 1);
  if (*out == NULL)
    return ovl__err(err, OVL_ENOMEM,
                    "rank %d: cannot allocate %zu bytes of host memory",
                    br->rank, bytes);
  return OVL_OK;
}

static ovl_status cpu_mem_upload(ovl__brank *br, void *dst, const void *src,
                                 size_t bytes, ovl_error *err) {
  (void)br;
  (void)err;
  if (bytes > 0)
    memcpy(dst, src, bytes);
  return OVL_OK;
}

static ovl_status cpu_mem_download(ovl__brank *br, void *dst,
                                   const void *src, size_t bytes,
                                   ovl_error *err) {
  (void)br;
  (void)err;
  if (bytes > 0)
    memcpy(dst, src, bytes);
  return OVL_OK;
}

/* ------------------------------------------------------------------ */
/* Work                                                                */
/* ------------------------------------------------------------------ */

static bool dtype_ok(ovl_dtype dtype) {
  return (unsigned)dtype < OVL_DTYPE_COUNT;
}

static ovl_status cpu_elementwise(ovl__brank *br, int stream_idx, ovl__ew fn,
                                  ovl_dtype dtype, void *out, const void *x,
                                  const void *y, double scale, double bias,
                                  size_t n, ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  bool binary = (unsigned)fn < OVL__EW_COUNT && ovl__ew_arity(fn) == 2;
  if ((unsigned)fn >= OVL__EW_COUNT || !dtype_ok(dtype) ||
      (n > 0 && (out == NULL || x == NULL || (binary && y == NULL)))) {
    set_error(err, OVL_EINVAL, s, "invalid elementwise kernel arguments");
    return OVL_EINVAL;
  }
  memset(&c, 0, sizeof c);
  c.kind = CMD_KERNEL;
  c.u.kernel.fn = fn;
  c.u.kernel.dtype = dtype;
  c.u.kernel.out = out;
  c.u.kernel.x = x;
  c.u.kernel.y = y;
  c.u.kernel.scale = scale;
  c.u.kernel.bias = bias;
  c.u.kernel.n = n;
  return ovl__cpu_enqueue(s, &c, err);
}

static ovl_status cpu_matmul(ovl__brank *br, int stream_idx, ovl_dtype dtype,
                             void *out, const void *x, const void *y,
                             size_t m, size_t n, size_t k, bool trans_x,
                             bool trans_y, ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  if (!dtype_ok(dtype) || m == 0 || n == 0 || k == 0 || out == NULL ||
      x == NULL || y == NULL || out == x || out == y) {
    set_error(err, OVL_EINVAL, s, "invalid matmul arguments");
    return OVL_EINVAL;
  }
  memset(&c, 0, sizeof c);
  c.kind = CMD_MATMUL;
  c.u.matmul.dtype = dtype;
  c.u.matmul.trans_x = trans_x;
  c.u.matmul.trans_y = trans_y;
  c.u.matmul.out = out;
  c.u.matmul.x = x;
  c.u.matmul.y = y;
  c.u.matmul.m = m;
  c.u.matmul.n = n;
  c.u.matmul.k = k;
  return ovl__cpu_enqueue(s, &c, err);
}

/* The ring of a collective or point-to-point call, or NULL (and
 * OVL_EINVAL in err). */
static ring *call_ring(ovl__brank *br, stream *s, int ring_id,
                       ovl_error *err) {
  char what[128];
  if (ring_id >= 0 && ring_id < br->nrings)
    return br->rings[ring_id];
  snprintf(what, sizeof what, "no ring %d (the rank has %d)", ring_id,
           br->nrings);
  set_error(err, OVL_EINVAL, s, what);
  return NULL;
}

static bool coll_args_ok(const ovl__brank *br, ovl__coll coll,
                         ovl__redop redop, ovl_dtype dtype, const void *send,
                         const void *recv, size_t count, int root) {
  int nranks = br->bw->nranks;
  if (coll < OVL_COLL_ALLREDUCE || coll > OVL_COLL_BARRIER)
    return false;
  if (coll == OVL_COLL_BARRIER)
    return count == 1 && send == NULL && recv == NULL;
  if ((unsigned)redop >= OVL__RED_COUNT || !dtype_ok(dtype) ||
      (ovl__coll_has_root(coll) && (root < 0 || root >= nranks)) ||
      (count > 0 && (send == NULL || recv == NULL)))
    return false;
  /* alltoall: nranks equal parts, never in place. */
  if (coll == OVL_COLL_ALLTOALL &&
      (count % (size_t)nranks != 0 || (count > 0 && send == recv)))
    return false;
  return true;
}

static ovl_status cpu_collective(ovl__brank *br, int stream_idx, int ring_id,
                                 ovl__coll coll, ovl__redop redop,
                                 ovl_dtype dtype, const void *send, void *recv,
                                 size_t count, int root, uint64_t tag,
                                 ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  cmd c;
  char what[128];
  ring *rg;
  ovl_status st;
  if (s == NULL)
    return OVL_EINVAL;
  if ((rg = call_ring(br, s, ring_id, err)) == NULL)
    return OVL_EINVAL;
  if (!coll_args_ok(br, coll, redop, dtype, send, recv, count, root)) {
    snprintf(what, sizeof what,
             "invalid arguments to a collective (%s) on ring %d",
             ovl__coll_name(coll), ring_id);
    set_error(err, OVL_EINVAL, s, what);
    return OVL_EINVAL;
  }
  memset(&c, 0, sizeof c);
  c.kind = CMD_COLL;
  c.u.coll.ring = rg;
  c.u.coll.seq = br->seq[ring_id];
  c.u.coll.tag = tag;
  c.u.coll.a.coll = coll;
  c.u.coll.a.redop = coll == OVL_COLL_BARRIER ? OVL_RED_SUM : redop;
  c.u.coll.a.dtype = coll == OVL_COLL_BARRIER ? OVL_DTYPE_FLOAT32 : dtype;
  c.u.coll.a.send = send;
  c.u.coll.a.recv = recv;
  c.u.coll.a.count = count;
  c.u.coll.a.root = ovl__coll_has_root(coll) ? root : 0;
  st = ovl__cpu_enqueue(s, &c, err);
  if (st == OVL_OK)
    br->seq[ring_id]++;
  return st;
}

/* Items are checked and numbered here, on the host thread (the k-th send
 * from a to b matches the k-th receive on b from a, in enqueue order). */
static ovl_status cpu_p2p(ovl__brank *br, int stream_idx, int ring_id,
                          const ovl__p2p_item *items, int n, uint64_t tag,
                          ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  int nranks = br->bw->nranks;
  uint64_t sent[OVL_MAX_RANKS], received[OVL_MAX_RANKS];
  p2p_item *its;
  char what[160];
  ring *rg;
  cmd c;
  ovl_status st;
  if (s == NULL)
    return OVL_EINVAL;
  if ((rg = call_ring(br, s, ring_id, err)) == NULL)
    return OVL_EINVAL;
  if (n < 1 || items == NULL) {
    snprintf(what, sizeof what,
             "a point-to-point call on ring %d with %d items", ring_id, n);
    set_error(err, OVL_EINVAL, s, what);
    return OVL_EINVAL;
  }
  for (int i = 0; i < n; i++) {
    const ovl__p2p_item *it = &items[i];
    if (it->peer < 0 || it->peer >= nranks || !dtype_ok(it->dtype) ||
        (it->count > 0 && it->buf == NULL)) {
      snprintf(what, sizeof what,
               "invalid %s (item %d of %d) on ring %d: peer %d of %d ranks",
               it->send ? "send" : "recv", i + 1, n, ring_id, it->peer,
               nranks);
      set_error(err, OVL_EINVAL, s, what);
      return OVL_EINVAL;
    }
  }
  its = malloc((size_t)n * sizeof *its);
  if (its == NULL) {
    set_error(err, OVL_ENOMEM, s, "out of memory queuing a point-to-point call");
    return OVL_ENOMEM;
  }
  memcpy(sent, br->sent[ring_id], (size_t)nranks * sizeof *sent);
  memcpy(received, br->received[ring_id], (size_t)nranks * sizeof *received);
  for (int i = 0; i < n; i++) {
    its[i].send = items[i].send;
    its[i].peer = items[i].peer;
    its[i].dtype = items[i].dtype;
    its[i].buf = items[i].buf;
    its[i].count = items[i].count;
    its[i].k = items[i].send ? sent[items[i].peer]++
                             : received[items[i].peer]++;
    its[i].pr = NULL;
    its[i].copies = false;
  }
  memset(&c, 0, sizeof c);
  c.kind = CMD_P2P;
  c.u.p2p.ring = rg;
  c.u.p2p.tag = tag;
  c.u.p2p.n = n;
  c.u.p2p.items = its;
  st = ovl__cpu_enqueue(s, &c, err);
  if (st != OVL_OK) {
    free(its);
    return st;
  }
  memcpy(br->sent[ring_id], sent, (size_t)nranks * sizeof *sent);
  memcpy(br->received[ring_id], received, (size_t)nranks * sizeof *received);
  return OVL_OK;
}

static uint64_t cpu_ring_progress(ovl__brank *br, int ring_id) {
  if (br == NULL || ring_id < 0 || ring_id >= OVL_MAX_RINGS)
    return 0;
  return atomic_load(&br->progress[ring_id]);
}

static ovl_status cpu_delay(ovl__brank *br, int stream_idx, double us,
                            ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  memset(&c, 0, sizeof c);
  c.kind = CMD_DELAY;
  c.u.delay.us = us;
  return ovl__cpu_enqueue(s, &c, err);
}

static ovl_status cpu_timers_reserve(ovl__brank *br, size_t n,
                                     ovl_error *err) {
  double *m = realloc(br->marks, (n ? n : 1) * sizeof *m);
  if (m == NULL)
    return ovl__err(err, OVL_ENOMEM, "rank %d: no memory for %zu timers",
                    br->rank, n);
  for (size_t i = 0; i < n; i++)
    m[i] = NAN;
  br->marks = m;
  br->nmarks = n;
  return OVL_OK;
}

static ovl_status cpu_timer_mark(ovl__brank *br, size_t i, int stream_idx,
                                 ovl_error *err) {
  stream *s = ovl__cpu_get_stream(br, stream_idx, err);
  cmd c;
  if (s == NULL)
    return OVL_EINVAL;
  if (i >= br->nmarks)
    return ovl__err(err, OVL_EINVAL, "rank %d: timer %zu of %zu", br->rank,
                    i, br->nmarks);
  memset(&c, 0, sizeof c);
  c.kind = CMD_MARK;
  c.u.mark.index = i;
  return ovl__cpu_enqueue(s, &c, err);
}

static ovl_status cpu_timer_elapsed(ovl__brank *br, size_t a, size_t b,
                                    double *seconds, ovl_error *err) {
  if (a >= br->nmarks || b >= br->nmarks || isnan(br->marks[a]) ||
      isnan(br->marks[b]))
    return ovl__err(err, OVL_EINVAL, "rank %d: timers %zu, %zu not taken",
                    br->rank, a, b);
  *seconds = br->marks[b] - br->marks[a];
  return OVL_OK;
}

const ovl__backend_ops ovl__backend_cpu = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .default_ranks = cpu_default_ranks,
    .world_init = cpu_world_init,
    .world_rings = cpu_world_rings,
    .world_devices = cpu_world_devices,
    .device_name = cpu_device_name,
    .world_info = cpu_world_info,
    .world_fini = cpu_world_fini,
    .world_abort = cpu_world_abort,
    .rank_init = cpu_rank_init,
    .streams_reserve = cpu_streams_reserve,
    .rank_fini = cpu_rank_fini,
    .rank_quiesce = ovl__cpu_rank_quiesce,
    .events_reserve = cpu_events_reserve,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_mem_free,
    .mem_upload = cpu_mem_upload,
    .mem_download = cpu_mem_download,
    .event_record = ovl__cpu_event_record,
    .stream_wait_event = ovl__cpu_stream_wait_event,
    .stream_sync = ovl__cpu_stream_sync,
    .elementwise = cpu_elementwise,
    .matmul = cpu_matmul,
    .collective = cpu_collective,
    .p2p = cpu_p2p,
    .ring_progress = cpu_ring_progress,
    .delay = cpu_delay,
    .timers_reserve = cpu_timers_reserve,
    .timer_mark = cpu_timer_mark,
    .timer_elapsed = cpu_timer_elapsed,
    .world_set = cpu_world_set,
    /* Every command is malloc'd when enqueued and freed when run. */
    .host_bytes_per_command = OVL_MALLOC_BYTES(sizeof(cmd)),
    .host_bytes_per_timer = sizeof(double),
};
