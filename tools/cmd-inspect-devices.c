/* SPDX-License-Identifier: MIT */
/* tools/cmd-inspect-devices.c - `tandem inspect devices`: every device of
 * every available backend, with what tdm_device_info() knows of it, then
 * the backends that are not available and why. Same "key: value" layout as
 * the rest of `tandem inspect`: name, kind, capability, compute units,
 * memory total and free, the allocator's allocated, reserved and peak
 * bytes, and the utilisation ("-" when the backend cannot tell: NVML
 * missing, a host backend).
 */
#include "config.h"

#include <stdio.h>

#include <tandem/tandem.h>

#include "commands.h"

/* "15.6 GiB", "512 B", or "unknown" for -1 (transfer full). */
static char *bytes_string(gint64 n)
{
    if (n < 0) {
        return g_strdup("unknown");
    }
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    guint u = 0;
    while (v >= 1024.0 && u + 1 < G_N_ELEMENTS(units)) {
        v /= 1024.0;
        u++;
    }
    return u == 0 ? g_strdup_printf("%" G_GINT64_FORMAT " B", n)
                  : g_strdup_printf("%.1f %s", v, units[u]);
}

static void print_device(TdmDevice *dev)
{
    TdmDeviceInfo info;
    GError *error = NULL;
    printf("  %s\n", dev->name);
    if (!tdm_device_info(dev, &info, &error)) {
        printf("    error:       %s\n", error->message);
        g_error_free(error);
        return;
    }
    g_autofree char *total = bytes_string(info.total_bytes);
    g_autofree char *free_ = bytes_string(info.free_bytes);
    g_autofree char *allocated = bytes_string(info.allocated_bytes);
    g_autofree char *reserved = bytes_string(info.reserved_bytes);
    g_autofree char *peak = bytes_string(info.peak_bytes);
    printf("    name:        %s\n", info.name);
    printf("    kind:        %s%s\n", tdm_device_kind_name(info.kind),
           info.host_accessible ? " (host memory)" : "");
    printf("    capability:  %s\n", info.capability[0] != '\0' ? info.capability : "unknown");
    if (info.compute_units >= 0) {
        printf("    compute:     %d unit%s\n", info.compute_units,
               info.compute_units == 1 ? "" : "s");
    } else {
        printf("    compute:     unknown\n");
    }
    printf("    memory:      %s total, %s free\n", total, free_);
    printf("    allocator:   %s allocated, %s reserved, %s peak\n", allocated, reserved, peak);
    if (info.utilization >= 0) {
        printf("    utilization: %d%%\n", info.utilization);
    } else {
        printf("    utilization: -\n"); /* the backend cannot tell */
    }
}

int tdm_inspect_devices(void)
{
    GError *error = NULL;
    GPtrArray *devices = tdm_device_list(&error);
    if (devices == NULL) {
        fprintf(stderr, "tandem inspect devices: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    printf("Devices:\n");
    for (guint i = 0; i < devices->len; i++) {
        print_device(g_ptr_array_index(devices, i));
    }
    if (devices->len == 0) {
        printf("  none\n");
    }
    GPtrArray *backends = tdm_registry_list_features(TDM_FEATURE_BACKEND);
    guint unavailable = 0;
    for (guint i = 0; i < backends->len; i++) {
        TdmFeature *f = g_ptr_array_index(backends, i);
        const char *reason = NULL;
        if (!tdm_feature_is_available(f, &reason)) {
            if (unavailable++ == 0) {
                printf("\nUnavailable backends:\n");
            }
            printf("  %s: %s\n", tdm_feature_get_name(f), reason != NULL ? reason : "?");
        }
    }
    printf("\n%u device%s\n", devices->len, devices->len == 1 ? "" : "s");
    g_ptr_array_unref(backends);
    g_ptr_array_unref(devices);
    return 0;
}
