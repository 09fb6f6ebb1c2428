/* test-oracle.c - whole models checked against PyTorch's numbers.
 *
 * tests/oracle/make_reference.py (run by tests/oracle/run.sh) writes, for
 * each model, the initial weights, an input batch with labels, and what
 * PyTorch computes from them: the logits and loss of the first forward in
 * train mode, every parameter's gradient after the first backward of the mean
 * cross-entropy, and every parameter and BN running buffer after 3 SGD steps
 * (lr 0.05, momentum 0.9, weight decay 5e-4) on the same batch. This program
 * repeats that through Tandem's public API only, on the `ref` backend and on
 * the `cpu` backend when it is available, and checks each tensor's relative
 * error ||ours - torch|| / ||torch|| against TOLERANCE; the parameters'
 * updates over the 3 steps (value minus initial value) are checked too,
 * against the looser UPDATE_TOLERANCE. It prints TAP: one line per (backend,
 * model, stage), with the worst tensors as diagnostics.
 *
 * Usage: test-oracle DIR MODEL...
 */
#include <tandem/tandem.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TOLERANCE 1e-4
/* The update p3 - p0 is a small difference of two f32 values, so its own
 * relative error is larger: PyTorch's float32 run reaches 6.5e-5 on resnet8's
 * BN biases. A forgotten weight decay shows as 1e-2 or more. */
#define UPDATE_TOLERANCE 1e-3
#define SGD_STEPS 3
#define STAGES_PER_MODEL 5 /* logits, loss, gradients, parameters, updates */
#define WORST_SHOWN 3

static int tap_count;
static int tap_failures;

static void tap_result(gboolean ok, const char *name, const char *diag)
{
    tap_count++;
    if (!ok) {
        tap_failures++;
    }
    printf("%s %d - %s\n", ok ? "ok" : "not ok", tap_count, name);
    if (diag != NULL && *diag != '\0') {
        gchar **lines = g_strsplit(diag, "\n", -1);
        for (int i = 0; lines[i] != NULL; i++) {
            if (*lines[i] != '\0') {
                printf("# %s\n", lines[i]);
            }
        }
        g_strfreev(lines);
    }
    fflush(stdout);
}

static void tap_skip(const char *name, const char *why)
{
    tap_count++;
    printf("ok %d - %s # SKIP %s\n", tap_count, name, why);
}

/* One compared tensor, for sorting the worst ones. */
typedef struct {
    char *name;
    double rel;
} Comparison;

static gint comparison_worst_first(gconstpointer a, gconstpointer b)
{
    const Comparison *x = *(const Comparison *const *)a;
    const Comparison *y = *(const Comparison *const *)b;
    /* NaN sorts first: it is the worst possible result. */
    if (isnan(x->rel) || x->rel > y->rel) {
        return -1;
    }
    return (isnan(y->rel) || x->rel < y->rel) ? 1 : 0;
}

static void comparison_free(gpointer p)
{
    Comparison *c = p;
    g_free(c->name);
    g_free(c);
}

/* ||ours - ref|| / ||ref|| (the absolute norm when ref is all zeros). */
static double relative_error(const float *ours, const float *ref, size_t n)
{
    double diff = 0.0;
    double norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)ours[i] - (double)ref[i];
        diff += d * d;
        norm += (double)ref[i] * (double)ref[i];
    }
    if (norm == 0.0) {
        return sqrt(diff);
    }
    return sqrt(diff / norm);
}

/* A stage's set of comparisons; problems (missing tensors, read errors,
 * shape mismatches) are collected as text and make the stage fail. */
typedef struct {
    GPtrArray *cmp;
    GString *problems;
    double tolerance;
} Stage;

static void stage_init(Stage *s, double tolerance)
{
    s->cmp = g_ptr_array_new_with_free_func(comparison_free);
    s->problems = g_string_new(NULL);
    s->tolerance = tolerance;
}

static void stage_finish(Stage *s, const char *label)
{
    GString *diag = g_string_new(s->problems->str);
    gboolean ok = s->problems->len == 0 && s->cmp->len > 0;
    guint bad = 0;

    if (s->cmp->len == 0 && s->problems->len == 0) {
        g_string_append(diag, "no tensor compared\n");
    }
    g_ptr_array_sort(s->cmp, comparison_worst_first);
    for (guint i = 0; i < s->cmp->len; i++) {
        const Comparison *c = g_ptr_array_index(s->cmp, i);
        gboolean good = c->rel < s->tolerance; /* FALSE for NaN */
        if (!good) {
            ok = FALSE;
            bad++;
        }
        if (!good || i < WORST_SHOWN) {
            g_string_append_printf(diag, "%s %-40s rel %.3e%s\n", good ? "  " : "!!", c->name,
                                   c->rel, good ? "" : " (over tolerance)");
        }
    }
    char *name = g_strdup_printf("%s: %u tensors, rel error < %.0e%s", label, s->cmp->len,
                                 s->tolerance, bad ? " (some over)" : "");
    tap_result(ok, name, diag->str);
    g_free(name);
    g_string_free(diag, TRUE);
    g_ptr_array_unref(s->cmp);
    g_string_free(s->problems, TRUE);
}

/* Compare device tensor `t` with the f32 reference `key` of `expected`;
 * with `origin` (the initial value, same size) compare t - origin with
 * ref - origin instead. */
static void stage_compare_from(Stage *s, const TdmSafeTensors *expected, const char *key,
                               TdmTensor *t, const TdmSafeTensor *origin)
{
    const TdmSafeTensor *ref = tdm_safetensors_get(expected, key);
    GError *error = NULL;

    if (ref == NULL) {
        g_string_append_printf(s->problems, "reference tensor %s is missing\n", key);
        return;
    }
    if (origin != NULL && (origin->dtype != TDM_DTYPE_F32 || origin->nbytes != ref->nbytes)) {
        g_string_append_printf(s->problems,
                               "initial value of %s has %zu bytes of %s, "
                               "expected %zu of f32\n",
                               key, origin->nbytes, tdm_dtype_name(origin->dtype), ref->nbytes);
        return;
    }
    if (t == NULL) {
        g_string_append_printf(s->problems, "%s: Tandem has no such tensor\n", key);
        return;
    }
    int64_t numel = tdm_tensor_numel(t);
    if (ref->dtype != TDM_DTYPE_F32 || (size_t)numel * sizeof(float) != ref->nbytes) {
        char *shape = tdm_tensor_shape_string(t);
        g_string_append_printf(s->problems,
                               "%s: Tandem's shape %s holds %" G_GINT64_FORMAT
                               " floats, reference has %zu bytes of %s\n",
                               key, shape, numel, ref->nbytes, tdm_dtype_name(ref->dtype));
        g_free(shape);
        return;
    }
    float *ours = g_new(float, numel > 0 ? numel : 1);
    if (!tdm_tensor_read(t, ours, &error)) {
        g_string_append_printf(s->problems, "%s: read failed: %s\n", key, error->message);
        g_clear_error(&error);
        g_free(ours);
        return;
    }
    Comparison *c = g_new0(Comparison, 1);
    if (origin == NULL) {
        c->name = g_strdup(key);
        c->rel = relative_error(ours, ref->data, (size_t)numel);
    } else {
        const float *p0 = origin->data;
        float *want = g_new(float, numel > 0 ? numel : 1);
        for (int64_t i = 0; i < numel; i++) {
            ours[i] -= p0[i];
            want[i] = ((const float *)ref->data)[i] - p0[i];
        }
        c->name = g_strdup_printf("%s - init", key);
        c->rel = relative_error(ours, want, (size_t)numel);
        g_free(want);
    }
    g_ptr_array_add(s->cmp, c);
    g_free(ours);
}

static void stage_compare(Stage *s, const TdmSafeTensors *expected, const char *key, TdmTensor *t)
{
    stage_compare_from(s, expected, key, t, NULL);
}

/* Device tensor holding a host safetensors entry (transfer full). */
static TdmTensor *upload(TdmDevice *dev, const TdmSafeTensors *st, const char *key, GError **error)
{
    const TdmSafeTensor *src = tdm_safetensors_get(st, key);
    if (src == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND, "reference data has no tensor %s", key);
        return NULL;
    }
    TdmTensor *t = tdm_tensor_new(dev, src->dtype, src->ndim, src->shape, error);
    if (t == NULL) {
        return NULL;
    }
    if (!tdm_tensor_write(t, src->data, error)) {
        tdm_tensor_unref(t);
        return NULL;
    }
    return t;
}

/* One forward + mean cross-entropy + backward; *logits and *loss get the
 * results (logits transfer none, owned by the model). */
static gboolean train_forward_backward(TdmModel *model, TdmOpCache **xent_cache, TdmTensor *x,
                                       TdmTensor *labels, TdmTensor *dlogits, TdmTensor **logits,
                                       float *loss, GError **error)
{
    if (!tdm_model_zero_grad(model, error)) {
        return FALSE;
    }
    if (!tdm_model_forward(model, x, logits, error)) {
        return FALSE;
    }
    if (!tdm_loss_cross_entropy(model->device, xent_cache, *logits, labels, 0.0f, loss, dlogits,
                                NULL, error)) {
        return FALSE;
    }
    return tdm_model_backward(model, dlogits, error);
}

/* Runs the reference scenario for one model on one device and prints its
 * STAGES_PER_MODEL TAP lines (as failures if anything errors out). */
static void check_model(TdmDevice *dev, const char *dir, const char *model_name)
{
    char *label_base = g_strdup_printf("%s %s", dev->name, model_name);
    char *init_path = g_strdup_printf("%s/%s-init.safetensors", dir, model_name);
    char *data_path = g_strdup_printf("%s/%s-data.safetensors", dir, model_name);
    char *exp_path = g_strdup_printf("%s/%s-expected.safetensors", dir, model_name);
    TdmSafeTensors *data = NULL, *expected = NULL, *init = NULL;
    TdmModel *model = NULL;
    TdmOptimizer *opt = NULL;
    TdmTensor *x = NULL, *labels = NULL, *dlogits = NULL, *logits = NULL;
    TdmOpCache *xent_cache = NULL;
    GError *error = NULL;
    const char *failed_at = NULL;
    int stages_done = 0;
    float loss = NAN;
    char *label;
    Stage st;

    TdmModelConfig cfg = {.in_channels = 1, .num_classes = 10, .image_size = 28};

    failed_at = "loading the reference files";
    data = tdm_safetensors_load(data_path, &error);
    if (data == NULL || (expected = tdm_safetensors_load(exp_path, &error)) == NULL ||
        (init = tdm_safetensors_load(init_path, &error)) == NULL) {
        goto out;
    }
    failed_at = "creating the model";
    TdmModule *root = tdm_model_zoo_create(model_name, &cfg, &error);
    if (root == NULL || (model = tdm_model_new(root, dev, 0, &error)) == NULL) {
        goto out;
    }
    failed_at = "loading PyTorch's initial weights";
    if (!tdm_model_load(model, init_path, TRUE, &error)) {
        goto out;
    }
    failed_at = "uploading the batch";
    if ((x = upload(dev, data, "input", &error)) == NULL ||
        (labels = upload(dev, data, "labels", &error)) == NULL) {
        goto out;
    }
    dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    tdm_model_set_training(model, TRUE);

    failed_at = "the first forward/backward";
    if (!train_forward_backward(model, &xent_cache, x, labels, dlogits, &logits, &loss, &error)) {
        goto out;
    }

    label = g_strdup_printf("%s first forward logits", label_base);
    stage_init(&st, TOLERANCE);
    stage_compare(&st, expected, "logits", logits);
    stage_finish(&st, label);
    g_free(label);
    stages_done++;

    {
        const TdmSafeTensor *ref_loss = tdm_safetensors_get(expected, "loss");
        double want = ref_loss != NULL ? ((const float *)ref_loss->data)[0] : NAN;
        double rel = fabs((double)loss - want) / fabs(want);
        char *diag = g_strdup_printf("loss %.7f, PyTorch %.7f, rel %.3e", loss, want, rel);
        label = g_strdup_printf("%s first loss matches", label_base);
        tap_result(rel < TOLERANCE, label, diag);
        g_free(label);
        g_free(diag);
        stages_done++;
    }

    label = g_strdup_printf("%s gradients after the first backward", label_base);
    stage_init(&st, TOLERANCE);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (p->is_buffer) {
            continue;
        }
        char *key = g_strconcat("grad.", p->full_name, NULL);
        stage_compare(&st, expected, key, p->grad);
        g_free(key);
    }
    /* Every parameter PyTorch has must exist in Tandem too. */
    for (guint i = 0; i < tdm_safetensors_count(expected); i++) {
        const TdmSafeTensor *e = tdm_safetensors_index(expected, i);
        if (g_str_has_prefix(e->name, "grad.") &&
            tdm_model_find_param(model, e->name + strlen("grad.")) == NULL) {
            g_string_append_printf(st.problems, "PyTorch parameter %s is not in Tandem's model\n",
                                   e->name + strlen("grad."));
        }
    }
    stage_finish(&st, label);
    g_free(label);
    stages_done++;

    failed_at = "the SGD steps";
    TdmOptimizerOptions opts;
    tdm_optimizer_options_init(&opts);
    opts.lr = 0.05f;
    opts.momentum = 0.9f;
    opts.weight_decay = 5e-4f;
    opt = tdm_optimizer_new("sgd", model, NULL, &opts, &error);
    if (opt == NULL || !tdm_optimizer_step(opt, &error)) {
        goto out;
    }
    for (int step = 1; step < SGD_STEPS; step++) {
        if (!train_forward_backward(model, &xent_cache, x, labels, dlogits, &logits, &loss,
                                    &error) ||
            !tdm_optimizer_step(opt, &error)) {
            goto out;
        }
    }

    label = g_strdup_printf("%s parameters and buffers after %d SGD steps", label_base, SGD_STEPS);
    stage_init(&st, TOLERANCE);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        char *key = g_strdup_printf("step%d.%s", SGD_STEPS, p->full_name);
        stage_compare(&st, expected, key, p->value);
        g_free(key);
    }
    char *prefix = g_strdup_printf("step%d.", SGD_STEPS);
    for (guint i = 0; i < tdm_safetensors_count(expected); i++) {
        const TdmSafeTensor *e = tdm_safetensors_index(expected, i);
        if (g_str_has_prefix(e->name, prefix) &&
            tdm_model_find_param(model, e->name + strlen(prefix)) == NULL) {
            g_string_append_printf(st.problems, "PyTorch tensor %s is not in Tandem's model\n",
                                   e->name + strlen(prefix));
        }
    }
    g_free(prefix);
    stage_finish(&st, label);
    g_free(label);
    stages_done++;

    /* The same parameters as updates from their initial values: far more
     * sensitive to the optimizer's details (weight decay, momentum) than the
     * values themselves, which move little in 3 steps. */
    label = g_strdup_printf("%s parameter updates over %d SGD steps", label_base, SGD_STEPS);
    stage_init(&st, UPDATE_TOLERANCE);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (p->is_buffer) {
            continue;
        }
        const TdmSafeTensor *p0 = tdm_safetensors_get(init, p->full_name);
        char *key = g_strdup_printf("step%d.%s", SGD_STEPS, p->full_name);
        if (p0 == NULL) {
            g_string_append_printf(st.problems, "no initial value for %s\n", p->full_name);
        } else {
            stage_compare_from(&st, expected, key, p->value, p0);
        }
        g_free(key);
    }
    stage_finish(&st, label);
    g_free(label);
    stages_done++;
    failed_at = NULL;

out:
    if (failed_at != NULL) {
        char *diag =
            g_strdup_printf("%s: %s", failed_at, error != NULL ? error->message : "unknown error");
        for (; stages_done < STAGES_PER_MODEL; stages_done++) {
            label = g_strdup_printf("%s stage %d", label_base, stages_done + 1);
            tap_result(FALSE, label, diag);
            g_free(label);
        }
        g_free(diag);
    }
    g_clear_error(&error);
    if (opt != NULL) {
        tdm_optimizer_free(opt);
    }
    tdm_op_cache_clear(dev, &xent_cache);
    g_clear_pointer(&dlogits, tdm_tensor_unref);
    g_clear_pointer(&labels, tdm_tensor_unref);
    g_clear_pointer(&x, tdm_tensor_unref);
    g_clear_pointer(&model, tdm_model_free);
    g_clear_pointer(&expected, tdm_safetensors_free);
    g_clear_pointer(&init, tdm_safetensors_free);
    g_clear_pointer(&data, tdm_safetensors_free);
    g_free(exp_path);
    g_free(data_path);
    g_free(init_path);
    g_free(label_base);
}

int main(int argc, char **argv)
{
    static const char *const backends[] = {"ref", "cpu"};
    GError *error = NULL;
    int first_model = 2;

    /* Automake's TAP setup passes --tap to programs; this one always prints TAP. */
    if (argc > 1 && strcmp(argv[1], "--tap") == 0) {
        argv++;
        argc--;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR MODEL...\n", argv[0]);
        return 2;
    }
    int n_models = argc - first_model;
    printf("1..%d\n", (int)G_N_ELEMENTS(backends) * n_models * STAGES_PER_MODEL);

    if (!tdm_registry_init(&error)) {
        printf("Bail out! registry: %s\n", error->message);
        return 1;
    }
    for (guint b = 0; b < G_N_ELEMENTS(backends); b++) {
        TdmDevice *dev = tdm_device_get(backends[b], &error);
        if (dev == NULL) {
            /* ref is the oracle's own backend: it must be there. */
            gboolean required = b == 0;
            char *why = g_strdup_printf("%s backend unavailable: %s", backends[b], error->message);
            for (int m = 0; m < n_models; m++) {
                for (int s = 0; s < STAGES_PER_MODEL; s++) {
                    char *label = g_strdup_printf("%s %s stage %d", backends[b],
                                                  argv[first_model + m], s + 1);
                    if (required) {
                        tap_result(FALSE, label, why);
                    } else {
                        tap_skip(label, why);
                    }
                    g_free(label);
                }
            }
            g_free(why);
            g_clear_error(&error);
            continue;
        }
        for (int m = 0; m < n_models; m++) {
            check_model(dev, argv[1], argv[first_model + m]);
        }
    }
    return tap_failures == 0 ? 0 : 1;
}
