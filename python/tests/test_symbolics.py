"""Ops PyTorch's exporter lacks, or exports as ONNX ops the daemon lacks, captured through
the package's symbolics (python/ipuof/export/symbolics.py): forward against torch, and one SGD step
where the op has gradients."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import poptorch

T = dict(rtol=1e-4, atol=1e-5)


class Op(nn.Module):
    """A linear layer (so there are weights to train) followed by fn."""

    def __init__(self, fn, n=6):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.fn = fn

    def forward(self, x, *rest):
        out = self.fn(self.fc(x), *rest)
        return out, poptorch.identity_loss((out.float() ** 2).mean(), reduction="sum")


CASES = {
    "repeat": (lambda y: y.repeat(2, 1, 3), [torch.rand(3, 6)]),
    "prelu_channels": (nn.PReLU(6), [torch.randn(4, 6)]),
    "prelu_one": (nn.PReLU(), [torch.randn(4, 6)]),
    "selu": (nn.SELU(), [torch.randn(4, 6)]),
    "celu": (nn.CELU(0.7), [torch.randn(4, 6)]),
    "gather_dim1": (lambda y, i: torch.gather(y, 1, i),
                    [torch.randn(4, 6), torch.randint(0, 6, (4, 3))]),
    "gather_dim0": (lambda y, i: torch.gather(y, 0, i),
                    [torch.randn(4, 6), torch.randint(0, 4, (2, 6))]),
    "instance_norm": (lambda y: nn.functional.instance_norm(y.reshape(2, 3, 4)),
                      [torch.randn(2, 12)], 12),
    "addmv": (lambda y, m, v: torch.addmv(y[:, 0], m, v, beta=0.5, alpha=2.0),
              [torch.randn(4, 6), torch.randn(4, 3), torch.randn(3)]),
    "roll_past_the_end": (lambda y: torch.roll(y, shifts=10, dims=1), [torch.randn(4, 6)]),
    "roll_two_dims": (lambda y: torch.roll(y, shifts=(-7, 2), dims=(1, 0)), [torch.randn(4, 6)]),
    "roll_flat": (lambda y: torch.roll(y, 5), [torch.randn(4, 6)]),
    "pairwise_distance_p3": (lambda y, z: F.pairwise_distance(y, z, p=3.0, eps=1e-3,
                                                              keepdim=True),
                             [torch.randn(4, 6), torch.randn(4, 6)]),
    "smooth_l1": (lambda y, t: F.smooth_l1_loss(y, t, beta=0.5),
                  [torch.randn(4, 6), torch.randn(4, 6)]),
    "smooth_l1_none": (lambda y, t: F.smooth_l1_loss(y, t, reduction="none"),
                       [torch.randn(4, 6), torch.randn(4, 6)]),
    "soft_margin": (lambda y, t: F.soft_margin_loss(y, t),
                    [torch.randn(4, 6), torch.randint(0, 2, (4, 6)).float() * 2 - 1]),
    "margin_ranking": (lambda y, a, t: F.margin_ranking_loss(y, a, t, margin=0.3),
                       [torch.randn(4, 6), torch.randn(4, 6),
                        torch.randint(0, 2, (4, 6)).float() * 2 - 1]),
    "poisson_nll_log": (lambda y, t: F.poisson_nll_loss(y, t, log_input=True, full=True),
                        [torch.randn(4, 6), torch.rand(4, 6) * 3]),
    "poisson_nll": (lambda y, t: F.poisson_nll_loss(y.abs(), t, log_input=False,
                                                    reduction="sum"),
                    [torch.randn(4, 6), torch.rand(4, 6) * 3]),
    "triplet": (lambda y, p, n: F.triplet_margin_loss(y, p, n, margin=0.5),
                [torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6)]),
    "triplet_swap_p1": (lambda y, p, n: F.triplet_margin_loss(y, p, n, p=1.0, swap=True),
                        [torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6)]),
    # export/extra.py
    "cumprod": (lambda y: torch.cumprod(y, dim=1), [torch.randn(4, 6)]),
    "cumprod_dim0": (lambda y: torch.cumprod(y.reshape(2, 2, 6), dim=0), [torch.randn(4, 6)]),
    "fold": (lambda y: F.fold(y.reshape(1, 4, 6), (3, 4), (2, 2)), [torch.randn(4, 6)]),
    # stride 3 over 11 rows with padding 1: the last rows lie past the patches' reach.
    "fold_stride_padding": (lambda y: F.fold(y.reshape(1, 9, 16), (11, 11), (3, 3),
                                             stride=3, padding=1),
                            [torch.randn(16, 9)], 9),
    "avg_pool_unbatched": (lambda y: F.avg_pool1d(y, 3, stride=1, padding=1,
                                                  count_include_pad=True),
                           [torch.randn(4, 6)]),
    "bce": (lambda y, t: F.binary_cross_entropy(torch.sigmoid(y), t),
            [torch.randn(4, 6), torch.rand(4, 6)]),
    "bce_sum": (lambda y, t: F.binary_cross_entropy(torch.sigmoid(y), t, reduction="sum"),
                [torch.randn(4, 6), torch.rand(4, 6)]),
    "group_norm_2d_input": (nn.GroupNorm(3, 6), [torch.randn(4, 6)]),
    "hinge_embedding": (lambda y, t: F.hinge_embedding_loss(y, t, margin=0.5),
                        [torch.randn(4, 6), torch.randint(0, 2, (4, 6)).float() * 2 - 1]),
    # export/more.py
    "bilinear": (nn.Bilinear(6, 5, 3), [torch.randn(4, 6), torch.randn(4, 5)]),
    "bilinear_3d_no_bias": (lambda y, z, w: nn.functional.bilinear(y.reshape(2, 2, 6), z, w),
                            [torch.randn(4, 6), torch.randn(2, 2, 5), torch.randn(3, 6, 5)]),
    "take_along_dim_broadcast": (lambda y: torch.take_along_dim(
        y, torch.tensor([[5, 0, 1, 0]]), dim=1), [torch.randn(4, 6)]),
    "take_along_dim_flat": (lambda y: torch.take_along_dim(y, torch.argmax(y)),
                            [torch.randn(4, 6)]),
    "broadcast_to": (lambda y: torch.broadcast_to(y[:, :1], (4, 5)), [torch.randn(4, 6)]),
    "threshold": (nn.Threshold(0.3, -2.0), [torch.randn(4, 6)]),
    # 5 into 2 chunks: 3 and 2; 6 into 4: three of 2 (fewer chunks than asked)
    "chunk_uneven": (lambda y: torch.cat([c * (i + 1) for i, c in
                                          enumerate(torch.chunk(y[:, :5], 2, dim=1))], 1),
                     [torch.randn(4, 6)]),
    "chunk_fewer": (lambda y: torch.cat([c * (i + 1) for i, c in
                                         enumerate(torch.chunk(y, 4, dim=1))], 1),
                    [torch.randn(4, 6)]),
    "norm_inf": (lambda y: torch.norm(y, p=float("inf"), dim=-1), [torch.randn(4, 6)]),
    "norm_minus_inf": (lambda y: torch.norm(y, p=float("-inf"), dim=0, keepdim=True),
                       [torch.randn(4, 6)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_forward_and_training_step(daemon, name):
    case = CASES[name]
    fn, inputs = case[0], case[1]
    n = case[2] if len(case) > 2 else 6
    torch.manual_seed(5)
    m = Op(fn, n)
    ref = copy.deepcopy(m)
    x = inputs[0][:, :n] if inputs[0].shape[-1] >= n else inputs[0]
    args = [x] + inputs[1:]
    pm = poptorch.inferenceModel(m)
    try:
        out, _ = pm(*args)
        torch.testing.assert_close(out, ref(*args)[0], **T)
    finally:
        pm.destroy()

    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(*args)[1].backward()
    opt.step()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    try:
        pm(*args)
        torch.testing.assert_close(m.fc.weight, ref.fc.weight, **T)
    finally:
        pm.destroy()


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce(daemon, reduce):
    """torch.scatter(..., reduce=) with duplicate indices, a scalar and a tensor source
    (torch has no gradient for it: forward only)."""
    class S(nn.Module):
        def forward(self, y, i):
            return torch.scatter(y, 1, i, 1.5, reduce=reduce), \
                torch.scatter(y, 1, i, y[:, :2] * 2, reduce=reduce)

    y = torch.randn(4, 6)
    i = torch.tensor([[0, 0], [1, 5], [2, 2], [3, 0]])
    pm = poptorch.inferenceModel(S())
    try:
        for got, want in zip(pm(y, i), S()(y, i)):
            torch.testing.assert_close(got, want, **T)
    finally:
        pm.destroy()


def test_bool_add_is_or(daemon):
    """bool + bool is a logical or in torch (the exporter wrote an Add of bools)."""
    class B(nn.Module):
        def forward(self, a, b):
            return a + b, (a + b) * b

    a = torch.tensor([True, False, True, False])
    b = torch.tensor([True, True, False, False])
    pm = poptorch.inferenceModel(B())
    try:
        for got, want in zip(pm(a, b), B()(a, b)):
            assert got.dtype == torch.bool and torch.equal(got, want)
    finally:
        pm.destroy()


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8])
def test_copy_into_integer_input(daemon, dtype):
    """Tensor.copy_ of floats into an integer input: torch converts (toward zero); the
    exporter's graph kept the floats (its output was refused as float)."""
    class C(nn.Module):
        def forward(self, x, y):
            return y.copy_(x) * 3

    x = torch.tensor([[1.7, -0.5, 2.2], [9.9, 0.0, 3.5]]).abs()
    y = torch.zeros(2, 3, dtype=dtype)
    pm = poptorch.inferenceModel(C())
    try:
        got, want = pm(x, y.clone()), C()(x, y.clone())
        assert got.dtype == want.dtype and torch.equal(got, want)
    finally:
        pm.destroy()


def test_integer_gather(daemon):
    class G(nn.Module):
        def forward(self, y, i):
            return torch.gather(y, 1, i)

    y = torch.randint(-50, 50, (3, 5))
    i = torch.randint(0, 5, (3, 4))
    pm = poptorch.inferenceModel(G())
    assert torch.equal(pm(y, i), G()(y, i))
    pm.destroy()


@pytest.mark.parametrize("op", [torch.all, torch.any])
def test_all_any_of_integers(daemon, op):
    """all/any of an integer tensor: non-zero is true (the exporter applied Not to int64,
    which the daemon refused)."""
    class M(nn.Module):
        def forward(self, y):
            return op(y), op(y, dim=1)

    y = torch.tensor([[0, 3, -1], [2, 5, 7]])
    pm = poptorch.inferenceModel(M())
    for got, want in zip(pm(y), M()(y)):
        assert torch.equal(got, want)
    pm.destroy()


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_ctc_loss(daemon, reduction):
    """nn.CTCLoss (the exporter has no aten::ctc_loss) as the daemon's
    ai.graphcore::CtcLoss: the loss and one SGD step against torch's."""
    T, N, C, S = 6, 3, 5, 3

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(2)
            self.fc = nn.Linear(4, C)
            self.ctc = nn.CTCLoss(blank=0, reduction=reduction)

        def forward(self, x, tg, il, tl):
            lp = torch.log_softmax(self.fc(x), dim=2)
            return self.ctc(lp, tg, il, tl)

    x = torch.randn(T, N, 4)
    tg = torch.randint(1, C, (N, S))
    il = torch.tensor([6, 5, 6])
    tl = torch.tensor([3, 2, 1])
    m = M()
    ref = copy.deepcopy(m)
    pm = poptorch.inferenceModel(m)
    torch.testing.assert_close(pm(x, tg, il, tl), ref(x, tg, il, tl), **T_)
    pm.destroy()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(x, tg, il, tl).backward()
    opt.step()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    pm(x, tg, il, tl)
    torch.testing.assert_close(m.fc.weight, ref.fc.weight, **T_)
    pm.destroy()


def _ctc_fd_grad(m, x, tg, il, tl, eps=1e-6):
    """The true gradient of torch's CTC loss w.r.t. m.fc.weight and m.fc.bias by central
    differences in float64 (torch's CPU backward is off at the last frame of a target that
    ends in the blank: it overwrites, rather than adds, the blank's alpha-beta sum there,
    and torch.autograd.gradcheck fails on it)."""
    m = copy.deepcopy(m).double()
    out = []
    for p in (m.fc.weight, m.fc.bias):
        g = torch.zeros_like(p)
        with torch.no_grad():
            for i in range(p.numel()):
                v = p.view(-1)[i].item()
                p.view(-1)[i] = v + eps
                hi = m(x.double(), tg, il, tl).item()
                p.view(-1)[i] = v - eps
                lo = m(x.double(), tg, il, tl).item()
                p.view(-1)[i] = v
                g.view(-1)[i] = (hi - lo) / (2 * eps)
        out.append(g.float())
    return out


@pytest.mark.parametrize("ends_in_blank", [False, True])
def test_ctc_loss_blank_in_targets(daemon, ends_in_blank):
    """Targets holding the blank inside their length (PopTorch's CTC tests draw them so;
    torch computes them): the loss against torch.nn.functional.ctc_loss, and one SGD step
    against torch's (targets not ending in the blank) or against the true gradient (ending
    in the blank, where torch's CPU backward is off; see _ctc_fd_grad)."""
    T, N, C = 8, 3, 4

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(3)
            self.fc = nn.Linear(5, C)

        def forward(self, x, tg, il, tl):
            lp = torch.log_softmax(self.fc(x), dim=2)
            return F.ctc_loss(lp, tg, il, tl, blank=0, reduction="mean")

    torch.manual_seed(4)
    x = torch.randn(T, N, 5)
    if ends_in_blank:
        tg = torch.tensor([[2, 1, 3, 0], [0, 3, 3, 0], [0, 0, 0, 0]])
    else:
        tg = torch.tensor([[2, 0, 0, 1], [0, 3, 3, 1], [0, 0, 1, 0]])
    il = torch.tensor([8, 7, 6])
    tl = torch.tensor([4, 4, 3])
    m = M()
    ref = copy.deepcopy(m)
    want = ref(x, tg, il, tl)
    assert torch.isfinite(want)
    pm = poptorch.inferenceModel(m)
    torch.testing.assert_close(pm(x, tg, il, tl), want, **T_)
    pm.destroy()
    lr = 0.5
    if ends_in_blank:
        gw, gb = _ctc_fd_grad(ref, x, tg, il, tl)
        ref(x, tg, il, tl).backward()
        assert not torch.allclose(ref.fc.weight.grad, gw, rtol=1e-3, atol=1e-4), \
            "torch's backward agrees with the true gradient here: the case tests nothing new"
        want_w, want_b = ref.fc.weight - lr * gw, ref.fc.bias - lr * gb
    else:
        opt = torch.optim.SGD(ref.parameters(), lr=lr)
        ref(x, tg, il, tl).backward()
        opt.step()
        want_w, want_b = ref.fc.weight, ref.fc.bias
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=lr))
    pm(x, tg, il, tl)
    torch.testing.assert_close(m.fc.weight, want_w.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(m.fc.bias, want_b.detach(), rtol=1e-4, atol=1e-5)
    pm.destroy()


def test_embedding_padding_idx_trains_as_torch(daemon):
    """nn.Embedding(padding_idx): the padding row gets no gradient, as in torch (the
    exporter's plain Gather trained it), its forward value (here made non-zero) unchanged;
    the gradient anchor equals torch's .grad, and two SGD steps give torch's weights."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(5)
            self.emb = nn.Embedding(6, 3, padding_idx=2)
            with torch.no_grad():
                self.emb.weight[2] = torch.tensor([0.5, -1.0, 2.0])

        def forward(self, x):
            y = self.emb(x)
            return y, poptorch.identity_loss((y * y).sum(), "none")

    x = torch.tensor([[0, 2, 1], [2, 5, 2]])
    m = M()
    ref = copy.deepcopy(m)
    opts = poptorch.Options()
    opts.anchorTensor("g", "Gradient___emb.weight")
    pm = poptorch.trainingModel(m, opts, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        want_y, loss = ref(x)
        loss.backward()
        opt.step()
        y, _ = pm(x)
        torch.testing.assert_close(y, want_y.detach(), **T_)
        torch.testing.assert_close(pm.getAnchoredTensor("g"), ref.emb.weight.grad, **T_)
    assert torch.all(ref.emb.weight.grad[2] == 0)
    torch.testing.assert_close(m.emb.weight, ref.emb.weight, **T_)
    pm.destroy()


T_ = dict(rtol=1e-4, atol=1e-5)
