/* SPDX-License-Identifier: MIT */
/* core/loss.c - the training loss: mean softmax cross-entropy of logits
 * against integer labels, the backend's fused softmax_xent (one pass gives
 * the loss, the gradient and the number of correct predictions) through
 * its front end, which checks the shapes and dtypes and names them.
 */
#include "config.h"

#include "internal.h"

gboolean tdm_loss_cross_entropy(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                TdmTensor *labels, float label_smoothing, float *loss,
                                TdmTensor *dlogits, int64_t *correct, GError **error)
{
    g_return_val_if_fail(dev != NULL && logits != NULL && labels != NULL && loss != NULL, FALSE);
    return tdm_op_softmax_xent(dev, cache, logits, labels, label_smoothing, loss, dlogits, correct,
                               error);
}
