/*
 * The model backend's cost model (docs/MODEL.md; docs/ARCHITECTURE.md,
 * "The model backend"): what a machine is (a machine file), what was
 * measured on one (a calibration profile), and from them the seconds each
 * primitive of a program takes. The simulation that runs a program on
 * these costs is the run layer's (run/model_run.c); nothing here knows
 * streams or time lines.
 *
 *   model_machine.c  machine files, the built-in default, NCCL's formulas
 *                    for a collective at any rank count
 *   model_profile.c  profiles: read, check against a program, write
 *   model.c          the backend's entry (ovl__backend_model) and the
 *                    costs the simulation asks for
 */
#ifndef OVL_BACKEND_MODEL_H
#define OVL_BACKEND_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/base.h"
#include "core/op.h"

/* Communication kinds the model prices: every collective (ovl__coll),
 * then point-to-point (a send / receive pair). */
#define OVL__COMM_P2P (OVL_COLL_BARRIER + 1)
#define OVL__NCOMM (OVL__COMM_P2P + 1)
/* "allreduce", ..., "barrier", "p2p" (profiles and machine files). */
const char *ovl__comm_kind_name(int kind);
int ovl__comm_kind_from_name(const char *name); /* -1: none */

/* What a kernel is, for contention: memory-bound (elementwise) or a
 * matmul. */
enum { OVL__KC_MEM = 0, OVL__KC_MATMUL = 1, OVL__NKC = 2 };

/* Primitives whose enqueue the host pays for, each its own cost. */
enum {
  OVL__H_KERNEL,
  OVL__H_COLL,
  OVL__H_P2P,
  OVL__H_RECORD,
  OVL__H_WAIT,
  OVL__H_DELAY,
  OVL__NHOST
};
const char *ovl__host_kind_name(int kind);

/* The host's costs and the device's gaps (the key `host` of machine files
 * and profiles alike, in microseconds there): per enqueued primitive
 * (eager), per graph launch, per host sync; the device's gap between two
 * stream items (eager, in a graph); an iteration's own cost beyond its ops,
 * the executor's barriers and drain (host.iter_us, optional: 0). */
typedef struct ovl__mhost {
  double op_s[OVL__NHOST];
  double graph_launch_s, sync_s, gap_s, graph_gap_s;
  double iter_s;
} ovl__mhost;

/* A link: bus bandwidth per GPU (bytes/s, as nccl-tests' busbw) and the
 * latency of one step (s). */
typedef struct ovl__link {
  double bw, lat_s;
} ovl__link;

/* NCCL's algorithm: ring, tree (allreduce between nodes), or auto: the
 * faster of the two, as NCCL's tuner picks. */
enum { OVL__ALGO_RING, OVL__ALGO_TREE, OVL__ALGO_AUTO };

/* A machine file (docs/MODEL.md, "Machine files"). */
typedef struct ovl__machine {
  char name[64];
  char device[64];
  int gpus_per_node;
  ovl__link intra, inter; /* inside a node; between nodes */
  int algo;               /* OVL__ALGO_* */
  /* NCCL's two regimes: small messages (LL) start after coll_base_s and
   * reach ll_bw_frac of the bandwidth; large ones (Simple) start after
   * simple_base_s at the full bandwidth; the faster one is taken. */
  double coll_base_s, simple_base_s, ll_bw_frac;
  /* The device: memory bandwidth (bytes/s, read + written), dense matmul
   * rate per dtype (FLOP/s), the shortest kernel (s). */
  double mem_bw;
  double flops[OVL_DTYPE_COUNT];
  double kernel_min_s;
  ovl__mhost host;
  ovl__link d2h; /* copies to the host (fetch) */
  /* Contention where nothing was measured: how much slower a kernel of
   * class c runs beside communication, and communication beside it. */
  double kernel_slow[OVL__NKC], comm_slow[OVL__NKC];
} ovl__machine;

/* One distinct kernel of a program (op, dtype, shape). */
typedef struct ovl__mkernel {
  bool matmul;
  int ew;    /* ovl__ew (elementwise) */
  int dtype; /* ovl_dtype */
  int64_t numel;
  int64_t m, n, k; /* matmul */
  bool tx, ty;
  double s; /* seconds alone (in a profile) */
} ovl__mkernel;
/* The kernel op `op` runs (its KERNEL primitive). */
void ovl__mkernel_of(const ovl_program *prog, const ovl__op *op,
                     ovl__mkernel *out);
bool ovl__mkernel_same(const ovl__mkernel *a, const ovl__mkernel *b);
/* "scale float32 [1000000]", "matmul bfloat16 4096x8192x16384 (x^T)". */
void ovl__mkernel_name(const ovl__mkernel *k, char *buf, size_t size);

/* The message of op's communication primitive of kind `pk` (COLL, SEND,
 * RECV): its kind (an ovl__coll, or OVL__COMM_P2P), NCCL's count and the
 * element's dtype, as the executor calls the backend with them (a
 * barrier: one float32; a send its input, a receive its output). */
int ovl__comm_msg(const ovl_program *prog, const ovl__op *op, int pk,
                  size_t *count, int *dtype);

/* A fit of one communication kind at one rank count: seconds = lat_s +
 * bytes / bw, bytes = count * element size (NCCL's count: the send
 * count, reducescatter's receive count; p2p: the message). */
typedef struct ovl__mfit {
  bool have;
  double lat_s, bw;
  int points; /* sizes measured */
} ovl__mfit;

/* A calibration profile (docs/MODEL.md, "Profiles"). */
typedef struct ovl__profile {
  char path[256];
  char device[64], date[32], nccl[32], cuda[32], schedule[128];
  int ndevices, nranks;
  /* ovl__program_sig of the schedule calibrated (a hand-made profile
   * may leave it out: then it is not checked) */
  bool have_sig;
  uint64_t program_sig;
  size_t nkernels;
  ovl__mkernel *kernels;
  ovl__mhost host; /* replaces the machine's */
  ovl__mfit fit[OVL__NCOMM];
  /* Measured contention per communication kind and kernel class (0:
   * not measured). */
  double kernel_slow[OVL__NCOMM][OVL__NKC], comm_slow[OVL__NCOMM][OVL__NKC];
} ovl__profile;

/* The model of a world: its machine, and a profile when one was given. */
typedef struct ovl__model {
  ovl__machine mach;
  char machine_path[256]; /* "" for the built-in default */
  bool have_profile;
  ovl__profile prof;
} ovl__model;

/* ---- model_machine.c ---- */
/* The built-in machine: one node of 8 H200 (docs/MODEL.md). */
void ovl__machine_default(ovl__machine *m);
/* Read a machine file; every key is checked, unknown keys refused. */
ovl_status ovl__machine_load(const char *path, ovl__machine *m, ovl_error *err);
/* Seconds one collective of `kind` of `count` elements of `esize` bytes
 * (NCCL's count) takes over `nranks` ranks on this machine, by NCCL's
 * formulas; p2p: a message of count * esize bytes, `cross` when its ranks
 * are on two nodes. */
double ovl__machine_comm_s(const ovl__machine *m, int kind, size_t count,
                           size_t esize, int nranks, bool cross);

/* ---- model_profile.c ---- */
/* A fingerprint of a program's ops (names and order, not shapes), so that
 * a profile is not used for another schedule. */
uint64_t ovl__program_sig(const ovl_program *prog);
ovl_status ovl__profile_load(const char *path, ovl__profile *p, ovl_error *err);
void ovl__profile_free(ovl__profile *p);
/* The profile as JSON (a string to free). */
char *ovl__profile_json(const ovl__profile *p);
/* A profile's fit of `kind` from (bytes, seconds) points: least squares
 * on relative error. */
void ovl__fit_comm(const double *bytes, const double *secs, int n,
                   ovl__mfit *out);

/* ---- model.c ---- */
/* The model of a world of the model backend; NULL for another backend. */
const ovl__model *ovl__model_of(const ovl__backend_ops *be, ovl__bworld *bw);
/* A profile may price `prog` (calibrated on the same schedule); else
 * OVL_EINVAL naming both. */
ovl_status ovl__model_check(const ovl__model *m, const ovl_program *prog,
                            ovl_error *err);
/* What the model predicts `prog` from, in words: "machine h200x2
 * (machines/h200x2.json), profile p.json (NVIDIA H200, 2026-12-01); 1 of
 * 3 kernels estimated from the machine (not in the profile): scale
 * float32 [1000]". */
void ovl__model_about(const ovl__model *m, const ovl_program *prog, char *buf,
                      size_t size);
/* Seconds kernel `k` takes alone; *estimated when the profile does not
 * have it (from the machine's bandwidth and FLOP rate). */
double ovl__model_kernel_s(const ovl__model *m, const ovl__mkernel *k,
                           bool *estimated);
/* Seconds a communication of `kind` takes alone over `nranks` ranks:
 * the profile's fit at its own rank count, else the machine's formulas. */
double ovl__model_comm_s(const ovl__model *m, int kind, size_t count,
                         size_t esize, int nranks, bool cross);
/* Slowdowns: a kernel of class kc beside communication of `kind`, and
 * that communication beside such a kernel (>= 1). */
double ovl__model_kernel_slow(const ovl__model *m, int kind, int kc);
double ovl__model_comm_slow(const ovl__model *m, int kind, int kc);
/* Host costs (the profile's where measured). */
double ovl__model_host_s(const ovl__model *m, int host_kind);
double ovl__model_graph_launch_s(const ovl__model *m);
double ovl__model_sync_s(const ovl__model *m);
double ovl__model_gap_s(const ovl__model *m, bool graph);
double ovl__model_d2h_s(const ovl__model *m, size_t bytes);
/* An iteration's own cost beyond its ops (the profile's where measured). */
double ovl__model_iter_s(const ovl__model *m);

#endif /* OVL_BACKEND_MODEL_H */
