/*
 * fakesrv.h — a fake ipuofd for the unit tests of libipuof-client: a thread that accepts one
 * connection on 127.0.0.1:0, reads frames with the codec and answers with a script.
 *
 * The server thread never calls cmocka (its longjmp is only safe on the test's own thread):
 * the fs_* helpers record the first thing that went wrong in struct fake, and fake_stop(),
 * on the test's thread, joins the thread and fails the test if anything did. What a script
 * reads from the test (arg, ctx) is set after fake_start() and before the client connects;
 * what it records (steps, ctx) is read by the test after fake_stop().
 *
 * Request ids: every frame the client sends carries a fresh request id, larger than the
 * last one, except a ModelChunk, which repeats the id of its compile request.
 */
#ifndef IPUOF_FAKESRV_H
#define IPUOF_FAKESRV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ipuof.pb-c.h"
#include "ipuof/client.h"

struct fake;

/* Runs on the server thread with the accepted connection fd, which is closed after it. */
typedef void (*fake_script)(struct fake *f, int fd);

struct fake {
    int lfd;                  /* the listening socket */
    int port;
    char addr[64];            /* "127.0.0.1:PORT", for ipuof_client_connect() */
    pthread_t thread;
    fake_script script;
    uint64_t max_payload;     /* announced in the HelloReply */
    int rcvbuf;               /* SO_RCVBUF of the accepted socket; 0: default */
    int failed;               /* set by the server thread */
    char why[256];            /* the first failure */
    uint64_t last_id;         /* request id of the last frame read */
    uint32_t header_len;      /* of the last frame read */
    uint8_t *payload;         /* payload of the last frame read (owned) */
    uint32_t payload_len;
    int arg;                  /* free for the test: read by its script */
    int steps;                /* script steps that saw what they expected */
    void *ctx;                /* the test's own record of what its script saw */
};

/*
 * Starts a fake that runs script on the first connection and announces max_payload in its
 * HelloReply. rcvbuf (0: default) is set before listening so the accepted socket starts
 * with it. Fails the test when the socket or the thread cannot be set up.
 */
void fake_start(struct fake *f, fake_script script, uint64_t max_payload, int rcvbuf);

/* Joins the fake and fails the test if its script saw something wrong. */
void fake_stop(struct fake *f);

/* Records the first failure of the server thread (why is copied). */
void fake_fail(struct fake *f, const char *why);

/* ---- on the server thread ---- */

/*
 * Reads one frame: returns its header (free with ipuof_frame_header_free), its payload in
 * f->payload / f->payload_len. NULL at end of stream (recorded unless eof_ok) or on a bad
 * frame (recorded).
 */
Ipuof__Header *fs_read(struct fake *f, int fd, int eof_ok);

/* Reads a frame that must carry body want; NULL (and a recorded failure) otherwise. */
Ipuof__Header *fs_expect(struct fake *f, int fd, Ipuof__Header__BodyCase want);

/* Writes exactly len raw bytes; 0, or -1 on an error (not recorded). */
int fs_write_all(int fd, const void *buf, size_t len);

/* Sends h and plen payload bytes; a failure is recorded. */
void fs_send(struct fake *f, int fd, const Ipuof__Header *h, const void *payload,
             uint32_t plen);

/* As fs_send, with version (not 0) written into the frame head in place of the codec's. */
void fs_send_version(struct fake *f, int fd, const Ipuof__Header *h, const void *payload,
                     uint32_t plen, unsigned version);

/* Sends an Error (code, component, msg; default class, no recovery) answering request id. */
void fs_send_error(struct fake *f, int fd, uint64_t id, int code, const char *component,
                   const char *msg);

/* Answers the Hello req (only read) with f->max_payload as the payload limit, granting
 * admin rights when admin is not 0. */
void fs_hello_reply(struct fake *f, int fd, const Ipuof__Header *req, int admin);

/* Reads the Hello and answers it without admin rights; 0 on success, -1 when no Hello came
 * (recorded). */
int fs_hello(struct fake *f, int fd);

/* Reads an Attach and grants partition "p" of IPUs 0 and 1; 0 on success, -1 otherwise. */
int fs_attach(struct fake *f, int fd);

/* Reads a FreeModelRequest, which must be for model_id, and answers it. */
void fs_free_model(struct fake *f, int fd, uint32_t model_id);

/* Reads until the client closes; any frame that arrives is a failure. */
void fs_expect_eof(struct fake *f, int fd);

/* Waits (up to 5 s of silence) until the client closes its end, discarding what it sends,
 * so the script's last frames are not cut off. */
void fs_wait_eof(struct fake *f, int fd);

/* ---- on the test's thread ---- */

/* A handle connected to f and attached to two IPUs (fs_hello + fs_attach on the other end),
 * with a 3 s connect timeout and the given request timeout. */
ipuof_client *new_attached(const struct fake *f, int request_ms);

/* Checks rc and the handle's last error (both want) and its sentence, which must contain
 * needle when needle is not NULL. */
void assert_error(const ipuof_client *c, int rc, int want, const char *needle);

#endif
