/*
 * test_training.c — training on a real daemon at the protocol level: a small MLP with a
 * SoftmaxCrossEntropyLoss trained with AdamW; the loss goes down; weights are read,
 * written and copied; the trained model is saved as ONNX and compiles again; an inference
 * model made from the training model inside the daemon gives the trained predictions;
 * bad training options get clear errors.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

#define B 16
#define NIN 8
#define NHID 16
#define NCLS 4

static struct testd d;
static uint64_t next_id = 1000;

static int
teardown(void **state)
{
    (void)state;
    return testd_reset(&d);
}

/* x [B,8] -> Gemm 8x16 -> Relu -> Gemm 16x4 = logits; loss = SCE(logits, labels). */
static void *
mlp(size_t *len)
{
    static float w1[NHID * NIN], b1[NHID], w2[NCLS * NHID], b2[NCLS];
    int64_t dx[2] = {B, NIN}, dl[1] = {B}, dw1[2] = {NHID, NIN}, db1[1] = {NHID};
    int64_t dw2[2] = {NCLS, NHID}, db2[1] = {NCLS};
    struct sim_ob *b = sim_ob_new(13);
    unsigned seed = 3;
    void *bytes = NULL;

    for (int i = 0; i < NHID * NIN; i++)
        w1[i] = ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f) * 0.7f;
    for (int i = 0; i < NCLS * NHID; i++)
        w2[i] = ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f) * 0.5f;
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_input(b, "labels", IPUOF_DTYPE_INT64, 1, dl);
    sim_ob_initializer(b, "w1", IPUOF_DTYPE_FLOAT, 2, dw1, w1);
    sim_ob_initializer(b, "b1", IPUOF_DTYPE_FLOAT, 1, db1, b1);
    sim_ob_initializer(b, "w2", IPUOF_DTYPE_FLOAT, 2, dw2, w2);
    sim_ob_initializer(b, "b2", IPUOF_DTYPE_FLOAT, 1, db2, b2);
    sim_ob_node(b, "Gemm", "fc1", "x,w1,b1", "h");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Relu", "relu", "h", "hr");
    sim_ob_node(b, "Gemm", "fc2", "hr,w2,b2", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "sce", "logits,labels", "loss");
    sim_ob_attr_str(b, "reduction", "mean");
    sim_ob_output(b, "logits", IPUOF_DTYPE_FLOAT);
    sim_ob_output_rank(b, "loss", IPUOF_DTYPE_FLOAT, 0);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    return bytes;
}

/* A separable problem: the label is the argmax of the first 4 features. */
static void
make_batch(unsigned seed, int n, float *x, int64_t *y)
{
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int j = 0; j < NIN; j++)
            x[i * NIN + j] = (float)rand_r(&seed) / (float)RAND_MAX * 2.0f - 1.0f;
        for (int j = 1; j < NCLS; j++)
            if (x[i * NIN + j] > x[i * NIN + best])
                best = j;
        y[i] = best;
    }
}

static int
session(void)
{
    int fd = raw_session(d.port, 1);

    assert_true(fd >= 0);
    return fd;
}

/* Sends h (with an optional payload) and returns the answer, skipping progress events. */
static Ipuof__Header *
call(int fd, Ipuof__Header *h, const void *payload, size_t plen, void **out, size_t *olen)
{
    Ipuof__Header *r;
    void *p;
    size_t pl;

    h->request_id = next_id++;
    assert_int_equal(raw_send_payload(fd, h, payload, plen), 0);
    for (;;) {
        r = raw_recv_payload(fd, 30000, &p, &pl);
        assert_non_null(r);
        if (r->body_case != IPUOF__HEADER__BODY_COMPILE_PROGRESS)
            break;
        ipuof_frame_header_free(r);
        free(p);
    }
    if (out != NULL) {
        *out = p;
        *olen = pl;
    } else {
        free(p);
    }
    return r;
}

static Ipuof__Header *
compile_training(int fd, const void *bytes, size_t len, const char *loss, unsigned accum,
                 float lr)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest c = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__Optimizer o = IPUOF__OPTIMIZER__INIT;

    c.model_bytes = len;
    c.name = (char *)"mlp";
    c.device_iterations = 1;
    c.replicas = 1;
    c.loss = (char *)loss;
    c.gradient_accumulation = accum;
    o.kind = IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW;
    o.lr = lr;
    o.weight_decay = 0.01f;
    o.beta1 = 0.9f;
    o.beta2 = 0.999f;
    o.eps = 1e-8f;
    c.optimizer = &o;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &c;
    return call(fd, &h, bytes, len, NULL, NULL);
}

/* One run of model id over x/y (n samples); returns the first output's values via *out. */
static Ipuof__Header *
run(int fd, uint32_t id, const float *x, const int64_t *y, int n, void **out, size_t *olen)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo tx = IPUOF__TENSOR_INFO__INIT, ty = IPUOF__TENSOR_INFO__INIT;
    Ipuof__TensorInfo *tp[2] = {&tx, &ty};
    int64_t dx[2] = {n, NIN}, dy[1] = {n};
    size_t bx = (size_t)n * NIN * 4, by = (size_t)n * 8;
    uint8_t *buf = malloc(bx + by);
    Ipuof__Header *r;

    memcpy(buf, x, bx);
    memcpy(buf + bx, y, by);
    tx.name = (char *)"x";
    tx.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    tx.n_dims = 2;
    tx.dims = dx;
    tx.bytes = bx;
    ty.name = (char *)"labels";
    ty.dtype = IPUOF__DTYPE__DTYPE_INT64;
    ty.n_dims = 1;
    ty.dims = dy;
    ty.bytes = by;
    rq.model_id = id;
    rq.n_inputs = 2;
    rq.inputs = tp;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    r = call(fd, &h, buf, bx + by, out, olen);
    free(buf);
    return r;
}

/* The value of output name in a run reply's payload. */
static const float *
output(const Ipuof__Header *r, const void *payload, const char *name)
{
    size_t off = 0;

    for (size_t i = 0; i < r->run_reply->n_outputs; i++) {
        if (strcmp(r->run_reply->outputs[i]->name, name) == 0)
            return (const float *)((const uint8_t *)payload + off);
        off += r->run_reply->outputs[i]->bytes;
    }
    fail_msg("no output %s", name);
    return NULL;
}

/* 150 AdamW steps of training model tid on fresh batches: the loss halves at least. */
static void
train_steps(int fd, uint32_t tid)
{
    float x[B * NIN];
    int64_t y[B];
    size_t olen;
    void *out;
    Ipuof__Header *r;
    float first = 0, last = 0;

    for (int step = 0; step < 150; step++) {
        make_batch(100u + (unsigned)step, B, x, y);
        r = run(fd, tid, x, y, B, &out, &olen);
        if (r->body_case == IPUOF__HEADER__BODY_ERROR)
            fail_msg("run: %s", r->error->message);
        last = *output(r, out, "loss");
        if (step == 0)
            first = last;
        ipuof_frame_header_free(r);
        free(out);
    }
    print_message("loss %.4f -> %.4f after 150 AdamW steps\n", first, last);
    assert_true(last < first * 0.5f);
}

/* setOptimizer: lr 0 (freezing the weights) is taken, a beta1 of 1.5 refused. */
static void
set_optimizer_checks(int fd, uint32_t tid)
{
    Ipuof__Header *r, h = IPUOF__HEADER__INIT;
    Ipuof__SetOptimizerRequest so = IPUOF__SET_OPTIMIZER_REQUEST__INIT;
    Ipuof__Optimizer opt = IPUOF__OPTIMIZER__INIT;

    opt.kind = IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW;
    opt.lr = 0;
    opt.weight_decay = 0;
    opt.beta1 = 0.9f;
    opt.beta2 = 0.999f;
    opt.eps = 1e-8f;
    so.model_id = tid;
    so.optimizer = &opt;
    h.body_case = IPUOF__HEADER__BODY_SET_OPTIMIZER;
    h.set_optimizer = &so;
    r = call(fd, &h, NULL, 0, NULL, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY);
    ipuof_frame_header_free(r);
    opt.beta1 = 1.5f; /* out of range */
    r = call(fd, &h, NULL, 0, NULL, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("bad optimizer: %s\n", r->error->message);
    ipuof_frame_header_free(r);
}

/* Weights: read w1, write it back doubled, read the doubled values, restore it. */
static void
weights_roundtrip(int fd, uint32_t tid)
{
    float w1[NHID * NIN], w1b[NHID * NIN];
    size_t olen;
    void *out;
    Ipuof__Header *r, h = IPUOF__HEADER__INIT;
    Ipuof__ReadWeightsRequest rw = IPUOF__READ_WEIGHTS_REQUEST__INIT;
    Ipuof__WriteWeightsRequest ww = IPUOF__WRITE_WEIGHTS_REQUEST__INIT;
    Ipuof__TensorInfo wti = IPUOF__TENSOR_INFO__INIT, *wtp = &wti;
    char *names[1] = {(char *)"w1"};
    int64_t dw1[2] = {NHID, NIN};

    rw.model_id = tid;
    rw.n_names = 1;
    rw.names = names;
    h.body_case = IPUOF__HEADER__BODY_READ_WEIGHTS;
    h.read_weights = &rw;
    r = call(fd, &h, NULL, 0, &out, &olen);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_READ_WEIGHTS_REPLY);
    assert_int_equal(olen, sizeof w1);
    memcpy(w1, out, sizeof w1);
    ipuof_frame_header_free(r);
    free(out);
    for (int i = 0; i < NHID * NIN; i++)
        w1b[i] = w1[i] * 2;
    wti.name = (char *)"w1";
    wti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    wti.n_dims = 2;
    wti.dims = dw1;
    wti.bytes = sizeof w1b;
    ww.model_id = tid;
    ww.n_weights = 1;
    ww.weights = &wtp;
    h.body_case = IPUOF__HEADER__BODY_WRITE_WEIGHTS;
    h.write_weights = &ww;
    r = call(fd, &h, w1b, sizeof w1b, NULL, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_WRITE_WEIGHTS_REPLY);
    ipuof_frame_header_free(r);
    h.body_case = IPUOF__HEADER__BODY_READ_WEIGHTS;
    h.read_weights = &rw;
    r = call(fd, &h, NULL, 0, &out, &olen);
    assert_memory_equal(out, w1b, sizeof w1b);
    ipuof_frame_header_free(r);
    free(out);
    h.body_case = IPUOF__HEADER__BODY_WRITE_WEIGHTS;
    h.write_weights = &ww;
    r = call(fd, &h, w1, sizeof w1, NULL, NULL); /* restore */
    ipuof_frame_header_free(r);
}

/* "gradient:<w>": the last step's gradient, named so in the reply; the daemon checks
 * the weight (the client's own check bypassed here). */
static void
gradient_reads(int fd, uint32_t tid)
{
    size_t olen;
    void *out;
    Ipuof__Header *r, h = IPUOF__HEADER__INIT;
    Ipuof__ReadWeightsRequest rw = IPUOF__READ_WEIGHTS_REQUEST__INIT;
    char *names[1];

    rw.model_id = tid;
    rw.n_names = 1;
    rw.names = names;

    names[0] = (char *)"gradient:w1";
    h.body_case = IPUOF__HEADER__BODY_READ_WEIGHTS;
    h.read_weights = &rw;
    r = call(fd, &h, NULL, 0, &out, &olen);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_READ_WEIGHTS_REPLY);
    assert_string_equal(r->read_weights_reply->weights[0]->name, "gradient:w1");
    assert_int_equal(olen, NHID * NIN * sizeof(float));
    {
        float gsum = 0;
        for (int i = 0; i < NHID * NIN; i++)
            gsum += fabsf(((const float *)out)[i]);
        assert_true(gsum > 0);
    }
    ipuof_frame_header_free(r);
    free(out);
    names[0] = (char *)"gradient:nope";
    r = call(fd, &h, NULL, 0, NULL, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_non_null(strstr(r->error->message, "no weight called 'nope'"));
    print_message("gradient of no weight: %s\n", r->error->message);
    ipuof_frame_header_free(r);
    names[0] = (char *)"gradient:";
    r = call(fd, &h, NULL, 0, NULL, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    ipuof_frame_header_free(r);
}

/* An inference model from training model tid, inside the daemon: it classifies 3 in 4 of
 * a new batch right; the training model's weights copy into it. */
static void
inference_from_training(int fd, uint32_t tid)
{
    float xt[B * NIN];
    int64_t yt[B];
    size_t olen;
    void *out;
    Ipuof__Header *r, h = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest ci = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__CopyWeightsRequest cw = IPUOF__COPY_WEIGHTS_REQUEST__INIT;
    uint32_t iid;
    int correct = 0;

    ci.device_iterations = 1;
    ci.replicas = 1;
    ci.name = (char *)"mlp-infer";
    ci.from_model_id = tid;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &ci;
    r = call(fd, &h, NULL, 0, NULL, NULL);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("inference_from: %s", r->error->message);
    assert_false(r->compile_reply->training);
    iid = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    make_batch(9999, B, xt, yt);
    r = run(fd, iid, xt, yt, B, &out, &olen);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("inference run: %s", r->error->message);
    {
        const float *logits = output(r, out, "logits");
        for (int i = 0; i < B; i++) {
            int best = 0;
            for (int j = 1; j < NCLS; j++)
                if (logits[i * NCLS + j] > logits[i * NCLS + best])
                    best = j;
            correct += best == yt[i];
        }
    }
    print_message("inference model: %d of %d correct\n", correct, B);
    assert_true(correct >= B * 3 / 4);
    ipuof_frame_header_free(r);
    free(out);
    cw.dst_model_id = iid;
    cw.src_model_id = tid;
    h.body_case = IPUOF__HEADER__BODY_COPY_WEIGHTS;
    h.copy_weights = &cw;
    r = call(fd, &h, NULL, 0, NULL, NULL);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COPY_WEIGHTS_REPLY);
    ipuof_frame_header_free(r);
}

/* Save training model tid as ONNX and compile the saved model again (for inference). */
static void
save_and_compile_again(int fd, uint32_t tid)
{
    size_t olen;
    void *onnx;
    Ipuof__Header *r, h = IPUOF__HEADER__INIT;
    Ipuof__SaveModelRequest sm = IPUOF__SAVE_MODEL_REQUEST__INIT;

    sm.model_id = tid;
    h.body_case = IPUOF__HEADER__BODY_SAVE_MODEL;
    h.save_model = &sm;
    r = call(fd, &h, NULL, 0, &onnx, &olen);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_SAVE_MODEL_REPLY);
    assert_int_equal(r->save_model_reply->bytes, olen);
    ipuof_frame_header_free(r);
    {
        Ipuof__CompileRequest c2 = IPUOF__COMPILE_REQUEST__INIT;
        c2.model_bytes = olen;
        c2.device_iterations = 1;
        c2.replicas = 1;
        h.body_case = IPUOF__HEADER__BODY_COMPILE;
        h.compile = &c2;
        r = call(fd, &h, onnx, olen, NULL, NULL);
        if (r->body_case == IPUOF__HEADER__BODY_ERROR)
            fail_msg("saved model: %s", r->error->message);
        ipuof_frame_header_free(r);
    }
    free(onnx);
}

static void
test_train_save_infer(void **state)
{
    size_t len;
    void *model = mlp(&len);
    Ipuof__Header *r;
    uint32_t tid;
    int fd;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = session();
    r = compile_training(fd, model, len, "loss", 1, 0.01f);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("compile: %s", r->error->message);
    assert_true(r->compile_reply->training);
    assert_true(r->compile_reply->n_weights >= 4);
    assert_true(r->compile_reply->memory[0]->optimizer_bytes > 0);
    tid = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    train_steps(fd, tid);
    set_optimizer_checks(fd, tid);
    weights_roundtrip(fd, tid);
    gradient_reads(fd, tid);
    inference_from_training(fd, tid);
    save_and_compile_again(fd, tid);
    free(model);
    close(fd);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

static void
expect_error(int fd, const void *model, size_t len, const char *loss, unsigned accum,
             float lr, const char *needle)
{
    Ipuof__Header *r = compile_training(fd, model, len, loss, accum, lr);

    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("%s: %s\n", ipuof_status_name((int)r->error->code), r->error->message);
    assert_non_null(strstr(r->error->message, needle));
    ipuof_frame_header_free(r);
}

static void
test_bad_training_options(void **state)
{
    size_t len;
    void *model = mlp(&len);
    int fd;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = session();
    expect_error(fd, model, len, "nope", 1, 0.01f, "nope");
    expect_error(fd, model, len, "logits", 1, 0.01f, "logits");
    expect_error(fd, model, len, "loss", 0, 0.01f, "gradientAccumulation");
    expect_error(fd, model, len, "loss", 1, -1.0f, "lr");
    {
        Ipuof__Header h = IPUOF__HEADER__INIT, *r;
        Ipuof__CompileRequest c = IPUOF__COMPILE_REQUEST__INIT;
        c.model_bytes = len;
        c.device_iterations = 1;
        c.gradient_accumulation = 4; /* but no loss: an inference model */
        h.body_case = IPUOF__HEADER__BODY_COMPILE;
        h.compile = &c;
        r = call(fd, &h, model, len, NULL, NULL);
        assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
        assert_non_null(strstr(r->error->message, "inference"));
        ipuof_frame_header_free(r);
    }
    free(model);
    close(fd);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_train_save_infer, teardown),
        cmocka_unit_test_teardown(test_bad_training_options, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests_name("training", tests, NULL, NULL);
}
