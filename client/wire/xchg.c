/*
 * xchg.c — requests and the frames that answer them: request ids, follow-up frames with
 * the same id (model chunks), replies and Errors, notices that arrive in between, and the
 * one-request-one-reply call most requests use.
 *
 * Frames travel through conn.c. A notice (the partition was reset, the daemon is shutting
 * down) may arrive before any reply; it is recorded on the handle and the exchange goes on.
 * After a failure in the middle of an exchange (I/O error, timeout, bad frame, a reply that
 * is not the one expected) the stream can no longer be trusted, so the connection is
 * closed; later calls get IPUOF_E_CLOSED. An Error from the daemon, or a reply payload the
 * caller refused, leaves the stream in step and the connection open.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

#define MAX_IDLE_FRAMES 64 /* frames read by one ipuof_conn_poll_notices() */
#define SEND_STACK_IOV 8   /* payload pieces sent without allocating an iovec array */

/* Records a notice: the partition is gone, and its error waits for the next call that
 * needs the partition. n is only read. */
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

/* 1 when h is a late Error about an upload the daemon already refused (it answers each
 * chunk that was on the way): nobody waits for it, so it is dropped. */
static int
stale_error(const ipuof_client *c, const Ipuof__Header *h)
{
    return h->body_case == IPUOF__HEADER__BODY_ERROR && c->abandoned_id != 0 &&
           h->request_id == c->abandoned_id;
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
ipuof_xchg_begin(ipuof_client *c, struct ipuof_xchg *x, Ipuof__Header *req, int timeout_ms)
{
    memset(x, 0, sizeof *x);
    snprintf(x->what, sizeof x->what, "the %s request", ipuof_frame_body_name(req));
    ipuof_io_init(&x->io, c, timeout_ms, x->what);
    if (c->fd < 0)
        return ipuof_require_connection(c);
    x->id = next_request_id(c);
    req->request_id = x->id;
    return IPUOF_OK;
}

/* After a send failed with IPUOF_E_IO: the daemon may have said why before closing
 * (connection limit, shutdown). Returns its code with its Error on the handle, or rc with
 * the send's own sentence kept. */
static int
error_before_close(struct ipuof_xchg *x, int rc)
{
    ipuof_client *c = x->io.c;
    struct ipuof_err_info sent = c->err;
    Ipuof__Header *h = NULL;
    int sink_rc;

    if (ipuof_io_recv_frame(&x->io, 0, NULL, &sink_rc, &h) == IPUOF_OK &&
        h->body_case == IPUOF__HEADER__BODY_ERROR) {
        ipuof_err_from_wire(&c->err, h->error);
        rc = c->err.code;
    } else {
        rc = ipuof_err_report(c, &sent);
    }
    ipuof_frame_header_free(h);
    return rc;
}

int
ipuof_xchg_send(struct ipuof_xchg *x, const Ipuof__Header *h, const struct iovec *payload,
                int n)
{
    ipuof_client *c = x->io.c;
    struct iovec stack_iov[SEND_STACK_IOV + 1];
    struct iovec *iov = stack_iov;
    uint8_t *frame = NULL;
    size_t frame_len = 0;
    uint64_t payload_len = 0;
    int rc;

    for (int i = 0; i < n; i++)
        payload_len += payload[i].iov_len;
    if (payload_len > UINT32_MAX) {
        rc = ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                           "the payload of %s is %llu bytes; one frame carries less than 4 GiB",
                           x->what, (unsigned long long)payload_len);
        goto out;
    }
    rc = ipuof_frame_pack(h, (uint32_t)payload_len, &frame, &frame_len);
    if (rc != IPUOF_OK) {
        ipuof_err_set(c, rc, "client", "cannot encode %s: %s", x->what, ipuof_strerror(rc));
        goto out;
    }
    if (c->peer_max_header != 0 && frame_len - IPUOF_FRAME_HEAD_LEN > c->peer_max_header) {
        rc = ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                           "%s is %zu bytes long; ipuofd accepts at most %u", x->what,
                           frame_len - IPUOF_FRAME_HEAD_LEN, c->peer_max_header);
        goto out;
    }
    if (c->peer_max_payload != 0 && payload_len > c->peer_max_payload) {
        rc = ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                           "the payload of %s is %llu bytes; ipuofd accepts at most %llu per "
                           "frame, send it in chunks",
                           x->what, (unsigned long long)payload_len,
                           (unsigned long long)c->peer_max_payload);
        goto out;
    }
    if (n > SEND_STACK_IOV) {
        iov = malloc(((size_t)n + 1) * sizeof *iov);
        if (iov == NULL) {
            rc = ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                               "out of memory for the %d payload pieces of %s", n, x->what);
            goto out;
        }
    }
    iov[0].iov_base = frame;
    iov[0].iov_len = frame_len;
    if (n > 0)
        memcpy(iov + 1, payload, (size_t)n * sizeof *iov);
    rc = ipuof_io_send(&x->io, iov, n + 1);
    if (rc != IPUOF_OK) {
        x->broken = 1;
        if (rc == IPUOF_E_IO)
            rc = error_before_close(x, rc);
        goto out;
    }
    x->frames_sent++;
out:
    /* A later frame that cannot go out leaves the daemon waiting for the rest. */
    if (rc != IPUOF_OK && x->frames_sent > 0)
        x->broken = 1;
    if (iov != stack_iov)
        free(iov);
    free(frame);
    return rc;
}

/* 1 when a byte (or an end of stream) can be read from c's socket now. */
static int
readable_now(const ipuof_client *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int n;

    if (ipuof_tls_pending(c))
        return 1;
    do {
        n = poll(&p, 1, 0);
    } while (n < 0 && errno == EINTR);
    return n > 0;
}

int
ipuof_xchg_recv(struct ipuof_xchg *x, const struct ipuof_sink *sink, int nowait,
                Ipuof__Header **out)
{
    ipuof_client *c = x->io.c;
    Ipuof__Header *h = NULL;
    int sink_rc = IPUOF_OK;
    int rc;

    *out = NULL;
    if (c->fd < 0)
        return ipuof_require_connection(c);
    for (;;) {
        if (nowait && !readable_now(c))
            return IPUOF_OK;
        if (ipuof_io_left(&x->io) == 0) {
            rc = ipuof_io_timeout(&x->io); /* a stream of notices must not hold the call */
            x->broken = 1;
            goto out;
        }
        rc = ipuof_io_recv_frame(&x->io, x->id, sink, &sink_rc, &h);
        if (rc != IPUOF_OK) {
            x->broken = 1;
            goto out;
        }
        if (h->body_case != IPUOF__HEADER__BODY_NOTICE &&
            (h->request_id == x->id || !stale_error(c, h)))
            break;
        if (h->body_case == IPUOF__HEADER__BODY_NOTICE)
            record_notice(c, h->notice);
        ipuof_frame_header_free(h);
        h = NULL;
    }
    if (h->body_case == IPUOF__HEADER__BODY_ERROR &&
        (h->request_id == x->id || h->request_id == 0)) {
        /* Id 0: the daemon speaks about the connection itself and closes it. */
        ipuof_err_from_wire(&c->err, h->error);
        rc = c->err.code;
        x->broken = h->request_id == 0;
        goto out;
    }
    if (h->request_id != x->id) {
        rc = ipuof_err_set(c, IPUOF_E_PROTO, "protocol",
                           "ipuofd at %s sent an unexpected frame (%s) for request %llu while "
                           "request %llu (%s) was pending",
                           c->address, ipuof_frame_body_name(h),
                           (unsigned long long)h->request_id, (unsigned long long)x->id,
                           x->what);
        x->broken = 1;
        goto out;
    }
    rc = sink_rc;
    if (rc != IPUOF_OK)
        goto out;
    *out = h;
    h = NULL;
out:
    ipuof_frame_header_free(h);
    return rc;
}

int
ipuof_xchg_unexpected(struct ipuof_xchg *x, const Ipuof__Header *h)
{
    x->broken = 1;
    return ipuof_err_set(x->io.c, IPUOF_E_PROTO, "protocol",
                         "ipuofd at %s answered %s with an unexpected frame (%s)",
                         x->io.c->address, x->what, ipuof_frame_body_name(h));
}

int
ipuof_xchg_end(struct ipuof_xchg *x, int rc)
{
    ipuof_client *c = x->io.c;

    if (!x->broken)
        return rc;
    if (rc == IPUOF_E_CLOSED && c->notice_pending) {
        size_t n = strlen(c->err.msg);
        snprintf(c->err.msg + n, sizeof c->err.msg - n, "; before closing it said: %s",
                 c->notice.msg);
    }
    ipuof_conn_close(c);
    return rc;
}

/* ---- one request, one reply ----------------------------------------------------------- */

/* A struct ipuof_payload_in seen as a sink: one buffer, borrowed from the caller. */
struct buffer_sink {
    struct ipuof_payload_in *pin;
    struct iovec iov;
};

/* place() for a buffer_sink: the payload fits the buffer, or is refused with
 * IPUOF_E_TOO_LARGE; pin->len receives its length either way. */
static int
place_in_buffer(void *arg, ipuof_client *c, const char *what, const Ipuof__Header *h,
                uint32_t payload_len, struct iovec **iov, int *iovcnt)
{
    struct buffer_sink *bs = arg;

    (void)h;
    *iovcnt = 0;
    bs->pin->len = payload_len;
    if (bs->pin->buf == NULL)
        return IPUOF_OK;
    if (payload_len > bs->pin->cap)
        return ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                             "the reply to %s carries %u payload bytes; the buffer holds %zu",
                             what, payload_len, bs->pin->cap);
    bs->iov.iov_base = bs->pin->buf;
    bs->iov.iov_len = payload_len;
    *iov = &bs->iov;
    *iovcnt = 1;
    return IPUOF_OK;
}

int
ipuof_conn_call(ipuof_client *c, Ipuof__Header *req, Ipuof__Header__BodyCase want,
                int timeout_ms, const struct ipuof_payload_out *pout,
                struct ipuof_payload_in *pin, Ipuof__Header **reply)
{
    struct ipuof_xchg x;
    struct buffer_sink bs = {.pin = pin};
    struct ipuof_sink sink = {.place = place_in_buffer, .arg = &bs};
    struct iovec payload;
    Ipuof__Header *h = NULL;
    int rc;

    *reply = NULL;
    rc = ipuof_xchg_begin(c, &x, req, timeout_ms);
    if (rc != IPUOF_OK)
        goto out;
    if (pout != NULL) {
        payload.iov_base = (void *)pout->buf;
        payload.iov_len = pout->len;
    }
    rc = ipuof_xchg_send(&x, req, &payload, pout != NULL ? 1 : 0);
    if (rc != IPUOF_OK)
        goto out;
    rc = ipuof_xchg_recv(&x, pin != NULL ? &sink : NULL, 0, &h);
    if (rc != IPUOF_OK)
        goto out;
    if (h->body_case != want) {
        rc = ipuof_xchg_unexpected(&x, h);
        goto out;
    }
    *reply = h;
    h = NULL;
out:
    ipuof_frame_header_free(h);
    return ipuof_xchg_end(&x, rc);
}

int
ipuof_conn_poll_notices(ipuof_client *c)
{
    struct ipuof_io io;
    Ipuof__Header *h = NULL;
    int sink_rc;
    int rc = IPUOF_OK;

    for (int i = 0; i < MAX_IDLE_FRAMES && c->fd >= 0; i++) {
        if (!readable_now(c))
            break;
        ipuof_io_init(&io, c, c->request_ms, "a notice");
        rc = ipuof_io_recv_frame(&io, 0, NULL, &sink_rc, &h);
        if (rc != IPUOF_OK)
            goto out;
        if (h->body_case == IPUOF__HEADER__BODY_NOTICE) {
            record_notice(c, h->notice);
        } else if (stale_error(c, h)) {
            /* dropped */
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
