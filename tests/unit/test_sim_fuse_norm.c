/*
 * test_sim_fuse_norm.c — the fusion pass (sim/compile/fuse.c) on LayerNorm and GELU as
 * torch.onnx.export writes them at opset 13 (op_layernorm.c): LayerNorm over the last axis
 * (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) becomes one node, exact-erf
 * GELU (Div, Erf, Add, Mul, Mul) one node, with a Linear's bias Add before it. Each pattern
 * runs fused and unfused (IPUOF_SIM_FUSE=0) on the same inputs: the outputs must be the same
 * bits (the fused kernels do the same float operations in the same order), the fused nodes
 * gone from the schedule and the simulated clock unchanged; the outputs are also checked
 * against a double-precision reference (libm's erf), printing the largest difference. The
 * variants that must not fuse (an intermediate a graph output or read elsewhere, another
 * exponent or constant, the nodes on two IPUs) keep their nodes. A training compile fuses
 * GELU alone, into a Gelu with its own backward (test_gelu_train: the forward's bits, the
 * gradient within a stated tolerance of the unfused chain's, float32 and float16).
 * tests/run.sh runs this at every instruction-set level.
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
#include "half.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT

/* Deterministic values in about [-3, 3], shifted by `off` (a row mean far from 0 tests the
 * variance's two passes). */
static float
val_at(size_t i, unsigned salt, float off)
{
    return off + 3.0f * sinf((float)(i * 7 + salt * 13) * 0.37f);
}

/* A Constant node writing the float scalar v as `name`, as the exporter does. */
static void
add_const(struct sim_ob *b, const char *name, float v)
{
    sim_ob_node(b, "Constant", name, "", name);
    sim_ob_attr_tensor(b, "value", F32, 0, NULL, &v);
}

/* A float initializer of n values (or one value, rank 0, when n is 0). */
static void
add_vec(struct sim_ob *b, const char *name, int64_t n, unsigned salt)
{
    float v[1024];

    for (int64_t i = 0; i < (n > 0 ? n : 1); i++)
        v[i] = 0.5f * val_at((size_t)i, salt, 1.0f);
    sim_ob_initializer(b, name, F32, n > 0 ? 1 : 0, &n, v);
}

/* What a LayerNorm variant changes. */
struct ln_case {
    const char *name;
    int64_t dims[4];            /* x: (d0, d1, d2, C) */
    bool swap;                  /* Mul(scale, n), Add(bias, g), Add(eps, v) */
    bool scalar;                /* scale and bias one value each */
    float exponent;             /* 2, or another value (not LayerNorm) */
};

/* LayerNorm over the last axis of `x` as exported, writing `y`; names get prefix p. */
static void
add_layernorm(struct sim_ob *b, const char *x, const char *y, const struct ln_case *c)
{
    static const int64_t last[1] = { -1 };

    add_vec(b, "ln_scale", c->scalar ? 0 : c->dims[3], 4);
    add_vec(b, "ln_bias", c->scalar ? 0 : c->dims[3], 5);
    sim_ob_node(b, "ReduceMean", "rm1", x, "m");
    sim_ob_attr_ints(b, "axes", last, 1);
    {
        char in[64];
        snprintf(in, sizeof(in), "%s,m", x);
        sim_ob_node(b, "Sub", "sub", in, "d");
    }
    add_const(b, "two", c->exponent);
    sim_ob_node(b, "Pow", "pow", "d,two", "p");
    sim_ob_node(b, "ReduceMean", "rm2", "p", "v");
    sim_ob_attr_ints(b, "axes", last, 1);
    add_const(b, "eps", 1e-6f);
    sim_ob_node(b, "Add", "addeps", c->swap ? "eps,v" : "v,eps", "ve");
    sim_ob_node(b, "Sqrt", "sqrt", "ve", "s");
    sim_ob_node(b, "Div", "div", "d,s", "n");
    sim_ob_node(b, "Mul", "mul", c->swap ? "ln_scale,n" : "n,ln_scale", "g");
    sim_ob_node(b, "Add", "addb", c->swap ? "ln_bias,g" : "g,ln_bias", y);
}

/* Exact-erf GELU of `x` as exported, writing `y`; swap puts the operands the other way. */
static void
add_gelu(struct sim_ob *b, const char *x, const char *y, bool swap, float half)
{
    char in[64];

    add_const(b, "sqrt2", 1.41421353816986083984375f);
    add_const(b, "one", 1.0f);
    add_const(b, "half", half);
    snprintf(in, sizeof(in), "%s,sqrt2", x);
    sim_ob_node(b, "Div", "gdiv", in, "t");
    sim_ob_node(b, "Erf", "erf", "t", "e");
    sim_ob_node(b, "Add", "gadd", swap ? "one,e" : "e,one", "a");
    snprintf(in, sizeof(in), swap ? "a,%s" : "%s,a", x);
    sim_ob_node(b, "Mul", "gmul", in, "h");
    sim_ob_node(b, "Mul", "ghalf", swap ? "half,h" : "h,half", y);
}

/* Compiles m (inference, or training on output `loss`) with fusion on or off, on up to
 * two IPUs. */
static struct sim_exe *
compile(const struct sim_model *m, bool fuse, const char *loss)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    setenv("IPUOF_SIM_FUSE", fuse ? "1" : "0", 1);
    sim_compile_opts_init(&o);
    o.loss = loss;
    o.partition_ipus = 2;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    unsetenv("IPUOF_SIM_FUSE");
    return e;
}

/* Fills every float input with val_at (offset off) and runs once. */
static void
run(struct sim_exe *e, float off)
{
    struct sim_err err;

    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info info;
        float *x = sim_exe_input_buffer(e, i);
        assert_int_equal(sim_exe_input_info(e, i, &info), 0);
        for (size_t k = 0; k < info.run_bytes / sizeof(float); k++)
            x[k] = val_at(k, 3 + (unsigned)i, off);
    }
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Runs m fused and unfused; checks that `removed` nodes are gone, that the outputs are the
 * same bits (tol 0) or within tol x max(1, |unfused|) of each other, and that the simulated
 * time is the same. Returns the fused executable, run (the caller frees it). */
static struct sim_exe *
check_pair(const struct sim_model *m, size_t removed, float off, const char *what, double tol)
{
    struct sim_exe *f = compile(m, true, NULL), *u = compile(m, false, NULL);
    struct sim_cost_report cf, cu;
    double worst = 0;

    if (sim_exe_node_count(f) + removed != sim_exe_node_count(u))
        fail_msg("%s: %zu nodes fused, %zu unfused; want %zu fewer", what,
                 sim_exe_node_count(f), sim_exe_node_count(u), removed);
    run(f, off);
    run(u, off);
    for (size_t o = 0; o < sim_exe_output_count(u); o++) {
        struct sim_io_info info;
        const float *a = sim_exe_output_buffer(f, o), *b = sim_exe_output_buffer(u, o);
        assert_int_equal(sim_exe_output_info(u, o, &info), 0);
        for (size_t k = 0; k < info.run_bytes / sizeof(float); k++) {
            double d = fabs((double)a[k] - b[k]) / fmax(1.0, fabs(b[k]));
            worst = d > worst ? d : worst;
            if (tol == 0 ? memcmp(&a[k], &b[k], sizeof(float)) != 0 : !(d <= tol))
                fail_msg("%s: fused output %zu differs from the unfused one at %zu: %.9g, "
                         "unfused %.9g (tolerance %g)", what, o, k, a[k], b[k], tol);
        }
    }
    if (tol != 0)
        printf("  %-44s max |fused - unfused| / max(1, |unfused|) %.3g\n", what, worst);
    assert_int_equal(sim_exe_cost(f, &cf), 0);
    assert_int_equal(sim_exe_cost(u, &cu), 0);
    if (fabs(cf.device_seconds - cu.device_seconds) > 1e-9 * cu.device_seconds)
        fail_msg("%s: simulated time %g fused, %g unfused", what, cf.device_seconds,
                 cu.device_seconds);
    sim_exe_free(u);
    return f;
}

static const struct ln_case ln_cases[] = {
    { "C 96", { 2, 3, 5, 96 }, false, false, 2.0f },
    { "C 13 (tails), operands swapped", { 1, 4, 3, 13 }, true, false, 2.0f },
    { "C 768, scalar scale and bias", { 1, 1, 7, 768 }, false, true, 2.0f },
    { "C 1", { 2, 2, 2, 1 }, false, false, 2.0f },
};

/* LayerNorm: eight nodes fewer, the same bits, and within 2e-5 of a double reference. */
static void
test_layernorm(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(ln_cases) / sizeof(ln_cases[0]); c++) {
        const struct ln_case *lc = &ln_cases[c];
        struct sim_ob *b = sim_ob_new(13);
        int64_t cols = lc->dims[3], rows = lc->dims[0] * lc->dims[1] * lc->dims[2];
        struct sim_model *m;
        struct sim_exe *f;
        const float *y;
        double worst = 0;
        float off = c == 0 ? 100.0f : 0.0f;

        sim_ob_input(b, "x", F32, 4, lc->dims);
        add_layernorm(b, "x", "y", lc);
        sim_ob_output(b, "y", F32);
        m = test_ob_load(b);
        f = check_pair(m, 8, off, lc->name, 0);
        y = sim_exe_output_buffer(f, 0);
        for (int64_t r = 0; r < rows; r++) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < cols; i++)
                mean += val_at((size_t)(r * cols + i), 3, off);
            mean /= (double)cols;
            for (int64_t i = 0; i < cols; i++) {
                double d = val_at((size_t)(r * cols + i), 3, off) - mean;
                var += d * d;
            }
            var /= (double)cols;
            for (int64_t i = 0; i < cols; i++) {
                int64_t j = lc->scalar ? 0 : i;
                double g = 0.5 * val_at((size_t)j, 4, 1.0f), bb = 0.5 * val_at((size_t)j, 5, 1.0f);
                double want = (val_at((size_t)(r * cols + i), 3, off) - mean) / sqrt(var + 1e-6) *
                              g + bb;
                double diff = fabs(y[r * cols + i] - want);
                worst = diff > worst ? diff : worst;
            }
        }
        printf("  LayerNorm %-32s fused = unfused bit for bit; max |y - ref| %.3g\n",
               lc->name, worst);
        /* float arithmetic on rows with mean 100 keeps about 5 digits of x - mean */
        if (worst > (off != 0.0f ? 2e-3 : 2e-5))
            fail_msg("%s: %g from the double reference", lc->name, worst);
        sim_exe_free(f);
        sim_model_free(m);
    }
}

/* Transpose (0, 2, 3, 1) from channels first -> LayerNorm: one node reading the
 * channels-first tensor (nine nodes fewer), the same bits; C = 300 makes tiles of 13 pixels
 * with a short last one. */
static void
test_ln_transpose(void **state)
{
    static const int64_t cs[3] = { 13, 96, 300 }, perm[4] = { 0, 2, 3, 1 };

    (void)state;
    for (int i = 0; i < 3; i++) {
        const struct ln_case lc = { "t", { 2, 5, 7, cs[i] }, false, false, 2.0f };
        int64_t dx[4] = { 2, cs[i], 5, 7 };
        struct sim_ob *b = sim_ob_new(13);
        struct sim_model *m;
        char what[64];

        sim_ob_input(b, "x", F32, 4, dx);
        sim_ob_node(b, "Transpose", "tr", "x", "xt");
        sim_ob_attr_ints(b, "perm", perm, 4);
        add_layernorm(b, "xt", "y", &lc);
        sim_ob_output(b, "y", F32);
        m = test_ob_load(b);
        snprintf(what, sizeof(what), "Transpose -> LayerNorm, C %lld", (long long)cs[i]);
        sim_exe_free(check_pair(m, 9, 0.5f, what, 0));
        printf("  %-44s 9 nodes fewer, fused = unfused bit for bit\n", what);
        sim_model_free(m);
    }
}

/* GELU alone (four nodes fewer) and after MatMul + bias (five: the bias Add joins). */
static void
test_gelu(void **state)
{
    (void)state;
    for (int v = 0; v < 4; v++) {
        bool bias = v >= 2, swap = v & 1;
        struct sim_ob *b = sim_ob_new(13);
        int64_t dx[2] = { 6, 37 }, dw[2] = { 37, 45 };
        int64_t cols = bias ? dw[1] : dx[1];
        struct sim_model *m;
        struct sim_exe *f;
        const float *y;
        double worst = 0, *ref;
        char what[64];

        sim_ob_input(b, "x", F32, 2, dx);
        if (bias) {
            float w[37 * 45];
            for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
                w[i] = 0.2f * val_at(i, 6, 0.0f);
            sim_ob_initializer(b, "w", F32, 2, dw, w);
            add_vec(b, "bias", cols, 7);
            sim_ob_node(b, "MatMul", "mm", "x,w", "z");
            sim_ob_node(b, "Add", "addbias", swap ? "bias,z" : "z,bias", "xb");
            add_gelu(b, "xb", "y", swap, 0.5f);
        } else {
            add_gelu(b, "x", "y", swap, 0.5f);
        }
        sim_ob_output(b, "y", F32);
        m = test_ob_load(b);
        snprintf(what, sizeof(what), "GELU%s%s", bias ? " after MatMul + bias" : "",
                 swap ? ", operands swapped" : "");
        f = check_pair(m, bias ? 5 : 4, 0.0f, what, 1e-6);
        y = sim_exe_output_buffer(f, 0);
        ref = calloc((size_t)(dx[0] * cols), sizeof(double));
        assert_non_null(ref);
        for (int64_t r = 0; r < dx[0]; r++)
            for (int64_t j = 0; j < cols; j++) {
                double x = 0;
                if (!bias) {
                    x = val_at((size_t)(r * cols + j), 3, 0.0f);
                } else {
                    for (int64_t k = 0; k < dx[1]; k++)
                        x += (double)val_at((size_t)(r * dx[1] + k), 3, 0.0f) *
                             (0.2f * val_at((size_t)(k * dw[1] + j), 6, 0.0f));
                    x += 0.5f * val_at((size_t)j, 7, 1.0f);
                }
                ref[r * cols + j] = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
            }
        for (int64_t i = 0; i < dx[0] * cols; i++) {
            double d = fabs(y[i] - ref[i]);
            worst = d > worst ? d : worst;
        }
        printf("  %-44s max |y - ref| %.3g\n", what, worst);
        if (worst > 1e-5)
            fail_msg("%s: %g from the double reference", what, worst);
        free(ref);
        sim_exe_free(f);
        sim_model_free(m);
    }
}

/* The fused GELU over a sweep of [-12, 12] in steps of about 1e-4 (and the unfused graph on
 * the same inputs) against erf in double: within 5e-7 x max(1, |x|) of it and of each other. */
static void
test_gelu_sweep(void **state)
{
    enum { N = 240007 };
    static const int64_t dx[1] = { N };
    struct sim_ob *b = sim_ob_new(13);
    struct sim_model *m;
    struct sim_exe *e[2];
    struct sim_err err;
    double worst[2] = { 0, 0 }, wneg = 0;

    (void)state;
    sim_ob_input(b, "x", F32, 1, dx);
    add_gelu(b, "x", "y", false, 0.5f);
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    for (int k = 0; k < 2; k++) {
        float *x;
        const float *y;
        e[k] = compile(m, k == 0, NULL);
        if (sim_exe_node_count(e[k]) != (k == 0 ? 1u : 5u))
            fail_msg("GELU sweep: %zu nodes %s, want %d", sim_exe_node_count(e[k]),
                     k == 0 ? "fused" : "unfused", k == 0 ? 1 : 5);
        x = sim_exe_input_buffer(e[k], 0);
        for (int i = 0; i < N; i++)
            x[i] = -12.0f + 24.0f * (float)i / (float)(N - 1);
        if (sim_exe_run(e[k], &err) != 0)
            fail_msg("%s", err.msg);
        y = sim_exe_output_buffer(e[k], 0);
        for (int i = 0; i < N; i++) {
            double want = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
            double d = fabs(y[i] - want) / fmax(1.0, fabs(x[i]));
            worst[k] = d > worst[k] ? d : worst[k];
            if (k == 0 && x[i] < -3.0f && x[i] > -8.0f)
                wneg = fmax(wneg, fabs(y[i] - want) / fabs(want));
        }
    }
    printf("  GELU sweep of [-12, 12]: max |y - ref| / max(1, |x|) %.3g fused, %.3g unfused; "
           "fused relative error on [-8, -3] %.3g\n", worst[0], worst[1], wneg);
    if (worst[0] > 5e-7 || worst[1] > 5e-7)
        fail_msg("GELU sweep: %g fused, %g unfused from the double reference", worst[0],
                 worst[1]);
    sim_exe_free(e[0]);
    sim_exe_free(e[1]);
    sim_model_free(m);
}

/* The block's end: z (n, h, w, c) [+ bias] -> Transpose to (n, c, h, w) -> Mul(scale
 * (c, 1, 1)) -> Add(res): one node, the same bits; with another perm, or the product also a
 * graph output, the nodes stay. */
static void
test_tail(void **state)
{
    static const struct { const char *what; int64_t c; bool bias, swap, out; int64_t p3;
                          size_t removed; } cases[] = {
        { "block end, C 24", 24, true, false, false, 2, 3 },
        { "block end, C 13, operands swapped", 13, true, true, false, 2, 3 },
        { "block end without the bias, C 300", 300, false, false, false, 2, 2 },
        { "block end, perm 0 3 2 1 (not fused)", 24, true, false, false, 1, 0 },
        { "block end, the product an output (not fused)", 24, true, false, true, 2, 0 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t c = cases[i].c, dz[4] = { 2, 5, 7, c }, dr[4] = { 2, c, 5, 7 };
        int64_t ds[3] = { c, 1, 1 }, perm[4] = { 0, 3, 2, cases[i].p3 };
        float sc[300];
        struct sim_ob *b = sim_ob_new(13);
        struct sim_model *m;

        perm[2] = cases[i].p3 == 2 ? 1 : 2;
        if (cases[i].p3 == 1)
            dr[2] = 7, dr[3] = 5;
        for (int64_t k = 0; k < c; k++)
            sc[k] = 0.5f + 0.01f * (float)k;
        sim_ob_input(b, "z", F32, 4, dz);
        sim_ob_input(b, "res", F32, 4, dr);
        sim_ob_initializer(b, "ls", F32, 3, ds, sc);
        if (cases[i].bias) {
            add_vec(b, "bias", c, 11);
            sim_ob_node(b, "Add", "ab", cases[i].swap ? "bias,z" : "z,bias", "h");
        }
        sim_ob_node(b, "Transpose", "tr", cases[i].bias ? "h" : "z", "t");
        sim_ob_attr_ints(b, "perm", perm, 4);
        sim_ob_node(b, "Mul", "mul", cases[i].swap ? "ls,t" : "t,ls", "r");
        sim_ob_node(b, "Add", "add", cases[i].swap ? "res,r" : "r,res", "y");
        sim_ob_output(b, "y", F32);
        if (cases[i].out)
            sim_ob_output(b, "r", F32);
        m = test_ob_load(b);
        sim_exe_free(check_pair(m, cases[i].removed, 0.0f, cases[i].what, 0));
        printf("  %-44s %zu nodes fewer, fused = unfused bit for bit\n", cases[i].what,
               cases[i].removed);
        sim_model_free(m);
    }
}

/* A ConvNeXt block as torchvision's exports it: depthwise 7x7 Conv, Transpose to NHWC,
 * LayerNorm, Linear (MatMul + bias), GELU, Linear, Transpose back, layer scale, residual:
 * the Transpose and LayerNorm, GELU and the block's end (TransposeScaleAdd) each one node. */
static void
test_convnext_block(void **state)
{
    enum { N = 2, C = 16, H = 6, W = 6, E = 64 };
    static const int64_t dx[4] = { N, C, H, W }, dw[4] = { C, 1, 7, 7 }, dc[1] = { C };
    static const int64_t d1[2] = { C, E }, d2[2] = { E, C }, ds[3] = { C, 1, 1 };
    static const int64_t nhwc[4] = { 0, 2, 3, 1 }, nchw[4] = { 0, 3, 1, 2 };
    static const int64_t pads[4] = { 3, 3, 3, 3 };
    const struct ln_case lc = { "block", { N, H, W, C }, false, false, 2.0f };
    struct sim_ob *b = sim_ob_new(13);
    float w[C * E], cb[C], sc[C];
    struct sim_model *m;

    (void)state;
    for (size_t i = 0; i < C * E; i++)
        w[i] = 0.2f * val_at(i, 8, 0.0f);
    for (size_t i = 0; i < C; i++) {
        cb[i] = 0.1f * val_at(i, 9, 0.0f);
        sc[i] = 0.5f + 0.01f * (float)i;
    }
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_initializer(b, "dw", F32, 4, dw, w);
    sim_ob_initializer(b, "db", F32, 1, dc, cb);
    sim_ob_initializer(b, "w1", F32, 2, d1, w);
    sim_ob_initializer(b, "w2", F32, 2, d2, w);
    add_vec(b, "b1", E, 10);
    sim_ob_initializer(b, "b2", F32, 1, dc, cb);
    sim_ob_initializer(b, "ls", F32, 3, ds, sc);
    sim_ob_node(b, "Conv", "dwconv", "x,dw,db", "c");
    sim_ob_attr_int(b, "group", C);
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_node(b, "Transpose", "t1", "c", "cl");
    sim_ob_attr_ints(b, "perm", nhwc, 4);
    add_layernorm(b, "cl", "ln", &lc);
    sim_ob_node(b, "MatMul", "mm1", "ln,w1", "z1");
    sim_ob_node(b, "Add", "ab1", "b1,z1", "h1");
    add_gelu(b, "h1", "g1", false, 0.5f);
    sim_ob_node(b, "MatMul", "mm2", "g1,w2", "z2");
    sim_ob_node(b, "Add", "ab2", "b2,z2", "h2");
    sim_ob_node(b, "Transpose", "t2", "h2", "hc");
    sim_ob_attr_ints(b, "perm", nchw, 4);
    sim_ob_node(b, "Mul", "lsmul", "ls,hc", "r");
    sim_ob_node(b, "Add", "res", "r,x", "y");
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    sim_exe_free(check_pair(m, 1 + 8 + 5 + 3, 0.0f, "ConvNeXt block", 1e-5));
    printf("  ConvNeXt block: 17 nodes fewer\n");
    sim_model_free(m);
}

/* Builds x (2, 3, 40) -> LayerNorm -> y, then lets `extra` add to it; loads. */
static struct sim_model *
ln_model(void (*extra)(struct sim_ob *), float exponent)
{
    static const int64_t dx[3] = { 2, 3, 40 };
    const struct ln_case lc = { "x", { 2, 1, 3, 40 }, false, false, exponent };
    struct sim_ob *b = sim_ob_new(13);

    sim_ob_input(b, "x", F32, 3, dx);
    add_layernorm(b, "x", "y", &lc);
    sim_ob_output(b, "y", F32);
    if (extra != NULL)
        extra(b);
    return test_ob_load(b);
}

static void d_is_output(struct sim_ob *b) { sim_ob_output(b, "d", F32); }
static void v_is_output(struct sim_ob *b) { sim_ob_output(b, "ve", F32); }
static void
mean_read_twice(struct sim_ob *b)
{
    sim_ob_node(b, "Neg", "neg", "m", "nm");
    sim_ob_output(b, "nm", F32);
}

/* The variants that must keep their nodes. */
static void
test_not_fused(void **state)
{
    static const struct { const char *what; void (*extra)(struct sim_ob *); float e; } ln[] = {
        { "LayerNorm: x - mean is also a graph output", d_is_output, 2.0f },
        { "LayerNorm: var + eps is also a graph output", v_is_output, 2.0f },
        { "LayerNorm: the mean read by another node", mean_read_twice, 2.0f },
        { "LayerNorm: Pow(d, 3)", NULL, 3.0f },
    };
    static const int64_t dx[2] = { 4, 24 };
    struct sim_model *m;
    struct sim_ob *b;

    (void)state;
    for (size_t i = 0; i < sizeof(ln) / sizeof(ln[0]); i++) {
        m = ln_model(ln[i].extra, ln[i].e);
        sim_exe_free(check_pair(m, 0, 0.0f, ln[i].what, 0));
        sim_model_free(m);
    }

    /* GELU with 0.4 for 0.5 is not GELU */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 2, dx);
    add_gelu(b, "x", "y", false, 0.4f);
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    sim_exe_free(check_pair(m, 0, 0.0f, "GELU times 0.4", 0));
    sim_model_free(m);

    /* the biased sum read by another node too: GELU fuses, the bias Add stays */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 2, dx);
    add_vec(b, "bias", dx[1], 7);
    sim_ob_node(b, "Add", "addbias", "x,bias", "xb");
    add_gelu(b, "xb", "y", false, 0.5f);
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "xb", F32);
    m = test_ob_load(b);
    sim_exe_free(check_pair(m, 4, 0.0f, "GELU of a sum that is also an output", 1e-6));
    sim_model_free(m);

    /* x / sqrt(2) is also a graph output */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 2, dx);
    add_gelu(b, "x", "y", false, 0.5f);
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "t", F32);
    m = test_ob_load(b);
    sim_exe_free(check_pair(m, 0, 0.0f, "GELU's x / sqrt(2) a graph output", 0));
    sim_model_free(m);

    /* the Erf and what follows on another IPU */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 2, dx);
    add_const(b, "sqrt2", 1.41421353816986083984375f);
    add_const(b, "one", 1.0f);
    add_const(b, "half", 0.5f);
    sim_ob_node(b, "Div", "gdiv", "x,sqrt2", "t");
    sim_ob_attr_int(b, "__ipu_number", 0);
    sim_ob_node(b, "Erf", "erf", "t", "e");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Add", "gadd", "e,one", "a");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Mul", "gmul", "x,a", "h");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Mul", "ghalf", "h,half", "y");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    sim_exe_free(check_pair(m, 0, 0.0f, "GELU over two IPUs", 0));
    sim_model_free(m);

}

/* x (8, 96) -> Mul(x, wt) -> exported GELU -> ReduceMean = l, in float32 or float16
 * (x, wt and the chain float16, l cast to float). */
static struct sim_model *
gelu_train_model(bool f16, const char *recompute)
{
    static const int64_t dx[2] = { 8, 96 };
    struct sim_ob *b = sim_ob_new(13);

    if (recompute != NULL)
        sim_ob_metadata(b, "ipuof.recomputation", recompute);

    sim_ob_input(b, "x", f16 ? SIM_DTYPE_FLOAT16 : F32, 2, dx);
    if (f16) {
        uint16_t h[96];
        for (int i = 0; i < 96; i++)
            h[i] = sim_half_from_float(0.5f * val_at((size_t)i, 8, 1.0f));
        sim_ob_initializer(b, "wt", SIM_DTYPE_FLOAT16, 1, &dx[1], h);
    } else {
        add_vec(b, "wt", dx[1], 8);
    }
    sim_ob_node(b, "Mul", "weigh", "x,wt", "xw");
    add_gelu(b, "xw", "y", false, 0.5f);
    sim_ob_node(b, "ReduceMean", "loss", "y", f16 ? "l16" : "l");
    sim_ob_attr_int(b, "keepdims", 0);
    if (f16) {
        sim_ob_node(b, "Cast", "tofloat", "l16", "l");
        sim_ob_attr_int(b, "to", F32);
    }
    sim_ob_output(b, "l", F32);
    return test_ob_load(b);
}

/* Trains m once (SGD, lr 0) fused or not, inputs from val_at; the loss and wt's gradient. */
static float
gelu_train_run(const struct sim_model *m, bool fuse, bool f16, float *grad, size_t *nodes)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    float loss;

    setenv("IPUOF_SIM_FUSE", fuse ? "1" : "0", 1);
    sim_compile_opts_init(&o);
    o.loss = "l";
    sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    o.optimizer.lr = 0.0f;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    unsetenv("IPUOF_SIM_FUSE");
    *nodes = sim_exe_node_count(e);
    {
        uint16_t *h = sim_exe_input_buffer(e, 0);
        float *x = sim_exe_input_buffer(e, 0);
        for (size_t k = 0; k < 8 * 96; k++) {
            if (f16)
                h[k] = sim_half_from_float(val_at(k, 3, 0.0f));
            else
                x[k] = val_at(k, 3, 0.0f);
        }
    }
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s", err.msg);
    loss = ((const float *)sim_exe_output_buffer(e, 0))[0];
    assert_int_equal(sim_exe_read_gradient(e, "wt", grad, 96 * sizeof(float), &err), 0);
    sim_exe_free(e);
    return loss;
}

/* GELU's derivative in double: Phi(x) + x phi(x). */
static double
gelu_grad_ref(double x)
{
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/*
 * Training fuses exact GELU into one Gelu node (7 nodes -> 3) whose backward reads x alone.
 * float32: the loss is the unfused graph's bit for bit; wt's gradient is within 1e-7
 * (relative to max(1, |g|); measured 2e-9) of the unfused chain's and of a double
 * reference.
 * float16: the fused node rounds once where the chain rounds five times: the loss within
 * 1e-3, the gradient within 1e-4 (measured 8e-6) of the unfused graph's.
 * With RecomputeAll (the Gelu recomputed from x in the backward) the loss and the gradient
 * are the same bits as without.
 */
static void
test_gelu_train(void **state)
{
    float gf[96], gu[96];
    size_t nf, nu;

    (void)state;
    for (int f16 = 0; f16 < 2; f16++) {
        struct sim_model *m = gelu_train_model(f16 != 0, NULL);
        float lf = gelu_train_run(m, true, f16 != 0, gf, &nf);
        float lu = gelu_train_run(m, false, f16 != 0, gu, &nu);
        double tol = f16 ? 1e-4 : 1e-7, worst = 0, worst_ref = 0;
        assert_int_equal(nf, 3 + (size_t)f16);     /* float16: and the loss's Cast */
        assert_int_equal(nu, 7 + (size_t)f16);
        if (!f16 && memcmp(&lf, &lu, sizeof(lf)) != 0)
            fail_msg("float32 loss fused %.9g, unfused %.9g: not the same bits", lf, lu);
        if (f16 && !(fabs(lf - lu) <= 1e-3 * fmax(1.0, fabs(lu))))
            fail_msg("float16 loss fused %.9g, unfused %.9g", lf, lu);
        for (int j = 0; j < 96; j++) {
            double d = fabs((double)gf[j] - gu[j]) / fmax(1.0, fabs(gu[j])), ref = 0;
            for (int i = 0; i < 8; i++) {
                float x = val_at((size_t)(i * 96 + j), 3, 0.0f);
                float w = 0.5f * val_at((size_t)j, 8, 1.0f);
                if (f16) {
                    x = sim_half_to_float(sim_half_from_float(x));
                    w = sim_half_to_float(sim_half_from_float(w));
                }
                ref += x * gelu_grad_ref((double)(x * w)) / (8.0 * 96.0);
            }
            worst = fmax(worst, d);
            if (!f16)
                worst_ref = fmax(worst_ref, fabs(gf[j] - ref) / fmax(1.0, fabs(ref)));
            if (!(d <= tol))
                fail_msg("%s: d l / d wt[%d] fused %.9g, unfused %.9g (tolerance %g)",
                         f16 ? "float16" : "float32", j, gf[j], gu[j], tol);
        }
        printf("  %s: gradient max |fused - unfused| / max(1, |unfused|) %.3g", 
               f16 ? "float16" : "float32", worst);
        if (!f16)
            printf(", fused vs double reference %.3g", worst_ref);
        printf("\n");
        assert_true(worst_ref <= 1e-7);
        sim_model_free(m);
        /* RecomputeAll: the Gelu recomputed in the backward, the same gradient bits */
        m = gelu_train_model(f16 != 0, "4");
        assert_true(memcmp(&lf, (float[1]){ gelu_train_run(m, true, f16 != 0, gu, &nu) },
                           sizeof(lf)) == 0);
        if (memcmp(gf, gu, sizeof(gf)) != 0)
            fail_msg("%s: the gradient with the Gelu recomputed differs from without",
                     f16 ? "float16" : "float32");
        sim_model_free(m);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_ln_transpose),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_gelu_sweep),
        cmocka_unit_test(test_tail),
        cmocka_unit_test(test_convnext_block),
        cmocka_unit_test(test_not_fused),
        cmocka_unit_test(test_gelu_train),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
