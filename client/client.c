/*
 * client.c — the client handle: creation, options and the connect + hello exchange. The
 * per-handle last error is err.c's, server address parsing addr.c's.
 *
 * The socket and the frames are conn.c's job; devices.c and status.c hold the requests.
 * Nothing here prints, exits or keeps global state. A handle is used by one thread at a time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"

/* ---- handle and options --------------------------------------------------------------- */

ipuof_client *
ipuof_client_new(void)
{
    ipuof_client *c = calloc(1, sizeof *c);

    if (c == NULL)
        return NULL;
    c->fd = -1;
    c->target.gcd = -1;
    c->connect_ms = IPUOF_DEFAULT_CONNECT_MS;
    c->request_ms = IPUOF_DEFAULT_REQUEST_MS;
    ipuof_frame_limits_default(&c->lim);
    return c;
}

void
ipuof_client_free(ipuof_client *c)
{
    if (c == NULL)
        return;
    ipuof_conn_close(c);
    ipuof_tls_free(c);
    free(c->name);
    free(c->auth_token);
    free(c->admin_token);
    free(c->partition);
    free(c);
}

int
ipuof_client_set_timeouts(ipuof_client *c, int connect_ms, int request_ms)
{
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (connect_ms < 0 || request_ms < 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "timeouts must be 0 (no limit) or a number of milliseconds, "
                             "not %d and %d",
                             connect_ms, request_ms);
    c->connect_ms = connect_ms;
    c->request_ms = request_ms;
    return IPUOF_OK;
}

/* Replaces *slot with a copy of value (NULL clears it); what is the option's name for the
 * error sentence. The hello carries these options, so they are refused once connected. */
static int
set_string_option(ipuof_client *c, char **slot, const char *value, const char *what)
{
    char *copy = NULL;

    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (c->fd >= 0)
        return ipuof_err_set(c, IPUOF_E_STATE, "client",
                             "the %s is sent when connecting; set it before "
                             "ipuof_client_connect()",
                             what);
    if (value != NULL && strlen(value) > IPUOF_DEFAULT_MAX_STRING)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "the %s is %zu bytes long; the limit is %u bytes", what,
                             strlen(value), IPUOF_DEFAULT_MAX_STRING);
    if (value != NULL) {
        copy = strdup(value);
        if (copy == NULL)
            return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory copying the %s",
                                 what);
    }
    free(*slot);
    *slot = copy;
    return IPUOF_OK;
}

int
ipuof_client_set_name(ipuof_client *c, const char *name)
{
    return set_string_option(c, c != NULL ? &c->name : NULL, name, "client name");
}

int
ipuof_client_set_auth_token(ipuof_client *c, const char *token)
{
    return set_string_option(c, c != NULL ? &c->auth_token : NULL, token, "auth token");
}

int
ipuof_client_set_admin_token(ipuof_client *c, const char *token)
{
    return set_string_option(c, c != NULL ? &c->admin_token : NULL, token, "admin token");
}

int
ipuof_client_is_admin(const ipuof_client *c)
{
    return c != NULL && c->fd >= 0 && c->admin;
}

/* ---- connect and hello ---------------------------------------------------------------- */

/* Sends the Hello and checks the HelloReply; on success records what the daemon granted. */
static int
hello(ipuof_client *c)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__Hello h = IPUOF__HELLO__INIT;
    Ipuof__Header *reply = NULL;
    const Ipuof__HelloReply *hr;
    int rc;

    h.protocol_version = IPUOF_PROTOCOL_VERSION;
    h.client_name = c->name != NULL ? c->name : program_invocation_short_name;
    h.pid = (uint32_t)getpid();
    h.auth_token = c->auth_token != NULL ? c->auth_token : getenv(IPUOF_AUTH_TOKEN_ENV);
    if (h.auth_token == NULL)
        h.auth_token = (char *)"";
    h.admin_token = c->admin_token != NULL ? c->admin_token : (char *)"";
    req.body_case = IPUOF__HEADER__BODY_HELLO;
    req.hello = &h;

    /* The hello belongs to connecting: the connect timeout bounds it, so a peer that
     * accepts but never answers (not an ipuofd, or a hung one) fails as fast as a dead one. */
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_HELLO_REPLY, c->connect_ms, NULL, NULL,
                         &reply);
    if (rc != IPUOF_OK)
        goto out;
    hr = reply->hello_reply;
    if (hr->protocol_version != IPUOF_PROTOCOL_VERSION) {
        rc = ipuof_err_set(c, IPUOF_E_VERSION, "protocol",
                           "ipuofd speaks protocol version %u, this library speaks version %u",
                           hr->protocol_version, IPUOF_PROTOCOL_VERSION);
        goto out;
    }
    c->admin = hr->admin;
    c->client_id = hr->client_id;
    c->num_ipus = hr->num_ipus;
    c->peer_max_payload = hr->max_payload_bytes;
    c->peer_max_header = hr->max_header_bytes;
    ipuof_copy_str(c->server_version, sizeof c->server_version, hr->server_version);
out:
    ipuof_frame_header_free(reply);
    return rc;
}

static int connect_to(ipuof_client *c, const char *address, int do_hello);

int
ipuof_client_connect(ipuof_client *c, const char *address)
{
    return connect_to(c, address, 1);
}

int
ipuof_client_connect_probe(ipuof_client *c, const char *address)
{
    return connect_to(c, address, 0);
}

/* Opens the connection to address and, when do_hello, says hello. */
static int
connect_to(ipuof_client *c, const char *address, int do_hello)
{
    struct ipuof_addr addr;
    char err[IPUOF_ERRMSG_MAX];
    int rc;

    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (c->fd >= 0)
        return ipuof_err_set(c, IPUOF_E_STATE, "client",
                             "already connected to ipuofd at %s; use a new handle for another "
                             "connection",
                             c->address);
    memset(&c->target, 0, sizeof c->target);
    c->target.gcd = -1;
    if (address == NULL) {
        /* The program named no daemon: config files, PopRun's variables, IPUOF_SERVER. */
        rc = ipuof_target_lookup(&c->target, err, sizeof err);
        if (rc != IPUOF_OK)
            return ipuof_err_set(c, rc, "client", "finding ipuofd: %s", err);
        address = c->target.address;
    }
    rc = ipuof_addr_parse(address, &addr, err, sizeof err);
    if (rc != IPUOF_OK) {
        if (c->target.source[0] != '\0' && strcmp(c->target.source, "the default") != 0)
            return ipuof_err_set(c, rc, "client", "%s (the address is from %s)", err,
                                 c->target.source);
        return ipuof_err_set(c, rc, "client", "%s", err);
    }
    ipuof_addr_format(&addr, c->address, sizeof c->address);

    /* A new connection starts with nothing held and nothing to report from the last one. */
    c->notice_pending = 0;
    c->health_reason[0] = '\0';
    rc = ipuof_conn_open(c, &addr);
    if (rc != IPUOF_OK) {
        /* Say where the address came from when the program did not give it. */
        size_t n = strlen(c->err.msg);
        if (c->target.source[0] != '\0' && strcmp(c->target.source, "the default") != 0 &&
            strcmp(c->target.source, IPUOF_SERVER_ENV) != 0 && n < sizeof c->err.msg)
            snprintf(c->err.msg + n, sizeof c->err.msg - n, " (the address is from %s)",
                     c->target.source);
        return rc;
    }
    c->ever_connected = 1;
    if (!do_hello)
        return IPUOF_OK;
    rc = hello(c);
    if (rc != IPUOF_OK)
        ipuof_conn_close(c);
    return rc;
}
