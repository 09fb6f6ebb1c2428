/* SPDX-License-Identifier: MIT */
/* core/store.c - the rendezvous key-value store's client: a blocking
 * connection with deadlines, one request at a time. The server side is in
 * core/store-server.c and the frame format in core/store-wire.h.
 *
 * GET and WAIT carry their timeout to the server, which parks them and
 * answers when the keys exist or the deadline passes, so the client never
 * polls. The client waits a little longer than the server's deadline
 * before giving up on the connection itself.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "store-wire.h"

/* Extra time a client waits past the server's own deadline. */
#define CLIENT_GRACE_S 5.0
/* Until the server listens, a connect is tried again this often. */
#define CONNECT_RETRY_S 0.1
/* The handshake may take this long even when the connect used up the
 * caller's timeout. */
#define HANDSHAKE_MIN_S 10.0
/* Errors quote at most this much of a server's message or of a key, and
 * name at most this many missing keys. */
#define QUOTE_MAX_BYTES 1000
#define QUOTE_KEY_MAX_BYTES 200
#define QUOTE_MAX_KEYS 16

/* ---- client ---- */

struct _TdmStore {
    int fd;
    char *addr; /* "host:port" for messages */
    double timeout_s;
    char *broken; /* why the connection is unusable, or NULL */
    GMutex lock;  /* one request at a time: replies come back in order */
};

static void store_break(TdmStore *s, const char *why)
{
    if (s->broken == NULL) {
        s->broken = g_strdup(why);
    }
}

static gboolean lost(TdmStore *s, const char *why, GError **error)
{
    store_break(s, why);
    g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "store at %s: connection lost (%s)", s->addr,
                s->broken);
    return FALSE;
}

/* Wait for `events` on the socket until `deadline`; FALSE on timeout. */
static gboolean wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - monotonic();
        if (left <= 0) {
            return FALSE;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)MIN(left * 1e3 + 1, 1e9));
        if (r > 0) {
            return TRUE;
        }
        if (r < 0 && errno != EINTR) {
            return TRUE; /* let the following send/recv report it */
        }
    }
}

static gboolean send_all(TdmStore *s, const guint8 *p, gsize n, double deadline, GError **error)
{
    while (n > 0) {
        ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (gsize)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!wait_fd(s->fd, POLLOUT, deadline)) {
                store_break(s, "send timed out");
                g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                            "store at %s: sending a request timed out", s->addr);
                return FALSE;
            }
        } else {
            return lost(s, g_strerror(errno), error);
        }
    }
    return TRUE;
}

/* Read exactly n bytes; *timed_out tells a deadline from a lost peer. */
static gboolean recv_all(TdmStore *s, guint8 *p, gsize n, double deadline, gboolean *timed_out,
                         GError **error)
{
    while (n > 0) {
        ssize_t r = recv(s->fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (gsize)r;
        } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!wait_fd(s->fd, POLLIN, deadline)) {
                *timed_out = TRUE;
                store_break(s, "a reply did not arrive in time");
                return FALSE;
            }
        } else {
            return lost(s, r == 0 ? "closed by the server" : g_strerror(errno), error);
        }
    }
    return TRUE;
}

/* Send one request and read its reply (body in *reply, fields in *msg).
 * Returns FALSE with the error set; *timed_out when the reply never came. */
static gboolean store_call(TdmStore *s, GByteArray *req, double deadline, GByteArray *reply,
                           Msg *msg, GError **error)
{
    if (s->broken != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "store at %s: connection lost (%s)",
                    s->addr, s->broken);
        return FALSE;
    }
    if (!send_all(s, req->data, req->len, deadline, error)) {
        return FALSE;
    }
    guint8 hdr[FRAME_LEN_BYTES];
    gboolean timed_out = FALSE;
    if (!recv_all(s, hdr, sizeof hdr, deadline, &timed_out, error)) {
        if (timed_out) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "store at %s: no reply in time (timeout %.1f s)", s->addr, s->timeout_s);
        }
        return FALSE;
    }
    guint32 n = get_u32(hdr);
    if (n == 0 || n > FRAME_LIMIT) {
        return lost(s, "reply with a bad length", error);
    }
    g_byte_array_set_size(reply, n);
    if (!recv_all(s, reply->data, n, deadline, &timed_out, error)) {
        if (timed_out) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "store at %s: reply cut short past the deadline", s->addr);
        }
        return FALSE;
    }
    const char *reason;
    if (!parse_body(reply->data, n, msg, &reason)) {
        return lost(s, reason, error);
    }
    if (msg->op == ST_ERROR) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "store at %s: %.*s", s->addr,
                    msg->nfields > 0 ? (int)MIN(msg->len[0], QUOTE_MAX_BYTES) : 0,
                    msg->nfields > 0 ? (const char *)msg->data[0] : "");
        return FALSE;
    }
    if (msg->op != ST_OK && msg->op != ST_TIMEOUT) {
        return lost(s, "reply with an unknown status", error);
    }
    return TRUE;
}

static gboolean check_key(TdmStore *s, const char *key, gsize extra, GError **error)
{
    gsize klen = key ? strlen(key) : 0;
    if (klen == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "store: empty key");
        return FALSE;
    }
    if (klen + extra > TDM_STORE_MAX_MESSAGE) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "store: key '%.64s' with %" G_GSIZE_FORMAT
                    " bytes of value is over the limit of %u bytes",
                    key, extra, (guint)TDM_STORE_MAX_MESSAGE);
        return FALSE;
    }
    return TRUE;
}

static gboolean store_connect_once(TdmStore *s, const char *host, int port, double deadline,
                                   char **why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char serv[NI_MAXSERV];
    g_snprintf(serv, sizeof serv, "%d", port);
    int rc = getaddrinfo(host, serv, &hints, &res);
    if (rc != 0) {
        g_free(*why);
        *why = g_strdup(gai_strerror(rc));
        return FALSE;
    }
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            continue;
        }
        int err = 0;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                socklen_t len = sizeof err;
                err = ETIMEDOUT;
                if (wait_fd(fd, POLLOUT, MIN(deadline, monotonic() + 5.0))) {
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                }
            }
        }
        if (err == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            s->fd = fd;
            freeaddrinfo(res);
            return TRUE;
        }
        g_free(*why);
        *why = g_strdup(g_strerror(err));
        close(fd);
    }
    freeaddrinfo(res);
    return FALSE;
}

TdmStore *tdm_store_connect(const char *host, int port, const char *token, double timeout_s,
                            GError **error)
{
    if (host == NULL) {
        host = "127.0.0.1";
    }
    if (port <= 0 || port > 65535) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "store port %d is out of range",
                    port);
        return NULL;
    }
    TdmStore *s = g_new0(TdmStore, 1);
    s->fd = -1;
    s->addr = strchr(host, ':') ? g_strdup_printf("[%s]:%d", host, port)
                                : g_strdup_printf("%s:%d", host, port);
    s->timeout_s = TDM_STORE_DEFAULT_TIMEOUT;
    g_mutex_init(&s->lock);
    double deadline = monotonic() + MAX(timeout_s, 0.0);
    g_autofree char *why = NULL;
    /* The server may not be listening yet: retry until the deadline. */
    while (!store_connect_once(s, host, port, deadline, &why)) {
        if (monotonic() + CONNECT_RETRY_S >= deadline) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "could not connect to the store at %s within %.1f s: %s", s->addr,
                        timeout_s, why ? why : "no address");
            tdm_store_free(s);
            return NULL;
        }
        g_usleep((gulong)(CONNECT_RETRY_S * G_USEC_PER_SEC));
    }
    g_autoptr(GByteArray) req = g_byte_array_new();
    g_autoptr(GByteArray) reply = g_byte_array_new();
    gsize st;
    frame_begin(req, OP_HELLO, 2, &st);
    frame_field(req, STORE_MAGIC, strlen(STORE_MAGIC));
    frame_field(req, token ? token : "", token ? strlen(token) : 0);
    frame_end(req, st);
    Msg m;
    GError *local = NULL;
    if (!store_call(s, req, MAX(deadline, monotonic() + HANDSHAKE_MIN_S), reply, &m, &local)) {
        g_propagate_prefixed_error(error, local, "store handshake: ");
        tdm_store_free(s);
        return NULL;
    }
    return s;
}

void tdm_store_free(TdmStore *store)
{
    if (store == NULL) {
        return;
    }
    if (store->fd >= 0) {
        close(store->fd);
    }
    g_mutex_clear(&store->lock);
    g_free(store->addr);
    g_free(store->broken);
    g_free(store);
}

void tdm_store_set_timeout(TdmStore *store, double timeout_s)
{
    g_return_if_fail(store != NULL);
    store->timeout_s = MAX(timeout_s, 0.0);
}

/* One locked request/response. */
static gboolean store_rpc(TdmStore *s, GByteArray *req, double wait_s, GByteArray *reply,
                          Msg *m, GError **error)
{
    g_mutex_lock(&s->lock);
    gboolean ok = store_call(s, req, monotonic() + wait_s + CLIENT_GRACE_S, reply, m, error);
    g_mutex_unlock(&s->lock);
    return ok;
}

/* One field of a request. */
typedef struct {
    const void *data;
    gsize len;
} Field;

/* Frames `op` with its n fields and makes the locked call, waiting the
 * store's timeout; *m points into `reply`. */
static gboolean store_request(TdmStore *s, guint8 op, const Field *fields, guint n,
                              GByteArray *reply, Msg *m, GError **error)
{
    g_autoptr(GByteArray) req = g_byte_array_new();
    gsize st;
    frame_begin(req, op, n, &st);
    for (guint i = 0; i < n; i++) {
        frame_field(req, fields[i].data, fields[i].len);
    }
    frame_end(req, st);
    return store_rpc(s, req, s->timeout_s, reply, m, error);
}

gboolean tdm_store_set(TdmStore *store, const char *key, const void *value, size_t len,
                       GError **error)
{
    g_return_val_if_fail(store != NULL, FALSE);
    if (!check_key(store, key, len, error)) {
        return FALSE;
    }
    g_autoptr(GByteArray) reply = g_byte_array_new();
    Msg m;
    const Field fields[] = {{key, strlen(key)}, {value, len}};
    return store_request(store, OP_SET, fields, G_N_ELEMENTS(fields), reply, &m, error);
}

/* GET (one key) and WAIT (several) share the request and the timeout reply. */
static gboolean store_wait_op(TdmStore *s, guint8 op, const char *const *keys, GBytes **value,
                              GError **error)
{
    g_autoptr(GByteArray) req = g_byte_array_new();
    g_autoptr(GByteArray) reply = g_byte_array_new();
    guint n = 0;
    gsize total = 0;
    while (keys[n] != NULL) {
        if (!check_key(s, keys[n], total, error)) {
            return FALSE;
        }
        total += strlen(keys[n]);
        n++;
    }
    if (n == 0) {
        return TRUE;
    }
    if (n > MAX_FIELDS - 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "store: cannot wait for %u keys at once (at most %u)", n, MAX_FIELDS - 1);
        return FALSE;
    }
    gsize st;
    Msg m;
    frame_begin(req, op, n + 1, &st);
    put_u64_field(req, (guint64)(s->timeout_s * 1e3));
    for (guint i = 0; i < n; i++) {
        frame_field(req, keys[i], strlen(keys[i]));
    }
    frame_end(req, st);
    if (!store_rpc(s, req, s->timeout_s, reply, &m, error)) {
        return FALSE;
    }
    if (m.op == ST_TIMEOUT) {
        GString *missing = g_string_new(NULL);
        for (guint i = 0; i < m.nfields && i < QUOTE_MAX_KEYS; i++) {
            g_string_append_printf(missing, "%s'%.*s'", i ? ", " : "",
                                   (int)MIN(m.len[i], QUOTE_KEY_MAX_BYTES),
                                   (const char *)m.data[i]);
        }
        if (m.nfields > QUOTE_MAX_KEYS) {
            g_string_append_printf(missing, " and %u more", m.nfields - QUOTE_MAX_KEYS);
        }
        g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                    "store at %s: %s %s not set within %.1f s", s->addr,
                    m.nfields == 1 ? "key" : "keys", missing->str, s->timeout_s);
        g_string_free(missing, TRUE);
        return FALSE;
    }
    if (value != NULL) {
        if (m.nfields != 1) {
            return lost(s, "malformed GET reply", error);
        }
        *value = g_bytes_new(m.data[0], m.len[0]);
    }
    return TRUE;
}

GBytes *tdm_store_get(TdmStore *store, const char *key, GError **error)
{
    g_return_val_if_fail(store != NULL, NULL);
    const char *keys[] = {key, NULL};
    GBytes *value = NULL;
    if (key == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "store: empty key");
        return NULL;
    }
    return store_wait_op(store, OP_GET, keys, &value, error) ? value : NULL;
}

gboolean tdm_store_wait(TdmStore *store, const char *const *keys, GError **error)
{
    g_return_val_if_fail(store != NULL && keys != NULL, FALSE);
    return store_wait_op(store, OP_WAIT, keys, NULL, error);
}

gboolean tdm_store_add(TdmStore *store, const char *key, gint64 delta, gint64 *result,
                       GError **error)
{
    g_return_val_if_fail(store != NULL, FALSE);
    if (!check_key(store, key, 8, error)) {
        return FALSE;
    }
    g_autoptr(GByteArray) req = g_byte_array_new();
    g_autoptr(GByteArray) reply = g_byte_array_new();
    gsize st;
    Msg m;
    frame_begin(req, OP_ADD, 2, &st);
    frame_field(req, key, strlen(key));
    put_u64_field(req, (guint64)delta);
    frame_end(req, st);
    if (!store_rpc(store, req, store->timeout_s, reply, &m, error)) {
        return FALSE;
    }
    if (m.nfields != 1 || m.len[0] != sizeof(guint64)) {
        return lost(store, "malformed ADD reply", error);
    }
    if (result != NULL) {
        *result = (gint64)get_u64(m.data[0]);
    }
    return TRUE;
}

GBytes *tdm_store_compare_set(TdmStore *store, const char *key, GBytes *expected,
                              GBytes *desired, GError **error)
{
    g_return_val_if_fail(store != NULL && desired != NULL, NULL);
    gsize elen = 0, dlen = 0;
    const void *e = expected ? g_bytes_get_data(expected, &elen) : NULL;
    const void *d = g_bytes_get_data(desired, &dlen);
    if (!check_key(store, key, elen + dlen + 1, error)) {
        return NULL;
    }
    g_autoptr(GByteArray) reply = g_byte_array_new();
    Msg m;
    guint8 has = expected != NULL;
    const Field fields[] = {{key, strlen(key)}, {&has, 1}, {e, elen}, {d, dlen}};
    if (!store_request(store, OP_CAS, fields, G_N_ELEMENTS(fields), reply, &m, error)) {
        return NULL;
    }
    if (m.nfields != 2 || m.len[0] != 1) {
        lost(store, "malformed COMPARE_SET reply", error);
        return NULL;
    }
    if (m.data[0][0] == 0) {
        /* absent after the call: only when expected was given and the key is
         * missing; say so with an empty value */
        return g_bytes_new(NULL, 0);
    }
    return g_bytes_new(m.data[1], m.len[1]);
}

static gboolean store_key_bool(TdmStore *s, guint8 op, const char *key, gboolean *out,
                               GError **error)
{
    if (!check_key(s, key, 0, error)) {
        return FALSE;
    }
    g_autoptr(GByteArray) reply = g_byte_array_new();
    Msg m;
    const Field field = {key, strlen(key)};
    if (!store_request(s, op, &field, 1, reply, &m, error)) {
        return FALSE;
    }
    if (m.nfields != 1 || m.len[0] != 1) {
        return lost(s, "malformed reply", error);
    }
    if (out != NULL) {
        *out = m.data[0][0] != 0;
    }
    return TRUE;
}

gboolean tdm_store_delete(TdmStore *store, const char *key, gboolean *deleted, GError **error)
{
    g_return_val_if_fail(store != NULL, FALSE);
    return store_key_bool(store, OP_DELETE, key, deleted, error);
}

gboolean tdm_store_check(TdmStore *store, const char *key, gboolean *exists, GError **error)
{
    g_return_val_if_fail(store != NULL, FALSE);
    return store_key_bool(store, OP_CHECK, key, exists, error);
}
