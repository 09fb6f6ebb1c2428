/* core/json.c - the small strict JSON parser behind core/json.h: it reads a
 * safetensors header in place, refusing anything outside the subset it
 * knows (floats, deep nesting, bad escapes or surrogates, leading zeros,
 * integers past 64 bits), because the header comes from outside the
 * program. Errors name the file and the byte offset of the problem.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "json.h"

void json_value_free(gpointer p)
{
    JValue *v = p;
    if (v == NULL) {
        return;
    }
    g_free(v->str);
    if (v->items != NULL) {
        g_ptr_array_free(v->items, TRUE);
    }
    if (v->keys != NULL) {
        g_ptr_array_free(v->keys, TRUE);
    }
    g_free(v);
}

gboolean json_fail(JParser *p, const char *what)
{
    if (p->pos >= p->len) {
        g_set_error(p->error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: bad JSON header at byte %zu: %s (header ends)", p->path,
                    p->base + p->pos, what);
        return FALSE;
    }
    g_set_error(p->error, TDM_ERROR, TDM_ERROR_CORRUPT,
                "%s: bad JSON header at byte %zu: %s (found '%c')", p->path, p->base + p->pos,
                what, g_ascii_isprint(p->s[p->pos]) ? p->s[p->pos] : '?');
    return FALSE;
}

void json_skip_ws(JParser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r')) {
        p->pos++;
    }
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static gboolean jparse_hex4(JParser *p, guint32 *out)
{
    if (p->pos + 4 > p->len) {
        return json_fail(p, "truncated \\u escape");
    }
    guint32 v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p->s[p->pos]);
        if (h < 0) {
            return json_fail(p, "bad hex digit in \\u escape");
        }
        v = v * 16 + (guint32)h;
        p->pos++;
    }
    *out = v;
    return TRUE;
}

static char *jparse_string(JParser *p)
{
    /* p->s[p->pos] == '"' */
    p->pos++;
    GString *out = g_string_new(NULL);
    while (p->pos < p->len) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return g_string_free(out, FALSE);
        }
        if (c < 0x20) {
            json_fail(p, "control character in string");
            break;
        }
        if (c != '\\') {
            g_string_append_c(out, (char)c);
            p->pos++;
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) {
            json_fail(p, "truncated escape");
            break;
        }
        char e = p->s[p->pos++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple != NULL) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            g_string_append_c(out, repl[simple - "\"\\/bfnrt"]);
            continue;
        }
        if (e != 'u') {
            p->pos--;
            json_fail(p, "unknown escape");
            break;
        }
        guint32 cp;
        if (!jparse_hex4(p, &cp)) {
            break;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            guint32 lo;
            if (p->pos + 2 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                json_fail(p, "unpaired surrogate in \\u escape");
                break;
            }
            p->pos += 2;
            if (!jparse_hex4(p, &lo)) {
                break;
            }
            if (lo < 0xDC00 || lo > 0xDFFF) {
                json_fail(p, "bad low surrogate in \\u escape");
                break;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            json_fail(p, "unpaired surrogate in \\u escape");
            break;
        }
        if (cp == 0) {
            json_fail(p, "NUL character in string");
            break;
        }
        g_string_append_unichar(out, cp);
    }
    if (p->pos >= p->len && (p->error == NULL || *p->error == NULL)) {
        json_fail(p, "unterminated string");
    }
    g_string_free(out, TRUE);
    return NULL;
}

static JValue *jparse_container(JParser *p, int depth, gboolean is_object)
{
    JValue *v = g_new0(JValue, 1);
    v->type = is_object ? J_OBJECT : J_ARRAY;
    v->offset = p->base + p->pos;
    v->items = g_ptr_array_new_with_free_func(json_value_free);
    if (is_object) {
        v->keys = g_ptr_array_new_with_free_func(g_free);
    }
    char close = is_object ? '}' : ']';
    p->pos++;
    json_skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        json_skip_ws(p);
        if (is_object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                json_fail(p, "expected a string key");
                goto fail;
            }
            size_t key_pos = p->pos;
            char *key = jparse_string(p);
            if (key == NULL) {
                goto fail;
            }
            for (guint i = 0; i < v->keys->len; i++) {
                if (strcmp(v->keys->pdata[i], key) == 0) {
                    p->pos = key_pos;
                    g_free(key);
                    json_fail(p, "duplicate key");
                    goto fail;
                }
            }
            g_ptr_array_add(v->keys, key);
            json_skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                json_fail(p, "expected ':'");
                goto fail;
            }
            p->pos++;
        }
        JValue *item = json_parse_value(p, depth + 1);
        if (item == NULL) {
            goto fail;
        }
        g_ptr_array_add(v->items, item);
        json_skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return v;
        }
        json_fail(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto fail;
    }
fail:
    json_value_free(v);
    return NULL;
}

JValue *json_parse_value(JParser *p, int depth)
{
    json_skip_ws(p);
    if (depth > MAX_JSON_DEPTH) {
        json_fail(p, "nesting too deep");
        return NULL;
    }
    if (p->pos >= p->len) {
        json_fail(p, "expected a value");
        return NULL;
    }
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        return jparse_container(p, depth, c == '{');
    }
    if (c == '"') {
        size_t start = p->pos;
        char *s = jparse_string(p);
        if (s == NULL) {
            return NULL;
        }
        JValue *v = g_new0(JValue, 1);
        v->type = J_STRING;
        v->offset = p->base + start;
        v->str = s;
        return v;
    }
    if (c == '-' || g_ascii_isdigit(c)) {
        size_t start = p->pos;
        gboolean neg = c == '-';
        if (neg) {
            p->pos++;
        }
        if (p->pos >= p->len || !g_ascii_isdigit(p->s[p->pos])) {
            json_fail(p, "bad number");
            return NULL;
        }
        if (p->s[p->pos] == '0' && p->pos + 1 < p->len && g_ascii_isdigit(p->s[p->pos + 1])) {
            json_fail(p, "leading zero in number");
            return NULL;
        }
        guint64 n = 0;
        while (p->pos < p->len && g_ascii_isdigit(p->s[p->pos])) {
            guint64 d = (guint64)(p->s[p->pos] - '0');
            if (n > ((guint64)G_MAXINT64 - d) / 10) {
                json_fail(p, "integer too large");
                return NULL;
            }
            n = n * 10 + d;
            p->pos++;
        }
        if (p->pos < p->len && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' ||
                                p->s[p->pos] == 'E')) {
            json_fail(p, "only integers are allowed in a safetensors header");
            return NULL;
        }
        JValue *v = g_new0(JValue, 1);
        v->type = J_INT;
        v->offset = p->base + start;
        v->num = neg ? -(gint64)n : (gint64)n;
        return v;
    }
    static const char *const literals[] = {"true", "false", "null"};
    for (size_t i = 0; i < G_N_ELEMENTS(literals); i++) {
        size_t l = strlen(literals[i]);
        if (p->len - p->pos >= l && memcmp(p->s + p->pos, literals[i], l) == 0) {
            JValue *v = g_new0(JValue, 1);
            v->type = J_LITERAL;
            v->offset = p->base + p->pos;
            p->pos += l;
            return v;
        }
    }
    json_fail(p, "expected a value");
    return NULL;
}

JValue *json_object_get(const JValue *obj, const char *key)
{
    for (guint i = 0; i < obj->keys->len; i++) {
        if (strcmp(obj->keys->pdata[i], key) == 0) {
            return obj->items->pdata[i];
        }
    }
    return NULL;
}
