/*
 * test_daemon_conn.c — one connection (daemon/conn/conn.c) over a libevent bufferevent pair:
 * health before the hello is answered and the connection closed, any other request before
 * the hello closes it, and a client that holds a partition is not idle while one that
 * holds nothing is closed after idle_timeout. (Payloads into many sink segments:
 * test_daemon_req.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dpair.h"
#include "frame.h"
#include "ipuof/client.h"
#include "jobs.h"
#include "jobs_int.h"

static void
test_health_before_hello(void **state)
{
    struct srv s;
    struct conn *c;
    struct bufferevent *b;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__HealthRequest hq = IPUOF__HEALTH_REQUEST__INIT;

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    s.cfg.auth_token[0] = 'x'; /* a token is set: health needs none */
    b = dpair_connect(&s, 0, &c);
    assert_non_null(b);
    h.request_id = 5;
    h.body_case = IPUOF__HEADER__BODY_HEALTH;
    h.health = &hq;
    assert_int_equal(dpair_send(b, &h, NULL, 0), 0);
    r = dpair_recv(&s, b, 2000, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_HEALTH_REPLY);
    assert_true(r->health_reply->live);
    ipuof_frame_header_free(r);
    dpair_pump(&s, 20);
    assert_int_equal(s.nconns, 0); /* a probe: answered, then closed */
    bufferevent_free(b);
    dpair_srv_free(&s);
}

static void
test_request_before_hello_closes(void **state)
{
    struct srv s;
    struct conn *c;
    struct bufferevent *b;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    b = dpair_connect(&s, 0, &c);
    a.num_ipus = 1;
    h.request_id = 3;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(dpair_send(b, &h, NULL, 0), 0);
    r = dpair_recv(&s, b, 2000, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_int_equal(r->error->code, IPUOF_E_PROTO);
    assert_non_null(strstr(r->error->message, "before the hello"));
    ipuof_frame_header_free(r);
    dpair_pump(&s, 20);
    assert_int_equal(s.nconns, 0);
    assert_int_equal(dev_free_count(s.inv), 4);
    bufferevent_free(b);
    dpair_srv_free(&s);
}

/* idle_timeout closes a client that holds nothing; a client holding a partition stays
 * (on main it was closed too, taking its IPUs with it). */
static void
test_idle_timeout_spares_holders(void **state)
{
    struct srv s;
    struct conn *ca, *cb;
    struct bufferevent *a, *b;

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    s.cfg.idle_timeout = 1;
    a = dpair_connect(&s, 0, &ca);
    b = dpair_connect(&s, 0, &cb);
    assert_int_equal(dpair_session(&s, a, 1), 0);
    assert_int_equal(dpair_session(&s, b, 0), 0);
    assert_int_equal(s.nconns, 2);
    dpair_pump(&s, 2500);
    assert_int_equal(s.nconns, 1);
    assert_ptr_equal(s.conns, ca);
    assert_non_null(conn_part(ca)); /* held by the job of one process ca belongs to */
    assert_non_null(ca->job);
    assert_int_equal(ca->job->nproc, 1);
    print_message("after 2.5 s of idle_timeout 1: the holder stays, the idle client is gone\n");
    bufferevent_free(a);
    bufferevent_free(b);
    dpair_srv_free(&s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_before_hello),
        cmocka_unit_test(test_request_before_hello_closes),
        cmocka_unit_test(test_idle_timeout_spares_holders),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
