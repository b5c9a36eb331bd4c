/*
 * test_client_placement.c — placement over several IPUs and the simulated clock in
 * libipuof-client, against the fake daemon of fakesrv.h: the option setters and their
 * checks, the CompileRequest fields they fill (strategy, blocks, tensor locations,
 * profile), the per-IPU memory detail of a CompileReply, a RunReply's cost figures (and a
 * daemon that has none), fetching the trace, and profiling switched on by
 * POPLAR_ENGINE_OPTIONS with the trace written after the run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakesrv.h"
#include "frame.h"
#include "ipuof/client.h"
#include "testd.h"

#define TRACE_JSON "{\"traceEvents\":[{\"name\":\"F0.0\",\"ph\":\"X\",\"ts\":0,\"dur\":5}]}"

static const struct ipuof_block blocks[2] = {{"/b1/", IPUOF_STAGE_AUTO, 0}, {"/b2/", 3, 1}};

/* What the script saw, checked by the tests: f.ctx points to one. */
struct seen {
    int compile_fields_ok;   /* the CompileRequest carried the options the test set */
    int profile;             /* CompileRequest.profile of the last compile */
    int traces;              /* trace requests answered */
};

/* ---- the fake daemon ------------------------------------------------------------------ */

/* Answers compile request id with model 7: input x [2] float, output y [2] float, memory
 * on two IPUs with stash and off-chip bytes. */
static void
fs_compile_reply(struct fake *f, int fd, uint64_t id)
{
    static int64_t dims[1] = {2};
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileReply cr = IPUOF__COMPILE_REPLY__INIT;
    Ipuof__TensorInfo ti[2], *tp[2];
    Ipuof__MemoryReport mr[2], *mp[2];

    for (int i = 0; i < 2; i++) {
        ipuof__tensor_info__init(&ti[i]);
        ti[i].name = (char *)(i == 0 ? "x" : "y");
        ti[i].dtype = IPUOF__DTYPE__DTYPE_FLOAT;
        ti[i].n_dims = 1;
        ti[i].dims = dims;
        ti[i].bytes = 8;
        tp[i] = &ti[i];
        ipuof__memory_report__init(&mr[i]);
        mr[i].ipu = (uint32_t)i;
        mr[i].total_bytes = 5000;
        mr[i].gradients_bytes = 100 + (uint64_t)i;
        mr[i].optimizer_bytes = 200 + (uint64_t)i;
        mr[i].stash_bytes = 300 + (uint64_t)i;
        mr[i].offchip_bytes = 400 + (uint64_t)i;
        mr[i].peak_not_always_live_bytes = 500 + (uint64_t)i;
        mp[i] = &mr[i];
    }
    cr.model_id = 7;
    cr.n_inputs = 1;
    cr.inputs = tp;
    cr.n_outputs = 1;
    cr.outputs = tp + 1;
    cr.n_memory = 2;
    cr.memory = mp;
    cr.device_iterations = 1;
    cr.replicas = 1;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE_REPLY;
    h.compile_reply = &cr;
    fs_send(f, fd, &h, NULL, 0);
}

/* Reads a compile (the model in one frame) and answers it; records its placement fields. */
static void
fs_compile(struct fake *f, int fd)
{
    struct seen *s = f->ctx;
    Ipuof__Header *h = fs_expect(f, fd, IPUOF__HEADER__BODY_COMPILE);
    const Ipuof__CompileRequest *cr;

    if (h == NULL)
        return;
    cr = h->compile;
    s->profile = cr->profile;
    s->compile_fields_ok =
        cr->strategy == IPUOF__EXECUTION_STRATEGY__STRATEGY_PIPELINED && cr->n_blocks == 2 &&
        strcmp(cr->blocks[0]->prefix, "/b1/") == 0 && cr->blocks[0]->stage == -1 &&
        cr->blocks[0]->ipu == 0 && strcmp(cr->blocks[1]->prefix, "/b2/") == 0 &&
        cr->blocks[1]->stage == 3 && cr->blocks[1]->ipu == 1 &&
        cr->optimizer_location == IPUOF__TENSOR_LOCATION__LOCATION_OFF_CHIP &&
        cr->weights_location == IPUOF__TENSOR_LOCATION__LOCATION_ON_CHIP;
    fs_compile_reply(f, fd, h->request_id);
    ipuof_frame_header_free(h);
}

/* Reads a run and answers it with y = x and cost figures (cost_code 0) or a cost that says
 * why there are none (cost_code != 0), or no cost at all (cost_code < 0). */
static void
fs_run(struct fake *f, int fd, int cost_code)
{
    static int64_t dims[1] = {2};
    static double busy[2] = {0.75, 0.5};
    Ipuof__Header *h = fs_expect(f, fd, IPUOF__HEADER__BODY_RUN);
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__RunReply rr = IPUOF__RUN_REPLY__INIT;
    Ipuof__RunCost cost = IPUOF__RUN_COST__INIT;
    Ipuof__TensorInfo ti = IPUOF__TENSOR_INFO__INIT, *tp = &ti;
    uint8_t out[8] = {0};

    if (h == NULL)
        return;
    if (f->payload_len == sizeof out)
        memcpy(out, f->payload, sizeof out);
    ti.name = (char *)"y";
    ti.dtype = IPUOF__DTYPE__DTYPE_FLOAT;
    ti.n_dims = 1;
    ti.dims = dims;
    ti.bytes = sizeof out;
    rr.n_outputs = 1;
    rr.outputs = &tp;
    if (cost_code == 0) {
        cost.device_seconds = 0.25;
        cost.samples_per_s = 16.0;
        cost.n_busy = 2;
        cost.busy = busy;
        cost.bottleneck_stage = 1;
        rr.cost = &cost;
    } else if (cost_code > 0) {
        cost.code = (uint32_t)cost_code;
        cost.reason = (char *)"no cost model here";
        rr.cost = &cost;
    }
    r.request_id = h->request_id;
    r.body_case = IPUOF__HEADER__BODY_RUN_REPLY;
    r.run_reply = &rr;
    fs_send(f, fd, &r, out, sizeof out);
    ipuof_frame_header_free(h);
}

/* Reads a trace request for model 7 and answers it with TRACE_JSON, or with an Error. */
static void
fs_trace(struct fake *f, int fd, int ok)
{
    struct seen *s = f->ctx;
    Ipuof__Header *h = fs_expect(f, fd, IPUOF__HEADER__BODY_TRACE);
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__TraceReply tr = IPUOF__TRACE_REPLY__INIT;

    if (h == NULL)
        return;
    if (h->trace->model_id != 7)
        fake_fail(f, "trace request for another model");
    if (ok) {
        tr.bytes = strlen(TRACE_JSON);
        r.request_id = h->request_id;
        r.body_case = IPUOF__HEADER__BODY_TRACE_REPLY;
        r.trace_reply = &tr;
        fs_send(f, fd, &r, TRACE_JSON, (uint32_t)tr.bytes);
        s->traces++;
    } else {
        fs_send_error(f, fd, h->request_id, IPUOF_E_INVAL, "executor",
                      "no trace of model 'm': profiling was off");
    }
    ipuof_frame_header_free(h);
}

static void
script_main(struct fake *f, int fd)
{
    if (fs_hello(f, fd) < 0 || fs_attach(f, fd) < 0)
        return;
    fs_compile(f, fd);
    fs_run(f, fd, 0);
    fs_trace(f, fd, 1);
    fs_run(f, fd, IPUOF_E_UNSUPPORTED);
    fs_run(f, fd, -1);
    fs_trace(f, fd, 0);
    fs_free_model(f, fd, 7);
    f->steps++;
    fs_wait_eof(f, fd);
}

static void
script_env(struct fake *f, int fd)
{
    if (fs_hello(f, fd) < 0 || fs_attach(f, fd) < 0)
        return;
    fs_compile(f, fd);
    fs_run(f, fd, 0);
    fs_trace(f, fd, 1);   /* the library fetches it after the run */
    fs_run(f, fd, 0);
    fs_trace(f, fd, 0);   /* and reports a failed fetch */
    fs_free_model(f, fd, 7);
    f->steps++;
    fs_wait_eof(f, fd);
}

/* ---- tests ---------------------------------------------------------------------------- */

static void
test_setters(void **state)
{
    struct ipuof_model_opts o = {0};
    struct ipuof_block bad[1] = {{"", 0, 0}};
    struct ipuof_block many[IPUOF_MAX_BLOCKS + 1];

    (void)state;
    assert_int_equal(ipuof_model_opts_set_strategy(&o, IPUOF_STRATEGY_SHARDED), IPUOF_OK);
    assert_int_equal(o.strategy, IPUOF_STRATEGY_SHARDED);
    assert_int_equal(ipuof_model_opts_set_strategy(&o, 4), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_opts_set_strategy(&o, -1), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_opts_set_strategy(NULL, 0), IPUOF_E_INVAL);
    assert_int_equal(o.strategy, IPUOF_STRATEGY_SHARDED);

    assert_int_equal(ipuof_model_opts_set_blocks(&o, blocks, 2), IPUOF_OK);
    assert_ptr_equal(o.blocks, blocks);
    assert_int_equal(o.n_blocks, 2);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, bad, 1), IPUOF_E_INVAL);
    bad[0].prefix = NULL;
    assert_int_equal(ipuof_model_opts_set_blocks(&o, bad, 1), IPUOF_E_INVAL);
    bad[0].prefix = "/x/";
    bad[0].stage = -2;
    assert_int_equal(ipuof_model_opts_set_blocks(&o, bad, 1), IPUOF_E_INVAL);
    for (size_t i = 0; i < IPUOF_MAX_BLOCKS + 1; i++)
        many[i] = blocks[0];
    assert_int_equal(ipuof_model_opts_set_blocks(&o, many, IPUOF_MAX_BLOCKS + 1), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, NULL, 1), IPUOF_E_INVAL);
    assert_int_equal(o.n_blocks, 2);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, many, IPUOF_MAX_BLOCKS), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, NULL, 0), IPUOF_OK);
    assert_null(o.blocks);

    assert_int_equal(ipuof_model_opts_set_location(&o, IPUOF_TENSORS_OPTIMIZER,
                                                   IPUOF_LOCATION_OFF_CHIP), IPUOF_OK);
    assert_int_equal(o.locations[IPUOF_TENSORS_OPTIMIZER], IPUOF_LOCATION_OFF_CHIP);
    assert_int_equal(ipuof_model_opts_set_location(&o, IPUOF_TENSOR_KINDS, 0), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_opts_set_location(&o, 0, 2), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_opts_set_profile(&o, 5), IPUOF_OK);
    assert_int_equal(o.profile, 1);
    assert_int_equal(ipuof_model_opts_set_profile(NULL, 1), IPUOF_E_INVAL);

    /* Without a model or a run: clean errors. */
    assert_int_equal(ipuof_model_run_cost(NULL, NULL, NULL, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_run_ipu_count(NULL), 0);
    assert_int_equal(ipuof_model_trace(NULL, NULL, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_write_trace(NULL, "x"), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_memory_detail(NULL, 0, NULL, NULL, NULL, NULL, NULL),
                     IPUOF_E_INVAL);
}

/* Options set by hand past the setters are refused by the compile with a sentence, before
 * anything is sent. */
static void
test_compile_checks(void **state)
{
    static const uint8_t b[4] = {1, 2, 3, 4};
    ipuof_client *c = ipuof_client_new();
    struct ipuof_model_opts o = {0};
    ipuof_model *m = NULL;

    (void)state;
    o.strategy = 9;
    assert_error(c, ipuof_model_compile(c, b, sizeof b, &o, &m), IPUOF_E_INVAL, "strategy 9");
    o.strategy = 0;
    o.locations[IPUOF_TENSORS_WEIGHTS] = 3;
    assert_error(c, ipuof_model_compile(c, b, sizeof b, &o, &m), IPUOF_E_INVAL,
                 "tensor location 3");
    o.locations[IPUOF_TENSORS_WEIGHTS] = 0;
    o.n_blocks = IPUOF_MAX_BLOCKS + 1;
    o.blocks = blocks;
    assert_error(c, ipuof_model_compile(c, b, sizeof b, &o, &m), IPUOF_E_INVAL, "at most 256");
    o.n_blocks = 1;
    o.blocks = (const struct ipuof_block[1]){{"/a/", -3, 0}};
    assert_error(c, ipuof_model_compile(c, b, sizeof b, &o, &m), IPUOF_E_INVAL, "block 0");
    assert_null(m);
    ipuof_client_free(c);
}

/* Compiles model "m" with the test's placement options on a handle attached to f. */
static ipuof_model *
compile_placed(ipuof_client *c, int profile)
{
    static const uint8_t b[16] = {1};
    struct ipuof_model_opts o = {.name = "m"};
    ipuof_model *m = NULL;

    assert_int_equal(ipuof_model_opts_set_strategy(&o, IPUOF_STRATEGY_PIPELINED), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_blocks(&o, blocks, 2), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_location(&o, IPUOF_TENSORS_OPTIMIZER,
                                                   IPUOF_LOCATION_OFF_CHIP), IPUOF_OK);
    assert_int_equal(ipuof_model_opts_set_profile(&o, profile), IPUOF_OK);
    assert_int_equal(ipuof_model_compile(c, b, sizeof b, &o, &m), IPUOF_OK);
    return m;
}

static void
test_cost_memory_trace(void **state)
{
    struct fake f;
    struct seen s = {0};
    float x[2] = {1.5f, -2.0f};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 1, {2}, x, sizeof x};
    uint64_t g, o, st, off, peak;
    double secs = 0, sps = 0, frac = 0;
    int stage = -5;
    char *json = NULL;
    size_t len = 0;
    ipuof_client *c;
    ipuof_model *m;

    (void)state;
    unsetenv("POPLAR_ENGINE_OPTIONS");
    fake_start(&f, script_main, 1 << 20, 0);
    f.ctx = &s;
    c = new_attached(&f, 5000);
    m = compile_placed(c, 1);
    assert_non_null(m);
    assert_int_equal(s.profile, 1);
    assert_int_equal(ipuof_model_memory_detail(m, 1, &g, &o, &st, &off, &peak), IPUOF_OK);
    assert_true(g == 101 && o == 201 && st == 301 && off == 401 && peak == 501);
    assert_int_equal(ipuof_model_memory_detail(m, 2, NULL, NULL, NULL, NULL, NULL),
                     IPUOF_E_INVAL);
    assert_error(c, ipuof_model_run_cost(m, &secs, &sps, &stage), IPUOF_E_STATE, "no completed");

    /* A run with cost figures, then its trace. */
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    assert_int_equal(ipuof_model_run_cost(m, &secs, &sps, &stage), IPUOF_OK);
    assert_true(secs == 0.25 && sps == 16.0 && stage == 1);
    assert_int_equal(ipuof_model_run_ipu_count(m), 2);
    assert_int_equal(ipuof_model_run_busy(m, 0, &frac), IPUOF_OK);
    assert_true(frac == 0.75);
    assert_int_equal(ipuof_model_run_busy(m, 2, &frac), IPUOF_E_INVAL);
    assert_int_equal(ipuof_model_trace(m, &json, &len), IPUOF_OK);
    assert_int_equal(len, strlen(TRACE_JSON));
    assert_string_equal(json, TRACE_JSON);
    free(json);

    /* A daemon whose simulator has no cost model: its reason comes through. */
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    assert_error(c, ipuof_model_run_cost(m, &secs, NULL, NULL), IPUOF_E_UNSUPPORTED,
                 "no cost model here");
    assert_int_equal(ipuof_model_run_ipu_count(m), 0);
    /* An older daemon that sends no cost at all. */
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    assert_error(c, ipuof_model_run_cost(m, &secs, NULL, NULL), IPUOF_E_UNSUPPORTED,
                 "no cost figures");
    /* The daemon's refusal of a trace. */
    assert_error(c, ipuof_model_trace(m, &json, &len), IPUOF_E_INVAL, "profiling was off");
    assert_null(json);
    assert_error(c, ipuof_model_trace(m, NULL, &len), IPUOF_E_INVAL, "places");
    ipuof_model_free(m);
    ipuof_client_free(c);
    fake_stop(&f);
    assert_int_equal(f.steps, 1);
    assert_int_equal(s.compile_fields_ok, 1);
    assert_int_equal(s.traces, 1);
}

/* Writes text to a new file at path. 0 or -1. */
static int
write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wx");
    int rc;

    if (f == NULL)
        return -1;
    rc = fputs(text, f) < 0;
    return fclose(f) != 0 || rc ? -1 : 0;
}

/* POPLAR_ENGINE_OPTIONS switches profiling on for a program that does not ask for it, and
 * every run's trace lands in autoReport.directory. A symlink planted at the trace's name
 * (DIR/r/m.trace.json -> DIR/victim) is replaced by the trace, never written through: on
 * main the victim was overwritten (issue 17, defect 6). */
static void
test_engine_options_env(void **state)
{
    static const uint8_t b[16] = {1};
    char dir[] = "/tmp/ipuof-test-trace-XXXXXX";
    char env[256], path[300], victim[300];
    struct stat st;
    struct fake f;
    struct seen s = {0};
    float x[2] = {1.0f, 2.0f};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 1, {2}, x, sizeof x};
    struct ipuof_tensor out;
    ipuof_client *c;
    ipuof_model *m = NULL;
    void *data;
    size_t len = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/r", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    assert_int_equal(write_text(victim, "precious"), 0);
    snprintf(path, sizeof path, "%s/r/m.trace.json", dir);
    assert_int_equal(symlink(victim, path), 0);
    snprintf(env, sizeof env, "{\"autoReport.all\":\"true\", \"opt.level\": 2, "
             "\"debug.keep\":false, \"autoReport.directory\":\"%s/r\"}", dir);
    fake_start(&f, script_env, 1 << 20, 0);
    f.ctx = &s;
    c = new_attached(&f, 5000);
    /* Not JSON: refused before anything is sent, with what would be right. */
    setenv("POPLAR_ENGINE_OPTIONS", "autoReport.all=true", 1);
    assert_error(c, ipuof_model_compile(c, b, sizeof b, NULL, &m), IPUOF_E_INVAL,
                 "{\"autoReport.all\":\"true\"");
    setenv("POPLAR_ENGINE_OPTIONS", env, 1);
    m = compile_placed(c, 0);
    assert_non_null(m);
    assert_int_equal(s.profile, 1);
    assert_int_equal(ipuof_model_run(m, &in, 1), IPUOF_OK);
    data = read_file(path, &len);
    assert_non_null(data);
    assert_int_equal(len, strlen(TRACE_JSON));
    assert_memory_equal(data, TRACE_JSON, len);
    free(data);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode)); /* the symlink was replaced */
    data = read_file(victim, &len);
    assert_non_null(data);
    assert_int_equal(len, 8);
    assert_memory_equal(data, "precious", 8); /* and its target left alone */
    free(data);
    /* A trace that cannot be fetched fails the run's call, saying the run itself completed
     * and its outputs are there. */
    assert_error(c, ipuof_model_run(m, &in, 1), IPUOF_E_INVAL, "completed, but its trace");
    assert_int_equal(ipuof_model_output(m, 0, &out), IPUOF_OK);
    unsetenv("POPLAR_ENGINE_OPTIONS");
    ipuof_model_free(m);
    ipuof_client_free(c);
    fake_stop(&f);
    assert_int_equal(f.steps, 1);
    assert_int_equal(s.traces, 1);
    unlink(path);
    unlink(victim);
    snprintf(path, sizeof path, "%s/r", dir);
    rmdir(path);
    rmdir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setters),
        cmocka_unit_test(test_compile_checks),
        cmocka_unit_test(test_cost_memory_trace),
        cmocka_unit_test(test_engine_options_env),
    };

    return cmocka_run_group_tests_name("client_placement", tests, NULL, NULL);
}
