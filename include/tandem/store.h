/* tandem/store.h - the rendezvous key-value store over TCP.
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

typedef struct _TdmStore TdmStore;
typedef struct _TdmStoreServer TdmStoreServer;

/* Largest key + value accepted in one message (bytes). */
#define TDM_STORE_MAX_MESSAGE (4u << 20)
/* Default timeout of blocking store calls and rendezvous (seconds);
 * TDM_TIMEOUT overrides it in the launcher and the trainer. */
#define TDM_STORE_DEFAULT_TIMEOUT 300.0

/* Serve a store on `host` ("127.0.0.1" when NULL; "0.0.0.0" or an address
 * for multi-node jobs) and `port` (0 = any free port) from a background
 * thread. Transfer full. */
TDM_API TdmStoreServer *tdm_store_server_new(const char *host, int port, const char *token,
                                             GError **error);
/* The port actually bound. */
TDM_API int tdm_store_server_get_port(const TdmStoreServer *server);
TDM_API void tdm_store_server_free(TdmStoreServer *server);

/* Connect, retrying until `timeout_s` (the server may start later).
 * Transfer full. */
TDM_API TdmStore *tdm_store_connect(const char *host, int port, const char *token,
                                    double timeout_s, GError **error);
TDM_API void tdm_store_free(TdmStore *store);
/* Timeout used by blocking calls that take none (get, wait). */
TDM_API void tdm_store_set_timeout(TdmStore *store, double timeout_s);

TDM_API gboolean tdm_store_set(TdmStore *store, const char *key, const void *value, size_t len,
                               GError **error);
/* Wait until `key` exists, then return its value (transfer full). */
TDM_API GBytes *tdm_store_get(TdmStore *store, const char *key, GError **error);
/* Wait until every key of the NULL-terminated list exists. On timeout the
 * error lists the keys still missing. */
TDM_API gboolean tdm_store_wait(TdmStore *store, const char *const *keys, GError **error);
/* Atomically add `delta` to the integer stored at `key` (0 if absent; kept
 * as decimal text); returns the new value in *result. */
TDM_API gboolean tdm_store_add(TdmStore *store, const char *key, gint64 delta, gint64 *result,
                               GError **error);
/* If the value at `key` equals `expected` (absent when expected == NULL),
 * replace it with `desired`. Returns the value now stored (transfer full);
 * empty when the key is still absent (only possible with `expected`). */
TDM_API GBytes *tdm_store_compare_set(TdmStore *store, const char *key, GBytes *expected,
                                      GBytes *desired, GError **error);
/* TRUE in *deleted when the key existed. */
TDM_API gboolean tdm_store_delete(TdmStore *store, const char *key, gboolean *deleted,
                                  GError **error);
/* Non-blocking: does `key` exist? */
TDM_API gboolean tdm_store_check(TdmStore *store, const char *key, gboolean *exists,
                                 GError **error);

/* Connect to the job's store from the environment (TDM_MASTER_ADDR,
 * TDM_MASTER_PORT, TDM_STORE_TOKEN, or torchrun's MASTER_ADDR/MASTER_PORT).
 * Transfer full. */
TDM_API TdmStore *tdm_store_connect_from_env(GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStore, tdm_store_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStoreServer, tdm_store_server_free)

G_END_DECLS

#endif /* TANDEM_STORE_H */
