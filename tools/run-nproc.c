/* SPDX-License-Identifier: MIT */
/* tools/run-nproc.c - `tandem run --nproc-per-node gpu|auto`: how many
 * workers this node starts, and which GPU each drives.
 *
 * `gpu` starts one worker per visible GPU, as torchrun's `gpu`: the count
 * is the cuda backend's device_count, asked through the registry after its
 * probe. The probe loads the driver and counts devices (cudaGetDeviceCount,
 * which honours CUDA_VISIBLE_DEVICES) but creates no CUDA context, and the
 * workers are fork + exec'ed, so none of the launcher's CUDA state reaches
 * them. Without a GPU `gpu` fails with the probe's reason. `auto` is `gpu`
 * when there is one, else one worker per core group: a NUMA node of the
 * machine (/sys/devices/system/node), one on a machine that has a single
 * node or does not say. Worker i of a GPU job drives cuda:i (the core's
 * LOCAL_RANK device pick does it for `--device cuda` or `auto`); the
 * launcher also gives it TDM_DEVICE=cuda:i and names the GPU in its log
 * prefix.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "run.h"

/* The cuda backend's device count, or 0 with *reason set (transfer full). */
static int gpu_count(char **reason)
{
#ifdef TDM_ENABLE_TEST_HOOKS
    /* Tests of a GPU job's workers (count, environment, log prefix) on a
     * machine without one: the launcher counts this many GPUs. */
    const char *fake = g_getenv("TDM_TEST_FAKE_GPUS");
    int fake_n = fake != NULL ? (int)g_ascii_strtoll(fake, NULL, 10) : 0;
    if (fake_n > 0) {
        return fake_n;
    }
#endif
    GError *error = NULL;
    if (!tdm_registry_init(&error)) {
        *reason = g_strdup_printf("cuda unavailable: %s", error->message);
        g_error_free(error);
        return 0;
    }
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_BACKEND, "cuda", &error);
    if (f == NULL) {
        *reason = g_strdup_printf("cuda unavailable: %s", error->message);
        g_error_free(error);
        return 0;
    }
    const char *why = NULL;
    if (!tdm_feature_is_available(f, &why)) {
        *reason = g_strdup_printf("cuda unavailable: %s", why != NULL ? why : "no reason given");
        return 0;
    }
    const TdmBackendClass *klass = tdm_feature_get_class(f);
    int n = klass->device_count != NULL ? klass->device_count() : 1;
    if (n <= 0) {
        const char *visible = g_getenv("CUDA_VISIBLE_DEVICES");
        *reason = g_strdup_printf("cuda unavailable: no device visible (CUDA_VISIBLE_DEVICES=%s)",
                                  visible != NULL ? visible : "unset");
        return 0;
    }
    return n;
}

/* NUMA nodes of this machine (node0, node1, ...), at least 1. */
static int core_groups(void)
{
    GDir *dir = g_dir_open("/sys/devices/system/node", 0, NULL);
    if (dir == NULL) {
        return 1;
    }
    int n = 0;
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
        if (g_str_has_prefix(name, "node") && name[4] != '\0' &&
            strspn(name + 4, "0123456789") == strlen(name + 4)) {
            n++;
        }
    }
    g_dir_close(dir);
    return MAX(n, 1);
}

gboolean run_resolve_nproc(const char *value, RunOptions *o)
{
    o->gpus = 0;
    if (strcmp(value, "gpu") != 0 && strcmp(value, "auto") != 0) {
        return FALSE; /* a number: the caller parses it */
    }
    g_autofree char *reason = NULL;
    int n = gpu_count(&reason);
    if (n > 0) {
        o->nproc = n;
        o->gpus = n;
        return TRUE;
    }
    if (strcmp(value, "gpu") == 0) {
        fprintf(stderr, "tandem run: --nproc-per-node gpu: no GPU: %s\n", reason);
        o->nproc = -1;
        return TRUE;
    }
    o->nproc = core_groups();
    return TRUE;
}
