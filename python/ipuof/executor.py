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

from . import _device, _lib, blocks, capture, enums, optim, profiling
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
                 _lib.DTYPE_INT64: torch.int64, _lib.DTYPE_BOOL: torch.bool,
                 _lib.DTYPE_FLOAT16: torch.float16}


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
            msg = ("You must set poptorch.Options().Training.gradientAccumulation to 1 or "
                   "leave it as its default value (1) when running a "
                   "poptorch.inferenceModel().")
            if isinstance(options._execution_strategy, blocks.PipelinedExecution) and \
                    not isinstance(options._execution_strategy, blocks.ShardedExecution):
                msg += (" Use poptorch.Options().deviceIterations to process a "
                        "sufficient number of batches each run for pipelined execution "
                        "instead.")
            raise Error(msg + f" (it was {options.Training.gradient_accumulation})")
        self._user_model = model
        self._options = options
        self._training = training
        self._optimizer = optimizer
        self._opt_key = optim.key(optimizer)
        if training:
            optim.bind(optimizer, self)  # its state_dict() reads the device's state
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
        """The call's arguments bound to forward's signature (capture.Call)."""
        return capture.Call(self._user_model, args, kwargs)

    def _steps(self):
        o = self._options
        return o.device_iterations * o.Training.gradient_accumulation * \
            (o.replication_factor // o.input_group_size)

    def _micro_batch(self, inputs):
        """Checks every input's batch dimension (PopTorch's error when it is not a multiple
        of the samples per call) and returns the micro-batch of each: the first
        dimension divided by the samples per call. With one sample per call an input is
        taken whole (it needs no batch dimension)."""
        o = self._options
        steps = self._steps()
        if steps == 1:
            return [t.shape[0] if t.dim() else None for _, t in inputs]
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
        return [t.shape[0] // steps for _, t in inputs]

    @staticmethod
    def _host_tensor(t):
        # float16, bfloat16 and float64 travel and compute as float32 (see _half).
        if t.dtype in capture.WIDENED:
            t = t.float()
        return t.detach().contiguous()

    def _wire_tensor(self, name, t):
        """Input t as it travels: as it is when the graph takes input name as float16
        (the call was checked against the compiled dtypes), else as _host_tensor."""
        if name in getattr(self, "_half_inputs", ()) and t.dtype == torch.float16:
            return t.detach().contiguous()
        return self._host_tensor(t)

    def _half_outputs(self, n_out):
        """The graph outputs of a float16 model that travel as float16: every output
        except those summed over the run (the daemon sums float, not float16)."""
        if self._options.output_mode == enums.OutputMode.Sum:
            return ()
        return [f"output{i}" for i in range(n_out)]

    def _probe(self, call, sample):
        """Runs the module once on the host on copies of sample, with no side effects on
        the host (capture.no_side_effects), to learn its output structure, the inputs it
        changes in place and, when training, which output is the loss. Returns the
        capture.Probe."""
        m = self._user_model
        record = capture.Probe()
        was_training = m.training
        m.train(self._training)
        try:
            with capture.no_side_effects(m), \
                    torch.enable_grad() if self._training else torch.no_grad():
                capture.as_float32(m)
                before = capture.buffer_versions(m)
                capture.run_flat(m, call, [t.clone() for t in sample], record)
                changed = capture.changed_buffers(m, before)
        finally:
            m.train(was_training)
        if changed:
            raise Error(f"forward() changes the buffer(s) {', '.join(changed)} in place: "
                        "ipuofd does not keep such changes between device steps yet (only "
                        "BatchNorm's running statistics are updated on the device), so the "
                        "model would compute with stale values; keep the value outside the "
                        "module or compute it on the host")
        if self._training and record.loss is None:
            flat = record.flat
            cands = [i for i, t in enumerate(flat) if t.numel() == 1 and t.requires_grad]
            named = [i for i in cands if "loss" in type(flat[i].grad_fn).__name__.lower()]
            if not cands:
                raise Error("a training model must return its loss: forward() returned no "
                            "scalar that depends on trainable weights (return (output, loss) "
                            "or loss, or mark it with poptorch.identity_loss)")
            record.loss = (named or cands)[0]
        record.flat = None
        return record

    def _export(self, call, sample, record):
        """The ONNX bytes of the module's call on copies of sample (one micro-batch), and
        the blocks recorder; no side effects on the host."""
        m = self._user_model
        n_out = record.n_graph()
        was_training = m.training
        m.train(self._training)
        mode = torch.onnx.TrainingMode.TRAINING if self._training \
            else torch.onnx.TrainingMode.EVAL
        f = io.BytesIO()
        rec = blocks._Recorder(m)
        try:
            with rec, capture.no_side_effects(m) as snap, \
                    capture.flat_forward(m, call, record), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                capture.as_float32(m)
                torch.onnx.export(m, tuple(t.clone() for t in sample), f, opset_version=14,
                                  training=mode, do_constant_folding=False,
                                  input_names=list(call.names),
                                  output_names=[f"output{i}" for i in range(n_out)])
                onnx_bytes = capture.fix_initializers(f.getvalue(), snap.changed())
                if self._half:
                    onnx_bytes = capture.type_float16(
                        onnx_bytes, self._half_inputs,
                        self._half_outputs(n_out) if not self._training else ())
        except Exception as exc:  # noqa: B902 - any failure of the exporter
            failure = exc if isinstance(exc, Error) else \
                Error(f"capturing the model with torch.onnx.export failed: {exc}")
        else:
            failure = None
        finally:
            m.train(was_training)
        if failure is not None:
            # Raised afresh, without the exporter's frames: their arguments are TorchScript
            # values of a graph freed by now, and printing them (as pytest does with a
            # traceback's arguments) crashes the interpreter.
            failure.__traceback__ = None
            failure.__context__ = None
            failure.__cause__ = None
            raise failure
        return onnx_bytes, rec

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

    def _revive(self):
        """After destroy(), the next call or compile() starts again: a new capture and a
        new compile (PopTorch's rule, used to change a model's inputs)."""
        self._destroyed = False
        self._onnx = None
        self._exe = None
        if self._training:
            _training_executors.add(self)
            for m in self._user_model.modules():
                if not hasattr(type(m), "_ipuof_original_class"):
                    m.__class__ = _hooked_class(type(m))

    def compile(self, *args, **kwargs):
        """Captures and compiles the model for inputs like args (a whole combined batch),
        without running it."""
        if self._destroyed:
            self._revive()
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
        call = self._bind(args, kwargs)
        inputs = list(zip(call.names, call.leaves))
        micro = self._micro_batch(inputs)
        self._names = list(call.names)
        self._call = call
        sample = [(self._host_tensor(t)[:b] if b is not None else self._host_tensor(t)).clone()
                  for t, b in zip(call.leaves, micro)]
        # A float16 model (or float16 inputs) is captured and run in float32, its floating
        # outputs given back as float16. Its float16 inputs and (inference) outputs travel
        # as float16 (capture.type_float16).
        self._half = capture.widened_half(self._user_model, call.leaves)
        self._half_inputs = {n for n, t in zip(call.names, call.leaves)
                             if t.dtype == torch.float16}
        record = self._probe(call, sample)
        self._sample = sample
        self._record = record
        call.forget_values()  # keep no reference to the caller's tensors
        self._onnx, rec = self._export(call, sample, record)
        ipus, self._placement_opts = self._placement(rec)
        self._out_names = [f"output{i}" for i in range(record.n_graph())]
        self._loss = record.loss
        kind = _OUTPUT_KINDS[o.output_mode]
        n = o.output_return_period if o.output_mode == enums.OutputMode.EveryN else 0
        # An input changed in place comes back whole, to be copied into the caller's.
        kinds = [kind] * record.n_out + [_lib.OUTPUT_ALL] * len(record.mutated) + \
            [kind] * int(record.hidden_loss) + [_lib.OUTPUT_ALL] * len(record.prints)
        self._compile_args = dict(
            micro_batch=0, device_iterations=o.device_iterations,
            replicas=o.replication_factor,
            output_kinds=[(nm, k, n if k == kind else 0)
                          for nm, k in zip(self._out_names, kinds)])
        self._ipus = ipus
        self._weights = dict(torch.nn.Module.state_dict(self._user_model, keep_vars=True))
        o._freeze()
        if o.connection_type == enums.ConnectionType.Always and record.n_graph() > 0:
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
                    optimizer=optim.to_struct(self._optimizer, self),
                    accumulation=o.Training.gradient_accumulation, reduction=red,
                    seed=seed, frozen=frozen)

    def _recapture(self):
        """An inference model's weights are constants of its graph: after the host's
        weights changed, the graph is captured again and compiled on the same partition."""
        _sync_host()
        self._onnx, _ = self._export(self._call, self._sample, self._record)
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
        if self._training:
            optim.attached(self)  # optimizer state loaded or kept on the host goes up

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
            self._revive()
        if self._onnx is None:
            self.compile(*args, **kwargs)
        if self._record.n_graph() == 0:
            # Nothing comes back and nothing changes: the device has nothing to do.
            self._call.conform(self._bind(args, kwargs))
            return capture.unflatten(self._record.out_spec, iter([]))
        if self._exe is None:
            self._compile_on_device()
        if self._training:
            key = optim.key(self._optimizer)
            if key != self._opt_key:
                self.setOptimizer(self._optimizer)
        elif self._uploaded_generation != _generation[0]:
            self._recapture()
        call = self._bind(args, kwargs)
        leaves = self._call.conform(call)
        inputs = list(zip(self._names, leaves))
        self._micro_batch(inputs)
        tensors = [self._expand_groups(self._wire_tensor(*inputs[i])) for i in self._order]
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
        if self._half:
            flat = [t.half() if t.is_floating_point() else t for t in flat]
        rec = self._record
        for k, i in enumerate(rec.mutated):
            self._copy_back(leaves[i], flat[rec.n_out + k], self._names[i])
        first_print = rec.n_graph() - len(rec.prints)
        for k, title in enumerate(rec.prints):
            t = flat[first_print + k]
            print(f"{title}: {t}" if title else str(t), flush=True)
        if self._training:
            self._host_stale = True
            _generation[0] += 1
            self._count_batches()
        if self._trace:
            self._trace_pending = True
            _executors.add(self)
        return capture.unflatten(rec.out_spec, iter(flat[:rec.n_out]))

    def _count_batches(self):
        """BatchNorm's num_batches_tracked is not part of the ONNX graph: the host counts
        the run's forward passes (deviceIterations x gradientAccumulation), as torch's
        calls would have."""
        o = self._options
        steps = o.device_iterations * o.Training.gradient_accumulation
        with torch.no_grad():
            for m in self._user_model.modules():
                if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and \
                        m.track_running_stats:
                    n = m._buffers.get("num_batches_tracked")
                    if n is not None:
                        n.add_(steps)

    def _copy_back(self, dst, value, name):
        """An input the model changes in place gets the device's value, as torch's call
        would have left it."""
        if value.numel() != dst.numel():
            warnings.warn(f"the model changes its input '{name}' in place, but the device "
                          f"returned {tuple(value.shape)} for its {tuple(dst.shape)}: the "
                          "host's tensor is left as it was", stacklevel=3)
            return
        with torch.no_grad():
            dst.copy_(value.reshape(dst.shape).to(dst.dtype))

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
                dt = torch.float32 if t.dtype in capture.WIDENED else t.dtype
                buf = torch.empty(t.shape, dtype=dt)
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
                    v = t.detach()
                    if v.dtype in capture.WIDENED:
                        v = v.float()
                    self._exe.write_weight(name, v.contiguous())
        self._uploaded_generation = _generation[0]

    def load_state_dict(self, state_dict, strict=True):
        """Loads state_dict into the host module and, as PopTorch's wrapper does, onto the
        device: a model on the device gets the weights copied there, a compiled one not
        yet on the device is captured again with them. Returns the module's result
        (missing and unexpected keys)."""
        _sync_host()
        result = self._user_model.load_state_dict(state_dict, strict)
        self._host_stale = False
        _generation[0] += 1  # other models of the same module take the new weights too
        if self._exe is not None:
            self.copyWeightsToDevice()
        elif self._onnx is not None:
            self._onnx, _ = self._export(self._call, self._sample, self._record)
        return result

    def setOptimizer(self, optimizer):
        """New hyper-parameters (same kind of optimizer), applied without recompiling."""
        if not self._training:
            raise Error("setOptimizer is only meaningful for a training model")
        self._optimizer = optimizer
        self._opt_key = optim.key(optimizer)
        optim.bind(optimizer, self)
        if self._exe is not None:
            self._exe.set_optimizer(optim.to_struct(optimizer, self))

    def isCompiled(self):
        return self._exe is not None

    def isAttachedToDevice(self):
        return self._exe is not None

    def detachFromDevice(self):
        """Returns the IPUs to the daemon's pool; the host keeps the weights and the
        optimizer's state. attachToDevice() compiles again and sends both back."""
        if self._exe is None:
            raise Error("Device is not attached")
        if self._training:
            self.copyWeightsToHostIfNeeded()
            optim.pull(self)
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
        self._onnx = None
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
