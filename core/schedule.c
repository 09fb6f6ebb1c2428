/* SPDX-License-Identifier: MIT */
/* core/schedule.c - learning-rate schedules: constant, step decay (per
 * epoch, as PyTorch's StepLR) and cosine annealing to min_lr, each with an
 * optional linear warmup over the first warmup_steps steps (lr * (step+1) /
 * (warmup+1): it never trains a step with lr 0). The learning rate is a pure function of the global step, so resuming from a
 * checkpoint needs nothing but the step.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "internal.h"

gboolean tdm_schedule_kind_parse(const char *s, TdmScheduleKind *kind, GError **error)
{
    static const struct {
        const char *name;
        TdmScheduleKind kind;
    } kinds[] = {
        {"constant", TDM_SCHEDULE_CONSTANT},
        {"step", TDM_SCHEDULE_STEP},
        {"cosine", TDM_SCHEDULE_COSINE},
    };
    for (guint i = 0; s != NULL && i < G_N_ELEMENTS(kinds); i++) {
        if (strcmp(s, kinds[i].name) == 0) {
            *kind = kinds[i].kind;
            return TRUE;
        }
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                "unknown learning-rate schedule '%s' (known: constant, step, cosine)",
                s != NULL ? s : "(null)");
    return FALSE;
}

float tdm_schedule_lr(const TdmSchedule *s, int64_t step)
{
    g_return_val_if_fail(s != NULL, 0.0f);
    if (step < 0) {
        step = 0;
    }
    if (s->warmup_steps > 0 && step < s->warmup_steps) {
        return s->base_lr * (float)((double)(step + 1) / (double)(s->warmup_steps + 1));
    }
    switch (s->kind) {
    case TDM_SCHEDULE_CONSTANT:
        break;
    case TDM_SCHEDULE_STEP: {
        int64_t per_epoch = s->steps_per_epoch > 0 ? s->steps_per_epoch : 1;
        int64_t epoch = step / per_epoch;
        if (s->step_size <= 0) {
            break;
        }
        int64_t k = epoch / s->step_size;
        return (float)((double)s->base_lr * pow((double)s->gamma, (double)k));
    }
    case TDM_SCHEDULE_COSINE: {
        int64_t span = s->total_steps - (s->warmup_steps > 0 ? s->warmup_steps : 0);
        if (span <= 0) {
            return s->min_lr;
        }
        double t = (double)(step - (s->warmup_steps > 0 ? s->warmup_steps : 0)) / (double)span;
        if (t > 1.0) {
            t = 1.0;
        }
        return (float)((double)s->min_lr +
                       0.5 * ((double)s->base_lr - (double)s->min_lr) * (1.0 + cos(G_PI * t)));
    }
    }
    return s->base_lr;
}
