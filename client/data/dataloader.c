/*
 * dataloader.c — the host data loader: combined batches of B x D x A x R items from a
 * dataset's callbacks, one contiguous buffer per field, a reproducible shuffle per epoch,
 * and an optional background thread that prepares the next batch while the caller uses the
 * current one (see "data loading" in ipuof/client.h for the contract).
 *
 * Who touches what. The "producer" fills batch slots: the caller's thread inside
 * ipuof_dataloader_next() in sync mode, the loader's own thread in async mode. Only the
 * producer touches the permutation and the get() argument array. The "consumer" is the
 * caller's thread: it owns the position of the next batch to return and the slot it has
 * handed out. In async mode the slots' states, the producer's position and the flags below
 * are shared under mu; gen and stop are also atomics so that the producer can see a
 * cancellation between two get() calls without taking the lock.
 *
 * Invariant while the producer is active: the slots it has filled (READY) or is filling
 * hold, in order, the batches that follow the consumer's position, and prod_* is the one
 * after them. Moving the consumer anywhere else (set_epoch, reset, a retry after a failed
 * batch) restarts the producer from the consumer's position: gen is bumped, so the batch
 * being filled is dropped at the next item, and READY slots are freed.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_workers.h"
#include "client_internal.h"
#include "ipuof/client.h"

#define ERRMSG_MAX 512
#define SYNC_SLOTS 1
#define ASYNC_SLOTS 2               /* the batch the caller holds, and the next one */
#define MAX_SAMPLE_RANK 7           /* a batch's tensor adds dim 0; struct ipuof_tensor has 8 */

enum slot_state {
    SLOT_FREE = 0,
    SLOT_FILLING,                   /* the producer is writing it (lock not held) */
    SLOT_READY,                     /* a finished batch, or the failure of one */
    SLOT_HELD                       /* handed to the caller by ipuof_dataloader_next() */
};

/* One combined batch's memory and what it holds. */
struct slot {
    int state;                      /* enum slot_state */
    uint64_t epoch;                 /* READY, HELD: the batch's position */
    size_t index;
    size_t samples;
    int rc;                         /* READY: IPUOF_OK, or the failure of get() */
    char msg[ERRMSG_MAX];           /* rc's sentence */
    void **bufs;                    /* owned: one buffer per field, combined x sample bytes */
    struct ipuof_tensor *tensors;   /* owned: the batch's view, one per field */
    struct ipuof_batch batch;
};

/* A field as the loader keeps it: its own copies of the name and shape. */
struct field {
    char *name;                     /* owned: the tensor name (opts->names or the field's) */
    int dtype;
    int rank;
    int64_t dims[8];
    size_t sample_bytes;
};

struct ipuof_dataloader {
    /* Fixed by ipuof_dataloader_new(). */
    const struct ipuof_dataset_ops *ops;
    void *ds;
    void *user;
    size_t n_fields;
    struct field *fields;           /* owned, n_fields */
    size_t length;                  /* N */
    size_t combined;                /* B * D * A * R */
    size_t batches;                 /* per epoch */
    size_t block;                   /* R * B: the samples of one (d, a) step */
    unsigned proc, nproc;           /* this process's share of a job of nproc processes */
    unsigned nworkers;              /* rebatched mode: threads producing single samples */
    struct dl_workers *workers;     /* owned; NULL outside the rebatched mode */
    void **wouts;                   /* owned: each worker's get() argument array */
    char (*wmsg)[ERRMSG_MAX];       /* owned: each worker's last failure */
    int shuffle;
    uint64_t seed;
    int async;

    /* The producer's. */
    size_t *perm;                   /* owned, N entries; NULL without shuffle */
    uint64_t perm_epoch;
    int perm_valid;
    void **outs;                    /* owned: get()'s n_fields buffer pointers */

    /* The consumer's. */
    uint64_t epoch;                 /* the next batch to return is (epoch, index); */
    size_t index;                   /* index == batches: the epoch's end is next */
    struct slot *held;              /* the slot the last returned batch lives in, or NULL */
    char errmsg[ERRMSG_MAX];

    size_t n_slots;
    struct slot *slots;             /* owned, n_slots */

    /* Async mode: shared under mu. */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;         /* the producer waits for a job and a free slot */
    pthread_cond_t ready_cv;        /* the consumer waits for its batch */
    int sync_init;                  /* mu and the condition variables exist */
    int thread_started;
    pthread_t thread;
    int active;                     /* the producer works from prod_* (0 after a failure) */
    uint64_t prod_epoch;
    size_t prod_index;
    atomic_uint_fast64_t gen;       /* bumped to drop the batch being filled */
    atomic_int stop;                /* set once, by ipuof_dataloader_free() */
};

/* ---- errors ---------------------------------------------------------------------------- */

const char *
ipuof_dataloader_errmsg(const ipuof_dataloader *dl)
{
    if (dl == NULL)
        return "no data loader (NULL); ipuof_dataloader_new() failed or was not called";
    return dl->errmsg;
}

/* ---- the shuffle ----------------------------------------------------------------------- */

static uint64_t
splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t
rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256**: the next output of the generator whose state is s[0..4). */
static uint64_t
xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* A uniform draw from [0, n), n >= 1: the first output r >= 2^64 mod n, taken mod n. */
static uint64_t
uniform_below(uint64_t s[4], uint64_t n)
{
    uint64_t threshold = (UINT64_C(0) - n) % n;
    uint64_t r;

    do
        r = xoshiro_next(s);
    while (r < threshold);
    return r % n;
}

/* Writes epoch's permutation of 0..n-1 into p[0..n) (the algorithm client.h documents). */
static void
permute(size_t *p, size_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t sm = seed;
    uint64_t s[4];

    sm = splitmix64(&sm) ^ epoch;
    for (int k = 0; k < 4; k++)
        s[k] = splitmix64(&sm);
    for (size_t i = 0; i < n; i++)
        p[i] = i;
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)uniform_below(s, (uint64_t)i + 1);
        size_t t = p[i];

        p[i] = p[j];
        p[j] = t;
    }
}

/* ---- producing a batch ----------------------------------------------------------------- */

/* Samples in batch index of an epoch: combined, or the rest for a short last batch. */
static size_t
batch_samples(const ipuof_dataloader *dl, size_t index)
{
    size_t first = index * dl->combined;
    size_t left = dl->length - first;

    return left < dl->combined ? left : dl->combined;
}

/* Moves (*epoch, *index) to the batch after it. */
static void
advance(const ipuof_dataloader *dl, uint64_t *epoch, size_t *index)
{
    if (++*index >= dl->batches) {
        *index = 0;
        ++*epoch;
    }
}

/* 1 when the producer working for gen must stop: the consumer moved or the loader is being
 * freed. */
static int
cancelled(ipuof_dataloader *dl, uint64_t gen)
{
    return atomic_load(&dl->stop) || atomic_load(&dl->gen) != gen;
}

/* The dataset item at sample k of a batch whose first position in the epoch's order is
 * first (for a job's process: of the job's combined batch). */
static size_t
item_at(const ipuof_dataloader *dl, size_t first, size_t k)
{
    size_t pos = first + k;

    if (dl->nproc > 1) /* this process's replicas' rows of the job's combined batch */
        pos = first + (k / dl->block) * dl->block * dl->nproc + dl->proc * dl->block +
              k % dl->block;
    return dl->perm != NULL ? dl->perm[pos] : pos;
}

/* Calls get() for sample k of s's batch (epoch, index) with the argument array outs.
 * IPUOF_OK, or the failure with its sentence in msg. */
static int
get_sample(ipuof_dataloader *dl, struct slot *s, size_t first, size_t k, void **outs,
           char *msg, size_t len)
{
    size_t item = item_at(dl, first, k);
    int rc;

    for (size_t f = 0; f < dl->n_fields; f++)
        outs[f] = (char *)s->bufs[f] + k * dl->fields[f].sample_bytes;
    rc = dl->ops->get(dl->ds, item, outs, dl->user);
    if (rc != IPUOF_OK) {
        const char *why = dl->ops->errmsg != NULL ? dl->ops->errmsg(dl->ds, dl->user) : NULL;
        int raw = rc;

        if (rc < 0 || rc >= IPUOF_STATUS_COUNT)
            rc = IPUOF_E_IO;
        snprintf(msg, len,
                 "the dataset's get() failed on item %zu (sample %zu of batch %zu of "
                 "epoch %llu) with %s (%d): %s",
                 item, k, s->index, (unsigned long long)s->epoch, ipuof_status_name(rc), raw,
                 why != NULL && why[0] != '\0' ? why : ipuof_strerror(rc));
    }
    return rc;
}

/* What the rebatched mode's workers fill. */
struct fill_job {
    ipuof_dataloader *dl;
    struct slot *s;
    size_t first;
    uint64_t gen;
};

/* A worker's sample (dl_workers.h). */
static int
worker_sample(void *ctx, unsigned w, size_t k)
{
    struct fill_job *fj = ctx;
    ipuof_dataloader *dl = fj->dl;

    if (cancelled(dl, fj->gen))
        return IPUOF_E_CANCELLED;
    return get_sample(dl, fj->s, fj->first, k, dl->wouts + (size_t)w * dl->n_fields,
                      dl->wmsg[w], sizeof dl->wmsg[w]);
}

/*
 * The producer's work: fills s with batch (epoch, index), one get() per item (on the
 * workers in the rebatched mode), and records the outcome in s->rc and s->msg (the slot's
 * position and sample count are set whatever happens). Returns IPUOF_OK,
 * IPUOF_E_CANCELLED when gen moved on (s holds nothing of use), or get()'s failure.
 */
static int
fill(ipuof_dataloader *dl, struct slot *s, uint64_t epoch, size_t index, uint64_t gen)
{
    size_t first = index * dl->combined * (dl->nproc > 1 ? dl->nproc : 1);
    int rc = IPUOF_OK;

    s->epoch = epoch;
    s->index = index;
    s->samples = batch_samples(dl, index);
    s->msg[0] = '\0';
    if (dl->perm != NULL && (!dl->perm_valid || dl->perm_epoch != epoch)) {
        permute(dl->perm, dl->length, dl->seed, epoch);
        dl->perm_epoch = epoch;
        dl->perm_valid = 1;
    }
    if (dl->workers != NULL) {
        struct fill_job fj = {dl, s, first, gen};
        size_t failed_k = 0;

        size_t base = index * dl->combined; /* the batch's first sample in the stream */

        rc = dl_workers_run(dl->workers, worker_sample, &fj, base, s->samples, &failed_k);
        if (rc != IPUOF_OK && rc != IPUOF_E_CANCELLED)
            snprintf(s->msg, sizeof s->msg, "%s", dl->wmsg[(base + failed_k) % dl->nworkers]);
        goto out;
    }
    for (size_t k = 0; k < s->samples; k++) {
        if (cancelled(dl, gen)) {
            rc = IPUOF_E_CANCELLED;
            goto out;
        }
        rc = get_sample(dl, s, first, k, dl->outs, s->msg, sizeof s->msg);
        if (rc != IPUOF_OK)
            goto out;
    }
out:
    s->rc = rc;
    return rc;
}

/* Makes s's batch view describe what it holds. */
static void
publish(ipuof_dataloader *dl, struct slot *s)
{
    for (size_t f = 0; f < dl->n_fields; f++) {
        const struct field *fd = &dl->fields[f];
        struct ipuof_tensor *t = &s->tensors[f];

        memset(t, 0, sizeof *t);
        t->name = fd->name;
        t->dtype = fd->dtype;
        t->rank = fd->rank + 1;
        t->dims[0] = (int64_t)s->samples;
        for (int d = 0; d < fd->rank; d++)
            t->dims[d + 1] = fd->dims[d];
        t->data = s->bufs[f];
        t->bytes = s->samples * fd->sample_bytes;
    }
    s->batch.epoch = s->epoch;
    s->batch.index = s->index;
    s->batch.samples = s->samples;
    s->batch.n_tensors = dl->n_fields;
    s->batch.tensors = s->tensors;
}

/* A slot the producer may fill, or NULL. Under mu. */
static struct slot *
free_slot(ipuof_dataloader *dl)
{
    for (size_t i = 0; i < dl->n_slots; i++)
        if (dl->slots[i].state == SLOT_FREE)
            return &dl->slots[i];
    return NULL;
}

/* The async producer: fills free slots with the batches from prod_* on, in order, until
 * stopped; after a failure it idles until the consumer restarts it. */
static void *
producer_main(void *arg)
{
    ipuof_dataloader *dl = arg;

    pthread_mutex_lock(&dl->mu);
    for (;;) {
        struct slot *s = NULL;
        uint64_t gen, epoch;
        size_t index;
        int rc;

        while (!atomic_load(&dl->stop) && (!dl->active || (s = free_slot(dl)) == NULL))
            pthread_cond_wait(&dl->work_cv, &dl->mu);
        if (atomic_load(&dl->stop))
            break;
        gen = atomic_load(&dl->gen);
        epoch = dl->prod_epoch;
        index = dl->prod_index;
        s->state = SLOT_FILLING;
        pthread_mutex_unlock(&dl->mu);

        rc = fill(dl, s, epoch, index, gen);

        pthread_mutex_lock(&dl->mu);
        if (cancelled(dl, gen)) {
            s->state = SLOT_FREE;
            continue;
        }
        s->state = SLOT_READY;
        if (rc == IPUOF_OK)
            advance(dl, &dl->prod_epoch, &dl->prod_index);
        else
            dl->active = 0;
        pthread_cond_broadcast(&dl->ready_cv);
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

/* ---- the consumer's side ---------------------------------------------------------------- */

/* Returns the held slot, if any, to the producer. Under mu in async mode. */
static void
release_held(ipuof_dataloader *dl)
{
    if (dl->held == NULL)
        return;
    dl->held->state = SLOT_FREE;
    dl->held = NULL;
    if (dl->async)
        pthread_cond_signal(&dl->work_cv);
}

/* Restarts the producer at the consumer's position, dropping what it prepared. Under mu. */
static void
restart_producer(ipuof_dataloader *dl)
{
    atomic_fetch_add(&dl->gen, 1);
    for (size_t i = 0; i < dl->n_slots; i++)
        if (dl->slots[i].state == SLOT_READY)
            dl->slots[i].state = SLOT_FREE;
    dl->prod_epoch = dl->epoch;
    dl->prod_index = dl->index;
    dl->active = 1;
    pthread_cond_broadcast(&dl->work_cv);
}

/* The READY slot holding the consumer's next batch, or NULL. Under mu. */
static struct slot *
ready_slot(ipuof_dataloader *dl)
{
    for (size_t i = 0; i < dl->n_slots; i++) {
        struct slot *s = &dl->slots[i];

        if (s->state == SLOT_READY && s->epoch == dl->epoch && s->index == dl->index)
            return s;
    }
    return NULL;
}

/* ipuof_dataloader_next() in async mode, from the point where the position is a batch. */
static int
next_async(ipuof_dataloader *dl, struct slot **out)
{
    struct slot *s;
    int rc = IPUOF_OK;

    *out = NULL;
    s = ready_slot(dl);
    if (s == NULL && !dl->active)
        restart_producer(dl);
    while (s == NULL) {
        pthread_cond_wait(&dl->ready_cv, &dl->mu);
        s = ready_slot(dl);
    }
    if (s->rc != IPUOF_OK) {
        rc = s->rc;
        snprintf(dl->errmsg, sizeof dl->errmsg, "%s", s->msg);
        s->state = SLOT_FREE;
        goto out;
    }
    s->state = SLOT_HELD;
    *out = s;
out:
    return rc;
}

int
ipuof_dataloader_next(ipuof_dataloader *dl, const struct ipuof_batch **out)
{
    struct slot *s = NULL;
    int rc = IPUOF_OK;

    if (out != NULL)
        *out = NULL;
    if (dl == NULL)
        return IPUOF_E_INVAL;
    dl->errmsg[0] = '\0';
    if (out == NULL) {
        return ipuof_errbuf_set(dl->errmsg, sizeof dl->errmsg, IPUOF_E_INVAL,
                "ipuof_dataloader_next() needs a place for the batch (out is NULL)");
    }
    if (dl->async)
        pthread_mutex_lock(&dl->mu);
    release_held(dl);
    if (dl->index >= dl->batches) {
        dl->epoch++;
        dl->index = 0;
        goto out;
    }
    if (dl->async) {
        rc = next_async(dl, &s);
    } else {
        s = &dl->slots[0];
        rc = fill(dl, s, dl->epoch, dl->index, 0);
        if (rc != IPUOF_OK) {
            snprintf(dl->errmsg, sizeof dl->errmsg, "%s", s->msg);
            s = NULL;
        } else {
            s->state = SLOT_HELD;
        }
    }
    if (rc != IPUOF_OK)
        goto out;
    publish(dl, s);
    dl->held = s;
    dl->index++;
    *out = &s->batch;
out:
    if (dl->async)
        pthread_mutex_unlock(&dl->mu);
    return rc;
}

int
ipuof_dataloader_set_epoch(ipuof_dataloader *dl, uint64_t epoch)
{
    uint64_t at_epoch;
    size_t at_index;

    if (dl == NULL)
        return IPUOF_E_INVAL;
    dl->errmsg[0] = '\0';
    if (dl->async)
        pthread_mutex_lock(&dl->mu);
    release_held(dl);
    at_epoch = dl->epoch;
    at_index = dl->index;
    if (at_index >= dl->batches) {
        at_epoch++;
        at_index = 0;
    }
    dl->epoch = epoch;
    dl->index = 0;
    if (dl->async) {
        if (!dl->active || at_epoch != epoch || at_index != 0)
            restart_producer(dl);
        pthread_mutex_unlock(&dl->mu);
    }
    return IPUOF_OK;
}

int
ipuof_dataloader_reset(ipuof_dataloader *dl)
{
    return ipuof_dataloader_set_epoch(dl, 0);
}

uint64_t
ipuof_dataloader_epoch(const ipuof_dataloader *dl)
{
    return dl != NULL ? dl->epoch : 0;
}

size_t
ipuof_dataloader_combined_batch_size(const ipuof_dataloader *dl)
{
    return dl != NULL ? dl->combined : 0;
}

size_t
ipuof_dataloader_batches_per_epoch(const ipuof_dataloader *dl)
{
    return dl != NULL ? dl->batches : 0;
}

size_t
ipuof_dataloader_length(const ipuof_dataloader *dl)
{
    return dl != NULL ? dl->length : 0;
}

/* ---- creation and freeing ---------------------------------------------------------------- */

/* Checks dataset's fields and copies them into dl->fields (names from names[] when given).
 * Returns IPUOF_OK or IPUOF_E_INVAL / _NOMEM with a sentence in errbuf. */
static int
copy_fields(ipuof_dataloader *dl, const struct ipuof_dataset *dataset,
            const char *const *names, char *errbuf, size_t errlen)
{
    size_t n = dataset->n_fields;

    if (dataset->fields == NULL || n == 0 || n > IPUOF_DATASET_MAX_FIELDS)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "a dataset needs 1 to %d fields, not %zu%s", IPUOF_DATASET_MAX_FIELDS,
                n, dataset->fields == NULL && n > 0 ? " (fields is NULL)" : "");
    dl->fields = calloc(n, sizeof *dl->fields);
    if (dl->fields == NULL)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory for %zu fields", n);
    dl->n_fields = n;
    for (size_t f = 0; f < n; f++) {
        const struct ipuof_field *src = &dataset->fields[f];
        struct field *dst = &dl->fields[f];
        const char *name = names != NULL && names[f] != NULL ? names[f] : src->name;
        size_t elem = ipuof_dtype_size(src->dtype);
        size_t bytes = elem;

        if (name == NULL || name[0] == '\0')
            return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL, "field %zu has no name", f);
        if (elem == 0)
            return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                    "field '%s' has dtype %d, which is not an enum ipuof_dtype value",
                    name, src->dtype);
        if (src->rank < 0 || src->rank > MAX_SAMPLE_RANK)
            return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                    "field '%s' has rank %d; a sample has 0 to %d dims (the batch "
                                    "adds one)",
                                    name, src->rank, MAX_SAMPLE_RANK);
        for (int d = 0; d < src->rank; d++) {
            if (src->dims[d] < 1)
                return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                        "field '%s' has dim %d of %lld; every dim must be at least 1",
                        name, d, (long long)src->dims[d]);
            if ((uint64_t)src->dims[d] > SIZE_MAX / bytes)
                return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                        "field '%s' is too large for one sample", name);
            bytes *= (size_t)src->dims[d];
        }
        for (size_t g = 0; g < f; g++)
            if (strcmp(dl->fields[g].name, name) == 0)
                return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                        "fields %zu and %zu are both called '%s'", g, f, name);
        dst->name = strdup(name);
        if (dst->name == NULL)
            return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory for field names");
        dst->dtype = src->dtype;
        dst->rank = src->rank;
        memcpy(dst->dims, src->dims, sizeof dst->dims);
        for (int d = src->rank; d < 8; d++)
            dst->dims[d] = 0;
        dst->sample_bytes = bytes;
    }
    return IPUOF_OK;
}

/* Allocates dl->n_slots slots with their buffers, each for the largest batch an epoch has.
 * Returns IPUOF_OK or IPUOF_E_NOMEM with a sentence in errbuf. */
static int
alloc_slots(ipuof_dataloader *dl, char *errbuf, size_t errlen)
{
    size_t most = batch_samples(dl, 0);

    dl->slots = calloc(dl->n_slots, sizeof *dl->slots);
    dl->outs = calloc(dl->n_fields, sizeof *dl->outs);
    if (dl->slots == NULL || dl->outs == NULL)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory for the loader");
    for (size_t i = 0; i < dl->n_slots; i++) {
        struct slot *s = &dl->slots[i];

        s->bufs = calloc(dl->n_fields, sizeof *s->bufs);
        s->tensors = calloc(dl->n_fields, sizeof *s->tensors);
        if (s->bufs == NULL || s->tensors == NULL)
            return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory for the loader");
        for (size_t f = 0; f < dl->n_fields; f++) {
            size_t sample = dl->fields[f].sample_bytes;

            if (sample > SIZE_MAX / most)
                return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                        "field '%s' of a batch of %zu samples does not fit in memory",
                        dl->fields[f].name, most);
            s->bufs[f] = malloc(sample * most);
            if (s->bufs[f] == NULL)
                return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                                        "out of memory for field '%s' of a batch of %zu samples "
                                        "(%zu bytes)",
                                        dl->fields[f].name, most, sample * most);
        }
    }
    return IPUOF_OK;
}

/* Stops the producer thread, if it runs, and waits for it. */
static void
stop_producer(ipuof_dataloader *dl)
{
    if (!dl->thread_started)
        return;
    pthread_mutex_lock(&dl->mu);
    atomic_store(&dl->stop, 1);
    atomic_fetch_add(&dl->gen, 1);
    pthread_cond_broadcast(&dl->work_cv);
    pthread_mutex_unlock(&dl->mu);
    pthread_join(dl->thread, NULL);
    dl->thread_started = 0;
}

void
ipuof_dataloader_free(ipuof_dataloader *dl)
{
    if (dl == NULL)
        return;
    stop_producer(dl);
    dl_workers_free(dl->workers); /* after the producer, which may be waiting for them */
    free(dl->wouts);
    free(dl->wmsg);
    if (dl->sync_init) {
        pthread_cond_destroy(&dl->ready_cv);
        pthread_cond_destroy(&dl->work_cv);
        pthread_mutex_destroy(&dl->mu);
    }
    for (size_t i = 0; dl->slots != NULL && i < dl->n_slots; i++) {
        for (size_t f = 0; dl->slots[i].bufs != NULL && f < dl->n_fields; f++)
            free(dl->slots[i].bufs[f]);
        free(dl->slots[i].bufs);
        free(dl->slots[i].tensors);
    }
    for (size_t f = 0; dl->fields != NULL && f < dl->n_fields; f++)
        free(dl->fields[f].name);
    free(dl->slots);
    free(dl->fields);
    free(dl->outs);
    free(dl->perm);
    free(dl);
}

/* *acc *= f, or -1 (and *acc unchanged) when the product does not fit a size_t. */
static int
mul_size(size_t *acc, unsigned f)
{
    if (*acc > SIZE_MAX / f)
        return -1;
    *acc *= f;
    return 0;
}

/* Initialises the async side of dl and starts its thread. Returns IPUOF_OK or
 * IPUOF_E_NOMEM with a sentence in errbuf. */
static int
start_producer(ipuof_dataloader *dl, char *errbuf, size_t errlen)
{
    int err;

    if (pthread_mutex_init(&dl->mu, NULL) != 0)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "cannot create the loader's mutex");
    if (pthread_cond_init(&dl->work_cv, NULL) != 0) {
        pthread_mutex_destroy(&dl->mu);
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                                "cannot create the loader's condition variable");
    }
    if (pthread_cond_init(&dl->ready_cv, NULL) != 0) {
        pthread_cond_destroy(&dl->work_cv);
        pthread_mutex_destroy(&dl->mu);
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                                "cannot create the loader's condition variable");
    }
    dl->sync_init = 1;
    dl->active = 1;
    dl->prod_epoch = 0;
    dl->prod_index = 0;
    err = pthread_create(&dl->thread, NULL, producer_main, dl);
    if (err != 0)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                                "cannot start the loader's thread: %s",
                                strerror_r(err, (char[128]){0}, 128));
    dl->thread_started = 1;
    return IPUOF_OK;
}

/* The loader's batch sizes from opts (0 meaning 1): the combined batch (micro-batch x
 * device iterations x gradient accumulation x replicas), the block one step takes, this
 * process of how many (opts, else IPUOF_PROCESS_ID / IPUOF_NUM_PROCESSES), the dataset's
 * length and the batches an epoch has. IPUOF_OK, or an error with its sentence in errbuf. */
static int
dl_batches(ipuof_dataloader *dl, const struct ipuof_dataloader_opts *opts, char *errbuf,
           size_t errlen)
{
    unsigned b, d, a, r;
    int rc;

    b = opts->batch_size != 0 ? opts->batch_size : 1;
    d = opts->device_iterations != 0 ? opts->device_iterations : 1;
    a = opts->gradient_accumulation != 0 ? opts->gradient_accumulation : 1;
    r = opts->replicas != 0 ? opts->replicas : 1;
    dl->combined = b;
    if (mul_size(&dl->combined, d) != 0 || mul_size(&dl->combined, a) != 0 ||
        mul_size(&dl->combined, r) != 0) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                              "micro-batch %u x device iterations %u x gradient accumulation %u x "
                              "replicas %u is too large", b, d, a, r);
        return rc;
    }
    dl->block = (size_t)b * r;
    dl->proc = opts->process_id;
    dl->nproc = opts->num_processes;
    if (dl->nproc == 0) {
        char why[256];
        rc = ipuof_process_env(&dl->proc, &dl->nproc, why, sizeof why);
        if (rc != IPUOF_OK) {
            rc = ipuof_errbuf_set(errbuf, errlen, rc, "%s", why);
            return rc;
        }
    }
    if (dl->nproc > 1 && (dl->proc >= dl->nproc || opts->keep_last)) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                              dl->proc >= dl->nproc ? "process id %u is out of range for %u "
                                                "processes"
                                              : "keep_last is for host use only; process %u "
                                                "of %u takes complete batches",
                              dl->proc, dl->nproc);
        return rc;
    }
    dl->length = dl->ops->length(dl->ds);
    if (dl->length == 0) {
        rc = ipuof_errbuf_set(
                errbuf, errlen, IPUOF_E_INVAL, "the dataset is empty (length() is 0)");
        return rc;
    }
    if (dl->nproc > 1 && dl->combined > SIZE_MAX / dl->nproc) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL, "%u processes x %zu samples per "
                              "combined batch is too large", dl->nproc, dl->combined);
        return rc;
    }
    /* A job's processes together take nproc x combined samples per batch. */
    dl->batches = dl->length / (dl->combined * (dl->nproc > 1 ? dl->nproc : 1));
    if (opts->keep_last && dl->length % dl->combined != 0)
        dl->batches++;
    if (dl->batches == 0) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "the dataset has %zu items, fewer than one combined batch of %zu "
                "(micro-batch %u x device iterations %u x gradient accumulation %u x "
                "replicas %u x processes %u), so with drop_last (keep_last 0) no batch "
                "would ever be produced",
                dl->length, dl->combined * (dl->nproc > 1 ? dl->nproc : 1), b, d, a, r,
                dl->nproc > 1 ? dl->nproc : 1);
        return rc;
    }
    return IPUOF_OK;
}

/* The loader's buffers: the shuffle's permutation, the slots, the rebatching workers'
 * outputs and threads. IPUOF_OK, or an error with its sentence in errbuf. */
static int
dl_buffers(ipuof_dataloader *dl, char *errbuf, size_t errlen)
{
    int rc;

    if (dl->shuffle) {
        dl->perm = calloc(dl->length, sizeof *dl->perm);
        if (dl->perm == NULL) {
            rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM,
                                  "out of memory for the shuffle of %zu items", dl->length);
            return rc;
        }
    }
    rc = alloc_slots(dl, errbuf, errlen);
    if (rc != IPUOF_OK)
        return rc;
    if (dl->nworkers > 0) {
        dl->wouts = calloc((size_t)dl->nworkers * dl->n_fields, sizeof *dl->wouts);
        dl->wmsg = calloc(dl->nworkers, sizeof *dl->wmsg);
        if (dl->wouts == NULL || dl->wmsg == NULL ||
            dl_workers_new(dl->nworkers, &dl->workers) != 0) {
            rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory or threads for %u "
                                  "workers", dl->nworkers);
            return rc;
        }
    }
    return IPUOF_OK;
}

int
ipuof_dataloader_new(const struct ipuof_dataset *dataset,
                     const struct ipuof_dataloader_opts *opts, ipuof_dataloader **out,
                     char *errbuf, size_t errlen)
{
    static const struct ipuof_dataloader_opts defaults;
    ipuof_dataloader *dl = NULL;
    int rc;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (out == NULL)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "ipuof_dataloader_new() needs a place for the loader (out is NULL)");
    *out = NULL;
    if (opts == NULL)
        opts = &defaults;
    if (dataset == NULL || dataset->ops == NULL || dataset->ops->length == NULL ||
        dataset->ops->get == NULL)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "a dataset needs an ops table with length() and get()%s",
                                dataset == NULL ? " (dataset is NULL)" : "");
    if (opts->mode != IPUOF_DATALOADER_SYNC && opts->mode != IPUOF_DATALOADER_ASYNC &&
        opts->mode != IPUOF_DATALOADER_ASYNC_REBATCHED)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                "unknown data loader mode %d (IPUOF_DATALOADER_SYNC is 0, _ASYNC 1, "
                "_ASYNC_REBATCHED 2)", opts->mode);
    if (opts->workers > IPUOF_DATALOADER_MAX_WORKERS)
        return ipuof_errbuf_set(errbuf, errlen, IPUOF_E_INVAL,
                                "%u workers asked for; at most %d", opts->workers,
                                IPUOF_DATALOADER_MAX_WORKERS);
    dl = calloc(1, sizeof *dl);
    if (dl == NULL) {
        rc = ipuof_errbuf_set(errbuf, errlen, IPUOF_E_NOMEM, "out of memory for the loader");
        goto fail;
    }
    dl->ops = dataset->ops;
    dl->ds = dataset->ds;
    dl->user = opts->user;
    dl->shuffle = opts->shuffle != 0;
    dl->seed = opts->seed;
    dl->async = opts->mode != IPUOF_DATALOADER_SYNC;
    dl->nworkers = opts->mode == IPUOF_DATALOADER_ASYNC_REBATCHED
                       ? (opts->workers != 0 ? opts->workers : 1) : 0;
    dl->n_slots = dl->async ? ASYNC_SLOTS : SYNC_SLOTS;
    atomic_init(&dl->gen, 0);
    atomic_init(&dl->stop, 0);
    rc = copy_fields(dl, dataset, opts->names, errbuf, errlen);
    if (rc != IPUOF_OK)
        goto fail;
    rc = dl_batches(dl, opts, errbuf, errlen);
    if (rc == IPUOF_OK)
        rc = dl_buffers(dl, errbuf, errlen);
    if (rc != IPUOF_OK)
        goto fail;
    if (dl->async) {
        rc = start_producer(dl, errbuf, errlen);
        if (rc != IPUOF_OK)
            goto fail;
    }
    *out = dl;
    return IPUOF_OK;
fail:
    ipuof_dataloader_free(dl);
    return rc;
}
