/* SPDX-License-Identifier: MIT */
/* core/safetensors-header.c - reading a safetensors file's JSON header
 * through json-glib, strictly, with the byte offset of every value.
 *
 * The header comes from outside the program, so the reader is strict and
 * its errors point into the file. json-glib 1.6 reads a superset of JSON
 * (comments, single quotes, unknown escapes taken literally, "\u0000"
 * cutting a string short, integers wrapping past 64 bits, a trailing second
 * object) and recurses once per nesting level, so a header first passes a
 * gate: one pass over its bytes that refuses those, floats (a header has
 * integers only) and nesting deeper than MAX_DEPTH, each naming its byte
 * offset. json-glib then checks the grammar and builds the tree; while it
 * parses, its signals give the position of every value, which is kept per
 * node for the messages of core/safetensors.c, and duplicate keys (which
 * json-glib would silently replace). Lines and columns become byte offsets
 * here: json-glib counts bytes within a line and lines at '\n'.
 */
#include "config.h"

#include <string.h>

#include "safetensors-header.h"

/* A header nests three levels (object, tensor entry, shape); this leaves
 * room and keeps json-glib's recursion shallow. */
#define MAX_DEPTH 32

/* ---- errors ----------------------------------------------------------- */

/* Sets a TDM_ERROR_CORRUPT for byte `at` of the header, saying which byte
 * is there unless `what` is json-glib's message (which names the token it
 * took); returns FALSE. */
static gboolean header_fail(GError **error, const char *path, const char *text, size_t len,
                            size_t base, size_t at, const char *what, gboolean from_json_glib)
{
    if (at >= len) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: bad JSON header at byte %zu: %s (header ends)", path, base + len, what);
    } else if (from_json_glib) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s: bad JSON header at byte %zu: %s",
                    path, base + at, what);
    } else {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: bad JSON header at byte %zu: %s (found '%c')", path, base + at, what,
                    g_ascii_isprint(text[at]) ? text[at] : '?');
    }
    return FALSE;
}

static gboolean is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_space(const char *text, size_t len, size_t i)
{
    while (i < len && is_space(text[i])) {
        i++;
    }
    return i;
}

/* ---- the gate --------------------------------------------------------- */

typedef struct {
    const char *text, *path;
    size_t len, base, i; /* i: the byte being looked at */
    GError **error;
} Gate;

static gboolean gate_fail(Gate *g, const char *what)
{
    return header_fail(g->error, g->path, g->text, g->len, g->base, g->i, what, FALSE);
}

/* Four hex digits at g->i (which moves past them). */
static gboolean gate_hex4(Gate *g, guint32 *out)
{
    *out = 0;
    for (int k = 0; k < 4; k++, g->i++) {
        int h = g->i < g->len ? g_ascii_xdigit_value(g->text[g->i]) : -1;
        if (h < 0) {
            return gate_fail(g, g->i < g->len ? "bad hex digit in \\u escape"
                                              : "truncated \\u escape");
        }
        *out = *out * 16 + (guint32)h;
    }
    return TRUE;
}

/* A string from its opening quote at g->i to its closing one (g->i ends
 * there): no control characters, only JSON's escapes, no NUL, surrogates
 * in pairs. */
static gboolean gate_string(Gate *g)
{
    for (g->i++; g->i < g->len; g->i++) {
        unsigned char c = (unsigned char)g->text[g->i];
        if (c == '"') {
            return TRUE;
        }
        if (c < 0x20) {
            return gate_fail(g, "control character in string");
        }
        if (c != '\\') {
            continue;
        }
        if (++g->i >= g->len) {
            break;
        }
        if (strchr("\"\\/bfnrt", g->text[g->i]) != NULL && g->text[g->i] != '\0') {
            continue;
        }
        if (g->text[g->i] != 'u') {
            return gate_fail(g, "unknown escape");
        }
        /* \uXXXX: its errors point at the backslash */
        const size_t escape = g->i - 1;
        guint32 cp, lo;
        g->i++;
        if (!gate_hex4(g, &cp)) {
            return FALSE;
        }
        gboolean high = cp >= 0xD800 && cp <= 0xDBFF;
        if (high && g->i + 2 <= g->len && g->text[g->i] == '\\' && g->text[g->i + 1] == 'u') {
            g->i += 2;
            if (!gate_hex4(g, &lo)) {
                return FALSE;
            }
            high = lo < 0xDC00 || lo > 0xDFFF; /* still unpaired */
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            high = TRUE;
        }
        if (cp == 0 || high) {
            g->i = escape;
            return gate_fail(g, cp == 0 ? "NUL character in string"
                                        : "unpaired surrogate in \\u escape");
        }
        g->i--; /* the loop steps past the escape's last digit */
    }
    return gate_fail(g, "unterminated string");
}

/* An integer from g->i (g->i ends on its last digit): no leading zeros,
 * within 64 bits, and no fraction or exponent. */
static gboolean gate_number(Gate *g)
{
    const size_t start = g->i;
    if (g->text[g->i] == '-') {
        g->i++;
    }
    if (g->i >= g->len || !g_ascii_isdigit(g->text[g->i])) {
        return gate_fail(g, "bad number");
    }
    if (g->text[g->i] == '0' && g->i + 1 < g->len && g_ascii_isdigit(g->text[g->i + 1])) {
        return gate_fail(g, "leading zero in number");
    }
    guint64 n = 0;
    for (; g->i < g->len && g_ascii_isdigit(g->text[g->i]); g->i++) {
        guint64 d = (guint64)(g->text[g->i] - '0');
        if (n > ((guint64)G_MAXINT64 - d) / 10) {
            g->i = start;
            return gate_fail(g, "integer too large");
        }
        n = n * 10 + d;
    }
    if (g->i < g->len && strchr(".eE", g->text[g->i]) != NULL && g->text[g->i] != '\0') {
        return gate_fail(g, "only integers are allowed in a safetensors header");
    }
    g->i--;
    return TRUE;
}

/* A bare word from g->i (g->i ends on its last letter): JSON's literals
 * only. */
static gboolean gate_literal(Gate *g)
{
    size_t end = g->i;
    while (end < g->len && g_ascii_isalnum(g->text[end])) {
        end++;
    }
    static const char *const literals[] = {"true", "false", "null"};
    for (size_t k = 0; k < G_N_ELEMENTS(literals); k++) {
        if (end - g->i == strlen(literals[k]) &&
            memcmp(g->text + g->i, literals[k], end - g->i) == 0) {
            g->i = end - 1;
            return TRUE;
        }
    }
    return gate_fail(g, "expected a value");
}

static gboolean header_gate(const char *path, const char *text, size_t len, size_t base,
                            GError **error)
{
    Gate g = {text, path, len, base, skip_space(text, len, 0), error};
    if (g.i >= len || text[g.i] != '{') {
        return gate_fail(&g, "the header must be a JSON object");
    }
    int depth = 0;
    gboolean closed = FALSE; /* the header's object has ended */
    for (; g.i < len; g.i++) {
        char c = text[g.i];
        if (is_space(c)) {
            continue;
        }
        if (closed) {
            return gate_fail(&g, "trailing data after the JSON object");
        }
        gboolean ok = TRUE;
        if (c == '"') {
            ok = gate_string(&g);
        } else if (c == '{' || c == '[') {
            ok = ++depth <= MAX_DEPTH || gate_fail(&g, "nesting too deep");
        } else if (c == '}' || c == ']') {
            closed = --depth <= 0;
        } else if (c == '-' || g_ascii_isdigit(c)) {
            ok = gate_number(&g);
        } else if (g_ascii_isalpha(c)) {
            ok = gate_literal(&g);
        } else if (c != ',' && c != ':') {
            ok = gate_fail(&g, "unexpected character");
        }
        if (!ok) {
            return FALSE;
        }
    }
    return TRUE;
}

/* ---- positions while json-glib parses ---------------------------------- */

typedef struct {
    size_t start;   /* offset of the container's first byte in the header */
    guint members;  /* members parsed so far (objects) */
} Open;

typedef struct {
    const char *text;
    size_t len, base;
    guint line;         /* json-glib's line (from 1) that starts at line_start */
    size_t line_start;
    GArray *open;       /* Open: the containers being parsed, innermost last */
    size_t closed;      /* start of the container that ended last */
    GHashTable *offsets;
    char *duplicate;    /* the first repeated key, and where it is */
    size_t duplicate_at;
    size_t error_at;    /* where json-glib stopped on an error */
} Spans;

/* The header offset json-glib has reached: past the last token it took. */
static size_t spans_here(Spans *s, JsonParser *parser)
{
    guint line = json_parser_get_current_line(parser);
    while (s->line < line) {
        const char *nl = memchr(s->text + s->line_start, '\n', s->len - s->line_start);
        if (nl == NULL) {
            break;
        }
        s->line_start = (size_t)(nl - s->text) + 1;
        s->line++;
    }
    return MIN(s->line_start + json_parser_get_current_pos(parser), s->len);
}

/* The first byte of the scalar (string, number or literal) or key that
 * ends before `end`, past any separators in between. The gate has made
 * every token plain JSON, so a string starts at the nearest quote before
 * its closing one that no backslash escapes. */
static size_t token_start(const char *text, size_t end)
{
    size_t i = end;
    while (i > 0 && (is_space(text[i - 1]) || strchr(",:]}", text[i - 1]) != NULL)) {
        i--;
    }
    if (i == 0) {
        return 0;
    }
    if (text[i - 1] != '"') {
        while (i > 0 && (g_ascii_isalnum(text[i - 1]) || text[i - 1] == '-')) {
            i--;
        }
        return i;
    }
    for (size_t q = i - 1; q > 0; q--) {
        if (text[q - 1] != '"') {
            continue;
        }
        size_t backslashes = 0;
        while (q - 1 > backslashes && text[q - 2 - backslashes] == '\\') {
            backslashes++;
        }
        if (backslashes % 2 == 0) {
            return q - 1;
        }
    }
    return 0;
}

/* Keeps where `node`, just parsed, starts; returns it. A container's start
 * was taken at its opening bracket; a scalar ends where json-glib is (or
 * before a comma it took too). */
static size_t spans_record(Spans *s, JsonParser *parser, JsonNode *node)
{
    size_t start = JSON_NODE_HOLDS_OBJECT(node) || JSON_NODE_HOLDS_ARRAY(node)
                       ? s->closed
                       : token_start(s->text, spans_here(s, parser));
    g_hash_table_insert(s->offsets, node, GSIZE_TO_POINTER(s->base + start));
    return start;
}

static void on_container_start(JsonParser *parser, gpointer data)
{
    Spans *s = data;
    Open o = {spans_here(s, parser) - 1, 0};
    g_array_append_val(s->open, o);
}

static void on_container_end(JsonParser *parser, gpointer container, gpointer data)
{
    Spans *s = data;
    if (s->open->len > 0) {
        s->closed = g_array_index(s->open, Open, s->open->len - 1).start;
        g_array_set_size(s->open, s->open->len - 1);
    }
}

static void on_member(JsonParser *parser, JsonObject *object, const char *name, gpointer data)
{
    Spans *s = data;
    size_t value = spans_record(s, parser, json_object_get_member(object, name));
    Open *o = s->open->len > 0 ? &g_array_index(s->open, Open, s->open->len - 1) : NULL;
    if (o != NULL && ++o->members > json_object_get_size(object) && s->duplicate == NULL) {
        /* json-glib replaced the earlier value: the key is in twice */
        s->duplicate = g_strdup(name);
        s->duplicate_at = token_start(s->text, value);
    }
}

static void on_element(JsonParser *parser, JsonArray *array, int index, gpointer data)
{
    spans_record(data, parser, json_array_get_element(array, (guint)index));
}

static void on_error(JsonParser *parser, const GError *error, gpointer data)
{
    Spans *s = data;
    s->error_at = spans_here(s, parser);
}

/* json-glib's message without its "<data>:LINE:COLUMN: " prefix (the byte
 * offset replaces it). */
static const char *without_location(const char *message)
{
    const char *m = message;
    if (!g_str_has_prefix(m, "<data>:")) {
        return message;
    }
    m += strlen("<data>:");
    for (int field = 0; field < 2; field++) {
        while (g_ascii_isdigit(*m)) {
            m++;
        }
        if (*m++ != ':') {
            return message;
        }
    }
    return *m == ' ' ? m + 1 : m;
}

/* ---- the header ------------------------------------------------------- */

gboolean tdm_st_header_parse(TdmStHeader *h, const char *path, const char *text, size_t len,
                             size_t base, GError **error)
{
    memset(h, 0, sizeof(*h));
    h->offsets = g_hash_table_new(NULL, NULL);
    if (!header_gate(path, text, len, base, error)) {
        return FALSE;
    }
    Spans s = {.text = text, .len = len, .base = base, .line = 1, .offsets = h->offsets};
    s.open = g_array_new(FALSE, FALSE, sizeof(Open));
    h->parser = json_parser_new_immutable();
    g_signal_connect(h->parser, "object-start", G_CALLBACK(on_container_start), &s);
    g_signal_connect(h->parser, "array-start", G_CALLBACK(on_container_start), &s);
    g_signal_connect(h->parser, "object-end", G_CALLBACK(on_container_end), &s);
    g_signal_connect(h->parser, "array-end", G_CALLBACK(on_container_end), &s);
    g_signal_connect(h->parser, "object-member", G_CALLBACK(on_member), &s);
    g_signal_connect(h->parser, "array-element", G_CALLBACK(on_element), &s);
    g_signal_connect(h->parser, "error", G_CALLBACK(on_error), &s);

    GError *local = NULL;
    gboolean ok = json_parser_load_from_data(h->parser, text, (gssize)len, &local);
    g_signal_handlers_disconnect_matched(h->parser, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, &s);
    if (!ok) {
        /* json-glib names a missing colon or comma by the token before it:
         * say what was expected where it was not */
        gboolean parse_error = local->domain == JSON_PARSER_ERROR;
        const char *what = !parse_error ? NULL
                           : local->code == JSON_PARSER_ERROR_MISSING_COLON ? "expected ':'"
                           : local->code == JSON_PARSER_ERROR_MISSING_COMMA ? "expected ','"
                           : local->code == JSON_PARSER_ERROR_TRAILING_COMMA ? "trailing comma"
                                                                             : NULL;
        header_fail(error, path, text, len, base, skip_space(text, len, s.error_at),
                    what != NULL ? what : without_location(local->message), what == NULL);
        g_error_free(local);
    } else if (s.duplicate != NULL) {
        g_autofree char *what = g_strdup_printf("duplicate key '%s'", s.duplicate);
        ok = header_fail(error, path, text, len, base, s.duplicate_at, what, FALSE);
    } else {
        h->root = json_node_get_object(json_parser_get_root(h->parser));
        h->root_offset = base + skip_space(text, len, 0);
    }
    g_free(s.duplicate);
    g_array_unref(s.open);
    return ok;
}

size_t tdm_st_header_offset(const TdmStHeader *h, JsonNode *node)
{
    return GPOINTER_TO_SIZE(g_hash_table_lookup(h->offsets, node));
}

void tdm_st_header_clear(TdmStHeader *h)
{
    g_clear_object(&h->parser);
    g_clear_pointer(&h->offsets, g_hash_table_unref);
    h->root = NULL;
}
