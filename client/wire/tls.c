/*
 * tls.c — TLS on the client's TCP connection (OpenSSL), so every program on the library
 * (ipuctl, the tools, Python) gets it with no code of its own. It is on when the
 * environment names a CA file (IPUOF_TLS_CA_FILE: the daemon's certificate must be signed
 * by one of its certificates) or asks for the system's CAs (IPUOF_TLS=1); the daemon's
 * certificate must name the host connected to (IPUOF_TLS_SERVER_NAME overrides the name
 * checked). IPUOF_TLS_CERT_FILE and IPUOF_TLS_KEY_FILE present a client certificate.
 * An IPUoF config file's servers[0] may give the same as tls_ca_file, tls_cert_file,
 * tls_key_file and tls_server_name (the variables win). TLS 1.2 at least. AF_UNIX
 * connections (the admin socket) never use TLS.
 *
 * The socket is non-blocking under TLS; every wait goes through the io's wait (conn.c's), as the
 * plain path's does. A failure says what was wrong and what would be right.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"

/* The environment's TLS settings; *on 0 when TLS is off. Borrowed from the environment. */
struct tls_env {
    int on;
    const char *ca, *cert, *key, *name;
};

static const char *
env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The environment's settings, each over the IPUoF config file's (t->tls, "" when unset). */
static void
tls_env_read(struct tls_env *e, const struct ipuof_target *t)
{
    const char *all = env("IPUOF_TLS");
    const char **from[4] = {&e->ca, &e->cert, &e->key, &e->name};
    static const char *const vars[4] = {"IPUOF_TLS_CA_FILE", "IPUOF_TLS_CERT_FILE",
                                        "IPUOF_TLS_KEY_FILE", "IPUOF_TLS_SERVER_NAME"};

    for (int k = 0; k < 4; k++) {
        const char *v = env(vars[k]);
        *from[k] = v != NULL ? v : t->tls[k][0] ? t->tls[k] : NULL;
    }
    e->on = e->ca != NULL || (all != NULL && strcmp(all, "0") != 0);
}

/* OpenSSL's queued errors as one sentence into out ("" when none); clears the queue. */
static void
ssl_errors(char *out, size_t len)
{
    unsigned long e;
    size_t used = 0;

    out[0] = '\0';
    while ((e = ERR_get_error()) != 0) {
        const char *r = ERR_reason_error_string(e);
        if (used + 4 < len)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "; " : "",
                                     r ? r : "unknown");
    }
}

/* A new client context for e: TLS 1.2 at least, the daemon verified. NULL with the error
 * on the handle. */
static SSL_CTX *
ctx_new(ipuof_client *c, const struct tls_env *e)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char why[512];

    if (ctx == NULL) {
        ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory creating a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (e->ca != NULL ? SSL_CTX_load_verify_locations(ctx, e->ca, NULL) != 1
                      : SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ssl_errors(why, sizeof why);
        ipuof_err_set(c, IPUOF_E_CONFIG, "client", "IPUOF_TLS_CA_FILE=%s: cannot read PEM "
                      "CA certificates from it: %s", e->ca ? e->ca : "(system)", why);
        goto fail;
    }
    if ((e->cert != NULL) != (e->key != NULL)) {
        ipuof_err_set(c, IPUOF_E_CONFIG, "client", "IPUOF_TLS_CERT_FILE and "
                      "IPUOF_TLS_KEY_FILE go together: set both to present a client "
                      "certificate, or neither");
        goto fail;
    }
    if (e->cert != NULL &&
        (SSL_CTX_use_certificate_chain_file(ctx, e->cert) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx, e->key, SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_check_private_key(ctx) != 1)) {
        ssl_errors(why, sizeof why);
        ipuof_err_set(c, IPUOF_E_CONFIG, "client", "IPUOF_TLS_CERT_FILE=%s with "
                      "IPUOF_TLS_KEY_FILE=%s: cannot use them as a PEM certificate and its "
                      "key: %s", e->cert, e->key, why);
        goto fail;
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* Sets the error of a failed TLS call (ret its return value) during what. */
static int
tls_fail(ipuof_client *c, int ret, const char *what)
{
    SSL *ssl = c->tls;
    int e = SSL_get_error(ssl, ret);
    long v = SSL_get_verify_result(ssl);
    char why[512];

    ssl_errors(why, sizeof why);
    if (v != X509_V_OK) {
        const char *hint = "";
        if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
            hint = ": it names another host (connect by a name it has, or set "
                   "IPUOF_TLS_SERVER_NAME to the name it was made for)";
        else if (v == X509_V_ERR_CERT_HAS_EXPIRED)
            hint = ": the daemon's operator must renew it (then systemctl reload ipuofd)";
        else if (v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                 v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                 v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                 v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT)
            hint = ": no CA in IPUOF_TLS_CA_FILE signed it (give the CA that did)";
        return ipuof_err_set(c, IPUOF_E_AUTH, "connection", "TLS: the certificate of ipuofd "
                             "at %s is not trusted: %s%s", c->address,
                             X509_verify_cert_error_string(v), hint);
    }
    if (strstr(why, "alert unknown ca") != NULL || strstr(why, "alert bad certificate") != NULL ||
        strstr(why, "alert certificate") != NULL || strstr(why, "alert unsupported cert") != NULL)
        if (c->tls_has_cert)
            return ipuof_err_set(c, IPUOF_E_AUTH, "connection", "TLS: ipuofd at %s refused "
                                 "this client's certificate (%s): it must be signed by a CA "
                                 "in the daemon's tls_ca_file, and be valid now", c->address,
                                 why);
    if (strstr(why, "certificate required") != NULL ||
        strstr(why, "alert handshake failure") != NULL)
        return ipuof_err_set(c, IPUOF_E_AUTH, "connection", "TLS: ipuofd at %s refused this "
                             "client (%s): it requires a client certificate its CA signed "
                             "(tls_auth_clients = yes); set IPUOF_TLS_CERT_FILE and "
                             "IPUOF_TLS_KEY_FILE", c->address, why);
    if (strstr(why, "wrong version number") != NULL || strstr(why, "packet length") != NULL ||
        strstr(why, "unexpected eof") != NULL)
        return ipuof_err_set(c, IPUOF_E_PROTO, "connection", "TLS: ipuofd at %s did not "
                             "answer in TLS during %s (%s): does it serve TLS (tls_cert_file)? "
                             "Without it, unset IPUOF_TLS_CA_FILE and IPUOF_TLS", c->address,
                             what, why);
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && why[0] == '\0'))
        return ipuof_err_set(c, IPUOF_E_CLOSED, "connection",
                             "ipuofd at %s closed the TLS connection during %s%s", c->address,
                             what, c->tls_has_cert ? "" : " (if it requires client "
                             "certificates, set IPUOF_TLS_CERT_FILE and IPUOF_TLS_KEY_FILE)");
    if (e == SSL_ERROR_SYSCALL)
        return ipuof_err_set(c, IPUOF_E_IO, "connection", "TLS to ipuofd at %s failed during "
                             "%s: %s", c->address, what, strerror(errno));
    return ipuof_err_set(c, IPUOF_E_IO, "connection", "TLS to ipuofd at %s failed during %s: "
                         "%s", c->address, what, why[0] ? why : "unknown error");
}

/* Waits as the last TLS call asked (ret its return value); IPUOF_OK to call it again. */
static int
tls_wait(struct ipuof_io *io, int ret, const char *what)
{
    int e = SSL_get_error(io->c->tls, ret);

    if (e == SSL_ERROR_WANT_READ)
        return io->wait(io, io->c->fd, POLLIN);
    if (e == SSL_ERROR_WANT_WRITE)
        return io->wait(io, io->c->fd, POLLOUT);
    return tls_fail(io->c, ret, what);
}

/* Records go out through a buffer of TLS_WBUF bytes (BIO_f_buffer over the socket), so a
 * large send is one write() per TLS_WBUF rather than one per 16 KiB record; ipuof_tls_send
 * flushes it at its end (OpenSSL flushes its own handshake and alert messages). 0, or -1
 * when out of memory. */
#define TLS_WBUF (256 << 10)

static int
buffer_writes(SSL *ssl)
{
    BIO *sock = SSL_get_wbio(ssl);
    BIO *buf = BIO_new(BIO_f_buffer());

    if (buf == NULL || BIO_set_write_buffer_size(buf, TLS_WBUF) != 1 || !BIO_up_ref(sock)) {
        BIO_free(buf);
        return -1;
    }
    BIO_push(buf, sock);       /* the chain holds its own reference to sock */
    SSL_set0_wbio(ssl, buf);   /* ssl owns buf; drops the reference SSL_set_fd gave wbio */
    return 0;
}

/* Writes out what the write buffer holds. */
static int
tls_flush(struct ipuof_io *io)
{
    BIO *w = SSL_get_wbio(io->c->tls);

    while (BIO_flush(w) <= 0) {
        int rc;
        if (!BIO_should_retry(w))
            return ipuof_err_set(io->c, IPUOF_E_IO, "connection", "TLS to ipuofd at %s failed "
                                 "during %s: %s", io->c->address, io->what, strerror(errno));
        rc = io->wait(io, io->c->fd, POLLOUT);
        if (rc != IPUOF_OK)
            return rc;
    }
    return IPUOF_OK;
}

int
ipuof_tls_open(ipuof_client *c, struct ipuof_io *io, const char *host)
{
    struct tls_env e;
    const char *name;
    unsigned char ip[16];
    int flags, ret, rc;

    tls_env_read(&e, &c->target);
    if (!e.on)
        return IPUOF_OK;
    if (c->tls_ctx == NULL && (c->tls_ctx = ctx_new(c, &e)) == NULL)
        return c->err.code;
    name = e.name != NULL ? e.name : host;
    c->tls_has_cert = e.cert != NULL;
    c->tls = SSL_new(c->tls_ctx);
    flags = fcntl(c->fd, F_GETFL);
    if (c->tls == NULL || flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
        SSL_set_fd(c->tls, c->fd) != 1 || buffer_writes(c->tls) != 0)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory starting TLS");
    if (inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->tls), name);
    } else {
        SSL_set_tlsext_host_name(c->tls, name);
        SSL_set1_host(c->tls, name);
    }
    ERR_clear_error();
    while ((ret = SSL_connect(c->tls)) != 1) {
        rc = tls_wait(io, ret, "the TLS handshake");
        if (rc != IPUOF_OK)
            return rc;
    }
    return IPUOF_OK;
}

void
ipuof_tls_close(ipuof_client *c)
{
    if (c->tls != NULL) {
        SSL_free(c->tls);
        c->tls = NULL;
    }
}

void
ipuof_tls_free(ipuof_client *c)
{
    ipuof_tls_close(c);
    SSL_CTX_free(c->tls_ctx);
    c->tls_ctx = NULL;
}

/* Writes len bytes at p over io's TLS session. */
static int
tls_write_all(struct ipuof_io *io, const char *p, size_t len)
{
    while (len > 0) {
        int chunk = len > (1u << 30) ? 1 << 30 : (int)len;
        int ret, rc;
        ERR_clear_error();
        ret = SSL_write(io->c->tls, p, chunk);
        if (ret > 0) {
            p += ret;
            len -= (size_t)ret;
            continue;
        }
        rc = tls_wait(io, ret, io->what);
        if (rc != IPUOF_OK)
            return rc;
    }
    return IPUOF_OK;
}

/* Small pieces (a frame's head, its header) are gathered into one buffer of a TLS record's
 * size, so a frame is one record and one system call rather than one per piece. */
#define TLS_GATHER 16384

int
ipuof_tls_send(struct ipuof_io *io, struct iovec *iov, int iovcnt)
{
    char gather[TLS_GATHER];
    size_t used = 0;
    int rc = IPUOF_OK;

    for (int i = 0; i < iovcnt && rc == IPUOF_OK; i++) {
        size_t n = iov[i].iov_len;
        if (used + n <= sizeof gather) {
            memcpy(gather + used, iov[i].iov_base, n);
            used += n;
            continue;
        }
        if (used > 0)
            rc = tls_write_all(io, gather, used);
        used = 0;
        if (rc == IPUOF_OK && n < sizeof gather) {
            memcpy(gather, iov[i].iov_base, n);
            used = n;
        } else if (rc == IPUOF_OK) {
            rc = tls_write_all(io, iov[i].iov_base, n);
        }
    }
    if (rc == IPUOF_OK && used > 0)
        rc = tls_write_all(io, gather, used);
    if (rc == IPUOF_OK)
        rc = tls_flush(io);
    return rc;
}

int
ipuof_tls_recv(struct ipuof_io *io, void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        size_t want = len - got;
        int ret;
        ERR_clear_error();
        ret = SSL_read(io->c->tls, (char *)buf + got, want > (1u << 30) ? 1 << 30 : (int)want);
        if (ret > 0) {
            got += (size_t)ret;
            continue;
        }
        int rc = tls_wait(io, ret, io->what);
        if (rc != IPUOF_OK)
            return rc;
    }
    return IPUOF_OK;
}

int
ipuof_tls_pending(const ipuof_client *c)
{
    return c->tls != NULL && SSL_pending(c->tls) > 0;
}
