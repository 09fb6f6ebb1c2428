/* SPDX-License-Identifier: MIT */
/* plugins/strategies/ddp.c - DistributedDataParallel: one process per
 * device, each with a whole model, gradients averaged across processes.
 *
 * Setup broadcasts rank 0's value arena (parameters and buffers) and cuts
 * the gradient arena into buckets: contiguous slices in reverse parameter
 * order, since backward produces the last layer's gradients first. The
 * first bucket is small (about 1 MiB) so that communication starts early;
 * the others hold about 25 MiB (the bucket-mb parameter, "ddp
 * bucket-mb=50", which also caps the first). A parameter that would
 * overflow the current bucket starts the next one (one larger than a
 * bucket gets its own), so the small last layers are reduced while the
 * large ones are still in backward. A bucket
 * never spans a frozen parameter, whose gradient is neither computed nor
 * reduced. During backward the model's grad-ready hook counts each bucket's
 * parameters down and, when a bucket is complete, starts its asynchronous
 * all-reduce (AVG) in place, while backward goes on with earlier layers. Buckets are started
 * strictly in index order, so every rank issues the same collectives in the
 * same order even if hooks fired in another order. After backward the step
 * waits for all of them (that wait is the communication time the step could
 * not hide, reported to the trainer), then runs the optimizer.
 *
 * Micro-batches that do not end an accumulation group (do_update FALSE)
 * skip communication entirely, as PyTorch's no_sync(): the gradients just
 * accumulate locally, and the last micro-batch reduces the sum. A trainable
 * parameter whose hook did not fire in a synchronising backward would leave
 * its bucket unreduced on this rank and hang the others, so the step fails
 * naming the parameters. Buffers (BN running statistics) follow rank 0's
 * (SuBuffers in strategies-util.h: PyTorch's broadcast_buffers=True), so
 * all ranks evaluate and save the same statistics.
 *
 * Test hook (compiled in with configure --enable-test-hooks only):
 * TDM_TEST_SKIP_COLLECTIVE=RANK:STEP makes RANK skip the all-reduce of its
 * first bucket at synchronising step STEP (1-based), to check that a rank
 * that skips a collective is caught and named.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "strategies-util.h"

#define DDP_FIRST_BUCKET_BYTES (1u << 20)
/* An error lists at most this many of the parameters that were not ready. */
#define DDP_MAX_NAMED_PARAMS 20

typedef struct {
    size_t start, count; /* elements of the grad arena */
    TdmTensor *view;     /* that slice */
    guint n_params;
    guint pending;     /* parameters not ready yet in this backward */
    TdmCommWork *work; /* in flight */
} DdpBucket;

typedef struct {
    TdmComm *comm;
    SuBuffers buffers;    /* BN running stats, following rank 0's */
    GPtrArray *trainable; /* TdmParam *, the ones reduced */
    GHashTable *index_of; /* TdmParam * -> its index in trainable + 1 */
    guint *bucket_of;     /* trainable index -> bucket */
    gboolean *ready;      /* trainable index -> hook fired in this backward */
    DdpBucket *buckets;
    guint n_buckets;
    guint next_launch;  /* buckets start in index order */
    gboolean syncing;   /* this backward reduces */
    GError *hook_error; /* first failure inside the hook */
    guint64 sync_steps; /* synchronising steps so far */
    int skip_rank;      /* test hook, -1 = off */
    guint64 skip_step;
} DdpPriv;

static void ddp_launch(DdpPriv *priv, DdpBucket *b, guint index)
{
    if (priv->hook_error != NULL) {
        return;
    }
#ifdef TDM_ENABLE_TEST_HOOKS
    if (priv->skip_rank == priv->comm->rank && priv->sync_steps == priv->skip_step && index == 0) {
        fprintf(stderr,
                "ddp: TDM_TEST_SKIP_COLLECTIVE: rank %d skips the all-reduce of bucket 0 "
                "at step %" G_GUINT64_FORMAT "\n",
                priv->comm->rank, priv->sync_steps);
        return;
    }
#endif
    b->work = tdm_comm_allreduce_async(priv->comm, b->view, TDM_REDUCE_AVG, &priv->hook_error);
    if (priv->hook_error != NULL) {
        g_prefix_error(&priv->hook_error, "ddp: all-reduce of gradient bucket %u: ", index);
    }
}

/* Start every complete bucket whose predecessors have started. */
static void ddp_launch_ready(DdpPriv *priv)
{
    while (priv->next_launch < priv->n_buckets && priv->buckets[priv->next_launch].pending == 0) {
        ddp_launch(priv, &priv->buckets[priv->next_launch], priv->next_launch);
        priv->next_launch++;
    }
}

static void ddp_grad_ready(TdmModel *model, TdmParam *param, gpointer user_data)
{
    (void)model;
    DdpPriv *priv = user_data;
    if (!priv->syncing) {
        return;
    }
    guint i = GPOINTER_TO_UINT(g_hash_table_lookup(priv->index_of, param));
    if (i == 0 || priv->ready[i - 1]) {
        return; /* not reduced, or reported twice */
    }
    i--;
    priv->ready[i] = TRUE;
    DdpBucket *b = &priv->buckets[priv->bucket_of[i]];
    if (--b->pending == 0) {
        ddp_launch_ready(priv);
    }
}

static double bucket_cap_bytes(const TdmStrategy *s)
{
    return tdm_params_get_float(s->params, "bucket-mb") * 1024.0 * 1024.0;
}

/* Buckets over the trainable parameters in reverse order: a new bucket
 * starts when the next parameter would overflow the current one or is not
 * its neighbour in the arena (a frozen parameter lies between). */
static gboolean ddp_make_buckets(DdpPriv *priv, TdmModel *model, double cap, GError **error)
{
    GPtrArray *tr = priv->trainable;
    priv->buckets = g_new0(DdpBucket, MAX(tr->len, 1));
    priv->bucket_of = g_new0(guint, MAX(tr->len, 1));
    priv->ready = g_new0(gboolean, MAX(tr->len, 1));
    DdpBucket *cur = NULL;
    for (guint k = tr->len; k-- > 0;) {
        TdmParam *p = g_ptr_array_index(tr, k);
        size_t start = p->arena_offset / sizeof(float);
        size_t n = (size_t)tdm_tensor_numel(p->value);
        double limit = priv->n_buckets <= 1 ? MIN(DDP_FIRST_BUCKET_BYTES, cap) : cap;
        if (cur == NULL || start + n != cur->start ||
            (double)(cur->count + n) * sizeof(float) > limit) {
            cur = &priv->buckets[priv->n_buckets++];
        }
        cur->start = start;
        cur->count += n;
        cur->n_params++;
        priv->bucket_of[k] = (guint)(cur - priv->buckets);
    }
    for (guint b = 0; b < priv->n_buckets; b++) {
        DdpBucket *bk = &priv->buckets[b];
        bk->view = tdm_arena_slice(model->grad_arena, bk->start, bk->count, error);
        if (bk->view == NULL) {
            g_prefix_error(error, "ddp: gradient bucket %u: ", b);
            return FALSE;
        }
    }
    return TRUE;
}

static void parse_skip_hook(DdpPriv *priv)
{
    priv->skip_rank = -1;
#ifdef TDM_ENABLE_TEST_HOOKS
    const char *env = g_getenv("TDM_TEST_SKIP_COLLECTIVE");
    if (env == NULL || env[0] == '\0') {
        return;
    }
    int rank = -1;
    unsigned long long step = 0;
    if (sscanf(env, "%d:%llu", &rank, &step) == 2 && rank >= 0 && step > 0) {
        priv->skip_rank = rank;
        priv->skip_step = step;
    } else {
        g_warning("TDM_TEST_SKIP_COLLECTIVE='%s' is not RANK:STEP; ignored", env);
    }
#endif
}

static void ddp_teardown(TdmStrategy *s);

static gboolean ddp_setup(TdmStrategy *s, GError **error)
{
    TdmModel *model = s->model;
    TdmComm *comm = tdm_strategy_get_comm(s, error);
    if (comm == NULL) {
        return FALSE;
    }
    DdpPriv *priv = g_new0(DdpPriv, 1);
    s->priv = priv;
    priv->comm = comm;
    priv->trainable = g_ptr_array_new();
    priv->index_of = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (!p->is_buffer && p->requires_grad && p->grad != NULL) {
            g_ptr_array_add(priv->trainable, p);
            g_hash_table_insert(priv->index_of, p, GUINT_TO_POINTER(priv->trainable->len));
        }
    }
    parse_skip_hook(priv);
    if (!ddp_make_buckets(priv, model, bucket_cap_bytes(s), error) ||
        !tdm_strategy_broadcast_values(s, 0, error) ||
        !su_buffers_init(&priv->buffers, comm, model, error)) {
        ddp_teardown(s);
        return FALSE;
    }
    tdm_model_set_grad_ready_hook(model, ddp_grad_ready, priv);
    tdm_model_set_training(model, TRUE);
    return TRUE;
}

/* Wait for every bucket started in this backward; the first error wins. */
static gboolean ddp_wait_all(DdpPriv *priv, double *waited, GError **error)
{
    gboolean ok = TRUE;
    double t0 = tdm_time_now();
    for (guint b = 0; b < priv->n_buckets; b++) {
        DdpBucket *bk = &priv->buckets[b];
        if (bk->work == NULL) {
            continue;
        }
        GError *local = NULL;
        if (!tdm_comm_wait(priv->comm, bk->work, &local)) {
            if (ok) {
                g_propagate_prefixed_error(error, local, "ddp: gradient bucket %u: ", b);
            } else {
                g_error_free(local);
            }
            ok = FALSE;
        }
        bk->work = NULL;
    }
    *waited += tdm_time_now() - t0;
    return ok;
}

/* The trainable parameters whose hook never fired, as a list for an error. */
static char *unready_params(DdpPriv *priv)
{
    GString *s = g_string_new(NULL);
    guint n = 0;
    for (guint i = 0; i < priv->trainable->len; i++) {
        if (!priv->ready[i]) {
            TdmParam *p = g_ptr_array_index(priv->trainable, i);
            if (n < DDP_MAX_NAMED_PARAMS) {
                g_string_append_printf(s, "%s%s", n > 0 ? ", " : "", p->full_name);
            }
            n++;
        }
    }
    if (n > DDP_MAX_NAMED_PARAMS) {
        g_string_append_printf(s, " and %u more", n - DDP_MAX_NAMED_PARAMS);
    }
    return g_string_free(s, FALSE);
}

static gboolean ddp_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                               TdmStepResult *result, GError **error)
{
    DdpPriv *priv = s->priv;
    TdmModel *model = s->model;

    double waited = 0.0;
    if (!su_buffers_wait(&priv->buffers, priv->comm, &waited, error)) {
        g_prefix_error(error, "ddp: ");
        return FALSE;
    }
    priv->syncing = do_update;
    if (do_update) {
        priv->sync_steps++;
        priv->next_launch = 0;
        for (guint b = 0; b < priv->n_buckets; b++) {
            priv->buckets[b].pending = priv->buckets[b].n_params;
        }
        memset(priv->ready, 0, sizeof(gboolean) * priv->trainable->len);
    }
    gboolean ok = tdm_strategy_forward_backward(s, batch, error);
    priv->syncing = FALSE;
    if (!do_update) {
        if (!ok || !su_buffers_start(&priv->buffers, priv->comm, error)) {
            return FALSE;
        }
        result->count = batch->size;
        su_set_comm_wait(result, waited);
        return TRUE;
    }

    /* Whatever happened, the buckets in flight write into the grad arena:
     * wait for them before reporting anything. */
    GError *wait_error = NULL;
    gboolean waited_ok = ddp_wait_all(priv, &waited, &wait_error);
    if (!ok) {
        g_clear_error(&wait_error);
        g_clear_error(&priv->hook_error);
        return FALSE;
    }
    if (priv->hook_error != NULL) {
        g_clear_error(&wait_error);
        g_propagate_error(error, priv->hook_error);
        priv->hook_error = NULL;
        return FALSE;
    }
    if (priv->next_launch < priv->n_buckets) {
        g_autofree char *names = unready_params(priv);
        g_clear_error(&wait_error);
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "ddp on rank %d: these trainable parameters got no gradient in the backward "
                    "pass of step %" G_GUINT64_FORMAT ", so their gradients cannot be averaged "
                    "across ranks: %s. Every trainable parameter must take part in the loss; "
                    "freeze the others (--freeze / model.freeze).",
                    priv->comm->rank, priv->sync_steps, names);
        return FALSE;
    }
    if (!waited_ok) {
        g_propagate_error(error, wait_error);
        return FALSE;
    }
    if (!tdm_optimizer_step(s->optimizer, error) || !tdm_model_zero_grad(model, error) ||
        !su_buffers_start(&priv->buffers, priv->comm, error)) {
        return FALSE;
    }
    result->count = batch->size;
    su_set_comm_wait(result, waited);
    return TRUE;
}

static void ddp_teardown(TdmStrategy *s)
{
    DdpPriv *priv = s->priv;
    if (priv == NULL) {
        return;
    }
    if (s->model->grad_ready_data == priv) {
        tdm_model_set_grad_ready_hook(s->model, NULL, NULL);
    }
    for (guint b = 0; b < priv->n_buckets; b++) {
        DdpBucket *bk = &priv->buckets[b];
        if (bk->work != NULL) {
            tdm_comm_wait(priv->comm, bk->work, NULL);
        }
        g_clear_pointer(&bk->view, tdm_tensor_unref);
    }
    g_free(priv->buckets);
    g_free(priv->bucket_of);
    g_free(priv->ready);
    g_clear_error(&priv->hook_error);
    su_buffers_clear(&priv->buffers, priv->comm);
    g_clear_pointer(&priv->index_of, g_hash_table_unref);
    g_clear_pointer(&priv->trainable, g_ptr_array_unref);
    g_free(priv);
    s->priv = NULL;
}

static const TdmStrategyClass ddp_class = {
    TDM_CLASS_HEADER(TDM_STRATEGY_IFACE_VERSION, TdmStrategyClass),
    .setup = ddp_setup, .train_step = ddp_train_step, .teardown = ddp_teardown,
};

static const TdmParamSpec ddp_params[] = {
    {.name = "bucket-mb", .struct_size = sizeof(TdmParamSpec), .type = TDM_PARAM_FLOAT,
     .default_value = "25", .min = 0.001, .max = 1024, .aliases = "bucket_cap_mb",
     .description = "MiB of gradients per all-reduce (PyTorch's bucket_cap_mb); the first "
                    "bucket holds at most 1 MiB of it"},
    TDM_PARAM_SPEC_END,
};

TDM_PLUGIN_INIT_FEATURE(ddp_init, TDM_FEATURE_STRATEGY, "ddp", 50, &ddp_class,
                        "one process per device: gradient buckets all-reduced while "
                        "backward runs",
                        ddp_params, NULL)

TDM_PLUGIN_DEFINE(ddp, "MIT", "DistributedDataParallel training strategy", "tandem",
                  ddp_init)
