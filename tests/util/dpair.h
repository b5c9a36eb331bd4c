/*
 * dpair.h — unit-test helpers for the daemon's internals without sockets: a server with an
 * event base, an inventory, a cache and worker threads but no listeners, and connections
 * made over libevent bufferevent pairs (the test holds the client end and speaks frames).
 *
 * Links against libipuofd-core.a (unit tests only).
 */
#ifndef IPUOF_DPAIR_H
#define IPUOF_DPAIR_H

#include <event2/bufferevent.h>
#include <stddef.h>

#include "ipuof.pb-c.h"
#include "server.h"

/* Sets up s (zeroed first) with the default configuration, then ipus IPUs and workers
 * worker threads. 0 or -1. Free with dpair_srv_free(). */
int dpair_srv_init(struct srv *s, unsigned ipus, unsigned workers);

/* Frees every connection, the workers (finishing their jobs), the cache, the inventory
 * and the base. Free the client ends first: the loop finalizes them here. */
void dpair_srv_free(struct srv *s);

/* A connection of s over a bufferevent pair (deferred callbacks, as a socket's). Returns
 * the client end (the test frees it) and sets *conn to the daemon's side, or NULL. */
struct bufferevent *dpair_connect(struct srv *s, int via_admin, struct conn **conn);

/* Queues a frame with h and len payload bytes on the client end. 0 or -1. */
int dpair_send(struct bufferevent *b, const Ipuof__Header *h, const void *payload,
               size_t len);

/* Queues a frame head announcing payload_len bytes, then only the first `sent` of them. */
int dpair_send_partial(struct bufferevent *b, const Ipuof__Header *h, const void *payload,
                       size_t payload_len, size_t sent);

/* Runs s's loop until a whole frame is on the client end or timeout_ms pass. Returns the
 * header (ipuof_frame_header_free) and, when payload is not NULL, the payload (malloc'd,
 * caller frees; NULL when empty) and its length. NULL on timeout or a bad frame. */
Ipuof__Header *dpair_recv(struct srv *s, struct bufferevent *b, int timeout_ms,
                          void **payload, size_t *len);

/* Runs s's loop for about ms milliseconds. */
void dpair_pump(struct srv *s, int ms);

/* Says hello on b (request id 1) and reads the reply; with nipus > 0 also attaches that
 * many IPUs (request id 2). 0 when every step succeeded. */
int dpair_session(struct srv *s, struct bufferevent *b, unsigned nipus);

#endif
