/*
 * obload.h — the model a test built with sim/onnx/onnx_build.h, loaded by the simulator, for the
 * cmocka unit tests of sim/.
 */
#ifndef IPUOF_OBLOAD_H
#define IPUOF_OBLOAD_H

#include <stdint.h>

struct sim_ob;
struct sim_model;
struct sim_exe;
struct sim_err;
struct sim_compile_opts;

/* A loaded model and its executable (NULL when compiling failed). */
struct test_ob_run {
    struct sim_model *m;
    struct sim_exe *e;
};

/* Serializes b, frees it and loads the bytes with sim_model_load; fails the running
 * cmocka test (with the loader's sentence) when either step fails. The caller frees the
 * model with sim_model_free. */
struct sim_model *test_ob_load(struct sim_ob *b);

/* Loads b (test_ob_load, which frees b) and compiles it with the default options: r.e is
 * the executable, or NULL with the compiler's error in *err. Free with test_ob_run_free. */
struct test_ob_run test_ob_compile(struct sim_ob *b, struct sim_err *err);

/* Compiles b (freed) and runs it once with no run inputs; fails the running cmocka test
 * with the compiler's or the run's sentence when either fails. */
struct test_ob_run test_ob_run_ok(struct sim_ob *b);

/* sim_compile of m with o (NULL: defaults), which must succeed: the executable, or the
 * running cmocka test fails with the compiler's sentence. */
struct sim_exe *test_compile_ok(const struct sim_model *m, const struct sim_compile_opts *o);

/* One sim_exe_run of e, which must succeed (else the test fails with the run's sentence). */
void test_run_ok(struct sim_exe *e);

/* The tests' stand-in values: the next of the xorshift64 generator at *state (advanced; the
 * state must not be 0) as (r >> 11) * 2^-53 in [0, 1), in float. */
float test_urand01(uint64_t *state);

/* Adds to b a float initializer name of dims d[0..rank) holding (2u - 1) * scale for the
 * next values u of test_urand01(state), in row-major order. */
void test_ob_init_rand(struct sim_ob *b, const char *name, int rank, const int64_t *d,
                       uint64_t *state, float scale);

/* Frees what test_ob_compile made (a NULL executable included). */
void test_ob_run_free(struct test_ob_run *r);

/* Compiles b (freed), which must fail with code and a message containing text; fails the
 * running cmocka test otherwise. Prints the message, so the log shows every refusal. */
void test_ob_expect_refused(struct sim_ob *b, int code, const char *text);

#endif
