/*
 * fuzz_graph.c — libFuzzer target: small well-formed ONNX graphs built from the fuzzer's
 * bytes (sim/onnx/onnx_build.c), so that the compiler and the kernels see what random bytes
 * almost never reach: a float input of rank 1..4 with dims 1..5 scaled by a weight, then up
 * to five nodes
 * drawn from the op set with attributes and constant operands taken from the bytes (axes,
 * permutations, kernel shapes, strides, pads, dilations, groups, target shapes, indices,
 * slices; in range or not), on one IPU or split over up to four (PopART's __ipu_number and
 * __pipeline_stage, a strategy, device iterations and accumulation from the bytes). A
 * graph the compiler accepts is run on inputs taken from the bytes (NaN and the infinities
 * among them), and compiled again for
 * training with a mean of the output as the loss and run for a step: whatever the compiler accepts must run without a
 * memory error, an undefined behaviour or an abort (ASan/UBSan watch).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_build.h"
#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct rd {
    const uint8_t *p;
    size_t n, at;
};

/* The next byte, 0 once the bytes are used up. */
static unsigned
byte(struct rd *r)
{
    return r->at < r->n ? r->p[r->at++] : 0;
}

/* A small integer in lo..hi. */
static int64_t
pick(struct rd *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(byte(r) % (unsigned)(hi - lo + 1));
}

enum kind { UNARY, BINARY, SHAPE_IN, IDX_IN, AXES_IN, CONV, POOL, NORM, MATMUL, GEMM, MISC };

struct opdef {
    const char *op;
    enum kind kind;
};

static const struct opdef ops[] = {
    {"Relu", UNARY},          {"Sigmoid", UNARY},        {"Tanh", UNARY},
    {"Exp", UNARY},           {"Abs", UNARY},            {"Neg", UNARY},
    {"Sqrt", UNARY},          {"Softmax", MISC},         {"LogSoftmax", MISC},
    {"LeakyRelu", UNARY},     {"Elu", UNARY},            {"HardSigmoid", UNARY},
    {"Add", BINARY},          {"Mul", BINARY},           {"Sub", BINARY},
    {"Div", BINARY},          {"Pow", BINARY},           {"Max", BINARY},
    {"MatMul", MATMUL},       {"Gemm", GEMM},            {"Transpose", MISC},
    {"Reshape", SHAPE_IN},    {"Expand", SHAPE_IN},      {"Tile", SHAPE_IN},
    {"Flatten", MISC},        {"Concat", MISC},          {"Split", MISC},
    {"Slice", IDX_IN},        {"Gather", IDX_IN},        {"Pad", IDX_IN},
    {"ReduceMean", AXES_IN},  {"ReduceSum", AXES_IN},    {"ReduceMax", MISC},
    {"Squeeze", AXES_IN},     {"Unsqueeze", AXES_IN},    {"Conv", CONV},
    {"ConvTranspose", CONV},  {"MaxPool", POOL},         {"AveragePool", POOL},
    {"GlobalAveragePool", UNARY}, {"BatchNormalization", NORM},
    {"LayerNormalization", NORM}, {"InstanceNormalization", NORM},
    {"Clip", MISC},           {"Identity", UNARY},       {"Dropout", UNARY},
    {"Erf", UNARY},           {"Floor", UNARY},          {"ArgMax", MISC},
    {"Cast", MISC},           {"Where", MISC},           {"CumSum", IDX_IN},
};

/* A float initializer named name of rank 0..4 with dims 1..5, values from the bytes. */
static void
float_init(struct sim_ob *b, struct rd *r, const char *name, int rank, const int64_t *dims)
{
    size_t n = 1;
    float *v;

    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    v = calloc(n ? n : 1, sizeof *v);
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)byte(r) - 128) / 32.0f;
    sim_ob_initializer(b, name, SIM_DTYPE_FLOAT, rank, dims, v);
    free(v);
}

/* An int64 initializer of n values in lo..hi. */
static void
int_init(struct sim_ob *b, struct rd *r, const char *name, size_t n, int64_t lo, int64_t hi)
{
    int64_t v[8], dims[1] = {(int64_t)n};

    for (size_t i = 0; i < n && i < 8; i++)
        v[i] = pick(r, lo, hi);
    sim_ob_initializer(b, name, SIM_DTYPE_INT64, 1, dims, v);
}

/* n ints in lo..hi as attribute name. */
static void
ints_attr(struct sim_ob *b, struct rd *r, const char *name, size_t n, int64_t lo, int64_t hi)
{
    int64_t v[8];

    for (size_t i = 0; i < n && i < 8; i++)
        v[i] = pick(r, lo, hi);
    sim_ob_attr_ints(b, name, v, n < 8 ? n : 8);
}

/* Split over IPUs: node k goes to IPU ipu_of[k] (never decreasing), or -1: one IPU. */
static int ipu_of[8];

/* An op with index operands (Slice, Gather, Pad, CumSum) on x of rank xr into out. */
static void
add_index_node(struct sim_ob *b, struct rd *r, const struct opdef *d, const char *nm,
               char in[][32], const char *x, int xr, const char *out)
{
    if (strcmp(d->op, "Slice") == 0) {
        size_t n = (size_t)pick(r, 1, 3);
        int_init(b, r, in[0], n, -6, 6);
        int_init(b, r, in[1], n, -6, 6);
        int_init(b, r, in[2], n, -5, 4);
        int_init(b, r, in[3], n, -2, 3);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0], in[1], in[2], in[3]}, 5,
                      (const char *const[]){out}, 1);
    } else if (strcmp(d->op, "Gather") == 0) {
        int_init(b, r, in[0], (size_t)pick(r, 1, 4), -5, 5);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        sim_ob_attr_int(b, "axis", pick(r, -4, 3));
    } else if (strcmp(d->op, "Pad") == 0) {
        static const char *const modes[] = {"constant", "reflect", "edge"};
        int_init(b, r, in[0], (size_t)(2 * xr), -2, 4);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        sim_ob_attr_str(b, "mode", modes[byte(r) % 3]);
    } else { /* CumSum */
        int_init(b, r, in[0], 1, -4, 3);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        sim_ob_attr_int(b, "reverse", byte(r) & 1);
    }
}

/* One of the other ops (Transpose, Concat, Split, Clip, Cast, Where, and those taking an
 * axis attribute) on x of rank xr into out. */
static void
add_misc_node(struct sim_ob *b, struct rd *r, const struct opdef *d, const char *nm,
              char in[][32], const char *x, int xr, const char *out)
{
    if (strcmp(d->op, "Transpose") == 0) {
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x}, 1,
                      (const char *const[]){out}, 1);
        ints_attr(b, r, "perm", (size_t)xr, -1, 4);
    } else if (strcmp(d->op, "Concat") == 0) {
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, x}, 2,
                      (const char *const[]){out}, 1);
        sim_ob_attr_int(b, "axis", pick(r, -4, 3));
    } else if (strcmp(d->op, "Split") == 0) {
        char o2[40];
        snprintf(o2, sizeof o2, "%s_b", out);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x}, 1,
                      (const char *const[]){out, o2}, 2);
        sim_ob_attr_int(b, "axis", pick(r, -4, 3));
    } else if (strcmp(d->op, "Clip") == 0) {
        int64_t none[1];
        float_init(b, r, in[0], 0, none);
        float_init(b, r, in[1], 0, none);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0], in[1]}, 3,
                      (const char *const[]){out}, 1);
    } else if (strcmp(d->op, "Cast") == 0) {
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x}, 1,
                      (const char *const[]){out}, 1);
        sim_ob_attr_int(b, "to", (int64_t)(byte(r) % 12));
    } else if (strcmp(d->op, "Where") == 0) {
        char c0[40];
        snprintf(c0, sizeof c0, "%s_cond", out);
        sim_ob_node_v(b, "Greater", "", (const char *const[]){x, x}, 2,
                      (const char *const[]){c0}, 1);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){c0, x, x}, 3,
                      (const char *const[]){out}, 1);
    } else { /* Softmax, LogSoftmax, Flatten, ReduceMax, ArgMax: an axis attribute */
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x}, 1,
                      (const char *const[]){out}, 1);
        if (strcmp(d->op, "ReduceMax") == 0)
            ints_attr(b, r, "axes", (size_t)pick(r, 1, 2), -4, 3);
        else
            sim_ob_attr_int(b, "axis", pick(r, -5, 4));
    }
}

/* Appends node k reading x (rank about xr): writes its output's name into out. */
static void
add_node(struct sim_ob *b, struct rd *r, int k, const char *x, int xr, char *out, size_t len)
{
    const struct opdef *d = &ops[byte(r) % (sizeof ops / sizeof ops[0])];
    char in[4][32], nm[32];
    int64_t dims[4];
    int rank;

    snprintf(out, len, "t%d", k);
    snprintf(nm, sizeof nm, "n%d", k);
    for (int i = 0; i < 4; i++)
        snprintf(in[i], sizeof in[i], "c%d_%d", k, i);
    switch (d->kind) {
    case UNARY:
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x}, 1,
                      (const char *const[]){out}, 1);
        break;
    case BINARY: /* the other operand broadcasts (or not) from a random shape */
        rank = (int)pick(r, 0, 4);
        for (int i = 0; i < rank; i++)
            dims[i] = pick(r, 1, 5);
        float_init(b, r, in[0], rank, dims);
        if (byte(r) & 1)
            sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                          (const char *const[]){out}, 1);
        else
            sim_ob_node_v(b, d->op, nm, (const char *const[]){in[0], x}, 2,
                          (const char *const[]){out}, 1);
        break;
    case MATMUL:
    case GEMM:
        rank = d->kind == GEMM ? 2 : (int)pick(r, 1, 3);
        for (int i = 0; i < rank; i++)
            dims[i] = pick(r, 1, 5);
        float_init(b, r, in[0], rank, dims);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        if (d->kind == GEMM) {
            sim_ob_attr_int(b, "transA", byte(r) & 1);
            sim_ob_attr_int(b, "transB", byte(r) & 1);
        }
        break;
    case SHAPE_IN: /* Reshape, Expand, Tile: an int64 operand of 1..4 values */
        int_init(b, r, in[0], (size_t)pick(r, 1, 4), d->op[0] == 'R' ? -1 : 0, 6);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        break;
    case IDX_IN:
        add_index_node(b, r, d, nm, in, x, xr, out);
        break;
    case AXES_IN: /* opset 13: axes as an operand */
        int_init(b, r, in[0], (size_t)pick(r, 1, 3), -4, 4);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        if (d->op[0] == 'R')
            sim_ob_attr_int(b, "keepdims", byte(r) & 1);
        break;
    case CONV: { /* weights [M, C/g, k, k] for a rank-4 input, or whatever the bytes say */
        int64_t g = pick(r, 1, 3), wd[4] = {pick(r, 1, 4), pick(r, 1, 4), pick(r, 1, 3),
                                            pick(r, 1, 3)};
        float_init(b, r, in[0], xr == 3 ? 3 : 4, wd);
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0]}, 2,
                      (const char *const[]){out}, 1);
        sim_ob_attr_int(b, "group", g);
        ints_attr(b, r, "strides", (size_t)(xr - 2 > 0 ? xr - 2 : 1), 1, 3);
        ints_attr(b, r, "pads", (size_t)(2 * (xr - 2 > 0 ? xr - 2 : 1)), 0, 3);
        ints_attr(b, r, "dilations", (size_t)(xr - 2 > 0 ? xr - 2 : 1), 1, 2);
        break;
    }
    case POOL:
        sim_ob_node_v(b, d->op, nm, (const char *const[]){x}, 1, (const char *const[]){out}, 1);
        ints_attr(b, r, "kernel_shape", (size_t)(xr - 2 > 0 ? xr - 2 : 1), 1, 4);
        ints_attr(b, r, "strides", (size_t)(xr - 2 > 0 ? xr - 2 : 1), 1, 3);
        ints_attr(b, r, "pads", (size_t)(2 * (xr - 2 > 0 ? xr - 2 : 1)), 0, 2);
        sim_ob_attr_int(b, "ceil_mode", byte(r) & 1);
        break;
    case NORM: { /* per-channel (or per-feature) operands of a random length */
        int64_t c[1] = {pick(r, 1, 5)};
        float_init(b, r, in[0], 1, c);
        float_init(b, r, in[1], 1, c);
        if (strcmp(d->op, "BatchNormalization") == 0) {
            float_init(b, r, in[2], 1, c);
            float_init(b, r, in[3], 1, c);
            sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0], in[1], in[2], in[3]},
                          5, (const char *const[]){out}, 1);
        } else {
            sim_ob_node_v(b, d->op, nm, (const char *const[]){x, in[0], in[1]}, 3,
                          (const char *const[]){out}, 1);
            if (d->op[0] == 'L')
                sim_ob_attr_int(b, "axis", pick(r, -4, 3));
        }
        break;
    }
    case MISC:
        add_misc_node(b, r, d, nm, in, x, xr, out);
        break;
    }
    if (ipu_of[k] >= 0) { /* the last node written: PopART's placement attributes */
        sim_ob_attr_int(b, "__ipu_number", ipu_of[k]);
        sim_ob_attr_int(b, "__pipeline_stage", ipu_of[k]);
    }
}

/* A float input value from one byte: small, or (bytes 0xfd..0xff) -inf, +inf, NaN, which
 * every kernel must take without undefined behaviour. */
static float
input_value(unsigned b)
{
    static const float special[3] = {-INFINITY, INFINITY, NAN};

    return b >= 0xfd ? special[b - 0xfd] : (float)((int)b - 128) / 16.0f;
}

/* Fills every input buffer of e from the bytes (floats small or not finite, integers 0). */
static void
fill_inputs(struct sim_exe *e, struct rd *r)
{
    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info io;
        uint8_t *buf = sim_exe_input_buffer(e, i);
        if (sim_exe_input_info(e, i, &io) != 0 || buf == NULL)
            continue;
        if (io.dtype == SIM_DTYPE_FLOAT) {
            float *f = (float *)buf;
            for (size_t k = 0; k < io.run_bytes / sizeof *f; k++)
                f[k] = input_value(byte(r));
        } else {
            memset(buf, 0, io.run_bytes);
        }
    }
}

/* Compiles m (inference, or training on loss when loss is not NULL) and runs it once. */
static void
compile_run(struct sim_model *m, struct rd *r, const char *loss)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    sim_compile_opts_init(&o);
    o.ipu_memory_bytes = 64u << 20;
    o.host_memory_bytes = 64u << 20;
    o.device_iterations = 1 + (byte(r) & 1);
    if (ipu_of[0] >= 0) { /* over up to 4 IPUs: a strategy, enough micro-batches for it */
        o.partition_ipus = 4;
        o.strategy = (int)pick(r, SIM_STRATEGY_DEFAULT, SIM_STRATEGY_PHASED);
        o.device_iterations = (unsigned)pick(r, 1, 5);
        o.gradient_accumulation = loss != NULL ? (unsigned)pick(r, 1, 5) : 1;
    }
    if (loss != NULL) {
        o.loss = loss;
        sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
        o.optimizer.lr = 0.01f;
    }
    if (sim_compile(m, &o, &e, &err) != 0)
        return;
    fill_inputs(e, r);
    (void)sim_exe_run(e, &err);
    sim_exe_free(e);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rd r = {data, size, 0};
    struct sim_ob *b = sim_ob_new(13 + (int64_t)(size > 0 ? data[0] % 6 : 0));
    struct sim_model *m = NULL;
    struct sim_err err;
    int64_t dims[4];
    int rank, nodes;
    char cur[32], next[32];
    void *bytes = NULL;
    size_t len = 0;

    if (b == NULL)
        return 0;
    byte(&r);
    rank = (int)pick(&r, 1, 4);
    for (int i = 0; i < rank; i++)
        dims[i] = pick(&r, 1, 5);
    sim_ob_input(b, "x", SIM_DTYPE_FLOAT, rank, dims);
    nodes = (int)pick(&r, 1, 5);
    ipu_of[0] = byte(&r) & 1 ? 0 : -1;
    for (int k = 1; k < nodes; k++)
        ipu_of[k] = ipu_of[0] < 0 ? -1 : ipu_of[k - 1] + (int)(byte(&r) & 1);
    /* a weight first, so that the training compile has something to train */
    float_init(b, &r, "w", rank, dims);
    sim_ob_node_v(b, "Mul", "scale", (const char *const[]){"x", "w"}, 2,
                  (const char *const[]){"xw"}, 1);
    if (ipu_of[0] >= 0) {
        sim_ob_attr_int(b, "__ipu_number", 0);
        sim_ob_attr_int(b, "__pipeline_stage", 0);
    }
    snprintf(cur, sizeof cur, "xw");
    for (int k = 0; k < nodes; k++) {
        add_node(b, &r, k, cur, rank, next, sizeof next);
        snprintf(cur, sizeof cur, "%s", next);
    }
    /* the loss for the training compile: the mean of the last output */
    sim_ob_node_v(b, "ReduceMean", "loss_node", (const char *const[]){cur}, 1,
                  (const char *const[]){"loss"}, 1);
    sim_ob_attr_int(b, "keepdims", 0);
    if (ipu_of[0] >= 0) { /* the loss with the last node */
        sim_ob_attr_int(b, "__ipu_number", ipu_of[nodes - 1]);
        sim_ob_attr_int(b, "__pipeline_stage", ipu_of[nodes - 1]);
    }
    sim_ob_output(b, cur, 0);
    sim_ob_output(b, "loss", 0);
    if (sim_ob_serialize(b, &bytes, &len) == 0 && sim_model_load(bytes, len, &m, &err) == 0) {
        compile_run(m, &r, NULL);
        compile_run(m, &r, "loss");
        sim_model_free(m);
    }
    free(bytes);
    sim_ob_free(b);
    return 0;
}
