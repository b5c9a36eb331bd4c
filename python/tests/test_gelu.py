"""Exact GELU (F.gelu) in training: the daemon fuses the five nodes torch.onnx.export
writes (Div, Erf, Add, Mul, Mul) into one Gelu node whose backward reads only its input
(sim/nn/op_layernorm.c, sim/compile/fuse_norm.c). Its gradient against PyTorch's F.gelu
backward, over inputs spanning both tails: one SGD step (lr 1, so the weight moves by its
gradient) of a Linear layer followed by GELU and a fixed weighting of the outputs."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import poptorch


class GeluNet(nn.Module):
    def __init__(self, n=24):
        super().__init__()
        self.fc = nn.Linear(n, n)
        g = torch.Generator().manual_seed(3)
        self.register_buffer("r", torch.randn(n, generator=g))

    def forward(self, x):
        out = F.gelu(self.fc(x))
        return out, poptorch.identity_loss((out * self.r).sum(), reduction="sum")


def test_gelu_gradient_against_torch(daemon):
    torch.manual_seed(11)
    m = GeluNet()
    with torch.no_grad():
        m.fc.weight.mul_(4.0)       # pre-activations over about [-6, 6]: both tails
    ref = copy.deepcopy(m)
    x = torch.randn(16, 24)
    w0 = m.fc.weight.detach().clone()
    b0 = m.fc.bias.detach().clone()

    out, loss = ref(x)
    assert out.abs().max() > 3.0 and (ref.fc(x) < -3.0).any()
    loss.backward()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=1.0))
    try:
        got_out, got_loss = pm(x)
    finally:
        pm.destroy()
    torch.testing.assert_close(got_out, out.detach(), rtol=1e-6, atol=1e-6)
    gw = w0 - m.fc.weight.detach()
    gb = b0 - m.fc.bias.detach()
    dw = (gw - ref.fc.weight.grad).abs().max().item()
    db = (gb - ref.fc.bias.grad).abs().max().item()
    scale = ref.fc.weight.grad.abs().max().item()
    print(f"GELU gradient vs torch: max |dW| diff {dw:.3g} (max |dW| {scale:.3g}), "
          f"max |db| diff {db:.3g}")
    # float32 rounding of the sums over the batch and of the update w - 1 * g
    torch.testing.assert_close(gw, ref.fc.weight.grad, rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(gb, ref.fc.bias.grad, rtol=1e-5, atol=2e-5)
