/* SPDX-License-Identifier: MIT */
/* tests/zoo-dump.c - prints a zoo model's parameters then buffers, one per
 * line as "param|buffer NAME D0xD1x..", for tests/test-zoo-names.py to
 * compare with PyTorch. Usage: zoo-dump NAME [IN_CHANNELS NUM_CLASSES
 * IMAGE_SIZE]. The model is placed on the ref device (names are assigned
 * at placement). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <tandem/tandem.h>

int main(int argc, char **argv)
{
    GError *error = NULL;
    if (argc < 2) {
        fprintf(stderr, "usage: %s NAME [IN_CHANNELS NUM_CLASSES IMAGE_SIZE]\n", argv[0]);
        return 2;
    }
    TdmModelConfig cfg = {0};
    cfg.in_channels = argc > 2 ? atoi(argv[2]) : 0;
    cfg.num_classes = argc > 3 ? atoi(argv[3]) : 0;
    cfg.image_size = argc > 4 ? atoi(argv[4]) : 0;
    TdmModule *root = tdm_model_zoo_create(argv[1], &cfg, &error);
    TdmDevice *dev = root != NULL ? tdm_device_get("ref", &error) : NULL;
    TdmModel *model = dev != NULL ? tdm_model_new(root, dev, 0, &error) : NULL;
    if (model == NULL) {
        fprintf(stderr, "zoo-dump: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = g_ptr_array_index(model->params, i);
        printf("%s %s ", p->is_buffer ? "buffer" : "param", p->full_name);
        if (p->ndim == 0) {
            printf("-");
        }
        for (int d = 0; d < p->ndim; d++) {
            printf(d > 0 ? "x%" G_GINT64_FORMAT : "%" G_GINT64_FORMAT, p->shape[d]);
        }
        printf("\n");
    }
    tdm_model_free(model);
    return 0;
}
