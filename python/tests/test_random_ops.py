"""Random generators inside a model (torch.rand, torch.randn, torch.normal, rand_like,
randn_like, torch.distributions' sample(), Tensor.normal_) on a real ipuofd: the ONNX ops
RandomUniform, RandomNormal, RandomUniformLike and RandomNormalLike of sim/ops/op_random.c.

The draws are the daemon's, not torch's, so the checks are statistical, with stated bounds:
for n draws the sample mean of U(low, high) is within 6 standard errors
(6 (high - low) / sqrt(12 n)) of (low + high) / 2, and its standard deviation within 5 %
of (high - low) / sqrt(12); N(mean, scale) likewise (6 scale / sqrt(n), 5 %). With n >= 
60 000 a correct generator fails these with probability < 1e-8. Every uniform draw lies
in [low, high]. The seed is PopTorch's: the same Options.randomSeed gives the same values,
another seed other values, and each call (micro-batch) draws anew."""
import math

import pytest
import torch

import poptorch


def run(fn, x, seed=None, iterations=1):
    class Model(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    opts = poptorch.Options()
    if seed is not None:
        opts.randomSeed(seed)
    if iterations > 1:
        opts.deviceIterations(iterations)
    pm = poptorch.inferenceModel(Model(), opts)
    out = pm(x)
    return pm, out


def check_uniform(y, low, high):
    n = y.numel()
    y = y.double()
    mean, std = y.mean().item(), y.std().item()
    want_std = (high - low) / math.sqrt(12)
    print(f"uniform n={n}: mean {mean:.5f} (want {(low + high) / 2}), std {std:.5f} "
          f"(want {want_std:.5f})")
    assert abs(mean - (low + high) / 2) < 6 * want_std / math.sqrt(n)
    assert abs(std - want_std) < 0.05 * want_std
    assert y.min().item() >= low and y.max().item() <= high


def check_normal(y, mean_want, scale):
    n = y.numel()
    y = y.double()
    mean, std = y.mean().item(), y.std().item()
    print(f"normal n={n}: mean {mean:.5f} (want {mean_want}), std {std:.5f} (want {scale})")
    assert abs(mean - mean_want) < 6 * scale / math.sqrt(n)
    assert abs(std - scale) < 0.05 * scale


def test_rand_uniform(daemon):
    pm, y = run(lambda x: torch.rand(4, 150, 100) * 0 + torch.rand(4, 150, 100) + x * 0,
                torch.zeros(1))
    assert y.shape == (4, 150, 100) and y.dtype == torch.float32
    check_uniform(y, 0.0, 1.0)
    pm.destroy()


def test_randn_normal(daemon):
    pm, y = run(lambda x: torch.randn(60000) * 3.0 + 2.0 + x, torch.zeros(1))
    check_normal(y, 2.0, 3.0)
    pm.destroy()


def test_like_and_normal_of_tensor(daemon):
    """rand_like / randn_like (RandomUniformLike / RandomNormalLike with dtype), and
    torch.normal(mean_tensor, std) (RandomNormalLike of the mean)."""
    x = torch.zeros(300, 200)
    pm, y = run(lambda x: torch.rand_like(x) * 4.0 - 1.0, x)
    assert y.shape == x.shape
    check_uniform(y, -1.0, 3.0)
    pm.destroy()
    pm, y = run(lambda x: torch.normal(x + 5.0, 0.5), x)
    check_normal(y, 5.0, 0.5)
    pm.destroy()


def test_uniform_(daemon):
    """Tensor.uniform_(from, to) (aten::uniform, the package's symbolic) and
    Tensor.normal_() (the exporter's RandomNormalLike)."""
    x = torch.zeros(300, 200)
    pm, y = run(lambda x: (x + 0).uniform_(-2.0, 5.0), x)
    assert y.shape == x.shape
    check_uniform(y, -2.0, 5.0)
    pm.destroy()
    pm, y = run(lambda x: (x + 0).normal_(), x)
    check_normal(y, 0.0, 1.0)
    pm.destroy()


def test_seed_reproducible(daemon):
    """Options.randomSeed: the same seed, the same draws; another seed, others; each
    device iteration and each call draws anew."""
    fn = lambda x: torch.rand(1000) + x  # noqa: E731
    x = torch.zeros(1)
    a, ya = run(fn, x, seed=42)
    b, yb = run(fn, x, seed=42)
    c, yc = run(fn, x, seed=7)
    assert torch.equal(ya, yb)
    assert not torch.equal(ya, yc)
    assert not torch.equal(ya, a(x))  # the next call draws again
    for m in (a, b, c):
        m.destroy()
    d, yd = run(fn, torch.zeros(3, 1), seed=42, iterations=3)
    assert yd.shape == (3 * 1000,) or yd.shape[0] == 3
    rows = yd.reshape(3, -1)
    assert not torch.equal(rows[0], rows[1]) and not torch.equal(rows[1], rows[2])
    d.destroy()


def test_float16_dtype(daemon):
    """dtype float16: RandomUniform with dtype 10 (torch.rand(..., dtype=torch.float16)),
    values in [0, 1], the statistics as float's."""
    pm, y = run(lambda x: torch.rand(300, 200, dtype=torch.float16) + x, torch.zeros(1).half())
    assert y.dtype == torch.float16
    check_uniform(y.float(), 0.0, 1.0)
    pm.destroy()
