/* tandem/params.h - one grammar for the parameters of every feature.
 *
 * Transforms, datasets, strategies and optimizers take their parameters
 * the same way: "name key=value value ...", e.g.
 *
 *   random-crop 28 pad=2             (a transform in a pipeline)
 *   imagefolder path=DIR size=first  (--dataset; "imagefolder DIR" too)
 *   ddp bucket-mb=25                 (--strategy)
 *   sgd momentum=0.9 nesterov=true   (--optimizer)
 *
 * The feature's TdmParamSpec list (<tandem/plugin.h>) says which keys it
 * takes, their types, defaults and accepted ranges; values without "key="
 * go to the parameters flagged TDM_PARAM_POSITIONAL, in order. A list is
 * written with commas ("mean=0.5, 0.5, 0.5": spaces after a comma are part
 * of the value); a value with spaces may be quoted ('...' or "..."). For a
 * parameter that is neither required nor a string, the value "none" means
 * "not given". Every error is TDM_ERROR_INVALID_ARG and names the feature,
 * the key, the value and what is accepted:
 *
 *   ddp: bucket-mb=-3: expected a number in [0.001, 1024]
 *   hflip: unknown parameter 'q' (column 7); known: p
 *
 * The result is a TdmParams: the values bound to the specs, defaults
 * applied, read back with typed getters. Asking a getter for a key the
 * specs do not have, or for the wrong type, is a programming error
 * (g_critical) and returns 0 / NULL.
 */
#ifndef TANDEM_PARAMS_H
#define TANDEM_PARAMS_H

#include <tandem/plugin.h>

G_BEGIN_DECLS

/* Parse "name key=value ..." where `name` is a feature of `kind` found in
 * the registry, binding the rest to its specs. Missing required
 * parameters are an error. Transfer full. */
TDM_API TdmParams *tdm_params_parse(TdmFeatureKind kind, const char *text, GError **error);

/* Bind `args` ("key=value value ...", without a name; NULL or "" = none) to
 * `specs` (NULL = no parameters; either TdmParamSpec layout) of a feature
 * called `feature` (used in messages). Missing required parameters are an
 * error. Transfer full. */
TDM_API TdmParams *tdm_params_parse_args(const char *feature, const TdmParamSpec *specs,
                                         const char *args, GError **error);

/* Every parameter of `specs` at its default, nothing given yet; NULL with
 * an error when the specs are malformed (see tdm_plugin_add_feature).
 * Transfer full. */
TDM_API TdmParams *tdm_params_new(const char *feature, const TdmParamSpec *specs,
                                  GError **error);
TDM_API TdmParams *tdm_params_ref(TdmParams *params);
TDM_API void tdm_params_unref(TdmParams *params);

/* Give parameter `key` (an alias works too; NULL: the next positional
 * parameter) the text `value`, checked against its spec. `column` (1-based,
 * 0 = none) is where the value stands in the user's text; messages name
 * it. Giving a key twice is an error. */
TDM_API gboolean tdm_params_set(TdmParams *params, const char *key, const char *value,
                                int column, GError **error);
/* Replace the default of `key` (checked like a value): what the caller's
 * own settings say (a config file's optim.lr, say), which the user's
 * text may still override. Not counted as given. */
TDM_API gboolean tdm_params_set_default(TdmParams *params, const char *key, const char *value,
                                        GError **error);
/* FALSE with an error naming the first required parameter not given. */
TDM_API gboolean tdm_params_check_required(const TdmParams *params, GError **error);

/* The feature's name (transfer none). */
TDM_API const char *tdm_params_get_name(const TdmParams *params);
/* The specs in the current layout, ending with a NULL name (transfer none). */
TDM_API const TdmParamSpec *tdm_params_get_specs(const TdmParams *params);
/* Whether the specs have a parameter `key` (not an alias). */
TDM_API gboolean tdm_params_has_key(const TdmParams *params, const char *key);
/* Whether the user gave `key` (tdm_params_set). */
TDM_API gboolean tdm_params_is_set(const TdmParams *params, const char *key);
/* Whether `key` has a value: given, or a default ("none" is no value). */
TDM_API gboolean tdm_params_has_value(const TdmParams *params, const char *key);

/* Typed values (given, else the default; 0 / FALSE / NULL without one).
 * get_float also reads an int parameter; get_string returns the text of
 * any type (transfer none). */
TDM_API gint64 tdm_params_get_int(const TdmParams *params, const char *key);
TDM_API double tdm_params_get_float(const TdmParams *params, const char *key);
TDM_API gboolean tdm_params_get_bool(const TdmParams *params, const char *key);
TDM_API const char *tdm_params_get_string(const TdmParams *params, const char *key);
/* TDM_PARAM_CHOICE: the index of the value in `choices`; -1 without one. */
TDM_API int tdm_params_get_choice(const TdmParams *params, const char *key);
/* Lists (and single numbers): up to `max` values into `out`; returns how
 * many the parameter has (0 without a value). */
TDM_API int tdm_params_get_floats(const TdmParams *params, const char *key, double *out, int max);
TDM_API int tdm_params_get_ints(const TdmParams *params, const char *key, int *out, int max);

/* A TDM_ERROR_INVALID_ARG error about the value of `key`, for checks the
 * specs cannot express: "feature: key=value (column C): <message>" (or
 * "feature: key: <message>" when it was not given). */
TDM_API void tdm_params_set_error(const TdmParams *params, const char *key, GError **error,
                                  const char *format, ...) G_GNUC_PRINTF(4, 5);

/* What a spec accepts, as `tandem inspect` shows it: "float in [0, 1]",
 * "list of 1 or 2 ints >= 1", "one of constant|edge" (transfer full). */
TDM_API char *tdm_param_spec_describe(const TdmParamSpec *spec);

/* The name at the start of "name key=value ..." (transfer full; NULL when
 * `text` does not start with one); *args (may be NULL) gets the rest. */
TDM_API char *tdm_params_split_name(const char *text, const char **args);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmParams, tdm_params_unref)

G_END_DECLS

#endif /* TANDEM_PARAMS_H */
