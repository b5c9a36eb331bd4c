/*
 * test_models.c — compiling and running ONNX models on a real daemon, at the protocol
 * level (raw frames): chunked uploads, progress events, the executable cache, device
 * iterations x replicas, output modes, memory in status, bad input, clients that vanish
 * mid-run. Uses the ONNX node test data from Debian's libonnx-testdata.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "onnx_build.h"
#include "ipuof/client.h"
#include "tensor_pb.h"
#include "testd.h"

#define NODE "/usr/share/libonnx-testdata/data/node/"

static struct testd d;
static uint64_t next_id = 100;

static int
teardown(void **state)
{
    (void)state;
    return testd_reset(&d);
}

/* A connection that said hello and attached n IPUs. */
static int
session(unsigned n)
{
    int fd = raw_session(d.port, n);

    assert_true(fd >= 0);
    return fd;
}

struct compile_args {
    unsigned D, R;
    const char *name;
    Ipuof__OutputKind kind;
    unsigned n;
    const char *mode_output;   /* with kind: the output it applies to (NULL: default mode) */
    size_t chunk;              /* 0: everything in the compile frame */
};

/* Compiles model bytes; returns the final reply (CompileReply or Error), counting progress. */
static Ipuof__Header *
compile_bytes(int fd, const void *bytes, size_t len, const struct compile_args *a,
              int *progress_events)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__CompileRequest c = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__OutputMode dm = IPUOF__OUTPUT_MODE__INIT, om = IPUOF__OUTPUT_MODE__INIT;
    Ipuof__OutputMode *omp = &om;
    uint64_t id = next_id++;
    size_t first = a->chunk && a->chunk < len ? a->chunk : len;
    int eof;

    c.model_bytes = len;
    c.name = (char *)(a->name ? a->name : "m");
    c.device_iterations = a->D;
    c.replicas = a->R;
    if (a->kind && a->mode_output == NULL) {
        dm.kind = a->kind;
        dm.n = a->n;
        c.default_mode = &dm;
    } else if (a->kind) {
        om.name = (char *)a->mode_output;
        om.kind = a->kind;
        om.n = a->n;
        c.n_output_modes = 1;
        c.output_modes = &omp;
    }
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &c;
    assert_int_equal(raw_send_payload(fd, &h, bytes, first), 0);
    for (size_t off = first; off < len; off += a->chunk) {
        Ipuof__Header ch = IPUOF__HEADER__INIT;
        Ipuof__ModelChunk mc = IPUOF__MODEL_CHUNK__INIT;
        size_t n = len - off < a->chunk ? len - off : a->chunk;
        mc.offset = off;
        ch.request_id = id;
        ch.body_case = IPUOF__HEADER__BODY_MODEL_CHUNK;
        ch.model_chunk = &mc;
        assert_int_equal(raw_send_payload(fd, &ch, (const uint8_t *)bytes + off, n), 0);
    }
    for (;;) {
        r = raw_recv(fd, 30000, &eof);
        assert_non_null(r);
        assert_int_equal(r->request_id, id);
        if (r->body_case != IPUOF__HEADER__BODY_COMPILE_PROGRESS)
            return r;
        if (progress_events)
            (*progress_events)++;
        assert_true(r->compile_progress->done <= r->compile_progress->total);
        ipuof_frame_header_free(r);
    }
}

static Ipuof__Header *
compile_file(int fd, const char *path, const struct compile_args *a, int *progress)
{
    size_t len;
    void *bytes = read_file(path, &len);
    Ipuof__Header *r;

    assert_non_null(bytes);
    r = compile_bytes(fd, bytes, len, a, progress);
    free(bytes);
    return r;
}

/* Runs model id with one input tensor (name, dims from t, data repeated `times` along dim 0). */
static Ipuof__Header *
run_tiled(int fd, uint32_t model, const struct sim_host_tensor *t, const char *name,
          unsigned times, void **out, size_t *out_len)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tip = &ti;
    int64_t dims[8];
    uint8_t *buf = malloc(t->bytes * times);
    Ipuof__Header *r;

    assert_non_null(buf);
    for (unsigned k = 0; k < times; k++)
        memcpy(buf + k * t->bytes, t->data, t->bytes);
    for (int i = 0; i < t->rank; i++)
        dims[i] = t->dims[i];
    dims[0] *= times;
    ti.name = (char *)name;
    ti.dtype = (Ipuof__DType)t->dtype;
    ti.n_dims = (size_t)t->rank;
    ti.dims = dims;
    ti.bytes = t->bytes * times;
    rq.model_id = model;
    rq.n_inputs = 1;
    rq.inputs = &tip;
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    assert_int_equal(raw_send_payload(fd, &h, buf, t->bytes * times), 0);
    free(buf);
    r = raw_recv_payload(fd, 30000, out, out_len);
    assert_non_null(r);
    return r;
}

static void
load_pb(const char *path, struct sim_host_tensor *t)
{
    struct sim_err err;

    if (sim_tensor_pb_read_file(path, t, &err) != 0)
        fail_msg("%s: %s", path, err.msg);
}

static void
test_relu_runs_and_caches(void **state)
{
    struct compile_args a = {.D = 1, .R = 1, .name = "relu"};
    struct sim_host_tensor x = {0}, y = {0};
    Ipuof__Header *r;
    void *out;
    size_t out_len;
    int progress = 0, fd, fd2;
    uint32_t id;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    load_pb(NODE "test_relu/test_data_set_0/input_0.pb", &x);
    load_pb(NODE "test_relu/test_data_set_0/output_0.pb", &y);
    fd = session(1);
    r = compile_file(fd, NODE "test_relu/model.onnx", &a, &progress);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("compile: %s", r->error->message);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    assert_false(r->compile_reply->cached);
    assert_true(progress >= 1);
    assert_int_equal(r->compile_reply->n_inputs, 1);
    assert_string_equal(r->compile_reply->inputs[0]->name, "x");
    assert_int_equal(r->compile_reply->n_outputs, 1);
    assert_int_equal(r->compile_reply->n_memory, 1);
    assert_true(r->compile_reply->memory[0]->total_bytes > 0);
    id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);

    r = run_tiled(fd, id, &x, "x", 1, &out, &out_len);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("run: %s", r->error->message);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    assert_int_equal(out_len, y.bytes);
    assert_memory_equal(out, y.data, y.bytes); /* relu is exact */
    ipuof_frame_header_free(r);
    free(out);

    /* The same model and options from another client: answered from the cache. */
    fd2 = session(1);
    r = compile_file(fd2, NODE "test_relu/model.onnx", &a, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    assert_false(r->compile_reply->cached); /* the first client still uses its copy */
    ipuof_frame_header_free(r);
    close(fd2);
    usleep(100000);
    fd2 = session(1);
    r = compile_file(fd2, NODE "test_relu/model.onnx", &a, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    assert_true(r->compile_reply->cached);
    ipuof_frame_header_free(r);
    close(fd2);
    close(fd);
    sim_host_tensor_fini(&x);
    sim_host_tensor_fini(&y);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

static void
test_iterations_replicas_modes(void **state)
{
    struct compile_args a = {.D = 4, .R = 2, .name = "relu-d4r2"};
    struct sim_host_tensor x = {0}, y = {0};
    Ipuof__Header *r;
    void *out;
    size_t out_len;
    int fd;
    uint32_t id;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    load_pb(NODE "test_relu/test_data_set_0/input_0.pb", &x);
    load_pb(NODE "test_relu/test_data_set_0/output_0.pb", &y);
    fd = session(2);
    r = compile_file(fd, NODE "test_relu/model.onnx", &a, NULL);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("compile: %s", r->error->message);
    assert_int_equal(r->compile_reply->n_memory, 2); /* one IPU per replica */
    assert_int_equal(r->compile_reply->inputs[0]->dims[0], 3 * 4 * 2);
    id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    r = run_tiled(fd, id, &x, "x", 8, &out, &out_len);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("run: %s", r->error->message);
    assert_int_equal(out_len, y.bytes * 8); /* All: every micro-batch of every replica */
    for (int k = 0; k < 8; k++)
        assert_memory_equal((uint8_t *)out + k * y.bytes, y.data, y.bytes);
    assert_int_equal(r->run_reply->outputs[0]->dims[0], 24);
    ipuof_frame_header_free(r);
    free(out);

    /* Sum over device iterations: 4 x relu(x) per replica, the batch kept. */
    a.kind = IPUOF__OUTPUT_KIND__OUTPUT_SUM;
    a.name = "relu-sum";
    r = compile_file(fd, NODE "test_relu/model.onnx", &a, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    r = run_tiled(fd, id, &x, "x", 8, &out, &out_len);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    assert_int_equal(out_len, y.bytes * 2);
    for (size_t i = 0; i < y.bytes / 4; i++)
        assert_float_equal(((float *)out)[i], 4 * ((float *)y.data)[i], 1e-5);
    ipuof_frame_header_free(r);
    free(out);

    /* An output mode naming no output is refused at compile time. */
    a.kind = IPUOF__OUTPUT_KIND__OUTPUT_FINAL;
    a.mode_output = "nope";
    r = compile_file(fd, NODE "test_relu/model.onnx", &a, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("bad output mode: %s\n", r->error->message);
    assert_non_null(strstr(r->error->message, "nope"));
    ipuof_frame_header_free(r);
    close(fd);
    sim_host_tensor_fini(&x);
    sim_host_tensor_fini(&y);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

static void
test_memory_in_status_and_chunks(void **state)
{
    struct compile_args a = {.D = 1, .R = 1, .name = "chunked", .chunk = 100};
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__StatusRequest sr = IPUOF__STATUS_REQUEST__INIT;
    Ipuof__FreeModelRequest fm = IPUOF__FREE_MODEL_REQUEST__INIT;
    int fd, eof;
    uint32_t id;

    (void)state;
    assert_int_equal(testd_start(&d, "[server]\nmax_payload_bytes = 4096\n"
                                     "max_output_bytes = 16MiB\n", NULL), 0);
    fd = session(1);
    r = compile_file(fd, NODE "test_conv_with_strides_padding/model.onnx", &a, NULL);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("compile: %s", r->error->message);
    id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);

    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &sr;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 5000, &eof);
    assert_non_null(r);
    assert_true(r->status_reply->ipus[0]->memory_used_bytes > 0);
    assert_string_equal(r->status_reply->ipus[0]->loaded, "chunked");
    assert_int_equal(r->status_reply->ipus[1]->memory_used_bytes, 0);
    ipuof_frame_header_free(r);

    fm.model_id = id;
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_FREE_MODEL;
    h.free_model = &fm;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 5000, &eof);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_FREE_MODEL_REPLY);
    ipuof_frame_header_free(r);
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &sr;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 5000, &eof);
    assert_int_equal(r->status_reply->ipus[0]->memory_used_bytes, 0);
    assert_string_equal(r->status_reply->ipus[0]->loaded, "");
    ipuof_frame_header_free(r);
    close(fd);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

static void
expect_compile_error(int fd, const void *bytes, size_t len, const struct compile_args *a,
                     int code, const char *needle)
{
    Ipuof__Header *r = compile_bytes(fd, bytes, len, a, NULL);

    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("%s: %s\n", ipuof_status_name((int)r->error->code), r->error->message);
    assert_int_equal(r->error->code, code);
    assert_non_null(strstr(r->error->message, needle));
    ipuof_frame_header_free(r);
}

static void
test_bad_models_and_options(void **state)
{
    struct compile_args a = {.D = 1, .R = 1};
    struct sim_host_tensor x = {0};
    size_t len;
    void *relu = NULL, *det = NULL, *out;
    char garbage[300];
    Ipuof__Header *r;
    int fd, fd0;
    uint32_t id;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    relu = read_file(NODE "test_relu/model.onnx", &len);
    assert_non_null(relu);
    fd0 = session(0); /* not attached */
    expect_compile_error(fd0, relu, len, &a, IPUOF_E_NOT_ATTACHED, "attach");
    close(fd0);

    fd = session(1);
    memset(garbage, 0x5a, sizeof garbage);
    expect_compile_error(fd, garbage, sizeof garbage, &a, IPUOF_E_INVAL, "");
    a.D = 0;
    expect_compile_error(fd, relu, len, &a, IPUOF_E_INVAL, "deviceIterations");
    a.D = 1;
    a.R = 2;
    expect_compile_error(fd, relu, len, &a, IPUOF_E_INVAL, "replication factor 2");
    a.R = 1;
    {
        size_t dl;
        det = read_file(NODE "test_det_2d/model.onnx", &dl);
        assert_non_null(det);
        expect_compile_error(fd, det, dl, &a, IPUOF_E_UNSUPPORTED, "Det");
    }

    /* A wrong input shape is refused naming the input and both shapes. */
    load_pb(NODE "test_relu/test_data_set_0/input_0.pb", &x);
    r = compile_bytes(fd, relu, len, &a, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    {
        struct sim_host_tensor wrong = x;
        wrong.dims[1] = 5;
        wrong.bytes = 3 * 5 * 5 * 4;
        wrong.data = calloc(1, wrong.bytes);
        r = run_tiled(fd, id, &wrong, "x", 1, &out, &len);
        free(wrong.data);
    }
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("wrong shape: %s\n", r->error->message);
    assert_int_equal(r->error->code, IPUOF_E_SHAPE);
    assert_non_null(strstr(r->error->message, "'x'"));
    ipuof_frame_header_free(r);
    free(out);
    /* The connection still works after a refused run. */
    r = run_tiled(fd, id, &x, "x", 1, &out, &len);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    ipuof_frame_header_free(r);
    free(out);
    /* Unknown model id. */
    r = run_tiled(fd, id + 100, &x, "x", 1, &out, &len);
    assert_int_equal(r->error->code, IPUOF_E_NOTFOUND);
    ipuof_frame_header_free(r);
    free(out);
    close(fd);
    free(relu);
    free(det);
    sim_host_tensor_fini(&x);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* Clients that disappear during an upload or a run leave nothing behind. */
static void
test_vanishing_clients(void **state)
{
    struct compile_args a = {.D = 50, .R = 1, .name = "conv"};
    struct sim_host_tensor x = {0};
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__CompileRequest c = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tip = &ti;
    int64_t dims[4];
    uint8_t *buf;
    int fd, eof;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    /* Upload cut short. */
    fd = session(1);
    c.model_bytes = 1 << 20;
    c.device_iterations = 1;
    c.replicas = 1;
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &c;
    assert_int_equal(raw_send_payload(fd, &h, "partial", 7), 0);
    close(fd);

    /* Run input cut short, then a whole run whose client leaves before the answer. */
    load_pb(NODE "test_conv_with_strides_padding/test_data_set_0/input_0.pb", &x);
    for (int round = 0; round < 2; round++) {
        uint32_t id;
        fd = session(1);
        r = compile_file(fd, NODE "test_conv_with_strides_padding/model.onnx", &a, NULL);
        if (r->body_case == IPUOF__HEADER__BODY_ERROR)
            fail_msg("compile: %s", r->error->message);
        id = r->compile_reply->model_id;
        ipuof_frame_header_free(r);
        memcpy(dims, x.dims, sizeof dims);
        dims[0] *= 50;
        ti.name = (char *)"x";
        ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
        ti.n_dims = 4;
        ti.dims = dims;
        ti.bytes = x.bytes * 50;
        rq.model_id = id;
        rq.n_inputs = 1;
        rq.inputs = &tip;
        h.request_id = next_id++;
        h.body_case = IPUOF__HEADER__BODY_RUN;
        h.run = &rq;
        buf = calloc(50, x.bytes);
        assert_int_equal(raw_send_payload(fd, &h, buf, round == 0 ? 100 : x.bytes * 50), 0);
        free(buf);
        close(fd);
    }
    /* The IPU is free again for someone else, and the daemon still answers. */
    for (int i = 0; i < 100; i++) {
        fd = session(0);
        r = NULL;
        {
            Ipuof__Header q = IPUOF__HEADER__INIT;
            Ipuof__AttachRequest at = IPUOF__ATTACH_REQUEST__INIT;
            at.num_ipus = 4;
            q.request_id = next_id++;
            q.body_case = IPUOF__HEADER__BODY_ATTACH;
            q.attach = &at;
            assert_int_equal(raw_send(fd, &q), 0);
            r = raw_recv(fd, 5000, &eof);
        }
        assert_non_null(r);
        close(fd);
        if (r->body_case == IPUOF__HEADER__BODY_ATTACH_REPLY) {
            ipuof_frame_header_free(r);
            break;
        }
        ipuof_frame_header_free(r);
        usleep(50000);
    }
    sim_host_tensor_fini(&x);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* A run whose last payload bytes (fewer than a frame head) arrive late is still answered. */
static void
test_payload_tail_arrives_late(void **state)
{
    struct compile_args a = {.D = 1, .R = 1, .name = "relu"};
    struct sim_host_tensor x = {0};
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tip = &ti;
    int64_t dims[3];
    void *out;
    size_t out_len;
    int fd;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    load_pb(NODE "test_relu/test_data_set_0/input_0.pb", &x);
    fd = session(1);
    r = compile_file(fd, NODE "test_relu/model.onnx", &a, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    rq.model_id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    for (int i = 0; i < 3; i++)
        dims[i] = x.dims[i];
    ti.name = (char *)"x";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 3;
    ti.dims = dims;
    ti.bytes = x.bytes;
    rq.n_inputs = 1;
    rq.inputs = &tip;
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    {
        uint8_t *buf;
        size_t len;
        assert_int_equal(ipuof_frame_pack(&h, (uint32_t)x.bytes, &buf, &len), IPUOF_OK);
        assert_int_equal(send(fd, buf, len, 0), (ssize_t)len);
        free(buf);
    }
    assert_int_equal(send(fd, x.data, x.bytes - 8, 0), (ssize_t)(x.bytes - 8));
    usleep(200000);
    assert_int_equal(send(fd, (uint8_t *)x.data + x.bytes - 8, 8, 0), 8);
    r = raw_recv_payload(fd, 5000, &out, &out_len);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    ipuof_frame_header_free(r);
    free(out);
    close(fd);
    sim_host_tensor_fini(&x);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* A model that takes seconds per call: a chain of 512x512 MatMuls on a [256, 512] input. */
static void *
slow_model(size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t dx[2] = {256, 512}, dw[2] = {512, 512};
    float *w = calloc(512 * 512, sizeof *w);
    char in[16], out[16];
    void *bytes = NULL;

    assert_non_null(w);
    for (int i = 0; i < 512; i++)
        w[i * 512 + i] = 1.0f;
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_initializer(b, "w", IPUOF_DTYPE_FLOAT, 2, dw, w);
    for (int k = 0; k < 40; k++) {
        snprintf(in, sizeof in, k ? "h%d" : "x", k);
        snprintf(out, sizeof out, k == 39 ? "y" : "h%d", k + 1);
        char ins[40];
        snprintf(ins, sizeof ins, "%s,w", in);
        sim_ob_node(b, "MatMul", NULL, ins, out);
    }
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    free(w);
    return bytes;
}

/* While one client's run is in flight, others are served; a forced reset interrupts it. */
static void
test_long_run_status_and_reset(void **state)
{
    struct compile_args a = {.D = 200, .R = 1, .name = "slow"};
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tip = &ti;
    Ipuof__StatusRequest sr = IPUOF__STATUS_REQUEST__INIT;
    int64_t dims[2] = {256 * 200, 512};
    size_t len, in_bytes = (size_t)256 * 200 * 512 * 4;
    void *model = slow_model(&len), *buf;
    struct timespec t0, t1;
    int fd, other, eof, got_notice = 0;
    long ms;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = session(1);
    r = compile_bytes(fd, model, len, &a, NULL);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("compile: %s", r->error->message);
    rq.model_id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    free(model);

    ti.name = (char *)"x";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = in_bytes;
    rq.n_inputs = 1;
    rq.inputs = &tip;
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    buf = calloc(1, in_bytes);
    assert_int_equal(raw_send_payload(fd, &h, buf, in_bytes), 0);
    free(buf);
    usleep(300000); /* the run is under way: 8000 MatMuls of 256x512x512 */

    other = session(0);
    h.request_id = next_id++;
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &sr;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(raw_send(other, &h), 0);
    r = raw_recv(other, 5000, &eof);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(r);
    assert_string_equal(r->status_reply->ipus[0]->loaded, "slow");
    ipuof_frame_header_free(r);
    ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    print_message("status answered in %ld ms during the run\n", ms);
    assert_true(ms < 2000);
    close(other);

    {
        ipuof_client *ac = ipuof_client_new();
        size_t n = 0;
        assert_int_equal(ipuof_client_connect(ac, d.admin_addr), IPUOF_OK);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(ipuof_reset(ac, IPUOF_RESET_ALL, 0, NULL, 1, &n), IPUOF_OK);
        ipuof_client_free(ac);
    }
    /* The runner hears of the reset (a notice) and its run ends with an error, promptly. */
    for (int k = 0; k < 3; k++) {
        r = raw_recv(fd, 10000, &eof);
        assert_non_null(r);
        if (r->body_case == IPUOF__HEADER__BODY_NOTICE) {
            got_notice = 1;
            ipuof_frame_header_free(r);
            continue;
        }
        break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(got_notice);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_int_equal(r->error->code, IPUOF_E_DEVICE_RESET);
    ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    print_message("run interrupted %ld ms after the reset: %s\n", ms, r->error->message);
    ipuof_frame_header_free(r);
    close(fd);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_relu_runs_and_caches, teardown),
        cmocka_unit_test_teardown(test_iterations_replicas_modes, teardown),
        cmocka_unit_test_teardown(test_memory_in_status_and_chunks, teardown),
        cmocka_unit_test_teardown(test_bad_models_and_options, teardown),
        cmocka_unit_test_teardown(test_vanishing_clients, teardown),
        cmocka_unit_test_teardown(test_long_run_status_and_reset, teardown),
        cmocka_unit_test_teardown(test_payload_tail_arrives_late, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("models", tests, NULL, NULL);
}
