/*
 * obload.c — see obload.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

struct sim_model *
test_ob_load(struct sim_ob *b)
{
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    return m;
}

float
test_urand01(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (float)((*state >> 11) * (1.0 / 9007199254740992.0));
}

void
test_ob_init_rand(struct sim_ob *b, const char *name, int rank, const int64_t *d,
                  uint64_t *state, float scale)
{
    int64_t n = 1;
    float *v;

    for (int i = 0; i < rank; i++)
        n *= d[i];
    v = malloc((size_t)n * sizeof(float));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (test_urand01(state) * 2.0f - 1.0f) * scale;
    assert_int_equal(sim_ob_initializer(b, name, SIM_DTYPE_FLOAT, rank, d, v), 0);
    free(v);
}

struct test_ob_run
test_ob_compile(struct sim_ob *b, struct sim_err *err)
{
    struct test_ob_run r = { 0 };
    struct sim_compile_opts o;

    r.m = test_ob_load(b);
    sim_compile_opts_init(&o);
    if (sim_compile(r.m, &o, &r.e, err) != 0)
        r.e = NULL;
    return r;
}

struct sim_exe *
test_compile_ok(const struct sim_model *m, const struct sim_compile_opts *o)
{
    struct sim_compile_opts def;
    struct sim_exe *e = NULL;
    struct sim_err err;

    if (o == NULL) {
        sim_compile_opts_init(&def);
        o = &def;
    }
    if (sim_compile(m, o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    return e;
}

void
test_run_ok(struct sim_exe *e)
{
    struct sim_err err;

    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
}

struct test_ob_run
test_ob_run_ok(struct sim_ob *b)
{
    struct sim_err err = { 0 };
    struct test_ob_run r = test_ob_compile(b, &err);

    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    if (sim_exe_run(r.e, &err) != 0)
        fail_msg("run: %s", err.msg);
    return r;
}

void
test_ob_run_free(struct test_ob_run *r)
{
    sim_exe_free(r->e);
    sim_model_free(r->m);
}

void
test_ob_expect_refused(struct sim_ob *b, int code, const char *text)
{
    struct sim_err err = { 0 };
    struct test_ob_run r = test_ob_compile(b, &err);

    if (r.e != NULL)
        fail_msg("compiled, expected an error containing '%s'", text);
    printf("  refused: %s\n", err.msg);
    assert_int_equal(err.code, code);
    if (strstr(err.msg, text) == NULL)
        fail_msg("the error '%s' does not say '%s'", err.msg, text);
    test_ob_run_free(&r);
}
