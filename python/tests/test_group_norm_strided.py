"""PopART's session option groupNormStridedChannelGrouping (opts._Popart.set): GroupNorm
groups channels strided (channel c in group c % G) instead of torch's contiguous groups
(it was ignored: PopTorch's norms_test test_groupNorm_exfail expects other numbers)."""
import copy

import torch
import torch.nn.functional as F

import poptorch


def _strided(m, x):
    """torch's GroupNorm m of x with strided groups: the channels gathered group by
    group, normalised contiguously, put back."""
    c, grp = m.num_channels, m.num_groups
    perm = [k * grp + j for j in range(grp) for k in range(c // grp)]
    inv = sorted(range(c), key=perm.__getitem__)
    y = F.group_norm(x[:, perm], grp, m.weight[perm], m.bias[perm], m.eps)
    return y[:, inv]


def _opts():
    o = poptorch.Options()
    o._Popart.set("groupNormStridedChannelGrouping", True)  # pylint: disable=protected-access
    return o


def test_strided_group_norm_inference(daemon):
    torch.manual_seed(0)
    for shape in ((3, 10), (2, 12, 7)):
        m = torch.nn.GroupNorm(2 if shape[1] == 10 else 3, shape[1])
        with torch.no_grad():
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-1, 1)
        x = torch.randn(*shape) * torch.arange(1, shape[1] + 1).reshape(1, -1, *[1] * (len(shape) - 2))
        want = _strided(m, x)
        out = poptorch.inferenceModel(copy.deepcopy(m), _opts())(x)
        print(f"{shape}: max diff {(out - want).abs().max().item():.3g}, "
              f"from torch's contiguous groups {(out - m(x)).abs().max().item():.3g}")
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(out, m(x), atol=1e-1, rtol=0.1)
        # without the option: torch's contiguous grouping
        torch.testing.assert_close(poptorch.inferenceModel(copy.deepcopy(m))(x), m(x),
                                   rtol=1e-5, atol=1e-5)


def test_strided_group_norm_trains(daemon):
    """One SGD step of the weights equals torch's through the strided reference."""
    torch.manual_seed(1)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gn = torch.nn.GroupNorm(2, 6)

        def forward(self, x, t):
            y = self.gn(x)
            return y, poptorch.identity_loss(((y - t) ** 2).sum(), reduction="sum")

    m = M()
    ref = copy.deepcopy(m)
    x = torch.randn(4, 6, 5) * torch.arange(1, 7).reshape(1, 6, 1)
    t = torch.randn(4, 6, 5)
    loss = ((_strided(ref.gn, x) - t) ** 2).sum()
    loss.backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= 0.01 * p.grad
    pm = poptorch.trainingModel(m, _opts(), optimizer=torch.optim.SGD(m.parameters(), lr=0.01))
    _, got = pm(x, t)
    pm.copyWeightsToHost()
    torch.testing.assert_close(got, loss.detach(), rtol=1e-5, atol=1e-4)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-5)
    pm.destroy()
