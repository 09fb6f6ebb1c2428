/* SPDX-License-Identifier: MIT */
/* tools/check-plugin-backend.c - `tandem check-plugin` on a backend: the
 * op-by-op conformance suite against the ref oracle.
 *
 * The suite is tests/test-conformance.c and its parts, built a second time
 * as the installed helper program tandem-conformance (in the package's
 * libexec directory); it loads the plugin file (TDM_CONFORMANCE_PLUGIN),
 * runs every op of the backend and of ref on the same random inputs and
 * compares them, printing TAP. This file finds the program, runs it and
 * turns its TAP into one line: the ops checked and, on failure, which.
 */
#include "config.h"

#include <string.h>

#include "check-plugin.h"

#define CONFORMANCE_PROGRAM "tandem-conformance"

/* The suite's program: $TDM_CONFORMANCE_PROGRAM, else next to this
 * executable (a build tree: tools/, or tools/.libs/ under libtool), else
 * the libexec directory of the prefix this executable is installed in
 * (a staged or moved install), else the configured one (transfer full). */
static char *find_program(const char *self)
{
    const char *env = g_getenv("TDM_CONFORMANCE_PROGRAM");
    if (env != NULL && env[0] != '\0') {
        return g_strdup(env);
    }
    g_autofree char *dir = g_path_get_dirname(self);
    char *candidates[] = {
        g_build_filename(dir, CONFORMANCE_PROGRAM, NULL),
        g_build_filename(dir, "..", CONFORMANCE_PROGRAM, NULL),
        g_build_filename(dir, "..", "libexec", PACKAGE, CONFORMANCE_PROGRAM, NULL),
        g_build_filename(TDM_PKGLIBEXECDIR, CONFORMANCE_PROGRAM, NULL),
    };
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(candidates); i++) {
        if (found == NULL && g_file_test(candidates[i], G_FILE_TEST_IS_EXECUTABLE) &&
            !g_file_test(candidates[i], G_FILE_TEST_IS_DIR)) {
            found = candidates[i];
        } else {
            g_free(candidates[i]);
        }
    }
    return found;
}

CheckResult check_backend(const CheckOptions *o, TdmFeature *f)
{
    const char *name = tdm_feature_get_name(f);
    g_autofree char *what = g_strdup_printf("backend %s", name);
    g_autofree char *program = find_program(o->self);
    if (program == NULL) {
        return check_report(CHECK_FAIL, what,
                            "the conformance program %s is not installed (looked next to %s "
                            "and in %s; set TDM_CONFORMANCE_PROGRAM)",
                            CONFORMANCE_PROGRAM, o->self, TDM_PKGLIBEXECDIR);
    }
    char **env = g_get_environ();
    env = g_environ_setenv(env, "TDM_CONFORMANCE_PLUGIN", o->file, TRUE);
    if (strcmp(name, "ref") == 0) {
        /* ref is checked as ref:1 against ref:0 */
        env = g_environ_setenv(env, "TDM_REF_DEVICES", "2", TRUE);
    }
    char *argv[] = {program, (char *)"--backend", (char *)name, NULL};
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    GError *error = NULL;
    gboolean ran = g_spawn_sync(NULL, argv, env, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                                &status, &error);
    g_strfreev(env);
    if (!ran) {
        CheckResult r = check_report(CHECK_FAIL, what, "%s: %s", program, error->message);
        g_error_free(error);
        return r;
    }
    if (o->verbose) {
        printf("%s%s", out, err);
    }
    int passed = 0, failed = 0;
    g_autoptr(GString) failures = g_string_new(NULL);
    g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
    const char *skip = NULL;
    for (char **l = lines; *l != NULL; l++) {
        if (g_str_has_prefix(*l, "ok ")) {
            passed++;
        } else if (g_str_has_prefix(*l, "not ok ")) {
            failed++;
            if (failed <= 10) {
                g_string_append_printf(failures, "\n    %s", *l);
            }
        } else if (g_str_has_prefix(*l, "1..0 # SKIP")) {
            skip = *l + strlen("1..0 # SKIP");
        }
    }
    if (g_spawn_check_wait_status(status, NULL) && skip != NULL) {
        return check_report(CHECK_SKIP, what, "%s", g_strstrip((char *)skip));
    }
    if (g_spawn_check_wait_status(status, NULL) && failed == 0 && passed > 0) {
        return check_report(CHECK_PASS, what, "%d op cases against ref, all within tolerance",
                            passed);
    }
    return check_report(CHECK_FAIL, what, "%d of %d op cases against ref failed%s%s%s", failed,
                        passed + failed, failures->str, err[0] != '\0' ? "\n    " : "",
                        g_strstrip(err));
}
