/*
 * tls.c — see tls.h.
 */
#include "tls.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "errbuf.h"
#include "frame.h"
#include "ipuof/status.h"
#include "log.h"
#include "srv_state.h"
#include "tls_read.h"

/* A socket between accept and a finished handshake. */
struct tls_pending {
    struct tls_srv *t;
    int fd;                      /* until bev owns it */
    struct event *peek;          /* waits for the first bytes */
    struct bufferevent *bev;     /* the handshake, once started */
    char peer[64];
    struct tls_pending *prev, *next;
};

struct tls_srv {
    struct srv *srv;
    SSL_CTX *ctx;
    struct tls_pending *pending;
    unsigned npending;
};

/* OpenSSL's queued errors as one sentence ("" when none); clears the queue. */
static void
ssl_errors(char *out, size_t len)
{
    unsigned long e;
    size_t used = 0;

    out[0] = '\0';
    while ((e = ERR_get_error()) != 0) {
        char one[256];
        ERR_error_string_n(e, one, sizeof one);
        const char *reason = ERR_reason_error_string(e);
        if (used + 4 < len)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "; " : "",
                                     reason ? reason : one);
    }
}

/* A new server context from c's files: TLS 1.2 at least, the client certificates
 * tls_auth_clients asks for, verified against tls_ca_file. NULL with err. */
static SSL_CTX *
ctx_new(const struct cfg *c, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    char why[512];
    int mode = SSL_VERIFY_NONE;

    if (ctx == NULL) {
        errbuf_set(err, errlen, "cannot create a TLS context (out of memory)");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* Room for several records per read() while a payload arrives (tls_read.h). */
    SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert_file) != 1) {
        ssl_errors(why, sizeof why);
        errbuf_set(err, errlen, "[server] tls_cert_file = %s: cannot use it as a PEM "
                   "certificate chain: %s", c->tls_cert_file, why);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, c->tls_key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        ssl_errors(why, sizeof why);
        errbuf_set(err, errlen, "[server] tls_key_file = %s: cannot use it as the PEM key "
                   "of %s: %s", c->tls_key_file, c->tls_cert_file, why);
        goto fail;
    }
    if (c->tls_ca_file[0] != '\0') {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(c->tls_ca_file);
        if (SSL_CTX_load_verify_locations(ctx, c->tls_ca_file, NULL) != 1 || names == NULL) {
            ssl_errors(why, sizeof why);
            errbuf_set(err, errlen, "[server] tls_ca_file = %s: cannot read PEM CA "
                       "certificates from it: %s", c->tls_ca_file, why);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
    }
    if (strcmp(c->tls_auth_clients, "optional") == 0)
        mode = SSL_VERIFY_PEER;
    else if (strcmp(c->tls_auth_clients, "yes") == 0)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, NULL);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int
tls_start(struct srv *s, char *err, size_t errlen)
{
    struct tls_srv *t;

    if (s->cfg.tls_cert_file[0] == '\0')
        return 0;
    t = calloc(1, sizeof *t);
    if (t == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    t->srv = s;
    t->ctx = ctx_new(&s->cfg, err, errlen);
    if (t->ctx == NULL) {
        free(t);
        return -1;
    }
    s->tls = t;
    log_info("TLS on the client port: certificate %s, client certificates %s%s%s",
             s->cfg.tls_cert_file, s->cfg.tls_auth_clients,
             s->cfg.tls_ca_file[0] ? " (CA " : "", s->cfg.tls_ca_file[0] ? s->cfg.tls_ca_file : "");
    return 0;
}

int
tls_reload(struct srv *s, const struct cfg *next, char *err, size_t errlen)
{
    SSL_CTX *ctx;

    if ((s->tls == NULL) != (next->tls_cert_file[0] == '\0')) {
        errbuf_set(err, errlen, "turning TLS %s (tls_cert_file) needs a restart",
                   s->tls == NULL ? "on" : "off");
        return -1;
    }
    if (s->tls == NULL)
        return 0;
    ctx = ctx_new(next, err, errlen);
    if (ctx == NULL)
        return -1;
    SSL_CTX_free(s->tls->ctx); /* connections open hold their own reference */
    s->tls->ctx = ctx;
    log_info("TLS: certificate %s loaded again", next->tls_cert_file);
    return 0;
}

static void
pending_free(struct tls_pending *p)
{
    struct tls_srv *t = p->t;

    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        t->pending = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    t->npending--;
    if (p->peek != NULL)
        event_free(p->peek);
    if (p->bev != NULL)
        bufferevent_free(p->bev); /* closes fd */
    else if (p->fd >= 0)
        close(p->fd);
    free(p);
}

/* Sends a plain-text error frame to a plain-text client and closes (pending_free). */
static void
refuse_plain(struct tls_pending *p)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;
    uint8_t *buf;
    size_t len;

    e.code = IPUOF_E_PROTO;
    e.component = (char *)"daemon";
    e.message = (char *)"ipuofd serves TLS on this port (tls_cert_file): connect with TLS, "
                        "e.g. set IPUOF_TLS_CA_FILE to the CA certificate that signed the "
                        "daemon's (see docs/service.md)";
    h.body_case = IPUOF__HEADER__BODY_ERROR;
    h.error = &e;
    if (ipuof_frame_pack(&h, 0, &buf, &len) == IPUOF_OK) {
        ssize_t n = send(p->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
        free(buf);
    }
    log_warn("client %s: a plain-text hello on the TLS port; told to use TLS and closed",
             p->peer);
    pending_free(p);
}

/* The subject of the peer's certificate (RFC 2253), or "" without one. */
static void
peer_subject(SSL *ssl, char *out, size_t len)
{
    X509 *x = SSL_get_peer_certificate(ssl);
    BIO *b;
    long n;

    out[0] = '\0';
    if (x == NULL)
        return;
    b = BIO_new(BIO_s_mem());
    if (b != NULL && X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
        n = BIO_read(b, out, (int)len - 1);
        out[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
    X509_free(x);
}

/* 1 when subject is one of list's entries (separated by ';', spaces around ignored). */
static int
subject_listed(const char *list, const char *subject)
{
    size_t n = strlen(subject);

    if (n == 0)
        return 0;
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (*p == ' ' || *p == '\t'))
            p++, len--;
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == n && memcmp(p, subject, n) == 0)
            return 1;
        if (end == NULL)
            break;
        p = end + 1;
    }
    return 0;
}

/* Lingering after a failed handshake: reads and drops what the client still sends, so
 * that closing does not reset the connection and lose the alert saying why; the socket
 * closes at the client's end of stream, an error, or after a second. */
static void
on_linger(evutil_socket_t fd, short what, void *arg)
{
    char scratch[4096];
    ssize_t n = 1;

    if (!(what & EV_TIMEOUT)) {
        do {
            n = recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
            return; /* dropped; more may come */
    }
    pending_free(arg);
}

/* p's handshake failed: its alert is written; linger before closing (on_linger). */
static void
linger(struct tls_pending *p)
{
    struct timeval one = {.tv_sec = 1};
    int fd = bufferevent_getfd(p->bev);

    bufferevent_disable(p->bev, EV_READ | EV_WRITE);
    bufferevent_setcb(p->bev, NULL, NULL, NULL, NULL);
    if (fd < 0 || shutdown(fd, SHUT_WR) != 0 ||
        (p->peek = event_new(p->t->srv->base, fd, EV_READ | EV_PERSIST, on_linger, p)) == NULL) {
        pending_free(p);
        return;
    }
    event_add(p->peek, &one);
}

/* The handshake is done (a connection from now on) or failed (logged, then linger). */
static void
on_handshake(struct bufferevent *bev, short what, void *arg)
{
    struct tls_pending *p = arg;
    struct srv *s = p->t->srv;
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    char subject[512], why[512] = "";
    struct conn *c;
    int admin;

    if (what & BEV_EVENT_CONNECTED) {
        peer_subject(ssl, subject, sizeof subject);
        admin = subject_listed(s->cfg.tls_admin_subjects, subject);
        p->bev = NULL; /* the connection owns it now */
        bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
        bufferevent_set_timeouts(bev, NULL, NULL); /* the connection sets its own */
        log_debug("client %s: %s, %s%s%s", p->peer, SSL_get_version(ssl), SSL_get_cipher(ssl),
                  subject[0] ? ", certificate " : "", subject);
        c = conn_new_bev(s, bev, p->peer, 0);
        if (c != NULL) {
            c->tls = 1;
            if (admin) {
                c->admin = 1;
                log_info("client %u (%s): admin rights by its certificate %s", c->id,
                         c->peer, subject);
            }
            s->accepted++;
        }
        pending_free(p);
        return;
    }
    {
        unsigned long e;
        size_t used = 0;
        while ((e = bufferevent_get_openssl_error(bev)) != 0) {
            const char *r = ERR_reason_error_string(e);
            if (r != NULL && used + 4 < sizeof why)
                used += (size_t)snprintf(why + used, sizeof why - used, "%s%s",
                                         used ? "; " : "", r);
        }
    }
    if (ssl != NULL && SSL_get_verify_result(ssl) != X509_V_OK)
        snprintf(why + strlen(why), sizeof why - strlen(why), "%s(certificate: %s)",
                 why[0] ? " " : "",
                 X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
    log_warn("client %s: TLS handshake failed: %s%s", p->peer,
             (what & BEV_EVENT_TIMEOUT) ? "no handshake within handshake_timeout"
             : why[0]                   ? why
                                        : "the client closed the connection",
             strstr(why, "certificate required") || strstr(why, "did not return")
                 ? " (tls_auth_clients = yes: the client must present a certificate)"
                 : "");
    linger(p);
}

/* The first bytes arrived (or the handshake timeout passed): plain text or TLS? */
static void
on_first_bytes(evutil_socket_t fd, short what, void *arg)
{
    struct tls_pending *p = arg;
    struct srv *s = p->t->srv;
    struct timeval hs = {.tv_sec = s->cfg.handshake_timeout};
    unsigned char head[4];
    SSL *ssl;
    ssize_t n;

    if (what & EV_TIMEOUT) {
        log_warn("client %s: sent nothing within handshake_timeout; closed", p->peer);
        pending_free(p);
        return;
    }
    do {
        n = recv(fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        pending_free(p);
        return;
    }
    if (n == 4 && ((uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 |
                   head[3]) == IPUOF_FRAME_MAGIC) {
        refuse_plain(p);
        return;
    }
    ssl = SSL_new(p->t->ctx);
    p->bev = ssl ? bufferevent_openssl_socket_new(s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                  BEV_OPT_CLOSE_ON_FREE)
                 : NULL;
    if (p->bev == NULL) {
        SSL_free(ssl);
        log_error("out of memory starting a TLS handshake");
        pending_free(p);
        return;
    }
    p->fd = -1;
    event_free(p->peek); /* fired once; linger may need the slot */
    p->peek = NULL;
    bufferevent_openssl_set_allow_dirty_shutdown(p->bev, 1);
    bufferevent_setcb(p->bev, NULL, NULL, on_handshake, p);
    bufferevent_set_timeouts(p->bev, &hs, &hs);
    bufferevent_enable(p->bev, EV_READ | EV_WRITE);
}

void
tls_accept(struct srv *s, int fd, const struct sockaddr *sa, int salen)
{
    struct tls_srv *t = s->tls;
    struct timeval hs = {.tv_sec = s->cfg.handshake_timeout};
    struct tls_pending *p;
    char host[INET6_ADDRSTRLEN], port[8];
    int one = 1;

    if (s->stopping || s->nconns - s->nadmin - s->npod + t->npending >= s->cfg.max_connections) {
        s->rejected++;
        log_warn("rejected a TLS connection: %s", s->stopping ? "shutting down"
                 : "max_connections reached (handshakes included)");
        close(fd);
        return;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        close(fd);
        return;
    }
    p->t = t;
    p->fd = fd;
    if (getnameinfo(sa, (socklen_t)salen, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(p->peer, sizeof p->peer, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
                 host, port);
    else
        snprintf(p->peer, sizeof p->peer, "?");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p->next = t->pending;
    if (t->pending != NULL)
        t->pending->prev = p;
    t->pending = p;
    t->npending++;
    p->peek = event_new(s->base, fd, EV_READ, on_first_bytes, p);
    if (p->peek == NULL) {
        pending_free(p);
        return;
    }
    event_add(p->peek, &hs);
}

void
tls_stop(struct srv *s)
{
    struct tls_srv *t = s->tls;

    if (t == NULL)
        return;
    while (t->pending != NULL)
        pending_free(t->pending);
    SSL_CTX_free(t->ctx);
    free(t);
    s->tls = NULL;
}
