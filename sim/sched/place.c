/*
 * place.c — placement of the scheduled nodes on stages and IPUs, and the checks PopTorch
 * and PopART make on it.
 *
 * Does: give every node a stage and an IPU, either from the compile options' blocks (a
 * block is the nodes whose name starts with its prefix; PopTorch's Block / Stage / ipu) or
 * from PopART's node attributes (__ipu_number, __pipeline_stage); number the stages
 * 0..N-1 in order and sort the schedule by stage (stable: still topological); list the
 * activations that cross IPUs (the exchange copies, e->xfer); resolve the execution
 * strategy; and refuse, with a sentence saying what
 * would be right: a block prefix matching no node, blocks mixing explicit and automatic
 * stages, a stage spread over two IPUs, a stage order that sends activations backwards, a
 * trainable weight read on two IPUs while pipelining, a placement needing more IPUs than
 * the partition has, gradient accumulation (training) or device iterations (inference)
 * smaller than the number of pipeline stages, and off-chip optimizer state or accumulators
 * on an inference model.
 * Default strategy: pipelined when the placement came from blocks with more than one stage
 * (PopTorch's default for models with Blocks); sharded when it came from node attributes
 * (PopART's virtual graphs run sharded unless pipelining is enabled) or there is one stage.
 * Does not: decide memory (plan.c) or time (schedule.c, cost.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"

static const char *
node_name(const struct sim_exe *e, int s)
{
    return e->m->nodes[e->nodes[s].mnode].name;
}

/* "node 3 'conv1' (Conv)", for messages. */
static const char *
lbl(const struct sim_exe *e, int s)
{
    return e->nodes[s].label;
}

/* The block of node s: the longest prefix that matches its name, or -1. */
static int
match_block(const struct sim_exe *e, const struct sim_compile_opts *o, int s)
{
    const char *name = node_name(e, s);
    size_t best_len = 0;
    int best = -1;

    for (size_t b = 0; b < o->n_blocks; b++) {
        size_t len = strlen(o->blocks[b].prefix);
        if (strncmp(name, o->blocks[b].prefix, len) == 0 && (best < 0 || len > best_len)) {
            best = (int)b;
            best_len = len;
        }
    }
    return best;
}

/* The block of a node no prefix matches: the latest block (the highest stage, or the
 * highest index when the blocks number the stages) among those of its inputs' producers,
 * as PopTorch puts an op in the block entered last before it runs (the block of the
 * producer traced last); 0 when no input has a scheduled producer. block[] holds the
 * blocks of the nodes before s (the schedule is topological). */
static int
producer_block(const struct sim_exe *e, const struct sim_compile_opts *o, bool by_index,
               const int *block, int s)
{
    const struct sim_enode *n = &e->nodes[s];
    int best = -1;

    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j], b;
        if (v < 0 || e->vals[v].kind != SIM_V_ACT || e->vals[v].producer < 0)
            continue;
        b = block[e->vals[v].producer];
        if (best < 0 || (by_index ? b > best : o->blocks[b].stage > o->blocks[best].stage))
            best = b;
    }
    return best >= 0 ? best : 0;
}

/* Stages and IPUs from the compile options' blocks. */
static int
place_blocks(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err)
{
    int *block = calloc((size_t)e->n_nodes + 1, sizeof(*block));
    unsigned char *used = calloc(o->n_blocks + 1, 1);
    bool any_auto = false, any_explicit = false;
    int rc = 0;

    if (block == NULL || used == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t b = 0; b < o->n_blocks; b++) {
        const struct sim_block_opt *bo = &o->blocks[b];
        if (bo->prefix == NULL || bo->prefix[0] == '\0') {
            rc = sim_err_set(err, IPUOF_E_INVAL, "block %zu has no name prefix; a block is "
                             "the nodes whose name starts with its prefix", b);
            goto out;
        }
        if (bo->ipu < 0 || bo->stage < -1) {
            rc = sim_err_set(err, IPUOF_E_INVAL, "block '%s': IPU %d / stage %d is invalid "
                             "(IPU >= 0; stage >= 0, or -1 for one stage per block)",
                             bo->prefix, bo->ipu, bo->stage);
            goto out;
        }
        if (bo->stage < 0)
            any_auto = true;
        else
            any_explicit = true;
    }
    if (any_auto && any_explicit) {
        rc = sim_err_set(err, IPUOF_E_INVAL, "some blocks have a stage and others do not: "
                         "give every block a stage, or none (one stage per block)");
        goto out;
    }
    for (int s = 0; s < e->n_nodes; s++) {
        int b = match_block(e, o, s);
        block[s] = b >= 0 ? b : producer_block(e, o, any_auto, block, s);
        if (b >= 0)
            used[b] = 1;
    }
    for (size_t b = 0; b < o->n_blocks; b++) {
        if (used[b])
            continue;
        rc = sim_err_set(err, IPUOF_E_INVAL, "block '%s' matches no node: a block is the "
                         "nodes whose name starts with its prefix (torch 1.13's exporter "
                         "names them after the module path, e.g. '/layer1/conv/Conv'; the first "
                         "node here is '%s')", o->blocks[b].prefix,
                         e->n_nodes > 0 ? node_name(e, 0) : "");
        goto out;
    }
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_block_opt *bo = &o->blocks[block[s]];
        e->nodes[s].ipu = bo->ipu;
        e->nodes[s].stage = any_auto ? block[s] : bo->stage;
    }
out:
    free(block);
    free(used);
    return rc;
}

/* Stages from __pipeline_stage (nodes without one take their producer's, or 0); without
 * any, one stage per IPU in order of first use. */
static void
place_attrs(struct sim_exe *e)
{
    bool any_stage = false;
    int order[SIM_MAX_IPUS], n_order = 0;

    for (int s = 0; s < e->n_nodes; s++)
        any_stage = any_stage || e->nodes[s].stage >= 0;
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        if (any_stage && n->stage < 0) {
            n->stage = 0;
            for (int j = 0; j < n->n_in; j++) {
                int v = n->in[j];
                if (v >= 0 && e->vals[v].kind == SIM_V_ACT && e->vals[v].producer >= 0) {
                    n->stage = e->nodes[e->vals[v].producer].stage;
                    break;
                }
            }
        } else if (!any_stage) {
            int k = 0;
            while (k < n_order && order[k] != n->ipu)
                k++;
            if (k == n_order && n_order < SIM_MAX_IPUS)
                order[n_order++] = n->ipu;
            n->stage = k;
        }
    }
}

/* Renumbers the stages 0..N-1 in increasing order; fills e->n_stages and e->stage_ipu. */
static int
number_stages(struct sim_exe *e, struct sim_err *err)
{
    int *ids = calloc((size_t)e->n_nodes + 1, sizeof(*ids));
    int n_ids = 0, rc = 0;

    if (ids == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int s = 0; s < e->n_nodes; s++) {
        int k = 0, st = e->nodes[s].stage;
        while (k < n_ids && ids[k] < st)
            k++;
        if (k < n_ids && ids[k] == st)
            continue;
        memmove(&ids[k + 1], &ids[k], (size_t)(n_ids - k) * sizeof(*ids));
        ids[k] = st;
        n_ids++;
    }
    if (n_ids > SIM_MAX_IPUS) {
        rc = sim_err_set(err, IPUOF_E_INVAL, "the placement has %d stages; at most %d are "
                         "supported", n_ids, SIM_MAX_IPUS);
        goto out;
    }
    e->n_stages = n_ids > 0 ? n_ids : 1;
    e->stage_ipu = calloc((size_t)e->n_stages, sizeof(*e->stage_ipu));
    e->stage_node = calloc((size_t)e->n_stages, sizeof(*e->stage_node));
    if (e->stage_ipu == NULL || e->stage_node == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < e->n_stages; k++)
        e->stage_ipu[k] = -1;
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        int k = 0;
        while (ids[k] != n->stage)
            k++;
        if (e->stage_ipu[k] >= 0 && e->stage_ipu[k] != n->ipu) {
            rc = sim_err_set(err, IPUOF_E_INVAL, "stage %d is placed on IPU %d (%s) and on "
                             "IPU %d (%s): every node of a stage must be on one IPU",
                             n->stage, e->stage_ipu[k], lbl(e, e->stage_node[k]),
                             n->ipu, lbl(e, s));
            goto out;
        }
        if (e->stage_ipu[k] < 0) {
            e->stage_ipu[k] = n->ipu;
            e->stage_node[k] = s;
        }
        n->stage = k;
    }
    if (e->n_nodes == 0)
        e->stage_ipu[0] = 0;
out:
    free(ids);
    return rc;
}

/* Every node's inputs come from its own stage or an earlier one. */
static int
check_order(struct sim_exe *e, struct sim_err *err)
{
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++) {
            const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
            const struct sim_enode *p;
            if (v == NULL || v->kind != SIM_V_ACT || v->producer < 0)
                continue;
            p = &e->nodes[v->producer];
            if (p->stage > n->stage)
                return sim_err_set(err, IPUOF_E_INVAL, "%s (stage %d) reads '%s' from "
                                   "%s in the later stage %d: stages must have ascending "
                                   "values along the graph; put %s in stage %d or later",
                                   lbl(e, s), n->stage, e->m->vals[n->in[j]].name,
                                   lbl(e, v->producer), p->stage, lbl(e, s),
                                   p->stage);
        }
    }
    return 0;
}

/* The partition can hold replicas x IPUs per replica, and every IPU id is inside it. */
static int
check_partition(const struct sim_exe *e, unsigned partition, struct sim_err *err)
{
    int far = 0;

    if (partition == 0)
        return 0;
    for (int s = 1; s < e->n_nodes; s++)
        if (e->nodes[s].ipu > e->nodes[far].ipu)
            far = s;
    if (e->n_nodes > 0 && (unsigned)e->nodes[far].ipu >= partition)
        return sim_err_set(err, IPUOF_E_INVAL, "%s is placed on IPU %d but the partition "
                           "has %u IPUs (0 to %u): the model needs %u IPUs per replica; "
                           "attach a partition of at least %u IPUs or place it on IPUs "
                           "0 to %u", lbl(e, far), e->nodes[far].ipu, partition,
                           partition - 1, e->ipr, e->ipr * e->R, partition - 1);
    if ((uint64_t)e->ipr * e->R > partition)
        return sim_err_set(err, IPUOF_E_INVAL, "the model needs %u IPUs (%u replicas x %u "
                           "IPUs per replica) but the partition has %u; attach %u IPUs or "
                           "use at most %u replicas", e->ipr * e->R, e->R, e->ipr, partition,
                           e->ipr * e->R, partition / e->ipr > 0 ? partition / e->ipr : 1);
    return 0;
}

/* Pipelining: no trainable weight read on two IPUs (PopART copies no variable between
 * virtual graphs when pipelining). */
static int
check_shared_weights(const struct sim_exe *e, struct sim_err *err)
{
    int *first = malloc(((size_t)e->m->n_vals + 1) * sizeof(*first));   /* first reader */
    int rc = 0;

    if (first == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int v = 0; v < e->m->n_vals; v++)
        first[v] = -1;
    for (int s = 0; s < e->n_nodes && rc == 0; s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in && rc == 0; j++) {
            int v = n->in[j];
            const struct sim_enode *q;
            if (v < 0 || e->vals[v].kind != SIM_V_WEIGHT)
                continue;
            if (first[v] < 0) {
                first[v] = s;
                continue;
            }
            q = &e->nodes[first[v]];
            if (q->ipu != n->ipu)
                rc = sim_err_set(err, IPUOF_E_INVAL, "weight '%s' is read on IPU %d (%s) and "
                                 "IPU %d (%s): when pipelining, every stage using a weight "
                                 "must be on one IPU", e->m->vals[v].name, q->ipu,
                                 lbl(e, first[v]), n->ipu, lbl(e, s));
        }
    }
    free(first);
    return rc;
}

static int
check_strategy(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err)
{
    static const char *const kinds[SIM_LOC_KINDS] = { "weights", "activations",
                                                      "accumulators", "optimizer state" };
    unsigned N = (unsigned)e->n_stages;

    for (int k = 0; k < SIM_LOC_KINDS; k++) {
        if (o->location[k] != SIM_LOC_ON_CHIP && o->location[k] != SIM_LOC_OFF_CHIP)
            return sim_err_set(err, IPUOF_E_INVAL, "the location of the %s is %d: use %d (on "
                               "chip) or %d (off chip)", kinds[k], o->location[k],
                               SIM_LOC_ON_CHIP, SIM_LOC_OFF_CHIP);
        e->location[k] = o->location[k];
    }
    if (e->tr == NULL && (o->location[SIM_LOC_OPTIMIZER] || o->location[SIM_LOC_ACCUMULATORS]))
        return sim_err_set(err, IPUOF_E_INVAL, "the %s placed off chip, but this is an "
                           "inference model, which has none; set this location only for "
                           "a training model (one with a loss)",
                           o->location[SIM_LOC_OPTIMIZER] ? "optimizer state is" :
                           "gradient accumulators are");
    if (e->tr == NULL && o->location[SIM_LOC_ACTIVATIONS] && N > 1)
        return sim_err_set(err, IPUOF_E_INVAL, "activations are placed off chip but this "
                           "is an inference model, which keeps no activations for a backward "
                           "pass; set this location only for a training model");
    if (e->strategy == SIM_STRATEGY_PIPELINED && e->tr != NULL && e->A < N)
        return sim_err_set(err, IPUOF_E_INVAL, "for pipelining, depth (gradient "
                           "accumulation factor) must equal at least the number of pipeline "
                           "stages (%u): gradient_accumulation is %u; raise it to %u or more",
                           N, e->A, N);
    if (e->strategy == SIM_STRATEGY_PIPELINED && e->tr == NULL && e->D < N)
        return sim_err_set(err, IPUOF_E_INVAL, "for pipelining, depth (device iterations) "
                           "must equal at least the number of pipeline stages (%u): "
                           "device_iterations is %u; raise it to %u or more", N, e->D, N);
    if (e->strategy == SIM_STRATEGY_PIPELINED && e->tr != NULL)
        return check_shared_weights(e, err);
    return 0;
}

/* Stable sort of the schedule by stage (a topological order still, since stages ascend
 * along the graph), so that each stage is a contiguous run of nodes. */
static int
sort_by_stage(struct sim_exe *e, struct sim_err *err)
{
    struct sim_enode *sorted = malloc(((size_t)e->n_nodes + 1) * sizeof(*sorted));
    int *pos = malloc(((size_t)e->n_nodes + 1) * sizeof(*pos));
    int i = 0;

    if (sorted == NULL || pos == NULL) {
        free(sorted);
        free(pos);
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    }
    for (int k = 0; k < e->n_stages; k++) {
        e->stage_node[k] = i;
        for (int s = 0; s < e->n_nodes; s++)
            if (e->nodes[s].stage == k) {
                pos[s] = i;
                sorted[i++] = e->nodes[s];
            }
    }
    for (int v = 0; v < e->m->n_vals; v++)
        if (e->vals[v].producer >= 0)
            e->vals[v].producer = pos[e->vals[v].producer];
    memcpy(e->nodes, sorted, (size_t)e->n_nodes * sizeof(*sorted));
    free(sorted);
    free(pos);
    return 0;
}

int
sim_stage_end(const struct sim_exe *e, int k)
{
    return k + 1 < e->n_stages ? e->stage_node[k + 1] : e->n_nodes;
}

int
sim_xfer_find(const struct sim_exe *e, int v, int ipu)
{
    for (int x = 0; x < e->n_xfer; x++)
        if (e->xfer[x].val == v && e->xfer[x].dst == ipu)
            return x;
    return -1;
}

/* One exchange copy per (activation, IPU other than its producer's that reads it). */
static int
build_xfers(struct sim_exe *e, struct sim_err *err)
{
    size_t cap = 0;

    for (int s = 0; s < e->n_nodes; s++)
        cap += (size_t)e->nodes[s].n_in;
    e->xfer = calloc(cap + 1, sizeof(*e->xfer));
    if (e->xfer == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            const struct sim_val *val = v >= 0 ? &e->vals[v] : NULL;
            struct sim_xfer *x;
            if (val == NULL || val->kind != SIM_V_ACT || val->producer < 0 ||
                val->ipu == n->ipu || sim_xfer_find(e, v, n->ipu) >= 0)
                continue;
            x = &e->xfer[e->n_xfer++];
            x->val = v;
            x->src = val->ipu;
            x->dst = n->ipu;
            x->sstage = e->nodes[val->producer].stage;
            x->rstage = n->stage;     /* nodes are sorted by stage: the first reader's */
            x->off = -1;
            x->goff = -1;
            x->gfirst = x->glast = -1;
        }
    }
    return 0;
}

int
sim_place(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err)
{
    int rc;

    if (o->strategy < SIM_STRATEGY_DEFAULT || o->strategy > SIM_STRATEGY_PHASED)
        return sim_err_set(err, IPUOF_E_INVAL, "execution strategy %d is unknown: use 0 "
                           "(default), 1 (pipelined), 2 (sharded) or 3 (serial phased)",
                           o->strategy);
    if (o->n_blocks > 0 && o->blocks == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "%zu blocks announced but none given",
                           o->n_blocks);
    if (o->n_blocks > 0)
        rc = place_blocks(e, o, err);
    else
        rc = (place_attrs(e), 0);
    if (rc == 0)
        rc = number_stages(e, err);
    if (rc == 0)
        rc = check_order(e, err);
    if (rc == 0)
        rc = sort_by_stage(e, err);
    if (rc != 0)
        return rc;
    e->ipr = 1;
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        if ((unsigned)n->ipu + 1 > e->ipr)
            e->ipr = (unsigned)n->ipu + 1;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0)
                e->vals[n->out[j]].ipu = n->ipu;
        n->rnd = strcmp(n->op->name, "Dropout") == 0 || (n->op->flags & SIM_OPF_RANDOM) ||
                 (n->half && e->stochastic);
        e->n_rnd += n->rnd;
    }
    if (e->ipr > SIM_MAX_IPUS || (uint64_t)e->ipr * e->R > SIM_MAX_IPUS * 16u)
        return sim_err_set(err, IPUOF_E_INVAL, "the model needs %u IPUs per replica; at most "
                           "%d are supported", e->ipr, SIM_MAX_IPUS);
    rc = check_partition(e, o->partition_ipus, err);
    if (rc == 0)
        rc = build_xfers(e, err);
    if (rc != 0)
        return rc;
    e->strategy = o->strategy;
    if (e->strategy == SIM_STRATEGY_DEFAULT)
        e->strategy = o->n_blocks > 0 && e->n_stages > 1 ? SIM_STRATEGY_PIPELINED
                                                         : SIM_STRATEGY_SHARDED;
    return check_strategy(e, o, err);
}
