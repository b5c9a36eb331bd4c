"""More symbolics for opset 14 (registered by symbolics.register): ops PyTorch's exporter
lacks or writes as the daemon cannot take, each written with ops the daemon has.

- aten::cumprod (no exporter symbolic): the running product unrolled along the axis
  (Slice, Mul, Concat: n - 1 products for an axis of n), which trains through Mul.
- aten::col2im (nn.Fold; no exporter symbolic): a grouped ConvTranspose of the patches
  with a one-hot kernel (each of the kh x kw patch positions adds its value at its offset,
  as col2im sums overlapping patches), then zeros at the end where the last stride leaves
  rows or columns no patch reaches.
- aten::avg_pool1d/2d/3d of an input without a batch dimension: the exporter pads as if
  the first dimension were the batch (6 pad values for a rank-2 input); the symbolic runs
  on the input with a batch dimension of 1 added, then removes it.
- aten::all and aten::any of a non-bool input: the exporter applies Not (bool only) to it;
  the input is cast to bool first (non-zero is true), as torch reads it.
- aten::ctc_loss (no exporter symbolic): the daemon's ai.graphcore::CtcLoss, as PopTorch
  lowers nn.CTCLoss (reduction mean or sum; lengths given as lists become constants).
- aten::group_norm of a (N, C) input: the exporter's symbolic indexes a spatial dimension
  (list index out of range); one of size 1 is added and removed around it.
- aten::copy (Tensor.copy_; no exporter symbolic): src cast to the destination's dtype and
  broadcast to its shape.
- aten::binary_cross_entropy and aten::hinge_embedding_loss: torch's formulas (the log
  clamped at -100 as torch's BCE; weight multiplies each element).
- aten::embedding with padding_idx: the exporter's Gather lets the padding row train
  (ONNX cannot say otherwise); here the rows gathered at padding_idx come through the
  daemon's ai.graphcore::Detach (Where on index == padding_idx), so, as in torch, they get
  no gradient and the forward value is unchanged.
"""
import contextlib

import torch
from torch.onnx import symbolic_helper as sym
from torch.onnx import symbolic_opset9 as _opset9
from torch.onnx import symbolic_opset11 as _opset11
from torch.nn.modules.utils import _pair, _single, _triple

from . import symbolics as _s

_BOOL = 9  # TensorProto.BOOL


def cumprod(g, self, dim, dtype=None):
    if dtype is not None and not sym._is_none(dtype) and \
            dtype.node().kind() != "prim::Constant":
        self = g.op("Cast", self, to_i=sym._get_const(dtype, "i", "dtype"))
    elif dtype is not None and not sym._is_none(dtype):
        st = sym._maybe_get_const(dtype, "i")
        if isinstance(st, int):
            from torch.onnx import _type_utils
            self = g.op("Cast", self, to_i=_type_utils.JitScalarType(st).onnx_type())
    sizes = _s._sizes(self, "cumprod")
    d = sym._get_const(dim, "i", "dim") % max(len(sizes), 1)
    n = sizes[d] if sizes else 1
    if n <= 1:
        return self
    prev, parts = None, []
    for k in range(n):
        piece = g.op("Slice", self, _s._ints(g, [k]), _s._ints(g, [k + 1]), _s._ints(g, [d]))
        prev = piece if prev is None else g.op("Mul", prev, piece)
        parts.append(prev)
    return g.op("Concat", *parts, axis_i=d)


def col2im(g, self, output_size, kernel_size, dilation, padding, stride):
    out_hw = sym._get_const(output_size, "is", "output_size")
    k = sym._get_const(kernel_size, "is", "kernel_size")
    dil = sym._get_const(dilation, "is", "dilation")
    pad = sym._get_const(padding, "is", "padding")
    st = sym._get_const(stride, "is", "stride")
    sizes = _s._sizes(self, "col2im")
    unbatched = len(sizes) == 2
    if unbatched:
        self = g.op("Unsqueeze", self, _s._ints(g, [0]))
        sizes = [1] + sizes
    n, ckk, _ = sizes
    kk = k[0] * k[1]
    c = ckk // kk
    blocks = [(out_hw[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in (0, 1)]
    x = g.op("Reshape", self, _s._ints(g, [n, ckk, blocks[0], blocks[1]]))
    w = torch.zeros(ckk, 1, k[0], k[1])
    for ch in range(c):
        for i in range(k[0]):
            for j in range(k[1]):
                w[ch * kk + i * k[1] + j, 0, i, j] = 1.0
    # The patches cover full[i] rows of the padded image from its start: crop the
    # padding at the start, and at the end what lies past the output; zeros where the
    # patches end before the output does.
    full = [(blocks[i] - 1) * st[i] + dil[i] * (k[i] - 1) + 1 for i in (0, 1)]
    end = [max(0, full[i] - pad[i] - out_hw[i]) for i in (0, 1)]
    y = g.op("ConvTranspose", x, g.op("Constant", value_t=w), group_i=c,
             kernel_shape_i=list(k), strides_i=list(st), dilations_i=list(dil),
             pads_i=[pad[0], pad[1], end[0], end[1]])
    short = [out_hw[i] - (full[i] - pad[i] - end[i]) for i in (0, 1)]
    if any(s_ > 0 for s_ in short):
        y = g.op("Pad", y, _s._ints(g, [0, 0, 0, 0, 0, 0, short[0], short[1]]),
                 mode_s="constant")
    if unbatched:
        y = g.op("Squeeze", y, _s._ints(g, [0]))
    return y


def _unbatched_pool(name, dims, tuple_fn):
    inner = _opset11._avg_pool(name, tuple_fn)

    def fn(g, input, *rest):
        sizes = sym._get_tensor_sizes(input)
        if sizes is not None and len(sizes) == dims + 1:
            x = g.op("Unsqueeze", input, _s._ints(g, [0]))
            return g.op("Squeeze", inner(g, x, *rest), _s._ints(g, [0]))
        return inner(g, input, *rest)
    return fn


def _as_bool(g, x):
    st = x.type().scalarType() if x.type().kind() == "TensorType" else None
    return x if st == "Bool" else g.op("Cast", x, to_i=_BOOL)


def all_(g, *args):
    return _opset9._all(g, _as_bool(g, args[0]), *args[1:])


def any_(g, *args):
    return _opset9._any(g, _as_bool(g, args[0]), *args[1:])


def binary_cross_entropy(g, self, target, weight, reduction):
    one = _s._const(g, 1.0, self)
    low = _s._const(g, -100.0, self)
    log_p = g.op("Max", g.op("Log", self), low)
    log_q = g.op("Max", g.op("Log", g.op("Sub", one, self)), low)
    loss = g.op("Neg", g.op("Add", g.op("Mul", target, log_p),
                           g.op("Mul", g.op("Sub", one, target), log_q)))
    if weight is not None and not sym._is_none(weight):
        loss = g.op("Mul", loss, weight)
    return _s._reduce(g, loss, reduction)


def hinge_embedding_loss(g, self, target, margin, reduction):
    m = float(sym._maybe_get_const(margin, "f"))
    zero = _s._const(g, 0.0, self)
    one = _s._const(g, 1.0, self)
    hinge = g.op("Max", g.op("Sub", _s._const(g, m, self), self), zero)
    # torch: where(target != 1, hinge, 0) + where(target != -1, self, 0)
    not_pos = g.op("Not", g.op("Equal", target, one))
    not_neg = g.op("Not", g.op("Equal", target, g.op("Neg", one)))
    loss = g.op("Add", g.op("Where", not_pos, hinge, zero), g.op("Where", not_neg, self, zero))
    return _s._reduce(g, loss, reduction)


def copy(g, self, src, non_blocking=None):
    """Tensor.copy_ (aten::copy once the exporter has removed the in-place form): src in
    self's dtype, broadcast to self's shape."""
    st = self.type().scalarType() if self.type().kind() == "TensorType" else None
    rt = src.type().scalarType() if src.type().kind() == "TensorType" else None
    if st is not None and st != rt:
        from torch.onnx import _type_utils
        src = g.op("Cast", src, to_i=_type_utils.JitScalarType.from_name(st).onnx_type())
    return g.op("Expand", src, g.op("Shape", self))


# PopART's session option groupNormStridedChannelGrouping of the model being captured
# (set by strided_group_norm around its export)
_STRIDED = [False]


@contextlib.contextmanager
def strided_group_norm(on):
    """Within the body, group_norm groups channels strided (channel c in group c % G), as
    PopART does with its option groupNormStridedChannelGrouping; torch's grouping is
    contiguous (channel c in group c // (C / G))."""
    was, _STRIDED[0] = _STRIDED[0], bool(on)
    try:
        yield
    finally:
        _STRIDED[0] = was


def _gather(g, v, index, axis, like):
    out = g.op("Gather", v, g.op("Constant", value_t=torch.tensor(index, dtype=torch.int64)),
               axis_i=axis)
    out.setType(like.type())
    return out


def group_norm(g, input, num_groups, weight, bias, eps, cudnn_enabled):
    """The exporter's group_norm (InstanceNormalization on a reshaped input); with strided
    grouping (strided_group_norm) the channels are gathered group by group first (group
    k's channels k, k + G, ... side by side, the weight and bias with them) and put back
    after."""
    groups = sym._maybe_get_const(num_groups, "i")
    channels = sym._get_tensor_dim_size(input, 1)
    if not _STRIDED[0] or not isinstance(groups, int) or channels is None:
        return _contiguous_group_norm(g, input, num_groups, weight, bias, eps,
                                      cudnn_enabled)
    perm = [k * groups + grp for grp in range(groups) for k in range(channels // groups)]
    inv = sorted(range(channels), key=perm.__getitem__)
    x = _gather(g, input, perm, 1, input)
    if not sym._is_none(weight):
        weight = _gather(g, weight, perm, 0, weight)
    if not sym._is_none(bias):
        bias = _gather(g, bias, perm, 0, bias)
    y = _contiguous_group_norm(g, x, num_groups, weight, bias, eps, cudnn_enabled)
    return _gather(g, y, inv, 1, input)


def _contiguous_group_norm(g, input, num_groups, weight, bias, eps, cudnn_enabled):
    """The exporter's group_norm, which indexes a spatial dimension: a (N, C) input gets
    one of size 1 added, then removed."""
    sizes = sym._get_tensor_sizes(input)
    if sizes is not None and len(sizes) == 2:
        x = g.op("Unsqueeze", input, _s._ints(g, [2]))
        y = _opset9.group_norm(g, x, num_groups, weight, bias, eps, cudnn_enabled)
        return g.op("Squeeze", y, _s._ints(g, [2]))
    return _opset9.group_norm(g, input, num_groups, weight, bias, eps, cudnn_enabled)


def ctc_loss(g, log_probs, targets, input_lengths, target_lengths, blank, reduction,
             zero_infinity):
    """nn.CTCLoss as the daemon's ai.graphcore::CtcLoss (PopTorch's lowering): log_probs
    (T, N, C), padded targets (N, S), lengths (N); reduction mean or sum (PopTorch refuses
    none, and so does the daemon)."""
    def lengths(v):
        if sym._is_value(v) and v.type().kind() == "TensorType":
            return v
        vals = sym._maybe_get_const(v, "is")
        return g.op("Constant", value_t=torch.tensor(list(vals), dtype=torch.int64))
    r = sym._maybe_get_const(reduction, "i")
    red = {0: "none", 1: "mean", 2: "sum"}.get(r, "mean")
    return g.op("ai.graphcore::CtcLoss", log_probs, targets, lengths(input_lengths),
                lengths(target_lengths), blank_i=sym._maybe_get_const(blank, "i"),
                reduction_s=red,
                zero_infinity_i=int(bool(sym._maybe_get_const(zero_infinity, "b"))))


@sym.parse_args("v", "v", "i", "b", "v")
def embedding(g, weight, indices, padding_idx, scale_grad_by_freq, sparse):
    if scale_grad_by_freq:
        return _opset9.embedding(g, weight, indices, padding_idx, scale_grad_by_freq, sparse)
    y = g.op("Gather", weight, indices)
    if padding_idx is None or padding_idx < 0:
        return y
    pad = g.op("Constant", value_t=torch.tensor(padding_idx, dtype=torch.int64))
    idx = g.op("Cast", indices, to_i=7)  # INT64
    is_pad = g.op("Unsqueeze", g.op("Equal", idx, pad),
                  g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)))
    return g.op("Where", is_pad, g.op("ai.graphcore::Detach", y), y)


SYMBOLICS = (("embedding", embedding), ("copy", copy), ("group_norm", group_norm), ("ctc_loss", ctc_loss), ("cumprod", cumprod), ("col2im", col2im),
             ("avg_pool1d", _unbatched_pool("avg_pool1d", 1, _single)),
             ("avg_pool2d", _unbatched_pool("avg_pool2d", 2, _pair)),
             ("avg_pool3d", _unbatched_pool("avg_pool3d", 3, _triple)),
             ("all", all_), ("any", any_),
             ("binary_cross_entropy", binary_cross_entropy),
             ("hinge_embedding_loss", hinge_embedding_loss))
