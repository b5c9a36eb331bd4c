/*
 * conn.c — see conn.h.
 *
 * Reading: a frame is taken from the input buffer only once all of it is there; the read
 * high-watermark is the largest frame allowed, so libevent stops reading (back-pressure)
 * while one is buffered. At most frames_per_read frames are handled per callback; the rest
 * wait for a deferred "resume" event so one busy client cannot starve the others.
 *
 * Limits before the hello: a frame may be at most prehello_max_bytes and carry no payload,
 * and the hello must arrive within handshake_timeout seconds.
 *
 * Does not: decide what a request means (dispatch.c) or own devices (devices.c).
 */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "ipuof/status.h"
#include "log.h"
#include "srv_state.h"
#include "tls_read.h"
#include "wiremap.h"
#include "metrics_count.h"

static void on_read(struct bufferevent *bev, void *arg);
static void on_write(struct bufferevent *bev, void *arg);
static void on_event(struct bufferevent *bev, short what, void *arg);
static void on_resume(evutil_socket_t fd, short what, void *arg);
static void on_handshake_timeout(evutil_socket_t fd, short what, void *arg);

static void
format_peer(int fd, const struct sockaddr *sa, int via_admin, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (via_admin || sa == NULL || sa->sa_family == AF_UNIX) {
        struct ucred cred;
        socklen_t cl = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
            snprintf(out, len, "unix:uid=%u,pid=%d", (unsigned)cred.uid, (int)cred.pid);
        else
            snprintf(out, len, "unix");
        return;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(out, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(out, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(out, len, "?");
    }
}

static void
frame_limits(const struct conn *c, struct ipuof_frame_limits *lim)
{
    const struct cfg *cfg = &c->srv->cfg;

    ipuof_frame_limits_default(lim);
    if (c->hello_done) {
        lim->max_header = cfg->max_header_bytes;
        lim->max_payload = cfg->max_payload_bytes;
    } else {
        lim->max_header = cfg->prehello_max_bytes - IPUOF_FRAME_HEAD_LEN;
        lim->max_payload = 0;
    }
}

static void
set_read_watermark(struct conn *c)
{
    struct ipuof_frame_limits lim;

    frame_limits(c, &lim);
    /* A header must fit whole; payloads stream through in pieces of up to 4 MiB. While a
     * payload arrives every byte counts: its last few may be fewer than a frame head. */
    bufferevent_setwatermark(c->bev, EV_READ, c->payload_left > 0 ? 1 : IPUOF_FRAME_HEAD_LEN,
                             IPUOF_FRAME_HEAD_LEN + (size_t)lim.max_header + (4u << 20));
}

struct conn *
conn_new(struct srv *s, int fd, const struct sockaddr *sa, int salen, int via_admin_socket)
{
    struct bufferevent *bev;
    char peer[64];
    int one = 1;

    (void)salen;
    format_peer(fd, sa, via_admin_socket, peer, sizeof peer);
    if (!via_admin_socket)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        log_error("out of memory accepting a connection");
        close(fd);
        return NULL;
    }
    return conn_new_bev(s, bev, peer, via_admin_socket);
}

struct conn *
conn_new_bev(struct srv *s, struct bufferevent *bev, const char *peer, int via_admin_socket)
{
    struct conn *c = calloc(1, sizeof *c);
    struct timeval hs = {.tv_sec = s->cfg.handshake_timeout};

    if (c == NULL)
        goto fail;
    c->srv = s;
    c->id = ++s->next_client_id;
    c->via_admin_socket = via_admin_socket;
    c->admin = via_admin_socket;
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    c->bev = bev;
    bev = NULL; /* owned by the connection now */
    c->handshake_timer = evtimer_new(s->base, on_handshake_timeout, c);
    c->resume = event_new(s->base, -1, 0, on_resume, c);
    if (c->handshake_timer == NULL || c->resume == NULL)
        goto fail;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    set_read_watermark(c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    evtimer_add(c->handshake_timer, &hs);
    c->next = s->conns;
    if (s->conns != NULL)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    s->nadmin += via_admin_socket != 0;
    log_debug("client %u connected from %s", c->id, c->peer);
    return c;

fail:
    log_error("out of memory accepting a connection");
    if (c != NULL) {
        if (c->handshake_timer)
            event_free(c->handshake_timer);
        if (c->resume)
            event_free(c->resume);
        if (c->bev)
            bufferevent_free(c->bev);
        free(c);
    }
    if (bev != NULL)
        bufferevent_free(bev);
    return NULL;
}

void
conn_free(struct conn *c)
{
    struct srv *s = c->srv;
    int released;

    if (c->payload_left > 0 && c->sink.abort != NULL)
        c->sink.abort(c, c->sink.arg);
    released = s->conn_hooks->gone(c);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->nconns--;
    s->nadmin -= c->via_admin_socket != 0;
    s->npod -= c->pod != 0;
    event_free(c->handshake_timer);
    event_free(c->resume);
    bufferevent_free(c->bev);
    free(c);
    if (released)
        s->conn_hooks->freed(s);
}

void
conn_kill(struct conn *c, const char *why)
{
    if (c->dead)
        return;
    log_debug("client %u (%s): closing: %s", c->id, c->peer, why);
    c->dead = 1;
    if (c->in_callback == 0)
        conn_free(c);
}

void
conn_close_after_write(struct conn *c)
{
    c->closing = 1;
    bufferevent_disable(c->bev, EV_READ);
    evtimer_del(c->handshake_timer);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        conn_kill(c, "closed after reply");
}

int
conn_send(struct conn *c, const Ipuof__Header *h, const void *payload, uint32_t payload_len)
{
    struct conn_iov iov = {payload, payload_len};

    return conn_sendv(c, h, &iov, payload_len > 0 ? 1 : 0);
}

/* Queues the packed header of a frame of h with payload_len bytes after it. 0, or -1 with c
 * killed. */
static int
queue_header(struct conn *c, const Ipuof__Header *h, uint64_t payload_len)
{
    uint8_t *buf;
    size_t len;
    int rc;

    if (payload_len > UINT32_MAX ||
        ipuof_frame_pack(h, (uint32_t)payload_len, &buf, &len) != IPUOF_OK) {
        conn_kill(c, "cannot pack a reply");
        return -1;
    }
    rc = evbuffer_add(bufferevent_get_output(c->bev), buf, len);
    free(buf);
    if (rc < 0) {
        conn_kill(c, "out of memory queueing a reply");
        return -1;
    }
    metrics_bytes(c->srv->metrics, 0, len + payload_len);
    return 0;
}

/* After a frame was queued: drops c when its output is over max_output_bytes. 0 or -1. */
static int
check_output(struct conn *c)
{
    size_t queued = evbuffer_get_length(bufferevent_get_output(c->bev));

    if (queued <= c->srv->cfg.max_output_bytes)
        return 0;
    log_warn("client %u (%s): %zu bytes of output queued, over max_output_bytes %llu: "
             "the client is not reading; disconnecting it", c->id, c->peer, queued,
             (unsigned long long)c->srv->cfg.max_output_bytes);
    conn_kill(c, "output limit");
    return -1;
}

int
conn_sendv(struct conn *c, const Ipuof__Header *h, const struct conn_iov *iov, int n)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    uint64_t payload_len = 0;

    if (c->dead)
        return -1;
    for (int i = 0; i < n; i++)
        payload_len += iov[i].len;
    if (queue_header(c, h, payload_len) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (iov[i].len > 0 && evbuffer_add(out, iov[i].base, iov[i].len) < 0) {
            conn_kill(c, "out of memory queueing a reply");
            return -1;
        }
    }
    return check_output(c);
}

int
conn_send_ref(struct conn *c, const Ipuof__Header *h, const void *data, size_t len,
              void (*cleanup)(const void *data, size_t len, void *arg), void *arg)
{
    if (c->dead || queue_header(c, h, len) < 0) {
        cleanup(data, len, arg);
        return -1;
    }
    if (evbuffer_add_reference(bufferevent_get_output(c->bev), data, len, cleanup, arg) < 0) {
        cleanup(data, len, arg);
        conn_kill(c, "out of memory queueing a reply");
        return -1;
    }
    return check_output(c);
}

size_t
conn_queued(const struct conn *c)
{
    return evbuffer_get_length(bufferevent_get_output(c->bev));
}

void
conn_send_error(struct conn *c, uint64_t req_id, int code, int error_class, int recovery,
                const char *component, const char *fmt, ...)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    e.code = (uint32_t)code;
    e.component = (char *)component;
    e.message = msg;
    e.error_class = (Ipuof__ErrorClass)wiremap_to_wire(&wiremap_error_class, error_class,
                                                       IPUOF__ERROR_CLASS__ERROR_CLASS_ERROR);
    e.recovery = (Ipuof__RecoveryAction)wiremap_to_wire(&wiremap_recovery, recovery,
                                                        IPUOF__RECOVERY_ACTION__RECOVERY_NONE);
    h.request_id = req_id;
    h.body_case = IPUOF__HEADER__BODY_ERROR;
    h.error = &e;
    log_debug("client %u: error %s: %s", c->id, ipuof_status_name(code), msg);
    metrics_error(c->srv->metrics, code);
    conn_send(c, &h, NULL, 0);
}

void
conn_apply_timeouts(struct conn *c)
{
    struct timeval idle = {.tv_sec = c->srv->cfg.idle_timeout};

    if (!c->hello_done)
        return; /* the handshake timer covers the time before the hello */
    bufferevent_set_timeouts(c->bev, c->srv->cfg.idle_timeout ? &idle : NULL, NULL);
}

void
conn_holder(const struct conn *c, struct dev_holder *h)
{
    memset(h, 0, sizeof *h);
    h->client_id = c->id;
    snprintf(h->name, sizeof h->name, "%s", c->name);
    h->pid = c->pid;
    snprintf(h->peer, sizeof h->peer, "%s", c->peer);
}

/* Answers a frame whose head or header is bad, then closes: the stream cannot be trusted. */
static void
frame_error(struct conn *c, int rc, const struct ipuof_frame_head *head, const char *msg)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    log_info("client %u (%s): dropping connection: %s", c->id, c->peer, msg);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (rc == IPUOF_E_VERSION)
        conn_send_error(c, 0, IPUOF_E_VERSION, 0, 0, "protocol",
                        "client speaks protocol version %u, ipuofd %s speaks version %u; use a "
                        "client library and daemon of the same protocol version",
                        head->version, IPUOF_VERSION_STR, IPUOF_PROTOCOL_VERSION);
    else
        conn_send_error(c, 0, rc, 0, 0, "protocol", "%s", msg);
    conn_close_after_write(c);
}

void
conn_set_sink(struct conn *c, const struct conn_sink *sink)
{
    c->sink = *sink;
    c->sink_idx = 0;
    c->sink_off = 0;
}

void
conn_hold_frames(struct conn *c)
{
    c->frames_held = 1;
}

void
conn_release_frames(struct conn *c)
{
    c->frames_held = 0;
    if (c->srv->stopping && !c->dead) {
        conn_close_after_write(c); /* the shutdown waited for this job's answer */
        return;
    }
    if (!c->dead && evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        event_active(c->resume, 0, 0);
}

/*
 * Receives payload bytes from the socket into the current sink segment without passing
 * through libevent's buffer. Returns the bytes received, 0 when none are waiting, or -1
 * when the connection ended (it is then being closed).
 */
static ssize_t
recv_direct(struct conn *c)
{
    size_t room = c->sink.seg_len[c->sink_idx] - c->sink_off;
    ssize_t n;

    if (bufferevent_getfd(c->bev) < 0)
        return 0; /* no socket (a pair): bytes come through the buffer */
    if (room > c->payload_left)
        room = (size_t)c->payload_left;
    if (c->tls) {
        /* Decrypted into the sink, record after record (tls_read.h). */
        char why[160];
        n = tls_read_direct(c->bev, c->sink.seg[c->sink_idx] + c->sink_off, room, why,
                            sizeof why);
        if (n == 0)
            return 0;
        if (n < 0) {
            conn_kill(c, why);
            return -1;
        }
    } else {
        do {
            n = recv(bufferevent_getfd(c->bev), c->sink.seg[c->sink_idx] + c->sink_off, room,
                     MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            conn_kill(c, n == 0 ? "peer closed during a payload"
                                : "socket error during a payload");
            return -1;
        }
    }
    c->sink_off += (size_t)n;
    c->payload_left -= (uint64_t)n;
    if (c->sink_off == c->sink.seg_len[c->sink_idx]) {
        c->sink_idx++;
        c->sink_off = 0;
    }
    return n;
}

/* True when the sink has a segment to fill (asking its refill() for more when the
 * current ones are full). */
static int
sink_has_room(struct conn *c)
{
    if (c->sink_idx < c->sink.nseg)
        return 1;
    if (c->sink.refill == NULL || c->sink.refill(c, &c->sink, c->sink.arg) < 0) {
        c->sink.refill = NULL;
        c->sink.nseg = 0;
        c->sink_idx = 0;
        return 0;
    }
    c->sink_idx = 0;
    c->sink_off = 0;
    return c->sink.nseg > 0;
}

/* Moves available payload bytes to the sink (or discards them); runs done() at the end. */
static void
read_payload(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    while (c->payload_left > 0) {
        size_t avail = evbuffer_get_length(in);
        size_t n;

        if (avail == 0) {
            /* What libevent has not read yet goes from the socket straight to the sink. */
            if (!sink_has_room(c) || recv_direct(c) <= 0)
                return;
            continue;
        }
        if (sink_has_room(c)) {
            size_t room = c->sink.seg_len[c->sink_idx] - c->sink_off;
            n = avail < room ? avail : room;
            if (n > c->payload_left)
                n = (size_t)c->payload_left;
            evbuffer_remove(in, c->sink.seg[c->sink_idx] + c->sink_off, n);
            c->sink_off += n;
            if (c->sink_off == c->sink.seg_len[c->sink_idx]) {
                c->sink_idx++;
                c->sink_off = 0;
            }
        } else {
            n = avail < c->payload_left ? avail : (size_t)c->payload_left;
            evbuffer_drain(in, n);
        }
        c->payload_left -= n;
    }
    if (c->sink.done != NULL) {
        void (*done)(struct conn *, void *) = c->sink.done;
        c->sink.done = NULL;
        done(c, c->sink.arg);
    }
}

/* Why a frame before the hello was refused by the pre-hello limits, as a sentence in err:
 * a payload (none may come before the hello), or a header over prehello_max_bytes. */
static void
prehello_error(const struct conn *c, const struct ipuof_frame_head *head, char *err,
               size_t len)
{
    unsigned limit = c->srv->cfg.prehello_max_bytes;

    if ((uint64_t)head->header_len + IPUOF_FRAME_HEAD_LEN > limit)
        snprintf(err, len, "a frame header of %u bytes before the hello is over the pre-hello "
                 "limit of %u bytes with the %d-byte frame head ([server] "
                 "prehello_max_bytes); send a hello first", head->header_len, limit,
                 IPUOF_FRAME_HEAD_LEN);
    else
        snprintf(err, len, "a frame before the hello carries %u payload bytes; no frame may "
                 "carry a payload before the hello: send a hello (without payload) first",
                 head->payload_len);
}

/* Handles up to frames_per_read whole frames from the input buffer. */
static void
process_input(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    unsigned budget = c->srv->cfg.frames_per_read;
    unsigned handled = 0;

    while (!c->dead && !c->closing) {
        uint8_t headbuf[IPUOF_FRAME_HEAD_LEN];

        if (c->payload_left > 0) {
            read_payload(c);
            /* Bytes OpenSSL decrypted past what the sink took (the next frame) go to the
             * input buffer: the drained socket would not wake libevent for them. */
            if (c->tls && !c->dead) {
                ssize_t moved = tls_pending_to_input(c->bev);
                if (moved < 0) {
                    conn_kill(c, "out of memory for decrypted input");
                    return;
                }
                if (moved > 0) {
                    /* a client that pipelines (tests/integ/test_tls_pipeline.sh looks for it) */
                    log_debug("client %u: %zd bytes decrypted past a payload moved to the "
                              "input", c->id, moved);
                    continue;
                }
            }
            if (c->payload_left > 0)
                return; /* wait for more bytes */
            continue;
        }
        if (c->frames_held)
            return; /* frames wait until the job in flight is answered */
        struct ipuof_frame_limits lim;
        struct ipuof_frame_head head;
        Ipuof__Header *h;
        size_t avail = evbuffer_get_length(in);
        char err[256];
        uint8_t *p;
        int rc;

        if (avail < IPUOF_FRAME_HEAD_LEN)
            return;
        if (handled == budget) {
            event_active(c->resume, 0, 0);
            return;
        }
        evbuffer_copyout(in, headbuf, sizeof headbuf);
        frame_limits(c, &lim);
        rc = ipuof_frame_head_decode(headbuf, sizeof headbuf, &lim, &head, err, sizeof err);
        if (rc != IPUOF_OK) {
            if (rc == IPUOF_E_TOO_LARGE && !c->hello_done)
                prehello_error(c, &head, err, sizeof err);
            frame_error(c, rc, &head, err);
            return;
        }
        if (avail < IPUOF_FRAME_HEAD_LEN + (size_t)head.header_len)
            return;
        p = evbuffer_pullup(in, IPUOF_FRAME_HEAD_LEN + (ssize_t)head.header_len);
        h = p ? ipuof_frame_header_unpack(p + IPUOF_FRAME_HEAD_LEN, head.header_len, &lim, err,
                                          sizeof err)
              : NULL;
        evbuffer_drain(in, IPUOF_FRAME_HEAD_LEN + (size_t)head.header_len);
        if (h == NULL) {
            frame_error(c, IPUOF_E_PROTO, &head, p ? err : "out of memory");
            return;
        }
        c->frames_in++;
        metrics_bytes(c->srv->metrics,
                      IPUOF_FRAME_HEAD_LEN + (uint64_t)head.header_len + head.payload_len, 0);
        handled++;
        memset(&c->sink, 0, sizeof c->sink);
        c->sink_idx = 0;
        c->sink_off = 0;
        c->payload_left = head.payload_len;
        c->payload_req = h->request_id;
        c->srv->conn_hooks->frame(c, h, head.payload_len);
        ipuof_frame_header_free(h);
        /* Its payload, if any, is read at the top of the loop, which also moves what
         * OpenSSL decrypted past it to the input: read here, a payload that arrived whole
         * left the next frames inside OpenSSL, unseen until the socket had more bytes. */
    }
}

void
conn_enter(struct conn *c)
{
    c->in_callback++;
}

void
conn_leave(struct conn *c)
{
    if (--c->in_callback == 0 && c->dead)
        conn_free(c);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    conn_enter(c);
    process_input(c);
    if (!c->dead)
        set_read_watermark(c); /* the hello may have raised the limits */
    conn_leave(c);
}

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    on_read(((struct conn *)arg)->bev, arg);
}

static void
on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    if (c->closing && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        conn_kill(c, "closed after reply");
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    conn_enter(c);
    if (what & BEV_EVENT_TIMEOUT) {
        if (c->frames_held || c->srv->conn_hooks->holds(c)) {
            /* Holding IPUs, waiting for them, or for its compile or run is not idleness:
             * only a client that holds nothing is closed. */
            bufferevent_enable(c->bev, EV_READ);
        } else {
            log_info("client %u (%s): idle for %u s (idle_timeout); closing", c->id, c->peer,
                     c->srv->cfg.idle_timeout);
            conn_send_error(c, 0, IPUOF_E_TIMEOUT, 0, 0, "daemon",
                            "connection idle for %u seconds (idle_timeout); closing it",
                            c->srv->cfg.idle_timeout);
            conn_close_after_write(c);
        }
    } else if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        conn_kill(c, (what & BEV_EVENT_EOF) ? "peer closed" : "socket error");
    }
    conn_leave(c);
}

static void
on_handshake_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    if (c->hello_done)
        return;
    conn_enter(c);
    log_info("client %u (%s): no hello within %u s (handshake_timeout); closing", c->id,
             c->peer, c->srv->cfg.handshake_timeout);
    conn_send_error(c, 0, IPUOF_E_TIMEOUT, 0, 0, "protocol",
                    "no hello within %u seconds of connecting (handshake_timeout)",
                    c->srv->cfg.handshake_timeout);
    conn_close_after_write(c);
    conn_leave(c);
}
