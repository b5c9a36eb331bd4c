/*
 * ipuof_conf.c — where a program's ipuofd is and which partition it uses, when the program
 * names neither: IPUoF config files, PopRun's IPUOF_VIPU_API_* variables, IPUOF_SERVER.
 *
 * The order (the first that is set wins; docs/pod-tools.md explains each):
 *   1. IPUOF_CONFIG_PATH: that config file (an error when it cannot be read or is broken);
 *   2. IPUOF_VIPU_API_HOST (+ _PORT, _PARTITION_ID, _GCD_ID), as PopRun sets them: ipuofd
 *      is its own V-IPU server, so HOST:PORT is the daemon, PARTITION_ID the partition;
 *   3. ~/.ipuof.conf.d/NAME.conf (files of other partitions and GCDs are passed over: the one
 *      for IPUOF_VIPU_API_PARTITION_ID, if set, and GCD IPUOF_VIPU_API_GCD_ID, else 0);
 *   4. IPUOF_SERVER (with IPUOF_VIPU_API_PARTITION_ID as the partition, if set);
 *   5. 127.0.0.1:50052.
 * A config file is JSON (proto/jsonparse.c): attributes."Partition Id", attributes."GCD Id" and
 * servers[].address are required; errors name the file and the field.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_internal.h"
#include "jsonparse.h"

#define MAX_GCD 1023
#define MAX_DIR_FILES 256

/* 1 when name is a usable partition name (1..63 of letters, digits, '-', '_', '.'). */
int
ipuof_partition_name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > IPUOF_PARTITION_NAME_MAX)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

/* Reads the whole regular file path (at most IPUOF_JSON_MAX_BYTES) into a new buffer. 0 with
 * *buf (caller frees) and *len, or -1 with a sentence in err. */
static int
read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    char *b = NULL;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    *buf = NULL;
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open it: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file; an IPUoF config file is a JSON file",
                 path);
        goto error;
    }
    if (st.st_size > IPUOF_JSON_MAX_BYTES) {
        snprintf(err, errlen, "%s: %lld bytes; an IPUoF config file has at most %d", path,
                 (long long)st.st_size, IPUOF_JSON_MAX_BYTES);
        goto error;
    }
    b = malloc((size_t)st.st_size + 1);
    if (b == NULL) {
        snprintf(err, errlen, "%s: out of memory reading it", path);
        goto error;
    }
    while (got < (size_t)st.st_size) {
        ssize_t k = read(fd, b + got, (size_t)st.st_size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            snprintf(err, errlen, "%s: cannot read it: %s", path,
                     k < 0 ? strerror(errno) : "it shrank while being read");
            goto error;
        }
        got += (size_t)k;
    }
    close(fd);
    *buf = b;
    *len = got;
    return 0;
error:
    free(b);
    close(fd);
    return -1;
}

/* Checks that v (field's value, may be NULL) is a whole number lo..hi into *out. 0, or -1
 * with "PATH: FIELD is ...; it must be ..." in err. */
static int
field_int(const char *path, const char *field, const struct ipuof_json *v, long lo, long hi,
          long *out, char *err, size_t errlen)
{
    if (v == NULL) {
        snprintf(err, errlen, "%s: %s is missing; it must be a whole number %ld to %ld", path,
                 field, lo, hi);
        return -1;
    }
    if (v->type != IPUOF_JSON_NUMBER || !v->is_int || v->number < (double)lo ||
        v->number > (double)hi) {
        if (v->type == IPUOF_JSON_STRING)
            snprintf(err, errlen, "%s: %s is the string \"%.64s\" (line %u); it must be a "
                     "whole number %ld to %ld, without quotes", path, field, v->string, v->line,
                     lo, hi);
        else if (v->type == IPUOF_JSON_NUMBER)
            snprintf(err, errlen, "%s: %s is %g (line %u); it must be a whole number %ld to "
                     "%ld", path, field, v->number, v->line, lo, hi);
        else
            snprintf(err, errlen, "%s: %s is %s (line %u); it must be a whole number %ld to "
                     "%ld", path, field, ipuof_json_type_name(v->type), v->line, lo, hi);
        return -1;
    }
    *out = (long)v->number;
    return 0;
}

/* attributes."Pod hosts" (v, may be NULL) into t: 1 to IPUOF_POD_HOSTS_MAX distinct
 * names. 0 or -1 with err. */
static int
pod_hosts(const char *path, const struct ipuof_json *v, struct ipuof_target *t, char *err,
          size_t errlen)
{
    if (v == NULL)
        return 0;
    if (v->type != IPUOF_JSON_ARRAY || v->n == 0 || v->n > IPUOF_POD_HOSTS_MAX) {
        snprintf(err, errlen, "%s: attributes.\"Pod hosts\" is %s (line %u); it must be an "
                 "array of 1 to %d host names, the partition's daemons in rank order, such as "
                 "[\"host-a\", \"host-b\"]", path,
                 v->type == IPUOF_JSON_ARRAY ? (v->n == 0 ? "an empty array" : "too long")
                                             : ipuof_json_type_name(v->type),
                 v->line, IPUOF_POD_HOSTS_MAX);
        return -1;
    }
    for (size_t i = 0; i < v->n; i++) {
        const struct ipuof_json *h = v->items[i];
        int ok = h->type == IPUOF_JSON_STRING && h->string[0] != '\0' &&
                 strlen(h->string) <= IPUOF_POD_HOST_NAME_MAX;
        for (const char *p = ok ? h->string : ""; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                ok = 0;
        for (size_t k = 0; ok && k < i; k++)
            if (strcmp(t->pod_hosts[k], h->string) == 0) {
                snprintf(err, errlen, "%s: attributes.\"Pod hosts\"[%zu] names \"%s\" again "
                         "(line %u); each daemon once", path, i, h->string, h->line);
                return -1;
            }
        if (!ok) {
            snprintf(err, errlen, "%s: attributes.\"Pod hosts\"[%zu] (line %u) must be a "
                     "daemon's [pod] name: 1 to %d letters, digits, '-', '_' or '.'", path, i,
                     h->line, IPUOF_POD_HOST_NAME_MAX);
            return -1;
        }
        snprintf(t->pod_hosts[i], sizeof t->pod_hosts[i], "%s", h->string);
    }
    t->n_pod_hosts = (int)v->n;
    return 0;
}

/* Checks one element of servers[]; the first server's address goes to t. */
static int
check_server(const char *path, size_t i, const struct ipuof_json *s, long nipus,
             struct ipuof_target *t, char *err, size_t errlen)
{
    const struct ipuof_json *a = ipuof_json_get(s, "address"), *ipus;
    struct ipuof_addr addr;
    char why[512];

    if (s->type != IPUOF_JSON_OBJECT) {
        snprintf(err, errlen, "%s: servers[%zu] is %s (line %u); it must be an object such as "
                 "{\"address\": \"host:50052\"}", path, i, ipuof_json_type_name(s->type), s->line);
        return -1;
    }
    if (a == NULL || a->type != IPUOF_JSON_STRING) {
        snprintf(err, errlen, "%s: servers[%zu].address is %s (line %u); it must be a string "
                 "\"HOST:PORT\", \"[IPV6]:PORT\" or \"unix:/path\"", path, i,
                 a ? ipuof_json_type_name(a->type) : "missing", a ? a->line : s->line);
        return -1;
    }
    if (ipuof_addr_parse(a->string, &addr, why, sizeof why) != IPUOF_OK) {
        snprintf(err, errlen, "%s: servers[%zu].address (line %u): %s", path, i, a->line, why);
        return -1;
    }
    ipus = ipuof_json_get(s, "ipus");
    if (ipus != NULL) {
        if (ipus->type != IPUOF_JSON_ARRAY) {
            snprintf(err, errlen, "%s: servers[%zu].ipus is %s (line %u); it must be an array "
                     "of IPU ids such as [0, 1, 2, 3]", path, i, ipuof_json_type_name(ipus->type),
                     ipus->line);
            return -1;
        }
        for (size_t k = 0; k < ipus->n; k++) {
            char field[64];
            long id;
            snprintf(field, sizeof field, "servers[%zu].ipus[%zu]", i, k);
            if (field_int(path, field, ipus->items[k], 0, 1023, &id, err, errlen) < 0)
                return -1;
        }
        if (nipus > 0 && (long)ipus->n != nipus) {
            snprintf(err, errlen, "%s: servers[%zu].ipus lists %zu IPUs (line %u) but "
                     "attributes.\"IPUs\" says %ld; they must agree", path, i, ipus->n,
                     ipus->line, nipus);
            return -1;
        }
    }
    if (i == 0)
        ipuof_addr_format(&addr, t->address, sizeof t->address);
    for (int k = 0; k < 4 && i == 0; k++) {
        static const char *const names[4] = {"tls_ca_file", "tls_cert_file", "tls_key_file",
                                             "tls_server_name"};
        const struct ipuof_json *v = ipuof_json_get(s, names[k]);
        if (v == NULL)
            continue;
        if (v->type != IPUOF_JSON_STRING || strlen(v->string) >= sizeof t->tls[k]) {
            snprintf(err, errlen, "%s: servers[0].%s (line %u) must be a string of at most "
                     "%zu bytes: a PEM file's path%s", path, names[k], v->line,
                     sizeof t->tls[k] - 1, k == 3 ? " (or the host name to verify)" : "");
            return -1;
        }
        snprintf(t->tls[k], sizeof t->tls[k], "%s", v->string);
    }
    return 0;
}

int
ipuof_conf_parse(const char *path, const char *text, size_t len, struct ipuof_target *t,
                 char *err, size_t errlen)
{
    struct ipuof_json *root = NULL;
    const struct ipuof_json *attrs, *pid, *servers;
    char why[512];
    long gcd, ngcds = 0, nipus = 0;
    int rc = -1;

    memset(t, 0, sizeof *t);
    t->gcd = -1;
    if (ipuof_json_parse(text, len, &root, why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: not valid JSON: %s", path, why);
        return -1;
    }
    if (root->type != IPUOF_JSON_OBJECT) {
        snprintf(err, errlen, "%s: the file holds %s; an IPUoF config file holds one object "
                 "with \"attributes\" and \"servers\"", path, ipuof_json_type_name(root->type));
        goto out;
    }
    attrs = ipuof_json_get(root, "attributes");
    if (attrs == NULL || attrs->type != IPUOF_JSON_OBJECT) {
        snprintf(err, errlen, "%s: attributes is %s; it must be an object such as "
                 "{\"Partition Id\": \"p\", \"GCD Id\": 0}", path,
                 attrs ? ipuof_json_type_name(attrs->type) : "missing");
        goto out;
    }
    pid = ipuof_json_get(attrs, "Partition Id");
    if (pid == NULL || pid->type != IPUOF_JSON_STRING || !ipuof_partition_name_ok(pid->string)) {
        if (pid != NULL && pid->type == IPUOF_JSON_STRING)
            snprintf(err, errlen, "%s: attributes.\"Partition Id\" is \"%.80s\" (line %u); it "
                     "must be 1 to %d letters, digits, '-', '_' or '.'", path, pid->string,
                     pid->line, IPUOF_PARTITION_NAME_MAX);
        else
            snprintf(err, errlen, "%s: attributes.\"Partition Id\" is %s; it must be the "
                     "partition's name as a string", path,
                     pid ? ipuof_json_type_name(pid->type) : "missing");
        goto out;
    }
    if (field_int(path, "attributes.\"GCD Id\"", ipuof_json_get(attrs, "GCD Id"), 0, MAX_GCD,
                  &gcd, err, errlen) < 0)
        goto out;
    if (ipuof_json_get(attrs, "Num GCDs") != NULL &&
        field_int(path, "attributes.\"Num GCDs\"", ipuof_json_get(attrs, "Num GCDs"), 1,
                  MAX_GCD + 1, &ngcds, err, errlen) < 0)
        goto out;
    if (ngcds > 0 && gcd >= ngcds) {
        snprintf(err, errlen, "%s: attributes.\"GCD Id\" is %ld but attributes.\"Num GCDs\" "
                 "is %ld; the GCD Id must be 0 to %ld", path, gcd, ngcds, ngcds - 1);
        goto out;
    }
    if (ipuof_json_get(attrs, "IPUs") != NULL &&
        field_int(path, "attributes.\"IPUs\"", ipuof_json_get(attrs, "IPUs"), 1, 1024, &nipus,
                  err, errlen) < 0)
        goto out;
    if (pod_hosts(path, ipuof_json_get(attrs, "Pod hosts"), t, err, errlen) < 0)
        goto out;
    servers = ipuof_json_get(root, "servers");
    if (servers == NULL || servers->type != IPUOF_JSON_ARRAY || servers->n == 0) {
        snprintf(err, errlen, "%s: servers is %s; it must be an array of at least one server "
                 "such as [{\"address\": \"host:50052\"}]", path,
                 servers == NULL                      ? "missing"
                 : servers->type == IPUOF_JSON_ARRAY ? "an empty array"
                                                      : ipuof_json_type_name(servers->type));
        goto out;
    }
    for (size_t i = 0; i < servers->n; i++)
        if (check_server(path, i, servers->items[i], nipus, t, err, errlen) < 0)
            goto out;
    if (servers->n > 1) {
        snprintf(err, errlen, "%s: servers lists %zu ipuofd daemons; this libipuof-client "
                 "drives a partition on one daemon, so a GCD must list exactly one server",
                 path, servers->n);
        goto out;
    }
    snprintf(t->partition, sizeof t->partition, "%s", pid->string);
    t->gcd = (int)gcd;
    snprintf(t->source, sizeof t->source, "%.400s", path);
    rc = 0;
out:
    ipuof_json_free(root);
    if (rc < 0)
        memset(t, 0, sizeof *t), t->gcd = -1;
    return rc;
}

int
ipuof_conf_read(const char *path, struct ipuof_target *t, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    int rc;

    if (read_file(path, &buf, &len, err, errlen) < 0)
        return -1;
    rc = ipuof_conf_parse(path, buf, len, t, err, errlen);
    free(buf);
    return rc;
}

/* An environment variable's value, or NULL when unset or empty. */
static const char *
env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* A whole-number variable name (lo..hi) into *out; 0 unset, 1 set, -1 bad (err says). */
static int
env_num(const char *name, long lo, long hi, long *out, char *err, size_t errlen)
{
    const char *v = env(name);
    char *end;
    long x;

    if (v == NULL)
        return 0;
    errno = 0;
    x = strtol(v, &end, 10);
    if (*end != '\0' || errno != 0 || x < lo || x > hi || v[0] == '+' || v[0] == ' ') {
        snprintf(err, errlen, "%s is \"%.64s\"; it must be a whole number %ld to %ld", name, v,
                 lo, hi);
        return -1;
    }
    *out = x;
    return 1;
}

/* The partition and GCD PopRun's variables ask for: *part "" and *gcd -1 when unset. */
static int
env_partition(char *part, size_t len, long *gcd, char *err, size_t errlen)
{
    const char *p = env("IPUOF_VIPU_API_PARTITION_ID");

    part[0] = '\0';
    *gcd = -1;
    if (p != NULL && !ipuof_partition_name_ok(p)) {
        snprintf(err, errlen, "IPUOF_VIPU_API_PARTITION_ID is \"%.80s\"; a partition name is 1 "
                 "to %d letters, digits, '-', '_' or '.'", p, IPUOF_PARTITION_NAME_MAX);
        return -1;
    }
    if (p != NULL)
        snprintf(part, len, "%s", p);
    return env_num("IPUOF_VIPU_API_GCD_ID", 0, MAX_GCD, gcd, err, errlen) < 0 ? -1 : 0;
}

/* Step 2: PopRun's V-IPU variables; 0 unset, 1 used, -1 bad. */
static int
from_vipu_api(struct ipuof_target *t, char *err, size_t errlen)
{
    const char *host = env("IPUOF_VIPU_API_HOST");
    long port = IPUOF_DEFAULT_PORT, gcd;
    char addr[IPUOF_ADDRESS_MAX], why[512];
    struct ipuof_addr a;

    if (host == NULL)
        return 0;
    if (env_num("IPUOF_VIPU_API_PORT", 1, 65535, &port, err, errlen) < 0 ||
        env_partition(t->partition, sizeof t->partition, &gcd, err, errlen) < 0)
        return -1;
    if (t->partition[0] == '\0') {
        snprintf(err, errlen, "IPUOF_VIPU_API_HOST is set (%.64s) but IPUOF_VIPU_API_PARTITION_ID "
                 "is not; set both, as poprun does, or neither", host);
        return -1;
    }
    if (strchr(host, ':') != NULL && host[0] != '[')
        snprintf(addr, sizeof addr, "[%.255s]:%ld", host, port);
    else
        snprintf(addr, sizeof addr, "%.255s:%ld", host, port);
    if (ipuof_addr_parse(addr, &a, why, sizeof why) != IPUOF_OK) {
        snprintf(err, errlen, "IPUOF_VIPU_API_HOST/PORT: %s", why);
        return -1;
    }
    ipuof_addr_format(&a, t->address, sizeof t->address);
    t->gcd = gcd < 0 ? 0 : (int)gcd;
    snprintf(t->source, sizeof t->source, "IPUOF_VIPU_API_HOST");
    return 1;
}

/* The user's config directory, "$HOME/.ipuof.conf.d", into dir; -1 when there is no home. */
static int
conf_dir(char *dir, size_t len)
{
    const char *home = env("HOME");
    struct passwd pw, *res = NULL;
    char buf[1024];

    if (home == NULL && getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res != NULL)
        home = pw.pw_dir;
    if (home == NULL)
        return -1;
    return snprintf(dir, len, "%s/.ipuof.conf.d", home) < (int)len ? 0 : -1;
}

/* Step 3: the directory's files; 0 none there, 1 one chosen, -1 broken or ambiguous. */
static int
from_dir(struct ipuof_target *t, char *err, size_t errlen)
{
    char dir[900], pattern[920], want[IPUOF_PARTITION_NAME_MAX + 1], list[1024] = "";
    glob_t g;
    struct ipuof_target *all = NULL;
    size_t used = 0, nmatch = 0, first = 0;
    long want_gcd;
    int rc = -1, other_parts = 0;

    if (conf_dir(dir, sizeof dir) < 0)
        return 0;
    snprintf(pattern, sizeof pattern, "%s/*.conf", dir);
    memset(&g, 0, sizeof g);
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        globfree(&g);
        return 0;
    }
    if (env_partition(want, sizeof want, &want_gcd, err, errlen) < 0)
        goto out;
    if (want_gcd < 0)
        want_gcd = 0;
    if (g.gl_pathc > MAX_DIR_FILES) {
        snprintf(err, errlen, "%s holds %zu config files; at most %d are read", dir,
                 (size_t)g.gl_pathc, MAX_DIR_FILES);
        goto out;
    }
    all = calloc(g.gl_pathc, sizeof *all);
    if (all == NULL) {
        snprintf(err, errlen, "out of memory reading %s", dir);
        goto out;
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        if (ipuof_conf_read(g.gl_pathv[i], &all[i], err, errlen) < 0)
            goto out;
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s (partition '%s', "
                                     "GCD %d)", i ? ", " : "", strrchr(g.gl_pathv[i], '/') + 1,
                                     all[i].partition, all[i].gcd);
        if (want[0] == '\0' && strcmp(all[i].partition, all[0].partition) != 0)
            other_parts = 1;
        if ((want[0] == '\0' || strcmp(all[i].partition, want) == 0) && all[i].gcd == want_gcd) {
            if (nmatch++ == 0)
                first = i;
        }
    }
    if (other_parts) {
        snprintf(err, errlen, "%s holds config files of several partitions: %s; choose one with "
                 "IPUOF_VIPU_API_PARTITION_ID=NAME or IPUOF_CONFIG_PATH=FILE", dir, list);
        goto out;
    }
    if (nmatch == 0) {
        snprintf(err, errlen, "no config file in %s handles GCD %ld%s%s%s: it holds %s", dir,
                 want_gcd, want[0] ? " of partition '" : "", want, want[0] ? "'" : "", list);
        goto out;
    }
    if (nmatch > 1) {
        used = (size_t)snprintf(list, sizeof list, "%s", g.gl_pathv[first]);
        for (size_t i = first + 1; i < g.gl_pathc && used < sizeof list; i++)
            if (strcmp(all[i].partition, all[first].partition) == 0 && all[i].gcd == want_gcd)
                used += (size_t)snprintf(list + used, sizeof list - used, ", %s",
                                         g.gl_pathv[i]);
        snprintf(err, errlen, "Multiple config files are registered to handle GCD %ld of "
                 "partition '%s': %s; remove all but one", want_gcd, all[first].partition, list);
        goto out;
    }
    *t = all[first];
    rc = 1;
out:
    free(all);
    globfree(&g);
    return rc;
}

int
ipuof_target_lookup(struct ipuof_target *t, char *err, size_t errlen)
{
    const char *v;
    long gcd;
    int rc;

    memset(t, 0, sizeof *t);
    t->gcd = -1;
    err[0] = '\0';
    v = env("IPUOF_CONFIG_PATH");
    if (v != NULL) {
        char why[1024];
        if (ipuof_conf_read(v, t, why, sizeof why) < 0) {
            snprintf(err, errlen, "IPUOF_CONFIG_PATH: %s", why);
            return IPUOF_E_INVAL;
        }
        return IPUOF_OK;
    }
    rc = from_vipu_api(t, err, errlen);
    if (rc == 0)
        rc = from_dir(t, err, errlen);
    if (rc < 0) {
        memset(t, 0, sizeof *t);
        t->gcd = -1;
        return IPUOF_E_INVAL;
    }
    if (rc > 0)
        return IPUOF_OK;
    if (env_partition(t->partition, sizeof t->partition, &gcd, err, errlen) < 0)
        return IPUOF_E_INVAL;
    t->gcd = (int)gcd;
    v = env(IPUOF_SERVER_ENV);
    snprintf(t->address, sizeof t->address, "%s", v != NULL ? v : IPUOF_DEFAULT_ADDRESS);
    snprintf(t->source, sizeof t->source, "%s", v != NULL ? IPUOF_SERVER_ENV : "the default");
    return IPUOF_OK;
}
