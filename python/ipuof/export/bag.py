"""aten::embedding_bag (nn.EmbeddingBag, F.embedding_bag) for opset 14, registered by
symbolics.register.

PyTorch's exporter writes it as an ONNX Loop over the bags whose trip count is the length of
`offsets` computed at run time (Shape, Slice, Gather), which the daemon cannot unroll when it
loads the model. Here the bags are a mask instead, with static shapes only (the sizes of
`indices` and `offsets` are known at capture, their values may be data):

    pos     = 0 .. N-1                                 (N indices, a constant)
    start_b = offsets[b], end_b = offsets[b+1]         (the last end: N, or offsets[B] with
                                                        include_last_offset)
    in[b,i] = start_b <= pos_i < end_b  and  indices[i] != padding_idx
    rows    = weight[indices] (* per_sample_weights[:, None])          (N, D)
    sum     = in @ rows;  mean = sum / max(count_b, 1)                 (B, D)
    max     = ReduceMax over i of Where(in[b,i], rows[i], -FLT_MAX), 0 for an empty bag

which is torch's definition (an empty bag gives zeros in every mode; padding_idx entries are
neither summed nor counted). The gradient reaches `weight` (and per_sample_weights) through
Gather, MatMul, Div, Where and ReduceMax, as torch's does (max: the chosen row's). Cost: a
B x N mask and, for max, a B x N x D select; fine for the bag sizes of models, not for
millions of indices. scale_grad_by_freq in training is refused (as torch's exporter does).
"""
import torch
from torch.onnx import symbolic_helper as sym

from . import symbolics as _s

_FLOAT_MAX = 3.4028234663852886e38


def _scalar_const(g, value, like):
    return _s._const(g, value, like)


def _training():
    """Whether the export under way is a training one."""
    try:
        from torch.onnx._globals import GLOBALS
    except ImportError:     # older torch: the flag lived in symbolic_helper
        return bool(getattr(sym, "_training_mode", False))
    return bool(GLOBALS.export_training)


@sym.parse_args("v", "v", "v", "i", "i", "i", "v", "i", "i")
def embedding_bag(g, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                  per_sample_weights, include_last_offset, padding_idx):
    if scale_grad_by_freq and _training():
        raise RuntimeError("embedding_bag with scale_grad_by_freq=True cannot be trained "
                           "on the IPU (the gradient's scaling by frequency is not "
                           "exported); use scale_grad_by_freq=False")
    n = _s._sizes(indices, "embedding_bag (indices)")
    o = _s._sizes(offsets, "embedding_bag (offsets)")
    if len(n) != 1 or len(o) != 1:
        raise RuntimeError(f"embedding_bag: indices and offsets must be 1-D here (given "
                           f"{len(n)}-D and {len(o)}-D)")
    n, n_off = n[0], o[0]
    bags = n_off - 1 if include_last_offset else n_off
    if bags < 0:
        raise RuntimeError("embedding_bag: include_last_offset=True needs at least one offset")
    pos = g.op("Constant", value_t=torch.arange(n, dtype=torch.int64).reshape(1, n))
    starts = g.op("Slice", offsets, _s._ints(g, [0]), _s._ints(g, [bags]), _s._ints(g, [0]))
    if include_last_offset:
        ends = g.op("Slice", offsets, _s._ints(g, [1]), _s._ints(g, [bags + 1]),
                    _s._ints(g, [0]))
    else:
        ends = g.op("Concat",
                    g.op("Slice", offsets, _s._ints(g, [1]), _s._ints(g, [bags]),
                         _s._ints(g, [0])),
                    _s._ints(g, [n]), axis_i=0)
    col = _s._ints(g, [1])
    starts = g.op("Unsqueeze", g.op("Cast", starts, to_i=7), col)   # (B, 1) int64
    ends = g.op("Unsqueeze", g.op("Cast", ends, to_i=7), col)
    inside = g.op("And", g.op("GreaterOrEqual", pos, starts), g.op("Less", pos, ends))
    if padding_idx is not None and padding_idx >= 0:
        keep = g.op("Not", g.op("Equal", g.op("Cast", indices, to_i=7),
                                g.op("Constant", value_t=torch.tensor(padding_idx))))
        inside = g.op("And", inside, g.op("Unsqueeze", keep, _s._ints(g, [0])))
    rows = g.op("Gather", weight, indices, axis_i=0)                 # (N, D)
    if not sym._is_none(per_sample_weights):
        rows = g.op("Mul", rows, g.op("Unsqueeze", per_sample_weights, col))
    maskf = g.op("Cast", inside, to_i=_s._FLOAT)                     # (B, N)
    count = g.op("ReduceSum", maskf, _s._ints(g, [1]), keepdims_i=1)  # (B, 1)
    if mode in (0, 1):
        out = g.op("MatMul", maskf, rows)
        if mode == 1:
            out = g.op("Div", out, g.op("Max", count, _scalar_const(g, 1.0, weight)))
    elif mode == 2:
        sel = g.op("Where", g.op("Unsqueeze", inside, _s._ints(g, [2])),
                   g.op("Unsqueeze", rows, _s._ints(g, [0])),
                   _scalar_const(g, -_FLOAT_MAX, weight))               # (B, N, D)
        best = g.op("ReduceMax", sel, axes_i=[1], keepdims_i=0)
        out = g.op("Where", g.op("Greater", count, _scalar_const(g, 0.0, weight)), best,
                   _scalar_const(g, 0.0, weight))
    else:
        raise RuntimeError(f"embedding_bag: mode {mode} is not sum (0), mean (1) or max (2)")
    return out, None, None, None
