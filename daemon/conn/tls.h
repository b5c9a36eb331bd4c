/*
 * tls.h — TLS on the client port ([server] tls_cert_file, docs/service.md), with OpenSSL
 * through libevent's bufferevent_openssl. The admin token travels on the same port, so it
 * is covered too; the admin socket is local and the Pod port stays plain (gloo's TCP
 * transport has no TLS).
 *
 * An accepted socket first waits for its first bytes: a plain-text hello (the frame magic)
 * is answered with a plain-text error saying the port serves TLS, and closed; anything else
 * starts the TLS handshake (TLS 1.2 at least), bounded by handshake_timeout. Once it is
 * done the client's certificate (tls_auth_clients) is checked and its subject may carry
 * admin rights (tls_admin_subjects); then the connection is an ordinary one (conn.h) over
 * the TLS bufferevent. A failed handshake is logged with OpenSSL's reason and closed; the
 * daemon serves everyone else. SIGHUP re-reads the certificate, key and CA files.
 *
 * Everything runs on the event-loop thread.
 */
#ifndef IPUOFD_TLS_H
#define IPUOFD_TLS_H

#include <stddef.h>
#include <sys/socket.h>

struct srv;
struct cfg;

/* Loads s->cfg's certificate, key and CA into s->tls when tls_cert_file is set (else
 * s->tls stays NULL: no TLS). 0, or -1 with a sentence naming the file and OpenSSL's
 * reason in err. */
int tls_start(struct srv *s, char *err, size_t errlen);

/* A reload: loads next's files into a new context that replaces the running one for new
 * connections (those open keep theirs). Turning TLS on or off needs a restart. 0, or -1
 * with err (the running context stays). */
int tls_reload(struct srv *s, const struct cfg *next, char *err, size_t errlen);

/* Takes an accepted client-port socket when s->tls is set (limits checked here). */
void tls_accept(struct srv *s, int fd, const struct sockaddr *sa, int salen);

/* Frees the handshakes in progress and the context (exit path). */
void tls_stop(struct srv *s);

#endif
