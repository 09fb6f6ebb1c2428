/* SPDX-License-Identifier: MIT */
/* bench/cpu-step.c - time one full training step of a zoo model on a device.
 *
 * Usage: cpu-step [MODEL [BATCH [STEPS [DEVICE]]]]   (mlp 64 50 cpu)
 * Runs forward, cross-entropy, backward and an SGD step (momentum 0.9,
 * weight decay 5e-4) on random 1x28x28 inputs, through the public API only,
 * and prints the median and best images/s over STEPS steps after 5 warm-up
 * steps. Threads: OMP_NUM_THREADS. With TDM_CPU_PROFILE=1 the cpu backend
 * prints where the time went when the program exits. Not part of `make
 * check`: build it by hand against libtandem-1 (see plugins/cpu/README in the
 * report).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tandem/tandem.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "mlp";
    int batch = argc > 2 ? atoi(argv[2]) : 64;
    int steps = argc > 3 ? atoi(argv[3]) : 50;
    const char *spec = argc > 4 ? argv[4] : "cpu";
    GError *err = NULL;
    TdmDevice *dev = tdm_device_get(spec, &err);
    if (dev == NULL) {
        fprintf(stderr, "cpu-step: %s\n", err->message);
        return 1;
    }
    TdmModelConfig cfg = {.in_channels = 1, .num_classes = 10, .image_size = 28};
    TdmModule *root = tdm_model_zoo_create(name, &cfg, &err);
    TdmModel *model = root ? tdm_model_new(root, dev, 42, &err) : NULL;
    TdmOptimizerOptions opts;
    tdm_optimizer_options_init(&opts);
    opts.lr = 0.01f;
    opts.momentum = 0.9f;
    opts.weight_decay = 5e-4f;
    TdmOptimizer *opt = model ? tdm_optimizer_new("sgd", model, NULL, &opts, &err) : NULL;
    if (opt == NULL) {
        fprintf(stderr, "cpu-step: %s\n", err->message);
        return 1;
    }
    int64_t xs[4] = {batch, 1, 28, 28}, ls[1] = {batch};
    TdmTensor *x = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, xs, &err);
    TdmTensor *labels = tdm_tensor_new(dev, TDM_DTYPE_I64, 1, ls, &err);
    float *hx = g_new(float, (size_t)batch * 784);
    int64_t *hl = g_new(int64_t, batch);
    GRand *rng = g_rand_new_with_seed(7);
    for (int i = 0; i < batch * 784; i++) {
        hx[i] = (float)g_rand_double_range(rng, -1, 1);
    }
    for (int i = 0; i < batch; i++) {
        hl[i] = g_rand_int_range(rng, 0, 10);
    }
    tdm_tensor_write(x, hx, NULL);
    tdm_tensor_write(labels, hl, NULL);
    TdmTensor *dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    TdmOpCache *xent_cache = NULL;
    double *t = g_new(double, steps);
    float loss = 0;
    for (int s = -5; s < steps; s++) {
        double t0 = tdm_time_now();
        TdmTensor *y = NULL;
        if (!tdm_model_zero_grad(model, &err) || !tdm_model_forward(model, x, &y, &err) ||
            !tdm_loss_cross_entropy(dev, &xent_cache, y, labels, 0.0f, &loss, dlogits, NULL,
                                    &err) ||
            !tdm_model_backward(model, dlogits, &err) || !tdm_optimizer_step(opt, &err) ||
            !tdm_device_synchronize(dev, &err)) {
            fprintf(stderr, "cpu-step: step %d: %s\n", s, err->message);
            return 1;
        }
        if (s >= 0) {
            t[s] = tdm_time_now() - t0;
        }
    }
    qsort(t, (size_t)steps, sizeof(double), cmp_double);
    double med = t[steps / 2], best = t[0];
    const char *th = g_getenv("OMP_NUM_THREADS");
    printf("%s batch %d on %s (OMP_NUM_THREADS=%s): median %.3f ms -> %.0f images/s "
           "(best %.0f); last loss %.4f\n",
           name, batch, dev->name, th ? th : "-", med * 1e3, batch / med, batch / best, loss);
    tdm_op_cache_clear(dev, &xent_cache);
    tdm_tensor_unref(dlogits);
    tdm_tensor_unref(x);
    tdm_tensor_unref(labels);
    tdm_optimizer_free(opt);
    tdm_model_free(model);
    g_rand_free(rng);
    g_free(hx);
    g_free(hl);
    g_free(t);
    return 0;
}
