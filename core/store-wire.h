/* SPDX-License-Identifier: MIT */
/* core/store-wire.h - the rendezvous store's wire format, shared by the
 * server (core/store-server.c) and the client (core/store.c); private to
 * the core.
 *
 * A frame (both ways) is a little-endian u32 body length, then the body: a
 * u8 opcode (requests) or status (replies), a u8 field count and that many
 * fields, each a u32 length and its bytes. The body must be used up
 * exactly, and the fields together carry at most TDM_STORE_MAX_MESSAGE
 * bytes. The helpers are static inline so that each side (and the fuzz
 * target, which includes core/store-server.c) gets its own copy without
 * exporting anything.
 */
#ifndef TDM_STORE_WIRE_H
#define TDM_STORE_WIRE_H

#include <string.h>

#include "internal.h"

enum {
    OP_HELLO = 1,
    OP_SET,
    OP_GET,
    OP_WAIT,
    OP_ADD,
    OP_CAS,
    OP_DELETE,
    OP_CHECK,
    ST_OK = 0x80,
    ST_TIMEOUT,
    ST_ERROR,
};

#define STORE_MAGIC "tandem-store-1"
#define MAX_FIELDS 255
/* Every message is a little-endian u32 length, then the body: the opcode
 * and the field count (a byte each), then each field as a u32 length and
 * its bytes. */
#define FRAME_LEN_BYTES 4u
#define BODY_HEAD_BYTES 2u
#define FRAME_LIMIT (TDM_STORE_MAX_MESSAGE + BODY_HEAD_BYTES + FRAME_LEN_BYTES * MAX_FIELDS)

typedef struct {
    guint8 op;
    guint nfields;
    const guint8 *data[MAX_FIELDS];
    guint32 len[MAX_FIELDS];
} Msg;

/* ---- framing, shared by both sides ---- */

static inline guint32 get_u32(const guint8 *p)
{
    return (guint32)p[0] | (guint32)p[1] << 8 | (guint32)p[2] << 16 | (guint32)p[3] << 24;
}

static inline void put_u32(GByteArray *out, guint32 v)
{
    guint8 b[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};
    g_byte_array_append(out, b, 4);
}

static inline guint64 get_u64(const guint8 *p)
{
    return (guint64)get_u32(p) | (guint64)get_u32(p + 4) << 32;
}

static inline void put_u64_field(GByteArray *out, guint64 v)
{
    put_u32(out, 8);
    put_u32(out, (guint32)v);
    put_u32(out, (guint32)(v >> 32));
}

/* Split a body into fields; FALSE with *reason when it is malformed. */
static inline gboolean parse_body(const guint8 *body, size_t n, Msg *msg, const char **reason)
{
    if (n < BODY_HEAD_BYTES) {
        *reason = "message shorter than its header";
        return FALSE;
    }
    msg->op = body[0];
    msg->nfields = body[1];
    size_t pos = BODY_HEAD_BYTES, total = 0;
    for (guint i = 0; i < msg->nfields; i++) {
        if (n - pos < FRAME_LEN_BYTES) {
            *reason = "field length runs past the end of the message";
            return FALSE;
        }
        guint32 len = get_u32(body + pos);
        pos += FRAME_LEN_BYTES;
        if (len > n - pos) {
            *reason = "field runs past the end of the message";
            return FALSE;
        }
        total += len;
        if (total > TDM_STORE_MAX_MESSAGE) {
            *reason = "fields exceed TDM_STORE_MAX_MESSAGE";
            return FALSE;
        }
        msg->data[i] = body + pos;
        msg->len[i] = len;
        pos += len;
    }
    if (pos != n) {
        *reason = "trailing bytes after the last field";
        return FALSE;
    }
    return TRUE;
}

static inline void frame_begin(GByteArray *out, guint8 op, guint nfields, gsize *start)
{
    *start = out->len;
    put_u32(out, 0);
    guint8 h[BODY_HEAD_BYTES] = {op, (guint8)nfields};
    g_byte_array_append(out, h, BODY_HEAD_BYTES);
}

static inline void frame_field(GByteArray *out, const void *data, gsize len)
{
    put_u32(out, (guint32)len);
    if (len > 0) {
        g_byte_array_append(out, data, (guint)len);
    }
}

static inline void frame_end(GByteArray *out, gsize start)
{
    guint32 n = (guint32)(out->len - start - FRAME_LEN_BYTES);
    guint8 *p = out->data + start;
    p[0] = n & 0xff;
    p[1] = (n >> 8) & 0xff;
    p[2] = (n >> 16) & 0xff;
    p[3] = n >> 24;
}

static inline double monotonic(void)
{
    return g_get_monotonic_time() / 1e6;
}

#endif /* TDM_STORE_WIRE_H */
