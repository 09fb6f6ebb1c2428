/* SPDX-License-Identifier: MIT */
/* tests/test-params.c - the parameter grammar (<tandem/params.h>): every
 * type with its range, defaults, positional values, aliases, quotes,
 * unknown keys and their messages; spec arrays in the 1.0 layout (four
 * strings per entry, as plugins built earlier have them) and in a larger
 * layout than this build knows; specs that make no sense; and the parser
 * against the registry's features ("sgd momentum=0.9 nesterov=true").
 */
#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "test-util.h"

static const TdmParamSpec demo_specs[] = {
    TDM_PARAM_SPEC_INT("n", TDM_PARAM_POSITIONAL, "3", 1, 10, "a count"),
    TDM_PARAM_SPEC_FLOAT("x", TDM_PARAM_POSITIONAL | TDM_PARAM_MIN_EXCLUSIVE, "0.5", 0, 1,
                         "a fraction"),
    TDM_PARAM_SPEC_BOOL("flag", 0, "false", "a switch"),
    TDM_PARAM_SPEC_CHOICE("mode", 0, "a", "a|b|c", "a mode"),
    TDM_PARAM_SPEC_INTS("size", 0, NULL, 1, 2, 1, INFINITY, "S or H,W"),
    TDM_PARAM_SPEC_FLOATS("mean", 0, "0.5", 1, 4, 0, 0, "per channel"),
    TDM_PARAM_SPEC_STRING("name", 0, NULL, "any text"),
    {.name = "bucket-mb", .struct_size = sizeof(TdmParamSpec), .type = TDM_PARAM_FLOAT,
     .default_value = "25", .min = 0.001, .max = 1024, .aliases = "bucket_cap_mb|cap",
     .description = "MiB per bucket"},
    TDM_PARAM_SPEC_END,
};

static TdmParams *parse_ok(const char *args)
{
    GError *error = NULL;
    TdmParams *p = tdm_params_parse_args("demo", demo_specs, args, &error);
    g_assert_no_error(error);
    g_assert_nonnull(p);
    return p;
}

/* Parsing `args` fails with TDM_ERROR_INVALID_ARG and a message that
 * contains every one of the NULL-terminated strings. */
static void parse_fails(const TdmParamSpec *specs, const char *args, ...)
{
    GError *error = NULL;
    g_assert_null(tdm_params_parse_args("demo", specs, args, &error));
    va_list ap;
    va_start(ap, args);
    test_invalid_arg_mentions(error, args, ap);
    va_end(ap);
}

static void test_defaults(void)
{
    g_autoptr(TdmParams) p = parse_ok("");
    g_assert_cmpstr(tdm_params_get_name(p), ==, "demo");
    g_assert_cmpint(tdm_params_get_int(p, "n"), ==, 3);
    g_assert_cmpfloat(tdm_params_get_float(p, "n"), ==, 3.0);
    g_assert_cmpfloat(tdm_params_get_float(p, "x"), ==, 0.5);
    g_assert_false(tdm_params_get_bool(p, "flag"));
    g_assert_cmpint(tdm_params_get_choice(p, "mode"), ==, 0);
    g_assert_cmpstr(tdm_params_get_string(p, "mode"), ==, "a");
    g_assert_false(tdm_params_is_set(p, "n"));
    g_assert_true(tdm_params_has_value(p, "n"));
    /* No default: no value. */
    int v[2] = {-1, -1};
    g_assert_false(tdm_params_has_value(p, "size"));
    g_assert_cmpint(tdm_params_get_ints(p, "size", v, 2), ==, 0);
    g_assert_cmpint(v[0], ==, -1);
    g_assert_null(tdm_params_get_string(p, "name"));
    g_assert_true(tdm_params_has_key(p, "bucket-mb"));
    g_assert_false(tdm_params_has_key(p, "cap")); /* an alias, not a key */
    g_assert_cmpstr(tdm_params_get_specs(p)[7].name, ==, "bucket-mb");
    g_assert_null(tdm_params_get_specs(p)[8].name);
}

static void test_types(void)
{
    g_autoptr(TdmParams) p = parse_ok("n=10 x=1 flag=YES mode=c size=32,24 mean=0.1, 0.2,  0.3 "
                                      "name='a b=c' cap=0.001");
    g_assert_cmpint(tdm_params_get_int(p, "n"), ==, 10);
    g_assert_cmpfloat(tdm_params_get_float(p, "x"), ==, 1.0);
    g_assert_true(tdm_params_get_bool(p, "flag"));
    g_assert_cmpint(tdm_params_get_choice(p, "mode"), ==, 2);
    int size[2];
    g_assert_cmpint(tdm_params_get_ints(p, "size", size, 2), ==, 2);
    g_assert_cmpint(size[0], ==, 32);
    g_assert_cmpint(size[1], ==, 24);
    double mean[4];
    /* More values than room: the count, and the first ones. */
    g_assert_cmpint(tdm_params_get_floats(p, "mean", mean, 2), ==, 3);
    g_assert_cmpfloat(mean[1], ==, 0.2);
    g_assert_cmpstr(tdm_params_get_string(p, "name"), ==, "a b=c");
    g_assert_cmpfloat(tdm_params_get_float(p, "bucket-mb"), ==, 0.001);
    g_assert_true(tdm_params_is_set(p, "bucket-mb"));
    g_assert_true(tdm_params_is_set(p, "mean"));
    /* A single number reads as a list of one. */
    double one[1];
    g_assert_cmpint(tdm_params_get_floats(p, "x", one, 1), ==, 1);
    g_assert_cmpfloat(one[0], ==, 1.0);

    /* "none" for a parameter without a default: the same as not giving it. */
    g_autoptr(TdmParams) q = parse_ok("size=none flag=off");
    g_assert_true(tdm_params_is_set(q, "size"));
    g_assert_false(tdm_params_has_value(q, "size"));
    g_assert_cmpint(tdm_params_get_ints(q, "size", size, 2), ==, 0);
    g_assert_false(tdm_params_get_bool(q, "flag"));
}

/* "none" never makes a getter return what the spec's range refuses: it is
 * refused where the spec has a default, unless the spec allows it, and
 * then the getters still return the default while has_value says "off". */
static void test_none(void)
{
    parse_fails(demo_specs, "n=none",
                "demo: n=none: expected an integer in [1, 10] ('none' is not accepted)", NULL);
    parse_fails(demo_specs, "x=none", "demo: x=none: expected a number in (0, 1]", NULL);
    parse_fails(demo_specs, "none", "demo: n=none", "'none' is not accepted", NULL);
    parse_fails(demo_specs, "mean=none", "demo: mean=none", "not accepted", NULL);
    parse_fails(demo_specs, "flag=none", "demo: flag=none: expected true or false", NULL);
    parse_fails(demo_specs, "cap=none", "demo: bucket-mb=none", NULL);
    /* A choice and a string take "none" as text. */
    parse_fails(demo_specs, "mode=none", "demo: mode=none: expected one of a, b, c", NULL);
    g_autoptr(TdmParams) text = parse_ok("name=none");
    g_assert_cmpstr(tdm_params_get_string(text, "name"), ==, "none");

    static const TdmParamSpec off[] = {
        TDM_PARAM_SPEC_FLOAT("max-norm", TDM_PARAM_POSITIONAL | TDM_PARAM_MIN_EXCLUSIVE |
                                             TDM_PARAM_ALLOW_NONE,
                             "1.0", 0, 1e30, "clip to this norm; none: no clipping"),
        TDM_PARAM_SPEC_INT("every", TDM_PARAM_ALLOW_NONE, "8", 1, 100, "period"),
        TDM_PARAM_SPEC_INT("need", TDM_PARAM_REQUIRED | TDM_PARAM_ALLOW_NONE, NULL, 1, 9, "n"),
        TDM_PARAM_SPEC_END,
    };
    GError *error = NULL;
    g_autoptr(TdmParams) p = tdm_params_parse_args("clip", off, "none every=none need=2", &error);
    g_assert_no_error(error);
    g_assert_true(tdm_params_is_set(p, "max-norm"));
    g_assert_false(tdm_params_has_value(p, "max-norm"));
    g_assert_cmpfloat(tdm_params_get_float(p, "max-norm"), ==, 1.0);
    g_assert_false(tdm_params_has_value(p, "every"));
    g_assert_cmpint(tdm_params_get_int(p, "every"), ==, 8);
    double v[1] = {0};
    g_assert_cmpint(tdm_params_get_floats(p, "max-norm", v, 1), ==, 1);
    g_assert_cmpfloat(v[0], ==, 1.0);
    /* Required stays required. */
    g_assert_null(tdm_params_parse_args("clip", off, "need=none", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "clip: need=none: expected an integer in [1, 9]"));
    g_clear_error(&error);
    /* The caller's default is checked the same way. */
    g_autoptr(TdmParams) d = tdm_params_new("demo", demo_specs, &error);
    g_assert_no_error(error);
    g_assert_false(tdm_params_set_default(d, "n", "none", &error));
    g_assert_nonnull(strstr(error->message, "demo: n=none: expected an integer in [1, 10]"));
    g_clear_error(&error);
    g_assert_cmpint(tdm_params_get_int(d, "n"), ==, 3);
    /* A spec whose own default is "none" needs the flag. */
    static const TdmParamSpec bad[] = {
        TDM_PARAM_SPEC_INT("k", 0, "none", 1, 9, "k"),
        TDM_PARAM_SPEC_END,
    };
    g_assert_null(tdm_params_new("demo", bad, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_clear_error(&error);
}

static void test_ranges(void)
{
    parse_fails(demo_specs, "n=0", "demo: n=0: expected an integer in [1, 10]", NULL);
    parse_fails(demo_specs, "n=11", "in [1, 10]", NULL);
    parse_fails(demo_specs, "n=2.5", "n=2.5", "an integer", NULL);
    parse_fails(demo_specs, "x=0", "demo: x=0: expected a number in (0, 1]", NULL);
    parse_fails(demo_specs, "x=nan", "x=nan", "a number", NULL);
    parse_fails(demo_specs, "x=1e999", "x=1e999", NULL);
    parse_fails(demo_specs, "flag=maybe", "flag=maybe", "true or false", NULL);
    parse_fails(demo_specs, "mode=d", "mode=d", "one of a, b, c", NULL);
    parse_fails(demo_specs, "size=1,2,3", "size=1,2,3",
                "expected 1 or 2 integers >= 1 separated by commas, got 3", NULL);
    parse_fails(demo_specs, "size=0", "size=0", "0 is out of range", ">= 1", NULL);
    parse_fails(demo_specs, "size=4.5", "'4.5' is not an integer", NULL);
    parse_fails(demo_specs, "mean=0.1,x", "'x' is not a number", "1 to 4 numbers", NULL);
    /* The brief's example, through an alias. */
    parse_fails(demo_specs, "bucket_cap_mb=-3",
                "demo: bucket-mb=-3: expected a number in [0.001, 1024]", NULL);
}

static void test_positional(void)
{
    g_autoptr(TdmParams) p = parse_ok("7 0.25 mode=b");
    g_assert_cmpint(tdm_params_get_int(p, "n"), ==, 7);
    g_assert_cmpfloat(tdm_params_get_float(p, "x"), ==, 0.25);
    parse_fails(demo_specs, "7 0.25 0.5", "demo: unexpected value '0.5'",
                "too many positional values", NULL);
    parse_fails(demo_specs, "n=7 7", "demo: n given twice", NULL);
    static const TdmParamSpec keyed[] = {
        TDM_PARAM_SPEC_INT("k", 0, "1", 0, 0, "keyed only"),
        TDM_PARAM_SPEC_END,
    };
    parse_fails(keyed, "5", "unexpected value '5'", "only key=value", NULL);
    static const TdmParamSpec none[] = {TDM_PARAM_SPEC_END};
    parse_fails(none, "k=1", "unknown parameter 'k'; known: none", NULL);
    parse_fails(NULL, "k=1", "unknown parameter 'k'; known: none", NULL);
}

static void test_unknown_and_syntax(void)
{
    parse_fails(demo_specs, "q=1",
                "demo: unknown parameter 'q'; known: n, x, flag, mode, size, mean, name, bucket-mb",
                NULL);
    parse_fails(demo_specs, "n=", "demo: n=: missing value", NULL);
    parse_fails(demo_specs, "=3", "'=' without a parameter name", NULL);
    parse_fails(demo_specs, "n=3=4", "malformed argument '3=4'", NULL);
    parse_fails(demo_specs, "name='open", "unclosed quote", NULL);
    parse_fails(demo_specs, "cap=1 bucket-mb=2", "bucket-mb given twice", NULL);
}

static void test_required(void)
{
    static const TdmParamSpec specs[] = {
        TDM_PARAM_SPEC_STRING("path", TDM_PARAM_REQUIRED | TDM_PARAM_POSITIONAL, NULL,
                              "where"),
        TDM_PARAM_SPEC_END,
    };
    parse_fails(specs, "", "demo: missing parameter path (string: where)", NULL);
    GError *error = NULL;
    g_autoptr(TdmParams) p = tdm_params_parse_args("demo", specs, "/data/x", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(tdm_params_get_string(p, "path"), ==, "/data/x");
}

static void test_set_default_and_error(void)
{
    GError *error = NULL;
    g_autoptr(TdmParams) p = tdm_params_new("demo", demo_specs, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_params_set_default(p, "n", "5", &error));
    g_assert_cmpint(tdm_params_get_int(p, "n"), ==, 5);
    g_assert_false(tdm_params_is_set(p, "n"));
    g_assert_false(tdm_params_set_default(p, "n", "50", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "demo: n=50: expected an integer in [1, 10]"));
    g_clear_error(&error);
    /* The user's value wins over the caller's default, once. */
    g_assert_true(tdm_params_set(p, "n", "2", 12, &error));
    g_assert_cmpint(tdm_params_get_int(p, "n"), ==, 2);
    g_assert_false(tdm_params_set(p, NULL, "4", 20, &error));
    g_assert_nonnull(strstr(error->message, "n given twice (columns 12 and 20)"));
    g_clear_error(&error);
    g_assert_false(tdm_params_set(p, "x", "2", 30, &error));
    g_assert_nonnull(strstr(error->message, "demo: x=2 (column 30): expected a number in (0, 1]"));
    g_clear_error(&error);
    tdm_params_set_error(p, "n", &error, "too %s", "small");
    g_assert_cmpstr(error->message, ==, "demo: n=2 (column 12): too small");
    g_clear_error(&error);
    tdm_params_set_error(p, "mode", &error, "not now");
    g_assert_cmpstr(error->message, ==, "demo: mode: not now");
    g_clear_error(&error);
    g_assert_true(tdm_params_check_required(p, &error));
    g_assert_true(tdm_params_ref(p) == p);
    tdm_params_unref(p);
}

static void test_describe(void)
{
    static const char *const want[] = {
        "int in [1, 10]",        "float in (0, 1]",        "bool",
        "one of a|b|c",          "list of 1 or 2 ints >= 1", "list of 1 to 4 floats",
        "string",                "float in [0.001, 1024]",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(want); i++) {
        g_autofree char *d = tdm_param_spec_describe(&demo_specs[i]);
        g_assert_cmpstr(d, ==, want[i]);
    }
    const char *args = NULL;
    g_autofree char *name = tdm_params_split_name("  ddp  bucket-mb=25 ", &args);
    g_assert_cmpstr(name, ==, "ddp");
    g_assert_cmpstr(args, ==, "bucket-mb=25 ");
    g_autofree char *bare = tdm_params_split_name("sgd", &args);
    g_assert_cmpstr(bare, ==, "sgd");
    g_assert_cmpstr(args, ==, "");
    g_assert_null(tdm_params_split_name("idx:/data", NULL));
    g_assert_null(tdm_params_split_name("  ", NULL));
}

/* ---- spec layouts ---- */

/* What a plugin built against the 1.0 headers registered. */
typedef struct {
    const char *name, *type, *default_value, *description;
} ParamSpec10;

static void test_layout_1_0(void)
{
    static const ParamSpec10 old[] = {
        {"path", "string", NULL, "required in 1.0 terms"},
        {"repeat", "int", "1", "an int"},
        {"scale", "float", "0.5", "a float"},
        {"on", "bool", "true", "a bool"},
        {"sizes", "list", "1,2", "a list: taken as text"},
        {"stride", "int", "kernel_size", "a default its type refuses: text"},
        {NULL, NULL, NULL, NULL},
    };
    const TdmParamSpec *specs = (const TdmParamSpec *)(const void *)old;
    GError *error = NULL;
    g_autoptr(TdmParams) p = tdm_params_parse_args("old", specs, "/x repeat=4 scale=0.25", &error);
    /* 1.0 had no positional parameters: "/x" has nowhere to go. */
    g_assert_null(p);
    g_assert_nonnull(strstr(error->message, "old: unexpected value '/x'"));
    g_clear_error(&error);
    p = tdm_params_parse_args("old", specs, "path=/x repeat=4 scale=0.25 on=no sizes=3,4",
                              &error);
    g_assert_no_error(error);
    g_assert_cmpstr(tdm_params_get_string(p, "path"), ==, "/x");
    g_assert_cmpint(tdm_params_get_int(p, "repeat"), ==, 4);
    g_assert_cmpfloat(tdm_params_get_float(p, "scale"), ==, 0.25);
    g_assert_false(tdm_params_get_bool(p, "on"));
    g_assert_cmpstr(tdm_params_get_string(p, "sizes"), ==, "3,4");
    g_assert_cmpstr(tdm_params_get_string(p, "stride"), ==, "kernel_size");
    /* 1.0 took "none" for every parameter that was not required: still so,
     * and the getter gives the default rather than 0. */
    g_autoptr(TdmParams) n = tdm_params_parse_args("old", specs, "path=/x repeat=none", &error);
    g_assert_no_error(error);
    g_assert_false(tdm_params_has_value(n, "repeat"));
    g_assert_cmpint(tdm_params_get_int(n, "repeat"), ==, 1);
    const TdmParamSpec *copy = tdm_params_get_specs(p);
    g_assert_cmpuint(copy[0].struct_size, ==, sizeof(TdmParamSpec));
    g_assert_cmpint(copy[0].type, ==, TDM_PARAM_STRING);
    g_assert_true(copy[0].flags & TDM_PARAM_REQUIRED);
    g_assert_cmpint(copy[1].type, ==, TDM_PARAM_INT);
    g_assert_cmpint(copy[2].type, ==, TDM_PARAM_FLOAT);
    g_assert_cmpint(copy[3].type, ==, TDM_PARAM_BOOL);
    g_assert_cmpint(copy[4].type, ==, TDM_PARAM_STRING);
    g_assert_cmpint(copy[5].type, ==, TDM_PARAM_STRING);
    g_assert_cmpstr(copy[5].description, ==, "a default its type refuses: text");
    g_assert_null(copy[6].name);
    /* The 1.0 "required" is enforced by the parser. */
    g_autoptr(TdmParams) q = tdm_params_parse_args("old", specs, "repeat=2", &error);
    g_assert_null(q);
    g_assert_nonnull(strstr(error->message, "old: missing parameter path"));
    g_clear_error(&error);
    /* An empty 1.0 array: no parameters. */
    static const ParamSpec10 empty[] = {{NULL, NULL, NULL, NULL}};
    g_autoptr(TdmParams) e =
        tdm_params_parse_args("old", (const TdmParamSpec *)(const void *)empty, "", &error);
    g_assert_no_error(error);
    g_assert_null(tdm_params_get_specs(e)[0].name);
}

/* A later layout with a field this build does not know: read with its
 * own stride, the known fields kept. */
typedef struct {
    TdmParamSpec known;
    const char *unit;
    double extra[3];
} FutureSpec;

static void test_layout_future(void)
{
    FutureSpec future[3];
    memset(future, 0, sizeof future);
    for (int i = 0; i < 2; i++) {
        future[i].known.struct_size = sizeof(FutureSpec);
        future[i].known.type = TDM_PARAM_FLOAT;
        future[i].known.min = 0;
        future[i].known.max = 1;
        future[i].unit = "MiB";
    }
    future[0].known.name = "a";
    future[0].known.default_value = "0.5";
    future[1].known.name = "b";
    future[1].known.flags = TDM_PARAM_POSITIONAL;
    GError *error = NULL;
    g_autoptr(TdmParams) p =
        tdm_params_parse_args("future", &future[0].known, "0.75", &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(tdm_params_get_float(p, "a"), ==, 0.5);
    g_assert_cmpfloat(tdm_params_get_float(p, "b"), ==, 0.75);
    g_assert_null(tdm_params_get_specs(p)[2].name);
    /* Entries that disagree on their size are refused. */
    future[1].known.struct_size = sizeof(TdmParamSpec);
    g_assert_null(tdm_params_new("future", &future[0].known, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_assert_nonnull(strstr(error->message, "'b'"));
    g_assert_nonnull(strstr(error->message, "struct_size"));
    g_clear_error(&error);
}

static void spec_refused(const TdmParamSpec *specs, const char *want)
{
    GError *error = NULL;
    g_assert_null(tdm_params_new("bad", specs, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, "feature 'bad'"));
    g_assert_nonnull(strstr(error->message, want));
    g_clear_error(&error);
}

static void test_bad_specs(void)
{
    static const TdmParamSpec bad_default[] = {
        TDM_PARAM_SPEC_INT("n", 0, "20", 1, 10, "out of its own range"),
        TDM_PARAM_SPEC_END,
    };
    spec_refused(bad_default, "'n': default '20': expected an integer in [1, 10]");
    static const TdmParamSpec twice[] = {
        TDM_PARAM_SPEC_INT("n", 0, NULL, 0, 0, ""),
        TDM_PARAM_SPEC_BOOL("n", 0, NULL, ""),
        TDM_PARAM_SPEC_END,
    };
    spec_refused(twice, "name given twice");
    static const TdmParamSpec no_choices[] = {
        TDM_PARAM_SPEC_CHOICE("m", 0, NULL, NULL, ""),
        TDM_PARAM_SPEC_END,
    };
    spec_refused(no_choices, "without choices");
    static const TdmParamSpec bad_name[] = {
        TDM_PARAM_SPEC_INT("a b", 0, NULL, 0, 0, ""),
        TDM_PARAM_SPEC_END,
    };
    spec_refused(bad_name, "invalid name");
    TdmParamSpec small[2];
    memset(small, 0, sizeof small);
    small[0].name = "n";
    small[0].struct_size = 16;
    spec_refused(small, "struct_size 16 is smaller");
}

/* ---- with the registry ---- */

static void test_registry_features(void)
{
    GError *error = NULL;
    g_autoptr(TdmParams) p =
        tdm_params_parse(TDM_FEATURE_OPTIMIZER, "sgd momentum=0.9 nesterov=true", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(tdm_params_get_name(p), ==, "sgd");
    g_assert_cmpfloat(tdm_params_get_float(p, "momentum"), ==, 0.9);
    g_assert_true(tdm_params_get_bool(p, "nesterov"));
    g_assert_cmpfloat(tdm_params_get_float(p, "lr"), ==, 0.01);

    g_assert_null(tdm_params_parse(TDM_FEATURE_OPTIMIZER, "sgd momentum=2", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_cmpstr(error->message, ==, "sgd: momentum=2: expected a number in [0, 1]");
    g_clear_error(&error);
    g_assert_null(tdm_params_parse(TDM_FEATURE_OPTIMIZER, "adamw beta2=1", &error));
    g_assert_cmpstr(error->message, ==, "adamw: beta2=1: expected a number in [0, 1)");
    g_clear_error(&error);
    g_assert_null(tdm_params_parse(TDM_FEATURE_OPTIMIZER, "sgd speed=3", &error));
    g_assert_nonnull(strstr(error->message, "sgd: unknown parameter 'speed'; known: lr, "));
    g_clear_error(&error);
    g_assert_null(tdm_params_parse(TDM_FEATURE_OPTIMIZER, "rmsprop lr=1", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_clear_error(&error);
    g_assert_null(tdm_params_parse(TDM_FEATURE_OPTIMIZER, "=sgd", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_clear_error(&error);

    /* The registry's copy is in the current layout. */
    TdmFeature *conv = tdm_registry_find(TDM_FEATURE_MODULE, "conv2d", NULL);
    const TdmParamSpec *specs = tdm_feature_get_params(conv);
    g_assert_cmpuint(specs[0].struct_size, ==, sizeof(TdmParamSpec));
    g_assert_cmpint(specs[0].type, ==, TDM_PARAM_INT);
    g_assert_true(specs[0].flags & TDM_PARAM_REQUIRED);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/params/defaults", test_defaults);
    g_test_add_func("/params/types", test_types);
    g_test_add_func("/params/ranges", test_ranges);
    g_test_add_func("/params/none", test_none);
    g_test_add_func("/params/positional", test_positional);
    g_test_add_func("/params/unknown-and-syntax", test_unknown_and_syntax);
    g_test_add_func("/params/required", test_required);
    g_test_add_func("/params/set-default-and-error", test_set_default_and_error);
    g_test_add_func("/params/describe", test_describe);
    g_test_add_func("/params/layout-1.0", test_layout_1_0);
    g_test_add_func("/params/layout-future", test_layout_future);
    g_test_add_func("/params/bad-specs", test_bad_specs);
    g_test_add_func("/params/registry-features", test_registry_features);
    return g_test_run();
}
