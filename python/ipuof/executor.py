"""trainingModel, inferenceModel and the executor they return (PopTorch's PoplarExecutor).

The wrapped module is captured with torch.onnx.export (opset 14, so BatchNormalization
carries training_mode) on one micro-batch of the first call's inputs, compiled by the
daemon through libipuof-client, and then every call sends a whole combined batch
(B x deviceIterations x gradientAccumulation x replicas samples) in one run. Outputs come
back shaped by the output mode, with the structure the module returns.

Weights: the captured graph carries the host module's current weights. A training model
leaves the host copy stale after each call; reading the host module's parameters (an
attribute, state_dict(), parameters()) or building or running an inference model copies
them back first, as PopTorch's implicit copyWeightsToHost does. An inference model takes
its weights from the host module, and again whenever a training model ran since.
"""
import atexit
import contextlib
import inspect
import io
import json
import os
import warnings
import weakref

import torch

from . import _device, _lib, blocks, enums, profiling
from .errors import Error, RecoverableError
from .options import Options

ffi = _lib.ffi

_training_executors = weakref.WeakSet()
_executors = weakref.WeakSet()  # models that ran with profiling: timelines drawn at exit
_generation = [0]       # bumped by every training call: inference models re-upload
_hooked_classes = {}    # original module class -> its weight-syncing subclass


def _sync_host():
    """Copies the weights of every training model whose host copy is stale."""
    for ex in list(_training_executors):
        if ex._host_stale:
            ex.copyWeightsToHost()


def _hooked_class(cls):
    """A subclass of cls whose weight accessors first bring stale weights back from the
    device."""
    h = _hooked_classes.get(cls)
    if h is not None:
        return h

    def __getattr__(self, name):
        _sync_host()
        return cls.__getattr__(self, name)

    def state_dict(self, *args, **kwargs):
        _sync_host()
        return cls.state_dict(self, *args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        _sync_host()
        return cls.named_parameters(self, *args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        _sync_host()
        return cls.named_buffers(self, *args, **kwargs)

    h = type(cls.__name__, (cls,), {
        "__getattr__": __getattr__, "state_dict": state_dict,
        "named_parameters": named_parameters, "named_buffers": named_buffers,
        "_ipuof_original_class": cls, "__module__": cls.__module__,
        "__qualname__": cls.__qualname__})
    _hooked_classes[cls] = h
    return h


_OUTPUT_KINDS = {enums.OutputMode.Default: _lib.OUTPUT_DEFAULT,
                 enums.OutputMode.All: _lib.OUTPUT_ALL,
                 enums.OutputMode.Final: _lib.OUTPUT_FINAL,
                 enums.OutputMode.Sum: _lib.OUTPUT_SUM,
                 enums.OutputMode.EveryN: _lib.OUTPUT_EVERYN}

_TORCH_DTYPES = {_lib.DTYPE_FLOAT: torch.float32, _lib.DTYPE_UINT8: torch.uint8,
                 _lib.DTYPE_INT8: torch.int8, _lib.DTYPE_INT32: torch.int32,
                 _lib.DTYPE_INT64: torch.int64, _lib.DTYPE_BOOL: torch.bool}


def _flatten(out):
    """(list of tensors, template) for a tensor or a (nested) tuple/list of tensors."""
    if isinstance(out, torch.Tensor):
        return [out], None
    if isinstance(out, (tuple, list)):
        flat, tmpl = [], []
        for o in out:
            f, t = _flatten(o)
            tmpl.append((len(f), t))
            flat.extend(f)
        return flat, (type(out), tmpl)
    raise Error(f"the model returns a {type(out).__name__}; poptorch models return "
                "tensors, or tuples or lists of tensors")


def _unflatten(flat, tmpl):
    """Rebuilds the structure _flatten() described from flat."""
    if tmpl is None:
        return flat[0]
    kind, parts = tmpl
    out, i = [], 0
    for n, t in parts:
        out.append(_unflatten(flat[i:i + n], t))
        i += n
    return kind(out)


def _optimizer_struct(optimizer):
    """The library's struct ipuof_optimizer for a torch.optim optimizer (or None: SGD with
    lr 0.01, PopTorch's default)."""
    o = ffi.new("struct ipuof_optimizer *")
    if optimizer is None:
        _lib.lib.ipuof_optimizer_init(o, _lib.OPTIMIZER_SGD)
        o.lr = 0.01
        return o
    groups = optimizer.param_groups
    keys = [k for k in groups[0] if k != "params"]
    for g in groups[1:]:
        if any(g.get(k) != groups[0].get(k) for k in keys):
            raise Error("optimizer parameter groups with different hyper-parameters are not "
                        "supported by ipuofd: one set of hyper-parameters for all weights")
    g = groups[0]
    if g.get("maximize"):
        raise Error("optimizer maximize=True is not supported by ipuofd")
    if isinstance(optimizer, torch.optim.SGD):
        _lib.lib.ipuof_optimizer_init(o, _lib.OPTIMIZER_SGD)
        o.momentum = g.get("momentum", 0.0)
        o.dampening = g.get("dampening", 0.0)
        o.nesterov = int(bool(g.get("nesterov", False)))
    elif isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        if g.get("amsgrad"):
            raise Error("Adam/AdamW with amsgrad=True is not supported by ipuofd")
        kind = _lib.OPTIMIZER_ADAMW if isinstance(optimizer, torch.optim.AdamW) \
            else _lib.OPTIMIZER_ADAM
        _lib.lib.ipuof_optimizer_init(o, kind)
        o.beta1, o.beta2 = g["betas"]
        o.eps = g["eps"]
    else:
        raise Error(f"the optimizer {type(optimizer).__name__} is not supported by ipuofd: "
                    "use torch.optim.SGD, Adam or AdamW (or poptorch.optim's)")
    o.lr = float(g["lr"])
    o.weight_decay = float(g.get("weight_decay", 0.0))
    return o


def _optimizer_key(optimizer):
    """The hyper-parameters as a tuple, to see whether they changed between calls."""
    if optimizer is None:
        return None
    g = optimizer.param_groups[0]
    return tuple(sorted((k, repr(v)) for k, v in g.items() if k != "params"))


def _profiling_dir(options):
    """The directory POPLAR_ENGINE_OPTIONS' autoReport (or Options.enableProfiling) asks
    reports to go to, or None."""
    on, directory = profiling.engine_options()  # the library's rule; Error when broken
    if on:
        return directory
    return options._values.get("profiling_dir")


class PoplarExecutor:
    """A module compiled for (simulated) IPUs. Call it as the module itself."""

    def __init__(self, model, options, training, optimizer=None):
        if not isinstance(model, torch.nn.Module):
            raise Error("poptorch expects a torch.nn.Module")
        options = options if options is not None else Options()
        if not training and options.Training.gradient_accumulation != 1:
            raise Error("gradientAccumulation must be 1 for an inference model (it was "
                        f"{options.Training.gradient_accumulation})")
        self._user_model = model
        self._options = options
        self._training = training
        self._optimizer = optimizer
        self._opt_key = _optimizer_key(optimizer)
        self._conn = None
        self._exe = None
        self._onnx = None
        self._compile_args = None
        self._host_stale = False
        self._trace = None           # the trace file profiling writes, or None
        self._trace_pending = False  # a run wrote it since the last timeline
        self._uploaded_generation = _generation[0]
        self._weights = {}
        self._names = []
        self._template = None
        self._destroyed = False
        self.model = model
        if training:
            _training_executors.add(self)
            for m in model.modules():
                if not hasattr(type(m), "_ipuof_original_class"):
                    m.__class__ = _hooked_class(type(m))

    # ---- capture and compile ----------------------------------------------------------

    def _bind(self, args, kwargs):
        """The call's inputs as [(name, tensor)] in the forward's parameter order."""
        sig = inspect.signature(self._user_model.forward)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise Error(f"the call does not match {type(self._user_model).__name__}."
                        f"forward{sig}: {exc}")
        out = []
        for name, value in bound.arguments.items():
            if value is None:
                break
            if not isinstance(value, torch.Tensor):
                raise Error(f"input '{name}' is a {type(value).__name__}; poptorch models "
                            "take tensors")
            out.append((name, value))
        return out

    def _steps(self):
        o = self._options
        return o.device_iterations * o.Training.gradient_accumulation * \
            (o.replication_factor // o.input_group_size)

    def _micro_batch(self, inputs):
        """B from the first input's batch dimension; PopTorch's error when it is not a
        multiple of the samples per call."""
        o = self._options
        steps = self._steps()
        for name, t in inputs:
            if t.dim() == 0 or t.shape[0] % steps != 0:
                n = t.shape[0] if t.dim() else 0
                raise Error(
                    f"Invalid batch dimension: In the input {name}, the batch dimension "
                    f"({n}) must be a multiple of Options.deviceIterations"
                    f"({o.device_iterations}) * (Options.replicationFactor"
                    f"({o.replication_factor}) / Options.inputReplicaGrouping."
                    f"input_group_size({o.input_group_size})) * Options.Training."
                    f"gradientAccumulation({o.Training.gradient_accumulation}) = {steps} "
                    "because it is used to calculate the batch size which will be executed "
                    "on the device in any given iteration. For a full explanation see the "
                    "batching semantics page of the documentation.")
        return inputs[0][1].shape[0] // steps

    @staticmethod
    def _host_tensor(t):
        if t.dtype == torch.float64:
            t = t.float()
        return t.detach().contiguous()

    def _probe(self, sample):
        """Runs the module once on the host on sample (buffers and RNG restored after) to
        learn its output structure and, when training, which output is the loss."""
        m = self._user_model
        saved = {k: v.detach().clone() for k, v in
                 torch.nn.Module.named_buffers(m)}
        rng = torch.random.get_rng_state()
        was_training = m.training
        m.train(self._training)
        try:
            with torch.enable_grad() if self._training else torch.no_grad():
                out = m(*sample)
        finally:
            m.train(was_training)
            with torch.no_grad():
                for k, v in torch.nn.Module.named_buffers(m):
                    v.copy_(saved[k])
            torch.random.set_rng_state(rng)
        flat, tmpl = _flatten(out)
        loss = None
        if self._training:
            cands = [i for i, t in enumerate(flat) if t.numel() == 1 and t.requires_grad]
            named = [i for i in cands if "loss" in type(flat[i].grad_fn).__name__.lower()]
            if not cands:
                raise Error("a training model must return its loss: forward() returned no "
                            "scalar that depends on trainable weights (return (output, loss) "
                            "or loss)")
            loss = (named or cands)[0]
        return flat, tmpl, loss

    def _export(self, sample, names, n_out):
        m = self._user_model
        was_training = m.training
        m.train(self._training)
        mode = torch.onnx.TrainingMode.TRAINING if self._training \
            else torch.onnx.TrainingMode.EVAL
        f = io.BytesIO()
        rec = blocks._Recorder(m)
        try:
            with rec, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(m, tuple(sample), f, opset_version=14, training=mode,
                                  do_constant_folding=False, input_names=names,
                                  output_names=[f"output{i}" for i in range(n_out)])
        except Error:
            raise
        except Exception as exc:
            raise Error(f"capturing the model with torch.onnx.export failed: {exc}")
        finally:
            m.train(was_training)
        return f.getvalue(), rec

    def _placement(self, rec):
        """(IPUs per replica, placement dict or None) from the strategy, the recorded
        blocks and the tensor locations; Error when they need options the library does
        not have."""
        o = self._options
        strategy = o.execution_strategy
        off_chip = o.TensorLocations.off_chip()
        if not self._training:
            # Inference has no optimizer state or accumulators: PopTorch ignores these
            # locations there (the tutorial clones its training options).
            off_chip = [k for k in off_chip if k not in ("optimizer", "accumulators")]
        blocks_list = []
        if strategy is not None:
            blocks_list = strategy.placement(rec.blocks, rec.order)
        elif rec.order and all(rec.blocks[b]["ipu"] is not None for b in rec.order):
            # Blocks with IPUs and no strategy: PopTorch pipelines them, a stage per IPU.
            blocks_list = blocks.PipelinedExecution().placement(rec.blocks, rec.order)
        ipus = max(p[2] for p in blocks_list) + 1 if blocks_list else 1
        if not (strategy or blocks_list or off_chip):
            return 1, None
        if _lib.PLACEMENT:
            return ipus, {"strategy": strategy.code if strategy else 0,
                          "blocks": blocks_list, "off_chip": off_chip}
        needs = []
        if ipus > 1:
            needs.append(f"placing blocks on {ipus} IPUs")
        if off_chip:
            needs.append("off-chip tensor locations (" + ", ".join(off_chip) + ")")
        if needs:
            raise Error(", ".join(needs) + " is not supported by this libipuof-client yet "
                        f"({_lib.path}): the multi-IPU placement options are not in its API")
        warnings.warn(f"{type(strategy).__name__ if strategy else 'Blocks'}: every block "
                      "is on IPU 0, so the model runs as one stage on one IPU (this "
                      "libipuof-client has no placement options yet)", stacklevel=4)
        return 1, None

    def _attach(self, ipus_per_replica):
        o = self._options
        nproc = o.Distributed.numProcesses
        # A job of several processes attaches its whole partition from each process.
        n = o.replication_factor * ipus_per_replica * nproc
        if n & (n - 1) and not o.auto_round_num_ipus:
            p = 1
            while p < n:
                p <<= 1
            raise Error(f"The model specifies the use of {n} IPUs, however PopTorch must "
                        f"reserve a minimum of {p} in order to allow the model to run, "
                        "because PopTorch must reserve a power of 2 or maximum of 64 IPUs "
                        "per process. Please reconfigure your model to use a different "
                        "number of IPUs or set poptorch.Options().autoRoundNumIPUs(True).")
        self._conn = _device.Connection(_device.program_name())
        wait = bool(os.environ.get("POPTORCH_WAIT_FOR_IPU"))
        self._conn.attach(n, o.auto_round_num_ipus, wait, 0, o.Distributed.processId, nproc)

    def compile(self, *args, **kwargs):
        """Captures and compiles the model for inputs like args (a whole combined batch),
        without running it."""
        if self._destroyed:
            raise Error("this model was destroyed")
        if self._exe is not None or self._onnx is not None:
            return
        o = self._options
        if o.Distributed.numProcesses > 1 and not _lib.JOBS:
            raise Error("distributed execution (Distributed.configureProcessId with "
                        f"{o.Distributed.numProcesses} processes) is not supported by this "
                        "libipuof-client/ipuofd yet: one process per partition only")
        if _profiling_dir(o) is not None and not _lib.PLACEMENT:
            warnings.warn("profiling (POPLAR_ENGINE_OPTIONS autoReport) is not available "
                          "yet: this libipuof-client cannot fetch an execution trace",
                          stacklevel=2)
        _sync_host()
        inputs = self._bind(args, kwargs)
        if not inputs:
            raise Error("the model needs at least one tensor input")
        b = self._micro_batch(inputs)
        self._names = [n for n, _ in inputs]
        sample = [self._host_tensor(t)[:b] for _, t in inputs]
        flat, self._template, loss = self._probe(sample)
        self._sample = sample
        self._onnx, rec = self._export(sample, self._names, len(flat))
        ipus, self._placement_opts = self._placement(rec)
        self._out_names = [f"output{i}" for i in range(len(flat))]
        self._loss = loss
        kind = _OUTPUT_KINDS[o.output_mode]
        n = o.output_return_period if o.output_mode == enums.OutputMode.EveryN else 0
        self._compile_args = dict(
            micro_batch=0, device_iterations=o.device_iterations,
            replicas=o.replication_factor,
            output_kinds=[(nm, kind, n) for nm in self._out_names])
        self._ipus = ipus
        self._weights = dict(torch.nn.Module.state_dict(self._user_model, keep_vars=True))
        o._freeze()
        if o.connection_type == enums.ConnectionType.Always:
            self._compile_on_device()

    def _training_args(self):
        o = self._options
        trainable = set()
        if self._optimizer is not None:
            for g in self._optimizer.param_groups:
                trainable.update(id(p) for p in g["params"])
        frozen = [k for k, v in self._weights.items()
                  if isinstance(v, torch.nn.Parameter) and
                  (not v.requires_grad or (self._optimizer is not None and
                                           id(v) not in trainable))]
        red = _lib.REDUCTION_SUM if o.Training.accumulation_and_replication_reduction_type \
            == enums.ReductionType.Sum else _lib.REDUCTION_MEAN
        seed = o.random_seed if o.random_seed is not None else 0
        return dict(loss=self._out_names[self._loss],
                    optimizer=_optimizer_struct(self._optimizer),
                    accumulation=o.Training.gradient_accumulation, reduction=red,
                    seed=seed, frozen=frozen)

    def _recapture(self):
        """An inference model's weights are constants of its graph: after the host's
        weights changed, the graph is captured again and compiled on the same partition."""
        _sync_host()
        self._onnx, _ = self._export(self._sample, self._names, len(self._out_names))
        if self._exe is not None:
            self._exe.free()
            self._exe = None
            self._compile_on_device(attach=False)

    def _compile_on_device(self, attach=True):
        if self._options.connection_type == enums.ConnectionType.Never:
            raise Error("this model was compiled with connectionType(ConnectionType.Never): "
                        "it cannot be run; use ConnectionType.Always or OnDemand")
        if attach:
            self._attach(self._ipus)
        name = "training" if self._training else "inference"
        # Options.enableProfiling(dir) as the environment switch the library reads.
        prof = self._options._values.get("profiling_dir")
        saved = os.environ.get("POPLAR_ENGINE_OPTIONS")
        if prof and saved is None:
            os.environ["POPLAR_ENGINE_OPTIONS"] = json.dumps(
                {"autoReport.all": "true", "autoReport.directory": prof})
        try:
            self._trace = profiling.trace_path(name)
            self._exe = _device.compile_model(
                self._conn, self._onnx, name,
                training=self._training_args() if self._training else None,
                placement=self._placement_opts, **self._compile_args)
        except BaseException:
            self._release()
            raise
        finally:
            if prof and saved is None:
                del os.environ["POPLAR_ENGINE_OPTIONS"]
        known = set(self._names)
        for info in self._exe.inputs:
            if info["name"] not in known:
                self._release()
                raise Error(f"the compiled model wants an input '{info['name']}' the call "
                            "does not give")
        self._order = [self._names.index(i["name"]) for i in self._exe.inputs]
        self._uploaded_generation = _generation[0]

    # ---- running --------------------------------------------------------------------------

    def _expand_groups(self, t):
        """Input t of [D*A*(R/g)*B, ...] as [D*A*R*B, ...] (replicas of one input group get
        the same micro-batch)."""
        o = self._options
        g = o.input_group_size
        if g == 1:
            return t
        r = o.replication_factor
        steps = o.device_iterations * o.Training.gradient_accumulation
        v = t.reshape(steps, r // g, -1, *t.shape[1:])
        if o.input_cgt == enums.CommGroupType.Orthogonal:
            v = v.repeat(1, g, *([1] * (v.dim() - 2)))
        else:
            v = v.repeat_interleave(g, dim=1)
        return v.reshape(-1, *t.shape[1:]).contiguous()

    def __call__(self, *args, **kwargs):
        if self._destroyed:
            raise Error("this model was destroyed")
        if self._onnx is None:
            self.compile(*args, **kwargs)
        if self._exe is None:
            self._compile_on_device()
        if self._training:
            key = _optimizer_key(self._optimizer)
            if key != self._opt_key:
                self.setOptimizer(self._optimizer)
        elif self._uploaded_generation != _generation[0]:
            self._recapture()
        inputs = self._bind(args, kwargs)
        if [n for n, _ in inputs] != self._names:
            raise Error(f"the model was compiled for the inputs {self._names}, not "
                        f"{[n for n, _ in inputs]}")
        self._micro_batch(inputs)
        tensors = [self._expand_groups(self._host_tensor(inputs[i][1])) for i in self._order]
        try:
            self._exe.run(tensors)
        except RecoverableError as exc:
            # The partition is gone (reset, shutdown): the model can only be freed. The
            # host keeps the weights of the last copy; attachToDevice() starts again.
            if exc.recovery_action in ("REATTACH", "RETRY", "PARTITION_RESET", "IPU_RESET"):
                self._release()
            raise
        flat = []
        for i in range(len(self._exe.outputs)):
            shape, dtype, buf = self._exe.output(i)
            t = torch.frombuffer(bytearray(buf), dtype=_TORCH_DTYPES[dtype]).reshape(shape) \
                if len(buf) else torch.empty(shape, dtype=_TORCH_DTYPES[dtype])
            if not self._exe.outputs[i]["step"] and t.numel() == 1:
                t = t.reshape(())
            flat.append(t)
        if self._training:
            self._host_stale = True
            _generation[0] += 1
        if self._trace:
            self._trace_pending = True
            _executors.add(self)
        return _unflatten(flat, self._template)

    # ---- weights, optimizer, device ----------------------------------------------------

    def copyWeightsToHost(self):
        """Copies the device's weights (and BatchNorm statistics) into the host module."""
        if self._exe is None:
            return
        self._host_stale = False
        with torch.no_grad():
            for name, _dtype, _shape, _kind in self._exe.weights():
                t = self._weights.get(name)
                if t is None:
                    continue
                buf = torch.empty_like(t.data, memory_format=torch.contiguous_format)
                self._exe.read_weight(name, buf)
                t.data.copy_(buf)

    def copyWeightsToHostIfNeeded(self):
        if self._host_stale:
            self.copyWeightsToHost()

    def copyWeightsToDevice(self):
        """Copies the host module's weights to the device."""
        if self._exe is None:
            return
        if not self._training:
            self._recapture()
            return
        with torch.no_grad():
            for name, _dtype, _shape, _kind in self._exe.weights():
                t = self._weights.get(name)
                if t is not None:
                    self._exe.write_weight(name, t.detach().contiguous())
        self._uploaded_generation = _generation[0]

    def setOptimizer(self, optimizer):
        """New hyper-parameters (same kind of optimizer), applied without recompiling."""
        if not self._training:
            raise Error("setOptimizer is only meaningful for a training model")
        self._optimizer = optimizer
        self._opt_key = _optimizer_key(optimizer)
        if self._exe is not None:
            self._exe.set_optimizer(_optimizer_struct(optimizer))

    def isCompiled(self):
        return self._exe is not None

    def isAttachedToDevice(self):
        return self._exe is not None

    def detachFromDevice(self):
        """Returns the IPUs to the daemon's pool; the host keeps the weights (the
        optimizer's state is lost). attachToDevice() compiles again."""
        if self._exe is None:
            raise Error("Device is not attached")
        if self._training:
            self.copyWeightsToHostIfNeeded()
        self._release()

    def attachToDevice(self):
        """Attaches again after detachFromDevice(), with the host's weights."""
        if self._exe is not None:
            raise Error("Already attached to a device")
        if self._onnx is None:
            raise Error("the model has not been compiled yet: call it or compile() first")
        self._compile_on_device()
        self.copyWeightsToDevice()

    def _draw_timeline(self):
        """Draws the last run's trace as an SVG beside it, once for all the runs since the
        last drawing (a warning says why when it cannot)."""
        if not self.__dict__.get("_trace_pending"):
            return
        self._trace_pending = False
        why = profiling.render_timeline(self._trace)
        if why is not None:
            warnings.warn(f"profiling: no SVG timeline: {why}", stacklevel=3)

    def _release(self):
        self._draw_timeline()
        if self._exe is not None:
            self._exe.free()
            self._exe = None
        if self._conn is not None:
            self._conn.detach()
            self._conn.close()
            self._conn = None

    def destroy(self):
        """Frees the model on the daemon and the IPUs, after copying trained weights back;
        the host module gets its own class back."""
        if self._destroyed:
            return
        with contextlib.suppress(Error):
            self.copyWeightsToHostIfNeeded()
        self._release()
        self._destroyed = True
        _training_executors.discard(self)
        if self._training and not any(True for _ in _training_executors):
            for m in self._user_model.modules():
                orig = getattr(type(m), "_ipuof_original_class", None)
                if orig is not None:
                    m.__class__ = orig

    def __del__(self):
        try:
            self._release()
        except Exception:
            pass

    def __getattr__(self, name):
        # Attributes of the wrapped module, as PopTorch's wrapper forwards them.
        model = self.__dict__.get("_user_model")
        if name.startswith("_") or model is None:
            raise AttributeError(name)
        return getattr(model, name)

    def __repr__(self):
        return f"{'training' if self._training else 'inference'}Model(" + \
            repr(self._user_model) + ")"


@atexit.register
def _draw_timelines_at_exit():
    for ex in list(_executors):
        ex._draw_timeline()


def trainingModel(model, options=None, optimizer=None):
    """PopTorch's trainingModel: model's forward returns its loss, or (output, loss)."""
    return PoplarExecutor(model, options, True, optimizer)


def inferenceModel(model, options=None):
    """PopTorch's inferenceModel: model runs in eval() semantics with the host's weights."""
    return PoplarExecutor(model, options, False)
