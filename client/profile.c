/*
 * profile.c — placement over several IPUs and the simulated clock, on the client side: the
 * setters of the placement options (strategy, blocks, tensor locations, profile), their
 * fields in the CompileRequest, profiling switched on by POPLAR_ENGINE_OPTIONS, the cost
 * figures of a run, and fetching the execution trace of the last run.
 *
 * The options are plain fields of struct ipuof_model_opts; the setters check a value before
 * storing it, and the compile call checks the whole set again with a sentence. The daemon
 * checks what only it can: IPUs against the partition, prefixes against the model's nodes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_internal.h"
#include "wiremap.h"

#define ENGINE_OPTIONS_ENV "POPLAR_ENGINE_OPTIONS"
#define ENGINE_OPTIONS_MAX 4096 /* longest value read from the environment */

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

int
ipuof_placement_check(ipuof_client *c, const struct ipuof_model_opts *o)
{
    if (ipuof_wm_to_wire(&ipuof_wm_strategy, o->strategy, -1) < 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "execution strategy %d is not one of IPUOF_STRATEGY_*", o->strategy);
    for (int k = 0; k < IPUOF_TENSOR_KINDS; k++)
        if (ipuof_wm_to_wire(&ipuof_wm_location, o->locations[k], -1) < 0)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                                 "tensor location %d of kind %d is not one of IPUOF_LOCATION_*",
                                 o->locations[k], k);
    if (o->n_blocks > IPUOF_MAX_BLOCKS || (o->n_blocks > 0 && o->blocks == NULL))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "%zu blocks given%s; a placement has at most %d", o->n_blocks,
                             o->blocks == NULL ? " with blocks NULL" : "", IPUOF_MAX_BLOCKS);
    for (size_t i = 0; i < o->n_blocks; i++)
        if (!block_ok(&o->blocks[i]))
            return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                                 "block %zu needs a node-name prefix of 1 to %u bytes and a "
                                 "stage of at least IPUOF_STAGE_AUTO (-1), not %d", i,
                                 IPUOF_DEFAULT_MAX_STRING, o->blocks[i].stage);
    return IPUOF_OK;
}

/* Reads a JSON string at *p (after its opening quote) into out[0..len); \" and \\ and \/
 * are unescaped, other escapes kept as written. Returns 0 with *p past the closing quote,
 * or -1. */
static int
json_string(const char **p, char *out, size_t len)
{
    size_t n = 0;
    const char *s = *p;

    while (*s != '"') {
        char ch = *s++;
        if (ch == '\0')
            return -1;
        if (ch == '\\') {
            if (*s == '\0')
                return -1;
            ch = *s == '"' || *s == '\\' || *s == '/' ? *s++ : '\\';
        }
        if (n + 1 >= len)
            return -1;
        out[n++] = ch;
    }
    out[n] = '\0';
    *p = s + 1;
    return 0;
}

static const char *
skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return s;
}

/*
 * Parses POPLAR_ENGINE_OPTIONS's value v: a flat JSON object whose values are strings,
 * numbers or true / false (Poplar's other options are accepted and ignored). *profile is set when autoReport.all or autoReport.outputExecutionProfile is
 * "true" (or true); dir (PATH_MAX-sized) receives autoReport.directory, "." by default.
 * Returns 0, or -1 when v is not such an object.
 */
static int
engine_options(const char *v, int *profile, char *dir, size_t dir_len)
{
    const char *s = skip_ws(v);
    char key[128], val[4096];

    *profile = 0;
    snprintf(dir, dir_len, ".");
    if (*s++ != '{')
        return -1;
    s = skip_ws(s);
    if (*s == '}')
        return *skip_ws(s + 1) == '\0' ? 0 : -1;
    for (;;) {
        s = skip_ws(s);
        if (*s++ != '"' || json_string(&s, key, sizeof key) < 0)
            return -1;
        s = skip_ws(s);
        if (*s++ != ':')
            return -1;
        s = skip_ws(s);
        if (*s == '"') {
            s++;
            if (json_string(&s, val, sizeof val) < 0)
                return -1;
        } else if (strncmp(s, "true", 4) == 0 || strncmp(s, "false", 5) == 0) {
            snprintf(val, sizeof val, "%s", *s == 't' ? "true" : "false");
            s += *s == 't' ? 4 : 5;
        } else if (strchr("-0123456789", *s) != NULL && *s != '\0') {
            size_t n = strspn(s, "-+.0123456789eE");
            snprintf(val, sizeof val, "%.*s", (int)(n < sizeof val ? n : sizeof val - 1), s);
            s += n;
        } else {
            return -1;
        }
        if ((strcmp(key, "autoReport.all") == 0 ||
             strcmp(key, "autoReport.outputExecutionProfile") == 0) &&
            strcmp(val, "true") == 0)
            *profile = 1;
        if (strcmp(key, "autoReport.directory") == 0) {
            if (val[0] == '\0' || strlen(val) >= dir_len)
                return -1;
            snprintf(dir, dir_len, "%s", val);
        }
        s = skip_ws(s);
        if (*s == '}')
            return *skip_ws(s + 1) == '\0' ? 0 : -1;
        if (*s++ != ',')
            return -1;
    }
}

/* The wire's form of a tensor location already checked by ipuof_placement_check. */
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
    char dir[4096];
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
    if (strlen(env) > ENGINE_OPTIONS_MAX || engine_options(env, &profile, dir, sizeof dir) < 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             ENGINE_OPTIONS_ENV " is not a flat JSON object of strings, numbers "
                             "and booleans "
                             "of at most %d bytes, such as {\"autoReport.all\":\"true\", "
                             "\"autoReport.directory\":\"./report\"}", ENGINE_OPTIONS_MAX);
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
