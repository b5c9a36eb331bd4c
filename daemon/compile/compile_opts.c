/*
 * compile_opts.c — a compile request's options: checked where they enter (counts, sizes,
 * enum values, placement against the partition), decoded into sim_compile_opts, turned into
 * the cache key (compile_diff.c compares them between the processes of a job). No I/O
 * beyond the error replies; req_compile.c does the upload, compile_task.c the worker and
 * the reply.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_int.h"
#include "ipuof/status.h"
#include "srv_state.h"
#include "wiremap.h"

unsigned
compile_replicas_per_process(const Ipuof__CompileRequest *rq)
{
    return rq->replicas != 0 ? rq->replicas : 1;
}

/* Checks a compile request's sizes and counts against the daemon's limits and c's
 * partition part (not NULL) before anything is allocated. 0, or -1 with an error sent. */
int
compile_request_check(struct conn *c, const struct dev_partition *part, uint64_t req_id,
                      const Ipuof__CompileRequest *rq, uint32_t payload_len)
{
    struct srv *s = c->srv;
    unsigned R = compile_replicas_per_process(rq); /* this process's; the job checks all */

    if (rq->from_model_id != 0) {
        if (rq->model_bytes != 0 || payload_len != 0) {
            conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                            "a compile from model %u carries no model bytes", rq->from_model_id);
            return -1;
        }
    } else if (rq->model_bytes == 0 || rq->model_bytes > s->cfg.max_model_bytes) {
        conn_send_error(c, req_id, rq->model_bytes ? IPUOF_E_TOO_LARGE : IPUOF_E_INVAL, 0, 0,
                        "daemon", "model of %" PRIu64 " bytes: models of 1 to %" PRIu64
                        " bytes (max_model_bytes) are accepted", rq->model_bytes,
                        s->cfg.max_model_bytes);
        return -1;
    }
    if (payload_len > rq->model_bytes) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "compile payload of %u bytes is more than model_bytes (%" PRIu64 ")",
                        payload_len, rq->model_bytes);
        return -1;
    }
    if (rq->device_iterations == 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "deviceIterations is 0; it must be at least 1 (each call runs "
                        "deviceIterations micro-batches per replica)");
        return -1;
    }
    if (R > part->count) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "replication factor %u needs %u IPUs, but partition '%s' has %u; "
                        "attach a partition of %u IPUs or lower the replication factor", R, R,
                        part->name, part->count, dev_round_pow2(R));
        return -1;
    }
    if (rq->input_group_type == IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ALL ||
        (rq->input_group_type != IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE &&
         rq->input_group_size > 1 && (rq->input_group_size > R || R % rq->input_group_size))) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler", "inputReplicaGrouping: %s",
                        rq->input_group_type == IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ALL
                            ? "input_group_type cannot be All; use Consecutive or Orthogonal"
                        : rq->input_group_size > R
                            ? "input_group_size cannot be larger than replication_factor"
                            : "input_group_size must be a factor of replication_factor");
        return -1;
    }
    if (rq->input_group_type > IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "unknown input_group_type %d; use Consecutive (0), Orthogonal (1) or "
                        "NoGrouping (3)", rq->input_group_type);
        return -1;
    }
    if (rq->n_output_modes > MAX_MODE_OPTS) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "compiler",
                        "%zu output modes given; at most %d are accepted", rq->n_output_modes,
                        MAX_MODE_OPTS);
        return -1;
    }
    if (rq->loss[0] != '\0' && rq->gradient_accumulation == 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "gradientAccumulation is 0; a training model accumulates the gradients "
                        "of at least 1 micro-batch per optimizer step");
        return -1;
    }
    if (rq->loss[0] == '\0' && rq->gradient_accumulation > 1) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "gradientAccumulation is %u, but an inference model has no gradients to "
                        "accumulate; use 1, or name a loss to train", rq->gradient_accumulation);
        return -1;
    }
    if (rq->n_frozen_weights > MAX_FROZEN_WEIGHTS) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "compiler",
                        "%zu frozen weights given; at most %d are accepted",
                        rq->n_frozen_weights, MAX_FROZEN_WEIGHTS);
        return -1;
    }
    return 0;
}

int
compile_name_check(struct conn *c, uint64_t req_id, const char *what, const char *name)
{
    size_t n = strlen(name);

    if (n <= MAX_NAME_BYTES)
        return 0;
    conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "compiler",
                    "%s '%.60s...' is %zu bytes long; names of at most %d bytes are accepted",
                    what, name, n, MAX_NAME_BYTES);
    return -1;
}

int
compile_map_kind(Ipuof__OutputKind k, struct sim_output_mode *m, unsigned n)
{
    int kind;

    if (enummap_a_to_b(&wiremap_output_kind, k, &kind) < 0)
        return -1;
    m->kind = kind;
    m->n = m->kind == SIM_OUTPUT_EVERYN ? n : 0;
    return 0;
}

/* Fixes the offered constant inputs that decide shapes in m. */
void
compile_freeze_constants(struct compile_task *ct, const struct sim_model *m)
{
    struct sim_frozen_input *frozen = ct->frozen;
    size_t n = 0;

    for (size_t k = 0; k < ct->n_consts; k++) {
        for (size_t i = 0; i < sim_model_input_count(m); i++) {
            if (strcmp(sim_model_input_name(m, i), ct->consts[k].name) != 0 ||
                !sim_model_input_needs_constant(m, i))
                continue;
            frozen[n].name = ct->consts[k].name;
            frozen[n].dtype = ct->consts[k].dtype;
            frozen[n].rank = ct->consts[k].rank;
            frozen[n].dims = ct->consts[k].dims;
            frozen[n].data = ct->consts[k].data;
            n++;
        }
    }
    ct->opts.frozen = frozen;
    ct->opts.n_frozen = n;
}

/* Copies the request's constant inputs, checking each one's size. 0 or -1 with an error sent. */
int
compile_copy_constants(struct conn *c, uint64_t req_id, struct compile_task *ct,
                       const Ipuof__CompileRequest *rq)
{
    if (rq->n_constant_inputs > MAX_CONSTS) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "compiler",
                        "%zu constant inputs given; at most %d are accepted",
                        rq->n_constant_inputs, MAX_CONSTS);
        return -1;
    }
    for (size_t k = 0; k < rq->n_constant_inputs; k++) {
        const Ipuof__ConstantInput *ci = rq->constant_inputs[k];
        struct constant_in *dst = &ct->consts[k];
        int dtype = wiremap_sim_dtype(ci->dtype);
        size_t esize = dtype < 0 ? 0 : sim_dtype_size(dtype);
        uint64_t numel = 1;

        if (compile_name_check(c, req_id, "constant input", ci->name) < 0)
            return -1;
        if (ci->n_dims > SIM_MAX_RANK || esize == 0) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                            "constant input '%s' has rank %zu and dtype %d; rank 0 to %d and a "
                            "supported dtype are accepted", ci->name, ci->n_dims, ci->dtype,
                            SIM_MAX_RANK);
            return -1;
        }
        for (size_t d = 0; d < ci->n_dims; d++) {
            if (ci->dims[d] < 0 || ci->dims[d] > (1 << 24)) {
                numel = UINT64_MAX;
                break;
            }
            numel *= (uint64_t)ci->dims[d];
            dst->dims[d] = ci->dims[d];
        }
        if (numel == UINT64_MAX || numel * esize != ci->data.len) {
            conn_send_error(c, req_id, IPUOF_E_SHAPE, 0, 0, "compiler",
                            "constant input '%s' carries %zu bytes, which is not its shape's "
                            "size in %s", ci->name, ci->data.len,
                            sim_dtype_name(dtype));
            return -1;
        }
        dst->name = strdup(ci->name);
        dst->data = malloc(ci->data.len + 1);
        ct->n_consts = k + 1;
        if (dst->name == NULL || dst->data == NULL) {
            conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
            return -1;
        }
        if (ci->data.len > 0)
            memcpy(dst->data, ci->data.data, ci->data.len);
        dst->dtype = dtype;
        dst->rank = (int)ci->n_dims;
    }
    return 0;
}

size_t
compile_constant_bytes(const struct constant_in *k)
{
    size_t n = sim_dtype_size(k->dtype);

    for (int d = 0; d < k->rank; d++)
        n *= (size_t)k->dims[d];
    return n;
}

/* A growing string for the cache key; on allocation failure p becomes NULL and stays so. */
struct keybuf {
    char *p;
    size_t len, cap;
};

static void
key_add(struct keybuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
key_add(struct keybuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->p == NULL)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        free(b->p);
        b->p = NULL;
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        size_t cap = b->cap * 2 > b->len + (size_t)n + 1 ? b->cap * 2 : b->len + (size_t)n + 1;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            free(b->p);
            b->p = NULL;
            return;
        }
        b->p = q;
        b->cap = cap;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* Appends n bytes of v in hex. */
static void
key_hex(struct keybuf *b, const uint8_t *v, size_t n)
{
    static const char digits[] = "0123456789abcdef";

    if (b->p == NULL)
        return;
    if (b->cap - b->len < 2 * n + 1) {
        char *q = realloc(b->p, b->len + 2 * n + 1 + b->cap);
        if (q == NULL) {
            free(b->p);
            b->p = NULL;
            return;
        }
        b->p = q;
        b->cap += 2 * n + 1;
    }
    for (size_t j = 0; j < n; j++) {
        b->p[b->len++] = digits[v[j] >> 4];
        b->p[b->len++] = digits[v[j] & 15];
    }
    b->p[b->len] = '\0';
}

/*
 * The options as a string: two compiles share an executable only when these are equal.
 * Every name is written whole with its length before it ("13:/layer1/conv") and every
 * constant input's value in hex, so no name can run into the next field and no two option
 * sets give the same string; the names' lengths were bounded where they entered
 * (MAX_NAME_BYTES), the values by the frame header limit.
 */
char *
compile_options_key(const struct compile_task *ct)
{
    const struct sim_compile_opts *o = &ct->opts;
    const struct sim_cost_cfg *k0 = &o->cost;
    struct keybuf b = {.cap = 512};

    b.p = malloc(b.cap);
    key_add(&b, "D%u R%u B%u M%d/%u", o->device_iterations, o->replicas, o->micro_batch,
            o->default_mode.kind, o->default_mode.n);
    key_add(&b, " P%u S%d L%d%d%d%d T%d K%a,%a,%a,%a,%a,%a,%a", o->partition_ipus, o->strategy,
            o->location[0], o->location[1], o->location[2], o->location[3], o->profile,
            k0->flops_per_s, k0->mem_bytes_per_s, k0->exchange_bytes_per_s,
            k0->link_bytes_per_s, k0->host_bytes_per_s, k0->sync_s, k0->efficiency);
    key_add(&b, " k%d,%a,%a,%a,%a,%a,%u,%d,%a,%a", k0->ipu_type, k0->clock_hz,
            k0->gw_link_bytes_per_s, k0->cs_cycles, k0->host_xfer_s, k0->step_s, k0->io_tiles,
            k0->synthetic, k0->amp, k0->matmul_efficiency);
    for (size_t i = 0; i < o->n_blocks; i++)
        key_add(&b, " b%zu:%s:%d:%d", strlen(o->blocks[i].prefix), o->blocks[i].prefix,
                o->blocks[i].stage, o->blocks[i].ipu);
    for (size_t i = 0; i < o->n_output_modes; i++)
        key_add(&b, " o%zu:%s=%d/%u", strlen(ct->modes[i].name), ct->modes[i].name,
                ct->modes[i].mode.kind, ct->modes[i].mode.n);
    for (size_t i = 0; i < ct->n_consts; i++) {
        const struct constant_in *k = &ct->consts[i];
        const uint8_t *v = k->data;
        size_t n = compile_constant_bytes(k);
        key_add(&b, " C%zu:%s:%d:%d", strlen(k->name), k->name, k->dtype, k->rank);
        for (int d = 0; d < k->rank; d++)
            key_add(&b, ",%" PRId64, k->dims[d]);
        key_add(&b, ":"); /* the value itself, not a hash of it: the key is exact */
        key_hex(&b, v, n);
    }
    return b.p;
}

/* Copies the training options of rq into ct. 0, or -1 with an error sent. */
int
compile_training_options(struct conn *c, uint64_t req_id, struct compile_task *ct,
                         const Ipuof__CompileRequest *rq)
{
    char msg[320];

    ct->opts.seed = rq->seed;   /* random ops and Dropout, inference or training */
    if (rq->loss[0] == '\0')
        return 0;
    if (compile_name_check(c, req_id, "loss", rq->loss) < 0)
        return -1;
    for (size_t i = 0; i < rq->n_frozen_weights; i++)
        if (compile_name_check(c, req_id, "frozen weight", rq->frozen_weights[i]) < 0)
            return -1;
    ct->loss = strdup(rq->loss);
    if (ct->loss == NULL)
        goto oom;
    ct->opts.loss = ct->loss;
    if (models_optimizer(rq->optimizer, &ct->opts.optimizer, &ct->opt_names, msg,
                         sizeof msg) < 0)
        goto bad;
    ct->opts.gradient_accumulation = rq->gradient_accumulation;
    if (enummap_a_to_b(&wiremap_reduction, rq->accumulation_reduction,
                       &ct->opts.accumulation_reduction) < 0) {
        wiremap_refuse(&wiremap_reduction, rq->accumulation_reduction,
                       "accumulationAndReplicationReductionType", msg, sizeof msg);
        goto bad;
    }
    for (size_t i = 0; i < rq->n_frozen_weights; i++) {
        ct->frozen_w[i] = strdup(rq->frozen_weights[i]);
        if (ct->frozen_w[i] == NULL)
            goto oom;
        ct->opts.n_frozen_weights = i + 1;
    }
    ct->opts.frozen_weights = (const char *const *)ct->frozen_w;
    return 0;
bad:
    conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler", "%s", msg);
    return -1;
oom:
    conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
    return -1;
}

/*
 * Copies the placement options of rq (strategy, blocks, tensor locations, profile) into ct,
 * checking each where it enters: the block count against MAX_BLOCKS, every prefix non-empty,
 * stages from -1 (auto) to MAX_BLOCK_STAGE, IPUs below the partition's size. 0, or -1 with
 * an error sent.
 */
int
compile_placement_options(struct conn *c, uint64_t req_id, struct compile_task *ct,
                          const Ipuof__CompileRequest *rq)
{
    const Ipuof__TensorLocation locs[SIM_LOC_KINDS] = {
        [SIM_LOC_WEIGHTS] = rq->weights_location,
        [SIM_LOC_ACTIVATIONS] = rq->activations_location,
        [SIM_LOC_ACCUMULATORS] = rq->accumulators_location,
        [SIM_LOC_OPTIMIZER] = rq->optimizer_location,
    };
    static const char *const loc_names[SIM_LOC_KINDS] = {"weights", "activations",
                                                         "accumulators", "optimizer state"};

    char msg[320];

    if (enummap_a_to_b(&wiremap_strategy, rq->strategy, &ct->opts.strategy) < 0) {
        wiremap_refuse(&wiremap_strategy, rq->strategy, "the compile", msg, sizeof msg);
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler", "%s", msg);
        return -1;
    }
    for (int k = 0; k < SIM_LOC_KINDS; k++) {
        if (enummap_a_to_b(&wiremap_location, locs[k], &ct->opts.location[k]) < 0) {
            wiremap_refuse(&wiremap_location, locs[k], loc_names[k], msg, sizeof msg);
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler", "%s", msg);
            return -1;
        }
    }
    ct->opts.profile = rq->profile != 0;
    if (rq->n_blocks > MAX_BLOCKS) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "compiler",
                        "%zu blocks given; at most %d are accepted", rq->n_blocks, MAX_BLOCKS);
        return -1;
    }
    for (size_t i = 0; i < rq->n_blocks; i++) {
        const Ipuof__Block *b = rq->blocks[i];

        if (compile_name_check(c, req_id, "block prefix", b->prefix) < 0)
            return -1;
        if (b->prefix[0] == '\0' || b->stage < -1 || b->stage > MAX_BLOCK_STAGE ||
            b->ipu >= ct->part_count) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                            "block %zu ('%.200s', stage %d, IPU %u) is invalid: a block needs a "
                            "node-name prefix, a stage from -1 (auto) to %d and an IPU below "
                            "the partition's %u", i, b->prefix, (int)b->stage, b->ipu,
                            MAX_BLOCK_STAGE, ct->part_count);
            return -1;
        }
        ct->block_prefix[i] = strdup(b->prefix);
        if (ct->block_prefix[i] == NULL) {
            conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
            return -1;
        }
        ct->opts.n_blocks = i + 1;
        ct->blocks[i].prefix = ct->block_prefix[i];
        ct->blocks[i].stage = (int)b->stage;
        ct->blocks[i].ipu = (int)b->ipu;
    }
    ct->opts.blocks = ct->opts.n_blocks > 0 ? ct->blocks : NULL;
    return 0;
}

/* The simulated clock's rates from the daemon's configuration: the device type's, then
 * each rate the file sets (0 for the three clock-bound rates: the type's). */
void
compile_cost_options(const struct cfg *cfg, struct sim_cost_cfg *k)
{
    int t = sim_ipu_type_parse(cfg->cost_ipu_type);

    sim_cost_cfg_init(k);
    sim_cost_cfg_type(k, t >= 0 ? t : SIM_IPU_GC200);   /* cfg_validate checked it */
    if (cfg->cost_flops_per_s > 0)
        k->flops_per_s = cfg->cost_flops_per_s;
    if (cfg->cost_mem_bytes_per_s > 0)
        k->mem_bytes_per_s = cfg->cost_mem_bytes_per_s;
    if (cfg->cost_exchange_bytes_per_s > 0)
        k->exchange_bytes_per_s = cfg->cost_exchange_bytes_per_s;
    k->link_bytes_per_s = cfg->cost_link_bytes_per_s;
    k->host_bytes_per_s = cfg->cost_host_bytes_per_s;
    k->gw_link_bytes_per_s = cfg->cost_gw_link_bytes_per_s;
    k->sync_s = cfg->cost_sync_seconds;
    k->efficiency = cfg->cost_efficiency;
    k->matmul_efficiency = cfg->cost_matmul_efficiency;
    k->cs_cycles = cfg->cost_cs_cycles;
    k->host_xfer_s = cfg->cost_host_xfer_seconds;
    k->step_s = cfg->cost_step_seconds;
}

int
compile_clock_options(struct conn *c, uint64_t req_id, struct compile_task *ct,
                      const Ipuof__CompileRequest *rq)
{
    struct sim_cost_cfg *k = &ct->opts.cost;
    unsigned tiles = ct->opts.tiles ? ct->opts.tiles : 1472;

    if (rq->num_io_tiles != 0 && (rq->num_io_tiles % 2 != 0 || rq->num_io_tiles < 32 ||
                                  rq->num_io_tiles > 192 || rq->num_io_tiles >= tiles)) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "num_io_tiles %u: give 0 (none) or an even number from 32 to 192, "
                        "fewer than the IPU's %u tiles", rq->num_io_tiles, tiles);
        return -1;
    }
    if (!(rq->available_memory_proportion >= 0 && rq->available_memory_proportion <= 1)) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "available_memory_proportion %g: give a proportion in (0, 1], or 0 "
                        "for PopLibs' default 0.6", (double)rq->available_memory_proportion);
        return -1;
    }
    if (rq->predict_replicas > 65536) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                        "predict_replicas %u: at most 65536 (0: the compile's replicas)",
                        rq->predict_replicas);
        return -1;
    }
    k->io_tiles = rq->num_io_tiles;
    k->synthetic = rq->synthetic_data != 0;
    if (rq->available_memory_proportion > 0)
        k->amp = rq->available_memory_proportion;
    ct->predict_replicas = rq->predict_replicas;
    return 0;
}
