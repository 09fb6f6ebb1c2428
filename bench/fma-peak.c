/* SPDX-License-Identifier: MIT */
/* bench/fma-peak.c - the single-precision FMA peak of this machine, measured.
 *
 * Usage: fma-peak [--threads N] [--seconds S] [--isa auto|avx512|avx2]
 * Each of N threads (default: every core) runs independent chains of fused
 * multiply-adds on the widest vector instruction set the CPU has (AVX-512
 * if __builtin_cpu_supports says so, else AVX2 with FMA), chosen at run
 * time so that one binary built without -march flags serves any x86-64
 * machine; the kernels are compiled for their ISA through target
 * attributes. One FMA of one lane counts as 2 flops. Three rounds of S
 * seconds (default 1) run and the best one counts, as a peak should: a
 * round that shares its cores with another process only loses. Prints one
 * JSON object: isa, threads, gflops (by wall time), the per-thread figure,
 * and gflops_by_cpu_time (each thread's rate by its own cpu time, added
 * up), which tells on a busy machine how far the wall-time figure fell.
 * bench/train-folder divides a training run's GFLOP/s by this figure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FMA_PEAK_X86 1
#endif

/* Independent accumulators per thread. An FMA's latency is 4 cycles on
 * recent cores and two can issue per cycle, so at least 8 chains must be
 * in flight; 12 leaves room for a 6-cycle latency, and fits the 16
 * architectural registers of AVX2. */
#define CHAINS 12
/* FMAs per chain between two looks at the clock. */
#define BLOCK 1000000

typedef struct {
    const char *isa;
    double seconds;
    GMutex *lock;
    GCond *cond;
    int *waiting;    /* threads not yet at the start line */
    double *started; /* the common start time, once set */
    uint64_t fmas;   /* vector FMAs this thread ran */
    double elapsed;  /* its wall time */
    double cpu;      /* its cpu time (stops while it is preempted) */
    float sink;      /* the result, so the work cannot be dropped */
} Worker;

#ifdef FMA_PEAK_X86
/* The chains converge (m < 1), so no value overflows or turns denormal,
 * whose slow paths would spoil the figure. */
__attribute__((target("avx512f"))) static float block_avx512(uint64_t n)
{
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-6f);
    __m512 c[CHAINS];
    for (int k = 0; k < CHAINS; k++) {
        c[k] = _mm512_set1_ps((float)k);
    }
    for (uint64_t i = 0; i < n; i++) {
        /* Unrolled, so that the chains live in registers. */
#pragma GCC unroll 16
        for (int k = 0; k < CHAINS; k++) {
            c[k] = _mm512_fmadd_ps(c[k], m, a);
        }
    }
    __m512 s = c[0];
    for (int k = 1; k < CHAINS; k++) {
        s = _mm512_add_ps(s, c[k]);
    }
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float block_avx2(uint64_t n)
{
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
    __m256 c[CHAINS];
    for (int k = 0; k < CHAINS; k++) {
        c[k] = _mm256_set1_ps((float)k);
    }
    for (uint64_t i = 0; i < n; i++) {
        /* Unrolled, so that the chains live in registers. */
#pragma GCC unroll 16
        for (int k = 0; k < CHAINS; k++) {
            c[k] = _mm256_fmadd_ps(c[k], m, a);
        }
    }
    __m256 s = c[0];
    for (int k = 1; k < CHAINS; k++) {
        s = _mm256_add_ps(s, c[k]);
    }
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif

static int lanes_of(const char *isa)
{
    return strcmp(isa, "avx512") == 0 ? 16 : 8;
}

static float run_block(const char *isa)
{
#ifdef FMA_PEAK_X86
    return strcmp(isa, "avx512") == 0 ? block_avx512(BLOCK) : block_avx2(BLOCK);
#else
    (void)isa;
    return 0.0f;
#endif
}

static gpointer worker_main(gpointer data)
{
    Worker *w = data;
    /* Every thread starts together, so that each round measures N busy
     * cores and not a staggered mix. */
    g_mutex_lock(w->lock);
    if (--*w->waiting == 0) {
        *w->started = (double)g_get_monotonic_time() / 1e6;
        g_cond_broadcast(w->cond);
    }
    while (*w->waiting > 0) {
        g_cond_wait(w->cond, w->lock);
    }
    const double t0 = *w->started;
    g_mutex_unlock(w->lock);
    double now = t0;
    do {
        w->sink += run_block(w->isa);
        w->fmas += (uint64_t)BLOCK * CHAINS;
        now = (double)g_get_monotonic_time() / 1e6;
    } while (now - t0 < w->seconds);
    w->elapsed = now - t0;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    w->cpu = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    return NULL;
}

/* GFLOP/s of one round on `threads` threads, by wall time; `by_cpu` gets
 * the sum over the threads of their rates by their own cpu time, which a
 * busy machine does not lower (a preempted thread's cpu clock stops). */
static double round_gflops(const char *isa, int threads, double seconds, float *sink,
                           double *by_cpu)
{
    GMutex lock;
    GCond cond;
    g_mutex_init(&lock);
    g_cond_init(&cond);
    int waiting = threads;
    double started = 0.0;
    Worker *w = g_new0(Worker, threads);
    GThread **th = g_new0(GThread *, threads);
    for (int i = 0; i < threads; i++) {
        w[i] = (Worker){.isa = isa, .seconds = seconds, .lock = &lock, .cond = &cond,
                        .waiting = &waiting, .started = &started};
        th[i] = g_thread_new("fma-peak", worker_main, &w[i]);
    }
    double flops = 0.0, longest = 0.0;
    *by_cpu = 0.0;
    for (int i = 0; i < threads; i++) {
        g_thread_join(th[i]);
        const double f = 2.0 * (double)lanes_of(isa) * (double)w[i].fmas;
        flops += f;
        *by_cpu += w[i].cpu > 0 ? f / w[i].cpu / 1e9 : 0.0;
        longest = MAX(longest, w[i].elapsed);
        *sink += w[i].sink;
    }
    g_free(th);
    g_free(w);
    g_cond_clear(&cond);
    g_mutex_clear(&lock);
    return longest > 0 ? flops / longest / 1e9 : 0.0;
}

static const char *best_isa(void)
{
#ifdef FMA_PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        return "avx512";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return "avx2";
    }
#endif
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = (int)g_get_num_processors();
    double seconds = 1.0;
    const char *want = "auto";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = g_ascii_strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            want = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: fma-peak [--threads N] [--seconds S] [--isa auto|avx512|avx2]\n");
            return 2;
        }
    }
    if (threads < 1 || !(seconds > 0.0)) {
        fprintf(stderr, "fma-peak: --threads must be >= 1 and --seconds > 0\n");
        return 2;
    }
    const char *isa = best_isa();
    if (isa == NULL) {
        fprintf(stderr, "fma-peak: this CPU has neither AVX-512 nor AVX2 with FMA\n");
        return 1;
    }
    if (strcmp(want, "auto") != 0) {
        if (strcmp(want, "avx2") != 0 && strcmp(want, "avx512") != 0) {
            fprintf(stderr, "fma-peak: --isa '%s' is not auto, avx512 or avx2\n", want);
            return 2;
        }
        if (strcmp(want, "avx512") == 0 && strcmp(isa, "avx512") != 0) {
            fprintf(stderr, "fma-peak: this CPU has no AVX-512\n");
            return 1;
        }
        isa = want;
    }
    double best = 0.0, best_cpu = 0.0;
    float sink = 0.0f;
    for (int r = 0; r < 3; r++) {
        double by_cpu;
        best = MAX(best, round_gflops(isa, threads, seconds, &sink, &by_cpu));
        best_cpu = MAX(best_cpu, by_cpu);
    }
    /* "check" prints the chains' result, so that no compiler drops them. */
    printf("{\"isa\": \"%s\", \"threads\": %d, \"gflops\": %.1f, \"gflops_per_thread\": %.1f, "
           "\"gflops_by_cpu_time\": %.1f, \"check\": %g}\n",
           isa, threads, best, best / threads, best_cpu, (double)sink);
    return 0;
}
