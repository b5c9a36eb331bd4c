/*
 * test_safety.c — what any client could do to the daemon, each against a real ipuofd on an
 * ephemeral loopback port: models with many inputs and outputs, placement beyond the
 * partition, run buffers over the host memory limit, the admin socket's reserve and the
 * idle timeout, a revoke while run inputs arrive, a non-loopback listen without a token,
 * SIGTERM with a request in flight, and busy IPUs.
 *
 * Each test starts its own daemon and stops it (exit status 0 asserted where it matters).
 */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "ipuof/client.h"
#include "onnx_build.h"
#include "sim.h"
#include "testd.h"
#include "testmodels.h"

static struct testd d;

static int
teardown(void **state)
{
    (void)state;
    return testd_reset(&d);
}

static void
stop_ok(void)
{
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* Relu models (testmodels.h); the test fails when they cannot be built. */
static void *
relu_model(int n_in, int n_out, int64_t width, int ipu, size_t *len)
{
    void *bytes = testmodel_relu(n_in, n_out, width, ipu, len);

    assert_non_null(bytes);
    return bytes;
}

static ipuof_client *
client_on(const char *addr, unsigned nipus)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts o = {.num_ipus = nipus};
    int rc;

    assert_non_null(c);
    ipuof_client_set_name(c, "safety");
    rc = ipuof_client_connect(c, addr);
    if (rc != IPUOF_OK)
        fail_msg("connect %s: %s", addr, ipuof_client_errmsg(c));
    if (nipus > 0 && (rc = ipuof_attach(c, &o, NULL, 0, NULL)) != IPUOF_OK)
        fail_msg("attach: %s", ipuof_client_errmsg(c));
    return c;
}

/* Compiles and runs a Relu model of n_in inputs and n_out outputs, checking every output. */
static void
run_many(int n_in, int n_out)
{
    static const float in[4] = {-1, 2, -3, 4}, want[4] = {0, 2, 0, 4};
    struct ipuof_tensor *t = calloc((size_t)n_in, sizeof *t);
    ipuof_client *c = client_on(d.addr, 1);
    ipuof_model *m = NULL;
    size_t len;
    void *bytes = relu_model(n_in, n_out, 4, -1, &len);
    int rc = ipuof_model_compile(c, bytes, len, NULL, &m);

    if (rc != IPUOF_OK)
        fail_msg("compile %d in / %d out: %s", n_in, n_out, ipuof_client_errmsg(c));
    assert_int_equal(ipuof_model_input_count(m), (size_t)n_in);
    assert_int_equal(ipuof_model_output_count(m), (size_t)n_out);
    for (int i = 0; i < n_in; i++) {
        assert_int_equal(ipuof_model_input_info(m, (size_t)i, &t[i], NULL), IPUOF_OK);
        t[i].data = in;
        t[i].bytes = sizeof in;
    }
    rc = ipuof_model_run(m, t, (size_t)n_in);
    if (rc != IPUOF_OK)
        fail_msg("run %d in / %d out: %s", n_in, n_out, ipuof_client_errmsg(c));
    for (int k = 0; k < n_out; k++) {
        struct ipuof_tensor o;
        assert_int_equal(ipuof_model_output(m, (size_t)k, &o), IPUOF_OK);
        assert_int_equal(o.bytes, sizeof want);
        assert_memory_equal(o.data, want, sizeof want);
    }
    print_message("%d inputs, %d outputs: compiled, ran, every output right\n", n_in, n_out);
    ipuof_model_free(m);
    ipuof_client_free(c);
    free(bytes);
    free(t);
}

/* Item 1: more than 64 outputs crashed reply_run; more than 64 inputs failed every run. */
static void
test_many_inputs_and_outputs(void **state)
{
    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    run_many(1, 65);
    run_many(1, 200);
    run_many(70, 70);
    run_many(300, 300);
    stop_ok();
}

/* Item 2: a node on an IPU beyond the partition is refused at compile, naming the node,
 * the IPU and the partition's size; nothing is charged to an IPU outside the partition. */
static void
test_ipu_number_beyond_partition(void **state)
{
    ipuof_client *c;
    ipuof_model *m = NULL;
    ipuof_status_report *rep;
    size_t len;
    void *bytes = relu_model(1, 2, 4, 3, &len);
    int rc;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    c = client_on(d.addr, 1);
    rc = ipuof_model_compile(c, bytes, len, NULL, &m);
    print_message("__ipu_number 3 on a 1-IPU partition: %s: %s\n", ipuof_status_name(rc),
                  ipuof_client_errmsg(c));
    assert_int_equal(rc, IPUOF_E_INVAL);
    assert_null(m);
    assert_non_null(strstr(ipuof_client_errmsg(c), "'y0'"));
    assert_non_null(strstr(ipuof_client_errmsg(c), "IPU 3"));
    assert_non_null(strstr(ipuof_client_errmsg(c), "partition has 1 IPU"));
    assert_int_equal(ipuof_status(c, &rep), IPUOF_OK);
    for (size_t i = 0; i < ipuof_status_report_ipu_count(rep); i++) {
        struct ipuof_ipu_info in;
        assert_int_equal(ipuof_status_report_ipu(rep, i, &in), IPUOF_OK);
        assert_int_equal(in.memory_used_bytes, 0);
    }
    ipuof_status_report_free(rep);
    ipuof_client_free(c);
    free(bytes);
    stop_ok();
}

/* Item 3: run buffers count as host memory, per partition, against host_memory: shown in
 * the compile reply and ipuctl status, refused at compile over the limit, naming it. */
static void
test_host_memory_limit(void **state)
{
    ipuof_client *c;
    ipuof_model *m1 = NULL, *m2 = NULL, *big = NULL;
    ipuof_status_report *rep;
    struct ipuof_ipu_info in;
    struct ipuof_model_opts o = {.device_iterations = 1000000};
    size_t len;
    void *bytes = relu_model(1, 1, 1000, -1, &len);
    int rc;

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nhost_memory = 64MiB\n", NULL), 0);
    c = client_on(d.addr, 1);
    rc = ipuof_model_compile(c, bytes, len, &o, &big);
    print_message("D = 1000000 of a [1,1000] Relu: %s: %s\n", ipuof_status_name(rc),
                  ipuof_client_errmsg(c));
    assert_int_equal(rc, IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(ipuof_client_errmsg(c), "8000000000 bytes of host memory"));
    assert_non_null(strstr(ipuof_client_errmsg(c), "host_memory"));
    assert_non_null(strstr(ipuof_client_errmsg(c), "67108864"));

    o.device_iterations = 1000; /* 4 MB in, 4 MB out */
    assert_int_equal(ipuof_model_compile(c, bytes, len, &o, &m1), IPUOF_OK);
    assert_int_equal(ipuof_model_host_bytes(m1), 8000000);
    o.device_iterations = 5000; /* 40 MB: 48 MB in all, under 64 MiB */
    assert_int_equal(ipuof_model_compile(c, bytes, len, &o, &m2), IPUOF_OK);
    assert_int_equal(ipuof_status(c, &rep), IPUOF_OK);
    assert_int_equal(ipuof_status_report_ipu(rep, 0, &in), IPUOF_OK);
    print_message("status: IPU 0 host memory %llu of %llu bytes\n",
                  (unsigned long long)in.host_memory_used_bytes,
                  (unsigned long long)ipuof_status_report_host_memory(rep));
    assert_int_equal(in.host_memory_used_bytes, 48000000);
    assert_int_equal(ipuof_status_report_host_memory(rep), 64u << 20);
    ipuof_status_report_free(rep);
    o.no_cache = 1; /* another 40 MB: over the partition's 64 MiB */
    rc = ipuof_model_compile(c, bytes, len, &o, &big);
    print_message("a third model: %s: %s\n", ipuof_status_name(rc), ipuof_client_errmsg(c));
    assert_int_equal(rc, IPUOF_E_TOO_LARGE);
    assert_non_null(strstr(ipuof_client_errmsg(c), "19108864 of them free"));
    ipuof_model_free(m2);
    assert_int_equal(ipuof_model_compile(c, bytes, len, &o, &m2), IPUOF_OK);
    ipuof_model_free(m1);
    ipuof_model_free(m2);
    assert_int_equal(ipuof_status(c, &rep), IPUOF_OK);
    assert_int_equal(ipuof_status_report_ipu(rep, 0, &in), IPUOF_OK);
    assert_int_equal(in.host_memory_used_bytes, 0);
    ipuof_status_report_free(rep);
    ipuof_client_free(c);
    free(bytes);
    stop_ok();
}

/* ---- raw frames: a run whose inputs stop half-way -------------------------------------- */

/* Sends a compile of bytes (D device iterations) as request id; returns the model id, or
 * fails the test. Progress events are skipped. */
static uint32_t
raw_compile(int fd, uint64_t id, const void *bytes, size_t len)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    uint32_t model_id = 0;
    int eof = 0;

    cr.model_bytes = len;
    cr.device_iterations = 1;
    cr.name = (char *)"relu";
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    assert_int_equal(raw_send_payload(fd, &h, bytes, len), 0);
    while ((r = raw_recv(fd, 10000, &eof)) != NULL &&
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

/* Sends a run of model_id (one float input [1,4]) as request id with only `sent` of its 16
 * payload bytes. */
static void
raw_partial_run(int fd, uint64_t id, uint32_t model_id, size_t sent)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    int64_t dims[2] = {1, 4};
    float x[4] = {1, 2, 3, 4};
    uint8_t *buf;
    size_t len;

    ti.name = (char *)"x0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = sizeof x;
    rq.model_id = model_id;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    assert_int_equal(ipuof_frame_pack(&h, sizeof x, &buf, &len), IPUOF_OK);
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    assert_int_equal(send(fd, x, sent, MSG_NOSIGNAL), (ssize_t)sent);
    free(buf);
}

/* Item 6: a forced reset while a run's inputs are still arriving, then a disconnect, leaked
 * the model and kept its cache entry in use: the same compile later missed the cache. */
static void
test_revoke_during_run_input(void **state)
{
    ipuof_client *admin;
    size_t len, n_reset = 0;
    void *bytes = relu_model(1, 1, 4, -1, &len);
    int fd, fd2, eof = 0;
    Ipuof__Header *r;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    raw_partial_run(fd, 4, raw_compile(fd, 3, bytes, len), 8);
    usleep(100000);
    admin = client_on(d.admin_addr, 0);
    assert_int_equal(ipuof_reset(admin, IPUOF_RESET_ALL, 0, NULL, 1, &n_reset), IPUOF_OK);
    r = raw_recv(fd, 5000, &eof);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_NOTICE);
    ipuof_frame_header_free(r);
    close(fd);
    usleep(200000);

    /* The same model and options again: the executable must be free for reuse. */
    fd2 = raw_session(d.port, 1);
    assert_true(fd2 >= 0);
    cr.model_bytes = len;
    cr.device_iterations = 1;
    cr.name = (char *)"relu";
    h.request_id = 3;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    assert_int_equal(raw_send_payload(fd2, &h, bytes, len), 0);
    while ((r = raw_recv(fd2, 10000, &eof)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS)
        ipuof_frame_header_free(r);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    print_message("compile after the revoked run: cached = %d\n", r->compile_reply->cached);
    assert_true(r->compile_reply->cached);
    ipuof_frame_header_free(r);
    close(fd2);
    ipuof_client_free(admin);
    free(bytes);
    stop_ok();
}

/* Item 8: SIGTERM while a run's inputs arrive: the Notice, then the run's own error. */
static void
test_sigterm_answers_request_in_flight(void **state)
{
    size_t len;
    void *bytes = relu_model(1, 1, 4, -1, &len);
    int fd, eof = 0, got_notice = 0, got_error = 0;
    Ipuof__Header *r;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    raw_partial_run(fd, 7, raw_compile(fd, 3, bytes, len), 8);
    usleep(100000);
    kill(d.pid, SIGTERM);
    while ((r = raw_recv(fd, 5000, &eof)) != NULL) {
        if (r->body_case == IPUOF__HEADER__BODY_NOTICE)
            got_notice = 1;
        if (r->body_case == IPUOF__HEADER__BODY_ERROR && r->request_id == 7) {
            print_message("run in flight at SIGTERM: %s: %s\n",
                          ipuof_status_name((int)r->error->code), r->error->message);
            assert_int_equal(r->error->code, IPUOF_E_SHUTDOWN);
            got_error = 1;
        }
        ipuof_frame_header_free(r);
    }
    assert_true(got_notice);
    assert_true(got_error);
    close(fd);
    assert_int_equal(testd_signal_wait(&d, 0, 10000), 0); /* signal 0: only wait for exit */
    testd_stop(&d);
    memset(&d, 0, sizeof d);
    free(bytes);
}

/* ---- busy ---------------------------------------------------------------------------- */

/* A chain of `layers` MatMuls of x [64, 256] by zero weights [256, 256]: slow enough that a
 * run of D device iterations takes a while. Caller frees. */
static void *
slow_model(int layers, size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t xd[2] = {64, 256}, wd[2] = {256, 256};
    float *w = calloc(256 * 256, sizeof *w);
    char in[32], wn[32], out[64];
    void *bytes = NULL;

    assert_non_null(b);
    assert_non_null(w);
    assert_int_equal(sim_ob_input(b, "h0", SIM_DTYPE_FLOAT, 2, xd), 0);
    for (int l = 0; l < layers; l++) {
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(in, sizeof in, "h%d", l);
        snprintf(out, sizeof out, "%s,%s", in, wn);
        assert_int_equal(sim_ob_initializer(b, wn, SIM_DTYPE_FLOAT, 2, wd, w), 0);
        snprintf(in, sizeof in, "h%d", l + 1);
        assert_int_equal(sim_ob_node(b, "MatMul", in, out, in), 0);
    }
    assert_int_equal(sim_ob_output(b, in, SIM_DTYPE_FLOAT), 0);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    free(w);
    return bytes;
}

/* Item 9: an IPU shows busy while a run executes on it, attached again afterwards. */
static void
test_busy_while_running(void **state)
{
    ipuof_client *watcher;
    size_t len, out_len = 0;
    void *bytes = slow_model(8, &len), *x, *out = NULL;
    int fd, eof = 0, busy_seen = 0, polls = 0;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    int64_t dims[2] = {64 * 200, 256};
    uint32_t model_id;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    cr.model_bytes = len;
    cr.device_iterations = 200;
    cr.name = (char *)"slow";
    h.request_id = 3;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    assert_int_equal(raw_send_payload(fd, &h, bytes, len), 0);
    while ((r = raw_recv(fd, 30000, &eof)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS)
        ipuof_frame_header_free(r);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    model_id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);

    x = calloc(64 * 200 * 256, sizeof(float));
    assert_non_null(x);
    ti.name = (char *)"h0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = 64 * 200 * 256 * sizeof(float);
    rq.model_id = model_id;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    h = (Ipuof__Header)IPUOF__HEADER__INIT;
    h.request_id = 4;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    watcher = client_on(d.addr, 0);
    assert_int_equal(raw_send_payload(fd, &h, x, ti.bytes), 0);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ipuof_status_report *rep;
        struct ipuof_ipu_info in;

        if (poll(&p, 1, 0) > 0)
            break; /* the run reply is here */
        assert_int_equal(ipuof_status(watcher, &rep), IPUOF_OK);
        assert_int_equal(ipuof_status_report_ipu(rep, 0, &in), IPUOF_OK);
        busy_seen |= in.state == IPUOF_IPU_BUSY;
        polls++;
        ipuof_status_report_free(rep);
        usleep(2000);
    }
    r = raw_recv_payload(fd, 30000, &out, &out_len);
    free(out);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    print_message("status polled %d times during the run; IPU 0 busy seen: %d\n", polls,
                  busy_seen);
    ipuof_frame_header_free(r);
    assert_true(busy_seen);
    {
        ipuof_status_report *rep;
        struct ipuof_ipu_info in;
        assert_int_equal(ipuof_status(watcher, &rep), IPUOF_OK);
        assert_int_equal(ipuof_status_report_ipu(rep, 0, &in), IPUOF_OK);
        assert_int_equal(in.state, IPUOF_IPU_ATTACHED);
        ipuof_status_report_free(rep);
    }
    close(fd);
    ipuof_client_free(watcher);
    free(x);
    free(bytes);
    stop_ok();
}

/* Compiles the slow model (8 MatMuls, D = 200) on raw session fd; returns its id. */
static uint32_t
slow_compile(int fd, uint64_t id)
{
    size_t len;
    void *bytes = slow_model(8, &len);
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    uint32_t model_id;
    int eof = 0;

    cr.model_bytes = len;
    cr.device_iterations = 200;
    cr.name = (char *)"slow";
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    assert_int_equal(raw_send_payload(fd, &h, bytes, len), 0);
    while ((r = raw_recv(fd, 30000, &eof)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS)
        ipuof_frame_header_free(r);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    model_id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    free(bytes);
    return model_id;
}

/* Sends the run header of the slow model and the first `sent` bytes of x (all 200 steps). */
static void
slow_partial_run(int fd, uint64_t id, uint32_t model_id, const void *x, size_t sent)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    int64_t dims[2] = {64 * 200, 256};
    uint8_t *buf;
    size_t len;

    ti.name = (char *)"h0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = 64 * 200 * 256 * sizeof(float);
    rq.model_id = model_id;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    assert_int_equal(ipuof_frame_pack(&h, (uint32_t)ti.bytes, &buf, &len), IPUOF_OK);
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    assert_int_equal(send(fd, x, sent, MSG_NOSIGNAL), (ssize_t)sent);
    free(buf);
}

/* Whether IPU 0 shows busy within about ten seconds. */
static int
busy_within(ipuof_client *watcher)
{
    for (int i = 0; i < 2000; i++) {
        ipuof_status_report *rep;
        struct ipuof_ipu_info in;
        int busy;
        assert_int_equal(ipuof_status(watcher, &rep), IPUOF_OK);
        assert_int_equal(ipuof_status_report_ipu(rep, 0, &in), IPUOF_OK);
        busy = in.state == IPUOF_IPU_BUSY;
        ipuof_status_report_free(rep);
        if (busy)
            return 1;
        usleep(5000);
    }
    return 0;
}

/* Issue 18: a run computes while its input arrives. With 2 of its 200 steps sent, the IPU is
 * already busy (the run started; before, it waited for every byte); the rest then comes and
 * the reply has every output. A client that goes away in the middle of its input leaves the
 * run stopped (the IPU no longer busy) and the daemon serving: the same model runs again. */
static void
test_run_computes_while_input_arrives(void **state)
{
    size_t step = 64 * 256 * sizeof(float), total = 200 * step, out_len = 0;
    uint8_t *x = calloc(total, 1);
    void *out = NULL;
    ipuof_client *watcher;
    Ipuof__Header *r;
    int fd;
    uint32_t model_id;

    (void)state;
    assert_non_null(x);
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    model_id = slow_compile(fd, 3);
    watcher = client_on(d.addr, 0);

    slow_partial_run(fd, 4, model_id, x, 2 * step);
    assert_true(busy_within(watcher)); /* computing with 198 steps still to come */
    assert_int_equal(send(fd, x + 2 * step, total - 2 * step, MSG_NOSIGNAL),
                     (ssize_t)(total - 2 * step));
    r = raw_recv_payload(fd, 60000, &out, &out_len);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    assert_int_equal(out_len, total); /* [64 x 200, 256] floats */
    print_message("run started with 2 of 200 steps sent; reply with %zu output bytes\n",
                  out_len);
    ipuof_frame_header_free(r);
    free(out);

    /* gone in the middle of its input: the run waiting for it stops */
    slow_partial_run(fd, 5, model_id, x, 2 * step);
    assert_true(busy_within(watcher));
    close(fd);
    for (int i = 0; i < 2000; i++) {
        ipuof_status_report *rep;
        struct ipuof_ipu_info in;
        int busy;
        assert_int_equal(ipuof_status(watcher, &rep), IPUOF_OK);
        assert_int_equal(ipuof_status_report_ipu(rep, 0, &in), IPUOF_OK);
        busy = in.state == IPUOF_IPU_BUSY || in.state == IPUOF_IPU_ATTACHED;
        ipuof_status_report_free(rep);
        if (!busy)
            break;
        assert_true(i + 1 < 2000);
        usleep(5000);
    }
    fd = raw_session(d.port, 1);
    assert_true(fd >= 0);
    model_id = slow_compile(fd, 3);
    slow_partial_run(fd, 4, model_id, x, total);
    r = raw_recv_payload(fd, 60000, &out, &out_len);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    ipuof_frame_header_free(r);
    free(out);
    close(fd);
    ipuof_client_free(watcher);
    free(x);
    stop_ok();
}

/* ---- the operator's way in ------------------------------------------------------------ */

/* Item 5: clients filling max_connections leave the admin socket usable; an idle client
 * holding nothing is closed, one holding a partition is not. */
static void
test_admin_reserve_and_idle(void **state)
{
    int fds[4], held, idle, eof = 0;
    ipuof_client *admin;
    ipuof_status_report *rep;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__StatusRequest sq = IPUOF__STATUS_REQUEST__INIT;

    (void)state;
    assert_int_equal(testd_start(&d, "[server]\nmax_connections = 4\nidle_timeout = 1\n", NULL),
                     0);
    for (int i = 0; i < 4; i++) {
        fds[i] = raw_session(d.port, 0);
        assert_true(fds[i] >= 0);
    }
    admin = ipuof_client_new();
    assert_int_equal(ipuof_client_connect(admin, d.admin_addr), IPUOF_OK);
    assert_int_equal(ipuof_status(admin, &rep), IPUOF_OK);
    print_message("4 of 4 client connections taken: admin status still answers (%u clients)\n",
                  ipuof_status_report_clients(rep));
    ipuof_status_report_free(rep);
    ipuof_client_free(admin);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    usleep(200000);

    held = raw_session(d.port, 1);
    idle = raw_session(d.port, 0);
    assert_true(held >= 0 && idle >= 0);
    assert_true(raw_wait_closed(idle, 5000));
    print_message("idle client without IPUs closed after idle_timeout\n");
    sleep(2);
    h.request_id = 9;
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &sq;
    assert_int_equal(raw_send(held, &h), 0);
    r = raw_recv(held, 5000, &eof);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_STATUS_REPLY);
    print_message("client holding a partition still served after 2 x idle_timeout\n");
    ipuof_frame_header_free(r);
    close(held);
    close(idle);
    stop_ok();
}

/* Runs cmd with sh; returns its exit status. */
static int
sh(const char *cmd)
{
    int st = system(cmd);

    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Item 7: a non-loopback listen without auth_token is refused unless meant; with a token,
 * ipuctl health works without it. */
static void
test_unauthenticated_listen(void **state)
{
    char cmd[512];
    const char *bin = getenv("IPUOFD_BIN") ? getenv("IPUOFD_BIN") : "build/bin/ipuofd";
    int rc;

    (void)state;
    snprintf(cmd, sizeof cmd, "%s --check-config --listen 0.0.0.0:0 >/dev/null 2>&1", bin);
    rc = sh(cmd);
    print_message("--check-config --listen 0.0.0.0:0 without auth_token: exit %d\n", rc);
    assert_int_equal(rc, 78);
    snprintf(cmd, sizeof cmd, "%s --check-config --listen 0.0.0.0:0 2>&1 | "
             "grep -q allow_unauthenticated", bin);
    assert_int_equal(sh(cmd), 0);
    assert_int_equal(testd_start(&d, "[server]\nallow_unauthenticated = yes\n", NULL), 0);
    stop_ok();
    snprintf(cmd, sizeof cmd, "printf '[server]\\nlisten = [::]:0\\nallow_unauthenticated = "
             "yes\\n' > /tmp/ipuofd-safety-$$.conf && %s --check-config --config "
             "/tmp/ipuofd-safety-$$.conf >/dev/null 2>&1; r=$?; rm -f /tmp/ipuofd-safety-$$.conf;"
             " exit $r", bin);
    assert_int_equal(sh(cmd), 0);

    assert_int_equal(testd_start(&d, "[server]\nauth_token = s3cret\n", NULL), 0);
    snprintf(cmd, sizeof cmd, "env -u IPUOF_AUTH_TOKEN %s --server %s health",
             getenv("IPUCTL_BIN") ? getenv("IPUCTL_BIN") : "build/bin/ipuctl", d.addr);
    rc = sh(cmd);
    print_message("ipuctl health without the token: exit %d\n", rc);
    assert_int_equal(rc, 0);
    stop_ok();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_many_inputs_and_outputs, teardown),
        cmocka_unit_test_teardown(test_ipu_number_beyond_partition, teardown),
        cmocka_unit_test_teardown(test_host_memory_limit, teardown),
        cmocka_unit_test_teardown(test_revoke_during_run_input, teardown),
        cmocka_unit_test_teardown(test_sigterm_answers_request_in_flight, teardown),
        cmocka_unit_test_teardown(test_busy_while_running, teardown),
        cmocka_unit_test_teardown(test_run_computes_while_input_arrives, teardown),
        cmocka_unit_test_teardown(test_admin_reserve_and_idle, teardown),
        cmocka_unit_test_teardown(test_unauthenticated_listen, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
