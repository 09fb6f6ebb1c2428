/* core/loader.c - turns dataset samples into normalised batches on a device.
 *
 * This is the simple loader: it reads the samples of a batch on the
 * caller's thread, in the sampler's order, converts u8 pixels to f32 through
 * a per-channel lookup table ((v/255 - mean) / std) into one host buffer, and
 * copies the batch into device tensors with tdm_tensor_write. The host
 * buffers and the device tensors are allocated once, when the loader is
 * created; the smaller last batch of an epoch uses views of the same device
 * storage, so a steady-state step allocates nothing. The time the caller
 * spends inside tdm_loader_next is reported as the batch's wait_s. The
 * parallel loader (worker threads, prefetch queue) keeps this API.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

struct _TdmLoader {
    TdmDataset *ds;
    TdmDevice *dev;
    TdmLoaderOptions opts;
    TdmSampler *sampler;
    int64_t n;              /* samples used: min(length, limit) */
    int64_t per_epoch;      /* this rank's samples per epoch */
    size_t sample_bytes;
    guint8 *sample;         /* one u8 sample */
    float *host_images;     /* [B, C, H, W] */
    int32_t *host_labels;   /* [B] */
    gboolean pinned;        /* host_images came from the backend's host_alloc */
    TdmTensor *images, *labels;           /* full batch on the device */
    TdmTensor *tail_images, *tail_labels; /* views for the last partial batch */
    float lut[4][256];
    TdmBatch batch;
    int64_t steps_done;
    gboolean started;
};

void tdm_loader_options_init(TdmLoaderOptions *opts)
{
    g_return_if_fail(opts != NULL);
    memset(opts, 0, sizeof(*opts));
    opts->batch_size = 64;
    opts->shuffle = TRUE;
    opts->world = 1;
    opts->prefetch = 2;
}

int64_t tdm_loader_steps_per_epoch(const TdmLoader *loader)
{
    g_return_val_if_fail(loader != NULL, 0);
    int64_t b = loader->opts.batch_size;
    return loader->opts.drop_last ? loader->per_epoch / b : (loader->per_epoch + b - 1) / b;
}

int64_t tdm_loader_num_samples(const TdmLoader *loader)
{
    g_return_val_if_fail(loader != NULL, 0);
    return loader->per_epoch;
}

TdmLoader *tdm_loader_new(TdmDataset *ds, TdmDevice *dev, const TdmLoaderOptions *opts,
                          GError **error)
{
    g_return_val_if_fail(ds != NULL && dev != NULL, NULL);
    TdmLoaderOptions defaults;
    if (opts == NULL) {
        tdm_loader_options_init(&defaults);
        opts = &defaults;
    }
    if (opts->batch_size <= 0 || opts->world < 1 || opts->rank < 0 || opts->rank >= opts->world ||
        opts->limit < 0 || opts->n_mean < 0 || opts->n_mean > 4) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "invalid loader options (batch size %d, rank %d of %d, limit %" G_GINT64_FORMAT
                    ", %d mean entries)", opts->batch_size, opts->rank, opts->world, opts->limit,
                    opts->n_mean);
        return NULL;
    }
    if (opts->n_mean != 0 && opts->n_mean != 1 && opts->n_mean != ds->channels) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%d normalisation entries for a dataset of %d channels", opts->n_mean,
                    ds->channels);
        return NULL;
    }
    for (int c = 0; c < opts->n_mean; c++) {
        if (!(opts->std[c] > 0.0f)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "normalisation std of channel %d is %g (must be > 0)", c, opts->std[c]);
            return NULL;
        }
    }

    TdmLoader *l = g_new0(TdmLoader, 1);
    l->ds = ds;
    l->dev = dev;
    l->opts = *opts;
    l->n = opts->limit > 0 ? MIN(opts->limit, ds->length) : ds->length;
    TdmSamplerKind kind = opts->world > 1 ? TDM_SAMPLER_DISTRIBUTED
                          : opts->shuffle ? TDM_SAMPLER_RANDOM
                                          : TDM_SAMPLER_SEQUENTIAL;
    l->sampler = tdm_sampler_new(kind, l->n, opts->seed, opts->rank, opts->world,
                                 opts->drop_last);
    l->per_epoch = l->sampler->order_len;

    for (int c = 0; c < ds->channels; c++) {
        int k = opts->n_mean == 0 ? -1 : opts->n_mean == 1 ? 0 : c;
        float mean = k < 0 ? 0.0f : opts->mean[k];
        float std = k < 0 ? 1.0f : opts->std[k];
        for (int v = 0; v < 256; v++) {
            l->lut[c][v] = ((float)v / 255.0f - mean) / std;
        }
    }

    int64_t B = opts->batch_size;
    l->sample_bytes = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    l->sample = g_malloc(l->sample_bytes);
    size_t img_bytes = (size_t)B * l->sample_bytes * sizeof(float);
    if (dev->backend->host_alloc != NULL) {
        l->host_images = dev->backend->host_alloc(dev, img_bytes, NULL);
        l->pinned = l->host_images != NULL;
    }
    if (l->host_images == NULL) {
        l->host_images = g_malloc(img_bytes);
    }
    l->host_labels = g_new(int32_t, B);

    int64_t ishape[4] = {B, ds->channels, ds->height, ds->width};
    int64_t lshape[1] = {B};
    l->images = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, ishape, error);
    l->labels = l->images ? tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, error) : NULL;
    if (l->labels == NULL) {
        tdm_loader_free(l);
        return NULL;
    }
    int64_t tail = l->per_epoch % B;
    if (tail != 0 && !opts->drop_last) {
        l->tail_images = tdm_tensor_narrow(l->images, 0, tail, error);
        l->tail_labels = l->tail_images ? tdm_tensor_narrow(l->labels, 0, tail, error) : NULL;
        if (l->tail_labels == NULL) {
            tdm_loader_free(l);
            return NULL;
        }
    }
    return l;
}

gboolean tdm_loader_start_epoch(TdmLoader *loader, int64_t epoch, GError **error)
{
    g_return_val_if_fail(loader != NULL, FALSE);
    tdm_sampler_set_epoch(loader->sampler, epoch);
    loader->steps_done = 0;
    loader->started = TRUE;
    return TRUE;
}

TdmBatch *tdm_loader_next(TdmLoader *loader, GError **error)
{
    g_return_val_if_fail(loader != NULL, NULL);
    double t0 = tdm_time_now();
    if (!loader->started && !tdm_loader_start_epoch(loader, 0, error)) {
        return NULL;
    }
    if (loader->steps_done >= tdm_loader_steps_per_epoch(loader)) {
        return NULL;
    }
    int64_t B = loader->opts.batch_size;
    const int channels = loader->ds->channels;
    const size_t plane = loader->sample_bytes / (size_t)channels;
    int64_t count = 0;
    int64_t index;
    while (count < B && tdm_sampler_next(loader->sampler, &index)) {
        int32_t label;
        if (!tdm_dataset_read(loader->ds, index, loader->sample, &label, error)) {
            return NULL;
        }
        float *dst = loader->host_images + (size_t)count * loader->sample_bytes;
        for (int c = 0; c < channels; c++) {
            const float *lut = loader->lut[c];
            const guint8 *src = loader->sample + (size_t)c * plane;
            float *out = dst + (size_t)c * plane;
            for (size_t k = 0; k < plane; k++) {
                out[k] = lut[src[k]];
            }
        }
        loader->host_labels[count] = label;
        count++;
    }
    if (count == 0) {
        return NULL;
    }
    TdmTensor *images = loader->images, *labels = loader->labels;
    if (count < B) {
        images = loader->tail_images;
        labels = loader->tail_labels;
        g_return_val_if_fail(images != NULL && images->shape[0] == count, NULL);
    }
    if (!tdm_tensor_write(images, loader->host_images, error) ||
        !tdm_tensor_write(labels, loader->host_labels, error)) {
        return NULL;
    }
    loader->steps_done++;
    loader->batch.images = images;
    loader->batch.labels = labels;
    loader->batch.size = count;
    loader->batch.wait_s = tdm_time_now() - t0;
    return &loader->batch;
}

void tdm_loader_free(TdmLoader *loader)
{
    if (loader == NULL) {
        return;
    }
    g_clear_pointer(&loader->tail_images, tdm_tensor_unref);
    g_clear_pointer(&loader->tail_labels, tdm_tensor_unref);
    g_clear_pointer(&loader->images, tdm_tensor_unref);
    g_clear_pointer(&loader->labels, tdm_tensor_unref);
    if (loader->pinned) {
        loader->dev->backend->host_free(loader->dev, loader->host_images);
    } else {
        g_free(loader->host_images);
    }
    g_free(loader->host_labels);
    g_free(loader->sample);
    tdm_sampler_free(loader->sampler);
    g_free(loader);
}
