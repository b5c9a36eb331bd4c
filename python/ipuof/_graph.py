"""The two host runs of a capture (see capture.py): the probe, which learns the call's
output structure, the inputs it changes in place and the loss, and the export to ONNX. Both
leave no trace on the host (capture.no_side_effects)."""
import io
import warnings

import torch

from . import blocks, capture
from .errors import Error


def probe(m, training, call, sample):
    """Runs module m once on the host on copies of sample, with no side effects on
    the host (capture.no_side_effects), to learn its output structure, the inputs it
    changes in place and, when training, which output is the loss. Returns the
    capture.Probe."""
    record = capture.Probe()
    was_training = m.training
    m.train(training)
    try:
        with capture.no_side_effects(m), \
                torch.enable_grad() if training else torch.no_grad():
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
    if training and record.loss is None:
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


def export(m, training, call, sample, record):
    """The ONNX bytes of the module's call on copies of sample (one micro-batch), and
    the blocks recorder; no side effects on the host."""
    n_out = record.n_graph()
    was_training = m.training
    m.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training \
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
            onnx_bytes = narrow_doubles(
                    capture.fix_initializers(f.getvalue(), snap.changed()))
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


def narrow_doubles(onnx_bytes):
    """onnx_bytes with float64 made float32: Constant values, initializers, Casts to
    double and the declared types. The exporter writes Python scalars (baddbmm's beta and
    alpha, a division by a float) as double constants; the daemon computes in float32, as
    it does a float64 model (widened at capture, see capture.WIDENED)."""
    import onnx
    from onnx import numpy_helper
    D, F = onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT
    model = onnx.load_from_string(onnx_bytes)
    changed = False

    def narrow(t):
        a = numpy_helper.to_array(t).astype("float32")
        t.CopyFrom(numpy_helper.from_array(a, t.name))

    g = model.graph
    for init in g.initializer:
        if init.data_type == D:
            narrow(init)
            changed = True
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == D:
                narrow(a.t)
                changed = True
            elif n.op_type == "Cast" and a.name == "to" and a.i == D:
                a.i = F
                changed = True
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == D:
            v.type.tensor_type.elem_type = F
            changed = True
    return model.SerializeToString() if changed else onnx_bytes
