/*
 * drv_interop_eval.c — the C side of test_interop_eval.sh: one SGD step of a model PyTorch
 * exported for training, then an inference model made from it, on ipuofd.
 *
 *   build/tests/integ/drv_interop_eval DIR
 *
 * DIR is what `tests/integ/interop_eval.py export` wrote (model.onnx, input_image.pb,
 * input_labels.pb). The daemon is IPUOF_SERVER. The program compiles model.onnx as a
 * training model (loss "loss", SGD lr 0.1 as torch.optim.SGD, seed 1), runs the batch once,
 * makes an inference model of it (ipuof_model_inference_from), runs the same batch through
 * it and writes into DIR, as ONNX TensorProto files for `interop_eval.py check`:
 *
 *   step_loss.pb        the loss of the training step
 *   w_K.pb              every weight of the training model after the step (K in the
 *                       daemon's order), named as the initializer
 *   eval_logits.pb      the inference model's output "logits"
 *
 * It prints one "ok - ..." / "not ok - ..." line per check and "N passed, M failed".
 * Without DIR (as the test runner starts every integration test) it prints
 * "0 passed, 0 failed" and exits 77 (skipped).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipuof/client.h"
#include "sim.h"
#include "drv.h"
#include "tensor_pb.h"

/* Writes t (borrowed) as DIR/NAME under tensor name tname; 0 or -1 (printed). */
static int
save(const char *dir, const char *name, const char *tname, const struct ipuof_tensor *t)
{
    char path[4096];
    struct sim_err err = {0};

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (sim_tensor_pb_write_file(path, tname, t->dtype, t->rank, t->dims, t->data, &err) != 0) {
        printf("# %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

/* An ipuof_tensor view of h (borrowed) as input name. */
static struct ipuof_tensor
view(const char *name, const struct sim_host_tensor *h)
{
    struct ipuof_tensor t = {name, h->dtype, h->rank, {0}, h->data, h->bytes};

    memcpy(t.dims, h->dims, sizeof t.dims);
    return t;
}

/* Writes every weight of m into DIR/w_K.pb; the number written, or -1. */
static int
save_weights(ipuof_model *m, const char *dir)
{
    size_t n = ipuof_model_weight_count(m);

    for (size_t i = 0; i < n; i++) {
        struct ipuof_tensor t;
        char file[64];
        void *buf;
        int kind, rc;

        if (ipuof_model_weight_info(m, i, &t, &kind) != IPUOF_OK)
            return -1;
        buf = malloc(t.bytes ? t.bytes : 1);
        if (buf == NULL)
            return -1;
        rc = ipuof_model_read_weight(m, t.name, buf, t.bytes);
        t.data = buf;
        snprintf(file, sizeof file, "w_%zu.pb", i);
        if (rc == IPUOF_OK)
            rc = save(dir, file, t.name, &t) == 0 ? IPUOF_OK : IPUOF_E_IO;
        free(buf);
        if (rc != IPUOF_OK)
            return -1;
    }
    return (int)n;
}

/* The training step, the inference model and the files. */
static void
run(ipuof_client *c, const char *dir)
{
    struct sim_host_tensor image = {0}, labels = {0};
    struct ipuof_training_opts t = {.loss = "loss", .seed = 1};
    struct ipuof_tensor in[2], out;
    char path[4096];
    ipuof_model *m = NULL, *inf = NULL;
    long li;
    int rc, nw;

    if (drv_load(dir, "input_image.pb", &image, 0) != 0 || drv_load(dir, "input_labels.pb", &labels, 0) != 0) {
        drv_check(0, "the files of interop_eval.py are in %s", dir);
        goto out;
    }
    ipuof_optimizer_init(&t.optimizer, IPUOF_OPTIMIZER_SGD);
    t.optimizer.lr = 0.1f;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    rc = ipuof_model_compile_training_file(c, path, NULL, &t, &m);
    drv_check(rc == IPUOF_OK, "the training export compiles for training (%s)",
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK)
        goto out;
    in[0] = view("image", &image);
    in[1] = view("labels", &labels);
    rc = ipuof_model_run(m, in, 2);
    drv_check(rc == IPUOF_OK, "one SGD step runs (%s)",
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK)
        goto out;
    li = ipuof_model_output_index(m, "loss");
    rc = li >= 0 ? ipuof_model_output(m, (size_t)li, &out) : IPUOF_E_NOTFOUND;
    drv_check(rc == IPUOF_OK && save(dir, "step_loss.pb", "loss", &out) == 0,
          "the step's loss is written");
    nw = save_weights(m, dir);
    drv_check(nw > 0, "the %d weights after the step are written", nw);

    rc = ipuof_model_inference_from(m, NULL, &inf);
    drv_check(rc == IPUOF_OK, "an inference model is made from the training model (%s)",
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK)
        goto out;
    rc = ipuof_model_run(inf, in, 2);
    drv_check(rc == IPUOF_OK, "the inference model runs the batch (%s)",
          rc == IPUOF_OK ? "ok" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK)
        goto out;
    li = ipuof_model_output_index(inf, "logits");
    rc = li >= 0 ? ipuof_model_output(inf, (size_t)li, &out) : IPUOF_E_NOTFOUND;
    drv_check(rc == IPUOF_OK && save(dir, "eval_logits.pb", "logits", &out) == 0,
          "the inference model's logits are written");
out:
    ipuof_model_free(inf);
    ipuof_model_free(m);
    sim_host_tensor_fini(&image);
    sim_host_tensor_fini(&labels);
}

int
main(int argc, char **argv)
{
    ipuof_client *c;

    if (argc < 2) {
        printf("# drv_interop_eval runs from tests/integ/test_interop_eval.sh\n");
        printf("0 passed, 0 failed\n");
        return 77;
    }
    c = drv_attach(1);
    if (c != NULL)
        run(c, argv[1]);
    return drv_finish(c);
}
