/*
 * server.h — the ipuofd server: listeners, the connection registry, signals, reload and
 * graceful shutdown. Its state, struct srv, is in srv_state.h.
 *
 * Threading: everything here runs on the event-loop thread. Work that takes long runs
 * on worker threads and posts its completion back to the loop.
 */
#ifndef IPUOFD_SERVER_H
#define IPUOFD_SERVER_H

#include <event2/event.h>
#include <event2/listener.h>
#include <stdint.h>

#include "srv_state.h"

struct conn;
struct waiter;
struct job;

/*
 * Builds the configuration: defaults, then the file at s->config_path (if any), then the
 * overrides, then validation. Returns 0 or -1 with a sentence in err.
 */
int srv_build_config(const struct srv *s, struct cfg *out, char *err, size_t errlen);

/* Creates the base, the inventory and the listeners. Returns 0 or -1 with err. */
int srv_init(struct srv *s, char *err, size_t errlen);

/* Writes the bound TCP port to path (atomically: temp file + rename). 0 or -1 with err. */
int srv_write_port_file(const struct srv *s, const char *path, char *err, size_t errlen);

/* Runs the loop until shutdown completes. */
void srv_run(struct srv *s);

/* Frees everything srv_init created. */
void srv_cleanup(struct srv *s);

/* Starts a graceful shutdown: stop accepting, tell clients, drain, leave the loop. */
void srv_shutdown_begin(struct srv *s);

/*
 * Re-reads the config file and applies the reloadable keys. A bad file keeps the old
 * configuration, and so does one whose reloadable keys would not pass cfg_validate() with
 * the keys only a restart changes (e.g. auth_token dropped while a non-loopback listener
 * stays open): the reload is refused whole, with a log line saying why.
 */
void srv_reload(struct srv *s);

/* What every connection calls (frames, leaving, holding): set in struct srv's conn_hooks
 * by srv_init (and by tests building a srv of their own). */
extern const struct conn_hooks srv_conn_hooks;

#endif
