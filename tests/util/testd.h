/*
 * testd.h — helpers for integration tests: start a real ipuofd on an ephemeral loopback
 * port with a private admin socket, stop it, and speak raw frames to it.
 *
 * IPUOFD_BIN names the daemon binary (default build/bin/ipuofd). Each daemon gets its own
 * temporary directory (port file, admin socket, config, log) removed by testd_stop().
 */
#ifndef IPUOF_TESTD_H
#define IPUOF_TESTD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipuof.pb-c.h"

struct testd {
    pid_t pid;
    int port;
    char dir[64];
    char addr[64];         /* "127.0.0.1:PORT" */
    char admin_addr[128];  /* "unix:DIR/admin.sock" */
    char admin_path[100];
    char config[100];
    char log[100];
};

/*
 * Starts a daemon with --listen 127.0.0.1:0 --foreground --admin-socket and the extra
 * arguments (NULL-terminated, may be NULL). config_text, when not NULL, is written to a
 * config file passed with --config. Waits up to 10 s for the port file. 0 or -1.
 */
int testd_start(struct testd *d, const char *config_text, const char *const *extra);

/* As testd_start, with --listen listen instead of 127.0.0.1:0; NULL gives no --listen flag
 * (the config file's listen applies; it should keep a port of 0). d->addr is still
 * 127.0.0.1:PORT, so the address must accept loopback connections. */
int testd_start_listen(struct testd *d, const char *listen, const char *config_text,
                       const char *const *extra);

/* Rewrites the config file (for reload tests). */
int testd_write_config(struct testd *d, const char *config_text);

/* Sends sig and waits up to timeout_ms for exit. Returns the exit status (0..255),
 * 128+signal when killed by a signal, or -1 on timeout (the daemon is then killed). */
int testd_signal_wait(struct testd *d, int sig, int timeout_ms);

/* SIGTERM + wait; then removes the directory. Returns the exit status as above. */
int testd_stop(struct testd *d);

/*
 * The daemon a test started, from testd_start() until it stops it itself, or NULL: a test
 * that an assertion may cut short sets it, and its teardown testd_stop_live() stops it.
 */
extern struct testd *testd_live;

/* A cmocka teardown (state unused): stops testd_live when it is set and clears it. 0. */
int testd_stop_live(void **state);

/* For a test file's own teardown over its static struct testd: stops d (testd_stop) when it
 * was started and not stopped since (an assertion cut the test short), then zeroes it. 0,
 * a cmocka teardown's return. */
int testd_reset(struct testd *d);

/* True when the daemon's log contains needle. */
int testd_log_contains(const struct testd *d, const char *needle);

/* A TCP port on loopback that nobody listens on now (bound and released), for a config
 * that needs a fixed port (a Pod's); a clash with a later bind is possible, so a test
 * retries where it matters. Returns the port, or -1 with the failing call on stderr (the
 * daemon given it then refuses to start, and the test fails there). */
int testd_free_port(void);

/* ---- raw frames ---- */

/* A blocking TCP connection to 127.0.0.1:port, or -1. */
int raw_connect(int port);

/* Sends a frame with h (and no payload). 0 or -1. */
int raw_send(int fd, const Ipuof__Header *h);

/*
 * A raw connection to 127.0.0.1:port that said hello and, when nipus > 0, attached that
 * many IPUs (request id 2). Returns the socket, or -1 when any step failed.
 */
int raw_session(int port, unsigned nipus);

/* Sends a frame with h and len payload bytes. 0 or -1. */
int raw_send_payload(int fd, const Ipuof__Header *h, const void *payload, size_t len);

/* Sends a hello with the given protocol version and request id 1. 0 or -1. */
int raw_hello(int fd, uint32_t version);

/*
 * Receives one frame within timeout_ms. Returns the header (free with
 * ipuof_frame_header_free) or NULL on EOF, error or timeout (*eof set to 1 on EOF/reset).
 */
Ipuof__Header *raw_recv(int fd, int timeout_ms, int *eof);

/* As raw_recv, and returns the frame's payload in *payload (malloc'd, caller frees; NULL
 * when empty) and its length in *len. */
Ipuof__Header *raw_recv_payload(int fd, int timeout_ms, void **payload, size_t *len);

/* Reads a whole file into a malloc'd buffer (caller frees); NULL on error. */
void *read_file(const char *path, size_t *len);

/* Reads until EOF or timeout; returns 1 if the peer closed within timeout_ms. */
int raw_wait_closed(int fd, int timeout_ms);

#endif
