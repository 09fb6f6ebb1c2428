/* plugins/cuda/cuda-blas-lib.c - loads cuBLASLt and cuBLAS at run time and
 * fills the table of cuda-blas-lib.h (why: see there).
 *
 * The libraries are looked up by soname (libcublasLt.so.N, then
 * libcublas.so.N, which itself needs the former), N being the major
 * version of the cuBLAS headers the plugin was compiled with: the dynamic
 * loader's usual search (LD_LIBRARY_PATH, the loader cache, the default
 * directories) finds them where linking against them would have. A failure
 * is kept and reported by every later device_open, each time naming the
 * file, the symbol and the search.
 */
#define _GNU_SOURCE /* dlinfo: the path a library was loaded from */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "cuda-backend.h"
#include "cuda-blas-lib.h"

CudaBlasLib cuda_blas;

enum { LIB_LT, LIB_BLAS, LIB_COUNT };

typedef struct {
    int lib;
    size_t offset;      /* of the pointer in CudaBlasLib */
    const char *symbol; /* after cublas_v2.h's macros (cublasCreate_v2) */
} BlasSymbol;

/* G_STRINGIFY expands its argument first: the symbol of a name that
 * cublas_v2.h maps to a _v2 function is that function's. */
#define LT_SYMBOL(name) {LIB_LT, offsetof(CudaBlasLib, name), G_STRINGIFY(name)},
#define BLAS_SYMBOL(name) {LIB_BLAS, offsetof(CudaBlasLib, name), G_STRINGIFY(name)},
static const BlasSymbol blas_symbols[] = {CUDA_BLAS_FUNCTIONS(LT_SYMBOL, BLAS_SYMBOL)};
#undef LT_SYMBOL
#undef BLAS_SYMBOL

static const char *const lib_what[LIB_COUNT] = {"cuBLASLt", "cuBLAS"};

/* "libcublasLt.so.13": the soname of the headers' major version. */
static char *lib_soname(int lib)
{
    return g_strdup_printf("lib%s.so.%d", lib == LIB_LT ? "cublasLt" : "cublas", CUBLAS_VER_MAJOR);
}

/* cuBLAS's versions: major * 10000 + minor * 100 + patch. */
static char *blas_version_text(long v)
{
    return g_strdup_printf("%ld.%ld.%ld", v / 10000, v / 100 % 100, v % 100);
}

/* Where the dynamic loader looked, for the error when it found nothing. */
static char *search_text(void)
{
    const char *ld = g_getenv("LD_LIBRARY_PATH");
    return g_strdup_printf("searched LD_LIBRARY_PATH (%s), the loader cache (/etc/ld.so.cache) "
                           "and the default directories",
                           ld != NULL && ld[0] != '\0' ? ld : "unset");
}

/* The file a handle was loaded from, for messages. */
static const char *lib_path(void *handle)
{
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL &&
        map->l_name[0] != '\0') {
        return map->l_name;
    }
    return "?";
}

/* NULL when every library and symbol loaded, else the message. */
static gpointer blas_load(gpointer unused)
{
    void *handles[LIB_COUNT] = {NULL, NULL};
    char *sonames[LIB_COUNT] = {lib_soname(LIB_LT), lib_soname(LIB_BLAS)};
    char *message = NULL;
    /* cuBLASLt first: libcublas needs it, and finds it loaded then. */
    for (int lib = 0; lib < LIB_COUNT && message == NULL; lib++) {
        handles[lib] = dlopen(sonames[lib], RTLD_NOW | RTLD_LOCAL);
        if (handles[lib] == NULL) {
            g_autofree char *search = search_text();
            message = g_strdup_printf(
                "cannot load %s (%s %d, the major version the cuda plugin was built against): "
                "%s; %s",
                sonames[lib], lib_what[lib], CUBLAS_VER_MAJOR, dlerror(), search);
        }
    }
    CudaBlasLib table = {0};
    for (size_t i = 0; i < G_N_ELEMENTS(blas_symbols) && message == NULL; i++) {
        const BlasSymbol *s = &blas_symbols[i];
        void *fn = dlsym(handles[s->lib], s->symbol);
        if (fn == NULL) {
            message = g_strdup_printf(
                "%s (loaded from %s) has no symbol %s, which the cuda plugin built against "
                "cuBLAS %d.%d.%d calls: an older cuBLAS?",
                sonames[s->lib], lib_path(handles[s->lib]), s->symbol, CUBLAS_VER_MAJOR,
                CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
        }
        memcpy((char *)&table + s->offset, &fn, sizeof(fn));
    }
    if (message == NULL) {
        /* cublasLtGetVersion: major * 10000 + minor * 100 + patch, as
         * CUBLAS_VERSION (cuBLAS and cuBLASLt ship and version together). */
        long loaded = (long)table.cublasLtGetVersion();
        g_autofree char *text_c = blas_version_text(CUBLAS_VERSION);
        g_autofree char *text_l = blas_version_text(loaded);
        char *reason = NULL;
        if (!cuda_check_version("cuBLASLt", CUBLAS_VERSION, loaded, 10000, text_c, text_l,
                                &reason)) {
            message = g_strdup_printf("%s (loaded from %s)", reason, lib_path(handles[LIB_LT]));
            g_free(reason);
        }
    }
    if (message == NULL) {
        cuda_blas = table;
        g_debug("cuda: loaded %s and %s", lib_path(handles[LIB_LT]), lib_path(handles[LIB_BLAS]));
    } else {
        /* Nothing of a half-loaded cuBLAS is used: let it go. */
        for (int lib = LIB_COUNT - 1; lib >= 0; lib--) {
            if (handles[lib] != NULL) {
                dlclose(handles[lib]);
            }
        }
    }
    g_free(sonames[LIB_LT]);
    g_free(sonames[LIB_BLAS]);
    return message;
}

gboolean cuda_blas_lib_load(GError **error)
{
    static GOnce once = G_ONCE_INIT;
    const char *message = g_once(&once, blas_load, NULL);
    if (message != NULL) {
        g_set_error_literal(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE, message);
        return FALSE;
    }
    return TRUE;
}
