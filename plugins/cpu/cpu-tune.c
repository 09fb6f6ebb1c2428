/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-tune.c - kernels chosen by measurement (see cpu-tune.h):
 * the process-wide table of shapes and their choices, the timing of the
 * candidates on a shape's first calls, the cache file and the profile's
 * list of choices.
 *
 * A shape's state is made on the first cache miss of an op of that shape,
 * under one lock shared by every device; a steady call reads the choice
 * with an atomic load and takes no lock.
 *
 * Timing runs on real calls: a shape's calls cycle through its candidates
 * until each has run CPU_TUNE_RUNS times (below: runs that paged memory in
 * do not count), then each candidate's fastest
 * run decides. The machine may be shared, and another process taking a
 * core only ever adds time to a run: tens of milliseconds when it
 * preempts one thread of a parallel loop, which the other then waits
 * for. So a run is measured on two clocks: wall time, and the calling
 * thread's cpu time, which stops while the thread is preempted and, as an
 * OpenMP thread spins while it waits for the others, agrees with the wall
 * time on a quiet machine. A clean run (the thread on a core for at least
 * CPU_TUNE_CLEAN of its wall time) counts with its wall time, a disturbed
 * one with its cpu time, and the minimum over the runs estimates a
 * kernel's own cost where a mean, or on a loaded machine even a median,
 * does not (at a load of 12 on 2 cores, medians of wall times were off by
 * 10-50x and most runs were disturbed). Runs are interleaved rather than
 * back to back, so that a burst of other work spoils one sample of each
 * candidate, not all samples of one.
 *
 * A run during which its thread took page faults timed the kernel plus
 * the first touch of memory: the candidate's own buffers on its first
 * run, and on the first steps of a training the activations, whose
 * memory the model is still laying out (the gradient pool records its
 * first pass; with recompute auto the trial step lends every convolution
 * output, so each call writes fresh pages: 512 faults, and 30-50% more
 * time, for a resnet50 layer's 2 MiB output). Such runs do not count: a
 * candidate is timed enough after CPU_TUNE_RUNS runs without faults, or
 * CPU_TUNE_MAX_RUNS runs in all (then its fastest run counts, faults or
 * not).
 *
 * The cache file (TDM_CPU_TUNE_CACHE) keeps, with each choice, the
 * candidates it was made among: a shape whose candidates differ in this
 * process (a newer build with another kernel, another workspace limit) is
 * timed again rather than held to a choice made without them.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cpu-tune.h"
#include "cpu.h"

#define CACHE_MAGIC "tandem-cpu-tune 2"

typedef enum { TUNE_ON, TUNE_OFF, TUNE_FORCE } TuneMode;

struct CpuTuneShape {
    char *key;
    guint valid;     /* the candidates valid for the shape; 0: not known yet (read from file) */
    guint cached;    /* read from the file: the candidates its choice was made among */
    gint choice;     /* a CpuConvImpl; -1 while timing */
    const char *why; /* "timed", "cache", "forced", "rule", "only" */
    int ncand;
    CpuConvImpl cand[CPU_CONV_N]; /* the valid candidates, in the order they are run */
    guint64 issued;               /* timed calls handed out so far */
    int runs[CPU_CONV_N];         /* by CpuConvImpl: runs timed, */
    int clean[CPU_CONV_N];        /* clean ones among them, */
    int settled[CPU_CONV_N];      /* ones without page faults, */
    double best[CPU_CONV_N];      /* the fastest of those (seconds), */
    double best_any[CPU_CONV_N];  /* and of all runs */
};

static GMutex tune_lock;
static gboolean tune_started;
static TuneMode tune_mode;
static CpuConvImpl tune_force;
static GHashTable *tune_shapes; /* key -> CpuTuneShape (owned) */
static GPtrArray *tune_order;   /* the shapes in the order they were met */
static char *cache_path;        /* TDM_CPU_TUNE_CACHE, or NULL */

static const char *const impl_names[CPU_CONV_N] = {"onednn", "stem",        "bwf8",
                                                    "wino",   "onednn_wino", "gemm"};

const char *cpu_tune_impl_name(CpuConvImpl impl)
{
    return impl < CPU_CONV_N ? impl_names[impl] : "?";
}

static int impl_from_name(const char *name)
{
    for (int i = 0; i < CPU_CONV_N; i++) {
        if (strcmp(name, impl_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/* What the cache file must have been made on: CPU, instruction set and
 * oneDNN version, one "name value" line each (transfer full). */
static char *machine_lines(void)
{
    const dnnl_version_t *v = dnnl_version();
    const char *model = cpu_model();
    return g_strdup_printf("cpu %s\nisa %s\nonednn %d.%d.%d\n",
                           model != NULL && model[0] != '\0' ? model : "unknown", cpu_isa(),
                           v->major, v->minor, v->patch);
}

static CpuTuneShape *shape_new(const char *key)
{
    CpuTuneShape *s = g_new0(CpuTuneShape, 1);
    s->key = g_strdup(key);
    s->choice = -1;
    g_hash_table_insert(tune_shapes, s->key, s);
    g_ptr_array_add(tune_order, s);
    return s;
}

static void shape_free(gpointer p)
{
    CpuTuneShape *s = p;
    g_free(s->key);
    g_free(s);
}

/* The candidates named in a comma-separated list, 0 when one is unknown. */
static guint impls_from_names(const char *list)
{
    char **names = g_strsplit(list, ",", -1);
    guint set = 0;
    for (guint i = 0; names[i] != NULL; i++) {
        int impl = impl_from_name(names[i]);
        if (impl < 0) {
            set = 0;
            break;
        }
        set |= CPU_CONV_BIT(impl);
    }
    g_strfreev(names);
    return set;
}

/* Why the cache file's text is unusable, NULL when it is not (transfer
 * full); fills `choices` (key -> the candidates << 8 | the choice). */
static char *cache_parse(char *text, GHashTable *choices)
{
    char **lines = g_strsplit(text, "\n", -1);
    char *why = NULL;
    char *ours = machine_lines();
    GString *theirs = g_string_new(NULL);
    int n = 0;
    while (lines[n] != NULL) {
        n++;
    }
    if (n >= 1 && strcmp(lines[0], "tandem-cpu-tune 1") == 0) {
        why = g_strdup("written by an older Tandem (format 1: no candidates with the choices)");
    } else if (n < 4 || strcmp(lines[0], CACHE_MAGIC) != 0) {
        why = g_strdup("not a tandem cpu tuning cache (no '" CACHE_MAGIC "' line first)");
    }
    for (int i = 1; why == NULL && i < 4; i++) {
        static const char *const names[] = {NULL, "cpu ", "isa ", "onednn "};
        if (!g_str_has_prefix(lines[i], names[i])) {
            why = g_strdup_printf("line %d: expected '%s...'", i + 1, names[i]);
        }
        g_string_append_printf(theirs, "%s\n", lines[i]);
    }
    if (why == NULL && strcmp(theirs->str, ours) != 0) {
        g_strdelimit(theirs->str, "\n", ',');
        g_strdelimit(ours, "\n", ',');
        why = g_strdup_printf("made on another machine or oneDNN (%s not %s)", theirs->str, ours);
    }
    for (int i = 4; why == NULL && i < n; i++) {
        if (lines[i][0] == '\0') {
            continue;
        }
        char **f = g_strsplit(lines[i], "\t", -1);
        guint cands = 0;
        int choice = f[0] != NULL ? impl_from_name(f[0]) : -1;
        if (g_strv_length(f) != 3 || f[2][0] == '\0') {
            why = g_strdup_printf("line %d: expected 'CHOICE<tab>CANDIDATES<tab>SHAPE'", i + 1);
        } else if (choice < 0) {
            why = g_strdup_printf("line %d: unknown kernel '%s'", i + 1, f[0]);
        } else if ((cands = impls_from_names(f[1])) == 0) {
            why = g_strdup_printf("line %d: unknown kernel among '%s'", i + 1, f[1]);
        } else if (!(cands & CPU_CONV_BIT(choice))) {
            why = g_strdup_printf("line %d: '%s' is not among its candidates '%s'", i + 1, f[0],
                                  f[1]);
        } else {
            g_hash_table_insert(choices, g_strdup(f[2]),
                                GUINT_TO_POINTER(cands << 8 | (guint)choice));
        }
        g_strfreev(f);
    }
    g_string_free(theirs, TRUE);
    g_free(ours);
    g_strfreev(lines);
    return why;
}

/* Reads the cache file, if any, into the table as made choices. A file
 * that is corrupt or from another machine is ignored (and later replaced)
 * with a warning that names it. */
static void cache_read(void)
{
    char *text = NULL;
    GError *err = NULL;
    if (!g_file_get_contents(cache_path, &text, NULL, &err)) {
        if (!g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            g_warning("TDM_CPU_TUNE_CACHE %s: %s; ignored", cache_path, err->message);
        }
        g_error_free(err);
        return;
    }
    GHashTable *choices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char *why = cache_parse(text, choices);
    if (why != NULL) {
        g_warning("TDM_CPU_TUNE_CACHE %s: %s; ignored", cache_path, why);
        g_free(why);
    } else {
        GHashTableIter it;
        gpointer key, packed;
        g_hash_table_iter_init(&it, choices);
        while (g_hash_table_iter_next(&it, &key, &packed)) {
            CpuTuneShape *s = shape_new(key);
            s->choice = (gint)(GPOINTER_TO_UINT(packed) & 0xff);
            s->cached = GPOINTER_TO_UINT(packed) >> 8;
            s->why = "cache";
        }
    }
    g_hash_table_destroy(choices);
    g_free(text);
}

/* The mode (TDM_CPU_TUNE), the table, and the cache file: once. */
static void tune_start(void)
{
    const char *mode = g_getenv("TDM_CPU_TUNE");
    tune_mode = TUNE_ON;
    if (mode != NULL && (strcmp(mode, "off") == 0 || strcmp(mode, "0") == 0)) {
        tune_mode = TUNE_OFF;
    } else if (mode != NULL && g_str_has_prefix(mode, "force:") && impl_from_name(mode + 6) >= 0) {
        tune_mode = TUNE_FORCE;
        tune_force = impl_from_name(mode + 6);
    } else if (mode != NULL && mode[0] != '\0' && strcmp(mode, "on") != 0 &&
               strcmp(mode, "1") != 0) {
        g_warning("TDM_CPU_TUNE='%s' is not on, off or force:NAME (onednn, stem, bwf8, wino, "
                  "onednn_wino, gemm); "
                  "timing the kernels",
                  mode);
    }
    tune_shapes = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, shape_free);
    tune_order = g_ptr_array_new();
    const char *path = g_getenv("TDM_CPU_TUNE_CACHE");
    if (path != NULL && path[0] != '\0') {
        cache_path = g_strdup(path);
        cache_read();
    }
    tune_started = TRUE;
}

/* The fixed rule: the first valid own kernel in this order, else oneDNN. */
static CpuConvImpl rule_choice(guint valid)
{
    static const CpuConvImpl order[] = {CPU_CONV_STEM, CPU_CONV_WINO, CPU_CONV_BWF8};
    for (size_t i = 0; i < G_N_ELEMENTS(order); i++) {
        if (valid & CPU_CONV_BIT(order[i])) {
            return order[i];
        }
    }
    return CPU_CONV_ONEDNN;
}

/* A shape met for the first time with `valid` (or read from the file, its
 * candidates unknown until now): its choice by the mode, or its timing. */
static void shape_settle(CpuTuneShape *s, guint valid)
{
    s->valid = valid;
    s->ncand = 0;
    for (int i = 0; i < CPU_CONV_N; i++) {
        if (valid & CPU_CONV_BIT(i)) {
            s->cand[s->ncand++] = i;
        }
    }
    if (s->choice >= 0 && s->cached == valid) {
        return; /* from the file, made among the same candidates */
    }
    /* else (from the file, but the candidates differ: another build or
     * workspace limit) timed again */
    s->choice = -1;
    s->why = NULL;
    if (s->ncand == 1) {
        s->choice = s->cand[0];
        s->why = "only";
    } else if (tune_mode == TUNE_OFF) {
        s->choice = rule_choice(valid);
        s->why = "rule";
    } else if (tune_mode == TUNE_FORCE) {
        s->choice = (valid & CPU_CONV_BIT(tune_force)) ? tune_force : CPU_CONV_ONEDNN;
        s->why = "forced";
    }
}

gboolean cpu_tune_forced(CpuConvImpl impl)
{
    g_mutex_lock(&tune_lock);
    if (!tune_started) {
        tune_start();
    }
    gboolean forced = tune_mode == TUNE_FORCE && tune_force == impl;
    g_mutex_unlock(&tune_lock);
    return forced;
}

guint cpu_tune_plan(const char *key, guint valid, CpuTuneShape **shape)
{
    valid |= CPU_CONV_BIT(CPU_CONV_ONEDNN);
    g_mutex_lock(&tune_lock);
    if (!tune_started) {
        tune_start();
    }
    CpuTuneShape *s = g_hash_table_lookup(tune_shapes, key);
    if (s == NULL) {
        s = shape_new(key);
    }
    if (s->valid == 0) {
        shape_settle(s, valid);
    }
    guint want = s->choice >= 0 ? CPU_CONV_BIT(s->choice) : s->valid;
    g_mutex_unlock(&tune_lock);
    *shape = s;
    return want;
}

/* The lowest candidate of `have`: oneDNN when it is there. */
static CpuConvImpl first_of(guint have)
{
    for (int i = 0; i < CPU_CONV_N; i++) {
        if (have & CPU_CONV_BIT(i)) {
            return i;
        }
    }
    return CPU_CONV_ONEDNN;
}

/* Whether candidate c has been timed enough. */
static gboolean timed_enough(const CpuTuneShape *s, CpuConvImpl c)
{
    return s->settled[c] >= CPU_TUNE_RUNS || s->runs[c] >= CPU_TUNE_MAX_RUNS;
}

/* Candidate c's time: its fastest run without page faults, else its
 * fastest run. */
static double cand_time(const CpuTuneShape *s, CpuConvImpl c)
{
    return s->settled[c] > 0 ? s->best[c] : s->best_any[c];
}

CpuConvImpl cpu_tune_pick(CpuTuneShape *s, guint have, gboolean *timed)
{
    *timed = FALSE;
    gint c = g_atomic_int_get(&s->choice);
    if (c >= 0) {
        return (have & CPU_CONV_BIT(c)) ? (CpuConvImpl)c : first_of(have);
    }
    CpuConvImpl impl = first_of(have);
    g_mutex_lock(&tune_lock);
    if (s->choice >= 0) {
        impl = (have & CPU_CONV_BIT(s->choice)) ? (CpuConvImpl)s->choice : impl;
    } else {
        /* cycle through the candidates not timed enough yet (a failed
         * call records nothing and is made up by a later turn) */
        for (int i = 0; i < s->ncand; i++) {
            CpuConvImpl next = s->cand[(s->issued + (guint64)i) % (guint64)s->ncand];
            if (!timed_enough(s, next) && (have & CPU_CONV_BIT(next))) {
                s->issued += (guint64)i + 1;
                impl = next;
                *timed = TRUE;
                break;
            }
        }
    }
    g_mutex_unlock(&tune_lock);
    return impl;
}

/* The choice: the fastest other kernel when it beats oneDNN's direct one
 * by the margin, else that. */
static void cache_write(void);

static void shape_decide(CpuTuneShape *s)
{
    int best = -1;
    for (int i = 0; i < s->ncand; i++) {
        CpuConvImpl c = s->cand[i];
        if (c != CPU_CONV_ONEDNN && (best < 0 || cand_time(s, c) < cand_time(s, best))) {
            best = c;
        }
    }
    if (best < 0 || cand_time(s, best) >= (1.0 - CPU_TUNE_MARGIN) * cand_time(s, CPU_CONV_ONEDNN)) {
        best = CPU_CONV_ONEDNN;
    }
    s->why = "timed";
    g_atomic_int_set(&s->choice, best);
    /* Written at once, not only at exit: a run killed later (and resumed
     * from a checkpoint) must find the choices its first part made. */
    if (cache_path != NULL) {
        cache_write();
    }
}

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The calling thread's page faults so far. A kernel's parallel loops
 * touch its memory on every thread of the team, the caller's included;
 * the process's count would also take in the loader's threads, whose
 * batches are fresh pages on every step. */
static long page_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt + ru.ru_majflt : 0;
}

void cpu_tune_start(CpuTuneClock *c)
{
    c->faults = page_faults();
    c->wall = clock_seconds(CLOCK_MONOTONIC);
    c->cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
}

void cpu_tune_record(CpuTuneShape *s, CpuConvImpl impl, const CpuTuneClock *start)
{
    const double wall = clock_seconds(CLOCK_MONOTONIC) - start->wall;
    const double cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - start->cpu;
    const gboolean faulted = page_faults() > start->faults;
    g_mutex_lock(&tune_lock);
    if (s->choice < 0 && !timed_enough(s, impl)) {
        const gboolean clean = cpu >= CPU_TUNE_CLEAN * wall;
        const double t = clean ? wall : cpu;
        if (s->runs[impl] == 0 || t < s->best_any[impl]) {
            s->best_any[impl] = t;
        }
        if (!faulted && (s->settled[impl] == 0 || t < s->best[impl])) {
            s->best[impl] = t;
        }
        s->runs[impl]++;
        s->settled[impl] += !faulted;
        s->clean[impl] += clean;
        gboolean done = TRUE;
        for (int i = 0; i < s->ncand; i++) {
            done = done && timed_enough(s, s->cand[i]);
        }
        if (done) {
            shape_decide(s);
        }
    }
    g_mutex_unlock(&tune_lock);
}

/* One profile line: the shape, its choice, why, and the times measured. */
static void report_shape(FILE *out, const CpuTuneShape *s)
{
    fprintf(out, "  %s: %s (%s", s->key, s->choice >= 0 ? impl_names[s->choice] : "undecided",
            s->why != NULL ? s->why : "timing");
    if (s->why != NULL && strcmp(s->why, "cache") == 0) {
        fprintf(out, " %s", cache_path);
    }
    if (s->why != NULL && strcmp(s->why, "timed") == 0) {
        fprintf(out, ", ms:");
        for (int i = 0; i < s->ncand; i++) {
            CpuConvImpl c = s->cand[i];
            fprintf(out, " %s %.3f [%d/%d clean", impl_names[c], cand_time(s, c) * 1e3, s->clean[c],
                    s->runs[c]);
            if (s->settled[c] < s->runs[c]) {
                fprintf(out, ", %d paging", s->runs[c] - s->settled[c]);
            }
            fprintf(out, "]");
        }
    }
    fprintf(out, ")\n");
}

/* (Declared above shape_decide.) The file: the machine's lines, then
 * "CHOICE<tab>CANDIDATES<tab>SHAPE" for every timed or still valid cached
 * choice (CANDIDATES: the kernels it was chosen among, comma-separated),
 * written to a temporary file and renamed. */
static void cache_write(void)
{
    GString *text = g_string_new(CACHE_MAGIC "\n");
    char *machine = machine_lines();
    g_string_append(text, machine);
    g_free(machine);
    for (guint i = 0; i < tune_order->len; i++) {
        const CpuTuneShape *s = g_ptr_array_index(tune_order, i);
        if (s->choice >= 0 && s->why != NULL &&
            (strcmp(s->why, "timed") == 0 || strcmp(s->why, "cache") == 0)) {
            const guint cands = s->valid != 0 ? s->valid : s->cached;
            g_string_append_printf(text, "%s\t", impl_names[s->choice]);
            for (int c = 0, first = 1; c < CPU_CONV_N; c++) {
                if (cands & CPU_CONV_BIT(c)) {
                    g_string_append_printf(text, "%s%s", first ? "" : ",", impl_names[c]);
                    first = 0;
                }
            }
            g_string_append_printf(text, "\t%s\n", s->key);
        }
    }
    GError *err = NULL;
    if (!g_file_set_contents(cache_path, text->str, (gssize)text->len, &err)) {
        g_warning("TDM_CPU_TUNE_CACHE %s: %s", cache_path, err->message);
        g_error_free(err);
    }
    g_string_free(text, TRUE);
}

void cpu_tune_finish(gboolean profile, FILE *out)
{
    g_mutex_lock(&tune_lock);
    if (tune_started) {
        guint met = 0;
        for (guint i = 0; i < tune_order->len; i++) {
            met += ((const CpuTuneShape *)g_ptr_array_index(tune_order, i))->valid != 0;
        }
        if (profile && met > 0) {
            static const char *const modes[] = {"on", "off", "force"};
            fprintf(out, "# tandem cpu kernel choices (TDM_CPU_TUNE=%s): %u shapes\n",
                    modes[tune_mode], met);
            for (guint i = 0; i < tune_order->len; i++) {
                const CpuTuneShape *s = g_ptr_array_index(tune_order, i);
                if (s->valid != 0) {
                    report_shape(out, s);
                }
            }
        }
    }
    g_mutex_unlock(&tune_lock);
}
