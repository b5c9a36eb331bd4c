"""Symbolics for opset 14 of aten ops PyTorch's exporter lacks or refuses (registered by
symbolics.register), each written with ops the daemon has:

- aten::bilinear (nn.Bilinear): y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o],
  as MatMul(x1, W viewed (in1, out * in2)), reshaped (..., out, in2), times x2, summed over
  in2 (ReduceSum); trains through MatMul, Mul and ReduceSum.
- aten::take_along_dim: torch.gather's symbolic (symbolics.gather: a one-hot mask, as the
  daemon has no GatherElements) along dim, input and indices first broadcast to each other
  on every other dimension (as torch does); without dim, of the flattened tensors.
- aten::broadcast_to: Expand.
- aten::scatter with reduce= (add or multiply): the daemon's ai.graphcore::ScatterElements
  with that reduction (opset 16's attribute, which ONNX's checker refuses at opset 14; the
  exporter's symbolic takes no reduce argument); a scalar value is expanded to the index's
  shape first.
- aten::threshold with a non-zero threshold (nn.Threshold): Where(x > threshold, x, value)
  (the exporter only takes threshold 0).
- aten::add of two bool tensors: Or, as torch computes it (the exporter writes Add, which
  ONNX does not define for bool; its aten::mul already writes And).
- aten::index_put: values cast to self's dtype first, as torch does. The exporter writes
  Tensor.copy_ of an input as index_put(self, [], expand_as(src, self)), which returned
  src's dtype (a float copied into an int32 tensor stayed float).
- aten::chunk of a dimension of known size: Split with torch's sizes (ceil(size / chunks)
  each, the last smaller, so fewer chunks than asked when they do not divide evenly: 13
  into 6 gives 5 of 3, 3, 3, 3, 1); the exporter's sizes ended in a negative one and went
  through SplitToSequence.
- aten::norm with p = inf or -inf: ReduceMax / ReduceMin of |x| over dim (the exporter's
  aten::norm takes only p of 1 or 2).
"""
import math

import torch
from torch.onnx import symbolic_helper as sym
from torch.onnx import symbolic_opset11 as _opset11
from torch.onnx import symbolic_opset9 as _opset9

from . import symbolics as _s


def _sizes(x):
    sizes = sym._get_tensor_sizes(x)
    if sizes is None or any(d is None for d in sizes):
        return None
    return list(sizes)


def bilinear(g, input1, input2, weight, bias):
    ws = _sizes(weight)
    if ws is None or len(ws) != 3:
        raise torch.onnx.errors.SymbolicValueError(
            "bilinear: the weight's shape must be known when exporting", weight)
    out, in1, in2 = ws
    w = g.op("Reshape", g.op("Transpose", weight, perm_i=[1, 0, 2]),
             _s._ints(g, [in1, out * in2]))
    t = g.op("MatMul", input1, w)                                 # (..., out * in2)
    lead = g.op("Slice", g.op("Shape", input1), _s._ints(g, [0]), _s._ints(g, [-1]))
    t = g.op("Reshape", t, g.op("Concat", lead, _s._ints(g, [out, in2]), axis_i=0))
    x2 = g.op("Unsqueeze", input2, _s._ints(g, [-2]))             # (..., 1, in2)
    y = g.op("ReduceSum", g.op("Mul", t, x2), _s._ints(g, [-1]), keepdims_i=0)
    if bias is not None and not sym._is_none(bias):
        y = g.op("Add", y, bias)
    return y


def _shaped(v, like, sizes):
    """v typed as like's type with sizes (a Reshape or Expand the gather symbolic reads)."""
    v.setType(like.type().with_sizes(list(sizes)))
    return v


def take_along_dim(g, self, indices, dim=None):
    d = None if dim is None or sym._is_none(dim) else sym._get_const(dim, "i", "dim")
    xs, ids = _sizes(self), _sizes(indices)
    if xs is None or ids is None:
        raise torch.onnx.errors.SymbolicValueError(
            "take_along_dim: the input and the indices need known shapes", self)
    idx = _shaped(g.op("Cast", indices, to_i=7), indices, ids)  # INT64
    if d is None:
        n, k = math.prod(xs), math.prod(ids)
        flat = _s._ints(g, [-1])
        return _s.gather(g, _shaped(g.op("Reshape", self, flat), self, [n]), 0,
                         _shaped(g.op("Reshape", idx, flat), indices, [k]))
    if len(xs) != len(ids):
        raise torch.onnx.errors.SymbolicValueError(
            "take_along_dim: the input and the indices must have one rank", self)
    d = d % len(xs)
    both = [max(a, b) for a, b in zip(xs, ids)]
    xshape = [xs[i] if i == d else both[i] for i in range(len(xs))]
    ishape = [ids[i] if i == d else both[i] for i in range(len(xs))]
    x = self if xshape == xs else \
        _shaped(g.op("Expand", self, _s._ints(g, xshape)), self, xshape)
    if ishape != ids:
        idx = _shaped(g.op("Expand", idx, _s._ints(g, ishape)), indices, ishape)
    return _s.gather(g, x, d, idx)


def broadcast_to(g, self, size):
    return _opset9.expand(g, self, size, None)


def scatter(g, self, dim, index, src, reduce=None):
    if reduce is None or sym._is_none(reduce):
        return _opset11.scatter(g, self, dim, index, src)
    red = sym._maybe_get_const(reduce, "s")
    red = {"add": "add", "multiply": "mul"}.get(red)
    if red is None:
        raise torch.onnx.errors.SymbolicValueError(
            "scatter: reduce must be 'add' or 'multiply'", self)
    axis = sym._get_const(dim, "i", "dim")
    if sym._is_value(src) and src.type().kind() == "TensorType" and \
            _sizes(src) is not None and _sizes(src) != []:
        value = src
    else:  # a scalar value: one per index, in self's dtype
        v = sym._maybe_get_const(src, "f")
        v = src if sym._is_value(v) else _s._const(g, float(v), self)
        st = self.type().scalarType() if self.type().kind() == "TensorType" else None
        if st is not None and st not in ("Float", "Half", "Double"):
            from torch.onnx import _type_utils
            v = g.op("Cast", v, to_i=_type_utils.JitScalarType.from_name(st).onnx_type())
        value = g.op("Expand", v, g.op("Shape", index))
    return g.op("ai.graphcore::ScatterElements", self, index, value, axis_i=axis,
                reduction_s=red)


def threshold(g, self, threshold, value):
    t = sym._maybe_get_const(threshold, "f")
    v = sym._maybe_get_const(value, "f")
    t = threshold if sym._is_value(t) else _s._const(g, float(t), self)
    v = value if sym._is_value(v) else _s._const(g, float(v), self)
    return g.op("Where", g.op("Greater", self, t), self, g.op("Expand", v, g.op("Shape", self)))


def _inf_norm(g, self, p, dim, keepdim):
    """|x| reduced by max (p = inf) or min (p = -inf) over dim (all dims when None)."""
    a = g.op("Abs", self)
    op = "ReduceMax" if p > 0 else "ReduceMin"
    dims = None if dim is None or sym._is_none(dim) else sym._maybe_get_const(dim, "is")
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return g.op(op, a, keepdims_i=int(keepdim))
    return g.op(op, a, axes_i=list(dims), keepdims_i=int(keepdim))


def norm(g, self, p, dim, keepdim, dtype=None):
    pv = sym._maybe_get_const(p, "f")
    if not sym._is_value(pv) and pv is not None and math.isinf(pv):
        return _inf_norm(g, self, pv, dim, sym._maybe_get_const(keepdim, "b"))
    return _opset9.norm(g, self, p, dim, keepdim)


def index_put(g, self, indices_list_value, values, accumulate=False):
    st = self.type().scalarType() if self.type().kind() == "TensorType" else None
    vt = values.type().scalarType() if values.type().kind() == "TensorType" else None
    if st is not None and vt is not None and st != vt:
        from torch.onnx import _type_utils
        values = g.op("Cast", values,
                      to_i=_type_utils.JitScalarType.from_name(st).onnx_type())
    return _opset11.index_put(g, self, indices_list_value, values, accumulate)


def chunk(g, self, chunks, dim, _outputs=None):
    n = sym._maybe_get_const(chunks, "i")
    d = sym._maybe_get_const(dim, "i")
    sizes = _sizes(self)
    if sym._is_value(n) or sym._is_value(d) or sizes is None:
        return _opset11.chunk(g, self, chunks, dim)
    d = d % len(sizes)
    size = sizes[d]
    step = -(-size // n) if size else 0
    parts = [step] * (size // step) + ([size % step] if size % step else []) if step else [0]
    if _outputs is not None and _outputs != len(parts):
        return _opset11.chunk(g, self, chunks, dim)
    out = g.op("Split", self, _s._ints(g, parts), axis_i=d, outputs=len(parts))
    out = list(out) if len(parts) > 1 else [out]
    if _outputs is not None:
        return out
    return g.op("prim::ListConstruct", *out)


def add(g, self, other, alpha=None):
    if sym._is_value(self) and sym._is_value(other) and sym._is_bool(self) and \
            sym._is_bool(other):
        return g.op("Or", self, other)
    return _opset11.add(g, self, other, alpha)


SYMBOLICS = (("add", add), ("chunk", chunk), ("index_put", index_put), ("bilinear", bilinear), ("take_along_dim", take_along_dim),
             ("broadcast_to", broadcast_to), ("scatter", scatter), ("threshold", threshold),
             ("norm", norm))
