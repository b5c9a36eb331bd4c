/*
 * test_placement.c — placement options, cost figures and traces against a real ipuofd:
 * a model whose nodes are named as torch 1.13 names them ("/b1/...", "/b2/...") compiled
 * with blocks over two IPUs, pipelined, with profiling on; its run's cost figures (samples
 * x seconds adding up, two IPUs busy) and trace (lanes, spans of both stages) through the
 * client library; the [cost] rates of the configuration reaching the simulated clock (a
 * reload that slows compute down slows the simulated run down); the executable cache
 * telling placements apart; the daemon's own checks of what a client sends (raw frames past the library's
 * checks: too many blocks, a block IPU beyond the partition, an unknown strategy or
 * location); a trace request for a model compiled without profiling; the [cost] section of
 * the configuration accepted and a bad rate refused.
 */
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

#define B 4
#define K 8

static struct testd d;

static int
teardown(void **state)
{
    (void)state;
    return testd_reset(&d);
}

/* y = Relu(Relu(x W1) W2): nodes /b1/MatMul, /b1/Relu, /b2/MatMul, /b2/Relu. */
static void
two_block_model(void **out, size_t *len)
{
    static float w1[K * K], w2[K * K];
    struct sim_ob *b = sim_ob_new(13);
    int64_t dx[2] = {B, K}, dw[2] = {K, K};

    for (int i = 0; i < K * K; i++) {
        w1[i] = (float)((i * 7) % 11) / 11.0f - 0.3f;
        w2[i] = (float)((i * 5) % 13) / 13.0f - 0.4f;
    }
    assert_non_null(b);
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_initializer(b, "W1", IPUOF_DTYPE_FLOAT, 2, dw, w1);
    sim_ob_initializer(b, "W2", IPUOF_DTYPE_FLOAT, 2, dw, w2);
    sim_ob_node(b, "MatMul", "/b1/MatMul", "x,W1", "h1");
    sim_ob_node(b, "Relu", "/b1/Relu", "h1", "a1");
    sim_ob_node(b, "MatMul", "/b2/MatMul", "a1,W2", "h2");
    sim_ob_node(b, "Relu", "/b2/Relu", "h2", "y");
    sim_ob_output(b, "y", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, out, len), 0);
    sim_ob_free(b);
}

static void
test_options_cost_trace(void **state)
{
    static const char conf[] = "[cost]\nflops_per_s = 62.5e12\nlink_bytes_per_s = 320e9\n";
    static const struct ipuof_block blocks[2] = {{"/b1/", IPUOF_STAGE_AUTO, 0},
                                                 {"/b2/", IPUOF_STAGE_AUTO, 1}};
    struct ipuof_attach_opts ao = {.num_ipus = 2};
    struct ipuof_model_opts o = {.name = "placed", .device_iterations = 4};
    float x[4 * B * K];
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {4 * B, K}, x, sizeof x};
    ipuof_client *c = ipuof_client_new();
    ipuof_model *m = NULL, *m2 = NULL, *plain = NULL;
    double secs = 0, sps = 0;
    int stage = -1, rc;
    char *json = NULL;
    size_t len = 0;
    void *onnx = NULL;
    size_t onnx_len = 0;

    (void)state;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((i * 3) % 7) / 7.0f - 0.2f;
    assert_int_equal(testd_start(&d, conf, NULL), 0);
    two_block_model(&onnx, &onnx_len);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, blocks, 2), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_strategy(&o, IPUOF_STRATEGY_PIPELINED), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_profile(&o, 1), IPUOF_OK);
    rc = ipuof_model_compile(c, onnx, onnx_len, &o, &m);
    print_message("  compile pipelined over 2 IPUs: %s %s\n", ipuof_status_name(rc),
                  ipuof_client_errmsg(c));
    assert_int_equal(rc, IPUOF_OK);
    assert_int_equal(ipuof_model_memory_detail(m, 0, NULL, NULL, NULL, NULL, NULL), IPUOF_OK);
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);

    rc = ipuof_model_run_cost(m, &secs, &sps, &stage);
    print_message("  cost: %s (%s) device %.3g s, %.4g samples/s, bottleneck stage %d\n",
                  ipuof_status_name(rc), rc ? ipuof_client_errmsg(c) : "", secs, sps, stage);
    assert_int_equal(rc, IPUOF_OK);
    assert_true(secs > 0 && sps > 0);
    assert_true(sps * secs > 4 * B - 1e-6 && sps * secs < 4 * B + 1e-6);
    assert_true(stage == 0 || stage == 1);
    assert_int_equal(ipuof_model_run_ipu_count(m), 2);
    for (size_t i = 0; i < 2; i++) {
        double f = -1;
        assert_int_equal(ipuof_model_run_busy(m, i, &f), IPUOF_OK);
        assert_true(f > 0 && f <= 1.0);
    }
    rc = ipuof_model_trace(m, &json, &len);
    print_message("  trace: %s %zu bytes %s\n", ipuof_status_name(rc), len,
                  rc ? ipuof_client_errmsg(c) : "");
    assert_int_equal(rc, IPUOF_OK);
    assert_int_equal(strlen(json), len);
    assert_non_null(strstr(json, "\"traceEvents\""));
    assert_non_null(strstr(json, "\"IPU 1\""));
    assert_non_null(strstr(json, "\"F0.0\""));
    assert_non_null(strstr(json, "\"F1.3\""));
    free(json);
    json = NULL;

    /* Compute, compute sets and host link 1000 times slower after a reload: the same
     * placement, compiled again (the rates are part of the cache key), takes longer on the
     * simulated clock (a small model's step is mostly fixed costs: docs/cost-model.md). */
    {
        double secs2 = 0;
        assert_int_equal(testd_write_config(&d, "[cost]\nflops_per_s = 62.5e9\nhost_bytes_per_s = 12.5e6\n"
                                                  "compute_set_cycles = 1000000\n"), 0);
        kill(d.pid, SIGHUP);
        for (int i = 0; i < 200 && !testd_log_contains(&d, "configuration reloaded"); i++)
            usleep(10000);
        assert_true(testd_log_contains(&d, "configuration reloaded"));
        assert_int_equal(ipuof_model_compile(c, onnx, onnx_len, &o, &m2), IPUOF_OK);
        assert_int_equal(ipuof_model_cached(m2), 0);
        assert_int_equal(ipuof_model_run(m2, &in, 1), IPUOF_OK);
        assert_int_equal(ipuof_model_run_cost(m2, &secs2, NULL, NULL), IPUOF_OK);
        print_message("  device time %.4g s, with compute and host link 1000x slower %.4g s\n", secs,
                      secs2);
        assert_true(secs2 > secs * 2);
        ipuof_model_free(m2);
        m2 = NULL;
    }

    /* Same bytes, same placement: the cache; another strategy: a new executable. */
    ipuof_model_free(m);
    m = NULL;
    assert_int_equal(ipuof_model_compile(c, onnx, onnx_len, &o, &m), IPUOF_OK);
    assert_int_equal(ipuof_model_cached(m), 1);
    assert_int_equal(ipuof_model_opts_set_strategy(&o, IPUOF_STRATEGY_SHARDED), IPUOF_OK);
    assert_int_equal(ipuof_model_compile(c, onnx, onnx_len, &o, &m2), IPUOF_OK);
    assert_int_equal(ipuof_model_cached(m2), 0);

    /* Without profiling the daemon refuses the trace with a sentence. */
    {
        struct ipuof_model_opts po = {.name = "plain", .device_iterations = 4, .no_cache = 1};
        assert_int_equal(ipuof_model_compile(c, onnx, onnx_len, &po, &plain), IPUOF_OK);
        assert_int_equal(ipuof_model_run(plain, &in, 1), IPUOF_OK);
        rc = ipuof_model_trace(plain, &json, &len);
        print_message("  trace without profile: %s %s\n", ipuof_status_name(rc),
                      ipuof_client_errmsg(c));
        assert_int_equal(rc, IPUOF_E_INVAL);
        assert_non_null(strstr(ipuof_client_errmsg(c), "without profiling"));
        assert_null(json);
    }
    ipuof_model_free(plain);
    ipuof_model_free(m2);
    ipuof_model_free(m);
    ipuof_client_free(c);
    free(onnx);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* Sends a CompileRequest for bytes with the options the caller set in cr; returns the
 * answer (CompileReply or Error). */
static Ipuof__Header *
raw_compile(int fd, Ipuof__CompileRequest *cr, const void *bytes, size_t len, uint64_t id)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    int eof = 0;

    cr->model_bytes = len;
    cr->device_iterations = 1;
    cr->replicas = 1;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE;
    h.compile = cr;
    assert_int_equal(raw_send_payload(fd, &h, bytes, len), 0);
    do {
        r = raw_recv(fd, 20000, &eof);
        assert_non_null(r);
        if (r->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS) {
            ipuof_frame_header_free(r);
            r = NULL;
        }
    } while (r == NULL);
    return r;
}

/* An Error answer with code and a sentence containing needle; freed. */
static void
expect_error(Ipuof__Header *r, unsigned code, const char *needle)
{
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_ERROR);
    print_message("  refused: %s\n", r->error->message);
    assert_int_equal(r->error->code, code);
    assert_non_null(strstr(r->error->message, needle));
    ipuof_frame_header_free(r);
}

static void
test_daemon_checks(void **state)
{
    static Ipuof__Block blk[257];
    static Ipuof__Block *bp[257];
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__TraceRequest tr = IPUOF__TRACE_REQUEST__INIT;
    void *onnx = NULL;
    size_t len = 0;
    int fd, eof = 0;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    two_block_model(&onnx, &len);
    fd = raw_session(d.port, 2);
    assert_true(fd >= 0);
    for (int i = 0; i < 257; i++) {
        ipuof__block__init(&blk[i]);
        blk[i].prefix = (char *)"/b1/";
        blk[i].stage = -1;
        bp[i] = &blk[i];
    }
    cr.n_blocks = 257;
    cr.blocks = bp;
    expect_error(raw_compile(fd, &cr, onnx, len, 10), IPUOF_E_TOO_LARGE, "at most 256");
    ipuof__compile_request__init(&cr);
    blk[0].ipu = 2;
    cr.n_blocks = 1;
    cr.blocks = bp;
    expect_error(raw_compile(fd, &cr, onnx, len, 11), IPUOF_E_INVAL, "partition's 2");
    ipuof__compile_request__init(&cr);
    blk[0].ipu = 0;
    blk[0].stage = -2;
    cr.n_blocks = 1;
    cr.blocks = bp;
    expect_error(raw_compile(fd, &cr, onnx, len, 12), IPUOF_E_INVAL, "stage from -1");
    ipuof__compile_request__init(&cr);
    cr.strategy = (Ipuof__ExecutionStrategy)7;
    expect_error(raw_compile(fd, &cr, onnx, len, 13), IPUOF_E_INVAL, "strategy 7");
    ipuof__compile_request__init(&cr);
    cr.optimizer_location = (Ipuof__TensorLocation)5;
    expect_error(raw_compile(fd, &cr, onnx, len, 14), IPUOF_E_INVAL, "optimizer state");
    /* A trace of a model that does not exist. */
    tr.model_id = 999;
    h.request_id = 15;
    h.body_case = IPUOF__HEADER__BODY_TRACE;
    h.trace = &tr;
    assert_int_equal(raw_send(fd, &h), 0);
    r = raw_recv(fd, 5000, &eof);
    assert_non_null(r);
    expect_error(r, IPUOF_E_NOTFOUND, "no model 999");
    /* The daemon still serves the connection: a valid compile goes through. */
    ipuof__compile_request__init(&cr);
    r = raw_compile(fd, &cr, onnx, len, 16);
    assert_int_equal(r->body_case, IPUOF__HEADER__BODY_COMPILE_REPLY);
    ipuof_frame_header_free(r);
    close(fd);
    free(onnx);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* A training version of two_block_model: logits = Relu(x W1) W2, loss = cross-entropy of
 * logits and labels (node /loss/SoftmaxCrossEntropyLoss, as torch names it). */
static void
training_model(void **out, size_t *len)
{
    static float w1[K * K], w2[K * K];
    struct sim_ob *b = sim_ob_new(13);
    int64_t dx[2] = {B, K}, dw[2] = {K, K}, dl[1] = {B};

    for (int i = 0; i < K * K; i++) {
        w1[i] = (float)((i * 7) % 11) / 11.0f - 0.3f;
        w2[i] = (float)((i * 5) % 13) / 13.0f - 0.4f;
    }
    assert_non_null(b);
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_input(b, "labels", IPUOF_DTYPE_INT64, 1, dl);
    sim_ob_initializer(b, "W1", IPUOF_DTYPE_FLOAT, 2, dw, w1);
    sim_ob_initializer(b, "W2", IPUOF_DTYPE_FLOAT, 2, dw, w2);
    sim_ob_node(b, "MatMul", "/b1/MatMul", "x,W1", "h1");
    sim_ob_node(b, "Relu", "/b1/Relu", "h1", "a1");
    sim_ob_node(b, "MatMul", "/b2/MatMul", "a1,W2", "logits");
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "/loss/SoftmaxCrossEntropyLoss", "logits,labels",
                "loss");
    sim_ob_attr_str(b, "reduction", "mean");
    sim_ob_output_rank(b, "loss", IPUOF_DTYPE_FLOAT, 0);
    assert_int_equal(sim_ob_serialize(b, out, len), 0);
    sim_ob_free(b);
}

/* Pipeline stashes and off-chip optimizer state in the compile reply and in ipuctl's
 * status: a training model pipelined over two IPUs with its optimizer state off chip. */
static void
test_memory_in_status(void **state)
{
    static const struct ipuof_block blocks[2] = {{"/b1/", IPUOF_STAGE_AUTO, 0},
                                                 {"/b2/", IPUOF_STAGE_AUTO, 1}};
    struct ipuof_attach_opts ao = {.num_ipus = 2};
    struct ipuof_model_opts o = {.name = "stash"};
    struct ipuof_training_opts t = {.loss = "loss", .gradient_accumulation = 4};
    ipuof_client *c = ipuof_client_new();
    ipuof_status_report *rep = NULL;
    ipuof_model *m = NULL;
    uint64_t stash[2] = {0}, off[2] = {0}, opt[2] = {0};
    unsigned ids[2];
    size_t nids = 0;
    void *onnx = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    training_model(&onnx, &len);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, ids, 2, &nids), IPUOF_OK);
    assert_int_equal(nids, 2);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, blocks, 2), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_strategy(&o, IPUOF_STRATEGY_PIPELINED), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_location(&o, IPUOF_TENSORS_OPTIMIZER,
                                                   IPUOF_LOCATION_OFF_CHIP), IPUOF_OK);
    assert_int_equal(ipuof_optimizer_init(&t.optimizer, IPUOF_OPTIMIZER_ADAMW), IPUOF_OK);
    if (ipuof_model_compile_training(c, onnx, len, &o, &t, &m) != IPUOF_OK)
        fail_msg("compile: %s", ipuof_client_errmsg(c));
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(ipuof_model_memory_detail(m, i, NULL, &opt[i], &stash[i], &off[i],
                                                   NULL), IPUOF_OK);
        print_message("  IPU %zu: stash %llu, optimizer on chip %llu, off chip %llu\n", i,
                      (unsigned long long)stash[i], (unsigned long long)opt[i],
                      (unsigned long long)off[i]);
    }
    assert_true(stash[0] > 0);           /* stage 0 keeps activations of micro-batches in flight */
    assert_true(off[0] > 0 && off[1] > 0); /* AdamW's moments of both stages' weights */
    assert_int_equal(ipuof_status(c, &rep), IPUOF_OK);
    for (size_t i = 0; i < 2; i++) {
        struct ipuof_ipu_info in;
        assert_int_equal(ipuof_status_report_ipu(rep, ids[i], &in), IPUOF_OK);
        assert_int_equal(in.memory_stash_bytes, stash[i]);
        assert_int_equal(in.memory_offchip_bytes, off[i]);
    }
    ipuof_status_report_free(rep);
    ipuof_model_free(m);
    assert_int_equal(ipuof_status(c, &rep), IPUOF_OK);
    {
        struct ipuof_ipu_info in;
        assert_int_equal(ipuof_status_report_ipu(rep, ids[0], &in), IPUOF_OK);
        assert_int_equal(in.memory_stash_bytes, 0);
        assert_int_equal(in.memory_offchip_bytes, 0);
    }
    ipuof_status_report_free(rep);
    ipuof_client_free(c);
    free(onnx);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

static void
test_bad_cost_config(void **state)
{
    (void)state;
    /* A rate of 0 would make every run take for ever: the daemon refuses to start. */
    assert_int_not_equal(testd_start(&d, "[cost]\nhost_bytes_per_s = 0\n", NULL), 0);
    memset(&d, 0, sizeof d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_options_cost_trace, teardown),
        cmocka_unit_test_teardown(test_daemon_checks, teardown),
        cmocka_unit_test_teardown(test_memory_in_status, teardown),
        cmocka_unit_test_teardown(test_bad_cost_config, teardown),
    };

    return cmocka_run_group_tests_name("placement", tests, NULL, NULL);
}
