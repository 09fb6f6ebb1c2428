/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-png.c - libFuzzer target for the imagefolder reader's
 * PNG (and, through content sniffing, JPEG) decoding.
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-png.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-png
 *   TDM_PLUGIN_SYSTEM_PATH=plugins/.libs LD_LIBRARY_PATH=core/.libs ./fuzz-png corpus/
 * A corpus of small PNGs (e.g. from tests/make-fixtures.py images DIR) is a
 * good start. The input becomes the only image of a one-class folder; open
 * decodes it once (to learn its channel count), then it is decoded again
 * as grey and as RGB, and the decoded size is checked.
 */
#include <glib/gstdio.h>
#include <string.h>

#include <tandem/tandem.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static char *dir;

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    if (dir == NULL) {
        dir = g_dir_make_tmp("fuzz-png-XXXXXX", NULL);
        if (dir == NULL) {
            return 0;
        }
        g_autofree char *cls = g_build_filename(dir, "class", NULL);
        g_mkdir(cls, 0755);
    }
    g_autofree char *p = g_build_filename(dir, "class", "image.png", NULL);
    g_file_set_contents(p, (const char *)data, (gssize)size, NULL);

    static const char *const options[] = {"", ",channels=1", ",channels=3"};
    for (size_t k = 0; k < G_N_ELEMENTS(options); k++) {
        g_autofree char *spec = g_strconcat("imagefolder:", dir, options[k], NULL);
        GError *error = NULL;
        TdmDataset *ds = tdm_dataset_open(spec, "train", &error);
        if (ds == NULL) {
            g_assert(error != NULL && strstr(error->message, "image.png") != NULL);
            g_error_free(error);
            return 0;
        }
        TdmImage img = {0};
        int32_t label;
        g_assert(ds->klass->read_image(ds, 0, &img, &label, NULL));
        g_assert(label == 0 && img.c == ds->channels && img.h > 0 && img.w > 0);
        for (size_t i = 0; i < (size_t)img.c * img.h * img.w; i++) {
            g_assert(img.data[i] >= 0.0f && img.data[i] <= 255.0f);
        }
        tdm_image_clear(&img);
        tdm_dataset_close(ds);
    }
    return 0;
}
