/*
 * models.c — the executable cache and the bookkeeping of models on IPUs. See models.h.
 *
 * Cache: an entry keeps the model bytes it was compiled from, so a hit is an exact byte
 * comparison (hashes only narrow the search): one client can never be handed another
 * client's executable by a hash collision. An entry serves one live model at a time; a
 * second client compiling the same model while the first still uses it gets its own
 * compile, which then also stays in the cache. Entries not in use are evicted least
 * recently used first beyond cache_entries, beyond host_memory of run buffers, and
 * beyond cache_bytes of everything the entries hold (cache_entry_bytes: model bytes,
 * weights, every buffer, copies made at compile such as reordered Conv weights), counting
 * the entries in use.
 */
#include "models.h"

#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "ipuof/status.h"
#include "log.h"
#include "wiremap.h"

void
cache_init(struct cache *k, unsigned max, uint64_t max_idle_host, uint64_t max_bytes)
{
    memset(k, 0, sizeof *k);
    pthread_mutex_init(&k->mu, NULL);
    k->max = max;
    k->max_idle_host = max_idle_host;
    k->max_bytes = max_bytes;
    k->max_arena = UINT64_MAX;
}

uint64_t
cache_entry_bytes(const struct cache_entry *e)
{
    uint64_t sum = e->len + e->host_bytes;

    if (e->exe == NULL)
        return sum;
    for (size_t i = 0; i < sim_exe_ipu_count(e->exe); i++) {
        struct sim_mem_report rep;
        if (sim_exe_memory(e->exe, i, &rep) != 0)
            continue;
        if (e->parent == NULL && rep.replica == 0)
            sum += rep.weights;
        sum += rep.activations + rep.gradients + rep.optimizer + rep.stash;
    }
    for (size_t i = 0; i < sim_exe_weight_count(e->exe); i++) {
        struct sim_weight_info w;
        if (sim_exe_weight_info(e->exe, i, &w) == 0)
            sum += w.bytes;
    }
    return sum + sim_exe_host_copy_bytes(e->exe);
}

static void
entry_free(struct cache_entry *e)
{
    sim_exe_free(e->exe);
    sim_model_free(e->model);
    free(e->bytes);
    free(e->key);
    free(e);
}

/* Run-buffer bytes held by entries nothing uses. Caller holds mu. */
static uint64_t
idle_host_locked(const struct cache *k)
{
    uint64_t sum = 0;

    for (const struct cache_entry *e = k->head; e != NULL; e = e->next)
        if (!e->in_use && e->refs == 0)
            sum += e->host_bytes;
    return sum;
}

/* Takes e off the list (pp points at it) and frees it. Caller holds mu. */
static void
unlink_free_locked(struct cache *k, struct cache_entry **pp)
{
    struct cache_entry *e = *pp;

    *pp = e->next;
    k->n--;
    k->bytes = k->bytes >= e->held ? k->bytes - e->held : 0;
    k->arena = k->arena >= e->arena ? k->arena - e->arena : 0;
    entry_free(e);
}

/* The link to the least recently used entry nothing uses or borrows from (with arena, only
 * among those whose arenas take something), or NULL. Caller holds mu. */
static struct cache_entry **
lru_unused_locked(struct cache *k, bool arena)
{
    struct cache_entry **victim = NULL;

    for (struct cache_entry **pp = &k->head; *pp != NULL; pp = &(*pp)->next)
        if (!(*pp)->in_use && (*pp)->refs == 0 && (!arena || (*pp)->arena > 0) &&
            (victim == NULL || (*pp)->last_use < (*victim)->last_use))
            victim = pp;
    return victim;
}

/* Evicts unused entries, oldest first, while there are more than max, their run buffers
 * take more than max_idle_host bytes, all entries hold more than max_bytes or their arenas
 * may take more than max_arena. Caller holds mu. */
static void
trim_locked(struct cache *k)
{
    while (k->n > k->max || idle_host_locked(k) > k->max_idle_host || k->bytes > k->max_bytes ||
           k->arena > k->max_arena) {
        struct cache_entry **victim = lru_unused_locked(k, false);
        if (victim == NULL)
            return;
        k->evictions++;
        log_info("executable cache: evicted '%s' (%llu bytes held; %u entries, %llu bytes "
                 "before; cache_bytes = %llu, cache_entries = %u)", (*victim)->name,
                 (unsigned long long)(*victim)->held, k->n, (unsigned long long)k->bytes,
                 (unsigned long long)k->max_bytes, k->max);
        unlink_free_locked(k, victim);
    }
}

void
cache_destroy(struct cache *k)
{
    struct cache_entry *e, *next;

    for (e = k->head; e != NULL; e = next) {
        next = e->next;
        entry_free(e);
    }
    k->head = NULL;
    k->n = 0;
    pthread_mutex_destroy(&k->mu);
}

struct cache_entry *
cache_acquire(struct cache *k, const uint8_t *bytes, size_t len, const char *key)
{
    uint64_t h = cache_hash(bytes, len, key);
    struct cache_entry *hit = NULL;

    pthread_mutex_lock(&k->mu);
    for (struct cache_entry *e = k->head; e != NULL; e = e->next) {
        if (e->reusable && !e->in_use && e->hash == h && e->len == len &&
            strcmp(e->key, key) == 0 &&
            memcmp(e->bytes, bytes, len) == 0) {
            hit = e;
            hit->in_use = 1;
            break;
        }
    }
    if (hit)
        k->hits++;
    else
        k->misses++;
    pthread_mutex_unlock(&k->mu);
    return hit;
}

void
cache_set_limits(struct cache *k, uint64_t max_idle_host, uint64_t max_bytes)
{
    pthread_mutex_lock(&k->mu);
    k->max_idle_host = max_idle_host;
    k->max_bytes = max_bytes;
    trim_locked(k);
    pthread_mutex_unlock(&k->mu);
}

void
cache_set_arena_limit(struct cache *k, uint64_t max_arena)
{
    if (max_arena == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        max_arena = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 4 * 3
                                          : UINT64_MAX;
    }
    pthread_mutex_lock(&k->mu);
    k->max_arena = max_arena;
    trim_locked(k);
    pthread_mutex_unlock(&k->mu);
}

int
cache_arena_room(struct cache *k, uint64_t need, uint64_t *held, uint64_t *limit)
{
    int fits;

    pthread_mutex_lock(&k->mu);
    for (;;) {
        fits = need <= k->max_arena && k->arena <= k->max_arena - need;
        struct cache_entry **victim = fits ? NULL : lru_unused_locked(k, true);
        if (victim == NULL)
            break;
        k->evictions++;
        log_info("executable cache: evicted '%s' (its arenas may take %llu bytes; a compile "
                 "needs %llu beside %llu, arena_memory = %llu)", (*victim)->name,
                 (unsigned long long)(*victim)->arena, (unsigned long long)need,
                 (unsigned long long)k->arena, (unsigned long long)k->max_arena);
        unlink_free_locked(k, victim);
    }
    *held = k->arena;
    *limit = k->max_arena;
    pthread_mutex_unlock(&k->mu);
    return fits;
}

void
cache_insert(struct cache *k, struct cache_entry *e)
{
    if (e->exe != NULL)
        e->host_bytes = models_host_bytes(e->exe);
    if (e->exe != NULL || e->held == 0)
        e->held = cache_entry_bytes(e);
    if (e->exe != NULL)
        e->arena = sim_exe_host_arena_bytes(e->exe);
    pthread_mutex_lock(&k->mu);
    e->in_use = 1;
    e->next = k->head;
    k->head = e;
    k->n++;
    k->inserted++;
    k->bytes += e->held;
    k->arena += e->arena;
    trim_locked(k);
    pthread_mutex_unlock(&k->mu);
}

void
cache_release(struct cache *k, struct cache_entry *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&k->mu);
    e->in_use = 0;
    e->last_use = ++k->releases;
    /* Kept for a later compile, it holds no thread: its IPUs' threads start at its next run. */
    sim_exe_idle(e->exe);
    /* Entries that cannot be reused go once nothing uses them or borrows their model. */
    while (e != NULL && !e->reusable && !e->in_use && e->refs == 0) {
        struct cache_entry *parent = e->parent;
        for (struct cache_entry **pp = &k->head; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == e) {
                unlink_free_locked(k, pp);
                break;
            }
        }
        if (parent != NULL)
            parent->refs--;
        e = parent;
    }
    trim_locked(k);
    pthread_mutex_unlock(&k->mu);
}

uint64_t
cache_hash(const uint8_t *bytes, size_t len, const char *key)
{
    /* FNV-1a's multiply over 8-byte words in four independent lanes (a model is hundreds of
     * megabytes: byte-wise FNV took about 0.7 s per pass over vgg11's 531 MB), then FNV-1a
     * over the tail, the lanes and the key. A hit is confirmed with memcmp, so the hash
     * only has to spread. */
    const uint64_t prime = 1099511628211ull;
    uint64_t lane[4] = { 1469598103934665603ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                         0x165667b19e3779f9ull };
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;

    for (; i + 32 <= len; i += 32)
        for (int j = 0; j < 4; j++) {
            uint64_t w;
            memcpy(&w, bytes + i + 8 * j, sizeof(w));
            lane[j] = (lane[j] ^ w) * prime;
        }
    for (; i < len; i++)
        h = (h ^ bytes[i]) * prime;
    for (int j = 0; j < 4; j++)
        h = (h ^ lane[j]) * prime;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * prime;
    return h;
}

/* ---- models on IPUs --------------------------------------------------------------------- */

/* The IPUs of m that exist in the inventory and in m->mem[]: never index past either. */
static unsigned
model_ipus(const struct dev_inventory *inv, const struct model *m)
{
    unsigned n = m->nipus < CFG_MAX_IPUS ? m->nipus : CFG_MAX_IPUS;

    if (m->first_ipu >= inv->n)
        return 0;
    return n < inv->n - m->first_ipu ? n : inv->n - m->first_ipu;
}

uint64_t
models_host_bytes(const struct sim_exe *e)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info io;
        if (sim_exe_input_info(e, i, &io) == 0)
            sum += io.run_bytes;
    }
    for (size_t i = 0; i < sim_exe_output_count(e); i++) {
        struct sim_io_info io;
        if (sim_exe_output_info(e, i, &io) == 0)
            sum += io.run_bytes;
    }
    return sum;
}

uint64_t
models_host_used(const struct model *list)
{
    uint64_t sum = 0;

    for (const struct model *m = list; m != NULL; m = m->next)
        sum += m->host;
    return sum;
}

void
model_place(struct dev_inventory *inv, struct model *m)
{
    for (unsigned i = 0; i < model_ipus(inv, m); i++) {
        struct dev_ipu *d = &inv->ipus[m->first_ipu + i];
        d->memory_used += m->mem[i];
        d->memory_stash += m->stash[i];
        d->memory_offchip += m->offchip[i];
    }
    if (model_ipus(inv, m) > 0)
        inv->ipus[m->first_ipu].host_used += m->host;
    m->placed = 1;
}

void
model_unplace(struct dev_inventory *inv, struct model *m)
{
    if (!m->placed)
        return;
    for (unsigned i = 0; i < model_ipus(inv, m); i++) {
        struct dev_ipu *d = &inv->ipus[m->first_ipu + i];
        d->memory_used = d->memory_used >= m->mem[i] ? d->memory_used - m->mem[i] : 0;
        d->memory_stash = d->memory_stash >= m->stash[i] ? d->memory_stash - m->stash[i] : 0;
        d->memory_offchip =
            d->memory_offchip >= m->offchip[i] ? d->memory_offchip - m->offchip[i] : 0;
        if (i == 0)
            d->host_used = d->host_used >= m->host ? d->host_used - m->host : 0;
    }
    m->placed = 0;
}

void
models_count_steps(struct dev_inventory *inv, const struct model *m, uint64_t steps)
{
    for (unsigned i = 0; i < model_ipus(inv, m); i++)
        inv->ipus[m->first_ipu + i].steps_run += steps;
}

void
model_free(struct dev_inventory *inv, struct cache *k, struct model *m)
{
    if (m == NULL)
        return;
    model_unplace(inv, m);
    cache_release(k, m->entry);
    free(m);
}

void
models_update_loaded(struct dev_inventory *inv, const struct dev_partition *p,
                     const struct model *list)
{
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->count; i++) {
        struct dev_ipu *d = &inv->ipus[p->first + i];
        size_t used = 0;
        d->loaded[0] = '\0';
        for (const struct model *m = list; m != NULL; m = m->next) {
            if (d->id < m->first_ipu || d->id >= m->first_ipu + m->nipus)
                continue;
            if (used + strlen(m->name) + 2 >= sizeof d->loaded)
                break;
            used += (size_t)snprintf(d->loaded + used, sizeof d->loaded - used, "%s%s",
                                     used ? "," : "", m->name);
        }
    }
}

uint64_t
models_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void
models_tensor_info(Ipuof__TensorInfo *ti, const struct sim_io_info *io, int64_t *dims,
                 int64_t *step, Ipuof__OutputMode *mode)
{
    ipuof__tensor_info__init(ti);
    ti->name = (char *)io->name;
    ti->dtype = (Ipuof__DType)wiremap_to_wire(&wiremap_dtype, io->dtype,
                                              IPUOF__DTYPE__DTYPE_UNDEFINED);
    for (int d = 0; d < io->run_rank; d++)
        dims[d] = io->run_dims[d];
    for (int d = 0; d < io->rank; d++)
        step[d] = io->dims[d];
    ti->n_dims = (size_t)io->run_rank;
    ti->dims = dims;
    ti->n_step_dims = (size_t)io->rank;
    ti->step_dims = step;
    ti->bytes = io->run_bytes;
    if (mode != NULL) {
        ipuof__output_mode__init(mode);
        mode->name = (char *)io->name;
        mode->kind = (Ipuof__OutputKind)wiremap_to_wire(&wiremap_output_kind, io->mode.kind,
                                                        IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT);
        mode->n = io->mode.n;
        ti->mode = mode;
    }
}

/* Copies the weight names of w's groups into one block (pointers, then the strings), and
 * points each group of o at its part. NULL when out of memory. */
static char **
copy_group_names(const Ipuof__Optimizer *w, struct sim_optimizer *o)
{
    size_t n = 0, bytes = 0;
    char **block, *s;

    for (size_t g = 0; g < w->n_groups; g++)
        for (size_t j = 0; j < w->groups[g]->n_weights; j++) {
            n++;
            bytes += strlen(w->groups[g]->weights[j]) + 1;
        }
    block = malloc((n + 1) * sizeof(char *) + bytes + 1);
    if (block == NULL)
        return NULL;
    s = (char *)(block + n + 1);
    n = 0;
    for (size_t g = 0; g < w->n_groups; g++) {
        o->groups[g].weights = (const char *const *)(block + n);
        for (size_t j = 0; j < w->groups[g]->n_weights; j++) {
            size_t len = strlen(w->groups[g]->weights[j]) + 1;
            memcpy(s, w->groups[g]->weights[j], len);
            block[n++] = s;
            s += len;
        }
    }
    return block;
}

int
models_optimizer(const Ipuof__Optimizer *w, struct sim_optimizer *o, char **names, char *msg,
                 size_t len)
{
    size_t n_names = 0;
    int kind;

    *names = NULL;
    if (w == NULL || w->kind == IPUOF__OPTIMIZER_KIND__OPTIMIZER_DEFAULT) {
        sim_optimizer_init(o, SIM_OPT_SGD);
        o->lr = 0.01f;
        return 0;
    }
    if (enummap_a_to_b(&wiremap_optimizer, w->kind, &kind) < 0) {
        wiremap_refuse(&wiremap_optimizer, w->kind, "the optimizer", msg, len);
        return -1;
    }
    if (w->n_groups > SIM_OPT_MAX_GROUPS) {
        snprintf(msg, len, "the optimizer has %zu parameter groups besides the first; at most "
                 "%d", w->n_groups, SIM_OPT_MAX_GROUPS);
        return -1;
    }
    for (size_t g = 0; g < w->n_groups; g++)
        n_names += w->groups[g]->n_weights;
    if (n_names > SIM_OPT_MAX_GROUP_WEIGHTS) {
        snprintf(msg, len, "the optimizer's parameter groups list %zu weights; at most %d",
                 n_names, SIM_OPT_MAX_GROUP_WEIGHTS);
        return -1;
    }
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = w->lr;
    o->weight_decay = w->weight_decay;
    o->momentum = w->momentum;
    o->dampening = w->dampening;
    o->nesterov = w->nesterov;
    o->beta1 = w->beta1;
    o->beta2 = w->beta2;
    o->eps = w->eps;
    o->alpha = w->alpha;
    o->centered = w->centered;
    o->tf_variant = w->tf_variant;
    o->bias_correction = !w->no_bias_correction;
    o->max_grad_norm = w->max_grad_norm;
    o->max_weight_norm = w->max_weight_norm;
    o->loss_scaling = w->loss_scaling != 0.0f ? w->loss_scaling : 1.0f;   /* 0: unset */
    o->velocity_scaling = w->velocity_scaling != 0.0f ? w->velocity_scaling : 1.0f;
    o->plan_momentum = w->plan_momentum;
    o->accum_half = w->accum_float16;
    o->first_half = w->first_order_float16;
    o->second_half = w->second_order_float16;
    o->auto_loss_scaling = w->auto_loss_scaling;
    o->als_period = w->als_update_period != 0 ? w->als_update_period : 1;
    o->als_bin_edge = w->als_bin_edge != 0.0f ? w->als_bin_edge : 0.125f;
    o->als_threshold = w->als_threshold;
    o->n_groups = (int)w->n_groups;
    for (size_t g = 0; g < w->n_groups; g++) {
        const Ipuof__OptimizerGroup *p = w->groups[g];
        o->groups[g] = (struct sim_opt_group){ p->lr, p->weight_decay, p->momentum,
                                               p->dampening, p->nesterov, p->beta1, p->beta2,
                                               p->eps, p->alpha, NULL, p->n_weights };
    }
    if (w->n_groups > 0) {
        *names = (char *)copy_group_names(w, o);
        if (*names == NULL) {
            snprintf(msg, len, "out of memory copying the optimizer's parameter groups");
            return -1;
        }
    }
    return 0;
}

void
models_run_cost(const struct sim_exe *e, Ipuof__RunCost *rc, double *busy)
{
    struct sim_cost_report rep;
    int code;

    ipuof__run_cost__init(rc);
    memset(&rep, 0, sizeof rep);
    code = sim_exe_cost(e, &rep);
    if (code != IPUOF_OK) {
        rc->code = (uint32_t)code;
        rc->reason = (char *)(code == IPUOF_E_UNSUPPORTED
                                  ? "this ipuofd's simulator does not model device time yet"
                                  : "the simulator has no cost figures for this run");
        return;
    }
    if (rep.n_ipus > SIM_MAX_IPUS)
        rep.n_ipus = SIM_MAX_IPUS;
    memcpy(busy, rep.busy, rep.n_ipus * sizeof *busy);
    rc->device_seconds = rep.device_seconds;
    rc->samples_per_s = rep.samples_per_s;
    rc->n_busy = rep.n_ipus;
    rc->busy = busy;
    rc->bottleneck_stage = rep.bottleneck_stage;
}
