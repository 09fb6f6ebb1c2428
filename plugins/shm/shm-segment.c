/* SPDX-License-Identifier: MIT */
/* plugins/shm/shm-segment.c - the shm plugin's data path: collectives as
 * steps over a shared segment, with step counters for synchronisation.
 *
 * A step is: each rank copies its part of the step's data into its own slot,
 * publishes its `arrive` counter, and waits for everyone's; then each rank
 * works on what it owns (for allreduce: its 1/world share, reduced across
 * every rank's slot in rank order and written back into its slot, published
 * with `reduced`), and finally copies what it needs from the others' slots.
 * Each rank alternates between two slots, so before a rank overwrites the
 * slot of step k at step k+2 every other rank must have finished step k; that
 * is implied by their arrival at step k+1, which this rank waited for, so no
 * extra synchronisation is needed and a fast rank runs one step ahead.
 * Counters are C11 atomics (release on publish, acquire on read); a waiter
 * spins briefly, then yields, then sleeps on a futex in the shared page (the
 * publisher wakes only when someone sleeps), checking now and then whether
 * it was told to give up and whether the rank it waits for still exists.
 * Every rank also records what it runs at each step; all ranks compare these
 * at every step, so ranks that call different collectives stop with a
 * message instead of mixing their data.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define SPIN_US 20
#define YIELD_US 100
#define FUTEX_SLEEP_NS (20 * 1000 * 1000)
#define PEER_CHECK_S 0.5
#define REDUCE_BLOCK 1024
#define SHARE_ALIGN 16

enum { WAIT_NONE = 0, WAIT_ARRIVE = 1, WAIT_REDUCED = 2 };

size_t shm_segment_size(int world, size_t slot_bytes)
{
    size_t ctl_end = SHM_CTL_ALIGN + (size_t)world * SHM_CTL_ALIGN;
    size_t data = (ctl_end + 4095) & ~(size_t)4095;
    return data + (size_t)world * 2 * slot_bytes;
}

void shm_segment_format(ShmHeader *hdr, int world, size_t slot_bytes, size_t total)
{
    size_t ctl_end = SHM_CTL_ALIGN + (size_t)world * SHM_CTL_ALIGN;
    hdr->world = (uint32_t)world;
    hdr->slot_bytes = slot_bytes;
    hdr->data_offset = (ctl_end + 4095) & ~(size_t)4095;
    hdr->total_bytes = total;
    atomic_store(&hdr->sleepers, 0);
    atomic_thread_fence(memory_order_release);
    hdr->magic = SHM_MAGIC;
}

ShmRankCtl *shm_ctl(const ShmSegment *seg, int rank)
{
    return (ShmRankCtl *)((char *)seg->hdr + SHM_CTL_ALIGN + (size_t)rank * SHM_CTL_ALIGN);
}

static char *slot_at(const ShmSegment *seg, int rank, uint32_t step)
{
    return (char *)seg->hdr + seg->hdr->data_offset +
           ((size_t)rank * 2 + (step & 1u)) * seg->hdr->slot_bytes;
}

static inline gboolean step_reached(uint32_t have, uint32_t want)
{
    return (int32_t)(have - want) >= 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_sleep(_Atomic uint32_t *addr, uint32_t seen)
{
    struct timespec ts = {0, FUTEX_SLEEP_NS};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void publish(ShmSegment *seg, _Atomic uint32_t *counter, uint32_t step)
{
    atomic_store_explicit(counter, step, memory_order_seq_cst);
    if (atomic_load_explicit(&seg->hdr->sleepers, memory_order_seq_cst) > 0) {
        syscall(SYS_futex, (uint32_t *)counter, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

static _Atomic uint32_t *counter_of(const ShmSegment *seg, int rank, int kind)
{
    ShmRankCtl *c = shm_ctl(seg, rank);
    return kind == WAIT_ARRIVE ? &c->arrive : &c->reduced;
}

static gboolean peer_exited(const ShmSegment *seg, int rank, int *pid_out)
{
    int pid = shm_ctl(seg, rank)->pid;
    *pid_out = pid;
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static gboolean wait_slow(ShmSegment *seg, int rank, int kind, uint32_t step, GError **error)
{
    _Atomic uint32_t *counter = counter_of(seg, rank, kind);
    atomic_store(&seg->waiting_target, step);
    atomic_store(&seg->waiting_kind, kind);
    double next_check = tdm_time_now() + PEER_CHECK_S;
    gboolean ok = TRUE;
    for (;;) {
        if (atomic_load(&seg->abort)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                        "shm: abandoned at step %u while waiting for rank %d", step, rank);
            ok = FALSE;
            break;
        }
        gint64 deadline = atomic_load(&seg->deadline_us);
        if (deadline != 0 && g_get_monotonic_time() >= deadline) {
            g_free(seg->timeout_missing);
            seg->timeout_missing = shm_segment_laggards(seg);
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "shm: timed out at step %u waiting for rank %d", step, rank);
            ok = FALSE;
            break;
        }
        atomic_fetch_add_explicit(&seg->hdr->sleepers, 1, memory_order_seq_cst);
        uint32_t seen = atomic_load_explicit(counter, memory_order_seq_cst);
        if (!step_reached(seen, step)) {
            futex_sleep(counter, seen);
        }
        atomic_fetch_sub_explicit(&seg->hdr->sleepers, 1, memory_order_seq_cst);
        if (step_reached(atomic_load_explicit(counter, memory_order_acquire), step)) {
            break;
        }
        double now = tdm_time_now();
        if (now >= next_check) {
            int pid = 0;
            if (peer_exited(seg, rank, &pid)) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                            "rank %d (pid %d) exited while this rank waited for it", rank, pid);
                ok = FALSE;
                break;
            }
            next_check = now + PEER_CHECK_S;
        }
    }
    atomic_store(&seg->waiting_kind, WAIT_NONE);
    return ok;
}

static gboolean wait_rank(ShmSegment *seg, int rank, int kind, uint32_t step, GError **error)
{
    _Atomic uint32_t *counter = counter_of(seg, rank, kind);
    const gint64 start = g_get_monotonic_time();
    for (unsigned i = 1;; i++) {
        if (step_reached(atomic_load_explicit(counter, memory_order_acquire), step)) {
            return TRUE;
        }
        cpu_relax();
        if ((i & 63) == 0 && g_get_monotonic_time() - start > SPIN_US) {
            break;
        }
    }
    /* More ranks than cores (tests, busy machines): let the one we wait for run. */
    while (g_get_monotonic_time() - start < YIELD_US) {
        sched_yield();
        if (step_reached(atomic_load_explicit(counter, memory_order_acquire), step)) {
            return TRUE;
        }
    }
    return wait_slow(seg, rank, kind, step, error);
}

static gboolean wait_all(ShmSegment *seg, int kind, uint32_t step, GError **error)
{
    for (int r = 0; r < seg->world; r++) {
        if (r != seg->rank && !wait_rank(seg, r, kind, step, error)) {
            return FALSE;
        }
    }
    return TRUE;
}

int *shm_segment_laggards(ShmSegment *seg)
{
    int kind = atomic_load(&seg->waiting_kind);
    if (kind == WAIT_NONE) {
        return NULL;
    }
    uint32_t target = atomic_load(&seg->waiting_target);
    int *out = g_new(int, (gsize)seg->world + 1);
    int n = 0;
    for (int r = 0; r < seg->world; r++) {
        if (r != seg->rank && !step_reached(atomic_load(counter_of(seg, r, kind)), target)) {
            out[n++] = r;
        }
    }
    out[n] = -1;
    return out;
}

int *shm_segment_take_timeout_laggards(ShmSegment *seg)
{
    int *out = seg->timeout_missing;
    seg->timeout_missing = NULL;
    return out;
}

/* ---- what each rank runs, checked at every step ---- */

static char *desc_string(const ShmDesc *d)
{
    const char *op = tdm_coll_op_name((TdmCollOp)d->op);
    const char *dt = tdm_dtype_name((TdmDType)d->dtype);
    switch ((TdmCollOp)d->op) {
    case TDM_COLL_BARRIER:
        return g_strdup_printf("barrier() as #%" G_GUINT64_FORMAT, d->seq);
    case TDM_COLL_BROADCAST:
        return g_strdup_printf("broadcast(%" G_GUINT64_FORMAT
                               " x %s, root %d) as #%" G_GUINT64_FORMAT,
                               d->count, dt, d->root, d->seq);
    case TDM_COLL_ALLGATHER:
        return g_strdup_printf("allgather(%" G_GUINT64_FORMAT " x %s) as #%" G_GUINT64_FORMAT,
                               d->count, dt, d->seq);
    default:
        return g_strdup_printf("%s(%" G_GUINT64_FORMAT " x %s, %s) as #%" G_GUINT64_FORMAT, op,
                               d->count, dt, tdm_reduce_op_name((TdmReduceOp)d->rop), d->seq);
    }
}

static gboolean desc_equal(const ShmDesc *a, const ShmDesc *b)
{
    return a->seq == b->seq && a->count == b->count && a->op == b->op && a->dtype == b->dtype &&
           a->root == b->root && a->rop == b->rop;
}

static void arrive(ShmSegment *seg, uint32_t step, const ShmDesc *desc)
{
    ShmRankCtl *me = shm_ctl(seg, seg->rank);
    me->desc[step & 1u] = *desc;
    publish(seg, &me->arrive, step);
}

/* Wait for every rank at `step` and check they all run the same call; the
 * rank named is the first whose call differs from rank 0's. */
static gboolean gather_arrivals(ShmSegment *seg, uint32_t step, GError **error)
{
    if (!wait_all(seg, WAIT_ARRIVE, step, error)) {
        return FALSE;
    }
    const ShmDesc *ref = &shm_ctl(seg, 0)->desc[step & 1u];
    for (int r = 1; r < seg->world; r++) {
        const ShmDesc *d = &shm_ctl(seg, r)->desc[step & 1u];
        if (!desc_equal(ref, d)) {
            g_autofree char *a = desc_string(ref);
            g_autofree char *b = desc_string(d);
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                        "collective mismatch at #%" G_GUINT64_FORMAT ": rank 0 called %s, rank %d "
                        "called %s",
                        MIN(ref->seq, d->seq), a, r, b);
            return FALSE;
        }
    }
    return TRUE;
}

/* ---- reductions: dst = srcs[0] op srcs[1] op ... in rank order ---- */

#define DEFINE_REDUCE(NAME, T)                                                                     \
    static void NAME(TdmReduceOp op, int n_src, const char *const *srcs, char *dst1, char *dst2,   \
                     size_t n)                                                                     \
    {                                                                                              \
        T tmp[REDUCE_BLOCK];                                                                       \
        for (size_t b = 0; b < n; b += REDUCE_BLOCK) {                                             \
            size_t m = MIN((size_t)REDUCE_BLOCK, n - b);                                           \
            memcpy(tmp, (const T *)srcs[0] + b, m * sizeof(T));                                    \
            for (int j = 1; j < n_src; j++) {                                                      \
                const T *s = (const T *)srcs[j] + b;                                               \
                switch (op) {                                                                      \
                case TDM_REDUCE_SUM:                                                               \
                case TDM_REDUCE_AVG:                                                               \
                    for (size_t i = 0; i < m; i++) {                                               \
                        tmp[i] += s[i];                                                            \
                    }                                                                              \
                    break;                                                                         \
                case TDM_REDUCE_MAX: /* NaN wins, as in PyTorch */                                 \
                    for (size_t i = 0; i < m; i++) {                                               \
                        tmp[i] = (tmp[i] != tmp[i] || tmp[i] > s[i]) ? tmp[i] : s[i];              \
                    }                                                                              \
                    break;                                                                         \
                case TDM_REDUCE_MIN:                                                               \
                    for (size_t i = 0; i < m; i++) {                                               \
                        tmp[i] = (tmp[i] != tmp[i] || tmp[i] < s[i]) ? tmp[i] : s[i];              \
                    }                                                                              \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            if (op == TDM_REDUCE_AVG) {                                                            \
                for (size_t i = 0; i < m; i++) {                                                   \
                    tmp[i] /= (T)n_src;                                                            \
                }                                                                                  \
            }                                                                                      \
            memcpy((T *)dst1 + b, tmp, m * sizeof(T));                                             \
            if (dst2 != NULL) {                                                                    \
                memcpy((T *)dst2 + b, tmp, m * sizeof(T));                                         \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_REDUCE(reduce_f32, float)
DEFINE_REDUCE(reduce_i32, int32_t)
DEFINE_REDUCE(reduce_i64, int64_t)

gboolean shm_dtype_reduces(TdmDType dtype)
{
    return dtype == TDM_DTYPE_F32 || dtype == TDM_DTYPE_I32 || dtype == TDM_DTYPE_I64;
}

static void reduce(TdmDType dtype, TdmReduceOp op, int n_src, const char *const *srcs, char *dst1,
                   char *dst2, size_t n)
{
    switch (dtype) {
    case TDM_DTYPE_F32:
        reduce_f32(op, n_src, srcs, dst1, dst2, n);
        break;
    case TDM_DTYPE_I32:
        reduce_i32(op, n_src, srcs, dst1, dst2, n);
        break;
    case TDM_DTYPE_I64:
        reduce_i64(op, n_src, srcs, dst1, dst2, n);
        break;
    default:
        g_assert_not_reached();
    }
}

/* ---- the collectives ---- */

/* Start of share j of n elements split over `world` ranks (aligned, so the
 * reductions start on a cache line where they can). */
static size_t share_start(size_t n, int world, int j)
{
    if (j >= world) {
        return n;
    }
    size_t lo = (size_t)((uint64_t)n * (uint64_t)j / (uint64_t)world);
    lo &= ~(size_t)(SHARE_ALIGN - 1);
    return lo;
}

static ShmDesc make_desc(uint64_t seq, TdmCollOp op, size_t count, TdmDType dtype, int root,
                         TdmReduceOp rop)
{
    ShmDesc d = {.seq = seq, .count = count, .op = op, .dtype = dtype, .root = root, .rop = rop};
    return d;
}

/* memcpy that also takes the NULL buffers of zero-count operations */
static inline void copy_bytes(void *dst, const void *src, size_t n)
{
    if (n > 0) {
        memcpy(dst, src, n);
    }
}

gboolean shm_run_allreduce(ShmSegment *seg, uint64_t seq, void *data, size_t count, TdmDType dtype,
                           TdmReduceOp op, GError **error)
{
    const size_t es = tdm_dtype_size(dtype);
    const size_t chunk = seg->hdr->slot_bytes / es;
    const int me = seg->rank, world = seg->world;
    const ShmDesc desc = make_desc(seq, TDM_COLL_ALLREDUCE, count, dtype, 0, op);
    const char *srcs[world];
    size_t done = 0;
    do {
        const size_t n = MIN(chunk, count - done);
        const uint32_t step = ++seg->step;
        char *base = (char *)data + done * es;
        char *mine = slot_at(seg, me, step);
        const size_t lo = share_start(n, world, me), hi = share_start(n, world, me + 1);
        /* Nobody else reads this rank's own share: it is reduced from `data`. */
        copy_bytes(mine, base, lo * es);
        copy_bytes(mine + hi * es, base + hi * es, (n - hi) * es);
        arrive(seg, step, &desc);
        if (!gather_arrivals(seg, step, error)) {
            return FALSE;
        }
        for (int j = 0; j < world; j++) {
            srcs[j] = j == me ? base + lo * es : slot_at(seg, j, step) + lo * es;
        }
        reduce(dtype, op, world, srcs, base + lo * es, mine + lo * es, hi - lo);
        publish(seg, &shm_ctl(seg, me)->reduced, step);
        if (!wait_all(seg, WAIT_REDUCED, step, error)) {
            return FALSE;
        }
        for (int j = 0; j < world; j++) {
            if (j != me) {
                size_t jl = share_start(n, world, j), jh = share_start(n, world, j + 1);
                copy_bytes(base + jl * es, slot_at(seg, j, step) + jl * es, (jh - jl) * es);
            }
        }
        done += n;
    } while (done < count);
    return TRUE;
}

gboolean shm_run_broadcast(ShmSegment *seg, uint64_t seq, void *data, size_t count, TdmDType dtype,
                           int root, GError **error)
{
    const size_t es = tdm_dtype_size(dtype);
    const size_t chunk = seg->hdr->slot_bytes / es;
    const ShmDesc desc = make_desc(seq, TDM_COLL_BROADCAST, count, dtype, root, 0);
    size_t done = 0;
    do {
        const size_t n = MIN(chunk, count - done);
        const uint32_t step = ++seg->step;
        char *base = (char *)data + done * es;
        if (seg->rank == root) {
            copy_bytes(slot_at(seg, root, step), base, n * es);
        }
        arrive(seg, step, &desc);
        if (!gather_arrivals(seg, step, error)) {
            return FALSE;
        }
        if (seg->rank != root) {
            copy_bytes(base, slot_at(seg, root, step), n * es);
        }
        done += n;
    } while (done < count);
    return TRUE;
}

gboolean shm_run_allgather(ShmSegment *seg, uint64_t seq, const void *in, void *out, size_t count,
                           TdmDType dtype, GError **error)
{
    const size_t es = tdm_dtype_size(dtype);
    const size_t chunk = seg->hdr->slot_bytes / es;
    const ShmDesc desc = make_desc(seq, TDM_COLL_ALLGATHER, count, dtype, 0, 0);
    size_t done = 0;
    do {
        const size_t n = MIN(chunk, count - done);
        const uint32_t step = ++seg->step;
        const char *src = (const char *)in + done * es;
        copy_bytes(slot_at(seg, seg->rank, step), src, n * es);
        arrive(seg, step, &desc);
        if (!gather_arrivals(seg, step, error)) {
            return FALSE;
        }
        for (int j = 0; j < seg->world; j++) {
            char *dst = (char *)out + ((size_t)j * count + done) * es;
            /* `in` may be this rank's part of `out` (in place): then it is
             * already there, and any other aliasing reads the slot copy. */
            if (j != seg->rank || dst != src) {
                copy_bytes(dst, slot_at(seg, j, step), n * es);
            }
        }
        done += n;
    } while (done < count);
    return TRUE;
}

gboolean shm_run_reduce_scatter(ShmSegment *seg, uint64_t seq, const void *in, void *out,
                                size_t count, TdmDType dtype, TdmReduceOp op, GError **error)
{
    const size_t es = tdm_dtype_size(dtype);
    const int me = seg->rank, world = seg->world;
    const size_t chunk = seg->hdr->slot_bytes / es / (size_t)world;
    const ShmDesc desc = make_desc(seq, TDM_COLL_REDUCE_SCATTER, count, dtype, 0, op);
    const char *srcs[world];
    size_t done = 0;
    do {
        const size_t n = MIN(chunk, count - done);
        const uint32_t step = ++seg->step;
        char *mine = slot_at(seg, me, step);
        for (int j = 0; j < world; j++) {
            if (j != me) {
                copy_bytes(mine + (size_t)j * n * es,
                           (const char *)in + ((size_t)j * count + done) * es, n * es);
            }
        }
        arrive(seg, step, &desc);
        if (!gather_arrivals(seg, step, error)) {
            return FALSE;
        }
        for (int j = 0; j < world; j++) {
            srcs[j] = j == me ? (const char *)in + ((size_t)me * count + done) * es
                              : slot_at(seg, j, step) + (size_t)me * n * es;
        }
        reduce(dtype, op, world, srcs, (char *)out + done * es, NULL, n);
        done += n;
    } while (done < count);
    return TRUE;
}

gboolean shm_run_barrier(ShmSegment *seg, uint64_t seq, GError **error)
{
    const ShmDesc desc = make_desc(seq, TDM_COLL_BARRIER, 0, TDM_DTYPE_U8, 0, 0);
    const uint32_t step = ++seg->step;
    arrive(seg, step, &desc);
    return gather_arrivals(seg, step, error);
}
