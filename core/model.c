/* SPDX-License-Identifier: MIT */
/* core/model.c - a TdmModel binds a module tree to a device. Placing it
 * walks the tree once: it assigns torchvision-style full names (dot-joined,
 * "" children transparent), lists parameters then buffers in definition
 * order, lays them out back to back in one value arena (so the parameters
 * are one contiguous run at its start) and their gradients at the same
 * offsets in a grad arena, and makes every TdmParam a view into them.
 *
 * The model also owns the pool of input-gradient buffers its layers share
 * during backward (grad-pool.c); tdm_model_backward marks a pass for it.
 *
 * Initial values follow PyTorch's default schemes and are drawn from a
 * counter-based generator keyed by (seed, parameter index, element index),
 * so a value depends on nothing but the seed and the architecture: the same
 * on every device, rank and thread count.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "internal.h"
#include "modules/module-private.h"

guint64 tdm_mix64(guint64 x)
{
    /* splitmix64's finaliser: a bijection with good avalanche. */
    x += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
static float uniform01(guint64 key, guint64 i)
{
    return (float)(tdm_mix64(key ^ tdm_mix64(i)) >> 40) * (1.0f / 16777216.0f);
}

static int64_t param_numel(const TdmParam *p)
{
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) {
        n *= p->shape[i];
    }
    return n;
}

/* ---- placement ---- */

typedef struct {
    TdmModel *model;
    GPtrArray *params;  /* trainable-kind parameters, definition order */
    GPtrArray *buffers;
    GPtrArray *dropouts;
} Walk;

static char *join_name(const char *prefix, const char *name)
{
    if (prefix[0] == '\0') {
        return g_strdup(name);
    }
    if (name[0] == '\0') {
        return g_strdup(prefix);
    }
    return g_strconcat(prefix, ".", name, NULL);
}

static void walk_tree(Walk *w, TdmModule *m, const char *path, TdmDevice *dev)
{
    m->device = dev;
    m->model = w->model;
    for (guint i = 0; i < m->params->len; i++) {
        TdmParam *p = g_ptr_array_index(m->params, i);
        g_free(p->full_name);
        p->full_name = join_name(path, p->name);
        g_ptr_array_add(p->is_buffer ? w->buffers : w->params, p);
    }
    if (m->klass == &tdm_dropout_class) {
        g_ptr_array_add(w->dropouts, m);
    }
    for (guint i = 0; i < m->children->len; i++) {
        TdmModule *c = g_ptr_array_index(m->children, i);
        g_autofree char *cpath = join_name(path, c->name);
        walk_tree(w, c, cpath, dev);
    }
}

/* PyTorch's defaults: Linear/Conv weights kaiming_uniform(a = sqrt(5)) and
 * their biases, i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)); BatchNorm weight 1,
 * bias 0, running_mean 0, running_var 1. Plugin modules that name their
 * parameters the same way get the same treatment. */
static void init_values(const TdmParam *p, guint64 seed, guint index, float *v)
{
    int64_t n = param_numel(p);
    float bound = -1.0f; /* < 0: constant fill */
    float fill = 0.0f;
    if (p->ndim >= 2 && !p->is_buffer) {
        int64_t fan_in = n / p->shape[0];
        bound = fan_in > 0 ? 1.0f / sqrtf((float)fan_in) : 0.0f;
    } else if (strcmp(p->name, "bias") == 0) {
        TdmParam *w = tdm_module_find_param(p->owner, "weight");
        if (w != NULL && w->ndim >= 2) {
            int64_t fan_in = param_numel(w) / w->shape[0];
            bound = fan_in > 0 ? 1.0f / sqrtf((float)fan_in) : 0.0f;
        }
    } else if (strcmp(p->name, "running_var") == 0 || strcmp(p->name, "weight") == 0) {
        fill = 1.0f;
    }
    if (bound < 0.0f) {
        for (int64_t i = 0; i < n; i++) {
            v[i] = fill;
        }
        return;
    }
    guint64 key = tdm_mix64(seed ^ tdm_mix64(G_GUINT64_CONSTANT(0x5EED0000) + index));
    for (int64_t i = 0; i < n; i++) {
        v[i] = (2.0f * uniform01(key, (guint64)i) - 1.0f) * bound;
    }
}

/* A flat f32 arena of n floats on `dev` in *arena (left NULL when n is 0);
 * `what` names it in the error. */
static gboolean arena_new(TdmDevice *dev, size_t n, const char *what, TdmTensor **arena,
                          GError **error)
{
    if (n == 0) {
        return TRUE;
    }
    int64_t shape[1] = {(int64_t)n};
    *arena = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, shape, error);
    if (*arena == NULL) {
        g_prefix_error(error, "model %s arena (%zu floats): ", what, n);
        return FALSE;
    }
    return TRUE;
}

static gboolean place_params(TdmModel *model, guint64 seed, gboolean init, GError **error)
{
    TdmDevice *dev = model->device;
    size_t n_values = 0, n_grads = 0;
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        p->arena_offset = n_values * sizeof(float);
        n_values += (size_t)param_numel(p);
        if (!p->is_buffer) {
            n_grads = n_values;
        }
    }
    model->n_values = n_values;
    model->n_grads = n_grads;
    if (!arena_new(dev, n_values, "value", &model->value_arena, error) ||
        !arena_new(dev, n_grads, "gradient", &model->grad_arena, error)) {
        return FALSE;
    }
    float *host = NULL;
    size_t host_n = 0;
    gboolean ok = TRUE;
    for (guint i = 0; i < model->params->len && ok; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        p->value = tdm_tensor_new_view(model->value_arena, p->arena_offset, TDM_DTYPE_F32,
                                       p->ndim, p->shape, error);
        ok = p->value != NULL;
        if (ok && !p->is_buffer) {
            p->grad = tdm_tensor_new_view(model->grad_arena, p->arena_offset, TDM_DTYPE_F32,
                                          p->ndim, p->shape, error);
            ok = p->grad != NULL;
        }
        if (ok && init) {
            size_t n = (size_t)param_numel(p);
            if (n > host_n) {
                host = g_renew(float, host, n);
                host_n = n;
            }
            init_values(p, seed, i, host);
            ok = tdm_tensor_write(p->value, host, error);
        }
        if (!ok) {
            g_prefix_error(error, "parameter %s: ", p->full_name);
        }
    }
    g_free(host);
    return ok;
}

static TdmModel *model_place(TdmModule *root, TdmDevice *dev, guint64 seed, gboolean init,
                             GError **error)
{
    TdmModel *model = g_new0(TdmModel, 1);
    model->root = root;
    model->device = dev;
    Walk w = {model, g_ptr_array_new(), g_ptr_array_new(), g_ptr_array_new()};
    walk_tree(&w, root, "", dev);
    model->params = g_ptr_array_new();
    g_ptr_array_extend(model->params, w.params, NULL, NULL);
    g_ptr_array_extend(model->params, w.buffers, NULL, NULL);
    g_ptr_array_unref(w.params);
    g_ptr_array_unref(w.buffers);
    for (guint i = 0; i < w.dropouts->len; i++) {
        tdm_dropout_set_seed(g_ptr_array_index(w.dropouts, i),
                             tdm_mix64(seed ^ tdm_mix64(G_GUINT64_CONSTANT(0xD50000) + i)));
    }
    g_ptr_array_unref(w.dropouts);

    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (!g_hash_table_add(seen, p->full_name)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "two parameters are named '%s' (children need distinct names)",
                        p->full_name);
            g_hash_table_unref(seen);
            tdm_model_free(model);
            return NULL;
        }
    }
    g_hash_table_unref(seen);
    if (!place_params(model, seed, init, error)) {
        tdm_model_free(model);
        return NULL;
    }
    return model;
}

TdmModel *tdm_model_new(TdmModule *root, TdmDevice *dev, guint64 seed, GError **error)
{
    g_return_val_if_fail(root != NULL && dev != NULL, NULL);
    return model_place(root, dev, seed, TRUE, error);
}

static TdmModule *clone_tree(const TdmModule *m, GError **error)
{
    if (m->klass->clone == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s module '%s' cannot be replicated (its class has no clone)",
                    m->klass->type_name, m->name);
        return NULL;
    }
    TdmModule *c = m->klass->clone(m, error);
    if (c == NULL) {
        return NULL;
    }
    c->training = m->training;
    if (c->params->len != m->params->len) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "%s module '%s': clone has %u parameters, original %u", m->klass->type_name,
                    m->name, c->params->len, m->params->len);
        tdm_module_unref(c);
        return NULL;
    }
    for (guint i = 0; i < m->params->len; i++) {
        const TdmParam *p = g_ptr_array_index(m->params, i);
        TdmParam *q = g_ptr_array_index(c->params, i);
        q->requires_grad = p->requires_grad;
    }
    for (guint i = 0; i < m->children->len; i++) {
        const TdmModule *child = g_ptr_array_index(m->children, i);
        TdmModule *cc = clone_tree(child, error);
        if (cc == NULL) {
            tdm_module_unref(c);
            return NULL;
        }
        tdm_module_add_child(c, child->name, cc);
    }
    return c;
}

static void collect_dropouts(TdmModule *m, GPtrArray *out)
{
    if (m->klass == &tdm_dropout_class) {
        g_ptr_array_add(out, m);
    }
    for (guint i = 0; i < m->children->len; i++) {
        collect_dropouts(g_ptr_array_index(m->children, i), out);
    }
}

TdmModel *tdm_model_replicate(TdmModel *model, TdmDevice *dev, GError **error)
{
    g_return_val_if_fail(model != NULL && dev != NULL, NULL);
    TdmModule *root = clone_tree(model->root, error);
    if (root == NULL) {
        return NULL;
    }
    TdmModel *copy = model_place(root, dev, 0, FALSE, error);
    if (copy == NULL) {
        return NULL;
    }
    /* Replicas draw the same dropout masks as the source model. */
    GPtrArray *src_drop = g_ptr_array_new(), *dst_drop = g_ptr_array_new();
    collect_dropouts(model->root, src_drop);
    collect_dropouts(copy->root, dst_drop);
    for (guint i = 0; i < src_drop->len && i < dst_drop->len; i++) {
        tdm_dropout_set_seed(g_ptr_array_index(dst_drop, i),
                             tdm_dropout_get_seed(g_ptr_array_index(src_drop, i)));
    }
    g_ptr_array_unref(src_drop);
    g_ptr_array_unref(dst_drop);
    tdm_model_set_recompute(copy, tdm_model_get_recompute(model));
    if (copy->n_values > 0) {
        float *host = tdm_tensor_read_f32(model->value_arena, error);
        gboolean ok = host != NULL && tdm_tensor_write(copy->value_arena, host, error);
        g_free(host);
        if (!ok) {
            g_prefix_error(error, "replicating the model on %s: ", dev->name);
            tdm_model_free(copy);
            return NULL;
        }
    }
    return copy;
}

void tdm_model_free(TdmModel *model)
{
    if (model == NULL) {
        return;
    }
    if (model->params != NULL) {
        g_ptr_array_unref(model->params);
    }
    /* The module tree holds the parameter views, which hold the arenas'
     * storage; drop it before the arenas. */
    tdm_module_unref(model->root);
    tdm_model_grad_pool_free(model);
    if (model->value_arena != NULL) {
        tdm_tensor_unref(model->value_arena);
    }
    if (model->grad_arena != NULL) {
        tdm_tensor_unref(model->grad_arena);
    }
    g_free(model);
}

gboolean tdm_model_forward(TdmModel *model, TdmTensor *x, TdmTensor **y, GError **error)
{
    g_return_val_if_fail(model != NULL, FALSE);
    if (model->root->training) {
        tdm_model_forward_pass_begin(model);
    }
    return tdm_module_forward(model->root, x, y, error);
}

gboolean tdm_model_backward(TdmModel *model, TdmTensor *dy, GError **error)
{
    g_return_val_if_fail(model != NULL, FALSE);
    tdm_model_grad_pass_begin(model);
    gboolean ok = tdm_module_backward(model->root, dy, FALSE, NULL, error);
    tdm_model_grad_pass_end(model, model->device);
    return ok;
}

gboolean tdm_model_zero_grad(TdmModel *model, GError **error)
{
    g_return_val_if_fail(model != NULL, FALSE);
    if (model->grad_arena == NULL) {
        return TRUE;
    }
    return tdm_op_fill(model->device, model->grad_arena, 0.0f, error);
}

void tdm_model_set_training(TdmModel *model, gboolean training)
{
    g_return_if_fail(model != NULL);
    tdm_module_set_training(model->root, training);
}

TdmParam *tdm_model_find_param(TdmModel *model, const char *full_name)
{
    g_return_val_if_fail(model != NULL && full_name != NULL, NULL);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (strcmp(p->full_name, full_name) == 0) {
            return p;
        }
    }
    return NULL;
}

char **tdm_name_prefixes_split(const char *list)
{
    char **prefixes = g_strsplit(list, ",", -1);
    for (char **s = prefixes; *s != NULL; s++) {
        g_strstrip(*s);
    }
    return prefixes;
}

int tdm_name_prefix_match(char *const *prefixes, const char *name)
{
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; prefixes[i] != NULL; i++) {
        size_t len = strlen(prefixes[i]);
        if (len > best_len && g_str_has_prefix(name, prefixes[i])) {
            best = i;
            best_len = len;
        }
    }
    return best;
}

int tdm_model_freeze(TdmModel *model, const char *prefixes)
{
    g_return_val_if_fail(model != NULL && prefixes != NULL, 0);
    g_auto(GStrv) list = tdm_name_prefixes_split(prefixes);
    int count = 0;
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (!p->is_buffer && tdm_name_prefix_match(list, p->full_name) >= 0) {
            p->requires_grad = FALSE;
            count++;
        }
    }
    return count;
}

void tdm_model_set_grad_ready_hook(TdmModel *model, TdmGradReadyHook hook, gpointer user_data)
{
    g_return_if_fail(model != NULL);
    model->grad_ready = hook;
    model->grad_ready_data = user_data;
}

int64_t tdm_model_num_parameters(const TdmModel *model)
{
    g_return_val_if_fail(model != NULL, 0);
    int64_t n = 0;
    for (guint i = 0; i < model->params->len; i++) {
        const TdmParam *p = g_ptr_array_index(model->params, i);
        if (!p->is_buffer && p->requires_grad) {
            n += param_numel(p);
        }
    }
    return n;
}
