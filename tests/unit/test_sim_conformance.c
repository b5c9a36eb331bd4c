/*
 * test_sim_conformance.c — runs the ONNX backend node tests the simulator claims
 * (tests/conformance/claimed.txt) straight through sim/: load model.onnx, compile with
 * device_iterations = 1 and replicas = 1, feed test_data_set_N/input_K.pb, run, and compare
 * every output_K.pb with rtol 1e-4 and atol 1e-5 as the ONNX backend test does (integers
 * and bools exactly).
 *
 * Graph inputs that decide shapes (sim_model_input_needs_constant) are frozen to the test
 * data's values at compile time, as a static-shape compiler requires.
 * Prints "N passed, M failed, K skipped" (K: the lines of tests/conformance/skipped.txt)
 * and fails on any failure. Environment: IPUOF_ONNX_NODE_DIR overrides the test data
 * directory, IPUOF_CONFORMANCE_DIR the directory holding claimed.txt / skipped.txt,
 * IPUOF_CONFORMANCE_ONLY runs one named test.
 * test_loss_node_tests runs every (non-expanded) SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss node test of the installed data the same way; they are listed
 * by directory name rather than in claimed.txt.
 * Does not go through the daemon: the daemon-side runner tool does that.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "tensor_pb.h"

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"
#define MAX_IO 64

static char conf_dir[PATH_MAX] = "tests/conformance";

static int
read_all(const char *path, void **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    long n;

    *buf = NULL;
    if (f == NULL)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    *buf = malloc((size_t)n + 1);
    if (*buf == NULL || fread(*buf, 1, (size_t)n, f) != (size_t)n) {
        free(*buf);
        *buf = NULL;
        fclose(f);
        return -1;
    }
    *len = (size_t)n;
    fclose(f);
    return 0;
}

/* Compares got (an output buffer) with the expected tensor; writes a reason on mismatch. */
static int
compare(const struct sim_io_info *info, const void *got, const struct sim_host_tensor *want,
        char *why, size_t n, double *maxdiff)
{
    if (info->dtype != want->dtype) {
        snprintf(why, n, "output '%s' is %s, expected %s", info->name,
                 sim_dtype_name(info->dtype), sim_dtype_name(want->dtype));
        return -1;
    }
    if (info->run_rank != want->rank && !(want->rank == 0 && info->run_rank == 1 &&
                                           info->run_dims[0] == 1)) {
        snprintf(why, n, "output '%s' has rank %d, expected %d", info->name, info->run_rank,
                 want->rank);
        return -1;
    }
    for (int i = 0; i < want->rank; i++)
        if (info->run_dims[i] != want->dims[i]) {
            snprintf(why, n, "output '%s' dim %d is %lld, expected %lld", info->name, i,
                     (long long)info->run_dims[i], (long long)want->dims[i]);
            return -1;
        }
    if (info->run_bytes != want->bytes) {
        snprintf(why, n, "output '%s' has %zu bytes, expected %zu", info->name,
                 info->run_bytes, want->bytes);
        return -1;
    }
    if (want->dtype == SIM_DTYPE_FLOAT) {
        const float *g = got, *w = want->data;
        for (int64_t i = 0; i < want->numel; i++) {
            double d = fabs((double)g[i] - (double)w[i]);
            if (isnan(g[i]) && isnan(w[i]))
                continue;
            if (g[i] == w[i])
                continue;
            if (!(d <= 1e-5 + 1e-4 * fabs((double)w[i]))) {
                snprintf(why, n, "output '%s' element %lld is %.9g, expected %.9g",
                         info->name, (long long)i, g[i], w[i]);
                return -1;
            }
            if (d > *maxdiff)
                *maxdiff = d;
        }
        return 0;
    }
    if (memcmp(got, want->data, want->bytes) != 0) {
        snprintf(why, n, "output '%s' differs (exact comparison)", info->name);
        return -1;
    }
    return 0;
}

/* Runs one test data set; returns 0 on pass, writes why on failure. */
static int
run_set(const struct sim_model *m, const char *setdir, char *why, size_t n, double *maxdiff)
{
    struct sim_host_tensor in[MAX_IO], out[MAX_IO];
    struct sim_frozen_input frozen[MAX_IO];
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err = { 0 };
    size_t n_in = 0, n_out = 0, n_frozen = 0;
    char path[PATH_MAX + 64];
    int rc = -1;

    memset(in, 0, sizeof(in));
    memset(out, 0, sizeof(out));
    for (; n_in < MAX_IO; n_in++) {
        if (snprintf(path, sizeof(path), "%s/input_%zu.pb", setdir, n_in) >= (int)sizeof(path) ||
            access(path, R_OK) != 0)
            break;
        if (sim_tensor_pb_read_file(path, &in[n_in], &err) != 0) {
            snprintf(why, n, "%s", err.msg);
            goto out;
        }
    }
    for (; n_out < MAX_IO; n_out++) {
        if (snprintf(path, sizeof(path), "%s/output_%zu.pb", setdir, n_out) >=
                (int)sizeof(path) || access(path, R_OK) != 0)
            break;
        if (sim_tensor_pb_read_file(path, &out[n_out], &err) != 0) {
            snprintf(why, n, "%s", err.msg);
            goto out;
        }
    }
    if (n_in != sim_model_input_count(m) || n_out != sim_model_output_count(m)) {
        snprintf(why, n, "test data has %zu inputs / %zu outputs, the model %zu / %zu", n_in,
                 n_out, sim_model_input_count(m), sim_model_output_count(m));
        goto out;
    }
    for (size_t i = 0; i < n_in; i++) {
        if (!sim_model_input_needs_constant(m, i))
            continue;
        frozen[n_frozen].name = sim_model_input_name(m, i);
        frozen[n_frozen].dtype = in[i].dtype;
        frozen[n_frozen].rank = in[i].rank;
        frozen[n_frozen].dims = in[i].dims;
        frozen[n_frozen].data = in[i].data;
        n_frozen++;
    }
    sim_compile_opts_init(&o);
    o.frozen = frozen;
    o.n_frozen = n_frozen;
    if (sim_compile(m, &o, &e, &err) != 0) {
        snprintf(why, n, "compile: %s", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n_in; i++) {
        long k;
        if (sim_model_input_needs_constant(m, i))
            continue;
        k = sim_exe_input_index(e, sim_model_input_name(m, i));
        if (k < 0 || sim_exe_check_input(e, (size_t)k, in[i].dtype, in[i].rank, in[i].dims,
                                         &err) != 0) {
            snprintf(why, n, "input %zu: %s", i, k < 0 ? "not an input" : err.msg);
            goto out;
        }
        if (in[i].bytes > 0)
            memcpy(sim_exe_input_buffer(e, (size_t)k), in[i].data, in[i].bytes);
    }
    if (sim_exe_run(e, &err) != 0) {
        snprintf(why, n, "run: %s", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n_out; i++) {
        struct sim_io_info info;
        sim_exe_output_info(e, i, &info);
        if (compare(&info, sim_exe_output_buffer(e, i), &out[i], why, n, maxdiff) != 0)
            goto out;
    }
    rc = 0;
out:
    sim_exe_free(e);
    for (size_t i = 0; i < n_in; i++)
        sim_host_tensor_fini(&in[i]);
    for (size_t i = 0; i < n_out; i++)
        sim_host_tensor_fini(&out[i]);
    return rc;
}

/* Runs every data set of one test; 0 on pass. */
static int
run_one_test(const char *node_dir, const char *name, char *why, size_t n, double *maxdiff)
{
    char path[PATH_MAX + 64];
    struct sim_model *m = NULL;
    struct sim_err err = { 0 };
    void *buf;
    size_t len;
    int rc = 0, sets = 0;

    if (snprintf(path, sizeof(path), "%s/%s/model.onnx", node_dir, name) >= (int)sizeof(path)
        || read_all(path, &buf, &len) != 0) {
        snprintf(why, n, "cannot read the model of %s", name);
        return -1;
    }
    rc = sim_model_load(buf, len, &m, &err);
    free(buf);
    if (rc != 0) {
        snprintf(why, n, "load: %s", err.msg);
        return -1;
    }
    for (int s = 0; rc == 0; s++) {
        snprintf(path, sizeof(path), "%s/%s/test_data_set_%d", node_dir, name, s);
        if (access(path, R_OK) != 0)
            break;
        rc = run_set(m, path, why, n, maxdiff);
        sets++;
    }
    if (rc == 0 && sets == 0) {
        snprintf(why, n, "no test_data_set_* directory");
        rc = -1;
    }
    sim_model_free(m);
    return rc;
}

static int
count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (line[0] != '#' && line[0] != '\n')
            n++;
    fclose(f);
    return n;
}

static void
test_conformance(void **state)
{
    const char *node_dir = getenv("IPUOF_ONNX_NODE_DIR");
    const char *only = getenv("IPUOF_CONFORMANCE_ONLY");
    char path[PATH_MAX + 32], line[512], why[1200];
    int passed = 0, failed = 0, skipped;
    double maxdiff = 0.0;
    FILE *f;

    (void)state;
    if (node_dir == NULL)
        node_dir = NODE_DIR;
    if (access(node_dir, R_OK) != 0) {
        printf("ONNX node test data not found at %s (install libonnx-testdata)\n", node_dir);
        skip();
    }
    snprintf(path, sizeof(path), "%s/claimed.txt", conf_dir);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t l = strcspn(line, " \t\r\n");
        line[l] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        if (only != NULL && strcmp(only, line) != 0)
            continue;
        if (run_one_test(node_dir, line, why, sizeof(why), &maxdiff) == 0) {
            passed++;
        } else {
            failed++;
            printf("FAIL %s: %s\n", line, why);
        }
    }
    fclose(f);
    snprintf(path, sizeof(path), "%s/skipped.txt", conf_dir);
    skipped = only != NULL ? 0 : count_lines(path);
    printf("max abs difference on passing float outputs: %.3g\n", maxdiff);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    assert_int_equal(failed, 0);
    assert_true(passed > 0);
}

static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The loss ops' node tests: test_sce_* and test_nllloss_*, without the _expanded variants
 * (those test the function body made of other ops). */
static void
test_loss_node_tests(void **state)
{
    const char *node_dir = getenv("IPUOF_ONNX_NODE_DIR");
    char *names[512], why[1200];
    int n = 0, passed = 0, failed = 0;
    double maxdiff = 0.0;
    struct dirent *de;
    DIR *d;

    (void)state;
    if (node_dir == NULL)
        node_dir = NODE_DIR;
    d = opendir(node_dir);
    if (d == NULL) {
        printf("ONNX node test data not found at %s (install libonnx-testdata)\n", node_dir);
        skip();
    }
    while ((de = readdir(d)) != NULL && n < 512) {
        size_t l = strlen(de->d_name);
        if ((strncmp(de->d_name, "test_sce_", 9) != 0 &&
             strncmp(de->d_name, "test_nllloss_", 13) != 0) ||
            (l > 9 && strcmp(de->d_name + l - 9, "_expanded") == 0))
            continue;
        names[n] = strdup(de->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), cmp_names);
    for (int i = 0; i < n; i++) {
        if (run_one_test(node_dir, names[i], why, sizeof(why), &maxdiff) == 0) {
            passed++;
        } else {
            failed++;
            printf("FAIL %s: %s\n", names[i], why);
        }
        free(names[i]);
    }
    printf("loss ops: max abs difference on passing float outputs: %.3g\n", maxdiff);
    printf("loss ops: %d passed, %d failed\n", passed, failed);
    assert_int_equal(failed, 0);
    assert_true(passed > 0);
}

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conformance),
        cmocka_unit_test(test_loss_node_tests),
    };
    const char *dir = getenv("IPUOF_CONFORMANCE_DIR");

    (void)argc;
    if (dir != NULL) {
        snprintf(conf_dir, sizeof(conf_dir), "%s", dir);
    } else if (access("tests/conformance/claimed.txt", R_OK) != 0 && argv[0] != NULL) {
        /* run from elsewhere: build/tests/<bin> -> ../../tests/conformance */
        char tmp[PATH_MAX];
        char *slash;
        snprintf(tmp, sizeof(tmp), "%s", argv[0]);
        slash = strrchr(tmp, '/');
        if (slash != NULL) {
            *slash = '\0';
            if (snprintf(conf_dir, sizeof(conf_dir), "%s/../../tests/conformance", tmp) >=
                (int)sizeof(conf_dir))
                return 1;
        }
    }
    return cmocka_run_group_tests_name("sim_conformance", tests, NULL, NULL);
}
