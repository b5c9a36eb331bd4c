/*
 * optim_state.c — a training executable's optimizer around the update: the state it keeps
 * (allocated at bind), its parameter groups (weight names resolved to a group per weight),
 * changing hyper-parameters and groups between runs (PopTorch's setOptimizer), and the state
 * tensors seen from outside, so that optimizer.state_dict() and load_state_dict() reach the
 * device through the weights calls.
 *
 * State tensors, named as torch.optim's state_dict names them, per trainable weight W:
 *   SGD with momentum:        optimizer:momentum_buffer:W
 *   Adam, AdamW, LAMB:        optimizer:exp_avg:W, optimizer:exp_avg_sq:W
 *   RMSprop:                  optimizer:square_avg:W, optimizer:momentum_buffer:W (momentum
 *                             > 0 in some group at compile), optimizer:grad_avg:W (centered)
 * each float32 of W's shape, and optimizer:step, an int64 scalar: the optimizer steps taken
 * (every weight's, as the executable steps all together); automatic loss scaling's
 * optimizer:loss_scale_update_factor (float32 scalar, 1 until it runs; written too) and
 * optimizer:final_loss_scale (float32 scalar, read only: the loss scale of the last step,
 * PopART's finalLossScale).
 * Does not: compute the update (optim.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "optim_internal.h"
#include "sim_int.h"

#define STATE_PREFIX "optimizer:"
#define STEP_COUNT (-1)
#define LS_FACTOR (-2)
#define FINAL_LS (-3)

/* One state tensor: its name (owned), weight (index in e->w; STEP_COUNT, LS_FACTOR or
 * FINAL_LS for the scalars) and flat buffer (1: mom1, 2: mom2, 3: mom3). */
struct sim_opt_state {
    char *name;
    int wi;
    int buf;
    uint64_t written;           /* e->writes at its last write (sim_exe_weight_written) */
};

/* Whether momentum is non-zero in any group of o. */
static bool
any_momentum(const struct sim_optimizer *o)
{
    if (o->momentum != 0.0f)
        return true;
    for (int g = 0; g < o->n_groups && g < SIM_OPT_MAX_GROUPS; g++)
        if (o->groups[g].momentum != 0.0f)
            return true;
    return false;
}

/* Which flat buffers kind o keeps: bit 0 mom1, bit 1 mom2, bit 2 mom3. */
static unsigned
buffers(const struct sim_optimizer *o)
{
    switch (o->kind) {
    case SIM_OPT_SGD:
        return any_momentum(o) || o->plan_momentum ? 1u : 0u;
    case SIM_OPT_ADAM:
    case SIM_OPT_ADAMW:
    case SIM_OPT_LAMB:
        return 3u;
    case SIM_OPT_RMSPROP:
        return 2u | (any_momentum(o) || o->plan_momentum ? 1u : 0u) | (o->centered ? 4u : 0u);
    default:
        return 0u;
    }
}

unsigned
sim_optim_state_floats(const struct sim_optimizer *o)
{
    unsigned b = buffers(o);

    return (b & 1u) + ((b >> 1) & 1u) + ((b >> 2) & 1u);
}

/* The state names of buffer b of kind (torch.optim's). */
static const char *
slot_name(int kind, int b)
{
    if (kind == SIM_OPT_RMSPROP)
        return b == 1 ? "momentum_buffer" : b == 2 ? "square_avg" : "grad_avg";
    if (kind == SIM_OPT_SGD)
        return "momentum_buffer";
    return b == 1 ? "exp_avg" : "exp_avg_sq";
}

static float *
buf_ptr(const struct sim_train *tr, int b)
{
    return b == 1 ? tr->mom1 : b == 2 ? tr->mom2 : tr->mom3;
}

/* The index in e->w of the weight called name, or -1. */
static int
weight_named(const struct sim_exe *e, const char *name)
{
    for (int i = 0; i < e->n_w; i++)
        if (strcmp(e->m->vals[e->w[i].val].name, name) == 0)
            return i;
    return -1;
}

/*
 * The parameter group of every weight of e under o into wgroup (e->n_w entries): 0 unless
 * one of o's groups lists it. A listed weight that is not trained (frozen, or reaching no
 * loss, as a torch parameter whose .grad stays None) is accepted: its group changes nothing.
 * Errors: IPUOF_E_NOTFOUND for a name that is no weight, IPUOF_E_INVAL for a weight that
 * two groups list.
 */
static int
resolve_groups(const struct sim_exe *e, const struct sim_optimizer *o, unsigned char *wgroup,
               struct sim_err *err)
{
    memset(wgroup, 0, (size_t)e->n_w + 1);
    for (int g = 1; g <= o->n_groups; g++) {
        const struct sim_opt_group *p = &o->groups[g - 1];
        for (size_t j = 0; j < p->n_weights; j++) {
            const char *name = p->weights[j] != NULL ? p->weights[j] : "(null)";
            int wi = weight_named(e, name);
            if (wi < 0)
                return sim_err_set(err, IPUOF_E_NOTFOUND, "optimizer parameter group %d "
                                   "lists '%s', which is not a weight of the model", g, name);
            if (wgroup[wi] != 0)
                return sim_err_set(err, IPUOF_E_INVAL, "weight '%s' is in optimizer "
                                   "parameter groups %d and %d; a weight belongs to one "
                                   "group", name, wgroup[wi], g);
            wgroup[wi] = (unsigned char)g;
        }
    }
    return 0;
}

/* The optimizer as the executable keeps it: o without the borrowed group names. */
static void
keep(struct sim_train *tr, const struct sim_optimizer *o)
{
    tr->opt = *o;
    for (int g = 0; g < SIM_OPT_MAX_GROUPS; g++) {
        tr->opt.groups[g].weights = NULL;
        tr->opt.groups[g].n_weights = 0;
    }
}

static float *
zeros(size_t n)
{
    float *p = sim_aligned_alloc((n ? n : 1) * sizeof(float));

    if (p != NULL)
        memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

/* The list of state tensors: the step count, then each trainable weight's buffers. */
static int
name_state(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    int kind = tr->opt.kind;
    long n = 3;

    for (int i = 0; i < e->n_w; i++)
        if (e->w[i].kind == SIM_WEIGHT_TRAINABLE)
            n += 3;
    tr->state = calloc((size_t)n, sizeof(*tr->state));
    if (tr->state == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory naming the optimizer state");
    tr->state[0] = (struct sim_opt_state){ strdup(STATE_PREFIX "step"), STEP_COUNT, 0 };
    tr->state[1] = (struct sim_opt_state){ strdup(STATE_PREFIX "loss_scale_update_factor"),
                                           LS_FACTOR, 0 };
    tr->state[2] = (struct sim_opt_state){ strdup(STATE_PREFIX "final_loss_scale"),
                                           FINAL_LS, 0 };
    tr->n_state = 3;
    if (tr->state[0].name == NULL || tr->state[1].name == NULL || tr->state[2].name == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory naming the optimizer state");
    for (int i = 0; i < e->n_w; i++) {
        if (e->w[i].kind != SIM_WEIGHT_TRAINABLE)
            continue;
        for (int b = 1; b <= 3; b++) {
            const char *wname = e->m->vals[e->w[i].val].name;
            const char *slot = slot_name(kind, b);
            size_t len;
            char *s;
            if (buf_ptr(tr, b) == NULL)
                continue;
            len = strlen(STATE_PREFIX) + strlen(slot) + 1 + strlen(wname) + 1;
            s = malloc(len);
            if (s == NULL)
                return sim_err_set(err, IPUOF_E_NOMEM, "out of memory naming the optimizer "
                                   "state");
            snprintf(s, len, STATE_PREFIX "%s:%s", slot, wname);
            tr->state[tr->n_state++] = (struct sim_opt_state){ s, i, b };
        }
    }
    return 0;
}

int
sim_optim_bind(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    unsigned b = buffers(&tr->opt);
    int rc;

    tr->wgroup = calloc((size_t)e->n_w + 1, 1);
    tr->mstarted = calloc((size_t)e->n_w + 1, sizeof(bool));
    tr->mom1 = (b & 1u) ? zeros(e->n_train) : NULL;
    tr->mom2 = (b & 2u) ? zeros(e->n_train) : NULL;
    tr->mom3 = (b & 4u) ? zeros(e->n_train) : NULL;
    if (tr->wgroup == NULL || tr->mstarted == NULL || ((b & 1u) && tr->mom1 == NULL) ||
        ((b & 2u) && tr->mom2 == NULL) || ((b & 4u) && tr->mom3 == NULL))
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory allocating the optimizer state");
    rc = resolve_groups(e, &tr->opt, tr->wgroup, err);
    if (rc != 0)
        return rc;
    keep(tr, &tr->opt);
    tr->ls_factor = 1.0f;
    tr->final_ls = tr->opt.loss_scaling;
    return name_state(e, err);
}

void
sim_optim_free(struct sim_train *tr)
{
    free(tr->mom1);
    free(tr->mom2);
    free(tr->mom3);
    free(tr->wgroup);
    free(tr->mstarted);
    for (long i = 0; i < tr->n_state; i++)
        free(tr->state[i].name);
    free(tr->state);
}

/* Takes e->busy for a call that must not overlap a run. */
static int
lock(struct sim_exe *e, struct sim_err *err)
{
    int expected = 0;

    if (!atomic_compare_exchange_strong(&e->busy, &expected, 1))
        return sim_err_set(err, IPUOF_E_BUSY, "the executable is running");
    return 0;
}

int
sim_exe_set_optimizer(struct sim_exe *e, const struct sim_optimizer *o, struct sim_err *err)
{
    unsigned char *wgroup;
    unsigned want;
    int rc;

    if (e->tr == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "not a training executable (compile with a "
                           "loss to train)");
    rc = sim_optimizer_check(o, err);
    if (rc != 0)
        return rc;
    if (o->kind != e->tr->opt.kind)
        return sim_err_set(err, IPUOF_E_INVAL, "the executable was compiled for %s; switching "
                           "to %s needs a new compile (its state is planned at compile time)",
                           sim_optim_kind_name(e->tr->opt.kind), sim_optim_kind_name(o->kind));
    want = buffers(o);
    if ((o->kind == SIM_OPT_SGD || o->kind == SIM_OPT_RMSPROP) && !any_momentum(o))
        want &= ~1u;    /* planning is a compile-time choice: only a momentum needs it */
    if ((want & 1u) && e->tr->mom1 == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "%s was compiled without momentum, so no "
                           "momentum buffer was planned; compile with a non-zero momentum "
                           "(in any parameter group) or with plan_momentum (PopTorch: "
                           "momentum given or marked variable) to change it later",
                           sim_optim_kind_name(o->kind));
    if ((want & 4u) && e->tr->mom3 == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "RMSprop was compiled with centered=False, so "
                           "no average gradient was planned; compile with centered=True to "
                           "change it later");
    wgroup = calloc((size_t)e->n_w + 1, 1);
    if (wgroup == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    rc = resolve_groups(e, o, wgroup, err);
    if (rc == 0)
        rc = lock(e, err);
    if (rc != 0) {
        free(wgroup);
        return rc;
    }
    if (o->auto_loss_scaling && !e->tr->opt.auto_loss_scaling)
        e->tr->als_steps = 0;   /* the update period counts from here */
    keep(e->tr, o);
    if (e->tr->steps == 0)
        e->tr->final_ls = o->loss_scaling * (o->auto_loss_scaling ? e->tr->ls_factor : 1.0f);
    free(e->tr->wgroup);
    e->tr->wgroup = wgroup;
    atomic_store(&e->busy, 0);
    return 0;
}

int
sim_exe_get_optimizer(const struct sim_exe *e, struct sim_optimizer *o)
{
    if (e->tr == NULL)
        return IPUOF_E_INVAL;
    *o = e->tr->opt;
    return 0;
}

uint64_t
sim_exe_optimizer_steps(const struct sim_exe *e)
{
    return e->tr != NULL ? e->tr->steps : 0;
}

int
sim_exe_set_seed(struct sim_exe *e, uint64_t seed, struct sim_err *err)
{
    int rc = lock(e, err);

    if (rc != 0)
        return rc;
    e->seed = seed;
    e->mb_done = 0;     /* the generators restart from the first micro-batch */
    e->half_rng = sim_half_rng_seed(seed);  /* and stochastic rounding of weight updates */
    atomic_store(&e->busy, 0);
    return 0;
}

/* ---- the state seen as weights --------------------------------------------------------- */

long
sim_optim_state_index(const struct sim_exe *e, const char *name)
{
    if (e->tr == NULL || name == NULL || strncmp(name, STATE_PREFIX, strlen(STATE_PREFIX)) != 0)
        return -1;
    for (long k = 0; k < e->tr->n_state; k++)
        if (strcmp(e->tr->state[k].name, name) == 0)
            return (long)e->n_w + k;
    return -1;
}

int
sim_optim_state_missing(const struct sim_exe *e, const char *name, struct sim_err *err)
{
    const struct sim_optimizer *o = &e->tr->opt;
    unsigned b = buffers(o);
    char slots[96] = "";
    size_t used = 0;

    for (int k = 1; k <= 3; k++)
        if (b & (1u << (k - 1)))
            used += (size_t)snprintf(slots + used, sizeof slots - used, "%s%s",
                                     used ? ", " : "", slot_name(o->kind, k));
    if (used == 0)
        return sim_err_set(err, IPUOF_E_NOTFOUND, "the executable's optimizer (%s) keeps no "
                           "state tensor '%s': its only state is " STATE_PREFIX "step (no "
                           "momentum was planned)", sim_optim_kind_name(o->kind), name);
    return sim_err_set(err, IPUOF_E_NOTFOUND, "the executable's optimizer (%s) keeps no "
                       "state tensor '%s': its state is " STATE_PREFIX "step and "
                       STATE_PREFIX "<slot>:<trained weight>, slot %s",
                       sim_optim_kind_name(o->kind), name, slots);
}

/* The state tensor of index idx (as sim_optim_state_index gives), or NULL. */
static const struct sim_opt_state *
state_at(const struct sim_exe *e, long idx)
{
    long k = idx - (long)e->n_w;

    if (e->tr == NULL || k < 0 || k >= e->tr->n_state)
        return NULL;
    return &e->tr->state[k];
}

uint64_t
sim_optim_state_written(const struct sim_exe *e, long idx)
{
    const struct sim_opt_state *s = state_at(e, idx);

    return s != NULL ? s->written : 0;
}

int
sim_optim_state_info(const struct sim_exe *e, long idx, struct sim_weight_info *info)
{
    const struct sim_opt_state *s = state_at(e, idx);
    const struct sim_val *v;

    if (s == NULL)
        return IPUOF_E_INVAL;
    memset(info, 0, sizeof(*info));
    info->name = s->name;
    info->kind = SIM_WEIGHT_OPTIMIZER_STATE;
    if (s->wi == STEP_COUNT) {
        info->dtype = SIM_DTYPE_INT64;
        info->bytes = sizeof(int64_t);
        return 0;
    }
    if (s->wi < 0) {
        info->dtype = SIM_DTYPE_FLOAT;
        info->bytes = sizeof(float);
        return 0;
    }
    v = &e->vals[e->w[s->wi].val];
    info->dtype = SIM_DTYPE_FLOAT;
    info->rank = v->ti.shape.rank;
    memcpy(info->dims, v->ti.shape.d, sizeof(info->dims));
    info->bytes = e->w[s->wi].bytes;
    return 0;
}

int
sim_optim_state_io(struct sim_exe *e, long idx, void *buf, size_t bytes, bool write,
                   struct sim_err *err)
{
    const struct sim_opt_state *s = state_at(e, idx);
    struct sim_weight_info info;
    int64_t step = 0;
    float *data, f = 0.0f;
    int rc;

    if (s == NULL)
        return sim_err_set(err, IPUOF_E_NOTFOUND, "no such optimizer state tensor");
    sim_optim_state_info(e, idx, &info);
    if (bytes != info.bytes)
        return sim_err_set(err, IPUOF_E_SHAPE, "optimizer state '%s' is %zu bytes (%s), not "
                           "%zu", s->name, info.bytes, s->wi == STEP_COUNT ? "one int64" :
                           s->wi < 0 ? "one float32" : "float32 of its weight's shape", bytes);
    if (s->wi == FINAL_LS && write)
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer state '%s' is read only (the loss "
                           "scale of the last step); write " STATE_PREFIX
                           "loss_scale_update_factor or set loss_scaling instead", s->name);
    if (s->wi == LS_FACTOR && write) {
        memcpy(&f, buf, sizeof f);
        if (!(f > 0.0f) || isinf(f))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer state '%s' is a loss scale "
                               "factor; %g is not > 0 and finite", s->name, (double)f);
    }
    if (s->wi == STEP_COUNT && write) {
        memcpy(&step, buf, sizeof step);
        if (step < 0)
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer state '%s' is a step count; "
                               "%lld is negative", s->name, (long long)step);
    }
    rc = lock(e, err);
    if (rc != 0)
        return rc;
    if (write)
        e->tr->state[idx - (long)e->n_w].written = ++e->writes;
    if (s->wi == LS_FACTOR || s->wi == FINAL_LS) {
        if (write)
            e->tr->ls_factor = f;
        else
            memcpy(buf, s->wi == LS_FACTOR ? &e->tr->ls_factor : &e->tr->final_ls, sizeof f);
    } else if (s->wi < 0) {
        if (write) {
            e->tr->steps = (uint64_t)step;
        } else {
            step = (int64_t)e->tr->steps;
            memcpy(buf, &step, sizeof step);
        }
    } else {
        data = buf_ptr(e->tr, s->buf) + e->w[s->wi].off / sizeof(float);
        if (write) {
            memcpy(data, buf, bytes);
            if (s->buf == 1)
                e->tr->mstarted[s->wi] = true;  /* a loaded momentum_buffer is used */
        } else {
            memcpy(buf, data, bytes);
        }
    }
    atomic_store(&e->busy, 0);
    return 0;
}
