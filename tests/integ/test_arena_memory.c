/*
 * test_arena_memory.c — the IPUs' arenas count against the daemon's arena_memory, on a real
 * ipuofd through the client library: a model whose arenas could take more than the limit is
 * refused with IPUOF_E_TOO_LARGE naming arena_memory and the bytes; a model that fits alone
 * but not beside another in use is refused too; once that one is freed (kept in the cache,
 * unused) it is evicted to make room and the second compiles; the daemon serves throughout.
 * (Before, nothing counted the arenas: a compile that needed more host memory than the
 * machine had was ended by the kernel's OOM killer, with the daemon and every client.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

static struct testd d;

/* x [1, n] -> Relu -> Neg -> y: the Relu's output, n floats, lives in IPU 0's arena. */
static void *
chain(int64_t n, size_t *len)
{
    int64_t dx[2] = {1, n};
    struct sim_ob *b = sim_ob_new(13);
    void *bytes = NULL;

    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_node(b, "Relu", "relu", "x", "r");
    sim_ob_node(b, "Neg", "neg", "r", "y");
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    return bytes;
}

static int
compile(ipuof_client *c, int64_t n, ipuof_model **m)
{
    size_t len;
    void *bytes = chain(n, &len);
    int rc = ipuof_model_compile(c, bytes, len, NULL, m);

    print_message("compile of %lld floats: %s%s%s\n", (long long)n, ipuof_status_name(rc),
                  rc ? ": " : "", rc ? ipuof_client_errmsg(c) : "");
    free(bytes);
    return rc;
}

static void
test_arenas_count(void **state)
{
    /* 6 MiB: a 4 MiB arena fits, two do not, an 8 MiB one never does */
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = 1, .num_processes = 1};
    ipuof_model *a = NULL, *b = NULL, *big = NULL;

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\narena_memory = 6MiB\n", NULL), 0);
    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);

    assert_int_equal(compile(c, 2 << 20, &big), IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(ipuof_client_errmsg(c), "arena_memory"));
    assert_non_null(strstr(ipuof_client_errmsg(c), "6291456"));
    assert_null(big);

    assert_int_equal(compile(c, 1 << 20, &a), IPUOF_OK);
    assert_int_equal(compile(c, (1 << 20) + 64, &b), IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(ipuof_client_errmsg(c), "in use take"));
    assert_null(b);

    ipuof_model_free(a);      /* kept in the cache, unused: evicted for b */
    assert_int_equal(compile(c, (1 << 20) + 64, &b), IPUOF_OK);
    ipuof_model_free(b);
    assert_int_equal(compile(c, 16, &a), IPUOF_OK);   /* the daemon serves as before */
    ipuof_model_free(a);
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arenas_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
