"""PopTorch's logging: the "poptorch::python" logger, setLogLevel (names or PopTorch's
legacy integers) and setPopartLogLevel (accepted and checked: there is no PopART here).
POPTORCH_LOG_LEVEL sets the level at import, as in PopTorch."""
import logging
import os
import sys

logger = logging.getLogger("poptorch::python")

TRACE = 5   # below logging.DEBUG: PopTorch's trace level
logging.addLevelName(TRACE, "TRACE")

# name -> (PopTorch's integer, Python's level)
_LEVELS = {"TRACE": (0, TRACE), "TRACE_ALL": (0, TRACE),
           "DEBUG": (1, logging.DEBUG), "DEBUG_IR": (1, logging.DEBUG),
           "INFO": (2, logging.INFO), "WARN": (3, logging.WARN),
           "ERR": (4, logging.ERROR), "OFF": (6, logging.CRITICAL)}
_PUBLIC = ("DEBUG", "ERR", "INFO", "OFF", "TRACE", "WARN")
popart_level = ["WARN"]
_ir = [False]   # TRACE, TRACE_ALL or DEBUG_IR: the compile logs PopART's IR


def output_popart_ir():
    """True when a compile logs "Popart IR: ..." (PopTorch's logging::outputPopartIR():
    the levels TRACE, TRACE_ALL and DEBUG_IR)."""
    return _ir[0] and logger.isEnabledFor(logging.DEBUG)


def _check(level):
    if level not in _LEVELS:
        raise ValueError(f"Unknown log level: {level}. Valid values are "
                         + ", ".join(_PUBLIC[:-1]) + " and " + _PUBLIC[-1])


def setLogLevel(level):
    """Sets the package's log level: "TRACE", "DEBUG", "INFO", "WARN", "ERR", "OFF", or
    PopTorch's integers 0-6 (legacy)."""
    if isinstance(level, int):
        for name, (n, _) in _LEVELS.items():
            if n == level:
                return setLogLevel(name)
        raise ValueError("Invalid log level integer")
    _check(level)
    logger.setLevel(_LEVELS[level][1])
    _ir[0] = level in ("TRACE", "TRACE_ALL", "DEBUG_IR")
    return None


def setPopartLogLevel(level):
    """PopART's log level: there is no PopART in ipuofd, so the level is only checked and
    kept."""
    if not isinstance(level, str) or level not in _LEVELS:
        raise ValueError("Level must be one of " + ", ".join(_LEVELS))
    popart_level[0] = level


class _StderrHandler(logging.StreamHandler):
    """Writes to sys.stderr as it is when a line is logged (not as it was at import), so
    a program or test that replaces sys.stderr later (pytest's capfd) sees the lines."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


if not logger.handlers:
    _h = _StderrHandler()
    _h.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger.addHandler(_h)
setLogLevel(os.environ.get("POPTORCH_LOG_LEVEL", "WARN"))
