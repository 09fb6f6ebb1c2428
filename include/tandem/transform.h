/* SPDX-License-Identifier: MIT */
/**
 * SECTION:transform
 * @title: Transforms
 * @short_description: images, per-sample random streams and augmentation
 * transforms
 * @include: tandem/tandem.h
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

/**
 * TdmRng:
 * @key: the stream's key, from (seed, epoch, index, stream)
 * @counter: the next block
 * @reserved: zero
 *
 * A per-sample random stream: counter based, cheap to create.
 */
typedef struct {
    guint64 key[2];
    guint64 counter;
    gpointer reserved[2];
} TdmRng;

/**
 * tdm_rng_init:
 * @rng: (out caller-allocates): the stream
 * @seed: the run's seed
 * @epoch: the epoch
 * @index: the sample's index
 * @stream: the stream number (a transform's position in its pipeline)
 *
 * Starts the stream of (@seed, @epoch, @index, @stream): the same four
 * numbers always give the same numbers, whatever thread draws them.
 */
TDM_API void tdm_rng_init(TdmRng *rng, guint64 seed, guint64 epoch, guint64 index, guint64 stream);
/**
 * tdm_rng_next_u64:
 * @rng: a stream
 *
 * The next 64 random bits.
 *
 * Returns: the bits
 */
TDM_API guint64 tdm_rng_next_u64(TdmRng *rng);
/**
 * tdm_rng_uniform:
 * @rng: a stream
 *
 * A uniform draw.
 *
 * Returns: a number in [0, 1)
 */
TDM_API double tdm_rng_uniform(TdmRng *rng);
/**
 * tdm_rng_range:
 * @rng: a stream
 * @lo: the least value
 * @hi: the bound above
 *
 * A uniform draw in a range.
 *
 * Returns: a number in [@lo, @hi)
 */
TDM_API double tdm_rng_range(TdmRng *rng, double lo, double hi);
/**
 * tdm_rng_below:
 * @rng: a stream
 * @n: the bound, > 0
 *
 * A uniform integer draw.
 *
 * Returns: an integer in [0, @n)
 */
TDM_API guint64 tdm_rng_below(TdmRng *rng, guint64 n);

/* ---- images ---- */

/**
 * TdmImage:
 * @c: channels
 * @h: height
 * @w: width
 * @data: CHW, c * h * w floats
 * @capacity: floats allocated
 * @normalized: FALSE: values on the 0..255 scale
 * @reserved: zero
 *
 * An image travelling through a pipeline; its buffer is reused
 * (tdm_image_reserve()).
 */
typedef struct {
    int c, h, w;
    float *data;        /* CHW, c*h*w floats */
    size_t capacity;    /* floats allocated */
    gboolean normalized;/* FALSE: values on the 0..255 scale */
    gpointer reserved[2];
} TdmImage;

/**
 * tdm_image_reserve:
 * @img: an image
 * @c: channels
 * @h: height
 * @w: width
 *
 * Makes room for c * h * w floats and sets the shape; keeps the buffer when
 * it is large enough.
 */
TDM_API void tdm_image_reserve(TdmImage *img, int c, int h, int w);
/**
 * tdm_image_clear:
 * @img: an image
 *
 * Frees the buffer (not @img itself).
 */
TDM_API void tdm_image_clear(TdmImage *img);
/**
 * tdm_image_set_u8:
 * @img: an image
 * @chw: (array): c * h * w pixels, CHW
 * @c: channels
 * @h: height
 * @w: width
 *
 * Fills @img from u8 pixels, on the 0..255 scale.
 */
TDM_API void tdm_image_set_u8(TdmImage *img, const guint8 *chw, int c, int h, int w);

/* ---- transforms ---- */
/**
 * TDM_TRANSFORM_IFACE_VERSION:
 *
 * The interface version of #TdmTransformClass this core's headers describe.
 * 1.1 gave #TdmTransform a reserved slot, params: a transform that reads it
 * needs a core that fills it.
 */
#define TDM_TRANSFORM_IFACE_VERSION TDM_IFACE_VERSION(1, 1)

/**
 * TdmTransform:
 * @klass: its class
 * @name: its name
 * @position: its index in its pipeline (the random stream number)
 * @priv: the transform's own state, set in create
 * @params: since 1.1: the arguments, already bound to the feature's specs
 *   when create runs (<tandem/params.h>; transfer none); NULL when the
 *   feature registered no specs, and create parses the args itself
 * @reserved: zero
 *
 * One stage of a pipeline.
 */
typedef struct _TdmTransform TdmTransform;
/**
 * TdmTransformClass:
 * @iface_version: %TDM_TRANSFORM_IFACE_VERSION
 * @struct_size: sizeof(TdmTransformClass)
 * @create: sets up t->priv from the arguments: t->params holds them
 *   checked against the feature's specs (types, ranges, required ones), so
 *   create reads typed values and checks only what the specs cannot say,
 *   with tdm_params_set_error(); @args (@n_args of them, the caller's) are
 *   the raw tokens. FALSE with the error set, naming the argument and its
 *   column ("rotate: degrees=abc (column 31): expected a number"); the
 *   core then frees the stage, calling @finalize, so finalize must cope
 *   with a partial create
 * @output_shape: the output's shape (*@oc, *@oh, *@ow) for an input of
 *   shape (@c, @h, @w); 0 sizes mean "varies" (the loader then needs a
 *   later transform that fixes them); FALSE with the error set for an input
 *   it cannot take (optional: NULL means the output has the input's shape)
 * @apply: @dst = transform(@src) with this sample's random stream @rng;
 *   @dst is a different image, sized with tdm_image_reserve(); called from
 *   several loader threads at once, so @t is read-only here; FALSE with the
 *   error set
 * @finalize: frees t->priv (optional: NULL means there is nothing to free)
 * @reserved: NULL
 *
 * A transform's slots, in a static const struct the plugin gives to
 * tdm_plugin_add_feature() as a TDM_FEATURE_TRANSFORM. Every slot is
 * required unless its comment says
 * "(optional: NULL means ...)"; the registry refuses a transform with a
 * NULL required slot. The comment of each slot in the header says what it
 * must do.
 */
typedef struct _TdmTransformClass TdmTransformClass;

/**
 * TdmTransformArg:
 * @key: (nullable): the key of "key=value"; NULL for a positional value
 * @value: the value
 * @column: its 1-based position in the pipeline string
 *
 * One parsed argument of a pipeline stage.
 */
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

/**
 * TdmTransformPipeline:
 *
 * A parsed pipeline, reference counted. Once parsed (and its normalisation
 * set) it does not change, so one pipeline may be shared: a loader takes a
 * reference to the one in its options and runs it on its worker threads.
 */
typedef struct _TdmTransformPipeline TdmTransformPipeline;

/**
 * tdm_transform_pipeline_parse:
 * @spec: "name arg k=v | name ..."; "" is an empty pipeline
 * @error: return location for a #GError, or NULL
 *
 * Parses a pipeline and creates its transforms.
 *
 * Returns: (transfer full): the pipeline, one reference for the caller; or
 * NULL with %TDM_ERROR_INVALID_ARG pointing at the token and its column
 * (an unknown name, a bad argument)
 */
TDM_API TdmTransformPipeline *tdm_transform_pipeline_parse(const char *spec, GError **error);
/**
 * tdm_transform_pipeline_ref:
 * @p: a pipeline
 *
 * Takes a reference.
 *
 * Returns: (transfer full): @p
 */
TDM_API TdmTransformPipeline *tdm_transform_pipeline_ref(TdmTransformPipeline *p);
/**
 * tdm_transform_pipeline_unref:
 * @p: (transfer full) (nullable): a pipeline
 *
 * Drops a reference; the last one frees the pipeline.
 */
TDM_API void tdm_transform_pipeline_unref(TdmTransformPipeline *p);
/**
 * tdm_transform_pipeline_length:
 * @p: a pipeline
 *
 * The number of stages.
 *
 * Returns: the count
 */
TDM_API int tdm_transform_pipeline_length(const TdmTransformPipeline *p);
/**
 * tdm_transform_pipeline_output_shape:
 * @p: a pipeline
 * @c: input channels
 * @h: input height
 * @w: input width
 * @oc: (out): output channels
 * @oh: (out): output height
 * @ow: (out): output width
 * @error: return location for a #GError, or NULL
 *
 * The pipeline's output shape for inputs of (@c, @h, @w).
 *
 * Returns: TRUE, or FALSE with an error naming the stage when the shape
 * would vary or a stage refuses the input
 */
TDM_API gboolean tdm_transform_pipeline_output_shape(TdmTransformPipeline *p, int c, int h, int w,
                                                     int *oc, int *oh, int *ow, GError **error);
/**
 * tdm_transform_pipeline_set_normalization:
 * @p: a pipeline with a single reference
 * @n: entries in @mean and @std, <= %TDM_MAX_CHANNELS
 * @mean: (array length=n): per channel
 * @std: (array length=n): per channel
 *
 * Defaults for a `normalize` given without mean= / std= (the dataset's
 * constants); set them before tdm_transform_pipeline_output_shape(). This
 * changes @p, so only its one owner may call it, before sharing it. A
 * loader given a pipeline whose normalize lacks them fills in its own
 * options' constants in a copy and leaves @p as it is.
 */
TDM_API void tdm_transform_pipeline_set_normalization(TdmTransformPipeline *p, int n,
                                                      const float *mean, const float *std);
/**
 * tdm_transform_pipeline_get_normalization:
 * @p: a pipeline
 * @n: (out): the entries
 * @mean: (out caller-allocates): %TDM_MAX_CHANNELS entries
 * @std: (out caller-allocates): %TDM_MAX_CHANNELS entries
 *
 * The mean and std the pipeline's last normalize uses.
 *
 * Returns: FALSE when it has none
 */
TDM_API gboolean tdm_transform_pipeline_get_normalization(const TdmTransformPipeline *p, int *n,
                                                          float *mean, float *std);
/**
 * tdm_transform_pipeline_apply:
 * @p: a pipeline
 * @img: the image, transformed in place
 * @scratch: a second buffer the caller keeps per thread
 * @seed: the run's seed
 * @epoch: the epoch
 * @index: the sample's index
 * @error: return location for a #GError, or NULL
 *
 * Runs the pipeline on @img with the random streams of (@seed, @epoch,
 * @index); the result ends normalised (x / 255 when no normalize transform
 * ran).
 *
 * Returns: TRUE, or FALSE with the failing stage's error
 */
TDM_API gboolean tdm_transform_pipeline_apply(TdmTransformPipeline *p, TdmImage *img,
                                              TdmImage *scratch, guint64 seed, guint64 epoch,
                                              guint64 index, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmTransformPipeline, tdm_transform_pipeline_unref)

G_END_DECLS

#endif /* TANDEM_TRANSFORM_H */
