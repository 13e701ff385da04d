/*
 * cuBLAS, loaded when the first cuda rank is made (ovl__blas_load), not
 * linked: libcublasLt's initializers take about 80 ms of CPU in every
 * process that links it, which was most of the time of a short run on the
 * cpu backend (the tests' thousand runs of the tools), and a run that
 * never makes a cuda rank needs none of cuBLAS. The functions the backend
 * calls are looked up once into ovl__blas; configure names the library
 * (OVL_CUBLAS_SONAME, in OVL_CUBLAS_LIBDIR where it was found there).
 */
#include <dlfcn.h>

#include "backend/cuda.h"

#ifndef OVL_CUBLAS_SONAME
#error "configure defines OVL_CUBLAS_SONAME where it builds the cuda backend"
#endif

ovl__blas_api ovl__blas;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
/* What the load found: empty when it succeeded. */
static char load_error[512];

static void *open_library(void) {
  void *h = NULL;
#ifdef OVL_CUBLAS_LIBDIR
  h = dlopen(OVL_CUBLAS_LIBDIR "/" OVL_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL)
    return h;
#endif
  h = dlopen(OVL_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *why = dlerror();
    snprintf(load_error, sizeof load_error, "cannot load %s: %s",
             OVL_CUBLAS_SONAME, why != NULL ? why : "(no reason given)");
  }
  return h;
}

/* *slot = the function `name` of h; false with load_error set if none. */
static bool find(void *h, const char *name, void **slot) {
  dlerror();
  *slot = dlsym(h, name);
  if (*slot != NULL)
    return true;
  const char *why = dlerror();
  snprintf(load_error, sizeof load_error, "%s has no %s: %s",
           OVL_CUBLAS_SONAME, name, why != NULL ? why : "(null)");
  return false;
}

static void load(void) {
  void *h = open_library();
  if (h == NULL)
    return;
  /* The names the headers' macros give (cublasCreate is cublasCreate_v2). */
  struct {
    const char *name;
    void **slot;
  } fns[] = {
      {"cublasCreate_v2", (void **)&ovl__blas.Create},
      {"cublasDestroy_v2", (void **)&ovl__blas.Destroy},
      {"cublasSetMathMode", (void **)&ovl__blas.SetMathMode},
      {"cublasSetStream_v2", (void **)&ovl__blas.SetStream},
      {"cublasSetWorkspace_v2", (void **)&ovl__blas.SetWorkspace},
      {"cublasGemmEx", (void **)&ovl__blas.GemmEx},
      {"cublasGetStatusString", (void **)&ovl__blas.GetStatusString},
      {"cublasGetStatusName", (void **)&ovl__blas.GetStatusName},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
    if (!find(h, fns[i].name, fns[i].slot)) {
      memset(&ovl__blas, 0, sizeof ovl__blas);
      return; /* the library stays loaded: it is a process's to keep */
    }
}

ovl_status ovl__blas_load(int rank, ovl_error *err) {
  pthread_once(&load_once, load);
  if (load_error[0] == '\0')
    return OVL_OK;
  return ovl__err(err, OVL_EBACKEND,
                  "rank %d: cuBLAS (for matmul_v2): %s", rank, load_error);
}
