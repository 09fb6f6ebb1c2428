/* plugins/cpu/cpu-conv.c - 2-D convolution on oneDNN: forward (bias fused),
 * backward data and backward weights.
 *
 * Activations stay in whatever layout oneDNN picks (format `any`, blocked
 * nChw16c on AVX-512), except a plain input with very few channels (a
 * network's first layer), which the direct kernels read as it is, sparing a
 * reorder that would pad 1 channel to 16. Weights and their gradients stay
 * plain: they live in the model's arenas, which the optimizer, collectives
 * and checkpoints read directly. So each forward and each backward-data
 * reorders the current plain weights into the primitive's layout (weights
 * change every step; the buffer is kept in the op cache), and backward
 * weights computes into a cached buffer in its own layout, then reorders it
 * into the plain gradient with a sum post-op (dw += ...). Bias gradients are
 * computed by the same primitive and added with a loop.
 *
 * Three cases run on the backend's own loops instead (cpu-conv-own.h),
 * where oneDNN 2.6's kernels were measured slow: an image input (plain, at
 * most CPU_STEM_MAX_C channels: forward and backward weights, into and from
 * the blocked layout oneDNN would have used), backward weights with input
 * and output gradient both in nChw8c (AVX2 machines), and 3x3 stride-1
 * convolutions between nChw8c tensors (Winograd F(4x4, 3x3): forward,
 * backward data and backward weights). Where an op has an output, oneDNN's
 * primitive descriptor is still made first: it names the output's layout.
 */
#include "config.h"

#include <string.h>

#include "cpu-conv-own.h"

/* Inputs with at most this many channels are read in plain layout. */
#define CPU_CONV_PLAIN_MAX_C 4

typedef struct {
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    int64_t y_shape[4];
    int groups;
} ConvGeom;

static gboolean conv_geom(const TdmConv2dParams *p, const int64_t *x, const int64_t *w,
                          ConvGeom *g, GError **error)
{
    int groups = p->groups > 0 ? p->groups : 1;
    int dh = p->dilation_h > 0 ? p->dilation_h : 1, dw = p->dilation_w > 0 ? p->dilation_w : 1;
    int64_t kh = (w[2] - 1) * dh + 1, kw = (w[3] - 1) * dw + 1;
    int64_t oh = p->stride_h > 0 ? (x[2] + 2 * p->pad_h - kh) / p->stride_h + 1 : 0;
    int64_t ow = p->stride_w > 0 ? (x[3] + 2 * p->pad_w - kw) / p->stride_w + 1 : 0;
    if (x[1] != w[1] * groups || w[0] % groups != 0 || oh <= 0 || ow <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu conv2d: input [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT "] does not fit weights [%" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                    "] (groups %d, stride %d, pad %d)",
                    x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], groups, p->stride_h, p->pad_h);
        return FALSE;
    }
    g->groups = groups;
    g->strides[0] = p->stride_h;
    g->strides[1] = p->stride_w;
    g->dilates[0] = dh - 1;
    g->dilates[1] = dw - 1;
    g->pad_l[0] = p->pad_h;
    g->pad_l[1] = p->pad_w;
    g->pad_r[0] = MAX(0, (oh - 1) * p->stride_h + kh - x[2] - p->pad_h);
    g->pad_r[1] = MAX(0, (ow - 1) * p->stride_w + kw - x[3] - p->pad_w);
    g->y_shape[0] = x[0];
    g->y_shape[1] = w[0];
    g->y_shape[2] = oh;
    g->y_shape[3] = ow;
    return TRUE;
}

static void key_add_params(CpuKey *k, const TdmConv2dParams *p)
{
    cpu_key_add(k, p->stride_h);
    cpu_key_add(k, p->stride_w);
    cpu_key_add(k, p->pad_h);
    cpu_key_add(k, p->pad_w);
    cpu_key_add(k, p->dilation_h);
    cpu_key_add(k, p->dilation_w);
    cpu_key_add(k, p->groups);
}

static gboolean check_4d(const TdmTensor *t, const char *what, GError **error)
{
    if (t == NULL || t->ndim != 4 || t->dtype != TDM_DTYPE_F32) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "cpu conv2d: %s must be a 4-D f32 tensor",
                    what);
        return FALSE;
    }
    return TRUE;
}

/* The source (or diff source) desc the primitive is created with. */
static gboolean conv_src_md(const TdmTensor *x, const int64_t *shape, dnnl_memory_desc_t *md,
                            GError **error)
{
    if (x->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)x->layout;
        return TRUE;
    }
    if (shape[1] <= CPU_CONV_PLAIN_MAX_C) {
        return cpu_tensor_md(x, md, error);
    }
    dnnl_dims_t d = {shape[0], shape[1], shape[2], shape[3]};
    return cpu_check(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any),
                     "conv source desc", error);
}

/* The destination (or diff destination) desc: the gradient's own layout
 * when it has one, else whatever the primitive prefers. */
static gboolean conv_dst_md(const TdmTensor *dy, const int64_t *shape, dnnl_memory_desc_t *md,
                            GError **error)
{
    if (dy != NULL && dy->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)dy->layout;
        return TRUE;
    }
    dnnl_dims_t d = {shape[0], shape[1], shape[2], shape[3]};
    return cpu_check(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any),
                     "conv destination desc", error);
}

/* Weights: plain [O, C/g, KH, KW] seen as [g, O/g, C/g, KH, KW] for groups. */
static gboolean conv_weights_md(const TdmTensor *w, int groups, gboolean any,
                                dnnl_memory_desc_t *md, GError **error)
{
    if (groups == 1) {
        if (any) {
            dnnl_dims_t d = {w->shape[0], w->shape[1], w->shape[2], w->shape[3]};
            return cpu_check(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any),
                             "weights desc", error);
        }
        return cpu_tensor_md(w, md, error);
    }
    dnnl_dims_t d = {groups, w->shape[0] / groups, w->shape[1], w->shape[2], w->shape[3]};
    return cpu_check(dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_f32,
                                                  any ? dnnl_format_tag_any : dnnl_goihw),
                     "weights desc", error);
}

static gboolean bias_md(const TdmTensor *b, int64_t n, dnnl_memory_desc_t *md, GError **error)
{
    if (b->ndim != 1 || b->shape[0] != n || b->dtype != TDM_DTYPE_F32 || b->layout != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu conv2d: bias must be plain f32 [%" G_GINT64_FORMAT "]", n);
        return FALSE;
    }
    return cpu_tensor_md(b, md, error);
}

/* TDM_CPU_CONV_ALG=auto lets oneDNN pick Winograd where it judges it
 * faster (experiments only; direct is the default). */
static dnnl_alg_kind_t conv_alg(void)
{
    static int alg = -1;
    if (alg < 0) {
        const char *s = g_getenv("TDM_CPU_CONV_ALG");
        alg = s != NULL && strcmp(s, "auto") == 0;
    }
    return alg ? dnnl_convolution_auto : dnnl_convolution_direct;
}

/* oneDNN falls back to its slow reference kernels when it has no optimised
 * one for a combination of layouts (a padded blocked input with few
 * channels, say); the ops then retry with every activation layout `any`. */
/* The own loops (cpu-conv-own.h) are used unless their variable is "0"
 * (TDM_CPU_STEM, TDM_CPU_BWF8, TDM_CPU_WINO: to compare with oneDNN's kernels). */
static gboolean own_enabled(const char *var, int *cached)
{
    if (*cached < 0) {
        const char *s = g_getenv(var);
        *cached = s == NULL || strcmp(s, "0") != 0;
    }
    return *cached;
}

static gboolean stem_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_STEM", &enabled);
}

static gboolean bwf8_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_BWF8", &enabled);
}

static gboolean wino_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_WINO", &enabled);
}

/* aux[0] of a convolution entry: the index of its oneDNN primitive, or
 * (negative) which of the own loops run the op. */
enum { OWN_STEM = -1, OWN_BWF8 = -2, OWN_WINO = -3 };

/* Whether the Winograd loops (cpu-conv-wino.c) took an op being set up. */
typedef enum { WINO_NO, WINO_TAKEN, WINO_FAILED } WinoTake;

/* Hands the op to the Winograd loops when they compute pass from layout
 * inmd into (or, for the weights, with) outmd: marks the entry OWN_WINO,
 * keeps the geometry, grows the device's scratchpad for their work, gives
 * the output layout outmd (forward and backward data) and puts the entry in
 * the cache. pd, when not NULL (it names outmd), is destroyed once
 * the loops take the op. The weights (or their gradient) must be plain, as
 * the model keeps them. */
static WinoTake wino_take(TdmDevice *dev, TdmOpCache **cache, CpuEntry *e,
                          dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *inmd,
                          const dnnl_memory_desc_t *outmd, const TdmTensor *w,
                          const TdmConv2dParams *p, CpuWinoPass pass, GError **error)
{
    CpuWinoGeom wg;
    if (!wino_enabled() || w->layout != NULL || !tdm_tensor_is_contiguous(w) ||
        !cpu_wino_geom(inmd, outmd, w->shape, p, pass, &wg)) {
        return WINO_NO;
    }
    e->aux[0] = OWN_WINO;
    e->work[1] = cpu_entry_buf(e, sizeof wg);
    gboolean ok = e->work[1] != NULL;
    if (!ok) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "cpu conv2d: out of memory");
    } else {
        memcpy(e->work[1], &wg, sizeof wg);
        ok = cpu_scratch_reserve(dev, cpu_wino_work_bytes(&wg), error);
    }
    if (ok) {
        if (pass != CPU_WINO_BACKWARD_WEIGHTS) {
            cpu_entry_set_output(dev, e, 0, outmd, TDM_DTYPE_F32);
        }
        cpu_cache_insert(cache, e);
    }
    if (pd != NULL) {
        dnnl_primitive_desc_destroy(pd);
    }
    return ok ? WINO_TAKEN : WINO_FAILED;
}

static gboolean pd_is_reference(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           impl != NULL && strncmp(impl, "ref", 3) == 0;
}

static gboolean md_any(const dnnl_memory_desc_t *like, dnnl_memory_desc_t *md, GError **error)
{
    return cpu_check(dnnl_memory_desc_init_by_tag(md, like->ndims, like->dims, dnnl_f32,
                                                  dnnl_format_tag_any),
                     "conv desc", error);
}

/* relu: a ReLU post-op (conv2d_relu_forward); only the forward op asks. */
static gboolean fwd_pd_ex(TdmDevice *dev, const ConvGeom *g, const dnnl_memory_desc_t *src,
                          const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias,
                          const dnnl_memory_desc_t *dst, gboolean relu, dnnl_primitive_desc_t *pd,
                          GError **error)
{
    dnnl_convolution_desc_t cd;
    if (!cpu_check(dnnl_dilated_convolution_forward_desc_init(
                       &cd, dnnl_forward_training, conv_alg(), src, wei, bias, dst,
                       g->strides, g->dilates, g->pad_l, g->pad_r),
                   "convolution forward desc", error)) {
        return FALSE;
    }
    dnnl_primitive_attr_t attr = cpu_attr_new(0.0f, 1.0f);
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_success;
    if (relu && (s = dnnl_post_ops_create(&po)) == dnnl_success &&
        (s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f)) ==
            dnnl_success) {
        s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (po != NULL) {
        dnnl_post_ops_destroy(po);
    }
    if (s == dnnl_success) {
        s = dnnl_primitive_desc_create(pd, &cd, attr, CPU_DEV(dev)->engine, NULL);
    }
    dnnl_primitive_attr_destroy(attr);
    return cpu_check(s, relu ? "convolution forward with ReLU" : "convolution forward", error);
}

static gboolean fwd_pd(TdmDevice *dev, const ConvGeom *g, const dnnl_memory_desc_t *src,
                       const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias,
                       const dnnl_memory_desc_t *dst, dnnl_primitive_desc_t *pd, GError **error)
{
    return fwd_pd_ex(dev, g, src, wei, bias, dst, FALSE, pd, error);
}

/* The output-gradient layout the stem's backward weights reads: dy's own
 * layout, or for a plain dy the layout the forward would have written. */
static gboolean stem_dy_md(TdmDevice *dev, const ConvGeom *g, const TdmTensor *dy,
                           const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                           dnnl_memory_desc_t *md)
{
    if (dy->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)dy->layout;
        return TRUE;
    }
    dnnl_memory_desc_t any;
    dnnl_primitive_desc_t pd = NULL;
    if (!conv_dst_md(NULL, g->y_shape, &any, NULL) ||
        !fwd_pd(dev, g, src, wei, NULL, &any, &pd, NULL)) {
        return FALSE;
    }
    *md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_primitive_desc_destroy(pd);
    return TRUE;
}

gboolean cpu_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                            TdmTensor *y, GError **error)
{
    ConvGeom g;
    if (!check_4d(x, "input", error) || !check_4d(w, "weight", error) ||
        !conv_geom(p, x->shape, w->shape, &g, error)) {
        return FALSE;
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_CONV_FWD);
    key_add_params(&key, p);
    cpu_key_add_tensor(&key, x);
    cpu_key_add_tensor(&key, w);
    cpu_key_add_tensor(&key, bias);
    cpu_key_add(&key, relu);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_CONV_FWD, &key);
    if (e == NULL) {
        e = cpu_entry_new(CPU_OP_CONV_FWD, &key);
        dnnl_memory_desc_t src, wei, wplain, bmd, dst, xmd;
        dnnl_primitive_desc_t pd = NULL;
        if (!conv_src_md(x, x->shape, &src, error) || !conv_weights_md(w, g.groups, TRUE, &wei, error) ||
            !conv_weights_md(w, g.groups, FALSE, &wplain, error) ||
            (bias != NULL && !bias_md(bias, w->shape[0], &bmd, error)) ||
            !conv_dst_md(NULL, g.y_shape, &dst, error) || !cpu_tensor_md(x, &xmd, error) ||
            !fwd_pd_ex(dev, &g, &src, &wei, bias ? &bmd : NULL, &dst, relu, &pd, error)) {
            goto fail;
        }
        if (pd_is_reference(pd) && src.format_kind != dnnl_format_kind_any) {
            dnnl_primitive_desc_t pd2 = NULL;
            if (md_any(&src, &src, error) &&
                fwd_pd_ex(dev, &g, &src, &wei, bias ? &bmd : NULL, &dst, relu, &pd2, NULL)) {
                dnnl_primitive_desc_destroy(pd);
                pd = pd2;
            }
        }
        const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        const dnnl_memory_desc_t *pwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        const WinoTake wt =
            wino_take(dev, cache, e, pd, &xmd, pdst, w, p, CPU_WINO_FORWARD, error);
        if (wt == WINO_TAKEN) {
            goto run;
        }
        if (wt == WINO_FAILED) {
            goto fail;
        }
        CpuStemGeom sg;
        if (stem_enabled() && cpu_stem_geom(x, w, p, pdst, &sg)) {
            /* the own loops, into the layout oneDNN would have written */
            e->aux[0] = OWN_STEM;
            e->work[0] = cpu_entry_buf(e, cpu_stem_work_bytes(&sg, FALSE));
            e->work[1] = cpu_entry_buf(e, sizeof sg);
            cpu_entry_set_output(dev, e, 0, pdst, TDM_DTYPE_F32);
            dnnl_primitive_desc_destroy(pd);
            if (e->work[0] != NULL && e->work[1] != NULL) {
                memcpy(e->work[1], &sg, sizeof sg);
            } else {
                g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                            "cpu conv2d: cannot allocate the stem convolution's work buffer");
                goto fail;
            }
            cpu_cache_insert(cache, e);
            goto run;
        }
        int prim;
        gboolean ok = cpu_convert_init(dev, e, &e->conv[0], &xmd, psrc, error) &&
                      cpu_convert_init(dev, e, &e->conv[1], &wplain, pwei, error) &&
                      cpu_prim_create(dev, e, pd, &prim, error);
        if (ok) {
            e->aux[0] = prim;
            e->aux[1] = cpu_entry_mem(dev, e, psrc);
            e->aux[2] = cpu_entry_mem(dev, e, pwei);
            e->aux[3] = bias != NULL ? cpu_entry_mem(dev, e, &bmd) : -1;
            e->aux[4] = cpu_entry_mem(dev, e, pdst);
            cpu_entry_set_output(dev, e, 0, pdst, TDM_DTYPE_F32);
        }
        dnnl_primitive_desc_destroy(pd);
        if (!ok) {
            goto fail;
        }
        cpu_cache_insert(cache, e);
    }
run:
    if (e->aux[0] == OWN_WINO) {
        gboolean ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
        if (ok) {
            cpu_wino_run(e->work[1], tdm_tensor_data(x), tdm_tensor_data(w),
                         bias != NULL ? tdm_tensor_data(bias) : NULL, relu, tdm_tensor_data(y),
                         CPU_DEV(dev)->scratch);
        }
        cpu_entry_release(cache, e);
        return ok;
    }
    if (e->aux[0] == OWN_STEM) {
        gboolean ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
        if (ok) {
            cpu_stem_forward(e->work[1], tdm_tensor_data(x), tdm_tensor_data(w),
                             bias != NULL ? tdm_tensor_data(bias) : NULL, relu,
                             tdm_tensor_data(y), e->work[0]);
        }
        cpu_entry_release(cache, e);
        return ok;
    }
    void *xs = cpu_convert_run(dev, e, &e->conv[0], tdm_tensor_data(x), error);
    void *ws = xs ? cpu_convert_run(dev, e, &e->conv[1], tdm_tensor_data(w), error) : NULL;
    gboolean ok = ws != NULL && cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
    if (ok) {
        dnnl_exec_arg_t args[6];
        int n = 0;
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, (int)e->aux[1], xs)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, cpu_mem(e, (int)e->aux[2], ws)};
        if (e->aux[3] >= 0) {
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, cpu_mem(e, (int)e->aux[3], tdm_tensor_data(bias))};
        }
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, cpu_mem(e, (int)e->aux[4], tdm_tensor_data(y))};
        ok = cpu_run(dev, e, (int)e->aux[0], n, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
fail:
    cpu_entry_free(e);
    return FALSE;
}

gboolean cpu_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                  TdmTensor *dx, GError **error)
{
    ConvGeom g;
    if (!check_4d(dy, "output gradient", error) || !check_4d(w, "weight", error) ||
        !check_4d(x_like, "input", error) || !conv_geom(p, x_like->shape, w->shape, &g, error)) {
        return FALSE;
    }
    if (!tdm_tensor_same_shape(dy, &(TdmTensor){.ndim = 4, .shape = {g.y_shape[0], g.y_shape[1],
                                                                     g.y_shape[2], g.y_shape[3]}})) {
        g_autofree char *s = tdm_tensor_shape_string(dy);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu conv2d backward: output gradient %s, expected [%" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                    s, g.y_shape[0], g.y_shape[1], g.y_shape[2], g.y_shape[3]);
        return FALSE;
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_CONV_BWD_DATA);
    key_add_params(&key, p);
    cpu_key_add_tensor(&key, dy);
    cpu_key_add_tensor(&key, w);
    cpu_key_add_tensor(&key, x_like);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_CONV_BWD_DATA, &key);
    if (e == NULL) {
        e = cpu_entry_new(CPU_OP_CONV_BWD_DATA, &key);
        dnnl_memory_desc_t src, wei, wplain, dst, dymd;
        dnnl_primitive_desc_t fpd = NULL, pd = NULL;
        dnnl_convolution_desc_t cd;
        if (!conv_src_md(x_like, x_like->shape, &src, error) ||
            !conv_weights_md(w, g.groups, TRUE, &wei, error) ||
            !conv_weights_md(w, g.groups, FALSE, &wplain, error) ||
            !conv_dst_md(dy, g.y_shape, &dst, error) || !cpu_tensor_md(dy, &dymd, error)) {
            goto fail;
        }
        gboolean ok = FALSE;
        GError *first = NULL;
        for (int attempt = 0; attempt < 2 && !ok; attempt++) {
            if (attempt == 1 && (!md_any(&src, &src, NULL) || !md_any(&dst, &dst, NULL))) {
                break;
            }
            GError **err = attempt == 0 ? &first : NULL;
            dnnl_primitive_attr_t attr = cpu_attr_new(0.0f, 1.0f);
            dnnl_primitive_desc_t cand = NULL;
            ok = fwd_pd(dev, &g, &src, &wei, NULL, &dst, &fpd, err) &&
                 cpu_check(dnnl_dilated_convolution_backward_data_desc_init(
                               &cd, conv_alg(), &src, &wei, &dst, g.strides,
                               g.dilates, g.pad_l, g.pad_r),
                           "convolution backward data desc", err) &&
                 cpu_check(dnnl_primitive_desc_create(&cand, &cd, attr, CPU_DEV(dev)->engine, fpd),
                           "convolution backward data", err);
            dnnl_primitive_attr_destroy(attr);
            if (fpd != NULL) {
                dnnl_primitive_desc_destroy(fpd);
                fpd = NULL;
            }
            if (ok) {
                if (pd != NULL) {
                    dnnl_primitive_desc_destroy(pd);
                }
                pd = cand;
                /* keep the first success unless it is the slow reference */
                ok = !pd_is_reference(pd) || attempt == 1;
            }
        }
        if (pd == NULL) {
            g_propagate_error(error, first);
            goto fail;
        }
        g_clear_error(&first);
        const dnnl_memory_desc_t *pdsrc = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
        const dnnl_memory_desc_t *pwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t *pddst = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
        const WinoTake wt = wino_take(dev, cache, e, pd, &dymd, pdsrc, w, p,
                                      CPU_WINO_BACKWARD_DATA, error);
        if (wt == WINO_TAKEN) {
            goto run;
        }
        if (wt == WINO_FAILED) {
            goto fail;
        }
        int prim;
        ok = cpu_convert_init(dev, e, &e->conv[0], &dymd, pddst, error) &&
             cpu_convert_init(dev, e, &e->conv[1], &wplain, pwei, error) &&
             cpu_prim_create(dev, e, pd, &prim, error);
        if (ok) {
            e->aux[0] = prim;
            e->aux[1] = cpu_entry_mem(dev, e, pddst);
            e->aux[2] = cpu_entry_mem(dev, e, pwei);
            e->aux[3] = cpu_entry_mem(dev, e, pdsrc);
            cpu_entry_set_output(dev, e, 0, pdsrc, TDM_DTYPE_F32);
        }
        dnnl_primitive_desc_destroy(pd);
        if (!ok) {
            goto fail;
        }
        cpu_cache_insert(cache, e);
    }
run:
    if (e->aux[0] == OWN_WINO) {
        gboolean ok = cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
        if (ok) {
            cpu_wino_run(e->work[1], tdm_tensor_data(dy), tdm_tensor_data(w), NULL, FALSE,
                         tdm_tensor_data(dx), CPU_DEV(dev)->scratch);
        }
        cpu_entry_release(cache, e);
        return ok;
    }
    void *dys = cpu_convert_run(dev, e, &e->conv[0], tdm_tensor_data(dy), error);
    void *ws = dys ? cpu_convert_run(dev, e, &e->conv[1], tdm_tensor_data(w), error) : NULL;
    gboolean ok = ws != NULL && cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
    if (ok) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_DIFF_DST, cpu_mem(e, (int)e->aux[1], dys)},
            {DNNL_ARG_WEIGHTS, cpu_mem(e, (int)e->aux[2], ws)},
            {DNNL_ARG_DIFF_SRC, cpu_mem(e, (int)e->aux[3], tdm_tensor_data(dx))},
        };
        ok = cpu_run(dev, e, (int)e->aux[0], 3, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
fail:
    cpu_entry_free(e);
    return FALSE;
}

gboolean cpu_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                    GError **error)
{
    ConvGeom g;
    if (!check_4d(x, "input", error) || !check_4d(dy, "output gradient", error) ||
        !check_4d(dw, "weight gradient", error) || !conv_geom(p, x->shape, dw->shape, &g, error)) {
        return FALSE;
    }
    if (dw->layout != NULL || (db != NULL && !tdm_tensor_is_contiguous(db))) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu conv2d backward: weight and bias gradients must be plain");
        return FALSE;
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_CONV_BWD_FILTER);
    key_add_params(&key, p);
    cpu_key_add_tensor(&key, x);
    cpu_key_add_tensor(&key, dy);
    cpu_key_add_tensor(&key, dw);
    cpu_key_add_tensor(&key, db);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_CONV_BWD_FILTER, &key);
    if (e == NULL) {
        e = cpu_entry_new(CPU_OP_CONV_BWD_FILTER, &key);
        dnnl_memory_desc_t src, wei, wplain, bmd, dst, xmd, dymd;
        dnnl_primitive_desc_t fpd = NULL, pd = NULL;
        dnnl_convolution_desc_t cd;
        if (!conv_src_md(x, x->shape, &src, error) || !conv_weights_md(dw, g.groups, TRUE, &wei, error) ||
            !conv_weights_md(dw, g.groups, FALSE, &wplain, error) ||
            (db != NULL && !bias_md(db, dw->shape[0], &bmd, error)) ||
            !conv_dst_md(dy, g.y_shape, &dst, error) || !cpu_tensor_md(x, &xmd, error) ||
            !cpu_tensor_md(dy, &dymd, error)) {
            goto fail;
        }
        CpuStemGeom sg;
        dnnl_memory_desc_t stem_dy;
        if (stem_enabled() && stem_dy_md(dev, &g, dy, &src, &wei, &stem_dy) &&
            cpu_stem_geom(x, dw, p, &stem_dy, &sg)) {
            /* the own loops, reading dy in its blocked layout */
            e->aux[0] = OWN_STEM;
            e->work[0] = cpu_entry_buf(e, cpu_stem_work_bytes(&sg, TRUE));
            e->work[1] = cpu_entry_buf(e, sizeof sg);
            if (e->work[0] == NULL || e->work[1] == NULL) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                            "cpu conv2d: cannot allocate the stem convolution's work buffer");
                goto fail;
            }
            memcpy(e->work[1], &sg, sizeof sg);
            if (!cpu_convert_init(dev, e, &e->conv[1], &dymd, &stem_dy, error)) {
                goto fail;
            }
            cpu_cache_insert(cache, e);
            goto run;
        }
        /* Winograd on the nChw8c tensors as they are */
        const WinoTake wt = wino_take(dev, cache, e, NULL, &xmd, &dymd, dw, p,
                                      CPU_WINO_BACKWARD_WEIGHTS, error);
        if (wt == WINO_TAKEN) {
            goto run;
        }
        if (wt == WINO_FAILED) {
            goto fail;
        }
        CpuBwf8Geom bg;
        if (bwf8_enabled() && cpu_bwf8_geom(&xmd, &dymd, dw->shape, p, &bg)) {
            /* the own loops on the nChw8c tensors as they are */
            e->aux[0] = OWN_BWF8;
            e->work[0] = cpu_entry_buf(e, cpu_bwf8_work_bytes(&bg));
            e->work[1] = cpu_entry_buf(e, sizeof bg);
            if (e->work[0] == NULL || e->work[1] == NULL) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                            "cpu conv2d: cannot allocate the backward-weights work buffer");
                goto fail;
            }
            memcpy(e->work[1], &bg, sizeof bg);
            cpu_cache_insert(cache, e);
            goto run;
        }
        gboolean ok = FALSE;
        GError *first = NULL;
        for (int attempt = 0; attempt < 2 && !ok; attempt++) {
            if (attempt == 1 && (!md_any(&src, &src, NULL) || !md_any(&dst, &dst, NULL))) {
                break;
            }
            GError **err = attempt == 0 ? &first : NULL;
            dnnl_primitive_attr_t attr = cpu_attr_new(0.0f, 1.0f);
            dnnl_primitive_desc_t cand = NULL;
            ok = fwd_pd(dev, &g, &src, &wei, db ? &bmd : NULL, &dst, &fpd, err) &&
                 cpu_check(dnnl_dilated_convolution_backward_weights_desc_init(
                               &cd, conv_alg(), &src, &wei, db ? &bmd : NULL, &dst,
                               g.strides, g.dilates, g.pad_l, g.pad_r),
                           "convolution backward weights desc", err) &&
                 cpu_check(dnnl_primitive_desc_create(&cand, &cd, attr, CPU_DEV(dev)->engine, fpd),
                           "convolution backward weights", err);
            dnnl_primitive_attr_destroy(attr);
            if (fpd != NULL) {
                dnnl_primitive_desc_destroy(fpd);
                fpd = NULL;
            }
            if (ok) {
                if (pd != NULL) {
                    dnnl_primitive_desc_destroy(pd);
                }
                pd = cand;
                ok = !pd_is_reference(pd) || attempt == 1;
            }
        }
        if (pd == NULL) {
            g_propagate_error(error, first);
            goto fail;
        }
        g_clear_error(&first);
        const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        const dnnl_memory_desc_t *pdwei =
            dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
        const dnnl_memory_desc_t *pddst = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
        int prim, racc, rsrc, rdst;
        ok = cpu_convert_init(dev, e, &e->conv[0], &xmd, psrc, error) &&
             cpu_convert_init(dev, e, &e->conv[1], &dymd, pddst, error) &&
             cpu_prim_create(dev, e, pd, &prim, error) &&
             cpu_reorder_prim(dev, e, pdwei, &wplain, TRUE, &racc, &rsrc, &rdst, error);
        if (ok) {
            e->aux[0] = prim;
            e->aux[1] = cpu_entry_mem(dev, e, psrc);
            e->aux[2] = cpu_entry_mem(dev, e, pddst);
            e->aux[3] = cpu_entry_mem(dev, e, pdwei);
            e->aux[4] = db != NULL ? cpu_entry_mem(dev, e, &bmd) : -1;
            e->aux[5] = racc;
            e->aux[6] = rsrc;
            e->aux[7] = rdst;
            void *wbuf = cpu_entry_buf(e, dnnl_memory_desc_get_size(pdwei));
            void *bbuf = db != NULL ? cpu_entry_buf(e, sizeof(float) * (size_t)dw->shape[0]) : NULL;
            ok = wbuf != NULL && (db == NULL || bbuf != NULL);
            e->work[0] = wbuf;
            e->work[1] = bbuf;
        }
        dnnl_primitive_desc_destroy(pd);
        if (!ok) {
            goto fail;
        }
        cpu_cache_insert(cache, e);
    }
run:
    if (e->aux[0] == OWN_WINO) {
        cpu_wino_backward_filter(e->work[1], tdm_tensor_data(x), tdm_tensor_data(dy),
                                 tdm_tensor_data(dw), db != NULL ? tdm_tensor_data(db) : NULL,
                                 CPU_DEV(dev)->scratch);
        cpu_entry_release(cache, e);
        return TRUE;
    }
    if (e->aux[0] == OWN_BWF8) {
        cpu_bwf8_run(e->work[1], tdm_tensor_data(x), tdm_tensor_data(dy), tdm_tensor_data(dw),
                     db != NULL ? tdm_tensor_data(db) : NULL, e->work[0]);
        cpu_entry_release(cache, e);
        return TRUE;
    }
    if (e->aux[0] == OWN_STEM) {
        void *dys = cpu_convert_run(dev, e, &e->conv[1], tdm_tensor_data(dy), error);
        if (dys != NULL) {
            cpu_stem_backward_filter(e->work[1], tdm_tensor_data(x), dys, tdm_tensor_data(dw),
                                     db != NULL ? tdm_tensor_data(db) : NULL, e->work[0]);
        }
        cpu_entry_release(cache, e);
        return dys != NULL;
    }
    void *xs = cpu_convert_run(dev, e, &e->conv[0], tdm_tensor_data(x), error);
    void *dys = xs ? cpu_convert_run(dev, e, &e->conv[1], tdm_tensor_data(dy), error) : NULL;
    gboolean ok = dys != NULL;
    void *wbuf = e->work[0];
    float *bbuf = e->work[1];
    if (ok) {
        dnnl_exec_arg_t args[6];
        int n = 0;
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, (int)e->aux[1], xs)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, cpu_mem(e, (int)e->aux[2], dys)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, cpu_mem(e, (int)e->aux[3], wbuf)};
        if (e->aux[4] >= 0) {
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, cpu_mem(e, (int)e->aux[4], bbuf)};
        }
        ok = cpu_run(dev, e, (int)e->aux[0], n, args, error);
    }
    if (ok) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_FROM, cpu_mem(e, (int)e->aux[6], wbuf)},
            {DNNL_ARG_TO, cpu_mem(e, (int)e->aux[7], tdm_tensor_data(dw))},
        };
        ok = cpu_run(dev, e, (int)e->aux[5], 2, args, error);
    }
    if (ok && db != NULL) {
        cpu_accumulate(tdm_tensor_data(db), bbuf, db->shape[0]);
    }
    cpu_entry_release(cache, e);
    return ok;
fail:
    cpu_entry_free(e);
    return FALSE;
}
