/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-blas-lib.c - loads cuBLASLt and cuBLAS at run time and
 * fills the table of cuda-blas-lib.h (why: see there).
 *
 * The libraries are looked up by soname (libcublasLt.so.N, then
 * libcublas.so.N, which itself needs the former), N being the major
 * version of the cuBLAS headers the plugin was compiled with: the dynamic
 * loader's usual search (LD_LIBRARY_PATH, the loader cache, the default
 * directories) finds them where linking against them would have. A failure
 * is kept and reported by every later device_open, each time naming the
 * file, the symbol and the search. The file needs neither a GPU nor the
 * rest of the plugin: tests/test-cuda-blas-lib.c runs it on the CPU.
 */
#define _GNU_SOURCE /* dlinfo: the path a library was loaded from */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include <tandem/types.h>

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

/* cuBLAS's versions: major * 10000 + minor * 100 + patch. */
static char *version_text(long v)
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

/* cuBLAS and cuBLASLt ship and version together: cublasLtGetVersion
 * speaks for both, in CUBLAS_VERSION's form. */
static char *check_loaded_version(const CudaBlasLib *table, const char *soname, void *handle)
{
    long loaded = (long)table->cublasLtGetVersion();
    g_autofree char *text_l = version_text(loaded);
    g_autofree char *text_c = version_text(CUBLAS_VERSION);
    if (loaded / 10000 != CUBLAS_VER_MAJOR) {
        return g_strdup_printf("%s (loaded from %s) is cuBLASLt %s, but the cuda plugin was "
                               "built against %s (another major version: rebuild it against "
                               "this one, or put cuBLAS %s first on LD_LIBRARY_PATH)",
                               soname, lib_path(handle), text_l, text_c, text_c);
    }
    if (loaded < CUBLAS_VERSION) {
        g_message("cuda: cuBLASLt %s is loaded (%s), older than %s the plugin was built against",
                  text_l, lib_path(handle), text_c);
    }
    return NULL;
}

char *cuda_blas_lib_open(const char *lt_soname, const char *blas_soname, CudaBlasLib *table)
{
    const char *sonames[LIB_COUNT] = {lt_soname, blas_soname};
    void *handles[LIB_COUNT] = {NULL, NULL};
    char *message = NULL;
    memset(table, 0, sizeof(*table));
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
    for (size_t i = 0; i < G_N_ELEMENTS(blas_symbols) && message == NULL; i++) {
        const BlasSymbol *s = &blas_symbols[i];
        void *fn = dlsym(handles[s->lib], s->symbol);
        if (fn == NULL) {
            g_autofree char *text_c = version_text(CUBLAS_VERSION);
            message =
                g_strdup_printf("%s (loaded from %s) has no symbol %s, which the cuda "
                                "plugin built against cuBLAS %s calls: an older cuBLAS?",
                                sonames[s->lib], lib_path(handles[s->lib]), s->symbol, text_c);
        }
        /* dlsym's void * into the typed pointer. */
        memcpy((char *)table + s->offset, &fn, sizeof(fn));
    }
    if (message == NULL) {
        message = check_loaded_version(table, sonames[LIB_LT], handles[LIB_LT]);
    }
    if (message == NULL) {
        g_debug("cuda: loaded %s and %s", lib_path(handles[LIB_LT]), lib_path(handles[LIB_BLAS]));
        return NULL;
    }
    /* Nothing of a half-loaded cuBLAS is used: let it go. */
    memset(table, 0, sizeof(*table));
    for (int lib = LIB_COUNT - 1; lib >= 0; lib--) {
        if (handles[lib] != NULL) {
            dlclose(handles[lib]);
        }
    }
    return message;
}

/* NULL when every library and symbol loaded, else the message. */
static gpointer blas_load(gpointer unused)
{
    g_autofree char *lt = g_strdup_printf("libcublasLt.so.%d", CUBLAS_VER_MAJOR);
    g_autofree char *blas = g_strdup_printf("libcublas.so.%d", CUBLAS_VER_MAJOR);
    return cuda_blas_lib_open(lt, blas, &cuda_blas);
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
