/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-simd.h - what the backend's own convolution loops share:
 * vectors of 8 floats (GCC's vector extension: one pixel's 8 channels of
 * the nChw8c layout), unaligned loads and stores, and the two compilations
 * of each kernel: for AVX2 with FMA (CPU_FMA_CLONE, picked at run time when
 * cpu_have_avx2_fma() says so; GCC's "avx2" target alone would not fuse the
 * multiply and add) and for the baseline x86-64 the plugin is built for
 * (CPU_BASE_CLONE). The helpers are always inlined into the clones, so they
 * are compiled for each clone's instruction set. */
#ifndef TDM_CPU_SIMD_H
#define TDM_CPU_SIMD_H

#include <string.h>

#include <glib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_HAVE_FMA_CLONE 1
#define CPU_FMA_CLONE __attribute__((target("avx2,fma"), noinline))
#endif
#define CPU_BASE_CLONE __attribute__((noinline))
#define CPU_INLINE static inline __attribute__((always_inline))

/* The helpers pass 32-byte vectors by value; always inlined, so no call
 * ever uses the vector ABI. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v8 __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

CPU_INLINE v8 ld8(const float *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

CPU_INLINE void st8(float *p, v8 v)
{
    memcpy(p, &v, sizeof v);
}

/* Whether this CPU runs the CPU_FMA_CLONE kernels. */
static inline gboolean cpu_have_avx2_fma(void)
{
#ifdef CPU_HAVE_FMA_CLONE
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return have;
#else
    return FALSE;
#endif
}

#endif /* TDM_CPU_SIMD_H */
