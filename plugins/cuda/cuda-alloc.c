/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-alloc.c - the caching allocator behind cuda-alloc.h.
 *
 * cudaMalloc and cudaFree cost tens of microseconds and synchronise the
 * device, so a training step must not call them once its shapes are
 * stable. This allocator keeps every segment it ever got from the raw
 * allocator and hands its pieces (blocks) out again, with the rules of
 * PyTorch's CUDACachingAllocator, for the same reasons:
 *
 * - Sizes are rounded up to 512 bytes, so every block starts 512 bytes
 *   apart from its neighbours and no leftover is too small to reuse.
 * - Two pools that never lend to each other. Requests of at most 1 MiB
 *   (biases, BN statistics, small activations) share 2 MiB segments: the
 *   small pool. Larger requests get segments of their own, rounded up to
 *   2 MiB: the large pool. Keeping them apart stops a stream of small
 *   blocks from pinning the middle of a large segment, which would keep a
 *   big tensor from ever fitting there again. (PyTorch also gives 1-10 MiB
 *   requests shared 20 MiB segments to save cudaMalloc calls; here a shape
 *   is raw-allocated only in the first step, so that saving is small, and
 *   segments of their own keep reserved memory close to allocated.)
 * - Best fit: a request takes the smallest cached block of its pool that
 *   fits (ties go to the lower address, so the choice is reproducible),
 *   and splits off the rest when the rest is worth keeping: any remainder
 *   (>= 512 B) in the small pool, more than 1 MiB in the large pool (a
 *   smaller tail could never serve a large request, so it stays in the
 *   block rather than fragment the segment).
 * - A freed block merges with its free neighbours in the same segment, so
 *   the pieces of a segment become one block again when all are freed.
 *   Blocks never cross segments: each segment is one raw allocation and is
 *   given back whole.
 * - Segments go back to the raw allocator only in cuda_alloc_empty_cache,
 *   in cuda_alloc_destroy, and when the raw allocator fails: then the
 *   allocator synchronises, releases every wholly free segment of both
 *   pools and tries once more, and if that fails too the error names the
 *   request and the allocated, reserved and peak bytes (the figures a user
 *   needs to tell fragmentation from a model that is simply too big), then
 *   the raw allocator's own reason ("out of memory", or a sticky device
 *   error, which is why the message does not claim "out of memory" itself).
 *
 * Free blocks sit in one GSequence per pool, sorted by (size, address): a
 * best-fit search is one O(log n) lookup. Handed-out blocks sit in a hash
 * table from pointer to block, for put. Each block knows its address
 * neighbours in its segment, which makes the merge O(1). The statistics
 * count rounded request sizes (a block's unsplit tail in the large pool is
 * cached, not allocated). One GMutex guards everything; the raw allocator
 * and synchronize are called with it held, so they must not call back
 * into this allocator.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <tandem/types.h>

#include "cuda-alloc.h"

#define ROUND_BYTES ((size_t)512)
#define SMALL_MAX ((size_t)1 << 20)           /* largest request of the small pool */
#define SMALL_SEGMENT ((size_t)2 << 20)       /* segment size of the small pool */
#define LARGE_ROUND ((size_t)2 << 20)         /* large segments are multiples of this */
#define LARGE_MIN_REMAINDER ((size_t)1 << 20) /* large blocks split when the rest exceeds this */
/* Larger requests are refused before rounding could overflow: no device
 * has half the address space. */
#define MAX_REQUEST (SIZE_MAX / 2)
#define MIB(n) ((double)(n) / (1024.0 * 1024.0))

typedef enum { POOL_SMALL, POOL_LARGE, N_POOLS } Pool;

typedef struct {
    char *base; /* what raw_alloc returned */
    size_t size;
    Pool pool;
} Segment;

typedef struct _Block Block;
struct _Block {
    char *ptr;
    size_t size;      /* bytes of the segment this block covers */
    size_t requested; /* the rounded request while handed out, else 0 */
    gboolean in_use;
    Segment *seg;
    Block *prev, *next;       /* address neighbours in the same segment */
    GSequenceIter *free_iter; /* the block's place in its pool while free */
};

struct _CudaAlloc {
    CudaAllocBacking backing;
    char *name;
    GMutex lock;
    GSequence *free_blocks[N_POOLS]; /* Block *, sorted by (size, address) */
    GHashTable *in_use;              /* ptr -> Block * handed out */
    CudaAllocStats stats;
};

size_t cuda_alloc_round_size(size_t nbytes)
{
    if (nbytes == 0) {
        return ROUND_BYTES; /* every request gets a pointer of its own */
    }
    return (nbytes + ROUND_BYTES - 1) / ROUND_BYTES * ROUND_BYTES;
}

size_t cuda_alloc_segment_size(size_t rounded)
{
    if (rounded <= SMALL_MAX) {
        return SMALL_SEGMENT;
    }
    return (rounded + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static Pool pool_for(size_t rounded)
{
    return rounded <= SMALL_MAX ? POOL_SMALL : POOL_LARGE;
}

/* Order of the free sequences: size, then address. */
static gint block_cmp(gconstpointer pa, gconstpointer pb, gpointer unused)
{
    const Block *a = pa;
    const Block *b = pb;
    (void)unused;
    if (a->size != b->size) {
        return a->size < b->size ? -1 : 1;
    }
    if (a->ptr != b->ptr) {
        return (uintptr_t)a->ptr < (uintptr_t)b->ptr ? -1 : 1;
    }
    return 0;
}

static void cache_block(CudaAlloc *a, Block *b)
{
    b->in_use = FALSE;
    b->requested = 0;
    b->free_iter = g_sequence_insert_sorted(a->free_blocks[b->seg->pool], b, block_cmp, NULL);
}

static void uncache_block(Block *b)
{
    g_sequence_remove(b->free_iter);
    b->free_iter = NULL;
}

CudaAlloc *cuda_alloc_new(const CudaAllocBacking *backing, const char *name)
{
    g_return_val_if_fail(backing != NULL && backing->raw_alloc != NULL, NULL);
    g_return_val_if_fail(backing->raw_free != NULL, NULL);
    CudaAlloc *a = g_new0(CudaAlloc, 1);
    a->backing = *backing;
    a->name = g_strdup(name != NULL ? name : "allocator");
    g_mutex_init(&a->lock);
    for (int p = 0; p < N_POOLS; p++) {
        a->free_blocks[p] = g_sequence_new(NULL);
    }
    a->in_use = g_hash_table_new(g_direct_hash, g_direct_equal);
    return a;
}

/* Gives a segment back to the raw allocator; `first` is its first block. */
static void release_segment(CudaAlloc *a, Block *first)
{
    Segment *seg = first->seg;
    a->backing.raw_free(a->backing.ctx, seg->base, seg->size);
    a->stats.n_raw_frees++;
    a->stats.n_segments--;
    a->stats.reserved_bytes -= (gint64)seg->size;
    g_free(seg);
}

void cuda_alloc_destroy(CudaAlloc *a)
{
    if (a == NULL) {
        return;
    }
    /* Every block, cached or handed out; segments are released through
     * their first block, then the blocks are freed. */
    GPtrArray *blocks = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, a->in_use);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        g_ptr_array_add(blocks, value);
    }
    for (int p = 0; p < N_POOLS; p++) {
        GSequenceIter *s = g_sequence_get_begin_iter(a->free_blocks[p]);
        for (; !g_sequence_iter_is_end(s); s = g_sequence_iter_next(s)) {
            g_ptr_array_add(blocks, g_sequence_get(s));
        }
    }
    for (guint i = 0; i < blocks->len; i++) {
        Block *b = g_ptr_array_index(blocks, i);
        if (b->prev == NULL) {
            release_segment(a, b);
        }
    }
    g_ptr_array_free(blocks, TRUE);
    for (int p = 0; p < N_POOLS; p++) {
        g_sequence_free(a->free_blocks[p]);
    }
    g_hash_table_destroy(a->in_use);
    g_mutex_clear(&a->lock);
    g_free(a->name);
    g_free(a);
}

/* Waits for the device, then releases every segment that is one free
 * block. Called with the lock held. */
static gboolean release_free_segments(CudaAlloc *a, GError **error)
{
    if (a->backing.synchronize != NULL && !a->backing.synchronize(a->backing.ctx, error)) {
        return FALSE;
    }
    for (int p = 0; p < N_POOLS; p++) {
        GSequenceIter *s = g_sequence_get_begin_iter(a->free_blocks[p]);
        while (!g_sequence_iter_is_end(s)) {
            Block *b = g_sequence_get(s);
            s = g_sequence_iter_next(s);
            if (b->prev == NULL && b->next == NULL) {
                uncache_block(b);
                release_segment(a, b);
                g_free(b);
            }
        }
    }
    return TRUE;
}

gboolean cuda_alloc_empty_cache(CudaAlloc *a, GError **error)
{
    g_return_val_if_fail(a != NULL, FALSE);
    g_mutex_lock(&a->lock);
    GError *local = NULL;
    gboolean ok = release_free_segments(a, &local);
    g_mutex_unlock(&a->lock);
    if (!ok) {
        g_propagate_prefixed_error(error, local, "%s: releasing the cached segments: ", a->name);
    }
    return ok;
}

/* The smallest free block of `pool` holding `rounded` bytes (the lowest
 * address among equals), taken out of the pool; NULL if none fits. */
static Block *take_best_fit(CudaAlloc *a, Pool pool, size_t rounded)
{
    /* A key of this size at address NULL sorts before every real block of
     * the same size: the search lands on the first block >= the request. */
    Block key = {.ptr = NULL, .size = rounded};
    GSequenceIter *s = g_sequence_search(a->free_blocks[pool], &key, block_cmp, NULL);
    if (g_sequence_iter_is_end(s)) {
        return NULL;
    }
    Block *b = g_sequence_get(s);
    uncache_block(b);
    return b;
}

/* Splits `b` (taken out of its pool) after `rounded` bytes when the rest is
 * worth caching on its own; the rest goes back to the pool. */
static void split_block(CudaAlloc *a, Block *b, size_t rounded)
{
    size_t rest = b->size - rounded;
    gboolean worth = b->seg->pool == POOL_SMALL ? rest >= ROUND_BYTES : rest > LARGE_MIN_REMAINDER;
    if (!worth) {
        return;
    }
    Block *r = g_new0(Block, 1);
    r->ptr = b->ptr + rounded;
    r->size = rest;
    r->seg = b->seg;
    r->prev = b;
    r->next = b->next;
    if (b->next != NULL) {
        b->next->prev = r;
    }
    b->next = r;
    b->size = rounded;
    /* b was free, so its neighbours were not: r has no free neighbour to
     * merge with. */
    cache_block(a, r);
}

/* The OOM error: the request, the figures, then why the raw allocator (or
 * the synchronisation before the retry) failed. Takes `cause`. */
static void set_oom_error(CudaAlloc *a, GError **error, size_t nbytes, size_t seg_size,
                          const char *stage, GError *cause)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                "%s: cannot allocate %zu bytes (%.2f MiB; a new %.2f MiB "
                "segment) with %" G_GINT64_FORMAT " bytes (%.2f MiB) allocated, %" G_GINT64_FORMAT
                " bytes (%.2f MiB) reserved, %" G_GINT64_FORMAT " bytes (%.2f MiB) peak; "
                "%s: %s",
                a->name, nbytes, MIB(nbytes), MIB(seg_size), a->stats.allocated_bytes,
                MIB(a->stats.allocated_bytes), a->stats.reserved_bytes,
                MIB(a->stats.reserved_bytes), a->stats.peak_bytes, MIB(a->stats.peak_bytes), stage,
                cause != NULL ? cause->message : "no reason given");
    g_clear_error(&cause);
}

/* A new segment for a request of `rounded` bytes, as one block taken out of
 * its pool; on a raw failure, releases the cache and retries once. Called
 * with the lock held. */
static Block *new_segment(CudaAlloc *a, Pool pool, size_t rounded, size_t nbytes, GError **error)
{
    size_t seg_size = cuda_alloc_segment_size(rounded);
    GError *raw_error = NULL;
    char *base = a->backing.raw_alloc(a->backing.ctx, seg_size, &raw_error);
    if (base == NULL) {
        /* The first failure's reason is dropped: the retry's is the one
         * that stands. */
        g_clear_error(&raw_error);
        a->stats.n_oom_retries++;
        GError *sync_error = NULL;
        if (!release_free_segments(a, &sync_error)) {
            set_oom_error(a, error, nbytes, seg_size,
                          "synchronizing to release the cached segments failed", sync_error);
            return NULL;
        }
        base = a->backing.raw_alloc(a->backing.ctx, seg_size, &raw_error);
        if (base == NULL) {
            set_oom_error(a, error, nbytes, seg_size,
                          "the raw allocator failed after the cache was released", raw_error);
            return NULL;
        }
    }
    Segment *seg = g_new0(Segment, 1);
    seg->base = base;
    seg->size = seg_size;
    seg->pool = pool;
    a->stats.n_segments++;
    a->stats.n_raw_allocs++;
    a->stats.reserved_bytes += (gint64)seg_size;
    Block *b = g_new0(Block, 1);
    b->ptr = base;
    b->size = seg_size;
    b->seg = seg;
    return b;
}

void *cuda_alloc_get(CudaAlloc *a, size_t nbytes, GError **error)
{
    g_return_val_if_fail(a != NULL, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    if (nbytes > MAX_REQUEST) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "%s: cannot allocate %zu bytes (%.2f MiB): larger than any device", a->name,
                    nbytes, MIB(nbytes));
        return NULL;
    }
    size_t rounded = cuda_alloc_round_size(nbytes);
    Pool pool = pool_for(rounded);
    g_mutex_lock(&a->lock);
    Block *b = take_best_fit(a, pool, rounded);
    if (b == NULL) {
        b = new_segment(a, pool, rounded, nbytes, error);
    }
    if (b != NULL) {
        split_block(a, b, rounded);
        b->in_use = TRUE;
        b->requested = rounded;
        g_hash_table_insert(a->in_use, b->ptr, b);
        a->stats.allocated_bytes += (gint64)rounded;
        a->stats.peak_bytes = MAX(a->stats.peak_bytes, a->stats.allocated_bytes);
    }
    g_mutex_unlock(&a->lock);
    return b != NULL ? b->ptr : NULL;
}

/* Joins b's successor into `b` (the survivor keeps the lower address);
 * neither may be in a pool. */
static void absorb_next(Block *b)
{
    Block *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next != NULL) {
        n->next->prev = b;
    }
    g_free(n);
}

void cuda_alloc_put(CudaAlloc *a, void *ptr)
{
    g_return_if_fail(a != NULL);
    if (ptr == NULL) {
        return;
    }
    g_mutex_lock(&a->lock);
    Block *b = g_hash_table_lookup(a->in_use, ptr);
    if (b == NULL) {
        g_mutex_unlock(&a->lock);
        g_critical("%s: cuda_alloc_put(%p): not a block this allocator handed out "
                   "(freed twice, or never allocated here)",
                   a->name, ptr);
        return;
    }
    g_hash_table_remove(a->in_use, ptr);
    a->stats.allocated_bytes -= (gint64)b->requested;
    if (b->prev != NULL && !b->prev->in_use) {
        uncache_block(b->prev);
        b = b->prev;
        absorb_next(b);
    }
    if (b->next != NULL && !b->next->in_use) {
        uncache_block(b->next);
        absorb_next(b);
    }
    cache_block(a, b);
    g_mutex_unlock(&a->lock);
}

void cuda_alloc_get_stats(CudaAlloc *a, CudaAllocStats *stats)
{
    g_return_if_fail(a != NULL && stats != NULL);
    g_mutex_lock(&a->lock);
    *stats = a->stats;
    g_mutex_unlock(&a->lock);
}

void cuda_alloc_reset_peak(CudaAlloc *a)
{
    g_return_if_fail(a != NULL);
    g_mutex_lock(&a->lock);
    a->stats.peak_bytes = a->stats.allocated_bytes;
    g_mutex_unlock(&a->lock);
}
