/* SPDX-License-Identifier: MIT */
/* plugins/shm/shm.h - what the shm plugin's two files share: the layout of
 * the shared segment and the data path's entry points.
 *
 * The segment holds a header, one control block per rank (its step counters,
 * its pid and what it runs at each step) and, per rank, two data slots used
 * alternately by consecutive steps. A collective runs as a series of steps,
 * each moving at most one slot of data per rank; every rank runs the same
 * steps in the same order, so a step number names the same piece of work on
 * every rank.
 */
#ifndef TDM_SHM_H
#define TDM_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#include <tandem/tandem.h>

#define SHM_MAGIC 0x31304d4853444d54ull /* "TDMSHM01" */
#define SHM_CTL_ALIGN 256

/* What a rank runs at a step, compared across ranks at every step so that
 * ranks that disagree stop at once instead of corrupting each other. */
typedef struct {
    uint64_t seq;
    uint64_t count;
    uint32_t op;
    uint32_t dtype;
    int32_t root;
    int32_t rop;
} ShmDesc;

typedef struct {
    _Atomic uint32_t arrive;  /* last step whose input this rank has posted */
    _Atomic uint32_t reduced; /* last step whose share this rank has reduced */
    int32_t pid;
    uint32_t pad0;
    ShmDesc desc[2]; /* by step parity: a slow reader still sees step k */
} ShmRankCtl;

typedef struct {
    uint64_t magic;
    uint32_t world;
    uint32_t pad0;
    uint64_t slot_bytes;  /* bytes of one data slot */
    uint64_t data_offset; /* first slot, page aligned */
    uint64_t total_bytes;
    _Atomic uint32_t sleepers; /* ranks blocked in futex waits: wake only then */
} ShmHeader;

typedef struct {
    ShmHeader *hdr;
    size_t map_bytes;
    int rank, world;
    uint32_t step;    /* steps run so far (same on every rank) */
    atomic_int abort; /* set by a timed-out wait or finalize */
    /* What the data path waits for right now: the plugin's wait reports the
     * ranks behind it when the caller gives up. */
    atomic_int waiting_kind; /* 0 none, 1 arrive, 2 reduced */
    _Atomic uint32_t waiting_target;
    /* When the waiting caller runs an operation itself, the data path must
     * give up at its deadline (g_get_monotonic_time(); 0 = none) and keep
     * the ranks it still waited for. */
    _Atomic int64_t deadline_us;
    int *timeout_missing;
} ShmSegment;

/* The segment size for `world` ranks and `slot_bytes` per slot. */
size_t shm_segment_size(int world, size_t slot_bytes);
/* Fill a freshly created (zeroed) segment's header. */
void shm_segment_format(ShmHeader *hdr, int world, size_t slot_bytes, size_t total);
ShmRankCtl *shm_ctl(const ShmSegment *seg, int rank);

/* The collectives on a mapped segment (world > 1). `count` in elements of
 * dtype; the caller checked sizes and dtypes. Run on one thread at a time. */
gboolean shm_run_allreduce(ShmSegment *seg, uint64_t seq, void *data, size_t count, TdmDType dtype,
                           TdmReduceOp op, GError **error);
gboolean shm_run_broadcast(ShmSegment *seg, uint64_t seq, void *data, size_t count, TdmDType dtype,
                           int root, GError **error);
gboolean shm_run_allgather(ShmSegment *seg, uint64_t seq, const void *in, void *out, size_t count,
                           TdmDType dtype, GError **error);
gboolean shm_run_reduce_scatter(ShmSegment *seg, uint64_t seq, const void *in, void *out,
                                size_t count, TdmDType dtype, TdmReduceOp op, GError **error);
gboolean shm_run_barrier(ShmSegment *seg, uint64_t seq, GError **error);

/* Ranks behind what the data path waits for now, -1 terminated (transfer
 * full), or NULL when it is not waiting. */
int *shm_segment_laggards(ShmSegment *seg);
/* The laggards kept when the data path gave up at its deadline (transfer
 * full, NULL when none). */
int *shm_segment_take_timeout_laggards(ShmSegment *seg);

/* Does this dtype / op pair reduce here? */
gboolean shm_dtype_reduces(TdmDType dtype);

#endif /* TDM_SHM_H */
