/*
 * svc_config.c — the service keys' cross-field checks (config.h's svc_cfg_validate):
 * metrics_listen (metrics.c) and the TLS keys (tls.c). docs/service.md describes the keys.
 */
#include "config.h"

#include <string.h>

#include "errbuf.h"
#include "metrics.h"

int
svc_cfg_validate(const struct cfg *c, char *err, size_t errlen)
{
    if (c->tls_cert_file[0] || c->tls_key_file[0] || c->tls_ca_file[0] ||
        c->tls_admin_subjects[0] || strcmp(c->tls_auth_clients, "no") != 0) {
        errbuf_set(err, errlen, "[server] tls_* keys: this build serves no TLS yet; leave "
                   "them out");
        return -1;
    }
    return metrics_listen_check(c->metrics_listen, err, errlen);
}
