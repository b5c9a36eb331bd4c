"""ONNX symbolics registered for the opset the package exports at (14), where PyTorch's own
exporter gives another result than PyTorch's op (never by patching PyTorch: through
torch.onnx.register_custom_op_symbolic, which takes precedence over the built-in one).

- aten::floor_divide: the exporter still truncates toward zero (its comment: "Deprecated
  behavior, floor_divide actually truncates"), while torch >= 1.13 floors: -7 // 2 is -4,
  not -3. Floats: Floor(Div(a, b)); integers: (a - Mod(a, b)) / b with ONNX's integer Mod
  (fmod=0: the remainder takes the divisor's sign), so the division is exact.
- aten::softplus: the exporter drops threshold; torch returns x where beta * x > threshold.
  Where(Greater(beta * x, threshold), x, Softplus(beta * x) / beta).
- aten::mse_loss and aten::l1_loss: the exporter has none (nn.MSELoss and nn.L1Loss could
  not be captured). (x - y)^2 and |x - y|, reduced by ReduceMean / ReduceSum or not.
- aten::group_norm: the exporter's InstanceNormalization (on a reshaped input) is not an
  op of the daemon; written as Reshape, ReduceMean, Sub, Mul, Sqrt, Div and the affine.
- aten::nansum, aten::count_nonzero: the exporter has none.
"""
import torch
from torch.onnx import symbolic_helper as sym

OPSET = 14
_FLOAT = 1  # TensorProto.FLOAT


def _const(g, value, like):
    dtype = torch.float32
    st = like.type().scalarType() if like.type().kind() == "TensorType" else None
    if st == "Half":
        dtype = torch.float16
    elif st == "Double":
        dtype = torch.float64
    return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))


def floor_divide(g, self, other):
    if sym._is_fp(self) or sym._is_fp(other):
        a = self if sym._is_fp(self) else g.op("Cast", self, to_i=_FLOAT)
        b = other if sym._is_fp(other) else g.op("Cast", other, to_i=_FLOAT)
        return g.op("Floor", g.op("Div", a, b))
    rem = g.op("Mod", self, other, fmod_i=0)
    return g.op("Div", g.op("Sub", self, rem), other)


def softplus(g, self, beta, threshold):
    b = sym._maybe_get_const(beta, "f")
    th = sym._maybe_get_const(threshold, "f")
    if not isinstance(b, (int, float)) or not isinstance(th, (int, float)):
        raise RuntimeError("softplus: beta and threshold must be constants")
    bx = self if b == 1 else g.op("Mul", self, _const(g, float(b), self))
    sp = g.op("Softplus", bx)
    if b != 1:
        sp = g.op("Div", sp, _const(g, float(b), self))
    return g.op("Where", g.op("Greater", bx, _const(g, float(th), self)), self, sp)


def _reduce(g, x, reduction):
    r = sym._maybe_get_const(reduction, "i")
    if r == 0:
        return x
    if r == 1:
        return g.op("ReduceMean", x, keepdims_i=0)
    if r == 2:
        return g.op("ReduceSum", x, keepdims_i=0)
    raise RuntimeError(f"loss reduction {r!r} is not none (0), mean (1) or sum (2)")


def mse_loss(g, self, target, reduction):
    d = g.op("Sub", self, target)
    return _reduce(g, g.op("Mul", d, d), reduction)


def l1_loss(g, self, target, reduction):
    return _reduce(g, g.op("Abs", g.op("Sub", self, target)), reduction)


def group_norm(g, input, num_groups, weight, bias, eps, cudnn_enabled):
    """GroupNorm as the ops the daemon has (the exporter emits InstanceNormalization on a
    reshaped input): per sample and group, (x - mean) / sqrt(var + eps) with the biased
    variance, then the per-channel affine."""
    groups = sym._maybe_get_const(num_groups, "i")
    e = sym._maybe_get_const(eps, "f")
    sizes = sym._get_tensor_sizes(input)
    if sizes is None or any(d is None for d in sizes) or not isinstance(groups, int):
        raise RuntimeError("group_norm: the input's shape must be known at capture")
    n, c = sizes[0], sizes[1]
    x = g.op("Reshape", input, g.op("Constant", value_t=torch.tensor([n, groups, -1])))
    mean = g.op("ReduceMean", x, axes_i=[2], keepdims_i=1)
    d = g.op("Sub", x, mean)
    var = g.op("ReduceMean", g.op("Mul", d, d), axes_i=[2], keepdims_i=1)
    y = g.op("Div", d, g.op("Sqrt", g.op("Add", var, _const(g, float(e), input))))
    y = g.op("Reshape", y, g.op("Constant", value_t=torch.tensor(list(sizes))))
    affine = torch.tensor([c] + [1] * (len(sizes) - 2))
    if not sym._is_none(weight):
        y = g.op("Mul", y, g.op("Reshape", weight, g.op("Constant", value_t=affine)))
    if not sym._is_none(bias):
        y = g.op("Add", y, g.op("Reshape", bias, g.op("Constant", value_t=affine)))
    return y


def _not_nan(g, x):
    return g.op("Equal", x, x)


def nansum(g, input, dim, keepdim, dtype):
    """Sum with NaNs counted as zero: Where(x == x, x, 0) summed."""
    x = g.op("Where", _not_nan(g, input), input, _const(g, 0.0, input))
    return _sum(g, x, dim, keepdim)


def count_nonzero(g, input, dim):
    nz = g.op("Cast", g.op("Not", g.op("Equal", input, _zero_like(g, input))), to_i=7)
    return _sum(g, nz, dim, 0)


def _zero_like(g, x):
    if sym._is_fp(x):
        return _const(g, 0.0, x)
    return g.op("Constant", value_t=torch.tensor(0, dtype=torch.int64)) \
        if x.type().scalarType() == "Long" else \
        g.op("CastLike", g.op("Constant", value_t=torch.tensor(0)), x)


def _sum(g, x, dim, keepdim):
    dims = None
    if not sym._is_none(dim):
        if dim.node().kind() != "onnx::Constant":
            raise RuntimeError("the reduced dimensions must be constants")
        dims = dim.node()["value"].tolist()
    if isinstance(dims, int):
        dims = [dims]
    keep = int(sym._maybe_get_const(keepdim, "i")) if not isinstance(keepdim, int) \
        else keepdim
    if not dims:
        return g.op("ReduceSum", x, keepdims_i=keep)
    return g.op("ReduceSum", x, g.op("Constant", value_t=torch.tensor(list(dims))),
                keepdims_i=keep)


def register():
    """Registers the symbolics above for OPSET (idempotent)."""
    torch.onnx.register_custom_op_symbolic("aten::floor_divide", floor_divide, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::softplus", softplus, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::mse_loss", mse_loss, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::l1_loss", l1_loss, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::group_norm", group_norm, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::nansum", nansum, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::count_nonzero", count_nonzero, OPSET)
