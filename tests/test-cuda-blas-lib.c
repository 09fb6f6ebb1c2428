/* SPDX-License-Identifier: MIT */
/* tests/test-cuda-blas-lib.c - the cuda plugin's run-time loading of cuBLAS
 * and cuBLASLt (plugins/cuda/cuda-blas-lib.c, compiled into this program),
 * on the CPU.
 *
 * Loading needs no GPU, only the libraries, which configure found where
 * the plugin is built: cuBLAS is not in the process until
 * cuda_blas_lib_load() runs, then every function of the table resolves to
 * the libraries of the headers' major version (the _v2 names of
 * cublas_v2.h included) and works where no device is needed. A library
 * that is missing, or that lacks a function, fails with a message naming
 * the file, the symbol and the search, and leaves the table empty.
 */
#include "config.h"

#include <dlfcn.h>
#include <string.h>

#include <tandem/types.h>

#include "cuda-blas-lib.h"

static char *soname(const char *base, int major)
{
    return g_strdup_printf("lib%s.so.%d", base, major);
}

/* Whether the process has the library loaded (RTLD_NOLOAD loads nothing). */
static gboolean is_loaded(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) {
        dlclose(h);
    }
    return h != NULL;
}

static gboolean table_empty(const CudaBlasLib *t)
{
    static const CudaBlasLib zero;
    return memcmp(t, &zero, sizeof(zero)) == 0;
}

/* Runs first: nothing before it has loaded cuBLAS. */
static void test_load(void)
{
    g_autofree char *lt = soname("cublasLt", CUBLAS_VER_MAJOR);
    g_autofree char *blas = soname("cublas", CUBLAS_VER_MAJOR);
    g_assert_false(is_loaded(lt));
    g_assert_false(is_loaded(blas));
    g_assert_true(table_empty(&cuda_blas));

    GError *error = NULL;
    gboolean ok = cuda_blas_lib_load(&error);
    g_assert_no_error(error);
    g_assert_true(ok);
    g_assert_true(is_loaded(lt));
    g_assert_true(is_loaded(blas));
#define ASSERT_RESOLVED(name) g_assert_nonnull(cuda_blas.name);
    CUDA_BLAS_FUNCTIONS(ASSERT_RESOLVED, ASSERT_RESOLVED)
#undef ASSERT_RESOLVED
    /* The pointers are the libraries' own functions... */
    void *h = dlopen(blas, RTLD_NOW | RTLD_NOLOAD);
    g_assert_nonnull(h);
    g_assert_true((void *)cuda_blas.cublasCreate == dlsym(h, "cublasCreate_v2"));
    dlclose(h);
    /* ...and run where no device is needed. */
    g_assert_cmpint((long)cuda_blas.cublasLtGetVersion() / 10000, ==, CUBLAS_VER_MAJOR);
    const char *not_init = cuda_blas.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
    g_assert_nonnull(not_init);
    g_assert_cmpstr(not_init, !=, "");
    g_assert_cmpstr(not_init, !=, cuda_blas.cublasGetStatusString(CUBLAS_STATUS_SUCCESS));

    /* Once per process: a second call loads nothing more and succeeds. */
    ok = cuda_blas_lib_load(&error);
    g_assert_no_error(error);
    g_assert_true(ok);
}

static void test_missing_library(void)
{
    g_autofree char *blas = soname("cublas", CUBLAS_VER_MAJOR);
    CudaBlasLib table;
    memset(&table, 0xff, sizeof(table));
    g_autofree char *message = cuda_blas_lib_open("libcublasLt.so.999", blas, &table);
    g_assert_nonnull(message);
    g_test_message("%s", message);
    g_assert_nonnull(strstr(message, "cannot load libcublasLt.so.999 (cuBLASLt "));
    g_assert_nonnull(strstr(message, "searched LD_LIBRARY_PATH ("));
    g_assert_nonnull(strstr(message, "the loader cache"));
    g_assert_true(table_empty(&table));
}

/* libcudart stands for a library without the functions asked of it. */
static void test_missing_symbol(void)
{
    g_autofree char *lt = soname("cublasLt", CUBLAS_VER_MAJOR);
    g_autofree char *rt = soname("cudart", CUDART_VERSION / 1000);
    CudaBlasLib table;

    g_autofree char *no_blas = cuda_blas_lib_open(lt, rt, &table);
    g_assert_nonnull(no_blas);
    g_test_message("%s", no_blas);
    g_autofree char *want = g_strdup_printf("%s (loaded from /", rt);
    g_assert_true(g_str_has_prefix(no_blas, want));
    /* The first cuBLAS function of the table, under its _v2 symbol. */
    g_assert_nonnull(strstr(no_blas, ") has no symbol cublasCreate_v2, "));
    g_assert_true(table_empty(&table));

    g_autofree char *no_lt = cuda_blas_lib_open(rt, lt, &table);
    g_assert_nonnull(no_lt);
    g_assert_nonnull(strstr(no_lt, ") has no symbol cublasLtGetVersion, "));
    g_assert_true(table_empty(&table));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cuda-blas-lib/load", test_load);
    g_test_add_func("/cuda-blas-lib/missing-library", test_missing_library);
    g_test_add_func("/cuda-blas-lib/missing-symbol", test_missing_symbol);
    return g_test_run();
}
