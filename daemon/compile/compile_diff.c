/*
 * compile_diff.c — comparing the compiles of a job's processes (see jobs.h,
 * compile_task_diff): the seed first, then every option one by one, the model bytes last,
 * naming the first field that differs with both values in words.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "compile_int.h"

static const char *
str_or_none(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : "(none)";
}

/* Writes an output mode ("All", "EveryN(4)", ...) into out. */
static void
mode_str(const struct sim_output_mode *m, char *out, size_t len)
{
    static const char *const names[] = {"All", "Final", "Sum", "EveryN", "Default"};

    if (m->kind == SIM_OUTPUT_EVERYN)
        snprintf(out, len, "EveryN(%u)", m->n);
    else if (m->kind >= 0 && m->kind <= SIM_OUTPUT_DEFAULT)
        snprintf(out, len, "%s", names[m->kind]);
    else
        snprintf(out, len, "kind %d", m->kind);
}

static const char *
strategy_str(int s)
{
    switch (s) {
    case SIM_STRATEGY_DEFAULT: return "default";
    case SIM_STRATEGY_PIPELINED: return "pipelined";
    case SIM_STRATEGY_SHARDED: return "sharded";
    case SIM_STRATEGY_PHASED: return "phased";
    default: return "unknown";
    }
}

/* The value of constant k as "name dtype[d0,d1] (N bytes, hash H)" into out. */
static void
const_str(const struct constant_in *k, char *out, size_t len)
{
    size_t used = (size_t)snprintf(out, len, "'%.100s' %s[", k->name, sim_dtype_name(k->dtype));

    for (int d = 0; d < k->rank && used < len; d++)
        used += (size_t)snprintf(out + used, len - used, "%s%" PRId64, d ? "," : "", k->dims[d]);
    if (used < len)
        snprintf(out + used, len - used, "] (%zu bytes, hash %016" PRIx64 ")", compile_constant_bytes(k),
                 cache_hash(k->data, compile_constant_bytes(k), ""));
}

/*
 * The placement, output-mode and constant-input options of a and b: the first that differs
 * named in *what (static text) with both values in va and vb. 1 when one differs, else 0.
 */
static int
diff_placement(const struct compile_task *a, const struct compile_task *b, const char **what,
               char *va, char *vb, size_t vlen)
{
    const struct sim_compile_opts *x = &a->opts, *y = &b->opts;
    static const char *const loc_what[SIM_LOC_KINDS] = {
        "weights location", "activations location", "accumulators location",
        "optimizer state location"};

    if (x->strategy != y->strategy) {
        *what = "execution strategy";
        snprintf(va, vlen, "%s", strategy_str(x->strategy));
        snprintf(vb, vlen, "%s", strategy_str(y->strategy));
        return 1;
    }
    for (int k = 0; k < SIM_LOC_KINDS; k++) {
        if (x->location[k] != y->location[k]) {
            *what = loc_what[k];
            snprintf(va, vlen, "%s", x->location[k] == SIM_LOC_OFF_CHIP ? "off-chip" : "on-chip");
            snprintf(vb, vlen, "%s", y->location[k] == SIM_LOC_OFF_CHIP ? "off-chip" : "on-chip");
            return 1;
        }
    }
    if (x->profile != y->profile) {
        *what = "profiling (POPLAR_ENGINE_OPTIONS autoReport)";
        snprintf(va, vlen, "%s", x->profile ? "on" : "off");
        snprintf(vb, vlen, "%s", y->profile ? "on" : "off");
        return 1;
    }
    if (x->n_blocks != y->n_blocks) {
        *what = "the number of placement blocks";
        snprintf(va, vlen, "%zu", x->n_blocks);
        snprintf(vb, vlen, "%zu", y->n_blocks);
        return 1;
    }
    for (size_t i = 0; i < x->n_blocks; i++) {
        const struct sim_block_opt *p = &x->blocks[i], *q = &y->blocks[i];
        if (strcmp(p->prefix, q->prefix) != 0 || p->stage != q->stage || p->ipu != q->ipu) {
            *what = "a placement block";
            snprintf(va, vlen, "block %zu ('%.120s', stage %d, IPU %d)", i, p->prefix, p->stage,
                     p->ipu);
            snprintf(vb, vlen, "block %zu ('%.120s', stage %d, IPU %d)", i, q->prefix, q->stage,
                     q->ipu);
            return 1;
        }
    }
    if (x->default_mode.kind != y->default_mode.kind || x->default_mode.n != y->default_mode.n) {
        *what = "outputMode";
        mode_str(&x->default_mode, va, vlen);
        mode_str(&y->default_mode, vb, vlen);
        return 1;
    }
    if (x->n_output_modes != y->n_output_modes) {
        *what = "the number of per-output modes";
        snprintf(va, vlen, "%zu", x->n_output_modes);
        snprintf(vb, vlen, "%zu", y->n_output_modes);
        return 1;
    }
    for (size_t i = 0; i < x->n_output_modes; i++) {
        const struct sim_output_opt *p = &a->modes[i], *q = &b->modes[i];
        char mp[32], mq[32];
        if (strcmp(p->name, q->name) == 0 && p->mode.kind == q->mode.kind &&
            p->mode.n == q->mode.n)
            continue;
        *what = "an output's mode";
        mode_str(&p->mode, mp, sizeof mp);
        mode_str(&q->mode, mq, sizeof mq);
        snprintf(va, vlen, "'%.120s' %s", p->name, mp);
        snprintf(vb, vlen, "'%.120s' %s", q->name, mq);
        return 1;
    }
    if (a->n_consts != b->n_consts) {
        *what = "the number of constant inputs";
        snprintf(va, vlen, "%zu", a->n_consts);
        snprintf(vb, vlen, "%zu", b->n_consts);
        return 1;
    }
    for (size_t i = 0; i < a->n_consts; i++) {
        const struct constant_in *p = &a->consts[i], *q = &b->consts[i];
        if (strcmp(p->name, q->name) == 0 && p->dtype == q->dtype && p->rank == q->rank &&
            memcmp(p->dims, q->dims, (size_t)p->rank * sizeof p->dims[0]) == 0 &&
            memcmp(p->data, q->data, compile_constant_bytes(p)) == 0)
            continue;
        *what = "a constant input";
        const_str(p, va, vlen);
        const_str(q, vb, vlen);
        return 1;
    }
    return 0;
}

/* In a diff_* step below (x, y: the two processes' options; *what, va, vb of vlen bytes:
 * the first difference found, named, with both values): the first difference of an
 * unsigned (DIFF_U) or floating (DIFF_F) field, unless one was found already. */
#define DIFF_U(field, name)                                                                   \
    if (*what == NULL && x->field != y->field) {                                              \
        *what = name;                                                                          \
        snprintf(va, vlen, "%llu", (unsigned long long)x->field);                              \
        snprintf(vb, vlen, "%llu", (unsigned long long)y->field);                              \
    }
#define DIFF_F(field, name)                                                                   \
    if (*what == NULL && x->field != y->field) {                                              \
        *what = name;                                                                          \
        snprintf(va, vlen, "%g", (double)x->field);                                            \
        snprintf(vb, vlen, "%g", (double)y->field);                                            \
    }

/* The run's shape: device iterations, replicas, micro-batch, input replica grouping, loss. */
static void
diff_run(const struct compile_task *a, const struct compile_task *b, const char **what,
         char *va, char *vb, size_t vlen)
{
    const struct sim_compile_opts *x = &a->opts, *y = &b->opts;

    DIFF_U(device_iterations, "deviceIterations")
    if (*what == NULL && a->replicas_per_process != b->replicas_per_process) {
        *what = "replicationFactor";
        snprintf(va, vlen, "%u", a->replicas_per_process);
        snprintf(vb, vlen, "%u", b->replicas_per_process);
    }
    DIFF_U(micro_batch, "micro_batch")
    if (*what == NULL && (a->group != b->group || a->group_orthogonal != b->group_orthogonal)) {
        *what = "inputReplicaGrouping";
        snprintf(va, vlen, "(%u, %s)", a->group,
                 a->group_orthogonal ? "Orthogonal" : "Consecutive");
        snprintf(vb, vlen, "(%u, %s)", b->group,
                 b->group_orthogonal ? "Orthogonal" : "Consecutive");
    }
    if (*what == NULL && strcmp(str_or_none(a->loss), str_or_none(b->loss)) != 0) {
        *what = "loss";
        snprintf(va, vlen, "'%.256s'", str_or_none(a->loss));
        snprintf(vb, vlen, "'%.256s'", str_or_none(b->loss));
    }
}

/* The optimizer: gradient accumulation and reduction, its kind and every hyperparameter,
 * loss scaling, its parameter groups with their weights. */
static void
diff_optimizer(const struct sim_compile_opts *x, const struct sim_compile_opts *y,
               const char **what, char *va, char *vb, size_t vlen)
{
    DIFF_U(gradient_accumulation, "gradientAccumulation")
    DIFF_U(accumulation_reduction, "accumulationAndReplicationReductionType")
    DIFF_U(optimizer.kind, "optimizer")
    DIFF_F(optimizer.lr, "optimizer lr")
    DIFF_F(optimizer.weight_decay, "optimizer weight_decay")
    DIFF_F(optimizer.momentum, "optimizer momentum")
    DIFF_F(optimizer.dampening, "optimizer dampening")
    DIFF_U(optimizer.nesterov, "optimizer nesterov")
    DIFF_F(optimizer.beta1, "optimizer beta1")
    DIFF_F(optimizer.beta2, "optimizer beta2")
    DIFF_F(optimizer.eps, "optimizer eps")
    DIFF_F(optimizer.alpha, "optimizer alpha")
    DIFF_U(optimizer.centered, "optimizer centered")
    DIFF_U(optimizer.tf_variant, "optimizer use_tf_variant")
    DIFF_U(optimizer.bias_correction, "optimizer bias_correction")
    DIFF_F(optimizer.max_grad_norm, "optimizer max_grad_norm")
    DIFF_F(optimizer.max_weight_norm, "optimizer max_weight_norm")
    DIFF_F(optimizer.loss_scaling, "optimizer loss_scaling")
    DIFF_F(optimizer.velocity_scaling, "optimizer velocity_scaling")
    DIFF_U(optimizer.plan_momentum, "optimizer momentum planned")
    DIFF_U(optimizer.accum_half, "optimizer accum_type float16")
    DIFF_U(optimizer.first_half, "optimizer first-order accumulator float16")
    DIFF_U(optimizer.second_half, "optimizer second-order accumulator float16")
    DIFF_U(optimizer.auto_loss_scaling, "automatic loss scaling")
    DIFF_U(optimizer.als_period, "automatic loss scaling update period")
    DIFF_F(optimizer.als_bin_edge, "automatic loss scaling bin edge")
    DIFF_F(optimizer.als_threshold, "automatic loss scaling threshold")
    DIFF_U(optimizer.n_groups, "number of optimizer parameter groups")
    for (int g = 0; *what == NULL && g < x->optimizer.n_groups; g++) {
        DIFF_F(optimizer.groups[g].lr, "optimizer group lr")
        DIFF_F(optimizer.groups[g].weight_decay, "optimizer group weight_decay")
        DIFF_F(optimizer.groups[g].momentum, "optimizer group momentum")
        DIFF_F(optimizer.groups[g].dampening, "optimizer group dampening")
        DIFF_U(optimizer.groups[g].nesterov, "optimizer group nesterov")
        DIFF_F(optimizer.groups[g].beta1, "optimizer group beta1")
        DIFF_F(optimizer.groups[g].beta2, "optimizer group beta2")
        DIFF_F(optimizer.groups[g].eps, "optimizer group eps")
        DIFF_F(optimizer.groups[g].alpha, "optimizer group alpha")
        DIFF_U(optimizer.groups[g].n_weights, "number of weights of an optimizer group")
        for (size_t j = 0; *what == NULL && j < x->optimizer.groups[g].n_weights; j++) {
            const char *wa = x->optimizer.groups[g].weights[j];
            const char *wb = y->optimizer.groups[g].weights[j];
            if (strcmp(wa, wb) != 0) {
                *what = "weight of an optimizer group";
                snprintf(va, vlen, "'%.256s'", wa);
                snprintf(vb, vlen, "'%.256s'", wb);
            }
        }
    }
}

/* The weights frozen (not trained), by name. */
static void
diff_frozen(const struct compile_task *a, const struct compile_task *b, const char **what,
            char *va, char *vb, size_t vlen)
{
    const struct sim_compile_opts *x = &a->opts, *y = &b->opts;

    DIFF_U(n_frozen_weights, "number of frozen weights")
    for (size_t i = 0; *what == NULL && i < x->n_frozen_weights; i++) {
        if (strcmp(a->frozen_w[i], b->frozen_w[i]) != 0) {
            *what = "frozen weight";
            snprintf(va, vlen, "'%.256s'", a->frozen_w[i]);
            snprintf(vb, vlen, "'%.256s'", b->frozen_w[i]);
        }
    }
}
#undef DIFF_U
#undef DIFF_F

int
compile_task_diff(const struct compile_task *a, unsigned pa, const struct compile_task *b,
                 unsigned pb, char *msg, size_t len)
{
    const struct sim_compile_opts *x = &a->opts, *y = &b->opts;
    const struct sim_cost_cfg *ka = &x->cost, *kb = &y->cost;
    const char *what = NULL;
    char va[300], vb[300];

    /* The options first: a different seed or option often changes the model bytes too
     * (weights initialised from the seed), and is the cause to name. */
    if (x->seed != y->seed) {
        snprintf(msg, len, "random seeds differ: process %u has %llu, process %u has %llu; "
                 "every process of a job must use the same seed (as PopTorch requires)", pa,
                 (unsigned long long)x->seed, pb, (unsigned long long)y->seed);
        return 1;
    }
    diff_run(a, b, &what, va, vb, sizeof va);
    diff_optimizer(x, y, &what, va, vb, sizeof va);
    diff_frozen(a, b, &what, va, vb, sizeof va);
    if (what == NULL)
        diff_placement(a, b, &what, va, vb, sizeof va);
    if (what == NULL && (ka->flops_per_s != kb->flops_per_s ||
                         ka->mem_bytes_per_s != kb->mem_bytes_per_s ||
                         ka->exchange_bytes_per_s != kb->exchange_bytes_per_s ||
                         ka->link_bytes_per_s != kb->link_bytes_per_s ||
                         ka->host_bytes_per_s != kb->host_bytes_per_s ||
                         ka->sync_s != kb->sync_s || ka->efficiency != kb->efficiency ||
                         ka->matmul_efficiency != kb->matmul_efficiency ||
                         ka->ipu_type != kb->ipu_type || ka->cs_cycles != kb->cs_cycles ||
                         ka->host_xfer_s != kb->host_xfer_s || ka->step_s != kb->step_s)) {
        /* set by the daemon, from its [cost] section at each process's compile */
        snprintf(msg, len, "the daemon's [cost] rates changed (a reload) between the compiles "
                 "of process %u and process %u of the job; compile again", pa, pb);
        return 1;
    }
    if (what == NULL && (a->len != b->len || memcmp(a->bytes, b->bytes, a->len) != 0)) {
        what = "the model (its ONNX bytes)";
        snprintf(va, sizeof va, "%zu bytes (hash %016" PRIx64 ")", a->len,
                 cache_hash(a->bytes, a->len, ""));
        snprintf(vb, sizeof vb, "%zu bytes (hash %016" PRIx64 ")", b->len,
                 cache_hash(b->bytes, b->len, ""));
    }
    if (what == NULL && strcmp(a->key, b->key) != 0) {
        /* every field of the key is compared above; this is a guard, not a message users see */
        snprintf(msg, len, "the processes of the job compile with different options (process "
                 "%u and process %u); every process compiles the same model with the same "
                 "options", pa, pb);
        return 1;
    }
    if (what == NULL)
        return 0;
    snprintf(msg, len, "the processes of the job compile differently: %s is %s in process %u "
             "and %s in process %u; every process compiles the same model with the same "
             "options", what, va, pa, vb, pb);
    return 1;
}
