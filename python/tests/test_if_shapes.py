"""An If whose condition is computed from shapes only (known at compile time) and whose
branches give different shapes: the exporter's "squeeze this dimension when it is 1"
(nn.LocalResponseNorm 1d/2d/3d). The daemon used to refuse it (both branches selected by a
Where must have one shape); now the compiler keeps the branch taken. Inference and 3 SGD
steps of training against the same model in plain PyTorch."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import poptorch

RTOL, ATOL = 1e-5, 1e-6


def close(a, b):
    print(f"max abs difference {(a - b).abs().max().item():.3g}")
    return a.shape == b.shape and torch.allclose(a, b, rtol=RTOL, atol=ATOL)


class LRN(nn.Module):
    def __init__(self, channels, size, **kw):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 1)
        self.lrn = nn.LocalResponseNorm(size, **kw)

    def forward(self, x, target=None):
        shape = x.shape
        h = self.conv(x.reshape(shape[0], shape[1], -1)).reshape(shape)
        y = self.lrn(h)
        if target is None:
            return y
        return y, F.mse_loss(y, target)


SHAPES = [((1, 5, 7), 3, {}), ((2, 5, 7, 7), 2, {}),
          ((1, 5, 7, 4, 3), 3, dict(alpha=0.002, beta=0.5, k=2.0))]


@pytest.mark.parametrize("shape,size,kw", SHAPES)
def test_local_response_norm_inference(daemon, shape, size, kw):
    torch.manual_seed(0)
    model = LRN(shape[1], size, **kw)
    pm = poptorch.inferenceModel(copy.deepcopy(model))
    x = torch.randn(*shape)
    assert close(pm(x), model(x).detach())
    pm.destroy()


@pytest.mark.parametrize("shape,size,kw", SHAPES)
def test_local_response_norm_training(daemon, shape, size, kw):
    torch.manual_seed(1)
    model = LRN(shape[1], size, **kw)
    ref = copy.deepcopy(model)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(3):
        x, t = torch.randn(*shape), torch.randn(*shape)
        opt_ref.zero_grad()
        y_ref, loss_ref = ref(x, t)
        loss_ref.backward()
        opt_ref.step()
        y, loss = pm(x, t)
        assert close(y, y_ref.detach())
        assert close(loss, loss_ref.detach())
    pm.copyWeightsToHost()
    assert close(model.conv.weight.detach(), ref.conv.weight.detach())
    pm.destroy()
