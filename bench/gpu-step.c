/* SPDX-License-Identifier: MIT */
/* bench/gpu-step.c - training-step throughput of a zoo model on one device.
 *
 * Usage: gpu-step [--device SPEC] [--model NAME] [--batch N] [--channels C]
 *                 [--size S] [--classes K] [--warmup N] [--steps N]
 *                 [--precision fp32|tf32|bf16] [--check-steady]
 *
 * Tandem's side of the GPU benchmark (bench/peer_gpu.py is PyTorch's, and
 * tests/gpu/run puts the two side by side). It builds the model on the
 * device, writes one synthetic batch (uniform inputs in [-1, 1), random
 * labels) to the device once, and runs WARMUP + STEPS training steps:
 * zero_grad, forward, mean cross-entropy, backward, SGD (lr 0.01, momentum
 * 0.9, weight decay 5e-4), exactly what peer_gpu.py does. The loss comes
 * back to the host every step (PyTorch's side calls loss.item()), so each
 * step ends in a synchronisation on both sides; the step is timed with the
 * wall clock after tdm_device_synchronize(), and the median over STEPS
 * gives images/s. Only the public API is used, so the program builds and
 * runs on every backend (the dry run of tests/gpu/run uses cpu or ref).
 *
 * --precision sets the device's precision (tdm_device_set_precision: TF32
 * or bf16 GEMM and convolution, fp32 master weights) before the model is
 * built; a backend that cannot refuses with a clear error. --check-steady fails (exit 1) when the
 * allocator's reserved bytes or the peak of allocated bytes grow after the warm-up: a steady step
 * must reuse what the first steps allocated.
 *
 * Output: one line "RESULT impl=tandem model=... img_per_s=... peak_mib=...
 * reserved_mib=... steady=yes|no", then a readable sentence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tandem/tandem.h>

#define MIB (1024.0 * 1024.0)

typedef struct {
    const char *device;
    const char *model;
    const char *precision;
    int batch, channels, size, classes, warmup, steps;
    gboolean check_steady;
} Options;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static gboolean parse_int(const char *arg, const char *value, int min, int *out)
{
    char *end = NULL;
    long v = value != NULL ? strtol(value, &end, 10) : 0;
    if (value == NULL || *value == '\0' || *end != '\0' || v < min || v > 1 << 24) {
        fprintf(stderr, "gpu-step: %s needs an integer >= %d, got '%s'\n", arg, min,
                value != NULL ? value : "");
        return FALSE;
    }
    *out = (int)v;
    return TRUE;
}

typedef struct {
    const char *name;
    int *out;
    int min;
} IntOption;

static gboolean parse_options(int argc, char **argv, Options *o)
{
    *o = (Options){.device = "cuda", .model = "resnet8", .precision = "fp32", .batch = 1024,
                   .channels = 1, .size = 28, .classes = 10, .warmup = 10, .steps = 50};
    /* The options that take a value: text kept as given, or integers. */
    const struct {
        const char *name;
        const char **out;
    } texts[] = {{"--device", &o->device}, {"--model", &o->model}, {"--precision", &o->precision}};
    const IntOption ints[] = {{"--batch", &o->batch, 1},   {"--channels", &o->channels, 1},
                              {"--size", &o->size, 1},     {"--classes", &o->classes, 2},
                              {"--warmup", &o->warmup, 1}, {"--steps", &o->steps, 1}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        gboolean ok = TRUE;
        if (strcmp(a, "--check-steady") == 0) {
            o->check_steady = TRUE;
            continue;
        }
        const char **text = NULL;
        const IntOption *num = NULL;
        for (size_t k = 0; k < G_N_ELEMENTS(texts); k++) {
            text = strcmp(a, texts[k].name) == 0 ? texts[k].out : text;
        }
        for (size_t k = 0; k < G_N_ELEMENTS(ints); k++) {
            num = strcmp(a, ints[k].name) == 0 ? &ints[k] : num;
        }
        if (text != NULL) {
            *text = v;
        } else if (num != NULL) {
            ok = parse_int(a, v, num->min, num->out);
        } else {
            fprintf(stderr,
                    "gpu-step: unknown argument '%s' (see the header of bench/gpu-step.c)\n", a);
            return FALSE;
        }
        if (!ok || v == NULL) {
            if (v == NULL) {
                fprintf(stderr, "gpu-step: %s needs a value\n", a);
            }
            return FALSE;
        }
        i++;
    }
    return TRUE;
}

/* One synthetic batch, written to the device once: inputs uniform in
 * [-1, 1), labels uniform over the classes (i64, as PyTorch's). */
static gboolean make_batch(TdmDevice *dev, const Options *o, TdmTensor **x, TdmTensor **labels,
                           GError **error)
{
    int64_t xs[4] = {o->batch, o->channels, o->size, o->size}, ls[1] = {o->batch};
    size_t n = (size_t)o->batch * (size_t)o->channels * (size_t)o->size * (size_t)o->size;
    g_autofree float *hx = g_new(float, n);
    g_autofree int64_t *hl = g_new(int64_t, o->batch);
    g_autoptr(GRand) rng = g_rand_new_with_seed(7);
    for (size_t i = 0; i < n; i++) {
        hx[i] = (float)g_rand_double_range(rng, -1, 1);
    }
    for (int i = 0; i < o->batch; i++) {
        hl[i] = g_rand_int_range(rng, 0, o->classes);
    }
    *x = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, xs, error);
    *labels = *x != NULL ? tdm_tensor_new(dev, TDM_DTYPE_I64, 1, ls, error) : NULL;
    return *labels != NULL && tdm_tensor_write(*x, hx, error) &&
           tdm_tensor_write(*labels, hl, error);
}

static double mib(gint64 bytes)
{
    return bytes < 0 ? -1.0 : (double)bytes / MIB;
}

static int run(const Options *o, GError **error)
{
    TdmPrecision precision;
    TdmDevice *dev = tdm_device_get(o->device, error);
    if (dev == NULL || !tdm_precision_from_name(o->precision, &precision, error) ||
        !tdm_device_set_precision(dev, precision, error)) {
        return 1;
    }
    TdmModelConfig cfg = {
        .in_channels = o->channels, .num_classes = o->classes, .image_size = o->size};
    TdmModule *root = tdm_model_zoo_create(o->model, &cfg, error);
    TdmModel *model = root != NULL ? tdm_model_new(root, dev, 42, error) : NULL;
    if (model == NULL) {
        return 1;
    }
    TdmOptimizerOptions opts;
    tdm_optimizer_options_init(&opts);
    opts.lr = 0.01f;
    opts.momentum = 0.9f;
    opts.weight_decay = 5e-4f;
    TdmOptimizer *opt = tdm_optimizer_new("sgd", model, NULL, &opts, error);
    TdmTensor *x = NULL, *labels = NULL;
    TdmTensor *dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    TdmOpCache *xent_cache = NULL;
    double *t = g_new(double, o->steps);
    TdmDeviceInfo warm, end;
    float loss = 0.0f;
    int status = 1;

    if (opt == NULL || !make_batch(dev, o, &x, &labels, error)) {
        goto out;
    }
    tdm_model_set_training(model, TRUE);
    for (int s = -o->warmup; s < o->steps; s++) {
        if (s == 0 && !tdm_device_info(dev, &warm, error)) {
            goto out;
        }
        double t0 = tdm_time_now();
        TdmTensor *y = NULL;
        if (!tdm_model_zero_grad(model, error) || !tdm_model_forward(model, x, &y, error) ||
            !tdm_loss_cross_entropy(dev, &xent_cache, y, labels, 0.0f, &loss, dlogits, NULL,
                                    error) ||
            !tdm_model_backward(model, dlogits, error) || !tdm_optimizer_step(opt, error) ||
            !tdm_device_synchronize(dev, error)) {
            g_prefix_error(error, "step %d of %s batch %d on %s: ", s + o->warmup + 1, o->model,
                           o->batch, dev->name);
            goto out;
        }
        if (s >= 0) {
            t[s] = tdm_time_now() - t0;
        }
    }
    if (!tdm_device_info(dev, &end, error)) {
        goto out;
    }
    qsort(t, (size_t)o->steps, sizeof(double), cmp_double);
    double med = t[o->steps / 2];
    /* Unknown figures are -1 on both reads, so they compare equal. */
    gboolean steady =
        end.reserved_bytes == warm.reserved_bytes && end.peak_bytes == warm.peak_bytes;
    printf("RESULT impl=tandem device=%s model=%s batch=%d input=%dx%dx%d precision=%s "
           "steps=%d median_ms=%.4f img_per_s=%.1f peak_mib=%.1f reserved_mib=%.1f "
           "steady=%s loss=%.4f\n",
           dev->name, o->model, o->batch, o->channels, o->size, o->size, o->precision, o->steps,
           med * 1e3, o->batch / med, mib(end.peak_bytes), mib(end.reserved_bytes),
           steady ? "yes" : "no", loss);
    printf("%s batch %d (%dx%dx%d, %s) on %s (%s): median step %.3f ms, %.0f images/s; "
           "peak %.1f MiB allocated, %.1f MiB reserved\n",
           o->model, o->batch, o->channels, o->size, o->size, o->precision, dev->name, end.name,
           med * 1e3, o->batch / med, mib(end.peak_bytes), mib(end.reserved_bytes));
    status = 0;
    if (o->check_steady && !steady) {
        fprintf(stderr,
                "gpu-step: the steady steps allocated: reserved %.1f -> %.1f MiB, peak "
                "%.1f -> %.1f MiB after the warm-up\n",
                mib(warm.reserved_bytes), mib(end.reserved_bytes), mib(warm.peak_bytes),
                mib(end.peak_bytes));
        status = 1;
    }
out:
    tdm_op_cache_clear(dev, &xent_cache);
    g_clear_pointer(&dlogits, tdm_tensor_unref);
    g_clear_pointer(&x, tdm_tensor_unref);
    g_clear_pointer(&labels, tdm_tensor_unref);
    g_clear_pointer(&opt, tdm_optimizer_free);
    tdm_model_free(model);
    g_free(t);
    return status;
}

int main(int argc, char **argv)
{
    Options o;
    GError *error = NULL;
    if (!parse_options(argc, argv, &o)) {
        return 2;
    }
    int status = run(&o, &error);
    if (error != NULL) {
        fprintf(stderr, "gpu-step: %s\n", error->message);
        g_error_free(error);
        status = 1;
    }
    return status;
}
