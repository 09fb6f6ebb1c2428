/* SPDX-License-Identifier: MIT */
/* plugins/strategies/zero1.c - ZeRO stage 1: data parallel like ddp, with
 * the optimizer state sharded across ranks.
 *
 * The gradient arena (n floats, padded with zeros to a multiple of the
 * world size: world x S) is reduce-scattered with AVG, so rank r holds the
 * averaged gradient of elements [r S, r S + S). Each rank runs the optimizer
 * on that slice only: SGD and AdamW are elementwise and weight decay is the
 * same for every element, so updating a flat slice equals updating the
 * parameters it cuts through; the optimizer state (momentum, Adam moments)
 * exists for the slice only, 1/world of it per rank. A slice is handed to
 * the optimizer as one synthetic parameter per run of trainable parameters
 * of one learning-rate group it covers, so frozen parameters are never
 * decayed and every element trains at its own parameter's rate (the shard
 * optimizer shares the trainer's groups). Gradient clipping sums the
 * slices' squared norms over the ranks (the shard optimizer is given the
 * communicator for it). Then the updated
 * slices are all-gathered into every rank's value arena. When n is not a
 * multiple of the world, the reduce-scatter reads a padded copy of the
 * gradients and the all-gather writes a padded buffer copied back into the
 * arena; otherwise both work on the arenas directly.
 *
 * Setup broadcasts rank 0's value arena; buffers (BN running statistics)
 * follow rank 0's, as in ddp (SuBuffers in strategies-util.h). Micro-batches that
 * do not end an accumulation group skip communication. Communication is not
 * overlapped with backward here (the reduce-scatter runs after it); the
 * time spent in the two collectives is reported as the step's wait.
 *
 * For checkpoints the sharded state is gathered into whole per-parameter
 * tensors named as a single process's optimizer names them
 * (export_optimizer), and each rank cuts its slice back out of those
 * (import_optimizer), so a checkpoint does not depend on the world size.
 */
#include <string.h>

#include "strategies-util.h"

typedef struct {
    TdmComm *comm;
    SuBuffers buffers;                /* BN running stats, following rank 0's */
    size_t n, shard;                  /* gradient elements; per-rank slice S */
    size_t lo, len;                   /* this rank's slice [lo, lo + len) of [0, n) */
    TdmTensor *grads_n, *values_n;    /* arenas [0, n) */
    TdmTensor *gpad, *vpad;           /* world x S buffers, only when n % world != 0 */
    TdmTensor *gpad_head, *vpad_head; /* their [0, n) */
    TdmTensor *gshard;                /* S: this rank's averaged gradient */
    TdmTensor *vshard;                /* S: this rank's updated values */
    TdmTensor *vshard_head;           /* vshard [0, len) */
    TdmTensor *my_values;             /* value arena [lo, lo + len) */
    GPtrArray *shard_params;          /* synthetic TdmParam * (owned) */
    GArray *shard_groups;             /* int: each one's learning-rate group */
    TdmOptimizer *optimizer;          /* over shard_params */
} Zero1Priv;

static void shard_param_free(gpointer data)
{
    TdmParam *p = data;
    g_free(p->name);
    g_free(p->full_name);
    g_clear_pointer(&p->value, tdm_tensor_unref);
    g_clear_pointer(&p->grad, tdm_tensor_unref);
    g_free(p);
}

/* One synthetic parameter for elements [a, b) of the value arena, whose
 * gradient is [a - lo, b - lo) of gshard. */
static gboolean add_shard_param(Zero1Priv *priv, TdmModel *model, size_t a, size_t b, int group,
                                GError **error)
{
    TdmParam *p = g_new0(TdmParam, 1);
    p->full_name = g_strdup_printf("zero1.rank%d.%zu", priv->comm->rank, a);
    p->name = g_strdup(p->full_name);
    p->ndim = 1;
    p->shape[0] = (int64_t)(b - a);
    p->requires_grad = TRUE;
    p->arena_offset = a * sizeof(float);
    p->value = tdm_arena_slice(model->value_arena, a, b - a, error);
    p->grad = p->value != NULL ? tdm_arena_slice(priv->gshard, a - priv->lo, b - a, error) : NULL;
    g_ptr_array_add(priv->shard_params, p);
    g_array_append_val(priv->shard_groups, group);
    return p->grad != NULL;
}

/* Cut this rank's slice along the runs of trainable parameters of one
 * learning-rate group of `full` (the trainer's optimizer). */
static gboolean make_shard_params(Zero1Priv *priv, TdmModel *model, const TdmOptimizer *full,
                                  GError **error)
{
    const size_t hi = priv->lo + priv->len;
    size_t run_a = 0, run_b = 0;
    int run_group = 0;
    gboolean in_run = FALSE;
    for (guint i = 0; i <= model->params->len; i++) {
        TdmParam *p = i < model->params->len ? g_ptr_array_index(model->params, i) : NULL;
        gboolean trainable = p != NULL && !p->is_buffer && p->requires_grad && p->grad != NULL;
        size_t a = p != NULL ? p->arena_offset / sizeof(float) : 0;
        int group = trainable ? tdm_optimizer_lr_group_of(full, p->full_name) : 0;
        if (trainable && in_run && a == run_b && group == run_group) {
            run_b += (size_t)tdm_tensor_numel(p->value);
            continue;
        }
        if (in_run) {
            size_t x = MAX(run_a, priv->lo), y = MIN(run_b, hi);
            if (x < y && !add_shard_param(priv, model, x, y, run_group, error)) {
                return FALSE;
            }
        }
        in_run = trainable;
        if (trainable) {
            run_a = a;
            run_b = a + (size_t)tdm_tensor_numel(p->value);
            run_group = group;
        }
    }
    return TRUE;
}

/* The shard optimizer trains each slice at its group's rate and clips
 * with the norm over every rank's slices. */
static gboolean shard_optimizer_setup(Zero1Priv *priv, TdmOptimizer *full, GError **error)
{
    TdmOptimizer *opt = priv->optimizer;
    tdm_optimizer_share_lr_groups(opt, full);
    for (guint i = 0; i < priv->shard_params->len; i++) {
        if (!tdm_optimizer_set_param_lr_group(opt, g_ptr_array_index(priv->shard_params, i),
                                              g_array_index(priv->shard_groups, int, i), error)) {
            return FALSE;
        }
    }
    tdm_optimizer_set_grad_norm_comm(opt, priv->comm);
    return TRUE;
}

static TdmTensor *flat_new(TdmDevice *dev, size_t n, GError **error)
{
    int64_t shape[1] = {(int64_t)n};
    return tdm_tensor_new(dev, TDM_DTYPE_F32, 1, shape, error);
}

static void zero1_teardown(TdmStrategy *s);

/* The registered name of the optimizer's class, to create the shard's own
 * optimizer of the same kind (NULL if it is not registered). */
static const char *optimizer_name(const TdmOptimizer *opt)
{
    GPtrArray *features = tdm_registry_list_features(TDM_FEATURE_OPTIMIZER);
    const char *name = NULL;
    for (guint i = 0; i < features->len && name == NULL; i++) {
        TdmFeature *f = g_ptr_array_index(features, i);
        if (tdm_feature_get_class(f) == (gconstpointer)opt->klass) {
            name = tdm_feature_get_name(f);
        }
    }
    g_ptr_array_unref(features);
    return name;
}

static gboolean zero1_setup(TdmStrategy *s, GError **error)
{
    TdmModel *model = s->model;
    TdmDevice *dev = model->device;
    TdmComm *comm = tdm_strategy_get_comm(s, error);
    if (comm == NULL) {
        return FALSE;
    }
    Zero1Priv *priv = g_new0(Zero1Priv, 1);
    s->priv = priv;
    priv->comm = comm;
    priv->shard_params = g_ptr_array_new_with_free_func(shard_param_free);
    priv->shard_groups = g_array_new(FALSE, FALSE, sizeof(int));
    const size_t world = (size_t)comm->world;
    priv->n = model->n_grads;
    priv->shard = (priv->n + world - 1) / world;
    priv->lo = MIN((size_t)comm->rank * priv->shard, priv->n);
    priv->len = MIN(priv->shard, priv->n - priv->lo);
    const gboolean padded = priv->shard * world != priv->n;

    gboolean ok = tdm_strategy_broadcast_values(s, 0, error) &&
                  su_buffers_init(&priv->buffers, comm, model, error);
    if (ok && priv->n > 0) {
        ok = (priv->grads_n = tdm_arena_slice(model->grad_arena, 0, priv->n, error)) != NULL &&
             (priv->values_n = tdm_arena_slice(model->value_arena, 0, priv->n, error)) != NULL &&
             (priv->gshard = flat_new(dev, priv->shard, error)) != NULL &&
             (priv->vshard = flat_new(dev, priv->shard, error)) != NULL;
        if (ok && padded) {
            ok = (priv->gpad = flat_new(dev, priv->shard * world, error)) != NULL &&
                 (priv->vpad = flat_new(dev, priv->shard * world, error)) != NULL &&
                 (priv->gpad_head = tdm_arena_slice(priv->gpad, 0, priv->n, error)) != NULL &&
                 (priv->vpad_head = tdm_arena_slice(priv->vpad, 0, priv->n, error)) != NULL;
        }
        if (ok && priv->len > 0) {
            ok = (priv->my_values =
                      tdm_arena_slice(model->value_arena, priv->lo, priv->len, error)) != NULL &&
                 (priv->vshard_head = tdm_arena_slice(priv->vshard, 0, priv->len, error)) != NULL;
        }
        ok = ok && make_shard_params(priv, model, s->optimizer, error);
        if (ok) {
            const TdmOptimizer *full = s->optimizer;
            const char *name = optimizer_name(full);
            if (name == NULL) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "the optimizer's class is not a registered optimizer");
            }
            priv->optimizer = name != NULL ? tdm_optimizer_new(name, model, priv->shard_params,
                                                               &full->opts, error)
                                           : NULL;
            ok = priv->optimizer != NULL && shard_optimizer_setup(priv, s->optimizer, error);
        }
        if (!ok) {
            g_prefix_error(error, "zero1 on rank %d: ", comm->rank);
        }
    }
    if (!ok) {
        zero1_teardown(s);
        return FALSE;
    }
    tdm_model_set_training(model, TRUE);
    return TRUE;
}

static gboolean zero1_update(TdmStrategy *s, Zero1Priv *priv, double *waited, GError **error)
{
    TdmDevice *dev = s->model->device;
    if (priv->n == 0) {
        return TRUE;
    }
    TdmTensor *rs_in = priv->grads_n, *ag_out = priv->values_n;
    if (priv->gpad != NULL) {
        if (!tdm_op_copy(dev, priv->grads_n, priv->gpad_head, error)) {
            return FALSE;
        }
        rs_in = priv->gpad;
        ag_out = priv->vpad;
    }
    double t0 = tdm_time_now();
    if (!tdm_comm_reduce_scatter(priv->comm, rs_in, priv->gshard, TDM_REDUCE_AVG, error)) {
        g_prefix_error(error, "zero1: reduce-scatter of the gradients: ");
        return FALSE;
    }
    *waited += tdm_time_now() - t0;

    /* The trainer's schedule sets the lr on the optimizer it created. */
    priv->optimizer->lr = s->optimizer->lr;
    if (!tdm_optimizer_step(priv->optimizer, error)) {
        return FALSE;
    }
    if (priv->len > 0 && !tdm_op_copy(dev, priv->my_values, priv->vshard_head, error)) {
        return FALSE;
    }
    t0 = tdm_time_now();
    if (!tdm_comm_allgather(priv->comm, priv->vshard, ag_out, error)) {
        g_prefix_error(error, "zero1: all-gather of the parameters: ");
        return FALSE;
    }
    *waited += tdm_time_now() - t0;
    if (priv->vpad != NULL && !tdm_op_copy(dev, priv->vpad_head, priv->values_n, error)) {
        return FALSE;
    }
    return TRUE;
}

static gboolean zero1_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                 TdmStepResult *result, GError **error)
{
    Zero1Priv *priv = s->priv;
    TdmModel *model = s->model;
    double waited = 0.0;

    if (!su_buffers_wait(&priv->buffers, priv->comm, &waited, error)) {
        g_prefix_error(error, "zero1: ");
        return FALSE;
    }
    if (!tdm_strategy_forward_backward(s, batch, error)) {
        return FALSE;
    }
    if (do_update &&
        (!zero1_update(s, priv, &waited, error) || !tdm_model_zero_grad(model, error))) {
        return FALSE;
    }
    if (!su_buffers_start(&priv->buffers, priv->comm, error)) {
        g_prefix_error(error, "zero1: ");
        return FALSE;
    }
    result->count = batch->size;
    su_set_comm_wait(result, waited);
    return TRUE;
}

static void zero1_teardown(TdmStrategy *s)
{
    Zero1Priv *priv = s->priv;
    if (priv == NULL) {
        return;
    }
    tdm_optimizer_free(priv->optimizer);
    g_clear_pointer(&priv->shard_params, g_ptr_array_unref);
    g_clear_pointer(&priv->shard_groups, g_array_unref);
    su_buffers_clear(&priv->buffers, priv->comm);
    TdmTensor **tensors[] = {&priv->grads_n,     &priv->values_n,  &priv->gpad,   &priv->vpad,
                             &priv->gpad_head,   &priv->vpad_head, &priv->gshard, &priv->vshard,
                             &priv->vshard_head, &priv->my_values};
    for (size_t i = 0; i < G_N_ELEMENTS(tensors); i++) {
        g_clear_pointer(tensors[i], tdm_tensor_unref);
    }
    g_free(priv);
    s->priv = NULL;
}

/* ---- checkpoints: the state in a layout of any world size ---- */

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The state names the shard's optimizer keeps ("momentum_buffer"), sorted:
 * those of its first parameter, which every parameter shares. */
static GPtrArray *shard_state_names(const Zero1Priv *priv)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    if (priv->optimizer == NULL || priv->shard_params->len == 0) {
        return names;
    }
    const TdmParam *q = g_ptr_array_index(priv->shard_params, 0);
    g_autofree char *head = g_strconcat(q->full_name, ".", NULL);
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, priv->optimizer->state);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        if (g_str_has_prefix(key, head)) {
            g_ptr_array_add(names, g_strdup((const char *)key + strlen(head)));
        }
    }
    g_ptr_array_sort(names, compare_names);
    return names;
}

/* A parameter the shards cover: make_shard_params' rule. */
static gboolean is_trainable(const TdmParam *p)
{
    return !p->is_buffer && p->requires_grad && p->grad != NULL;
}

/* Each state gathered whole: every rank lays its slice's state out in a
 * flat S-float buffer (zeros outside trainable parameters), the buffers are
 * all-gathered into the arena's layout, and rank 0 cuts it per parameter. */
static gboolean zero1_export_optimizer(TdmStrategy *s, TdmSafeTensors *out, const char *prefix,
                                       int64_t *step_count, GError **error)
{
    Zero1Priv *priv = s->priv;
    TdmModel *model = s->model;
    TdmDevice *dev = model->device;
    *step_count = priv->optimizer != NULL ? priv->optimizer->step_count : 0;
    if (priv->n == 0) {
        return TRUE;
    }
    g_autoptr(GPtrArray) names = shard_state_names(priv);
    /* a rank whose slice holds no trainable parameter knows no names, but
     * must take part in as many all-gathers */
    int64_t one[1] = {1};
    g_autoptr(TdmTensor) count = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, one, error);
    float k = (float)names->len;
    if (count == NULL || !tdm_tensor_write(count, &k, error) ||
        !tdm_comm_allreduce(priv->comm, count, TDM_REDUCE_MAX, error) ||
        !tdm_tensor_read(count, &k, error)) {
        return FALSE;
    }
    const guint n_states = (guint)k;
    const gboolean root = priv->comm->rank == 0;
    if (root && names->len != n_states) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "rank 0's shard holds no trainable parameter, so it cannot name the "
                    "optimizer's states");
        return FALSE;
    }
    const size_t S = priv->shard, world = (size_t)priv->comm->world;
    g_autoptr(TdmTensor) dshard = flat_new(dev, S, error);
    g_autoptr(TdmTensor) dall = dshard != NULL ? flat_new(dev, S * world, error) : NULL;
    if (dall == NULL) {
        return FALSE;
    }
    g_autofree float *hshard = g_new(float, S);
    g_autofree float *hall = root ? g_new(float, S * world) : NULL;
    for (guint i = 0; i < n_states; i++) {
        memset(hshard, 0, S * sizeof(float));
        for (guint j = 0; i < names->len && j < priv->shard_params->len; j++) {
            TdmParam *q = g_ptr_array_index(priv->shard_params, j);
            g_autofree char *key = g_strconcat(q->full_name, ".", names->pdata[i], NULL);
            TdmTensor *t = g_hash_table_lookup(priv->optimizer->state, key);
            if (t != NULL &&
                !tdm_tensor_read(t, hshard + (q->arena_offset / sizeof(float) - priv->lo),
                                 error)) {
                return FALSE;
            }
        }
        if (!tdm_tensor_write(dshard, hshard, error) ||
            !tdm_comm_allgather(priv->comm, dshard, dall, error) ||
            (root && !tdm_tensor_read(dall, hall, error))) {
            return FALSE;
        }
        for (guint j = 0; root && j < model->params->len; j++) {
            const TdmParam *p = g_ptr_array_index(model->params, j);
            if (is_trainable(p)) {
                g_autofree char *name =
                    g_strconcat(prefix, p->full_name, ".", names->pdata[i], NULL);
                tdm_safetensors_add(out, name, TDM_DTYPE_F32, p->ndim, p->shape,
                                    hall + p->arena_offset / sizeof(float));
            }
        }
    }
    return TRUE;
}

/* This rank's slice of each state, cut from the whole parameters' state. */
static gboolean zero1_import_optimizer(TdmStrategy *s, const TdmSafeTensors *in,
                                       const char *prefix, const char *path, int64_t step_count,
                                       GError **error)
{
    Zero1Priv *priv = s->priv;
    TdmModel *model = s->model;
    if (priv->optimizer == NULL) {
        return TRUE;
    }
    priv->optimizer->step_count = step_count;
    g_autoptr(GPtrArray) names = shard_state_names(priv);
    for (guint i = 0; i < names->len; i++) {
        for (guint j = 0; j < priv->shard_params->len; j++) {
            TdmParam *q = g_ptr_array_index(priv->shard_params, j);
            const size_t a = q->arena_offset / sizeof(float), b = a + (size_t)q->shape[0];
            g_autofree float *host = g_new0(float, b - a);
            for (guint m = 0; m < model->params->len; m++) {
                const TdmParam *p = g_ptr_array_index(model->params, m);
                const size_t pa = p->arena_offset / sizeof(float);
                const size_t pb = pa + (size_t)tdm_tensor_numel(p->value);
                if (!is_trainable(p) || pb <= a || pa >= b) {
                    continue;
                }
                g_autofree char *name =
                    g_strconcat(prefix, p->full_name, ".", names->pdata[i], NULL);
                const TdmSafeTensor *t = tdm_safetensors_get(in, name);
                if (t == NULL || t->dtype != TDM_DTYPE_F32 ||
                    t->nbytes != (pb - pa) * sizeof(float)) {
                    g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                                "%s: optimizer state '%s' is %s (%zu floats expected)", path,
                                name, t == NULL ? "missing" : "of another size or type",
                                pb - pa);
                    return FALSE;
                }
                const size_t x = MAX(a, pa), y = MIN(b, pb);
                memcpy(host + (x - a), (const guint8 *)t->data + (x - pa) * sizeof(float),
                       (y - x) * sizeof(float));
            }
            g_autofree char *key = g_strconcat(q->full_name, ".", names->pdata[i], NULL);
            TdmTensor *st = g_hash_table_lookup(priv->optimizer->state, key);
            if (st != NULL && !tdm_tensor_write(st, host, error)) {
                return FALSE;
            }
        }
    }
    /* a state of the file this optimizer does not keep (another momentum) */
    for (guint i = 0; i < tdm_safetensors_count(in); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(in, i);
        const char *dot = g_str_has_prefix(t->name, prefix) ? strrchr(t->name, '.') : NULL;
        gboolean known = dot == NULL || priv->shard_params->len == 0;
        for (guint j = 0; !known && j < names->len; j++) {
            known = strcmp(dot + 1, names->pdata[j]) == 0;
        }
        if (!known) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: optimizer state '%s' has no place in this run's optimizer (another "
                        "optimizer, momentum or set of frozen parameters?)", path, t->name);
            return FALSE;
        }
    }
    return TRUE;
}

static const TdmStrategyClass zero1_class = {
    TDM_CLASS_HEADER(TDM_STRATEGY_IFACE_VERSION, TdmStrategyClass),
    .setup = zero1_setup,
    .train_step = zero1_train_step,
    .teardown = zero1_teardown,
    .export_optimizer = zero1_export_optimizer,
    .import_optimizer = zero1_import_optimizer,
};

TDM_PLUGIN_INIT_FEATURE(zero1_init, TDM_FEATURE_STRATEGY, "zero1", 50, &zero1_class,
                        "ZeRO-1: gradients reduce-scattered, optimizer state and "
                        "update sharded across ranks, parameters all-gathered",
                        NULL, NULL)

TDM_PLUGIN_DEFINE(zero1, "MIT", "ZeRO stage 1 training strategy", "tandem",
                  zero1_init)
