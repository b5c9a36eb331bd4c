/*
 * ipuof-cpu — CPU seconds of one in-process inference step (bench/models.py builds and runs
 * it): loads FILE.onnx with the simulator library, compiles it for micro-batch B (one device
 * iteration), fills the input with fixed values, runs it ROUNDS times and prints the least
 * CPU time (all threads of the process, CLOCK_PROCESS_CPUTIME_ID) and wall time of a run:
 *
 *   ipuof-cpu FILE.onnx B ROUNDS [LOSS]
 *       ->  "cpu_s=C wall_s=W wall_rest_s=T load_s=L compile_s=P isa=LEVEL out_hash=H"
 *
 * isa is the instruction set the simulator's kernels ran with (IPUOF_SIM_ISA caps it; see
 * sim/kernels/hot.h). out_hash is a 64-bit FNV-1a hash of the outputs' bytes after the last run:
 * two builds or settings that print the same hash computed the same bits.
 *
 * wall_rest_s is the wall time of runs 2..ROUNDS together (0 with one round): with ROUNDS =
 * the daemon's device iterations + 1 it is the in-process side of bench/models.py's
 * daemon-vs-in-process comparison (the daemon keeps a compiled executable, and its memory,
 * from one call to the next, so its steps run on memory already touched, as these do).
 *
 * With LOSS (the name of a graph output) the step is a training step instead: forward,
 * backward and one SGD update (lr 0.01), as bench/conv_shapes.py --train times it.
 *
 * With IPUOF_SIM_PROFILE=1 in the environment it also prints where the host time of a run
 * goes, by op type (sim_exe_node_times: forward and backward milliseconds per run, the
 * nodes of the type, the share of the kernels' total), largest first.
 *
 * CPU time is what the kernels cost, and moves far less than wall time when other
 * processes share the machine. IPUOF_SIM_THREADS=1 gives the one-thread figure.
 * Exit status 0, or 1 with a sentence on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "half.h"
#include "sim.h"
#include "sim_int.h"

/* The whole file into a malloc'd buffer (*len bytes), or NULL. */
static void *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n);
        if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        *len = (size_t)n;
    }
    fclose(f);
    return buf;
}

struct op_sum {
    const char *op;
    int nodes;
    uint64_t ns[2];
};

static int
by_total(const void *a, const void *b)
{
    const struct op_sum *x = a, *y = b;
    uint64_t tx = x->ns[0] + x->ns[1], ty = y->ns[0] + y->ns[1];

    return tx < ty ? 1 : tx > ty ? -1 : 0;
}

/* The host time of e's runs by op type, per run of `runs`; nothing when not recorded. */
static void
print_op_times(const struct sim_exe *e, int runs)
{
    size_t cap = sim_exe_node_count(e) + 1, n, k = 0;
    struct sim_node_time *rows = calloc(cap, sizeof(*rows));
    struct op_sum *sum = calloc(cap, sizeof(*sum));
    uint64_t total = 0;

    if (rows == NULL || sum == NULL)
        goto out;
    n = sim_exe_node_times(e, rows, cap);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && strcmp(sum[j].op, rows[i].op) != 0)
            j++;
        if (j == k) {
            sum[k].op = rows[i].op;
            k++;
        }
        sum[j].nodes++;
        sum[j].ns[0] += rows[i].ns[0];
        sum[j].ns[1] += rows[i].ns[1];
        total += rows[i].ns[0] + rows[i].ns[1];
    }
    if (k == 0 || total == 0)
        goto out;
    qsort(sum, k, sizeof(*sum), by_total);
    printf("host time of a run by op type (%d runs, %zu nodes; the pool's help included):\n",
           runs, n);
    printf("  %-22s %6s %12s %12s %7s\n", "op", "nodes", "forward ms", "backward ms",
           "share");
    for (size_t j = 0; j < k; j++)
        printf("  %-22s %6d %12.2f %12.2f %6.1f%%\n", sum[j].op, sum[j].nodes,
               (double)sum[j].ns[0] / 1e6 / runs, (double)sum[j].ns[1] / 1e6 / runs,
               100.0 * (double)(sum[j].ns[0] + sum[j].ns[1]) / (double)total);
out:
    free(rows);
    free(sum);
}

int
main(int argc, char **argv)
{
    struct sim_model *m = NULL;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;
    double t0, t1, t2, best_cpu = 1e30, best_wall = 1e30, rest_wall = 0;
    size_t len = 0;
    void *bytes;
    int rounds, rc = 1;
    unsigned long long hash = 14695981039346656037u;

    if (argc < 4 || argc > 5 || atoi(argv[2]) < 1 || (rounds = atoi(argv[3])) < 1) {
        fprintf(stderr, "usage: ipuof-cpu FILE.onnx MICRO_BATCH ROUNDS [LOSS]\n");
        return 1;
    }
    bytes = read_file(argv[1], &len);
    if (bytes == NULL) {
        fprintf(stderr, "ipuof-cpu: cannot read %s\n", argv[1]);
        return 1;
    }
    t0 = sim_now_s(CLOCK_MONOTONIC);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        goto fail;
    t1 = sim_now_s(CLOCK_MONOTONIC);
    sim_compile_opts_init(&o);
    o.micro_batch = (unsigned)atoi(argv[2]);
    if (argc == 5)
        o.loss = argv[4];
    if (sim_compile(m, &o, &e, &err) != 0)
        goto fail;
    t2 = sim_now_s(CLOCK_MONOTONIC);
    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info info;
        char *in = sim_exe_input_buffer(e, i);
        if (sim_exe_input_info(e, i, &info) != 0)
            continue;
        memset(in, 0, info.run_bytes);
        if (info.dtype == SIM_DTYPE_FLOAT)
            for (size_t k = 0; k < info.run_bytes / sizeof(float); k++)
                ((float *)(void *)in)[k] = (float)((k * 2654435761u) % 1000u) / 1000.0f - 0.5f;
        if (info.dtype == SIM_DTYPE_FLOAT16)    /* the same values, as float16 */
            for (size_t k = 0; k < info.run_bytes / sizeof(uint16_t); k++)
                ((uint16_t *)(void *)in)[k] = sim_half_from_float(
                    (float)((k * 2654435761u) % 1000u) / 1000.0f - 0.5f);
    }
    for (int r = 0; r < rounds; r++) {
        double w = sim_now_s(CLOCK_MONOTONIC), c = sim_now_s(CLOCK_PROCESS_CPUTIME_ID);
        if (sim_exe_run(e, &err) != 0)
            goto fail;
        c = sim_now_s(CLOCK_PROCESS_CPUTIME_ID) - c;
        w = sim_now_s(CLOCK_MONOTONIC) - w;
        best_cpu = c < best_cpu ? c : best_cpu;
        best_wall = w < best_wall ? w : best_wall;
        rest_wall += r > 0 ? w : 0.0;
    }
    for (size_t i = 0; i < sim_exe_output_count(e); i++) {
        struct sim_io_info info;
        const unsigned char *out = sim_exe_output_buffer(e, i);
        if (sim_exe_output_info(e, i, &info) != 0 || out == NULL)
            continue;
        for (size_t k = 0; k < info.run_bytes; k++)
            hash = (hash ^ out[k]) * 1099511628211u;
    }
    printf("cpu_s=%.4f wall_s=%.4f wall_rest_s=%.4f load_s=%.3f compile_s=%.3f isa=%s "
           "out_hash=%016llx\n", best_cpu, best_wall, rest_wall, t1 - t0, t2 - t1,
           sim_isa_name(sim_isa_current()), (unsigned long long)hash);
    print_op_times(e, rounds);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "ipuof-cpu: %s\n", err.msg);
out:
    sim_exe_free(e);
    sim_model_free(m);
    free(bytes);
    return rc;
}
