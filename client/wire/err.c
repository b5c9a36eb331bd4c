/*
 * err.c — the per-handle last error (ours or the daemon's, copied verbatim), the sentence
 * helpers of objects without a handle, and the bounded string copy every file uses.
 *
 * A leaf of libipuof-client: it calls nothing of the library but wiremap.c's tables, so
 * every other file (the socket in conn.c included) may record an error without calling
 * back up into the handle (client.c) or a request (issue 30: no call circle in client/).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client_internal.h"
#include "wiremap.h"

/* Fills *e (class plain, recovery none) with the sentence fmt and ap make. */
static int
err_vset(struct ipuof_err_info *e, int code, const char *component, const char *fmt,
         va_list ap)
{
    e->code = code;
    e->error_class = IPUOF_ERROR_PLAIN;
    e->recovery = IPUOF_RECOVERY_NONE;
    ipuof_copy_str(e->component, sizeof e->component, component);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return code;
}

int
ipuof_err_set(ipuof_client *c, int code, const char *component, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    err_vset(&c->err, code, component, fmt, ap);
    va_end(ap);
    return code;
}

int
ipuof_err_info_set(struct ipuof_err_info *e, int code, const char *component, const char *fmt,
                   ...)
{
    va_list ap;

    va_start(ap, fmt);
    err_vset(e, code, component, fmt, ap);
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
    ipuof_copy_str(dst->component, sizeof dst->component,
             e->component != NULL && e->component[0] != '\0' ? e->component : "daemon");
    ipuof_copy_str(dst->msg, sizeof dst->msg,
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
