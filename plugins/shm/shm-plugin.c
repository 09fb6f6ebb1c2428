/* SPDX-License-Identifier: MIT */
/* plugins/shm/shm-plugin.c - libtdm-shm: collectives between ranks of one
 * host through a POSIX shared-memory segment.
 *
 * This file is the plugin's outside: registration, the job check (every rank
 * posts a host identity to the store and the plugin serves the job only when
 * all agree), the rendezvous (rank 0 creates the segment under a random name
 * published in the store, the others map it, and rank 0 unlinks it as soon as
 * all have, so a crash leaves nothing in /dev/shm), and the asynchronous
 * machinery: each communicator has a FIFO of operations and one worker
 * thread that runs them in order (shm-segment.c has the data path); a work
 * handle is a completion flag. A thread that waits for an operation nobody
 * has started yet, at the head of the queue, runs it itself: a blocking call
 * then costs no hand-off between threads, while an asynchronous one runs in
 * the background as soon as it is issued. Only one thread runs operations at
 * a time (the `busy` flag). A wait that times out asks the data path which
 * ranks it is still waiting for, then tells it to give up so that the caller
 * may free its tensors; from then on the communicator fails every call,
 * since the ranks are no longer in step. TDM_SHM_SLOT_BYTES (rank 0's
 * value; default 4 MiB, at least 64 KiB) sets the size of one data slot.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

#define SHM_DEFAULT_SLOT_BYTES (4u << 20)
#define SHM_MIN_SLOT_BYTES (64u << 10)
#define SHM_ABANDON_WAIT_S 10
#define SHM_CALLER_GRACE_US 100

typedef struct {
    ShmSegment seg;
    GThread *thread;
    GMutex lock; /* queue, busy, quit and every work's done/error */
    GCond cond;  /* broadcast on any change of those */
    GQueue queue;
    gboolean busy; /* a thread runs an operation */
    gboolean quit;
    char *broken; /* only the thread that runs operations touches it */
} ShmComm;

struct _TdmWork {
    gint refs;
    TdmCollOp op;
    guint64 seq;
    TdmTensor *a, *b;
    TdmReduceOp rop;
    int root;
    gint64 submitted; /* g_get_monotonic_time() */
    gboolean done;
    GError *error;
};

/* ---- which jobs ---- */

/* Host memory only; the core stages the tensors of other devices
 * (TDM_COMM_FLAG_HOST_STAGING). */
static gboolean shm_supports_device(const TdmDevice *dev)
{
    return tdm_device_host_accessible(dev);
}

static char *read_first_line(const char *path)
{
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL)) {
        return g_strdup("?");
    }
    g_strchomp(text);
    return text;
}

/* Ranks can share a segment when they see the same kernel, the same
 * /dev/shm (mount namespace) and each other's pids (pid namespace). */
static char *host_identity(void)
{
    g_autofree char *boot = read_first_line("/proc/sys/kernel/random/boot_id");
    g_autofree char *mnt = g_file_read_link("/proc/self/ns/mnt", NULL);
    g_autofree char *pid = g_file_read_link("/proc/self/ns/pid", NULL);
    return g_strdup_printf("%s %s %s %s", g_get_host_name(), boot, mnt != NULL ? mnt : "?",
                           pid != NULL ? pid : "?");
}

static const char *restart_generation(void)
{
    const char *gen = g_getenv("TDM_RESTART_COUNT");
    if (gen == NULL) {
        gen = g_getenv("TORCHELASTIC_RESTART_COUNT");
    }
    return gen != NULL ? gen : "0";
}

static gboolean shm_supports_job(TdmComm *comm, char **reason)
{
    static gint probe_counter = 0;
    if (comm->world == 1) {
        return TRUE;
    }
    if (comm->store == NULL) {
        *reason = g_strdup("no store to compare hosts through");
        return FALSE;
    }
    /* Every rank probes in the same order, so the counter names this probe. */
    int probe = g_atomic_int_add(&probe_counter, 1);
    g_autofree char *prefix = g_strdup_printf("tdm/shm-host/%s/%d", restart_generation(), probe);
    g_autofree char *mine = host_identity();
    g_autofree char *my_key = g_strdup_printf("%s/%d", prefix, comm->rank);
    GError *error = NULL;
    if (!tdm_store_set(comm->store, my_key, mine, strlen(mine), &error)) {
        *reason = g_strdup_printf("cannot post the host identity: %s", error->message);
        g_error_free(error);
        return FALSE;
    }
    gboolean same = TRUE;
    for (int r = 0; r < comm->world && same; r++) {
        g_autofree char *key = g_strdup_printf("%s/%d", prefix, r);
        GBytes *value = tdm_store_get(comm->store, key, &error);
        if (value == NULL) {
            *reason = g_strdup_printf("no host identity from rank %d: %s", r, error->message);
            g_error_free(error);
            return FALSE;
        }
        gsize len = 0;
        const char *data = g_bytes_get_data(value, &len);
        if (len != strlen(mine) || memcmp(data, mine, len) != 0) {
            *reason = g_strdup_printf("rank %d is on another host or namespace (%.*s) than rank "
                                      "%d (%s)",
                                      r, (int)len, data, comm->rank, mine);
            same = FALSE;
        }
        g_bytes_unref(value);
    }
    return same;
}

/* ---- the worker ---- */

static TdmWork *work_new(TdmCollOp op, guint64 seq, TdmTensor *a, TdmTensor *b)
{
    TdmWork *w = g_new0(TdmWork, 1);
    w->refs = 1;
    w->op = op;
    w->seq = seq;
    w->a = a != NULL ? tdm_tensor_ref(a) : NULL;
    w->b = b != NULL ? tdm_tensor_ref(b) : NULL;
    return w;
}

static void work_unref(TdmWork *w)
{
    if (!g_atomic_int_dec_and_test(&w->refs)) {
        return;
    }
    if (w->a != NULL) {
        tdm_tensor_unref(w->a);
    }
    if (w->b != NULL) {
        tdm_tensor_unref(w->b);
    }
    g_clear_error(&w->error);
    g_free(w);
}

static void *tensor_ptr(TdmTensor *t)
{
    return tdm_tensor_nbytes(t) > 0 ? tdm_tensor_data(t) : NULL;
}

static size_t tensor_count(TdmTensor *t)
{
    return tdm_tensor_nbytes(t) / tdm_dtype_size(t->dtype);
}

static gboolean work_run(ShmComm *s, TdmWork *w, GError **error)
{
    ShmSegment *seg = &s->seg;
    switch (w->op) {
    case TDM_COLL_ALLREDUCE:
        return shm_run_allreduce(seg, w->seq, tensor_ptr(w->a), tensor_count(w->a), w->a->dtype,
                                 w->rop, error);
    case TDM_COLL_BROADCAST:
        return shm_run_broadcast(seg, w->seq, tensor_ptr(w->a), tensor_count(w->a), w->a->dtype,
                                 w->root, error);
    case TDM_COLL_ALLGATHER:
        return shm_run_allgather(seg, w->seq, tensor_ptr(w->a), tensor_ptr(w->b),
                                 tensor_count(w->a), w->a->dtype, error);
    case TDM_COLL_REDUCE_SCATTER:
        return shm_run_reduce_scatter(seg, w->seq, tensor_ptr(w->a), tensor_ptr(w->b),
                                      tensor_count(w->b), w->b->dtype, w->rop, error);
    case TDM_COLL_BARRIER:
        return shm_run_barrier(seg, w->seq, error);
    }
    return FALSE;
}

/* Run the head of the queue, taken by the caller with s->lock held and
 * busy set; returns with the lock held and busy cleared. */
static void run_locked(ShmComm *s, TdmWork *w)
{
    g_mutex_unlock(&s->lock);
    GError *error = NULL;
    if (s->broken != NULL) {
        g_set_error(&error, TDM_ERROR, TDM_ERROR_FAILED,
                    "shm communicator unusable after an earlier failure: %s", s->broken);
    } else if (!work_run(s, w, &error)) {
        s->broken = g_strdup(error->message);
    }
    g_mutex_lock(&s->lock);
    w->error = error;
    w->done = TRUE;
    s->busy = FALSE;
    g_cond_broadcast(&s->cond);
}

static gpointer worker_main(gpointer data)
{
    ShmComm *s = data;
    g_mutex_lock(&s->lock);
    for (;;) {
        while (!s->quit && (s->busy || g_queue_is_empty(&s->queue))) {
            g_cond_wait(&s->cond, &s->lock);
        }
        if (s->busy || g_queue_is_empty(&s->queue)) {
            break; /* quit */
        }
        /* A blocking call waits right after issuing: leave it a moment to
         * run the operation itself, which saves two thread hand-offs. */
        TdmWork *head = g_queue_peek_head(&s->queue);
        if (!s->quit && g_get_monotonic_time() < head->submitted + SHM_CALLER_GRACE_US) {
            g_cond_wait_until(&s->cond, &s->lock, head->submitted + SHM_CALLER_GRACE_US);
            continue;
        }
        TdmWork *w = g_queue_pop_head(&s->queue);
        s->busy = TRUE;
        run_locked(s, w);
        work_unref(w);
    }
    g_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- rendezvous ---- */

static gboolean segment_create(ShmComm *s, TdmComm *comm, const char *prefix, GError **error)
{
    size_t slot = SHM_DEFAULT_SLOT_BYTES;
    const char *env = g_getenv("TDM_SHM_SLOT_BYTES");
    if (env != NULL && g_ascii_strtoull(env, NULL, 10) >= SHM_MIN_SLOT_BYTES) {
        slot = (size_t)g_ascii_strtoull(env, NULL, 10) & ~(size_t)4095;
    }
    g_autofree char *name =
        g_strdup_printf("/tdm-shm-%d-%08x%08x", (int)getpid(), g_random_int(), g_random_int());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "shm_open(%s): %s", name, g_strerror(errno));
        return FALSE;
    }
    /* Reserve the pages now: a full /dev/shm must be an error here, not a
     * SIGBUS in the middle of a collective. Smaller slots still work. */
    size_t total = 0;
    int rc = ENOSPC;
    for (; slot >= SHM_MIN_SLOT_BYTES; slot /= 2) {
        total = shm_segment_size(comm->world, slot);
        rc = posix_fallocate(fd, 0, (off_t)total);
        if (rc == 0) {
            break;
        }
        if (ftruncate(fd, 0) != 0) {
            break;
        }
    }
    if (rc != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO,
                    "cannot reserve %zu bytes in /dev/shm for %s: %s", total, name, g_strerror(rc));
        close(fd);
        shm_unlink(name);
        return FALSE;
    }
    void *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "mmap of %s (%zu bytes): %s", name, total,
                    g_strerror(errno));
        shm_unlink(name);
        return FALSE;
    }
    s->seg.hdr = map;
    s->seg.map_bytes = total;
    shm_segment_format(s->seg.hdr, comm->world, slot, total);

    g_autofree char *name_key = g_strdup_printf("%s/name", prefix);
    gboolean ok = tdm_store_set(comm->store, name_key, name, strlen(name), error);
    if (ok) {
        GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
        for (int r = 1; r < comm->world; r++) {
            g_ptr_array_add(keys, g_strdup_printf("%s/mapped/%d", prefix, r));
        }
        g_ptr_array_add(keys, NULL);
        ok = tdm_store_wait(comm->store, (const char *const *)keys->pdata, error);
        if (!ok) {
            g_prefix_error(error, "waiting for every rank to map %s: ", name);
        }
        g_ptr_array_unref(keys);
    }
    shm_unlink(name);
    return ok;
}

static gboolean segment_attach(ShmComm *s, TdmComm *comm, const char *prefix, GError **error)
{
    g_autofree char *name_key = g_strdup_printf("%s/name", prefix);
    GBytes *value = tdm_store_get(comm->store, name_key, error);
    if (value == NULL) {
        g_prefix_error(error, "waiting for rank 0's segment name: ");
        return FALSE;
    }
    gsize len = 0;
    const char *data = g_bytes_get_data(value, &len);
    g_autofree char *name = g_strndup(data, len);
    g_bytes_unref(value);

    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "shm_open(%s) of rank 0's segment: %s", name,
                    g_strerror(errno));
        return FALSE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(ShmHeader)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "segment %s is too small", name);
        close(fd);
        return FALSE;
    }
    void *map =
        mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "mmap of %s: %s", name, g_strerror(errno));
        return FALSE;
    }
    s->seg.hdr = map;
    s->seg.map_bytes = (size_t)st.st_size;
    ShmHeader *hdr = s->seg.hdr;
    if (hdr->magic != SHM_MAGIC || hdr->world != (uint32_t)comm->world ||
        hdr->total_bytes != (uint64_t)st.st_size) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "segment %s is not a %d-rank shm segment (magic %016" G_GINT64_MODIFIER
                    "x, world %u)",
                    name, comm->world, (guint64)hdr->magic, hdr->world);
        return FALSE;
    }
    /* The last rank to map unlinks too: then nothing is left in /dev/shm
     * even if rank 0 dies right after publishing the name. */
    g_autofree char *count_key = g_strdup_printf("%s/nmapped", prefix);
    gint64 mapped = 0;
    if (!tdm_store_add(comm->store, count_key, 1, &mapped, error)) {
        return FALSE;
    }
    if (mapped == comm->world - 1) {
        shm_unlink(name);
    }
    g_autofree char *mapped_key = g_strdup_printf("%s/mapped/%d", prefix, comm->rank);
    return tdm_store_set(comm->store, mapped_key, "1", 1, error);
}

static void shm_finalize(TdmComm *comm);

static gboolean shm_init(TdmComm *comm, GError **error)
{
    static gint comm_counter = 0;
    ShmComm *s = g_new0(ShmComm, 1);
    comm->priv = s;
    g_mutex_init(&s->lock);
    g_cond_init(&s->cond);
    g_queue_init(&s->queue);
    s->seg.rank = comm->rank;
    s->seg.world = comm->world;
    if (comm->world == 1) {
        return TRUE;
    }
    int n = g_atomic_int_add(&comm_counter, 1);
    g_autofree char *prefix = g_strdup_printf("tdm/shm/%s/%d", restart_generation(), n);
    gboolean ok = comm->rank == 0 ? segment_create(s, comm, prefix, error)
                                  : segment_attach(s, comm, prefix, error);
    if (!ok) {
        shm_finalize(comm);
        return FALSE;
    }
    shm_ctl(&s->seg, comm->rank)->pid = (int32_t)getpid();
    g_autofree char *thread_name = g_strdup_printf("tdm-shm-%d", n);
    s->thread = g_thread_new(thread_name, worker_main, s);
    return TRUE;
}

static void shm_finalize(TdmComm *comm)
{
    ShmComm *s = comm->priv;
    if (s == NULL) {
        return;
    }
    if (s->thread != NULL) {
        /* Work still queued at this point was never waited for: fail it. */
        atomic_store(&s->seg.abort, 1);
        g_mutex_lock(&s->lock);
        s->quit = TRUE;
        g_cond_broadcast(&s->cond);
        g_mutex_unlock(&s->lock);
        g_thread_join(s->thread);
    }
    g_mutex_clear(&s->lock);
    g_cond_clear(&s->cond);
    if (s->seg.hdr != NULL) {
        munmap(s->seg.hdr, s->seg.map_bytes);
    }
    g_free(s->seg.timeout_missing);
    g_free(s->broken);
    g_free(s);
    comm->priv = NULL;
}

/* ---- operations ---- */

/* One rank: every op is a local copy or nothing, done at once. */
static void run_alone(TdmWork *w)
{
    if ((w->op == TDM_COLL_ALLGATHER || w->op == TDM_COLL_REDUCE_SCATTER) &&
        tdm_tensor_nbytes(w->b) > 0 && tensor_ptr(w->a) != tensor_ptr(w->b)) {
        memmove(tensor_ptr(w->b), tensor_ptr(w->a), tdm_tensor_nbytes(w->b));
    }
    w->done = TRUE;
}

static TdmWork *submit(TdmComm *comm, TdmWork *w)
{
    ShmComm *s = comm->priv;
    if (s->thread == NULL) {
        run_alone(w);
        return w;
    }
    g_atomic_int_inc(&w->refs); /* the queue's */
    g_mutex_lock(&s->lock);
    w->submitted = g_get_monotonic_time();
    g_queue_push_tail(&s->queue, w);
    g_cond_broadcast(&s->cond);
    g_mutex_unlock(&s->lock);
    return w;
}

static gboolean check_reducible(const char *op, TdmTensor *t, GError **error)
{
    if (!shm_dtype_reduces(t->dtype)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "shm %s: dtype %s cannot be reduced (f32, i32 and i64 can)", op,
                    tdm_dtype_name(t->dtype));
        return FALSE;
    }
    return TRUE;
}

static gboolean check_sized(const char *op, TdmTensor *t, GError **error)
{
    if (tdm_dtype_size(t->dtype) == 0 || tdm_tensor_nbytes(t) % tdm_dtype_size(t->dtype) != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED, "shm %s: dtype %s is not supported",
                    op, tdm_dtype_name(t->dtype));
        return FALSE;
    }
    return TRUE;
}

static TdmWork *shm_allreduce(TdmComm *comm, guint64 seq, TdmTensor *t, TdmReduceOp op,
                              GError **error)
{
    if (!check_reducible("allreduce", t, error)) {
        return NULL;
    }
    TdmWork *w = work_new(TDM_COLL_ALLREDUCE, seq, t, NULL);
    w->rop = op;
    return submit(comm, w);
}

static TdmWork *shm_broadcast(TdmComm *comm, guint64 seq, TdmTensor *t, int root, GError **error)
{
    if (!check_sized("broadcast", t, error)) {
        return NULL;
    }
    TdmWork *w = work_new(TDM_COLL_BROADCAST, seq, t, NULL);
    w->root = root;
    return submit(comm, w);
}

static TdmWork *shm_allgather(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                              GError **error)
{
    if (!check_sized("allgather", in, error)) {
        return NULL;
    }
    return submit(comm, work_new(TDM_COLL_ALLGATHER, seq, in, out));
}

static TdmWork *shm_reduce_scatter(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                                   TdmReduceOp op, GError **error)
{
    if (!check_reducible("reduce_scatter", in, error)) {
        return NULL;
    }
    TdmWork *w = work_new(TDM_COLL_REDUCE_SCATTER, seq, in, out);
    w->rop = op;
    return submit(comm, w);
}

static TdmWork *shm_barrier(TdmComm *comm, guint64 seq, GError **error)
{
    return submit(comm, work_new(TDM_COLL_BARRIER, seq, NULL, NULL));
}

/* Wait until `w` is done or `deadline`; run it here when it is next and
 * nobody runs anything. Returns whether it is done. */
static gboolean work_wait_until(ShmComm *s, TdmWork *w, gint64 deadline)
{
    if (s->thread == NULL) {
        return w->done;
    }
    g_mutex_lock(&s->lock);
    while (!w->done) {
        if (!s->busy && g_queue_peek_head(&s->queue) == w) {
            g_queue_pop_head(&s->queue);
            s->busy = TRUE;
            atomic_store(&s->seg.deadline_us, deadline);
            run_locked(s, w);
            atomic_store(&s->seg.deadline_us, 0);
            work_unref(w); /* the queue's */
        } else if (!g_cond_wait_until(&s->cond, &s->lock, deadline)) {
            break;
        }
    }
    gboolean done = w->done;
    g_mutex_unlock(&s->lock);
    return done;
}

static gboolean shm_wait(TdmComm *comm, TdmWork *w, double timeout_s, int **missing, GError **error)
{
    ShmComm *s = comm->priv;
    gint64 deadline = g_get_monotonic_time() + (gint64)(timeout_s * G_TIME_SPAN_SECOND);
    if (!work_wait_until(s, w, deadline)) {
        if (missing != NULL) {
            *missing = shm_segment_laggards(&s->seg);
        }
        /* Make the worker let go of this work's tensors before returning. */
        atomic_store(&s->seg.abort, 1);
        work_wait_until(s, w, g_get_monotonic_time() + SHM_ABANDON_WAIT_S * G_TIME_SPAN_SECOND);
        g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT, "shm: timed out after %.1f s", timeout_s);
        return FALSE;
    }
    if (w->error != NULL) {
        if (g_error_matches(w->error, TDM_ERROR, TDM_ERROR_TIMEOUT) && missing != NULL) {
            /* Run here and timed out in the data path, which kept the laggards. */
            *missing = shm_segment_take_timeout_laggards(&s->seg);
        }
        g_propagate_error(error, g_error_copy(w->error));
        return FALSE;
    }
    return TRUE;
}

static void shm_work_free(TdmComm *comm, TdmWork *w)
{
    if (w != NULL) {
        work_unref(w);
    }
}

static const TdmCommClass shm_class = {
    TDM_CLASS_HEADER(TDM_COMM_IFACE_VERSION, TdmCommClass),
    .supports_device = shm_supports_device,
    .supports_job = shm_supports_job,
    .init = shm_init,
    .finalize = shm_finalize,
    .allreduce = shm_allreduce,
    .broadcast = shm_broadcast,
    .allgather = shm_allgather,
    .reduce_scatter = shm_reduce_scatter,
    .barrier = shm_barrier,
    .wait = shm_wait,
    .work_free = shm_work_free,
    .flags = TDM_COMM_FLAG_HOST_STAGING,
};

TDM_PLUGIN_INIT_FEATURE(shm_plugin_init, TDM_FEATURE_COLLECTIVE, "shm", 60, &shm_class,
                        "same-host collectives through POSIX shared memory "
                        "(reduce-scatter + all-gather over a shared segment)",
                        NULL, NULL)

TDM_PLUGIN_DEFINE(shm, "MIT", "Same-host collectives over POSIX shared memory",
                  "tandem", shm_plugin_init)
