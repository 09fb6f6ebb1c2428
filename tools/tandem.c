/* SPDX-License-Identifier: MIT */
/* tools/tandem.c - the `tandem` command's entry point.
 *
 * Global options come before the command name (`tandem --plugin X.so
 * inspect`); everything after the name belongs to the command. Explicit
 * plugin files load before the plugin path is scanned, so a file given with
 * --plugin wins over an installed one of the same name, and a file that
 * fails to load stops the program (the user asked for it by name). Commands
 * live in a table: adding one is a prototype in commands.h and a row here.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} TandemCommand;

static const TandemCommand commands[] = {
    {"train", tdm_cmd_train, "train a model"},
    {"eval", tdm_cmd_eval, "evaluate a model on a data set"},
    {"inspect", tdm_cmd_inspect, "list plugins, features, load failures and models, or show one"},
    {"run", tdm_cmd_run, "start the processes of a distributed job (torchrun flags)"},
    {"data", tdm_cmd_data, "look at a data set: preview augmented samples as a PNG grid"},
    {"export", tdm_cmd_export, "write a checkpoint's model weights as .pth or .safetensors"},
    {"compare", tdm_cmd_compare, "compare two weight files tensor by tensor, within a tolerance"},
    {"plot", tdm_cmd_plot, "draw training curves from --log-file logs into a PNG"},
    {"check-plugin", tdm_cmd_check_plugin, "check a plugin file's features: backend, collective, "
                                           "strategy, transform"},
};

static void print_usage(FILE *out)
{
    fprintf(out, "Usage: tandem [--plugin FILE]... COMMAND [ARGS...]\n"
                 "       tandem --version | --help\n"
                 "\n"
                 "Commands:\n");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out,
            "\n"
            "Options:\n"
            "  --plugin FILE  load a plugin file before scanning the plugin path\n"
            "                 (repeatable; a file that fails to load is an error)\n"
            "  --version      print the version and exit\n"
            "  --help         print this help and exit\n"
            "\n"
            "Run 'tandem COMMAND --help' for the options of a command.\n"
            "Plugins are found in $TDM_PLUGIN_PATH, then $TDM_PLUGIN_SYSTEM_PATH or\n"
            "%s.\n",
            tdm_registry_default_plugin_dir());
}

static const TandemCommand *find_command(const char *name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    g_set_prgname("tandem");
    GPtrArray *plugin_files = g_ptr_array_new();
    int status = 0;
    int i = 1;

    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        } else if (strcmp(arg, "--plugin") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tandem: --plugin needs a FILE\n");
                status = 2;
                goto out;
            }
            g_ptr_array_add(plugin_files, argv[++i]);
        } else if (g_str_has_prefix(arg, "--plugin=")) {
            g_ptr_array_add(plugin_files, (char *)arg + strlen("--plugin="));
        } else if (strcmp(arg, "--version") == 0) {
            printf("tandem %s\n", tdm_version());
            goto out;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_usage(stdout);
            goto out;
        } else {
            fprintf(stderr, "tandem: unknown option '%s'\n\n", arg);
            print_usage(stderr);
            status = 2;
            goto out;
        }
    }
    if (i >= argc) {
        print_usage(stderr);
        status = 2;
        goto out;
    }
    if (strcmp(argv[i], "help") == 0) {
        print_usage(stdout);
        goto out;
    }
    const TandemCommand *command = find_command(argv[i]);
    if (command == NULL) {
        fprintf(stderr, "tandem: unknown command '%s'\n\n", argv[i]);
        print_usage(stderr);
        status = 2;
        goto out;
    }

    GError *error = NULL;
    for (guint p = 0; p < plugin_files->len; p++) {
        if (tdm_registry_load_file(g_ptr_array_index(plugin_files, p), &error) == NULL) {
            fprintf(stderr, "tandem: %s\n", error->message);
            g_error_free(error);
            status = 1;
            goto out;
        }
    }
    if (!tdm_registry_init(&error)) {
        fprintf(stderr, "tandem: %s\n", error->message);
        g_error_free(error);
        status = 1;
        goto out;
    }
    status = command->run(argc - i, argv + i);
out:
    g_ptr_array_unref(plugin_files);
    return status;
}
