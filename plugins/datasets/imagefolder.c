/* SPDX-License-Identifier: MIT */
/* plugins/datasets/imagefolder.c - the image-folder dataset reader (the
 * torchvision ImageFolder convention).
 *
 * A dataset directory holds one subdirectory per class. As in torchvision,
 * the classes are the sorted subdirectory names (label = position), and the
 * samples are, class by class, the files under each class folder (walked
 * recursively, following links) in the order of sorted(os.walk()): folders
 * by path, files by name within a folder; hidden folders count too). So
 * sample i and its label are torchvision's ImageFolder(root).samples[i].
 * Files ending in .png, .jpg or .jpeg (any case) are samples; other files
 * are skipped, except the other image formats torchvision would load (.bmp,
 * .webp, ...): those are an error at open, since skipping them would shift
 * every index after them.
 *
 * Splits: when DIR/train exists, "train" reads DIR/train and "test" reads
 * DIR/val or DIR/test; otherwise both read DIR itself.
 *
 * Images differ in size, so the dataset's height and width are 0 and
 * samples are decoded one by one with read_image (u8 scale floats, CHW); the
 * loader's transforms bring them to one size. The channel count is that of
 * the first image (grey 1, anything else 3) and every image is converted to
 * it; parameters change this: "imagefolder DIR channels=3" forces RGB (or 1
 * for grey), and "size=first" declares that all images share the first
 * image's size, so the fixed-size read() works (each read checks it, and
 * names the file that differs).
 *
 * Only file names are kept after open; a read opens, decodes and frees, with
 * all decoder state on its own stack and the file's bytes in a buffer of
 * the calling thread, so reads are thread-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tandem/data.h>
#include <tandem/params.h>
#include <tandem/plugin.h>

#include "datasets-util.h"
#include "image-decode.h"

#define MAX_WALK_DEPTH 64

typedef struct {
    char **files; /* sample paths, in sample order */
    int32_t *labels;
    int64_t n;
    char **classes; /* NULL-terminated */
    int first_h, first_w;
} FolderDataset;

typedef struct {
    int channels; /* 0 = the first image's */
    gboolean size_first;
} FolderOptions;

/* The parameters tdm_dataset_open() bound to folder_params (none when a
 * caller runs open() itself: the defaults). */
static void folder_read_options(const TdmDataset *ds, FolderOptions *opts)
{
    memset(opts, 0, sizeof(*opts));
    if (ds->params == NULL) {
        return;
    }
    /* "1" or "3"; -1 (not given): the first image's */
    int c = tdm_params_get_choice(ds->params, "channels");
    opts->channels = c == 0 ? 1 : c == 1 ? 3 : 0;
    opts->size_first = tdm_params_get_choice(ds->params, "size") == 0;
}

static int compare_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef enum { EXT_OTHER, EXT_DECODABLE, EXT_UNSUPPORTED_IMAGE } ExtKind;

static ExtKind classify_name(const char *name)
{
    static const char *const decodable[] = {".png", ".jpg", ".jpeg"};
    /* torchvision's other IMG_EXTENSIONS. */
    static const char *const unsupported[] = {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
    g_autofree char *lower = g_ascii_strdown(name, -1);
    for (size_t i = 0; i < G_N_ELEMENTS(decodable); i++) {
        if (g_str_has_suffix(lower, decodable[i])) {
            return EXT_DECODABLE;
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(unsupported); i++) {
        if (g_str_has_suffix(lower, unsupported[i])) {
            return EXT_UNSUPPORTED_IMAGE;
        }
    }
    return EXT_OTHER;
}

/* g_dir_open, failing with the reader's I/O error (NULL then). */
static GDir *open_dir(const char *dir, GError **error)
{
    GError *local = NULL;
    GDir *d = g_dir_open(dir, 0, &local);
    if (d == NULL) {
        ds_fail(error, TDM_ERROR_IO, "%s", local->message);
        g_error_free(local);
    }
    return d;
}

/* Every folder under `dir` (itself included, links followed), into `roots`. */
static gboolean walk_folders(const char *dir, int depth, GPtrArray *roots, GError **error)
{
    if (depth > MAX_WALK_DEPTH) {
        return ds_fail(error, TDM_ERROR_IO, "%s: folders nested more than %d deep (a link loop?)",
                       dir, MAX_WALK_DEPTH);
    }
    g_ptr_array_add(roots, g_strdup(dir));
    GDir *d = open_dir(dir, error);
    if (d == NULL) {
        return FALSE;
    }
    const char *name;
    gboolean ok = TRUE;
    while (ok && (name = g_dir_read_name(d)) != NULL) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
            ok = walk_folders(p, depth + 1, roots, error);
        }
    }
    g_dir_close(d);
    return ok;
}

/* The samples of one class, in torchvision's order, appended to `files`. */
static gboolean list_class(const char *class_dir, GPtrArray *files, GError **error)
{
    g_autoptr(GPtrArray) roots = g_ptr_array_new_with_free_func(g_free);
    if (!walk_folders(class_dir, 0, roots, error)) {
        return FALSE;
    }
    g_ptr_array_sort(roots, compare_strings);
    guint before = files->len;
    for (guint r = 0; r < roots->len; r++) {
        const char *root = roots->pdata[r];
        GDir *d = open_dir(root, error);
        if (d == NULL) {
            return FALSE;
        }
        g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
        const char *name;
        while ((name = g_dir_read_name(d)) != NULL) {
            g_autofree char *p = g_build_filename(root, name, NULL);
            if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
                continue;
            }
            ExtKind kind = classify_name(name);
            if (kind == EXT_UNSUPPORTED_IMAGE) {
                g_dir_close(d);
                return ds_fail(error, TDM_ERROR_UNSUPPORTED,
                               "%s: image format not supported (the imagefolder reader "
                               "decodes PNG and JPEG; convert it or move it out)",
                               p);
            }
            if (kind == EXT_DECODABLE) {
                g_ptr_array_add(names, g_strdup(name));
            }
        }
        g_dir_close(d);
        g_ptr_array_sort(names, compare_strings);
        for (guint i = 0; i < names->len; i++) {
            g_ptr_array_add(files, g_build_filename(root, (char *)names->pdata[i], NULL));
        }
    }
    if (files->len == before) {
        return ds_fail(error, TDM_ERROR_IO, "%s: class folder holds no .png, .jpg or .jpeg images",
                       class_dir);
    }
    return TRUE;
}

/* Which folder a split reads (transfer full). */
static char *split_root(const char *dir, const char *split, GError **error)
{
    gboolean train = g_strcmp0(split, "train") == 0;
    if (!train && g_strcmp0(split, "test") != 0) {
        ds_fail(error, TDM_ERROR_INVALID_ARG,
                "imagefolder: unknown split '%s' (expected train or test)", split);
        return NULL;
    }
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        ds_fail(error, TDM_ERROR_IO,
                "%s: no such dataset directory (the imagefolder reader expects a directory "
                "with one subdirectory of PNG/JPEG images per class)",
                dir);
        return NULL;
    }
    g_autofree char *train_dir = g_build_filename(dir, "train", NULL);
    if (!g_file_test(train_dir, G_FILE_TEST_IS_DIR)) {
        return g_strdup(dir);
    }
    if (train) {
        return g_steal_pointer(&train_dir);
    }
    static const char *const test_names[] = {"val", "test"};
    for (size_t i = 0; i < G_N_ELEMENTS(test_names); i++) {
        char *p = g_build_filename(dir, test_names[i], NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
            return p;
        }
        g_free(p);
    }
    ds_fail(error, TDM_ERROR_IO,
            "%s: has a train/ folder but no val/ or test/ folder for the test split", dir);
    return NULL;
}

/* The bytes of one image file, in a buffer each thread keeps for its next
 * read: mapping every file instead costs a page fault and, on unmap, a TLB
 * flush across all the loader's threads. */
typedef struct {
    guint8 *data;
    size_t capacity;
} FileBuffer;

static void file_buffer_free(gpointer p)
{
    FileBuffer *fb = p;
    g_free(fb->data);
    g_free(fb);
}

static GPrivate file_buffer_key = G_PRIVATE_INIT(file_buffer_free);

static FileBuffer *file_buffer_get(void)
{
    FileBuffer *fb = g_private_get(&file_buffer_key);
    if (fb == NULL) {
        fb = g_new0(FileBuffer, 1);
        g_private_set(&file_buffer_key, fb);
    }
    return fb;
}

/* Read all of `path` into the thread's buffer; *len gets its size. */
static const guint8 *read_file(const char *path, size_t *len, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        ds_fail(error, TDM_ERROR_IO, "%s: cannot open: %s", path, g_strerror(e));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        ds_fail(error, TDM_ERROR_IO, "%s: cannot stat: %s", path, g_strerror(e));
        return NULL;
    }
    FileBuffer *fb = file_buffer_get();
    /* One byte more than the size tells a file that grew since fstat. */
    size_t want = (size_t)MAX(st.st_size, 0) + 1;
    if (want > fb->capacity) {
        g_free(fb->data);
        fb->capacity = MAX(want, (size_t)64 * 1024);
        fb->data = g_malloc(fb->capacity);
    }
    size_t got = 0;
    while (got < fb->capacity) {
        ssize_t r = read(fd, fb->data + got, fb->capacity - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            int e = errno;
            close(fd);
            ds_fail(error, TDM_ERROR_IO, "%s: read failed at byte %zu: %s", path, got,
                    g_strerror(e));
            return NULL;
        }
        if (r == 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (got == fb->capacity) {
        ds_fail(error, TDM_ERROR_IO, "%s: the file grew while it was read", path);
        return NULL;
    }
    *len = got;
    return fb->data;
}

static gboolean decode_file(const char *path, int want_c, guint8 **pixels, int *c, int *h, int *w,
                            GError **error)
{
    size_t len = 0;
    const guint8 *data = read_file(path, &len, error);
    return data != NULL && image_decode(data, len, path, want_c, pixels, c, h, w, error);
}

/* decode_file straight into float pixels (read_image's path). */
static gboolean decode_file_float(const char *path, int want_c, TdmImage *img, GError **error)
{
    size_t len = 0;
    const guint8 *data = read_file(path, &len, error);
    return data != NULL && image_decode_float(data, len, path, want_c, img, error);
}

static void folder_close(TdmDataset *ds)
{
    FolderDataset *d = ds->priv;
    if (d == NULL) {
        return;
    }
    for (int64_t i = 0; i < d->n; i++) {
        g_free(d->files[i]);
    }
    g_free(d->files);
    g_free(d->labels);
    g_strfreev(d->classes);
    g_free(d);
    ds->priv = NULL;
}

static gboolean folder_open_dir(TdmDataset *ds, const char *dir, const char *split, GError **error)
{
    FolderOptions opts;
    folder_read_options(ds, &opts);
    g_autofree char *root = split_root(dir, split, error);
    if (root == NULL) {
        return FALSE;
    }
    GDir *gd = open_dir(root, error);
    if (gd == NULL) {
        return FALSE;
    }
    g_autoptr(GPtrArray) classes = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(gd)) != NULL) {
        g_autofree char *p = g_build_filename(root, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
            g_ptr_array_add(classes, g_strdup(name));
        }
    }
    g_dir_close(gd);
    if (classes->len == 0) {
        return ds_fail(error, TDM_ERROR_IO,
                       "%s: no class folders (the imagefolder reader expects one "
                       "subdirectory of PNG/JPEG images per class)",
                       root);
    }
    g_ptr_array_sort(classes, compare_strings);

    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) labels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint k = 0; k < classes->len; k++) {
        g_autofree char *class_dir = g_build_filename(root, (char *)classes->pdata[k], NULL);
        if (!list_class(class_dir, files, error)) {
            return FALSE;
        }
        int32_t label = (int32_t)k;
        while (labels->len < files->len) {
            g_array_append_val(labels, label);
        }
    }

    /* The first image fixes the channel count (unless given) and, with
     * size=first, the size. */
    g_autofree guint8 *first = NULL;
    int c, h, w;
    if (!decode_file(files->pdata[0], opts.channels, &first, &c, &h, &w, error)) {
        return FALSE;
    }

    FolderDataset *d = g_new0(FolderDataset, 1);
    ds->priv = d;
    d->n = files->len;
    d->labels = (int32_t *)g_array_free(g_steal_pointer(&labels), FALSE);
    g_ptr_array_set_free_func(files, NULL);
    d->files = (char **)g_ptr_array_free(g_steal_pointer(&files), FALSE);
    g_ptr_array_add(classes, NULL);
    g_ptr_array_set_free_func(classes, NULL);
    d->classes = (char **)g_ptr_array_free(g_steal_pointer(&classes), FALSE);
    d->first_h = h;
    d->first_w = w;
    ds->length = d->n;
    ds->channels = c;
    ds->height = opts.size_first ? h : 0;
    ds->width = opts.size_first ? w : 0;
    ds->num_classes = (int)g_strv_length(d->classes);
    return TRUE;
}

static gboolean folder_open(TdmDataset *ds, const char *path, const char *split, GError **error)
{
    if (!folder_open_dir(ds, path, split, error)) {
        folder_close(ds);
        return FALSE;
    }
    return TRUE;
}

static gboolean folder_read_image(TdmDataset *ds, int64_t index, TdmImage *img, int32_t *label,
                                  GError **error)
{
    FolderDataset *d = ds->priv;
    if (!ds_check_index(ds, index, "imagefolder", error)) {
        return FALSE;
    }
    if (!decode_file_float(d->files[index], ds->channels, img, error)) {
        return FALSE;
    }
    *label = d->labels[index];
    return TRUE;
}

/* Fixed-size read: only for datasets opened with size=first (every image
 * the first one's size), checked image by image. */
static gboolean folder_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                            GError **error)
{
    FolderDataset *d = ds->priv;
    if (!ds_check_index(ds, index, "imagefolder", error)) {
        return FALSE;
    }
    if (ds->height <= 0 || ds->width <= 0) {
        return ds_fail(error, TDM_ERROR_INVALID_ARG,
                       "%s: image-folder samples may differ in size, so they cannot be read "
                       "at a fixed size; use transforms that make them one size (e.g. "
                       "--transforms \"resize 64 | center-crop 64\"), or open the dataset "
                       "with size=first if every image is %dx%d like the first",
                       ds->path, d->first_w, d->first_h);
    }
    g_autofree guint8 *px = NULL;
    int c, h, w;
    if (!decode_file(d->files[index], ds->channels, &px, &c, &h, &w, error)) {
        return FALSE;
    }
    if (h != ds->height || w != ds->width) {
        return ds_fail(error, TDM_ERROR_INVALID_ARG,
                       "%s: image is %dx%d but the first image (%s) is %dx%d, and the dataset "
                       "was opened with size=first; resize the images, or drop size=first "
                       "and use a resize transform",
                       d->files[index], w, h, d->files[0], ds->width, ds->height);
    }
    memcpy(image, px, (size_t)c * (size_t)h * (size_t)w);
    *label = d->labels[index];
    return TRUE;
}

static const TdmDatasetClass folder_class = {
    TDM_CLASS_HEADER(TDM_DATASET_IFACE_VERSION, TdmDatasetClass),
    .open = folder_open,
    .read = folder_read,
    .close = folder_close,
    .read_image = folder_read_image,
};

static const TdmParamSpec folder_params[] = {
    TDM_PARAM_SPEC_CHOICE("channels", 0, NULL, "1|3",
                          "convert every image to grey (1) or RGB (3); default: the first "
                          "image's"),
    TDM_PARAM_SPEC_CHOICE("size", 0, "varying", "first|varying",
                          "first: every image has the first image's size (enables fixed-size "
                          "reads); varying: sizes differ, transforms fix them"),
    TDM_PARAM_SPEC_END,
};

TDM_PLUGIN_INIT_FEATURE(folder_init, TDM_FEATURE_DATASET, "imagefolder", 50, &folder_class,
                        "one folder of PNG/JPEG images per class (torchvision "
                        "ImageFolder order)",
                        folder_params, NULL)

TDM_PLUGIN_DEFINE(imagefolder, "MIT",
                  "Image-folder dataset reader (PNG via libpng, JPEG via libjpeg-turbo)", "tandem",
                  folder_init)
