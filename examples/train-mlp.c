/* SPDX-License-Identifier: MIT */
/* examples/train-mlp.c - train a small MLP on Fashion-MNIST with the C API.
 *
 * This is the loop a C programmer writes when `tandem train` (and the
 * TdmTrainer behind it) is more than they need: find the plugins, pick a
 * device, open the data, build a model from the zoo, then run forward, loss,
 * backward and the optimizer step by hand, and finally measure accuracy on
 * the test split. It uses only the installed public API:
 *
 *   cc -o train-mlp train-mlp.c $(pkg-config --cflags --libs tandem-1)
 *   ./train-mlp                          # one epoch, automatic device
 *   ./train-mlp --limit 2000 --device ref --optimizer example-sign-sgd --lr 0.001
 */
#include <stdio.h>
#include <stdlib.h>

#include <tandem/tandem.h>

/* Fashion-MNIST's pixel mean and standard deviation (on 0..1). */
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f

typedef struct {
    char *dataset;
    char *device;
    char *optimizer;
    gint64 limit;
    gint64 test_limit;
    int batch_size;
    double lr;
    double momentum;
    int log_every;
} Options;

static TdmLoader *open_loader(TdmDataset *ds, TdmDevice *dev, const Options *o, gboolean train,
                              GError **error)
{
    TdmLoaderOptions lo;
    tdm_loader_options_init(&lo);
    lo.batch_size = o->batch_size;
    lo.shuffle = train;
    lo.limit = train ? o->limit : o->test_limit;
    lo.n_mean = 1;
    lo.mean[0] = FMNIST_MEAN;
    lo.std[0] = FMNIST_STD;
    return tdm_loader_new(ds, dev, &lo, error);
}

/* One pass over the training data. The loss and the optimizer are explicit:
 * the model only knows forward and backward. */
static gboolean train_one_epoch(TdmModel *model, TdmOptimizer *opt, TdmLoader *loader,
                                const Options *o, GError **error)
{
    TdmDevice *dev = model->device;
    TdmOpCache *loss_cache = NULL; /* the backend's state for the loss op */
    TdmTensor *dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32); /* reused every step */
    double loss_sum = 0.0;
    int64_t seen = 0, step = 0;
    gboolean ok = FALSE;
    TdmBatch *batch;

    tdm_model_set_training(model, TRUE);
    if (!tdm_loader_start_epoch(loader, 0, error)) {
        goto out;
    }
    while ((batch = tdm_loader_next(loader, error)) != NULL) {
        TdmTensor *logits = NULL; /* owned by the model */
        float loss = 0.0f;

        if (!tdm_model_forward(model, batch->images, &logits, error) ||
            !tdm_loss_cross_entropy(dev, &loss_cache, logits, batch->labels, 0.0f, &loss, dlogits,
                                    NULL, error) ||
            !tdm_model_backward(model, dlogits, error) || !tdm_optimizer_step(opt, error) ||
            !tdm_model_zero_grad(model, error)) {
            goto out;
        }
        loss_sum += (double)loss * (double)batch->size;
        seen += batch->size;
        step++;
        if (o->log_every > 0 && step % o->log_every == 0) {
            printf("step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "  loss %.4f\n", step,
                   tdm_loader_steps_per_epoch(loader), loss);
        }
    }
    if (error != NULL && *error != NULL) {
        goto out; /* the loader failed (NULL with an error, not the end of the epoch) */
    }
    printf("train: %" G_GINT64_FORMAT " images, %" G_GINT64_FORMAT " steps, mean loss %.4f\n", seen,
           step, seen > 0 ? loss_sum / (double)seen : 0.0);
    ok = TRUE;
out:
    tdm_op_cache_clear(dev, &loss_cache);
    tdm_tensor_unref(dlogits);
    return ok;
}

/* Accuracy and mean loss on the test split, in evaluation mode (no
 * gradients: the loss op gets no dlogits slot). */
static gboolean evaluate(TdmModel *model, TdmLoader *loader, GError **error)
{
    TdmDevice *dev = model->device;
    TdmOpCache *loss_cache = NULL;
    double loss_sum = 0.0;
    int64_t seen = 0, right = 0;
    gboolean ok = FALSE;
    TdmBatch *batch;

    tdm_model_set_training(model, FALSE);
    if (!tdm_loader_start_epoch(loader, 0, error)) {
        goto out;
    }
    while ((batch = tdm_loader_next(loader, error)) != NULL) {
        TdmTensor *logits = NULL;
        float loss = 0.0f;
        int64_t correct = 0;

        if (!tdm_model_forward(model, batch->images, &logits, error) ||
            !tdm_loss_cross_entropy(dev, &loss_cache, logits, batch->labels, 0.0f, &loss, NULL,
                                    &correct, error)) {
            goto out;
        }
        loss_sum += (double)loss * (double)batch->size;
        right += correct;
        seen += batch->size;
    }
    if ((error != NULL && *error != NULL) || seen == 0) {
        if (seen == 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "the test split is empty");
        }
        goto out;
    }
    printf("test: %" G_GINT64_FORMAT " images, accuracy %.4f, loss %.4f\n", seen,
           (double)right / (double)seen, loss_sum / (double)seen);
    ok = TRUE;
out:
    tdm_op_cache_clear(dev, &loss_cache);
    return ok;
}

static gboolean run(const Options *o, GError **error)
{
    g_autoptr(TdmDataset) train_ds = NULL;
    g_autoptr(TdmDataset) test_ds = NULL;
    g_autoptr(TdmLoader) train_loader = NULL;
    g_autoptr(TdmLoader) test_loader = NULL;
    g_autoptr(TdmModel) model = NULL;
    g_autoptr(TdmOptimizer) opt = NULL;
    TdmModule *root;
    TdmDevice *dev;
    TdmModelConfig mc = {0};
    TdmOptimizerOptions oo;

    /* Plugins: TDM_PLUGIN_PATH, then the installed plugin directory. */
    if (!tdm_registry_init(error)) {
        return FALSE;
    }
    dev = tdm_device_get(o->device, error); /* "auto": the best available backend */
    if (dev == NULL) {
        return FALSE;
    }
    train_ds = tdm_dataset_open(o->dataset, "train", error);
    if (train_ds == NULL) {
        return FALSE;
    }
    test_ds = tdm_dataset_open(o->dataset, "test", error);
    if (test_ds == NULL) {
        return FALSE;
    }
    train_loader = open_loader(train_ds, dev, o, TRUE, error);
    test_loader = train_loader ? open_loader(test_ds, dev, o, FALSE, error) : NULL;
    if (test_loader == NULL) {
        return FALSE;
    }

    /* A zoo model is a tree of modules; tdm_model_new places it on the
     * device (one arena for values, one for gradients) and initialises it. */
    mc.in_channels = train_ds->channels;
    mc.num_classes = train_ds->num_classes;
    mc.image_size = train_ds->height;
    root = tdm_model_zoo_create("mlp", &mc, error);
    if (root == NULL) {
        return FALSE;
    }
    model = tdm_model_new(root, dev, 0, error);
    if (model == NULL) {
        return FALSE;
    }

    tdm_optimizer_options_init(&oo);
    oo.lr = (float)o->lr;
    oo.momentum = (float)o->momentum;
    opt = tdm_optimizer_new(o->optimizer, model, NULL, &oo, error);
    if (opt == NULL) {
        return FALSE;
    }

    printf("device %s, dataset %s:%s (%" G_GINT64_FORMAT " training images), model mlp "
           "(%" G_GINT64_FORMAT " parameters), optimizer %s lr %g\n",
           dev->name, train_ds->kind, train_ds->path, tdm_loader_num_samples(train_loader),
           tdm_model_num_parameters(model), o->optimizer, o->lr);
    return train_one_epoch(model, opt, train_loader, o, error) &&
           evaluate(model, test_loader, error);
}

int main(int argc, char **argv)
{
    Options o = {
        .dataset = g_strdup("fashion-mnist"),
        .device = g_strdup("auto"),
        .optimizer = g_strdup("sgd"),
        .limit = 0,
        .test_limit = 0,
        .batch_size = 64,
        .lr = 0.05,
        .momentum = 0.9,
        .log_every = 100,
    };
    GOptionEntry entries[] = {
        {"dataset", 0, 0, G_OPTION_ARG_STRING, &o.dataset, "Dataset name or KIND:PATH", "SPEC"},
        {"device", 0, 0, G_OPTION_ARG_STRING, &o.device, "Device (auto, cpu, ref:0...)", "DEV"},
        {"optimizer", 0, 0, G_OPTION_ARG_STRING, &o.optimizer, "Optimizer feature", "NAME"},
        {"limit", 0, 0, G_OPTION_ARG_INT64, &o.limit, "Train on the first N images", "N"},
        {"test-limit", 0, 0, G_OPTION_ARG_INT64, &o.test_limit, "Test on the first N images", "N"},
        {"batch-size", 0, 0, G_OPTION_ARG_INT, &o.batch_size, "Batch size (64)", "B"},
        {"lr", 0, 0, G_OPTION_ARG_DOUBLE, &o.lr, "Learning rate (0.05)", "LR"},
        {"momentum", 0, 0, G_OPTION_ARG_DOUBLE, &o.momentum, "Momentum (0.9)", "M"},
        {"log-every", 0, 0, G_OPTION_ARG_INT, &o.log_every, "Print the loss every N steps", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- train an MLP on Fashion-MNIST");
    g_autoptr(GError) error = NULL;
    int status = EXIT_SUCCESS;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "train-mlp: %s\n", error->message);
        status = 2;
    } else if (o.limit < 0 || o.test_limit < 0 || o.batch_size <= 0) {
        fprintf(stderr, "train-mlp: --limit, --test-limit and --batch-size must be positive\n");
        status = 2;
    } else if (!run(&o, &error)) {
        fprintf(stderr, "train-mlp: %s\n", error ? error->message : "failed");
        status = EXIT_FAILURE;
    }
    g_free(o.dataset);
    g_free(o.device);
    g_free(o.optimizer);
    return status;
}
