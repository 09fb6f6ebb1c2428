/* SPDX-License-Identifier: MIT */
/* core/loader.c - turns dataset samples into batches on a device, in parallel.
 *
 * Batch k of an epoch is the slice [k*B, (k+1)*B) of this rank's sampler
 * order, so its content is fixed before anyone loads it. `workers` threads
 * of a GThreadPool (created with the loader, alive until it is freed, so
 * they persist across epochs) each run one long loop: take the next batch
 * number, assemble the whole batch into a staging slot, mark the slot ready.
 * The slots form a ring of workers * prefetch host buffers (pinned through
 * the backend's host_alloc when pin_memory is set and offered); batch k
 * always lands in slot k % n_slots and a worker may start batch k only once
 * batch k - n_slots has been handed out, which bounds the prefetch and makes
 * delivery ordered: tdm_loader_next waits for slot k to hold batch k even
 * when k + 1 finished first. With 0 workers the caller fills the batch.
 *
 * Each sample is read (fixed-size `read`, or `read_image` when the dataset's
 * samples vary in size), run through the transform pipeline with the
 * sample's own stream (seed, epoch, dataset index), or, without a pipeline,
 * normalised per channel ((v/255 - mean) / std) in one vectorised pass.
 * Nothing depends on which thread loads what, so 0, 1 or 4 workers give the
 * same bytes. The caller copies a ready slot into one of two device tensor sets
 * (batch k uses set k % 2, so an asynchronous copy of batch k+1 never
 * overwrites batch k); from pinned memory the copy runs on the device's copy
 * stream, after an event on compute (set k % 2 was last read by batch k-2's
 * step, queued before this call) and before one that compute waits for
 * (batch.ready), and the slot is released on the next call once that event
 * is reached, without waiting for the rest of the device; else the copy is a
 * synchronous tdm_tensor_write. Buffers, tensors, events and threads are made once: a steady
 * step allocates nothing. wait_s is the time the caller spent inside
 * tdm_loader_next waiting for data (waiting for the device to finish the
 * previous async copy is the device's time and not counted). A worker's
 * error (a corrupt file) is kept in its slot and returned when that batch
 * is due; freeing the loader mid-epoch cancels the batches in flight
 * (workers check between samples) and joins the threads. After the last
 * batch of an epoch, the next call begins the next epoch (reshuffled), and
 * a state restored with tdm_loader_set_state applies to the next
 * tdm_loader_start_epoch of that epoch.
 *
 * Test hook (compiled in with configure --enable-test-hooks only):
 * TDM_LOADER_JITTER_US makes each worker sleep up to that many microseconds
 * after a batch, so that batches finish out of order.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "internal.h"

typedef enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY } SlotState;

typedef struct {
    float *images;      /* [B, C, H, W] staging */
    int32_t *labels;    /* [B] */
    int64_t batch;      /* the batch it holds or is filling */
    int64_t count;      /* samples in it */
    SlotState state;
    GError *error;
} Slot;

/* Per-thread buffers, made once per worker. */
typedef struct {
    guint8 *sample;     /* one fixed-size u8 sample */
    TdmImage img, scratch;
} Scratch;

struct _TdmLoader {
    TdmDataset *ds;
    TdmDevice *dev;
    TdmLoaderOptions opts;
    TdmSampler *sampler;
    int64_t n;              /* samples used: min(length, limit) */
    int64_t per_epoch;      /* this rank's samples in a whole epoch */
    int64_t rows;           /* rows of the batch buffers: the batch size, or an epoch if less */
    int c, h, w;            /* shape of a sample in the batch */
    size_t sample_floats;
    size_t sample_bytes;    /* u8 bytes of a fixed-size dataset sample */
    gboolean variable;      /* dataset samples differ in size (read_image) */
    /* per channel: (v / 255 - mean) / std */
    float norm_mean[TDM_MAX_CHANNELS], norm_std[TDM_MAX_CHANNELS];
    /* A reference to the options' pipeline, or the loader's own copy of it
     * with the options' mean and std in its normalize (NULL: none). */
    TdmTransformPipeline *transforms;

    Slot *slots;
    int n_slots;
    gboolean pinned;
    gboolean async_copy;
    TdmEvent *compute_done; /* async copies: compute's queue before a copy */
    TdmEvent *copied[2];    /* after the copy into device set d */
    TdmEvent *held;         /* copied[d] of the held slot */

    TdmTensor *images[2], *labels[2];           /* full batch on the device */
    TdmTensor *tail_images[2], *tail_labels[2]; /* views for a short batch */
    int64_t tail_size;
    TdmBatch batch;

    /* Epoch progress; the fields below `lock` are read by workers under it. */
    GMutex lock;
    GCond cond;
    int64_t epoch;
    int64_t steps;          /* batches in the current (maybe resumed) epoch */
    int64_t issued;         /* next batch a worker takes */
    int64_t released;       /* batches whose slots are free again */
    int64_t delivered;      /* batches handed to the caller */
    int in_flight;          /* batches being filled */
    gint generation;        /* bumped to cancel batches in flight */
    gboolean quit;
    gboolean hold_slot;     /* the last delivered slot awaits an async copy */
    gboolean started, ended;
    TdmSamplerState pending;
    gboolean has_pending;
    GError *failed;         /* sticky: the epoch cannot go on */

    GThreadPool *pool;
    Scratch caller;         /* for workers == 0 */
    guint jitter_us;
    gboolean prepared;      /* the dataset was told which samples come */
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

static int64_t steps_for(const TdmLoader *l, int64_t samples)
{
    int64_t b = l->opts.batch_size;
    return l->opts.drop_last ? samples / b : (samples + b - 1) / b;
}

int64_t tdm_loader_steps_per_epoch(const TdmLoader *loader)
{
    g_return_val_if_fail(loader != NULL, 0);
    return steps_for(loader, loader->per_epoch);
}

int64_t tdm_loader_num_samples(const TdmLoader *loader)
{
    g_return_val_if_fail(loader != NULL, 0);
    return loader->per_epoch;
}

void tdm_loader_sample_shape(const TdmLoader *loader, int *channels, int *height, int *width)
{
    g_return_if_fail(loader != NULL && channels != NULL && height != NULL && width != NULL);
    *channels = loader->c;
    *height = loader->h;
    *width = loader->w;
}

/* ---- filling a batch (any thread) ---- */

static void scratch_init(TdmLoader *l, Scratch *sc)
{
    memset(sc, 0, sizeof(*sc));
    if (!l->variable) {
        sc->sample = g_malloc(MAX(l->sample_bytes, 1));
    }
}

static void scratch_clear(Scratch *sc)
{
    g_clear_pointer(&sc->sample, g_free);
    if (sc->img.data != NULL) {
        tdm_image_clear(&sc->img);
    }
    if (sc->scratch.data != NULL) {
        tdm_image_clear(&sc->scratch);
    }
}

/* Built with the loop vectoriser on (the default -O2 leaves it scalar) and,
 * on x86-64, also for AVX-512 and AVX2, picked at load time. Only exactly
 * rounded operations (conversion, subtraction, division, no multiply to fuse)
 * so that every build gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define LOADER_VECTORIZE                                                                  \
    __attribute__((optimize("O3"), target_clones("avx512f", "avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define LOADER_VECTORIZE __attribute__((optimize("O3")))
#else
#define LOADER_VECTORIZE
#endif

LOADER_VECTORIZE
static void normalize_u8(float *restrict out, const guint8 *restrict src, size_t n, float mean,
                         float std)
{
    for (size_t k = 0; k < n; k++) {
        out[k] = ((float)src[k] / 255.0f - mean) / std;
    }
}

static gboolean load_sample(TdmLoader *l, Scratch *sc, int64_t index, float *dst,
                            int32_t *label, GError **error)
{
    TdmDataset *ds = l->ds;
    if (l->transforms == NULL) {
        if (!tdm_dataset_read(ds, index, sc->sample, label, error)) {
            return FALSE;
        }
        const size_t plane = (size_t)l->h * (size_t)l->w;
        for (int ch = 0; ch < l->c; ch++) {
            normalize_u8(dst + (size_t)ch * plane, sc->sample + (size_t)ch * plane, plane,
                         l->norm_mean[ch], l->norm_std[ch]);
        }
        return TRUE;
    }
    if (l->variable) {
        if (!ds->klass->read_image(ds, index, &sc->img, label, error)) {
            return FALSE;
        }
    } else {
        if (!tdm_dataset_read(ds, index, sc->sample, label, error)) {
            return FALSE;
        }
        tdm_image_set_u8(&sc->img, sc->sample, ds->channels, ds->height, ds->width);
    }
    if (!tdm_transform_pipeline_apply(l->transforms, &sc->img, &sc->scratch, l->opts.seed,
                                      (guint64)l->epoch, (guint64)index, error)) {
        return FALSE;
    }
    if (sc->img.c != l->c || sc->img.h != l->h || sc->img.w != l->w) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: sample %" G_GINT64_FORMAT " came out of the transforms as %dx%dx%d, "
                    "expected %dx%dx%d", ds->path, index, sc->img.c, sc->img.h, sc->img.w, l->c,
                    l->h, l->w);
        return FALSE;
    }
    memcpy(dst, sc->img.data, l->sample_floats * sizeof(float));
    return TRUE;
}

/* Batch k into `slot`; stops early (without error) when `generation` moves. */
static gboolean fill_batch(TdmLoader *l, Scratch *sc, Slot *slot, int64_t k, gint generation,
                           GError **error)
{
    const int64_t B = l->opts.batch_size;
    const int64_t first = k * B;
    const int64_t count = MIN(B, l->sampler->order_len - first);
    for (int64_t j = 0; j < count; j++) {
        if (g_atomic_int_get(&l->generation) != generation) {
            return TRUE;
        }
        int64_t index = l->sampler->order[first + j];
        if (!load_sample(l, sc, index, slot->images + (size_t)j * l->sample_floats,
                         &slot->labels[j], error)) {
            g_prefix_error(error, "loading sample %" G_GINT64_FORMAT " (batch %" G_GINT64_FORMAT
                           " of epoch %" G_GINT64_FORMAT "): ", index, k, l->epoch);
            return FALSE;
        }
    }
    slot->count = count;
    if (l->jitter_us > 0) {
        guint64 h = ((guint64)k + 1) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
        g_usleep((gulong)(h % l->jitter_us));
    }
    return TRUE;
}

static gboolean batch_available(const TdmLoader *l)
{
    return l->issued < l->steps && l->issued < l->released + l->n_slots;
}

/* The body of each pool thread: runs until the loader is freed. */
static void worker_main(gpointer data, gpointer user_data)
{
    (void)data;
    TdmLoader *l = user_data;
    Scratch sc;
    scratch_init(l, &sc);
    g_mutex_lock(&l->lock);
    for (;;) {
        while (!l->quit && !batch_available(l)) {
            g_cond_wait(&l->cond, &l->lock);
        }
        if (l->quit) {
            break;
        }
        int64_t k = l->issued++;
        Slot *slot = &l->slots[k % l->n_slots];
        slot->state = SLOT_FILLING;
        slot->batch = k;
        l->in_flight++;
        gint generation = l->generation;
        g_mutex_unlock(&l->lock);

        GError *error = NULL;
        fill_batch(l, &sc, slot, k, generation, &error);

        g_mutex_lock(&l->lock);
        l->in_flight--;
        slot->error = error;
        slot->state = SLOT_READY;
        g_cond_broadcast(&l->cond);
    }
    g_mutex_unlock(&l->lock);
    scratch_clear(&sc);
}

/* ---- creation ---- */

static gboolean check_options(TdmDataset *ds, const TdmLoaderOptions *opts, GError **error)
{
    if (opts->batch_size <= 0 || opts->world < 1 || opts->rank < 0 || opts->rank >= opts->world ||
        opts->limit < 0 || opts->n_mean < 0 || opts->n_mean > TDM_MAX_CHANNELS ||
        opts->workers < 0 || opts->prefetch < 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "invalid loader options (batch size %d, rank %d of %d, limit %" G_GINT64_FORMAT
                    ", %d mean entries, %d workers, prefetch %d)", opts->batch_size, opts->rank,
                    opts->world, opts->limit, opts->n_mean, opts->workers, opts->prefetch);
        return FALSE;
    }
    if (opts->n_mean != 0 && opts->n_mean != 1 && opts->n_mean != ds->channels) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%d normalisation entries for a dataset of %d channels", opts->n_mean,
                    ds->channels);
        return FALSE;
    }
    for (int c = 0; c < opts->n_mean; c++) {
        if (!(opts->std[c] > 0.0f)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "normalisation std of channel %d is %g (must be > 0)", c, opts->std[c]);
            return FALSE;
        }
    }
    return TRUE;
}

/* The pipeline the loader runs: the options', with a reference; or, when
 * an argument-less `normalize` in it is to use the options' mean and std
 * (a dataset's constants), a copy of it with those filled in, so that the
 * caller's pipeline, which others may share, never changes. */
static gboolean take_pipeline(TdmLoader *l, GError **error)
{
    TdmTransformPipeline *given = l->opts.transforms;
    l->opts.transforms = NULL; /* l->transforms holds what the loader runs */
    if (given == NULL) {
        return TRUE;
    }
    if (l->opts.n_mean == 0 || !tdm_transform_pipeline_lacks_normalization(given)) {
        l->transforms = tdm_transform_pipeline_ref(given);
        return TRUE;
    }
    l->transforms = tdm_transform_pipeline_copy(given, error);
    if (l->transforms == NULL) {
        return FALSE;
    }
    tdm_transform_pipeline_set_normalization(l->transforms, l->opts.n_mean, l->opts.mean,
                                             l->opts.std);
    return TRUE;
}

/* The shape of a batch sample: the dataset's, or what the pipeline makes of it. */
static gboolean sample_shape(TdmLoader *l, GError **error)
{
    TdmDataset *ds = l->ds;
    l->variable = ds->height <= 0 || ds->width <= 0;
    if (l->variable && ds->klass->read_image == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: samples vary in size but the %s reader cannot decode them one by one",
                    ds->path, ds->kind);
        return FALSE;
    }
    if (l->transforms == NULL) {
        if (ds->channels > TDM_MAX_CHANNELS) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: %d channels; without transforms the loader handles up to %d",
                        ds->path, ds->channels, TDM_MAX_CHANNELS);
            return FALSE;
        }
        if (l->variable) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: the images differ in size; give transforms that make them one size "
                        "(e.g. --transforms \"resize 64 | center-crop 64\")", ds->path);
            return FALSE;
        }
        l->c = ds->channels;
        l->h = ds->height;
        l->w = ds->width;
    } else {
        if (!tdm_transform_pipeline_output_shape(l->transforms, ds->channels,
                                                 MAX(ds->height, 0), MAX(ds->width, 0), &l->c,
                                                 &l->h, &l->w, error)) {
            g_prefix_error(error, "%s: ", ds->path);
            return FALSE;
        }
    }
    if (l->c <= 0 || l->h <= 0 || l->w <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: the transforms leave the sample size open (%dx%dx%d)", ds->path, l->c,
                    l->h, l->w);
        return FALSE;
    }
    l->sample_floats = (size_t)l->c * (size_t)l->h * (size_t)l->w;
    l->sample_bytes = l->variable ? 0
                                  : (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    return TRUE;
}

static void batch_too_large(const TdmLoader *l, size_t bytes, const char *why, GError **error)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                "%s: a batch of %" G_GINT64_FORMAT " samples of %dx%dx%d floats needs %.2f GiB, "
                "%s (lower data.batch_size, or the size the transforms put out)",
                l->ds->path, (gint64)l->rows, l->c, l->h, l->w,
                (double)bytes / (1024.0 * 1024.0 * 1024.0), why);
}

/* A batch's host buffer: an error that says what the size comes from, not
 * an abort, when it cannot be had. */
static float *batch_alloc(const TdmLoader *l, size_t bytes, GError **error)
{
    float *p = g_try_malloc(bytes);
    if (p == NULL) {
        batch_too_large(l, bytes, "which cannot be allocated", error);
    }
    return p;
}

static gboolean make_buffers(TdmLoader *l, GError **error)
{
    const int64_t B = l->rows;
    const size_t img_bytes = (size_t)B * l->sample_floats * sizeof(float);
    TdmDevice *dev = l->dev;
    const int n_slots = l->opts.workers == 0 ? 1 : l->opts.workers * MAX(l->opts.prefetch, 1);
    /* With overcommit a buffer larger than the machine is granted and the
     * process killed when it fills it: refuse what cannot fit at all (the
     * slots and the two device batches). */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    if (ram > 0.0 && (double)img_bytes * (n_slots + 2) > ram) {
        g_autofree char *why = g_strdup_printf(
            "%d of them (%d loader slot%s and 2 on the device) more than this machine's %.1f GiB "
            "of memory", n_slots + 2, n_slots, n_slots == 1 ? "" : "s",
            ram / (1024.0 * 1024.0 * 1024.0));
        batch_too_large(l, img_bytes, why, error);
        return FALSE;
    }
    l->n_slots = n_slots;
    l->slots = g_new0(Slot, l->n_slots);
    l->pinned = l->opts.pin_memory && tdm_device_has_pinned_memory(dev);
    for (int i = 0; i < l->n_slots; i++) {
        Slot *s = &l->slots[i];
        if (l->pinned) {
            s->images = tdm_device_host_alloc(dev, img_bytes, NULL);
            if (s->images == NULL) {
                /* Pinned memory is a speed-up, never a requirement. */
                for (int j = 0; j < i; j++) {
                    tdm_device_host_free(dev, l->slots[j].images);
                    l->slots[j].images = NULL;
                }
                l->pinned = FALSE;
                for (int j = 0; j < i; j++) {
                    if ((l->slots[j].images = batch_alloc(l, img_bytes, error)) == NULL) {
                        return FALSE;
                    }
                }
            }
        }
        if (s->images == NULL && (s->images = batch_alloc(l, img_bytes, error)) == NULL) {
            return FALSE;
        }
        s->labels = g_new(int32_t, B);
        s->batch = -1;
    }
    l->async_copy = l->pinned && tdm_device_has_async_copy(dev);
    if (l->async_copy) {
        if ((l->compute_done = tdm_event_new(dev, error)) == NULL ||
            (l->copied[0] = tdm_event_new(dev, error)) == NULL ||
            (l->copied[1] = tdm_event_new(dev, error)) == NULL) {
            return FALSE;
        }
    }

    int64_t ishape[4] = {B, l->c, l->h, l->w};
    int64_t lshape[1] = {B};
    for (int d = 0; d < 2; d++) {
        l->images[d] = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, ishape, error);
        if (l->images[d] == NULL) {
            return FALSE;
        }
        l->labels[d] = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, error);
        if (l->labels[d] == NULL) {
            return FALSE;
        }
    }
    return TRUE;
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
    if (!check_options(ds, opts, error)) {
        return NULL;
    }

    TdmLoader *l = g_new0(TdmLoader, 1);
    l->ds = ds;
    l->dev = dev;
    l->opts = *opts;
    g_mutex_init(&l->lock);
    g_cond_init(&l->cond);
    l->n = opts->limit > 0 ? MIN(opts->limit, ds->length) : ds->length;
    TdmSamplerKind kind = opts->world > 1 ? TDM_SAMPLER_DISTRIBUTED
                          : opts->shuffle ? TDM_SAMPLER_RANDOM
                                          : TDM_SAMPLER_SEQUENTIAL;
    if (kind == TDM_SAMPLER_DISTRIBUTED && !opts->shuffle) {
        kind = TDM_SAMPLER_SEQUENTIAL; /* split over ranks all the same */
    }
    l->sampler = tdm_sampler_new(kind, l->n, opts->seed, opts->rank, opts->world,
                                 opts->drop_last);
    l->per_epoch = l->sampler->order_len;
    /* No batch holds more than an epoch's samples: --batch-size 1000000
     * over 256 images needs buffers of 256. */
    l->rows = MAX(1, MIN((int64_t)opts->batch_size, l->per_epoch));
#ifdef TDM_ENABLE_TEST_HOOKS
    const char *jitter = g_getenv("TDM_LOADER_JITTER_US");
    l->jitter_us = jitter != NULL ? (guint)g_ascii_strtoull(jitter, NULL, 10) : 0;
#endif

    if (!take_pipeline(l, error) || !sample_shape(l, error)) {
        tdm_loader_free(l);
        return NULL;
    }
    for (int c = 0; c < MIN(l->c, TDM_MAX_CHANNELS); c++) {
        int k = opts->n_mean == 0 ? -1 : opts->n_mean == 1 ? 0 : c;
        l->norm_mean[c] = k < 0 ? 0.0f : opts->mean[k];
        l->norm_std[c] = k < 0 ? 1.0f : opts->std[k];
    }
    if (!make_buffers(l, error)) {
        tdm_loader_free(l);
        return NULL;
    }
    scratch_init(l, &l->caller);
    if (opts->workers > 0) {
        l->pool = g_thread_pool_new(worker_main, l, opts->workers, TRUE, error);
        if (l->pool == NULL) {
            g_prefix_error(error, "loader: cannot start %d worker threads: ", opts->workers);
            tdm_loader_free(l);
            return NULL;
        }
        for (int i = 0; i < opts->workers; i++) {
            g_thread_pool_push(l->pool, GINT_TO_POINTER(i + 1), NULL);
        }
    }
    return l;
}

/* ---- epochs and batches (the caller's thread) ---- */

/* Wait until no worker is filling a batch of the current epoch. Called
 * with the lock held. */
static void cancel_in_flight(TdmLoader *l)
{
    g_atomic_int_inc(&l->generation);
    l->steps = 0;
    while (l->in_flight > 0) {
        g_cond_wait(&l->cond, &l->lock);
    }
}

/* Wait for the async copy of the last delivered batch (its event, not the
 * whole device) and free its slot. */
static gboolean release_held_slot(TdmLoader *l, GError **error)
{
    if (!l->hold_slot) {
        return TRUE;
    }
    l->hold_slot = FALSE;
    gboolean ok = tdm_event_synchronize(l->held, -1.0, error);
    g_mutex_lock(&l->lock);
    l->released = l->delivered;
    g_cond_broadcast(&l->cond);
    g_mutex_unlock(&l->lock);
    return ok;
}

/* Reads the sample of the epoch's order that lies furthest into the dataset
 * and drops it: a reader that brings its data in lazily (the idx reader
 * inflates a gzipped file up to the sample asked for) does that one-off work
 * here, before the epoch's first batch is asked for, instead of inside the
 * first step's data wait. Fixed-size samples only (a variable-size read is
 * one decode, nothing to warm); a failure is left for the batch that holds
 * the sample to report, with its batch and epoch. */
static void warm_dataset(TdmLoader *l)
{
    if (l->variable || l->sampler->order_len == 0) {
        return;
    }
    int64_t last = l->sampler->order[0];
    for (int64_t i = 1; i < l->sampler->order_len; i++) {
        last = MAX(last, l->sampler->order[i]);
    }
    int32_t label;
    GError *ignored = NULL;
    if (!tdm_dataset_read(l->ds, last, l->caller.sample, &label, &ignored)) {
        g_clear_error(&ignored);
    }
}

gboolean tdm_loader_start_epoch(TdmLoader *loader, int64_t epoch, GError **error)
{
    g_return_val_if_fail(loader != NULL && epoch >= 0, FALSE);
    TdmLoader *l = loader;
    if (!release_held_slot(l, error)) {
        return FALSE;
    }
    /* Before the first epoch, the reader may get samples [0, n) ready at
     * once (the idx reader inflates a gzipped file in one go when most of it
     * will be read): here rather than at open, so that a test split is
     * prepared when evaluation starts, not before training. */
    if (!l->prepared && l->ds->klass->prepare != NULL) {
        l->ds->klass->prepare(l->ds, l->n);
    }
    l->prepared = TRUE;
    g_mutex_lock(&l->lock);
    cancel_in_flight(l);
    gboolean ok = TRUE;
    if (l->has_pending && l->pending.epoch == epoch) {
        ok = tdm_sampler_set_state(l->sampler, &l->pending, error);
    } else {
        tdm_sampler_set_epoch(l->sampler, epoch);
    }
    l->has_pending = FALSE;
    for (int i = 0; i < l->n_slots; i++) {
        l->slots[i].state = SLOT_EMPTY;
        l->slots[i].batch = -1;
        g_clear_error(&l->slots[i].error);
    }
    g_clear_error(&l->failed);
    l->epoch = epoch;
    l->issued = l->released = l->delivered = 0;
    l->steps = ok ? steps_for(l, l->sampler->order_len) : 0;
    l->started = TRUE;
    l->ended = FALSE;
    g_cond_broadcast(&l->cond);
    g_mutex_unlock(&l->lock);
    if (ok) {
        warm_dataset(l);
    }
    return ok;
}

/* The device tensors batch k of `count` samples goes to. */
static gboolean device_target(TdmLoader *l, int64_t k, int64_t count, TdmTensor **images,
                              TdmTensor **labels, GError **error)
{
    int d = (int)(k % 2);
    if (count == l->rows) {
        *images = l->images[d];
        *labels = l->labels[d];
        return TRUE;
    }
    /* A short batch: views of the same storage, remade only when the short
     * size changes (a resumed epoch may end differently). */
    if (count != l->tail_size) {
        for (int i = 0; i < 2; i++) {
            g_clear_pointer(&l->tail_images[i], tdm_tensor_unref);
            g_clear_pointer(&l->tail_labels[i], tdm_tensor_unref);
        }
        for (int i = 0; i < 2; i++) {
            l->tail_images[i] = tdm_tensor_narrow(l->images[i], 0, count, error);
            l->tail_labels[i] = tdm_tensor_narrow(l->labels[i], 0, count, error);
            if (l->tail_images[i] == NULL || l->tail_labels[i] == NULL) {
                return FALSE;
            }
        }
        l->tail_size = count;
    }
    *images = l->tail_images[d];
    *labels = l->tail_labels[d];
    return TRUE;
}

static gboolean copy_to_device(TdmLoader *l, Slot *slot, int64_t k, TdmTensor *images,
                               TdmTensor *labels, GError **error)
{
    l->batch.ready = NULL;
    if (l->async_copy && tdm_tensor_is_contiguous(images)) {
        size_t n = (size_t)slot->count * l->sample_floats * sizeof(float);
        TdmEvent *copied = l->copied[k % 2];
        if (!tdm_event_record(l->compute_done, TDM_STREAM_COMPUTE, error) ||
            !tdm_stream_wait_event(l->dev, TDM_STREAM_COPY, l->compute_done, error) ||
            !tdm_device_copy_h2d(l->dev, TDM_STREAM_COPY, tdm_tensor_data(images), slot->images,
                                 n, error) ||
            !tdm_event_record(copied, TDM_STREAM_COPY, error) ||
            !tdm_stream_wait_event(l->dev, TDM_STREAM_COMPUTE, copied, error)) {
            return FALSE;
        }
        l->hold_slot = TRUE;
        l->held = copied;
        l->batch.ready = copied;
    } else if (!tdm_tensor_write(images, slot->images, error)) {
        return FALSE;
    }
    return tdm_tensor_write(labels, slot->labels, error);
}

TdmBatch *tdm_loader_next(TdmLoader *loader, GError **error)
{
    g_return_val_if_fail(loader != NULL, NULL);
    TdmLoader *l = loader;
    /* Finishing the previous batch's async copy waits for the device, not
     * for data: it is not counted in wait_s. */
    if (!release_held_slot(l, error)) {
        return NULL;
    }
    double t0 = tdm_time_now();
    if (l->failed != NULL) {
        g_propagate_error(error, g_error_copy(l->failed));
        return NULL;
    }
    /* The loader owns the epoch counter: after the end of an epoch the next
     * call begins the following one, reshuffled. */
    if (!l->started || l->ended) {
        int64_t epoch = !l->started ? (l->has_pending ? l->pending.epoch : 0) : l->epoch + 1;
        if (!tdm_loader_start_epoch(l, epoch, error)) {
            return NULL;
        }
    }
    g_mutex_lock(&l->lock);
    if (l->delivered >= l->steps) {
        l->ended = TRUE;
        g_mutex_unlock(&l->lock);
        return NULL;
    }
    const int64_t k = l->delivered;
    Slot *slot = &l->slots[k % l->n_slots];
    if (l->pool == NULL) {
        g_mutex_unlock(&l->lock);
        GError *fill_error = NULL;
        slot->batch = k;
        fill_batch(l, &l->caller, slot, k, g_atomic_int_get(&l->generation), &fill_error);
        slot->error = fill_error;
        slot->state = SLOT_READY;
    } else {
        while (!(slot->state == SLOT_READY && slot->batch == k)) {
            g_cond_wait(&l->cond, &l->lock);
        }
        g_mutex_unlock(&l->lock);
    }
    if (slot->error != NULL) {
        l->failed = slot->error;
        slot->error = NULL;
        g_propagate_error(error, g_error_copy(l->failed));
        return NULL;
    }

    /* The slot may be refilled as soon as it is released below. */
    const int64_t count = slot->count;
    TdmTensor *images, *labels;
    if (!device_target(l, k, count, &images, &labels, error) ||
        !copy_to_device(l, slot, k, images, labels, error)) {
        return NULL;
    }
    g_mutex_lock(&l->lock);
    slot->state = SLOT_EMPTY;
    l->delivered = k + 1;
    if (!l->hold_slot) {
        l->released = l->delivered;
        g_cond_broadcast(&l->cond);
    }
    g_mutex_unlock(&l->lock);
    l->sampler->position = MIN(l->delivered * l->opts.batch_size, l->sampler->order_len);

    l->batch.images = images;
    l->batch.labels = labels;
    l->batch.size = count;
    l->batch.wait_s = tdm_time_now() - t0;
    return &l->batch;
}

/* ---- state ---- */

void tdm_loader_get_state(const TdmLoader *loader, TdmSamplerState *state)
{
    g_return_if_fail(loader != NULL && state != NULL);
    const TdmLoader *l = loader;
    memset(state, 0, sizeof(*state));
    if (l->has_pending) {
        *state = l->pending;
    } else if (!l->started) {
        state->epoch = 0;
    } else if (l->ended || (l->delivered >= l->steps && l->steps > 0)) {
        /* Every batch of the epoch was handed out: the next is the next
         * epoch's first, even when drop_last left samples unused. */
        state->epoch = l->epoch + 1;
    } else {
        tdm_sampler_get_state(l->sampler, state);
    }
}

gboolean tdm_loader_set_state(TdmLoader *loader, const TdmSamplerState *state, GError **error)
{
    g_return_val_if_fail(loader != NULL && state != NULL, FALSE);
    if (state->epoch < 0 || state->consumed < 0 || state->consumed > loader->n) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "loader state: epoch %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT " samples "
                    "consumed, but an epoch has %" G_GINT64_FORMAT " samples (was the dataset or "
                    "--limit changed?)", state->epoch, state->consumed, loader->n);
        return FALSE;
    }
    loader->pending = *state;
    loader->has_pending = TRUE;
    return TRUE;
}

void tdm_loader_free(TdmLoader *loader)
{
    if (loader == NULL) {
        return;
    }
    TdmLoader *l = loader;
    if (l->hold_slot) {
        (void)tdm_event_synchronize(l->held, -1.0, NULL);
    }
    if (l->pool != NULL) {
        g_mutex_lock(&l->lock);
        g_atomic_int_inc(&l->generation);
        l->quit = TRUE;
        g_cond_broadcast(&l->cond);
        g_mutex_unlock(&l->lock);
        g_thread_pool_free(l->pool, FALSE, TRUE);
    }
    for (int i = 0; i < 2; i++) {
        g_clear_pointer(&l->tail_images[i], tdm_tensor_unref);
        g_clear_pointer(&l->tail_labels[i], tdm_tensor_unref);
        g_clear_pointer(&l->images[i], tdm_tensor_unref);
        g_clear_pointer(&l->labels[i], tdm_tensor_unref);
    }
    for (int i = 0; i < l->n_slots; i++) {
        if (l->pinned) {
            tdm_device_host_free(l->dev, l->slots[i].images);
        } else {
            g_free(l->slots[i].images);
        }
        g_free(l->slots[i].labels);
        g_clear_error(&l->slots[i].error);
    }
    g_free(l->slots);
    tdm_event_free(l->compute_done);
    tdm_event_free(l->copied[0]);
    tdm_event_free(l->copied[1]);
    g_clear_error(&l->failed);
    scratch_clear(&l->caller);
    tdm_transform_pipeline_unref(l->transforms);
    tdm_sampler_free(l->sampler);
    g_mutex_clear(&l->lock);
    g_cond_clear(&l->cond);
    g_free(l);
}
