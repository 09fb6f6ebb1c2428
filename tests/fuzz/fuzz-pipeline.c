/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-pipeline.c - libFuzzer target for the transform pipeline
 * parser and every transform's argument parsing.
 *
 * Not built by make; from a build directory (the transforms plugin must be
 * found, hence TDM_PLUGIN_SYSTEM_PATH):
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-pipeline.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-pipeline
 *   TDM_PLUGIN_SYSTEM_PATH=plugins/.libs LD_LIBRARY_PATH=core/.libs \
 *     ./fuzz-pipeline corpus/
 * A useful seed corpus is one pipeline per file, e.g.
 *   "pad 4 | random-crop 28 | hflip | rotate 15 | normalize mean=0.5 std=0.2".
 * Each input is parsed as a pipeline string; a pipeline that parses must
 * either report an error for its output shape or run on a small image and
 * produce exactly that shape (the pipeline itself refuses absurd sizes such
 * as "pad 900000"). A parse error must come with a message.
 */
#include <string.h>

#include <tandem/tandem.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    if (size > 4096) {
        return 0;
    }
    char *spec = g_strndup((const char *)data, size);
    GError *error = NULL;
    TdmTransformPipeline *p = tdm_transform_pipeline_parse(spec, &error);
    if (p == NULL) {
        g_assert(error != NULL && error->message != NULL && error->message[0] != '\0');
        g_clear_error(&error);
        g_free(spec);
        return 0;
    }
    g_assert(error == NULL);
    int oc, oh, ow;
    if (tdm_transform_pipeline_output_shape(p, 3, 12, 10, &oc, &oh, &ow, &error)) {
        TdmImage img = {0}, scratch = {0};
        guint8 px[3 * 12 * 10];
        for (size_t i = 0; i < sizeof(px); i++) {
            px[i] = (guint8)(i * 7);
        }
        tdm_image_set_u8(&img, px, 3, 12, 10);
        if (tdm_transform_pipeline_apply(p, &img, &scratch, 1, 2, 3, &error)) {
            g_assert(img.c == oc && img.h == oh && img.w == ow);
        }
        tdm_image_clear(&img);
        tdm_image_clear(&scratch);
    }
    g_clear_error(&error);
    tdm_transform_pipeline_unref(p);
    g_free(spec);
    return 0;
}
