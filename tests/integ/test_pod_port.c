/*
 * test_pod_port.c — the Pod port and its rendezvous store as a hostile or careless peer
 * would use them (issue 32), each against a real ipuofd on loopback ports, over raw frames:
 *   - replies to waiting gets that take another connection over max_output_bytes (a double
 *     free before), the daemon serving on;
 *   - every byte of the store counted (job names and per-entry overhead), waiting replies
 *     counted against the same budget, per-connection shares of the waiting gets;
 *   - Pod-port connections limited apart from the client port's;
 *   - a waiting get is not idleness;
 *   - a refused PodHello gives no store access; the hello's refusals say what was wrong.
 *
 * Each test starts its own daemon (host "host-a", one peer "host-b" that never runs) and
 * stops it, asserting exit status 0 (a sanitizer report or a crash fails it).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "ipuof/status.h"
#include "testd.h"

static struct testd d;
static int pod_port;

static int
teardown(void **state)
{
    (void)state;
    return testd_reset(&d);
}

/* Starts d as Pod host "host-a" (token "pod-secret", peer host-b never started) with the
 * extra config lines (the [pod] section is open: start them with [server] for that one). */
static void
start_pod(const char *pod_extra, const char *server_extra)
{
    char cfg[2048];

    pod_port = testd_free_port();
    snprintf(cfg, sizeof cfg,
             "[server]\n%s\n[pod]\nname = host-a\nlisten = 127.0.0.1:%d\n"
             "peers = host-b=127.0.0.1:%d\ntoken = pod-secret\nhello_interval = 60\n%s\n",
             server_extra ? server_extra : "", pod_port, testd_free_port(),
             pod_extra ? pod_extra : "");
    if (testd_start(&d, cfg, NULL) != 0)
        fail_msg("the daemon did not start with:\n%s", cfg);
}

static void
stop_ok(void)
{
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* A Pod-port connection that said hello as host name (token "pod-secret"); -1 on any
 * failure. */
static int
pod_connect(const char *name)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__Hello hi = IPUOF__HELLO__INIT;
    int fd = raw_connect(pod_port), eof = 0, ok;

    if (fd < 0)
        return -1;
    hi.protocol_version = IPUOF_PROTOCOL_VERSION;
    hi.client_name = (char *)name;
    hi.auth_token = (char *)"pod-secret";
    h.request_id = 1;
    h.body_case = IPUOF__HEADER__BODY_HELLO;
    h.hello = &hi;
    if (raw_send(fd, &h) != 0) {
        close(fd);
        return -1;
    }
    r = raw_recv(fd, 5000, &eof);
    ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_HELLO_REPLY;
    ipuof_frame_header_free(r);
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
send_set(int fd, uint64_t id, const char *job, const char *key, const void *v, size_t n)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__KvSetRequest q = IPUOF__KV_SET_REQUEST__INIT;

    q.job = (char *)job;
    q.key = (char *)key;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_KV_SET;
    h.kv_set = &q;
    return raw_send_payload(fd, &h, v, n);
}

static int
send_get(int fd, uint64_t id, const char *job, const char *key, uint32_t timeout_ms)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__KvGetRequest q = IPUOF__KV_GET_REQUEST__INIT;

    q.job = (char *)job;
    q.key = (char *)key;
    q.timeout_ms = timeout_ms;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_KV_GET;
    h.kv_get = &q;
    return raw_send(fd, &h);
}

/* The next frame on fd: its body must be want (the error's sentence otherwise fails the
 * test). Returns the header (caller frees). */
static Ipuof__Header *
expect(int fd, Ipuof__Header__BodyCase want, const char *what)
{
    int eof = 0;
    Ipuof__Header *r = raw_recv(fd, 10000, &eof);

    if (r == NULL)
        fail_msg("%s: no reply (%s)", what, eof ? "connection closed" : "timeout");
    if (r->body_case != want)
        fail_msg("%s: got %s: %s", what, ipuof_frame_body_name(r),
                 r->body_case == IPUOF__HEADER__BODY_ERROR ? r->error->message : "");
    return r;
}

/* The next frame on fd is an error of code; returns its sentence in msg. */
static void
expect_error(int fd, int code, char *msg, size_t len, const char *what)
{
    Ipuof__Header *r = expect(fd, IPUOF__HEADER__BODY_ERROR, what);

    snprintf(msg, len, "%s", r->error->message);
    if ((int)r->error->code != code)
        fail_msg("%s: error %s, wanted %s: %s", what, ipuof_status_name((int)r->error->code),
                 ipuof_status_name(code), msg);
    ipuof_frame_header_free(r);
}

/* The daemon still serves: a new Pod connection sets and reads a key. */
static void
still_serves(void)
{
    int fd = pod_connect("host-b");
    Ipuof__Header *r;

    assert_true(fd >= 0);
    assert_int_equal(send_set(fd, 2, "alive", "k", "v", 1), 0);
    ipuof_frame_header_free(expect(fd, IPUOF__HEADER__BODY_KV_SET_REPLY, "set after"));
    assert_int_equal(send_get(fd, 3, "alive", "k", 0), 0);
    r = expect(fd, IPUOF__HEADER__BODY_KV_GET_REPLY, "get after");
    ipuof_frame_header_free(r);
    close(fd);
}

/* Defect 1: a set answers three waiting gets of another connection that does not read;
 * the second reply takes it over max_output_bytes (2 MiB, 1 MiB values), so it is dropped in
 * the middle of the answers. Before, the waiter was then freed twice (ASan: double free;
 * without it, glibc's abort or a corrupted heap). */
static void
test_set_kills_waiting_connection(void **state)
{
    int a, b;
    void *big = malloc(1u << 20);

    (void)state;
    assert_non_null(big);
    memset(big, 'v', 1u << 20);
    start_pod("kv_max_value_bytes = 1MiB\nkv_max_bytes = 16MiB",
              "max_header_bytes = 64KiB\nmax_payload_bytes = 1040KiB\nmax_output_bytes = 2MiB");
    a = pod_connect("host-b");
    b = pod_connect("host-b");
    assert_true(a >= 0 && b >= 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(send_get(a, 10 + (uint64_t)i, "job", "k", 60000), 0);
    usleep(300000); /* the gets wait */
    assert_int_equal(send_set(b, 2, "job", "k", big, 1u << 20), 0);
    ipuof_frame_header_free(expect(b, IPUOF__HEADER__BODY_KV_SET_REPLY, "set"));
    assert_true(raw_wait_closed(a, 5000)); /* dropped for its output, the others served */
    close(a);
    close(b);
    still_serves();
    assert_true(testd_log_contains(&d, "over max_output_bytes"));
    free(big);
    stop_ok();
}

/* The daemon's resident set in KiB (VmRSS). */
static long
rss_kib(void)
{
    char path[64], line[256];
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)d.pid);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* A Pod connection with a small receive buffer (set before connecting), so what the daemon
 * queues to it stays in the daemon. */
static int
pod_connect_small(const char *name)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__Hello hi = IPUOF__HELLO__INIT;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096, eof = 0, ok;

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sa.sin_port = htons((uint16_t)pod_port);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    hi.protocol_version = IPUOF_PROTOCOL_VERSION;
    hi.client_name = (char *)name;
    hi.auth_token = (char *)"pod-secret";
    h.request_id = 1;
    h.body_case = IPUOF__HEADER__BODY_HELLO;
    h.hello = &hi;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 5000, &eof);
    ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_HELLO_REPLY;
    ipuof_frame_header_free(r);
    assert_true(ok);
    return fd;
}

/* Defect 3: kv_max_bytes counted keys and values only: a 32 KiB budget let 32 768 jobs of
 * one empty entry in. Now job names and the job and entry records count: at most 32 KiB /
 * 288 bytes of them. */
static void
test_every_byte_counted(void **state)
{
    char job[32], msg[1024] = "";
    unsigned in = 0;
    int fd;

    (void)state;
    start_pod("kv_max_bytes = 32KiB", NULL);
    fd = pod_connect("host-b");
    assert_true(fd >= 0);
    /* before, all 2 000 went in; now about 32 KiB / 288 bytes */
    for (unsigned i = 0; i < 2000; i++) {
        int eof = 0;
        Ipuof__Header *r;
        snprintf(job, sizeof job, "j%u", i);
        assert_int_equal(send_set(fd, 2 + i, job, "k", NULL, 0), 0);
        r = raw_recv(fd, 10000, &eof);
        assert_non_null(r);
        if (r->body_case == IPUOF__HEADER__BODY_ERROR) {
            assert_int_equal(r->error->code, IPUOF_E_TOO_LARGE);
            snprintf(msg, sizeof msg, "%s", r->error->message);
            ipuof_frame_header_free(r);
            break;
        }
        assert_int_equal(r->body_case, IPUOF__HEADER__BODY_KV_SET_REPLY);
        ipuof_frame_header_free(r);
        in++;
    }
    assert_true(in <= 32768 / 288);
    assert_true(in >= 32768 / 400);
    print_message("after %u jobs: %s\n", in, msg);
    assert_non_null(strstr(msg, "kv_max_bytes"));
    assert_non_null(strstr(msg, "entry and job records counted"));
    {   /* a job's end frees its bytes */
        Ipuof__Header h = IPUOF__HEADER__INIT, *r;
        Ipuof__KvDropRequest q = IPUOF__KV_DROP_REQUEST__INIT;
        q.job = (char *)"j0";
        h.request_id = 90001;
        h.body_case = IPUOF__HEADER__BODY_KV_DROP;
        h.kv_drop = &q;
        assert_int_equal(raw_send(fd, &h), 0);
        r = expect(fd, IPUOF__HEADER__BODY_KV_DROP_REPLY, "drop");
        assert_int_equal(r->kv_drop_reply->dropped, 1);
        ipuof_frame_header_free(r);
    }
    close(fd);
    still_serves();
    stop_ok();
}

/* Defect 4: a value was copied into every waiting get's output, outside any budget (1 MiB x
 * 128 waiters = +122 MiB). Now one copy is shared by the replies: 48 gets waiting on 4
 * connections that do not read, one 1 MiB set, and the daemon grows by far less than 48
 * MiB; the copy held for the unread replies counts against kv_max_bytes, so a second
 * 1 MiB value does not fit a 3 MiB budget until they are read. */
static void
test_waiting_replies_share_and_count(void **state)
{
    int w[4], b;
    size_t big = 1u << 20;
    char *v = malloc(big), msg[1024];
    long before, after;

    (void)state;
    assert_non_null(v);
    memset(v, 'x', big);
    start_pod("kv_max_value_bytes = 1MiB\nkv_max_bytes = 3MiB", NULL);
    for (int i = 0; i < 4; i++) {
        w[i] = pod_connect_small("host-b");
        for (int k = 0; k < 12; k++)
            assert_int_equal(send_get(w[i], 10 + (uint64_t)k, "job", "k", 60000), 0);
    }
    b = pod_connect("host-b");
    assert_true(b >= 0);
    usleep(300000);
    before = rss_kib();
    assert_int_equal(send_set(b, 2, "job", "k", v, big), 0);
    ipuof_frame_header_free(expect(b, IPUOF__HEADER__BODY_KV_SET_REPLY, "set"));
    usleep(200000);
    after = rss_kib();
    print_message("RSS %ld KiB -> %ld KiB after 1 MiB answered 48 waiting gets\n", before,
                  after);
    assert_true(after - before < 12 * 1024);
    /* the shared copy (1 MiB) and the stored value (1 MiB) leave less than 1 MiB */
    assert_int_equal(send_set(b, 3, "job", "k2", v, big), 0);
    expect_error(b, IPUOF_E_TOO_LARGE, msg, sizeof msg, "second value");
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "in replies not yet read"));
    /* once the replies are read (or their connections gone), it fits */
    for (int i = 0; i < 4; i++)
        close(w[i]);
    usleep(300000);
    assert_int_equal(send_set(b, 4, "job", "k2", v, big), 0);
    ipuof_frame_header_free(expect(b, IPUOF__HEADER__BODY_KV_SET_REPLY, "after"));
    close(b);
    free(v);
    stop_ok();
}

/* Defect 5: one connection could hold all 4 096 waiting-get slots. Now each has a share
 * (4096 / [pod] max_connections = 64): the 65th is refused, another connection's get
 * still waits and is answered. */
static void
test_waiter_share_per_connection(void **state)
{
    int a, b, c;
    char msg[1024];
    Ipuof__Header *r;

    (void)state;
    start_pod(NULL, NULL);
    a = pod_connect("host-b");
    b = pod_connect("host-b");
    c = pod_connect("host-a");
    assert_true(a >= 0 && b >= 0 && c >= 0);
    for (int k = 0; k < 64; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        assert_int_equal(send_get(a, 10 + (uint64_t)k, "job", key, 600000), 0);
    }
    assert_int_equal(send_get(a, 100, "job", "one-more", 600000), 0);
    expect_error(a, IPUOF_E_TOO_MANY, msg, sizeof msg, "65th waiting get");
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "its share"));
    assert_int_equal(send_get(b, 2, "job", "mine", 600000), 0);
    usleep(200000);
    assert_int_equal(send_set(c, 2, "job", "mine", "v", 1), 0);
    ipuof_frame_header_free(expect(c, IPUOF__HEADER__BODY_KV_SET_REPLY, "set"));
    r = expect(b, IPUOF__HEADER__BODY_KV_GET_REPLY, "the other connection's get");
    ipuof_frame_header_free(r);
    close(a);
    close(b);
    close(c);
    stop_ok();
}

/* Defect 6: Pod-port connections counted against the client port's max_connections before
 * any token check, so silent Pod connections locked clients out (and clients the Pod
 * port). Now each port has its own limit: three silent Pod connections leave the two
 * client slots free. */
static void
test_pod_connections_leave_clients_in(void **state)
{
    int p[3], cl[2];

    (void)state;
    start_pod(NULL, "max_connections = 2");
    for (int i = 0; i < 3; i++) {
        p[i] = raw_connect(pod_port); /* silent: no hello */
        assert_true(p[i] >= 0);
    }
    usleep(200000);
    for (int i = 0; i < 2; i++) {
        cl[i] = raw_session(d.port, 0);
        assert_true(cl[i] >= 0); /* refused before: the Pod connections took the slots */
    }
    for (int i = 0; i < 3; i++)
        close(p[i]);
    for (int i = 0; i < 2; i++)
        close(cl[i]);
    stop_ok();
}

/* The Pod port's own limit, [pod] max_connections, refuses the third. */
static void
test_pod_port_own_limit(void **state)
{
    int p[3], eof = 0;
    Ipuof__Header *r;

    (void)state;
    start_pod("max_connections = 2", "max_connections = 2");
    for (int i = 0; i < 2; i++) {
        p[i] = raw_connect(pod_port);
        assert_true(p[i] >= 0);
    }
    usleep(200000);
    p[2] = raw_connect(pod_port);
    assert_true(p[2] >= 0);
    r = raw_recv(p[2], 5000, &eof);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("third Pod connection: %s\n", r->error->message);
    assert_non_null(strstr(r->error->message, "on its Pod port ([pod] max_connections)"));
    ipuof_frame_header_free(r);
    for (int i = 0; i < 3; i++)
        close(p[i]);
    /* the client port still serves */
    p[0] = raw_session(d.port, 0);
    assert_true(p[0] >= 0);
    close(p[0]);
    stop_ok();
}

/* Defect 7: a connection whose get still waited was closed as idle after idle_timeout. */
static void
test_waiting_get_is_not_idle(void **state)
{
    int a, b;
    Ipuof__Header *r;

    (void)state;
    start_pod(NULL, "idle_timeout = 1");
    a = pod_connect("host-a");
    assert_true(a >= 0);
    assert_int_equal(send_get(a, 2, "job", "late", 10000), 0);
    sleep(3); /* three idle timeouts */
    b = pod_connect("host-b");
    assert_true(b >= 0);
    assert_int_equal(send_set(b, 2, "job", "late", "v", 1), 0);
    ipuof_frame_header_free(expect(b, IPUOF__HEADER__BODY_KV_SET_REPLY, "set"));
    r = expect(a, IPUOF__HEADER__BODY_KV_GET_REPLY, "the get that waited 3 s");
    ipuof_frame_header_free(r);
    close(a);
    close(b);
    stop_ok();
}

/* Defect 8 and 14: after a refused PodHello the store was still served; the hello naming
 * the daemon's own host was told to add it to its own peers. */
static void
test_refused_hello_no_store(void **state)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__PodHello ph = IPUOF__POD_HELLO__INIT;
    Ipuof__KvDropRequest q = IPUOF__KV_DROP_REQUEST__INIT;
    char msg[1024];
    int a, b, e;

    (void)state;
    start_pod(NULL, NULL);
    b = pod_connect("host-b");
    assert_true(b >= 0);
    assert_int_equal(send_set(b, 2, "job", "k", "good", 4), 0);
    ipuof_frame_header_free(expect(b, IPUOF__HEADER__BODY_KV_SET_REPLY, "set"));
    a = pod_connect("host-b");
    assert_true(a >= 0);
    ph.name = (char *)"evil";
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_POD_HELLO;
    h.pod_hello = &ph;
    assert_int_equal(raw_send(a, &h), 0);
    expect_error(a, IPUOF_E_AUTH, msg, sizeof msg, "PodHello evil");
    assert_non_null(strstr(msg, "host 'evil' is not a peer"));
    assert_int_equal(send_set(a, 3, "job", "k", "evil", 4), 0);
    expect_error(a, IPUOF_E_AUTH, msg, sizeof msg, "set after a refused PodHello");
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "PodHello was refused"));
    q.job = (char *)"job";
    h.request_id = 4;
    h.body_case = IPUOF__HEADER__BODY_KV_DROP;
    h.kv_drop = &q;
    assert_int_equal(raw_send(a, &h), 0);
    expect_error(a, IPUOF_E_AUTH, msg, sizeof msg, "drop after a refused PodHello");
    /* a hello naming no host of the Pod: no store either */
    e = pod_connect("evil");
    assert_true(e >= 0);
    assert_int_equal(send_set(e, 2, "job", "k", "evil", 4), 0);
    expect_error(e, IPUOF_E_AUTH, msg, sizeof msg, "set from host evil");
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "hello named 'evil'"));
    /* the value is the good one */
    assert_int_equal(send_get(b, 3, "job", "k", 0), 0);
    {
        void *pl = NULL;
        size_t n = 0;
        Ipuof__Header *r = raw_recv_payload(b, 5000, &pl, &n);
        assert_non_null(r);
        assert_int_equal(r->body_case, IPUOF__HEADER__BODY_KV_GET_REPLY);
        assert_int_equal(n, 4);
        assert_memory_equal(pl, "good", 4);
        free(pl);
        ipuof_frame_header_free(r);
    }
    /* defect 14: the daemon's own name */
    ph.name = (char *)"host-a";
    h.request_id = 5;
    h.body_case = IPUOF__HEADER__BODY_POD_HELLO;
    h.pod_hello = &ph;
    assert_int_equal(raw_send(b, &h), 0);
    expect_error(b, IPUOF_E_AUTH, msg, sizeof msg, "PodHello host-a");
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "is this daemon's own [pod] name"));
    assert_null(strstr(msg, "add NAME=HOST:PORT"));
    close(a);
    close(b);
    close(e);
    stop_ok();
}

/* Defect 13: any payload before the hello was reported as a frame over the pre-hello
 * limit of 16384 bytes. */
static void
test_prehello_payload_message(void **state)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__Hello hi = IPUOF__HELLO__INIT;
    int fd, eof = 0;

    (void)state;
    start_pod(NULL, NULL);
    fd = raw_connect(d.port);
    assert_true(fd >= 0);
    hi.protocol_version = IPUOF_PROTOCOL_VERSION;
    h.request_id = 1;
    h.body_case = IPUOF__HEADER__BODY_HELLO;
    h.hello = &hi;
    assert_int_equal(raw_send_payload(fd, &h, "x", 1), 0);
    r = raw_recv(fd, 5000, &eof);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("%s\n", r->error->message);
    assert_non_null(strstr(r->error->message, "carries 1 payload bytes"));
    assert_null(strstr(r->error->message, "over the pre-hello limit"));
    ipuof_frame_header_free(r);
    close(fd);
    stop_ok();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_set_kills_waiting_connection, teardown),
        cmocka_unit_test_teardown(test_every_byte_counted, teardown),
        cmocka_unit_test_teardown(test_waiting_replies_share_and_count, teardown),
        cmocka_unit_test_teardown(test_waiter_share_per_connection, teardown),
        cmocka_unit_test_teardown(test_pod_connections_leave_clients_in, teardown),
        cmocka_unit_test_teardown(test_pod_port_own_limit, teardown),
        cmocka_unit_test_teardown(test_waiting_get_is_not_idle, teardown),
        cmocka_unit_test_teardown(test_refused_hello_no_store, teardown),
        cmocka_unit_test_teardown(test_prehello_payload_message, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
