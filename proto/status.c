/*
 * status.c — names and sentences for the status codes shared by the protocol and the
 * client library (enum ipuof_status in client/include/ipuof/status.h).
 */
#include "ipuof/status.h"

#include <stddef.h>

struct status_text {
    const char *name;
    const char *text;
};

static const struct status_text status_table[IPUOF_STATUS_COUNT] = {
    [IPUOF_OK] = {"IPUOF_OK", "success"},
    [IPUOF_E_INVAL] = {"IPUOF_E_INVAL", "invalid argument"},
    [IPUOF_E_NOMEM] = {"IPUOF_E_NOMEM", "out of memory"},
    [IPUOF_E_IO] = {"IPUOF_E_IO", "input/output error on the connection"},
    [IPUOF_E_CLOSED] = {"IPUOF_E_CLOSED", "the connection was closed"},
    [IPUOF_E_PROTO] = {"IPUOF_E_PROTO", "protocol error"},
    [IPUOF_E_VERSION] = {"IPUOF_E_VERSION", "protocol version mismatch"},
    [IPUOF_E_TIMEOUT] = {"IPUOF_E_TIMEOUT", "timed out"},
    [IPUOF_E_AUTH] = {"IPUOF_E_AUTH", "not authorised"},
    [IPUOF_E_NOTFOUND] = {"IPUOF_E_NOTFOUND", "no such IPU, partition or object"},
    [IPUOF_E_BUSY] = {"IPUOF_E_BUSY", "device busy"},
    [IPUOF_E_TOO_MANY] = {"IPUOF_E_TOO_MANY", "too many connections or waiters"},
    [IPUOF_E_TOO_LARGE] = {"IPUOF_E_TOO_LARGE", "over a size limit"},
    [IPUOF_E_DEVICE_RESET] = {"IPUOF_E_DEVICE_RESET", "the partition was reset"},
    [IPUOF_E_NOT_ATTACHED] = {"IPUOF_E_NOT_ATTACHED", "not attached to a partition"},
    [IPUOF_E_ALREADY_ATTACHED] = {"IPUOF_E_ALREADY_ATTACHED", "already attached to a partition"},
    [IPUOF_E_UNSUPPORTED] = {"IPUOF_E_UNSUPPORTED", "not supported"},
    [IPUOF_E_SHAPE] = {"IPUOF_E_SHAPE", "tensor shape mismatch"},
    [IPUOF_E_DTYPE] = {"IPUOF_E_DTYPE", "tensor type mismatch"},
    [IPUOF_E_DEVICE_OOM] = {"IPUOF_E_DEVICE_OOM", "out of IPU memory"},
    [IPUOF_E_COMPILE] = {"IPUOF_E_COMPILE", "graph compilation failed"},
    [IPUOF_E_SHUTDOWN] = {"IPUOF_E_SHUTDOWN", "the daemon is shutting down"},
    [IPUOF_E_INTERNAL] = {"IPUOF_E_INTERNAL", "internal error"},
    [IPUOF_E_CONFIG] = {"IPUOF_E_CONFIG", "invalid configuration"},
    [IPUOF_E_CANCELLED] = {"IPUOF_E_CANCELLED", "cancelled"},
    [IPUOF_E_STATE] = {"IPUOF_E_STATE", "not valid in the current state"},
    [IPUOF_E_DEVICE_FAULT] = {"IPUOF_E_DEVICE_FAULT", "the IPU is in error"},
};

_Static_assert(IPUOF_E_DEVICE_FAULT + 1 == IPUOF_STATUS_COUNT, "status_table out of sync with enum");

const char *
ipuof_strerror(int status)
{
    if (status < 0 || status >= IPUOF_STATUS_COUNT || status_table[status].text == NULL)
        return "unknown status code";
    return status_table[status].text;
}

const char *
ipuof_status_name(int status)
{
    if (status < 0 || status >= IPUOF_STATUS_COUNT || status_table[status].name == NULL)
        return "IPUOF_E_UNKNOWN";
    return status_table[status].name;
}

const char *
ipuof_recovery_name(int recovery)
{
    static const char *const names[] = {"NONE", "RETRY", "REATTACH", "IPU_RESET",
                                        "PARTITION_RESET", "LINK_RESET", "FULL_RESET"};

    if (recovery < 0 || (size_t)recovery >= sizeof names / sizeof names[0])
        return "UNKNOWN";
    return names[recovery];
}

const char *
ipuof_ipu_state_name(int state)
{
    static const char *const names[] = {"free", "attached", "busy", "error"};

    if (state < 0 || (size_t)state >= sizeof names / sizeof names[0])
        return "unknown";
    return names[state];
}

const char *
ipuof_version(void)
{
    return IPUOF_VERSION_STR;
}
