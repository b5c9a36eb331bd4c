/*
 * ipuof/status.h — what the client library, the wire protocol, the daemon and the
 * simulator share: the version, the default port, the numbered status codes with their
 * recovery actions and error classes, and the element types.
 *
 * Installed next to ipuof/client.h, which includes it: a program includes
 * <ipuof/client.h>. The daemon and the simulator include this header alone.
 */
#ifndef IPUOF_STATUS_H
#define IPUOF_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IPUOF_VERSION_MAJOR 0
#define IPUOF_VERSION_MINOR 1
#define IPUOF_VERSION_PATCH 0

/* Default TCP port of ipuofd (the port IPU-over-Fabric servers use). */
#define IPUOF_DEFAULT_PORT 50052

#if defined(__GNUC__) && defined(IPUOF_BUILDING_LIBRARY)
#define IPUOF_API __attribute__((visibility("default")))
#else
#define IPUOF_API
#endif

/*
 * Status codes, shared by the wire protocol (Error.code) and the library.
 * Numbers are stable and never reused; a retired code keeps its number.
 */
enum ipuof_status {
    IPUOF_OK = 0,
    IPUOF_E_INVAL = 1,           /* an argument or request field is invalid */
    IPUOF_E_NOMEM = 2,           /* out of host memory */
    IPUOF_E_IO = 3,              /* socket error */
    IPUOF_E_CLOSED = 4,          /* the peer closed the connection */
    IPUOF_E_PROTO = 5,           /* protocol violation: bad frame or message */
    IPUOF_E_VERSION = 6,         /* protocol versions differ */
    IPUOF_E_TIMEOUT = 7,         /* a connect, request or wait timed out */
    IPUOF_E_AUTH = 8,            /* not authorised (bad token, admin right needed) */
    IPUOF_E_NOTFOUND = 9,        /* no such IPU, partition or object */
    IPUOF_E_BUSY = 10,           /* not enough free IPUs, or the IPU is in use */
    IPUOF_E_TOO_MANY = 11,       /* too many connections or waiters */
    IPUOF_E_TOO_LARGE = 12,      /* a frame, string or list is over its limit */
    IPUOF_E_DEVICE_RESET = 13,   /* the partition was reset by an administrator */
    IPUOF_E_NOT_ATTACHED = 14,   /* the request needs an attached partition */
    IPUOF_E_ALREADY_ATTACHED = 15, /* this connection already holds a partition */
    IPUOF_E_UNSUPPORTED = 16,    /* an op, dtype, opset or option is not supported */
    IPUOF_E_SHAPE = 17,          /* a tensor shape does not match */
    IPUOF_E_DTYPE = 18,          /* a tensor dtype does not match */
    IPUOF_E_DEVICE_OOM = 19,     /* the graph does not fit the IPU's memory */
    IPUOF_E_COMPILE = 20,        /* the graph cannot be compiled */
    IPUOF_E_SHUTDOWN = 21,       /* the daemon is shutting down */
    IPUOF_E_INTERNAL = 22,       /* a bug in ipuofd; please report it */
    IPUOF_E_CONFIG = 23,         /* invalid configuration */
    IPUOF_E_CANCELLED = 24,      /* the operation was cancelled */
    IPUOF_E_STATE = 25,          /* the call is not valid in the handle's current state */
    IPUOF_E_DEVICE_FAULT = 26    /* the IPU is in error (an injected fault): see recovery */
    /* next: 27 */
};
#define IPUOF_STATUS_COUNT 27

/* Recovery actions (Error.recovery), as poptorch.RecoverableError.recovery_action. */
enum ipuof_recovery {
    IPUOF_RECOVERY_NONE = 0,
    IPUOF_RECOVERY_RETRY = 1,
    IPUOF_RECOVERY_REATTACH = 2,
    IPUOF_RECOVERY_IPU_RESET = 3,
    IPUOF_RECOVERY_PARTITION_RESET = 4,
    IPUOF_RECOVERY_LINK_RESET = 5,
    IPUOF_RECOVERY_FULL_RESET = 6
};

/* Error classes (Error.error_class). */
enum ipuof_error_class {
    IPUOF_ERROR_PLAIN = 0,         /* poptorch.Error */
    IPUOF_ERROR_RECOVERABLE = 1,   /* poptorch.RecoverableError */
    IPUOF_ERROR_UNRECOVERABLE = 2  /* poptorch.UnrecoverableError */
};

/* Static text for a status code ("no such IPU, partition or object"); never NULL. */
IPUOF_API const char *ipuof_strerror(int status);

/* Static name of a status code ("IPUOF_E_NOTFOUND"); never NULL. */
IPUOF_API const char *ipuof_status_name(int status);

/* Static name of a recovery action ("IPU_RESET"); never NULL. */
IPUOF_API const char *ipuof_recovery_name(int recovery);

/* The library's version as "MAJOR.MINOR.PATCH". */
IPUOF_API const char *ipuof_version(void);

/* Element types, numbered as ONNX's TensorProto.DataType. */
enum ipuof_dtype {
    IPUOF_DTYPE_FLOAT = 1,
    IPUOF_DTYPE_UINT8 = 2,
    IPUOF_DTYPE_INT8 = 3,
    IPUOF_DTYPE_INT32 = 6,
    IPUOF_DTYPE_INT64 = 7,
    IPUOF_DTYPE_BOOL = 9,
    IPUOF_DTYPE_FLOAT16 = 10    /* IEEE 754 binary16, 2 bytes little-endian */
};

/* Static name of a dtype ("float", "int64", ...). */
IPUOF_API const char *ipuof_dtype_name(int dtype);
/* Bytes per element, 0 for an unknown dtype. */
IPUOF_API size_t ipuof_dtype_size(int dtype);

#ifdef __cplusplus
}
#endif

#endif /* IPUOF_STATUS_H */
