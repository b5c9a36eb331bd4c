/*
 * test_conformance.c — the ONNX backend node tests, run through a real ipuofd.
 *
 * For every test listed in tests/conformance/claimed.txt (Debian's libonnx-testdata layout:
 * NODE/<test>/model.onnx, test_data_set_N/input_K.pb, output_K.pb) the runner compiles the
 * model on the daemon through libipuof-client, runs every data set, and compares each output
 * with rtol 1e-4 and atol 1e-5 as the ONNX backend test does (exact for integer and bool
 * outputs). Small inputs are offered as constant inputs: the daemon fixes those that decide
 * shapes (a Reshape's shape, Slice bounds, Range's bounds) and leaves the others as run
 * inputs.
 *
 * Prints one line per failure and "N passed, M failed, K skipped" (K: the entries of
 * tests/conformance/skipped.txt); exits 1 on any failure.
 *
 *   IPUOF_CONFORMANCE_FILTER=conv build/tests/integ/test_conformance    only matching tests
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipuof/client.h"
#include "tensor_pb.h"
#include "testd.h"

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"
#define MAX_TENSORS 16
#define RTOL 1e-4
#define ATOL 1e-5

struct dataset {
    struct sim_host_tensor in[MAX_TENSORS], out[MAX_TENSORS];
    int n_in, n_out;
};

static void
dataset_fini(struct dataset *ds)
{
    for (int i = 0; i < ds->n_in; i++)
        sim_host_tensor_fini(&ds->in[i]);
    for (int i = 0; i < ds->n_out; i++)
        sim_host_tensor_fini(&ds->out[i]);
    ds->n_in = ds->n_out = 0;
}

/* Reads DIR/{input,output}_K.pb for K = 0, 1, ... 0 or -1 with msg. */
static int
dataset_load(const char *dir, struct dataset *ds, char *msg, size_t len)
{
    static const char *const kinds[2] = {"input", "output"};

    memset(ds, 0, sizeof *ds);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < MAX_TENSORS; i++) {
            char path[1024];
            struct sim_err err;
            struct sim_host_tensor *t = k == 0 ? &ds->in[i] : &ds->out[i];
            FILE *f;

            snprintf(path, sizeof path, "%s/%s_%d.pb", dir, kinds[k], i);
            f = fopen(path, "rb");
            if (f == NULL)
                break;
            fclose(f);
            if (sim_tensor_pb_read_file(path, t, &err) != 0) {
                snprintf(msg, len, "%.200s: %.700s", path, err.msg);
                return -1;
            }
            if (k == 0)
                ds->n_in++;
            else
                ds->n_out++;
        }
    }
    return 0;
}

static void
to_api(const struct sim_host_tensor *h, struct ipuof_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->name = h->name;
    t->dtype = h->dtype;
    t->rank = h->rank;
    for (int d = 0; d < h->rank; d++)
        t->dims[d] = h->dims[d];
    t->data = h->data;
    t->bytes = h->bytes;
}

/* Compares an output with its expected value. 0 or -1 with msg; *maxdiff gets the largest
 * float difference seen. */
static int
compare(const struct ipuof_tensor *got, const struct sim_host_tensor *want, double *maxdiff,
        char *msg, size_t len)
{
    size_t n;

    if (got->dtype != want->dtype || got->bytes != want->bytes) {
        snprintf(msg, len, "output '%s': got %s of %zu bytes, expected %s of %zu bytes",
                 want->name, ipuof_dtype_name(got->dtype), got->bytes,
                 ipuof_dtype_name(want->dtype), want->bytes);
        return -1;
    }
    if (want->dtype != IPUOF_DTYPE_FLOAT) {
        if (memcmp(got->data, want->data, want->bytes) != 0) {
            snprintf(msg, len, "output '%s': %s values differ", want->name,
                     ipuof_dtype_name(want->dtype));
            return -1;
        }
        return 0;
    }
    n = want->bytes / sizeof(float);
    for (size_t i = 0; i < n; i++) {
        double a = ((const float *)got->data)[i], b = ((const float *)want->data)[i];
        double diff = fabs(a - b);
        if (isnan(a) && isnan(b))
            continue;
        if (isinf(a) && isinf(b) && (a > 0) == (b > 0))
            continue;
        if (diff > *maxdiff)
            *maxdiff = diff;
        if (!(diff <= ATOL + RTOL * fabs(b))) {
            snprintf(msg, len, "output '%s'[%zu] = %.9g, expected %.9g (|diff| %.3g > atol %g + "
                     "rtol %g * |expected|)", want->name, i, a, b, diff, ATOL, RTOL);
            return -1;
        }
    }
    return 0;
}

/* Runs one node test directory. 0 passed, -1 failed (msg says why). */
static int
run_test(ipuof_client *c, const char *name, double *maxdiff, char *msg, size_t len)
{
    char path[1024];
    struct dataset ds;
    struct ipuof_model_opts o = {.name = name};
    struct ipuof_tensor consts[MAX_TENSORS], ins[MAX_TENSORS];
    ipuof_model *m = NULL;
    int rc = -1, nc = 0;

    snprintf(path, sizeof path, "%s/%s/test_data_set_0", NODE_DIR, name);
    if (dataset_load(path, &ds, msg, len) < 0)
        return -1;
    for (int i = 0; i < ds.n_in; i++) {
        const struct sim_host_tensor *t = &ds.in[i];
        if (t->numel <= 4096)   /* Range's float bounds decide a shape too */
            to_api(t, &consts[nc++]);
    }
    o.constant_inputs = consts;
    o.n_constant_inputs = (size_t)nc;
    snprintf(path, sizeof path, "%s/%s/model.onnx", NODE_DIR, name);
    if (ipuof_model_compile_file(c, path, &o, &m) != IPUOF_OK) {
        snprintf(msg, len, "compile: %s", ipuof_client_errmsg(c));
        goto out;
    }
    for (int set = 0;; set++) {
        size_t nin = ipuof_model_input_count(m);
        if (set > 0) {
            dataset_fini(&ds);
            snprintf(path, sizeof path, "%s/%s/test_data_set_%d", NODE_DIR, name, set);
            if (dataset_load(path, &ds, msg, len) < 0)
                goto out;
            if (ds.n_out == 0)
                break; /* no more data sets */
        }
        /* The model's run inputs, matched to the data by name. */
        for (size_t i = 0; i < nin; i++) {
            struct ipuof_tensor info;
            int found = 0;
            ipuof_model_input_info(m, i, &info, NULL);
            for (int k = 0; k < ds.n_in; k++) {
                if (strcmp(ds.in[k].name, info.name) == 0) {
                    to_api(&ds.in[k], &ins[i]);
                    found = 1;
                }
            }
            if (!found) {
                snprintf(msg, len, "no data for model input '%s'", info.name);
                goto out;
            }
        }
        if (ipuof_model_run(m, ins, nin) != IPUOF_OK) {
            snprintf(msg, len, "run (data set %d): %s", set, ipuof_client_errmsg(c));
            goto out;
        }
        for (int k = 0; k < ds.n_out; k++) {
            long idx = ipuof_model_output_index(m, ds.out[k].name);
            struct ipuof_tensor got;
            if (idx < 0) {
                snprintf(msg, len, "the model has no output '%s'", ds.out[k].name);
                goto out;
            }
            ipuof_model_output(m, (size_t)idx, &got);
            if (compare(&got, &ds.out[k], maxdiff, msg, len) < 0)
                goto out;
        }
    }
    rc = 0;
out:
    dataset_fini(&ds);
    ipuof_model_free(m);
    return rc;
}

static int
count_lines(const char *path)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    int n = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        n += line[0] != '#' && line[0] != '\n';
    fclose(f);
    return n;
}

int
main(void)
{
    const char *filter = getenv("IPUOF_CONFORMANCE_FILTER");
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct testd d;
    ipuof_client *c;
    char line[512];
    double maxdiff = 0;
    int passed = 0, failed = 0, skipped;
    FILE *list;

    signal(SIGPIPE, SIG_IGN);
    list = fopen("tests/conformance/claimed.txt", "r");
    if (list == NULL) {
        fprintf(stderr, "run from the repository root: tests/conformance/claimed.txt not found\n");
        return 1;
    }
    if (testd_start(&d, NULL, NULL) < 0) {
        fprintf(stderr, "cannot start ipuofd\n");
        return 1;
    }
    c = ipuof_client_new();
    ipuof_client_set_name(c, "conformance");
    if (ipuof_client_connect(c, d.addr) != IPUOF_OK || ipuof_attach(c, &ao, NULL, 0, NULL) != 0) {
        fprintf(stderr, "cannot attach: %s\n", ipuof_client_errmsg(c));
        return 1;
    }
    while (fgets(line, sizeof line, list)) {
        char msg[1024] = "";
        line[strcspn(line, " \t\r\n#")] = '\0';
        if (line[0] == '\0' || (filter && !strstr(line, filter)))
            continue;
        if (run_test(c, line, &maxdiff, msg, sizeof msg) == 0) {
            passed++;
        } else {
            failed++;
            printf("FAIL %s: %s\n", line, msg);
        }
    }
    fclose(list);
    skipped = filter ? 0 : count_lines("tests/conformance/skipped.txt");
    ipuof_client_free(c);
    if (testd_stop(&d) != 0) {
        printf("FAIL ipuofd did not exit cleanly\n");
        failed++;
    }
    printf("largest float difference: %.3g\n", maxdiff);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
