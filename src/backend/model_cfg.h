/*
 * Reading the model's two files (machine files, profiles: docs/MODEL.md)
 * from their JSON, each key checked, and the names of their keys that
 * are kinds (model.h: ovl__comm_kind_name, ovl__host_kind_name):
 * model_cfg.c. Internal to the model
 * (backend/model_*.c). A reader stops at the first problem: the
 * message says the file, the line and column, the key's path and what
 * was wanted ("m.json:4:17: 'intra.busbw_GBps': expected a number > 0,
 * found a string").
 */
#ifndef OVL_BACKEND_MODEL_CFG_H
#define OVL_BACKEND_MODEL_CFG_H

#include "backend/model.h"
#include "base/json_read.h"

typedef struct ovl__cfg {
  const char *file;
  ovl_error *err;
  ovl_status st; /* the first problem; OVL_OK while none */
} ovl__cfg;

/* `obj` (at `path`, "" for the top) must be an object whose keys are all
 * in `known` (NULL-terminated). */
bool ovl__cfg_object(ovl__cfg *c, const ovl__json *obj, const char *path,
                     const char *const *known);
/* Member `key` of object `obj` (path `path`): required unless `opt`
 * (then NULL when absent, and nothing is wrong). */
const ovl__json *ovl__cfg_member(ovl__cfg *c, const ovl__json *obj,
                                 const char *path, const char *key, bool opt);
/* A number >= lo (> lo when `strict`) scaled by `unit`, into *out; a
 * string into buf (cut to size); an integer in [lo, hi]; a boolean. A
 * missing optional member leaves *out as it was and returns true. */
bool ovl__cfg_num(ovl__cfg *c, const ovl__json *obj, const char *path,
                  const char *key, double lo, bool strict, double unit,
                  bool opt, double *out);
bool ovl__cfg_str(ovl__cfg *c, const ovl__json *obj, const char *path,
                  const char *key, bool opt, char *buf, size_t size);
bool ovl__cfg_int(ovl__cfg *c, const ovl__json *obj, const char *path,
                  const char *key, long lo, long hi, bool opt, long *out);
bool ovl__cfg_bool(ovl__cfg *c, const ovl__json *obj, const char *path,
                   const char *key, bool opt, bool *out);
/* The key `host` of `top` (a machine file's or a profile's: the same
 * keys, in microseconds) into *h. */
void ovl__cfg_host(ovl__cfg *c, const ovl__json *top, ovl__mhost *h);
/* A problem at value `at` (NULL: the file): "FILE:LINE:COL: ..." */
bool ovl__cfg_fail(ovl__cfg *c, const ovl__json *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* OVL_BACKEND_MODEL_CFG_H */
