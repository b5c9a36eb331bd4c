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


def trace_path(model_name):
    """Where the library writes model_name's trace under the current POPLAR_ENGINE_OPTIONS
    (as the library reads it at compile time), or None when profiling is off or the
    variable is not a JSON object (the compile call reports that)."""
    env = os.environ.get("POPLAR_ENGINE_OPTIONS")
    if not env:
        return None
    try:
        eo = json.loads(env)
    except ValueError:
        return None
    if not isinstance(eo, dict):
        return None
    on = any(str(eo.get(k, "false")).lower() == "true"
             for k in ("autoReport.all", "autoReport.outputExecutionProfile"))
    if not on:
        return None
    directory = str(eo.get("autoReport.directory", "."))
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
