/*
 * identity_drv.c — the driver of the identity harness (tools/identity.sh, tools/identity.py):
 * compiles one ONNX model on the ipuofd named by IPUOF_SERVER, runs it once on inputs made
 * here from a fixed generator, and writes what a refactor must not change to DIR:
 *
 *   outputs.bin   every output of the run: its name, dtype, shape and bytes
 *   weights.bin   every weight after the run (training only): name, dtype, shape, bytes
 *   predict.json  the compile's prediction report (what `ipuof-run --predict=json` prints)
 *   trace.json    the run's execution trace (the model is compiled with profile on)
 *
 *   identity_drv DIR MODEL.onnx [--loss NAME] [--optimizer sgd|momentum|adam|adamw|lamb|
 *                rmsprop] [--ipus N] [--replicas R] [--device-iterations N]
 *                [--gradient-accumulation N] [--strategy pipelined|sharded|phased]
 *                [--block PREFIX:STAGE:IPU]... [--seed N] [--classes N]
 *
 * The harness compiles this file against each build's own public header and library
 * (ipuof/client.h and libipuof-client.so), so it uses only calls every build compared has
 * (the struct options of IPUOF_CLIENT_0.1 onwards), not the compile options handle.
 * Inputs: float (and float16) elements uniform in [-1, 1) from a xorshift seeded by the
 * input's index; integer inputs (class labels) in [0, --classes). Exit status 0, or 1
 * with the library's sentence on standard error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ipuof/client.h>

#define MAX_BLOCKS 16
#define MAX_INPUTS 16

struct drv_opts {
    const char *dir, *model, *loss, *optimizer;
    unsigned ipus, replicas, iterations, accumulation, classes;
    uint64_t seed;
    int strategy;
    struct ipuof_block blocks[MAX_BLOCKS];
    char prefixes[MAX_BLOCKS][64];
    size_t n_blocks;
};

static uint16_t
to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;

    if (exp <= 0)       /* |f| < 2^-14: the generator's values rarely are; flush to zero */
        return (uint16_t)sign;
    /* round to nearest even on the 13 dropped bits */
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

/* Fills t's bytes (t->bytes of them, malloc'd into *buf) from the generator seeded by k. */
static int
fill_input(struct ipuof_tensor *t, unsigned k, unsigned classes, void **buf)
{
    size_t es = ipuof_dtype_size(t->dtype), n = es != 0 ? t->bytes / es : 0;
    uint64_t s = 0x9e3779b97f4a7c15ull * (k + 1);
    unsigned char *p = malloc(t->bytes != 0 ? t->bytes : 1);

    if (p == NULL || es == 0)
        return free(p), -1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float f = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        int64_t c = (int64_t)((s >> 33) % (classes != 0 ? classes : 1));
        if (t->dtype == IPUOF_DTYPE_FLOAT) {
            memcpy(p + i * 4, &f, 4);
        } else if (t->dtype == IPUOF_DTYPE_FLOAT16) {
            uint16_t h = to_half(f);
            memcpy(p + i * 2, &h, 2);
        } else if (t->dtype == IPUOF_DTYPE_INT64) {
            memcpy(p + i * 8, &c, 8);
        } else if (t->dtype == IPUOF_DTYPE_INT32) {
            int32_t c32 = (int32_t)c;
            memcpy(p + i * 4, &c32, 4);
        } else {
            p[i * es] = (unsigned char)c;
            memset(p + i * es + 1, 0, es - 1);
        }
    }
    t->data = p;
    *buf = p;
    return 0;
}

/* Appends one tensor's description and bytes to f. */
static void
put_tensor(FILE *f, const struct ipuof_tensor *t, const void *data, size_t bytes)
{
    fprintf(f, "%s %d %d", t->name != NULL ? t->name : "", t->dtype, t->rank);
    for (int d = 0; d < t->rank; d++)
        fprintf(f, " %lld", (long long)t->dims[d]);
    fprintf(f, " %zu\n", bytes);
    fwrite(data, 1, bytes, f);
    fputc('\n', f);
}

static FILE *
open_in(const struct drv_opts *o, const char *name)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/%s", o->dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        perror(path);
    return f;
}

static int
fail(ipuof_client *c, const char *what, int rc)
{
    fprintf(stderr, "identity_drv: %s: %s (%s)\n", what, ipuof_strerror(rc),
            c != NULL ? ipuof_client_errmsg(c) : "");
    return 1;
}

/* Runs m once on generated inputs, then writes outputs.bin. */
static int
run_and_write_outputs(const struct drv_opts *o, ipuof_client *c, ipuof_model *m)
{
    size_t n = ipuof_model_input_count(m);
    struct ipuof_tensor in[MAX_INPUTS];
    void *bufs[MAX_INPUTS] = {0};
    int rc = n > MAX_INPUTS ? IPUOF_E_INVAL : IPUOF_OK;
    FILE *f = NULL;

    for (size_t i = 0; i < n && rc == IPUOF_OK; i++) {
        rc = ipuof_model_input_info(m, i, &in[i], NULL);
        if (rc == IPUOF_OK && fill_input(&in[i], (unsigned)i, o->classes, &bufs[i]) != 0)
            rc = IPUOF_E_NOMEM;
    }
    if (rc == IPUOF_OK)
        rc = ipuof_model_run(m, in, n);
    if (rc == IPUOF_OK && (f = open_in(o, "outputs.bin")) == NULL)
        rc = IPUOF_E_IO;
    for (size_t i = 0; rc == IPUOF_OK && i < ipuof_model_output_count(m); i++) {
        struct ipuof_tensor t;
        rc = ipuof_model_output(m, i, &t);
        if (rc == IPUOF_OK)
            put_tensor(f, &t, t.data, t.bytes);
    }
    if (f != NULL && fclose(f) != 0 && rc == IPUOF_OK)
        rc = IPUOF_E_IO;
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    return rc == IPUOF_OK ? 0 : fail(c, "run", rc);
}

/* Writes weights.bin: every weight the model lists, in its order. */
static int
write_weights(const struct drv_opts *o, ipuof_client *c, ipuof_model *m)
{
    FILE *f = open_in(o, "weights.bin");
    int rc = f != NULL ? IPUOF_OK : IPUOF_E_IO;

    for (size_t i = 0; rc == IPUOF_OK && i < ipuof_model_weight_count(m); i++) {
        struct ipuof_tensor t;
        int kind;
        rc = ipuof_model_weight_info(m, i, &t, &kind);
        size_t bytes = ipuof_dtype_size(t.dtype);
        for (int d = 0; rc == IPUOF_OK && d < t.rank; d++)
            bytes *= (size_t)t.dims[d];
        void *buf = rc == IPUOF_OK ? malloc(bytes != 0 ? bytes : 1) : NULL;
        if (rc == IPUOF_OK && buf == NULL)
            rc = IPUOF_E_NOMEM;
        if (rc == IPUOF_OK)
            rc = ipuof_model_read_weight(m, t.name, buf, bytes);
        if (rc == IPUOF_OK)
            put_tensor(f, &t, buf, bytes);
        free(buf);
    }
    if (f != NULL && fclose(f) != 0 && rc == IPUOF_OK)
        rc = IPUOF_E_IO;
    return rc == IPUOF_OK ? 0 : fail(c, "weights", rc);
}

/* predict.json and trace.json. */
static int
write_reports(const struct drv_opts *o, ipuof_client *c, ipuof_model *m)
{
    const char *r = ipuof_model_prediction_report(m, 1);
    char path[4096];
    FILE *f = open_in(o, "predict.json");

    if (f == NULL)
        return 1;
    fputs(r != NULL ? r : "(no prediction)\n", f);
    if (fclose(f) != 0)
        return 1;
    snprintf(path, sizeof(path), "%s/trace.json", o->dir);
    int rc = ipuof_model_write_trace(m, path);
    return rc == IPUOF_OK ? 0 : fail(c, "trace", rc);
}

static int
set_optimizer(struct ipuof_optimizer *opt, const char *name)
{
    static const struct { const char *name; int kind; } kinds[] = {
        {"sgd", IPUOF_OPTIMIZER_SGD}, {"momentum", IPUOF_OPTIMIZER_SGD},
        {"adam", IPUOF_OPTIMIZER_ADAM}, {"adamw", IPUOF_OPTIMIZER_ADAMW},
        {"lamb", IPUOF_OPTIMIZER_LAMB}, {"rmsprop", IPUOF_OPTIMIZER_RMSPROP},
    };

    memset(opt, 0, sizeof(*opt));
    if (name == NULL)
        return 0;           /* kind 0: PopTorch's default SGD */
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(name, kinds[i].name) != 0)
            continue;
        if (ipuof_optimizer_init(opt, kinds[i].kind) != IPUOF_OK)
            return -1;
        opt->lr = 0.01f;
        if (strcmp(name, "momentum") == 0) {
            opt->momentum = 0.9f;
            opt->weight_decay = 1e-4f;
        }
        return 0;
    }
    fprintf(stderr, "identity_drv: --optimizer is '%s'; it is sgd, momentum, adam, adamw, "
            "lamb or rmsprop\n", name);
    return -1;
}

static int
compile(const struct drv_opts *o, ipuof_client *c, ipuof_model **m)
{
    struct ipuof_model_opts mo = {0};
    struct ipuof_training_opts t = {0};
    int rc;

    mo.name = "identity";
    mo.device_iterations = o->iterations;
    mo.replicas = o->replicas;
    mo.no_cache = 1;
    rc = ipuof_model_opts_set_profile(&mo, 1);
    if (rc == IPUOF_OK && o->strategy != 0)
        rc = ipuof_model_opts_set_strategy(&mo, o->strategy);
    if (rc == IPUOF_OK && o->n_blocks != 0)
        rc = ipuof_model_opts_set_blocks(&mo, o->blocks, o->n_blocks);
    if (rc != IPUOF_OK)
        return fail(NULL, "options", rc);
    if (o->loss == NULL)
        rc = ipuof_model_compile_file(c, o->model, &mo, m);
    else {
        t.loss = o->loss;
        t.gradient_accumulation = o->accumulation;
        t.seed = o->seed;
        if (set_optimizer(&t.optimizer, o->optimizer) != 0)
            return 1;
        rc = ipuof_model_compile_training_file(c, o->model, &mo, &t, m);
    }
    return rc == IPUOF_OK ? 0 : fail(c, "compile", rc);
}

static int
parse_block(struct drv_opts *o, const char *v)
{
    const char *c1 = strchr(v, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    size_t k = o->n_blocks;

    if (c2 == NULL || k >= MAX_BLOCKS || (size_t)(c1 - v) >= sizeof(o->prefixes[0]))
        return -1;
    memcpy(o->prefixes[k], v, (size_t)(c1 - v));
    o->prefixes[k][c1 - v] = '\0';
    o->blocks[k].prefix = o->prefixes[k];
    o->blocks[k].stage = atoi(c1 + 1);
    o->blocks[k].ipu = (unsigned)atoi(c2 + 1);
    o->n_blocks++;
    return 0;
}

static int
parse(int argc, char **argv, struct drv_opts *o)
{
    static const char *const strategies[] = {"", "pipelined", "sharded", "phased"};

    if (argc < 3)
        return -1;
    o->dir = argv[1];
    o->model = argv[2];
    o->ipus = o->replicas = o->iterations = o->accumulation = 1;
    o->classes = 10;
    for (int i = 3; i + 1 < argc + 1; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return -1;
        if (strcmp(k, "--loss") == 0) o->loss = v;
        else if (strcmp(k, "--optimizer") == 0) o->optimizer = v;
        else if (strcmp(k, "--ipus") == 0) o->ipus = (unsigned)atoi(v);
        else if (strcmp(k, "--replicas") == 0) o->replicas = (unsigned)atoi(v);
        else if (strcmp(k, "--device-iterations") == 0) o->iterations = (unsigned)atoi(v);
        else if (strcmp(k, "--gradient-accumulation") == 0) o->accumulation = (unsigned)atoi(v);
        else if (strcmp(k, "--seed") == 0) o->seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "--classes") == 0) o->classes = (unsigned)atoi(v);
        else if (strcmp(k, "--block") == 0) {
            if (parse_block(o, v) != 0)
                return -1;
        } else if (strcmp(k, "--strategy") == 0) {
            o->strategy = -1;
            for (int s = 1; s < 4; s++)
                if (strcmp(v, strategies[s]) == 0)
                    o->strategy = s;
            if (o->strategy < 0)
                return -1;
        } else
            return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    struct drv_opts o = {0};
    struct ipuof_attach_opts ao = {0};
    ipuof_model *m = NULL;
    int rc = 1;

    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: identity_drv DIR MODEL.onnx [--loss NAME] [--optimizer K] "
                "[--ipus N] [--replicas R] [--device-iterations N] "
                "[--gradient-accumulation N] [--strategy S] [--block P:S:I]... [--seed N] "
                "[--classes N]\n");
        return 64;
    }
    ipuof_client *c = ipuof_client_new();
    const char *server = getenv("IPUOF_SERVER");
    ao.num_ipus = o.ipus;
    if (c == NULL || ipuof_client_connect(c, server) != IPUOF_OK ||
        ipuof_attach(c, &ao, NULL, 0, NULL) != IPUOF_OK) {
        fail(c, "connect and attach", c != NULL ? ipuof_client_last_error(c, NULL, NULL,
                                                                           NULL) : 0);
        goto out;
    }
    if (compile(&o, c, &m) != 0 || run_and_write_outputs(&o, c, m) != 0)
        goto out;
    if (o.loss != NULL && write_weights(&o, c, m) != 0)
        goto out;
    rc = write_reports(&o, c, m);
out:
    ipuof_model_free(m);
    ipuof_client_free(c);
    return rc;
}
