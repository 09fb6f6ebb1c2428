/* tandem/data.h - datasets, samplers, the loader and batches.
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

/* 1.1 gave TdmDataset a reserved slot, params: a reader that reads it
 * needs a core that fills it (see `since 1.1` in the struct). */
#define TDM_DATASET_IFACE_VERSION TDM_IFACE_VERSION(1, 1)

/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses a reader with a NULL required slot. */
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

/* Open a dataset: a reader and its parameters, "KIND path=PATH key=value
 * ..." (or "KIND PATH key=value ...": <tandem/params.h>), e.g.
 * "imagefolder path=/data/pets size=first"; the older form
 * "KIND:PATH[,key=value...]" ("idx:/usr/share/datasets/fashion-mnist",
 * "imagefolder:/data/pets,size=first"), which means the same; or a known
 * name ("fashion-mnist", "mnist") that resolves to the Debian data set, or
 * for fashion-mnist to the embedded subset when that is not installed. A
 * bad parameter names the reader, the key and what it accepts. Transfer
 * full. */
TDM_API TdmDataset *tdm_dataset_open(const char *spec, const char *split, GError **error);
TDM_API gboolean tdm_dataset_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                                  GError **error);
TDM_API void tdm_dataset_close(TdmDataset *ds);
/* Per-channel mean and std (of pixels in [0, 1]) to normalise with: the
 * published constants of known datasets, else estimated from the first
 * samples. `mean` and `std` hold TDM_MAX_CHANNELS entries; *n gets the
 * channel count. */
TDM_API gboolean tdm_dataset_get_normalization(TdmDataset *ds, int *n, float *mean, float *std,
                                               GError **error);
/* The parameters every reader takes before its own (path: required and
 * positional), ending with a NULL name (transfer none). */
TDM_API const TdmParamSpec *tdm_dataset_common_params(void);
/* Where a known dataset name resolves ("KIND:PATH", transfer full), or NULL
 * with an error when no copy is installed; a spec that names its reader
 * ("KIND:PATH", "KIND path=PATH ...") is returned as it is. */
TDM_API char *tdm_dataset_resolve(const char *spec, GError **error);

/* ---- samplers ---- */
typedef enum {
    TDM_SAMPLER_SEQUENTIAL,
    TDM_SAMPLER_RANDOM,
    TDM_SAMPLER_DISTRIBUTED, /* random, split over `world` ranks */
} TdmSamplerKind;

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

TDM_API TdmSampler *tdm_sampler_new(TdmSamplerKind kind, int64_t n, guint64 seed, int rank,
                                    int world, gboolean drop_last);
/* Start `epoch` from its beginning (recomputes the order). */
TDM_API void tdm_sampler_set_epoch(TdmSampler *s, int64_t epoch);
/* Next sample index; FALSE at the end of the epoch. */
TDM_API gboolean tdm_sampler_next(TdmSampler *s, int64_t *index);
TDM_API void tdm_sampler_free(TdmSampler *s);

/* Where a sampler stands, independent of the world size: the epoch and how
 * many samples of the epoch's global order all ranks together have consumed.
 * Restoring it (also with another world size or worker count) continues with
 * exactly the samples an uninterrupted run would have used next. */
typedef struct {
    int64_t epoch;
    int64_t consumed;
    gpointer reserved[2];
} TdmSamplerState;

TDM_API void tdm_sampler_get_state(const TdmSampler *s, TdmSamplerState *state);
TDM_API gboolean tdm_sampler_set_state(TdmSampler *s, const TdmSamplerState *state,
                                       GError **error);

/* ---- loader ---- */
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

/* batch 64, shuffle, no drop_last, seed 0, no limit, no normalisation,
 * rank 0 of 1, no workers, prefetch 2. */
TDM_API void tdm_loader_options_init(TdmLoaderOptions *opts);

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

/* The loader keeps a reference to nothing it does not own: `ds` must outlive
 * it. Transfer full. */
TDM_API TdmLoader *tdm_loader_new(TdmDataset *ds, TdmDevice *dev, const TdmLoaderOptions *opts,
                                  GError **error);
/* Begin an epoch (reshuffles by (seed, epoch)). */
TDM_API gboolean tdm_loader_start_epoch(TdmLoader *loader, int64_t epoch, GError **error);
/* Next batch of the epoch (transfer none, valid until the next call); NULL
 * without error at the end of the epoch (a further call starts the next
 * epoch by itself), NULL with error on failure. */
TDM_API TdmBatch *tdm_loader_next(TdmLoader *loader, GError **error);
TDM_API int64_t tdm_loader_steps_per_epoch(const TdmLoader *loader);
/* The sampler state after the last batch handed out (for checkpoints;
 * (epoch + 1, 0) after an epoch's last batch), and its restoration, which
 * applies at tdm_loader_start_epoch() of that epoch to resume mid-epoch. */
TDM_API void tdm_loader_get_state(const TdmLoader *loader, TdmSamplerState *state);
TDM_API gboolean tdm_loader_set_state(TdmLoader *loader, const TdmSamplerState *state,
                                      GError **error);
TDM_API int64_t tdm_loader_num_samples(const TdmLoader *loader);
/* The shape of each sample the loader hands out (after its transforms). */
TDM_API void tdm_loader_sample_shape(const TdmLoader *loader, int *channels, int *height,
                                     int *width);
TDM_API void tdm_loader_free(TdmLoader *loader);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmDataset, tdm_dataset_close)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmSampler, tdm_sampler_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmLoader, tdm_loader_free)

G_END_DECLS

#endif /* TANDEM_DATA_H */
