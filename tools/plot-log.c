/* SPDX-License-Identifier: MIT */
/* tools/plot-log.c - reads a training log into the curves `tandem plot` draws.
 *
 * The log is what core/trainer-log.c writes: one JSON object per line, its
 * "event" member saying which record it is. "start" gives the model, the
 * batch size and the world size; "step" the mean loss, the learning rate,
 * the images and the seconds since the epoch began, at a global step;
 * "epoch" the epoch's training loss, accuracy and img_per_s; "eval" the
 * test accuracy and loss after an epoch; "summary" repeats figures drawn
 * already. Other events are skipped, so a log of a later Tandem that adds
 * some still plots. A number written as null (a diverged loss) becomes NAN,
 * a gap in its line; a field that is missing leaves its point out; a field
 * of another type is an error naming the file, line and field, as is a line
 * that is not a JSON object. The one exception is a last line without its
 * newline that does not parse: a run killed, or still running, while it
 * wrote that line. It is skipped with a warning, so a live run plots.
 *
 * A step event covers the steps since the previous one (train.log_every),
 * so its images per second are its images, on every rank, over the wall
 * time between the two events' time_s (seconds since the epoch began).
 */
#include "config.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>
#include <tandem/tandem.h>

#include "plot.h"

/* Where a record is, for errors. */
typedef struct {
    const char *path;
    gint64 line;
} Where;

/* What the step events carry over from one to the next. */
typedef struct {
    gint64 epoch;       /* of the previous step event; -1 none */
    double time_s;      /* its time_s */
    double global_step; /* the last one seen; NAN none */
} StepState;

/* "a string", "an object": what a JSON value is, for errors. */
static const char *json_kind(JsonNode *node)
{
    switch (json_node_get_node_type(node)) {
    case JSON_NODE_OBJECT:
        return "an object";
    case JSON_NODE_ARRAY:
        return "an array";
    case JSON_NODE_NULL:
        return "null";
    default:
        break;
    }
    GType type = json_node_get_value_type(node);
    return type == G_TYPE_STRING ? "a string" : type == G_TYPE_BOOLEAN ? "a boolean" : "a number";
}

static void add_point(GArray *a, double x, double y)
{
    PlotPoint p = {x, y};
    g_array_append_val(a, p);
}

/* A number member: TRUE with *value set (NAN for null or a missing member);
 * FALSE with an error for any other type. */
static gboolean get_number(JsonObject *obj, const char *name, double *value, const Where *w,
                           GError **error)
{
    *value = NAN;
    JsonNode *node = json_object_get_member(obj, name);
    if (node == NULL || JSON_NODE_HOLDS_NULL(node)) {
        return TRUE;
    }
    if (JSON_NODE_HOLDS_VALUE(node)) {
        GType type = json_node_get_value_type(node);
        if (type == G_TYPE_INT64) {
            *value = (double)json_node_get_int(node);
            return TRUE;
        }
        if (type == G_TYPE_DOUBLE) {
            *value = json_node_get_double(node);
            return TRUE;
        }
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s:%" G_GINT64_FORMAT
                ": \"%s\" is %s, not a number", w->path, w->line, name,
                json_kind(node));
    return FALSE;
}

static void read_start(PlotRun *run, JsonObject *obj, const Where *w)
{
    const char *model = json_object_get_string_member_with_default(obj, "model", NULL);
    double batch = NAN, world = NAN;
    /* figures of another type are left out: the start event only labels */
    get_number(obj, "batch_size", &batch, w, NULL);
    get_number(obj, "world_size", &world, w, NULL);
    if (run->model == NULL && model != NULL) {
        run->model = g_strdup(model);
    }
    /* only what a run can have: a cast of anything else is undefined */
    if (batch >= 1 && batch <= 1e15 && run->batch_size == 0) {
        run->batch_size = (gint64)batch;
    }
    if (world >= 1 && world <= 1e15) {
        run->world_size = (gint64)world;
    }
}

static gboolean read_step(PlotRun *run, JsonObject *obj, StepState *st, const Where *w,
                          GError **error)
{
    double step, epoch, loss, lr, count, time_s;
    if (!get_number(obj, "global_step", &step, w, error) ||
        !get_number(obj, "epoch", &epoch, w, error) ||
        !get_number(obj, "loss", &loss, w, error) || !get_number(obj, "lr", &lr, w, error) ||
        !get_number(obj, "count", &count, w, error) ||
        !get_number(obj, "time_s", &time_s, w, error)) {
        return FALSE;
    }
    if (!isfinite(step)) {
        return TRUE; /* nowhere to put it */
    }
    st->global_step = step;
    add_point(run->train_loss, step, loss);
    add_point(run->lr, step, lr);
    /* time_s counts from the epoch's start: a new epoch (or a restarted
     * run) measures from 0 */
    gint64 ep = fabs(epoch) <= 1e15 ? (gint64)epoch : -1; /* NAN too */
    double since = ep == st->epoch && time_s >= st->time_s ? st->time_s : 0.0;
    double dt = time_s - since;
    double images = count * (double)MAX(run->world_size, 1);
    add_point(run->step_rate, step, dt > 0 && images >= 0 ? images / dt : NAN);
    st->epoch = ep;
    st->time_s = isfinite(time_s) ? time_s : 0.0;
    return TRUE;
}

static gboolean read_epoch(PlotRun *run, JsonObject *obj, const StepState *st, const Where *w,
                           GError **error)
{
    double epoch, loss, accuracy, rate;
    if (!get_number(obj, "epoch", &epoch, w, error) ||
        !get_number(obj, "loss", &loss, w, error) ||
        !get_number(obj, "accuracy", &accuracy, w, error) ||
        !get_number(obj, "img_per_s", &rate, w, error)) {
        return FALSE;
    }
    if (isfinite(epoch)) {
        add_point(run->train_loss_epoch, epoch, loss);
        add_point(run->train_accuracy_epoch, epoch, 100.0 * accuracy);
    }
    if (isfinite(st->global_step)) {
        add_point(run->epoch_rate, st->global_step, rate);
    }
    return TRUE;
}

static gboolean read_eval(PlotRun *run, JsonObject *obj, const Where *w, GError **error)
{
    double epoch, loss, accuracy;
    if (!get_number(obj, "epoch", &epoch, w, error) ||
        !get_number(obj, "loss", &loss, w, error) ||
        !get_number(obj, "accuracy", &accuracy, w, error)) {
        return FALSE;
    }
    if (isfinite(epoch)) {
        add_point(run->test_loss, epoch, loss);
        add_point(run->test_accuracy, epoch, 100.0 * accuracy);
    }
    return TRUE;
}

/* One line's JSON: an object with an "event" string. */
static gboolean read_record(PlotRun *run, JsonNode *root, StepState *st, const Where *w,
                            GError **error)
{
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s:%" G_GINT64_FORMAT
                    ": %s, not a log record (a JSON object)", w->path, w->line,
                    root != NULL ? json_kind(root) : "nothing");
        return FALSE;
    }
    JsonObject *obj = json_node_get_object(root);
    JsonNode *event_node = json_object_get_member(obj, "event");
    if (event_node == NULL || !JSON_NODE_HOLDS_VALUE(event_node) ||
        json_node_get_value_type(event_node) != G_TYPE_STRING) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s:%" G_GINT64_FORMAT
                    ": a JSON object without an \"event\" string: not a tandem train "
                    "--log-file record", w->path, w->line);
        return FALSE;
    }
    const char *event = json_node_get_string(event_node);
    run->records++;
    if (strcmp(event, "start") == 0) {
        read_start(run, obj, w);
        return TRUE;
    }
    if (strcmp(event, "step") == 0) {
        return read_step(run, obj, st, w, error);
    }
    if (strcmp(event, "epoch") == 0) {
        return read_epoch(run, obj, st, w, error);
    }
    if (strcmp(event, "eval") == 0) {
        return read_eval(run, obj, w, error);
    }
    return TRUE; /* summary, and events this reader does not know */
}

static PlotRun *plot_run_new(const char *path)
{
    PlotRun *run = g_new0(PlotRun, 1);
    run->path = g_strdup(path);
    run->world_size = 1;
    GArray **arrays[] = {&run->train_loss, &run->lr, &run->step_rate,
                         &run->test_loss, &run->test_accuracy, &run->train_loss_epoch,
                         &run->train_accuracy_epoch, &run->epoch_rate};
    for (gsize i = 0; i < G_N_ELEMENTS(arrays); i++) {
        *arrays[i] = g_array_new(FALSE, FALSE, sizeof(PlotPoint));
    }
    return run;
}

void plot_run_free(PlotRun *run)
{
    if (run == NULL) {
        return;
    }
    GArray *arrays[] = {run->train_loss, run->lr, run->step_rate,
                        run->test_loss, run->test_accuracy, run->train_loss_epoch,
                        run->train_accuracy_epoch, run->epoch_rate};
    for (gsize i = 0; i < G_N_ELEMENTS(arrays); i++) {
        g_array_unref(arrays[i]);
    }
    g_free(run->path);
    g_free(run->label);
    g_free(run->model);
    g_free(run);
}

PlotRun *plot_run_read(const char *path, GError **error)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: is a directory, not a log file", path);
        return NULL;
    }
    FILE *f = g_fopen(path, "rb");
    if (f == NULL) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot open the log: %s", path,
                    g_strerror(e));
        return NULL;
    }
    g_autoptr(PlotRun) run = plot_run_new(path);
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    StepState st = {-1, 0.0, NAN};
    Where w = {path, 0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    gboolean ok = TRUE;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        w.line++;
        gboolean complete = len > 0 && line[len - 1] == '\n';
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            len--;
        }
        gsize start = strspn(line, " \t");
        if ((gsize)len <= start) {
            continue; /* a blank line */
        }
        GError *json_error = NULL;
        if (!json_parser_load_from_data(parser, line + start, len - (ssize_t)start,
                                        &json_error)) {
            if (!complete) {
                fprintf(stderr, "tandem plot: warning: %s:%" G_GINT64_FORMAT
                        ": the last line is unfinished (a run still writing it, or killed "
                        "while it did), skipped\n", path, w.line);
                g_error_free(json_error);
                break;
            }
            g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s:%" G_GINT64_FORMAT
                        ": not JSON: %s", path, w.line, json_error->message);
            g_error_free(json_error);
            ok = FALSE;
            break;
        }
        ok = read_record(run, json_parser_get_root(parser), &st, &w, error);
    }
    if (ok && ferror(f)) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: read failed after line %" G_GINT64_FORMAT
                    ": %s", path, w.line, g_strerror(e));
        ok = FALSE;
    }
    free(line);
    fclose(f);
    if (!ok) {
        return NULL;
    }
    return g_steal_pointer(&run);
}
