/* core/loss.c - the training loss: mean softmax cross-entropy of logits
 * against integer labels, over the backend's fused softmax_xent (one pass
 * gives the loss, the gradient and the number of correct predictions). This
 * file checks shapes and dtypes so that the error names them.
 */
#include "config.h"

#include "internal.h"

gboolean tdm_cross_entropy(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                           TdmTensor *labels, float label_smoothing, float *loss,
                           TdmTensor *dlogits, int64_t *correct, GError **error)
{
    g_return_val_if_fail(dev != NULL && logits != NULL && labels != NULL && loss != NULL, FALSE);
    if (logits->ndim != 2 || logits->dtype != TDM_DTYPE_F32) {
        g_autofree char *s = tdm_tensor_shape_string(logits);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cross entropy: logits %s (%s), expected [N, classes] f32", s,
                    tdm_dtype_name(logits->dtype));
        return FALSE;
    }
    if (labels->ndim != 1 || labels->shape[0] != logits->shape[0] ||
        (labels->dtype != TDM_DTYPE_I32 && labels->dtype != TDM_DTYPE_I64)) {
        g_autofree char *sl = tdm_tensor_shape_string(labels);
        g_autofree char *sg = tdm_tensor_shape_string(logits);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cross entropy: labels %s (%s) do not match logits %s: expected [%" G_GINT64_FORMAT
                    "] i32 or i64",
                    sl, tdm_dtype_name(labels->dtype), sg, logits->shape[0]);
        return FALSE;
    }
    if (label_smoothing < 0.0f || label_smoothing > 1.0f) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cross entropy: label smoothing %g is outside [0, 1]", label_smoothing);
        return FALSE;
    }
    return dev->backend->softmax_xent(dev, cache, logits, labels, label_smoothing, loss, dlogits,
                                      correct, error);
}
