/* SPDX-License-Identifier: MIT */
/* tests/test-pth.c - PyTorch .pth files read and written in C, without
 * PyTorch (tests/pth-torch.sh checks against torch itself).
 *
 * Round trips through tdm_pth_save and tdm_pth_load for every dtype a .pth
 * can hold here (F16 and BF16 read back as F32); archives built here with
 * libzip around hand-written pickles, each one a way a file can be hostile
 * or broken (a global outside the allow-list, a call of something that is
 * not callable, memo and stack abuse, views past their storage, ...), each
 * refused with a message naming the file, the byte and the opcode, global
 * or tensor; and a fuzz-style pass: every truncation and many byte flips
 * of a valid file, and of the pickle inside it (re-zipped, so that the
 * mutation gets past the CRC), each of which must load or fail cleanly.
 */
#include <glib/gstdio.h>
#include <string.h>
#include <zip.h>

#include <tandem/tandem.h>

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

/* ---- building archives ------------------------------------------------ */

typedef struct {
    const char *name; /* inside the archive */
    const void *data;
    size_t len;
    gboolean deflate;
} Entry;

static void write_zip(const char *path, const Entry *entries, size_t n)
{
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    g_assert_nonnull(za);
    for (size_t i = 0; i < n; i++) {
        zip_source_t *src = zip_source_buffer(za, entries[i].data, entries[i].len, 0);
        g_assert_nonnull(src);
        zip_int64_t idx = zip_file_add(za, entries[i].name, src, ZIP_FL_ENC_UTF_8);
        g_assert_cmpint(idx, >=, 0);
        g_assert_cmpint(zip_set_file_compression(za, (zip_uint64_t)idx,
                                                 entries[i].deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                                 0), ==, 0);
    }
    g_assert_cmpint(zip_close(za), ==, 0);
}

/* A pickle writer for hand-made state dicts: enough opcodes to say what
 * torch.save says, and to say it wrong. */
static void put_str(GString *p, const char *s)
{
    guint32 n = (guint32)strlen(s);
    g_string_append_c(p, 'X');
    for (int i = 0; i < 4; i++) {
        g_string_append_c(p, (char)(n >> (8 * i)));
    }
    g_string_append(p, s);
}

static void put_int(GString *p, gint64 v)
{
    g_string_append_c(p, 'J');
    for (int i = 0; i < 4; i++) {
        g_string_append_c(p, (char)((guint32)v >> (8 * i)));
    }
}

static void put_tuple(GString *p, int n, const gint64 *v)
{
    g_string_append_c(p, '(');
    for (int i = 0; i < n; i++) {
        put_int(p, v[i]);
    }
    g_string_append_c(p, 't');
}

/* key, then _rebuild_tensor_v2(('storage', torch.<cls>, skey, 'cpu',
 * numel), offset, size, stride, False, OrderedDict()) */
static void put_tensor(GString *p, const char *key, const char *cls, const char *skey,
                       gint64 numel, gint64 offset, int ndim, const gint64 *size,
                       const gint64 *stride)
{
    put_str(p, key);
    g_string_append(p, "ctorch._utils\n_rebuild_tensor_v2\n((");
    put_str(p, "storage");
    g_string_append_printf(p, "ctorch\n%s\n", cls);
    put_str(p, skey);
    put_str(p, "cpu");
    put_int(p, numel);
    g_string_append(p, "tQ");
    put_int(p, offset);
    put_tuple(p, ndim, size);
    put_tuple(p, ndim, stride);
    g_string_append(p, "\x89" "ccollections\nOrderedDict\n)R");
    g_string_append(p, "tR");
}

#define PROTO2 "\x80\x02"
#define ODICT "ccollections\nOrderedDict\n)R"

/* The pickle of a wrapped state dict over one storage of 12 floats:
 * {"epoch": 3, "state_dict": {"w": 3x2 transposed view at offset 1, "b":
 * 4 elements from offset 8}} with BUILD of _metadata, as torch writes. */
static GString *views_pickle(void)
{
    GString *p = g_string_new(PROTO2 "}q\x01(");
    put_str(p, "epoch");
    g_string_append(p, "K\x03");
    put_str(p, "state_dict");
    g_string_append(p, ODICT "q\x02(");
    gint64 wsize[2] = {3, 2}, wstride[2] = {1, 3}, bsize[1] = {4}, bstride[1] = {1};
    put_tensor(p, "w", "FloatStorage", "0", 12, 1, 2, wsize, wstride);
    put_tensor(p, "b", "FloatStorage", "0", 12, 8, 1, bsize, bstride);
    g_string_append(p, "u}");
    put_str(p, "_metadata");
    g_string_append(p, ODICT "sbu.");
    return p;
}

static const float twelve[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

/* Archive `name` under tmp_dir: top/data.pkl = `pkl`, top/data/0 =
 * `data`, top/version. */
static char *make_pth(const char *name, const GString *pkl, const void *data, size_t len)
{
    char *path = tmp_path(name);
    Entry e[] = {
        {"top/data.pkl", pkl->str, pkl->len, FALSE},
        {"top/data/0", data, len, FALSE},
        {"top/version", "3\n", 2, FALSE},
    };
    write_zip(path, e, G_N_ELEMENTS(e));
    return path;
}

/* ---- round trips ------------------------------------------------------- */

static void assert_tensor(const TdmSafeTensors *st, const char *name, TdmDType dtype, int ndim,
                          const void *data, size_t nbytes)
{
    const TdmSafeTensor *t = tdm_safetensors_get(st, name);
    g_assert_nonnull(t);
    g_assert_cmpint(t->dtype, ==, dtype);
    g_assert_cmpint(t->ndim, ==, ndim);
    g_assert_cmpuint(t->nbytes, ==, nbytes);
    g_assert_cmpmem(t->data, t->nbytes, data, nbytes);
}

static void test_round_trip(void)
{
    g_autofree char *path = tmp_path("rt.pth");
    TdmSafeTensors *st = tdm_safetensors_new();
    float w[6] = {1.5f, -2.0f, 0.0f, -0.0f, 3.25f, 1e-30f};
    int64_t wshape[2] = {2, 3};
    gint64 count = 42;
    /* 1.5, -2, 65504, smallest subnormal; bf16: 1.0, -inf */
    guint16 half[4] = {0x3e00, 0xc000, 0x7bff, 0x0001}, bf[2] = {0x3f80, 0xff80};
    float half_f[4] = {1.5f, -2.0f, 65504.0f, 5.9604644775390625e-8f};
    guint32 bf_bits[2] = {0x3f800000u, 0xff800000u};
    guint8 bytes[3] = {0, 128, 255};
    gint32 ints[2] = {-7, 1 << 30};
    int64_t n4[1] = {4}, n2[1] = {2}, n3[1] = {3}, empty[2] = {0, 4};
    tdm_safetensors_add(st, "layer.weight", TDM_DTYPE_F32, 2, wshape, w);
    tdm_safetensors_add(st, "bn.num_batches_tracked", TDM_DTYPE_I64, 0, NULL, &count);
    tdm_safetensors_add(st, "half", TDM_DTYPE_F16, 1, n4, half);
    tdm_safetensors_add(st, "bf", TDM_DTYPE_BF16, 1, n2, bf);
    tdm_safetensors_add(st, "u8", TDM_DTYPE_U8, 1, n3, bytes);
    tdm_safetensors_add(st, "i32", TDM_DTYPE_I32, 1, n2, ints);
    tdm_safetensors_add(st, "empty", TDM_DTYPE_F32, 2, empty, NULL);
    GError *error = NULL;
    g_assert_true(tdm_pth_save(st, path, &error));
    g_assert_no_error(error);
    tdm_safetensors_free(st);

    /* Both entry points read it; the format is found from the content. */
    for (int pass = 0; pass < 2; pass++) {
        TdmSafeTensors *in = pass == 0 ? tdm_pth_load(path, &error)
                                       : tdm_weights_load(path, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(tdm_safetensors_count(in), ==, 7);
        g_assert_cmpstr(tdm_safetensors_index(in, 0)->name, ==, "layer.weight");
        g_assert_cmpstr(tdm_safetensors_index(in, 6)->name, ==, "empty");
        assert_tensor(in, "layer.weight", TDM_DTYPE_F32, 2, w, sizeof w);
        assert_tensor(in, "bn.num_batches_tracked", TDM_DTYPE_I64, 0, &count, sizeof count);
        assert_tensor(in, "half", TDM_DTYPE_F32, 1, half_f, sizeof half_f);
        assert_tensor(in, "bf", TDM_DTYPE_F32, 1, bf_bits, sizeof bf_bits);
        assert_tensor(in, "u8", TDM_DTYPE_U8, 1, bytes, sizeof bytes);
        assert_tensor(in, "i32", TDM_DTYPE_I32, 1, ints, sizeof ints);
        assert_tensor(in, "empty", TDM_DTYPE_F32, 2, NULL, 0);
        tdm_safetensors_free(in);
    }
}

static void test_views_and_wrapper(void)
{
    g_autoptr(GString) pkl = views_pickle();
    g_autofree char *path = make_pth("views.pth", pkl, twelve, sizeof twelve);
    GError *error = NULL;
    TdmSafeTensors *st = tdm_weights_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(tdm_safetensors_count(st), ==, 2);
    /* w[i][j] = storage[1 + i + 3 j] */
    const float w[6] = {1, 4, 2, 5, 3, 6}, b[4] = {8, 9, 10, 11};
    assert_tensor(st, "w", TDM_DTYPE_F32, 2, w, sizeof w);
    assert_tensor(st, "b", TDM_DTYPE_F32, 1, b, sizeof b);
    tdm_safetensors_free(st);
}

/* dict(model.named_parameters()) saves Parameters: _rebuild_parameter
 * around _rebuild_tensor_v2, read as the tensor. */
static void test_parameters(void)
{
    g_autoptr(GString) p = g_string_new(PROTO2 "}(");
    gint64 size[1] = {3}, stride[1] = {2};
    put_str(p, "w");
    g_string_append(p, "ctorch._utils\n_rebuild_parameter\n");
    GString *t = g_string_new(NULL);
    put_tensor(t, "", "FloatStorage", "0", 12, 5, 1, size, stride);
    /* put_tensor starts with the key: drop the empty string's 5 bytes */
    g_string_append_len(p, t->str + 5, (gssize)t->len - 5);
    g_string_free(t, TRUE);
    g_string_append(p, "\x88" ODICT "\x87Ru.");
    g_autofree char *path = make_pth("param.pth", p, twelve, sizeof twelve);
    GError *error = NULL;
    TdmSafeTensors *st = tdm_pth_load(path, &error);
    g_assert_no_error(error);
    const float w[3] = {5, 7, 9};
    assert_tensor(st, "w", TDM_DTYPE_F32, 1, w, sizeof w);
    tdm_safetensors_free(st);
}

static void test_save_refuses_directory(void)
{
    TdmSafeTensors *st = tdm_safetensors_new();
    GError *error = NULL;
    g_assert_false(tdm_pth_save(st, tmp_dir, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "is a directory"));
    g_error_free(error);
    tdm_safetensors_free(st);
}

/* ---- refusals ---------------------------------------------------------- */

static void expect_refused(const char *path, const char *const *patterns)
{
    GError *error = NULL;
    TdmSafeTensors *st = tdm_weights_load(path, &error);
    g_assert_null(st);
    g_assert_nonnull(error);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, path));
    for (const char *const *p = patterns; *p != NULL; p++) {
        if (strstr(error->message, *p) == NULL) {
            g_error("'%s' lacks '%s'", error->message, *p);
        }
    }
    g_error_free(error);
}

typedef struct {
    const char *what;
    const char *pickle; /* after PROTO2 */
    size_t len;         /* the pickle may hold NUL bytes */
    const char *patterns[4];
} BadPickle;

#define BAD(what, p, ...) {what, p, sizeof(p) - 1, {__VA_ARGS__, NULL}}

static const BadPickle bad_pickles[] = {
    BAD("GLOBAL os.system", "cos\nsystem\nX\x02\x00\x00\x00ls\x85R.", "byte 2:",
        "GLOBAL: global 'os.system' is not allowed"),
    BAD("REDUCE of builtins.eval", "cbuiltins\neval\nX\x01\x00\x00\x00" "1\x85R.",
        "global 'builtins.eval' is not allowed"),
    BAD("STACK_GLOBAL of subprocess", "X\x0a\x00\x00\x00subprocessX\x05\x00\x00\x00Popen\x93.",
        "STACK_GLOBAL", "'subprocess.Popen'"),
    BAD("REDUCE of a storage class", "ctorch\nFloatStorage\n)R.", "REDUCE",
        "calls a storage class"),
    BAD("REDUCE of a string", "X\x01\x00\x00\x00" "a)R.", "REDUCE", "calls a str"),
    BAD("OrderedDict with arguments", "ccollections\nOrderedDict\nK\x01\x85R.",
        "OrderedDict takes no arguments"),
    BAD("BUILD on a list", "]}b.", "BUILD", "state of a list"),
    BAD("INST", "(ios\nsystem\n.", "INST", "not accepted"),
    BAD("NEWOBJ", "ccollections\nOrderedDict\n)\x81.", "NEWOBJ", "not accepted"),
    BAD("memo never set", "h\x05.", "BINGET", "memo entry 5 was never set"),
    BAD("stack underflow", "R", "byte 2: opcode 0x52 REDUCE", "needs 2 values"),
    BAD("pop across a MARK", "}(s.", "SETITEM", "needs 3 values"),
    BAD("no STOP", "}", "ends without STOP"),
    BAD("string past the end", "X\xff\xff\xff\x7f", "BINUNICODE", "runs past the end"),
    BAD("string not UTF-8", "X\x02\x00\x00\x00\xff\xfe.", "not valid UTF-8"),
    BAD("GLOBAL without newline", "cos", "no newline"),
    BAD("a persistent id that is not a storage", "X\x03\x00\x00\x00" "abcQ.", "BINPERSID",
        "persistent id"),
    BAD("a 9-byte integer", "\x8a\x09\x01\x01\x01\x01\x01\x01\x01\x01\x01.",
        "does not fit in 64 bits"),
    BAD("protocol 9", "\x80\x09.", "protocol 9"),
    BAD("a list at the top", "].", "holds a list", "not a state dict"),
    BAD("a non-tensor value", "}X\x01\x00\x00\x00" "aK\x01s.", "entry 'a'", "type int",
        "not a tensor"),
    BAD("a wrapper of non-tensors", "}X\x05\x00\x00\x00model}X\x01\x00\x00\x00" "b]ss.",
        "entry 'b' under model", "type list"),
    BAD("SETITEM on a tuple", ")K\x01K\x02s.", "SETITEM", "adds to a tuple"),
    BAD("APPEND on a dict", "}K\x01" "a.", "APPEND", "not a list"),
};

static void test_bad_pickles(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_pickles); i++) {
        const BadPickle *b = &bad_pickles[i];
        g_test_message("case: %s", b->what);
        g_autoptr(GString) pkl = g_string_new(PROTO2);
        g_string_append_len(pkl, b->pickle, (gssize)b->len);
        g_autofree char *path = make_pth("bad.pth", pkl, twelve, sizeof twelve);
        expect_refused(path, b->patterns);
    }
}

/* A state dict of one tensor over storage "0" of `numel` floats. */
static GString *one_tensor(const char *cls, const char *skey, gint64 numel, gint64 offset,
                           int ndim, const gint64 *size, const gint64 *stride)
{
    GString *p = g_string_new(PROTO2 ODICT "(");
    put_tensor(p, "w", cls, skey, numel, offset, ndim, size, stride);
    g_string_append(p, "u.");
    return p;
}

static void test_bad_tensors(void)
{
    gint64 s34[2] = {3, 4}, c34[2] = {4, 1}, s35[2] = {3, 5}, neg[2] = {-4, 1};
    gint64 big[2] = {G_MAXINT32, G_MAXINT32}, zero[2] = {0, 0};
    struct {
        const char *what;
        GString *pkl;
        size_t bytes; /* of data/0 */
        const char *patterns[4];
    } cases[] = {
        {"view past its storage", one_tensor("FloatStorage", "0", 12, 0, 2, s35, c34), 48,
         {"tensor 'w'", "shape [3, 5], strides [4, 1]", "reach past storage '0' of 12", NULL}},
        {"offset past its storage", one_tensor("FloatStorage", "0", 12, 1, 2, s34, c34), 48,
         {"offset 1", "reach past", NULL}},
        {"a broadcast view larger than its storage",
         one_tensor("FloatStorage", "0", 12, 0, 2, big, zero), 48, {"reach past", NULL}},
        {"negative stride", one_tensor("FloatStorage", "0", 12, 0, 2, s34, neg), 48,
         {"size and stride must be integers >= 0", NULL}},
        {"storage entry too short", one_tensor("FloatStorage", "0", 12, 0, 2, s34, c34), 44,
         {"top/data/0 is 44 bytes", "12 elements of torch.FloatStorage", NULL}},
        {"storage entry missing", one_tensor("FloatStorage", "7", 12, 0, 2, s34, c34), 48,
         {"storage '7'", "has no entry top/data/7", NULL}},
        {"a key with a slash", one_tensor("FloatStorage", "../0", 12, 0, 2, s34, c34), 48,
         {"without '/'", NULL}},
        {"a double storage", one_tensor("DoubleStorage", "0", 6, 0, 2, s34, c34), 48,
         {"torch.DoubleStorage", NULL}},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_test_message("case: %s", cases[i].what);
        guint8 data[48] = {0};
        g_autofree char *path = make_pth("bad.pth", cases[i].pkl, data, cases[i].bytes);
        expect_refused(path, cases[i].patterns);
        g_string_free(cases[i].pkl, TRUE);
    }
}

static void test_bad_archives(void)
{
    g_autoptr(GString) pkl = views_pickle();
    g_autofree char *path = tmp_path("bad.pth");
    const char *patterns_legacy[] = {"legacy", "re-save it with a newer torch", NULL};
    /* pre-1.6 torch.save: a pickle of the magic number first */
    const char legacy[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
    g_assert_true(g_file_set_contents(path, legacy, sizeof legacy - 1, NULL));
    expect_refused(path, patterns_legacy);
    g_assert_true(g_file_set_contents(path, "PK\x03\x04 and then nothing", 24, NULL));
    const char *patterns_zip[] = {"not a readable zip archive", NULL};
    expect_refused(path, patterns_zip);

    Entry compressed[] = {{"top/data.pkl", pkl->str, pkl->len, TRUE},
                          {"top/data/0", twelve, sizeof twelve, FALSE}};
    write_zip(path, compressed, 2);
    const char *patterns_deflate[] = {"top/data.pkl is compressed", NULL};
    expect_refused(path, patterns_deflate);

    Entry big_endian[] = {{"top/data.pkl", pkl->str, pkl->len, FALSE},
                          {"top/byteorder", "big", 3, FALSE},
                          {"top/data/0", twelve, sizeof twelve, FALSE}};
    write_zip(path, big_endian, 3);
    const char *patterns_be[] = {"byteorder says 'big'", NULL};
    expect_refused(path, patterns_be);

    Entry no_pickle[] = {{"top/data/0", twelve, sizeof twelve, FALSE}};
    write_zip(path, no_pickle, 1);
    const char *patterns_nopkl[] = {"without <folder>/data.pkl", NULL};
    expect_refused(path, patterns_nopkl);

    Entry two[] = {{"a/data.pkl", pkl->str, pkl->len, FALSE},
                   {"b/data.pkl", pkl->str, pkl->len, FALSE}};
    write_zip(path, two, 2);
    const char *patterns_two[] = {"two pickles", NULL};
    expect_refused(path, patterns_two);

    g_autoptr(GString) dup = g_string_new(PROTO2 ODICT "(");
    gint64 s[1] = {2}, c[1] = {1};
    put_tensor(dup, "w", "FloatStorage", "0", 12, 0, 1, s, c);
    put_tensor(dup, "w", "FloatStorage", "0", 12, 2, 1, s, c);
    g_string_append(dup, "u.");
    g_free(make_pth("bad.pth", dup, twelve, sizeof twelve));
    const char *patterns_dup[] = {"names 'w' twice", NULL};
    expect_refused(path, patterns_dup);
}

/* ---- fuzz-style -------------------------------------------------------- */

/* Load `path`: success, or a clean error naming it; never a crash. */
static guint load_or_fail(const char *path)
{
    GError *error = NULL;
    TdmSafeTensors *st = tdm_weights_load(path, &error);
    if (st != NULL) {
        g_assert_no_error(error);
        volatile guint8 sink = 0;
        for (guint i = 0; i < tdm_safetensors_count(st); i++) {
            const TdmSafeTensor *t = tdm_safetensors_index(st, i);
            for (size_t k = 0; k < t->nbytes; k++) {
                sink ^= ((const guint8 *)t->data)[k];
            }
        }
        (void)sink;
        tdm_safetensors_free(st);
        return 1;
    }
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, path));
    g_error_free(error);
    return 0;
}

static void test_fuzz_file_bytes(void)
{
    g_autoptr(GString) pkl = views_pickle();
    g_autofree char *good = make_pth("good.pth", pkl, twelve, sizeof twelve);
    g_autofree char *path = tmp_path("mut.pth");
    char *raw = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(good, &raw, &len, NULL));
    guint loaded = 0;
    for (gsize cut = 0; cut < len; cut++) {
        g_assert_true(g_file_set_contents(path, raw, (gssize)cut, NULL));
        loaded += load_or_fail(path);
    }
    /* Only a cut inside the trailing archive comment could pass; there is
     * none, so every truncation fails. */
    g_assert_cmpuint(loaded, ==, 0);
    g_autoptr(GRand) rng = g_rand_new_with_seed(15);
    for (gsize at = 0; at < len; at++) {
        char saved = raw[at];
        raw[at] = (char)(saved ^ (1 + g_rand_int_range(rng, 0, 255)));
        g_assert_true(g_file_set_contents(path, raw, (gssize)len, NULL));
        load_or_fail(path);
        raw[at] = saved;
    }
    g_free(raw);
}

static void test_fuzz_pickle_bytes(void)
{
    g_autoptr(GString) pkl = views_pickle();
    g_autoptr(GRand) rng = g_rand_new_with_seed(1515);
    guint loaded = 0, runs = 0;
    for (gsize at = 0; at < pkl->len; at++) {
        const guint8 values[] = {0x00, 0xff, (guint8)g_rand_int_range(rng, 0, 256),
                                 (guint8)(pkl->str[at] ^ 1)};
        for (size_t v = 0; v < G_N_ELEMENTS(values); v++) {
            g_autoptr(GString) m = g_string_new_len(pkl->str, (gssize)pkl->len);
            m->str[at] = (char)values[v];
            g_autofree char *path = make_pth("mut.pth", m, twelve, sizeof twelve);
            loaded += load_or_fail(path);
            runs++;
        }
        g_autoptr(GString) cut = g_string_new_len(pkl->str, (gssize)at);
        g_autofree char *path = make_pth("mut.pth", cut, twelve, sizeof twelve);
        g_assert_cmpuint(load_or_fail(path), ==, 0);
    }
    g_test_message("%u of %u mutated pickles still loaded", loaded, runs);
    g_assert_cmpuint(loaded, <, runs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp_dir = g_dir_make_tmp("tdm-test-pth-XXXXXX", NULL);
    g_assert_nonnull(tmp_dir);
    g_test_add_func("/pth/round-trip", test_round_trip);
    g_test_add_func("/pth/views-and-wrapper", test_views_and_wrapper);
    g_test_add_func("/pth/parameters", test_parameters);
    g_test_add_func("/pth/save-refuses-directory", test_save_refuses_directory);
    g_test_add_func("/pth/bad-pickles", test_bad_pickles);
    g_test_add_func("/pth/bad-tensors", test_bad_tensors);
    g_test_add_func("/pth/bad-archives", test_bad_archives);
    g_test_add_func("/pth/fuzz-file-bytes", test_fuzz_file_bytes);
    g_test_add_func("/pth/fuzz-pickle-bytes", test_fuzz_pickle_bytes);
    int status = g_test_run();
    const char *name;
    GDir *d = g_dir_open(tmp_dir, 0, NULL);
    while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
        g_autofree char *p = tmp_path(name);
        g_unlink(p);
    }
    if (d != NULL) {
        g_dir_close(d);
    }
    g_rmdir(tmp_dir);
    g_free(tmp_dir);
    return status;
}
