/* SPDX-License-Identifier: MIT */
/* tools/cmd-check-plugin.c - `tandem check-plugin FILE`: the conformance
 * checks of a plugin file, for its author and for a packager.
 *
 * The file is loaded as `--plugin FILE` would load it (a load failure is
 * the first FAIL), then each feature it registers is checked by its kind:
 * a backend against `ref` with the op-by-op suite, a collective on 2 and 3
 * local processes (every op, under a timeout), a strategy against
 * `single` in a world of one process (the contract every strategy keeps)
 * and on 2 processes for equal weights on every rank, a transform for determinism per (seed, epoch, index) and the output
 * shape it declares. Kinds without a check are listed as SKIP. Every check
 * prints PASS, FAIL or SKIP lines with what it found; the exit status
 * is 0 when nothing failed, 1 when something did, 2 on a usage error.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-plugin.h"
#include "commands.h"

static void print_check_usage(FILE *out)
{
    fprintf(out,
            "Usage: tandem check-plugin [OPTION...] FILE\n"
            "\n"
            "Load the plugin FILE (libtdm-NAME.so) and check each feature it registers,\n"
            "by its kind:\n"
            "  backend     every op against the ref oracle (the op-by-op conformance\n"
            "              suite, run by the helper program tandem-conformance)\n"
            "  collective  every op (all-reduce sum/avg/max/min, broadcast, all-gather,\n"
            "              reduce-scatter, barrier, an async all-reduce) on 2 and 3 local\n"
            "              processes started with `tandem run`, under --timeout\n"
            "  strategy    in a world of one process it must train exactly as `single`\n"
            "              (8 steps of a small mlp on ref, accumulating 2; weights\n"
            "              within 1e-5); then on 2 processes started with `tandem run`\n"
            "              (the shm collective), each rank on batches of its own, every\n"
            "              rank must end with rank 0's weights (within 1e-6 of the\n"
            "              largest weight); single and dp, one-process strategies,\n"
            "              skip that. With its default parameters, or --strategy's\n"
            "              (the same training on every rank in both checks)\n"
            "  transform   the same (seed, epoch, index) gives the same image, and the\n"
            "              image has the shape the transform declares; with its\n"
            "              default parameters\n"
            "Other kinds (dataset, optimizer, module) have no check and show as SKIP;\n"
            "so does a feature that is unavailable here, or that cannot be made with\n"
            "its default parameters.\n"
            "\n"
            "Each check prints one line: PASS, FAIL or SKIP, the kind and name, and what\n"
            "was found (a strategy's 2-rank check has its own line, after the first\n"
            "passed). A summary line counts the lines and ends the output.\n"
            "\n"
            "A strategy that is meant to train otherwise than single alone (clipping,\n"
            "compression, a schedule) is checked with --strategy parameters that make\n"
            "it equivalent (a huge max-norm, no compression); check its own effect in\n"
            "its tests.\n"
            "\n"
            "Options:\n"
            "  --strategy \"NAME KEY=VALUE ...\"\n"
            "                  check the strategy NAME of FILE with these parameters, in\n"
            "                  the grammar of `tandem train --strategy`\n"
            "  --timeout S     seconds a collective or the rendezvous may take (30)\n"
            "  --max-world N   check collectives on 2..N processes (3; 2 to 8)\n"
            "  --verbose       show the whole output of the helper processes\n"
            "  -h, --help      show this help\n"
            "\n"
            "Exit status: 0 every check passed or was skipped, 1 a check failed or the\n"
            "file does not load, 2 a usage error.\n"
            "\n"
            "Environment: TDM_CONFORMANCE_PROGRAM, the backend suite's program (default:\n"
            "next to this program in a build tree, else the installed one).\n"
            "\n"
            "Examples:\n"
            "  tandem check-plugin ./libtdm-localsgd.so\n"
            "  tandem check-plugin --strategy \"clipddp max-norm=1e9\" ./libtdm-clipddp.so\n");
}

/* PASS, FAIL and SKIP lines printed so far, for the summary. */
static int counts[3];

CheckResult check_report(CheckResult r, const char *what, const char *fmt, ...)
{
    counts[r]++;
    static const char *const words[] = {"PASS", "FAIL", "SKIP"};
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *detail = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    printf("%s %s: %s\n", words[r], what, detail);
    fflush(stdout);
    return r;
}

/* --strategy "name ...": the name must be a strategy of the file. */
static gboolean strategy_is_mine(const char *spec, GPtrArray *mine)
{
    if (spec == NULL) {
        return TRUE;
    }
    g_autofree char *name = tdm_params_split_name(spec, NULL);
    g_autoptr(GString) have = g_string_new(NULL);
    for (guint i = 0; i < mine->len; i++) {
        TdmFeature *f = mine->pdata[i];
        if (tdm_feature_get_kind(f) != TDM_FEATURE_STRATEGY) {
            continue;
        }
        if (g_strcmp0(name, tdm_feature_get_name(f)) == 0) {
            return TRUE;
        }
        g_string_append_printf(have, "%s%s", have->len > 0 ? ", " : "", tdm_feature_get_name(f));
    }
    fprintf(stderr,
            "tandem check-plugin: --strategy '%s': the file has no strategy of that name "
            "(its strategies: %s)\n",
            spec, have->len > 0 ? have->str : "none");
    return FALSE;
}

static CheckResult check_feature(const CheckOptions *o, TdmFeature *f)
{
    const TdmFeatureKind kind = tdm_feature_get_kind(f);
    g_autofree char *what =
        g_strdup_printf("%s %s", tdm_feature_kind_name(kind), tdm_feature_get_name(f));
    const char *reason = NULL;
    if (!tdm_feature_is_available(f, &reason)) {
        return check_report(CHECK_SKIP, what, "unavailable here: %s",
                            reason != NULL ? reason : "no reason given");
    }
    switch (kind) {
    case TDM_FEATURE_BACKEND:
        return check_backend(o, f);
    case TDM_FEATURE_COLLECTIVE:
        return check_collective(o, f);
    case TDM_FEATURE_STRATEGY:
        return check_strategy(o, f);
    case TDM_FEATURE_TRANSFORM:
        return check_transform(o, f);
    default:
        return check_report(CHECK_SKIP, what, "no conformance check for this kind");
    }
}

int tdm_cmd_check_plugin(int argc, char **argv)
{
    CheckOptions o = {.timeout_s = 30.0, .max_world = 3};
    const char *worker = NULL, *worker_strategy = NULL, *worker_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_check_usage(stdout);
            return 0;
        } else if (strcmp(a, "--verbose") == 0) {
            o.verbose = TRUE;
        } else if ((strcmp(a, "--timeout") == 0 || strcmp(a, "--max-world") == 0) &&
                   next != NULL) {
            char *end = NULL;
            double v = g_ascii_strtod(next, &end);
            gboolean timeout = strcmp(a, "--timeout") == 0;
            if (*end != '\0' || (timeout && !(v > 0 && v <= 86400)) ||
                (!timeout && (v != (int)v || v < 2 || v > 8))) {
                fprintf(stderr, "tandem check-plugin: %s %s: expected %s\n", a, next,
                        timeout ? "seconds in (0, 86400]" : "an integer in [2, 8]");
                return 2;
            }
            if (timeout) {
                o.timeout_s = v;
            } else {
                o.max_world = (int)v;
            }
            i++;
        } else if (strcmp(a, "--strategy") == 0 && next != NULL) {
            o.strategy = next;
            i++;
        } else if (strcmp(a, "--worker-strategy") == 0 && next != NULL) {
            worker_strategy = next; /* internal: one rank of a strategy check */
            i++;
        } else if (strcmp(a, "--worker-dir") == 0 && next != NULL) {
            worker_dir = next;
            i++;
        } else if (strcmp(a, "--worker-collective") == 0 && next != NULL) {
            worker = next; /* internal: one process of a collective check */
            i++;
        } else if (a[0] == '-' || o.file != NULL) {
            fprintf(stderr, "tandem check-plugin: %s '%s'\n",
                    a[0] == '-' ? "unknown option" : "one FILE only, not also", a);
            fprintf(stderr, "Run 'tandem check-plugin --help' for the usage.\n");
            return 2;
        } else {
            o.file = a;
        }
    }
    if (o.file == NULL) {
        fprintf(stderr, "tandem check-plugin: FILE is required\n"
                        "Run 'tandem check-plugin --help' for the usage.\n");
        return 2;
    }
    GError *error = NULL;
    TdmPlugin *plugin = NULL;
    if (tdm_registry_init(&error)) {
        plugin = tdm_registry_load_file(o.file, &error);
    }
    if (worker != NULL) {
        if (plugin == NULL) {
            fprintf(stderr, "check-plugin worker: %s\n", error->message);
            return 1;
        }
        return check_collective_worker(worker, o.timeout_s);
    }
    if (worker_strategy != NULL) {
        if (plugin == NULL || worker_dir == NULL) {
            fprintf(stderr, "check-plugin worker: %s\n",
                    plugin == NULL ? error->message : "--worker-dir is required");
            return 1;
        }
        return check_strategy_worker(worker_strategy, worker_dir, o.timeout_s);
    }
    if (plugin == NULL) {
        check_report(CHECK_FAIL, "load", "%s", error->message);
        g_error_free(error);
        printf("check-plugin %s: does not load\n", o.file);
        return 1;
    }
    g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
    o.self = self != NULL ? self : "tandem";
    const TdmPluginDesc *desc = tdm_plugin_get_desc(plugin);
    GPtrArray *all = tdm_registry_list_features(TDM_FEATURE_N_KINDS);
    GPtrArray *mine = g_ptr_array_new();
    for (guint i = 0; i < all->len; i++) {
        if (tdm_feature_get_plugin(all->pdata[i]) == plugin) {
            g_ptr_array_add(mine, all->pdata[i]);
        }
    }
    g_ptr_array_unref(all);
    if (!strategy_is_mine(o.strategy, mine)) {
        g_ptr_array_unref(mine);
        return 2;
    }
    check_report(CHECK_PASS, "load", "plugin %s %s (%s), %u feature%s",
                 tdm_plugin_get_name(plugin), desc->version != NULL ? desc->version : "?",
                 desc->license, mine->len, mine->len == 1 ? "" : "s");
    for (guint i = 0; i < mine->len; i++) {
        check_feature(&o, mine->pdata[i]);
    }
    g_ptr_array_unref(mine);
    printf("check-plugin %s: %d passed, %d failed, %d skipped\n", o.file, counts[CHECK_PASS],
           counts[CHECK_FAIL], counts[CHECK_SKIP]);
    return counts[CHECK_FAIL] > 0 ? 1 : 0;
}
