/*
 * Reading the model's files from their JSON, each key checked
 * (backend/model_cfg.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/model_cfg.h"

static const char *const comm_names[OVL__NCOMM] = {
    "allreduce", "broadcast", "allgather", "reducescatter",
    "reduce",    "alltoall",  "barrier",   "p2p"};
static const char *const host_names[OVL__NHOST] = {
    "kernel_us", "coll_us", "p2p_us", "record_us", "wait_us", "delay_us"};

const char *ovl__comm_kind_name(int kind) {
  return kind >= 0 && kind < OVL__NCOMM ? comm_names[kind] : "?";
}
int ovl__comm_kind_from_name(const char *name) {
  for (int k = 0; k < OVL__NCOMM; k++)
    if (strcmp(name, comm_names[k]) == 0)
      return k;
  return -1;
}
const char *ovl__host_kind_name(int kind) {
  return kind >= 0 && kind < OVL__NHOST ? host_names[kind] : "?";
}

bool ovl__cfg_fail(ovl__cfg *c, const ovl__json *at, const char *fmt, ...) {
  char msg[OVL_ERROR_MSG_MAX];
  va_list ap;
  if (c->st != OVL_OK)
    return false;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (at != NULL)
    c->st = ovl__err(c->err, OVL_EINVAL, "%s:%d:%d: %s", c->file, at->line,
                     at->col, msg);
  else
    c->st = ovl__err(c->err, OVL_EINVAL, "%s: %s", c->file, msg);
  return false;
}

/* "intra.lat_us", or "lat_us" at the top. */
static void key_path(char *buf, size_t size, const char *path,
                     const char *key) {
  if (path[0] != '\0')
    snprintf(buf, size, "%s.%s", path, key);
  else
    snprintf(buf, size, "%s", key);
}

static const char *what(const ovl__json *v) {
  switch (v->type) {
  case OVL__J_NULL:
    return "null";
  case OVL__J_BOOL:
    return "a boolean";
  case OVL__J_NUM:
    return "a number";
  case OVL__J_STR:
    return "a string";
  case OVL__J_ARR:
    return "an array";
  case OVL__J_OBJ:
    return "an object";
  }
  return "a value";
}

bool ovl__cfg_object(ovl__cfg *c, const ovl__json *obj, const char *path,
                     const char *const *known) {
  if (c->st != OVL_OK)
    return false;
  if (obj->type != OVL__J_OBJ)
    return ovl__cfg_fail(c, obj, "'%s': expected an object, found %s",
                         path[0] ? path : "(top)", what(obj));
  for (size_t i = 0; i < obj->n; i++) {
    bool ok = false;
    for (size_t k = 0; known[k] != NULL && !ok; k++)
      ok = strcmp(obj->keys[i], known[k]) == 0;
    if (!ok) {
      char list[512] = "", kp[256];
      size_t len = 0;
      for (size_t k = 0; known[k] != NULL && len < sizeof list; k++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                k ? ", " : "", known[k]);
      key_path(kp, sizeof kp, path, obj->keys[i]);
      return ovl__cfg_fail(c, &obj->items[i], "unknown key '%s' (known: %s)",
                           kp, list);
    }
  }
  return true;
}

const ovl__json *ovl__cfg_member(ovl__cfg *c, const ovl__json *obj,
                                 const char *path, const char *key, bool opt) {
  const ovl__json *v;
  if (c->st != OVL_OK)
    return NULL;
  v = ovl__json_get(obj, key);
  if (v == NULL && !opt) {
    char kp[256];
    key_path(kp, sizeof kp, path, key);
    ovl__cfg_fail(c, obj, "'%s' is missing", kp);
  }
  return v;
}

bool ovl__cfg_num(ovl__cfg *c, const ovl__json *obj, const char *path,
                  const char *key, double lo, bool strict, double unit,
                  bool opt, double *out) {
  const ovl__json *v = ovl__cfg_member(c, obj, path, key, opt);
  char kp[256];
  if (v == NULL)
    return c->st == OVL_OK;
  key_path(kp, sizeof kp, path, key);
  if (v->type != OVL__J_NUM)
    return ovl__cfg_fail(c, v, "'%s': expected a number %s %g, found %s", kp,
                         strict ? ">" : ">=", lo, what(v));
  if (strict ? !(v->num > lo) : !(v->num >= lo))
    return ovl__cfg_fail(c, v, "'%s': expected a number %s %g, found %g", kp,
                         strict ? ">" : ">=", lo, v->num);
  *out = v->num * unit;
  return true;
}

bool ovl__cfg_str(ovl__cfg *c, const ovl__json *obj, const char *path,
                  const char *key, bool opt, char *buf, size_t size) {
  const ovl__json *v = ovl__cfg_member(c, obj, path, key, opt);
  char kp[256];
  if (v == NULL)
    return c->st == OVL_OK;
  key_path(kp, sizeof kp, path, key);
  if (v->type != OVL__J_STR)
    return ovl__cfg_fail(c, v, "'%s': expected a string, found %s", kp,
                         what(v));
  if (strlen(v->str) >= size)
    return ovl__cfg_fail(c, v, "'%s': longer than %zu characters", kp,
                         size - 1);
  memcpy(buf, v->str, strlen(v->str) + 1);
  return true;
}

bool ovl__cfg_int(ovl__cfg *c, const ovl__json *obj, const char *path,
                  const char *key, long lo, long hi, bool opt, long *out) {
  const ovl__json *v = ovl__cfg_member(c, obj, path, key, opt);
  char kp[256];
  if (v == NULL)
    return c->st == OVL_OK;
  key_path(kp, sizeof kp, path, key);
  if (v->type != OVL__J_NUM || v->num != (double)(long)v->num ||
      v->num < (double)lo || v->num > (double)hi)
    return ovl__cfg_fail(c, v, "'%s': expected a whole number %ld..%ld", kp, lo,
                         hi);
  *out = (long)v->num;
  return true;
}

bool ovl__cfg_bool(ovl__cfg *c, const ovl__json *obj, const char *path,
                   const char *key, bool opt, bool *out) {
  const ovl__json *v = ovl__cfg_member(c, obj, path, key, opt);
  char kp[256];
  if (v == NULL)
    return c->st == OVL_OK;
  key_path(kp, sizeof kp, path, key);
  if (v->type != OVL__J_BOOL)
    return ovl__cfg_fail(c, v, "'%s': expected true or false, found %s", kp,
                         what(v));
  *out = v->b;
  return true;
}

void ovl__cfg_host(ovl__cfg *c, const ovl__json *top, ovl__mhost *h) {
  static const char *const known[] = {"kernel_us",       "coll_us", "p2p_us",
                                      "record_us",       "wait_us", "delay_us",
                                      "graph_launch_us", "sync_us", "gap_us",
                                      "graph_gap_us",    "iter_us", NULL};
  const ovl__json *o = ovl__cfg_member(c, top, "", "host", false);
  if (o == NULL || !ovl__cfg_object(c, o, "host", known))
    return;
  for (int k = 0; k < OVL__NHOST; k++)
    ovl__cfg_num(c, o, "host", host_names[k], 0, false, 1e-6, false,
                 &h->op_s[k]);
  ovl__cfg_num(c, o, "host", "graph_launch_us", 0, false, 1e-6, false,
               &h->graph_launch_s);
  ovl__cfg_num(c, o, "host", "sync_us", 0, false, 1e-6, false, &h->sync_s);
  ovl__cfg_num(c, o, "host", "gap_us", 0, false, 1e-6, false, &h->gap_s);
  ovl__cfg_num(c, o, "host", "graph_gap_us", 0, false, 1e-6, false,
               &h->graph_gap_s);
  ovl__cfg_num(c, o, "host", "iter_us", 0, false, 1e-6, true, &h->iter_s);
}
