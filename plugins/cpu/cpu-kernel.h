/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-kernel.h - what the backend's flat loops share: the
 * vector ops (cpu-vector.c), the elementwise ops (cpu-eltwise.c), casts
 * (cpu-cast.c) and the optimizer updates (cpu-optim.c).
 *
 * These are memory-bound passes over contiguous data. Each hot loop is a
 * leaf "kernel" over a range, marked `omp simd` so that it is vectorised
 * whatever -O level the build uses, and compiled as GCC target clones
 * (CPU_KERNEL: AVX-512, AVX2, baseline) picked at load time, so the plugin
 * runs on any x86-64 and still uses wide vectors where they exist.
 * cpu_par_range splits a range over the OpenMP pool oneDNN uses (never a
 * second pool) in contiguous, cache-line aligned chunks; small ranges stay
 * on the calling thread, where waking the pool would cost more than the
 * work.
 */
#ifndef TDM_CPU_KERNEL_H
#define TDM_CPU_KERNEL_H

#include <omp.h>

#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_KERNEL __attribute__((target_clones("avx512f", "avx2", "default"), noinline))
#else
#define CPU_KERNEL __attribute__((noinline))
#endif

/* Runs fn over [i0, i1) pieces of [0, n) with its context. */
typedef void (*CpuRangeFn)(int64_t i0, int64_t i1, void *ctx);

static inline void cpu_par_range(int64_t n, CpuRangeFn fn, void *ctx)
{
    if (n <= CPU_PAR_MIN) {
        fn(0, n, ctx);
        return;
    }
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t chunk = ((n + nt - 1) / nt + 15) / 16 * 16;
        int64_t i0 = MIN(n, chunk * t), i1 = MIN(n, i0 + chunk);
        if (i1 > i0) {
            fn(i0, i1, ctx);
        }
    }
}

#endif /* TDM_CPU_KERNEL_H */
