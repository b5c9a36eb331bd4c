"""The SVG timeline beside the execution trace that profiling writes.

With POPLAR_ENGINE_OPTIONS' autoReport switched on, libipuof-client writes each run's trace
to <autoReport.directory>/<model name>.trace.json (the last run's, overwritten by every
run). When the model leaves the device (detachFromDevice, destroy, the interpreter's exit)
this module draws that last trace as <directory>/<model name>.timeline.svg with the
project's renderer, the ipuof-trace program: the one next to the loaded library
(PREFIX/lib/.. /bin, or build/lib/../bin in a build tree), else the one on PATH. The
library itself never prints and has no renderer, so the drawing happens here, once per
model rather than after every run.
"""
import json
import os
import shutil
import subprocess

from . import _lib
from .errors import Error


ENGINE_OPTIONS_MAX = 4096  # bytes, as libipuof-client reads it

_NOT_FLAT = ("has a value that is not a string, a number, true or false "
             "(objects, arrays, null, NaN and Infinity are not options)")


class _Number(str):
    """A JSON number's text, kept as written (as the library reports it)."""


def _refuse(_text):
    raise ValueError(_NOT_FLAT)


def _check_string(s):
    """The reason a decoded JSON string is refused, or None (the library's rule: no
    U+0000, no lone surrogate)."""
    if "\0" in s:
        return "has \\u0000 in a string"
    for ch in s:
        if "\ud800" <= ch <= "\udbff":
            return "has a lone high surrogate (\\uD800-\\uDBFF) in a string"
        if "\udc00" <= ch <= "\udfff":
            return "has a lone low surrogate (\\uDC00-\\uDFFF) in a string"
    return None


def _parse(value):
    """(profile, directory) from value (bytes), or ValueError(reason)."""
    if len(value) > ENGINE_OPTIONS_MAX:
        raise ValueError("is longer than 4096 bytes")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("is not valid UTF-8") from None
    if not text.lstrip(" \t\n\r").startswith("{"):
        raise ValueError("is not a JSON object (it must start with '{')")
    try:
        pairs = json.loads(text, object_pairs_hook=lambda p: p, parse_constant=_refuse,
                           parse_int=_Number, parse_float=_Number)
    except json.JSONDecodeError as exc:
        if "uXXXX" in exc.msg:
            raise ValueError("has a \\u escape without four hex digits") from None
        if "escape" in exc.msg:
            raise ValueError("has an escape JSON does not know (\\\" \\\\ \\/ \\b \\f "
                             "\\n \\r \\t \\uXXXX)") from None
        if "control character" in exc.msg:
            raise ValueError("has a control character inside a string (write it as \\n, "
                             "\\t or \\u00XX)") from None
        raise ValueError(f"is not valid JSON ({exc.msg} at character {exc.pos})") from None
    flags = {"autoReport.all": False, "autoReport.outputExecutionProfile": False}
    directory = "."
    for key, val in pairs:
        for s in (key, val) if isinstance(val, str) else (key,):
            why = _check_string(s)
            if why:
                raise ValueError(why)
        if isinstance(val, list) or val is None:
            raise ValueError(_NOT_FLAT)
        if isinstance(val, bool):
            val_text, is_string = "true" if val else "false", False
        else:
            val_text, is_string = str(val), not isinstance(val, _Number)
        if key in flags:
            if val_text not in ("true", "false"):
                q = '"' if is_string else ""
                raise ValueError(f"sets {key} to {q}{val_text[:60]}{q}; it takes true or false "
                                 '(or the strings "true" and "false", as Poplar\'s boolean '
                                 "options)")
            flags[key] = val_text == "true"
        if key == "autoReport.directory":
            if not is_string or not val_text or len(val_text.encode()) >= 4096:
                raise ValueError("sets autoReport.directory to something other than a "
                                 "directory name (a non-empty JSON string shorter than 4096 "
                                 "bytes)")
            directory = val_text
    return any(flags.values()), directory


def engine_options(value=None):
    """POPLAR_ENGINE_OPTIONS (value, str or bytes, or the environment's when None) read by
    the rule libipuof-client follows (client/model/engine_opts.c; the cases both sides test are
    in tests/data/engine_options.tsv): a flat UTF-8 JSON object of strings, numbers and
    true/false, every string escape decoded, the last of a repeated key counting;
    autoReport.all or autoReport.outputExecutionProfile true (or "true"; "True" and other
    values are refused, as Poplar's boolean options refuse them) switches profiling on;
    autoReport.directory, a non-empty string, says where traces go ("." by default).
    Returns (profile, directory); unset or empty: (False, "."). Raises Error with the
    library's sentence when the value breaks the rule."""
    if value is None:
        value = os.environ.get("POPLAR_ENGINE_OPTIONS")
    if not value:
        return False, "."
    raw = os.fsencode(value) if isinstance(value, str) else bytes(value)
    try:
        return _parse(raw)
    except ValueError as exc:
        raise Error(f"POPLAR_ENGINE_OPTIONS {exc.args[0]}: expected a flat JSON object of "
                    f"strings, numbers and true/false of at most {ENGINE_OPTIONS_MAX} bytes, "
                    'such as {"autoReport.all":"true", "autoReport.directory":"./report"}') \
            from None


def trace_path(model_name):
    """Where the library writes model_name's trace under the current POPLAR_ENGINE_OPTIONS
    (as the library reads it at compile time), or None when profiling is off or the
    variable breaks engine_options' rule (the compile call reports that)."""
    try:
        on, directory = engine_options()
    except Error:
        return None
    if not on:
        return None
    return os.path.join(directory, model_name.replace("/", "_") + ".trace.json")


def _tool():
    """The ipuof-trace program's path, or None."""
    here = os.path.dirname(os.path.abspath(_lib.path)) if os.sep in _lib.path else None
    if here:
        near = os.path.join(here, "..", "bin", "ipuof-trace")
        if os.access(near, os.X_OK):
            return os.path.normpath(near)
    return shutil.which("ipuof-trace")


def render_timeline(trace):
    """Draws the trace file trace (a path ending in .trace.json) as the .timeline.svg
    beside it. Returns None when written, else a sentence saying why not."""
    if not os.path.exists(trace):
        return f"no trace at {trace} (the model never ran with profiling on)"
    tool = _tool()
    if tool is None:
        return ("the ipuof-trace program was found neither next to "
                f"{_lib.path} nor on PATH: install the project's tools (make install)")
    svg = trace[:-len(".trace.json")] + ".timeline.svg"
    try:
        r = subprocess.run([tool, "-o", svg, trace], capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{tool} could not draw {trace}: {exc}"
    if r.returncode != 0:
        return f"{tool} could not draw {trace}: {r.stderr.strip()[-500:]}"
    return None


def write_report(trace):
    """Copies the run's trace (<directory>/<model name>.trace.json) to
    <directory>/<model name>/profile.pop, where PopTorch programs look for the report
    Poplar writes. The file is ipuofd's execution trace, Chrome trace event JSON (open it
    in Perfetto or chrome://tracing), not PopVision's binary format, which only Poplar
    writes. A trace the library did not write leaves nothing; a directory that cannot be
    made or written raises Error."""
    if not trace or not os.path.isfile(trace):
        return
    directory, base = os.path.split(trace)
    name = base[:-len(".trace.json")] if base.endswith(".trace.json") else base
    dest = os.path.join(directory, name)
    try:
        os.makedirs(dest, exist_ok=True)
        shutil.copyfile(trace, os.path.join(dest, "profile.pop"))
    except OSError as exc:
        raise Error(f"profiling: cannot write the report {dest}/profile.pop: {exc}") \
            from None


def export_proto(onnx_bytes):
    """POPTORCH_EXPORT_PROTO_FILE=path: writes the graph as compiled (the ONNX ModelProto
    the daemon is given, PopART's format for the same file) to path, making its
    directory; Error when it cannot be written."""
    path = os.environ.get("POPTORCH_EXPORT_PROTO_FILE")
    if not path:
        return
    try:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as f:
            f.write(onnx_bytes)
    except OSError as exc:
        raise Error(f"POPTORCH_EXPORT_PROTO_FILE={path}: cannot write the model: {exc}") \
            from None
