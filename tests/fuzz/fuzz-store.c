/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-store.c - libFuzzer target for the store server's frame
 * parser and request dispatch (core/store-server.c), without sockets: the input
 * is what one client sent on a connection.
 *
 * The file includes core/store-server.c itself to reach its static parser. Not
 * built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -DTDM_COMPILATION -I../../include \
 *     -I../../core -I. $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-store.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-store
 *   LD_LIBRARY_PATH=core/.libs ./fuzz-store corpus/
 * Inputs that start with a valid handshake (token "fuzz") reach every
 * request; a second connection replays the input without one. Every parked
 * GET/WAIT is then answered by a forced timeout.
 */
#include "../../core/store-server.c"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static void feed(TdmStoreServer *srv, const guint8 *data, size_t size, gboolean with_hello)
{
    Conn *c = conn_new(-1, "fuzz");
    if (with_hello) {
        gsize st;
        frame_begin(c->in, OP_HELLO, 2, &st);
        frame_field(c->in, STORE_MAGIC, strlen(STORE_MAGIC));
        frame_field(c->in, "fuzz", 4);
        frame_end(c->in, st);
    }
    /* the server never holds more than one frame past the prefix */
    g_byte_array_append(c->in, data, (guint)MIN(size, 4 + FRAME_LIMIT - c->in->len));
    g_ptr_array_add(srv->conns, c);
    for (int round = 0; round < 4; round++) {
        server_process_all(srv);
        server_expire(srv, monotonic() + 1e12);
    }
    g_ptr_array_set_size(srv->conns, 0);
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    TdmStoreServer *srv = server_alloc("fuzz");
    feed(srv, data, size, TRUE);
    feed(srv, data, size, FALSE);
    server_free_state(srv);
    return 0;
}
