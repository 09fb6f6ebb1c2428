/* SPDX-License-Identifier: MIT */
/* tests/test-steady-alloc.c - a training step in its steady state allocates
 * no memory: after the first steps have created every primitive, buffer,
 * layout and optimizer state, further steps (forward, loss, backward, SGD
 * with momentum and weight decay, gradients zeroed) make no call to
 * malloc, calloc, realloc, the aligned allocators or C++ new from Tandem's
 * code, on the cpu backend and on ref. What oneDNN and libgomp allocate
 * inside themselves is counted apart and reported, not failed: oneDNN's
 * sgemm mallocs its packing buffers on every call and its execute builds
 * an argument map; libgomp allocates the team of a parallel region that
 * runs on one thread. No caller can avoid those.
 *
 * The counting is done by defining the allocator entry points in this
 * program: the dynamic linker binds every library's calls (libtandem, the
 * plugins, oneDNN, libgomp, GLib) to them, and they hand over to glibc's
 * own (__libc_malloc and friends), counting while a step is measured.
 * glibc only: elsewhere, and under AddressSanitizer, the test skips.
 */
#define _GNU_SOURCE /* dladdr */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "core-test-util.h"

/* AddressSanitizer brings its own allocator, which these definitions would
 * replace: under it (gcc -fsanitize=address) the test skips. */
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define HAVE_COUNTING 1

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

/* Visible to the libraries despite the project's -fvisibility=hidden. */
#define INTERPOSE __attribute__((visibility("default")))

static int counting;         /* set while a measured step runs */
static gint ours;            /* allocations by Tandem's code (GLib included) */
static gint runtime;         /* made inside oneDNN, libgomp or libstdc++ themselves */
static gint runtime_largest; /* the largest of those, in bytes */
static gint ours_large;      /* of `ours`, those of LARGE_BYTES or more */

/* Larger than any bookkeeping a call allocates (a collective's work
 * handles), smaller than the tensors a staged collective copies. */
#define LARGE_BYTES 65536

/* Whether the code that called the allocator lies in one of the runtimes
 * Tandem drives: oneDNN (its sgemm driver mallocs its packing buffers on
 * every call, its execute builds an argument map with C++ new), libgomp
 * (a parallel region that runs on one thread gets a freshly allocated
 * team; LLVM's libomp in a clang build) or the C++ library. */
static gboolean from_runtime(const void *caller)
{
    Dl_info info;
    if (dladdr(caller, &info) == 0 || info.dli_fname == NULL) {
        return FALSE;
    }
    const char *base = strrchr(info.dli_fname, '/');
    base = base != NULL ? base + 1 : info.dli_fname;
    return g_str_has_prefix(base, "libdnnl.") || g_str_has_prefix(base, "libgomp.") ||
           g_str_has_prefix(base, "libomp.") || g_str_has_prefix(base, "libstdc++.");
}

static void count(const void *caller, size_t n)
{
    if (!__atomic_load_n(&counting, __ATOMIC_RELAXED)) {
        return;
    }
    if (!from_runtime(caller)) {
        g_atomic_int_inc(&ours);
        if (n >= LARGE_BYTES) {
            g_atomic_int_inc(&ours_large);
        }
        return;
    }
    g_atomic_int_inc(&runtime);
    gint largest, size = (gint)MIN(n, (size_t)G_MAXINT);
    while ((largest = g_atomic_int_get(&runtime_largest)) < size &&
           !g_atomic_int_compare_and_exchange(&runtime_largest, largest, size)) {
    }
}

#define COUNT(n) count(__builtin_return_address(0), (n))

INTERPOSE void *malloc(size_t n)
{
    COUNT(n);
    return __libc_malloc(n);
}

INTERPOSE void *calloc(size_t n, size_t size)
{
    COUNT(n * size);
    return __libc_calloc(n, size);
}

INTERPOSE void *realloc(void *p, size_t n)
{
    COUNT(n);
    return __libc_realloc(p, n);
}

INTERPOSE void free(void *p)
{
    __libc_free(p);
}

INTERPOSE void *memalign(size_t align, size_t n)
{
    COUNT(n);
    return __libc_memalign(align, n);
}

INTERPOSE void *aligned_alloc(size_t align, size_t n)
{
    COUNT(n);
    return __libc_memalign(align, n);
}

INTERPOSE int posix_memalign(void **out, size_t align, size_t n)
{
    COUNT(n);
    void *p = __libc_memalign(align, n);
    if (p == NULL && n != 0) {
        return ENOMEM;
    }
    *out = p;
    return 0;
}

/* operator new(size_t), by its Itanium ABI name, counted like the rest,
 * and new[](size_t) as the same function; a failure aborts (C cannot throw
 * std::bad_alloc; this is a test). */
INTERPOSE void *_Znwm(size_t n)
{
    COUNT(n);
    void *p = __libc_malloc(n != 0 ? n : 1);
    if (p == NULL) {
        abort();
    }
    return p;
}

INTERPOSE void *_Znam(size_t n) __attribute__((alias("_Znwm")));

typedef struct {
    TdmModel *model;
    TdmOptimizer *opt;
    TdmTensor *x, *labels, *dlogits;
    TdmOpCache *loss_cache;
} Job;

/* "adaptive": AdaptiveAvgPool2d's bin-matrix GEMMs (5x5 of 14x14, as VGG's
 * 7x7 of a smaller map), else the zoo model `name`. */
static TdmModule *job_model(const char *name, GError **error)
{
    TdmModelConfig cfg = {1, 10, 28, {0}};
    if (strcmp(name, "adaptive") != 0) {
        return tdm_model_zoo_create(name, &cfg, error);
    }
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "conv", tdm_conv2d_new(1, 8, 3, 1, 1, TRUE));
    tdm_module_add_child(m, "relu", tdm_relu_new());
    tdm_module_add_child(m, "pool", tdm_maxpool2d_new(2, 2, 0));
    tdm_module_add_child(m, "avgpool", tdm_adaptive_avgpool2d_new(5, 5));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc", tdm_linear_new(8 * 5 * 5, 10, TRUE));
    return m;
}

static void job_init(Job *j, TdmDevice *dev, const char *name, int batch)
{
    GError *error = NULL;
    memset(j, 0, sizeof *j);
    j->model = test_model(job_model(name, &error), dev, 3);
    g_assert_no_error(error);
    TdmOptimizerOptions o;
    tdm_optimizer_options_init(&o);
    o.lr = 0.01f;
    o.momentum = 0.9f;
    o.weight_decay = 5e-4f;
    j->opt = tdm_optimizer_new("sgd", j->model, NULL, &o, &error);
    g_assert_no_error(error);
    int64_t xs[4] = {batch, 1, 28, 28}, ls[1] = {batch};
    g_autofree float *x = g_new(float, batch * 28 * 28);
    test_fill_uniform(x, batch * 28 * 28, 5, -1.0, 1.0);
    j->x = test_tensor_from(dev, 4, xs, x);
    g_autofree gint32 *labels = g_new(gint32, batch);
    for (int i = 0; i < batch; i++) {
        labels[i] = i % 10;
    }
    j->labels = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, ls, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_tensor_write(j->labels, labels, &error));
    j->dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    tdm_model_set_training(j->model, TRUE);
}

/* What the single strategy does for one batch. */
static float job_step(Job *j)
{
    GError *error = NULL;
    TdmTensor *logits = NULL;
    float loss = 0.0f;
    int64_t correct = 0;
    gboolean ok = tdm_model_forward(j->model, j->x, &logits, &error) &&
                  tdm_loss_cross_entropy(j->model->device, &j->loss_cache, logits, j->labels, 0.0f,
                                         &loss, j->dlogits, &correct, &error) &&
                  tdm_model_backward(j->model, j->dlogits, &error) &&
                  tdm_optimizer_step_zero_grad(j->opt, j->model, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    return loss;
}

static void job_clear(Job *j)
{
    tdm_op_cache_clear(j->model->device, &j->loss_cache);
    tdm_tensor_unref(j->x);
    tdm_tensor_unref(j->labels);
    tdm_tensor_unref(j->dlogits);
    tdm_optimizer_free(j->opt);
    tdm_model_free(j->model);
}
#endif /* HAVE_COUNTING */

static void check_steady(gconstpointer data)
{
#ifdef HAVE_COUNTING
    const char *const *spec = data; /* {device, model} */
    GError *error = NULL;
    TdmDevice *dev = tdm_device_get(spec[0], &error);
    if (dev == NULL) {
        g_test_skip(error->message);
        g_clear_error(&error);
        return;
    }
    Job j;
    job_init(&j, dev, spec[1], 32);
    float first = 0.0f, last = 0.0f;
    for (int i = 0; i < 3; i++) {
        float l = job_step(&j);
        first = i == 0 ? l : first;
    }
    g_assert_true(tdm_device_synchronize(dev, &error));
    __atomic_store_n(&counting, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++) {
        last = job_step(&j);
    }
    g_assert_true(tdm_device_synchronize(dev, &error));
    __atomic_store_n(&counting, 0, __ATOMIC_RELAXED);
    int n = g_atomic_int_get(&ours), rn = g_atomic_int_get(&runtime);
    int largest = g_atomic_int_get(&runtime_largest);
    g_atomic_int_set(&ours, 0);
    g_atomic_int_set(&runtime, 0);
    g_atomic_int_set(&runtime_largest, 0);
    g_test_message("%s on %s: loss %.4f -> %.4f; in 3 steady steps %d allocations by Tandem, "
                   "%d inside oneDNN/libgomp (the largest %d bytes)",
                   spec[1], spec[0], first, last, n, rn, largest);
    /* the steps did train (the same batch each time: the loss falls) */
    g_assert_cmpfloat(last, <, first);
    g_assert_cmpint(n, ==, 0);
    job_clear(&j);
#else
    (void)data;
    g_test_skip("allocation counting needs glibc (and no AddressSanitizer)");
#endif
}

/* The counter sees calls made while it counts, from any thread. */
static void check_counter(void)
{
#ifdef HAVE_COUNTING
    __atomic_store_n(&counting, 1, __ATOMIC_RELAXED);
    void *p = g_malloc(100), *q = NULL;
    g_assert_cmpint(posix_memalign(&q, 64, 256), ==, 0);
    __atomic_store_n(&counting, 0, __ATOMIC_RELAXED);
    g_free(p);
    free(q);
    g_assert_cmpint(g_atomic_int_get(&ours), ==, 2);
    g_assert_cmpint(g_atomic_int_get(&runtime), ==, 0);
    g_atomic_int_set(&ours, 0);
#else
    g_test_skip("allocation counting needs glibc (and no AddressSanitizer)");
#endif
}

/* Host-staged collectives reuse their buffers: with ref devices claiming
 * memory the host cannot reach (the TDM_REF_NOT_HOST test hook), shm
 * stages every call through host buffers, allocated in the first calls of
 * each size and never after. Work handles are small allocations of every
 * call: only buffers of LARGE_BYTES or more count here. */
static void check_staged_collectives(void)
{
#if defined(HAVE_COUNTING) && defined(TDM_ENABLE_TEST_HOOKS)
    GError *error = NULL;
    TdmDevice *dev = tdm_device_get("ref:0", &error);
    g_assert_no_error(error);
    g_setenv("TDM_REF_NOT_HOST", "1", TRUE);
    TdmDistEnv env = {.rank = 0, .world_size = 1, .local_world_size = 1, .source = "none"};
    TdmComm *comm = tdm_comm_new("shm", NULL, &env, dev, NULL, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_comm_is_staged(comm));
    const int64_t big = 100000, small = 30000;
    TdmTensor *a = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, &big, &error);
    TdmTensor *b = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, &small, &error);
    g_assert_no_error(error);
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            __atomic_store_n(&counting, 1, __ATOMIC_RELAXED);
        }
        for (int i = 0; i < 3; i++) {
            /* two in flight at once, as ddp's buckets are */
            TdmCommWork *wa = tdm_comm_allreduce_async(comm, a, TDM_REDUCE_SUM, &error);
            TdmCommWork *wb = tdm_comm_allreduce_async(comm, b, TDM_REDUCE_SUM, &error);
            g_assert_no_error(error);
            g_assert_true(tdm_comm_wait(comm, wa, &error));
            g_assert_true(tdm_comm_wait(comm, wb, &error));
            g_assert_true(tdm_comm_broadcast(comm, b, 0, &error));
        }
    }
    __atomic_store_n(&counting, 0, __ATOMIC_RELAXED);
    int large = g_atomic_int_get(&ours_large);
    g_atomic_int_set(&ours, 0);
    g_atomic_int_set(&ours_large, 0);
    g_atomic_int_set(&runtime, 0);
    g_test_message("staged collectives: %d buffers of %d bytes or more in 9 steady calls", large,
                   LARGE_BYTES);
    g_assert_cmpint(large, ==, 0);
    tdm_tensor_unref(a);
    tdm_tensor_unref(b);
    tdm_comm_free(comm);
    g_unsetenv("TDM_REF_NOT_HOST");
#elif !defined(HAVE_COUNTING)
    g_test_skip("allocation counting needs glibc (and no AddressSanitizer)");
#else
    g_test_skip("needs the test hook TDM_REF_NOT_HOST (configure --enable-test-hooks)");
#endif
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* ref: the core's own part of a step (modules, loss, optimizer) on
     * models whose ops ref runs without temporaries (its fused batch norm +
     * ReLU backward, in resnet8, allocates one: it is the plain oracle) */
    static const char *const cases[][2] = {
        {"cpu", "mlp"}, {"cpu", "lenet"}, {"cpu", "resnet8"},  {"cpu", "adaptive"},
        {"ref", "mlp"}, {"ref", "lenet"}, {"ref", "adaptive"},
    };
    g_test_add_func("/steady-alloc/counter", check_counter);
    g_test_add_func("/steady-alloc/staged-collectives", check_staged_collectives);
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = g_strdup_printf("/steady-alloc/%s/%s", cases[i][0], cases[i][1]);
        g_test_add_data_func(path, cases[i], check_steady);
    }
    return g_test_run();
}
