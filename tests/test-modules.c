/* SPDX-License-Identifier: MIT */
/* tests/test-modules.c - the model object and the zoo on the ref backend:
 * parameter counts (PyTorch's numbers), arena layout, initialisation,
 * the grad-ready hook's order, freezing, zero_grad, gradient accumulation,
 * replication, error messages, the fused ops and their fallback, and the
 * bounded memory of the gradient pool. Names and shapes against PyTorch itself
 * are checked by tests/test-zoo-names.py.
 */
#include "config.h"

#include "core-test-util.h"

static TdmModel *zoo_model(const char *name, int c, int classes, int size, guint64 seed)
{
    GError *error = NULL;
    TdmModelConfig cfg = {c, classes, size, {0}};
    TdmModule *root = tdm_model_zoo_create(name, &cfg, &error);
    g_assert_no_error(error);
    return test_model(root, test_ref_device(), seed);
}

/* Counts printed by sum(p.numel() for p in model.parameters()) in PyTorch
 * 1.13 for the architectures of the zoo (torchvision for resnet18/34). */
static void test_param_counts(void)
{
    static const struct {
        const char *name;
        int c, classes, size;
        int64_t count;
    } expect[] = {
        {"mlp", 1, 10, 28, 535818},
        {"lenet", 1, 10, 28, 61706},
        {"lenet", 3, 10, 32, 83126},
        {"resnet8", 1, 10, 28, 77754},
        {"resnet20", 3, 10, 32, 272474},
        {"resnet18", 3, 1000, 224, 11689512},
        {"resnet18", 1, 10, 28, 11175370},
        {"resnet50", 3, 1000, 224, 25557032},
        {"resnet50", 1, 5, 64, 23512005},
        {"alexnet", 3, 1000, 224, 61100840},
        {"vgg11", 1, 10, 32, 128806154},
    };
    for (guint i = 0; i < G_N_ELEMENTS(expect); i++) {
        TdmModel *m = zoo_model(expect[i].name, expect[i].c, expect[i].classes, expect[i].size, 1);
        g_test_message("%s: %" G_GINT64_FORMAT, expect[i].name, tdm_model_num_parameters(m));
        g_assert_cmpint(tdm_model_num_parameters(m), ==, expect[i].count);
        tdm_model_free(m);
    }
}

static void test_zoo_defaults_and_unknown(void)
{
    GError *error = NULL;
    TdmModelConfig cfg = {0, 0, 0, {0}};
    TdmModule *root = tdm_model_zoo_create("mlp", &cfg, &error);
    g_assert_no_error(error);
    TdmModel *m = test_model(root, test_ref_device(), 1);
    TdmParam *w = tdm_model_find_param(m, "fc1.weight");
    g_assert_nonnull(w);
    g_assert_cmpint(w->shape[1], ==, 784);
    g_assert_cmpint(tdm_model_find_param(m, "fc3.bias")->shape[0], ==, 10);
    g_assert_null(tdm_model_find_param(m, "fc4.bias"));
    tdm_model_free(m);

    g_assert_null(tdm_model_zoo_create("resnet9000", NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "resnet9000"));
    for (const char *const *n = tdm_model_zoo_names(); *n != NULL; n++) {
        g_assert_nonnull(strstr(error->message, *n));
    }
    g_clear_error(&error);
}

/* VGG and AlexNet refuse images their max pools would reduce to nothing,
 * naming the model and the smallest size; 0 (unknown) is not checked. */
static void test_zoo_min_size(void)
{
    static const struct {
        const char *name;
        int min;
    } expect[] = {{"vgg11", 32}, {"vgg16", 32}, {"vgg16_bn", 32}, {"alexnet", 63}};
    for (guint i = 0; i < G_N_ELEMENTS(expect); i++) {
        GError *error = NULL;
        TdmModelConfig cfg = {3, 10, expect[i].min - 1, {0}};
        g_assert_null(tdm_model_zoo_create(expect[i].name, &cfg, &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        g_autofree char *want = g_strdup_printf("%s: image size %d is too small (at least %d",
                                                expect[i].name, expect[i].min - 1, expect[i].min);
        g_assert_nonnull(strstr(error->message, want));
        g_clear_error(&error);
        for (int size = 0; size <= expect[i].min; size += expect[i].min) {
            cfg.image_size = size;
            TdmModule *root = tdm_model_zoo_create(expect[i].name, &cfg, &error);
            g_assert_no_error(error);
            tdm_module_unref(root);
        }
    }
}

/* AdaptiveAvgPool2d with torchvision's bins [floor(i*s/n), ceil((i+1)*s/n)):
 * 2x2 -> 3x3 upsamples (the middle row and column average two), 5x5 -> 2x3
 * overlaps (row bins [0, 3) and [2, 5)), 3x3 -> 3x3 is the identity; the
 * values were worked out by hand. */
static void test_adaptive_avgpool_bins(void)
{
    TdmDevice *dev = test_ref_device();
    static const float up_x[4] = {1, 2, 3, 4};
    static const float up_y[9] = {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4};
    float down_x[25];
    for (int i = 0; i < 25; i++) {
        down_x[i] = (float)i; /* row r, column c holds 5r + c */
    }
    /* columns [0, 2), [1, 4), [3, 5): means 0.5, 2, 3.5; rows [0, 3), [2, 5): 5 and 15 */
    static const float down_y[6] = {5.5f, 7, 8.5f, 15.5f, 17, 18.5f};
    const struct {
        int h, w, oh, ow;
        const float *x, *y;
    } cases[] = {{2, 2, 3, 3, up_x, up_y}, {5, 5, 2, 3, down_x, down_y}, {2, 2, 2, 2, up_x, up_x}};
    for (guint k = 0; k < G_N_ELEMENTS(cases); k++) {
        TdmModel *m = test_model(tdm_adaptive_avgpool2d_new(cases[k].oh, cases[k].ow), dev, 1);
        int64_t shape[4] = {1, 1, cases[k].h, cases[k].w};
        TdmTensor *x = test_tensor_from(dev, 4, shape, cases[k].x);
        TdmTensor *y = test_forward(m, x);
        g_assert_cmpint(y->ndim, ==, 4);
        g_assert_cmpint(y->shape[2], ==, cases[k].oh);
        g_assert_cmpint(y->shape[3], ==, cases[k].ow);
        g_autofree float *v = test_read(y);
        for (int i = 0; i < cases[k].oh * cases[k].ow; i++) {
            g_assert_cmpfloat_with_epsilon(v[i], cases[k].y[i], 1e-6);
        }
        tdm_tensor_unref(x);
        tdm_model_free(m);
    }
}

/* Parameters first, then buffers, back to back; grads at the same offsets. */
static void test_arena_layout(void)
{
    TdmModel *m = zoo_model("resnet8", 1, 10, 28, 1);
    size_t off = 0;
    gboolean in_buffers = FALSE;
    g_assert_cmpstr(((TdmParam *)g_ptr_array_index(m->params, 0))->full_name, ==, "conv1.weight");
    for (guint i = 0; i < m->params->len; i++) {
        TdmParam *p = g_ptr_array_index(m->params, i);
        if (p->is_buffer) {
            in_buffers = TRUE;
            g_assert_null(p->grad);
        } else {
            g_assert_false(in_buffers);
            g_assert_nonnull(p->grad);
            g_assert_true(p->grad->storage == m->grad_arena->storage);
            g_assert_cmpuint(p->grad->offset, ==, m->grad_arena->offset + off);
            g_assert_cmpuint(off / sizeof(float) + tdm_tensor_numel(p->grad), <=, m->n_grads);
        }
        g_assert_cmpuint(p->arena_offset, ==, off);
        g_assert_true(p->value->storage == m->value_arena->storage);
        g_assert_cmpuint(p->value->offset, ==, m->value_arena->offset + off);
        g_assert_cmpint(tdm_tensor_numel(p->value), ==, test_numel(p->ndim, p->shape));
        off += tdm_tensor_numel(p->value) * sizeof(float);
    }
    g_assert_true(in_buffers);
    g_assert_cmpuint(off, ==, m->n_values * sizeof(float));
    g_assert_cmpint(tdm_tensor_numel(m->value_arena), ==, (int64_t)m->n_values);
    g_assert_cmpint(tdm_tensor_numel(m->grad_arena), ==, (int64_t)m->n_grads);
    g_assert_cmpint(tdm_model_num_parameters(m), ==, (int64_t)m->n_grads);
    tdm_model_free(m);
}

/* PyTorch's default init: U(+-1/sqrt(fan_in)) for conv/linear weights and
 * biases, ones/zeros for BatchNorm; deterministic in the seed. */
static void test_init(void)
{
    TdmModel *a = zoo_model("resnet8", 1, 10, 28, 42);
    TdmModel *b = zoo_model("resnet8", 1, 10, 28, 42);
    TdmModel *c = zoo_model("resnet8", 1, 10, 28, 43);
    g_autofree float *va = test_read(a->value_arena);
    g_autofree float *vb = test_read(b->value_arena);
    g_autofree float *vc = test_read(c->value_arena);
    g_assert_cmpmem(va, a->n_values * sizeof(float), vb, b->n_values * sizeof(float));
    g_assert_true(memcmp(va, vc, a->n_values * sizeof(float)) != 0);

    TdmParam *w = tdm_model_find_param(a, "layer2.0.conv1.weight"); /* [32, 16, 3, 3] */
    g_autofree float *wv = test_read(w->value);
    int64_t n = tdm_tensor_numel(w->value);
    double bound = 1.0 / sqrt(16.0 * 9.0), sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; i++) {
        g_assert_cmpfloat(fabs(wv[i]), <=, bound);
        sum += wv[i];
        sq += (double)wv[i] * wv[i];
    }
    g_assert_cmpfloat(fabs(sum / n), <, 0.05 * bound);
    g_assert_cmpfloat(fabs(sqrt(sq / n) - bound / sqrt(3.0)), <, 0.05 * bound);

    TdmParam *fb = tdm_model_find_param(a, "fc.bias");
    g_autofree float *fbv = test_read(fb->value);
    gboolean nonzero = FALSE;
    for (int i = 0; i < 10; i++) {
        g_assert_cmpfloat(fabs(fbv[i]), <=, 1.0 / 8.0);
        nonzero = nonzero || fbv[i] != 0.0f;
    }
    g_assert_true(nonzero);
    static const struct {
        const char *name;
        float v;
    } bn[] = {{"layer3.0.bn2.weight", 1.0f},
              {"layer3.0.bn2.bias", 0.0f},
              {"layer3.0.downsample.1.running_mean", 0.0f},
              {"layer3.0.downsample.1.running_var", 1.0f}};
    for (guint k = 0; k < G_N_ELEMENTS(bn); k++) {
        TdmParam *p = tdm_model_find_param(a, bn[k].name);
        g_assert_nonnull(p);
        g_autofree float *v = test_read(p->value);
        for (int i = 0; i < 64; i++) {
            g_assert_cmpfloat(v[i], ==, bn[k].v);
        }
    }
    tdm_model_free(a);
    tdm_model_free(b);
    tdm_model_free(c);
}

typedef struct {
    GPtrArray *names;
} HookLog;

static void log_hook(TdmModel *model, TdmParam *p, gpointer data)
{
    HookLog *log = data;
    g_ptr_array_add(log->names, p->full_name);
}

static TdmTensor *input_batch(TdmDevice *dev, int n, int c, int size, guint32 seed)
{
    int64_t shape[4] = {n, c, size, size};
    int64_t k = test_numel(4, shape);
    g_autofree float *x = g_new(float, k);
    test_fill_uniform(x, k, seed, -1.0, 1.0);
    return test_tensor_from(dev, 4, shape, x);
}

static void forward_backward(TdmModel *m, TdmTensor *x)
{
    GError *error = NULL;
    TdmTensor *y = test_forward(m, x);
    int64_t ny = tdm_tensor_numel(y);
    g_autofree float *r = g_new(float, ny);
    test_fill_uniform(r, ny, 77, -1.0, 1.0);
    TdmTensor *dy = test_tensor_from(m->device, y->ndim, y->shape, r);
    g_assert_true(tdm_model_backward(m, dy, &error));
    g_assert_no_error(error);
    tdm_tensor_unref(dy);
}

static void check_hook_order(TdmModel *m, TdmTensor *x)
{
    HookLog log = {g_ptr_array_new()};
    tdm_model_set_grad_ready_hook(m, log_hook, &log);
    for (int pass = 0; pass < 2; pass++) {
        g_ptr_array_set_size(log.names, 0);
        forward_backward(m, x);
        GPtrArray *expect = g_ptr_array_new();
        for (guint i = m->params->len; i-- > 0;) {
            TdmParam *p = g_ptr_array_index(m->params, i);
            if (!p->is_buffer && p->requires_grad) {
                g_ptr_array_add(expect, p->full_name);
            }
        }
        g_assert_cmpuint(log.names->len, ==, expect->len);
        for (guint i = 0; i < expect->len; i++) {
            g_assert_cmpstr(g_ptr_array_index(log.names, i), ==, g_ptr_array_index(expect, i));
        }
        g_ptr_array_unref(expect);
    }
    tdm_model_set_grad_ready_hook(m, NULL, NULL);
    g_ptr_array_unref(log.names);
}

static void test_hook_order(void)
{
    TdmDevice *dev = test_ref_device();
    TdmModel *m = zoo_model("resnet8", 1, 10, 16, 1);
    TdmTensor *x = input_batch(dev, 2, 1, 16, 1);
    check_hook_order(m, x);
    tdm_tensor_unref(x);
    tdm_model_free(m);

    m = zoo_model("lenet", 1, 10, 28, 1);
    x = input_batch(dev, 2, 1, 28, 2);
    check_hook_order(m, x);
    tdm_tensor_unref(x);
    tdm_model_free(m);
}

static gboolean all_zero(TdmTensor *t)
{
    g_autofree float *v = test_read(t);
    for (int64_t i = 0; i < tdm_tensor_numel(t); i++) {
        if (v[i] != 0.0f) {
            return FALSE;
        }
    }
    return TRUE;
}

static void test_freeze(void)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    TdmModel *m = zoo_model("resnet8", 1, 10, 16, 1);
    int64_t before = tdm_model_num_parameters(m);
    /* conv1.weight, bn1.{weight,bias}, 6 params in layer1.0 */
    g_assert_cmpint(tdm_model_freeze(m, "conv1, bn1,layer1."), ==, 9);
    TdmParam *c1 = tdm_model_find_param(m, "conv1.weight");
    TdmParam *l1 = tdm_model_find_param(m, "layer1.0.bn2.bias");
    TdmParam *l2 = tdm_model_find_param(m, "layer2.0.conv1.weight");
    g_assert_false(c1->requires_grad);
    g_assert_false(l1->requires_grad);
    g_assert_true(l2->requires_grad);
    g_assert_cmpint(tdm_model_num_parameters(m), ==,
                    before - 16 * 9 - 2 * 16 - 2 * (16 * 16 * 9 + 2 * 16));
    TdmTensor *x = input_batch(dev, 2, 1, 16, 3);
    g_assert_true(tdm_model_zero_grad(m, &error));
    check_hook_order(m, x);
    g_assert_true(all_zero(c1->grad));
    g_assert_true(all_zero(l1->grad));
    g_assert_false(all_zero(l2->grad));

    /* the optimizer skips frozen parameters */
    TdmOptimizer *opt = tdm_optimizer_new("sgd", m, NULL, NULL, &error);
    g_assert_no_error(error);
    for (guint i = 0; i < opt->params->len; i++) {
        g_assert_true(((TdmParam *)g_ptr_array_index(opt->params, i))->requires_grad);
    }
    tdm_optimizer_free(opt);
    tdm_tensor_unref(x);
    tdm_model_free(m);
}

/* Two backwards without zero_grad give twice the gradient; zero_grad clears. */
static void test_accumulate_and_zero(void)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    const char *names[] = {"lenet", "resnet8"};
    for (guint k = 0; k < G_N_ELEMENTS(names); k++) {
        TdmModel *m = zoo_model(names[k], 1, 10, 16, 5);
        TdmTensor *x = input_batch(dev, 3, 1, 16, 4);
        g_assert_true(tdm_model_zero_grad(m, &error));
        forward_backward(m, x);
        g_autofree float *g1 = test_read(m->grad_arena);
        forward_backward(m, x);
        g_autofree float *g2 = test_read(m->grad_arena);
        double gmax = 0.0;
        for (size_t i = 0; i < m->n_grads; i++) {
            g_assert_cmpfloat(fabs(g2[i] - 2.0f * g1[i]), <=, 1e-4 + 1e-4 * fabs(g1[i]));
            gmax = fmax(gmax, fabs(g1[i]));
        }
        g_assert_cmpfloat(gmax, >, 0.0);
        g_assert_true(tdm_model_zero_grad(m, &error));
        g_assert_no_error(error);
        g_assert_true(all_zero(m->grad_arena));
        tdm_tensor_unref(x);
        tdm_model_free(m);
    }
}

static void test_replicate(void)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    TdmModel *m = zoo_model("resnet8", 1, 10, 16, 9);
    tdm_model_freeze(m, "fc");
    TdmTensor *x = input_batch(dev, 2, 1, 16, 6);
    /* change a buffer so the copy must carry buffers too */
    test_forward(m, x);
    TdmDevice *dev1 = tdm_device_get("ref:1", &error); /* TDM_REF_DEVICES=2, set in main */
    g_assert_no_error(error);
    TdmModel *r = tdm_model_replicate(m, dev1, &error);
    g_assert_no_error(error);
    g_assert_nonnull(r);
    g_assert_cmpuint(r->params->len, ==, m->params->len);
    g_autofree float *va = test_read(m->value_arena);
    g_autofree float *vb = test_read(r->value_arena);
    g_assert_cmpmem(va, m->n_values * sizeof(float), vb, r->n_values * sizeof(float));
    for (guint i = 0; i < m->params->len; i++) {
        TdmParam *p = g_ptr_array_index(m->params, i), *q = g_ptr_array_index(r->params, i);
        g_assert_cmpstr(p->full_name, ==, q->full_name);
        g_assert_cmpint(p->requires_grad, ==, q->requires_grad);
    }
    tdm_model_set_training(m, FALSE);
    tdm_model_set_training(r, FALSE);
    g_autofree float *ya = test_read(test_forward(m, x));
    TdmTensor *x1 = input_batch(dev1, 2, 1, 16, 6);
    g_assert_true(r->value_arena->device == dev1);
    g_autofree float *yb = test_read(test_forward(r, x1));
    tdm_tensor_unref(x1);
    g_assert_cmpmem(ya, 20 * sizeof(float), yb, 20 * sizeof(float));
    tdm_tensor_unref(x);
    tdm_model_free(r);
    tdm_model_free(m);
}

static void test_shapes_and_errors(void)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    TdmModel *m = zoo_model("resnet18", 1, 10, 28, 1);
    TdmTensor *x = input_batch(dev, 2, 1, 28, 1);
    TdmTensor *y = test_forward(m, x);
    g_assert_cmpint(y->ndim, ==, 2);
    g_assert_cmpint(y->shape[0], ==, 2);
    g_assert_cmpint(y->shape[1], ==, 10);
    tdm_tensor_unref(x);
    /* wrong channel count: the error names the layer and the shape */
    x = input_batch(dev, 2, 3, 28, 1);
    g_assert_false(tdm_model_forward(m, x, &y, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_SHAPE);
    g_assert_nonnull(strstr(error->message, "conv1"));
    g_assert_nonnull(strstr(error->message, "[2, 3, 28, 28]"));
    g_clear_error(&error);
    tdm_tensor_unref(x);
    /* a batch of one reaches a 1x1 batch norm in layer4: the path is named */
    x = input_batch(dev, 1, 1, 28, 1);
    g_assert_false(tdm_model_forward(m, x, &y, &error));
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, "layer4.0.bn1: "));
    g_clear_error(&error);
    tdm_tensor_unref(x);
    tdm_model_free(m);

    /* BN backward after an eval-mode forward is refused */
    m = zoo_model("resnet8", 1, 10, 16, 1);
    x = input_batch(dev, 2, 1, 16, 1);
    tdm_model_set_training(m, FALSE);
    y = test_forward(m, x);
    TdmTensor *dy = tdm_tensor_new(dev, TDM_DTYPE_F32, 2, y->shape, &error);
    g_assert_false(tdm_model_backward(m, dy, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED);
    g_clear_error(&error);
    tdm_tensor_unref(dy);
    tdm_tensor_unref(x);
    tdm_model_free(m);

    /* forward of a module that was never placed */
    TdmModule *lin = tdm_linear_new(3, 2, TRUE);
    int64_t s[2] = {1, 3};
    float v[3] = {0};
    x = test_tensor_from(dev, 2, s, v);
    g_assert_false(tdm_module_forward(lin, x, &y, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_FAILED);
    g_clear_error(&error);
    tdm_tensor_unref(x);
    tdm_module_unref(lin);
}

/* A steady-state step reuses every slot: the output tensor is the same
 * object with the same storage from one step to the next. */
static void test_slots_reused(void)
{
    TdmDevice *dev = test_ref_device();
    TdmModel *m = zoo_model("resnet8", 1, 10, 16, 1);
    TdmTensor *x = input_batch(dev, 2, 1, 16, 1);
    forward_backward(m, x);
    TdmTensor *y1 = test_forward(m, x);
    TdmStorage *s1 = y1->storage;
    forward_backward(m, x);
    TdmTensor *y2 = test_forward(m, x);
    g_assert_true(y1 == y2);
    g_assert_true(s1 == y2->storage);
    tdm_tensor_unref(x);
    tdm_model_free(m);
}

/* A small model whose AdaptiveAvgPool2d(out, out) sees a 16 / `stride`
 * feature map of 8 channels (from a 16x16 image): out 3 of 16 and 7 of 4
 * are the bin-matrix GEMM, 8 of 8 the identity. */
static TdmModule *adaptive_model(int stride, int out)
{
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "conv", tdm_conv2d_new(1, 8, 3, stride, 1, TRUE));
    tdm_module_add_child(m, "relu", tdm_relu_new());
    tdm_module_add_child(m, "avgpool", tdm_adaptive_avgpool2d_new(out, out));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc", tdm_linear_new(8 * out * out, 10, TRUE));
    return m;
}

static TdmModule *compare_model(const char *name)
{
    TdmModelConfig cfg = {1, 10, 16, {0}};
    if (strcmp(name, "adaptive-3") == 0) {
        return adaptive_model(1, 3);
    }
    if (strcmp(name, "adaptive-7") == 0) {
        return adaptive_model(4, 7);
    }
    if (strcmp(name, "adaptive-8") == 0) {
        return adaptive_model(2, 8);
    }
    return tdm_model_zoo_create(name, &cfg, NULL);
}

/* Every other backend must train the zoo like ref does: same seed, same
 * input, then logits, input gradient and every parameter gradient agree.
 * This runs the layers over the backend's own (possibly blocked) layouts,
 * through Flatten's reorders, the global pool's views and the adaptive
 * pool's matrix and identity paths. */
static void compare_backends(const char *spec)
{
    GError *error = NULL;
    TdmDevice *other = tdm_device_get(spec, &error);
    if (other == NULL) {
        g_test_skip(error->message);
        g_clear_error(&error);
        return;
    }
    TdmDevice *ref = test_ref_device();
    const char *names[] = {"mlp", "lenet", "resnet8", "adaptive-3", "adaptive-7", "adaptive-8"};
    for (guint k = 0; k < G_N_ELEMENTS(names); k++) {
        TdmModel *a = test_model(compare_model(names[k]), ref, 21);
        TdmModel *b = test_model(compare_model(names[k]), other, 21);
        TdmTensor *xa = input_batch(ref, 4, 1, 16, 8);
        TdmTensor *xb = input_batch(other, 4, 1, 16, 8);
        TdmTensor *ya = test_forward(a, xa), *yb = test_forward(b, xb);
        g_autofree float *va = test_read(ya);
        g_autofree float *vb = test_read(yb);
        for (int i = 0; i < 40; i++) {
            g_assert_cmpfloat(fabs(va[i] - vb[i]), <=, 1e-4 + 1e-3 * fabs(va[i]));
        }
        g_autofree float *r = g_new(float, 40);
        test_fill_uniform(r, 40, 4, -1.0, 1.0);
        int64_t shape[2] = {4, 10};
        TdmTensor *da = test_tensor_from(ref, 2, shape, r), *db = test_tensor_from(other, 2, shape, r);
        TdmTensor *dxa = NULL, *dxb = NULL;
        g_assert_true(tdm_model_zero_grad(a, NULL) && tdm_model_zero_grad(b, NULL));
        g_assert_true(tdm_module_backward(a->root, da, TRUE, &dxa, &error));
        g_assert_no_error(error);
        g_assert_true(tdm_module_backward(b->root, db, TRUE, &dxb, &error));
        g_assert_no_error(error);
        g_autofree float *ga = test_read(dxa);
        g_autofree float *gb = test_read(dxb);
        for (int64_t i = 0; i < tdm_tensor_numel(xa); i++) {
            g_assert_cmpfloat(fabs(ga[i] - gb[i]), <=, 1e-4 + 1e-3 * fabs(ga[i]));
        }
        g_autofree float *pa = test_read(a->grad_arena);
        g_autofree float *pb = test_read(b->grad_arena);
        double scale = 0.0;
        for (size_t i = 0; i < a->n_grads; i++) {
            scale = fmax(scale, fabs(pa[i]));
        }
        for (size_t i = 0; i < a->n_grads; i++) {
            if (fabs(pa[i] - pb[i]) > 1e-4 * scale + 1e-3 * fabs(pa[i])) {
                g_error("%s on %s: gradient element %zu: ref %.7g, %s %.7g", names[k], spec, i,
                        pa[i], spec, pb[i]);
            }
        }
        tdm_tensor_unref(da);
        tdm_tensor_unref(db);
        tdm_tensor_unref(xa);
        tdm_tensor_unref(xb);
        tdm_model_free(a);
        tdm_model_free(b);
    }
}

static void test_cpu_matches_ref(void)
{
    compare_backends("cpu");
}

/* ---- the ref backend seen through counters, with or without fused ops ----
 * A copy of ref's class whose alloc/free track live bytes and whose fused
 * and relu ops count their calls, on a device that shares ref:0's state. */

typedef struct {
    TdmBackendClass klass;
    TdmDevice dev;
    const TdmBackendClass *orig;
    int64_t allocs, live, peak;
    int bn_relu, add_relu, relu;
} Wrap;

static Wrap *wrap_of(TdmDevice *dev)
{
    return (Wrap *)(void *)((char *)dev - offsetof(Wrap, dev));
}

static void *wrap_alloc(TdmDevice *dev, size_t n, GError **error)
{
    Wrap *w = wrap_of(dev);
    void *p = w->orig->alloc(dev, n, error);
    if (p != NULL) {
        w->allocs++;
        w->live += (int64_t)n;
        w->peak = MAX(w->peak, w->live);
    }
    return p;
}

static void wrap_free(TdmDevice *dev, void *ptr, size_t n)
{
    Wrap *w = wrap_of(dev);
    if (ptr != NULL) {
        w->live -= (int64_t)n;
    }
    w->orig->free(dev, ptr, n);
}

static gboolean wrap_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                          GError **error)
{
    wrap_of(dev)->relu++;
    return wrap_of(dev)->orig->relu_forward(dev, cache, x, y, error);
}

static gboolean wrap_bn_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *g,
                             TdmTensor *b, TdmTensor *rm, TdmTensor *rv, float mom, float eps,
                             gboolean training, TdmTensor *sm, TdmTensor *sv, TdmTensor *ws,
                             TdmTensor *y, GError **error)
{
    wrap_of(dev)->bn_relu++;
    return wrap_of(dev)->orig->batchnorm_relu_forward(dev, cache, x, g, b, rm, rv, mom, eps,
                                                      training, sm, sv, ws, y, error);
}

static gboolean wrap_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                              TdmTensor *y, GError **error)
{
    wrap_of(dev)->add_relu++;
    return wrap_of(dev)->orig->add_relu(dev, cache, a, b, y, error);
}

static Wrap *wrap_new(gboolean fused)
{
    TdmDevice *ref = test_ref_device();
    Wrap *w = g_new0(Wrap, 1);
    w->orig = ref->backend;
    w->klass = *ref->backend;
    w->klass.alloc = wrap_alloc;
    w->klass.free = wrap_free;
    w->klass.relu_forward = wrap_relu;
    w->klass.batchnorm_relu_forward = fused ? wrap_bn_relu : NULL;
    w->klass.batchnorm_relu_backward = fused ? w->orig->batchnorm_relu_backward : NULL;
    w->klass.add_relu = fused ? wrap_add_relu : NULL;
    w->dev = *ref;
    w->dev.backend = &w->klass;
    return w;
}

/* One training step that also asks for the input gradient; *dy is made on
 * the first call and reused (the steady state then allocates nothing). */
static float *step_and_read(TdmModel *m, TdmTensor *x, TdmTensor **dy, float **dx_out)
{
    GError *error = NULL;
    TdmTensor *y = test_forward(m, x);
    float *logits = test_read(y);
    if (*dy == NULL) {
        g_autofree float *r = g_new(float, tdm_tensor_numel(y));
        test_fill_uniform(r, tdm_tensor_numel(y), 4, -1.0, 1.0);
        *dy = test_tensor_from(m->device, y->ndim, y->shape, r);
    }
    TdmTensor *dx = NULL;
    g_assert_true(tdm_model_zero_grad(m, &error));
    g_assert_true(tdm_module_backward(m->root, *dy, TRUE, &dx, &error));
    g_assert_no_error(error);
    *dx_out = test_read(dx);
    return logits;
}

/* A backend without the fused ops trains exactly like one with them (the
 * ref backend's fused ops are its unfused ones, so every bit agrees), the
 * fused model does call them (every ReLU of resnet8 fused away), and both
 * reach a steady state that allocates nothing, the fused one with less
 * memory live at its peak. */
static void test_fused_and_fallback(void)
{
    Wrap *wf = wrap_new(TRUE), *wu = wrap_new(FALSE);
    TdmModelConfig cfg = {1, 10, 16, {0}};
    TdmModel *mf = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &wf->dev, 5);
    TdmModel *mu = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &wu->dev, 5);
    TdmTensor *xf = input_batch(&wf->dev, 4, 1, 16, 3), *xu = input_batch(&wu->dev, 4, 1, 16, 3);
    TdmTensor *dyf = NULL, *dyu = NULL;
    int64_t live_f = 0, allocs_u = 0;
    for (int pass = 0; pass < 3; pass++) {
        wf->bn_relu = wf->add_relu = wf->relu = wu->relu = 0;
        float *dxf, *dxu;
        g_autofree float *lf = step_and_read(mf, xf, &dyf, &dxf);
        g_autofree float *lu = step_and_read(mu, xu, &dyu, &dxu);
        g_assert_cmpmem(lf, 40 * sizeof(float), lu, 40 * sizeof(float));
        g_assert_cmpmem(dxf, 4 * 256 * sizeof(float), dxu, 4 * 256 * sizeof(float));
        g_free(dxf);
        g_free(dxu);
        g_autofree float *gf = test_read(mf->grad_arena), *gu = test_read(mu->grad_arena);
        g_assert_cmpmem(gf, mf->n_grads * sizeof(float), gu, mu->n_grads * sizeof(float));
        g_autofree float *vf = test_read(mf->value_arena), *vu = test_read(mu->value_arena);
        g_assert_cmpmem(vf, mf->n_values * sizeof(float), vu, mu->n_values * sizeof(float));
        /* stem + one per block: bn1 then relu, and each block's bn1 again
         * for conv2's backward (its output is lent); each block's sum
         * then relu */
        g_assert_cmpint(wf->bn_relu, ==, 4 + 3);
        g_assert_cmpint(wf->add_relu, ==, 3);
        g_assert_cmpint(wf->relu, ==, 0);
        g_assert_cmpint(wu->relu, ==, 7 + 3); /* unfused: the same ReLUs */
        if (pass == 1) {
            live_f = wf->live; /* ref's fused backward allocates a temporary */
            allocs_u = wu->allocs;
        }
    }
    g_assert_cmpint(wf->live, ==, live_f);
    g_assert_cmpint(wu->allocs, ==, allocs_u);
    g_test_message("peak live bytes: fused %" G_GINT64_FORMAT ", unfused %" G_GINT64_FORMAT,
                   wf->peak, wu->peak);
    g_assert_cmpint(wf->peak, <, wu->peak);
    tdm_tensor_unref(xf);
    tdm_tensor_unref(xu);
    tdm_tensor_unref(dyf);
    tdm_tensor_unref(dyu);
    tdm_model_free(mf);
    tdm_model_free(mu);
    g_assert_cmpint(wf->live, ==, 0);
    g_assert_cmpint(wu->live, ==, 0);
    g_free(wf);
    g_free(wu);
}

/* Input gradients share a few pooled buffers: the memory a resnet8 step
 * holds at its peak is well under one buffer per layer output (the old
 * scheme: the activations twice over). */
static void test_grad_pool_bounded(void)
{
    Wrap *w = wrap_new(TRUE);
    TdmModelConfig cfg = {1, 10, 16, {0}};
    TdmModel *m = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &w->dev, 5);
    TdmTensor *x = input_batch(&w->dev, 8, 1, 16, 3), *dy = NULL;
    float *dx;
    /* The input gradient a step returns stays valid (and its buffer busy)
     * into the next step, whose pool then needs one buffer more: the
     * steady state starts with the second step. */
    int64_t after_two = 0;
    for (int i = 0; i < 5; i++) {
        g_free(step_and_read(m, x, &dy, &dx));
        g_free(dx);
        if (i == 1) {
            after_two = w->live;
        }
    }
    g_assert_cmpint(w->live, ==, after_two);
    /* In units of a stage-1 activation ([8, 16, 16, 16] floats), besides
     * the parameter and gradient arenas: the forward keeps 2 (stem) + 4
     * (layer1) + 6 halves + 6 quarters = 10.5, the pool 6 buffers, a few
     * small vectors; one buffer per layer output and per input gradient
     * would be about 40. */
    int64_t act = 8 * 16 * 16 * 16 * 4;
    int64_t arenas = (int64_t)(m->n_values + m->n_grads) * 4;
    g_test_message("live after a step: %" G_GINT64_FORMAT " bytes besides the arenas "
                   "(%.1f stage-1 activations)",
                   w->live - arenas, (double)(w->live - arenas) / (double)act);
    g_assert_cmpint(w->live - arenas, <, 18 * act);
    tdm_tensor_unref(x);
    tdm_tensor_unref(dy);
    tdm_model_free(m);
    g_free(w);
}

/* One step of `m` on x, its gradient arena read back (and, when y_out is
 * not NULL, the logits into *y_out): through tdm_model_backward (planned)
 * or the root's own backward (never planned, the pool reuses buffers by
 * size alone). */
static float *step_grads(TdmModel *m, TdmTensor *x, gboolean planned, float **y_out)
{
    GError *error = NULL;
    TdmTensor *y = test_forward(m, x);
    if (y_out != NULL) {
        *y_out = test_read(y);
    }
    int64_t ny = tdm_tensor_numel(y);
    g_autofree float *r = g_new(float, ny);
    test_fill_uniform(r, ny, (guint32)ny, -1.0, 1.0);
    TdmTensor *dy = test_tensor_from(m->device, y->ndim, y->shape, r);
    g_assert_true(tdm_model_zero_grad(m, &error));
    if (planned) {
        g_assert_true(tdm_model_backward(m, dy, &error));
    } else {
        g_assert_true(tdm_module_backward(m->root, dy, FALSE, NULL, &error));
    }
    g_assert_no_error(error);
    tdm_tensor_unref(dy);
    return test_read(m->grad_arena);
}

static float *grads_after(TdmModel *m, TdmTensor *x, gboolean planned)
{
    return step_grads(m, x, planned, NULL);
}

/* The gradient pool plans one region from the first tdm_model_backward
 * (core/grad-pool.c): later passes give every bit the unplanned pool
 * gives, on new inputs, on a larger batch than the plan was made for
 * (requests that outgrow their slice get buffers of their own) and on a
 * smaller one, and the planned model holds less memory after a step. */
static void test_grad_pool_planned(void)
{
    Wrap *wp = wrap_new(TRUE), *wu = wrap_new(TRUE);
    TdmModelConfig cfg = {1, 10, 16, {0}};
    TdmModel *mp = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &wp->dev, 5);
    TdmModel *mu = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &wu->dev, 5);
    const int batch[] = {8, 8, 8, 12, 4, 8};
    int64_t live_p = 0, live_u = 0;
    for (guint i = 0; i < G_N_ELEMENTS(batch); i++) {
        TdmTensor *xp = input_batch(&wp->dev, batch[i], 1, 16, 10 + i);
        TdmTensor *xu = input_batch(&wu->dev, batch[i], 1, 16, 10 + i);
        g_autofree float *gp = grads_after(mp, xp, TRUE);
        g_autofree float *gu = grads_after(mu, xu, FALSE);
        g_assert_cmpmem(gp, mp->n_grads * sizeof(float), gu, mu->n_grads * sizeof(float));
        tdm_tensor_unref(xp);
        tdm_tensor_unref(xu);
        if (i == 2) {
            live_p = wp->live;
            live_u = wu->live;
        }
    }
    g_test_message("live after three steps of batch 8: planned %" G_GINT64_FORMAT
                   ", by size %" G_GINT64_FORMAT " bytes",
                   live_p, live_u);
    g_assert_cmpint(live_p, <, live_u);
    tdm_model_free(mp);
    tdm_model_free(mu);
    g_free(wp);
    g_free(wu);
}

/* Batch norm outputs lent by the gradient pool (module-private.h): each
 * block's bn1 (read by conv2's backward, computed again for it) and each
 * downsample's batch norm (read by the sum only) keep no buffer of their
 * own, so a resnet8 step holds less than with TDM_DEBUG=keep-outputs:
 * 2.5 stage-1 activations lent (1 in layer1, 2 halves in layer2, 2
 * quarters in layer3), less the recomputed output the gradient region
 * then holds. The forward is the same to the bit; the gradients are
 * the same but for the rounding of ref's eval-mode batch norm (it
 * normalises with the batch statistics rounded to f32, the training forward
 * with them in double). */
static void test_lent_outputs(void)
{
    Wrap *wl = wrap_new(TRUE), *wk = wrap_new(TRUE);
    TdmModelConfig cfg = {1, 10, 16, {0}};
    TdmModel *ml = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &wl->dev, 5);
    TdmModel *mk = test_model(tdm_model_zoo_create("resnet8", &cfg, NULL), &wk->dev, 5);
    TdmTensor *xl = input_batch(&wl->dev, 8, 1, 16, 3), *xk = input_batch(&wk->dev, 8, 1, 16, 3);
    double worst = 0.0;
    for (int i = 0; i < 3; i++) {
        g_autofree float *gl = grads_after(ml, xl, TRUE);
        g_autofree float *ll = test_read(test_forward(ml, xl));
        /* every call of the kept model keeps (the flag is read at each
         * forward) */
        g_setenv("TDM_DEBUG", "keep-outputs", TRUE);
        g_autofree float *gk = grads_after(mk, xk, TRUE);
        g_autofree float *lk = test_read(test_forward(mk, xk));
        g_unsetenv("TDM_DEBUG");
        for (size_t j = 0; j < ml->n_grads; j++) {
            double d = fabs((double)gl[j] - gk[j]) / (fabs((double)gk[j]) + 1e-3);
            worst = MAX(worst, d);
        }
        g_assert_cmpmem(ll, 8 * 10 * sizeof(float), lk, 8 * 10 * sizeof(float));
    }
    int64_t act = 8 * 16 * 16 * 16 * 4;
    g_test_message("gradients: largest relative difference %.3g; live after a step: lent %" G_GINT64_FORMAT
                   ", kept %" G_GINT64_FORMAT " bytes (%.2f stage-1 activations less)",
                   worst, wl->live, wk->live, (double)(wk->live - wl->live) / (double)act);
    g_assert_cmpfloat(worst, <, 1e-4);
    /* bn1's outputs lent in each stage's blocks and given back after the
     * forward; the convolutions' outputs before a batch norm and the
     * blocks' outputs lent until their last reader's backward, so that
     * the gradients of stage 1 take the bytes of the later stages'
     * activations: 4.5 activations of stage 1's size on resnet8 at 16 px
     * (1.5 with the first alone) */
    g_assert_cmpint(wk->live - wl->live, >=, 4 * act);
    /* Between two steps a training forward without a backward (it leaves
     * its lent outputs held) and an eval forward (the lent outputs' slots
     * get buffers of their own): the next step gives all of it back and
     * takes its planned slices again, as much memory as before. */
    TdmTensor *xe = input_batch(&wl->dev, 8, 1, 16, 4);
    g_autofree float *g0 = grads_after(ml, xl, TRUE);
    int64_t live_step = wl->live;
    test_forward(ml, xl);
    tdm_model_set_training(ml, FALSE);
    test_forward(ml, xe);
    tdm_model_set_training(ml, TRUE);
    g_autofree float *g1 = grads_after(ml, xl, TRUE);
    g_assert_cmpmem(g0, ml->n_grads * sizeof(float), g1, ml->n_grads * sizeof(float));
    g_test_message("live after a step that followed those forwards: %" G_GINT64_FORMAT " bytes",
                   wl->live);
    g_assert_cmpint(wl->live, ==, live_step);
    tdm_tensor_unref(xe);
    tdm_tensor_unref(xl);
    tdm_tensor_unref(xk);
    tdm_model_free(ml);
    tdm_model_free(mk);
    g_free(wl);
    g_free(wk);
}

/* A batch norm writes its input gradient over its output gradient only
 * when that buffer is the Sequential's own: not when it is a view of the
 * gradient the caller passed in (a Flatten after the batch norm hands back
 * such a view on plain tensors), which the caller may still read. */
static void test_bn_in_place_spares_caller(void)
{
    TdmDevice *dev = test_ref_device();
    TdmModule *root = tdm_sequential_new();
    tdm_module_add_child(root, "bn", tdm_batchnorm2d_new(4, 1e-5f, 0.1f));
    tdm_module_add_child(root, "flatten", tdm_flatten_new());
    TdmModel *m = test_model(root, dev, 3);
    TdmTensor *x = input_batch(dev, 2, 4, 3, 9);
    int64_t shape[2] = {2, 36};
    float r[72];
    test_fill_uniform(r, 72, 10, -1.0, 1.0);
    TdmTensor *dy = test_tensor_from(dev, 2, shape, r);
    for (int pass = 0; pass < 2; pass++) {
        GError *error = NULL;
        TdmTensor *dx = NULL;
        test_forward(m, x);
        g_assert_true(tdm_module_backward(m->root, dy, TRUE, &dx, &error));
        g_assert_no_error(error);
        g_autofree float *after = test_read(dy);
        g_assert_cmpmem(after, sizeof r, r, sizeof r);
        g_assert_nonnull(dx);
        g_assert_true(dx->storage != dy->storage);
    }
    tdm_tensor_unref(dy);
    tdm_tensor_unref(x);
    tdm_model_free(m);
}

/* conv (no bias), batch norm into Sequential s, named convN / bnN. */
static void add_conv_bn_pair(TdmModule *s, int n, int in, int out, int kernel, int stride)
{
    char name[16];
    g_snprintf(name, sizeof name, "conv%d", n);
    tdm_module_add_child(s, name, tdm_conv2d_new(in, out, kernel, stride, kernel / 2, FALSE));
    g_snprintf(name, sizeof name, "bn%d", n);
    tdm_module_add_child(s, name, tdm_batchnorm2d_new(out, 1e-5f, 0.1f));
}

/* A small resnet50: a stem (3x3 conv, batch norm, ReLU, max pool) and two
 * bottleneck blocks of torchvision's shape (1x1, 3x3, 1x1; the first with
 * a 1x1 downsample), 8 -> 16 channels. */
static TdmModule *mini_bottleneck_net(void)
{
    TdmModule *m = tdm_sequential_new();
    add_conv_bn_pair(m, 1, 3, 8, 3, 1);
    tdm_module_add_child(m, "relu", tdm_relu_new());
    tdm_module_add_child(m, "maxpool", tdm_maxpool2d_new(3, 2, 1));
    for (int b = 0; b < 2; b++) {
        int in = b == 0 ? 8 : 16;
        TdmModule *body = tdm_sequential_new(), *down = NULL;
        add_conv_bn_pair(body, 1, in, 4, 1, 1);
        tdm_module_add_child(body, "relu1", tdm_relu_new());
        add_conv_bn_pair(body, 2, 4, 4, 3, 1);
        tdm_module_add_child(body, "relu2", tdm_relu_new());
        add_conv_bn_pair(body, 3, 4, 16, 1, 1);
        if (b == 0) {
            down = tdm_sequential_new();
            tdm_module_add_child(down, "0", tdm_conv2d_new(in, 16, 1, 1, 0, FALSE));
            tdm_module_add_child(down, "1", tdm_batchnorm2d_new(16, 1e-5f, 0.1f));
        }
        tdm_module_add_child(m, b == 0 ? "block0" : "block1", tdm_residual_new(body, down, TRUE));
    }
    tdm_module_add_child(m, "avgpool", tdm_adaptive_avgpool2d_new(1, 1));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc", tdm_linear_new(16, 5, TRUE));
    return m;
}

/* Recomputation (tdm_model_set_recompute): convolution outputs read only
 * by a batch norm are lent and computed again in backward. Whatever the
 * policy, the forward is the same to the bit and the gradients are the
 * same but for the rounding of ref's restored batch-norm outputs (see
 * lent-outputs: a recomputed convolution reads one), over steps (the
 * pool's recorded first pass and the planned ones), with a frozen prefix
 * (the backward stops early and gives back what it restored) and on a
 * replica (which takes the policy along); a step holds less memory.
 * (With ref's batch norm made to normalise with its statistics rounded to
 * f32, the gradients were the same to the bit: tried.) */
static void test_recompute(void)
{
    const TdmRecompute policy[] = {TDM_RECOMPUTE_NONE, TDM_RECOMPUTE_POINTWISE, TDM_RECOMPUTE_ALL};
    const char *names[] = {"none", "pointwise", "all"};
    Wrap *w[3];
    TdmModel *m[3];
    int64_t live[3] = {0, 0, 0};
    double worst[3] = {0.0, 0.0, 0.0};
    g_autofree float *g0 = NULL, *y0 = NULL;
    for (int p = 0; p < 3; p++) {
        w[p] = wrap_new(TRUE);
        m[p] = test_model(mini_bottleneck_net(), &w[p]->dev, 7);
        tdm_model_set_recompute(m[p], policy[p]);
        g_assert_cmpint(tdm_model_get_recompute(m[p]), ==, policy[p]);
    }
    for (int step = 0; step < 3; step++) {
        if (step == 2) { /* the stem and block0 frozen: backward stops at block1 */
            for (int p = 0; p < 3; p++) {
                g_assert_cmpint(tdm_model_freeze(m[p], "conv1.,bn1.,block0."), >, 0);
            }
        }
        for (int p = 0; p < 3; p++) {
            TdmTensor *x = input_batch(&w[p]->dev, 8, 3, 16, 40 + step);
            g_autofree float *g = grads_after(m[p], x, TRUE);
            g_autofree float *y = test_read(test_forward(m[p], x));
            if (p == 0) {
                g_free(g0);
                g_free(y0);
                g0 = g_steal_pointer(&g);
                y0 = g_steal_pointer(&y);
            } else {
                for (size_t j = 0; j < m[0]->n_grads; j++) {
                    double d = fabs((double)g[j] - g0[j]) / (fabs((double)g0[j]) + 1e-3);
                    worst[p] = MAX(worst[p], d);
                }
                g_assert_cmpmem(y, 8 * 5 * sizeof(float), y0, 8 * 5 * sizeof(float));
            }
            if (step == 1) {
                live[p] = w[p]->live;
            }
            tdm_tensor_unref(x);
        }
    }
    /* In units of a block's output ([8, 16, 8, 8] floats, 32 KiB):
     * "pointwise" gives back the 1x1 convolutions' outputs after the
     * forward (conv1: a quarter, conv3 and the downsample: one), "all" the
     * 3x3 ones and the stem convolution's besides (1.5 more). Every
     * convolution output before a batch norm is lent in any case, held by
     * the pool's plan until its batch norm's backward, so that giving it
     * back earlier frees only what is live at the step's peak (measured:
     * 2.38 units less for "pointwise", 1.75 more for "all"). */
    int64_t act = 8 * 16 * 8 * 8 * 4;
    for (int p = 0; p < 3; p++) {
        g_test_message("%s: live after two steps %" G_GINT64_FORMAT " bytes, %.2f block "
                       "outputs less than none; gradients within %.3g",
                       names[p], live[p], (double)(live[0] - live[p]) / (double)act, worst[p]);
        g_assert_cmpfloat(worst[p], <, 1e-4);
    }
    g_assert_cmpint(live[0] - live[1], >=, 2 * act);
    g_assert_cmpint(live[1] - live[2], >=, act);
    /* a replica recomputes as its source does */
    GError *error = NULL;
    TdmModel *r = tdm_model_replicate(m[2], &w[2]->dev, &error);
    g_assert_no_error(error);
    g_assert_cmpint(tdm_model_get_recompute(r), ==, TDM_RECOMPUTE_ALL);
    tdm_model_free(r);
    for (int p = 0; p < 3; p++) {
        tdm_model_free(m[p]);
        g_free(w[p]);
    }
}

/* device_info of ref, but the memory is the device's own, as a GPU's. */
static gboolean wrap_info_not_host(TdmDevice *dev, TdmDeviceInfo *info, GError **error)
{
    Wrap *w = wrap_of(dev);
    if (!w->orig->device_info(dev, info, error)) {
        return FALSE;
    }
    info->host_accessible = FALSE;
    info->peak_bytes = w->peak; /* its own: what this model's tensors held */
    return TRUE;
}

/* The auto policy (core/recompute-choice.c): the first step lends every
 * candidate (as `all`) and measures; the steps after it recompute what it
 * chose, the pool recording its pass again when that is not everything.
 * The values are those of `none` as with the fixed policies.
 *
 * On a device with memory of its own (`host` FALSE: ref made to say so,
 * its peak the wrap's own, this model's tensors), the memory after the
 * choice lies between `all`'s and `none`'s: with this net's few channels
 * (a 1x1 convolution from 4 channels frees a byte per multiply-add) some
 * but not all convolutions are chosen. Set again, the policy chooses anew
 * on the next step (a trial, then a recorded pass, then the plan): the
 * memory is again below none's, not that of a plan made for the first
 * choice.
 *
 * On a host device the memory weighed is the process's resident set, in
 * which this net's activations are nothing: nothing is chosen, and the
 * memory is none's. */
static void recompute_auto(gboolean host)
{
    const TdmRecompute policy[] = {TDM_RECOMPUTE_AUTO, TDM_RECOMPUTE_NONE, TDM_RECOMPUTE_ALL};
    Wrap *w[3];
    TdmModel *m[3];
    int64_t live[3] = {0, 0, 0}, again[3] = {0, 0, 0};
    double worst = 0.0;
    g_autofree float *g0 = NULL, *y0 = NULL;
    tdm_device_reset_peak(test_ref_device()); /* the wraps count on ref:0 */
    for (int p = 0; p < 3; p++) {
        w[p] = wrap_new(TRUE);
        if (!host) {
            w[p]->klass.device_info = wrap_info_not_host;
        }
        m[p] = test_model(mini_bottleneck_net(), &w[p]->dev, 7);
        tdm_model_set_recompute(m[p], policy[p]);
    }
    g_assert_true(tdm_device_host_accessible(&w[0]->dev) == host);
    for (int step = 0; step < 6; step++) {
        if (step == 3) {
            tdm_model_set_recompute(m[0], TDM_RECOMPUTE_AUTO); /* trial again */
            w[0]->peak = w[0]->live; /* its peak from here, as tdm_device_reset_peak */
        }
        for (int p = 0; p < 3; p++) {
            TdmTensor *x = input_batch(&w[p]->dev, 8, 3, 16, 60 + step);
            g_autofree float *y = NULL;
            g_autofree float *g = step_grads(m[p], x, TRUE, &y);
            if (p == 0) {
                g_free(g0);
                g_free(y0);
                g0 = g_steal_pointer(&g);
                y0 = g_steal_pointer(&y);
            } else if (p == 1) {
                for (size_t j = 0; j < m[0]->n_grads; j++) {
                    double d = fabs((double)g[j] - g0[j]) / (fabs((double)g0[j]) + 1e-3);
                    worst = MAX(worst, d);
                }
                g_assert_cmpmem(y, 8 * 5 * sizeof(float), y0, 8 * 5 * sizeof(float));
            }
            if (step == 2) {
                live[p] = w[p]->live;
            } else if (step == 5) {
                again[p] = w[p]->live;
            }
            tdm_tensor_unref(x);
        }
    }
    g_test_message(
        "%s device: live after three steps: auto %" G_GINT64_FORMAT ", none %" G_GINT64_FORMAT
        ", all %" G_GINT64_FORMAT " bytes; after the second choice: auto %" G_GINT64_FORMAT
        ", none %" G_GINT64_FORMAT "; gradients within %.3g of none's",
        host ? "host" : "own-memory", live[0], live[1], live[2], again[0], again[1], worst);
    g_assert_cmpfloat(worst, <, 1e-4);
    if (host) {
        g_assert_cmpint(live[0], ==, live[1]);
        g_assert_cmpint(again[0], ==, again[1]);
    } else {
        g_assert_cmpint(live[0], <, live[1]);
        g_assert_cmpint(live[0], >, live[2]);
        g_assert_cmpint(again[0], <, again[1]);
    }
    g_assert_cmpint(tdm_model_get_recompute(m[0]), ==, TDM_RECOMPUTE_AUTO);
    for (int p = 0; p < 3; p++) {
        tdm_model_free(m[p]);
        g_free(w[p]);
    }
}

static void test_recompute_auto(void)
{
    recompute_auto(FALSE);
    recompute_auto(TRUE);
}

int main(int argc, char **argv)
{
    g_setenv("TDM_REF_DEVICES", "2", TRUE);
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/modules/param-counts", test_param_counts);
    g_test_add_func("/modules/zoo-defaults-unknown", test_zoo_defaults_and_unknown);
    g_test_add_func("/modules/zoo-min-size", test_zoo_min_size);
    g_test_add_func("/modules/adaptive-avgpool-bins", test_adaptive_avgpool_bins);
    g_test_add_func("/modules/arena-layout", test_arena_layout);
    g_test_add_func("/modules/init", test_init);
    g_test_add_func("/modules/hook-order", test_hook_order);
    g_test_add_func("/modules/freeze", test_freeze);
    g_test_add_func("/modules/accumulate-zero-grad", test_accumulate_and_zero);
    g_test_add_func("/modules/replicate", test_replicate);
    g_test_add_func("/modules/shapes-errors", test_shapes_and_errors);
    g_test_add_func("/modules/slots-reused", test_slots_reused);
    g_test_add_func("/modules/cpu-matches-ref", test_cpu_matches_ref);
    g_test_add_func("/modules/fused-and-fallback", test_fused_and_fallback);
    g_test_add_func("/modules/grad-pool-bounded", test_grad_pool_bounded);
    g_test_add_func("/modules/grad-pool-planned", test_grad_pool_planned);
    g_test_add_func("/modules/lent-outputs", test_lent_outputs);
    g_test_add_func("/modules/recompute", test_recompute);
    g_test_add_func("/modules/recompute-auto", test_recompute_auto);
    g_test_add_func("/modules/bn-in-place-spares-caller", test_bn_in_place_spares_caller);
    return g_test_run();
}
