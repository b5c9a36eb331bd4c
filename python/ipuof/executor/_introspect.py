"""What a compiled model can tell about itself: whether the daemon serves IPUs, the
simulated clock's figures of the last run (PopTorch's perf counters, latencies and cycle
count), and the names of the tensors of its graph.

Timing comes from the simulated clock (sim/sched/cost.c: the GC200's published rates): the
daemon reports the simulated device seconds of each run (ipuof_model_run_cost). PopTorch's
perf counters are host timestamps of each step's input and output transfers; here the run
starts when the host hands its inputs over, its steps take equal shares of the simulated
device time, and a step's input is complete when it starts and its output when it ends
(the cost figures do not separate transfers from compute, so the host-to-IPU and
IPU-to-host latencies are 0 and the compute latency is the step's share).
"""
import time

from .. import _lib, enums
from ..errors import Error

ffi, lib = _lib.ffi, _lib.lib

IPU_CLOCK_HZ = 1.33e9  # GC200's tile clock (IPU-M2000 datasheet)


def hardware_available(num_ipus=1):
    """True when a daemon answers at IPUOF_SERVER (or the default address) and serves at
    least num_ipus IPUs; False when none answers. The connect is bounded by
    IPUOF_CONNECT_TIMEOUT_MS (default 5000 ms), 2000 ms at most here."""
    from .. import _device
    if not _lib.has("ipuof_status"):
        return False
    c = lib.ipuof_client_new()
    if c == ffi.NULL:
        return False
    try:
        ms = min(_device._env_ms("IPUOF_CONNECT_TIMEOUT_MS", 5000) or 2000, 2000)
        lib.ipuof_client_set_timeouts(c, ms, ms)
        lib.ipuof_client_set_name(c, b"ipuHardwareIsAvailable")
        if lib.ipuof_client_connect(c, ffi.NULL) != 0:
            return False
        rep = ffi.new("ipuof_status_report **")
        if lib.ipuof_status(c, rep) != 0:
            return False
        try:
            return lib.ipuof_status_report_ipu_count(rep[0]) >= num_ipus
        finally:
            lib.ipuof_status_report_free(rep[0])
    finally:
        lib.ipuof_client_free(c)


class RunClock:
    """The last run's figures: when the host handed the inputs over (host clock, seconds
    since the epoch) and the simulated device seconds the run took (None when the daemon
    gave none)."""

    def __init__(self):
        self.start = None
        self.device_s = None

    def record(self, start, exe):
        """Notes a run of exe that started at start (time.time())."""
        self.start = start
        self.device_s = None
        if exe is not None and exe.ptr is not None and _lib.has("ipuof_model_run_cost"):
            s = ffi.new("double *")
            if lib.ipuof_model_run_cost(exe.ptr, s, ffi.NULL, ffi.NULL) == 0:
                self.device_s = float(s[0])


def _steps(options, training):
    o = options
    accum = o.Training.gradient_accumulation if training else 1
    return o.device_iterations * accum * o.replication_factor


def _out_steps(options, training):
    """Output transfers per run for PopTorch's output modes."""
    o = options
    steps = _steps(options, training)
    mode = o.output_mode
    if mode == enums.OutputMode.Default:
        mode = enums.OutputMode.Final if training else enums.OutputMode.All
    if mode in (enums.OutputMode.Final, enums.OutputMode.Sum):
        return o.replication_factor
    if mode == enums.OutputMode.EveryN:
        return steps // o.output_return_period
    return steps


def perf_counters(ex):
    """PopTorch's getPerfCounters() for executor ex: {'input', 'input_complete', 'output',
    'output_complete'}, a list per input or output of a timestamp per step."""
    clock = ex._clock
    if clock.start is None:
        raise Error("getPerfCounters: the model has not run yet")
    o = ex._options
    steps = _steps(o, ex._training)
    outs = _out_steps(o, ex._training)
    n_in = len(ex._names)
    n_out = ex._record.n_out if ex._record is not None else 0
    if o._values.get("synthetic_data"):
        steps = outs = 0
    total = clock.device_s if clock.device_s is not None else 0.0
    dt = total / steps if steps else 0.0
    starts = [clock.start + k * dt for k in range(steps)]
    # An output step k of outs ends the share of step (k + 1) * steps / outs - 1.
    ends = [clock.start + ((k + 1) * steps // outs) * dt for k in range(outs)] if outs else []
    return {"input": [list(starts) for _ in range(n_in)],
            "input_complete": [list(starts) for _ in range(n_in)],
            "output": [list(ends) for _ in range(n_out)],
            "output_complete": [list(ends) for _ in range(n_out)]}


def _min_max_avg(values):
    if not values:
        return (0.0, 0.0, 0.0)
    return (min(values), max(values), sum(values) / len(values))


def latencies(ex):
    """(host to IPU, compute, IPU to host, round trip), each (min, max, average) seconds
    over the last run's steps."""
    p = perf_counters(ex)
    if not p["input"] or not p["input"][0] or not p["output"] or not p["output"][0]:
        zero = (0.0, 0.0, 0.0)
        return zero, zero, zero, zero
    first_in = p["input"][0]
    first_done = p["input_complete"][0]
    out = p["output"][0]
    out_done = p["output_complete"][0]
    per = len(first_in) // len(out) or 1
    h2d = [b - a for a, b in zip(first_in, first_done)]
    compute = [out[k] - first_done[min(k * per, len(first_done) - 1)]
               for k in range(len(out))]
    d2h = [b - a for a, b in zip(out, out_done)]
    trip = [out_done[k] - first_in[min(k * per, len(first_in) - 1)] for k in range(len(out))]
    return (_min_max_avg(h2d), _min_max_avg(compute), _min_max_avg(d2h),
            _min_max_avg(trip))


def cycle_count(ex):
    """The last run's cycles on the simulated clock: its device seconds x the clock of the
    device type it was compiled for (the compile's prediction says; GC200's 1.33 GHz from a
    daemon that does not)."""
    if not ex._options._values.get("log_cycle_count"):
        raise Error("Cycle count logging is disabled. Please set option logCycleCount to "
                    "True to enable.")
    clock = ex._clock
    if clock.start is None:
        raise Error("cycleCount: the model has not run yet")
    if clock.device_s is None:
        raise Error("cycleCount: the daemon gave no cost figures for the last run (a "
                    "simulator without a cost model)")
    hz = IPU_CLOCK_HZ
    pred = ex._exe.prediction_report(True) if ex._exe is not None else None
    if pred is not None and pred.get("clock_hz", 0) > 0:
        hz = pred["clock_hz"]
    return int(round(clock.device_s * hz))


def now():
    return time.time()
