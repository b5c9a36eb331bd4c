"""PopTorch's error classes, raised with the daemon's (or the library's) own sentence.

poptorch.Error carries .message, .type (the component that failed) and .location;
RecoverableError adds .recovery_action (the daemon's recovery name, e.g. "IPU_RESET"), and
its text ends with "\\nRecovery action required: X" as PopTorch's does.
"""
from . import _lib


class Error(RuntimeError):
    """poptorch.Error: the base class of every error this package raises itself."""

    def __init__(self, message, type="poptorch", location="", status=0):
        super().__init__(message)
        self.message = message
        self.type = type
        self.location = location
        self.status = status
        self.status_name = _lib.string(_lib.lib.ipuof_status_name(status)) if status else ""


class RecoverableError(Error):
    """An error after which the IPU can be used again once recovery_action was taken."""

    def __init__(self, message, recovery_action, type="poptorch", location="", status=0):
        text = f"{message}\nRecovery action required: {recovery_action}"
        super().__init__(text, type, location, status)
        self.message = message
        self.recovery_action = recovery_action


class UnrecoverableError(Error):
    """An error after which the system must be taken out of operation."""


# A connection that was up and is gone: the daemon was killed, stopped, or became
# unreachable mid-call (libipuof-client's liveness check says which). ipuofd is the IPUoF
# server of every partition it serves, so what was on the partition (the loaded program,
# the weights and optimizer state on the device) is lost with it, while the host is fine:
# in Graphcore's taxonomy that is PARTITION_RESET ("vipu reset partition" restarts a
# partition's IPUoF servers), not IPU_RESET (the server would still be there to reload the
# IPU) and not FULL_RESET (no reboot is needed).
LOST_ACTION = "PARTITION_RESET"
LOST_HINT = ("; the partition and everything on it are lost: once ipuofd serves again, "
             "attachToDevice() (or a new model) compiles again with the host's weights")


def from_client(client_ptr, what, status, connected=True):
    """The exception for status, returned by the call described by what on the client
    handle client_ptr: its class and recovery action as the daemon classified it, its
    text "what: <sentence> (IPUOF_E_NAME)". connected: the handle had a working connection
    before the call, so losing it (IPUOF_E_CLOSED or IPUOF_E_IO from the connection) is a
    RecoverableError with LOST_ACTION; a connection that could not be made is a plain
    Error (nothing was lost: the address or the daemon's state is what is wrong)."""
    ffi, lib = _lib.ffi, _lib.lib
    cls = ffi.new("int *")
    rec = ffi.new("int *")
    comp = ffi.new("const char **")
    lib.ipuof_client_last_error(client_ptr, cls, rec, comp)
    sentence = _lib.string(lib.ipuof_client_errmsg(client_ptr)) or \
        _lib.string(lib.ipuof_strerror(status))
    name = _lib.string(lib.ipuof_status_name(status))
    text = f"{what}: {sentence} ({name})"
    component = _lib.string(comp[0]) or "poptorch"
    if cls[0] == _lib.ERROR_RECOVERABLE:
        action = _lib.string(lib.ipuof_recovery_name(rec[0]))
        return RecoverableError(text, action, component, what, status)
    if cls[0] == _lib.ERROR_UNRECOVERABLE:
        return UnrecoverableError(text, component, what, status)
    if connected and cls[0] == _lib.ERROR_PLAIN and component == "connection" and \
            status in (_lib.E_CLOSED, _lib.E_IO):
        return RecoverableError(text + LOST_HINT, LOST_ACTION, component, what, status)
    return Error(text, component, what, status)
