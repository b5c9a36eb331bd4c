/*
 * tls_read.c — see tls_read.h.
 */
#include "tls_read.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

ssize_t
tls_read_direct(struct bufferevent *bev, void *dst, size_t len, char *why, size_t whylen)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    int r, e;

    if (ssl == NULL || len == 0)
        return 0;
    SSL_set_read_ahead(ssl, 1);
    ERR_clear_error();
    r = SSL_read(ssl, dst, len > INT_MAX ? INT_MAX : (int)len);
    if (r > 0)
        return r;
    e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        /* WANT_WRITE: a post-handshake message asks for an answer; libevent's own read
         * and write callbacks carry it (they see the same SSL object). */
        ERR_clear_error();
        return 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        snprintf(why, whylen, "peer closed the TLS stream during a payload");
    else {
        unsigned long err = ERR_get_error();
        const char *reason = err ? ERR_reason_error_string(err) : NULL;
        snprintf(why, whylen, "TLS error during a payload: %s",
                 reason ? reason : e == SSL_ERROR_SYSCALL ? "socket closed or failed"
                                                          : "unknown");
    }
    ERR_clear_error();
    return -1;
}

ssize_t
tls_pending_to_input(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    struct evbuffer *in = bufferevent_get_input(bev);
    ssize_t moved = 0;
    int n;

    if (ssl == NULL)
        return 0;
    while (SSL_has_pending(ssl)) {
        struct evbuffer_iovec v;
        int r;

        /* A record holds 16 KiB at most; what SSL_pending says may be more than one. */
        n = SSL_pending(ssl);
        if (n < 16384)
            n = 16384;
        if (evbuffer_reserve_space(in, n, &v, 1) != 1)
            return -1;
        ERR_clear_error();
        r = SSL_read(ssl, v.iov_base, n < (int)v.iov_len ? n : (int)v.iov_len);
        if (r <= 0) {
            /* A partial record (the rest comes with the socket's next bytes), or an error
             * libevent's next read reports. */
            ERR_clear_error();
            break;
        }
        v.iov_len = (size_t)r;
        evbuffer_commit_space(in, &v, 1);
        moved += r;
    }
    SSL_set_read_ahead(ssl, 0);
    return moved;
}
