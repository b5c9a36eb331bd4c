/*
 * test_compile_opts.c — the compile options handle (ipuof_compile_opts) on a real ipuofd:
 * every setter refuses a wrong value with a sentence on the handle and leaves the handle as
 * it was; a handle of defaults compiles as a NULL handle and a zeroed struct do; an inference
 * compile with device iterations, replicas and output modes set through the handle has the
 * shapes and outputs PyTorch's arithmetic gives, the same as the struct-based call with the
 * same values; a training compile through the handle (loss, SGD, gradient accumulation and its
 * reduction) takes the SGD step computed here by hand, the same as ipuof_model_compile_training
 * with the structs. The replication factor set on the handle is one process's: in a job of
 * two processes x 2 replicas each process's model has 2 replicas (4 in all on the 4-IPU
 * partition), and processes asking for 1 and 2 are both refused, naming replicationFactor
 * and both values.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

#define B 2 /* micro-batch */
#define F 3 /* features */
#define D 2 /* device iterations */
#define R 2 /* replicas */

static struct testd d;

/* y = Relu(x) + W on x [B, F] and a weight W [1, F]; loss = ReduceSum(y * y), a scalar
 * per replica. */
static void *
model(size_t *len)
{
    static const float w[F] = {0.5f, -1.0f, 2.0f};
    int64_t dx[2] = {B, F}, dw[2] = {1, F};
    struct sim_ob *b = sim_ob_new(13);
    void *bytes = NULL;

    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_initializer(b, "W", IPUOF_DTYPE_FLOAT, 2, dw, w);
    sim_ob_node(b, "Relu", "relu", "x", "r");
    sim_ob_node(b, "Add", "add", "r,W", "y");
    sim_ob_node(b, "Mul", "sq", "y,y", "y2");
    sim_ob_node(b, "ReduceSum", "sum", "y2", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    sim_ob_output_rank(b, "loss", IPUOF_DTYPE_FLOAT, 0);
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

/* rc is IPUOF_E_INVAL (or want) and h's sentence holds says. */
static void
refused(ipuof_compile_opts *h, int rc, int want, const char *says)
{
    print_message("refused: %s\n", ipuof_compile_opts_errmsg(h));
    assert_int_equal(rc, want);
    assert_non_null(strstr(ipuof_compile_opts_errmsg(h), says));
}

static void
test_setters_refuse(void **state)
{
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    struct ipuof_tensor bad = {"s", IPUOF_DTYPE_FLOAT, 1, {2}, NULL, 4};
    struct ipuof_optimizer o = {.kind = 9};
    char longname[70000];

    (void)state;
    assert_non_null(h);
    ipuof_compile_opts_free(NULL); /* a no-op */
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    refused(h, ipuof_compile_opts_set_device_iterations(h, 0), IPUOF_E_INVAL,
            "device_iterations 0: it must be at least 1");
    refused(h, ipuof_compile_opts_set_replicas(h, 0), IPUOF_E_INVAL, "replicas 0");
    refused(h, ipuof_compile_opts_set_gradient_accumulation(h, 0), IPUOF_E_INVAL,
            "gradient_accumulation 0");
    refused(h, ipuof_compile_opts_set_name(h, longname), IPUOF_E_INVAL, "the limit is");
    refused(h, ipuof_compile_opts_set_output_default(h, 7, 0), IPUOF_E_INVAL,
            "output kind 7, which is not one of IPUOF_OUTPUT_*");
    refused(h, ipuof_compile_opts_set_output_default(h, IPUOF_OUTPUT_EVERYN, 0), IPUOF_E_INVAL,
            "n must be at least 1");
    refused(h, ipuof_compile_opts_add_output(h, "", IPUOF_OUTPUT_ALL, 0), IPUOF_E_INVAL,
            "names no output");
    refused(h, ipuof_compile_opts_add_constant_input(h, &bad), IPUOF_E_SHAPE,
            "its shape and dtype need 8");
    refused(h, ipuof_compile_opts_set_strategy(h, 9), IPUOF_E_INVAL, "strategy 9");
    refused(h, ipuof_compile_opts_add_block(h, "/a/", -3, 0), IPUOF_E_INVAL,
            "at least IPUOF_STAGE_AUTO (-1), not -3");
    refused(h, ipuof_compile_opts_add_block(h, NULL, 0, 0), IPUOF_E_INVAL, "not NULL");
    refused(h, ipuof_compile_opts_set_location(h, 4, 0), IPUOF_E_INVAL, "tensor kind 4");
    refused(h, ipuof_compile_opts_set_location(h, 0, 3), IPUOF_E_INVAL, "tensor location 3");
    refused(h, ipuof_compile_opts_set_input_group(h, 2, 9), IPUOF_E_INVAL,
            "input_group_type 9 is unknown");
    refused(h, ipuof_compile_opts_set_loss(h, ""), IPUOF_E_INVAL, "needs a name");
    refused(h, ipuof_compile_opts_set_optimizer(h, &o), IPUOF_E_INVAL, "optimizer kind 9");
    refused(h, ipuof_compile_opts_set_optimizer(h, NULL), IPUOF_E_INVAL, "ipuof_optimizer_init");
    refused(h, ipuof_compile_opts_set_accumulation_reduction(h, 2), IPUOF_E_INVAL,
            "neither IPUOF_REDUCTION_MEAN (0) nor IPUOF_REDUCTION_SUM (1)");
    refused(h, ipuof_compile_opts_add_frozen_weight(h, NULL), IPUOF_E_INVAL, "has no name");
    assert_int_equal(ipuof_compile_opts_set_device_iterations(NULL, 1), IPUOF_E_INVAL);
    /* A success clears the sentence. */
    assert_int_equal(ipuof_compile_opts_set_device_iterations(h, 3), IPUOF_OK);
    assert_string_equal(ipuof_compile_opts_errmsg(h), "");
    ipuof_compile_opts_free(h);
}

/* x of one call: D x R micro-batches of [B, F], values from -1.5 by 0.25. */
static void
fill_x(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = -1.5f + 0.25f * (float)(i % 13);
}

/* Runs m on x (D*R*B*F values) and checks y against Relu(x) + W. */
static void
run_and_check(ipuof_model *m, const float *x)
{
    static const float w[F] = {0.5f, -1.0f, 2.0f};
    struct ipuof_tensor in[1] = {{"x", IPUOF_DTYPE_FLOAT, 2, {D * R * B, F}, x,
                                  sizeof(float) * D * R * B * F}};
    struct ipuof_tensor y;
    double maxdiff = 0;

    assert_int_equal(ipuof_model_run(m, in, 1), IPUOF_OK);
    assert_int_equal(ipuof_model_output(m, 0, &y), IPUOF_OK);
    assert_int_equal(y.bytes, sizeof(float) * D * R * B * F);
    for (size_t i = 0; i < (size_t)D * R * B * F; i++) {
        float want = (x[i] > 0 ? x[i] : 0.0f) + w[i % F];
        double diff = fabs((double)((const float *)y.data)[i] - (double)want);
        maxdiff = diff > maxdiff ? diff : maxdiff;
    }
    print_message("y = Relu(x) + W: max difference %g\n", maxdiff);
    assert_true(maxdiff == 0.0);
}

static void
test_inference_handle_and_struct(void **state)
{
    float x[D * R * B * F];
    struct ipuof_output_mode om = {"loss", IPUOF_OUTPUT_FINAL, 0};
    struct ipuof_model_opts so = {.name = "viastruct", .device_iterations = D, .replicas = R,
                                  .default_output_kind = IPUOF_OUTPUT_ALL,
                                  .output_modes = &om, .n_output_modes = 1};
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    ipuof_model *mh = NULL, *ms = NULL, *md = NULL;
    struct ipuof_tensor t;
    size_t len;
    void *bytes = model(&len);
    ipuof_client *c;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    testd_live = &d;
    c = attach(R);
    /* Defaults: one iteration, one replica, like a NULL struct. */
    assert_int_equal(ipuof_model_compile_with(c, bytes, len, NULL, &md), IPUOF_OK);
    assert_int_equal(ipuof_model_device_iterations(md), 1);
    assert_int_equal(ipuof_model_replicas(md), 1);
    ipuof_model_free(md);
    assert_int_equal(ipuof_model_compile_with(c, bytes, len, h, &md), IPUOF_OK);
    assert_int_equal(ipuof_model_device_iterations(md), 1);
    assert_int_equal(ipuof_model_replicas(md), 1);
    ipuof_model_free(md);

    assert_int_equal(ipuof_compile_opts_set_name(h, "viahandle"), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_device_iterations(h, D), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_replicas(h, R), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_set_output_default(h, IPUOF_OUTPUT_ALL, 0), IPUOF_OK);
    assert_int_equal(ipuof_compile_opts_add_output(h, "loss", IPUOF_OUTPUT_FINAL, 0), IPUOF_OK);
    /* A refused value leaves the handle as it was (still D iterations). */
    assert_int_equal(ipuof_compile_opts_set_device_iterations(h, 0), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_compile_with(c, bytes, len, h, &mh), IPUOF_OK);
    assert_int_equal(ipuof_model_compile(c, bytes, len, &so, &ms), IPUOF_OK);
    for (int k = 0; k < 2; k++) {
        ipuof_model *m = k == 0 ? mh : ms;

        assert_int_equal(ipuof_model_device_iterations(m), D);
        assert_int_equal(ipuof_model_replicas(m), R);
        assert_int_equal(ipuof_model_input_info(m, 0, &t, NULL), IPUOF_OK);
        assert_int_equal(t.rank, 2);
        assert_int_equal(t.dims[0], D * R * B); /* a call carries D x R micro-batches */
        assert_int_equal(ipuof_model_output_info(m, 1, &t, NULL), IPUOF_OK);
        assert_string_equal(t.name, "loss");
        assert_int_equal(t.dims[0], R); /* Final: the last iteration's, per replica */
        fill_x(x, sizeof x / sizeof x[0]);
        run_and_check(m, x);
    }
    ipuof_model_free(mh);
    ipuof_model_free(ms);
    ipuof_compile_opts_free(h);
    free(bytes);
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

/* Trains one SGD step (lr 0.125, accumulation 2, sum) of W through the handle or the
 * structs, and returns W after it in w. */
static void
train_once(ipuof_client *c, const void *bytes, size_t len, int via_handle, const float *x,
           float *w)
{
    struct ipuof_training_opts t = {.loss = "loss", .gradient_accumulation = 2,
                                    .accumulation_reduction = IPUOF_REDUCTION_SUM};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {2 * B, F}, x, sizeof(float) * 2 * B * F};
    ipuof_model *m = NULL;

    assert_int_equal(ipuof_optimizer_init(&t.optimizer, IPUOF_OPTIMIZER_SGD), IPUOF_OK);
    t.optimizer.lr = 0.125f;
    if (via_handle) {
        ipuof_compile_opts *h = ipuof_compile_opts_new();

        assert_int_equal(ipuof_compile_opts_set_loss(h, "loss"), IPUOF_OK);
        assert_int_equal(ipuof_compile_opts_set_optimizer(h, &t.optimizer), IPUOF_OK);
        assert_int_equal(ipuof_compile_opts_set_gradient_accumulation(h, 2), IPUOF_OK);
        assert_int_equal(ipuof_compile_opts_set_accumulation_reduction(h, IPUOF_REDUCTION_SUM),
                         IPUOF_OK);
        assert_int_equal(ipuof_model_compile_with(c, bytes, len, h, &m), IPUOF_OK);
        ipuof_compile_opts_free(h);
    } else {
        assert_int_equal(ipuof_model_compile_training(c, bytes, len, NULL, &t, &m), IPUOF_OK);
    }
    assert_true(ipuof_model_is_training(m));
    assert_int_equal(ipuof_model_gradient_accumulation(m), 2);
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    assert_int_equal(ipuof_model_read_weight(m, "W", w, sizeof(float) * F), IPUOF_OK);
    ipuof_model_free(m);
}

static void
test_training_handle_and_struct(void **state)
{
    static const float w0[F] = {0.5f, -1.0f, 2.0f};
    float x[2 * B * F], wh[F], ws[F], want[F] = {0};
    double maxdiff = 0;
    size_t len;
    void *bytes = model(&len);
    ipuof_client *c;

    (void)state;
    fill_x(x, 2 * B * F);
    /* loss = sum (Relu(x) + W)^2, so dloss/dW[j] = sum over rows of 2 (Relu(x) + W)[j],
     * summed over the 2 accumulated micro-batches; W -= lr x that. */
    for (size_t i = 0; i < 2 * B; i++)
        for (size_t j = 0; j < F; j++) {
            float v = x[i * F + j];
            want[j] += 2.0f * ((v > 0 ? v : 0.0f) + w0[j]);
        }
    for (size_t j = 0; j < F; j++)
        want[j] = w0[j] - 0.125f * want[j];
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    testd_live = &d;
    c = attach(1);
    train_once(c, bytes, len, 1, x, wh);
    train_once(c, bytes, len, 0, x, ws);
    for (size_t j = 0; j < F; j++) {
        double diff = fabs((double)wh[j] - (double)want[j]);
        maxdiff = diff > maxdiff ? diff : maxdiff;
        assert_memory_equal(&wh[j], &ws[j], sizeof(float)); /* the same bytes both ways */
    }
    print_message("W after one SGD step: max difference from the hand-computed step %g\n",
                  maxdiff);
    assert_true(maxdiff < 1e-5);
    free(bytes);
    ipuof_client_free(c);
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

/* One process of a two-process job compiling with `replicas` replicas. */
struct proc {
    unsigned id, replicas;
    int rc;
    unsigned got_replicas;
    char msg[1024];
};

static void *
job_process(void *arg)
{
    struct proc *p = arg;
    struct ipuof_attach_opts ao = {.num_ipus = 4, .partition_name = "job", .process_id = p->id,
                                   .num_processes = 2};
    ipuof_client *c = ipuof_client_new();
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    ipuof_model *m = NULL;
    size_t len;
    void *bytes = model(&len);

    p->rc = c == NULL || h == NULL ? IPUOF_E_NOMEM : ipuof_client_connect(c, d.addr);
    if (p->rc == IPUOF_OK)
        p->rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    if (p->rc == IPUOF_OK)
        p->rc = ipuof_compile_opts_set_replicas(h, p->replicas);
    if (p->rc == IPUOF_OK)
        p->rc = ipuof_model_compile_with(c, bytes, len, h, &m);
    if (p->rc == IPUOF_OK)
        p->got_replicas = ipuof_model_replicas(m);
    snprintf(p->msg, sizeof p->msg, "%s", c != NULL ? ipuof_client_errmsg(c) : "");
    ipuof_model_free(m);
    ipuof_compile_opts_free(h);
    ipuof_client_free(c);
    free(bytes);
    return NULL;
}

/* Runs the two processes with r0 and r1 replicas. */
static void
run_job(struct proc *p, unsigned r0, unsigned r1)
{
    pthread_t t[2];

    memset(p, 0, 2 * sizeof *p);
    p[0] = (struct proc){.id = 0, .replicas = r0};
    p[1] = (struct proc){.id = 1, .replicas = r1};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, job_process, &p[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
}

static void
test_replicas_per_process_in_a_job(void **state)
{
    struct proc p[2];

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    testd_live = &d;
    run_job(p, 2, 2);
    for (int i = 0; i < 2; i++) {
        print_message("process %u: rc %d, %u replicas %s\n", p[i].id, p[i].rc,
                      p[i].got_replicas, p[i].msg);
        assert_int_equal(p[i].rc, IPUOF_OK);
        assert_int_equal(p[i].got_replicas, 2); /* its own; the job's model has 4 */
    }
    run_job(p, 1, 2);
    for (int i = 0; i < 2; i++) {
        print_message("process %u: %s\n", p[i].id, p[i].msg);
        assert_int_equal(p[i].rc, IPUOF_E_INVAL);
        assert_non_null(strstr(p[i].msg, "replicationFactor is 1 in process 0 and 2 in "
                                         "process 1"));
    }
    assert_int_equal(testd_stop(&d), 0);
    testd_live = NULL;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setters_refuse),
        cmocka_unit_test_teardown(test_inference_handle_and_struct, testd_stop_live),
        cmocka_unit_test_teardown(test_training_handle_and_struct, testd_stop_live),
        cmocka_unit_test_teardown(test_replicas_per_process_in_a_job, testd_stop_live),
    };

    return cmocka_run_group_tests_name("compile_opts", tests, NULL, NULL);
}
