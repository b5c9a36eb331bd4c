/*
 * test_daemon.c — integration tests against a real ipuofd on an ephemeral loopback port,
 * driven through libipuof-client and through raw frames.
 *
 * Each test starts its own daemon (a fresh inventory, its own admin socket) and stops it
 * with SIGTERM, asserting exit status 0.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "ipuof/client.h"
#include "testd.h"

/* The daemon of the running test; the teardown stops it even when an assertion failed. */
static struct testd d;

static int
teardown(void **state)
{
    (void)state;
    if (d.pid > 0 || d.dir[0] != '\0')
        testd_stop(&d);
    memset(&d, 0, sizeof d);
    return 0;
}

static ipuof_client *
connect_as(const struct testd *td, const char *name, const char *addr)
{
    ipuof_client *c = ipuof_client_new();
    int rc;

    assert_non_null(c);
    ipuof_client_set_name(c, name);
    rc = ipuof_client_connect(c, addr ? addr : td->addr);
    if (rc != IPUOF_OK)
        fail_msg("connect %s: %s: %s", name, ipuof_status_name(rc), ipuof_client_errmsg(c));
    return c;
}

static unsigned
attach_n(ipuof_client *c, unsigned n, const char *partition)
{
    struct ipuof_attach_opts o = {.num_ipus = n, .partition_name = partition};
    unsigned ids[8];
    size_t nid = 0;
    int rc = ipuof_attach(c, &o, ids, 8, &nid);

    if (rc != IPUOF_OK)
        fail_msg("attach %u: %s: %s", n, ipuof_status_name(rc), ipuof_client_errmsg(c));
    assert_int_equal(nid, n);
    return ids[0];
}

/* Looks IPU id up in a fresh status report. */
static void
ipu_info(ipuof_client *c, unsigned id, struct ipuof_ipu_info *out, ipuof_status_report **rep)
{
    int rc = ipuof_status(c, rep);

    if (rc != IPUOF_OK)
        fail_msg("status: %s", ipuof_client_errmsg(c));
    assert_int_equal(ipuof_status_report_ipu(*rep, id, out), IPUOF_OK);
    assert_int_equal(out->id, id);
}

static void
stop_ok(struct testd *td)
{
    assert_int_equal(testd_stop(td), 0);
    memset(td, 0, sizeof *td);
}

static void
test_two_clients_see_each_other(void **state)
{
    ipuof_client *a, *b;
    ipuof_status_report *rep;
    struct ipuof_ipu_info info;
    unsigned first_a, first_b;
    int free_count = 0;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    a = connect_as(&d, "alice", NULL);
    b = connect_as(&d, "bob", NULL);
    first_a = attach_n(a, 1, "pa");
    first_b = attach_n(b, 2, NULL);
    assert_int_not_equal(first_a, first_b);
    assert_string_equal(ipuof_partition_name(a), "pa");

    ipu_info(b, first_a, &info, &rep);
    assert_int_equal(info.state, IPUOF_IPU_ATTACHED);
    assert_string_equal(info.partition, "pa");
    assert_true(info.held);
    assert_string_equal(info.holder_name, "alice");
    assert_int_equal(info.holder_pid, (unsigned)getpid());
    assert_non_null(strstr(info.holder_peer, "127.0.0.1:"));
    assert_int_equal(info.memory_capacity_bytes, 900ull << 20);
    assert_int_equal(ipuof_status_report_ipu_count(rep), 4);
    assert_int_equal(ipuof_status_report_clients(rep), 2);
    ipuof_status_report_free(rep);

    ipu_info(a, first_b + 1, &info, &rep);
    assert_string_equal(info.holder_name, "bob");
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(ipuof_status_report_ipu(rep, i, &info), IPUOF_OK);
        free_count += info.state == IPUOF_IPU_FREE;
    }
    assert_int_equal(free_count, 1);
    ipuof_status_report_free(rep);

    assert_int_equal(ipuof_detach(a), IPUOF_OK);
    assert_int_equal(ipuof_detach(a), IPUOF_E_NOT_ATTACHED);
    {
        struct ipuof_attach_opts bad = {.num_ipus = 1, .partition_name = "two words"};
        assert_int_equal(ipuof_attach(a, &bad, NULL, 0, NULL), IPUOF_E_INVAL);
        assert_non_null(strstr(ipuof_client_errmsg(a), "letters, digits"));
    }
    ipuof_client_free(a);
    ipuof_client_free(b);
    stop_ok(&d);
}

static void
test_disconnect_frees_ipus(void **state)
{
    ipuof_client *a, *b;
    ipuof_status_report *rep;
    struct ipuof_ipu_info info;
    struct ipuof_attach_opts o = {.num_ipus = 4};

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    a = connect_as(&d, "crasher", NULL);
    b = connect_as(&d, "next", NULL);
    attach_n(a, 4, NULL);
    assert_int_equal(ipuof_attach(b, &o, NULL, 0, NULL), IPUOF_E_BUSY);
    print_message("busy: %s\n", ipuof_client_errmsg(b));
    assert_non_null(strstr(ipuof_client_errmsg(b), "0 of 4 IPUs are free"));
    assert_non_null(strstr(ipuof_client_errmsg(b), "crasher"));
    ipuof_client_free(a); /* no detach: the connection just goes away */
    for (int i = 0; i < 100; i++) {
        ipu_info(b, 3, &info, &rep);
        ipuof_status_report_free(rep);
        if (info.state == IPUOF_IPU_FREE)
            break;
        usleep(10000);
    }
    assert_int_equal(info.state, IPUOF_IPU_FREE);
    attach_n(b, 4, NULL);
    ipuof_client_free(b);
    stop_ok(&d);
}

static void
test_reset_tells_holder(void **state)
{
    ipuof_client *holder, *admin, *user;
    ipuof_status_report *rep;
    struct ipuof_ipu_info info;
    size_t n = 0;
    int cls, rec, rc;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    holder = connect_as(&d, "holder", NULL);
    user = connect_as(&d, "user", NULL);
    admin = connect_as(&d, "admin", d.admin_addr);
    assert_true(ipuof_client_is_admin(admin));
    assert_false(ipuof_client_is_admin(user));
    attach_n(holder, 2, "work");

    rc = ipuof_reset(user, IPUOF_RESET_ALL, 0, NULL, 1, NULL);
    assert_int_equal(rc, IPUOF_E_AUTH);
    assert_non_null(strstr(ipuof_client_errmsg(user), "admin"));

    rc = ipuof_reset(admin, IPUOF_RESET_PARTITION, 0, "work", 0, &n);
    assert_int_equal(rc, IPUOF_E_BUSY);
    assert_non_null(strstr(ipuof_client_errmsg(admin), "--force"));
    assert_non_null(strstr(ipuof_client_errmsg(admin), "holder"));

    assert_int_equal(ipuof_reset(admin, IPUOF_RESET_IPU, 9, NULL, 1, &n), IPUOF_E_NOTFOUND);
    assert_int_equal(ipuof_reset(admin, IPUOF_RESET_PARTITION, 0, "nope", 1, &n),
                     IPUOF_E_NOTFOUND);

    rc = ipuof_reset(admin, IPUOF_RESET_IPU, 1, NULL, 1, &n);
    assert_int_equal(rc, IPUOF_OK);
    assert_int_equal(n, 2); /* the whole partition holding IPU 1 */

    rc = ipuof_detach(holder);
    assert_int_equal(rc, IPUOF_E_DEVICE_RESET);
    assert_int_equal(ipuof_client_last_error(holder, &cls, &rec, NULL), IPUOF_E_DEVICE_RESET);
    assert_int_equal(cls, IPUOF_ERROR_RECOVERABLE);
    assert_int_equal(rec, IPUOF_RECOVERY_REATTACH);
    print_message("holder told: %s\n", ipuof_client_errmsg(holder));
    assert_non_null(strstr(ipuof_client_errmsg(holder), "reset"));
    assert_null(ipuof_partition_name(holder));

    ipu_info(user, 0, &info, &rep);
    assert_int_equal(info.state, IPUOF_IPU_FREE);
    ipuof_status_report_free(rep);
    /* The holder may attach again. */
    attach_n(holder, 2, "work");
    ipuof_client_free(holder);
    ipuof_client_free(user);
    ipuof_client_free(admin);
    stop_ok(&d);
}

static void
test_garbage_and_huge_frames(void **state)
{
    ipuof_client *good;
    ipuof_status_report *rep;
    uint8_t head[IPUOF_FRAME_HEAD_LEN];
    unsigned seed = 7;
    uint8_t *junk;
    Ipuof__Header *h;
    int fd, eof;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    good = connect_as(&d, "bystander", NULL);

    /* 1 MiB of random bytes. */
    junk = malloc(1 << 20);
    assert_non_null(junk);
    for (size_t i = 0; i < (1u << 20); i++)
        junk[i] = (uint8_t)rand_r(&seed);
    fd = raw_connect(d.port);
    assert_true(fd >= 0);
    (void)send(fd, junk, 1 << 20, MSG_NOSIGNAL); /* may fail once the daemon hangs up */
    assert_true(raw_wait_closed(fd, 5000));
    close(fd);
    free(junk);

    /* A frame announcing 4 GiB before the hello: refused with an error, then closed. */
    fd = raw_connect(d.port);
    ipuof_frame_head_encode(head, 8, 0xffffffffu);
    assert_int_equal(send(fd, head, sizeof head, MSG_NOSIGNAL), (ssize_t)sizeof head);
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_int_equal(h->error->code, IPUOF_E_TOO_LARGE);
    ipuof_frame_header_free(h);
    assert_true(raw_wait_closed(fd, 5000));
    close(fd);

    /* The same after a hello. */
    fd = raw_connect(d.port);
    assert_int_equal(raw_hello(fd, IPUOF_PROTOCOL_VERSION), 0);
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->body_case, IPUOF__HEADER__BODY_HELLO_REPLY);
    ipuof_frame_header_free(h);
    assert_int_equal(send(fd, head, sizeof head, MSG_NOSIGNAL), (ssize_t)sizeof head);
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->error->code, IPUOF_E_TOO_LARGE);
    print_message("4 GiB frame: %s\n", h->error->message);
    ipuof_frame_header_free(h);
    close(fd);

    /* Everyone else is still served. */
    assert_int_equal(ipuof_status(good, &rep), IPUOF_OK);
    assert_int_equal(ipuof_status_report_ipu_count(rep), 4);
    ipuof_status_report_free(rep);
    ipuof_client_free(good);
    stop_ok(&d);
}

static void
test_version_mismatch(void **state)
{
    Ipuof__Header *h;
    int fd, eof;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_connect(d.port);
    assert_int_equal(raw_hello(fd, 7), 0);
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_int_equal(h->error->code, IPUOF_E_VERSION);
    print_message("version: %s\n", h->error->message);
    assert_non_null(strstr(h->error->message, "version 7"));
    assert_non_null(strstr(h->error->message, "version 1"));
    ipuof_frame_header_free(h);
    assert_true(raw_wait_closed(fd, 5000));
    close(fd);
    stop_ok(&d);
}

static void
test_request_before_hello(void **state)
{
    Ipuof__Header req = IPUOF__HEADER__INIT, *h;
    Ipuof__StatusRequest sr = IPUOF__STATUS_REQUEST__INIT;
    int fd, eof;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_connect(d.port);
    req.request_id = 5;
    req.body_case = IPUOF__HEADER__BODY_STATUS;
    req.status = &sr;
    assert_int_equal(raw_send(fd, &req), 0);
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->request_id, 5);
    assert_int_equal(h->error->code, IPUOF_E_PROTO);
    assert_non_null(strstr(h->error->message, "hello"));
    ipuof_frame_header_free(h);
    assert_true(raw_wait_closed(fd, 5000));
    close(fd);
    stop_ok(&d);
}

/* Many pipelined requests are all answered, in order (fairness yields resume correctly). */
static void
test_pipelined_requests(void **state)
{
    enum { N = 500 };
    Ipuof__Header req = IPUOF__HEADER__INIT, *h;
    Ipuof__HealthRequest hr = IPUOF__HEALTH_REQUEST__INIT;
    int fd, eof;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_connect(d.port);
    assert_int_equal(raw_hello(fd, IPUOF_PROTOCOL_VERSION), 0);
    h = raw_recv(fd, 5000, &eof);
    ipuof_frame_header_free(h);
    req.body_case = IPUOF__HEADER__BODY_HEALTH;
    req.health = &hr;
    for (int i = 1; i <= N; i++) {
        req.request_id = (uint64_t)i + 100;
        assert_int_equal(raw_send(fd, &req), 0);
    }
    for (int i = 1; i <= N; i++) {
        h = raw_recv(fd, 5000, &eof);
        assert_non_null(h);
        assert_int_equal(h->request_id, (uint64_t)i + 100);
        assert_true(h->health_reply->ready);
        ipuof_frame_header_free(h);
    }
    close(fd);
    stop_ok(&d);
}

static void
test_wait_queue(void **state)
{
    ipuof_client *a, *b;
    struct ipuof_attach_opts o = {.num_ipus = 4, .wait = 1, .wait_timeout_ms = 300};
    struct timespec t0, t1;
    pid_t child;
    int rc, status;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    a = connect_as(&d, "first", NULL);
    b = connect_as(&d, "second", NULL);
    attach_n(a, 2, NULL);

    /* A wait that times out names the holder. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = ipuof_attach(b, &o, NULL, 0, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(rc, IPUOF_E_TIMEOUT);
    print_message("wait timeout: %s\n", ipuof_client_errmsg(b));
    assert_non_null(strstr(ipuof_client_errmsg(b), "first"));
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 250);

    /* A wait that succeeds once the holder detaches (from another process). */
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        usleep(200000);
        _exit(ipuof_detach(a) == IPUOF_OK ? 0 : 1);
    }
    o.wait_timeout_ms = 10000;
    rc = ipuof_attach(b, &o, NULL, 0, NULL);
    if (rc != IPUOF_OK)
        fail_msg("waiting attach: %s", ipuof_client_errmsg(b));
    waitpid(child, &status, 0);
    assert_int_equal(WEXITSTATUS(status), 0);
    ipuof_client_free(a);
    ipuof_client_free(b);
    stop_ok(&d);
}

static void
test_sigterm_tells_clients(void **state)
{
    ipuof_client *a;
    int rc;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    a = connect_as(&d, "tenant", NULL);
    attach_n(a, 1, NULL);
    assert_int_equal(testd_signal_wait(&d, SIGTERM, 10000), 0);
    rc = ipuof_detach(a);
    assert_int_not_equal(rc, IPUOF_OK);
    print_message("after SIGTERM: %s: %s\n", ipuof_status_name(rc), ipuof_client_errmsg(a));
    assert_true(rc == IPUOF_E_SHUTDOWN || rc == IPUOF_E_CLOSED || rc == IPUOF_E_IO);
    ipuof_client_free(a);
    testd_stop(&d);
    memset(&d, 0, sizeof d);
}

static void
test_connection_limit(void **state)
{
    ipuof_client *c[3], *extra;
    ipuof_status_report *rep;
    int rc;

    (void)state;
    assert_int_equal(testd_start(&d, "[server]\nmax_connections = 3\n", NULL), 0);
    for (int i = 0; i < 3; i++)
        c[i] = connect_as(&d, "filler", NULL);
    extra = ipuof_client_new();
    rc = ipuof_client_connect(extra, d.addr);
    assert_int_equal(rc, IPUOF_E_TOO_MANY);
    print_message("over the limit: %s\n", ipuof_client_errmsg(extra));
    assert_non_null(strstr(ipuof_client_errmsg(extra), "max_connections"));
    ipuof_client_free(extra);
    ipuof_client_free(c[2]);
    usleep(100000);
    assert_int_equal(ipuof_status(c[0], &rep), IPUOF_OK);
    ipuof_status_report_free(rep);
    extra = connect_as(&d, "late", NULL);
    ipuof_client_free(extra);
    ipuof_client_free(c[0]);
    ipuof_client_free(c[1]);
    stop_ok(&d);
}

static void
test_handshake_and_idle_timeouts(void **state)
{
    Ipuof__Header *h;
    int fd, eof;

    (void)state;
    assert_int_equal(testd_start(&d, "[server]\nhandshake_timeout = 1\nidle_timeout = 1\n", NULL),
                     0);
    fd = raw_connect(d.port); /* says nothing */
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->error->code, IPUOF_E_TIMEOUT);
    assert_non_null(strstr(h->error->message, "hello"));
    ipuof_frame_header_free(h);
    assert_true(raw_wait_closed(fd, 3000));
    close(fd);

    fd = raw_connect(d.port); /* says hello, then nothing */
    assert_int_equal(raw_hello(fd, IPUOF_PROTOCOL_VERSION), 0);
    h = raw_recv(fd, 5000, &eof);
    ipuof_frame_header_free(h);
    h = raw_recv(fd, 5000, &eof);
    assert_non_null(h);
    assert_int_equal(h->error->code, IPUOF_E_TIMEOUT);
    assert_non_null(strstr(h->error->message, "idle"));
    ipuof_frame_header_free(h);
    close(fd);
    stop_ok(&d);
}

/* A client that sends requests but never reads is cut off; the daemon's memory is bounded. */
static void
test_output_cap(void **state)
{
    Ipuof__Header req = IPUOF__HEADER__INIT, *h;
    Ipuof__StatusRequest sr = IPUOF__STATUS_REQUEST__INIT;
    ipuof_client *good;
    ipuof_status_report *rep;
    int fd, eof, small = 4096, sent = 0;

    (void)state;
    assert_int_equal(testd_start(&d,
                                 "[server]\nmax_output_bytes = 1MiB\nmax_payload_bytes = 1024\n"
                                 "max_header_bytes = 65536\n[devices]\nipus = 64\n",
                                 NULL),
                     0);
    fd = raw_connect(d.port);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    assert_int_equal(raw_hello(fd, IPUOF_PROTOCOL_VERSION), 0);
    h = raw_recv(fd, 5000, &eof);
    ipuof_frame_header_free(h);
    req.body_case = IPUOF__HEADER__BODY_STATUS;
    req.status = &sr;
    for (int i = 0; i < 20000; i++) {
        req.request_id = (uint64_t)i + 2;
        if (raw_send(fd, &req) < 0)
            break;
        sent++;
    }
    print_message("sent %d status requests without reading\n", sent);
    good = connect_as(&d, "good", NULL);
    for (int i = 0; i < 200 && !testd_log_contains(&d, "not reading"); i++)
        usleep(10000);
    assert_true(testd_log_contains(&d, "max_output_bytes"));
    assert_int_equal(ipuof_status(good, &rep), IPUOF_OK);
    ipuof_status_report_free(rep);
    ipuof_client_free(good);
    close(fd);
    stop_ok(&d);
}

static void
test_reload(void **state)
{
    ipuof_client *c;

    (void)state;
    assert_int_equal(testd_start(&d, "[log]\nlevel = info\n", NULL), 0);
    assert_int_equal(testd_write_config(&d, "[log]\nlevel = debug\n[devices]\nipus = 8\n"), 0);
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 200 && !testd_log_contains(&d, "configuration reloaded"); i++)
        usleep(10000);
    assert_true(testd_log_contains(&d, "need a restart"));
    c = connect_as(&d, "after-reload", NULL);
    for (int i = 0; i < 200 && !testd_log_contains(&d, "connected from"); i++)
        usleep(10000);
    assert_true(testd_log_contains(&d, "connected from")); /* a debug line: level applied */
    assert_int_equal(testd_write_config(&d, "[log]\nlevel = shouting\n"), 0);
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 200 && !testd_log_contains(&d, "keeping the running"); i++)
        usleep(10000);
    assert_true(testd_log_contains(&d, "keeping the running configuration"));
    ipuof_client_free(c);
    stop_ok(&d);
}

/* Sends an attach of count IPUs that waits (timeout_ms, 0: for ever) on fd (request 2). */
static void
send_wait_attach(int fd, unsigned count, unsigned timeout_ms)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;

    a.num_ipus = count;
    a.wait = 1;
    a.wait_timeout_ms = timeout_ms;
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(raw_send(fd, &h), 0);
}

/* The error code of the next frame on fd within timeout_ms (its message into msg), 0 for
 * any other frame, -1 for none. */
static int
recv_code(int fd, int timeout_ms, char *msg, size_t len)
{
    int eof = 0, rc = -1;
    Ipuof__Header *h = raw_recv(fd, timeout_ms, &eof);

    msg[0] = '\0';
    if (h != NULL) {
        rc = h->body_case == IPUOF__HEADER__BODY_ERROR ? (int)h->error->code : 0;
        if (rc != 0)
            snprintf(msg, len, "%s", h->error->message);
    }
    ipuof_frame_header_free(h);
    return rc;
}

/* A waiter whose IPUs are free but that stands behind an earlier, larger request times out
 * saying so, naming the request ahead (main: "... but not as an aligned group"). */
static void
test_wait_timeout_names_request_ahead(void **state)
{
    ipuof_client *a;
    int big, small;
    char msg[1024];

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    a = connect_as(&d, "holder", NULL);
    attach_n(a, 2, NULL);                    /* IPUs 0-1 held, 2-3 free */
    big = raw_session(d.port, 0);
    small = raw_session(d.port, 0);
    assert_true(big >= 0 && small >= 0);
    send_wait_attach(big, 4, 0);             /* the head: needs all 4 */
    assert_int_equal(recv_code(big, 200, msg, sizeof msg), -1);
    send_wait_attach(small, 2, 300);         /* 2 would fit, but the head came first */
    assert_int_equal(recv_code(small, 5000, msg, sizeof msg), IPUOF_E_TIMEOUT);
    print_message("%s\n", msg);
    assert_null(strstr(msg, "aligned group"));
    assert_non_null(strstr(msg, "2 of 4 IPUs are free, enough for this request, but 1 "
                                "earlier request in the first-come queue came first"));
    assert_non_null(strstr(msg, "for 4 IPUs"));
    close(big);
    close(small);
    ipuof_client_free(a);
    stop_ok(&d);
}

/* One process cannot fill the wait queue: its waiting connections beyond
 * max_waiters_per_client (16 by default) are refused saying so (main: all 256 slots). */
static void
test_waiters_per_client(void **state)
{
    ipuof_client *a;
    int fds[17];
    char msg[1024];

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nipus = 1\n", NULL), 0);
    a = connect_as(&d, "holder", NULL);
    attach_n(a, 1, NULL);
    for (int i = 0; i < 17; i++) {
        fds[i] = raw_session(d.port, 0);
        assert_true(fds[i] >= 0);
        send_wait_attach(fds[i], 1, 0);
    }
    for (int i = 0; i < 16; i++)
        assert_int_equal(recv_code(fds[i], 50, msg, sizeof msg), -1); /* waiting */
    assert_int_equal(recv_code(fds[16], 5000, msg, sizeof msg), IPUOF_E_TOO_MANY);
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "already has 16 connections waiting"));
    assert_non_null(strstr(msg, "max_waiters_per_client = 16"));
    for (int i = 0; i < 17; i++)
        close(fds[i]);
    ipuof_client_free(a);
    stop_ok(&d);
}

/* The code of the answer to a hello without a token on a fresh connection: 0 when served,
 * else the error's code (-1 when nothing came). */
static int
hello_without_token(int port)
{
    int fd = raw_connect(port), eof = 0, code = -1;
    Ipuof__Header *h;

    assert_true(fd >= 0);
    assert_int_equal(raw_hello(fd, IPUOF_PROTOCOL_VERSION), 0);
    h = raw_recv(fd, 5000, &eof);
    if (h != NULL)
        code = h->body_case == IPUOF__HEADER__BODY_ERROR ? (int)h->error->code : 0;
    ipuof_frame_header_free(h);
    close(fd);
    return code;
}

/* A reload that would drop auth_token while a non-loopback listener stays open (its
 * address needs a restart) is refused whole: the old token still guards the listener,
 * and the log says why. A reload keeping the token is applied. */
static void
test_reload_keeps_token_of_open_listener(void **state)
{
    (void)state;
    assert_int_equal(testd_start_listen(&d, NULL, "[server]\nlisten = 0.0.0.0:0\n"
                                        "auth_token = s3cret\n", NULL), 0);
    assert_int_equal(hello_without_token(d.port), IPUOF_E_AUTH);
    assert_int_equal(testd_write_config(&d, "[server]\nlisten = 127.0.0.1:0\n"), 0);
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500 && !testd_log_contains(&d, "reload refused") &&
                    !testd_log_contains(&d, "configuration reloaded"); i++)
        usleep(10000);
    assert_int_equal(hello_without_token(d.port), IPUOF_E_AUTH); /* main: 0, served */
    assert_true(testd_log_contains(&d, "reload refused, keeping the running configuration"));
    assert_true(testd_log_contains(&d, "listen = 0.0.0.0:0 stays open"));
    assert_false(testd_log_contains(&d, "configuration reloaded"));
    /* the same listener, the token kept: applied */
    assert_int_equal(testd_write_config(&d, "[server]\nlisten = 0.0.0.0:0\n"
                                        "auth_token = s3cret\n[log]\nlevel = debug\n"), 0);
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500 && !testd_log_contains(&d, "configuration reloaded"); i++)
        usleep(10000);
    assert_true(testd_log_contains(&d, "configuration reloaded"));
    assert_int_equal(hello_without_token(d.port), IPUOF_E_AUTH);
    stop_ok(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_clients_see_each_other, teardown),
        cmocka_unit_test_teardown(test_disconnect_frees_ipus, teardown),
        cmocka_unit_test_teardown(test_reset_tells_holder, teardown),
        cmocka_unit_test_teardown(test_garbage_and_huge_frames, teardown),
        cmocka_unit_test_teardown(test_version_mismatch, teardown),
        cmocka_unit_test_teardown(test_request_before_hello, teardown),
        cmocka_unit_test_teardown(test_pipelined_requests, teardown),
        cmocka_unit_test_teardown(test_wait_queue, teardown),
        cmocka_unit_test_teardown(test_sigterm_tells_clients, teardown),
        cmocka_unit_test_teardown(test_connection_limit, teardown),
        cmocka_unit_test_teardown(test_handshake_and_idle_timeouts, teardown),
        cmocka_unit_test_teardown(test_output_cap, teardown),
        cmocka_unit_test_teardown(test_reload, teardown),
        cmocka_unit_test_teardown(test_reload_keeps_token_of_open_listener, teardown),
        cmocka_unit_test_teardown(test_wait_timeout_names_request_ahead, teardown),
        cmocka_unit_test_teardown(test_waiters_per_client, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("daemon", tests, NULL, NULL);
}
