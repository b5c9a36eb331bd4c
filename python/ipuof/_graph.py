"""The two host runs of a capture (see capture.py): the probe, which learns the call's
output structure, the inputs it changes in place and the loss, and the export to ONNX. Both
leave no trace on the host (capture.no_side_effects)."""
import io
import warnings

import torch

from . import blocks, capture, poptorch_core
from .errors import Error


def probe(m, training, call, sample, replicas=1, broadcast_buffers=True):
    """Runs module m once on the host on copies of sample, with no side effects on
    the host (capture.no_side_effects), to learn its output structure, the inputs it
    changes in place, the buffers it changes in place (record.buffers: the daemon carries
    them from step to step) and, when training, which output is the loss and which
    parameters it has no gradient for (record.no_grad). Returns the capture.Probe."""
    record = capture.Probe()
    record.no_grad = []
    modes = _set_modes(m, training)
    try:
        with capture.no_side_effects(m), poptorch_core._capturing(), \
                torch.enable_grad() if training else torch.no_grad():
            capture.as_float32(m)
            before = capture.buffer_versions(m)
            copies = [t.clone() for t in sample]
            flat = capture.run_flat(m, call, copies, record)
            record.out_dtypes = _out_dtypes(flat[:record.n_out], copies, call.leaves)
            _check_buffers_kept(m, before)
            record.buffers = capture.changed_buffers(m, before)
            if training:
                _find_loss(record)
                record.no_grad = _without_gradient(m, flat[record.loss])
    finally:
        _restore_modes(modes)
    if record.buffers and replicas > 1 and broadcast_buffers:
        raise Error("PopTorch does not support broadcasting buffers. If your model is able "
                    "to tolerate buffers becoming out of sync between replicas, you can "
                    "disable buffer broadcasting using poptorch.Options.broadcastBuffers"
                    f"(False). (forward() changes the buffer(s) {', '.join(record.buffers)} "
                    "in place; without broadcasting each replica keeps its own)")
    widened = [k for k in record.buffers
               if torch.nn.Module.get_buffer(m, k).dtype in capture.WIDENED]
    if widened:
        raise Error(f"forward() changes the buffer(s) {', '.join(widened)} in place, and "
                    "their dtype (float16, bfloat16 or float64) is computed as float32 by "
                    "ipuofd: such a buffer cannot be carried from step to step yet; keep it "
                    "float32")
    record.flat = None
    return record


def _set_modes(m, training):
    """Puts m in the mode of the capture and returns every module's flag before, for
    _restore_modes. Inference: all in eval(). Training: a model whose root is in training
    mode keeps its submodules' own flags (PopTorch traces the model as it is: a Dropout or
    BatchNorm put in eval() inside a training model stays in eval(), its output the eval
    output, its running statistics unchanged); a root in eval() is put in training mode
    whole, as this package always did."""
    modes = [(mod, mod.training) for mod in m.modules()]
    if not (training and m.training):
        m.train(training)
    return modes


def _restore_modes(modes):
    """Sets each module's training flag back to what _set_modes found."""
    for mod, flag in modes:
        mod.training = flag


def _out_dtypes(outs, copies, leaves):
    """The dtypes torch gives the outputs outs of a host run on copies (the inputs as
    they travel, float16 widened to float32) of the call's leaves: an output that is one
    of the inputs itself (`y.copy_(x)` returns y) has that input's own dtype, which the
    widened run does not show."""
    dtypes = [t.dtype for t in outs]
    for i, t in enumerate(outs):
        for c, leaf in zip(copies, leaves):
            if t is c and isinstance(leaf, torch.Tensor):
                dtypes[i] = leaf.dtype
    return dtypes


def _check_buffers_kept(m, before):
    """PopTorch's errors for a forward() that removes a buffer or assigns another tensor
    to its name (the graph would hold the old one)."""
    now = dict(torch.nn.Module.named_buffers(m))
    for name, (t, _value) in before.items():
        if name not in now:
            raise Error(f"Buffer {name} is removed from the model when calling the forward "
                        "method.")
        if now[name] is not t:
            raise Error(f"Buffer {name} is reassigned within the model when calling the "
                        "forward method. This is not supported. Consider using "
                        f"self.{name}.copy_(src) to copy data from a source tensor, where "
                        "src is the name of the source tensor.")


def _find_loss(record):
    """Sets record.loss when identity_loss did not: the returned scalar that carries
    gradients (one whose autograd node is a loss's first)."""
    if record.loss is not None:
        return
    flat = record.flat
    cands = [i for i, t in enumerate(flat) if t.numel() == 1 and t.requires_grad]
    named = [i for i in cands if "loss" in type(flat[i].grad_fn).__name__.lower()]
    if not cands:
        # No trainable weight reaches any output (a layer in eval() inside a training
        # model, every parameter frozen): PopTorch still finds its loss (every torch loss
        # is an identity loss in its graph) and trains nothing. The one float scalar
        # returned is the loss here; the daemon's backward pass is then empty.
        scalars = [i for i, t in enumerate(flat[:record.n_out])
                   if t.numel() == 1 and t.dtype.is_floating_point]
        if len(scalars) == 1:
            record.loss = scalars[0]
            return
        raise Error("a training model must return its loss: forward() returned no "
                    "scalar that depends on trainable weights (return (output, loss) "
                    "or loss, or mark it with poptorch.identity_loss)")
    record.loss = (named or cands)[0]


def _without_gradient(m, loss):
    """The names of m's trainable parameters the loss has no gradient for (detached, or
    not used): torch's optimizers leave them alone, while the ONNX graph, which has no
    detach, would train them; they are frozen on the device."""
    params = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
    if not params or not loss.requires_grad:
        return [n for n, _ in params]
    try:
        grads = torch.autograd.grad(loss.sum(), [p for _, p in params], allow_unused=True)
    except RuntimeError:
        return []  # a graph torch cannot differentiate here: the daemon decides alone
    return [n for (n, _), g in zip(params, grads) if g is None]


def export(m, training, call, sample, record, half=None):
    """The ONNX bytes of the module's call on copies of sample (one micro-batch), and
    the blocks recorder; no side effects on the host. half, for a float16 model, is
    capture.type_float16's (inputs, state, keep_float, stochastic); record.narrowed is
    then the outputs Cast to float that torch gives as float16."""
    n_out = record.n_graph()
    modes = _set_modes(m, training)
    # PRESERVE: the exporter keeps the modules' flags _set_modes left (TRAINING would
    # put every submodule in training mode again).
    mode = torch.onnx.TrainingMode.PRESERVE if training \
        else torch.onnx.TrainingMode.EVAL
    f = io.BytesIO()
    rec = blocks._Recorder(m)
    try:
        with rec, capture.no_side_effects(m) as snap, poptorch_core._capturing(), \
                capture.flat_forward(m, call, record), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            capture.as_float32(m)
            pre = {k: torch.nn.Module.get_buffer(m, k).detach().clone()
                   for k in record.buffers}
            torch.onnx.export(m, tuple(t.clone() for t in sample), f, opset_version=14,
                              training=mode, do_constant_folding=False,
                              input_names=list(call.names),
                              output_names=[f"output{i}" for i in range(n_out)])
            onnx_bytes = narrow_doubles(
                    capture.fix_initializers(f.getvalue(), snap.changed()))
            onnx_bytes = add_buffer_updates(onnx_bytes, n_out - len(pre), pre)
            check_output_dtypes(onnx_bytes, getattr(record, "out_dtypes", None))
            if half is not None:
                onnx_bytes, record.narrowed = capture.type_float16(onnx_bytes, *half)
            if rec.blocks:
                import onnx
                rec.prune([n.name for n in onnx.load_from_string(onnx_bytes).graph.node])
    except Exception as exc:  # noqa: B902 - any failure of the exporter
        failure = exc if isinstance(exc, Error) else \
            Error(f"capturing the model with torch.onnx.export failed: {exc}")
    else:
        failure = None
    finally:
        _restore_modes(modes)
    if failure is not None:
        # Raised afresh, without the exporter's frames: their arguments are TorchScript
        # values of a graph freed by now, and printing them (as pytest does with a
        # traceback's arguments) crashes the interpreter.
        failure.__traceback__ = None
        failure.__context__ = None
        failure.__cause__ = None
        raise failure
    return onnx_bytes, rec


def add_buffer_updates(onnx_bytes, first, buffers):
    """onnx_bytes with graph outputs first, first + 1, ... (the new values of the buffers
    forward() changes, {state_dict name: value before the call} in that order) each made
    the output of an ai.graphcore::BufferUpdate(buffer, new value) node: the daemon writes
    the value into the buffer after each micro-batch, so the next one reads it (the
    exporter drops in-place changes of buffers). A buffer the graph no longer reads gets
    its initializer back with its value before the call."""
    if not buffers:
        return onnx_bytes
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.load_from_string(onnx_bytes)
    g = model.graph
    inits = {i.name for i in g.initializer}
    for k, (name, before) in enumerate(buffers.items()):
        out = g.output[first + k].name
        if name not in inits:
            g.initializer.append(numpy_helper.from_array(before.cpu().numpy(), name))
        src = out
        if any(out in n.output for n in g.node):
            src = out + "__ipuof_new"
            for n in g.node:
                for lst in (n.input, n.output):
                    for j, v in enumerate(lst):
                        if v == out:
                            lst[j] = src
        g.node.append(helper.make_node("BufferUpdate", [name, src], [out],
                                       name=f"/ipuof_buffer_update/{name}",
                                       domain="ai.graphcore"))
    if not any(o.domain == "ai.graphcore" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("ai.graphcore", 1))
    return model.SerializeToString()


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


_ONNX_OF = {torch.float32: 1, torch.uint8: 2, torch.int8: 3, torch.int32: 6,
            torch.int64: 7, torch.bool: 9}


def check_output_dtypes(onnx_bytes, dtypes):
    """Error when an output of the graph has another dtype than torch's run gave it: the
    exporter dropped a conversion (Tensor.copy_ into a tensor of another dtype is
    exported as the source's values), so the graph would compute other numbers."""
    if not dtypes:
        return
    import onnx
    outs = onnx.load_from_string(onnx_bytes).graph.output
    for i, (o, dt) in enumerate(zip(outs, dtypes)):
        want = _ONNX_OF.get(torch.float32 if dt in capture.WIDENED else dt)
        got = o.type.tensor_type.elem_type
        if dt == torch.float16 and got == onnx.TensorProto.FLOAT16:
            continue  # a Cast to float16 (x.half()): the daemon computes it as torch does
        if want is not None and got and got != want:
            name = onnx.TensorProto.DataType.Name(got).lower()
            raise Error(f"capturing the model: torch.onnx.export computes output {i} as "
                        f"{name} where the module returns {dt}: the exporter dropped a "
                        "dtype conversion (for example Tensor.copy_ into a tensor of "
                        "another dtype), so the graph would give other numbers; convert "
                        "explicitly (src.to(dst.dtype)) before copying")
