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
- aten::nansum, aten::count_nonzero, aten::addmv: the exporter has none.
- The out= forms of matmul, bmm, cumsum and addmv reach the exporter with one argument
  more than its symbolics take: the same symbolic, then a Cast to out's dtype when it
  differs (torch converts the result into out; cumsum casts its input to out's dtype
  first, as torch sums in it).
- aten::roll (the exporter does not reduce a shift modulo the size: a shift past the end
  gave other values) and aten::pairwise_distance (the exporter drops the absolute value
  and adds eps to p: NaN for odd p): torch's definitions.
- ONNX ops the daemon lacks, written with ops it has: Tile (aten::repeat: Reshape, Expand,
  Reshape), PRelu (Relu(x) - w Relu(-x)), Selu and Celu (Elu), GatherElements
  (aten::gather: a one-hot mask, multiplied and summed).
- aten::instance_norm with running statistics: with the input's statistics it is ONNX
  InstanceNormalization (the exporter would reshape to a BatchNormalization over N*C
  channels whose running statistics are repeated N times); in eval mode the running
  statistics' normalisation. aten::group_norm is the exporter's own (InstanceNormalization
  on a reshaped input, then the affine): the daemon has InstanceNormalization.
- Losses the exporter lacks: smooth_l1, soft_margin, margin_ranking, poisson_nll (full
  Stirling term too) and triplet_margin (p-norm distances, swap), each torch's formula.
- aten::uniform (Tensor.uniform_(from, to)): the exporter has none; RandomUniformLike of
  the tensor with low = from, high = to (its dtype: the daemon's op_random.c draws).
"""
import torch
from torch.onnx import _type_utils
from torch.onnx import symbolic_helper as sym
from torch.onnx import symbolic_opset9 as _opset9
from torch.onnx import symbolic_opset11 as _opset11

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
    dt = {"Long": torch.int64, "Int": torch.int32, "Bool": torch.bool,
          "Byte": torch.uint8, "Char": torch.int8}.get(x.type().scalarType(), torch.int64)
    return g.op("Constant", value_t=torch.tensor(0, dtype=dt))


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


# ---- ops the daemon lacks, as ops it has -------------------------------------------------

def _ints(g, values):
    return g.op("Constant", value_t=torch.tensor(list(values), dtype=torch.int64))


def _sizes(x, what):
    sizes = sym._get_tensor_sizes(x)
    if sizes is None or any(d is None for d in sizes):
        raise RuntimeError(f"{what}: the input's shape must be known at capture")
    return list(sizes)


def repeat(g, self, repeats):
    """Tensor.repeat (ONNX Tile, not a daemon op): the input with a 1 before each of its
    dimensions, expanded to (r0, d0, r1, d1, ...) and reshaped to (r0 d0, r1 d1, ...)."""
    reps = sym._maybe_get_const(repeats, "is")
    if not isinstance(reps, (list, tuple)):
        raise RuntimeError("repeat: the repeats must be constants")
    reps = [int(r) for r in reps]
    dims = _sizes(self, "repeat")
    dims = [1] * (len(reps) - len(dims)) + dims
    inter = []
    for d in dims:
        inter += [1, d]
    big = []
    for r, d in zip(reps, dims):
        big += [r, d]
    x = g.op("Reshape", self, _ints(g, inter))
    x = g.op("Expand", x, _ints(g, big))
    return g.op("Reshape", x, _ints(g, [r * d for r, d in zip(reps, dims)]))


def prelu(g, self, weight):
    """PReLU as Relu(x) - w * Relu(-x), w over the channel dimension (1)."""
    rank = len(_sizes(self, "prelu"))
    wsz = _sizes(weight, "prelu")
    w = weight
    if rank >= 2 and wsz and wsz[0] > 1:
        w = g.op("Reshape", weight, _ints(g, [wsz[0]] + [1] * (rank - 2)))
    return g.op("Sub", g.op("Relu", self), g.op("Mul", w, g.op("Relu", g.op("Neg", self))))


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def selu(g, input):
    return g.op("Mul", g.op("Elu", input, alpha_f=_SELU_ALPHA),
                _const(g, _SELU_SCALE, input))


def celu(g, self, alpha):
    a = float(sym._maybe_get_const(alpha, "f"))
    x = g.op("Div", self, _const(g, a, self))
    return g.op("Mul", g.op("Elu", x, alpha_f=1.0), _const(g, a, self))


def gather(g, self, dim, index, sparse_grad=False):
    """torch.gather (ONNX GatherElements, not a daemon op) by a one-hot mask: the input cut
    to the index's extent in the other dimensions, its dimension dim moved last behind a 1,
    times (index == 0..n-1), summed over that last dimension."""
    d = sym._maybe_get_const(dim, "i")
    isz = _sizes(self, "gather")
    xsz = _sizes(index, "gather")
    rank = len(isz)
    d = d % rank
    x = self
    if any(xsz[k] != isz[k] for k in range(rank) if k != d):
        ends = [xsz[k] if k != d else isz[k] for k in range(rank)]
        x = g.op("Slice", x, _ints(g, [0] * rank), _ints(g, ends), _ints(g, range(rank)))
    perm = [k for k in range(rank) if k != d] + [d]
    x = g.op("Transpose", x, perm_i=perm)
    # (.., n) with a 1 back at d: x[i, 1, k, s] = input[i, s, k]
    shape = [xsz[k] if k != d else 1 for k in range(rank)] + [isz[d]]
    x = g.op("Reshape", x, _ints(g, shape))
    hot = g.op("Equal", g.op("Unsqueeze", index, _ints(g, [rank])),
               _ints(g, range(isz[d])))
    st = self.type().scalarType()
    if sym._is_fp(self):
        hot = g.op("Cast", hot, to_i=_FLOAT)
    else:
        hot = g.op("Cast", hot, to_i=7)
        x = g.op("Cast", x, to_i=7)
    out = g.op("ReduceSum", g.op("Mul", x, hot), _ints(g, [rank]), keepdims_i=0)
    if st == "Int":
        out = g.op("Cast", out, to_i=6)
    elif not sym._is_fp(self) and st != "Long":
        raise RuntimeError(f"gather: {st} inputs are not supported (float, int32, int64)")
    return out


def instance_norm(g, input, weight, bias, running_mean, running_var, use_input_stats,
                  momentum, eps, cudnn_enabled):
    """InstanceNorm: with the input's statistics ONNX InstanceNormalization, the daemon's
    op (running statistics that torch would update in training are not: the capture's
    buffer check refuses such a model); with running statistics, their normalisation."""
    use = sym._maybe_get_const(use_input_stats, "b")
    sizes = _sizes(input, "instance_norm")
    e = float(sym._maybe_get_const(eps, "f"))
    if use:
        ones = torch.ones(sizes[1])
        w = g.op("Constant", value_t=ones) if sym._is_none(weight) else weight
        b = g.op("Constant", value_t=ones * 0) if sym._is_none(bias) else bias
        return g.op("InstanceNormalization", input, w, b, epsilon_f=e)
    stat = _ints(g, [sizes[1]] + [1] * (len(sizes) - 2))
    y = g.op("Div", g.op("Sub", input, g.op("Reshape", running_mean, stat)),
             g.op("Sqrt", g.op("Add", g.op("Reshape", running_var, stat),
                               _const(g, e, input))))
    if not sym._is_none(weight):
        y = g.op("Mul", y, g.op("Reshape", weight, stat))
    if not sym._is_none(bias):
        y = g.op("Add", y, g.op("Reshape", bias, stat))
    return y


def _as_out(g, result, out):
    """result cast to the dtype of out (the out= form's destination), when given and of
    another dtype: torch writes the result into out, converting it."""
    if out is None or sym._is_none(out):
        return result
    st = out.type().scalarType() if out.type().kind() == "TensorType" else None
    rt = result.type().scalarType() if result.type().kind() == "TensorType" else None
    if st is None or st == rt:
        return result
    return g.op("Cast", result, to_i=_type_utils.JitScalarType.from_name(st).onnx_type())


def matmul(g, self, other, out=None):
    """torch.matmul, also its out= form (the exporter's symbolic takes no out)."""
    return _as_out(g, _opset9.matmul(g, self, other), out)


def bmm(g, self, other, out=None):
    return _as_out(g, _opset9.bmm(g, self, other), out)


def cumsum(g, self, dim, dtype=None, out=None):
    """torch.cumsum, also its out= form, where torch sums in out's type (the input cast
    to it first: float 0.7 + 0.6 into an int32 out is 0, not 1)."""
    if out is not None and not sym._is_none(out):
        self = _as_out(g, self, out)
    return _opset11.cumsum(g, self, dim, dtype)


def addmv(g, self, mat, vec, beta, alpha, out=None):
    """beta * self + alpha * (mat @ vec): the exporter has no aten::addmv."""
    return _as_out(g, _addmv(g, self, mat, vec, beta, alpha), out)


def _addmv(g, self, mat, vec, beta, alpha):
    """torch's rule: a term whose factor is 0 is left out, so NaN or inf in it does not
    propagate (beta == 0: self is ignored; alpha == 0: mat and vec are)."""
    b = float(sym._maybe_get_const(beta, "f"))
    a = float(sym._maybe_get_const(alpha, "f"))
    terms = []
    if a != 0.0:
        mv = g.op("MatMul", mat, vec)
        terms.append(mv if a == 1.0 else g.op("Mul", mv, _const(g, a, mv)))
    if b != 0.0:
        terms.append(self if b == 1.0 else g.op("Mul", self, _const(g, b, self)))
    if len(terms) < 2:
        # Zeros of the result's length (mat's rows), added to keep torch's broadcast.
        rows = g.op("Slice", g.op("Shape", mat), _ints(g, [0]), _ints(g, [1]))
        terms.append(g.op("Expand", _const(g, 0.0, self), rows))
    out = terms[0]
    for t in terms[1:]:
        out = g.op("Add", out, t)
    return out


# ---- losses the exporter lacks -------------------------------------------------------------

def smooth_l1_loss(g, self, target, reduction, beta):
    b = float(sym._maybe_get_const(beta, "f"))
    d = g.op("Abs", g.op("Sub", self, target))
    if b == 0.0:
        return _reduce(g, d, reduction)
    quad = g.op("Div", g.op("Mul", g.op("Mul", d, d), _const(g, 0.5, self)),
                _const(g, b, self))
    lin = g.op("Sub", d, _const(g, 0.5 * b, self))
    return _reduce(g, g.op("Where", g.op("Less", d, _const(g, b, self)), quad, lin),
                   reduction)


def soft_margin_loss(g, self, target, reduction):
    return _reduce(g, g.op("Softplus", g.op("Neg", g.op("Mul", self, target))), reduction)


def margin_ranking_loss(g, input1, input2, target, margin, reduction):
    m = float(sym._maybe_get_const(margin, "f"))
    v = g.op("Add", g.op("Neg", g.op("Mul", target, g.op("Sub", input1, input2))),
             _const(g, m, input1))
    return _reduce(g, g.op("Relu", v), reduction)


def poisson_nll_loss(g, input, target, log_input, full, eps, reduction):
    if sym._maybe_get_const(log_input, "b"):
        loss = g.op("Sub", g.op("Exp", input), g.op("Mul", target, input))
    else:
        e = float(sym._maybe_get_const(eps, "f"))
        loss = g.op("Sub", input,
                    g.op("Mul", target, g.op("Log", g.op("Add", input, _const(g, e, input)))))
    if sym._maybe_get_const(full, "b"):
        # Stirling's term t log t - t + log(2 pi t) / 2 where t > 1.
        t = target
        st = g.op("Add", g.op("Sub", g.op("Mul", t, g.op("Log", t)), t),
                  g.op("Mul", g.op("Log", g.op("Mul", t, _const(g, 2 * 3.141592653589793, t))),
                       _const(g, 0.5, t)))
        one = _const(g, 1.0, t)
        loss = g.op("Add", loss, g.op("Where", g.op("Greater", t, one), st,
                                      _const(g, 0.0, t)))
    return _reduce(g, loss, reduction)


def _pdist(g, a, b, p, eps, keep=0):
    """||a - b + eps||_p over the last dimension (torch's pairwise_distance)."""
    d = g.op("Add", g.op("Sub", a, b), _const(g, eps, a))
    rank = max(len(_sizes(a, "pairwise distance")), len(_sizes(b, "pairwise distance")))
    axis = _ints(g, [rank - 1])
    if p == 2.0:
        return g.op("Sqrt", g.op("ReduceSum", g.op("Mul", d, d), axis, keepdims_i=keep))
    if p == 1.0:
        return g.op("ReduceSum", g.op("Abs", d), axis, keepdims_i=keep)
    powd = g.op("Pow", g.op("Abs", d), _const(g, p, a))
    return g.op("Pow", g.op("ReduceSum", powd, axis, keepdims_i=keep), _const(g, 1.0 / p, a))


def pairwise_distance(g, input1, input2, p, eps, keepdim):
    """The exporter's takes (x1 - x2)^p without the absolute value and adds eps to p (a
    NaN for odd p and negative differences); torch's is ||x1 - x2 + eps||_p."""
    return _pdist(g, input1, input2, float(sym._maybe_get_const(p, "f")),
                  float(sym._maybe_get_const(eps, "f")),
                  int(sym._maybe_get_const(keepdim, "i")))


def roll(g, self, shifts, dims):
    """torch.roll; the exporter slices at -shift without reducing it modulo the size, so
    a shift larger than the dimension gave other values."""
    sh = sym._maybe_get_const(shifts, "is")
    dm = sym._maybe_get_const(dims, "is")
    if not isinstance(sh, (list, tuple)) or not isinstance(dm, (list, tuple)):
        raise RuntimeError("roll: shifts and dims must be constants")
    sizes = _sizes(self, "roll")
    result = self
    if not dm:  # roll of the flattened tensor
        flat = g.op("Reshape", self, _ints(g, [-1]))
        n = 1
        for d in sizes:
            n *= d
        k = sh[0] % n if n else 0
        if k:
            flat = g.op("Concat", g.op("Slice", flat, _ints(g, [n - k]), _ints(g, [n]),
                                       _ints(g, [0])),
                        g.op("Slice", flat, _ints(g, [0]), _ints(g, [n - k]), _ints(g, [0])),
                        axis_i=0)
        return g.op("Reshape", flat, _ints(g, sizes))
    for s_, d in zip(sh, dm):
        d = d % len(sizes)
        n = sizes[d]
        k = s_ % n if n else 0
        if k == 0:
            continue
        tail = g.op("Slice", result, _ints(g, [n - k]), _ints(g, [n]), _ints(g, [d]))
        head = g.op("Slice", result, _ints(g, [0]), _ints(g, [n - k]), _ints(g, [d]))
        result = g.op("Concat", tail, head, axis_i=d)
    return result


def triplet_margin_loss(g, anchor, positive, negative, margin, p, eps, swap, reduction):
    m = float(sym._maybe_get_const(margin, "f"))
    pn = float(sym._maybe_get_const(p, "f"))
    e = float(sym._maybe_get_const(eps, "f"))
    d_ap = _pdist(g, anchor, positive, pn, e)
    d_an = _pdist(g, anchor, negative, pn, e)
    if sym._maybe_get_const(swap, "b"):
        d_pn = _pdist(g, positive, negative, pn, e)
        d_an = g.op("Where", g.op("Less", d_pn, d_an), d_pn, d_an)
    v = g.op("Add", g.op("Sub", d_ap, d_an), _const(g, m, anchor))
    return _reduce(g, g.op("Relu", v), reduction)


@sym.parse_args("v", "f", "f", "v")
def uniform(g, self, low, high, generator=None):
    return g.op("RandomUniformLike", self, low_f=low, high_f=high)


def register():
    """Registers the symbolics above for OPSET (idempotent); _symbolics_all.register adds
    the extension modules' (symbolics_*.py), which build on this module's helpers."""
    torch.onnx.register_custom_op_symbolic("aten::floor_divide", floor_divide, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::softplus", softplus, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::mse_loss", mse_loss, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::l1_loss", l1_loss, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::nansum", nansum, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::count_nonzero", count_nonzero, OPSET)
    torch.onnx.register_custom_op_symbolic("aten::uniform", uniform, OPSET)
    for name, fn in (("repeat", repeat), ("prelu", prelu), ("selu", selu), ("celu", celu),
                     ("gather", gather), ("instance_norm", instance_norm),
                     ("addmv", addmv), ("roll", roll), ("matmul", matmul), ("bmm", bmm),
                     ("cumsum", cumsum),
                     ("pairwise_distance", pairwise_distance),
                     ("smooth_l1_loss", smooth_l1_loss),
                     ("soft_margin_loss", soft_margin_loss),
                     ("margin_ranking_loss", margin_ranking_loss),
                     ("poisson_nll_loss", poisson_nll_loss),
                     ("triplet_margin_loss", triplet_margin_loss)):
        torch.onnx.register_custom_op_symbolic("aten::" + name, fn, OPSET)
