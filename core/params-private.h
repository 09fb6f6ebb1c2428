/* SPDX-License-Identifier: MIT */
/* core/params-private.h - what core/param-spec.c and core/params.c share
 * with the rest of the core (the registry keeps checked copies of spec
 * arrays; the transform pipeline reads arguments with the same tokenizer);
 * private to the core.
 */
#ifndef TDM_PARAMS_PRIVATE_H
#define TDM_PARAMS_PRIVATE_H

#include "internal.h"

#include <tandem/params.h>

/* The size of the first TdmParamSpec layout that carried struct_size
 * (interface 1.1). Entries may be larger (later layouts), never smaller. */
#define TDM_PARAM_SPEC_MIN_SIZE (offsetof(TdmParamSpec, description) + sizeof(const char *))

/* One parsed value of a spec. */
typedef struct {
    gboolean has;  /* FALSE: no value ("none", or no default) */
    char *text;    /* as written (NULL when !has) */
    gint64 i;      /* TDM_PARAM_INT, TDM_PARAM_BOOL */
    double f;      /* TDM_PARAM_FLOAT (and INT, converted) */
    int choice;    /* TDM_PARAM_CHOICE: index into choices */
    double *list;  /* lists (and single numbers): n values */
    int n;
} TdmParamValue;

/* ---- param-spec.c ---- */

/* A copy of `specs` (either layout, NULL = none) in the current layout,
 * ending with a NULL name; *n_out (may be NULL) gets the number of
 * entries. NULL with an error naming `feature` and the parameter when an
 * entry makes no sense. Free with g_free. */
TdmParamSpec *tdm_param_specs_copy(const char *feature, const TdmParamSpec *specs, guint *n_out,
                                   GError **error);
/* Parse `text` as a value of `spec` into *value (cleared first). On
 * failure *why gets the reason ("expected a number in [0, 1]"). */
gboolean tdm_param_value_parse(const TdmParamSpec *spec, const char *text, TdmParamValue *value,
                               char **why);
void tdm_param_value_clear(TdmParamValue *value);
void tdm_param_value_copy(TdmParamValue *dst, const TdmParamValue *src);
/* What a value of `spec` must be, for messages: "a number in [0, 1]". */
char *tdm_param_spec_expected(const TdmParamSpec *spec);

/* ---- params.c: the tokenizer ---- */

typedef struct {
    char *key; /* NULL for a positional value */
    char *value;
    int column; /* 1-based in the text the user wrote */
} TdmParamToken;

/* The tokenizer's character classes (the pipeline parser reads transform
 * names with them too): blanks, and what a key or a name is made of. */
gboolean tdm_param_is_space(char ch);
gboolean tdm_param_is_key_char(char ch);
const char *tdm_param_skip_spaces(const char *s);

/* An empty GArray of TdmParamToken that frees its tokens. */
GArray *tdm_param_tokens_new(void);
/* Read "key=value value ..." from *pos to the end of the text, or to a '|'
 * when `stop_at_bar` (the pipeline's separator), appending tokens; *pos
 * ends at the '|' or the end. Columns count from `origin`; `columns` says
 * whether messages name them. Errors start with "feature: ". */
gboolean tdm_param_tokens_read(const char *feature, const char *origin, const char **pos,
                               gboolean stop_at_bar, gboolean columns, GArray *tokens,
                               GError **error);
/* tdm_params_set() for each token (columns in messages when `columns`),
 * then tdm_params_check_required(). */
gboolean tdm_params_bind_tokens(TdmParams *params, const GArray *tokens, gboolean columns,
                                GError **error);

#endif /* TDM_PARAMS_PRIVATE_H */
