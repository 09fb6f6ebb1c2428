/* SPDX-License-Identifier: MIT */
/* core/trainer.c - the training loop.
 *
 * tdm_trainer_run() reads top to bottom as one run, as llm.c's training
 * loop does: set up the process and its devices, the data, the model, the
 * optimizer with its learning-rate schedule, the strategy that owns a step
 * and the reports (core/trainer-setup.c, core/trainer-log.c); then loop
 * over epochs and steps, adding up each step's figures and reporting them
 * (the loss statistics, which stay on the device, are read once per
 * reporting interval); after each epoch evaluate on the test split
 * (core/trainer-eval.c), write a checkpoint (core/trainer-checkpoint.c)
 * and stop early when it has not improved for long enough
 * (core/trainer-stop.c); resume from a checkpoint; at the end save the
 * weights and report the summary. What the loop counts lives
 * here; how each part is set up, printed or logged lives in the file named
 * for it.
 *
 * In a distributed job only rank 0 prints progress, writes the log,
 * evaluates and saves; the others wait for it at a final barrier (rank 0
 * may serve the store under mpirun).
 */
#include "config.h"

#include "trainer-checkpoint.h"
#include "trainer-private.h"

/* Adds a step's figures to its epoch's, all but the loss statistics,
 * which epoch_read_stats adds. Images count every rank's. */
static void epoch_add_step(EpochStats *es, const TdmStepResult *r, const TdmBatch *batch,
                           double step_s, int world)
{
    es->step++;
    es->images += r->count * world;
    es->wait_s += batch->wait_s;
    es->comm_s += r->comm_wait_s;
    es->step_s += step_s;
}

/* Adds the loss statistics of the steps since the last read to the
 * epoch's figures and the log's. The strategy keeps them on the device, so
 * this is the one wait for it: done after the steps whose report shows
 * them and at the end of the epoch, not after every step. */
static gboolean epoch_read_stats(TrainRun *run, TrainLog *log, EpochStats *es, GError **error)
{
    if (es->read_step == es->step) {
        return TRUE;
    }
    TdmStepStats st;
    if (!tdm_strategy_read_stats(run->strategy, &st, error)) {
        return FALSE;
    }
    es->loss_sum += st.loss_sum;
    es->correct += st.correct;
    es->read_step = es->step;
    tdm_train_log_stats(log, run, es, &st);
    return TRUE;
}

/* Adds a finished epoch to the run's figures (its loss: the mean over this
 * rank's share) and returns its seconds. */
static double epoch_end(const EpochStats *es, TdmTrainSummary *sum, int world)
{
    const double seconds = tdm_time_now() - es->start;
    const double local_images = (double)es->images / world;
    sum->train_seconds += seconds;
    sum->images += es->images;
    sum->final_loss = es->images > 0 ? (float)(es->loss_sum / local_images) : 0.0f;
    return seconds;
}

gboolean tdm_trainer_run(const TdmTrainConfig *cfg, TdmTrainSummary *summary, GError **error)
{
    g_return_val_if_fail(cfg != NULL, FALSE);
    TrainRun run = {.cfg = cfg};
    TrainLog *log = NULL;
    TrainCkpt *ckpt = NULL; /* checkpoints and resuming: core/trainer-checkpoint.c */
    TdmTrainSummary sum = {.test_accuracy = -1.0, .test_loss = -1.0};
    int64_t updates = 0; /* optimizer updates so far: the schedule's clock */
    EarlyStop early;
    gboolean ok = FALSE;

    tdm_train_early_stop_init(&early, &run);

    /* Setup, in the order its errors come: who this process is and its
     * devices, the data, the model, the optimizer and its schedule, the
     * checkpoint to resume from (weights and data position before the
     * strategy, which may copy them; the optimizer's state after it), the
     * strategy, and the log (train.save is checked with it). */
    if (!tdm_train_setup_process(&run, error) || !tdm_train_setup_data(&run, error) ||
        !tdm_train_setup_model(&run, error) || !tdm_train_setup_optimizer(&run, error) ||
        (ckpt = tdm_train_ckpt_new(&run, error)) == NULL ||
        !tdm_train_setup_strategy(&run, error) ||
        !tdm_train_ckpt_restore_optimizer(ckpt, &run, error) ||
        (log = tdm_train_log_new(&run, error)) == NULL) {
        goto out;
    }
    tdm_train_log_start(log, &run);
    const int world = run.env.world_size;
    tdm_train_ckpt_counters(ckpt, &sum, &updates);
    gboolean first = TRUE; /* before the first step of this process */
    gboolean stop = cfg->max_steps > 0 && sum.steps >= cfg->max_steps; /* train.max_steps */
    int last_epoch = tdm_train_ckpt_first_epoch(ckpt); /* the last epoch run */
    gboolean ended = FALSE;         /* the strategy's end of training has run */
    gboolean stopped_early = FALSE; /* by early stopping, after an evaluation */

    /* The loop: epochs x steps. */
    for (int epoch = tdm_train_ckpt_first_epoch(ckpt); epoch < cfg->epochs && !stop; epoch++) {
        if (!tdm_loader_start_epoch(run.train_loader, epoch, error)) {
            goto out;
        }
        tdm_model_set_training(run.model, TRUE);
        EpochStats es = {.epoch = epoch, .start = tdm_time_now()};
        tdm_train_ckpt_resume_epoch(ckpt, &es);
        GError *load_error = NULL;
        for (TdmBatch *batch; (batch = tdm_loader_next(run.train_loader, &load_error)) != NULL;) {
            if (first) {
                sum.first_step_s = tdm_time_since_start();
                first = FALSE;
            }
            /* the optimizer updates every train.accumulate steps and at the
             * epoch's end; the schedule counts updates */
            const gboolean update = (es.step + 1) % run.accumulate == 0 ||
                                    es.step + 1 == run.steps_per_epoch;
            tdm_schedule_apply(&run.schedule, run.optimizer, updates);
            TdmStepResult r = {0};
            const double step_start = tdm_time_now();
            if (!tdm_strategy_train_step(run.strategy, batch, update, &r, error)) {
                goto out;
            }
            const double step_s = tdm_time_now() - step_start;
            updates += update ? 1 : 0;
            sum.steps++;
            epoch_add_step(&es, &r, batch, step_s, world);
            if ((es.step == run.steps_per_epoch || tdm_train_log_wants_stats(log, &run, &es) ||
                 tdm_train_ckpt_due(ckpt, sum.steps)) &&
                !epoch_read_stats(&run, log, &es, error)) {
                goto out;
            }
            tdm_train_log_step(log, &run, &es, batch, &r, step_s, sum.steps);
            if (!tdm_train_ckpt_after_step(ckpt, &run, &es, &sum, updates, &stop, error)) {
                goto out;
            }
            if (stop) {
                break;
            }
        }
        last_epoch = epoch;
        if (stop && es.step < run.steps_per_epoch) {
            /* stopped mid-epoch: its figures count, but there is no epoch
             * report or evaluation */
            if (!epoch_read_stats(&run, log, &es, error)) {
                goto out;
            }
            (void)epoch_end(&es, &sum, world);
            break;
        }
        /* tdm_loader_next returns NULL with an error on failure. */
        if (load_error != NULL) {
            g_propagate_error(error, load_error);
            goto out;
        }
        /* the strategy's end of epoch: before the evaluation and the
         * epoch's checkpoint; in the last epoch (by count, or the step
         * budget spent at its end) the end of training too, so that the
         * final evaluation sees the weights --save writes (an EMA or SWA
         * strategy swaps its average in there) */
        if (!tdm_strategy_end(run.strategy, TDM_STRATEGY_END_EPOCH, epoch, error) ||
            ((epoch + 1 == cfg->epochs || stop) &&
             !(ended = tdm_strategy_end(run.strategy, TDM_STRATEGY_END_TRAINING, epoch, error))) ||
            !epoch_read_stats(&run, log, &es, error)) {
            goto out;
        }
        const double seconds = epoch_end(&es, &sum, world);
        tdm_train_log_epoch(log, &run, &es, &sum, seconds);

        /* Evaluation on the test split after each epoch (rank 0). */
        if (run.test_loader != NULL) {
            if (!tdm_model_evaluate(run.model, run.test_loader, &sum.test_accuracy, &sum.test_loss,
                                    error)) {
                goto out;
            }
            tdm_train_log_eval(log, &run, epoch, &sum);
        }
        if (!tdm_train_ckpt_after_epoch(ckpt, &run, &es, &sum, run.test_loader != NULL, error)) {
            goto out;
        }
        /* train.early_stop_patience: rank 0 judges, every rank stops with it. */
        gboolean stop = FALSE;
        if (epoch + 1 < cfg->epochs &&
            !tdm_train_early_stop(&early, &run, log, epoch, &sum, &stop, error)) {
            goto out;
        }
        if (stop) {
            stopped_early = TRUE;
            break;
        }
    }
    /* A run that stopped early (early stopping, or mid-epoch) ends here,
     * before the final checkpoint and --save: every rank's model is then
     * the same. Early stopping has evaluated the model already: when the
     * strategy has an end hook, which may change the weights, evaluate
     * again, so that the summary describes the weights saved. */
    if (!ended) {
        if (!tdm_strategy_end(run.strategy, TDM_STRATEGY_END_TRAINING, last_epoch, error)) {
            goto out;
        }
        if (stopped_early && run.test_loader != NULL && tdm_strategy_has_end(run.strategy)) {
            if (!tdm_model_evaluate(run.model, run.test_loader, &sum.test_accuracy,
                                    &sum.test_loss, error)) {
                goto out;
            }
            tdm_train_log_eval(log, &run, last_epoch, &sum);
        }
    }
    if (!tdm_train_ckpt_finish(ckpt, &run, error)) {
        goto out;
    }

    char *save = tdm_train_save_path(&run); /* no g_autofree: the gotos above skip it */
    gboolean saved = save == NULL || tdm_model_save(run.model, save, error);
    g_free(save);
    if (!saved) {
        goto out;
    }
    /* The others wait for rank 0's evaluation and save, and rank 0 keeps
     * serving the store until everyone is done with it. */
    if (run.comm != NULL && !tdm_comm_barrier(run.comm, error)) {
        goto out;
    }
    sum.images_per_s = sum.train_seconds > 0 ? (double)sum.images / sum.train_seconds : 0.0;
    tdm_train_log_summary(log, &run, &sum);
    if (summary != NULL) {
        *summary = sum;
    }
    ok = TRUE;

out:
    tdm_train_early_stop_clear(&early);
    tdm_train_log_free(log);
    tdm_train_ckpt_free(ckpt);
    tdm_train_run_clear(&run);
    return ok;
}
