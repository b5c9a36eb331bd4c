/*
 * svc_config.c — the service keys' cross-field checks (config.h's svc_cfg_validate):
 * metrics_listen (metrics.c) and the TLS keys (tls.c). docs/service.md describes the keys.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "errbuf.h"
#include "metrics_count.h"

/* 0 when the file at path (a key's value) can be read, else -1 with a sentence. */
static int
readable(const char *key, const char *path, char *err, size_t errlen)
{
    if (access(path, R_OK) == 0)
        return 0;
    errbuf_set(err, errlen, "[server] %s = %s cannot be read: %s", key, path, strerror(errno));
    return -1;
}

/* The TLS keys: see config.h's svc_cfg_validate. */
static int
validate_tls(const struct cfg *c, char *err, size_t errlen)
{
    const char *a = c->tls_auth_clients;

    if (strcmp(a, "no") != 0 && strcmp(a, "optional") != 0 && strcmp(a, "yes") != 0) {
        errbuf_set(err, errlen, "[server] tls_auth_clients = %s; give no (no client "
                   "certificates), optional (verified when given) or yes (required)", a);
        return -1;
    }
    if ((c->tls_cert_file[0] == '\0') != (c->tls_key_file[0] == '\0')) {
        errbuf_set(err, errlen, "[server] tls_cert_file and tls_key_file go together: set "
                   "both (TLS on the client port) or neither");
        return -1;
    }
    if (c->tls_cert_file[0] == '\0') {
        if (c->tls_ca_file[0] || strcmp(a, "no") != 0 || c->tls_admin_subjects[0]) {
            errbuf_set(err, errlen, "[server] tls_ca_file, tls_auth_clients and "
                       "tls_admin_subjects need TLS: set tls_cert_file and tls_key_file");
            return -1;
        }
        return 0;
    }
    if (strcmp(a, "no") != 0 && c->tls_ca_file[0] == '\0') {
        errbuf_set(err, errlen, "[server] tls_auth_clients = %s needs tls_ca_file: the CA "
                   "certificates that sign the clients' certificates", a);
        return -1;
    }
    if (c->tls_admin_subjects[0] != '\0' && strcmp(a, "no") == 0) {
        errbuf_set(err, errlen, "[server] tls_admin_subjects needs client certificates: set "
                   "tls_auth_clients = optional or yes (and tls_ca_file)");
        return -1;
    }
    if (readable("tls_cert_file", c->tls_cert_file, err, errlen) < 0 ||
        readable("tls_key_file", c->tls_key_file, err, errlen) < 0 ||
        (c->tls_ca_file[0] && readable("tls_ca_file", c->tls_ca_file, err, errlen) < 0))
        return -1;
    return 0;
}

int
svc_cfg_validate(const struct cfg *c, char *err, size_t errlen)
{
    if (validate_tls(c, err, errlen) < 0)
        return -1;
    return metrics_listen_check(c->metrics_listen, err, errlen);
}
