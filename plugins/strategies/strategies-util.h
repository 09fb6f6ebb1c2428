/* SPDX-License-Identifier: MIT */
/* plugins/strategies/strategies-util.h - what the built-in strategy
 * plugins share beyond the core's helpers for strategies (the default
 * step, arena slices, the broadcast and average of the value arena:
 * <tandem/strategy.h>): one replica's forward + loss + backward with its
 * own loss statistics (dp drives several replicas), the broadcast of the
 * buffers overlapped with the next step (ddp, zero1), and the report of
 * the time a step spent waiting on communication.
 *
 * Each strategy is its own plugin (libtdm-<name>.so), so these helpers are
 * static inline and compiled into each of them; nothing here is exported.
 */
#ifndef TDM_STRATEGIES_UTIL_H
#define TDM_STRATEGIES_UTIL_H

#include <tandem/comm.h>
#include <tandem/ops.h>
#include <tandem/plugin.h>
#include <tandem/strategy.h>

/* What a replica keeps across steps for its loss: the slot the gradient
 * of the loss w.r.t. the logits goes into, the loss op's cache, and the
 * loss statistics it adds up on its device between two reads (the class's
 * read_stats): f32 [TDM_XENT_STATS_LEN], see su_stats_take. */
typedef struct {
    TdmDevice *device; /* NULL until su_loss_init */
    TdmTensor *dlogits;
    TdmOpCache *cache;
    TdmTensor *stats;
} SuLoss;

/* The loss statistics, zero (transfer full). */
static inline TdmTensor *su_stats_new(TdmDevice *dev, GError **error)
{
    int64_t shape[1] = {TDM_XENT_STATS_LEN};
    TdmTensor *stats = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, shape, error);
    if (stats != NULL && !tdm_op_fill(dev, stats, 0.0f, error)) {
        tdm_tensor_unref(stats);
        return NULL;
    }
    return stats;
}

/* On failure `l` still wants su_loss_clear. */
static inline gboolean su_loss_init(SuLoss *l, TdmDevice *dev, GError **error)
{
    l->device = dev;
    l->cache = NULL;
    l->dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    l->stats = su_stats_new(dev, error);
    return l->stats != NULL;
}

static inline void su_loss_clear(SuLoss *l)
{
    if (l->device != NULL) {
        tdm_op_cache_clear(l->device, &l->cache);
    }
    g_clear_pointer(&l->dlogits, tdm_tensor_unref);
    g_clear_pointer(&l->stats, tdm_tensor_unref);
}

/* Forward `images` through `model`, softmax cross-entropy against `labels`
 * (the gradient of the mean loss goes into l->dlogits; the batch's loss
 * sum and correct count are added to l->stats), scale that gradient by
 * `grad_scale` (1/accumulate, times a replica's share of the batch for dp)
 * and run backward, which accumulates into the grad arena and fires the
 * grad-ready hook. Nothing waits for the device. */
static inline gboolean su_forward_backward(TdmModel *model, SuLoss *l, TdmTensor *images,
                                           TdmTensor *labels, float label_smoothing,
                                           float grad_scale, GError **error)
{
    TdmDevice *dev = model->device;
    TdmTensor *logits = NULL;
    if (!tdm_model_forward(model, images, &logits, error) ||
        !tdm_op_softmax_xent_stats(dev, &l->cache, logits, labels, label_smoothing, l->dlogits,
                                   l->stats, error)) {
        return FALSE;
    }
    if (grad_scale != 1.0f && !tdm_op_scale(dev, l->dlogits, grad_scale, error)) {
        return FALSE;
    }
    return tdm_model_backward(model, l->dlogits, error);
}

/* Adds `stats` to out->loss_sum and out->correct and zeroes it: the one
 * wait for the device of a read. The count is a whole number in f32, exact
 * while below 2^24 (the trainer reads long before). */
static inline gboolean su_stats_take(TdmTensor *stats, TdmStepStats *out, GError **error)
{
    float acc[TDM_XENT_STATS_LEN];
    if (!tdm_tensor_read(stats, acc, error) || !tdm_op_fill(stats->device, stats, 0.0f, error)) {
        return FALSE;
    }
    out->loss_sum += acc[TDM_XENT_STATS_LOSS_SUM];
    out->correct += (int64_t)acc[TDM_XENT_STATS_CORRECT];
    return TRUE;
}

/* Buffers (BN running statistics) follow rank 0's, as PyTorch's
 * broadcast_buffers=True makes them: every forward starts from rank 0's
 * buffers. The broadcast is started at the end of a step, right after the
 * ranks met in the gradient reduction (so it finds them in step and costs
 * no extra wait for a slow rank), and waited for before the next forward;
 * nothing touches the buffers in between. Setup's broadcast of the whole
 * value arena covers the first step. */
typedef struct {
    TdmTensor *view;   /* [first buffer, n_values) of the value arena; NULL = none */
    TdmCommWork *work; /* broadcast in flight */
} SuBuffers;

static inline gboolean su_buffers_init(SuBuffers *b, TdmComm *comm, TdmModel *model, GError **error)
{
    size_t first = tdm_model_first_buffer(model);
    b->work = NULL;
    b->view = NULL;
    if (comm->world == 1 || first >= model->n_values) {
        return TRUE;
    }
    b->view = tdm_arena_slice(model->value_arena, first, model->n_values - first, error);
    return b->view != NULL;
}

/* Before a forward: wait for the broadcast started after the last step;
 * the time waited is added to *waited. */
static inline gboolean su_buffers_wait(SuBuffers *b, TdmComm *comm, double *waited, GError **error)
{
    if (b->work == NULL) {
        return TRUE;
    }
    double t0 = tdm_time_now();
    TdmCommWork *w = b->work;
    b->work = NULL;
    gboolean ok = tdm_comm_wait(comm, w, error);
    *waited += tdm_time_now() - t0;
    if (!ok) {
        g_prefix_error(error, "broadcasting the buffers from rank 0: ");
    }
    return ok;
}

/* After a step: start the broadcast the next forward waits for. */
static inline gboolean su_buffers_start(SuBuffers *b, TdmComm *comm, GError **error)
{
    if (b->view == NULL) {
        return TRUE;
    }
    b->work = tdm_comm_broadcast_async(comm, b->view, 0, error);
    if (b->work == NULL) {
        g_prefix_error(error, "broadcasting the buffers from rank 0: ");
    }
    return b->work != NULL;
}

static inline void su_buffers_clear(SuBuffers *b, TdmComm *comm)
{
    if (b->work != NULL) {
        tdm_comm_wait(comm, b->work, NULL);
        b->work = NULL;
    }
    if (b->view != NULL) {
        tdm_tensor_unref(b->view);
        b->view = NULL;
    }
}

/* The time a step waited on communication (the trainer logs it). */
static inline void su_set_comm_wait(TdmStepResult *result, double seconds)
{
    result->comm_wait_s = seconds > 0 ? seconds : 0.0;
}

#endif /* TDM_STRATEGIES_UTIL_H */
