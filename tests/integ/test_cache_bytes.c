/*
 * test_cache_bytes.c — the executable cache counts the bytes its entries hold against
 * cache_bytes and evicts the least recently used unused ones beyond it, on a real ipuofd
 * through the client library. Two models of 1 MiB of weights each (1 MiB ONNX, 1 MiB of
 * loaded weights: about 2 MiB an entry): with cache_bytes = 3MiB the second evicts the
 * first, which then compiles again instead of coming from the cache; a reload raising
 * cache_bytes keeps both, and a reload lowering it evicts at once. (On main there is no
 * cache_bytes: entries were counted by number only, and the file is refused.)
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipuof/client.h"
#include "onnx_build.h"
#include "sim.h"
#include "testd.h"

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

/* y = x . w with w a [512, 512] float weight filled with seed (1 MiB): the ONNX bytes in
 * *len, caller frees. */
static void *
weighty_model(float seed, size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t xd[2] = {1, 512}, wd[2] = {512, 512};
    float *w = malloc(512 * 512 * sizeof *w);
    void *bytes = NULL;

    assert_non_null(w);
    for (int i = 0; i < 512 * 512; i++)
        w[i] = seed;
    sim_ob_input(b, "x", SIM_DTYPE_FLOAT, 2, xd);
    sim_ob_initializer(b, "w", SIM_DTYPE_FLOAT, 2, wd, w);
    sim_ob_node(b, "MatMul", "mm", "x,w", "y");
    sim_ob_output(b, "y", SIM_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    free(w);
    return bytes;
}

/* Compiles bytes on a fresh connection (attached to 1 IPU), frees the model and leaves.
 * Returns 1 when the daemon answered from its cache. */
static int
compile_and_leave(const void *bytes, size_t len, const char *name)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_model_opts o = {.name = name};
    ipuof_model *m = NULL;
    int cached, rc;

    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);
    rc = ipuof_model_compile(c, bytes, len, &o, &m);
    if (rc != IPUOF_OK)
        fail_msg("compile %s: %s", name, ipuof_client_errmsg(c));
    cached = ipuof_model_cached(m);
    ipuof_model_free(m);
    ipuof_client_free(c);
    return cached;
}

/* Sends SIGHUP and waits until the daemon has logged its n-th "configuration reloaded". */
static void
reload(int n)
{
    char needle[64];

    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500; i++) {
        size_t len = 0;
        char *log = read_file(d.log, &len);
        int seen = 0;
        static const char needle_text[] = "configuration reloaded";
        /* read_file's buffer is not NUL-terminated: search len bytes */
        for (char *p = log; p != NULL && (size_t)(p - log) < len &&
                            (p = memmem(p, len - (size_t)(p - log), needle_text,
                                        sizeof needle_text - 1)) != NULL; p++)
            seen++;
        free(log);
        if (seen >= n)
            return;
        usleep(10000);
    }
    snprintf(needle, sizeof needle, "reload %d", n);
    fail_msg("%s: not logged", needle);
}

static void
test_cache_evicts_beyond_cache_bytes(void **state)
{
    size_t la, lb;
    void *a = weighty_model(1.0f, &la), *b = weighty_model(2.0f, &lb);

    (void)state;
    assert_int_equal(testd_start(&d, "[server]\ncache_bytes = 3MiB\n", NULL), 0);
    assert_int_equal(compile_and_leave(a, la, "a"), 0);
    assert_int_equal(compile_and_leave(a, la, "a"), 1); /* kept: ~2 MiB of 3 */
    assert_false(testd_log_contains(&d, "evicted"));
    assert_int_equal(compile_and_leave(b, lb, "b"), 0); /* ~4 MiB: a goes */
    assert_true(testd_log_contains(&d, "executable cache: evicted 'a'"));
    assert_true(testd_log_contains(&d, "cache_bytes = 3145728"));
    assert_int_equal(compile_and_leave(a, la, "a"), 0); /* compiled again; b goes */
    assert_true(testd_log_contains(&d, "executable cache: evicted 'b'"));

    /* a reload raising the budget keeps both */
    assert_int_equal(testd_write_config(&d, "[server]\ncache_bytes = 64MiB\n"), 0);
    reload(1);
    assert_int_equal(compile_and_leave(b, lb, "b"), 0);
    assert_int_equal(compile_and_leave(a, la, "a"), 1);
    assert_int_equal(compile_and_leave(b, lb, "b"), 1);
    /* a reload lowering it evicts at once, least recently used first: a */
    assert_int_equal(testd_write_config(&d, "[server]\ncache_bytes = 3MiB\n"), 0);
    reload(2);
    assert_int_equal(compile_and_leave(b, lb, "b"), 1);
    assert_int_equal(compile_and_leave(a, la, "a"), 0);
    free(a);
    free(b);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cache_evicts_beyond_cache_bytes, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("cache_bytes", tests, NULL, NULL);
}
