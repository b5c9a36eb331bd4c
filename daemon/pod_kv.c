/*
 * pod_kv.c — see pod_kv.h. A list of jobs, each a list of entries: a rendezvous holds a
 * few entries per rank, so lists are enough and leave nothing to tune.
 */
#include "pod_kv.h"

#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "ipuof/status.h"

struct kv_entry {
    char *key;
    void *v;
    size_t n;
    struct kv_entry *next;
};

struct kv_job {
    char *name;
    unsigned nkeys;
    struct kv_entry *entries;
    struct kv_job *next;
};

struct pod_kv {
    struct kv_job *jobs;
    uint64_t bytes;
    unsigned count;
};

struct pod_kv *
pod_kv_new(void)
{
    return calloc(1, sizeof(struct pod_kv));
}

static struct kv_job *
find_job(const struct pod_kv *kv, const char *job)
{
    for (struct kv_job *j = kv->jobs; j != NULL; j = j->next)
        if (strcmp(j->name, job) == 0)
            return j;
    return NULL;
}

static struct kv_entry *
find_entry(const struct kv_job *j, const char *key)
{
    for (struct kv_entry *e = j->entries; e != NULL; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* Frees j's entries (accounted out of kv) and j itself. */
static unsigned
free_job(struct pod_kv *kv, struct kv_job *j)
{
    unsigned n = 0;
    struct kv_entry *next;

    for (struct kv_entry *e = j->entries; e != NULL; e = next) {
        next = e->next;
        kv->bytes -= strlen(e->key) + e->n;
        kv->count--;
        free(e->key);
        free(e->v);
        free(e);
        n++;
    }
    free(j->name);
    free(j);
    return n;
}

void
pod_kv_free(struct pod_kv *kv)
{
    struct kv_job *next;

    if (kv == NULL)
        return;
    for (struct kv_job *j = kv->jobs; j != NULL; j = next) {
        next = j->next;
        free_job(kv, j);
    }
    free(kv);
}

int
pod_kv_set(struct pod_kv *kv, const struct pod_kv_limits *lim, const char *job,
           const char *key, const void *v, size_t n, char *err, size_t errlen)
{
    size_t jl = strlen(job), kl = strlen(key);
    struct kv_job *j;
    struct kv_entry *e = NULL;
    uint64_t old = 0;
    void *copy = NULL;

    if (jl == 0 || jl > POD_KV_JOB_MAX || kl == 0 || kl > POD_KV_KEY_MAX) {
        errbuf_set(err, errlen, "a rendezvous entry needs a job name of 1 to %d bytes and a "
                   "key of 1 to %d bytes (got %zu and %zu)", POD_KV_JOB_MAX, POD_KV_KEY_MAX,
                   jl, kl);
        return IPUOF_E_INVAL;
    }
    if (n > lim->max_value) {
        errbuf_set(err, errlen, "rendezvous value of key '%s' is %zu bytes; at most %u are "
                   "stored ([pod] kv_max_value_bytes)", key, n, lim->max_value);
        return IPUOF_E_TOO_LARGE;
    }
    j = find_job(kv, job);
    if (j != NULL && (e = find_entry(j, key)) != NULL)
        old = kl + e->n;
    if (e == NULL && j != NULL && j->nkeys >= lim->max_keys) {
        errbuf_set(err, errlen, "job '%s' already holds %u rendezvous entries, the most one job "
                   "may ([pod] kv_max_keys)", job, j->nkeys);
        return IPUOF_E_TOO_MANY;
    }
    if (kv->bytes - old + kl + n > lim->max_bytes) {
        errbuf_set(err, errlen, "the rendezvous store holds %llu bytes; %zu more would pass its "
                   "budget of %llu ([pod] kv_max_bytes)", (unsigned long long)kv->bytes,
                   kl + n, (unsigned long long)lim->max_bytes);
        return IPUOF_E_TOO_LARGE;
    }
    copy = malloc(n > 0 ? n : 1);
    if (copy == NULL)
        goto nomem;
    if (n > 0)
        memcpy(copy, v, n);
    if (j == NULL) {
        j = calloc(1, sizeof *j);
        if (j == NULL || (j->name = strdup(job)) == NULL) {
            free(j);
            goto nomem;
        }
        j->next = kv->jobs;
        kv->jobs = j;
    }
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e == NULL || (e->key = strdup(key)) == NULL) {
            free(e);
            goto nomem; /* an empty job left behind holds no bytes; dropped with the job */
        }
        e->next = j->entries;
        j->entries = e;
        j->nkeys++;
        kv->count++;
    } else {
        free(e->v);
    }
    e->v = copy;
    e->n = n;
    kv->bytes = kv->bytes - old + kl + n;
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
    const struct kv_job *j = find_job(kv, job);
    const struct kv_entry *e = j != NULL ? find_entry(j, key) : NULL;

    if (e == NULL)
        return 0;
    *v = e->v;
    *n = e->n;
    return 1;
}

unsigned
pod_kv_drop(struct pod_kv *kv, const char *job)
{
    for (struct kv_job **pp = &kv->jobs; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->name, job) == 0) {
            struct kv_job *j = *pp;
            *pp = j->next;
            return free_job(kv, j);
        }
    }
    return 0;
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
