/*
 * test_sim_ops_edge.c — ops on the edges PyTorch defines and the kernels once missed:
 *
 *  - MaxPool with NaN inputs through every kernel path (the 2x2 stride-2 one, the 1-D/2-D
 *    row kernel's interior vectors at strides 1 and 2 and its edge columns, the general
 *    loop with an Indices output, 3-D), forward and, in training, backward: PyTorch's rule is
 *    that a tap replaces the maximum when greater or NaN, so a window holding a NaN gives
 *    NaN and its gradient goes to the window's last NaN. The vector paths compared with >
 *    only, so a NaN was skipped (a number came out where PyTorch gives NaN):
 *    test_maxpool_nan fails on main.
 *  - TopK with K = 0 over an empty axis and Resize of a single dim (no scratch): the kernels
 *    computed NULL + 0, undefined behaviour that GCC's UBSan does not report and clang's
 *    does: `make BUILD=build-clang CC=clang SAN=1 build-clang/tests/test_sim_ops_edge` stops
 *    on main at sim/ops/op_scan.c:258 and sim/nn/op_resize.c:435 ("applying zero offset to null
 *    pointer"). Here they run and give empty or correct outputs.
 *
 *  - ScatterElements (reductions, duplicates, negative indices, an index out of range) and
 *    the gradients of ReduceMax / ReduceMin with ties (new ops; their central-difference
 *    checks are in test_sim_train_grad.c).
 *
 * make test runs this at every instruction-set level (IPUOF_SIM_ISA), so each kernel copy
 * is held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* A MaxPool case over one (1, 1, spatial...) plane. */
struct mp_case {
    const char *what;
    int nsp;                    /* spatial dims, 1 to 3 */
    int64_t in[3], k[3], s[3], pb[3], pe[3];
    bool indices;               /* an Indices output (the general loop) */
};

/* PyTorch's max pooling of x (the case's plane): y and the flat index of each output. */
static int64_t
ref_maxpool(const struct mp_case *c, const float *x, float *y, int64_t *idx)
{
    int64_t out[3] = { 1, 1, 1 }, in[3] = { 1, 1, 1 }, k[3] = { 1, 1, 1 }, s[3] = { 1, 1, 1 };
    int64_t pb[3] = { 0, 0, 0 }, n = 0;
    int off = 3 - c->nsp;

    for (int i = 0; i < c->nsp; i++) {
        in[off + i] = c->in[i];
        k[off + i] = c->k[i];
        s[off + i] = c->s[i];
        pb[off + i] = c->pb[i];
        out[off + i] = (c->in[i] + c->pb[i] + c->pe[i] - c->k[i]) / c->s[i] + 1;
    }
    for (int64_t o0 = 0; o0 < out[0]; o0++)
        for (int64_t o1 = 0; o1 < out[1]; o1++)
            for (int64_t o2 = 0; o2 < out[2]; o2++, n++) {
                float m = 0;
                int64_t best = -1;
                for (int64_t t0 = 0; t0 < k[0]; t0++)
                    for (int64_t t1 = 0; t1 < k[1]; t1++)
                        for (int64_t t2 = 0; t2 < k[2]; t2++) {
                            int64_t i0 = o0 * s[0] - pb[0] + t0, i1 = o1 * s[1] - pb[1] + t1;
                            int64_t i2 = o2 * s[2] - pb[2] + t2, at;
                            float v;
                            if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 ||
                                i2 >= in[2])
                                continue;
                            at = (i0 * in[1] + i1) * in[2] + i2;
                            v = x[at];
                            if (best < 0 || v > m || isnan(v)) {
                                m = v;
                                best = at;
                            }
                        }
                y[n] = m;
                idx[n] = best;
            }
    return n;
}

static bool
same(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(a)) == 0;
}

/* Runs case c on x (with NaNs) in inference (values, indices) and training (the gradient of
 * sum(y) with respect to x, which counts how often each input was a window's pick). */
static void
run_case(const struct mp_case *c, const float *x, int64_t numel)
{
    int64_t dims[5] = { 1, 1, 0, 0, 0 }, pads[6], ones[3] = { 1, 1, 1 }, n;
    float y[512], got_g[512], want_g[512];
    int64_t idx[512];

    assert_true(numel <= 512);
    for (int i = 0; i < c->nsp; i++) {
        dims[2 + i] = c->in[i];
        pads[i] = c->pb[i];
        pads[c->nsp + i] = c->pe[i];
    }
    n = ref_maxpool(c, x, y, idx);
    for (int train = 0; train < 2; train++) {
        struct sim_ob *b;
        struct sim_model *m;
        struct sim_compile_opts o;
        struct sim_err err = { 0 };
        struct sim_exe *e = NULL;
        if (train && c->indices)
            continue;
        b = sim_ob_new(13);
        sim_ob_initializer(b, "x", F32, 2 + c->nsp, dims, x);
        sim_ob_node(b, "MaxPool", "mp", "x", c->indices ? "y,i" : "y");
        sim_ob_attr_ints(b, "kernel_shape", c->k, (size_t)c->nsp);
        sim_ob_attr_ints(b, "strides", c->s, (size_t)c->nsp);
        sim_ob_attr_ints(b, "pads", pads, 2 * (size_t)c->nsp);
        sim_ob_attr_ints(b, "dilations", ones, (size_t)c->nsp);
        if (train) {
            sim_ob_node(b, "ReduceSum", "sum", "y", "loss");
            sim_ob_attr_int(b, "keepdims", 0);
            sim_ob_output(b, "loss", F32);
        } else {
            sim_ob_output(b, "y", F32);
            if (c->indices)
                sim_ob_output(b, "i", I64);
        }
        m = test_ob_load(b);
        sim_compile_opts_init(&o);
        if (train) {
            o.loss = "loss";
            o.optimizer.lr = 0.0f;
        }
        if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
            fail_msg("%s: %s", c->what, err.msg);
        if (!train) {
            const float *yo = sim_exe_output_buffer(e, 0);
            for (int64_t j = 0; j < n; j++)
                if (!same(yo[j], y[j]))
                    fail_msg("%s: output %lld is %g, PyTorch gives %g", c->what,
                             (long long)j, (double)yo[j], (double)y[j]);
            if (c->indices)
                assert_memory_equal(sim_exe_output_buffer(e, 1), idx,
                                    (size_t)n * sizeof(int64_t));
        } else {
            memset(want_g, 0, sizeof(want_g));
            for (int64_t j = 0; j < n; j++)
                want_g[idx[j]] += 1.0f;
            assert_int_equal(sim_exe_read_gradient(e, "x", got_g,
                                                   (size_t)numel * sizeof(float), &err), 0);
            for (int64_t j = 0; j < numel; j++)
                if (got_g[j] != want_g[j])
                    fail_msg("%s: the gradient of x[%lld] is %g, PyTorch gives %g", c->what,
                             (long long)j, (double)got_g[j], (double)want_g[j]);
        }
        sim_exe_free(e);
        sim_model_free(m);
    }
    printf("  MaxPool %-36s %lld outputs, NaN windows NaN, indices and gradients PyTorch's\n",
           c->what, (long long)n);
}

static void
test_maxpool_nan(void **state)
{
    static const struct mp_case cases[] = {
        { "2x2 stride 2 (4x6)", 2, { 4, 6 }, { 2, 2 }, { 2, 2 }, { 0 }, { 0 }, false },
        { "2x2 stride 2 (4x26), 8 and 4 windows wide", 2, { 4, 26 }, { 2, 2 }, { 2, 2 },
          { 0 }, { 0 }, false },
        { "3x3 stride 1 (3x20), vector interior", 2, { 3, 20 }, { 3, 3 }, { 1, 1 }, { 0 },
          { 0 }, false },
        { "3x3 stride 2 pads 1 (5x40)", 2, { 5, 40 }, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 1, 1 },
          false },
        { "1-D k4 stride 1 (30)", 1, { 30 }, { 4 }, { 1 }, { 0 }, { 0 }, false },
        { "3x3 stride 1 with Indices (4x9)", 2, { 4, 9 }, { 3, 3 }, { 1, 1 }, { 0 }, { 0 },
          true },
        { "3-D 2x2x2 stride 1 (3x4x5)", 3, { 3, 4, 5 }, { 2, 2, 2 }, { 1, 1, 1 }, { 0 },
          { 0 }, false },
    };

    (void)state;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const struct mp_case *c = &cases[k];
        float x[512];
        int64_t numel = 1;
        for (int i = 0; i < c->nsp; i++)
            numel *= c->in[i];
        for (int64_t j = 0; j < numel; j++) {
            /* distinct numbers, a NaN every 7 (two in some windows), -inf now and then */
            x[j] = (float)((j * 37) % 101) - 50.0f;
            if (j % 7 == 3 || j % 29 == 4)
                x[j] = NAN;
            if (j % 13 == 6)
                x[j] = -INFINITY;
        }
        run_case(c, x, numel);
    }
}

/* TopK with K = 0 over an empty axis: empty values and indices, no error. */
static void
test_topk_empty(void **state)
{
    const int64_t zero = 0;
    struct sim_ob *b = sim_ob_new(13);
    struct test_ob_run r;
    struct sim_io_info info;

    (void)state;
    sim_ob_input(b, "x", F32, 2, DIMS(3, 0));
    sim_ob_initializer(b, "k", I64, 1, DIMS(1), &zero);
    sim_ob_node(b, "TopK", "top", "x,k", "v,i");
    sim_ob_output(b, "v", F32);
    sim_ob_output(b, "i", I64);
    r = test_ob_run_ok(b);
    assert_int_equal(sim_exe_output_info(r.e, 0, &info), 0);
    assert_int_equal(info.dims[0], 3);
    assert_int_equal(info.dims[1], 0);
    printf("  TopK K=0 over an empty axis: (3, 0) values and indices\n");
    test_ob_run_free(&r);
}

/* Resize of one dim (no intermediate buffer, so no scratch), forward and backward. */
static void
test_resize_one_dim(void **state)
{
    const float x[6] = { 1, 2, 3, 4, 5, 6 }, scales[3] = { 1, 1, 2 };
    const float want[12] = { 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6 };
    float g[6];
    struct sim_ob *b;
    struct sim_model *m;
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct test_ob_run r;

    (void)state;
    for (int train = 0; train < 2; train++) {
        b = sim_ob_new(13);
        sim_ob_initializer(b, "x", F32, 3, DIMS(1, 2, 3), x);
        sim_ob_initializer(b, "scales", F32, 1, DIMS(3), scales);
        sim_ob_node(b, "Resize", "rz", "x,,scales", "y");
        sim_ob_attr_str(b, "mode", "nearest");
        if (!train) {
            sim_ob_output(b, "y", F32);
            r = test_ob_run_ok(b);
            assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
            test_ob_run_free(&r);
            continue;
        }
        sim_ob_node(b, "ReduceSum", "sum", "y", "loss");
        sim_ob_attr_int(b, "keepdims", 0);
        sim_ob_output(b, "loss", F32);
        m = test_ob_load(b);
        sim_compile_opts_init(&o);
        o.loss = "loss";
        o.optimizer.lr = 0.0f;
        if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
            fail_msg("Resize training: %s", err.msg);
        assert_int_equal(sim_exe_read_gradient(e, "x", g, sizeof(g), &err), 0);
        for (int i = 0; i < 6; i++)
            assert_true(g[i] == 2.0f);
        sim_exe_free(e);
        sim_model_free(m);
    }
    printf("  Resize nearest x2 on the last dim only: forward exact, gradient 2 each\n");
}

/* ScatterElements: reduction add and mul with duplicate indices on int64 data, negative
 * indices, axis 0 with indices smaller than data; an index out of range is a run-time
 * error naming it. */
static void
test_scatter_elements(void **state)
{
    const int64_t data[6] = { 1, 2, 3, 4, 5, 6 }, upd[4] = { 10, 20, 30, 40 };
    const int64_t idx[4] = { 0, 0, -1, 2 };          /* (2, 2) into (2, 3) on axis 1 */
    const int64_t want_add[6] = { 31, 2, 3, 4, 5, 76 }, want_mul[6] = { 200, 2, 3, 4, 5, 7200 };
    const int64_t want_none[6] = { 20, 2, 3, 4, 5, 40 };
    const float fx[6] = { 0, 0, 0, 0, 0, 0 }, fu[2] = { 7, 8 };
    const int64_t fi[2] = { 1, 0 };                   /* (1, 2) into (2, 3) on axis 0 */
    const float want_f[6] = { 0, 8, 0, 7, 0, 0 };
    const int64_t bad[4] = { 0, 3, 0, 0 };
    const char *reds[3] = { "none", "add", "mul" };
    const int64_t *wants[3] = { want_none, want_add, want_mul };
    struct sim_ob *b;
    struct test_ob_run r;
    struct sim_err err = { 0 };

    (void)state;
    /* k 3..5: ai.graphcore::ScatterElements, the same with the reduction at opset 14 */
    for (int k = 0; k < 6; k++) {
        b = sim_ob_new(k < 3 ? 16 : 14);
        sim_ob_initializer(b, "x", I64, 2, DIMS(2, 3), data);
        sim_ob_initializer(b, "i", I64, 2, DIMS(2, 2), idx);
        sim_ob_initializer(b, "u", I64, 2, DIMS(2, 2), upd);
        sim_ob_node(b, "ScatterElements", "sc", "x,i,u", "y");
        if (k >= 3)
            sim_ob_node_domain(b, "ai.graphcore");
        sim_ob_attr_int(b, "axis", 1);
        sim_ob_attr_str(b, "reduction", reds[k % 3]);
        sim_ob_output(b, "y", I64);
        r = test_ob_run_ok(b);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), wants[k % 3], sizeof(want_add));
        printf("  %sScatterElements int64 axis 1, reduction %s, duplicates: exact\n",
               k < 3 ? "" : "ai.graphcore::", reds[k % 3]);
        test_ob_run_free(&r);
    }
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 2, DIMS(2, 3), fx);
    sim_ob_initializer(b, "i", I64, 2, DIMS(1, 2), fi);
    sim_ob_initializer(b, "u", F32, 2, DIMS(1, 2), fu);
    sim_ob_node(b, "ScatterElements", "sc", "x,i,u", "y");
    sim_ob_output(b, "y", F32);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_f, sizeof(want_f));
    printf("  ScatterElements axis 0, indices (1, 2) into (2, 3): exact\n");
    test_ob_run_free(&r);
    b = sim_ob_new(13);
    sim_ob_input(b, "i", I64, 2, DIMS(2, 2));
    sim_ob_initializer(b, "x", I64, 2, DIMS(2, 3), data);
    sim_ob_initializer(b, "u", I64, 2, DIMS(2, 2), upd);
    sim_ob_node(b, "ScatterElements", "sc", "x,i,u", "y");
    sim_ob_attr_int(b, "axis", 1);
    sim_ob_output(b, "y", I64);
    r = test_ob_compile(b, &err);
    assert_non_null(r.e);
    memcpy(sim_exe_input_buffer(r.e, 0), bad, sizeof(bad));
    assert_int_equal(sim_exe_run(r.e, &err), IPUOF_E_INVAL);
    printf("  refused at run time: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "index 3 at element 1 is out of range for axis 1 of "
                                    "size 3"));
    test_ob_run_free(&r);
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I64, 2, DIMS(2, 3), data);
    sim_ob_initializer(b, "i", I64, 2, DIMS(3, 1), idx);
    sim_ob_initializer(b, "u", I64, 2, DIMS(3, 1), upd);
    sim_ob_node(b, "ScatterElements", "sc", "x,i,u", "y");
    sim_ob_attr_int(b, "axis", 1);
    sim_ob_output(b, "y", I64);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "larger than data [2, 3] on dim 0");
}

/* ReduceMax / ReduceMin's gradient: ties share it equally (torch.amax, amin and x.max());
 * a NaN maximum sends it to the NaNs. */
static void
test_reduce_max_grad(void **state)
{
    const float x[8] = { 1, 3, 3, 2, 5, 1, 5, 5 };
    const float want_max[8] = { 0, 0.5f, 0.5f, 0, 1.0f / 3, 0, 1.0f / 3, 1.0f / 3 };
    const float want_min[8] = { 1, 0, 0, 0, 0, 1, 0, 0 };
    const float xn[4] = { 1, NAN, 2, 0 }, want_n[4] = { 0, 1, 0, 0 };
    float g[8];

    (void)state;
    for (int k = 0; k < 3; k++) {
        struct sim_ob *b = sim_ob_new(13);
        struct sim_model *m;
        struct sim_compile_opts o;
        struct sim_err err = { 0 };
        struct sim_exe *e = NULL;
        if (k < 2)
            sim_ob_initializer(b, "x", F32, 2, DIMS(2, 4), x);
        else
            sim_ob_initializer(b, "x", F32, 1, DIMS(4), xn);
        sim_ob_node(b, k == 1 ? "ReduceMin" : "ReduceMax", "r", "x", "y");
        if (k < 2)
            sim_ob_attr_ints(b, "axes", DIMS(1), 1);
        sim_ob_attr_int(b, "keepdims", 0);
        sim_ob_node(b, "ReduceSum", "sum", "y", "loss");
        sim_ob_attr_int(b, "keepdims", 0);
        sim_ob_output(b, "loss", F32);
        m = test_ob_load(b);
        sim_compile_opts_init(&o);
        o.loss = "loss";
        o.optimizer.lr = 0.0f;
        if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
            fail_msg("%s", err.msg);
        assert_int_equal(sim_exe_read_gradient(e, "x", g, (k < 2 ? 8 : 4) * sizeof(float),
                                               &err), 0);
        assert_memory_equal(g, k == 0 ? want_max : k == 1 ? want_min : want_n,
                            (k < 2 ? 8 : 4) * sizeof(float));
        sim_exe_free(e);
        sim_model_free(m);
    }
    printf("  ReduceMax / ReduceMin gradients: ties 1/2 and 1/3 each, a NaN maximum's to the "
           "NaN: torch's\n");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxpool_nan),
        cmocka_unit_test(test_topk_empty),
        cmocka_unit_test(test_resize_one_dim),
        cmocka_unit_test(test_scatter_elements),
        cmocka_unit_test(test_reduce_max_grad),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
