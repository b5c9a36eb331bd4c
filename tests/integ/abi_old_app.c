/*
 * abi_old_app.c — a program as built against the IPUOF_CLIENT_0.4 header (commit 7878cef),
 * run by test_client_abi.sh against today's libipuof-client.so. It does not include
 * <ipuof/client.h>: the declarations below are copies of that header's, and .symver binds
 * ipuof_fault_* to IPUOF_CLIENT_0.4 and the optimizer calls to IPUOF_CLIENT_0 as linking
 * against the 0.4 library did. Every old struct is followed by guard bytes that the
 * library must leave untouched (today's structs are larger: a library reading or writing
 * its own layout runs into them).
 *
 * Usage: abi_old_app ADDRESS ADMIN_ADDRESS TMPDIR. Prints "ok - ..." / "not ok - ..." and
 * exits 1 on the first failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_build.h"

/* ---- the 7878cef declarations ------------------------------------------------------- */
typedef struct ipuof_client ipuof_client;
typedef struct ipuof_model ipuof_model;
struct ipuof_model_opts;

#define IPUOF_OK 0
#define IPUOF_E_INVAL 1
#define IPUOF_FAULT_NAME_MAX 64
#define IPUOF_DTYPE_FLOAT 1
#define IPUOF_DTYPE_INT64 7
#define IPUOF_OPTIMIZER_SGD 1
#define IPUOF_OPTIMIZER_ADAMW 3

struct ipuof_attach_opts {
    unsigned num_ipus;
    const char *partition_name;
    unsigned process_id;
    unsigned num_processes;
    int wait;
    unsigned wait_timeout_ms;
    int auto_round;
};

struct ipuof_fault {
    unsigned id;
    int has_ipu;
    unsigned ipu;
    char partition[IPUOF_FAULT_NAME_MAX];
    char kind[IPUOF_FAULT_NAME_MAX];
    char at[16];
    unsigned after_runs;
    unsigned count;
    double probability;
    uint64_t seed;
    unsigned fired, seen;
};

struct ipuof_tensor {
    const char *name;
    int dtype;
    int rank;
    int64_t dims[8];
    const void *data;
    size_t bytes;
};

struct ipuof_optimizer {
    int kind;
    float lr;
    float weight_decay;
    float momentum;
    float dampening;
    int nesterov;
    float beta1, beta2;
    float eps;
};

struct ipuof_training_opts {
    const char *loss;
    struct ipuof_optimizer optimizer;
    unsigned gradient_accumulation;
    int accumulation_reduction;
    uint64_t seed;
    const char *const *frozen_weights;
    size_t n_frozen_weights;
};

ipuof_client *ipuof_client_new(void);
void ipuof_client_free(ipuof_client *c);
int ipuof_client_connect(ipuof_client *c, const char *address);
const char *ipuof_client_errmsg(const ipuof_client *c);
int ipuof_attach(ipuof_client *c, const struct ipuof_attach_opts *opts, unsigned *ipu_ids,
                 size_t max_ids, size_t *n_ids);
int ipuof_fault_inject(ipuof_client *c, const struct ipuof_fault *f, unsigned *id);
int ipuof_fault_list(ipuof_client *c, struct ipuof_fault *out, size_t max, size_t *n);
int ipuof_fault_clear(ipuof_client *c, unsigned id, size_t *n);
int ipuof_optimizer_init(struct ipuof_optimizer *o, int kind);
int ipuof_model_compile_training(ipuof_client *c, const void *onnx, size_t len,
                                 const struct ipuof_model_opts *opts,
                                 const struct ipuof_training_opts *t, ipuof_model **out);
int ipuof_model_compile_training_file(ipuof_client *c, const char *path,
                                      const struct ipuof_model_opts *opts,
                                      const struct ipuof_training_opts *t, ipuof_model **out);
int ipuof_model_set_optimizer(ipuof_model *m, const struct ipuof_optimizer *o);
int ipuof_model_run(ipuof_model *m, const struct ipuof_tensor *inputs, size_t n);
int ipuof_model_read_weight(ipuof_model *m, const char *name, void *dst, size_t bytes);
void ipuof_model_free(ipuof_model *m);
/* What linking against the 0.4 library recorded: each call bound to the version that
 * library had (linking against today's .so binds the default, @@IPUOF_CLIENT_0.7). */
__asm__(".symver ipuof_fault_inject, ipuof_fault_inject@IPUOF_CLIENT_0.4");
__asm__(".symver ipuof_fault_list, ipuof_fault_list@IPUOF_CLIENT_0.4");
__asm__(".symver ipuof_optimizer_init, ipuof_optimizer_init@IPUOF_CLIENT_0");
__asm__(".symver ipuof_model_set_optimizer, ipuof_model_set_optimizer@IPUOF_CLIENT_0");
__asm__(".symver ipuof_model_compile_training, ipuof_model_compile_training@IPUOF_CLIENT_0");
__asm__(".symver ipuof_model_compile_training_file, "
        "ipuof_model_compile_training_file@IPUOF_CLIENT_0");
/* ---- end of the 7878cef declarations ------------------------------------------------ */

#define GUARD 0xA5
#define GUARD_LEN 512

static struct {
    struct ipuof_fault faults[2];
    unsigned char guard[GUARD_LEN];
} fl;
static struct {
    struct ipuof_fault f;
    unsigned char guard[GUARD_LEN];
} fi;
static struct {
    struct ipuof_optimizer o;
    unsigned char guard[GUARD_LEN];
} oi;
static struct {
    struct ipuof_training_opts t;
    unsigned char guard[GUARD_LEN];
} ti;

static int failed;

static void
check(int cond, const char *what)
{
    printf("%s - %s\n", cond ? "ok" : "not ok", what);
    if (!cond)
        failed = 1;
}

static int
guard_intact(const unsigned char *g)
{
    for (size_t i = 0; i < GUARD_LEN; i++)
        if (g[i] != GUARD)
            return 0;
    return 1;
}

#define B 4
#define NIN 8
#define NCLS 4

/* x [B,NIN] -> Gemm (w [NCLS,NIN], transB) = logits; loss = SCE(logits, labels). */
static void *
model(size_t *len)
{
    static float w[NCLS * NIN], bias[NCLS];
    int64_t dx[2] = {B, NIN}, dl[1] = {B}, dw[2] = {NCLS, NIN}, db[1] = {NCLS};
    struct sim_ob *b = sim_ob_new(13);
    void *bytes = NULL;

    for (int i = 0; i < NCLS * NIN; i++)
        w[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 2, dx);
    sim_ob_input(b, "labels", IPUOF_DTYPE_INT64, 1, dl);
    sim_ob_initializer(b, "w", IPUOF_DTYPE_FLOAT, 2, dw, w);
    sim_ob_initializer(b, "bias", IPUOF_DTYPE_FLOAT, 1, db, bias);
    sim_ob_node(b, "Gemm", "fc", "x,w,bias", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "sce", "logits,labels", "loss");
    sim_ob_attr_str(b, "reduction", "mean");
    sim_ob_output_rank(b, "loss", IPUOF_DTYPE_FLOAT, 0);
    if (sim_ob_serialize(b, &bytes, len) != 0)
        bytes = NULL;
    sim_ob_free(b);
    return bytes;
}

/* One training step; the weight w afterwards to after. */
static int
step(ipuof_model *m, float *after)
{
    static float x[B * NIN];
    static int64_t y[B] = {0, 1, 2, 3};
    struct ipuof_tensor in[2] = {
        {"x", IPUOF_DTYPE_FLOAT, 2, {B, NIN}, x, sizeof x},
        {"labels", IPUOF_DTYPE_INT64, 1, {B}, y, sizeof y},
    };

    for (int i = 0; i < B * NIN; i++)
        x[i] = (float)(i % 5) - 2.0f;
    if (ipuof_model_run(m, in, 2) != IPUOF_OK)
        return -1;
    return ipuof_model_read_weight(m, "w", after, sizeof(float) * NCLS * NIN);
}

static int
faults(const char *admin_addr)
{
    ipuof_client *a = ipuof_client_new();
    size_t n = 0;
    unsigned id = 0;
    int rc;

    if (ipuof_client_connect(a, admin_addr) != IPUOF_OK) {
        check(0, "connect to the admin socket");
        ipuof_client_free(a);
        return 1;
    }
    memset(&fi, GUARD, sizeof fi);
    memset(&fi.f, 0, sizeof fi.f);
    fi.f.has_ipu = 1;
    fi.f.ipu = 1;
    snprintf(fi.f.kind, sizeof fi.f.kind, "recoverable:IPU_RESET");
    snprintf(fi.f.at, sizeof fi.f.at, "run");
    fi.f.after_runs = 3;
    fi.f.count = 2;
    fi.f.probability = 0.5;
    fi.f.seed = 4242;
    rc = ipuof_fault_inject(a, &fi.f, &id);
    check(rc == IPUOF_OK && id > 0, "fault_inject@0.4 of an old struct followed by guard bytes");
    if (rc != IPUOF_OK)
        printf("# %s\n", ipuof_client_errmsg(a));
    memset(&fl, GUARD, sizeof fl);
    rc = ipuof_fault_list(a, fl.faults, 1, &n);
    check(rc == IPUOF_OK && n == 1, "fault_list@0.4 lists the fault");
    check(fl.faults[0].id == id && fl.faults[0].has_ipu == 1 && fl.faults[0].ipu == 1 &&
              strcmp(fl.faults[0].kind, "recoverable:IPU_RESET") == 0 &&
              strcmp(fl.faults[0].at, "run") == 0 && fl.faults[0].after_runs == 3 &&
              fl.faults[0].count == 2 && fl.faults[0].probability == 0.5 &&
              fl.faults[0].seed == 4242 && fl.faults[0].fired == 0,
          "fault_list@0.4 returns every field as injected");
    {
        const unsigned char *p = (const unsigned char *)&fl.faults[1];
        int untouched = 1;
        for (size_t i = 0; i < sizeof fl.faults[1]; i++)
            untouched &= p[i] == GUARD;
        check(untouched && guard_intact(fl.guard),
              "fault_list@0.4 with max 1 writes one old-sized entry, nothing past it");
    }
    check(guard_intact(fi.guard), "fault_inject@0.4 left the guard bytes alone");
    check(ipuof_fault_clear(a, 0, &n) == IPUOF_OK && n == 1, "fault_clear clears it");
    ipuof_client_free(a);
    return 0;
}

static int
training(const char *addr, const char *tmpdir)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    ipuof_model *m = NULL, *mf = NULL;
    float w0[NCLS * NIN], w1[NCLS * NIN], w2[NCLS * NIN];
    size_t len = 0;
    void *onnx = model(&len);
    char path[4096];
    FILE *f;
    int rc, moved = 0, same = 1;

    if (onnx == NULL || ipuof_client_connect(c, addr) != IPUOF_OK ||
        ipuof_attach(c, &ao, NULL, 0, NULL) != IPUOF_OK) {
        check(0, "build the model, connect and attach");
        printf("# %s\n", ipuof_client_errmsg(c));
        free(onnx);
        ipuof_client_free(c);
        return 1;
    }
    memset(&oi, GUARD, sizeof oi);
    check(ipuof_optimizer_init(&oi.o, IPUOF_OPTIMIZER_ADAMW) == IPUOF_OK &&
              oi.o.kind == IPUOF_OPTIMIZER_ADAMW && oi.o.lr == 1e-3f &&
              oi.o.weight_decay == 1e-2f && oi.o.beta2 == 0.999f && oi.o.eps == 1e-8f,
          "optimizer_init@0 fills torch's AdamW defaults");
    check(guard_intact(oi.guard), "optimizer_init@0 left the guard bytes alone");
    check(ipuof_optimizer_init(&oi.o, 4) == IPUOF_E_INVAL,
          "optimizer_init@0 refuses a kind the old struct cannot hold (RMSprop)");

    memset(&ti, GUARD, sizeof ti);
    memset(&ti.t, 0, sizeof ti.t);
    ti.t.loss = "loss";
    ti.t.optimizer.kind = IPUOF_OPTIMIZER_SGD;
    ti.t.optimizer.lr = 0.5f;
    ti.t.gradient_accumulation = 1;
    rc = ipuof_model_compile_training(c, onnx, len, NULL, &ti.t, &m);
    check(rc == IPUOF_OK, "compile_training@0 with an old training_opts (SGD lr 0.5)");
    if (rc != IPUOF_OK) {
        printf("# %s\n", ipuof_client_errmsg(c));
        goto out;
    }
    check(guard_intact(ti.guard), "compile_training@0 left the guard bytes alone");
    rc = ipuof_model_read_weight(m, "w", w0, sizeof w0);
    rc = rc == IPUOF_OK ? step(m, w1) : rc;
    for (int i = 0; i < NCLS * NIN; i++)
        moved |= w1[i] != w0[i];
    check(rc == IPUOF_OK && moved, "a step with the compiled lr 0.5 moves the weight");

    memset(&oi, GUARD, sizeof oi);
    memset(&oi.o, 0, sizeof oi.o);
    oi.o.kind = IPUOF_OPTIMIZER_SGD;
    oi.o.lr = 0.0f;
    rc = ipuof_model_set_optimizer(m, &oi.o);
    check(rc == IPUOF_OK, "set_optimizer@0 with an old struct (lr 0)");
    if (rc != IPUOF_OK)
        printf("# %s\n", ipuof_client_errmsg(c));
    check(guard_intact(oi.guard), "set_optimizer@0 left the guard bytes alone");
    rc = step(m, w2);
    for (int i = 0; i < NCLS * NIN; i++)
        same &= w2[i] == w1[i];
    check(rc == IPUOF_OK && same, "a step after set_optimizer lr 0 leaves the weight");
    oi.o.lr = -1.0f;
    check(ipuof_model_set_optimizer(m, &oi.o) == IPUOF_E_INVAL &&
              strstr(ipuof_client_errmsg(c), "lr") != NULL,
          "set_optimizer@0 refuses lr -1 naming lr");

    snprintf(path, sizeof path, "%s/old.onnx", tmpdir);
    f = fopen(path, "wb");
    if (f != NULL) {
        fwrite(onnx, 1, len, f);
        fclose(f);
    }
    ipuof_model_free(m);
    m = NULL;
    memset(&ti, GUARD, sizeof ti);
    memset(&ti.t, 0, sizeof ti.t);
    ti.t.loss = "loss";
    ti.t.optimizer.kind = IPUOF_OPTIMIZER_SGD;
    ti.t.optimizer.lr = -1.0f;
    check(ipuof_model_compile_training_file(c, path, NULL, &ti.t, &mf) == IPUOF_E_INVAL &&
              strstr(ipuof_client_errmsg(c), "lr") != NULL,
          "compile_training_file@0 reads the old struct's lr (-1 refused naming lr)");
    ti.t.optimizer.lr = 0.1f;
    rc = ipuof_model_compile_training_file(c, path, NULL, &ti.t, &mf);
    check(rc == IPUOF_OK && guard_intact(ti.guard),
          "compile_training_file@0 with an old training_opts, guard bytes alone");
    if (rc != IPUOF_OK)
        printf("# %s\n", ipuof_client_errmsg(c));
out:
    ipuof_model_free(mf);
    ipuof_model_free(m);
    free(onnx);
    ipuof_client_free(c);
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: abi_old_app ADDRESS ADMIN_ADDRESS TMPDIR\n");
        return 2;
    }
    faults(argv[2]);
    training(argv[1], argv[3]);
    return failed;
}
