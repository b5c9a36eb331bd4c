/*
 * pod_kv.c — see pod_kv.h. Two hash tables with chaining: jobs by name, and entries by
 * (job, key); each job also lists its own entries, so a drop frees them without a scan.
 * Every byte is counted against the budget: names, keys and values, and per job and per
 * entry POD_KV_JOB_COST / POD_KV_ENTRY_COST for the structures, the allocator's headers and
 * the table slots (a table never has more slots than twice its items, plus 16).
 */
#include "pod_kv.h"

#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "ipuof/status.h"

struct kv_job;

struct kv_entry {
    struct kv_job *job;
    char *key;
    void *v;
    size_t n;
    uint64_t hash;
    struct kv_entry *hnext;             /* the chain of its slot in the entry table */
    struct kv_entry *jprev, *jnext;     /* its job's entries */
};

struct kv_job {
    char *name;
    uint64_t hash;
    unsigned nkeys;
    struct kv_entry *entries;
    struct kv_job *hnext;
};

struct pod_kv {
    struct kv_job **jslot;
    size_t njslot, njobs;
    struct kv_entry **eslot;
    size_t neslot;
    uint64_t bytes;
    unsigned count;
};

/* Three allocations of each, with a 16-byte allocator header each, and two table slots. */
_Static_assert(sizeof(struct kv_entry) + 3 * 16 + 2 * sizeof(void *) <= POD_KV_ENTRY_COST,
               "POD_KV_ENTRY_COST covers an entry's structure");
_Static_assert(sizeof(struct kv_job) + 2 * 16 + 2 * sizeof(void *) <= POD_KV_JOB_COST,
               "POD_KV_JOB_COST covers a job's structure");

/* FNV-1a over s, continuing from h. */
static uint64_t
hash_str(uint64_t h, const char *s)
{
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#define HASH_START 14695981039346656037ull

struct pod_kv *
pod_kv_new(void)
{
    struct pod_kv *kv = calloc(1, sizeof *kv);

    if (kv == NULL)
        return NULL;
    kv->njslot = kv->neslot = 16;
    kv->jslot = calloc(kv->njslot, sizeof *kv->jslot);
    kv->eslot = calloc(kv->neslot, sizeof *kv->eslot);
    if (kv->jslot == NULL || kv->eslot == NULL) {
        free(kv->jslot);
        free(kv->eslot);
        free(kv);
        return NULL;
    }
    return kv;
}

static struct kv_job *
find_job(const struct pod_kv *kv, const char *job, uint64_t h)
{
    for (struct kv_job *j = kv->jslot[h % kv->njslot]; j != NULL; j = j->hnext)
        if (j->hash == h && strcmp(j->name, job) == 0)
            return j;
    return NULL;
}

static uint64_t
entry_hash(const struct kv_job *j, const char *key)
{
    return hash_str(j->hash ^ 0x9e3779b97f4a7c15ull, key);
}

static struct kv_entry *
find_entry(const struct pod_kv *kv, const struct kv_job *j, const char *key, uint64_t h)
{
    for (struct kv_entry *e = kv->eslot[h % kv->neslot]; e != NULL; e = e->hnext)
        if (e->hash == h && e->job == j && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* Doubles the job table when it holds as many jobs as slots; a failure keeps the old one
 * (longer chains, nothing lost). */
static void
grow_jobs(struct pod_kv *kv)
{
    size_t n = kv->njslot * 2;
    struct kv_job **slot;

    if (kv->njobs < kv->njslot || (slot = calloc(n, sizeof *slot)) == NULL)
        return;
    for (size_t i = 0; i < kv->njslot; i++) {
        struct kv_job *j, *next;
        for (j = kv->jslot[i]; j != NULL; j = next) {
            next = j->hnext;
            j->hnext = slot[j->hash % n];
            slot[j->hash % n] = j;
        }
    }
    free(kv->jslot);
    kv->jslot = slot;
    kv->njslot = n;
}

/* As grow_jobs, for the entry table. */
static void
grow_entries(struct pod_kv *kv)
{
    size_t n = kv->neslot * 2;
    struct kv_entry **slot;

    if (kv->count < kv->neslot || (slot = calloc(n, sizeof *slot)) == NULL)
        return;
    for (size_t i = 0; i < kv->neslot; i++) {
        struct kv_entry *e, *next;
        for (e = kv->eslot[i]; e != NULL; e = next) {
            next = e->hnext;
            e->hnext = slot[e->hash % n];
            slot[e->hash % n] = e;
        }
    }
    free(kv->eslot);
    kv->eslot = slot;
    kv->neslot = n;
}

/* Takes e out of the entry table and its job's list, frees it, accounts it out. */
static void
free_entry(struct pod_kv *kv, struct kv_entry *e)
{
    for (struct kv_entry **pp = &kv->eslot[e->hash % kv->neslot]; *pp != NULL;
         pp = &(*pp)->hnext) {
        if (*pp == e) {
            *pp = e->hnext;
            break;
        }
    }
    if (e->jprev != NULL)
        e->jprev->jnext = e->jnext;
    else
        e->job->entries = e->jnext;
    if (e->jnext != NULL)
        e->jnext->jprev = e->jprev;
    e->job->nkeys--;
    kv->bytes -= POD_KV_ENTRY_COST + strlen(e->key) + e->n;
    kv->count--;
    free(e->key);
    free(e->v);
    free(e);
}

/* Frees j's entries and j itself (taken out of the job table), accounted out of kv; returns
 * how many entries it had. */
static unsigned
free_job(struct pod_kv *kv, struct kv_job *j)
{
    unsigned n = j->nkeys;

    while (j->entries != NULL)
        free_entry(kv, j->entries);
    for (struct kv_job **pp = &kv->jslot[j->hash % kv->njslot]; *pp != NULL;
         pp = &(*pp)->hnext) {
        if (*pp == j) {
            *pp = j->hnext;
            break;
        }
    }
    kv->njobs--;
    kv->bytes -= POD_KV_JOB_COST + strlen(j->name);
    free(j->name);
    free(j);
    return n;
}

void
pod_kv_free(struct pod_kv *kv)
{
    if (kv == NULL)
        return;
    for (size_t i = 0; i < kv->njslot; i++)
        while (kv->jslot[i] != NULL)
            free_job(kv, kv->jslot[i]);
    free(kv->jslot);
    free(kv->eslot);
    free(kv);
}

/* The job named job, made (and accounted) when new; NULL when out of memory. */
static struct kv_job *
make_job(struct pod_kv *kv, const char *job, uint64_t h)
{
    struct kv_job *j = calloc(1, sizeof *j);

    if (j == NULL || (j->name = strdup(job)) == NULL) {
        free(j);
        return NULL;
    }
    j->hash = h;
    grow_jobs(kv);
    j->hnext = kv->jslot[h % kv->njslot];
    kv->jslot[h % kv->njslot] = j;
    kv->njobs++;
    kv->bytes += POD_KV_JOB_COST + strlen(job);
    return j;
}

/* Checks a set of n bytes under key of job j (NULL: a new job) against lim; IPUOF_OK or a
 * status with the sentence in err. old: the bytes the entry it replaces counts. */
static int
check_limits(const struct pod_kv *kv, const struct pod_kv_limits *lim, const struct kv_job *j,
             int new_entry, uint64_t old, const char *job, const char *key, size_t n,
             char *err, size_t errlen)
{
    uint64_t add = POD_KV_ENTRY_COST + strlen(key) + n;

    if (n > lim->max_value) {
        errbuf_set(err, errlen, "rendezvous value of key '%s' is %zu bytes; at most %u are "
                   "stored ([pod] kv_max_value_bytes)", key, n, lim->max_value);
        return IPUOF_E_TOO_LARGE;
    }
    if (new_entry && j != NULL && j->nkeys >= lim->max_keys) {
        errbuf_set(err, errlen, "job '%s' already holds %u rendezvous entries, the most one job "
                   "may ([pod] kv_max_keys)", job, j->nkeys);
        return IPUOF_E_TOO_MANY;
    }
    if (j == NULL)
        add += POD_KV_JOB_COST + strlen(job);
    if (kv->bytes + lim->held - old + add > lim->max_bytes) {
        errbuf_set(err, errlen, "the rendezvous store holds %llu bytes (%llu more in replies "
                   "not yet read); %llu more (entry and job records counted) would pass its "
                   "budget of %llu ([pod] kv_max_bytes)", (unsigned long long)kv->bytes,
                   (unsigned long long)lim->held, (unsigned long long)(add - old),
                   (unsigned long long)lim->max_bytes);
        return IPUOF_E_TOO_LARGE;
    }
    return IPUOF_OK;
}

int
pod_kv_set(struct pod_kv *kv, const struct pod_kv_limits *lim, const char *job,
           const char *key, const void *v, size_t n, char *err, size_t errlen)
{
    size_t jl = strlen(job), kl = strlen(key);
    uint64_t jh, eh, old = 0;
    struct kv_job *j;
    struct kv_entry *e = NULL;
    void *copy;
    int rc;

    if (jl == 0 || jl > POD_KV_JOB_MAX || kl == 0 || kl > POD_KV_KEY_MAX) {
        errbuf_set(err, errlen, "a rendezvous entry needs a job name of 1 to %d bytes and a "
                   "key of 1 to %d bytes (got %zu and %zu)", POD_KV_JOB_MAX, POD_KV_KEY_MAX,
                   jl, kl);
        return IPUOF_E_INVAL;
    }
    jh = hash_str(HASH_START, job);
    j = find_job(kv, job, jh);
    if (j != NULL && (e = find_entry(kv, j, key, entry_hash(j, key))) != NULL)
        old = POD_KV_ENTRY_COST + kl + e->n;
    rc = check_limits(kv, lim, j, e == NULL, old, job, key, n, err, errlen);
    if (rc != IPUOF_OK)
        return rc;
    copy = malloc(n > 0 ? n : 1);
    if (copy == NULL)
        goto nomem;
    if (n > 0)
        memcpy(copy, v, n);
    if (j == NULL && (j = make_job(kv, job, jh)) == NULL)
        goto nomem;
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e == NULL || (e->key = strdup(key)) == NULL) {
            free(e);
            goto nomem; /* an empty job left behind is counted; dropped with the job */
        }
        eh = entry_hash(j, key);
        e->job = j;
        e->hash = eh;
        grow_entries(kv);
        e->hnext = kv->eslot[eh % kv->neslot];
        kv->eslot[eh % kv->neslot] = e;
        e->jnext = j->entries;
        if (j->entries != NULL)
            j->entries->jprev = e;
        j->entries = e;
        j->nkeys++;
        kv->count++;
    } else {
        free(e->v);
    }
    e->v = copy;
    e->n = n;
    kv->bytes = kv->bytes - old + POD_KV_ENTRY_COST + kl + n;
    return IPUOF_OK;
nomem:
    free(copy);
    errbuf_set(err, errlen, "out of memory storing rendezvous key '%s'", key);
    return IPUOF_E_NOMEM;
}

int
pod_kv_get(const struct pod_kv *kv, const char *job, const char *key, const void **v,
           size_t *n)
{
    const struct kv_job *j = find_job(kv, job, hash_str(HASH_START, job));
    const struct kv_entry *e = j != NULL ? find_entry(kv, j, key, entry_hash(j, key)) : NULL;

    if (e == NULL)
        return 0;
    *v = e->v;
    *n = e->n;
    return 1;
}

unsigned
pod_kv_drop(struct pod_kv *kv, const char *job)
{
    struct kv_job *j = find_job(kv, job, hash_str(HASH_START, job));

    return j != NULL ? free_job(kv, j) : 0;
}

uint64_t
pod_kv_bytes(const struct pod_kv *kv)
{
    return kv->bytes;
}

unsigned
pod_kv_count(const struct pod_kv *kv)
{
    return kv->count;
}

unsigned
pod_kv_jobs(const struct pod_kv *kv)
{
    return (unsigned)kv->njobs;
}
