/*
 * test_client_model.c — the model API of libipuof-client against a fake daemon.
 *
 * The fake daemon is the one of fakesrv.h: a thread that accepts one connection on
 * 127.0.0.1:0, reads frames with the codec and answers with a script. It records what went
 * wrong in struct fake, and what the scripts saw in a struct seen, and the test checks both
 * after joining it.
 *
 * Covered: the chunked upload (a 5000-byte model under a 1024-byte frame payload limit
 * arrives in 5+ frames that reassemble exactly), progress callbacks, the CompileReply copied
 * into the handle, run payloads sent in the model's input order and outputs read back (and
 * grown), local dtype / shape / count / size errors with their sentences, the too-large
 * error, an upload the daemon rejects early (with late Errors for chunks on the way), the
 * timeout applying to the gap between frames,
 * a notice during a compile, and a run reply whose sizes do not add up. The last test runs
 * against a real ipuofd (IPUOFD_BIN, skipped when it cannot be started): a chunked compile,
 * results checked against the host, output mode Final, the cache, refused uploads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../client/wire/client_internal.h"
#include "fakesrv.h"
#include "frame.h"
#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

#define MODEL_LEN 5000
#define SMALL_PAYLOAD 1024

/* ---- the fake daemon ------------------------------------------------------------------ */

/* What the scripts saw, checked by the tests: f.ctx points to one. */
struct seen {
    int frames;               /* frames that carried the model */
    int model_ok;             /* the model reassembled exactly */
    int run_ok;               /* the run payloads were the inputs in the model's order */
    int chunks_after_error;
};

/* Sends CompileProgress done/total for request id. */
static void
fs_progress(struct fake *f, int fd, uint64_t id, unsigned done, unsigned total)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileProgress p = IPUOF__COMPILE_PROGRESS__INIT;

    p.done = done;
    p.total = total;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE_PROGRESS;
    h.compile_progress = &p;
    fs_send(f, fd, &h, NULL, 0);
}

/* A tensor as the scripts describe it: float32 unless dtype says otherwise. */
struct desc {
    const char *name;
    int dtype;
    int rank;
    int64_t dims[8];
    int64_t step[8];
};

/* Bytes of a desc's run tensor. */
static uint64_t
desc_bytes(const struct desc *d)
{
    uint64_t n = ipuof_dtype_size(d->dtype);

    for (int i = 0; i < d->rank; i++)
        n *= (uint64_t)d->dims[i];
    return n;
}

/* Fills ti (pointing into d) from d. */
static void
desc_info(const struct desc *d, Ipuof__TensorInfo *ti)
{
    ipuof__tensor_info__init(ti);
    ti->name = (char *)d->name;
    ti->dtype = (Ipuof__DType)d->dtype;
    ti->n_dims = (size_t)d->rank;
    ti->dims = (int64_t *)d->dims;
    ti->n_step_dims = (size_t)d->rank;
    ti->step_dims = (int64_t *)d->step;
    ti->bytes = desc_bytes(d);
}

/* Sends a CompileReply for model model_id with the given inputs and outputs. */
static void
fs_compile_reply(struct fake *f, int fd, uint64_t id, uint32_t model_id, unsigned di,
                 unsigned replicas, const struct desc *in, size_t nin, const struct desc *out,
                 size_t nout)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileReply cr = IPUOF__COMPILE_REPLY__INIT;
    Ipuof__TensorInfo ti[8], *tp[8];
    Ipuof__MemoryReport mr[2] = {IPUOF__MEMORY_REPORT__INIT, IPUOF__MEMORY_REPORT__INIT};
    Ipuof__MemoryReport *mp[2] = {&mr[0], &mr[1]};

    for (size_t i = 0; i < nin + nout; i++) {
        desc_info(i < nin ? &in[i] : &out[i - nin], &ti[i]);
        tp[i] = &ti[i];
    }
    for (int i = 0; i < 2; i++) {
        mr[i].ipu = (uint32_t)i;
        mr[i].replica = (uint32_t)i;
        mr[i].weights_bytes = 1000;
        mr[i].activations_bytes = 2000;
        mr[i].code_bytes = 300;
        mr[i].total_bytes = 3300;
        mr[i].capacity_bytes = 943718400;
    }
    cr.model_id = model_id;
    cr.cached = 0;
    cr.n_inputs = nin;
    cr.inputs = tp;
    cr.n_outputs = nout;
    cr.outputs = tp + nin;
    cr.n_memory = 2;
    cr.memory = mp;
    cr.compile_us = 4321;
    cr.device_iterations = di;
    cr.replicas = replicas;
    cr.micro_batch = in[0].step[0] > 0 ? (uint32_t)in[0].step[0] : 0;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE_REPLY;
    h.compile_reply = &cr;
    fs_send(f, fd, &h, NULL, 0);
}

/* Sends a RunReply with outputs out[0..n) whose payload is payload[0..plen). */
static void
fs_run_reply(struct fake *f, int fd, uint64_t id, const struct desc *out, size_t n,
             const void *payload, uint32_t plen)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunReply rr = IPUOF__RUN_REPLY__INIT;
    Ipuof__TensorInfo ti[8], *tp[8];

    for (size_t i = 0; i < n; i++) {
        desc_info(&out[i], &ti[i]);
        ti[i].n_step_dims = 0;
        tp[i] = &ti[i];
    }
    rr.n_outputs = n;
    rr.outputs = tp;
    rr.run_us = 777;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_RUN_REPLY;
    h.run_reply = &rr;
    fs_send(f, fd, &h, payload, plen);
}

/* The model bytes the tests upload: a pattern the fake can check. */
static void
fill_model(uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 31 + 7);
}

/* ---- the main script: chunks, progress, reply, runs, a second model, frees ------------- */

/* Model 7: x float [8, 4] and y int64 [8] in, out float [8, 3] and loss float [2] out;
 * micro-batch 2, 2 device iterations, 2 replicas. */
static const struct desc m7_in[] = {
    {"x", IPUOF_DTYPE_FLOAT, 2, {8, 4}, {2, 4}},
    {"y", IPUOF_DTYPE_INT64, 1, {8}, {2}},
};
static const struct desc m7_out[] = {
    {"out", IPUOF_DTYPE_FLOAT, 2, {8, 3}, {2, 3}},
    {"loss", IPUOF_DTYPE_FLOAT, 1, {2}, {1}},
};
static const struct desc m7_out_grown[] = {
    {"out", IPUOF_DTYPE_FLOAT, 2, {8, 5}, {2, 5}},
    {"loss", IPUOF_DTYPE_FLOAT, 1, {2}, {1}},
};
/* Model 8: img float [800, 1, 28, 28] (micro-batch 8 x 100 device iterations x 1 replica). */
static const struct desc m8_in[] = {
    {"img", IPUOF_DTYPE_FLOAT, 4, {800, 1, 28, 28}, {8, 1, 28, 28}},
};
static const struct desc m8_out[] = {
    {"logits", IPUOF_DTYPE_FLOAT, 2, {800, 10}, {8, 10}},
};

/* The run inputs of model 7 as the test fills them. */
static void
m7_inputs(float *x, int64_t *y)
{
    for (int i = 0; i < 32; i++)
        x[i] = (float)i + 0.25f;
    for (int i = 0; i < 8; i++)
        y[i] = 100 + i;
}

/* Reads every chunk of the model whose compile request req (only read) was just read;
 * checks frame sizes, ids, offsets and that the bytes reassemble exactly. */
static uint64_t
fs_read_model(struct fake *f, int fd, const Ipuof__Header *req)
{
    uint64_t id = req->request_id;
    uint64_t total = req->compile->model_bytes;
    uint8_t *model = malloc(total);
    uint8_t *want = malloc(total);
    uint64_t got = 0;
    struct seen *seen = f->ctx;

    if (model == NULL || want == NULL) {
        fake_fail(f, "server: out of memory");
        goto out;
    }
    for (;;) {
        Ipuof__Header *ch;

        if (IPUOF_FRAME_HEAD_LEN + f->header_len + f->payload_len > f->max_payload)
            fake_fail(f, "server: a frame is larger than max_payload_bytes");
        if (got + f->payload_len > total || seen->frames > 100000) {
            fake_fail(f, "server: more model bytes or frames than announced");
            goto out;
        }
        memcpy(model + got, f->payload, f->payload_len);
        got += f->payload_len;
        seen->frames++;
        if (got == total)
            break;
        ch = fs_expect(f, fd, IPUOF__HEADER__BODY_MODEL_CHUNK);
        if (ch == NULL)
            goto out;
        if (ch->request_id != id || ch->model_chunk->offset != got)
            fake_fail(f, "server: chunk with a wrong id or offset");
        ipuof_frame_header_free(ch);
    }
    fill_model(want, total);
    seen->model_ok = memcmp(model, want, total) == 0;
out:
    free(model);
    free(want);
    return id;
}

/* Reads a RunRequest for model 7 and checks its descriptions and payload (x then y). */
static uint64_t
fs_read_run7(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_RUN);
    float x[32];
    int64_t y[8];
    uint64_t id;
    const Ipuof__RunRequest *rr;
    struct seen *seen = f->ctx;

    if (req == NULL)
        return 0;
    id = req->request_id;
    rr = req->run;
    m7_inputs(x, y);
    if (rr->model_id == 7 && rr->n_inputs == 2 && strcmp(rr->inputs[0]->name, "x") == 0 &&
        strcmp(rr->inputs[1]->name, "y") == 0 && rr->inputs[0]->n_dims == 2 &&
        rr->inputs[0]->dims[0] == 8 && rr->inputs[0]->dims[1] == 4 &&
        rr->inputs[1]->dtype == IPUOF__DTYPE__DTYPE_INT64 && rr->inputs[0]->bytes == 128 &&
        rr->inputs[1]->bytes == 64 && f->payload_len == 192 &&
        memcmp(f->payload, x, 128) == 0 && memcmp(f->payload + 128, y, 64) == 0)
        seen->run_ok++;
    ipuof_frame_header_free(req);
    return id;
}

static void
script_main(struct fake *f, int fd)
{
    Ipuof__Header *req;
    uint64_t id;
    float out[2 + 8 * 5];

    if (fs_hello(f, fd) != 0 || fs_attach(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    {
        const Ipuof__CompileRequest *cr = req->compile;
        if (cr->model_bytes != MODEL_LEN || strcmp(cr->name, "unit-model") != 0 ||
            cr->device_iterations != 2 || cr->replicas != 2 || cr->micro_batch != 0 ||
            cr->default_mode == NULL || cr->default_mode->kind != IPUOF__OUTPUT_KIND__OUTPUT_ALL ||
            cr->n_output_modes != 1 || strcmp(cr->output_modes[0]->name, "loss") != 0 ||
            cr->output_modes[0]->kind != IPUOF__OUTPUT_KIND__OUTPUT_FINAL || !cr->no_cache)
            fake_fail(f, "server: compile request fields");
    }
    id = fs_read_model(f, fd, req);
    ipuof_frame_header_free(req);
    fs_progress(f, fd, id, 1, 2);
    fs_progress(f, fd, id, 2, 2);
    fs_compile_reply(f, fd, id, 7, 2, 2, m7_in, 2, m7_out, 2);

    /* Run 1: outputs as compiled. */
    for (int i = 0; i < 26; i++)
        out[i] = (float)i * 0.5f;
    id = fs_read_run7(f, fd);
    fs_run_reply(f, fd, id, m7_out, 2, out, 26 * 4);
    /* Run 2: a larger first output, which the client must grow its buffer for. */
    for (int i = 0; i < 42; i++)
        out[i] = (float)i - 1.0f;
    id = fs_read_run7(f, fd);
    fs_run_reply(f, fd, id, m7_out_grown, 2, out, 42 * 4);

    /* Model 8 fits one frame; the client's checks keep its runs from being sent. */
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    if (req->compile->model_bytes != 100 || f->payload_len != 100 ||
        strcmp(req->compile->name, "model") != 0)
        fake_fail(f, "server: second compile request");
    fs_compile_reply(f, fd, req->request_id, 8, 100, 1, m8_in, 1, m8_out, 1);
    ipuof_frame_header_free(req);
    fs_free_model(f, fd, 8);
    fs_free_model(f, fd, 7);
    fs_expect_eof(f, fd);
}

struct progress_log {
    int n;
    int done[8];
    int total[8];
};

/* Progress callback: logs what it is given. */
static void
log_progress(int done, int total, void *user)
{
    struct progress_log *p = user;

    if (p->n < 8) {
        p->done[p->n] = done;
        p->total[p->n] = total;
    }
    p->n++;
}

/* Model m as the fake compiled it, its progress in plog: what the daemon said, copied. */
static void
check_compiled_model(ipuof_model *m, const struct progress_log *plog)
{
    struct ipuof_tensor t;
    int64_t step[8];
    unsigned ipu;
    uint64_t total;

    assert_int_equal(plog->n, 2);
    assert_int_equal(plog->done[0], 1);
    assert_int_equal(plog->done[1], 2);
    assert_int_equal(plog->total[1], 2);
    assert_int_equal(ipuof_model_input_count(m), 2);
    assert_int_equal(ipuof_model_output_count(m), 2);
    assert_int_equal(ipuof_model_device_iterations(m), 2);
    assert_int_equal(ipuof_model_replicas(m), 2);
    assert_int_equal(ipuof_model_micro_batch(m), 2);
    assert_int_equal(ipuof_model_cached(m), 0);
    assert_int_equal(ipuof_model_compile_us(m), 4321);
    assert_int_equal(ipuof_model_input_info(m, 1, &t, step), IPUOF_OK);
    assert_string_equal(t.name, "y");
    assert_int_equal(t.dtype, IPUOF_DTYPE_INT64);
    assert_int_equal(t.rank, 1);
    assert_int_equal(t.dims[0], 8);
    assert_int_equal(t.bytes, 64);
    assert_null(t.data);
    assert_int_equal(step[0], 2);
    assert_int_equal(step[1], -1);
    assert_int_equal(ipuof_model_output_info(m, 0, &t, NULL), IPUOF_OK);
    assert_string_equal(t.name, "out");
    assert_int_equal(ipuof_model_input_info(m, 2, &t, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_input_index(m, "y"), 1);
    assert_int_equal(ipuof_model_input_index(m, "z"), -1);
    assert_int_equal(ipuof_model_output_index(m, "loss"), 1);
    assert_int_equal(ipuof_model_ipu_count(m), 2);
    assert_int_equal(ipuof_model_memory(m, 1, &ipu, NULL, NULL, NULL, &total, NULL), IPUOF_OK);
    assert_int_equal(ipu, 1);
    assert_int_equal(total, 3300);
    assert_int_equal(ipuof_model_memory(m, 2, NULL, NULL, NULL, NULL, NULL, NULL),
                     IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_E_STATE);
}

/* Model 8 (from bytes): a run of 800 images is more than one 1024-byte frame carries;
 * a wrong shape and the oversized run are refused locally, saying what would fit. */
static void
check_run_too_large(ipuof_client *c, const uint8_t *bytes)
{
    ipuof_model *m8 = NULL;
    struct ipuof_tensor in[1];
    float *img;

    assert_int_equal(ipuof_model_compile(c, bytes, 100, NULL, &m8), IPUOF_OK);
    img = calloc(800 * 28 * 28, sizeof *img);
    assert_non_null(img);
    in[0] = (struct ipuof_tensor){"img", IPUOF_DTYPE_FLOAT, 4, {8, 1, 28, 28}, img,
                                  8 * 28 * 28 * 4};
    assert_error(c, ipuof_model_run(m8, in, 1), IPUOF_E_SHAPE,
                 "input 'img' has shape [8, 1, 28, 28] but the model expects [800, 1, 28, 28] "
                 "(micro-batch 8 x 100 device iterations x 1 replica)");
    in[0] = (struct ipuof_tensor){"img", IPUOF_DTYPE_FLOAT, 4, {800, 1, 28, 28}, img,
                                  800 * 28 * 28 * 4};
    assert_error(c, ipuof_model_run(m8, in, 1), IPUOF_E_TOO_LARGE, "accepts at most 1024");
    assert_non_null(strstr(ipuof_client_errmsg(c), "fewer device iterations"));
    assert_non_null(strstr(ipuof_client_errmsg(c), "max_payload_bytes"));
    free(img);
    ipuof_model_free(m8);
}

static void
test_compile_chunks_progress_run(void **state)
{
    struct fake f;
    struct seen seen = {0};
    struct ipuof_output_mode modes[1] = {{"loss", IPUOF_OUTPUT_FINAL, 0}};
    struct progress_log plog = {0};
    struct ipuof_model_opts o = {.name = "unit-model", .device_iterations = 2, .replicas = 2,
                                 .default_output_kind = IPUOF_OUTPUT_ALL,
                                 .output_modes = modes, .n_output_modes = 1, .no_cache = 1,
                                 .progress = log_progress, .progress_user = &plog};
    uint8_t *bytes = malloc(MODEL_LEN);
    ipuof_client *c;
    ipuof_model *m = NULL;
    struct ipuof_tensor t, in[2];
    float x[32];
    int64_t y[8];

    (void)state;
    assert_non_null(bytes);
    fill_model(bytes, MODEL_LEN);
    fake_start(&f, script_main, SMALL_PAYLOAD, 0);
    f.ctx = &seen;
    c = new_attached(&f, 2000);
    assert_int_equal(ipuof_model_compile(c, bytes, MODEL_LEN, &o, &m), IPUOF_OK);
    assert_non_null(m);
    check_compiled_model(m, &plog);

    /* Local checks: nothing reaches the fake (its script would fail on a stray frame). */
    m7_inputs(x, y);
    in[0] = (struct ipuof_tensor){"y", IPUOF_DTYPE_INT64, 1, {8}, y, sizeof y};
    in[1] = (struct ipuof_tensor){"x", IPUOF_DTYPE_FLOAT, 2, {2, 4}, x, 32};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_SHAPE,
                 "input 'x' has shape [2, 4] but the model expects [8, 4] (micro-batch 2 x 2 "
                 "device iterations x 2 replicas)");
    in[1] = (struct ipuof_tensor){"x", IPUOF_DTYPE_INT32, 2, {8, 4}, x, sizeof x};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_DTYPE,
                 "input 'x' has dtype int32 but model 'unit-model' expects float");
    in[1] = (struct ipuof_tensor){"x", IPUOF_DTYPE_FLOAT, 2, {8, 4}, x, 100};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_INVAL, "holds 100 bytes");
    in[1] = (struct ipuof_tensor){"z", IPUOF_DTYPE_FLOAT, 2, {8, 4}, x, sizeof x};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_INVAL,
                 "'z' is not an input of model 'unit-model'; its inputs are 'x', 'y'");
    in[1] = (struct ipuof_tensor){"y", IPUOF_DTYPE_INT64, 1, {8}, y, sizeof y};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_INVAL, "given twice");
    in[1] = (struct ipuof_tensor){NULL, IPUOF_DTYPE_FLOAT, 2, {8, 4}, x, sizeof x};
    assert_error(c, ipuof_model_run(m, in, 2), IPUOF_E_INVAL, "no name");
    assert_error(c, ipuof_model_run(m, in, 1), IPUOF_E_INVAL, "takes 2 inputs ('x', 'y')");

    /* Run 1 by name, in the opposite order: the payload goes in the model's order. */
    in[1] = (struct ipuof_tensor){"x", IPUOF_DTYPE_FLOAT, 2, {8, 4}, x, sizeof x};
    assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
    assert_string_equal(ipuof_client_errmsg(c), "");
    assert_int_equal(ipuof_model_run_us(m), 777);
    assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_OK);
    assert_string_equal(t.name, "out");
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.dims[1], 3);
    assert_int_equal(t.bytes, 96);
    assert_true(((const float *)t.data)[5] == 2.5f);
    assert_int_equal(ipuof_model_output(m, 1, &t), IPUOF_OK);
    assert_int_equal(t.bytes, 8);
    assert_true(((const float *)t.data)[1] == 12.5f);
    assert_int_equal(ipuof_model_output(m, 2, &t), IPUOF_E_INVAL);

    /* Run 2 in order without names; the reply grows the first output. */
    in[0] = (struct ipuof_tensor){NULL, IPUOF_DTYPE_FLOAT, 2, {8, 4}, x, sizeof x};
    in[1] = (struct ipuof_tensor){NULL, IPUOF_DTYPE_INT64, 1, {8}, y, sizeof y};
    assert_int_equal(ipuof_model_run(m, in, 2), IPUOF_OK);
    assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_OK);
    assert_int_equal(t.dims[1], 5);
    assert_int_equal(t.bytes, 160);
    assert_true(((const float *)t.data)[39] == 38.0f);
    assert_int_equal(ipuof_model_output(m, 1, &t), IPUOF_OK);
    assert_true(((const float *)t.data)[0] == 39.0f);

    check_run_too_large(c, bytes);

    ipuof_model_free(m);
    ipuof_client_free(c);
    fake_stop(&f);
    print_message("  the model arrived in %d frames\n", seen.frames);
    assert_true(seen.frames >= 5);
    assert_true(seen.model_ok);
    assert_int_equal(seen.run_ok, 2);
    free(bytes);
}

/* ---- an upload the daemon rejects at once ----------------------------------------------- */

#define BIG_MODEL (200 * 1024)

/* Refuses the upload after its first two chunks have arrived, as a daemon whose answer was
 * slower than the client: the Error for the request, then one Error for each chunk that
 * arrives after the refusal (as ipuofd does), so stale Errors sit in the stream. Counts the
 * chunks still sent after the refusal, then answers the health request that follows. */
static void
script_reject_early(struct fake *f, int fd)
{
    Ipuof__Header *req;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;
    uint64_t id;
    struct seen *seen = f->ctx;

    if (fs_hello(f, fd) != 0 || fs_attach(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    id = req->request_id;
    ipuof_frame_header_free(req);
    for (int i = 0; i < 2; i++) {
        req = fs_expect(f, fd, IPUOF__HEADER__BODY_MODEL_CHUNK);
        if (req == NULL)
            return;
        ipuof_frame_header_free(req);
    }
    fs_send_error(f, fd, id, IPUOF_E_TOO_LARGE, "compiler",
                  "the model is 204800 bytes; this ipuofd compiles models of at most 4096");
    fs_send_error(f, fd, id, IPUOF_E_PROTO, "compiler", "model chunk for a refused upload");
    usleep(100 * 1000); /* the client fills the socket and waits */
    for (;;) {
        req = fs_read(f, fd, 0);
        if (req == NULL)
            return;
        if (req->body_case != IPUOF__HEADER__BODY_MODEL_CHUNK)
            break;
        seen->chunks_after_error++;
        fs_send_error(f, fd, id, IPUOF_E_PROTO, "compiler", "model chunk for a refused upload");
        ipuof_frame_header_free(req);
    }
    if (req->body_case != IPUOF__HEADER__BODY_HEALTH)
        fake_fail(f, "server: expected a health request after the chunks");
    hr.live = 1;
    hr.ready = 1;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
    h.health_reply = &hr;
    fs_send(f, fd, &h, NULL, 0);
    ipuof_frame_header_free(req);
    fs_expect_eof(f, fd);
}

static void
test_compile_rejected_early(void **state)
{
    struct fake f;
    struct seen seen = {0};
    uint8_t *bytes = malloc(BIG_MODEL);
    ipuof_client *c;
    ipuof_model *m = (ipuof_model *)&f;
    int sndbuf = 4096;
    int ready = 0;
    int chunks = BIG_MODEL / SMALL_PAYLOAD;

    (void)state;
    assert_non_null(bytes);
    fill_model(bytes, BIG_MODEL);
    fake_start(&f, script_reject_early, SMALL_PAYLOAD, 4096);
    f.ctx = &seen;
    c = new_attached(&f, 5000);
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
    assert_error(c, ipuof_model_compile(c, bytes, BIG_MODEL, NULL, &m), IPUOF_E_TOO_LARGE,
                 "compiles models of at most 4096");
    assert_null(m);
    /* The stream stayed in step and the late Errors about the refused upload are dropped:
     * the next request works. */
    assert_int_equal(ipuof_health(c, &ready), IPUOF_OK);
    assert_int_equal(ready, 1);
    ipuof_client_free(c);
    fake_stop(&f);
    print_message("  %d of about %d chunks were sent after the error\n", seen.chunks_after_error,
                  chunks);
    assert_true(seen.chunks_after_error < chunks / 2);
    free(bytes);
}

/* ---- progress spaced wider than the timeout; a notice during a compile ------------------- */

static const struct desc m3_in[] = {{"a", IPUOF_DTYPE_FLOAT, 1, {4}, {4}}};
static const struct desc m3_out[] = {{"b", IPUOF_DTYPE_FLOAT, 1, {4}, {4}}};

static void
script_slow_then_reset(struct fake *f, int fd)
{
    Ipuof__Header *req;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Notice n = IPUOF__NOTICE__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;

    if (fs_hello(f, fd) != 0 || fs_attach(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    for (unsigned i = 1; i <= 4; i++) {
        usleep(120 * 1000);
        fs_progress(f, fd, req->request_id, i, 4);
    }
    usleep(120 * 1000);
    fs_compile_reply(f, fd, req->request_id, 3, 1, 1, m3_in, 1, m3_out, 1);
    ipuof_frame_header_free(req);

    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    fs_progress(f, fd, req->request_id, 1, 4);
    e.code = IPUOF_E_DEVICE_RESET;
    e.component = (char *)"device";
    e.message = (char *)"partition 'p' was reset by an administrator; attach again";
    n.error = &e;
    h.body_case = IPUOF__HEADER__BODY_NOTICE;
    h.notice = &n;
    fs_send(f, fd, &h, NULL, 0);
    fs_send_error(f, fd, req->request_id, IPUOF_E_DEVICE_RESET, "compiler",
                  "the compile was cancelled: partition 'p' was reset by an administrator");
    ipuof_frame_header_free(req);
    fs_expect_eof(f, fd); /* no free, no detach: the partition is gone */
}

static void
test_progress_gaps_and_notice(void **state)
{
    struct fake f;
    struct progress_log plog = {0};
    struct ipuof_model_opts o = {.progress = log_progress, .progress_user = &plog};
    uint8_t bytes[64];
    float a[4] = {1, 2, 3, 4};
    struct ipuof_tensor in = {NULL, IPUOF_DTYPE_FLOAT, 1, {4}, a, sizeof a};
    ipuof_client *c;
    ipuof_model *m = NULL, *m2 = NULL;

    (void)state;
    fill_model(bytes, sizeof bytes);
    fake_start(&f, script_slow_then_reset, 1u << 20, 0);
    c = new_attached(&f, 300);
    /* 600 ms in all, never 300 ms without a frame. */
    assert_int_equal(ipuof_model_compile(c, bytes, sizeof bytes, &o, &m), IPUOF_OK);
    assert_int_equal(plog.n, 4);
    assert_int_equal(plog.done[3], 4);
    assert_error(c, ipuof_model_compile(c, bytes, sizeof bytes, &o, &m2), IPUOF_E_DEVICE_RESET,
                 "the compile was cancelled");
    assert_null(m2);
    assert_null(ipuof_partition_name(c));
    /* Told once: the notice is not reported again. */
    assert_error(c, ipuof_model_run(m, &in, 1), IPUOF_E_NOT_ATTACHED, "no longer holds");
    assert_error(c, ipuof_detach(c), IPUOF_E_NOT_ATTACHED, NULL);
    ipuof_model_free(m); /* nothing is sent for a model whose partition is gone */
    ipuof_client_free(c);
    fake_stop(&f);
}

/* ---- a run reply whose sizes do not add up --------------------------------------------- */

static void
script_bad_run_reply(struct fake *f, int fd)
{
    Ipuof__Header *req;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;
    float junk[3] = {0};

    if (fs_hello(f, fd) != 0 || fs_attach(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    fs_compile_reply(f, fd, req->request_id, 3, 1, 1, m3_in, 1, m3_out, 1);
    ipuof_frame_header_free(req);
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_RUN);
    if (req == NULL)
        return;
    if (f->payload_len != 16)
        fake_fail(f, "server: run payload");
    fs_run_reply(f, fd, req->request_id, m3_out, 1, junk, sizeof junk); /* 12 bytes, not 16 */
    ipuof_frame_header_free(req);
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_HEALTH);
    if (req == NULL)
        return;
    hr.live = 1;
    hr.ready = 1;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
    h.health_reply = &hr;
    fs_send(f, fd, &h, NULL, 0);
    ipuof_frame_header_free(req);
    fs_free_model(f, fd, 3);
    fs_expect_eof(f, fd);
}

static void
test_bad_run_reply(void **state)
{
    struct fake f;
    uint8_t bytes[16];
    float a[4] = {1, 2, 3, 4};
    struct ipuof_tensor in = {"a", IPUOF_DTYPE_FLOAT, 1, {4}, a, sizeof a};
    struct ipuof_tensor t;
    ipuof_client *c;
    ipuof_model *m = NULL;

    (void)state;
    fill_model(bytes, sizeof bytes);
    fake_start(&f, script_bad_run_reply, 1u << 20, 0);
    c = new_attached(&f, 2000);
    assert_int_equal(ipuof_model_compile(c, bytes, sizeof bytes, NULL, &m), IPUOF_OK);
    assert_error(c, ipuof_model_run(m, &in, 1), IPUOF_E_PROTO, "add up to 16 bytes");
    assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_E_STATE);
    assert_int_equal(ipuof_health(c, NULL), IPUOF_OK);
    ipuof_model_free(m);
    ipuof_client_free(c);
    fake_stop(&f);
}

/* ---- against a real ipuofd ------------------------------------------------------------- */

#define E2E_B 4   /* micro-batch */
#define E2E_K 32  /* features in */
#define E2E_N 48  /* features out */
#define E2E_D 2   /* device iterations */

/* y = Relu(x W + b) with x [B, K], W [K, N], b [N]: ONNX bytes (caller frees) in *out. */
static void
e2e_model(const float *w, const float *bias, void **out, size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t dx[2] = {E2E_B, E2E_K}, dw[2] = {E2E_K, E2E_N}, db[1] = {E2E_N};

    assert_non_null(b);
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_initializer(b, "W", IPUOF_DTYPE_FLOAT, 2, dw, w);
    sim_ob_initializer(b, "b", IPUOF_DTYPE_FLOAT, 1, db, bias);
    sim_ob_node(b, "MatMul", "mm", "x,W", "xw");
    sim_ob_node(b, "Add", "add", "xw,b", "z");
    sim_ob_node(b, "Relu", "relu", "z", "y");
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, out, len), 0);
    sim_ob_free(b);
}

/* Max |y - Relu(x W + b)| over rows rows of x (row-major) and y. */
static double
e2e_maxdiff(const float *x, const float *w, const float *bias, const float *y, int rows)
{
    double worst = 0;

    for (int r = 0; r < rows; r++) {
        for (int n = 0; n < E2E_N; n++) {
            double acc = bias[n];
            double d;

            for (int k = 0; k < E2E_K; k++)
                acc += (double)x[r * E2E_K + k] * w[k * E2E_N + n];
            d = (acc > 0 ? acc : 0) - y[r * E2E_N + n];
            if (d < 0)
                d = -d;
            if (d > worst)
                worst = d;
        }
    }
    return worst;
}

static void
test_real_daemon(void **state)
{
    static const char conf[] = "[server]\nmax_payload_bytes = 4096\n"
                               "max_output_bytes = 8388608\nmax_model_bytes = 65536\n";
    static float w[E2E_K * E2E_N], bias[E2E_N], x[E2E_D * E2E_B * E2E_K];
    static uint8_t junk[100000];
    static struct testd d; /* static: the teardown may use it after a failed assertion */
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_model_opts o = {.name = "e2e", .device_iterations = E2E_D};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {E2E_D * E2E_B, E2E_K}, x, sizeof x};
    struct ipuof_tensor t;
    ipuof_client *c;
    ipuof_model *m = NULL, *mf = NULL, *mc = NULL, *bad = NULL;
    void *onnx = NULL;
    size_t len = 0;
    double diff;

    (void)state;
    if (testd_start(&d, conf, NULL) != 0) {
        fail_msg("could not start ipuofd (IPUOFD_BIN, default build/bin/ipuofd): "
                 "a daemon that does not start is a failure");
    }
    testd_live = &d;
    for (int i = 0; i < E2E_K * E2E_N; i++)
        w[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < E2E_N; i++)
        bias[i] = (float)(i % 5) * 0.1f - 0.2f;
    for (int i = 0; i < E2E_D * E2E_B * E2E_K; i++)
        x[i] = (float)((i * 13) % 23) / 23.0f - 0.4f;
    e2e_model(w, bias, &onnx, &len);
    print_message("  model of %zu bytes, frame payload limit 4096\n", len);
    assert_true(len > 4096); /* the upload takes more than one frame */

    c = ipuof_client_new();
    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);
    assert_int_equal(ipuof_model_compile(c, onnx, len, &o, &m), IPUOF_OK);
    assert_int_equal(ipuof_model_input_info(m, 0, &t, NULL), IPUOF_OK);
    assert_int_equal(t.dims[0], E2E_D * E2E_B);
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_OK);
    assert_string_equal(t.name, "y");
    assert_int_equal(t.dims[0], E2E_D * E2E_B);
    assert_int_equal(t.dims[1], E2E_N);
    diff = e2e_maxdiff(x, w, bias, t.data, E2E_D * E2E_B);
    print_message("  output mode All: max |difference| from the host %g\n", diff);
    assert_true(diff < 1e-4);

    /* Final: the last micro-batch only. */
    o.default_output_kind = IPUOF_OUTPUT_FINAL;
    assert_int_equal(ipuof_model_compile(c, onnx, len, &o, &mf), IPUOF_OK);
    assert_int_equal(ipuof_model_run(mf, &in, 1), IPUOF_OK);
    assert_int_equal(ipuof_model_output(mf, 0, &t), IPUOF_OK);
    assert_int_equal(t.dims[0], E2E_B);
    diff = e2e_maxdiff(x + (E2E_D - 1) * E2E_B * E2E_K, w, bias, t.data, E2E_B);
    print_message("  output mode Final: max |difference| from the host %g\n", diff);
    assert_true(diff < 1e-4);

    /* Freed, its executable goes back to the cache: the same model and options hit it (a
     * cache entry serves one live model at a time). */
    ipuof_model_free(mf);
    o.default_output_kind = IPUOF_OUTPUT_FINAL;
    assert_int_equal(ipuof_model_compile(c, onnx, len, &o, &mc), IPUOF_OK);
    print_message("  compiled again after a free: cached %d\n", ipuof_model_cached(mc));
    assert_int_equal(ipuof_model_cached(mc), 1);
    assert_int_equal(ipuof_model_compile_us(mc), 0);

    /* Refused uploads, chunks still on the way: the connection stays usable every time. */
    for (int i = 0; i < 20; i++) {
        assert_error(c, ipuof_model_compile(c, junk, sizeof junk, NULL, &bad),
                     IPUOF_E_TOO_LARGE, "max_model_bytes");
        assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    }
    ipuof_model_free(mc);
    ipuof_model_free(m);
    assert_int_equal(ipuof_detach(c), IPUOF_OK);
    ipuof_client_free(c);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* ---- without a daemon ------------------------------------------------------------------ */

static void
test_names_null_unconnected(void **state)
{
    ipuof_client *c = ipuof_client_new();
    ipuof_model *m = (ipuof_model *)c;
    struct ipuof_tensor t;
    uint8_t b[4] = {0};

    (void)state;
    assert_string_equal(ipuof_dtype_name(IPUOF_DTYPE_FLOAT), "float");
    assert_string_equal(ipuof_dtype_name(IPUOF_DTYPE_BOOL), "bool");
    assert_string_equal(ipuof_dtype_name(42), "unknown");
    assert_int_equal(ipuof_dtype_size(IPUOF_DTYPE_INT64), 8);
    assert_int_equal(ipuof_dtype_size(IPUOF_DTYPE_UINT8), 1);
    assert_int_equal(ipuof_dtype_size(0), 0);

    ipuof_model_free(NULL);
    assert_int_equal(ipuof_model_input_count(NULL), 0);
    assert_int_equal(ipuof_model_output_count(NULL), 0);
    assert_int_equal(ipuof_model_input_info(NULL, 0, &t, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_output(NULL, 0, &t), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_run(NULL, NULL, 0), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_input_index(NULL, "x"), -1);
    assert_int_equal(ipuof_model_cached(NULL), 0);
    assert_int_equal(ipuof_model_run_us(NULL), 0);
    assert_int_equal(ipuof_model_memory(NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL),
                     IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_compile(NULL, b, sizeof b, NULL, &m), IPUOF_E_INVAL);
    assert_null(m);

    assert_error(c, ipuof_model_compile(c, NULL, 0, NULL, &m), IPUOF_E_INVAL, "bytes");
    assert_error(c, ipuof_model_compile(c, b, sizeof b, NULL, &m), IPUOF_E_CLOSED,
                 "not connected");
    {
        struct ipuof_model_opts o = {.default_output_kind = IPUOF_OUTPUT_EVERYN};
        assert_error(c, ipuof_model_compile(c, b, sizeof b, &o, &m), IPUOF_E_INVAL, "n = 0");
    }
    assert_error(c, ipuof_model_compile_file(c, "/nonexistent/m.onnx", NULL, &m),
                 IPUOF_E_NOTFOUND, "/nonexistent/m.onnx");
    assert_error(c, ipuof_model_compile_file(c, "/", NULL, &m), IPUOF_E_INVAL,
                 "not a regular file");
    ipuof_client_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_null_unconnected),
        cmocka_unit_test(test_compile_chunks_progress_run),
        cmocka_unit_test(test_compile_rejected_early),
        cmocka_unit_test(test_progress_gaps_and_notice),
        cmocka_unit_test(test_bad_run_reply),
        cmocka_unit_test_teardown(test_real_daemon, testd_stop_live),
    };

    return cmocka_run_group_tests_name("client_model", tests, NULL, NULL);
}
