/*
 * test_input_groups.c — input replica grouping (PopTorch's inputReplicaGrouping) on a real
 * ipuofd through the client library: a call carries B x D x (R / g) samples; every replica
 * of a group sees its group's input, for consecutive groups ({0,1}, {2,3}) and orthogonal
 * ones ({0,2}, {1,3}); a group size that does not divide the replicas, one larger than
 * them, and the type All are refused with PopTorch's wording; without grouping nothing
 * changes. In a job of two processes x 2 local replicas with groups of 2, each process's
 * group reaches both of its replicas and only those; the same across a Pod of two daemons
 * on loopback (IPUOF_POD_HOSTS), process 0 on host-a and process 1 on host-b; and a
 * training model grouped on one daemon and not on the other is refused on both at its
 * first call, naming what differs.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

#define B 2      /* micro-batch */
#define F 3      /* features */
#define D 2      /* device iterations */
#define R 4      /* replicas */

static struct testd d, d2;

/* y = Relu(x) on x [B, F]. */
static void *
relu_model(size_t *len)
{
    int64_t dx[2] = {B, F};
    struct sim_ob *b = sim_ob_new(13);
    void *bytes = NULL;

    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_node(b, "Relu", "relu", "x", "y");
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    return bytes;
}

static ipuof_client *
attach(unsigned n)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = n, .num_processes = 1};

    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);
    return c;
}

/* Compiles the model with groups of g of type t; returns the code, *m on success. */
static int
compile(ipuof_client *c, unsigned g, int t, ipuof_model **m)
{
    size_t len;
    void *bytes = relu_model(&len);
    struct ipuof_model_opts o = {.device_iterations = D, .replicas = R,
                                 .default_output_kind = IPUOF_OUTPUT_ALL,
                                 .input_group_size = g, .input_group_type = t};
    int rc = ipuof_model_compile(c, bytes, len, &o, m);

    free(bytes);
    return rc;
}

/* Runs a call with group inputs holding 100 * group + 10 * d + sample; checks that
 * replica r of iteration d got the input of group group_of(r). */
static void
check_groups(ipuof_model *m, unsigned g, int orthogonal)
{
    unsigned groups = R / g;
    size_t n_in = (size_t)D * groups * B * F;
    float *x = calloc(n_in, sizeof *x);
    struct ipuof_tensor in = {.name = "x", .dtype = IPUOF_DTYPE_FLOAT, .rank = 2,
                              .dims = {(int64_t)D * groups * B, F}, .data = x,
                              .bytes = n_in * sizeof *x};
    struct ipuof_tensor info, out;
    int64_t step[8];

    assert_non_null(x);
    assert_int_equal(ipuof_model_input_info(m, 0, &info, step), IPUOF_OK);
    assert_int_equal(info.dims[0], (int64_t)D * groups * B); /* the reply says one per group */
    for (unsigned dd = 0; dd < D; dd++)
        for (unsigned s = 0; s < groups; s++)
            for (unsigned k = 0; k < B * F; k++)
                x[((size_t)dd * groups + s) * B * F + k] = (float)(100 * s + 10 * dd + k);
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    assert_int_equal(ipuof_model_output(m, 0, &out), IPUOF_OK);
    assert_int_equal(out.dims[0], (int64_t)D * R * B); /* every replica answers */
    for (unsigned dd = 0; dd < D; dd++) {
        for (unsigned r = 0; r < R; r++) {
            unsigned s = orthogonal ? r % groups : r / g;
            const float *y = (const float *)out.data + ((size_t)dd * R + r) * B * F;
            for (unsigned k = 0; k < B * F; k++)
                assert_true(y[k] == (float)(100 * s + 10 * dd + k));
        }
    }
    free(x);
}

static void
test_consecutive_and_orthogonal(void **state)
{
    ipuof_client *c;
    ipuof_model *m = NULL;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    testd_live = &d;
    c = attach(R);
    assert_int_equal(compile(c, 2, IPUOF_GROUP_CONSECUTIVE, &m), IPUOF_OK);
    check_groups(m, 2, 0);
    ipuof_model_free(m);
    assert_int_equal(compile(c, 2, IPUOF_GROUP_ORTHOGONAL, &m), IPUOF_OK);
    check_groups(m, 2, 1);
    ipuof_model_free(m);
    assert_int_equal(compile(c, 4, IPUOF_GROUP_ORTHOGONAL, &m), IPUOF_OK);
    check_groups(m, 4, 1); /* one input for all four */
    ipuof_model_free(m);
    assert_int_equal(compile(c, 0, IPUOF_GROUP_CONSECUTIVE, &m), IPUOF_OK);
    check_groups(m, 1, 0); /* no grouping: every replica its own */
    ipuof_model_free(m);
    assert_int_equal(compile(c, 2, IPUOF_GROUP_NONE, &m), IPUOF_OK);
    check_groups(m, 1, 0); /* NoGrouping: size 1 */
    ipuof_model_free(m);
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

static void
test_refused(void **state)
{
    static const struct {
        unsigned g;
        int t;
        const char *says;
    } cases[] = {
        {3, IPUOF_GROUP_CONSECUTIVE, "input_group_size must be a factor of replication_factor"},
        {8, IPUOF_GROUP_ORTHOGONAL, "input_group_size cannot be larger than replication_factor"},
        {2, IPUOF_GROUP_ALL, "input_group_type cannot be All"},
    };
    ipuof_client *c;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    testd_live = &d;
    c = attach(R);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ipuof_model *m = NULL;
        assert_int_equal(compile(c, cases[i].g, cases[i].t, &m), IPUOF_E_INVAL);
        assert_null(m);
        assert_non_null(strstr(ipuof_client_errmsg(c), cases[i].says));
        print_message("refused: %s\n", ipuof_client_errmsg(c));
    }
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

/* One process of a two-process job: 2 local replicas in one consecutive group. */
struct proc_arg {
    unsigned id;
    const char *addr;            /* its daemon */
    int rc;
    int progress;                /* compile progress events it received */
    int cost_rc;                 /* ipuof_model_run_cost after its run */
    double device_seconds;
    float got[D * 2 * B * F];
};

static void
count_progress(int done, int total, void *user)
{
    struct proc_arg *pa = user;

    if (done >= 1 && done <= total) /* counted only when well formed (no asserts off the
                                     * test's thread) */
        pa->progress++;
}

static void *
job_process(void *arg)
{
    struct proc_arg *pa = arg;
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = R, .partition_name = "grp", .process_id = pa->id,
                                   .num_processes = 2};
    size_t len;
    void *bytes = relu_model(&len);
    struct ipuof_model_opts o = {.device_iterations = D, .replicas = 2,
                                 .default_output_kind = IPUOF_OUTPUT_ALL,
                                 .input_group_size = 2, .progress = count_progress,
                                 .progress_user = pa};
    float x[D * B * F];
    struct ipuof_tensor in = {.name = "x", .dtype = IPUOF_DTYPE_FLOAT, .rank = 2,
                              .dims = {D * B, F}, .data = x, .bytes = sizeof x};
    struct ipuof_tensor out;
    ipuof_model *m = NULL;

    for (unsigned k = 0; k < D * B * F; k++)
        x[k] = (float)(1000 * pa->id + k);
    pa->rc = c == NULL ? IPUOF_E_NOMEM : ipuof_client_connect(c, pa->addr);
    if (pa->rc == IPUOF_OK)
        pa->rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    if (pa->rc == IPUOF_OK)
        pa->rc = ipuof_model_compile(c, bytes, len, &o, &m);
    if (pa->rc == IPUOF_OK)
        pa->rc = ipuof_model_run(m, &in, 1);
    if (pa->rc == IPUOF_OK)
        pa->cost_rc = ipuof_model_run_cost(m, &pa->device_seconds, NULL, NULL);
    if (pa->rc == IPUOF_OK)
        pa->rc = ipuof_model_output(m, 0, &out);
    if (pa->rc == IPUOF_OK && out.bytes == sizeof pa->got)
        memcpy(pa->got, out.data, sizeof pa->got);
    else if (pa->rc == IPUOF_OK)
        pa->rc = IPUOF_E_SHAPE;
    if (pa->rc != IPUOF_OK && c != NULL)
        fprintf(stderr, "process %u: %s\n", pa->id, ipuof_client_errmsg(c));
    ipuof_model_free(m);
    ipuof_client_free(c);
    free(bytes);
    return NULL;
}

/* Runs the two processes of the job on da and db and checks each one's replicas. */
static void
run_job(const struct testd *da, const struct testd *db)
{
    struct proc_arg pa[2] = {{.id = 0, .addr = da->addr}, {.id = 1, .addr = db->addr}};
    pthread_t t[2];

    for (int p = 0; p < 2; p++)
        assert_int_equal(pthread_create(&t[p], NULL, job_process, &pa[p]), 0);
    for (int p = 0; p < 2; p++)
        pthread_join(t[p], NULL);
    for (unsigned p = 0; p < 2; p++) {
        assert_int_equal(pa[p].rc, IPUOF_OK);
        assert_true(pa[p].progress >= 1); /* every process hears the job's compile */
        /* and gets the run's cost figures, as a process alone does */
        print_message("process %u: run cost rc %d, %g simulated device seconds\n", p,
                      pa[p].cost_rc, pa[p].device_seconds);
        assert_int_equal(pa[p].cost_rc, IPUOF_OK);
        assert_true(pa[p].device_seconds > 0);
        for (unsigned dd = 0; dd < D; dd++)
            for (unsigned r = 0; r < 2; r++) /* both local replicas: the process's group */
                for (unsigned k = 0; k < B * F; k++)
                    assert_true(pa[p].got[((dd * 2) + r) * B * F + k] ==
                                (float)(1000 * p + dd * B * F + k));
    }
}

static void
test_groups_in_a_job(void **state)
{
    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    testd_live = &d;
    run_job(&d, &d);
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

/* logits = x w^T on x [B, F], w [2, F]; loss = SCE(logits, labels). */
static void *
train_model(size_t *len)
{
    static const float w[2 * F] = {0.1f, -0.2f, 0.3f, 0.2f, 0.1f, -0.3f};
    int64_t dx[2] = {B, F}, dl[1] = {B}, dw[2] = {2, F};
    struct sim_ob *b = sim_ob_new(13);
    void *bytes = NULL;

    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_input(b, "labels", IPUOF_DTYPE_INT64, 1, dl);
    sim_ob_initializer(b, "w", IPUOF_DTYPE_FLOAT, 2, dw, w);
    sim_ob_node(b, "Gemm", "fc", "x,w", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "sce", "logits,labels", "loss");
    sim_ob_attr_str(b, "reduction", "mean");
    sim_ob_output_rank(b, "loss", IPUOF_DTYPE_FLOAT, 0);
    assert_int_equal(sim_ob_serialize(b, &bytes, len), 0);
    sim_ob_free(b);
    return bytes;
}

/* A process of a Pod training job: 2 replicas, in one group of 2 when grouped. */
struct train_arg {
    unsigned id;
    const char *addr;
    int grouped;
    int rc;
    char msg[1024];
};

static void *
train_process(void *arg)
{
    struct train_arg *ta = arg;
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = R, .partition_name = "grpt", .process_id = ta->id,
                                   .num_processes = 2};
    size_t len;
    void *bytes = train_model(&len);
    struct ipuof_model_opts o = {.device_iterations = D, .replicas = 2,
                                 .input_group_size = ta->grouped ? 2 : 1};
    struct ipuof_training_opts t = {.loss = "loss"};
    unsigned rows = D * (ta->grouped ? 1 : 2) * B;
    float x[D * 2 * B * F] = {0};
    int64_t labels[D * 2 * B] = {0};
    struct ipuof_tensor in[2] = {
        {.name = "x", .dtype = IPUOF_DTYPE_FLOAT, .rank = 2, .dims = {rows, F}, .data = x,
         .bytes = rows * F * sizeof(float)},
        {.name = "labels", .dtype = IPUOF_DTYPE_INT64, .rank = 1, .dims = {rows},
         .data = labels, .bytes = rows * sizeof(int64_t)}};
    ipuof_model *m = NULL;

    for (unsigned k = 0; k < D * 2 * B * F; k++)
        x[k] = (float)(k % 7) * 0.1f;
    ta->rc = c == NULL ? IPUOF_E_NOMEM : ipuof_client_connect(c, ta->addr);
    if (ta->rc == IPUOF_OK)
        ta->rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    if (ta->rc == IPUOF_OK)
        ta->rc = ipuof_model_compile_training(c, bytes, len, &o, &t, &m);
    if (ta->rc == IPUOF_OK)
        ta->rc = ipuof_model_run(m, in, 2);
    if (c != NULL)
        snprintf(ta->msg, sizeof ta->msg, "%s", ipuof_client_errmsg(c));
    ipuof_model_free(m);
    ipuof_client_free(c);
    free(bytes);
    return NULL;
}

/* Starts daemon t as Pod host name (Pod port pport, one peer) with 2 IPUs. 0 or -1. */
static int
start_pod_daemon(struct testd *t, const char *name, int pport, const char *peer, int peer_port)
{
    char cfgtext[512];
    const char *extra[] = {"--ipus", "2", NULL};

    snprintf(cfgtext, sizeof cfgtext,
             "[pod]\nname = %s\nlisten = 127.0.0.1:%d\npeers = %s=127.0.0.1:%d\n"
             "token = pod-secret\nhello_interval = 1\ntimeout_ms = 2000\n", name, pport,
             peer, peer_port);
    return testd_start(t, cfgtext, extra);
}

static int
stop_both(void **state)
{
    (void)state;
    unsetenv("IPUOF_POD_HOSTS");
    if (d2.pid > 0)
        testd_stop(&d2);
    memset(&d2, 0, sizeof d2);
    return testd_stop_live(state);
}

/* The same job across a Pod: each daemon (2 IPUs) holds one process and its 2 replicas;
 * groups are a process's own replicas, so each daemon slices as one daemon does. */
static void
test_groups_across_a_pod(void **state)
{
    int pa = testd_free_port(), pb = testd_free_port();

    (void)state;
    assert_int_equal(start_pod_daemon(&d, "host-a", pa, "host-b", pb), 0);
    testd_live = &d;
    assert_int_equal(start_pod_daemon(&d2, "host-b", pb, "host-a", pa), 0);
    assert_int_equal(setenv("IPUOF_POD_HOSTS", "host-a,host-b", 1), 0);
    run_job(&d, &d2);
    {   /* groups on host-a's process only: the daemons' models differ */
        struct train_arg ta[2] = {{.id = 0, .addr = d.addr, .grouped = 1},
                                  {.id = 1, .addr = d2.addr, .grouped = 0}};
        pthread_t t[2];
        for (int p = 0; p < 2; p++)
            assert_int_equal(pthread_create(&t[p], NULL, train_process, &ta[p]), 0);
        for (int p = 0; p < 2; p++)
            pthread_join(t[p], NULL);
        for (int p = 0; p < 2; p++) {
            print_message("process %d: rc %d: %s\n", p, ta[p].rc, ta[p].msg);
            assert_int_not_equal(ta[p].rc, IPUOF_OK);
            assert_non_null(strstr(ta[p].msg, "differs between the Pod's daemons"));
        }
    }
    unsetenv("IPUOF_POD_HOSTS");
    assert_int_equal(testd_stop(&d2), 0);
    memset(&d2, 0, sizeof d2);
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_consecutive_and_orthogonal, testd_stop_live),
        cmocka_unit_test_teardown(test_refused, testd_stop_live),
        cmocka_unit_test_teardown(test_groups_in_a_job, testd_stop_live),
        cmocka_unit_test_teardown(test_groups_across_a_pod, stop_both),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
