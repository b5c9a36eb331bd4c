/*
 * test_client_train.c — the training API of libipuof-client against a fake daemon.
 *
 * The fake daemon is the one of fakesrv.h: a thread that accepts one connection on
 * 127.0.0.1:0, reads frames with the codec and answers with a script. It records what went
 * wrong in struct fake, and the test checks that after joining it. Each script step that
 * saw the frame it expected, with the fields and payload it expected, counts in f.steps.
 *
 * Covered: torch.optim's defaults; a training compile carries loss, optimizer, gradient
 * accumulation, reduction, seed and frozen weights, and the reply's training fields and
 * weight list are copied; an inference model made from it sends from_model_id and no model
 * bytes; setOptimizer and the daemon's refusal of it; a weight read lands in the caller's
 * buffer, a write sends the caller's bytes with the weight's description; local NOTFOUND /
 * SHAPE checks; a read whose announced size differs from the buffer (IPUOF_E_SHAPE, the
 * connection stays usable); copy; save_onnx writes the file and save_onnx_buffer refuses a
 * reply whose sizes disagree; the batch arithmetic of a training model's input names the
 * gradient accumulation; argument checks without a daemon; the optimizer on the options
 * handle (kind, parameters, groups, weights; each refusal's sentence; the struct call's
 * copy). The last tests train a small model on a real ipuofd (IPUOFD_BIN): through the
 * struct calls, and through the handle's optimizer setters against the same optimizer as a
 * struct (the same weights, bit for bit, a group at lr 0 leaving its weight as it was).
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

#include "../../client/wire/client_internal.h"
#include "../../client/model/model_internal.h"
#include "fakesrv.h"
#include "frame.h"
#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

#define MODEL_LEN 100
#define SAVED_LEN 3000

/* ---- the fake daemon ------------------------------------------------------------------ */

/* The model bytes the tests upload and the ONNX bytes the fake saves: patterns. */
static void
fill(uint8_t *buf, size_t len, unsigned salt)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 31 + salt);
}

/* A tensor as the scripts describe it. */
struct desc {
    const char *name;
    int dtype;
    int rank;
    int64_t dims[8];
    int step_rank;
    int64_t step[8];
};

/* Fills ti (pointing into d) from d. */
static void
desc_info(const struct desc *d, Ipuof__TensorInfo *ti)
{
    uint64_t n = ipuof_dtype_size(d->dtype);

    for (int i = 0; i < d->rank; i++)
        n *= (uint64_t)d->dims[i];
    ipuof__tensor_info__init(ti);
    ti->name = (char *)d->name;
    ti->dtype = (Ipuof__DType)d->dtype;
    ti->n_dims = (size_t)d->rank;
    ti->dims = (int64_t *)d->dims;
    ti->n_step_dims = (size_t)d->step_rank;
    ti->step_dims = (int64_t *)d->step;
    ti->bytes = n;
}

/* Training model 7: x float [24, 5] and y int64 [24] (micro-batch 4 x 2 device iterations
 * x 3 accumulation steps x 1 replica), loss float [6] (All); weights w [5, 3] trainable and
 * b [3] frozen. Inference model 8: x [20, 5] (4 x 5 device iterations), logits [20, 3]. */
static const struct desc t7_io[] = {
    {"x", IPUOF_DTYPE_FLOAT, 2, {24, 5}, 2, {4, 5}},
    {"y", IPUOF_DTYPE_INT64, 1, {24}, 1, {4}},
    {"loss", IPUOF_DTYPE_FLOAT, 1, {6}, 0, {0}},
};
static const struct desc t7_weights[] = {
    {"w", IPUOF_DTYPE_FLOAT, 2, {5, 3}, 2, {5, 3}},
    {"b", IPUOF_DTYPE_FLOAT, 1, {3}, 1, {3}},
};
static const struct desc i8_io[] = {
    {"x", IPUOF_DTYPE_FLOAT, 2, {20, 5}, 2, {4, 5}},
    {"logits", IPUOF_DTYPE_FLOAT, 2, {20, 3}, 2, {4, 3}},
};

/* Sends a CompileReply: io[0..nin) inputs, io[nin..nio) outputs, weights w[0..nw) whose
 * kinds are trainable but the last (frozen). */
static void
fs_compile_reply(struct fake *f, int fd, uint64_t id, uint32_t model_id, int training,
                 unsigned di, unsigned acc, const struct desc *io, size_t nin, size_t nio,
                 const struct desc *w, size_t nw)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileReply cr = IPUOF__COMPILE_REPLY__INIT;
    Ipuof__TensorInfo ti[8], *tp[8], wti[4];
    Ipuof__WeightInfo wi[4], *wp[4];

    for (size_t i = 0; i < nio; i++) {
        desc_info(&io[i], &ti[i]);
        tp[i] = &ti[i];
    }
    for (size_t i = 0; i < nw; i++) {
        ipuof__weight_info__init(&wi[i]);
        desc_info(&w[i], &wti[i]);
        wti[i].n_step_dims = 0;
        wi[i].tensor = &wti[i];
        wi[i].kind = i + 1 < nw ? IPUOF__WEIGHT_KIND__WEIGHT_TRAINABLE
                                : IPUOF__WEIGHT_KIND__WEIGHT_FROZEN;
        wp[i] = &wi[i];
    }
    cr.model_id = model_id;
    cr.n_inputs = nin;
    cr.inputs = tp;
    cr.n_outputs = nio - nin;
    cr.outputs = tp + nin;
    cr.compile_us = 99;
    cr.device_iterations = di;
    cr.replicas = 1;
    cr.micro_batch = 4;
    cr.training = training;
    cr.gradient_accumulation = acc;
    cr.n_weights = nw;
    cr.weights = wp;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE_REPLY;
    h.compile_reply = &cr;
    fs_send(f, fd, &h, NULL, 0);
}

/* Answers request id with an empty reply of body bc (the *_reply messages without fields). */
static void
fs_empty_reply(struct fake *f, int fd, uint64_t id, Ipuof__Header__BodyCase bc)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__SetOptimizerReply so = IPUOF__SET_OPTIMIZER_REPLY__INIT;
    Ipuof__WriteWeightsReply ww = IPUOF__WRITE_WEIGHTS_REPLY__INIT;
    Ipuof__CopyWeightsReply cw = IPUOF__COPY_WEIGHTS_REPLY__INIT;

    h.request_id = id;
    h.body_case = bc;
    if (bc == IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY)
        h.set_optimizer_reply = &so;
    else if (bc == IPUOF__HEADER__BODY_WRITE_WEIGHTS_REPLY)
        h.write_weights_reply = &ww;
    else
        h.copy_weights_reply = &cw;
    fs_send(f, fd, &h, NULL, 0);
}

/* The values of weight w (15 floats) and b (3 floats) as the fake holds them. */
static void
weight_values(float *w, float *b)
{
    for (int i = 0; i < 15; i++)
        w[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 3; i++)
        b[i] = 1.5f + (float)i;
}

/* Reads a ReadWeightsRequest for model_id and weight name and answers with the weight d,
 * whose bytes are data. */
static void
fs_read_weight(struct fake *f, int fd, uint32_t model_id, const struct desc *d,
               const void *data)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_READ_WEIGHTS);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__ReadWeightsReply rr = IPUOF__READ_WEIGHTS_REPLY__INIT;
    Ipuof__TensorInfo ti, *tp = &ti;

    if (req == NULL)
        return;
    if (req->read_weights->model_id == model_id && req->read_weights->n_names == 1 &&
        strcmp(req->read_weights->names[0], d->name) == 0 && f->payload_len == 0)
        f->steps++;
    else
        fake_fail(f, "server: read request fields");
    desc_info(d, &ti);
    ti.n_step_dims = 0;
    rr.n_weights = 1;
    rr.weights = &tp;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_READ_WEIGHTS_REPLY;
    h.read_weights_reply = &rr;
    fs_send(f, fd, &h, data, (uint32_t)ti.bytes);
    ipuof_frame_header_free(req);
}

/* Reads a SaveModelRequest for model_id and answers announcing announced bytes with a
 * payload of SAVED_LEN pattern bytes. */
static void
fs_save(struct fake *f, int fd, uint32_t model_id, uint64_t announced)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_SAVE_MODEL);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__SaveModelReply sr = IPUOF__SAVE_MODEL_REPLY__INIT;
    uint8_t saved[SAVED_LEN];

    if (req == NULL)
        return;
    if (req->save_model->model_id == model_id)
        f->steps++;
    fill(saved, sizeof saved, 3);
    sr.bytes = announced;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_SAVE_MODEL_REPLY;
    h.save_model_reply = &sr;
    fs_send(f, fd, &h, saved, sizeof saved);
    ipuof_frame_header_free(req);
}

/* The training compile: every training field as the test set them. */
static void
fs_training_compile(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    const Ipuof__CompileRequest *cr;
    const Ipuof__Optimizer *o;
    uint8_t want[MODEL_LEN];

    if (req == NULL)
        return;
    cr = req->compile;
    o = cr->optimizer;
    fill(want, sizeof want, 7);
    if (cr->model_bytes == MODEL_LEN && f->payload_len == MODEL_LEN &&
        memcmp(f->payload, want, MODEL_LEN) == 0 && strcmp(cr->name, "unit-train") == 0 &&
        cr->device_iterations == 2 && cr->replicas == 1 && cr->micro_batch == 4 &&
        strcmp(cr->loss, "loss") == 0 && o != NULL &&
        o->kind == IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW &&
        o->lr == 0.002f && o->weight_decay == 0.01f && o->beta1 == 0.9f &&
        o->beta2 == 0.999f && o->eps == 1e-8f && o->momentum == 0.0f &&
        cr->gradient_accumulation == 3 &&
        cr->accumulation_reduction == IPUOF__REDUCTION_TYPE__REDUCTION_SUM && cr->seed == 42 &&
        cr->n_frozen_weights == 1 && strcmp(cr->frozen_weights[0], "b") == 0 &&
        cr->from_model_id == 0 && cr->n_output_modes == 1 &&
        cr->output_modes[0]->kind == IPUOF__OUTPUT_KIND__OUTPUT_ALL)
        f->steps++;
    else
        fake_fail(f, "server: training compile request fields");
    fs_compile_reply(f, fd, req->request_id, 7, 1, 2, 3, t7_io, 2, 3, t7_weights, 2);
    ipuof_frame_header_free(req);
}

/* The inference model made from model 7: no model bytes, from_model_id 7, the training
 * model's micro-batch and name. */
static void
fs_inference_from(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    const Ipuof__CompileRequest *cr;

    if (req == NULL)
        return;
    cr = req->compile;
    if (cr->model_bytes == 0 && f->payload_len == 0 && cr->from_model_id == 7 &&
        cr->micro_batch == 4 && cr->device_iterations == 5 &&
        strcmp(cr->name, "unit-train") == 0 && (cr->loss == NULL || cr->loss[0] == '\0') &&
        cr->optimizer == NULL && cr->gradient_accumulation == 0)
        f->steps++;
    else
        fake_fail(f, "server: inference-from compile request fields");
    fs_compile_reply(f, fd, req->request_id, 8, 0, 5, 1, i8_io, 1, 2, NULL, 0);
    ipuof_frame_header_free(req);
}

/* Two SetOptimizer requests: the first answered, the second refused. */
static void
fs_set_optimizer(struct fake *f, int fd)
{
    for (int i = 0; i < 2; i++) {
        Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_SET_OPTIMIZER);
        const Ipuof__Optimizer *o;

        if (req == NULL)
            return;
        o = req->set_optimizer->optimizer;
        if (req->set_optimizer->model_id == 7 && o != NULL &&
            o->kind == (i == 0 ? IPUOF__OPTIMIZER_KIND__OPTIMIZER_ADAMW
                               : IPUOF__OPTIMIZER_KIND__OPTIMIZER_SGD) &&
            o->lr == (i == 0 ? 0.0005f : 0.001f))
            f->steps++;
        else
            fake_fail(f, "server: set optimizer fields");
        if (i == 0)
            fs_empty_reply(f, fd, req->request_id, IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY);
        else
            fs_send_error(f, fd, req->request_id, IPUOF_E_INVAL, "compiler",
                          "the optimizer kind cannot change from AdamW to SGD");
        ipuof_frame_header_free(req);
    }
}

/* A WriteWeights of b = {10, 20, 30} to model 7. */
static void
fs_write_weight(struct fake *f, int fd)
{
    static const float want[3] = {10, 20, 30};
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_WRITE_WEIGHTS);
    const Ipuof__WriteWeightsRequest *ww;

    if (req == NULL)
        return;
    ww = req->write_weights;
    if (ww->model_id == 7 && ww->n_weights == 1 && strcmp(ww->weights[0]->name, "b") == 0 &&
        ww->weights[0]->dtype == IPUOF__DTYPE__DTYPE_FLOAT && ww->weights[0]->n_dims == 1 &&
        ww->weights[0]->dims[0] == 3 && ww->weights[0]->bytes == 12 && f->payload_len == 12 &&
        memcmp(f->payload, want, 12) == 0)
        f->steps++;
    else
        fake_fail(f, "server: write request fields or payload");
    fs_empty_reply(f, fd, req->request_id, IPUOF__HEADER__BODY_WRITE_WEIGHTS_REPLY);
    ipuof_frame_header_free(req);
}

/* A CopyWeights from model 7 into model 8. */
static void
fs_copy_weights(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_COPY_WEIGHTS);

    if (req == NULL)
        return;
    if (req->copy_weights->dst_model_id == 8 && req->copy_weights->src_model_id == 7)
        f->steps++;
    else
        fake_fail(f, "server: copy request fields");
    fs_empty_reply(f, fd, req->request_id, IPUOF__HEADER__BODY_COPY_WEIGHTS_REPLY);
    ipuof_frame_header_free(req);
}

static void
script_train(struct fake *f, int fd)
{
    float w[15], b[3];

    weight_values(w, b);
    if (fs_hello(f, fd) != 0 || fs_attach(f, fd) != 0)
        return;
    fs_training_compile(f, fd);
    fs_inference_from(f, fd);
    fs_set_optimizer(f, fd);
    fs_read_weight(f, fd, 7, &t7_weights[0], w);
    fs_write_weight(f, fd);
    fs_read_weight(f, fd, 8, &t7_weights[0], w); /* the client's buffer is too small */
    fs_copy_weights(f, fd);
    fs_save(f, fd, 7, SAVED_LEN);
    fs_save(f, fd, 8, SAVED_LEN + 1);            /* sizes that disagree */
    fs_read_weight(f, fd, 7, &t7_weights[1], b); /* the connection is still in step */
    fs_free_model(f, fd, 8);
    fs_free_model(f, fd, 7);
    fs_expect_eof(f, fd);
}

/* Training model m as the fake compiled it: accumulation 3, 2 device iterations, weight
 * w (5, 3) trainable and b frozen, nothing past them. */
static void
check_training_model(ipuof_model *m)
{
    struct ipuof_tensor ti;
    int kind = 0;

    assert_int_equal(ipuof_model_is_training(m), 1);
    assert_int_equal(ipuof_model_gradient_accumulation(m), 3);
    assert_int_equal(ipuof_model_device_iterations(m), 2);
    assert_int_equal(ipuof_model_weight_count(m), 2);
    assert_int_equal(ipuof_model_weight_info(m, 0, &ti, &kind), IPUOF_OK);
    assert_string_equal(ti.name, "w");
    assert_int_equal(ti.dtype, IPUOF_DTYPE_FLOAT);
    assert_int_equal(ti.rank, 2);
    assert_int_equal(ti.dims[0], 5);
    assert_int_equal(ti.dims[1], 3);
    assert_int_equal(ti.bytes, 60);
    assert_null(ti.data);
    assert_int_equal(kind, IPUOF_WEIGHT_TRAINABLE);
    assert_int_equal(ipuof_model_weight_info(m, 1, &ti, &kind), IPUOF_OK);
    assert_string_equal(ti.name, "b");
    assert_int_equal(kind, IPUOF_WEIGHT_FROZEN);
    assert_int_equal(ipuof_model_weight_info(m, 2, &ti, &kind), IPUOF_E_INVAL);
}

/* Training model m saved to a file holds the fake's bytes; a save of inf whose reply's
 * sizes disagree is refused, handing out nothing. */
static void
check_saves(ipuof_client *c, ipuof_model *m, ipuof_model *inf)
{
    uint8_t want_saved[SAVED_LEN];
    char path[] = "/tmp/ipuof-train-XXXXXX";
    void *buf = (void *)1;
    size_t len = 1;
    void *saved;
    int fd;

    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ipuof_model_save_onnx(m, path), IPUOF_OK);
    saved = read_file(path, &len);
    assert_non_null(saved);
    assert_int_equal(len, SAVED_LEN);
    fill(want_saved, sizeof want_saved, 3);
    assert_memory_equal(saved, want_saved, SAVED_LEN);
    free(saved);
    unlink(path);
    assert_error(c, ipuof_model_save_onnx_buffer(inf, &buf, &len), IPUOF_E_PROTO,
                 "announcing 3001 model bytes with 3000 payload bytes");
    assert_null(buf);
    assert_int_equal(len, 0);
}

static void
test_training_api(void **state)
{
    static const char *const frozen[] = {"b"};
    struct ipuof_output_mode modes[] = {{"loss", IPUOF_OUTPUT_ALL, 0}};
    struct ipuof_model_opts o = {.name = "unit-train", .device_iterations = 2,
                                 .micro_batch = 4, .output_modes = modes,
                                 .n_output_modes = 1};
    struct ipuof_training_opts t = {.loss = "loss", .gradient_accumulation = 3,
                                    .accumulation_reduction = IPUOF_REDUCTION_SUM,
                                    .seed = 42, .frozen_weights = frozen,
                                    .n_frozen_weights = 1};
    struct ipuof_model_opts io = {.device_iterations = 5};
    struct ipuof_optimizer opt;
    uint8_t model[MODEL_LEN];
    float w[15], want_w[15], b[3], want_b[3], small[8], x[24 * 5];
    int64_t y[24];
    struct ipuof_tensor in[2];
    ipuof_model *m = NULL, *inf = NULL;
    ipuof_client *c;
    struct fake f;

    (void)state;
    fill(model, sizeof model, 7);
    weight_values(want_w, want_b);
    assert_int_equal(ipuof_optimizer_init(&t.optimizer, IPUOF_OPTIMIZER_ADAMW), IPUOF_OK);
    t.optimizer.lr = 0.002f;
    fake_start(&f, script_train, 1u << 20, 0);
    c = new_attached(&f, 3000);

    assert_int_equal(ipuof_model_compile_training(c, model, sizeof model, &o, &t, &m), IPUOF_OK);
    check_training_model(m);

    /* Local checks: nothing reaches the fake. The run's dim 0 counts A. */
    memset(x, 0, sizeof x);
    memset(y, 0, sizeof y);
    in[0] = (struct ipuof_tensor){"x", IPUOF_DTYPE_FLOAT, 2, {8, 5}, x, 8 * 5 * 4};
    in[1] = (struct ipuof_tensor){"y", IPUOF_DTYPE_INT64, 1, {24}, y, sizeof y};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_SHAPE,
                 "expects [24, 5] (micro-batch 4 x 2 device iterations x 3 gradient "
                 "accumulation steps x 1 replica)");
    assert_error(c, ipuof_model_read_weight(m, "nope", w, sizeof w), IPUOF_E_NOTFOUND,
                 "model 'unit-train' has no weight 'nope'");
    assert_error(c, ipuof_model_read_weight(m, "w", small, sizeof small), IPUOF_E_SHAPE,
                 "weight 'w' of model 'unit-train' is [5, 3] of float, 60 bytes, but the "
                 "buffer given holds 32");
    assert_error(c, ipuof_model_write_weight(m, "b", b, 4), IPUOF_E_SHAPE, "holds 4");
    assert_error(c, ipuof_model_read_weight(m, NULL, w, sizeof w), IPUOF_E_INVAL, NULL);
    opt = t.optimizer;
    opt.kind = 9;
    assert_error(c, ipuof_model_set_optimizer(m, &opt), IPUOF_E_INVAL, "optimizer kind 9");
    assert_error(c, ipuof_model_copy_weights(m, NULL), IPUOF_E_INVAL, "NULL");

    /* The inference model from the training one. */
    assert_int_equal(ipuof_model_inference_from(m, &io, &inf), IPUOF_OK);
    assert_int_equal(ipuof_model_is_training(inf), 0);
    assert_int_equal(ipuof_model_gradient_accumulation(inf), 1);
    assert_int_equal(ipuof_model_weight_count(inf), 0);
    assert_int_equal(ipuof_model_device_iterations(inf), 5);

    /* setOptimizer, then one the daemon refuses: its sentence is passed through. */
    opt = t.optimizer;
    opt.lr = 0.0005f;
    assert_int_equal(ipuof_model_set_optimizer(m, &opt), IPUOF_OK);
    assert_int_equal(ipuof_optimizer_init(&opt, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_error(c, ipuof_model_set_optimizer(m, &opt), IPUOF_E_INVAL,
                 "the optimizer kind cannot change from AdamW to SGD");

    /* Read into the caller's buffer, write from it. */
    memset(w, 0, sizeof w);
    assert_int_equal(ipuof_model_read_weight(m, "w", w, sizeof w), IPUOF_OK);
    assert_memory_equal(w, want_w, sizeof w);
    b[0] = 10;
    b[1] = 20;
    b[2] = 30;
    assert_int_equal(ipuof_model_write_weight(m, "b", b, sizeof b), IPUOF_OK);

    /* Model 8 listed no weights: its size is checked against the reply, which is refused. */
    assert_error(c, ipuof_model_read_weight(inf, "w", small, sizeof small), IPUOF_E_SHAPE,
                 "weight 'w' of model 'unit-train' is [5, 3] of float, 60 bytes, but the "
                 "buffer given holds 32");
    assert_int_equal(ipuof_model_copy_weights(inf, m), IPUOF_OK);

    check_saves(c, m, inf);

    /* Still in step. */
    memset(b, 0, sizeof b);
    assert_int_equal(ipuof_model_read_weight(m, "b", b, sizeof b), IPUOF_OK);
    assert_memory_equal(b, want_b, sizeof b);
    ipuof_model_free(inf);
    ipuof_model_free(m);
    ipuof_client_free(c);
    fake_stop(&f);
    assert_int_equal(f.steps, 11);
}

/* ---- without a daemon ------------------------------------------------------------------ */

static void
test_defaults_and_arguments(void **state)
{
    struct ipuof_optimizer o;
    struct ipuof_training_opts t = {.loss = "loss"};
    struct ipuof_tensor ti;
    ipuof_client *c = ipuof_client_new();
    ipuof_model *m = (ipuof_model *)c;
    uint8_t bytes[4] = {0};
    void *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(ipuof_optimizer_init(&o, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_int_equal(o.kind, IPUOF_OPTIMIZER_SGD);
    assert_true(o.lr == 1e-3f && o.momentum == 0 && o.dampening == 0 && o.weight_decay == 0 &&
                o.nesterov == 0);
    assert_int_equal(ipuof_optimizer_init(&o, IPUOF_OPTIMIZER_ADAM), IPUOF_OK);
    assert_true(o.lr == 1e-3f && o.beta1 == 0.9f && o.beta2 == 0.999f && o.eps == 1e-8f &&
                o.weight_decay == 0);
    assert_int_equal(ipuof_optimizer_init(&o, IPUOF_OPTIMIZER_ADAMW), IPUOF_OK);
    assert_true(o.lr == 1e-3f && o.beta1 == 0.9f && o.beta2 == 0.999f && o.eps == 1e-8f &&
                o.weight_decay == 1e-2f);
    assert_int_equal(ipuof_optimizer_init(&o, 0), IPUOF_E_INVAL);
    assert_int_equal(ipuof_optimizer_init(&o, IPUOF_OPTIMIZER_RMSPROP), IPUOF_OK);
    assert_true(o.lr == 1e-2f && o.alpha == 0.99f && o.eps == 1e-8f && o.momentum == 0 &&
                o.centered == 0 && o.tf_variant == 0);
    assert_int_equal(ipuof_optimizer_init(&o, IPUOF_OPTIMIZER_LAMB), IPUOF_OK);
    assert_true(o.lr == 1e-3f && o.weight_decay == 1e-2f && o.max_weight_norm == 65500.0f &&
                o.no_bias_correction == 0 && o.loss_scaling == 1.0f && o.n_groups == 0);
    assert_int_equal(ipuof_optimizer_init(&o, 6), IPUOF_E_INVAL);
    assert_int_equal(ipuof_optimizer_init(NULL, IPUOF_OPTIMIZER_SGD), IPUOF_E_INVAL);

    assert_int_equal(ipuof_model_is_training(NULL), 0);
    assert_int_equal(ipuof_model_gradient_accumulation(NULL), 0);
    assert_int_equal(ipuof_model_weight_count(NULL), 0);
    assert_int_equal(ipuof_model_weight_info(NULL, 0, &ti, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_set_optimizer(NULL, &o), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_read_weight(NULL, "w", bytes, 4), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_write_weight(NULL, "w", bytes, 4), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_copy_weights(NULL, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_save_onnx(NULL, "/tmp/x.onnx"), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_save_onnx_buffer(NULL, &buf, &len), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_inference_from(NULL, NULL, &m), IPUOF_E_INVAL);
    assert_null(m);
    assert_int_equal(ipuof_model_compile_training(NULL, bytes, 4, NULL, &t, &m),
                     IPUOF_E_INVAL);

    /* The training options are checked before the connection. */
    assert_error(c, ipuof_model_compile_training(c, bytes, 4, NULL, NULL, &m), IPUOF_E_INVAL,
                 "loss");
    t.loss = "";
    assert_error(c, ipuof_model_compile_training(c, bytes, 4, NULL, &t, &m), IPUOF_E_INVAL,
                 "loss");
    t.loss = "loss";
    t.optimizer.kind = 7;
    assert_error(c, ipuof_model_compile_training(c, bytes, 4, NULL, &t, &m), IPUOF_E_INVAL,
                 "optimizer kind 7");
    t.optimizer.kind = 0;
    t.accumulation_reduction = 2;
    assert_error(c, ipuof_model_compile_training(c, bytes, 4, NULL, &t, &m), IPUOF_E_INVAL,
                 "accumulation_reduction 2");
    t.accumulation_reduction = IPUOF_REDUCTION_MEAN;
    t.n_frozen_weights = 2;
    assert_error(c, ipuof_model_compile_training(c, bytes, 4, NULL, &t, &m), IPUOF_E_INVAL,
                 "frozen_weights is NULL");
    t.n_frozen_weights = 0;
    assert_error(c, ipuof_model_compile_training(c, NULL, 0, NULL, &t, &m), IPUOF_E_INVAL,
                 "bytes");
    assert_error(c, ipuof_model_compile_training(c, bytes, 4, NULL, &t, &m), IPUOF_E_CLOSED,
                 "not connected");
    assert_error(c, ipuof_model_compile_training_file(c, "/nonexistent/t.onnx", NULL, &t, &m),
                 IPUOF_E_NOTFOUND, "/nonexistent/t.onnx");
    assert_null(m);
    ipuof_client_free(c);
}

/* ---- the optimizer on the options handle (without a daemon) ---------------------------- */

/* Refusal rc of a call on handle h whose sentence holds want. */
#define assert_refused(h, call, rc, want)                                                  \
    do {                                                                                   \
        assert_int_equal((call), (rc));                                                    \
        if (strstr(ipuof_compile_opts_errmsg(h), (want)) == NULL)                          \
            fail_msg("'%s' lacks '%s'", ipuof_compile_opts_errmsg(h), (want));             \
        print_message("  %s\n", ipuof_compile_opts_errmsg(h));                             \
    } while (0)

static void
test_optimizer_setters(void **state)
{
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    const struct ipuof_optimizer *o;
    char wname[] = "W";
    static const char *const bname[] = {"b"};
    struct ipuof_optimizer_group sg = {.lr = 0.3f, .weights = bname, .n_weights = 1};
    struct ipuof_optimizer so;

    (void)state;
    assert_non_null(h);
    o = &h->t.optimizer;
    /* PopTorch's default takes no parameter: a kind first. */
    assert_int_equal(o->kind, 0);
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 0.1),
                   IPUOF_E_INVAL, "set_optimizer_kind");
    assert_refused(h, ipuof_compile_opts_add_optimizer_group(h), IPUOF_E_INVAL, "kind 0");
    assert_refused(h, ipuof_compile_opts_set_optimizer_kind(h, 6), IPUOF_E_INVAL,
                   "optimizer kind 6");
    assert_refused(h, ipuof_compile_opts_set_optimizer_kind(h, -1), IPUOF_E_INVAL, "kind -1");

    /* A kind brings torch.optim's defaults (as ipuof_optimizer_init). */
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_ADAMW), IPUOF_OK);
    assert_string_equal(ipuof_compile_opts_errmsg(h), "");
    assert_true(o->kind == IPUOF_OPTIMIZER_ADAMW && o->lr == 1e-3f && o->beta1 == 0.9f &&
                o->beta2 == 0.999f && o->eps == 1e-8f && o->weight_decay == 1e-2f &&
                o->no_bias_correction == 0 && o->loss_scaling == 1.0f && o->n_groups == 0);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 0.002),
                     IPUOF_OK);
    assert_true(o->lr == 0.002f);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_BIAS_CORRECTION,
                                                            0), IPUOF_OK);
    assert_int_equal(o->no_bias_correction, 1);

    /* Each refusal leaves the value as it was and says what is right. */
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, -1),
                   IPUOF_E_INVAL, "optimizer lr -1 is out of range: it must be >= 0 and finite");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, NAN),
                   IPUOF_E_INVAL, "lr nan");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 1e39),
                   IPUOF_E_INVAL, "finite as a float");
    assert_true(o->lr == 0.002f);
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_BETA1, 1.0),
                   IPUOF_E_INVAL, "beta1 1 is out of range: it must be in [0, 1)");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_EPS, 0),
                   IPUOF_E_INVAL, "eps 0 is out of range: it must be > 0");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0,
                                                             IPUOF_OPT_PARAM_BIAS_CORRECTION, 2),
                   IPUOF_E_INVAL, "0 or 1");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0,
                                                             IPUOF_OPT_PARAM_MAX_GRAD_NORM, -2),
                   IPUOF_E_INVAL, "0 or inf: no clipping");
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_MAX_GRAD_NORM,
                                                            INFINITY), IPUOF_OK);
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_ALPHA, 0.9),
                   IPUOF_E_INVAL, "optimizer parameter alpha applies to RMSprop only; this "
                   "optimizer is AdamW");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_MOMENTUM, 0.9),
                   IPUOF_E_INVAL, "momentum applies to SGD, RMSprop only");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, 0, 1), IPUOF_E_INVAL,
                   "optimizer parameter 0 is not one of IPUOF_OPT_PARAM_* (1 .. 24)");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0, 25, 1), IPUOF_E_INVAL,
                   "parameter 25");

    /* Groups: a copy of the first group's values at the call, then their own. */
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 1, IPUOF_OPT_PARAM_LR, 0.1),
                   IPUOF_E_INVAL, "group 1 is not there: there is only group 0, the first");
    assert_refused(h, ipuof_compile_opts_add_optimizer_weight(h, 1, "W"), IPUOF_E_INVAL,
                   "group 1 is not there: there is none yet");
    assert_int_equal(ipuof_compile_opts_add_optimizer_group(h), IPUOF_OK);
    assert_true(o->n_groups == 1 && o->groups == h->groups && o->groups[0].lr == 0.002f &&
                o->groups[0].beta2 == 0.999f && o->groups[0].weight_decay == 1e-2f);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 1, IPUOF_OPT_PARAM_LR, 0.5),
                     IPUOF_OK);
    assert_true(o->groups[0].lr == 0.5f && o->lr == 0.002f);
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 1,
                                                             IPUOF_OPT_PARAM_LOSS_SCALING, 2),
                   IPUOF_E_INVAL, "loss_scaling is the whole optimizer's: set it on group 0");
    assert_refused(h, ipuof_compile_opts_add_optimizer_weight(h, 0, "W"), IPUOF_E_INVAL,
                   "group 0 is not there");
    assert_refused(h, ipuof_compile_opts_add_optimizer_weight(h, 1, ""), IPUOF_E_INVAL,
                   "weight needs a name");
    assert_int_equal(ipuof_compile_opts_add_optimizer_weight(h, 1, wname), IPUOF_OK);
    wname[0] = 'X'; /* copied */
    assert_true(o->groups[0].n_weights == 1 && strcmp(o->groups[0].weights[0], "W") == 0);
    for (int g = 1; g < IPUOF_OPTIMIZER_MAX_GROUPS; g++)
        assert_int_equal(ipuof_compile_opts_add_optimizer_group(h), IPUOF_OK);
    assert_refused(h, ipuof_compile_opts_add_optimizer_group(h), IPUOF_E_INVAL,
                   "32 parameter groups besides the first already");

    /* A new kind starts again: its defaults, no group. */
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_RMSPROP), IPUOF_OK);
    assert_true(o->kind == IPUOF_OPTIMIZER_RMSPROP && o->lr == 1e-2f && o->alpha == 0.99f &&
                o->n_groups == 0 && o->groups == NULL);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_CENTERED, 1),
                     IPUOF_OK);
    assert_int_equal(o->centered, 1);

    /* The struct call: the same place, its groups' names copied. */
    ipuof_optimizer_init(&so, IPUOF_OPTIMIZER_SGD);
    so.lr = 0.25f;
    so.n_groups = 1;
    so.groups = &sg;
    assert_int_equal(ipuof_compile_opts_set_optimizer(h, &so), IPUOF_OK);
    assert_true(o->kind == IPUOF_OPTIMIZER_SGD && o->lr == 0.25f && o->n_groups == 1 &&
                o->groups == h->groups && o->groups[0].lr == 0.3f &&
                o->groups[0].weights != sg.weights &&
                strcmp(o->groups[0].weights[0], "b") == 0);
    so.kind = 9;
    assert_refused(h, ipuof_compile_opts_set_optimizer(h, &so), IPUOF_E_INVAL, "kind 9");
    assert_int_equal(o->kind, IPUOF_OPTIMIZER_SGD);
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, 0), IPUOF_OK);
    assert_true(o->kind == 0 && o->lr == 0.0f && o->n_groups == 0);
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(NULL, 1), IPUOF_E_INVAL);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(NULL, 0, 1, 1), IPUOF_E_INVAL);
    assert_int_equal(ipuof_compile_opts_add_optimizer_group(NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_compile_opts_add_optimizer_weight(NULL, 1, "W"), IPUOF_E_INVAL);
    ipuof_compile_opts_free(h);
}

/* ---- against a real ipuofd ------------------------------------------------------------- */

#define RB 4 /* micro-batch */
#define RK 4 /* features */
#define RN 3 /* classes */

/* A linear classifier with its loss: logits = Gemm(x [RB, RK], W [RN, RK], b, transB),
 * loss = SoftmaxCrossEntropyLoss(logits, y [RB], mean). *out caller-owned. */
static void
linear_model(void **out, size_t *len)
{
    static const int64_t xd[] = {RB, RK}, yd[] = {RB}, wd[] = {RN, RK}, bd[] = {RN};
    float w[RN * RK], b[RN];
    struct sim_ob *ob = sim_ob_new(13);

    for (int i = 0; i < RN * RK; i++)
        w[i] = (float)((i * 7) % 5) * 0.1f - 0.2f;
    for (int i = 0; i < RN; i++)
        b[i] = 0.05f * (float)i;
    assert_non_null(ob);
    sim_ob_input(ob, "x", IPUOF_DTYPE_FLOAT, 2, xd);
    sim_ob_input(ob, "y", IPUOF_DTYPE_INT64, 1, yd);
    sim_ob_initializer(ob, "W", IPUOF_DTYPE_FLOAT, 2, wd, w);
    sim_ob_initializer(ob, "b", IPUOF_DTYPE_FLOAT, 1, bd, b);
    sim_ob_node(ob, "Gemm", "fc", "x,W,b", "logits");
    sim_ob_attr_int(ob, "transB", 1);
    sim_ob_node(ob, "SoftmaxCrossEntropyLoss", "sce", "logits,y", "loss");
    sim_ob_attr_str(ob, "reduction", "mean");
    sim_ob_output(ob, "logits", IPUOF_DTYPE_FLOAT);
    sim_ob_output(ob, "loss", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(ob, out, len), 0);
    sim_ob_free(ob);
}

/* The three daemon tests' start: a daemon of their own in *d (testd_live, for the
 * teardown), the linear model's 2 RB rows of inputs x (RB x RK twice) and labels y, its
 * ONNX bytes in *onnx (caller-owned) and a client connected and attached with *ao. */
static ipuof_client *
linear_setup(struct testd *d, const struct ipuof_attach_opts *ao, float *x, int64_t *y,
             void **onnx, size_t *len)
{
    ipuof_client *c;

    if (testd_start(d, NULL, NULL) != 0)
        fail_msg("could not start ipuofd (IPUOFD_BIN, default build/bin/ipuofd): "
                 "a daemon that does not start is a failure");
    testd_live = d;
    for (int i = 0; i < 2 * RB; i++) {
        y[i] = i % RN;
        for (int k = 0; k < RK; k++)
            x[i * RK + k] = (k == y[i] ? 1.0f : 0.0f) + 0.1f * (float)((i + k) % 3);
    }
    linear_model(onnx, len);
    c = ipuof_client_new();
    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d->addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, ao, NULL, 0, NULL), IPUOF_OK);
    return c;
}

/* The largest |logits - (x W^T + b)| over RB rows (the host's reference). */
static double
linear_maxdiff(const float *x, const float *w, const float *b, const float *logits)
{
    double worst = 0;

    for (int r = 0; r < RB; r++)
        for (int n = 0; n < RN; n++) {
            double want = b[n];

            for (int k = 0; k < RK; k++)
                want += (double)x[r * RK + k] * w[n * RK + k];
            if (fabs(want - logits[r * RN + n]) > worst)
                worst = fabs(want - logits[r * RN + n]);
        }
    return worst;
}

/* Runs inference model m on x (and y, which the graph's loss reads) and returns the largest
 * difference of its logits from the host's with weights w, b. */
static double
infer_diff(ipuof_model *m, float *x, int64_t *y, const float *w, const float *b)
{
    struct ipuof_tensor in[2] = {{"x", IPUOF_DTYPE_FLOAT, 2, {RB, RK}, x, RB * RK * 4},
                                 {"y", IPUOF_DTYPE_INT64, 1, {RB}, y, RB * 8}};
    struct ipuof_tensor t;

    assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
    assert_int_equal(ipuof_model_output(m, (size_t)ipuof_model_output_index(m, "logits"), &t),
                     IPUOF_OK);
    assert_int_equal(t.bytes, RB * RN * 4);
    return linear_maxdiff(x, w, b, t.data);
}

/* The last step's gradient of a trained weight ("gradient:<w>" over read_weights) of
 * training model m, the same when read twice; wrong sizes, names and the inference model
 * inf refused. Its values against torch's .grad: python/tests/test_executor_api.py. */
static void
gradient_checks(ipuof_client *c, ipuof_model *m, ipuof_model *inf)
{
    float g[RN * RK], g2[RN * RK], gb[RN];
    float nz = 0.0f;

    assert_int_equal(ipuof_model_read_gradient(m, "W", g, sizeof g), IPUOF_OK);
    assert_int_equal(ipuof_model_read_gradient(m, "W", g2, sizeof g2), IPUOF_OK);
    assert_memory_equal(g, g2, sizeof g);
    for (size_t i = 0; i < RN * RK; i++)
        nz += g[i] < 0 ? -g[i] : g[i];
    assert_true(nz > 0.0f);
    assert_int_equal(ipuof_model_read_gradient(m, "b", gb, sizeof gb), IPUOF_OK);
    assert_error(c, ipuof_model_read_gradient(m, "W", g, 4), IPUOF_E_SHAPE, "bytes");
    assert_error(c, ipuof_model_read_gradient(m, "nope", g, sizeof g), IPUOF_E_NOTFOUND,
                 "nope");
    assert_error(c, ipuof_model_read_gradient(inf, "W", g, sizeof g), IPUOF_E_INVAL,
                 "no gradients");
    print_message("  %s\n", ipuof_client_errmsg(c));
}

/* ipuof_model_inference_from_with: the inference model of training model m from a
 * handle's options (and from none) has m's weights w, b and micro-batch; a handle with a
 * loss is refused. */
static void
inference_from_handle(ipuof_client *c, ipuof_model *m, float *x, int64_t *y, const float *w,
                      const float *b)
{
    ipuof_compile_opts *io = ipuof_compile_opts_new();
    ipuof_model *inf = NULL;

    assert_non_null(io);
    assert_int_equal(ipuof_compile_opts_set_loss(io, "loss"), IPUOF_OK);
    assert_error(c, ipuof_model_inference_from_with(m, io, &inf), IPUOF_E_INVAL,
                 "the options have a loss ('loss')");
    assert_null(inf);
    assert_int_equal(ipuof_compile_opts_set_loss(io, NULL), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_name(io, "linear-inference"), IPUOF_OK);
    assert_int_equal(ipuof_model_inference_from_with(m, io, &inf), IPUOF_OK);
    assert_int_equal(ipuof_model_is_training(inf), 0);
    assert_int_equal(ipuof_model_micro_batch(inf), RB);
    assert_true(infer_diff(inf, x, y, w, b) < 1e-5);
    ipuof_model_free(inf);
    inf = NULL;
    assert_int_equal(ipuof_model_inference_from_with(m, NULL, &inf), IPUOF_OK);
    assert_int_equal(ipuof_model_device_iterations(inf), 1);
    assert_true(infer_diff(inf, x, y, w, b) < 1e-5);
    ipuof_model_free(inf);
    assert_int_equal(ipuof_model_inference_from_with(NULL, io, &inf), IPUOF_E_INVAL);
    assert_error(c, ipuof_model_inference_from_with(m, io, NULL), IPUOF_E_INVAL,
                 "needs a place for the model handle");
    ipuof_compile_opts_free(io);
}

/* The optimizer state and parameter groups of training model m over the protocol (after
 * 21 runs of 2 device iterations): the step count read and written, wrong names, sizes
 * and the inference model inf refused; a group naming no weight refused, one group taken,
 * more than the maximum refused. */
static void
optimizer_state_checks(ipuof_client *c, ipuof_model *m, ipuof_model *inf)
{
    static const char *const wname[] = {"W"}, *const nope[] = {"nope"};
    struct ipuof_optimizer_group grp = {.lr = 0.2f, .weights = wname, .n_weights = 1};
    struct ipuof_optimizer_group bad = {.lr = 0.2f, .weights = nope, .n_weights = 1};
    int64_t steps = 0;
    float st[RN * RK];

    struct ipuof_optimizer opt;

    /* 20 runs and 1 more, of 2 device iterations each */
    assert_int_equal(ipuof_model_read_state(m, "optimizer:step", &steps, sizeof steps),
                     IPUOF_OK);
    assert_int_equal(steps, 42);
    assert_error(c, ipuof_model_read_state(m, "optimizer:momentum_buffer:W", st, sizeof st),
                 IPUOF_E_NOTFOUND, "keeps no state tensor");
    print_message("  %s\n", ipuof_client_errmsg(c));
    assert_error(c, ipuof_model_read_state(m, "optimizer:step", st, 4), IPUOF_E_SHAPE,
                 "bytes");
    assert_error(c, ipuof_model_read_state(m, "W", st, sizeof st), IPUOF_E_NOTFOUND,
                 "not an optimizer state name");
    assert_error(c, ipuof_model_read_state(inf, "optimizer:step", &steps, sizeof steps),
                 IPUOF_E_INVAL, "does not train");
    steps = 3;
    assert_int_equal(ipuof_model_write_state(m, "optimizer:step", &steps, sizeof steps),
                     IPUOF_OK);
    steps = -1;
    assert_error(c, ipuof_model_write_state(m, "optimizer:step", &steps, sizeof steps),
                 IPUOF_E_INVAL, "negative");
    assert_int_equal(ipuof_model_read_state(m, "optimizer:step", &steps, sizeof steps),
                     IPUOF_OK);
    assert_int_equal(steps, 3);
    ipuof_optimizer_init(&opt, IPUOF_OPTIMIZER_SGD);
    opt.lr = 0.1f;
    opt.n_groups = 1;
    opt.groups = &bad;
    assert_error(c, ipuof_model_set_optimizer(m, &opt), IPUOF_E_NOTFOUND,
                 "'nope', which is not a weight");
    opt.groups = &grp;
    assert_int_equal(ipuof_model_set_optimizer(m, &opt), IPUOF_OK);
    opt.n_groups = IPUOF_OPTIMIZER_MAX_GROUPS + 1;
    assert_error(c, ipuof_model_set_optimizer(m, &opt), IPUOF_E_INVAL,
                 "at most 32");
    opt.n_groups = 0;
    opt.groups = NULL;
}

static void
test_real_daemon(void **state)
{
    static struct testd d; /* static: the teardown may use it after a failed assertion */
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_model_opts mo = {.name = "linear", .device_iterations = 2};
    struct ipuof_training_opts to = {.loss = "loss"};
    float x[2 * RB * RK], w[RN * RK], b[RN], zero[RN * RK] = {0}, back[RN * RK];
    int64_t y[2 * RB];
    struct ipuof_tensor in[2] = {{"x", IPUOF_DTYPE_FLOAT, 2, {2 * RB, RK}, x, sizeof x},
                                 {"y", IPUOF_DTYPE_INT64, 1, {2 * RB}, y, sizeof y}};
    struct ipuof_tensor t;
    ipuof_model *m = NULL, *inf = NULL, *saved = NULL;
    ipuof_client *c;
    void *onnx = NULL, *buf = NULL;
    size_t len = 0, blen = 0;
    float first = 0, last = 0;
    int kind = 0, rc;

    (void)state;
    c = linear_setup(&d, &ao, x, y, &onnx, &len);
    to.optimizer.kind = IPUOF_OPTIMIZER_SGD;
    to.optimizer.lr = 0.5f;
    rc = ipuof_model_compile_training(c, onnx, len, &mo, &to, &m);
    print_message("  training compile: %s\n", rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    assert_int_equal(rc, IPUOF_OK);
    assert_int_equal(ipuof_model_is_training(m), 1);
    assert_int_equal(ipuof_model_gradient_accumulation(m), 1);
    assert_int_equal(ipuof_model_weight_count(m), 2);
    assert_int_equal(ipuof_model_weight_info(m, 0, &t, &kind), IPUOF_OK);
    assert_int_equal(kind, IPUOF_WEIGHT_TRAINABLE);

    /* Training lowers the loss (Final: the last micro-batch's). */
    for (int step = 0; step < 20; step++) {
        assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
        assert_int_equal(ipuof_model_output(m, (size_t)ipuof_model_output_index(m, "loss"), &t),
                         IPUOF_OK);
        assert_int_equal(t.bytes, 4);
        last = *(const float *)t.data;
        if (step == 0)
            first = last;
    }
    print_message("  loss %.4f -> %.4f after 40 SGD steps\n", first, last);
    assert_true(last < first * 0.5f);

    /* Weights: read, write zeros and read them back, write the values again. */
    assert_int_equal(ipuof_model_read_weight(m, "W", w, sizeof w), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "b", b, sizeof b), IPUOF_OK);
    assert_int_equal(ipuof_model_write_weight(m, "W", zero, sizeof zero), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "W", back, sizeof back), IPUOF_OK);
    assert_memory_equal(back, zero, sizeof zero);
    assert_int_equal(ipuof_model_write_weight(m, "W", w, sizeof w), IPUOF_OK);
    assert_error(c, ipuof_model_read_weight(m, "nope", w, sizeof w), IPUOF_E_NOTFOUND, "nope");

    /* The inference model has the trained weights; later training changes it only after a
     * copy. */
    mo.device_iterations = 1;
    assert_int_equal(ipuof_model_inference_from(m, &mo, &inf), IPUOF_OK);
    assert_int_equal(ipuof_model_is_training(inf), 0);
    assert_true(infer_diff(inf, x, y, w, b) < 1e-5);
    assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
    assert_true(infer_diff(inf, x, y, w, b) < 1e-5);
    assert_int_equal(ipuof_model_read_weight(m, "W", w, sizeof w), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "b", b, sizeof b), IPUOF_OK);
    assert_true(infer_diff(inf, x, y, w, b) > 1e-6);
    assert_int_equal(ipuof_model_copy_weights(inf, m), IPUOF_OK);
    assert_true(infer_diff(inf, x, y, w, b) < 1e-5);
    inference_from_handle(c, m, x, y, w, b);

    /* The last step's gradient of a trained weight ("gradient:<w>" over read_weights);
     * its values against torch's .grad: python/tests/test_executor_api.py. */
    gradient_checks(c, m, inf);

    /* setOptimizer; the kind cannot change. */
    to.optimizer.lr = 0.1f;
    assert_int_equal(ipuof_model_set_optimizer(m, &to.optimizer), IPUOF_OK);
    ipuof_optimizer_init(&to.optimizer, IPUOF_OPTIMIZER_ADAM);
    rc = ipuof_model_set_optimizer(m, &to.optimizer);
    print_message("  set_optimizer to Adam: %s\n", ipuof_client_errmsg(c));
    assert_int_not_equal(rc, IPUOF_OK);

    /* The optimizer state and parameter groups over the protocol. */
    optimizer_state_checks(c, m, inf);

    /* Saved, compiled again: the trained weights. */
    assert_int_equal(ipuof_model_save_onnx_buffer(m, &buf, &blen), IPUOF_OK);
    assert_true(blen > 0);
    assert_int_equal(ipuof_model_compile(c, buf, blen, &mo, &saved), IPUOF_OK);
    assert_true(infer_diff(saved, x, y, w, b) < 1e-5);

    ipuof_model_free(saved);
    ipuof_model_free(inf);
    ipuof_model_free(m);
    assert_int_equal(ipuof_detach(c), IPUOF_OK);
    ipuof_client_free(c);
    free(buf);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* An inference model made from a replicated training model has the training model's
 * replicas (per process), so a call of the same shape runs on it (a Pod job's processes
 * found this: ipuof-mnist's test pass after training on 2 replicas). */
static void
test_inference_from_replicated(void **state)
{
    static struct testd d; /* static: the teardown may use it after a failed assertion */
    struct ipuof_attach_opts ao = {.num_ipus = 2};
    struct ipuof_model_opts mo = {.name = "linear", .device_iterations = 1, .replicas = 2};
    struct ipuof_training_opts to = {.loss = "loss"};
    float x[2 * RB * RK], w[RN * RK], b[RN];
    int64_t y[2 * RB];
    struct ipuof_tensor in[2] = {{"x", IPUOF_DTYPE_FLOAT, 2, {2 * RB, RK}, x, sizeof x},
                                 {"y", IPUOF_DTYPE_INT64, 1, {2 * RB}, y, sizeof y}};
    ipuof_model *m = NULL, *inf = NULL;
    ipuof_client *c;
    void *onnx = NULL;
    size_t len = 0;

    (void)state;
    c = linear_setup(&d, &ao, x, y, &onnx, &len);
    to.optimizer.kind = IPUOF_OPTIMIZER_SGD;
    to.optimizer.lr = 0.5f;
    assert_int_equal(ipuof_model_compile_training(c, onnx, len, &mo, &to, &m), IPUOF_OK);
    assert_int_equal(ipuof_model_replicas(m), 2);
    assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK); /* 2 replicas x RB samples */
    assert_int_equal(ipuof_model_inference_from(m, &mo, &inf), IPUOF_OK);
    assert_int_equal(ipuof_model_replicas(inf), 2);
    assert_int_equal(ipuof_model_read_weight(m, "W", w, sizeof w), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "b", b, sizeof b), IPUOF_OK);
    {
        struct ipuof_tensor t;
        int rc = ipuof_model_run(inf, in, 2); /* 2 replicas x RB samples, as the training's */

        print_message("  inference from 2 replicas' training model: %s\n",
                      rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
        assert_int_equal(rc, IPUOF_OK);
        assert_int_equal(ipuof_model_output(inf, (size_t)ipuof_model_output_index(inf, "logits"),
                                            &t), IPUOF_OK);
        assert_int_equal(t.bytes, 2 * RB * RN * 4);
        assert_true(linear_maxdiff(x, w, b, t.data) < 1e-5);
        assert_true(linear_maxdiff(x + RB * RK, w, b, (const float *)t.data + RB * RN) < 1e-5);
    }
    ipuof_model_free(inf);
    ipuof_model_free(m);
    assert_int_equal(ipuof_detach(c), IPUOF_OK);
    ipuof_client_free(c);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* Trains the linear model 5 runs on x, y (2 micro-batches each) with the optimizer of h
 * (or of struct t when h is NULL) and leaves its weights in w, b. */
static void
train_linear(ipuof_client *c, const void *onnx, size_t len, const ipuof_compile_opts *h,
             const struct ipuof_training_opts *t, float *x, int64_t *y, float *w, float *b)
{
    struct ipuof_model_opts mo = {.name = "linear", .device_iterations = 2};
    struct ipuof_tensor in[2] = {{"x", IPUOF_DTYPE_FLOAT, 2, {2 * RB, RK}, x, 2 * RB * RK * 4},
                                 {"y", IPUOF_DTYPE_INT64, 1, {2 * RB}, y, 2 * RB * 8}};
    ipuof_model *m = NULL;
    int rc = h != NULL ? ipuof_model_compile_with(c, onnx, len, h, &m)
                       : ipuof_model_compile_training(c, onnx, len, &mo, t, &m);

    if (rc != IPUOF_OK)
        fail_msg("compile (%s): %s", h != NULL ? "handle" : "struct", ipuof_client_errmsg(c));
    for (int i = 0; i < 5; i++)
        assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "W", w, RN * RK * 4), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "b", b, RN * 4), IPUOF_OK);
    ipuof_model_free(m);
}

/* The optimizer set on the handle, one parameter at a time, trains as the same optimizer
 * given as a struct (the weights bit for bit); a group at lr 0 leaves its weight as the
 * graph had it; Adam without bias correction differs from Adam with it. */
static void
test_optimizer_handle_daemon(void **state)
{
    static struct testd d; /* static: the teardown may use it after a failed assertion */
    static const char *const wname[] = {"W"};
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_training_opts to = {.loss = "loss"};
    struct ipuof_optimizer_group grp;
    float x[2 * RB * RK], w0[RN * RK], w1[RN * RK], w2[RN * RK], b0[RN], b1[RN], b2[RN];
    int64_t y[2 * RB];
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    ipuof_client *c;
    void *onnx = NULL;
    size_t len = 0;

    (void)state;
    c = linear_setup(&d, &ao, x, y, &onnx, &len);
    assert_non_null(h);

    /* SGD with momentum, W in a group of its own at lr 0. */
    assert_int_equal(ipuof_compile_opts_set_name(h, "linear"), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_device_iterations(h, 2), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_loss(h, "loss"), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 0.5),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_MOMENTUM, 0.9),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_add_optimizer_group(h), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 1, IPUOF_OPT_PARAM_LR, 0.0),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_add_optimizer_weight(h, 1, "W"), IPUOF_OK);
    train_linear(c, onnx, len, h, NULL, x, y, w1, b1);
    ipuof_optimizer_init(&to.optimizer, IPUOF_OPTIMIZER_SGD);
    to.optimizer.lr = 0.5f;
    to.optimizer.momentum = 0.9f;
    grp = (struct ipuof_optimizer_group){0.0f, 0.0f, 0.9f, 0.0f, 0, 0.0f, 0.0f, 0.0f, 0.99f,
                                         wname, 1};
    to.optimizer.groups = &grp;
    to.optimizer.n_groups = 1;
    train_linear(c, onnx, len, NULL, &to, x, y, w2, b2);
    assert_memory_equal(w1, w2, sizeof w1);
    assert_memory_equal(b1, b2, sizeof b1);
    for (int i = 0; i < RN * RK; i++)
        assert_true(w1[i] == (float)((i * 7) % 5) * 0.1f - 0.2f); /* linear_model's W */
    for (int i = 0; i < RN; i++)
        b0[i] = 0.05f * (float)i;
    assert_memory_not_equal(b1, b0, sizeof b1);

    /* Adam without bias correction: the handle's and the struct's agree, and differ from
     * Adam with it (the flag's sense is PopTorch's bias_correction). */
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_ADAM), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 0.05),
                     IPUOF_OK);
    train_linear(c, onnx, len, h, NULL, x, y, w0, b0);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_BIAS_CORRECTION,
                                                            0), IPUOF_OK);
    train_linear(c, onnx, len, h, NULL, x, y, w1, b1);
    ipuof_optimizer_init(&to.optimizer, IPUOF_OPTIMIZER_ADAM);
    to.optimizer.lr = 0.05f;
    to.optimizer.no_bias_correction = 1;
    train_linear(c, onnx, len, NULL, &to, x, y, w2, b2);
    assert_memory_equal(w1, w2, sizeof w1);
    assert_memory_equal(b1, b2, sizeof b1);
    assert_memory_not_equal(w0, w1, sizeof w0);

    ipuof_compile_opts_free(h);
    assert_int_equal(ipuof_detach(c), IPUOF_OK);
    ipuof_client_free(c);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* The float16 parameters (IPUOF_OPT_PARAM_ACCUM_FLOAT16 .. _ALS_THRESHOLD): the whole
 * optimizer's, each value checked where it enters, reset by set_optimizer_kind(). */
static void
test_optimizer_half_setters(void **state)
{
    ipuof_compile_opts *h = ipuof_compile_opts_new();

    (void)state;
    assert_non_null(h);
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_ADAM), IPUOF_OK);
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0,
                                                             IPUOF_OPT_PARAM_ACCUM_FLOAT16, 2),
                   IPUOF_E_INVAL, "optimizer accum_float16 2 is out of range: it must be 0 or 1");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0,
                                                             IPUOF_OPT_PARAM_ALS_UPDATE_PERIOD,
                                                             0.5),
                   IPUOF_E_INVAL, "als_update_period 0.5 is out of range: it must be a whole "
                   "number of steps from 1 to 2^32 - 1");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0,
                                                             IPUOF_OPT_PARAM_ALS_BIN_EDGE, 0),
                   IPUOF_E_INVAL, "als_bin_edge 0 is out of range: it must be in (0, 1]");
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 0,
                                                             IPUOF_OPT_PARAM_ALS_THRESHOLD, 2),
                   IPUOF_E_INVAL, "als_threshold 2 is out of range: it must be in [0, 1]");
    assert_true(h->half.als_update_period == 0 && h->half.als_bin_edge == 0.0f &&
                h->half.accum_float16 == 0);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0,
                                                            IPUOF_OPT_PARAM_ALS_UPDATE_PERIOD, 4),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0,
                                                            IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16,
                                                            1), IPUOF_OK);
    assert_true(h->half.als_update_period == 4 && h->half.first_order_float16 == 1);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0,
                                                            IPUOF_OPT_PARAM_AUTO_LOSS_SCALING, 1),
                     IPUOF_OK);
    assert_int_equal(h->half.auto_loss_scaling, 1);
    assert_int_equal(ipuof_compile_opts_add_optimizer_group(h), IPUOF_OK);
    assert_refused(h, ipuof_compile_opts_set_optimizer_param(h, 1,
                                                             IPUOF_OPT_PARAM_ACCUM_FLOAT16, 1),
                   IPUOF_E_INVAL, "accum_float16 is the whole optimizer's: set it on group 0");
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_true(h->half.als_update_period == 0 && h->half.first_order_float16 == 0 &&
                h->half.auto_loss_scaling == 0);
    ipuof_compile_opts_free(h);
}

/* setOptimizer between runs through the handle (ipuof_model_set_optimizer_with) trains as
 * the same optimizer given as a struct (ipuof_model_set_optimizer): the weights bit for bit,
 * and not as the compile's optimizer left alone; what it refuses, it says why. */
static void
test_set_optimizer_with_daemon(void **state)
{
    static struct testd d; /* static: the teardown may use it after a failed assertion */
    static const char *const wname[] = {"W"};
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_optimizer opt;
    struct ipuof_optimizer_group grp;
    float x[2 * RB * RK], w[3][RN * RK], b[3][RN];
    int64_t y[2 * RB];
    struct ipuof_tensor in[2] = {{"x", IPUOF_DTYPE_FLOAT, 2, {2 * RB, RK}, x, sizeof x},
                                 {"y", IPUOF_DTYPE_INT64, 1, {2 * RB}, y, sizeof y}};
    ipuof_compile_opts *h = ipuof_compile_opts_new(), *h2 = ipuof_compile_opts_new();
    ipuof_client *c;
    ipuof_model *m = NULL;
    void *onnx = NULL;
    size_t len = 0;

    (void)state;
    c = linear_setup(&d, &ao, x, y, &onnx, &len);
    assert_true(h != NULL && h2 != NULL);
    assert_int_equal(ipuof_compile_opts_set_device_iterations(h, 2), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_loss(h, "loss"), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 0.1),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_MOMENTUM, 0.9),
                     IPUOF_OK);
    /* the later optimizer: lr 0.5, W in a group at lr 0.02 */
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h2, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h2, 0, IPUOF_OPT_PARAM_LR, 0.5),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h2, 0, IPUOF_OPT_PARAM_MOMENTUM, 0.9),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_add_optimizer_group(h2), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h2, 1, IPUOF_OPT_PARAM_LR, 0.02),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_add_optimizer_weight(h2, 1, "W"), IPUOF_OK);
    ipuof_optimizer_init(&opt, IPUOF_OPTIMIZER_SGD);
    opt.lr = 0.5f;
    opt.momentum = 0.9f;
    grp = (struct ipuof_optimizer_group){0.02f, 0.0f, 0.9f, 0.0f, 0, 0.0f, 0.0f, 0.0f, 0.0f,
                                         wname, 1};
    opt.groups = &grp;
    opt.n_groups = 1;

    /* k = 0: the handle's call, 1: the struct's, 2: none; two runs, the call between */
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ipuof_model_compile_with(c, onnx, len, h, &m), IPUOF_OK);
        assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
        if (k == 0)
            assert_int_equal(ipuof_model_set_optimizer_with(m, h2), IPUOF_OK);
        if (k == 1)
            assert_int_equal(ipuof_model_set_optimizer(m, &opt), IPUOF_OK);
        assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
        assert_int_equal(ipuof_model_read_weight(m, "W", w[k], sizeof w[k]), IPUOF_OK);
        assert_int_equal(ipuof_model_read_weight(m, "b", b[k], sizeof b[k]), IPUOF_OK);
        if (k == 0) {   /* refusals, the model untouched by them */
            assert_error(c, ipuof_model_set_optimizer_with(m, NULL), IPUOF_E_INVAL,
                         "needs compile options holding the optimizer (NULL given)");
            ipuof_compile_opts *dflt = ipuof_compile_opts_new();
            assert_error(c, ipuof_model_set_optimizer_with(m, dflt), IPUOF_E_INVAL,
                         "PopTorch's default (kind 0)");
            assert_int_equal(ipuof_compile_opts_set_optimizer_kind(dflt, IPUOF_OPTIMIZER_ADAM),
                             IPUOF_OK);
            assert_int_equal(ipuof_model_set_optimizer_with(m, dflt), IPUOF_E_INVAL);
            printf("  a kind other than the compile's: %s\n", ipuof_client_errmsg(c));
            assert_non_null(strstr(ipuof_client_errmsg(c), "compiled for SGD; switching to Adam"));
            ipuof_compile_opts_free(dflt);
        }
        ipuof_model_free(m);
        m = NULL;
    }
    assert_memory_equal(w[0], w[1], sizeof w[0]);
    assert_memory_equal(b[0], b[1], sizeof b[0]);
    assert_memory_not_equal(w[0], w[2], sizeof w[0]);
    assert_memory_not_equal(b[0], b[2], sizeof b[0]);

    ipuof_compile_opts_free(h);
    ipuof_compile_opts_free(h2);
    assert_int_equal(ipuof_detach(c), IPUOF_OK);
    ipuof_client_free(c);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* 1 when every value of v[0..n) is a float16 value (its 13 lowest mantissa bits zero; the
 * linear model's state is well inside float16's range). */
static int
all_half(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        if (bits & 0x1fffu)
            return 0;
    }
    return 1;
}

/* The float16 parameters of a handle reach the daemon at the compile and through
 * ipuof_model_set_optimizer_with: with IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16 SGD's momentum
 * buffer holds float16 values after a step, without it not all are. */
static void
test_half_params_daemon(void **state)
{
    static struct testd d; /* static: the teardown may use it after a failed assertion */
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    float x[2 * RB * RK], mb[RN * RK];
    int64_t y[2 * RB];
    struct ipuof_tensor in[2] = {{"x", IPUOF_DTYPE_FLOAT, 2, {2 * RB, RK}, x, sizeof x},
                                 {"y", IPUOF_DTYPE_INT64, 1, {2 * RB}, y, sizeof y}};
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    ipuof_client *c;
    ipuof_model *m = NULL;
    void *onnx = NULL;
    size_t len = 0;
    int half[3];

    (void)state;
    c = linear_setup(&d, &ao, x, y, &onnx, &len);
    assert_non_null(h);
    assert_int_equal(ipuof_compile_opts_set_device_iterations(h, 2), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_loss(h, "loss"), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_kind(h, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, 0.1),
                     IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_MOMENTUM, 0.9),
                     IPUOF_OK);
    /* [0]: float32 state; [1]: float16 from the compile; [2]: float16 from set_optimizer_with */
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ipuof_compile_opts_set_optimizer_param(
                             h, 0, IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16, k == 1), IPUOF_OK);
        assert_int_equal(ipuof_model_compile_with(c, onnx, len, h, &m), IPUOF_OK);
        if (k == 2) {
            assert_int_equal(ipuof_compile_opts_set_optimizer_param(
                                 h, 0, IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16, 1), IPUOF_OK);
            assert_int_equal(ipuof_model_set_optimizer_with(m, h), IPUOF_OK);
        }
        assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
        assert_int_equal(ipuof_model_read_state(m, "optimizer:momentum_buffer:W", mb, sizeof mb),
                         IPUOF_OK);
        half[k] = all_half(mb, RN * RK);
        ipuof_model_free(m);
        m = NULL;
    }
    print_message("  momentum buffer all float16: float32 %d, compile %d, set_optimizer_with %d\n",
                  half[0], half[1], half[2]);
    assert_true(!half[0] && half[1] && half[2]);

    ipuof_compile_opts_free(h);
    assert_int_equal(ipuof_detach(c), IPUOF_OK);
    ipuof_client_free(c);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_arguments),
        cmocka_unit_test(test_optimizer_setters),
        cmocka_unit_test(test_optimizer_half_setters),
        cmocka_unit_test(test_training_api),
        cmocka_unit_test_teardown(test_real_daemon, testd_stop_live),
        cmocka_unit_test_teardown(test_inference_from_replicated, testd_stop_live),
        cmocka_unit_test_teardown(test_optimizer_handle_daemon, testd_stop_live),
        cmocka_unit_test_teardown(test_set_optimizer_with_daemon, testd_stop_live),
        cmocka_unit_test_teardown(test_half_params_daemon, testd_stop_live),
    };

    return cmocka_run_group_tests_name("client_train", tests, NULL, NULL);
}
