"""PyTorch's math ops the exporter lacks or exports wrongly (python/ipuof/export/maths.py)
and the daemon's ops they need (sim/ops/op_math.c): each forward against torch, and one SGD
step against torch's where the op has a gradient."""
import copy

import pytest
import torch
import torch.nn as nn

import poptorch

from test_symbolics import Op, T   # a Linear layer, then the op; the tolerance


def _in(lo, hi):
    return lambda y: lo + (hi - lo) * torch.sigmoid(y)


TRAINED = {
    "sin": lambda y: torch.sin(y),
    "cos": lambda y: torch.cos(y),
    "tan": lambda y: torch.tan(0.5 * y),
    "asin": lambda y: torch.asin(_in(-0.9, 0.9)(y)),
    "acos": lambda y: torch.acos(_in(-0.9, 0.9)(y)),
    "atan": lambda y: torch.atan(y),
    "sinh": lambda y: torch.sinh(y),
    "cosh": lambda y: torch.cosh(y),
    "asinh": lambda y: torch.asinh(y),
    "acosh": lambda y: torch.acosh(_in(1.1, 3.0)(y)),
    "atanh": lambda y: torch.atanh(_in(-0.9, 0.9)(y)),
    "reciprocal": lambda y: torch.reciprocal(y.abs() + 0.5),
    "erfc": lambda y: torch.erfc(y),
    "expm1": lambda y: torch.expm1(y),
    "frac": lambda y: torch.frac(3 * y),
    "atan2": lambda y: torch.atan2(y[:, :3], y[:, 3:]),
    "addcdiv": lambda y: torch.addcdiv(y, y[:, :1], y.abs() + 0.5, value=-0.53),
    "median_dim": lambda y: torch.median(y, dim=1).values,
    "median_all": lambda y: torch.median(y).reshape(1),
    "sort_stable": lambda y: torch.sort(torch.round(y * 2), stable=True,
                                        descending=True).values,
}


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_math_forward_and_training_step(daemon, name):
    torch.manual_seed(7)
    m = Op(TRAINED[name])
    ref = copy.deepcopy(m)
    x = torch.randn(5, 6)
    pm = poptorch.inferenceModel(m)
    try:
        out, _ = pm(x)
        torch.testing.assert_close(out, ref(x)[0], **T)
    finally:
        pm.destroy()

    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(x)[1].backward()
    opt.step()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    try:
        pm(x)
        torch.testing.assert_close(m.fc.weight, ref.fc.weight, **T)
    finally:
        pm.destroy()


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _same(fn, *args):
    pm = poptorch.inferenceModel(Fn(fn))
    try:
        got = pm(*args)
    finally:
        pm.destroy()
    want = fn(*args)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype or (w.dtype == torch.int64 and g.dtype == torch.int32)
            torch.testing.assert_close(g.to(w.dtype), w, **T)
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        torch.testing.assert_close(got, want, **T)


INTS = (torch.tensor([-4, 7, 5, 4, -7, 8], dtype=torch.int32),
        torch.tensor([2, -3, 8, -2, 3, 5], dtype=torch.int32))
BOOLS = (torch.tensor([False, True, False, True]), torch.tensor([False, False, True, True]))


@pytest.mark.parametrize("op", ["and", "or", "xor"])
@pytest.mark.parametrize("kind", ["int", "bool", "operator", "scalar"])
def test_bitwise(daemon, op, kind):
    fn = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}[op]
    opr = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[op]
    if kind == "int":
        _same(fn, *INTS)
    elif kind == "bool":
        _same(fn, *BOOLS)
    elif kind == "operator":
        _same(opr, *INTS)
    else:
        _same(lambda a: opr(a, 6), INTS[0])


def test_bitwise_not(daemon):
    _same(torch.bitwise_not, INTS[0])
    _same(lambda a: ~a, BOOLS[0])


def test_median_indices_and_amax_all(daemon):
    x = torch.randn(2, 5, 4)
    _same(lambda a: torch.median(a, dim=1, keepdim=True), x)
    _same(lambda a: torch.median(a, dim=-1), x)
    _same(lambda a: torch.amax(a), x)
    _same(lambda a: torch.amin(a, dim=(0, 2), keepdim=True), x)


def test_sort_stable_keeps_order_of_ties(daemon):
    x = torch.tensor([[2.0, 2.0, 1.0, 10.0, 11.0], [2.0, 15.0, 15.0, 10.0, 11.0]])
    for desc in (False, True):
        _same(lambda a: torch.sort(a, descending=desc, stable=True), x)


@pytest.mark.parametrize("bounds", [dict(min=-4.5, max=5.5), dict(min=-4.5), dict(max=5),
                                    dict(min=-5, max=5)])
def test_clamp_of_integers(daemon, bounds):
    _same(lambda a: torch.clamp(a, **bounds), torch.randint(-100, 100, (50,)))


def test_bincount(daemon):
    x = torch.tensor([0, 3, 3, 7, 1, 3, 9])     # 9 is past minlength: not counted
    got = poptorch.inferenceModel(Fn(lambda a: torch.bincount(a, minlength=8)))(x)
    torch.testing.assert_close(got, torch.bincount(x[:6], minlength=8))
    w = torch.linspace(0, 1, 6)
    _same(lambda a: torch.bincount(a, w, minlength=8), x[:6])
    with pytest.raises(poptorch.poptorch_core.Error, match="Bincount `minlength` must be"):
        poptorch.inferenceModel(Fn(lambda a: torch.bincount(a)))(x)
