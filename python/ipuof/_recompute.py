"""Recomputation and memory options as the daemon reads them from the ONNX graph.

During a capture, recomputationCheckpoint(t) and set_available_memory(t, p) leave marker
nodes (ai.graphcore::RecomputationCheckpoint, ai.graphcore::SetAvailableMemory) in the
exported graph; annotate() turns them into PopART's node attributes on the producing node
(__recompute_output_in_backward = 1, PopART's RecomputeType::Checkpoint;
__available_memory_proportion = p) and removes them, and writes the model-wide options
into the graph's metadata: ipuof.recomputation (autoRecomputation, PopART's
RecomputationType 0-4), ipuof.available_memory_proportion (setAvailableMemoryProportion,
one value per IPU) and ipuof.io_tiles (TensorLocations.numIOTiles). docs/memory.md says
what the daemon does with them.
"""
import torch

from . import poptorch_core
from .errors import Error

CHECKPOINT = "RecomputationCheckpoint"
AVAILABLE_MEMORY = "SetAvailableMemory"
RECOMPUTATION_TYPES = {0: "None", 1: "Standard", 2: "NormOnly", 3: "Pipeline",
                       4: "RecomputeAll"}


class _Marker(torch.autograd.Function):
    """The identity, exported as a marker node for annotate()."""

    @staticmethod
    def forward(ctx, x, kind, proportion):  # pylint: disable=arguments-differ
        return x.clone()

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        return grad, None, None

    @staticmethod
    def symbolic(g, x, kind, proportion):
        if kind == AVAILABLE_MEMORY:
            out = g.op("ai.graphcore::" + kind, x, proportion_f=proportion)
        else:
            out = g.op("ai.graphcore::" + kind, x)
        out.setType(x.type())
        return out


def mark(tensor, kind, proportion=0.0):
    """tensor, or inside a capture the marker node of kind on it."""
    if not poptorch_core._dispatcher_active[0] or not isinstance(tensor, torch.Tensor):
        return tensor
    return _Marker.apply(tensor, kind, float(proportion))


def recomputation_mode(options):
    """autoRecomputation (PopART's RecomputationType, checked: an integer 0-4), or None
    when not set: the daemon then takes PopTorch's default, Pipeline (3) for pipelined
    training over more than one IPU and None (0) otherwise."""
    value = options._Popart.options.get("autoRecomputation")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or \
            value not in RECOMPUTATION_TYPES:
        raise Error(f"_Popart.set('autoRecomputation', {value!r}): the value is PopART's "
                    "RecomputationType as an integer: " +
                    ", ".join(f"{k} ({v})" for k, v in RECOMPUTATION_TYPES.items()))
    return value


def annotate(onnx_bytes, options, training):
    """onnx_bytes with the markers folded into attributes and the memory options in the
    metadata (see the module's docstring)."""
    import onnx
    from onnx import helper
    model = onnx.load_from_string(onnx_bytes)
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    outputs = {o.name for o in g.output}
    keep = []
    rename = {}
    for n in g.node:
        if n.domain != "ai.graphcore" or n.op_type not in (CHECKPOINT, AVAILABLE_MEMORY):
            keep.append(n)
            continue
        src = rename.get(n.input[0], n.input[0])
        p = producer.get(src)
        if p is not None and n.op_type == CHECKPOINT:
            _set_attr(p, helper.make_attribute("__recompute_output_in_backward", 1))
        elif p is not None and p.op_type != "Constant":
            # (a Constant has no temporaries to bound, and takes one attribute only)
            prop = next(a.f for a in n.attribute if a.name == "proportion")
            _set_attr(p, helper.make_attribute("__available_memory_proportion", prop))
        if n.output[0] in outputs:
            keep.append(helper.make_node("Identity", [src], [n.output[0]], name=n.name))
        else:
            rename[n.output[0]] = src
    for n in keep:
        for j, i in enumerate(n.input):
            if i in rename:
                n.input[j] = rename[i]
    del g.node[:]
    g.node.extend(keep)
    _metadata(model, options, training)
    return model.SerializeToString()


def _set_attr(node, attr):
    for j, a in enumerate(node.attribute):
        if a.name == attr.name:
            del node.attribute[j]
            break
    node.attribute.append(attr)


def _metadata(model, options, training):
    """The model-wide memory options as metadata_props."""
    props = {}
    mode = recomputation_mode(options)
    if mode is not None and training:
        props["ipuof.recomputation"] = str(mode)
    amp = getattr(options, "available_memory_proportion", None) or {}
    if amp:
        n = max(amp) + 1
        props["ipuof.available_memory_proportion"] = ",".join(
            repr(float(amp.get(i, 0.6))) for i in range(n))
    io_tiles = options.TensorLocations._values.get("numIOTiles")
    if io_tiles:
        props["ipuof.io_tiles"] = str(int(io_tiles))
    for k, v in props.items():
        p = model.metadata_props.add()
        p.key, p.value = k, v
