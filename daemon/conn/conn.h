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
struct model;
struct trace_task;
struct compile_task;
struct conn;
struct job;

/* Where the raw payload of the frame being read goes: nseg buffers, filled in order; then
 * done() runs. Without a sink the payload is read and discarded. The arrays seg and seg_len
 * are borrowed from the handler (usually its request's state) until done() or abort() runs. */
struct conn_sink {
    uint8_t *const *seg;
    const size_t *seg_len;
    int nseg;
    void (*done)(struct conn *c, void *arg);
    void (*abort)(struct conn *c, void *arg); /* the connection died first; may be NULL */
    /* Payload left after the last segment: refill() sets the next segments (seg, seg_len,
     * nseg) and returns 0, or returns -1 to discard the rest. May be NULL. */
    int (*refill)(struct conn *c, struct conn_sink *sink, void *arg);
    void *arg;
};

/* What a connection calls in the layers above it, set by its owner (server.c's
 * srv_conn_hooks, in struct srv's conn_hooks): conn.c itself knows only frames. */
struct conn_hooks {
    /* A frame arrived (the hello checked against the limits): serve it (dispatch). */
    void (*frame)(struct conn *c, const Ipuof__Header *h, uint32_t payload_len);
    /* c is being freed: let go of what it holds above (its trace, upload, job, queued
     * attach). 1 when others may now get something it released: freed() then runs once c
     * is gone. */
    int (*gone)(struct conn *c);
    void (*freed)(struct srv *s);
    /* 1 when c holds something above (IPUs, a queued attach, an upload), so that idleness
     * does not close it. */
    int (*holds)(const struct conn *c);
};

/* One piece of an outgoing payload (copied by conn_sendv). */
struct conn_iov {
    const void *base;
    size_t len;
};

struct conn {
    struct srv *srv;
    struct bufferevent *bev;
    uint32_t id;
    char peer[64];
    int via_admin_socket;
    int pod;                     /* accepted on the Pod port: a peer daemon (req_pod.c) */
    int pod_refused;             /* its PodHello was refused: no rendezvous store */
    unsigned kv_waiting;         /* its rendezvous gets waiting for a key (req_pod.c) */
    int tls;                     /* bev is TLS (tls.c): payloads decrypted into the sink (tls_read.h) */
    int admin;                   /* may reset devices */
    int hello_done;
    char name[DEV_NAME_MAX];
    uint32_t pid;
    int revoked_code;            /* why the partition was taken away (IPUOF_E_DEVICE_RESET,
                                  * ...), until the next attach; 0: it was not */
    char revoked_msg[768];       /* the sentence the Notice carried (job_end's msg) */
    struct waiter *waiter;       /* queued attach, or NULL */
    struct event *handshake_timer;
    struct event *resume;        /* continues frame processing after a fairness yield */
    int closing;                 /* close once the output is written */
    int in_callback;
    int dead;                    /* free once the callback unwinds */
    uint64_t frames_in;

    /* payload of the frame being read */
    uint64_t payload_left;       /* bytes still to read */
    uint64_t payload_req;        /* the request id of the frame whose payload is read */
    struct conn_sink sink;       /* where they go (nseg == 0: discarded) */
    int sink_idx;
    size_t sink_off;

    int frames_held;              /* a compile or run is in flight: read no more frames */
    struct compile_task *upload;  /* model bytes arriving for a compile */
    struct trace_task *trace;    /* its trace being written on a worker, or NULL */
    uint64_t refused_upload;     /* request id of the last compile refused mid-upload */
    struct job *job;            /* the job this connection belongs to once attached (its own
                                  * job of one process, or one of several processes): it holds
                                  * the partition and the compiled models; NULL: none */
    unsigned proc_id;           /* its process id in that job */

    struct conn *prev, *next;
};

/* Wraps an accepted socket. Returns NULL (and closes fd) when out of memory. */
struct conn *conn_new(struct srv *s, int fd, const struct sockaddr *sa, int salen,
                      int via_admin_socket);

/* Wraps a bufferevent (owned from now on, also on failure; a socket's or one end of a
 * bufferevent pair, as unit tests use) with peer as its printable address. NULL when out
 * of memory. */
struct conn *conn_new_bev(struct srv *s, struct bufferevent *bev, const char *peer,
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

/* Queues one frame whose payload is data[0..len), not copied: cleanup(data, len, arg) runs
 * exactly once, when the bytes are written or dropped (at once on a failure). As
 * conn_send otherwise (the bytes count against max_output_bytes). */
int conn_send_ref(struct conn *c, const Ipuof__Header *h, const void *data, size_t len,
                  void (*cleanup)(const void *data, size_t len, void *arg), void *arg);

/* Queues one frame whose payload is the concatenation of iov[0..n). As conn_send. */
int conn_sendv(struct conn *c, const Ipuof__Header *h, const struct conn_iov *iov, int n);

/* Bytes queued on c's output, not yet written to the socket (what a stream of frames
 * checks before it adds one). */
size_t conn_queued(const struct conn *c);

/* Sets where the payload of the frame now being dispatched goes (its handler calls this). */
void conn_set_sink(struct conn *c, const struct conn_sink *sink);

/* Holds the frames after this one (a request is being served off the loop: its reply must
 * come first) or releases them (buffered frames are processed again;
 * during a shutdown the connection is then closed once its answer is written). */
void conn_hold_frames(struct conn *c);
void conn_release_frames(struct conn *c);

/* Queues an Error reply for req_id. */
void conn_send_error(struct conn *c, uint64_t req_id, int code, int error_class, int recovery,
                     const char *component, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Applies the current idle timeout to the connection. */
void conn_apply_timeouts(struct conn *c);

/* The holder record of this connection, for the device inventory. */
void conn_holder(const struct conn *c, struct dev_holder *h);

#endif
