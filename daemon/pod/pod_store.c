/*
 * pod_store.c — see pod_store.h. One request at a time (a mutex), over pod_client.c.
 */
#include "pod_store.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "frame.h"
#include "ipuof/status.h"
#include "pod_client.h"
#include "pod_kv.h"

struct pod_kvc {
    pthread_mutex_t mu;
    struct pod_client *pc;
    char addr[256];
    char token[256];
    char self[64];
    char job[POD_KV_JOB_MAX + 1];
    int timeout_ms;
    int answered;                /* the last call's status is the serving daemon's answer */
    int cancel_fd;               /* an eventfd: written once by pod_kvc_cancel */
};

int
pod_kvc_new(struct pod_kvc **out, const char *addr, const char *token, const char *self,
            const char *job, int timeout_ms, char *err, size_t errlen)
{
    struct pod_kvc *k;

    *out = NULL;
    if (strlen(job) == 0 || strlen(job) > POD_KV_JOB_MAX || strlen(addr) >= sizeof k->addr ||
        strlen(token) >= sizeof k->token) {
        errbuf_set(err, errlen, "a rendezvous store needs a job name of 1 to %d bytes, an "
                   "address and token of less than 256", POD_KV_JOB_MAX);
        return IPUOF_E_INVAL;
    }
    k = calloc(1, sizeof *k);
    if (k == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return IPUOF_E_NOMEM;
    }
    k->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (k->cancel_fd < 0) {
        free(k);
        errbuf_set(err, errlen, "cannot make an eventfd for the rendezvous store client");
        return IPUOF_E_NOMEM;
    }
    pthread_mutex_init(&k->mu, NULL);
    snprintf(k->addr, sizeof k->addr, "%s", addr);
    snprintf(k->token, sizeof k->token, "%s", token);
    snprintf(k->self, sizeof k->self, "%s", self);
    snprintf(k->job, sizeof k->job, "%s", job);
    k->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    *out = k;
    return IPUOF_OK;
}

/*
 * Sends req (+ payload) and waits wait_ms for the reply of body want, connecting first
 * when needed; a connection that broke before anything was answered is made again once.
 * Called with k->mu held. IPUOF_OK, or a status with err: the serving daemon's answer when
 * k->answered is set, else why it could not be reached.
 */
static int
call_locked(struct pod_kvc *k, Ipuof__Header *req, const void *payload, uint32_t plen,
            Ipuof__Header__BodyCase want, Ipuof__Header **reply, void **rp, uint32_t *rplen,
            int wait_ms, char *err, size_t errlen)
{
    int rc = IPUOF_E_IO;

    k->answered = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fresh = k->pc == NULL;
        if (fresh) {
            rc = pod_client_open_c(&k->pc, k->addr, k->token, k->self, k->timeout_ms,
                                   k->cancel_fd, err, errlen);
            if (rc != IPUOF_OK)
                return rc;
        }
        rc = pod_client_call(k->pc, req, payload, plen, want, reply, rp, rplen, wait_ms, err,
                             errlen);
        if (rc == IPUOF_OK || pod_client_answered(k->pc)) {
            k->answered = 1;
            return rc;
        }
        /* The connection cannot be trusted any more. */
        pod_client_close(k->pc);
        k->pc = NULL;
        if (fresh || rc == IPUOF_E_TIMEOUT || rc == IPUOF_E_CANCELLED)
            return rc;
    }
    return rc;
}

int
pod_kvc_set(void *ctx, const char *key, const void *v, size_t n, char *err, size_t errlen)
{
    struct pod_kvc *k = ctx;
    Ipuof__Header req = IPUOF__HEADER__INIT, *reply = NULL;
    Ipuof__KvSetRequest q = IPUOF__KV_SET_REQUEST__INIT;
    int rc;

    if (n > POD_CLIENT_MAX_PAYLOAD) {
        errbuf_set(err, errlen, "rendezvous value of key '%s' is %zu bytes; at most %u travel",
                   key, n, POD_CLIENT_MAX_PAYLOAD);
        return -1;
    }
    q.job = k->job;
    q.key = (char *)key;
    req.body_case = IPUOF__HEADER__BODY_KV_SET;
    req.kv_set = &q;
    pthread_mutex_lock(&k->mu);
    rc = call_locked(k, &req, v, (uint32_t)n, IPUOF__HEADER__BODY_KV_SET_REPLY, &reply, NULL,
                     NULL, k->timeout_ms, err, errlen);
    pthread_mutex_unlock(&k->mu);
    ipuof_frame_header_free(reply);
    return rc == IPUOF_OK ? 0 : -1;
}

int
pod_kvc_get(void *ctx, const char *key, void **v, size_t *n, int timeout_ms, char *err,
            size_t errlen)
{
    struct pod_kvc *k = ctx;
    Ipuof__Header req = IPUOF__HEADER__INIT, *reply = NULL;
    Ipuof__KvGetRequest q = IPUOF__KV_GET_REQUEST__INIT;
    void *pl = NULL;
    uint32_t plen = 0;
    int rc, answered;

    *v = NULL;
    *n = 0;
    q.job = k->job;
    q.key = (char *)key;
    q.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
    req.body_case = IPUOF__HEADER__BODY_KV_GET;
    req.kv_get = &q;
    pthread_mutex_lock(&k->mu);
    /* The serving daemon answers a wait that timed out itself; this deadline is for a
     * daemon that stopped answering. */
    rc = call_locked(k, &req, NULL, 0, IPUOF__HEADER__BODY_KV_GET_REPLY, &reply, &pl, &plen,
                     (int)q.timeout_ms + k->timeout_ms, err, errlen);
    answered = k->answered;
    pthread_mutex_unlock(&k->mu);
    ipuof_frame_header_free(reply);
    if (rc == IPUOF_E_TIMEOUT && answered)
        return 1; /* the serving daemon's answer: the key did not come in time */
    if (rc != IPUOF_OK)
        return -1;
    *v = pl;
    *n = plen;
    return 0;
}

int
pod_kvc_drop(struct pod_kvc *k, char *err, size_t errlen)
{
    Ipuof__Header req = IPUOF__HEADER__INIT, *reply = NULL;
    Ipuof__KvDropRequest q = IPUOF__KV_DROP_REQUEST__INIT;
    int rc, dropped = -1;

    q.job = k->job;
    req.body_case = IPUOF__HEADER__BODY_KV_DROP;
    req.kv_drop = &q;
    pthread_mutex_lock(&k->mu);
    rc = call_locked(k, &req, NULL, 0, IPUOF__HEADER__BODY_KV_DROP_REPLY, &reply, NULL, NULL,
                     k->timeout_ms, err, errlen);
    pthread_mutex_unlock(&k->mu);
    if (rc == IPUOF_OK)
        dropped = (int)reply->kv_drop_reply->dropped;
    ipuof_frame_header_free(reply);
    return dropped;
}

void
pod_kvc_cancel(struct pod_kvc *k)
{
    uint64_t one = 1;

    if (k != NULL && write(k->cancel_fd, &one, sizeof one) < 0) {
        /* the counter is already non-zero: cancelled before */
    }
}

void
pod_kvc_free(struct pod_kvc *k)
{
    if (k == NULL)
        return;
    pod_client_close(k->pc);
    close(k->cancel_fd);
    pthread_mutex_destroy(&k->mu);
    free(k);
}
