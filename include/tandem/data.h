/* SPDX-License-Identifier: MIT */
/**
 * SECTION:data
 * @title: Datasets and the loader
 * @short_description: datasets, samplers, the loader and batches
 * @include: tandem/tandem.h
 *
 * A dataset reader is a feature of kind TDM_FEATURE_DATASET whose class is a
 * TdmDatasetClass; `tdm_dataset_open("idx path=/usr/share/datasets/fashion-mnist",
 * "train")` picks the reader by its first word. Samples are u8
 * images in CHW order plus an integer label. The sampler decides the order,
 * the loader turns samples into normalised f32 batches on the device.
 */
#ifndef TANDEM_DATA_H
#define TANDEM_DATA_H

#include <tandem/device.h>
#include <tandem/tensor.h>
#include <tandem/transform.h>

G_BEGIN_DECLS

/**
 * TDM_DATASET_IFACE_VERSION:
 *
 * The interface version of #TdmDatasetClass this header describes (see
 * TDM_IFACE_VERSION()): a reader puts it in iface_version. 1.1 gave
 * #TdmDataset a reserved slot, params: a reader that reads it needs a core
 * that fills it.
 */
#define TDM_DATASET_IFACE_VERSION TDM_IFACE_VERSION(1, 1)

/**
 * TdmDatasetClass:
 * @iface_version: %TDM_DATASET_IFACE_VERSION
 * @struct_size: sizeof(TdmDatasetClass)
 * @open: opens @path for @split ("train" or "test") and fills length,
 *   channels (1 .. %TDM_MAX_CHANNELS), height, width, num_classes and priv;
 *   the reader's other parameters are in ds->params. FALSE with the error
 *   set, naming the file (and the byte offset of malformed content). A
 *   description out of range is refused by the core with
 *   %TDM_ERROR_PLUGIN
 * @read: reads sample @index (0 <= @index < length): c x h x w bytes, CHW,
 *   into @image (the caller's), and its label; must be safe to call from
 *   several threads at once; FALSE with the error set naming the file
 * @close: frees ds->priv; the core calls it only when priv is not NULL,
 *   also after a failed open that set it (optional: NULL means nothing to
 *   free)
 * @read_image: decodes sample @index into @img (u8 scale, CHW, sized by
 *   the reader), for samples of different sizes (optional: NULL means every
 *   sample has the size open set; a reader whose samples differ in size,
 *   height and width 0, must have it)
 * @prepare: samples [0, @end) are about to be read, in any order (a loader
 *   says so before its first epoch); a reader may get them ready in one
 *   go; errors are left to read, which must still report them (optional:
 *   NULL means read gets each sample ready by itself)
 * @reserved: NULL
 *
 * A dataset reader's slots, in a static const struct the plugin gives to
 * tdm_plugin_add_feature() as a TDM_FEATURE_DATASET. Every slot is
 * required unless its comment says "(optional: NULL means ...)"; the
 * registry refuses a reader with a NULL required slot. The comment of each
 * slot in the header says what it must do.
 */
struct _TdmDatasetClass {
    guint32 iface_version; /* TDM_DATASET_IFACE_VERSION */
    guint32 struct_size;   /* sizeof(TdmDatasetClass) */
    /* Open `path` for `split` ("train" or "test"); fill length, channels,
     * height, width, num_classes and priv. The reader's other parameters
     * (its TdmParamSpec list) are in ds->params. Errors name the file (and
     * the byte offset for malformed content). */
    gboolean (*open)(TdmDataset *ds, const char *path, const char *split, GError **error);
    /* Sample `index` (0 <= index < length): c*h*w bytes, CHW, into `image`.
     * Must be safe to call from several threads at once. */
    gboolean (*read)(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label, GError **error);
    /* (optional: NULL means there is nothing to free) */
    void (*close)(TdmDataset *ds);
    /* Decode sample `index` into `img` (u8 scale, CHW).
     * (optional: NULL means every sample has the size open() set; a reader
     * whose samples differ in size, height and width 0, must have it) */
    gboolean (*read_image)(TdmDataset *ds, int64_t index, TdmImage *img, int32_t *label,
                           GError **error);
    /* Samples [0, end) are about to be read, in any order (a loader says so
     * before its first epoch). A reader may get them ready in one go; errors
     * are left to read(), which must still report them.
     * (optional: NULL means read() gets each sample ready by itself) */
    void (*prepare)(TdmDataset *ds, int64_t end);
    gpointer reserved[2];
};

/**
 * TdmDataset:
 * @klass: the reader's class
 * @kind: the reader's name, "idx"
 * @path: what was opened
 * @split: "train" or "test"
 * @length: the number of samples
 * @channels: channels of each image
 * @height: their height; 0 when samples differ in size
 * @width: their width; 0 when samples differ in size
 * @num_classes: the number of labels
 * @priv: the reader's own state, set in open
 * @params: since 1.1: the reader's parameters, path included, bound to its
 *   specs by tdm_dataset_open() (transfer none: valid until close; NULL when
 *   a caller runs open itself)
 * @reserved: zero
 *
 * An open dataset: u8 images in CHW order with integer labels.
 */
struct _TdmDataset {
    const TdmDatasetClass *klass;
    char *kind;        /* "idx" */
    char *path;
    char *split;
    int64_t length;
    int channels, height, width;
    int num_classes;
    gpointer priv;
    /* since 1.1: params */
    /* The reader's parameters, path included, bound to its specs by
     * tdm_dataset_open() (transfer none: valid until close; NULL when a
     * caller runs open() itself). */
    TdmParams *params;
    gpointer reserved[3];
};

/**
 * tdm_dataset_open:
 * @spec: a reader and its parameters, "KIND path=PATH key=value ..." (or
 *   "KIND PATH key=value ...": <tandem/params.h>), e.g. "imagefolder
 *   path=/data/pets size=first"; the older form "KIND:PATH[,key=value...]";
 *   or a known name ("fashion-mnist", "mnist") that resolves to the Debian
 *   data set, or for fashion-mnist to the embedded subset when that is not
 *   installed
 * @split: "train" or "test"
 * @error: return location for a #GError, or NULL
 *
 * Opens a dataset with the reader @spec names.
 *
 * Returns: (transfer full): the dataset, close it with
 * tdm_dataset_close(); or NULL with an error: a bad parameter names the
 * reader, the key and what it accepts; the reader's errors name the file
 * (and the byte offset of malformed content)
 */
TDM_API TdmDataset *tdm_dataset_open(const char *spec, const char *split, GError **error);
/**
 * tdm_dataset_read:
 * @ds: a dataset
 * @index: 0 <= @index < length
 * @image: where to put channels * height * width bytes, CHW
 * @label: (out): the label
 * @error: return location for a #GError, or NULL
 *
 * Reads one sample; safe to call from several threads at once.
 *
 * Returns: TRUE, or FALSE with an error naming the file and the sample
 */
TDM_API gboolean tdm_dataset_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                                  GError **error);
/**
 * tdm_dataset_close:
 * @ds: (transfer full) (nullable): a dataset
 *
 * Closes and frees the dataset.
 */
TDM_API void tdm_dataset_close(TdmDataset *ds);
/**
 * tdm_dataset_get_normalization:
 * @ds: a dataset
 * @n: (out): the channel count
 * @mean: (out caller-allocates): %TDM_MAX_CHANNELS entries
 * @std: (out caller-allocates): %TDM_MAX_CHANNELS entries
 * @error: return location for a #GError, or NULL
 *
 * The per-channel mean and std (of pixels in [0, 1]) to normalise with: the
 * published constants of known datasets, else estimated from the first
 * samples.
 *
 * Returns: TRUE, or FALSE with the reader's error
 */
TDM_API gboolean tdm_dataset_get_normalization(TdmDataset *ds, int *n, float *mean, float *std,
                                               GError **error);
/**
 * tdm_dataset_common_params:
 *
 * The parameters every reader takes before its own (path: required and
 * positional).
 *
 * Returns: (transfer none): the specs, ending with a NULL name
 */
TDM_API const TdmParamSpec *tdm_dataset_common_params(void);
/**
 * tdm_dataset_resolve:
 * @spec: a dataset spec, as for tdm_dataset_open()
 * @error: return location for a #GError, or NULL
 *
 * Where a known dataset name resolves; a spec that names its reader
 * ("KIND:PATH", "KIND path=PATH ...") is returned as it is.
 *
 * Returns: (transfer full): "KIND:PATH", or NULL with an error when no copy
 * of the known dataset is installed
 */
TDM_API char *tdm_dataset_resolve(const char *spec, GError **error);

/* ---- samplers ---- */

/**
 * TdmSamplerKind:
 * @TDM_SAMPLER_SEQUENTIAL: 0, 1, 2, ...
 * @TDM_SAMPLER_RANDOM: a permutation by (seed, epoch)
 * @TDM_SAMPLER_DISTRIBUTED: random, split over world ranks
 *
 * The order a sampler gives.
 */
typedef enum {
    TDM_SAMPLER_SEQUENTIAL,
    TDM_SAMPLER_RANDOM,
    TDM_SAMPLER_DISTRIBUTED, /* random, split over `world` ranks */
} TdmSamplerKind;

/**
 * TdmSampler:
 * @kind: its kind
 * @n: samples in the dataset (after --limit)
 * @seed: the seed; the order depends on (seed, epoch) only
 * @epoch: the epoch
 * @position: the next index into this rank's order
 * @rank: this rank
 * @world: the number of ranks
 * @drop_last: distributed: drop the tail instead of padding
 * @order: this rank's sample indices for the epoch (after a restored state:
 *   the remaining ones)
 * @order_len: their number
 * @reserved: zero
 *
 * The order in which samples are read.
 */
struct _TdmSampler {
    TdmSamplerKind kind;
    int64_t n;          /* samples in the dataset (after --limit) */
    guint64 seed;
    int64_t epoch;      /* order depends on (seed, epoch) only */
    int64_t position;   /* next index into this rank's order */
    int rank, world;
    gboolean drop_last; /* distributed: drop the tail instead of padding */
    int64_t *order;     /* this rank's sample indices for the epoch (after a
                         * restored state: the remaining ones) */
    int64_t order_len;
    gpointer reserved[4];
};

/**
 * tdm_sampler_new:
 * @kind: the order
 * @n: the number of samples
 * @seed: the seed
 * @rank: this rank (distributed)
 * @world: the number of ranks (distributed)
 * @drop_last: distributed: drop the tail instead of padding
 *
 * Makes a sampler at epoch 0.
 *
 * Returns: (transfer full): the sampler, free it with tdm_sampler_free()
 */
TDM_API TdmSampler *tdm_sampler_new(TdmSamplerKind kind, int64_t n, guint64 seed, int rank,
                                    int world, gboolean drop_last);
/**
 * tdm_sampler_set_epoch:
 * @s: a sampler
 * @epoch: the epoch
 *
 * Starts @epoch from its beginning (recomputes the order).
 */
TDM_API void tdm_sampler_set_epoch(TdmSampler *s, int64_t epoch);
/**
 * tdm_sampler_next:
 * @s: a sampler
 * @index: (out): the next sample index
 *
 * The next sample of the epoch.
 *
 * Returns: FALSE at the end of the epoch
 */
TDM_API gboolean tdm_sampler_next(TdmSampler *s, int64_t *index);
/**
 * tdm_sampler_free:
 * @s: (transfer full) (nullable): a sampler
 *
 * Frees the sampler.
 */
TDM_API void tdm_sampler_free(TdmSampler *s);

/**
 * TdmSamplerState:
 * @epoch: the epoch
 * @consumed: samples of the epoch's global order all ranks together have
 *   consumed
 * @reserved: zero
 *
 * Where a sampler stands, independent of the world size. Restoring it (also
 * with another world size or worker count) continues with exactly the
 * samples an uninterrupted run would have used next.
 */
typedef struct {
    int64_t epoch;
    int64_t consumed;
    gpointer reserved[2];
} TdmSamplerState;

/**
 * tdm_sampler_get_state:
 * @s: a sampler
 * @state: (out caller-allocates): where it stands
 *
 * Where the sampler stands.
 */
TDM_API void tdm_sampler_get_state(const TdmSampler *s, TdmSamplerState *state);
/**
 * tdm_sampler_set_state:
 * @s: a sampler
 * @state: a state tdm_sampler_get_state() gave, maybe in another world size
 * @error: return location for a #GError, or NULL
 *
 * Continues from @state.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG when @state does not
 * fit this sampler
 */
TDM_API gboolean tdm_sampler_set_state(TdmSampler *s, const TdmSamplerState *state,
                                       GError **error);

/* ---- loader ---- */

/**
 * TdmLoaderOptions:
 * @batch_size: samples per batch (64)
 * @shuffle: a random sampler (TRUE) or sequential
 * @drop_last: drop a last partial batch (FALSE)
 * @seed: the sampler's and the transforms' seed
 * @limit: use only the first @limit samples (0: all)
 * @n_mean: entries in @mean and @std (0: no normalisation)
 * @mean: x = (u8 / 255 - mean) / std, per channel
 * @std: per channel
 * @rank: this rank: a distributed sampler when @world > 1
 * @world: the number of ranks
 * @workers: loader threads; 0: load on the caller's thread
 * @prefetch: batches queued ahead per worker
 * @transforms: (nullable): the augmentation; the loader takes a reference
 *   and never changes it: when @n_mean > 0 and the pipeline has a
 *   `normalize` without mean= / std=, the loader runs a copy with them
 *   filled in
 * @pin_memory: stage batches in the backend's pinned host memory
 * @reserved: zero
 *
 * How a loader makes batches; tdm_loader_options_init() sets the defaults.
 */
typedef struct {
    int batch_size;     /* 64 */
    gboolean shuffle;   /* random sampler (TRUE) or sequential */
    gboolean drop_last; /* drop a last partial batch (FALSE) */
    guint64 seed;
    int64_t limit;      /* use only the first `limit` samples (0 = all) */
    int n_mean;         /* number of per-channel entries in mean / std (0 = none) */
    float mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS]; /* x = (u8/255 - mean) / std */
    int rank, world;    /* distributed sampler when world > 1 */
    int workers;        /* 0 = load on the caller's thread */
    int prefetch;       /* batches queued ahead per worker */
    /* NULL = none. The loader takes a reference and never changes it: when
     * n_mean > 0 and the pipeline has a `normalize` without mean= / std=,
     * the loader runs a copy with mean and std filled in. */
    TdmTransformPipeline *transforms;
    gboolean pin_memory; /* stage batches in the backend's pinned host memory */
    gpointer reserved[6];
} TdmLoaderOptions;

/**
 * tdm_loader_options_init:
 * @opts: (out caller-allocates): the options
 *
 * The defaults: batch 64, shuffle, no drop_last, seed 0, no limit, no
 * normalisation, rank 0 of 1, no workers, prefetch 2.
 */
TDM_API void tdm_loader_options_init(TdmLoaderOptions *opts);

/**
 * TdmBatch:
 * @images: [B, C, H, W] f32 on the device (transfer none)
 * @labels: [B] i32 on the device (transfer none)
 * @size: B (the last batch may be smaller)
 * @wait_s: the time the caller waited for this batch
 * @ready: (nullable): recorded after the copy of @images to the device,
 *   which compute already waits for; NULL when the copy was synchronous
 *   (transfer none)
 * @reserved: zero
 *
 * A batch from tdm_loader_next().
 */
struct _TdmBatch {
    TdmTensor *images;  /* [B, C, H, W] f32 on the device (transfer none) */
    TdmTensor *labels;  /* [B] i32 on the device (transfer none) */
    int64_t size;       /* B (the last batch may be smaller) */
    double wait_s;      /* time the caller waited for this batch */
    /* Recorded after the copy of `images` to the device, which compute
     * already waits for; NULL when the copy was synchronous (transfer none). */
    TdmEvent *ready;
    gpointer reserved[3];
};

/**
 * tdm_loader_new:
 * @ds: the dataset; it must outlive the loader
 * @dev: the device the batches go to
 * @opts: the options
 * @error: return location for a #GError, or NULL
 *
 * Makes a loader. It keeps a reference to nothing it does not own.
 *
 * Returns: (transfer full): the loader, free it with tdm_loader_free(); or
 * NULL with @error set (options the dataset cannot meet, naming them)
 */
TDM_API TdmLoader *tdm_loader_new(TdmDataset *ds, TdmDevice *dev, const TdmLoaderOptions *opts,
                                  GError **error);
/**
 * tdm_loader_start_epoch:
 * @loader: a loader
 * @epoch: the epoch
 * @error: return location for a #GError, or NULL
 *
 * Begins an epoch (reshuffles by (seed, epoch)).
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_loader_start_epoch(TdmLoader *loader, int64_t epoch, GError **error);
/**
 * tdm_loader_next:
 * @loader: a loader
 * @error: return location for a #GError, or NULL
 *
 * The next batch of the epoch. At the end of the epoch it returns NULL
 * without an error, and a further call starts the next epoch by itself.
 *
 * Returns: (transfer none) (nullable): the batch, valid until the next
 * call; NULL without error at the end of the epoch, NULL with @error set
 * on failure (the reader's or a transform's error)
 */
TDM_API TdmBatch *tdm_loader_next(TdmLoader *loader, GError **error);
/**
 * tdm_loader_steps_per_epoch:
 * @loader: a loader
 *
 * The number of batches in an epoch (of this rank).
 *
 * Returns: the count
 */
TDM_API int64_t tdm_loader_steps_per_epoch(const TdmLoader *loader);
/**
 * tdm_loader_get_state:
 * @loader: a loader
 * @state: (out caller-allocates): the sampler state after the last batch
 *   handed out ((epoch + 1, 0) after an epoch's last batch)
 *
 * Where the loader stands, for checkpoints.
 */
TDM_API void tdm_loader_get_state(const TdmLoader *loader, TdmSamplerState *state);
/**
 * tdm_loader_set_state:
 * @loader: a loader
 * @state: a state tdm_loader_get_state() gave
 * @error: return location for a #GError, or NULL
 *
 * Restores a state; it applies at tdm_loader_start_epoch() of its epoch, to
 * resume mid-epoch.
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_loader_set_state(TdmLoader *loader, const TdmSamplerState *state,
                                      GError **error);
/**
 * tdm_loader_num_samples:
 * @loader: a loader
 *
 * The number of samples this rank reads per epoch (after the limit).
 *
 * Returns: the count
 */
TDM_API int64_t tdm_loader_num_samples(const TdmLoader *loader);
/**
 * tdm_loader_sample_shape:
 * @loader: a loader
 * @channels: (out): channels
 * @height: (out): height
 * @width: (out): width
 *
 * The shape of each sample the loader hands out (after its transforms).
 */
TDM_API void tdm_loader_sample_shape(const TdmLoader *loader, int *channels, int *height,
                                     int *width);
/**
 * tdm_loader_free:
 * @loader: (transfer full) (nullable): a loader
 *
 * Stops its workers and frees the loader.
 */
TDM_API void tdm_loader_free(TdmLoader *loader);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmDataset, tdm_dataset_close)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmSampler, tdm_sampler_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmLoader, tdm_loader_free)

G_END_DECLS

#endif /* TANDEM_DATA_H */
