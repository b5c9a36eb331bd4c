/*
 * jobs_pod_sync.c — what a training call of a Pod job's shared model broadcasts and checks
 * (jobs_pod.c runs the call): at the first call, that every daemon compiled the same model
 * with the same run shape; before a call, what rank 0's process 0 changed since the last
 * (every weight and buffer after a compile; the weights, buffers and optimizer state
 * written since, by the sim's write stamps); after a call, rank 0's replica 0's buffers,
 * which the other daemons show their processes while their replicas keep their own. So
 * every process of the job sees the state one daemon with all the replicas would have.
 * Also the failure helpers both files use (pod_xerr, pod_fail, pod_self_fail).
 * Does not: form the partition or reduce gradients (jobs_pod.c). Worker threads only.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "errbuf.h"
#include "ipuof/status.h"
#include "jobs_int.h"
#include "jobs_pod_int.h"
#include "models.h"

int
pod_xerr(struct sim_err *err, int code, const char *fmt, ...)
{
    va_list ap;

    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void
pod_fail(struct pod_job *pj, const char *what, const char *why, int rank)
{
    if (rank >= 0 && rank < pj->size && rank != pj->rank)
        errbuf_set(pj->why, sizeof pj->why, "Pod host '%s' of partition '%s' went away during "
                 "%s: %s", pj->hosts[rank], pj->job, what, why);
    else
        errbuf_set(pj->why, sizeof pj->why, "the Pod partition '%s' failed during %s: %s",
                 pj->job, what, why);
    pj->broken = 1;
    pj->code = IPUOF_E_CLOSED;
}

/* This daemon fails a collective step on its own (a mismatch, out of memory): the job
 * ends, and the others, which would wait for it, see it go away at once. Returns code. */
int
pod_self_fail(struct pod_job *pj, const char *what, int code, struct sim_err *err)
{
    pod_fail(pj, what, err->msg, -1);
    pj->code = code;
    pod_coll_close(pj->coll);
    pj->coll = NULL;
    return pod_xerr(err, code, "%s", pj->why);
}

/* Every index sim_exe_weight_info describes: the weights, then the optimizer state. */
static size_t
all_weights(const struct sim_exe *e)
{
    struct sim_weight_info wi;
    size_t n = sim_exe_weight_count(e);

    while (sim_exe_weight_info(e, n, &wi) == 0)
        n++;
    return n;
}

/* Rank 0's tensor i of e to every daemon: rank 0 reads it, the others write it (a buffer
 * into every replica's copy). Worker thread. */
static int
sync_one(struct pod_job *pj, struct sim_exe *e, size_t i, struct sim_err *err)
{
    struct sim_weight_info wi;
    char why[512];
    void *buf;
    int rc = 0;

    if (sim_exe_weight_info(e, i, &wi) != 0)
        return 0;
    buf = malloc(wi.bytes ? wi.bytes : 1);
    if (buf == NULL)
        return pod_self_fail(pj, "the broadcast of the weights",
                         pod_xerr(err, IPUOF_E_NOMEM, "out of memory broadcasting weight '%s'",
                              wi.name), err);
    if (pj->rank == 0)
        rc = sim_exe_read_weight(e, wi.name, buf, wi.bytes, err);
    if (rc == 0 && pod_coll_broadcast(pj->coll, buf, wi.bytes, 0, why, sizeof why) != 0) {
        pod_fail(pj, "the broadcast of the weights", why, pod_coll_failed_rank(pj->coll));
        free(buf);
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    if (rc == 0 && pj->rank != 0)
        rc = sim_exe_write_weight(e, wi.name, buf, wi.bytes, err);
    free(buf);
    return rc;
}

/*
 * Broadcasts what rank 0's process 0 changed in m since the last call (flags: MODEL_POD_*)
 * to every daemon, as PopDistStrategy broadcasts from instance 0: after a compile every
 * weight and buffer (each process compiled its own model bytes); after writes or copies
 * into m, only the weights, buffers and optimizer state written since
 * (sim_exe_weight_written). A buffer goes into every replica's copy, so one that was not
 * written keeps each replica's own, as the same replicas of one daemon do; optimizer state
 * is one copy, the same on every daemon unless written. Rank 0 sends the list first, one
 * byte per tensor. Worker thread.
 */
int
pod_sync_weights(struct pod_job *pj, struct model *m, int flags, struct sim_err *err)
{
    struct sim_exe *e = m->entry->exe;
    size_t count = sim_exe_weight_count(e), n = all_weights(e);
    uint64_t first = n, latest = m->pod_written;
    unsigned char *send;
    char why[512];
    int rc = 0;

    if (pod_coll_broadcast(pj->coll, &first, sizeof first, 0, why, sizeof why) != 0) {
        pod_fail(pj, "the broadcast of the weights", why, pod_coll_failed_rank(pj->coll));
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    if (first != n) {
        pod_xerr(err, IPUOF_E_INVAL, "model '%s' keeps %zu weights and optimizer state tensors "
             "on this daemon ('%s') and %" PRIu64 " on host '%s'; every process sets the same "
             "optimizer", m->name, n, pj->self, first, pj->hosts[0]);
        return pod_self_fail(pj, "the broadcast of the weights", IPUOF_E_INVAL, err);
    }
    send = calloc(n ? n : 1, 1);
    if (send == NULL)
        return pod_self_fail(pj, "the broadcast of the weights",
                         pod_xerr(err, IPUOF_E_NOMEM, "out of memory"), err);
    for (size_t i = 0; pj->rank == 0 && i < n; i++) {
        uint64_t w = sim_exe_weight_written(e, i);
        send[i] = (unsigned char)(((flags & MODEL_POD_COMPILED) && i < count) ||
                                  w > m->pod_written);
        latest = w > latest ? w : latest;
    }
    if (pod_coll_broadcast(pj->coll, send, n, 0, why, sizeof why) != 0) {
        pod_fail(pj, "the broadcast of the weights", why, pod_coll_failed_rank(pj->coll));
        free(send);
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (send[i])
            rc = sync_one(pj, e, i, err);
    free(send);
    if (rc == 0)
        m->pod_written = latest;
    return rc;
}

/*
 * After a training call: every daemon's processes see the buffers (BatchNormalization's
 * running statistics, module buffers forward() updates) of the partition's replica 0,
 * rank 0's replica 0, as every process of one daemon with all the replicas sees that
 * daemon's replica 0. Buffers are kept per replica and move on with each replica's own
 * micro-batches, so the other daemons' replicas keep their own copies for their runs (the
 * copies the same replicas of one daemon would have); rank 0 broadcasts its replica 0's,
 * in one collective, and the others show them to their processes (sim_exe_show_buffer:
 * reads, copies to an inference model, saves) until the next call. 0, or a status with
 * err filled. Worker thread.
 */
int
pod_show_buffers(struct pod_job *pj, struct sim_exe *e, struct sim_err *err)
{
    size_t total = 0, off = 0;
    char why[512], *all;
    int rc = 0;

    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        if (sim_exe_weight_info(e, i, &wi) == 0 && wi.kind == SIM_WEIGHT_BUFFER)
            total += wi.bytes;
    }
    if (total == 0)
        return 0;
    all = malloc(total);
    if (all == NULL)
        return pod_xerr(err, IPUOF_E_NOMEM, "out of memory sharing the buffers of replica 0");
    for (size_t i = 0; pj->rank == 0 && rc == 0 && i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        if (sim_exe_weight_info(e, i, &wi) != 0 || wi.kind != SIM_WEIGHT_BUFFER)
            continue;
        rc = sim_exe_read_weight(e, wi.name, all + off, wi.bytes, err);
        off += wi.bytes;
    }
    if (rc == 0 && pod_coll_broadcast(pj->coll, all, total, 0, why, sizeof why) != 0) {
        pod_fail(pj, "the broadcast of replica 0's buffers", why,
                 pod_coll_failed_rank(pj->coll));
        free(all);
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    for (size_t i = 0; pj->rank != 0 && rc == 0 && i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        if (sim_exe_weight_info(e, i, &wi) != 0 || wi.kind != SIM_WEIGHT_BUFFER)
            continue;
        rc = sim_exe_show_buffer(e, wi.name, all + off, wi.bytes, err);
        off += wi.bytes;
    }
    free(all);
    return rc;
}

/* FNV-1a over n bytes of p, continuing from h. */
static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What every daemon's executable of one model must agree on: its weights (names, dtypes,
 * sizes, kinds) and its run shape (replicas, device iterations, accumulation, batch, input
 * groups and their type). */
static uint64_t
model_print(const struct model *m)
{
    struct sim_exe *e = m->entry->exe;
    uint64_t h = 14695981039346656037ull;
    unsigned shape[6] = {sim_exe_replicas(e), sim_exe_device_iterations(e),
                         sim_exe_gradient_accumulation(e), sim_exe_micro_batch(e),
                         m->group > 1 ? m->group : 1, m->group > 1 && m->group_orthogonal};

    h = fnv(h, shape, sizeof shape);
    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        uint64_t f[3];
        if (sim_exe_weight_info(e, i, &wi) != 0)
            continue;
        f[0] = (uint64_t)wi.kind;
        f[1] = (uint64_t)wi.dtype;
        f[2] = wi.bytes;
        h = fnv(h, wi.name, strlen(wi.name) + 1);
        h = fnv(h, f, sizeof f);
    }
    return h;
}

/* The first call of m: every daemon compiled the same model with the same run shape, else
 * the all-reduce would pair different gradients (or fail at its sizes). 0 or a status. */
int
pod_check_model(struct pod_job *pj, struct model *m, struct sim_err *err)
{
    uint64_t mine = model_print(m), first = mine;
    float differs;
    char why[512];

    if (pod_coll_broadcast(pj->coll, &first, sizeof first, 0, why, sizeof why) != 0) {
        pod_fail(pj, "the first call's model check", why, pod_coll_failed_rank(pj->coll));
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    differs = first != mine ? 1.0f : 0.0f;
    if (pod_coll_allreduce_f32(pj->coll, &differs, 1, why, sizeof why) != 0) {
        pod_fail(pj, "the first call's model check", why, pod_coll_failed_rank(pj->coll));
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    if (differs != 0.0f) {
        errbuf_set(pj->why, sizeof pj->why, "model '%s' of partition '%s' differs between the "
                   "Pod's daemons (%s this one, host '%s'): its weights or run shape (replicas "
                   "per process, device iterations, accumulation, batch, input groups) are "
                   "not those of "
                   "host '%s'; every process of a job compiles the same model with the same "
                   "options", m->name, pj->job, first != mine ? "at least" : "not",
                   pj->self, pj->hosts[0]);
        pj->broken = 1;
        pj->code = IPUOF_E_INVAL;
        return pod_xerr(err, IPUOF_E_INVAL, "%s", pj->why);
    }
    m->pod_checked = 1;
    return 0;
}
