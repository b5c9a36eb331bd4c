/*
 * conn.c — the client's socket: connecting (TCP or AF_UNIX) under a deadline, and frame
 * I/O on top of the codec in proto/frame.c.
 *
 * The socket stays blocking; every wait goes through poll() against the call's deadline
 * and every send/recv uses MSG_DONTWAIT, so a call never blocks past its timeout. Sends
 * use MSG_NOSIGNAL: a daemon that went away is an IPUOF_E_IO, never a SIGPIPE in the host
 * application. EINTR is retried. A request payload goes out with sendmsg() straight from
 * the caller's buffer; a reply payload is read straight into the caller's buffer or, when
 * nobody asked for it, discarded in bounded chunks. Every length is checked by the codec
 * against the handle's limits before anything is allocated.
 *
 * After a failure in the middle of an exchange (I/O error, timeout, bad frame) the stream
 * can no longer be trusted, so the connection is closed; later calls get IPUOF_E_CLOSED.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"

#define DISCARD_CHUNK 4096
#define MAX_IDLE_FRAMES 64 /* frames read by one ipuof_conn_poll_notices() */

/* One exchange's context: the handle, its deadline, and what it is for the messages. */
struct io {
    ipuof_client *c;
    int64_t deadline;   /* CLOCK_MONOTONIC ms; -1: none */
    int timeout_ms;     /* as given, for messages */
    const char *what;   /* "the status request", "connecting" */
};

/* strerror() may share a buffer between threads; the GNU strerror_r() writes to ours. */
#define ERRTEXT(e) strerror_r((e), (char[128]){0}, 128)

/* CLOCK_MONOTONIC in milliseconds: deadlines do not move with the wall clock. */
static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts an exchange: the deadline is timeout_ms from now (0: none); what is borrowed
 * for the messages and must outlive io. */
static void
io_init(struct io *io, ipuof_client *c, int timeout_ms, const char *what)
{
    io->c = c;
    io->timeout_ms = timeout_ms;
    io->deadline = timeout_ms > 0 ? now_ms() + timeout_ms : -1;
    io->what = what;
}

/* Milliseconds left before the deadline for poll(): -1 without one, 0 when it passed. */
static int
io_left(const struct io *io)
{
    int64_t left;

    if (io->deadline < 0)
        return -1;
    left = io->deadline - now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Records the timeout of io on its handle and returns IPUOF_E_TIMEOUT. */
static int
io_timeout(struct io *io)
{
    return ipuof_err_set(io->c, IPUOF_E_TIMEOUT, "connection",
                         "ipuofd at %s did not answer %s within %d ms", io->c->address,
                         io->what, io->timeout_ms);
}

/* Waits until fd is ready for events or the deadline passes. */
static int
io_wait(struct io *io, int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};

    for (;;) {
        int left = io_left(io);
        int n;

        if (left == 0)
            return io_timeout(io);
        n = poll(&p, 1, left);
        if (n > 0)
            return IPUOF_OK; /* POLLERR/POLLHUP included: the next send/recv says what */
        if (n == 0)
            return io_timeout(io);
        if (errno != EINTR)
            return ipuof_err_set(io->c, IPUOF_E_IO, "connection", "poll on the connection to "
                                 "ipuofd at %s failed: %s", io->c->address, ERRTEXT(errno));
    }
}

/* ---- connecting ------------------------------------------------------------------------ */

/* Connects a new socket to sa within io's deadline. Returns the blocking fd, or -1 with
 * *rc and errno (for IPUOF_E_IO) set; a timeout leaves its sentence on the handle. */
static int
connect_one(struct io *io, int family, const struct sockaddr *sa, socklen_t salen, int *rc)
{
    int fd = -1;
    int soerr = 0;
    socklen_t soerrlen = sizeof soerr;
    int flags;
    int one = 1;

    *rc = IPUOF_E_IO;
    fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    if (connect(fd, sa, salen) != 0) {
        if (errno != EINPROGRESS && errno != EINTR)
            goto fail;
        *rc = io_wait(io, fd, POLLOUT);
        if (*rc != IPUOF_OK)
            goto fail;
        *rc = IPUOF_E_IO;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &soerrlen) != 0)
            goto fail;
        if (soerr != 0) {
            errno = soerr;
            goto fail;
        }
    }
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        goto fail;
    if (family != AF_UNIX)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *rc = IPUOF_OK;
    return fd;
fail:
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return -1;
}

/* A static hint to add after the reason a connect failed with errno err, or "". */
static const char *
connect_hint(int err)
{
    if (err == ECONNREFUSED || err == ENOENT)
        return " (is ipuofd running and listening there?)";
    return "";
}

int
ipuof_conn_open(ipuof_client *c, const struct ipuof_addr *a)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    struct io io;
    int rc = IPUOF_E_IO;
    int last_errno = 0;
    int gai;

    ipuof_conn_close(c);
    io_init(&io, c, c->connect_ms, "the connection attempt");
    if (a->is_unix) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};

        memcpy(sun.sun_path, a->path, strlen(a->path) + 1);
        c->fd = connect_one(&io, AF_UNIX, (const struct sockaddr *)&sun, sizeof sun, &rc);
        last_errno = errno;
        goto out;
    }
    gai = getaddrinfo(a->host, a->port, &hints, &res);
    if (gai != 0) {
        if (gai == EAI_MEMORY)
            return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory resolving %s",
                                 a->host);
        return ipuof_err_set(c, IPUOF_E_IO, "connection",
                             "cannot resolve the host of ipuofd at %s: %s", c->address,
                             gai == EAI_SYSTEM ? ERRTEXT(errno) : gai_strerror(gai));
    }
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        c->fd = connect_one(&io, ai->ai_family, ai->ai_addr, ai->ai_addrlen, &rc);
        last_errno = errno;
        if (c->fd >= 0 || rc == IPUOF_E_TIMEOUT)
            break;
    }
out:
    if (res != NULL)
        freeaddrinfo(res);
    if (c->fd >= 0)
        return IPUOF_OK;
    if (rc == IPUOF_E_TIMEOUT)
        return ipuof_err_set(c, IPUOF_E_TIMEOUT, "connection",
                             "connecting to ipuofd at %s timed out after %d ms", c->address,
                             c->connect_ms);
    if (rc == IPUOF_E_IO)
        return ipuof_err_set(c, IPUOF_E_IO, "connection", "cannot connect to ipuofd at %s: %s%s",
                             c->address, ERRTEXT(last_errno), connect_hint(last_errno));
    return rc;
}

void
ipuof_conn_close(ipuof_client *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->admin = 0;
    c->attached = 0;
    free(c->partition);
    c->partition = NULL;
}

/* ---- frame I/O ------------------------------------------------------------------------- */

/* Sends iov[0..iovcnt) completely; the iovec array is consumed (advanced in place). */
static int
send_all(struct io *io, struct iovec *iov, int iovcnt)
{
    int fd = io->c->fd;

    while (iovcnt > 0 && iov->iov_len == 0) {
        iov++;
        iovcnt--;
    }
    while (iovcnt > 0) {
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        size_t done;
        int rc;

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                rc = io_wait(io, fd, POLLOUT);
                if (rc != IPUOF_OK)
                    return rc;
                continue;
            }
            return ipuof_err_set(io->c, IPUOF_E_IO, "connection",
                                 "sending %s to ipuofd at %s failed: %s", io->what,
                                 io->c->address, ERRTEXT(errno));
        }
        done = (size_t)n;
        while (iovcnt > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return IPUOF_OK;
}

/* Reads exactly len bytes into buf. */
static int
recv_all(struct io *io, void *buf, size_t len)
{
    int fd = io->c->fd;
    size_t got = 0;

    while (got < len) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
        int rc;

        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0)
            return ipuof_err_set(io->c, IPUOF_E_CLOSED, "connection",
                                 "ipuofd at %s closed the connection during %s",
                                 io->c->address, io->what);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            rc = io_wait(io, fd, POLLIN);
            if (rc != IPUOF_OK)
                return rc;
            continue;
        }
        return ipuof_err_set(io->c, IPUOF_E_IO, "connection",
                             "reading from ipuofd at %s during %s failed: %s", io->c->address,
                             io->what, ERRTEXT(errno));
    }
    return IPUOF_OK;
}

/* Reads and drops len bytes, DISCARD_CHUNK at a time. */
static int
discard(struct io *io, size_t len)
{
    char chunk[DISCARD_CHUNK];

    while (len > 0) {
        size_t n = len < sizeof chunk ? len : sizeof chunk;
        int rc = recv_all(io, chunk, n);

        if (rc != IPUOF_OK)
            return rc;
        len -= n;
    }
    return IPUOF_OK;
}

/*
 * Reads one frame: the head, exactly header_len bytes of header, then exactly payload_len
 * bytes of payload. The payload goes into pin when the frame is the reply to reply_id (not a
 * notice) and pin->buf is set; otherwise it is discarded. *too_large is set when it did not
 * fit pin. On success *out is caller-owned (ipuof_frame_header_free()).
 */
static int
recv_frame(struct io *io, uint64_t reply_id, struct ipuof_payload_in *pin, int *too_large,
           Ipuof__Header **out)
{
    ipuof_client *c = io->c;
    uint8_t head_buf[IPUOF_FRAME_HEAD_LEN];
    struct ipuof_frame_head head;
    char err[256];
    uint8_t *hbuf = NULL;
    Ipuof__Header *h = NULL;
    int rc;

    *out = NULL;
    *too_large = 0;
    rc = recv_all(io, head_buf, sizeof head_buf);
    if (rc != IPUOF_OK)
        goto out;
    rc = ipuof_frame_head_decode(head_buf, sizeof head_buf, &c->lim, &head, err, sizeof err);
    if (rc == IPUOF_E_VERSION) {
        ipuof_err_set(c, rc, "protocol",
                      "ipuofd speaks protocol version %u, this library speaks version %u",
                      head.version, IPUOF_PROTOCOL_VERSION);
        goto out;
    }
    if (rc != IPUOF_OK) {
        ipuof_err_set(c, rc, "protocol", "bad frame from ipuofd at %s: %s", c->address, err);
        goto out;
    }
    hbuf = malloc(head.header_len);
    if (hbuf == NULL) {
        rc = ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                           "out of memory for a %u-byte frame header", head.header_len);
        goto out;
    }
    rc = recv_all(io, hbuf, head.header_len);
    if (rc != IPUOF_OK)
        goto out;
    h = ipuof_frame_header_unpack(hbuf, head.header_len, &c->lim, err, sizeof err);
    if (h == NULL) {
        rc = ipuof_err_set(c, IPUOF_E_PROTO, "protocol", "bad frame from ipuofd at %s: %s",
                           c->address, err);
        goto out;
    }
    if (pin != NULL && pin->buf != NULL && reply_id != 0 && h->request_id == reply_id &&
        h->body_case != IPUOF__HEADER__BODY_NOTICE) {
        pin->len = head.payload_len;
        if (head.payload_len <= pin->cap) {
            rc = recv_all(io, pin->buf, head.payload_len);
        } else {
            *too_large = 1;
            rc = discard(io, head.payload_len);
        }
    } else {
        rc = discard(io, head.payload_len);
    }
    if (rc != IPUOF_OK)
        goto out;
    *out = h;
    h = NULL;
out:
    free(hbuf);
    ipuof_frame_header_free(h);
    return rc;
}

/* Records a notice: the partition is gone, and its error waits for the next call that
 * needs the partition. */
static void
record_notice(ipuof_client *c, const Ipuof__Notice *n)
{
    if (n->error != NULL) {
        ipuof_err_from_wire(&c->notice, n->error);
    } else {
        c->notice.code = IPUOF_E_DEVICE_RESET;
        c->notice.error_class = IPUOF_ERROR_RECOVERABLE;
        c->notice.recovery = IPUOF_RECOVERY_REATTACH;
        snprintf(c->notice.component, sizeof c->notice.component, "daemon");
        snprintf(c->notice.msg, sizeof c->notice.msg,
                 "ipuofd took this connection's partition away; attach again");
    }
    c->notice_pending = 1;
    c->attached = 0;
    free(c->partition);
    c->partition = NULL;
}

/* A fresh request id for c: counts up from 1 and skips 0 when it wraps. */
static uint64_t
next_request_id(ipuof_client *c)
{
    c->last_request_id++;
    if (c->last_request_id == 0)
        c->last_request_id++;
    return c->last_request_id;
}

int
ipuof_conn_call(ipuof_client *c, Ipuof__Header *req, Ipuof__Header__BodyCase want,
                int timeout_ms, const struct ipuof_payload_out *pout,
                struct ipuof_payload_in *pin, Ipuof__Header **reply)
{
    char what[64];
    struct io io;
    uint8_t *frame = NULL;
    size_t frame_len = 0;
    uint32_t payload_len = pout != NULL ? pout->len : 0;
    Ipuof__Header *h = NULL;
    struct iovec iov[2];
    int broken = 0;
    int too_large = 0;
    int rc;

    *reply = NULL;
    rc = ipuof_require_connection(c);
    if (rc != IPUOF_OK)
        goto out;
    snprintf(what, sizeof what, "the %s request", ipuof_frame_body_name(req));
    io_init(&io, c, timeout_ms, what);
    req->request_id = next_request_id(c);
    rc = ipuof_frame_pack(req, payload_len, &frame, &frame_len);
    if (rc != IPUOF_OK) {
        ipuof_err_set(c, rc, "client", "cannot encode %s: %s", what, ipuof_strerror(rc));
        goto out;
    }
    if (c->peer_max_header != 0 && frame_len - IPUOF_FRAME_HEAD_LEN > c->peer_max_header) {
        rc = ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                           "%s is %zu bytes long; ipuofd accepts at most %u", what,
                           frame_len - IPUOF_FRAME_HEAD_LEN, c->peer_max_header);
        goto out;
    }
    if (c->peer_max_payload != 0 && payload_len > c->peer_max_payload) {
        rc = ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                           "the payload of %s is %u bytes; ipuofd accepts at most %llu per "
                           "frame, send it in chunks",
                           what, payload_len, (unsigned long long)c->peer_max_payload);
        goto out;
    }
    iov[0].iov_base = frame;
    iov[0].iov_len = frame_len;
    iov[1].iov_base = (void *)(pout != NULL ? pout->buf : NULL);
    iov[1].iov_len = payload_len;
    rc = send_all(&io, iov, 2);
    if (rc != IPUOF_OK) {
        broken = 1;
        if (rc == IPUOF_E_IO) {
            /* The daemon may have said why before closing (connection limit, shutdown). */
            struct ipuof_err_info sent = c->err;
            if (recv_frame(&io, 0, NULL, &too_large, &h) == IPUOF_OK &&
                h->body_case == IPUOF__HEADER__BODY_ERROR) {
                ipuof_err_from_wire(&c->err, h->error);
                rc = c->err.code;
            } else {
                rc = ipuof_err_report(c, &sent);
            }
        }
        goto out;
    }
    for (;;) {
        if (io_left(&io) == 0) {
            rc = io_timeout(&io); /* a stream of notices must not hold the call for ever */
            broken = 1;
            goto out;
        }
        rc = recv_frame(&io, req->request_id, pin, &too_large, &h);
        if (rc != IPUOF_OK) {
            broken = 1;
            goto out;
        }
        if (h->body_case != IPUOF__HEADER__BODY_NOTICE)
            break;
        record_notice(c, h->notice);
        ipuof_frame_header_free(h);
        h = NULL;
    }
    if (h->body_case == IPUOF__HEADER__BODY_ERROR &&
        (h->request_id == req->request_id || h->request_id == 0)) {
        /* Id 0: the daemon speaks about the connection itself and closes it. */
        ipuof_err_from_wire(&c->err, h->error);
        rc = c->err.code;
        broken = h->request_id == 0;
        goto out;
    }
    if (h->request_id != req->request_id) {
        rc = ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                           "ipuofd at %s sent an unexpected frame (%s) for request %llu while "
                           "request %llu (%s) was pending",
                           c->address, ipuof_frame_body_name(h),
                           (unsigned long long)h->request_id,
                           (unsigned long long)req->request_id, what);
        broken = 1;
        goto out;
    }
    if (h->body_case != want) {
        rc = ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                           "ipuofd at %s answered %s with an unexpected frame (%s)",
                           c->address, what, ipuof_frame_body_name(h));
        broken = 1;
        goto out;
    }
    if (too_large) {
        rc = ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                           "the reply to %s carries %zu payload bytes; the buffer holds %zu",
                           what, pin->len, pin->cap);
        goto out;
    }
    *reply = h;
    h = NULL;
out:
    if (broken && rc == IPUOF_E_CLOSED && c->notice_pending) {
        size_t n = strlen(c->err.msg);
        snprintf(c->err.msg + n, sizeof c->err.msg - n, "; before closing it said: %s",
                 c->notice.msg);
    }
    if (broken)
        ipuof_conn_close(c);
    free(frame);
    ipuof_frame_header_free(h);
    return rc;
}

int
ipuof_conn_poll_notices(ipuof_client *c)
{
    struct io io;
    Ipuof__Header *h = NULL;
    int too_large;
    int rc = IPUOF_OK;

    for (int i = 0; i < MAX_IDLE_FRAMES && c->fd >= 0; i++) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int n = poll(&p, 1, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        io_init(&io, c, c->request_ms, "a notice");
        rc = recv_frame(&io, 0, NULL, &too_large, &h);
        if (rc != IPUOF_OK)
            goto out;
        if (h->body_case == IPUOF__HEADER__BODY_NOTICE) {
            record_notice(c, h->notice);
        } else if (h->body_case == IPUOF__HEADER__BODY_ERROR && h->request_id == 0) {
            ipuof_err_from_wire(&c->err, h->error);
            rc = c->err.code;
            goto out;
        } else {
            rc = ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                               "ipuofd at %s sent an unexpected frame (%s) for request %llu while "
                               "no request was pending",
                               c->address, ipuof_frame_body_name(h),
                               (unsigned long long)h->request_id);
            goto out;
        }
        ipuof_frame_header_free(h);
        h = NULL;
    }
out:
    if (rc != IPUOF_OK)
        ipuof_conn_close(c);
    ipuof_frame_header_free(h);
    return rc;
}
