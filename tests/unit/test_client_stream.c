/*
 * test_client_stream.c — libipuof-client taking a run's outputs in RunOutputs frames
 * (client/model/outputs.c), against a fake daemon (fakesrv.h) that sends them piece by piece.
 *
 * Covered: every run asks stream_outputs (and IPUOF_STREAM_OUTPUTS=0 turns it off); pieces
 * of two outputs in several frames land in place and the empty RunReply completes the run;
 * a daemon that does not stream (one RunReply) still works; and each way a daemon can get
 * the stream wrong is refused with IPUOF_E_PROTO naming what was wrong, the outputs left
 * unavailable, and the connection closed when more frames may follow (the rest of the
 * stream is not the client's) or kept when the refused frame was the RunReply:
 * no description first, a second description, a gap or overlap, a piece past its output,
 * an output index out of range, more pieces than outputs, pieces that do not add up to the
 * payload, a RunReply with a payload after the stream, a RunReply before every byte came.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakesrv.h"
#include "frame.h"
#include "ipuof/client.h"

/* The model: a float [4] in; out0 float [4] and out1 float [2] out. */
static const int64_t a_dims[1] = {4}, o0_dims[1] = {4}, o1_dims[1] = {2};

/* Fills ti as a float tensor name of n dims (one rank). */
static void
info(Ipuof__TensorInfo *ti, const char *name, const int64_t *dims)
{
    ipuof__tensor_info__init(ti);
    ti->name = (char *)name;
    ti->dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti->n_dims = 1;
    ti->dims = (int64_t *)dims;
    ti->n_step_dims = 1;
    ti->step_dims = (int64_t *)dims;
    ti->bytes = (uint64_t)dims[0] * 4;
}

static void
compile_reply(struct fake *f, int fd, uint64_t id)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileReply cr = IPUOF__COMPILE_REPLY__INIT;
    Ipuof__TensorInfo ti[3], *tp[3] = {&ti[0], &ti[1], &ti[2]};

    info(&ti[0], "a", a_dims);
    info(&ti[1], "out0", o0_dims);
    info(&ti[2], "out1", o1_dims);
    cr.model_id = 5;
    cr.n_inputs = 1;
    cr.inputs = tp;
    cr.n_outputs = 2;
    cr.outputs = tp + 1;
    cr.device_iterations = 1;
    cr.replicas = 1;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE_REPLY;
    h.compile_reply = &cr;
    fs_send(f, fd, &h, NULL, 0);
}

/* One frame the fake sends: RunOutputs (describe: with the descriptions; pieces as
 * (output, offset, length) triples, the payload their bytes of the values the run returns,
 * out0 = 1 2 3 4 and out1 = 5 6, cut or padded to plen) or, with reply, the RunReply (its
 * payload plen bytes of those values from byte off). */
struct frame {
    int reply;
    int describe;
    int npieces;
    uint32_t piece[3][3];
    uint32_t off, plen;
};

/* The cases: the frames, and what the client must say (NULL: the run succeeds). */
struct scase {
    const char *name;
    struct frame fr[4];
    int nfr;
    const char *err;
};

#define P(o, off, len) {o, off, len}
static const struct scase cases[] = {
    {"good: two frames, then the reply", {
         {0, 1, 2, {P(0, 0, 8), P(1, 0, 4)}, 0, 12},
         {0, 0, 2, {P(0, 8, 8), P(1, 4, 4)}, 12, 12},
         {1, 0, 0, {{0}}, 0, 0}}, 3, NULL},
    {"good: no stream (one RunReply)", {{1, 0, 0, {{0}}, 0, 24}}, 1, NULL},
    {"no description", {{0, 0, 1, {P(0, 0, 4)}, 0, 4}}, 1, "without describing them"},
    {"described twice", {
         {0, 1, 1, {P(0, 0, 4)}, 0, 4},
         {0, 1, 1, {P(0, 4, 4)}, 4, 4}}, 2, "a second time"},
    {"a gap", {{0, 1, 1, {P(0, 4, 4)}, 0, 4}}, 1, "sent bytes [4, +4) of output 0"},
    {"an overlap", {
         {0, 1, 1, {P(0, 0, 8)}, 0, 8},
         {0, 0, 1, {P(0, 4, 8)}, 8, 8}}, 2, "the next are [8, +8 at most)"},
    {"past the output", {{0, 1, 1, {P(1, 0, 12)}, 0, 12}}, 1, "of output 1 ('out1')"},
    {"output out of range", {{0, 1, 1, {P(2, 0, 4)}, 0, 4}}, 1, "model 'model' has 2"},
    {"too many pieces", {{0, 1, 3, {P(0, 0, 4), P(0, 4, 4), P(1, 0, 4)}, 0, 12}}, 1,
     "at most 2 (one per output)"},
    {"pieces short of the payload", {{0, 1, 1, {P(0, 0, 4)}, 0, 8}}, 1,
     "8 payload bytes whose pieces add up to 4"},
    {"pieces past the payload", {{0, 1, 1, {P(0, 0, 8)}, 0, 4}}, 1, "a payload with 4 left"},
    {"reply with a payload", {
         {0, 1, 2, {P(0, 0, 16), P(1, 0, 8)}, 0, 24},
         {1, 0, 0, {{0}}, 0, 24}}, 2, "must carry none"},
    {"reply before every byte", {
         {0, 1, 1, {P(0, 0, 16)}, 0, 16},
         {1, 0, 0, {{0}}, 0, 0}}, 2, "having sent 0 of the 8"},
};

static const float values[6] = {1, 2, 3, 4, 5, 6};

/* Sends frame fr of a run answering id. */
static void
send_frame(struct fake *f, int fd, uint64_t id, const struct frame *fr)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunOutputs ro = IPUOF__RUN_OUTPUTS__INIT;
    Ipuof__RunReply rr = IPUOF__RUN_REPLY__INIT;
    Ipuof__TensorInfo ti[2], *tp[2] = {&ti[0], &ti[1]};
    Ipuof__OutputPiece pc[3], *pp[3] = {&pc[0], &pc[1], &pc[2]};
    uint8_t payload[64];

    info(&ti[0], "out0", o0_dims);
    info(&ti[1], "out1", o1_dims);
    size_t at = 0;

    memset(payload, 0, sizeof payload);
    if (fr->reply)
        memcpy(payload, (const uint8_t *)values + fr->off,
               fr->off + fr->plen <= sizeof values ? fr->plen : 0);
    for (int k = 0; k < fr->npieces; k++) { /* each piece's bytes: its output's values */
        size_t from = (fr->piece[k][0] == 1 ? 16 : 0) + fr->piece[k][1];
        ipuof__output_piece__init(&pc[k]);
        pc[k].output = fr->piece[k][0];
        pc[k].offset = fr->piece[k][1];
        pc[k].length = fr->piece[k][2];
        if (from + pc[k].length <= sizeof values && at + pc[k].length <= sizeof payload)
            memcpy(payload + at, (const uint8_t *)values + from, pc[k].length);
        at += pc[k].length;
    }
    h.request_id = id;
    if (fr->reply) {
        rr.n_outputs = 2;
        rr.outputs = tp;
        rr.run_us = 5;
        h.body_case = IPUOF__HEADER__BODY_RUN_REPLY;
        h.run_reply = &rr;
    } else {
        ro.n_outputs = fr->describe ? 2 : 0;
        ro.outputs = tp;
        ro.n_pieces = (size_t)fr->npieces;
        ro.pieces = pp;
        h.body_case = IPUOF__HEADER__BODY_RUN_OUTPUTS;
        h.run_outputs = &ro;
    }
    fs_send(f, fd, &h, payload, fr->plen);
}

/* f->arg: the case; f->steps counts the runs whose request asked stream_outputs. */
static void
script(struct fake *f, int fd)
{
    const struct scase *sc = &cases[f->arg];
    Ipuof__Header *req;

    if (fs_hello(f, fd) != 0 || fs_attach(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    if (req == NULL)
        return;
    compile_reply(f, fd, req->request_id);
    ipuof_frame_header_free(req);
    for (int run = 0; run < 2; run++) { /* streamed, then IPUOF_STREAM_OUTPUTS=0 */
        req = fs_read(f, fd, 1);
        if (req == NULL)
            return; /* the client closed after a refused stream */
        if (req->body_case != IPUOF__HEADER__BODY_RUN) {
            ipuof_frame_header_free(req);
            break;
        }
        f->steps += req->run->stream_outputs;
        for (int i = 0; i < sc->nfr; i++)
            send_frame(f, fd, req->request_id, &sc->fr[i]);
        ipuof_frame_header_free(req);
        if (sc->err != NULL)
            break;
    }
    if (sc->err != NULL && sc->fr[sc->nfr - 1].reply) { /* in step: the client asks health */
        req = fs_expect(f, fd, IPUOF__HEADER__BODY_HEALTH);
        if (req != NULL) {
            Ipuof__Header h = IPUOF__HEADER__INIT;
            Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;
            hr.live = 1;
            hr.ready = 1;
            h.request_id = req->request_id;
            h.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
            h.health_reply = &hr;
            fs_send(f, fd, &h, NULL, 0);
            ipuof_frame_header_free(req);
        }
    }
    fs_wait_eof(f, fd);
}

static void
run_case(size_t k)
{
    const struct scase *sc = &cases[k];
    struct fake f;
    float a[4] = {0};
    struct ipuof_tensor in = {"a", IPUOF_DTYPE_FLOAT, 1, {4}, a, sizeof a};
    struct ipuof_tensor t;
    ipuof_client *c;
    ipuof_model *m = NULL;
    uint8_t bytes[8] = {0};
    int rc;

    print_message("case '%s'\n", sc->name);
    fake_start(&f, script, 1u << 20, 0);
    f.arg = (int)k;
    c = new_attached(&f, 2000);
    assert_int_equal(ipuof_model_compile(c, bytes, sizeof bytes, NULL, &m), IPUOF_OK);
    unsetenv("IPUOF_STREAM_OUTPUTS");
    rc = ipuof_model_run(m, &in, 1);
    if (sc->err != NULL) {
        assert_error(c, rc, IPUOF_E_PROTO, sc->err);
        assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_E_STATE);
        /* A refused RunOutputs frame leaves more coming: the connection is closed. A
         * refused RunReply is the last frame: the connection stays in step and open. */
        if (sc->fr[sc->nfr - 1].reply)
            assert_int_equal(ipuof_health(c, NULL), IPUOF_OK);
        else
            assert_int_equal(ipuof_health(c, NULL), IPUOF_E_CLOSED);
    } else {
        assert_int_equal(rc, IPUOF_OK);
        assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_OK);
        assert_int_equal(t.bytes, 16);
        assert_memory_equal(t.data, values, 16);
        assert_int_equal(ipuof_model_output(m, 1, &t), IPUOF_OK);
        assert_int_equal(t.bytes, 8);
        assert_memory_equal(t.data, values + 4, 8);
        setenv("IPUOF_STREAM_OUTPUTS", "0", 1);
        assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
        unsetenv("IPUOF_STREAM_OUTPUTS");
        assert_int_equal(ipuof_model_output(m, 1, &t), IPUOF_OK);
        assert_memory_equal(t.data, values + 4, 8);
    }
    ipuof_model_free(m);
    ipuof_client_free(c);
    fake_stop(&f);
    assert_int_equal(f.steps, 1); /* the first run asked to stream, the second did not */
}

static void
test_stream_cases(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(k);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_cases),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
