/* SPDX-License-Identifier: MIT */
/* test-torchvision.c - the zoo's ImageNet models (resnet50, vgg11, vgg16,
 * vgg16_bn, alexnet) against torchvision's numbers.
 *
 * tests/oracle/torchvision_reference.py (run by tests/oracle/torchvision.sh)
 * writes, for each case, torchvision's state dict with random weights as
 * torch.save writes it, a .pth file like torchvision's pretrained ones
 * (metadata "init" names it; cases of one model share it), an input batch
 * with labels, and what torchvision computes from them in float64: the
 * logits (eval mode, or train mode where the metadata says train=1) and,
 * where it says grads=1, the mean cross-entropy and every parameter's
 * gradient (each as a whole, or every k-th element of a large one:
 * "sample" in the metadata). This program builds the zoo model named by
 * the metadata, loads the .pth strictly by name and shape, runs the same
 * batch through Tandem's public API on the ref backend and on the cpu
 * backend when it is available, and checks each tensor's relative error
 * ||ours - torch|| / ||torch|| against TOLERANCE. It prints TAP: one line
 * per (backend, case, stage), stages being the logits, then with gradients
 * the loss and the gradients.
 *
 * Usage: test-torchvision [--backends LIST] DIR CASE...
 */
#include <tandem/tandem.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle-util.h"

#define TOLERANCE 1e-4

typedef struct {
    const char *name;
    TdmSafeTensors *expected;
    TdmModelConfig cfg;
    char *model, *init;
    gboolean train, grads;
    int64_t sample;
} Case;

static int meta_int(const TdmSafeTensors *st, const char *key, int fallback)
{
    const char *v = tdm_safetensors_metadata(st, key);
    return v != NULL ? atoi(v) : fallback;
}

static int case_stages(const Case *c)
{
    return c->grads ? 3 : 1;
}

/* The reference gradient of `p` is all of it, or every k-th element
 * (k = numel / sample) of one over `sample` elements. */
static void compare_grad(Stage *st, const Case *c, TdmParam *p)
{
    GError *error = NULL;
    g_autofree char *key = g_strconcat("grad.", p->full_name, NULL);
    const TdmSafeTensor *ref = tdm_safetensors_get(c->expected, key);
    if (ref == NULL) {
        g_string_append_printf(st->problems, "reference tensor %s is missing\n", key);
        return;
    }
    int64_t numel = tdm_tensor_numel(p->grad);
    int64_t stride = numel > c->sample ? numel / c->sample : 1;
    int64_t count = (numel + stride - 1) / stride;
    if (ref->dtype != TDM_DTYPE_F32 || ref->nbytes != (size_t)count * sizeof(float)) {
        g_string_append_printf(st->problems,
                               "%s: %" G_GINT64_FORMAT " of Tandem's %" G_GINT64_FORMAT
                               " elements compared, reference has %zu bytes of %s\n",
                               key, count, numel, ref->nbytes, tdm_dtype_name(ref->dtype));
        return;
    }
    g_autofree float *all = tdm_tensor_read_f32(p->grad, &error);
    if (all == NULL) {
        g_string_append_printf(st->problems, "%s: read failed: %s\n", key, error->message);
        g_clear_error(&error);
        return;
    }
    for (int64_t i = 0; i < count; i++) {
        all[i] = all[i * stride];
    }
    stage_add(st, key, all, ref->data, (size_t)count);
}

/* The case's stages after a successful run: logits, then with gradients
 * the loss and every parameter's gradient. */
static void compare_stages(const Case *c, const char *label_base, TdmModel *model,
                           TdmTensor *logits, float loss)
{
    Stage st;
    g_autofree char *label =
        g_strdup_printf("%s logits (%s mode)", label_base, c->train ? "train" : "eval");
    stage_init(&st, TOLERANCE);
    stage_compare(&st, c->expected, "logits", logits);
    stage_finish(&st, label);
    if (!c->grads) {
        return;
    }

    const TdmSafeTensor *ref_loss = tdm_safetensors_get(c->expected, "loss");
    double want = ref_loss != NULL ? ((const float *)ref_loss->data)[0] : NAN;
    double rel = fabs((double)loss - want) / fabs(want);
    g_autofree char *diag = g_strdup_printf("loss %.7f, PyTorch %.7f, rel %.3e", loss, want, rel);
    g_autofree char *loss_label = g_strdup_printf("%s loss matches", label_base);
    tap_result(rel < TOLERANCE, loss_label, diag);

    g_autofree char *grad_label = g_strdup_printf("%s gradients of every parameter", label_base);
    stage_init(&st, TOLERANCE);
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        if (!p->is_buffer) {
            compare_grad(&st, c, p);
        }
    }
    for (guint i = 0; i < tdm_safetensors_count(c->expected); i++) {
        const TdmSafeTensor *e = tdm_safetensors_index(c->expected, i);
        if (g_str_has_prefix(e->name, "grad.") &&
            tdm_model_find_param(model, e->name + strlen("grad.")) == NULL) {
            g_string_append_printf(st.problems, "PyTorch parameter %s is not in Tandem's model\n",
                                   e->name + strlen("grad."));
        }
    }
    stage_finish(&st, grad_label);
}

static void check_case(TdmDevice *dev, const char *dir, const Case *c)
{
    g_autofree char *label_base = g_strdup_printf("%s %s", dev->name, c->name);
    g_autofree char *init_path = g_strdup_printf("%s/%s-init.pth", dir, c->init);
    g_autofree char *data_path = g_strdup_printf("%s/%s-data.safetensors", dir, c->name);
    TdmSafeTensors *data = NULL;
    TdmModel *model = NULL;
    TdmTensor *x = NULL, *labels = NULL, *dlogits = NULL, *logits = NULL;
    TdmOpCache *xent_cache = NULL;
    GError *error = NULL;
    const char *failed_at = "loading the input batch";
    int stages_done = 0;
    float loss = NAN;

    data = tdm_safetensors_load(data_path, &error);
    if (data == NULL || (x = upload(dev, data, "input", &error)) == NULL ||
        (labels = upload(dev, data, "labels", &error)) == NULL) {
        goto out;
    }
    failed_at = "creating the model";
    TdmModule *root = tdm_model_zoo_create(c->model, &c->cfg, &error);
    if (root == NULL || (model = tdm_model_new(root, dev, 0, &error)) == NULL) {
        goto out;
    }
    failed_at = "loading torchvision's state dict strictly";
    if (!tdm_model_load(model, init_path, TRUE, &error)) {
        goto out;
    }
    tdm_model_set_training(model, c->train);
    failed_at = "the forward pass";
    if (c->grads) {
        failed_at = "the forward and backward passes";
        dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
        if (!tdm_model_zero_grad(model, &error) || !tdm_model_forward(model, x, &logits, &error) ||
            !tdm_loss_cross_entropy(dev, &xent_cache, logits, labels, 0.0f, &loss, dlogits, NULL,
                                    &error) ||
            !tdm_model_backward(model, dlogits, &error)) {
            goto out;
        }
    } else if (!tdm_model_forward(model, x, &logits, &error)) {
        goto out;
    }
    failed_at = NULL;
    compare_stages(c, label_base, model, logits, loss);

out:
    if (failed_at != NULL) {
        g_autofree char *why =
            g_strdup_printf("%s: %s", failed_at, error != NULL ? error->message : "unknown error");
        for (; stages_done < case_stages(c); stages_done++) {
            g_autofree char *l = g_strdup_printf("%s stage %d", label_base, stages_done + 1);
            tap_result(FALSE, l, why);
        }
    }
    g_clear_error(&error);
    tdm_op_cache_clear(dev, &xent_cache);
    g_clear_pointer(&dlogits, tdm_tensor_unref);
    g_clear_pointer(&labels, tdm_tensor_unref);
    g_clear_pointer(&x, tdm_tensor_unref);
    g_clear_pointer(&model, tdm_model_free);
    g_clear_pointer(&data, tdm_safetensors_free);
}

/* Reads a case's expected values and the configuration in their metadata. */
static gboolean case_open(Case *c, const char *dir, const char *name, GError **error)
{
    g_autofree char *path = g_strdup_printf("%s/%s-expected.safetensors", dir, name);
    c->name = name;
    c->expected = tdm_safetensors_load(path, error);
    if (c->expected == NULL) {
        return FALSE;
    }
    const char *model = tdm_safetensors_metadata(c->expected, "model");
    if (model == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: no \"model\" in the metadata",
                    path);
        return FALSE;
    }
    c->model = g_strdup(model);
    const char *init = tdm_safetensors_metadata(c->expected, "init");
    c->init = g_strdup(init != NULL ? init : name);
    c->cfg.in_channels = meta_int(c->expected, "in_channels", 3);
    c->cfg.num_classes = meta_int(c->expected, "num_classes", 1000);
    c->cfg.image_size = meta_int(c->expected, "image_size", 224);
    c->train = meta_int(c->expected, "train", 0) != 0;
    c->grads = meta_int(c->expected, "grads", 0) != 0;
    c->sample = meta_int(c->expected, "sample", 65536);
    return TRUE;
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
        if (strcmp(argv[a], "--backends") == 0 && a + 1 < argc) {
            g_strfreev(wanted);
            wanted = g_strsplit(argv[++a], ",", -1);
            backends = (const char *const *)wanted;
        } else {
            fprintf(stderr, "%s: unknown option or missing value: %s\n", argv[0], argv[a]);
            return 2;
        }
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: %s [--backends LIST] DIR CASE...\n", argv[0]);
        return 2;
    }
    const char *dir = argv[a];
    int n_cases = argc - a - 1;
    Case *cases = g_new0(Case, n_cases);
    int stages = 0;
    for (int k = 0; k < n_cases; k++) {
        if (!case_open(&cases[k], dir, argv[a + 1 + k], &error)) {
            printf("Bail out! %s\n", error->message);
            return 1;
        }
        stages += case_stages(&cases[k]);
    }
    int n_backends = (int)g_strv_length((char **)backends);
    printf("1..%d\n", n_backends * stages);

    if (!tdm_registry_init(&error)) {
        printf("Bail out! registry: %s\n", error->message);
        return 1;
    }
    for (int b = 0; b < n_backends; b++) {
        TdmDevice *dev = tdm_device_get(backends[b], &error);
        if (dev != NULL) {
            for (int k = 0; k < n_cases; k++) {
                check_case(dev, dir, &cases[k]);
            }
            continue;
        }
        /* ref is the oracle's own backend, and backends asked for by name
         * are what the caller wants tested: they must be there. */
        gboolean required = b == 0 || wanted != NULL;
        g_autofree char *why =
            g_strdup_printf("%s backend unavailable: %s", backends[b], error->message);
        g_clear_error(&error);
        for (int k = 0; k < n_cases; k++) {
            for (int s = 0; s < case_stages(&cases[k]); s++) {
                g_autofree char *label =
                    g_strdup_printf("%s %s stage %d", backends[b], cases[k].name, s + 1);
                if (required) {
                    tap_result(FALSE, label, why);
                } else {
                    tap_skip(label, why);
                }
            }
        }
    }
    for (int k = 0; k < n_cases; k++) {
        g_clear_pointer(&cases[k].expected, tdm_safetensors_free);
        g_free(cases[k].model);
        g_free(cases[k].init);
    }
    g_free(cases);
    g_strfreev(wanted);
    return tap_failures() == 0 ? 0 : 1;
}
