/* SPDX-License-Identifier: MIT */
/* core/comm-stage.c - host staging of collectives for device tensors whose
 * memory the host cannot reach, as PyTorch's Gloo process group does for
 * CUDA tensors.
 *
 * A collective plugin that moves host memory only (shm, gloo) sets
 * TDM_COMM_FLAG_HOST_STAGING; when the job's device is not host-accessible
 * (cuda), the front end (comm.c) gives the plugin host views of the tensors
 * instead: before the op it reads each input into a host buffer with
 * tdm_tensor_read, which the backend orders after the work queued on the
 * device (a cuda read synchronises the compute stream), and after a
 * successful wait it writes the result back with tdm_tensor_write. The
 * buffers are the backend's pinned host memory when it offers host_alloc
 * (page-locked, so the copies run at full bus speed), else g_malloc'ed; each
 * is allocated once and reused by later calls that fit in it, so a steady
 * training step, whose buckets have the same sizes every step, allocates
 * nothing. Several calls may be in flight at once (ddp's buckets), each with
 * its own buffers, which go back to the pool at the call's wait.
 */
#include "config.h"

#include "comm-stage.h"
#include "internal.h"

typedef struct {
    void *data;
    size_t capacity;
    gboolean pinned; /* from the backend's host_alloc, else g_malloc */
    gboolean busy;   /* lent to a call in flight */
    TdmStorage storage;
    TdmTensor tensor; /* the host view lent out; never unref'ed to zero */
} StageBuf;

struct _TdmCommStage {
    TdmDevice *device;
    GMutex lock;
    GPtrArray *bufs; /* StageBuf * */
};

/* Smallest buffer the pool ever allocates: a zero-length call still gets a
 * valid pointer. */
#define STAGE_MIN_BYTES 64

TdmCommStage *tdm_comm_stage_new(TdmDevice *dev)
{
    TdmCommStage *s = g_new0(TdmCommStage, 1);
    s->device = dev;
    g_mutex_init(&s->lock);
    s->bufs = g_ptr_array_new();
    return s;
}

void tdm_comm_stage_free(TdmCommStage *s)
{
    if (s == NULL) {
        return;
    }
    for (guint i = 0; i < s->bufs->len; i++) {
        StageBuf *b = g_ptr_array_index(s->bufs, i);
        if (b->pinned) {
            tdm_device_host_free(s->device, b->data);
        } else {
            g_free(b->data);
        }
        g_free(b);
    }
    g_ptr_array_unref(s->bufs);
    g_mutex_clear(&s->lock);
    g_free(s);
}

static StageBuf *buf_alloc(TdmCommStage *s, size_t nbytes)
{
    StageBuf *b = g_new0(StageBuf, 1);
    b->capacity = MAX(nbytes, (size_t)STAGE_MIN_BYTES);
    if (tdm_device_has_pinned_memory(s->device)) {
        /* Pinned memory is an optimisation: without it the copies are only
         * slower, so a failure falls back to pageable memory. */
        GError *local = NULL;
        b->data = tdm_device_host_alloc(s->device, b->capacity, &local);
        b->pinned = b->data != NULL;
        g_clear_error(&local);
    }
    if (b->data == NULL) {
        b->data = g_malloc(b->capacity);
    }
    /* The pool's own references, kept for good: a plugin that refs the
     * view drops only its own. */
    b->storage.ref_count = 1;
    b->storage.data = b->data;
    b->storage.nbytes = b->capacity;
    b->tensor.ref_count = 1;
    b->tensor.storage = &b->storage;
    g_ptr_array_add(s->bufs, b);
    return b;
}

/* Whether `b` may be lent: given back, and let go by the plugin too (a
 * plugin's work handle may outlive the wait by a little, holding a
 * reference to the view though done with its data). */
static gboolean buf_free(StageBuf *b)
{
    return !b->busy && g_atomic_int_get(&b->tensor.ref_count) == 1;
}

/* The smallest free buffer of at least nbytes, else a new one; marked busy. */
static StageBuf *buf_take(TdmCommStage *s, size_t nbytes)
{
    g_mutex_lock(&s->lock);
    StageBuf *best = NULL;
    for (guint i = 0; i < s->bufs->len; i++) {
        StageBuf *b = g_ptr_array_index(s->bufs, i);
        if (buf_free(b) && b->capacity >= nbytes &&
            (best == NULL || b->capacity < best->capacity)) {
            best = b;
        }
    }
    if (best == NULL) {
        best = buf_alloc(s, nbytes);
    }
    best->busy = TRUE;
    g_mutex_unlock(&s->lock);
    return best;
}

TdmTensor *tdm_comm_stage_acquire(TdmCommStage *s, TdmTensor *t, gboolean copy_in, GError **error)
{
    const int64_t numel = tdm_tensor_numel(t);
    const size_t nbytes = (size_t)numel * tdm_dtype_size(t->dtype);
    StageBuf *b = buf_take(s, nbytes);
    /* A plain 1-d host view: the plugins reach it through tdm_tensor_data
     * only; it belongs to no device, so nothing may read it through one. */
    b->tensor.dtype = t->dtype;
    b->tensor.ndim = 1;
    b->tensor.shape[0] = numel;
    b->tensor.stride[0] = 1;
    if (copy_in && numel > 0 && !tdm_tensor_read(t, b->data, error)) {
        g_prefix_error(error, "staging %" G_GINT64_FORMAT " x %s from %s to host memory: ", numel,
                       tdm_dtype_name(t->dtype), t->device != NULL ? t->device->name : "?");
        tdm_comm_stage_release(s, &b->tensor);
        return NULL;
    }
    return &b->tensor;
}

gboolean tdm_comm_stage_copy_back(TdmTensor *host, TdmTensor *t, GError **error)
{
    if (tdm_tensor_numel(t) == 0) {
        return TRUE;
    }
    if (!tdm_tensor_write(t, tdm_tensor_data(host), error)) {
        g_prefix_error(error, "copying the result (%" G_GINT64_FORMAT " x %s) back to %s: ",
                       tdm_tensor_numel(t), tdm_dtype_name(t->dtype),
                       t->device != NULL ? t->device->name : "?");
        return FALSE;
    }
    return TRUE;
}

void tdm_comm_stage_release(TdmCommStage *s, TdmTensor *host)
{
    if (host == NULL) {
        return;
    }
    g_mutex_lock(&s->lock);
    for (guint i = 0; i < s->bufs->len; i++) {
        StageBuf *b = g_ptr_array_index(s->bufs, i);
        if (&b->tensor == host) {
            b->busy = FALSE;
            break;
        }
    }
    g_mutex_unlock(&s->lock);
}

guint tdm_comm_stage_buffer_count(TdmCommStage *s)
{
    g_mutex_lock(&s->lock);
    guint n = s->bufs->len;
    g_mutex_unlock(&s->lock);
    return n;
}
