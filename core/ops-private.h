/* SPDX-License-Identifier: MIT */
/* core/ops-private.h - what the op front-end files of the core share: the
 * argument checks (ops-check.c) and the TDM_PROFILE timer (ops-profile.c).
 * Not installed; hidden by the core's -fvisibility=hidden.
 */
#ifndef TDM_CORE_OPS_PRIVATE_H
#define TDM_CORE_OPS_PRIVATE_H

#include "internal.h"

/* ---- profiling (ops-profile.c) ---- */

/* One row of the TDM_PROFILE table per front end. */
typedef enum {
    TDM_OPID_GEMM,
    TDM_OPID_BIAS_GRAD,
    TDM_OPID_CONV2D_FORWARD,
    TDM_OPID_CONV2D_RELU_FORWARD,
    TDM_OPID_CONV2D_BACKWARD_DATA,
    TDM_OPID_CONV2D_BACKWARD_FILTER,
    TDM_OPID_BATCHNORM_FORWARD,
    TDM_OPID_BATCHNORM_BACKWARD,
    TDM_OPID_BATCHNORM_RELU_FORWARD,
    TDM_OPID_BATCHNORM_RELU_BACKWARD,
    TDM_OPID_RELU_FORWARD,
    TDM_OPID_RELU_BACKWARD,
    TDM_OPID_ADD,
    TDM_OPID_ADD_RELU,
    TDM_OPID_MAXPOOL2D_FORWARD,
    TDM_OPID_MAXPOOL2D_BACKWARD,
    TDM_OPID_AVGPOOL2D_FORWARD,
    TDM_OPID_AVGPOOL2D_BACKWARD,
    TDM_OPID_GLOBAL_AVGPOOL_FORWARD,
    TDM_OPID_GLOBAL_AVGPOOL_BACKWARD,
    TDM_OPID_SOFTMAX_XENT,
    TDM_OPID_SOFTMAX_XENT_STATS,
    TDM_OPID_DROPOUT_FORWARD,
    TDM_OPID_DROPOUT_BACKWARD,
    TDM_OPID_FILL,
    TDM_OPID_COPY,
    TDM_OPID_SCALE,
    TDM_OPID_AXPY,
    TDM_OPID_SUM_SQUARES,
    TDM_OPID_CAST,
    TDM_OPID_SGD_UPDATE,
    TDM_OPID_ADAMW_UPDATE,
    TDM_OPID_SGD_UPDATE_ZERO_GRAD,
    TDM_OPID_ADAMW_UPDATE_ZERO_GRAD,
    TDM_OPID_REORDER,
    TDM_OPID_READ,        /* tdm_tensor_read: device to host */
    TDM_OPID_COPY_PEER,   /* tdm_tensor_copy_across, device to device */
    TDM_OPID_COPY_STAGED, /* tdm_tensor_copy_across, through host memory */
    TDM_OPID_N
} TdmOpId;

/* Non-zero when TDM_PROFILE is set (to anything but "" or "0") at load. */
extern int tdm_ops_profiling;

/* Waits for the device (so that earlier work is not counted) and starts
 * the clock. */
gboolean tdm_ops_profile_begin(TdmDevice *dev, double *t0, GError **error);
/* Waits for the device again when the op succeeded (an async backend has
 * only queued it), adds the time to row `id`, returns whether both worked. */
gboolean tdm_ops_profile_end(TdmOpId id, TdmDevice *dev, double t0, gboolean ok, GError **error);

/* The tail of every front end: run `call` (a backend call returning
 * gboolean), timed when profiling. `call` is written once but expanded in
 * two branches, of which one runs. */
#define TDM_OP_RUN(id, dev, error, call)                                                           \
    do {                                                                                           \
        if (G_UNLIKELY(tdm_ops_profiling)) {                                                       \
            double t0_ = 0.0;                                                                      \
            if (!tdm_ops_profile_begin((dev), &t0_, (error))) {                                    \
                return FALSE;                                                                      \
            }                                                                                      \
            gboolean ok_ = (call);                                                                 \
            return tdm_ops_profile_end((id), (dev), t0_, ok_, (error));                            \
        }                                                                                          \
        return (call);                                                                             \
    } while (0)

/* ---- argument checks (ops-check.c) ----
 * Each sets a TDM_ERROR whose message starts with `op` and names the
 * tensor (`what`) and its shape. */

/* A required input: non-NULL, on `dev`, with storage when it has elements,
 * of dtype `dtype` (-1: any). */
gboolean tdm_ops_check_input(TdmDevice *dev, const char *op, const char *what, const TdmTensor *t,
                             int dtype, GError **error);
/* The same for an input that may be NULL. */
gboolean tdm_ops_check_optional(TdmDevice *dev, const char *op, const char *what,
                                const TdmTensor *t, int dtype, GError **error);
/* An (out) slot: non-NULL and on `dev` (the op shapes it). */
gboolean tdm_ops_check_out(TdmDevice *dev, const char *op, const char *what, const TdmTensor *t,
                           GError **error);
/* x_like, the forward input a backward op takes for its shape, device and
 * layout: non-NULL, on `dev` and f32 (a backend may build its descriptors
 * from it); it needs no storage. */
gboolean tdm_ops_check_like(TdmDevice *dev, const char *op, const TdmTensor *x_like,
                            GError **error);
/* `t` (non-NULL) has exactly this shape. */
gboolean tdm_ops_check_shape(const char *op, const char *what, const TdmTensor *t, int ndim,
                             const int64_t *shape, GError **error);
/* An input of dtype f32 and exactly this shape; NULL passes when
 * `optional`. */
gboolean tdm_ops_check_f32_shaped(TdmDevice *dev, const char *op, const char *what,
                                  const TdmTensor *t, int ndim, const int64_t *shape,
                                  gboolean optional, GError **error);
/* An f32 [n] input, plain and contiguous: biases, per-channel vectors and
 * their (acc) gradients. NULL passes when `optional`. */
gboolean tdm_ops_check_f32_vector(TdmDevice *dev, const char *op, const char *what,
                                  const TdmTensor *t, int64_t n, gboolean optional, GError **error);
/* a and b have the same logical shape. */
gboolean tdm_ops_check_same_shape(const char *op, const char *what_a, const TdmTensor *a,
                                  const char *what_b, const TdmTensor *b, GError **error);
/* a and b have the same number of elements. */
gboolean tdm_ops_check_same_numel(const char *op, const char *what_a, const TdmTensor *a,
                                  const char *what_b, const TdmTensor *b, GError **error);
/* `t` is in the plain layout (strides allowed). */
gboolean tdm_ops_check_plain(const char *op, const char *what, const TdmTensor *t, GError **error);
/* `t` is plain and contiguous (vector ops, optimizer updates, (acc)
 * outputs). */
gboolean tdm_ops_check_contiguous(const char *op, const char *what, const TdmTensor *t,
                                  GError **error);
/* "[2, 3]" for a shape array (transfer full). */
char *tdm_ops_shape_string(int ndim, const int64_t *shape);

#endif /* TDM_CORE_OPS_PRIVATE_H */
