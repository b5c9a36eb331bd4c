/*
 * pod_client.h — one connection from this daemon to a peer's Pod port, spoken with
 * blocking sockets and deadlines (it runs on the Pod's hello thread and on the workers that
 * rendezvous, never on the event loop): connect, the hello with the Pod token, then one
 * request and its reply at a time. No state of struct srv is touched.
 */
#ifndef IPUOFD_POD_CLIENT_H
#define IPUOFD_POD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "ipuof.pb-c.h"

struct pod_client;

/* Largest reply payload a Pod client accepts (a rendezvous value is capped lower by the
 * serving daemon's kv_max_value_bytes). */
#define POD_CLIENT_MAX_PAYLOAD (64u << 20)

/*
 * Connects to addr ("HOST:PORT" or "[V6]:PORT") and says hello with token (may be "") as
 * client name self. Every step waits at most timeout_ms. IPUOF_OK with *out (free with
 * pod_client_close), or a status code (IPUOF_E_IO, _TIMEOUT, _CLOSED, _AUTH, ...) with a
 * sentence naming addr in err; *out is then NULL.
 */
int pod_client_open(struct pod_client **out, const char *addr, const char *token,
                    const char *self, int timeout_ms, char *err, size_t errlen);

/* As pod_client_open, and every wait of this client (connect, each call) also ends, with
 * IPUOF_E_CANCELLED, once cancel_fd (borrowed; an eventfd or pipe; -1: none) is readable. */
int pod_client_open_c(struct pod_client **out, const char *addr, const char *token,
                      const char *self, int timeout_ms, int cancel_fd, char *err,
                      size_t errlen);

/*
 * Sends req (its request_id is set here) with payload[0..plen) and waits at most timeout_ms
 * for the reply. A reply whose body is want: IPUOF_OK, *reply (caller frees with
 * ipuof_frame_header_free) and, when rpayload is not NULL, the reply's payload in
 * *rpayload (malloc'd, caller frees; NULL when empty) of *rplen bytes. An Error reply: its
 * code with its sentence in err. A broken connection or timeout: IPUOF_E_IO, _CLOSED or
 * _TIMEOUT with a sentence; the connection is then unusable (close it).
 */
int pod_client_call(struct pod_client *pc, Ipuof__Header *req, const void *payload,
                    uint32_t plen, Ipuof__Header__BodyCase want, Ipuof__Header **reply,
                    void **rpayload, uint32_t *rplen, int timeout_ms, char *err, size_t errlen);

/* 1 when the last pod_client_call read a whole answer (a reply or an Error: the connection
 * is still in step), 0 when it failed on the way (the connection is unusable). */
int pod_client_answered(const struct pod_client *pc);

/* The address it was opened to (borrowed until pod_client_close). */
const char *pod_client_addr(const struct pod_client *pc);

/* Closes the connection; NULL is a no-op. */
void pod_client_close(struct pod_client *pc);

#endif
