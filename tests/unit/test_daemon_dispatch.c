/*
 * test_daemon_dispatch.c — the request table's checks (daemon/requests/dispatch.c), over a
 * bufferevent pair: request id 0, admin-only requests, payload on a request that takes
 * none, and what a stopping daemon still serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "conn.h"
#include "dpair.h"
#include "frame.h"
#include "ipuof/client.h"

/* Sends h (with len payload bytes of zeros) and returns the code of the error answering
 * it, or 0 when the reply is not an error. */
static int
answer(struct srv *s, struct bufferevent *b, Ipuof__Header *h, size_t len)
{
    static const char zeros[64];
    Ipuof__Header *r;
    int code;

    assert_int_equal(dpair_send(b, h, zeros, len), 0);
    r = dpair_recv(s, b, 2000, NULL, NULL);
    assert_non_null(r);
    code = r->body_case == IPUOF__HEADER__BODY_ERROR ? (int)r->error->code : 0;
    if (code != 0)
        print_message("  %s: %s\n", ipuof_status_name(code), r->error->message);
    ipuof_frame_header_free(r);
    return code;
}

static void
test_table_checks(void **state)
{
    struct srv s;
    struct conn *c, *ac;
    struct bufferevent *b, *admin;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__StatusRequest sq = IPUOF__STATUS_REQUEST__INIT;
    Ipuof__ResetRequest rr = IPUOF__RESET_REQUEST__INIT;
    Ipuof__AttachRequest at = IPUOF__ATTACH_REQUEST__INIT;

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    b = dpair_connect(&s, 0, &c);
    admin = dpair_connect(&s, 1, &ac);
    assert_int_equal(dpair_session(&s, b, 0), 0);
    assert_int_equal(dpair_session(&s, admin, 0), 0);

    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &sq;
    h.request_id = 0;
    assert_int_equal(answer(&s, b, &h, 0), IPUOF_E_PROTO);         /* id 0 */
    h.request_id = 10;
    assert_int_equal(answer(&s, b, &h, 0), 0);
    assert_int_equal(answer(&s, b, &h, 16), IPUOF_E_PROTO);        /* payload, none taken */

    rr.all = 1;
    h.body_case = IPUOF__HEADER__BODY_RESET;
    h.reset = &rr;
    assert_int_equal(answer(&s, b, &h, 0), IPUOF_E_AUTH);          /* admin only */
    assert_int_equal(answer(&s, admin, &h, 0), 0);

    s.stopping = 1;
    at.num_ipus = 1;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &at;
    assert_int_equal(answer(&s, b, &h, 0), IPUOF_E_SHUTDOWN);      /* nothing new */
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &sq;
    assert_int_equal(answer(&s, b, &h, 0), 0);                     /* status still */
    s.stopping = 0;
    bufferevent_free(b);
    bufferevent_free(admin);
    dpair_srv_free(&s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_checks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
