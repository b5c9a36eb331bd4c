/*
 * drv_interop_layers.c — the C side of test_interop_layers.sh: the everyday PyTorch layers
 * (tests/integ/layers_torch.py) run and trained on ipuofd, compared with PyTorch.
 *
 *   build/tests/integ/drv_interop_layers DIR
 *
 * DIR is what layers_torch.py wrote: cases.txt ("<case> train <steps>" or "<case> infer"
 * lines) and one directory per case (model.onnx, input_K.pb, y.pb; for training cases
 * loss.pb, loss_S.pb for steps S >= 1, and initial_K.pb / weight_K.pb per initializer).
 * The daemon is IPUOF_SERVER. For every case:
 *   - inference: the model compiled as an inference model, run on the inputs; output y
 *     against PyTorch's, |got - want| <= 1e-3 |want| + 1e-4 (integer outputs: equal);
 *   - training cases also: compiled as a training model (loss "loss", torch.optim.SGD with
 *     lr 0.1), the weights before the steps checked against the exported ones, the case's
 *     steps run on the same inputs, the loss of each and every weight after the last
 *     against PyTorch's, |got - want| <= 1e-4 |want| + 1e-6.
 * It prints one "ok - ..." / "not ok - ..." line per check and "N passed, M failed".
 *
 * Without DIR (as the test runner starts every integration test) there is nothing to
 * compare: it prints "0 passed, 0 failed" and exits 77 (skipped).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipuof/client.h"
#include "sim.h"
#include "drv.h"
#include "tensor_pb.h"

#define MAX_INPUTS 4
#define MAX_WEIGHTS 64
#define LR 0.1f
/* The least a weight must move in PyTorch's steps for its gradient to count as exercised:
 * the smallest real move here is ~5e-3, while a weight whose true gradient is zero moves
 * by a rounding remainder (1.9e-9 seen), which must not pass for one. */
#define MIN_MOVE 1e-6

/* The worst |got - want| of n floats as a multiple of atol + rtol |want| (<= 1: within);
 * the largest absolute difference in *maxdiff. NaN counts as infinitely wrong. */
static double
compare(const float *got, const float *want, size_t n, double rtol, double atol,
        double *maxdiff)
{
    double worst = 0;

    *maxdiff = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double r = d / (atol + rtol * fabs((double)want[i]));
        if (isnan(got[i]) != isnan(want[i]))
            r = INFINITY;
        if (d > *maxdiff)
            *maxdiff = d;
        if (r > worst)
            worst = r;
    }
    return worst;
}

/* The case's inputs as client tensors (views of ts). Returns their count. */
static size_t
load_inputs(const char *dir, struct sim_host_tensor *ts, struct ipuof_tensor *in)
{
    size_t n = 0;

    for (int k = 0; k < MAX_INPUTS; k++) {
        char name[32];
        snprintf(name, sizeof name, "input_%d.pb", k);
        if (drv_load(dir, name, &ts[n], 1) != 0)
            break;
        in[n] = (struct ipuof_tensor){ts[n].name, ts[n].dtype, ts[n].rank, {0}, ts[n].data,
                                      ts[n].bytes};
        memcpy(in[n].dims, ts[n].dims, sizeof in[n].dims);
        n++;
    }
    return n;
}

/* Inference: output y against PyTorch's. */
static void
infer_case(ipuof_client *c, const char *dir, const char *cname,
           const struct ipuof_tensor *in, size_t n_in)
{
    struct sim_host_tensor want = {0};
    struct ipuof_tensor out;
    char path[4200];
    ipuof_model *m = NULL;
    int rc;

    snprintf(path, sizeof path, "%s/model.onnx", dir);
    rc = ipuof_model_compile_file(c, path, NULL, &m);
    drv_check(rc == IPUOF_OK, "%s: compiles for inference (%s)", cname,
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK || drv_load(dir, "y.pb", &want, 0) != 0)
        goto out;
    rc = ipuof_model_run(m, in, n_in);
    if (rc == IPUOF_OK)
        rc = ipuof_model_output(m, (size_t)ipuof_model_output_index(m, "y"), &out);
    if (rc != IPUOF_OK || out.bytes != want.bytes || out.dtype != want.dtype) {
        drv_check(0, "%s: inference runs and returns y like PyTorch's (%s; %zu bytes, want %zu)",
              cname, rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c),
              rc == IPUOF_OK ? out.bytes : 0, want.bytes);
        goto out;
    }
    if (want.dtype == IPUOF_DTYPE_FLOAT) {
        double diff, worst = compare(out.data, want.data, want.bytes / sizeof(float), 1e-3,
                                     1e-4, &diff);
        drv_check(worst <= 1, "%s: inference output y matches PyTorch's (max |diff| %.3g, %.2f x "
              "the tolerance)", cname, diff, worst);
    } else {
        drv_check(memcmp(out.data, want.data, want.bytes) == 0,
              "%s: inference output y (%s) equals PyTorch's", cname,
              want.dtype == IPUOF_DTYPE_INT64 ? "int64" : "integer");
    }
out:
    ipuof_model_free(m);
    sim_host_tensor_fini(&want);
}

/* Compares every weight_K.pb (or initial_K.pb) with the model's. */
static void
check_weights(ipuof_model *m, ipuof_client *c, const char *dir, const char *cname,
              const char *prefix, double rtol, double atol)
{
    for (int k = 0; k < MAX_WEIGHTS; k++) {
        struct sim_host_tensor w = {0};
        char name[32];
        double diff = 0, worst = INFINITY;
        float *got;
        int rc;

        snprintf(name, sizeof name, "%s_%d.pb", prefix, k);
        if (drv_load(dir, name, &w, 1) != 0)
            break;
        if (strcmp(prefix, "weight") == 0) {
            struct sim_host_tensor w0 = {0};
            double moved = 0;
            snprintf(name, sizeof name, "initial_%d.pb", k);
            if (drv_load(dir, name, &w0, 0) == 0 && w0.bytes == w.bytes)
                compare(w.data, w0.data, w.bytes / sizeof(float), 0, 1, &moved);
            drv_check(moved > MIN_MOVE, "%s: PyTorch's step moved weight '%s' (by up to %.3g > "
                  "%g), so the layer's gradient is exercised", cname, w.name, moved, MIN_MOVE);
            sim_host_tensor_fini(&w0);
        }
        got = malloc(w.bytes);
        rc = got != NULL ? ipuof_model_read_weight(m, w.name, got, w.bytes) : IPUOF_E_NOMEM;
        if (rc == IPUOF_OK)
            worst = compare(got, w.data, w.bytes / sizeof(float), rtol, atol, &diff);
        drv_check(rc == IPUOF_OK && worst <= 1, "%s: weight '%s' %s matches PyTorch's (max |diff| "
              "%.3g)%s%s", cname, w.name, strcmp(prefix, "initial") == 0 ? "before the step"
              : "after the SGD steps", diff, rc == IPUOF_OK ? "" : ": ",
              rc == IPUOF_OK ? "" : ipuof_client_errmsg(c));
        free(got);
        sim_host_tensor_fini(&w);
    }
}

/* Training: steps SGD steps, each loss and the weights after them against PyTorch's. */
static void
train_case(ipuof_client *c, const char *dir, const char *cname,
           const struct ipuof_tensor *in, size_t n_in, int steps)
{
    struct sim_host_tensor loss = {0};
    struct ipuof_training_opts t = {.loss = "loss"};
    struct ipuof_tensor out;
    char path[4200];
    ipuof_model *m = NULL;
    int rc;

    ipuof_optimizer_init(&t.optimizer, IPUOF_OPTIMIZER_SGD);
    t.optimizer.lr = LR;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    rc = ipuof_model_compile_training_file(c, path, NULL, &t, &m);
    drv_check(rc == IPUOF_OK, "%s: compiles for training (%s)", cname,
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK || drv_load(dir, "loss.pb", &loss, 0) != 0)
        goto out;
    check_weights(m, c, dir, cname, "initial", 0, 0);
    for (int s = 0; s < steps; s++) {
        char lname[32];
        if (s > 0) {
            sim_host_tensor_fini(&loss);
            snprintf(lname, sizeof lname, "loss_%d.pb", s);
            if (drv_load(dir, lname, &loss, 0) != 0) {
                drv_check(0, "%s: PyTorch's loss of step %d is in %s", cname, s + 1, lname);
                goto out;
            }
        }
        rc = ipuof_model_run(m, in, n_in);
        if (rc == IPUOF_OK)
            rc = ipuof_model_output(m, (size_t)ipuof_model_output_index(m, "loss"), &out);
        if (rc != IPUOF_OK || out.bytes != sizeof(float)) {
            drv_check(0, "%s: training step %d runs and returns one loss (%s)", cname, s + 1,
                  rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
            goto out;
        }
        double diff, worst = compare(out.data, loss.data, 1, 1e-4, 1e-6, &diff);
        drv_check(worst <= 1, "%s: the loss of step %d matches PyTorch's: %.7f vs %.7f", cname,
              s + 1, *(const float *)out.data, *(const float *)loss.data);
    }
    check_weights(m, c, dir, cname, "weight", 1e-4, 1e-6);
out:
    ipuof_model_free(m);
    sim_host_tensor_fini(&loss);
}

int
main(int argc, char **argv)
{
    char line[256], path[4096];
    ipuof_client *c;
    FILE *f;
    int cases = 0;

    if (argc < 2) {
        printf("# drv_interop_layers runs from tests/integ/test_interop_layers.sh\n");
        printf("0 passed, 0 failed\n");
        return 77;
    }
    snprintf(path, sizeof path, "%s/cases.txt", argv[1]);
    f = fopen(path, "r");
    if (f == NULL) {
        printf("not ok - %s is readable\n0 passed, 1 failed\n", path);
        return 1;
    }
    c = drv_attach(1);
    while (c != NULL && fgets(line, sizeof line, f) != NULL) {
        struct sim_host_tensor ts[MAX_INPUTS] = {{0}};
        struct ipuof_tensor in[MAX_INPUTS];
        char cname[128], mode[16], dir[3900];
        int steps = 1;
        size_t n_in;

        if (sscanf(line, "%127s %15s %d", cname, mode, &steps) < 2)
            continue;
        snprintf(dir, sizeof dir, "%s/%s", argv[1], cname);
        n_in = load_inputs(dir, ts, in);
        drv_check(n_in > 0, "%s: PyTorch's inputs are in %s", cname, dir);
        if (n_in > 0) {
            infer_case(c, dir, cname, in, n_in);
            if (strcmp(mode, "train") == 0)
                train_case(c, dir, cname, in, n_in, steps);
        }
        for (size_t i = 0; i < n_in; i++)
            sim_host_tensor_fini(&ts[i]);
        cases++;
    }
    fclose(f);
    drv_check(cases > 0, "%d cases ran", cases);
    return drv_finish(c);
}
