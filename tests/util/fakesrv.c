/*
 * fakesrv.c — a fake ipuofd for the unit tests of libipuof-client (see fakesrv.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fakesrv.h"
#include "frame.h"

void
fake_fail(struct fake *f, const char *why)
{
    if (!f->failed)
        snprintf(f->why, sizeof f->why, "%s", why);
    f->failed = 1;
}

/* Reads exactly len bytes; -1 at end of stream or on an error. */
static int
fs_read_all(int fd, void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return -1;
    }
    return 0;
}

int
fs_write_all(int fd, const void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return -1;
    }
    return 0;
}

Ipuof__Header *
fs_read(struct fake *f, int fd, int eof_ok)
{
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head head;
    uint8_t hb[IPUOF_FRAME_HEAD_LEN];
    uint8_t *buf = NULL;
    Ipuof__Header *h = NULL;

    ipuof_frame_limits_default(&lim);
    if (fs_read_all(fd, hb, sizeof hb) != 0) {
        if (!eof_ok)
            fake_fail(f, "server: end of stream before a frame head");
        goto out;
    }
    if (ipuof_frame_head_decode(hb, sizeof hb, &lim, &head, NULL, 0) != IPUOF_OK) {
        fake_fail(f, "server: bad frame head from the client");
        goto out;
    }
    buf = malloc(head.header_len);
    if (buf == NULL || fs_read_all(fd, buf, head.header_len) != 0) {
        fake_fail(f, "server: short header");
        goto out;
    }
    h = ipuof_frame_header_unpack(buf, head.header_len, &lim, NULL, 0);
    if (h == NULL) {
        fake_fail(f, "server: bad header");
        goto out;
    }
    free(f->payload);
    f->header_len = head.header_len;
    f->payload = malloc(head.payload_len + 1);
    f->payload_len = head.payload_len;
    if (f->payload == NULL || fs_read_all(fd, f->payload, head.payload_len) != 0) {
        fake_fail(f, "server: short payload");
        ipuof_frame_header_free(h);
        h = NULL;
        goto out;
    }
    if (h->request_id == 0)
        fake_fail(f, "server: request id 0");
    else if (h->body_case == IPUOF__HEADER__BODY_MODEL_CHUNK ? h->request_id < f->last_id
                                                             : h->request_id <= f->last_id)
        fake_fail(f, "server: request id not fresh");
    f->last_id = h->request_id;
out:
    free(buf);
    return h;
}

Ipuof__Header *
fs_expect(struct fake *f, int fd, Ipuof__Header__BodyCase want)
{
    Ipuof__Header *h = fs_read(f, fd, 0);

    if (h != NULL && h->body_case != want) {
        char why[128];

        snprintf(why, sizeof why, "server: expected body %d, got %s", (int)want,
                 ipuof_frame_body_name(h));
        fake_fail(f, why);
        ipuof_frame_header_free(h);
        h = NULL;
    }
    return h;
}

void
fs_send_version(struct fake *f, int fd, const Ipuof__Header *h, const void *payload,
                uint32_t plen, unsigned version)
{
    uint8_t *frame = NULL;
    size_t len = 0;

    if (ipuof_frame_pack(h, plen, &frame, &len) != IPUOF_OK) {
        fake_fail(f, "server: pack failed");
        return;
    }
    if (version != 0) {
        frame[4] = (uint8_t)(version >> 8);
        frame[5] = (uint8_t)version;
    }
    if (fs_write_all(fd, frame, len) != 0 || (plen > 0 && fs_write_all(fd, payload, plen) != 0))
        fake_fail(f, "server: send failed");
    free(frame);
}

void
fs_send(struct fake *f, int fd, const Ipuof__Header *h, const void *payload, uint32_t plen)
{
    fs_send_version(f, fd, h, payload, plen, 0);
}

void
fs_send_error(struct fake *f, int fd, uint64_t id, int code, const char *component,
              const char *msg)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;

    e.code = (uint32_t)code;
    e.component = (char *)component;
    e.message = (char *)msg;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_ERROR;
    h.error = &e;
    fs_send(f, fd, &h, NULL, 0);
}

void
fs_hello_reply(struct fake *f, int fd, const Ipuof__Header *req, int admin)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__HelloReply hr = IPUOF__HELLO_REPLY__INIT;

    hr.protocol_version = IPUOF_PROTOCOL_VERSION;
    hr.server_version = (char *)"0.1.0";
    hr.server_name = (char *)"fake";
    hr.admin = admin != 0;
    hr.num_ipus = 4;
    hr.client_id = 7;
    hr.max_payload_bytes = f->max_payload;
    hr.max_header_bytes = 1u << 16;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_HELLO_REPLY;
    h.hello_reply = &hr;
    fs_send(f, fd, &h, NULL, 0);
}

int
fs_hello(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HELLO);

    if (req == NULL)
        return -1;
    fs_hello_reply(f, fd, req, 0);
    ipuof_frame_header_free(req);
    return 0;
}

int
fs_attach(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_ATTACH);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachReply ar = IPUOF__ATTACH_REPLY__INIT;
    uint32_t ids[2] = {0, 1};

    if (req == NULL)
        return -1;
    ar.partition_name = (char *)"p";
    ar.n_ipu_ids = 2;
    ar.ipu_ids = ids;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_ATTACH_REPLY;
    h.attach_reply = &ar;
    fs_send(f, fd, &h, NULL, 0);
    ipuof_frame_header_free(req);
    return 0;
}

void
fs_free_model(struct fake *f, int fd, uint32_t model_id)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_FREE_MODEL);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__FreeModelReply fr = IPUOF__FREE_MODEL_REPLY__INIT;

    if (req == NULL)
        return;
    if (req->free_model->model_id != model_id)
        fake_fail(f, "server: freed the wrong model");
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_FREE_MODEL_REPLY;
    h.free_model_reply = &fr;
    fs_send(f, fd, &h, NULL, 0);
    ipuof_frame_header_free(req);
}

void
fs_expect_eof(struct fake *f, int fd)
{
    Ipuof__Header *h = fs_read(f, fd, 1);

    if (h != NULL) {
        fake_fail(f, "server: a frame arrived where none should");
        ipuof_frame_header_free(h);
    }
}

void
fs_wait_eof(struct fake *f, int fd)
{
    char b[64];
    struct pollfd p = {.fd = fd, .events = POLLIN};

    while (poll(&p, 1, 5000) > 0 && recv(fd, b, sizeof b, 0) > 0)
        ;
    (void)f;
}

/* The server thread: accepts one connection within 5 s and runs the script on it. */
static void *
fake_main(void *arg)
{
    struct fake *f = arg;
    struct pollfd p = {.fd = f->lfd, .events = POLLIN};
    struct timeval tv = {.tv_sec = 10};
    int fd;

    if (poll(&p, 1, 5000) != 1) {
        fake_fail(f, "server: no connection within 5 s");
        return NULL;
    }
    fd = accept(f->lfd, NULL, NULL);
    if (fd < 0) {
        fake_fail(f, "server: accept failed");
        return NULL;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    f->script(f, fd);
    close(fd);
    return NULL;
}

void
fake_start(struct fake *f, fake_script script, uint64_t max_payload, int rcvbuf)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;

    memset(f, 0, sizeof *f);
    f->script = script;
    f->max_payload = max_payload;
    f->rcvbuf = rcvbuf;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->lfd >= 0);
    if (rcvbuf > 0)
        assert_int_equal(setsockopt(f->lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(f->lfd, 4), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sin, &len), 0);
    f->port = ntohs(sin.sin_port);
    snprintf(f->addr, sizeof f->addr, "127.0.0.1:%d", f->port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

void
fake_stop(struct fake *f)
{
    pthread_join(f->thread, NULL);
    close(f->lfd);
    free(f->payload);
    if (f->failed)
        print_error("%s\n", f->why);
    assert_false(f->failed);
}

ipuof_client *
new_attached(const struct fake *f, int request_ms)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = 2};

    assert_non_null(c);
    assert_int_equal(ipuof_client_set_timeouts(c, 3000, request_ms), IPUOF_OK);
    assert_int_equal(ipuof_client_connect(c, f->addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);
    return c;
}

void
assert_error(const ipuof_client *c, int rc, int want, const char *needle)
{
    print_message("  %s: %s\n", ipuof_status_name(rc), ipuof_client_errmsg(c));
    assert_int_equal(rc, want);
    assert_int_equal(ipuof_client_last_error(c, NULL, NULL, NULL), want);
    if (needle != NULL)
        assert_non_null(strstr(ipuof_client_errmsg(c), needle));
}
