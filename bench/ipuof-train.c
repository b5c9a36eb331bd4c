/*
 * ipuof-train — the tutorial's training call in-process (bench/README.md "Training in
 * process"): PopTorch's MNIST tutorial network (tools/util/mnist_model.c, seed 7) compiled
 * for training with AdamW (lr 0.001) at micro-batch B x gradient accumulation A x device
 * iterations D (ipuof-mnist's 40 x 10 x 10 by default), fed fixed pseudo-random images and
 * labels, run CALLS times after one untimed call:
 *
 *   ipuof-train [CALLS [B A D]]
 *       -> "calls=N samples_s=S cpu_s=C wall_s=W threads=T isa=LEVEL weights_hash=H
 *           ipu_bytes=M"
 *
 * samples_s is samples per wall second over the timed calls, cpu_s the CPU seconds of the
 * whole process per call (CLOCK_PROCESS_CPUTIME_ID: cpu_s / wall per call is how many cores
 * the calls kept busy), threads the simulator's pool size (IPUOF_SIM_THREADS sets it).
 * weights_hash is a 64-bit FNV-1a hash of every trained weight's bytes after the last
 * call: the same hash from two builds or pool sizes means the same bits. ipu_bytes is the
 * simulated IPU's memory total (sim_exe_memory), which must not depend on the host either.
 *
 * IPUOF_TRAIN_STRATEGY=pipelined|sharded|phased places the tutorial's four blocks on 4
 * IPUs as ipuof-mnist --strategy does (default: one IPU): CPU seconds per call against one
 * IPU's say whether a split costs more work or leaves cores idle.
 *
 * With IPUOF_SIM_PROFILE=1 it also prints each node's host milliseconds per call, forward
 * and backward (sim_exe_node_times), largest first.
 *
 * Built by hand against a build's simulator library (see bench/README.md):
 *   cc -std=c11 -O2 -D_GNU_SOURCE -Isim -Isim/kernels -Itools/util -Ibuild/gen -Iclient/include \
 *      bench/ipuof-train.c tools/util/mnist_model.c tools/util/mnist_feed.c build/lib/libipuofsim.a \
 *      -lprotobuf-c -lz -lopenblas -ldnnl -lgomp -lm -pthread -o build/bench/ipuof-train
 * Exit status 0, or 1 with a sentence on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mnist_model.h"
#include "pool.h"
#include "sim.h"
#include "sim_int.h"

/* The tutorial's blocks B1..B4, one stage and IPU each (as ipuof-mnist and test_sim_multi
 * give them; mnist_model.c's node names). */
static const struct sim_block_opt tutorial_stages[] = {
    { "/model/layer1/", 0, 0 }, { "/model/layer2/", 1, 1 }, { "/model/Flatten", 2, 2 },
    { "/model/layer3", 2, 2 }, { "/model/layer4/", 3, 3 }, { "/loss/", 3, 3 },
};

/* o's strategy from IPUOF_TRAIN_STRATEGY; 0, or -1 with a sentence on stderr. */
static int
set_strategy(struct sim_compile_opts *o)
{
    static const char *const names[] = { "pipelined", "sharded", "phased" };
    static const int kinds[] = { SIM_STRATEGY_PIPELINED, SIM_STRATEGY_SHARDED,
                                 SIM_STRATEGY_PHASED };
    const char *v = getenv("IPUOF_TRAIN_STRATEGY");

    if (v == NULL || *v == '\0' || strcmp(v, "single") == 0)
        return 0;
    for (int i = 0; i < 3; i++)
        if (strcmp(v, names[i]) == 0) {
            o->strategy = kinds[i];
            o->blocks = tutorial_stages;
            o->n_blocks = sizeof(tutorial_stages) / sizeof(tutorial_stages[0]);
            return 0;
        }
    fprintf(stderr, "ipuof-train: IPUOF_TRAIN_STRATEGY must be single, pipelined, sharded or "
                    "phased, not '%s'\n", v);
    return -1;
}

static int
by_time(const void *a, const void *b)
{
    const struct sim_node_time *x = a, *y = b;
    uint64_t tx = x->ns[0] + x->ns[1], ty = y->ns[0] + y->ns[1];

    return tx < ty ? 1 : tx > ty ? -1 : 0;
}

static void
print_node_times(const struct sim_exe *e, int calls)
{
    size_t cap = sim_exe_node_count(e) + 1, n;
    struct sim_node_time *rows = calloc(cap, sizeof(*rows));

    if (rows == NULL || (n = sim_exe_node_times(e, rows, cap)) == 0) {
        free(rows);
        return;
    }
    qsort(rows, n, sizeof(*rows), by_time);
    printf("host ms per call by node (forward, backward; the pool's help included):\n");
    for (size_t i = 0; i < n; i++)
        printf("  %-20s %-28s %9.3f %9.3f\n", rows[i].op, rows[i].label,
               (double)rows[i].ns[0] / 1e6 / calls, (double)rows[i].ns[1] / 1e6 / calls);
    free(rows);
}

/* FNV-1a over every trained weight's bytes; 0 on error. */
static unsigned long long
weights_hash(struct sim_exe *e)
{
    unsigned long long h = 14695981039346656037u;
    struct sim_weight_info wi;
    struct sim_err err;

    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        unsigned char *b;
        if (sim_exe_weight_info(e, i, &wi) != 0 || (b = malloc(wi.bytes)) == NULL)
            return 0;
        if (sim_exe_read_weight(e, wi.name, b, wi.bytes, &err) != 0) {
            free(b);
            return 0;
        }
        for (size_t k = 0; k < wi.bytes; k++)
            h = (h ^ b[k]) * 1099511628211u;
        free(b);
    }
    return h;
}

int
main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 20;
    unsigned B = argc > 4 ? (unsigned)atoi(argv[2]) : 40, A = argc > 4 ? (unsigned)atoi(argv[3]) : 10,
             D = argc > 4 ? (unsigned)atoi(argv[4]) : 10;
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;
    struct sim_mem_report mem;
    void *bytes;
    size_t len;
    double w0, c0, w1, c1;

    if ((argc != 1 && argc != 2 && argc != 5) || calls < 1 || B < 1 || A < 1 || D < 1) {
        fprintf(stderr, "usage: ipuof-train [CALLS [MICRO_BATCH ACCUMULATION ITERATIONS]] "
                        "(positive numbers)\n");
        return 1;
    }
    if (mnist_model_build(7, &bytes, &len) != 0 || sim_model_load(bytes, len, &m, &err) != 0) {
        fprintf(stderr, "ipuof-train: cannot build the tutorial model\n");
        return 1;
    }
    free(bytes);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.micro_batch = B;
    o.gradient_accumulation = A;
    o.device_iterations = D;
    sim_optimizer_init(&o.optimizer, SIM_OPT_ADAMW);
    o.optimizer.lr = 0.001f;
    if (set_strategy(&o) != 0)
        return 1;
    if (sim_compile(m, &o, &e, &err) != 0) {
        fprintf(stderr, "ipuof-train: compile: %s\n", err.msg);
        return 1;
    }
    mnist_fill_inputs(e);      /* images in [0, 1), labels 0..9 */
    if (sim_exe_run(e, &err) != 0) {
        fprintf(stderr, "ipuof-train: run: %s\n", err.msg);
        return 1;
    }
    w0 = sim_now_s(CLOCK_MONOTONIC);
    c0 = sim_now_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < calls; i++)
        if (sim_exe_run(e, &err) != 0) {
            fprintf(stderr, "ipuof-train: run: %s\n", err.msg);
            return 1;
        }
    c1 = sim_now_s(CLOCK_PROCESS_CPUTIME_ID);
    w1 = sim_now_s(CLOCK_MONOTONIC);
    if (sim_exe_memory(e, 0, &mem) != 0)
        mem.total = 0;
    printf("calls=%d samples_s=%.0f cpu_s=%.5f wall_s=%.5f threads=%d isa=%s "
           "weights_hash=%016llx ipu_bytes=%llu\n",
           calls, (double)calls * B * A * D / (w1 - w0), (c1 - c0) / calls, (w1 - w0) / calls,
           sim_pool_threads(), sim_isa_name(sim_isa_current()), weights_hash(e),
           (unsigned long long)mem.total);
    print_node_times(e, calls + 1);
    sim_exe_free(e);
    sim_model_free(m);
    return 0;
}
