"""Typing a float32 capture to the float16 the model computes in (capture.type_float16).

A float16 model is captured in float32 (the host has no half kernels); the graph is then
typed as torch would run it, tensor by tensor: the float16 inputs and the float16 module
state (parameters, buffers) become float16 graph inputs and initializers, and a value is
float16 when the node computing it reads a float16 value (float32 parameters are
converted, as PopTorch converts them) and no float32 input (a Cast gives its `to`;
`x.float()` exports as Cast to float, so a layer after it computes in float; see
_type_nodes). The daemon runs each float16 op on float16 tensors, rounding every
result to float16 as it is written (sim/README.md "Dtypes"). Outputs that must be float on
the device (a training model's loss, outputs summed over the run) are Cast to float at the
end and narrowed back on the host.
"""
import numpy as np

_F32, _F16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16 (onnx is imported when used)

# ops whose outputs are never float, when shape inference gives no type
_NOT_FLOAT = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero", "Equal", "Less", "Greater",
              "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf"}


def _elem_types(model):
    """name -> ONNX elem_type of every value of the float32 graph that shape inference
    types (inputs, initializers, intermediates, outputs)."""
    from onnx import shape_inference
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: B902 - an op shape inference does not know: partial typing
        inferred = model
    g = inferred.graph
    types = {t.name: t.data_type for t in g.initializer}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        if v.type.tensor_type.elem_type:
            types[v.name] = v.type.tensor_type.elem_type
    return types


def _float_outputs(n, types):
    """The outputs of node n that are float in the float32 capture (typed so by shape
    inference, or untyped outputs of ops that give floats)."""
    out = []
    for k, o in enumerate(n.output):
        if not o:
            continue
        t = types.get(o)
        if t == _F32 or (t is None and n.op_type not in _NOT_FLOAT and
                             not (k > 0 and n.op_type in ("TopK", "MaxPool"))):
            out.append(o)
    return out


def _upcast(nodes, casts, n, half):
    """Cast node n's float16 inputs to float (one Cast per value, before n)."""
    from onnx import helper
    for k, i in enumerate(n.input):
        if i not in half:
            continue
        if i not in casts:
            casts[i] = i + "__ipuof_up"
            nodes.append(helper.make_node("Cast", [i], [casts[i]], to=_F32,
                                          name=i + "__ipuof_to_f32_in"))
        n.input[k] = casts[i]


def _type_nodes(g, types, half, floats):
    """Adds to half (names of float16 values) the outputs of g's nodes torch computes in
    float16, in graph order. floats: {"input": the float32 graph inputs, "weights": the
    float16 module state}, each grown with the values computed from it.

    A node reading a float16 value computes in float16, float32 module state included:
    PopTorch converts a float32 parameter to float16 when an op of a float16 input uses
    it ("the parameters will be converted to float16 if you call an operation with a
    float16 input"; its half_float_test: a float32 Linear, Conv1d or GroupNorm of a
    float16 input gives float16), which is what the daemon computes. A float32 input (or
    a value computed from one) meeting a float16 value wins, as torch promotes two
    tensors (x.half() + y of a float y is float32), unless float16 weights take part (a
    .half() model given float32 inputs computes in float16: the weights decide); the
    node's float16 inputs are then Cast to float before it, since the daemon computes
    any node given a float16 input in float16. Constants are neither: a scalar of the
    model's code is captured as a float32 Constant that torch would not promote with."""
    nodes, casts = [], {}
    for n in g.node:
        if n.op_type == "Cast":
            to = next(a.i for a in n.attribute if a.name == "to")
            if to == _F16:
                half.update(o for o in n.output if o)
            nodes.append(n)
            continue
        reads = {k: any(i in v for i in n.input) for k, v in floats.items()}
        reads_half = any(i in half for i in n.input)
        upcast = reads_half and reads["input"] and not reads["weights"]
        if upcast:
            _upcast(nodes, casts, n, half)
        outs = _float_outputs(n, types)
        if reads_half and not upcast:
            half.update(outs)
            if reads["weights"]:
                floats["weights"].update(outs)
        elif reads["input"]:
            floats["input"].update(outs)
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)


def type_float16(onnx_bytes, inputs, state, keep_float=(), stochastic=False,
                 partials_half=False):
    """onnx_bytes (a float32 capture) typed float16 where torch computes float16.

    inputs: graph input names torch gives as float16; state: the module's float16
    parameter and buffer names (the initializers of those names become float16);
    keep_float: graph output names to give as float even when float16 (a Cast to float
    is added); stochastic: mark the model for stochastic rounding (metadata
    ipuof.stochastic_rounding); partials_half: float16 partials for MatMul and Gemm
    (metadata ipuof.partials_type = half). Returns (bytes, names of the outputs Cast to float that
    torch gives as float16)."""
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.load_from_string(onnx_bytes)
    g = model.graph
    types = _elem_types(model)
    state, inputs = set(state), set(inputs)
    half = set()
    for vi in g.input:
        if vi.name in inputs and vi.type.tensor_type.elem_type == _F32:
            vi.type.tensor_type.elem_type = _F16
            half.add(vi.name)
    float_in = {vi.name for vi in g.input
                if vi.name not in half and vi.type.tensor_type.elem_type == _F32}
    for i, t in enumerate(g.initializer):
        if t.data_type == _F32 and t.name in state:
            a = numpy_helper.to_array(t).astype(np.float16)
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
            half.add(t.name)
    _type_nodes(g, types, half, {"input": float_in,
                                 "weights": {t for t in half if t not in inputs}})
    del g.value_info[:]  # the float32 capture's types; the daemon infers its own
    narrowed, casts = [], []
    for vo in g.output:
        if vo.name not in half:
            continue
        if vo.name not in keep_float:
            vo.type.tensor_type.elem_type = _F16
            continue
        inner = vo.name + "__ipuof_f16"
        for n in g.node:
            for k, o in enumerate(n.output):
                if o == vo.name:
                    n.output[k] = inner
            for k, i in enumerate(n.input):
                if i == vo.name:
                    n.input[k] = inner
        casts.append(helper.make_node("Cast", [inner], [vo.name], to=_F32,
                                      name=vo.name + "__ipuof_to_f32"))
        narrowed.append(vo.name)
    g.node.extend(casts)
    if stochastic:
        p = model.metadata_props.add()
        p.key, p.value = "ipuof.stochastic_rounding", "1"
    if partials_half:
        p = model.metadata_props.add()
        p.key, p.value = "ipuof.partials_type", "half"
    return model.SerializeToString(), narrowed
