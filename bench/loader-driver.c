/* SPDX-License-Identifier: MIT */
/* bench/loader-driver.c - Tandem's side of bench/loader.
 *
 * Two measurements through the public API only. `loader` mode: open a
 * dataset, build the loader with a transform pipeline and N workers, run
 * one untimed warm-up epoch (thread start, lazy decompression), then time
 * whole epochs of tdm_loader_next (each batch copied to the device), and
 * print one JSON line with images/s. `train` mode: train a zoo model (plain
 * forward, loss, backward, SGD step, as examples/train-mlp.c does) fed by
 * the same loader, and print the share of the step time the loop spent
 * waiting in tdm_loader_next. bench/loader compiles this file against the
 * build tree; it is not a test.
 *
 *   loader-driver --dataset fashion-mnist --transforms "..." --workers 1
 *   loader-driver --train resnet8 --dataset fashion-mnist --limit 10000 ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tandem/tandem.h>

typedef struct {
    char *dataset, *transforms, *device, *train_model;
    int workers, prefetch, batch, epochs, threads;
    gint64 limit;
    gboolean pin;
} Options;

static gboolean run_loader(TdmLoader *l, const Options *o, GError **error)
{
    int64_t images = 0;
    double wait = 0.0;
    TdmBatch *b;
    if (!tdm_loader_start_epoch(l, 0, error)) {
        return FALSE;
    }
    while ((b = tdm_loader_next(l, error)) != NULL) {
    }
    if (*error != NULL) {
        return FALSE;
    }
    double t0 = tdm_time_now();
    for (int e = 1; e <= o->epochs; e++) {
        if (!tdm_loader_start_epoch(l, e, error)) {
            return FALSE;
        }
        while ((b = tdm_loader_next(l, error)) != NULL) {
            images += b->size;
            wait += b->wait_s;
        }
        if (*error != NULL) {
            return FALSE;
        }
    }
    double s = tdm_time_now() - t0;
    printf("{\"mode\":\"loader\",\"workers\":%d,\"images\":%" G_GINT64_FORMAT
           ",\"seconds\":%.4f,\"img_per_s\":%.1f}\n", o->workers, images, s,
           s > 0 ? (double)images / s : 0.0);
    return TRUE;
}

static gboolean run_train(TdmLoader *l, TdmDataset *ds, int image_size, TdmDevice *dev,
                          const Options *o, GError **error)
{
    gboolean ok = FALSE;
    TdmModelConfig mc = {0};
    mc.in_channels = ds->channels;
    mc.num_classes = ds->num_classes;
    mc.image_size = image_size;
    TdmModule *root = tdm_model_zoo_create(o->train_model, &mc, error);
    g_autoptr(TdmModel) model = root ? tdm_model_new(root, dev, 0, error) : NULL;
    if (model == NULL) {
        return FALSE;
    }
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = 0.05f;
    oo.momentum = 0.9f;
    oo.weight_decay = 5e-4f;
    g_autoptr(TdmOptimizer) opt = tdm_optimizer_new("sgd", model, NULL, &oo, error);
    if (opt == NULL) {
        return FALSE;
    }
    TdmOpCache *cache = NULL;
    TdmTensor *dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    int64_t images = 0, steps = 0;
    double wait = 0.0, first_wait = 0.0, t0 = 0.0;
    tdm_model_set_training(model, TRUE);
    for (int e = 0; e < o->epochs; e++) {
        if (!tdm_loader_start_epoch(l, e, error)) {
            goto out;
        }
        TdmBatch *b;
        while ((b = tdm_loader_next(l, error)) != NULL) {
            if (steps == 0) {
                /* The first step builds primitives: time from the second. */
                first_wait = b->wait_s;
            } else {
                if (steps == 1) {
                    t0 = tdm_time_now() - b->wait_s;
                }
                wait += b->wait_s;
                images += b->size;
            }
            TdmTensor *logits = NULL;
            float loss;
            if (!tdm_model_forward(model, b->images, &logits, error) ||
                !tdm_loss_cross_entropy(dev, &cache, logits, b->labels, 0.0f, &loss, dlogits, NULL,
                                        error) ||
                !tdm_model_backward(model, dlogits, error) || !tdm_optimizer_step(opt, error) ||
                !tdm_model_zero_grad(model, error)) {
                goto out;
            }
            steps++;
        }
        if (*error != NULL) {
            goto out;
        }
    }
    double s = tdm_time_now() - t0;
    printf("{\"mode\":\"train\",\"model\":\"%s\",\"workers\":%d,\"steps\":%" G_GINT64_FORMAT
           ",\"img_per_s\":%.1f,\"wait_s\":%.4f,\"seconds\":%.4f,\"wait_frac\":%.4f,"
           "\"first_wait_s\":%.4f}\n", o->train_model, o->workers, steps,
           s > 0 ? (double)images / s : 0.0, wait, s, s > 0 ? wait / s : 0.0, first_wait);
    ok = TRUE;
out:
    tdm_op_cache_clear(dev, &cache);
    tdm_tensor_unref(dlogits);
    return ok;
}

static gboolean run(const Options *o, GError **error)
{
    TdmDevice *dev = tdm_device_get(o->device != NULL ? o->device : "cpu", error);
    if (dev == NULL) {
        return FALSE;
    }
    if (o->train_model != NULL) {
        tdm_device_set_num_threads(dev, o->threads);
    }
    g_autoptr(TdmDataset) ds = tdm_dataset_open(o->dataset ? o->dataset : "fashion-mnist",
                                                "train", error);
    if (ds == NULL) {
        return FALSE;
    }
    g_autoptr(TdmTransformPipeline) p = NULL;
    if (o->transforms != NULL &&
        (p = tdm_transform_pipeline_parse(o->transforms, error)) == NULL) {
        return FALSE;
    }
    TdmLoaderOptions lo;
    tdm_loader_options_init(&lo);
    lo.batch_size = o->batch;
    lo.workers = o->workers;
    lo.prefetch = o->prefetch;
    lo.limit = o->limit;
    lo.transforms = p;
    lo.pin_memory = o->pin;
    /* The dataset's constants, for an argument-less `normalize` (estimating
     * them decodes a thousand images: only when the pipeline needs them). */
    if ((o->transforms == NULL || strstr(o->transforms, "mean=") == NULL) &&
        !tdm_dataset_get_normalization(ds, &lo.n_mean, lo.mean, lo.std, error)) {
        return FALSE;
    }
    g_autoptr(TdmLoader) l = tdm_loader_new(ds, dev, &lo, error);
    if (l == NULL) {
        return FALSE;
    }
    /* the size the loader's pipeline makes (the loader fills in `p`'s
     * normalize in a copy of its own: `p` itself may still lack it) */
    int c, h, w;
    tdm_loader_sample_shape(l, &c, &h, &w);
    return o->train_model != NULL ? run_train(l, ds, h, dev, o, error) : run_loader(l, o, error);
}

int main(int argc, char **argv)
{
    Options o = {.workers = 1, .prefetch = 2, .batch = 64, .epochs = 1};
    GOptionEntry entries[] = {
        {"dataset", 0, 0, G_OPTION_ARG_STRING, &o.dataset, "Dataset spec", "SPEC"},
        {"transforms", 0, 0, G_OPTION_ARG_STRING, &o.transforms, "Pipeline", "SPEC"},
        {"device", 0, 0, G_OPTION_ARG_STRING, &o.device, "Device (cpu)", "SPEC"},
        {"workers", 0, 0, G_OPTION_ARG_INT, &o.workers, "Loader threads", "N"},
        {"prefetch", 0, 0, G_OPTION_ARG_INT, &o.prefetch, "Batches ahead per worker", "N"},
        {"batch", 0, 0, G_OPTION_ARG_INT, &o.batch, "Batch size", "N"},
        {"epochs", 0, 0, G_OPTION_ARG_INT, &o.epochs, "Timed epochs", "N"},
        {"limit", 0, 0, G_OPTION_ARG_INT64, &o.limit, "First N samples", "N"},
        {"threads", 0, 0, G_OPTION_ARG_INT, &o.threads, "Compute threads (train)", "N"},
        {"pin-memory", 0, 0, G_OPTION_ARG_NONE, &o.pin, "Pinned staging buffers", NULL},
        {"train", 0, 0, G_OPTION_ARG_STRING, &o.train_model, "Train this zoo model", "NAME"},
        {NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- Tandem side of bench/loader");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "loader-driver: %s\n", error->message);
        return 2;
    }
    if (!run(&o, &error)) {
        fprintf(stderr, "loader-driver: %s\n", error != NULL ? error->message : "failed");
        return 1;
    }
    return 0;
}
