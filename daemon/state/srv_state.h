/*
 * srv_state.h — struct srv, the daemon's state shared by every layer (the configuration,
 * the inventory, the connections, the attach wait queue, the jobs, the cache, the workers),
 * and the daemon's clock. Data only: server.c creates and runs it (server.h), the layers
 * below read and update their own parts (see docs/architecture.md, "Layers").
 */
#ifndef IPUOFD_SRV_STATE_H
#define IPUOFD_SRV_STATE_H

#include <event2/event.h>
#include <event2/listener.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "devices.h"
#include "faults.h"
#include "models.h"
#include "work.h"

struct conn;
struct conn_hooks;
struct waiter;
struct job;
struct pod;
struct pod_kv;
struct kv_waiter;
struct fault_park;

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
    struct evconnlistener *podl;             /* the Pod port ([pod] listen), or NULL */
    char pod_addr[256];                      /* its bound HOST:PORT */
    struct pod *pod;                         /* the peers and their state (pod.h), or NULL */
    struct pod_kv *kv;                       /* the rendezvous store (pod_kv.h) */
    struct kv_waiter *kv_waiters;            /* gets waiting for a key (req_pod.c) */
    unsigned nkv_waiters;
    uint64_t kv_held;                        /* bytes of values shared by replies to waiting
                                              * gets, not yet written (kv_max_bytes) */
    struct event *ev_pod_tick;               /* publishes the free IPUs to the hellos */
    struct work *pod_work;                   /* threads of their own for Pod rendezvous,
                                              * which wait for other hosts: never the
                                              * workers compiles and runs need */

    struct event *ev_term, *ev_int, *ev_hup, *ev_drain, *ev_accept_retry;
    struct conn *conns;
    unsigned nconns;                         /* all of them */
    unsigned nadmin;                         /* those on the admin socket (own reserve) */
    unsigned npod;                           /* those on the Pod port ([pod] max_connections) */
    uint32_t next_client_id;
    uint64_t accepted, rejected;

    struct waiter *wait_head, *wait_tail;
    unsigned nwaiting;
    int hold_waiters;                        /* set while IPUs are being reset */

    struct work *work;                       /* compile and run threads */
    struct cache cache;                      /* compiled executables */
    uint32_t next_model_id;
    struct job *jobs;                        /* the jobs (jobs_life.c) */
    const struct conn_hooks *conn_hooks;     /* what a connection calls (server.c) */
    struct fault_table faults;               /* injected faults (req_fault.c, IPUOF_FAULTS) */
    struct fault_park *parked;               /* requests a hung IPU holds (fault_fire.c) */
    struct tls_srv *tls;                     /* TLS on the client port (tls.h), or NULL */
    struct metrics *metrics;                 /* counters and /metrics (metrics.h), or NULL */

    int stopping;
    uint64_t stop_deadline_ms;
    uint64_t started_ms;
};

/* Milliseconds on a monotonic clock. */
static inline uint64_t
srv_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
