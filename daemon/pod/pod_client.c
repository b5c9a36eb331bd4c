/*
 * pod_client.c — see pod_client.h. poll() bounds every connect, write and read by one
 * deadline per call, so a peer that stops answering costs at most timeout_ms.
 */
#include "pod_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "errbuf.h"
#include "frame.h"
#include "ipuof/status.h"

struct pod_client {
    int fd;
    int cancel_fd;               /* readable once the caller cancels (or -1) */
    int answered;                /* the last call read a whole answer (reply or Error) */
    uint64_t next_id;
    char addr[256];
};

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events, cancel_fd (when >= 0) is readable, or the deadline
 * passes. 0, or a status code (IPUOF_E_CANCELLED for cancel_fd). */
static int
wait_fd(int fd, short events, int cancel_fd, uint64_t deadline)
{
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = cancel_fd, .events = POLLIN}};
    int rc;

    for (;;) {
        uint64_t now = now_ms();
        if (now >= deadline)
            return IPUOF_E_TIMEOUT;
        rc = poll(p, cancel_fd >= 0 ? 2 : 1, (int)(deadline - now));
        if (rc > 0 && cancel_fd >= 0 && (p[1].revents & POLLIN))
            return IPUOF_E_CANCELLED;
        if (rc > 0)
            return 0;
        if (rc == 0)
            return IPUOF_E_TIMEOUT;
        if (errno != EINTR)
            return IPUOF_E_IO;
    }
}

/* Writes buf[0..len) by the deadline. 0 or a status code. */
static int
write_all(int fd, const void *buf, size_t len, int cancel_fd, uint64_t deadline)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno == EPIPE || errno == ECONNRESET ? IPUOF_E_CLOSED : IPUOF_E_IO;
        int rc = wait_fd(fd, POLLOUT, cancel_fd, deadline);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Reads exactly len bytes into buf by the deadline. 0 or a status code. */
static int
read_all(int fd, void *buf, size_t len, int cancel_fd, uint64_t deadline)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return IPUOF_E_CLOSED;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno == ECONNRESET ? IPUOF_E_CLOSED : IPUOF_E_IO;
        int rc = wait_fd(fd, POLLIN, cancel_fd, deadline);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Splits "HOST:PORT" / "[V6]:PORT". 0 or -1. */
static int
split_addr(const char *in, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon;
    size_t n;

    if (in[0] == '[') {
        const char *end = strchr(in, ']');
        if (end == NULL || end[1] != ':')
            return -1;
        n = (size_t)(end - in - 1);
        in++;
        colon = end + 1;
    } else {
        colon = strrchr(in, ':');
        if (colon == NULL)
            return -1;
        n = (size_t)(colon - in);
    }
    if (n >= hlen || strlen(colon + 1) >= plen || colon[1] == '\0')
        return -1;
    memcpy(host, in, n);
    host[n] = '\0';
    snprintf(port, plen, "%s", colon + 1);
    return 0;
}

static const char *
what_of(int rc)
{
    switch (rc) {
    case IPUOF_E_TIMEOUT:
        return "did not answer in time";
    case IPUOF_E_CLOSED:
        return "closed the connection";
    case IPUOF_E_CANCELLED:
        return "was left (the call was cancelled)";
    default:
        return "broke the connection";
    }
}

/* Connects a non-blocking socket to addr by the deadline. The fd, or -1 with err. */
static int
connect_to(const char *addr, int cancel_fd, uint64_t deadline, int *code, char *err,
           size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char host[256], port[16];
    int fd = -1, rc, soerr = 0;
    socklen_t sl = sizeof soerr;

    *code = IPUOF_E_IO;
    if (split_addr(addr, host, sizeof host, port, sizeof port) < 0) {
        *code = IPUOF_E_INVAL;
        errbuf_set(err, errlen, "Pod address '%s' is not HOST:PORT", addr);
        return -1;
    }
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        errbuf_set(err, errlen, "cannot resolve Pod address %s: %s", addr, gai_strerror(rc));
        return -1;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        errbuf_set(err, errlen, "cannot make a socket for %s: %s", addr, strerror(errno));
        goto fail;
    }
    if (connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            errbuf_set(err, errlen, "cannot connect to %s: %s", addr, strerror(errno));
            goto fail;
        }
        rc = wait_fd(fd, POLLOUT, cancel_fd, deadline);
        if (rc != 0) {
            *code = rc;
            errbuf_set(err, errlen, "cannot connect to %s: %s", addr,
                       rc == IPUOF_E_TIMEOUT ? "no answer in time"
                       : rc == IPUOF_E_CANCELLED ? "cancelled" : strerror(errno));
            goto fail;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
            errbuf_set(err, errlen, "cannot connect to %s: %s", addr,
                       strerror(soerr ? soerr : errno));
            goto fail;
        }
    }
    freeaddrinfo(res);
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return -1;
}

int
pod_client_open(struct pod_client **out, const char *addr, const char *token,
                const char *self, int timeout_ms, char *err, size_t errlen)
{
    return pod_client_open_c(out, addr, token, self, timeout_ms, -1, err, errlen);
}

int
pod_client_open_c(struct pod_client **out, const char *addr, const char *token,
                  const char *self, int timeout_ms, int cancel_fd, char *err, size_t errlen)
{
    struct pod_client *pc = calloc(1, sizeof *pc);
    Ipuof__Header req = IPUOF__HEADER__INIT, *reply = NULL;
    Ipuof__Hello hi = IPUOF__HELLO__INIT;
    int code;

    *out = NULL;
    if (pc == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return IPUOF_E_NOMEM;
    }
    snprintf(pc->addr, sizeof pc->addr, "%s", addr);
    pc->next_id = 1;
    pc->cancel_fd = cancel_fd;
    pc->fd = connect_to(addr, cancel_fd, now_ms() + (uint64_t)timeout_ms, &code, err, errlen);
    if (pc->fd < 0)
        goto fail;
    hi.protocol_version = IPUOF_PROTOCOL_VERSION;
    hi.client_name = (char *)self;
    hi.pid = (uint32_t)getpid();
    hi.auth_token = (char *)token;
    req.body_case = IPUOF__HEADER__BODY_HELLO;
    req.hello = &hi;
    code = pod_client_call(pc, &req, NULL, 0, IPUOF__HEADER__BODY_HELLO_REPLY, &reply, NULL,
                           NULL, timeout_ms, err, errlen);
    ipuof_frame_header_free(reply);
    if (code != IPUOF_OK)
        goto fail;
    *out = pc;
    return IPUOF_OK;
fail:
    pod_client_close(pc);
    return code;
}

int
pod_client_call(struct pod_client *pc, Ipuof__Header *req, const void *payload,
                uint32_t plen, Ipuof__Header__BodyCase want, Ipuof__Header **reply,
                void **rpayload, uint32_t *rplen, int timeout_ms, char *err, size_t errlen)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head head = {0};
    uint8_t hb[IPUOF_FRAME_HEAD_LEN], *frame = NULL, *hdr = NULL, *pl = NULL;
    Ipuof__Header *h = NULL;
    size_t flen;
    int rc;

    *reply = NULL;
    pc->answered = 0;
    if (rpayload != NULL) {
        *rpayload = NULL;
        *rplen = 0;
    }
    ipuof_frame_limits_default(&lim);
    lim.max_payload = POD_CLIENT_MAX_PAYLOAD;
    req->request_id = pc->next_id++;
    rc = ipuof_frame_pack(req, plen, &frame, &flen);
    if (rc != IPUOF_OK) {
        errbuf_set(err, errlen, "cannot encode a %s request", ipuof_frame_body_name(req));
        goto out;
    }
    rc = write_all(pc->fd, frame, flen, pc->cancel_fd, deadline);
    if (rc == 0 && plen > 0)
        rc = write_all(pc->fd, payload, plen, pc->cancel_fd, deadline);
    if (rc != 0) {
        errbuf_set(err, errlen, "Pod peer %s %s while being sent a %s request", pc->addr,
                   what_of(rc), ipuof_frame_body_name(req));
        goto out;
    }
    /* Skips nothing: a Pod peer sends no unsolicited frame but an Error for this id. */
    rc = read_all(pc->fd, hb, sizeof hb, pc->cancel_fd, deadline);
    if (rc == 0) {
        rc = ipuof_frame_head_decode(hb, sizeof hb, &lim, &head, err, errlen);
        if (rc != IPUOF_OK)
            goto out;
        hdr = malloc(head.header_len);
        if (hdr == NULL) {
            rc = IPUOF_E_NOMEM;
            errbuf_set(err, errlen, "out of memory");
            goto out;
        }
        rc = read_all(pc->fd, hdr, head.header_len, pc->cancel_fd, deadline);
    }
    if (rc == 0 && head.payload_len > 0) {
        pl = malloc(head.payload_len);
        if (pl == NULL) {
            rc = IPUOF_E_NOMEM;
            errbuf_set(err, errlen, "out of memory for a %u-byte reply", head.payload_len);
            goto out;
        }
        rc = read_all(pc->fd, pl, head.payload_len, pc->cancel_fd, deadline);
    }
    if (rc != 0) {
        errbuf_set(err, errlen, "Pod peer %s %s while answering a %s request", pc->addr,
                   what_of(rc), ipuof_frame_body_name(req));
        goto out;
    }
    h = ipuof_frame_header_unpack(hdr, head.header_len, &lim, err, errlen);
    if (h == NULL) {
        rc = IPUOF_E_PROTO;
        goto out;
    }
    pc->answered = 1;
    if (h->body_case == IPUOF__HEADER__BODY_ERROR && h->error != NULL) {
        rc = h->error->code != 0 ? (int)h->error->code : IPUOF_E_INTERNAL;
        errbuf_set(err, errlen, "Pod peer %s: %s", pc->addr, h->error->message);
        goto out;
    }
    if (h->body_case != want || h->request_id != req->request_id) {
        rc = IPUOF_E_PROTO;
        errbuf_set(err, errlen, "Pod peer %s answered a %s request with %s (request %llu)",
                   pc->addr, ipuof_frame_body_name(req), ipuof_frame_body_name(h),
                   (unsigned long long)h->request_id);
        goto out;
    }
    *reply = h;
    h = NULL;
    if (rpayload != NULL) {
        *rpayload = pl;
        *rplen = head.payload_len;
        pl = NULL;
    }
    rc = IPUOF_OK;
out:
    ipuof_frame_header_free(h);
    free(frame);
    free(hdr);
    free(pl);
    return rc;
}

int
pod_client_answered(const struct pod_client *pc)
{
    return pc->answered;
}

const char *
pod_client_addr(const struct pod_client *pc)
{
    return pc->addr;
}

void
pod_client_close(struct pod_client *pc)
{
    if (pc == NULL)
        return;
    if (pc->fd >= 0)
        close(pc->fd);
    free(pc);
}
