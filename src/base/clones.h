/*
 * Function multiversioning (GCC's target_clones) for the host kernels
 * that gain from instructions the x86-64 baseline lacks (FMA, AVX2,
 * AVX-512): OVL__CLONES(...) expands to target_clones(...) where it is
 * safe, else to nothing. Not under a sanitizer: the loader runs the
 * clones' resolver before the sanitizer's runtime is set up, and
 * ThreadSanitizer's instrumentation of it crashes the process while
 * libovl is loaded. Used by src/backend/cpu_kernels.c (the cpu backend's
 * kernels) and src/check/ref_matmul.c (the reference's matrix product).
 */
#ifndef OVL_BASE_CLONES_H
#define OVL_BASE_CLONES_H

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define OVL__SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define OVL__SANITIZED 1
#endif
#endif

#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute) && \
    !defined(OVL__SANITIZED)
#if __has_attribute(target_clones)
#define OVL__CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#endif
#endif
#ifndef OVL__CLONES
#define OVL__CLONES(...)
#endif

#endif /* OVL_BASE_CLONES_H */
