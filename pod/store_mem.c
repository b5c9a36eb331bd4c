/*
 * store_mem.c — an in-process rendezvous store for pod/coll.h: a hash map of keys to
 * values under one mutex, with a condition variable that wakes the readers waiting for a
 * key. For tests whose ranks are threads.
 */
#include "coll.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MEM_BUCKETS 256

struct mem_entry {
    struct mem_entry *next;
    char *key;
    void *val;
    size_t n;
};

struct pod_store_mem {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mem_entry *bucket[MEM_BUCKETS];
};

/* FNV-1a of key, reduced to a bucket index. */
static size_t
mem_hash(const char *key)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % MEM_BUCKETS;
}

/* The entry for key, or NULL. The caller holds m->mu. */
static struct mem_entry *
mem_find_locked(struct pod_store_mem *m, const char *key)
{
    for (struct mem_entry *e = m->bucket[mem_hash(key)]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* pod_store.set: copies key and value; a key set again takes the new value. */
static int
mem_set(void *ctx, const char *key, const void *v, size_t n, char *err, size_t errlen)
{
    struct pod_store_mem *m = ctx;
    void *copy = malloc(n ? n : 1);
    if (!copy) {
        snprintf(err, errlen, "memory store: out of memory storing %zu bytes for key '%s'", n, key);
        return -1;
    }
    if (n)
        memcpy(copy, v, n);
    pthread_mutex_lock(&m->mu);
    struct mem_entry *e = mem_find_locked(m, key);
    if (!e) {
        e = calloc(1, sizeof(*e));
        char *k = e ? strdup(key) : NULL;
        if (!k) {
            pthread_mutex_unlock(&m->mu);
            free(e);
            free(copy);
            snprintf(err, errlen, "memory store: out of memory adding key '%s'", key);
            return -1;
        }
        e->key = k;
        size_t b = mem_hash(key);
        e->next = m->bucket[b];
        m->bucket[b] = e;
    } else {
        free(e->val);
    }
    e->val = copy;
    e->n = n;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

/* pod_store.get: waits on the condition variable until key is set or timeout_ms passed. */
static int
mem_get(void *ctx, const char *key, void **v, size_t *n, int timeout_ms,
        char *err, size_t errlen)
{
    struct pod_store_mem *m = ctx;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (timeout_ms < 0)
        timeout_ms = 0;
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    struct mem_entry *e;
    while (!(e = mem_find_locked(m, key))) {
        if (pthread_cond_timedwait(&m->cv, &m->mu, &dl) == ETIMEDOUT) {
            e = mem_find_locked(m, key);
            break;
        }
    }
    if (!e) {
        pthread_mutex_unlock(&m->mu);
        snprintf(err, errlen, "memory store: key '%s' not set within %d ms", key, timeout_ms);
        return 1;
    }
    void *copy = malloc(e->n ? e->n : 1);
    if (!copy) {
        pthread_mutex_unlock(&m->mu);
        snprintf(err, errlen, "memory store: out of memory reading key '%s'", key);
        return -1;
    }
    if (e->n)
        memcpy(copy, e->val, e->n);
    *v = copy;
    *n = e->n;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

struct pod_store_mem *
pod_store_mem_new(void)
{
    struct pod_store_mem *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void
pod_store_mem_fill(struct pod_store_mem *m, struct pod_store *st)
{
    st->ctx = m;
    st->set = mem_set;
    st->get = mem_get;
}

void
pod_store_mem_free(struct pod_store_mem *m)
{
    if (!m)
        return;
    for (size_t b = 0; b < MEM_BUCKETS; b++) {
        struct mem_entry *e = m->bucket[b];
        while (e) {
            struct mem_entry *next = e->next;
            free(e->key);
            free(e->val);
            free(e);
            e = next;
        }
    }
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
