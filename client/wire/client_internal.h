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
#include <sys/uio.h>

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

/* A partition's name: 1 to 63 letters, digits, '-', '_' or '.' (the daemon's limit). */
#define IPUOF_PARTITION_NAME_MAX 63

/* The daemons a partition spanning a Pod may name (IPUOF_POD_HOSTS, a config file's
 * attributes."Pod hosts"): a daemon and its 16 peers, names of at most 63 bytes. */
#define IPUOF_POD_HOSTS_MAX 17
#define IPUOF_POD_HOST_NAME_MAX 63

/* Where the program's ipuofd is and which partition it uses, when the program names
 * neither (ipuof_conf.c). */
struct ipuof_target {
    char address[IPUOF_ADDRESS_MAX];             /* "host:port" or "unix:/path" */
    char partition[IPUOF_PARTITION_NAME_MAX + 1]; /* "" when none is named */
    int gcd;                                      /* -1 when none is named */
    /* attributes."Pod hosts": the partition's daemons by their [pod] names in rank order,
     * this file's server among them (0: the partition is on one daemon) */
    int n_pod_hosts;
    char pod_hosts[IPUOF_POD_HOSTS_MAX][IPUOF_POD_HOST_NAME_MAX + 1];
    char source[420];  /* what named them: a config file's path, "IPUOF_VIPU_API_HOST",
                        * "IPUOF_SERVER" or "the default" */
    /* servers[0]'s TLS fields of a config file ("" when not given; IPUOF_TLS_* win):
     * tls_ca_file, tls_cert_file, tls_key_file, tls_server_name (client/wire/tls.c) */
    char tls[4][512];
};

/* One error as the handle keeps it: ours, or the daemon's copied verbatim. */
struct ipuof_err_info {
    int code;                     /* IPUOF_OK or an IPUOF_E_* code */
    int error_class;              /* enum ipuof_error_class */
    int recovery;                 /* enum ipuof_recovery */
    char component[IPUOF_COMPONENT_MAX];
    char msg[IPUOF_ERRMSG_MAX];
};

struct ssl_st;
struct ssl_ctx_st;

struct ipuof_client {
    int fd;                       /* -1 when not connected */
    struct ssl_st *tls;           /* the connection's TLS (tls.c), NULL: plain */
    struct ssl_ctx_st *tls_ctx;   /* made at the first TLS connect, kept until free */
    int tls_has_cert;             /* it presents a client certificate */
    int connect_ms;               /* 0: no limit */
    int request_ms;               /* 0: no limit */
    char *name;                   /* NULL: the program name */
    char *auth_token;             /* NULL: none */
    char *admin_token;            /* NULL: none */
    char address[IPUOF_ADDRESS_MAX]; /* as shown in messages: "127.0.0.1:50052", "unix:/run/x" */
    int ever_connected;           /* a connection existed and was closed since */
    uint64_t last_request_id;     /* request ids are last_request_id + 1, never 0 */
    uint64_t conn_gen;            /* counts connections opened; a model keeps its own */
    uint64_t attach_gen;          /* counts successful attaches; a model keeps its own */
    uint64_t abandoned_id;        /* an upload the daemon refused while chunks were on the
                                     way: its later Errors (one per chunk) are dropped */
    struct ipuof_frame_limits lim; /* what this side accepts from the daemon */
    /* ipuof_client_set_clock_options(): the clock's inputs of later compiles */
    unsigned clock_io_tiles, clock_predict_replicas;
    int clock_synthetic;
    double clock_amp;

    /* From the HelloReply of the current connection. */
    int admin;
    unsigned client_id;
    unsigned num_ipus;
    uint64_t peer_max_payload;
    uint32_t peer_max_header;
    char server_version[64];

    char job_key[IPUOF_JOB_KEY_MAX + 1]; /* ipuof_client_set_job_key; "" when not set */

    /* What the lookup found when the caller named no address (ipuof_target_lookup); all
     * "" and gcd -1 after a connect to an address the caller gave. */
    struct ipuof_target target;

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

/* ---- addr.c: server addresses ----------------------------------------------------------- */

/*
 * Parses address ("HOST:PORT", "[V6]:PORT", "HOST", "V6", "unix:/path") into *out. A
 * missing port is IPUOF_DEFAULT_PORT. Returns IPUOF_OK, or IPUOF_E_INVAL with a sentence
 * in err[0..errlen) naming what is wrong. address is only read.
 */
int ipuof_addr_parse(const char *address, struct ipuof_addr *out, char *err, size_t errlen);

/* Writes the address as messages show it into buf[0..len): "host:port", "[v6]:port" or
 * "unix:/path". */
void ipuof_addr_format(const struct ipuof_addr *a, char *buf, size_t len);

/* ---- ipuof_conf.c: IPUoF config files and PopRun's variables --------------------------- */

/* 1 when name is a usable partition name (1 to IPUOF_PARTITION_NAME_MAX letters, digits,
 * '-', '_' or '.'), else 0. */
int ipuof_partition_name_ok(const char *name);

/*
 * Finds where to connect and which partition to use when the program names neither:
 * IPUOF_CONFIG_PATH, else IPUOF_VIPU_API_HOST (+ _PORT, _PARTITION_ID, _GCD_ID), else
 * ~/.ipuof.conf.d/ *.conf, else IPUOF_SERVER, else 127.0.0.1:50052 (ipuof_conf.c says how).
 * Returns IPUOF_OK with *t filled, or IPUOF_E_INVAL with a sentence in err naming the file
 * or variable and the field that is wrong, and what would be right.
 */
int ipuof_target_lookup(struct ipuof_target *t, char *err, size_t errlen);

/* Reads one IPUoF config file (path, shown in messages) into *t. 0, or -1 with a sentence
 * in err naming the file and the field. ipuof_conf_parse does the same for text[0..len)
 * already read (only read). */
int ipuof_conf_read(const char *path, struct ipuof_target *t, char *err, size_t errlen);
int ipuof_conf_parse(const char *path, const char *text, size_t len, struct ipuof_target *t,
                     char *err, size_t errlen);

/* ---- err.c: the last error on a handle, sentences, bounded copies ------------------------ */

/* Records a failure of ours on c (class plain, recovery none) and returns code. */
int ipuof_err_set(ipuof_client *c, int code, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The same into *e, for a handle of the library's own that keeps its last refusal (the
 * compile options, compile_opts.c). */
int ipuof_err_info_set(struct ipuof_err_info *e, int code, const char *component,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The same for objects without a client handle (data loader, IDX reader): writes the
 * sentence fmt makes into buf[0..len) (nothing when buf is NULL or len 0) and returns
 * code. */
int ipuof_errbuf_set(char *buf, size_t len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Copies src into dst[0..len) (len >= 1), truncated, NUL-terminated; NULL becomes "".
 * For the strings of a wire reply copied into a public struct's fixed arrays. */
void ipuof_copy_str(char *dst, size_t len, const char *src);

/* Copies an Error from the daemon into *dst verbatim (e is only read). A missing message
 * becomes the code's ipuof_strerror() text, a missing component "daemon". */
void ipuof_err_from_wire(struct ipuof_err_info *dst, const Ipuof__Error *e);

/* Makes *src the last error on c and returns its code. */
int ipuof_err_report(ipuof_client *c, const struct ipuof_err_info *src);

/* Clears the last error: called at the start of every public call that does work. */
void ipuof_err_clear(ipuof_client *c);

/* IPUOF_OK when c has a connection, else IPUOF_E_CLOSED with a sentence on c. */
int ipuof_require_connection(ipuof_client *c);

/* ---- process.c ------------------------------------------------------------------------- */

/*
 * The job of several processes this one joins (process.c): the key its processes share
 * (explicit when not NULL or "", else IPUOF_JOB_KEY, else the launcher's) into key, and
 * its partition name (explicit when not NULL or "", else IPUOF_PARTITION, else one made
 * from the launcher's job id, else one made from the key, else the default "ipuof-job")
 * into name. IPUOF_OK, or IPUOF_E_INVAL with a sentence in err when there is neither a key
 * nor a name of its own (the default name alone would join unrelated programs' jobs) or
 * IPUOF_JOB_KEY is too long.
 */
int ipuof_job_identity(const char *explicit_name, const char *explicit_key, unsigned process_id,
                       unsigned num_processes, char *name, size_t name_len, char *key,
                       size_t key_len, char *err, size_t errlen);

/* ---- devices.c --------------------------------------------------------------------------- */

/* If a notice took the partition away, reports its error once (it becomes the last error)
 * and returns its code; IPUOF_OK when none is pending. */
int ipuof_take_notice(ipuof_client *c);

/* ---- conn.c: the socket, deadlines, raw frames ------------------------------------------ */

/* One stretch of I/O under a deadline, and what it is for the messages. */
struct ipuof_io {
    ipuof_client *c;
    int64_t deadline;             /* CLOCK_MONOTONIC ms; -1: none */
    int timeout_ms;               /* as given, for messages; 0: no limit */
    const char *what;             /* "the status request"; borrowed, must outlive the io */
    /* Waits for events on fd within the deadline (conn.c's, which probes a daemon that
     * stays silent): IPUOF_OK, or the error set on c. A pointer so that tls.c, below
     * conn.c, waits the same way without calling up into it. */
    int (*wait)(struct ipuof_io *io, int fd, short events);
};

/* Starts io on c: the deadline is timeout_ms from now (0: none). */
void ipuof_io_init(struct ipuof_io *io, ipuof_client *c, int timeout_ms, const char *what);

/* Moves the deadline to timeout_ms from now: for exchanges whose timeout bounds the gap
 * between frames rather than the whole exchange. */
void ipuof_io_rearm(struct ipuof_io *io);

/* Milliseconds left before the deadline, for poll(): -1 without one, 0 when it passed. */
int ipuof_io_left(const struct ipuof_io *io);

/* Records on the handle that io timed out and returns IPUOF_E_TIMEOUT. */
int ipuof_io_timeout(struct ipuof_io *io);

/* Sends iov[0..iovcnt) completely (any count; the array is advanced in place, the bytes
 * it points at are only read). Returns IPUOF_OK or IPUOF_E_IO / _TIMEOUT with a sentence. */
int ipuof_io_send(struct ipuof_io *io, struct iovec *iov, int iovcnt);

/*
 * Where the payload of a reply goes, chosen once its header has been read. place() is
 * called for a frame that carries reply_id and is neither a notice nor an Error, with the
 * header (borrowed for the call) and the payload's length. It returns IPUOF_OK with *iov
 * pointing at *iovcnt buffers (owned by arg, borrowed until the payload is read) whose
 * lengths add up to payload_len (*iovcnt 0: discard the payload); or an error code with a
 * sentence on c, and the payload is read and discarded. what names the request.
 */
struct ipuof_sink {
    int (*place)(void *arg, ipuof_client *c, const char *what, const Ipuof__Header *h,
                 uint32_t payload_len, struct iovec **iov, int *iovcnt);
    void *arg;
};

/*
 * Reads one whole frame: head, header, payload. The payload goes where sink says for a
 * frame answering reply_id (see struct ipuof_sink; sink may be NULL) and is discarded in
 * bounded chunks otherwise. *sink_rc receives place()'s result (IPUOF_OK when it was not
 * called). Returns IPUOF_OK with *out caller-owned (ipuof_frame_header_free()), or a failure
 * of the stream (IPUOF_E_IO, _CLOSED, _TIMEOUT, _PROTO, _VERSION, _TOO_LARGE, _NOMEM) with a
 * sentence on the handle; the stream is then out of step and the caller closes it.
 */
int ipuof_io_recv_frame(struct ipuof_io *io, uint64_t reply_id, const struct ipuof_sink *sink,
                        int *sink_rc, Ipuof__Header **out);

/*
 * Opens a socket to a (TCP: every address getaddrinfo returns, in order, within one connect
 * deadline; TCP_NODELAY set) and leaves it blocking in c->fd. Does not speak the protocol.
 * Returns IPUOF_OK, or IPUOF_E_IO / IPUOF_E_TIMEOUT / IPUOF_E_NOMEM with a sentence naming
 * c->address on c.
 */
int ipuof_conn_open(ipuof_client *c, const struct ipuof_addr *a);

/* TLS (tls.c): on the connected TCP socket c->fd, when the environment asks for it
 * (IPUOF_TLS_CA_FILE, IPUOF_TLS): the handshake, the daemon verified as host (or
 * IPUOF_TLS_SERVER_NAME). IPUOF_OK (also when TLS is off) or the error on the handle. */
int ipuof_tls_open(ipuof_client *c, struct ipuof_io *io, const char *host);
/* Ends c's TLS session (before its socket closes); the context stays. */
void ipuof_tls_close(ipuof_client *c);
/* ipuof_tls_close and the context (the handle is being freed). */
void ipuof_tls_free(ipuof_client *c);
/* Writes every byte of iov[0..iovcnt) / reads exactly len bytes, over c->tls. */
int ipuof_tls_send(struct ipuof_io *io, struct iovec *iov, int iovcnt);
int ipuof_tls_recv(struct ipuof_io *io, void *buf, size_t len);
/* 1 when decrypted bytes wait in c's TLS session (a poll of the socket would miss them). */
int ipuof_tls_pending(const ipuof_client *c);

/* Closes c's connection, if any, and forgets what it held (partition, admin right). The
 * last error and a pending notice are kept. */
void ipuof_conn_close(ipuof_client *c);

/* ---- xchg.c: requests and the frames that answer them ------------------------------------ */

/*
 * One request in flight: its id, its I/O deadline, and whether the stream broke. Begin it
 * with ipuof_xchg_begin(), send the request (and any follow-up frames with the same id)
 * with ipuof_xchg_send(), read the answers with ipuof_xchg_recv(), and finish with
 * ipuof_xchg_end(), which closes the connection when the stream can no longer be trusted.
 * The struct must stay where it is between begin and end (io.what points into it).
 */
struct ipuof_xchg {
    struct ipuof_io io;
    uint64_t id;                  /* the request id every frame of the exchange carries */
    int frames_sent;
    int broken;                   /* 1: close the connection at the end */
    char what[64];                /* "the compile request" */
};

/*
 * Starts an exchange for req on c: checks there is a connection, gives req a fresh request
 * id, and starts the deadline (timeout_ms, 0: none). req is only read. Returns IPUOF_OK or
 * IPUOF_E_CLOSED with a sentence; ipuof_xchg_end() may be called either way.
 */
int ipuof_xchg_begin(ipuof_client *c, struct ipuof_xchg *x, Ipuof__Header *req, int timeout_ms);

/*
 * Sends one frame of the exchange: h (its request_id must be x->id; only read) followed by
 * the payload payload[0..n) (borrowed for the call, sent straight from those buffers, n may
 * be 0). The frame is checked first against the daemon's announced header and payload
 * limits (IPUOF_E_TOO_LARGE, nothing sent). A send that fails marks the stream broken; when
 * the daemon said why before closing, its Error is returned.
 */
int ipuof_xchg_send(struct ipuof_xchg *x, const Ipuof__Header *h, const struct iovec *payload,
                    int n);

/*
 * Reads the next frame answering x, recording any notice on the way (notices do not move the
 * deadline). With nowait, returns IPUOF_OK and *out NULL when nothing is readable now.
 * Returns IPUOF_OK with *out (caller-owned, ipuof_frame_header_free()) of any body but Error
 * (the caller checks it, see ipuof_xchg_unexpected()); the daemon's error code, copied to c,
 * when it answered with an Error; sink's error when place() refused the payload (the stream
 * stays in step); or a failure of the stream, which marks it broken.
 */
int ipuof_xchg_recv(struct ipuof_xchg *x, const struct ipuof_sink *sink, int nowait,
                    Ipuof__Header **out);

/* Records that the daemon answered x with a frame of the wrong body (h, only read), marks
 * the stream broken and returns IPUOF_E_PROTO. */
int ipuof_xchg_unexpected(struct ipuof_xchg *x, const Ipuof__Header *h);

/* Ends x with status rc: when the stream broke, the connection is closed (and an
 * IPUOF_E_CLOSED sentence quotes a notice the daemon sent before closing). Returns rc. */
int ipuof_xchg_end(struct ipuof_xchg *x, int rc);

/*
 * One request and its reply: sends req (given a fresh request id) with an optional payload,
 * then reads frames until the reply to it arrives, recording any notice on the way.
 * timeout_ms bounds the whole exchange (0: no limit).
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
