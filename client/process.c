/*
 * process.c — which process of a job of several this one is: the process id and count
 * from the environment variables the usual launchers set, so `mpirun -np 2 app` works
 * without code changes, and the partition name the processes of one launch agree on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* Parses the decimal variable name into *out. 1 when set and valid, 0 when unset, -1 when
 * set to something else (err says so). */
static int
env_uint(const char *name, unsigned *out, char *err, size_t errlen)
{
    const char *v = getenv(name);
    char *end;
    unsigned long x;

    if (v == NULL || v[0] == '\0')
        return 0;
    x = strtoul(v, &end, 10);
    if (*end != '\0' || v[0] == '-' || x > 1000000) {
        snprintf(err, errlen, "%s is '%.64s'; it must be a number of 0 to 1000000", name, v);
        return -1;
    }
    *out = (unsigned)x;
    return 1;
}

/* Reads the pair (id_var, count_var). 1 when both are set and valid, 0 when neither is,
 * -1 otherwise (err says why). */
static int
env_pair(const char *id_var, const char *count_var, unsigned *id, unsigned *count, char *err,
         size_t errlen)
{
    int a = env_uint(id_var, id, err, errlen), b;

    if (a < 0)
        return -1;
    b = env_uint(count_var, count, err, errlen);
    if (b < 0)
        return -1;
    if (a != b) {
        snprintf(err, errlen, "%s is set but %s is not; set both", a ? id_var : count_var,
                 a ? count_var : id_var);
        return -1;
    }
    return a;
}

int
ipuof_process_env(unsigned *process_id, unsigned *num_processes, char *err, size_t errlen)
{
    unsigned id = 0, n = 1, offset, local, total;
    int rc;
    char scratch[8];

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    rc = env_pair("IPUOF_PROCESS_ID", "IPUOF_NUM_PROCESSES", &id, &n, err, errlen);
    if (rc == 0)
        rc = env_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", &id, &n, err, errlen);
    if (rc == 0) {
        /* PopRun: instance = replica offset / local replicas, instances = total / local. */
        rc = env_pair("POPDIST_REPLICA_INDEX_OFFSET", "POPDIST_NUM_TOTAL_REPLICAS", &offset,
                      &total, err, errlen);
        if (rc > 0 && (env_uint("POPDIST_NUM_LOCAL_REPLICAS", &local, err, errlen) <= 0 ||
                       local == 0 || total % local != 0 || offset % local != 0)) {
            if (err[0] == '\0')
                snprintf(err, errlen, "POPDIST_NUM_LOCAL_REPLICAS must be set and divide "
                         "POPDIST_NUM_TOTAL_REPLICAS and POPDIST_REPLICA_INDEX_OFFSET");
            rc = -1;
        } else if (rc > 0) {
            id = offset / local;
            n = total / local;
        }
    }
    if (rc < 0)
        return IPUOF_E_INVAL;
    if (rc > 0 && (n == 0 || id >= n)) {
        snprintf(err, errlen, "process id %u is out of range for %u processes (0..%u)", id, n,
                 n ? n - 1 : 0);
        return IPUOF_E_INVAL;
    }
    if (process_id != NULL)
        *process_id = rc > 0 ? id : 0;
    if (num_processes != NULL)
        *num_processes = rc > 0 ? n : 1;
    return IPUOF_OK;
}

/* The partition name the processes of one launch share when none is given: IPUOF_PARTITION,
 * else one made from the launcher's job id (Open MPI's PMIx namespace), else "ipuof-job".
 * Written to out (letters, digits, '-', '_', '.'). */
void
ipuof_job_partition_name(char *out, size_t len)
{
    const char *v = getenv("IPUOF_PARTITION");
    const char *prefix = "";
    size_t used;

    if (v == NULL || v[0] == '\0') {
        v = getenv("PMIX_NAMESPACE");
        prefix = "job-";
    }
    if (v == NULL || v[0] == '\0') {
        v = "ipuof-job";
        prefix = "";
    }
    used = (size_t)snprintf(out, len, "%s", prefix);
    for (const char *p = v; *p && used + 1 < len && used < 60; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.'))
            ch = '-';
        out[used++] = ch;
    }
    out[used] = '\0';
}
