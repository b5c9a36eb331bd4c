"""Options.anchorTensor: tensors of the compiled graph read back after each run.

A name of getTensorNames() is one of: a value of the ONNX graph (an input, a node's
output), which becomes an extra output of the graph with the anchor's output mode; a
weight (an initializer), read from the device after each run (a training model) or the
graph's constant (an inference model); UpdatedVar___<weight>, the weight after the run's
last update (PopTorch's name), read from the device; Gradient___<weight> (a training
model's trained weight), the gradient the run's last update applied (after the reduction
over accumulation steps and replicas), read from the device
(ipuof_model_read_gradient).
"""
import collections

from .. import enums
from ..errors import Error

UPDATED = "UpdatedVar___"
GRADIENT = "Gradient___"

Anchor = collections.namedtuple("Anchor", "short long kind mode period")
FINAL_LOSS_SCALE = "finalLossScale"     # the optimizer's, as PopART names it
# kind: "value" (a graph output), "weight" (read by name after each run), "gradient" (the
# named weight's last applied gradient, read after each run)


def graph_names(onnx_bytes):
    """(value names, initializer names) of the ONNX graph, in graph order."""
    import onnx
    g = onnx.load_from_string(onnx_bytes).graph
    inits = [i.name for i in g.initializer]
    init_set = set(inits)
    values = [i.name for i in g.input if i.name not in init_set]
    for n in g.node:
        values += [o for o in n.output if o]
    return values, inits


def tensor_names(onnx_bytes, training, trainable):
    """getTensorNames(): the graph's values and weights, and UpdatedVar___<w> for each
    weight a training model updates."""
    values, inits = graph_names(onnx_bytes)
    out = list(dict.fromkeys(values + inits))
    if training:
        out += [UPDATED + w for w in inits if w in trainable]
        out += [GRADIENT + w for w in inits if w in trainable]
        out.append(FINAL_LOSS_SCALE)
    return out


def _mode(options, training, a):
    mode = options.output_mode if a[1] or a[2] is None else a[2]
    if mode == enums.OutputMode.Default:
        mode = enums.OutputMode.Final if training else enums.OutputMode.All
    return mode


def plan(options, training, onnx_bytes, trainable, steps):
    """(onnx bytes with the value anchors as extra outputs, [Anchor]) for the options'
    anchored tensors; Error for a name the graph does not have or cannot give."""
    anchors = options.anchored_tensors
    if not anchors:
        return onnx_bytes, []
    import onnx
    from onnx import shape_inference
    values, inits = graph_names(onnx_bytes)
    value_set, init_set = set(values), set(inits)
    model = onnx.load_from_string(onnx_bytes)
    outputs = {o.name for o in model.graph.output}
    inferred = None
    out = []
    for short, a in anchors.items():
        long = a[0]
        mode = _mode(options, training, a)
        period = a[3]
        if long.startswith(GRADIENT):
            weight = long[len(GRADIENT):]
            if not training or weight not in trainable:
                raise Error(f"anchorTensor('{short}', '{long}'): "
                            + (f"'{weight}' is not a weight this model trains"
                               if training else "an inference model has no gradients")
                            + f"; {GRADIENT}<weight> names the gradient of a trained "
                            "weight of a training model (getTensorNames() lists them)")
            if mode != enums.OutputMode.Final and steps > 1:
                raise Error(f"anchorTensor('{short}', '{long}'): only the gradient of the "
                            "run's last update (OutputMode.Final) can be read from the "
                            f"device, not one per step (OutputMode.{mode.name}, {steps} "
                            "steps a run)")
            out.append(Anchor(short, weight, "gradient", mode, period))
            continue
        weight = long[len(UPDATED):] if long.startswith(UPDATED) else long
        if (long.startswith(UPDATED) and training and weight in trainable) or \
                (not long.startswith(UPDATED) and long in init_set):
            if mode != enums.OutputMode.Final and steps > 1:
                raise Error(f"anchorTensor('{short}', '{long}'): only its value after the "
                            "run (OutputMode.Final) can be read from the device, not one per "
                            f"step (OutputMode.{mode.name}, {steps} steps a run)")
            out.append(Anchor(short, weight, "weight", mode, period))
            continue
        if training and long == FINAL_LOSS_SCALE:
            # PopART's finalLossScale: the loss scale of the run's last step, kept by the
            # optimizer (automatic loss scaling changes it), read after the run.
            if mode != enums.OutputMode.Final and steps > 1:
                raise Error(f"anchorTensor('{short}', '{long}'): only the loss scale of "
                            "the run's last step (OutputMode.Final) can be read, not one "
                            f"per step (OutputMode.{mode.name}, {steps} steps a run)")
            out.append(Anchor(short, long, "state", mode, period))
            continue
        if long not in value_set:
            known = tensor_names(onnx_bytes, training, trainable)
            raise Error(f"anchorTensor('{short}', '{long}'): the graph has no tensor "
                        f"'{long}'; its tensors are (getTensorNames()): "
                        + ", ".join(known[:40]) + (" ..." if len(known) > 40 else ""))
        if long not in outputs:
            if inferred is None:
                inferred = shape_inference.infer_shapes(model)
                infos = {v.name: v for v in list(inferred.graph.value_info) +
                         list(inferred.graph.input) + list(inferred.graph.output)}
            info = infos.get(long)
            if info is None:
                raise Error(f"anchorTensor('{short}', '{long}'): the tensor's type and shape "
                            "are not known at capture")
            model.graph.output.append(info)
            outputs.add(long)
        out.append(Anchor(short, long, "value", mode, period))
    return model.SerializeToString(), out
