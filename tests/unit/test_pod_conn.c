/*
 * test_pod_conn.c — the Pod port's requests against the daemon's own connection code, over
 * bufferevent pairs (dpair.h), where a connection's queued output is exact:
 *   - a rendezvous get whose timeout reply takes its connection over max_output_bytes (issue
 *     32, defect 2: the connection was freed with the waiter inside on_wait_timeout, which
 *     then freed the waiter again: SIGSEGV, or ASan's use after free);
 *   - the same for a set answering two gets of one connection (defect 1);
 *   - the Pod port's fuzz corpus (tests/fuzz/corpus/pod) replayed through its harness
 *     (tests/util/podfuzz.c), as make fuzz does, so its inputs run in make test too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dpair.h"
#include "frame.h"
#include "pod_kv.h"
#include "podfuzz.h"
#include "srv_state.h"

/* s as a Pod daemon named "unit" (dpair's hello name), with one Pod connection *c that said
 * hello; returns its client end. */
static struct bufferevent *
pod_setup(struct srv *s, struct conn **c)
{
    struct bufferevent *b;

    assert_int_equal(dpair_srv_init(s, 1, 1), 0);
    s->kv = pod_kv_new();
    assert_non_null(s->kv);
    snprintf(s->cfg.pod_name, sizeof s->cfg.pod_name, "unit");
    b = dpair_connect(s, 0, c);
    assert_non_null(b);
    (*c)->pod = 1;
    s->npod++;
    assert_int_equal(dpair_session(s, b, 0), 0);
    return b;
}

static void
pod_teardown(struct srv *s, struct bufferevent *b)
{
    struct pod_kv *kv = s->kv;

    bufferevent_free(b);
    dpair_srv_free(s);
    pod_kv_free(kv);
}

static void
send_get(struct bufferevent *b, uint64_t id, const char *key, uint32_t timeout_ms)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__KvGetRequest q = IPUOF__KV_GET_REQUEST__INIT;

    q.job = (char *)"job";
    q.key = (char *)key;
    q.timeout_ms = timeout_ms;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_KV_GET;
    h.kv_get = &q;
    assert_int_equal(dpair_send(b, &h, NULL, 0), 0);
}

/* Defect 2: the timeout's error reply takes the connection over its output limit. */
static void
test_timeout_reply_over_output_limit(void **state)
{
    struct srv s;
    struct conn *c;
    struct bufferevent *b;

    (void)state;
    b = pod_setup(&s, &c);
    bufferevent_disable(b, EV_READ); /* the peer reads nothing: replies stay queued */
    send_get(b, 5, "never", 300);
    for (int t = 0; t < 200 && s.nkv_waiters == 0; t++)
        dpair_pump(&s, 1);
    assert_int_equal(s.nkv_waiters, 1);
    assert_int_equal(c->kv_waiting, 1);
    s.cfg.max_output_bytes = 1; /* the error reply is over it: the connection is dropped */
    for (int t = 0; t < 3000 && s.nconns > 0; t++)
        dpair_pump(&s, 1);
    assert_int_equal(s.nkv_waiters, 0);
    assert_int_equal(s.nconns, 0);
    assert_int_equal(s.npod, 0);
    pod_teardown(&s, b);
}

/* Defect 1: a set answers two gets of another connection; the first reply takes it over
 * its output limit, so it is dropped while the answers are sent. */
static void
test_set_reply_over_output_limit(void **state)
{
    struct srv s;
    struct conn *c, *c2;
    struct bufferevent *b, *b2;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__KvSetRequest q = IPUOF__KV_SET_REQUEST__INIT;
    static char v[4096];

    (void)state;
    b = pod_setup(&s, &c);
    b2 = dpair_connect(&s, 0, &c2);
    assert_non_null(b2);
    c2->pod = 1;
    s.npod++;
    assert_int_equal(dpair_session(&s, b2, 0), 0);
    bufferevent_disable(b, EV_READ); /* the peer reads nothing: replies stay queued */
    send_get(b, 5, "k", 60000);
    send_get(b, 6, "k", 60000);
    for (int t = 0; t < 200 && s.nkv_waiters < 2; t++)
        dpair_pump(&s, 1);
    assert_int_equal(s.nkv_waiters, 2);
    s.cfg.max_output_bytes = 2048;
    q.job = (char *)"job";
    q.key = (char *)"k";
    h.request_id = 7;
    h.body_case = IPUOF__HEADER__BODY_KV_SET;
    h.kv_set = &q;
    assert_int_equal(dpair_send(b2, &h, v, sizeof v), 0);
    r = dpair_recv(&s, b2, 2000, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_KV_SET_REPLY);
    ipuof_frame_header_free(r);
    dpair_pump(&s, 20);
    assert_int_equal(s.nkv_waiters, 0);
    assert_int_equal(s.nconns, 1); /* the setter stays */
    assert_int_equal(s.kv_held, 0); /* the shared copy went with the dropped replies */
    bufferevent_free(b2);
    pod_teardown(&s, b);
}

/* Every input of tests/fuzz/corpus/pod through the fuzz harness. */
static void
test_fuzz_corpus_replay(void **state)
{
    const char *dir = "tests/fuzz/corpus/pod";
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    (void)state;
    if (d == NULL)
        fail_msg("no corpus at %s (run from the source tree's top)", dir);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        uint8_t buf[65536];
        size_t len;
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        f = fopen(path, "rb");
        assert_non_null(f);
        len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        assert_int_equal(podfuzz_one(buf, len), 0);
        n++;
    }
    closedir(d);
    print_message("replayed %d inputs of %s\n", n, dir);
    assert_true(n > 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeout_reply_over_output_limit),
        cmocka_unit_test(test_set_reply_over_output_limit),
        cmocka_unit_test(test_fuzz_corpus_replay),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
