/* SPDX-License-Identifier: MIT */
/* core/trainer-private.h - what tdm_trainer_run (core/trainer.c) shares with
 * the files it calls: the run it sets up (core/trainer-setup.c), the
 * figures of an epoch and the reports made of them (core/trainer-log.c),
 * and the evaluation loader (core/trainer-eval.c). Private to the core.
 */
#ifndef TDM_TRAINER_PRIVATE_H
#define TDM_TRAINER_PRIVATE_H

#include <stdio.h>

#include "internal.h"

/* Everything a run sets up, in the order it is set up; torn down by
 * tdm_train_run_clear. */
typedef struct {
    const TdmTrainConfig *cfg;
    TdmDistEnv env;                        /* rank 0 of 1 when started alone */
    gboolean leader;                       /* rank 0: prints, logs, evaluates, saves */
    TdmDevice *dev;                        /* this rank's device; dp's first (master) */
    GPtrArray *devices;                    /* dp's devices, else NULL */
    TdmTransformPipeline *transforms;      /* data.transforms, NULL = none */
    TdmDataset *train_ds, *test_ds;        /* test: rank 0 with train.eval */
    TdmLoader *train_loader, *test_loader;
    TdmModel *model;
    GPtrArray *no_params; /* zero1: its optimizer's empty parameter list */
    TdmOptimizer *optimizer;
    TdmSchedule schedule;
    int accumulate;          /* micro-batches per optimizer update */
    int64_t steps_per_epoch; /* this rank's */
    TdmStoreServer *server;
    TdmStore *store;
    TdmComm *comm; /* distributed strategies only */
    TdmStrategy *strategy;
    gboolean resumed; /* from a checkpoint (core/trainer-checkpoint.c) */
} TrainRun;

/* trainer-setup.c: each fills its part of `run` (cfg set), in this order;
 * on failure `error` is set and tdm_train_run_clear frees what was made. */
gboolean tdm_train_setup_process(TrainRun *run, GError **error);
gboolean tdm_train_setup_data(TrainRun *run, GError **error);
gboolean tdm_train_setup_model(TrainRun *run, GError **error);
gboolean tdm_train_setup_optimizer(TrainRun *run, GError **error);
gboolean tdm_train_setup_strategy(TrainRun *run, GError **error);
void tdm_train_run_clear(TrainRun *run);
/* The options of both splits' loaders: batch size, workers, prefetch,
 * pinned memory, seed, no shuffling, and with data.normalize the
 * constants of `norm_ds` (the training split). */
gboolean tdm_train_loader_options(const TdmTrainConfig *cfg, TdmDataset *norm_ds,
                                  TdmLoaderOptions *lo, GError **error);

/* trainer-eval.c: the evaluation loader over `test_ds`, for `tandem train`
 * and `tandem eval` alike (see tdm_trainer_open_test_loader). `train_ds`
 * gives the size the model trains on and the normalisation constants,
 * `train_tf` (may be NULL) is the training pipeline with its
 * normalisation set. The loader holds the pipeline it runs. */
TdmLoader *tdm_train_eval_loader_new(const TdmTrainConfig *cfg, TdmDataset *train_ds,
                                     TdmTransformPipeline *train_tf, TdmDataset *test_ds,
                                     TdmDevice *dev, GError **error);

/* Data wait of an epoch, for the warning: measured from the end of the
 * first step, whose batch nothing could prefetch (and which pays one-off
 * costs such as a lazily decompressed dataset). */
typedef struct {
    double since, wait;
    int64_t steps;
    gboolean warned;
} DataWait;

/* The figures of one epoch, summed over its steps. The loss statistics
 * stay on the device until they are read (tdm_strategy_read_stats), once
 * per reporting interval: loss_sum and correct cover the steps up to
 * read_step, the other figures every step done. */
typedef struct {
    int epoch;                /* from 0 */
    int64_t step;             /* steps done */
    int64_t read_step;        /* steps whose loss statistics were read */
    double loss_sum;          /* this rank's loss x images, to read_step */
    int64_t correct;          /* this rank's, to read_step */
    int64_t images;           /* every rank's */
    double wait_s, comm_s, step_s;
    double start;             /* tdm_time_now() when it began */
    DataWait data_wait;
} EpochStats;

/* trainer-log.c: where a run reports. Rank 0 prints progress to stderr
 * and the summary to stdout, and writes the JSON log (train.log_file); the
 * other ranks report nothing. */
typedef struct TrainLog TrainLog;

/* Opens the log file (rank 0, when configured) and checks train.save can
 * be written, before the first step. */
TrainLog *tdm_train_log_new(const TrainRun *run, GError **error);
/* Where this rank writes train.save: rank 0 the path; every rank, when
 * the path has "{rank}", the path with its rank there (to check that the
 * ranks end alike); NULL for a rank that does not save (transfer full). */
char *tdm_train_save_path(const TrainRun *run);
void tdm_train_log_free(TrainLog *log);
/* The start event and the "training ..." lines. */
void tdm_train_log_start(TrainLog *log, const TrainRun *run);
/* Whether the report after step `es->step` shows the loss statistics (a
 * step event every train.log_every steps, a progress line every
 * train.progress, both at the epoch's last step): the trainer reads them
 * first. */
gboolean tdm_train_log_wants_stats(const TrainLog *log, const TrainRun *run, const EpochStats *es);
/* The statistics `st` just read, of the steps up to `es->step`: the
 * warning when the loss is not finite (once, naming those steps), and
 * their share of the next step event. */
void tdm_train_log_stats(TrainLog *log, const TrainRun *run, const EpochStats *es,
                         const TdmStepStats *st);
/* After step `es->step` of the epoch (the `global_step`th of the run):
 * the slow-loader warning, and when it is due the step event (of the
 * steps since the last one) and the progress line. */
void tdm_train_log_step(TrainLog *log, const TrainRun *run, EpochStats *es,
                        const TdmBatch *batch, const TdmStepResult *r, double step_s,
                        int64_t global_step);
/* The epoch event (after a step event for steps not in one yet); `sum`
 * holds the run's figures to the end of it. */
void tdm_train_log_epoch(TrainLog *log, const TrainRun *run, const EpochStats *es,
                         const TdmTrainSummary *sum, double seconds);
void tdm_train_log_eval(TrainLog *log, const TrainRun *run, int epoch,
                        const TdmTrainSummary *sum);
/* The summary event and line, with the peak memory of the process and
 * of each training device; fills sum->peak_rss_bytes. */
void tdm_train_log_summary(TrainLog *log, const TrainRun *run, TdmTrainSummary *sum);

/* trainer-stop.c: early stopping (train.early_stop_patience). Rank 0
 * judges each evaluation; every rank learns the verdict. */
typedef struct {
    int patience;         /* 0: never stop early */
    double best_accuracy; /* rank 0's best test accuracy so far */
    int best_epoch;       /* its epoch (from 0), -1 before the first */
    int since_best;       /* evaluations since, none better */
    TdmTensor *flag;      /* the verdict broadcast from rank 0 */
} EarlyStop;

void tdm_train_early_stop_init(EarlyStop *es, const TrainRun *run);
/* After epoch `epoch`'s evaluation (rank 0's figures in `sum`), on every
 * rank: *stop says whether the run ends now (logged when it does). */
gboolean tdm_train_early_stop(EarlyStop *es, const TrainRun *run, TrainLog *log, int epoch,
                              const TdmTrainSummary *sum, gboolean *stop, GError **error);
void tdm_train_early_stop_clear(EarlyStop *es);
/* trainer-log.c: the early_stop event and line (rank 0). */
void tdm_train_log_early_stop(TrainLog *log, const TrainRun *run, int epoch,
                              const EarlyStop *es);

#endif /* TDM_TRAINER_PRIVATE_H */
