/* SPDX-License-Identifier: MIT */
/* tests/test-cuda-alloc.c - the cuda plugin's caching allocator, on the CPU.
 *
 * The allocator (plugins/cuda/cuda-alloc.c, compiled into this program)
 * knows nothing of CUDA: here its raw allocator is posix_memalign with an
 * optional byte limit, which records every segment it hands out, counts
 * synchronisations and checks that each segment comes back whole. The tests
 * pin down PyTorch's caching rules (512-byte rounding, 2 MiB small-pool
 * segments, large segments rounded to 2 MiB, best fit, split and merge,
 * pools kept apart), the statistics, the out-of-memory path (synchronise,
 * release the cache, retry, then an error with the figures), that a steady
 * training-like loop makes no raw allocation after its first iteration,
 * and, over thousands of random requests, that live blocks never overlap
 * and always lie inside a segment. Runs on every machine, GPU or not.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <tandem/types.h>

#include "cuda-alloc.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- the fake raw allocator ---- */

typedef struct {
    size_t limit;         /* most bytes held at once; 0: no limit */
    size_t held;          /* bytes held now */
    GHashTable *segments; /* base -> size */
    int n_raw_calls;      /* raw_alloc calls, failed ones too */
    int n_sync;
    gboolean sync_fails;
} Fake;

static void *fake_raw_alloc(gpointer ctx, size_t nbytes, GError **error)
{
    Fake *f = ctx;
    f->n_raw_calls++;
    if (f->limit != 0 && f->held + nbytes > f->limit) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "fake raw allocator: out of memory (%zu of %zu bytes held)", f->held, f->limit);
        return NULL;
    }
    void *p = NULL;
    g_assert_cmpint(posix_memalign(&p, 512, nbytes), ==, 0);
    g_hash_table_insert(f->segments, p, GSIZE_TO_POINTER(nbytes));
    f->held += nbytes;
    return p;
}

static void fake_raw_free(gpointer ctx, void *ptr, size_t nbytes)
{
    Fake *f = ctx;
    gpointer size;
    /* A segment comes back whole, with the size it was given. */
    g_assert_true(g_hash_table_lookup_extended(f->segments, ptr, NULL, &size));
    g_assert_cmpuint(GPOINTER_TO_SIZE(size), ==, nbytes);
    g_hash_table_remove(f->segments, ptr);
    f->held -= nbytes;
    free(ptr);
}

static gboolean fake_synchronize(gpointer ctx, GError **error)
{
    Fake *f = ctx;
    f->n_sync++;
    if (f->sync_fails) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "fake device: an illegal address");
        return FALSE;
    }
    return TRUE;
}

static CudaAlloc *fake_new(Fake *f, size_t limit)
{
    memset(f, 0, sizeof *f);
    f->limit = limit;
    f->segments = g_hash_table_new(g_direct_hash, g_direct_equal);
    CudaAllocBacking backing = {
        .raw_alloc = fake_raw_alloc,
        .raw_free = fake_raw_free,
        .synchronize = fake_synchronize,
        .ctx = f,
    };
    return cuda_alloc_new(&backing, "cuda:7");
}

/* Destroys the allocator: every segment must have come back. */
static void fake_finish(Fake *f, CudaAlloc *a)
{
    cuda_alloc_destroy(a);
    g_assert_cmpuint(g_hash_table_size(f->segments), ==, 0);
    g_assert_cmpuint(f->held, ==, 0);
    g_hash_table_destroy(f->segments);
}

static CudaAllocStats stats_of(CudaAlloc *a)
{
    CudaAllocStats s;
    cuda_alloc_get_stats(a, &s);
    return s;
}

static void *get_ok(CudaAlloc *a, size_t n)
{
    GError *error = NULL;
    void *p = cuda_alloc_get(a, n, &error);
    g_assert_no_error(error);
    g_assert_nonnull(p);
    return p;
}

/* The segment holding [p, p + n), or NULL. */
static char *segment_of(Fake *f, const void *p, size_t n)
{
    GHashTableIter it;
    gpointer base, size;
    g_hash_table_iter_init(&it, f->segments);
    while (g_hash_table_iter_next(&it, &base, &size)) {
        const char *b = base;
        if ((const char *)p >= b && (const char *)p + n <= b + GPOINTER_TO_SIZE(size)) {
            return base;
        }
    }
    return NULL;
}

/* The reserved figures agree with what the raw allocator holds. */
static void assert_reserved(Fake *f, CudaAlloc *a)
{
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.reserved_bytes, ==, (gint64)f->held);
    g_assert_cmpint(s.n_segments, ==, g_hash_table_size(f->segments));
    g_assert_cmpint(s.n_raw_allocs - s.n_raw_frees, ==, s.n_segments);
}

/* ---- rules ---- */

static void test_rounding(void)
{
    g_assert_cmpuint(cuda_alloc_round_size(0), ==, 512);
    g_assert_cmpuint(cuda_alloc_round_size(1), ==, 512);
    g_assert_cmpuint(cuda_alloc_round_size(512), ==, 512);
    g_assert_cmpuint(cuda_alloc_round_size(513), ==, 1024);
    g_assert_cmpuint(cuda_alloc_round_size(MIB - 1), ==, MIB);
    g_assert_cmpuint(cuda_alloc_round_size(MIB + 1), ==, MIB + 512);
    g_assert_cmpuint(cuda_alloc_segment_size(512), ==, 2 * MIB);
    g_assert_cmpuint(cuda_alloc_segment_size(MIB), ==, 2 * MIB);
    g_assert_cmpuint(cuda_alloc_segment_size(MIB + 512), ==, 2 * MIB);
    g_assert_cmpuint(cuda_alloc_segment_size(2 * MIB), ==, 2 * MIB);
    g_assert_cmpuint(cuda_alloc_segment_size(2 * MIB + 512), ==, 4 * MIB);
    g_assert_cmpuint(cuda_alloc_segment_size(9 * MIB), ==, 10 * MIB);
    g_assert_cmpuint(cuda_alloc_segment_size(64 * MIB), ==, 64 * MIB);

    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    /* Zero bytes still get distinct pointers, 512 bytes each. */
    char *z1 = get_ok(a, 0);
    char *z2 = get_ok(a, 0);
    g_assert_true(z1 != z2);
    char *one = get_ok(a, 1);
    char *big = get_ok(a, 9 * MIB + 1);
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.allocated_bytes, ==, 3 * 512 + 9 * MIB + 512);
    g_assert_cmpint(s.reserved_bytes, ==, 2 * MIB + 10 * MIB);
    g_assert_cmpint(s.n_segments, ==, 2);
    /* 512-byte steps from a 512-aligned base. */
    const char *all[] = {z1, z2, one, big};
    for (guint i = 0; i < G_N_ELEMENTS(all); i++) {
        g_assert_cmpuint((guintptr)all[i] % 512, ==, 0);
    }
    assert_reserved(&f, a);
    cuda_alloc_put(a, z1);
    cuda_alloc_put(a, z2);
    cuda_alloc_put(a, one);
    cuda_alloc_put(a, big);
    cuda_alloc_put(a, NULL);
    g_assert_cmpint(stats_of(a).allocated_bytes, ==, 0);
    fake_finish(&f, a);
}

static void test_small_share(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    size_t sizes[] = {100, 1000, 256 * KIB, 900 * KIB, 1, 4096};
    void *p[G_N_ELEMENTS(sizes)];
    size_t total = 0;
    for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
        p[i] = get_ok(a, sizes[i]);
        total += cuda_alloc_round_size(sizes[i]);
    }
    /* All from one 2 MiB segment, side by side in request order. */
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.n_raw_allocs, ==, 1);
    g_assert_cmpint(s.reserved_bytes, ==, 2 * MIB);
    g_assert_cmpint(s.allocated_bytes, ==, total);
    char *seg = segment_of(&f, p[0], 1);
    g_assert_true(seg == p[0]);
    size_t off = 0;
    for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
        g_assert_true((char *)p[i] == seg + off);
        off += cuda_alloc_round_size(sizes[i]);
    }
    /* What is left of the segment serves a request that fits it... */
    void *rest = get_ok(a, 2 * MIB - total);
    g_assert_true((char *)rest == seg + total);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 1);
    /* ...and the next one needs a second segment. */
    void *more = get_ok(a, 1);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 2);
    g_assert_true(segment_of(&f, more, 1) != seg);
    fake_finish(&f, a); /* with blocks still out: destroy releases them */
}

static void test_best_fit(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    /* Small pool: free holes of 8, 4 and 16 KiB between live separators. */
    char *h8 = get_ok(a, 8 * KIB);
    void *s1 = get_ok(a, 512);
    char *h4 = get_ok(a, 4 * KIB);
    void *s2 = get_ok(a, 512);
    char *h16 = get_ok(a, 16 * KIB);
    void *s3 = get_ok(a, 512);
    cuda_alloc_put(a, h8);
    cuda_alloc_put(a, h16);
    cuda_alloc_put(a, h4);
    g_assert_true(get_ok(a, 3 * KIB) == h4);
    g_assert_true(get_ok(a, 5 * KIB) == h8);
    g_assert_true(get_ok(a, 9 * KIB) == h16);
    /* The first pieces of h4 and h8 left holes of 1 and 3 KiB. */
    g_assert_true(get_ok(a, 1000) == h4 + 3 * KIB);
    g_assert_true(get_ok(a, 2 * KIB) == h8 + 5 * KIB);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 1);
    (void)s1, (void)s2, (void)s3;
    fake_finish(&f, a);

    /* Equal sizes: the lower address wins, whatever the order of puts. */
    a = fake_new(&f, 0);
    char *lo = get_ok(a, 4 * KIB);
    void *sep = get_ok(a, 512);
    char *hi = get_ok(a, 4 * KIB);
    void *sep2 = get_ok(a, 512);
    g_assert_true(lo < hi);
    cuda_alloc_put(a, hi);
    cuda_alloc_put(a, lo);
    g_assert_true(get_ok(a, 4 * KIB) == lo);
    g_assert_true(get_ok(a, 4 * KIB) == hi);
    (void)sep, (void)sep2;
    fake_finish(&f, a);

    /* Large pool: cached segments of 8, 4 and 6 MiB; 3.5 MiB takes the 4. */
    a = fake_new(&f, 0);
    char *l8 = get_ok(a, 8 * MIB);
    char *l4 = get_ok(a, 4 * MIB);
    char *l6 = get_ok(a, 6 * MIB);
    cuda_alloc_put(a, l8);
    cuda_alloc_put(a, l4);
    cuda_alloc_put(a, l6);
    gint64 raw = stats_of(a).n_raw_allocs;
    g_assert_true(get_ok(a, 3 * MIB + MIB / 2) == l4);
    g_assert_true(get_ok(a, 5 * MIB) == l6);
    g_assert_true(get_ok(a, 7 * MIB) == l8);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, raw);
    fake_finish(&f, a);

    /* Large pool, equal sizes: two cached 4 MiB segments, the lower first. */
    a = fake_new(&f, 0);
    char *x = get_ok(a, 4 * MIB);
    char *y = get_ok(a, 4 * MIB);
    char *first = MIN(x, y);
    char *second = MAX(x, y);
    cuda_alloc_put(a, first);
    cuda_alloc_put(a, second);
    g_assert_true(get_ok(a, 3 * MIB) == first);
    g_assert_true(get_ok(a, 3 * MIB) == second);
    fake_finish(&f, a);
}

/* Frees three neighbours in the given order; the segment must end as one
 * free block, which empty_cache releases. */
static void free_three(size_t size, const int order[3])
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    char *p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = get_ok(a, size);
    }
    g_assert_true(p[1] == p[0] + cuda_alloc_round_size(size));
    g_assert_true(p[2] == p[1] + cuda_alloc_round_size(size));
    g_assert_cmpint(stats_of(a).n_segments, ==, 1);
    for (int i = 0; i < 3; i++) {
        cuda_alloc_put(a, p[order[i]]);
        if (i < 2) {
            /* Not yet wholly free: empty_cache keeps it. */
            g_assert_true(cuda_alloc_empty_cache(a, NULL));
            g_assert_cmpint(stats_of(a).n_segments, ==, 1);
        }
    }
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 1);
    int before = f.n_sync;
    GError *error = NULL;
    g_assert_true(cuda_alloc_empty_cache(a, &error));
    g_assert_no_error(error);
    g_assert_cmpint(f.n_sync, ==, before + 1);
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.n_segments, ==, 0);
    g_assert_cmpint(s.reserved_bytes, ==, 0);
    g_assert_cmpint(s.n_raw_frees, ==, 1);
    fake_finish(&f, a);
}

static void test_split_merge(void)
{
    static const int orders[6][3] = {
        {0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0},
    };
    for (int i = 0; i < 6; i++) {
        free_three(100 * KIB, orders[i]); /* small pool: one 2 MiB segment */
    }
    /* Large pool: a cached 12 MiB segment split three ways. */
    for (int i = 0; i < 6; i++) {
        Fake f;
        CudaAlloc *a = fake_new(&f, 0);
        char *seg = get_ok(a, 12 * MIB);
        cuda_alloc_put(a, seg);
        char *p[3] = {get_ok(a, 4 * MIB), get_ok(a, 4 * MIB), get_ok(a, 4 * MIB)};
        g_assert_true(p[0] == seg && p[1] == seg + 4 * MIB && p[2] == seg + 8 * MIB);
        for (int k = 0; k < 3; k++) {
            cuda_alloc_put(a, p[orders[i][k]]);
        }
        g_assert_true(get_ok(a, 12 * MIB) == seg);
        g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 1);
        fake_finish(&f, a);
    }
}

/* The large pool splits only when the rest exceeds 1 MiB. */
static void test_large_split_threshold(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    char *seg = get_ok(a, 10 * MIB);
    cuda_alloc_put(a, seg);
    /* Rest 1 MiB + 512: split, and the rest serves a 1 MiB + 512 request. */
    char *p = get_ok(a, 9 * MIB - 512);
    g_assert_true(p == seg);
    char *q = get_ok(a, MIB + 1);
    g_assert_true(q == seg + 9 * MIB - 512);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 1);
    cuda_alloc_put(a, p);
    cuda_alloc_put(a, q);
    /* Rest exactly 1 MiB: not split (no large request could use it), so a
     * large request needs a second segment, and the statistics count the
     * request, not the 10 MiB block that holds it. */
    p = get_ok(a, 9 * MIB);
    g_assert_true(p == seg);
    char *r = get_ok(a, MIB + 512);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 2);
    g_assert_true(segment_of(&f, r, 1) != seg);
    g_assert_cmpint(stats_of(a).allocated_bytes, ==, 10 * MIB + 512);
    cuda_alloc_put(a, p);
    cuda_alloc_put(a, r);
    g_assert_true(cuda_alloc_empty_cache(a, NULL));
    g_assert_cmpint(stats_of(a).reserved_bytes, ==, 0);
    fake_finish(&f, a);
}

static void test_pools_apart(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    /* A small segment with 2 MiB - 512 free does not serve a large request
     * of 1 MiB + 512... */
    void *small = get_ok(a, 100);
    char *small_seg = segment_of(&f, small, 1);
    void *large = get_ok(a, MIB + 1);
    char *large_seg = segment_of(&f, large, 1);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 2);
    g_assert_true(large_seg != small_seg);
    g_assert_true(large_seg == large);
    /* ...and a cached 2 MiB large segment does not serve small requests:
     * once the small segment is full, the next one gets a new segment. */
    cuda_alloc_put(a, large);
    void *m1 = get_ok(a, MIB);
    g_assert_true(segment_of(&f, m1, 1) == small_seg);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 2);
    void *m2 = get_ok(a, MIB);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 3);
    g_assert_true(segment_of(&f, m2, 1) != small_seg);
    g_assert_true(segment_of(&f, m2, 1) != large_seg);
    /* The large segment is still whole and cached. */
    g_assert_true(get_ok(a, 2 * MIB) == large_seg);
    g_assert_cmpint(stats_of(a).n_raw_allocs, ==, 3);
    fake_finish(&f, a);
}

/* ---- the steady state ---- */

/* A training-like step: activations forward, gradients backward with the
 * activations freed in reverse, a workspace, then the gradients freed. */
static void steady_step(CudaAlloc *a)
{
    static const size_t acts[] = {3 * MIB, 3 * MIB + 100, 800 * KIB, 12 * KIB,
                                  5 * MIB, 100,           MIB + 1,   40 * MIB};
    void *act[G_N_ELEMENTS(acts)];
    void *grad[G_N_ELEMENTS(acts)];
    for (guint i = 0; i < G_N_ELEMENTS(acts); i++) {
        act[i] = get_ok(a, acts[i]);
    }
    for (guint i = G_N_ELEMENTS(acts); i-- > 0;) {
        grad[i] = get_ok(a, acts[i]);
        void *ws = get_ok(a, 7 * MIB + 3 * i);
        cuda_alloc_put(a, ws);
        cuda_alloc_put(a, act[i]);
    }
    for (guint i = 0; i < G_N_ELEMENTS(acts); i++) {
        cuda_alloc_put(a, grad[i]);
    }
}

static void test_steady_state(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    /* Parameters, held across steps. */
    size_t params[] = {4 * KIB, MIB + MIB / 5, 300, 9 * MIB};
    void *param[G_N_ELEMENTS(params)];
    gint64 param_bytes = 0;
    for (guint i = 0; i < G_N_ELEMENTS(params); i++) {
        param[i] = get_ok(a, params[i]);
        param_bytes += cuda_alloc_round_size(params[i]);
    }
    steady_step(a);
    CudaAllocStats first = stats_of(a);
    g_assert_cmpint(first.allocated_bytes, ==, param_bytes);
    for (int step = 1; step < 30; step++) {
        steady_step(a);
        CudaAllocStats s = stats_of(a);
        /* No raw allocation (no cudaMalloc) after the first step. */
        g_assert_cmpint(s.n_raw_allocs, ==, first.n_raw_allocs);
        g_assert_cmpint(s.n_raw_frees, ==, 0);
        g_assert_cmpint(s.reserved_bytes, ==, first.reserved_bytes);
        g_assert_cmpint(s.allocated_bytes, ==, param_bytes);
        g_assert_cmpint(s.peak_bytes, ==, first.peak_bytes);
    }
    g_assert_cmpint(f.n_raw_calls, ==, first.n_raw_allocs);
    for (guint i = 0; i < G_N_ELEMENTS(params); i++) {
        cuda_alloc_put(a, param[i]);
    }
    fake_finish(&f, a);
}

/* ---- statistics ---- */

static void test_peak(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    void *p1 = get_ok(a, MIB);
    void *p3 = get_ok(a, 3 * MIB);
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.allocated_bytes, ==, 4 * MIB);
    g_assert_cmpint(s.peak_bytes, ==, 4 * MIB);
    g_assert_cmpint(s.reserved_bytes, ==, 2 * MIB + 4 * MIB);
    cuda_alloc_put(a, p3);
    s = stats_of(a);
    g_assert_cmpint(s.allocated_bytes, ==, MIB);
    g_assert_cmpint(s.peak_bytes, ==, 4 * MIB);
    g_assert_cmpint(s.reserved_bytes, ==, 6 * MIB); /* cached, not released */
    cuda_alloc_reset_peak(a);
    g_assert_cmpint(stats_of(a).peak_bytes, ==, MIB);
    void *q = get_ok(a, 1);
    g_assert_cmpint(stats_of(a).peak_bytes, ==, MIB + 512);
    cuda_alloc_put(a, q);
    g_assert_cmpint(stats_of(a).peak_bytes, ==, MIB + 512);
    cuda_alloc_put(a, p1);
    s = stats_of(a);
    g_assert_cmpint(s.allocated_bytes, ==, 0);
    g_assert_cmpint(s.n_oom_retries, ==, 0);
    g_assert_cmpint(s.n_raw_frees, ==, 0);
    fake_finish(&f, a);
}

/* ---- out of memory ---- */

static void test_oom_retry(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 6 * MIB);
    /* A cached 4 MiB large segment and a cached small one... */
    void *big = get_ok(a, 3 * MIB);
    void *small = get_ok(a, 100);
    cuda_alloc_put(a, big);
    cuda_alloc_put(a, small);
    g_assert_cmpint(f.n_sync, ==, 0);
    /* ...leave no room for a 6 MiB segment: the allocator synchronises,
     * releases both and the retry succeeds. */
    void *p = get_ok(a, 5 * MIB + 1);
    g_assert_cmpint(f.n_sync, ==, 1);
    g_assert_cmpint(f.n_raw_calls, ==, 4);
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.n_oom_retries, ==, 1);
    g_assert_cmpint(s.n_raw_frees, ==, 2);
    g_assert_cmpint(s.n_segments, ==, 1);
    g_assert_cmpint(s.reserved_bytes, ==, 6 * MIB);
    g_assert_cmpint(s.allocated_bytes, ==, 5 * MIB + 512);
    assert_reserved(&f, a);
    cuda_alloc_put(a, p);
    fake_finish(&f, a);
}

static void test_oom_error(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 6 * MIB);
    void *held = get_ok(a, 3 * MIB);   /* 4 MiB segment, live */
    void *cached = get_ok(a, 5 * KIB); /* 2 MiB small segment, cached */
    cuda_alloc_put(a, cached);
    cuda_alloc_reset_peak(a);
    GError *error = NULL;
    void *p = cuda_alloc_get(a, 3 * MIB, &error);
    g_assert_null(p);
    g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
    /* The small segment was released before the retry, to no avail. */
    g_assert_cmpint(f.n_sync, ==, 1);
    g_assert_cmpint(f.n_raw_calls, ==, 4);
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.n_oom_retries, ==, 1);
    g_assert_cmpint(s.reserved_bytes, ==, 4 * MIB);
    g_assert_cmpint(s.allocated_bytes, ==, 3 * MIB);
    /* The allocator's name, the request in bytes and MiB, the segment, the
     * three figures, then the raw allocator's own message. */
    const char *m = error->message;
    g_test_message("%s", m);
    g_assert_true(g_str_has_prefix(m, "cuda:7: cannot allocate"));
    g_assert_nonnull(strstr(m, "3145728 bytes (3.00 MiB"));
    g_assert_nonnull(strstr(m, "a new 4.00 MiB segment"));
    g_assert_nonnull(strstr(m, "3145728 bytes (3.00 MiB) allocated"));
    g_assert_nonnull(strstr(m, "4194304 bytes (4.00 MiB) reserved"));
    g_assert_nonnull(strstr(m, "3145728 bytes (3.00 MiB) peak"));
    g_assert_true(g_str_has_suffix(m, "fake raw allocator: out of memory (4194304 of 6291456 "
                                      "bytes held)"));
    g_clear_error(&error);

    /* The allocator still works after the failure. */
    void *q = get_ok(a, 1);
    cuda_alloc_put(a, q);

    /* A failed synchronisation is reported with its own message. */
    f.sync_fails = TRUE;
    g_assert_null(cuda_alloc_get(a, 5 * MIB, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
    g_assert_nonnull(strstr(error->message, "5242880 bytes (5.00 MiB"));
    g_assert_true(g_str_has_suffix(error->message, "fake device: an illegal address"));
    g_clear_error(&error);
    g_assert_false(cuda_alloc_empty_cache(a, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
    g_assert_true(g_str_has_prefix(error->message, "cuda:7: "));
    g_assert_nonnull(strstr(error->message, "fake device: an illegal address"));
    g_clear_error(&error);
    g_assert_cmpint(stats_of(a).n_segments, ==, 2); /* nothing released */
    f.sync_fails = FALSE;

    /* A request no device could hold is refused before any raw call. */
    int calls = f.n_raw_calls;
    g_assert_null(cuda_alloc_get(a, G_MAXSIZE, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
    g_assert_true(g_str_has_prefix(error->message, "cuda:7: cannot allocate"));
    g_clear_error(&error);
    g_assert_cmpint(f.n_raw_calls, ==, calls);
    cuda_alloc_put(a, held);
    fake_finish(&f, a);
}

static void test_put_unknown(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    char *p = get_ok(a, 4 * KIB);
    int local;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_CRITICAL, "*cuda:7*not a block*");
    cuda_alloc_put(a, &local);
    g_test_assert_expected_messages();
    /* Inside a live block is not a block either. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_CRITICAL, "*not a block*");
    cuda_alloc_put(a, p + 512);
    g_test_assert_expected_messages();
    g_assert_cmpint(stats_of(a).allocated_bytes, ==, 4 * KIB);
    cuda_alloc_put(a, p);
    /* Twice. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_CRITICAL, "*not a block*");
    cuda_alloc_put(a, p);
    g_test_assert_expected_messages();
    g_assert_cmpint(stats_of(a).allocated_bytes, ==, 0);
    fake_finish(&f, a);
}

/* ---- random requests ---- */

typedef struct {
    char *ptr;
    size_t rounded;
    guint32 stamp;
} Live;

static gint live_cmp(gconstpointer pa, gconstpointer pb)
{
    const Live *a = pa;
    const Live *b = pb;
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr ? 1 : 0;
}

/* Sizes from 1 B to 8 MiB, spread evenly over the powers of two. */
static size_t random_size(void)
{
    int e = g_test_rand_int_range(0, 24);
    return (size_t)g_test_rand_int_range(1, (1 << e) + 1);
}

static void stamp_block(Live *l)
{
    memcpy(l->ptr, &l->stamp, sizeof l->stamp);
    memcpy(l->ptr + l->rounded - sizeof l->stamp, &l->stamp, sizeof l->stamp);
}

static void check_stamp(const Live *l)
{
    guint32 head, tail;
    memcpy(&head, l->ptr, sizeof head);
    memcpy(&tail, l->ptr + l->rounded - sizeof tail, sizeof tail);
    g_assert_cmpuint(head, ==, l->stamp);
    g_assert_cmpuint(tail, ==, l->stamp);
}

/* No two live blocks overlap, each lies in one raw segment, and the
 * statistics add up. */
static void check_live(Fake *f, CudaAlloc *a, GArray *live)
{
    GArray *sorted = g_array_copy(live);
    g_array_sort(sorted, live_cmp);
    gint64 sum = 0;
    for (guint i = 0; i < sorted->len; i++) {
        const Live *l = &g_array_index(sorted, Live, i);
        g_assert_nonnull(segment_of(f, l->ptr, l->rounded));
        if (i + 1 < sorted->len) {
            g_assert_true(l->ptr + l->rounded <= g_array_index(sorted, Live, i + 1).ptr);
        }
        sum += (gint64)l->rounded;
    }
    g_array_unref(sorted);
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.allocated_bytes, ==, sum);
    g_assert_cmpint(s.peak_bytes, >=, sum);
    g_assert_cmpint(s.reserved_bytes, >=, sum);
    assert_reserved(f, a);
}

static void random_run(size_t limit, int n_ops, guint max_live)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, limit);
    GArray *live = g_array_new(FALSE, FALSE, sizeof(Live));
    int n_failed = 0;
    for (int op = 0; op < n_ops; op++) {
        double r = g_test_rand_double();
        if (r < 0.01) {
            g_assert_true(cuda_alloc_empty_cache(a, NULL));
        } else if (live->len > 0 && (live->len >= max_live || r < 0.45)) {
            guint i = (guint)g_test_rand_int_range(0, (gint32)live->len);
            Live l = g_array_index(live, Live, i);
            check_stamp(&l);
            cuda_alloc_put(a, l.ptr);
            g_array_remove_index_fast(live, i);
        } else {
            size_t n = random_size();
            GError *error = NULL;
            Live l = {.ptr = cuda_alloc_get(a, n, &error), .rounded = cuda_alloc_round_size(n)};
            if (l.ptr == NULL) {
                /* Only when the limit truly leaves no room for the segment
                 * once every free segment is gone. */
                g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
                g_assert_cmpuint(limit, >, 0);
                g_assert_cmpuint(f.held + cuda_alloc_segment_size(l.rounded), >, limit);
                g_clear_error(&error);
                n_failed++;
            } else {
                g_assert_no_error(error);
                l.stamp = (guint32)op;
                stamp_block(&l);
                g_array_append_val(live, l);
            }
        }
        check_live(&f, a, live);
    }
    if (limit != 0) {
        CudaAllocStats s = stats_of(a);
        g_test_message("%d requests failed, %" G_GINT64_FORMAT " cache releases", n_failed,
                       s.n_oom_retries);
        g_assert_cmpint(s.n_oom_retries, >, 0);
    }
    for (guint i = 0; i < live->len; i++) {
        Live *l = &g_array_index(live, Live, i);
        check_stamp(l);
        cuda_alloc_put(a, l->ptr);
    }
    g_array_unref(live);
    g_assert_cmpint(stats_of(a).allocated_bytes, ==, 0);
    g_assert_true(cuda_alloc_empty_cache(a, NULL));
    g_assert_cmpint(stats_of(a).reserved_bytes, ==, 0);
    g_assert_cmpint(stats_of(a).n_segments, ==, 0);
    fake_finish(&f, a);
}

static void test_random(void)
{
    random_run(0, 5000, 48);
}

static void test_random_limited(void)
{
    random_run(24 * MIB, 5000, 48);
}

/* ---- threads ---- */

typedef struct {
    CudaAlloc *a;
    guint32 seed;
    gint *waiting; /* threads not yet started: all start together */
} ThreadArg;

static gpointer thread_main(gpointer data)
{
    ThreadArg *t = data;
    GRand *rand = g_rand_new_with_seed(t->seed);
    g_atomic_int_dec_and_test(t->waiting);
    while (g_atomic_int_get(t->waiting) > 0) {
        g_thread_yield();
    }
    Live live[32];
    int n_live = 0;
    for (int op = 0; op < 20000; op++) {
        if (n_live > 0 && (n_live == 32 || g_rand_boolean(rand))) {
            int i = g_rand_int_range(rand, 0, n_live);
            /* A block another thread was also given has lost its stamp. */
            check_stamp(&live[i]);
            cuda_alloc_put(t->a, live[i].ptr);
            live[i] = live[--n_live];
        } else {
            int e = g_rand_int_range(rand, 0, 23);
            size_t n = (size_t)g_rand_int_range(rand, 1, (1 << e) + 1);
            GError *error = NULL;
            Live *l = &live[n_live++];
            l->ptr = cuda_alloc_get(t->a, n, &error);
            g_assert_no_error(error);
            l->rounded = cuda_alloc_round_size(n);
            l->stamp = t->seed ^ (guint32)op;
            stamp_block(l);
        }
    }
    while (n_live > 0) {
        check_stamp(&live[--n_live]);
        cuda_alloc_put(t->a, live[n_live].ptr);
    }
    g_rand_free(rand);
    return NULL;
}

static void test_threads(void)
{
    Fake f;
    CudaAlloc *a = fake_new(&f, 0);
    GThread *threads[4];
    ThreadArg args[4];
    gint waiting = 4;
    for (int i = 0; i < 4; i++) {
        args[i] = (ThreadArg){.a = a, .seed = g_test_rand_int(), .waiting = &waiting};
        threads[i] = g_thread_new("alloc", thread_main, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        g_thread_join(threads[i]);
    }
    CudaAllocStats s = stats_of(a);
    g_assert_cmpint(s.allocated_bytes, ==, 0);
    g_assert_cmpint(s.peak_bytes, >, 0);
    assert_reserved(&f, a);
    g_assert_true(cuda_alloc_empty_cache(a, NULL));
    g_assert_cmpint(stats_of(a).reserved_bytes, ==, 0);
    fake_finish(&f, a);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cuda-alloc/rounding", test_rounding);
    g_test_add_func("/cuda-alloc/small-share", test_small_share);
    g_test_add_func("/cuda-alloc/best-fit", test_best_fit);
    g_test_add_func("/cuda-alloc/split-merge", test_split_merge);
    g_test_add_func("/cuda-alloc/large-split-threshold", test_large_split_threshold);
    g_test_add_func("/cuda-alloc/pools-apart", test_pools_apart);
    g_test_add_func("/cuda-alloc/steady-state", test_steady_state);
    g_test_add_func("/cuda-alloc/peak", test_peak);
    g_test_add_func("/cuda-alloc/oom-retry", test_oom_retry);
    g_test_add_func("/cuda-alloc/oom-error", test_oom_error);
    g_test_add_func("/cuda-alloc/put-unknown", test_put_unknown);
    g_test_add_func("/cuda-alloc/random", test_random);
    g_test_add_func("/cuda-alloc/random-limited", test_random_limited);
    g_test_add_func("/cuda-alloc/threads", test_threads);
    return g_test_run();
}
