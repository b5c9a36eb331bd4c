"""A model with more frozen weights than the daemon once accepted (64): 40 BatchNorm
layers freeze 80 running statistics (ResNet-50 freezes 108); it compiles for training and
a step moves the norms' running means, as torch's training mode does."""
import torch
import torch.nn as nn

import poptorch


class ManyNorms(nn.Module):
    def __init__(self, n=40, c=4):
        super().__init__()
        self.norms = nn.Sequential(*[nn.BatchNorm1d(c) for _ in range(n)])
        self.fc = nn.Linear(c, 3)

    def forward(self, x, y):
        out = self.fc(self.norms(x))
        return out, nn.functional.cross_entropy(out, y)


def test_eighty_frozen_running_statistics_train(daemon):
    torch.manual_seed(0)
    model = ManyNorms()
    frozen = [n for n, _ in model.named_buffers() if "running" in n]
    assert len(frozen) == 80
    x, y = torch.randn(8, 4) * 3 + 1, torch.randint(0, 3, (8,))
    ref = ManyNorms()
    ref.load_state_dict(model.state_dict())
    pm = poptorch.trainingModel(model, poptorch.Options(),
                                poptorch.optim.SGD(model.parameters(), lr=0.0))
    try:
        _, loss = pm(x, y)
        assert torch.isfinite(loss).all()
        pm.copyWeightsToHost()
        ref.train()
        ref(x, y)
        got = model.norms[0].running_mean
        diff = float((got - ref.norms[0].running_mean).abs().max())
        print(f"  running mean of norm 0: max difference {diff:.3g}")
        assert torch.allclose(got, ref.norms[0].running_mean, atol=1e-5)
        assert not torch.equal(got, torch.zeros(4))
    finally:
        pm.destroy()
