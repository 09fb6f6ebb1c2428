/* tandem/transform.h - images, per-sample random streams and augmentation
 * transforms.
 *
 * A transform is a feature of kind TDM_FEATURE_TRANSFORM whose class is a
 * TdmTransformClass ("random-crop", "hflip", "rotate", "normalize", ...). A
 * pipeline string "random-crop 28 pad=2 | hflip p=0.5 | normalize" is parsed
 * into a TdmTransformPipeline; each stage's arguments follow the grammar
 * of <tandem/params.h>, and parse errors point at the offending token.
 *
 * Images travel through a pipeline as float CHW with values on the u8 scale
 * (0..255) until `normalize` (torchvision's ToTensor + Normalize) maps them
 * to (x / 255 - mean) / std; a pipeline without normalize ends with x / 255.
 * Every random decision of a sample comes from its own stream keyed by
 * (seed, epoch, sample index, transform position), so the augmented pixels
 * do not depend on the number of workers or on the order samples are loaded.
 */
#ifndef TANDEM_TRANSFORM_H
#define TANDEM_TRANSFORM_H

#include <tandem/params.h>

G_BEGIN_DECLS

/* ---- per-sample random stream (counter based, cheap to create) ---- */
typedef struct {
    guint64 key[2];
    guint64 counter;
    gpointer reserved[2];
} TdmRng;

TDM_API void tdm_rng_init(TdmRng *rng, guint64 seed, guint64 epoch, guint64 index, guint64 stream);
TDM_API guint64 tdm_rng_next_u64(TdmRng *rng);
/* Uniform in [0, 1). */
TDM_API double tdm_rng_uniform(TdmRng *rng);
/* Uniform in [lo, hi). */
TDM_API double tdm_rng_range(TdmRng *rng, double lo, double hi);
/* Uniform integer in [0, n). */
TDM_API guint64 tdm_rng_below(TdmRng *rng, guint64 n);

/* ---- images ---- */
typedef struct {
    int c, h, w;
    float *data;        /* CHW, c*h*w floats */
    size_t capacity;    /* floats allocated */
    gboolean normalized;/* FALSE: values on the 0..255 scale */
    gpointer reserved[2];
} TdmImage;

/* Make room for c*h*w floats (keeps the buffer when large enough). */
TDM_API void tdm_image_reserve(TdmImage *img, int c, int h, int w);
TDM_API void tdm_image_clear(TdmImage *img);
/* Fill from u8 pixels in CHW order. */
TDM_API void tdm_image_set_u8(TdmImage *img, const guint8 *chw, int c, int h, int w);

/* ---- transforms ---- */
/* 1.1 gave TdmTransform a reserved slot, params: a transform that reads it
 * needs a core that fills it (see `since 1.1` in the struct). */
#define TDM_TRANSFORM_IFACE_VERSION TDM_IFACE_VERSION(1, 1)

typedef struct _TdmTransform TdmTransform;
typedef struct _TdmTransformClass TdmTransformClass;

/* One parsed argument: "key=value", or a positional value (key == NULL). */
typedef struct {
    const char *key;
    const char *value;
    int column;         /* 1-based position in the pipeline string */
} TdmTransformArg;

/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses a transform with a NULL required slot. */
struct _TdmTransformClass {
    guint32 iface_version;  /* TDM_TRANSFORM_IFACE_VERSION */
    guint32 struct_size;    /* sizeof(TdmTransformClass) */
    /* Set up t->priv from the arguments: t->params holds them checked
     * against the feature's specs (types, ranges, required ones), so
     * create() reads typed values and checks only what the specs cannot
     * say, with tdm_params_set_error(); `args` are the raw tokens. Errors
     * name the argument and its column ("rotate: degrees=abc (column 31):
     * expected a number"). */
    gboolean (*create)(TdmTransform *t, const TdmTransformArg *args, int n_args,
                       GError **error);
    /* Output shape for an input of shape (c, h, w); 0 sizes mean "varies"
     * (then the loader needs a later transform that fixes them).
     * (optional: NULL means the output has the input's shape) */
    gboolean (*output_shape)(TdmTransform *t, int c, int h, int w, int *oc, int *oh, int *ow,
                             GError **error);
    /* dst = transform(src) with this sample's random stream. dst is a
     * different image; use tdm_image_reserve on it. Thread-safe: t is
     * read-only here. */
    gboolean (*apply)(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                      GError **error);
    /* (optional: NULL means there is nothing to free) */
    void (*finalize)(TdmTransform *t);
    gpointer reserved[4];
};

struct _TdmTransform {
    const TdmTransformClass *klass;
    char *name;
    int position;   /* index in its pipeline (the random stream number) */
    gpointer priv;
    /* since 1.1: params */
    /* The arguments, already bound to the feature's specs when create()
     * runs (<tandem/params.h>; transfer none); NULL when the feature
     * registered no specs, and create() parses the args itself. */
    TdmParams *params;
    gpointer reserved[1];
};

/* A pipeline is reference counted. Once parsed (and its normalisation set)
 * it does not change, so one pipeline may be shared: a loader takes a
 * reference to the one in its options and runs it on its worker threads. */
typedef struct _TdmTransformPipeline TdmTransformPipeline;

/* Parse "name arg k=v | name ...". An empty string is an empty pipeline.
 * Unknown names and bad arguments are TDM_ERROR_INVALID_ARG pointing at the
 * token and its column. Transfer full: one reference, for the caller. */
TDM_API TdmTransformPipeline *tdm_transform_pipeline_parse(const char *spec, GError **error);
/* Returns `p`, with one more reference. */
TDM_API TdmTransformPipeline *tdm_transform_pipeline_ref(TdmTransformPipeline *p);
/* Drops a reference (NULL is ignored); the last one frees the pipeline. */
TDM_API void tdm_transform_pipeline_unref(TdmTransformPipeline *p);
TDM_API int tdm_transform_pipeline_length(const TdmTransformPipeline *p);
/* The pipeline's output shape for inputs of (c, h, w); an error when it
 * would vary. */
TDM_API gboolean tdm_transform_pipeline_output_shape(TdmTransformPipeline *p, int c, int h, int w,
                                                     int *oc, int *oh, int *ow, GError **error);
/* Defaults for a `normalize` given without mean= / std= (the dataset's
 * constants, n <= TDM_MAX_CHANNELS); set them before
 * tdm_transform_pipeline_output_shape(). This changes `p`, so only its one
 * owner may call it, before sharing it (`p` must hold a single reference). A
 * loader given a pipeline whose normalize lacks them fills in its own
 * options' constants in a copy and leaves `p` as it is. */
TDM_API void tdm_transform_pipeline_set_normalization(TdmTransformPipeline *p, int n,
                                                      const float *mean, const float *std);
/* The mean / std the pipeline's last normalize uses; FALSE when it has none. */
TDM_API gboolean tdm_transform_pipeline_get_normalization(const TdmTransformPipeline *p, int *n,
                                                          float *mean, float *std);
/* Run the pipeline on `img` (in place: `scratch` is a second buffer the
 * caller keeps per thread) with the streams of (seed, epoch, index); ends
 * normalised (x / 255 when no normalize transform ran). */
TDM_API gboolean tdm_transform_pipeline_apply(TdmTransformPipeline *p, TdmImage *img,
                                              TdmImage *scratch, guint64 seed, guint64 epoch,
                                              guint64 index, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmTransformPipeline, tdm_transform_pipeline_unref)

G_END_DECLS

#endif /* TANDEM_TRANSFORM_H */
