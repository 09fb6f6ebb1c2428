/* SPDX-License-Identifier: MIT */
/* core/trainer-eval.c - evaluating a model on the test split.
 *
 * tdm_model_evaluate runs a model over a whole loader in eval mode and reports
 * accuracy and mean loss. The loader it evaluates with is made one way for
 * `tandem train` (the trainer's evaluation after each epoch) and `tandem
 * eval` (tdm_trainer_open_test_loader) alike, by tdm_train_eval_loader_new:
 * the test split reaches the model at the size it trains on and normalised
 * as the training data is, so that evaluating saved weights later gives
 * the accuracy the training reported.
 */
#include "config.h"

#include <string.h>

#include "trainer-private.h"

gboolean tdm_model_evaluate(TdmModel *model, TdmLoader *loader, double *accuracy, double *loss,
                            GError **error)
{
    g_return_val_if_fail(model != NULL && loader != NULL, FALSE);
    gboolean was_training = model->root->training;
    TdmOpCache *cache = NULL;
    double loss_sum = 0.0;
    int64_t correct = 0, count = 0;
    gboolean ok = tdm_loader_start_epoch(loader, 0, error);

    tdm_model_set_training(model, FALSE);
    GError *load_error = NULL;
    for (TdmBatch *batch; ok && (batch = tdm_loader_next(loader, &load_error)) != NULL;) {
        TdmTensor *logits = NULL;
        float batch_loss = 0.0f;
        int64_t batch_correct = 0;
        ok = tdm_model_forward(model, batch->images, &logits, error) &&
             tdm_loss_cross_entropy(model->device, &cache, logits, batch->labels, 0.0f, &batch_loss,
                                    NULL, &batch_correct, error);
        loss_sum += (double)batch_loss * (double)batch->size;
        correct += batch_correct;
        count += batch->size;
    }
    /* tdm_loader_next returns NULL with an error on failure. */
    if (load_error != NULL) {
        g_propagate_error(error, load_error);
        ok = FALSE;
    }
    tdm_op_cache_clear(model->device, &cache);
    tdm_model_set_training(model, was_training);
    if (!ok) {
        return FALSE;
    }
    if (accuracy != NULL) {
        *accuracy = count > 0 ? (double)correct / (double)count : 0.0;
    }
    if (loss != NULL) {
        *loss = count > 0 ? loss_sum / (double)count : 0.0;
    }
    return TRUE;
}

/* The evaluation pipeline: data.test_transforms when given; else, when the
 * test images are not all of the size the model trains on (the training
 * pipeline's output, or the training images themselves without one: they
 * differ in size, or the pipeline crops or resizes), torchvision's usual
 * evaluation transform sized like that ("resize H | center-crop H,W", then
 * the training pipeline's normalize); else none. Test images with another
 * channel count than the model's input are an error naming both splits. */
static gboolean eval_transforms_new(const TdmTrainConfig *cfg, TdmTransformPipeline *train_tf,
                                    TdmDataset *train_ds, const TdmDataset *test_ds,
                                    TdmTransformPipeline **out, GError **error)
{
    *out = NULL;
    if (cfg->test_transforms != NULL && cfg->test_transforms[0] != '\0') {
        *out = tdm_transform_pipeline_parse(cfg->test_transforms, error);
        if (*out == NULL) {
            g_prefix_error(error, "data.test_transforms: ");
        }
        return *out != NULL;
    }
    int c = train_ds->channels, h = train_ds->height, w = train_ds->width;
    if (train_tf != NULL &&
        !tdm_transform_pipeline_output_shape(train_tf, train_ds->channels,
                                             MAX(train_ds->height, 0), MAX(train_ds->width, 0),
                                             &c, &h, &w, error)) {
        return FALSE;
    }
    if (test_ds->channels != c) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: the %s split's images have %d channels, the %s split's %d%s",
                    test_ds->path, test_ds->split, test_ds->channels, train_ds->split, c,
                    train_tf != NULL ? " after data.transforms" : "");
        return FALSE;
    }
    if (test_ds->height == h && test_ds->width == w) {
        return TRUE; /* already the size the model was trained on */
    }
    if (h <= 0 || w <= 0) {
        return TRUE; /* no fixed training size: the loader reports it */
    }
    /* normalised as the training loader does: by its pipeline's normalize,
     * or without a pipeline by the training split's constants */
    int n = 0;
    float mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS];
    if (train_tf != NULL) {
        if (!tdm_transform_pipeline_get_normalization(train_tf, &n, mean, std)) {
            n = 0;
        }
    } else if (cfg->normalize && !tdm_dataset_get_normalization(train_ds, &n, mean, std, error)) {
        return FALSE;
    }
    GString *spec = g_string_new(NULL);
    g_string_printf(spec, "resize %d | center-crop %d,%d", MIN(h, w), h, w);
    if (n > 0) {
        g_string_append(spec, " | normalize mean=");
        for (int i = 0; i < n; i++) {
            g_string_append_printf(spec, i ? ",%.9g" : "%.9g", mean[i]);
        }
        g_string_append(spec, " std=");
        for (int i = 0; i < n; i++) {
            g_string_append_printf(spec, i ? ",%.9g" : "%.9g", std[i]);
        }
    }
    *out = tdm_transform_pipeline_parse(spec->str, error);
    if (*out == NULL) {
        g_prefix_error(error, "evaluation pipeline '%s': ", spec->str);
    }
    g_string_free(spec, TRUE);
    return *out != NULL;
}

TdmLoader *tdm_train_eval_loader_new(const TdmTrainConfig *cfg, TdmDataset *train_ds,
                                     TdmTransformPipeline *train_tf, TdmDataset *test_ds,
                                     TdmDevice *dev, GError **error)
{
    TdmLoaderOptions lo;
    g_autoptr(TdmTransformPipeline) eval_tf = NULL;
    if (!eval_transforms_new(cfg, train_tf, train_ds, test_ds, &eval_tf, error) ||
        !tdm_train_loader_options(cfg, train_ds, &lo, error)) {
        return NULL;
    }
    lo.transforms = eval_tf; /* the loader takes a reference */
    /* Without a pipeline of its own the test split is normalised as the
     * training pipeline ends, so that both splits reach the model on the
     * same scale. */
    if (eval_tf == NULL && train_tf != NULL &&
        !tdm_transform_pipeline_get_normalization(train_tf, &lo.n_mean, lo.mean, lo.std)) {
        lo.n_mean = 0; /* the training pipeline ends with x / 255 */
    }
    return tdm_loader_new(test_ds, dev, &lo, error);
}

TdmLoader *tdm_trainer_open_test_loader(const TdmTrainConfig *cfg, TdmDataset *test_ds,
                                        TdmDevice *dev, GError **error)
{
    g_return_val_if_fail(cfg != NULL && test_ds != NULL && dev != NULL, NULL);
    g_autoptr(TdmTransformPipeline) train_tf = NULL;
    if (cfg->transforms != NULL && cfg->transforms[0] != '\0') {
        if ((train_tf = tdm_transform_pipeline_parse(cfg->transforms, error)) == NULL) {
            g_prefix_error(error, "data.transforms: ");
            return NULL;
        }
    }
    /* The training split, when it can be opened, gives what the training's
     * own evaluation took from it: the size the model trained on and the
     * normalisation constants (an argument-less normalize's among them, set
     * here as the training loader sets them); without it the test split
     * stands in. */
    TdmDataset *train_ds = tdm_dataset_open(cfg->dataset, "train", NULL);
    TdmDataset *ref = train_ds != NULL ? train_ds : test_ds;
    TdmLoader *loader = NULL;
    int n;
    float mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS];
    if (train_tf != NULL && cfg->normalize) {
        if (!tdm_dataset_get_normalization(ref, &n, mean, std, error)) {
            goto out;
        }
        tdm_transform_pipeline_set_normalization(train_tf, n, mean, std);
    }
    loader = tdm_train_eval_loader_new(cfg, ref, train_tf, test_ds, dev, error);
out:
    tdm_dataset_close(train_ds);
    return loader;
}
