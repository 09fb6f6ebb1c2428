/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-vector.c - the C side of the cuda backend's own
 * elementwise, loss, dropout, vector, cast and optimizer ops.
 *
 * Each op checks what only the backend must (plain dense tensors; the
 * core's front ends have checked dtypes, shapes and devices), shapes its
 * outputs, and enqueues the kernels of cuda-ops.cu / cuda-loss.cu on the
 * device's compute stream without waiting, between cuda_op_begin and
 * cuda_op_end. Two ops return host values and therefore wait for the
 * stream by contract: softmax_xent and sum_squares (one small copy into
 * pinned memory, then cudaStreamSynchronize). softmax_xent_stats never
 * waits: see xent_run for how it reports a bad label.
 *
 * Each device gets, on first use, a little state of its own (CudaVec):
 * the loss kernels' CudaXentState in device memory, its pinned host
 * mirror, an event marking the mirror's last copy, and a scratch buffer
 * grown on demand (per-row losses, sum-of-squares partials). It comes from
 * the device's caching allocators, so a steady step allocates nothing. The
 * core never closes a device before the process ends; cuda_vector_close()
 * releases the state for a backend that does.
 */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "cuda-kernels.h"
#include "cuda.h"

/* cuda-elem.h numbers element types as TdmDType, so dtypes pass through. */
G_STATIC_ASSERT(CUDA_ELEM_F32 == (int)TDM_DTYPE_F32);
G_STATIC_ASSERT(CUDA_ELEM_I32 == (int)TDM_DTYPE_I32);
G_STATIC_ASSERT(CUDA_ELEM_I64 == (int)TDM_DTYPE_I64);
G_STATIC_ASSERT(CUDA_ELEM_U8 == (int)TDM_DTYPE_U8);
G_STATIC_ASSERT(CUDA_ELEM_BF16 == (int)TDM_DTYPE_BF16);
G_STATIC_ASSERT(CUDA_ELEM_F16 == (int)TDM_DTYPE_F16);
G_STATIC_ASSERT(TDM_XENT_STATS_LOSS_SUM == 0 && TDM_XENT_STATS_CORRECT == 1);
/* The loss state is shared with nvcc's compilation: eight 8-byte fields. */
G_STATIC_ASSERT(sizeof(CudaXentState) == 8 * 8);

/* What the host reads back, in pinned memory. */
typedef struct {
    CudaXentState xent;
    double sum_squares;
} CudaVecHost;

typedef struct {
    GMutex lock;            /* everything below */
    CudaXentState *state;   /* device */
    CudaVecHost *host;      /* pinned */
    cudaEvent_t mirrored;   /* recorded after the last copy of state into host->xent */
    gboolean mirror_queued; /* mirrored recorded and not yet seen complete */
    void *scratch;          /* device */
    size_t scratch_bytes;
} CudaVec;

static GMutex cuda_vec_table_lock;
static GHashTable *cuda_vec_table; /* TdmDevice * -> CudaVec * */

static void cuda_vec_free(TdmDevice *dev, CudaVec *v)
{
    if (v->mirrored != NULL) {
        cudaEventDestroy(v->mirrored);
    }
    if (v->state != NULL) {
        cuda_free(dev, v->state, sizeof(CudaXentState));
    }
    if (v->host != NULL) {
        cuda_host_free(dev, v->host);
    }
    if (v->scratch != NULL) {
        cuda_free(dev, v->scratch, v->scratch_bytes);
    }
    g_mutex_clear(&v->lock);
    g_free(v);
}

static CudaVec *cuda_vec_new(TdmDevice *dev, const char *op, GError **error)
{
    CudaDevice *cd = cuda_dev(dev);
    CudaVec *v = g_new0(CudaVec, 1);
    g_mutex_init(&v->lock);
    v->state = cuda_alloc(dev, sizeof(CudaXentState), error);
    if (v->state == NULL) {
        goto fail;
    }
    v->host = cuda_host_alloc(dev, sizeof(CudaVecHost), error);
    if (v->host == NULL) {
        goto fail;
    }
    /* every byte 0xff: no bad row anywhere (CudaXentState) */
    memset(v->host, 0xff, sizeof(CudaVecHost));
    if (!cuda_check(dev, cudaMemsetAsync(v->state, 0xff, sizeof(CudaXentState), cd->compute), op,
                    "cudaMemsetAsync (loss state)", error) ||
        !cuda_check(dev, cudaEventCreateWithFlags(&v->mirrored, cudaEventDisableTiming), op,
                    "cudaEventCreateWithFlags", error)) {
        goto fail;
    }
    return v;
fail:
    cuda_vec_free(dev, v);
    return NULL;
}

/* The device's state, made on first use. */
static CudaVec *cuda_vec_get(TdmDevice *dev, const char *op, GError **error)
{
    g_mutex_lock(&cuda_vec_table_lock);
    if (cuda_vec_table == NULL) {
        cuda_vec_table = g_hash_table_new(g_direct_hash, g_direct_equal);
    }
    CudaVec *v = g_hash_table_lookup(cuda_vec_table, dev);
    if (v == NULL) {
        v = cuda_vec_new(dev, op, error);
        if (v != NULL) {
            g_hash_table_insert(cuda_vec_table, dev, v);
        }
    }
    g_mutex_unlock(&cuda_vec_table_lock);
    return v;
}

void cuda_vector_close(TdmDevice *dev)
{
    g_mutex_lock(&cuda_vec_table_lock);
    CudaVec *v = cuda_vec_table != NULL ? g_hash_table_lookup(cuda_vec_table, dev) : NULL;
    if (v != NULL) {
        g_hash_table_remove(cuda_vec_table, dev);
    }
    g_mutex_unlock(&cuda_vec_table_lock);
    if (v != NULL) {
        /* the stream may still use the state and scratch; a failure here
         * leaves nothing better to do than release them */
        (void)cudaStreamSynchronize(cuda_dev(dev)->compute);
        cuda_vec_free(dev, v);
    }
}

/* At least nbytes of scratch (caller holds v->lock). A smaller buffer is
 * handed back to the allocator at once: the compute stream orders its
 * last use before any later one. */
static void *cuda_vec_scratch(TdmDevice *dev, CudaVec *v, size_t nbytes, GError **error)
{
    if (v->scratch_bytes < nbytes) {
        size_t want = MAX(nbytes, (size_t)4096);
        void *p = cuda_alloc(dev, want, error);
        if (p == NULL) {
            return NULL;
        }
        if (v->scratch != NULL) {
            cuda_free(dev, v->scratch, v->scratch_bytes);
        }
        v->scratch = p;
        v->scratch_bytes = want;
    }
    return v->scratch;
}

/* ---- elementwise ---- */

gboolean cuda_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                           GError **error)
{
    const char *op = "relu_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok =
        cuda_check_plain(op, "x", x, error) &&
        cuda_ensure_out(y, TDM_DTYPE_F32, x->ndim, x->shape, error) &&
        cuda_launched(
            dev, cuda_k_relu(cuda_dev(dev)->compute, cuda_f32(x), cuda_f32(y), tdm_tensor_numel(x)),
            op, "cuda_k_relu", x, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                            TdmTensor *dx, GError **error)
{
    const char *op = "relu_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok =
        cuda_check_plain(op, "y", y, error) && cuda_check_plain(op, "dy", dy, error) &&
        cuda_ensure_out(dx, TDM_DTYPE_F32, y->ndim, y->shape, error) &&
        cuda_launched(dev,
                      cuda_k_relu_backward(cuda_dev(dev)->compute, cuda_f32(y), cuda_f32(dy),
                                           cuda_f32(dx), tdm_tensor_numel(y)),
                      op, "cuda_k_relu_backward", y, error);
    return cuda_op_end(dev, op, ok, error);
}

static gboolean add_run(TdmDevice *dev, const char *op, gboolean relu, TdmTensor *a, TdmTensor *b,
                        TdmTensor *y, GError **error)
{
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "a", a, error) && cuda_check_plain(op, "b", b, error) &&
                  cuda_ensure_out(y, TDM_DTYPE_F32, a->ndim, a->shape, error);
    if (ok) {
        cudaStream_t s = cuda_dev(dev)->compute;
        int64_t n = tdm_tensor_numel(a);
        ok = relu ? cuda_launched(dev, cuda_k_add_relu(s, cuda_f32(a), cuda_f32(b), cuda_f32(y), n),
                                  op, "cuda_k_add_relu", a, error)
                  : cuda_launched(dev, cuda_k_add(s, cuda_f32(a), cuda_f32(b), cuda_f32(y), n), op,
                                  "cuda_k_add", a, error);
    }
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                  GError **error)
{
    return add_run(dev, "add", FALSE, a, b, y, error);
}

gboolean cuda_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                       GError **error)
{
    return add_run(dev, "add_relu", TRUE, a, b, y, error);
}

/* ---- loss ---- */

/* A bad label that softmax_xent_stats found on the device, once the
 * mirror holds it (caller holds v->lock and knows no copy into the mirror
 * is pending): an error, and the record cleared on both sides so that it
 * is reported once. */
static gboolean report_deferred(TdmDevice *dev, CudaVec *v, const char *op, gboolean this_call,
                                GError **error)
{
    CudaXentState *m = &v->host->xent;
    if (m->first_bad_row < 0) {
        return TRUE;
    }
    long long row = m->first_bad_row, label = m->first_bad_label, k = m->first_bad_classes;
    m->first_bad_row = m->first_bad_label = m->first_bad_classes = -1;
    if (!cuda_check(dev,
                    cudaMemsetAsync(&v->state->first_bad_row, 0xff,
                                    sizeof(CudaXentState) - offsetof(CudaXentState, first_bad_row),
                                    cuda_dev(dev)->compute),
                    op, "cudaMemsetAsync (loss state)", error)) {
        return FALSE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                "cuda %s on %s: label %lld of row %lld is outside [0, %lld) (%s)", op, dev->name,
                label, row, k,
                this_call ? "the statistics were left untouched"
                          : "found on the device by an earlier softmax_xent_stats call, which "
                            "left the statistics untouched");
    return FALSE;
}

/* softmax_xent (stats NULL: waits, fills *loss and *correct) and
 * softmax_xent_stats (stats set: adds to stats, never waits).
 *
 * A bad label: ref reports it at once. softmax_xent does too, after its
 * wait. softmax_xent_stats cannot without waiting for the device, which it
 * exists to avoid: its kernel leaves the statistics untouched for that
 * batch and records the first bad label in the device state; each call
 * then queues a copy of the state into pinned memory and records an event,
 * and the NEXT call (softmax_xent_stats or softmax_xent) that finds the
 * event complete reports the label as an error naming its row. A training
 * loop thus stops one step after a bad batch at the latest (usually at
 * the step after the copy lands); cuda_vector_check_deferred() lets a
 * synchronisation point report it too. Under TDM_CUDA_SYNC=1, where every
 * op waits anyway, the call itself waits for the copy and reports its own
 * bad label, as ref does. */
static gboolean xent_run(TdmDevice *dev, const char *op, TdmTensor *logits, TdmTensor *labels,
                         float label_smoothing, TdmTensor *dlogits, TdmTensor *stats, float *loss,
                         int64_t *correct, GError **error)
{
    if (!cuda_check_plain(op, "logits", logits, error) ||
        !cuda_check_plain(op, "labels", labels, error) ||
        (stats != NULL && !cuda_check_plain(op, "stats", stats, error))) {
        return FALSE;
    }
    const int64_t n = logits->shape[0], k = logits->shape[1];
    if (dlogits != NULL && !cuda_ensure_out(dlogits, TDM_DTYPE_F32, 2, logits->shape, error)) {
        return FALSE;
    }
    CudaVec *v = cuda_vec_get(dev, op, error);
    if (v == NULL) {
        return FALSE;
    }
    cudaStream_t s = cuda_dev(dev)->compute;
    gboolean ok = TRUE;
    g_mutex_lock(&v->lock);
    if (v->mirror_queued) {
        cudaError_t rc = cudaEventQuery(v->mirrored);
        if (rc == cudaSuccess) {
            v->mirror_queued = FALSE;
            ok = report_deferred(dev, v, op, FALSE, error);
        } else if (rc == cudaErrorNotReady) {
            (void)cudaGetLastError(); /* not an error: clear it for cuda_op_end */
        } else {
            ok = cuda_check(dev, rc, op, "cudaEventQuery (loss state)", error);
        }
    }
    void *scratch =
        ok ? cuda_vec_scratch(dev, v, (size_t)cuda_k_softmax_xent_scratch(n), error) : NULL;
    ok = scratch != NULL &&
         cuda_launched(dev,
                       cuda_k_softmax_xent(s, cuda_f32(logits), tdm_tensor_data(labels),
                                           labels->dtype == TDM_DTYPE_I64, n, k, label_smoothing,
                                           dlogits != NULL ? cuda_f32(dlogits) : NULL, scratch,
                                           v->state, stats != NULL ? cuda_f32(stats) : NULL),
                       op, "cuda_k_softmax_xent", logits, error) &&
         cuda_check(dev,
                    cudaMemcpyAsync(&v->host->xent, v->state, sizeof(CudaXentState),
                                    cudaMemcpyDeviceToHost, s),
                    op, "cudaMemcpyAsync (loss state)", error);
    if (ok && stats != NULL && cuda_dev(dev)->sync_each_op) {
        ok = cuda_check(dev, cudaStreamSynchronize(s), op, "cudaStreamSynchronize", error) &&
             report_deferred(dev, v, op, TRUE, error);
        v->mirror_queued = FALSE;
    } else if (ok && stats != NULL) {
        ok = cuda_check(dev, cudaEventRecord(v->mirrored, s), op, "cudaEventRecord", error);
        v->mirror_queued = ok;
    } else if (ok) {
        ok = cuda_check(dev, cudaStreamSynchronize(s), op, "cudaStreamSynchronize", error);
        v->mirror_queued = FALSE;
    }
    if (ok && stats == NULL) {
        const CudaXentState *r = &v->host->xent;
        if (r->bad_row >= 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "cuda %s on %s: label %lld of row %lld is outside [0, %" G_GINT64_FORMAT
                        ")",
                        op, dev->name, r->bad_label, r->bad_row, k);
            ok = FALSE;
        } else {
            ok = report_deferred(dev, v, op, FALSE, error);
        }
        if (ok && loss != NULL) {
            *loss = cuda_elem_xent_mean(r->total, n);
        }
        if (ok && correct != NULL) {
            *correct = (int64_t)r->hits;
        }
    }
    g_mutex_unlock(&v->lock);
    return ok;
}

gboolean cuda_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits, TdmTensor *labels,
                           float label_smoothing, float *loss, TdmTensor *dlogits, int64_t *correct,
                           GError **error)
{
    const char *op = "softmax_xent";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok =
        xent_run(dev, op, logits, labels, label_smoothing, dlogits, NULL, loss, correct, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                 TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                 TdmTensor *stats, GError **error)
{
    const char *op = "softmax_xent_stats";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok =
        xent_run(dev, op, logits, labels, label_smoothing, dlogits, stats, NULL, NULL, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_vector_check_deferred(TdmDevice *dev, GError **error)
{
    g_mutex_lock(&cuda_vec_table_lock);
    CudaVec *v = cuda_vec_table != NULL ? g_hash_table_lookup(cuda_vec_table, dev) : NULL;
    g_mutex_unlock(&cuda_vec_table_lock);
    if (v == NULL) {
        return TRUE;
    }
    const char *op = "softmax_xent_stats";
    g_mutex_lock(&v->lock);
    gboolean ok = TRUE;
    if (v->mirror_queued) {
        ok = cuda_check(dev, cudaEventSynchronize(v->mirrored), op, "cudaEventSynchronize", error);
        v->mirror_queued = !ok;
    }
    ok = ok && report_deferred(dev, v, op, FALSE, error);
    g_mutex_unlock(&v->lock);
    return ok;
}

/* ---- dropout ---- */

gboolean cuda_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                              TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error)
{
    const char *op = "dropout_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "x", x, error) &&
                  cuda_ensure_out(mask, TDM_DTYPE_U8, x->ndim, x->shape, error) &&
                  cuda_ensure_out(y, TDM_DTYPE_F32, x->ndim, x->shape, error) &&
                  cuda_launched(dev,
                                cuda_k_dropout_forward(cuda_dev(dev)->compute, cuda_f32(x),
                                                       tdm_tensor_data(mask), cuda_f32(y),
                                                       tdm_tensor_numel(x), p, seed),
                                op, "cuda_k_dropout_forward", x, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                               TdmTensor *dy, TdmTensor *dx, GError **error)
{
    const char *op = "dropout_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok =
        cuda_check_plain(op, "mask", mask, error) && cuda_check_plain(op, "dy", dy, error) &&
        cuda_ensure_out(dx, TDM_DTYPE_F32, dy->ndim, dy->shape, error) &&
        cuda_launched(dev,
                      cuda_k_dropout_backward(cuda_dev(dev)->compute, tdm_tensor_data(mask),
                                              cuda_f32(dy), cuda_f32(dx), tdm_tensor_numel(dy), p),
                      op, "cuda_k_dropout_backward", dy, error);
    return cuda_op_end(dev, op, ok, error);
}

/* ---- vector ops (plain contiguous tensors, checked by the front ends) ---- */

/* x = value (fill) or x *= value (scale): one tensor, one kernel. */
static gboolean fill_or_scale(TdmDevice *dev, const char *op, TdmTensor *x, float value,
                              gboolean scale, GError **error)
{
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    cudaStream_t s = cuda_dev(dev)->compute;
    int64_t n = tdm_tensor_numel(x);
    gboolean ok = cuda_check_plain(op, "x", x, error) &&
                  cuda_launched(dev,
                                scale ? cuda_k_scale(s, cuda_f32(x), value, n)
                                      : cuda_k_fill(s, cuda_f32(x), value, n),
                                op, scale ? "cuda_k_scale" : "cuda_k_fill", x, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error)
{
    return fill_or_scale(dev, "fill", x, value, FALSE, error);
}

/* ref copies with memmove; cudaMemcpyAsync wants disjoint ranges, so
 * overlapping views go through scratch. */
static gboolean copy_run(TdmDevice *dev, const char *op, TdmTensor *src, TdmTensor *dst,
                         GError **error)
{
    const char *s = tdm_tensor_data(src);
    char *d = tdm_tensor_data(dst);
    size_t nbytes = (size_t)tdm_tensor_numel(src) * tdm_dtype_size(src->dtype);
    cudaStream_t stream = cuda_dev(dev)->compute;
    if (nbytes == 0 || s == d) {
        return TRUE;
    }
    if (s + nbytes <= d || d + nbytes <= s) {
        return cuda_check(dev, cudaMemcpyAsync(d, s, nbytes, cudaMemcpyDeviceToDevice, stream), op,
                          "cudaMemcpyAsync", error);
    }
    CudaVec *v = cuda_vec_get(dev, op, error);
    if (v == NULL) {
        return FALSE;
    }
    g_mutex_lock(&v->lock);
    void *tmp = cuda_vec_scratch(dev, v, nbytes, error);
    gboolean ok = tmp != NULL &&
                  cuda_check(dev, cudaMemcpyAsync(tmp, s, nbytes, cudaMemcpyDeviceToDevice, stream),
                             op, "cudaMemcpyAsync (to scratch)", error) &&
                  cuda_check(dev, cudaMemcpyAsync(d, tmp, nbytes, cudaMemcpyDeviceToDevice, stream),
                             op, "cudaMemcpyAsync (from scratch)", error);
    g_mutex_unlock(&v->lock);
    return ok;
}

gboolean cuda_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error)
{
    const char *op = "copy";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "src", src, error) &&
                  cuda_check_plain(op, "dst", dst, error) && copy_run(dev, op, src, dst, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error)
{
    return fill_or_scale(dev, "scale", x, alpha, TRUE, error);
}

gboolean cuda_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    const char *op = "axpy";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "x", x, error) && cuda_check_plain(op, "y", y, error) &&
                  cuda_launched(dev,
                                cuda_k_axpy(cuda_dev(dev)->compute, alpha, cuda_f32(x), cuda_f32(y),
                                            tdm_tensor_numel(x)),
                                op, "cuda_k_axpy", x, error);
    return cuda_op_end(dev, op, ok, error);
}

/* Returns a host double, so it waits for the compute stream. */
static gboolean sum_squares_run(TdmDevice *dev, const char *op, TdmTensor *x, double *result,
                                GError **error)
{
    CudaVec *v = cuda_vec_get(dev, op, error);
    if (v == NULL) {
        return FALSE;
    }
    cudaStream_t s = cuda_dev(dev)->compute;
    int64_t n = tdm_tensor_numel(x);
    int blocks = cuda_k_sum_squares_blocks(n);
    g_mutex_lock(&v->lock);
    double *parts = cuda_vec_scratch(dev, v, (size_t)(blocks + 1) * sizeof(double), error);
    gboolean ok = parts != NULL &&
                  cuda_launched(dev, cuda_k_sum_squares(s, cuda_f32(x), n, parts, parts + blocks),
                                op, "cuda_k_sum_squares", x, error) &&
                  cuda_check(dev,
                             cudaMemcpyAsync(&v->host->sum_squares, parts + blocks, sizeof(double),
                                             cudaMemcpyDeviceToHost, s),
                             op, "cudaMemcpyAsync", error) &&
                  cuda_check(dev, cudaStreamSynchronize(s), op, "cudaStreamSynchronize", error);
    if (ok && result != NULL) {
        *result = v->host->sum_squares;
    }
    g_mutex_unlock(&v->lock);
    return ok;
}

gboolean cuda_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    const char *op = "sum_squares";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "x", x, error) && sum_squares_run(dev, op, x, result, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                   GError **error)
{
    const char *op = "cast";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    /* An empty slot is shaped like src, in its own dtype. */
    gboolean ok =
        cuda_check_plain(op, "src", src, error) &&
        (dst->storage != NULL || cuda_ensure_out(dst, dst->dtype, src->ndim, src->shape, error)) &&
        cuda_check_plain(op, "dst", dst, error) &&
        cuda_launched(dev,
                      cuda_k_cast(cuda_dev(dev)->compute, tdm_tensor_data(src), (int)src->dtype,
                                  tdm_tensor_data(dst), (int)dst->dtype, tdm_tensor_numel(src),
                                  normalize_u8 ? 1 : 0),
                      op, "cuda_k_cast", src, error);
    return cuda_op_end(dev, op, ok, error);
}

/* ---- optimizer updates (arguments checked by the front ends) ---- */

static gboolean sgd_run(TdmDevice *dev, const char *op, const TdmSgdParams *hp, TdmTensor *param,
                        TdmTensor *grad, TdmTensor *momentum_buf, gboolean zero, GError **error)
{
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaElemSgd e = cuda_elem_sgd_params(hp->lr, hp->momentum, hp->dampening, hp->weight_decay,
                                         hp->nesterov, hp->first_step);
    gboolean ok =
        cuda_check_plain(op, "param", param, error) && cuda_check_plain(op, "grad", grad, error) &&
        (!e.use_buf || cuda_check_plain(op, "momentum_buf", momentum_buf, error)) &&
        cuda_launched(dev,
                      cuda_k_sgd(cuda_dev(dev)->compute, &e, cuda_f32(param), cuda_f32(grad),
                                 e.use_buf ? cuda_f32(momentum_buf) : NULL, tdm_tensor_numel(param),
                                 zero ? 1 : 0),
                      op, "cuda_k_sgd", param, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                         TdmTensor *momentum_buf, GError **error)
{
    return sgd_run(dev, "sgd_update", hp, param, grad, momentum_buf, FALSE, error);
}

gboolean cuda_sgd_update_zero_grad(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                   TdmTensor *grad, TdmTensor *momentum_buf, GError **error)
{
    return sgd_run(dev, "sgd_update_zero_grad", hp, param, grad, momentum_buf, TRUE, error);
}

static gboolean adamw_run(TdmDevice *dev, const char *op, const TdmAdamWParams *hp,
                          TdmTensor *param, TdmTensor *grad, TdmTensor *exp_avg,
                          TdmTensor *exp_avg_sq, gboolean zero, GError **error)
{
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaElemAdamW e =
        cuda_elem_adamw_params(hp->lr, hp->beta1, hp->beta2, hp->eps, hp->weight_decay, hp->step);
    gboolean ok =
        cuda_check_plain(op, "param", param, error) && cuda_check_plain(op, "grad", grad, error) &&
        cuda_check_plain(op, "exp_avg", exp_avg, error) &&
        cuda_check_plain(op, "exp_avg_sq", exp_avg_sq, error) &&
        cuda_launched(dev,
                      cuda_k_adamw(cuda_dev(dev)->compute, &e, cuda_f32(param), cuda_f32(grad),
                                   cuda_f32(exp_avg), cuda_f32(exp_avg_sq), tdm_tensor_numel(param),
                                   zero ? 1 : 0),
                      op, "cuda_k_adamw", param, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                           TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                           GError **error)
{
    return adamw_run(dev, "adamw_update", hp, param, grad, exp_avg, exp_avg_sq, FALSE, error);
}

gboolean cuda_adamw_update_zero_grad(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                     TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                     GError **error)
{
    return adamw_run(dev, "adamw_update_zero_grad", hp, param, grad, exp_avg, exp_avg_sq, TRUE,
                     error);
}
