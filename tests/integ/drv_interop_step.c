/*
 * drv_interop_step.c — the C side of test_interop_torch.sh: one AdamW step of a model
 * PyTorch exported, on ipuofd, compared with PyTorch's own step.
 *
 *   build/tests/integ/drv_interop_step DIR
 *
 * DIR is what tests/integ/interop_torch.py wrote (model.onnx, input_image.pb,
 * input_labels.pb, loss.pb, initial_K.pb and weight_K.pb for each initializer K). The
 * daemon is IPUOF_SERVER. The program compiles model.onnx as a training model (loss "loss",
 * AdamW with torch's defaults and lr 1e-3, one device iteration), checks that the weights
 * before the step are the exported ones, runs the batch once and compares the loss and
 * every weight after the step with PyTorch's: |got - want| <= 1e-4 x |want| + 1e-6. Where
 * PyTorch's gradient is below 1e-6 (100 x Adam's eps) but not 0, the first Adam update
 * lr x g / (|g| + eps) turns the rounding of a cancelling sum into a visible difference, so
 * those elements may differ by up to lr (their count is printed). It prints one "ok - ..." /
 * "not ok - ..." line per check and "N passed, M failed".
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

#define RTOL 1e-4
#define ATOL 1e-6
#define LR 1e-3
#define TINY_GRAD 1e-6
#define MAX_WEIGHTS 64

/* The largest |got - want| over n floats as a multiple of the tolerance (<= 1: within),
 * the largest absolute difference in *maxdiff and where the worst one is in *at. grad (may
 * be NULL) is PyTorch's gradient: elements whose gradient is tiny but not 0 are allowed a
 * difference of LR more; *relaxed counts them. */
static double
compare(const float *got, const float *want, const float *grad, size_t n, double *maxdiff,
        size_t *at, size_t *relaxed)
{
    double worst = 0;

    *maxdiff = 0;
    *at = 0;
    *relaxed = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double tol = ATOL + RTOL * fabs((double)want[i]);

        if (grad != NULL && grad[i] != 0 && fabs(grad[i]) < TINY_GRAD) {
            tol += LR;
            (*relaxed)++;
        }
        if (d > *maxdiff)
            *maxdiff = d;
        if (d / tol > worst || isnan(got[i])) {
            worst = isnan(got[i]) ? INFINITY : d / tol;
            *at = i;
        }
    }
    return worst;
}

/* Compiles, checks the initial weights, runs one step and compares. */
static void
step(ipuof_client *c, const char *dir)
{
    struct sim_host_tensor image = {0}, labels = {0}, loss = {0};
    struct ipuof_training_opts t = {.loss = "loss"};
    struct ipuof_tensor in[2], out;
    char path[4096];
    ipuof_model *m = NULL;
    int rc;

    if (drv_load(dir, "input_image.pb", &image, 0) != 0 ||
        drv_load(dir, "input_labels.pb", &labels, 0) != 0 || drv_load(dir, "loss.pb", &loss, 0) != 0) {
        drv_check(0, "the files of interop_torch.py are in %s", dir);
        goto out;
    }
    ipuof_optimizer_init(&t.optimizer, IPUOF_OPTIMIZER_ADAMW);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    rc = ipuof_model_compile_training_file(c, path, NULL, &t, &m);
    drv_check(rc == IPUOF_OK, "the exported model compiles for training (%s)",
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK)
        goto out;
    drv_check(ipuof_model_is_training(m) && ipuof_model_weight_count(m) > 0,
          "it is a training model with %zu weights", ipuof_model_weight_count(m));

    for (int k = 0; k < MAX_WEIGHTS; k++) {
        struct sim_host_tensor w = {0};
        char name[32];
        float *got;

        snprintf(name, sizeof name, "initial_%d.pb", k);
        if (drv_load(dir, name, &w, 1) != 0)
            break;
        got = malloc(w.bytes);
        rc = got != NULL ? ipuof_model_read_weight(m, w.name, got, w.bytes) : IPUOF_E_NOMEM;
        drv_check(rc == IPUOF_OK && memcmp(got, w.data, w.bytes) == 0,
              "weight '%s' before the step is the exported value (%s)", w.name,
              rc == IPUOF_OK ? "read" : ipuof_client_errmsg(c));
        free(got);
        sim_host_tensor_fini(&w);
    }

    in[0] = (struct ipuof_tensor){"image", image.dtype, image.rank, {0}, image.data,
                                  image.bytes};
    memcpy(in[0].dims, image.dims, sizeof in[0].dims);
    in[1] = (struct ipuof_tensor){"labels", labels.dtype, labels.rank, {0}, labels.data,
                                  labels.bytes};
    memcpy(in[1].dims, labels.dims, sizeof in[1].dims);
    rc = ipuof_model_run(m, in, 2);
    drv_check(rc == IPUOF_OK, "one training step runs (%s)",
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK)
        goto out;
    rc = ipuof_model_output(m, (size_t)ipuof_model_output_index(m, "loss"), &out);
    if (rc == IPUOF_OK && out.bytes == sizeof(float)) {
        double diff;
        size_t at, relaxed;
        double worst = compare(out.data, loss.data, NULL, 1, &diff, &at, &relaxed);

        drv_check(worst <= 1, "the loss matches PyTorch's: %.7f vs %.7f", *(const float *)out.data,
              *(const float *)loss.data);
    } else {
        drv_check(0, "the step returns one loss value (%zu bytes)", rc == IPUOF_OK ? out.bytes : 0);
    }

    for (int k = 0; k < MAX_WEIGHTS; k++) {
        struct sim_host_tensor w = {0}, g = {0};
        char name[32];
        double diff = 0, worst = INFINITY;
        size_t at = 0, relaxed = 0;
        float *got;

        snprintf(name, sizeof name, "weight_%d.pb", k);
        if (drv_load(dir, name, &w, 1) != 0)
            break;
        snprintf(name, sizeof name, "grad_%d.pb", k);
        if (drv_load(dir, name, &g, 0) != 0 || g.bytes != w.bytes) {
            drv_check(0, "the gradient of '%s' is in %s", w.name, dir);
            sim_host_tensor_fini(&w);
            sim_host_tensor_fini(&g);
            continue;
        }
        got = malloc(w.bytes);
        rc = got != NULL ? ipuof_model_read_weight(m, w.name, got, w.bytes) : IPUOF_E_NOMEM;
        if (rc == IPUOF_OK)
            worst = compare(got, w.data, g.data, w.bytes / sizeof(float), &diff, &at,
                            &relaxed);
        if (rc == IPUOF_OK && worst > 1)
            printf("# element %zu: %.9g, PyTorch %.9g\n", at, got[at],
                   ((const float *)w.data)[at]);
        drv_check(rc == IPUOF_OK && worst <= 1,
              "weight '%s' after the step matches PyTorch's (max |diff| %.3g, %.2f x the "
              "tolerance; %zu of %zu elements with a tiny gradient)%s%s",
              w.name, diff, worst, relaxed, w.bytes / sizeof(float),
              rc == IPUOF_OK ? "" : ": ", rc == IPUOF_OK ? "" : ipuof_client_errmsg(c));
        free(got);
        sim_host_tensor_fini(&w);
        sim_host_tensor_fini(&g);
    }
out:
    ipuof_model_free(m);
    sim_host_tensor_fini(&image);
    sim_host_tensor_fini(&labels);
    sim_host_tensor_fini(&loss);
}

int
main(int argc, char **argv)
{
    ipuof_client *c;

    if (argc < 2) {
        fprintf(stderr, "usage: drv_interop_step DIR (run by tests/integ/test_interop_torch.sh)\n");
        return 2;
    }
    c = drv_attach(1);
    if (c != NULL)
        step(c, argv[1]);
    return drv_finish(c);
}
