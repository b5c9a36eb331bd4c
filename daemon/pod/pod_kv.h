/*
 * pod_kv.h — the rendezvous store's table (gloo's Store: set, get), with no I/O: entries
 * live in a job's namespace, every size and count is checked against the limits before
 * anything is allocated (every byte, records included), a job's entries go at once when it
 * ends, and jobs and keys are found through hash tables. Served by req_pod.c
 * on the Pod port; unit-tested alone (tests/unit/test_pod_kv.c).
 */
#ifndef IPUOFD_POD_KV_H
#define IPUOFD_POD_KV_H

#include <stddef.h>
#include <stdint.h>

#define POD_KV_JOB_MAX 256   /* bytes of a job's name, terminator excluded */
#define POD_KV_KEY_MAX 512   /* bytes of a key */

/* What the budget counts for one entry beyond its key and value bytes, and for one job
 * beyond its name: the records, the allocator's headers, the hash tables' slots. */
#define POD_KV_ENTRY_COST 160
#define POD_KV_JOB_COST 128

struct pod_kv_limits {
    unsigned max_keys;       /* entries per job */
    uint32_t max_value;      /* bytes of one value */
    uint64_t max_bytes;      /* every byte of every job together, with held */
    uint64_t held;           /* bytes the store's user holds beside the table and counts
                              * against max_bytes (replies queued to waiting gets) */
};

struct pod_kv;

/* An empty table; NULL when out of memory. */
struct pod_kv *pod_kv_new(void);

/* Frees the table and every entry; NULL is a no-op. */
void pod_kv_free(struct pod_kv *kv);

/*
 * Sets job's key to a copy of v[0..n) (replacing an earlier value). IPUOF_OK, or
 * IPUOF_E_INVAL (empty or overlong job or key, a key with a NUL), IPUOF_E_TOO_LARGE (value
 * over max_value, or the budget max_bytes would be passed by what the table holds plus held), IPUOF_E_TOO_MANY (job already
 * has max_keys entries) or IPUOF_E_NOMEM, with a sentence naming the limit in err; the
 * table is then unchanged.
 */
int pod_kv_set(struct pod_kv *kv, const struct pod_kv_limits *lim, const char *job,
               const char *key, const void *v, size_t n, char *err, size_t errlen);

/* 1 with *v (borrowed until the next set or drop of that job) and *n when job's key is set,
 * else 0. */
int pod_kv_get(const struct pod_kv *kv, const char *job, const char *key, const void **v,
               size_t *n);

/* Removes every entry of job; returns how many there were. */
unsigned pod_kv_drop(struct pod_kv *kv, const char *job);

/* Bytes held as the budget counts them (names, keys, values and the per-job and per-entry
 * costs), entries, and jobs, over every job. */
uint64_t pod_kv_bytes(const struct pod_kv *kv);
unsigned pod_kv_count(const struct pod_kv *kv);
unsigned pod_kv_jobs(const struct pod_kv *kv);

#endif
