/*
 * client.c — the client handle: creation, options, the connect + hello exchange, the
 * per-handle last error, and server address parsing.
 *
 * The socket and the frames are conn.c's job; devices.c and status.c hold the requests.
 * Nothing here prints, exits or keeps global state. A handle is used by one thread at a time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "wiremap.h"

/* ---- errors ---------------------------------------------------------------------------- */

/* Copies src (NULL: "") into dst[0..cap), cut to fit and always terminated. */
static void
copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? strlen(src) : 0;

    if (n >= cap)
        n = cap - 1;
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

int
ipuof_err_set(ipuof_client *c, int code, const char *component, const char *fmt, ...)
{
    va_list ap;

    c->err.code = code;
    c->err.error_class = IPUOF_ERROR_PLAIN;
    c->err.recovery = IPUOF_RECOVERY_NONE;
    copy_str(c->err.component, sizeof c->err.component, component);
    va_start(ap, fmt);
    vsnprintf(c->err.msg, sizeof c->err.msg, fmt, ap);
    va_end(ap);
    return code;
}

int
ipuof_errbuf_set(char *buf, size_t len, int code, const char *fmt, ...)
{
    va_list ap;

    if (buf == NULL || len == 0)
        return code;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return code;
}

void
ipuof_err_from_wire(struct ipuof_err_info *dst, const Ipuof__Error *e)
{
    dst->code = e->code <= (uint32_t)INT32_MAX ? (int)e->code : IPUOF_E_PROTO;
    if (dst->code == IPUOF_OK)
        dst->code = IPUOF_E_PROTO; /* an Error that says "success" is itself an error */
    dst->error_class = ipuof_wm_from_wire(&ipuof_wm_error_class, e->error_class,
                                          IPUOF_ERROR_PLAIN);
    dst->recovery = ipuof_wm_from_wire(&ipuof_wm_recovery, e->recovery, IPUOF_RECOVERY_NONE);
    copy_str(dst->component, sizeof dst->component,
             e->component != NULL && e->component[0] != '\0' ? e->component : "daemon");
    copy_str(dst->msg, sizeof dst->msg,
             e->message != NULL && e->message[0] != '\0' ? e->message
                                                         : ipuof_strerror(dst->code));
}

int
ipuof_err_report(ipuof_client *c, const struct ipuof_err_info *src)
{
    if (&c->err != src)
        c->err = *src;
    return c->err.code;
}

void
ipuof_copy_str(char *dst, size_t len, const char *src)
{
    size_t n = src != NULL ? strlen(src) : 0;

    if (n >= len)
        n = len - 1;
    memcpy(dst, src != NULL ? src : "", n);
    dst[n] = '\0';
}

void
ipuof_err_clear(ipuof_client *c)
{
    c->err.code = IPUOF_OK;
    c->err.error_class = IPUOF_ERROR_PLAIN;
    c->err.recovery = IPUOF_RECOVERY_NONE;
    c->err.component[0] = '\0';
    c->err.msg[0] = '\0';
}

int
ipuof_require_connection(ipuof_client *c)
{
    if (c->fd >= 0)
        return IPUOF_OK;
    if (c->ever_connected)
        return ipuof_err_set(c, IPUOF_E_CLOSED, "client",
                             "not connected: the connection to ipuofd at %s was closed after "
                             "an earlier error; connect again",
                             c->address);
    return ipuof_err_set(c, IPUOF_E_CLOSED, "client",
                         "not connected to ipuofd; call ipuof_client_connect() first");
}

const char *
ipuof_client_errmsg(const ipuof_client *c)
{
    if (c == NULL)
        return "no client handle (NULL); ipuof_client_new() may have run out of memory";
    return c->err.msg;
}

int
ipuof_client_last_error(const ipuof_client *c, int *error_class, int *recovery,
                        const char **component)
{
    if (c == NULL) {
        if (error_class != NULL)
            *error_class = IPUOF_ERROR_PLAIN;
        if (recovery != NULL)
            *recovery = IPUOF_RECOVERY_NONE;
        if (component != NULL)
            *component = "client";
        return IPUOF_E_INVAL;
    }
    if (error_class != NULL)
        *error_class = c->err.error_class;
    if (recovery != NULL)
        *recovery = c->err.recovery;
    if (component != NULL)
        *component = c->err.component;
    return c->err.code;
}

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

/* ---- address parsing ------------------------------------------------------------------ */

/* Checks that port[0..len) is a decimal port number and copies it to out->port. */
static int
parse_port(const char *port, size_t len, struct ipuof_addr *out, char *err, size_t errlen,
           const char *address)
{
    unsigned long v = 0;

    if (len == 0 || len > 5) {
        snprintf(err, errlen, "bad port in server address \"%s\": expected 1..65535",
                 address);
        return IPUOF_E_INVAL;
    }
    for (size_t i = 0; i < len; i++) {
        if (port[i] < '0' || port[i] > '9') {
            snprintf(err, errlen, "bad port in server address \"%s\": expected 1..65535",
                     address);
            return IPUOF_E_INVAL;
        }
        v = v * 10 + (unsigned long)(port[i] - '0');
    }
    if (v == 0 || v > 65535) {
        snprintf(err, errlen, "bad port %lu in server address \"%s\": expected 1..65535", v,
                 address);
        return IPUOF_E_INVAL;
    }
    snprintf(out->port, sizeof out->port, "%lu", v);
    return IPUOF_OK;
}

/* Sets out->port to IPUOF_DEFAULT_PORT. */
static int
default_port(struct ipuof_addr *out)
{
    snprintf(out->port, sizeof out->port, "%d", IPUOF_DEFAULT_PORT);
    return IPUOF_OK;
}

/* Checks host[0..len) and copies it to out->host. */
static int
set_host(const char *host, size_t len, struct ipuof_addr *out, char *err, size_t errlen,
         const char *address)
{
    if (len == 0) {
        snprintf(err, errlen, "no host in server address \"%s\"; expected HOST:PORT, "
                 "[IPV6]:PORT or unix:/path", address);
        return IPUOF_E_INVAL;
    }
    if (len >= sizeof out->host) {
        snprintf(err, errlen, "host name in server address \"%.64s...\" is longer than %zu "
                 "bytes", address, sizeof out->host - 1);
        return IPUOF_E_INVAL;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)host[i] <= ' ' || host[i] == '/' || host[i] == '[' ||
            host[i] == ']') {
            snprintf(err, errlen, "bad character in the host of server address \"%s\"",
                     address);
            return IPUOF_E_INVAL;
        }
    }
    memcpy(out->host, host, len);
    out->host[len] = '\0';
    return IPUOF_OK;
}

int
ipuof_addr_parse(const char *address, struct ipuof_addr *out, char *err, size_t errlen)
{
    const char *colon;
    int rc;

    memset(out, 0, sizeof *out);
    if (address == NULL || address[0] == '\0') {
        snprintf(err, errlen, "empty server address; expected HOST:PORT, [IPV6]:PORT or "
                 "unix:/path");
        return IPUOF_E_INVAL;
    }
    if (strncmp(address, "unix:", 5) == 0) {
        const char *path = address + 5;
        size_t n = strlen(path);

        if (n == 0) {
            snprintf(err, errlen, "no socket path in server address \"%s\"", address);
            return IPUOF_E_INVAL;
        }
        if (n >= sizeof out->path) {
            snprintf(err, errlen, "socket path in server address \"%.64s...\" is longer "
                     "than %zu bytes", address, sizeof out->path - 1);
            return IPUOF_E_INVAL;
        }
        out->is_unix = 1;
        memcpy(out->path, path, n + 1);
        return IPUOF_OK;
    }
    if (address[0] == '[') {
        const char *close = strchr(address, ']');

        if (close == NULL) {
            snprintf(err, errlen, "no closing ']' in server address \"%s\"", address);
            return IPUOF_E_INVAL;
        }
        rc = set_host(address + 1, (size_t)(close - address - 1), out, err, errlen, address);
        if (rc != IPUOF_OK)
            return rc;
        if (close[1] == '\0')
            return default_port(out);
        if (close[1] != ':') {
            snprintf(err, errlen, "expected ':' after ']' in server address \"%s\"", address);
            return IPUOF_E_INVAL;
        }
        return parse_port(close + 2, strlen(close + 2), out, err, errlen, address);
    }
    colon = strchr(address, ':');
    if (colon != NULL && strchr(colon + 1, ':') != NULL) {
        /* Two colons and no brackets: a bare IPv6 literal on the default port. */
        rc = set_host(address, strlen(address), out, err, errlen, address);
        if (rc != IPUOF_OK)
            return rc;
        return default_port(out);
    }
    if (colon == NULL) {
        rc = set_host(address, strlen(address), out, err, errlen, address);
        if (rc != IPUOF_OK)
            return rc;
        return default_port(out);
    }
    rc = set_host(address, (size_t)(colon - address), out, err, errlen, address);
    if (rc != IPUOF_OK)
        return rc;
    return parse_port(colon + 1, strlen(colon + 1), out, err, errlen, address);
}

void
ipuof_addr_format(const struct ipuof_addr *a, char *buf, size_t len)
{
    if (a->is_unix)
        snprintf(buf, len, "unix:%s", a->path);
    else if (strchr(a->host, ':') != NULL)
        snprintf(buf, len, "[%s]:%s", a->host, a->port);
    else
        snprintf(buf, len, "%s:%s", a->host, a->port);
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
    copy_str(c->server_version, sizeof c->server_version, hr->server_version);
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
