/* SPDX-License-Identifier: MIT */
/* core/trainer-checkpoint.h - what tdm_trainer_run (core/trainer.c) calls to
 * write checkpoints and to resume from one (core/trainer-checkpoint.c says
 * what a checkpoint holds and how a resume continues exactly). Private to
 * the core.
 */
#ifndef TDM_TRAINER_CHECKPOINT_H
#define TDM_TRAINER_CHECKPOINT_H

#include "trainer-private.h"

typedef struct TrainCkpt TrainCkpt;

/* After tdm_train_setup_optimizer, before the strategy: checks the
 * checkpoint keys and, with train.resume (or in a job that `tandem run
 * --max-restarts` restarted, with a checkpoint in train.checkpoint_dir),
 * reads the checkpoint, refuses one of another model or an incompatible
 * configuration, and restores the weights and the data position. Every
 * rank reads the file itself. */
TrainCkpt *tdm_train_ckpt_new(TrainRun *run, GError **error);
/* After the strategy's setup: the optimizer's state, through it. */
gboolean tdm_train_ckpt_restore_optimizer(TrainCkpt *ck, TrainRun *run, GError **error);
void tdm_train_ckpt_free(TrainCkpt *ck);

/* Where the loop starts: its first epoch, and the run's steps and
 * optimizer updates so far (0 without a resume). */
int tdm_train_ckpt_first_epoch(const TrainCkpt *ck);
void tdm_train_ckpt_counters(const TrainCkpt *ck, TdmTrainSummary *sum, int64_t *updates);
/* An epoch's figures so far, for the epoch the run resumes in (once). */
void tdm_train_ckpt_resume_epoch(TrainCkpt *ck, EpochStats *es);
/* Whether a checkpoint is due after global step `steps` (the trainer
 * reads the loss statistics first, so that the checkpoint has them). */
gboolean tdm_train_ckpt_due(const TrainCkpt *ck, int64_t steps);
/* After each step: records where the run stands, writes the checkpoint
 * when one is due, and sets *stop at train.max_steps. */
gboolean tdm_train_ckpt_after_step(TrainCkpt *ck, TrainRun *run, const EpochStats *es,
                                   const TdmTrainSummary *sum, int64_t updates, gboolean *stop,
                                   GError **error);
/* After an epoch and its evaluation (`evaluated`): records its figures and,
 * with train.keep_best, writes a checkpoint when the test accuracy is the
 * best so far and points DIR/best at it. */
gboolean tdm_train_ckpt_after_epoch(TrainCkpt *ck, TrainRun *run, const EpochStats *es,
                                    const TdmTrainSummary *sum, gboolean evaluated, GError **error);
/* At the end of training (train.epochs done, or train.max_steps): the
 * last checkpoint. */
gboolean tdm_train_ckpt_finish(TrainCkpt *ck, TrainRun *run, GError **error);

/* ---- between core/trainer-checkpoint.c and core/trainer-resume.c ---- */

/* Where the run stands after its last step. */
typedef struct {
    int epoch;
    int64_t step;        /* steps of `epoch` done */
    gboolean epoch_done; /* its report and evaluation too: resume at epoch + 1 */
    int64_t global_step; /* steps of the run */
    int64_t updates;     /* optimizer updates: the schedule's clock */
    double loss_sum;     /* the epoch's figures so far (EpochStats) */
    int64_t correct, images;
} Position;

/* One evaluation, for the metadata's list. */
typedef struct {
    int epoch;
    int64_t global_step;
    double train_loss, test_accuracy, test_loss;
} EvalRecord;

struct TrainCkpt {
    const TdmTrainConfig *cfg;
    Position pos;
    gboolean resume_epoch_pending; /* tdm_train_ckpt_resume_epoch has figures to give */
    TdmSafeTensors *file;          /* the checkpoint resumed from, until the optimizer's */
    char *path;
    int64_t optim_steps; /* its optimizer step count */
    GArray *evals;       /* EvalRecord */
    gboolean has_best;
    double best;
    int64_t best_step;
    int64_t saved_step; /* global step of the last checkpoint, -1: none */
    gboolean saved_epoch_done;
};

/* The configuration as a JSON object of "section.key": "value" (transfer
 * full). */
char *tdm_train_ckpt_config_json(const TdmTrainConfig *cfg);
/* Every Dropout of the tree under `m` in forward order (into `mods`), with
 * its full name (into `names`, owned by it). */
void tdm_train_ckpt_dropouts(TdmModule *m, const char *prefix, GPtrArray *mods, GPtrArray *names);
/* Samples in an epoch of the training split (data.limit applied). */
int64_t tdm_train_ckpt_epoch_samples(const TrainRun *run);
/* The checkpoint to resume from into *path (NULL: a fresh start). */
gboolean tdm_train_ckpt_resume_path(const TrainRun *run, char **path, GError **error);
/* Reads ck->path and restores all but the optimizer's state. */
gboolean tdm_train_ckpt_resume(TrainCkpt *ck, TrainRun *run, GError **error);

#endif /* TDM_TRAINER_CHECKPOINT_H */
