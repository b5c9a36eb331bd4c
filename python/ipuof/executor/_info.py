"""The part of PoplarExecutor that tells what the compiled model holds and did: tensor
names and anchored tensors (executor/_anchors.py), the simulated clock's perf counters, latencies
and cycle count (executor/_introspect.py), the generators' state, and the buffers
copyNamedBuffersToDevice updates, and saving and loading the compiled model (executor/_persist.py)."""
import torch

from . import _anchors, _introspect, _persist
from ..optim import _state as _optim_state
from .. import _popart_ir, capture
from ..errors import Error


class ExecutorInfo:
    """Mixed into PoplarExecutor, whose attributes these methods read."""

    def _read_anchors(self, flat):
        """Keeps the anchored tensors' values of the run just made."""
        if not self._anchors:
            return
        index = {o["name"]: i for i, o in enumerate(self._exe.outputs)}
        values = {}
        for a in self._anchors:
            if a.kind == "value":
                values[a.short] = flat[index[a.long]]
                continue
            if a.kind == "state":     # finalLossScale
                values[a.short] = _optim_state.read_scalar(self._exe,
                                                           "optimizer:final_loss_scale")
                continue
            t = self._weights[a.long]
            if a.kind == "gradient":
                buf = torch.empty(t.shape, dtype=torch.float32)
                self._exe.read_gradient(a.long, buf)
                values[a.short] = buf.to(t.dtype)
            elif self._training:
                buf = torch.empty(t.shape, dtype=torch.float32 if t.dtype in capture.WIDENED
                                  else t.dtype)
                self._exe.read_weight(a.long, buf)
                values[a.short] = buf.to(t.dtype)
            else:
                values[a.short] = t.detach().clone()
        self._anchor_values = values

    def getTensorNames(self):
        """The names of the compiled graph's tensors (inputs, node outputs, weights and,
        when training, UpdatedVar___<weight>); Options.anchorTensor takes them."""
        assert self._onnx is not None, "the model must be compiled first"
        return _anchors.tensor_names(self._onnx, self._training, self._trainable())

    def _debugGetPopartIR(self):
        """The compiled graph as PopART's IR JSON ({"maingraph": [op, ...]}): its ops with
        their PopART names, inputs, outputs and attributes (IPU, pipeline stage or phase,
        checkpoints, partials type), and the optimizer's update ops per trained weight
        (_popart_ir)."""
        if self._onnx is None:
            raise Error("_debugGetPopartIR: compile the model first (model.compile(...) or "
                        "a first call)")
        return _popart_ir.ir_json(self)

    def getAnchoredTensor(self, short_name):
        """The last run's value of the tensor anchored as short_name."""
        if not any(a.short == short_name for a in self._anchors):
            raise Error(f"getAnchoredTensor: no tensor is anchored as '{short_name}' "
                        "(Options.anchorTensor(short_name, long_name) before compiling)")
        if short_name not in self._anchor_values:
            raise Error(f"getAnchoredTensor('{short_name}'): the model has not run yet")
        return self._anchor_values[short_name]

    def ipuofPrediction(self):
        """ipuofd's prediction of this model's speed on IPUs, from its compile alone (no
        run; docs/cost-model.md): a dict with samples_per_s (all replicas), step_seconds
        (one call: deviceIterations x the micro-batches of each), parts (that step's
        compute, exchange, sync, host_io and collectives seconds on the bottleneck IPU),
        pct_peak, op_class, layer, ipu_type and clock_hz. Not PopTorch's: getPerfCounters()
        keeps PopTorch's meaning."""
        if self._exe is None:
            raise Error("ipuofPrediction: compile the model first (model.compile(...) or "
                        "a first call)")
        p = self._exe.prediction_report(True)
        if p is None:
            raise Error("ipuofPrediction: the daemon sent no prediction (an ipuofd older "
                        "than the prediction)")
        return p

    def ipuofPredictionReport(self):
        """ipuofPrediction() as the text report a person reads."""
        if self._exe is None:
            raise Error("ipuofPredictionReport: compile the model first")
        p = self._exe.prediction_report(False)
        if p is None:
            raise Error("ipuofPredictionReport: the daemon sent no prediction")
        return p

    def getPerfCounters(self):
        """Timestamps of each step's input and output transfers in the last run, on the
        simulated clock (_introspect.perf_counters)."""
        return _introspect.perf_counters(self)

    def getHostIpuLatency(self):
        return _introspect.latencies(self)[0]

    def getComputeLatency(self):
        return _introspect.latencies(self)[1]

    def getIpuHostLatency(self):
        return _introspect.latencies(self)[2]

    def getLatency(self):
        """(min, max, average) seconds from a step's input to its output."""
        return _introspect.latencies(self)[3]

    def cycleCount(self):
        """The last run's IPU cycles on the simulated clock (Options.logCycleCount)."""
        return _introspect.cycle_count(self)

    @property
    def rng_state(self):
        """[seed, device steps drawn since it]: the daemon's Dropout generators start from
        Options.randomSeed (0 when unset) and advance one draw set per step."""
        if self._onnx is None:
            raise Error("rng_state: the model has not been compiled yet")
        seed = self._options.random_seed
        return [seed if seed is not None else 0, self._steps_run]

    @rng_state.setter
    def rng_state(self, state):
        if list(state) != self.rng_state:
            raise Error(f"rng_state = {list(state)!r}: ipuofd's generators cannot be set to "
                        "another state; they start from Options.randomSeed when the model "
                        f"is compiled (now {self.rng_state!r})")

    def copyNamedBuffersToDevice(self):
        """Copies the host values of the buffers named by Options.updatableNamedBuffers
        to the device; the other buffers keep the device's values."""
        names = self._options._values.get("updatable_named_buffers")
        if not names:
            raise Error("copyNamedBuffersToDevice: no buffer is updatable: name them with "
                        "Options.updatableNamedBuffers([...]) before compiling")
        if self._onnx is None:
            return
        buffers = dict(torch.nn.Module.named_buffers(self._user_model))
        if self._training:
            held = {w[0] for w in self._exe.weights()} if self._exe is not None else set()
            for name in names:
                if name not in held:
                    raise Error(f"copyNamedBuffersToDevice: the buffer '{name}' is a "
                                "constant of the compiled training graph, not a tensor the "
                                "device holds")
                v = buffers[name].detach()
                self._exe.write_weight(name, (v.float() if v.dtype in capture.WIDENED
                                              else v).contiguous())
            return
        saved = {}
        with torch.no_grad():
            for name, t in buffers.items():
                if name not in names and name in self._device_buffers:
                    saved[name] = t.clone()
                    t.copy_(self._device_buffers[name])
            try:
                self._recapture()
            finally:
                for name, v in saved.items():
                    buffers[name].copy_(v)
        for name in names:
            self._device_buffers[name] = buffers[name].detach().clone()

    def _check_buffer_names(self):
        """Error for a name of Options.updatableNamedBuffers the module has no buffer
        called."""
        names = self._options._values.get("updatable_named_buffers") or []
        buffers = dict(torch.nn.Module.named_buffers(self._user_model))
        for name in names:
            if name not in buffers:
                raise Error(f"Options.updatableNamedBuffers: the model has no buffer "
                            f"'{name}'; its buffers are: {', '.join(buffers) or 'none'}")
        self._device_buffers = {k: v.detach().clone() for k, v in buffers.items()}

    def save(self, filename, export_model=True, save_rng_state=True):
        """Writes the compiled model to filename (poptorch.load reads it); with
        export_model the torch module and optimizer too."""
        _persist.save(self, filename, export_model)

    def compileAndExport(self, filename, *args, export_model=True, **kwargs):
        """Compiles the model for inputs like args/kwargs and saves it to filename."""
        self.compile(*args, **kwargs)
        _persist.save(self, filename, export_model)

    def loadExecutable(self, filename):
        """Takes the compiled model in filename (saved with or without the module) instead
        of capturing this one."""
        if self._onnx is not None:
            raise Error("loadExecutable: this model is already compiled")
        _persist.install(self, _persist._read(filename))
