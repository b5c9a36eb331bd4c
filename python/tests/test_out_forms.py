"""What PyTorch's exporter could not capture or captured as the daemon cannot take: the
out= forms of matmul, bmm, cumsum and addmv (an argument more than its symbolics take),
addmv's rule that a term with factor 0 is left out (NaN in it does not propagate), and
float64 constants of Python scalars (baddbmm's beta and alpha), narrowed to float32."""
import pytest
import torch
import torch.nn as nn

import poptorch


class OutModel(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _check(fn, *args, **tol):
    expected = fn(*[a.clone() for a in args])
    pm = poptorch.inferenceModel(OutModel(fn))
    got = pm(*args)
    pm.destroy()
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, **tol)


@pytest.mark.parametrize("op", [torch.matmul, torch.bmm])
def test_matmul_and_bmm_out(daemon, op):
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    _check(lambda x, y, o: op(x, y, out=o), a, b, torch.empty(2, 3, 5))


def test_cumsum_out_sums_in_the_out_dtype(daemon):
    x = torch.tensor([[0.7, 0.6, 1.9, -0.4]])
    # torch casts to int32 first: 0, 0, 1, 0 -> 0, 0, 1, 1 (the float sum would be 3).
    _check(lambda v: torch.cumsum(v, dim=1, out=torch.empty(1, 4, dtype=torch.int32)), x)
    _check(lambda v: torch.cumsum(v, dim=1, out=torch.empty(1, 4)), x)


@pytest.mark.parametrize("alpha,beta", [(0.0, 0.5), (1.5, 0.0), (0.0, 0.0), (1.5, 0.5)])
def test_addmv_ignores_a_term_with_factor_zero(daemon, alpha, beta):
    mat, vec, inp = torch.randn(5, 3), torch.randn(3), torch.randn(5)
    if beta == 0:
        inp[0] = float("nan")
    if alpha == 0:
        mat[0, 0] = float("nan")
        vec[0] = float("nan")
    _check(lambda i, m, v: torch.addmv(i, m, v, beta=beta, alpha=alpha), inp, mat, vec)
    _check(lambda i, m, v, o: torch.addmv(i, m, v, beta=beta, alpha=alpha, out=o),
           inp, mat, vec, torch.empty(5))


def test_baddbmm_double_scalars(daemon):
    a, b, c = torch.randn(1, 7), torch.randn(2, 3, 5), torch.randn(2, 5, 7)
    _check(lambda x, y, z: torch.baddbmm(x, y, z, beta=0.75, alpha=0.5), a, b, c,
           rtol=1e-5, atol=1e-5)
