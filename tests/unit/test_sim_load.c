/*
 * test_sim_load.c — ONNX import and compile errors on broken or hostile models: garbage
 * bytes, opsets out of range, unknown ops (the error lists the supported ops), unknown
 * names, cycles, duplicate names, bad initializers, unsorted nodes (accepted), and a
 * deterministic mutation fuzz of a small CNN that must never crash (run it under ASan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT

static int
load_ob(struct sim_ob *b, struct sim_model **m, struct sim_err *err)
{
    void *bytes;
    size_t len;
    int rc;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    rc = sim_model_load(bytes, len, m, err);
    free(bytes);
    return rc;
}

static void
test_garbage(void **state)
{
    const char junk[] = "this is not a protobuf \xff\xff\xff\xff";
    struct sim_model *m = NULL;
    struct sim_err err;

    (void)state;
    assert_int_equal(sim_model_load(junk, sizeof(junk), &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_null(m);
    assert_int_equal(sim_model_load(junk, 0, &m, &err), IPUOF_E_INVAL);
    assert_int_equal(sim_model_load(NULL, 10, &m, &err), IPUOF_E_INVAL);
    /* an empty ModelProto parses but has no opset and no graph */
    assert_int_equal(sim_model_load("", 1, &m, &err), IPUOF_E_INVAL);
    sim_model_free(NULL);
    sim_exe_free(NULL);
}

static void
test_opset(void **state)
{
    const int64_t d[1] = { 4 };
    struct sim_model *m = NULL;
    struct sim_err err;
    struct sim_ob *b;

    (void)state;
    b = sim_ob_new(18);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Relu", "", "x", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_UNSUPPORTED);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "opset 18"));
    assert_non_null(strstr(err.msg, "1 to 17"));
    b = sim_ob_new(0);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Relu", "", "x", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_UNSUPPORTED);
    /* Cast before opset 6 named its target type with a string: refused per op */
    b = sim_ob_new(5);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Cast", "legacy", "x", "y");
    sim_ob_attr_str(b, "to", "INT32");
    sim_ob_output(b, "y", SIM_DTYPE_INT32);
    assert_int_equal(load_ob(b, &m, &err), 0);
    {
        struct sim_compile_opts o;
        struct sim_exe *e = NULL;
        sim_compile_opts_init(&o);
        assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_UNSUPPORTED);
        printf("  refused: %.160s...\n", err.msg);
        assert_non_null(strstr(err.msg, "'legacy' (Cast)"));
        assert_non_null(strstr(err.msg, "opset 5"));
    }
    sim_model_free(m);
}

static void
test_unknown_op(void **state)
{
    const int64_t d[1] = { 4 };
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;
    struct sim_ob *b = sim_ob_new(13);

    (void)state;
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Relu", "ok", "x", "t");
    sim_ob_node(b, "MadeUpOp", "m1", "t", "u");
    sim_ob_node(b, "FancyOp", "fancy", "u", "v");
    sim_ob_node(b, "MadeUpOp", "", "v", "w");
    sim_ob_node(b, "Relu", "ok2", "w", "w2");
    sim_ob_node(b, "MadeUpOp", "m3", "w2", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), 0);
    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_UNSUPPORTED);
    printf("  refused: %s\n", err.msg);
    /* every unknown op once, with its count and first node, in order of appearance */
    assert_non_null(strstr(err.msg, "unsupported ops: MadeUpOp x3 (first: node 1 'm1'), "
                                    "FancyOp x1 (first: node 2 'fancy'); supported: Abs, Acos, Acosh, Add"));
    assert_non_null(strstr(err.msg, "Conv"));
    assert_null(e);
    sim_model_free(m);
}

static void
test_unsupported_variant(void **state)
{
    const int64_t dx[4] = { 2, 3, 2, 2 }, dc[1] = { 3 };
    const float v[3] = { 1, 1, 1 };
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;
    struct sim_ob *b = sim_ob_new(8);

    (void)state;
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_initializer(b, "s", F32, 1, dc, v);
    sim_ob_initializer(b, "b", F32, 1, dc, v);
    sim_ob_initializer(b, "mean", F32, 1, dc, v);
    sim_ob_initializer(b, "var", F32, 1, dc, v);
    sim_ob_node(b, "BatchNormalization", "bn", "x,s,b,mean,var", "y");
    sim_ob_attr_int(b, "spatial", 0);
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), 0);
    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_UNSUPPORTED);
    printf("  refused: %.200s...\n", err.msg);
    assert_non_null(strstr(err.msg, "'bn' (BatchNormalization): unsupported variant: "
                                    "BatchNormalization with spatial=0"));
    assert_non_null(strstr(err.msg, "Supported ops:"));
    sim_model_free(m);
}

static void
test_broken_graphs(void **state)
{
    const int64_t d[1] = { 4 };
    struct sim_model *m = NULL;
    struct sim_err err;
    struct sim_ob *b;

    (void)state;
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Relu", "r", "nowhere", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'nowhere'"));

    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Add", "a", "x,q", "p");
    sim_ob_node(b, "Relu", "b", "p", "q");
    sim_ob_output(b, "q", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "cycle"));

    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Relu", "a", "x", "y");
    sim_ob_node(b, "Relu", "b", "x", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "single-assignment"));

    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Relu", "a", "x", "y");
    sim_ob_output(b, "z", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);

    b = sim_ob_new(13);
    sim_ob_input(b, "x", 11, 1, d);     /* double */
    sim_ob_node(b, "Relu", "a", "x", "y");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), IPUOF_E_UNSUPPORTED);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "double"));
}

static void
test_unsorted_nodes(void **state)
{
    const int64_t d[1] = { 3 };
    const float xv[3] = { -1, 2, -3 };
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;
    struct sim_ob *b = sim_ob_new(13);
    const float *y;

    (void)state;
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_node(b, "Neg", "second", "t", "y");
    sim_ob_node(b, "Relu", "first", "x", "t");
    sim_ob_output(b, "y", F32);
    assert_int_equal(load_ob(b, &m, &err), 0);
    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e, &err), 0);
    memcpy(sim_exe_input_buffer(e, 0), xv, sizeof(xv));
    assert_int_equal(sim_exe_run(e, &err), 0);
    y = sim_exe_output_buffer(e, 0);
    assert_true(y[0] == 0 && y[1] == -2 && y[2] == 0);
    sim_exe_free(e);
    sim_model_free(m);
}

/* An initializer whose raw_data is shorter than its shape needs. */
static void
test_bad_initializer(void **state)
{
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT, *osp = &os;
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT, *tp = &t;
    int64_t dims[2] = { 1000, 1000 };
    uint8_t raw[16] = { 0 };
    struct sim_model *m = NULL;
    struct sim_err err;
    uint8_t *buf;
    size_t len;

    (void)state;
    os.has_version = 1;
    os.version = 13;
    mp.n_opset_import = 1;
    mp.opset_import = &osp;
    mp.graph = &g;
    g.n_initializer = 1;
    g.initializer = &tp;
    t.name = (char *)"w";
    t.n_dims = 2;
    t.dims = dims;
    t.has_data_type = 1;
    t.data_type = F32;
    t.has_raw_data = 1;
    t.raw_data.len = sizeof(raw);
    t.raw_data.data = raw;
    len = onnx__model_proto__get_packed_size(&mp);
    buf = malloc(len);
    onnx__model_proto__pack(&mp, buf);
    assert_int_equal(sim_model_load(buf, len, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "initializer 'w'"));
    assert_non_null(strstr(err.msg, "4000000"));
    free(buf);
    dims[0] = -5;
    len = onnx__model_proto__get_packed_size(&mp);
    buf = malloc(len);
    onnx__model_proto__pack(&mp, buf);
    assert_int_equal(sim_model_load(buf, len, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    dims[0] = (int64_t)1 << 40;
    dims[1] = (int64_t)1 << 40;
    free(buf);
    len = onnx__model_proto__get_packed_size(&mp);
    buf = malloc(len);
    onnx__model_proto__pack(&mp, buf);
    assert_int_equal(sim_model_load(buf, len, &m, &err), IPUOF_E_TOO_LARGE);
    printf("  refused: %s\n", err.msg);
    free(buf);
}

/* Initializers that declare huge dims but carry no data: refused for the missing data
 * before anything is allocated for them (64 x 64 GiB declared; the model is a few bytes). */
static void
test_initializer_without_data(void **state)
{
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT, *osp = &os;
    Onnx__TensorProto t[64], *tp[64];
    char names[64][8];
    int64_t dims[2] = { (int64_t)1 << 17, (int64_t)1 << 17 };
    struct sim_model *m = NULL;
    struct sim_err err;
    uint8_t *buf;
    size_t len;

    (void)state;
    os.has_version = 1;
    os.version = 13;
    mp.n_opset_import = 1;
    mp.opset_import = &osp;
    mp.graph = &g;
    for (int i = 0; i < 64; i++) {
        onnx__tensor_proto__init(&t[i]);
        snprintf(names[i], sizeof names[i], "w%d", i);
        t[i].name = names[i];
        t[i].n_dims = 2;
        t[i].dims = dims;
        t[i].has_data_type = 1;
        t[i].data_type = F32;
        tp[i] = &t[i];
    }
    g.n_initializer = 64;
    g.initializer = tp;
    len = onnx__model_proto__get_packed_size(&mp);
    buf = malloc(len);
    onnx__model_proto__pack(&mp, buf);
    printf("  model of %zu bytes declares 64 initializers of 64 GiB\n", len);
    assert_int_equal(sim_model_load(buf, len, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "initializer 'w0'"));
    assert_non_null(strstr(err.msg, "holds 0 elements"));
    assert_null(m);
    free(buf);
}

/* Wraps buf[0..*len) in a length-delimited field (a nested message) in place: the caller
 * leaves room at the front. Returns the new start. */
static uint8_t *
wrap(uint8_t *start, size_t *len, unsigned field)
{
    uint8_t hdr[16];
    size_t n = 0, l = *len;

    hdr[n++] = (uint8_t)(field << 3 | 2);
    do {
        hdr[n++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
        l >>= 7;
    } while (l > 0);
    start -= n;
    memcpy(start, hdr, n);
    *len += n;
    return start;
}

/* Graph -> node -> attribute -> subgraph -> node ... nested far deeper than any model:
 * refused before protobuf-c would recurse through it. */
static void
test_deep_nesting(void **state)
{
    const size_t levels = 200000, cap = levels * 3 * 6 + 64;
    uint8_t *buf = malloc(cap), *p = buf + cap;
    size_t len = 0;
    struct sim_model *m = NULL;
    struct sim_err err;

    (void)state;
    for (size_t i = 0; i < levels; i++) {
        p = wrap(p, &len, 6);   /* AttributeProto.g holds the graph so far */
        p = wrap(p, &len, 5);   /* NodeProto.attribute holds that attribute */
        p = wrap(p, &len, 1);   /* GraphProto.node holds that node */
    }
    p = wrap(p, &len, 7);       /* ModelProto.graph */
    assert_int_equal(sim_model_load(p, len, &m, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "nested too deeply"));
    assert_null(m);
    free(buf);
}

/* A small CNN in the shape of the MNIST benchmark, used as the fuzz seed. */
static void *
cnn_bytes(size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[4] = { -1, 1, 8, 8 }, dw[4] = { 2, 1, 3, 3 }, db[1] = { 2 };
    const int64_t dfc[2] = { 4, 18 }, shp[2] = { 0, -1 }, ds[1] = { 2 };
    const int64_t k2[2] = { 2, 2 };
    float w[18], bias[2] = { 0.1f, -0.1f }, fc[72];
    void *bytes;

    for (int i = 0; i < 18; i++)
        w[i] = (float)(i % 5) * 0.1f;
    for (int i = 0; i < 72; i++)
        fc[i] = (float)(i % 7) * 0.05f;
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_initializer(b, "w", F32, 4, dw, w);
    sim_ob_initializer(b, "b", F32, 1, db, bias);
    sim_ob_initializer(b, "fc", F32, 2, dfc, fc);
    sim_ob_initializer(b, "shape", SIM_DTYPE_INT64, 1, ds, shp);
    sim_ob_node(b, "Conv", "conv", "x,w,b", "c");
    sim_ob_node(b, "MaxPool", "pool", "c", "p");
    sim_ob_attr_ints(b, "kernel_shape", k2, 2);
    sim_ob_attr_ints(b, "strides", k2, 2);
    sim_ob_node(b, "Relu", "relu", "p", "r");
    sim_ob_node(b, "Shape", "sh", "r", "s");
    sim_ob_node(b, "Reshape", "flat", "r,shape", "f");
    sim_ob_node(b, "Gemm", "fc", "f,fc", "g");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Softmax", "sm", "g", "y");
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "s", SIM_DTYPE_INT64);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    return bytes;
}

static uint64_t
rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void
test_fuzz(void **state)
{
    size_t len;
    uint8_t *seed = cnn_bytes(&len), *buf = malloc(len + 64);
    uint64_t s = 0x1234567;
    int loaded = 0, compiled = 0, ran = 0;
    const char *env = getenv("SIM_FUZZ_ITERS");
    int iters = env != NULL ? atoi(env) : 3000;

    (void)state;
    {
        /* the seed itself compiles and runs */
        struct sim_model *m = NULL;
        struct sim_exe *e = NULL;
        struct sim_compile_opts o;
        struct sim_err err;
        assert_int_equal(sim_model_load(seed, len, &m, &err), 0);
        sim_compile_opts_init(&o);
        o.micro_batch = 2;
        if (sim_compile(m, &o, &e, &err) != 0)
            fail_msg("%s", err.msg);
        assert_int_equal(sim_exe_run(e, &err), 0);
        sim_exe_free(e);
        sim_model_free(m);
    }
    for (int it = 0; it < iters; it++) {
        size_t n = len;
        struct sim_model *m = NULL;
        struct sim_exe *e = NULL;
        struct sim_compile_opts o;
        struct sim_err err;
        int muts = 1 + (int)(rnd(&s) % 4);

        memcpy(buf, seed, len);
        for (int k = 0; k < muts; k++) {
            size_t pos = (size_t)(rnd(&s) % n);
            switch (rnd(&s) % 5) {
            case 0: buf[pos] ^= (uint8_t)(1u << (rnd(&s) % 8)); break;
            case 1: buf[pos] = (uint8_t)rnd(&s); break;
            case 2: buf[pos] = (uint8_t)(rnd(&s) % 2 ? 0x7f : 0xff); break;
            case 3: n = pos > 0 ? pos : n; break;
            default: buf[pos] = (uint8_t)(buf[pos] + 1); break;
            }
        }
        if (sim_model_load(buf, n, &m, &err) != 0)
            continue;
        loaded++;
        sim_compile_opts_init(&o);
        o.micro_batch = 2;
        o.device_iterations = 2;
        o.ipu_memory_bytes = 16u << 20;
        if (sim_compile(m, &o, &e, &err) == 0) {
            compiled++;
            for (size_t i = 0; i < sim_exe_input_count(e); i++) {
                struct sim_io_info info;
                sim_exe_input_info(e, i, &info);
                memset(sim_exe_input_buffer(e, i), (int)(rnd(&s) & 0xff), info.run_bytes);
            }
            if (sim_exe_run(e, &err) == 0)
                ran++;
            sim_exe_free(e);
        }
        sim_model_free(m);
    }
    printf("  %d mutations of a %zu-byte CNN: %d loaded, %d compiled, %d ran, no crash\n",
           iters, len, loaded, compiled, ran);
    free(seed);
    free(buf);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_opset),
        cmocka_unit_test(test_unknown_op),
        cmocka_unit_test(test_unsupported_variant),
        cmocka_unit_test(test_broken_graphs),
        cmocka_unit_test(test_unsorted_nodes),
        cmocka_unit_test(test_bad_initializer),
        cmocka_unit_test(test_initializer_without_data),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_fuzz),
    };

    return cmocka_run_group_tests_name("sim_load", tests, NULL, NULL);
}
