/*
 * plan_fit.c — the refusal of a graph that does not fit an IPU (plan.c found it): one
 * sentence with what the IPU needs by part and has, the shortfall, and the remedies that
 * apply with their figures: the optimizer state off chip, recomputation (the bytes kept
 * for the backward), the convolution and matmul temporaries within their available
 * memory proportion, the IO tiles' share, more IPUs, a smaller micro-batch (docs/memory.md).
 */
#include <stdio.h>
#include <string.h>

#include "exe.h"

static void
fmt_bytes(uint64_t b, char *buf, size_t n)
{
    if (b >= ((uint64_t)1 << 30))
        snprintf(buf, n, "%.2f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= ((uint64_t)1 << 20))
        snprintf(buf, n, "%.2f MiB", (double)b / (double)((uint64_t)1 << 20));
    else
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
}

/* The largest IPU bytes a convolution's or matmul's temporaries take on IPU p (0: none),
 * and that node in *at. */
static uint64_t
largest_temp(const struct sim_exe *e, unsigned p, int *at)
{
    uint64_t best = 0;

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        size_t t = n->scratch > n->bwd_scratch ? n->scratch : n->bwd_scratch;
        size_t ipu = sim_temp_ipu_bytes(e, n, t);
        if ((unsigned)n->ipu == p && ipu > best &&
            (strcmp(n->op->name, "Conv") == 0 || strcmp(n->op->name, "MatMul") == 0 ||
             strcmp(n->op->name, "Gemm") == 0 || strcmp(n->op->name, "ConvTranspose") == 0)) {
            best = ipu;
            *at = s;
        }
    }
    return best;
}

/* Appends the remedies that name recomputation, the memory proportion and IO tiles, with
 * their figures (kept: the bytes IPU p keeps from the forward for the backward). */
static size_t
memory_hints(const struct sim_exe *e, unsigned p, uint64_t kept, char *hint, size_t cap,
             size_t used)
{
    static const char *const modes[] = { "None", "Standard", "NormOnly", "Pipeline",
                                         "RecomputeAll" };
    const struct sim_mem_report *r = &e->mem[p];
    int at = -1;
    uint64_t temp = largest_temp(e, p, &at);

    if (e->tr != NULL && kept > 0 && e->recompute != SIM_RECOMPUTE_ALL && used < cap)
        used += (size_t)snprintf(hint + used, cap - used, "recomputation (now %s) keeps "
                                 "%llu bytes of activations for the backward%s: "
                                 "autoRecomputation 4 with recomputationCheckpoint at block "
                                 "outputs%s keeps only the checkpoints; ",
                                 modes[e->recompute >= 0 && e->recompute <= 4 ? e->recompute : 0],
                                 (unsigned long long)kept, r->stash > 0 ? " per micro-batch in "
                                 "flight" : "", r->stash > 0 ? " (or 3, Pipeline)" : "");
    if (temp > 0 && used < cap)
        used += (size_t)snprintf(hint + used, cap - used, "convolution and matmul "
                                 "temporaries take up to %llu bytes (%.60s) within their "
                                 "available memory proportion: a lower one "
                                 "(setAvailableMemoryProportion, set_available_memory) takes "
                                 "less; ", (unsigned long long)temp, e->nodes[at].label);
    if (e->io_bytes > 0 && used < cap)
        used += (size_t)snprintf(hint + used, cap - used, "numIOTiles takes %llu bytes; ",
                                 (unsigned long long)e->io_bytes);
    return used < cap ? used : cap;
}

int
sim_plan_no_fit(const struct sim_exe *e, unsigned p, uint64_t kept, struct sim_err *err)
{
    const struct sim_mem_report *r = &e->mem[p];
    char need[32], have[32], short_s[32], alt[32], hint[900];
    uint64_t sum = 0, without_opt = r->total - r->optimizer;
    unsigned ipus;
    size_t used = 0;

    for (unsigned q = 0; q < e->ipr; q++)
        sum += e->mem[q].total;
    ipus = (unsigned)((sum + r->capacity - 1) / (r->capacity ? r->capacity : 1));
    fmt_bytes(r->total, need, sizeof(need));
    fmt_bytes(r->capacity, have, sizeof(have));
    fmt_bytes(r->total - r->capacity, short_s, sizeof(short_s));
    hint[0] = '\0';
    if (r->optimizer > 0 && without_opt <= r->capacity) {
        fmt_bytes(without_opt, alt, sizeof(alt));
        used += (size_t)snprintf(hint + used, sizeof(hint) - used, "with the optimizer "
                                 "state off chip (the optimizer's tensor location) it would "
                                 "need %s, which fits; ", alt);
    }
    used = memory_hints(e, p, kept, hint, sizeof(hint), used);
    if (ipus > e->ipr && used < sizeof(hint))
        used += (size_t)snprintf(hint + used, sizeof(hint) - used, "split over at least %u "
                                 "IPUs (blocks, or __ipu_number / __pipeline_stage "
                                 "attributes): about %llu bytes per IPU; ", ipus,
                                 (unsigned long long)(sum / ipus));
    if (used < sizeof(hint))
        snprintf(hint + used, sizeof(hint) - used, "a smaller micro-batch (now %u) shrinks "
                 "the activations", e->B);
    return sim_err_set(err, IPUOF_E_DEVICE_OOM,
                       "the graph does not fit: IPU %u (replica 0) needs %llu bytes (%s: "
                       "weights %llu, activations %llu, code %llu, gradients %llu, optimizer "
                       "state %llu, pipeline stash %llu) but has %llu bytes (%s) available, "
                       "%s short. To make it fit: %s", p, (unsigned long long)r->total, need,
                       (unsigned long long)r->weights, (unsigned long long)r->activations,
                       (unsigned long long)r->code, (unsigned long long)r->gradients,
                       (unsigned long long)r->optimizer, (unsigned long long)r->stash,
                       (unsigned long long)r->capacity, have, short_s, hint);
}
