/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-alloc.h - a caching allocator over a raw allocator.
 *
 * cudaMalloc and cudaFree synchronise the device and cost tens of
 * microseconds, so the cuda backend never calls them in a steady training
 * step: freed blocks stay cached and are handed out again. The rules are
 * PyTorch's CUDA caching allocator's: requests are rounded up to 512 bytes;
 * requests of at most 1 MiB come from 2 MiB segments shared by small blocks
 * (the small pool), larger ones from segments of their own rounded up to
 * 2 MiB (the large pool); a request takes the smallest cached block that
 * fits (best fit) and splits off the rest when the rest is worth keeping;
 * a freed block merges with its free neighbours in the same segment. When
 * the raw allocator fails, the allocator synchronises, releases every
 * wholly free segment and tries once more; if that fails too, the error
 * gives the request and the allocated, reserved and peak bytes.
 *
 * The core of the allocator knows nothing of CUDA: the raw allocation,
 * release and synchronisation are injected (CudaAllocBacking), so it is
 * unit-tested on the CPU over malloc (tests/test-cuda-alloc.c) and serves
 * both device memory (cudaMalloc) and pinned host memory (cudaHostAlloc).
 *
 * One stream: blocks are reused in the order of the device's compute
 * stream, which is where every tensor is used, so a block freed by the host
 * can be handed out at once (work queued later on the same stream runs
 * after the work that used it). Thread-safe (one lock per allocator).
 */
#ifndef TDM_CUDA_ALLOC_H
#define TDM_CUDA_ALLOC_H

#include <glib.h>

typedef struct _CudaAlloc CudaAlloc;

typedef struct {
    /* A raw segment of `nbytes`, or NULL with the error set (an
     * out-of-memory failure must return NULL, not abort). */
    void *(*raw_alloc)(gpointer ctx, size_t nbytes, GError **error);
    void (*raw_free)(gpointer ctx, void *ptr, size_t nbytes);
    /* Wait for the device before cached segments are released (optional:
     * NULL means nothing to wait for). All three are called with the
     * allocator's lock held: they must not call back into it. */
    gboolean (*synchronize)(gpointer ctx, GError **error);
    gpointer ctx;
} CudaAllocBacking;

typedef struct {
    gint64 allocated_bytes; /* handed out now (rounded sizes) */
    gint64 reserved_bytes;  /* held from the raw allocator: allocated + cached */
    gint64 peak_bytes;      /* highest allocated_bytes since creation / reset_peak */
    gint64 n_segments;      /* raw segments held */
    gint64 n_raw_allocs;    /* raw_alloc calls that succeeded, ever */
    gint64 n_raw_frees;     /* raw_free calls, ever */
    gint64 n_oom_retries;   /* times the cache was released to retry a request */
} CudaAllocStats;

/* `name` ("cuda:0", "cuda:0 pinned host") appears in error messages. The
 * backing is copied. Transfer full: free with cuda_alloc_destroy, which
 * releases every segment (blocks still handed out are released too). */
CudaAlloc *cuda_alloc_new(const CudaAllocBacking *backing, const char *name);
void cuda_alloc_destroy(CudaAlloc *a);

/* A block of at least `nbytes` (a unique pointer even for 0 bytes), at a
 * multiple of 512 bytes from the start of its raw segment (so as aligned
 * as raw_alloc's pointers, up to 512: cudaMalloc gives at least 256). Its
 * content is undefined. NULL with an error (TDM_ERROR_BACKEND) naming the
 * request and the allocator's figures. */
void *cuda_alloc_get(CudaAlloc *a, size_t nbytes, GError **error);
/* Give a block back (NULL is ignored). A pointer the allocator never
 * handed out is a programming error (g_critical, ignored). */
void cuda_alloc_put(CudaAlloc *a, void *ptr);

/* Release every wholly free segment to the raw allocator (after
 * synchronising). */
gboolean cuda_alloc_empty_cache(CudaAlloc *a, GError **error);
void cuda_alloc_get_stats(CudaAlloc *a, CudaAllocStats *stats);
void cuda_alloc_reset_peak(CudaAlloc *a);

/* The rounded size a request of `nbytes` occupies, and the segment size a
 * new segment for it gets (exposed for the tests and the messages). */
size_t cuda_alloc_round_size(size_t nbytes);
size_t cuda_alloc_segment_size(size_t rounded);

#endif /* TDM_CUDA_ALLOC_H */
