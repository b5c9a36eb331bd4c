"""The part of PoplarExecutor that moves weights between the host module and the device:
copyWeightsToHost / copyWeightsToDevice, load_state_dict, BatchNorm's num_batches_tracked
counted on the host, and inputs the model changes in place copied back."""
import warnings

import torch

from . import _hostsync
from .. import capture


class ExecutorWeights:
    """Mixed into PoplarExecutor, whose attributes these methods read."""

    def _count_batches(self):
        """BatchNorm's num_batches_tracked is not part of the ONNX graph: the host counts
        the run's forward passes (deviceIterations x gradientAccumulation), as torch's
        calls would have: of the norms the capture ran in training mode (_graph._set_modes:
        each module's own flag under a root in training mode; all under a root in eval()),
        not of one put in eval(), whose statistics stay as they are."""
        o = self._options
        steps = o.device_iterations * o.Training.gradient_accumulation
        root = self._user_model
        with torch.no_grad():
            for m in root.modules():
                if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and \
                        m.track_running_stats and (m.training or not root.training):
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

    def _buffers_to_host(self):
        """The buffers forward() changes, as the device left them (replica 0's), into the
        host module after an inference run, as torch's calls would have left them (a
        training model's come back with its weights, copyWeightsToHost)."""
        with torch.no_grad():
            for name in self._record.buffers:
                t = self._weights.get(name)
                if t is not None:
                    buf = torch.empty(t.shape, dtype=t.dtype)
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
        self._uploaded_generation = _hostsync.generation[0]

    def load_state_dict(self, state_dict, strict=True):
        """Loads state_dict into the host module and, as PopTorch's wrapper does, onto the
        device: a model on the device gets the weights copied there, a compiled one not
        yet on the device is captured again with them. Returns the module's result
        (missing and unexpected keys)."""
        _hostsync.sync()
        result = self._user_model.load_state_dict(state_dict, strict)
        self._host_stale = False
        _hostsync.generation[0] += 1  # other models of the same module take the new weights too
        if self._exe is not None:
            self.copyWeightsToDevice()
        elif self._onnx is not None:
            self._onnx, _ = self._export_graph(self._call, self._sample, self._record)
        return result
