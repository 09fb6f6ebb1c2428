/* SPDX-License-Identifier: MIT */
/* tools/cmd-compare.c - `tandem compare A B`: are two weight files the
 * same model, within a tolerance?
 *
 * What a plugin author or a user needs to see that two runs agree: a new
 * strategy against ddp, a rank's --save against rank 0's, a resumed run
 * against an uninterrupted one. Both files are read by tdm_weights_load
 * (safetensors or .pth); they must hold the same tensor names, dtypes and
 * shapes. Each f32 tensor's difference is ||a - b|| / ||b|| (L2, b's norm
 * at least 1e-30), so one number per tensor is independent of its size;
 * a tensor of another dtype (an integer step count) must be equal byte for
 * byte. The largest difference and its tensor are printed; the exit status
 * says whether it is within the tolerance.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"

static void print_compare_usage(FILE *out)
{
    fprintf(out,
            "Usage: tandem compare [--tolerance T] A B\n"
            "\n"
            "Compare two weight files (safetensors, such as --save writes, or .pth)\n"
            "tensor by tensor. They must hold the same tensor names, dtypes and shapes.\n"
            "For each f32 tensor the relative difference is ||a - b|| / ||b|| (L2\n"
            "norms); a tensor of another dtype must be equal byte for byte. Prints\n"
            "the largest difference and its tensor:\n"
            "  largest relative difference 3.2e-07 (fc2.weight), tolerance 1e-05: ok\n"
            "\n"
            "Options:\n"
            "  --tolerance T   the largest relative difference accepted (1e-5; 0: equal)\n"
            "  -h, --help      show this help\n"
            "\n"
            "Exit status: 0 every tensor is within T, 1 one is not (or the names,\n"
            "dtypes or shapes differ), 2 a usage error or a file that cannot be read.\n"
            "\n"
            "Examples:\n"
            "  tandem compare mine.safetensors ddp.safetensors\n"
            "  tandem run --nproc-per-node 2 -- tandem train --strategy ddp --save 'w{rank}.st'\n"
            "  tandem compare --tolerance 0 w1.st w0.st   # every rank ended alike\n");
}

/* ||a - b|| / ||b|| of one tensor; a non-f32 one is 0 or infinity. */
static double tensor_difference(const TdmSafeTensor *a, const TdmSafeTensor *b)
{
    if (a->dtype != TDM_DTYPE_F32) {
        return memcmp(a->data, b->data, a->nbytes) == 0 ? 0.0 : INFINITY;
    }
    const float *x = a->data, *y = b->data;
    double d = 0.0, n = 0.0;
    for (size_t i = 0; i < a->nbytes / sizeof(float); i++) {
        double e = (double)x[i] - (double)y[i];
        d += e * e;
        n += (double)y[i] * y[i];
    }
    return d == 0.0 ? 0.0 : sqrt(d) / MAX(sqrt(n), 1e-30);
}

static gboolean same_layout(const TdmSafeTensor *a, const TdmSafeTensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* 0 within the tolerance, 1 not, after printing why. */
static int compare(const char *pa, const TdmSafeTensors *a, const char *pb,
                   const TdmSafeTensors *b, double tolerance)
{
    if (tdm_safetensors_count(a) != tdm_safetensors_count(b)) {
        printf("%s has %u tensors, %s %u: DIFFERENT\n", pa, tdm_safetensors_count(a), pb,
               tdm_safetensors_count(b));
        return 1;
    }
    double worst = 0.0;
    const char *worst_name = NULL;
    for (guint i = 0; i < tdm_safetensors_count(a); i++) {
        const TdmSafeTensor *ta = tdm_safetensors_index(a, i);
        const TdmSafeTensor *tb = tdm_safetensors_get(b, ta->name);
        if (tb == NULL) {
            printf("%s has no tensor %s: DIFFERENT\n", pb, ta->name);
            return 1;
        }
        if (!same_layout(ta, tb)) {
            printf("%s: dtype or shape differs between %s and %s: DIFFERENT\n", ta->name, pa,
                   pb);
            return 1;
        }
        double d = tensor_difference(ta, tb);
        if (worst_name == NULL || !(d <= worst)) {
            worst = d;
            worst_name = ta->name;
        }
    }
    gboolean ok = worst <= tolerance;
    printf("largest relative difference %.3g (%s), tolerance %g: %s\n", worst,
           worst_name != NULL ? worst_name : "no tensors", tolerance, ok ? "ok" : "TOO LARGE");
    return ok ? 0 : 1;
}

int tdm_cmd_compare(int argc, char **argv)
{
    double tolerance = 1e-5;
    const char *files[2] = {NULL, NULL};
    int n_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_compare_usage(stdout);
            return 0;
        } else if (strcmp(a, "--tolerance") == 0 && i + 1 < argc) {
            char *end = NULL;
            tolerance = g_ascii_strtod(argv[++i], &end);
            if (*end != '\0' || end == argv[i] || !(tolerance >= 0) || isinf(tolerance)) {
                fprintf(stderr, "tandem compare: --tolerance %s: expected a number >= 0\n",
                        argv[i]);
                return 2;
            }
        } else if (a[0] == '-' || n_files == 2) {
            fprintf(stderr, "tandem compare: %s '%s'\n",
                    a[0] == '-' ? "unknown option" : "two files only, not also", a);
            fprintf(stderr, "Run 'tandem compare --help' for the usage.\n");
            return 2;
        } else {
            files[n_files++] = a;
        }
    }
    if (n_files != 2) {
        fprintf(stderr, "tandem compare: two files A and B are required\n"
                        "Run 'tandem compare --help' for the usage.\n");
        return 2;
    }
    GError *error = NULL;
    g_autoptr(TdmSafeTensors) a = tdm_weights_load(files[0], &error);
    g_autoptr(TdmSafeTensors) b = a != NULL ? tdm_weights_load(files[1], &error) : NULL;
    if (b == NULL) {
        fprintf(stderr, "tandem compare: %s\n", error->message);
        g_error_free(error);
        return 2;
    }
    return compare(files[0], a, files[1], b, tolerance);
}
