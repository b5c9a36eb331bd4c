/*
 * ipuof-act — the activation kernels' speed (sim/kernels/act.c), for choosing a kernel by
 * measurement: for each kind named (sigmoid, silu, relu, hswish), sim_act_range over N floats
 * (default 1 << 20, efficientnet_b0's largest SiLU at batch 8 is 3.2 M) spread over
 * [-8, 8], ROUNDS times (default 50) on one thread; prints the least nanoseconds per element
 * and the instruction set the kernels ran with:
 *
 *   ipuof-act [N [ROUNDS]]   ->  "isa=LEVEL kind=silu n=N ns_per_elem=T bits=H" per kind
 *
 * bits is a hash (FNV-1a) of the output's bits: two builds or two levels that print the
 * same hash computed the same floats.
 *
 * IPUOF_SIM_ISA=baseline|avx2|avx512 caps the level (sim/kernels/hot.h); run two levels alternately
 * to compare them on a busy machine. Build:
 *   cc -std=c11 -O2 -D_GNU_SOURCE -Iclient/include -Isim -Isim/kernels -o build/bench/ipuof-act \
 *      bench/ipuof-act.c build/lib/libipuofsim.a -lprotobuf-c -lz -lopenblas -ldnnl \
 *      -lgomp -lm -pthread
 * Exit status 0, or 1 with a sentence on stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "act.h"
#include "sim.h"

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
    static const struct { const char *name; int kind; float a, b; } kinds[] = {
        { "sigmoid", SIM_ACT_SIGMOID, 0, 0 },
        { "silu", SIM_ACT_SILU, 0, 0 },
        { "relu", SIM_ACT_RELU, 0, 0 },
        { "hswish", SIM_ACT_HSWISH, 1.0f / 6.0f, 0.5f },
    };
    long n = argc > 1 ? atol(argv[1]) : 1L << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 50;
    float *x, *y;
    char isa[160];
    struct sim_err err;

    if (n <= 0 || rounds <= 0) {
        fprintf(stderr, "ipuof-act: N and ROUNDS must be positive (usage: ipuof-act [N "
                        "[ROUNDS]])\n");
        return 1;
    }
    if (sim_isa_check(&err) != 0) {
        fprintf(stderr, "ipuof-act: %s\n", err.msg);
        return 1;
    }
    x = malloc((size_t)n * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    if (x == NULL || y == NULL) {
        fprintf(stderr, "ipuof-act: out of memory for %ld floats\n", n);
        free(x);
        free(y);
        return 1;
    }
    for (long i = 0; i < n; i++)
        x[i] = -8.0f + 16.0f * (float)(i % 1000003) / 1000003.0f;
    sim_isa_describe(isa, sizeof isa);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct sim_act act = { kinds[k].kind, kinds[k].a, kinds[k].b };
        double best = 1e30;
        for (int r = 0; r < rounds; r++) {
            double t = now_s();
            sim_act_range(&act, x, y, 0, n);
            t = now_s() - t;
            best = t < best ? t : best;
        }
        uint64_t h = 1469598103934665603u;
        const unsigned char *yb = (const unsigned char *)y;
        for (size_t i = 0; i < (size_t)n * sizeof *y; i++)
            h = (h ^ yb[i]) * 1099511628211u;
        printf("isa=%s kind=%s n=%ld ns_per_elem=%.3f bits=%016llx\n",
               sim_isa_name(sim_isa_current()), kinds[k].name, n, best * 1e9 / (double)n,
               (unsigned long long)h);
    }
    printf("(%s)\n", isa);
    free(x);
    free(y);
    return 0;
}
