/* SPDX-License-Identifier: MIT */
/**
 * SECTION:store
 * @title: The store
 * @short_description: the rendezvous key-value store over TCP
 * @include: tandem/tandem.h
 *
 * One process (the launcher, or rank 0) serves the store; every rank connects
 * as a client. It carries rendezvous (who is there, on which host), NCCL
 * unique ids, Gloo's address exchange, heartbeats and the collective debug
 * checks. Every client must present the job's token (random, created by the
 * launcher and passed as TDM_STORE_TOKEN); a wrong token or a message over
 * the size bound closes that connection only and the server keeps serving
 * the others. Every blocking call has a timeout.
 */
#ifndef TANDEM_STORE_H
#define TANDEM_STORE_H

#include <tandem/types.h>

G_BEGIN_DECLS

/**
 * TdmStore:
 *
 * A client connection to the job's store; opaque.
 */
typedef struct _TdmStore TdmStore;
/**
 * TdmStoreServer:
 *
 * A store served from a background thread of this process; opaque.
 */
typedef struct _TdmStoreServer TdmStoreServer;

/**
 * TDM_STORE_MAX_MESSAGE:
 *
 * The largest key + value accepted in one message, in bytes.
 */
#define TDM_STORE_MAX_MESSAGE (4u << 20)
/**
 * TDM_STORE_DEFAULT_TIMEOUT:
 *
 * The default timeout of blocking store calls and of the rendezvous, in
 * seconds; TDM_TIMEOUT overrides it in the launcher and the trainer.
 */
#define TDM_STORE_DEFAULT_TIMEOUT 300.0

/**
 * tdm_store_server_new:
 * @host: (nullable): the address to listen on: "127.0.0.1" when NULL;
 *   "0.0.0.0" or an address for multi-node jobs
 * @port: the port; 0: any free port (tdm_store_server_get_port())
 * @token: the token every client must present
 * @error: return location for a #GError, or NULL
 *
 * Serves a store from a background thread.
 *
 * Returns: (transfer full): the server, or NULL with @error set (the
 * address cannot be bound, naming it)
 */
TDM_API TdmStoreServer *tdm_store_server_new(const char *host, int port, const char *token,
                                             GError **error);
/**
 * tdm_store_server_get_port:
 * @server: a server
 *
 * The port actually bound.
 *
 * Returns: the port
 */
TDM_API int tdm_store_server_get_port(const TdmStoreServer *server);
/**
 * tdm_store_server_free:
 * @server: (transfer full) (nullable): a server
 *
 * Stops serving and frees the server; clients still connected see their
 * connection closed.
 */
TDM_API void tdm_store_server_free(TdmStoreServer *server);

/**
 * tdm_store_connect:
 * @host: the server's host
 * @port: its port
 * @token: the job's token
 * @timeout_s: how long to keep retrying (the server may start later); later
 *   blocking calls wait %TDM_STORE_DEFAULT_TIMEOUT (tdm_store_set_timeout())
 * @error: return location for a #GError, or NULL
 *
 * Connects to a store, retrying until @timeout_s.
 *
 * Returns: (transfer full): the store, or NULL with %TDM_ERROR_TIMEOUT or an
 * I/O error naming the address
 */
TDM_API TdmStore *tdm_store_connect(const char *host, int port, const char *token,
                                    double timeout_s, GError **error);
/**
 * tdm_store_free:
 * @store: (transfer full) (nullable): a store
 *
 * Closes the connection.
 */
TDM_API void tdm_store_free(TdmStore *store);
/**
 * tdm_store_set_timeout:
 * @store: a store
 * @timeout_s: seconds
 *
 * Sets the timeout of the blocking calls that take none (get, wait).
 */
TDM_API void tdm_store_set_timeout(TdmStore *store, double timeout_s);

/**
 * tdm_store_set:
 * @store: a store
 * @key: the key
 * @value: (array length=len): the bytes
 * @len: their number
 * @error: return location for a #GError, or NULL
 *
 * Sets @key to @value, replacing any value.
 *
 * Returns: TRUE, or FALSE with @error set (the connection failed, or the
 * message is over %TDM_STORE_MAX_MESSAGE)
 */
TDM_API gboolean tdm_store_set(TdmStore *store, const char *key, const void *value, size_t len,
                               GError **error);
/**
 * tdm_store_get:
 * @store: a store
 * @key: the key
 * @error: return location for a #GError, or NULL
 *
 * Waits until @key exists, then returns its value.
 *
 * Returns: (transfer full): the value, or NULL with %TDM_ERROR_TIMEOUT
 * naming the key, or the connection's error
 */
TDM_API GBytes *tdm_store_get(TdmStore *store, const char *key, GError **error);
/**
 * tdm_store_wait:
 * @store: a store
 * @keys: (array zero-terminated=1): the keys
 * @error: return location for a #GError, or NULL
 *
 * Waits until every key exists.
 *
 * Returns: TRUE, or FALSE with @error set: on a timeout the error lists the
 * keys still missing
 */
TDM_API gboolean tdm_store_wait(TdmStore *store, const char *const *keys, GError **error);
/**
 * tdm_store_add:
 * @store: a store
 * @key: the key
 * @delta: what to add
 * @result: (out) (optional): the new value
 * @error: return location for a #GError, or NULL
 *
 * Atomically adds @delta to the integer stored at @key (0 if absent; kept
 * as decimal text).
 *
 * Returns: TRUE, or FALSE with @error set (the value is not an integer, or
 * the connection failed)
 */
TDM_API gboolean tdm_store_add(TdmStore *store, const char *key, gint64 delta, gint64 *result,
                               GError **error);
/**
 * tdm_store_compare_set:
 * @store: a store
 * @key: the key
 * @expected: (nullable): the value it must have; NULL: it must be absent
 * @desired: the value to store then
 * @error: return location for a #GError, or NULL
 *
 * If the value at @key equals @expected, replaces it with @desired,
 * atomically.
 *
 * Returns: (transfer full): the value now stored; empty when the key is
 * still absent (only possible with @expected); NULL with @error set
 */
TDM_API GBytes *tdm_store_compare_set(TdmStore *store, const char *key, GBytes *expected,
                                      GBytes *desired, GError **error);
/**
 * tdm_store_delete:
 * @store: a store
 * @key: the key
 * @deleted: (out) (optional): TRUE when the key existed
 * @error: return location for a #GError, or NULL
 *
 * Deletes @key.
 *
 * Returns: TRUE, or FALSE with @error set (the connection failed)
 */
TDM_API gboolean tdm_store_delete(TdmStore *store, const char *key, gboolean *deleted,
                                  GError **error);
/**
 * tdm_store_check:
 * @store: a store
 * @key: the key
 * @exists: (out) (optional): whether it exists
 * @error: return location for a #GError, or NULL
 *
 * Whether @key exists, without waiting.
 *
 * Returns: TRUE, or FALSE with @error set (the connection failed)
 */
TDM_API gboolean tdm_store_check(TdmStore *store, const char *key, gboolean *exists,
                                 GError **error);

/**
 * tdm_store_connect_from_env:
 * @error: return location for a #GError, or NULL
 *
 * Connects to the job's store from the environment (TDM_MASTER_ADDR,
 * TDM_MASTER_PORT, TDM_STORE_TOKEN, or torchrun's MASTER_ADDR and
 * MASTER_PORT).
 *
 * Returns: (transfer full): the store, or NULL with @error naming the
 * variable missing or the address that could not be reached
 */
TDM_API TdmStore *tdm_store_connect_from_env(GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStore, tdm_store_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStoreServer, tdm_store_server_free)

G_END_DECLS

#endif /* TANDEM_STORE_H */
