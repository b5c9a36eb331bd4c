/*
 * pod_store.h — the rendezvous store as its users see it: a client of one daemon's Pod port
 * (the partition's first daemon) holding one job's namespace. Its set and get have the
 * signatures of pod/coll.h's struct pod_store callbacks (ctx = the struct pod_kvc), so the
 * collective engine rendezvous through it; blocking, for worker threads, never the loop.
 */
#ifndef IPUOFD_POD_STORE_H
#define IPUOFD_POD_STORE_H

#include <stddef.h>

struct pod_kvc;

/*
 * A store client for job's namespace at the Pod port addr, saying hello with token as
 * host self; requests wait at most timeout_ms beyond what a get itself waits. Connects on
 * first use (and once more after a broken connection). IPUOF_OK with *out, or
 * IPUOF_E_NOMEM / IPUOF_E_INVAL (a job name over 256 bytes) with err.
 */
int pod_kvc_new(struct pod_kvc **out, const char *addr, const char *token, const char *self,
                const char *job, int timeout_ms, char *err, size_t errlen);

/* Sets key to v[0..n). 0, or -1 with a sentence in err (the serving daemon's refusal, or
 * why it could not be reached). ctx is a struct pod_kvc. */
int pod_kvc_set(void *ctx, const char *key, const void *v, size_t n, char *err, size_t errlen);

/* Waits up to timeout_ms for key to be set; *v is malloc'd (caller frees; NULL when n is 0)
 * of *n bytes. 0; 1 when the key was not set within timeout_ms (err names the key and the
 * job); -1 with err on any other failure. */
int pod_kvc_get(void *ctx, const char *key, void **v, size_t *n, int timeout_ms, char *err,
                size_t errlen);

/* Drops every entry of the job at the serving daemon. The count dropped, or -1 with err. */
int pod_kvc_drop(struct pod_kvc *k, char *err, size_t errlen);

/* From any thread: every wait of k, now and later, ends at once with an error (the job
 * that rendezvous is gone). NULL is a no-op. */
void pod_kvc_cancel(struct pod_kvc *k);

/* Closes the connection and frees k; NULL is a no-op. */
void pod_kvc_free(struct pod_kvc *k);

#endif
