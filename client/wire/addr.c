/*
 * addr.c — server addresses: parsing "HOST:PORT", "[V6]:PORT", "HOST", "V6" and
 * "unix:/path" into a struct ipuof_addr, and formatting one back as messages show it.
 *
 * A leaf of libipuof-client (it calls nothing of the library), so the handle (client.c),
 * the config files (ipuof_conf.c) and the socket's health probe (conn.c) all parse and show
 * addresses the same way without calling each other.
 */
#include <stdio.h>
#include <string.h>

#include "client_internal.h"

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
