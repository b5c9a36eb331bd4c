/*
 * tls_read.h — a TLS connection's payload bytes decrypted straight into their destination
 * (conn.c's sink), past libevent's input buffer.
 *
 * bufferevent_openssl reads one TLS record (16 KiB at most) per turn of the event loop and
 * decrypts it into the input buffer, from which conn.c copies it to the payload's sink: a
 * 2.5 MB input tensor took 160 loop turns and one extra copy. While a payload arrives,
 * conn.c calls tls_read_direct instead, as it calls recv() for a plain socket, and
 * tls_pending_to_input afterwards, so that bytes OpenSSL decrypted past the payload (the
 * next frame) reach the input buffer: libevent would not look for them, the socket being
 * drained.
 *
 * While a payload arrives OpenSSL reads ahead (SSL_set_read_ahead): one read() takes as
 * many records as the socket holds, up to TLS_READ_BUFFER bytes, instead of two read()s
 * (record head, record body) per 16 KiB. tls_pending_to_input turns it off again after
 * moving every whole record it read into the input buffer: libevent's own reading only
 * looks at SSL_pending (decrypted bytes), so raw records left inside OpenSSL while the
 * socket is drained would wait for bytes that may never come.
 *
 * Both run on the event-loop thread, inside the connection's read callback.
 */
#ifndef IPUOFD_TLS_READ_H
#define IPUOFD_TLS_READ_H

#include <stddef.h>
#include <sys/types.h>

struct bufferevent;

/* OpenSSL's read buffer per TLS connection (SSL_CTX_set_default_read_buffer_len). */
#define TLS_READ_BUFFER (256u << 10)

/* Decrypts up to len bytes of bev's TLS stream into dst (caller-owned, at least len
 * bytes). Returns the bytes written (> 0); 0 when no whole record is there yet (libevent's
 * read event resumes when the socket has more); -1 when the stream ended or failed, with a
 * sentence in why (the caller closes the connection). */
ssize_t tls_read_direct(struct bufferevent *bev, void *dst, size_t len, char *why,
                        size_t whylen);

/* Moves the bytes of every whole record OpenSSL holds (SSL_has_pending) into bev's input
 * buffer, decrypted, and turns reading ahead off. Returns the bytes moved, or -1 when the
 * buffer could not grow (out of memory). */
ssize_t tls_pending_to_input(struct bufferevent *bev);

#endif
