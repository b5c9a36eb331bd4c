/*
 * test_daemon_trace.c — trace requests (req_trace.c) over bufferevent pairs with a real
 * worker thread: the trace is written off the event-loop thread, so other clients are served
 * while it is being written; one connection has one trace build in flight at a time; and a
 * connection that closes, or a partition reset, while its trace is being written leaks
 * nothing and crashes nothing.
 *
 * Ordering, not timing: a "gate" job holds the single worker, so a trace request waits in
 * the worker queue for as long as the test wants, while the test checks what the loop does.
 * On main the trace was written inside the request's handler on the loop thread: its reply
 * was out before the gate opened.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "dpair.h"
#include "frame.h"
#include "ipuof/client.h"
#include "testmodels.h"

/* A job that holds its worker until gate_open(). */
struct gate {
    struct work_item item;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, open, done;
};

static void
gate_run(struct work_item *j)
{
    struct gate *g = (struct gate *)j;

    pthread_mutex_lock(&g->mu);
    g->started = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void
gate_done(struct work_item *j)
{
    ((struct gate *)j)->done = 1;
}

/* Submits g to s's workers and waits until a worker holds it. */
static void
gate_close(struct srv *s, struct gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->item.run = gate_run;
    g->item.done = gate_done;
    assert_int_equal(work_submit(s->work, &g->item), 0);
    pthread_mutex_lock(&g->mu);
    while (!g->started)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void
gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Runs s's loop until every job (the gate's and the traces') has been answered. */
static void
drain(struct srv *s, struct gate *g)
{
    for (int i = 0; i < 10000 && (work_pending(s->work) > 0 || !g->done); i++)
        dpair_pump(s, 1);
    assert_int_equal(work_pending(s->work), 0);
    assert_true(g->done);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

/* Sends a compile of a one-Relu model with profile on b (request id 3). */
static void
send_compile(struct bufferevent *b)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    size_t len;
    void *bytes = testmodel_relu(1, 1, 4, -1, &len);

    assert_non_null(bytes);
    cr.model_bytes = len;
    cr.device_iterations = 1;
    cr.name = (char *)"relu";
    cr.profile = 1;
    h.request_id = 3;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    assert_int_equal(dpair_send(b, &h, bytes, len), 0);
    free(bytes);
}

/* Reads b's compile reply; the model id. */
static uint32_t
recv_compile(struct srv *s, struct bufferevent *b)
{
    Ipuof__Header *r;
    uint32_t id;

    while ((r = dpair_recv(s, b, 10000, NULL, NULL)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS)
        ipuof_frame_header_free(r);
    assert_non_null(r);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("compile: %s", r->error->message);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    id = r->compile_reply->model_id;
    ipuof_frame_header_free(r);
    return id;
}

/* Sends a run of model id on b with one [1,4] input (request id 4). */
static void
send_run(struct bufferevent *b, uint32_t id)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    int64_t dims[2] = {1, 4};
    float x[4] = {1, -2, 3, -4};

    ti.name = (char *)"x0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = sizeof x;
    rq.model_id = id;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    h.request_id = 4;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    assert_int_equal(dpair_send(b, &h, x, sizeof x), 0);
}

/* Reads b's run reply. */
static void
recv_run(struct srv *s, struct bufferevent *b)
{
    Ipuof__Header *r = dpair_recv(s, b, 10000, NULL, NULL);

    assert_non_null(r);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("run: %s", r->error->message);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_RUN_REPLY);
    ipuof_frame_header_free(r);
}

/* On b (attached): compiles a one-Relu model with profile and runs it once, so that it has
 * a trace. Returns the model id. */
static uint32_t
profiled_model(struct srv *s, struct bufferevent *b)
{
    uint32_t id;

    send_compile(b);
    id = recv_compile(s, b);
    send_run(b, id);
    recv_run(s, b);
    return id;
}

/* Queues a TraceRequest for model id as request req on b. */
static void
send_trace(struct bufferevent *b, uint64_t req, uint32_t id)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__TraceRequest t = IPUOF__TRACE_REQUEST__INIT;

    t.model_id = id;
    h.request_id = req;
    h.body_case = IPUOF__HEADER__BODY_TRACE;
    h.trace = &t;
    assert_int_equal(dpair_send(b, &h, NULL, 0), 0);
}

/* Reads the reply to trace request req on b: a TraceReply whose payload is the JSON. */
static void
expect_trace(struct srv *s, struct bufferevent *b, uint64_t req)
{
    void *payload = NULL;
    size_t plen = 0;
    Ipuof__Header *r = dpair_recv(s, b, 10000, &payload, &plen);

    assert_non_null(r);
    if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fail_msg("trace %llu: %s", (unsigned long long)req, r->error->message);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_TRACE_REPLY);
    assert_int_equal(r->request_id, req);
    assert_int_equal(r->trace_reply->bytes, plen);
    assert_true(plen > 16 && memcmp(payload, "{\"traceEvents\":[", 16) == 0);
    ipuof_frame_header_free(r);
    free(payload);
}

/* Starts the daemon pair s (4 IPUs, one worker) with client a attached to one IPU and a
 * profiled model it has run once (its id in *id). Returns a (freed by the test); *ca is its
 * connection. */
static struct bufferevent *
client_with_model(struct srv *s, struct conn **ca, uint32_t *id)
{
    struct bufferevent *a;

    assert_int_equal(dpair_srv_init(s, 4, 1), 0);
    a = dpair_connect(s, 0, ca);
    assert_int_equal(dpair_session(s, a, 1), 0);
    *id = profiled_model(s, a);
    return a;
}

/* Holds the worker with gate g and queues trace request 10 for model id on a: the trace
 * build waits behind the gate until gate_open. */
static void
trace_held(struct srv *s, struct gate *g, struct bufferevent *a, uint32_t id)
{
    gate_close(s, g);
    send_trace(a, 10, id);
}

/* Bytes waiting on the client end b (a reply the daemon has sent). */
static size_t
waiting(struct srv *s, struct bufferevent *b)
{
    dpair_pump(s, 20);
    return evbuffer_get_length(bufferevent_get_input(b));
}

/* Defect 7: three traces pipelined by client A while the worker is held: A has no answer,
 * only one of its traces is queued (one build in flight per connection), and client B's
 * status is answered meanwhile; then A's three traces come, in order. */
static void
test_status_served_while_trace_builds(void **state)
{
    struct srv s;
    struct conn *ca, *cb;
    struct bufferevent *a, *b;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__StatusRequest st = IPUOF__STATUS_REQUEST__INIT;
    struct gate g;
    uint32_t id;

    (void)state;
    a = client_with_model(&s, &ca, &id);
    b = dpair_connect(&s, 0, &cb);
    assert_int_equal(dpair_session(&s, b, 0), 0);

    gate_close(&s, &g);
    for (uint64_t req = 10; req < 13; req++)
        send_trace(a, req, id);
    assert_int_equal(waiting(&s, a), 0); /* main: the three replies were already there */
    assert_int_equal(work_pending(s.work), 2); /* the gate and one trace, not three */
    h.request_id = 5;
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &st;
    assert_int_equal(dpair_send(b, &h, NULL, 0), 0);
    r = dpair_recv(&s, b, 5000, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_STATUS_REPLY);
    ipuof_frame_header_free(r);
    assert_int_equal(waiting(&s, a), 0); /* still building: B was served first */
    print_message("status answered while A's trace waited for the worker\n");

    gate_open(&g);
    for (uint64_t req = 10; req < 13; req++)
        expect_trace(&s, a, req);
    drain(&s, &g);
    bufferevent_free(a);
    bufferevent_free(b);
    dpair_srv_free(&s);
}

/* The client goes while its trace is being written: the build's result is dropped, the
 * model is freed with the connection (its cache entry is free again), nothing leaks (ASan
 * build), and the daemon serves the next client. */
static void
test_close_while_trace_builds(void **state)
{
    struct srv s;
    struct conn *ca, *cb;
    struct bufferevent *a, *b;
    struct gate g;
    uint32_t id;

    (void)state;
    a = client_with_model(&s, &ca, &id);
    trace_held(&s, &g, a, id);
    assert_int_equal(waiting(&s, a), 0);
    assert_int_equal(work_pending(s.work), 2);
    conn_enter(ca);
    conn_kill(ca, "test: the client goes"); /* as on the socket's EOF */
    conn_leave(ca);
    bufferevent_free(a);
    dpair_pump(&s, 20);
    assert_int_equal(s.nconns, 0);
    assert_non_null(s.cache.head);
    assert_true(s.cache.head->in_use); /* the build still reads it */
    gate_open(&g);
    drain(&s, &g);
    assert_false(s.cache.head->in_use);
    b = dpair_connect(&s, 0, &cb);
    assert_int_equal(dpair_session(&s, b, 1), 0); /* its IPU is free again */
    bufferevent_free(b);
    dpair_srv_free(&s);
}

/* A reset takes the partition while the trace is being written: the client gets the Notice
 * and the trace (written from the run it asked about), and the model is freed after it. */
static void
test_reset_while_trace_builds(void **state)
{
    struct srv s;
    struct conn *ca;
    struct bufferevent *a;
    Ipuof__Header *r;
    struct gate g;
    uint32_t id;

    (void)state;
    a = client_with_model(&s, &ca, &id);
    trace_held(&s, &g, a, id);
    dpair_pump(&s, 20);
    conn_enter(ca);
    revoke_partition(ca, IPUOF_E_DEVICE_RESET, "reset by the test");
    conn_leave(ca);
    r = dpair_recv(&s, a, 2000, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_NOTICE);
    ipuof_frame_header_free(r);
    assert_true(s.cache.head->in_use);
    gate_open(&g);
    expect_trace(&s, a, 10);
    drain(&s, &g);
    assert_false(s.cache.head->in_use);
    send_trace(a, 11, id); /* the model went with the partition */
    r = dpair_recv(&s, a, 2000, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    assert_int_equal(r->error->code, IPUOF_E_DEVICE_RESET);
    ipuof_frame_header_free(r);
    bufferevent_free(a);
    dpair_srv_free(&s);
}

/* Attaches b as process pid of a job of two named "j" on 2 IPUs (request id 2). */
static void
send_attach_job(struct bufferevent *b, unsigned pid)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;

    a.num_ipus = 2;
    a.partition_name = (char *)"j";
    a.process_id = pid;
    a.num_processes = 2;
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(dpair_send(b, &h, NULL, 0), 0);
}

/* A model of a job of two processes: process 0 asks for its trace, then both processes
 * leave while it is written, which ends the job and would free its models. The job (and
 * the model the worker reads) is held until the build ends, then freed: its cache entry is
 * free again, nothing leaks and nothing is read after being freed (ASan build). */
static void
test_job_ends_while_trace_builds(void **state)
{
    struct srv s;
    struct conn *c0, *c1;
    struct bufferevent *b0, *b1;
    Ipuof__Header *r;
    struct gate g;
    uint32_t id;

    (void)state;
    assert_int_equal(dpair_srv_init(&s, 4, 1), 0);
    b0 = dpair_connect(&s, 0, &c0);
    b1 = dpair_connect(&s, 0, &c1);
    assert_int_equal(dpair_session(&s, b0, 0), 0);
    assert_int_equal(dpair_session(&s, b1, 0), 0);
    send_attach_job(b0, 0);
    send_attach_job(b1, 1);
    for (int i = 0; i < 2; i++) {
        struct bufferevent *b = i ? b1 : b0;
        r = dpair_recv(&s, b, 5000, NULL, NULL);
        assert_non_null(r);
        if (r->body_case == IPUOF__HEADER__BODY_ERROR)
            fail_msg("attach: %s", r->error->message);
        assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ATTACH_REPLY);
        ipuof_frame_header_free(r);
    }
    send_compile(b0);
    send_compile(b1);
    id = recv_compile(&s, b0);
    assert_int_equal(recv_compile(&s, b1), id);
    send_run(b0, id);
    send_run(b1, id);
    recv_run(&s, b0);
    recv_run(&s, b1);

    gate_close(&s, &g);
    send_trace(b0, 10, id);
    assert_int_equal(waiting(&s, b0), 0);
    assert_int_equal(work_pending(s.work), 2);
    conn_enter(c1);
    conn_kill(c1, "test: process 1 goes");
    conn_leave(c1);
    conn_enter(c0);
    conn_kill(c0, "test: process 0 goes"); /* the last: the job ends */
    conn_leave(c0);
    bufferevent_free(b0);
    bufferevent_free(b1);
    dpair_pump(&s, 20);
    assert_null(s.jobs);
    assert_int_equal(s.nconns, 0);
    assert_true(s.cache.head->in_use); /* held for the build */
    gate_open(&g);
    drain(&s, &g);
    assert_false(s.cache.head->in_use);
    dpair_srv_free(&s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_served_while_trace_builds),
        cmocka_unit_test(test_close_while_trace_builds),
        cmocka_unit_test(test_reset_while_trace_builds),
        cmocka_unit_test(test_job_ends_while_trace_builds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
