/* SPDX-License-Identifier: MIT */
/* core/trainer-stop.c - early stopping (train.early_stop_patience): the
 * run ends when the test accuracy has not improved for N evaluations in a
 * row, as the early-stopping callbacks of Keras and PyTorch Lightning do
 * with a patience of N and no minimum delta (better means strictly
 * higher; the first evaluation sets the mark).
 *
 * Only rank 0 evaluates, so only rank 0 can judge; the other ranks would
 * otherwise go on into the next epoch and wait forever in its first
 * collective for a rank 0 that has left. So after each epoch every rank
 * takes part in one broadcast of rank 0's verdict (a single float on the
 * device, the job's communicator), and all stop together, or none. With
 * patience 0 nothing is judged and nothing is communicated.
 */
#include "config.h"

#include "trainer-private.h"

/* Rank 0's judgement of the evaluation just made. */
static gboolean judge(EarlyStop *es, int epoch, const TdmTrainSummary *sum)
{
    if (es->best_epoch < 0 || sum->test_accuracy > es->best_accuracy) {
        es->best_accuracy = sum->test_accuracy;
        es->best_epoch = epoch;
        es->since_best = 0;
        return FALSE;
    }
    es->since_best++;
    return es->since_best >= es->patience;
}

/* Every rank gets rank 0's `*stop`. */
static gboolean share_verdict(EarlyStop *es, const TrainRun *run, gboolean *stop, GError **error)
{
    if (es->flag == NULL) {
        int64_t shape[1] = {1};
        if ((es->flag = tdm_tensor_new(run->dev, TDM_DTYPE_F32, 1, shape, error)) == NULL) {
            return FALSE;
        }
    }
    float v = *stop ? 1.0f : 0.0f;
    if (!tdm_tensor_write(es->flag, &v, error) ||
        !tdm_comm_broadcast(run->comm, es->flag, 0, error) ||
        !tdm_tensor_read(es->flag, &v, error)) {
        g_prefix_error(error,
                       "rank %d of %d: early stopping: sharing rank 0's decision: ", run->env.rank,
                       run->env.world_size);
        return FALSE;
    }
    *stop = v != 0.0f;
    return TRUE;
}

void tdm_train_early_stop_init(EarlyStop *es, const TrainRun *run)
{
    es->patience = run->cfg->early_stop_patience;
    es->best_accuracy = -1.0;
    es->best_epoch = -1;
    es->since_best = 0;
    es->flag = NULL;
}

gboolean tdm_train_early_stop(EarlyStop *es, const TrainRun *run, TrainLog *log, int epoch,
                              const TdmTrainSummary *sum, gboolean *stop, GError **error)
{
    *stop = FALSE;
    if (es->patience <= 0) {
        return TRUE;
    }
    if (run->test_loader != NULL) {
        *stop = judge(es, epoch, sum);
    }
    if (run->comm != NULL && !share_verdict(es, run, stop, error)) {
        return FALSE;
    }
    if (*stop) {
        tdm_train_log_early_stop(log, run, epoch, es);
    }
    return TRUE;
}

void tdm_train_early_stop_clear(EarlyStop *es)
{
    g_clear_pointer(&es->flag, tdm_tensor_unref);
}
