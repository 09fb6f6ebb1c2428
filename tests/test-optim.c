/* SPDX-License-Identifier: MIT */
/* tests/test-optim.c - SGD (momentum, dampening, nesterov, weight decay)
 * and AdamW steps against PyTorch's update formulas computed here in
 * double, through both the fused whole-arena path (the optimizer covers
 * every parameter) and the per-parameter path (a non-contiguous subset);
 * state tensors under their checkpoint keys; frozen parameters left alone;
 * the learning-rate schedules at chosen steps; a step that also zeroes the
 * gradients, against a step then zero_grad; hyperparameters given as text
 * ("sgd momentum=0.9") and as options, bound to the same specs;
 * learning-rate groups (longest prefix, each group's schedule, the errors)
 * and gradient clipping by total norm, fused and per parameter. Tolerance:
 * 1e-5 relative, float32 rounding of two updates.
 */
#include "config.h"

#include "core-test-util.h"

/* fc1 Linear(4, 3) then fc2 Linear(3, 2): 5 parameter tensors, 29 floats. */
static TdmModel *small_model(void)
{
    TdmModule *root = tdm_sequential_new();
    tdm_module_add_child(root, "fc1", tdm_linear_new(4, 3, TRUE));
    tdm_module_add_child(root, "relu", tdm_relu_new());
    tdm_module_add_child(root, "fc2", tdm_linear_new(3, 2, TRUE));
    return test_model(root, test_ref_device(), 1);
}

/* Per-parameter host copies of values, grads and state. */
typedef struct {
    TdmParam *p;
    int64_t n;
    double *value, *buf, *m, *v;
} Shadow;

static void write_grads(TdmModel *model, Shadow *sh, guint n, guint32 seed, double **grads)
{
    for (guint i = 0; i < n; i++) {
        float *g = g_new(float, sh[i].n);
        test_fill_uniform(g, sh[i].n, seed + i, -1.0, 1.0);
        g_assert_true(tdm_tensor_write(sh[i].p->grad, g, NULL));
        for (int64_t k = 0; k < sh[i].n; k++) {
            grads[i][k] = g[k];
        }
        g_free(g);
    }
}

static Shadow *make_shadows(TdmModel *model, guint *count)
{
    Shadow *sh = g_new0(Shadow, model->params->len);
    guint n = 0;
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (p->is_buffer) {
            continue;
        }
        sh[n].p = p;
        sh[n].n = tdm_tensor_numel(p->value);
        sh[n].value = g_new0(double, sh[n].n);
        sh[n].buf = g_new0(double, sh[n].n);
        sh[n].m = g_new0(double, sh[n].n);
        sh[n].v = g_new0(double, sh[n].n);
        g_autofree float *v = test_read(p->value);
        for (int64_t k = 0; k < sh[n].n; k++) {
            sh[n].value[k] = v[k];
        }
        n++;
    }
    *count = n;
    return sh;
}

static void free_shadows(Shadow *sh, guint n)
{
    for (guint i = 0; i < n; i++) {
        g_free(sh[i].value);
        g_free(sh[i].buf);
        g_free(sh[i].m);
        g_free(sh[i].v);
    }
    g_free(sh);
}

static void assert_close(const double *want, TdmTensor *t, const char *what)
{
    g_autofree float *got = test_read(t);
    for (int64_t k = 0; k < tdm_tensor_numel(t); k++) {
        if (fabs(got[k] - want[k]) > 1e-6 + 1e-5 * fabs(want[k])) {
            g_error("%s[%" G_GINT64_FORMAT "]: got %.8g, want %.8g", what, k, got[k], want[k]);
        }
    }
}

static gboolean in_subset(GPtrArray *subset, TdmParam *p)
{
    if (subset == NULL) {
        return TRUE;
    }
    for (guint i = 0; i < subset->len; i++) {
        if (g_ptr_array_index(subset, i) == p) {
            return TRUE;
        }
    }
    return FALSE;
}

/* What run_sgd and run_adamw share: the model, its shadows, the
 * parameters the optimizer gets (NULL = all) and a host array per parameter
 * for the gradients of a step. */
typedef struct {
    TdmModel *model;
    Shadow *sh;
    guint n;
    GPtrArray *subset;
    double **grads;
} OptimRun;

/* With `subset` a NULL-terminated list of parameter names, or NULL for
 * every parameter. */
static void optim_run_init(OptimRun *r, const char *const *subset)
{
    r->model = small_model();
    r->n = 0;
    r->sh = make_shadows(r->model, &r->n);
    r->subset = NULL;
    if (subset != NULL) {
        r->subset = g_ptr_array_new();
        for (const char *const *name = subset; *name != NULL; name++) {
            g_ptr_array_add(r->subset, tdm_model_find_param(r->model, *name));
        }
    }
    r->grads = g_new(double *, r->n);
    for (guint i = 0; i < r->n; i++) {
        r->grads[i] = g_new(double, r->sh[i].n);
    }
}

static void optim_run_clear(OptimRun *r)
{
    for (guint i = 0; i < r->n; i++) {
        g_free(r->grads[i]);
    }
    g_free(r->grads);
    if (r->subset != NULL) {
        g_ptr_array_unref(r->subset);
    }
    free_shadows(r->sh, r->n);
    tdm_model_free(r->model);
}

typedef struct {
    const char *name;
    float momentum, dampening, weight_decay;
    gboolean nesterov;
    gboolean subset; /* non-contiguous parameter list: per-parameter path */
} SgdCase;

static void run_sgd(gconstpointer data)
{
    const SgdCase *c = data;
    static const char *const weights[] = {"fc1.weight", "fc2.weight", NULL};
    GError *error = NULL;
    OptimRun r;
    optim_run_init(&r, c->subset ? weights : NULL);
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.lr = 0.1f;
    o.momentum = c->momentum;
    o.dampening = c->dampening;
    o.weight_decay = c->weight_decay;
    o.nesterov = c->nesterov;
    TdmOptimizer *opt = tdm_optimizer_new("sgd", r.model, r.subset, &o, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(opt->params->len, ==, c->subset ? 2 : r.n);
    for (int step = 0; step < 3; step++) {
        write_grads(r.model, r.sh, r.n, 100 + 10 * step, r.grads);
        g_assert_true(tdm_optimizer_step(opt, &error));
        g_assert_no_error(error);
        for (guint i = 0; i < r.n; i++) {
            if (!in_subset(r.subset, r.sh[i].p)) {
                continue;
            }
            for (int64_t k = 0; k < r.sh[i].n; k++) {
                double g = r.grads[i][k] + c->weight_decay * r.sh[i].value[k];
                double d = g;
                if (c->momentum != 0.0f) {
                    r.sh[i].buf[k] =
                        step == 0 ? g : c->momentum * r.sh[i].buf[k] + (1.0 - c->dampening) * g;
                    d = c->nesterov ? g + c->momentum * r.sh[i].buf[k] : r.sh[i].buf[k];
                }
                r.sh[i].value[k] -= 0.1 * d;
            }
        }
        for (guint i = 0; i < r.n; i++) {
            assert_close(r.sh[i].value, r.sh[i].p->value, r.sh[i].p->full_name);
            g_autofree char *key = g_strdup_printf("%s.momentum_buffer", r.sh[i].p->full_name);
            TdmTensor *buf = g_hash_table_lookup(opt->state, key);
            if (c->momentum != 0.0f && in_subset(r.subset, r.sh[i].p)) {
                g_assert_nonnull(buf);
                assert_close(r.sh[i].buf, buf, key);
            } else {
                g_assert_null(buf);
            }
        }
    }
    g_assert_cmpint(opt->step_count, ==, 3);
    tdm_optimizer_free(opt);
    optim_run_clear(&r);
}

static void run_adamw(gconstpointer data)
{
    const gboolean use_subset = GPOINTER_TO_INT(data);
    static const char *const biases[] = {"fc1.bias", "fc2.bias", NULL};
    GError *error = NULL;
    OptimRun r;
    optim_run_init(&r, use_subset ? biases : NULL);
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.lr = 0.01f;
    o.beta1 = 0.8f;
    o.beta2 = 0.99f;
    o.eps = 1e-6f;
    o.weight_decay = 0.1f;
    TdmOptimizer *opt = tdm_optimizer_new("adamw", r.model, r.subset, &o, &error);
    g_assert_no_error(error);
    for (int step = 1; step <= 3; step++) {
        write_grads(r.model, r.sh, r.n, 300 + 10 * step, r.grads);
        g_assert_true(tdm_optimizer_step(opt, &error));
        g_assert_no_error(error);
        double bc1 = 1.0 - pow(0.8, step), bc2 = 1.0 - pow(0.99, step);
        for (guint i = 0; i < r.n; i++) {
            if (!in_subset(r.subset, r.sh[i].p)) {
                continue;
            }
            for (int64_t k = 0; k < r.sh[i].n; k++) {
                double g = r.grads[i][k];
                r.sh[i].m[k] = 0.8 * r.sh[i].m[k] + 0.2 * g;
                r.sh[i].v[k] = 0.99 * r.sh[i].v[k] + 0.01 * g * g;
                r.sh[i].value[k] *= 1.0 - 0.01 * 0.1;
                r.sh[i].value[k] -= 0.01 * (r.sh[i].m[k] / bc1) / (sqrt(r.sh[i].v[k] / bc2) + 1e-6);
            }
        }
        for (guint i = 0; i < r.n; i++) {
            assert_close(r.sh[i].value, r.sh[i].p->value, r.sh[i].p->full_name);
            if (!in_subset(r.subset, r.sh[i].p)) {
                continue;
            }
            g_autofree char *km = g_strdup_printf("%s.exp_avg", r.sh[i].p->full_name);
            g_autofree char *kv = g_strdup_printf("%s.exp_avg_sq", r.sh[i].p->full_name);
            assert_close(r.sh[i].m, g_hash_table_lookup(opt->state, km), km);
            assert_close(r.sh[i].v, g_hash_table_lookup(opt->state, kv), kv);
            g_assert_true(tdm_optimizer_state(opt, r.sh[i].p, "exp_avg", NULL) ==
                          g_hash_table_lookup(opt->state, km));
        }
    }
    tdm_optimizer_free(opt);
    optim_run_clear(&r);
}

/* Freezing after creation: the frozen parameter is neither decayed nor
 * moved, the others still are. */
static void test_frozen_after_create(void)
{
    GError *error = NULL;
    TdmModel *model = small_model();
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.momentum = 0.9f;
    o.weight_decay = 0.1f;
    TdmOptimizer *opt = tdm_optimizer_new("sgd", model, NULL, &o, &error);
    g_assert_no_error(error);
    g_assert_cmpint(tdm_model_freeze(model, "fc1.bias"), ==, 1);
    TdmParam *frozen = tdm_model_find_param(model, "fc1.bias");
    TdmParam *live = tdm_model_find_param(model, "fc2.weight");
    g_autofree float *f0 = test_read(frozen->value);
    g_autofree float *l0 = test_read(live->value);
    g_assert_true(tdm_optimizer_step(opt, &error));
    g_autofree float *f1 = test_read(frozen->value);
    g_autofree float *l1 = test_read(live->value);
    g_assert_cmpmem(f0, 3 * sizeof(float), f1, 3 * sizeof(float));
    g_assert_true(memcmp(l0, l1, 6 * sizeof(float)) != 0);
    tdm_optimizer_free(opt);
    tdm_model_free(model);
}

/* The same random gradients (from `seed`) into both models' grad arenas. */
static void write_same_grads(TdmModel *a, TdmModel *b, guint32 seed)
{
    g_autofree float *g = g_new(float, a->n_grads);
    test_fill_uniform(g, (int64_t)a->n_grads, seed, -1.0, 1.0);
    g_assert_true(tdm_tensor_write(a->grad_arena, g, NULL));
    g_assert_true(tdm_tensor_write(b->grad_arena, g, NULL));
}

/* tdm_optimizer_step_zero_grad is a step then zero_grad, bit for bit: on
 * the fused whole-arena path (the backend's update-and-zero op) and on the
 * per-parameter path (a subset: the step, then the usual zero_grad). */
static void run_step_zero_grad(const char *name, gboolean subset)
{
    GError *error = NULL;
    TdmModel *a = small_model(), *b = small_model();
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.momentum = 0.9f;
    o.weight_decay = 0.01f;
    GPtrArray *pa = NULL, *pb = NULL;
    if (subset) {
        pa = g_ptr_array_new();
        pb = g_ptr_array_new();
        g_ptr_array_add(pa, tdm_model_find_param(a, "fc1.weight"));
        g_ptr_array_add(pb, tdm_model_find_param(b, "fc1.weight"));
    }
    TdmOptimizer *oa = tdm_optimizer_new(name, a, pa, &o, &error);
    g_assert_no_error(error);
    TdmOptimizer *ob = tdm_optimizer_new(name, b, pb, &o, &error);
    g_assert_no_error(error);
    for (int step = 0; step < 3; step++) {
        write_same_grads(a, b, 40 + step);
        g_assert_true(tdm_optimizer_step(oa, &error) && tdm_model_zero_grad(a, &error));
        g_assert_true(tdm_optimizer_step_zero_grad(ob, b, &error));
        g_assert_no_error(error);
        g_autofree float *va = test_read(a->value_arena);
        g_autofree float *vb = test_read(b->value_arena);
        g_assert_cmpmem(va, a->n_values * sizeof(float), vb, b->n_values * sizeof(float));
        g_autofree float *gb = test_read(b->grad_arena);
        for (size_t k = 0; k < b->n_grads; k++) {
            g_assert_cmpfloat(gb[k], ==, 0.0f);
        }
    }
    g_assert_cmpint(ob->step_count, ==, 3);
    tdm_optimizer_free(oa);
    tdm_optimizer_free(ob);
    if (subset) {
        g_ptr_array_unref(pa);
        g_ptr_array_unref(pb);
    }
    tdm_model_free(a);
    tdm_model_free(b);
}

static void test_step_zero_grad(void)
{
    run_step_zero_grad("sgd", FALSE);
    run_step_zero_grad("sgd", TRUE);
    run_step_zero_grad("adamw", FALSE);
    run_step_zero_grad("adamw", TRUE);
}

static void test_bad_optimizers(void)
{
    GError *error = NULL;
    TdmModel *model = small_model();
    g_assert_null(tdm_optimizer_new("lion", model, NULL, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "sgd"));
    g_clear_error(&error);
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    g_assert_cmpfloat(o.lr, ==, 0.01f);
    g_assert_cmpfloat(o.beta2, ==, 0.999f);
    o.nesterov = TRUE;
    g_assert_null(tdm_optimizer_new("sgd", model, NULL, &o, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "nesterov"));
    g_clear_error(&error);
    tdm_model_free(model);
}

/* Hyperparameters in the optimizer's text ("sgd momentum=0.9") and in
 * TdmOptimizerOptions are bound to the same specs: the options are the
 * defaults, the text overrides them, both are range-checked with the same
 * message, and the text changes the update exactly as the option does. */
static void test_hyperparameters(void)
{
    GError *error = NULL;
    TdmModel *a = small_model(), *b = small_model();
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.lr = 0.1f;
    o.weight_decay = 0.01f;
    TdmOptimizer *oa = tdm_optimizer_new("sgd momentum=0.9 nesterov=true", a, NULL, &o, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(oa->opts.momentum, ==, 0.9f);
    g_assert_true(oa->opts.nesterov);
    g_assert_cmpfloat(oa->opts.lr, ==, 0.1f);
    g_assert_cmpfloat(oa->lr, ==, 0.1f);
    g_assert_cmpfloat(oa->opts.weight_decay, ==, 0.01f);
    g_assert_true(oa->opts.hparams == oa->hparams);
    g_assert_cmpstr(tdm_params_get_name(oa->hparams), ==, "sgd");
    g_assert_true(tdm_params_is_set(oa->hparams, "momentum"));
    g_assert_false(tdm_params_is_set(oa->hparams, "lr"));
    g_assert_cmpfloat((float)tdm_params_get_float(oa->hparams, "lr"), ==, 0.1f);
    o.momentum = 0.9f;
    o.nesterov = TRUE;
    TdmOptimizer *ob = tdm_optimizer_new("sgd", b, NULL, &o, &error);
    g_assert_no_error(error);
    for (int step = 0; step < 2; step++) {
        write_same_grads(a, b, 70 + step);
        g_assert_true(tdm_optimizer_step(oa, &error) && tdm_optimizer_step(ob, &error));
        g_assert_no_error(error);
    }
    g_autofree float *va = test_read(a->value_arena);
    g_autofree float *vb = test_read(b->value_arena);
    g_assert_cmpmem(va, a->n_values * sizeof(float), vb, b->n_values * sizeof(float));

    /* The text wins over the options; options given as hparams (a ZeRO
     * shard's copy of opts) are taken as they are. */
    TdmOptimizer *oc = tdm_optimizer_new("sgd lr=0.5", a, NULL, &o, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(oc->opts.lr, ==, 0.5f);
    g_assert_cmpfloat(oc->lr, ==, 0.5f);
    TdmOptimizer *od = tdm_optimizer_new("sgd", a, NULL, &oc->opts, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(od->opts.lr, ==, 0.5f);
    g_assert_true(od->hparams == oc->hparams);

    static const char *const bad[][2] = {
        {"sgd momentum=abc", "sgd: momentum=abc: expected a number in [0, 1]"},
        {"sgd momentum=1.5", "sgd: momentum=1.5: expected a number in [0, 1]"},
        {"adamw eps=0", "adamw: eps=0: expected a number in (0, 1]"},
        {"adamw momentum=0.9",
         "adamw: unknown parameter 'momentum'; known: lr, beta1, beta2, eps, weight_decay"},
    };
    tdm_optimizer_options_init(&o);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_null(tdm_optimizer_new(bad[i][0], a, NULL, &o, &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        g_assert_cmpstr(error->message, ==, bad[i][1]);
        g_clear_error(&error);
    }
    /* An option out of the spec's range is refused the same way. */
    o.momentum = 1.5f;
    g_assert_null(tdm_optimizer_new("sgd", a, NULL, &o, &error));
    g_assert_cmpstr(error->message, ==, "sgd: momentum=1.5: expected a number in [0, 1]");
    g_clear_error(&error);
    tdm_optimizer_free(oa);
    tdm_optimizer_free(ob);
    tdm_optimizer_free(oc);
    tdm_optimizer_free(od);
    tdm_model_free(a);
    tdm_model_free(b);
}

static void assert_lr(const TdmSchedule *s, int64_t step, double want)
{
    float got = tdm_schedule_lr(s, step);
    if (fabs(got - want) > 1e-7 + 1e-6 * fabs(want)) {
        g_error("schedule kind %d, step %" G_GINT64_FORMAT ": lr %.9g, want %.9g", s->kind, step,
                got, want);
    }
}

/* Every gradient of `model` set to `g`; the parameters' values (transfer
 * full). */
static float *grads_to(TdmModel *model, float g)
{
    GError *error = NULL;
    g_assert_true(tdm_op_fill(model->device, model->grad_arena, g, &error));
    g_assert_no_error(error);
    return test_read(model->value_arena);
}

/* The change of p's first element between the value arenas a and b. */
static double moved(TdmModel *model, const char *name, const float *a, const float *b)
{
    size_t i = tdm_model_find_param(model, name)->arena_offset / sizeof(float);
    return (double)b[i] - (double)a[i];
}

static void test_lr_groups(void)
{
    TdmModel *model = small_model();
    GError *error = NULL;
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = 0.1f;
    TdmOptimizer *opt = tdm_optimizer_new("sgd", model, NULL, &oo, &error);
    g_assert_no_error(error);
    static const char *const bad[][2] = {
        {"fc2", "'fc2': expected PREFIX=LR, e.g. fc=0.01"},
        {"=0.1", "'=0.1': expected PREFIX=LR, e.g. fc=0.01"},
        {"fc2=abc", "'fc2=abc': the learning rate of 'fc2' must be a number in [0, 1e6]"},
        {"fc2=-1", "'fc2=-1': the learning rate of 'fc2' must be a number in [0, 1e6]"},
        {"fc2=0.1, fc2=0.2", "'fc2=0.2': the prefix 'fc2' has a learning rate already"},
        {"fc9=0.1", "'fc9=0.1' names no trainable parameter"},
        {"fc2=0.1,fc2.=0.2", "'fc2=0.1' names no trainable parameter (a longer prefix takes every "
                             "parameter it names)"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_false(tdm_optimizer_set_lr_groups(opt, model, bad[i][0], &error));
        g_assert_nonnull(error);
        g_assert_cmpstr(error->message, ==, bad[i][1]);
        g_clear_error(&error);
    }
    /* the longest prefix wins; fc1.bias keeps opt->lr */
    g_assert_true(tdm_optimizer_set_lr_groups(opt, model, "fc2=0.5, fc2.bias=0.01,fc1.weight=0",
                                              &error));
    g_assert_no_error(error);
    g_assert_cmpint(tdm_optimizer_lr_group_of(opt, "fc2.weight"), ==, 1);
    g_assert_cmpint(tdm_optimizer_lr_group_of(opt, "fc2.bias"), ==, 2);
    g_assert_cmpint(tdm_optimizer_lr_group_of(opt, "fc1.bias"), ==, 0);
    float *before = grads_to(model, 1.0f);
    g_assert_true(tdm_optimizer_step(opt, &error));
    g_assert_no_error(error);
    float *after = test_read(model->value_arena);
    g_assert_cmpfloat_with_epsilon(moved(model, "fc2.weight", before, after), -0.5, 1e-6);
    g_assert_cmpfloat_with_epsilon(moved(model, "fc2.bias", before, after), -0.01, 1e-6);
    g_assert_cmpfloat(moved(model, "fc1.weight", before, after), ==, 0.0);
    g_assert_cmpfloat_with_epsilon(moved(model, "fc1.bias", before, after), -0.1, 1e-6);
    /* each group runs the schedule from its own rate: warmup scales, the
     * cosine ends every group at min_lr */
    TdmSchedule sch = {.kind = TDM_SCHEDULE_COSINE, .base_lr = 0.1f, .min_lr = 0.001f,
                       .warmup_steps = 1, .total_steps = 3};
    tdm_schedule_apply(&sch, opt, 0);
    g_assert_cmpfloat_with_epsilon(opt->lr, 0.05, 1e-7);
    g_assert_cmpfloat_with_epsilon(tdm_optimizer_param_lr(opt, 2), 0.25, 1e-7);
    tdm_schedule_apply(&sch, opt, 3);
    g_assert_cmpfloat_with_epsilon(opt->lr, 0.001, 1e-7);
    g_assert_cmpfloat_with_epsilon(tdm_optimizer_param_lr(opt, 2), 0.001, 1e-7);
    g_assert_cmpfloat_with_epsilon(tdm_optimizer_param_lr(opt, 3), 0.001, 1e-7);
    /* "" removes them */
    g_assert_true(tdm_optimizer_set_lr_groups(opt, model, "", &error));
    g_assert_cmpint(tdm_optimizer_lr_group_of(opt, "fc2.weight"), ==, 0);
    g_free(before);
    g_free(after);
    tdm_optimizer_free(opt);
    tdm_model_free(model);
}

/* One sgd step (lr 1, no momentum) of every gradient 1 clipped to
 * `max_norm`, over the whole model or with fc1.weight frozen (the
 * per-parameter path): each trained value moves by the clip coefficient. */
static void clip_case(float max_norm, gboolean frozen)
{
    TdmModel *model = small_model();
    GError *error = NULL;
    if (frozen) {
        g_assert_cmpint(tdm_model_freeze(model, "fc1.weight"), ==, 1);
    }
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = 1.0f;
    oo.max_grad_norm = max_norm;
    TdmOptimizer *opt = tdm_optimizer_new("sgd", model, NULL, &oo, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(tdm_optimizer_get_grad_norm(opt), ==, -1.0);
    float *before = grads_to(model, 1.0f);
    g_assert_true(tdm_optimizer_step(opt, &error));
    g_assert_no_error(error);
    float *after = test_read(model->value_arena);
    const double norm = sqrt(frozen ? 11.0 : 23.0); /* 23 gradients, 12 in fc1.weight */
    const double coef = MIN(1.0, max_norm / (norm + 1e-6));
    g_assert_cmpfloat_with_epsilon(tdm_optimizer_get_grad_norm(opt), norm, 1e-6);
    g_assert_cmpfloat_with_epsilon(moved(model, "fc2.bias", before, after), -coef, 1e-6);
    g_assert_cmpfloat_with_epsilon(moved(model, "fc1.weight", before, after),
                                   frozen ? 0.0 : -coef, 1e-6);
    g_free(before);
    g_free(after);
    tdm_optimizer_free(opt);
    tdm_model_free(model);
}

static void test_clip_grad_norm(void)
{
    clip_case(1.0f, FALSE);
    clip_case(1.0f, TRUE);
    clip_case(100.0f, FALSE); /* under the limit: unchanged */
}

static void test_schedules(void)
{
    GError *error = NULL;
    TdmScheduleKind kind;
    g_assert_true(tdm_schedule_kind_parse("cosine", &kind, &error));
    g_assert_cmpint(kind, ==, TDM_SCHEDULE_COSINE);
    g_assert_true(tdm_schedule_kind_parse("step", &kind, &error));
    g_assert_cmpint(kind, ==, TDM_SCHEDULE_STEP);
    g_assert_false(tdm_schedule_kind_parse("linear", &kind, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "linear"));
    g_clear_error(&error);

    TdmSchedule s = {0};
    s.kind = TDM_SCHEDULE_CONSTANT;
    s.base_lr = 0.1f;
    assert_lr(&s, 0, 0.1);
    assert_lr(&s, 12345, 0.1);
    s.warmup_steps = 4; /* linear: lr * (step + 1) / 5, never 0 */
    assert_lr(&s, 0, 0.02);
    assert_lr(&s, 2, 0.06);
    assert_lr(&s, 3, 0.08);
    assert_lr(&s, 4, 0.1);

    s = (TdmSchedule){0};
    s.kind = TDM_SCHEDULE_STEP;
    s.base_lr = 0.1f;
    s.gamma = 0.1f;
    s.step_size = 2;
    s.steps_per_epoch = 10;
    assert_lr(&s, 0, 0.1);
    assert_lr(&s, 19, 0.1);
    assert_lr(&s, 20, 0.01);
    assert_lr(&s, 39, 0.01);
    assert_lr(&s, 45, 0.001);

    s = (TdmSchedule){0};
    s.kind = TDM_SCHEDULE_COSINE;
    s.base_lr = 0.1f;
    s.min_lr = 0.001f;
    s.total_steps = 100;
    assert_lr(&s, 0, 0.1);
    assert_lr(&s, 25, 0.001 + 0.5 * 0.099 * (1.0 + cos(G_PI * 0.25)));
    assert_lr(&s, 50, 0.0505);
    assert_lr(&s, 100, 0.001);
    assert_lr(&s, 150, 0.001);
    s.warmup_steps = 10;
    s.total_steps = 110;
    assert_lr(&s, 0, 0.1 / 11.0);
    assert_lr(&s, 5, 0.1 * 6.0 / 11.0);
    assert_lr(&s, 10, 0.1);
    assert_lr(&s, 60, 0.0505);
    assert_lr(&s, 110, 0.001);
}

/* The whole loop a user runs: forward, cross-entropy, backward, step.
 * Memorising one fixed batch must drive the loss well down. */
static void overfit_batch(const char *model_name, const char *opt_name, float lr, int steps)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    TdmModelConfig cfg = {1, 4, 16, {0}};
    TdmModel *model = test_model(tdm_model_zoo_create(model_name, &cfg, &error), dev, 2);
    enum { N = 8 };
    int64_t xshape[4] = {N, 1, 16, 16}, lshape[1] = {N};
    g_autofree float *x = g_new(float, N * 256);
    test_fill_uniform(x, N * 256, 12, -1.0, 1.0);
    TdmTensor *xt = test_tensor_from(dev, 4, xshape, x);
    gint32 labels[N] = {0, 1, 2, 3, 3, 2, 1, 0};
    TdmTensor *lt = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, &error);
    g_assert_true(tdm_tensor_write(lt, labels, &error));
    TdmTensor *dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.lr = lr;
    o.momentum = 0.9f;
    TdmOptimizer *opt = tdm_optimizer_new(opt_name, model, NULL, &o, &error);
    g_assert_no_error(error);
    float first = 0.0f, loss = 0.0f;
    for (int step = 0; step < steps; step++) {
        TdmTensor *y = NULL;
        g_assert_true(tdm_model_zero_grad(model, &error));
        g_assert_true(tdm_model_forward(model, xt, &y, &error));
        g_assert_true(tdm_loss_cross_entropy(dev, NULL, y, lt, 0.0f, &loss, dlogits, NULL, &error));
        g_assert_true(tdm_model_backward(model, dlogits, &error));
        g_assert_true(tdm_optimizer_step(opt, &error));
        g_assert_no_error(error);
        if (step == 0) {
            first = loss;
        }
    }
    g_test_message("%s/%s: loss %.4f -> %.4f", model_name, opt_name, first, loss);
    g_assert_cmpfloat(first, >, 1.0f);
    g_assert_cmpfloat(loss, <, 0.25f * first);
    tdm_optimizer_free(opt);
    tdm_tensor_unref(dlogits);
    tdm_tensor_unref(lt);
    tdm_tensor_unref(xt);
    tdm_model_free(model);
}

static void test_overfit_lenet_sgd(void)
{
    overfit_batch("lenet", "sgd", 0.05f, 60);
}

static void test_overfit_resnet8_adamw(void)
{
    overfit_batch("resnet8", "adamw", 0.01f, 15);
}

static const SgdCase sgd_cases[] = {
    {"plain", 0.0f, 0.0f, 0.0f, FALSE, FALSE},
    {"momentum-wd", 0.9f, 0.0f, 0.01f, FALSE, FALSE},
    {"momentum-dampening-wd", 0.9f, 0.1f, 0.05f, FALSE, FALSE},
    {"nesterov-wd", 0.9f, 0.0f, 0.01f, TRUE, FALSE},
    {"nesterov-wd-per-param", 0.9f, 0.0f, 0.01f, TRUE, TRUE},
    {"momentum-dampening-per-param", 0.5f, 0.2f, 0.0f, FALSE, TRUE},
};

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (guint i = 0; i < G_N_ELEMENTS(sgd_cases); i++) {
        g_autofree char *path = g_strdup_printf("/optim/sgd/%s", sgd_cases[i].name);
        g_test_add_data_func(path, &sgd_cases[i], run_sgd);
    }
    g_test_add_data_func("/optim/adamw/fused", GINT_TO_POINTER(FALSE), run_adamw);
    g_test_add_data_func("/optim/adamw/per-param", GINT_TO_POINTER(TRUE), run_adamw);
    g_test_add_func("/optim/frozen-after-create", test_frozen_after_create);
    g_test_add_func("/optim/bad", test_bad_optimizers);
    g_test_add_func("/optim/hyperparameters", test_hyperparameters);
    g_test_add_func("/optim/step-zero-grad", test_step_zero_grad);
    g_test_add_func("/optim/schedules", test_schedules);
    g_test_add_func("/optim/lr-groups", test_lr_groups);
    g_test_add_func("/optim/clip-grad-norm", test_clip_grad_norm);
    g_test_add_func("/optim/overfit/lenet-sgd", test_overfit_lenet_sgd);
    g_test_add_func("/optim/overfit/resnet8-adamw", test_overfit_resnet8_adamw);
    return g_test_run();
}
