/* SPDX-License-Identifier: MIT */
/* core/modules/module-private.h - helpers shared by the module and model
 * files of the core (layers, containers, model placement), not installed.
 *
 * The layers never look at tensor memory; these helpers only shape slots,
 * build reshaped views without allocating every step, and reorder
 * (tdm_tensor_reorder) when a layer needs plain input. Everything here is hidden by
 * the core's -fvisibility=hidden.
 */
#ifndef TDM_CORE_MODULE_PRIVATE_H
#define TDM_CORE_MODULE_PRIVATE_H

#include "../internal.h"

/* TRUE when one of m's own parameters (not its children's) needs a gradient. */
gboolean tdm_module_own_trainable(const TdmModule *m);
/* TRUE when a parameter of m or of any descendant needs a gradient. */
gboolean tdm_module_any_trainable(const TdmModule *m);
/* A TDM_ERROR_FAILED error unless m has been placed on a device. */
gboolean tdm_module_check_placed(const TdmModule *m, GError **error);
/* Create *slot (an empty output tensor on m's device) if it does not exist;
 * returns it. */
TdmTensor *tdm_module_slot(TdmModule *m, TdmTensor **slot, TdmDType dtype);
/* Free a slot and reset it to NULL (NULL-safe). */
void tdm_module_slot_clear(TdmTensor **slot);
/* A layer's finalize: clears the op caches in `caches` (kept on m's
 * device; none exist before it is placed) and the slots in `slots`, both
 * NULL-terminated, then frees m->priv (which they point into). */
void tdm_module_release(TdmModule *m, TdmOpCache **const *caches, TdmTensor **const *slots);

/* The class table of a built-in module type whose slots are the functions
 * <prefix>_forward, _backward, _clone and _finalize of its file:
 *     const TdmModuleClass tdm_linear_class = TDM_LAYER_CLASS("Linear", linear);
 * A type without one of them spells its table out. */
#define TDM_LAYER_CLASS(type, prefix)                                                              \
    {                                                                                              \
        TDM_CLASS_HEADER(TDM_MODULE_IFACE_VERSION, TdmModuleClass), .type_name = (type),           \
        .forward = prefix##_forward, .backward = prefix##_backward, .clone = prefix##_clone,       \
        .finalize = prefix##_finalize,                                                             \
    }

/* `t` itself when plain contiguous, else `t` reordered to plain into *slot
 * (created on demand). Transfer none. */
TdmTensor *tdm_module_as_plain(TdmModule *m, TdmOpCache **cache, TdmTensor *t, TdmTensor **slot,
                               GError **error);
/* A view of plain contiguous `base` with another shape, kept in *view and
 * rebuilt only when base's storage, offset or the shape changed, so the
 * steady state allocates nothing. Transfer none. */
TdmTensor *tdm_module_view(TdmTensor **view, TdmTensor *base, int ndim, const int64_t *shape,
                           GError **error);
/* Keep a reference to `t` in *keep (dropping the previous one). */
void tdm_module_keep(TdmTensor **keep, TdmTensor *t);

/* ---- input gradients: a model-wide pool of buffers (grad-pool.c) ----
 * Within a model, a layer's input gradient is dead as soon as the module
 * before it has consumed it, so instead of one buffer per layer (a second
 * copy of every activation) gradients live in a few storages that the
 * model's pool hands out again. The pool keeps one reference to each of its
 * storages; a storage is free when that is the only one left.
 *
 * A layer asks for its gradient output slot with tdm_module_grad_slot()
 * (instead of tdm_module_slot()); a container calls
 * tdm_module_grad_release() on a gradient once it is consumed (never on the
 * gradient it was given itself, which its caller owns). Outside a model, or
 * for a tensor whose storage is not the pool's, both keep the old behaviour:
 * the slot keeps its own storage. The pool lives in model->priv; how it
 * plans one region for a pass is in core/grad-pool.c. */

/* The slot *slot (created on demand, f32) with a free pooled storage of at
 * least the size its last use needed, or `like`'s size, attached when it
 * has none. The op that writes it may still grow it (tdm_tensor_ensure);
 * the grown storage joins the pool the next time. Transfer none. */
TdmTensor *tdm_module_grad_slot(TdmModule *m, TdmTensor **slot, const TdmTensor *like);
/* The same for a lent forward output (see below): the pool also keeps
 * the slot, and gives its memory back when the next training forward of
 * the model begins, if no backward did (a training-mode forward without a
 * backward leaves it held) or an eval-mode forward gave the slot a buffer
 * of its own: the next pass then takes its planned slices again. */
TdmTensor *tdm_module_lent_slot(TdmModule *m, TdmTensor **slot, const TdmTensor *like);
/* g's content is no longer needed: give its storage back to the pool. */
void tdm_module_grad_release(TdmModule *m, TdmTensor *g);
/* Records the size of a training-mode module output (tdm_module_forward),
 * the size the pool gives its buffers. */
void tdm_model_note_activation(TdmModel *model, const TdmTensor *y);
/* A training-mode forward of the whole model begins (tdm_model_forward):
 * the pass the backward ends, whose requests the plan numbers from here. */
void tdm_model_forward_pass_begin(TdmModel *model);
/* A backward pass of the whole model begins or ends (tdm_model_backward):
 * the pool records the first pass and plans its region at its end
 * (grad-pool.c). */
void tdm_model_grad_pass_begin(TdmModel *model);
void tdm_model_grad_pass_end(TdmModel *model, TdmDevice *dev);
/* Drops the pool of `model` (tdm_model_free). */
void tdm_model_grad_pool_free(TdmModel *model);

/* The state of a layer's output lent by the gradient pool (a batch
 * norm's, a convolution's: see below), the same in both. */
typedef struct {
    gboolean next;    /* asked for: the next forward takes its output from the pool */
    gboolean lent;    /* the last forward did */
    gboolean dropped; /* ... and the output went back: restore before it is read */
} TdmLentOutput;
/* At the start of m's forward: whether it lends its output this time
 * (asked for, and m is in a model, whose pool lends). */
gboolean tdm_lent_output_begin(TdmLentOutput *l, const TdmModule *m);
/* Gives y back to m's pool when it was lent and is held; a storage that is
 * not the pool's (the op grew it) stays, and the output counts as kept. */
void tdm_lent_output_drop(TdmLentOutput *l, TdmModule *m, TdmTensor *y);

/* ---- fusions a Sequential sets up for the pair (BatchNorm2d, ReLU) ----
 * Asks the batch norm to apply the ReLU that follows it in its next forward
 * (tdm_op_batchnorm_relu_forward: one fused op where the backend has it). */
void tdm_batchnorm_request_relu(TdmModule *bn);
/* TRUE when bn's last forward applied the ReLU (its output is then needed
 * by its backward). */
gboolean tdm_batchnorm_applied_relu(const TdmModule *bn);
/* The ReLU's next forward is the identity (the batch norm before it applied
 * it), and so is the matching backward. */
void tdm_relu_request_passthrough(TdmModule *relu);
/* The batch norm's next backward may write its input gradient over the
 * output gradient it is given (the caller owns that gradient and has no
 * further use for it): one gradient buffer fewer at that point, where the
 * backend runs it in place. The request lasts for that one call. */
void tdm_batchnorm_allow_in_place(TdmModule *bn);
/* The same for a Residual: its ReLU's backward then writes over the output
 * gradient. */
void tdm_residual_allow_in_place(TdmModule *residual);

/* ---- batch norm outputs lent by the gradient pool ----
 * A batch norm's output that its own backward does not read (or reads
 * only for the ReLU mask) is needed after the forward by at most its reader:
 * a convolution's backward weights, or nobody for the shortcut of a
 * residual sum. The container asks for it to be lent before the forward;
 * the output then comes from the model's gradient pool, the container gives
 * it back once the reader's forward is done (drop), and before the reader's
 * backward has it computed again (restore: an eval-mode forward with the
 * statistics the training forward used, the same values). The batch norm's
 * own backward restores it when it applied a ReLU whose mask the backend
 * takes from y, and gives it back at its end. A ResNet then keeps one
 * activation fewer per conv-bn-relu-conv chain. A Residual lends its body's
 * last batch norm's output the same way when the block's sum goes over it:
 * that is the block's output, given back after the block's ReLU backward,
 * its last reader. Outside a model all three do nothing. */
void tdm_batchnorm_lend_output(TdmModule *bn);
void tdm_batchnorm_drop_output(TdmModule *bn);
gboolean tdm_batchnorm_restore_output(TdmModule *bn, GError **error);
/* The reader's backward has run: the lent output goes back now unless the
 * batch norm's own backward reads it (a ReLU mask the backend does not
 * keep in the workspace: tdm_op_batchnorm_relu_backward without y). */
void tdm_batchnorm_reader_done(TdmModule *bn);

/* ---- convolution outputs lent by the gradient pool: recomputation ----
 * A convolution whose output only a batch norm reads (the batch norm's
 * forward, and its backward, which needs its input) lends it: the output
 * comes from the pool and goes back after the batch norm's backward, so
 * that the pool's plan lets later buffers (the gradients of earlier
 * layers) use its bytes. For the convolutions the model's recompute policy
 * names (tdm_model_set_recompute) the container also gives it back after
 * the batch norm's forward and has it computed again (the convolution's
 * forward once more, from the input it keeps) before the batch norm's
 * backward or the restore of the batch norm's own output, whichever comes
 * first: one convolution forward for one activation. The input must be
 * there when restoring: the container restores it first when it was lent
 * too. */
void tdm_conv2d_lend_output(TdmModule *conv);
void tdm_conv2d_drop_output(TdmModule *conv);
gboolean tdm_conv2d_restore_output(TdmModule *conv, GError **error);
/* TRUE when the output was given back and not yet computed again. */
gboolean tdm_conv2d_output_dropped(const TdmModule *conv);
/* The same question for a lent batch-norm output. */
gboolean tdm_batchnorm_output_dropped(const TdmModule *bn);
/* Kernel size of a convolution (the recompute policy's criterion). */
int tdm_conv2d_kernel(const TdmModule *conv);
/* Whether the model's recompute policy has conv's output lent
 * (grad-pool.c; a Sequential asks before conv's forward). */
gboolean tdm_model_recomputes(TdmModel *model, TdmModule *conv);
/* The auto policy's choice for one convolution (set by the model). */
void tdm_conv2d_set_recomputed(TdmModule *conv, gboolean recompute);
gboolean tdm_conv2d_recomputed(const TdmModule *conv);
/* A convolution's training forward or backward ran `macs` multiply-adds;
 * `lent`: a forward whose output y was lent. The auto policy's trial pass
 * counts the work and takes the lent ones as its candidates (grad-pool.c);
 * outside it nothing happens. */
void tdm_model_note_conv_work(TdmModel *model, TdmModule *conv, const TdmTensor *y, double macs,
                              gboolean lent);

/* ---- the same for the pair (Conv2d, ReLU) ----
 * Asks the convolution to apply the ReLU that follows it in its next
 * forward (tdm_op_conv2d_relu_forward). */
void tdm_conv2d_request_relu(TdmModule *conv);
/* TRUE when conv's last forward applied the ReLU. */
gboolean tdm_conv2d_applied_relu(const TdmModule *conv);
/* The ReLU's next forward is the identity (the layer before it applied it)
 * but its backward still masks the gradient, by that forward's input: a
 * rectified tensor is positive exactly where its input was. */
void tdm_relu_request_forward_passthrough(TdmModule *relu);

/* dropout (activation.c): the model gives each Dropout its own seed. */
void tdm_dropout_set_seed(TdmModule *m, guint64 seed);
guint64 tdm_dropout_get_seed(const TdmModule *m);
/* Training-mode forwards so far, the other half of a mask's key: a
 * checkpoint keeps it so that a resumed run draws the masks it would have. */
guint64 tdm_dropout_get_pass(const TdmModule *m);
void tdm_dropout_set_pass(TdmModule *m, guint64 pass);

/* The counter-based generator used for initialisation and dropout seeds
 * (model.c): a well-mixed 64-bit function of its input. */
guint64 tdm_mix64(guint64 x);

#endif /* TDM_CORE_MODULE_PRIVATE_H */
