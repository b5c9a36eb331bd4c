/*
 * test_sim_feed.c — a run reading its input as it arrives (sim.h's "Transfers overlapped
 * with computing"): with a feed, a run computes its first micro-batch steps while the rest
 * is still being written, and gives the same bytes as a run whose input was all there; a
 * closed feed or a cancel ends a run waiting for input with an error, and the executable
 * runs again. The tutorial's network, on one IPU and pipelined over four, inference and
 * training.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipuof/status.h"
#include "mnist_model.h"
#include "obload.h"
#include "sim.h"

static const struct sim_block_opt tutorial_stages[] = {
    { "/model/layer1/", 0, 0 }, { "/model/layer2/", 1, 1 }, { "/model/Flatten", 2, 2 },
    { "/model/layer3", 2, 2 }, { "/model/layer4/", 3, 3 }, { "/loss/", 3, 3 },
};

static struct sim_model *
tutorial(void)
{
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    assert_int_equal(mnist_model_build(7, &bytes, &len), 0);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    return m;
}

/* The run's inputs, deterministic: images in [0, 1), labels 0..9; inputs[i] owned by
 * the caller, run_bytes of input i. */
static void
make_inputs(struct sim_exe *e, uint8_t **inputs)
{
    uint64_t s = 12345;

    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info in;
        assert_int_equal(sim_exe_input_info(e, i, &in), 0);
        inputs[i] = malloc(in.run_bytes + 1);
        assert_non_null(inputs[i]);
        mnist_fake_data(&s, in.dtype == SIM_DTYPE_FLOAT, inputs[i], in.run_bytes);
    }
}

/* Writes steps [k0, k1) of every input (steps x R rows, [steps][R][step]). */
static void
write_steps(struct sim_exe *e, uint8_t **inputs, uint64_t k0, uint64_t k1)
{
    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info in;
        size_t row;
        sim_exe_input_info(e, i, &in);
        row = in.run_bytes / in.iterations;     /* R rows of one step */
        memcpy((uint8_t *)sim_exe_input_buffer(e, i) + k0 * row, inputs[i] + k0 * row,
               (size_t)(k1 - k0) * row);
    }
}

/* Every output buffer and weight of e, concatenated; *len its bytes. */
static uint8_t *
results(struct sim_exe *e, size_t *len)
{
    uint8_t *buf = NULL;
    size_t n = 0;

    for (size_t i = 0; i < sim_exe_output_count(e); i++) {
        struct sim_io_info o;
        sim_exe_output_info(e, i, &o);
        buf = realloc(buf, n + o.run_bytes + 1);
        assert_non_null(buf);
        memcpy(buf + n, sim_exe_output_buffer(e, i), o.run_bytes);
        n += o.run_bytes;
    }
    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info w;
        struct sim_err err;
        sim_exe_weight_info(e, i, &w);
        buf = realloc(buf, n + w.bytes + 1);
        assert_non_null(buf);
        assert_int_equal(sim_exe_read_weight(e, w.name, buf + n, w.bytes, &err), 0);
        n += w.bytes;
    }
    *len = n;
    return buf;
}

struct fed_run {
    struct sim_exe *e;
    struct sim_feed *f;
    struct sim_err err;
    int rc;
    atomic_int finished;
};

/* sim_feed_notify's record: calls, and the largest count told. */
struct told {
    atomic_uint calls;
    atomic_uint_fast64_t max;
};

static void
on_told(void *arg, uint64_t out)
{
    struct told *t = arg;
    uint_fast64_t m = atomic_load(&t->max);

    atomic_fetch_add(&t->calls, 1);
    while (out > m && !atomic_compare_exchange_weak(&t->max, &m, out))
        ;
}

static void *
fed_run(void *p)
{
    struct fed_run *b = p;

    b->rc = sim_exe_run_fed(b->e, b->f, &b->err);
    atomic_store(&b->finished, 1);
    return NULL;
}

/* One configuration: a run with all its input there, then the same run fed step by step
 * on a fresh executable. At least the first D x A - lag steps finish (every output row
 * written) before the last step's input is written, and not the last (lag 1; a pipeline of
 * N stages in lockstep: N, its stages 1 .. N-1 working on the steps before the one stage 0
 * waits for, and finishing one more in that tick), and the results are the same bytes. */
static void
check_fed(const struct sim_model *m, const struct sim_compile_opts *o, unsigned lag,
          const char *name)
{
    struct sim_exe *e = test_compile_ok(m, o), *g = test_compile_ok(m, o);
    uint8_t *inputs[8] = { 0 };
    struct fed_run b = { 0 };
    struct told told = { 0 };
    struct sim_io_info in;
    struct sim_err err;
    uint8_t *want, *got;
    size_t want_len, got_len;
    uint64_t steps, before_last;
    pthread_t th;

    assert_true(sim_exe_input_count(e) <= 8);
    make_inputs(e, inputs);
    sim_exe_input_info(e, 0, &in);
    steps = in.iterations;
    write_steps(e, inputs, 0, steps);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    want = results(e, &want_len);

    b.e = g;
    b.f = sim_feed_new(g);
    assert_non_null(b.f);
    sim_feed_notify(b.f, on_told, &told);
    assert_int_equal(pthread_create(&th, NULL, fed_run, &b), 0);
    for (uint64_t k = 0; k + 1 < steps; k++) {
        write_steps(g, inputs, k, k + 1);
        sim_feed_inputs(b.f, k + 1);
    }
    /* the run computes what it has: every step but the last, its input not yet written */
    before_last = sim_feed_wait_outputs(b.f, steps - lag);
    write_steps(g, inputs, steps - 1, steps);
    sim_feed_inputs(b.f, steps);
    assert_int_equal(pthread_join(th, NULL), 0);
    if (b.rc != 0)
        fail_msg("fed run: %s", b.err.msg);
    printf("  %s: %llu of %llu steps done before the last one's input was written\n", name,
           (unsigned long long)before_last, (unsigned long long)steps);
    assert_true(before_last >= steps - lag && before_last < steps);
    assert_int_equal(sim_feed_outputs(b.f), steps);
    /* the notify was told as the count grew, up to every step (once per growth at most) */
    assert_int_equal(atomic_load(&told.max), steps);
    assert_true(atomic_load(&told.calls) >= 1 && atomic_load(&told.calls) <= steps);
    got = results(g, &got_len);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    sim_feed_free(b.f);
    for (size_t i = 0; i < 8; i++)
        free(inputs[i]);
    free(want);
    free(got);
    sim_exe_free(e);
    sim_exe_free(g);
}

static void
test_fed_same_bytes(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;

    (void)state;
    sim_compile_opts_init(&o);
    o.micro_batch = 8;
    o.device_iterations = 12;
    o.replicas = 2;
    check_fed(m, &o, 1, "inference, one IPU, 2 replicas");
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.strategy = SIM_STRATEGY_PIPELINED;
    check_fed(m, &o, 4, "inference, pipelined over 4 IPUs, 2 replicas");

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.micro_batch = 8;
    o.gradient_accumulation = 4;
    o.device_iterations = 3;
    sim_optimizer_init(&o.optimizer, SIM_OPT_ADAMW);
    o.optimizer.lr = 0.001f;
    check_fed(m, &o, 1, "training, one IPU");
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.strategy = SIM_STRATEGY_SHARDED;
    o.replicas = 2;
    check_fed(m, &o, 1, "training, sharded over 4 IPUs, 2 replicas");
    sim_model_free(m);
}

/* A feed closed before the input is all there fails the run, naming the step that never
 * came; a cancel ends a run waiting for input; the executable then runs again. */
static void
test_fed_closed_and_cancelled(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *e;
    uint8_t *inputs[8] = { 0 };
    struct fed_run b = { 0 };
    struct sim_err err;
    pthread_t th;
    const struct timespec pause = { 0, 30 * 1000 * 1000 };

    (void)state;
    sim_compile_opts_init(&o);
    o.micro_batch = 8;
    o.device_iterations = 10;
    e = test_compile_ok(m, &o);
    make_inputs(e, inputs);
    b.e = e;

    b.f = sim_feed_new(e);
    assert_non_null(b.f);
    assert_int_equal(pthread_create(&th, NULL, fed_run, &b), 0);
    write_steps(e, inputs, 0, 3);
    sim_feed_inputs(b.f, 3);
    assert_int_equal(sim_feed_wait_outputs(b.f, 3), 3);
    sim_feed_close(b.f);
    assert_int_equal(pthread_join(th, NULL), 0);
    printf("  closed: %s\n", b.err.msg);
    assert_int_equal(b.rc, IPUOF_E_CLOSED);
    assert_non_null(strstr(b.err.msg, "step 3 of 10 never arrived"));
    assert_int_equal(sim_feed_outputs(b.f), 3);
    sim_feed_free(b.f);

    b.f = sim_feed_new(e);
    assert_non_null(b.f);
    atomic_store(&b.finished, 0);
    assert_int_equal(pthread_create(&th, NULL, fed_run, &b), 0);
    while (!atomic_load(&b.finished)) {     /* until the run has started and seen it */
        nanosleep(&pause, NULL);
        sim_exe_cancel(e);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    printf("  cancelled: %s\n", b.err.msg);
    assert_int_equal(b.rc, IPUOF_E_CANCELLED);
    sim_feed_free(b.f);

    write_steps(e, inputs, 0, 10);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run after: %s", err.msg);
    sim_feed_free(NULL);
    for (size_t i = 0; i < 8; i++)
        free(inputs[i]);
    sim_exe_free(e);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fed_same_bytes),
        cmocka_unit_test(test_fed_closed_and_cancelled),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
