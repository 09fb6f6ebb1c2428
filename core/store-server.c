/* SPDX-License-Identifier: MIT */
/* core/store-server.c - the rendezvous key-value store's server: a TCP
 * server run on a background thread (one poll loop, non-blocking sockets,
 * no lock because only that thread touches the table).
 *
 * The frame format is in core/store-wire.h. A request's field count and
 * sizes are fixed by its opcode (see check_request), key bytes must be
 * non-empty and free of NUL; the length prefix is checked before the body
 * is read, so an oversized frame costs the server 4 bytes. The first
 * request of a connection must be HELLO with the job token (compared in
 * constant time through SHA-256 digests). A breach closes that connection
 * only, with one line on stderr naming the peer and the reason. GET and
 * WAIT carry their timeout: the server parks them and answers when the
 * keys exist or the deadline passes, so a client never needs to poll.
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

#define MAX_CONNS 4096
/* The job token is compared as its SHA-256 digest, in constant time. */
#define TOKEN_DIGEST_BYTES 32
/* A peer's numeric "host:port" ("[v6 address]:port" fits) for messages. */
#define PEER_TEXT_LEN 80
/* An integer value (OP_ADD) as text: "-9223372036854775808" and a NUL. */
#define INT_TEXT_LEN 32
/* What one recv() reads of a connection's input at most. */
#define RECV_CHUNK_BYTES 65536
/* Connections the kernel queues before accept(): a whole job's ranks may
 * connect at once. */
#define LISTEN_BACKLOG 512
/* After poll() itself fails, so that a persistent error does not spin. */
#define POLL_RETRY_US 10000

static gboolean key_ok(const guint8 *p, guint32 len)
{
    return len > 0 && memchr(p, 0, len) == NULL;
}

/* The shape each request must have; FALSE with *reason otherwise. */
static gboolean check_request(const Msg *m, const char **reason)
{
    guint want_min, want_max, first_key = 0, nkeys = 1;
    switch (m->op) {
    case OP_HELLO:
        want_min = want_max = 2;
        nkeys = 0;
        break;
    case OP_SET:
        want_min = want_max = 2;
        break;
    case OP_GET:
        want_min = want_max = 2;
        first_key = 1;
        break;
    case OP_WAIT:
        want_min = 2;
        want_max = MAX_FIELDS;
        first_key = 1;
        nkeys = m->nfields - 1;
        break;
    case OP_ADD:
        want_min = want_max = 2;
        break;
    case OP_CAS:
        want_min = want_max = 4;
        break;
    case OP_DELETE:
    case OP_CHECK:
        want_min = want_max = 1;
        break;
    default:
        *reason = "unknown opcode";
        return FALSE;
    }
    if (m->nfields < want_min || m->nfields > want_max) {
        *reason = "wrong number of fields for the opcode";
        return FALSE;
    }
    if ((m->op == OP_GET || m->op == OP_WAIT) && m->len[0] != sizeof(guint64)) {
        *reason = "timeout field is not 8 bytes";
        return FALSE;
    }
    if ((m->op == OP_ADD && m->len[1] != sizeof(guint64)) || (m->op == OP_CAS && m->len[1] != 1)) {
        *reason = "integer field has the wrong size";
        return FALSE;
    }
    for (guint i = first_key; i < first_key + nkeys; i++) {
        if (!key_ok(m->data[i], m->len[i])) {
            *reason = "empty key or key containing a NUL byte";
            return FALSE;
        }
    }
    return TRUE;
}

static void token_digest(const char *token, guint8 digest[TOKEN_DIGEST_BYTES])
{
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(sum, (const guchar *)(token ? token : ""), token ? strlen(token) : 0);
    gsize len = TOKEN_DIGEST_BYTES;
    g_checksum_get_digest(sum, digest, &len);
    g_checksum_free(sum);
}

/* ---- server ---- */

typedef struct {
    int fd;
    char peer[PEER_TEXT_LEN];
    gboolean authed, dead;
    GByteArray *in, *out;
    gsize out_off;
    /* A parked GET or WAIT. */
    gboolean waiting;
    guint8 wait_op;
    GPtrArray *wait_keys;
    double deadline;
} Conn;

struct _TdmStoreServer {
    int listen_fd, wake[2], port;
    guint8 digest[TOKEN_DIGEST_BYTES];
    GThread *thread;
    gint stop;
    GHashTable *table; /* char * -> GBytes * */
    GPtrArray *conns;  /* Conn * */
};

static Conn *conn_new(int fd, const char *peer)
{
    Conn *c = g_new0(Conn, 1);
    c->fd = fd;
    g_strlcpy(c->peer, peer, sizeof c->peer);
    c->in = g_byte_array_new();
    c->out = g_byte_array_new();
    c->wait_keys = g_ptr_array_new_with_free_func(g_free);
    return c;
}

static void conn_free(Conn *c)
{
    if (c->fd >= 0) {
        close(c->fd);
    }
    g_byte_array_unref(c->in);
    g_byte_array_unref(c->out);
    g_ptr_array_unref(c->wait_keys);
    g_free(c);
}

static void conn_reject(Conn *c, const char *reason)
{
    if (!c->dead) {
        fprintf(stderr, "tandem store: closing connection from %s: %s\n", c->peer, reason);
        c->dead = TRUE;
    }
}

static void reply_status(Conn *c, guint8 status)
{
    gsize s;
    frame_begin(c->out, status, 0, &s);
    frame_end(c->out, s);
}

static void reply_bytes(Conn *c, guint8 status, const void *data, gsize len)
{
    gsize s;
    frame_begin(c->out, status, 1, &s);
    frame_field(c->out, data, len);
    frame_end(c->out, s);
}

static void reply_bool(Conn *c, gboolean v)
{
    guint8 b = v ? 1 : 0;
    reply_bytes(c, ST_OK, &b, 1);
}

/* Answer a parked request if its keys exist now, or with TIMEOUT when
 * `expired`. */
static void waiter_try(TdmStoreServer *srv, Conn *c, gboolean expired)
{
    guint missing = 0;
    for (guint i = 0; i < c->wait_keys->len; i++) {
        missing += !g_hash_table_contains(srv->table, c->wait_keys->pdata[i]);
    }
    if (missing == 0) {
        if (c->wait_op == OP_GET) {
            GBytes *v = g_hash_table_lookup(srv->table, c->wait_keys->pdata[0]);
            gsize len;
            const void *p = g_bytes_get_data(v, &len);
            reply_bytes(c, ST_OK, p, len);
        } else {
            reply_status(c, ST_OK);
        }
    } else if (expired) {
        gsize s;
        frame_begin(c->out, ST_TIMEOUT, missing, &s);
        for (guint i = 0; i < c->wait_keys->len; i++) {
            const char *k = c->wait_keys->pdata[i];
            if (!g_hash_table_contains(srv->table, k)) {
                frame_field(c->out, k, strlen(k));
            }
        }
        frame_end(c->out, s);
    } else {
        return;
    }
    c->waiting = FALSE;
    g_ptr_array_set_size(c->wait_keys, 0);
}

static void wake_waiters(TdmStoreServer *srv)
{
    for (guint i = 0; i < srv->conns->len; i++) {
        Conn *c = srv->conns->pdata[i];
        if (c->waiting && !c->dead) {
            waiter_try(srv, c, FALSE);
        }
    }
}

static void table_set(TdmStoreServer *srv, const Msg *m, guint ki, const void *v, gsize len)
{
    g_hash_table_replace(srv->table, g_strndup((const char *)m->data[ki], m->len[ki]),
                         g_bytes_new(v, len));
    wake_waiters(srv);
}

static gboolean parse_int(GBytes *v, gint64 *out)
{
    gsize len;
    const char *p = g_bytes_get_data(v, &len);
    char buf[INT_TEXT_LEN];
    if (len == 0 || len >= sizeof buf) {
        return FALSE;
    }
    memcpy(buf, p, len);
    buf[len] = 0;
    return g_ascii_string_to_signed(buf, 10, G_MININT64, G_MAXINT64, out, NULL);
}

/* Carry out one well-formed request. */
static void serve_request(TdmStoreServer *srv, Conn *c, const Msg *m)
{
    g_autofree char *key = NULL;
    guint ki = (m->op == OP_GET || m->op == OP_WAIT) ? 1 : 0;
    if (m->op != OP_HELLO) {
        key = g_strndup((const char *)m->data[ki], m->len[ki]);
    }
    switch (m->op) {
    case OP_HELLO:
        /* handled by the caller */
        break;
    case OP_SET:
        table_set(srv, m, 0, m->data[1], m->len[1]);
        reply_status(c, ST_OK);
        break;
    case OP_GET:
    case OP_WAIT: {
        guint64 ms = get_u64(m->data[0]);
        c->waiting = TRUE;
        c->wait_op = m->op;
        c->deadline = monotonic() + MIN(ms, (guint64)1 << 40) / 1e3;
        for (guint i = 1; i < m->nfields; i++) {
            g_ptr_array_add(c->wait_keys, g_strndup((const char *)m->data[i], m->len[i]));
        }
        waiter_try(srv, c, ms == 0);
        break;
    }
    case OP_ADD: {
        gint64 cur = 0, delta = (gint64)get_u64(m->data[1]);
        GBytes *old = g_hash_table_lookup(srv->table, key);
        if (old != NULL && !parse_int(old, &cur)) {
            g_autofree char *msg = g_strdup_printf("value of key '%s' is not an integer", key);
            reply_bytes(c, ST_ERROR, msg, strlen(msg));
            break;
        }
        cur = (gint64)((guint64)cur + (guint64)delta);
        char buf[INT_TEXT_LEN];
        int len = g_snprintf(buf, sizeof buf, "%" G_GINT64_FORMAT, cur);
        table_set(srv, m, 0, buf, (gsize)len);
        guint8 b[sizeof(guint64)]; /* little endian, as get_u64 reads it */
        for (guint i = 0; i < sizeof b; i++) {
            b[i] = (guint8)((guint64)cur >> (8 * i));
        }
        reply_bytes(c, ST_OK, b, sizeof b);
        break;
    }
    case OP_CAS: {
        GBytes *old = g_hash_table_lookup(srv->table, key);
        gboolean want_present = m->data[1][0] != 0;
        gboolean match;
        if (!want_present) {
            match = old == NULL;
        } else {
            gsize len;
            const void *p = old ? g_bytes_get_data(old, &len) : NULL;
            match = old != NULL && len == m->len[2] && (len == 0 || memcmp(p, m->data[2], len) == 0);
        }
        if (match) {
            table_set(srv, m, 0, m->data[3], m->len[3]);
        }
        GBytes *now = g_hash_table_lookup(srv->table, key);
        gsize s, len = 0;
        const void *p = now ? g_bytes_get_data(now, &len) : NULL;
        guint8 present = now != NULL;
        frame_begin(c->out, ST_OK, 2, &s);
        frame_field(c->out, &present, 1);
        frame_field(c->out, p, len);
        frame_end(c->out, s);
        break;
    }
    case OP_DELETE:
        reply_bool(c, g_hash_table_remove(srv->table, key));
        break;
    case OP_CHECK:
        reply_bool(c, g_hash_table_contains(srv->table, key));
        break;
    }
}

/* Handle the complete frames in c->in, one at a time, until a request is
 * parked or the input is used up. Returns TRUE when it did something. */
static gboolean conn_process(TdmStoreServer *srv, Conn *c)
{
    gboolean progress = FALSE;
    gsize pos = 0;
    while (!c->waiting && !c->dead && c->in->len - pos >= FRAME_LEN_BYTES) {
        guint32 n = get_u32(c->in->data + pos);
        if (n == 0 || n > FRAME_LIMIT) {
            char why[128];
            g_snprintf(why, sizeof why, "message of %u bytes is over the limit of %u bytes", n,
                       (guint)FRAME_LIMIT);
            conn_reject(c, n == 0 ? "empty message" : why);
            break;
        }
        if (c->in->len - pos - FRAME_LEN_BYTES < n) {
            break;
        }
        Msg m;
        const char *reason = NULL;
        if (!parse_body(c->in->data + pos + FRAME_LEN_BYTES, n, &m, &reason) ||
            !check_request(&m, &reason)) {
            conn_reject(c, reason);
            break;
        }
        if (!c->authed) {
            guint8 got[TOKEN_DIGEST_BYTES];
            g_autofree char *tok = NULL;
            if (m.op != OP_HELLO || m.len[0] != strlen(STORE_MAGIC) ||
                memcmp(m.data[0], STORE_MAGIC, m.len[0]) != 0) {
                conn_reject(c, "first message is not a tandem store handshake");
                break;
            }
            tok = g_strndup((const char *)m.data[1], m.len[1]);
            token_digest(tok, got);
            guint8 diff = m.len[1] != strlen(tok); /* a NUL inside is a mismatch */
            for (int i = 0; i < TOKEN_DIGEST_BYTES; i++) {
                diff |= got[i] ^ srv->digest[i];
            }
            if (diff != 0) {
                static const char msg[] = "wrong store token";
                reply_bytes(c, ST_ERROR, msg, sizeof msg - 1);
                conn_reject(c, "wrong token");
                break;
            }
            c->authed = TRUE;
            reply_status(c, ST_OK);
        } else if (m.op == OP_HELLO) {
            conn_reject(c, "second handshake on one connection");
            break;
        } else {
            serve_request(srv, c, &m);
        }
        pos += FRAME_LEN_BYTES + n;
        progress = TRUE;
    }
    if (pos > 0) {
        g_byte_array_remove_range(c->in, 0, (guint)pos);
    }
    return progress;
}

static void conn_read(Conn *c)
{
    guint8 buf[RECV_CHUNK_BYTES];
    for (;;) {
        gsize room = FRAME_LEN_BYTES + FRAME_LIMIT - MIN(c->in->len, FRAME_LEN_BYTES + FRAME_LIMIT);
        if (room == 0) {
            return;
        }
        ssize_t r = recv(c->fd, buf, MIN(room, sizeof buf), 0);
        if (r > 0) {
            g_byte_array_append(c->in, buf, (guint)r);
            if (c->in->len >= FRAME_LEN_BYTES && get_u32(c->in->data) > FRAME_LIMIT) {
                return; /* rejected by conn_process without reading the body */
            }
            continue;
        }
        if (r < 0 && (errno == EINTR)) {
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        c->dead = TRUE; /* EOF or reset: the peer left */
        return;
    }
}

static void conn_write(Conn *c)
{
    while (c->out_off < c->out->len) {
        ssize_t w = send(c->fd, c->out->data + c->out_off, c->out->len - c->out_off,
                         MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (gsize)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else {
            c->dead = TRUE;
            return;
        }
    }
    g_byte_array_set_size(c->out, 0);
    c->out_off = 0;
}

static void format_peer(const struct sockaddr *sa, socklen_t len, char *out, gsize size)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        g_snprintf(out, size, "%s:%s", host, serv);
    } else {
        g_strlcpy(out, "?", size);
    }
}

static void server_accept(TdmStoreServer *srv)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(srv->listen_fd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return; /* EAGAIN, or a transient error retried on the next poll */
        }
        char peer[PEER_TEXT_LEN];
        format_peer((struct sockaddr *)&ss, len, peer, sizeof peer);
        if (srv->conns->len >= MAX_CONNS) {
            fprintf(stderr, "tandem store: closing connection from %s: too many connections\n",
                    peer);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        g_ptr_array_add(srv->conns, conn_new(fd, peer));
    }
}

static void server_expire(TdmStoreServer *srv, double now)
{
    for (guint i = 0; i < srv->conns->len; i++) {
        Conn *c = srv->conns->pdata[i];
        if (c->waiting && !c->dead && c->deadline <= now) {
            waiter_try(srv, c, TRUE);
        }
    }
}

/* Run every connection's buffered requests until none makes progress: a
 * request of one may release a parked request of another. */
static void server_process_all(TdmStoreServer *srv)
{
    gboolean progress;
    do {
        progress = FALSE;
        for (guint i = 0; i < srv->conns->len; i++) {
            progress |= conn_process(srv, srv->conns->pdata[i]);
        }
    } while (progress);
}

static gpointer server_thread(gpointer data)
{
    TdmStoreServer *srv = data;
    GArray *pfds = g_array_new(FALSE, TRUE, sizeof(struct pollfd));
    while (!g_atomic_int_get(&srv->stop)) {
        double now = monotonic(), next = now + 3600.0;
        g_array_set_size(pfds, 2 + srv->conns->len);
        struct pollfd *p = (struct pollfd *)pfds->data;
        p[0] = (struct pollfd){.fd = srv->wake[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = srv->listen_fd, .events = POLLIN};
        for (guint i = 0; i < srv->conns->len; i++) {
            Conn *c = srv->conns->pdata[i];
            short ev = 0;
            if (c->in->len < FRAME_LEN_BYTES + FRAME_LIMIT) {
                ev |= POLLIN;
            }
            if (c->out_off < c->out->len) {
                ev |= POLLOUT;
            }
            if (c->waiting) {
                next = MIN(next, c->deadline);
            }
            p[2 + i] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        int timeout_ms = (int)MAX(0.0, (next - now) * 1e3 + 1.0);
        if (poll(p, pfds->len, timeout_ms) < 0 && errno != EINTR) {
            fprintf(stderr, "tandem store: poll failed: %s\n", g_strerror(errno));
            g_usleep(POLL_RETRY_US);
        }
        if (p[0].revents & POLLIN) {
            char b[64];
            while (read(srv->wake[0], b, sizeof b) > 0) {
            }
        }
        guint nconns = srv->conns->len;
        for (guint i = 0; i < nconns; i++) {
            Conn *c = srv->conns->pdata[i];
            short re = p[2 + i].revents;
            if (re & (POLLIN | POLLHUP | POLLERR)) {
                conn_read(c);
            }
        }
        if (p[1].revents & POLLIN) {
            server_accept(srv);
        }
        server_process_all(srv);
        server_expire(srv, monotonic());
        for (guint i = srv->conns->len; i-- > 0;) {
            Conn *c = srv->conns->pdata[i];
            if (!c->dead) {
                conn_write(c);
            }
            if (c->dead) {
                /* best effort: a rejected client gets the reply queued before */
                if (c->out_off < c->out->len) {
                    send(c->fd, c->out->data + c->out_off, c->out->len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
                }
                g_ptr_array_remove_index_fast(srv->conns, i); /* frees it */
            }
        }
    }
    g_array_unref(pfds);
    return NULL;
}

static void server_free_state(TdmStoreServer *srv)
{
    if (srv->conns) {
        g_ptr_array_unref(srv->conns);
    }
    if (srv->table) {
        g_hash_table_unref(srv->table);
    }
    for (int i = 0; i < 2; i++) {
        if (srv->wake[i] >= 0) {
            close(srv->wake[i]);
        }
    }
    if (srv->listen_fd >= 0) {
        close(srv->listen_fd);
    }
    g_free(srv);
}

static TdmStoreServer *server_alloc(const char *token)
{
    TdmStoreServer *srv = g_new0(TdmStoreServer, 1);
    srv->listen_fd = srv->wake[0] = srv->wake[1] = -1;
    token_digest(token, srv->digest);
    srv->table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify)g_bytes_unref);
    srv->conns = g_ptr_array_new_with_free_func((GDestroyNotify)conn_free);
    return srv;
}

TdmStoreServer *tdm_store_server_new(const char *host, int port, const char *token,
                                     GError **error)
{
    if (host == NULL) {
        host = "127.0.0.1";
    }
    if (port < 0 || port > 65535) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "store port %d is out of range",
                    port);
        return NULL;
    }
    TdmStoreServer *srv = server_alloc(token);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char serv[NI_MAXSERV];
    g_snprintf(serv, sizeof serv, "%d", port);
    int rc = getaddrinfo(host, serv, &hints, &res);
    if (rc != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "store: cannot resolve listen address '%s': %s", host, gai_strerror(rc));
        server_free_state(srv);
        return NULL;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai != NULL && srv->listen_fd < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0) {
            srv->listen_fd = fd;
        } else {
            err = errno;
            close(fd);
        }
    }
    freeaddrinfo(res);
    if (srv->listen_fd < 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "store: cannot listen on %s:%d: %s", host,
                    port, g_strerror(err));
        server_free_state(srv);
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(srv->listen_fd, (struct sockaddr *)&ss, &len);
    srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    if (pipe2(srv->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "store: pipe: %s", g_strerror(errno));
        server_free_state(srv);
        return NULL;
    }
    srv->thread = g_thread_new("tdm-store", server_thread, srv);
    return srv;
}

int tdm_store_server_get_port(const TdmStoreServer *server)
{
    g_return_val_if_fail(server != NULL, -1);
    return server->port;
}

void tdm_store_server_free(TdmStoreServer *server)
{
    if (server == NULL) {
        return;
    }
    if (server->thread) {
        g_atomic_int_set(&server->stop, 1);
        G_GNUC_UNUSED ssize_t w = write(server->wake[1], "x", 1);
        g_thread_join(server->thread);
    }
    server_free_state(server);
}
