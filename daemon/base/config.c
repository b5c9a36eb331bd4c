/*
 * config.c — see config.h. Every key is described once, in the key table below: its
 * section, name, type, bounds, and whether a SIGHUP reload may change it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"
#include "log.h"
#include "sim.h"

enum key_type { K_STR, K_UINT, K_BYTES, K_LEVEL, K_REAL, K_BOOL, K_LINES, K_SUM };

struct key {
    const char *section;
    const char *name;
    enum key_type type;
    size_t offset;
    size_t size;      /* K_STR: buffer size; K_UINT/K_BYTES/K_REAL: sizeof field */
    uint64_t min, max;            /* K_REAL: the value lies in (min, max / 1000], or in
                                   * [0, max / 1000] when min is 0 */
    int reloadable;
};

/* K_REAL bounds are kept x1000: rates up to 1e15 per second, fractions up to 1. */
#define RATE_MAX (1000ull * 1000000000000000ull)

#define F(field) offsetof(struct cfg, field), sizeof(((struct cfg *)0)->field)

static const struct key keys[] = {
    {"server", "listen", K_STR, F(listen), 0, 0, 0},
    {"server", "admin_socket", K_STR, F(admin_socket), 0, 0, 0},
    {"server", "max_connections", K_UINT, F(max_connections), 1, 1000000, 1},
    {"server", "max_header_bytes", K_BYTES, F(max_header_bytes), 1024, 64u << 20, 0},
    {"server", "max_payload_bytes", K_BYTES, F(max_payload_bytes), 0, 0xffffffffu, 0},
    {"server", "prehello_max_bytes", K_BYTES, F(prehello_max_bytes), 256, 1u << 20, 0},
    {"server", "handshake_timeout", K_UINT, F(handshake_timeout), 1, 3600, 1},
    {"server", "idle_timeout", K_UINT, F(idle_timeout), 0, 30 * 86400, 1},
    {"server", "admin_connections", K_UINT, F(admin_connections), 1, 10000, 1},
    {"server", "allow_unauthenticated", K_BOOL, F(allow_unauthenticated), 0, 1, 1},
    {"server", "max_output_bytes", K_BYTES, F(max_output_bytes), 1u << 20, UINT64_MAX, 1},
    {"server", "frames_per_read", K_UINT, F(frames_per_read), 1, 10000, 1},
    {"server", "auth_token", K_STR, F(auth_token), 0, 0, 1},
    {"server", "admin_token", K_STR, F(admin_token), 0, 0, 1},
    {"server", "drain_timeout", K_UINT, F(drain_timeout), 0, 3600, 1},
    {"server", "max_waiters", K_UINT, F(max_waiters), 0, 100000, 1},
    {"server", "max_waiters_per_client", K_UINT, F(max_waiters_per_client), 1, 100000, 1},
    {"server", "job_timeout", K_UINT, F(job_timeout), 1, 86400, 1},
    {"server", "max_model_bytes", K_BYTES, F(max_model_bytes), 1024, 1ull << 31, 1},
    {"server", "cache_entries", K_UINT, F(cache_entries), 0, 4096, 0},
    {"server", "cache_bytes", K_BYTES, F(cache_bytes), 0, 1ull << 44, 1},
    {"server", "worker_threads", K_UINT, F(worker_threads), 0, 256, 0},
    /* service keys (docs/service.md): certificates are re-read by a reload */
    {"server", "metrics_listen", K_STR, F(metrics_listen), 0, 0, 0},
    {"server", "tls_cert_file", K_STR, F(tls_cert_file), 0, 0, 1},
    {"server", "tls_key_file", K_STR, F(tls_key_file), 0, 0, 1},
    {"server", "tls_ca_file", K_STR, F(tls_ca_file), 0, 0, 1},
    {"server", "tls_auth_clients", K_STR, F(tls_auth_clients), 0, 0, 1},
    {"server", "tls_admin_subjects", K_STR, F(tls_admin_subjects), 0, 0, 1},
    {"devices", "ipus", K_UINT, F(ipus), 1, CFG_MAX_IPUS, 0},
    {"devices", "ipu_memory", K_BYTES, F(ipu_memory), 1u << 20, 1ull << 40, 0},
    {"devices", "tiles", K_UINT, F(tiles), 1, 65536, 0},
    {"devices", "host_memory", K_BYTES, F(host_memory), 1u << 20, 1ull << 44, 1},
    {"devices", "arena_memory", K_BYTES, F(arena_memory), 0, 1ull << 48, 1},
    /* [cost]: rates are reloadable; they apply to models compiled after the reload. */
    {"cost", "flops_per_s", K_REAL, F(cost_flops_per_s), 0, RATE_MAX, 1},
    {"cost", "mem_bytes_per_s", K_REAL, F(cost_mem_bytes_per_s), 0, RATE_MAX, 1},
    {"cost", "exchange_bytes_per_s", K_REAL, F(cost_exchange_bytes_per_s), 0, RATE_MAX, 1},
    {"cost", "link_bytes_per_s", K_REAL, F(cost_link_bytes_per_s), 1, RATE_MAX, 1},
    {"cost", "gw_link_bytes_per_s", K_REAL, F(cost_gw_link_bytes_per_s), 1, RATE_MAX, 1},
    {"cost", "host_bytes_per_s", K_REAL, F(cost_host_bytes_per_s), 1, RATE_MAX, 1},
    {"cost", "sync_seconds", K_REAL, F(cost_sync_seconds), 0, 1000ull, 1},
    {"cost", "efficiency", K_REAL, F(cost_efficiency), 1, 1000ull, 1},
    {"cost", "matmul_efficiency", K_REAL, F(cost_matmul_efficiency), 1, 1000ull, 1},
    {"cost", "ipu_type", K_STR, F(cost_ipu_type), 0, 0, 1},
    {"cost", "compute_set_cycles", K_REAL, F(cost_cs_cycles), 0, 1000000000ull, 1},
    {"cost", "host_exchange_seconds", K_REAL, F(cost_host_xfer_seconds), 0, 1000ull, 1},
    {"cost", "step_seconds", K_REAL, F(cost_step_seconds), 0, 1000ull, 1},
    /* [pod]: who the peers are needs a restart; the rendezvous limits are reloadable. */
    {"pod", "name", K_STR, F(pod_name), 0, 0, 0},
    {"pod", "listen", K_STR, F(pod_listen), 0, 0, 0},
    {"pod", "peers", K_STR, F(pod_peers), 0, 0, 0},
    {"pod", "token", K_STR, F(pod_token), 0, 0, 0},
    {"pod", "hello_interval", K_UINT, F(pod_hello_interval), 1, 3600, 0},
    {"pod", "timeout_ms", K_UINT, F(pod_timeout_ms), 100, 3600000, 0},
    {"pod", "sum", K_SUM, F(pod_sum_daemons), 0, 1, 0},
    {"pod", "kv_max_keys", K_UINT, F(pod_kv_max_keys), 1, 1000000, 1},
    {"pod", "kv_max_value_bytes", K_BYTES, F(pod_kv_max_value_bytes), 1, 64u << 20, 1},
    {"pod", "kv_max_bytes", K_BYTES, F(pod_kv_max_bytes), 1024, 1ull << 32, 1},
    {"pod", "max_connections", K_UINT, F(pod_max_connections), 1, 4096, 1},
    {"log", "level", K_LEVEL, F(log_level), 0, 0, 1},
    /* [faults]: inject may be given again; each line adds one (K_LINES appends). */
    {"faults", "inject", K_LINES, F(faults), 0, 0, 0},
};

void
cfg_defaults(struct cfg *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "127.0.0.1:50052");
    snprintf(c->admin_socket, sizeof c->admin_socket, "/run/ipuofd/admin.sock");
    c->admin_socket_default = 1;
    c->max_connections = 1024;
    snprintf(c->tls_auth_clients, sizeof c->tls_auth_clients, "no");
    c->max_header_bytes = 1u << 20;
    c->max_payload_bytes = 256u << 20;
    c->prehello_max_bytes = 16384;
    c->handshake_timeout = 10;
    c->idle_timeout = 300;
    c->admin_connections = 8;
    c->host_memory = 1ull << 30;
    c->max_output_bytes = 512ull << 20;
    c->frames_per_read = 20;
    c->drain_timeout = 30;
    c->max_waiters = 256;
    c->max_waiters_per_client = 16;
    c->job_timeout = 60;
    c->max_model_bytes = 1ull << 30;
    c->cache_entries = 16;
    c->cache_bytes = 1ull << 30;
    c->worker_threads = 0;
    c->ipus = 4;
    c->ipu_memory = 900ull << 20;
    c->tiles = 1472;
    /* the clock's figures, as sim_cost_cfg_init() (docs/cost-model.md gives the sources);
     * flops_per_s, mem_bytes_per_s and exchange_bytes_per_s 0: those of ipu_type */
    {
        struct sim_cost_cfg k;
        sim_cost_cfg_init(&k);
        c->cost_flops_per_s = 0;
        c->cost_mem_bytes_per_s = 0;
        c->cost_exchange_bytes_per_s = 0;
        c->cost_link_bytes_per_s = k.link_bytes_per_s;
        c->cost_gw_link_bytes_per_s = k.gw_link_bytes_per_s;
        c->cost_host_bytes_per_s = k.host_bytes_per_s;
        c->cost_sync_seconds = k.sync_s;
        c->cost_efficiency = k.efficiency;
        c->cost_matmul_efficiency = k.matmul_efficiency;
        c->cost_cs_cycles = k.cs_cycles;
        c->cost_host_xfer_seconds = k.host_xfer_s;
        c->cost_step_seconds = k.step_s;
        snprintf(c->cost_ipu_type, sizeof c->cost_ipu_type, "%s", sim_ipu_type_name(k.ipu_type));
    }
    if (gethostname(c->pod_name, sizeof c->pod_name) != 0 || c->pod_name[0] == '\0')
        snprintf(c->pod_name, sizeof c->pod_name, "localhost");
    c->pod_name[sizeof c->pod_name - 1] = '\0';
    snprintf(c->pod_listen, sizeof c->pod_listen, "127.0.0.1:50053");
    c->pod_hello_interval = 2;
    c->pod_timeout_ms = 30000;
    c->pod_kv_max_keys = 1024;
    c->pod_kv_max_value_bytes = 1u << 20;
    c->pod_kv_max_bytes = 64ull << 20;
    c->pod_max_connections = 64;
    c->log_level = LOG_LVL_INFO;
}

int
cfg_parse_bytes(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1},          {"B", 1},           {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
                 {"GiB", 1ull << 30}, {"TiB", 1ull << 40}, {"K", 1ull << 10},   {"M", 1ull << 20},
                 {"G", 1ull << 30},   {"KB", 1000},        {"MB", 1000000},     {"GB", 1000000000}};
    char *end;
    unsigned long long v;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    while (*end == ' ')
        end++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return -1;
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static const struct key *
find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((section == NULL || strcmp(keys[i].section, section) == 0) &&
            strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static void
store_uint(void *field, size_t size, uint64_t v)
{
    if (size == sizeof(uint64_t))
        *(uint64_t *)field = v;
    else
        *(uint32_t *)field = (uint32_t)v;
}

static uint64_t
load_uint(const void *field, size_t size)
{
    return size == sizeof(uint64_t) ? *(const uint64_t *)field : *(const uint32_t *)field;
}

/* Parses a K_REAL key's value ("62.5e12", "0.25") into *field, checking its bounds. */
static int
set_real(const struct key *k, double *field, const char *value, char *err, size_t errlen)
{
    double max = (double)k->max / 1000.0;
    char *end;
    double v;

    errno = 0;
    v = strtod(value, &end);
    if (value[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v > max ||
        (k->min != 0 ? v <= 0.0 : v < 0.0)) {
        errbuf_set(err, errlen, "[%s] %s = '%s' is invalid; it takes a number %s 0 and at most %g "
               "(e.g. %s)", k->section, k->name, value,
               k->min != 0 ? "above" : "from", max, max > 1.0 ? "62.5e12" : "0.25");
        return -1;
    }
    *field = v;
    return 0;
}

int
cfg_set(struct cfg *c, const char *section, const char *name, const char *value, char *err,
        size_t errlen)
{
    const struct key *k = find_key(section, name);
    char *field;
    uint64_t v;
    char *end;
    int lvl;

    if (k == NULL) {
        errbuf_set(err, errlen, "unknown key '%s' in section [%s]; see ipuofd.conf(5) for the keys",
               name, section ? section : "?");
        return -1;
    }
    field = (char *)c + k->offset;
    if (k->offset == offsetof(struct cfg, admin_socket))
        c->admin_socket_default = 0;
    switch (k->type) {
    case K_LINES: {
        size_t used = strlen(field);
        if (used + strlen(value) + 2 > k->size) {
            errbuf_set(err, errlen, "[%s] %s lines add up to more than %zu bytes; inject fewer "
                       "faults from the file (or the rest with ipuctl fault inject)",
                       k->section, k->name, k->size - 1);
            return -1;
        }
        snprintf(field + used, k->size - used, "%s\n", value);
        return 0;
    }
    case K_STR:
        if (strlen(value) >= k->size) {
            errbuf_set(err, errlen, "[%s] %s is %zu bytes long; at most %zu are allowed", k->section,
                   k->name, strlen(value), k->size - 1);
            return -1;
        }
        snprintf(field, k->size, "%s", value);
        return 0;
    case K_LEVEL:
        lvl = log_level_parse(value);
        if (lvl < 0) {
            errbuf_set(err, errlen, "[%s] %s = '%s' is not a log level; use error, warn, info or debug",
                   k->section, k->name, value);
            return -1;
        }
        c->log_level = lvl;
        return 0;
    case K_BOOL:
        if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
            v = 1;
        else if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0 ||
                 strcmp(value, "0") == 0)
            v = 0;
        else {
            errbuf_set(err, errlen, "[%s] %s = '%s' is invalid; use yes or no", k->section,
                   k->name, value);
            return -1;
        }
        store_uint(field, k->size, v);
        return 0;
    case K_UINT:
        errno = 0;
        v = strtoull(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0 || v < k->min ||
            v > k->max) {
            errbuf_set(err, errlen, "[%s] %s = '%s' is invalid; it takes a whole number from %" PRIu64
                   " to %" PRIu64, k->section, k->name, value, k->min, k->max);
            return -1;
        }
        store_uint(field, k->size, v);
        return 0;
    case K_REAL:
        return set_real(k, (double *)field, value, err, errlen);
    case K_SUM:
        if (strcmp(value, "replicas") == 0 || strcmp(value, "daemons") == 0) {
            store_uint(field, k->size, strcmp(value, "daemons") == 0);
            return 0;
        }
        errbuf_set(err, errlen, "[%s] %s = '%s' is invalid; use replicas (every replica's "
                   "gradient in one fixed-order sum, as on one daemon) or daemons (each daemon "
                   "sums its replicas first)", k->section, k->name, value);
        return -1;
    case K_BYTES:
        if (cfg_parse_bytes(value, &v) < 0 || v < k->min || v > k->max) {
            errbuf_set(err, errlen, "[%s] %s = '%s' is invalid; it takes a size in bytes from %" PRIu64
                   " to %" PRIu64 ", optionally with a KiB, MiB or GiB suffix",
                   k->section, k->name, value, k->min, k->max);
            return -1;
        }
        store_uint(field, k->size, v);
        return 0;
    }
    return -1;
}

struct load_ctx {
    struct cfg *c;
    char *err;
    size_t errlen;
    int failed;
};

static int
on_ini_line(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *ctx = user;

    if (ctx->failed)
        return 1; /* keep the first error only */
    if (cfg_set(ctx->c, section, name, value, ctx->err, ctx->errlen) < 0) {
        ctx->failed = 1;
        return 0;
    }
    return 1;
}

/* The largest config file read (the shipped one is about 10 KiB). */
#define CFG_FILE_MAX (1u << 20)

/*
 * Reads the config file at path into a NUL-terminated buffer (*out, caller frees), refusing
 * what libinih would take silently: a directory (read as an empty file), a NUL byte (the
 * rest of its line dropped) and a line longer than INI_MAX_LINE (split in two). 0, or -1
 * with a sentence naming the file (and line) in err.
 */
static int
read_config_text(const char *path, char **out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *buf = NULL;
    size_t len = 0, line = 1, col = 0;
    ssize_t n;

    *out = NULL;
    if (fd < 0 || fstat(fd, &st) < 0) {
        errbuf_set(err, errlen, "cannot open config file %s: %s", path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        errbuf_set(err, errlen, "config file %s is a directory; give the path of the file "
                   "itself (e.g. /etc/ipuofd/ipuofd.conf)", path);
        goto fail;
    }
    buf = malloc(CFG_FILE_MAX + 1);
    if (buf == NULL) {
        errbuf_set(err, errlen, "out of memory reading config file %s", path);
        goto fail;
    }
    while ((n = read(fd, buf + len, CFG_FILE_MAX + 1 - len)) > 0 && len < CFG_FILE_MAX + 1)
        len += (size_t)n;
    if (n < 0) {
        errbuf_set(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
        goto fail;
    }
    if (len > CFG_FILE_MAX) {
        errbuf_set(err, errlen, "config file %s is larger than %u bytes; is it the right file?",
                   path, CFG_FILE_MAX);
        goto fail;
    }
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\0') {
            errbuf_set(err, errlen, "%s:%zu: the line holds a NUL byte (column %zu), which "
                       "would cut it short; a config file is text", path, line, col + 1);
            goto fail;
        }
        if (buf[i] == '\n') {
            line++;
            col = 0;
        } else if (++col >= INI_MAX_LINE) {
            errbuf_set(err, errlen, "%s:%zu: the line is longer than %d characters, the most "
                       "ipuofd reads of one line", path, line, INI_MAX_LINE - 1);
            goto fail;
        }
    }
    close(fd);
    *out = buf;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    free(buf);
    return -1;
}

int
cfg_load_file(struct cfg *c, const char *path, char *err, size_t errlen)
{
    struct load_ctx ctx = {.c = c, .err = err, .errlen = errlen};
    char detail[512];
    char *text;
    int line;

    err[0] = '\0';
    if (read_config_text(path, &text, err, errlen) < 0)
        return -1;
    line = ini_parse_string(text, on_ini_line, &ctx);
    free(text);
    if (line == -2) {
        errbuf_set(err, errlen, "out of memory reading config file %s", path);
        return -1;
    }
    if (line > 0) {
        if (ctx.failed) {
            snprintf(detail, sizeof detail, "%s", err);
            errbuf_set(err, errlen, "%s:%d: %s", path, line, detail);
        } else {
            errbuf_set(err, errlen, "%s:%d: syntax error; lines are 'key = value' under a [section]",
                   path, line);
        }
        return -1;
    }
    return 0;
}

int
cfg_listen_is_loopback(const char *listen)
{
    char host[256];
    const char *end;
    size_t n;
    struct in_addr a4;
    struct in6_addr a6;

    if (listen[0] == '[') {
        listen++;
        end = strchr(listen, ']');
    } else {
        end = strrchr(listen, ':');
    }
    n = end != NULL ? (size_t)(end - listen) : strlen(listen);
    if (n == 0 || n >= sizeof host)
        return 0; /* ":PORT" listens on every address */
    memcpy(host, listen, n);
    host[n] = '\0';
    if (strcmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0; /* a name: it may resolve to anything */
}

static int validate_pod(const struct cfg *c, char *err, size_t errlen);

int
cfg_validate(const struct cfg *c, char *err, size_t errlen)
{
    if (c->listen[0] == '\0') {
        errbuf_set(err, errlen, "[server] listen is empty; give HOST:PORT, e.g. 127.0.0.1:50052");
        return -1;
    }
    if (!cfg_listen_is_loopback(c->listen) && c->auth_token[0] == '\0' &&
        c->tls_auth_clients[0] != 'y' && !c->allow_unauthenticated) {
        errbuf_set(err, errlen, "[server] listen = %s is not a loopback address and no auth_token "
               "is set: anyone who can reach it could use the IPUs; set auth_token, listen on "
               "127.0.0.1, or set allow_unauthenticated = yes if this is meant", c->listen);
        return -1;
    }
    if (c->prehello_max_bytes > c->max_header_bytes) {
        errbuf_set(err, errlen, "[server] prehello_max_bytes (%u) must not exceed max_header_bytes (%u)",
               c->prehello_max_bytes, c->max_header_bytes);
        return -1;
    }
    if (c->max_output_bytes < (uint64_t)c->max_payload_bytes + c->max_header_bytes) {
        errbuf_set(err, errlen,
               "[server] max_output_bytes (%" PRIu64 ") must hold at least one largest frame "
               "(max_payload_bytes + max_header_bytes = %" PRIu64 ")",
               c->max_output_bytes, (uint64_t)c->max_payload_bytes + c->max_header_bytes);
        return -1;
    }
    if (svc_cfg_validate(c, err, errlen) < 0)
        return -1;
    if (sim_ipu_type_parse(c->cost_ipu_type) < 0) {
        errbuf_set(err, errlen, "[cost] ipu_type = %s is not a device type; use gc200 (Mk2, "
                   "1.33 GHz) or bow (1.85 GHz)", c->cost_ipu_type);
        return -1;
    }
    return validate_pod(c, err, errlen);
}

/* 1 when name is a Pod host name: 1..63 letters, digits, '.', '_', '-'. */
static int
pod_name_ok(const char *name, size_t n)
{
    if (n == 0 || n >= CFG_POD_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

/* 1 when addr is HOST:PORT or [V6]:PORT with a port from 1 to 65535. */
static int
pod_addr_ok(const char *addr)
{
    const char *colon = addr[0] == '[' ? strstr(addr, "]:") : strrchr(addr, ':');
    char *end;
    unsigned long port;

    if (colon == NULL || colon == addr)
        return 0;
    colon += addr[0] == '[' ? 2 : 1;
    if (*colon < '0' || *colon > '9')
        return 0;
    errno = 0;
    port = strtoul(colon, &end, 10);
    return errno == 0 && *end == '\0' && port >= 1 && port <= 65535;
}

int
cfg_pod_peers(const struct cfg *c, struct cfg_pod_peer *out, char *err, size_t errlen)
{
    const char *p = c->pod_peers;
    int n = 0;

    for (;;) {
        const char *start, *eq;
        size_t len;

        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        start = p;
        while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        len = (size_t)(p - start);
        eq = memchr(start, '=', len);
        if (n == CFG_POD_MAX_PEERS) {
            errbuf_set(err, errlen, "[pod] peers lists more than %d peers; a daemon knows at "
                       "most %d", CFG_POD_MAX_PEERS, CFG_POD_MAX_PEERS);
            return -1;
        }
        if (eq == NULL || !pod_name_ok(start, (size_t)(eq - start)) ||
            (size_t)(start + len - eq - 1) >= sizeof out[n].addr) {
            errbuf_set(err, errlen, "[pod] peers: '%.*s' is not NAME=HOST:PORT (a name of "
                       "letters, digits, '.', '_' or '-', at most %d, e.g. "
                       "host-b=10.0.0.2:50053)", (int)(len > 300 ? 300 : len), start,
                       CFG_POD_NAME_MAX - 1);
            return -1;
        }
        memcpy(out[n].name, start, (size_t)(eq - start));
        out[n].name[eq - start] = '\0';
        memcpy(out[n].addr, eq + 1, (size_t)(start + len - eq - 1));
        out[n].addr[start + len - eq - 1] = '\0';
        if (!pod_addr_ok(out[n].addr)) {
            errbuf_set(err, errlen, "[pod] peers: peer %s's address '%s' is not HOST:PORT with "
                       "a port from 1 to 65535 (e.g. 10.0.0.2:50053)", out[n].name,
                       out[n].addr);
            return -1;
        }
        if (strcmp(out[n].name, c->pod_name) == 0) {
            errbuf_set(err, errlen, "[pod] peers names %s, which is this daemon's own [pod] "
                       "name; list the other hosts only (or set name)", out[n].name);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (strcmp(out[i].name, out[n].name) == 0) {
                errbuf_set(err, errlen, "[pod] peers names %s twice; each host once",
                           out[n].name);
                return -1;
            }
        }
        n++;
    }
    return n;
}

/* 1 when addr ends in ":0" (an ephemeral port, as tests use). */
static int
port_is_zero(const char *addr)
{
    const char *colon = strrchr(addr, ':');

    return colon != NULL && strcmp(colon, ":0") == 0;
}

/* The [pod] section's cross-field checks (cfg_validate). */
static int
validate_pod(const struct cfg *c, char *err, size_t errlen)
{
    struct cfg_pod_peer peers[CFG_POD_MAX_PEERS];
    int n = cfg_pod_peers(c, peers, err, errlen);

    if (n <= 0)
        return n;
    if (!pod_name_ok(c->pod_name, strlen(c->pod_name))) {
        errbuf_set(err, errlen, "[pod] name = '%s' is not a Pod host name: 1 to %d letters, "
                   "digits, '.', '_' or '-'", c->pod_name, CFG_POD_NAME_MAX - 1);
        return -1;
    }
    if (!pod_addr_ok(c->pod_listen) && !port_is_zero(c->pod_listen)) {
        errbuf_set(err, errlen, "[pod] listen = '%s' is not HOST:PORT (e.g. 127.0.0.1:50053)",
                   c->pod_listen);
        return -1;
    }
    if (!cfg_listen_is_loopback(c->pod_listen) && c->pod_token[0] == '\0' &&
        !c->allow_unauthenticated) {
        errbuf_set(err, errlen, "[pod] listen = %s is not a loopback address and no [pod] token "
                   "is set: any host that can reach it could join the Pod's partitions and feed "
                   "their collectives; set token (the same on every host of the Pod), listen on "
                   "127.0.0.1, or set [server] allow_unauthenticated = yes if this is meant",
                   c->pod_listen);
        return -1;
    }
    if (strcmp(c->pod_listen, c->listen) == 0 && !port_is_zero(c->listen)) {
        errbuf_set(err, errlen, "[pod] listen = %s is also [server] listen; the Pod port is a "
                   "port of its own (e.g. 50053 beside 50052)", c->pod_listen);
        return -1;
    }
    return 0;
}

void
cfg_apply_reload(struct cfg *cur, const struct cfg *next, char *ignored, size_t len)
{
    size_t used = 0;

    ignored[0] = '\0';
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct key *k = &keys[i];
        char *dst = (char *)cur + k->offset;
        const char *src = (const char *)next + k->offset;
        int differs;

        if (k->type == K_STR || k->type == K_LINES)
            differs = strcmp(dst, src) != 0;
        else if (k->type == K_LEVEL)
            differs = cur->log_level != next->log_level;
        else if (k->type == K_REAL)
            differs = *(const double *)dst != *(const double *)src;
        else
            differs = load_uint(dst, k->size) != load_uint(src, k->size);
        if (!differs)
            continue;
        if (k->reloadable) {
            memcpy(dst, src, k->size);
        } else if (used + strlen(k->name) + 3 < len) {
            used += (size_t)snprintf(ignored + used, len - used, "%s%s", used ? ", " : "",
                                     k->name);
        }
    }
}
