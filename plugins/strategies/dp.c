/* SPDX-License-Identifier: MIT */
/* plugins/strategies/dp.c - DataParallel: one process, several devices.
 *
 * The model on the first device is the master; setup replicates it on each
 * other device (tdm_model_replicate) and starts one worker thread per extra
 * device. A step cuts the batch along dim 0 into one share per device (the
 * first shares one sample larger when it does not divide), copies each share
 * to its device, and runs forward, loss and backward of every replica at
 * once: the master on the calling thread, each replica on its worker. The
 * loss gradient of a replica is scaled by its share of the batch, so the sum
 * of the replicas' gradients is the mean gradient of the whole batch, as one
 * device would compute it. Outputs stay on their devices: only the
 * gradients travel, at an update. Each replica adds its loss and right
 * predictions up on its own device (no copy, no wait per step); read_stats
 * reads every replica's and adds them together.
 * At an update the replicas' gradient arenas are added into the master's,
 * the optimizer steps on the master, and the master's value arena (new
 * parameters, and the master's BN buffers, as PyTorch's DataParallel
 * broadcasts the first device's buffers) is copied back to every replica.
 * Between updates (gradient accumulation) each replica keeps accumulating
 * its own gradients.
 *
 * Every copy between devices (the batch shares, the gradients to the
 * master, the parameters back) is tdm_tensor_copy_across: peer to peer,
 * with no host wait, between devices of a backend that offers it (cuda,
 * ref), else through host memory, for which the host buffers are allocated
 * once, and only when some replica's device needs them.
 */
#include <string.h>

#include "strategies-util.h"

typedef struct _DpPriv DpPriv;

typedef struct {
    DpPriv *owner;
    TdmModel *model;   /* the master for replica 0 */
    TdmTensor *images; /* this replica's share (a view on the master) */
    TdmTensor *labels;
    SuLoss loss;      /* its statistics are on this replica's device */
    float weight;     /* share of the batch */
    GError *error;
    GThread *thread; /* NULL for replica 0 */
    guint64 seen;    /* last generation run */
} DpReplica;

struct _DpPriv {
    DpReplica *reps;
    guint n;
    float label_smoothing;
    float grad_scale; /* 1 / accumulate */
    gboolean has_buffers;
    GMutex lock;
    GCond cond;
    guint64 generation; /* bumped to start the workers on a step */
    guint running;      /* workers not done with this generation */
    gboolean quit;
    TdmTensor *staging; /* n_grads floats on the master device */
    float *host;        /* MAX(n_values, n_grads) floats; NULL when every copy is peer */
    guint8 *input_host; /* a share of images or labels, for staged copies */
    size_t input_host_bytes;
};

static gboolean replica_run(DpReplica *r)
{
    DpPriv *priv = r->owner;
    return su_forward_backward(r->model, &r->loss, r->images, r->labels, priv->label_smoothing,
                               r->weight * priv->grad_scale, &r->error);
}

static gpointer worker_main(gpointer data)
{
    DpReplica *r = data;
    DpPriv *priv = r->owner;
    for (;;) {
        g_mutex_lock(&priv->lock);
        while (!priv->quit && r->seen == priv->generation) {
            g_cond_wait(&priv->cond, &priv->lock);
        }
        if (priv->quit) {
            g_mutex_unlock(&priv->lock);
            return NULL;
        }
        r->seen = priv->generation;
        g_mutex_unlock(&priv->lock);

        replica_run(r);

        g_mutex_lock(&priv->lock);
        if (--priv->running == 0) {
            g_cond_broadcast(&priv->cond);
        }
        g_mutex_unlock(&priv->lock);
    }
}

/* Copy a share of the batch (on the master's device) into the slot `dst`
 * of a replica; a staged copy goes through input_host, grown as needed. */
static gboolean copy_input(DpPriv *priv, TdmTensor *src, TdmTensor *dst, GError **error)
{
    void *staging = NULL;
    if (!tdm_device_can_copy_peer(src->device, dst->device)) {
        size_t bytes = (size_t)tdm_tensor_numel(src) * tdm_dtype_size(src->dtype);
        if (bytes > priv->input_host_bytes) {
            priv->input_host = g_realloc(priv->input_host, bytes);
            priv->input_host_bytes = bytes;
        }
        staging = priv->input_host;
    }
    return tdm_tensor_copy_across(src, dst, staging, error);
}

/* The master's value arena into every replica's. */
static gboolean push_values(DpPriv *priv, GError **error)
{
    TdmModel *master = priv->reps[0].model;
    if (master->n_values == 0) {
        return TRUE;
    }
    for (guint i = 1; i < priv->n; i++) {
        if (!tdm_tensor_copy_across(master->value_arena, priv->reps[i].model->value_arena,
                                    priv->host, error)) {
            g_prefix_error(error,
                           "dp: copying the parameters to %s: ", priv->reps[i].model->device->name);
            return FALSE;
        }
    }
    return TRUE;
}

/* Add every replica's gradients into the master's and zero them. */
static gboolean reduce_grads(DpPriv *priv, GError **error)
{
    TdmModel *master = priv->reps[0].model;
    TdmDevice *dev = master->device;
    if (master->n_grads == 0) {
        return TRUE;
    }
    for (guint i = 1; i < priv->n; i++) {
        TdmModel *m = priv->reps[i].model;
        if (!tdm_tensor_copy_across(m->grad_arena, priv->staging, priv->host, error) ||
            !tdm_op_axpy(dev, 1.0f, priv->staging, master->grad_arena, error) ||
            !tdm_model_zero_grad(m, error)) {
            g_prefix_error(error, "dp: adding the gradients of %s: ", m->device->name);
            return FALSE;
        }
    }
    return TRUE;
}

/* Whether a copy between the master's device and some replica's goes
 * through host memory, so that the host buffers are needed. */
static gboolean needs_host(TdmDevice *master, GPtrArray *devices)
{
    for (guint i = 1; devices != NULL && i < devices->len; i++) {
        TdmDevice *d = g_ptr_array_index(devices, i);
        if (!tdm_device_can_copy_peer(master, d) || !tdm_device_can_copy_peer(d, master)) {
            return TRUE;
        }
    }
    return FALSE;
}

static void dp_teardown(TdmStrategy *s);

static gboolean dp_setup(TdmStrategy *s, GError **error)
{
    TdmModel *model = s->model;
    GPtrArray *devices = s->opts.devices;
    guint n = devices != NULL && devices->len > 0 ? devices->len : 1;
    if (devices != NULL && devices->len > 0 && g_ptr_array_index(devices, 0) != model->device) {
        TdmDevice *first = g_ptr_array_index(devices, 0);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "dp: the model lives on %s but the first device of the list is %s (the "
                    "first device holds the master copy)",
                    model->device->name, first->name);
        return FALSE;
    }
    for (guint i = 0; devices != NULL && i < devices->len; i++) {
        for (guint j = 0; j < i; j++) {
            if (g_ptr_array_index(devices, i) == g_ptr_array_index(devices, j)) {
                TdmDevice *d = g_ptr_array_index(devices, i);
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "dp: device %s is listed twice; each replica needs its own device "
                            "(the %s backend has %d; the ref backend makes N virtual ones with "
                            "TDM_REF_DEVICES=N)",
                            d->name, tdm_device_type(d), tdm_device_count(d));
                return FALSE;
            }
        }
    }
    DpPriv *priv = g_new0(DpPriv, 1);
    s->priv = priv;
    g_mutex_init(&priv->lock);
    g_cond_init(&priv->cond);
    priv->label_smoothing = s->opts.label_smoothing;
    priv->grad_scale = 1.0f / (float)s->opts.accumulate;
    priv->has_buffers = tdm_model_first_buffer(model) < model->n_values;
    priv->reps = g_new0(DpReplica, n);
    if (needs_host(model->device, devices)) {
        priv->host = g_new(float, MAX(MAX(model->n_values, model->n_grads), 1));
    }
    if (model->n_grads > 0) {
        int64_t shape[1] = {(int64_t)model->n_grads};
        priv->staging = tdm_tensor_new(model->device, TDM_DTYPE_F32, 1, shape, error);
        if (priv->staging == NULL) {
            dp_teardown(s);
            return FALSE;
        }
    }
    for (guint i = 0; i < n; i++) {
        DpReplica *r = &priv->reps[i];
        r->owner = priv;
        if (i == 0) {
            r->model = model;
        } else {
            TdmDevice *dev = g_ptr_array_index(devices, i);
            r->model = tdm_model_replicate(model, dev, error);
            if (r->model == NULL) {
                g_prefix_error(error, "dp: replica %u on %s: ", i, dev->name);
                dp_teardown(s);
                return FALSE;
            }
            tdm_model_set_training(r->model, TRUE);
        }
        priv->n = i + 1;
        if (!su_loss_init(&r->loss, r->model->device, error)) {
            g_prefix_error(error, "dp: replica %u on %s: ", i, r->model->device->name);
            dp_teardown(s);
            return FALSE;
        }
        if (i > 0) {
            r->images = tdm_tensor_new_empty(r->model->device, TDM_DTYPE_F32);
            r->labels = tdm_tensor_new_empty(r->model->device, TDM_DTYPE_I32);
            g_autofree char *name = g_strdup_printf("tdm-dp-%u", i);
            r->thread = g_thread_new(name, worker_main, r);
        }
    }
    tdm_model_set_training(model, TRUE);
    return TRUE;
}

static gboolean dp_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                              TdmStepResult *result, GError **error)
{
    DpPriv *priv = s->priv;
    const int64_t B = batch->size;
    /* Devices beyond the batch size get nothing to do this step. */
    const guint used = (guint)MIN((int64_t)priv->n, MAX(B, 1));
    gboolean ok = TRUE;

    int64_t start = 0;
    for (guint i = 0; i < used && ok; i++) {
        DpReplica *r = &priv->reps[i];
        int64_t len = B / used + ((int64_t)i < B % used ? 1 : 0);
        r->weight = B > 0 ? (float)len / (float)B : 0.0f;
        if (i == 0) {
            g_clear_pointer(&r->images, tdm_tensor_unref);
            g_clear_pointer(&r->labels, tdm_tensor_unref);
            ok = (r->images = tdm_tensor_narrow(batch->images, start, len, error)) != NULL &&
                 (r->labels = tdm_tensor_narrow(batch->labels, start, len, error)) != NULL;
        } else {
            TdmTensor *img = tdm_tensor_narrow(batch->images, start, len, error);
            TdmTensor *lab =
                img != NULL ? tdm_tensor_narrow(batch->labels, start, len, error) : NULL;
            ok = lab != NULL && copy_input(priv, img, r->images, error) &&
                 copy_input(priv, lab, r->labels, error);
            if (img != NULL) {
                tdm_tensor_unref(img);
            }
            if (lab != NULL) {
                tdm_tensor_unref(lab);
            }
            if (!ok) {
                g_prefix_error(error, "dp: copying the batch to %s: ", r->model->device->name);
            }
        }
        start += len;
    }
    if (!ok) {
        return FALSE;
    }

    g_mutex_lock(&priv->lock);
    priv->running = used - 1;
    priv->generation++;
    for (guint i = used; i < priv->n; i++) {
        priv->reps[i].seen = priv->generation; /* idle this step */
    }
    g_cond_broadcast(&priv->cond);
    g_mutex_unlock(&priv->lock);

    replica_run(&priv->reps[0]);

    g_mutex_lock(&priv->lock);
    while (priv->running > 0) {
        g_cond_wait(&priv->cond, &priv->lock);
    }
    g_mutex_unlock(&priv->lock);

    for (guint i = 0; i < used; i++) {
        DpReplica *r = &priv->reps[i];
        if (r->error != NULL) {
            if (ok) {
                g_propagate_prefixed_error(error, r->error, "dp: replica %u on %s: ", i,
                                           r->model->device->name);
            } else {
                g_error_free(r->error);
            }
            r->error = NULL;
            ok = FALSE;
        }
    }
    if (!ok) {
        return FALSE;
    }
    if (do_update && (!reduce_grads(priv, error) || !tdm_optimizer_step(s->optimizer, error) ||
                      !tdm_model_zero_grad(s->model, error))) {
        return FALSE;
    }
    if ((do_update || priv->has_buffers) && !push_values(priv, error)) {
        return FALSE;
    }
    result->count = B;
    su_set_comm_wait(result, 0.0);
    return TRUE;
}

/* Between steps the workers wait for the next generation: the replicas'
 * statistics are read here, on the calling thread. */
static gboolean dp_read_stats(TdmStrategy *s, TdmStepStats *stats, GError **error)
{
    DpPriv *priv = s->priv;
    for (guint i = 0; i < priv->n; i++) {
        DpReplica *r = &priv->reps[i];
        if (!su_stats_take(r->loss.stats, stats, error)) {
            g_prefix_error(error, "dp: replica %u on %s: ", i, r->model->device->name);
            return FALSE;
        }
    }
    return TRUE;
}

static void dp_teardown(TdmStrategy *s)
{
    DpPriv *priv = s->priv;
    if (priv == NULL) {
        return;
    }
    g_mutex_lock(&priv->lock);
    priv->quit = TRUE;
    g_cond_broadcast(&priv->cond);
    g_mutex_unlock(&priv->lock);
    for (guint i = 0; i < priv->n; i++) {
        DpReplica *r = &priv->reps[i];
        if (r->thread != NULL) {
            g_thread_join(r->thread);
        }
        su_loss_clear(&r->loss);
        g_clear_pointer(&r->images, tdm_tensor_unref);
        g_clear_pointer(&r->labels, tdm_tensor_unref);
        g_clear_error(&r->error);
        if (i > 0) {
            tdm_model_free(r->model);
        }
    }
    g_clear_pointer(&priv->staging, tdm_tensor_unref);
    g_free(priv->reps);
    g_free(priv->host);
    g_free(priv->input_host);
    g_mutex_clear(&priv->lock);
    g_cond_clear(&priv->cond);
    g_free(priv);
    s->priv = NULL;
}

static const TdmStrategyClass dp_class = {
    TDM_CLASS_HEADER(TDM_STRATEGY_IFACE_VERSION, TdmStrategyClass),
    .setup = dp_setup, .train_step = dp_train_step,
    .teardown = dp_teardown, .read_stats = dp_read_stats,
};

TDM_PLUGIN_INIT_FEATURE(dp_init, TDM_FEATURE_STRATEGY, "dp", 50, &dp_class,
                        "one process, several devices (--devices): replicas on "
                        "threads, batch scattered, gradients summed on the first",
                        NULL, NULL)

TDM_PLUGIN_DEFINE(dp, "MIT", "DataParallel training strategy", "tandem", dp_init)
