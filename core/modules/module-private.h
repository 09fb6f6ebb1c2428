/* core/modules/module-private.h - helpers shared by the module and model
 * files of the core (layers, containers, model placement), not installed.
 *
 * The layers never look at tensor memory; these helpers only shape slots,
 * build reshaped views without allocating every step, and ask the backend
 * to reorder when a layer needs plain input. Everything here is hidden by
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

/* dropout (activation.c): the model gives each Dropout its own seed. */
void tdm_dropout_set_seed(TdmModule *m, guint64 seed);
guint64 tdm_dropout_get_seed(const TdmModule *m);

/* The counter-based generator used for initialisation and dropout seeds
 * (model.c): a well-mixed 64-bit function of its input. */
guint64 tdm_mix64(guint64 x);

#endif /* TDM_CORE_MODULE_PRIVATE_H */
