/*
 * status.c — the status request and the report it returns.
 *
 * The report is a plain copy of the StatusReply: the protobuf message is freed before
 * ipuof_status() returns, and every string the report hands out lives in one block the
 * report owns, so ipuof_status_report_free() is a free() per array.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "wiremap.h"

struct ipuof_status_report {
    char *server_version;            /* points into strings */
    uint64_t uptime_ms;
    unsigned clients;
    unsigned waiting;
    uint64_t host_memory;            /* per partition, for run buffers */
    size_t n_ipus;
    struct ipuof_ipu_info *ipus;     /* owned, n_ipus entries */
    uint64_t *busy;                  /* owned, 2 x n_ipus: host, simulated microseconds */
    int *recovery;                   /* owned, n_ipus entries: IPUOF_RECOVERY_*, negated
                                      * for an unrecoverable error */
    size_t n_procs;
    struct ipuof_job_process *procs; /* owned, n_procs entries */
    const char **phases;             /* owned, n_procs entries: each process's job phase,
                                      * pointing into strings ("" when not said) */
    size_t n_hosts;
    struct ipuof_pod_host *hosts;    /* owned, n_hosts entries */
    char sim_isa[16];                /* "" from a daemon that does not say */
    char ipu_type[16];               /* the clock's device type; "" when not said */
    double clock_hz;
    uint64_t cache_used, cache_max;
    uint64_t arena_used, arena_max;
    char *strings;                   /* owned: every string of the report, NUL-separated */
};

/* Bytes s takes in the string block, terminator included; NULL takes one, as "". */
static size_t
str_size(const char *s)
{
    return (s != NULL ? strlen(s) : 0) + 1;
}

/* Copies s (NULL: "") to *cursor, advances the cursor and returns the copy. */
static const char *
put_str(char **cursor, const char *s)
{
    char *dst = *cursor;
    size_t n = str_size(s);

    if (n > 1)
        memcpy(dst, s, n);
    else
        dst[0] = '\0';
    *cursor += n;
    return dst;
}

/* Bytes the strings of sr take in a report's string block, terminators included. */
static size_t
reply_strings_size(const Ipuof__StatusReply *sr)
{
    size_t total = str_size(sr->server_version);

    for (size_t i = 0; i < sr->n_ipus; i++) {
        const Ipuof__IpuInfo *in = sr->ipus[i];
        total += str_size(in->partition) + str_size(in->loaded) + str_size(in->error);
        if (in->holder != NULL)
            total += str_size(in->holder->client_name) + str_size(in->holder->peer);
    }
    for (size_t i = 0; i < sr->n_job_processes; i++) {
        const Ipuof__JobProcess *jp = sr->job_processes[i];
        total += str_size(jp->partition) + str_size(jp->state) + str_size(jp->job_phase);
        if (jp->holder != NULL)
            total += str_size(jp->holder->client_name) + str_size(jp->holder->peer);
    }
    for (size_t i = 0; i < sr->n_pod_hosts; i++)
        total += str_size(sr->pod_hosts[i]->name) + str_size(sr->pod_hosts[i]->address) +
                 str_size(sr->pod_hosts[i]->error);
    return total;
}

/* A report with its arrays sized for sr and a string block of `strings` bytes (+ 1: the
 * shared "" of an absent holder), nothing copied yet; NULL when out of memory. */
static ipuof_status_report *
report_alloc(const Ipuof__StatusReply *sr, size_t strings)
{
    size_t n_ipus = sr->n_ipus != 0 ? sr->n_ipus : 1;
    ipuof_status_report *r = calloc(1, sizeof *r);

    if (r == NULL)
        return NULL;
    r->strings = malloc(strings + 1);
    r->ipus = calloc(n_ipus, sizeof *r->ipus);
    r->recovery = calloc(n_ipus, sizeof *r->recovery);
    r->busy = calloc(2 * n_ipus, sizeof *r->busy);
    r->procs = calloc(sr->n_job_processes + 1, sizeof *r->procs);
    r->phases = calloc(sr->n_job_processes + 1, sizeof *r->phases);
    r->hosts = calloc(sr->n_pod_hosts + 1, sizeof *r->hosts);
    if (r->strings == NULL || r->ipus == NULL || r->procs == NULL || r->phases == NULL ||
        r->recovery == NULL || r->busy == NULL || r->hosts == NULL) {
        ipuof_status_report_free(r);
        return NULL;
    }
    return r;
}

/* The daemon-wide figures of sr into r; the server version into the string block. */
static void
copy_daemon(ipuof_status_report *r, const Ipuof__StatusReply *sr, char **cursor)
{
    r->server_version = (char *)put_str(cursor, sr->server_version);
    r->uptime_ms = sr->uptime_ms;
    r->clients = sr->clients;
    r->waiting = sr->waiting;
    r->host_memory = sr->host_memory_bytes;
    snprintf(r->sim_isa, sizeof r->sim_isa, "%s", sr->sim_isa != NULL ? sr->sim_isa : "");
    if (sr->n_ipus > 0 && sr->ipus[0]->ipu_type != NULL) {
        snprintf(r->ipu_type, sizeof r->ipu_type, "%s", sr->ipus[0]->ipu_type);
        r->clock_hz = sr->ipus[0]->clock_hz;
    }
    r->cache_used = sr->cache_used_bytes;
    r->cache_max = sr->cache_bytes;
    r->arena_used = sr->arena_used_bytes;
    r->arena_max = sr->arena_bytes;
}

/* The IPUs of sr into r (its ipus, recovery and busy arrays); strings into the block. */
static void
copy_ipus(ipuof_status_report *r, const Ipuof__StatusReply *sr, char **cursor)
{
    r->n_ipus = sr->n_ipus;
    for (size_t i = 0; i < sr->n_ipus; i++) {
        const Ipuof__IpuInfo *in = sr->ipus[i];
        struct ipuof_ipu_info *out = &r->ipus[i];

        out->id = in->id;
        out->state = ipuof_wm_from_wire(&ipuof_wm_ipu_state, in->state, IPUOF_IPU_ERROR);
        out->tiles = in->tiles;
        out->memory_capacity_bytes = in->memory_capacity_bytes;
        out->memory_used_bytes = in->memory_used_bytes;
        out->memory_stash_bytes = in->stash_bytes;
        out->memory_offchip_bytes = in->offchip_bytes;
        out->partition = put_str(cursor, in->partition);
        out->loaded = put_str(cursor, in->loaded);
        out->error = put_str(cursor, in->error);
        out->held = in->holder != NULL;
        if (in->holder != NULL) {
            out->holder_client_id = in->holder->client_id;
            out->holder_name = put_str(cursor, in->holder->client_name);
            out->holder_pid = in->holder->pid;
            out->holder_peer = put_str(cursor, in->holder->peer);
        }
        out->steps_run = in->steps_run;
        out->host_memory_used_bytes = in->host_memory_used_bytes;
        r->recovery[i] = ipuof_wm_from_wire(&ipuof_wm_recovery, in->recovery,
                                            IPUOF_RECOVERY_FULL_RESET);
        if (in->unrecoverable)
            r->recovery[i] = -IPUOF_RECOVERY_FULL_RESET;
        r->busy[2 * i] = in->busy_host_us;
        r->busy[2 * i + 1] = in->busy_sim_us;
    }
}

/* The job processes of sr into r (procs, and each one's job phase); strings into the block. */
static void
copy_procs(ipuof_status_report *r, const Ipuof__StatusReply *sr, char **cursor)
{
    r->n_procs = sr->n_job_processes;
    for (size_t i = 0; i < sr->n_job_processes; i++) {
        const Ipuof__JobProcess *jp = sr->job_processes[i];
        struct ipuof_job_process *out = &r->procs[i];

        out->partition = put_str(cursor, jp->partition);
        out->process_id = jp->process_id;
        out->num_processes = jp->num_processes;
        out->state = put_str(cursor, jp->state);
        r->phases[i] = put_str(cursor, jp->job_phase);
        out->present = jp->holder != NULL;
        if (jp->holder != NULL) {
            out->client_id = jp->holder->client_id;
            out->name = put_str(cursor, jp->holder->client_name);
            out->pid = jp->holder->pid;
            out->peer = put_str(cursor, jp->holder->peer);
        }
    }
}

/* The Pod hosts of sr into r; strings into the block. */
static void
copy_hosts(ipuof_status_report *r, const Ipuof__StatusReply *sr, char **cursor)
{
    r->n_hosts = sr->n_pod_hosts;
    for (size_t i = 0; i < sr->n_pod_hosts; i++) {
        const Ipuof__PodHost *ph = sr->pod_hosts[i];
        struct ipuof_pod_host *out = &r->hosts[i];

        out->name = put_str(cursor, ph->name);
        out->address = put_str(cursor, ph->address);
        out->error = put_str(cursor, ph->error);
        out->state = ipuof_wm_from_wire(&ipuof_wm_pod_host_state, ph->state,
                                        IPUOF_POD_HOST_UNKNOWN);
        out->num_ipus = ph->num_ipus;
        out->free_ipus = ph->free_ipus;
        out->seen_ms_ago = ph->seen_ms_ago;
    }
}

/* Absent holders (of a process, of an IPU) share the one "" at empty, the block's end. */
static void
share_empty_holders(ipuof_status_report *r, char *empty)
{
    empty[0] = '\0';
    for (size_t i = 0; i < r->n_procs; i++) {
        if (!r->procs[i].present) {
            r->procs[i].name = empty;
            r->procs[i].peer = empty;
        }
    }
    for (size_t i = 0; i < r->n_ipus; i++) {
        if (!r->ipus[i].held) {
            r->ipus[i].holder_name = empty;
            r->ipus[i].holder_peer = empty;
        }
    }
}

/* Builds a caller-owned report from sr (only read); NULL when out of memory. */
static ipuof_status_report *
report_from_reply(const Ipuof__StatusReply *sr)
{
    ipuof_status_report *r = report_alloc(sr, reply_strings_size(sr));
    char *cursor;

    if (r == NULL)
        return NULL;
    cursor = r->strings;
    copy_daemon(r, sr, &cursor);
    copy_ipus(r, sr, &cursor);
    copy_procs(r, sr, &cursor);
    copy_hosts(r, sr, &cursor);
    share_empty_holders(r, cursor);
    return r;
}

int
ipuof_status(ipuof_client *c, ipuof_status_report **out)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__StatusRequest sq = IPUOF__STATUS_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (out == NULL) {
        rc = ipuof_err_set(c, IPUOF_E_INVAL, "client", "ipuof_status() needs a place for the "
                           "report");
        goto out;
    }
    req.body_case = IPUOF__HEADER__BODY_STATUS;
    req.status = &sq;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_STATUS_REPLY, c->request_ms, NULL, NULL,
                         &reply);
    if (rc != IPUOF_OK)
        goto out;
    *out = report_from_reply(reply->status_reply);
    if (*out == NULL)
        rc = ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory copying the status of "
                           "%zu IPUs", reply->status_reply->n_ipus);
out:
    ipuof_frame_header_free(reply);
    return rc;
}

void
ipuof_status_report_free(ipuof_status_report *r)
{
    if (r == NULL)
        return;
    free(r->ipus);
    free(r->recovery);
    free(r->busy);
    free(r->procs);
    free(r->phases);
    free(r->hosts);
    free(r->strings);
    free(r);
}

size_t
ipuof_status_report_ipu_count(const ipuof_status_report *r)
{
    return r != NULL ? r->n_ipus : 0;
}

int
ipuof_status_report_ipu(const ipuof_status_report *r, size_t i, struct ipuof_ipu_info *info)
{
    if (r == NULL || info == NULL || i >= r->n_ipus)
        return IPUOF_E_INVAL;
    *info = r->ipus[i];
    return IPUOF_OK;
}

int
ipuof_status_report_ipu_recovery(const ipuof_status_report *r, size_t i, int *unrecoverable)
{
    int v = r != NULL && i < r->n_ipus ? r->recovery[i] : 0;

    if (unrecoverable != NULL)
        *unrecoverable = v < 0;
    return v < 0 ? -v : v;
}

int
ipuof_status_report_ipu_busy(const ipuof_status_report *r, size_t i, uint64_t *host_us,
                             uint64_t *sim_us)
{
    if (r == NULL || i >= r->n_ipus)
        return IPUOF_E_INVAL;
    if (host_us != NULL)
        *host_us = r->busy[2 * i];
    if (sim_us != NULL)
        *sim_us = r->busy[2 * i + 1];
    return IPUOF_OK;
}

const char *
ipuof_status_report_server_version(const ipuof_status_report *r)
{
    return r != NULL ? r->server_version : "";
}

uint64_t
ipuof_status_report_uptime_ms(const ipuof_status_report *r)
{
    return r != NULL ? r->uptime_ms : 0;
}

unsigned
ipuof_status_report_clients(const ipuof_status_report *r)
{
    return r != NULL ? r->clients : 0;
}

unsigned
ipuof_status_report_waiting(const ipuof_status_report *r)
{
    return r != NULL ? r->waiting : 0;
}

size_t
ipuof_status_report_process_count(const ipuof_status_report *r)
{
    return r != NULL ? r->n_procs : 0;
}

int
ipuof_status_report_process(const ipuof_status_report *r, size_t i, struct ipuof_job_process *p)
{
    if (r == NULL || p == NULL || i >= r->n_procs)
        return IPUOF_E_INVAL;
    *p = r->procs[i];
    return IPUOF_OK;
}

const char *
ipuof_status_report_process_phase(const ipuof_status_report *r, size_t i)
{
    return r != NULL && i < r->n_procs ? r->phases[i] : "";
}

uint64_t
ipuof_status_report_host_memory(const ipuof_status_report *r)
{
    return r != NULL ? r->host_memory : 0;
}

size_t
ipuof_status_report_pod_host_count(const ipuof_status_report *r)
{
    return r != NULL ? r->n_hosts : 0;
}

int
ipuof_status_report_pod_host(const ipuof_status_report *r, size_t i, struct ipuof_pod_host *h)
{
    if (r == NULL || h == NULL || i >= r->n_hosts)
        return IPUOF_E_INVAL;
    *h = r->hosts[i];
    return IPUOF_OK;
}

const char *
ipuof_pod_host_state_name(int state)
{
    const char *name = "unknown";

    for (size_t i = 0; i < ipuof_wm_pod_host_state.n; i++)
        if (ipuof_wm_pod_host_state.rows[i].a == state)
            name = ipuof_wm_pod_host_state.rows[i].name;
    return name;
}

const char *
ipuof_status_report_sim_isa(const ipuof_status_report *r)
{
    return r != NULL ? r->sim_isa : "";
}

uint64_t
ipuof_status_report_cache_bytes(const ipuof_status_report *r, uint64_t *budget)
{
    if (budget != NULL)
        *budget = r != NULL ? r->cache_max : 0;
    return r != NULL ? r->cache_used : 0;
}

uint64_t
ipuof_status_report_arena_bytes(const ipuof_status_report *r, uint64_t *budget)
{
    if (budget != NULL)
        *budget = r != NULL ? r->arena_max : 0;
    return r != NULL ? r->arena_used : 0;
}

const char *
ipuof_status_report_ipu_type(const ipuof_status_report *r, double *clock_hz)
{
    if (clock_hz != NULL)
        *clock_hz = r != NULL ? r->clock_hz : 0;
    return r != NULL ? r->ipu_type : "";
}
