/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-params.c - libFuzzer target for the parameter grammar
 * (<tandem/params.h>): "name key=value ..." for a strategy, an optimizer, a
 * dataset reader or a transform (the name as the registry has it), and the
 * arguments alone against a spec list with every type.
 *
 * Not built by make; from a build directory (the plugins must be found,
 * hence TDM_PLUGIN_SYSTEM_PATH):
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-params.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-params
 *   TDM_PLUGIN_SYSTEM_PATH=plugins/.libs LD_LIBRARY_PATH=core/.libs \
 *     ./fuzz-params corpus/
 * Seeds: one string per file, e.g. "ddp bucket-mb=25", "sgd momentum=0.9
 * nesterov=true", "imagefolder path='/a b' size=first". The first byte picks
 * the kind (or, past the last kind, the all-types spec list); the rest is
 * the text. Parsing either succeeds, and then every getter of every
 * parameter returns what its spec allows, or fails with a non-empty message
 * naming the feature.
 */
#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static const TdmParamSpec all_types[] = {
    TDM_PARAM_SPEC_INT("n", TDM_PARAM_POSITIONAL, "3", 1, 10, ""),
    TDM_PARAM_SPEC_FLOAT("x", TDM_PARAM_MIN_EXCLUSIVE, "0.5", 0, 1, ""),
    TDM_PARAM_SPEC_BOOL("b", 0, "false", ""),
    TDM_PARAM_SPEC_CHOICE("c", 0, "a", "a|b|c", ""),
    TDM_PARAM_SPEC_INTS("i", TDM_PARAM_POSITIONAL, NULL, 1, 4, 0, INFINITY, ""),
    TDM_PARAM_SPEC_FLOATS("f", 0, "1,2", 2, 2, -5, 5, ""),
    TDM_PARAM_SPEC_STRING("s", 0, NULL, ""),
    TDM_PARAM_SPEC_END,
};

/* Every value is what its spec allows. */
static void check_values(const TdmParams *p)
{
    for (const TdmParamSpec *s = tdm_params_get_specs(p); s->name != NULL; s++) {
        g_autofree char *what = tdm_param_spec_describe(s);
        g_assert(what != NULL && what[0] != '\0');
        gboolean has = tdm_params_has_value(p, s->name);
        const char *text = tdm_params_get_string(p, s->name);
        g_assert(has == (text != NULL));
        double v[8];
        int n = 0;
        switch (s->type) {
        case TDM_PARAM_INT:
        case TDM_PARAM_FLOAT: {
            double f = tdm_params_get_float(p, s->name);
            g_assert(isfinite(f));
            g_assert(!has || s->min == s->max || (f >= s->min && f <= s->max));
            break;
        }
        case TDM_PARAM_BOOL:
            (void)tdm_params_get_bool(p, s->name);
            break;
        case TDM_PARAM_CHOICE:
            g_assert((tdm_params_get_choice(p, s->name) >= 0) == has);
            break;
        case TDM_PARAM_INTS:
        case TDM_PARAM_FLOATS:
            n = tdm_params_get_floats(p, s->name, v, 8);
            g_assert(!has || n >= MAX(s->min_count, 1));
            g_assert(!has || s->max_count == 0 || n <= s->max_count);
            for (int k = 0; k < MIN(n, 8); k++) {
                g_assert(isfinite(v[k]));
            }
            break;
        default:
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    static const TdmFeatureKind kinds[] = {TDM_FEATURE_STRATEGY, TDM_FEATURE_OPTIMIZER,
                                           TDM_FEATURE_DATASET, TDM_FEATURE_TRANSFORM};
    if (size < 1 || size > 4096) {
        return 0;
    }
    static gboolean ready = FALSE;
    if (!ready) {
        ready = tdm_registry_init(NULL);
    }
    guint which = data[0] % (G_N_ELEMENTS(kinds) + 1);
    char *text = g_strndup((const char *)data + 1, size - 1);
    GError *error = NULL;
    TdmParams *p = which < G_N_ELEMENTS(kinds)
                       ? tdm_params_parse(kinds[which], text, &error)
                       : tdm_params_parse_args("fuzz", all_types, text, &error);
    if (p == NULL) {
        g_assert(error != NULL && error->message != NULL && error->message[0] != '\0');
        g_clear_error(&error);
    } else {
        g_assert(error == NULL);
        check_values(p);
        tdm_params_unref(p);
    }
    g_free(text);
    return 0;
}
