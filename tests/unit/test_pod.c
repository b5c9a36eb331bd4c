/*
 * test_pod.c — a Pod of daemons (issue 20), its membership and rendezvous store:
 *   - the [pod] section's checks, each refusal naming what is wrong and what is right;
 *   - pod_kv.c's limits (value size, keys per job, the byte budget) and drop, alone;
 *   - two real daemons on loopback: each sees the other reachable with its IPUs (ipuof_status
 *     through the client library, as ipuctl status shows them), then the one stopped is
 *     unreachable with the reason, and the other still serves its own IPUs;
 *   - the store over the Pod port (pod_store.c): set, a get that waits until another
 *     client's set, a get that times out naming the key, a wrong token refused, a value over
 *     kv_max_value_bytes refused, a job's entries dropped, and the ports kept apart (a Pod
 *     request on the client port, a hello from a host that is not a peer, refused).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "frame.h"
#include "ipuof/client.h"
#include "ipuof/status.h"
#include "pod_client.h"
#include "pod_kv.h"
#include "pod_store.h"
#include "testd.h"

static struct testd da, db;

static int
teardown(void **state)
{
    (void)state;
    testd_reset(&db);
    return testd_reset(&da);
}

/* ---- configuration ---- */

static void
check_pod_config(const char *name, const char *listen, const char *peers, const char *token,
                 const char *want)
{
    struct cfg c;
    char err[1024] = "";
    int rc;

    cfg_defaults(&c);
    if (name != NULL)
        assert_int_equal(cfg_set(&c, "pod", "name", name, err, sizeof err), 0);
    if (listen != NULL)
        assert_int_equal(cfg_set(&c, "pod", "listen", listen, err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "pod", "peers", peers, err, sizeof err), 0);
    if (token != NULL)
        assert_int_equal(cfg_set(&c, "pod", "token", token, err, sizeof err), 0);
    rc = cfg_validate(&c, err, sizeof err);
    if (want == NULL) {
        if (rc != 0)
            fail_msg("peers '%s' refused: %s", peers, err);
    } else {
        assert_int_equal(rc, -1);
        if (strstr(err, want) == NULL)
            fail_msg("peers '%s': wanted '%s' in: %s", peers, want, err);
    }
}

static void
test_pod_config(void **state)
{
    struct cfg c;
    struct cfg_pod_peer peers[CFG_POD_MAX_PEERS];
    char err[512], many[2048] = "";

    (void)state;
    check_pod_config("a", NULL, "", NULL, NULL);                      /* no Pod */
    check_pod_config("a", NULL, "b=10.0.0.2:50053, c=[::1]:7", NULL, NULL);
    check_pod_config("a", NULL, "b=10.0.0.2:50053,,c=h.example:1", NULL, NULL);
    check_pod_config("a", NULL, "10.0.0.2:50053", NULL,
                     "'10.0.0.2:50053' is not NAME=HOST:PORT");
    check_pod_config("a", NULL, "b/x=10.0.0.2:1", NULL, "is not NAME=HOST:PORT");
    check_pod_config("a", NULL, "b=10.0.0.2", NULL,
                     "peer b's address '10.0.0.2' is not HOST:PORT with a port from 1 to 65535");
    check_pod_config("a", NULL, "b=10.0.0.2:0", NULL, "a port from 1 to 65535");
    check_pod_config("a", NULL, "b=h:1 b=h:2", NULL, "names b twice");
    check_pod_config("a", NULL, "a=h:1", NULL, "this daemon's own [pod] name");
    check_pod_config("a b", NULL, "b=h:1", NULL, "[pod] name = 'a b' is not a Pod host name");
    check_pod_config("a", "10.0.0.1:50053", "b=h:1", NULL,
                     "[pod] listen = 10.0.0.1:50053 is not a loopback address and no [pod] "
                     "token is set");
    check_pod_config("a", "10.0.0.1:50053", "b=h:1", "t", NULL);
    check_pod_config("a", "127.0.0.1", "b=h:1", NULL, "[pod] listen = '127.0.0.1' is not "
                     "HOST:PORT");
    check_pod_config("a", "127.0.0.1:50052", "b=h:1", NULL, "is also [server] listen");
    for (int i = 0; i <= CFG_POD_MAX_PEERS; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "p%d=h:%d ", i, i + 1);
    check_pod_config("a", NULL, many, NULL, "more than 16 peers");

    cfg_defaults(&c);
    assert_int_equal(cfg_set(&c, "pod", "name", "a", err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "pod", "peers", " b=10.0.0.2:50053 ,c=[::1]:7", err,
                             sizeof err), 0);
    assert_int_equal(cfg_pod_peers(&c, peers, err, sizeof err), 2);
    assert_string_equal(peers[0].name, "b");
    assert_string_equal(peers[0].addr, "10.0.0.2:50053");
    assert_string_equal(peers[1].name, "c");
    assert_string_equal(peers[1].addr, "[::1]:7");
    assert_int_equal(cfg_set(&c, "pod", "hello_interval", "0", err, sizeof err), -1);
    assert_non_null(strstr(err, "from 1 to 3600"));
    assert_int_equal(cfg_set(&c, "pod", "kv_max_value_bytes", "65MiB", err, sizeof err), -1);
    assert_int_equal(c.pod_sum_daemons, 0);
    assert_int_equal(cfg_set(&c, "pod", "sum", "daemons", err, sizeof err), 0);
    assert_int_equal(c.pod_sum_daemons, 1);
    assert_int_equal(cfg_set(&c, "pod", "sum", "ring", err, sizeof err), -1);
    assert_non_null(strstr(err, "[pod] sum = 'ring' is invalid; use replicas"));
}

/* ---- the store's table ---- */

static void
test_pod_kv_limits(void **state)
{
    struct pod_kv *kv = pod_kv_new();
    struct pod_kv_limits lim = {.max_keys = 3, .max_value = 8, .max_bytes = 2 * POD_KV_JOB_COST + 4 * POD_KV_ENTRY_COST + 30};
    char err[512], key[POD_KV_KEY_MAX + 2];
    const void *v;
    size_t n;

    (void)state;
    assert_non_null(kv);
    assert_int_equal(pod_kv_set(kv, &lim, "j", "k1", "12345678", 8, err, sizeof err), IPUOF_OK);
    assert_int_equal(pod_kv_get(kv, "j", "k1", &v, &n), 1);
    assert_int_equal(n, 8);
    assert_memory_equal(v, "12345678", 8);
    assert_int_equal(pod_kv_get(kv, "j", "k2", &v, &n), 0);
    assert_int_equal(pod_kv_get(kv, "other", "k1", &v, &n), 0);
    /* a value over max_value */
    assert_int_equal(pod_kv_set(kv, &lim, "j", "k2", "123456789", 9, err, sizeof err),
                     IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(err, "kv_max_value_bytes"));
    /* keys per job */
    assert_int_equal(pod_kv_set(kv, &lim, "j", "k2", "a", 1, err, sizeof err), IPUOF_OK);
    assert_int_equal(pod_kv_set(kv, &lim, "j", "k3", "", 0, err, sizeof err), IPUOF_OK);
    assert_int_equal(pod_kv_set(kv, &lim, "j", "k4", "a", 1, err, sizeof err), IPUOF_E_TOO_MANY);
    assert_non_null(strstr(err, "job 'j' already holds 3 rendezvous entries"));
    /* replacing a key is not a new key, and is counted once */
    assert_int_equal(pod_kv_set(kv, &lim, "j", "k2", "bb", 2, err, sizeof err), IPUOF_OK);
    /* every byte: the job's name and record, each entry's record, key and value */
    assert_int_equal(pod_kv_bytes(kv), POD_KV_JOB_COST + 1 + 3 * POD_KV_ENTRY_COST + 2 + 8 +
                                           2 + 2 + 2 + 0);
    assert_int_equal(pod_kv_count(kv), 3);
    /* the budget over every job: job x and its first entry fit, a second entry does not */
    assert_int_equal(pod_kv_set(kv, &lim, "x", "a1", "1234567", 7, err, sizeof err), IPUOF_OK);
    assert_int_equal(pod_kv_set(kv, &lim, "x", "a2", "1234567", 7, err, sizeof err),
                     IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(err, "kv_max_bytes"));
    assert_non_null(strstr(err, "entry and job records counted"));
    assert_int_equal(pod_kv_bytes(kv), 2 * POD_KV_JOB_COST + 4 * POD_KV_ENTRY_COST + 27);
    /* names */
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    assert_int_equal(pod_kv_set(kv, &lim, "x", key, "1", 1, err, sizeof err), IPUOF_E_INVAL);
    assert_int_equal(pod_kv_set(kv, &lim, "", "k", "1", 1, err, sizeof err), IPUOF_E_INVAL);
    /* a job's end drops its entries and their bytes */
    assert_int_equal(pod_kv_drop(kv, "j"), 3);
    assert_int_equal(pod_kv_drop(kv, "j"), 0);
    assert_int_equal(pod_kv_get(kv, "j", "k1", &v, &n), 0);
    assert_int_equal(pod_kv_bytes(kv), POD_KV_JOB_COST + 1 + POD_KV_ENTRY_COST + 9);
    assert_int_equal(pod_kv_jobs(kv), 1);
    assert_int_equal(pod_kv_count(kv), 1);
    pod_kv_free(kv);
    pod_kv_free(NULL);
}

/* Issue 32, defect 3: a budget of 32 KiB let 32 768 jobs of one empty entry in (job names
 * and records were not counted, 13.9 MiB of RSS); now at most 32 KiB / (job + entry
 * records) do. Bytes held by the store's user (queued replies) count against the same
 * budget. Jobs are found through a hash table: 20 000 jobs set and read back. */
static void
test_pod_kv_every_byte(void **state)
{
    struct pod_kv *kv = pod_kv_new();
    struct pod_kv_limits lim = {.max_keys = 8, .max_value = 64, .max_bytes = 32768};
    char err[512], job[32];
    unsigned in = 0;
    const void *v;
    size_t n;

    (void)state;
    assert_non_null(kv);
    for (unsigned i = 0; i < 32768; i++) {
        snprintf(job, sizeof job, "j%u", i);
        if (pod_kv_set(kv, &lim, job, "k", "", 0, err, sizeof err) != IPUOF_OK)
            break;
        in++;
    }
    print_message("a 32 KiB budget holds %u jobs of one empty entry: %s\n", in, err);
    assert_true(in <= 32768 / (POD_KV_JOB_COST + POD_KV_ENTRY_COST));
    assert_true(in >= 32768 / (POD_KV_JOB_COST + POD_KV_ENTRY_COST + 16));
    assert_true(pod_kv_bytes(kv) <= 32768);
    assert_non_null(strstr(err, "kv_max_bytes"));
    /* what the user holds beside the table leaves that much less room */
    assert_int_equal(pod_kv_drop(kv, "j0"), 1);
    lim.held = 32768 - pod_kv_bytes(kv);
    assert_int_equal(pod_kv_set(kv, &lim, "j0", "k", "", 0, err, sizeof err),
                     IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(err, "in replies not yet read"));
    lim.held = 0;
    assert_int_equal(pod_kv_set(kv, &lim, "j0", "k", "", 0, err, sizeof err), IPUOF_OK);
    pod_kv_free(kv);

    kv = pod_kv_new();
    lim.max_bytes = 64ull << 20;
    for (unsigned i = 0; i < 20000; i++) {
        snprintf(job, sizeof job, "job-%u", i);
        assert_int_equal(pod_kv_set(kv, &lim, job, "rank0", job, strlen(job), err, sizeof err),
                         IPUOF_OK);
    }
    assert_int_equal(pod_kv_jobs(kv), 20000);
    for (unsigned i = 0; i < 20000; i += 7) {
        snprintf(job, sizeof job, "job-%u", i);
        assert_int_equal(pod_kv_get(kv, job, "rank0", &v, &n), 1);
        assert_int_equal(n, strlen(job));
        assert_memory_equal(v, job, n);
    }
    for (unsigned i = 0; i < 20000; i += 2) {
        snprintf(job, sizeof job, "job-%u", i);
        assert_int_equal(pod_kv_drop(kv, job), 1);
    }
    assert_int_equal(pod_kv_jobs(kv), 10000);
    assert_int_equal(pod_kv_get(kv, "job-2", "rank0", &v, &n), 0);
    assert_int_equal(pod_kv_get(kv, "job-3", "rank0", &v, &n), 1);
    pod_kv_free(kv);
}

/* ---- two daemons ---- */

/* Starts daemon d as host name with the Pod port pport and one peer. 0 or -1. */
static int
start_pod_daemon(struct testd *d, const char *name, int pport, const char *peer, int peer_port,
                 const char *ipus)
{
    char cfgtext[1024];
    const char *extra[] = {"--ipus", ipus, NULL};

    snprintf(cfgtext, sizeof cfgtext,
             "[pod]\nname = %s\nlisten = 127.0.0.1:%d\npeers = %s=127.0.0.1:%d\n"
             "token = pod-secret\nhello_interval = 1\ntimeout_ms = 500\n"
             "kv_max_value_bytes = 1KiB\n", name, pport, peer, peer_port);
    return testd_start(d, cfgtext, extra);
}

/* Host name's state as daemon d reports it, with its IPUs in *ipus and error in err. */
static int
host_state(const struct testd *d, const char *name, unsigned *ipus, char *err, size_t len)
{
    ipuof_client *c = ipuof_client_new();
    ipuof_status_report *r = NULL;
    int state = -1;

    assert_non_null(c);
    if (ipuof_client_connect(c, d->addr) == IPUOF_OK && ipuof_status(c, &r) == IPUOF_OK) {
        for (size_t i = 0; i < ipuof_status_report_pod_host_count(r); i++) {
            struct ipuof_pod_host h;
            assert_int_equal(ipuof_status_report_pod_host(r, i, &h), IPUOF_OK);
            if (i == 0)
                assert_int_equal(h.state, IPUOF_POD_HOST_SELF);
            if (strcmp(h.name, name) == 0) {
                state = h.state;
                *ipus = h.num_ipus;
                snprintf(err, len, "%s", h.error);
            }
        }
    }
    ipuof_status_report_free(r);
    ipuof_client_free(c);
    return state;
}

/* Waits up to ms for host name to reach want in d's status. */
static int
wait_state(const struct testd *d, const char *name, int want, unsigned *ipus, char *err,
           size_t len, int ms)
{
    int st = -1;

    for (int t = 0; t < ms; t += 50) {
        st = host_state(d, name, ipus, err, len);
        if (st == want)
            break;
        usleep(50000);
    }
    return st;
}

static void
test_pod_two_daemons(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port();
    unsigned ipus = 0;
    char err[512];
    int fd;

    (void)state;
    assert_int_equal(start_pod_daemon(&da, "host-a", pa, "host-b", pb, "4"), 0);
    assert_int_equal(start_pod_daemon(&db, "host-b", pb, "host-a", pa, "8"), 0);
    assert_int_equal(wait_state(&da, "host-b", IPUOF_POD_HOST_REACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_REACHABLE);
    assert_int_equal(ipus, 8);
    assert_int_equal(wait_state(&db, "host-a", IPUOF_POD_HOST_REACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_REACHABLE);
    assert_int_equal(ipus, 4);

    assert_int_equal(testd_stop(&db), 0);
    memset(&db, 0, sizeof db);
    assert_int_equal(wait_state(&da, "host-b", IPUOF_POD_HOST_UNREACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_UNREACHABLE);
    print_message("host-b unreachable: %s\n", err);
    assert_non_null(strstr(err, "127.0.0.1:"));
    /* a daemon whose peer is gone serves its own IPUs */
    fd = raw_session(da.port, 4);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

/* ---- the rendezvous store over the Pod port ---- */

struct getter {
    char addr[64];
    int rc;
    char value[64];
    char err[512];
};

static void *
get_later(void *arg)
{
    struct getter *g = arg;
    struct pod_kvc *k = NULL;
    void *v = NULL;
    size_t n = 0;

    assert_int_equal(pod_kvc_new(&k, g->addr, "pod-secret", "host-b", "job1", 2000, g->err,
                                 sizeof g->err), IPUOF_OK);
    g->rc = pod_kvc_get(k, "rank1", &v, &n, 5000, g->err, sizeof g->err);
    if (g->rc == 0 && n < sizeof g->value)
        memcpy(g->value, v, n);
    free(v);
    pod_kvc_free(k);
    return NULL;
}

static void
test_pod_store(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port();
    char addr[64], err[512], big[2048];
    struct pod_kvc *k = NULL, *bad = NULL;
    struct getter g = {0};
    pthread_t th;
    void *v = NULL;
    size_t n = 0;
    struct timespec t0, t1;
    double secs;

    (void)state;
    /* host-b is configured but never started: the store serves regardless */
    assert_int_equal(start_pod_daemon(&da, "host-a", pa, "host-b", pb, "4"), 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", pa);
    assert_int_equal(pod_kvc_new(&k, addr, "pod-secret", "host-a", "job1", 2000, err,
                                 sizeof err), IPUOF_OK);

    assert_int_equal(pod_kvc_set(k, "rank0", "addr-of-0", 9, err, sizeof err), 0);
    assert_int_equal(pod_kvc_get(k, "rank0", &v, &n, 0, err, sizeof err), 0);
    assert_int_equal(n, 9);
    assert_memory_equal(v, "addr-of-0", 9);
    free(v);

    /* a get waits for a set made afterwards by another client */
    snprintf(g.addr, sizeof g.addr, "%s", addr);
    assert_int_equal(pthread_create(&th, NULL, get_later, &g), 0);
    usleep(300000);
    assert_int_equal(pod_kvc_set(k, "rank1", "addr-of-1", 9, err, sizeof err), 0);
    pthread_join(th, NULL);
    if (g.rc != 0)
        fail_msg("the waiting get failed: %s", g.err);
    assert_string_equal(g.value, "addr-of-1");

    /* a get that times out names the key and the job, in about its time */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pod_kvc_get(k, "rank7", &v, &n, 400, err, sizeof err), 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    print_message("timed-out get after %.3f s: %s\n", secs, err);
    assert_non_null(strstr(err, "rendezvous key 'rank7' of job 'job1' was not set within "
                                "400 ms"));
    assert_true(secs < 3.0);
    /* a get without a wait of a key never set */
    assert_int_equal(pod_kvc_get(k, "rank7", &v, &n, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "is not set"));

    /* limits where the data enters */
    memset(big, 'x', sizeof big);
    assert_int_equal(pod_kvc_set(k, "big", big, sizeof big, err, sizeof err), -1);
    assert_non_null(strstr(err, "2048 bytes; at most 1024 are stored ([pod] kv_max_value_bytes)"));
    /* the connection still serves after a refusal */
    assert_int_equal(pod_kvc_get(k, "rank0", &v, &n, 0, err, sizeof err), 0);
    free(v);

    /* the job's entries go at once */
    assert_int_equal(pod_kvc_drop(k, err, sizeof err), 2);
    assert_int_equal(pod_kvc_get(k, "rank0", &v, &n, 0, err, sizeof err), -1);

    /* a daemon without the Pod's token is refused */
    assert_int_equal(pod_kvc_new(&bad, addr, "guess", "host-b", "job1", 2000, err,
                                 sizeof err), IPUOF_OK);
    assert_int_equal(pod_kvc_set(bad, "rank0", "evil", 4, err, sizeof err), -1);
    print_message("wrong token: %s\n", err);
    assert_non_null(strstr(err, "wrong Pod token"));
    pod_kvc_free(bad);
    assert_int_equal(pod_kvc_get(k, "rank0", &v, &n, 0, err, sizeof err), -1);
    pod_kvc_free(k);
    assert_true(testd_log_contains(&da, "hello with a wrong Pod token"));
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

/* The Pod port and the client port serve their own requests only. */
static void
test_pod_ports_apart(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port();
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__KvGetRequest q = IPUOF__KV_GET_REQUEST__INIT;
    Ipuof__PodHello ph = IPUOF__POD_HELLO__INIT;
    struct pod_client *pc = NULL;
    char addr[64], err[512];
    int fd, eof = 0, rc;

    (void)state;
    assert_int_equal(start_pod_daemon(&da, "host-a", pa, "host-b", pb, "4"), 0);
    /* a Pod request on the client port */
    fd = raw_session(da.port, 0);
    assert_true(fd >= 0);
    q.job = (char *)"j";
    q.key = (char *)"k";
    h.request_id = 5;
    h.body_case = IPUOF__HEADER__BODY_KV_GET;
    h.kv_get = &q;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 5000, &eof);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_non_null(strstr(r->error->message, "kv_get is a request of a Pod port"));
    ipuof_frame_header_free(r);
    close(fd);
    /* a hello from a host that is not a peer */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", pa);
    assert_int_equal(pod_client_open(&pc, addr, "pod-secret", "host-z", 2000, err, sizeof err),
                     IPUOF_OK);
    ph.name = (char *)"host-z";
    h.body_case = IPUOF__HEADER__BODY_POD_HELLO;
    h.pod_hello = &ph;
    rc = pod_client_call(pc, &h, NULL, 0, IPUOF__HEADER__BODY_POD_HELLO_REPLY, &r, NULL, NULL,
                         2000, err, sizeof err);
    assert_int_equal(rc, IPUOF_E_AUTH);
    assert_non_null(strstr(err, "host 'host-z' is not a peer of this daemon's Pod"));
    /* a client request on the Pod port */
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    {
        Ipuof__StatusRequest sq = IPUOF__STATUS_REQUEST__INIT;
        h.status = &sq;
        rc = pod_client_call(pc, &h, NULL, 0, IPUOF__HEADER__BODY_STATUS_REPLY, &r, NULL, NULL,
                             2000, err, sizeof err);
    }
    assert_int_equal(rc, IPUOF_E_PROTO);
    assert_non_null(strstr(err, "status is a request of the client port"));
    pod_client_close(pc);
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

/* Attaches on a new session to d as process id of n of a job named name across hosts;
 * returns the reply (caller frees) or fails the test. */
static Ipuof__Header *
pod_attach(const struct testd *d, const char *name, unsigned id, unsigned n, unsigned ipus,
           const char *const *hosts, size_t nhosts, int timeout_ms, int *fd_out)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;
    int fd = raw_session(d->port, 0), eof = 0;

    assert_true(fd >= 0);
    a.num_ipus = ipus;
    a.partition_name = (char *)name;
    a.job_key = (char *)"key";
    a.process_id = id;
    a.num_processes = n;
    a.pod_hosts = (char **)hosts;
    a.n_pod_hosts = nhosts;
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, timeout_ms, &eof);
    assert_non_null(r);
    if (fd_out != NULL)
        *fd_out = fd;
    else
        close(fd);
    return r;
}

static void
expect_attach_error_named(const struct testd *d, const char *name, unsigned id, unsigned n,
                          unsigned ipus, const char *const *hosts, size_t nhosts,
                          const char *want)
{
    Ipuof__Header *r = pod_attach(d, name, id, n, ipus, hosts, nhosts, 5000, NULL);

    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    if (strstr(r->error->message, want) == NULL)
        fail_msg("wanted '%s' in: %s", want, r->error->message);
    print_message("refused: %s\n", r->error->message);
    ipuof_frame_header_free(r);
}

static void
expect_attach_error(const struct testd *d, unsigned id, unsigned n, unsigned ipus,
                    const char *const *hosts, size_t nhosts, const char *want)
{
    Ipuof__Header *r = pod_attach(d, "pj", id, n, ipus, hosts, nhosts, 5000, NULL);

    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    if (strstr(r->error->message, want) == NULL)
        fail_msg("wanted '%s' in: %s", want, r->error->message);
    print_message("refused: %s\n", r->error->message);
    ipuof_frame_header_free(r);
}

/* A job across hosts: what does not fit this daemon is refused naming what would; a
 * partition whose first host never comes fails every process with PARTITION_RESET. */
static void
test_pod_attach_plan(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port();
    const char *ab[] = {"host-a", "host-b"}, *ba[] = {"host-b", "host-a"};
    const char *az[] = {"host-a", "host-z"}, *bb[] = {"host-b"};
    const char *aa[] = {"host-a", "host-a"};
    char cfgtext[512];
    const char *extra[] = {"--ipus", "4", NULL};
    Ipuof__Header *r;
    struct timespec t0, t1;

    (void)state;
    snprintf(cfgtext, sizeof cfgtext,
             "[server]\njob_timeout = 1\n[pod]\nname = host-a\nlisten = 127.0.0.1:%d\n"
             "peers = host-b=127.0.0.1:%d\ntimeout_ms = 1000\n", pa, pb);
    assert_int_equal(testd_start(&da, cfgtext, extra), 0);
    expect_attach_error(&da, 1, 2, 2, ab, 2,
                        "process 1 of 2 belongs to Pod host 'host-b' (processes 1-1), not to "
                        "this daemon ('host-a', processes 0-0); attach it there");
    expect_attach_error(&da, 0, 2, 2, bb, 1, "this daemon is Pod host 'host-a', which is not "
                        "one of the partition's hosts");
    expect_attach_error(&da, 0, 2, 2, az, 2, "the partition's Pod host 'host-z' is not a peer "
                        "of this daemon (host 'host-a')");
    expect_attach_error(&da, 0, 3, 2, ab, 2, "3 processes cannot be shared evenly by the "
                        "partition's 2 Pod hosts");
    expect_attach_error(&da, 0, 2, 1, ab, 2, "the partition's 1 IPUs cannot be shared evenly");
    expect_attach_error(&da, 0, 2, 2, aa, 2, "names Pod host 'host-a' twice");
    /* a second process of a job naming other hosts: refused before its place is used (its
     * id would fall past the job's processes here) */
    {
        const char *a_only[] = {"host-a"};
        Ipuof__Header h = IPUOF__HEADER__INIT;
        Ipuof__AttachRequest q = IPUOF__ATTACH_REQUEST__INIT;
        int fd0 = raw_session(da.port, 0), eof = 0;

        assert_true(fd0 >= 0);
        q.num_ipus = 4;
        q.partition_name = (char *)"mixed";
        q.job_key = (char *)"key";
        q.process_id = 0;
        q.num_processes = 4;
        q.pod_hosts = (char **)ab;
        q.n_pod_hosts = 2;
        h.request_id = 2;
        h.body_case = IPUOF__HEADER__BODY_ATTACH;
        h.attach = &q;
        assert_int_equal(raw_send(fd0, &h), 0);
        assert_null(raw_recv(fd0, 300, &eof)); /* held: its job waits for process 1 */
        expect_attach_error_named(&da, "mixed", 3, 4, 2, a_only, 1,
                                  "process 3 names other Pod hosts");
        close(fd0);
    }
    /* host-b is rank 0 here and never comes: rank 1 (this daemon) waits for its generation
     * for job_timeout, then every process is told, with PARTITION_RESET */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = pod_attach(&da, "lonely", 1, 2, 2, ba, 2, 10000, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("after %ld ms: %s\n", (long)((t1.tv_sec - t0.tv_sec) * 1000 +
                  (t1.tv_nsec - t0.tv_nsec) / 1000000), r->error->message);
    assert_non_null(strstr(r->error->message, "Pod host 'host-b' (the partition's first"));
    assert_int_equal(r->error->recovery, IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET);
    ipuof_frame_header_free(r);
    /* its IPUs went back: a plain attach of all 4 works */
    {
        int fd = raw_session(da.port, 4);
        assert_true(fd >= 0);
        close(fd);
    }
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
    /* a daemon without a Pod, reached through the library and IPUOF_POD_HOSTS */
    assert_int_equal(testd_start(&da, NULL, extra), 0);
    expect_attach_error(&da, 0, 2, 2, ab, 2, "this daemon has no [pod] section");
    {
        ipuof_client *c = ipuof_client_new();
        struct ipuof_attach_opts o = {.num_ipus = 2, .partition_name = "viaenv",
                                      .process_id = 0, .num_processes = 2};
        char many[2048] = "";

        assert_non_null(c);
        assert_int_equal(ipuof_client_set_job_key(c, "k"), IPUOF_OK);
        assert_int_equal(ipuof_client_connect(c, da.addr), IPUOF_OK);
        setenv("IPUOF_POD_HOSTS", "host-a,host-b", 1);
        assert_int_equal(ipuof_attach(c, &o, NULL, 0, NULL), IPUOF_E_INVAL);
        print_message("library: %s\n", ipuof_client_errmsg(c));
        assert_non_null(strstr(ipuof_client_errmsg(c), "has no [pod] section"));
        for (int i = 0; i < 18; i++)
            snprintf(many + strlen(many), sizeof many - strlen(many), "h%d,", i);
        setenv("IPUOF_POD_HOSTS", many, 1);
        assert_int_equal(ipuof_attach(c, &o, NULL, 0, NULL), IPUOF_E_INVAL);
        assert_non_null(strstr(ipuof_client_errmsg(c), "a partition spans at most 17 hosts"));
        unsetenv("IPUOF_POD_HOSTS");
        ipuof_client_free(c);
    }
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

/* A rendezvous waiting for its first host stops as soon as its job ends: the process
 * leaves, then the daemon stops within a second or two, not after job_timeout (20 s). */
static void
test_pod_rendezvous_cancelled(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port(), fd, status;
    const char *ab[] = {"host-a", "host-b"};
    char cfgtext[512];
    const char *extra[] = {"--ipus", "4", NULL};
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;
    struct timespec t0, t1;
    long ms;
    int eof = 0;

    (void)state;
    snprintf(cfgtext, sizeof cfgtext,
             "[server]\njob_timeout = 20\n[pod]\nname = host-a\nlisten = 127.0.0.1:%d\n"
             "peers = host-b=127.0.0.1:%d\ntimeout_ms = 1000\n", pa, pb);
    assert_int_equal(testd_start(&da, cfgtext, extra), 0);
    snprintf(cfgtext, sizeof cfgtext,
             "[server]\njob_timeout = 20\n[pod]\nname = host-b\nlisten = 127.0.0.1:%d\n"
             "peers = host-a=127.0.0.1:%d\ntimeout_ms = 1000\n", pb, pa);
    assert_int_equal(testd_start(&db, cfgtext, extra), 0);
    /* process 1 on host-b: host-b waits for host-a's generation, which never comes */
    fd = raw_session(db.port, 0);
    assert_true(fd >= 0);
    a.num_ipus = 2;
    a.partition_name = (char *)"waiting";
    a.job_key = (char *)"key";
    a.process_id = 1;
    a.num_processes = 2;
    a.pod_hosts = (char **)ab;
    a.n_pod_hosts = 2;
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 500, &eof);
    assert_null(r); /* held while the partition forms */
    for (int i = 0; i < 100 && !testd_log_contains(&db, "forming the Pod partition"); i++)
        usleep(20000);
    assert_true(testd_log_contains(&db, "forming the Pod partition"));
    close(fd); /* the process leaves: its job ends, and its rendezvous with it */
    usleep(200000);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    status = testd_stop(&db);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    memset(&db, 0, sizeof db);
    ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    print_message("host-b stopped in %ld ms (exit %d)\n", ms, status);
    assert_int_equal(status, 0);
    assert_true(ms < 5000);
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

/* Both daemons up, but host-b's processes never attach: host-a's process is told within
 * job_timeout (1 s) that host-b did not join, with PARTITION_RESET, and host-a's IPUs are
 * free again. */
static void
test_pod_peer_never_joins(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port(), fd;
    const char *ab[] = {"host-a", "host-b"};
    char cfgtext[512];
    const char *extra[] = {"--ipus", "4", NULL};
    Ipuof__Header *r;
    struct timespec t0, t1;
    long ms;

    (void)state;
    snprintf(cfgtext, sizeof cfgtext,
             "[server]\njob_timeout = 1\n[pod]\nname = host-a\nlisten = 127.0.0.1:%d\n"
             "peers = host-b=127.0.0.1:%d\ntimeout_ms = 1000\n", pa, pb);
    assert_int_equal(testd_start(&da, cfgtext, extra), 0);
    snprintf(cfgtext, sizeof cfgtext,
             "[server]\njob_timeout = 1\n[pod]\nname = host-b\nlisten = 127.0.0.1:%d\n"
             "peers = host-a=127.0.0.1:%d\ntimeout_ms = 1000\n", pb, pa);
    assert_int_equal(testd_start(&db, cfgtext, extra), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = pod_attach(&da, "half", 0, 2, 2, ab, 2, 10000, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("after %ld ms: %s\n", ms, r->error->message);
    assert_non_null(strstr(r->error->message, "Pod host 'host-b' did not join partition "
                                              "'half': its processes did not attach in time"));
    assert_int_equal(r->error->recovery, IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET);
    assert_true(ms < 5000);
    ipuof_frame_header_free(r);
    fd = raw_session(da.port, 4); /* host-a's IPUs are back */
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(testd_stop(&db), 0);
    memset(&db, 0, sizeof db);
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

/* Arms kind on daemon d through its admin socket: IPUOF_OK and the id, or the status with
 * the daemon's sentence in err. */
static int
arm(const struct testd *d, const char *kind, unsigned *id, char *err, size_t len)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_fault f;
    int rc;

    assert_non_null(c);
    memset(&f, 0, sizeof f);
    snprintf(f.kind, sizeof f.kind, "%s", kind);
    rc = ipuof_client_connect(c, d->admin_addr);
    if (rc == IPUOF_OK)
        rc = ipuof_fault_inject(c, &f, id);
    snprintf(err, len, "%s", ipuof_client_errmsg(c));
    ipuof_client_free(c);
    return rc;
}

/* link:partition:host-b armed on host-a (issue 22's link faults): host-a stops its hellos
 * to host-b and refuses host-b's, so each shows the other unreachable naming the fault;
 * host-a keeps serving its own IPUs; a peer not in the Pod is refused; clearing the fault
 * heals the link. */
static void
test_pod_link_partition(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port();
    unsigned ipus = 0, id = 0;
    char err[512];
    int fd;
    ipuof_client *c;

    (void)state;
    assert_int_equal(start_pod_daemon(&da, "host-a", pa, "host-b", pb, "4"), 0);
    assert_int_equal(start_pod_daemon(&db, "host-b", pb, "host-a", pa, "8"), 0);
    assert_int_equal(wait_state(&da, "host-b", IPUOF_POD_HOST_REACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_REACHABLE);
    assert_int_equal(wait_state(&db, "host-a", IPUOF_POD_HOST_REACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_REACHABLE);

    assert_int_equal(arm(&da, "link:partition:host-c", &id, err, sizeof err), IPUOF_E_INVAL);
    print_message("refused: %s\n", err);
    assert_non_null(strstr(err, "'host-c' is not a peer of this daemon (host 'host-a'); its "
                            "peers are host-b"));
    if (arm(&da, "link:partition:host-b", &id, err, sizeof err) != IPUOF_OK)
        fail_msg("link:partition:host-b refused: %s", err);
    assert_int_equal(wait_state(&da, "host-b", IPUOF_POD_HOST_UNREACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_UNREACHABLE);
    print_message("host-a sees host-b: %s\n", err);
    assert_non_null(strstr(err, "partitioned by injected fault"));
    assert_non_null(strstr(err, "link:partition:host-b"));
    assert_int_equal(wait_state(&db, "host-a", IPUOF_POD_HOST_UNREACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_UNREACHABLE);
    print_message("host-b sees host-a: %s\n", err);
    assert_non_null(strstr(err, "partitioned by injected fault"));
    assert_non_null(strstr(err, "on host 'host-a'"));
    fd = raw_session(da.port, 4); /* host-a still serves its own IPUs */
    assert_true(fd >= 0);
    close(fd);

    c = ipuof_client_new();
    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, da.admin_addr), IPUOF_OK);
    assert_int_equal(ipuof_fault_clear(c, id, NULL), IPUOF_OK);
    ipuof_client_free(c);
    assert_int_equal(wait_state(&da, "host-b", IPUOF_POD_HOST_REACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_REACHABLE);
    assert_int_equal(ipus, 8);
    assert_int_equal(wait_state(&db, "host-a", IPUOF_POD_HOST_REACHABLE, &ipus, err,
                                sizeof err, 5000), IPUOF_POD_HOST_REACHABLE);
    assert_int_equal(testd_stop(&db), 0);
    memset(&db, 0, sizeof db);
    assert_int_equal(testd_stop(&da), 0);
    memset(&da, 0, sizeof da);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_config),
        cmocka_unit_test(test_pod_kv_limits),
        cmocka_unit_test(test_pod_kv_every_byte),
        cmocka_unit_test_teardown(test_pod_two_daemons, teardown),
        cmocka_unit_test_teardown(test_pod_store, teardown),
        cmocka_unit_test_teardown(test_pod_ports_apart, teardown),
        cmocka_unit_test_teardown(test_pod_attach_plan, teardown),
        cmocka_unit_test_teardown(test_pod_rendezvous_cancelled, teardown),
        cmocka_unit_test_teardown(test_pod_peer_never_joins, teardown),
        cmocka_unit_test_teardown(test_pod_link_partition, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
