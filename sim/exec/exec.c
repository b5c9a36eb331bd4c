/*
 * exec.c — the executor: allocate the arenas and run buffers once, bind every kernel's
 * tensor views to them, and run device_iterations x replicas steps per sim_exe_run()
 * (the IPU threads of ipus.c interpret each IPU's program with the step helpers here).
 *
 * A step allocates nothing: views that point into the input and output run buffers
 * ("patches") are moved to the step's slot, then the scheduled kernels run in order and
 * outputs that are not written in place are copied or summed into their slots.
 * Every simulated IPU, (replica, IPU), runs on a crew thread of its own (crew.c, ipus.c),
 * with its own arenas, sharing the read-only weights. Kernels spread large ops over the
 * host thread pool (pool.c). Each IPU's arena exists once per stash slot (lane r * S + j).
 * Also holds the executable's accessors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exe.h"

void *
sim_val_ptr(const struct sim_exe *e, int v, unsigned r, unsigned L)
{
    const struct sim_val *val = &e->vals[v];

    if (val->kind == SIM_V_CONST)
        return (void *)val->ti.cdata;
    if (val->kind == SIM_V_ACT && val->off >= 0)
        return (char *)e->arenas[L * e->ipr + (unsigned)val->ipu] + val->off;
    if (val->kind == SIM_V_WEIGHT) {
        const struct sim_weight *w = &e->w[val->weight];
        if (w->kind == SIM_WEIGHT_BUFFER)
            return e->bufs + (size_t)r * e->bufs_bytes + w->off;
        return (char *)e->params + w->off;
    }
    return NULL;    /* input or zero-copy output: patched every step */
}

/* splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators"). */
uint64_t
sim_rng_seed(uint64_t seed, unsigned replica)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * ((uint64_t)replica + 1);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z != 0 ? z : 0x853c49e6748fea9bull;
}

/* The exchange buffers: per replica, each crossing activation and its gradient, depth
 * buffers each (the micro-batches between the send and the receive). */
static int
bind_xfers(struct sim_exe *e)
{
    size_t at = 0;

    for (int i = 0; i < e->n_xfer; i++) {
        struct sim_xfer *x = &e->xfer[i];
        size_t bytes = (e->vals[x->val].bytes + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
        x->depth = (unsigned)(x->rstage - x->sstage) + 1u;
        x->xoff = at;
        at += bytes * x->depth;
        x->gxoff = at;
        if (x->goff >= 0)
            at += bytes * x->depth;
    }
    e->xbytes = at;
    /* also when empty: ipus.c offsets into it and copies from it (0 bytes), which a null
     * pointer may not take */
    e->xbuf = sim_aligned_alloc(at * e->R);
    if (e->xbuf == NULL)
        return -1;
    memset(e->xbuf, 0, at * e->R);
    return 0;
}

void
sim_kern_init(struct sim_kern *k, const struct sim_enode *n, struct sim_tensor *views)
{
    k->label = n->label;
    k->params = n->params;
    k->n_in = n->n_in;
    k->n_out = n->n_out;
    k->in = views;
    k->out = views + n->n_in;
    k->scratch = NULL;
    k->saved = NULL;
    k->rng = NULL;
    k->act = n->act.kind != SIM_ACT_NONE ? &n->act : NULL;
}

/* The views of node n in lane L of replica r; patches registered from *n_patch on. */
static void
bind_node(struct sim_exe *e, const struct sim_enode *n, unsigned r, unsigned L,
          struct sim_tensor *views, size_t *n_patch)
{
    char *arena = e->arenas[L * e->ipr + (unsigned)n->ipu];

    for (int j = 0; j < n->n_in + n->n_out; j++) {
        int v = j < n->n_in ? n->in[j] : n->out[j - n->n_in];
        const struct sim_val *val;
        if (v < 0)
            continue;
        val = &e->vals[v];
        views[j].dtype = val->ti.dtype;
        views[j].shape = val->ti.shape;
        views[j].numel = val->ti.numel;
        /* another IPU's activation: its exchange copy here (that IPU's arena of this
         * lane may not exist: its slots are its own) */
        if (val->kind == SIM_V_ACT && val->ipu != n->ipu)
            views[j].data = arena + e->xfer[sim_xfer_find(e, v, n->ipu)].off;
        else
            views[j].data = sim_val_ptr(e, v, r, L);
        if (val->kind == SIM_V_INPUT)
            e->patches[(*n_patch)++] = (struct sim_patch){ &views[j], val->in_io, false };
        else if (val->kind == SIM_V_ACT && val->out_io >= 0 && val->ipu == n->ipu)
            e->patches[(*n_patch)++] = (struct sim_patch){ &views[j], val->out_io, true };
    }
}

int
sim_exec_bind(struct sim_exe *e, struct sim_err *err)
{
    size_t n_views = 0, n_patch = 0;
    unsigned R = e->R, S = e->S, N = (unsigned)e->n_stages;
    size_t lanes = (size_t)R * S;

    for (int s = 0; s < e->n_nodes; s++)
        n_views += (size_t)e->nodes[s].n_in + (size_t)e->nodes[s].n_out;
    e->arenas = calloc(lanes * e->ipr, sizeof(*e->arenas));
    e->kern = calloc(lanes * (size_t)e->n_nodes + 1, sizeof(*e->kern));
    e->views = calloc(lanes * n_views + 1, sizeof(*e->views));
    e->patches = calloc(lanes * n_views + 1, sizeof(*e->patches));
    e->patch_start = calloc(lanes * N + 1, sizeof(*e->patch_start));
    e->rng = calloc(lanes * (size_t)e->n_nodes + 1, sizeof(*e->rng));
    if (e->arenas == NULL || e->kern == NULL || e->views == NULL || e->patches == NULL ||
        e->patch_start == NULL || e->rng == NULL)
        goto oom;
    if (bind_xfers(e) != 0)
        goto oom;
    for (size_t i = 0; i < lanes * e->ipr; i++) {
        unsigned p = (unsigned)(i % e->ipr), j = (unsigned)(i / e->ipr % S);
        size_t bytes = e->arena_bytes[p];
        if (j >= e->slots[p])
            continue;
        e->arenas[i] = sim_zeroed_alloc(bytes);     /* host pages only where written */
        if (e->arenas[i] == NULL)
            goto oom;
    }
    for (int i = 0; i < e->n_in; i++) {
        e->in[i].buf = sim_aligned_alloc(e->in[i].run_bytes);
        if (e->in[i].buf == NULL)
            goto oom;
        memset(e->in[i].buf, 0, e->in[i].run_bytes);
    }
    for (int i = 0; i < e->n_out; i++) {
        e->out[i].buf = sim_aligned_alloc(e->out[i].run_bytes);
        if (e->out[i].buf == NULL)
            goto oom;
        memset(e->out[i].buf, 0, e->out[i].run_bytes);
    }
    for (unsigned L = 0; L < lanes; L++) {
        struct sim_tensor *views = e->views + (size_t)L * n_views;
        unsigned r = L / S;
        for (int s = 0; s < e->n_nodes; s++) {
            const struct sim_enode *n = &e->nodes[s];
            struct sim_kern *k = &e->kern[(size_t)L * e->n_nodes + s];
            char *arena = e->arenas[L * e->ipr + (unsigned)n->ipu];
            if (s == e->stage_node[n->stage])
                e->patch_start[L * N + (unsigned)n->stage] = (int)n_patch;
            sim_kern_init(k, n, views);
            views += n->n_in + n->n_out;
            if (arena == NULL)
                continue;       /* a slot this node's IPU does not use */
            k->rng = &e->rng[(size_t)L * e->n_nodes + s];
            if (n->scratch > 0)
                k->scratch = arena + n->scratch_off;
            if (n->saved > 0 && n->saved_off >= 0)
                k->saved = arena + n->saved_off;
            bind_node(e, n, r, L, (struct sim_tensor *)k->in, &n_patch);
        }
    }
    e->patch_start[lanes * N] = (int)n_patch;
    return sim_half_bind(e, err);
oom:
    return sim_err_set(err, IPUOF_E_NOMEM, "out of memory allocating the executable's "
                       "buffers");
}

/* Byte offset of the slot of output o written at micro-batch (d, a) by replica r, or -1
 * when this iteration is not returned. */
static int64_t
out_slot(const struct sim_exe *e, const struct sim_exe_io *o, unsigned d, unsigned a,
         unsigned r)
{
    uint64_t slot;

    switch (o->mode.kind) {
    case SIM_OUTPUT_ALL: slot = ((uint64_t)d * e->A + a) * e->R + r; break;
    case SIM_OUTPUT_FINAL: case SIM_OUTPUT_SUM: slot = r; break;
    case SIM_OUTPUT_EVERYN:
        if ((d + 1) % o->mode.n != 0)
            return -1;
        slot = ((uint64_t)((d + 1) / o->mode.n - 1) * e->A + a) * e->R + r;
        break;
    default:
        return -1;
    }
    return (int64_t)(slot * o->step_bytes);
}

/* Offset of micro-batch (d, a) of replica r in an input's run buffer. */
static uint64_t
in_slot(const struct sim_exe *e, const struct sim_exe_io *in, unsigned d, unsigned a,
        unsigned r)
{
    return (((uint64_t)d * e->A + a) * e->R + r) * in->step_bytes;
}

static void
sum_into(int dtype, void *dst, const void *src, int64_t n)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: {
        float *d = dst;
        const float *s = src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
        break;
    }
    case SIM_DTYPE_INT64: {
        uint64_t *d = dst;
        const uint64_t *s = src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
        break;
    }
    case SIM_DTYPE_INT32: {
        uint32_t *d = dst;
        const uint32_t *s = src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
        break;
    }
    case SIM_DTYPE_BOOL: {
        uint8_t *d = dst;
        const uint8_t *s = src;
        for (int64_t i = 0; i < n; i++)
            d[i] = d[i] || s[i];
        break;
    }
    default: {
        uint8_t *d = dst;
        const uint8_t *s = src;
        for (int64_t i = 0; i < n; i++)
            d[i] = (uint8_t)(d[i] + s[i]);
        break;
    }
    }
}

/* The stage that produces output o (stage 0 for inputs, constants and weights). */
static int
out_stage(const struct sim_exe *e, const struct sim_exe_io *o)
{
    const struct sim_val *v = &e->vals[o->val];

    return v->kind == SIM_V_ACT && v->producer >= 0 ? e->nodes[v->producer].stage : 0;
}

void
sim_exec_outputs(struct sim_exe *e, unsigned d, unsigned a, unsigned r, unsigned L, int k)
{
    for (int i = 0; i < e->n_out; i++) {
        const struct sim_exe_io *o = &e->out[i];
        const struct sim_val *v = &e->vals[o->val];
        const void *src;
        int64_t off;

        if (o->zero_copy || (k >= 0 && out_stage(e, o) != k))
            continue;
        if (o->mode.kind == SIM_OUTPUT_FINAL && (d + 1 != e->D || a + 1 != e->A))
            continue;
        off = out_slot(e, o, d, a, r);
        if (off < 0)
            continue;
        if (v->kind == SIM_V_INPUT)
            src = (const char *)e->in[v->in_io].buf + in_slot(e, &e->in[v->in_io], d, a, r);
        else
            src = sim_val_ptr(e, o->val, r, L);
        if (o->step_bytes == 0)
            continue;
        if (o->mode.kind == SIM_OUTPUT_SUM && (d > 0 || a > 0))
            sum_into(o->dtype, (char *)o->buf + off, src, v->ti.numel);
        else
            memcpy((char *)o->buf + off, src, o->step_bytes);
    }
}

/* Points patches [p0, p1) at micro-batch (d, a) of replica r. */
static void
patch_range(struct sim_exe *e, unsigned d, unsigned a, unsigned r, int p0, int p1)
{
    for (int p = p0; p < p1; p++) {
        const struct sim_patch *pt = &e->patches[p];
        if (pt->is_out) {
            const struct sim_exe_io *o = &e->out[pt->io];
            pt->view->data = (char *)o->buf + out_slot(e, o, d, a, r);
        } else {
            const struct sim_exe_io *in = &e->in[pt->io];
            pt->view->data = (char *)in->buf + in_slot(e, in, d, a, r);
        }
    }
}

/* splitmix64 finaliser of a word. */
static uint64_t
mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void
sim_exec_seed(struct sim_exe *e, unsigned d, unsigned a, unsigned r, unsigned L, int s0,
              int s1)
{
    uint64_t mb = e->mb_done + (uint64_t)d * e->A + a;

    for (int s = s0; s < s1; s++) {
        uint64_t z;
        if (!e->nodes[s].rnd)
            continue;
        z = mix64(sim_rng_seed(e->seed, r) ^ mix64((uint64_t)e->nodes[s].mnode + 1));
        z = mix64(z + 0x9e3779b97f4a7c15ull * (mb + 1));
        e->rng[(size_t)L * e->n_nodes + s] = z != 0 ? z : 0x853c49e6748fea9bull;
    }
}

void
sim_exec_patch_stage(struct sim_exe *e, unsigned d, unsigned a, unsigned r, unsigned L,
                     int k)
{
    unsigned i = L * (unsigned)e->n_stages + (unsigned)k;

    patch_range(e, d, a, r, e->patch_start[i], e->patch_start[i + 1]);
    if (e->n_rnd > 0)
        sim_exec_seed(e, d, a, r, L, e->stage_node[k], sim_stage_end(e, k));
}

bool
sim_exe_cancelled(const struct sim_exe *e, uint_fast64_t id)
{
    return atomic_load_explicit(&e->cancel_id, memory_order_relaxed) == id;
}

static uint64_t
host_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Adds one call of t0 .. now to node s's clock for pass (0 forward, 1 backward). */
static void
host_add(struct sim_exe *e, int s, int pass, uint64_t t0)
{
    atomic_fetch_add_explicit(&e->host[s].ns[pass], host_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->host[s].calls[pass], 1, memory_order_relaxed);
}

int
sim_exec_node_forward(struct sim_exe *e, int s, const struct sim_kern *k, struct sim_err *err)
{
    uint64_t t0;
    int rc;

    t0 = e->host != NULL ? host_ns() : 0;
    rc = e->nodes[s].half ? sim_half_forward(e, &e->nodes[s], k, err)
                          : e->nodes[s].op->forward(k, err);
    if (e->host != NULL)
        host_add(e, s, 0, t0);
    return rc;
}

int
sim_exec_node_backward(struct sim_exe *e, int s, const struct sim_kern *k,
                       const struct sim_tensor *dout, struct sim_tensor *din,
                       struct sim_err *err)
{
    uint64_t t0;
    int rc;

    t0 = e->host != NULL ? host_ns() : 0;
    rc = e->nodes[s].half ? sim_half_backward(e, &e->nodes[s], k, dout, din, err)
                          : e->nodes[s].op->backward(k, dout, din, err);
    if (e->host != NULL)
        host_add(e, s, 1, t0);
    return rc;
}

size_t
sim_exe_node_times(const struct sim_exe *e, struct sim_node_time *rows, size_t max)
{
    size_t n = 0;

    if (e->host == NULL)
        return 0;
    for (int s = 0; s < e->n_nodes && n < max; s++, n++) {
        rows[n].op = e->nodes[s].fused_op[0] != '\0' ? e->nodes[s].fused_op
                                                      : e->nodes[s].op->name;
        rows[n].label = e->nodes[s].label;
        for (int pass = 0; pass < 2; pass++) {
            rows[n].ns[pass] = atomic_load(&e->host[s].ns[pass]);
            rows[n].calls[pass] = atomic_load(&e->host[s].calls[pass]);
        }
    }
    return n;
}

int
sim_exe_crew(struct sim_exe *e, struct sim_err *err)
{
    unsigned units = e->R * e->ipr;
    unsigned n = e->ipr > 1 || units <= SIM_MAX_IPUS ? units : SIM_MAX_IPUS;

    if (e->crew != NULL)
        return 0;
    e->terr = calloc(units, sizeof(*e->terr));
    e->trc = calloc(units, sizeof(*e->trc));
    if (e->ipr > 1)
        e->rbar = sim_bar_new(e->R, e->ipr);
    if (e->terr != NULL && e->trc != NULL && (e->ipr == 1 || e->rbar != NULL))
        e->crew = sim_crew_new(n);
    if (e->crew == NULL) {
        sim_bar_free(e->rbar, e->R);
        e->rbar = NULL;
        free(e->terr);
        free(e->trc);
        e->terr = NULL;
        e->trc = NULL;
        return sim_err_set(err, IPUOF_E_NOMEM, "could not start the %u threads of the "
                           "simulated IPUs", n);
    }
    return 0;
}

/* The first failure of the simulated IPUs (by replica, then IPU), copied to err. */
int
sim_exe_crew_status(struct sim_exe *e, unsigned n, struct sim_err *err)
{
    for (unsigned i = 0; i < n; i++)
        if (e->trc[i] != 0 && e->trc[i] != IPUOF_E_CANCELLED) {
            if (err != NULL)
                *err = e->terr[i];
            return e->trc[i];
        }
    for (unsigned i = 0; i < n; i++)
        if (e->trc[i] != 0) {
            if (err != NULL)
                *err = e->terr[i];
            return e->trc[i];
        }
    return 0;
}

size_t
sim_exe_input_count(const struct sim_exe *e)
{
    return (size_t)e->n_in;
}

size_t
sim_exe_output_count(const struct sim_exe *e)
{
    return (size_t)e->n_out;
}

static void
fill_info(const struct sim_exe_io *io, struct sim_io_info *info)
{
    memset(info, 0, sizeof(*info));
    info->name = io->name;
    info->dtype = io->dtype;
    info->rank = io->step.rank;
    memcpy(info->dims, io->step.d, sizeof(info->dims));
    info->run_rank = io->run.rank;
    memcpy(info->run_dims, io->run.d, sizeof(info->run_dims));
    info->step_bytes = io->step_bytes;
    info->run_bytes = io->run_bytes;
    info->mode = io->mode;
    info->iterations = io->iters;
}

int
sim_exe_input_info(const struct sim_exe *e, size_t i, struct sim_io_info *info)
{
    if (i >= (size_t)e->n_in)
        return IPUOF_E_INVAL;
    fill_info(&e->in[i], info);
    info->iterations = e->D * e->A;
    return 0;
}

int
sim_exe_output_info(const struct sim_exe *e, size_t i, struct sim_io_info *info)
{
    if (i >= (size_t)e->n_out)
        return IPUOF_E_INVAL;
    fill_info(&e->out[i], info);
    return 0;
}

long
sim_exe_input_index(const struct sim_exe *e, const char *name)
{
    for (int i = 0; i < e->n_in; i++)
        if (strcmp(e->in[i].name, name) == 0)
            return i;
    return -1;
}

long
sim_exe_output_index(const struct sim_exe *e, const char *name)
{
    for (int i = 0; i < e->n_out; i++)
        if (strcmp(e->out[i].name, name) == 0)
            return i;
    return -1;
}

void *
sim_exe_input_buffer(struct sim_exe *e, size_t i)
{
    return i < (size_t)e->n_in ? e->in[i].buf : NULL;
}

const void *
sim_exe_output_buffer(const struct sim_exe *e, size_t i)
{
    return i < (size_t)e->n_out ? e->out[i].buf : NULL;
}

int
sim_exe_check_input(const struct sim_exe *e, size_t i, int dtype, int rank,
                    const int64_t *dims, struct sim_err *err)
{
    const struct sim_exe_io *io;
    struct sim_shape got;
    char want_s[160], got_s[160], step_s[160];

    if (i >= (size_t)e->n_in)
        return sim_err_set(err, IPUOF_E_INVAL, "input index %zu is out of range (%d inputs)",
                           i, e->n_in);
    io = &e->in[i];
    if (dtype != io->dtype)
        return sim_err_set(err, IPUOF_E_DTYPE, "input '%s' must be %s, not %s", io->name,
                           sim_dtype_name(io->dtype), sim_onnx_dtype_name(dtype));
    if (rank < 0 || rank > SIM_MAX_RANK || (rank > 0 && dims == NULL))
        return sim_err_set(err, IPUOF_E_SHAPE, "input '%s': rank %d is invalid", io->name,
                           rank);
    got.rank = rank;
    for (int k = 0; k < rank; k++)
        got.d[k] = dims[k];
    if (sim_shape_eq(&got, &io->run))
        return 0;
    if (rank == 0 && io->step.rank == 0 && e->D == 1 && e->A == 1 && e->R == 1)
        return 0;   /* one scalar step: [] is as good as [1] */
    sim_shape_fmt(&io->run, want_s, sizeof(want_s));
    sim_shape_fmt(&got, got_s, sizeof(got_s));
    if (io->step.rank > 0 && rank == io->run.rank && rank > 0) {
        bool rest = true;
        for (int k = 1; k < rank; k++)
            rest = rest && got.d[k] == io->run.d[k];
        if (rest && e->A > 1)
            return sim_err_set(err, IPUOF_E_SHAPE, "input '%s' has shape %s but one run needs "
                               "%s: dim 0 must be device_iterations (%u) x "
                               "gradient_accumulation (%u) x replicas (%u) x micro-batch "
                               "(%lld) = %lld", io->name, got_s, want_s, e->D, e->A, e->R,
                               (long long)io->step.d[0], (long long)io->run.d[0]);
        if (rest)
            return sim_err_set(err, IPUOF_E_SHAPE, "input '%s' has shape %s but one run needs "
                               "%s: dim 0 must be device_iterations (%u) x replicas (%u) x "
                               "micro-batch (%lld) = %lld", io->name, got_s, want_s, e->D,
                               e->R, (long long)io->step.d[0], (long long)io->run.d[0]);
    }
    return sim_err_set(err, IPUOF_E_SHAPE, "input '%s' has shape %s but one run needs %s "
                       "(one step is %s)", io->name, got_s, want_s,
                       sim_shape_fmt(&io->step, step_s, sizeof(step_s)));
}

int
sim_exe_tensor_info(const struct sim_exe *e, const char *name, int *dtype, int *rank,
                    int64_t *dims)
{
    for (int v = 0; v < e->m->n_vals; v++) {
        const struct sim_val *val = &e->vals[v];
        if (strcmp(e->m->vals[v].name, name) != 0)
            continue;
        if (val->kind == SIM_V_NONE)
            return IPUOF_E_NOTFOUND;
        *dtype = val->ti.dtype;
        *rank = val->ti.shape.rank;
        memcpy(dims, val->ti.shape.d, sizeof(int64_t) * (size_t)val->ti.shape.rank);
        return 0;
    }
    return IPUOF_E_NOTFOUND;
}

size_t
sim_exe_node_count(const struct sim_exe *e)
{
    return (size_t)e->n_nodes;
}

unsigned
sim_exe_device_iterations(const struct sim_exe *e)
{
    return e->D;
}

unsigned
sim_exe_replicas(const struct sim_exe *e)
{
    return e->R;
}

unsigned
sim_exe_micro_batch(const struct sim_exe *e)
{
    return e->B;
}

unsigned
sim_exe_gradient_accumulation(const struct sim_exe *e)
{
    return e->A;
}

int
sim_exe_is_training(const struct sim_exe *e)
{
    return e->tr != NULL;
}
