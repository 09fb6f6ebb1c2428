/* SPDX-License-Identifier: MIT */
/* tests/test-abi-layout.c - the public structs keep the layout recorded in
 * tests/abi/layout.txt: sizeof of each and offsetof of each of its fields,
 * compiled here (tests/abi-layout.inc is that file turned into macro calls
 * by tests/abi.mk). A plugin built against older headers reads and fills
 * these structs at the offsets it was compiled with, so a field that moves,
 * changes size or disappears breaks every such plugin: this test fails
 * then, naming the struct, the field and both offsets. A field that is
 * renamed or removed fails the build of this test instead. An intended
 * change is recorded with `make abi-update` (docs/abi.md says when it needs
 * a new interface version). The record is of x86_64; elsewhere the test
 * skips.
 */
#include <stddef.h>
#include <string.h>

#include <tandem/tandem.h>

typedef struct {
    const char *type;
    const char *field; /* NULL: the struct's size */
    gsize recorded;
    gsize actual;
} LayoutEntry;

#define TDM_ABI_SIZE(T, n) {#T, NULL, n, sizeof(T)},
#define TDM_ABI_FIELD(T, f, n) {#T, #f, n, offsetof(T, f)},

static const LayoutEntry entries[] = {
#include "tests/abi-layout.inc"
};

/* All entries of one struct: every mismatch is listed before failing. */
static void test_struct(gconstpointer data)
{
    const char *type = data;
#if !defined(__x86_64__)
    g_test_skip("tests/abi/layout.txt records x86_64");
    return;
#endif
    GString *bad = g_string_new(NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(entries); i++) {
        const LayoutEntry *e = &entries[i];
        if (strcmp(e->type, type) != 0 || e->recorded == e->actual) {
            continue;
        }
        if (e->field == NULL) {
            g_string_append_printf(bad, "\n  sizeof(%s) is %zu, recorded %zu", type, e->actual,
                                   e->recorded);
        } else {
            g_string_append_printf(bad, "\n  offsetof(%s, %s) is %zu, recorded %zu", type,
                                   e->field, e->actual, e->recorded);
        }
    }
    if (bad->len > 0) {
        g_test_fail_printf("%s changed layout (tests/abi/layout.txt):%s\n"
                           "  plugins built against the recorded layout break. If intended, "
                           "run `make abi-update` and follow docs/abi.md.",
                           type, bad->str);
    }
    g_string_free(bad, TRUE);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* One test per struct, in the order of the record. */
    for (gsize i = 0; i < G_N_ELEMENTS(entries); i++) {
        if (entries[i].field == NULL) {
            char *path = g_strdup_printf("/abi/layout/%s", entries[i].type);
            g_test_add_data_func(path, entries[i].type, test_struct);
            g_free(path);
        }
    }
    return g_test_run();
}
