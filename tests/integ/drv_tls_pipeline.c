/*
 * drv_tls_pipeline.c — the C side of test_tls_pipeline.sh: a raw TLS client that pipelines,
 * so that the daemon's daemon/conn/tls_read.c tls_pending_to_input runs.
 *
 *   build/tests/integ/drv_tls_pipeline HOST PORT CA_FILE
 *
 * The client library never sends a frame after a request's payload before the reply, so
 * nothing else reaches that path. Here, after the hello and an attach of one IPU, ONE
 * SSL_write carries three frames: a compile of model A (Relu of width 3) with a payload of
 * about 300 KiB, a compile of model B (Relu of width 5) with about 200 KiB, and a health
 * request. The payloads are over libevent's one-record first read, so the daemon reads the
 * rest of A's payload with tls_read_direct (reading ahead), and the records it read past
 * A's last byte hold B's frame, B's payload and the health frame: only
 * tls_pending_to_input brings them to the connection's input. A lost byte leaves B's
 * compile or the health request unanswered (the read times out); a reordered one makes B's
 * frame head, header or model unreadable, or gives B's reply A's shapes. The payloads are
 * each model's ONNX bytes plus a doc_string (ModelProto field 6) of printable filler, which
 * the daemon's ONNX import reads and ignores.
 *
 * Checks, each printed as "ok - ..." / "not ok - ...", then "N passed, M failed": the
 * three replies come in order (request ids 3, 4, 5), A's and B's compile replies give
 * input widths 3 and 5, and the health reply says live. Exit 0 when all pass, 1 otherwise,
 * 2 on bad arguments. Every read has a 60 s limit.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "frame.h"
#include "ipuof.pb-c.h"
#include "ipuof/status.h"
#include "testmodels.h"

static int passed, failed;

static void
check(int ok, const char *what)
{
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
    if (ok)
        passed++;
    else
        failed++;
}

/* Writes all n bytes of buf over ssl in one SSL_write (records as OpenSSL cuts them). */
static int
write_all(SSL *ssl, const void *buf, size_t n)
{
    int w = SSL_write(ssl, buf, (int)n);

    if (w != (int)n) {
        fprintf(stderr, "drv_tls_pipeline: SSL_write of %zu bytes: %d\n", n, w);
        return -1;
    }
    return 0;
}

static int
read_all(SSL *ssl, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        int r = SSL_read(ssl, (char *)buf + got, (int)(n - got));
        if (r <= 0) {
            fprintf(stderr, "drv_tls_pipeline: SSL_read: error %d after %zu of %zu bytes\n",
                    SSL_get_error(ssl, r), got, n);
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* Reads one frame; returns its header (caller frees) with the payload skipped, or NULL. */
static Ipuof__Header *
read_frame(SSL *ssl)
{
    uint8_t head[IPUOF_FRAME_HEAD_LEN], *buf;
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head fh;
    Ipuof__Header *h;
    char err[256];

    ipuof_frame_limits_default(&lim);
    if (read_all(ssl, head, sizeof head) != 0)
        return NULL;
    if (ipuof_frame_head_decode(head, sizeof head, &lim, &fh, err, sizeof err) != IPUOF_OK) {
        fprintf(stderr, "drv_tls_pipeline: a reply's frame head: %s\n", err);
        return NULL;
    }
    buf = malloc((size_t)fh.header_len + fh.payload_len + 1);
    if (buf == NULL || read_all(ssl, buf, (size_t)fh.header_len + fh.payload_len) != 0) {
        free(buf);
        return NULL;
    }
    h = ipuof_frame_header_unpack(buf, fh.header_len, &lim, err, sizeof err);
    if (h == NULL)
        fprintf(stderr, "drv_tls_pipeline: a reply's header: %s\n", err);
    free(buf);
    return h;
}

/* Appends frame h with payload (len bytes) to *out (grown, caller-owned). */
static int
append_frame(uint8_t **out, size_t *outlen, const Ipuof__Header *h, const void *payload,
             size_t len)
{
    uint8_t *f, *grown;
    size_t flen;

    if (ipuof_frame_pack(h, (uint32_t)len, &f, &flen) != IPUOF_OK)
        return -1;
    grown = realloc(*out, *outlen + flen + len);
    if (grown == NULL) {
        free(f);
        return -1;
    }
    memcpy(grown + *outlen, f, flen);
    if (len > 0)
        memcpy(grown + *outlen + flen, payload, len);
    *out = grown;
    *outlen += flen + len;
    free(f);
    return 0;
}

/* A Relu model of width w whose bytes are padded to over pad bytes with a doc_string
 * (ModelProto field 6) of printable filler that depends on w. Caller frees; NULL on error. */
static uint8_t *
padded_model(int64_t w, size_t pad, size_t *len)
{
    size_t n = 0;
    void *m = testmodel_relu(1, 1, w, -1, &n);
    uint8_t *out = m != NULL ? malloc(n + pad + 16) : NULL;
    size_t k = n;

    if (out == NULL) {
        free(m);
        return NULL;
    }
    memcpy(out, m, n);
    free(m);
    out[k++] = (6 << 3) | 2; /* field 6, length-delimited */
    for (size_t v = pad; ; v >>= 7) {  /* its length, a varint */
        out[k++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    for (size_t i = 0; i < pad; i++)
        out[k++] = (uint8_t)('A' + (i * 7 + (size_t)w) % 26);
    *len = k;
    return out;
}

/* A request of body kind `body` (its message set by the caller) with request id `id`. */
static void
request(Ipuof__Header *h, uint64_t id)
{
    ipuof__header__init(h);
    h->request_id = id;
}

/* The last dimension of the first input of a compile reply, or -1. */
static int64_t
input_width(const Ipuof__Header *h)
{
    const Ipuof__CompileReply *r;

    if (h == NULL || h->body_case != IPUOF__HEADER__BODY_COMPILE_REPLY)
        return -1;
    r = h->compile_reply;
    if (r->n_inputs < 1 || r->inputs[0]->n_dims < 1)
        return -1;
    return r->inputs[0]->dims[r->inputs[0]->n_dims - 1];
}

/* Reads frames until a reply (its request id appended to ids_seen, *n_seen counted);
 * Notices and compile progress are skipped. NULL when the read failed or timed out. */
static Ipuof__Header *
reply_to(SSL *ssl, uint64_t *ids_seen, size_t *n_seen)
{
    for (;;) {
        Ipuof__Header *h = read_frame(ssl);
        if (h == NULL)
            return NULL;
        if (h->body_case == IPUOF__HEADER__BODY_NOTICE ||
            h->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS) {
            ipuof_frame_header_free(h);
            continue;
        }
        ids_seen[(*n_seen)++] = h->request_id;
        if (h->body_case == IPUOF__HEADER__BODY_ERROR)
            fprintf(stderr, "drv_tls_pipeline: request %llu: error %u: %s\n",
                    (unsigned long long)h->request_id, h->error->code,
                    h->error->message != NULL ? h->error->message : "");
        return h;
    }
}

static SSL *
tls_connect(const char *host, const char *port, const char *ca, SSL_CTX **ctxp)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    struct timeval tv = {.tv_sec = 60};
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl;
    int fd;

    *ctxp = ctx;
    if (ctx == NULL || SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        return NULL;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return NULL;
    fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ssl = SSL_new(ctx);
    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 || SSL_set1_host(ssl, "localhost") != 1 ||
        SSL_connect(ssl) != 1) {
        ERR_print_errors_fp(stderr);
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    return ssl;
}

/* Hello and an attach of one IPU; 0 when both were answered as such. */
static int
hello_attach(SSL *ssl)
{
    Ipuof__Header h;
    Ipuof__Hello hello = IPUOF__HELLO__INIT;
    Ipuof__AttachRequest at = IPUOF__ATTACH_REQUEST__INIT;
    uint8_t *buf = NULL;
    size_t len = 0, n = 0;
    uint64_t ids[4];
    Ipuof__Header *r;
    int ok;

    hello.protocol_version = IPUOF_PROTOCOL_VERSION;
    hello.client_name = (char *)"drv_tls_pipeline";
    hello.pid = (uint32_t)getpid();
    request(&h, 1);
    h.body_case = IPUOF__HEADER__BODY_HELLO;
    h.hello = &hello;
    if (append_frame(&buf, &len, &h, NULL, 0) != 0 || write_all(ssl, buf, len) != 0)
        return -1;
    free(buf);
    r = reply_to(ssl, ids, &n);
    ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_HELLO_REPLY;
    ipuof_frame_header_free(r);
    check(ok, "hello over TLS answered");
    at.num_ipus = 1;
    request(&h, 2);
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &at;
    buf = NULL;
    len = 0;
    if (!ok || append_frame(&buf, &len, &h, NULL, 0) != 0 || write_all(ssl, buf, len) != 0)
        return -1;
    free(buf);
    r = reply_to(ssl, ids, &n);
    ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_ATTACH_REPLY;
    ipuof_frame_header_free(r);
    check(ok, "attach of 1 IPU answered");
    return ok ? 0 : -1;
}

/* One write of: compile A (payload a), compile B (payload b), health. */
static int
send_pipelined(SSL *ssl, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    Ipuof__Header h;
    Ipuof__CompileRequest ca = IPUOF__COMPILE_REQUEST__INIT, cb = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__HealthRequest hr = IPUOF__HEALTH_REQUEST__INIT;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    ca.model_bytes = alen;
    ca.name = (char *)"pipelined-a";
    ca.device_iterations = 1;
    ca.replicas = 1;
    ca.no_cache = 1;
    cb = ca;
    cb.model_bytes = blen;
    cb.name = (char *)"pipelined-b";
    request(&h, 3);
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &ca;
    rc = append_frame(&buf, &len, &h, a, alen);
    h.request_id = 4;
    h.compile = &cb;
    if (rc == 0)
        rc = append_frame(&buf, &len, &h, b, blen);
    request(&h, 5);
    h.body_case = IPUOF__HEADER__BODY_HEALTH;
    h.health = &hr;
    if (rc == 0)
        rc = append_frame(&buf, &len, &h, NULL, 0);
    if (rc == 0) {
        printf("# one SSL_write of %zu bytes: compile A (%zu payload bytes), compile B (%zu), "
               "health\n", len, alen, blen);
        rc = write_all(ssl, buf, len);
    }
    free(buf);
    return rc;
}

int
main(int argc, char **argv)
{
    SSL_CTX *ctx = NULL;
    SSL *ssl;
    size_t alen = 0, blen = 0, n = 0;
    uint8_t *a, *b;
    uint64_t ids[8] = {0};
    Ipuof__Header *ra = NULL, *rb = NULL, *rh = NULL;
    char what[160];

    if (argc != 4) {
        fprintf(stderr, "usage: drv_tls_pipeline HOST PORT CA_FILE\n");
        return 2;
    }
    a = padded_model(3, 300000, &alen);
    b = padded_model(5, 200000, &blen);
    ssl = tls_connect(argv[1], argv[2], argv[3], &ctx);
    check(ssl != NULL, "TLS connection verified against the test's CA");
    if (ssl != NULL && a != NULL && b != NULL && hello_attach(ssl) == 0 &&
        send_pipelined(ssl, a, alen, b, blen) == 0) {
        ra = reply_to(ssl, ids, &n);
        rb = ra != NULL ? reply_to(ssl, ids, &n) : NULL;
        rh = rb != NULL ? reply_to(ssl, ids, &n) : NULL;
    }
    snprintf(what, sizeof what, "three replies, in order: request ids %llu, %llu, %llu "
             "(want 3, 4, 5)", (unsigned long long)ids[0], (unsigned long long)ids[1],
             (unsigned long long)ids[2]);
    check(n == 3 && ids[0] == 3 && ids[1] == 4 && ids[2] == 5, what);
    snprintf(what, sizeof what, "compile A's reply: input width %lld (want 3)",
             (long long)input_width(ra));
    check(input_width(ra) == 3, what);
    snprintf(what, sizeof what, "compile B's reply, from the bytes after A's payload: input "
             "width %lld (want 5)", (long long)input_width(rb));
    check(input_width(rb) == 5, what);
    check(rh != NULL && rh->body_case == IPUOF__HEADER__BODY_HEALTH_REPLY &&
          rh->health_reply->live, "the pipelined health request answered: live");
    ipuof_frame_header_free(ra);
    ipuof_frame_header_free(rb);
    ipuof_frame_header_free(rh);
    free(a);
    free(b);
    if (ssl != NULL) {
        int fd = SSL_get_fd(ssl);
        SSL_free(ssl);
        close(fd);
    }
    SSL_CTX_free(ctx);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
