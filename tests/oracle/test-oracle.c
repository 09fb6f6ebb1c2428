/* SPDX-License-Identifier: MIT */
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
 * Usage: test-oracle [--backends LIST] [--step-tolerance T] DIR MODEL...
 * --backends (comma-separated, e.g. cuda) tests those backends instead of
 * ref and cpu, each required (not skipped when unavailable): the GPU check
 * (tests/gpu/run) runs it on cuda. The number of SGD steps comes from the
 * reference's metadata ("steps", else 3), so does the learning rate ("lr",
 * else 0.05); step K uses the batch "input.K" /
 * "labels.K" when the data file has it (consecutive batches of a data set),
 * else "input" / "labels". --step-tolerance T replaces both tolerances of
 * the stages after the steps (parameters, updates): over 20 steps on
 * changing batches float rounding grows past 1e-4.
 */
#include <tandem/tandem.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle-util.h"

#define TOLERANCE 1e-4
/* The update p3 - p0 is a small difference of two f32 values, so its own
 * relative error is larger: PyTorch's float32 run reaches 6.5e-5 on resnet8's
 * BN biases. A forgotten weight decay shows as 1e-2 or more. */
#define UPDATE_TOLERANCE 1e-3
#define SGD_STEPS 3 /* when the reference's metadata does not say */
#define MAX_STEPS 1000
#define STAGES_PER_MODEL 5 /* logits, loss, gradients, parameters, updates */

static double step_tolerance; /* 0: TOLERANCE and UPDATE_TOLERANCE */

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
    TdmTensor *dlogits = NULL, *logits = NULL;
    /* Step k's batch; [k] NULL (k > 0): the batch of step 0 again. */
    TdmTensor *xs[MAX_STEPS] = {NULL}, *ls[MAX_STEPS] = {NULL};
    int steps = SGD_STEPS;
    float lr = 0.05f;
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
    const char *meta_steps = tdm_safetensors_metadata(expected, "steps");
    if (meta_steps != NULL) {
        steps = atoi(meta_steps);
        if (steps < 1 || steps > MAX_STEPS) {
            g_set_error(&error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "metadata steps=%s is not in 1..%d", meta_steps, MAX_STEPS);
            goto out;
        }
    }
    const char *meta_lr = tdm_safetensors_metadata(expected, "lr");
    if (meta_lr != NULL) {
        lr = (float)g_ascii_strtod(meta_lr, NULL);
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
    failed_at = "uploading the batches";
    for (int k = 0; k < steps; k++) {
        char *xkey = k == 0 ? g_strdup("input") : g_strdup_printf("input.%d", k);
        char *lkey = k == 0 ? g_strdup("labels") : g_strdup_printf("labels.%d", k);
        if (k == 0 || tdm_safetensors_get(data, xkey) != NULL) {
            xs[k] = upload(dev, data, xkey, &error);
            ls[k] = xs[k] != NULL ? upload(dev, data, lkey, &error) : NULL;
        }
        g_free(xkey);
        g_free(lkey);
        if (error != NULL) {
            goto out;
        }
    }
    dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    tdm_model_set_training(model, TRUE);

    failed_at = "the first forward/backward";
    if (!train_forward_backward(model, &xent_cache, xs[0], ls[0], dlogits, &logits, &loss,
                                &error)) {
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
    opts.lr = lr;
    opts.momentum = 0.9f;
    opts.weight_decay = 5e-4f;
    opt = tdm_optimizer_new("sgd", model, NULL, &opts, &error);
    if (opt == NULL || !tdm_optimizer_step(opt, &error)) {
        goto out;
    }
    for (int step = 1; step < steps; step++) {
        TdmTensor *x = xs[step] != NULL ? xs[step] : xs[0];
        TdmTensor *labels = ls[step] != NULL ? ls[step] : ls[0];
        if (!train_forward_backward(model, &xent_cache, x, labels, dlogits, &logits, &loss,
                                    &error) ||
            !tdm_optimizer_step(opt, &error)) {
            goto out;
        }
    }

    label = g_strdup_printf("%s parameters and buffers after %d SGD steps", label_base, steps);
    stage_init(&st, step_tolerance > 0 ? step_tolerance : TOLERANCE);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        char *key = g_strdup_printf("step%d.%s", steps, p->full_name);
        stage_compare(&st, expected, key, p->value);
        g_free(key);
    }
    char *prefix = g_strdup_printf("step%d.", steps);
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
    label = g_strdup_printf("%s parameter updates over %d SGD steps", label_base, steps);
    stage_init(&st, step_tolerance > 0 ? step_tolerance : UPDATE_TOLERANCE);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (p->is_buffer) {
            continue;
        }
        const TdmSafeTensor *p0 = tdm_safetensors_get(init, p->full_name);
        char *key = g_strdup_printf("step%d.%s", steps, p->full_name);
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
    for (int k = 0; k < MAX_STEPS; k++) {
        g_clear_pointer(&ls[k], tdm_tensor_unref);
        g_clear_pointer(&xs[k], tdm_tensor_unref);
    }
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
    static const char *const default_backends[] = {"ref", "cpu", NULL};
    const char *const *backends = default_backends;
    char **wanted = NULL;
    GError *error = NULL;

    /* Automake's TAP setup passes --tap to programs; this one always prints TAP. */
    int a = 1;
    for (; a < argc && g_str_has_prefix(argv[a], "--"); a++) {
        if (strcmp(argv[a], "--tap") == 0) {
            continue;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[a]);
            return 2;
        }
        if (strcmp(argv[a], "--backends") == 0) {
            g_strfreev(wanted);
            wanted = g_strsplit(argv[++a], ",", -1);
            backends = (const char *const *)wanted;
        } else if (strcmp(argv[a], "--step-tolerance") == 0) {
            step_tolerance = g_ascii_strtod(argv[++a], NULL);
        } else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[a]);
            return 2;
        }
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: %s [--backends LIST] [--step-tolerance T] DIR MODEL...\n",
                argv[0]);
        return 2;
    }
    const char *dir = argv[a];
    char **models = argv + a + 1;
    int n_models = argc - a - 1;
    int n_backends = (int)g_strv_length((char **)backends);
    printf("1..%d\n", n_backends * n_models * STAGES_PER_MODEL);

    if (!tdm_registry_init(&error)) {
        printf("Bail out! registry: %s\n", error->message);
        return 1;
    }
    for (int b = 0; b < n_backends; b++) {
        TdmDevice *dev = tdm_device_get(backends[b], &error);
        if (dev == NULL) {
            /* ref is the oracle's own backend, and backends asked for by
             * name are what the caller wants tested: they must be there. */
            gboolean required = b == 0 || wanted != NULL;
            char *why = g_strdup_printf("%s backend unavailable: %s", backends[b], error->message);
            for (int m = 0; m < n_models; m++) {
                for (int s = 0; s < STAGES_PER_MODEL; s++) {
                    char *label = g_strdup_printf("%s %s stage %d", backends[b], models[m], s + 1);
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
            check_model(dev, dir, models[m]);
        }
    }
    g_strfreev(wanted);
    return tap_failures() == 0 ? 0 : 1;
}
