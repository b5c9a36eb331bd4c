"""The daemon side of one executor: a connection, its partition and a compiled model, held
through libipuof-client. Every failing call raises the poptorch error class the daemon
gave, with its sentence.
"""
import json
import os
import sys

from . import _lib
from .errors import Error, from_client

ffi, lib = _lib.ffi, _lib.lib

# Torch dtypes as the library numbers them (ONNX's TensorProto.DataType).
_DTYPES = {"torch.float32": _lib.DTYPE_FLOAT, "torch.uint8": _lib.DTYPE_UINT8,
           "torch.int8": _lib.DTYPE_INT8, "torch.int32": _lib.DTYPE_INT32,
           "torch.int64": _lib.DTYPE_INT64, "torch.bool": _lib.DTYPE_BOOL,
           "torch.float16": _lib.DTYPE_FLOAT16}


def dtype_code(t):
    """The library's dtype for torch tensor t; Error for one the IPU has no type for."""
    code = _DTYPES.get(str(t.dtype))
    if code is None:
        raise Error(f"tensors of {t.dtype} are not supported by ipuofd; use float32, "
                    "float16, int64, int32, int8, uint8 or bool")
    return code


def _env_ms(name, default):
    """The milliseconds in environment variable name (0: no limit), or default; Error for
    a value that is not a whole number of milliseconds."""
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    try:
        ms = int(v)
    except ValueError:
        ms = -1
    if ms < 0 or ms > 2**31 - 1:
        raise Error(f"{name}={v!r} is not a number of milliseconds: expected a whole "
                    "number from 0 (no limit) to 2147483647")
    return ms


class Connection:
    """A client handle connected to the daemon (IPUOF_SERVER, or the default)."""

    def __init__(self, name):
        self.ptr = lib.ipuof_client_new()
        if self.ptr == ffi.NULL:
            raise MemoryError("ipuof_client_new")
        lib.ipuof_client_set_name(self.ptr, name.encode())
        # The connect timeout also paces the library's liveness check: a call that hears
        # nothing for that long asks the daemon, on a second connection, whether it is
        # alive, so a stopped or unreachable daemon is reported after about twice this,
        # not at the end of the request timeout (which bounds a long compile or run).
        connect = _env_ms("IPUOF_CONNECT_TIMEOUT_MS", 5000)
        timeout = _env_ms("IPUOF_REQUEST_TIMEOUT_MS", 600000)
        lib.ipuof_client_set_timeouts(self.ptr, connect, timeout)
        rc = lib.ipuof_client_connect(self.ptr, ffi.NULL)
        if rc != 0:
            exc = from_client(self.ptr, "connect", rc, connected=False)
            self.close()
            raise exc
        self.attached = False

    def fail(self, what, rc):
        """The exception for rc returned by the call described by what."""
        return from_client(self.ptr, what, rc)

    def attach(self, num_ipus, auto_round, wait, wait_timeout_ms, process_id, num_processes):
        o = ffi.new("struct ipuof_attach_opts *")
        o.num_ipus = num_ipus
        o.auto_round = int(auto_round)
        o.wait = int(wait)
        o.wait_timeout_ms = wait_timeout_ms
        o.process_id = process_id
        o.num_processes = num_processes
        rc = lib.ipuof_attach(self.ptr, o, ffi.NULL, 0, ffi.NULL)
        if rc != 0:
            raise self.fail(f"Failed to acquire {num_ipus} IPU(s)", rc)
        self.attached = True

    def detach(self):
        if self.attached and lib.ipuof_partition_name(self.ptr) != ffi.NULL:
            lib.ipuof_detach(self.ptr)
        self.attached = False

    def close(self):
        if self.ptr is not None:
            lib.ipuof_client_free(self.ptr)
            self.ptr = None


class CompiledModel:
    """A model compiled on the daemon; frees itself on the daemon with free()."""

    def __init__(self, conn, ptr, keep):
        self.conn = conn
        self.ptr = ptr
        self._keep = keep  # cffi buffers the model handle may still point into
        self.inputs = [self._info(lib.ipuof_model_input_info, i)
                       for i in range(lib.ipuof_model_input_count(ptr))]
        self.outputs = [self._info(lib.ipuof_model_output_info, i)
                        for i in range(lib.ipuof_model_output_count(ptr))]
        self.cached = bool(lib.ipuof_model_cached(ptr))
        self.compile_us = lib.ipuof_model_compile_us(ptr)
        self._run_inputs = ffi.new("struct ipuof_tensor[]", max(1, len(self.inputs)))
        self._out = ffi.new("struct ipuof_tensor *")

    def memory(self):
        """The memory plan's figures of each IPU the model occupies (docs/memory.md): a
        list of dicts with ipu, weights, activations, code, gradients, optimizer, stash,
        total, capacity and offchip, in bytes; [] from a library without them."""
        if not (_lib.has("ipuof_model_memory") and _lib.has("ipuof_model_memory_detail")):
            return []
        out = []
        for i in range(lib.ipuof_model_ipu_count(self.ptr)):
            ipu = ffi.new("unsigned *")
            v = [ffi.new("uint64_t *") for _ in range(10)]
            rc = lib.ipuof_model_memory(self.ptr, i, ipu, *v[:5])
            if rc == 0:
                rc = lib.ipuof_model_memory_detail(self.ptr, i, *v[5:])
            if rc != 0:
                raise self.conn.fail("memory", rc)
            keys = ("weights", "activations", "code", "total", "capacity", "gradients",
                    "optimizer", "stash", "offchip", "peak_not_always_live")
            out.append(dict(ipu=ipu[0], **{k: x[0] for k, x in zip(keys, v)}))
        return out

    def prediction_report(self, json_form):
        """The compile's prediction of the model's speed (docs/cost-model.md): the text
        report, or the JSON one parsed into a dict; None from a daemon that sent none."""
        if not _lib.has("ipuof_model_prediction_report"):
            return None
        r = lib.ipuof_model_prediction_report(self.ptr, 1 if json_form else 0)
        if r == ffi.NULL:
            return None
        text = _lib.string(r)
        return json.loads(text) if json_form else text

    def _info(self, fn, i):
        t = ffi.new("struct ipuof_tensor *")
        step = ffi.new("int64_t[8]")
        fn(self.ptr, i, t, step)
        return {"name": _lib.string(t.name), "dtype": t.dtype,
                "shape": [t.dims[k] for k in range(t.rank)],
                "step": [step[k] for k in range(8) if step[k] >= 0]}

    def weights(self):
        """[(name, dtype, shape, kind)] of the weights the daemon holds."""
        out = []
        t = ffi.new("struct ipuof_tensor *")
        kind = ffi.new("int *")
        for i in range(lib.ipuof_model_weight_count(self.ptr)):
            lib.ipuof_model_weight_info(self.ptr, i, t, kind)
            out.append((_lib.string(t.name), t.dtype, [t.dims[k] for k in range(t.rank)],
                        kind[0]))
        return out

    def run(self, tensors):
        """Runs one call with the contiguous CPU tensors given in input order; the
        outputs are read with output()."""
        for i, (info, t) in enumerate(zip(self.inputs, tensors)):
            rt = self._run_inputs[i]
            rt.name = ffi.NULL  # matched in order
            rt.dtype = info["dtype"]
            rt.rank = t.dim()
            for k, d in enumerate(t.shape):
                rt.dims[k] = d
            rt.data = ffi.cast("const void *", t.data_ptr())
            rt.bytes = t.numel() * t.element_size()
        rc = lib.ipuof_model_run(self.ptr, self._run_inputs, len(self.inputs))
        if rc != 0:
            raise self.conn.fail("run", rc)

    def output(self, i):
        """(shape, dtype, cffi buffer) of output i of the last run; the buffer is borrowed
        until the next run."""
        rc = lib.ipuof_model_output(self.ptr, i, self._out)
        if rc != 0:
            raise self.conn.fail("output", rc)
        t = self._out
        return ([t.dims[k] for k in range(t.rank)], t.dtype, ffi.buffer(t.data, t.bytes))

    def read_weight(self, name, dst):
        rc = lib.ipuof_model_read_weight(self.ptr, name.encode(),
                                         ffi.cast("void *", dst.data_ptr()),
                                         dst.numel() * dst.element_size())
        if rc != 0:
            raise self.conn.fail(f"copyWeightsToHost ({name})", rc)

    def read_gradient(self, name, dst):
        """The gradient of trained weight name that the last run's last step applied
        (float32 dst of the weight's shape)."""
        rc = lib.ipuof_model_read_gradient(self.ptr, name.encode(),
                                           ffi.cast("void *", dst.data_ptr()),
                                           dst.numel() * dst.element_size())
        if rc != 0:
            raise self.conn.fail(f"Gradient___{name}", rc)

    def write_weight(self, name, src):
        rc = lib.ipuof_model_write_weight(self.ptr, name.encode(),
                                          ffi.cast("const void *", src.data_ptr()),
                                          src.numel() * src.element_size())
        if rc != 0:
            raise self.conn.fail(f"copyWeightsToDevice ({name})", rc)

    def set_optimizer(self, plan, half=None):
        """setOptimizer: the optimizer of plan (optim.Plan) and the float16 parameters half
        ({PARAM: value}, PARAM an IPUOF_OPT_PARAM_* without the prefix, or None: all
        float32), set on a compile options handle through its optimizer setters (which check
        every value) and sent with ipuof_model_set_optimizer_with."""
        if not _lib.has("ipuof_model_set_optimizer_with"):
            raise Error(f"{_lib.path} has no ipuof_model_set_optimizer_with "
                        "(IPUOF_CLIENT_0.11); install the library built with this package")
        co = _CompileOpts()
        plan.apply(co.set)
        for k, v in (half or {}).items():
            co.set("set_optimizer_param", 0, getattr(_lib, "OPT_PARAM_" + k), v)
        rc = lib.ipuof_model_set_optimizer_with(self.ptr, co.ptr)
        if rc != 0:
            raise self.conn.fail("setOptimizer", rc)

    def free(self):
        if self.ptr is not None:
            lib.ipuof_model_free(self.ptr)
            self.ptr = None


class _CompileOpts:
    """A library compile options handle (ipuof_compile_opts): every option through its
    setter, which checks it; a refusal raises Error with the library's sentence."""

    def __init__(self):
        if not _lib.has("ipuof_compile_opts_new"):
            raise Error(f"{_lib.path} has no compile options handle (ipuof_compile_opts_new, "
                        "IPUOF_CLIENT_0.9); install the library built with this package")
        if not _lib.has("ipuof_compile_opts_set_optimizer_param"):
            raise Error(f"{_lib.path} has no optimizer setters on its compile options handle "
                        "(ipuof_compile_opts_set_optimizer_param, IPUOF_CLIENT_0.10); install "
                        "the library built with this package")
        self.ptr = ffi.gc(lib.ipuof_compile_opts_new(), lib.ipuof_compile_opts_free)
        if self.ptr == ffi.NULL:
            raise MemoryError("ipuof_compile_opts_new")

    def set(self, setter, *args):
        """Calls lib.ipuof_compile_opts_<setter>(handle, *args)."""
        rc = getattr(lib, "ipuof_compile_opts_" + setter)(self.ptr, *args)
        if rc != 0:
            raise Error(f"the compile options were refused by libipuof-client "
                        f"({_lib.string(lib.ipuof_status_name(rc))}): "
                        f"{_lib.string(lib.ipuof_compile_opts_errmsg(self.ptr))}", status=rc)
        return self


def _set_placement(co, placement):
    """Applies placement (dict strategy, blocks [(prefix, stage, ipu)], off_chip [kinds])
    to the compile options co."""
    co.set("set_strategy", placement["strategy"])
    for prefix, stage, ipu in placement["blocks"]:
        co.set("add_block", prefix.encode(), stage, ipu)
    for kind in placement["off_chip"]:
        co.set("set_location", _lib.TENSOR_KINDS.index(kind), _lib.LOCATION_OFF_CHIP)


def compile_model(conn, onnx_bytes, name, micro_batch, device_iterations, replicas,
                  output_kinds, training=None, placement=None, clock=None, seed=0):
    """Compiles onnx_bytes on conn's partition. output_kinds: [(name, kind, n)];
    training: None, or dict(loss, optimizer (an optim.Plan: applied through the handle's
    optimizer setters), accumulation, reduction, seed, frozen); placement: None, or as
    _set_placement() takes it; clock: None, or
    (num_io_tiles, synthetic_data, available_memory_proportion, predict_replicas) for the
    prediction; seed: the random ops' seed of an inference model (Options.randomSeed; a
    training model's is training["seed"]). Every option goes through the library's
    compile options handle. Returns a CompiledModel."""
    co = _CompileOpts()
    co.set("set_name", name.encode())
    co.set("set_device_iterations", device_iterations)
    co.set("set_replicas", replicas)
    co.set("set_micro_batch", micro_batch)
    for oname, kind, n in output_kinds:
        co.set("add_output", oname.encode(), kind, n)
    if placement is not None:
        _set_placement(co, placement)
    keep = []
    if training is not None:
        co.set("set_loss", training["loss"].encode())
        training["optimizer"].apply(co.set)     # kind, then parameter by parameter
        co.set("set_gradient_accumulation", training["accumulation"])
        co.set("set_accumulation_reduction", training["reduction"])
        co.set("set_seed", training["seed"])
        for f in training["frozen"]:
            co.set("add_frozen_weight", f.encode())
    else:
        co.set("set_seed", seed)
    if clock is not None and _lib.has("ipuof_client_set_clock_options"):
        rc = lib.ipuof_client_set_clock_options(conn.ptr, *clock)
        if rc != 0:
            raise conn.fail("set the clock's options", rc)
    out = ffi.new("ipuof_model **")
    rc = lib.ipuof_model_compile_with(conn.ptr, ffi.from_buffer(onnx_bytes), len(onnx_bytes),
                                      co.ptr, out)
    if rc != 0:
        raise conn.fail("compile", rc)
    return CompiledModel(conn, out[0], keep)


def program_name():
    """The name shown by `ipuctl status`: the program's file name."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
