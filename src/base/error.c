/* Status codes, their texts, and the helpers that fill an ovl_error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

const char *ovl_strerror(ovl_status status) {
  switch (status) {
#define OVL__ERR_TEXT(name, text)                                             \
  case OVL_##name:                                                            \
    return text;
    OVL_ERRNO_MAP(OVL__ERR_TEXT)
#undef OVL__ERR_TEXT
  default:
    return "unknown error";
  }
}

const char *ovl_err_name(ovl_status status) {
  switch (status) {
#define OVL__ERR_NAME(name, text)                                             \
  case OVL_##name:                                                            \
    return "OVL_" #name;
    OVL_ERRNO_MAP(OVL__ERR_NAME)
#undef OVL__ERR_NAME
  default:
    return "OVL_UNKNOWN";
  }
}

ovl_status ovl__verr(ovl_error *err, ovl_status status, const char *fmt,
                     va_list ap) {
  if (err != NULL) {
    err->status = status;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  }
  return status;
}

ovl_status ovl__err(ovl_error *err, ovl_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ovl__verr(err, status, fmt, ap);
  va_end(ap);
  return status;
}

void ovl__err_prefix(ovl_error *err, const char *fmt, ...) {
  char prefix[OVL_ERROR_MSG_MAX], old[OVL_ERROR_MSG_MAX];
  va_list ap;
  if (err == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  old[sizeof old - 1] = '\0';
  /* Truncation keeps the start of both parts, which carries the context. */
  size_t n = strlen(prefix);
  if (n >= sizeof err->msg)
    n = sizeof err->msg - 1;
  memcpy(err->msg, prefix, n);
  size_t m = strlen(old);
  if (m > sizeof err->msg - 1 - n)
    m = sizeof err->msg - 1 - n;
  memcpy(err->msg + n, old, m);
  err->msg[n + m] = '\0';
}

char *ovl__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p != NULL)
    memcpy(p, s, n);
  return p;
}
