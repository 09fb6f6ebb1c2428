/* SPDX-License-Identifier: MIT */
/* tools/cmd-export.c - `tandem export SRC DST`: a model's weights back to
 * PyTorch.
 *
 * SRC is a weights file of either format, usually a checkpoint or a --save
 * file (a symbolic link such as ckpt/latest is followed). A checkpoint
 * holds, besides the model's parameters and buffers under torchvision's
 * names, the trainer's own tensors (optimizer state, ...), all named
 * "tandem.*"; those are left out, so DST is the plain state dict:
 * safetensors or a .pth that torch.load(f, weights_only=True) and
 * load_state_dict(strict=True) take, chosen by DST's extension.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"

/* The prefix of a checkpoint's tensors that are not the model's. */
#define TRAINER_PREFIX "tandem."

static void print_export_usage(FILE *out)
{
    fprintf(out,
            "Usage: tandem export SRC DST\n"
            "\n"
            "Write the model weights of SRC (a checkpoint, a --save file, or a .pth; a\n"
            "symbolic link such as ckpt/latest is followed) to DST, for PyTorch:\n"
            "  DST.pth           torch.save's zip format, a state dict that\n"
            "                    torch.load(f, weights_only=True) reads\n"
            "  DST.safetensors   safetensors\n"
            "The checkpoint's own tensors (optimizer state, ...: names starting with\n"
            "\"" TRAINER_PREFIX "\") are left out.\n"
            "\n"
            "Example:\n"
            "  tandem export ckpt/latest model.pth\n"
            "and in PyTorch:\n"
            "  model.load_state_dict(torch.load(\"model.pth\", weights_only=True))\n");
}

int tdm_cmd_export(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_export_usage(stdout);
            return 0;
        }
    }
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
        fprintf(stderr, "tandem export: %s\n", argc < 3 ? "SRC and DST are required"
                : argc > 3 ? "unexpected arguments after SRC DST" : "unknown option");
        fprintf(stderr, "Run 'tandem export --help' for the usage.\n");
        return 2;
    }
    const char *src = argv[1], *dst = argv[2];
    gboolean pth = g_str_has_suffix(dst, ".pth") || g_str_has_suffix(dst, ".pt");
    if (!pth && !g_str_has_suffix(dst, ".safetensors")) {
        fprintf(stderr, "tandem export: %s: the destination's extension picks the format: "
                ".pth (or .pt) or .safetensors\n", dst);
        return 2;
    }
    GError *error = NULL;
    TdmSafeTensors *in = tdm_weights_load(src, &error);
    if (in == NULL) {
        fprintf(stderr, "tandem export: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    TdmSafeTensors *out = tdm_safetensors_new();
    tdm_safetensors_set_metadata(out, "format", "pt");
    guint kept = 0, left = 0;
    size_t bytes = 0;
    for (guint i = 0; i < tdm_safetensors_count(in); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(in, i);
        if (g_str_has_prefix(t->name, TRAINER_PREFIX)) {
            left++;
            continue;
        }
        tdm_safetensors_add(out, t->name, t->dtype, t->ndim, t->shape, t->data);
        kept++;
        bytes += t->nbytes;
    }
    tdm_safetensors_free(in);
    gboolean ok = kept > 0;
    if (!ok) {
        fprintf(stderr, "tandem export: %s holds no model tensors (%u named " TRAINER_PREFIX
                "*)\n", src, left);
    } else {
        ok = pth ? tdm_pth_save(out, dst, &error) : tdm_safetensors_save(out, dst, &error);
        if (!ok) {
            fprintf(stderr, "tandem export: %s\n", error->message);
            g_error_free(error);
        }
    }
    tdm_safetensors_free(out);
    if (ok) {
        printf("wrote %s: %u tensors, %zu bytes of data, from %s (%u " TRAINER_PREFIX "* tensors "
               "left out)\n", dst, kept, bytes, src, left);
    }
    return ok ? 0 : 1;
}
