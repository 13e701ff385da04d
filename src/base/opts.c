/*
 * Option structs that can grow (ovl/base.h, OVL_OPTS_INIT): a caller
 * built against an earlier version passes a smaller struct, and its size
 * says how much of it there is.
 */
#include <string.h>

#include "base/base.h"

ovl_status ovl__opts_read(void *dst, size_t dst_size, const void *src,
                          const char *what, ovl_error *err) {
  size_t size;
  memset(dst, 0, dst_size);
  memcpy(dst, &dst_size, sizeof dst_size);
  if (src == NULL)
    return OVL_OK;
  memcpy(&size, src, sizeof size);
  if (size == 0)
    return ovl__err(err, OVL_EINVAL,
                    "%s: its size is 0: set .size to the struct's size when "
                    "it is made (OVL_OPTS_INIT, or {.size = sizeof opts})",
                    what);
  if (size < sizeof size || size > ((size_t)1 << 20))
    return ovl__err(err, OVL_EINVAL,
                    "%s: its size is %zu: not the size of an options "
                    "struct (OVL_OPTS_INIT)",
                    what, size);
  for (size_t i = dst_size; i < size; i++)
    if (((const unsigned char *)src)[i] != 0)
      return ovl__err(err, OVL_EINVAL,
                      "%s: fields set beyond the %zu bytes this libovl "
                      "(%s) knows: the program was built against a later "
                      "version",
                      what, dst_size, ovl_version_string());
  memcpy((unsigned char *)dst + sizeof size,
         (const unsigned char *)src + sizeof size,
         (size < dst_size ? size : dst_size) - sizeof size);
  return OVL_OK;
}
