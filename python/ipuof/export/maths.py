"""Symbolics for PyTorch's math ops that the exporter (opset 14) lacks or exports wrongly,
registered by symbolics.register, each written with ops the daemon has:

- aten::sinh, cosh, asinh, acosh, atanh: the ONNX ops of those names (opset 9; the
  exporter has no symbolic for them). sin ... atan and reciprocal export by themselves.
- aten::erfc: 1 - Erf(x); aten::expm1: Exp(x) - 1 (both lose torch's precision where the
  result is tiny: erfc(x) for x > 3 and expm1(x) for |x| < 1e-4 come out within float's
  absolute step of 1 rather than relative to the result); aten::trunc: Floor of x >= 0,
  Ceil below; aten::frac: x - trunc(x); aten::atan2: Atan(y / x), moved by pi by the
  signs of x and y as torch's atan2 (the axes' own cases, x = 0, as +-pi/2 or 0).
- aten::addcdiv: self + value * t1 / t2, computed as torch's kernel does, (value * t1) / t2.
- aten::bitwise_and / or / xor / not and the & | ^ ~ operators: on bools ONNX And, Or, Xor,
  Not; on integers the daemon's ai.graphcore::BitwiseAnd ... BitwiseNot (ai.onnx has them
  only from opset 18); a Python scalar operand takes the tensor's dtype.
- aten::median (whole tensor, and along a dim with indices): torch's lower median, the
  element at (n - 1) // 2 of the ascending TopK, which trains through TopK and Gather.
- aten::sort with stable=True (the exporter mistakes the stable overload's arguments for
  an out= tensor): TopK over the whole dim, whose ties keep their order (ONNX's rule), so
  the sort is stable ascending and descending, as torch's stable sort.
- aten::amax / amin over every dim (dim=()): the exporter writes an empty axes attribute,
  which ONNX refuses; ReduceMax / ReduceMin without axes.
- aten::clamp of an integer tensor with a float bound: torch promotes the result to float
  (torch.clamp(int64, min=-4.5) is float32); the exporter kept it integer.
- aten::bincount with a constant minlength (and weights or not): a one-hot comparison of
  the input with 0 .. minlength - 1, summed (times the weights); the result has minlength
  elements, as PopTorch's (values past it are not counted: on the IPU the minimum length
  is also the maximum); without minlength it is refused with PopTorch's sentence.
"""
import math

import torch
from torch.onnx import _type_utils
from torch.onnx import symbolic_helper as sym
from torch.onnx import symbolic_opset9 as _opset9
from torch.onnx import symbolic_opset11 as _opset11

from . import symbolics as _s
from ..errors import Error

_BOOL = 9  # TensorProto.BOOL
_INT64 = 7


def _scalar_type(v):
    return v.type().scalarType() if v.type().kind() == "TensorType" else None


def _unary(name):
    def fn(g, self):
        return g.op(name, self)
    return fn


def erfc(g, self):
    return g.op("Sub", _s._const(g, 1.0, self), g.op("Erf", self))


def expm1(g, self):
    return g.op("Sub", g.op("Exp", self), _s._const(g, 1.0, self))


def trunc(g, self):
    neg = g.op("Less", self, _s._const(g, 0.0, self))
    return g.op("Where", neg, g.op("Ceil", self), g.op("Floor", self))


def frac(g, self):
    return g.op("Sub", self, trunc(g, self))


def atan2(g, self, other):
    y, x = self, other
    zero = _s._const(g, 0.0, y)
    base = g.op("Atan", g.op("Div", y, x))
    pi = _s._const(g, math.pi, y)
    ypos = g.op("Not", g.op("Less", y, zero))                    # y >= 0
    xneg = g.op("Less", x, zero)
    xzero = g.op("Equal", x, zero)
    shifted = g.op("Where", ypos, g.op("Add", base, pi), g.op("Sub", base, pi))
    r = g.op("Where", xneg, shifted, base)
    half = _s._const(g, math.pi / 2, y)
    axis = g.op("Where", g.op("Greater", y, zero), half,
                g.op("Where", g.op("Less", y, zero), g.op("Neg", half), zero))
    return g.op("Where", xzero, axis, r)


def addcdiv(g, self, tensor1, tensor2, value=None):
    v = 1.0 if value is None or sym._is_none(value) else sym._maybe_get_const(value, "f")
    if not isinstance(v, (int, float)):
        raise RuntimeError("addcdiv: value must be a constant")
    num = tensor1 if v == 1 else g.op("Mul", tensor1, _s._const(g, float(v), tensor1))
    return g.op("Add", self, g.op("Div", num, tensor2))


def _like(g, other, self):
    """other in self's dtype (a Python scalar reaches the exporter as a float or long)."""
    st, ot = _scalar_type(self), _scalar_type(other)
    if st is not None and ot != st:
        other = g.op("Cast", other, to_i=_type_utils.JitScalarType.from_name(st).onnx_type())
    return other


def _bitwise(onnx_bool, gc_name):
    def fn(g, self, other):
        other = _like(g, other, self)
        if _scalar_type(self) == "Bool":
            return g.op(onnx_bool, self, other)
        return g.op("ai.graphcore::" + gc_name, self, other)
    return fn


def bitwise_not(g, self):
    if _scalar_type(self) == "Bool":
        return g.op("Not", self)
    return g.op("ai.graphcore::BitwiseNot", self)


def _topk_dim(g, x, dim, largest):
    sizes = sym._get_tensor_sizes(x)
    if sizes is None or sizes[dim] is None:
        raise RuntimeError("sort/median: the size of dim %d must be known" % dim)
    n = sizes[dim]
    values, indices = g.op("TopK", x, _s._ints(g, [n]), axis_i=dim, largest_i=int(largest),
                           sorted_i=1, outputs=2)
    return values, indices, n


def median(g, self, *args):
    if len(args) == 0:
        flat = g.op("Reshape", self, _s._ints(g, [-1]))
        values, _, n = _topk_dim(g, flat, 0, False)
        return g.op("Gather", values, g.op("Constant", value_t=torch.tensor((n - 1) // 2)),
                    axis_i=0)
    dim = sym._get_const(args[0], "i", "dim")
    keepdim = bool(sym._get_const(args[1], "i", "keepdim"))
    rank = sym._get_tensor_rank(self)
    if dim < 0:
        dim += rank
    values, indices, n = _topk_dim(g, self, dim, False)
    at = g.op("Constant", value_t=torch.tensor([(n - 1) // 2]))
    v = g.op("Gather", values, at, axis_i=dim)
    i = g.op("Gather", indices, at, axis_i=dim)
    if not keepdim:
        v = g.op("Squeeze", v, _s._ints(g, [dim]))
        i = g.op("Squeeze", i, _s._ints(g, [dim]))
    return v, i


def sort(g, self, *args):
    if len(args) == 3:         # sort.stable(self, stable, dim, descending)
        _, dim, descending = args
    else:                      # sort(self, dim, descending[, out])
        dim, descending = args[0], args[1]
    d = sym._get_const(dim, "i", "dim")
    if d < 0:
        d += sym._get_tensor_rank(self)
    desc = bool(sym._get_const(descending, "i", "descending"))
    values, indices, _ = _topk_dim(g, self, d, desc)
    return values, indices


def _reduce_all(onnx_op, default):
    def fn(g, self, dim, keepdim):
        dims = sym._get_const(dim, "is", "dim")
        keep = int(sym._get_const(keepdim, "i", "keepdim"))
        if dims is None or len(dims) == 0:
            return g.op(onnx_op, self, keepdims_i=keep)
        return default(g, self, dim, keepdim)
    return fn


def clamp(g, self, min=None, max=None):
    def floating(v):
        if v is None or sym._is_none(v):
            return False
        if v.node().kind() == "onnx::Constant":
            t = v.node()["value"]
            return isinstance(t, torch.Tensor) and t.is_floating_point()
        return sym._is_fp(v)
    st = _scalar_type(self)
    if st not in (None, "Float", "Half", "Double", "BFloat16") and (floating(min) or floating(max)):
        self = g.op("Cast", self, to_i=_s._FLOAT)
    return _opset11.clamp(g, self, min, max)


def bincount(g, self, weights, minlength):
    m = sym._maybe_get_const(minlength, "i")
    if not isinstance(m, int) or m <= 0:
        raise Error("Bincount `minlength` must be specified and must be a constant. On the "
                    "IPU MK2 platform the minimum length is also the maximum length")
    bins = g.op("Constant", value_t=torch.arange(m, dtype=torch.int64))
    x = g.op("Cast", self, to_i=_INT64)
    hit = g.op("Equal", g.op("Unsqueeze", x, _s._ints(g, [1])), bins)      # (n, m)
    if weights is None or sym._is_none(weights):
        return g.op("ReduceSum", g.op("Cast", hit, to_i=_INT64), _s._ints(g, [0]),
                    keepdims_i=0)
    wt = _scalar_type(weights) or "Float"
    onehot = g.op("Cast", hit, to_i=_type_utils.JitScalarType.from_name(wt).onnx_type())
    w = g.op("Unsqueeze", weights, _s._ints(g, [1]))
    return g.op("ReduceSum", g.op("Mul", onehot, w), _s._ints(g, [0]), keepdims_i=0)


SYMBOLICS = (
    ("sinh", _unary("Sinh")), ("cosh", _unary("Cosh")), ("asinh", _unary("Asinh")),
    ("acosh", _unary("Acosh")), ("atanh", _unary("Atanh")),
    ("erfc", erfc), ("expm1", expm1), ("trunc", trunc), ("frac", frac), ("atan2", atan2),
    ("addcdiv", addcdiv),
    ("bitwise_and", _bitwise("And", "BitwiseAnd")), ("__and_", _bitwise("And", "BitwiseAnd")),
    ("bitwise_or", _bitwise("Or", "BitwiseOr")), ("__or_", _bitwise("Or", "BitwiseOr")),
    ("bitwise_xor", _bitwise("Xor", "BitwiseXor")), ("__xor_", _bitwise("Xor", "BitwiseXor")),
    ("bitwise_not", bitwise_not),
    ("median", median), ("sort", sort),
    ("amax", _reduce_all("ReduceMax", _opset9.amax if hasattr(_opset9, "amax") else None)),
    ("amin", _reduce_all("ReduceMin", _opset9.amin if hasattr(_opset9, "amin") else None)),
    ("clamp", clamp), ("bincount", bincount),
)
