/* The list of compiled-in backends. Where CUDA is compiled out its backend
 * is simply not in the list, so callers carry no #ifdef. */
#include <string.h>

#include "backend/backend.h"

const ovl__backend_ops *const ovl__backends[] = {
#ifdef HAVE_CUDA
    &ovl__backend_cuda,
#endif
    &ovl__backend_cpu,
    &ovl__backend_model,
    NULL,
};

const ovl__backend_ops *ovl__backend_find(const char *name) {
  for (size_t i = 0; ovl__backends[i] != NULL; i++)
    if (strcmp(ovl__backends[i]->name, name) == 0)
      return ovl__backends[i];
  return NULL;
}

int ovl_backend_available(const char *name) {
  return ovl__backend_find(name) != NULL;
}
