/*
 * test_sim_isa.c — the instruction-set level of the simulator's kernels (sim/kernels/hot.h,
 * sim/kernels/isa.c): IPUOF_SIM_ISA read once per process, capped by the CPU, refused when it is not
 * a level (by sim_isa_check and sim_compile, naming the accepted values), oneDNN capped with
 * it, the kernels' dispatchers calling the copy of the level; and the kernels giving the
 * same bits at every level this CPU has.
 *
 * The level is fixed once per process, so each value runs in a child: this program run
 * again with --child and the variable set. A child reports its level, the copy a
 * dispatcher calls, oneDNN's effective ISA, the errors of sim_isa_check and sim_compile,
 * and (--child work) a hash of every activation kind over 65 536 floats and of the
 * outputs, weights and gradients of an inference run, an SGD step over 2 replicas and an
 * Adam step of a small CNN on the hand-written kernels (IPUOF_SIM_CONV=own: oneDNN's
 * kernels differ by ISA and are compared with the hand-written ones within 1e-5 by
 * test_sim_conv_dnnl instead).
 * The process itself checks that its level is what its environment asks for: tests/run.sh
 * runs the simulator's tests once per level, and this is what makes a capped pass capped.
 *
 *   test_sim_isa --levels     prints the level in use, then the lower ones this build has
 *                             copies for ("avx512 avx2 baseline"): tests/run.sh's passes
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "act.h"
#include "hot.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT

/* ---- the child ------------------------------------------------------------------------ */

static uint64_t hash = 1469598103934665603ull;     /* FNV-1a over every result */

static void
hash_bytes(const void *p, size_t n)
{
    const unsigned char *c = p;

    for (size_t i = 0; i < n; i++)
        hash = (hash ^ c[i]) * 1099511628211ull;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float
urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void
init_rand(struct sim_ob *b, const char *name, int rank, const int64_t *d, float scale)
{
    int64_t n = 1;
    float *v;

    for (int i = 0; i < rank; i++)
        n *= d[i];
    v = malloc((size_t)n * sizeof(float));
    if (v == NULL)
        exit(3);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * urand();
    sim_ob_initializer(b, name, F32, rank, d, v);
    free(v);
}

/* A small CNN over the hand-written kernels: im2col 3x3 + Relu, depthwise 3x3 + SiLU,
 * pointwise + residual Add + LeakyRelu, MaxPool, AveragePool, GlobalAveragePool, Gemm,
 * Tanh; loss = ReduceSum(y * r). NULL when it does not load. */
static struct sim_model *
small_cnn(void)
{
    struct sim_ob *b = sim_ob_new(13);
    static const int64_t pads[4] = { 1, 1, 1, 1 }, k2[2] = { 2, 2 }, k3[2] = { 3, 3 };
    static const int64_t s1[2] = { 1, 1 };
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    sim_ob_input(b, "x", F32, 4, (const int64_t[]){ 2, 8, 12, 12 });
    init_rand(b, "w1", 4, (const int64_t[]){ 16, 8, 3, 3 }, 0.3f);
    init_rand(b, "b1", 1, (const int64_t[]){ 16 }, 0.1f);
    init_rand(b, "w2", 4, (const int64_t[]){ 16, 1, 3, 3 }, 0.5f);
    init_rand(b, "w3", 4, (const int64_t[]){ 8, 16, 1, 1 }, 0.3f);
    init_rand(b, "b3", 1, (const int64_t[]){ 8 }, 0.1f);
    init_rand(b, "wg", 2, (const int64_t[]){ 8, 10 }, 0.5f);
    init_rand(b, "bg", 1, (const int64_t[]){ 10 }, 0.1f);
    init_rand(b, "r", 2, (const int64_t[]){ 2, 10 }, 1.0f);
    sim_ob_node(b, "Conv", "c1", "x,w1,b1", "t1");
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_node(b, "Relu", "relu", "t1", "t2");
    sim_ob_node(b, "Conv", "c2", "t2,w2", "t3");
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_attr_int(b, "group", 16);
    sim_ob_node(b, "Sigmoid", "sig", "t3", "t4");
    sim_ob_node(b, "Mul", "silu", "t3,t4", "t5");
    sim_ob_node(b, "Conv", "c3", "t5,w3,b3", "t6");
    sim_ob_node(b, "Add", "res", "t6,x", "t7");
    sim_ob_node(b, "LeakyRelu", "leaky", "t7", "t8");
    sim_ob_attr_float(b, "alpha", 0.1f);
    sim_ob_node(b, "MaxPool", "maxpool", "t8", "t9");
    sim_ob_attr_ints(b, "kernel_shape", k2, 2);
    sim_ob_attr_ints(b, "strides", k2, 2);
    sim_ob_node(b, "AveragePool", "avgpool", "t9", "t10");
    sim_ob_attr_ints(b, "kernel_shape", k3, 2);
    sim_ob_attr_ints(b, "strides", s1, 2);
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_node(b, "GlobalAveragePool", "gap", "t10", "t11");
    sim_ob_node(b, "Flatten", "flat", "t11", "t12");
    sim_ob_node(b, "Gemm", "fc", "t12,wg,bg", "t13");
    sim_ob_node(b, "Tanh", "tanh", "t13", "y");
    sim_ob_node(b, "Mul", "weigh", "y,r", "yr");
    sim_ob_node(b, "ReduceSum", "total", "yr", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "loss", F32);
    if (sim_ob_serialize(b, &bytes, &len) == 0 && sim_model_load(bytes, len, &m, &err) != 0)
        printf("error: the model does not load: %s\n", err.msg);
    free(bytes);
    sim_ob_free(b);
    return m;
}

static const char *const weights[] = { "w1", "b1", "w2", "w3", "b3", "wg", "bg" };

/* Compiles m (inference, or training with optimizer opt over `replicas`), runs it on
 * random inputs and hashes its outputs and, training, its weights and gradients. */
static int
run_hashed(const struct sim_model *m, int opt, unsigned replicas)
{
    static const char *frozen[] = { "r" };
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    int rc;

    sim_compile_opts_init(&o);
    o.replicas = replicas;
    o.partition_ipus = replicas;
    if (opt != 0) {
        o.loss = "loss";
        sim_optimizer_init(&o.optimizer, opt);
        o.optimizer.lr = 0.05f;
        o.frozen_weights = frozen;
        o.n_frozen_weights = 1;
    }
    rc = sim_compile(m, &o, &e, &err);
    for (size_t i = 0; rc == 0 && i < sim_exe_input_count(e); i++) {
        struct sim_io_info info;
        float *x = sim_exe_input_buffer(e, i);
        sim_exe_input_info(e, i, &info);
        for (size_t k = 0; k < info.run_bytes / sizeof(float); k++)
            x[k] = 2.0f * urand();
    }
    for (int step = 0; rc == 0 && step < 2; step++)
        rc = sim_exe_run(e, &err);
    for (size_t i = 0; rc == 0 && i < sim_exe_output_count(e); i++) {
        struct sim_io_info info;
        sim_exe_output_info(e, i, &info);
        hash_bytes(sim_exe_output_buffer(e, i), info.run_bytes);
    }
    for (size_t i = 0; rc == 0 && opt != 0 && i < sizeof(weights) / sizeof(weights[0]); i++) {
        float buf[16 * 8 * 9];
        struct sim_weight_info wi;
        rc = sim_exe_weight_info(e, (size_t)sim_exe_weight_index(e, weights[i]), &wi);
        if (rc == 0 && wi.bytes <= sizeof(buf))
            rc = sim_exe_read_weight(e, weights[i], buf, wi.bytes, &err);
        if (rc == 0)
            hash_bytes(buf, wi.bytes);
        if (rc == 0)
            rc = sim_exe_read_gradient(e, weights[i], buf, wi.bytes, &err);
        if (rc == 0)
            hash_bytes(buf, wi.bytes);
    }
    if (rc != 0)
        printf("error: %s run: %s\n", opt == 0 ? "inference" : "training", err.msg);
    sim_exe_free(e);
    return rc;
}

/* --child [work]: reports this process's level (see the header comment). */
static int
child_main(bool work)
{
    struct sim_err err = { 0 }, cerr = { 0 };
    struct sim_model *m;
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    char desc[256];
    int rc = sim_isa_check(&err), crc;

    printf("rc %d level %d cpu %d probe %d dispatch %d dnnl %#x\n", rc, (int)sim_isa_current(),
           (int)sim_isa_cpu_best(), sim_isa_probe(), sim_isa_dispatches(),
           (unsigned)dnnl_get_effective_cpu_isa());
    printf("check: %s\n", rc != 0 ? err.msg : "ok");
    printf("describe: %s\n", sim_isa_describe(desc, sizeof(desc)));
    m = small_cnn();
    if (m == NULL)
        return 1;
    sim_compile_opts_init(&o);
    crc = sim_compile(m, &o, &e, &cerr);
    printf("compile %d: %s\n", crc, crc != 0 ? cerr.msg : "ok");
    sim_exe_free(e);
    if (work && crc == 0) {
        static const float specials[] = { 0.0f, -0.0f, 1e-30f, -1e-30f, 88.5f, -88.5f,
                                          100.0f, -100.0f, 3.0f, -3.0f, INFINITY, -INFINITY };
        enum { N = 65536 };
        float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
        if (x == NULL || y == NULL)
            return 1;
        for (size_t i = 0; i < N; i++)
            x[i] = i < sizeof(specials) / sizeof(specials[0]) ? specials[i] : 12.0f * urand();
        for (int k = SIM_ACT_RELU; k < SIM_ACT_KINDS; k++) {
            struct sim_act a = { k, k == SIM_ACT_CLIP ? -1.5f : 0.2f,
                                 k == SIM_ACT_CLIP ? 6.0f : 0.5f };
            sim_act_range(&a, x, y, 0, N - 3);      /* blocks and a tail */
            hash_bytes(y, (N - 3) * sizeof(float));
        }
        free(x);
        free(y);
        if (run_hashed(m, 0, 1) != 0 || run_hashed(m, SIM_OPT_SGD, 2) != 0 ||
            run_hashed(m, SIM_OPT_ADAM, 1) != 0)
            return 1;
        printf("hash %016llx\n", (unsigned long long)hash);
    }
    sim_model_free(m);
    return 0;
}

/* ---- the parent ----------------------------------------------------------------------- */

struct report {
    int rc, level, cpu, probe, dispatch, compile_rc;
    unsigned dnnl;
    char check[2048], describe[2048], compile[2048];
    unsigned long long hash;
};

/* Runs this program with --child [work] and IPUOF_SIM_ISA = value (NULL: unset), the
 * hand-written convolutions forced; fills *r from its report. */
static void
run_child(const char *value, bool work, struct report *r)
{
    char out[8192], line[2048];
    size_t n = 0;
    int fd[2], status;
    pid_t pid;
    FILE *f;

    memset(r, 0, sizeof(*r));
    assert_int_equal(pipe(fd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (value != NULL)
            setenv("IPUOF_SIM_ISA", value, 1);
        else
            unsetenv("IPUOF_SIM_ISA");
        setenv("IPUOF_SIM_CONV", "own", 1);
        setenv("IPUOF_SIM_CONV_BWD", "own", 1);
        execl("/proc/self/exe", "test_sim_isa", "--child", work ? "work" : "", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    f = fdopen(fd[0], "r");
    assert_non_null(f);
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("IPUOF_SIM_ISA=%s: the child failed (status %d): %s",
                 value ? value : "(unset)", status, out);
    for (char *p = out, *nl; *p != '\0'; p = nl + 1) {
        nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        snprintf(line, sizeof(line), "%.*s", (int)(nl - p), p);
        if (sscanf(line, "rc %d level %d cpu %d probe %d dispatch %d dnnl %x", &r->rc,
                   &r->level, &r->cpu, &r->probe, &r->dispatch, &r->dnnl) == 6)
            continue;
        if (strncmp(line, "check: ", 7) == 0)
            snprintf(r->check, sizeof(r->check), "%s", line + 7);
        else if (strncmp(line, "describe: ", 10) == 0)
            snprintf(r->describe, sizeof(r->describe), "%s", line + 10);
        else if (sscanf(line, "compile %d:", &r->compile_rc) == 1)
            snprintf(r->compile, sizeof(r->compile), "%s", strchr(line, ':') + 2);
        else if (sscanf(line, "hash %llx", &r->hash) != 1)
            fail_msg("IPUOF_SIM_ISA=%s: the child said: %s", value ? value : "(unset)", line);
    }
}

/* oneDNN's ISA for a level (isa.c's table). */
static unsigned
dnnl_of(int level)
{
    return level == SIM_ISA_BASELINE ? dnnl_cpu_isa_sse41
           : level == SIM_ISA_AVX2  ? dnnl_cpu_isa_avx2
                                    : dnnl_cpu_isa_avx512_core;
}

/* Every spelling: unset and empty (the CPU's best), each level in any case, a level above
 * the CPU's, and values that are not levels. */
static void
test_values(void **state)
{
    static const char *const values[] = { NULL, "", "baseline", "AVX2", "avx2", "avx512",
                                          "default", "sse2", "avx2 " };
    int cpu = (int)sim_isa_cpu_best();

    (void)state;
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        const char *v = values[i];
        int cap = 0, want;
        struct report r;
        for (int l = SIM_ISA_BASELINE; v != NULL && l <= SIM_ISA_AVX512; l++)
            if (strcasecmp(v, sim_isa_name((enum sim_isa)l)) == 0)
                cap = l;
        want = cap != 0 && cap < cpu ? cap : cpu;
        run_child(v, false, &r);
        printf("  IPUOF_SIM_ISA=%-9s -> %s\n", v ? v : "(unset)", r.describe);
        assert_int_equal(r.cpu, cpu);
        assert_int_equal(r.level, want);
        if (r.dispatch)
            assert_int_equal(r.probe, want);    /* the dispatchers call the level's copy */
        if (v == NULL || *v == '\0' || cap != 0) {
            assert_int_equal(r.rc, 0);
            assert_int_equal(r.compile_rc, 0);
        } else {
            /* refused by both, with the value and the accepted ones named */
            assert_int_equal(r.rc, IPUOF_E_INVAL);
            assert_int_equal(r.compile_rc, IPUOF_E_INVAL);
            assert_non_null(strstr(r.check, v));
            assert_non_null(strstr(r.check, "use baseline, avx2 or avx512"));
            assert_string_equal(r.compile, r.check);
            assert_non_null(strstr(r.describe, "is not a level"));
        }
        if (cap != 0) {
            /* oneDNN dispatches to nothing above the level (its ISAs are bit sets) */
            assert_int_equal(r.dnnl & ~dnnl_of(want), 0);
            assert_non_null(strstr(r.describe, cap > cpu ? "is above this CPU's best"
                                                         : "IPUOF_SIM_ISA="));
        }
    }
}

/* The kernels give the same bits at every level this CPU has. */
static void
test_same_bits(void **state)
{
    struct report first, r;
    int cpu = (int)sim_isa_cpu_best();

    (void)state;
    run_child("baseline", true, &first);
    assert_int_equal(first.level, SIM_ISA_BASELINE);
    printf("  baseline: hash %016llx\n", first.hash);
    for (int l = SIM_ISA_AVX2; l <= cpu; l++) {
        run_child(sim_isa_name((enum sim_isa)l), true, &r);
        assert_int_equal(r.level, l);
        printf("  %-8s: hash %016llx%s\n", sim_isa_name((enum sim_isa)l), r.hash,
               r.dispatch ? "" : " (this build has one copy of each kernel)");
        if (r.hash != first.hash)
            fail_msg("the kernels at %s give other bits than at baseline",
                     sim_isa_name((enum sim_isa)l));
    }
}

/* This process runs at the level its environment asks for, and keeps it. */
static void
test_this_process(void **state)
{
    const char *v = getenv("IPUOF_SIM_ISA");
    int cap = 0, cpu = (int)sim_isa_cpu_best(), want;
    char desc[256];

    (void)state;
    for (int l = SIM_ISA_BASELINE; v != NULL && l <= SIM_ISA_AVX512; l++)
        if (strcasecmp(v, sim_isa_name((enum sim_isa)l)) == 0)
            cap = l;
    want = cap != 0 && cap < cpu ? cap : cpu;
    assert_int_equal(sim_isa_check(NULL), v == NULL || *v == '\0' || cap != 0 ? 0
                                                                              : IPUOF_E_INVAL);
    assert_int_equal(sim_isa_current(), want);
    if (sim_isa_dispatches())
        assert_int_equal(sim_isa_probe(), want);
    printf("  this process: %s\n", sim_isa_describe(desc, sizeof(desc)));
    setenv("IPUOF_SIM_ISA", want == SIM_ISA_BASELINE ? "avx2" : "baseline", 1);
    assert_int_equal(sim_isa_current(), want);      /* fixed once */
    if (v != NULL)
        setenv("IPUOF_SIM_ISA", v, 1);
    else
        unsetenv("IPUOF_SIM_ISA");
}

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_same_bits),
        cmocka_unit_test(test_this_process),
    };

    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc > 2 && strcmp(argv[2], "work") == 0);
    if (argc > 1 && strcmp(argv[1], "--levels") == 0) {
        /* for tests/run.sh: the level in use, then those below it that this build has
         * copies for (lowest last); an invalid IPUOF_SIM_ISA is refused here too */
        struct sim_err err;
        if (sim_isa_check(&err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        printf("%s", sim_isa_name(sim_isa_current()));
        for (int l = (int)sim_isa_current() - 1; sim_isa_dispatches() && l >= SIM_ISA_BASELINE;
             l--)
            printf(" %s", sim_isa_name((enum sim_isa)l));
        printf("\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
