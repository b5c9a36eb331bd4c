/*
 * conn.c — the client's socket: connecting (TCP or AF_UNIX) under a deadline, and raw
 * frame I/O on top of the codec in proto/frame.c. Requests and their replies (ids, notices,
 * errors) are xchg.c's job.
 *
 * The socket stays blocking; every wait goes through poll() against the call's deadline
 * and every send/recv uses MSG_DONTWAIT, so a call never blocks past its timeout. Sends
 * use MSG_NOSIGNAL: a daemon that went away is an IPUOF_E_IO, never a SIGPIPE in the host
 * application. EINTR is retried. A request payload goes out with sendmsg() straight from
 * the caller's buffers; a reply payload is read straight into the buffers a sink chooses
 * once the header is known or, when nobody asked for it, discarded in bounded chunks. Every
 * length is checked by the codec against the handle's limits before anything is allocated.
 */
#include <errno.h>
#include <sys/stat.h>
#include <grp.h>
#include <pwd.h>
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

/* The iovecs one sendmsg() takes (IOV_MAX is at least 1024 on Linux). */
#define SEND_IOV_MAX 1024

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

static int io_wait(struct ipuof_io *io, int fd, short events);

void
ipuof_io_init(struct ipuof_io *io, ipuof_client *c, int timeout_ms, const char *what)
{
    io->c = c;
    io->wait = io_wait;
    io->timeout_ms = timeout_ms;
    io->what = what;
    ipuof_io_rearm(io);
}

void
ipuof_io_rearm(struct ipuof_io *io)
{
    io->deadline = io->timeout_ms > 0 ? now_ms() + io->timeout_ms : -1;
}

int
ipuof_io_left(const struct ipuof_io *io)
{
    int64_t left;

    if (io->deadline < 0)
        return -1;
    left = io->deadline - now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

int
ipuof_io_timeout(struct ipuof_io *io)
{
    return ipuof_err_set(io->c, IPUOF_E_TIMEOUT, "connection",
                         "ipuofd at %s did not answer %s within %d ms", io->c->address,
                         io->what, io->timeout_ms);
}

/*
 * True when the daemon at c's address answers a health request on a connection of its
 * own within c's connect timeout (its event loop answers while workers compile or run).
 * A refusal, no answer, or a close without an answer means it is gone, stopped, hung or
 * unreachable; any frame back, even an error, means it is alive. Out of memory: assumed
 * alive. The probe stays on this level (a bare handle, one frame each way) so that the
 * socket does not call back up into the handle or the requests (no call circle).
 */
static int
daemon_answers(ipuof_client *c)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__HealthRequest hq = IPUOF__HEALTH_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    ipuof_client *p = calloc(1, sizeof *p);
    struct ipuof_addr a;
    struct ipuof_io io;
    struct iovec iov;
    uint8_t *frame = NULL;
    size_t frame_len = 0;
    int sink_rc;
    int rc;

    if (p == NULL)
        return 1;
    p->fd = -1;
    p->connect_ms = p->request_ms = c->connect_ms;
    p->lim = c->lim;
    memcpy(p->address, c->address, sizeof p->address);
    rc = ipuof_addr_parse(c->address, &a, NULL, 0);
    if (rc == IPUOF_OK)
        rc = ipuof_conn_open(p, &a);
    req.request_id = 1;
    req.body_case = IPUOF__HEADER__BODY_HEALTH;
    req.health = &hq;
    if (rc == IPUOF_OK && ipuof_frame_pack(&req, 0, &frame, &frame_len) != IPUOF_OK)
        rc = IPUOF_E_NOMEM; /* assumed alive, as when the handle cannot be made */
    ipuof_io_init(&io, p, p->request_ms, "a health request");
    iov = (struct iovec){.iov_base = frame, .iov_len = frame_len};
    if (rc == IPUOF_OK)
        rc = ipuof_io_send(&io, &iov, 1);
    if (rc == IPUOF_OK)
        rc = ipuof_io_recv_frame(&io, req.request_id, NULL, &sink_rc, &reply);
    ipuof_frame_header_free(reply);
    free(frame);
    ipuof_conn_close(p);
    free(p);
    return rc != IPUOF_E_IO && rc != IPUOF_E_TIMEOUT && rc != IPUOF_E_CLOSED;
}

/*
 * Waits until fd is ready for events or the deadline passes. A wait longer than the
 * connect timeout is cut into stretches of that length: after each silent stretch the
 * daemon is asked on a second connection whether it is alive (daemon_answers), so a
 * daemon that was stopped, hangs or became unreachable is reported after about twice the
 * connect timeout instead of at the end of a long request timeout. A connect timeout of 0
 * turns this off.
 */
static int
io_wait(struct ipuof_io *io, int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    int every = io->c->connect_ms;

    for (;;) {
        int left = ipuof_io_left(io);
        int slice = left;
        int n;

        if (left == 0)
            return ipuof_io_timeout(io);
        if (every > 0 && (left < 0 || left > every))
            slice = every;
        n = poll(&p, 1, slice);
        if (n > 0)
            return IPUOF_OK; /* POLLERR/POLLHUP included: the next send/recv says what */
        if (n == 0 && slice != left) {
            if (daemon_answers(io->c))
                continue;
            return ipuof_err_set(io->c, IPUOF_E_CLOSED, "connection",
                                 "ipuofd at %s stopped answering during %s: nothing came "
                                 "for %d ms and a health probe on a new connection got no "
                                 "answer within %d ms (the daemon was stopped, hangs, or "
                                 "is unreachable)", io->c->address, io->what, every, every);
        }
        if (n == 0)
            return ipuof_io_timeout(io);
        if (errno != EINTR)
            return ipuof_err_set(io->c, IPUOF_E_IO, "connection", "poll on the connection to "
                                 "ipuofd at %s failed: %s", io->c->address, ERRTEXT(errno));
    }
}

/* ---- connecting ------------------------------------------------------------------------ */

/* Connects a new socket to sa within io's deadline. Returns the blocking fd, or -1 with
 * *rc and errno (for IPUOF_E_IO) set; a timeout leaves its sentence on the handle. */
static int
connect_one(struct ipuof_io *io, int family, const struct sockaddr *sa, socklen_t salen, int *rc)
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

/*
 * A Unix socket this process may not open: its file permissions decide who may use it (the
 * admin socket is how ipuofd grants admin rights), so the sentence says who may, from the
 * socket's owner, group and mode. Returns IPUOF_E_AUTH.
 */
static int
unix_denied(ipuof_client *c, const char *path, int err)
{
    struct stat st;
    char who[512] = "";

    if (stat(path, &st) == 0) {
        struct passwd *pw = getpwuid(st.st_uid);
        struct group *gr = getgrgid(st.st_gid);
        char user[64], group[64];

        if (pw != NULL)
            snprintf(user, sizeof user, "%s", pw->pw_name);
        else
            snprintf(user, sizeof user, "uid %u", (unsigned)st.st_uid);
        if (gr != NULL)
            snprintf(group, sizeof group, "%s", gr->gr_name);
        else
            snprintf(group, sizeof group, "gid %u", (unsigned)st.st_gid);
        snprintf(who, sizeof who, "; it is owned by %s, group %s, mode %04o: run as %s%s%s",
                 user, group, (unsigned)(st.st_mode & 07777), user,
                 (st.st_mode & 0060) == 0060 ? " or a member of group " : "",
                 (st.st_mode & 0060) == 0060 ? group : "");
    }
    return ipuof_err_set(c, IPUOF_E_AUTH, "connection",
                         "may not use ipuofd's socket %s: %s%s (or connect over TCP with an "
                         "admin token)", path, ERRTEXT(err), who);
}

int
ipuof_conn_open(ipuof_client *c, const struct ipuof_addr *a)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    struct ipuof_io io;
    int rc = IPUOF_E_IO;
    int last_errno = 0;
    int gai;

    ipuof_conn_close(c);
    ipuof_io_init(&io, c, c->connect_ms, "the connection attempt");
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
    if (c->fd >= 0) {
        c->conn_gen++; /* models compiled on an earlier connection are gone */
        rc = a->is_unix ? IPUOF_OK : ipuof_tls_open(c, &io, a->host);
        if (rc != IPUOF_OK) {
            struct ipuof_err_info saved = c->err;
            ipuof_conn_close(c);
            c->err = saved;
        }
        return rc;
    }
    if (rc == IPUOF_E_TIMEOUT)
        return ipuof_err_set(c, IPUOF_E_TIMEOUT, "connection",
                             "connecting to ipuofd at %s timed out after %d ms", c->address,
                             c->connect_ms);
    if (rc == IPUOF_E_IO && a->is_unix && (last_errno == EACCES || last_errno == EPERM))
        return unix_denied(c, a->path, last_errno);
    if (rc == IPUOF_E_IO)
        return ipuof_err_set(c, IPUOF_E_IO, "connection", "cannot connect to ipuofd at %s: %s%s",
                             c->address, ERRTEXT(last_errno), connect_hint(last_errno));
    return rc;
}

void
ipuof_conn_close(ipuof_client *c)
{
    ipuof_tls_close(c);
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

int
ipuof_io_send(struct ipuof_io *io, struct iovec *iov, int iovcnt)
{
    int fd = io->c->fd;

    if (io->c->tls != NULL)
        return ipuof_tls_send(io, iov, iovcnt);
    while (iovcnt > 0 && iov->iov_len == 0) {
        iov++;
        iovcnt--;
    }
    while (iovcnt > 0) {
        struct msghdr msg = {.msg_iov = iov,
                             .msg_iovlen = (size_t)(iovcnt < SEND_IOV_MAX ? iovcnt
                                                                          : SEND_IOV_MAX)};
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
recv_all(struct ipuof_io *io, void *buf, size_t len)
{
    int fd = io->c->fd;
    size_t got = 0;

    if (io->c->tls != NULL)
        return ipuof_tls_recv(io, buf, len);
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
discard(struct ipuof_io *io, size_t len)
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

/* Reads a payload of len bytes where sink puts it (a frame answering reply_id) or drops
 * it; *sink_rc receives place()'s verdict. */
static int
recv_payload(struct ipuof_io *io, const Ipuof__Header *h, uint32_t len,
             const struct ipuof_sink *sink, int *sink_rc)
{
    struct iovec *iov = NULL;
    int iovcnt = 0;
    size_t total = 0;
    int rc;

    *sink_rc = sink->place(sink->arg, io->c, io->what, h, len, &iov, &iovcnt);
    if (*sink_rc != IPUOF_OK || iovcnt == 0)
        return discard(io, len);
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total != len) {
        *sink_rc = ipuof_err_set(io->c, IPUOF_E_INTERNAL, "client",
                                 "the buffers for the reply to %s hold %zu bytes, not the %u "
                                 "of its payload",
                                 io->what, total, len);
        return discard(io, len);
    }
    for (int i = 0; i < iovcnt; i++) {
        rc = recv_all(io, iov[i].iov_base, iov[i].iov_len);
        if (rc != IPUOF_OK)
            return rc;
    }
    return IPUOF_OK;
}

int
ipuof_io_recv_frame(struct ipuof_io *io, uint64_t reply_id, const struct ipuof_sink *sink,
                    int *sink_rc, Ipuof__Header **out)
{
    ipuof_client *c = io->c;
    uint8_t head_buf[IPUOF_FRAME_HEAD_LEN];
    struct ipuof_frame_head head;
    char err[256];
    uint8_t *hbuf = NULL;
    Ipuof__Header *h = NULL;
    int rc;

    *out = NULL;
    *sink_rc = IPUOF_OK;
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
    if (sink != NULL && reply_id != 0 && h->request_id == reply_id &&
        h->body_case != IPUOF__HEADER__BODY_NOTICE && h->body_case != IPUOF__HEADER__BODY_ERROR)
        rc = recv_payload(io, h, head.payload_len, sink, sink_rc);
    else
        rc = discard(io, head.payload_len);
    if (rc != IPUOF_OK)
        goto out;
    *out = h;
    h = NULL;
out:
    free(hbuf);
    ipuof_frame_header_free(h);
    return rc;
}
