/* SPDX-License-Identifier: MIT */
/* tests/transform-apply.c - run a transform pipeline on one raw image.
 *
 * The oracle test (transforms-oracle.py) writes an image as raw u8 CHW,
 * runs this program and compares the raw f32 CHW result with torchvision's.
 *   transform-apply PIPELINE C H W IN.u8 OUT.f32 [SEED EPOCH INDEX]
 * prints the output shape "C H W" on stdout. Errors go to stderr, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tandem/tandem.h>

int main(int argc, char **argv)
{
    if (argc != 7 && argc != 10) {
        fprintf(stderr, "usage: %s PIPELINE C H W IN.u8 OUT.f32 [SEED EPOCH INDEX]\n", argv[0]);
        return 2;
    }
    int c = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]);
    guint64 seed = argc == 10 ? g_ascii_strtoull(argv[7], NULL, 10) : 0;
    guint64 epoch = argc == 10 ? g_ascii_strtoull(argv[8], NULL, 10) : 0;
    guint64 index = argc == 10 ? g_ascii_strtoull(argv[9], NULL, 10) : 0;
    GError *error = NULL;
    g_autofree char *pixels = NULL;
    gsize len = 0;
    if (!g_file_get_contents(argv[5], &pixels, &len, &error)) {
        fprintf(stderr, "transform-apply: %s\n", error->message);
        return 1;
    }
    if (c < 1 || h < 1 || w < 1 || len != (gsize)c * h * w) {
        fprintf(stderr, "transform-apply: %s has %zu bytes, not %d*%d*%d\n", argv[5], len, c, h,
                w);
        return 1;
    }
    g_autoptr(TdmTransformPipeline) p = tdm_transform_pipeline_parse(argv[1], &error);
    if (p == NULL) {
        fprintf(stderr, "transform-apply: %s\n", error->message);
        return 1;
    }
    TdmImage img = {0}, scratch = {0};
    tdm_image_set_u8(&img, (const guint8 *)pixels, c, h, w);
    if (!tdm_transform_pipeline_apply(p, &img, &scratch, seed, epoch, index, &error)) {
        fprintf(stderr, "transform-apply: %s\n", error->message);
        return 1;
    }
    gsize out_len = sizeof(float) * (gsize)img.c * img.h * img.w;
    if (!g_file_set_contents(argv[6], (const char *)img.data, (gssize)out_len, &error)) {
        fprintf(stderr, "transform-apply: %s\n", error->message);
        return 1;
    }
    printf("%d %d %d\n", img.c, img.h, img.w);
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
    return 0;
}
