/*
 * test_stream.c — a run's outputs streamed as its steps end (RunRequest.stream_outputs,
 * RunOutputs frames), against a real daemon on an ephemeral port:
 *   - the first device iteration's rows reach the client before the daemon has been sent
 *     the last iteration's input (an ORDER the feed makes certain, not a timing): the run
 *     cannot end before that input, so the rows came while it computed; the rows are the
 *     ones a run without the flag returns, byte for byte, and the RunReply has no payload;
 *   - in a job of two processes, each gets its own rows while the run waits for process
 *     1's last step;
 *   - through libipuof-client (which streams every run) the outputs of every mode (All,
 *     EveryN, Sum, Final) over 2 replicas equal those of IPUOF_STREAM_OUTPUTS=0 byte for
 *     byte;
 *   - a client that dies in the middle of the stream leaves the daemon serving others.
 */
#include <setjmp.h>
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
#include "sim.h"
#include "testd.h"
#include "testmodels.h"

#define WIDTH 256               /* floats per step of the Relu model's input and output */
#define STEP (WIDTH * sizeof(float))

static struct testd d;

static int
teardown(void **state)
{
    (void)state;
    return testd_reset(&d);
}

/* Writes all of buf to fd. */
static void
write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            fail_msg("write to the daemon failed");
        p += n;
        len -= (size_t)n;
    }
}

/* Sends a compile of model bytes as request id with D device iterations and R replicas. */
static void
compile_send(int fd, uint64_t id, const void *bytes, size_t len, unsigned D, unsigned R)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;

    cr.model_bytes = len;
    cr.device_iterations = D;
    cr.replicas = R;
    cr.name = (char *)"stream";
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    assert_int_equal(raw_send_payload(fd, &h, bytes, len), 0);
}

/* Waits for the reply to a compile; returns the model's id. */
static uint32_t
compile_wait(int fd)
{
    Ipuof__Header *r;
    uint32_t model_id;
    int eof = 0;

    while ((r = raw_recv(fd, 30000, &eof)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS)
        ipuof_frame_header_free(r);
    assert_non_null(r);
    if (r->body_case != IPUOF__HEADER__BODY_COMPILE_REPLY)
        fail_msg("compile: %s", r->body_case == IPUOF__HEADER__BODY_ERROR ? r->error->message
                                                                          : "unexpected reply");
    model_id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    return model_id;
}

/* Compiles model bytes as request id with D device iterations; returns its id. */
static uint32_t
raw_compile(int fd, uint64_t id, const void *bytes, size_t len, unsigned D)
{
    compile_send(fd, id, bytes, len, D, 1);
    return compile_wait(fd);
}

/* Sends the head and header of a run of model_id over input "x0" [rows, WIDTH] floats, as
 * request id, asking stream_outputs when stream; the payload is the caller's to send. */
static void
raw_run_head(int fd, uint64_t id, uint32_t model_id, int64_t rows, int stream)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    int64_t dims[2] = {rows, WIDTH};
    uint8_t *buf;
    size_t len;

    ti.name = (char *)"x0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = (uint64_t)rows * STEP;
    rq.model_id = model_id;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    rq.stream_outputs = stream != 0;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    assert_int_equal(ipuof_frame_pack(&h, (uint32_t)ti.bytes, &buf, &len), IPUOF_OK);
    write_all(fd, buf, len);
    free(buf);
}

/* Takes a RunOutputs frame r with payload p into out (one output of cap bytes), checking
 * its pieces continue where *got stopped. */
static void
take_rows(const Ipuof__Header *r, const void *p, size_t plen, uint8_t *out, size_t cap,
          size_t *got)
{
    size_t sum = 0;

    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_OUTPUTS);
    for (size_t k = 0; k < r->run_outputs->n_pieces; k++) {
        const Ipuof__OutputPiece *pc = r->run_outputs->pieces[k];
        assert_int_equal(pc->output, 0);
        assert_int_equal(pc->offset, *got);
        assert_true(pc->length <= cap - *got);
        memcpy(out + *got, (const uint8_t *)p + sum, pc->length);
        *got += pc->length;
        sum += pc->length;
    }
    assert_int_equal(sum, plen);
}

/* The first iteration's rows arrive before the last iteration's input is sent; the whole
 * streamed output equals the unstreamed one byte for byte. */
static void
test_rows_before_last_input(void **state)
{
    enum { D = 16 };
    size_t len, got = 0, plen = 0;
    void *bytes = testmodel_relu(1, 1, WIDTH, -1, &len), *p = NULL;
    float *x = malloc(D * STEP);
    uint8_t *streamed = calloc(D, STEP);
    Ipuof__Header *r;
    uint32_t model;
    int fd, frames = 0;

    (void)state;
    assert_non_null(bytes);
    assert_non_null(x);
    assert_non_null(streamed);
    for (size_t i = 0; i < D * WIDTH; i++)
        x[i] = (float)((int)(i % 7) - 3) + 0.25f * (float)(i % 3);
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    model = raw_compile(fd, 3, bytes, len, D);

    raw_run_head(fd, 4, model, D, 1);
    write_all(fd, x, (D - 1) * STEP); /* every step but the last */
    r = raw_recv_payload(fd, 20000, &p, &plen);
    if (r == NULL)
        fail_msg("no RunOutputs frame came while the run waited for its last step's input");
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("run: %s", r->error->message);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_OUTPUTS);
    assert_int_equal(r->run_outputs->n_outputs, 1); /* the first frame describes them */
    assert_int_equal(r->run_outputs->outputs[0]->bytes, D * STEP);
    take_rows(r, p, plen, streamed, D * STEP, &got);
    print_message("before the last input: %zu of %zu output bytes (%zu of %d steps)\n", got,
                  (size_t)(D * STEP), got / STEP, D);
    assert_true(got >= STEP);            /* iteration 0's rows, at least */
    assert_true(got <= (D - 1) * STEP);  /* the last step cannot have run */
    ipuof_frame_header_free(r);
    free(p);
    p = NULL;
    frames++;

    write_all(fd, (const uint8_t *)x + (D - 1) * STEP, STEP);
    while ((r = raw_recv_payload(fd, 20000, &p, &plen)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_RUN_OUTPUTS) {
        assert_int_equal(r->run_outputs->n_outputs, 0); /* described once */
        take_rows(r, p, plen, streamed, D * STEP, &got);
        ipuof_frame_header_free(r);
        free(p);
        p = NULL;
        frames++;
    }
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    assert_int_equal(plen, 0); /* every byte went ahead */
    assert_int_equal(got, D * STEP);
    assert_int_equal(r->run_reply->n_outputs, 1);
    assert_int_equal(r->run_reply->outputs[0]->bytes, D * STEP);
    ipuof_frame_header_free(r);
    print_message("%d RunOutputs frames\n", frames);

    /* The same run without the flag: one RunReply, the same bytes. */
    raw_run_head(fd, 5, model, D, 0);
    write_all(fd, x, D * STEP);
    r = raw_recv_payload(fd, 20000, &p, &plen);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    assert_int_equal(plen, D * STEP);
    assert_memory_equal(p, streamed, D * STEP);
    for (size_t i = 0; i < D * WIDTH; i++) /* and they are Relu(x) */
        assert_true(((float *)p)[i] == (x[i] > 0 ? x[i] : 0));
    ipuof_frame_header_free(r);
    free(p);
    close(fd);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
    free(bytes);
    free(x);
    free(streamed);
}

/* A raw connection attached as process `id` of 2 of partition "strm" (2 IPUs); the attach
 * reply is read by the caller (it comes once both processes attached). */
static int
proc_attach_send(int port, unsigned id)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;
    int fd = raw_session(port, 0);

    assert_true(fd >= 0);
    a.num_ipus = 2;
    a.partition_name = (char *)"strm";
    a.process_id = id;
    a.num_processes = 2;
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(raw_send(fd, &h), 0);
    return fd;
}

/* A job of 2 processes (1 replica each): both get their own rows of the first iterations
 * while process 1 has not sent its last step, so the run cannot have ended; each
 * process's streamed rows are Relu of its own slice. */
static void
test_two_processes(void **state)
{
    enum { D = 16 };
    size_t len, got[2] = {0, 0}, plen = 0;
    void *bytes = testmodel_relu(1, 1, WIDTH, -1, &len), *p = NULL;
    float *x[2];
    uint8_t *out[2];
    Ipuof__Header *r;
    uint32_t model[2];
    int fd[2], eof = 0;

    (void)state;
    assert_non_null(bytes);
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    for (int q = 0; q < 2; q++) {
        x[q] = malloc(D * STEP);
        out[q] = calloc(D, STEP);
        assert_non_null(x[q]);
        assert_non_null(out[q]);
        for (size_t i = 0; i < D * WIDTH; i++)
            x[q][i] = (float)((int)((i + 3 * (size_t)q) % 9) - 4);
        fd[q] = proc_attach_send(d.port, (unsigned)q);
    }
    for (int q = 0; q < 2; q++) {
        r = raw_recv(fd[q], 10000, &eof);
        assert_non_null(r);
        if (r->body_case != IPUOF__HEADER__BODY_ATTACH_REPLY)
            fail_msg("attach of process %d: %s", q, r->body_case == IPUOF__HEADER__BODY_ERROR
                                                        ? r->error->message : "unexpected");
        ipuof_frame_header_free(r);
    }
    for (int q = 0; q < 2; q++)
        compile_send(fd[q], 3, bytes, len, D, 1); /* per process */
    for (int q = 0; q < 2; q++)
        model[q] = compile_wait(fd[q]);
    for (int q = 0; q < 2; q++) {
        raw_run_head(fd[q], 4, model[q], D, 1);
        write_all(fd[q], x[q], (q == 1 ? D - 1 : D) * STEP); /* process 1: not its last */
    }
    for (int q = 0; q < 2; q++) { /* each gets rows before process 1's last step is sent */
        r = raw_recv_payload(fd[q], 20000, &p, &plen);
        if (r == NULL)
            fail_msg("process %d: no RunOutputs frame while the run waited for input", q);
        take_rows(r, p, plen, out[q], D * STEP, &got[q]);
        assert_true(got[q] >= STEP && got[q] <= (D - 1) * STEP);
        ipuof_frame_header_free(r);
        free(p);
        p = NULL;
    }
    print_message("before process 1's last step: %zu and %zu of %zu bytes\n", got[0], got[1],
                  (size_t)(D * STEP));
    write_all(fd[1], (const uint8_t *)x[1] + (D - 1) * STEP, STEP);
    for (int q = 0; q < 2; q++) {
        while ((r = raw_recv_payload(fd[q], 20000, &p, &plen)) != NULL &&
               r->body_case == IPUOF__HEADER__BODY_RUN_OUTPUTS) {
            take_rows(r, p, plen, out[q], D * STEP, &got[q]);
            ipuof_frame_header_free(r);
            free(p);
            p = NULL;
        }
        assert_non_null(r);
        assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
        assert_int_equal(plen, 0);
        assert_int_equal(r->run_reply->outputs[0]->bytes, D * STEP);
        ipuof_frame_header_free(r);
        assert_int_equal(got[q], D * STEP);
        for (size_t i = 0; i < D * WIDTH; i++)
            assert_true(((float *)out[q])[i] == (x[q][i] > 0 ? x[q][i] : 0));
        close(fd[q]);
        free(x[q]);
        free(out[q]);
    }
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
    free(bytes);
}

/* A chain of `layers` MatMuls of h0 [64, 256] by 0.01 weights, whose output h<layers> is
 * also summed, returned every 2nd iteration and at the end: y_all, y_every, y_sum, y_final
 * (Identity nodes), so every output mode is streamed. Slow enough that a run of many
 * device iterations streams its rows while it computes. Caller frees. */
static void *
slow_model(int layers, size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t xd[2] = {64, 256}, wd[2] = {256, 256};
    float *w = calloc(256 * 256, sizeof *w);
    static const char *outs[] = {"y_all", "y_every", "y_sum", "y_final"};
    char in[32], wn[32], out[64];
    void *bytes = NULL;

    assert_non_null(b);
    assert_non_null(w);
    for (size_t i = 0; i < 256 * 256; i++)
        w[i] = (i % 5 == 0) ? 0.01f : -0.002f;
    assert_int_equal(sim_ob_input(b, "h0", SIM_DTYPE_FLOAT, 2, xd), 0);
    for (int l = 0; l < layers; l++) {
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(in, sizeof in, "h%d", l);
        snprintf(out, sizeof out, "%s,%s", in, wn);
        assert_int_equal(sim_ob_initializer(b, wn, SIM_DTYPE_FLOAT, 2, wd, w), 0);
        snprintf(in, sizeof in, "h%d", l + 1);
        assert_int_equal(sim_ob_node(b, "MatMul", in, out, in), 0);
    }
    for (int k = 0; k < 4; k++) {
        assert_int_equal(sim_ob_node(b, "Identity", outs[k], in, outs[k]), 0);
        assert_int_equal(sim_ob_output(b, outs[k], SIM_DTYPE_FLOAT), 0);
    }
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    free(w);
    return bytes;
}

/* Runs the slow model (D iterations, 2 replicas) through the library and returns a copy
 * of its outputs, one after another, in *out (caller frees), their length in *n. */
static void
library_run(ipuof_client *c, ipuof_model *m, const float *x, size_t xbytes, int64_t rows, uint8_t **out,
            size_t *n)
{
    struct ipuof_tensor in = {.name = "h0", .dtype = IPUOF_DTYPE_FLOAT, .rank = 2,
                              .dims = {rows, 256}, .data = x, .bytes = xbytes};
    size_t total = 0;

    if (ipuof_model_run(m, &in, 1) != IPUOF_OK)
        fail_msg("run: %s", ipuof_client_errmsg(c));
    for (size_t i = 0; i < 4; i++) {
        struct ipuof_tensor t;
        assert_int_equal(ipuof_model_output(m, i, &t), IPUOF_OK);
        total += t.bytes;
    }
    *out = malloc(total);
    assert_non_null(*out);
    *n = 0;
    for (size_t i = 0; i < 4; i++) {
        struct ipuof_tensor t;
        assert_int_equal(ipuof_model_output(m, i, &t), IPUOF_OK);
        memcpy(*out + *n, t.data, t.bytes);
        *n += t.bytes;
    }
}

/* libipuof-client streams every run: its outputs, of every mode, over 2 replicas, equal
 * those of a run with IPUOF_STREAM_OUTPUTS=0 byte for byte. */
static void
test_library_same_bytes(void **state)
{
    enum { D = 24, R = 2 };
    static const struct ipuof_output_mode modes[] = {
        {"y_all", IPUOF_OUTPUT_ALL, 0},
        {"y_every", IPUOF_OUTPUT_EVERYN, 4},
        {"y_sum", IPUOF_OUTPUT_SUM, 0},
        {"y_final", IPUOF_OUTPUT_FINAL, 0},
    };
    struct ipuof_model_opts o = {.device_iterations = D, .replicas = R,
                                 .output_modes = modes, .n_output_modes = 4};
    struct ipuof_attach_opts ao = {.num_ipus = R};
    size_t len, xbytes = (size_t)D * R * 64 * 256 * sizeof(float), n1, n2;
    void *bytes = slow_model(6, &len);
    float *x = malloc(xbytes);
    uint8_t *a = NULL, *b = NULL;
    ipuof_client *c = ipuof_client_new();
    ipuof_model *m = NULL;

    (void)state;
    assert_non_null(x);
    assert_non_null(c);
    for (size_t i = 0; i < xbytes / sizeof(float); i++)
        x[i] = (float)((int)(i % 11) - 5) * 0.5f;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    if (ipuof_client_connect(c, d.addr) != IPUOF_OK ||
        ipuof_attach(c, &ao, NULL, 0, NULL) != IPUOF_OK ||
        ipuof_model_compile(c, bytes, len, &o, &m) != IPUOF_OK)
        fail_msg("%s", ipuof_client_errmsg(c));
    unsetenv("IPUOF_STREAM_OUTPUTS");
    library_run(c, m, x, xbytes, (int64_t)D * R * 64, &a, &n1);
    setenv("IPUOF_STREAM_OUTPUTS", "0", 1);
    library_run(c, m, x, xbytes, (int64_t)D * R * 64, &b, &n2);
    unsetenv("IPUOF_STREAM_OUTPUTS");
    assert_int_equal(n1, n2);
    /* All: D*R*64 rows; EveryN(4): D/4*R*64; Sum and Final: R*64; 256 floats each. */
    assert_int_equal(n1, (size_t)(D + D / 4 + 2) * R * 64 * 256 * sizeof(float));
    assert_memory_equal(a, b, n1);
    print_message("streamed and unstreamed outputs: %zu bytes, identical\n", n1);
    free(a);
    free(b);
    ipuof_model_free(m);
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
    free(bytes);
    free(x);
}

/* A client that reads its first RunOutputs frame and dies: the daemon serves the next. */
static void
test_client_dies_mid_stream(void **state)
{
    enum { D = 200 };
    size_t len, plen = 0, rlen;
    void *bytes = slow_model(8, &len), *p = NULL, *relu = testmodel_relu(1, 1, WIDTH, -1, &rlen);
    size_t xbytes = (size_t)D * 64 * 256 * sizeof(float);
    float *x = calloc(1, xbytes), one[WIDTH];
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    int64_t dims[2] = {(int64_t)D * 64, 256};
    struct ipuof_tensor in = {.name = "x0", .dtype = IPUOF_DTYPE_FLOAT, .rank = 2,
                              .dims = {1, WIDTH}, .data = one, .bytes = sizeof one};
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_tensor t;
    ipuof_client *c = ipuof_client_new();
    ipuof_model *m = NULL;
    uint32_t model;
    int fd;

    (void)state;
    assert_non_null(x);
    assert_non_null(relu);
    for (size_t i = 0; i < xbytes / sizeof(float); i++)
        x[i] = 1.0f;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    model = raw_compile(fd, 3, bytes, len, D);
    ti.name = (char *)"h0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = xbytes;
    rq.model_id = model;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    rq.stream_outputs = 1;
    h.request_id = 4;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    assert_int_equal(raw_send_payload(fd, &h, x, xbytes), 0);
    r = raw_recv_payload(fd, 30000, &p, &plen);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_OUTPUTS);
    ipuof_frame_header_free(r);
    free(p);
    close(fd); /* dies with the rest of the stream coming */

    for (int i = 0; i < WIDTH; i++)
        one[i] = (float)(i % 3) - 1.0f;
    assert_non_null(c);
    if (ipuof_client_connect(c, d.addr) != IPUOF_OK ||
        ipuof_attach(c, &ao, NULL, 0, NULL) != IPUOF_OK ||
        ipuof_model_compile(c, relu, rlen, NULL, &m) != IPUOF_OK ||
        ipuof_model_run(m, &in, 1) != IPUOF_OK)
        fail_msg("the next client: %s", ipuof_client_errmsg(c));
    assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_OK);
    for (int i = 0; i < WIDTH; i++)
        assert_true(((const float *)t.data)[i] == (one[i] > 0 ? one[i] : 0));
    ipuof_model_free(m);
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
    free(bytes);
    free(relu);
    free(x);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rows_before_last_input, teardown),
        cmocka_unit_test_teardown(test_two_processes, teardown),
        cmocka_unit_test_teardown(test_library_same_bytes, teardown),
        cmocka_unit_test_teardown(test_client_dies_mid_stream, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
