/*
 * test_daemon_models.c — the daemon's model bookkeeping (daemon/state/models.c) and device busy
 * state: a model's IPU numbers never index past the inventory, run buffers are counted as
 * host memory, the cache evicts unused executables beyond host_memory, and IPUs show busy
 * only while a job runs on them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "dpair.h"
#include "models.h"
#include "onnx_build.h"
#include "sim.h"

/* A model on IPUs 2.. of a 4-IPU inventory claiming 4 IPUs: only IPUs 2 and 3 are counted
 * (on main model_place wrote past the table: ASan reports a heap-buffer-overflow). */
static void
test_place_never_past_inventory(void **state)
{
    struct srv s;
    struct model m = {0};

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    m.first_ipu = 2;
    m.nipus = 4;
    for (int i = 0; i < 4; i++)
        m.mem[i] = 100 + (uint64_t)i;
    m.host = 5000;
    model_place(s.inv, &m);
    assert_int_equal(s.inv->ipus[0].memory_used, 0);
    assert_int_equal(s.inv->ipus[1].memory_used, 0);
    assert_int_equal(s.inv->ipus[2].memory_used, 100);
    assert_int_equal(s.inv->ipus[3].memory_used, 101);
    assert_int_equal(s.inv->ipus[2].host_used, 5000);
    models_count_steps(s.inv, &m, 7);
    assert_int_equal(s.inv->ipus[3].steps_run, 7);
    m.next = NULL;
    m.entry = NULL;
    model_free(s.inv, &s.cache, memcpy(malloc(sizeof m), &m, sizeof m));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s.inv->ipus[i].memory_used, 0);
        assert_int_equal(s.inv->ipus[i].host_used, 0);
    }
    m.first_ipu = 9; /* wholly outside: nothing counted, nothing written */
    model_place(s.inv, &m);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s.inv->ipus[i].memory_used, 0);
    dpair_srv_free(&s);
}

static struct cache_entry *
entry(uint64_t host)
{
    struct cache_entry *e = calloc(1, sizeof *e);

    assert_non_null(e);
    e->key = strdup("k");
    e->reusable = 1;
    e->host_bytes = host;
    return e;
}

/* Unused entries are evicted, least recently used first, while their run buffers total
 * more than the limit; entries in use stay whatever they hold. */
static void
test_cache_evicts_beyond_host_memory(void **state)
{
    struct cache k;
    struct cache_entry *a = entry(600), *b = entry(600), *c = entry(300);
    struct timespec ts = {0, 5000000};

    (void)state;
    cache_init(&k, 10, 1000, UINT64_MAX);
    cache_insert(&k, a);
    cache_insert(&k, b);
    assert_int_equal(k.n, 2);
    cache_release(&k, a);
    assert_int_equal(k.n, 2);      /* 600 idle: under 1000 */
    nanosleep(&ts, NULL);
    cache_release(&k, b);          /* 1200 idle: the older (a) goes */
    assert_int_equal(k.n, 1);
    assert_ptr_equal(k.head, b);
    cache_insert(&k, c);
    nanosleep(&ts, NULL);
    cache_release(&k, c);          /* 900 idle */
    assert_int_equal(k.n, 2);
    cache_set_limits(&k, 500, UINT64_MAX); /* a reload lowers host_memory: b goes */
    assert_int_equal(k.n, 1);
    assert_ptr_equal(k.head, c);
    cache_destroy(&k);
}

/* An entry of held bytes with no executable (cache_insert keeps a preset held). */
static struct cache_entry *
entry_held(uint64_t held)
{
    struct cache_entry *e = entry(0);

    e->held = held;
    return e;
}

/* cache_bytes: the bytes of all entries, those in use included, are counted; unused
 * entries are evicted least recently used first beyond the budget, and a reload lowering
 * it evicts at once (on main nothing counted them: three clients' 512 MB entries stayed). */
static void
test_cache_evicts_beyond_cache_bytes(void **state)
{
    struct cache k;
    struct cache_entry *a = entry_held(400), *b = entry_held(400), *c = entry_held(400);
    struct timespec ts = {0, 5000000};

    (void)state;
    cache_init(&k, 10, UINT64_MAX, 1000);
    cache_insert(&k, a);
    cache_insert(&k, b);
    assert_int_equal(k.bytes, 800);
    cache_release(&k, a);
    nanosleep(&ts, NULL);
    cache_release(&k, b);
    assert_int_equal(k.n, 2);          /* 800 <= 1000 */
    cache_insert(&k, c);               /* 1200: a, the least recently used, goes */
    assert_int_equal(k.n, 2);
    assert_int_equal(k.bytes, 800);
    assert_int_equal(k.evictions, 1);
    assert_ptr_equal(k.head, c);
    assert_ptr_equal(k.head->next, b);
    cache_set_limits(&k, UINT64_MAX, 300); /* a reload: b (unused) goes, c (in use) stays */
    assert_int_equal(k.n, 1);
    assert_ptr_equal(k.head, c);
    assert_int_equal(k.bytes, 400);
    cache_release(&k, c);              /* unused now, over the budget: goes */
    assert_int_equal(k.n, 0);
    assert_int_equal(k.bytes, 0);
    cache_destroy(&k);
}

/* Two releases within one millisecond stay ordered: the least recently released entry goes
 * first. (The order was a millisecond clock: with a tie the entry first on the list, the
 * newest inserted, went, so test_cache_bytes saw its most recently used model evicted in
 * about half of its runs.) */
static void
test_cache_lru_within_a_millisecond(void **state)
{
    struct cache k;
    struct cache_entry *x = entry_held(400), *y = entry_held(400);

    (void)state;
    cache_init(&k, 10, UINT64_MAX, 1000);
    cache_insert(&k, x);
    cache_insert(&k, y);               /* the list: y, x */
    cache_release(&k, x);
    cache_release(&k, y);              /* y the most recently used, at once */
    cache_set_limits(&k, UINT64_MAX, 500); /* room for one: x goes */
    assert_int_equal(k.n, 1);
    assert_ptr_equal(k.head, y);
    cache_destroy(&k);
}

/* What an entry holds: the ONNX bytes it keeps, the model's weights (once, whatever the
 * replicas), the activations and the run buffers. A [256, 256] float weight: 256 KiB. */
static void
test_entry_bytes_count_model_and_weights(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t xd[2] = {1, 256}, wd[2] = {256, 256};
    float *w = calloc(256 * 256, sizeof *w);
    struct sim_compile_opts o;
    struct cache_entry e = {0};
    struct sim_err err;
    void *bytes;
    size_t len;
    uint64_t one, two;

    (void)state;
    assert_non_null(w);
    sim_ob_input(b, "x", SIM_DTYPE_FLOAT, 2, xd);
    sim_ob_initializer(b, "w", SIM_DTYPE_FLOAT, 2, wd, w);
    sim_ob_node(b, "MatMul", "mm", "x,w", "y");
    sim_ob_output(b, "y", SIM_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    assert_int_equal(sim_model_load(bytes, len, &e.model, &err), 0);
    sim_compile_opts_init(&o);
    o.replicas = 1;
    o.partition_ipus = 2;
    assert_int_equal(sim_compile(e.model, &o, &e.exe, &err), 0);
    e.len = len;
    e.host_bytes = models_host_bytes(e.exe);
    one = cache_entry_bytes(&e);
    print_message("ONNX %zu bytes, entry holds %llu bytes\n", len, (unsigned long long)one);
    assert_true(len > 256 * 256 * 4);
    assert_true(one >= len + 256 * 256 * 4 + e.host_bytes);
    assert_true(one < 3 * len);
    sim_exe_free(e.exe);
    o.replicas = 2; /* the replicas share the weights: counted once */
    assert_int_equal(sim_compile(e.model, &o, &e.exe, &err), 0);
    e.host_bytes = models_host_bytes(e.exe);
    two = cache_entry_bytes(&e);
    assert_true(two < one + 256 * 256 * 4);
    sim_exe_free(e.exe);
    sim_model_free(e.model);
    sim_ob_free(b);
    free(bytes);
    free(w);
}

/* The run buffers of an executable: every input and output of a whole call. */
static void
test_host_bytes_of_an_executable(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t dims[2] = {1, 4};
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    (void)state;
    sim_ob_input(b, "x", SIM_DTYPE_FLOAT, 2, dims);
    sim_ob_node(b, "Relu", "r", "x", "y");
    sim_ob_output(b, "y", SIM_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    assert_int_equal(sim_model_load(bytes, len, &m, &err), 0);
    sim_compile_opts_init(&o);
    o.device_iterations = 10;
    o.replicas = 2;
    o.partition_ipus = 2;
    assert_int_equal(sim_compile(m, &o, &e, &err), 0);
    assert_int_equal(models_host_bytes(e), 2 * 16 * 10 * 2); /* in + out, D x R steps */
    sim_exe_free(e);
    e = NULL;
    o.host_memory_bytes = 639; /* one byte short */
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_TOO_LARGE);
    print_message("refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "640 bytes of host memory"));
    o.host_memory_bytes = 0;
    o.replicas = 4; /* 4 replicas on a 2-IPU partition */
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_INVAL);
    print_message("refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "partition has 2"));
    sim_model_free(m);
    sim_ob_free(b);
    free(bytes);
}

/* Attached IPUs turn busy and back; free ones and ids past the inventory are left alone. */
static void
test_busy_state(void **state)
{
    struct srv s;
    struct dev_partition *p;
    struct dev_holder h = {0};
    char err[256];

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    assert_int_equal(dev_attach(s.inv, 2, "", &h, NULL, &p, err, sizeof err), 0);
    dev_set_busy(s.inv, p->first, 4, 1); /* 2 past the partition are free: untouched */
    assert_int_equal(s.inv->ipus[p->first].state, DEV_BUSY);
    assert_int_equal(s.inv->ipus[p->first + 1].state, DEV_BUSY);
    assert_int_equal(s.inv->ipus[(p->first + 2) % 4].state, DEV_FREE);
    dev_set_busy(s.inv, 3, 100, 1);
    dev_set_busy(s.inv, p->first, 2, 0);
    assert_int_equal(s.inv->ipus[p->first].state, DEV_ATTACHED);
    assert_int_equal(s.inv->ipus[p->first + 1].state, DEV_ATTACHED);
    dev_release(s.inv, p);
    dpair_srv_free(&s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place_never_past_inventory),
        cmocka_unit_test(test_cache_evicts_beyond_host_memory),
        cmocka_unit_test(test_cache_evicts_beyond_cache_bytes),
        cmocka_unit_test(test_cache_lru_within_a_millisecond),
        cmocka_unit_test(test_entry_bytes_count_model_and_weights),
        cmocka_unit_test(test_host_bytes_of_an_executable),
        cmocka_unit_test(test_busy_state),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
