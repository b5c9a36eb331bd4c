/*
 * process.c — which process of a job of several this one is: the process id and count
 * from the environment variables the usual launchers set, so `mpirun -np 2 app` works
 * without code changes, and the partition name and job key the processes of one launch
 * agree on.
 */
#include <stdint.h>
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

/* Appends the characters of v allowed in a partition name to out[used..len), others as
 * '-', up to 60 characters in all. Returns the new length. */
static size_t
name_append(char *out, size_t len, size_t used, const char *v)
{
    for (const char *p = v; *p && used + 1 < len && used < 60; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.'))
            ch = '-';
        out[used++] = ch;
    }
    out[used] = '\0';
    return used;
}

/* The launcher's per-launch variables, shared by every process of one launch and different
 * between launches. Open MPI 4.1's mpirun (checked on Debian 12's openmpi-bin 4.1.4 with
 * `mpirun -n 2 env`) sets all but the third; orte_precondition_transports is a random
 * 128-bit value drawn per launch. PopRun launches through mpirun. */
static const char *const launcher_vars[] = {
    "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid",
    "OMPI_MCA_orte_precondition_transports",
};

/* The launcher's key: "VAR=value;" for each launcher variable set, into key. 1 when any
 * was set, 0 otherwise (key ""). */
static int
launcher_key(char *key, size_t len)
{
    size_t used = 0;

    key[0] = '\0';
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++) {
        const char *v = getenv(launcher_vars[i]);
        if (v == NULL || v[0] == '\0' || used >= len)
            continue;
        used += (size_t)snprintf(key + used, len - used, "%s=%s;", launcher_vars[i], v);
    }
    if (used >= len)
        key[len - 1] = '\0';
    return key[0] != '\0';
}

int
ipuof_job_identity(const char *explicit_name, const char *explicit_key, unsigned process_id,
                   unsigned num_processes, char *name, size_t name_len, char *key,
                   size_t key_len, char *err, size_t errlen)
{
    const char *v;
    uint64_t h = 1469598103934665603ull;

    err[0] = '\0';
    key[0] = '\0';
    v = getenv("IPUOF_JOB_KEY");
    if (explicit_key != NULL && explicit_key[0] != '\0') {
        snprintf(key, key_len, "%s", explicit_key);
    } else if (v != NULL && v[0] != '\0') {
        if (strlen(v) > IPUOF_JOB_KEY_MAX || strlen(v) >= key_len) {
            snprintf(err, errlen, "IPUOF_JOB_KEY is %zu bytes long; at most %d are accepted",
                     strlen(v), IPUOF_JOB_KEY_MAX);
            return IPUOF_E_INVAL;
        }
        snprintf(key, key_len, "%s", v);
    } else {
        launcher_key(key, key_len < IPUOF_JOB_KEY_MAX + 1 ? key_len : IPUOF_JOB_KEY_MAX + 1);
    }
    if (explicit_name != NULL && explicit_name[0] != '\0') {
        snprintf(name, name_len, "%s", explicit_name);
        return IPUOF_OK;
    }
    v = getenv("IPUOF_PARTITION");
    if (v != NULL && v[0] != '\0') {
        name_append(name, name_len, 0, v);
        return IPUOF_OK;
    }
    v = getenv("PMIX_NAMESPACE");
    if (v != NULL && v[0] != '\0' && key[0] != '\0') {
        name_append(name, name_len, name_append(name, name_len, 0, "job-"), v);
        return IPUOF_OK;
    }
    if (key[0] != '\0') { /* a name of the key's own: launches with their own keys never meet */
        for (const char *p = key; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        snprintf(name, name_len, "ipuof-job-%08x", (unsigned)(h ^ (h >> 32)));
        return IPUOF_OK;
    }
    snprintf(err, errlen, "process %u of %u has no job key and no job name of its own: "
             "unrelated programs would join each other's job under the default name "
             "'ipuof-job'; start the processes with mpirun (its job id is the key), or give "
             "every process of this launch the same IPUOF_JOB_KEY (e.g. IPUOF_JOB_KEY=$(od "
             "-An -N16 -tx1 /dev/urandom | tr -d ' ')) or the same name with IPUOF_PARTITION",
             process_id, num_processes);
    return IPUOF_E_INVAL;
}

int
ipuof_client_set_job_key(ipuof_client *c, const char *key)
{
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (key == NULL)
        key = "";
    if (strlen(key) > IPUOF_JOB_KEY_MAX)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "the job key is %zu bytes long; at "
                             "most %d are accepted", strlen(key), IPUOF_JOB_KEY_MAX);
    snprintf(c->job_key, sizeof c->job_key, "%s", key);
    return IPUOF_OK;
}
