/*
 * test_daemon_compile_opts.c — a compile's options as the daemon keys and compares them
 * (daemon/compile/compile_opts.c): the executable cache's key is exact, however long the names in
 * it, and a job whose processes compile differently is told which field differs, with
 * both values readable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_int.h"
#include "jobs.h"

static const uint8_t model_bytes[] = "not really ONNX, the same in every process";

/* A compile job with the defaults, the model bytes above and n placement blocks whose
 * prefixes are copies of prefix (caller frees with job_free). */
static struct compile_task *
job_new(const char *prefix, size_t n)
{
    struct compile_task *ct = calloc(1, sizeof *ct);

    assert_non_null(ct);
    sim_compile_opts_init(&ct->opts);
    ct->opts.device_iterations = 1;
    ct->opts.replicas = 1;
    ct->bytes = (uint8_t *)model_bytes;
    ct->len = sizeof model_bytes;
    ct->group = 1;
    for (size_t i = 0; i < n; i++) {
        ct->block_prefix[i] = strdup(prefix);
        ct->blocks[i].prefix = ct->block_prefix[i];
        ct->blocks[i].stage = -1;
        ct->blocks[i].ipu = (int)i;
    }
    ct->opts.n_blocks = n;
    ct->opts.blocks = n > 0 ? ct->blocks : NULL;
    ct->opts.output_modes = ct->modes;
    return ct;
}

static void
job_free(struct compile_task *ct)
{
    for (size_t i = 0; i < ct->opts.n_blocks; i++)
        free(ct->block_prefix[i]);
    free(ct->key);
    free(ct);
}

/* A name of len bytes: 'a's, then tail. */
static char *
long_name(size_t len, const char *tail)
{
    char *s = malloc(len + 1);

    assert_non_null(s);
    memset(s, 'a', len);
    memcpy(s + len - strlen(tail), tail, strlen(tail));
    s[len] = '\0';
    return s;
}

/* Block prefixes and output names that agree in their first 256 characters and differ
 * after: different keys (on main both were cut at 256 characters and one compile was
 * served the other's executable as "(cached)"). */
static void
test_key_is_exact_past_256_characters(void **state)
{
    char *p1 = long_name(300, "/layer1/"), *p2 = long_name(300, "/layer2/");
    struct compile_task *a = job_new(p1, 1), *b = job_new(p2, 1), *c = job_new(p1, 1);

    (void)state;
    a->key = compile_options_key(a);
    b->key = compile_options_key(b);
    c->key = compile_options_key(c);
    assert_non_null(a->key);
    assert_non_null(b->key);
    assert_string_not_equal(a->key, b->key);
    assert_string_equal(a->key, c->key);
    assert_non_null(strstr(a->key, p1)); /* the whole prefix, not its first 256 bytes */
    /* output modes: the same mode on two different long outputs */
    free(a->key);
    free(b->key);
    a->modes[0].name = p1;
    a->modes[0].mode.kind = SIM_OUTPUT_FINAL;
    a->opts.n_output_modes = 1;
    b->modes[0].name = p2;
    b->modes[0].mode.kind = SIM_OUTPUT_FINAL;
    b->opts.n_output_modes = 1;
    b->opts.n_blocks = 1;
    free(b->block_prefix[0]);
    b->block_prefix[0] = strdup(p1);
    b->blocks[0].prefix = b->block_prefix[0];
    a->key = compile_options_key(a);
    b->key = compile_options_key(b);
    assert_string_not_equal(a->key, b->key);
    /* a name cannot run into the next field: "x" + " o1:y" vs "x o1:y" */
    job_free(a);
    job_free(b);
    job_free(c);
    a = job_new("x o1:y=0/0", 1);
    b = job_new("x", 1);
    b->modes[0].name = "y";
    b->opts.n_output_modes = 1;
    a->key = compile_options_key(a);
    b->key = compile_options_key(b);
    assert_string_not_equal(a->key, b->key);
    job_free(a);
    job_free(b);
    free(p1);
    free(p2);
}

/* Checks that the processes' difference is named as expected. */
static void
expect_diff(struct compile_task *a, struct compile_task *b, const char *expect)
{
    char msg[768];

    free(a->key);
    free(b->key);
    a->key = compile_options_key(a);
    b->key = compile_options_key(b);
    assert_int_equal(compile_task_diff(a, 0, b, 1, msg, sizeof msg), 1);
    print_message("%s\n", msg);
    if (strstr(msg, expect) == NULL)
        fail_msg("expected '%s' in: %s", expect, msg);
    assert_null(strstr(msg, "0x1.")); /* no %a figures from the key */
}

/* A job's processes differing in strategy, profile, a block, an output mode, the
 * replication factor, an optimizer group, a frozen weight or the seed are told which (on main: "output modes or constant inputs is D1 R1 ... K0x1.c6bf52634p+45"
 * for the first ones, "model bytes" for seeds with different initial weights). */
static void
test_job_diff_names_the_field(void **state)
{
    struct compile_task *a = job_new("/layer1/", 2), *b = job_new("/layer1/", 2);
    static const uint8_t other[] = "the same model with other initial weights";
    char msg[768];

    (void)state;
    a->key = compile_options_key(a);
    b->key = compile_options_key(b);
    assert_int_equal(compile_task_diff(a, 0, b, 1, msg, sizeof msg), 0);

    a->opts.strategy = SIM_STRATEGY_PIPELINED;
    b->opts.strategy = SIM_STRATEGY_SHARDED;
    expect_diff(a, b, "execution strategy is pipelined in process 0 and sharded in process 1");
    b->opts.strategy = SIM_STRATEGY_PIPELINED;

    b->opts.profile = 1;
    expect_diff(a, b, "profiling (POPLAR_ENGINE_OPTIONS autoReport) is off in process 0 and "
                      "on in process 1");
    b->opts.profile = 0;

    b->blocks[1].ipu = 3;
    expect_diff(a, b, "a placement block is block 1 ('/layer1/', stage -1, IPU 1) in process "
                      "0 and block 1 ('/layer1/', stage -1, IPU 3) in process 1");
    b->blocks[1].ipu = 1;

    a->modes[0].name = "out";
    a->modes[0].mode.kind = SIM_OUTPUT_ALL;
    a->opts.n_output_modes = 1;
    b->modes[0].name = "out";
    b->modes[0].mode.kind = SIM_OUTPUT_EVERYN;
    b->modes[0].mode.n = 4;
    b->opts.n_output_modes = 1;
    expect_diff(a, b, "an output's mode is 'out' All in process 0 and 'out' EveryN(4) in "
                      "process 1");
    b->modes[0].mode = a->modes[0].mode;

    /* The request's replication factor (a process's replicas) is what is compared. */
    a->replicas_per_process = 1;
    b->replicas_per_process = 2;
    expect_diff(a, b, "replicationFactor is 1 in process 0 and 2 in process 1");
    b->replicas_per_process = 1;

    a->opts.optimizer.n_groups = b->opts.optimizer.n_groups = 1;
    a->opts.optimizer.groups[0].lr = 0.5f;
    b->opts.optimizer.groups[0].lr = 0.25f;
    expect_diff(a, b, "optimizer group lr is 0.5 in process 0 and 0.25 in process 1");
    b->opts.optimizer.groups[0].lr = 0.5f;
    {
        static const char *const wa[1] = {"fc.weight"}, *const wb[1] = {"fc.bias"};
        a->opts.optimizer.groups[0].weights = wa;
        b->opts.optimizer.groups[0].weights = wb;
        a->opts.optimizer.groups[0].n_weights = b->opts.optimizer.groups[0].n_weights = 1;
        expect_diff(a, b, "weight of an optimizer group is 'fc.weight' in process 0 and "
                          "'fc.bias' in process 1");
    }
    a->opts.optimizer.n_groups = b->opts.optimizer.n_groups = 0;

    a->opts.n_frozen_weights = b->opts.n_frozen_weights = 1;
    a->frozen_w[0] = (char *)"bn.mean";
    b->frozen_w[0] = (char *)"bn.var";
    expect_diff(a, b, "frozen weight is 'bn.mean' in process 0 and 'bn.var' in process 1");
    a->opts.n_frozen_weights = b->opts.n_frozen_weights = 0;
    a->frozen_w[0] = b->frozen_w[0] = NULL;

    a->opts.seed = 1;
    b->opts.seed = 2;
    b->bytes = (uint8_t *)other;
    b->len = sizeof other;
    expect_diff(a, b, "random seeds differ: process 0 has 1, process 1 has 2");
    b->opts.seed = 1;
    expect_diff(a, b, "the model (its ONNX bytes) is 43 bytes");
    job_free(a);
    job_free(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_is_exact_past_256_characters),
        cmocka_unit_test(test_job_diff_names_the_field),
    };
    return cmocka_run_group_tests_name("daemon_compile_opts", tests, NULL, NULL);
}
