/* SPDX-License-Identifier: MIT */
/* core/optim-groups.c - learning-rate groups: PyTorch's parameter groups
 * for the one setting fine-tuning varies, the learning rate.
 *
 * "fc=0.01,layer4=0.001" gives every parameter whose full name starts with
 * "fc" the rate 0.01 and those under "layer4" 0.001; the others keep the
 * optimizer's own (opt->lr). Prefixes are matched as model.freeze matches
 * them (tdm_name_prefix_match), and where two match, the longer wins, so
 * "layer4=0.001,layer4.1=0.01" carves one block out of a stage. Each
 * optimizer records the group of each of its parameters once, when the
 * groups are set (or shared, for a ZeRO shard whose parameters are slices
 * that the strategy places itself), so a step only looks its rates up.
 * The rates live in one table shared by the optimizers of a model, which
 * the schedule sets every step (tdm_schedule_apply, at the end: each group
 * runs the schedule from its own rate, as PyTorch's schedulers do).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim-private.h"

static OptimLrGroups *groups_ref(OptimLrGroups *g)
{
    g_atomic_int_inc(&g->ref_count);
    return g;
}

static void groups_unref(OptimLrGroups *g)
{
    if (g == NULL || !g_atomic_int_dec_and_test(&g->ref_count)) {
        return;
    }
    g_strfreev(g->prefixes);
    g_free(g->base_lr);
    g_free(g->lr);
    g_free(g);
}

OptimCore *tdm_optimizer_core(TdmOptimizer *opt)
{
    if (opt->core == NULL) {
        OptimCore *c = g_new0(OptimCore, 1);
        c->grad_norm = -1.0;
        opt->core = c;
    }
    return opt->core;
}

void tdm_optimizer_core_free(TdmOptimizer *opt)
{
    OptimCore *c = opt->core;
    if (c == NULL) {
        return;
    }
    groups_unref(c->groups);
    g_free(c->param_group);
    g_clear_pointer(&c->norm_sum, tdm_tensor_unref);
    g_free(c);
    opt->core = NULL;
}

gboolean tdm_optimizer_has_lr_groups(const TdmOptimizer *opt)
{
    const OptimCore *c = opt->core;
    return c != NULL && c->groups != NULL;
}

/* The list parsed: every non-empty entry PREFIX=LR, the rate a number
 * >= 0, no prefix twice (transfer full; NULL with the error set). */
static OptimLrGroups *groups_parse(const char *text, GError **error)
{
    g_auto(GStrv) entries = g_strsplit(text, ",", -1);
    GPtrArray *prefixes = g_ptr_array_new_with_free_func(g_free);
    GArray *rates = g_array_new(FALSE, FALSE, sizeof(float));
    gboolean ok = TRUE;
    for (char **e = entries; ok && *e != NULL; e++) {
        g_strstrip(*e);
        if ((*e)[0] == '\0') {
            continue;
        }
        char *eq = strchr(*e, '=');
        g_autofree char *prefix = eq != NULL ? g_strndup(*e, (gsize)(eq - *e)) : NULL;
        if (prefix == NULL || g_strstrip(prefix)[0] == '\0') {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "'%s': expected PREFIX=LR, e.g. fc=0.01", *e);
            ok = FALSE;
            break;
        }
        const char *value = eq + 1;
        char *end = NULL;
        while (g_ascii_isspace(*value)) {
            value++;
        }
        double lr = g_ascii_strtod(value, &end);
        while (end != NULL && g_ascii_isspace(*end)) {
            end++;
        }
        if (end == value || end == NULL || *end != '\0' || !isfinite(lr) || lr < 0.0 || lr > 1e6) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "'%s': the learning rate of '%s' must be a number in [0, 1e6]", *e, prefix);
            ok = FALSE;
            break;
        }
        for (guint i = 0; i < prefixes->len; i++) {
            if (strcmp(g_ptr_array_index(prefixes, i), prefix) == 0) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "'%s': the prefix '%s' has a learning rate already", *e, prefix);
                ok = FALSE;
                break;
            }
        }
        if (!ok) {
            break;
        }
        float rate = (float)lr;
        g_ptr_array_add(prefixes, g_steal_pointer(&prefix));
        g_array_append_val(rates, rate);
    }
    OptimLrGroups *g = NULL;
    if (ok && prefixes->len > 0) {
        g = g_new0(OptimLrGroups, 1);
        g->ref_count = 1;
        g->n = prefixes->len;
        g_ptr_array_add(prefixes, NULL);
        g->prefixes = (char **)g_ptr_array_free(prefixes, FALSE);
        g->base_lr = g_memdup2(rates->data, sizeof(float) * g->n);
        g->lr = g_memdup2(rates->data, sizeof(float) * g->n);
        prefixes = NULL;
    } else if (ok) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "'%s': no PREFIX=LR entry", text);
    }
    if (prefixes != NULL) {
        g_ptr_array_unref(prefixes);
    }
    g_array_unref(rates);
    return g;
}

static const char *param_name(const TdmParam *p)
{
    return p->full_name != NULL ? p->full_name : p->name;
}

/* Every parameter of `opt` in its group by name. */
static void assign_by_name(TdmOptimizer *opt, OptimCore *c)
{
    g_free(c->param_group);
    c->param_group = g_new0(int, MAX(opt->params->len, 1));
    for (guint i = 0; i < opt->params->len; i++) {
        c->param_group[i] = tdm_optimizer_lr_group_of(opt, param_name(opt->params->pdata[i]));
    }
}

/* Each group names at least one trainable parameter of `params`. */
static gboolean check_groups(const OptimLrGroups *g, GPtrArray *params, GError **error)
{
    for (guint k = 0; k < g->n; k++) {
        gboolean taken = FALSE, frozen = FALSE, longer = FALSE;
        for (guint i = 0; i < params->len && !taken; i++) {
            const TdmParam *p = g_ptr_array_index(params, i);
            if (p->is_buffer || !g_str_has_prefix(param_name(p), g->prefixes[k])) {
                continue;
            }
            if (tdm_name_prefix_match(g->prefixes, param_name(p)) != (int)k) {
                longer = TRUE;
            } else if (!p->requires_grad) {
                frozen = TRUE;
            } else {
                taken = TRUE;
            }
        }
        if (!taken) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                        "'%s=%g' names no trainable parameter%s", g->prefixes[k],
                        (double)g->base_lr[k],
                        frozen   ? " (the parameters it names are frozen: model.freeze)"
                        : longer ? " (a longer prefix takes every parameter it names)"
                                 : "");
            return FALSE;
        }
    }
    return TRUE;
}

gboolean tdm_optimizer_set_lr_groups(TdmOptimizer *opt, TdmModel *model, const char *groups,
                                     GError **error)
{
    g_return_val_if_fail(opt != NULL, FALSE);
    OptimCore *c = opt->core;
    if (groups == NULL || groups[0] == '\0') {
        if (c != NULL) {
            g_clear_pointer(&c->groups, groups_unref);
            g_clear_pointer(&c->param_group, g_free);
        }
        return TRUE;
    }
    if (opt->klass != &tdm_sgd_class && opt->klass != &tdm_adamw_class) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "optimizer %s trains every parameter at one learning rate: groups need sgd "
                    "or adamw",
                    tdm_params_get_name(opt->hparams));
        return FALSE;
    }
    OptimLrGroups *g = groups_parse(groups, error);
    if (g == NULL) {
        return FALSE;
    }
    if (!check_groups(g, model != NULL ? model->params : opt->params, error)) {
        groups_unref(g);
        return FALSE;
    }
    c = tdm_optimizer_core(opt);
    groups_unref(c->groups);
    c->groups = g;
    assign_by_name(opt, c);
    return TRUE;
}

int tdm_optimizer_lr_group_of(const TdmOptimizer *opt, const char *full_name)
{
    g_return_val_if_fail(opt != NULL && full_name != NULL, 0);
    const OptimCore *c = opt->core;
    if (c == NULL || c->groups == NULL) {
        return 0;
    }
    return tdm_name_prefix_match(c->groups->prefixes, full_name) + 1;
}

void tdm_optimizer_share_lr_groups(TdmOptimizer *dst, TdmOptimizer *src)
{
    g_return_if_fail(dst != NULL && src != NULL);
    const OptimCore *sc = src->core;
    OptimCore *dc = tdm_optimizer_core(dst);
    OptimLrGroups *g = sc != NULL && sc->groups != NULL ? groups_ref(sc->groups) : NULL;
    groups_unref(dc->groups);
    dc->groups = g;
    if (g == NULL) {
        g_clear_pointer(&dc->param_group, g_free);
    } else {
        assign_by_name(dst, dc);
    }
}

gboolean tdm_optimizer_set_param_lr_group(TdmOptimizer *opt, const TdmParam *p, int group,
                                          GError **error)
{
    g_return_val_if_fail(opt != NULL && p != NULL, FALSE);
    OptimCore *c = tdm_optimizer_core(opt);
    guint n = c->groups != NULL ? c->groups->n : 0;
    guint index = 0;
    if (group < 0 || (guint)group > n || !g_ptr_array_find(opt->params, p, &index)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "learning-rate group %d of %s: %s",
                    group, param_name(p),
                    group < 0 || (guint)group > n ? "no such group"
                                                  : "not a parameter this optimizer trains");
        return FALSE;
    }
    if (c->param_group == NULL) {
        c->param_group = g_new0(int, MAX(opt->params->len, 1));
    }
    c->param_group[index] = group;
    return TRUE;
}

float tdm_optimizer_param_lr(const TdmOptimizer *opt, guint index)
{
    g_return_val_if_fail(opt != NULL, 0.0f);
    const OptimCore *c = opt->core;
    if (c == NULL || c->groups == NULL || c->param_group == NULL || index >= opt->params->len ||
        c->param_group[index] == 0) {
        return opt->lr;
    }
    return c->groups->lr[c->param_group[index] - 1];
}

void tdm_schedule_apply(const TdmSchedule *s, TdmOptimizer *opt, int64_t step)
{
    g_return_if_fail(s != NULL && opt != NULL);
    opt->lr = tdm_schedule_lr(s, step);
    OptimCore *c = opt->core;
    if (c == NULL || c->groups == NULL) {
        return;
    }
    TdmSchedule group = *s;
    for (guint k = 0; k < c->groups->n; k++) {
        group.base_lr = c->groups->base_lr[k];
        c->groups->lr[k] = tdm_schedule_lr(&group, step);
    }
}
