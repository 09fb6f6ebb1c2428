/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-backend.c - the oneDNN cpu backend: plugin, devices,
 * memory and the backend class table.
 *
 * This file holds the device state (engine, stream, shared scratchpad, a
 * caching allocator so that freed activation buffers are reused instead of
 * going back to the OS, whose page faults are expensive in this kind of VM)
 * and the class table. Each op entry point takes the device lock (ops share
 * the scratchpad) and, with TDM_CPU_PROFILE=1, a per-op timer printed when
 * the plugin is unloaded or the process exits.
 */
#include "config.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>

#include "cpu-tune.h"
#include "cpu.h"

/* Freed blocks kept for reuse, at most this many bytes. */
#define CPU_CACHE_LIMIT ((size_t)2 << 30)
/* Blocks from this size on are mapped and unmapped, not cached: see
 * cpu_alloc. */
#define CPU_MAP_MIN ((size_t)1 << 20)

/* ---- profiling ---- */

int cpu_profile_enabled;
static double profile_time[CPU_OP_N];
static guint64 profile_calls[CPU_OP_N];
static const char *const op_names[CPU_OP_N] = {
    "reorder",       "gemm",           "bias_grad",       "conv_fwd",        "conv_bwd_data",
    "conv_bwd_filter", "bn_fwd",       "bn_bwd",          "relu_fwd",        "relu_bwd",
    "add",           "maxpool_fwd",    "maxpool_bwd",     "avgpool_fwd",     "avgpool_bwd",
    "gap_fwd",       "gap_bwd",        "softmax_xent",    "dropout_fwd",     "dropout_bwd",
    "vector",        "optimizer",      "host_transfer",   "bn_relu_fwd",     "bn_relu_bwd",
    "add_relu",
};

double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cpu_profile_add(CpuOpKind kind, double seconds)
{
    profile_time[kind] += seconds;
    profile_calls[kind]++;
}

/* At exit: the kernel choices (listed with the profile, saved in
 * TDM_CPU_TUNE_CACHE) and the profile. */
__attribute__((destructor)) static void cpu_profile_report(void)
{
    cpu_tune_finish(cpu_profile_enabled, stderr);
    if (!cpu_profile_enabled) {
        return;
    }
    double total = 0;
    for (int i = 0; i < CPU_OP_N; i++) {
        total += profile_time[i];
    }
    fprintf(stderr, "# tandem cpu backend profile (TDM_CPU_PROFILE): %.3f s in ops\n", total);
    fprintf(stderr, "# %-16s %10s %12s %10s %6s\n", "op", "calls", "total ms", "avg us", "%");
    for (int i = 0; i < CPU_OP_N; i++) {
        if (profile_calls[i] == 0) {
            continue;
        }
        fprintf(stderr, "  %-16s %10" G_GUINT64_FORMAT " %12.2f %10.1f %6.1f\n", op_names[i],
                profile_calls[i], profile_time[i] * 1e3,
                profile_time[i] * 1e6 / (double)profile_calls[i],
                total > 0 ? 100.0 * profile_time[i] / total : 0.0);
    }
}

/* ---- devices ---- */

static int cpu_device_count(void)
{
    return 1;
}

static gboolean cpu_probe(gconstpointer klass, char **reason)
{
    if (dnnl_engine_get_count(dnnl_cpu) == 0) {
        if (reason != NULL) {
            *reason = g_strdup("oneDNN reports no cpu engine");
        }
        return FALSE;
    }
    return TRUE;
}

/* oneDNN generates its GEMM kernels (every matmul and inner product runs on
 * them) at the first GEMM call of the process: 15-20 ms on a 2-core
 * machine, a one-time initialisation of the library like the engine's. It
 * is done here, when the first cpu device opens, so that it does not land
 * in whichever op happens to multiply first (a training run's first step).
 * Calls on this thread, before the caller goes on; a thread of its own
 * would still be inside oneDNN if the program exited on an early error. */
static void gemm_kernels_init(void)
{
    static gsize done = 0;
    if (g_once_init_enter(&done)) {
        float a[8 * 8] = {0}, b[8 * 8] = {0}, c[8 * 8] = {0};
        static const char trans[4][2] = {{'N', 'N'}, {'N', 'T'}, {'T', 'N'}, {'T', 'T'}};
        for (int t = 0; t < 4; t++) {
            for (int beta = 0; beta < 2; beta++) {
                dnnl_sgemm(trans[t][0], trans[t][1], 8, 8, 8, 1.0f, a, 8, b, 8, (float)beta, c,
                           8);
            }
        }
        g_once_init_leave(&done, 1);
    }
}

static gboolean cpu_device_open(TdmDevice *dev, GError **error)
{
    CpuDevice *d = g_new0(CpuDevice, 1);
    if (!cpu_check(dnnl_engine_create(&d->engine, dnnl_cpu, 0), "engine creation", error)) {
        g_free(d);
        return FALSE;
    }
    if (!cpu_check(dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags),
                   "stream creation", error)) {
        dnnl_engine_destroy(d->engine);
        g_free(d);
        return FALSE;
    }
    g_mutex_init(&d->lock);
    g_mutex_init(&d->alloc_lock);
    d->layouts = g_ptr_array_new();
    d->free_blocks = g_hash_table_new(g_direct_hash, g_direct_equal);
    dev->priv = d;
    gemm_kernels_init();
    return TRUE;
}

static void free_block_list(gpointer key, gpointer value, gpointer user_data)
{
    for (GSList *l = value; l != NULL; l = l->next) {
        free(l->data);
    }
    g_slist_free(value);
}

static void cpu_device_close(TdmDevice *dev)
{
    CpuDevice *d = CPU_DEV(dev);
    if (d == NULL) {
        return;
    }
    for (guint i = 0; i < d->layouts->len; i++) {
        CpuLayout *l = g_ptr_array_index(d->layouts, i);
        if (l->to_plain != NULL) {
            dnnl_primitive_destroy(l->to_plain);
        }
        if (l->from_plain != NULL) {
            dnnl_primitive_destroy(l->from_plain);
        }
        g_free(l);
    }
    g_ptr_array_free(d->layouts, TRUE);
    g_hash_table_foreach(d->free_blocks, free_block_list, NULL);
    g_hash_table_destroy(d->free_blocks);
    free(d->scratch);
    for (int i = 0; i < CPU_TRANSIENT_N; i++) {
        free(d->transient[i]);
    }
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->engine);
    g_mutex_clear(&d->lock);
    g_mutex_clear(&d->alloc_lock);
    g_free(d);
    dev->priv = NULL;
}

static gboolean cpu_synchronize(TdmDevice *dev, GError **error)
{
    return cpu_check(dnnl_stream_wait(CPU_DEV(dev)->stream), "stream wait", error);
}

static void cpu_set_num_threads(TdmDevice *dev, int n)
{
    omp_set_num_threads(n > 0 ? n : omp_get_num_procs());
}

/* ---- memory ---- */

static size_t round_block(size_t nbytes)
{
    return (nbytes ? nbytes + CPU_ALIGN - 1 : CPU_ALIGN) / CPU_ALIGN * CPU_ALIGN;
}

static void *cpu_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    CpuDevice *d = CPU_DEV(dev);
    size_t n = round_block(nbytes);
    void *p = NULL;
    if (n >= CPU_MAP_MIN) {
        /* Large blocks come straight from the kernel and go back to it
         * when freed: a training step in its steady state allocates none
         * (its buffers are slots and pools), so caching them only kept
         * what the first steps freed (the gradient pool's recorded pass,
         * buffers of shapes seen once) resident for the rest of the run.
         * glibc would keep them too: its mmap threshold rises to the size
         * of the blocks it unmaps. Fresh pages are zero already. */
        p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                        "cpu backend: cannot allocate %zu bytes", nbytes);
            return NULL;
        }
        return p;
    }
    g_mutex_lock(&d->alloc_lock);
    GSList *list = g_hash_table_lookup(d->free_blocks, GSIZE_TO_POINTER(n));
    if (list != NULL) {
        p = list->data;
        g_hash_table_insert(d->free_blocks, GSIZE_TO_POINTER(n), g_slist_delete_link(list, list));
        d->cached_bytes -= n;
    }
    g_mutex_unlock(&d->alloc_lock);
    if (p == NULL) {
        p = aligned_alloc(CPU_ALIGN, n);
        if (p == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                        "cpu backend: cannot allocate %zu bytes", nbytes);
            return NULL;
        }
    }
    memset(p, 0, n);
    return p;
}

static void cpu_free(TdmDevice *dev, void *ptr, size_t nbytes)
{
    CpuDevice *d = CPU_DEV(dev);
    if (ptr == NULL) {
        return;
    }
    size_t n = round_block(nbytes);
    if (n >= CPU_MAP_MIN) {
        munmap(ptr, n);
        return;
    }
    g_mutex_lock(&d->alloc_lock);
    if (d->cached_bytes + n <= CPU_CACHE_LIMIT) {
        GSList *list = g_hash_table_lookup(d->free_blocks, GSIZE_TO_POINTER(n));
        g_hash_table_insert(d->free_blocks, GSIZE_TO_POINTER(n), g_slist_prepend(list, ptr));
        d->cached_bytes += n;
        ptr = NULL;
    }
    g_mutex_unlock(&d->alloc_lock);
    free(ptr);
}

static void *cpu_host_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    void *p = aligned_alloc(CPU_ALIGN, round_block(nbytes));
    if (p == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "cpu backend: cannot allocate %zu host bytes", nbytes);
    }
    return p;
}

static void cpu_host_free(TdmDevice *dev, void *ptr)
{
    free(ptr);
}

static gboolean cpu_copy_bytes(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error)
{
    if (n > 0 && dst != src) {
        memcpy(dst, src, n);
    }
    return TRUE;
}

static gboolean cpu_copy_h2d(TdmDevice *dev, void *dst, const void *src, size_t n, gboolean async,
                             GError **error)
{
    return cpu_copy_bytes(dev, dst, src, n, error);
}

static const char *cpu_layout_name(TdmDevice *dev, gconstpointer layout)
{
    return layout == NULL ? "plain" : ((const CpuLayout *)layout)->name;
}

/* ---- the class table: each op under the device lock, optionally timed ---- */

#define CPU_OP(kind, call)                                                                    \
    do {                                                                                      \
        CpuDevice *d_ = CPU_DEV(dev);                                                         \
        double t0_ = cpu_profile_enabled ? cpu_now() : 0.0;                                   \
        g_mutex_lock(&d_->lock);                                                              \
        gboolean ok_ = (call);                                                                \
        g_mutex_unlock(&d_->lock);                                                            \
        if (cpu_profile_enabled) {                                                            \
            cpu_profile_add((kind), cpu_now() - t0_);                                         \
        }                                                                                     \
        return ok_;                                                                           \
    } while (0)

static gboolean op_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error)
{
    CPU_OP(CPU_OP_HOST, cpu_read(dev, t, host, error));
}

static gboolean op_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error)
{
    CPU_OP(CPU_OP_HOST, cpu_write(dev, t, host, error));
}

static gboolean op_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src,
                           const TdmTensor *like, TdmTensor *dst, GError **error)
{
    CPU_OP(CPU_OP_REORDER, cpu_reorder(dev, cache, src, like, dst, error));
}

static void op_cache_free(TdmDevice *dev, TdmOpCache *cache)
{
    g_mutex_lock(&CPU_DEV(dev)->lock);
    cpu_cache_free(dev, cache);
    g_mutex_unlock(&CPU_DEV(dev)->lock);
}

static gboolean op_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean ta, gboolean tb, float alpha,
                        TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c, TdmTensor *bias,
                        GError **error)
{
    CPU_OP(CPU_OP_GEMM, cpu_gemm(dev, cache, ta, tb, alpha, a, b, beta, c, bias, error));
}

static gboolean op_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bg,
                             GError **error)
{
    CPU_OP(CPU_OP_BIAS_GRAD, cpu_bias_grad(dev, cache, dy, bg, error));
}

static gboolean op_conv_fwd(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                            GError **error)
{
    CPU_OP(CPU_OP_CONV_FWD, cpu_conv2d_forward(dev, cache, p, x, w, bias, FALSE, y, error));
}

static gboolean op_conv_relu_fwd(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                 TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                 GError **error)
{
    CPU_OP(CPU_OP_CONV_FWD, cpu_conv2d_forward(dev, cache, p, x, w, bias, TRUE, y, error));
}

static gboolean op_conv_bwd_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                 TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                 TdmTensor *dx, GError **error)
{
    CPU_OP(CPU_OP_CONV_BWD_DATA, cpu_conv2d_backward_data(dev, cache, p, dy, w, x_like, dx, error));
}

static gboolean op_conv_bwd_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                   TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                   GError **error)
{
    CPU_OP(CPU_OP_CONV_BWD_FILTER, cpu_conv2d_backward_filter(dev, cache, p, x, dy, dw, db, error));
}

static gboolean op_bn_fwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                          TdmTensor *beta, TdmTensor *rm, TdmTensor *rv, float momentum, float eps,
                          gboolean training, TdmTensor *sm, TdmTensor *sv, TdmTensor *y,
                          GError **error)
{
    CPU_OP(CPU_OP_BN_FWD, cpu_batchnorm_forward(dev, cache, x, gamma, beta, rm, rv, momentum, eps,
                                                training, sm, sv, y, error));
}

static gboolean op_bn_bwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                          TdmTensor *gamma, TdmTensor *sm, TdmTensor *sv, float eps, TdmTensor *dx,
                          TdmTensor *dgamma, TdmTensor *dbeta, GError **error)
{
    CPU_OP(CPU_OP_BN_BWD, cpu_batchnorm_backward(dev, cache, x, dy, gamma, sm, sv, eps, dx, dgamma,
                                                 dbeta, error));
}

static gboolean op_bn_relu_fwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                               TdmTensor *gamma, TdmTensor *beta, TdmTensor *rm, TdmTensor *rv,
                               float momentum, float eps, gboolean training, TdmTensor *sm,
                               TdmTensor *sv, TdmTensor *ws, TdmTensor *y, GError **error)
{
    CPU_OP(CPU_OP_BN_RELU_FWD, cpu_batchnorm_relu_forward(dev, cache, x, gamma, beta, rm, rv,
                                                          momentum, eps, training, sm, sv, ws, y,
                                                          error));
}

static gboolean op_bn_relu_bwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                               TdmTensor *ws, TdmTensor *dy, TdmTensor *gamma, TdmTensor *sm,
                               TdmTensor *sv, float eps, TdmTensor *dx, TdmTensor *dgamma,
                               TdmTensor *dbeta, GError **error)
{
    CPU_OP(CPU_OP_BN_RELU_BWD, cpu_batchnorm_relu_backward(dev, cache, x, y, ws, dy, gamma, sm, sv,
                                                           eps, dx, dgamma, dbeta, error));
}

/* The same without y: the cpu backend takes the mask from the workspace
 * in any case (oneDNN's bit mask or the own loops'). */
static gboolean op_bn_relu_bwd_ws(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *ws,
                                  TdmTensor *dy, TdmTensor *gamma, TdmTensor *sm, TdmTensor *sv,
                                  float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                  GError **error)
{
    CPU_OP(CPU_OP_BN_RELU_BWD, cpu_batchnorm_relu_backward(dev, cache, x, NULL, ws, dy, gamma, sm,
                                                           sv, eps, dx, dgamma, dbeta, error));
}

static gboolean op_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                            TdmTensor *y, GError **error)
{
    CPU_OP(CPU_OP_ADD_RELU, cpu_add_relu(dev, cache, a, b, y, error));
}

static gboolean op_relu_fwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                            GError **error)
{
    CPU_OP(CPU_OP_RELU_FWD, cpu_relu_forward(dev, cache, x, y, error));
}

static gboolean op_relu_bwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                            TdmTensor *dx, GError **error)
{
    CPU_OP(CPU_OP_RELU_BWD, cpu_relu_backward(dev, cache, y, dy, dx, error));
}

static gboolean op_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                       TdmTensor *y, GError **error)
{
    CPU_OP(CPU_OP_ADD, cpu_add(dev, cache, a, b, y, error));
}

static gboolean op_maxpool_fwd(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, TdmTensor *ws, GError **error)
{
    CPU_OP(CPU_OP_MAXPOOL_FWD, cpu_maxpool2d_forward(dev, cache, p, x, y, ws, error));
}

static gboolean op_maxpool_bwd(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *dy, TdmTensor *ws, const TdmTensor *x_like,
                               TdmTensor *dx, GError **error)
{
    CPU_OP(CPU_OP_MAXPOOL_BWD, cpu_maxpool2d_backward(dev, cache, p, dy, ws, x_like, dx, error));
}

static gboolean op_avgpool_fwd(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, GError **error)
{
    CPU_OP(CPU_OP_AVGPOOL_FWD, cpu_avgpool2d_forward(dev, cache, p, x, y, error));
}

static gboolean op_avgpool_bwd(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                               GError **error)
{
    CPU_OP(CPU_OP_AVGPOOL_BWD, cpu_avgpool2d_backward(dev, cache, p, dy, x_like, dx, error));
}

static gboolean op_gap_fwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                           GError **error)
{
    CPU_OP(CPU_OP_GAP_FWD, cpu_global_avgpool_forward(dev, cache, x, y, error));
}

static gboolean op_gap_bwd(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                           const TdmTensor *x_like, TdmTensor *dx, GError **error)
{
    CPU_OP(CPU_OP_GAP_BWD, cpu_global_avgpool_backward(dev, cache, dy, x_like, dx, error));
}

static gboolean op_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits, TdmTensor *labels,
                        float ls, float *loss, TdmTensor *dlogits, int64_t *correct, GError **error)
{
    CPU_OP(CPU_OP_XENT,
           cpu_softmax_xent(dev, cache, logits, labels, ls, loss, dlogits, correct, error));
}

static gboolean op_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                              TdmTensor *labels, float ls, TdmTensor *dlogits, TdmTensor *stats,
                              GError **error)
{
    CPU_OP(CPU_OP_XENT,
           cpu_softmax_xent_stats(dev, cache, logits, labels, ls, dlogits, stats, error));
}

static gboolean op_dropout_fwd(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                               TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error)
{
    CPU_OP(CPU_OP_DROPOUT_FWD, cpu_dropout_forward(dev, cache, p, seed, x, mask, y, error));
}

static gboolean op_dropout_bwd(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                               TdmTensor *dy, TdmTensor *dx, GError **error)
{
    CPU_OP(CPU_OP_DROPOUT_BWD, cpu_dropout_backward(dev, cache, p, mask, dy, dx, error));
}

static gboolean op_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error)
{
    CPU_OP(CPU_OP_VECTOR, cpu_fill(dev, x, value, error));
}

static gboolean op_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error)
{
    CPU_OP(CPU_OP_VECTOR, cpu_copy(dev, src, dst, error));
}

static gboolean op_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error)
{
    CPU_OP(CPU_OP_VECTOR, cpu_scale(dev, x, alpha, error));
}

static gboolean op_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    CPU_OP(CPU_OP_VECTOR, cpu_axpy(dev, alpha, x, y, error));
}

static gboolean op_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    CPU_OP(CPU_OP_VECTOR, cpu_sum_squares(dev, x, result, error));
}

static gboolean op_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                        GError **error)
{
    CPU_OP(CPU_OP_VECTOR, cpu_cast(dev, src, dst, normalize_u8, error));
}

static gboolean op_sgd(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                       TdmTensor *buf, GError **error)
{
    CPU_OP(CPU_OP_OPTIM, cpu_sgd_update(dev, hp, param, grad, buf, FALSE, error));
}

static gboolean op_sgd_zero(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                            TdmTensor *grad, TdmTensor *buf, GError **error)
{
    CPU_OP(CPU_OP_OPTIM, cpu_sgd_update(dev, hp, param, grad, buf, TRUE, error));
}

static gboolean op_adamw(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                         TdmTensor *grad, TdmTensor *m, TdmTensor *v, GError **error)
{
    CPU_OP(CPU_OP_OPTIM, cpu_adamw_update(dev, hp, param, grad, m, v, FALSE, error));
}

static gboolean op_adamw_zero(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                              TdmTensor *grad, TdmTensor *m, TdmTensor *v, GError **error)
{
    CPU_OP(CPU_OP_OPTIM, cpu_adamw_update(dev, hp, param, grad, m, v, TRUE, error));
}

static const TdmBackendClass cpu_backend_class = {
    TDM_CLASS_HEADER(TDM_BACKEND_IFACE_VERSION, TdmBackendClass),
    .device_type = "cpu",
    .device_count = cpu_device_count,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .synchronize = cpu_synchronize,
    .set_num_threads = cpu_set_num_threads,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .copy_h2d = cpu_copy_h2d,
    .copy_d2h = cpu_copy_bytes,
    .copy_d2d = cpu_copy_bytes,
    .read = op_read,
    .write = op_write,
    .reorder = op_reorder,
    .layout_name = cpu_layout_name,
    .cache_free = op_cache_free,
    .gemm = op_gemm,
    .bias_grad = op_bias_grad,
    .conv2d_forward = op_conv_fwd,
    .conv2d_backward_data = op_conv_bwd_data,
    .conv2d_backward_filter = op_conv_bwd_filter,
    .batchnorm_forward = op_bn_fwd,
    .batchnorm_backward = op_bn_bwd,
    .relu_forward = op_relu_fwd,
    .relu_backward = op_relu_bwd,
    .add = op_add,
    .maxpool2d_forward = op_maxpool_fwd,
    .maxpool2d_backward = op_maxpool_bwd,
    .avgpool2d_forward = op_avgpool_fwd,
    .avgpool2d_backward = op_avgpool_bwd,
    .global_avgpool_forward = op_gap_fwd,
    .global_avgpool_backward = op_gap_bwd,
    .softmax_xent = op_xent,
    .dropout_forward = op_dropout_fwd,
    .dropout_backward = op_dropout_bwd,
    .fill = op_fill,
    .copy = op_copy,
    .scale = op_scale,
    .axpy = op_axpy,
    .sum_squares = op_sum_squares,
    .cast = op_cast,
    .sgd_update = op_sgd,
    .adamw_update = op_adamw,
    .batchnorm_relu_forward = op_bn_relu_fwd,
    .batchnorm_relu_backward = op_bn_relu_bwd,
    .add_relu = op_add_relu,
    .sgd_update_zero_grad = op_sgd_zero,
    .adamw_update_zero_grad = op_adamw_zero,
    .conv2d_relu_forward = op_conv_relu_fwd,
    .stream_ops = &cpu_stream_ops,
    .device_info = cpu_device_info,
    .softmax_xent_stats = op_xent_stats,
    .batchnorm_relu_backward_ws = op_bn_relu_bwd_ws,
};

static gboolean cpu_plugin_init(TdmPlugin *plugin, GError **error)
{
    const char *prof = g_getenv("TDM_CPU_PROFILE");
    cpu_profile_enabled = prof != NULL && prof[0] != '\0' && strcmp(prof, "0") != 0;
    return tdm_plugin_add_feature(plugin, TDM_FEATURE_BACKEND, "cpu", 50, &cpu_backend_class,
                                  "oneDNN cpu backend: blocked layouts, OpenMP", NULL, cpu_probe,
                                  error) != NULL;
}

TDM_PLUGIN_DEFINE(cpu, "MIT", "oneDNN (libdnnl) cpu backend with OpenMP",
                  "tandem", cpu_plugin_init)
