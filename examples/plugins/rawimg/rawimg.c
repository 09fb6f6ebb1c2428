/* SPDX-License-Identifier: MIT */
/* rawimg.c - a dataset reader plugin: "rawimg path=DIR size=H,W channels=C
 * classes=K" reads DIR/<split>-images.u8 (N images, u8 CHW, back to back)
 * and DIR/<split>-labels.u8 (N labels, one byte each). */
#include <string.h>

#include <tandem/tandem.h>

typedef struct {
    GMappedFile *images, *labels;
    size_t image_bytes; /* c * h * w */
} RawPriv;

static GMappedFile *map_file(const char *dir, const char *split, const char *what,
                             GError **error)
{
    g_autofree char *path = g_strdup_printf("%s/%s-%s.u8", dir, split, what);
    GError *local = NULL;
    GMappedFile *f = g_mapped_file_new(path, FALSE, &local);
    if (f == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "rawimg: %s: %s", path, local->message);
        g_error_free(local);
    }
    return f;
}

static gboolean rawimg_open(TdmDataset *ds, const char *path, const char *split, GError **error)
{
    int size[2];
    RawPriv *p = g_new0(RawPriv, 1);
    ds->priv = p; /* from here on, close() frees it, also when open fails */
    tdm_params_get_ints(ds->params, "size", size, 2);
    ds->channels = (int)tdm_params_get_int(ds->params, "channels");
    ds->height = size[0];
    ds->width = size[1];
    ds->num_classes = (int)tdm_params_get_int(ds->params, "classes");
    p->image_bytes = (size_t)ds->channels * ds->height * ds->width;
    if ((p->images = map_file(path, split, "images", error)) == NULL ||
        (p->labels = map_file(path, split, "labels", error)) == NULL) {
        return FALSE;
    }
    size_t n_images = g_mapped_file_get_length(p->images) / p->image_bytes;
    ds->length = (int64_t)g_mapped_file_get_length(p->labels);
    if (g_mapped_file_get_length(p->images) % p->image_bytes != 0 ||
        n_images != (size_t)ds->length) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "rawimg: %s/%s-images.u8: %zu bytes, expected %" G_GINT64_FORMAT
                    " images of %zu bytes (one per label)",
                    path, split, g_mapped_file_get_length(p->images), ds->length,
                    p->image_bytes);
        return FALSE;
    }
    return TRUE;
}

/* Called from several loader threads at once: reads only. */
static gboolean rawimg_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                            GError **error)
{
    const RawPriv *p = ds->priv;
    const guint8 *labels = (const guint8 *)g_mapped_file_get_contents(p->labels);
    const char *images = g_mapped_file_get_contents(p->images);
    if (labels[index] >= ds->num_classes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "rawimg: %s/%s-labels.u8: byte %" G_GINT64_FORMAT ": label %d, expected "
                    "below %d (classes=)",
                    ds->path, ds->split, index, labels[index], ds->num_classes);
        return FALSE;
    }
    memcpy(image, images + (size_t)index * p->image_bytes, p->image_bytes);
    *label = labels[index];
    return TRUE;
}

static void rawimg_close(TdmDataset *ds)
{
    RawPriv *p = ds->priv;
    g_clear_pointer(&p->images, g_mapped_file_unref);
    g_clear_pointer(&p->labels, g_mapped_file_unref);
    g_free(p);
    ds->priv = NULL;
}

static const TdmDatasetClass rawimg_class = {
    TDM_CLASS_HEADER(TDM_DATASET_IFACE_VERSION, TdmDatasetClass),
    .open = rawimg_open,
    .read = rawimg_read,
    .close = rawimg_close,
};

/* `path` (required, positional) comes first for every reader: the core adds it. */
static const TdmParamSpec rawimg_params[] = {
    TDM_PARAM_SPEC_INTS("size", TDM_PARAM_REQUIRED, NULL, 2, 2, 1, 65535, "height,width"),
    TDM_PARAM_SPEC_INT("channels", 0, "1", 1, 4, "channels per image"),
    TDM_PARAM_SPEC_INT("classes", 0, "10", 1, 256, "number of classes"),
    TDM_PARAM_SPEC_END,
};

TDM_PLUGIN_INIT_FEATURE(rawimg_init, TDM_FEATURE_DATASET, "rawimg", 50, &rawimg_class,
                        "raw u8 images and labels, DIR/<split>-{images,labels}.u8",
                        rawimg_params, NULL)

TDM_PLUGIN_DEFINE(rawimg, "MIT", "Raw image dataset reader",
                  "examples/plugins/rawimg", rawimg_init)
