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
import json
import logging
import os
import warnings
import weakref

import torch

from . import (_anchors, _info as _executor_info, _weights as _executor_weights, _hostsync,
               _introspect, _persist)
from .. import (_device, _graph, _lib, _placement, _popart_ir, _popart_options, _recompute,
                blocks, capture, enums, optim, profiling)
from ..export import extra as symbolics_extra
from .._logging import logger
from ..errors import Error, RecoverableError
from ..options import Options

ffi = _lib.ffi

_executors = weakref.WeakSet()  # models that ran with profiling: timelines drawn at exit


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


class OfflineError(Error, AssertionError):
    """Running a model compiled for an offline IPU target (ConnectionType.Never): a
    poptorch.Error, and the AssertionError PopTorch raises there."""


class PoplarExecutor(_executor_info.ExecutorInfo, _executor_weights.ExecutorWeights):
    """A module compiled for (simulated) IPUs. Call it as the module itself."""

    def __init__(self, model, options, training, optimizer=None):
        if isinstance(model, PoplarExecutor):
            # PopTorch's inferenceModel(training_model): the same module, and its options
            # (a copy) unless others are given.
            if options is None:
                options = model._options.clone()
            model = model._user_model
        if not isinstance(model, torch.nn.Module):
            raise Error("poptorch expects a torch.nn.Module")
        if options is not None:
            if not isinstance(options, Options):
                raise Error(f"Invalid type: 'options' is of type {type(options)} "
                            "(Expected poptorch.Options)")
            # PopTorch's rule: the caller's options are frozen (a change after a model
            # took them raises) and the model keeps its own copy.
            options._freeze()
            options = options.clone()
        else:
            options = Options()
        if options.output_mode == enums.OutputMode.Default:
            # All results in inference, the last one in training (PopTorch's default).
            options.outputMode(enums.OutputMode.Final if training else enums.OutputMode.All)
        options._freeze()
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
        self._uploaded_generation = _hostsync.generation[0]
        self._weights = {}
        self._anchors = []           # Options.anchorTensor's (_anchors.Anchor)
        self._anchor_values = {}     # short name -> the last run's value
        self._clock = _introspect.RunClock()
        self._steps_run = 0          # device steps since the generators were seeded
        self._device_buffers = {}    # buffer values the device computes with (inference)
        self._names = []
        self._template = None
        self._destroyed = False
        self.model = model
        if training:
            _hostsync.hook(self, model)

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

    def _float_outputs(self, record):
        """The graph outputs of a float16 model that stay float on the device even when
        float16 (narrowed on the host): a training model's loss (the optimizer's loss is
        float) and outputs summed over the run (the daemon sums float, not float16)."""
        if self._options.output_mode == enums.OutputMode.Sum:
            return [f"output{i}" for i in range(record.n_graph())]
        return [f"output{record.loss}"] if self._training and record.loss is not None \
            else []

    def _revive(self):
        """After destroy(), the next call or compile() starts again: a new capture and a
        new compile (PopTorch's rule, used to change a model's inputs)."""
        self._destroyed = False
        self._onnx = None
        self._exe = None
        if self._training:
            _hostsync.hook(self, self._user_model)

    def compile(self, *args, **kwargs):
        """Captures and compiles the model for inputs like args (a whole combined batch),
        without running it."""
        # Under torch.inference_mode() the capture's copies of the inputs would be
        # inference tensors, which keep no version counter (the capture reads it to find
        # inputs the model changes in place).
        with torch.inference_mode(False):
            self._compile(args, kwargs)

    def _compile(self, args, kwargs):
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
        _hostsync.sync()
        if logger.isEnabledFor(logging.DEBUG):     # what PopTorch's backend logs as it reads
            _popart_options.log_options(o.toDict())
        call = self._bind(args, kwargs)
        if any(isinstance(t, torch.Tensor) and t.requires_grad for t in call.leaves):
            # The device computes no gradient for the inputs (PopTorch's warning).
            logger.warning("Input tensor has requires_grad=True set. This tensor will be "
                           "detached because backward pass via inputs is not supported.")
        inputs = list(zip(call.names, call.leaves))
        micro = self._micro_batch(inputs)
        self._names = list(call.names)
        self._call = call
        sample = [(self._host_tensor(t)[:b] if b is not None else self._host_tensor(t)).clone()
                  for t, b in zip(call.leaves, micro)]
        # A float16 model (or float16 inputs) is captured in float32, then typed float16
        # tensor by tensor as torch computes it (capture.type_float16).
        self._half = capture.widened_half(self._user_model, call.leaves)
        self._half_inputs = {n for n, t in zip(call.names, call.leaves)
                             if t.dtype == torch.float16}
        self._half_state = {n for n, t in torch.nn.Module.state_dict(
            self._user_model, keep_vars=True).items() if t.dtype == torch.float16}
        record = _graph.probe(self._user_model, self._training, call, sample,
                              o.replication_factor, o.broadcast_buffers)
        self._sample = sample
        self._record = record
        call.forget_values()  # keep no reference to the caller's tensors
        self._weights = dict(torch.nn.Module.state_dict(self._user_model, keep_vars=True))
        self._check_buffer_names()
        self._onnx, rec = self._export_graph(call, sample, record)
        profiling.export_proto(self._onnx)
        if self._training:
            o.Training._default_strategy(self._optimizer)
        ipus, self._placement_opts = _placement.placement(o, self._training, rec)
        self._blocks_record = rec.blocks
        self._out_names = [f"output{i}" for i in range(record.n_graph())]
        self._loss = record.loss
        kind = _OUTPUT_KINDS[o.output_mode]
        n = o.output_return_period if o.output_mode == enums.OutputMode.EveryN else 0
        # An input changed in place comes back whole, to be copied into the caller's.
        # A buffer forward() changes is written back on the device (BufferUpdate); its
        # output only keeps that node: the last value comes back (Final).
        kinds = [kind] * record.n_out + [_lib.OUTPUT_ALL] * len(record.mutated) + \
            [kind] * int(record.hidden_loss) + [_lib.OUTPUT_ALL] * len(record.prints) + \
            [_lib.OUTPUT_FINAL] * len(record.buffers)
        self._compile_args = dict(
            micro_batch=0, device_iterations=o.device_iterations,
            replicas=o.replication_factor,
            output_kinds=[(nm, k, n if k == kind else 0)
                          for nm, k in zip(self._out_names, kinds)])
        for a in self._anchors:
            if a.kind == "value" and a.long not in self._out_names:
                k = _OUTPUT_KINDS[a.mode]
                self._compile_args["output_kinds"].append(
                    (a.long, k, a.period if a.mode == enums.OutputMode.EveryN else 0))
        self._ipus = ipus
        o._freeze()
        _popart_ir.log_lowering(self)   # PopTorch's DEBUG lines of the graph and placement
        if o.connection_type == enums.ConnectionType.Always and record.n_graph() > 0:
            self._compile_on_device()

    def _export_graph(self, call, sample, record):
        """The ONNX bytes of the module (with the anchored tensors as extra outputs) and
        the blocks recorder."""
        half = None
        record.narrowed = []
        if self._half:
            half = (self._half_inputs, self._half_state, self._float_outputs(record),
                    bool(self._options.Precision.stochastic_rounding),
                    self._options.Precision.partials_type == torch.float16)
        # PopART's groupNormStridedChannelGrouping changes what GroupNorm computes
        strided = self._options._Popart.options.get("groupNormStridedChannelGrouping")
        with symbolics_extra.strided_group_norm(strided):
            onnx_bytes, rec = _graph.export(self._user_model, self._training, call,
                                            sample, record, half)
        onnx_bytes = _recompute.annotate(onnx_bytes, self._options, self._training)
        onnx_bytes, self._anchors = _anchors.plan(
            self._options, self._training, onnx_bytes, self._trainable(), self._steps())
        return onnx_bytes, rec

    def _frozen(self):
        """The names of the parameters and buffers a training model does not update by
        gradient: a buffer torch's optimizer never sees (a normalisation's mean and std,
        as eight-bit input uses) is frozen too, else the daemon trained it as a weight;
        the buffers forward() changes in place stay the daemon's to carry."""
        trainable = set()
        if self._optimizer is not None:
            for g in self._optimizer.param_groups:
                trainable.update(id(p) for p in g["params"])
        no_grad = set(getattr(self._record, "no_grad", ()))  # detached or unused
        carried = set(getattr(self._record, "buffers", ()) or ())
        return [k for k, v in self._weights.items()
                if (not isinstance(v, torch.nn.Parameter) and k not in carried) or
                (isinstance(v, torch.nn.Parameter) and
                 (not v.requires_grad or k in no_grad or
                  (self._optimizer is not None and id(v) not in trainable)))]

    def _trainable(self):
        """The names of the weights a training model updates (empty for inference)."""
        if not self._training:
            return set()
        frozen = set(self._frozen())
        return {k for k, v in self._weights.items()
                if isinstance(v, torch.nn.Parameter) and k not in frozen}

    def _training_args(self):
        o = self._options
        inits = set(_anchors.graph_names(self._onnx)[1])
        frozen = [k for k in self._frozen() if k in inits]  # the daemon knows the graph's
        red = _lib.REDUCTION_SUM if o.Training.accumulation_and_replication_reduction_type \
            == enums.ReductionType.Sum else _lib.REDUCTION_MEAN
        seed = o.random_seed if o.random_seed is not None else 0
        return dict(loss=self._out_names[self._loss],
                    optimizer=optim.plan(self._optimizer, self),
                    accumulation=o.Training.gradient_accumulation, reduction=red,
                    seed=seed, frozen=frozen)

    def _recapture(self):
        """An inference model's weights are constants of its graph: after the host's
        weights changed, the graph is captured again and compiled on the same partition."""
        _hostsync.sync()
        self._onnx, _ = self._export_graph(self._call, self._sample, self._record)
        if self._exe is not None:
            self._exe.free()
            self._exe = None
            self._compile_on_device(attach=False)

    def _clock_args(self):
        """The simulated clock's inputs from the options: numIOTiles, synthetic data, the
        smallest available memory proportion given, and the replicas to predict for."""
        o = self._options
        amps = [v for v in (o._values.get("available_memory_proportion") or {}).values()
                if isinstance(v, (int, float))]
        synthetic = o._Popart.options.get("syntheticDataMode", 0) != 0
        return (int(o.TensorLocations._values.get("numIOTiles") or 0), 1 if synthetic else 0,
                float(min(amps)) if amps else 0.0,
                int(o._values.get("ipuof_predict_replicas") or 0))

    def _compile_on_device(self, attach=True):
        if self._options.connection_type == enums.ConnectionType.Never:
            raise OfflineError("Trying to run a model on an offline device: it was compiled "
                               "with connectionType(ConnectionType.Never) (or "
                               "useOfflineIpuTarget()), so it cannot run; use "
                               "ConnectionType.Always or OnDemand")
        if attach:
            self._conn = _placement.attach(self._options, self._ipus)
        # Options.modelName, else PopTorch's defaults: the profiling report's name.
        name = self._options._values.get("model_name") or \
            ("training" if self._training else "inference")
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
                placement=self._placement_opts, clock=self._clock_args(),
                seed=self._options.random_seed or 0, **self._compile_args)
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
        self._uploaded_generation = _hostsync.generation[0]
        if self._training:
            a = optim.half_settings(self._optimizer, self)
            if a is not None:   # float16 accumulators, loss scaling: before the first step
                self._exe.set_optimizer(optim.plan(self._optimizer, self), a)
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
        if not self._training and self._uploaded_generation != _hostsync.generation[0]:
            self._recapture()  # the host's weights changed (a training model ran)
        if self._exe is None:
            # The first run, or the first after detachFromDevice(): a training model's
            # graph holds the weights of its capture, so the host's are written.
            self._compile_on_device()
            if self._training and self.__dict__.get("_detached"):
                self.copyWeightsToDevice()
            self._detached = False
        if self._training:
            key = optim.key(self._optimizer)
            if key != self._opt_key:
                self.setOptimizer(self._optimizer)
        call = self._bind(args, kwargs)
        leaves = self._call.conform(call)
        inputs = list(zip(self._names, leaves))
        self._micro_batch(inputs)
        tensors = [self._expand_groups(self._wire_tensor(*inputs[i])) for i in self._order]
        start = _introspect.now()
        try:
            self._exe.run(tensors)
        except RecoverableError as exc:
            # The partition is gone (reset, shutdown): the model can only be freed. The
            # host keeps the weights of the last copy; attachToDevice() starts again.
            if exc.recovery_action in ("REATTACH", "RETRY", "PARTITION_RESET", "IPU_RESET"):
                self._release()
            raise
        self._clock.record(start, self._exe)
        if self._options._values.get("log_cycle_count") and \
                self._clock.device_s is not None:
            logger.debug("Total number of IPU cycles: %d", self.cycleCount())
        self._steps_run += self._options.device_iterations * \
            self._options.Training.gradient_accumulation
        flat = []
        for i in range(len(self._exe.outputs)):
            shape, dtype, buf = self._exe.output(i)
            t = torch.frombuffer(bytearray(buf), dtype=_TORCH_DTYPES[dtype]).reshape(shape) \
                if len(buf) else torch.empty(shape, dtype=_TORCH_DTYPES[dtype])
            if not self._exe.outputs[i]["step"] and t.numel() == 1:
                t = t.reshape(())
            flat.append(t)
        rec = self._record
        for i, name in enumerate(self._out_names[:len(flat)]):
            if name in getattr(rec, "narrowed", ()):     # float16 in torch, float on device
                flat[i] = flat[i].half()
        # An output torch gives as float16, bfloat16 or float64 (nansum(dtype=...),
        # .double()) was computed in float32 by the daemon: given back in torch's dtype.
        for i, dt in enumerate(getattr(rec, "out_dtypes", ())[:len(flat)]):
            if dt in capture.WIDENED and flat[i].dtype == torch.float32:
                flat[i] = flat[i].to(dt)
        for k, i in enumerate(rec.mutated):
            self._copy_back(leaves[i], flat[rec.n_out + k], self._names[i])
        first_print = rec.n_graph() - len(rec.prints) - len(rec.buffers)
        for k, title in enumerate(rec.prints):
            t = flat[first_print + k]
            print(f"{title}: {t}" if title else str(t), flush=True)
        self._read_anchors(flat)
        if rec.buffers and not self._training:
            self._buffers_to_host()
        if self._training:
            self._host_stale = True
            _hostsync.generation[0] += 1
            self._count_batches()
        if self._trace:
            self._trace_pending = True
            _executors.add(self)
            profiling.write_report(self._trace)
        return capture.unflatten(rec.out_spec, iter(flat[:rec.n_out]))

    # ---- weights, optimizer, device ----------------------------------------------------

    def setOptimizer(self, optimizer):
        """New hyper-parameters (same kind of optimizer), applied without recompiling."""
        if not self._training:
            raise Error("setOptimizer is only meaningful for a training model")
        tr = self._options.Training
        if self._exe is not None and tr._needs_running(optimizer) and \
                tr.meanAccumulationAndReplicationReductionStrategy != \
                enums.MeanReductionStrategy.Running:
            raise ValueError("setOptimizer: an optimizer with accum_type=torch.float16 needs "
                             "the Running mean reduction strategy, and the model is already "
                             "compiled with "
                             f"{tr.meanAccumulationAndReplicationReductionStrategy.name}: "
                             "give the float16 accum_type before the compile (or keep "
                             "float32)")
        self._optimizer = optimizer
        self._opt_key = optim.key(optimizer)
        optim.bind(optimizer, self)
        if self._exe is not None:
            self._exe.set_optimizer(optim.plan(optimizer, self),
                                    optim.half_settings(optimizer, self))

    def isCompiled(self):
        return self._exe is not None

    @property
    def options(self):
        """The model's own copy of the options it was given (frozen once compiled)."""
        return self._options

    @property
    def _executable(self):
        """PopTorch's private handle, which Lightning reads to know whether the model is
        compiled: the model on the daemon while attached, the compiled graph (ONNX bytes)
        while detached, None before compiling and after destroy()."""
        exe = self.__dict__.get("_exe")
        return exe if exe is not None else self.__dict__.get("_onnx")

    def isAttachedToDevice(self):
        return self._exe is not None

    def detachFromDevice(self):
        """Returns the IPUs to the daemon's pool; the host keeps the weights and the
        optimizer's state. attachToDevice() (or the next call) compiles again and sends
        both back."""
        if self._exe is None:
            raise Error("Device is not attached")
        if self._training:
            self.copyWeightsToHostIfNeeded()
            optim.pull(self)
            self._detached = True
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
        if self._training:
            _hostsync.unhook(self, self._user_model)

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
        # PopTorch's: the wrapped module's repr with its BeginBlock marks.
        return blocks.module_repr(self._user_model)


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


def load(filename, edit_opts_fn=None):
    """poptorch.load: the executor saved in filename, with its module and optimizer;
    edit_opts_fn(options) may change the options first."""
    d = _persist._read(filename)
    if d["model"] is None:
        raise Error(f"poptorch.load: {filename} was saved with export_model=False: it holds "
                    "no module; use poptorch.inferenceModel(model, options)"
                    ".loadExecutable(filename) (or trainingModel) with the module")
    opts = d["options"]
    if edit_opts_fn is not None:
        edit_opts_fn(opts)
    ex = PoplarExecutor(d["model"], opts, d["training"], d["optimizer"])
    _persist.install(ex, d)
    return ex
