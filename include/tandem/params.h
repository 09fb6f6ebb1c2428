/* SPDX-License-Identifier: MIT */
/**
 * SECTION:params
 * @title: Parameters
 * @short_description: one grammar for the parameters of every feature
 * @include: tandem/tandem.h
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
 * of the value); a value with spaces may be quoted ('...' or "...").
 *
 * The value "none" (not for a string or a choice, where it is text) means
 * "no value": accepted for a parameter without a default (the same as not
 * giving it) and for one whose spec has %TDM_PARAM_ALLOW_NONE (the feature
 * reads it as "off" with tdm_params_has_value()); refused for a required
 * parameter and for one with a default and no %TDM_PARAM_ALLOW_NONE. So a
 * getter never returns a number outside the spec's range unless the spec
 * has no default and no value was given (then it returns 0).
 *
 * Every error is TDM_ERROR_INVALID_ARG and names the feature, the key, the
 * value and what is accepted; the column is named only where the text is
 * part of a longer line the user must search (a transform pipeline):
 *
 *   ddp: bucket-mb=-3: expected a number in [0.001, 1024]
 *   localsgd: sync-every=none: expected an integer in [1, 1000000] ('none' is not accepted)
 *   hflip: unknown parameter 'q' (column 7); known: p      (in a pipeline)
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

/**
 * tdm_params_parse:
 * @kind: the kind of feature named
 * @text: "name key=value ...", where name is a feature of @kind in the
 *   registry
 * @error: return location for a #GError, or NULL
 *
 * Parses a feature's name and parameters, binding the parameters to the
 * feature's specs.
 *
 * Returns: (transfer full): the values, or NULL with
 * %TDM_ERROR_INVALID_ARG (a bad or missing required parameter, naming the
 * feature, the key, the value and what is accepted) or %TDM_ERROR_NOT_FOUND
 * (no such feature)
 */
TDM_API TdmParams *tdm_params_parse(TdmFeatureKind kind, const char *text, GError **error);

/**
 * tdm_params_parse_args:
 * @feature: the feature's name, for messages
 * @specs: (nullable): its specs (either #TdmParamSpec layout); NULL: no
 *   parameters
 * @args: (nullable): "key=value value ...", without a name; NULL or "": none
 * @error: return location for a #GError, or NULL
 *
 * Binds @args to @specs.
 *
 * Returns: (transfer full): the values, or NULL with %TDM_ERROR_INVALID_ARG
 * (a bad or missing required parameter)
 */
TDM_API TdmParams *tdm_params_parse_args(const char *feature, const TdmParamSpec *specs,
                                         const char *args, GError **error);

/**
 * tdm_params_new:
 * @feature: the feature's name, for messages
 * @specs: (nullable): its specs (either layout)
 * @error: return location for a #GError, or NULL
 *
 * Every parameter of @specs at its default, nothing given yet.
 *
 * Returns: (transfer full): the values, or NULL with an error when the
 * specs are malformed (see tdm_plugin_add_feature())
 */
TDM_API TdmParams *tdm_params_new(const char *feature, const TdmParamSpec *specs,
                                  GError **error);
/**
 * tdm_params_ref:
 * @params: values
 *
 * Takes a reference.
 *
 * Returns: (transfer full): @params
 */
TDM_API TdmParams *tdm_params_ref(TdmParams *params);
/**
 * tdm_params_unref:
 * @params: (transfer full) (nullable): values
 *
 * Drops a reference.
 */
TDM_API void tdm_params_unref(TdmParams *params);

/**
 * tdm_params_set:
 * @params: values
 * @key: (nullable): a key or an alias; NULL: the next positional parameter
 * @value: the text of the value
 * @column: where the value stands in the user's text (1-based; 0: none),
 *   for messages
 * @error: return location for a #GError, or NULL
 *
 * Gives a parameter a value, checked against its spec.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG: an unknown key, a
 * key given twice, a value the spec refuses
 */
TDM_API gboolean tdm_params_set(TdmParams *params, const char *key, const char *value,
                                int column, GError **error);
/**
 * tdm_params_set_default:
 * @params: values
 * @key: a key
 * @value: the new default, checked like a value
 * @error: return location for a #GError, or NULL
 *
 * Replaces the default of @key: what the caller's own settings say (a
 * config file's optim.lr, say), which the user's text may still override.
 * It does not count as given.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG
 */
TDM_API gboolean tdm_params_set_default(TdmParams *params, const char *key, const char *value,
                                        GError **error);
/**
 * tdm_params_check_required:
 * @params: values
 * @error: return location for a #GError, or NULL
 *
 * Checks that every required parameter was given.
 *
 * Returns: TRUE, or FALSE with an error naming the first required parameter
 * not given
 */
TDM_API gboolean tdm_params_check_required(const TdmParams *params, GError **error);

/**
 * tdm_params_get_name:
 * @params: values
 *
 * The feature's name.
 *
 * Returns: (transfer none): the name
 */
TDM_API const char *tdm_params_get_name(const TdmParams *params);
/**
 * tdm_params_get_specs:
 * @params: values
 *
 * The specs, in the current layout.
 *
 * Returns: (transfer none): the specs, ending with a NULL name
 */
TDM_API const TdmParamSpec *tdm_params_get_specs(const TdmParams *params);
/**
 * tdm_params_has_key:
 * @params: values
 * @key: a key
 *
 * Whether the specs have a parameter @key (not an alias).
 *
 * Returns: TRUE when they do
 */
TDM_API gboolean tdm_params_has_key(const TdmParams *params, const char *key);
/**
 * tdm_params_is_set:
 * @params: values
 * @key: a key
 *
 * Whether the user gave @key (tdm_params_set()).
 *
 * Returns: TRUE when given
 */
TDM_API gboolean tdm_params_is_set(const TdmParams *params, const char *key);
/**
 * tdm_params_has_value:
 * @params: values
 * @key: a key
 *
 * Whether @key has a value: given, or a default. FALSE after "none" (see
 * %TDM_PARAM_ALLOW_NONE): check it before a getter where "none" means "off".
 *
 * Returns: TRUE when it has one
 */
TDM_API gboolean tdm_params_has_value(const TdmParams *params, const char *key);

/**
 * tdm_params_get_int:
 * @params: values
 * @key: a key of an int parameter
 *
 * The value, given or else the default (also when "none" was given). A
 * key the specs do not have, or of another type, is a programming error
 * (g_critical).
 *
 * Returns: the value; 0 when there is neither a value nor a default
 */
TDM_API gint64 tdm_params_get_int(const TdmParams *params, const char *key);
/**
 * tdm_params_get_float:
 * @params: values
 * @key: a key of a float or int parameter
 *
 * The value, given or else the default (also when "none" was given).
 *
 * Returns: the value; 0 when there is neither a value nor a default
 */
TDM_API double tdm_params_get_float(const TdmParams *params, const char *key);
/**
 * tdm_params_get_bool:
 * @params: values
 * @key: a key of a bool parameter
 *
 * The value, given or else the default.
 *
 * Returns: the value; FALSE without one
 */
TDM_API gboolean tdm_params_get_bool(const TdmParams *params, const char *key);
/**
 * tdm_params_get_string:
 * @params: values
 * @key: a key of any type
 *
 * The text of the value, given or else the default.
 *
 * Returns: (transfer none) (nullable): the text; NULL without one
 */
TDM_API const char *tdm_params_get_string(const TdmParams *params, const char *key);
/**
 * tdm_params_get_choice:
 * @params: values
 * @key: a key of a %TDM_PARAM_CHOICE parameter
 *
 * Which of the spec's choices the value is.
 *
 * Returns: the index of the value in `choices`; -1 without one
 */
TDM_API int tdm_params_get_choice(const TdmParams *params, const char *key);
/**
 * tdm_params_get_floats:
 * @params: values
 * @key: a key of a list (or single number) parameter
 * @out: (out caller-allocates) (array length=max): where to put the values
 * @max: the room in @out
 *
 * Up to @max values into @out.
 *
 * Returns: how many values the parameter has (0 without a value)
 */
TDM_API int tdm_params_get_floats(const TdmParams *params, const char *key, double *out, int max);
/**
 * tdm_params_get_ints:
 * @params: values
 * @key: a key of a list (or single integer) parameter
 * @out: (out caller-allocates) (array length=max): where to put the values
 * @max: the room in @out
 *
 * Up to @max values into @out.
 *
 * Returns: how many values the parameter has (0 without a value)
 */
TDM_API int tdm_params_get_ints(const TdmParams *params, const char *key, int *out, int max);

/**
 * tdm_params_set_error:
 * @params: values
 * @key: the key whose value is wrong
 * @error: return location for a #GError, or NULL
 * @format: printf() format of the message
 * @...: its arguments
 *
 * Sets a %TDM_ERROR_INVALID_ARG error about the value of @key, for checks
 * the specs cannot express: "feature: key=value: <message>" (with
 * " (column C)" after the value when it was set with a column, as in a
 * transform pipeline), or "feature: key: <message>" when it was not given.
 */
TDM_API void tdm_params_set_error(const TdmParams *params, const char *key, GError **error,
                                  const char *format, ...) G_GNUC_PRINTF(4, 5);

/**
 * tdm_param_spec_describe:
 * @spec: a spec
 *
 * What a spec accepts, as `tandem inspect` shows it.
 *
 * Returns: (transfer full): "float in [0, 1]", "list of 1 or 2 ints >= 1",
 * "one of constant|edge"; g_free() it
 */
TDM_API char *tdm_param_spec_describe(const TdmParamSpec *spec);

/**
 * tdm_params_split_name:
 * @text: "name key=value ..."
 * @args: (out) (optional) (transfer none): the rest of @text
 *
 * The name at the start of a feature's text.
 *
 * Returns: (transfer full) (nullable): the name; NULL when @text does not
 * start with one
 */
TDM_API char *tdm_params_split_name(const char *text, const char **args);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmParams, tdm_params_unref)

G_END_DECLS

#endif /* TANDEM_PARAMS_H */
