/* SPDX-License-Identifier: MIT */
/**
 * SECTION:checkpoint
 * @title: Checkpoints
 * @short_description: training checkpoints: one safetensors file each
 * @include: tandem/tandem.h
 *
 * A checkpoint is a safetensors file (<tandem/io.h>) holding the model's
 * parameters and buffers under the names tdm_model_save() gives them
 * (torchvision's), every other tensor under a name that starts with
 * TDM_CHECKPOINT_PREFIX ("tandem."; the optimizer's state is
 * "tandem.optim.<parameter>.<state>", e.g.
 * "tandem.optim.fc.weight.momentum_buffer", full-sized per parameter
 * whatever the strategy and world size), and in its __metadata__:
 *
 *   format          "tandem-checkpoint"       format_version  "1"
 *   model           the zoo name              world_size      ranks that trained
 *   config          the training configuration, a JSON object "section.key": "value"
 *   trainer         JSON: epoch, step_in_epoch, global_step, updates, the
 *                   epoch's figures so far, the evaluations so far and the best
 *   optimizer       JSON: name, step_count, learning rate
 *   schedule        JSON: kind, position (updates) and base learning rate
 *   sampler         JSON: epoch and samples of its global order consumed
 *   rng             JSON: every seed and counter of the run's random streams
 *   checksums       JSON: tensor name -> CRC-32 (8 hex digits) of its bytes
 *
 * tdm_checkpoint_load() checks the format and every checksum, so a flipped
 * byte is an error naming the tensor and the file rather than weights
 * trained on silently. `tandem export` keeps exactly the tensors whose
 * names do not start with "tandem.".
 *
 * A checkpoint directory holds DIR/ckpt-<step, 9 digits>.safetensors, each
 * written atomically (temporary file in DIR, fsync, rename, fsync of DIR),
 * DIR/latest, a relative symbolic link to the newest, replaced atomically,
 * and with keep-best DIR/best, a link to the one of the best evaluation.
 */
#ifndef TANDEM_CHECKPOINT_H
#define TANDEM_CHECKPOINT_H

#include <tandem/io.h>
#include <tandem/optim.h>

G_BEGIN_DECLS

/**
 * TDM_CHECKPOINT_FORMAT:
 *
 * The "format" metadata of a checkpoint; %TDM_CHECKPOINT_FORMAT_VERSION is
 * its "format_version".
 */
#define TDM_CHECKPOINT_FORMAT "tandem-checkpoint"
/**
 * TDM_CHECKPOINT_FORMAT_VERSION:
 *
 * The "format_version" metadata of the checkpoints this Tandem writes, and
 * the only one it reads: another is refused with %TDM_ERROR_UNSUPPORTED
 * naming the file and both versions (a file without the "format" of
 * %TDM_CHECKPOINT_FORMAT is refused with %TDM_ERROR_INVALID_ARG).
 */
#define TDM_CHECKPOINT_FORMAT_VERSION "1"
/**
 * TDM_CHECKPOINT_PREFIX:
 *
 * Tensors of a checkpoint that are not the model's start with this.
 */
#define TDM_CHECKPOINT_PREFIX "tandem."
/**
 * TDM_CHECKPOINT_OPTIM_PREFIX:
 *
 * The optimizer's state: this prefix, the parameter, '.', the state.
 */
#define TDM_CHECKPOINT_OPTIM_PREFIX "tandem.optim."

/**
 * tdm_checkpoint_set_checksums:
 * @st: a writer
 *
 * Sets the "checksums" metadata of @st from its tensors.
 */
TDM_API void tdm_checkpoint_set_checksums(TdmSafeTensors *st);
/**
 * tdm_checkpoint_verify:
 * @st: tensors read from @path
 * @path: the file, for errors
 * @error: return location for a #GError, or NULL
 *
 * Checks that every tensor of @st has the checksum its "checksums" metadata
 * gives.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_CORRUPT naming the tensor whose
 * bytes differ or that has no checksum, its byte range and @path
 */
TDM_API gboolean tdm_checkpoint_verify(const TdmSafeTensors *st, const char *path, GError **error);
/**
 * tdm_checkpoint_load:
 * @path: a checkpoint file
 * @error: return location for a #GError, or NULL
 *
 * Reads a checkpoint: a safetensors file whose metadata says format
 * "tandem-checkpoint" version 1, with every checksum right.
 *
 * Returns: (transfer full): the tensors, or NULL with %TDM_ERROR_CORRUPT
 * naming the file and byte offset (malformed or truncated content) or the
 * tensor, or an error naming the format or version found
 */
TDM_API TdmSafeTensors *tdm_checkpoint_load(const char *path, GError **error);

/**
 * tdm_checkpoint_find:
 * @path: a checkpoint file or directory
 * @error: return location for a #GError, or NULL
 *
 * The newest complete checkpoint: @path itself when it is a file, else the
 * highest-numbered DIR/ckpt-*.safetensors (temporary files of a save that
 * did not finish are never taken).
 *
 * Returns: (transfer full): the file, or NULL with %TDM_ERROR_NOT_FOUND
 * naming the directory
 */
TDM_API char *tdm_checkpoint_find(const char *path, GError **error);
/**
 * tdm_checkpoint_path:
 * @dir: a checkpoint directory
 * @step: the global step
 *
 * The name of a checkpoint file.
 *
 * Returns: (transfer full): DIR/ckpt-<step, 9 digits>.safetensors
 */
TDM_API char *tdm_checkpoint_path(const char *dir, int64_t step);
/**
 * tdm_checkpoint_save:
 * @st: a writer; its checksums are set here
 * @dir: the directory, created if needed
 * @step: the global step
 * @error: return location for a #GError, or NULL
 *
 * Writes @st as DIR/ckpt-<step>.safetensors atomically, then points
 * DIR/latest at it.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_IO naming the file
 */
TDM_API gboolean tdm_checkpoint_save(TdmSafeTensors *st, const char *dir, int64_t step,
                                     GError **error);
/**
 * tdm_checkpoint_set_best:
 * @dir: a checkpoint directory
 * @step: the step of the best checkpoint
 * @error: return location for a #GError, or NULL
 *
 * Points DIR/best at DIR/ckpt-<step>.safetensors, atomically.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_IO
 */
TDM_API gboolean tdm_checkpoint_set_best(const char *dir, int64_t step, GError **error);
/**
 * tdm_checkpoint_prune:
 * @dir: a checkpoint directory
 * @keep_last: how many of the newest to keep; 0: all
 * @error: return location for a #GError, or NULL
 *
 * Deletes all but the @keep_last newest checkpoints of @dir, never the one
 * DIR/best or DIR/latest points at, and the temporary files of saves that
 * were killed. One process at a time writes a directory.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_IO
 */
TDM_API gboolean tdm_checkpoint_prune(const char *dir, int keep_last, GError **error);

/**
 * tdm_optimizer_export_state:
 * @opt: an optimizer with the parameters of a model
 * @st: a writer
 * @prefix: the prefix of the names
 * @error: return location for a #GError, or NULL
 *
 * Adds the optimizer's state to @st as @prefix + "<parameter>.<state>",
 * plain f32 shaped like each parameter.
 *
 * Returns: TRUE, or FALSE with @error set (the device failed)
 */
TDM_API gboolean tdm_optimizer_export_state(TdmOptimizer *opt, TdmSafeTensors *st,
                                            const char *prefix, GError **error);
/**
 * tdm_optimizer_import_state:
 * @opt: an optimizer
 * @st: a checkpoint read from @path
 * @prefix: the prefix of the names
 * @path: the file, for errors
 * @error: return location for a #GError, or NULL
 *
 * The reverse of tdm_optimizer_export_state(): every state tensor of the
 * optimizer must be there with its shape, and no other tensor under
 * @prefix.
 *
 * Returns: TRUE, or FALSE with an error naming the tensor, both shapes and
 * the file
 */
TDM_API gboolean tdm_optimizer_import_state(TdmOptimizer *opt, const TdmSafeTensors *st,
                                            const char *prefix, const char *path, GError **error);

G_END_DECLS

#endif /* TANDEM_CHECKPOINT_H */
