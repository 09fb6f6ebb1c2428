/* SPDX-License-Identifier: MIT */
/* core/common.c - small things every part of the core uses: the error
 * domain, dtype names and sizes, the clock, and the library version. The
 * clock starts in a library constructor so that "time to first step" counts
 * from (about) process start. */
#include "config.h"

#include <string.h>
#include <time.h>

#include "internal.h"

static double start_time;

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

__attribute__((constructor)) static void tdm_common_init(void)
{
    start_time = monotonic_seconds();
}

G_DEFINE_QUARK(tdm-error-quark, tdm_error)

size_t tdm_dtype_size(TdmDType dtype)
{
    switch (dtype) {
    case TDM_DTYPE_F32:
    case TDM_DTYPE_I32:
        return 4;
    case TDM_DTYPE_I64:
        return 8;
    case TDM_DTYPE_U8:
        return 1;
    case TDM_DTYPE_BF16:
    case TDM_DTYPE_F16:
        return 2;
    }
    return 0;
}

const char *tdm_dtype_name(TdmDType dtype)
{
    static const char *const names[] = {"f32", "i32", "i64", "u8", "bf16", "f16"};
    if ((unsigned)dtype < G_N_ELEMENTS(names)) {
        return names[dtype];
    }
    return "?";
}

double tdm_time_now(void)
{
    return monotonic_seconds();
}

double tdm_time_since_start(void)
{
    return monotonic_seconds() - start_time;
}

gboolean tdm_debug_flag(const char *flag)
{
    const char *v = g_getenv("TDM_DEBUG");
    const size_t n = strlen(flag);
    /* in place, no copy: containers ask at every training forward */
    while (v != NULL && *v != '\0') {
        const size_t len = strcspn(v, ",: ");
        if ((len == n && strncmp(v, flag, n) == 0) || (len == 3 && strncmp(v, "all", 3) == 0)) {
            return TRUE;
        }
        v += len + (v[len] != '\0');
    }
    return FALSE;
}

const char *tdm_version(void)
{
    return TDM_VERSION;
}
