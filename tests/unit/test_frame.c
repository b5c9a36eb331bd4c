/*
 * test_frame.c — the frame codec: valid frames, byte-by-byte feeding, truncation, oversize,
 * bad magic, bad version, garbage, string and repeated-field limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "ipuof/client.h"

static struct ipuof_frame_limits lim;

static int
setup(void **state)
{
    (void)state;
    ipuof_frame_limits_default(&lim);
    return 0;
}

/* Packs an attach request frame; caller frees *buf. */
static void
pack_attach(uint8_t **buf, size_t *len, const char *name, unsigned n)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;

    a.num_ipus = n;
    a.partition_name = (char *)name;
    h.request_id = 42;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(ipuof_frame_pack(&h, 0, buf, len), IPUOF_OK);
}

static void
test_roundtrip(void **state)
{
    struct ipuof_frame_head head;
    Ipuof__Header *h;
    uint8_t *buf;
    size_t len, used;
    char err[256];

    (void)state;
    pack_attach(&buf, &len, "train", 2);
    assert_int_equal(ipuof_frame_parse(buf, len, &lim, &head, &h, &used, err, sizeof err),
                     IPUOF_OK);
    assert_int_equal(used, len);
    assert_int_equal(head.version, IPUOF_PROTOCOL_VERSION);
    assert_int_equal(h->request_id, 42);
    assert_int_equal(h->body_case, IPUOF__HEADER__BODY_ATTACH);
    assert_int_equal(h->attach->num_ipus, 2);
    assert_string_equal(h->attach->partition_name, "train");
    assert_string_equal(ipuof_frame_body_name(h), "attach");
    ipuof_frame_header_free(h);
    free(buf);
}

/* Every proper prefix of a frame asks for more bytes; the whole frame parses. */
static void
test_byte_by_byte(void **state)
{
    struct ipuof_frame_head head;
    Ipuof__Header *h;
    uint8_t *buf;
    size_t len, used;
    char err[256];

    (void)state;
    pack_attach(&buf, &len, "p", 1);
    for (size_t k = 0; k < len; k++) {
        assert_int_equal(ipuof_frame_parse(buf, k, &lim, &head, &h, &used, err, sizeof err),
                         IPUOF_FRAME_NEED_MORE);
        assert_null(h);
    }
    assert_int_equal(ipuof_frame_parse(buf, len, &lim, &head, &h, &used, err, sizeof err),
                     IPUOF_OK);
    ipuof_frame_header_free(h);
    free(buf);
}

static void
test_bad_magic(void **state)
{
    struct ipuof_frame_head head;
    uint8_t buf[16] = "GET / HTTP/1.0\r\n";
    char err[256];

    (void)state;
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_E_PROTO);
    assert_non_null(strstr(err, "magic"));
}

static void
test_bad_version(void **state)
{
    struct ipuof_frame_head head;
    uint8_t buf[16];
    char err[256];

    (void)state;
    ipuof_frame_head_encode(buf, 10, 0);
    buf[4] = 0;
    buf[5] = 99;
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_E_VERSION);
    assert_int_equal(head.version, 99);
    assert_non_null(strstr(err, "99"));
    assert_non_null(strstr(err, "version 1"));
}

static void
test_oversized(void **state)
{
    struct ipuof_frame_head head;
    uint8_t buf[16];
    char err[256];

    (void)state;
    ipuof_frame_head_encode(buf, 10, 0xffffffffu); /* a frame announcing 4 GiB */
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(err, "4294967295"));
    ipuof_frame_head_encode(buf, lim.max_header + 1, 0);
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_E_TOO_LARGE);
    ipuof_frame_head_encode(buf, lim.max_header, lim.max_payload);
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_OK);
    ipuof_frame_head_encode(buf, 0, 0);
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_E_PROTO);
    buf[7] = 1; /* reserved flags */
    ipuof_frame_head_encode(buf, 5, 0);
    buf[7] = 1;
    assert_int_equal(ipuof_frame_head_decode(buf, sizeof buf, &lim, &head, err, sizeof err),
                     IPUOF_E_PROTO);
}

/* A valid head followed by random bytes: rejected or parsed, never a crash or leak. */
static void
test_garbage_header(void **state)
{
    uint8_t buf[16 + 512];
    unsigned seed = 12345;
    int rejected = 0;

    (void)state;
    for (int round = 0; round < 2000; round++) {
        struct ipuof_frame_head head;
        Ipuof__Header *h;
        size_t used, n = 1 + (size_t)(rand_r(&seed) % 512);
        char err[256];
        int rc;

        ipuof_frame_head_encode(buf, (uint32_t)n, 0);
        for (size_t i = 0; i < n; i++)
            buf[16 + i] = (uint8_t)rand_r(&seed);
        rc = ipuof_frame_parse(buf, 16 + n, &lim, &head, &h, &used, err, sizeof err);
        if (rc == IPUOF_OK)
            ipuof_frame_header_free(h);
        else
            rejected++;
    }
    assert_true(rejected > 1000);
}

static void
test_truncated_header(void **state)
{
    struct ipuof_frame_head head;
    Ipuof__Header *h;
    uint8_t *buf;
    size_t len, used;
    char err[256];

    (void)state;
    pack_attach(&buf, &len, "truncated-name", 4);
    /* Claim a shorter header than was packed: the cut message does not decode. */
    ipuof_frame_head_encode(buf, (uint32_t)(len - 16 - 5), 0);
    assert_int_equal(ipuof_frame_parse(buf, len, &lim, &head, &h, &used, err, sizeof err),
                     IPUOF_E_PROTO);
    assert_null(h);
    free(buf);
}

static void
test_string_limit(void **state)
{
    struct ipuof_frame_limits small = lim;
    struct ipuof_frame_head head;
    Ipuof__Header *h;
    char name[200];
    uint8_t *buf;
    size_t len, used;
    char err[256];

    (void)state;
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    pack_attach(&buf, &len, name, 1);
    small.max_string = 100;
    assert_int_equal(ipuof_frame_parse(buf, len, &small, &head, &h, &used, err, sizeof err),
                     IPUOF_E_PROTO);
    assert_non_null(strstr(err, "partition_name"));
    assert_non_null(strstr(err, "199"));
    free(buf);
}

static void
test_repeated_limit(void **state)
{
    struct ipuof_frame_limits small = lim;
    Ipuof__Header h = IPUOF__HEADER__INIT, *out;
    Ipuof__ResetRequest r = IPUOF__RESET_REQUEST__INIT;
    struct ipuof_frame_head head;
    uint32_t ids[50] = {0};
    uint8_t *buf;
    size_t len, used;
    char err[256];

    (void)state;
    r.n_ipu_ids = 50;
    r.ipu_ids = ids;
    h.request_id = 1;
    h.body_case = IPUOF__HEADER__BODY_RESET;
    h.reset = &r;
    assert_int_equal(ipuof_frame_pack(&h, 0, &buf, &len), IPUOF_OK);
    small.max_repeated = 10;
    assert_int_equal(ipuof_frame_parse(buf, len, &small, &head, &out, &used, err, sizeof err),
                     IPUOF_E_PROTO);
    assert_non_null(strstr(err, "ipu_ids"));
    assert_int_equal(ipuof_frame_parse(buf, len, &lim, &head, &out, &used, err, sizeof err),
                     IPUOF_OK);
    assert_int_equal(out->reset->n_ipu_ids, 50);
    ipuof_frame_header_free(out);
    free(buf);
}

static void
test_status_names(void **state)
{
    (void)state;
    assert_string_equal(ipuof_status_name(IPUOF_E_NOTFOUND), "IPUOF_E_NOTFOUND");
    assert_string_equal(ipuof_strerror(IPUOF_OK), "success");
    assert_string_equal(ipuof_strerror(-5), "unknown status code");
    for (int i = 0; i < IPUOF_STATUS_COUNT; i++)
        assert_true(strncmp(ipuof_status_name(i), "IPUOF_", 6) == 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),       cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_bad_magic),       cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_oversized),       cmocka_unit_test(test_garbage_header),
        cmocka_unit_test(test_truncated_header), cmocka_unit_test(test_string_limit),
        cmocka_unit_test(test_repeated_limit),  cmocka_unit_test(test_status_names),
    };
    return cmocka_run_group_tests_name("frame", tests, setup, NULL);
}
