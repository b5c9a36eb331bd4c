/*
 * client_internal.h — what the files of libipuof-client share and the public header hides:
 * the handle's layout, the address parser, the per-handle error helpers and the frame I/O.
 *
 * Not installed. Every name here starts with ipuof_ so that a program linking the static
 * library cannot collide with it, and none of them is exported from the shared library
 * (client/libipuof-client.sym lists the public functions one by one).
 *
 * Threading: like the public API, every function here touches one handle and expects the
 * caller to use that handle from one thread at a time.
 */
#ifndef IPUOF_CLIENT_INTERNAL_H
#define IPUOF_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "ipuof/client.h"

/* Address used when neither the caller nor IPUOF_SERVER names one. */
#define IPUOF_DEFAULT_ADDRESS "127.0.0.1:50052"
#define IPUOF_SERVER_ENV "IPUOF_SERVER"
#define IPUOF_AUTH_TOKEN_ENV "IPUOF_AUTH_TOKEN" /* auth token when none was set */

#define IPUOF_DEFAULT_CONNECT_MS 5000
#define IPUOF_DEFAULT_REQUEST_MS 60000

/* Room for the daemon's longest sentence (a string field is capped at max_string bytes by
 * the frame codec) plus a prefix the library may add. */
#define IPUOF_ERRMSG_MAX (IPUOF_DEFAULT_MAX_STRING + 256)
#define IPUOF_COMPONENT_MAX 32
#define IPUOF_HOST_MAX 256
#define IPUOF_PATH_MAX 108 /* sizeof(((struct sockaddr_un *)0)->sun_path) */
#define IPUOF_ADDRESS_MAX (IPUOF_PATH_MAX + IPUOF_HOST_MAX)

/* A parsed server address. */
struct ipuof_addr {
    int is_unix;                  /* 1: path is set; 0: host and port are set */
    char host[IPUOF_HOST_MAX];    /* name or literal, IPv6 without brackets */
    char port[8];                 /* decimal, 1..65535 */
    char path[IPUOF_PATH_MAX];    /* AF_UNIX socket path, NUL-terminated */
};

/* One error as the handle keeps it: ours, or the daemon's copied verbatim. */
struct ipuof_err_info {
    int code;                     /* IPUOF_OK or an IPUOF_E_* code */
    int error_class;              /* enum ipuof_error_class */
    int recovery;                 /* enum ipuof_recovery */
    char component[IPUOF_COMPONENT_MAX];
    char msg[IPUOF_ERRMSG_MAX];
};

struct ipuof_client {
    int fd;                       /* -1 when not connected */
    int connect_ms;               /* 0: no limit */
    int request_ms;               /* 0: no limit */
    char *name;                   /* NULL: the program name */
    char *auth_token;             /* NULL: none */
    char *admin_token;            /* NULL: none */
    char address[IPUOF_ADDRESS_MAX]; /* as shown in messages: "127.0.0.1:50052", "unix:/run/x" */
    int ever_connected;           /* a connection existed and was closed since */
    uint64_t last_request_id;     /* request ids are last_request_id + 1, never 0 */
    struct ipuof_frame_limits lim; /* what this side accepts from the daemon */

    /* From the HelloReply of the current connection. */
    int admin;
    unsigned client_id;
    unsigned num_ipus;
    uint64_t peer_max_payload;
    uint32_t peer_max_header;
    char server_version[64];

    /* The partition this connection holds. */
    int attached;
    char *partition;              /* owned; NULL when not attached */

    /* A notice (partition taken away) not yet reported to the caller. */
    int notice_pending;
    struct ipuof_err_info notice;

    char health_reason[IPUOF_ERRMSG_MAX]; /* from the last HealthReply, "" when ready */
    struct ipuof_err_info err;    /* the last failure, code IPUOF_OK after a success */
};

/* A payload sent after a request's header, borrowed from the caller for the call. */
struct ipuof_payload_out {
    const void *buf;
    uint32_t len;
};

/* Where a reply's payload goes: buf[0..cap) is borrowed from the caller for the call; len
 * receives the payload's length. A payload longer than cap is read, thrown away, and the
 * call fails with IPUOF_E_TOO_LARGE (the connection stays usable). */
struct ipuof_payload_in {
    void *buf;
    size_t cap;
    size_t len;
};

/* ---- client.c ---------------------------------------------------------------------------- */

/*
 * Parses address ("HOST:PORT", "[V6]:PORT", "HOST", "V6", "unix:/path") into *out. A
 * missing port is IPUOF_DEFAULT_PORT. Returns IPUOF_OK, or IPUOF_E_INVAL with a sentence
 * in err[0..errlen) naming what is wrong. address is only read.
 */
int ipuof_addr_parse(const char *address, struct ipuof_addr *out, char *err, size_t errlen);

/* Writes the address as messages show it into buf[0..len): "host:port", "[v6]:port" or
 * "unix:/path". */
void ipuof_addr_format(const struct ipuof_addr *a, char *buf, size_t len);

/* Records a failure of ours on c (class plain, recovery none) and returns code. */
int ipuof_err_set(ipuof_client *c, int code, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Copies an Error from the daemon into *dst verbatim (e is only read). A missing message
 * becomes the code's ipuof_strerror() text, a missing component "daemon". */
void ipuof_err_from_wire(struct ipuof_err_info *dst, const Ipuof__Error *e);

/* Makes *src the last error on c and returns its code. */
int ipuof_err_report(ipuof_client *c, const struct ipuof_err_info *src);

/* Clears the last error: called at the start of every public call that does work. */
void ipuof_err_clear(ipuof_client *c);

/* IPUOF_OK when c has a connection, else IPUOF_E_CLOSED with a sentence on c. */
int ipuof_require_connection(ipuof_client *c);

/* ---- conn.c ------------------------------------------------------------------------------ */

/*
 * Opens a socket to a (TCP: every address getaddrinfo returns, in order, within one connect
 * deadline; TCP_NODELAY set) and leaves it blocking in c->fd. Does not speak the protocol.
 * Returns IPUOF_OK, or IPUOF_E_IO / IPUOF_E_TIMEOUT / IPUOF_E_NOMEM with a sentence naming
 * c->address on c.
 */
int ipuof_conn_open(ipuof_client *c, const struct ipuof_addr *a);

/* Closes c's connection, if any, and forgets what it held (partition, admin right). The
 * last error and a pending notice are kept. */
void ipuof_conn_close(ipuof_client *c);

/*
 * Sends req (its request_id is set here to a fresh id) with an optional payload, then
 * reads frames until the reply to it arrives, recording any notice on the way. timeout_ms
 * bounds the whole exchange (0: no limit).
 *
 * Returns IPUOF_OK with *reply (caller-owned, free with ipuof_frame_header_free()) whose
 * body is want; or the daemon's error code with its Error copied to c; or a failure of the
 * exchange (IPUOF_E_IO, _CLOSED, _TIMEOUT, _PROTO, _VERSION, _TOO_LARGE), after which the
 * connection is closed. pout and pin may be NULL: no payload sent / any reply payload is
 * read and discarded in bounded chunks.
 */
int ipuof_conn_call(ipuof_client *c, Ipuof__Header *req, Ipuof__Header__BodyCase want,
                    int timeout_ms, const struct ipuof_payload_out *pout,
                    struct ipuof_payload_in *pin, Ipuof__Header **reply);

/*
 * Reads the frames the daemon sent while no request was pending (notices) without waiting
 * for more. Returns IPUOF_OK, or the failure that closed the connection (an end of stream
 * included) with a sentence on c; a notice read before it stays pending.
 */
int ipuof_conn_poll_notices(ipuof_client *c);

#endif /* IPUOF_CLIENT_INTERNAL_H */
