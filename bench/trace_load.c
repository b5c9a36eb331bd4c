/*
 * trace_load — how long other clients wait for a status reply while one client asks for
 * large traces (issue 17, defect 7). bench/trace_load.sh builds and runs it.
 *
 * Starts its own ipuofd (IPUOFD_BIN, default build/bin/ipuofd). Client A compiles a chain of
 * NODES Relu nodes with profile and DI device iterations, runs it once, and times one trace
 * request alone; then it pipelines TRACES trace requests (a thread reads the replies) while
 * client B sends status requests one after another and times each round trip. Prints the
 * figures; judges nothing (exit 1 only when something cannot run).
 *
 *   trace_load [NODES [DI [TRACES]]]     defaults 1 100000 20 (a 34 MB trace, the largest:
 *                                        2^18 events)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frame.h"
#include "ipuof/client.h"
#include "testd.h"
#include "testmodels.h"

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct testd d;

/* Prints what failed and the end of the daemon's log, stops the daemon, exits 1. */
static void
die(const char *what)
{
    char cmd[160];

    fprintf(stderr, "trace_load: %s\n", what);
    if (d.pid > 0) {
        snprintf(cmd, sizeof cmd, "tail -5 %s >&2", d.log);
        if (system(cmd) != 0)
            fprintf(stderr, "trace_load: no daemon log at %s\n", d.log);
        testd_stop(&d);
    }
    exit(1);
}

/* Receives one frame on fd carrying want; its payload length, or -1 (said on stderr). */
static long
try_expect(int fd, Ipuof__Header__BodyCase want, const char *what)
{
    Ipuof__Header *r;
    void *payload = NULL;
    size_t len = 0;
    long rc = -1;

    while ((r = raw_recv_payload(fd, 120000, &payload, &len)) != NULL &&
           r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS) {
        ipuof_frame_header_free(r);
        free(payload);
    }
    if (r == NULL)
        fprintf(stderr, "trace_load: no %s (connection closed or 120 s passed)\n", what);
    else if (r->body_case == IPUOF__HEADER__BODY_ERROR)
        fprintf(stderr, "trace_load: %s: error: %s\n", what, r->error->message);
    else if (r->body_case != want)
        fprintf(stderr, "trace_load: %s: another frame came\n", what);
    else
        rc = (long)len;
    ipuof_frame_header_free(r);
    free(payload);
    return rc;
}

/* As try_expect; dies on failure. */
static size_t
expect(int fd, Ipuof__Header__BodyCase want, const char *what)
{
    long rc = try_expect(fd, want, what);

    if (rc < 0)
        die(what);
    return (size_t)rc;
}

static void
send_trace(int fd, uint64_t req)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__TraceRequest t = IPUOF__TRACE_REQUEST__INIT;

    t.model_id = 1;
    h.request_id = req;
    h.body_case = IPUOF__HEADER__BODY_TRACE;
    h.trace = &t;
    if (raw_send(fd, &h) != 0)
        die("sending a trace request");
}

/* One status round trip on fd; its seconds. */
static double
status_rtt(int fd, uint64_t req)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__StatusRequest st = IPUOF__STATUS_REQUEST__INIT;
    double t0 = now_s();

    h.request_id = req;
    h.body_case = IPUOF__HEADER__BODY_STATUS;
    h.status = &st;
    if (raw_send(fd, &h) != 0)
        die("sending a status request");
    expect(fd, IPUOF__HEADER__BODY_STATUS_REPLY, "status reply");
    return now_s() - t0;
}

struct reader {
    int fd, n;
    int got;          /* replies so far (atomic: the main thread reads it) */
    int finished;     /* the reader is done (all replies, or the connection failed) */
    double start, end;
};

static void *
read_traces(void *arg)
{
    struct reader *rd = arg;

    for (int i = 0; i < rd->n; i++) {
        if (try_expect(rd->fd, IPUOF__HEADER__BODY_TRACE_REPLY, "trace reply") < 0)
            break;
        __atomic_store_n(&rd->got, i + 1, __ATOMIC_RELEASE);
        if (getenv("TRACE_LOAD_VERBOSE") != NULL)
            fprintf(stderr, "  trace reply %d at %.3f s\n", i + 1, now_s() - rd->start);
    }
    rd->end = now_s();
    __atomic_store_n(&rd->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 1, di = argc > 2 ? atoi(argv[2]) : 100000;
    int traces = argc > 3 ? atoi(argv[3]) : 20;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__RunRequest rq = IPUOF__RUN_REQUEST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    int64_t dims[2] = {1, 4};
    struct reader rd;
    pthread_t th;
    size_t len, tlen;
    void *bytes;
    float *x;
    double t0, one, *lat;
    int a, b, n = 0, cap = 100000;

    if (nodes < 1 || di < 1 || traces < 1)
        die("usage: trace_load [NODES [DI [TRACES]]] (each >= 1)");
    if (testd_start(&d, NULL, NULL) != 0)
        die("the daemon did not start");
    a = raw_session(d.port, 1);
    b = raw_session(d.port, 0);
    if (a < 0 || b < 0)
        die("no session");
    bytes = testmodel_relu(1, nodes, 4, -1, &len);
    if (bytes == NULL)
        die("out of memory building the model");
    cr.model_bytes = len;
    cr.device_iterations = (uint32_t)di;
    cr.name = (char *)"relus";
    cr.profile = 1;
    h.request_id = 3;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = &cr;
    if (raw_send_payload(a, &h, bytes, len) != 0)
        die("sending the compile");
    expect(a, IPUOF__HEADER__BODY_COMPILE_REPLY, "compile reply");
    x = calloc((size_t)di * 4, sizeof *x);
    ti.name = (char *)"x0";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    dims[0] = di;
    ti.n_dims = 2;
    ti.dims = dims;
    ti.bytes = (uint64_t)di * 16;
    rq.model_id = 1;
    rq.n_inputs = 1;
    rq.inputs = &tp;
    h = (Ipuof__Header)IPUOF__HEADER__INIT;
    h.request_id = 4;
    h.body_case = IPUOF__HEADER__BODY_RUN;
    h.run = &rq;
    if (x == NULL || raw_send_payload(a, &h, x, (size_t)di * 16) != 0)
        die("sending the run");
    expect(a, IPUOF__HEADER__BODY_RUN_REPLY, "run reply");

    t0 = now_s();
    send_trace(a, 5);
    tlen = expect(a, IPUOF__HEADER__BODY_TRACE_REPLY, "trace reply");
    one = now_s() - t0;
    printf("trace: %d nodes x %d device iterations: %.1f MB, one request %.3f s\n", nodes, di,
           (double)tlen / 1e6, one);

    lat = malloc((size_t)cap * sizeof *lat);
    for (int i = 0; i < 20; i++)
        lat[i] = status_rtt(b, 100 + (uint64_t)i);
    qsort(lat, 20, sizeof *lat, cmp_double);
    printf("status alone: median %.2f ms, max %.2f ms (20 requests)\n", lat[10] * 1e3,
           lat[19] * 1e3);

    rd.fd = a;
    rd.n = traces;
    rd.got = 0;
    rd.finished = 0;
    t0 = rd.start = now_s();
    for (int i = 0; i < traces; i++)
        send_trace(a, 1000 + (uint64_t)i);
    pthread_create(&th, NULL, read_traces, &rd);
    while (!__atomic_load_n(&rd.finished, __ATOMIC_ACQUIRE) && n < cap) {
        struct timespec pause = {0, 1000000}; /* about 1000 requests a second */
        double ts = now_s() - t0;
        int g0 = __atomic_load_n(&rd.got, __ATOMIC_ACQUIRE);
        lat[n] = status_rtt(b, 10000 + (uint64_t)n);
        if (getenv("TRACE_LOAD_VERBOSE") != NULL && lat[n] > 0.05)
            fprintf(stderr, "  status at %.3f s took %.3f s (trace replies %d -> %d)\n", ts,
                    lat[n], g0, __atomic_load_n(&rd.got, __ATOMIC_ACQUIRE));
        n++;
        nanosleep(&pause, NULL);
    }
    pthread_join(th, NULL);
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    printf("under %d pipelined traces (%d answered in %.2f s%s): %d status requests, "
           "median %.2f ms, p90 %.2f ms, max %.2f ms\n", traces, rd.got, rd.end - t0,
           rd.got < traces ? "; client A was dropped" : "", n, lat[n / 2] * 1e3,
           lat[n * 9 / 10] * 1e3, lat[n - 1] * 1e3);
    free(lat);
    free(x);
    free(bytes);
    testd_stop(&d);
    return 0;
}
