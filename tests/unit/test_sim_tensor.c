/*
 * test_sim_tensor.c — tensors and broadcasting: element counts with overflow and zero
 * dims, numpy broadcasting rules, axis normalisation, saturating conversions, the string
 * map, TensorProto encode / decode (raw and typed fields, files, hostile bytes), and Add
 * over random broadcastable shape pairs compared with a naive index computation.
 * Not here: the broadcasting of the other binary ops, which share Add's kernel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "onnx_build.h"
#include "sim_int.h"
#include "tensor_pb.h"

static struct sim_shape
shp(int rank, int64_t a, int64_t b, int64_t c, int64_t d)
{
    struct sim_shape s = { rank, { a, b, c, d } };
    return s;
}

static void
test_numel(void **state)
{
    struct sim_shape s = shp(3, 2, 3, 4, 0);
    int64_t n;

    (void)state;
    assert_true(sim_shape_numel(&s, &n));
    assert_int_equal(n, 24);
    s = shp(0, 0, 0, 0, 0);
    assert_true(sim_shape_numel(&s, &n));
    assert_int_equal(n, 1);
    s = shp(2, (int64_t)1 << 40, (int64_t)1 << 40, 0, 0);
    assert_false(sim_shape_numel(&s, &n));
    /* a zero dim does not excuse huge others: partial products must stay bounded */
    s = shp(3, 0, (int64_t)1 << 40, (int64_t)1 << 40, 0);
    assert_false(sim_shape_numel(&s, &n));
    s = shp(2, 0, 5, 0, 0);
    assert_true(sim_shape_numel(&s, &n));
    assert_int_equal(n, 0);
    s = shp(2, -1, 5, 0, 0);
    assert_false(sim_shape_numel(&s, &n));
    s.rank = SIM_MAX_RANK + 1;
    assert_false(sim_shape_numel(&s, &n));
}

static void
test_broadcast_rules(void **state)
{
    struct sim_shape a, b, o;
    char buf[64];
    int ax;

    (void)state;
    a = shp(3, 3, 4, 5, 0);
    b = shp(1, 5, 0, 0, 0);
    assert_true(sim_shape_broadcast(&a, &b, &o));
    assert_string_equal(sim_shape_fmt(&o, buf, sizeof(buf)), "[3, 4, 5]");
    a = shp(2, 2, 1, 0, 0);
    b = shp(2, 1, 3, 0, 0);
    assert_true(sim_shape_broadcast(&a, &b, &o));
    assert_string_equal(sim_shape_fmt(&o, buf, sizeof(buf)), "[2, 3]");
    a = shp(1, 3, 0, 0, 0);
    b = shp(1, 4, 0, 0, 0);
    assert_false(sim_shape_broadcast(&a, &b, &o));
    a = shp(0, 0, 0, 0, 0);
    b = shp(2, 2, 3, 0, 0);
    assert_true(sim_shape_broadcast(&a, &b, &o));
    assert_true(sim_shape_eq(&o, &b));
    a = shp(2, 0, 3, 0, 0);
    b = shp(2, 1, 3, 0, 0);
    assert_true(sim_shape_broadcast(&a, &b, &o));
    assert_string_equal(sim_shape_fmt(&o, buf, sizeof(buf)), "[0, 3]");
    assert_string_equal(sim_shape_fmt(&a, buf, 4), "[0,");
    assert_true(sim_axis(-1, 3, &ax));
    assert_int_equal(ax, 2);
    assert_false(sim_axis(3, 3, &ax));
    assert_false(sim_axis(-4, 3, &ax));
}

static void
test_conversions(void **state)
{
    uint8_t u8;
    int32_t i32;
    int64_t i64;
    float f = 3.75f;

    (void)state;
    sim_put_f64(SIM_DTYPE_UINT8, &u8, 0, -5.0);
    assert_int_equal(u8, 0);
    sim_put_f64(SIM_DTYPE_UINT8, &u8, 0, 300.0);
    assert_int_equal(u8, 255);
    sim_put_f64(SIM_DTYPE_INT32, &i32, 0, 1e20);
    assert_int_equal(i32, INT32_MAX);
    sim_put_f64(SIM_DTYPE_INT32, &i32, 0, NAN);
    assert_int_equal(i32, 0);
    sim_put_f64(SIM_DTYPE_INT64, &i64, 0, -1e300);
    assert_true(i64 == INT64_MIN);
    sim_put_f64(SIM_DTYPE_INT32, &i32, 0, -2.9);
    assert_int_equal(i32, -2);
    assert_int_equal(sim_get_i64(SIM_DTYPE_FLOAT, &f, 0), 3);
    assert_int_equal(sim_dtype_size(SIM_DTYPE_INT64), 8);
    assert_int_equal(sim_dtype_size(11), 0);
    assert_string_equal(sim_dtype_name(SIM_DTYPE_BOOL), "bool");
    assert_string_equal(sim_dtype_name(11), "unsupported");
    assert_string_equal(sim_onnx_dtype_name(16), "bfloat16");
}

static void
test_strmap(void **state)
{
    struct sim_strmap m;
    char names[100][8];

    (void)state;
    assert_true(sim_strmap_init(&m, 100));
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof(names[i]), "v%d", i);
        assert_true(sim_strmap_put(&m, names[i], i));
    }
    assert_false(sim_strmap_put(&m, "v7", 1000));
    for (int i = 0; i < 100; i++)
        assert_int_equal(sim_strmap_get(&m, names[i]), i);
    assert_int_equal(sim_strmap_get(&m, "v100"), -1);
    sim_strmap_fini(&m);
}

static void
test_tensor_pb(void **state)
{
    const int dtypes[6] = { SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8,
                            SIM_DTYPE_INT32, SIM_DTYPE_INT64, SIM_DTYPE_BOOL };
    const int64_t dims[2] = { 2, 3 };
    uint8_t data[48];
    struct sim_host_tensor t;
    struct sim_err err;
    char path[] = "/tmp/test_sim_tensor_XXXXXX";
    void *buf;
    size_t len;
    int fd;

    (void)state;
    for (int i = 0; i < 48; i++)
        data[i] = (uint8_t)(i * 7 % 2);
    for (int k = 0; k < 6; k++) {
        assert_int_equal(sim_tensor_pb_encode("t", dtypes[k], 2, dims, data, &buf, &len, &err), 0);
        assert_int_equal(sim_tensor_pb_decode(buf, len, &t, &err), 0);
        assert_int_equal(t.dtype, dtypes[k]);
        assert_int_equal(t.rank, 2);
        assert_int_equal(t.dims[1], 3);
        assert_int_equal(t.numel, 6);
        assert_int_equal(t.bytes, 6 * sim_dtype_size(dtypes[k]));
        assert_memory_equal(t.data, data, t.bytes);
        assert_string_equal(t.name, "t");
        sim_host_tensor_fini(&t);
        free(buf);
    }
    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sim_tensor_pb_write_file(path, "w", SIM_DTYPE_FLOAT, 2, dims, data, &err), 0);
    assert_int_equal(sim_tensor_pb_read_file(path, &t, &err), 0);
    assert_memory_equal(t.data, data, 24);
    sim_host_tensor_fini(&t);
    unlink(path);
    assert_int_equal(sim_tensor_pb_read_file(path, &t, &err), IPUOF_E_IO);
    printf("  refused: %s\n", err.msg);
    assert_int_equal(sim_tensor_pb_decode("\xff\xff\xff", 3, &t, &err), IPUOF_E_INVAL);
    sim_host_tensor_fini(&t);
}

/* Typed fields (float_data, int32_data for small types), and a dtype sim refuses. */
static void
test_tensor_pb_typed(void **state)
{
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[1] = { 3 };
    float fd[3] = { 1.5f, -2, 3 };
    int32_t id[3] = { 1, 0, 255 };
    double dd[3] = { 1, 2, 3 };
    struct sim_host_tensor t;
    struct sim_err err;
    uint8_t buf[256];
    size_t len;

    (void)state;
    tp.n_dims = 1;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = SIM_DTYPE_FLOAT;
    tp.n_float_data = 3;
    tp.float_data = fd;
    len = onnx__tensor_proto__pack(&tp, buf);
    assert_int_equal(sim_tensor_pb_decode(buf, len, &t, &err), 0);
    assert_memory_equal(t.data, fd, sizeof(fd));
    sim_host_tensor_fini(&t);
    tp.n_float_data = 2;
    len = onnx__tensor_proto__pack(&tp, buf);
    assert_int_equal(sim_tensor_pb_decode(buf, len, &t, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    tp.n_float_data = 0;
    tp.data_type = SIM_DTYPE_UINT8;
    tp.n_int32_data = 3;
    tp.int32_data = id;
    len = onnx__tensor_proto__pack(&tp, buf);
    assert_int_equal(sim_tensor_pb_decode(buf, len, &t, &err), 0);
    assert_int_equal(((uint8_t *)t.data)[2], 255);
    sim_host_tensor_fini(&t);
    tp.n_int32_data = 0;
    tp.data_type = 11;
    tp.n_double_data = 3;
    tp.double_data = dd;
    len = onnx__tensor_proto__pack(&tp, buf);
    assert_int_equal(sim_tensor_pb_decode(buf, len, &t, &err), IPUOF_E_UNSUPPORTED);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "double"));
}

/* Add over random broadcastable pairs of shapes (rank <= 4, dims 1..3), checked element
 * by element against numpy's rule computed directly. */
static void
test_broadcast_add(void **state)
{
    uint64_t seed = 99;
    double md = 0.0;

    (void)state;
    for (int it = 0; it < 200; it++) {
        int64_t da[4], db[4], dout[4];
        int ra, rb, r;
        struct sim_ob *b = sim_ob_new(14);
        struct sim_model *m = NULL;
        struct sim_exe *e = NULL;
        struct sim_compile_opts o;
        struct sim_err err;
        float *xa, *xb;
        const float *y;
        int64_t na = 1, nb = 1, no = 1;
        void *bytes;
        size_t len;

        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        r = 1 + (int)((seed >> 33) % 4);
        ra = r - (int)((seed >> 40) % 2 ? 0 : (seed >> 41) % (unsigned)r);
        rb = r - (ra == r ? (int)((seed >> 44) % (unsigned)r) : 0);
        for (int i = 0; i < r; i++) {
            int64_t d = 1 + (int64_t)((seed >> (i * 5)) % 3);
            int which = (int)((seed >> (i * 3 + 20)) % 3);
            dout[i] = d;
            if (i >= r - ra)
                da[i - (r - ra)] = which == 1 ? 1 : d;
            if (i >= r - rb)
                db[i - (r - rb)] = which == 2 ? 1 : d;
        }
        for (int i = 0; i < ra; i++)
            na *= da[i];
        for (int i = 0; i < rb; i++)
            nb *= db[i];
        for (int i = 0; i < r; i++) {
            int ia = i - (r - ra), ib = i - (r - rb);
            dout[i] = (ia >= 0 && da[ia] > 1) ? da[ia] : (ib >= 0 ? db[ib] : 1);
            no *= dout[i];
        }
        sim_ob_input(b, "a", SIM_DTYPE_FLOAT, ra, da);
        sim_ob_input(b, "b", SIM_DTYPE_FLOAT, rb, db);
        sim_ob_node(b, "Add", "", "a,b", "y");
        sim_ob_output(b, "y", SIM_DTYPE_FLOAT);
        assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
        sim_ob_free(b);
        assert_int_equal(sim_model_load(bytes, len, &m, &err), 0);
        free(bytes);
        sim_compile_opts_init(&o);
        if (sim_compile(m, &o, &e, &err) != 0)
            fail_msg("%s", err.msg);
        xa = sim_exe_input_buffer(e, 0);
        xb = sim_exe_input_buffer(e, 1);
        for (int64_t i = 0; i < na; i++)
            xa[i] = (float)i;
        for (int64_t i = 0; i < nb; i++)
            xb[i] = (float)(i * 100);
        assert_int_equal(sim_exe_run(e, &err), 0);
        y = sim_exe_output_buffer(e, 0);
        for (int64_t f = 0; f < no; f++) {
            int64_t rem = f, ia = 0, ib = 0, sa = 1, sb = 1;
            for (int i = r - 1; i >= 0; i--) {
                int64_t idx = rem % dout[i];
                int ka = i - (r - ra), kb = i - (r - rb);
                rem /= dout[i];
                if (ka >= 0) {
                    ia += (da[ka] == 1 ? 0 : idx) * sa;
                    sa *= da[ka];
                }
                if (kb >= 0) {
                    ib += (db[kb] == 1 ? 0 : idx) * sb;
                    sb *= db[kb];
                }
            }
            if (fabs(y[f] - (xa[ia] + xb[ib])) > md)
                md = fabs(y[f] - (xa[ia] + xb[ib]));
        }
        sim_exe_free(e);
        sim_model_free(m);
    }
    printf("  Add over 200 random broadcast pairs: max |diff| = %.3g\n", md);
    assert_true(md == 0.0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numel),
        cmocka_unit_test(test_broadcast_rules),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_tensor_pb),
        cmocka_unit_test(test_tensor_pb_typed),
        cmocka_unit_test(test_broadcast_add),
    };

    return cmocka_run_group_tests_name("sim_tensor", tests, NULL, NULL);
}
