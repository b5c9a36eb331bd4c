/*
 * profile.c — placement over several IPUs and the simulated clock, on the client side: the
 * setters of the placement options (strategy, blocks, tensor locations, profile), their
 * fields in the CompileRequest, profiling switched on by POPLAR_ENGINE_OPTIONS, the cost
 * figures of a run, and fetching the execution trace of the last run.
 *
 * The options are fields of struct ipuof_model_opts (set here on a struct) or of an options
 * handle (compile_opts.c, which checks them with a sentence; a struct's go through it too).
 * The daemon checks what only it can: IPUs against the partition, prefixes against the model's
 * nodes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_internal.h"
#include "wiremap.h"

#define ENGINE_OPTIONS_ENV "POPLAR_ENGINE_OPTIONS"

/* ---- setters ---------------------------------------------------------------------------- */

int
ipuof_model_opts_set_strategy(struct ipuof_model_opts *o, int strategy)
{
    if (o == NULL || strategy < IPUOF_STRATEGY_DEFAULT || strategy > IPUOF_STRATEGY_PHASED)
        return IPUOF_E_INVAL;
    o->strategy = strategy;
    return IPUOF_OK;
}

/* 1 when block b can be sent: a prefix of 1 to IPUOF_DEFAULT_MAX_STRING bytes, a stage
 * from IPUOF_STAGE_AUTO. */
static int
block_ok(const struct ipuof_block *b)
{
    return b->prefix != NULL && b->prefix[0] != '\0' &&
           strlen(b->prefix) <= IPUOF_DEFAULT_MAX_STRING && b->stage >= IPUOF_STAGE_AUTO;
}

int
ipuof_model_opts_set_blocks(struct ipuof_model_opts *o, const struct ipuof_block *blocks,
                            size_t n)
{
    if (o == NULL || n > IPUOF_MAX_BLOCKS || (n > 0 && blocks == NULL))
        return IPUOF_E_INVAL;
    for (size_t i = 0; i < n; i++)
        if (!block_ok(&blocks[i]))
            return IPUOF_E_INVAL;
    o->blocks = n > 0 ? blocks : NULL;
    o->n_blocks = n;
    return IPUOF_OK;
}

int
ipuof_model_opts_set_location(struct ipuof_model_opts *o, int kind, int location)
{
    if (o == NULL || kind < 0 || kind >= IPUOF_TENSOR_KINDS ||
        (location != IPUOF_LOCATION_ON_CHIP && location != IPUOF_LOCATION_OFF_CHIP))
        return IPUOF_E_INVAL;
    o->locations[kind] = location;
    return IPUOF_OK;
}

int
ipuof_model_opts_set_profile(struct ipuof_model_opts *o, int on)
{
    if (o == NULL)
        return IPUOF_E_INVAL;
    o->profile = on != 0;
    return IPUOF_OK;
}

/* ---- the request ------------------------------------------------------------------------ */

/* The wire's form of a tensor location already checked by its setter
 * (compile_opts.c). */
static Ipuof__TensorLocation
location_to_wire(int location)
{
    return (Ipuof__TensorLocation)ipuof_wm_to_wire(&ipuof_wm_location, location,
                                                   IPUOF__TENSOR_LOCATION__LOCATION_ON_CHIP);
}

int
ipuof_placement_build(ipuof_client *c, const struct ipuof_model_opts *o,
                      Ipuof__CompileRequest *cr, Ipuof__Block **blocks, Ipuof__Block ***ptrs,
                      char **trace_dir)
{
    const char *env = getenv(ENGINE_OPTIONS_ENV);
    size_t n = o->n_blocks;
    char dir[4096], why[700];
    int profile = 0;

    *trace_dir = NULL;
    *blocks = calloc(n != 0 ? n : 1, sizeof **blocks);
    *ptrs = calloc(n != 0 ? n : 1, sizeof **ptrs);
    if (*blocks == NULL || *ptrs == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory for %zu blocks", n);
    for (size_t i = 0; i < n; i++) {
        ipuof__block__init(&(*blocks)[i]);
        (*blocks)[i].prefix = (char *)o->blocks[i].prefix;
        (*blocks)[i].stage = o->blocks[i].stage;
        (*blocks)[i].ipu = o->blocks[i].ipu;
        (*ptrs)[i] = &(*blocks)[i];
    }
    cr->strategy = (Ipuof__ExecutionStrategy)ipuof_wm_to_wire(
        &ipuof_wm_strategy, o->strategy, IPUOF__EXECUTION_STRATEGY__STRATEGY_DEFAULT);
    cr->n_blocks = n;
    cr->blocks = *ptrs;
    cr->weights_location = location_to_wire(o->locations[IPUOF_TENSORS_WEIGHTS]);
    cr->activations_location = location_to_wire(o->locations[IPUOF_TENSORS_ACTIVATIONS]);
    cr->accumulators_location = location_to_wire(o->locations[IPUOF_TENSORS_ACCUMULATORS]);
    cr->optimizer_location = location_to_wire(o->locations[IPUOF_TENSORS_OPTIMIZER]);
    cr->profile = o->profile != 0;
    if (env == NULL || env[0] == '\0')
        return IPUOF_OK;
    if (ipuof_engine_options(env, &profile, dir, sizeof dir, why, sizeof why) < 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "%s", why);
    if (!profile)
        return IPUOF_OK;
    cr->profile = 1;
    *trace_dir = strdup(dir);
    if (*trace_dir == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory");
    return IPUOF_OK;
}

int
ipuof_trace_path_set(ipuof_model *m, const char *dir)
{
    size_t len = strlen(dir) + strlen(m->name) + sizeof "/.trace.json";
    char *p = malloc(len);

    if (p == NULL)
        return ipuof_err_set(m->c, IPUOF_E_NOMEM, "client", "out of memory");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        free(p);
        return ipuof_err_set(m->c, IPUOF_E_IO, "client",
                             "cannot make the trace directory '%s' (autoReport.directory of "
                             ENGINE_OPTIONS_ENV "): %s", dir, strerror(errno));
    }
    snprintf(p, len, "%s/%s.trace.json", dir, m->name);
    for (char *q = p + strlen(dir) + 1; *q != '\0'; q++)
        if (*q == '/')
            *q = '_'; /* a model name is not a path */
    free(m->trace_path);
    m->trace_path = p;
    return IPUOF_OK;
}

/* ---- cost figures ----------------------------------------------------------------------- */

void
ipuof_model_take_cost(ipuof_model *m, const Ipuof__RunCost *cost)
{
    m->n_busy = 0;
    m->device_seconds = 0;
    m->samples_per_s = 0;
    m->bottleneck_stage = -1;
    if (cost == NULL) {
        m->cost_code = IPUOF_E_UNSUPPORTED;
        snprintf(m->cost_reason, sizeof m->cost_reason,
                 "the daemon sent no cost figures with the run (an ipuofd without a cost model)");
        return;
    }
    m->cost_code = (int)cost->code;
    if (cost->code != IPUOF_OK) {
        snprintf(m->cost_reason, sizeof m->cost_reason, "%s",
                 cost->reason[0] ? cost->reason : "the daemon has no cost figures for the run");
        return;
    }
    m->device_seconds = cost->device_seconds;
    m->samples_per_s = cost->samples_per_s;
    m->bottleneck_stage = cost->bottleneck_stage;
    m->n_busy = cost->n_busy < IPUOF_MAX_BUSY ? cost->n_busy : IPUOF_MAX_BUSY;
    memcpy(m->busy, cost->busy, m->n_busy * sizeof *m->busy);
}

int
ipuof_model_run_cost(const ipuof_model *m, double *device_seconds, double *samples_per_s,
                     int *bottleneck_stage)
{
    if (m == NULL)
        return IPUOF_E_INVAL;
    if (!m->have_outputs)
        return ipuof_err_set(m->c, IPUOF_E_STATE, "client",
                             "model '%s' has no completed run to report on", m->name);
    if (m->cost_code != IPUOF_OK)
        return ipuof_err_set(m->c, m->cost_code, "daemon", "%s", m->cost_reason);
    if (device_seconds != NULL)
        *device_seconds = m->device_seconds;
    if (samples_per_s != NULL)
        *samples_per_s = m->samples_per_s;
    if (bottleneck_stage != NULL)
        *bottleneck_stage = m->bottleneck_stage;
    return IPUOF_OK;
}

size_t
ipuof_model_run_ipu_count(const ipuof_model *m)
{
    return m != NULL && m->have_outputs && m->cost_code == IPUOF_OK ? m->n_busy : 0;
}

int
ipuof_model_run_busy(const ipuof_model *m, size_t i, double *fraction)
{
    if (m == NULL || fraction == NULL || i >= ipuof_model_run_ipu_count(m))
        return IPUOF_E_INVAL;
    *fraction = m->busy[i];
    return IPUOF_OK;
}

int
ipuof_model_memory_detail(const ipuof_model *m, size_t i, uint64_t *gradients,
                          uint64_t *optimizer, uint64_t *stash, uint64_t *offchip,
                          uint64_t *peak_not_always_live)
{
    const struct ipuof_mem *r;

    if (m == NULL || i >= m->n_memory)
        return IPUOF_E_INVAL;
    r = &m->memory[i];
    if (gradients != NULL)
        *gradients = r->gradients;
    if (optimizer != NULL)
        *optimizer = r->optimizer;
    if (stash != NULL)
        *stash = r->stash;
    if (offchip != NULL)
        *offchip = r->offchip;
    if (peak_not_always_live != NULL)
        *peak_not_always_live = r->peak_not_always_live;
    return IPUOF_OK;
}

/* ---- the trace -------------------------------------------------------------------------- */

/* The trace exchange of ipuof_model_trace(), without clearing c's error or settling. */
static int
fetch_trace(ipuof_model *m, char **json, size_t *len)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__TraceRequest tr = IPUOF__TRACE_REQUEST__INIT;
    int rc = ipuof_model_usable(m);

    if (rc != IPUOF_OK)
        return rc;
    tr.model_id = m->id;
    req.body_case = IPUOF__HEADER__BODY_TRACE;
    req.trace = &tr;
    return ipuof_model_fetch_bytes(m, &req, IPUOF__HEADER__BODY_TRACE_REPLY, "trace", json, len);
}

int
ipuof_model_trace(ipuof_model *m, char **json, size_t *len)
{
    int rc;

    if (json != NULL)
        *json = NULL;
    if (len != NULL)
        *len = 0;
    if (m == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(m->c);
    if (json == NULL || len == NULL)
        return ipuof_err_set(m->c, IPUOF_E_INVAL, "client",
                             "ipuof_model_trace() needs places for the JSON and its length");
    rc = fetch_trace(m, json, len);
    return ipuof_model_settle(m->c, rc);
}

int
ipuof_model_write_trace(ipuof_model *m, const char *path)
{
    char *json = NULL;
    size_t len = 0;
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(m->c);
    if (path == NULL)
        return ipuof_err_set(m->c, IPUOF_E_INVAL, "client",
                             "ipuof_model_write_trace() needs a file name");
    rc = fetch_trace(m, &json, &len);
    if (rc == IPUOF_OK)
        rc = ipuof_file_write(m->c, path, json, len);
    free(json);
    return ipuof_model_settle(m->c, rc);
}
