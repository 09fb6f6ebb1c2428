/* core/json.h - a small strict JSON parser, private to the core (used by
 * the safetensors reader). It takes objects, arrays, strings with escapes,
 * integers and the literals true/false/null; every value remembers the file
 * offset of its first byte so errors can point at it, and every error is a
 * TDM_ERROR_CORRUPT naming the file and the byte offset.
 */
#ifndef TDM_JSON_H
#define TDM_JSON_H

#include "internal.h"

#define MAX_JSON_DEPTH 32

typedef enum { J_OBJECT, J_ARRAY, J_STRING, J_INT, J_LITERAL } JType;

typedef struct JValue JValue;
struct JValue {
    JType type;
    size_t offset;    /* of the value's first byte, in the file */
    char *str;        /* J_STRING */
    gint64 num;       /* J_INT */
    GPtrArray *items; /* J_OBJECT values / J_ARRAY items (JValue *) */
    GPtrArray *keys;  /* J_OBJECT keys (char *) */
};

typedef struct {
    const char *s;
    size_t len, pos;
    size_t base; /* file offset of s[0] */
    const char *path;
    GError **error;
} JParser;


/* Frees a value and everything under it; NULL is fine. */
void json_value_free(gpointer p);
/* Sets p->error to a TDM_ERROR_CORRUPT naming the offset; returns FALSE. */
gboolean json_fail(JParser *p, const char *what);
void json_skip_ws(JParser *p);
/* Parses one value at p->pos; NULL with p->error set on failure. */
JValue *json_parse_value(JParser *p, int depth);
/* The value under key in an object, or NULL. */
JValue *json_object_get(const JValue *obj, const char *key);

#endif /* TDM_JSON_H */
