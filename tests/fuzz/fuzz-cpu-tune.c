/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-cpu-tune.c - libFuzzer target for the cpu backend's
 * tuning-cache parser (TDM_CPU_TUNE_CACHE, plugins/cpu/cpu-tune.c).
 *
 * Built by `make fuzz` when the cpu plugin is: the parser is static, so
 * the plugin's file is compiled into this one. Each input is a cache
 * file's text: cache_parse must either give a reason it is unusable or
 * fill the table with choices that are among their candidates. The
 * machine the file must match is fixed here ("cpu fuzz cpu", "isa avx2",
 * "onednn 2.6.0"), so that the seeds (tests/fuzz/make-corpus.py) reach
 * the choice lines.
 */
#include "cpu-tune.c"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

const char *cpu_model(void)
{
    return "fuzz cpu";
}

const char *cpu_isa(void)
{
    return "avx2";
}

const dnnl_version_t *dnnl_version(void)
{
    static const dnnl_version_t v = {2, 6, 0, "fuzz", 0, 0};
    return &v;
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    char *text = g_strndup((const char *)data, size);
    GHashTable *choices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char *why = cache_parse(text, choices);
    if (why == NULL) {
        GHashTableIter it;
        gpointer key, packed;
        g_hash_table_iter_init(&it, choices);
        while (g_hash_table_iter_next(&it, &key, &packed)) {
            const guint v = GPOINTER_TO_UINT(packed), choice = v & 0xff;
            g_assert(choice < CPU_CONV_N);
            g_assert((v >> 8) & CPU_CONV_BIT(choice));
        }
    } else {
        g_assert(why[0] != '\0');
    }
    g_free(why);
    g_hash_table_destroy(choices);
    g_free(text);
    return 0;
}
