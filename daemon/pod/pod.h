/*
 * pod.h — this daemon's Pod: the peers of its [pod] section and what it knows of them. A
 * thread of its own says hello to every peer each hello_interval over a kept connection
 * (pod_client.c) and records the answer (reachable, their IPUs) or why not; the event loop
 * reads a copy (ipuctl status) and publishes this daemon's free IPUs for the hellos. A peer
 * that cannot be reached changes nothing else: the daemon serves its own IPUs as ever.
 * Everything here is behind one mutex; nothing touches struct srv.
 */
#ifndef IPUOFD_POD_H
#define IPUOFD_POD_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum pod_host_state {
    POD_UNKNOWN = 0,         /* no hello answered yet */
    POD_REACHABLE = 1,
    POD_UNREACHABLE = 2,
    POD_SELF = 3,
};

/* One host as last seen. */
struct pod_host {
    char name[CFG_POD_NAME_MAX];
    char addr[256];
    int state;               /* enum pod_host_state */
    unsigned num_ipus, free_ipus;
    uint64_t seen_ms;        /* monotonic ms of the last answered hello; 0: never */
    char error[256];         /* why unreachable */
    char client_addr[256];   /* where clients reach it (its hello reply's client_address) */
};

struct pod;

/*
 * Starts the Pod of c (whose [pod] peers must have passed cfg_validate) for a daemon of
 * num_ipus IPUs whose Pod port is bound at listen_addr: the hello thread runs until
 * pod_stop. *out is NULL when c has no peers (no Pod). 0, or -1 with err.
 */
int pod_start(struct pod **out, const struct cfg *c, const char *listen_addr,
              unsigned num_ipus, char *err, size_t errlen);

/* Publishes this daemon's free IPUs for its next hellos (the loop thread). */
void pod_set_free(struct pod *p, unsigned free_ipus);

/*
 * The link faults on this daemon's link to peer name (faults.h; the loop thread tells
 * them): cut_id a link:partition's id (0: none): the hellos to the peer are not sent (its
 * connection closed), so it shows unreachable naming the fault; latency_ms: each hello
 * waits so long first. A change wakes the hello thread at once. No-op for a name that is
 * no peer, or p NULL.
 */
void pod_set_link(struct pod *p, const char *name, unsigned cut_id, unsigned latency_ms);

/* Copies the hosts, this daemon first (POD_SELF), into out[0..max); returns how many. */
int pod_hosts(struct pod *p, struct pod_host *out, int max);

/* 1 when name is one of the peers (a Pod hello from another name is refused). */
int pod_is_peer(const struct pod *p, const char *name);

/* The Pod address of peer name into addr (1), or 0 when name is not a peer. */
int pod_peer_addr(const struct pod *p, const char *name, char *addr, size_t len);

/* This daemon's client address as its hello replies carry it: listen's host (HOST:PORT or
 * [V6]:PORT) with the port it bound, into out (len bytes). */
void pod_client_address(const char *listen, int bound_port, char *out, size_t len);

/* Stops the hello thread, closes its connections, frees p. NULL is a no-op. */
void pod_stop(struct pod *p);

#endif
