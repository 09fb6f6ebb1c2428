/* SPDX-License-Identifier: MIT */
/* tests/test-io.c - safetensors files, model save/load and the training
 * configuration.
 *
 * Round trips through real files, every class of corrupt file the reader
 * must reject (each error must name the file and a byte offset), the atomic
 * writer keeping the previous file when a write fails, and the config's
 * defaults, validation and INI loading. Model tests run on the `ref`
 * backend found through TDM_PLUGIN_SYSTEM_PATH.
 */
#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tandem/tandem.h>

typedef struct {
    char *dir;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    f->dir = g_dir_make_tmp("tdm-test-io-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
}

static void remove_tree(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d == NULL) {
        return;
    }
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
            g_chmod(p, 0755);
            remove_tree(p);
        } else {
            g_unlink(p);
        }
    }
    g_dir_close(d);
    g_rmdir(dir);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    remove_tree(f->dir);
    g_free(f->dir);
}

static guint count_entries(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    guint n = 0;
    while (g_dir_read_name(d) != NULL) {
        n++;
    }
    g_dir_close(d);
    return n;
}

/* ---- safetensors ---- */

static void test_roundtrip(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "rt.safetensors", NULL);
    float a[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, -1e30f};
    gint32 b[3] = {-1, 0, 2147483647};
    gint64 c = -5;
    guint8 d[5] = {0, 1, 2, 254, 255};
    int64_t sa[2] = {2, 3}, sb[1] = {3}, sd[3] = {1, 5, 1};

    TdmSafeTensors *w = tdm_safetensors_new();
    tdm_safetensors_set_metadata(w, "format", "pt");
    tdm_safetensors_set_metadata(w, "note", "quote \" backslash \\ newline \n tab \t");
    tdm_safetensors_add(w, "layer1.0.conv1.weight", TDM_DTYPE_F32, 2, sa, a);
    tdm_safetensors_add(w, "ints", TDM_DTYPE_I32, 1, sb, b);
    tdm_safetensors_add(w, "bn.num_batches_tracked", TDM_DTYPE_I64, 0, NULL, &c);
    tdm_safetensors_add(w, "n\"a\\me\xc3\xa9", TDM_DTYPE_U8, 3, sd, d);
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_safetensors_save(w, path, &error));
    g_assert_no_error(error);
    tdm_safetensors_free(w);

    /* The header length is a multiple of 8, so the data is aligned. */
    g_autofree char *raw = NULL;
    gsize raw_len = 0;
    g_assert_true(g_file_get_contents(path, &raw, &raw_len, NULL));
    guint64 hlen = 0;
    memcpy(&hlen, raw, 8);
    g_assert_cmpuint(hlen % 8, ==, 0);
    g_assert_cmpuint(raw_len, ==, 8 + hlen + sizeof(a) + sizeof(b) + sizeof(c) + sizeof(d));

    TdmSafeTensors *r = tdm_safetensors_load(path, &error);
    g_assert_no_error(error);
    g_assert_nonnull(r);
    g_assert_cmpuint(tdm_safetensors_count(r), ==, 4);
    g_assert_cmpstr(tdm_safetensors_metadata(r, "format"), ==, "pt");
    g_assert_cmpstr(tdm_safetensors_metadata(r, "note"), ==,
                    "quote \" backslash \\ newline \n tab \t");
    g_assert_null(tdm_safetensors_metadata(r, "absent"));

    const TdmSafeTensor *t = tdm_safetensors_get(r, "layer1.0.conv1.weight");
    g_assert_nonnull(t);
    g_assert_cmpint(t->dtype, ==, TDM_DTYPE_F32);
    g_assert_cmpint(t->ndim, ==, 2);
    g_assert_cmpint(t->shape[0], ==, 2);
    g_assert_cmpint(t->shape[1], ==, 3);
    g_assert_cmpmem(t->data, t->nbytes, a, sizeof(a));
    t = tdm_safetensors_get(r, "ints");
    g_assert_cmpmem(t->data, t->nbytes, b, sizeof(b));
    t = tdm_safetensors_get(r, "bn.num_batches_tracked");
    g_assert_cmpint(t->dtype, ==, TDM_DTYPE_I64);
    g_assert_cmpint(t->ndim, ==, 0);
    g_assert_cmpmem(t->data, t->nbytes, &c, sizeof(c));
    t = tdm_safetensors_get(r, "n\"a\\me\xc3\xa9");
    g_assert_nonnull(t);
    g_assert_cmpint(t->dtype, ==, TDM_DTYPE_U8);
    g_assert_cmpmem(t->data, t->nbytes, d, sizeof(d));
    g_assert_null(tdm_safetensors_get(r, "missing"));
    tdm_safetensors_free(r);

    /* Only the file itself remains: no temporary files. */
    g_assert_cmpuint(count_entries(f->dir), ==, 1);
}

/* Writes `header` (JSON) followed by `data_len` zero bytes. */
static char *write_raw(Fixture *f, const char *name, const char *header, gint64 hlen_override,
                       size_t data_len)
{
    char *path = g_build_filename(f->dir, name, NULL);
    GString *s = g_string_new(NULL);
    guint64 hlen = hlen_override >= 0 ? (guint64)hlen_override : strlen(header);
    for (int i = 0; i < 8; i++) {
        g_string_append_c(s, (char)(hlen >> (8 * i)));
    }
    g_string_append(s, header);
    for (size_t i = 0; i < data_len; i++) {
        g_string_append_c(s, '\0');
    }
    g_assert_true(g_file_set_contents(path, s->str, (gssize)s->len, NULL));
    g_string_free(s, TRUE);
    return path;
}

static void expect_corrupt(Fixture *f, const char *header, gint64 hlen, size_t data_len,
                           const char *needle)
{
    g_autofree char *path = write_raw(f, "bad.safetensors", header, hlen, data_len);
    g_autoptr(GError) error = NULL;
    TdmSafeTensors *st = tdm_safetensors_load(path, &error);
    g_assert_null(st);
    g_assert_error(error, TDM_ERROR, TDM_ERROR_CORRUPT);
    if (strstr(error->message, path) == NULL || strstr(error->message, "byte") == NULL ||
        strstr(error->message, needle) == NULL) {
        g_error("message '%s' should name %s, a byte offset and '%s'", error->message, path,
                needle);
    }
}

static void test_corrupt(Fixture *f, gconstpointer data)
{
    const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    /* Shorter than the length field. */
    g_autofree char *tiny = g_build_filename(f->dir, "bad.safetensors", NULL);
    g_assert_true(g_file_set_contents(tiny, "abc", 3, NULL));
    g_autoptr(GError) error = NULL;
    g_assert_null(tdm_safetensors_load(tiny, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_CORRUPT);
    g_assert_nonnull(strstr(error->message, "too short"));

    expect_corrupt(f, good, 1000, 8, "past the end");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",", -1, 0, "bad JSON");
    expect_corrupt(f, "{\"a\" {}}", -1, 0, "expected ':'");
    expect_corrupt(f, "[1,2]", -1, 0, "must be a JSON object");
    expect_corrupt(f, "{\"a\":1.5}", -1, 0, "only integers");
    expect_corrupt(f, "{\"a\":\"\\q\"}", -1, 0, "unknown escape");
    expect_corrupt(f, "{\"a\":{},\"a\":{}}", -1, 0, "duplicate key");
    expect_corrupt(f, "{} x", -1, 0, "trailing data");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", -1, 8,
                   "unknown dtype 'F64'");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", -1, 8,
                   "out of range");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,4]}}", -1, 8,
                   "out of range");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8,
                   "need 12");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-3],\"data_offsets\":[0,8]}}", -1, 8,
                   "bad dimension");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", -1, 12,
                   "overlap");
    expect_corrupt(f, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", -1, 8, "lacks");
    expect_corrupt(f, "{\"__metadata__\":{\"k\":3}}", -1, 0, "not a string");
    /* Deep nesting is refused without recursing without bound. */
    GString *deep = g_string_new("{\"a\":");
    for (int i = 0; i < 200; i++) {
        g_string_append_c(deep, '[');
    }
    expect_corrupt(f, deep->str, -1, 0, "too deep");
    g_string_free(deep, TRUE);

    /* The good header itself loads. */
    g_autofree char *ok = write_raw(f, "good.safetensors", good, -1, 8);
    TdmSafeTensors *st = tdm_safetensors_load(ok, NULL);
    g_assert_nonnull(st);
    tdm_safetensors_free(st);

    g_clear_error(&error);
    g_autofree char *missing = g_build_filename(f->dir, "nope.safetensors", NULL);
    g_assert_null(tdm_safetensors_load(missing, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "nope.safetensors"));
}

/* Loading `header` fails with a message that names byte `at` and says
 * `needle`. */
static void expect_corrupt_at(Fixture *f, const char *header, size_t data_len, size_t at,
                              const char *needle)
{
    g_autofree char *path = write_raw(f, "bad.safetensors", header, -1, data_len);
    g_autoptr(GError) error = NULL;
    g_assert_null(tdm_safetensors_load(path, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_CORRUPT);
    g_autofree char *where = g_strdup_printf(" byte %zu", at);
    if (strstr(error->message, where) == NULL || strstr(error->message, needle) == NULL) {
        g_error("header %s: message '%s' should name byte %zu and say '%s'", header,
                error->message, at, needle);
    }
}

/* The header's JSON is read strictly (what lenient readers take is
 * refused), and each error points at the offending value's first byte
 * (the header starts at byte 8), across lines too. */
static void test_strict_header(Fixture *f, gconstpointer data)
{
    /* not JSON, though a lenient reader takes it */
    expect_corrupt_at(f, "{/* c */}", 0, 9, "unexpected character");
    expect_corrupt_at(f, "{'a':1}", 0, 9, "unexpected character");
    expect_corrupt_at(f, "{\"a\":01}", 0, 13, "leading zero");
    expect_corrupt_at(f, "{\"a\":18446744073709551624}", 0, 13, "too large");
    expect_corrupt_at(f, "{\"a\":\"x\\u0000\"}", 0, 15, "NUL");
    expect_corrupt_at(f, "{\"a\":\"\\ud800\"}", 0, 14, "surrogate");
    expect_corrupt_at(f, "{\"a\":\"\\ud800\\u0041\"}", 0, 14, "surrogate");
    expect_corrupt_at(f, "{\"a\":\"\\udc00\"}", 0, 14, "surrogate");
    expect_corrupt_at(f, "{\"a\":tru}", 0, 13, "expected a value");
    expect_corrupt_at(f, "{}{}", 0, 10, "trailing data");
    expect_corrupt_at(f, "{\"a\":1 \"b\":2}", 0, 15, "expected ','");
    expect_corrupt_at(f, "{\"a\":[1,]}", 0, 16, "trailing comma");
    expect_corrupt_at(f, "{\"a\":{},\"b\":{},\"a\":{}}", 0, 23, "duplicate key 'a'");
    /* values deep in the header, on other lines */
    const char *entry = "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    g_autofree char *dtype = g_strdup_printf("{\"a\":%s,\n \"b\":{\"dtype\":\n  \"F64\", "
                                             "\"shape\":[1],\"data_offsets\":[8,16]}}", entry);
    expect_corrupt_at(f, dtype, 16, 8 + (strstr(dtype, "\"F64\"") - dtype), "'F64'");
    g_autofree char *dim = g_strdup_printf("{\"a\":%s,\n\"b\":{\"dtype\":\"F32\",\"shape\":[2,\n"
                                           "   -1],\"data_offsets\":[8,16]}}", entry);
    expect_corrupt_at(f, dim, 16, 8 + (strstr(dim, "-1") - dim), "bad dimension");
    g_autofree char *offsets = g_strdup_printf("{\"a\":%s,\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
                                               "\"data_offsets\": [\"8\",16]}}", entry);
    expect_corrupt_at(f, offsets, 16, 8 + (strstr(offsets, "[\"8\"") - offsets),
                      "data_offsets");
    g_autofree char *meta = g_strdup_printf("{\"__metadata__\":{\"k\\\"q\":\"v\",\"n\":  7},"
                                            "\"a\":%s}", entry);
    expect_corrupt_at(f, meta, 8, 8 + (strstr(meta, "7}") - meta), "not a string");

    /* what the writer escapes reads back */
    g_autofree char *ok = write_raw(f, "ok.safetensors",
                                    "{\"__metadata__\":{\"k\":\"a\\\"\\\\\\/\\u00e9\\ud83d\\ude00\"},"
                                    "\"t\\n\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
                                    -1, 1);
    g_autoptr(GError) error = NULL;
    TdmSafeTensors *st = tdm_safetensors_load(ok, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(tdm_safetensors_metadata(st, "k"), ==, "a\"\\/\xc3\xa9\xf0\x9f\x98\x80");
    g_assert_nonnull(tdm_safetensors_get(st, "t\n"));
    tdm_safetensors_free(st);
}

static void save_small(const char *path, float value, size_t n, GError **error, gboolean *ok)
{
    float *v = g_new(float, n);
    for (size_t i = 0; i < n; i++) {
        v[i] = value;
    }
    int64_t shape[1] = {(int64_t)n};
    TdmSafeTensors *w = tdm_safetensors_new();
    tdm_safetensors_add(w, "x", TDM_DTYPE_F32, 1, shape, v);
    *ok = tdm_safetensors_save(w, path, error);
    tdm_safetensors_free(w);
    g_free(v);
}

static void test_atomic(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "w.safetensors", NULL);
    g_autoptr(GError) error = NULL;
    gboolean ok = FALSE;
    save_small(path, 1.0f, 4, &error, &ok);
    g_assert_no_error(error);
    g_assert_true(ok);

    /* A write that fails half way (file size limit: EFBIG) must leave the
     * old file intact and no temporary file behind. */
    struct rlimit old_limit, small = {0};
    g_assert_cmpint(getrlimit(RLIMIT_FSIZE, &old_limit), ==, 0);
    small.rlim_cur = 4096;
    small.rlim_max = old_limit.rlim_max;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &small), ==, 0);
    save_small(path, 2.0f, 100000, &error, &ok);
    g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &old_limit), ==, 0);
    signal(SIGXFSZ, old_handler);
    g_assert_false(ok);
    g_assert_error(error, TDM_ERROR, TDM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, path));
    g_clear_error(&error);

    TdmSafeTensors *st = tdm_safetensors_load(path, &error);
    g_assert_no_error(error);
    const TdmSafeTensor *t = tdm_safetensors_get(st, "x");
    g_assert_cmpint(t->shape[0], ==, 4);
    g_assert_cmpfloat(((float *)t->data)[3], ==, 1.0f);
    tdm_safetensors_free(st);
    g_assert_cmpuint(count_entries(f->dir), ==, 1);

    /* An unwritable directory (meaningless for root, who may write anyway). */
    if (geteuid() != 0) {
        g_autofree char *ro = g_build_filename(f->dir, "ro", NULL);
        g_assert_cmpint(g_mkdir(ro, 0755), ==, 0);
        g_autofree char *ro_path = g_build_filename(ro, "w.safetensors", NULL);
        save_small(ro_path, 1.0f, 4, &error, &ok);
        g_assert_true(ok);
        g_assert_cmpint(g_chmod(ro, 0555), ==, 0);
        save_small(ro_path, 3.0f, 8, &error, &ok);
        g_assert_false(ok);
        g_assert_error(error, TDM_ERROR, TDM_ERROR_IO);
        g_clear_error(&error);
        g_chmod(ro, 0755);
        st = tdm_safetensors_load(ro_path, &error);
        g_assert_no_error(error);
        g_assert_cmpint(tdm_safetensors_get(st, "x")->shape[0], ==, 4);
        tdm_safetensors_free(st);
    }
    /* A directory that does not exist. */
    g_autofree char *nodir = g_build_filename(f->dir, "no", "such", "w.safetensors", NULL);
    save_small(nodir, 1.0f, 4, &error, &ok);
    g_assert_false(ok);
    g_assert_error(error, TDM_ERROR, TDM_ERROR_IO);
}

/* ---- models ---- */

static TdmModel *make_model(const char *name, int classes, guint64 seed)
{
    g_autoptr(GError) error = NULL;
    TdmDevice *dev = tdm_device_get("ref", &error);
    g_assert_no_error(error);
    TdmModelConfig mc = {0};
    mc.in_channels = 1;
    mc.num_classes = classes;
    mc.image_size = 28;
    TdmModule *root = tdm_model_zoo_create(name, &mc, &error);
    g_assert_no_error(error);
    TdmModel *m = tdm_model_new(root, dev, seed, &error);
    g_assert_no_error(error);
    return m;
}

static void assert_same_values(TdmModel *a, TdmModel *b)
{
    g_assert_cmpuint(a->params->len, ==, b->params->len);
    for (guint i = 0; i < a->params->len; i++) {
        TdmParam *pa = a->params->pdata[i], *pb = b->params->pdata[i];
        g_assert_cmpstr(pa->full_name, ==, pb->full_name);
        g_autofree float *va = tdm_tensor_read_f32(pa->value, NULL);
        g_autofree float *vb = tdm_tensor_read_f32(pb->value, NULL);
        g_assert_cmpmem(va, tdm_tensor_numel(pa->value) * 4, vb,
                        tdm_tensor_numel(pb->value) * 4);
    }
}

static void test_model_roundtrip(Fixture *f, gconstpointer data)
{
    const char *name = data;
    g_autofree char *path = g_build_filename(f->dir, "model.safetensors", NULL);
    TdmModel *a = make_model(name, 10, 1);
    TdmModel *b = make_model(name, 10, 2);
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_model_save(a, path, &error));
    g_assert_no_error(error);

    TdmSafeTensors *st = tdm_safetensors_load(path, &error);
    g_assert_no_error(error);
    /* Every parameter and buffer, plus one num_batches_tracked per BN. */
    guint n_bn = 0;
    for (guint i = 0; i < a->params->len; i++) {
        TdmParam *p = a->params->pdata[i];
        const TdmSafeTensor *t = tdm_safetensors_get(st, p->full_name);
        g_assert_nonnull(t);
        g_assert_cmpint(t->ndim, ==, p->ndim);
        if (p->is_buffer && strcmp(p->name, "running_mean") == 0) {
            n_bn++;
            g_autofree char *prefix = g_strndup(p->full_name, strlen(p->full_name) - 12);
            g_autofree char *nbt = g_strconcat(prefix, "num_batches_tracked", NULL);
            const TdmSafeTensor *c = tdm_safetensors_get(st, nbt);
            g_assert_nonnull(c);
            g_assert_cmpint(c->dtype, ==, TDM_DTYPE_I64);
            g_assert_cmpint(c->ndim, ==, 0);
        }
    }
    g_assert_cmpuint(tdm_safetensors_count(st), ==, a->params->len + n_bn);
    if (g_str_has_prefix(name, "resnet")) {
        g_assert_cmpuint(n_bn, >, 0);
        g_assert_nonnull(tdm_safetensors_get(st, "bn1.num_batches_tracked"));
    }
    tdm_safetensors_free(st);

    g_assert_true(tdm_model_load(b, path, TRUE, &error));
    g_assert_no_error(error);
    assert_same_values(a, b);
    tdm_model_free(a);
    tdm_model_free(b);
}

static void test_model_mismatch(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "m.safetensors", NULL);
    g_autoptr(GError) error = NULL;
    TdmModel *five = make_model("mlp", 5, 1);
    TdmModel *ten = make_model("mlp", 10, 1);
    g_assert_true(tdm_model_save(five, path, &error));

    g_assert_false(tdm_model_load(ten, path, TRUE, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_SHAPE);
    g_assert_nonnull(strstr(error->message, "fc3.weight"));
    g_assert_nonnull(strstr(error->message, "[10, 256]"));
    g_assert_nonnull(strstr(error->message, "[5, 256]"));
    g_clear_error(&error);

    /* A missing name, and an extra one (strict only). */
    TdmSafeTensors *w = tdm_safetensors_new();
    TdmSafeTensors *w2 = tdm_safetensors_new();
    for (guint i = 0; i < ten->params->len; i++) {
        TdmParam *p = ten->params->pdata[i];
        g_autofree float *v = tdm_tensor_read_f32(p->value, NULL);
        if (strcmp(p->full_name, "fc2.bias") != 0) {
            tdm_safetensors_add(w, p->full_name, TDM_DTYPE_F32, p->ndim, p->shape, v);
        }
        tdm_safetensors_add(w2, p->full_name, TDM_DTYPE_F32, p->ndim, p->shape, v);
    }
    float extra = 1.0f;
    int64_t one = 1;
    tdm_safetensors_add(w2, "fc9.weight", TDM_DTYPE_F32, 1, &one, &extra);
    g_assert_true(tdm_safetensors_save(w, path, NULL));
    g_assert_false(tdm_model_load(ten, path, FALSE, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "fc2.bias"));
    g_clear_error(&error);
    g_assert_true(tdm_safetensors_save(w2, path, NULL));
    g_assert_false(tdm_model_load(ten, path, TRUE, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "fc9.weight"));
    g_clear_error(&error);
    g_assert_true(tdm_model_load(ten, path, FALSE, &error));
    g_assert_no_error(error);
    tdm_safetensors_free(w);
    tdm_safetensors_free(w2);
    tdm_model_free(five);
    tdm_model_free(ten);
}

/* ---- config ---- */

static void test_config_set(void)
{
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    g_assert_cmpstr(cfg.model, ==, "mlp");
    g_assert_cmpint(cfg.batch_size, ==, 64);
    g_assert_cmpfloat_with_epsilon(cfg.lr, 0.05, 1e-6);
    g_assert_cmpfloat_with_epsilon(cfg.momentum, 0.9, 1e-7);
    g_assert_cmpfloat_with_epsilon(cfg.weight_decay, 5e-4, 1e-9);
    g_assert_cmpint(cfg.epochs, ==, 1);
    g_assert_true(cfg.eval);
    g_assert_cmpstr(cfg.precision, ==, "fp32");

    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_train_config_set(&cfg, "train.precision", "bf16", &error));
    g_assert_cmpstr(cfg.precision, ==, "bf16");
    g_assert_true(tdm_train_config_set(&cfg, "optim.lr", "0.1", &error));
    g_assert_cmpfloat_with_epsilon(cfg.lr, 0.1, 1e-6);
    g_assert_true(tdm_train_config_set(&cfg, "data.batch_size", " 128 ", &error));
    g_assert_cmpint(cfg.batch_size, ==, 128);
    g_assert_true(tdm_train_config_set(&cfg, "optim.nesterov", "yes", &error));
    g_assert_true(cfg.nesterov);
    g_assert_true(tdm_train_config_set(&cfg, "train.seed", "18446744073709551615", &error));
    g_assert_cmpuint(cfg.seed, ==, G_MAXUINT64);
    g_assert_true(tdm_train_config_set(&cfg, "optim.schedule", "cosine", &error));
    g_assert_cmpstr(cfg.schedule, ==, "cosine");
    g_assert_true(tdm_train_config_set(&cfg, "model.init", "w.safetensors", &error));
    g_assert_cmpstr(cfg.init_path, ==, "w.safetensors");
    g_assert_true(tdm_train_config_set(&cfg, "model.init", "", &error));
    g_assert_null(cfg.init_path);
    g_assert_no_error(error);

    static const char *const bad[][2] = {
        {"optim.lr", "abc"},          {"optim.lr", "-1"},         {"optim.lr", "nan"},
        {"data.batch_size", "-5"},    {"data.batch_size", "0"},   {"data.batch_size", "1.5"},
        {"optim.nesterov", "maybe"},  {"optim.schedule", "linear"}, {"train.seed", "-1"},
        {"model.name", ""},           {"optim.momentum", "2"},    {"train.epochs", "0"},
        {"train.precision", "fp16"},  {"train.precision", ""},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_false(tdm_train_config_set(&cfg, bad[i][0], bad[i][1], &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        if (strstr(error->message, bad[i][0]) == NULL ||
            strstr(error->message, bad[i][1]) == NULL) {
            g_error("message '%s' should name %s and '%s'", error->message, bad[i][0],
                    bad[i][1]);
        }
        g_clear_error(&error);
    }
    /* Failed sets leave the old values. */
    g_assert_cmpint(cfg.batch_size, ==, 128);
    g_assert_cmpstr(cfg.schedule, ==, "cosine");
    g_assert_cmpstr(cfg.precision, ==, "bf16");

    g_assert_false(tdm_train_config_set(&cfg, "optim.learning_rate", "0.1", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "optim.learning_rate"));
    g_clear_error(&error);

    /* strategy.KEY: the strategy's parameters, gathered in strategy.args (a
     * later value of a key replaces the earlier one); the strategy checks
     * them against its specs when it is set up */
    g_assert_null(cfg.strategy_args);
    g_assert_true(tdm_train_config_set(&cfg, "strategy.sync-every", "8", &error));
    g_assert_true(tdm_train_config_set(&cfg, "strategy.bucket_mb", " 25 ", &error));
    g_assert_true(tdm_train_config_set(&cfg, "strategy.sync-every", "4", &error));
    g_assert_no_error(error);
    g_assert_cmpstr(cfg.strategy_args, ==, "bucket_mb=25 sync-every=4");
    static const char *const bad_strategy[][2] = {
        {"strategy.", "1"}, {"strategy.a b", "1"}, {"strategy.k", "two words"}, {"strategy.k", ""},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad_strategy); i++) {
        g_assert_false(tdm_train_config_set(&cfg, bad_strategy[i][0], bad_strategy[i][1], &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        g_assert_nonnull(strstr(error->message, bad_strategy[i][0]));
        g_clear_error(&error);
    }
    g_assert_cmpstr(cfg.strategy_args, ==, "bucket_mb=25 sync-every=4");

    const char *const *keys = tdm_train_config_keys();
    guint n = 0;
    for (; keys[n] != NULL; n++) {
        g_assert_nonnull(strchr(keys[n], '.'));
    }
    g_assert_cmpuint(n, >=, 30);
    tdm_train_config_clear(&cfg);
}

static void test_config_load(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "c.ini", NULL);
    const char *ini = "# comment\n[model]\nname = lenet\n[data]\nbatch_size = 32\nlimit = 1000\n"
                      "[optim]\nlr = 0.01\nschedule = step\n[train]\nepochs = 3\neval = false\n"
                      "precision = tf32\n";
    g_assert_true(g_file_set_contents(path, ini, -1, NULL));
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_train_config_load(&cfg, path, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(cfg.model, ==, "lenet");
    g_assert_cmpint(cfg.batch_size, ==, 32);
    g_assert_cmpint(cfg.limit, ==, 1000);
    g_assert_cmpfloat_with_epsilon(cfg.lr, 0.01, 1e-6);
    g_assert_cmpstr(cfg.schedule, ==, "step");
    g_assert_cmpint(cfg.epochs, ==, 3);
    g_assert_false(cfg.eval);
    g_assert_cmpstr(cfg.precision, ==, "tf32");

    /* a [strategy] section gives the strategy's parameters */
    g_assert_true(g_file_set_contents(path, "[train]\nstrategy = ddp\n[strategy]\nbucket-mb = 5\n",
                                      -1, NULL));
    g_assert_true(tdm_train_config_load(&cfg, path, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(cfg.strategy, ==, "ddp");
    g_assert_cmpstr(cfg.strategy_args, ==, "bucket-mb=5");

    g_assert_true(g_file_set_contents(path, "[optim]\nlr = 0.1\nspeed = 3\n", -1, NULL));
    g_assert_false(tdm_train_config_load(&cfg, path, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, "optim.speed"));
    g_clear_error(&error);

    g_assert_true(g_file_set_contents(path, "[data]\nbatch_size = -3\n", -1, NULL));
    g_assert_false(tdm_train_config_load(&cfg, path, &error));
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, "data.batch_size"));
    g_clear_error(&error);

    g_assert_true(g_file_set_contents(path, "not an ini file\n", -1, NULL));
    g_assert_false(tdm_train_config_load(&cfg, path, &error));
    g_assert_nonnull(strstr(error->message, path));
    g_clear_error(&error);

    g_autofree char *missing = g_build_filename(f->dir, "absent.ini", NULL);
    g_assert_false(tdm_train_config_load(&cfg, missing, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "absent.ini"));
    tdm_train_config_clear(&cfg);
}

/* One entry of TDM_TRAIN_CONFIG_KEYS, as the table test reads it. */
typedef struct {
    const char *key, *type, *def, *range, *flag, *arg, *scope;
    char short_name;
    gboolean alias;
} Row;

#define ROW_KEY(field, type, key, def, range, flag, short_name, arg, scope, help)             \
    {key, #type, def, range, flag, arg, #scope, short_name, FALSE},
#define ROW_ALIAS(flag, short_name, key, value, arg, scope, help)                               \
    {key, NULL, value, NULL, flag, arg, #scope, short_name, TRUE},
static const Row rows[] = {TDM_TRAIN_CONFIG_KEYS(ROW_KEY, ROW_ALIAS)};

/* Setting `key` to `value` fails naming the key, the value and `why`. */
static void expect_refused(TdmTrainConfig *cfg, const char *key, const char *value,
                           const char *why)
{
    g_autoptr(GError) error = NULL;
    if (tdm_train_config_set(cfg, key, value, &error) || error == NULL ||
        strstr(error->message, key) == NULL || strstr(error->message, value) == NULL ||
        strstr(error->message, why) == NULL) {
        g_error("%s=%s should be refused naming the key, the value and '%s' (%s)", key, value,
                why, error != NULL ? error->message : "accepted");
    }
}

static void expect_taken(TdmTrainConfig *cfg, const char *key, const char *value)
{
    g_autoptr(GError) error = NULL;
    if (!tdm_train_config_set(cfg, key, value, &error)) {
        g_error("%s=%s should be taken: %s", key, value, error->message);
    }
}

/* The key list is consistent: every key once, in tdm_train_config_keys()
 * grouped by section; flags unique (the command line adds --config/-c and
 * --set/-s) and of the right kind for their key; every range and choice
 * list enforced at its bounds. A typo in a new entry fails here. */
static void test_config_table(void)
{
    const char *const *keys = tdm_train_config_keys();
    guint n_keys = 0, n_listed = g_strv_length((char **)keys);
    g_autoptr(GHashTable) flags = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_add(flags, "config");
    g_hash_table_add(flags, "set");
    g_autoptr(GString) shorts = g_string_new("cs");
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    for (size_t i = 0; i < G_N_ELEMENTS(rows); i++) {
        const Row *r = &rows[i];
        g_assert_true(g_strv_contains(keys, r->key));
        n_keys += r->alias ? 0 : 1;
        for (size_t j = 0; j < i; j++) {
            g_assert_true(rows[j].alias || r->alias || strcmp(rows[j].key, r->key) != 0);
        }
        g_assert_cmpint(r->flag == NULL, ==, strcmp(r->scope, "NONE") == 0);
        if (r->flag != NULL) {
            g_assert_false(g_hash_table_contains(flags, r->flag));
            g_hash_table_add(flags, (gpointer)r->flag);
            /* a flag takes an argument unless it is a switch */
            gboolean is_switch = r->alias ? r->def != NULL : strcmp(r->type, "BOOL") == 0;
            g_assert_cmpint(r->arg == NULL, ==, is_switch);
        }
        if (r->short_name != 0) {
            g_assert_null(strchr(shorts->str, r->short_name));
            g_string_append_c(shorts, r->short_name);
        }
        if (r->alias || r->range == NULL) {
            continue;
        }
        if (strcmp(r->type, "NAME") == 0) {
            g_auto(GStrv) choices = g_strsplit(r->range, "|", -1);
            for (char **c = choices; *c != NULL; c++) {
                expect_taken(&cfg, r->key, *c);
            }
            expect_refused(&cfg, r->key, "no-such-choice", choices[0]);
            continue;
        }
        /* numbers: "[min, max]", "(min, max]" or ">= min" */
        g_autofree char *lo = NULL, *hi = NULL;
        gboolean open = r->range[0] == '(';
        if (r->range[0] == '>') {
            lo = g_strstrip(g_strdup(r->range + 2));
        } else {
            g_auto(GStrv) ends = g_strsplit_set(r->range + 1, ",]", -1);
            lo = g_strstrip(g_strdup(ends[0]));
            hi = g_strstrip(g_strdup(ends[1]));
        }
        gboolean is_float = strcmp(r->type, "FLOAT") == 0;
        double below = g_ascii_strtod(lo, NULL) - (is_float ? 0.5 : 1.0);
        g_autofree char *below_text = g_strdup_printf("%.17g", below);
        expect_refused(&cfg, r->key, open ? lo : below_text, r->range);
        if (!open) {
            expect_taken(&cfg, r->key, lo);
        }
        if (hi != NULL) {
            expect_taken(&cfg, r->key, hi);
            g_autofree char *above =
                g_strdup_printf("%.17g", g_ascii_strtod(hi, NULL) * (is_float ? 2.0 : 1.0) + 1);
            expect_refused(&cfg, r->key, above, r->range);
        }
    }
    g_assert_cmpuint(n_keys, ==, n_listed);
    /* each section's keys together */
    for (guint i = 2; i < n_listed; i++) {
        size_t len = (size_t)(strchr(keys[i], '.') - keys[i]) + 1;
        for (guint j = 0; j + 1 < i; j++) {
            g_assert_true(strncmp(keys[j], keys[i], len) != 0 ||
                          strncmp(keys[i - 1], keys[i], len) == 0);
        }
    }
    tdm_train_config_clear(&cfg);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/safetensors/roundtrip", Fixture, NULL, fixture_setup, test_roundtrip,
               fixture_teardown);
    g_test_add("/safetensors/corrupt", Fixture, NULL, fixture_setup, test_corrupt,
               fixture_teardown);
    g_test_add("/safetensors/atomic", Fixture, NULL, fixture_setup, test_atomic,
               fixture_teardown);
    g_test_add("/safetensors/strict-header", Fixture, NULL, fixture_setup, test_strict_header,
               fixture_teardown);
    g_test_add("/model/save-load/mlp", Fixture, "mlp", fixture_setup, test_model_roundtrip,
               fixture_teardown);
    g_test_add("/model/save-load/resnet8", Fixture, "resnet8", fixture_setup,
               test_model_roundtrip, fixture_teardown);
    g_test_add("/model/load-mismatch", Fixture, NULL, fixture_setup, test_model_mismatch,
               fixture_teardown);
    g_test_add_func("/config/set", test_config_set);
    g_test_add_func("/config/table", test_config_table);
    g_test_add("/config/load", Fixture, NULL, fixture_setup, test_config_load, fixture_teardown);
    return g_test_run();
}
