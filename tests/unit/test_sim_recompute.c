/*
 * test_sim_recompute.c — recomputation (recompute.c) and memory as the IPU counts it
 * (mem_prop.c, plan.c): a small residual CNN with BatchNormalization, Dropout and a
 * checkpoint trained for a few steps in every recomputation mode gives weights bit-identical
 * to the same program without recomputation, with fewer activation bytes and a longer
 * simulated backward; a two-stage pipeline with PopTorch's default (Pipeline) the same,
 * with a smaller stash; the available memory proportion refuses an op that cannot fit;
 * IO tiles take their share; bad metadata is refused with a sentence. The whole group
 * runs again in child processes at IPUOF_SIM_ISA=avx2 and baseline (each process fixes its
 * level once).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define DIMS(...) ((const int64_t[]){ __VA_ARGS__ })

enum { B = 4, C = 8, H = 12, A = 3, STEPS = 3, CLASSES = 5, BD = 16 };

static const char *const weights[] = { "c0.w", "bn.s", "bn.b", "bn.m", "bn.v", "c1.w",
                                       "c2.w", "fc.w", "fc.b" };

/* Deterministic values in [-0.5, 0.5). */
static float *
values(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof(float) + 4);
    uint32_t x = seed * 2654435761u + 1u;

    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)(x >> 8) / (float)(1u << 24) - 0.5f;
    }
    return v;
}

static void
weight(struct sim_ob *b, const char *name, int rank, const int64_t *d, size_t n, unsigned s)
{
    float *v = values(n, s);

    for (size_t i = 0; i < n && name[0] == 'b'; i++)
        v[i] = name[3] == 's' ? 1.0f + v[i] * 0.1f : v[i] * 0.1f;
    sim_ob_initializer(b, name, F32, rank, d, v);
    free(v);
}

/* x -> Conv -> BN -> Relu = r0 -> Conv -> Add(r0) [checkpoint] -> Relu -> Dropout -> Conv
 * -> Relu -> Flatten -> Gemm = logits -> CE loss. mode: metadata ipuof.recomputation
 * (NULL: none); ipu1: the nodes from the Dropout on go to IPU 1. */
static struct sim_model *
model(const char *mode, bool checkpoint, bool ipu1)
{
    struct sim_ob *b = sim_ob_new(13);
    static const int64_t one[] = { 1, 1 }, pads[] = { 1, 1, 1, 1 };

    sim_ob_input(b, "x", F32, 4, DIMS(-1, C, H, H));
    sim_ob_input(b, "y", I64, 1, DIMS(-1));
    weight(b, "c0.w", 4, DIMS(C, C, 3, 3), (size_t)C * C * 9, 1);
    weight(b, "bn.s", 1, DIMS(C), C, 2);
    weight(b, "bn.b", 1, DIMS(C), C, 3);
    weight(b, "bn.m", 1, DIMS(C), C, 4);
    weight(b, "c1.w", 4, DIMS(C, C, 3, 3), (size_t)C * C * 9, 5);
    weight(b, "c2.w", 4, DIMS(C, C, 3, 3), (size_t)C * C * 9, 6);
    weight(b, "fc.w", 2, DIMS(CLASSES, C * H * H), (size_t)CLASSES * C * H * H, 7);
    weight(b, "fc.b", 1, DIMS(CLASSES), CLASSES, 8);
    {
        float var[C];
        for (int i = 0; i < C; i++)
            var[i] = 1.0f;
        sim_ob_initializer(b, "bn.v", F32, 1, DIMS(C), var);
    }
    sim_ob_node(b, "Conv", "c0", "x,c0.w", "a0");
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_attr_ints(b, "strides", one, 2);
    sim_ob_node(b, "BatchNormalization", "bn", "a0,bn.s,bn.b,bn.m,bn.v", "n0");
    sim_ob_node(b, "Relu", "r0", "n0", "r0");
    sim_ob_node(b, "Conv", "c1", "r0,c1.w", "a1");
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_node(b, "Add", "add", "a1,r0", "s1");
    if (checkpoint)
        sim_ob_attr_int(b, "__recompute_output_in_backward", 1);
    sim_ob_node(b, "Relu", "r1", "s1", "r1");
    sim_ob_node(b, "Dropout", "drop", "r1", "d1");
    if (ipu1)
        sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Conv", "c2", "d1,c2.w", "a2");
    sim_ob_attr_ints(b, "pads", pads, 4);
    if (ipu1)
        sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Relu", "r2", "a2", "r2");
    if (ipu1)
        sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Flatten", "flat", "r2", "f");
    if (ipu1)
        sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Gemm", "fc", "f,fc.w,fc.b", "logits");
    sim_ob_attr_int(b, "transB", 1);
    if (ipu1)
        sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,y", "loss");
    if (ipu1)
        sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_output(b, "loss", F32);
    if (mode != NULL)
        sim_ob_metadata(b, "ipuof.recomputation", mode);
    return test_ob_load(b);
}

struct trained {
    float *w[sizeof(weights) / sizeof(weights[0])];
    size_t n[sizeof(weights) / sizeof(weights[0])];
    struct sim_mem_report mem[2];
    double device_s;
    uint64_t arena_host;        /* sim_exe_host_arena_bytes */
};

static void
opts(struct sim_compile_opts *o, bool pipelined)
{
    sim_compile_opts_init(o);
    o->loss = "loss";
    o->micro_batch = B;
    o->gradient_accumulation = A;
    o->seed = 11;
    if (pipelined)
        o->strategy = SIM_STRATEGY_PIPELINED;
}

/* Trains STEPS optimizer steps and keeps the weights and figures. */
static void
train(struct sim_model *m, bool pipelined, struct trained *t)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_cost_report cr;
    struct sim_err err;
    size_t nx = (size_t)A * B * C * H * H;
    float *x = values(nx, 99);
    int64_t *y;

    opts(&o, pipelined);
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    memcpy(sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "x")), x, nx * sizeof(float));
    y = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "y"));
    for (int i = 0; i < A * B; i++)
        y[i] = i % CLASSES;
    for (int s = 0; s < STEPS; s++)
        if (sim_exe_run(e, &err) != 0)
            fail_msg("run: %s", err.msg);
    for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++) {
        struct sim_weight_info info;
        long k = sim_exe_weight_index(e, weights[i]);
        assert_true(k >= 0);
        assert_int_equal(sim_exe_weight_info(e, (size_t)k, &info), 0);
        t->n[i] = info.bytes;
        t->w[i] = malloc(info.bytes + 4);
        assert_non_null(t->w[i]);
        if (sim_exe_read_weight(e, weights[i], t->w[i], info.bytes, &err) != 0)
            fail_msg("%s", err.msg);
    }
    for (size_t p = 0; p < sim_exe_ipu_count(e) && p < 2; p++)
        assert_int_equal(sim_exe_memory(e, p, &t->mem[p]), 0);
    t->arena_host = sim_exe_host_arena_bytes(e);
    assert_int_equal(sim_exe_cost(e, &cr), 0);
    t->device_s = cr.device_seconds;
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
}

static void
same_weights(const struct trained *a, const struct trained *b, const char *what)
{
    for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++) {
        assert_int_equal(a->n[i], b->n[i]);
        if (memcmp(a->w[i], b->w[i], a->n[i]) != 0)
            fail_msg("%s: weight %s differs from the run without recomputation", what,
                     weights[i]);
    }
}

static void
drop(struct trained *t)
{
    for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++)
        free(t->w[i]);
}

/* Every mode trains to the bits of None; RecomputeAll with the checkpoint keeps fewer
 * activation bytes and takes longer on the simulated clock. */
static void
test_modes_bit_identical(void **state)
{
    static const char *const modes[] = { "1", "2", "4" };
    struct trained none, t;

    (void)state;
    train(model("0", true, false), false, &none);
    for (size_t i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof(what), "autoRecomputation %s", modes[i]);
        train(model(modes[i], true, false), false, &t);
        same_weights(&none, &t, what);
        printf("  mode %s: activations %llu bytes (none: %llu), device %.3g s (none: "
               "%.3g s)\n", modes[i], (unsigned long long)t.mem[0].activations,
               (unsigned long long)none.mem[0].activations, t.device_s, none.device_s);
        if (strcmp(modes[i], "4") == 0) {
            assert_true(t.mem[0].activations < none.mem[0].activations);
            assert_true(t.device_s > none.device_s);
        }
        drop(&t);
    }
    drop(&none);
}

/* Two IPUs pipelined: PopTorch's default (Pipeline) recomputes stage 0 in its backward,
 * to the same bits, with a smaller stash on IPU 0. */
static void
test_pipeline_default(void **state)
{
    struct trained none, dflt;

    (void)state;
    train(model("0", false, true), true, &none);
    train(model(NULL, false, true), true, &dflt);
    same_weights(&none, &dflt, "pipelined, default recomputation");
    printf("  pipelined IPU 0: stash %llu bytes, activations %llu (none: %llu, %llu)\n",
           (unsigned long long)dflt.mem[0].stash, (unsigned long long)dflt.mem[0].activations,
           (unsigned long long)none.mem[0].stash, (unsigned long long)none.mem[0].activations);
    assert_true(none.mem[0].stash > 0);
    assert_true(dflt.mem[0].stash < none.mem[0].stash);
    drop(&none);
    drop(&dflt);
}

/* Pipelined, the pages of a slot dead after a stage's work are released (plan.c's
 * release_plan): with IPUOF_SIM_RELEASE=poison those ranges (to 64 bytes) are filled with
 * 0xff instead, and the weights are still the bits of a run that releases nothing, with
 * and without recomputation. */
static void
test_pipeline_release(void **state)
{
    struct trained keep, t;

    (void)state;
    setenv("IPUOF_SIM_RELEASE", "0", 1);
    train(model("0", false, true), true, &keep);
    setenv("IPUOF_SIM_RELEASE", "poison", 1);
    train(model("0", false, true), true, &t);
    same_weights(&keep, &t, "pipelined, released ranges poisoned");
    /* the host bound the daemon counts against arena_memory: a waiting slot holds only
     * what its last release left (this small model's slots are under 1 GiB, so only a
     * forced release makes a difference; the default releases nothing) */
    printf("  pipelined arenas' host bound: %llu bytes releasing, %llu not\n",
           (unsigned long long)t.arena_host, (unsigned long long)keep.arena_host);
    assert_true(t.arena_host < keep.arena_host);
    drop(&t);
    unsetenv("IPUOF_SIM_RELEASE");
    train(model("0", false, true), true, &t);
    assert_true(t.arena_host == keep.arena_host);
    drop(&t);
    setenv("IPUOF_SIM_RELEASE", "poison", 1);
    train(model(NULL, false, true), true, &t);
    same_weights(&keep, &t, "pipelined, default recomputation, released ranges poisoned");
    drop(&t);
    unsetenv("IPUOF_SIM_RELEASE");
    drop(&keep);
}

/* A pipeline placed by blocks as PopTorch writes them (BERT's shape, small): "/emb/" on
 * IPU 0, layers "/l0/" and "/l1/" on IPU 1 each ending at a checkpoint, a top-level op no
 * prefix matches ("/Mul", reading the layers' output and a value computed from the input
 * before any layer), then "/head/" back on IPU 0 with the loss. Returns the model. */
static struct sim_model *
blocks_model(const char *mode)
{
    struct sim_ob *b = sim_ob_new(13);

    sim_ob_input(b, "x", F32, 2, DIMS(-1, BD));
    sim_ob_input(b, "y", I64, 1, DIMS(-1));
    weight(b, "we", 2, DIMS(BD, BD), (size_t)BD * BD, 21);
    weight(b, "w0", 2, DIMS(BD, BD), (size_t)BD * BD, 22);
    weight(b, "w1", 2, DIMS(BD, BD), (size_t)BD * BD, 23);
    weight(b, "wh", 2, DIMS(CLASSES, BD), (size_t)CLASSES * BD, 24);
    sim_ob_node(b, "MatMul", "/emb/MatMul", "x,we", "e0");
    sim_ob_node(b, "Sigmoid", "/Sigmoid", "x", "m");         /* no prefix, no producer */
    sim_ob_node(b, "MatMul", "/l0/MatMul", "e0,w0", "h0");
    sim_ob_node(b, "Tanh", "/l0/Tanh0", "h0", "t0");         /* its rule reads t0 */
    sim_ob_node(b, "Tanh", "/l0/Tanh", "t0", "r0");
    sim_ob_attr_int(b, "__recompute_output_in_backward", 1);
    sim_ob_node(b, "MatMul", "/l1/MatMul", "r0,w1", "h1");
    sim_ob_node(b, "Tanh", "/l1/Tanh0", "h1", "t1");
    sim_ob_node(b, "Tanh", "/l1/Tanh", "t1", "r1");
    sim_ob_attr_int(b, "__recompute_output_in_backward", 1);
    sim_ob_node(b, "Mul", "/Mul", "m,r1", "g");               /* no prefix: "/l1/"'s */
    sim_ob_attr_int(b, "__recompute_output_in_backward", 1);  /* only IPU 0 reads it */
    sim_ob_node(b, "Gemm", "/head/Gemm", "g,wh", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "/head/Loss", "logits,y", "loss");
    sim_ob_output(b, "loss", F32);
    if (mode != NULL)
        sim_ob_metadata(b, "ipuof.recomputation", mode);
    return test_ob_load(b);
}

/* Compiles blocks_model(mode) pipelined over the blocks; IPU 1's memory in *r. */
static void
blocks_compile(const char *mode, struct sim_mem_report *r)
{
    static const struct sim_block_opt blocks[] = {
        { "/emb/", 0, 0 }, { "/l0/", 1, 1 }, { "/l1/", 2, 1 }, { "/head/", 3, 0 },
    };
    struct sim_model *m = blocks_model(mode);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    opts(&o, true);
    o.gradient_accumulation = 2 * 4 - 1;
    o.blocks = blocks;
    o.n_blocks = 4;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    assert_int_equal(sim_exe_ipu_count(e), 2);
    assert_int_equal(sim_exe_memory(e, 1, r), 0);
    sim_exe_free(e);
    sim_model_free(m);
}

/* The op no prefix matches goes with the latest block among its producers' ("/l1/", stage
 * 2 on IPU 1; the first producer's, stage 0, would read the later stage and be refused),
 * and under Pipeline recomputation (PopTorch's default here) each of IPU 1's stages
 * stashes, per micro-batch in flight beyond the first (stage k of N=4: min(A,
 * 2(N-k)-1) in flight), only what its backward cannot recompute: its received inputs and
 * its checkpoint. Stage 1 (5 in flight): e0 received and the checkpoint r0; stage 2 (3 in
 * flight): m received and the checkpoint r1 (/Mul reads it); not the checkpoint g, which
 * only IPU 0 reads (sent, not stashed: the IPU recomputes it for /Mul's backward). Without
 * recomputation each also stashes what a gradient rule of the stage reads and recomputation
 * would give back: the first Tanh's output (t0, t1), not the MatMuls' outputs h0 and h1
 * nor /Mul's output g, which no rule reads (bwd_reads), so 6 activations more. */
static void
test_pipeline_blocks_stash(void **state)
{
    const uint64_t act = (uint64_t)B * BD * sizeof(float);
    struct sim_mem_report dflt, none;

    (void)state;
    blocks_compile(NULL, &dflt);
    blocks_compile("0", &none);
    printf("  IPU 1 stash: %llu bytes with Pipeline recomputation, %llu without (one "
           "activation %llu)\n", (unsigned long long)dflt.stash, (unsigned long long)none.stash,
           (unsigned long long)act);
    assert_int_equal(dflt.stash, 4 * (2 * act) + 2 * (2 * act));
    assert_int_equal(none.stash, dflt.stash + 4 * act + 2 * act);
}

static void
compile_fails(struct sim_model *m, uint64_t memory, int code, const char *text)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    opts(&o, false);
    if (memory)
        o.ipu_memory_bytes = memory;
    assert_int_equal(sim_compile(m, &o, &e, &err), code);
    if (strstr(err.msg, text) == NULL)
        fail_msg("'%s' lacks '%s'", err.msg, text);
    printf("  %s\n", err.msg);
    sim_model_free(m);
}

/* A memory too small: the sentence names recomputation with the bytes it keeps. */
static void
test_oom_sentence(void **state)
{
    (void)state;
    compile_fails(model("0", true, false), 300000, IPUOF_E_DEVICE_OOM,
                  "recomputation (now None) keeps ");
}

/* IO tiles take their share of each IPU's memory. */
static void
test_io_tiles(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    struct sim_compile_opts o;
    struct sim_mem_report r;
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_err err;

    (void)state;
    sim_ob_input(b, "x", F32, 2, DIMS(4, 4));
    sim_ob_node(b, "Relu", "r", "x", "y");
    sim_ob_output(b, "y", F32);
    sim_ob_metadata(b, "ipuof.io_tiles", "736");
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(sim_exe_memory(e, 0, &r), 0);
    assert_int_equal(r.capacity, SIM_DEFAULT_IPU_MEMORY - SIM_DEFAULT_IPU_MEMORY / 1472 * 736);
    sim_exe_free(e);
    sim_model_free(m);
}

/* Bad metadata values are refused where they enter, with what is accepted. */
static void
test_bad_metadata(void **state)
{
    static const char *const bad[][3] = {
        { "ipuof.recomputation", "5", "RecomputationType" },
        { "ipuof.available_memory_proportion", "0.2,1.5", "proportion in [0, 1]" },
        { "ipuof.io_tiles", "-2", "tiles kept for I/O" },
    };

    (void)state;
    for (size_t i = 0; i < 3; i++) {
        struct sim_ob *b = sim_ob_new(13);
        void *bytes;
        size_t len;
        struct sim_model *m = NULL;
        struct sim_err err;
        sim_ob_input(b, "x", F32, 2, DIMS(4, 4));
        sim_ob_node(b, "Relu", "r", "x", "y");
        sim_ob_output(b, "y", F32);
        sim_ob_metadata(b, bad[i][0], bad[i][1]);
        assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
        assert_int_equal(sim_model_load(bytes, len, &m, &err), IPUOF_E_INVAL);
        if (strstr(err.msg, bad[i][2]) == NULL)
            fail_msg("'%s' lacks '%s'", err.msg, bad[i][2]);
        free(bytes);
        sim_ob_free(b);
    }
}

/* A convolution whose temporaries cannot fit its proportion even serialised. */
static void
test_proportion_refused(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    static const int64_t pads[] = { 1, 1, 1, 1 };
    float *w = values((size_t)64 * 64 * 9, 3);

    (void)state;
    sim_ob_input(b, "x", F32, 4, DIMS(1, 64, 64, 64));
    sim_ob_initializer(b, "w", F32, 4, DIMS(64, 64, 3, 3), w);
    sim_ob_node(b, "Conv", "big_conv", "x,w", "y");
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_attr_float(b, "__available_memory_proportion", 1e-7f);
    sim_ob_output(b, "y", F32);
    free(w);
    {
        struct sim_compile_opts o;
        struct sim_exe *e = NULL;
        struct sim_err err;
        struct sim_model *m = test_ob_load(b);
        sim_compile_opts_init(&o);
        int rc = sim_compile(m, &o, &e, &err);
        if (rc == 0)
            fail_msg("compiled: the proportion did not bound the convolution's temporaries");
        printf("  %s\n", err.msg);
        assert_int_equal(rc, IPUOF_E_DEVICE_OOM);
        assert_non_null(strstr(err.msg, "available memory proportion 1e-07"));
        assert_non_null(strstr(err.msg, "big_conv"));
        sim_model_free(m);
    }
}

/* The group again in a child at each ISA cap. */
static void
test_isa_levels(void **state)
{
    static const char *const levels[] = { "avx2", "baseline" };

    (void)state;
    if (getenv("IPUOF_RECOMPUTE_CHILD") != NULL)
        skip();
    for (size_t i = 0; i < 2; i++) {
        pid_t pid = fork();
        int st = 0;
        assert_true(pid >= 0);
        if (pid == 0) {
            setenv("IPUOF_SIM_ISA", levels[i], 1);
            setenv("IPUOF_RECOMPUTE_CHILD", "1", 1);
            execl("/proc/self/exe", "test_sim_recompute", (char *)NULL);
            _exit(127);
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("the tests failed at IPUOF_SIM_ISA=%s (status %d)", levels[i], st);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_bit_identical),
        cmocka_unit_test(test_pipeline_default),
        cmocka_unit_test(test_pipeline_release),
        cmocka_unit_test(test_pipeline_blocks_stash),
        cmocka_unit_test(test_oom_sentence),
        cmocka_unit_test(test_io_tiles),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_proportion_refused),
        cmocka_unit_test(test_isa_levels),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
