/* tandem/checkpoint.h - training checkpoints: one safetensors file each.
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

#define TDM_CHECKPOINT_FORMAT "tandem-checkpoint"
#define TDM_CHECKPOINT_FORMAT_VERSION "1"
/* Tensors that are not the model's start with this. */
#define TDM_CHECKPOINT_PREFIX "tandem."
/* The optimizer's state: this prefix, the parameter, '.', the state. */
#define TDM_CHECKPOINT_OPTIM_PREFIX "tandem.optim."

/* Sets the "checksums" metadata of `st` (a writer) from its tensors. */
TDM_API void tdm_checkpoint_set_checksums(TdmSafeTensors *st);
/* Checks that every tensor of `st` (read from `path`) has the checksum its
 * "checksums" metadata gives: a tensor whose bytes differ, or one without
 * a checksum, is TDM_ERROR_CORRUPT naming it, its byte range and `path`. */
TDM_API gboolean tdm_checkpoint_verify(const TdmSafeTensors *st, const char *path, GError **error);
/* Reads a checkpoint: a safetensors file (malformed or truncated content is
 * TDM_ERROR_CORRUPT naming the file and byte offset) whose metadata says
 * format "tandem-checkpoint" version 1, with every checksum right.
 * Transfer full. */
TDM_API TdmSafeTensors *tdm_checkpoint_load(const char *path, GError **error);

/* The newest complete checkpoint: `path` itself when it is a file, else the
 * highest-numbered DIR/ckpt-*.safetensors (temporary files of a save that
 * did not finish are never taken). No checkpoint there is
 * TDM_ERROR_NOT_FOUND naming the directory. Transfer full. */
TDM_API char *tdm_checkpoint_find(const char *path, GError **error);
/* DIR/ckpt-<step>.safetensors (transfer full). */
TDM_API char *tdm_checkpoint_path(const char *dir, int64_t step);
/* Writes `st` (checksums set here) as DIR/ckpt-<step>.safetensors
 * atomically, creating DIR if needed, then points DIR/latest at it. */
TDM_API gboolean tdm_checkpoint_save(TdmSafeTensors *st, const char *dir, int64_t step,
                                     GError **error);
/* Points DIR/best at DIR/ckpt-<step>.safetensors (atomically). */
TDM_API gboolean tdm_checkpoint_set_best(const char *dir, int64_t step, GError **error);
/* Deletes all but the `keep_last` newest checkpoints of DIR (0: none),
 * never the one DIR/best or DIR/latest points at, and the temporary files
 * of saves that were killed. One process at a time writes a directory. */
TDM_API gboolean tdm_checkpoint_prune(const char *dir, int keep_last, GError **error);

/* The optimizer's state into `st` as prefix + "<parameter>.<state>", plain
 * f32 shaped like each parameter (one with parameters of a model). */
TDM_API gboolean tdm_optimizer_export_state(TdmOptimizer *opt, TdmSafeTensors *st,
                                            const char *prefix, GError **error);
/* The reverse, from a checkpoint read from `path`: every state tensor of the
 * optimizer must be there with its shape, and no other tensor under
 * `prefix`; an error names the tensor, both shapes and the file. */
TDM_API gboolean tdm_optimizer_import_state(TdmOptimizer *opt, const TdmSafeTensors *st,
                                            const char *prefix, const char *path, GError **error);

G_END_DECLS

#endif /* TANDEM_CHECKPOINT_H */
