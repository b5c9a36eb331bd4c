/*
 * server.h — the ipuofd server: listeners, the connection registry, the attach wait
 * queue, signals, reload and graceful shutdown.
 *
 * Threading: everything here runs on the event-loop thread. Work that takes long runs
 * on worker threads and posts its completion back to the loop.
 */
#ifndef IPUOFD_SERVER_H
#define IPUOFD_SERVER_H

#include <event2/event.h>
#include <event2/listener.h>
#include <stdint.h>

#include "config.h"
#include "devices.h"
#include "models.h"
#include "work.h"

struct conn;
struct waiter;
struct job;

#define SRV_MAX_OVERRIDES 32

/* A command-line flag that overrides a config key; re-applied after every (re)load. */
struct srv_override {
    const char *section;
    const char *key;
    const char *value;
};

struct srv {
    struct event_base *base;
    struct cfg cfg;
    const char *config_path;                 /* NULL: defaults and flags only */
    struct srv_override ov[SRV_MAX_OVERRIDES];
    int nov;

    struct dev_inventory *inv;
    struct evconnlistener *tcp;
    struct evconnlistener *admin;
    int bound_port;

    struct event *ev_term, *ev_int, *ev_hup, *ev_drain, *ev_accept_retry;
    struct conn *conns;
    unsigned nconns;                         /* all of them */
    unsigned nadmin;                         /* those on the admin socket (own reserve) */
    uint32_t next_client_id;
    uint64_t accepted, rejected;

    struct waiter *wait_head, *wait_tail;
    unsigned nwaiting;
    int hold_waiters;                        /* set while IPUs are being reset */

    struct work *work;                       /* compile and run threads */
    struct cache cache;                      /* compiled executables */
    uint32_t next_model_id;
    struct job *jobs;                       /* jobs of several processes (jobs.c) */

    int stopping;
    uint64_t stop_deadline_ms;
    uint64_t started_ms;
};

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

/* Milliseconds on a monotonic clock. */
uint64_t srv_now_ms(void);

/* ---- attach wait queue (server.c) ---- */

/* Queues conn's attach request; replies when IPUs free up or the timeout passes. */
int srv_wait_enqueue(struct srv *s, struct conn *c, uint64_t req_id, unsigned count,
                     const char *name, unsigned timeout_ms, char *err, size_t errlen);
/* Drops conn's queued attach, if any, without replying. */
void srv_wait_cancel(struct srv *s, struct conn *c);
/* Serves queued attaches, first come first served, after IPUs were returned. */
void srv_serve_waiters(struct srv *s);

#endif
