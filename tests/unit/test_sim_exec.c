/*
 * test_sim_exec.c — the executor's run semantics: the [D][R][B] layout of inputs and
 * outputs, output modes All / Final / Sum / EveryN (with scalar outputs keeping the
 * replica dimension), input checks, symbolic and fixed batch dims, frozen inputs, and a
 * run-time error (a Gather index out of range) that leaves the executable usable.
 * Not here: op numerics (test_sim_ops.c) and the memory plan (test_sim_plan.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64

/* x (N, 3) -> y = 2 * x (N, 3), s = sum(x) (a scalar per step). */
static struct sim_model *
model_double_and_sum(int64_t batch)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[2] = { batch, 3 };
    const float two = 2.0f;

    sim_ob_input(b, "x", F32, 2, dx);
    sim_ob_initializer(b, "two", F32, 0, NULL, &two);
    sim_ob_node(b, "Mul", "double", "x,two", "y");
    sim_ob_node(b, "ReduceSum", "total", "x", "s");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "s", F32);
    return test_ob_load(b);
}

static struct sim_exe *
compile_modes(struct sim_model *m, unsigned D, unsigned R, unsigned B, int ymode, int smode,
              unsigned n)
{
    struct sim_compile_opts o;
    struct sim_output_opt modes[2] = { { "y", { ymode, n } }, { "s", { smode, n } } };
    struct sim_exe *e = NULL;
    struct sim_err err;

    sim_compile_opts_init(&o);
    o.device_iterations = D;
    o.replicas = R;
    o.micro_batch = B;
    o.output_modes = modes;
    o.n_output_modes = 2;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    return e;
}

/* Fills the run buffer with x[row][j] = row * 10 + j and runs. */
static void
fill_and_run(struct sim_exe *e, size_t rows)
{
    float *x = sim_exe_input_buffer(e, 0);
    struct sim_err err;

    for (size_t i = 0; i < rows; i++)
        for (int j = 0; j < 3; j++)
            x[i * 3 + j] = (float)(i * 10 + (size_t)j);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Sum of the 3 * B values of step (d, r). */
static float
step_sum(unsigned d, unsigned r, unsigned R, unsigned B)
{
    float s = 0;
    size_t row0 = ((size_t)d * R + r) * B;

    for (size_t i = row0; i < row0 + B; i++)
        for (int j = 0; j < 3; j++)
            s += (float)(i * 10 + (size_t)j);
    return s;
}

static void
test_mode_all(void **state)
{
    const unsigned D = 3, R = 2, B = 2;
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *e = compile_modes(m, D, R, B, SIM_OUTPUT_ALL, SIM_OUTPUT_ALL, 0);
    struct sim_io_info in, y, s;
    const float *yb, *sb;

    (void)state;
    {
        int dt, rank;
        int64_t dims[SIM_MAX_RANK];
        assert_int_equal(sim_model_input_decl(m, 0, &dt, &rank, dims), 0);
        assert_int_equal(dt, F32);
        assert_int_equal(rank, 2);
        assert_true(dims[0] == -1 && dims[1] == 3);
        assert_int_equal(sim_model_input_decl(m, 1, &dt, &rank, dims), IPUOF_E_INVAL);
    }
    sim_exe_input_info(e, 0, &in);
    assert_int_equal(in.run_rank, 2);
    assert_int_equal(in.run_dims[0], D * R * B);
    assert_int_equal(in.dims[0], B);
    assert_int_equal(in.run_bytes, (size_t)D * R * B * 3 * 4);
    assert_int_equal(sim_exe_micro_batch(e), B);
    fill_and_run(e, D * R * B);
    sim_exe_output_info(e, 0, &y);
    sim_exe_output_info(e, 1, &s);
    assert_int_equal(y.run_dims[0], D * R * B);
    assert_int_equal(s.rank, 0);
    assert_int_equal(s.run_rank, 1);
    assert_int_equal(s.run_dims[0], D * R);
    yb = sim_exe_output_buffer(e, 0);
    sb = sim_exe_output_buffer(e, 1);
    for (size_t i = 0; i < (size_t)D * R * B * 3; i++)
        assert_true(yb[i] == 2.0f * (float)((i / 3) * 10 + i % 3));
    for (unsigned d = 0; d < D; d++)
        for (unsigned r = 0; r < R; r++)
            assert_true(sb[d * R + r] == step_sum(d, r, R, B));
    printf("  All: y is [D*R*B, 3] in input order, s is [D*R] = one sum per step\n");
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_mode_final_sum(void **state)
{
    const unsigned D = 4, R = 3, B = 2;
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *e = compile_modes(m, D, R, B, SIM_OUTPUT_FINAL, SIM_OUTPUT_SUM, 0);
    struct sim_io_info y, s;
    const float *yb, *sb;

    (void)state;
    fill_and_run(e, D * R * B);
    sim_exe_output_info(e, 0, &y);
    sim_exe_output_info(e, 1, &s);
    assert_int_equal(y.run_dims[0], R * B);
    assert_int_equal(y.iterations, 1);
    assert_int_equal(s.run_dims[0], R);
    yb = sim_exe_output_buffer(e, 0);
    sb = sim_exe_output_buffer(e, 1);
    for (unsigned r = 0; r < R; r++) {
        float want = 0;
        for (unsigned b = 0; b < B; b++)
            for (int j = 0; j < 3; j++) {
                size_t row = ((size_t)(D - 1) * R + r) * B + b;
                float wy = 2.0f * (float)(row * 10 + (size_t)j);
                assert_true(yb[(r * B + b) * 3 + (unsigned)j] == wy);
            }
        for (unsigned d = 0; d < D; d++)
            want += step_sum(d, r, R, B);
        assert_true(sb[r] == want);
    }
    /* a second run starts the sum afresh */
    fill_and_run(e, D * R * B);
    assert_true(sb[0] == step_sum(0, 0, R, B) + step_sum(1, 0, R, B) + step_sum(2, 0, R, B) +
                             step_sum(3, 0, R, B));
    printf("  Final: y is replica r's last micro-batch; Sum: s is [R], summed over iterations\n");
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_mode_everyn(void **state)
{
    const unsigned D = 6, R = 2, B = 1;
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *e = compile_modes(m, D, R, B, SIM_OUTPUT_EVERYN, SIM_OUTPUT_EVERYN, 3);
    struct sim_compile_opts o;
    struct sim_output_opt bad = { "y", { SIM_OUTPUT_EVERYN, 4 } };
    struct sim_output_opt unknown = { "nope", { SIM_OUTPUT_ALL, 0 } };
    struct sim_exe *e2 = NULL;
    struct sim_err err;
    const float *sb;
    struct sim_io_info s;

    (void)state;
    fill_and_run(e, D * R * B);
    sim_exe_output_info(e, 1, &s);
    assert_int_equal(s.iterations, 2);
    assert_int_equal(s.run_dims[0], 2 * R);
    sb = sim_exe_output_buffer(e, 1);
    for (unsigned k = 0; k < 2; k++)
        for (unsigned r = 0; r < R; r++)
            assert_true(sb[k * R + r] == step_sum(3 * k + 2, r, R, B));
    printf("  EveryN(3) over 6 iterations returns iterations 2 and 5\n");
    sim_exe_free(e);

    sim_compile_opts_init(&o);
    o.device_iterations = D;
    o.micro_batch = 1;
    o.output_modes = &bad;
    o.n_output_modes = 1;
    assert_int_equal(sim_compile(m, &o, &e2, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "EveryN(4)"));
    o.output_modes = &unknown;
    assert_int_equal(sim_compile(m, &o, &e2, &err), IPUOF_E_NOTFOUND);
    printf("  refused: %s\n", err.msg);
    assert_null(e2);
    sim_model_free(m);
}

static void
test_input_checks(void **state)
{
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *e = compile_modes(m, 3, 2, 2, SIM_OUTPUT_ALL, SIM_OUTPUT_ALL, 0);
    struct sim_compile_opts o;
    struct sim_exe *e2 = NULL;
    const int64_t good[2] = { 12, 3 }, short_batch[2] = { 8, 3 }, wide[2] = { 12, 4 };
    struct sim_err err;

    (void)state;
    assert_int_equal(sim_exe_check_input(e, 0, F32, 2, good, &err), 0);
    assert_int_equal(sim_exe_check_input(e, 0, F32, 2, short_batch, &err), IPUOF_E_SHAPE);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'x'"));
    assert_non_null(strstr(err.msg, "device_iterations (3) x replicas (2) x micro-batch (2)"));
    assert_int_equal(sim_exe_check_input(e, 0, F32, 2, wide, &err), IPUOF_E_SHAPE);
    printf("  refused: %s\n", err.msg);
    assert_int_equal(sim_exe_check_input(e, 0, I64, 2, good, &err), IPUOF_E_DTYPE);
    printf("  refused: %s\n", err.msg);
    assert_int_equal(sim_exe_check_input(e, 0, F32, 1, good, &err), IPUOF_E_SHAPE);
    assert_int_equal(sim_exe_check_input(e, 5, F32, 2, good, &err), IPUOF_E_INVAL);
    sim_exe_free(e);

    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e2, &err), IPUOF_E_SHAPE);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "symbolic batch dimension 'N'"));
    sim_model_free(m);

    m = model_double_and_sum(4);
    o.micro_batch = 5;
    assert_int_equal(sim_compile(m, &o, &e2, &err), IPUOF_E_SHAPE);
    printf("  refused: %s\n", err.msg);
    o.micro_batch = 0;
    o.replicas = 0;
    assert_int_equal(sim_compile(m, &o, &e2, &err), IPUOF_E_INVAL);
    o.replicas = 1;
    o.device_iterations = 2;
    assert_int_equal(sim_compile(m, &o, &e2, &err), 0);
    assert_int_equal(sim_exe_micro_batch(e2), 4);
    sim_exe_free(e2);
    sim_model_free(m);
}

/* data (5, 2) float, idx (k) int64 runtime -> Gather axis 0 */
static void
test_runtime_error(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dd[2] = { 5, 2 }, di[1] = { 3 };
    float data[10];
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;
    int64_t *idx;
    const float *y;
    void *bytes;
    size_t len;

    (void)state;
    for (int i = 0; i < 10; i++)
        data[i] = (float)i;
    sim_ob_initializer(b, "data", F32, 2, dd, data);
    sim_ob_input(b, "idx", I64, 1, di);
    sim_ob_node(b, "Gather", "lookup", "data,idx", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    assert_int_equal(sim_model_load(bytes, len, &m, &err), 0);
    free(bytes);
    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e, &err), 0);
    idx = sim_exe_input_buffer(e, 0);
    idx[0] = 1;
    idx[1] = 7;
    idx[2] = 0;
    assert_int_equal(sim_exe_run(e, &err), IPUOF_E_INVAL);
    printf("  refused at run time: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'lookup'"));
    assert_non_null(strstr(err.msg, "index 7"));
    idx[1] = -1;
    assert_int_equal(sim_exe_run(e, &err), 0);
    y = sim_exe_output_buffer(e, 0);
    assert_true(y[0] == 2 && y[1] == 3 && y[2] == 8 && y[3] == 9 && y[4] == 0 && y[5] == 1);
    sim_exe_free(e);
    sim_model_free(m);
}

/* x (2, 6) and a runtime shape input -> Reshape: needs the shape frozen at compile time. */
static void
test_frozen_input(void **state)
{
    struct sim_ob *b = sim_ob_new(14);
    const int64_t dx[2] = { 2, 6 }, ds[1] = { 3 }, shape[3] = { 2, 3, 2 };
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_frozen_input fz = { "shape", I64, 1, ds, shape };
    struct sim_io_info info;
    struct sim_err err;
    void *bytes;
    size_t len;

    (void)state;
    sim_ob_input(b, "x", F32, 2, dx);
    sim_ob_input(b, "shape", I64, 1, ds);
    sim_ob_node(b, "Reshape", "r", "x,shape", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    assert_int_equal(sim_model_load(bytes, len, &m, &err), 0);
    free(bytes);
    assert_int_equal(sim_model_input_needs_constant(m, 0), 0);
    assert_int_equal(sim_model_input_needs_constant(m, 1), 1);
    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_UNSUPPORTED);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'r' (Reshape)"));
    assert_non_null(strstr(err.msg, "known at compile time"));
    o.frozen = &fz;
    o.n_frozen = 1;
    assert_int_equal(sim_compile(m, &o, &e, &err), 0);
    assert_int_equal(sim_exe_input_count(e), 1);
    sim_exe_output_info(e, 0, &info);
    assert_int_equal(info.rank, 3);
    assert_int_equal(info.dims[1], 3);
    sim_exe_free(e);
    fz.name = "missing";
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_NOTFOUND);
    sim_model_free(m);
}

static void
test_replica_memory(void **state)
{
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *e = compile_modes(m, 2, 4, 8, SIM_OUTPUT_ALL, SIM_OUTPUT_ALL, 0);
    struct sim_mem_report r0, r3;

    (void)state;
    assert_int_equal(sim_exe_ipu_count(e), 4);
    assert_int_equal(sim_exe_memory(e, 0, &r0), 0);
    assert_int_equal(sim_exe_memory(e, 3, &r3), 0);
    assert_int_equal(r3.ipu, 3);
    assert_int_equal(r3.replica, 3);
    assert_int_equal(r0.total, r3.total);
    assert_int_equal(r0.total, r0.weights + r0.activations + r0.code);
    assert_int_equal(r0.capacity, SIM_DEFAULT_IPU_MEMORY);
    assert_int_equal(sim_exe_memory(e, 4, &r3), IPUOF_E_INVAL);
    printf("  4 replicas on IPUs 0-3, each: weights %llu, activations %llu, code %llu\n",
           (unsigned long long)r0.weights, (unsigned long long)r0.activations,
           (unsigned long long)r0.code);
    sim_exe_free(e);
    sim_model_free(m);
}

static void
count_progress(int done, int total, void *ud)
{
    int *last = ud;

    assert_true(done <= total);
    assert_true(done >= *last);
    *last = done;
}

static void
test_progress(void **state)
{
    struct sim_model *m = model_double_and_sum(4);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    int last = 0;

    (void)state;
    sim_compile_opts_init(&o);
    o.progress = count_progress;
    o.progress_ud = &last;
    assert_int_equal(sim_compile(m, &o, &e, &err), 0);
    assert_int_equal(last, 3);      /* 2 nodes + the memory plan */
    sim_exe_free(e);
    sim_model_free(m);
}

struct worker {
    struct sim_exe *e;
    int rc;
    atomic_int started, done;
};

static void *
run_worker(void *arg)
{
    struct worker *w = arg;
    struct sim_err err;

    atomic_store(&w->started, 1);
    w->rc = sim_exe_run(w->e, &err);
    atomic_store(&w->done, 1);
    return NULL;
}

/*
 * Two executables run at once on two threads; a second run of an executable that is
 * running is refused with IPUOF_E_BUSY (whichever of the two calls comes second).
 */
static void
test_threads(void **state)
{
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *a = compile_modes(m, 200000, 1, 8, SIM_OUTPUT_FINAL, SIM_OUTPUT_SUM, 0);
    struct sim_exe *b = compile_modes(m, 3, 2, 2, SIM_OUTPUT_ALL, SIM_OUTPUT_ALL, 0);
    struct worker w = { a, -1, 0, 0 };
    struct timespec ms = { 0, 1000000 };
    struct sim_err err;
    pthread_t t;
    int mine;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, run_worker, &w), 0);
    while (!atomic_load(&w.started))
        nanosleep(&ms, NULL);
    nanosleep(&ms, NULL);
    fill_and_run(b, 12);            /* another executable runs meanwhile */
    mine = sim_exe_run(a, &err);
    pthread_join(t, NULL);
    assert_true(w.rc == 0 || w.rc == IPUOF_E_BUSY);
    assert_true(mine == 0 || mine == IPUOF_E_BUSY);
    assert_false(w.rc == IPUOF_E_BUSY && mine == IPUOF_E_BUSY);
    if (mine == IPUOF_E_BUSY || w.rc == IPUOF_E_BUSY)
        printf("  a second run of a running executable is refused (IPUOF_E_BUSY)\n");
    else
        printf("  the two runs did not overlap this time\n");
    sim_exe_free(a);
    sim_exe_free(b);
    sim_model_free(m);
}

/* A long run cancelled from another thread stops with IPUOF_E_CANCELLED; the executable
 * runs normally afterwards, and a cancel with no run in progress has no effect. */
static void
test_cancel(void **state)
{
    struct sim_model *m = model_double_and_sum(-1);
    struct sim_exe *a = compile_modes(m, 2000000, 1, 1, SIM_OUTPUT_FINAL, SIM_OUTPUT_SUM, 0);
    struct sim_exe *b = compile_modes(m, 3, 2, 2, SIM_OUTPUT_ALL, SIM_OUTPUT_ALL, 0);
    struct worker w = { a, -1, 0, 0 };
    struct timespec ms = { 0, 1000000 };
    pthread_t t;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, run_worker, &w), 0);
    while (!atomic_load(&w.done)) {
        if (atomic_load(&w.started))
            sim_exe_cancel(a);
        nanosleep(&ms, NULL);
    }
    pthread_join(t, NULL);
    assert_true(w.rc == IPUOF_E_CANCELLED || w.rc == 0);
    printf("  %s\n", w.rc == 0 ? "the run finished before the cancel" : "cancelled");
    sim_exe_cancel(b);
    fill_and_run(b, 12);
    sim_exe_free(a);
    sim_exe_free(b);
    sim_model_free(m);
}

/* Resident bytes of this process (/proc/self/statm's second field, in pages). */
static uint64_t
resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, pages = 0;
    int n;

    if (f == NULL)
        fail_msg("cannot read /proc/self/statm: the test needs Linux's /proc");
    n = fscanf(f, "%llu %llu", &size, &pages);
    fclose(f);
    if (n != 2)
        fail_msg("/proc/self/statm did not hold two numbers");
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A compile binds its arenas (one per micro-batch in flight and IPU) without touching
 * them: x (8192, 256) concatenated 8 times, its ReLU, summed: an arena of about 128 MiB
 * against an 8 MiB input stream, and the resident set grows by far less than the arena
 * (zeroing it at bind time, as before, grew it by all of it; BERT-Base's 27 slots of IPU
 * 1 took the daemon to 19 GB). A run then computes the sum over zero-mapped pages. */
static void
test_bind_leaves_arenas_untouched(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[2] = { 8192, 256 };
    struct sim_mem_report rep;
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_compile_opts o;
    struct sim_err err;
    uint64_t before, grew;

    (void)state;
    sim_ob_input(b, "x", F32, 2, dx);
    sim_ob_node(b, "Concat", "wide", "x,x,x,x,x,x,x,x", "c");
    sim_ob_attr_int(b, "axis", 1);
    sim_ob_node(b, "Relu", "relu", "c", "r");
    sim_ob_node(b, "ReduceSum", "total", "r", "s");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "s", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    before = resident_bytes();
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    grew = resident_bytes() - before;
    assert_int_equal(sim_exe_memory(e, 0, &rep), 0);
    print_message("arena and streams %llu bytes; the resident set grew by %llu\n",
                  (unsigned long long)rep.activations, (unsigned long long)grew);
    assert_true(rep.activations > (uint64_t)96 << 20);
    assert_true(grew < rep.activations / 4);
    sim_exe_free(e);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_all),
        cmocka_unit_test(test_mode_final_sum),
        cmocka_unit_test(test_mode_everyn),
        cmocka_unit_test(test_input_checks),
        cmocka_unit_test(test_runtime_error),
        cmocka_unit_test(test_frozen_input),
        cmocka_unit_test(test_replica_memory),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_bind_leaves_arenas_untouched),
    };

    return cmocka_run_group_tests_name("sim_exec", tests, NULL, NULL);
}
