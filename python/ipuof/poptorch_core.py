"""poptorch.poptorch_core: the names of PopTorch's C++ extension that PopTorch programs
and PopTorch's own tests reach for. The error classes are the package's own (one class
each, whichever module a program names them through); the internal checks are answered
by the Python package, since there is no C++ extension here."""
import contextlib
import enum

from . import _popart_options
from .errors import Error, RecoverableError, UnrecoverableError

_dispatcher_active = [False]


def isCompilingWithDispatcher():
    """True only while a model is being captured (PopTorch: while its dispatcher traces);
    False afterwards, also when a capture failed."""
    return _dispatcher_active[0]


@contextlib.contextmanager
def _capturing():
    """Marks the host runs that capture a model (isCompilingWithDispatcher and
    poptorch.isRunningOnIpu are True inside them); nests."""
    was = _dispatcher_active[0]
    _dispatcher_active[0] = True
    try:
        yield
    finally:
        _dispatcher_active[0] = was


def _validateOptions(options_dict):
    """Checks a dictionary made by Options.toDict() as PopTorch's backend reads one
    (_popart_options.validate): Error for a name it has no option of that kind for, or a
    value of a type no option takes."""
    _popart_options.validate(options_dict)


def propagateInputShapes(graph):
    """PopTorch's shape propagation over a TorchScript graph: torch's own pass, which is
    what the tracer-based helpers of PopTorch's tests need."""
    import torch
    torch._C._jit_pass_complete_shape_analysis(graph, tuple(), False)


class TestErrorType(enum.Enum):
    """The kinds of error _throwTestError raises (PopTorch's internal test hook)."""
    Poptorch = 0
    Popart = 1
    PopartInternal = 2
    Poplibs = 3
    PoplarUnrecoverable = 4
    PoplarUnknown = 5
    PoplarRecoverableFullReset = 6
    PoplarLinkError = 7
    Std = 8


_TEST_ERRORS = {
    TestErrorType.Poptorch: (Error, "poptorch_cpp_error", None),
    TestErrorType.Popart: (Error, "popart_exception", None),
    TestErrorType.PopartInternal: (Error, "popart_internal_exception", None),
    TestErrorType.Poplibs: (Error, "poplibs_error", None),
    TestErrorType.PoplarUnrecoverable: (UnrecoverableError,
                                        "poplar_unrecoverable_runtime_error", None),
    TestErrorType.PoplarUnknown: (Error, "poplar_unknown_runtime_error", None),
    TestErrorType.PoplarRecoverableFullReset: (RecoverableError,
                                               "poplar_recoverable_runtime_error",
                                               "FULL_RESET"),
    TestErrorType.PoplarLinkError: (Error, "poplar_link_error", None),
    TestErrorType.Std: (Error, "std::exception", None),
}


def _throwTestError(error_type):
    """Raises the error class PopTorch maps error_type to, with a two-frame location, as
    PopTorch's test hook does (for programs that test their error handling)."""
    cls, kind, action = _TEST_ERRORS[TestErrorType(error_type)]
    location = "throwTestError::topLevel\nthrowTestError::bottomLevel"
    message = f"Test {kind}"
    err = cls(message, action, kind, location) if action is not None \
        else cls(message, kind, location)
    err.args = (f"{err.args[0]}\n{location}",)
    raise err
