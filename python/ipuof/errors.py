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


def from_client(client_ptr, what, status):
    """The exception for status, returned by the call described by what on the client
    handle client_ptr: its class and recovery action as the daemon classified it, its
    text "what: <sentence> (IPUOF_E_NAME)"."""
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
    return Error(text, component, what, status)
