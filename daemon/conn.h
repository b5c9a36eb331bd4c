/*
 * conn.h — one client connection: a bufferevent, the frame reader, replies, limits,
 * and deferred freeing (a connection closed from inside its own callback is freed when
 * the callback unwinds).
 */
#ifndef IPUOFD_CONN_H
#define IPUOFD_CONN_H

#include <event2/bufferevent.h>
#include <stdint.h>
#include <sys/socket.h>

#include "devices.h"
#include "ipuof.pb-c.h"

struct srv;
struct waiter;

struct conn {
    struct srv *srv;
    struct bufferevent *bev;
    uint32_t id;
    char peer[64];
    int via_admin_socket;
    int admin;                   /* may reset devices */
    int hello_done;
    char name[DEV_NAME_MAX];
    uint32_t pid;
    struct dev_partition *part;  /* attached partition, or NULL */
    struct waiter *waiter;       /* queued attach, or NULL */
    struct event *handshake_timer;
    struct event *resume;        /* continues frame processing after a fairness yield */
    int closing;                 /* close once the output is written */
    int in_callback;
    int dead;                    /* free once the callback unwinds */
    uint64_t frames_in;
    struct conn *prev, *next;
};

/* Wraps an accepted socket. Returns NULL (and closes fd) when out of memory. */
struct conn *conn_new(struct srv *s, int fd, const struct sockaddr *sa, int salen,
                      int via_admin_socket);

/* Frees the connection now, or when its callback unwinds; releases what it holds. */
void conn_kill(struct conn *c, const char *why);

/* Frees the connection at once (exit path; not from inside its callbacks). */
void conn_free(struct conn *c);

/* Brackets code that may kill c: a kill in between frees c at conn_leave(). */
void conn_enter(struct conn *c);
void conn_leave(struct conn *c);

/* Stops reading, and frees the connection once its output has been written. */
void conn_close_after_write(struct conn *c);

/*
 * Queues one frame (header + optional payload, copied). When the connection's queued
 * output goes over max_output_bytes the connection is dropped. Returns 0 or -1.
 */
int conn_send(struct conn *c, const Ipuof__Header *h, const void *payload, uint32_t payload_len);

/* Queues an Error reply for req_id. */
void conn_send_error(struct conn *c, uint64_t req_id, int code, int error_class, int recovery,
                     const char *component, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Applies the current idle timeout to the connection. */
void conn_apply_timeouts(struct conn *c);

/* The holder record of this connection, for the device inventory. */
void conn_holder(const struct conn *c, struct dev_holder *h);

#endif
