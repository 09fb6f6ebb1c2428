/* SPDX-License-Identifier: MIT */
/* core/select.c - the registry's priority overrides and feature selection.
 * Overrides (TDM_PLUGIN_PRIORITY, tdm_registry_set_priority) are kept apart
 * from the registered values and applied on every read, so they take effect
 * immediately; features are ordered by effective priority, then by
 * registration order. tdm_registry_select walks a spec ("auto", a list of
 * names, or "^" and names to exclude) and, when nothing fits, reports why
 * each candidate was rejected. The registry's state is in
 * core/registry-private.h.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "registry-private.h"

int registry_effective_priority_locked(const TdmFeature *f)
{
    char *qualified = g_strdup_printf("%s/%s", registry_kind_names[f->kind], f->name);
    gpointer value;
    int prio = f->priority;
    if (g_hash_table_lookup_extended(registry.priorities, qualified, NULL, &value) ||
        g_hash_table_lookup_extended(registry.priorities, f->name, NULL, &value)) {
        prio = GPOINTER_TO_INT(value);
    }
    g_free(qualified);
    return prio;
}

void registry_read_priority_env_locked(void)
{
    const char *env = g_getenv("TDM_PLUGIN_PRIORITY");
    if (env == NULL || env[0] == '\0') {
        return;
    }
    char **items = g_strsplit(env, ",", -1);
    for (char **it = items; *it != NULL; it++) {
        char *item = g_strstrip(*it);
        if (item[0] == '\0') {
            continue;
        }
        const char *colon = strrchr(item, ':');
        gint64 prio = 0;
        if (colon == NULL || colon == item ||
            !g_ascii_string_to_signed(colon + 1, 10, PRIORITY_MIN, PRIORITY_MAX, &prio, NULL)) {
            g_warning("TDM_PLUGIN_PRIORITY: ignoring '%s' (expected NAME:PRIORITY with "
                      "PRIORITY in %d..%d)",
                      item, PRIORITY_MIN, PRIORITY_MAX);
            continue;
        }
        g_hash_table_replace(registry.priorities, g_strndup(item, (gsize)(colon - item)),
                             GINT_TO_POINTER((int)prio));
    }
    g_strfreev(items);
}

static int compare_features(gconstpointer a, gconstpointer b)
{
    const TdmFeature *fa = *(TdmFeature *const *)a;
    const TdmFeature *fb = *(TdmFeature *const *)b;
    int pa = registry_effective_priority_locked(fa), pb = registry_effective_priority_locked(fb);
    if (pa != pb) {
        return pa > pb ? -1 : 1;
    }
    return fa->seq < fb->seq ? -1 : (fa->seq > fb->seq ? 1 : 0);
}

GPtrArray *registry_list_features_locked(TdmFeatureKind kind)
{
    GPtrArray *out = g_ptr_array_new();
    for (guint i = 0; i < registry.features->len; i++) {
        TdmFeature *f = g_ptr_array_index(registry.features, i);
        if (kind == TDM_FEATURE_N_KINDS || f->kind == kind) {
            g_ptr_array_add(out, f);
        }
    }
    g_ptr_array_sort(out, compare_features);
    return out;
}

/* ---- selection --------------------------------------------------------- */

typedef struct {
    TdmFeatureFilter accept;
    gpointer user_data;
    GString *why; /* "; "-separated reasons each rejected candidate got */
} Selection;

static void note_rejection(Selection *sel, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void note_rejection(Selection *sel, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (sel->why->len > 0) {
        g_string_append(sel->why, "; ");
    }
    g_string_append_vprintf(sel->why, fmt, ap);
    va_end(ap);
}

static gboolean candidate_ok_locked(Selection *sel, TdmFeature *f)
{
    const char *reason = NULL;
    if (!registry_is_available_locked(f, &reason)) {
        note_rejection(sel, "'%s' unavailable: %s", f->name, reason);
        return FALSE;
    }
    if (sel->accept != NULL && !sel->accept(f, sel->user_data)) {
        note_rejection(sel, "'%s' not suitable here", f->name);
        return FALSE;
    }
    return TRUE;
}

static TdmFeature *select_auto_locked(Selection *sel, TdmFeatureKind kind, char **excluded)
{
    GPtrArray *all = registry_list_features_locked(kind);
    TdmFeature *chosen = NULL;
    for (guint i = 0; i < all->len && chosen == NULL; i++) {
        TdmFeature *f = g_ptr_array_index(all, i);
        if (excluded != NULL && g_strv_contains((const char *const *)excluded, f->name)) {
            continue;
        }
        if (registry_effective_priority_locked(f) < 0) {
            note_rejection(sel, "'%s' is never picked automatically (priority < 0)", f->name);
            continue;
        }
        if (candidate_ok_locked(sel, f)) {
            chosen = f;
        }
    }
    g_ptr_array_unref(all);
    return chosen;
}

static char **split_list(const char *list)
{
    char **items = g_strsplit(list, ",", -1);
    guint n = 0;
    for (guint i = 0; items[i] != NULL; i++) {
        g_strstrip(items[i]);
        if (items[i][0] != '\0') {
            items[n++] = items[i];
        } else {
            g_free(items[i]);
        }
    }
    items[n] = NULL;
    return items;
}

TdmFeature *tdm_registry_select(TdmFeatureKind kind, const char *spec, TdmFeatureFilter accept,
                                gpointer user_data, GError **error)
{
    g_return_val_if_fail((unsigned)kind < TDM_FEATURE_N_KINDS, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    registry_ensure_init();

    char *trimmed = g_strstrip(g_strdup(spec != NULL ? spec : ""));
    Selection sel = {accept, user_data, g_string_new(NULL)};
    TdmFeature *chosen = NULL;
    gboolean single_unknown = FALSE;

    g_rec_mutex_lock(&registry.lock);
    if (trimmed[0] == '\0' || strcmp(trimmed, "auto") == 0) {
        chosen = select_auto_locked(&sel, kind, NULL);
    } else if (trimmed[0] == '^') {
        char **excluded = split_list(trimmed + 1);
        chosen = select_auto_locked(&sel, kind, excluded);
        g_strfreev(excluded);
    } else {
        char **items = split_list(trimmed);
        for (guint i = 0; items[i] != NULL && chosen == NULL; i++) {
            if (strcmp(items[i], "auto") == 0) {
                chosen = select_auto_locked(&sel, kind, NULL);
                continue;
            }
            TdmFeature *f = registry_find_locked(kind, items[i]);
            if (f == NULL) {
                note_rejection(&sel, "'%s' unknown", items[i]);
                single_unknown = items[1] == NULL;
            } else if (candidate_ok_locked(&sel, f)) {
                chosen = f;
            }
        }
        g_strfreev(items);
    }
    if (chosen == NULL) {
        if (single_unknown) {
            registry_set_not_found_locked(kind, trimmed, error);
        } else {
            char *known = registry_known_names_locked(kind);
            const char *why = sel.why->str;
            if (sel.why->len == 0) {
                why = trimmed[0] == '^' ? "every candidate is excluded" : "none registered";
            }
            g_set_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE,
                        "no %s available for '%s': %s (known: %s)", registry_kind_names[kind],
                        trimmed[0] != '\0' ? trimmed : "auto", why, known);
            g_free(known);
        }
    }
    g_rec_mutex_unlock(&registry.lock);
    g_string_free(sel.why, TRUE);
    g_free(trimmed);
    return chosen;
}

void tdm_registry_set_priority(const char *feature_name, int priority)
{
    g_return_if_fail(feature_name != NULL);
    g_rec_mutex_lock(&registry.lock);
    registry_ensure_tables_locked();
    g_hash_table_replace(registry.priorities, g_strdup(feature_name),
                         GINT_TO_POINTER(CLAMP(priority, PRIORITY_MIN, PRIORITY_MAX)));
    g_rec_mutex_unlock(&registry.lock);
}

